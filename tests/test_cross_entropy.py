"""Our Fig 1 grid beside Karpathy et al.'s (sec 4.1, Fig 1 left): the table, the figure and the caption's counts, on
hand-made tables of per-model cross-entropies (no models are trained: compute's numbers are tested in
test_analyses.py)."""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from analyses import cross_entropy as ce
from analyses.prose import sentence, unsupported_numbers
from reports.tables import table_view

TYPES = ("lstm", "rnn", "gru-paper")
NAN = re.compile(r"\bnan\b", re.IGNORECASE)


def _models(values: dict, seeds: int = 1, std: float = 0.003, chars: int = 100_000_000) -> pd.DataFrame:
    """compute()'s table from {(corpus, budget row, arch, layers): cross-entropy}; a budget of None: a model sized to
    no row (width 8)."""
    rows = []
    for (corpus, budget, arch, layers), value in values.items():
        group = f"{corpus}-{arch}-{budget}-{layers}"
        size = 8 if budget is None else budget // layers
        for seed in range(seeds):
            rows.append({
                "corpus": corpus, "arch": arch, "layers": layers, "size": size,
                "budget": float("nan") if budget is None else float(budget), "params": 1000 * size, "dropout": 0.0,
                "seed": seed, "chars_trained": chars, "split": "test", "ce_nats": value, "ce_std": std,
                "ce_bits": value / 0.6931471805599453, "model_id": f"{group}-s{seed}", "group_id": group,
            })  # fmt: skip
    return pd.DataFrame(rows)


def _grid(corpus="warpeace", budgets=(64, 128), layers=(1, 2, 3), lstm=1.30, gru=1.28, rnn=1.40, deeper=-0.02):
    """Every (row, type, depth): each type at its own level, each extra layer `deeper` nats lower (better)."""
    base = {"lstm": lstm, "gru-paper": gru, "rnn": rnn}
    return {
        (corpus, b, a, n): round(base[a] + deeper * (n - 1) - 0.1 * (b == 128), 6)
        for b in budgets
        for a in TYPES
        for n in layers
    }


def _comparison(values: dict, what: str, corpus: str = "warpeace") -> dict:
    """The row of sec 4.1's comparison `what` in the comparisons table (the numbers its finding states)."""
    comp = ce.comparisons(ce.cells(_models(values)))
    rows = comp[(comp["corpus"] == corpus) & (comp["comparison"] == what)]
    return {} if rows.empty else rows.iloc[0].dropna().to_dict()


def _findings(values: dict, corpus: str = "warpeace") -> dict:
    """{claim id: (verdict, sentence)} of the analysis's findings on a hand-made table."""
    df = _models(values)
    out = {}
    for f in ce.findings(df, ce.comparisons(ce.cells(df))):
        if f.corpus == corpus and f.claim:
            out[f.claim] = (f.verdict, sentence(f))
    return out


def _texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in [*ax.texts, ax.title, ax.xaxis.label, ax.yaxis.label]]


# ------------------------------------------------------------------------------------------ the table


def test_the_table_puts_fig1_beside_ours_and_the_difference_is_ours_minus_fig1():
    paper = ce.paper_table().set_index(["corpus", "arch", "layers", "budget"])["paper_ce_nats"]
    values = {
        (c, b, a, n): paper[(c, ce.PAPER_ARCH.get(a, a), n, b)] + 0.01 * k
        for k, (c, b, a, n) in enumerate((c, b, a, n) for c in ("warpeace", "linux") for b in (64, 128)
                                         for a in TYPES for n in (1, 2, 3))
    }  # fmt: skip
    table = ce.with_paper(_models(values, seeds=3))
    assert list(table.columns) == ["corpus", "budget row", "type", "layers", "width", "params",
                                   "ours (nats/char)", "bootstrap std", "Fig 1 (nats/char)", "ours - Fig 1", "seeds",
                                   "dropout"]  # fmt: skip
    assert len(table) == 2 * 2 * 3 * 3 and (table["seeds"] == 3).all()
    exact = (table["ours (nats/char)"] - table["Fig 1 (nats/char)"]).to_numpy()
    shown = (table["ours (nats/char)"].round(3) - table["Fig 1 (nats/char)"]).to_numpy()  # at Fig 1's 3 decimals
    assert table["ours - Fig 1"].to_numpy() == pytest.approx(shown, abs=1e-9)
    assert table["ours - Fig 1"].to_numpy() == pytest.approx(exact, abs=5e-4)
    assert sorted(table["ours - Fig 1"].round(6)) == pytest.approx([0.01 * k for k in range(36)])
    # the papers' GRU is compared with Fig 1's GRU column: War and Peace, row 64, 3 layers
    row = table[(table["corpus"] == "warpeace") & (table["budget row"] == 64) & (table["layers"] == 3)]
    assert row.set_index("type")["Fig 1 (nats/char)"].to_dict() == {
        "LSTM": 1.540, "RNN": 1.396, "GRU (papers' form)": 1.472
    }  # fmt: skip
    # Fig 1's reading order: row 64 before 128, then LSTM, RNN, GRU, then depth
    first = table[table["corpus"] == "linux"].head(4)
    assert first["budget row"].tolist() == [64] * 4 and first["type"].tolist() == ["LSTM"] * 3 + ["RNN"]


