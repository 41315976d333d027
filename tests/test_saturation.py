"""Gate saturation (Karpathy et al. Fig 3): gates forced shut or open by their biases give fractions 0 and 1, the
GRU's z is the papers' (weight on the candidate), and bad input is one line and exit 2."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import fake_corpus_file, fake_neural_model

from analyses import common, saturation
from analyses.base import Result
from analyses.context import Context, MissingInput, model_index
from analyses.prose import sentence, unsupported_numbers
from charlm.model import ARCHS, GATED_ARCHS, GATELESS_ARCHS
from corpora import run_cli

FAST = {"start": 10, "length": 300, "warmup": 10}  # a short excerpt of the small test split


def edit_weights(model_dir, edit) -> None:
    """Change a fake model's checkpoint in place (and its recorded digest, so no cache entry survives)."""
    from charlm.checkpoint import file_sha256, load_payload, save_payload
    from corpora import atomic

    path = model_dir / "checkpoint.pt"
    payload = load_payload(path)
    edit(payload["state_dict"])
    save_payload(path, payload)
    metrics = json.loads((model_dir / "metrics.json").read_text())
    atomic.write_json(model_dir / "metrics.json", metrics | {"checkpoint_sha256": file_sha256(path)})


def force_gates(state: dict, prefix: str, biases: list[float | None]) -> None:
    """Blocks of H rows of a torch RNN's stacked gate weights: a number makes that block's gate that constant
    (weights zero, bias set), None leaves the block random."""
    H = state[f"{prefix}.weight_hh_l0"].shape[1]
    for k, bias in enumerate(biases):
        if bias is None:
            continue
        rows = slice(k * H, (k + 1) * H)
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_hh_l0"):
            state[f"{prefix}.{name}"][rows] = 0.0
        state[f"{prefix}.bias_ih_l0"][rows] = bias


def _ctx(**settings) -> Context:
    return Context(model_index(), common.settings(saturation, None, FAST | settings))


def test_saturation_fractions_count_steps_beyond_the_papers_thresholds():
    gate = np.array([[0.05, 0.5, 0.95], [0.1, 0.9, 0.99], [0.0, 0.91, 0.2], [0.09, 0.5, 0.95]])  # (T=4, H=3)
    left, right = saturation.saturation_fractions(gate)
    np.testing.assert_allclose(left, [0.75, 0.0, 0.0])  # 0.1 itself is not below 0.1
    np.testing.assert_allclose(right, [0.0, 0.25, 0.75])  # 0.9 itself is not above 0.9


def test_forced_lstm_gates_give_fractions_one_and_zero(tmp_path, artifacts):
    """LSTM: i always ~0 (bias -20), f always ~1 (bias +20), o = 0.5 (bias 0); the ablation's gates likewise."""
    corpus = fake_corpus_file(tmp_path)
    lstm = fake_neural_model(corpus, arch="lstm", size=8)
    edit_weights(lstm, lambda s: force_gates(s, "layers.0.rnn", [-20.0, 20.0, None, 0.0]))  # order i, f, g, o
    hidden = fake_neural_model(corpus, arch="lstm-srnn-hidden", size=8)

    def force_ablation(state):  # gates_x: [i; f] from x only
        state["layers.0.gates_x.weight"][:] = 0.0
        state["layers.0.gates_x.bias"][:] = torch.tensor([20.0] * 8 + [-20.0] * 8)

    edit_weights(hidden, force_ablation)
    df = saturation.compute(_ctx())
    by = df.groupby(["arch", "gate"])[["left", "right"]]
    lo, hi = by.min(), by.max()
    for arch, gate, left, right in [("lstm", "i", 1, 0), ("lstm", "f", 0, 1), ("lstm", "o", 0, 0),
                                    ("lstm-srnn-hidden", "i", 0, 1), ("lstm-srnn-hidden", "f", 1, 0)]:  # fmt: skip
        assert lo.loc[(arch, gate), "left"] == hi.loc[(arch, gate), "left"] == left, (arch, gate)
        assert lo.loc[(arch, gate), "right"] == hi.loc[(arch, gate), "right"] == right, (arch, gate)
    assert set(df[df["arch"] == "lstm-srnn-hidden"]["gate"]) == {"i", "f"}  # no output gate in - S-RNN - HIDDEN
    assert (df["steps"] == FAST["length"]).all() and len(df) == 8 * (3 + 2)
    layers = saturation.per_layer(df).set_index("model")
    assert layers.loc["LSTM 1x8", "f right >= 90%"] == 8  # every cell an integrator
    assert layers.loc["LSTM - S-RNN - HIDDEN 1x8", "f left >= 90%"] == 8  # every forget gate shut
    (row,) = saturation.summary(df).to_dict("records")
    assert row["lstm_models"] == 1 and row["lstm_multiple"] == 1 and row["f_left"] == 0 and row["diffuse_of"] == 0
    found = {f.claim: f for f in saturation.findings(saturation.summary(df)) if f.claim}
    assert found["sat-fig3-integrators"].verdict == "reproduced"  # 8 integrators: "multiple"
    assert found["sat-fig3-no-feedforward"].verdict == "reproduced"  # the ablation's shut gates are not the LSTM's
    assert found["sat-fig3-layer1"].verdict == "untested"  # one layer only
    assert found["sat-fig3-gru"].verdict == "untested"  # no GRU


