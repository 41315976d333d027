"""convergence: final gains per epoch computed from the curves, the stopping rule each model recorded, the counts
and the verdict per corpus, and every number of a finding in the result's tables."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pytest
from conftest import fake_corpus_file, fake_neural_model

from analyses import common, convergence
from analyses.context import Context, model_index
from analyses.prose import sentence, unsupported_numbers


def _with_curve(folder, val_losses, stopped, epoch_fraction=1.0, converge_delta=0.0, lrs=None, lr_decay=0.95):
    metrics = json.loads((folder / "metrics.json").read_text())
    lrs = lrs or [2e-3] * len(val_losses)
    metrics["epochs"] = [
        {"epoch": (k + 1) * epoch_fraction, "step": (k + 1) * 10, "chars": (k + 1) * 1000, "lr": lr,
         "train_loss": v - 0.05, "val_loss": v}
        for k, (v, lr) in enumerate(zip(val_losses, lrs))
    ]  # fmt: skip
    metrics["stopped"] = stopped
    metrics["train_config"] = {
        **metrics.get("train_config", {}),
        "epochs": 50,
        "patience": 5,
        "converge_delta": converge_delta,
        "converge_window": 3,
        "lr_decay": lr_decay,
    }
    (folder / "metrics.json").write_text(json.dumps(metrics))


def _result(**settings):
    ctx = Context(model_index(), common.settings(convergence.ANALYSIS, None, settings))
    return convergence.ANALYSIS.compute(ctx)


def _three_models(corpus, rnn_still_gaining: bool):
    """An LSTM stopped by the 0.002 shortcut (gaining 0.001 nats/epoch), an RNN at the epoch cap (gaining 0.2 or
    0.0005), a GRU stopped by its character budget after 1.5 epochs."""
    _with_curve(fake_neural_model(corpus, arch="lstm"), [2.0, 1.5, 1.4, 1.399, 1.398, 1.397], "converged",
                converge_delta=0.002)  # fmt: skip
    rnn = [2.0, 1.8, 1.6, 1.4, 1.2] if rnn_still_gaining else [2.0, 1.8, 1.6, 1.599, 1.5985, 1.598]
    _with_curve(fake_neural_model(corpus, arch="rnn", size=9), rnn, "epochs")
    _with_curve(fake_neural_model(corpus, arch="gru", size=7), [2.5, 2.2], "budget", epoch_fraction=0.75)


@pytest.mark.parametrize("rnn_still_gaining", [True, False])
def test_the_rule_and_the_final_gain_make_the_verdict(tmp_path, artifacts, rnn_still_gaining):
    corpus = fake_corpus_file(tmp_path)
    _three_models(corpus, rnn_still_gaining)
    result = _result()
    table = convergence.per_model(result.table).set_index("arch")
    assert table.loc["lstm", "final_gain_per_epoch"] == pytest.approx((1.4 - 1.397) / 3)
    assert table.loc["lstm", "converged"] == "no: stopped by the convergence shortcut, gaining 0.0010 nats/epoch"
    assert not table.loc["lstm", "papers_rule"] and table.loc["lstm", "converge_delta"] == 0.002
    assert table.loc["gru", "converged"].startswith("no: stopped by its character budget")
    stops = result.tables["stops"].iloc[0]
    assert (stops["models"], stops["papers_rule"], stops["epoch_cap"], stops["shortcut"], stops["budget"]) == (
        3,
        1,
        1,
        1,
        1,
    )
    assert stops["threshold"] == 0.002 and stops["max_epochs"] == 50
    first = result.findings[0]
    assert first.claim == "conv-papers-rule" and first.verdict == "not reproduced"  # a budget-stopped model
    if rnn_still_gaining:
        assert table.loc["rnn", "final_gain_per_epoch"] == pytest.approx((1.8 - 1.2) / 3)
        assert table.loc["rnn", "converged"] == "no: still gaining 0.2000 nats/epoch"
        assert stops["still_falling"] == 1
        assert "largest final gain is 0.2000 nats/epoch, RNN 1x9 seed 0, stopped by the epoch cap after 5 epochs" in (
            sentence(result.findings[-1])
        )
    else:
        assert table.loc["rnn", "converged"] == "yes" and stops["still_falling"] == 0
    assert sentence(first) == (
        f"{corpus.name}: 1 of 3 models stopped by the papers' rule (0 by early stopping, 1 at the 50-epoch cap), 1 by "
        f"the convergence shortcut, 1 by a character budget; {stops['still_falling']} still gaining over 0.002 "
        "nats/epoch when stopped"
    )
    fig = convergence.ANALYSIS.plot(result)
    assert fig.get_size_inches()[0] <= 7.5 and fig.get_size_inches()[1] <= 9.0 and len(fig.axes) == 2
    plt.close(fig)


def test_shortcut_stopped_models_are_partly_and_the_papers_rule_reproduced(tmp_path, artifacts):
    a = fake_corpus_file(tmp_path, name="a.txt")
    b = fake_corpus_file(tmp_path, name="b.txt", seed=1)
    _with_curve(
        fake_neural_model(a, arch="lstm"), [2.0, 1.5, 1.4, 1.399, 1.398, 1.397], "converged", converge_delta=2e-3
    )
    _with_curve(fake_neural_model(a, arch="rnn", size=9), [2.0, 1.8, 1.79, 1.8, 1.8, 1.8], "early_stopping")
    _with_curve(fake_neural_model(b, arch="lstm"), [2.0, 1.5, 1.4, 1.41, 1.42, 1.43], "early_stopping")
    _with_curve(fake_neural_model(b, arch="rnn", size=9), [2.0, 1.9, 1.8, 1.7999, 1.7998, 1.7997], "epochs")
    result = _result()
    verdicts = {f.corpus: f.verdict for f in result.findings if f.claim}
    assert verdicts == {"a": "partly", "b": "reproduced"}
    shortcut = [sentence(f) for f in result.findings if "the shortcut stopped" in sentence(f)]
    assert shortcut == ["a: the model the shortcut stopped was still gaining 0.0010 nats/epoch, after 6 epochs"]
    frames = [result.table, *result.tables.values()]
    for finding in result.findings:
        assert unsupported_numbers(sentence(finding), frames) == [], sentence(finding)
        assert len(sentence(finding).split()) <= 36
    summary = convergence.ANALYSIS.summary_table(result)
    assert list(summary.columns)[-4] == "still gaining > 0.002 nats/epoch" and list(summary["early stopping"]) == [1, 1]
    assert len(convergence.ANALYSIS.appendix(result)) == 1


def test_a_stricter_threshold_counts_more_still_falling(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path)
    _with_curve(fake_neural_model(corpus, arch="lstm"), [2.0, 1.5, 1.4, 1.399, 1.398, 1.397], "epochs")
    assert _result().tables["stops"]["still_falling"].iloc[0] == 0
    strict = _result(converged_gain=0.0005)
    assert strict.tables["stops"]["still_falling"].iloc[0] == 1
    assert "still gaining over 0.0005 nats/epoch" in sentence(strict.findings[0])
    few = convergence.per_model(_result(window=10).table)
    assert few["converged"].iloc[0] == "unknown: fewer than 11 epochs"


def test_validation_gain_per_unit_of_learning_rate_tells_the_steps_noise_from_capacity(tmp_path, artifacts):
    """Curves built from their gain per unit of rate: 1 nat per unit of rate up to epoch 10, then 2 (a model the
    annealing still helps: ratio 2), or 0.5 (one running out of capacity: ratio 0.5); the rest of the schedule at the
    late rate is rate x lr_last x d / (1 - d)."""
    decay, epochs = 0.9, 30
    rates = [2e-3 * decay ** max(0, k - 5) for k in range(epochs)]
    corpus = fake_corpus_file(tmp_path)
    for arch, size, late in (("lstm", 8, 2.0), ("rnn", 9, 0.5)):
        val = [2.0]
        for k in range(1, epochs):
            val.append(val[-1] - (1.0 if k <= 10 else late) * rates[k])
        folder = fake_neural_model(corpus, arch=arch, size=size)
        _with_curve(folder, val, "epochs", lrs=rates, lr_decay=decay)
    result = _result(rate_window=5, rate_lag=20)
    table = convergence.per_model(result.table).set_index("arch")
    assert table.loc["lstm", "rate_early"] == pytest.approx(1.0) and table.loc["lstm", "rate_late"] == pytest.approx(2)
    assert list(table.loc[["lstm", "rnn"], "rate_ratio"]) == pytest.approx([2.0, 0.5])
    assert table.loc["rnn", "remainder"] == pytest.approx(0.5 * rates[-1] * decay / (1 - decay))
    stops = result.tables["stops"].iloc[0]
    assert (stops["rated"], stops["rate_rising"]) == (2, 1)
    said = [sentence(f) for f in result.findings]
    assert any("1 of 2 models at the epoch cap gain more validation per unit of learning rate" in s for s in said)
    frames = [result.table, *result.tables.values()]
    for finding in result.findings:
        assert unsupported_numbers(sentence(finding), frames) == [], sentence(finding)
        assert len(sentence(finding).split()) <= 36
    # too short a curve for the lag, or stopped by early stopping: no reading
    assert convergence.per_model(_result(rate_lag=40).table)["rate_ratio"].isna().all()
