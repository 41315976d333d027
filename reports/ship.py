"""Shipped models: train a profile's recurrent models and n-NNs with their provenance, pack them into the repository.

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
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import corpora
from charlm import archs
from charlm.plan import available, load_profile
from charlm.shipped import MANIFEST, SHIPPED_ROOT, damaged_files, shipped_folder
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


PRIORITY = ("Levy's sets", "the ladder", "Fig 1's dropout rows", "minimal RNNs", "the rest")  # training_order's groups


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
    other rows); within a group, fused architectures first (they train fastest), then the profile's order.
    `pairs` are (corpus, config); `sets` the (corpus, config) lists of Levy's sets in the order they should finish."""
    ranks = priorities(pairs, sets)
    keyed = [(ranks[c.model_id(corpus.key)], c.arch not in FUSED, k) for k, (corpus, c) in enumerate(pairs)]
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


def train_all(profile_name: str, threads: int, only: list[str] | None, command: str, dry_run: bool = False) -> int:
    """Train the profile's models in turn (the recurrent ones in `training_order`, then the n-NNs); several such
    processes (one per core) share the list through locks. `dry_run` prints the list and what each would do."""
    from charlm.plan import ablation_sets, neural_configs

    profile = load_profile(profile_name)
    planned, nnns, sets = [], [], []
    for arg in profile.corpora:
        corpus = corpora.load(arg, split_mode=profile.splits)
        planned += [(corpus, c) for c in neural_configs(profile, corpus, arg)]
        nnns += [(corpus, c) for c in nnn_configs(profile, corpus)]
        sets += [[(corpus, c) for c in members] for members in ablation_sets(profile, corpus, arg)]
    sets.sort(key=lambda members: members[0][1].layers)  # every corpus's 1-layer set, then the 2-layer ones
    groups = {m: PRIORITY[rank] for m, (rank, _) in priorities(planned, sets).items()}
    planned = training_order(planned, sets) + nnns
    if only:  # in the order given: a model id where named, else its architecture's place ("nnn" for the n-NNs)
        rank = {name: k for k, name in reversed(list(enumerate(only)))}

        def place(pair) -> int | None:
            corpus, c = pair
            return rank.get(c.model_id(corpus.key), rank.get("nnn" if is_nnn(c) else c.arch))

        planned = sorted((pair for pair in planned if place(pair) is not None), key=place)
    revision = None if dry_run else git_revision(Path(__file__).resolve().parent)
    for k, (corpus, config) in enumerate(planned, 1):
        from charlm.paths import complete_metrics, model_dir

        out = model_dir(corpus.artifact_name, config.model_id(corpus.key))
        if complete_metrics(out / "metrics.json") and (out / PROVENANCE).exists():
            print(f"[ship] {k}/{len(planned)} {out.name} on {corpus.name}: done before", flush=True)
            continue
        shipped = shipped_folder(profile.name, corpus.artifact_name, out.name)
        if (shipped / MANIFEST).is_file() and damaged_files(shipped) is None:
            print(f"[ship] {k}/{len(planned)} {out.name} on {corpus.name}: shipped (models/), skipped", flush=True)
            continue
        if dry_run:
            state = "resumes" if (out / "state.pt").is_file() else "to train"
            group = groups.get(out.name, "the n-NNs")
            print(f"[ship] {k}/{len(planned)} {out.name} on {corpus.name} ({group}): {state}", flush=True)
            continue
        out.mkdir(parents=True, exist_ok=True)
        with training_lock(out) as holder:
            if holder is not None:
                print(f"[ship] {k}/{len(planned)} {out.name}: being trained by process {holder}, skipped", flush=True)
                continue
            print(f"[ship] {k}/{len(planned)} training {out.name} on {corpus.name}", flush=True)
            train_with_provenance(config, corpus, out, threads, command, revision)
    return 0


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
            host, _, pid = lock.read_text().partition(" ")
            if host == platform.node() and pid.isdigit() and _alive(int(pid)):
                yield int(pid)
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
    """While the block runs, write `session`'s CPU seconds so far into `path` (the whole `record`) every
    CPU_RECORD_S, so a session killed with its developer session keeps what it used, at most CPU_RECORD_S short.
    Yields a function giving the CPU seconds since the block began (this process, every thread)."""
    cpu_started = time.process_time()
    stop = threading.Event()

    def so_far() -> float:
        return round(time.process_time() - cpu_started, 3)

    def record_every_while():
        while not stop.wait(CPU_RECORD_S):
            session["cpu_seconds"] = so_far()
            atomic.write_json(path, record)

    clock = threading.Thread(target=record_every_while, name="cpu-seconds", daemon=True)
    clock.start()
    try:
        yield so_far
    finally:
        stop.set()
        clock.join()


def train_with_provenance(config, corpus, out: Path, threads: int, command: str, revision: dict) -> None:
    """Train (or resume) one model, recording this session in out/provenance.json before it starts (so a killed
    session stays on record, marked interrupted) and completing the record when it ends."""
    from charlm.train import train

    record = json.loads((out / PROVENANCE).read_text()) if (out / PROVENANCE).exists() else {"sessions": []}
    for earlier in record["sessions"]:
        if earlier.get("finished") is None:
            earlier["interrupted"] = True
    session = {
        "command": command, "git": revision, "machine": machine(threads),
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "finished": None,
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


def shipped_snapshots(config, snapshots: list[dict], headline: bool) -> list[dict]:
    """The snapshots a model ships (the repository's budget for shipped models is 100 MB, issues 19 and 22):

    - every model: its first snapshot, which the provenance test retrains to (tests/test_shipped.py);
    - the headline model (the profile's largest-row, deepest LSTM, seed 0, on each corpus): every snapshot, for
      training_dynamics (Karpathy et al. Fig 5 right follows that LSTM over its first 3 epochs);
    - every other 1-layer seed-0 model: every fourth snapshot counted back from the last (the last included), for
      vanishing along training (it reads seed 0 of each configuration) and training_dynamics (every second
      would take the 32 one-layer models past 60 MB: measured, 64 MB);
    - the deeper models of Fig 1's grid (issue 22) and the other seeds: none besides the first (the analyses read
      their final checkpoints; vanishing profiles them at initialisation and after training).
    """
    if not snapshots:
        return []
    if headline:
        keep = set(range(len(snapshots)))
    elif config.seed == 0 and config.layers == 1:
        keep = set(range(len(snapshots) - 1, -1, -4))
    else:
        keep = set()
    keep.add(0)
    return [snap for k, snap in enumerate(snapshots) if k in keep]


def pack_one(source: Path, folder: Path, profile: str, headline: bool) -> dict:
    """Copy one finished model into its shipped folder with its manifest; returns the manifest."""
    from charlm.checkpoint import file_sha256
    from charlm.train import TrainConfig

    metrics = json.loads((source / "metrics.json").read_text())
    provenance = json.loads((source / PROVENANCE).read_text())
    config = TrainConfig(**metrics["train_config"])
    snapshots = shipped_snapshots(config, metrics.get("snapshots") or [], headline)
    stage = folder.with_name(folder.name + ".packing")
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "snapshots").mkdir(parents=True)
    names = ["checkpoint.pt"] + [snap["file"] for snap in snapshots]
    for name in names:
        shutil.copyfile(source / name, stage / name)
        if file_sha256(stage / name) != (
            metrics["checkpoint_sha256"]
            if name == "checkpoint.pt"
            else next(s["sha256"] for s in snapshots if s["file"] == name)
        ):
            raise UserError(f"{source / name} is not the file its metrics.json recorded: retrain {source.name}")
    shipped_metrics = {**metrics, "snapshots": snapshots, "snapshots_trained": len(metrics.get("snapshots") or [])}
    atomic.write_json(stage / "metrics.json", shipped_metrics)
    manifest = {
        "model_id": metrics["model_id"],
        "profile": profile,
        "corpus": metrics.get("corpus"),
        "corpus_key": metrics.get("corpus_key"),
        "train_config": metrics["train_config"],
        **_provenance(provenance["sessions"]),
        "training_seconds": metrics["seconds"],
        "epochs": len(metrics["epochs"]),
        "stopped": metrics["stopped"],
        "best_val_loss": metrics["best_val_loss"],
    }
    return _finish(stage, folder, names, manifest)


def pack_nnn(source: Path, folder: Path, profile: str) -> dict:
    """Copy one finished n-NN into its shipped folder with its manifest; returns the manifest.

    It ships the chosen hidden size's checkpoint, that grid member's weights after its first step (the provenance
    test retrains to them) and the grid's metrics.json, with the chosen member's validation curve added.
    """
    from charlm.checkpoint import file_sha256

    metrics = json.loads((source / "metrics.json").read_text())
    provenance = json.loads((source / PROVENANCE).read_text())
    member = source / f"H{metrics['best_hidden']}"
    member_metrics = json.loads((member / "metrics.json").read_text())
    if not member_metrics.get("snapshots"):
        raise UserError(f"{member} kept no first-step weights: train it with `python -m reports.ship train`")
    first = member_metrics["snapshots"][0]
    stage = folder.with_name(folder.name + ".packing")
    shutil.rmtree(stage, ignore_errors=True)
    (stage / "snapshots").mkdir(parents=True)
    for src, name, sha256 in (
        (source / "checkpoint.pt", "checkpoint.pt", metrics["checkpoint_sha256"]),
        (member / first["file"], first["file"], first["sha256"]),
    ):
        shutil.copyfile(src, stage / name)
        if file_sha256(stage / name) != sha256:
            raise UserError(f"{src} is not the file its metrics.json recorded: retrain {source.name}")
    chosen = {
        "hidden": metrics["best_hidden"],
        "epochs": member_metrics["epochs"],
        "stopped": member_metrics["stopped"],
    }
    # "first_step_snapshot", not "snapshots": the analyses read a model's snapshots list as its training snapshots
    atomic.write_json(stage / "metrics.json", {**metrics, "first_step_snapshot": first, "chosen_member": chosen})
    manifest = {
        "kind": "nnn",
        "model_id": metrics["model_id"],
        "profile": profile,
        "corpus": metrics.get("corpus"),
        "corpus_key": metrics.get("corpus_key"),
        "nnn_config": metrics["config"],
        "hidden": metrics["best_hidden"],
        **_provenance(provenance["sessions"]),
        "training_seconds": metrics["seconds"],  # the whole grid
        "epochs": len(member_metrics["epochs"]),
        "stopped": member_metrics["stopped"],
        "best_val_loss": metrics["best_val_loss"],
    }
    return _finish(stage, folder, ["checkpoint.pt", first["file"]], manifest)


def _uncommitted_files(sessions: list[dict]) -> list[str] | None:
    files = set()
    for s in sessions:
        if s["git"]["uncommitted_changes"] and s["git"].get("uncommitted_files") is None:
            return None
        files |= set(s["git"].get("uncommitted_files") or [])
    return sorted(files)


def _provenance(sessions: list[dict]) -> dict:
    """How a model was made, from the sessions that trained it (provenance.json)."""
    return {
        "command": sessions[0]["command"],
        "git_revisions": sorted({s["git"]["commit"] for s in sessions if s["git"]["commit"]}),
        "uncommitted_changes": any(s["git"]["uncommitted_changes"] for s in sessions),
        # None when a dirty session did not record which files (unknown)
        "uncommitted_files": _uncommitted_files(sessions),
        "date": sessions[-1]["finished"],
        "machine": sessions[-1]["machine"],
        "wall_seconds": round(sum(s.get("wall_seconds") or 0 for s in sessions), 3),  # interrupted ones: unknown
        # None when a session predates the record (models trained before CPU seconds were recorded, or killed
        # before they were recorded every CPU_RECORD_S); a killed session counts its last record, at most
        # CPU_RECORD_S short (and the work since its last resume state is done, and counted, again)
        "cpu_seconds": (
            round(sum(s["cpu_seconds"] for s in sessions), 3) if all("cpu_seconds" in s for s in sessions) else None
        ),
        "sessions": sessions,
    }


def _finish(stage: Path, folder: Path, names: list[str], manifest: dict) -> dict:
    """Write the manifest (every file's sha256 and size) into the staged folder and move it into place."""
    from charlm.checkpoint import file_sha256

    manifest["files"] = {n: {"sha256": file_sha256(stage / n), "bytes": (stage / n).stat().st_size}
                         for n in names + ["metrics.json"]}  # fmt: skip
    atomic.write_json(stage / MANIFEST, manifest)
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    stage.rename(folder)
    return manifest


