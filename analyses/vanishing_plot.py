"""The vanishing figure: per corpus, the gradient of the last character's loss with respect to h of the top layer
against the lag, after training and at initialisation, and the vanishing ratio on h along training."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from .common import arch_rank, headline_id, style
from .maini import table2_range
from .vanishing import LABELS


def shown(df: pd.DataFrame) -> pd.DataFrame:
    """The models the figure draws, per corpus: every one-layer configuration of the largest budget row (all seeds)
    and the headline LSTM (analyses.common.headline_id)."""
    models = df.drop_duplicates("model_id")
    keep = []
    for _, sub in models.groupby("corpus"):
        scale = sub["budget"].fillna(sub["size"])
        keep += list(sub.loc[(scale == scale.max()) & (sub["layers"] == 1), "model_id"])
        head = headline_id(sub[sub["arch"] == "lstm"]) if (sub["arch"] == "lstm").any() else None
        keep += [head] if head is not None else []
    return models[models["model_id"].isin(keep)]


def plot(df: pd.DataFrame):
    """Rows: after training, at initialisation (mean ||dL_T/dh_{T-k}|| over windows and seeds of a configuration,
    log scale), and the vanishing ratio on h along training (lowest seed) with Maini et al.'s BiLSTM range; one column
    per corpus; one colour per configuration."""
    style()
    corpora_ = sorted(df["corpus"].unique())
    models = shown(df)
    h = df[(df["state"] == "h") & (df["layer"] == df["layers"] - 1) & df["model_id"].isin(models["model_id"])]
    # one colour per type and depth across corpora (a budget row's width differs a little with the vocabulary)
    key = h["arch"] + ":" + h["layers"].astype(str)
    widths = h.groupby(key)["size"].transform(lambda w: "/".join(str(v) for v in sorted(w.unique(), reverse=True)))
    types = h["arch"].map(LABELS).fillna(h["arch"])
    h = h.assign(config=types + " " + h["layers"].astype(str) + "x" + widths)
    order = list(dict.fromkeys(h.assign(rank=h["arch"].map(arch_rank)).sort_values(["rank", "layers"])["config"]))
    palette = dict(zip(order, sns.color_palette("tab10", n_colors=max(3, len(order)))))
    fig, axes = plt.subplots(3, len(corpora_), figsize=(7.5, 7.4), squeeze=False, sharey="row")  # 7.4 in: issue 36
    K = int(df["lag"].max())
    lo, hi = table2_range("BiLSTM")
    for j, corpus in enumerate(corpora_):
        sub = h[h["corpus"] == corpus]
        for ax, checkpoint in zip(axes[:2, j], ("final", "init")):
            prof = sub[(sub["checkpoint"] == checkpoint) & (sub["grad_norm"] > 0)]
            prof = prof.groupby(["config", "lag"], as_index=False)["grad_norm"].mean()  # over a configuration's seeds
            for config, g in prof.groupby("config"):
                ax.plot(g["lag"], g["grad_norm"], color=palette[config], lw=1.2, label=config)
            ax.set_yscale("log")
            ax.set_xlabel("lag k (characters back from the loss)", fontsize=7.5)
            ax.set_ylabel("mean ||dL_T / dh_{T-k}||" if j == 0 else "", fontsize=7.5)
            ax.set_title(f"{corpus}: {'after training' if checkpoint == 'final' else 'at initialisation'}",
                         fontsize=8)  # fmt: skip
            ax.axvspan(0.45 * K, 0.55 * K, color="0.9", lw=0, zorder=0)  # the middle 10 % of lags
        ax = axes[2, j]
        lowest = sub[sub["seed"] == sub.groupby("group_id")["seed"].transform("min")]
        ratios = lowest.drop_duplicates(["model_id", "checkpoint"])
        ratios = ratios[ratios["ratio_mid_end"] > 0].sort_values("chars")
        for config, g in ratios.groupby("config"):
            ax.plot(g["chars"], g["ratio_mid_end"], color=palette[config], marker="o", ms=3, lw=1)
        ax.axhspan(lo, hi, color="C3", alpha=0.15, lw=0)
        ax.text(0.02, hi, f"Maini et al. BiLSTM, {lo:g} to {hi:g}", color="C3", fontsize=7, va="bottom",
                transform=ax.get_yaxis_transform())  # fmt: skip
        ax.set_xscale("symlog", linthresh=1e3)  # linear below 1,000 characters: room for the initial model at 0
        top_decade = int(np.ceil(np.log10(max(ratios["chars"].max() if len(ratios) else 1e3, 1e3))))
        ticks = [0.0] + [10.0**e for e in range(3, top_decade + 1, 2)]
        ax.set_xticks(ticks, ["init"] + [f"$10^{{{e}}}$" for e in range(3, top_decade + 1, 2)])
        ax.set_yscale("log")
        ax.set_xlabel("training characters (0: initialisation)", fontsize=7.5)
        ax.set_ylabel("vanishing ratio on h" if j == 0 else "", fontsize=7.5)
        ax.set_title(f"{corpus}: vanishing ratio along training", fontsize=8)
    for ax in axes.flat:
        ax.tick_params(labelsize=7)
    handles = [plt.Line2D([], [], color=palette[c], lw=1.5, label=c) for c in order]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.suptitle(f"Gradient of the last character's loss with respect to h of the top layer (K = {K}; grey: the "
                 "middle 10 % of lags)", fontsize=9)  # fmt: skip
    fig.tight_layout(rect=(0, 0.055, 1, 1))
    return fig
