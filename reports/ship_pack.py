"""Shipped models, packed: each finished model copied into models/<profile>/ (or models/pending/<profile>/ while its
Levy set is not whole) with the snapshots the analyses read, its metrics and a manifest holding its provenance and the
sha256 of every file; a set that becomes whole moves in together and retires the old-rule models it replaces; `status`
is reports/ship_status.py. Training them is reports/ship.py; the command line is `python -m reports.ship`.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import corpora
from charlm import archs
from charlm.dropout_search import untried
from charlm.plan import load_profile
from charlm.shipped import MANIFEST, PENDING, RETIRED, SHIPPED_ROOT, shipped_folder, whole
from corpora import atomic
from corpora.errors import UserError

from .ship import PROVENANCE, is_nnn, nnn_configs
from .ship_park import settle, unpark


def shipped_snapshots(config, snapshots: list[dict], headline: bool) -> list[dict]:
    """The snapshots a model ships (the repository's budget for shipped models: SHIPPED_BUDGET_MB):

    - every model: its first snapshot, which the provenance test retrains to (tests/test_shipped.py);
    - the headline model (the profile's largest-row, deepest LSTM, seed 0, on each corpus): every snapshot, for
      training_dynamics (Karpathy et al. Fig 5 right follows that LSTM over its first 3 epochs);
    - every other 1-layer seed-0 model trained at dropout 0, of Fig 1's types and Levy's ablations: every fourth
      snapshot counted back from the last (the last included), for vanishing along training (it reads seed 0 of each
      configuration) and training_dynamics (every second would take the 32 one-layer models past 60 MB: measured,
      64 MB);
    - the rest: none besides the first (the analyses read their final checkpoints; vanishing profiles them at
      initialisation and after training): the deeper models of Fig 1's grid (issue 22), the other seeds, and, as
      issue 38 asks once the shipped models would pass about 130 MB, the lecture notes' rungs, minGRU and minLSTM
      and the models trained at a dropout above 0. `ship status` projects the profile's shipped size by this rule
      once every planned model ships (`projected_bytes`), against SHIPPED_BUDGET_MB.
    """
    if not snapshots:
        return []
    family = archs.REGISTRY[config.arch].family
    if headline:
        keep = set(range(len(snapshots)))
    elif config.seed == 0 and config.layers == 1 and config.dropout == 0 and family not in ("ladder", "min"):
        keep = set(range(len(snapshots) - 1, -1, -4))
    else:
        keep = set()
    keep.add(0)
    return [snap for k, snap in enumerate(snapshots) if k in keep]


SHIPPED_BUDGET_MB = 150  # issues 19, 22 (100 MB for Fig 1's grid), 38 (about 130 MB, then the first snapshot only)
PT_OVERHEAD = 3_500  # bytes of a .pt file besides its float32 weights (torch's zip records, the pickled config)
SIDE_BYTES = 12_000  # a shipped recurrent model's metrics.json and manifest.json (the shipped ones: 5-12 KB)


def projected_bytes(config, vocab_size: int, headline: bool) -> int:
    """What a planned recurrent model will ship, by `shipped_snapshots`'s rule, before it is trained: its checkpoint
    and each snapshot it keeps at 4 bytes a parameter (float32) plus PT_OVERHEAD, and its metrics and manifest.
    Tested against the shipped models' manifests (within 3 %)."""
    from charlm.model import ModelConfig, count_params

    params = count_params(ModelConfig(config.arch, vocab_size, config.layers, config.size))
    files = 1 + len(shipped_snapshots(config, [{}] * config.snapshots, headline))
    return files * (4 * params + PT_OVERHEAD) + SIDE_BYTES


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


SHORT_S = 300.0  # an interrupted session with no record whose next session started within this ran at most this long


def _gap(session: dict, following: dict) -> float:
    """Seconds from one session's start to the next one's."""
    return (
        dt.datetime.fromisoformat(following["started"]) - dt.datetime.fromisoformat(session["started"])
    ).total_seconds()


def _total(sessions: list[dict], key: str) -> tuple[float | None, int]:
    """The sessions' `key` seconds summed, and how many sessions were left out as short: interrupted with no record
    of it (killed before the first one, written every CPU_RECORD_S), the next session started within SHORT_S of it,
    so it ran less than that. None when any other session has no record (it predates the record, or ran long)."""
    total, short = 0.0, 0
    for session, following in zip(sessions, [*sessions[1:], None]):
        if key in session:
            total += session[key]
        elif session.get("interrupted") and following is not None and _gap(session, following) <= SHORT_S:
            short += 1
        else:
            return None, 0
    return round(total, 3), short


def _provenance(sessions: list[dict]) -> dict:
    """How a model was made, from the sessions that trained it (provenance.json)."""
    wall, _ = _total(sessions, "wall_seconds")
    cpu, short = _total(sessions, "cpu_seconds")
    return {
        "command": sessions[0]["command"],
        "git_revisions": sorted({s["git"]["commit"] for s in sessions if s["git"]["commit"]}),
        "uncommitted_changes": any(s["git"]["uncommitted_changes"] for s in sessions),
        # None when a dirty session did not record which files (unknown)
        "uncommitted_files": _uncommitted_files(sessions),
        "date": sessions[-1]["finished"],
        "machine": sessions[-1]["machine"],
        # summed over the sessions (`_total`); a killed session counts its last record, at most CPU_RECORD_S short (and
        # the work since its last resume state is done, and counted, again); None when one has no record of them
        "wall_seconds": wall,
        "cpu_seconds": cpu,
        "short_sessions_uncounted": short,  # killed within SHORT_S with no record: each under SHORT_S, not counted
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
        skipped = untried(profile, corpus, arg)
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
                if model_id not in skipped:  # its line search of dropout will not try it: not "still to train"
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
            settle(source, target)  # resumed from a parked copy without its unshipped snapshots: the packed copy
            unpark(profile.name, corpus.artifact_name, model_id, root)  # finished: its parked state is spent
            if ships:
                packed += 1
                total_bytes += _shipped_bytes(folder)
                retire_stand_ins(folder, root, corpus)
            else:
                waiting += 1
    print(f"[ship] {packed} shipped now, {waiting} waiting for their set in {root / PENDING}; shipped in all: "
          f"{total_bytes / 1e6:.1f} MB; still to train: {', '.join(pending) if pending else 'none'}")  # fmt: skip
    return 0


def _shipped_bytes(folder: Path) -> int:
    return sum(e["bytes"] for e in json.loads((folder / MANIFEST).read_text())["files"].values())


def measured(folder: Path, corpus) -> dict:
    """A shipped model as the report's cross_entropy reads it (test nats per character with its bootstrap std:
    charlm.predict.score_split, charlm.predictions.bootstrap_mean) and how its training ended (its manifest)."""
    import numpy as np
    import torch

    from charlm.checkpoint import load_checkpoint
    from charlm.predict import score_split
    from charlm.predictions import bootstrap_mean

    m = json.loads((folder / MANIFEST).read_text())
    model = load_checkpoint(folder / "checkpoint.pt")
    with torch.inference_mode():
        target_logp, _ = score_split(model, corpus.split("test"), np.zeros(0, dtype=np.int64))
    mean, std = bootstrap_mean(-target_logp.astype(np.float64))
    rule = {k: m["train_config"].get(k) for k in ("epochs", "patience", "converge_delta", "converge_window")}
    return {"model_id": m["model_id"], "rule": rule, "epochs": m["epochs"], "stopped": m["stopped"],
            "best_val_loss": m["best_val_loss"], "test_nats": round(mean, 6), "test_std": round(std, 6),
            "cpu_seconds": m.get("cpu_seconds")}  # fmt: skip


def record_retired(old: Path, new: Path, corpus, ledger: Path, replacing: dict | None = None) -> dict:
    """Append to `ledger` the model in `old` and the one in `new` that replaces it, both `measured` (`replacing`:
    `new` measured before); returns what `new` measured."""
    replacing = replacing or measured(new, corpus)
    records = json.loads(ledger.read_text()) if ledger.is_file() else []
    records.append({"corpus": corpus.name, "corpus_key": corpus.key,
                    "retired": measured(old, corpus), "replaced_by": replacing})  # fmt: skip
    atomic.write_json(ledger, records)
    return replacing


def backfill_retired(profile_name: str, rev: str, root: Path | None = None) -> int:
    """Ledger entries for stand-ins retired before models/<profile>/retired.json existed: every model folder that
    models/<profile>/ held at git revision `rev` and no longer holds, that a shipped model of the same corpus and
    configuration (but for when training stopped) replaces, measured from its files at `rev`."""
    import subprocess
    import tempfile

    from charlm.kinds.recurrent import _training_key
    from charlm.plan import load_profile

    profile = load_profile(profile_name)
    root = root or SHIPPED_ROOT
    ledger = root / profile.name / RETIRED
    done = {r["retired"]["model_id"] for r in json.loads(ledger.read_text())} if ledger.is_file() else set()
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, f"models/{profile.name}/"], cwd=root.parent,
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    corpora_ = {corpora.load(arg, split_mode=profile.splits).artifact_name: arg for arg in profile.corpora}
    added = 0
    for path in sorted(p for p in listed if p.endswith(f"/{MANIFEST}") and p.count("/") == 4):
        _, _, name, model_id, _ = path.split("/")
        current = root / profile.name / name
        if model_id in done or (current / model_id).exists() or name not in corpora_:
            continue
        old = json.loads(subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root.parent, capture_output=True,
                                        check=True).stdout)  # fmt: skip
        if not old.get("train_config"):
            continue
        replacements = [m.parent for m in sorted(current.glob(f"*/{MANIFEST}"))
                        if (c := json.loads(m.read_text()).get("train_config"))
                        and _training_key(c) == _training_key(old["train_config"])]  # fmt: skip
        if not replacements:
            continue
        corpus = corpora.load(corpora_[name], split_mode=profile.splits)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / model_id
            for rel in ("checkpoint.pt", MANIFEST):  # what `measured` reads
                (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                (folder / rel).write_bytes(subprocess.run(["git", "show", f"{rev}:{path.rsplit('/', 1)[0]}/{rel}"],
                                           cwd=root.parent, capture_output=True, check=True).stdout)  # fmt: skip
            record_retired(folder, replacements[0], corpus, ledger)
        print(f"[ship] {model_id} (at {rev}) replaced by {replacements[0].name}: measured into {ledger}", flush=True)
        added += 1
    print(f"[ship] {added} retired model(s) added to {ledger}", flush=True)
    return 0


def retire_stand_ins(folder: Path, root: Path, corpus=None) -> list[str]:
    """Remove the shipped models that stood in for the one in `folder`: same corpus, same configuration but for
    when training stopped, another id. Returns the ids removed. With the `corpus`, each retired model and the one
    replacing it are first measured on its test split (`measured`) into models/<profile>/retired.json, which
    `make docs` tables: what training by the papers' rule moved (issue 38)."""
    from charlm.kinds.recurrent import _manifests_in, _training_key

    manifest = json.loads((folder / MANIFEST).read_text())
    config = manifest.get("train_config")
    if not config:
        return []  # an n-NN: nothing stands in for it
    removed, replacing = [], None
    for other in sorted(folder.parent.glob(f"*/{MANIFEST}")):
        theirs = json.loads(other.read_text())
        same = theirs.get("train_config") and _training_key(theirs["train_config"]) == _training_key(config)
        if same and theirs["model_id"] != manifest["model_id"] and theirs.get("corpus_key") == manifest["corpus_key"]:
            if corpus is not None:
                replacing = record_retired(other.parent, folder, corpus, folder.parent.parent / RETIRED, replacing)
            shutil.rmtree(other.parent)
            removed.append(theirs["model_id"])
            print(f"[ship] removed {other.parent.name}: {manifest['model_id']} replaces it", flush=True)
    _manifests_in.cache_clear()
    return removed
