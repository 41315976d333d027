"""`make report`: plan, train what is missing, run every analysis, render HTML + PDF.

Every step is cached by the full config of what it produces (model ids hash the training config
and the corpus bytes; analysis tables hash the models they read, their settings and every source
file their numbers depend on), so a rerun computes only what changed, and an interrupted run
resumes where it stopped. A damaged artifact (a truncated checkpoint, predictions file or n-gram
model) is found before it is used, recomputed, and said so.

Nothing here is specific to one analysis: each declares what it needs (`NEEDS`) and gets a
`analyses.context.Context`; this module only plans, schedules and renders.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd

import corpora
from analyses import common
from analyses.context import Context, MissingInput, model_index
from charlm.paths import artifacts_root, checkpoint_predictions_path, config_hash
from charlm.plan import Planned, Profile, damage, plan
from charlm.shipped import install_shipped, installed
from charlm.sweep import executor, run_jobs
from corpora import atomic

from .render import ReportContext, Section, render

BUILD_ROOT = Path("reports/build")
PACKAGES = (
    "torch", "numpy", "scipy", "pandas", "scikit-learn", "matplotlib", "seaborn", "jinja2", "weasyprint", "kenlm",
    "dask", "distributed", "h5py",
)  # fmt: skip


def say(message: str) -> None:
    print(f"[report] {message}", flush=True)


# ------------------------------------------------------------------------------------ the plan


def print_plan(profile: Profile, models: list[Planned]) -> pd.DataFrame:
    table = pd.DataFrame([m.row() for m in models])
    for column in ("layers", "width", "seed", "params", "train chars"):
        table[column] = table[column].astype("Int64")  # blanks for baselines, integers for the rest
    with pd.option_context("display.max_rows", 500, "display.width", 200):
        print(table.to_string(index=False, na_rep=""))
    neural = table[table["kind"] == "neural"]
    print(
        f"\nprofile {profile.name}: {len(table)} models ({len(neural)} neural, {int((~table['cached']).sum())} "
        f"to compute); dropout grid {profile.dropouts}; analyses: {', '.join(profile.analyses)}"
    )
    return table


# ------------------------------------------------------------------------------------ jobs (run in worker processes)


def _worker_env(env: dict, threads: int) -> None:
    """Artifacts and corpora where the parent has them; `threads` for torch AND for numpy's BLAS (scikit-learn and
    scipy call it): with 2 workers on 2 cores, BLAS's default of one thread per core made the probes 3.7x slower."""
    os.environ.update(env)
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    threadpool_limits(threads)


def train_job(config: dict, env: dict, threads: int, splits: str, snapshots: bool) -> str:
    """Train one model (or resume it) and write its test predictions (and its snapshots', when analyses read
    them); returns its artifact folder."""
    _worker_env(env, threads)
    from charlm.predict import predict_checkpoint
    from charlm.train import TrainConfig, train

    corpus = corpora.load(config["corpus"], split_mode=splits)
    started = time.perf_counter()
    out = train(TrainConfig(**config), corpus=corpus, threads=threads, progress=False)  # one line each, below
    metrics = json.loads((out / "metrics.json").read_text())
    predict_checkpoint(out / "checkpoint.pt", "test", progress=False, corpus=corpus)
    if snapshots:
        for snap in metrics.get("snapshots", []):
            predict_checkpoint(out / snap["file"], "test", sample=True, progress=False, corpus=corpus)
    say(f"{out.name}: val {metrics['best_val_loss']:.3f} nats/char after {metrics['chars_trained']:,} chars "
        f"(training {metrics['seconds']:.0f} s, this job {time.perf_counter() - started:.0f} s)")  # fmt: skip
    return str(out)


def ngram_job(corpus: str, n: int, env: dict, threads: int, splits: str) -> str:
    _worker_env(env, threads)
    from charlm import ngram

    started = time.perf_counter()
    folder = ngram.predict(corpora.load(corpus, split_mode=splits), n, split="test", progress=False).parents[2]
    say(f"{folder.name}: {time.perf_counter() - started:.0f} s")
    return str(folder)


