"""Shipped models: their provenance is proven by retraining, their files are verified, installed and never trained.

The provenance test is the contract of models/: each shipped model, trained again from its recorded config with
the training loop of this checkout for the steps of its first shipped snapshot, gives that snapshot's weights bit
for bit. A change to the training code that breaks it fails here, and the shipped models must then be retrained
(`python -m reports.ship train`, then `pack`).
"""

from __future__ import annotations

import functools
import json
import platform
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import corpora
from charlm import nnn, shipped
from charlm.checkpoint import load_payload
from charlm.model import CharLM
from charlm.plan import check_networks_served, load_profile, plan_left_out, planned_model_ids
from charlm.train import TrainConfig, train
from corpora.errors import UserError
from reports import ship, ship_pack, ship_status
from reports.pipeline import RunOptions, run

REPO = Path(__file__).resolve().parents[1]

SHIPPED = sorted(shipped.SHIPPED_ROOT.glob("*/*/*/manifest.json"))
SHIPPED_BUDGET_BYTES = ship_pack.SHIPPED_BUDGET_MB * 1_000_000  # the shipped models with their snapshots


def _is_nnn(manifest_path) -> bool:
    return json.loads(manifest_path.read_text()).get("kind") == "nnn"


RECURRENT = [p for p in SHIPPED if not _is_nnn(p)]
PENDING = sorted((shipped.SHIPPED_ROOT / "pending").glob("*/*/*/manifest.json"))  # finished, waiting for their set
NNNS = [p for p in SHIPPED if _is_nnn(p)]  # n-NNs (charlm.nnn) ship beside the recurrent models


def _same_kernels(recorded: dict, arch: str | None = None) -> bool:
    """Whether this checkout on this machine runs the kernels the model was trained with: the same CPU model, the
    same instruction set torch dispatches to (manifests from before `cpu_capability` was recorded: never assumed)
    and, for `arch`, the same hand-written kernel of ours (charlm.model.TRAINING_KERNELS)."""
    here = ship.machine(1)
    return (
        recorded.get("cpu") == here["cpu"]
        and recorded.get("cpu_capability") == here["cpu_capability"]
        and recorded.get("kernels", {}).get(arch) == here["kernels"].get(arch)
    )


@pytest.mark.parametrize("manifest_path", RECURRENT + PENDING, ids=lambda p: f"{p.parts[-3]}/{p.parts[-2]}")
def test_a_shipped_model_retrained_to_its_first_snapshot_gives_its_weights(manifest_path, tmp_path):
    """Bit for bit on the kernels it was trained with. On another CPU (the next session's machine may be an AMD
    EPYC where the model was trained on an Intel Xeon, or the reverse) the BLAS and oneDNN kernels sum in another
    order and the first update differs by about 1e-6 (measured: 1.6e-6 for the War and Peace LSTM, 9.6e-6 for its
    RNN), as it does for the papers' GRUs trained before their scan (`PaperGRUScan`) replaced autograd through
    the cell; there the retrained weights must agree to within 1e-3 of the distance training moved them. Any change to
    what the recipe computes (learning rate, RMSProp alpha, clipping, batch order, initialisation) moves them by a
    large fraction of that distance, so the test still fails on a change to the training code."""
    folder = manifest_path.parent
    manifest = json.loads(manifest_path.read_text())
    metrics = json.loads((folder / "metrics.json").read_text())
    first = metrics["snapshots"][0]
    config = TrainConfig(**manifest["train_config"])
    splits = manifest["corpus_key"].rsplit(":", 1)[-1]
    corpus = corpora.load(config.corpus, split_mode=splits)
    assert config.model_id(corpus.key) == manifest["model_id"]  # the corpus and config are the recorded ones
    threads = torch.get_num_threads()
    torch.set_num_threads(manifest["machine"]["torch_threads"])
    try:
        out = train(config, tmp_path / "again", corpus=corpus, progress=False, stop_after_steps=first["step"])
    finally:
        torch.set_num_threads(threads)
    again = load_payload(out / first["file"])["state_dict"]
    torch.manual_seed(config.seed)  # the initialisation, as charlm.train draws it (CPU-independent RNG)
    init = CharLM(config.model_config(corpus.vocab_size)).state_dict()
    trained_on = manifest["sessions"][0]["machine"]  # the first snapshot's session
    recorded = load_payload(folder / first["file"])["state_dict"]
    assert_same_weights(manifest, again, recorded, init, trained_on=trained_on, arch=config.arch)


def assert_same_weights(
    manifest: dict, again: dict, recorded: dict, init: dict | None = None, trained_on: dict | None = None, arch=None
) -> None:
    """Bit for bit on the kernels that trained the model (`trained_on`, by default the manifest's machine); on other
    kernels (another CPU, or another kernel of ours) within 1e-3 of the distance training moved the weights from
    `init` (without `init`: within 1e-5 absolute)."""
    assert again.keys() == recorded.keys()
    if _same_kernels(trained_on or manifest["machine"], arch):
        assert all(torch.equal(again[k], recorded[k]) for k in again), (
            f"{manifest['model_id']}: retrained weights differ from the shipped snapshot: retrain it"
        )
        return
    if init is None:
        worst = max(float((again[k] - recorded[k]).abs().max()) for k in again)
        assert worst < 1e-5, f"{manifest['model_id']}: retrained weights differ by {worst:.2e} on this CPU"
        return
    moved = torch.cat([(recorded[k] - init[k]).flatten() for k in recorded]).norm()
    off = torch.cat([(again[k] - recorded[k]).flatten() for k in recorded]).norm()
    assert moved > 0.01, f"{manifest['model_id']}: its first snapshot is its initialisation: nothing to compare"
    assert off < 1e-3 * moved, (
        f"{manifest['model_id']}: retrained weights are {off / moved:.1e} of training's step away from the shipped "
        "snapshot on this CPU (over 1e-3): the training code changed what it computes; retrain it"
    )


