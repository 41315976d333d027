"""`python -m corpora {info,fetch,build}`: inspect, download or build a corpus."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .corpus import REGISTRY, SPLIT_MODES, corpora_dir, load
from .errors import run_cli
from .sources import build, fetch


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m corpora",
        description=f"Character corpora of the suite. Files are read from $CORPORA_DIR (now: {corpora_dir()}).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("info", help="size in bytes, vocabulary size, sha256 and split sizes")
    p.add_argument("name", help=f"one of {', '.join(REGISTRY)}, or a path to a text file")
    p.add_argument(
        "--splits",
        default="contiguous",
        choices=SPLIT_MODES,
        help="contiguous in file order (default) or char-rnn's interleaved splits",
    )
    p = sub.add_parser("fetch", help="download a corpus and verify its sha256")
    p.add_argument("name", choices=sorted(n for n, s in REGISTRY.items() if s.url))
    p.add_argument("--url", help="download from this address instead of the registry's")
    p = sub.add_parser("build", help="build the Linux corpus from a kernel source tree or tarball")
    p.add_argument("name", choices=["linux"])
    p.add_argument("--from", dest="source", required=True, type=Path, help="kernel source tree or .tar[.gz|.xz]")
    p.add_argument(
        "--no-verify",
        action="store_true",
        help="keep the result even if it is not the registered file (another kernel version)",
    )
    args = parser.parse_args(argv)

    if args.command == "info":
        info = load(args.name, split_mode=args.splits).info()
        print(f"corpus      {info['name']}")
        print(f"bytes       {info['bytes']:,}")
        print(f"vocabulary  {info['vocab_size']} symbols")
        print(f"sha256      {info['sha256']}")
        print(f"splits      {info['split_mode']}")
        for split, n in info["splits"].items():
            print(f"{split:<11} {n:,} bytes")
    elif args.command == "fetch":
        print(f"wrote {fetch(args.name, url=args.url)}")
    else:
        print(f"wrote {build(args.name, args.source, verify=not args.no_verify)}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