PENDING = "pending"  # models/pending/<profile>/: finished models of a set not yet whole (pack_all)


def pack_all(profile_name: str, root: Path | None = None) -> int:
    """Pack every finished (complete, with provenance) model of the profile; report what is still to train.

    Levy's table at one depth (charlm.plan.ablation_sets) ships only whole: its verdict compares its members, so
    while one is still training the finished ones wait in models/pending/<profile>/ and move into models/<profile>/
    together. A model packed into models/<profile>/ retires the stand-in it replaces: the shipped model of the same
    configuration trained by an earlier stopping rule (charlm.kinds.recurrent, `stand_in`)."""
    from charlm.paths import complete_metrics, model_dir
    from charlm.plan import ablation_sets, headline_config, neural_configs

    profile = load_profile(profile_name)
    root = root or SHIPPED_ROOT
    packed, waiting, pending, total_bytes = 0, 0, [], 0
    for arg in profile.corpora:
        corpus = corpora.load(arg, split_mode=profile.splits)
        configs = neural_configs(profile, corpus, arg)
        headline = headline_config(configs, corpus.vocab_size)
        sets = {}  # model id -> the ids of the set it ships with
        for members in ablation_sets(profile, corpus, arg):
            ids = [c.model_id(corpus.key) for c in members]
            sets.update(dict.fromkeys(ids, ids))

        waiting_room = f"{PENDING}/{profile.name}"

        def finished(model_id: str, name=corpus.artifact_name, rooms=(profile.name, waiting_room)) -> bool:
            source = model_dir(name, model_id)
            return bool(complete_metrics(source / "metrics.json") and (source / PROVENANCE).is_file()) or any(
                whole(shipped_folder(room, name, model_id, root)) for room in rooms
            )

        for config in configs + nnn_configs(profile, corpus):
            model_id = config.model_id(corpus.key)
            source = model_dir(corpus.artifact_name, model_id)
            folder = shipped_folder(profile.name, corpus.artifact_name, model_id, root)
            held = shipped_folder(waiting_room, corpus.artifact_name, model_id, root)
            if whole(folder):
                total_bytes += _shipped_bytes(folder)
                continue  # shipped before and whole
            if not finished(model_id):
                pending.append(f"{corpus.name}/{model_id}")
                continue
            ships = all(finished(m) for m in sets.get(model_id, [model_id]))
            target = folder if ships else held
            if whole(held) and ships:
                folder.parent.mkdir(parents=True, exist_ok=True)
                shutil.rmtree(folder, ignore_errors=True)
                held.rename(folder)  # its set is whole: it moves in with the rest
                print(f"[ship] moved {held} into {folder}", flush=True)
            elif not whole(target):
                if is_nnn(config):
                    pack_nnn(source, target, profile.name)
                else:
                    pack_one(source, target, profile.name, config == headline)
                print(f"[ship] packed {target}" + ("" if ships else " (its set is not whole yet)"), flush=True)
            if ships:
                packed += 1
                total_bytes += _shipped_bytes(folder)
                retire_stand_ins(folder, root)
            else:
                waiting += 1
    print(f"[ship] {packed} shipped now, {waiting} waiting for their set in {root / PENDING}; shipped in all: "
          f"{total_bytes / 1e6:.1f} MB; still to train: {', '.join(pending) if pending else 'none'}")  # fmt: skip
    return 0


def whole(folder: Path) -> bool:
    """A shipped folder whose manifest lists every file with its sha256."""
    return (folder / MANIFEST).is_file() and damaged_files(folder) is None


def _shipped_bytes(folder: Path) -> int:
    return sum(e["bytes"] for e in json.loads((folder / MANIFEST).read_text())["files"].values())


