"""The memory cell as a weighted sum (Levy et al. eq. 8): the identity against the recurrence, spans and weights of a
cell whose gates are known constants worked out by hand, the GRU as a weighted average, and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import fake_corpus_file, fake_neural_model
from test_saturation import edit_weights, force_gates

from analyses import common, weighted_sum, weighted_sum_plot
from analyses.base import Result
from analyses.context import Context, MissingInput, model_index
from analyses.prose import sentence, unsupported_numbers
from charlm.model import GATED_ARCHS, memory_weights
from corpora import run_cli

FAST = {"start": 20, "length": 300, "warmup": 20, "check_length": 100, "window": 25, "lags": 10, "sentence_length": 12}


def _ctx(**settings) -> Context:
    return Context(model_index(), common.settings(weighted_sum, None, FAST | settings))


def logit(p):
    return float(np.log(p / (1 - p)))


# ------------------------------------------------------------------------------------------ the functions


def test_the_weighted_sum_reproduces_the_recurrence_with_a_carried_state():
    """c_t = f_t c_{t-1} + i_t ctilde_t from c_0, stepped by hand, equals eq. 8 plus (prod f) c_0."""
    rng = np.random.default_rng(0)
    T, H = 30, 5
    i, f, content, c0 = rng.random((T, H)), rng.random((T, H)), rng.normal(size=(T, H)), rng.normal(size=H)
    c, states = c0, []
    for t in range(T):
        c = f[t] * c + i[t] * content[t]
        states.append(c)
    w, carried, recon = weighted_sum.weighted_sum(i, f, content, c0)
    np.testing.assert_allclose(recon, np.array(states), rtol=0, atol=1e-12)
    np.testing.assert_allclose(carried[-1], np.prod(f, 0))
    assert w[5, 3].sum() == 0 and w[3, 3] == pytest.approx(i[3])  # no weight on the future; w_t^t = i_t
    np.testing.assert_allclose(w[2, 6], i[2] * f[3] * f[4] * f[5] * f[6])
    # the GRU: write z, keep 1 - z; weights and the carried term sum to one (a weighted average)
    z = rng.random((T, H))
    w, carried, _ = weighted_sum.weighted_sum(z, 1 - z, content, c0)
    np.testing.assert_allclose(w.sum(0) + carried, 1.0, atol=1e-12)


def test_constant_forget_gate_spans_and_retention_by_hand():
    f = np.full((1000, 3), 0.9)
    span, arithmetic = weighted_sum.memory_span(f)
    np.testing.assert_allclose(span, -1 / np.log(0.9))  # 9.49 characters: e-folding of 0.9^d
    np.testing.assert_allclose(arithmetic, span)
    varying = np.tile([[0.5], [0.99]], (500, 1))  # alternating forget gates: the arithmetic mean overestimates
    geo, ari = weighted_sum.memory_span(varying)
    assert geo[0] == pytest.approx(-1 / np.mean(np.log([0.5, 0.99])))
    assert ari[0] == pytest.approx(-1 / np.log(0.745)) and ari[0] > geo[0]
    kept = weighted_sum.retention(np.full((20, 3), 0.5), np.full((20, 3), 0.9), lags=4)
    np.testing.assert_allclose(kept, sum(0.5 * 0.9**d for d in range(1, 5)))
    assert kept.shape == (16,)


def test_retention_agrees_with_memory_weights():
    rng = np.random.default_rng(1)
    i, f = rng.random((40, 6)), rng.random((40, 6))
    w = memory_weights(torch.from_numpy(i)[None], torch.from_numpy(f)[None])[0].numpy()  # (j, t, H)
    norms = np.sqrt((w**2).mean(-1))
    expected = [norms[j, j + 1 : j + 8].sum() for j in range(40 - 7)]
    np.testing.assert_allclose(weighted_sum.retention(i, f, lags=7), expected)


def test_the_diagonal_is_largest_unless_an_old_write_outweighs_the_new_one():
    i, f = np.array([[1.0], [0.1], [0.9]]), np.array([[0.5], [0.9], [0.5]])
    w, _, _ = weighted_sum.weighted_sum(i, f, np.ones((3, 1)), np.zeros(1))
    # t = 1: w_0^1 = 1 * 0.9 > w_1^1 = 0.1; t = 2: w_2^2 = 0.9 > w_0^2 = 0.45 > w_1^2 = 0.05
    np.testing.assert_array_equal(weighted_sum.diagonal_largest(w), [False, True])


def test_the_heatmap_sentence_starts_a_sentence_or_a_line():
    assert weighted_sum.sentence_start(b"and so. The end of it all", 5) == 8
    assert weighted_sum.sentence_start(b"x = 1;\n\tint y;\nreturn", 4) == 15  # code: first non-blank line start
    assert weighted_sum.sentence_start(b"no boundary here", 4) == 0
    assert weighted_sum.sentence_start(b"a. Bc", 4) == 0  # "Bc" leaves no room for 4 characters


# ------------------------------------------------------------------------------------------ on models


def test_a_known_constant_forget_gate_gives_the_spans_and_weights_by_hand(tmp_path, artifacts):
    """LSTM with i = 0.5 and a per-cell constant f_h: span_h = -1 / ln f_h, rms w_j^t = 0.5 sqrt(mean_h f_h^2(t-j)),
    the carried-state row prod f = f_h^(t+1), retention = sum_d rms(0.5 f^d)."""
    corpus = fake_corpus_file(tmp_path)
    H = 8
    forget = np.linspace(0.5, 0.99, H)
    model = fake_neural_model(corpus, arch="lstm", size=H)

    def constant_gates(state):
        force_gates(state, "layers.0.rnn", [0.0, 0.0, None, 0.0])  # i = o = 0.5; the content stays random
        state["layers.0.rnn.bias_ih_l0"][H : 2 * H] = torch.tensor([logit(p) for p in forget])

    edit_weights(model, constant_gates)
    df = weighted_sum.compute(_ctx())
    spans = df[df["measure"] == "span"].sort_values("cell")["value"].to_numpy()
    np.testing.assert_allclose(spans, -1 / np.log(forget), rtol=1e-4)
    rms = lambda d: 0.5 * np.sqrt(np.mean(forget ** (2 * d)))  # noqa: E731
    heat = df[df["measure"] == "weight"]
    inside = heat[heat["j"] >= 0]
    np.testing.assert_allclose(inside["value"], [rms(d) for d in inside["t"] - inside["j"]], rtol=1e-4)
    carried = heat[heat["j"] == -1].sort_values("t")
    np.testing.assert_allclose(carried["value"], [np.sqrt(np.mean(forget ** (2 * (t + 1)))) for t in carried["t"]],
                               rtol=1e-4)  # fmt: skip
    assert len(carried) == FAST["sentence_length"] and len(inside) == 12 * 13 // 2
    kept = df[df["measure"] == "retention"]
    np.testing.assert_allclose(kept["value"], sum(rms(d) for d in range(1, FAST["lags"] + 1)), rtol=1e-4)
    assert kept["steps"].sum() == FAST["length"] - FAST["lags"]  # every position with `lags` steps after it
    scalars = df[df["count"].isna() & df["cell"].isna() & df["t"].isna()].set_index("measure")["value"]
    assert scalars["diagonal"] == 1.0  # 0.5 > 0.5 f^d: the current character always weighs most
    assert scalars["identity_error"] < 1e-5


def test_a_gru_with_a_constant_update_gate_is_a_weighted_average_by_hand(tmp_path, artifacts):
    """torch's z' = 0.8 is the papers' z = 0.2: weights 0.2 * 0.8^(t-j), span -1 / ln 0.8 = 4.48 characters."""
    corpus = fake_corpus_file(tmp_path)
    model = fake_neural_model(corpus, arch="gru", size=6)
    edit_weights(model, lambda s: force_gates(s, "layers.0.rnn", [None, logit(0.8), None]))  # order r, z', n
    df = weighted_sum.compute(_ctx())
    np.testing.assert_allclose(df[df["measure"] == "span"]["value"], -1 / np.log(0.8), rtol=1e-4)
    inside = df[(df["measure"] == "weight") & (df["j"] >= 0)]
    np.testing.assert_allclose(inside["value"], 0.2 * 0.8 ** (inside["t"] - inside["j"]), rtol=1e-4)
    scalars = df[df["measure"].isin(["identity_error", "sum_error"])].set_index("measure")["value"]
    assert scalars["identity_error"] < 1e-5 and scalars["sum_error"] < 1e-12


