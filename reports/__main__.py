"""`python -m reports --profile quick`: train what is missing, run every analysis, render the report.

Exit status: 0 when every section and model was made; 1 when the report was written but some sections failed or
some models could not be built (one line on stderr names them and the folder of their tracebacks); 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from charlm.plan import available, load_profile
from corpora.errors import run_cli

from .pipeline import BUILD_ROOT, ReportIncomplete, RunOptions, run

EXIT_INCOMPLETE = 1  # the report was written without some sections or models


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
    parser.add_argument("--workers", type=int, default=None, help="local worker processes (default: the profile's)")
    parser.add_argument(
        "--corpus", action="append", default=None, help="replace the profile's corpora (name or file path; repeatable)"
    )
    parser.add_argument(
        "--build-dir", type=Path, default=BUILD_ROOT, help="where reports are written (default %(default)s)"
    )
    parser.add_argument(
        "--plan", action="store_true",
        help="print every model the profile would train (type, depth, width, parameters, budget row, cached) and exit",
    )  # fmt: skip
    parser.add_argument(
        "--retrain", action="store_true",
        help="train the profile's shipped models (models/<profile>/) again instead of installing them",
    )  # fmt: skip
    args = parser.parse_args(argv)
    profile = load_profile(args.profile)
    options = RunOptions(
        profile, args.corpus, args.scheduler, args.workers, args.build_dir, plan_only=args.plan, retrain=args.retrain,
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
