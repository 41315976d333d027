"""`make report`: plan, train what is missing, run every analysis, render HTML + PDF.

Every step is cached by the full config of what it produces (model ids hash the training config
and the corpus bytes; analysis tables hash the models they read, their settings and every source
file their numbers depend on), so a rerun computes only what changed, and an interrupted run
resumes where it stopped. A damaged artifact (a truncated checkpoint, predictions file or n-gram
model) is found before it is used, recomputed, and said so.

A failure is contained where it happens (issue 23): an analysis that raises, in `compute`, `plot` or anything its
section calls, becomes a failed section (its one-line error, the command that reproduces it, its traceback in
<build>/<profile>/logs/<analysis>.log), and a training or baseline job that raises leaves its model out, listed
with its error at the top of the report; everything else still runs and renders. `run` then raises
`ReportIncomplete`, which names what failed, so `python -m reports` exits 1 after writing the HTML and PDF.

Nothing here is specific to one analysis: each declares what it needs (`NEEDS`) and gets a
`analyses.context.Context`; this module only plans, schedules and renders.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import subprocess
import time
import traceback
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pandas as pd

import corpora
from analyses import common
from analyses.context import Context, MissingInput, model_index
from charlm import cost
from charlm.paths import artifacts_root, checkpoint_predictions_path, config_hash
from charlm.plan import Planned, Profile, damage, left_out_line, plan_left_out, submission_order
from charlm.shipped import install_shipped, installed
from charlm.sweep import executor, run_jobs
from corpora import atomic

from .render import FailedModel, ReportContext, Section, UnshippedModel, render

BUILD_ROOT = Path("reports/build")
PACKAGES = (
    "torch", "numpy", "scipy", "pandas", "scikit-learn", "matplotlib", "seaborn", "jinja2", "weasyprint", "kenlm",
    "dask", "distributed", "h5py",
)  # fmt: skip


def say(message: str) -> None:
    print(f"[report] {message}", flush=True)


# ------------------------------------------------------------------------------------ failures


class ReportIncomplete(Exception):
    """The report was written, but some sections failed or some models could not be built (`failures`: one line
    each); raised at the end of `run`, so a script or CI sees it, after everything else was written."""

    def __init__(self, html: Path, pdf: Path, failures: list[str], logs: Path):
        self.html, self.pdf, self.failures, self.logs = html, pdf, failures, logs
        super().__init__(
            f"the report was written to {html} and {pdf}, but {'; '.join(failures)}; tracebacks in {logs}/"
        )


def error_line(err: BaseException, limit: int = 300) -> str:
    """An exception as the report shows it: "ValueError: its first line" (cut to `limit` characters)."""
    lines = str(err).strip().splitlines()
    text = f"{type(err).__name__}: {lines[0].strip()}" if lines else type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def write_log(path: Path, err: BaseException, what: str) -> Path:
    """The full traceback of `err` (a worker's too: a local pool chains it as the cause) to `path`, atomically."""
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    atomic.write_text(path, f"{what}\n{stamp}\n\n" + "".join(traceback.format_exception(err)))
    return path


def reproduce_command(name: str, profile: str, corpora_override: list[str] | None, settings: dict) -> str:
    """The analysis's own CLI on the same models and settings (analyses/common.py analysis_parser): the profile
    chooses the models, --corpus the corpora a run overrode, --set the profile's [analysis.<name>] settings."""
    args = ["python", "-m", f"analyses.{name}", "--profile", profile]
    for corpus in corpora_override or []:
        args += ["--corpus", str(corpus)]
    for key, value in settings.items():
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        args += ["--set", f"{key}={text}"]
    return shlex.join(args)


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
            predict_checkpoint(out / snap["file"], "test", progress=False, corpus=corpus, sample_only=True)
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


def analysis_job(
    name: str,
    index: list[dict],
    profile_settings: dict,
    data_dir: str,
    env: dict,
    threads: int,
    command: str = "",
    log: str | None = None,
) -> dict:
    """Run one analysis (or read its cached table) and build its report section; returns {"name", "status",
    "seconds", "section"} and, when it raised, "failed" (its one-line error) and "log" (its traceback's file).

    Any exception of the analysis (in compute, plot, caption or any other function its section calls) is caught
    here, in the worker, where its traceback is whole; its table is then not keyed as good, so the next run
    computes it again. A KeyboardInterrupt is not caught: it stops the run."""
    started = time.perf_counter()
    data = Path(data_dir)
    table_path, key_path, figure_path = data / f"{name}.csv", data / f"{name}.key", data / f"{name}.png"
    stage = "setup"
    try:
        _worker_env(env, threads)
        module = common.load_analysis(name)
        frame = pd.DataFrame(index)
        settings = common.settings(module, profile_settings)
        key = config_hash(
            {"analysis": name, "source": common.source_digest(module), "settings": settings,
             "models": sorted(frame["model_id"] + ":" + frame["digest"].astype(str) + ":" + frame["dir"])},
            16,
        )  # fmt: skip
        if key_path.exists() and key_path.read_text().strip() == key and table_path.exists():
            status = "cached"
        else:
            key_path.unlink(missing_ok=True)  # the table below is not good until every step has run
            ctx = Context(frame, settings, repair=True, say=say)
            stage = "compute(ctx)"
            try:
                df = common.run_module(module, ctx)
            except MissingInput as err:
                result = {"name": name, "missing": str(err), "seconds": round(time.perf_counter() - started, 1)}
                return {**result, "status": "missing input", "section": section(result)}
            common.save_table(df, table_path)
            stage = "plot(df)"
            figure = module.plot(df)
            if figure is None:  # nothing worth drawing (e.g. text samples)
                figure_path.unlink(missing_ok=True)
            else:
                common.save_figure(figure, figure_path)
            status = "computed"
        result = {"name": name, "table": str(table_path), "figure": str(figure_path) if figure_path.exists() else None,
                  "status": status}  # fmt: skip
        stage = "the report section"
        result["section"] = section(result, raise_errors=True)
        if status == "computed":
            atomic.write_text(key_path, key)  # only now: a section that fails to build is computed again next run
    except Exception as err:
        key_path.unlink(missing_ok=True)
        stage = getattr(err, "report_stage", stage)
        result = failed_result(name, err, stage, command, Path(log) if log else None)
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def failed_result(name: str, err: BaseException, stage: str, command: str, log: Path | None) -> dict:
    """What a failed analysis's section shows: the error, where it happened, how to reproduce it, its traceback."""
    if command and stage == "plot(df)":
        command += " " + shlex.join(["--figure", f"{name}.png"])  # the CLI draws only when asked
    if log is not None:
        write_log(log, err, f"analysis {name} failed in {stage}; reproduce with: {command}")
    result = {"name": name, "failed": error_line(err), "stage": stage, "command": command,
              "log": str(log) if log is not None else "", "status": "FAILED"}  # fmt: skip
    result["section"] = section(result)
    return result


def _stage(name: str, call, *args):
    try:
        return call(*args)
    except Exception as err:
        err.report_stage = name  # read by analysis_job: the report says where it failed
        raise


def section(result: dict, raise_errors: bool = False) -> Section:
    """A report section from an analysis job's result (the module supplies title, caption, paper numbers).

    A result that failed (or whose section cannot be built, unless `raise_errors`) gives a failed section."""
    name = result["name"]
    try:
        module = common.load_analysis(name)
        base = {"name": name, "title": module.TITLE, "question": module.QUESTION}
    except Exception:  # the module does not even import: its name stands for its title
        module, base = None, {"name": name, "title": name, "question": ""}
    if "failed" in result:
        return Section(
            **base, caption="", table=pd.DataFrame(), figure=None, failed=result["failed"],
            failed_in=result.get("stage", ""), command=result.get("command", ""), log=result.get("log", ""),
        )  # fmt: skip
    if "missing" in result:
        return Section(
            **base, caption=f"Not computed: {result['missing']}.", table=pd.DataFrame(), figure=None,
            missing=result["missing"],
        )  # fmt: skip
    try:
        df = common.read_table(Path(result["table"]))
        return _computed_section(module, base, df, result["figure"])
    except Exception as err:
        if raise_errors:
            raise
        stage = getattr(err, "report_stage", "the report section")
        return section({**result, "failed": error_line(err), "stage": stage})


def _computed_section(module, base: dict, df: pd.DataFrame, figure: str | None) -> Section:
    def optional(part: str, default):
        return _stage(f"{part}(df)", getattr(module, part), df) if hasattr(module, part) else default

    paper = None
    if hasattr(module, "report_table"):
        table = _stage("report_table(df)", module.report_table, df)
    elif hasattr(module, "with_paper"):
        table = _stage("with_paper(df)", module.with_paper, df)
    else:
        table = df
    if not hasattr(module, "with_paper") and hasattr(module, "paper_table"):
        paper = _stage("paper_table()", module.paper_table)
    return Section(
        **base, caption=_stage("caption(df)", module.caption, df), table=table, figure=figure, paper_table=paper,
        paper_source=getattr(module, "PAPER_SOURCE", ""), notes=optional("notes", []),
        summary=optional("summary", ""), html=optional("report_html", ""),
    )  # fmt: skip


# ------------------------------------------------------------------------------------ the run


@dataclass
class RunOptions:
    profile: Profile
    corpora_override: list[str] | None = None  # paths or names replacing the profile's corpora (tests)
    scheduler: str | None = None  # Dask scheduler address; None: local processes
    workers: int | None = None
    build_root: Path = BUILD_ROOT
    retrain: bool = False  # train the profile's shipped models again instead of installing them
    profile_arg: str | None = None  # the profile as the user named it (a name or a .toml path): for the commands
    # that reproduce a failed section; None: the profile's name


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
    todo = []
    for m in models:
        problem = problems[m.model_id]
        if problem is None:
            if m.kind == "neural" and predictions_missing(m, snapshots):
                todo.append(m)
            continue  # complete (n-gram and n-NN predictions are checked, and made if missing, when read)
        if problem != "not built":
            say(f"{m.model_id}: {problem}: recomputing it")
            shutil.rmtree(m.directory, ignore_errors=True)
        todo.append(m)
    jobs = []
    for m in submission_order(todo, len({m.corpus_arg for m in models})):
        if m.kind == "neural":
            jobs.append(partial(train_job, m.config.__dict__, env, threads, profile.splits, snapshots))
        elif m.kind == "ngram":
            jobs.append(partial(ngram_job, m.corpus_arg, m.n, env, threads, profile.splits))
        else:
            jobs.append(partial(nnn_job, m.corpus_arg, m.n, m.options, env, threads, profile.splits))
    return jobs


_JOB_KINDS = {"train_job": "neural", "ngram_job": "ngram", "nnn_job": "nnn"}


def job_model(job: partial, models: list[Planned]) -> Planned:
    """The model a job of `_jobs` computes (the network of its config, or the baseline of its corpus and order)."""
    kind = _JOB_KINDS[job.func.__name__]
    for m in models:
        if m.kind == kind and (
            m.config.__dict__ == job.args[0] if kind == "neural" else (m.corpus_arg, m.n) == tuple(job.args[:2])
        ):
            return m
    raise LookupError(f"no planned model for the job {job.func.__name__}{job.args[:2]}")


def _model_failures(jobs: list, outcomes: list, models: list[Planned], log_dir: Path) -> list[FailedModel]:
    """The jobs that raised: their model, one-line error and traceback file (logs/<model id>.log)."""
    failed = []
    for job, outcome in zip(jobs, outcomes):
        if isinstance(outcome, Exception):
            model = job_model(job, models)
            log = write_log(log_dir / f"{model.model_id}.log", outcome, f"{model.model_id} ({model.kind}) failed")
            failed.append(FailedModel(model.model_id, model.corpus.name, error_line(outcome), str(log)))
            say(f"FAILED {model.model_id}: {error_line(outcome)} (traceback: {log})")
    return failed


def run(options: RunOptions) -> tuple[Path, Path] | None:
    """Plan, build what is missing, run every analysis, render; returns the HTML and PDF paths. Raises
    ReportIncomplete after rendering when a section failed or a model could not be built."""
    started = time.perf_counter()
    profile = options.profile
    loaded, models, left_out = plan_left_out(
        profile, options.corpora_override, common.orders_read(profile.analyses), options.retrain
    )
    out_dir = options.build_root / profile.name
    data_dir = out_dir / "data"
    log_dir = out_dir / "logs"
    shutil.rmtree(log_dir, ignore_errors=True)  # the logs say what failed in this run, not in an earlier one
    say(f"profile {profile.name} ({profile.hash}): {profile.description}")
    if left_out:
        say(left_out_line(profile, left_out))
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
    snaps = any(common.needs(common.load_analysis(a)).snapshots for a in profile.analyses)
    estimate = cost.estimate(profile, models, workers, threads, snaps, problems, out_dir, options.retrain, say=say)
    for line in estimate.summary():
        say(line)  # what the run will cost, before it starts (python -m reports --plan prints it per model)
    phase_seconds = {}
    with executor(scheduler, workers) as pool:
        t0 = time.perf_counter()
        outcomes = (
            run_jobs(
                pool, jobs, desc="train and score", return_exceptions=True, estimates=estimate.job_seconds(jobs),
                workers=workers,
            )
            if jobs
            else []
        )  # fmt: skip
        failed_models = _model_failures(jobs, outcomes, models, log_dir)
        phase_seconds["models"] = time.perf_counter() - t0

        wanted = {m.model_id for m in models}
        index = model_index()
        index = index[index["model_id"].isin(wanted)].reset_index(drop=True)
        records = index.to_dict("records")
        t0 = time.perf_counter()
        commands = {
            name: reproduce_command(name, options.profile_arg or profile.name, options.corpora_override,
                                    profile.analysis.get(name, {}))
            for name in profile.analyses
        }  # fmt: skip
        order = estimate.analysis_order()  # longest first: the run does not end waiting for one long analysis
        analysis_tasks = [
            partial(analysis_job, name, records, profile.analysis.get(name, {}), str(data_dir), env, threads,
                    commands[name], str(log_dir / f"{name}.log"))
            for name in order
        ]  # fmt: skip
        seconds = dict(estimate.analyses)
        finished = run_jobs(pool, analysis_tasks, desc="analyses", return_exceptions=True,
                            estimates=[seconds[name] for name in order], workers=workers)  # fmt: skip
        by_name = dict(zip(order, finished, strict=True))
        results = [by_name[name] for name in profile.analyses]  # the report keeps the profile's order
        phase_seconds["analyses"] = time.perf_counter() - t0
    for k, (name, result) in enumerate(zip(profile.analyses, results)):
        if isinstance(result, Exception):  # the job died outside the analysis (a lost worker, say)
            results[k] = result = failed_result(name, result, "its worker", commands[name], log_dir / f"{name}.log")
            result["seconds"] = float("nan")
        detail = f": {result['failed']} in {result['stage']} (traceback: {result['log']})" if "failed" in result else ""
        say(f"analysis {name}: {result['status']} ({result['seconds']} s){detail}")
    sections = [r["section"] for r in results]

    t0 = time.perf_counter()
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
        failed_models=failed_models,
        unshipped_models=[UnshippedModel(m.model_id, m.corpus.name) for m in left_out],
    )
    say("rendering HTML and PDF")
    html, pdf = render(ctx_report, out_dir)
    phase_seconds["render"] = time.perf_counter() - t0
    if not scheduler:  # a cluster's workers are other machines: their seconds would price this one wrongly
        computed = {r["name"]: r["seconds"] for r in results if r.get("status") == "computed"}
        cost.record_report_seconds(estimate.calibration, profile.name, threads,
                                   {**computed, "render": phase_seconds["render"]})  # fmt: skip
    phase_seconds["total"] = time.perf_counter() - started
    atomic.write_text(data_dir / "timings.json", json.dumps({k: round(v, 1) for k, v in phase_seconds.items()}))
    say(f"done in {phase_seconds['total']:.0f} s: {html} and {pdf}")
    failures = []
    failed_sections = [s.name for s in sections if s.failed]
    if failed_sections:
        failures.append(f"{len(failed_sections)} section(s) failed: {', '.join(failed_sections)}")
    if failed_models:
        names = ", ".join(m.model for m in failed_models)
        failures.append(f"{len(failed_models)} model(s) could not be built: {names}")
    if failures:
        raise ReportIncomplete(html, pdf, failures, log_dir)
    return html, pdf


def standing_view(standing: pd.DataFrame) -> pd.DataFrame:
    """The first page's table: each model's test nats beside the KenLM orders it beats."""
    if standing.empty:
        return standing
    view = standing[["corpus", "arch", "layers", "size", "budget", "params", "chars_trained", "ce_nats"]].copy()
    view["beats the n-grams of n <="] = standing["beats_ngram_up_to_n"].map(lambda n: str(n) if n else "none")
    return view.rename(columns={"size": "width", "budget": "budget row", "ce_nats": "test nats/char"})
