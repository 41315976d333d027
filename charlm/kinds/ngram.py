"""The KenLM n-gram (charlm.ngram): modified Kneser-Ney (n+1)-grams, Karpathy et al. (2016) sec 4.3, Table 2.

One job builds it (lmplz + build_binary) and scores the test split; nothing ships (it is rebuilt from the corpus).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import corpora

from ..paths import config_hash, predictions_path
from .base import Job, ModelKind, Planned, Work, worker_env


class NGram(ModelKind):
    name = "ngram"
    label = "KenLM n-gram"
    baseline = True

    def order_label(self, n: int) -> str:
        return f"{n}-gram"

    def plan(self, profile, corpus, corpus_arg, extra_orders=((), ())) -> list[Planned]:
        from .. import ngram
        from ..plan import baseline_orders

        orders = baseline_orders(profile, extra_orders)[0]
        return [
            Planned(self, corpus_arg, corpus, ngram.model_folder(corpus, n).name, ngram.model_folder(corpus, n), n=n)
            for n in orders
        ]

    def damage(self, planned: Planned) -> str | None:
        from .. import ngram

        return ngram.damage(planned.directory, "test")  # the report scores the test split: a model cut to it serves

    def jobs(self, planned, env, threads, splits, snapshots, problem) -> list[Job]:
        if problem is None and predictions_path(planned.directory, "test", "model").is_file():
            return []
        tokens = planned.corpus.split("train").size
        work = Work("build", float(tokens * (planned.n + 1)), f"ngram n={planned.n}")
        run = partial(build_job, planned.corpus_arg, planned.n, env, threads, splits)
        return [Job(f"build:{planned.label}", run, work, planned)]

    def describe(self, planned: Planned) -> dict:
        return {
            "arch": f"ngram n={planned.n}",
            "layers": None,
            "width": None,
            "dropout": None,
            "seed": None,
            "params": None,
            "budget row": "-",
            "train chars": planned.corpus.split("train").size,
        }

    def index_row(self, metrics: dict, directory: Path) -> dict:
        key = metrics.get("corpus_key", metrics.get("corpus_sha256"))
        return {
            "family": self.name,
            "kind": self.name,
            "arch": self.name,
            "size": metrics.get("best_hidden"),
            "seed": None,
            "group_id": metrics.get("group_id") or metrics.get("model_id"),
            "recipe": config_hash({"kenlm": _probabilities(metrics.get("kenlm")), "corpus_key": key}),
            "snapshots": 0,
        }

    def predictions(self, row, corpus, split, snapshot, repair, progress) -> Path:
        from .. import ngram

        return ngram.predict(corpus, int(row["n"]), split, progress=progress, repair=repair)

    def owns(self, folder, metrics, payload_kind) -> bool:
        from .. import ngram

        return metrics.get("kind") == "ngram" or (folder is not None and ngram.binary_path(folder).exists())

    def load(self, path: Path, metrics: dict):
        from corpora.errors import UserError

        from ..anymodel import AnyModel, _vocab
        from ..ngram import damage, load_model, source_digest

        if metrics.get("cut_to"):  # charlm.arpa_filter: exact on that split only; any text needs the whole model
            path, metrics = _whole(path, metrics)
        problem = damage(path)
        if problem is not None:
            raise UserError(f"n-gram model {path}: {problem} (rebuild it with `python -m charlm.ngram`)")
        vocab = _vocab(metrics.get("vocab"), metrics.get("vocab_size", len(metrics.get("vocab") or [])), path)
        digest = source_digest(path, metrics["model_bytes"])  # as charlm.ngram.predict keys its Predictions
        return AnyModel(self, load_model(path), vocab, metrics.get("model_id", path.name), digest, path, metrics)

    def logprobs(self, model, ids, streams=None, progress=False):
        from ..ngram import score_stream, token_names

        return score_stream(model.net, ids, token_names(model.vocab), None, progress, f"score {model.model_id}")[1]

    def stepper(self, model):
        from ..anymodel import KenLMStepper

        return KenLMStepper(model)

    def model_description(self, model) -> str:
        return f"KenLM n-gram n = {model.meta.get('n', '?')}"


def _whole(path: Path, metrics: dict) -> tuple[Path, dict]:
    """The whole model of a folder cut to one split: rebuilt from its corpus (said so), or one line saying how."""
    import json
    import sys

    from corpora.errors import UserError

    from .. import ngram

    corpus = None
    try:
        corpus = corpora.load(metrics.get("corpus_source") or metrics["corpus"], split_mode=metrics["corpus_splits"])
    except (UserError, KeyError, OSError):
        pass
    if corpus is None or corpus.key != metrics.get("corpus_key"):
        raise UserError(
            f"n-gram model {path} is cut to what scoring its {metrics['cut_to']} split reads, and its corpus "
            f"'{metrics.get('corpus')}' is not here to rebuild it whole: `python -m charlm.ngram --corpus <its file> "
            f"--n {metrics.get('n')} --build-only` builds the whole model"
        )
    print(f"{path.name}: cut to the {metrics['cut_to']} split; building the whole model to score other text",
          file=sys.stderr, flush=True)  # fmt: skip
    folder = ngram.build(corpus, int(metrics["n"]), progress=False, split=None)
    return folder, json.loads((folder / "metrics.json").read_text())


def _probabilities(settings: dict | None) -> dict | None:
    """The KenLM settings that decide its probabilities (the binary's structure does not: a recipe ignores it)."""
    return None if settings is None else {k: v for k, v in settings.items() if k != "structure"}


def build_job(corpus: str, n: int, env: dict, threads: int, splits: str) -> str:
    """Build the (n+1)-gram (if it is not built) and write its test Predictions."""
    import time

    worker_env(env, threads)
    from .. import ngram
    from .recurrent import say

    started = time.perf_counter()
    folder = ngram.predict(corpora.load(corpus, split_mode=splits), n, split="test", progress=False).parents[2]
    say(f"{folder.name}: {time.perf_counter() - started:.0f} s")
    return str(folder)


NGRAM = NGram()
