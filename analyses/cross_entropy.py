"""Test cross-entropy of every neural model beside Karpathy et al. (2016) Fig 1 left, and the orderings of sec 4.1.

The question: at equal parameter budgets, how do the RNN, GRU and LSTM compare, and does depth help?

The paper's definitions (sec 4.1, Fig 1 left): a 1-layer LSTM of 64, 128, 256 or 512 cells sets a budget row, and
every model of every type and depth in that row is sized to nearly its parameter count (deeper models are
narrower). Cross-entropy is in nats per character on the test split, with the std of 100 bootstrap resamples of test
positions (< 4e-3 in Fig 1). The paper's findings: "depth of at least two is beneficial. However, between two and
three layers our results are mixed. ... the results are mixed between the LSTM and the GRU, but both significantly
outperform the RNN."

Below, in that order: compute (one row per model), cells (seeds of one configuration averaged into their Fig 1
cell, budget row x type x layers, beside Fig 1's number; with_paper is the report's view of it), orderings (sec 4.1's
three findings counted cell by cell, on our numbers and on Fig 1's numbers of the same cells), plot (per corpus,
ours as Fig 1's grid, annotated with Fig 1 and the difference), caption (the counts in words: what agrees with
sec 4.1 and what does not; how many cells are within AGREE_NATS of Fig 1 and which is farthest).
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from charlm.model import ARCH_LABELS
from charlm.predictions import LN2
from corpora.errors import run_cli

from . import dropout_choice
from .base import Analysis, Claim, Finding, Result
from .common import analysis_main, headline_id, style, whole
from .context import Context, Needs

TITLE = "Test cross-entropy of every model"
QUESTION = "How do the RNN, GRU and LSTM compare at equal parameter budgets and depths?"
ARCHS = ("rnn", "gru", "gru-paper", "lstm", "mingru", "minlstm")  # gru-paper: the papers' GRU (reset before the
# recurrent product); minGRU and minLSTM (Feng et al. 2024) sit in their budget rows beside Fig 1's types (issue 39)
PAPER_ARCH = {"gru-paper": "gru"}  # Fig 1's GRU is the papers' form; torch's `gru` is compared with it too
SETTINGS = {"split": "test", "resamples": 100}  # split scored; bootstrap resamples of positions (Fig 1: 100)
PAPER_SOURCE = "Karpathy et al. (2016), Fig. 1 left (test cross-entropy, nats/char, bootstrap std < 4e-3)"
FIG1_ORDER = ("lstm", "rnn", "gru-paper", "gru")  # Fig 1's columns: LSTM, RNN, GRU (each at 1, 2, 3 layers)
AGREE_NATS = 0.05  # a cell agrees with Fig 1 when |ours - Fig 1| <= this (issue 22: every War and Peace cell)
TIE_NATS = 0.02  # the LSTM and the GRU of one cell are tied when within this: about the seed-to-seed std of the
# reference 128-row LSTM on War and Peace (0.017 over 3 seeds, README); the bootstrap std (< 0.004) is test-set
# noise only and would call seed noise a difference

# Fig. 1 left. Rows: LSTM-width budget; columns: (type, layers). None where the paper has "-".
_PAPER = {
    "warpeace": {
        64: [1.449, 1.442, 1.540, 1.446, 1.401, 1.396, 1.398, 1.373, 1.472],
        128: [1.277, 1.227, 1.279, 1.417, 1.286, 1.277, 1.230, 1.226, 1.253],
        256: [1.189, 1.137, 1.141, 1.342, 1.256, 1.239, 1.198, 1.164, 1.138],
        512: [1.161, 1.092, 1.082, None, None, None, 1.170, 1.201, 1.077],
    },
    "linux": {
        64: [1.355, 1.331, 1.366, 1.407, 1.371, 1.383, 1.335, 1.298, 1.357],
        128: [1.149, 1.128, 1.177, 1.241, 1.120, 1.220, 1.154, 1.125, 1.150],
        256: [1.026, 0.972, 0.998, 1.171, 1.116, 1.116, 1.039, 0.991, 1.026],
        512: [0.952, 0.840, 0.846, None, None, None, 0.943, 0.861, 0.829],
    },
}


def paper_table() -> pd.DataFrame:
    """Fig 1 left as a tidy table: corpus, arch, layers, budget, paper_ce_nats (cells the paper leaves "-" absent)."""
    rows = []
    for corpus, grid in _PAPER.items():
        for budget, values in grid.items():
            for k, value in enumerate(values):
                arch, layers = ("lstm", "rnn", "gru")[k // 3], k % 3 + 1
                if value is not None:
                    rows.append(
                        {"corpus": corpus, "arch": arch, "layers": layers, "budget": budget, "paper_ce_nats": value}
                    )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------ compute


def compute(ctx: Context) -> pd.DataFrame:
    """One row per RNN / GRU / LSTM model: cross-entropy (nats and bits per char) with its bootstrap std."""
    split, resamples = ctx.settings["split"], ctx.settings["resamples"]
    rows = []
    for _, row in ctx.models(arch=ARCHS).iterrows():
        mean, std = ctx.predictions(row, split).cross_entropy(resamples)
        rows.append({
            "corpus": row["corpus"], "arch": row["arch"], "layers": int(row["layers"]), "size": int(row["size"]),
            "budget": row["budget"], "params": whole(row["params"]), "dropout": float(row["dropout"]),
            "seed": int(row["seed"]), "chars_trained": whole(row["chars_trained"]), "split": split,
            "ce_nats": mean, "ce_std": std, "ce_bits": mean / LN2, "model_id": row["model_id"],
            "group_id": row["group_id"],
        })  # fmt: skip
    cols = ["corpus", "arch", "layers", "size", "budget", "params", "dropout", "seed", "chars_trained", "split",
            "ce_nats", "ce_std", "ce_bits", "model_id", "group_id"]  # fmt: skip
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["corpus", "budget", "arch", "layers", "seed"], ignore_index=True)


def _fig1_rank(arch: str) -> int:
    return FIG1_ORDER.index(arch) if arch in FIG1_ORDER else len(FIG1_ORDER)


def cells(df: pd.DataFrame) -> pd.DataFrame:
    """Our Fig 1 grid: one row per configuration (seeds averaged, never pooled across configurations, group_id)
    with its cell (corpus, budget row, type, layers), width, parameters, mean cross-entropy, mean bootstrap std,
    seeds, Fig 1's number for that cell (NaN where Fig 1 has none: the 512-row RNNs, a model sized to no row) and
    diff_nats = ours - Fig 1 at Fig 1's 3 decimals. In Fig 1's reading order: corpus, budget row, type (LSTM, RNN,
    GRU), layers."""
    ours = df.groupby(["corpus", "arch", "layers", "budget", "group_id"], as_index=False, dropna=False).agg(
        size=("size", "first"), params=("params", "first"), dropout=("dropout", "first"), ce_nats=("ce_nats", "mean"),
        ce_std=("ce_std", "mean"), seeds=("seed", "count"),
    )  # fmt: skip
    ours["paper_arch"] = ours["arch"].replace(PAPER_ARCH)
    paper = paper_table().rename(columns={"arch": "paper_arch"})
    merged = ours.merge(paper, on=["corpus", "paper_arch", "layers", "budget"], how="left")
    # at Fig 1's precision (3 decimals), so the difference is the one a reader computes from the numbers shown
    merged["diff_nats"] = (merged["ce_nats"].round(3) - merged["paper_ce_nats"]).round(3)
    merged = merged.assign(_rank=merged["arch"].map(_fig1_rank))
    merged = merged.sort_values(["corpus", "budget", "_rank", "layers", "size"], ignore_index=True, na_position="last")
    return merged.drop(columns=["group_id", "paper_arch", "_rank"])


def fig1_by_arch() -> pd.DataFrame:
    """Fig 1 keyed by our architectures: its GRU is both the papers' form and torch's (PAPER_ARCH)."""
    paper = paper_table()
    theirs = [paper] + [paper[paper["arch"] == v].assign(arch=k) for k, v in PAPER_ARCH.items()]
    return pd.concat(theirs, ignore_index=True)


def with_paper(df: pd.DataFrame) -> pd.DataFrame:
    """The report's table: each cell of our Fig 1 grid beside Fig 1's number and the difference (ours - Fig 1);
    a blank (em dash) where Fig 1 has no number."""
    c = cells(df)
    return pd.DataFrame({
        "corpus": c["corpus"], "budget row": c["budget"].astype("Int64"), "type": c["arch"].map(_label),
        "layers": c["layers"].astype(int), "width": c["size"].astype(int), "params": c["params"].astype(int),
        "ours (nats/char)": c["ce_nats"], "bootstrap std": c["ce_std"], "Fig 1 (nats/char)": c["paper_ce_nats"],
        "ours - Fig 1": c["diff_nats"], "seeds": c["seeds"].astype(int), "dropout": c["dropout"],
    })  # fmt: skip


def _label(arch: str) -> str:
    return ARCH_LABELS.get(arch, arch)


def the_gru(archs) -> str:
    """The GRU that sec 4.1's comparisons use: the papers' form where trained, else torch's."""
    return "gru-paper" if "gru-paper" in set(archs) else "gru"


def orderings(values: pd.Series, gru: str) -> dict[str, list[float]]:
    """Sec 4.1's findings, cell by cell, on one corpus's numbers indexed by (budget row, arch, layers) (NaN: no
    number). Each entry lists one signed margin per comparison that the cells allow, > 0 where the finding holds:

    rnn_behind      per (row, depth) with the RNN, LSTM and `gru`: RNN - the worse of the other two (> 0: behind both)
    lstm_minus_gru  per (row, depth) with the LSTM and `gru`: LSTM - GRU (> 0: the GRU is ahead)
    2_vs_1, 3_vs_2  per (type, row) with both depths: shallower - deeper (> 0: the deeper is ahead)
    """
    at = {key: float(v) for key, v in values.dropna().items()}
    rows_depths = sorted({(b, n) for b, _, n in at})
    out = {"rnn_behind": [], "lstm_minus_gru": [], "2_vs_1": [], "3_vs_2": []}
    for b, n in rows_depths:
        rnn, lstm, g = at.get((b, "rnn", n)), at.get((b, "lstm", n)), at.get((b, gru, n))
        if None not in (rnn, lstm, g):
            out["rnn_behind"].append(rnn - max(lstm, g))
        if None not in (lstm, g):
            out["lstm_minus_gru"].append(lstm - g)
    for (b, arch, n), value in sorted(at.items()):
        if n in (2, 3) and (b, arch, n - 1) in at:
            out[f"{n}_vs_{n - 1}"].append(at[(b, arch, n - 1)] - value)
    return out


