"""Pooling classifiers: directions, poolings, gradients against an independent computation, training, resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from charlm import classifier as clf
from charlm.classifier import (
    BiLSTMClassifier,
    ClassifierConfig,
    Examples,
    load_classifier,
    position_gradient_norms,
    predict,
    train_classifier,
)
from charlm.loop import TrainingDiverged
from corpora.errors import UserError

V = 6


def _model(pool: str, **kw) -> BiLSTMClassifier:
    torch.manual_seed(0)
    return BiLSTMClassifier(ClassifierConfig(pool, V, 3, hidden=5, **kw)).eval()


def test_the_backward_direction_reads_right_to_left():
    """h_fwd_t depends on positions <= t only, h_bwd_t on positions >= t only."""
    model = _model("mean")
    ids = torch.randint(0, V, (2, 9))
    changed = ids.clone()
    changed[:, 4] = (changed[:, 4] + 1) % V
    a, b = model.states(model.onehot(ids)), model.states(model.onehot(changed))
    H = 5
    assert torch.equal(a[:, :4, :H], b[:, :4, :H]) and not torch.allclose(a[:, 4:, :H], b[:, 4:, :H])
    assert torch.equal(a[:, 5:, H:], b[:, 5:, H:]) and not torch.allclose(a[:, :5, H:], b[:, :5, H:])


def test_last_state_pooling_is_torchs_bidirectional_final_state():
    model = _model("last")
    reference = torch.nn.LSTM(V, 5, batch_first=True, bidirectional=True)
    with torch.no_grad():
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(reference, name).copy_(getattr(model.fwd, name))
            getattr(reference, name + "_reverse").copy_(getattr(model.bwd, name))
    x = model.onehot(torch.randint(0, V, (3, 7)))
    _, (h_n, _) = reference(x)
    torch.testing.assert_close(model.pool(model.states(x)), torch.cat([h_n[0], h_n[1]], 1))


def test_poolings_weigh_positions_as_defined():
    states = torch.randn(2, 6, 10)
    assert torch.equal(_model("max").pool(states), states.max(1).values)
    torch.testing.assert_close(_model("mean").pool(states), states.mean(1))
    att = _model("att")
    with torch.no_grad():
        att.att.weight.zero_()  # equal scores: attention is the mean
    torch.testing.assert_close(att.pool(states), states.mean(1))
    # max-attention: a state pointing exactly along the max-pool query, far longer than the rest, takes the weight
    big = torch.zeros(1, 4, 10)
    big[0, 2] = 50.0
    big[0, [0, 1, 3]] = -torch.rand(3, 10)
    torch.testing.assert_close(_model("maxatt").pool(big), big[:, 2], atol=1e-4, rtol=0)


def test_forget_bias_sets_the_forget_gate_of_both_directions():
    model = _model("last", forget_bias=-3.0)
    for lstm in (model.fwd, model.bwd):
        assert torch.all(lstm.bias_ih_l0[5:10] + lstm.bias_hh_l0[5:10] == -3.0)


def test_position_gradients_equal_a_restarted_run():
    """Independent computation for last-state pooling: dL/dh_fwd_t is the gradient w.r.t. the initial state of the
    forward LSTM started at t + 1 (torch's fused kernel over the rest), dL/dh_bwd_t likewise right to left."""
    model = _model("last")
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(6.0)
    B, T = 3, 8
    ids, labels = torch.randint(0, V, (B, T)), torch.randint(0, 3, (B,))
    got = position_gradient_norms(model, ids, labels)
    x = model.onehot(ids)
    for t in (2, 5):
        with torch.no_grad():
            _, (h_f, c_f) = model.fwd(x[:, : t + 1])
            _, (h_b, c_b) = model.bwd(x[:, t:].flip(1))
            h_bwd_first = model.bwd(x.flip(1))[1][0][0]
            h_fwd_last = model.fwd(x)[1][0][0]
        hf, cf, hb, cb = (v.clone().requires_grad_() for v in (h_f, c_f, h_b, c_b))
        _, (fwd_last, _) = model.fwd(x[:, t + 1 :], (hf, cf))
        _, (bwd_first, _) = model.bwd(x[:, :t].flip(1), (hb, cb))
        loss_f = torch.nn.functional.cross_entropy(
            model.out(torch.cat([fwd_last[0], h_bwd_first], 1)), labels, reduction="sum"
        )
        loss_b = torch.nn.functional.cross_entropy(
            model.out(torch.cat([h_fwd_last, bwd_first[0]], 1)), labels, reduction="sum"
        )
        (g_f,) = torch.autograd.grad(loss_f, [hf])
        (g_b,) = torch.autograd.grad(loss_b, [hb])
        expected = torch.sqrt(g_f[0].norm(dim=1) ** 2 + g_b[0].norm(dim=1) ** 2).mean()
        assert got[t] == pytest.approx(expected.item(), rel=1e-4)
    assert got.shape == (T,)


def test_last_state_gradient_vanishes_in_the_middle_at_init_and_pooling_keeps_it():
    """Maini et al.'s start-of-training observation: with the two final states, the middle of a long input gets a
    gradient many orders of magnitude below its ends; mean pooling reads every position directly."""
    ids, labels = torch.randint(0, V, (4, 80)), torch.randint(0, 3, (4,))
    last = clf.vanishing_ratio(position_gradient_norms(_model("last"), ids, labels))
    mean = clf.vanishing_ratio(position_gradient_norms(_model("mean"), ids, labels))
    assert last < 1e-6 < 0.1 < mean


def _separable(n: int, T: int, seed: int) -> Examples:
    """Class = the token at position 0 (0 or 1); every other token is 2..V-1: learnable from the first state."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(2, V, (n, T)).astype(np.uint8)
    labels = np.arange(n) % 2
    ids[:, 0] = labels
    return Examples([ids], [labels])


def test_training_is_cached_by_config_and_data_and_learns(tmp_path):
    config = ClassifierConfig("max", V, 2, hidden=6, batch_size=16, epochs=8, lr=0.02)
    train, val = _separable(96, 10, 0), _separable(32, 10, 1)
    out = train_classifier(config, train, val, tmp_path)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["complete"] and metrics["kind"] == "classifier" and metrics["ratio_init"] > 0
    model = load_classifier(out / "checkpoint.pt")
    (logp,) = predict(model, _separable(64, 10, 2))
    assert (logp.argmax(1) == np.arange(64) % 2).mean() > 0.95
    assert metrics["step_target"] is not None and metrics["examples_target"] == metrics["step_target"] * 16
    mtime = (out / "checkpoint.pt").stat().st_mtime_ns
    assert train_classifier(config, train, val, tmp_path) == out and (out / "checkpoint.pt").stat().st_mtime_ns == mtime
    other = train_classifier(config, _separable(96, 10, 5), val, tmp_path)
    assert other != out  # other data, another model


def test_interrupted_training_resumes_bit_identical(tmp_path, monkeypatch):
    config = ClassifierConfig("att", V, 2, hidden=4, batch_size=8, epochs=3, lr=0.01)
    train = Examples([_separable(24, 6, 0).ids[0], _separable(16, 9, 3).ids[0]],
                     [_separable(24, 6, 0).labels[0], _separable(16, 9, 3).labels[0]])  # fmt: skip
    val = _separable(16, 6, 1)
    reference = train_classifier(config, train, val, tmp_path / "reference")
    original, calls = clf.ClassifierTask.after_step, {"n": 0}

    class Interrupted(Exception):
        pass

    def interrupt(self):
        calls["n"] += 1
        if calls["n"] == 7:  # mid-epoch 2 (5 minibatches per epoch)
            raise Interrupted
        original(self)

    monkeypatch.setattr(clf.ClassifierTask, "after_step", interrupt)
    with pytest.raises(Interrupted):
        train_classifier(config, train, val, tmp_path / "resumed", checkpoint_every_s=0)  # state saved every step
    monkeypatch.setattr(clf.ClassifierTask, "after_step", original)
    resumed = train_classifier(config, train, val, tmp_path / "resumed", checkpoint_every_s=0)
    a, b = (json.loads((f / "metrics.json").read_text()) for f in (reference, resumed))
    assert a["epochs"] == b["epochs"] and a["ratio_init"] == b["ratio_init"] and a["step_target"] == b["step_target"]
    wa, wb = (torch.load(f / "checkpoint.pt", weights_only=True)["state_dict"] for f in (reference, resumed))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_a_blown_up_run_raises_training_diverged(tmp_path):
    config = ClassifierConfig("mean", V, 2, hidden=4, batch_size=8, epochs=5, lr=1e4, grad_clip=1e9)
    with pytest.raises(TrainingDiverged):
        train_classifier(config, _separable(64, 6, 0), _separable(16, 6, 1), tmp_path)


@pytest.mark.parametrize(
    "fields, message",
    [({"pool": "sum"}, "unknown pooling"), ({"classes": 1}, "at least 2 classes"), ({"hidden": 0}, "hidden")],
)
def test_bad_configs_are_one_clear_error(fields, message):
    base = {"pool": "max", "vocab_size": V, "classes": 2}
    with pytest.raises(UserError, match=message):
        ClassifierConfig(**{**base, **fields}).validate()
