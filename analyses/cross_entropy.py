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

from charlm.model import LSTM_FAMILY, matched_size
from charlm.predictions import LN2
from corpora.errors import run_cli

from .common import analysis_parser, emit, index_for_args, load_predictions, style

TITLE = "Test cross-entropy of every model"
QUESTION = "How do the RNN, GRU and LSTM compare at equal parameter budgets and depths?"
PAPER_SOURCE = "Karpathy et al. (2016), Fig. 1 left (test cross-entropy, nats/char, bootstrap std < 4e-3)"
BUDGETS = (64, 128, 256, 512)

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


def budget_of(arch: str, size: int, layers: int, vocab_size: int, candidates=BUDGETS) -> int | None:
    """The LSTM width whose parameter budget this model was sized to (None if it matches none)."""
    if arch in LSTM_FAMILY:
        return int(size)
    for budget in sorted(set(candidates) | {int(size)}):
        if matched_size(arch, budget, vocab_size, layers) == size:
            return budget
    return None


def compute(
    index: pd.DataFrame, split: str = "test", resamples: int = 100, archs=("rnn", "gru", "lstm")
) -> pd.DataFrame:
    """One row per neural model: cross-entropy (nats and bits per char) with its bootstrap std."""
    rows = []
    neural = index[(index["family"] == "neural") & index["arch"].isin(archs)]
    for _, row in neural.iterrows():
        preds = load_predictions(row, split)
        mean, std = preds.cross_entropy(resamples)
        rows.append(
            {
                "corpus": row["corpus"],
                "arch": row["arch"],
                "layers": int(row["layers"]),
                "size": int(row["size"]),
                "budget": budget_of(row["arch"], int(row["size"]), int(row["layers"]), preds.logp.shape[1]),
                "params": int(row["params"]),
                "seed": int(row["seed"]),
                "chars_trained": int(row["chars_trained"]),
                "split": split,
                "ce_nats": mean,
                "ce_std": std,
                "ce_bits": mean / LN2,
                "model_id": row["model_id"],
            }
        )
    cols = [
        "corpus",
        "arch",
        "layers",
        "size",
        "budget",
        "params",
        "seed",
        "chars_trained",
        "split",
        "ce_nats",
        "ce_std",
        "ce_bits",
        "model_id",
    ]
    return pd.DataFrame(rows, columns=cols).sort_values(
        ["corpus", "budget", "arch", "layers", "seed"], ignore_index=True
    )


def with_paper(df: pd.DataFrame) -> pd.DataFrame:
    """Our grid (mean over seeds) beside the paper's number for the same cell."""
    ours = df.groupby(["corpus", "arch", "layers", "budget"], as_index=False).agg(
        ce_nats=("ce_nats", "mean"), ce_std=("ce_std", "mean"), seeds=("seed", "count")
    )
    return ours.merge(paper_table(), on=["corpus", "arch", "layers", "budget"], how="left")


def plot(df: pd.DataFrame):
    style()
    corpora_ = sorted(df["corpus"].unique())
    fig, axes = plt.subplots(1, max(1, len(corpora_)), figsize=(5.5 * max(1, len(corpora_)), 3.2), squeeze=False)
    for ax, corpus in zip(axes[0], corpora_):
        sub = df[df["corpus"] == corpus].assign(model=lambda d: d["arch"].str.upper() + " L" + d["layers"].astype(str))
        grid = sub.pivot_table(index="budget", columns="model", values="ce_nats", aggfunc="mean")
        sns.heatmap(
            grid, annot=True, fmt=".3f", cmap="viridis_r", ax=ax, cbar_kws={"label": "test cross-entropy (nats/char)"}
        )
        ax.set_title(f"{corpus}: test cross-entropy")
        ax.set_xlabel("model type and layers")
        ax.set_ylabel("parameter budget (LSTM width)")
    fig.tight_layout()
    return fig


def caption(df: pd.DataFrame) -> str:
    parts = []
    for corpus, sub in df.groupby("corpus"):
        best = sub.loc[sub["ce_nats"].idxmin()]
        by_type = sub.groupby("arch")["ce_nats"].min().sort_values()
        ranking = " < ".join(f"{a.upper()} {v:.3f}" for a, v in by_type.items())
        parts.append(
            f"On {corpus} the best model is the {int(best['layers'])}-layer {best['arch'].upper()} of width "
            f"{int(best['size'])} "
            f"at {best['ce_nats']:.3f} +- {best['ce_std']:.3f} nats/char ({best['ce_bits']:.3f} bits); best "
            f"per type: {ranking}."
        )
    parts.append(
        "Bootstrap standard deviations (100 resamples of test positions) measure test-set noise only, not "
        "seed-to-seed variation."
    )
    return " ".join(parts)


def notes(df: pd.DataFrame) -> list[str]:
    """What a reader must know before comparing with the paper."""
    out = []
    budgets = sorted(df["chars_trained"].unique())
    if budgets and budgets[-1] < 20_000_000:
        out.append(
            f"These models saw {', '.join(f'{b:,}' for b in budgets)} training characters, a fraction of the paper's "
            "50 epochs with early stopping (about 130M characters on War and Peace): they are far from converged, so "
            "their cross-entropies sit well above the paper's. Compare the ordering of types, not the values."
        )
    out.append(
        "Our Linux corpus is built from the 6.1 kernel's kernel/ folder with the paper's recipe and length; "
        "the paper's "
        "own file came from an older kernel, so Linux numbers can differ slightly even at convergence."
    )
    return out


def main(argv=None) -> int:
    parser = analysis_parser("python -m analyses.cross_entropy", __doc__.split("\n\n")[0])
    parser.add_argument("--resamples", type=int, default=100, help="bootstrap resamples (default %(default)s)")
    args = parser.parse_args(argv)
    df = compute(index_for_args(args), args.split, args.resamples)
    emit(df, plot, args)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