# ------------------------------------------------------------------------------------ plot


def _row_label(budget, size) -> str:
    return f"{int(budget)}" if pd.notna(budget) else f"none (width {int(size)})"


def _grid(sub: pd.DataFrame) -> tuple[list, list, dict]:
    """Rows (budget rows, then models sized to no row), columns (type x layers: every type here at every depth
    here, so an untrained cell is a blank) and the cell values of one corpus."""
    sub = sub.assign(row=[_row_label(b, s) for b, s in zip(sub["budget"], sub["size"])])
    ordered = sub.sort_values(["budget", "size"], na_position="last")
    rows = list(dict.fromkeys(ordered["row"]))
    archs = sorted(sub["arch"].unique(), key=_fig1_rank)
    columns = [(a, n) for a in archs for n in sorted(sub["layers"].unique())]
    values = {(r, a, n): g for (r, a, n), g in sub.groupby(["row", "arch", "layers"])}
    return rows, columns, values


def _annotation(g: pd.DataFrame) -> str:
    """A cell's text: ours, its bootstrap std, Fig 1's and the difference, a short line each, so that Fig 1's nine
    columns stand across the report's 7.5 in at 7 pt."""
    ours = f"{g['ce_nats'].mean():.3f}\n±{g['ce_std'].mean():.3f}"
    paper = g["paper_ce_nats"].dropna()
    if paper.empty:
        return f"{ours}\nFig 1: —"
    diff = g["diff_nats"].mean()
    return f"{ours}\nFig 1:\n{paper.iloc[0]:.3f}\nΔ {diff:+.3f}"


