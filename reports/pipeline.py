"""`make report`: plan, train what is missing, run every analysis, render HTML + PDF.

Every step is cached by the full config of what it produces (model ids hash the training
config and the corpus bytes; tables hash the models they read and the analysis code), so a
rerun computes only what changed, and an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import importlib.metadata
import os
import platform
import subprocess
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd

import corpora
from analyses import common
from charlm.model import matched_size
from charlm.paths import artifacts_root, complete_metrics, config_hash, model_dir, predictions_path
from charlm.sweep import executor, run_jobs
from charlm.train import TrainConfig
from corpora import atomic

from .profiles import Profile
from .render import ReportContext, Section, render

BUILD_ROOT = Path("reports/build")
PACKAGES = (
    "torch",
    "numpy",
    "scipy",
    "pandas",
    "scikit-learn",
    "matplotlib",
    "seaborn",
    "jinja2",
    "weasyprint",
    "kenlm",
    "dask",
    "distributed",
)


def say(message: str) -> None:
    print(f"[report] {message}", flush=True)


# ------------------------------------------------------------------------------------ the plan


def neural_configs(profile: Profile, corpus: corpora.Corpus, corpus_arg: str) -> list[TrainConfig]:
    """The type x layers x budget grid (RNN/GRU widths matched to the LSTM's parameters) plus Levy's ablations."""
    configs = []
    grid = profile.grid
    for arch in grid["types"]:
        for layers in grid["layers"]:
            for budget in grid["sizes"]:
                width = matched_size(arch, budget, corpus.vocab_size, layers)
                configs.append(
                    TrainConfig(corpus=corpus_arg, arch=arch, layers=layers, size=width, seed=0, **profile.train)
                )
    abl = profile.ablations
    if abl:
        for seed in abl.get("lstm_seeds", [0]):
            configs.append(
                TrainConfig(
                    corpus=corpus_arg, arch="lstm", layers=abl["layers"], size=abl["size"], seed=seed, **profile.train
                )
            )
        for arch in abl["archs"]:
            configs.append(
                TrainConfig(
                    corpus=corpus_arg, arch=arch, layers=abl["layers"], size=abl["size"], seed=0, **profile.train
                )
            )
    unique = {c.model_id(corpus.key): c for c in configs}
    return list(unique.values())


def _complete(directory: Path, split: str = "test") -> bool:
    return complete_metrics(directory / "metrics.json") is not None and predictions_path(directory, split).exists()


# ------------------------------------------------------------------------------------ jobs (run in worker processes)


def _worker_env(env: dict, threads: int) -> None:
    os.environ.update(env)
    import torch

    torch.set_num_threads(threads)


def train_job(config: dict, env: dict, threads: int, splits: str = "contiguous") -> str:
    """Train one model (or resume it) and write its test predictions; returns its artifact folder."""
    _worker_env(env, threads)
    from charlm.predict import predict_split
    from charlm.train import train

    out = train(TrainConfig(**config), corpus=corpora.load(config["corpus"], split_mode=splits), threads=threads)
    predict_split(out / "checkpoint.pt", "test", progress=True)
    return str(out)


def ngram_job(corpus: str, n: int, env: dict, threads: int, splits: str = "contiguous") -> str:
    _worker_env(env, threads)
    from charlm import ngram

    return str(Path(ngram.predict(corpora.load(corpus, split_mode=splits), n, split="test")).parent.parent)


def nnn_job(corpus: str, n: int, options: dict, env: dict, threads: int, splits: str = "contiguous") -> str:
    _worker_env(env, threads)
    from charlm import nnn

    return str(Path(nnn.predict(corpora.load(corpus, split_mode=splits), n, split="test", **options)).parent.parent)


# ------------------------------------------------------------------------------------ the run


@dataclass
class RunOptions:
    profile: Profile
    corpora_override: list[str] | None = None  # paths or names replacing the profile's corpora (tests)
    scheduler: str | None = None  # Dask scheduler address; None: local processes
    workers: int | None = None
    build_root: Path = BUILD_ROOT


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _git_revision() -> str:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
        ).stdout.strip()
        return rev + ("+uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def _analysis_key(name: str, module, index: pd.DataFrame) -> str:
    source = hashlib.sha256(Path(module.__file__).read_bytes()).hexdigest()
    common_src = hashlib.sha256(Path(common.__file__).read_bytes()).hexdigest()
    return config_hash(
        {"analysis": name, "models": sorted(index["model_id"]), "source": source, "common": common_src}, 16
    )


def run_analysis(name: str, index: pd.DataFrame, data_dir: Path) -> Section:
    module = importlib.import_module(f"analyses.{name}")
    table_path, key_path, figure_path = data_dir / f"{name}.csv", data_dir / f"{name}.key", data_dir / f"{name}.png"
    key = _analysis_key(name, module, index)
    if key_path.exists() and key_path.read_text().strip() == key and table_path.exists() and figure_path.exists():
        say(f"analysis {name}: cached")
        df = pd.read_csv(table_path)
    else:
        say(f"analysis {name}: computing from {len(index)} models")
        df = module.compute(index)
        common.save_table(df, table_path)
        common.save_figure(module.plot(df), figure_path)
        atomic.write_text(key_path, key)
    table = module.with_paper(df) if hasattr(module, "with_paper") else df
    paper = None if hasattr(module, "with_paper") else module.paper_table()
    return Section(
        name=name,
        title=module.TITLE,
        question=module.QUESTION,
        caption=module.caption(df),
        table=table,
        figure=figure_path,
        paper_table=paper,
        paper_source=module.PAPER_SOURCE,
        notes=module.notes(df) if hasattr(module, "notes") else [],
    )


def run(options: RunOptions) -> tuple[Path, Path]:
    started = time.perf_counter()
    profile = options.profile
    out_dir = options.build_root / profile.name
    data_dir = out_dir / "data"
    say(f"profile {profile.name} ({profile.hash}): {profile.description}")
    if profile.wants_gpu:
        say("this profile wants a GPU: on a CPU it takes weeks; continuing anyway")
    corpus_args = options.corpora_override or profile.corpora
    loaded = {arg: corpora.load(arg, split_mode=profile.splits) for arg in corpus_args}
    env = {"CHARLM_ARTIFACTS": str(artifacts_root().resolve()), "CORPORA_DIR": str(corpora.corpora_dir().resolve())}
    workers = options.workers or profile.run.get("workers") or max(1, (os.cpu_count() or 1) // 2)
    threads = max(1, (os.cpu_count() or 1) // workers)

    # Plan: what is cached and what will be computed.
    train_jobs, cached_dirs = [], []
    for arg, corpus in loaded.items():
        for config in neural_configs(profile, corpus, arg):
            directory = model_dir(corpus.name, config.model_id(corpus.key))
            if _complete(directory):
                cached_dirs.append(str(directory))
            else:
                train_jobs.append(partial(train_job, config.__dict__, env, threads, profile.splits))
    base = profile.baselines
    nnn_options = {
        k: base[key]
        for key, k in (
            ("nnn_hidden", "hidden_grid"),
            ("nnn_max_chars", "max_chars"),
            ("nnn_batch_chars", "batch_chars"),
        )
        if key in base
    }
    if "hidden_grid" in nnn_options:
        nnn_options["hidden_grid"] = tuple(nnn_options["hidden_grid"])
    # Longest first (high-order n-grams, then neural nets), so the pool's workers finish together.
    ngram_jobs = [
        partial(ngram_job, arg, n, env, threads, profile.splits)
        for n in sorted(base.get("ngram_n", []), reverse=True)
        for arg in loaded
    ]
    nnn_jobs = [
        partial(nnn_job, arg, n, nnn_options, env, threads, profile.splits)
        for arg in loaded
        for n in base.get("nnn_n", [])
    ]
    scheduler = options.scheduler or os.environ.get("DASK_SCHEDULER")
    say(
        f"plan: {len(train_jobs) + len(cached_dirs)} neural models ({len(cached_dirs)} cached, "
        f"{len(train_jobs)} to train), "
        f"{len(ngram_jobs)} n-grams, {len(nnn_jobs)} n-NNs (cached ones return at once); analyses "
        f"{', '.join(profile.analyses)}; "
        + (f"on the Dask cluster at {scheduler}" if scheduler else f"{workers} local worker(s) x {threads} thread(s)")
    )
    for job in train_jobs:
        c = job.args[0]
        say(f"  will train {c['arch']} L{c['layers']} H{c['size']} seed {c['seed']} on {c['corpus']}")

    def completed_dirs() -> set[str]:
        frames = [common.model_index(None, c.name) for c in loaded.values()]
        return {str(Path(d).resolve()) for frame in frames for d in frame["dir"]}

    done_before = completed_dirs()  # for the report's "cached" column: neural nets, n-grams and n-NNs alike
    dirs = list(cached_dirs)
    with executor(options.scheduler, workers) as pool:
        dirs += run_jobs(
            pool, ngram_jobs[: len(loaded)] + train_jobs + ngram_jobs[len(loaded) :] + nnn_jobs, desc="train and score"
        )

    index = pd.concat([common.model_index(None, c.name) for c in loaded.values()], ignore_index=True)
    index = index[
        index["dir"].map(lambda d: str(Path(d).resolve())).isin({str(Path(d).resolve()) for d in dirs})
    ].reset_index(drop=True)
    sections = [run_analysis(name, index, data_dir) for name in profile.analyses]

    trainings = index[
        ["model_id", "corpus", "family", "arch", "layers", "size", "n", "params", "chars_trained", "seconds"]
    ].copy()
    trainings["cached"] = index["dir"].map(lambda d: str(Path(d).resolve()) in done_before)
    trainings = trainings.sort_values(["corpus", "family", "arch", "n", "model_id"], ignore_index=True)
    hashes = {row.model_id: row.model_id.rsplit("-", 1)[-1] for row in index.itertuples()}
    ctx = ReportContext(
        profile=profile.name,
        profile_description=profile.description,
        corpora=[c.info() for c in loaded.values()],
        trainings=trainings,
        total_seconds=float(pd.to_numeric(index["seconds"], errors="coerce").fillna(0).sum()),
        sections=sections,
        versions=_versions(),
        git_revision=_git_revision(),
        config_hashes={"profile": profile.hash, **hashes},
        generated_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )
    say("rendering HTML and PDF")
    html, pdf = render(ctx, out_dir)
    say(f"done in {time.perf_counter() - started:.0f} s: {html} and {pdf}")
    return html, pdf
