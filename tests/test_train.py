"""Training: curves, checkpoints, snapshots, determinism, caching, bit-identical resume, divergence, CLI errors."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO, assert_one_line_error, cli_env, make_text

import charlm.loop as loop
import charlm.train as train_module
import corpora
from charlm import count_params, load_checkpoint
from charlm.checkpoint import load_payload
from charlm.loop import TrainingDiverged, learning_rate
from charlm.train import TrainConfig, train
from corpora import Corpus
from corpora.errors import run_cli


def _steps_per_epoch(corpus: Corpus, config: TrainConfig) -> int:
    n_train = corpus.split("train").size
    return ((n_train - 1) // config.batch_size) // config.unroll


def _val_loss(model, ids: np.ndarray, batch: int, unroll: int) -> float:
    """Independent re-computation: `batch` contiguous streams, windows of `unroll`, state carried, mean NLL."""
    batch = max(1, min(batch, (ids.size - 1) // unroll))
    steps = ((ids.size - 1) // batch) // unroll * unroll
    ids = torch.as_tensor(ids.astype(np.int64))
    starts = [b * ((ids.numel() - 1) // batch) for b in range(batch)]
    xs = torch.stack([ids[s : s + steps] for s in starts])
    ys = torch.stack([ids[s + 1 : s + steps + 1] for s in starts])
    state, nll = None, 0.0
    with torch.no_grad():
        for t in range(0, steps, unroll):
            logits, state = model.forward_with_state(xs[:, t : t + unroll], state)
            logp = torch.log_softmax(logits.double(), -1)
            nll -= logp.gather(-1, ys[:, t : t + unroll, None]).sum().item()
    return nll / ys.numel()


# ------------------------------------------------------------------------------------------


def test_metrics_curve_and_loss_decreases(tiny_run):
    m = tiny_run.metrics
    config, corpus = tiny_run.config, tiny_run.corpus
    spe = _steps_per_epoch(corpus, config)
    assert m["complete"] is True and m["stopped"] == "epochs"
    epochs = m["epochs"]
    assert [e["epoch"] for e in epochs] == [1.0, 2.0, 3.0]
    assert [e["step"] for e in epochs] == [spe, 2 * spe, 3 * spe]
    assert m["chars_trained"] == 3 * spe * config.batch_size * config.unroll
    for e in epochs:
        assert math.isfinite(e["train_loss"]) and math.isfinite(e["val_loss"])
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"]
    assert epochs[-1]["val_loss"] < epochs[0]["val_loss"]
    assert epochs[-1]["val_loss"] < math.log(corpus.vocab_size) - 0.3  # well below a uniform guess
    assert m["best_val_loss"] == min(e["val_loss"] for e in epochs)
    assert m["params"] == count_params(config.model_config(corpus.vocab_size))
    assert m["corpus_sha256"] == hashlib.sha256(tiny_run.corpus_path.read_bytes()).hexdigest()


def test_checkpoint_reproduces_the_validation_loss(tiny_run):
    model = load_checkpoint(tiny_run.out / "checkpoint.pt")
    corpus, config = tiny_run.corpus, tiny_run.config
    assert model.config == config.model_config(corpus.vocab_size)
    assert model.meta["vocab"] == sorted(set(tiny_run.corpus_path.read_bytes()))
    assert model.meta["corpus_sha256"] == corpus.sha256
    val = _val_loss(model, corpus.split("val"), config.batch_size, config.unroll)
    assert val == pytest.approx(tiny_run.metrics["best_val_loss"], abs=1e-5)
    assert val == pytest.approx(model.meta["val_loss"], abs=1e-5)
    # Plain containers and tensors only: loads without unpickling code.
    payload = torch.load(tiny_run.out / "checkpoint.pt", weights_only=True)
    assert set(payload["state_dict"]) == set(model.state_dict())


def test_snapshots_at_increasing_steps(tiny_run):
    files = sorted((tiny_run.out / "snapshots").glob("step*.pt"))
    steps = [int(re.fullmatch(r"step(\d+)\.pt", f.name).group(1)) for f in files]
    total = tiny_run.metrics["epochs"][-1]["step"]
    assert len(steps) >= 3 and steps[0] == 1 and steps[-1] <= total
    assert steps == sorted(set(steps))
    previous = None
    for f, step in zip(files, steps):
        snap = load_checkpoint(f)
        assert snap.meta["step"] == step
        assert snap.meta["chars_trained"] == step * tiny_run.config.batch_size * tiny_run.config.unroll
        weights = torch.cat([p.flatten() for p in snap.parameters()])
        if previous is not None:
            assert not torch.equal(weights, previous)  # the model moved between snapshots
        previous = weights


def _tiny_config(path: Path, **kw) -> TrainConfig:
    args = (
        dict(corpus=str(path), arch="lstm", layers=1, size=16, batch_size=4, unroll=10, epochs=1, snapshots=2, lr=1e-2)
        | kw
    )
    return TrainConfig(**args)


def _weights(out: Path) -> dict:
    return load_payload(out / "checkpoint.pt")["state_dict"]


@pytest.mark.parametrize("arch", ["gru", "lstm-srnn-hidden"])
def test_same_seed_same_weights(tmp_path, text_bytes, arch):
    corpus = Corpus.from_bytes("t", text_bytes)
    cfg = _tiny_config(tmp_path / "t.txt", arch=arch, max_chars=1200)
    a = _weights(train(cfg, tmp_path / "a", corpus=corpus, progress=False))
    b = _weights(train(cfg, tmp_path / "b", corpus=corpus, progress=False))
    c = _weights(train(dataclasses.replace(cfg, seed=1), tmp_path / "c", corpus=corpus, progress=False))
    assert a.keys() == b.keys() == c.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_a_complete_run_is_cached(tiny_run, monkeypatch):
    before = {p: p.stat().st_mtime_ns for p in tiny_run.out.rglob("*")}

    def fail(*a, **k):
        raise AssertionError("a complete run must not train again")

    monkeypatch.setattr(train_module, "stream_windows", fail)
    monkeypatch.setattr(train_module, "CharLM", fail)
    start = time.perf_counter()
    assert Path(train(tiny_run.config, tiny_run.out, corpus=tiny_run.corpus, progress=False)) == tiny_run.out
    assert time.perf_counter() - start < 1.0
    assert {p: p.stat().st_mtime_ns for p in tiny_run.out.rglob("*")} == before


def test_default_artifact_folder_and_model_id(tmp_path, monkeypatch, text_bytes):
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    corpus = Corpus.from_bytes("tinycorpus", text_bytes)
    cfg = _tiny_config(tmp_path / "t.txt", max_chars=400)
    out = Path(train(cfg, corpus=corpus, progress=False))
    assert out.parent == tmp_path / "artifacts" / f"tinycorpus-{corpus.sha256[:8]}"  # a file's stem + its bytes
    assert re.fullmatch(r"lstm-L1-H16-s0-[0-9a-f]{6}", out.name)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model_id"] == out.name and metrics["corpus_key"] == corpus.key
    # The id keys the full config and the corpus bytes and split mode; not the path the corpus was read from.
    key = corpus.key
    assert cfg.model_id(key) != dataclasses.replace(cfg, lr=2e-2).model_id(key)
    assert cfg.model_id(key) != cfg.model_id(hashlib.sha256(b"other").hexdigest())
    assert cfg.model_id(key) != cfg.model_id(corpus.with_split_mode("charrnn").key)
    assert cfg.model_id(key) == dataclasses.replace(cfg, corpus="/elsewhere/t.txt").model_id(key)
    # Seed siblings share a group; any other difference (budget, dropout, corpus) makes another group.
    assert cfg.group_id(key) == dataclasses.replace(cfg, seed=7).group_id(key)
    assert cfg.model_id(key) != dataclasses.replace(cfg, seed=7).model_id(key)
    for other in (dataclasses.replace(cfg, max_chars=800), dataclasses.replace(cfg, dropout=0.25)):
        assert other.group_id(key) != cfg.group_id(key)
    # Another file with the same name in another folder never shares the artifacts folder.
    twin = Corpus.from_bytes("tinycorpus", text_bytes[::-1])
    assert twin.artifact_name != corpus.artifact_name


def test_learning_rate_schedule():
    cfg = TrainConfig(corpus="x", arch="lstm", lr=2e-3, lr_decay=0.95, decay_after=10)
    assert [learning_rate(cfg, e) for e in range(10)] == [2e-3] * 10  # epochs 1..10 at the base rate
    for e in range(10, 20):
        assert learning_rate(cfg, e) == pytest.approx(2e-3 * 0.95 ** (e - 9))


# ------------------------------------------------------------------------------------------
# Resume after SIGKILL: bit-identical to an uninterrupted run


def _train_cmd(corpus_path: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "charlm.train",
        "--corpus",
        str(corpus_path),
        "--arch",
        "lstm",
        "--layers",
        "1",
        "--size",
        "16",
        "--batch-size",
        "4",
        "--unroll",
        "10",
        "--epochs",
        "3",
        "--lr",
        "0.01",
        "--checkpoint-every",
        "0",
        "--threads",
        "1",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        str(out),
    ]


def _complete(out: Path) -> bool:
    try:
        return bool(json.loads((out / "metrics.json").read_text()).get("complete"))
    except (FileNotFoundError, json.JSONDecodeError):
        return False


def test_killed_run_resumes_bit_identical(tmp_path):
    corpus_path = tmp_path / "corpus.txt"
    corpus_path.write_bytes(make_text(2400, seed=3))
    corpus = corpora.load(str(corpus_path))
    env = cli_env()
    run_dir = tmp_path / "killed"
    spe = _steps_per_epoch(corpus, _tiny_config(corpus_path))
    # Kill it mid-epoch 2: after the first epoch's checkpoint, with carried hidden state, optimizer state and a
    # curve to restore. A snapshot written mid-epoch marks the moment (state.pt is saved after every step).
    mid = [
        s
        for s in loop.snapshot_steps(TrainConfig(corpus="x", arch="lstm"), spe, 3 * spe)
        if spe + 3 <= s <= 2 * spe - 3
    ]
    assert mid, "no snapshot falls mid-epoch 2"
    marker = run_dir / "snapshots" / f"step{mid[0]:07d}.pt"
    victim = subprocess.Popen(
        _train_cmd(corpus_path, run_dir), cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 90
        while not marker.exists():
            assert victim.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no mid-epoch snapshot after 90 s"
            time.sleep(0.002)
        victim.send_signal(signal.SIGKILL)
        assert victim.wait(timeout=30) == -signal.SIGKILL
    finally:
        if victim.poll() is None:
            victim.kill()
    assert not _complete(run_dir), "killed after it had finished: not a mid-run kill"
    saved = load_payload(run_dir / "state.pt")
    assert spe < saved["progress"]["step"] < 2 * spe and saved["task"]["carried"] is not None  # mid-epoch, carried
    assert (run_dir / "checkpoint.pt").exists()

    # Rerun the same command; meanwhile train the same config uninterrupted, in-process, in another folder.
    resumed = subprocess.Popen(
        _train_cmd(corpus_path, run_dir), cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    ref_dir = tmp_path / "uninterrupted"
    config = TrainConfig(
        corpus=str(corpus_path), arch="lstm", layers=1, size=16, batch_size=4, unroll=10, epochs=3, lr=0.01
    )
    train(config, ref_dir, corpus=corpus, progress=False, checkpoint_every_s=0)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err

    a, b = json.loads((ref_dir / "metrics.json").read_text()), json.loads((run_dir / "metrics.json").read_text())
    assert a["model_id"] == b["model_id"]  # the very same config
    assert a["complete"] and b["complete"]
    assert a["epochs"] == b["epochs"] and len(a["epochs"]) == 3  # the whole curve, bit for bit
    assert a["best_val_loss"] == b["best_val_loss"]
    wa, wb = _weights(ref_dir), _weights(run_dir)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    snaps_a = sorted(p.name for p in (ref_dir / "snapshots").glob("*.pt"))
    assert snaps_a and snaps_a == sorted(p.name for p in (run_dir / "snapshots").glob("*.pt"))
    for name in snaps_a:
        sa, sb = (
            load_payload(ref_dir / "snapshots" / name)["state_dict"],
            load_payload(run_dir / "snapshots" / name)["state_dict"],
        )
        assert all(torch.equal(sa[k], sb[k]) for k in sa), name


class _Interrupted(Exception):
    pass


@pytest.mark.parametrize(
    "arch, layers, dropout", [("lstm", 2, 0.25), ("gru", 1, 0.0), ("lstm-srnn-hidden", 1, 0.0), ("lstm", 1, 0.5)]
)
def test_interrupted_run_resumes_bit_identical(tmp_path, text_bytes, monkeypatch, arch, layers, dropout):
    """Interrupted mid-epoch (dropout draws from the RNG, the GRU and the scan carry their own state) and resumed:
    the curve, the weights and the snapshots equal an uninterrupted run's, bit for bit."""
    corpus = Corpus.from_bytes("t", text_bytes)
    config = _tiny_config(tmp_path / "t.txt", arch=arch, layers=layers, dropout=dropout, epochs=2, snapshots=6)
    reference = train(config, tmp_path / "reference", corpus=corpus, progress=False, checkpoint_every_s=0)
    spe = _steps_per_epoch(corpus, config)
    stop_at = spe + spe // 2  # mid-epoch 2: a checkpoint, a carried state and a curve to restore
    original = train_module.LanguageModelTask.after_step
    calls = {"n": 0}

    def interrupt(self):
        calls["n"] += 1
        if calls["n"] == stop_at:
            raise _Interrupted
        original(self)

    monkeypatch.setattr(train_module.LanguageModelTask, "after_step", interrupt)
    with pytest.raises(_Interrupted):
        train(config, tmp_path / "resumed", corpus=corpus, progress=False, checkpoint_every_s=0)
    monkeypatch.setattr(train_module.LanguageModelTask, "after_step", original)
    assert load_payload(tmp_path / "resumed" / "state.pt")["progress"]["step"] == stop_at - 1
    resumed = train(config, tmp_path / "resumed", corpus=corpus, progress=False, checkpoint_every_s=0)
    a, b = json.loads((reference / "metrics.json").read_text()), json.loads((resumed / "metrics.json").read_text())
    assert a["epochs"] == b["epochs"] and a["best_val_loss"] == b["best_val_loss"]
    wa, wb = _weights(reference), _weights(resumed)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert [s["file"] for s in a["snapshots"]] == [s["file"] for s in b["snapshots"]] and a["snapshots"]
    for snap in a["snapshots"]:
        sa, sb = (load_payload(folder / snap["file"])["state_dict"] for folder in (reference, resumed))
        assert all(torch.equal(sa[k], sb[k]) for k in sa), snap["file"]


