"""The ablations' figure: per corpus (rows) and depth (columns), the LSTM's band and each ablation's cross-entropy."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .common import style
from .levy import NOISE_STDS, ORDER, SHORT


def plot(df: pd.DataFrame, depths: pd.DataFrame, minimal: pd.DataFrame | None = None):
    """One panel per corpus and depth: test cross-entropy of the LSTM and each ablation (bootstrap std as error bar),
    the LSTM's seed mean +- 1 and NOISE_STDS seed stds as bands, each ablation labelled with its gap in LSTM stds.
    A depth the run lacks keeps its panel, saying so. `minimal` (ablations_min.input_only): minGRU and minLSTM of that
    depth after the ablations, as diamonds, where their LSTM is the panel's (the same width)."""
    style()
    corpora_ = sorted(depths["corpus"].unique())
    layers = sorted(depths["layers"].astype(int).unique())
    fig, axes = plt.subplots(len(corpora_), len(layers), figsize=(7.5, 0.6 + 3.1 * len(corpora_)), squeeze=False,
                             sharey="row")  # fmt: skip
    colors = dict(zip(ORDER, ["black", "#1f77b4", "#2ca02c", "#9467bd", "#d62728"]))
    for i, corpus in enumerate(corpora_):
        for j, depth in enumerate(layers):
            ax = axes[i][j]
            row = depths[(depths["corpus"] == corpus) & (depths["layers"] == depth)].iloc[0]
            title = f"{corpus}, {depth} layer" + ("s" if depth > 1 else "")
            if pd.isna(row.get("size", np.nan)):
                ax.text(0.5, 0.5, f"{depth}-layer ablations\nnot trained in this run", ha="center", va="center",
                        transform=ax.transAxes, fontsize=9, color="grey")  # fmt: skip
                ax.set_title(title, fontsize=9)
                ax.set_xticks([])
                ax.grid(False)
                continue
            sub = df[(df["corpus"] == corpus) & (df["layers"] == depth) & (df["size"] == row["size"])]
            sub = sub.set_index("arch").reindex([a for a in ORDER if a in set(sub["arch"])])
            mean, std = row["lstm_ce"], row["lstm_std"]
            if np.isfinite(std):
                ax.axhspan(mean - NOISE_STDS * std, mean + NOISE_STDS * std, color="grey", alpha=0.15, lw=0,
                           label=f"LSTM +- {NOISE_STDS:g} seed stds")  # fmt: skip
                ax.axhspan(mean - std, mean + std, color="grey", alpha=0.35, lw=0, label="LSTM +- 1 seed std")
            ax.axhline(mean, color="black", lw=0.8)
            for k, (arch, r) in enumerate(sub.iterrows()):
                ax.errorbar(k, r["ce_nats"], yerr=r["bootstrap_std"], fmt="o", color=colors[arch], ms=5, capsize=2)
                if arch != "lstm" and np.isfinite(r["gap_in_lstm_std"]):
                    ax.annotate(f"{r['gap_in_lstm_std']:+.1f} sd", (k, r["ce_nats"]), xytext=(0, 6),
                                textcoords="offset points", ha="center", fontsize=7)  # fmt: skip
            names = [SHORT[a] for a in sub.index]
            extra = pd.DataFrame() if minimal is None else minimal[
                (minimal["corpus"] == corpus) & (minimal["layers"] == depth) & (minimal["lstm_size"] == row["size"])
            ]  # fmt: skip
            for k, (_, m) in enumerate(extra.iterrows(), start=len(sub)):
                ax.plot(k, m["ce_nats"], "D", color="#8c564b", ms=5)
                if np.isfinite(m["gap_in_lstm_std"]):
                    ax.annotate(f"{m['gap_in_lstm_std']:+.1f} sd", (k, m["ce_nats"]), xytext=(0, 6),
                                textcoords="offset points", ha="center", fontsize=7)  # fmt: skip
                names.append(f"{m['model']} {int(m['size'])}")
            ax.set_xticks(np.arange(len(names)), names, rotation=30, ha="right", fontsize=8)
            ax.set_title(f"{title} x {int(row['size'])} (LSTM: {int(row['lstm_seeds'])} seeds)", fontsize=9)
            ax.tick_params(axis="y", labelsize=8)
            if j == 0:
                ax.set_ylabel("test cross-entropy (nats/char)", fontsize=8)
            if i == 0 and j == 0 and np.isfinite(std):
                ax.legend(fontsize=7, loc="upper left")
        low = df[df["corpus"] == corpus]["ce_nats"]
        if minimal is not None and len(minimal):
            low = pd.concat([low, minimal[minimal["corpus"] == corpus]["ce_nats"]])
        if len(low):
            pad = 0.12 * (low.max() - low.min() + 0.02)
            axes[i][0].set_ylim(low.min() - pad, low.max() + 2 * pad)
    fig.suptitle("Levy et al.'s ablations against the LSTM of the same depth and width (sd: LSTM seed stds); "
                 "diamonds: minGRU / minLSTM of the same depth and budget row", fontsize=9)  # fmt: skip
    fig.tight_layout()
    return fig