def test_a_cell_fig1_leaves_out_is_blank_never_nan():
    """Fig 1 has no 512-row RNN ("-"), and a model sized to no budget row has no Fig 1 cell at all."""
    values = {("linux", 512, "lstm", 1): 0.95, ("linux", 512, "rnn", 1): 1.10, ("linux", None, "gru", 1): 1.5}
    df = _models(values)
    table = ce.with_paper(df).set_index("type")
    assert table.loc["LSTM", "Fig 1 (nats/char)"] == 0.952
    assert table.loc["LSTM", "ours - Fig 1"] == pytest.approx(0.95 - 0.952)
    assert table.loc[["RNN", "GRU"], ["Fig 1 (nats/char)", "ours - Fig 1"]].isna().all().all()
    view = table_view(ce.with_paper(df))  # what the report prints
    shown = dict(zip(view.columns, zip(*view.rows)))
    assert shown["Fig 1 (nats/char)"] == ("0.952", "—", "—") and shown["budget row"] == ("512", "512", "—")
    assert not any(NAN.search(cell) for row in view.rows for cell in row)
    verdict, text = _findings(values, "linux")["fig1-values"]
    assert not NAN.search(text) and "1 of 1 cells within 0.05 nats of Fig 1" in text and verdict == "reproduced"
    fig = ce.plot(df)
    texts = _texts(fig)
    plt.close(fig)
    assert not any(NAN.search(t) for t in texts)
    assert "1.100\n±0.003\nFig 1: —" in texts  # the RNN: ours shown, Fig 1 blank, no difference
    assert any(t.startswith("0.950\n±0.003\nFig 1:\n0.952\nΔ -0.002") for t in texts)


# ------------------------------------------------------------------------------------------ sec 4.1's orderings


def test_the_rnn_behind_both_in_every_cell_is_counted_beside_fig1_and_judged():
    values = _grid()
    row = _comparison(values, "rnn_behind")
    assert (row["holds"], row["of"], row["paper_holds"], row["paper_of"]) == (6, 6, 2, 6)  # Fig 1: 128 x 1, 128 x 2
    assert row["smallest_margin"] == pytest.approx(0.1)
    assert _findings(values)["fig1-rnn-behind"][0] == "reproduced"
    values[("warpeace", 64, "rnn", 2)] = 1.25  # now ahead of both the LSTM (1.28) and the GRU (1.26)
    assert _comparison(values, "rnn_behind")["holds"] == 5 and _findings(values)["fig1-rnn-behind"][0] == "partly"
    values[("warpeace", 128, "rnn", 3)] = 1.17  # behind the LSTM (1.16) and the GRU (1.14): still behind both
    assert _comparison(values, "rnn_behind")["holds"] == 5
    values[("warpeace", 128, "rnn", 3)] = 1.15  # between the GRU and the LSTM: not behind both
    assert _comparison(values, "rnn_behind")["holds"] == 4


