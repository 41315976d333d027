"""The pooling figure (analyses/pooling.py): accuracy by position and against length, where each model looks (NWI),
the gradient over relative position, and the vanishing ratios."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from charlm.classifier import POOLS

from .common import style
from .pooling_claims import LABELS, _classes, _span_fraction
from .pooling_task import POSITIONS


def plot(df: pd.DataFrame):
    """Six panels on the largest training size: (a) accuracy per position on the longest texts, (b) accuracy with the
    span in the middle against length (the last state's start and end dotted), (c) NWI with the span in the middle,
    (d, e) the mean gradient norm over relative position at initialisation and at 95 % training accuracy, (f) the
    vanishing ratios of every position setting and size; chance dashed."""
    style()
    df = df.assign(model=df["pool"].map(LABELS))
    models = [LABELS[p] for p in POOLS if p in set(df["pool"])]
    palette = dict(zip(models, sns.color_palette("tab10", n_colors=len(models))))
    hue = {"hue": "model", "hue_order": models, "palette": palette}
    size = df["train_size"].max()
    positions = [p for p in POSITIONS if p in set(df["position"])]
    fig, axes = plt.subplots(3, 2, figsize=(7.5, 7.6))  # 7.6 in: on the page of its heading, at full width
    acc = df[(df["measure"] == "accuracy") & (df["train_size"] == size)].assign(value=lambda d: 100 * d["value"])
    chance = 100 / max(2, _classes(df))
    longest = int(acc["length"].max())
    ax = axes[0, 0]
    sns.barplot(data=acc[acc["length"] == longest], x="position", y="value", order=positions, ax=ax, legend=False,
                **hue)  # fmt: skip
    ax.set_ylim(0, 105)
    ax.set_xlabel("position of the class-bearing span")
    ax.set_ylabel(f"test accuracy (%), {longest}-character texts")
    ax.set_title(f"(a) accuracy by position ({int(size)} examples)")
    ax = axes[0, 1]
    mid = acc[acc["position"] == "mid"]
    for model, g in mid.groupby("model"):
        g = g.sort_values("length")
        ax.plot(g["length"], g["value"], marker="o", ms=3, color=palette[model])
    for position, ls in (("start", ":"), ("end", "--")):  # the last state where it should be right
        ends = acc[(acc["pool"] == "last") & (acc["position"] == position)].sort_values("length")
        if not ends.empty:
            ax.plot(ends["length"], ends["value"], ls=ls, color=palette[LABELS["last"]], lw=1,
                    label=f"{LABELS['last']}, span at the {position}")  # fmt: skip
            ax.legend(fontsize=7, loc="center right")
    ax.set_ylim(0, 105)
    ax.set_xlabel("example length (characters)")
    ax.set_ylabel("test accuracy (%), span in the middle")
    ax.set_title("(b) the middle against length")
    for ax in axes[0]:
        ax.axhline(chance, color="grey", ls="--", lw=0.8)
        ax.text(0.99, chance, f"chance {chance:.0f} %", transform=ax.get_yaxis_transform(), ha="right", va="bottom",
                fontsize=7, color="grey", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})  # fmt: skip
    ax = axes[1, 0]
    nwi = df[(df["measure"] == "nwi") & (df["position"] == "mid")]
    span, nwi_length = _span_fraction(df)
    for model, g in nwi.groupby("model"):
        ax.plot(g["bin"], g["value"], color=palette[model], lw=1.2)
    lo = (1 - span) / 2 * 99
    ax.axvspan(lo, lo + span * 99, color="red", alpha=0.12, lw=0)
    ax.set_xlabel(f"relative position (0-99; {nwi_length} characters)")
    ax.set_ylabel("normalised word importance")
    ax.set_title("(c) where each model looks, span in the middle (shaded)")
    for ax, moment in zip((axes[1, 1], axes[2, 0]), ("init", "target")):
        sub = df[(df["measure"] == f"grad_{moment}") & (df["value"] > 0) & (df["train_size"] == size)]
        sub = sub.groupby(["model", "bin"], as_index=False)["value"].mean()  # over positions: the same probe
        for model, g in sub.groupby("model"):
            ax.plot(g["bin"], g["value"], color=palette[model], lw=1.2)
        ax.set_yscale("log")
        ax.set_xlabel(f"relative position (0-99; {longest} characters)")
        ax.set_ylabel("mean ||dL / dh_t||")
        ax.set_title(f"({'d' if moment == 'init' else 'e'}) gradient norm "
                     + ("at initialisation" if moment == "init" else "at 95 % training accuracy"))  # fmt: skip
    ax = axes[2, 1]
    ratios = df[df["measure"].isin(["ratio_init", "ratio_95"]) & (df["value"] > 0)]
    ratios = ratios.assign(
        moment=ratios["measure"].map({"ratio_init": "initialisation", "ratio_95": "95 % train acc."})
    )
    sns.stripplot(data=ratios, x="model", y="value", hue="moment", order=models, dodge=True, ax=ax, size=4)
    ax.set_yscale("log")
    ax.axhline(1.0, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("")
    ax.tick_params(axis="x", rotation=30)
    ax.set_ylabel("vanishing ratio (middle / ends)")
    ax.set_title("(f) vanishing ratio, every position and size")
    ax.legend(fontsize=7, title="")
    for ax in axes.flat:
        ax.title.set_fontsize(8)
        ax.xaxis.label.set_fontsize(7.5)
        ax.yaxis.label.set_fontsize(7.5)
        ax.tick_params(labelsize=7)
    handles = [plt.Line2D([], [], color=palette[m], lw=4, label=m) for m in models]
    fig.legend(handles=handles, loc="lower center", ncol=len(models), fontsize=7.5, frameon=False)
    fig.suptitle("Last-state BiLSTM against pooled models on a position-controlled task (Maini et al.)", fontsize=9)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig
