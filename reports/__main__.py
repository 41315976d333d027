"""`python -m reports --profile quick`: train what is missing, run every analysis, render the report.

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
from charlm import cost
from charlm.plan import Planned, Profile, available, left_out_line, load_profile, plan_left_out
from corpora.errors import run_cli

from .pipeline import BUILD_ROOT, ReportIncomplete, RunOptions, run

EXIT_INCOMPLETE = 1  # the report was written without some sections or models


def workers_for(profile: Profile, workers: int | None) -> int:
    """--workers, else the profile's [run] workers, else half the cores (as reports.pipeline.run picks them)."""
    return workers or profile.run.get("workers") or max(1, (os.cpu_count() or 1) // 2)


def reads_snapshots(profile: Profile) -> bool:
    """Whether the profile's analyses read the training snapshots' predictions (then every snapshot is scored)."""
    return any(common.needs(common.load_analysis(a)).snapshots for a in profile.analyses)


def plan_estimate(profile: Profile, args, models: list[Planned], redo: bool) -> cost.Estimate:
    calibration = cost.Calibration(redo=redo)
    return cost.estimate(
        profile, models, workers_for(profile, args.workers), snapshots=reads_snapshots(profile),
        build_dir=args.build_dir / profile.name, retrain=args.retrain, calibration=calibration, calibrate=True,
    )  # fmt: skip


def print_plan(
    profile: Profile, models: list[Planned], estimate: cost.Estimate, left_out: list[Planned] = ()
) -> pd.DataFrame:
    """Every model with what it costs, then the totals (charlm.cost.Estimate.summary)."""
    table = pd.DataFrame([m.row(c) for m, c in zip(models, estimate.costs, strict=True)])
    for column in ("layers", "width", "seed", "params", "train chars", "est. seconds", "disk MB", "trained s", "CPU s"):
        table[column] = table[column].astype("Int64").astype(object)  # integers, and blanks for baselines
    table = table.drop(columns=["cached", "shipped"]).astype(object).where(table.notna(), "")  # status says both
    with pd.option_context("display.max_rows", 1000, "display.width", 250):
        print(table.to_string(index=False))
    neural = table[table["kind"] == "neural"]
    print(
        f"\nprofile {profile.name}: {len(table)} models ({len(neural)} neural); dropout grid {profile.dropouts}; "
        f"analyses: {', '.join(profile.analyses)}"
    )
    for line in estimate.summary():
        print(line)
    if left_out:
        print(left_out_line(profile, left_out))
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports", description=__doc__.split("\n")[0].split(": ", 1)[1])
    parser.add_argument(
        "--profile", default="quick", help=f"one of {', '.join(available())}, or a .toml path (default %(default)s)"
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
        help="print every model the profile would train (type, depth, width, parameters, budget row, status) with "
        "its estimated characters, epochs, seconds and disk, the totals and the wall time, and exit",
    )  # fmt: skip
    parser.add_argument(
        "--calibrate", action="store_true",
        help="measure this machine's throughput for the profile's models again (cached in "
        f"{cost.cache_dir()}/calibration-<machine>.json; a few seconds per architecture and width)",
    )  # fmt: skip
    parser.add_argument(
        "--retrain", action="store_true",
        help="train the profile's shipped models (models/<profile>/) again instead of installing them, and those it "
        "does not ship yet (a profile that ships its models otherwise leaves those out)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    profile = load_profile(args.profile)
    if args.plan or args.calibrate:
        _, models, left_out = plan_left_out(profile, args.corpus, common.orders_read(profile.analyses), args.retrain)
        estimate = plan_estimate(profile, args, models, redo=args.calibrate)
        if args.plan:
            print_plan(profile, models, estimate, left_out)
            return 0
    options = RunOptions(
        profile, args.corpus, args.scheduler, args.workers, args.build_dir, retrain=args.retrain,
        profile_arg=args.profile,
    )  # fmt: skip
    try:
        run(options)
    except ReportIncomplete as err:
        print(f"incomplete: {err}", file=sys.stderr)
        return EXIT_INCOMPLETE
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
