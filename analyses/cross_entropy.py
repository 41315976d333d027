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

from .common import BRIEF_TRAINING, analysis_main, headline_id, style
from .context import Context

TITLE = "Test cross-entropy of every model"
QUESTION = "How do the RNN, GRU and LSTM compare at equal parameter budgets and depths?"
ARCHS = ("rnn", "gru", "gru-paper", "lstm")  # gru-paper: the papers' GRU (reset before the recurrent product)
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
            "budget": row["budget"], "params": int(row["params"]), "dropout": float(row["dropout"]),
            "seed": int(row["seed"]), "chars_trained": int(row["chars_trained"]), "split": split,
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
        size=("size", "first"), params=("params", "first"), ce_nats=("ce_nats", "mean"), ce_std=("ce_std", "mean"),
        seeds=("seed", "count"),
    )  # fmt: skip
    ours["paper_arch"] = ours["arch"].replace(PAPER_ARCH)
    paper = paper_table().rename(columns={"arch": "paper_arch"})
    merged = ours.merge(paper, on=["corpus", "paper_arch", "layers", "budget"], how="left")
    # at Fig 1's precision (3 decimals), so the difference is the one a reader computes from the numbers shown
    merged["diff_nats"] = (merged["ce_nats"].round(3) - merged["paper_ce_nats"]).round(3)
    merged = merged.assign(_rank=merged["arch"].map(_fig1_rank))
    merged = merged.sort_values(["corpus", "budget", "_rank", "layers", "size"], ignore_index=True, na_position="last")
    return merged.drop(columns=["group_id", "paper_arch", "_rank"])


