"""Test cross-entropy of every neural model: the type x layers x size grid of Karpathy et al. Fig 1 left.

Cross-entropy is in nats per character, with the standard deviation of 100 bootstrap
resamples of test positions. Rows of the grid are parameter budgets: the width of an LSTM,
with RNN and GRU widths chosen to have nearly the same number of parameters.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from charlm.predictions import LN2
from corpora.errors import run_cli

from .common import BRIEF_TRAINING, analysis_main, headline_id, style
from .context import Context

TITLE = "Test cross-entropy of every model"
QUESTION = "How do the RNN, GRU and LSTM compare at equal parameter budgets and depths?"
ARCHS = ("rnn", "gru", "gru-paper", "lstm")  # gru-paper: the papers' GRU (reset before the recurrent product)
PAPER_ARCH = {"gru-paper": "gru"}  # Fig 1's GRU is the papers' form; torch's `gru` is compared with it too
SETTINGS = {"split": "test", "resamples": 100}  # split scored; bootstrap resamples of positions (Fig 1: 100)
PAPER_SOURCE = "Karpathy et al. (2016), Fig. 1 left (test cross-entropy, nats/char, bootstrap std < 4e-3)"

# Fig. 1 left. Rows: LSTM-width budget; columns: (type, layers). None where the paper has "-".
_PAPER = {
    "warpeace": {
        64: [1.449, 1.442, 1.540, 1.446, 1.401, 1.396, 1.398, 1.373, 1.472],
        128: [1.277, 1.227, 1.279, 1.417, 1.286, 1.277, 1.230, 1.226, 1.253],
        256: [1.189, 1.137, 1.141, 1.342, 1.256, 1.239, 1.198, 1.164, 1.138],
        512: [1.161, 1.092, 1.082, None, None, None, 1.170, 1.201, 1.077],
    },
    "linux": {
        64: [1.355, 1.331, 1.366, 1.407, 1.371, 1.383, 1.335, 1.298, 1.357],
        128: [1.149, 1.128, 1.177, 1.241, 1.120, 1.220, 1.154, 1.125, 1.150],
        256: [1.026, 0.972, 0.998, 1.171, 1.116, 1.116, 1.039, 0.991, 1.026],
        512: [0.952, 0.840, 0.846, None, None, None, 0.943, 0.861, 0.829],
    },
}


def paper_table() -> pd.DataFrame:
    rows = []
    for corpus, grid in _PAPER.items():
        for budget, values in grid.items():
            for k, value in enumerate(values):
                arch, layers = ("lstm", "rnn", "gru")[k // 3], k % 3 + 1
                if value is not None:
                    rows.append(
                        {"corpus": corpus, "arch": arch, "layers": layers, "budget": budget, "paper_ce_nats": value}
                    )
    return pd.DataFrame(rows)


def compute(ctx: Context) -> pd.DataFrame:
    """One row per RNN / GRU / LSTM model: cross-entropy (nats and bits per char) with its bootstrap std."""
    split, resamples = ctx.settings["split"], ctx.settings["resamples"]
    rows = []
    for _, row in ctx.models(arch=ARCHS).iterrows():
        mean, std = ctx.predictions(row, split).cross_entropy(resamples)
        rows.append({
            "corpus": row["corpus"], "arch": row["arch"], "layers": int(row["layers"]), "size": int(row["size"]),
            "budget": row["budget"], "params": int(row["params"]), "dropout": float(row["dropout"]),
            "seed": int(row["seed"]), "chars_trained": int(row["chars_trained"]), "split": split,
            "ce_nats": mean, "ce_std": std, "ce_bits": mean / LN2, "model_id": row["model_id"],
            "group_id": row["group_id"],
        })  # fmt: skip
    cols = ["corpus", "arch", "layers", "size", "budget", "params", "dropout", "seed", "chars_trained", "split",
            "ce_nats", "ce_std", "ce_bits", "model_id", "group_id"]  # fmt: skip
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["corpus", "budget", "arch", "layers", "seed"], ignore_index=True)


def with_paper(df: pd.DataFrame) -> pd.DataFrame:
    """Our grid (mean over the seeds of one configuration) beside the paper's number for the same cell."""
    ours = df.groupby(["corpus", "arch", "layers", "budget", "group_id"], as_index=False, dropna=False).agg(
        params=("params", "first"), ce_nats=("ce_nats", "mean"), ce_std=("ce_std", "mean"), seeds=("seed", "count")
    )
    ours["paper_arch"] = ours["arch"].replace(PAPER_ARCH)
    paper = paper_table().rename(columns={"arch": "paper_arch"})
    merged = ours.merge(paper, on=["corpus", "paper_arch", "layers", "budget"], how="left")
    return merged.drop(columns=["group_id", "paper_arch"])