def plot(df: pd.DataFrame):
    """Per corpus, ours as Fig 1's grid (budget rows x type and layers), coloured by our cross-entropy and annotated
    "ours ± bootstrap std / Fig 1 / Δ = ours - Fig 1"; a Δ beyond AGREE_NATS in bold; untrained cells blank."""
    style()
    table = cells(df)
    corpora_ = sorted(table["corpus"].unique())
    grids = {c: _grid(table[table["corpus"] == c]) for c in corpora_}
    n_cols = max((len(g[1]) for g in grids.values()), default=1)
    heights = [1.45 + 0.62 * len(g[0]) for g in grids.values()] or [2.07]
    # 0.62 in a column: Fig 1's nine (three types at three depths) fill the report's 7.5 in, printed at 7 pt (issue 36)
    fig, axes = plt.subplots(
        max(1, len(corpora_)), 1, figsize=(max(5.0, 1.9 + 0.62 * n_cols), sum(heights)), squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )  # fmt: skip
    for ax, corpus in zip(axes[:, 0], corpora_):
        rows, columns, values = grids[corpus]
        grid = np.full((len(rows), len(columns)), np.nan)
        labels = np.full(grid.shape, "", dtype=object)
        for i, r in enumerate(rows):
            for j, (a, n) in enumerate(columns):
                if (r, a, n) in values:
                    grid[i, j] = values[(r, a, n)]["ce_nats"].mean()
                    labels[i, j] = _annotation(values[(r, a, n)])
        frame = pd.DataFrame(grid, index=rows, columns=[f"{_label(a)} L{n}" for a, n in columns])
        sns.heatmap(
            frame, annot=labels, fmt="", cmap="viridis_r", ax=ax, linewidths=0.5, linecolor="white",
            annot_kws={"fontsize": 7}, cbar_kws={"label": "ours: test nats/char", "fraction": 0.04, "pad": 0.02},
        )  # fmt: skip
        for text in ax.texts:
            delta = text.get_text().rpartition("Δ ")[2]
            if delta != text.get_text() and abs(float(delta)) > AGREE_NATS:
                text.set_fontweight("bold")
        ax.set_title(
            f"{corpus}: test cross-entropy (nats/char)\nours ± bootstrap std / Fig 1 / Δ = ours − Fig 1 "
            f"(bold: |Δ| > {AGREE_NATS}; blank: not trained)",
            fontsize=8,
        )
        ax.grid(False)  # an untrained cell is blank, not crossed by the style's grid lines
        ax.set_xlabel("model type and layers (Karpathy et al. Fig 1 left)" if corpus == corpora_[-1] else "")
        ax.set_ylabel("budget row\n(1-layer LSTM width)")
        plt.setp(ax.get_xticklabels(), rotation=25, ha="right", rotation_mode="anchor", fontsize=7.5)
        ax.tick_params(axis="y", rotation=0)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------ findings