def nnn_job(corpus: str, n: int, options: dict, env: dict, threads: int, splits: str) -> str:
    _worker_env(env, threads)
    from charlm import nnn

    started = time.perf_counter()
    path = nnn.predict(corpora.load(corpus, split_mode=splits), n, split="test", progress=False, **options)
    say(f"{path.parents[2].name}: {time.perf_counter() - started:.0f} s")
    return str(path.parents[2])


def analysis_job(name: str, index: list[dict], profile_settings: dict, data_dir: str, env: dict, threads: int) -> dict:
    """Run one analysis (or read its cached table); returns what its report section needs."""
    _worker_env(env, threads)
    module = common.load_analysis(name)
    frame = pd.DataFrame(index)
    settings = common.settings(module, profile_settings)
    data = Path(data_dir)
    table_path, key_path, figure_path = data / f"{name}.csv", data / f"{name}.key", data / f"{name}.png"
    key = config_hash(
        {"analysis": name, "source": common.source_digest(module), "settings": settings,
         "models": sorted(frame["model_id"] + ":" + frame["digest"].astype(str) + ":" + frame["dir"])},
        16,
    )  # fmt: skip
    started = time.perf_counter()
    if key_path.exists() and key_path.read_text().strip() == key and table_path.exists():
        status = "cached"
    else:
        ctx = Context(frame, settings, repair=True, say=say)
        try:
            df = common.run_module(module, ctx)
        except MissingInput as err:
            atomic.write_text(key_path, "")
            return {"name": name, "missing": str(err), "seconds": time.perf_counter() - started}
        common.save_table(df, table_path)
        figure = module.plot(df)
        if figure is None:  # nothing worth drawing (e.g. text samples)
            figure_path.unlink(missing_ok=True)
        else:
            common.save_figure(figure, figure_path)
        atomic.write_text(key_path, key)
        status = "computed"
    return {"name": name, "table": str(table_path), "figure": str(figure_path) if figure_path.exists() else None,
            "status": status, "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip


def section(result: dict) -> Section:
    """A report section from an analysis job's result (the module supplies title, caption, paper numbers)."""
    module = common.load_analysis(result["name"])
    base = {"name": result["name"], "title": module.TITLE, "question": module.QUESTION}
    if "missing" in result:
        return Section(
            **base, caption=f"Not computed: {result['missing']}.", table=pd.DataFrame(), figure=None,
            missing=result["missing"],
        )  # fmt: skip
    df = common.read_table(Path(result["table"]))
    paper = None
    if hasattr(module, "report_table"):
        table = module.report_table(df)
    elif hasattr(module, "with_paper"):
        table = module.with_paper(df)
    else:
        table = df
    if not hasattr(module, "with_paper") and hasattr(module, "paper_table"):
        paper = module.paper_table()
    return Section(
        **base, caption=module.caption(df), table=table, figure=result["figure"], paper_table=paper,
        paper_source=getattr(module, "PAPER_SOURCE", ""), notes=module.notes(df) if hasattr(module, "notes") else [],
        summary=module.summary(df) if hasattr(module, "summary") else "",
        html=module.report_html(df) if hasattr(module, "report_html") else "",
    )  # fmt: skip


# ------------------------------------------------------------------------------------ the run


@dataclass
class RunOptions:
    profile: Profile
    corpora_override: list[str] | None = None  # paths or names replacing the profile's corpora (tests)
    scheduler: str | None = None  # Dask scheduler address; None: local processes
    workers: int | None = None
    build_root: Path = BUILD_ROOT
    plan_only: bool = False  # print what would be trained and exit
    retrain: bool = False  # train the profile's shipped models again instead of installing them


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


def predictions_missing(planned: Planned, snapshots: bool) -> bool:
    """Whether a complete neural model lacks the test predictions of its checkpoint (or, when analyses read
    snapshots, of one of its snapshots). Whether those present are current is checked when they are read."""
    checkpoints = [planned.directory / "checkpoint.pt"]
    if snapshots:
        metrics = json.loads((planned.directory / "metrics.json").read_text())
        checkpoints += [planned.directory / snap["file"] for snap in metrics.get("snapshots") or []]
    return any(not checkpoint_predictions_path(c, "test").is_file() for c in checkpoints)


def _jobs(profile: Profile, models: list[Planned], problems: dict[str, str | None], env: dict, threads: int) -> list:
    """Worker jobs for every model still to compute (`problems`: damage() of each), damaged ones removed first;
    longest first. A complete network whose predictions are missing is sent too: the analyses would compute them
    on read, one at a time, where the pool computes them in parallel."""
    snapshots = any(common.needs(common.load_analysis(a)).snapshots for a in profile.analyses)
    neural, ngrams, nnns = [], [], []
    for m in models:
        problem = problems[m.model_id]
        if problem is None:
            if m.kind == "neural" and predictions_missing(m, snapshots):
                neural.append(partial(train_job, m.config.__dict__, env, threads, profile.splits, snapshots))
            continue  # complete (n-gram and n-NN predictions are checked, and made if missing, when read)
        if problem != "not built":
            say(f"{m.model_id}: {problem}: recomputing it")
            shutil.rmtree(m.directory, ignore_errors=True)
        if m.kind == "neural":
            neural.append(partial(train_job, m.config.__dict__, env, threads, profile.splits, snapshots))
        elif m.kind == "ngram":
            ngrams.append((m.n, partial(ngram_job, m.corpus_arg, m.n, env, threads, profile.splits)))
        else:
            nnns.append(partial(nnn_job, m.corpus_arg, m.n, m.options, env, threads, profile.splits))
    ngrams = [job for _, job in sorted(ngrams, key=lambda pair: -pair[0])]  # highest orders first, every corpus
    n_corpora = len({m.corpus_arg for m in models})
    return ngrams[:n_corpora] + neural + ngrams[n_corpora:] + nnns  # the biggest n-grams start with the networks


def run(options: RunOptions) -> tuple[Path, Path] | None:
    started = time.perf_counter()
    profile = options.profile
    loaded, models = plan(profile, options.corpora_override, common.orders_read(profile.analyses))
    if options.plan_only:
        print_plan(profile, models)
        return None
    out_dir = options.build_root / profile.name
    data_dir = out_dir / "data"
    say(f"profile {profile.name} ({profile.hash}): {profile.description}")
    if profile.wants_gpu:
        say("this profile wants a GPU: on a CPU it takes weeks; continuing anyway")
    env = {"CHARLM_ARTIFACTS": str(artifacts_root().resolve()), "CORPORA_DIR": str(corpora.corpora_dir().resolve())}
    workers = options.workers or profile.run.get("workers") or max(1, (os.cpu_count() or 1) // 2)
    threads = max(1, (os.cpu_count() or 1) // workers)
    neural = [m for m in models if m.kind == "neural"]
    shippable = [m for m in models if m.kind in ("neural", "nnn")]  # models/<profile>/ holds both kinds
    by_dir = {m.directory: m for m in shippable}
    if options.retrain:
        for m in shippable:
            if installed(m.directory):
                shutil.rmtree(m.directory)  # trained again below, from scratch
    else:
        shipped = install_shipped(
            profile.name, [(m.corpus.artifact_name, m.model_id, m.directory) for m in shippable], say,
            is_whole=lambda d: damage(by_dir[d]) is None,
        )  # fmt: skip
        if shipped:
            fresh = sum(v == "installed" for v in shipped.values())
            say(f"shipped models: {len(shipped)} in models/{profile.name}/ ({fresh} installed now, "
                f"{sum(v == 'present' for v in shipped.values())} already in the artifacts)")  # fmt: skip
    problems = {m.model_id: damage(m) for m in models}  # each checkpoint hashed once per run
    done_before = {mid for mid, problem in problems.items() if problem is None}
    scheduler = options.scheduler or os.environ.get("DASK_SCHEDULER")
    jobs = _jobs(profile, models, problems, env, threads)
    say(
        f"plan: {len(neural)} neural models ({sum(m.model_id in done_before for m in neural)} cached, "
        f"{sum(m.model_id not in done_before for m in neural)} to train), "
        f"{sum(m.kind == 'ngram' for m in models)} n-grams, {sum(m.kind == 'nnn' for m in models)} n-NNs; "
        f"analyses {', '.join(profile.analyses)}; "
        + (f"on the Dask cluster at {scheduler}" if scheduler else f"{workers} local worker(s) x {threads} thread(s)")
    )
    for m in neural:
        if m.model_id not in done_before:
            c = m.config
            say(f"  will train {c.arch} L{c.layers} H{c.size} dropout {c.dropout:g} seed {c.seed} on {m.corpus.name}")
    phase_seconds = {}
    with executor(scheduler, workers) as pool:
        t0 = time.perf_counter()
        if jobs:
            run_jobs(pool, jobs, desc="train and score")
        phase_seconds["models"] = time.perf_counter() - t0

        wanted = {m.model_id for m in models}
        index = model_index()
        index = index[index["model_id"].isin(wanted)].reset_index(drop=True)
        records = index.to_dict("records")
        t0 = time.perf_counter()
        analysis_tasks = [
            partial(analysis_job, name, records, profile.analysis.get(name, {}), str(data_dir), env, threads)
            for name in profile.analyses
        ]
        results = run_jobs(pool, analysis_tasks, desc="analyses")
        phase_seconds["analyses"] = time.perf_counter() - t0
    for result in results:
        say(f"analysis {result['name']}: {result.get('status', 'missing input')} ({result['seconds']} s)")
    sections = [section(r) for r in results]

    ctx = Context(index, repair=True, say=say)
    standing = ctx.standing()
    atomic.write_text(data_dir / "standing.csv", standing.to_csv(index=False))
    trainings = ctx.index[
        ["corpus", "family", "arch", "layers", "size", "budget", "params", "dropout", "seed", "n", "chars_trained",
         "val_loss", "seconds", "selected", "model_id"]
    ].copy()  # fmt: skip
    trainings["cached"] = trainings["model_id"].isin(done_before)
    trainings = trainings.sort_values(["corpus", "family", "arch", "n", "layers", "model_id"], ignore_index=True)
    ctx_report = ReportContext(
        profile=profile.name,
        profile_description=profile.description,
        corpora=[c.info() for c in loaded.values()],
        trainings=trainings.rename(columns={"size": "width", "budget": "budget row", "selected": "read by analyses"}),
        total_seconds=float(pd.to_numeric(index["seconds"], errors="coerce").fillna(0).sum()),
        sections=sections,
        versions=_versions(),
        git_revision=_git_revision(),
        config_hashes={"profile": profile.hash, **{m: m.rsplit("-", 1)[-1] for m in index["model_id"]}},
        generated_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        standing=standing_view(standing),
    )
    say("rendering HTML and PDF")
    html, pdf = render(ctx_report, out_dir)
    phase_seconds["total"] = time.perf_counter() - started
    atomic.write_text(data_dir / "timings.json", json.dumps({k: round(v, 1) for k, v in phase_seconds.items()}))
    say(f"done in {phase_seconds['total']:.0f} s: {html} and {pdf}")
    return html, pdf


def standing_view(standing: pd.DataFrame) -> pd.DataFrame:
    """The first page's table: each model's test nats beside the KenLM orders it beats."""
    if standing.empty:
        return standing
    view = standing[["corpus", "arch", "layers", "size", "budget", "params", "chars_trained", "ce_nats"]].copy()
    view["beats the n-grams of n <="] = standing["beats_ngram_up_to_n"].map(lambda n: str(n) if n else "none")
    return view.rename(columns={"size": "width", "budget": "budget row", "ce_nats": "test nats/char"})
