"""The recurrent network (`charlm.model.CharLM`, every architecture of charlm.archs): trained by charlm.train.

Its jobs: `train` (only when the model is not built: a shipped model is installed instead) and `score`, which
writes the test Predictions of the checkpoint (every position's exact columns, distributions at the sample) and of
its training snapshots when the analyses read them (the sample's blocks alone, charlm.predict). A profile that ships
its models (models/<profile>/) may plan a model that is not shipped yet: a shipped model of the same configuration
trained by an earlier stopping rule then stands in for it, named as such in the report, until it ships.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path

import corpora

from .. import shipped as shipped_models
from ..paths import complete_metrics, config_hash, model_dir
from ..shipped import MANIFEST, shipped_folder
from .base import Job, ModelKind, Planned, Work, worker_env

STOPPING = ("converge_delta", "converge_window", "patience", "epochs")  # when training stops, not what it learns


class Recurrent(ModelKind):
    name = "neural"
    label = "recurrent network"
    recurrent = True
    ships = True

    # ---------------------------------------------------------------- planning

    def plan(self, profile, corpus, corpus_arg, extra_orders=((), ())) -> list[Planned]:
        from ..dropout_search import untried as never_tried
        from ..plan import neural_configs

        # a shipping profile's line search of dropout leaves out for good what it will not try (charlm.dropout_search)
        untried = never_tried(profile, corpus, corpus_arg) if profile.ships_models else {}
        planned = []
        for config in neural_configs(profile, corpus, corpus_arg):
            mid = config.model_id(corpus.key)
            if mid in untried:
                continue
            shipped = shipped_folder(profile.name, corpus.artifact_name, mid)
            shipped = shipped if (shipped / MANIFEST).is_file() else None
            model = Planned(
                self, corpus_arg, corpus, mid, model_dir(corpus.artifact_name, mid), config, shipped=shipped
            )
            if profile.ships_models and not shipped and complete_metrics(model.directory / "metrics.json") is None:
                model = self.stand_in(profile.name, model) or model
            planned.append(model)
        return planned

    def stand_in(self, profile_name: str, wanted: Planned) -> Planned | None:
        """A shipped model of `wanted`'s configuration but for its stopping rule (trained before the rule changed):
        it stands in for `wanted` until that ships (issue 38). None when there is none."""
        from ..train import TrainConfig

        manifest = shipped_stand_in(profile_name, wanted.corpus, wanted.config)
        if manifest is None:
            return None
        config = replace(TrainConfig(**manifest["train_config"]), corpus=wanted.config.corpus)
        mid = manifest["model_id"]
        folder = model_dir(wanted.corpus.artifact_name, mid)
        shipped = shipped_folder(profile_name, wanted.corpus.artifact_name, mid)
        return Planned(self, wanted.corpus_arg, wanted.corpus, mid, folder, config, shipped=shipped,
                       stand_in_for=wanted.model_id)  # fmt: skip

    def damage(self, planned: Planned) -> str | None:
        from ..checkpoint import file_sha256

        metrics = complete_metrics(planned.directory / "metrics.json")
        if metrics is None:
            return "not built"
        checkpoint = planned.directory / "checkpoint.pt"
        if not checkpoint.is_file():
            return f"{checkpoint} is missing"
        if metrics.get("checkpoint_sha256") != file_sha256(checkpoint):
            return f"{checkpoint} is damaged (its sha256 is not the one recorded when it was written)"
        return None

    def jobs(self, planned, env, threads, splits, snapshots, problem) -> list[Job]:
        config = planned.config
        mc = self.model_config(planned)
        from ..model import count_params

        shape, params = f"{config.arch} L{config.layers} H{config.size}", count_params(mc)
        snaps = _snapshots(planned, config) if snapshots else []
        if problem is None and not _predictions_missing(planned, snaps):
            return []  # built and scored (whether those predictions are current is checked when they are read)
        jobs = []
        if problem is not None:
            chars = chars_to_train(config, planned.corpus)
            jobs.append(
                Job(
                    f"train:{planned.label}",
                    partial(train_job, asdict(config), env, _training_threads(planned, threads), splits),
                    Work("train", chars, shape, params, config.layers),
                    planned,
                )
            )
        test = planned.corpus.split("test").size
        from ..predictions import SAMPLE_POSITIONS

        units = test + len(snaps) * min(test, SAMPLE_POSITIONS * 1.6)  # a snapshot reads the sample + its warm-ups
        jobs.append(
            Job(
                f"score:{planned.label}",
                partial(score_job, str(planned.directory), planned.corpus_arg, env, threads, splits, snapshots),
                Work("score", units, shape, params, config.layers),
                planned,
                after=tuple(j.key for j in jobs),
            )
        )
        return jobs

    def model_config(self, planned: Planned):
        """The network's charlm.model.ModelConfig (a trained model's follows from its TrainConfig)."""
        return planned.config.model_config(planned.corpus.vocab_size)

    def describe(self, planned: Planned) -> dict:
        from ..model import budget_of, count_params

        c, V = planned.config, planned.corpus.vocab_size
        budget = budget_of(c.arch, c.size, c.layers, V)
        return {
            "arch": c.arch,
            "layers": c.layers,
            "width": c.size,
            "dropout": c.dropout,
            "seed": c.seed,
            "params": count_params(c.model_config(V)),
            "budget row": str(budget) if budget else "-",
            "train chars": c.max_chars,
        }

    # ---------------------------------------------------------------- reading

    def index_row(self, metrics: dict, directory: Path) -> dict:
        tc = metrics.get("train_config") or {}
        key = metrics.get("corpus_key", metrics.get("corpus_sha256"))
        # when training stopped is not what it learned from: a model trained by an earlier stopping rule stands in
        # for its retrained one (issue 38) in the same comparisons, and the report counts it
        tc = {k: v for k, v in tc.items() if k not in STOPPING}
        recipe = {k: v for k, v in tc.items() if k not in ("corpus", "arch", "layers", "size", "seed", "dropout")}
        variant = {k: v for k, v in tc.items() if k not in ("corpus", "seed", "dropout")}
        return {
            "family": self.name,
            "kind": self.name,
            "arch": tc.get("arch"),
            "layers": tc.get("layers"),
            "size": tc.get("size"),
            "budget": metrics.get("budget"),
            "dropout": tc.get("dropout", 0.0),
            "seed": tc.get("seed"),
            "group_id": metrics.get("group_id"),
            "variant": config_hash({**variant, "corpus_key": key}),
            "recipe": config_hash({**recipe, "corpus_key": key}),
            "snapshots": len(metrics.get("snapshots") or []),
        }

    def predictions(self, row, corpus, split, snapshot, repair, progress) -> Path:
        from ..predict import predict_checkpoint

        directory = Path(row["dir"])
        checkpoint = directory / snapshot if snapshot else directory / "checkpoint.pt"
        return predict_checkpoint(
            checkpoint, split, progress=progress, repair=repair, corpus=corpus, sample_only=snapshot is not None
        )

    def owns(self, folder, metrics, payload_kind) -> bool:
        return payload_kind == "charlm" or metrics.get("kind") == "charlm"

    def load(self, path: Path, metrics: dict):
        from ..anymodel import from_charlm
        from ..checkpoint import file_sha256, load_checkpoint

        path = path / "checkpoint.pt" if path.is_dir() else path
        return from_charlm(load_checkpoint(path), path, file_sha256(path))

    def logprobs(self, model, ids, streams=None, progress=False):
        from ..predict import predict_logprobs

        return predict_logprobs(model.net, ids, streams=streams, progress=progress, desc=f"score {model.model_id}")

    def stepper(self, model):
        from ..anymodel import RecurrentStepper

        return RecurrentStepper(model)

    def model_description(self, model) -> str:
        c = model.net.config
        return f"{c.arch} ({c.layers} x {c.size})"


# -------------------------------------------------------------------------------------------- helpers


def _training_key(train_config: dict) -> str:
    """What decides a run's trajectory: every training setting but the corpus string and when to stop."""
    return json.dumps({k: v for k, v in train_config.items() if k not in ("corpus", *STOPPING)}, sort_keys=True)