def comparisons(grid: pd.DataFrame) -> pd.DataFrame:
    """Sec 4.1's findings counted cell by cell, per corpus, on our numbers and on Fig 1's for the same cells: one
    row per (corpus, comparison) with the count that holds, the count that allows it, Fig 1's count, and for the
    LSTM against the GRU the ties (within TIE_NATS) and who is ahead. Every number a finding states is here."""
    rows = []
    fig1 = grid["budget"].notna() & grid["arch"].isin(FIG1_ORDER)  # minGRU / minLSTM sit in the grid, not in sec 4.1
    for corpus, sub in grid[fig1].groupby("corpus"):
        gru = the_gru(sub["arch"])
        by_cell = sub.groupby(["budget", "arch", "layers"])[["ce_nats", "paper_ce_nats"]].mean()
        ours, paper = orderings(by_cell["ce_nats"], gru), orderings(by_cell["paper_ce_nats"], gru)
        for what in ("rnn_behind", "2_vs_1", "3_vs_2"):
            if ours[what]:
                rows.append({"corpus": corpus, "comparison": what, "holds": sum(m > 0 for m in ours[what]),
                             "of": len(ours[what]), "paper_holds": sum(m > 0 for m in paper[what]),
                             "paper_of": len(paper[what]), "smallest_margin": min(ours[what])})  # fmt: skip
        gaps, fig1 = ours["lstm_minus_gru"], paper["lstm_minus_gru"]
        if gaps:
            rows.append({"corpus": corpus, "comparison": "lstm_vs_gru", "of": len(gaps), "threshold": TIE_NATS,
                         "holds": sum(abs(g) <= TIE_NATS for g in gaps), "gru_ahead": sum(g > TIE_NATS for g in gaps),
                         "lstm_ahead": sum(g < -TIE_NATS for g in gaps),
                         "paper_holds": sum(abs(g) <= TIE_NATS for g in fig1), "paper_of": len(fig1),
                         "paper_gru_ahead": sum(g > TIE_NATS for g in fig1)})  # fmt: skip
        paired = sub[sub["paper_ce_nats"].notna()]
        if len(paired):
            worst = paired.loc[paired["diff_nats"].abs().idxmax()]
            rows.append({"corpus": corpus, "comparison": "within_fig1", "of": len(paired), "threshold": AGREE_NATS,
                         "holds": int((paired["diff_nats"].abs() <= AGREE_NATS + 1e-9).sum()),
                         "mean_diff": paired["diff_nats"].mean(), "worst_arch": worst["arch"],
                         "worst_layers": int(worst["layers"]), "worst_size": int(worst["size"]),
                         "worst_budget": int(worst["budget"]),
                         "worst_ce": round(worst["ce_nats"], 3), "worst_paper": worst["paper_ce_nats"],
                         "worst_diff": worst["diff_nats"]})  # fmt: skip
    return pd.DataFrame(rows)


def _verdict(holds: int, of: int) -> str:
    return "reproduced" if holds == of else ("partly" if holds * 2 >= of else "not reproduced")


