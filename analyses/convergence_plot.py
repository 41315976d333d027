"""The convergence figure: per corpus, the validation curves and the gain per epoch the stopping rules read."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.lines import Line2D

from .common import arch_rank, style
from .convergence import RULES, trailing_gains

MARKERS = {"early_stopping": "o", "epochs": "s", "converged": "v", "budget": "x"}
FLOOR = 1e-5  # gains at or below zero drawn here on the log axis


def plot(df: pd.DataFrame):
    """Two rows, one column per corpus: the validation cross-entropy per epoch of every model (coloured by
    architecture; no per-model legend), and its trailing gain per epoch (log scale) with the threshold, each model's
    last epoch marked by why it stopped."""
    style()
    corpora_ = sorted(df["corpus"].unique())
    archs = sorted(df["arch"].unique(), key=arch_rank)
    colors = dict(zip(archs, sns.color_palette("tab10", len(archs))))
    labels = df.drop_duplicates("arch").set_index("arch")["label"]
    threshold, window = float(df["converged_gain"].iloc[0]), int(df["window"].iloc[0])
    fig, axes = plt.subplots(2, len(corpora_), figsize=(7.5, 6.6), squeeze=False, sharex="col")
    for j, corpus in enumerate(corpora_):
        top, bottom = axes[0][j], axes[1][j]
        for _, sub in df[df["corpus"] == corpus].groupby("model_id", sort=False):
            full = sub[sub["full_epoch"]]
            color = colors[sub["arch"].iloc[0]]
            top.plot(sub["epoch"], sub["val_loss"], color=color, lw=0.8, alpha=0.8)
            gains = trailing_gains(full["val_loss"].to_numpy(), window)
            shown = np.isfinite(gains)
            if shown.any():
                y = np.maximum(gains[shown], FLOOR)
                bottom.plot(full["epoch"].to_numpy()[shown], y, color=color, lw=0.8, alpha=0.8)
                bottom.plot(full["epoch"].to_numpy()[shown][-1], y[-1], MARKERS.get(sub["stopped"].iloc[0], "d"),
                            color=color, ms=5, mfc="none")  # fmt: skip
        bottom.axhline(threshold, color="black", ls="--", lw=0.9)
        bottom.set_yscale("log")
        top.set_title(f"{corpus}: validation loss per epoch", fontsize=9)
        bottom.set_title(f"{corpus}: best-validation gain per epoch over {window} epochs", fontsize=9)
        top.set_ylabel("validation cross-entropy (nats/char)", fontsize=8)
        bottom.set_ylabel("gain (nats/char per epoch, log)", fontsize=8)
        bottom.set_xlabel("epochs of training", fontsize=8)
        for ax in (top, bottom):
            ax.tick_params(labelsize=7)
    arch_handles = [Line2D([], [], color=colors[a], lw=1.5, label=labels[a]) for a in archs]
    stops = sorted(set(df["stopped"].dropna()), key=list(MARKERS).index if set(df["stopped"].dropna()) <= set(MARKERS)
                   else str)  # fmt: skip
    stop_handles = [Line2D([], [], color="grey", ls="", marker=MARKERS.get(s, "d"), mfc="none",
                           label=f"stopped by {RULES.get(s, (s,))[0]}") for s in stops]  # fmt: skip
    stop_handles.append(Line2D([], [], color="black", ls="--", label=f"threshold {threshold:g} nats/epoch"))
    axes[0][-1].legend(handles=arch_handles, fontsize=7, loc="upper right")
    axes[1][-1].legend(handles=stop_handles, fontsize=7, loc="upper right")
    fig.suptitle("Did training converge? Validation curves and the gain the stopping rules read", fontsize=10)
    fig.tight_layout()
    return fig