def shipped_stand_in(profile_name: str, corpus: corpora.Corpus, config) -> dict | None:
    """The manifest of the shipped model of `config` on `corpus` but for when training stopped, if one ships."""
    key = _training_key(asdict(config))
    for manifest in _shipped_manifests(profile_name, corpus.artifact_name):
        tc = manifest.get("train_config")  # n-NNs ship an nnn_config instead
        if tc and manifest.get("corpus_key") == corpus.key and _training_key(tc) == key:
            return manifest
    return None


def _shipped_manifests(profile_name: str, corpus_artifact_name: str) -> tuple[dict, ...]:
    return _manifests_in(shipped_models.SHIPPED_ROOT / profile_name / corpus_artifact_name)


@functools.cache
def _manifests_in(folder: Path) -> tuple[dict, ...]:  # cleared by reports.ship when it changes what ships
    return tuple(json.loads(p.read_text()) for p in sorted(folder.glob(f"*/{MANIFEST}")))


def chars_to_train(config, corpus: corpora.Corpus) -> float:
    """Training characters the run will read: its budget, else its epoch cap (early stopping cannot be foreseen)."""
    per_epoch = corpus.split("train").size
    chars = config.epochs * per_epoch
    return float(min(chars, config.max_chars) if config.max_chars else chars)


