"""Levy et al.'s LSTM ablations against the LSTM, in the shape of their Table 1.

The LSTM is reported as mean +- std over seeds; each ablation (trained with the LSTM's
width and hyperparameters) sits beside it with its gap to the LSTM mean in units of the
LSTM's seed std, the yardstick Levy et al. give for "within noise".
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from charlm.model import ARCH_LABELS
from corpora.errors import run_cli

from .common import analysis_main, style
from .context import Context, MissingInput

TITLE = "Levy et al.'s ablations of the LSTM"
QUESTION = "Is the LSTM's power in its embedded S-RNN or in the gated, element-wise weighted sum of its memory cell?"
PAPER_SOURCE = "Levy et al. (2018), Table 1 (PTB word-level perplexity; LSTM mean +- std over 5 seeds)"
ORDER = ["lstm", "lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "lstm-gates"]
SETTINGS = {"split": "test", "resamples": 100}  # split scored; bootstrap resamples of positions
LABELS = ARCH_LABELS


def paper_table() -> pd.DataFrame:
    """Table 1 of Levy et al.: perplexity (lower is better); gap in units of the LSTM's std, computed here."""
    rows = []
    for config, lstm, std, others in (
        ("PTB (Medium)", 83.9, 0.3, [80.5, 81.6, 83.3, 140.9]),
        ("PTB (Large)", 78.8, 0.2, [76.0, 78.5, 82.9, 126.1]),
    ):
        rows.append(
            {"configuration": config, "model": "LSTM", "perplexity": lstm, "lstm_std": std, "gap_in_lstm_std": 0.0}
        )
        for arch, value in zip(ORDER[1:], others):
            rows.append(
                {
                    "configuration": config,
                    "model": LABELS[arch],
                    "perplexity": value,
                    "lstm_std": std,
                    "gap_in_lstm_std": round((value - lstm) / std, 1),
                }
            )
    return pd.DataFrame(rows)


def compute(ctx: Context) -> pd.DataFrame:
    """Per corpus and LSTM setting (layers, width): LSTM mean +- seed std, each ablation's cross-entropy and gap.

    Seeds are averaged only within one configuration (`group_id`): models that differ in anything else (the
    corpus bytes, split, budget, recipe) are never pooled.
    """
    split, resamples = ctx.settings["split"], ctx.settings["resamples"]
    neural = ctx.models(arch=tuple(ORDER))
    rows = []
    for (_, layers, size), group in neural.groupby(["corpus_key", "layers", "size"]):
        lstm_groups = group[group["arch"] == "lstm"]["group_id"].unique()
        if len(lstm_groups) != 1 or group["arch"].nunique() < 2:
            continue  # an ablation needs its LSTM (one configuration, any number of seeds), and the LSTM its ablations
        scores = {r["model_id"]: ctx.predictions(r, split).cross_entropy(resamples) for _, r in group.iterrows()}
        lstm = group[group["arch"] == "lstm"]
        lstm_ce = np.array([scores[m][0] for m in lstm["model_id"]])
        lstm_mean = float(lstm_ce.mean())
        lstm_std = float(lstm_ce.std(ddof=1)) if lstm_ce.size > 1 else float("nan")
        for arch in ORDER:
            for _, sub in group[group["arch"] == arch].groupby("group_id"):
                ce = np.array([scores[m][0] for m in sub["model_id"]])
                boot = np.array([scores[m][1] for m in sub["model_id"]])
                mean = float(ce.mean())
                rows.append({
                    "corpus": group["corpus"].iloc[0], "layers": int(layers), "size": int(size), "arch": arch,
                    "model": LABELS[arch], "budget": sub["budget"].iloc[0], "dropout": float(sub["dropout"].iloc[0]),
                    "seeds": int(ce.size), "ce_nats": mean,
                    "seed_std": float(ce.std(ddof=1)) if ce.size > 1 else float("nan"),
                    "bootstrap_std": float(boot.mean()), "params": int(sub["params"].iloc[0]),
                    "gap_nats": mean - lstm_mean,
                    "gap_in_lstm_std": (mean - lstm_mean) / lstm_std if np.isfinite(lstm_std) and lstm_std > 0
                    else float("nan"),
                })  # fmt: skip
    if not rows:
        raise MissingInput(
            "no LSTM with an ablation of the same depth and width: train Levy et al.'s ablations beside it with "
            "`python -m reports --profile quick` (or charlm.train --arch lstm-srnn at the LSTM's --layers and --size)"
        )
    cols = ["corpus", "layers", "size", "arch", "model", "budget", "dropout", "seeds", "ce_nats", "seed_std",
            "bootstrap_std", "params", "gap_nats", "gap_in_lstm_std"]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