def retrain_nnn_first_step(folder, tmp_path) -> tuple[dict, dict]:
    """A shipped n-NN's chosen hidden size trained again from its recorded config, with the training loop of this
    checkout, for the steps of its shipped first-step weights: (again, recorded) state dicts."""
    manifest = json.loads((folder / shipped.MANIFEST).read_text())
    metrics = json.loads((folder / "metrics.json").read_text())
    first = metrics["first_step_snapshot"]
    config = nnn.NNNConfig(**{**manifest["nnn_config"], "hidden_grid": tuple(manifest["nnn_config"]["hidden_grid"])})
    corpus = corpora.load(config.corpus, split_mode=metrics["corpus_splits"])
    assert config.model_id(corpus.key) == manifest["model_id"]  # the corpus and config are the recorded ones
    threads = torch.get_num_threads()
    torch.set_num_threads(manifest["machine"]["torch_threads"])
    try:
        nnn._train_one(config, manifest["hidden"], corpus, tmp_path / "again", manifest["model_id"], False,
                       snapshots=True, stop_after_steps=first["step"])  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    again = load_payload(tmp_path / "again" / first["file"])["state_dict"]
    return again, load_payload(folder / first["file"])["state_dict"]


@pytest.mark.parametrize("manifest_path", NNNS, ids=lambda p: f"{p.parts[-3]}/{p.parts[-2]}")
def test_a_shipped_nnn_retrained_to_its_first_step_gives_its_weights_bit_for_bit(manifest_path, tmp_path):
    assert_same_weights(json.loads(manifest_path.read_text()), *retrain_nnn_first_step(manifest_path.parent, tmp_path))


@functools.cache
def training_sources() -> frozenset[str]:
    """The repository files a `reports.ship train` process runs (every module it has imported once it has built
    a recurrent model, an n-NN and their training loop), relative to the repository root."""
    code = (
        "import sys, reports.ship, charlm.train, charlm.nnn, charlm.model, charlm.plan, corpora\n"
        "print('\\n'.join(m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    files = {str(Path(f).resolve().relative_to(REPO)) for f in out.split() if Path(f).resolve().is_relative_to(REPO)}
    return frozenset(f for f in files if not f.startswith(".venv"))


def test_training_sources_are_the_code_that_trains():
    assert {"charlm/train.py", "charlm/model.py", "charlm/nnn.py", "reports/ship.py"} <= training_sources()
    assert "README.md" not in training_sources() and not any(f.startswith("tests/") for f in training_sources())


def test_the_shipped_models_are_whole_planned_by_their_profile_and_within_budget(tmp_path, monkeypatch):
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path))  # a clean clone: old-rule models stand in for new ones
    assert SHIPPED, "no shipped models found under models/ (the reference profile ships its converged models)"
    total = 0
    by_profile: dict[str, set] = {}
    for manifest_path in SHIPPED:
        folder = manifest_path.parent
        assert shipped.damaged_files(folder) is None, folder
        manifest = json.loads(manifest_path.read_text())
        total += sum(entry["bytes"] for entry in manifest["files"].values())
        by_profile.setdefault(manifest["profile"], set()).add(manifest["model_id"])
        assert manifest["command"].startswith("python -m reports.ship train")
        assert re.fullmatch(r"[0-9a-f]{40}", manifest["git_revisions"][0])
        if manifest["uncommitted_changes"]:  # trained from a dirty tree: only files that training does not run
            assert manifest.get("uncommitted_files"), f"{folder}: trained with unrecorded uncommitted changes"
            assert not set(manifest["uncommitted_files"]) & training_sources(), folder
        # wall seconds: None where a session killed before they were recorded while it ran has none; then CPU seconds
        assert (manifest["wall_seconds"] or 0) > 0 or (manifest["cpu_seconds"] or 0) > 0, folder
        assert manifest["machine"]["cpu"]
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics["complete"] and metrics["checkpoint_sha256"] == manifest["files"]["checkpoint.pt"]["sha256"]
    for profile, ids in by_profile.items():
        assert ids <= planned_model_ids(load_profile(profile)), profile  # each planned, or standing in for one
    assert total <= SHIPPED_BUDGET_BYTES, f"{total / 1e6:.1f} MB shipped"


def test_the_projected_size_of_a_planned_model_is_what_the_shipped_ones_hold():
    """`ship status` projects the shipped size before training (ship_pack.projected_bytes): checked against the
    bytes every shipped recurrent model's manifest lists, each within 3 %."""
    by_profile: dict = {}
    for manifest_path in RECURRENT + PENDING:
        manifest = json.loads(manifest_path.read_text())
        profile = manifest["profile"]
        if profile not in by_profile:
            planned = ship.queue(load_profile(profile))
            by_profile[profile] = ({(c.key, cf.model_id(c.key)): (c, cf) for c, cf, _ in planned},
                                   ship_status.headlines(planned))  # fmt: skip
        configs, headline = by_profile[profile]
        if (manifest["corpus_key"], manifest["model_id"]) not in configs:
            continue  # an old-rule model standing in for a planned one
        corpus, config = configs[manifest["corpus_key"], manifest["model_id"]]
        actual = sum(entry["bytes"] for entry in manifest["files"].values())
        projected = ship_pack.projected_bytes(config, corpus.vocab_size, config == headline[corpus.key])
        assert abs(projected - actual) <= 0.03 * actual, (manifest["model_id"], projected, actual)


@pytest.mark.skipif(not PENDING, reason="no model waits in models/pending/")
def test_pending_models_are_whole_and_trained_by_the_papers_rule():
    """models/pending/ keeps Levy's models retrained by the papers' stopping rule until their set (corpus, depth) is
    complete; nothing reads them yet. Each is whole, of its profile's grid, and trained by the rule."""
    from charlm.plan import neural_configs

    grids: dict[str, dict] = {}  # profile -> corpus key -> the ids of its grid there
    for manifest_path in PENDING:
        folder, manifest = manifest_path.parent, json.loads(manifest_path.read_text())
        assert shipped.damaged_files(folder) is None, folder
        tc = manifest["train_config"]
        assert (tc["converge_delta"], tc["epochs"], tc["patience"]) == (0.0, 50, 5), folder
        if manifest["profile"] not in grids:
            profile = load_profile(manifest["profile"])
            loaded = {a: corpora.load(a, split_mode=profile.splits) for a in profile.corpora}
            grids[manifest["profile"]] = {c.key: {k.model_id(c.key) for k in neural_configs(profile, c, a)}
                                          for a, c in loaded.items()}  # fmt: skip
        assert manifest["model_id"] in grids[manifest["profile"]][manifest["corpus_key"]], folder
        assert not manifest["uncommitted_changes"] or not set(manifest["uncommitted_files"]) & training_sources()


