"""`python -m reports`: train what is missing, run every analysis, render the report.

The profile is `reference` (the shipped converged models, what `make report` runs) unless --corpus names corpora of
your own: then `quick`, which trains every section's networks on them here (the repository ships none for them).

Exit status: 0 when every section and model was made; 1 when the report was written but some sections failed or
some models could not be built (one line on stderr names them and the folder of their tracebacks); 2 on bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pandas as pd

from analyses import common
from analyses.context import holds_results
from charlm.adopt import ENCODINGS
from charlm.estimate import Estimate, estimate
from charlm.kinds import Planned
from charlm.plan import (
    Profile,
    available,
    check_networks_served,
    damage,
    left_out_line,
    load_profile,
    plan_left_out,
)
from corpora.errors import run_cli

from .pipeline import (
    BUILD_ROOT,
    ReportIncomplete,
    RunOptions,
    analysis_jobs,
    later_jobs,
    model_jobs,
    networks_read,
    reused_models,
    run,
    run_unread,
)
from .sections import cached_analyses, cached_parts

EXIT_INCOMPLETE = 1  # the report was written without some sections or models
DEFAULT_PROFILE = "reference"  # the shipped converged models: what `make report` runs
OWN_CORPUS_PROFILE = "quick"  # with --corpus: trains its networks here (none ship for a corpus of yours)


def profile_name(profile: str | None, corpus: list[str] | None) -> str:
    """--profile, else `quick` when --corpus replaces the corpora, else `reference`."""
    return profile or (OWN_CORPUS_PROFILE if corpus else DEFAULT_PROFILE)


def workers_for(profile: Profile, workers: int | None) -> int:
    """--workers, else the profile's [run] workers, else half the cores (as reports.pipeline.run picks them)."""
    return workers or profile.run.get("workers") or max(1, (os.cpu_count() or 1) // 2)


def plan(profile: Profile, args) -> tuple[pd.DataFrame, Estimate, list[Planned]]:
    """Every model of the run with its jobs priced (charlm.estimate), as `run` would plan them; installs nothing."""
    _, models, left_out = plan_left_out(profile, args.corpus, common.orders_read(profile.analyses), args.retrain)
    problems = {m.model_id: damage(m) for m in models}
    snapshots = any(common.needs(common.load_analysis(a)).snapshots for a in profile.analyses)
    workers = workers_for(profile, args.workers)
    unread = run_unread(profile, models)
    jobs = model_jobs(models, problems, {}, 1, profile.splits, snapshots, repair=False, will_install=not args.retrain,
                      unread=unread)  # fmt: skip
    commands = dict.fromkeys(profile.analyses, "")
    analyses = analysis_jobs(profile, models, jobs, Path("."), Path("."), {}, 1, commands)
    later = later_jobs(left_out, profile.splits, snapshots)
    data_dir = args.build_dir / profile.name / "data"  # where an earlier run's results lie, as `run` writes them
    wanted = sorted({m.model_id for m in models})
    reused = cached_analyses(profile.analyses, wanted, profile.analysis, data_dir) | cached_parts(
        profile.analyses, wanted, profile.analysis
    )
    priced = estimate(profile.name, jobs, analyses, sum(m.kind.recurrent for m in models), workers, later=later,
                      read=networks_read(models, left_out), warm=holds_results(), cached=reused,
                      reused_models=reused_models(models, jobs, unread), left_out=len(left_out))  # fmt: skip
    by_model: dict[str, list] = {}
    for job in jobs:
        by_model.setdefault(job.model.model_id, []).append(job)
    rows = []
    for m in models:
        mine = by_model.get(m.model_id, [])
        status = "to train" if any(j.work.what in ("train", "build") for j in mine) else (
            "to score" if mine else "done")  # fmt: skip
        if m.model_id in unread:
            status += f", not scored (validation chose dropout {unread[m.model_id]:g})"
        if m.stand_in_for:
            status += f" (stands in for {m.stand_in_for})"
        rows.append({"corpus": m.corpus.name, "kind": m.kind.name, **m.kind.describe(m), "model": m.model_id,
                     "status": status, "jobs": " + ".join(j.work.what for j in mine),
                     "est. seconds": round(sum(j.seconds for j in mine)),
                     "priced by": "; ".join(sorted({j.priced_by for j in mine}))})  # fmt: skip
    for job in analyses:
        rows.append({"corpus": "", "kind": "analysis", "arch": job.key.split(":", 1)[1], "status": "to run",
                     "est. seconds": round(job.seconds), "priced by": job.priced_by})  # fmt: skip
    return pd.DataFrame(rows), priced, left_out


def shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """The plan as it is printed: a column of whole numbers (depth, width, seed, parameters; float only because the
    n-grams and analyses leave them empty) written as integers, and empty cells blank."""
    shown = table.astype(object)
    for name, column in table.items():
        values = column.dropna()
        if column.dtype.kind == "f" and len(values) and (values == values.round()).all():
            shown[name] = column.astype("Int64").astype(object)
    return shown.where(table.notna(), "")


def dropouts_said(profile: Profile) -> str:
    """The profile's dropouts as --plan says them: the [train] grid, and each [[grid]] table's own with its search."""
    own = [f"{g['dropouts']} in {'/'.join(g['types'])} x {g['layers']} layers x row {g['budgets']}"
           + (" (searched by line)" if g.get("dropout_search") == "line" else "")
           for g in profile.grid if "dropouts" in g]  # fmt: skip
    return "; ".join([f"{profile.dropouts} elsewhere" if own else str(profile.dropouts), *own])


def print_plan(profile: Profile, table: pd.DataFrame, priced: Estimate, left_out: list[Planned]) -> None:
    shown = shown_table(table)
    with pd.option_context("display.max_rows", 1000, "display.width", 250, "display.max_colwidth", 60):
        print(shown.to_string(index=False))
    print(f"\nprofile {profile.name}: {int((table['kind'] != 'analysis').sum())} models; dropouts "
          f"{dropouts_said(profile)}; analyses: {', '.join(profile.analyses)}")  # fmt: skip
    for line in priced.summary():
        print(line)
    if left_out:
        print(left_out_line(profile, left_out))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports", description=__doc__.split("\n")[0].split(": ", 1)[1])
    parser.add_argument(
        "--profile",
        default=None,
        help=f"one of {', '.join(available())}, or a .toml path (default {DEFAULT_PROFILE}, the shipped models; "
        f"with --corpus {OWN_CORPUS_PROFILE}, which trains them here)",
    )
    parser.add_argument(
        "--scheduler",
        default=None,
        help="Dask scheduler address, e.g. tcp://host:8786 (default: $DASK_SCHEDULER, else local processes)",
    )
    parser.add_argument(
        "--workers", type=int, default=None,
        help="worker processes (default: the profile's); with --plan, the workers the wall time is estimated for",
    )  # fmt: skip
    parser.add_argument(
        "--corpus", action="append", default=None, help="replace the profile's corpora (name or file path; repeatable)"
    )
    parser.add_argument(
        "--build-dir", type=Path, default=BUILD_ROOT, help="where reports are written (default %(default)s)"
    )
    parser.add_argument(
        "--plan", action="store_true",
        help="print every model and analysis of the run (type, depth, width, parameters, budget row, status, jobs) "
        "with its estimated seconds and how they were priced (charlm.estimate), the wall time and disk, and exit",
    )  # fmt: skip
    parser.add_argument(
        "--adopt", metavar="MODEL.pt", action="append", default=[],
        help="your own PyTorch character LM (a state_dict; charlm.adopt): adopted onto the suite's cells and put in "
        "the report beside the profile's models and the corpus's baselines; needs --vocab and one --corpus",
    )  # fmt: skip
    parser.add_argument(
        "--vocab", metavar="VOCAB.json", action="append", default=[],
        help="the vocabulary of each --adopt model: a JSON list (class i's character) or a {character: index} map",
    )  # fmt: skip
    parser.add_argument(
        "--trust-pickle", action="store_true", help="an --adopt file may be a whole pickled module (runs its code)"
    )
    parser.add_argument(
        "--encoding", choices=ENCODINGS, default="utf-8",
        help="how your --adopt model's code read the corpus into characters (default %(default)s: ASCII classes; "
        "latin-1: one class per byte value)",
    )  # fmt: skip
    parser.add_argument(
        "--record-timings", action="store_true",
        help="after the run, keep its measured seconds as the profile's record "
        "(charlm/profiles/<profile>.timings.json), what the estimate prices runs by: `make timings`",
    )  # fmt: skip
    parser.add_argument(
        "--retrain", action="store_true",
        help="train the profile's shipped models (models/<profile>/) again instead of installing them, and those it "
        "does not ship yet (a profile that ships its models otherwise leaves those out)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    args.profile = profile_name(args.profile, args.corpus)
    profile = load_profile(args.profile)
    if len(args.adopt) != len(args.vocab):
        parser.error(f"each --adopt needs its --vocab: {len(args.adopt)} --adopt and {len(args.vocab)} --vocab")
    if args.adopt and (not args.corpus or len(args.corpus) != 1):
        parser.error("--adopt needs exactly one --corpus: the text the model reads (its test split is scored)")
    if args.corpus and profile.ships_models and not (args.retrain or args.adopt):
        _, models, left_out = plan_left_out(profile, args.corpus, common.orders_read(profile.analyses))
        check_networks_served(profile, models, left_out)
    if args.plan:
        print_plan(profile, *plan(profile, args))
        return 0
    options = RunOptions(
        profile, args.corpus, args.scheduler, args.workers, args.build_dir, retrain=args.retrain,
        profile_arg=args.profile, record_timings=args.record_timings, adopt=list(zip(args.adopt, args.vocab)),
        trust_pickle=args.trust_pickle,
        encoding=args.encoding,
    )  # fmt: skip
    try:
        run(options)
    except ReportIncomplete as err:
        print(f"incomplete: {err}", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
