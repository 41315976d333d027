"""Did training converge? The validation curve of every recurrent model, and what it still gained at the end.

Karpathy et al. (2016) sec 3.3 train for 50 epochs with early stopping on validation, so their numbers are those
of converged models; every comparison with their tables assumes ours are too. A model counts as converged here
when its best validation loss improved by less than `converged_gain` nats per epoch over its last `window`
finished epochs (0.005 nats/epoch: the criterion of the reference-models issue), or when early stopping ended it
(validation stopped improving at all). A model stopped by a character budget (the quick profile's 4M characters)
is not converged, whatever its curve: it is what the captions elsewhere call "briefly trained".

The train loss of an epoch is the mean of its minibatch losses while the weights were changing (as char-rnn
prints it), so it is not the final model's train loss; the gap to validation is indicative only.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from charlm.model import ARCH_LABELS
from corpora.errors import run_cli

from .common import analysis_main, report_order, style
from .context import Context, MissingInput, Needs

TITLE = "Training curves: did every model converge?"
QUESTION = "Is each model trained to convergence, as the papers' were, before we compare it with their numbers?"
SETTINGS = {
    "converged_gain": 0.005,  # nats/epoch: below this over the last `window` epochs a model counts as converged
    "window": 3,  # finished epochs the final gain is measured over
}
NEEDS = Needs(predictions=False)  # reads checkpoints (traces, gradients, samples), not Predictions
COLUMNS = [
    "corpus", "arch", "label", "layers", "size", "budget", "dropout", "seed", "model_id", "epoch", "step", "chars",
    "lr", "train_loss", "val_loss", "stopped", "full_epoch", "converged_gain", "window",
]  # fmt: skip


def compute(ctx: Context) -> pd.DataFrame:
    """One row per (model, validation point): every recurrent model of the context, every seed and dropout."""
    rows = []
    gain, window = float(ctx.settings["converged_gain"]), int(ctx.settings["window"])
    for _, model in ctx.models(all_dropouts=True).iterrows():
        metrics = ctx.metrics(model)
        for record in metrics.get("epochs") or []:
            rows.append({
                "corpus": model["corpus"], "arch": model["arch"], "label": ARCH_LABELS.get(model["arch"], "?"),
                "layers": int(model["layers"]), "size": int(model["size"]), "budget": model["budget"],
                "dropout": float(model["dropout"]), "seed": int(model["seed"]), "model_id": model["model_id"],
                "epoch": float(record["epoch"]), "step": int(record["step"]), "chars": int(record["chars"]),
                "lr": float(record["lr"]), "train_loss": float(record["train_loss"]),
                "val_loss": float(record["val_loss"]), "stopped": metrics.get("stopped"),
                "full_epoch": float(record["epoch"]).is_integer(), "converged_gain": gain, "window": window,
            })  # fmt: skip
    if not rows:
        raise MissingInput(
            "no model here recorded a validation curve (the epochs of its metrics.json), which `python -m "
            "charlm.train` writes for every model it trains"
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def final_gain(val_losses: np.ndarray, window: int) -> float:
    """Nats per epoch the best validation loss gained over the last `window` finished epochs (NaN: too few)."""
    if len(val_losses) <= window:
        return float("nan")
    return float((np.min(val_losses[:-window]) - np.min(val_losses)) / window)


def per_model(df: pd.DataFrame) -> pd.DataFrame:
    """One row per model: epochs, best validation loss, its final gain per epoch, why it stopped, and the verdict
    (with the criterion compute() was given: converged_gain nats/epoch over `window` epochs)."""
    rows = []
    if df.empty:
        return pd.DataFrame(rows)
    converged_gain, window = float(df["converged_gain"].iloc[0]), int(df["window"].iloc[0])
    for model_id, sub in df.groupby("model_id", sort=False):
        full = sub[sub["full_epoch"]]
        gain = final_gain(full["val_loss"].to_numpy(), window)
        stopped = sub["stopped"].iloc[0]
        if stopped == "budget":
            verdict = "no: stopped by its character budget"
        elif stopped == "early_stopping":
            verdict = "yes: validation stopped improving"
        elif np.isnan(gain):
            verdict = f"unknown: fewer than {window + 1} epochs"
        else:
            verdict = "yes" if gain < converged_gain else f"no: still gaining {gain:.4f} nats/epoch"
        best = sub.loc[sub["val_loss"].idxmin()]
        rows.append({
            **sub.iloc[0][["corpus", "arch", "label", "layers", "size", "budget", "dropout", "seed"]].to_dict(),
            "epochs": float(sub["epoch"].max()), "best_val": float(best["val_loss"]),
            "best_epoch": float(best["epoch"]), "train_loss_at_best": float(best["train_loss"]),
            "final_gain_per_epoch": gain, "stopped": stopped, "converged": verdict, "model_id": model_id,
        })  # fmt: skip
    return report_order(pd.DataFrame(rows), "layers", "dropout", "seed") if rows else pd.DataFrame(rows)


def report_table(df: pd.DataFrame) -> pd.DataFrame:
    table = per_model(df)
    return table.drop(columns=["model_id", "arch"]) if not table.empty else table


def plot(df: pd.DataFrame):
    style()
    corpora_ = sorted(df["corpus"].unique())
    fig, axes = plt.subplots(1, max(1, len(corpora_)), figsize=(6 * max(1, len(corpora_)), 3.6), squeeze=False)
    for ax, corpus in zip(axes[0], corpora_):
        sub = df[df["corpus"] == corpus].assign(
            model=lambda d: d["label"] + " " + d["layers"].astype(str) + "x" + d["size"].astype(str)
            + " s" + d["seed"].astype(str)
        )  # fmt: skip
        sns.lineplot(sub, x="epoch", y="val_loss", hue="model", ax=ax, marker=".", linewidth=1)
        ax.set_title(f"{corpus}: validation loss per epoch")
        ax.set_xlabel("epochs of training")
        ax.set_ylabel("validation cross-entropy (nats/char)")
        ax.legend(fontsize=6, ncols=2)
    fig.tight_layout()
    return fig


def caption(df: pd.DataFrame) -> str:
    if df.empty:
        return "No model recorded a validation curve."
    table = per_model(df)
    parts = []
    for corpus, sub in table.groupby("corpus", sort=False):
        n = len(sub)
        converged = sub["converged"].str.startswith("yes")
        budget = (sub["stopped"] == "budget").sum()
        gains = sub["final_gain_per_epoch"].dropna()
        text = f"On {corpus}, {int(converged.sum())} of {n} models converged"
        if converged.any():
            kinds = sub.loc[converged, "stopped"].value_counts()
            text += " (" + ", ".join(f"{count} {_STOPPED.get(kind, kind)}" for kind, count in kinds.items()) + ")"
        if budget:
            most = sub.loc[sub["stopped"] == "budget", "epochs"].max()
            text += f"; {int(budget)} stopped at their character budget after {most:.2g} epochs at most"
        if not gains.empty:
            worst = sub.loc[gains.idxmax()]
            text += (
                f"; the largest final gain is {gains.max():.4f} nats/epoch ({worst['label']} {int(worst['layers'])}x"
                f"{int(worst['size'])} seed {int(worst['seed'])}, after {worst['epochs']:.0f} epochs)"
            )
        parts.append(text + ".")
    parts.append(
        f"A model counts as converged when its best validation loss gained less than {df['converged_gain'].iloc[0]:g} "
        f"nats per epoch over its last {int(df['window'].iloc[0])} epochs, or when early stopping ended it (Karpathy "
        "et al. sec 3.3 train 50 epochs with early stopping)."
    )
    return " ".join(parts)


_STOPPED = {
    "converged": "by the convergence rule",
    "early_stopping": "by early stopping",
    "epochs": "at the epoch cap",
}


def summary(df: pd.DataFrame) -> str:
    if df.empty:
        return "no validation curves"
    table = per_model(df)
    yes = table["converged"].str.startswith("yes")
    gain = df["converged_gain"].iloc[0]
    return f"{int(yes.sum())} of {len(table)} models converged (final gain < {gain:g} nats/epoch)"


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
