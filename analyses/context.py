"""What an analysis gets: the model index and one context object with cached accessors (DESIGN.md sec 10).

An analysis never scans folders or loads checkpoints itself. It declares what it reads (`Needs`) and
receives a `Context`:

    ctx.models(arch=..., corpus=...)    the trained recurrent models, one row each (pandas)
    ctx.baseline("ngram", corpus, n)    a KenLM or n-NN baseline's row
    ctx.corpus(row) / ctx.text(row, split)          the corpus and the raw bytes of a split
    ctx.predictions(row, split, snapshot=None)      Predictions of one checkpoint (snapshots included)
    ctx.snapshots(row)                  the training snapshots of a model (step, chars, file)
    ctx.metrics(row)                    a model's metrics.json (training curve, why it stopped, config)
    ctx.model(row, snapshot=None)       the CharLM of a checkpoint
    ctx.trace(row, split, start, length)            every internal on an excerpt, state warmed up before it
    ctx.cached(name, key, compute)      anything else (gradients, classifiers, probes), keyed by what it used
    ctx.settings                        the analysis's settings (module defaults < profile < --set)

Model identity. Every row carries its corpus key (the corpus bytes and split mode), its model id (a
hash of the full config), its group (the same without the seed: seed siblings), its variant (without
seed and dropout: where dropout is chosen on validation) and its recipe (the training settings every
model of one comparison shares). A context holds one recipe per corpus and family, so no analysis can
average or compare models that differ in anything but what it means to vary.

What an analysis cannot get raises `MissingInput`: its report section says so in one sentence, and its
CLI exits 2 with one line naming the command that produces it.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import corpora
from charlm import kinds
from charlm import predictions as predictions_module
from charlm.paths import artifacts_root, complete_metrics, config_hash
from charlm.predictions import CorruptArtifact, Predictions
from corpora import atomic
from corpora.errors import UserError

INDEX_COLUMNS = [
    "corpus", "corpus_key", "corpus_source", "corpus_splits", "family", "kind", "model_id", "arch", "layers", "size",
    "budget", "dropout", "seed", "n", "params", "chars_trained", "seconds", "val_loss", "group_id", "variant",
    "recipe", "snapshots", "digest", "dir",
]  # fmt: skip
CACHE_DIR = "_cache"  # under the artifacts root: what analyses compute from models, keyed by its inputs


def holds_results(root: Path | None = None) -> bool:
    """Whether the artifacts hold what an earlier run's analyses computed (a warm run reads it instead)."""
    return any((Path(root) if root is not None else artifacts_root()).joinpath(CACHE_DIR).glob("*/*.npz"))


class MissingInput(UserError):
    """An input an analysis needs is not there; the message names the command that produces it."""


@dataclass(frozen=True)
class Needs:
    """What an analysis reads, so the pipeline can build it and say what is missing."""

    ngram_n: tuple[int, ...] = ()  # KenLM orders (n = previous characters) the analysis reads
    nnn_n: tuple[int, ...] = ()  # n-NN orders the analysis reads
    corpora: tuple[str, ...] = ()  # registered corpora the analysis is about (empty: any corpus)
    snapshots: bool = False  # reads the predictions of training snapshots
    predictions: bool = True  # reads Predictions (False: checkpoints alone, so it runs beside the models' scoring)
    # of a configuration trained at several dropouts, whose Predictions it reads: "chosen" (the one validation chose,
    # Karpathy et al. sec 3.3: what `Context.models` gives), "chosen and 0" (dropout 0 beside it), "all"; a network
    # no analysis of a run reads is not scored (analyses.dropout_choice.unread_networks)
    dropouts: str = "chosen"


# ------------------------------------------------------------------------------------------ the index


def index_row(metrics: dict, directory: Path) -> dict:
    """One index row from a complete metrics.json, for neural nets, n-grams and n-NNs alike."""
    row = dict.fromkeys(INDEX_COLUMNS)
    row.update(kinds.of(metrics, directory).index_row(metrics, directory))  # the model's kind says what it is
    row.update(
        corpus=metrics.get("corpus") or directory.parent.name,
        corpus_key=metrics.get("corpus_key", metrics.get("corpus_sha256")),
        corpus_source=metrics.get("corpus_source") or metrics.get("corpus"),
        corpus_splits=metrics.get("corpus_splits", "contiguous"),
        model_id=metrics.get("model_id", directory.name),
        n=metrics.get("n"),
        params=metrics.get("params"),
        chars_trained=metrics.get("chars_trained"),
        seconds=metrics.get("seconds", metrics.get("build_seconds")),
        val_loss=metrics.get("best_val_loss"),
        digest=metrics.get("checkpoint_sha256") or metrics.get("model_bytes"),
        dir=str(directory),
    )
    return row


