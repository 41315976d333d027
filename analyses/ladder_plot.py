"""The ladder's figure: one panel per measurement, every rung in the notes' order joined to its parent."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FormatStrFormatter, NullFormatter

from .common import style
from .ladder import LADDER

PANELS = (  # column, axis label, scale
    ("ce_nats", "test cross-entropy (nats/char)", "linear"),
    ("state_max", "largest |memory state| (c, else h)", "log"),
    ("vanishing_ratio", "vanishing ratio ||dL/d mid|| / ||dL/d end||", "log"),
    ("brace_advantage", "brace advantage: p('}') - 20-gram's", "linear"),
)


def plot(df: pd.DataFrame):
    """A 2 x 2 grid (the brace panel only with a corpus with braces): each rung at its place in the notes' order
    (a rung not trained leaves a gap), joined to the rung it is derived from (a tree, not a line)."""
    style()
    order = [rung for _, rung, *_ in LADDER]
    step_of = {rung: k for k, rung in enumerate(order)}
    step_of["GRU (torch's form)"] = step_of["GRU"]
    panels = [p for p in PANELS if df[p[0]].notna().any()]
    fig, axes = plt.subplots(2, 2, figsize=(7.5, 7.0), squeeze=False)
    flat = [ax for row in axes for ax in row]
    colors = dict(zip(df["corpus"].unique(), sns.color_palette("tab10")))
    trained = set(df["step"])
    for ax, (column, label, scale) in zip(flat, panels):
        for corpus, sub in df.groupby("corpus", sort=False):
            sub = sub[sub[column].notna()]
            at = dict(zip(sub["step"], sub[column]))
            for _, r in sub.iterrows():
                parent = step_of.get(r["parent"])
                if parent in at:
                    ax.plot([parent, r["step"]], [at[parent], r[column]], color=colors[corpus], lw=1.2)
            ax.plot(sub["step"], sub[column], "o", color=colors[corpus], ms=5, label=corpus)
            if column == "ce_nats" and sub["seed_std"].notna().any():
                ax.errorbar(sub["step"], sub[column], yerr=sub["seed_std"].fillna(0), fmt="none", ecolor="grey")
        ax.set_yscale(scale)
        if scale == "log":  # a range under two decades is labelled in plain numbers, a wider one by its decades
            values = df[column][df[column] > 0]
            narrow = len(values) and np.log10(values.max() / values.min()) < 2
            ax.yaxis.set_minor_formatter(FormatStrFormatter("%g") if narrow else NullFormatter())
            ax.tick_params(axis="y", which="minor", labelsize=7)
        if column in ("vanishing_ratio", "state_max"):
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        if column == "brace_advantage":
            ax.axhline(0.0, color="grey", lw=0.8, ls="--")
        ax.set_xlim(-0.5, len(order) - 0.5)
        ax.set_xticks(range(len(order)))
        ax.set_xticklabels(order, rotation=35, ha="right", fontsize=8)
        for k, tick in enumerate(ax.get_xticklabels()):
            if k not in trained:
                tick.set_color("grey")
                tick.set_fontstyle("italic")
        ax.tick_params(axis="y", labelsize=8)
        ax.set_ylabel(label, fontsize=8)
    for ax in flat[len(panels) :]:
        ax.set_visible(False)
    flat[0].legend(title="corpus", fontsize=7, title_fontsize=7)
    fig.suptitle(
        f"The notes' ladder at budget row {int(df['budget'].iloc[0])}, {int(df['layers'].iloc[0])} layer(s): each rung "
        "joined to the one it is derived from\n(grey italic: not trained in this run)",
        fontsize=9,
    )
    fig.tight_layout()
    return fig
