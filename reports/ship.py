"""Shipped models: train a profile's recurrent models and n-NNs with their provenance, pack them into the repository.

The `reference` profile's models are trained once, on a 2-core CPU, and shipped with the suite, so every user
reads converged models without training them (README, "Shipped models"):

    python -m reports.ship train --profile reference   # train each planned model in turn (resumable), one thread
    python -m reports.ship pack --profile reference    # copy the finished ones into models/reference/ + manifests
    python -m reports.ship status --profile reference  # where each model stands, and the training left (ship_status)

`train` records, beside each model's artifacts, the exact command, the git revision of the code, the machine,
the dates and the wall time of every session that trained it (provenance.json): a model trained across several
sessions lists each. `pack` copies each finished model's best checkpoint, the snapshots the analyses read and its
metrics into `models/<profile>/<corpus>/<model id>/` with a manifest.json holding that provenance and the sha256 of
every file. The pipeline installs them from there (reports.pipeline) and tests/test_shipped.py proves that the
recorded config, trained again for the first snapshot's steps, gives that snapshot's weights bit for bit.

The profile's n-NNs (Karpathy et al. sec 4.3, charlm.nnn) ship the same way when their [baselines] settings train
longer than a cold report affords: `train` trains them after the recurrent models (`--only nnn` trains them alone)
and keeps each grid member's weights after its first step; `pack` ships the chosen hidden size's checkpoint, that
member's first-step weights (snapshots/step0000001.pt) and the grid's metrics, a few MB in all.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import corpora
from charlm import archs
from charlm.paths import model_dir
from charlm.plan import available, load_profile
from charlm.shipped import PENDING, shipped_folder, whole
from corpora import atomic
from corpora.errors import UserError, run_cli

FUSED = archs.names(fused="torch")  # trained with torch's fused kernels (charlm.train fused=True)
PROVENANCE = "provenance.json"


def git_revision(cwd: Path | None = None) -> dict:
    """The checked-out commit, whether tracked files differ from it, and which (the code that runs is then not that
    commit; the provenance test accepts it only when none of those files is code that training runs)."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, cwd=cwd)
        dirty = subprocess.run(
            ["git", "diff", "HEAD", "--name-only"], capture_output=True, text=True, check=True, cwd=cwd
        )  # fmt: skip
        files = sorted(dirty.stdout.split())
        return {"commit": rev.stdout.strip(), "uncommitted_changes": bool(files), "uncommitted_files": files}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "uncommitted_changes": None, "uncommitted_files": None}


def machine(threads: int) -> dict:
    """What the numbers were computed on (the CPU model matters: kernels differ between instruction sets)."""
    import torch

    from charlm.model import TRAINING_KERNELS

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
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # the instruction set torch's kernels use
        "kernels": dict(TRAINING_KERNELS),  # our own, where torch has none
    }  # fmt: skip


PRIORITY = ("Levy's sets", "the ladder", "Fig 1's dropout grid", "minimal RNNs", "the rest")  # training_order's groups
LADDER_LAYERS = 1  # the depth of the ladder's rungs (analyses/ladder.py's "layers"): its RNN, GRU and LSTM are Fig 1's
GROUP_WORDS = {
    "levy": "Levy's sets",
    "ladder": "the ladder",
    "dropout": "Fig 1's dropout grid",
    "min-rnns": "minimal RNNs",
    "rest": "the rest",
    "nnn": "the n-NNs",
}  # `train --only`'s names of groups


def priority(config, set_members: dict[str, int], dropout_cells: set, model_id: str) -> tuple[int, int]:
    """Where a model trains in `training_order`: (its group in PRIORITY, its set's place among Levy's sets or 0)."""
    record = archs.REGISTRY[config.arch]
    if model_id in set_members:
        return 0, set_members[model_id]
    if record.family == "ladder":
        return 1, 0
    if (config.arch, config.layers, config.size) in dropout_cells:
        return 2, 0
    return (3 if record.family == "min" else 4), 0


