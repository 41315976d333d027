"""Training dynamics (Karpathy et al. sec 4.3, Fig 5 right): KL to n-NNs and n-grams over snapshots."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import fake_corpus_file, fake_neural_model, fake_ngram_model, fake_nnn_model

from analyses import common, training_dynamics, training_dynamics_kl
from analyses.base import Result
from analyses.context import Context, MissingInput, model_index
from analyses.prose import sentence, unsupported_numbers
from charlm.predictions import kl_error_bound, symmetric_kl
from corpora import run_cli


def _random_logp(rng, shape, scale=1.0) -> np.ndarray:
    logits = scale * rng.normal(size=shape)
    return (logits - np.log(np.exp(logits).sum(1, keepdims=True))).astype(np.float32)


def test_divergences_match_the_symmetric_kl_and_bound_the_float16_error():
    rng = np.random.default_rng(0)
    snaps = [_random_logp(rng, (4100, 7), s).astype(np.float16).astype(np.float32) for s in (0.5, 1, 3)]
    bases = [_random_logp(rng, (4100, 7), s).astype(np.float16).astype(np.float32) for s in (1, 2)] + [snaps[1]]
    kl, bound = training_dynamics_kl.divergences(snaps, bases)
    for i, a in enumerate(snaps):
        for j, b in enumerate(bases):
            assert kl[i, j] == pytest.approx(symmetric_kl(a, b).mean(), abs=1e-9)
            exact_bound = (kl_error_bound(a, b) + kl_error_bound(b, a)).mean()
            assert exact_bound <= bound[i, j] <= 3 * exact_bound  # a bound, and not a loose one
    assert kl[1, 2] == pytest.approx(0.0, abs=1e-9)


def _dynamics_corpus(tmp_path, nnn_orders=range(1, 7), snapshots=True):
    """Baselines with random predictions; an LSTM whose three snapshots predict exactly as the 1-, 2-, 3-NN."""
    corpus = fake_corpus_file(tmp_path)
    T, V = corpus.split("test").size - 1, corpus.vocab_size
    rng = np.random.default_rng(1)
    nnn = {n: _random_logp(rng, (T, V), 0.5 + n / 2) for n in nnn_orders}
    for n, logp in nnn.items():
        fake_nnn_model(corpus, n, logp=logp)
    for n in range(1, 10):
        fake_ngram_model(corpus, n, logp=_random_logp(rng, (T, V), 0.5 + n / 3))
    snaps = [(1, nnn[1]), (2, nnn[2]), (4, nnn[3])] if snapshots else None
    fake_neural_model(corpus, logp=_random_logp(rng, (T, V), 3.0), arch="lstm", snapshots=snaps)
    fake_neural_model(
        corpus, logp=_random_logp(rng, (T, V), 3.0), arch="gru", size=7, snapshots=snaps[:2] if snaps else None
    )
    return corpus, nnn


def test_a_snapshot_identical_to_an_nnn_has_kl_zero_to_it_and_the_orders_come_in_turn(tmp_path, artifacts):
    corpus, nnn = _dynamics_corpus(tmp_path)
    df = training_dynamics.compute(Context(model_index(), common.settings(training_dynamics)))
    lstm = df[df["arch"] == "lstm"]
    assert sorted(lstm["step"].unique()) == [1, 2, 4] and len(lstm) == 3 * (6 + 9)
    same = lstm[(lstm["baseline"] == "nnn") & (lstm["n"] == lstm["step"].map({1: 1, 2: 2, 4: 3}))]
    assert np.allclose(same["sym_kl"], 0.0, atol=1e-9) and np.allclose(same["delta_loss"], 0.0, atol=1e-6)
    orders = training_dynamics.closest_orders(lstm)
    assert list(orders["n"]) == [1, 2, 3] and training_dynamics.pattern(list(orders["n"])) == "in turn"
    assert list(training_dynamics.closest_orders(df[df["arch"] == "gru"])["n"]) == [1, 2]  # every model with snapshots
    # the loss column is the snapshot's exact test loss: the 2-NN's own at step 2
    step2 = lstm[lstm["step"] == 2]
    assert step2["loss"].iloc[0] == pytest.approx(
        -nnn[2][np.arange(len(nnn[2])), corpus.split("test")[1:]].mean(), abs=1e-5
    )
    # the epochs each model trained in all: no recorded curve here, so its characters over the training split's
    train_chars = corpus.split("train").size
    assert np.allclose(
        lstm["epochs_trained"], model_index().set_index("arch").loc["lstm", "chars_trained"] / train_chars
    )
    result = training_dynamics.ANALYSIS.compute(Context(model_index(), common.settings(training_dynamics)))
    assert isinstance(result, Result) and set(result.tables) == {"summary"}
    (row,) = result.tables["summary"].to_dict("records")
    assert row["head_path"] == "1 -> 2 -> 3" and row["head_pattern"] == "in turn" and row["head_snapshots"] == 3
    assert (row["models"], row["multi"], row["single"], row["monotone"]) == (2, 2, 0, 2)
    (claim,) = [f for f in result.findings if f.claim]
    assert claim.claim == "td-fig5-growth" and claim.verdict == "partly"  # in turn from 1, but only up to the 3-NN
    assert "closest n-NN over 3 snapshots in its first" in sentence(
        claim
    ) and "1 -> 2 -> 3 (Fig 5: 1 -> 2 -> 3 -> 4)" in (sentence(claim))
    frames = [result.table, *result.tables.values()]
    for f in result.findings:
        assert unsupported_numbers(sentence(f), frames) == [], sentence(f)
        assert len(sentence(f).split()) <= 30, sentence(f)
    fig = training_dynamics.ANALYSIS.plot(result)
    assert tuple(fig.get_size_inches()) <= (7.5, 9.0)
    plt.close(fig)
    table = training_dynamics.per_model(df)
    assert table.iloc[0]["closest n-NN by snapshot"] == "1, 2, 3" and table.iloc[0]["pattern"] == "in turn"
    assert len(training_dynamics.ANALYSIS.summary_table(result)) == 2  # the corpus, and the paper's row
    # a second run finds every model's result cached: the same table, and no baseline's predictions read
    again = Context(model_index(), common.settings(training_dynamics))
    read, predictions_of = [], again.predictions
    again.predictions = lambda row, *args, **kwargs: read.append(row["family"]) or predictions_of(row, *args, **kwargs)
    pd.testing.assert_frame_equal(training_dynamics.compute(again), df)
    assert read == []
    early = training_dynamics.compute(
        Context(model_index(), common.settings(training_dynamics, None, {"max_epochs": 300 / 4800}))
    )
    assert sorted(early["step"].unique()) == [1, 2]  # step 4 (400 characters) is past the horizon


def test_missing_snapshots_or_baselines_are_one_line_naming_the_command(tmp_path, artifacts, capsys):
    corpus, _ = _dynamics_corpus(tmp_path, snapshots=False)
    with pytest.raises(MissingInput, match="snapshots"):
        training_dynamics.compute(Context(model_index(), common.settings(training_dynamics)))
    assert run_cli(training_dynamics.main, ["--corpus", corpus.source]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "charlm.train" in err[0]


def test_a_missing_nnn_is_one_line_naming_the_command(tmp_path, artifacts, capsys):
    corpus, _ = _dynamics_corpus(tmp_path, nnn_orders=range(1, 6))
    assert run_cli(training_dynamics.main, ["--corpus", corpus.source]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "n = 6" in err[0] and "python -m charlm.nnn" in err[0]


def test_the_pattern_of_closest_orders_is_named_as_the_paper_would():
    assert training_dynamics.pattern([1, 1, 2, 3, 4]) == "in turn"  # the paper's 1-NN, then 2, 3, 4
    assert training_dynamics.pattern([1, 1, 4, 6]) == "grows"  # never down, but orders skipped
    assert training_dynamics.pattern([2, 2]) == "constant"  # no growth at all
    assert training_dynamics.pattern([1, 1, 4]) == "two orders"  # up, but through too few orders to be the paper's
    assert training_dynamics.pattern([1, 3, 2, 4]) == "not monotone"


def _dynamics_table(models: list[dict], n_max: int = 6) -> pd.DataFrame:
    """A training_dynamics table built by hand: each model's snapshot s is closest (KL 0.1, the others 1 + |n - k|)
    to the n-NN and the n-gram of order `orders[s]`; its loss beats every n-NN at the last snapshot."""
    rows = []
    for k, m in enumerate(models):
        for s, order in enumerate(m["orders"]):
            for family in ("nnn", "ngram"):
                for n in range(1, n_max + 1):
                    kl = 0.1 if n == order else 1.0 + abs(n - order)
                    rows.append({
                        "corpus": "c", "model_id": f"m{k}", "arch": m["arch"], "layers": m.get("layers", 1),
                        "size": m.get("size", 8), "budget": m.get("budget", np.nan), "seed": m.get("seed", 0),
                        "group_id": f"g{k}", "step": 2**s, "chars": 100 * 2**s, "epoch": 0.5 * (s + 1),
                        "baseline": family, "n": n, "sym_kl": kl, "kl_bound": 1e-4, "loss": 2.0 - 0.1 * s,
                        "baseline_loss": 2.5, "delta_loss": 0.5 + 0.1 * s, "positions": 100,
                        "epochs_trained": m.get("epochs_trained", 20.0),
                    })  # fmt: skip
    df = pd.DataFrame(rows)
    df["closest"] = df["sym_kl"] == df.groupby(["model_id", "step", "baseline"])["sym_kl"].transform("min")
    return df


@pytest.mark.parametrize(
    "orders, path, verdict",
    [
        ([1, 2, 3, 4], "1 -> 2 -> 3 -> 4", "reproduced"),  # the paper's growth
        ([1, 1, 3, 5], "1 -> 3 -> 5", "partly"),  # never down, three orders, but skipping some
        ([2, 3, 4, 5], "2 -> 3 -> 4 -> 5", "partly"),  # in turn, but never like the 1-NN
        ([1, 3, 3, 3], "1 -> 3", "not reproduced"),  # two orders: too few to call growth
        ([2, 2, 2, 2], "2", "not reproduced"),
        ([1, 3, 2, 4], "1 -> 3 -> 2 -> 4", "not reproduced"),  # back down
        ([1], "1", "untested"),  # one snapshot: no path to judge
    ],
)  # fmt: skip
def test_the_verdict_is_the_paper_s_growth_only_in_turn_from_the_1_nn(orders, path, verdict):
    df = _dynamics_table([{"arch": "lstm", "orders": orders}, {"arch": "gru", "orders": [1, 2, 3, 4], "size": 9}])
    (row,) = training_dynamics.summary(df, 3.0).to_dict("records")
    assert row["head_path"] == path and training_dynamics.verdict(row) == verdict


def test_models_with_one_snapshot_are_counted_apart_and_the_epochs_come_from_the_models():
    """Issue 36: "24 of 24 never go back to a lower order" where 13 had one snapshot, and "these models trained for
    only 3.00 to 3.00 epochs" where they trained 18 to 50 epochs."""
    df = _dynamics_table([
        {"arch": "lstm", "layers": 3, "orders": [1, 2, 3, 4], "epochs_trained": 26.0},
        {"arch": "gru", "orders": [1, 1, 6], "size": 9, "epochs_trained": 18.0},
        {"arch": "rnn", "orders": [1], "size": 10, "epochs_trained": 50.0},
        {"arch": "lstm", "orders": [1], "seed": 1, "epochs_trained": 30.0},
    ])  # fmt: skip
    (row,) = training_dynamics.summary(df, 3.0).to_dict("records")
    assert (row["models"], row["multi"], row["single"], row["monotone"], row["grows"]) == (4, 2, 2, 2, 1)
    assert (row["epochs_min"], row["epochs_max"], row["last_epoch"]) == (18.0, 50.0, 2.0)
    said = [sentence(f) for f in training_dynamics.findings(training_dynamics.summary(df, 3.0))]
    assert (
        "c: 2 of 2 models with 2+ snapshots never go back to a lower order, 1 rise through three orders or more "
        "(1 in turn); 2 have one" in said
    )
    assert "c: snapshots up to epoch 2.00 (the first 3, as Fig 5) of trainings that lasted 18 to 50 epochs" in said


def test_the_reference_is_the_deepest_lstm_of_the_largest_budget_row():
    """Fig 5 follows the 3-layer LSTM: depth decides within the largest row, before the seed; a bigger GRU or a
    deeper LSTM of a smaller row does not."""
    df = _dynamics_table([
        {"arch": "lstm", "budget": 128, "layers": 1, "seed": 0, "orders": [1, 2]},
        {"arch": "lstm", "budget": 128, "layers": 2, "seed": 1, "size": 6, "orders": [1, 2, 3]},
        {"arch": "lstm", "budget": 64, "layers": 3, "seed": 0, "size": 4, "orders": [2, 2]},
        {"arch": "gru", "budget": 256, "layers": 3, "seed": 0, "size": 20, "orders": [3, 3]},
    ])  # fmt: skip
    assert training_dynamics.reference(df, "c") == "m1"
    assert training_dynamics.summary(df, 3.0).loc[0, "head"] == "LSTM 128 L2 s1"
    no_lstm = df[df["arch"] != "lstm"]
    assert training_dynamics.reference(no_lstm, "c") == "m3"  # the first architecture in report order instead