def test_early_stopping_keeps_the_best_checkpoint_not_the_last(tmp_path, text_bytes, monkeypatch):
    """Validation losses scripted to get worse after epoch 2: training stops after `patience` bad epochs and
    checkpoint.pt holds the weights of epoch 2, the best one."""
    corpus = Corpus.from_bytes("t", text_bytes)
    config = _tiny_config(tmp_path / "t.txt", epochs=10, patience=2)
    scripted = iter([3.0, 2.0, 2.5, 2.6, 2.7, 2.8])
    weights_at = {}
    real_validate = train_module.LanguageModelTask.validate

    def validate(self):
        real_validate(self)
        weights_at[len(weights_at) + 1] = {k: v.clone() for k, v in self.model.state_dict().items()}
        return next(scripted)

    monkeypatch.setattr(train_module.LanguageModelTask, "validate", validate)
    out = train(config, tmp_path / "run", corpus=corpus, progress=False)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["stopped"] == "early_stopping" and len(metrics["epochs"]) == 4  # epoch 2 best, then 2 bad ones
    assert metrics["best_val_loss"] == 2.0 and metrics["best_step"] == 2 * _steps_per_epoch(corpus, config)
    saved = _weights(out)
    assert all(torch.equal(saved[k], weights_at[2][k]) for k in saved)
    assert not all(torch.equal(saved[k], weights_at[4][k]) for k in saved)  # not the last