def retire_stand_ins(folder: Path, root: Path) -> list[str]:
    """Remove the shipped models that stood in for the one in `folder`: same corpus, same configuration but for
    when training stopped, another id. Returns the ids removed."""
    from charlm.kinds.recurrent import _manifests_in, _training_key

    manifest = json.loads((folder / MANIFEST).read_text())
    config = manifest.get("train_config")
    if not config:
        return []  # an n-NN: nothing stands in for it
    removed = []
    for other in sorted(folder.parent.glob(f"*/{MANIFEST}")):
        theirs = json.loads(other.read_text())
        same = theirs.get("train_config") and _training_key(theirs["train_config"]) == _training_key(config)
        if same and theirs["model_id"] != manifest["model_id"] and theirs.get("corpus_key") == manifest["corpus_key"]:
            shutil.rmtree(other.parent)
            removed.append(theirs["model_id"])
            print(f"[ship] removed {other.parent.name}: {manifest['model_id']} replaces it", flush=True)
    _manifests_in.cache_clear()
    return removed


def status(profile_name: str, root: Path | None = None) -> int:
    """A markdown table of the profile's models: shipped (with their training cost) or still to train."""
    from charlm.plan import neural_configs

    profile = load_profile(profile_name)
    print("| corpus | model | epochs | stopped | training s | CPU s | best val | shipped MB |")
    print("|---|---|---|---|---|---|---|---|")
    totals = {"seconds": 0.0, "cpu": 0.0, "cpu_models": 0, "bytes": 0, "shipped": 0, "planned": 0}
    for arg in profile.corpora:
        corpus = corpora.load(arg, split_mode=profile.splits)
        for config in neural_configs(profile, corpus, arg) + nnn_configs(profile, corpus):
            model_id = config.model_id(corpus.key)
            totals["planned"] += 1
            manifest_path = shipped_folder(profile.name, corpus.artifact_name, model_id, root) / MANIFEST
            if not manifest_path.is_file():
                print(f"| {corpus.name} | {model_id} | | not shipped yet | | | | |")
                continue
            m = json.loads(manifest_path.read_text())
            size = sum(e["bytes"] for e in m["files"].values())
            totals["seconds"] += m["training_seconds"]
            totals["bytes"] += size
            totals["shipped"] += 1
            cpu = m.get("cpu_seconds")  # recorded since issue 22; None for the models trained before
            if cpu is not None:
                totals["cpu"] += cpu
                totals["cpu_models"] += 1
            print(f"| {corpus.name} | {model_id} | {m['epochs']} | {m['stopped']} | {m['training_seconds']:.0f} | "
                  f"{'' if cpu is None else f'{cpu:.0f}'} | {m['best_val_loss']:.4f} | {size / 1e6:.1f} |")  # fmt: skip
    print(f"\n{totals['shipped']} of {totals['planned']} models shipped; {totals['seconds'] / 3600:.2f} h of training "
          f"(wall seconds of one single-thread worker each; CPU seconds recorded for {totals['cpu_models']} of them: "
          f"{totals['cpu'] / 3600:.2f} h); {totals['bytes'] / 1e6:.1f} MB")  # fmt: skip
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.ship", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    train_p = sub.add_parser("train", help="train a profile's recurrent models and n-NNs in turn, recording provenance")
    train_p.add_argument("--profile", default="reference", help=f"one of {', '.join(available())}")
    train_p.add_argument("--threads", type=int, default=1, help="torch threads (default %(default)s: one core)")
    train_p.add_argument(
        "--only", nargs="*", default=None, help="only these architectures (nnn: the n-NNs) or model ids, in this order"
    )
    train_p.add_argument(
        "--dry-run", action="store_true", help="list the models in the order they would train, and what each needs"
    )
    pack_p = sub.add_parser("pack", help="copy each finished model into models/<profile>/ with its manifest")
    pack_p.add_argument("--profile", default="reference", help=f"one of {', '.join(available())}")
    status_p = sub.add_parser("status", help="a markdown table of the profile's shipped models and their cost")
    status_p.add_argument("--profile", default="reference", help=f"one of {', '.join(available())}")
    args = parser.parse_args(argv)
    command = "python -m reports.ship " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    if args.command == "train":
        return train_all(args.profile, args.threads, args.only or None, command, args.dry_run)
    if args.command == "status":
        return status(args.profile)
    return pack_all(args.profile)


if __name__ == "__main__":
    sys.exit(run_cli(main))