def with_paper(df: pd.DataFrame) -> pd.DataFrame:
    """The report's table: each cell of our Fig 1 grid beside Fig 1's number and the difference (ours - Fig 1);
    a blank (em dash) where Fig 1 has no number."""
    c = cells(df)
    return pd.DataFrame({
        "corpus": c["corpus"], "budget row": c["budget"].astype("Int64"), "type": c["arch"].map(_label),
        "layers": c["layers"].astype(int), "width": c["size"].astype(int), "params": c["params"].astype(int),
        "ours (nats/char)": c["ce_nats"], "bootstrap std": c["ce_std"], "Fig 1 (nats/char)": c["paper_ce_nats"],
        "ours - Fig 1": c["diff_nats"], "seeds": c["seeds"].astype(int),
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
    ours = f"{g['ce_nats'].mean():.3f}±{g['ce_std'].mean():.3f}"
    paper = g["paper_ce_nats"].dropna()
    if paper.empty:
        return f"{ours}\nFig 1: —"
    diff = g["diff_nats"].mean()
    return f"{ours}\nFig 1: {paper.iloc[0]:.3f}\nΔ {diff:+.3f}"


def plot(df: pd.DataFrame):
    """Per corpus, ours as Fig 1's grid (budget rows x type and layers), coloured by our cross-entropy and annotated
    "ours ± bootstrap std / Fig 1 / Δ = ours - Fig 1"; a Δ beyond AGREE_NATS in bold; untrained cells blank."""
    style()
    table = cells(df)
    corpora_ = sorted(table["corpus"].unique())
    grids = {c: _grid(table[table["corpus"] == c]) for c in corpora_}
    n_cols = max((len(g[1]) for g in grids.values()), default=1)
    heights = [2.0 + 0.6 * len(g[0]) for g in grids.values()] or [2.6]
    fig, axes = plt.subplots(
        max(1, len(corpora_)), 1, figsize=(max(6.0, 2.4 + 0.85 * n_cols), sum(heights)), squeeze=False,
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
            annot_kws={"fontsize": 7}, cbar_kws={"label": "ours: test nats/char"},
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
        ax.set_xlabel("model type and layers (Karpathy et al. Fig 1 left)")
        ax.set_ylabel("budget row\n(1-layer LSTM width)")
        ax.tick_params(axis="x", rotation=30, labelsize=8)
        ax.tick_params(axis="y", rotation=0)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------ caption


def _k_of_m(margins: list[float]) -> str:
    return f"{sum(m > 0 for m in margins)} of {len(margins)}"


def _fig1(paper: list[float], what: str, ours: list[float]) -> str:
    """Fig 1's count for the same comparisons, in parentheses ("like ours" when it is ours); nothing when Fig 1 has
    none of them."""
    like = ", like ours" if _k_of_m(paper) == _k_of_m(ours) else ""
    return f" (Fig 1, same {what}: {_k_of_m(paper)}{like})" if paper else ""


def _types_clause(ours: dict, paper: dict, gru: str) -> list[str]:
    """Sec 4.1: "mixed between the LSTM and the GRU, but both significantly outperform the RNN"."""
    name, out = _label(gru), []
    behind = ours["rnn_behind"]
    if behind:
        k = sum(m > 0 for m in behind)
        margin = f", by {min(m for m in behind if m > 0):.3f} nats or more" if k else ""
        verdict = "as sec 4.1 finds" if k == len(behind) else "where sec 4.1 finds both ahead of the RNN"
        out.append(
            f"the RNN trails both the LSTM and the {name} in {_k_of_m(behind)} (row, depth) cells{margin}"
            f"{_fig1(paper['rnn_behind'], 'cells', behind)}, {verdict}"
        )
    gaps, fig1 = ours["lstm_minus_gru"], paper["lstm_minus_gru"]
    if len(gaps) == 1:
        theirs = f" (Fig 1: {fig1[0]:+.3f})" if fig1 else ""
        out.append(f"LSTM - {name} is {gaps[0]:+.3f} nats in the one cell holding both{theirs}")
    elif gaps:

        def split(values: list[float]) -> tuple[int, int, int]:
            return sum(v > TIE_NATS for v in values), sum(v < -TIE_NATS for v in values), len(values)

        gru_ahead, lstm_ahead, m = split(gaps)
        tied = m - gru_ahead - lstm_ahead
        if gru_ahead and lstm_ahead:
            verdict = "mixed, as in sec 4.1"
        elif gru_ahead or lstm_ahead:
            verdict = (
                f"the {'GRU' if gru_ahead else 'LSTM'} ahead or tied in every cell, where sec 4.1 finds them mixed"
            )
        else:
            verdict = "tied throughout, consistent with sec 4.1's mixed results"
        theirs = ""
        if fig1:
            g, l_, n = split(fig1)
            like = ", like ours" if (g, l_, n) == (gru_ahead, lstm_ahead, m) else ""
            theirs = f" (Fig 1, same cells: {n - g - l_} within, the GRU ahead in {g}, the LSTM in {l_}{like})"
        out.append(
            f"the LSTM and the {name} are within {TIE_NATS} nats of each other (our tie: about the seed-to-seed std) "
            f"in {tied} of {m} cells, the GRU ahead in {gru_ahead} and the LSTM in {lstm_ahead}{theirs}: {verdict}"
        )
    return out


def _depth_clause(ours: dict, paper: dict, depths: list[int]) -> list[str]:
    """Sec 4.1: "depth of at least two is beneficial. However, between two and three layers our results are mixed"."""
    out = []
    two = ours["2_vs_1"]
    if two:
        k = sum(m > 0 for m in two)
        verdict = "as sec 4.1 finds" if k == len(two) else "where sec 4.1 finds two layers beneficial throughout"
        fig1 = _fig1(paper["2_vs_1"], "pairs", two)
        out.append(f"2 layers beat 1 in {_k_of_m(two)} (type, row) pairs{fig1}, {verdict}")
    three = ours["3_vs_2"]
    if three:
        k = sum(m > 0 for m in three)
        if len(three) == 1:
            verdict = "one pair, too few to call mixed"
        elif 0 < k < len(three):
            verdict = "mixed, as in sec 4.1"
        else:
            verdict = f"{'always' if k else 'never'}, where sec 4.1 finds two against three layers mixed"
        out.append(f"3 layers beat 2 in {_k_of_m(three)} pairs{_fig1(paper['3_vs_2'], 'pairs', three)}: {verdict}")
    if not two and not three:
        which = f"every model here has {depths[0]} layer{'s' * (depths[0] != 1)}" if len(depths) == 1 else (
            "no type and row here has two consecutive depths"
        )  # fmt: skip
        out.append(f"{which}, so sec 4.1's findings on depth are not tested")
    return out


def ordering_sentence(corpus: str, sub: pd.DataFrame) -> str:
    """One sentence on what our ordering of types and depths (budget rows only) agrees or disagrees with in sec 4.1,
    each count beside Fig 1's count for the same cells; only comparisons the cells allow."""
    rowed = sub[sub["budget"].notna()]
    if rowed.empty:
        return f"On {corpus} no model is sized to a budget row, so sec 4.1's orderings are not tested."
    gru = the_gru(rowed["arch"])
    # one number per cell: a cell holds one configuration in every profile (one recipe per corpus, dropout chosen)
    by_cell = rowed.groupby(["budget", "arch", "layers"])[["ce_nats", "paper_ce_nats"]].mean()
    ours, paper = orderings(by_cell["ce_nats"], gru), orderings(by_cell["paper_ce_nats"], gru)
    clauses = _types_clause(ours, paper, gru)
    if not clauses:
        clauses = [f"no (row, depth) cell here holds the LSTM beside the {_label(gru)}, so sec 4.1's comparison "
                   "of types is not tested"]  # fmt: skip
    clauses += _depth_clause(ours, paper, sorted(int(n) for n in rowed["layers"].unique()))
    return f"Against Karpathy et al. sec 4.1 on {corpus}: " + "; ".join(clauses) + "."


def agreement_sentence(corpus: str, sub: pd.DataFrame) -> str:
    """How many of our cells are within AGREE_NATS of Fig 1, and the farthest one."""
    paired = sub[sub["paper_ce_nats"].notna()]
    if paired.empty:
        return f"No model on {corpus} sits in a cell of Fig 1 that has a number, so none is compared with it."
    within = int((paired["diff_nats"].abs() <= AGREE_NATS + 1e-9).sum())
    worst = paired.loc[paired["diff_nats"].abs().idxmax()]
    target = " (the target: all of them)" if corpus == "warpeace" else ""
    return (
        f"{within} of {len(paired)} cells are within {AGREE_NATS} nats of Fig 1{target}; the farthest is the "
        f"{int(worst['layers'])}-layer {_label(worst['arch'])} of budget row {int(worst['budget'])} at "
        f"{worst['ce_nats']:.3f} against {worst['paper_ce_nats']:.3f} ({worst['diff_nats']:+.3f} nats), and the "
        f"mean difference is {paired['diff_nats'].mean():+.3f} nats."
    )


def _headline_sentence(sub: pd.DataFrame) -> str:
    """Where the model the other sections detail (the headline LSTM, analyses.common.headline_id) stands."""
    h = sub[sub["model_id"] == headline_id(sub)].iloc[0]
    lstm = sub[sub["arch"] == h["arch"]]
    best = lstm.loc[lstm["ce_nats"].idxmin()]
    name = f"{int(h['layers'])}-layer {_label(h['arch'])} of width {int(h['size'])}"
    where = (
        f"the best {_label(h['arch'])} here"
        if best["model_id"] == h["model_id"]
        else f"{h['ce_nats'] - best['ce_nats']:.3f} nats behind the best {_label(h['arch'])} here (the "
        f"{int(best['layers'])}-layer of width {int(best['size'])}, seed {int(best['seed'])})"
    )
    return (
        f"The headline model the other sections detail (largest budget row, deepest, lowest seed) is the {name}, seed "
        f"{int(h['seed'])}, at {h['ce_nats']:.3f} nats/char: {where}."
    )


def caption(df: pd.DataFrame) -> str:
    parts = []
    grid = cells(df)
    for corpus, sub in df.groupby("corpus"):
        best = sub.loc[sub["ce_nats"].idxmin()]
        by_type = sub.groupby("arch")["ce_nats"].min().sort_values()
        ranking = " < ".join(f"{_label(a)} {v:.3f}" for a, v in by_type.items())
        row = f"budget row {int(best['budget'])}" if pd.notna(best["budget"]) else "sized to no budget row"
        parts.append(
            f"On {corpus} the best model is the {int(best['layers'])}-layer {_label(best['arch'])} of width "
            f"{int(best['size'])} ({int(best['params']):,} parameters, {row}) at "
            f"{best['ce_nats']:.3f} +- {best['ce_std']:.3f} nats/char ({best['ce_bits']:.3f} bits); best per type: "
            f"{ranking}."
        )
        parts.append(_headline_sentence(sub))
        cells_here = grid[grid["corpus"] == corpus]
        parts.append(ordering_sentence(corpus, cells_here))
        parts.append(agreement_sentence(corpus, cells_here))
    parts.append(
        "Every model of a budget row has nearly the parameters of a 1-layer LSTM of that width (Karpathy et al. "
        "sec 4.1), so deeper models are narrower. Bootstrap standard deviations (100 resamples of test positions) "
        "measure test-set noise only, not seed-to-seed variation."
    )
    return " ".join(parts)


def summary(df: pd.DataFrame) -> str:
    best = df.loc[df.groupby("corpus")["ce_nats"].idxmin()]
    grid = cells(df)
    items = []
    for _, r in best.iterrows():
        match = grid[(grid["corpus"] == r["corpus"]) & (grid["arch"] == r["arch"]) & (grid["layers"] == r["layers"])
                     & (grid["budget"] == r["budget"]) & grid["paper_ce_nats"].notna()]  # fmt: skip
        theirs = f" (paper, same cell: {match['paper_ce_nats'].iloc[0]:.3f})" if not match.empty else ""
        paired = grid[(grid["corpus"] == r["corpus"]) & grid["paper_ce_nats"].notna()]
        within = (paired["diff_nats"].abs() <= AGREE_NATS + 1e-9).sum()
        agree = f", {within} of {len(paired)} cells within {AGREE_NATS} of Fig 1" if len(paired) else ""
        items.append(
            f"{r['corpus']}: best {_label(r['arch'])} L{int(r['layers'])} {r['ce_nats']:.3f} nats{theirs}{agree}"
        )
    return "; ".join(items)


def notes(df: pd.DataFrame) -> list[str]:
    """What a reader must know before comparing with the paper."""
    out = []
    budgets = sorted(df["chars_trained"].unique())
    if budgets and budgets[-1] < BRIEF_TRAINING:
        out.append(
            f"These models saw {', '.join(f'{b:,}' for b in budgets)} training characters, a fraction of the paper's "
            "50 epochs with early stopping (about 130M characters on War and Peace): they are far from converged, so "
            "their cross-entropies sit well above the paper's. Compare the ordering of types, not the values."
        )
    if "linux" in set(df["corpus"]):
        out.append(
            "Our Linux corpus is built from the 6.1 kernel's kernel/ folder with the paper's recipe and length; the "
            "paper's own file came from an older kernel, so Linux numbers can differ slightly even at convergence."
        )
    return out


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