def training_order(pairs: list, sets: list[list] | None = None) -> list:
    """The order the open issues ask for (docs/shipped-models.md): Levy's sets (each whole before the next: a set
    ships only whole), the ladder's rungs, the cells of Fig 1 trained at several dropouts (all their dropouts, 0
    included, so validation chooses among models of one stopping rule), minGRU and minLSTM, then the rest (Fig 1's
    other rows); within a group, fused architectures first (they train fastest), then the profile's order. In the
    dropout grid the ladder's rungs come first: the dropout-0 RNN, GRU and LSTM at the ladder's depth (LADDER_LAYERS;
    issue 38 before issue 40), then the other dropouts of those cells, then the deeper cells.
    `pairs` are (corpus, config); `sets` the (corpus, config) lists of Levy's sets in the order they should finish."""
    ranks = priorities(pairs, sets)
    arch_at, corpus_at = {}, {}  # each architecture's and corpus's first place in the profile's order
    for k, (corpus, c) in enumerate(pairs):
        arch_at.setdefault(c.arch, k)
        corpus_at.setdefault(corpus.key, k)

    def within(k: int) -> tuple:
        """The profile's order, but in Fig 1's dropout grid cell by cell (architecture, depth, corpus, then each
        dropout of the cell), so each cell is chosen on validation as soon as its few models are done."""
        corpus, c = pairs[k]
        if PRIORITY[ranks[c.model_id(corpus.key)][0]] != "Fig 1's dropout grid":
            return (k,)
        return arch_at[c.arch], c.layers, c.size, corpus_at[corpus.key], c.dropout, k

    def rung(k: int) -> int:
        """In the dropout grid: 0 for a rung of the ladder (dropout 0 at its depth), 1 for the other dropouts of
        its cells, 2 for the deeper cells; 0 outside the grid (its order is the group's)."""
        corpus, c = pairs[k]
        if PRIORITY[ranks[c.model_id(corpus.key)][0]] != "Fig 1's dropout grid":
            return 0
        return 2 if c.layers != LADDER_LAYERS else (0 if c.dropout == 0 else 1)

    keyed = [(ranks[c.model_id(corpus.key)], rung(k), c.arch not in FUSED, within(k), k)
             for k, (corpus, c) in enumerate(pairs)]  # fmt: skip
    return [pairs[k] for *_, k in sorted(keyed)]


def priorities(pairs: list, sets: list[list] | None = None) -> dict[str, tuple[int, int]]:
    """{model id: its `priority`} for (corpus, config) pairs and Levy's sets (see training_order)."""
    members = {c.model_id(corpus.key): k for k, members_ in enumerate(sets or []) for corpus, c in members_}
    dropout_cells = {(c.arch, c.layers, c.size) for _, c in pairs if c.dropout > 0}
    return {c.model_id(corpus.key): priority(c, members, dropout_cells, c.model_id(corpus.key)) for corpus, c in pairs}


def nnn_configs(profile, corpus) -> list:
    """The n-NN configs a profile plans on one corpus (its [baselines] nnn_n and settings, charlm.plan)."""
    from charlm import nnn
    from charlm.plan import baseline_orders, nnn_options

    return [
        nnn.NNNConfig(corpus.source or corpus.name, n, **nnn_options(profile, n)) for n in baseline_orders(profile)[1]
    ]


def is_nnn(config) -> bool:
    from charlm.nnn import NNNConfig

    return isinstance(config, NNNConfig)


def queue(profile) -> list[tuple]:
    """The profile's models in the order `train` trains them, as (corpus, config, group): the recurrent ones in
    `training_order` (group: their PRIORITY name), then the n-NNs ("the n-NNs"). A model its line search of dropout
    will not try (`untried`) is not in it."""
    from charlm.dropout_search import untried
    from charlm.plan import ablation_sets, neural_configs

    planned, nnns, sets = [], [], []
    for arg in profile.corpora:
        corpus = corpora.load(arg, split_mode=profile.splits)
        skip = untried(profile, corpus, arg)
        planned += [(corpus, c) for c in neural_configs(profile, corpus, arg) if c.model_id(corpus.key) not in skip]
        nnns += [(corpus, c) for c in nnn_configs(profile, corpus)]
        sets += [[(corpus, c) for c in members] for members in ablation_sets(profile, corpus, arg)]
    sets.sort(key=lambda members: members[0][1].layers)  # every corpus's 1-layer set, then the 2-layer ones
    groups = {m: PRIORITY[rank] for m, (rank, _) in priorities(planned, sets).items()}
    ordered = [(corpus, c, groups[c.model_id(corpus.key)]) for corpus, c in training_order(planned, sets)]
    return ordered + [(corpus, c, "the n-NNs") for corpus, c in nnns]