def _snapshots(planned: Planned, config) -> list[str]:
    """The snapshot files of a model: built (its metrics), shipped (its manifest), or to train (config.snapshots)."""
    metrics = complete_metrics(planned.directory / "metrics.json")
    if metrics is not None:
        return [s["file"] for s in metrics.get("snapshots") or []]
    if planned.shipped is not None:
        from ..shipped import read_manifest

        return [name for name in read_manifest(planned.shipped).get("files", {}) if name.startswith("snapshots/")]
    return [f"snapshots/{k}" for k in range(int(config.snapshots))]


def _predictions_missing(planned: Planned, snapshots: list[str]) -> bool:
    from ..paths import checkpoint_predictions_path

    files = ["checkpoint.pt", *snapshots]
    return any(not checkpoint_predictions_path(planned.directory / f, "test").is_file() for f in files)


# -------------------------------------------------------------------------------------------- jobs (in workers)


def say(message: str) -> None:
    print(f"[report] {message}", flush=True)


def _training_threads(planned: Planned, threads: int) -> int:
    """A shipped model trained again (damaged, or --retrain) uses the thread count it shipped with: torch's sums
    split across threads round differently, and only the same count gives the shipped weights bit for bit."""
    manifest = planned.shipped / MANIFEST if planned.shipped else None
    if manifest is None or not manifest.is_file():
        return threads
    return int(json.loads(manifest.read_text()).get("machine", {}).get("torch_threads") or threads)


def train_job(config: dict, env: dict, threads: int, splits: str) -> str:
    """Train one model (or resume it); returns its artifact folder."""
    worker_env(env, threads)
    from ..train import TrainConfig, train

    corpus = corpora.load(config["corpus"], split_mode=splits)
    started = time.perf_counter()
    out = train(TrainConfig(**config), corpus=corpus, threads=threads, progress=False)
    metrics = json.loads((out / "metrics.json").read_text())
    say(
        f"{out.name}: val {metrics['best_val_loss']:.3f} nats/char after {metrics['chars_trained']:,} chars "
        f"(training {metrics['seconds']:.0f} s, this job {time.perf_counter() - started:.0f} s)"
    )
    return str(out)


def score_job(directory: str, corpus_arg: str, env: dict, threads: int, splits: str, snapshots: bool) -> str:
    """The test Predictions of a built model's checkpoint, and of its snapshots when the analyses read them."""
    worker_env(env, threads)
    from ..predict import predict_checkpoint

    out = Path(directory)
    corpus = corpora.load(corpus_arg, split_mode=splits)
    started = time.perf_counter()
    predict_checkpoint(out / "checkpoint.pt", "test", progress=False, corpus=corpus)
    if snapshots:
        metrics = json.loads((out / "metrics.json").read_text())
        for snap in metrics.get("snapshots") or []:
            predict_checkpoint(out / snap["file"], "test", progress=False, corpus=corpus, sample_only=True)
    say(f"{out.name}: scored in {time.perf_counter() - started:.1f} s")
    return str(out)


RECURRENT = Recurrent()
