"""The `cells` analysis: a hand-built line-counter cell is found, ranked first and confirmed by zeroing it; every
architecture gets the same probes; the table feeds the figure, caption, report table and viewer; bad input is one
line and exit 2."""

from __future__ import annotations

import io

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
from conftest import fake_corpus_file, fake_neural_model

from analyses import cells, common
from analyses.context import Context, model_index
from charlm.checkpoint import load_payload, save_payload
from corpora import run_cli

SMALL = {"windows": 8, "window": 120, "warmup": 40, "test_every": 4, "extra_windows": 4, "train_stride": 1,
         "cv": 2, "cs": [0.1, 1.0], "alphas": [1.0, 10.0], "top_k": 2, "viewer_cells": 2}  # fmt: skip
COUNTER = 5  # the unit of the hand-built LSTM that counts the characters of the line


def line_counter_lstm(corpus, **fields):
    """An LSTM whose cell COUNTER holds exactly the position in the line (c = c + 1 per character, 0 after a
    newline) and whose other cells are random: the answer the probes must find."""
    out = fake_neural_model(corpus, arch="lstm", size=8, **fields)
    payload = load_payload(out / "checkpoint.pt")
    state = payload["state_dict"]
    H, newline = 8, int(np.flatnonzero(corpus.vocab == ord("\n"))[0])
    w_ih, w_hh, b_ih, b_hh = (state[f"layers.0.rnn.{k}_l0"] for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    for gate in range(4):  # i, f, g, o
        row = gate * H + COUNTER
        w_hh[row] = 0.0  # no input from the other units: the counter is all there is to it
        w_ih[row] = 0.0
        b_hh[row] = 0.0
        b_ih[row] = 20.0  # i = f = o = 1 and g = tanh(20) = 1: add one per character
    w_ih[0 * H + COUNTER, newline] = -40.0  # at a newline: i = 0 (add nothing) ...
    w_ih[1 * H + COUNTER, newline] = -40.0  # ... and f = 0 (forget): the count restarts at 0
    w_hh[:, COUNTER] = 0.0  # and the other units do not read it
    payload["state_dict"] = {k: torch.as_tensor(v) for k, v in state.items()}
    save_payload(out / "checkpoint.pt", payload)
    return out


def ctx_for(**settings) -> Context:
    return Context(model_index(), common.settings(cells, None, {**SMALL, **settings}))


def test_the_hand_built_line_counter_is_found_ranked_first_and_confirmed_by_zeroing(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    line_counter_lstm(corpus)
    df = cells.compute(ctx_for(features=["line_position", "in_quotes", "word_position"]))

    cell = df[(df["record"] == "cell") & (df["feature"] == "line_position")].iloc[0]
    assert cell["internal"] == "c" and cell["best_cell"] == COUNTER
    assert cell["best_cell_score"] > 0.999  # alone, the counter is the label (R^2 on test windows)
    assert cell["probe_score"] > 0.99 and cell["best_cell_share"] > 0.99
    assert cell["weight_cell"] == COUNTER and cell["best_cell_weight_rank"] == 1
    assert cell["probe_zero_best"] < 0.5 < cell["probe_zero_random"]  # zeroing it breaks the probe; others do not
    assert cell["found"] == 1

    probe = df[(df["record"] == "probe") & (df["feature"] == "line_position") & (df["internal"] == "c")].iloc[0]
    assert probe["score"] > 0.99 and abs(probe["baseline"]) < 0.1
    assert probe["selectivity_trigram"] > 0.5  # no random label per trigram is as easy as a tracked count
    assert set(df.loc[df["record"] == "probe", "internal"].dropna()) >= {"c", "h"}

    # the viewer's values are the cell's tanh(c) on its excerpt, which are the labels' tanh
    view = df[(df["record"] == "viewer") & (df["feature"] == "line_position") & (df["rank"] == 1)].iloc[0]
    excerpt = df[(df["record"] == "excerpt") & (df["feature"] == "line_position")].iloc[0]
    labels = cells._unb64(excerpt["labels"], np.int16)
    shown = cells._unb64(view["values"], np.int8) / 127.0
    np.testing.assert_allclose(shown, np.tanh(labels), atol=0.01)


def test_every_architecture_gets_the_same_probes_and_the_table_feeds_every_view(tmp_path, artifacts, monkeypatch):
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    archs = ["rnn", "gru", "lstm", "lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "lstm-gates"]
    for arch in archs:
        fake_neural_model(corpus, arch=arch, size=6)
    fake_neural_model(corpus, arch="lstm", size=6, seed=1)  # a second seed: not probed with seeds = 1
    fake_neural_model(corpus, arch="gru", size=5, layers=2)  # every layer of a deeper model
    df = cells.compute(ctx_for(features=["line_position", "in_quotes", "in_parens"]))

    found = df[df["record"] == "cell"]
    assert sorted(found["arch"].unique()) == sorted(archs) and found["seed"].eq(0).all()
    deep = df[(df["record"] == "probe") & (df["model"] == "GRU 2x5")]
    assert set(deep["layer"].dropna()) == {0, 1} and set(found.loc[found["model"] == "GRU 2x5", "layer"]) == {0, 1}
    found = found[found["model"] != "GRU 2x5"]
    cell_internal = found.groupby("arch")["internal"].first()
    assert (cell_internal[["lstm", "lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden"]] == "c").all()
    assert (cell_internal[["rnn", "gru", "lstm-gates"]] == "h").all()
    # the fake text has no parentheses: one clear row says so instead of a number
    parens = df[(df["record"] == "probe") & (df["feature"] == "in_parens")]
    assert parens["score"].isna().all() and parens["note"].str.contains("too few").all()

    # everything the report needs comes from the table as it is re-read from CSV
    table = pd.read_csv(io.StringIO(df.to_csv(index=False)))
    fig = cells.plot(table)
    assert isinstance(fig, matplotlib.figure.Figure)
    matplotlib.pyplot.close(fig)
    shown = cells.with_paper(table)
    assert len(shown) == (table["record"] == "cell").sum() and "Fig 2" in shown.columns
    assert "line_position" in cells.caption(table) and "LSTM" in cells.summary(table)
    fragment = cells.report_html(table)
    assert fragment.count('class="cells-viewer"') == 1 and "- S-RNN - HIDDEN 1x6" in fragment
    # the second run reads every model from the cache: probing again would fail
    monkeypatch.setattr(cells, "probe_model", lambda *a, **k: pytest.fail("a cached model was probed again"))
    again = cells.compute(ctx_for(features=["line_position", "in_quotes", "in_parens"]))
    pd.testing.assert_frame_equal(again.reset_index(drop=True), df.reset_index(drop=True), check_dtype=False)


@pytest.mark.parametrize(
    "settings, message",
    [
        ('features=["nosuch"]', "unknown feature 'nosuch'"),
        ('features=["in_comment"]', "does not apply to the corpora analysed (prose text)"),
        ("windows=400", "do not fit"),
        ('internals=["q"]', "no architecture has the internal q"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, artifacts, capsys, settings, message):
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    fake_neural_model(corpus, arch="lstm", size=6)
    args = ["--corpus", corpus.source] + [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
    assert run_cli(cells.main, [*args, "--set", settings]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_cli_without_models_names_the_command(tmp_path, artifacts, capsys):
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    assert run_cli(cells.main, ["--corpus", corpus.source]) == 2
    assert "python -m reports --profile quick" in capsys.readouterr().err