def test_training_follows_the_issues_order_levys_sets_whole_then_the_ladder_dropout_rows_minimal_rnns_the_rest():
    class Key:  # a corpus as training_order reads it: its key
        key = "k"

    c = Key()

    def cfg(arch, layers=1, size=8, dropout=0.0, seed=0):
        return (c, TrainConfig("c", arch, layers, size, dropout, seed))

    levy1 = [cfg("lstm"), cfg("lstm", seed=1), cfg("lstm-srnn")]
    levy2 = [cfg("lstm", 2, 6), cfg("lstm-gates", 2, 6)]
    rest, mingru = cfg("rnn", 1, 12), cfg("mingru", 1, 20)
    ladder, gru_d0, gru_d1 = cfg("cbow", 1, 30), cfg("gru-paper", 1, 9), cfg("gru-paper", 1, 9, dropout=0.1)
    rnn_d1 = cfg("rnn", 1, 14, dropout=0.1)
    planned = [rest, gru_d0, mingru, *levy2, gru_d1, ladder, rnn_d1, *levy1]  # as a profile might plan them
    order = ship.training_order(planned, [levy1, levy2])
    # Levy's sets first, each whole, in the order given; the ladder; Fig 1's cells trained at several dropouts (their
    # dropout-0 model too): the ladder's rungs (dropout 0 at its depth) first, then the fused RNN before our GRU's
    # kernel; minGRU; the rest
    assert order == [*levy1, *levy2, ladder, gru_d0, rnn_d1, gru_d1, mingru, rest]
    groups = {m: ship.PRIORITY[r] for m, (r, _) in ship.priorities(planned, [levy1, levy2]).items()}
    assert groups[gru_d0[1].model_id("k")] == "Fig 1's dropout grid" and groups[rest[1].model_id("k")] == "the rest"


def test_the_dropout_grid_trains_the_ladders_rungs_first_then_cell_by_cell_each_chosen_once_its_models_are_done():
    class Key:
        def __init__(self, key):
            self.key = key

    a, b = Key("a"), Key("b")

    def cfg(corpus, arch, layers, dropout):
        return (corpus, TrainConfig(corpus.key, arch, layers, 8 + layers, dropout, 0))

    planned = [cfg(corpus, arch, layers, d) for corpus in (a, b) for arch in ("lstm", "gru-paper")
               for d in (0.0, 0.1) for layers in (1, 2)]  # fmt: skip  # corpus, architecture, dropout, depth
    order = [(corpus.key, c.arch, c.layers, c.dropout) for corpus, c in ship.training_order(planned, [])]
    rungs = [(k, arch, 1, 0.0) for arch in ("lstm", "gru-paper") for k in ("a", "b")]  # the ladder's, fused first
    assert order == rungs + [(k, arch, layers, d) for layers in (1, 2) for arch in ("lstm", "gru-paper")
                             for k in ("a", "b") for d in (0.0, 0.1) if (layers, d) != (1, 0.0)]  # fmt: skip
    # then the rest of the ladder's depth, then the deeper cells: cell by cell, fused first, a cell's dropouts together
    from analyses import ladder

    assert ship.LADDER_LAYERS == ladder.SETTINGS["layers"]  # the depth whose RNN, GRU and LSTM the ladder reads


def test_shipped_snapshots_keep_the_first_and_thin_the_rest():
    snaps = [{"step": s} for s in (1, 2, 5, 10, 22, 47)]
    config = TrainConfig("c", "lstm", 1, 8, seed=0)
    assert ship_pack.shipped_snapshots(config, snaps, headline=True) == snaps
    assert [s["step"] for s in ship_pack.shipped_snapshots(config, snaps, headline=False)] == [1, 2, 47]
    other_seed = TrainConfig("c", "lstm", 1, 8, seed=1)
    assert [s["step"] for s in ship_pack.shipped_snapshots(other_seed, snaps, headline=False)] == [1]
    deeper = TrainConfig("c", "gru-paper", 2, 8, seed=0)  # Fig 1's grid beyond one layer: its first snapshot only
    assert [s["step"] for s in ship_pack.shipped_snapshots(deeper, snaps, headline=False)] == [1]
    assert ship_pack.shipped_snapshots(TrainConfig("c", "lstm", 3, 8, seed=0), snaps, headline=True) == snaps
    assert ship_pack.shipped_snapshots(config, [], headline=True) == []
    # issue 38's budget: the notes' rungs, minGRU / minLSTM and the dropout models ship their first snapshot only
    for first_only in (TrainConfig("c", "cbow", 1, 8, seed=0), TrainConfig("c", "mingru", 1, 8, seed=0),
                       TrainConfig("c", "lstm", 1, 8, seed=0, dropout=0.1)):  # fmt: skip
        assert [s["step"] for s in ship_pack.shipped_snapshots(first_only, snaps, headline=False)] == [1]
    levy = TrainConfig("c", "lstm-srnn", 1, 8, seed=0)  # Levy's 1-layer ablations keep their trajectories
    assert [s["step"] for s in ship_pack.shipped_snapshots(levy, snaps, headline=False)] == [1, 2, 47]