def model_index(root: Path | None = None) -> pd.DataFrame:
    """Every completed model under the artifacts root (metrics.json with "complete": true)."""
    root = Path(root) if root is not None else artifacts_root()
    rows = []
    for path in sorted(root.glob("*/*/metrics.json")):
        metrics = complete_metrics(path)
        if metrics is not None and metrics.get("kind") != "nnn-member":
            rows.append(index_row(metrics, path.parent))
    return pd.DataFrame(rows, columns=INDEX_COLUMNS)


def select_by_validation(index: pd.DataFrame) -> pd.DataFrame:
    """Mark the models analyses read: per variant, the dropout with the lowest validation loss (mean over seeds).

    Karpathy et al. sec 3.3: "cross-validate the amount of dropout for each model individually". Baselines
    are always selected (their own grids, e.g. the n-NN's hidden size, are chosen when they are trained).
    """
    index = index.copy()
    index["selected"] = True
    neural = index["family"] == "neural"
    if neural.any():
        # an adopted network has no validation loss: its one dropout is selected (inf ties resolve to the first)
        mean_val = index[neural].groupby(["variant", "dropout"])["val_loss"].mean().fillna(float("inf"))
        best = mean_val.groupby(level="variant").idxmin().map(lambda pair: pair[1])
        index.loc[neural, "selected"] = index.loc[neural, "dropout"].to_numpy() == (
            index.loc[neural, "variant"].map(best).to_numpy()
        )
    return index


def one_recipe_per_corpus(index: pd.DataFrame, hint: str) -> None:
    """A context compares models of one training recipe per corpus and family; more is one clear error."""
    for (_, family), group in index.groupby(["corpus_key", "family"]):
        recipes = group["recipe"].value_counts()
        if len(recipes) > 1:
            listing = ", ".join(f"{r} ({c} models)" for r, c in recipes.items())
            raise UserError(
                f"the artifacts hold {family} models of {len(recipes)} training recipes for corpus "
                f"'{group['corpus'].iloc[0]}' ({listing}); analyses never compare across recipes: {hint}"
            )


# ------------------------------------------------------------------------------------------ the context


