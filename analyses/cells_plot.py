"""The figure of the `cells` analysis (analyses/cells.py), one A4 page: per corpus, the best single cell of each
architecture alone on each feature and what the state's probe reads beyond the last characters; below, Fig 2's view:
the headline model's best cells coloured by tanh(c) on test text."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from charlm.archs import names
from charlm.model import ARCH_LABELS
from probes.view import display_chars, strip_axes

from . import cells_probing
from .common import style

FONT = 7  # points: the smallest text of the figure
FAMILY_COLOURS = {
    "LSTM": "#1b6ca8",
    "GRU": "#e08214",
    "RNN": "#7a7a7a",
    "Levy's ablations": "#5aae61",
    "others": "#9467bd",
}  # others: minGRU, minLSTM, the ladder's rungs
STRIPS = 4  # text strips at most (Fig 2's view), split between the corpora
STRIP_WIDTH, STRIP_LINES = 100, 3  # characters per line and lines of a strip


def _records(df: pd.DataFrame, record: str) -> pd.DataFrame:
    return df[df["record"] == record].reset_index(drop=True) if "record" in df else df.iloc[0:0]


def _family(arch: str) -> str:
    if arch in names(ablation=True):
        return "Levy's ablations"
    return {"lstm": "LSTM", "gru": "GRU", "gru-paper": "GRU", "rnn": "RNN"}.get(arch, "others")


def _last_k(df: pd.DataFrame) -> int | None:
    ks = sorted(int(c[len("selectivity_last") :]) for c in df if c.startswith("selectivity_last"))
    return ks[-1] if ks else None


def _heatmap(ax, cells: pd.DataFrame, corpus: str, features: list[str], cax, label_rows: bool) -> None:
    """Architecture x feature: the best single cell alone (any model of the architecture, any layer), annotated
    with it and how many of the architecture's models have a cell that passes."""
    sub = cells[cells["corpus"] == corpus]
    rank = {a: k for k, a in enumerate(cells_probing.ARCH_ORDER)}
    archs = sorted(sub["arch"].unique(), key=lambda a: rank.get(a, len(rank)))
    best = sub.groupby(["arch", "feature"])["best_cell_score"].max()
    passing = (
        sub.groupby(["arch", "feature", "model_id"])["found"].max().groupby(["arch", "feature"]).agg(["sum", "size"])
    )
    grid = np.full((len(archs), len(features)), np.nan)
    notes = np.full(grid.shape, "", dtype=object)
    for i, a in enumerate(archs):
        for j, f in enumerate(features):
            if (a, f) in best.index:
                grid[i, j] = best[(a, f)]
                n = passing.loc[(a, f)]
                notes[i, j] = f"{best[(a, f)]:.2f}\n{int(n['sum'])}/{int(n['size'])}"
    frame = pd.DataFrame(grid, index=[ARCH_LABELS.get(a, a) for a in archs], columns=features)
    sns.heatmap(frame, annot=notes, fmt="", cmap="YlGnBu", vmin=0, vmax=1, ax=ax, cbar=cax is not None, cbar_ax=cax,
                annot_kws={"fontsize": FONT}, linewidths=0.5, linecolor="white",
                cbar_kws={"label": "best single cell alone (bal. acc. or R²)"})  # fmt: skip
    if cax is not None:
        cax.tick_params(labelsize=FONT)
        cax.yaxis.label.set_size(FONT)
    ax.grid(False)
    ax.set_title(f"{corpus}: the best single cell alone\n(and models with one passing / models)", fontsize=8)
    ax.set_xlabel("")
    ax.set_ylabel("architecture" if label_rows else "", fontsize=FONT)
    ax.tick_params(axis="x", rotation=35, labelsize=FONT)
    ax.tick_params(axis="y", rotation=0, labelsize=FONT)
    for t in ax.get_xticklabels():
        t.set_ha("right")


def _leads(ax, cells: pd.DataFrame, corpus: str, features: list[str], k: int, label_rows: bool) -> None:
    """Per feature, one point per model and layer: the cell state's probe minus the probe on the last k chars."""
    sub = cells[cells["corpus"] == corpus]
    rng = np.random.default_rng(0)
    for family, colour in FAMILY_COLOURS.items():
        mine = sub[sub["arch"].map(_family) == family]
        if mine.empty:
            continue
        x = mine["feature"].map({f: j for j, f in enumerate(features)}).to_numpy(dtype=float)
        x = x + rng.uniform(-0.25, 0.25, size=x.size)
        ax.scatter(x, mine[f"selectivity_last{k}"], s=9, color=colour, alpha=0.75, linewidths=0, label=family)
    ax.axhline(0, color="#333", linewidth=0.6)
    ax.set_xticks(range(len(features)), features, rotation=35, ha="right", fontsize=FONT)
    ax.set_xlim(-0.6, len(features) - 0.4)
    ax.tick_params(axis="y", labelsize=FONT)
    ax.set_ylabel(f"probe − probe on last {k} chars" if label_rows else "", fontsize=FONT)
    ax.set_title(f"{corpus}: what the cell state holds beyond\nthe last {k} characters (a point per model, layer)",
                 fontsize=8)  # fmt: skip
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo - 0.45 * (hi - lo), hi)  # room below the points for the legend
    ax.legend(fontsize=FONT, loc="lower center", ncol=2, frameon=False, handletextpad=0.1, columnspacing=0.8,
              borderaxespad=0.2, markerscale=1.3)  # fmt: skip