def test_convergence_stops_once_validation_gains_less_than_delta_per_epoch(tmp_path, text_bytes, monkeypatch):
    """Scripted validation gains of 0.5, 0.1, 0.01, 0.005 per epoch: with delta 0.02 over a window of 2 epochs the
    run stops after epoch 5 (gains 0.01 + 0.005 over 2 epochs: 0.0075 per epoch), not at epoch 4 (0.055)."""
    corpus = Corpus.from_bytes("t", text_bytes)
    config = _tiny_config(tmp_path / "t.txt", epochs=10, patience=5, converge_delta=0.02, converge_window=2)
    scripted = iter([3.0, 2.5, 2.4, 2.39, 2.385, 2.38, 2.3])
    monkeypatch.setattr(train_module.LanguageModelTask, "validate", lambda self: next(scripted))
    out = train(config, tmp_path / "run", corpus=corpus, progress=False)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["stopped"] == "converged" and len(metrics["epochs"]) == 5
    assert metrics["best_val_loss"] == 2.385


def test_converged_rule():
    assert not loop.converged([3.0, 2.0, 1.9], 0.01, 3)  # too few epochs to judge
    assert loop.converged([3.0, 2.0, 1.999, 1.998, 1.997], 0.01, 3)  # 0.001 per epoch
    assert not loop.converged([3.0, 2.0, 1.9, 1.8, 1.7], 0.01, 3)  # 0.1 per epoch
    assert loop.converged([3.0, 2.0, 2.1, 2.2, 2.3], 0.01, 3)  # worse: no gain at all
    assert not loop.converged([3.0, 2.0, 1.0], 0.0, 1)  # delta 0: off