def test_the_lstm_gru_gap_is_judged_against_the_stated_tolerance():
    tied = _grid(lstm=1.30, gru=1.30 - 0.9 * ce.TIE_NATS)
    row = _comparison(tied, "lstm_vs_gru")
    assert (row["holds"], row["gru_ahead"], row["lstm_ahead"], row["threshold"]) == (6, 0, 0, ce.TIE_NATS)
    assert _findings(tied)["fig1-lstm-gru"][0] == "reproduced"  # tied: consistent with "mixed"
    tied[("warpeace", 64, "gru-paper", 1)] = 1.30 - 1.1 * ce.TIE_NATS  # just past the tolerance
    tied[("warpeace", 128, "lstm", 2)] = 1.5  # the LSTM far behind: the GRU ahead there too
    row = _comparison(tied, "lstm_vs_gru")
    assert (row["holds"], row["gru_ahead"], row["lstm_ahead"]) == (4, 2, 0)
    ahead = _grid(lstm=1.30, gru=1.25)
    row = _comparison(ahead, "lstm_vs_gru")
    assert (row["holds"], row["gru_ahead"], row["paper_holds"], row["paper_gru_ahead"]) == (0, 6, 1, 5)
    assert _findings(ahead)["fig1-lstm-gru"][0] == "not reproduced"  # the GRU ahead everywhere: not mixed


def test_depth_orderings_count_each_type_and_row():
    values = _grid(deeper=-0.02)  # every extra layer helps
    two, three = _comparison(values, "2_vs_1"), _comparison(values, "3_vs_2")
    assert (two["holds"], two["of"], two["paper_holds"]) == (6, 6, 6) and (three["holds"], three["of"]) == (6, 6)
    found = _findings(values)
    assert found["fig1-depth-2"][0] == "reproduced" and found["fig1-depth-3"][0] == "not reproduced"  # Fig 1: 2 of 6
    values[("warpeace", 128, "gru-paper", 2)] = 1.5  # the 2-layer GRU of row 128: worse than 1 and than 3 layers
    assert _comparison(values, "2_vs_1")["holds"] == 5 and _findings(values)["fig1-depth-2"][0] == "partly"
    values[("warpeace", 64, "lstm", 3)] = 1.9
    assert _comparison(values, "3_vs_2")["holds"] == 5 and _findings(values)["fig1-depth-3"][0] == "reproduced"
    never = _grid(deeper=0.02)
    assert _comparison(never, "2_vs_1")["holds"] == 0 and _findings(never)["fig1-depth-2"][0] == "not reproduced"


def test_only_one_depth_or_one_type_tests_only_what_the_cells_allow():
    """The quick profile: 1-layer models of the 128 row, plus a 64-row LSTM."""
    quick = {("warpeace", 128, a, 1): v for a, v in (("lstm", 1.55), ("gru", 1.52), ("rnn", 1.63))}
    quick[("warpeace", 64, "lstm", 1)] = 1.77
    row = _comparison(quick, "rnn_behind")
    assert (row["holds"], row["of"], row["paper_holds"]) == (1, 1, 1)
    assert _comparison(quick, "2_vs_1") == {} and _comparison(quick, "3_vs_2") == {}
    assert "fig1-depth-2" not in _findings(quick)
    lstm_only = {("warpeace", b, "lstm", n): 1.3 for b in (64, 128) for n in (1, 2)}
    assert _comparison(lstm_only, "rnn_behind") == {} and _comparison(lstm_only, "lstm_vs_gru") == {}
    assert _comparison(lstm_only, "2_vs_1")["holds"] == 0 and _comparison(lstm_only, "3_vs_2") == {}
    unrowed = _models({("fake", None, "lstm", 1): 1.0, ("fake", None, "gru", 1): 1.1})
    assert ce.comparisons(ce.cells(unrowed)).empty
    assert all(f.claim is None for f in ce.findings(unrowed, ce.comparisons(ce.cells(unrowed))))


# ------------------------------------------------------------------------------------------ agreement with Fig 1


