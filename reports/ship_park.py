"""Partly trained models, parked in the repository so that training resumes on another machine.

A developer session ends every process it started and the next one may run on a fresh machine, whose artifacts
are empty: a model trained for 28 of its epochs there would start again from step 0. `python -m reports.ship park`
copies each partly trained model of a profile (its artifact folder holds `state.pt` and no complete metrics) into
`models/partial/<profile>/<corpus>/<model id>/` with a manifest (sha256 and size of every file, the step reached);
`ship train` copies it back into an empty artifact folder before it trains, and the run resumes from its
`state.pt` (charlm.loop: a resumed run ends with the numbers of an uninterrupted one). `ship pack` removes the
parked copy once the model is finished and packed. Commit models/partial/ at the end of a session.

Consistency without stopping the trainer: every file is written atomically (whole or absent), `state.pt` is copied
first, and a training run writes its best checkpoint and its snapshots before the state that records them. Every
file copied after `state.pt` is therefore that state's or a later one, and a later one is written again, the same,
when the run replays the steps after its state. The snapshots that state lists are checked against its sha256s.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

from charlm.checkpoint import file_sha256, load_payload
from charlm.paths import complete_metrics, model_dir
from charlm.plan import load_profile
from charlm.shipped import MANIFEST, PARTIAL, SHIPPED_ROOT, shipped_folder, whole
from corpora import atomic

from .ship import PROVENANCE, queue

STATE = "state.pt"
LEFT_BEHIND = ("training.lock",)  # this machine's, not the model's


def parked_folder(profile: str, corpus_artifact_name: str, model_id: str, root: Path | None = None) -> Path:
    return shipped_folder(f"{PARTIAL}/{profile}", corpus_artifact_name, model_id, root)


def _state_step(source: Path) -> tuple[int, list[dict], int | None]:
    """The step a state.pt reached, the snapshots it lists, and its best step."""
    progress = load_payload(source / STATE)["progress"]
    return int(progress["step"]), list(progress.get("snapshots") or []), progress.get("best_step")


def park_one(source: Path, folder: Path, first_snapshot_only: bool = False) -> dict:
    """Copy a partly trained model's folder (state.pt first) into `folder` with its manifest; returns the manifest.

    `first_snapshot_only`: the model will ship its first snapshot alone (reports.ship_pack.shipped_snapshots), so
    the others are left out (listed under "omitted"): the repository's history keeps every parked file, and most of
    a parked model's bytes are its early snapshots. `ship pack` then installs the packed copy in place of the
    finished folder, whose metrics list snapshots it lacks (`settle`)."""
    stage = folder.with_name(folder.name + ".parking")
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir(parents=True)
    shutil.copyfile(source / STATE, stage / STATE)  # first: every file copied after it is of its time or later
    step, snapshots, best_step = _state_step(stage)
    names, omitted = [STATE], []
    first = snapshots[0]["file"] if snapshots else None
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        name = path.relative_to(source).as_posix()
        if name == STATE or name in LEFT_BEHIND or ".tmp" in path.name:
            continue
        if first_snapshot_only and name.startswith("snapshots/") and name != first:
            omitted.append(name)
            continue
        (stage / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, stage / name)
        names.append(name)
    for snap in snapshots:
        if first_snapshot_only and snap["file"] != first and not (source / snap["file"]).exists():
            omitted.append(snap["file"])  # left out when it was parked before, and resumed without it
        if snap["file"] in omitted:
            continue
        if not (stage / snap["file"]).is_file() or file_sha256(stage / snap["file"]) != snap["sha256"]:
            raise RuntimeError(f"{source / snap['file']} is not the snapshot its state.pt recorded")
    if best_step is not None and not (stage / "checkpoint.pt").is_file():
        raise RuntimeError(f"{source} has a best step in its state.pt and no checkpoint.pt")
    manifest = {
        "model_id": source.name,
        "step": step,
        "parked": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "omitted": omitted,  # snapshots left out: the model ships its first alone
        "files": {n: {"sha256": file_sha256(stage / n), "bytes": (stage / n).stat().st_size} for n in names},
    }
    atomic.write_json(stage / MANIFEST, manifest)
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    stage.rename(folder)
    return manifest


def restore(folder: Path, out: Path) -> int | None:
    """Copy a parked model into its artifact folder `out` when that holds no state of its own; returns the step it
    resumes from, or None when there is nothing (whole) to restore or `out` has its own state."""
    if (out / STATE).exists() or complete_metrics(out / "metrics.json") or not whole(folder):
        return None
    manifest = json.loads((folder / MANIFEST).read_text())
    for name in manifest["files"]:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / name, out / name)
    return int(manifest["step"])


def park_all(profile_name: str, root: Path | None = None) -> int:
    """Park every partly trained model of the profile that has moved on since it was last parked."""
    from .ship_pack import shipped_snapshots
    from .ship_status import headlines  # the same headline LSTM per corpus that pack and status use

    profile = load_profile(profile_name)
    planned = queue(profile)
    headline = headlines(planned)
    parked = 0
    for corpus, config, _ in planned:
        source = model_dir(corpus.artifact_name, config.model_id(corpus.key))
        if not (source / STATE).is_file() or complete_metrics(source / "metrics.json"):
            continue
        if not (source / PROVENANCE).is_file():
            continue  # not trained by `ship train`: nothing to ship from it
        folder = parked_folder(profile.name, corpus.artifact_name, source.name, root)
        if whole(folder) and json.loads((folder / MANIFEST).read_text())["step"] >= _state_step(source)[0]:
            continue
        first_only = len(shipped_snapshots(config, [{}] * 8, config == headline[corpus.key])) == 1
        manifest = park_one(source, folder, first_only)
        size = sum(f["bytes"] for f in manifest["files"].values())
        print(f"[ship] parked {source.name} on {corpus.name} at step {manifest['step']:,} ({size / 1e6:.1f} MB) in "
              f"{folder}", flush=True)  # fmt: skip
        parked += 1
    print(f"[ship] {parked} partly trained model(s) parked; commit {(root or SHIPPED_ROOT) / PARTIAL}", flush=True)
    return 0


def unpark(profile: str, corpus_artifact_name: str, model_id: str, root: Path | None = None) -> None:
    """Remove a model's parked copy (it is finished and packed)."""
    folder = parked_folder(profile, corpus_artifact_name, model_id, root)
    if folder.exists():
        shutil.rmtree(folder)
        print(f"[ship] removed {folder}: the model is finished", flush=True)


def settle(source: Path, packed: Path) -> bool:
    """After `ship pack`: a finished folder whose metrics list snapshots it lacks (it resumed from a parked copy that
    left them out) is replaced by an install of its packed copy, which lists what ships and nothing else (as on a
    fresh clone). Returns whether it was replaced."""
    from charlm.shipped import install

    metrics = complete_metrics(source / "metrics.json")
    if metrics is None or all((source / s["file"]).is_file() for s in metrics.get("snapshots") or []):
        return False
    install(packed, source)
    print(f"[ship] {source.name}: the artifacts now hold its packed copy (it resumed without its unshipped snapshots)")
    return True