def test_gradient_clipping_bounds_every_update(tmp_path, text_bytes, monkeypatch):
    """With clip c, the global norm of the gradient the optimiser sees never exceeds c (and is reached)."""
    corpus = Corpus.from_bytes("t", text_bytes)
    norms = []
    real_step = torch.optim.RMSprop.step

    def step(self, *args, **kwargs):
        grads = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
        norms.append(float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))))
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.RMSprop, "step", step)
    train(_tiny_config(tmp_path / "t.txt", grad_clip=0.05, epochs=1), tmp_path / "clipped", corpus=corpus,
          progress=False)  # fmt: skip
    assert norms and max(norms) <= 0.05 * (1 + 1e-5) and max(norms) > 0.049  # clipped, and the clip was active
    norms.clear()
    train(_tiny_config(tmp_path / "t.txt", grad_clip=1e6, epochs=1), tmp_path / "free", corpus=corpus, progress=False)
    assert max(norms) > 0.05  # the same run unclipped has larger gradients: the bound above came from clipping


# ------------------------------------------------------------------------------------------
# Divergence


def _all_finite(state_dict: dict) -> bool:
    return all(torch.isfinite(v).all().item() for v in state_dict.values() if v.is_floating_point())


@pytest.mark.parametrize("lr", [1e4, 3e38])
def test_divergence_stops_with_a_clear_message_and_keeps_a_finite_state(tmp_path, text_bytes, lr):
    corpus = Corpus.from_bytes("t", text_bytes)
    out = tmp_path / "run"
    with pytest.raises(TrainingDiverged, match=r"diverged at step \d+") as err:
        train(_tiny_config(tmp_path / "t.txt", lr=lr), out, corpus=corpus, progress=False, checkpoint_every_s=0)
    assert "lower" in str(err.value) and "\n" not in str(err.value)
    if lr == 1e4:  # the first update is finite (the second step's loss explodes): its state is saved
        assert (out / "state.pt").exists()
    if (out / "state.pt").exists():
        assert _all_finite(load_payload(out / "state.pt")["state_dict"])
    if (out / "checkpoint.pt").exists():
        assert _all_finite(load_payload(out / "checkpoint.pt")["state_dict"])
    assert not _complete(out)


