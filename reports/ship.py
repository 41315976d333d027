"""Shipped models: train a profile's recurrent models with their provenance, pack them into the repository.

The `reference` profile's models are trained once, on a 2-core CPU, and shipped with the suite, so every user
reads converged models without training them (README, "Shipped models"):

    python -m reports.ship train --profile reference   # train each planned model in turn (resumable), one thread
    python -m reports.ship pack --profile reference    # copy the finished ones into models/reference/ + manifests

`train` records, beside each model's artifacts, the exact command, the git revision of the code, the machine,
the dates and the wall time of every session that trained it (provenance.json): a model trained across several
sessions lists each. `pack` copies each finished model's best checkpoint, the snapshots the analyses read and its
metrics into `models/<profile>/<corpus>/<model id>/` with a manifest.json holding that provenance and the sha256 of
every file. The pipeline installs them from there (reports.pipeline) and tests/test_shipped.py proves that the
recorded config, trained again for the first snapshot's steps, gives that snapshot's weights bit for bit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import corpora
from charlm.plan import available, load_profile
from corpora import atomic
from corpora.errors import run_cli

FUSED = ("lstm", "rnn", "gru", "lstm-gates")  # trained with torch's fused kernels (charlm.train fused=True)
PROVENANCE = "provenance.json"


def git_revision(cwd: Path | None = None) -> dict:
    """The checked-out commit and whether tracked files differ from it (the code that runs is then not that commit)."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, cwd=cwd)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, cwd=cwd
        )
        return {"commit": rev.stdout.strip(), "uncommitted_changes": bool(dirty.stdout.strip())}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "uncommitted_changes": None}


def machine(threads: int) -> dict:
    """What the numbers were computed on (the CPU model matters: kernels differ between instruction sets)."""
    import torch

    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "hostname": platform.node(), "system": platform.platform(), "cpu": cpu, "cores": os.cpu_count(),
        "torch_threads": threads, "python": platform.python_version(), "torch": torch.__version__,
    }  # fmt: skip


def training_order(configs: list) -> list:
    """Fused architectures first, then the hand-written cells; within each, the order the profile plans them."""
    return sorted(configs, key=lambda pair: pair[1].arch not in FUSED)


def train_all(profile_name: str, threads: int, only: set[str] | None, command: str) -> int:
    from charlm.plan import neural_configs
    from charlm.train import train

    profile = load_profile(profile_name)
    planned = []
    for arg in profile.corpora:
        corpus = corpora.load(arg, split_mode=profile.splits)
        planned += [(corpus, c) for c in neural_configs(profile, corpus, arg)]
    planned = training_order(planned)
    if only:
        planned = [(corpus, c) for corpus, c in planned if c.arch in only or c.model_id(corpus.key) in only]
    revision = git_revision(Path(__file__).resolve().parent)
    for k, (corpus, config) in enumerate(planned, 1):
        from charlm.paths import complete_metrics, model_dir

        out = model_dir(corpus.artifact_name, config.model_id(corpus.key))
        if complete_metrics(out / "metrics.json") and (out / PROVENANCE).exists():
            print(f"[ship] {k}/{len(planned)} {out.name} on {corpus.name}: done before", flush=True)
            continue
        print(f"[ship] {k}/{len(planned)} training {out.name} on {corpus.name}", flush=True)
        out.mkdir(parents=True, exist_ok=True)
        record = json.loads((out / PROVENANCE).read_text()) if (out / PROVENANCE).exists() else {"sessions": []}
        session = {
            "command": command, "git": revision, "machine": machine(threads),
            "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }  # fmt: skip
        started = time.perf_counter()
        train(config, corpus=corpus, threads=threads, progress=False)
        session["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        session["wall_seconds"] = round(time.perf_counter() - started, 1)
        record["sessions"].append(session)
        atomic.write_json(out / PROVENANCE, record)
        metrics = json.loads((out / "metrics.json").read_text())
        print(
            f"[ship] {out.name}: best val {metrics['best_val_loss']:.4f} after {len(metrics['epochs'])} epochs "
            f"({metrics['stopped']}), {session['wall_seconds']:.0f} s",
            flush=True,
        )
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.ship", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    train_p = sub.add_parser("train", help="train every recurrent model of a profile in turn, recording provenance")
    train_p.add_argument("--profile", default="reference", help=f"one of {', '.join(available())}")
    train_p.add_argument("--threads", type=int, default=1, help="torch threads (default %(default)s: one core)")
    train_p.add_argument("--only", nargs="*", default=None, help="only these architectures or model ids")
    args = parser.parse_args(argv)
    command = "python -m reports.ship " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    if args.command == "train":
        return train_all(args.profile, args.threads, set(args.only) if args.only else None, command)
    return 2


if __name__ == "__main__":
    sys.exit(run_cli(main))