def _strips(table: pd.DataFrame, models: pd.DataFrame, arrays: dict, corpora_: list[str]) -> list[tuple]:
    """(title, characters, values, underline) of the headline model's best cells, Fig 2's features first (one per
    Fig 2 cell: comments and strings share one), the best scoring first; STRIPS in all, split between the corpora."""
    viewer, excerpts, cells = _records(table, "viewer"), _records(table, "excerpt"), _records(table, "cell")
    if viewer.empty or "viewer_values" not in arrays:
        return []
    per_corpus = max(1, STRIPS // max(1, len(corpora_)))
    heads = set(models.loc[models["headline"] == 1, "model_id"]) if len(models) else set()
    out = []
    for corpus in corpora_:
        v = viewer[(viewer["corpus"] == corpus) & (viewer["rank"] == 1)]
        pick = v[v["model_id"].isin(heads)]
        v = pick if len(pick) else v[v["model_id"] == v["model_id"].iloc[0]] if len(v) else v
        if v.empty:
            continue
        v = v.loc[v.groupby("feature", sort=False)["best_cell_score"].idxmax()]
        paper = cells[cells["corpus"] == corpus].groupby("feature")["paper_cell"].first().fillna("")
        v = v.assign(fig2=v["feature"].map(paper).fillna(""))
        v = v.assign(shown=v["fig2"].ne("")).sort_values(["shown", "best_cell_score"], ascending=False)
        v = pd.concat([v[v["shown"]].drop_duplicates("fig2"), v[~v["shown"]]])
        for _, r in v.head(per_corpus).iterrows():
            e = excerpts[(excerpts["corpus"] == corpus) & (excerpts["feature"] == r["feature"])].iloc[0]
            a, n = int(e["array_start"]), int(e["array_length"])
            text, labels = arrays["excerpt_text"][a : a + n].tobytes(), arrays["excerpt_labels"][a : a + n]
            b = int(r["array_start"])
            values = arrays["viewer_values"][b : b + int(r["array_length"])] / 127.0
            binary = r["feature_kind"] == "binary"
            title = (f"{corpus}, {r['model']}, layer {int(r['layer']) + 1}, cell {int(r['cell'])}: {r['feature']}, "
                     f"{cells_probing.METRIC[r['feature_kind']].replace('R^2', 'R²')} {r['best_cell_score']:.2f} alone"
                     + (f" (Fig 2: {r['fig2']})" if r["fig2"] else ""))  # fmt: skip
            out.append((title, display_chars(text), values, labels > 0 if binary else None))
    return out


def plot(table: pd.DataFrame, models: pd.DataFrame, arrays: dict):
    """The figure (None when no feature could be probed: the findings say why)."""
    style()
    cells = _records(table, "cell")
    k = _last_k(cells)
    if cells.empty or k is None:
        return None
    corpora_ = list(pd.unique(cells["corpus"]))
    excerpts = _records(table, "excerpt")
    features = {c: [f for f in excerpts.loc[excerpts["corpus"] == c, "feature"] if f in set(cells["feature"])]
                or list(pd.unique(cells.loc[cells["corpus"] == c, "feature"])) for c in corpora_}  # fmt: skip
    strips = _strips(table, models, arrays, corpora_)
    n = len(corpora_)
    archs = [list(pd.unique(cells.loc[cells["corpus"] == c, "arch"])) for c in corpora_]
    same_rows = all(sorted(a) == sorted(archs[0]) for a in archs)  # then only the first heatmap names its rows
    heat_h, lead_h, strip_h = 1.3 + 0.28 * max(len(a) for a in archs), 2.4, 0.75
    height = min(8.9, heat_h + lead_h + strip_h * len(strips) + 0.4)
    fig = plt.figure(figsize=(7.5, height), layout="constrained")
    fig.set_layout_engine("none")  # until the end: seaborn draws the figure to colour each annotation
    outer = fig.add_gridspec(
        2 if strips else 1, 1, height_ratios=[heat_h + lead_h, strip_h * len(strips)][: 1 + bool(strips)]
    )
    top = outer[0].subgridspec(2, n + 1, height_ratios=[heat_h, lead_h], width_ratios=[1] * n + [0.04])
    for j, corpus in enumerate(corpora_):
        cax = fig.add_subplot(top[0, n]) if j == n - 1 else None
        ax = fig.add_subplot(top[0, j])
        _heatmap(ax, cells, corpus, features[corpus], cax, j == 0)
        if j and same_rows:
            ax.set_yticklabels([])
        _leads(fig.add_subplot(top[1, j]), cells, corpus, features[corpus], k, j == 0)
    if strips:
        bottom = outer[1].subgridspec(len(strips), 1)
    for r, (title, chars, values, underline) in enumerate(strips):
        ax = fig.add_subplot(bottom[r, 0])
        strip_axes(ax, chars, values, underline, width=STRIP_WIDTH, lines=STRIP_LINES)
        for text in ax.texts:
            text.set_fontsize(FONT)
        ax.set_title(title, fontsize=FONT, loc="left")
    below = "\nbelow, the text coloured by each cell's tanh(c) (red −1, blue +1; binary features underlined where on)"
    title = "Interpretable cells: single cells, probes beyond the last characters, and Fig 2's view"
    fig.suptitle(title + (below + ", as in Fig 2" if strips else ""), fontsize=8)
    fig.set_layout_engine("constrained")
    return fig
