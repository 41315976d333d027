"""Models shipped with the suite: verified by sha256 and installed into the artifacts instead of trained.

A profile's shipped models live in the repository under `models/<profile>/<corpus>/<model id>/`:

    manifest.json   how the model was made (the exact command, git revision, date, machine, wall time of every
                    training session) and the sha256 and size of every file below
    checkpoint.pt   the best model on validation
    snapshots/      the training snapshots the analyses read (the first one always: the provenance test retrains
                    to it and compares the weights bit for bit, tests/test_shipped.py)
    metrics.json    the training's metrics, its snapshot list cut to the shipped snapshots

An n-NN (charlm.nnn) ships the same manifest (with "kind": "nnn" and its NNNConfig) beside the chosen hidden size's
checkpoint.pt, that grid member's weights after its first step (snapshots/step0000001.pt, for the same provenance
test) and the grid's metrics.json; installed, it is a complete n-NN folder that charlm.nnn reads as cached.

`reports.ship pack` writes them; the report (reports.pipeline) installs them with `install_shipped` before it
plans any training, so a fresh clone reads the converged models at once and trains none of them. A damaged or
missing file is named in one line and that model is trained instead.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from corpora import atomic

from .checkpoint import file_sha256
from .paths import complete_metrics

REPO = Path(__file__).resolve().parents[1]
SHIPPED_ROOT = REPO / "models"  # in the repository, next to the packages
MANIFEST = "manifest.json"
INSTALLED_FROM = "installed_from"  # the metrics.json key that marks an installed (not locally trained) model
RETIRED = "retired.json"  # models/<profile>/retired.json: each stand-in retired, measured beside its replacement
PENDING = "pending"  # models/pending/<profile>/: finished models of a Levy set not yet whole (reports.ship_pack)
PARTIAL = "partial"  # models/partial/<profile>/: partly trained models, parked between machines (reports.ship_park)


def shipped_folder(profile: str, corpus_artifact_name: str, model_id: str, root: Path | None = None) -> Path:
    return (root or SHIPPED_ROOT) / profile / corpus_artifact_name / model_id


def read_manifest(folder: Path) -> dict:
    return json.loads((Path(folder) / MANIFEST).read_text())


def damaged_files(folder: Path) -> str | None:
    """None when every file the manifest lists is there with its sha256; else one line naming the first bad file."""
    folder = Path(folder)
    try:
        manifest = read_manifest(folder)
    except (OSError, ValueError) as err:
        return f"its {MANIFEST} is unreadable ({type(err).__name__})"
    for name, entry in sorted(manifest.get("files", {}).items()):
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        if file_sha256(path) != entry["sha256"]:
            return f"{path} is damaged (its sha256 is not the manifest's)"
    return None


def whole(folder: Path) -> bool:
    """A shipped folder whose manifest lists every file with its sha256."""
    return (Path(folder) / MANIFEST).is_file() and damaged_files(folder) is None


def install(folder: Path, destination: Path) -> Path:
    """Copy a verified shipped model into its artifact folder (staged beside it, then renamed into place)."""
    folder, destination = Path(folder), Path(destination)
    manifest = read_manifest(folder)
    stage = destination.with_name(destination.name + ".installing")
    shutil.rmtree(stage, ignore_errors=True)
    for name in manifest["files"]:
        target = stage / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / name, target)
    metrics = json.loads((stage / "metrics.json").read_text())
    metrics[INSTALLED_FROM] = str(folder.relative_to(REPO)) if folder.is_relative_to(REPO) else str(folder)
    atomic.write_json(stage / "metrics.json", metrics)
    shutil.rmtree(destination, ignore_errors=True)
    destination.parent.mkdir(parents=True, exist_ok=True)
    stage.rename(destination)
    return destination


def as_shipped(folder: Path, destination: Path) -> bool:
    """Give a model trained here the snapshot list it ships with; True when that changed its metrics.json.

    Training keeps every snapshot it takes; the repository ships the first (all of them for the headline LSTM), and
    the shipped metrics.json lists those. The analyses read the snapshots a model's metrics.json lists, so on the
    machine that trained a shipped model a report would read more of them than a fresh clone's (training_dynamics,
    vanishing). Where the two metrics.json differ in their snapshot list alone, the artifacts' becomes the shipped one
    and the training's is kept beside it as metrics.trained.json; the snapshot files stay where they are."""
    path = Path(destination) / "metrics.json"
    try:
        shipped, local = json.loads((Path(folder) / "metrics.json").read_text()), json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    listing = ("snapshots", "snapshots_trained")  # the shipped list, and how many training took (pack adds it)
    rest = [{k: v for k, v in m.items() if k not in (*listing, INSTALLED_FROM)} for m in (shipped, local)]
    if rest[0] != rest[1] or local.get("snapshots") == shipped.get("snapshots"):
        return False
    kept = path.with_name("metrics.trained.json")
    if not kept.exists():
        atomic.write_json(kept, local)
    atomic.write_json(path, {**local, **{k: shipped[k] for k in listing if k in shipped}})
    return True


def installed(destination: Path) -> bool:
    """Whether an artifact folder holds an installed shipped model (rather than one trained here)."""
    metrics = complete_metrics(Path(destination) / "metrics.json")
    return bool(metrics and metrics.get(INSTALLED_FROM))


def install_shipped(
    profile: str,
    wanted: list[tuple[str, str, Path]],
    say: Callable[[str], None] = print,
    root: Path | None = None,
    is_whole: Callable[[Path], bool] | None = None,
) -> dict[str, str]:
    """Install every shipped model of `profile` among `wanted` (corpus artifact name, model id, artifact folder).

    A model already whole in the artifacts is kept (`is_whole`, default: a complete metrics.json). Returns
    {model id: "installed" | "present" | why it was not installed}; a damaged shipped model is said in one line
    and left to be trained.
    """
    is_whole = is_whole or (lambda d: complete_metrics(d / "metrics.json") is not None)
    outcome, aligned = {}, []
    for corpus, model_id, destination in wanted:
        folder = shipped_folder(profile, corpus, model_id, root)
        if not (folder / MANIFEST).is_file():
            continue
        if is_whole(destination):
            outcome[model_id] = "present"
            if as_shipped(folder, destination):
                aligned.append(model_id)
            continue
        problem = damaged_files(folder)
        if problem:
            say(f"shipped model {model_id}: {problem}: training it instead")
            outcome[model_id] = problem
            continue
        install(folder, destination)
        outcome[model_id] = "installed"
    if aligned:
        named = ", ".join(aligned[:3]) + (f" and {len(aligned) - 3} more" if len(aligned) > 3 else "")
        say(f"{len(aligned)} shipped model(s) trained here kept more snapshots than they ship ({named}): the report "
            "reads the shipped ones, as a fresh clone does (each training's list: metrics.trained.json)")  # fmt: skip
    return outcome