def test_the_identity_holds_on_random_weights_of_every_architecture(tmp_path, artifacts):
    """Weights scaled up from the small init, so the gates swing over (0, 1): eq. 8 still reproduces the traced state
    to float32 tolerance, from the state carried into each window."""
    corpus = fake_corpus_file(tmp_path)
    for arch in GATED_ARCHS:
        model = fake_neural_model(corpus, arch=arch, size=8)
        edit_weights(model, lambda s: [p.mul_(25.0) for p in s.values()])
    df = weighted_sum.compute(_ctx())
    scalars = df[df["measure"].isin(["identity_error", "state_max"])].pivot(index="arch", columns="measure",
                                                                            values="value")  # fmt: skip
    assert set(scalars.index) == set(GATED_ARCHS)
    assert (scalars["identity_error"] < 1e-5 * np.maximum(1.0, scalars["state_max"])).all(), scalars
    layers = weighted_sum.per_layer(df)
    assert layers["identity_holds"].all() and layers["sum_holds"].dropna().astype(bool).all()
    found = {f.claim: f for f in weighted_sum.findings(weighted_sum.summary(layers, df)) if f.claim}
    n = len(GATED_ARCHS)
    assert found["ws-eq8"].verdict == "reproduced" and f"in {n} of {n} layers of {n} models" in sentence(
        found["ws-eq8"]
    )
    assert found["ws-gru-average"].verdict == "reproduced"
    # The heatmap is aligned with the text: rms of i_j prod_{k=j+1..t} f_k from the LSTM's own trace, by hand.
    ctx = _ctx()
    row = ctx.models(arch="lstm").iloc[0]
    trace = ctx.trace(row, "test", FAST["start"], FAST["length"], warmup=FAST["warmup"])  # row r: after char r
    text = ctx.text(row, "test")[FAST["start"] : FAST["start"] + FAST["length"]]
    p = weighted_sum.sentence_start(text, FAST["sentence_length"])
    i, f = (trace[f"layers.0.{name}"].astype(np.float64)[p:] for name in ("i", "f"))
    heat = df[(df["arch"] == "lstm") & (df["measure"] == "weight") & (df["j"] >= 0)]
    for _, cell in heat.sample(20, random_state=0).iterrows():
        j, t = int(cell["j"]), int(cell["t"])
        w = i[j] * np.prod(f[j + 1 : t + 1], axis=0)
        assert cell["value"] == pytest.approx(np.sqrt(np.mean(w**2)), rel=1e-5)
        assert cell["char"] == weighted_sum.printable(text[p + j])
    fig = weighted_sum.plot(df)
    assert len([ax for ax in fig.axes if ax.images]) == 2  # the headline LSTM and - S-RNN - OUT, not every model
    width, height = fig.get_size_inches()
    assert width <= 7.5 and height <= 9.0
    # the same table with one layer whose traced state is not its gates' recurrence: the check says it fails there
    broken = df.copy()
    at = (broken["arch"] == "lstm") & (broken["measure"] == "identity_error")
    broken.loc[at, "value"] = 0.5
    layers = weighted_sum.per_layer(broken).set_index("model")
    assert not layers.loc["LSTM 1x8", "identity_holds"] and layers.drop("LSTM 1x8")["identity_holds"].all()
    (eq8,) = [
        f for f in weighted_sum.findings(weighted_sum.summary(layers.reset_index(), broken)) if f.claim == "ws-eq8"
    ]
    assert eq8.verdict == "not reproduced" and f"in {n - 1} of {n} layers" in sentence(eq8)