@pytest.fixture
def tiny_shipped(tmp_path, monkeypatch, small_text_file):
    """A two-model profile trained with `reports.ship train`, packed into tmp/models, its artifacts then removed."""
    toml = tmp_path / "tiny.toml"
    toml.write_text(
        textwrap.dedent(f"""
        description = "two tiny LSTMs"
        corpora = ["{small_text_file}"]
        analyses = ["cross_entropy"]
        [train]
        max_chars = 3000
        eval_chars = 1000
        batch_size = 4
        unroll = 20
        snapshots = 3
        [[grid]]
        types = ["lstm", "rnn"]
        layers = [1]
        budgets = [8]
        """)
    )
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "trained"))
    monkeypatch.setattr(shipped, "SHIPPED_ROOT", tmp_path / "models")
    assert ship.main(["train", "--profile", str(toml)]) == 0
    ship_pack.pack_all(str(toml), root=tmp_path / "models")
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))  # a fresh clone: nothing trained
    return load_profile(str(toml))


def test_pack_writes_a_manifest_with_provenance_and_every_files_sha256(tiny_shipped, tmp_path):
    manifests = sorted((tmp_path / "models" / "tiny").glob("*/*/manifest.json"))
    assert len(manifests) == 2
    lstm = json.loads(next(p for p in manifests if "/lstm-" in str(p)).read_text())
    assert lstm["command"] == f"python -m reports.ship train --profile {tmp_path / 'tiny.toml'}"
    assert set(lstm["files"]) == {"checkpoint.pt", "metrics.json", "snapshots/step0000001.pt",
                                  "snapshots/step0000006.pt", "snapshots/step0000038.pt"}  # fmt: skip
    assert lstm["machine"]["torch_threads"] == 1 and lstm["epochs"] >= 1 and lstm["wall_seconds"] > 0
    assert 0 < lstm["cpu_seconds"] <= 1.5 * lstm["wall_seconds"] * lstm["machine"]["torch_threads"]  # one thread
    for manifest_path in manifests:
        assert shipped.damaged_files(manifest_path.parent) is None


def test_the_report_installs_shipped_models_and_trains_none(tiny_shipped, tmp_path, capsys):
    options = RunOptions(tiny_shipped, build_root=tmp_path / "build")
    run(options)
    out = capsys.readouterr().out
    assert "shipped models: 2 in models/tiny/ (2 installed now" in out and "(2 cached, 0 to train)" in out
    for manifest_path in (tmp_path / "models" / "tiny").glob("*/*/manifest.json"):
        model_id = manifest_path.parent.name
        (installed,) = (tmp_path / "artifacts").glob(f"*/{model_id}")
        assert shipped.installed(installed)
        assert (installed / "checkpoint.pt").read_bytes() == (manifest_path.parent / "checkpoint.pt").read_bytes()
    run(options)
    assert "(0 installed now, 2 already in the artifacts)" in capsys.readouterr().out


def test_a_model_trained_here_is_read_with_the_snapshots_it_ships(tiny_shipped, tmp_path):
    """On the machine that trained a shipped model the artifacts hold every snapshot training took, the repository
    the ones it ships (the RNN its first of 3; the headline LSTM all 3): the report reads the shipped list, as a fresh
    clone does, keeps the training's beside it and touches no snapshot file; a model whose lists agree is left as
    it is, and a second run changes nothing."""
    trained = tmp_path / "trained"
    rnn, lstm = next(trained.glob("*/rnn-*")), next(trained.glob("*/lstm-*"))
    ships = shipped.shipped_folder("tiny", rnn.parent.name, rnn.name, tmp_path / "models") / "metrics.json"
    ships = json.loads(ships.read_text())["snapshots"]
    local = json.loads((rnn / "metrics.json").read_text())
    assert len(local["snapshots"]) == 3 and len(ships) < 3  # training kept 3, the repository ships fewer
    files, lstm_metrics = sorted((rnn / "snapshots").iterdir()), (lstm / "metrics.json").read_bytes()
    wanted = [(d.parent.name, d.name, d) for d in (rnn, lstm)]
    said = []
    outcome = shipped.install_shipped("tiny", wanted, said.append, root=tmp_path / "models")
    assert set(outcome.values()) == {"present"} and len(said) == 1 and rnn.name in said[0]
    assert json.loads((rnn / "metrics.json").read_text())["snapshots"] == ships
    assert json.loads((rnn / "metrics.trained.json").read_text()) == local
    assert sorted((rnn / "snapshots").iterdir()) == files and (lstm / "metrics.json").read_bytes() == lstm_metrics
    assert shipped.install_shipped("tiny", wanted, said.append, root=tmp_path / "models") == outcome
    assert len(said) == 1 and not (lstm / "metrics.trained.json").exists()


def test_a_damaged_shipped_file_is_named_and_that_model_is_trained_to_the_same_weights(tiny_shipped, tmp_path, capsys):
    (lstm,) = (tmp_path / "models" / "tiny").glob("*/lstm-*")
    original = (lstm / "checkpoint.pt").read_bytes()
    (lstm / "checkpoint.pt").write_bytes(original[:-10] + bytes(10))
    run(RunOptions(tiny_shipped, build_root=tmp_path / "build"))
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "is damaged" in line]
    assert len(lines) == 1 and lstm.name in lines[0] and "training it instead" in lines[0]
    assert "(1 cached, 1 to train)" in out
    (trained,) = (tmp_path / "artifacts").glob(f"*/{lstm.name}")
    assert not shipped.installed(trained)
    again, before = (
        load_payload(d / "checkpoint.pt")["state_dict"]
        for d in (trained, tmp_path / "trained" / lstm.parent.name / lstm.name)
    )
    assert all(torch.equal(again[k], before[k]) for k in before)  # same config, same seed: the same model


def test_retrain_trains_the_shipped_models_again(tiny_shipped, tmp_path, capsys):
    run(RunOptions(tiny_shipped, build_root=tmp_path / "build"))
    capsys.readouterr()
    run(RunOptions(tiny_shipped, build_root=tmp_path / "build", retrain=True))
    out = capsys.readouterr().out
    assert "(0 cached, 2 to train)" in out
    assert not any(shipped.installed(d) for d in (tmp_path / "artifacts").glob("*/*-s0-*"))


