"""The training-dynamics figure (analyses/training_dynamics.py): Fig 5 right for the headline model of each corpus,
and the closest n-NN of every snapshot of every model that kept two or more."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from .common import style
from .training_dynamics import MIN_SNAPSHOTS, closest_orders, label, ordered, reference


def _chars(c: float) -> str:
    return f"{c / 1e6:.3g}M" if c >= 1e6 else f"{c / 1e3:.3g}K" if c >= 1e3 else str(int(c))


def closest_grid(sub: pd.DataFrame) -> pd.DataFrame:
    """Models with MIN_SNAPSHOTS snapshots or more x snapshots (training characters): the closest n-NN's order."""
    order = ordered(closest_orders(sub, "nnn")).assign(model=lambda d: d.apply(label, axis=1))
    counts = order.groupby("model_id")["step"].transform("size")
    order = order[counts >= MIN_SNAPSHOTS]
    models = list(dict.fromkeys(order["model"]))
    grid = order.pivot_table(index="model", columns="chars", values="n", aggfunc="first").reindex(models)
    grid.columns = [_chars(c) for c in grid.columns]
    return grid


def plot(df: pd.DataFrame):
    """Per corpus (columns): the headline model's symmetric KL to each n-NN (top) and each n-NN's loss minus its own
    (middle) against training characters, as Fig 5 right; below, every model's closest n-NN per snapshot."""
    style()
    corpora_ = list(dict.fromkeys(df["corpus"]))
    grids = {c: closest_grid(df[df["corpus"] == c]) for c in corpora_}
    rows = max([len(g) for g in grids.values()] + [1])
    height = min(9.0, 5.6 + 0.2 * rows)
    fig = plt.figure(figsize=(7.5, height), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[5.0, height - 5.0])  # each laid out on its own: the heatmaps'
    axes = np.vstack([top.subplots(2, len(corpora_), squeeze=False),  # long model names leave the curves their width
                      bottom.subplots(1, len(corpora_), squeeze=False)])  # fmt: skip
    orders = sorted(df.loc[df["baseline"] == "nnn", "n"].unique())
    palette = dict(zip(orders, sns.color_palette("viridis", len(orders))))
    for j, corpus in enumerate(corpora_):
        ref = df[(df["model_id"] == reference(df, corpus)) & (df["baseline"] == "nnn")]
        name = label(ref.iloc[0])
        for ax, column, ylabel in ((axes[0, j], "sym_kl", "symmetric KL (nats/char)"),
                                   (axes[1, j], "delta_loss", "n-NN loss - snapshot loss (nats/char)")):  # fmt: skip
            for n, g in ref.groupby("n"):
                y = g[column].clip(lower=1e-4) if column == "sym_kl" else g[column]  # log axis: 0 drawn at 1e-4
                ax.plot(g["chars"], y, marker="o", ms=3, lw=1.2, color=palette[n], label=f"{n}-NN")
            ax.set_xscale("log")
            ax.set_xlabel("training characters seen by the snapshot", fontsize=7.5)
            ax.set_ylabel(ylabel if j == 0 else "", fontsize=7.5)
            ax.tick_params(which="both", labelsize=7)
        axes[0, j].set_yscale("log")
        axes[0, j].set_title(f"{corpus}: {name}, KL to each n-NN", fontsize=8)
        axes[1, j].axhline(0, color="black", lw=0.8)
        axes[1, j].set_title(f"{corpus}: loss difference (> 0: the net is better)", fontsize=8)
        ax = axes[2, j]
        grid = grids[corpus]
        if len(grid):
            same = j > 0 and list(grid.index) == list(grids[corpora_[0]].index)  # the first panel names them
            sns.heatmap(grid, annot=True, fmt=".0f", cmap="viridis", cbar=False, ax=ax, linewidths=0.5,
                        vmin=min(orders), vmax=max(orders), annot_kws={"fontsize": 7},
                        yticklabels=not same)  # fmt: skip
        ax.set_xlabel("snapshot: training characters", fontsize=7.5)
        ax.set_ylabel("")
        ax.set_title(f"{corpus}: closest n-NN (n), models with {MIN_SNAPSHOTS}+ snapshots", fontsize=8)
        ax.tick_params(labelsize=7)
    handles = [plt.Line2D([], [], color=palette[n], marker="o", ms=3, label=f"{n}-NN") for n in orders]
    top.legend(handles=handles, loc="outside upper center", ncol=len(orders), fontsize=7.5, frameon=False)
    fig.suptitle("Training dynamics against n-NN baselines (Karpathy et al. Fig 5 right)", fontsize=9)
    return fig
