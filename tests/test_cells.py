"""The `cells` analysis: a hand-built line-counter cell is found, ranked first and confirmed by zeroing it; every
architecture gets the same probes; the table feeds the figure, caption, report table and viewer; bad input is one
line and exit 2."""

from __future__ import annotations

import io
import re

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
from conftest import fake_corpus_file, fake_neural_model

from analyses import cells, common
from analyses.context import Context, model_index
from charlm.checkpoint import load_checkpoint, load_payload, save_payload
from corpora import run_cli
from probes.activations import trace_windows
from probes.features import PROSE, features_for

SMALL = {"windows": 8, "window": 120, "warmup": 40, "test_every": 4, "extra_windows": 4, "train_stride": 1,
         "cv": 2, "cs": [0.1, 1.0], "alphas": [1.0, 10.0], "viewer_cells": 2, "min_windows": 4,
         "min_test_windows": 1}  # fmt: skip
COUNTER = 5  # the unit of the hand-built LSTM that counts the characters of the line


def line_counter_lstm(corpus, size: int = 8, step: float = 1.0, newline_weight: float = 0.0, **fields):
    """An LSTM whose cell COUNTER holds exactly `step` x the position in the line (c = c + step per character, 0
    after a newline) and whose other cells are random: the answer the probes must find. Nothing else reads the
    counter, except the newline's logit when `newline_weight` is given (+ newline_weight x h): then the counter
    predicts where lines end, and the language model needs it on the characters before line breaks."""
    out = fake_neural_model(corpus, arch="lstm", size=size, **fields)
    payload = load_payload(out / "checkpoint.pt")
    state = payload["state_dict"]
    H, newline = size, int(np.flatnonzero(corpus.vocab == ord("\n"))[0])
    w_ih, w_hh, b_ih, b_hh = (state[f"layers.0.rnn.{k}_l0"] for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
    for gate in range(4):  # i, f, g, o
        row = gate * H + COUNTER
        w_hh[row] = 0.0  # no input from the other units: the counter is all there is to it
        w_ih[row] = 0.0
        b_hh[row] = 0.0
        b_ih[row] = 20.0  # i = f = o = 1 and g = tanh(20) = 1: add one per character
    b_ih[2 * H + COUNTER] = float(np.arctanh(step)) if step < 1 else 20.0  # g = step
    w_ih[0 * H + COUNTER, newline] = -40.0  # at a newline: i = 0 (add nothing) ...
    w_ih[1 * H + COUNTER, newline] = -40.0  # ... and f = 0 (forget): the count restarts at 0
    w_hh[:, COUNTER] = 0.0  # and the other units do not read it
    head = state["head.weight"]
    head[:, COUNTER] = 0.0
    head[newline, COUNTER] = newline_weight
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
    # zeroing it breaks the probe, beyond every random cell; held at its mean, the probe reads a constant
    assert cell["probe_zero_best"] < 0.5 < cell["probe_zero_random_lo"] and cell["probe_zero_vs_random"] == "below"
    assert abs(cell["probe_mean_best"]) < 0.2 < cell["probe_mean_random_lo"]
    best_cells = set(df.loc[df["record"] == "cell", "best_cell"])  # of every feature
    assert cell["n_random"] == 8 - len(best_cells)  # every cell of 8 that is no feature's best
    assert not {int(c) for c in cell["random_cells"].split()} & best_cells
    assert cell["found"] == 1

    probe = df[(df["record"] == "probe") & (df["feature"] == "line_position") & (df["internal"] == "c")].iloc[0]
    assert probe["score"] > 0.99 and abs(probe["baseline"]) < 0.1
    assert probe["selectivity_trigram"] > 0.5  # no random label per trigram is as easy as a tracked count
    # a probe on the last 1, 3, 10 characters reads the line position only near a newline: the counter reads more
    assert probe["last1"] < probe["last3"] < probe["last10"] < 0.6 and probe["selectivity_last10"] > 0.4
    assert set(df.loc[df["record"] == "probe", "internal"].dropna()) >= {"c", "h"}

    # the viewer's values are the cell's tanh(c) on its excerpt, which are the labels' tanh
    view = df[(df["record"] == "viewer") & (df["feature"] == "line_position") & (df["rank"] == 1)].iloc[0]
    excerpt = df[(df["record"] == "excerpt") & (df["feature"] == "line_position")].iloc[0]
    labels = cells._unb64(excerpt["labels"], np.int16)
    shown = cells._unb64(view["values"], np.int8) / 127.0
    np.testing.assert_allclose(shown, np.tanh(labels), atol=0.01)


def test_labels_count_from_where_the_model_started_reading(tmp_path, artifacts):
    """Each window's state starts from zero at its warm-up, so the counter holds the characters read since the last
    newline *or since the warm-up began*: the labels must be that, not the line position from the split's start."""
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    model = load_checkpoint(line_counter_lstm(corpus) / "checkpoint.pt")
    ids = corpus.split("test")
    text = corpus.decode(ids)
    feature = features_for(PROSE, ["line_position"])
    windows = cells.Windows(text, ids, feature, common.settings(cells, None, {**SMALL, "warmup": 10}))
    counter = trace_windows(model, windows.batch, windows.warmup)["layers.0.c"][:, :, COUNTER]
    np.testing.assert_allclose(counter.ravel(), windows.labels["line_position"], atol=1e-3)
    from_split_start = feature[0].labels(text)[windows.positions].ravel()
    assert (from_split_start != windows.labels["line_position"]).sum() > 10  # lines begun before the warm-up


@pytest.mark.parametrize("newline_weight", [8.0, 0.0])
def test_ablation_measures_the_loss_the_cell_carries(tmp_path, artifacts, newline_weight):
    """With the newline's logit reading the counter, zeroing it raises the loss before line breaks by exactly what a
    model with that unit dead by its weights loses, beyond all 20 random cells; with nothing reading it, zeroing
    changes nothing. The caption's sentence follows."""
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    path = line_counter_lstm(corpus, size=24, step=0.02, newline_weight=newline_weight)
    df = cells.compute(ctx_for(features=["line_position"]))
    cell = df[df["record"] == "cell"].iloc[0]
    assert cell["best_cell"] == COUNTER and cell["n_random"] == 20

    # independently: the plain forward of the model, and of a copy whose counter never opens its input gate (c = 0)
    model = load_checkpoint(path / "checkpoint.pt")
    dead = load_checkpoint(path / "checkpoint.pt")
    with torch.no_grad():
        dead.layers[0].rnn.bias_ih_l0[COUNTER] = -1e4
    s = common.settings(cells, None, {**SMALL, "features": ["line_position"]})
    ids = corpus.split("test")
    windows = cells.Windows(corpus.decode(ids), ids, features_for(PROSE, ["line_position"]), s)
    batch = torch.from_numpy(windows.batch[windows.test_windows])
    focus = windows.focus["line_position"][windows.test_windows][:, : s["window"] - 1]

    def focus_loss(net):
        with torch.no_grad():
            logp = torch.log_softmax(net(batch), -1)[:, :-1].gather(-1, batch[:, 1:, None])[..., 0].numpy()
        return -logp[:, s["warmup"] : s["warmup"] + s["window"] - 1][focus].mean()  # row t predicts character t + 1

    assert cell["n_focus"] == focus.sum() > 5
    assert cell["lm_zero_best"] == pytest.approx(focus_loss(dead) - focus_loss(model), abs=1e-4)
    text = cells.caption(df)
    if newline_weight:
        assert cell["lm_zero_best"] > 0.5 and cell["lm_zero_vs_random"] == "above" and cell["lm_mean_best"] > 0.1
        assert cell["lm_zero_best_elsewhere"] < 0  # it also made a newline likely mid-line: gone, that loss falls
        assert f"predictions) the loss rises by {cell['lm_zero_best']:+.3f} nats, above all 20 random cells (" in text
        assert "raises the loss on the feature's characters beyond every random cell in 1 of 1 cases" in text
    else:
        assert abs(cell["lm_zero_best"]) < 1e-6 and abs(cell["lm_mean_best"]) < 1e-6
        assert "Zeroing the LSTM 1x24's cell 5 (c; 100% of its probe's gain over chance) moves" in text
        assert "predictions) the loss is unchanged (+0.000 nats), " in text and "above all 20" not in text
        assert "beyond every random cell in 0 of 1 cases" in text


def test_a_feature_held_by_too_few_windows_is_too_rare_to_name_a_cell(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    fake_neural_model(corpus, arch="lstm", size=6)
    common_ = cells.compute(ctx_for(features=["in_quotes"]))
    rare = cells.compute(ctx_for(features=["in_quotes"], min_windows=50))
    assert set(common_.loc[common_["record"] == "cell", "feature"]) == {"in_quotes"}
    assert "cell" not in set(rare["record"])  # no probe, no best cell
    note = rare.loc[(rare["record"] == "probe") & (rare["feature"] == "in_quotes"), "note"].iloc[0]
    assert re.fullmatch(r"too rare: [1-9]\d? training and \d+ test windows hold it, at least 50 and 1 needed", note)
    assert f"Too rare in the probed windows to name a cell: in_quotes ({note[len('too rare: ') :]})." in (
        cells.caption(rare)
    )
    assert "Too rare" not in cells.caption(common_)


def fake_table(control: float = 0.98, last10: float = 0.5, score: float = 0.9) -> pd.DataFrame:
    """One probe row and one cell row of a made-up model, every column the report reads."""
    s = cells.SETTINGS
    base = {"corpus": "fake", "arch": "lstm", "model": "LSTM 1x8", "model_id": "lstm-x", "seed": 0, "layers": 1,
            "size": 8, "layer": 0, "internal": "c", "feature": "in_quotes", "feature_kind": "binary",
            "metric": "balanced accuracy", "baseline": 0.5}  # fmt: skip
    probe = {"score": score, "control_trigram": 0.5}
    probe |= {"control": control, "selectivity": score - control, "selectivity_trigram": score - 0.5}
    probe |= {"control_informative": float(cells.control_informative(control, "binary", s["control_margin"])),
              "control_trigram_informative": 0.0, "last1": 0.5, "last3": 0.5, "last10": last10,
              "selectivity_last1": score - 0.5, "selectivity_last3": score - 0.5,
              "selectivity_last10": score - last10, "n_train": 1000, "n_test": 300}  # fmt: skip
    cell = {**probe, "probe_score": score, "best_cell": 3, "best_cell_score": 0.8, "best_cell_share": 0.75,
            "weight_cell": 3, "best_cell_weight_rank": 1, "random_cells": "0 1", "n_random": 2, "n_focus": 50,
            "lm_focus": 1.0, "paper_cell": "", "focus": "characters inside quotes", "found_at": 0.75,
            "found": 1.0}  # fmt: skip
    for how in ("zero", "mean"):
        cell |= {f"probe_{how}_best": 0.6, f"lm_{how}_best": 0.1, f"lm_{how}_best_elsewhere": 0.0,
                 f"probe_{how}_random_lo": 0.85, f"probe_{how}_random_median": 0.88, f"probe_{how}_random_hi": 0.9,
                 f"lm_{how}_random_lo": -0.01, f"lm_{how}_random_median": 0.0, f"lm_{how}_random_hi": 0.01,
                 f"probe_{how}_vs_random": "below", f"lm_{how}_vs_random": "above"}  # fmt: skip
    return pd.DataFrame([{**base, **probe, "record": "probe"}, {**base, **cell, "record": "cell"}])


def test_the_caption_keeps_a_control_only_where_it_is_informative():
    at_ceiling, informative = fake_table(control=0.98), fake_table(control=0.7)
    assert "the character control is informative for 0 of 1 probes (at its ceiling for 1, at its floor for 0)" in (
        cells.caption(at_ceiling)
    )
    assert "the character control is informative for 1 of 1 probes (at its ceiling for 0, at its floor for 0); " \
           "where it is, selectivity runs 0.20 to 0.20" in cells.caption(informative)  # fmt: skip
    assert np.isnan(cells.with_paper(at_ceiling)["selectivity (character)"].iloc[0])
    assert cells.with_paper(informative)["selectivity (character)"].iloc[0] == pytest.approx(0.2)


def test_the_caption_says_whether_the_state_reads_more_than_the_last_characters():
    ahead, level = cells.caption(fake_table(last10=0.6)), cells.caption(fake_table(last10=0.88))
    assert "the memory cell reads more (by over 0.05) for in_quotes (fake; LSTM 1x8 0.90 against 0.60, +0.30" in ahead
    assert "and no more for none." in ahead
    assert "reads more (by over 0.05) for no feature, and no more for in_quotes (fake; LSTM 1x8 0.90 against " \
           "0.88, +0.02" in level  # fmt: skip


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
    assert parens["score"].isna().all() and parens["note"].str.startswith("too rare: 0 training and 0 test").all()

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
