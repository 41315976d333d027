"""model_agreement's figure (Karpathy et al. 2016 Fig 1 right): per corpus, the t-SNE of the recurrent models and the
mean agreement between model types. Imported by analyses/model_agreement.py only."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from charlm.model import ARCH_LABELS

from .common import style

TYPE_LABELS = {**ARCH_LABELS, "ngram": "n-gram (KenLM)", "nnn": "n-NN"}
MARKERS = {0: "X", 1: "o", 2: "s", 3: "^"}  # depth (0: a baseline)


def type_matrix(sub: pd.DataFrame) -> pd.DataFrame:
    """Mean argmax agreement (%) between the models of two types of one corpus (distinct models only), in the
    report's type order."""
    pairs = sub[sub["model_id"] != sub["other_id"]]
    grid = pairs.pivot_table(index="type", columns="other_type", values="agreement", aggfunc="mean") * 100
    order = type_order(grid.index)
    return grid.reindex(index=order, columns=order)


def type_order(types) -> list[str]:
    """The types present, in the report's order; a kind the suite does not label (a user's) after them."""
    present = set(types)
    known = [t for t in dict.fromkeys(TYPE_LABELS.values()) if t in present]
    return known + sorted(present - set(known))


def short_type(label: str) -> str:
    """A type as the heatmap's axes name it: Levy's ablations without the leading "LSTM", the papers' GRU as GRU."""
    return (label.replace("GRU (papers' form)", "GRU").replace("LSTM - ", "−").replace(" - ", " −")
            .replace("HIDDEN", "HID"))  # fmt: skip


def _tsne(ax, sub: pd.DataFrame, palette: dict) -> list:
    """The t-SNE of one corpus's embedded models; returns the legend's handles."""
    everyone = sub.drop_duplicates("model_id")
    models = everyone[everyone["embedded"]].copy()  # the baselines left out of the embedding: heatmap only
    largest = models["budget"].max()
    models["point"] = (25 + 90 * models["budget"] / largest).fillna(30.0)  # marker area grows with the budget
    for (kind, depth), group in models.groupby(["type", "layers"]):
        ax.scatter(group["tsne_x"], group["tsne_y"], s=group["point"], c=[palette[kind]],
                   marker=MARKERS.get(depth, "D"), edgecolor="black", linewidth=0.4, alpha=0.85)  # fmt: skip
    handles = [plt.Line2D([], [], ls="", marker="o", color=palette[t], label=t)
               for t in palette if t in set(models["type"])]  # fmt: skip
    for depth in sorted(int(d) for d in models["layers"].unique()):
        label = "baseline" if depth == 0 else f"{depth} layer{'s' * (depth > 1)}"
        handles.append(plt.Line2D([], [], ls="", marker=MARKERS.get(depth, "D"), color="grey", label=label))
    what = "models" if len(models) == len(everyone) else "recurrent models"
    ax.set_title(f"{sub['corpus'].iloc[0]}: t-SNE of {what}\n({models['embedded_by'].iloc[0]}, "
                 f"{int(models['positions'].iloc[0]):,} test positions)", fontsize=8)  # fmt: skip
    ax.set_xlabel("t-SNE 1 (no unit)", fontsize=7.5)
    ax.set_ylabel("t-SNE 2 (no unit)", fontsize=7.5)
    ax.tick_params(labelsize=7)
    return handles


def plot(df: pd.DataFrame):
    """Per corpus (a column each): the t-SNE of models as Fig 1 right (colour: type, size: budget row, marker: depth)
    above the mean agreement on the most likely next character between every two types of model."""
    style()
    corpora_ = list(dict.fromkeys(df["corpus"]))
    types = type_order(df["type"])
    colours = [c for i, c in enumerate(sns.color_palette("tab10", 10)) if i != 7]  # tab10 without its grey
    palette = dict(zip(types, colours * 2))
    fig, axes = plt.subplots(2, len(corpora_), figsize=(7.5, 9.0), squeeze=False,
                             gridspec_kw={"height_ratios": [1, 1.15]})  # fmt: skip
    legend = {}
    for (ax, heat), corpus in zip(axes.T, corpora_):
        sub = df[df["corpus"] == corpus]
        legend |= {h.get_label(): h for h in _tsne(ax, sub, palette)}
        grid = type_matrix(sub)
        grid.index, grid.columns = grid.index.map(short_type), grid.columns.map(short_type)
        if not np.isfinite(grid.to_numpy(float)).any():  # one model alone: no pair to average
            heat.axis("off")
            heat.text(0.5, 0.5, f"{corpus}: one model, no pair to compare", ha="center", fontsize=8)
            continue
        sns.heatmap(grid, ax=heat, cmap="viridis", square=True, annot=True, fmt=".1f", annot_kws={"fontsize": 7},
                    xticklabels=True, yticklabels=True, cbar=False)  # fmt: skip
        heat.tick_params(labelsize=7)
        heat.tick_params(axis="x", rotation=90)
        heat.set_xlabel("")
        heat.set_ylabel("")
        heat.set_title(f"{corpus}: mean agreement (%) on the most likely\nnext character, by type (−: LSTM ablation)",
                       fontsize=8)  # fmt: skip
    fig.legend(list(legend.values()), list(legend), loc="lower center", ncol=5, fontsize=7, frameon=False,
               title="t-SNE: type, depth (marker size: budget row)", title_fontsize=7)  # fmt: skip
    rows = int(np.ceil(len(legend) / 5))
    fig.tight_layout(rect=(0, (0.16 * rows + 0.25) / 9.0, 1, 1))
    return fig