def test_the_cells_within_005_of_fig1_are_counted_and_the_farthest_named():
    paper = ce.paper_table().set_index(["corpus", "arch", "layers", "budget"])["paper_ce_nats"]
    offsets = {("lstm", 1): 0.0, ("lstm", 2): 0.049, ("lstm", 3): -0.05, ("rnn", 1): 0.051, ("rnn", 2): -0.12,
               ("rnn", 3): 0.03}  # fmt: skip
    values = {("warpeace", 64, a, n): paper[("warpeace", a, n, 64)] + d for (a, n), d in offsets.items()}
    row = _comparison(values, "within_fig1")
    assert (row["holds"], row["of"], row["worst_arch"], row["worst_layers"]) == (4, 6, "rnn", 2)
    assert (row["worst_ce"], row["worst_paper"], row["worst_diff"]) == pytest.approx((1.281, 1.401, -0.120))
    verdict, text = _findings(values)["fig1-values"]
    assert verdict == "partly" and "4 of 6 cells within 0.05 nats of Fig 1" in text and "1.281 against 1.401" in text
    assert f"farthest RNN 2 x {int(row['worst_size'])} (row 64)" in text  # the cell named whole, width included
    values[("warpeace", 64, "rnn", 2)] = paper[("warpeace", "rnn", 2, 64)]  # now on Fig 1's number
    assert _comparison(values, "within_fig1")["holds"] == 5


def test_every_number_a_finding_states_is_in_the_results_tables():
    df = _models(_grid())
    comp = ce.comparisons(ce.cells(df))
    for f in ce.findings(df, comp):
        assert unsupported_numbers(sentence(f), [df, comp]) == [], sentence(f)


# ------------------------------------------------------------------------------------------ the figure


@pytest.mark.parametrize("corpora", [("warpeace",), ("warpeace", "linux")])
def test_the_figure_has_a_grid_per_corpus_with_untrained_cells_blank(corpora):
    values = {k: v for c in corpora for k, v in _grid(c).items()}
    del values[(corpora[0], 64, "rnn", 3)]  # not trained: its cell stays blank
    values[(corpora[0], 64, "lstm", 1)] += 0.2  # far from Fig 1: its difference is bold
    fig = ce.plot(_models(values))
    grids = [ax for ax in fig.axes if ax.texts]
    assert len(grids) == len(corpora)
    first = next(ax for ax in grids if ax.get_title().startswith(f"{corpora[0]}:"))
    assert len(first.texts) == 2 * 9 - 1
    assert [t.get_text() for t in first.get_xticklabels()][:4] == ["LSTM L1", "LSTM L2", "LSTM L3", "RNN L1"]
    assert [t.get_text() for t in first.get_yticklabels()] == ["64", "128"]
    assert "nats/char" in first.title.get_text() and "budget row" in first.get_ylabel()
    assert any("nats/char" in ax.get_ylabel() for ax in fig.axes)  # the colour bar
    far = {t.get_text(): t.get_fontweight() == "bold" for t in first.texts}
    texts = _texts(fig)
    plt.close(fig)
    assert far["1.500\n±0.003\nFig 1:\n1.449\nΔ +0.051"]
    assert all(is_bold == (abs(float(t.rpartition("Δ ")[2])) > ce.AGREE_NATS) for t, is_bold in far.items())
    assert not any(NAN.search(t) for t in texts)


def test_dropout_is_chosen_on_validation_and_what_it_bought_is_measured_on_test(tmp_path, artifacts):
    """One configuration at dropout 0, 0.25 and 0.5 (validation 1.00, 0.90, 0.95; test 1.30, 1.20, 1.10): validation
    chooses 0.25, though 0.5 is better on test, whose test split is then never read, and it bought 0.10 nats against
    dropout 0; a configuration trained at one dropout is not in the dropout table."""
    import numpy as np
    from conftest import fake_corpus_file, fake_neural_model

    from analyses import common, dropout_choice
    from analyses.context import Context, model_index

    corpus = fake_corpus_file(tmp_path)
    T = corpus.split("test").size - 1
    for dropout, val, test in ((0.0, 1.00, 1.30), (0.25, 0.90, 1.20), (0.5, 0.95, 1.10)):
        fake_neural_model(corpus, nll=np.full(T, test), val_loss=val, arch="lstm", size=8, dropout=dropout)
    fake_neural_model(corpus, nll=np.full(T, 1.5), arch="rnn", size=8)
    result = ce.ANALYSIS.compute(Context(model_index(), common.settings(ce.ANALYSIS, None, {"resamples": 5})))
    chosen = result.table.set_index("arch")
    assert chosen.loc["lstm", "dropout"] == 0.25 and chosen.loc["lstm", "ce_nats"] == pytest.approx(1.2, abs=1e-5)
    tried = result.tables["dropout_models"].set_index("dropout")
    assert np.isnan(tried.loc[0.5, "ce_nats"]) and not tried[["val_loss"]].isna().any().any()  # 0.5's test: unread
    (cell,) = result.tables["dropout"].itertuples()
    assert (cell.arch, cell.tried, cell.chosen) == ("lstm", "0/0.25/0.5", 0.25)
    assert cell.val_tried == "1.0000 / 0.9000 / 0.9500"  # what the choice read, in the order tried
    assert cell.bought == pytest.approx(0.1, abs=1e-5) and np.isnan(cell.diff_before)  # sized to no Fig 1 row
    (finding,) = [f for f in result.findings if "several dropouts" in f.template]
    assert "above 0 in 1" in sentence(finding) and "0.100 nats/char" in sentence(finding)
    assert dropout_choice.findings(dropout_choice.by_corpus(result.tables["dropout"].iloc[0:0])) == []
    frames = [result.table, *result.tables.values()]
    assert unsupported_numbers(sentence(finding), frames) == []  # every number it states is in a table