class Context:
    """The models one analysis may read, and cached access to everything computed from them."""

    def __init__(
        self,
        index: pd.DataFrame,
        settings: dict | None = None,
        repair: bool = False,
        progress: bool = False,
        say: Callable[[str], None] = print,
        artifacts: Path | None = None,
        cache_size: int = 6,
    ):
        self.index = select_by_validation(index.drop(columns="selected", errors="ignore"))  # within these models
        self.settings = dict(settings or {})
        self.repair = repair  # damaged artifacts: recompute and say so (the pipeline), or name them (a CLI)
        self.progress = progress
        self.say = say
        self.artifacts = Path(artifacts) if artifacts is not None else artifacts_root()
        self._corpora: dict[tuple, corpora.Corpus] = {}
        self._models: OrderedDict = OrderedDict()
        self._predictions: OrderedDict = OrderedDict()
        self._cache_size = cache_size

    # ---------------------------------------------------------------- which models

    def models(
        self,
        arch: str | tuple[str, ...] | None = None,
        corpus: str | None = None,
        family: str = "neural",
        all_dropouts: bool = False,
        required: bool = True,
    ) -> pd.DataFrame:
        """Rows of the trained models (the dropout chosen on validation unless `all_dropouts`).

        `corpus` is a corpus key or name. Empty with `required` is a MissingInput naming how to train them.
        """
        rows = self.index[self.index["family"] == family]
        if not all_dropouts:
            rows = rows[rows["selected"]]
        if arch is not None:
            rows = rows[rows["arch"].isin([arch] if isinstance(arch, str) else list(arch))]
        if corpus is not None:
            rows = rows[(rows["corpus_key"] == corpus) | (rows["corpus"] == corpus)]
        if rows.empty and required:
            what = f"{'/'.join([arch] if isinstance(arch, str) else arch or [])} " if arch else ""
            where = f" on corpus '{corpus}'" if corpus else ""
            raise MissingInput(
                f"no trained {what}{family} models{where}: train them with `python -m reports --profile quick`"
                + (f" or `python -m charlm.train --corpus {corpus} --arch {arch}`" if isinstance(arch, str) else "")
            )
        return rows.reset_index(drop=True)

    def corpus_keys(self) -> list[str]:
        """The corpora of this context's models (keys), in a stable order."""
        return sorted(self.index["corpus_key"].dropna().unique(), key=lambda k: (self._name_of(k), k))

    def _name_of(self, key: str) -> str:
        return str(self.index.loc[self.index["corpus_key"] == key, "corpus"].iloc[0])

    def baseline(self, family: str, corpus_key: str, n: int, required: bool = True) -> pd.Series | None:
        """The row of a KenLM (`family="ngram"`) or n-NN baseline of order n on a corpus."""
        rows = self.index[
            (self.index["family"] == family) & (self.index["corpus_key"] == corpus_key) & (self.index["n"] == n)
        ]
        if rows.empty:
            if not required:
                return None
            command = "python -m charlm.ngram" if family == "ngram" else "python -m charlm.nnn"
            raise MissingInput(
                f"no {'KenLM n-gram' if family == 'ngram' else 'n-NN'} with n = {n} on corpus "
                f"'{self._name_of(corpus_key)}': build it with `{command} --corpus {self._name_of(corpus_key)} --n {n}`"
            )
        return rows.iloc[0]

    # ---------------------------------------------------------------- corpus

    def corpus(self, row_or_key) -> corpora.Corpus:
        """The corpus of a model row (or of a corpus key), loaded once and verified by its sha256."""
        if isinstance(row_or_key, str):
            row = self.index[self.index["corpus_key"] == row_or_key].iloc[0]
        else:
            row = row_or_key
        cache_key = (row["corpus_source"], row["corpus_splits"])
        if cache_key not in self._corpora:
            corpus = corpora.load(row["corpus_source"], split_mode=row["corpus_splits"])
            if corpus.key != row["corpus_key"]:
                raise UserError(
                    f"corpus '{row['corpus_source']}' has changed since {row['model_id']} was trained "
                    f"(key {corpus.key[:12]}..., expected {str(row['corpus_key'])[:12]}...)"
                )
            self._corpora[cache_key] = corpus
        return self._corpora[cache_key]

    def text(self, row_or_key, split: str = "test") -> bytes:
        """The raw bytes of a split (char-rnn splits included)."""
        corpus = self.corpus(row_or_key)
        return corpus.decode(corpus.split(split))

    # ---------------------------------------------------------------- predictions and checkpoints

    def metrics(self, row: pd.Series) -> dict:
        """A model's metrics.json: its training curve (`epochs`), why it stopped, its config."""
        return json.loads((Path(row["dir"]) / "metrics.json").read_text())

    def snapshots(self, row: pd.Series) -> pd.DataFrame:
        """The training snapshots of a neural model: step, chars, file (relative to its folder)."""
        metrics = json.loads((Path(row["dir"]) / "metrics.json").read_text())
        snaps = pd.DataFrame(metrics.get("snapshots") or [], columns=["step", "chars", "file", "sha256"])
        if snaps.empty:
            raise MissingInput(
                f"{row['model_id']} has no training snapshots: train it with charlm.train (snapshots > 0)"
            )
        return snaps

    def _checkpoint(self, row: pd.Series, snapshot: str | None) -> Path:
        directory = Path(row["dir"])
        return directory / snapshot if snapshot else directory / "checkpoint.pt"

    def predictions(self, row: pd.Series, split: str = "test", snapshot: str | None = None) -> Predictions:
        """Predictions of a model's final checkpoint (or of `snapshot`, a file from `snapshots(row)`).

        Computed on first use and stored beside the checkpoint, keyed by its digest. Full distributions are kept
        only at `charlm.predictions.sample_positions`; the exact columns cover every position, but for a snapshot,
        which is scored on the sample alone (charlm.predict, `sample_only`).
        """
        key = (row["model_id"], row["dir"], split, snapshot)
        if key in self._predictions:
            self._predictions.move_to_end(key)
            return self._predictions[key]
        path = kinds.kind(row["kind"]).predictions(row, self.corpus(row), split, snapshot, self.repair, self.progress)
        try:
            preds = predictions_module.load(path)
        except CorruptArtifact:
            if not self.repair:
                raise
            path.unlink(missing_ok=True)
            return self.predictions(row, split, snapshot)
        self._predictions[key] = preds
        while len(self._predictions) > self._cache_size:
            self._predictions.popitem(last=False)
        return preds

    def model(self, row: pd.Series, snapshot: str | None = None):
        """The CharLM of a neural model's final checkpoint (or of a snapshot), in eval mode."""
        from charlm.checkpoint import load_checkpoint

        path = self._checkpoint(row, snapshot)
        if path not in self._models:
            self._models[path] = load_checkpoint(path)
            while len(self._models) > self._cache_size:
                self._models.popitem(last=False)
        return self._models[path]

    def trace(
        self,
        row: pd.Series,
        split: str = "test",
        start: int = 0,
        length: int = 1000,
        warmup: int = 1000,
        snapshot: str | None = None,
    ) -> dict[str, np.ndarray]:
        """Every internal of every layer over split[start : start + length], each (length, H) float32.

        Names are `layers.{l}.{internal}` (see CharLM.trace). Row t is the state *after* reading character
        start + t. The state is warmed up on the `warmup` characters before `start` (from zero at theirs).
        Forward only and cheap, so never stored.
        """
        import torch

        ids = self.corpus(row).split(split)
        if length < 1 or start < 0:
            raise UserError(f"an excerpt needs a length of at least 1 and a start of at least 0, got {length}, {start}")
        if start + length > ids.size:  # the split is too short for what the analysis reads: its section says so
            raise MissingInput(
                f"an excerpt of {length:,} characters from {start:,} does not fit the {split} split "
                f"({ids.size:,} characters)"
            )
        model = self.model(row, snapshot)
        with torch.no_grad():
            state = None
            lo = max(0, start - warmup)
            if lo < start:
                _, state = model.forward_with_state(torch.from_numpy(ids[lo:start].astype(np.int64))[None])
            excerpt = torch.from_numpy(ids[start : start + length].astype(np.int64))[None]
            _, cache, _ = model.run_with_cache(excerpt, state)
        return {name: value[0].float().numpy() for name, value in cache.items()}

    # ---------------------------------------------------------------- anything else

    def _cache_path(self, name: str, key: dict) -> Path:
        return self.artifacts / CACHE_DIR / name / f"{config_hash(key, 16)}.npz"

    def is_cached(self, name: str, key: dict) -> bool:
        """Whether `cached(name, key, ...)` would read its arrays instead of computing them (unless damaged)."""
        return self._cache_path(name, key).is_file()

    def cached(self, name: str, key: dict, compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """Arrays computed from models (gradients, classifier results, probe scores), stored under
        artifacts/_cache/<name>/ and keyed by `key` (everything they were computed from: model ids,
        checkpoint digests, settings). A damaged file is recomputed with `repair`, else named."""
        path = self._cache_path(name, key)
        if path.exists():
            try:
                with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as f:
                    return {k: f[k] for k in f.files}
            except (ValueError, OSError, EOFError, KeyError) as err:
                if not self.repair:
                    raise CorruptArtifact(path, f"{type(err).__name__}") from None
                self.say(f"{path} is damaged: recomputing it")
                path.unlink(missing_ok=True)
        arrays = {k: np.asarray(v) for k, v in compute().items()}
        with atomic.atomic_path(path, suffix=".tmp.npz") as tmp:
            np.savez(tmp, **arrays)
        return arrays

    @staticmethod
    def digest(row: pd.Series) -> str:
        """What a cached result computed from this model must be keyed by: its id and final checkpoint."""
        return f"{row['model_id']}:{row['digest']}"

    # ---------------------------------------------------------------- where the models stand

    def standing(self, split: str = "test") -> pd.DataFrame:
        """Each selected neural model's test cross-entropy beside the KenLM orders it beats (Karpathy Table 2)."""
        ngram_nll = {}  # corpus_key -> {n: mean nats/char}: every order read once per corpus, not once per model
        rows = []
        for _, model in self.models(required=False).iterrows():
            key = model["corpus_key"]
            if key not in ngram_nll:
                grams = self.index[(self.index["family"] == "ngram") & (self.index["corpus_key"] == key)]
                ngram_nll[key] = {
                    int(g["n"]): float(self.predictions(g, split).nll.mean()) for _, g in grams.iterrows()
                }
            scores = ngram_nll[key]
            ce = float(self.predictions(model, split).nll.mean())
            rows.append(
                {
                    "corpus": model["corpus"], "model_id": model["model_id"], "arch": model["arch"],
                    "layers": model["layers"], "size": model["size"], "budget": model["budget"],
                    "params": model["params"], "chars_trained": model["chars_trained"], "ce_nats": ce,
                    "beats_ngram_up_to_n": beats_up_to(ce, scores), "ngram_orders": len(scores),
                }
            )  # fmt: skip
        return pd.DataFrame(rows)


def beats_up_to(ce: float, ngram_nll: dict[int, float]) -> int:
    """The largest n such that a model of cross-entropy `ce` beats every n-gram order up to n (0: not even the
    lowest). Not the largest order beaten: an n-gram's test CE can rise again past some n (War and Peace's does
    after n = 7, too sparse), and a model beating n = 9 but not n = 7 does not "beat the n-grams up to 9"."""
    best = 0
    for n, nll in sorted(ngram_nll.items()):
        if nll <= ce:
            break
        best = n
    return best