def test_a_model_locked_by_a_live_worker_is_skipped_and_a_stale_lock_taken_over(tmp_path):
    """Several `ship train` workers share one list: a live holder's model is skipped, a dead holder's taken over."""
    import os

    (tmp_path / "training.lock").write_text(f"{platform.node()} {os.getppid()}")  # a live process: pytest's parent
    with ship.training_lock(tmp_path) as holder:
        assert holder == os.getppid()
    assert (tmp_path / "training.lock").exists()  # not ours to remove
    (tmp_path / "training.lock").write_text(f"{platform.node()} 999999999")  # no such process
    with ship.training_lock(tmp_path) as holder:
        assert holder is None and (tmp_path / "training.lock").read_text().endswith(f" {os.getpid()}")
    assert not (tmp_path / "training.lock").exists()


@pytest.fixture
def tiny_nnn_shipped(tmp_path, monkeypatch, small_text_file):
    """A profile with one tiny LSTM and two n-NNs; `reports.ship train --only nnn` trains the n-NNs (with a grid of
    two hidden sizes and short epochs), `pack` ships them into tmp/models, and the artifacts are then removed."""
    toml = tmp_path / "tinynnn.toml"
    toml.write_text(
        textwrap.dedent(f"""
        description = "one tiny LSTM and two n-NNs"
        corpora = ["{small_text_file}"]
        analyses = ["cross_entropy"]
        [train]
        max_chars = 2000
        eval_chars = 1000
        batch_size = 4
        unroll = 20
        [[grid]]
        types = ["lstm"]
        layers = [1]
        budgets = [8]
        [baselines]
        nnn_n = [1, 2]
        nnn_hidden = [4, 8]
        nnn_epochs = 3
        nnn_epoch_chars = 2000
        nnn_batch_chars = 200
        nnn_lr_decay = 0.5
        nnn_decay_after = 1
        nnn_targets = "contexts"
        """)
    )
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "trained"))
    monkeypatch.setattr(shipped, "SHIPPED_ROOT", tmp_path / "models")
    assert ship.main(["train", "--profile", str(toml), "--only", "nnn"]) == 0
    ship_pack.pack_all(str(toml), root=tmp_path / "models")
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))  # a fresh clone: nothing trained
    return load_profile(str(toml))


def test_nnns_ship_with_provenance_retrain_bit_for_bit_and_the_report_installs_them(tiny_nnn_shipped, tmp_path, capsys):
    """One fixture (its training and packing are the slow part) for the whole path: pack, provenance, install."""
    manifests = sorted((tmp_path / "models" / "tinynnn").glob("*/nnn-*/manifest.json"))
    assert [p.parent.name.split("-")[1] for p in manifests] == ["n1", "n2"]
    assert not list((tmp_path / "models" / "tinynnn").glob("*/lstm-*"))  # --only nnn: the LSTM is still to train
    for manifest_path in manifests:
        folder = manifest_path.parent
        manifest = json.loads(manifest_path.read_text())
        assert manifest["kind"] == "nnn" and shipped.damaged_files(folder) is None
        assert manifest["command"] == f"python -m reports.ship train --profile {tmp_path / 'tinynnn.toml'} --only nnn"
        assert set(manifest["files"]) == {"checkpoint.pt", "metrics.json", "snapshots/step0000001.pt"}
        assert manifest["machine"]["torch_threads"] == 1 and manifest["wall_seconds"] > 0
        assert manifest["cpu_seconds"] > 0
        metrics = json.loads((folder / "metrics.json").read_text())
        assert [g["hidden"] for g in metrics["grid"]] == [4, 8] and manifest["hidden"] == metrics["best_hidden"]
        assert metrics["checkpoint_sha256"] == manifest["files"]["checkpoint.pt"]["sha256"]
        assert manifest["epochs"] == 3 and len(metrics["chosen_member"]["epochs"]) == 3
        again, recorded = retrain_nnn_first_step(folder, tmp_path / folder.name)
        assert_same_weights(manifest, again, recorded)
        final = load_payload(folder / "checkpoint.pt")["state_dict"]
        assert not all(torch.equal(recorded[k], final[k]) for k in final)  # the first step, not the trained model
    # the report installs them and trains none of them
    run(RunOptions(tiny_nnn_shipped, build_root=tmp_path / "build"))
    out = capsys.readouterr().out
    assert "shipped models: 2 in models/tinynnn/ (2 installed now" in out
    for manifest_path in manifests:
        (installed,) = (tmp_path / "artifacts").glob(f"*/{manifest_path.parent.name}")
        assert shipped.installed(installed)
        assert (installed / "checkpoint.pt").read_bytes() == (manifest_path.parent / "checkpoint.pt").read_bytes()
        assert not list(installed.glob("H*"))  # no grid member trained here


def test_a_profile_that_ships_its_models_leaves_out_those_not_shipped_yet(tiny_nnn_shipped, tmp_path, capsys):
    """`ships_models = true` (the reference profile): a model the repository does not ship yet is named and left out
    of the run, not trained for hours; that is no failure (no ReportIncomplete). --retrain trains it."""
    toml = tmp_path / "tinynnn.toml"
    toml.write_text("ships_models = true\n" + toml.read_text())
    profile = load_profile(str(toml))
    assert profile.ships_models and not tiny_nnn_shipped.ships_models
    _, kept, left_out = plan_left_out(profile)
    (lstm,) = left_out  # the shipped n-NNs stay
    assert lstm.kind.name == "neural" and {m.kind.name for m in kept} == {"nnn"}
    assert plan_left_out(profile, retrain=True)[2] == [] and plan_left_out(tiny_nnn_shipped)[2] == []
    assert lstm.model_id not in planned_model_ids(profile) and lstm.model_id in planned_model_ids(tiny_nnn_shipped)
    html, _ = run(RunOptions(profile, build_root=tmp_path / "build"))
    out = capsys.readouterr().out
    assert "1 model(s) of profile tinynnn are not shipped yet and are left out" in out and lstm.model_id in out
    assert "plan: 0 neural models" in out and not list((tmp_path / "artifacts").glob(f"*/{lstm.model_id}"))
    page = html.read_text()
    assert 'id="unshipped"' in page and lstm.model_id in page and 'id="failures"' not in page
    run(RunOptions(profile, build_root=tmp_path / "build", retrain=True))
    out = capsys.readouterr().out
    assert "not shipped yet" not in out and "(0 cached, 1 to train)" in out
    assert plan_left_out(profile)[2] == []  # built in the artifacts now: planned like any other