def test_the_grus_z_is_the_weight_on_the_candidate(tmp_path, artifacts):
    """torch's z' (weight on the old state) forced to ~1 means the papers' z = 1 - z' is ~0: left-saturated."""
    corpus = fake_corpus_file(tmp_path)
    gru = fake_neural_model(corpus, arch="gru", size=8)
    edit_weights(gru, lambda s: force_gates(s, "layers.0.rnn", [20.0, 20.0, None]))  # order r, z', n
    df = saturation.compute(_ctx()).set_index("gate")
    assert (df.loc["r", "right"] == 1).all() and (df.loc["r", "left"] == 0).all()
    assert (df.loc["z", "left"] == 1).all() and (df.loc["z", "right"] == 0).all()
    table = saturation.summary(df.reset_index())
    assert table.loc[0, "r_rare"] == 0.0 and table.loc[0, "z_rare"] == 0.0 and table.loc[0, "gru_holds"] == 0
    (gru,) = [f for f in saturation.findings(table) if f.claim == "sat-fig3-gru"]
    assert gru.verdict == "not reproduced" and "0% of reset gates" in sentence(gru)


def test_the_table_plot_and_words_cover_every_gated_architecture(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path)
    for arch in ("lstm", "gru", "lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "rnn", "lstm-gates", "gru-paper",
                 "proto-lstm", "pseudo-lstm", "cbow", *(a for a in GATED_ARCHS if a.startswith("min"))):  # fmt: skip
        fake_neural_model(corpus, arch=arch, size=8)
    df = saturation.compute(_ctx())
    assert set(df["arch"]) == set(GATED_ARCHS)  # the gateless ones are not read
    assert sorted(GATED_ARCHS + GATELESS_ARCHS) == sorted(ARCHS)  # every architecture is one or the other
    gates = df.groupby("arch")["gate"].unique().map(set)
    assert gates["lstm"] == gates["lstm-srnn"] == {"i", "f", "o"}
    assert gates["lstm-srnn-out"] == gates["lstm-srnn-hidden"] == {"i", "f"} and gates["gru"] == {"r", "z"}
    assert gates["gru-paper"] == {"r", "z"} and gates["proto-lstm"] == gates["pseudo-lstm"] == {"i", "f", "o"}
    assert ((df["left"] + df["right"]) <= 1).all()
    result = saturation.ANALYSIS.compute(_ctx())
    pd.testing.assert_frame_equal(result.table, df)
    fig = saturation.ANALYSIS.plot(result)  # Fig 3: the headline LSTM (i, f, o) and GRU (r, z) only
    assert len([ax for ax in fig.axes if ax.get_visible() and ax.has_data()]) == 3 + 2
    width, height = fig.get_size_inches()
    assert width <= 7.5 and height <= 9.0
    assert len(saturation.ANALYSIS.summary_table(result)) <= 15
    (appendix,) = saturation.ANALYSIS.appendix(result).values()
    assert len(appendix) == len(set(df["model_id"]))  # one layer each


