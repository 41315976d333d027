"""Predictions: normalised log-probs, chunks with carried state, the .npz contract, bootstrap, CLI, bad checkpoints."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from conftest import REPO, assert_one_line_error, cli_env, full_forward_logp

from charlm import ARCHS, ModelConfig, build_model, load_checkpoint, predictions
from charlm import predict as predict_module
from charlm.checkpoint import load_payload
from charlm.predict import predict_logprobs
from corpora.errors import UserError, run_cli


def test_one_stream_logprobs_are_normalised_and_equal_a_full_forward(tiny_run, monkeypatch):
    model = load_checkpoint(tiny_run.out / "checkpoint.pt")
    ids = tiny_run.corpus.split("test")
    logp = predict_logprobs(model, ids, streams=1)
    assert logp.shape == (ids.size - 1, tiny_run.corpus.vocab_size) and logp.dtype == np.float32
    np.testing.assert_allclose(np.logaddexp.reduce(logp.astype(np.float64), axis=1), 0.0, atol=1e-5)
    np.testing.assert_allclose(logp, full_forward_logp(model, ids), atol=2e-5, rtol=0)
    monkeypatch.setattr(predict_module, "CHUNK", 7)  # the state is carried across forward calls
    np.testing.assert_allclose(predict_logprobs(model, ids, streams=1), logp, atol=2e-5, rtol=0)
    # Row t scores character t + 1: the trained model beats a uniform guess on the true next characters.
    nll = -logp[np.arange(ids.size - 1), ids[1:]].mean()
    assert nll < np.log(tiny_run.corpus.vocab_size) - 0.3


def _random_model(arch: str, vocab: int = 13, layers: int = 2, scale: float = 0.5):
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch, vocab, layers, 16))
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-scale, scale)  # larger than the init: state matters more
    return model.eval()


@pytest.mark.parametrize("arch", ARCHS)
def test_chunks_carry_state_for_every_arch(arch, monkeypatch):
    model = _random_model(arch)
    ids = np.random.default_rng(0).integers(0, 13, 150).astype(np.uint8)
    whole = predict_logprobs(model, ids, streams=1)
    np.testing.assert_allclose(whole, full_forward_logp(model, ids), atol=2e-5, rtol=0)
    monkeypatch.setattr(predict_module, "CHUNK", 7)
    np.testing.assert_allclose(predict_logprobs(model, ids, streams=1), whole, atol=2e-5, rtol=0)
    # Carrying state matters: restarting from zero at every chunk would give different numbers.
    restarted = np.concatenate([predict_logprobs(model, ids[s : s + 8], streams=1) for s in range(0, ids.size - 1, 7)])
    assert not np.allclose(restarted, whole, atol=1e-3)


def test_stream_layout_scores_every_position_once_after_its_warmup():
    for n, streams, warmup in [(1, None, 5), (10, 3, 4), (1000, 7, 50), (999, 128, 1000)]:
        first, lengths, position = predict_module.stream_layout(n, streams, warmup)
        scored = position[position >= 0]
        np.testing.assert_array_equal(np.sort(scored), np.arange(n))  # each position exactly once
        for s in range(len(first)):
            rows = np.flatnonzero(position[s] >= 0)
            assert np.array_equal(position[s, rows], first[s] + rows)  # row r of stream s reads split[first + r]
            assert rows[0] == min(warmup, first[s] + rows[0])  # the warm-up before the stretch, as long as it can be
        assert first[0] == 0 and position[0, 0] == 0  # the first stream starts where one stream does


def test_parallel_streams_with_a_full_warmup_equal_one_stream_exactly():
    model = _random_model("lstm")
    ids = np.random.default_rng(1).integers(0, 13, 600).astype(np.uint8)
    one = predict_logprobs(model, ids, streams=1)
    np.testing.assert_allclose(predict_logprobs(model, ids, streams=6, warmup=600), one, atol=2e-5, rtol=0)


@pytest.mark.parametrize("arch", ["lstm", "gru", "lstm-srnn-hidden"])
def test_parallel_streams_stay_within_a_thousandth_of_a_nat_of_one_stream(arch):
    """The parallel reading forgets what lies more than `warmup` characters before a stream: the score moves
    by less than 1e-3 nats even with weights that keep state long (a trained model's forgets faster)."""
    model = _random_model(arch, vocab=20, layers=2, scale=0.3)
    ids = np.random.default_rng(2).integers(0, 20, 30_000).astype(np.uint8)
    targets = ids[1:].astype(np.int64)
    one = -predict_logprobs(model, ids, streams=1)[np.arange(targets.size), targets].astype(np.float64).mean()
    many = -predict_logprobs(model, ids, streams=16, warmup=300)[np.arange(targets.size), targets].mean()
    assert abs(many - one) < 1e-3, (many, one)


def test_predictions_store_exact_columns_and_float16_distributions(tmp_path):
    rng = np.random.default_rng(1)
    raw = rng.normal(size=(50, 9)) * 3
    logp = (raw - np.logaddexp.reduce(raw, axis=1, keepdims=True)).astype(np.float32)
    targets = rng.integers(0, 9, 50)
    preds = predictions.from_logprobs(logp, targets, "lstm-L1-H8-s0-abc123", "digest")
    path = predictions.save(tmp_path / "p" / "test.npz", preds)
    assert sorted(x.name for x in path.parent.iterdir()) == ["test.npz"]  # no temporary left
    loaded = predictions.load(path)
    assert np.array_equal(loaded.target_logp, logp[np.arange(50), targets])  # exact
    assert np.array_equal(loaded.argmax, logp.argmax(1)) and np.array_equal(loaded.targets, targets)
    assert loaded.logp.dtype == np.float16 and loaded.complete
    rel = np.abs(loaded.logp.astype(np.float64) - logp) / np.maximum(np.abs(logp), 1e-30)
    assert rel.max() <= predictions.FLOAT16_UNIT * (1 + 1e-6)  # the stated bound on each stored log-probability
    assert (loaded.model_id, loaded.source_digest) == ("lstm-L1-H8-s0-abc123", "digest")
    np.testing.assert_allclose(loaded.p_correct, np.exp(logp[np.arange(50), targets]), rtol=1e-6)
    assert loaded.cross_entropy()[0] == pytest.approx(-logp[np.arange(50), targets].astype(np.float64).mean())
    # a sample of positions keeps distributions for those rows only; the exact columns cover every position
    sample = predictions.from_logprobs(logp, targets, positions=np.array([3, 10, 40]))
    np.testing.assert_allclose(sample.distributions(np.array([10, 40])), logp[[10, 40]], rtol=1e-3)
    with pytest.raises(UserError, match="sample"):
        sample.distributions(np.array([11]))
    assert sample.target_logp.size == 50
    with pytest.raises(ValueError):
        predictions.from_logprobs(logp, targets[:-1])
    with pytest.raises(UserError):
        predictions.load(tmp_path / "missing.npz")


def test_kl_from_float16_rows_stays_within_the_stated_bound(tiny_run):
    """The bound of charlm.predictions on KL computed from stored rows holds on a trained model's predictions."""
    model = load_checkpoint(tiny_run.out / "checkpoint.pt")
    ids = tiny_run.corpus.split("test")
    p = predict_logprobs(model, ids, streams=1)
    q = np.log(np.full_like(p, 1.0 / p.shape[1])) * 0.5 + p * 0.5  # another distribution, renormalised
    q = (q - np.logaddexp.reduce(q.astype(np.float64), axis=1, keepdims=True)).astype(np.float32)
    exact = predictions.kl_divergence(p, q)
    stored = predictions.kl_divergence(p.astype(np.float16), q.astype(np.float16))
    bound = predictions.kl_error_bound(p, q)
    assert (np.abs(stored - exact) <= bound + 1e-12).all()
    assert np.abs(stored - exact).mean() < 1e-3  # and small in practice
    sym = predictions.symmetric_kl(p, q)
    np.testing.assert_allclose(sym, exact + predictions.kl_divergence(q, p), rtol=1e-9, atol=1e-12)


def test_damaged_predictions_are_named_or_recomputed(tiny_run, tmp_path, capsys):
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(tiny_run.out / "checkpoint.pt", folder / "checkpoint.pt")
    path = predict_module.predict_checkpoint(folder / "checkpoint.pt", "test", progress=False)
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])  # an interrupted copy
    with pytest.raises(predictions.CorruptArtifact, match=str(path)):
        predictions.load(path)
    with pytest.raises(UserError, match="damaged"):
        predict_module.predict_checkpoint(folder / "checkpoint.pt", "test", progress=False, repair=False)
    assert run_cli(predict_module.main, [str(folder / "checkpoint.pt"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0]
    predict_module.predict_checkpoint(folder / "checkpoint.pt", "test", progress=False, repair=True)
    assert "recomputing" in capsys.readouterr().out
    assert predictions.load(path).target_logp.size == tiny_run.corpus.split("test").size - 1


def test_each_snapshot_has_its_own_predictions_equal_to_a_fresh_computation(tiny_run, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(tiny_run.out, folder)
    snaps = sorted((folder / "snapshots").glob("*.pt"))
    assert len(snaps) >= 2
    ids = tiny_run.corpus.split("test")
    results = []
    for snap in snaps[:2]:
        path = predict_module.predict_checkpoint(snap, "test", sample=True, progress=False, corpus=tiny_run.corpus)
        assert path == folder / "predictions" / snap.stem / "test.npz"
        preds = predictions.load(path)
        fresh = predict_logprobs(load_checkpoint(snap), ids)
        np.testing.assert_array_equal(preds.target_logp, fresh[np.arange(ids.size - 1), ids[1:]])
        assert not preds.complete and preds.positions.size == min(predictions.SAMPLE_POSITIONS, ids.size - 1)
        results.append(preds.target_logp)
    assert not np.allclose(results[0], results[1])
    # A checkpoint rewritten in place (a resumed run saving a better one) gets new predictions: keyed by its digest.
    shutil.copy(snaps[1], snaps[0])
    path = predict_module.predict_checkpoint(snaps[0], "test", sample=True, progress=False, corpus=tiny_run.corpus)
    np.testing.assert_array_equal(predictions.load(path).target_logp, results[1])


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
    npz = checkpoint_copy.parent / "predictions" / "checkpoint" / "test.npz"
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
    reference = -full_forward_logp(model, test_ids)[np.arange(test_ids.size - 1), test_ids[1:]]
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
        assert isinstance(payload, dict) and isinstance(payload["config"], dict), path
        assert all(isinstance(v, torch.Tensor) for v in payload["state_dict"].values())
    checkpoint = load_payload(tiny_run.out / "checkpoint.pt")
    assert checkpoint["vocab"] == tiny_run.corpus.vocab.tolist() and all(type(b) is int for b in checkpoint["vocab"])


def test_scoring_a_sample_of_rows_gives_exactly_the_full_computations_numbers(tiny_run):
    """Snapshots keep rows at a sample of positions only: the targets and kept rows equal the full reading's."""
    model = load_checkpoint(tiny_run.out / "checkpoint.pt")
    ids = tiny_run.corpus.split("test")
    full_target, full_rows = predict_module.score_split(model, ids)
    sample = np.array([0, 3, 40, ids.size - 2])
    target, rows = predict_module.score_split(model, ids, sample)
    np.testing.assert_array_equal(target, full_target)
    np.testing.assert_array_equal(rows, full_rows[sample])
    np.testing.assert_array_equal(full_target, full_rows[np.arange(ids.size - 1), ids[1:]])


def test_the_sample_is_blocks_of_consecutive_positions_spread_over_the_split():
    positions = predictions.sample_positions(100_000, blocks=4, block=10)
    assert positions.size == 40 and np.all(np.diff(positions) > 0)
    runs = np.split(positions, np.flatnonzero(np.diff(positions) != 1) + 1)
    assert [r.size for r in runs] == [10] * 4 and runs[0][0] == 0 and runs[-1][-1] == 99_999
    np.testing.assert_array_equal(predictions.sample_positions(30, blocks=4, block=10), np.arange(30))


@pytest.mark.parametrize("arch", ["lstm", "gru-paper"])
def test_a_snapshot_scored_on_the_sample_alone_stays_within_a_thousandth_of_a_nat_of_the_full_reading(arch):
    """A snapshot reads only the sample's blocks, each after its warm-up: its targets' log-probabilities and its
    distributions stay as close to the full parallel reading as the parallel reading is to one stream."""
    model = _random_model(arch, vocab=20, layers=2, scale=0.3)
    ids = np.random.default_rng(3).integers(0, 20, 20_000).astype(np.uint8)
    positions = predictions.sample_positions(ids.size - 1, blocks=8, block=300)
    full_target, full_rows = predict_module.score_split(model, ids, positions)
    target, rows = predict_module.score_split(model, ids, positions, sample_only=True)
    assert target.shape == (positions.size,) and rows.shape == full_rows.shape
    assert abs(float(target.mean()) - float(full_target[positions].mean())) < 1e-3
    np.testing.assert_allclose(rows, full_rows, atol=2e-2)
    np.testing.assert_array_equal(target, rows[np.arange(positions.size), ids[1:][positions]])


def test_sample_only_predictions_round_trip_and_answer_for_their_sample(tiny_run, tmp_path):
    checkpoint = tiny_run.out / "checkpoint.pt"
    out = predict_module.predict_checkpoint(checkpoint, "test", tmp_path / "s.npz", progress=False, sample_only=True)
    preds = predictions.load(out)
    ids = tiny_run.corpus.split("test")
    sample = predictions.sample_positions(ids.size - 1)
    assert preds.sample_only and preds.n_positions == sample.size
    np.testing.assert_array_equal(preds.targets, ids[1:][sample])
    full = predictions.load(predict_module.predict_checkpoint(checkpoint, "test", tmp_path / "f.npz", progress=False))
    np.testing.assert_allclose(preds.nll_at(sample), full.nll_at(sample), atol=1e-3)