def test_the_default_profile_is_the_shipped_one_and_a_corpus_of_your_own_trains_quick(small_text_file, monkeypatch,
                                                                                    capsys):  # fmt: skip
    """`python -m reports` is `make report` (reference); with --corpus of your own it is quick, since reference ships
    no networks for it, and asking reference for it is one line naming what to run instead, before anything runs."""
    from reports import __main__ as cli

    assert cli.profile_name(None, None) == "reference" and cli.profile_name("smoke", None) == "smoke"
    assert cli.profile_name(None, [str(small_text_file)]) == "quick"
    reference = load_profile("reference")
    _, models, left_out = plan_left_out(reference, [str(small_text_file)])
    assert not [m for m in models if m.kind.recurrent] and [m for m in left_out if m.kind.recurrent]
    with pytest.raises(UserError, match=r"has none for 'small', so its report would hold the n-grams alone.*quick"):
        cli.main(["--profile", "reference", "--corpus", str(small_text_file), "--plan"])
    _, models, left_out = plan_left_out(reference)  # its own corpora: networks ship for both
    check_networks_served(reference, models, left_out)
    seen = {}
    monkeypatch.setattr(cli, "print_plan", lambda profile, *rest: seen.setdefault("profile", profile.name))
    monkeypatch.setattr(cli, "plan", lambda profile, args: ())
    assert cli.main(["--plan"]) == 0 and seen["profile"] == "reference"


