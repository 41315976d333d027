"""The weighted-sum figure: Levy et al.'s appendix heatmap for the headline models of each corpus, and every cell's
memory span per architecture."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.colors import LogNorm

from .common import headline_id, style
from .weighted_sum import BPTT, CONTENT_FROM_INPUT, LABELS, _ordered

LEVY_APPENDIX = ("lstm-srnn-out", *CONTENT_FROM_INPUT)  # the appendix draws - S-RNN - OUT; else a history-free one


def heatmap_models(df: pd.DataFrame) -> list[tuple[str, list[str]]]:
    """Per corpus, the model_ids whose heatmap is drawn: the headline LSTM (analyses.common.headline_id; else the
    first architecture there), and the headline of the first ablation of LEVY_APPENDIX the run trained."""
    out = []
    for corpus in sorted(df["corpus"].unique()):
        models = df[df["corpus"] == corpus].drop_duplicates("model_id")
        picked = [headline_id(models)]
        ablation = next((a for a in LEVY_APPENDIX if (models["arch"] == a).any()), None)
        if ablation is not None and ablation != models.loc[models["model_id"] == picked[0], "arch"].iloc[0]:
            picked.append(headline_id(models[models["arch"] == ablation]))
        out.append((corpus, picked))
    return out


def _heatmap(ax, sub: pd.DataFrame, title: str, ylabel: str, yticks: bool):
    """||w_j^t|| over the sentence: t (current) on x, j (context) on y, the carried state as the top row; log colour."""
    size = int(sub["t"].max()) + 1
    grid = np.full((size + 1, size), np.nan)
    grid[sub["j"].astype(int) + 1, sub["t"].astype(int)] = sub["value"]
    chars = sub[sub["j"] == sub["t"]].sort_values("t")["char"].tolist()
    top = np.nanmax(grid)
    norm = LogNorm(vmin=top * 1e-3, vmax=top)
    image = ax.imshow(np.clip(grid, top * 1e-3, None), cmap="Greys", norm=norm, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(size), chars, fontsize=7, family="monospace")
    rows = [0, *range(1, size + 1, 2)]  # the carried state, then every other context position (the diagonal has all)
    ax.set_yticks(rows, ["c0", *chars[::2]] if yticks else [], fontsize=7, family="monospace")
    ax.tick_params(length=0, pad=1)
    ax.grid(False)
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("current position t", fontsize=7.5)
    ax.set_ylabel(ylabel, fontsize=7.5)
    return image


def plot(df: pd.DataFrame):
    """Top: per corpus (rows), the headline models' heatmaps of layer 1 (Levy et al. appendix A, Table 5); bottom:
    every cell's memory span, per architecture and corpus (log scale), with the BPTT unroll."""
    style()
    df = _ordered(df)
    shown = heatmap_models(df)
    ncols = max(len(m) for _, m in shown)
    fig = plt.figure(figsize=(7.5, min(9.0, 2.2 + 3.4 * len(shown))))
    fig.subplots_adjust(top=0.94, bottom=0.05, left=0.1, right=0.9)  # before the colour bar is placed beside them
    grid = fig.add_gridspec(len(shown) + 1, ncols, height_ratios=[1.8] * len(shown) + [1.0], hspace=0.4,
                            wspace=0.12)  # fmt: skip
    weights = df[(df["measure"] == "weight") & (df["layer"] == 1)]
    heat_axes, image = [], None
    for r, (corpus, model_ids) in enumerate(shown):
        for c, model_id in enumerate(model_ids):
            sub = weights[weights["model_id"] == model_id]
            if sub.empty:
                continue
            ax = fig.add_subplot(grid[r, c])
            image = _heatmap(ax, sub, f"{corpus}: {sub['model'].iloc[0]}",
                             "context position j" if c == 0 else "", yticks=c == 0)  # fmt: skip
            heat_axes.append(ax)
    if image is not None:
        top, bottom = heat_axes[0].get_position().y1, heat_axes[-1].get_position().y0
        bar = fig.colorbar(image, cax=fig.add_axes((0.92, bottom + 0.2 * (top - bottom), 0.015, 0.6 * (top - bottom))))
        bar.set_label(r"$\|w_j^t\|_2 / \sqrt{H}$ (log scale)", fontsize=7.5)
        bar.ax.tick_params(labelsize=7)
    ax = fig.add_subplot(grid[len(shown), :])
    spans = df[df["measure"] == "span"].assign(type=lambda d: d["arch"].map(LABELS).fillna(d["arch"]))
    order = list(dict.fromkeys(spans.sort_values("order")["type"]))
    sns.boxplot(data=spans, x="type", y="value", hue="corpus", order=order, log_scale=True, showfliers=False, ax=ax,
                palette="pastel")  # fmt: skip
    ax.axhline(BPTT, color="C3", lw=0.8, ls="--")
    ax.text(0.01, BPTT, f" {BPTT}: the BPTT unroll", color="C3", fontsize=7, va="bottom",
            transform=ax.get_yaxis_transform())  # fmt: skip
    ax.set_title("memory span of every cell, -1 / mean ln f (all layers, models and seeds)", fontsize=8)
    ax.set_xlabel("")
    ax.set_ylabel("span (characters, log)", fontsize=7.5)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, title="", loc="upper right")
    fig.suptitle(r"Layer 1's weights $w_j^t$ of the memory cell's sum over one sentence (Levy et al. appendix A), "
                 "and memory spans", fontsize=9)  # fmt: skip
    return fig