def test_the_heatmaps_are_the_headline_lstm_and_levy_s_history_free_ablation():
    """Per corpus: the headline LSTM (largest budget row, deepest, lowest seed) and the headline - S-RNN - OUT (the
    appendix's model), else the first history-free ablation there; never every model."""

    def table(rows):
        return pd.DataFrame([{"corpus": "c", "arch": a, "layers": n, "size": 8, "budget": b, "seed": seed,
                              "model_id": f"m{k}"} for k, (a, n, b, seed) in enumerate(rows)])  # fmt: skip

    models = table([("lstm", 1, 64, 0), ("lstm", 2, 64, 1), ("lstm", 2, 64, 0), ("lstm-srnn-out", 1, 64, 0),
                    ("lstm-srnn", 1, 64, 0), ("gru", 3, 128, 0)])  # fmt: skip
    assert weighted_sum_plot.heatmap_models(models) == [("c", ["m2", "m3"])]
    assert weighted_sum_plot.heatmap_models(models[models["arch"] != "lstm-srnn-out"]) == [("c", ["m2", "m4"])]
    assert weighted_sum_plot.heatmap_models(models[models["arch"] == "gru"]) == [("c", ["m5"])]


def test_a_model_without_a_memory_cell_is_one_clear_line_and_exit_2(tmp_path, artifacts, capsys):
    corpus = fake_corpus_file(tmp_path)
    fake_neural_model(corpus, arch="lstm-gates", size=8)
    fake_neural_model(corpus, arch="lstm", size=8)
    with pytest.raises(MissingInput, match="lstm-gates has no gated memory cell"):
        weighted_sum.compute(_ctx(archs=["lstm-gates"]))
    assert run_cli(weighted_sum.main, ["--corpus", corpus.source, "--set", "archs=rnn"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rnn has no gated memory cell" in err[0]


@pytest.mark.parametrize(
    "setting, message",
    [("length=100000", "does not fit the test split"), ("start=0", "start must be at least 1"),
     ("check_length=5000", "check_length must be between"), ("lags=abc", "lags must be an integer")],
)  # fmt: skip
def test_bad_settings_exit_2_with_one_line(tmp_path, artifacts, capsys, setting, message):
    corpus = fake_corpus_file(tmp_path)
    fake_neural_model(corpus, arch="lstm", size=8)
    assert run_cli(weighted_sum.main, ["--corpus", corpus.source, "--set", setting]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_every_layer_has_its_own_spans(tmp_path, artifacts):
    """2 layers with forget gates 0.9 and 0.5: spans -1 / ln 0.9 = 9.49 and -1 / ln 0.5 = 1.44, per layer."""
    corpus = fake_corpus_file(tmp_path)
    model = fake_neural_model(corpus, arch="lstm", layers=2, size=4)

    def gates(state):
        force_gates(state, "layers.0.rnn", [None, logit(0.9), None, None])
        force_gates(state, "layers.1.rnn", [None, logit(0.5), None, None])

    edit_weights(model, gates)
    df = weighted_sum.compute(_ctx())
    spans = df[df["measure"] == "span"].groupby("layer")["value"]
    np.testing.assert_allclose(spans.min(), [-1 / np.log(0.9), -1 / np.log(0.5)], rtol=1e-4)
    np.testing.assert_allclose(spans.max(), spans.min(), rtol=1e-4)
    layers = weighted_sum.per_layer(df)
    assert list(layers["layer"]) == [1, 2] and layers["identity_holds"].all()
    np.testing.assert_allclose(layers["span_median"], [-1 / np.log(0.9), -1 / np.log(0.5)], rtol=1e-4)


def test_the_cli_writes_a_table_the_report_can_read_back(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path)
    fake_neural_model(corpus, arch="gru", size=6)
    out, figure = tmp_path / "ws.csv", tmp_path / "ws.png"
    args = ["--corpus", corpus.source, "--out", str(out), "--figure", str(figure)]
    assert run_cli(weighted_sum.main, args + [f"--set={k}={v}" for k, v in FAST.items()]) == 0
    assert figure.stat().st_size > 0
    table = pd.read_csv(out)
    assert set(table["measure"]) >= {"identity_error", "sum_error", "diagonal", "span", "weight", "retention"}
    found = weighted_sum.findings(weighted_sum.summary(weighted_sum.per_layer(table), table))
    assert "ws-gru-average" in {f.claim for f in found}


@pytest.mark.parametrize(
    "holds, of, expected",
    [(4, 4, "reproduced"), (2, 4, "partly"), (1, 4, "not reproduced"), (0, 0, "untested")],
)
def test_the_verdict_rule(holds, of, expected):
    assert weighted_sum.verdict(holds, of) == expected


def test_every_finding_states_only_numbers_its_tables_hold(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path)
    for arch, layers in (("lstm", 1), ("lstm", 2), ("gru-paper", 1), ("lstm-srnn-out", 1)):
        fake_neural_model(corpus, arch=arch, layers=layers, size=8)
    result = weighted_sum.ANALYSIS.compute(_ctx())
    assert isinstance(result, Result) and set(result.tables) == {"summary"}
    assert {f.claim for f in result.findings} >= {c.id for c in weighted_sum.ANALYSIS.claims}
    frames = [result.table, *result.tables.values()]
    for f in result.findings:
        assert unsupported_numbers(sentence(f), frames) == [], sentence(f)
        assert len(sentence(f).split()) <= 30, sentence(f)
    assert len(weighted_sum.ANALYSIS.summary_table(result)) <= 15
    (appendix,) = weighted_sum.ANALYSIS.appendix(result).values()
    assert len(appendix) == 5  # one row per model and layer


def _summary_row(arch: str, diagonal_min: float, diagonal_max: float) -> dict:
    ws = weighted_sum
    return {"corpus": "fake", "arch": arch, "label": ws.LABELS.get(arch, "every model"), "models": 2, "layers": 3,
            "identity_passed": 3, "identity_max_error": 1e-6, "state_max": 1.0, "gru_layers": 0, "sum_passed": 0,
            "sum_max_error": np.nan, "diagonal_min": diagonal_min, "diagonal_max": diagonal_max,
            "diagonal_always": 3, "rare_of": 0, "rare_found": 0, "rho_min": np.nan, "rho_max": np.nan,
            "span_median": 4.0, "span_p90": 9.0, "beyond_bptt": 0.0, "tolerance": ws.TOLERANCE,
            "always": ws.DIAGONAL_ALWAYS, "p_max": ws.RARE_P, "bptt": ws.BPTT}  # fmt: skip


@pytest.mark.parametrize(
    ("low", "high", "said"),
    [
        (0.99996, 1.0, "at 100.0% of steps in each of 3 model layers"),
        (0.95, 1.0, "at 95.0% to 100.0% of steps across 3 model layers"),
    ],
)
def test_the_diagonal_sentence_gives_one_number_when_its_range_rounds_to_one(low, high, said):
    table = pd.DataFrame([_summary_row("lstm", low, high), _summary_row("all", low, high)])
    (diagonal,) = [f for f in weighted_sum.findings(table) if f.claim == "ws-diagonal"]
    assert said in sentence(diagonal)


def _span_summary(spans: dict[str, float], beyond_bptt: float) -> pd.DataFrame:
    """A summary table of one corpus whose architectures differ only in their median (and 90th-percentile) span."""
    return pd.DataFrame([
        {"corpus": "c", "arch": arch, "label": weighted_sum.LABELS.get(arch, "every model"), "models": 1, "layers": 1,
         "identity_passed": 1, "identity_max_error": 0.0, "state_max": 1.0, "gru_layers": 0, "sum_passed": 0,
         "sum_max_error": np.nan, "diagonal_min": 1.0, "diagonal_max": 1.0, "diagonal_always": 1, "rare_of": 0,
         "rare_found": 0, "rho_min": np.nan, "rho_max": np.nan, "span_median": span, "span_p90": span,
         "beyond_bptt": beyond_bptt, "tolerance": weighted_sum.TOLERANCE, "always": weighted_sum.DIAGONAL_ALWAYS,
         "p_max": weighted_sum.RARE_P, "bptt": weighted_sum.BPTT}
        for arch, span in spans.items()
    ])  # fmt: skip


def test_the_span_finding_sets_the_minimal_rnns_beside_the_lstm_and_the_gru():
    """Issue 39: how far back the minimal RNNs' weighted sums reach, against the LSTM's: their median spans are named
    in the corpus's span sentence, each number one of the summary's."""
    spans = {"lstm": 0.53, "gru-paper": 0.21, "mingru": 0.37, "minlstm": 0.61, "all": 0.4}
    table = _span_summary(spans, beyond_bptt=0.0)
    said = [sentence(f) for f in weighted_sum.findings(table) if "memory span" in sentence(f)]
    assert said == [
        "c: median memory span per cell 0.53 characters (LSTMs), 0.21 (GRUs), 0.37 (minGRUs), 0.61 (minLSTMs), "
        "longest 0.61 (minLSTM); 0.0% of cells reach beyond 100 characters"
    ]
    assert unsupported_numbers(said[0], [table]) == []


def test_a_cell_that_never_forgets_is_said_so_not_given_float32s_cap_as_its_span():
    """The proto-LSTM's c_t = c_(t-1) + ... keeps with a gate of 1: its span is float32's cap (about 1.7e7
    characters), which the sentence must not call the longest span; the longest is among the cells that forget."""
    table = _span_summary({"lstm": 0.53, "proto-lstm": weighted_sum.SPAN_CAP, "all": 0.6}, beyond_bptt=0.5)
    (said,) = [sentence(f) for f in weighted_sum.findings(table) if "memory span" in sentence(f)]
    assert "longest 0.53 (LSTM); the prototype LSTM never forgets" in said and "16777" not in said
    assert unsupported_numbers(said, [table]) == []
