"""Training dynamics (Karpathy et al. sec 4.3, Fig 5 right): KL to n-NNs and n-grams over snapshots."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import fake_corpus_file, fake_neural_model, fake_ngram_model, fake_nnn_model

from analyses import common, training_dynamics
from analyses.context import Context, MissingInput, model_index
from charlm.predictions import kl_error_bound, symmetric_kl
from corpora import run_cli


def _random_logp(rng, shape, scale=1.0) -> np.ndarray:
    logits = scale * rng.normal(size=shape)
    return (logits - np.log(np.exp(logits).sum(1, keepdims=True))).astype(np.float32)


def test_divergences_match_the_symmetric_kl_and_bound_the_float16_error():
    rng = np.random.default_rng(0)
    snaps = [_random_logp(rng, (4100, 7), s).astype(np.float16).astype(np.float32) for s in (0.5, 1, 3)]
    bases = [_random_logp(rng, (4100, 7), s).astype(np.float16).astype(np.float32) for s in (1, 2)] + [snaps[1]]
    kl, bound = training_dynamics.divergences(snaps, bases)
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
    text = training_dynamics.caption(df)  # the LSTM (the reference model) was built to pass through 1, 2, 3
    assert "are closest, one after the other, to the n-NN of n = 1, 2, 3 " in text
    assert "The closest n-NN passes through the orders in turn (1 -> 2 -> 3)" in text
    assert "1, 2, 3" in training_dynamics.summary(df)
    plt.close(training_dynamics.plot(df))
    table = training_dynamics.with_paper(df)
    assert table.iloc[0]["closest n-NN by snapshot"] == "1, 2, 3" and table.iloc[-1]["pattern"] == "in turn"
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
                    })  # fmt: skip
    df = pd.DataFrame(rows)
    df["closest"] = df["sym_kl"] == df.groupby(["model_id", "step", "baseline"])["sym_kl"].transform("min")
    return df


@pytest.mark.parametrize(
    "orders, said, not_said",
    [
        ([1, 2, 3, 4], "passes through the orders in turn (1 -> 2 -> 3 -> 4), as the paper shows", "only two"),
        ([1, 1, 3, 5], "grows through 3 orders (1 -> 3 -> 5), as in the paper", "in turn"),
        ([1, 3, 3, 3], "moves through only two orders (1 -> 3): too few", "as in the paper"),
        ([2, 2, 2, 2], "is the same at every snapshot (n = 2): no growth", "as in the paper"),
        ([1, 3, 2, 4], "goes back down (1 -> 3 -> 2 -> 4)", "as in the paper"),
    ],
)  # fmt: skip
def test_the_caption_says_the_paper_s_growth_only_through_three_orders_or_more(orders, said, not_said):
    df = _dynamics_table([{"arch": "lstm", "orders": orders}, {"arch": "gru", "orders": [1, 2, 3, 4], "size": 9}])
    text = training_dynamics.caption(df)
    first = text.split(" Of all")[0]  # the reference model's sentences
    assert said in first and not_said not in first
    grows = sum(training_dynamics.pattern(o) in training_dynamics.GROWS for o in (orders, [1, 2, 3, 4]))
    assert f"{grows} of 2 rise through three orders or more" in text


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
    assert "LSTM 128 L2 s1" in training_dynamics.summary(df).split(":")[0]
    no_lstm = df[df["arch"] != "lstm"]
    assert training_dynamics.reference(no_lstm, "c") == "m3"  # the first architecture in report order instead
