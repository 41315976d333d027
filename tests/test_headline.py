"""The one rule for "the headline LSTM" (charlm.plan.headline_key): the profile's configs and every section agree.

Karpathy et al. detail their 3-layer LSTM (Figs 4 and 5): the deepest of the largest budget row. The rule fixes that
choice by configuration (largest row, deepest, lowest dropout, lowest seed), never by a test loss.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import fake_corpus_file, fake_neural_model, fake_ngram_model, fake_nnn_model

from analyses import char_advantage, common, cross_entropy, error_overlap, onion
from analyses.context import Context, model_index
from analyses.prose import sentence
from charlm.model import matched_size
from charlm.plan import headline_config
from charlm.train import TrainConfig


def _rows(*models) -> pd.DataFrame:
    """Index-like rows: (arch, budget, layers, seed[, dropout]); widths as a budget row sizes them (V = 87)."""
    out = []
    for k, (arch, budget, layers, seed, *dropout) in enumerate(models):
        size = matched_size(arch, budget, 87, layers) if budget == budget else 8 * (k + 1)  # NaN: no row
        out.append({"model_id": f"m{k}", "arch": arch, "budget": budget, "layers": layers, "size": size,
                    "seed": seed, "dropout": dropout[0] if dropout else 0.0})  # fmt: skip
    return pd.DataFrame(out)


@pytest.mark.parametrize(
    "models, expected",
    [
        ([("lstm", 128, 1, 0), ("lstm", 64, 3, 0), ("gru", 512, 3, 0)], "m0"),  # the largest row beats a deeper one
        ([("lstm", 128, 1, 0), ("lstm", 128, 3, 1), ("lstm", 128, 2, 0)], "m1"),  # depth before seed
        ([("lstm", 128, 2, 2), ("lstm", 128, 2, 1)], "m1"),  # then the lowest seed
        ([("lstm", 128, 2, 0, 0.25), ("lstm", 128, 2, 0, 0.0)], "m1"),  # dropout only breaks ties before training
        ([("lstm", np.nan, 1, 0), ("lstm", np.nan, 1, 0)], "m1"),  # no row: the wider model (8 vs 16)
        ([("rnn", 128, 1, 0), ("gru", 64, 1, 0), ("gru", 128, 2, 0)], "m2"),  # no LSTM: the first type in report order
    ],
)  # fmt: skip
def test_the_rule_picks_the_largest_row_then_the_deepest_then_the_lowest_seed(models, expected):
    assert common.headline_id(_rows(*models)) == expected


def test_the_profile_and_the_analyses_name_the_same_lstm():
    """charlm.plan.headline_config (which model ships every snapshot) and analyses.common.headline_id (which model
    the sections detail) apply one rule: on a grid of rows, depths and seeds they agree."""
    vocab = 87
    grid = [(arch, budget, layers, seed) for arch in ("lstm", "gru", "rnn") for budget in (64, 128, 256)
            for layers in (1, 2, 3) for seed in (0, 1)]  # fmt: skip
    configs = [TrainConfig("c", arch, layers, matched_size(arch, budget, vocab, layers), 0.0, seed)
               for arch, budget, layers, seed in grid]  # fmt: skip
    rows = _rows(*grid)
    picked = configs[int(common.headline_id(rows)[1:])]
    assert headline_config(configs, vocab) == picked
    assert (picked.arch, picked.layers, picked.seed) == ("lstm", 3, 0)
    assert picked.size == matched_size("lstm", 256, vocab, 3)


def test_every_section_marks_the_rules_lstm_not_the_one_of_lowest_test_loss(tmp_path, artifacts):
    """A wide LSTM worse on test than a narrow one is still the headline (by the rule, not by the test set), in
    error_overlap and char_advantage alike, and cross_entropy's caption says how far it is from the best LSTM."""
    corpus = fake_corpus_file(tmp_path)
    T = corpus.split("test").size - 1
    t = np.arange(T)
    wide = fake_neural_model(corpus, nll=np.where(t % 2 == 0, 2.0, 0.1), arch="lstm", size=16)
    fake_neural_model(corpus, nll=np.full(T, 0.1), arch="lstm", size=8)  # narrower, better on test
    fake_nnn_model(corpus, 1, nll=np.full(T, 2.0))
    fake_ngram_model(corpus, 1, nll=np.full(T, 2.0))
    fake_ngram_model(corpus, 20, nll=np.full(T, 2.0))
    expected = wide.name
    for module in (error_overlap, char_advantage):
        df = module.compute(Context(model_index(), common.settings(module)))
        assert set(df.loc[df["headline"], "model_id"]) == {expected}, module.__name__
    ce = cross_entropy.compute(Context(model_index(), common.settings(cross_entropy)))

    def said(df) -> str:
        return " ".join(
            sentence(f) for f in cross_entropy.findings(df, cross_entropy.comparisons(cross_entropy.cells(df)))
        )

    text = said(ce)
    assert "is the 1-layer LSTM of width 16, seed 0" in text and "nats behind the best LSTM here" in text
    assert "the best LSTM here." not in text and "the best LSTM here (" not in text.replace("behind the best", "")
    # the same models, the narrow one now also worse on test: the headline is the best LSTM and the sentence says so
    assert "nats/char: the best LSTM here" in said(ce.assign(ce_nats=ce["ce_nats"] * 0 + ce["size"].rdiv(1)))


def test_the_onions_large_and_small_models_follow_the_rule():
    """Sec 4.4's "best LSTM" and "best LSTM in the smallest category": the rule's LSTM of the largest row and of the
    smallest, the deepest in each (whatever their validation losses)."""
    rows = _rows(("lstm", 256, 1, 0), ("lstm", 256, 2, 0), ("lstm", 64, 1, 0), ("lstm", 64, 2, 0), ("gru", 512, 2, 0))
    rows["val_loss"] = [0.5, 0.9, 0.5, 0.9, 0.1]  # the shallower ones validate better: not what decides
    assert onion._roles(rows) == {"m1": "large", "m3": "small"}
    assert onion._roles(rows[rows["budget"] == 256]) == {"m1": "large"}  # one row: no small model
