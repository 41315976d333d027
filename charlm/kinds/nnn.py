"""The n-NN (charlm.nnn): a feed-forward net on the last n characters, Karpathy et al. (2016) sec 4.3, Table 2.

Its jobs: `train` its hidden-size grid when it is not built (a profile that ships its models ships the chosen
member, models/<profile>/), and `score` the test split.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import corpora

from ..paths import config_hash, predictions_path
from ..shipped import MANIFEST, shipped_folder
from .base import Job, ModelKind, Planned, Work, worker_env


class NNN(ModelKind):
    name = "nnn"
    label = "n-NN"
    ships = True
    baseline = True

    def order_label(self, n: int) -> str:
        return f"{n}-NN"

    def plan(self, profile, corpus, corpus_arg, extra_orders=((), ())) -> list[Planned]:
        from .. import nnn
        from ..plan import baseline_orders, nnn_options

        planned = []
        for n in baseline_orders(profile, extra_orders)[1]:
            config = nnn.NNNConfig(corpus.source or corpus.name, n, **nnn_options(profile, n))
            folder = nnn.model_folder(corpus, config)
            shipped = shipped_folder(profile.name, corpus.artifact_name, folder.name)
            shipped = shipped if (shipped / MANIFEST).is_file() else None
            planned.append(Planned(self, corpus_arg, corpus, folder.name, folder, config, n=n, shipped=shipped))
        return planned

    def damage(self, planned: Planned) -> str | None:
        from .recurrent import RECURRENT

        return RECURRENT.damage(planned)  # the same files: a complete metrics.json and its checkpoint's sha256

    def jobs(self, planned, env, threads, splits, snapshots, problem) -> list[Job]:
        if problem is None and predictions_path(planned.directory, "test").is_file():
            return []
        c, jobs = planned.config, []
        shape = f"nnn n={planned.n}"
        if problem is not None:
            per_epoch = c.epoch_chars or planned.corpus.split("train").size
            chars = float(min(c.epochs * per_epoch, c.max_chars or float("inf"))) * len(c.hidden_grid)
            run = partial(train_job, planned.corpus_arg, planned.n, c.to_dict(), env, threads, splits)
            jobs.append(Job(f"train:{planned.label}", run, Work("train", chars, shape), planned))
        run = partial(score_job, str(planned.directory), planned.corpus_arg, env, threads, splits)
        work = Work("score", float(planned.corpus.split("test").size), shape)
        jobs.append(Job(f"score:{planned.label}", run, work, planned, after=tuple(j.key for j in jobs)))
        return jobs

    def describe(self, planned: Planned) -> dict:
        return {
            "arch": f"nnn n={planned.n}",
            "layers": None,
            "width": None,
            "dropout": None,
            "seed": None,
            "params": None,
            "budget row": "-",
            "train chars": planned.config.max_chars,
        }

    def index_row(self, metrics: dict, directory: Path) -> dict:
        key = metrics.get("corpus_key", metrics.get("corpus_sha256"))
        # the hidden-size grid is the model's own selection (sec 4.3 cross-validates it), not its recipe: a profile
        # may give one order a wider grid ([baselines.nnn_hidden_for_n]) and its n-NNs still compare
        config = {k: v for k, v in (metrics.get("config") or {}).items() if k not in ("corpus", "n", "hidden_grid")}
        return {
            "family": self.name,
            "kind": self.name,
            "arch": self.name,
            "size": metrics.get("best_hidden"),
            "seed": (metrics.get("config") or {}).get("seed"),
            "group_id": metrics.get("group_id") or metrics.get("model_id"),
            "recipe": config_hash({**config, "corpus_key": key}),
            "snapshots": 0,
        }

    def predictions(self, row, corpus, split, snapshot, repair, progress) -> Path:
        from .. import nnn

        return nnn.predict_folder(Path(row["dir"]), corpus, split, repair=repair)

    def owns(self, folder, metrics, payload_kind) -> bool:
        return payload_kind == "nnn" or metrics.get("kind") == "nnn"

    def load(self, path: Path, metrics: dict):
        from ..anymodel import AnyModel, _vocab
        from ..checkpoint import file_sha256, load_payload
        from ..nnn_model import nnn_from_payload

        path = path / "checkpoint.pt" if path.is_dir() else path
        net = nnn_from_payload(load_payload(path), path)
        vocab = _vocab(net.meta.get("vocab"), net.vocab_size, path)
        meta = {**net.meta, "n": net.n}
        return AnyModel(self, net, vocab, net.meta.get("model_id", path.parent.name), file_sha256(path), path, meta)

    def logprobs(self, model, ids, streams=None, progress=False):
        from ..nnn_model import predict_logprobs

        return predict_logprobs(model.net, ids)

    def stepper(self, model):
        from ..anymodel import WindowStepper

        return WindowStepper(model)

    def model_description(self, model) -> str:
        return f"n-NN n = {model.meta.get('n', '?')}"


def train_job(corpus: str, n: int, config: dict, env: dict, threads: int, splits: str) -> str:
    """Train the n-NN's hidden-size grid (if it is not built)."""
    worker_env(env, threads)
    from .. import nnn

    loaded = corpora.load(corpus, split_mode=splits)
    return str(nnn.train_config(nnn.NNNConfig(**config), loaded, progress=False))


def score_job(directory: str, corpus: str, env: dict, threads: int, splits: str) -> str:
    """The test Predictions of a built n-NN."""
    import time

    worker_env(env, threads)
    from .. import nnn
    from .recurrent import say

    started = time.perf_counter()
    nnn.predict_folder(Path(directory), corpora.load(corpus, split_mode=splits), "test")
    say(f"{Path(directory).name}: scored in {time.perf_counter() - started:.1f} s")
    return directory


NNN_KIND = NNN()