def plot(df: pd.DataFrame):
    style()
    corpora_ = sorted(df["corpus"].unique())
    fig, axes = plt.subplots(1, max(1, len(corpora_)), figsize=(5.0 * max(1, len(corpora_)), 3.4), squeeze=False)
    for ax, corpus in zip(axes[0], corpora_):
        sub = df[df["corpus"] == corpus].copy()
        sub["setting"] = "L" + sub["layers"].astype(str) + " H" + sub["size"].astype(str)
        order = [LABELS[a] for a in ORDER if a in set(sub["arch"])]
        sns.barplot(data=sub, x="model", y="ce_nats", hue="setting", order=order, ax=ax)
        lstm = sub[sub["arch"] == "lstm"]
        for _, r in lstm.iterrows():
            if np.isfinite(r["seed_std"]):
                ax.axhspan(r["ce_nats"] - r["seed_std"], r["ce_nats"] + r["seed_std"], color="grey", alpha=0.25, lw=0)
        low, high = sub["ce_nats"].min(), sub["ce_nats"].max()
        ax.set_ylim(max(0.0, low - 0.15 * (high - low + 0.05)), high + 0.1 * (high - low + 0.05))
        ax.set_title(f"{corpus}: ablations (grey band: LSTM mean +- seed std)")
        ax.set_xlabel("")
        ax.set_ylabel("test cross-entropy (nats/char)")
        ax.tick_params(axis="x", rotation=25)
    fig.tight_layout()
    return fig


def caption(df: pd.DataFrame) -> str:
    parts = []
    for (corpus, layers, size), sub in df.groupby(["corpus", "layers", "size"]):
        lstm = sub[sub["arch"] == "lstm"].iloc[0]
        others = sub[sub["arch"] != "lstm"]
        gaps = ", ".join(
            f"{r['model']} {r['gap_nats']:+.3f} nats ({r['gap_in_lstm_std']:+.1f} std)" for _, r in others.iterrows()
        )
        parts.append(
            f"On {corpus} ({layers} x {size}) the LSTM reaches {lstm['ce_nats']:.3f} +- "
            f"{lstm['seed_std']:.3f} nats/char over {lstm['seeds']} seeds; gaps to it: {gaps}."
        )
    parts.append(
        "Levy et al. found the gated weighted sum (every ablation but - GATES) within a few points of the "
        "LSTM on word-level PTB, and - GATES far behind; compare the ordering and the gaps in std units, not "
        "the values (their metric is word perplexity)."
    )
    return " ".join(parts)


def summary(df: pd.DataFrame) -> str:
    items = []
    for corpus, sub in df.groupby("corpus"):
        order = " < ".join(sub.sort_values("ce_nats")["model"])
        items.append(f"{corpus}: {order}")
    order = " < ".join(LABELS[a] for a in ("lstm-srnn", "lstm-srnn-out", "lstm", "lstm-srnn-hidden")) + " << "
    return "; ".join(items) + f" (Levy et al. PTB Large: {order}{LABELS['lstm-gates']})"


def notes(df: pd.DataFrame) -> list[str]:
    return [
        "Levy et al. measured word-level perplexity on PTB with tuned LSTM hyperparameters; ours is character-level "
        "cross-entropy with Karpathy et al.'s recipe. The paper's gap column is computed here from its Table 1 the "
        "same way as ours: (model - LSTM mean) / LSTM std over seeds.",
        "Seed std from only a few seeds is itself uncertain; a gap of a few std units is weak evidence.",
    ]


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
