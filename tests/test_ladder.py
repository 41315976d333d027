"""The ladder analysis on hand-made models whose cross-entropies are set, with stand-ins for the vanishing ratio
and the brace advantage (analyses/vanishing_measure.py and analyses/brace_distance.py are other modules' work): the
rungs in the notes' order, each step's verdict (untested where a rung is missing), every number of a finding in the
tables."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import fake_corpus_file, fake_neural_model, make_text

from analyses import common, ladder, vanishing_measure
from analyses.context import Context, MissingInput, model_index
from analyses.prose import sentence, unsupported_numbers
from charlm.checkpoint import load_checkpoint
from charlm.model import matched_size
from corpora import run_cli

BUDGET = 8  # a tiny budget row: every rung sized to a 1-layer LSTM of width 8
CE = {"cbow": 2.4, "cbow-tanh": 2.3, "rnn": 1.8, "proto-lstm": 1.7, "gru-paper": 1.5, "gru": 1.55, "pseudo-lstm": 1.6}
LSTM_SEEDS = (1.3, 1.5)  # mean 1.4, seed std 0.1414
RATIO = {"cbow": 0.6, "cbow-tanh": 1e-3, "rnn": 1e-6, "proto-lstm": 0.1, "gru-paper": 0.2, "gru": 0.25,
         "pseudo-lstm": 0.3, "lstm": 0.5}  # fmt: skip
BRACE = {"cbow": -0.2, "cbow-tanh": -0.15, "rnn": -0.05, "proto-lstm": 0.0, "gru-paper": 0.1, "gru": 0.1,
         "pseudo-lstm": 0.05, "lstm": 0.2}  # fmt: skip


@pytest.fixture
def stand_ins(monkeypatch):
    """Stand-ins for the ladder's vanishing_ratio and brace_advantage (with the real ones' signatures and
    defaults); records each call with the split it was asked for."""
    calls = []

    def vanishing_ratio(ctx, row, snapshot=None, state=None, settings=None):
        split = {**vanishing_measure.MEASUREMENT, **(settings or {})}["split"]
        calls.append(("vanishing", row["arch"], int(row["seed"]), snapshot, split))
        return RATIO[row["arch"]] * (4.0 if row["seed"] == 1 else 1.0)

    def brace_advantage(ctx, row, min_distance=1, split="test"):
        calls.append(("brace", row["arch"], row["corpus"], split))
        return BRACE[row["arch"]] + (0.1 if row["seed"] == 1 else 0.0)

    monkeypatch.setattr(ladder, "vanishing_ratio", vanishing_ratio)
    monkeypatch.setattr(ladder, "brace_advantage", brace_advantage)
    return calls


def code_corpus(tmp_path):
    """A text with a closing brace every few lines, so every split has some."""
    import corpora

    words = make_text(8000, seed=3).decode().split("\n")
    lines = [f"int f{k}(void) {{ {w} }}" if k % 3 == 0 else w for k, w in enumerate(words)]
    path = tmp_path / "code.txt"
    path.write_bytes("\n".join(lines).encode()[:8000])
    return corpora.load(str(path))


def train_ladder(corpus, rungs=tuple(CE), lstm_seeds=LSTM_SEEDS, split="test"):
    """The rungs with cross-entropies CE (the LSTM's seeds: lstm_seeds), predictions on `split` only."""
    T = corpus.split(split).size - 1
    V = corpus.vocab_size
    for arch in rungs:
        size = matched_size(arch, BUDGET, V, 1)
        fake_neural_model(corpus, split=split, nll=np.full(T, CE[arch]), arch=arch, size=size)
    for seed, ce in enumerate(lstm_seeds):
        size = matched_size("lstm", BUDGET, V, 1)
        fake_neural_model(corpus, split=split, nll=np.full(T, ce), arch="lstm", size=size, seed=seed)


def _ctx(**settings) -> Context:
    fixed = {"budget": BUDGET, "min_braces": 5, "excerpt_chars": 40}
    return Context(model_index(), common.settings(ladder.ANALYSIS, None, {**fixed, **settings}))


def _numbers_check(result) -> None:
    frames = [result.table, *result.tables.values()]
    for finding in result.findings:
        assert unsupported_numbers(sentence(finding), frames) == [], sentence(finding)
        assert len(sentence(finding).split()) <= 36, sentence(finding)


def test_a_rung_whose_fig1_cell_chose_dropout_is_read_at_the_ladders_dropout(tmp_path, artifacts, stand_ins):
    """Fig 1's grid also trains the row's RNN at dropout 0.1, better on validation (its cell chooses it, at 0.5
    nats); the notes' other rungs have dropout 0 alone. The ladder compares its rungs alike: the RNN at 0 (1.8)."""
    corpus = fake_corpus_file(tmp_path)
    train_ladder(corpus, rungs=[a for a in CE if a != "gru"])
    T, size = corpus.split("test").size - 1, matched_size("rnn", BUDGET, corpus.vocab_size, 1)
    fake_neural_model(corpus, nll=np.full(T, 0.5), arch="rnn", size=size, dropout=0.1, val_loss=0.5)
    ctx = _ctx()
    assert set(ctx.models(arch="rnn")["dropout"]) == {0.1}  # what validation chose for the Fig 1 cell
    by = ladder.ANALYSIS.compute(ctx).table.set_index("arch")
    assert by.loc["rnn", "ce_nats"] == pytest.approx(CE["rnn"], abs=1e-6)


def test_the_ladder_in_the_notes_order_with_each_steps_gain_over_its_parent(tmp_path, artifacts, stand_ins):
    prose, code = fake_corpus_file(tmp_path), code_corpus(tmp_path)
    assert prose.decode(prose.split("test")).count(b"}") == 0 and code.decode(code.split("test")).count(b"}") >= 5
    for corpus in (prose, code):
        train_ladder(corpus, rungs=[a for a in CE if a != "gru"])  # the notes' GRU only
        T, V = corpus.split("test").size - 1, corpus.vocab_size
        fake_neural_model(corpus, nll=np.full(T, 0.1), arch="rnn", size=matched_size("rnn", 64, V, 1))  # other row
        fake_neural_model(corpus, nll=np.full(T, 0.1), arch="rnn", layers=2, size=matched_size("rnn", BUDGET, V, 2))
    result = ladder.ANALYSIS.compute(_ctx())
    df = result.table
    for name, sub in df.groupby("corpus"):
        assert list(sub["rung"]) == ["CBOW", "CBOW-tanh", "Elman", "proto-LSTM", "GRU", "pseudo-LSTM", "LSTM"]
        assert list(sub["step"]) == list(range(7))
        by = sub.set_index("arch")
        for arch, ce in CE.items():
            if arch != "gru":
                assert by.loc[arch, "ce_nats"] == pytest.approx(ce, abs=1e-6), arch  # the other row's 0.1 is not here
        assert by.loc["lstm", "seeds"] == 2 and by.loc["lstm", "ce_nats"] == pytest.approx(1.4, abs=1e-6)
        assert by.loc["lstm", "seed_std"] == pytest.approx(np.std(LSTM_SEEDS, ddof=1), abs=1e-6)
        # Gains against the rung each derives from: the GRU and the pseudo-LSTM both fix the prototype.
        expected = {"cbow-tanh": 0.1, "rnn": 0.5, "proto-lstm": 0.1, "gru-paper": 0.2, "pseudo-lstm": 0.1, "lstm": 0.2}
        for arch, gain in expected.items():
            assert by.loc[arch, "gain_nats"] == pytest.approx(gain, abs=1e-6), arch
        assert np.isnan(by.loc["cbow", "gain_nats"]) and by.loc["pseudo-lstm", "parent"] == "proto-LSTM"
        assert (by["size"] == [matched_size(a, BUDGET, prose.vocab_size if name == prose.name else code.vocab_size, 1)
                               for a in by.index]).all()  # fmt: skip
        # The vanishing ratio of every rung; over the LSTM's two seeds (0.5 and 2.0) their geometric mean, 1.0.
        assert by.loc["rnn", "vanishing_ratio"] == pytest.approx(1e-6)
        assert by.loc["lstm", "vanishing_ratio"] == pytest.approx(1.0)
    braces = df[df["corpus"] == code.name].set_index("arch")
    assert braces.loc["gru-paper", "brace_advantage"] == pytest.approx(0.1)
    assert braces.loc["lstm", "brace_advantage"] == pytest.approx(0.25)  # mean of 0.2 and 0.3 over the seeds
    assert braces.loc["lstm", "brace_gain"] == pytest.approx(0.25 - 0.05)
    assert df[df["corpus"] == prose.name]["brace_advantage"].isna().all()  # no braces in prose: not measured
    assert {c[2] for c in stand_ins if c[0] == "brace"} == {code.name}
    assert all(c[3] is None for c in stand_ins if c[0] == "vanishing")  # the trained (final) models
    assert {c[-1] for c in stand_ins} == {"test"}
    # The memory state's largest value: the top layer's c where there is a cell, else h, from a zero state.
    by = df[df["corpus"] == code.name].set_index("arch")
    assert list(by["memory"]) == ["h", "h", "h", "c", "h", "c", "c"] and (by["state_chars"] == 40).all()
    for arch in ("cbow", "proto-lstm", "lstm"):
        model = load_checkpoint(next((artifacts / code.artifact_name).glob(f"{arch}-L1-*-s0-*")) / "checkpoint.pt")
        ids = torch.from_numpy(code.split("test")[:40].astype(np.int64))[None]
        with torch.no_grad():
            expected = model.trace(ids)[f"layers.0.{by.loc[arch, 'memory']}"].abs().max().item()
        assert by.loc[arch, "state_max"] == pytest.approx(expected, rel=1e-6), arch
    # Every step tested; only recurrent weights (+0.5) beat twice the largest std (the LSTM's seed std, 0.1414):
    # 1 of 6, not reproduced. Every gated rung keeps more gradient than Elman (1e-6).
    steps = result.tables["steps"]
    assert steps["tested"].all() and len(steps) == 2 * 6
    code_steps = steps[steps["corpus"] == code.name].set_index("arch")
    assert list(code_steps.index[code_steps["verdict"] == "reproduced"]) == ["rnn"]
    assert (
        code_steps.loc["lstm", "log10_ratio"] == pytest.approx(0.0) and code_steps.loc["lstm", "parent_brace"] == 0.05
    )
    first = {(f.claim, f.corpus): f for f in reversed(result.findings) if f.claim}
    assert first["ladder-steps", code.name].verdict == "not reproduced"
    assert sentence(first["ladder-steps", code.name]) == (
        f"{code.name}: 1 of 6 derivation steps lower cross-entropy by more than 0.283 nats"
    )
    assert first["ladder-gradient", code.name].verdict == "reproduced"
    step = next(sentence(f) for f in result.findings if f.corpus == code.name and "recurrent weights" in sentence(f))
    assert step == (f"{code.name}: recurrent weights (Elman over CBOW-tanh) gains 0.500 nats/char, log10 vanishing "
                    "ratio -3.0 -> -6.0, brace advantage -0.150 -> -0.050")  # fmt: skip
    _numbers_check(result)


def test_a_step_that_costs_cross_entropy_says_it_loses():
    """A step whose rung is worse than its parent (the prototype's raw state, which may never learn) is stated as
    a loss of the step's magnitude, a number its table holds as a negative gain."""
    import pandas as pd

    row = pd.Series({"corpus": "prose", "what": "gates", "rung": "proto-LSTM", "parent": "Elman", "gain": -1.794,
                     "tested": True, "verdict": "not reproduced", "log10_ratio": np.nan,
                     "parent_log10_ratio": np.nan, "brace": np.nan, "parent_brace": np.nan})  # fmt: skip
    finding = ladder.step_finding(row)
    assert sentence(finding) == "prose: gates (proto-LSTM over Elman) loses 1.794 nats/char"
    assert unsupported_numbers(sentence(finding), [pd.DataFrame([row])]) == []
    assert sentence(ladder.step_finding(row.copy().replace({-1.794: 0.25}))) == (
        "prose: gates (proto-LSTM over Elman) gains 0.250 nats/char"
    )


def test_every_measurement_reads_the_ladders_split(tmp_path, artifacts, stand_ins):
    code = code_corpus(tmp_path)
    assert code.decode(code.split("val")).count(b"}") >= 5
    train_ladder(code, rungs=[a for a in CE if a != "gru"], split="val")  # no test predictions to fall back on
    df = ladder.ANALYSIS.compute(_ctx(split="val")).table
    assert df.set_index("arch").loc["lstm", "ce_nats"] == pytest.approx(1.4, abs=1e-6)
    assert {c[0] for c in stand_ins} == {"vanishing", "brace"}
    assert {c[-1] for c in stand_ins} == {"val"}  # the vanishing ratio and the brace advantage too


def test_torch_gru_stands_in_for_the_notes_gru_and_missing_rungs_are_named(tmp_path, artifacts, stand_ins):
    corpus = fake_corpus_file(tmp_path)
    train_ladder(corpus, rungs=["cbow", "rnn", "gru", "pseudo-lstm"], lstm_seeds=(1.4,))
    result = ladder.ANALYSIS.compute(_ctx())
    df = result.table
    assert list(df["arch"]) == ["cbow", "rnn", "gru", "pseudo-lstm", "lstm"]
    by = df.set_index("arch")
    assert by.loc["gru", "rung"] == "GRU (torch's form)"
    assert np.isnan(by.loc["rnn", "gain_nats"]) and np.isnan(by.loc["pseudo-lstm", "gain_nats"])  # parents absent
    assert by.loc["lstm", "gain_nats"] == pytest.approx(0.2, abs=1e-6)
    steps = result.tables["steps"].set_index("arch")
    assert list(steps.index[steps["tested"]]) == ["lstm"]  # the one step whose two rungs are both there
    assert steps.loc["gru", "verdict"] == "untested" and steps.loc["gru", "absent"] == "proto-LSTM"
    assert steps.loc["pseudo-lstm", "absent"] == "proto-LSTM"
    text = [sentence(f) for f in result.findings]
    assert text[0].startswith("fake: 1 of 1 derivation steps lower cross-entropy by more than")
    assert text[0].endswith("; 5 untested (not trained: CBOW-tanh, proto-LSTM)")
    assert any("the GRU rung is torch's form" in t for t in text)
    _numbers_check(result)


def test_the_papers_three_types_alone_are_a_ladder_with_every_step_untested(tmp_path, artifacts, stand_ins, capsys):
    corpus = fake_corpus_file(tmp_path)
    train_ladder(corpus, rungs=["rnn", "gru-paper"])  # and the LSTM: the rungs the reference profile trained first
    result = ladder.ANALYSIS.compute(_ctx())
    assert list(result.table["rung"]) == ["Elman", "GRU", "LSTM"]
    assert (result.tables["steps"]["verdict"] == "untested").all()
    claims = [f for f in result.findings if f.claim]
    assert [(f.claim, f.verdict) for f in claims] == [("ladder-steps", "untested"), ("ladder-gradient", "reproduced")]
    assert sentence(claims[0]) == (
        "fake: every step of the derivation untested; not trained: CBOW, CBOW-tanh, proto-LSTM, pseudo-LSTM"
    )
    # Elman 1e-6; the GRU 0.2; the LSTM's seeds 0.5 and 2.0, geometric mean 1.0
    assert sentence(claims[1]) == (
        "fake: 2 of 2 gated rungs keep more gradient than Elman (log10 vanishing ratio -6.0; GRU, LSTM: -0.7 to 0.0)"
    )
    _numbers_check(result)
    # A budget row with no rung at all is one line and exit 2.
    with pytest.raises(MissingInput, match="python -m charlm.train --corpus fake --arch ARCH") as err:
        ladder.ANALYSIS.compute(_ctx(budget=512))
    width = matched_size("cbow", 512, corpus.vocab_size, 1)
    assert "\n" not in str(err.value) and f"cbow {width}," in str(err.value)  # the widths of this corpus's row
    assert run_cli(ladder.main, ["--corpus", corpus.source, "--set", "budget=512"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "no rung of the ladder in budget row 512" in lines[0]


def test_the_views_read_everything_from_the_cached_result(tmp_path, artifacts, stand_ins):
    import matplotlib.pyplot as plt

    from analyses.base import Result
    from analyses.ladder_plot import PANELS
    from reports.tables import table_view

    prose, code = fake_corpus_file(tmp_path), code_corpus(tmp_path)
    for corpus in (prose, code):
        train_ladder(corpus, rungs=[a for a in CE if a != "gru"])
    ladder.ANALYSIS.compute(_ctx()).save(tmp_path, "ladder")
    cached = Result.load(tmp_path, "ladder")  # what the report re-reads
    fig = ladder.ANALYSIS.plot(cached)
    assert [ax.get_ylabel() for ax in fig.axes] == [label for _, label, _ in PANELS]
    assert fig.get_size_inches()[0] <= 7.5 and fig.get_size_inches()[1] <= 9.0
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()][4] == "GRU"
    assert len(fig.axes[0].lines) == 2 * (1 + 6)  # per corpus: its points, and a segment to each rung from its parent
    plt.close(fig)
    prose_only = Result(cached.table[cached.table["corpus"] == prose.name], tables=cached.tables)
    fig = ladder.ANALYSIS.plot(prose_only)  # no braces anywhere: no brace panel
    assert sum(ax.get_visible() for ax in fig.axes) == 3
    plt.close(fig)
    chain = next(sentence(f) for f in cached.findings if f.corpus == prose.name and "rungs trained" in sentence(f))
    assert chain.startswith(
        f"{prose.name}, test cross-entropy of the rungs trained: CBOW 2.400, CBOW-tanh 2.300, Elman"
    )
    _numbers_check(cached)
    summary = ladder.ANALYSIS.summary_table(cached)
    assert len(summary) == 14 and summary["test nats/char"].tolist()[:2] == ["2.400", "2.300"]
    assert not table_view(summary).overflows  # the section's table fits the page
    assert set(ladder.ANALYSIS.appendix(cached)) == {"every rung", "every step of the derivation"}