def line_verdict(profile, corpus, config):
    """Why the line search of dropout does not train this model now (charlm.dropout_search.Verdict: "waits" for a
    lower dropout's validation loss, or "untried" since one did not help), else None."""
    from charlm.dropout_search import verdicts

    return None if is_nnn(config) else verdicts(profile, corpus, config.corpus).get(config.model_id(corpus.key))


WAIT_S = 60.0  # how often `train` looks again at models that wait for another process's training


def train_all(profile_name: str, threads: int, only: list[str] | None, command: str, dry_run: bool = False) -> int:
    """Train the profile's models in turn (the recurrent ones in `training_order`, then the n-NNs); several such
    processes (one per core) share the list through locks. `dry_run` prints the list and what each would do."""
    from charlm.estimate import Pricer

    profile = load_profile(profile_name)
    planned = queue(profile)
    if only:  # in the order given: a model id where named, else its architecture's place, else its group's
        rank = {name: k for k, name in reversed(list(enumerate(only)))}
        groups = {GROUP_WORDS[name]: k for name, k in rank.items() if name in GROUP_WORDS}

        def place(entry) -> int | None:
            corpus, c, group = entry
            found = rank.get(c.model_id(corpus.key), rank.get(c.arch if not is_nnn(c) else None))
            return groups.get(group) if found is None else found

        planned = sorted((entry for entry in planned if place(entry) is not None), key=place)
    pricer = None if dry_run else Pricer.here(profile.name, clock="cpu")  # CPU seconds, beside the other trainer
    revision = None if dry_run else git_revision(Path(__file__).resolve().parent)
    todo = planned
    while todo:  # a model whose line search waits for a lower dropout is taken up again once that one is known
        deferred, trained = [], False
        for k, entry in enumerate(todo, 1):
            waits = train_one(profile, entry, f"{k}/{len(todo)}", pricer, threads, command, revision, dry_run)
            if waits is None:
                trained = True
            elif waits:
                deferred.append((entry, waits))
        if not deferred or dry_run:
            break
        busy = [on for (corpus, _, _), on in deferred if lock_holder(model_dir(corpus.artifact_name, on)) is not None]
        if not trained and not busy:
            print(f"[ship] {len(deferred)} model(s) wait for lower dropouts that no process trains now "
                  f"({', '.join(sorted({on for _, on in deferred}))}): train those first", flush=True)  # fmt: skip
            break
        if not trained:
            time.sleep(WAIT_S)
        todo = [entry for entry, _ in deferred]
    return 0


def train_one(profile, entry: tuple, place: str, pricer, threads: int, command: str, revision, dry_run: bool):
    """Train one (corpus, config, group) of the queue, unless it is done, shipped, being trained by another process
    or left for now by its line search. Returns None when it trained it, the model id it waits for when its line
    search waits, "" otherwise."""
    from charlm.paths import complete_metrics

    from .ship_park import parked_folder, restore

    corpus, config, group = entry
    out = model_dir(corpus.artifact_name, config.model_id(corpus.key))
    if complete_metrics(out / "metrics.json") and (out / PROVENANCE).exists():
        print(f"[ship] {place} {out.name} on {corpus.name}: done before", flush=True)
        return ""
    rooms = {"models/": profile.name, "waits for its set in models/pending/": f"{PENDING}/{profile.name}"}
    packed = [where for where, name in rooms.items() if whole(shipped_folder(name, corpus.artifact_name, out.name))]
    if packed:  # finished on an earlier machine: its packed copy is the model, not trained again
        print(f"[ship] {place} {out.name} on {corpus.name}: shipped ({packed[0]}), skipped", flush=True)
        return ""
    verdict = line_verdict(profile, corpus, config)
    if verdict is not None:
        print(f"[ship] {place} {out.name} on {corpus.name}: {verdict.why}", flush=True)
        return verdict.on if verdict.state == "waits" else ""
    parked = parked_folder(profile.name, corpus.artifact_name, out.name)
    if dry_run:
        state = "resumes" if (out / "state.pt").is_file() else "to train"
        state = "resumes from models/partial/" if state == "to train" and whole(parked) else state
        print(f"[ship] {place} {out.name} on {corpus.name} ({group}): {state}", flush=True)
        return ""
    out.mkdir(parents=True, exist_ok=True)
    with training_lock(out) as holder:
        if holder is not None:
            print(f"[ship] {place} {out.name}: being trained by process {holder}, skipped", flush=True)
            return ""
        step = restore(parked, out)
        if step is not None:
            print(f"[ship] {place} {out.name}: parked at step {step:,} ({parked}), resumes", flush=True)
        estimate = training_estimate(pricer, corpus, config)
        about = "" if estimate is None else f" (estimate {estimate / 3600:.1f} CPU-hours in all)"
        print(f"[ship] {place} training {out.name} on {corpus.name}{about}", flush=True)
        train_with_provenance(config, corpus, out, threads, command, revision, estimate)
    return None


