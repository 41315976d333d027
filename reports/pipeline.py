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
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pandas as pd

import corpora
from analyses import common
from analyses.context import Context, holds_results, model_index
from analyses.dropout_choice import dropouts_read, unread_networks
from charlm.estimate import benchmark, estimate, record_run
from charlm.estimate import machine as est_machine
from charlm.kinds import Job, Planned
from charlm.paths import artifacts_root
from charlm.plan import Profile, damage, left_out_line, plan_left_out
from charlm.schedule import duration
from charlm.shipped import PARTIAL, REPO, SHIPPED_ROOT, install_shipped, installed
from charlm.sweep import executor, run_graph
from corpora import atomic

from .render import FailedModel, ReportContext, UnshippedModel, render
from .sections import (
    analysis_job,
    analysis_part_job,
    analysis_parts,
    cached_analyses,
    cached_parts,
    error_line,
    failed_result,
    say,
    write_log,
)

BUILD_ROOT = Path("reports/build")
PACKAGES = (
    "torch", "numpy", "scipy", "pandas", "scikit-learn", "matplotlib", "seaborn", "jinja2", "weasyprint", "kenlm",
    "dask", "distributed", "h5py",
)  # fmt: skip


# ------------------------------------------------------------------------------------ failures


class ReportIncomplete(Exception):
    """The report was written, but some sections failed or some models could not be built (`failures`: one line
    each); raised at the end of `run`, so a script or CI sees it, after everything else was written."""

    def __init__(self, html: Path, pdf: Path, failures: list[str], logs: Path):
        self.html, self.pdf, self.failures, self.logs = html, pdf, failures, logs
        super().__init__(
            f"the report was written to {html} and {pdf}, but {'; '.join(failures)}; tracebacks in {logs}/"
        )


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
    record_timings: bool = False  # keep this run's measured seconds as the profile's record (charlm.estimate)
    adopt: list[tuple[str, str]] = field(default_factory=list)  # (MODEL.pt, VOCAB.json) to adopt (charlm.adopt)
    trust_pickle: bool = False  # an adopted file may be a whole pickled module (--trust-pickle)
    encoding: str = "utf-8"  # how the adopted models' code read the corpus into characters (--encoding)


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _git_revision() -> str:
    """HEAD's revision, "+uncommitted changes" when tracked files differ from it; models parked in training
    (models/partial/, which no run reads: `ship park` rewrites them every 15 minutes) do not count."""
    parked = (SHIPPED_ROOT / PARTIAL).relative_to(REPO).as_posix()
    try:
        rev = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no", "--", ".",
             f":(exclude){parked}"], capture_output=True, text=True,
        ).stdout.strip()  # fmt: skip
        return rev + ("+uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"


def model_jobs(
    models: list[Planned],
    problems: dict,
    env: dict,
    threads: int,
    splits: str,
    snapshots: bool,
    repair: bool = True,
    will_install: bool = False,
    unread: dict | None = None,
) -> list[Job]:
    """Every model's jobs (its kind makes them: train, build, score); with `repair`, damaged artifacts are removed
    first. With `will_install` (`--plan`, which installs nothing), a shipped model counts as built: it will be. A
    network in `unread` (`run_unread`: no analysis of the run reads its test split) is not scored."""
    jobs, unread = [], unread or {}
    for m in models:
        problem = problems[m.model_id]
        if problem not in (None, "not built") and repair:
            say(f"{m.model_id}: {problem}: recomputing it")
            shutil.rmtree(m.directory, ignore_errors=True)
        if problem == "not built" and m.shipped is not None and will_install:
            problem = None
        mine = m.kind.jobs(m, env, threads, splits, snapshots, problem)
        jobs += [j for j in mine if m.model_id not in unread or j.work is None or j.work.what != "score"]
    return jobs


def run_unread(profile: Profile, models: list[Planned]) -> dict[str, float]:
    """The networks of a run that none of its analyses reads Predictions of (analyses.dropout_choice.unread_networks,
    by what their contracts say they read: `Needs.dropouts`), with the dropout validation chose instead."""
    reads = dropouts_read([common.needs(common.load_analysis(name)) for name in profile.analyses])
    return unread_networks(models, reads)


def reused_models(models: list[Planned], jobs: list[Job], unread=()) -> int:
    """How many of a run's models were built before it (no job of theirs: their Predictions are there), those not
    scored because nothing reads them (`unread`: analyses.dropout_choice.unread_networks) aside."""
    return len({m.model_id for m in models} - {j.model.model_id for j in jobs} - set(unread))


def networks_read(models: list[Planned], left_out: list[Planned]) -> tuple[int, int]:
    """How many recurrent networks the analyses read (one per configuration and seed: a cell trained at several
    dropouts is read at the one validation chooses, analyses.context), and how many more once `left_out` ships."""

    def cell(m):  # a trained network's configuration but its dropout; an adopted one is its own
        c = m.config
        return (m.corpus.name, c.arch, c.layers, c.size, c.seed) if hasattr(c, "seed") else (m.corpus.name, m.model_id)

    def cells(ms):
        return {cell(m) for m in ms if m.kind.recurrent}

    now = cells(models)
    return len(now), len(cells(left_out) - now)


def later_jobs(left_out: list[Planned], splits: str, snapshots: bool) -> list[Job]:
    """The scoring each model left out (a shipping profile's, not shipped yet) will add to the run once it ships, as
    if installed: what the estimate's projection prices. A network of dropout above 0 is scored only where
    validation chooses it (analyses.dropout_choice.unread_networks), which no one knows before it is trained: the
    projection prices it unscored, as if validation keeps dropout 0 (its summary says so)."""
    return [
        j
        for m in left_out
        for j in m.kind.jobs(m, {}, 1, splits, snapshots, None)
        if j.work is not None and j.work.what == "score" and not float(getattr(m.config, "dropout", 0) or 0) > 0
    ]


def analysis_jobs(profile: Profile, models: list[Planned], model_jobs: list, data_dir: Path, log_dir: Path,
                  env: dict, threads: int, commands: dict) -> list[Job]:  # fmt: skip
    """One job per analysis, after the model jobs it reads: an analysis that reads Predictions waits for every model
    job; one that reads checkpoints alone (traces, probes, gradients) only for the models still to train."""
    wanted = sorted({m.model_id for m in models})
    training = tuple(j.key for j in model_jobs if j.work.what in ("train", "build") and j.model.kind.recurrent)
    everything = tuple(j.key for j in model_jobs)
    jobs = []
    for name in profile.analyses:
        reads = common.needs(common.load_analysis(name))
        before = everything if reads.predictions else training
        settings = profile.analysis.get(name, {})
        parts = [] if training else analysis_parts(name, wanted, settings)  # models to train: compute does it all
        for part in parts:
            run = partial(analysis_part_job, name, part, wanted, settings, env, threads)
            jobs.append(Job(f"part:{name}:{part}", run, after=before))
        run = partial(analysis_job, name, wanted, settings, str(data_dir), env, threads, commands[name],
                      str(log_dir / f"{name}.log"))  # fmt: skip
        jobs.append(Job(f"analysis:{name}", run, after=before + tuple(f"part:{name}:{p}" for p in parts)))
    return jobs


def run(options: RunOptions) -> tuple[Path, Path] | None:
    """Plan, build what is missing, run every analysis, render; returns the HTML and PDF paths. Raises
    ReportIncomplete after rendering when a section failed or a model could not be built."""
    started = time.perf_counter()
    profile = options.profile
    loaded, models, left_out = plan_left_out(
        profile, options.corpora_override, common.orders_read(profile.analyses), options.retrain
    )
    models += adopted_models(options, loaded)
    out_dir = options.build_root / profile.name
    data_dir, log_dir = out_dir / "data", out_dir / "logs"
    shutil.rmtree(log_dir, ignore_errors=True)  # the logs say what failed in this run, not in an earlier one
    say(f"profile {profile.name} ({profile.hash}): {profile.description}")
    if left_out:
        say(left_out_line(profile, left_out))
    stand_ins = [m for m in models if m.stand_in_for]
    if stand_ins:
        say(f"{len(stand_ins)} model(s) not shipped yet are stood in for by shipped ones of the same configuration "
            f"trained by an earlier stopping rule (`python -m reports --plan` lists them)")  # fmt: skip
    env = {"CHARLM_ARTIFACTS": str(artifacts_root().resolve()), "CORPORA_DIR": str(corpora.corpora_dir().resolve())}
    workers = options.workers or profile.run.get("workers") or max(1, (os.cpu_count() or 1) // 2)
    threads = max(1, (os.cpu_count() or 1) // workers)
    shippable = [m for m in models if m.kind.ships]
    if options.retrain:
        for m in shippable:
            if installed(m.directory):
                shutil.rmtree(m.directory)  # trained again below, from scratch
    else:
        by_dir = {m.directory: m for m in shippable}
        shipped = install_shipped(
            profile.name, [(m.corpus.artifact_name, m.model_id, m.directory) for m in shippable], say,
            is_whole=lambda d: damage(by_dir[d]) is None,
        )  # fmt: skip
        if shipped:
            fresh = sum(v == "installed" for v in shipped.values())
            say(f"shipped models: {len(shipped)} in models/{profile.name}/ ({fresh} installed now, "
                f"{sum(v == 'present' for v in shipped.values())} already in the artifacts)")  # fmt: skip
    problems = {m.model_id: damage(m) for m in models}  # each checkpoint hashed once per run
    snapshots = any(common.needs(common.load_analysis(a)).snapshots for a in profile.analyses)
    unread = run_unread(profile, models)
    jobs = model_jobs(models, problems, env, threads, profile.splits, snapshots, unread=unread)
    commands = {
        name: reproduce_command(name, options.profile_arg or profile.name, options.corpora_override,
                                profile.analysis.get(name, {}))
        for name in profile.analyses
    }  # fmt: skip
    analyses = analysis_jobs(profile, models, jobs, data_dir, log_dir, env, threads, commands)
    networks = sum(m.kind.recurrent for m in models)
    scheduler = options.scheduler or os.environ.get("DASK_SCHEDULER")
    bench_s = benchmark(workers)  # the machine's speed as the workers will find it: all of them at once
    later = later_jobs(left_out, profile.splits, snapshots)
    wanted = sorted({m.model_id for m in models})
    reused = cached_analyses(profile.analyses, wanted, profile.analysis, data_dir) | cached_parts(
        profile.analyses, wanted, profile.analysis
    )
    plan_estimate = estimate(profile.name, jobs, analyses, networks, workers, bench_s, later,
                             networks_read(models, left_out), warm=holds_results(), cached=reused,
                             reused_models=reused_models(models, jobs, unread), left_out=len(left_out))  # fmt: skip
    to_train = {j.model.model_id for j in jobs if j.work.what == "train" and j.model.kind.recurrent}
    say(
        f"plan: {networks} neural models ({networks - len(to_train)} cached, {len(to_train)} to train), "
        f"{sum(m.kind.name == 'ngram' for m in models)} n-grams, {sum(m.kind.name == 'nnn' for m in models)} n-NNs, "
        f"{len(jobs)} model jobs; analyses {', '.join(profile.analyses)}; "
        + (f"on the Dask cluster at {scheduler}" if scheduler else f"{workers} local worker(s) x {threads} thread(s)")
    )
    if unread:
        say(f"  {len(unread)} network(s) at a dropout validation did not choose are not scored: no analysis reads "
            "their test split (--plan names them)")  # fmt: skip
    for m in models:
        if m.model_id in to_train:
            c = m.config
            say(f"  will train {c.arch} L{c.layers} H{c.size} dropout {c.dropout:g} seed {c.seed} on {m.corpus.name}")
    for line in plan_estimate.summary():
        say(line)  # what the run will cost, before it starts (python -m reports --plan prints it per job)
    all_jobs = jobs + analyses
    with executor(scheduler, workers) as pool:
        t0 = time.perf_counter()
        outcomes = run_graph(pool, all_jobs, workers, desc="models and analyses")
        phase_seconds = {"jobs": time.perf_counter() - t0}
    failed_models = _model_failures(jobs, outcomes, log_dir)
    results = []
    for job in (j for j in analyses if j.key.startswith("analysis:")):
        name, result = job.key.split(":", 1)[1], outcomes[job.key]
        if isinstance(result, Exception):  # the job died outside the analysis (a lost worker), or its models failed
            result = failed_result(name, result, "its worker", commands[name], log_dir / f"{name}.log")
            result["seconds"] = float("nan")
        detail = f": {result['failed']} in {result['stage']} (traceback: {result['log']})" if "failed" in result else ""
        say(f"analysis {name}: {result['status']} ({result['seconds']} s){detail}")
        results.append(result)
    sections = [r["section"] for r in results]

    t0 = time.perf_counter()
    wanted = {m.model_id for m in models}
    index = model_index()
    index = index[index["model_id"].isin(wanted)].reset_index(drop=True)
    ctx = Context(index, repair=True, say=say)
    standing = ctx.standing()
    atomic.write_text(data_dir / "standing.csv", standing.to_csv(index=False))
    trainings = ctx.index[
        ["corpus", "family", "kind", "arch", "layers", "size", "budget", "params", "dropout", "seed", "n",
         "chars_trained", "val_loss", "seconds", "selected", "model_id"]
    ].copy()  # fmt: skip
    trainings["cached"] = trainings["model_id"].isin({k for k, p in problems.items() if p is None})
    trainings = trainings.sort_values(["corpus", "family", "arch", "n", "layers", "model_id"], ignore_index=True)
    epochs = [
        len(ctx.metrics(r).get("epochs") or []) if r["family"] == "neural" else None
        for _, r in ctx.index.set_index("model_id").loc[trainings["model_id"]].reset_index().iterrows()
    ]
    trainings["epochs"] = pd.array(epochs, dtype="Int64")  # model facts a sentence may state: from here
    atomic.write_text(data_dir / "models.csv", trainings.to_csv(index=False))
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
        limits=run_limits(ctx.index, standing, stand_ins, [m for m in models if m.kind.name == "adopted"]),
    )
    say("rendering HTML and PDF")
    html, pdf = render(ctx_report, out_dir)
    phase_seconds["render"] = time.perf_counter() - t0
    phase_seconds["total"] = time.perf_counter() - started
    timings = {
        "benchmark_s": round(bench_s, 4), "networks": networks, "render_s": round(phase_seconds["render"], 1),
        "jobs": {j.key: {"seconds": j.extra["seconds"], "what": j.work.what, "units": j.work.units,
                         "shape": j.work.shape, "params": j.work.params, "bytes": _bytes(j.model.directory)}
                 for j in jobs if "seconds" in j.extra and not isinstance(outcomes[j.key], Exception)},
        "analyses": {**{r["name"]: r["seconds"] for r in results if r.get("status") == "computed"},
                     **{j.key.split(":", 1)[1]: j.extra["seconds"] for j in analyses
                        if j.key.startswith("part:") and "seconds" in j.extra}},  # parts: "cells:<model id>"
        "measured": {"date": dt.date.today().isoformat(), "machine": est_machine(), "git": _git_revision(),
                     "workers": workers, "estimate_s": round(plan_estimate.wall_s, 1),
                     "estimate_unpriced": sum(j.priced_by.startswith("unpriced") for j in plan_estimate.jobs),
                     "phases_s": {k: round(v, 1) for k, v in phase_seconds.items()},
                     "artifacts_bytes": _bytes(artifacts_root()), "peak_rss_mb": _peak_rss_mb()},
    }  # fmt: skip
    atomic.write_json(data_dir / "timings.json", timings)
    if options.record_timings:
        say(f"recorded this run's seconds as profile {profile.name}'s: {record_run(profile.name, timings)}")
    estimated = f" (estimated {duration(plan_estimate.wall_s)})" if plan_estimate.wall_s > 0 else ""
    say(f"done in {duration(phase_seconds['total'])}{estimated}: {html} and {pdf}")
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


def _bytes(path: Path) -> int:
    path = Path(path)
    if not path.exists():
        return 0
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _peak_rss_mb() -> float:
    """The largest resident set of this process and of any worker it waited for (MB, Linux's kilobytes)."""
    import resource

    usage = (resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    peak = max(usage)
    return round(peak / 1024, 1)


def _model_failures(jobs: list, outcomes: dict, log_dir: Path) -> list[FailedModel]:
    """The model jobs that raised: their model, one-line error and traceback file (logs/<model id>.log)."""
    failed, seen = [], set()
    for job in jobs:
        outcome = outcomes.get(job.key)
        if isinstance(outcome, Exception) and job.model.model_id not in seen:
            seen.add(job.model.model_id)
            model = job.model
            log = write_log(log_dir / f"{model.model_id}.log", outcome, f"{model.model_id} ({model.kind.name}) failed")
            failed.append(FailedModel(model.model_id, model.corpus.name, error_line(outcome), str(log)))
            say(f"FAILED {model.model_id}: {error_line(outcome)} (traceback: {log})")
    return failed


def adopted_models(options: RunOptions, loaded: dict) -> list[Planned]:
    """The user's own networks (`--adopt MODEL.pt --vocab VOCAB.json`), adopted onto the run's one corpus (written
    to the artifacts once: its id hashes the files), as planned models of the adopted kind."""
    if not options.adopt:
        return []
    from charlm import adopt
    from charlm.checkpoint import load_payload
    from charlm.kinds.adopted import ADOPTED
    from charlm.model import ModelConfig
    from corpora.errors import UserError

    if len(loaded) != 1:
        raise UserError(f"--adopt reads one corpus (--corpus TEXT), got {len(loaded)}: {', '.join(loaded)}")
    ((arg, corpus),) = loaded.items()
    planned = []
    for model_path, vocab_path in options.adopt:
        adoption = adopt.adopt(
            model_path, vocab_path, corpus, trust_pickle=options.trust_pickle, encoding=options.encoding
        )
        if damage_adopted(adoption.folder):
            adopt.write(adoption)
        config = ModelConfig(**load_payload(adoption.folder / "checkpoint.pt")["config"])
        say(f"adopted {model_path} as {adoption.model_id} ({config.arch}, {config.layers} x {config.size})")
        planned.append(Planned(ADOPTED, arg, corpus, adoption.model_id, adoption.folder, config,
                               source=Path(model_path)))  # fmt: skip
    return planned


def damage_adopted(folder: Path) -> bool:
    from charlm.paths import complete_metrics

    return complete_metrics(folder / "metrics.json") is None


def run_limits(
    index: pd.DataFrame, standing: pd.DataFrame, stand_ins: list[Planned], adopted: list[Planned] = ()
) -> list[str]:
    """The first page's box: what this run's models are, from its model index (never typed: issue 36)."""
    from charlm.model import BUDGETS

    lines = []
    neural = index[(index["family"] == "neural") & index["selected"]]
    for corpus, sub in neural.groupby("corpus"):
        rows = sorted(int(b) for b in sub["budget"].dropna().unique())
        depths = sorted(int(n) for n in sub["layers"].unique())
        chars = sub["chars_trained"].dropna()  # none for an adopted network: trained elsewhere
        trained = f"trained on {int(chars.min()):,} to {int(chars.max()):,} characters; " if len(chars) else ""
        every = index[(index["family"] == "neural") & (index["corpus"] == corpus)]
        tried = every.groupby("variant")["dropout"].nunique()
        chosen = (
            f" (chosen on validation in the {int((tried > 1).sum())} configurations trained at "
            f"{'/'.join(f'{d:g}' for d in sorted(every['dropout'].unique()))})"
            if (tried > 1).any()
            else ""
        )
        lines.append(
            f"{corpus}: {len(sub)} networks, budget rows {', '.join(map(str, rows)) or 'none'} of Fig 1's "
            f"{', '.join(map(str, BUDGETS))}; {', '.join(map(str, depths))} layers; {trained}dropout "
            f"{', '.join(f'{d:g}' for d in sorted(sub['dropout'].unique()))}{chosen}."
        )
        seeds = sub.groupby("group_id")["seed"].nunique()
        if seeds.max() > 1:
            several, single = seeds[seeds > 1], int((seeds == 1).sum())
            lo, hi = int(several.min()), int(several.max())
            lines.append(
                f"{corpus}: {len(several)} configuration{'s have' if len(several) > 1 else ' has'} "
                f"{lo if lo == hi else f'{lo}-{hi}'} seeds; "
                f"the other {single} {'have' if single != 1 else 'has'} one, so "
                f"{'their' if single != 1 else 'its'} seed-to-seed noise is not measured."
            )
        if not standing.empty:
            mine = standing[standing["corpus"] == corpus]
            order = int(mine["ngram_orders"].max()) if len(mine) else 0
            behind = mine[mine["beats_ngram_up_to_n"] < 20] if order else mine.iloc[0:0]
            if len(behind):
                lines.append(
                    f"{corpus}: {len(behind)} of {len(mine)} networks do not beat every KenLM order up to "
                    f'the 20-gram on the test split (appendix, "Where the models stand").'
                )
    if stand_ins:
        lines.append(
            f"{len(stand_ins)} networks are shipped models trained by the earlier stopping rule (validation "
            "gaining under 0.002 nats per epoch), standing in for the same configurations retrained by the "
            "papers' rule (50 epochs, early stopping on validation) until those ship."
        )
    for m in adopted:
        c = m.config
        lines.append(
            f"{m.corpus.name}: {m.model_id} is your own {c.arch.upper()} ({c.layers} x {c.size}), adopted from "
            f"{m.source}: trained elsewhere, it has no training curve or snapshots, so convergence and "
            "training_dynamics leave it out; every other section reads it like the suite's own."
        )
    return lines


def standing_view(standing: pd.DataFrame) -> pd.DataFrame:
    """The first page's table: each model's test nats beside the KenLM orders it beats."""
    if standing.empty:
        return standing
    view = standing[["corpus", "arch", "layers", "size", "budget", "params", "chars_trained", "ce_nats"]].copy()
    view["beats the n-grams of n <="] = standing["beats_ngram_up_to_n"].map(lambda n: str(n) if n else "none")
    return view.rename(columns={"size": "width", "budget": "budget row", "ce_nats": "test nats/char"})