def findings(df: pd.DataFrame, comp: pd.DataFrame) -> list[Finding]:
    """Per corpus: Fig 1's values, then sec 4.1's three orderings (the claims), then the best model (new)."""
    out = []
    for _, c in comp.iterrows():
        v = {k: c[k] for k in c.index if pd.notna(c[k])}
        corpus, what = c["corpus"], c["comparison"]
        if what == "within_fig1":
            v["worst"] = (
                f"{_label(c['worst_arch'])} {int(c['worst_layers'])} x {int(c['worst_size'])} "
                f"(row {int(c['worst_budget'])})"
            )
            out.append(Finding(
                "{corpus}: {holds} of {of} cells within {threshold} nats of Fig 1 (mean difference {mean_diff:+.3f}); "
                "farthest {worst}, {worst_ce:.3f} against {worst_paper:.3f}", v, _verdict(c["holds"], c["of"]),
                "fig1-values", corpus))  # fmt: skip
        elif what == "rnn_behind":
            out.append(Finding("{corpus}: the RNN trails both gated networks in {holds} of {of} cells (Fig 1, same "
                               "cells: {paper_holds} of {paper_of})", v, _verdict(c["holds"], c["of"]),
                               "fig1-rnn-behind", corpus))  # fmt: skip
        elif what == "lstm_vs_gru":
            mixed = c["gru_ahead"] > 0 and c["lstm_ahead"] > 0 or c["holds"] > 0
            out.append(Finding("{corpus}: LSTM and GRU within {threshold} nats in {holds} of {of} cells, the GRU "
                               "ahead in {gru_ahead}, the LSTM in {lstm_ahead} (Fig 1: {paper_holds} within, the GRU "
                               "ahead in {paper_gru_ahead})", v, "reproduced" if mixed else "not reproduced",
                               "fig1-lstm-gru", corpus))  # fmt: skip
        elif what == "2_vs_1":
            out.append(Finding("{corpus}: 2 layers beat 1 in {holds} of {of} (type, row) pairs (Fig 1: {paper_holds} "
                               "of {paper_of})", v, _verdict(c["holds"], c["of"]), "fig1-depth-2", corpus))  # fmt: skip
        elif what == "3_vs_2":
            # reproduced: mixed as sec 4.1 says, or the same count as Fig 1's own cells (its Linux 3-layer nets lose
            # every pair: "mixed" is its prose over both corpora)
            same = abs(c["holds"] - c.get("paper_holds", -9)) <= 1 and c.get("paper_of") == c["of"]
            mixed = 0 < c["holds"] < c["of"]
            out.append(Finding("{corpus}: 3 layers beat 2 in {holds} of {of} pairs (Fig 1: {paper_holds} of "
                               "{paper_of})", v, "reproduced" if mixed or same else "not reproduced", "fig1-depth-3",
                               corpus))  # fmt: skip
    for _, h in headlines(df).iterrows():
        v = {"corpus": h["corpus"], "layers": int(h["layers"]), "type": _label(h["arch"]), "size": int(h["size"]),
             "seed": int(h["seed"]), "ce": h["ce_nats"], "gap": h["gap_to_best"], "best_layers": int(h["best_layers"]),
             "best_size": int(h["best_size"])}  # fmt: skip
        where = ("the best {type} here" if h["gap_to_best"] == 0 else
                 "{gap:.3f} nats behind the best {type} here ({best_layers} layers, width {best_size})")  # fmt: skip
        out.append(Finding("{corpus}: the model the other sections detail is the {layers}-layer {type} of width "
                           "{size}, seed {seed}, at {ce:.3f} nats/char: " + where, v, corpus=h["corpus"]))  # fmt: skip
    for corpus, sub in df.groupby("corpus"):
        best = sub.loc[sub["ce_nats"].idxmin()]
        out.append(
            Finding(
                "{corpus}: the best network is the {layers}-layer {type} of width {size} at {ce:.3f} +- "
                "{std:.3f} nats/char",
                {
                    "corpus": corpus,
                    "layers": int(best["layers"]),
                    "type": _label(best["arch"]),
                    "size": int(best["size"]),
                    "ce": best["ce_nats"],
                    "std": best["ce_std"],
                },
                corpus=corpus,
            )
        )
    return out


def headlines(df: pd.DataFrame) -> pd.DataFrame:
    """Per corpus, the headline model the other sections detail (analyses.common.headline_id: largest budget row,
    deepest, lowest seed; by the rule, not by the test set) and its gap to the best model of its type here."""
    rows = []
    for corpus, sub in df.groupby("corpus"):
        h = sub[sub["model_id"] == headline_id(sub)].iloc[0]
        same = sub[sub["arch"] == h["arch"]]
        best = same.loc[same["ce_nats"].idxmin()]
        rows.append({"corpus": corpus, "model_id": h["model_id"], "arch": h["arch"], "layers": int(h["layers"]),
                     "size": int(h["size"]), "seed": int(h["seed"]), "ce_nats": h["ce_nats"],
                     "best_layers": int(best["layers"]), "best_size": int(best["size"]),
                     "gap_to_best": round(h["ce_nats"] - best["ce_nats"], 6)})  # fmt: skip
    return pd.DataFrame(rows)