def plot(df: pd.DataFrame):
    style()
    corpora_ = sorted(df["corpus"].unique())
    fig, axes = plt.subplots(1, max(1, len(corpora_)), figsize=(5.5 * max(1, len(corpora_)), 3.2), squeeze=False)
    for ax, corpus in zip(axes[0], corpora_):
        sub = df[df["corpus"] == corpus].assign(model=lambda d: d["arch"].str.upper() + " L" + d["layers"].astype(str))
        # a model sized to no budget row (trained at a width of its own) sits in the row of its width
        grid = sub.assign(budget=sub["budget"].fillna(sub["size"])).pivot_table(
            index="budget", columns="model", values="ce_nats", aggfunc="mean"
        )
        sns.heatmap(
            grid, annot=True, fmt=".3f", cmap="viridis_r", ax=ax, cbar_kws={"label": "test cross-entropy (nats/char)"}
        )
        ax.set_title(f"{corpus}: test cross-entropy")
        ax.set_xlabel("model type and layers")
        ax.set_ylabel("budget row (1-layer LSTM width)")
    fig.tight_layout()
    return fig


def _headline_sentence(sub: pd.DataFrame) -> str:
    """Where the model the other sections detail (the headline LSTM, analyses.common.headline_id) stands."""
    h = sub[sub["model_id"] == headline_id(sub)].iloc[0]
    lstm = sub[sub["arch"] == h["arch"]]
    best = lstm.loc[lstm["ce_nats"].idxmin()]
    name = f"{int(h['layers'])}-layer {h['arch'].upper()} of width {int(h['size'])}"
    where = (
        f"the best {h['arch'].upper()} here"
        if best["model_id"] == h["model_id"]
        else f"{h['ce_nats'] - best['ce_nats']:.3f} nats behind the best {h['arch'].upper()} here (the "
        f"{int(best['layers'])}-layer of width {int(best['size'])}, seed {int(best['seed'])})"
    )
    return (
        f"The headline model the other sections detail (largest budget row, deepest, lowest seed) is the {name}, seed "
        f"{int(h['seed'])}, at {h['ce_nats']:.3f} nats/char: {where}."
    )


def caption(df: pd.DataFrame) -> str:
    parts = []
    for corpus, sub in df.groupby("corpus"):
        best = sub.loc[sub["ce_nats"].idxmin()]
        by_type = sub.groupby("arch")["ce_nats"].min().sort_values()
        ranking = " < ".join(f"{a.upper()} {v:.3f}" for a, v in by_type.items())
        row = f"budget row {int(best['budget'])}" if pd.notna(best["budget"]) else "sized to no budget row"
        parts.append(
            f"On {corpus} the best model is the {int(best['layers'])}-layer {best['arch'].upper()} of width "
            f"{int(best['size'])} ({int(best['params']):,} parameters, {row}) at "
            f"{best['ce_nats']:.3f} +- {best['ce_std']:.3f} nats/char ({best['ce_bits']:.3f} bits); best per type: "
            f"{ranking}."
        )
        parts.append(_headline_sentence(sub))
    parts.append(
        "Every model of a budget row has nearly the parameters of a 1-layer LSTM of that width (Karpathy et al. "
        "sec 4.1), so deeper models are narrower. Bootstrap standard deviations (100 resamples of test positions) "
        "measure test-set noise only, not seed-to-seed variation."
    )
    return " ".join(parts)


def summary(df: pd.DataFrame) -> str:
    best = df.loc[df.groupby("corpus")["ce_nats"].idxmin()]
    paper = paper_table()
    items = []
    for _, r in best.iterrows():
        arch = PAPER_ARCH.get(r["arch"], r["arch"])
        match = paper[(paper["corpus"] == r["corpus"]) & (paper["arch"] == arch) & (paper["layers"] == r["layers"])
                      & (paper["budget"] == r["budget"])]  # fmt: skip
        theirs = f" (paper, same cell: {match['paper_ce_nats'].iloc[0]:.3f})" if not match.empty else ""
        items.append(f"{r['corpus']}: best {r['arch'].upper()} L{int(r['layers'])} {r['ce_nats']:.3f} nats{theirs}")
    return "; ".join(items)


def notes(df: pd.DataFrame) -> list[str]:
    """What a reader must know before comparing with the paper."""
    out = []
    budgets = sorted(df["chars_trained"].unique())
    if budgets and budgets[-1] < BRIEF_TRAINING:
        out.append(
            f"These models saw {', '.join(f'{b:,}' for b in budgets)} training characters, a fraction of the paper's "
            "50 epochs with early stopping (about 130M characters on War and Peace): they are far from converged, so "
            "their cross-entropies sit well above the paper's. Compare the ordering of types, not the values."
        )
    if "linux" in set(df["corpus"]):
        out.append(
            "Our Linux corpus is built from the 6.1 kernel's kernel/ folder with the paper's recipe and length; the "
            "paper's own file came from an older kernel, so Linux numbers can differ slightly even at convergence."
        )
    return out


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
