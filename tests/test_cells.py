"""The `cells` analysis: a hand-built line-counter cell is found, ranked first and confirmed by zeroing it; every
architecture gets the same probes; the result feeds the figure, findings, summary table, appendix and viewer; the
verdicts follow their rule; bad input is one line and exit 2."""

from __future__ import annotations

import re

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
from conftest import fake_corpus_file, fake_neural_model

from analyses import cells, cells_plot, cells_probing, common
from analyses.base import Result
from analyses.context import Context, model_index
from analyses.prose import sentence, unsupported_numbers
from charlm.checkpoint import load_checkpoint, load_payload, save_payload
from corpora import run_cli
from probes.activations import trace_windows
from probes.controls import control_informative
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
    return Context(model_index(), common.settings(cells.ANALYSIS, None, {**SMALL, **settings}))


def compute(**settings) -> Result:
    return cells.ANALYSIS.compute(ctx_for(**settings))


def records(result: Result, record: str) -> pd.DataFrame:
    return result.table[result.table["record"] == record].reset_index(drop=True)


def run_of(result: Result, array: str, row: pd.Series) -> np.ndarray:
    start = int(row["array_start"])
    return result.arrays[array][start : start + int(row["array_length"])]


def assert_numbers_supported(result: Result) -> None:
    frames = [result.table, *result.tables.values()]
    for f in result.findings:
        assert unsupported_numbers(sentence(f), frames) == [], sentence(f)
        assert len(sentence(f).split()) <= 30, sentence(f)