@contextlib.contextmanager
def training_lock(out: Path):
    """Yields None while this process holds `out`'s lock (several `ship train` workers share one list of models),
    or the pid of the live process on this machine that holds it. A lock left by a dead process is taken over."""
    lock = out / "training.lock"
    mine = f"{platform.node()} {os.getpid()}"
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            holder = lock_holder(out)
            if holder is not None:
                yield holder
                return
            lock.unlink(missing_ok=True)  # stale: its process is gone
            continue
        with os.fdopen(fd, "w") as handle:
            handle.write(mine)
        try:
            yield None
        finally:
            lock.unlink(missing_ok=True)
        return
    raise UserError(f"cannot take the training lock {lock}")


def lock_holder(out: Path) -> int | None:
    """The pid of the live process on this machine that holds `out`'s training lock, else None (no lock, or one
    left by a process that is gone or ran on another machine)."""
    try:
        host, _, pid = (out / "training.lock").read_text().partition(" ")
    except OSError:
        return None
    return int(pid) if host == platform.node() and pid.isdigit() and _alive(int(pid)) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


CPU_RECORD_S = 30.0  # how often a training session's CPU seconds so far are written to its provenance.json


@contextlib.contextmanager
def cpu_recorded(record: dict, session: dict, path: Path):
    """While the block runs, write `session`'s CPU and wall seconds so far into `path` (the whole `record`) every
    CPU_RECORD_S, so a session killed with its developer session keeps what it used, at most CPU_RECORD_S short.
    Yields a function giving the CPU seconds since the block began (this process, every thread)."""
    cpu_started, wall_started = time.process_time(), time.perf_counter()
    stop = threading.Event()

    def so_far() -> float:
        return round(time.process_time() - cpu_started, 3)

    def record_every_while():
        while not stop.wait(CPU_RECORD_S):
            session["cpu_seconds"] = so_far()
            session["wall_seconds"] = round(time.perf_counter() - wall_started, 3)
            atomic.write_json(path, record)

    clock = threading.Thread(target=record_every_while, name="cpu-seconds", daemon=True)
    clock.start()
    try:
        yield so_far
    finally:
        stop.set()
        clock.join()


def training_estimate(pricer, corpus, config) -> float | None:
    """What training `config` on `corpus` to its epoch cap costs on this machine by the estimate (charlm.estimate:
    CPU seconds of one thread, priced per character trained); None for an n-NN (priced with its grid, not alone)."""
    if pricer is None or is_nnn(config):
        return None
    from charlm.kinds.base import Job, Work
    from charlm.kinds.recurrent import chars_to_train
    from charlm.model import count_params

    model = config.model_config(corpus.vocab_size)
    work = Work("train", chars_to_train(config, corpus), f"{config.arch} L{config.layers} H{config.size}",
                count_params(model), config.layers)  # fmt: skip
    seconds, _, rule = pricer.price(Job(f"train:{corpus.name}/{config.model_id(corpus.key)}", None, work))
    return round(seconds, 3) if seconds > 0 else None


