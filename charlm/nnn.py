"""The n-NN baseline of Karpathy et al. (2016) sec 4.3: a one-hidden-layer tanh network on the last n characters.

"A fully-connected neural network with one hidden layer and tanh nonlinearities. The input to the
network is a sparse binary vector of dimension nK that concatenates the one-of-K encodings of n
consecutive characters. We optimize the model as described in Section 3.3 and cross-validate the
size of the hidden layer." (n = 1..6, Table 2.)

    python -m charlm.nnn --corpus warpeace --n 3 --max-chars 20000000

Recipe (sec 3.3, the field meanings and defaults of charlm.train.TrainConfig): uniform init in
[-0.08, 0.08], RMSProp lr 2e-3 alpha 0.95, minibatches of 10,000 positions (the 100 x 100
characters of the recurrent recipe; positions are shuffled, the model has no state to carry),
up to 50 epochs, lr x0.95 per epoch after epoch 10, gradient-norm clipping at 5, early stopping on
the validation loss (patience 5 epochs), an optional character budget per trained network.
The hidden size is chosen on the validation split from a grid (default 64, 256, 512): every size
is trained, the lowest validation loss wins, and metrics.json records the whole grid.

Budget note (measured on War and Peace, 2 shared CPU cores): with 10,000-position minibatches the
n-NN converges slowly per character (about 260 updates per epoch; 3-NN, hidden 256: val 2.06 after
5M characters), so a run of minutes lands far above the paper. Sec 3.3's "batch size 100" read
literally for a feed-forward net is 100 positions; at equal characters `batch_chars=1000` reached
1.77 and 100 reached 1.74 (1000 was also the fastest per character on this CPU). Budgeted runs
should pass a smaller `batch_chars`; the default keeps the recurrent recipe's 10,000.

The first n - 1 positions of a split have fewer than n previous characters: the missing ones are
a dedicated "no character" input (an all-zero one-hot block), so row t of the Predictions predicts
split[t + 1] from split[max(0, t + 1 - n) : t + 1] for every t >= 0, as the contract requires.

The network itself, its input rows and its scoring are charlm/nnn_model.py; this module is its configuration, its
training and its Predictions. Training goes through charlm.train's one loop (`fit`), so an n-NN resumes after an
interruption, stops with exit code 3 when it diverges, and shows the same progress as the recurrent models.

Artifacts: `artifacts/<corpus>/nnn-n{n}-{hash}/` with `H{size}/checkpoint.pt` + `H{size}/metrics.json`
(+ `H{size}/state.pt` for resuming) per grid member, `checkpoint.pt` (the chosen size), `metrics.json`
("complete": true once the grid is done) and `predictions/checkpoint/<split>.npz`.
Checkpoints are a plain config + state_dict, loaded with `torch.load(..., weights_only=True)`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F

import corpora
from corpora import atomic
from corpora.errors import UserError, add_corpus_arguments, parse_int_list, run_cli

from . import predictions
from .checkpoint import file_sha256, load_payload, save_payload
from .loop import OPTIMIZERS, Task, TrainingDiverged, fit
from .nnn_model import (
    NNN,
    context_ids,
    context_rows,
    distinct_logprobs,
    evaluate,
    load_nnn,
)
from .paths import complete_metrics, config_hash, model_dir, predictions_path
from .predict import as_corpus, cached_predictions, say_to_stderr
from .train import EXIT_DIVERGED, TrainConfig, require_positive

FORMAT = 1
_RECIPE = {f.name: f.default for f in fields(TrainConfig)}  # the recurrent models' recipe, one source of truth
DEFAULT_GRID = (64, 256, 512)
TARGETS = ("positions", "contexts", "distinct")
# settings added after format 1, with their defaults (see identity)
_LATER_SETTINGS = {"epoch_chars": None, "converge_delta": 0.0, "converge_window": 3, "optimizer": "rmsprop"}


@dataclass(frozen=True)
class NNNConfig:
    corpus: str  # registered corpus name or a path to a text file
    n: int  # previous characters the network sees
    hidden_grid: tuple[int, ...] = DEFAULT_GRID  # hidden sizes cross-validated on the val split
    seed: int = 0
    epochs: int = _RECIPE["epochs"]
    max_chars: int | None = None  # character budget for each network of the grid (None: epochs only)
    batch_chars: int = _RECIPE["batch_size"] * _RECIPE["unroll"]  # positions per minibatch (10,000)
    lr: float = _RECIPE["lr"]
    rms_alpha: float = _RECIPE["rms_alpha"]
    lr_decay: float = _RECIPE["lr_decay"]  # charlm.loop.learning_rate reads lr, lr_decay, decay_after
    decay_after: int = _RECIPE["decay_after"]
    grad_clip: float = _RECIPE["grad_clip"]
    patience: int = _RECIPE["patience"]
    eval_chars: int | None = _RECIPE["eval_chars"]  # validate on a prefix of the val split (None: all)
    targets: str = "positions"  # "positions": each sampled position's next character, as sec 3.3 trains; "contexts":
    # the next-character distribution of that position's context in the train split (same batches, same expected
    # gradient, less noise: the objective is the same likelihood, see NNNTask); "distinct": minibatches of the
    # train split's distinct contexts, each with that distribution and weighted by its count (the same likelihood
    # again; a pass is one row per distinct context, 200x fewer rows than positions at n = 3 on War and Peace)
    epoch_chars: int | None = None  # positions per n-NN "epoch", the unit of validation, early stopping and lr decay
    # (None: one pass over the train split, as sec 3.3). Shorter epochs let the recipe's per-epoch decay anneal the
    # lr within the few passes an n-NN needs; the passes still draw every position once each (see NNNTask). With
    # targets "distinct" it counts distinct-context rows drawn, and so does max_chars

    converge_delta: float = 0.0  # converged: stop once validation gains < this (nats/epoch) over converge_window
    converge_window: int = 3  # epochs the convergence test averages over (charlm.loop.converged)
    optimizer: str = "rmsprop"  # "rmsprop": sec 3.3's (lr, rms_alpha); "adam": Adam at lr (betas 0.9, 0.999), which
    # with larger minibatches of distinct contexts gets closer to KenLM per CPU second (README, "n-NN baselines")

    # With `snapshots=True` (shipped n-NNs, reports.ship) fit keeps the weights after the first step: the provenance
    # test retrains a shipped n-NN to it (tests/test_shipped.py). Class constants, not settings: no id changes.
    snapshots: ClassVar[int] = 1
    snapshot_epochs: ClassVar[float] = 1.0

    def validate(self) -> None:
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 1:
            raise UserError(f"n must be a positive integer, got {self.n!r}")
        if not self.hidden_grid:
            raise UserError("the hidden-size grid is empty")
        for h in self.hidden_grid:
            if not isinstance(h, int) or isinstance(h, bool) or h < 1:
                raise UserError(f"hidden sizes must be positive integers, got {h!r}")
        require_positive(self, "epochs", "batch_chars", "patience", "lr", "converge_window")
        if self.converge_delta < 0:
            raise UserError(f"converge_delta must be 0 (off) or positive, got {self.converge_delta}")
        if self.epoch_chars is not None:
            require_positive(self, "epoch_chars")
        if self.optimizer not in OPTIMIZERS:
            raise UserError(f"n-NN optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}")
        if self.targets not in TARGETS:
            raise UserError(f"n-NN targets must be one of {', '.join(TARGETS)}, got {self.targets!r}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["hidden_grid"] = list(self.hidden_grid)
        return d

    def identity(self, corpus_key: str, without: tuple[str, ...] = ()) -> dict:
        """What the id hashes: every setting but the corpus string, plus `Corpus.key` (its bytes and split mode).

        A setting added after format 1 is left out at its default, so the models trained before it keep their ids.
        """
        settings = {k: v for k, v in self.to_dict().items() if k != "corpus" and k not in without}
        for name, default in _LATER_SETTINGS.items():
            if settings.get(name, default) == default:
                settings.pop(name, None)
        return {**settings, "kind": "nnn", "format": FORMAT, "corpus_key": corpus_key}

    def model_id(self, corpus_key: str) -> str:
        return f"nnn-n{self.n}-{config_hash(self.identity(corpus_key))}"

    def group_id(self, corpus_key: str) -> str:
        """The same hash without the seed (seed siblings share it)."""
        return config_hash(self.identity(corpus_key, without=("seed",)))


def _payload(model: NNN, corpus: corpora.Corpus, config: NNNConfig, model_id: str, **extra) -> dict:
    return {
        "format": FORMAT,
        "kind": "nnn",
        "config": model.config(),
        "state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "vocab": [int(b) for b in corpus.vocab],
        "corpus_sha256": corpus.sha256,
        "corpus": corpus.name,
        "corpus_key": corpus.key,
        "corpus_splits": corpus.split_mode,
        "model_id": model_id,
        "nnn_config": config.to_dict(),
        **extra,
    }


def context_targets(rows: torch.Tensor, nxt: np.ndarray, vocab_size: int):
    """The train split's distinct contexts and their next-character distributions, as a sparse table.

    Returns ctx_of (N,) the context of each position, and, sorted by context, pair_next (P,) and pair_prob (P,) the
    next characters seen after it with their empirical probabilities, and offsets (C + 1,) into those pairs.
    """
    ctx_of = context_ids(rows)
    pairs, counts = np.unique(ctx_of * vocab_size + nxt, return_counts=True)
    pair_ctx, pair_next = pairs // vocab_size, pairs % vocab_size
    totals = np.bincount(ctx_of)
    offsets = np.searchsorted(pair_ctx, np.arange(totals.size + 1))
    return ctx_of, pair_next, (counts / totals[pair_ctx]).astype(np.float32), offsets


class NNNTask(Task):
    """Shuffled minibatches of positions (the model has no state to carry); each pass's order comes from
    (seed, pass), so a resumed run draws the same batches without saving a generator.

    With `targets="contexts"` the batches are the same, but each position's target is the distribution of the
    characters that follow its context in the train split instead of the one that followed there. Summed over the
    split both losses are the same likelihood (a test checks it), and the gradient of a batch has the same
    expectation; it is less noisy. Measured on War and Peace (n = 3, hidden 256, 5,000 batches of 512 at lr 5e-3,
    the same batches): test 1.753 nats with positions, 1.614 with contexts, in the same time (17 s, 19 s).

    With `targets="distinct"` the rows drawn are the train split's distinct contexts, one each per pass, each with
    its next-character distribution as target and its count in the split as weight: a batch's loss is the
    count-weighted mean, so a batch holding every context is again the same likelihood as every position (a test
    checks it). Positions that share a context give one row instead of thousands (War and Peace: 13,073 rows for
    2.6M positions at n = 3, 360K at n = 6), so a pass costs that much less. Measured on War and Peace (n = 3,
    hidden 256, batches of 512, lr 5e-3): validation 1.559 after 15.6M rows (5 minutes of a shared core), where
    40M positions of `contexts` reached 1.60.
    """

    def __init__(self, config: NNNConfig, hidden: int, corpus: corpora.Corpus, model_id: str):
        V = corpus.vocab_size
        train_ids = corpus.split("train")
        val_ids = corpus.split("val")[: config.eval_chars] if config.eval_chars else corpus.split("val")
        if train_ids.size < 2 or val_ids.size < 2:
            raise UserError(
                f"corpus '{corpus.name}' is too small: train and val splits need at least 2 characters each"
            )
        self.x_train = context_rows(train_ids, config.n, V)  # (N, n)
        self.y_train = torch.from_numpy(train_ids[1:].astype(np.int64))
        self.x_val, self.y_val = context_rows(val_ids, config.n, V), torch.from_numpy(val_ids[1:].astype(np.int64))
        self.positions = self.x_train.shape[0]
        self.soft, self.weights = None, None
        if config.targets in ("contexts", "distinct"):
            self.soft = context_targets(self.x_train, train_ids[1:].astype(np.int64), V)
        if config.targets == "distinct":
            ctx_of = self.soft[0]
            first = np.empty(ctx_of.max() + 1, dtype=np.int64)
            first[ctx_of] = np.arange(ctx_of.size)  # any position of a context: they all hold the same row
            self.x_train = self.x_train[torch.from_numpy(first)]  # (C, n) one row per distinct context
            self.weights = torch.from_numpy(np.bincount(ctx_of).astype(np.float32))  # (C,) its count in the split
            self.positions = self.x_train.shape[0]  # the rows a pass draws
        self.batch = min(config.batch_chars, self.positions)
        self.steps_per_pass = math.ceil(self.positions / self.batch)
        self.steps_per_epoch = math.ceil(config.epoch_chars / self.batch) if config.epoch_chars else self.steps_per_pass
        self.chars_per_step = self.batch
        self.divergence_loss = 3 * math.log(V) + 1
        self.config, self.hidden, self.corpus, self.model_id = config, hidden, corpus, model_id
        torch.manual_seed(config.seed)
        self.model = NNN(config.n, V, hidden)
        self.order, self.order_epoch = None, None

    def batch_positions(self, epoch: int, batch: int) -> torch.Tensor:
        """The train positions of minibatch `batch` of epoch `epoch`: a pass over the positions is one shuffled order
        drawn from (seed, pass), cut into minibatches; epochs of `epoch_chars` positions cut the passes in turn."""
        passes, step = divmod(epoch * self.steps_per_epoch + batch, self.steps_per_pass)
        if self.order_epoch != passes:
            generator = torch.Generator().manual_seed(self.config.seed * 1_000_003 + passes)
            self.order, self.order_epoch = torch.randperm(self.positions, generator=generator), passes
        return self.order[step * self.batch : (step + 1) * self.batch]

    def loss(self, epoch, batch):
        idx = self.batch_positions(epoch, batch)
        logits = self.model(self.x_train[idx])  # (B, V)
        if self.soft is None:
            return F.cross_entropy(logits, self.y_train[idx])
        if self.weights is None:  # "contexts": rows are positions
            return -(self._soft_targets(self.soft[0][idx.numpy()]) * torch.log_softmax(logits, -1)).sum(1).mean()
        cross = -(self._soft_targets(idx.numpy()) * torch.log_softmax(logits, -1)).sum(1)  # (B,) rows are contexts
        weight = self.weights[idx]
        return (cross * weight).sum() / weight.sum()

    def _soft_targets(self, ctx: np.ndarray) -> torch.Tensor:
        """(B, V) the next-character distribution of each of the contexts `ctx` (ids into the table)."""
        _, pair_next, pair_prob, offsets = self.soft
        lengths = offsets[ctx + 1] - offsets[ctx]
        row = np.repeat(np.arange(ctx.size), lengths)
        pair = np.repeat(offsets[ctx] - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
        targets = torch.zeros(ctx.size, self.model.vocab_size)
        targets[torch.from_numpy(row), torch.from_numpy(pair_next[pair])] = torch.from_numpy(pair_prob[pair])
        return targets

    def validate(self):
        return evaluate(self.model, self.x_val, self.y_val)

    def checkpoint(self, **extra):
        extra = {k: v for k, v in extra.items() if k not in ("model_id", "kind")}  # the member's metrics identity
        return _payload(self.model, self.corpus, self.config, self.model_id, hidden=self.hidden, **extra)

    def describe(self):
        # the fixed zero "no character" row is no parameter
        return {"hidden": self.hidden, "params": sum(p.numel() for p in self.model.parameters()) - self.hidden}


def _train_one(
    config: NNNConfig, hidden: int, corpus: corpora.Corpus, out: Path, model_id: str, progress: bool,
    snapshots: bool = False, stop_after_steps: int | None = None,
) -> dict | None:  # fmt: skip
    """Train one hidden size through charlm.train's loop; out/checkpoint.pt is the best on val.

    `snapshots` keeps out/snapshots/step0000001.pt; `stop_after_steps` ends the run there, unfinished (None returned).
    """
    task = NNNTask(config, hidden, corpus, model_id)
    member_id = f"{model_id}-H{hidden}"
    fit(
        task, config, out, member_id, {"model_id": member_id, "kind": "nnn-member"}, progress, snapshots=snapshots,
        stop_after_steps=stop_after_steps,
    )  # fmt: skip
    if stop_after_steps is not None:
        return None
    record = complete_metrics(out / "metrics.json")
    record["chars_per_s"] = record["chars_trained"] / record["seconds"] if record["seconds"] > 0 else None
    return record


def model_folder(corpus: corpora.Corpus, config: NNNConfig) -> Path:
    return model_dir(corpus.artifact_name, config.model_id(corpus.key))


def train_nnn(
    corpus: str | corpora.Corpus,
    n: int,
    hidden_grid=DEFAULT_GRID,
    max_chars: int | None = None,
    epochs: int = _RECIPE["epochs"],
    seed: int = 0,
    progress: bool = True,
    snapshots: bool = False,
    **recipe,
) -> Path:
    """Train the grid of hidden sizes, keep the best on val; returns the artifact folder (cached when complete).

    `recipe` overrides other NNNConfig fields (batch_chars, lr, patience, eval_chars, ...). `snapshots` keeps each
    member's weights after its first step (H{size}/snapshots/step0000001.pt: what a shipped n-NN is proven by).
    """
    corpus = as_corpus(corpus)
    if isinstance(hidden_grid, int):
        hidden_grid = (hidden_grid,)
    config = NNNConfig(
        corpus=corpus.source or corpus.name, n=n, hidden_grid=tuple(hidden_grid), seed=seed, epochs=epochs,
        max_chars=max_chars, **recipe,
    )  # fmt: skip
    return train_config(config, corpus, progress, snapshots)


def train_config(config: NNNConfig, corpus: corpora.Corpus, progress: bool = True, snapshots: bool = False) -> Path:
    """`train_nnn` for a whole NNNConfig (what reports.ship plans): its artifact folder, trained when not complete."""
    config.validate()
    mid = config.model_id(corpus.key)
    out = model_folder(corpus, config)
    if complete_metrics(out / "metrics.json") and (out / "checkpoint.pt").is_file():
        return out
    grid = []
    for hidden in config.hidden_grid:
        member = out / f"H{hidden}"
        record = complete_metrics(member / "metrics.json")
        if record is None or not (member / "checkpoint.pt").is_file():
            record = _train_one(config, hidden, corpus, member, mid, progress, snapshots)
        grid.append(record)
    best = min(grid, key=lambda r: r["best_val_loss"])
    payload = load_payload(out / f"H{best['hidden']}" / "checkpoint.pt")
    save_payload(out / "checkpoint.pt", payload)
    keep = ("hidden", "params", "best_val_loss", "chars_trained", "chars_per_s", "seconds", "stopped", "epochs")
    atomic.write_json(
        out / "metrics.json",
        {
            "model_id": mid,
            "group_id": config.group_id(corpus.key),
            "kind": "nnn",
            **corpus.identity(),
            "config": config.to_dict(),
            "n": config.n,
            "best_hidden": best["hidden"],
            "best_val_loss": best["best_val_loss"],
            "params": best["params"],
            "chars_trained": best["chars_trained"],
            "grid": [{k: r.get(k) for k in keep} for r in grid],
            "seconds": round(sum(r["seconds"] for r in grid), 2),
            "checkpoint_sha256": file_sha256(out / "checkpoint.pt"),
            "complete": True,
        },
    )
    return out


def predict(
    corpus: str | corpora.Corpus, n: int, split: str = "test", progress: bool = True, repair: bool = True,
    **train_kwargs,
) -> Path:  # fmt: skip
    """Predictions of one split by the chosen n-NN (training what is missing); returns the .npz path (cached).

    Keyed by the chosen checkpoint's sha256; a damaged file is recomputed with `repair`, else named in a UserError.
    """
    corpus = as_corpus(corpus)
    folder = train_nnn(corpus, n, progress=progress, **train_kwargs)
    return predict_folder(folder, corpus, split, repair)


def predict_folder(folder: Path, corpus: corpora.Corpus, split: str = "test", repair: bool = True) -> Path:
    """Predictions of one split by the trained n-NN in `folder`, keyed by its checkpoint's sha256."""
    ids = corpus.split(split)
    out = predictions_path(folder, split)
    digest = file_sha256(folder / "checkpoint.pt")
    if cached_predictions(out, digest, need_complete=False, repair=repair, say=say_to_stderr) is not None:
        return out
    model = load_nnn(folder / "checkpoint.pt")
    if model.meta.get("corpus_sha256") != corpus.sha256:
        raise UserError(f"checkpoint in {folder} was not trained on corpus '{corpus.name}' (sha256 mismatch)")
    mid = model.meta.get("model_id", folder.name)
    logp, ctx_of = distinct_logprobs(model, ids)  # each distinct context once; stored at the sample (predict.py)
    positions = predictions.sample_positions(ids.size - 1)
    targets = ids[1:].astype(np.int64)
    preds = predictions.from_parts(logp[ctx_of, targets], targets, logp[ctx_of[positions]], positions, mid, digest)
    return predictions.save(out, preds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m charlm.nnn",
        description="Train the n-NN baseline (one tanh hidden layer on the "
        "one-hot of the last n characters; hidden size cross-validated), score a split, print its cross-entropy.",
    )
    add_corpus_arguments(parser)
    parser.add_argument("--n", required=True, help="previous characters seen; several as 1,2,3")
    parser.add_argument(
        "--hidden",
        default=",".join(map(str, DEFAULT_GRID)),
        help="hidden sizes to cross-validate (default %(default)s)",
    )
    parser.add_argument(
        "--max-chars", type=int, default=None, help="training-character budget per network (default: epochs only)"
    )
    parser.add_argument(
        "--epochs", type=int, default=_RECIPE["epochs"], help="passes over the train split (default %(default)s)"
    )
    parser.add_argument(
        "--batch-chars",
        type=int,
        default=_RECIPE["batch_size"] * _RECIPE["unroll"],
        help="positions per minibatch (default %(default)s = the recurrent recipe's 100 x 100 characters)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default %(default)s)")
    parser.add_argument("--lr", type=float, default=_RECIPE["lr"], help="learning rate (default %(default)s)")
    parser.add_argument(
        "--optimizer", default="rmsprop", choices=OPTIMIZERS,
        help="rmsprop (sec 3.3's, alpha 0.95) or adam (default %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--epoch-chars", type=int, default=None,
        help="positions per epoch, the unit of validation, early stopping and lr decay (default: one pass)",
    )  # fmt: skip
    parser.add_argument(
        "--lr-decay", type=float, default=_RECIPE["lr_decay"], help="lr factor per epoch (default %(default)s)"
    )
    parser.add_argument(
        "--decay-after", type=int, default=_RECIPE["decay_after"],
        help="epochs at the full lr before the decay starts (default %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--converge-delta", type=float, default=0.0,
        help="stop once validation gains less than this (nats/epoch) over 3 epochs (default %(default)s: off)",
    )  # fmt: skip
    parser.add_argument(
        "--targets", default="positions", choices=TARGETS,
        help="what a sampled position is trained towards: its next character (positions, as sec 3.3) or its "
        "context's next-character distribution in the train split (contexts: same likelihood, less noise), or "
        "minibatches of the distinct contexts weighted by their counts (distinct: the same likelihood again, a "
        "pass is one row per distinct context; --epoch-chars and --max-chars then count those rows)",
    )  # fmt: skip
    parser.add_argument("--split", default="test", choices=corpora.SPLITS, help="split to score (default %(default)s)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument(
        "--resamples", type=int, default=100, help="bootstrap resamples for the std (default %(default)s)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    ns = parse_int_list(args.n, "--n")
    grid = tuple(parse_int_list(args.hidden, "--hidden"))
    for n in ns:
        NNNConfig(
            args.corpus, n, grid, args.seed, args.epochs, args.max_chars, args.batch_chars, lr=args.lr,
            lr_decay=args.lr_decay, decay_after=args.decay_after, targets=args.targets, epoch_chars=args.epoch_chars,
            converge_delta=args.converge_delta, optimizer=args.optimizer,
        ).validate()  # fmt: skip
    if args.threads:
        torch.set_num_threads(args.threads)
    corpus = corpora.load(args.corpus, split_mode=args.splits)
    for n in ns:
        try:
            path = predict(
                corpus, n, args.split, progress=not args.quiet, repair=False, hidden_grid=grid,
                max_chars=args.max_chars, epochs=args.epochs, seed=args.seed, batch_chars=args.batch_chars, lr=args.lr,
                lr_decay=args.lr_decay, decay_after=args.decay_after, targets=args.targets,
                epoch_chars=args.epoch_chars, converge_delta=args.converge_delta, optimizer=args.optimizer,
            )  # fmt: skip
        except TrainingDiverged as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_DIVERGED
        metrics = json.loads((path.parents[2] / "metrics.json").read_text())
        preds = predictions.load(path)
        grid_text = ", ".join(f"H{r['hidden']} {r['best_val_loss']:.4f}" for r in metrics["grid"])
        print(
            f"{preds.model_id}: hidden {metrics['best_hidden']} (val: {grid_text}); "
            f"{preds.summary(args.split, args.resamples)} -> {path}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