def test_divergence_cli_exits_3(tmp_path, text_bytes, capsys):
    path = tmp_path / "t.txt"
    path.write_bytes(text_bytes)
    argv = [
        "--corpus",
        str(path),
        "--arch",
        "gru",
        "--layers",
        "1",
        "--size",
        "8",
        "--batch-size",
        "4",
        "--unroll",
        "10",
        "--epochs",
        "1",
        "--lr",
        "1e4",
        "--quiet",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / "run"),
    ]
    code = run_cli(train_module.main, argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1 and "diverged" in err[0], err


# ------------------------------------------------------------------------------------------
# Bad input on the command line


BAD_INPUT = ["unknown-arch", "size-0", "layers-negative", "corpus-is-a-directory", "corpus-too-short"]


def _bad_args(case: str, tmp_path: Path) -> list[str]:
    path = tmp_path / f"{case}.txt"
    # 1,200 train chars cannot fill the default batch 100 x unroll 100 ("corpus-too-short").
    path.write_bytes(make_text(1500 if case == "corpus-too-short" else 4000))
    small = ["--batch-size", "4", "--unroll", "10"]
    args = {
        "unknown-arch": ["--corpus", path, "--arch", "transformer", *small],
        "size-0": ["--corpus", path, "--arch", "lstm", "--size", "0", *small],
        "layers-negative": ["--corpus", path, "--arch", "lstm", "--layers", "-1", *small],
        "corpus-is-a-directory": ["--corpus", tmp_path, "--arch", "lstm", *small],
        "corpus-too-short": ["--corpus", path, "--arch", "lstm"],
    }[case]
    return [str(a) for a in args] + [
        "--epochs",
        "1",
        "--quiet",
        "--device",
        "cpu",
        "--out",
        str(tmp_path / f"out-{case}"),
    ]


@pytest.mark.parametrize("case", BAD_INPUT)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, case, capsys):
    """The CLI's main through run_cli, in-process (a subprocess pays ~4 s of torch imports per case)."""
    code = run_cli(train_module.main, _bad_args(case, tmp_path))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), (code, err)
    assert not (tmp_path / f"out-{case}").exists()  # nothing half-written


def test_cli_bad_input_as_a_real_subprocess(tmp_path):
    """The same contract through `python -m charlm.train`, two cases run side by side."""
    cases = ["unknown-arch", "corpus-too-short"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "charlm.train", *_bad_args(c, tmp_path)],
            cwd=REPO,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for c in cases
    ]
    for case, proc in zip(cases, procs):
        out, err = proc.communicate(timeout=120)
        assert_one_line_error(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), code=2)
        assert not (tmp_path / f"out-{case}").exists()


def test_weights_finite_is_the_check_weight_by_weight(tmp_path):
    """loop.weights_finite: its fast path (a finite total norm) and its fallback agree with an element-wise check,
    huge finite weights that overflow the norm included."""
    from charlm.loop import weights_finite

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    assert weights_finite(model)
    weight = model[1].weight
    for value, finite in ((float("nan"), False), (float("inf"), False), (-float("inf"), False), (3e38, True)):
        with torch.no_grad():
            weight[0, 0] = value
        assert weights_finite(model) is finite, value
        assert weights_finite(model) == all(torch.isfinite(p).all() for p in model.parameters())
