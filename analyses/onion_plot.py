"""The onion's figure (Karpathy et al. 2016 Fig 6): the large and small LSTM's errors by oracle category, beside the
paper's best LSTM, and every model's short-context and other errors against its parameters. Imported by
analyses/onion.py only."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from .common import style

GROUPS = ["n-gram", "dynamic memory", "rare words", "word model", "punctuation", "boost", "remaining"]
PALETTES = {"n-gram": "Blues", "dynamic memory": "Oranges", "rare words": "Greens", "word model": "Reds",
            "punctuation": "Purples", "boost": "Greys", "remaining": "Greys"}  # fmt: skip
FAMILY_COLORS = {"lstm": "#d62728", "gru": "#2ca02c", "gru-paper": "#2ca02c", "rnn": "#1f77b4"}  # the rest: grey


def category_colors(cats: pd.DataFrame) -> dict[str, tuple]:
    """A shade of its group's colour for each category (rows: group, category, in the oracles' order)."""
    colors = {}
    for group, members in cats.groupby("group", sort=False):
        shades = sns.color_palette(PALETTES.get(group, "Greys"), len(members) + 2)[2:]
        colors.update(zip(members["category"], shades))
    return colors


def _bars(ax, df: pd.DataFrame, s: pd.Series, cats: pd.DataFrame, colors: dict) -> None:
    """Stacked bars of errors by category, in % of test characters: the paper's best LSTM (War and Peace: the four
    groups its text states, the rest hatched), the large LSTM and the small one."""
    rows = []  # (label, {category: % of characters})
    if s["corpus"] == "warpeace":
        paper = {"n-gram": s["paper_ngram"], "dynamic memory": s["paper_memory"], "rare words": s["paper_rare"],
                 "word model": s["paper_word"]}  # fmt: skip
        rows.append(("paper: best LSTM", {g: 100 * v * s["paper_rate"] for g, v in paper.items()}))
    for role in ("large", "small"):
        model = df[df["role"] == role]
        if len(model):
            first = model.iloc[0]
            shares = model.set_index("category")["share_of_chars"] * 100
            rows.append((f"{role}: {s[f'{role}_model']}\n{int(first['params']):,} parameters", shares.to_dict()))
    for y, (label, values) in enumerate(rows):
        left = 0.0
        if label.startswith("paper"):
            for group, value in values.items():
                middle = cats[cats["group"] == group]["category"]
                color = colors[middle.iloc[len(middle) // 2]] if len(middle) else "white"
                ax.barh(y, value, left=left, color=color, height=0.7, edgecolor="grey", lw=0.5)
                left += value
            rest = 100 * s["paper_rate"] - left
            ax.barh(y, rest, left=left, color="white", height=0.7, edgecolor="grey", lw=0.5, hatch="//")
            continue
        for category in cats["category"]:
            value = values.get(category, 0.0)
            ax.barh(y, value, left=left, color=colors[category], height=0.7)
            left += value
    ax.set_yticks(range(len(rows)), [label for label, _ in rows], fontsize=7)
    ax.invert_yaxis()
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel("errors (% of test characters), oracles left to right", fontsize=7.5)
    ax.set_title(f"{s['corpus']}: errors (p < {s['threshold']:g}) by the oracle that removes them", fontsize=8)


def _scaling(ax, df: pd.DataFrame, s: pd.Series) -> None:
    """Every model: its n-gram-oracle errors and its other errors (% of test characters) against its parameters."""
    models = df.drop_duplicates("model_id")
    ngram = df[df["group"] == "n-gram"].groupby("model_id")["share_of_chars"].sum()
    other = models.set_index("model_id")["errors"] / models.set_index("model_id")["positions"] - ngram
    colors = models["arch"].map(FAMILY_COLORS).fillna("#7f7f7f").to_numpy()
    x = models["params"].to_numpy(float)
    ids = models["model_id"]
    ax.scatter(x, 100 * ngram.loc[ids], c=colors, marker="o", s=14)
    ax.scatter(x, 100 * other.loc[ids], c=colors, marker="^", s=14)
    for role in ("large", "small"):
        model = models[models["role"] == role]
        if len(model):
            m = model.iloc[0]
            for y in (ngram[m["model_id"]], other[m["model_id"]]):
                ax.annotate(role, (m["params"], 100 * y), fontsize=7, xytext=(4, 2), textcoords="offset points")
    ax.set_xscale("log")
    ax.tick_params(which="both", labelsize=7)
    ax.set_xlabel("parameters (log scale)", fontsize=7.5)
    ax.set_ylabel("errors (% of test characters)", fontsize=7.5)
    ax.set_title(f"{s['corpus']}: every model (red LSTM, green GRU,\nblue RNN, grey others)", fontsize=8)
    marks = [plt.Line2D([], [], ls="", marker=m, color="#555555") for m in ("o", "^")]
    ax.legend(marks, ["n-gram errors", "all other errors"], fontsize=7, loc="center right", frameon=True,
              framealpha=0.8)  # fmt: skip


def plot(df: pd.DataFrame, summary: pd.DataFrame):
    """One row per corpus: the large and small LSTM's errors by category (left), every model's errors against its
    parameters (right); the categories' legend below."""
    style()
    corpora_ = [c for c in dict.fromkeys(df["corpus"]) if c in set(summary["corpus"])]
    cats = df.drop_duplicates("order").sort_values("order")[["order", "group", "category"]]
    colors = category_colors(cats)
    fig, axes = plt.subplots(max(1, len(corpora_)), 2, figsize=(7.5, min(9.0, 1.4 + 3.1 * len(corpora_))),
                             squeeze=False, gridspec_kw={"width_ratios": [1.5, 1]})  # fmt: skip
    for (ax_bars, ax_scale), corpus in zip(axes, corpora_):
        sub = df[df["corpus"] == corpus]
        s = summary[summary["corpus"] == corpus].iloc[0]
        _bars(ax_bars, sub, s, cats, colors)
        _scaling(ax_scale, sub, s)
    used = set(df.loc[df["removed"] > 0, "category"])
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[c]) for c in cats["category"] if c in used]
    labels = [c for c in cats["category"] if c in used]
    if any(c == "warpeace" for c in corpora_):
        handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="grey", hatch="//"))
        labels.append("paper: punctuation and boost")
    rows = int(np.ceil(len(labels) / 5))
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, min(0.3, (0.16 * rows + 0.1) / fig.get_size_inches()[1]), 1, 1))
    return fig