def test_the_hand_built_line_counter_is_found_ranked_first_and_confirmed_by_zeroing(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    line_counter_lstm(corpus)
    result = compute(features=["line_position", "in_quotes", "word_position"])
    df = result.table

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

    # the viewer's values are the cell's tanh(c) on its excerpt, which are the labels' tanh; no base64 anywhere
    view = df[(df["record"] == "viewer") & (df["feature"] == "line_position") & (df["rank"] == 1)].iloc[0]
    excerpt = df[(df["record"] == "excerpt") & (df["feature"] == "line_position")].iloc[0]
    labels = run_of(result, "excerpt_labels", excerpt)
    np.testing.assert_allclose(run_of(result, "viewer_values", view) / 127.0, np.tanh(labels), atol=0.01)
    assert not {"values", "text", "labels"} & set(df.columns)

    # the one LSTM is the headline: the paper's line-length cell is reproduced
    (line,) = [f for f in result.findings if f.claim == "cells-line-length"]
    assert line.verdict == "reproduced" and line.corpus == "fake"
    assert sentence(line).startswith(
        "fake: a single cell alone tracks line_position (R^2 at least 0.5) in 1 of 1 LSTM, "
    )
    assert_numbers_supported(result)


def test_labels_count_from_where_the_model_started_reading(tmp_path, artifacts):
    """Each window's state starts from zero at its warm-up, so the counter holds the characters read since the last
    newline *or since the warm-up began*: the labels must be that, not the line position from the split's start."""
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    model = load_checkpoint(line_counter_lstm(corpus) / "checkpoint.pt")
    ids = corpus.split("test")
    text = corpus.decode(ids)
    feature = features_for(PROSE, ["line_position"])
    s = common.settings(cells.ANALYSIS, None, {**SMALL, "warmup": 10})
    windows = cells_probing.Windows(text, ids, feature, s)
    counter = trace_windows(model, windows.batch, windows.warmup)["layers.0.c"][:, :, COUNTER]
    np.testing.assert_allclose(counter.ravel(), windows.labels["line_position"], atol=1e-3)
    from_split_start = feature[0].labels(text)[windows.positions].ravel()
    assert (from_split_start != windows.labels["line_position"]).sum() > 10  # lines begun before the warm-up


@pytest.mark.parametrize("newline_weight", [8.0, 0.0])
def test_ablation_measures_the_loss_the_cell_carries(tmp_path, artifacts, newline_weight):
    """With the newline's logit reading the counter, zeroing it raises the loss before line breaks by exactly what a
    model with that unit dead by its weights loses, beyond all 20 random cells; with nothing reading it, zeroing
    changes nothing. The ablation's finding counts it."""
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    path = line_counter_lstm(corpus, size=24, step=0.02, newline_weight=newline_weight)
    result = compute(features=["line_position"])
    cell = records(result, "cell").iloc[0]
    assert cell["best_cell"] == COUNTER and cell["n_random"] == 20

    # independently: the plain forward of the model, and of a copy whose counter never opens its input gate (c = 0)
    model = load_checkpoint(path / "checkpoint.pt")
    dead = load_checkpoint(path / "checkpoint.pt")
    with torch.no_grad():
        dead.layers[0].rnn.bias_ih_l0[COUNTER] = -1e4
    s = common.settings(cells.ANALYSIS, None, {**SMALL, "features": ["line_position"]})
    ids = corpus.split("test")
    windows = cells_probing.Windows(corpus.decode(ids), ids, features_for(PROSE, ["line_position"]), s)
    batch = torch.from_numpy(windows.batch[windows.test_windows])
    focus = windows.focus["line_position"][windows.test_windows][:, : s["window"] - 1]

    def focus_loss(net):
        with torch.no_grad():
            logp = torch.log_softmax(net(batch), -1)[:, :-1].gather(-1, batch[:, 1:, None])[..., 0].numpy()
        return -logp[:, s["warmup"] : s["warmup"] + s["window"] - 1][focus].mean()  # row t predicts character t + 1

    assert cell["n_focus"] == focus.sum() > 5
    assert cell["lm_zero_best"] == pytest.approx(focus_loss(dead) - focus_loss(model), abs=1e-4)
    (ablation,) = [sentence(f) for f in result.findings if "zeroing a best cell" in f.template]
    corpus_row = result.tables["corpora"].iloc[0]
    if newline_weight:
        assert cell["lm_zero_best"] > 0.5 and cell["lm_zero_vs_random"] == "above" and cell["lm_mean_best"] > 0.1
        assert cell["lm_zero_best_elsewhere"] < 0  # it also made a newline likely mid-line: gone, that loss falls
        assert corpus_row["zero_above"] == 1 and corpus_row["mean_above"] == 1
        assert "beyond all 20 random cells in 1 of 1 cases, and lowers it below all in 0" in ablation
    else:
        assert abs(cell["lm_zero_best"]) < 1e-6 and abs(cell["lm_mean_best"]) < 1e-6
        assert cell["lm_zero_vs_random"] == "inside" and corpus_row["zero_inside"] == 1
        assert "beyond all 20 random cells in 0 of 1 cases" in ablation
    assert_numbers_supported(result)


def test_a_feature_held_by_too_few_windows_is_too_rare_to_name_a_cell(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    fake_neural_model(corpus, arch="lstm", size=6)
    common_, rare = compute(features=["in_quotes"]), compute(features=["in_quotes"], min_windows=50)
    assert set(records(common_, "cell")["feature"]) == {"in_quotes"}
    assert "cell" not in set(rare.table["record"])  # no probe, no best cell
    note = rare.table.loc[(rare.table["record"] == "probe") & (rare.table["feature"] == "in_quotes"), "note"].iloc[0]
    assert re.fullmatch(r"too rare: [1-9]\d? training and \d+ test windows hold it, at least 50 and 1 needed", note)
    (quotes,) = [f for f in rare.findings if f.claim == "cells-quotes"]
    train, test = (int(x) for x in re.findall(r"\d+", note)[:2])
    assert quotes.verdict == "untested" and sentence(quotes) == (
        f"fake: in_quotes untested: too rare in the probed windows ({train} training and {test} test windows hold "
        "it; 50 and 1 needed)"
    )
    assert [f.verdict for f in common_.findings if f.claim == "cells-quotes"] != ["untested"]
    assert cells.ANALYSIS.plot(rare) is None  # nothing to draw: the finding says why
    assert_numbers_supported(rare)


# ------------------------------------------------------------------------------------------ constructed cases


def fake_frames(
    control: float = 0.98,
    last10: float = 0.5,
    score: float = 0.9,
    cells_alone=(0.8,),
    archs=("lstm",),
    headline: int = 0,
) -> dict[str, pd.DataFrame]:
    """Made-up records of one corpus ("fake") and feature (in_quotes, Fig 2's quote cell): one probe row and one
    cell row per model, model k of architecture archs[k] with a best single cell scoring cells_alone[k]; and the
    models table, model `headline` the headline."""
    s = cells.SETTINGS
    probes, cells_, models = [], [], []
    for k, (arch, alone) in enumerate(zip(archs, cells_alone)):
        base = {"corpus": "fake", "arch": arch, "model": f"M{k}", "model_id": f"m{k}", "seed": 0, "layers": 1,
                "size": 8, "layer": 0, "internal": "c", "feature": "in_quotes", "feature_kind": "binary",
                "metric": "balanced accuracy", "baseline": 0.5}  # fmt: skip
        probe = {"score": score, "control_trigram": 0.5}
        probe |= {"control": control, "selectivity": score - control, "selectivity_trigram": score - 0.5}
        probe |= {"control_informative": float(control_informative(control, "binary", s["control_margin"])),
                  "control_trigram_informative": 0.0, "last1": 0.5, "last3": 0.5, "last10": last10,
                  "selectivity_last1": score - 0.5, "selectivity_last3": score - 0.5,
                  "selectivity_last10": score - last10, "n_train": 1000, "n_test": 300}  # fmt: skip
        cell = {**probe, "probe_score": score, "best_cell": 3, "best_cell_score": alone, "best_cell_share": 0.75,
                "weight_cell": 3, "best_cell_weight_rank": 1, "random_cells": "0 1", "n_random": 2, "n_focus": 50,
                "lm_focus": 1.0, "paper_cell": "a cell that turns on inside quotes", "found_at": 0.75,
                "found": float(alone >= 0.75)}  # fmt: skip
        for how in ("zero", "mean"):
            cell |= {f"probe_{how}_best": 0.6, f"lm_{how}_best": 0.1, f"lm_{how}_best_elsewhere": 0.0,
                     f"probe_{how}_random_lo": 0.85, f"probe_{how}_random_median": 0.88,
                     f"probe_{how}_random_hi": 0.9, f"lm_{how}_random_lo": -0.01, f"lm_{how}_random_median": 0.0,
                     f"lm_{how}_random_hi": 0.01, f"probe_{how}_vs_random": "below",
                     f"lm_{how}_vs_random": "above"}  # fmt: skip
        probes.append({**base, **probe})
        cells_.append({**base, **cell})
        models.append({"corpus": "fake", "model_id": f"m{k}", "model": f"M{k}", "arch": arch, "layers": 1 + k,
                       "size": 8 * (k + 1), "budget": 64.0, "seed": 0, "chars_trained": 2_500_000 * (k + 1),
                       "headline": int(k == headline)})  # fmt: skip
    excerpt = pd.DataFrame([{"corpus": "fake", "feature": "in_quotes", "feature_kind": "binary", "window_start": 0,
                             "paper_cell": "a cell that turns on inside quotes", "array_length": 0}])  # fmt: skip
    return {"excerpt": excerpt, "probe": pd.DataFrame(probes), "cell": pd.DataFrame(cells_),
            "models": pd.DataFrame(models)}  # fmt: skip


def fake_result(**kwargs) -> Result:
    frames = fake_frames(**kwargs)
    models = frames.pop("models")
    features = cells.feature_table(frames, models, cells.SETTINGS)
    corpora_ = cells.corpus_table(frames, models, features, cells.SETTINGS)
    archs = cells.architecture_table(frames)
    tables = {"features": features, "corpora": corpora_, "architectures": archs, "models": models}
    return Result(cells.tidy(frames), cells.findings(features, corpora_, archs), tables)


def test_levys_ablations_are_pooled_and_every_other_architecture_is_counted_as_itself():
    """The pooled row holds Levy's four ablations only (charlm.archs' `ablation` records); a minGRU or a ladder rung
    is neither one of them nor left out: the finding counts it under its own name."""
    archs = ("lstm", "lstm-srnn", "lstm-gates", "mingru", "cbow")
    result = fake_result(archs=archs, cells_alone=(0.8, 0.8, 0.6, 0.9, 0.6))
    archs = result.tables["architectures"].set_index("arch")
    assert archs.loc["lstm ablations", ["models", "pairs", "found"]].tolist() == [2, 2, 1]
    assert archs.loc["mingru", "found"] == 1 and archs.loc["cbow", "found"] == 0
    (line,) = [sentence(f) for f in result.findings if "a single cell passes in" in f.template]
    assert "1 of 2 Levy's ablations" in line and "1 of 1 minGRU" in line and "0 of 1 CBOW" in line
    assert cells_plot._family("minlstm") == "others" and cells_plot._family("lstm-srnn-hidden") == "Levy's ablations"


def test_logistic_probes_that_ended_unconverged_are_counted_per_corpus_and_said_only_when_there_are_some():
    def unconverged(counts):
        frames = fake_frames(archs=("lstm", "gru"), cells_alone=(0.8, 0.6))
        frames["probe"]["unconverged_fits"] = counts
        models = frames.pop("models")
        features = cells.feature_table(frames, models, cells.SETTINGS)
        corpora_ = cells.corpus_table(frames, models, features, cells.SETTINGS)
        said = [sentence(f) for f in cells.findings(features, corpora_, cells.architecture_table(frames))]
        return corpora_.iloc[0], [line for line in said if "unconverged" in line]

    row, lines = unconverged([3, 0])
    assert (row["logistic_probes"], row["unconverged_probes"]) == (2, 1)
    assert lines == [
        "fake: 1 of 2 logistic probes had an lbfgs fit (of a fold, a strength or a control) stop unconverged, at its "
        "300-iteration cap or a failed line search; their scores stand as fitted (column unconverged_fits)"
    ]
    assert unconverged([0, 0])[1] == []


@pytest.mark.parametrize(
    "archs, alone, headline, verdict",
    [
        (("lstm", "lstm"), (0.8, 0.6), 0, "reproduced"),  # the headline LSTM has the cell
        (("lstm", "lstm"), (0.8, 0.6), 1, "partly"),  # another LSTM has it, the headline not
        (("lstm", "gru"), (0.6, 0.9), 0, "not reproduced"),  # no LSTM has it (a GRU does)
        (("gru", "rnn"), (0.9, 0.9), 0, "untested"),  # no LSTM probed
    ],
)
def test_the_verdict_on_a_fig2_cell_follows_its_rule(archs, alone, headline, verdict):
    result = fake_result(archs=archs, cells_alone=alone, headline=headline)
    (quotes,) = [f for f in result.findings if f.claim == "cells-quotes"]
    assert quotes.verdict == verdict and quotes.corpus == "fake"
    text = sentence(quotes)
    if verdict == "reproduced":
        assert text == ("fake: a single cell alone tracks in_quotes (balanced accuracy at least 0.75) in 1 of 2 LSTMs, "
                        "the headline M0 among them; best 0.80 (M0)")  # fmt: skip
    elif verdict == "partly":
        assert "in 1 of 2 LSTMs, the headline M1 not among them; best 0.80 (M0)" in text
    elif verdict == "not reproduced":
        assert text == ("fake: no single cell of 1 LSTM alone tracks in_quotes (balanced accuracy at least 0.75); "
                        "best 0.60 (M0)")  # fmt: skip
    else:
        assert (
            text == "fake: in_quotes untested: no LSTM was probed; the best single cell of any model reaches 0.90 (M0)"
        )
    assert_numbers_supported(result)


def test_the_model_facts_come_from_the_index_not_from_words():
    """Depth, width and characters read are the models' own (the old text called every model 1-layer and briefly
    trained, whatever they were)."""
    result = fake_result(archs=("lstm", "lstm", "gru"), cells_alone=(0.8, 0.8, 0.8))
    (facts,) = [sentence(f) for f in result.findings if "models probed" in f.template]
    assert facts == ("fake: 3 models probed, the lowest seed of each configuration: depth 1 to 3, width 8 to 24, "
                     "trained on 2 to 8 million characters")  # fmt: skip
    one = fake_result(archs=("lstm",))
    (facts,) = [sentence(f) for f in one.findings if "models probed" in f.template]
    assert facts.endswith("depth 1, width 8, trained on 2 million characters")  # fmt: skip
    assert_numbers_supported(result)


def test_a_control_is_counted_only_where_it_is_informative():
    at_ceiling, informative = fake_result(control=0.98), fake_result(control=0.7)
    assert at_ceiling.tables["corpora"].iloc[0][["char_informative", "char_ceiling", "char_floor"]].tolist() == [
        0,
        1,
        0,
    ]
    (text,) = [sentence(f) for f in at_ceiling.findings if "control" in f.template]
    assert text.startswith("fake: Hewitt and Liang's character control is informative for 0 of 1 probes, the trigram")
    (text,) = [sentence(f) for f in informative.findings if "control" in f.template]
    assert "informative for 1 of 1 probes (median selectivity 0.20), the trigram control for 0;" in text
    assert_numbers_supported(informative)


def test_the_findings_say_whether_the_state_reads_more_than_the_last_characters():
    ahead, level = fake_result(last10=0.6), fake_result(last10=0.88)
    (text,) = [sentence(f) for f in ahead.findings if "last" in f.template]
    assert text == "fake: the state's probe beats a probe on the last 10 characters by over 0.05 for 1 of 1 features " \
                   "in some model"  # fmt: skip
    (text,) = [sentence(f) for f in level.findings if "last" in f.template]
    assert text.endswith("for 0 of 1 features in some model; not for in_quotes")
    assert ahead.tables["features"].iloc[0]["lead"] == pytest.approx(0.3)


# ------------------------------------------------------------------------------------------ the whole analysis


def test_every_architecture_gets_the_same_probes_and_the_result_feeds_every_view(tmp_path, artifacts, monkeypatch):
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    archs = ["rnn", "gru", "lstm", "lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "lstm-gates"]
    for arch in archs:
        fake_neural_model(corpus, arch=arch, size=6)
    fake_neural_model(corpus, arch="lstm", size=6, seed=1)  # a second seed: not probed with seeds = 1
    fake_neural_model(corpus, arch="gru", size=5, layers=2)  # every layer of a deeper model
    features = ["line_position", "in_quotes", "in_parens"]
    ctx = ctx_for(features=features)
    parts = cells.ANALYSIS.parts(ctx)
    assert len(parts) == len(archs) + 1  # one part per probed model
    assert not any(cells.ANALYSIS.part_cached(ctx, part) for part in parts)  # a cold cache: each priced as computed
    cells.ANALYSIS.compute_part(ctx, parts[0])
    assert [cells.ANALYSIS.part_cached(ctx, part) for part in parts] == [True] + [False] * len(archs)
    for part in parts[1:]:  # the pipeline's jobs: each model probed into the cache compute reads
        cells.ANALYSIS.compute_part(ctx, part)
    assert all(cells.ANALYSIS.part_cached(ctx, part) for part in parts)
    # the estimate's view (reports.sections.cached_parts) is the cache's: other settings are another key
    from reports.sections import cached_parts

    wanted = sorted(model_index()["model_id"])
    settings = {**SMALL, "features": features}
    assert cached_parts(["cells"], wanted, {"cells": settings}) == {f"cells:{p}" for p in parts}
    assert cached_parts(["cells"], wanted, {"cells": {**settings, "windows": 9}}) == set()
    assert cached_parts(["cells", "saturation"], wanted, {"cells": settings}) == {f"cells:{p}" for p in parts}
    monkeypatch.setattr(cells_probing, "probe_model", lambda *a, **k: pytest.fail("a cached model was probed again"))
    result = cells.ANALYSIS.compute(ctx_for(features=features))
    df = result.table

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

    # the models' facts are the index's; the claims of Fig 2 on prose text are the quote and line-length cells
    models = result.tables["models"]
    assert len(models) == len(archs) + 1 and models["headline"].sum() == 1
    assert models.loc[models["headline"] == 1, "arch"].item() == "lstm"
    assert {f.claim for f in result.findings} - {None} == {"cells-quotes", "cells-line-length"}
    assert {f.claim for f in result.findings} - {None} <= {c.id for c in cells.ANALYSIS.claims}
    assert_numbers_supported(result)

    # every view reads the result as it is saved and read back (no base64: the arrays are the npz's)
    result.save(tmp_path / "data", "cells")
    back = Result.load(tmp_path / "data", "cells")
    assert (tmp_path / "data" / "cells.npz").exists() and set(back.tables) == set(result.tables)
    fig = cells.ANALYSIS.plot(back)
    assert isinstance(fig, matplotlib.figure.Figure)
    width, height = fig.get_size_inches()
    assert width <= 7.5 and height <= 9.0 and len([a for a in fig.axes if a.has_data()]) <= 8
    matplotlib.pyplot.close(fig)
    summary = cells.ANALYSIS.summary_table(back)
    assert len(summary) == 3 and len(summary) <= 15 and "Fig 2" in summary.columns
    appendix = cells.ANALYSIS.appendix(back)
    assert appendix and all(len(t) == len(archs) + 1 for t in appendix.values())  # a row per probed model
    fragment = cells.ANALYSIS.html(back)
    assert fragment == cells.ANALYSIS.html(result)
    assert fragment.count('class="cells-viewer"') == 1 and "- S-RNN - HIDDEN 1x6" in fragment
    again = cells.ANALYSIS.compute(ctx_for(features=features))
    pd.testing.assert_frame_equal(again.table, df, check_dtype=False)


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


def test_cli_writes_the_table_figure_and_findings(tmp_path, artifacts, capsys):
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    line_counter_lstm(corpus)
    args = ["--corpus", corpus.source] + [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
    out, figure = tmp_path / "cells.csv", tmp_path / "cells.png"
    assert run_cli(cells.main, [*args, "--set", 'features=["line_position"]', "--out", str(out), "--figure",
                                str(figure)]) == 0  # fmt: skip
    assert out.exists() and figure.exists()
    assert "fake: a single cell alone tracks line_position" in capsys.readouterr().out


def test_cli_without_models_names_the_command(tmp_path, artifacts, capsys):
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    assert run_cli(cells.main, ["--corpus", corpus.source]) == 2
    assert f"python -m reports --corpus {corpus.source}" in capsys.readouterr().err  # trains on the user's text
