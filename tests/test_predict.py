"""Predictions: normalised log-probs, chunks with carried state, the .npz contract, bootstrap, CLI, bad checkpoints."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import REPO, assert_one_line_error, cli_env

from charlm import ARCHS, ModelConfig, build_model, load_checkpoint, predictions
from charlm import predict as predict_module
from charlm.checkpoint import load_payload
from charlm.predict import predict_logprobs
from corpora.errors import UserError, run_cli


def _full_forward_logprobs(model, ids: np.ndarray) -> np.ndarray:
    """Independent: one forward over the whole stream, log-softmax in float64."""
    with torch.no_grad():
        logits = model(torch.as_tensor(ids[:-1].astype(np.int64))[None])[0]
    return torch.log_softmax(logits.double(), -1).numpy()


def test_trained_model_logprobs_are_normalised_and_chunk_invariant(tiny_run):
    model = load_checkpoint(tiny_run.out / "checkpoint.pt")
    ids = tiny_run.corpus.split("test")
    logp = predict_logprobs(model, ids)
    assert logp.shape == (ids.size - 1, tiny_run.corpus.vocab_size) and logp.dtype == np.float32
    np.testing.assert_allclose(np.logaddexp.reduce(logp.astype(np.float64), axis=1), 0.0, atol=1e-5)
    np.testing.assert_allclose(predict_logprobs(model, ids, chunk=7), logp, atol=2e-5, rtol=0)
    np.testing.assert_allclose(logp, _full_forward_logprobs(model, ids), atol=2e-5, rtol=0)
    # Row t scores character t + 1: the trained model beats a uniform guess on the true next characters.
    nll = -logp[np.arange(ids.size - 1), ids[1:]].mean()
    assert nll < np.log(tiny_run.corpus.vocab_size) - 0.3


@pytest.mark.parametrize("arch", ARCHS)
def test_chunking_carries_state_for_every_arch(arch):
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch, 13, 2, 16))
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-0.5, 0.5)  # larger than the init: state matters more
    ids = np.random.default_rng(0).integers(0, 13, 150).astype(np.uint8)
    whole = predict_logprobs(model, ids)
    np.testing.assert_allclose(predict_logprobs(model, ids, chunk=7), whole, atol=2e-5, rtol=0)
    np.testing.assert_allclose(whole, _full_forward_logprobs(model, ids), atol=2e-5, rtol=0)
    np.testing.assert_allclose(np.logaddexp.reduce(whole.astype(np.float64), axis=1), 0.0, atol=1e-5)
    # Carrying state matters: restarting from zero at every chunk would give different numbers.
    restarted = np.concatenate([predict_logprobs(model, ids[s : s + 8]) for s in range(0, ids.size - 1, 7)])
    assert not np.allclose(restarted, whole, atol=1e-3)


def test_predictions_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    raw = rng.normal(size=(50, 9))
    logp = (raw - np.logaddexp.reduce(raw, axis=1, keepdims=True)).astype(np.float32)
    targets = rng.integers(0, 9, 50)
    path = predictions.save(tmp_path / "p" / "test.npz", logp, targets, "lstm-L1-H8-s0-abc123")
    assert path == tmp_path / "p" / "test.npz"
    assert sorted(x.name for x in path.parent.iterdir()) == ["test.npz"]  # no temporary left
    loaded = predictions.load(path)
    assert np.array_equal(loaded.logp, logp) and loaded.logp.dtype == np.float32
    assert np.array_equal(loaded.targets, targets)
    assert loaded.model_id == "lstm-L1-H8-s0-abc123"
    np.testing.assert_allclose(loaded.nll, -logp[np.arange(50), targets].astype(np.float64))
    np.testing.assert_allclose(loaded.p_correct, np.exp(logp[np.arange(50), targets]), rtol=1e-6)
    assert loaded.cross_entropy()[0] == pytest.approx(loaded.nll.mean())
    with pytest.raises(ValueError):
        predictions.save(tmp_path / "bad.npz", logp, targets[:-1])
    with pytest.raises(UserError):
        predictions.load(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip file at all")
    with pytest.raises(UserError):
        predictions.load(tmp_path / "junk.npz")


def test_bootstrap_std_is_the_standard_error():
    n = 2000
    values = np.random.default_rng(2).normal(3.0, 2.0, n)
    mean, std = predictions.bootstrap_mean(values, resamples=200, seed=0)
    assert mean == pytest.approx(values.mean(), rel=1e-12)
    expected = values.std(ddof=1) / np.sqrt(n)
    assert abs(std - expected) / expected < 0.2, (std, expected)
    assert predictions.bootstrap_mean(values, 200, seed=0) == (mean, std)  # seeded: reproducible
    # A constant has no spread.
    assert predictions.bootstrap_mean(np.full(100, 1.5), 50)[1] == pytest.approx(0.0, abs=1e-12)


# ------------------------------------------------------------------------------------------
# The CLI


@pytest.fixture
def checkpoint_copy(tiny_run, tmp_path):
    """A private copy of the trained checkpoint (predictions are written beside it)."""
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(tiny_run.out / "checkpoint.pt", folder / "checkpoint.pt")
    return folder / "checkpoint.pt"


def test_cli_writes_test_predictions_and_prints_nats_and_bits(tiny_run, checkpoint_copy):
    proc = subprocess.run(
        [sys.executable, "-m", "charlm.predict", str(checkpoint_copy), "--quiet"],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    npz = checkpoint_copy.parent / "predictions" / "test.npz"
    assert npz.is_file()
    m = re.search(
        r"test cross-entropy ([\d.]+) \+- ([\d.]+) nats/char = ([\d.]+) \+- ([\d.]+) bits/char \(([\d,]+) positions\)",
        proc.stdout,
    )
    assert m, proc.stdout
    nats, nats_std, bits, bits_std, positions = m.groups()
    test_ids = tiny_run.corpus.split("test")
    assert int(positions.replace(",", "")) == test_ids.size - 1
    model = load_checkpoint(checkpoint_copy)
    reference = -_full_forward_logprobs(model, test_ids)[np.arange(test_ids.size - 1), test_ids[1:]]
    assert float(nats) == pytest.approx(reference.mean(), abs=1e-4)
    assert float(bits) == pytest.approx(reference.mean() / np.log(2), abs=1e-4)
    assert 0 < float(nats_std) < 0.5 and float(bits_std) == pytest.approx(float(nats_std) / np.log(2), abs=2e-4)
    preds = predictions.load(npz)
    assert np.array_equal(preds.targets, test_ids[1:].astype(np.int64))
    assert preds.logp.shape == (test_ids.size - 1, tiny_run.corpus.vocab_size)
    assert preds.model_id == tiny_run.metrics["model_id"]


def _bad_checkpoint(kind: str, tmp_path, tiny_run):
    path = tmp_path / "bad" / "checkpoint.pt"
    path.parent.mkdir(exist_ok=True)
    good = (tiny_run.out / "checkpoint.pt").read_bytes()
    if kind == "missing":
        pass
    elif kind == "random-bytes":
        path.write_bytes(np.random.default_rng(0).bytes(4096))
    elif kind == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif kind == "directory":
        path.mkdir()
    elif kind in ("wrong-shapes", "foreign-config", "not-a-dict"):
        payload = torch.load(tiny_run.out / "checkpoint.pt", weights_only=True)
        if kind == "wrong-shapes":
            payload["config"]["size"] = 7
        elif kind == "foreign-config":  # e.g. an n-NN checkpoint given to the char-LM tools
            payload["config"] = {"n": 3, "hidden": 8, "vocab_size": 5}
        else:
            payload = [1, 2, 3]
        torch.save(payload, path)
    return path


BAD = ["missing", "random-bytes", "truncated", "directory", "wrong-shapes", "foreign-config", "not-a-dict"]


@pytest.mark.parametrize("kind", BAD)
def test_bad_checkpoint_is_one_line_and_exit_2(kind, tmp_path, tiny_run, capsys):
    path = _bad_checkpoint(kind, tmp_path, tiny_run)
    with pytest.raises(UserError):
        load_checkpoint(path)
    code = run_cli(predict_module.main, [str(path), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error: "), (code, err)
    assert not (path.parent / "predictions").exists()


def test_bad_checkpoint_through_the_real_cli(tmp_path, tiny_run):
    path = _bad_checkpoint("truncated", tmp_path, tiny_run)
    proc = subprocess.run(
        [sys.executable, "-m", "charlm.predict", str(path)],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_line_error(proc, code=2, contains="corrupt")
    assert not (path.parent / "predictions").exists()


def test_every_artifact_loads_with_weights_only(tiny_run):
    files = [
        tiny_run.out / "checkpoint.pt",
        tiny_run.out / "state.pt",
        *sorted((tiny_run.out / "snapshots").glob("*.pt")),
    ]
    for path in files:
        payload = torch.load(path, weights_only=True)
        assert isinstance(payload, dict) and isinstance(payload["config"], dict)
        assert all(isinstance(v, torch.Tensor) for v in payload["state_dict"].values())
    checkpoint = load_payload(tiny_run.out / "checkpoint.pt")
    assert checkpoint["vocab"] == tiny_run.corpus.vocab.tolist() and all(type(b) is int for b in checkpoint["vocab"])
