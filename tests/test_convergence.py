"""convergence: final gains per epoch computed from the curves, the verdict and the caption flip with them."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pytest
from conftest import fake_corpus_file, fake_neural_model

from analyses import common, convergence
from analyses.context import Context, model_index


def _with_curve(folder, val_losses, stopped, epoch_fraction=1.0):
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["epochs"] = [
        {"epoch": (k + 1) * epoch_fraction, "step": (k + 1) * 10, "chars": (k + 1) * 1000, "lr": 2e-3,
         "train_loss": v - 0.05, "val_loss": v}
        for k, v in enumerate(val_losses)
    ]  # fmt: skip
    metrics["stopped"] = stopped
    (folder / "metrics.json").write_text(json.dumps(metrics))


def _table(**settings):
    ctx = Context(model_index(), common.settings(convergence, None, settings))
    return convergence.compute(ctx)


@pytest.mark.parametrize("rnn_still_gaining", [True, False])
def test_the_verdict_and_caption_follow_the_final_gain(tmp_path, artifacts, rnn_still_gaining):
    corpus = fake_corpus_file(tmp_path)
    _with_curve(fake_neural_model(corpus, arch="lstm"), [2.0, 1.5, 1.4, 1.399, 1.398, 1.397], "converged")
    rnn = [2.0, 1.8, 1.6, 1.4, 1.2] if rnn_still_gaining else [2.0, 1.8, 1.6, 1.599, 1.5985, 1.598]
    _with_curve(fake_neural_model(corpus, arch="rnn", size=9), rnn, "epochs")
    _with_curve(fake_neural_model(corpus, arch="gru", size=7), [2.5, 2.2], "budget", epoch_fraction=0.75)
    df = _table()
    table = convergence.per_model(df).set_index("arch")
    assert table.loc["lstm", "final_gain_per_epoch"] == pytest.approx((1.4 - 1.397) / 3)
    assert table.loc["lstm", "converged"] == "yes"
    assert table.loc["gru", "converged"].startswith("no: stopped by its character budget")
    caption = convergence.caption(df)
    if rnn_still_gaining:
        assert table.loc["rnn", "final_gain_per_epoch"] == pytest.approx((1.8 - 1.2) / 3)
        assert table.loc["rnn", "converged"] == "no: still gaining 0.2000 nats/epoch"
        assert "1 of 3 models converged (1 by the convergence rule)" in caption
        assert "largest final gain is 0.2000 nats/epoch (RNN 1x9 seed 0, after 5 epochs)" in caption
    else:
        assert table.loc["rnn", "converged"] == "yes"
        assert "2 of 3 models converged (1 by the convergence rule, 1 at the epoch cap)" in caption
    assert "1 stopped at their character budget after 1.5 epochs at most" in caption
    plt.close(convergence.plot(df))


def test_a_stricter_criterion_changes_the_verdict(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path)
    _with_curve(fake_neural_model(corpus, arch="lstm"), [2.0, 1.5, 1.4, 1.399, 1.398, 1.397], "converged")
    assert convergence.per_model(_table(converged_gain=0.0005))["converged"].iloc[0].startswith("no: still gaining")
    assert "gained less than 0.0005 nats per epoch" in convergence.caption(_table(converged_gain=0.0005))
    assert convergence.per_model(_table(window=10))["converged"].iloc[0] == "unknown: fewer than 11 epochs"