def test_status_tables_each_models_state_cost_and_the_estimate_recorded_before_it_trained(tiny_shipped, tmp_path,
                                                                                         capsys):  # fmt: skip
    assert ship.main(["status", "--profile", str(tmp_path / "tiny.toml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| corpus | model | group | state | epochs | best val | CPU | estimate CPU | shipped MB |"
    rows = [line.strip("| ").split(" | ") for line in lines[2:] if line.startswith("| small")]
    assert len(rows) == 2 and all(row[3] == "shipped" for row in rows)
    for row in rows:  # the CPU seconds measured, and the estimate `ship train` recorded as the model started
        model = json.loads(next((tmp_path / "models" / "tiny").glob(f"*/{row[1]}/manifest.json")).read_text())
        assert row[6] == ship_status.cost(model["cpu_seconds"]) and row[6].endswith(" s")  # seconds: tiny models
        recorded = model["sessions"][0]["estimate_cpu_seconds"]
        assert recorded > 0 and row[7] == f"{ship_status.cost(recorded)} (before)"
    assert ship_status.cost(7200) == "2.00 h" and ship_status.cost(None) == ""
    second = lines.index("| group (in training order) | models | shipped | waiting for their set | not finished | "
                         "CPU-hours left |")  # fmt: skip
    groups = [line.strip("| ").split(" | ") for line in lines[second:] if line.startswith("| ")]
    assert sum(int(g[1]) for g in groups[1:]) == 2 and sum(int(g[2]) for g in groups[1:]) == 2  # every model, shipped
    assert all(g[4] == "0" and g[5] == "0.0" for g in groups[1:])
    summary = lines[-1]
    assert summary.startswith("2 of 2 models shipped") and "0 to train" in summary
    assert "by the estimate 0.0 CPU-hours of training left" in summary and "the 2 shipped with an estimate" in summary


def test_status_tells_a_model_training_here_from_one_partly_trained_finished_or_not_started(tmp_path, monkeypatch):
    """What `ship status` reads in the artifacts folder: a live worker's lock, a resume state, a finished run."""
    import os

    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    corpus = corpora.load("warpeace")
    config = TrainConfig(corpus="warpeace", arch="lstm", layers=1, size=8)
    out = tmp_path / "artifacts" / corpus.artifact_name / config.model_id(corpus.key)
    models = tmp_path / "models"
    at = lambda: ship_status.standing("tiny", corpus, config, models)  # noqa: E731
    assert at().state == "to train" and at().cpu_s is None
    out.mkdir(parents=True)
    sessions = [{"cpu_seconds": 100.0, "estimate_cpu_seconds": 1000.0}, {"cpu_seconds": 50.5}]
    (out / "provenance.json").write_text(json.dumps({"sessions": sessions}))
    (out / "metrics.json").write_text(json.dumps({"epochs": [{}, {}, {}], "best_val_loss": 1.5, "complete": False}))
    partly = at()
    assert (partly.state, partly.epochs, partly.best_val, partly.cpu_s) == ("partly trained", 3, 1.5, 150.5)
    assert partly.estimated_before and partly.left_s == 1000.0 - 150.5  # its estimate less what it has used
    (out / "training.lock").write_text(f"{platform.node()} {os.getpid()}")  # a live process holds it
    assert at().state == f"training (pid {os.getpid()})"
    (out / "training.lock").unlink()
    (out / "metrics.json").write_text(json.dumps({"epochs": [{}] * 4, "best_val_loss": 1.4, "complete": True}))
    assert at().state == "to pack" and at().left_s == 0.0


def test_cpu_seconds_are_summed_over_sessions_and_unknown_when_one_was_interrupted():
    def session(finished, cpu=None, started="2026-11-29T10:00:00+00:00"):
        record = {"command": "c", "git": {"commit": "abc", "uncommitted_changes": False, "uncommitted_files": []},
                  "machine": {}, "started": started, "finished": finished, "wall_seconds": 10.0}  # fmt: skip
        return record if cpu is None else {**record, "cpu_seconds": cpu}

    later = "2026-11-29T12:00:00+00:00"  # two hours after the sessions above start
    assert ship_pack._provenance([session("t1", 4.0), session("t2", 5.5, later)])["cpu_seconds"] == 9.5
    killed = {**session(None), "interrupted": True}  # killed before anything was recorded, and the next session
    assert ship_pack._provenance([killed, session("t2", 5.5, later)])["cpu_seconds"] is None  # started 2 h later
    # ... unless the next one started within SHORT_S of it: it ran less than that, and is said to be left out
    soon = "2026-11-29T10:00:40+00:00"
    provenance = ship_pack._provenance([killed, session("t2", 5.5, soon)])
    assert provenance["cpu_seconds"] == 5.5 and provenance["short_sessions_uncounted"] == 1
    assert ship_pack._provenance([session("t1", 4.0), killed])["cpu_seconds"] is None  # the last: no bound
    killed_later = {**session(None, 3.0), "interrupted": True}  # its last record of CPU seconds counts
    assert ship_pack._provenance([killed_later, session("t2", 5.5, later)])["cpu_seconds"] == 8.5
    # wall seconds likewise: summed over every session, unknown when one has no record of them
    assert ship_pack._provenance([killed_later, session("t2", 5.5, later)])["wall_seconds"] == 20.0
    no_wall = {k: v for k, v in killed_later.items() if k != "wall_seconds"}
    assert ship_pack._provenance([no_wall, session("t2", 5.5, later)])["wall_seconds"] is None
    assert ship_pack._provenance([no_wall, session("t2", 5.5, soon)])["wall_seconds"] == 10.0


def test_a_training_sessions_cpu_seconds_are_on_record_while_it_runs(tmp_path, monkeypatch):
    """A session killed with its developer session keeps the CPU seconds it used: they reach provenance.json every
    CPU_RECORD_S while training runs (here every 0.02 s), and exactly when it ends."""
    monkeypatch.setattr(ship, "CPU_RECORD_S", 0.02)
    path = tmp_path / "provenance.json"
    session = {"finished": None}
    record = {"sessions": [session]}
    on_disk = []
    with ship.cpu_recorded(record, session, path) as cpu_seconds:
        until = time.process_time() + 0.3
        while time.process_time() < until:  # a training's work
            if path.exists():
                on_disk.append(json.loads(path.read_text())["sessions"][0].get("cpu_seconds") or 0.0)
    assert max(on_disk) > 0.1  # written while it ran: a kill here would have left that much on record
    assert 0.3 <= cpu_seconds() < 0.3 + 1.0 and cpu_seconds() >= max(on_disk)
    wall = json.loads(path.read_text())["sessions"][0]["wall_seconds"]  # the wall time so far, beside it
    assert 0.1 < wall <= 0.3 + 1.0


def test_levys_set_ships_whole_and_retires_the_stand_ins_it_replaces(tmp_path, monkeypatch, small_text_file):
    """A profile's stopping rule changed (issue 38): its old models stand in until the retrained ones ship. Levy's
    table at one depth ships only whole: a finished member waits in models/pending/ while another trains; once all
    are finished they move in together and the stand-ins they replace are removed."""
    from charlm.plan import plan_all

    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "trained"))
    monkeypatch.setattr(shipped, "SHIPPED_ROOT", tmp_path / "models")
    toml = tmp_path / "tiny.toml"
    head = f"""description = "Levy's table in small"\ncorpora = ["{small_text_file}"]\nanalyses = ["ablations"]
ships_models = true\n[train]\nmax_chars = 2000\neval_chars = 500\nbatch_size = 4\nunroll = 20\nsnapshots = 1\n"""
    levy = '[[grid]]\ntypes = ["lstm"]\nlayers = [1]\nbudgets = [8]\n'  # the same LSTM as the yardstick
    levy += '[ablations]\narchs = ["lstm-gates"]\nlayers = 1\nbudget = 8\nlstm_seeds = [0]\n'
    toml.write_text(head + "epochs = 2\n" + levy)  # the earlier rule
    assert ship.main(["train", "--profile", str(toml)]) == 0
    ship_pack.pack_all(str(toml), root=tmp_path / "models")
    old = sorted(p.name for p in (tmp_path / "models" / "tiny").glob("*/*"))
    assert len(old) == 2

    toml.write_text(head + "epochs = 3\n" + levy)  # the papers' rule: the same two models, new ids
    assert ship.main(["train", "--profile", str(toml), "--only", "lstm"]) == 0  # the yardstick first
    ship_pack.pack_all(str(toml), root=tmp_path / "models")
    (waiting,) = (tmp_path / "models" / "pending" / "tiny").glob("*/lstm-L1-*")
    assert sorted(p.name for p in (tmp_path / "models" / "tiny").glob("*/*")) == old  # nothing mixed in yet
    profile = load_profile(str(toml))
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "fresh"))  # a fresh clone plans what ships
    _, models = plan_all(profile)
    assert sorted(m.model_id for m in models if m.stand_in_for) == old  # both still stood in for

    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "trained"))
    assert ship.main(["train", "--profile", str(toml)]) == 0
    ship_pack.pack_all(str(toml), root=tmp_path / "models")
    new = sorted(p.name for p in (tmp_path / "models" / "tiny").glob("*/*"))
    assert len(new) == 2 and not set(new) & set(old) and waiting.name in new
    assert not list((tmp_path / "models" / "pending").glob("*/*/*"))  # moved, not copied
    assert all(shipped.damaged_files(p) is None for p in (tmp_path / "models" / "tiny").glob("*/*"))
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "fresh"))
    _, models = plan_all(profile)
    assert sorted(m.model_id for m in models) == new and not any(m.stand_in_for for m in models)

    # what the papers' rule moved: each retired model and its replacement, measured as cross_entropy reads them
    from charlm import predictions
    from charlm.predict import predict_checkpoint

    ledger = json.loads((tmp_path / "models" / "tiny" / ship_pack.RETIRED).read_text())
    assert sorted(r["retired"]["model_id"] for r in ledger) == old
    for record in ledger:
        for side, where in (("retired", tmp_path / "trained"), ("replaced_by", tmp_path / "models" / "tiny")):
            (checkpoint,) = where.glob(f"*/{record[side]['model_id']}/checkpoint.pt")
            preds = predictions.load(predict_checkpoint(checkpoint, out=tmp_path / "p.npz", progress=False))
            assert record[side]["test_nats"] == pytest.approx(preds.cross_entropy()[0], abs=1e-6)
            assert record[side]["test_std"] == pytest.approx(preds.cross_entropy()[1], abs=1e-6)
        assert record["retired"]["rule"]["epochs"] == 2 and record["replaced_by"]["rule"]["epochs"] == 3


