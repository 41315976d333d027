"""One kind of error for bad input, and the CLI wrapper that turns it into one line and exit 2.

Every command-line entry point of the suite runs through `run_cli`, so a missing corpus, a
corrupt checkpoint or an impossible size never ends in a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

EXIT_BAD_INPUT = 2


class UserError(Exception):
    """Bad input from the user: printed as one line on stderr, exit code 2."""


def run_cli(main: Callable[[Sequence[str] | None], int | None], argv: Sequence[str] | None = None) -> int:
    """Run `main(argv)`; a UserError becomes `error: <message>` on stderr and exit code 2."""
    try:
        return int(main(argv) or 0)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted: completed artifacts are kept; rerun the same command to resume", file=sys.stderr)
        return 130


def parse_int_list(text: str, option: str) -> list[int]:
    """'1,2,3' -> [1, 2, 3] for a CLI option; anything else is one clear UserError."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"{option} takes integers separated by commas (e.g. 20 or 1,2,3), got '{text}'") from None
    if not values:
        raise UserError(f"{option} needs at least one value")
    return values


def add_corpus_arguments(parser: argparse.ArgumentParser) -> None:
    """--corpus and --splits, as every command that trains or scores reads them."""
    from .corpus import REGISTRY, SPLIT_MODES  # corpus.py imports this module

    parser.add_argument(
        "--corpus", required=True, help=f"registered corpus ({', '.join(REGISTRY)}) or a path to a text file"
    )
    parser.add_argument(
        "--splits",
        default="contiguous",
        choices=SPLIT_MODES,
        help="contiguous splits in file order (default) or char-rnn's, which the papers trained with",
    )