def test_a_gateless_architecture_is_one_clear_line_and_exit_2(tmp_path, artifacts, capsys):
    corpus = fake_corpus_file(tmp_path)
    fake_neural_model(corpus, arch="rnn", size=8)
    fake_neural_model(corpus, arch="lstm", size=8)
    with pytest.raises(MissingInput, match="rnn has no gates"):
        saturation.compute(_ctx(archs=["rnn"]))
    assert run_cli(saturation.main, ["--corpus", corpus.source, "--set", 'archs=["rnn"]']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rnn has no gates" in err[0]
    assert run_cli(saturation.main, ["--corpus", corpus.source, "--set", "archs=lstm-gates,lstm"]) == 2
    assert "lstm-gates has no gates" in capsys.readouterr().err


def test_only_gateless_models_or_too_long_an_excerpt_exit_2(tmp_path, artifacts, capsys):
    corpus = fake_corpus_file(tmp_path)
    fake_neural_model(corpus, arch="rnn", size=8)
    assert run_cli(saturation.main, ["--corpus", corpus.source]) == 2  # no gated model to read
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "python -m reports --profile quick" in err[0]
    fake_neural_model(corpus, arch="lstm", size=8)
    test_chars = corpus.split("test").size
    assert run_cli(saturation.main, ["--corpus", corpus.source, "--set", f"length={test_chars}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not fit the test split" in err[0]
    assert run_cli(saturation.main, ["--corpus", corpus.source, "--set", "length=many"]) == 2
    assert "length must be a non-negative integer" in capsys.readouterr().err


def test_the_cli_writes_table_and_figure(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path)
    fake_neural_model(corpus, arch="lstm", size=8)
    out, figure = tmp_path / "sat.csv", tmp_path / "sat.png"
    args = ["--corpus", corpus.source, "--out", str(out), "--figure", str(figure)]
    assert run_cli(saturation.main, args + [f"--set={k}={v}" for k, v in FAST.items()]) == 0
    assert figure.stat().st_size > 0
    table = pd.read_csv(out)  # what the report reads back: the findings work from the CSV alone
    assert len(table) == 8 * 3 and saturation.findings(saturation.summary(table))


def test_a_diffuse_first_layer_under_a_saturated_second_is_the_papers_finding(tmp_path, artifacts):
    """2 layers: layer 1's gates all 0.5 (never saturated), layer 2's shut or open: the first layer is diffuse."""
    corpus = fake_corpus_file(tmp_path)
    model = fake_neural_model(corpus, arch="lstm", layers=2, size=8)

    def gates(state):
        force_gates(state, "layers.0.rnn", [0.0, 0.0, None, 0.0])
        force_gates(state, "layers.1.rnn", [20.0, -20.0, None, 20.0])

    edit_weights(model, gates)
    df = saturation.compute(_ctx())
    per_layer = (df["left"] + df["right"]).groupby(df["layer"]).mean()
    assert per_layer[1] == 0 and per_layer[2] == 1
    table = saturation.summary(df)
    assert table.loc[0, "diffuse_holds"] == table.loc[0, "diffuse_of"] == 1 and table.loc[0, "f_left"] == 8
    assert table.loc[0, "share_l1"] == 0 and table.loc[0, "integrators_deep"] == 0  # layer 2's f is shut
    found = {f.claim: f for f in saturation.findings(table) if f.claim}
    assert found["sat-fig3-layer1"].verdict == "reproduced"
    assert found["sat-fig3-no-feedforward"].verdict == "not reproduced"  # layer 2's f is shut: feed-forward cells
    assert found["sat-fig3-integrators"].verdict == "not reproduced"


@pytest.mark.parametrize(
    "holds, of, expected",
    [(3, 3, "reproduced"), (2, 3, "partly"), (1, 2, "partly"), (1, 3, "not reproduced"), (0, 0, "untested")],
)
def test_the_verdict_rule(holds, of, expected):
    assert saturation.verdict(holds, of) == expected


def test_every_finding_states_only_numbers_its_tables_hold(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path)
    for arch, layers in (("lstm", 1), ("lstm", 2), ("gru-paper", 2), ("lstm-srnn-hidden", 1)):
        fake_neural_model(corpus, arch=arch, layers=layers, size=8)
    result = saturation.ANALYSIS.compute(_ctx())
    assert isinstance(result, Result) and set(result.tables) == {"summary"}
    assert {f.claim for f in result.findings} >= {c.id for c in saturation.ANALYSIS.claims}
    frames = [result.table, *result.tables.values()]
    for f in result.findings:
        assert unsupported_numbers(sentence(f), frames) == [], sentence(f)
        assert len(sentence(f).split()) <= 30, sentence(f)