class CrossEntropy(Analysis):
    name = "cross_entropy"
    needs = Needs(dropouts="chosen and 0")  # dropout_choice.measure reads dropout 0 beside the chosen one
    title = TITLE
    question = QUESTION
    source = PAPER_SOURCE
    settings = SETTINGS
    claims = (
        Claim("fig1-values", "Karpathy et al. (2016) Fig 1 left", "test cross-entropy of each budget row's models",
              "e.g. War and Peace LSTM 1 x 128: 1.277"),
        Claim("fig1-rnn-behind", "Karpathy et al. (2016) sec 4.1", "LSTM and GRU both clearly outperform the RNN"),
        Claim("fig1-lstm-gru", "Karpathy et al. (2016) sec 4.1", "results are mixed between the LSTM and the GRU"),
        Claim("fig1-depth-2", "Karpathy et al. (2016) sec 4.1", "depth of at least two is beneficial"),
        Claim("fig1-depth-3", "Karpathy et al. (2016) sec 4.1", "between two and three layers results are mixed"),
    )  # fmt: skip
    shows = (
        "Our test cross-entropy in Fig 1's grid (budget rows by type and depth), each cell annotated with ours, "
        "Fig 1's and the difference; deeper models in a row are narrower (equal parameters); minGRU and minLSTM (Feng "
        "et al. 2024) sit in their rows after Fig 1's types, with no Fig 1 number and outside sec 4.1's counts."
    )
    deviations = (
        "Our Linux corpus is the 6.1 kernel's kernel/ folder cut to the paper's length, not the paper's file; our "
        "KenLM n-grams on it trail Table 2 by less than the networks trail Fig 1 (the ngram section).",
        "What else holds the Linux grid behind Fig 1, measured (docs/measurements.md): not our 16 streams a batch (the "
        "paper's 100 end behind them at 50 epochs); about half of it is training the recipe's 50-epoch cap stops while "
        "the Linux models still gain from the decaying rate (the convergence section), which the paper stopped at too.",
        "Bootstrap standard deviations (100 resamples of test positions) measure test-set noise only, not "
        "seed-to-seed variation (about 0.02 nats for the 128-row LSTM over 3 seeds).",
    )

    def compute(self, ctx: Context) -> Result:
        df = compute(ctx)
        comp = comparisons(cells(df))
        split, resamples = ctx.settings["split"], ctx.settings["resamples"]
        tried = dropout_choice.measure(ctx, ARCHS, split, resamples)  # every dropout of a configuration with several
        dropout = dropout_choice.per_cell(tried, fig1_by_arch())
        chosen = dropout_choice.by_corpus(dropout)
        return Result(df, findings(df, comp) + dropout_choice.findings(chosen),
                      tables={"comparisons": comp, "headline": headlines(df), "dropout_models": tried,
                              "dropout": dropout, "dropout_by_corpus": chosen})  # fmt: skip

    def plot(self, result: Result):
        return plot(result.table)

    def summary_table(self, result: Result) -> pd.DataFrame:
        """Per corpus and comparison of sec 4.1: ours against Fig 1's count for the same cells."""
        comp = result.tables["comparisons"]
        if comp.empty:
            return comp
        names = {
            "within_fig1": "within 0.05 of Fig 1",
            "rnn_behind": "RNN behind LSTM and GRU",
            "lstm_vs_gru": "LSTM and GRU within 0.02",
            "2_vs_1": "2 layers beat 1",
            "3_vs_2": "3 layers beat 2",
        }
        return pd.DataFrame(
            {
                "corpus": comp["corpus"],
                "comparison": comp["comparison"].map(names),
                "ours": comp["holds"].astype(int).astype(str) + " of " + comp["of"].astype(int).astype(str),
                "Fig 1, same cells": [
                    f"{int(h)} of {int(o)}" if pd.notna(h) and pd.notna(o) else "—"
                    for h, o in zip(comp["paper_holds"], comp["paper_of"])
                ],
            }
        )

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        out = {"every cell of Fig 1's grid, beside Fig 1": with_paper(result.table)}
        dropout = result.tables.get("dropout")
        if dropout is not None and len(dropout):
            out["dropout chosen on validation, and what it bought on test against dropout 0"] = dropout
        return out


ANALYSIS = CrossEntropy()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