def train_with_provenance(
    config, corpus, out: Path, threads: int, command: str, revision: dict, estimate: float | None = None
) -> None:
    """Train (or resume) one model, recording this session in out/provenance.json before it starts (so a killed
    session stays on record, marked interrupted) and completing the record when it ends. `estimate`: what the
    estimate said, as this session started, the whole training would cost (CPU seconds; `ship status` sets it
    beside what it cost)."""
    from charlm.train import train

    record = json.loads((out / PROVENANCE).read_text()) if (out / PROVENANCE).exists() else {"sessions": []}
    for earlier in record["sessions"]:
        if earlier.get("finished") is None:
            earlier["interrupted"] = True
    session = {
        "command": command, "git": revision, "machine": machine(threads),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "finished": None,
        "estimate_cpu_seconds": estimate,
    }  # fmt: skip
    record["sessions"].append(session)
    atomic.write_json(out / PROVENANCE, record)
    started = time.perf_counter()
    with cpu_recorded(record, session, out / PROVENANCE) as cpu_seconds:
        if is_nnn(config):
            import torch

            from charlm import nnn

            torch.set_num_threads(threads)
            nnn.train_config(config, corpus, progress=False, snapshots=True)
        else:
            train(config, corpus=corpus, threads=threads, progress=False)
    session["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    session["wall_seconds"] = round(time.perf_counter() - started, 3)
    # CPU seconds of this process: what the model cost a core, where wall seconds grow when workers share the cores
    session["cpu_seconds"] = cpu_seconds()
    atomic.write_json(out / PROVENANCE, record)
    metrics = json.loads((out / "metrics.json").read_text())
    how = (
        f"hidden {metrics['best_hidden']} of {[g['hidden'] for g in metrics['grid']]}"
        if is_nnn(config)
        else f"after {len(metrics['epochs'])} epochs ({metrics['stopped']})"
    )
    print(
        f"[ship] {out.name}: best val {metrics['best_val_loss']:.4f} {how}, {session['wall_seconds']:.0f} s", flush=True
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.ship", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    train_p = sub.add_parser("train", help="train a profile's recurrent models and n-NNs in turn, recording provenance")
    train_p.add_argument("--profile", default="reference", help=f"one of {', '.join(available())}")
    train_p.add_argument("--threads", type=int, default=1, help="torch threads (default %(default)s: one core)")
    train_p.add_argument(
        "--only", nargs="*", default=None,
        help="only these model ids, architectures or groups (levy, ladder, dropout, min-rnns, rest, nnn), in this "
        "order: a model takes the place of its id where named, else of its architecture, else of its group",
    )  # fmt: skip
    train_p.add_argument(
        "--dry-run", action="store_true", help="list the models in the order they would train, and what each needs"
    )
    pack_p = sub.add_parser("pack", help="copy each finished model into models/<profile>/ with its manifest")
    pack_p.add_argument("--profile", default="reference", help=f"one of {', '.join(available())}")
    park_p = sub.add_parser(
        "park", help="copy each partly trained model into models/partial/<profile>/, so training resumes elsewhere"
    )
    park_p.add_argument("--profile", default="reference", help=f"one of {', '.join(available())}")
    backfill_p = sub.add_parser(
        "backfill-retired", help="measure the stand-ins retired before models/<profile>/retired.json existed"
    )
    backfill_p.add_argument("--profile", default="reference", help=f"one of {', '.join(available())}")
    backfill_p.add_argument("--rev", required=True, help="a git revision whose models/<profile>/ still held them")
    status_p = sub.add_parser(
        "status", help="a markdown table of where each of the profile's models stands, its cost and the training left"
    )
    status_p.add_argument("--profile", default="reference", help=f"one of {', '.join(available())}")
    args = parser.parse_args(argv)
    command = "python -m reports.ship " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    if args.command == "train":
        return train_all(args.profile, args.threads, args.only or None, command, args.dry_run)
    if args.command == "status":
        from .ship_status import status

        return status(args.profile)
    if args.command == "backfill-retired":
        from .ship_pack import backfill_retired

        return backfill_retired(args.profile, args.rev)
    if args.command == "park":
        from .ship_park import park_all

        return park_all(args.profile)
    from .ship_pack import pack_all  # packing reads the manifests training wrote

    return pack_all(args.profile)


if __name__ == "__main__":
    sys.exit(run_cli(main))