@pytest.mark.parametrize("arch", ["lstm", "mingru"])
def test_a_parked_model_resumes_on_a_fresh_machine_to_the_weights_of_an_uninterrupted_run(
    arch, tmp_path, monkeypatch, small_text_file, capsys
):
    """A session ends its trainer mid-run and the next one starts on an empty machine: `ship park` put the partly
    trained model in models/partial/, `ship train` there resumes from it (not from step 0) and ends with the weights
    of a run never interrupted; `ship pack` then removes the parked copy. The minGRU ships its first snapshot alone,
    so its other snapshots are not parked, and once packed its artifacts folder is the packed copy (whole)."""
    import charlm.train
    from reports import ship_park

    toml = tmp_path / "one.toml"
    toml.write_text(
        f'description = "a tiny LSTM and minGRU"\ncorpora = ["{small_text_file}"]\nanalyses = ["cross_entropy"]\n'
        "[train]\nmax_chars = 40000\neval_chars = 1000\nbatch_size = 4\nunroll = 20\nsnapshots = 4\n"
        '[[grid]]\ntypes = ["lstm", "mingru"]\nlayers = [1]\nbudgets = [8]\n'
    )
    only = ["--only", arch]
    monkeypatch.setattr(shipped, "SHIPPED_ROOT", tmp_path / "models")
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "whole"))
    assert ship.main(["train", "--profile", str(toml), *only]) == 0
    (whole_run,) = (tmp_path / "whole").glob(f"*/{arch}-*")
    metrics = json.loads((whole_run / "metrics.json").read_text())
    steps_per_epoch = metrics["epochs"][0]["step"]
    early = [s["file"] for s in metrics["snapshots"] if s["step"] <= steps_per_epoch]
    assert len(early) >= 2  # snapshots the park can leave out

    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "first"))  # killed after its first epoch's state
    with monkeypatch.context() as m:
        m.setattr(charlm.train, "train", functools.partial(charlm.train.train, stop_after_steps=steps_per_epoch + 7))
        assert ship.main(["train", "--profile", str(toml), *only]) == 0
    assert ship_park.park_all(str(toml), root=tmp_path / "models") == 0
    (parked,) = (tmp_path / "models" / "partial" / "one").glob("*/*")
    manifest = json.loads((parked / "manifest.json").read_text())
    assert manifest["step"] == steps_per_epoch and "training.lock" not in manifest["files"]
    assert shipped.damaged_files(parked) is None
    parked_snapshots = sorted(n for n in manifest["files"] if n.startswith("snapshots/"))
    assert parked_snapshots == (early[:1] if arch == "mingru" else early)
    assert sorted(manifest["omitted"]) == ([] if arch == "lstm" else early[1:])

    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "fresh"))  # the next session's empty machine
    (entry,) = [e for e in ship.queue(load_profile(str(toml))) if e[1].arch == arch]
    where = ship_status.standing("one", entry[0], entry[1], root=tmp_path / "models")
    assert where.state == "parked in models/partial/" and where.epochs == 1
    capsys.readouterr()
    assert len(metrics["epochs"]) >= 3
    with monkeypatch.context() as m:  # killed again after its second epoch: parked a second time, from the resumed run
        second = functools.partial(charlm.train.train, stop_after_steps=2 * steps_per_epoch + 7)
        m.setattr(charlm.train, "train", second)
        assert ship.main(["train", "--profile", str(toml), *only]) == 0
    assert f"parked at step {steps_per_epoch:,}" in capsys.readouterr().out
    assert ship_park.park_all(str(toml), root=tmp_path / "models") == 0  # its early snapshots were never restored
    again = json.loads((parked / "manifest.json").read_text())
    assert again["step"] == 2 * steps_per_epoch and shipped.damaged_files(parked) is None
    assert sorted(again["omitted"]) == ([] if arch == "lstm" else early[1:])
    assert ship.main(["train", "--profile", str(toml), *only]) == 0  # on to the end, here
    (resumed,) = (tmp_path / "fresh").glob(f"*/{arch}-*")
    a, b = (load_payload(d / "checkpoint.pt")["state_dict"] for d in (whole_run, resumed))
    assert all(torch.equal(a[k], b[k]) for k in a)
    record = json.loads((resumed / "provenance.json").read_text())
    assert len(record["sessions"]) == 3  # every session on record
    ship_pack.pack_all(str(toml), root=tmp_path / "models")
    packed = tmp_path / "models" / "one" / parked.parent.name / parked.name
    assert not parked.exists() and shipped.damaged_files(packed) is None
    settled = json.loads((resumed / "metrics.json").read_text())
    assert all((resumed / s["file"]).is_file() for s in settled["snapshots"])  # as a fresh clone installs it
    assert shipped.installed(resumed) == (arch == "mingru")


def test_train_only_takes_ids_then_architectures_then_groups_in_the_order_given(capsys):
    """`ship train --only minlstm <id> dropout --dry-run`: the minLSTMs, then the named dropout model, then the rest of
    Fig 1's dropout grid in training order, and nothing else (what a session gives its second worker)."""
    planned = ship.queue(load_profile("reference"))
    grid = [(c, cf) for c, cf, group in planned if group == "Fig 1's dropout grid"]
    first = next(cf.model_id(c.key) for c, cf in grid if c.name == "linux" and cf.dropout > 0)
    assert ship.main(["train", "--profile", "reference", "--dry-run", "--only", "minlstm", first, "dropout"]) == 0
    ids = re.findall(r"^\[ship\] \d+/\d+ (\S+) on", capsys.readouterr().out, flags=re.M)
    minlstms = [cf.model_id(c.key) for c, cf, _ in planned if getattr(cf, "arch", None) == "minlstm"]
    rest = [cf.model_id(c.key) for c, cf in grid if cf.model_id(c.key) != first]
    assert ids == minlstms + [first] + rest and len(minlstms) == 6 and first not in minlstms