def test_the_gap_to_fig1_before_and_after_dropout_is_the_cells_mean():
    """Two Fig 1 cells: dropout 0 at +0.06 and +0.04 from Fig 1, the chosen dropout at +0.01 and +0.04 (dropout 0
    chosen there): the mean gap goes from +0.050 to +0.025."""
    from analyses import dropout_choice

    rows = []
    for layers, paper in ((1, 1.149), (2, 1.128)):
        for dropout, ce_nats, chosen in ((0.0, paper + (0.06 if layers == 1 else 0.04), layers == 2),
                                         (0.25, paper + (0.01 if layers == 1 else 0.07), layers == 1)):  # fmt: skip
            ids = {"model_id": f"m{layers}{dropout}", "group_id": f"g{layers}{dropout}"}
            rows.append({"corpus": "linux", "arch": "lstm", "layers": layers, "size": 128 // layers, "budget": 128.0,
                         "dropout": dropout, "seed": 0, "val_loss": 1.0, "ce_nats": ce_nats, "ce_std": 0.003,
                         "selected": chosen, **ids})  # fmt: skip
    cells = dropout_choice.per_cell(pd.DataFrame(rows), ce.fig1_by_arch())
    assert list(cells["chosen"]) == [0.25, 0.0]
    assert list(cells["bought"].round(6)) == [0.05, 0.0]
    (finding,) = dropout_choice.findings(dropout_choice.by_corpus(cells))
    assert finding.values["before"] == pytest.approx(0.05) and finding.values["after"] == pytest.approx(0.025)
    assert "from +0.050 to +0.025" in sentence(finding)
    zero = cells.assign(chosen=0.0, ce_chosen=cells["ce_zero"], bought=0.0, diff_after=cells["diff_before"])
    (finding,) = dropout_choice.findings(dropout_choice.by_corpus(zero))  # validation chose 0 in both cells
    assert sentence(finding) == (
        "linux: of 2 configurations trained at several dropouts (tried 0/0.25), validation "
        "chose one above 0 in 0; against Fig 1 in 2 of them, the mean gap stays +0.050"
    )


def test_minimal_rnns_sit_in_their_rows_of_the_grid_and_leave_sec_41s_counts_alone():
    """Issue 39: minGRU and minLSTM in the grid beside Fig 1's types (no Fig 1 number), and every comparison of sec
    4.1 counted on Fig 1's types alone, as without them."""
    values = _grid()
    extra = {("warpeace", 128, arch, n): 1.5 - 0.1 * n for arch in ("mingru", "minlstm") for n in (1, 2, 3)}
    grid = ce.cells(_models({**values, **extra}))
    minimal = grid[grid["arch"].isin(["mingru", "minlstm"])]
    assert len(minimal) == 6 and minimal["paper_ce_nats"].isna().all() and (minimal["budget"] == 128).all()
    pd.testing.assert_frame_equal(ce.comparisons(grid), ce.comparisons(ce.cells(_models(values))))
    fig = ce.plot(_models({**values, **extra}))
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks[-6:] == ["minGRU L1", "minGRU L2", "minGRU L3", "minLSTM L1", "minLSTM L2", "minLSTM L3"]
    plt.close(fig)
