"""Did training converge? The validation curve of every recurrent model, why it stopped, and what it still gained.

Karpathy et al. (2016) sec 3.3 train for at most 50 epochs with early stopping on validation, so their numbers are
those of converged models; every comparison with their tables assumes ours are too. Each model records why it
stopped (metrics.json `stopped`):

    early_stopping   validation stopped improving for `patience` epochs           the papers' rule
    epochs           the epoch cap (50 in the papers' recipe)                      the papers' rule
    converged        the convergence shortcut: best validation gaining less than
                     the train config's `converge_delta` nats/epoch over its last
                     `converge_window` epochs (the reference models trained before
                     issue 38 used 0.002; the papers' rule has no shortcut)
    budget           a character budget (the quick profile's 4M characters)

A model is "still falling" when it stopped while its best validation loss gained more than `converged_gain`
nats per epoch over its last `window` finished epochs (default 0.002, the shortcut's own threshold: one number for
every rule). Only the papers' rule counts as converged; a model stopped by the shortcut gained less than its delta
but had not stopped improving, and one stopped by a character budget is what captions elsewhere call briefly trained.

The train loss of an epoch is the mean of its minibatch losses while the weights were changing (as char-rnn
prints it), so it is not the final model's train loss; the gap to validation is indicative only.

What holds a model at the cap still falling, the step or the model? The recipe decays the learning rate by 0.95 an
epoch after epoch 10, so each epoch's validation gain is read per unit of the learning rate it trained at (the sum
of the epochs' rates): over the last `rate_window` epochs, and over as many epochs `rate_lag` epochs before. Fitting
a model whose capacity runs out buys less per unit of rate as it goes (a ratio late / early under 1); a ratio over 1
means each smaller step buys more, the signature of a model held up by the noise of its steps (16 streams a batch at
the recipe's rate), which the schedule's annealing is still removing. At the last window's gain per unit of rate,
the rest of the schedule (the rate decaying forever: lr x d / (1 - d) more) would buy `remainder` nats of validation:
a lower estimate where the ratio is over 1, an upper one where it is under.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from charlm.model import ARCH_LABELS
from corpora.errors import run_cli

from .base import Analysis, Claim, Finding, Result
from .common import analysis_main, report_order
from .context import Context, MissingInput, Needs

TITLE = "Training curves: did every model converge?"
QUESTION = "Is each model trained to convergence, as the papers' were, before we compare it with their numbers?"
SETTINGS = {
    "converged_gain": 0.002,  # nats/epoch: a model gaining more over its last `window` epochs was still falling
    "window": 3,  # finished epochs the final gain is measured over (the shortcut's converge_window)
    "rate_window": 5,  # epochs the validation gain per unit of learning rate is read over, at the end and ...
    "rate_lag": 20,  # ... this many epochs before (models at the epoch cap with rate_window + rate_lag epochs)
}
NEEDS = Needs(predictions=False)  # reads checkpoints (traces, gradients, samples), not Predictions
COLUMNS = [
    "corpus", "arch", "label", "layers", "size", "budget", "dropout", "seed", "model_id", "epoch", "step", "chars",
    "lr", "train_loss", "val_loss", "stopped", "full_epoch", "converged_gain", "window", "converge_delta",
    "max_epochs", "patience", "lr_decay", "rate_window", "rate_lag",
]  # fmt: skip
RULES = {  # metrics.json `stopped` -> the rule in words, and whether it is the papers'
    "early_stopping": ("early stopping", True),
    "epochs": ("the epoch cap", True),
    "converged": ("the convergence shortcut", False),
    "budget": ("a character budget", False),
}


def measure(ctx: Context) -> pd.DataFrame:
    """One row per (model, validation point): every recurrent model of the context, every seed and dropout, with
    the stopping rule its train config set (converge_delta 0: no shortcut)."""
    rows = []
    gain, window = float(ctx.settings["converged_gain"]), int(ctx.settings["window"])
    rate_window, rate_lag = int(ctx.settings["rate_window"]), int(ctx.settings["rate_lag"])
    for _, model in ctx.models(all_dropouts=True).iterrows():
        metrics = ctx.metrics(model)
        config = metrics.get("train_config") or {}
        for record in metrics.get("epochs") or []:
            rows.append({
                "corpus": model["corpus"], "arch": model["arch"], "label": ARCH_LABELS.get(model["arch"], "?"),
                "layers": int(model["layers"]), "size": int(model["size"]), "budget": model["budget"],
                "dropout": float(model["dropout"]), "seed": int(model["seed"]), "model_id": model["model_id"],
                "epoch": float(record["epoch"]), "step": int(record["step"]), "chars": int(record["chars"]),
                "lr": float(record["lr"]), "train_loss": float(record["train_loss"]),
                "val_loss": float(record["val_loss"]), "stopped": metrics.get("stopped"),
                "full_epoch": float(record["epoch"]).is_integer(), "converged_gain": gain, "window": window,
                "converge_delta": float(config.get("converge_delta") or 0.0),
                "max_epochs": config.get("epochs", np.nan), "patience": config.get("patience", np.nan),
                "lr_decay": config.get("lr_decay", np.nan), "rate_window": rate_window, "rate_lag": rate_lag,
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


def trailing_gains(val_losses: np.ndarray, window: int) -> np.ndarray:
    """final_gain after each finished epoch (NaN before `window` + 1 epochs): the curve the stopping rules read."""
    return np.array([final_gain(val_losses[: k + 1], window) for k in range(len(val_losses))])


RATE_COLUMNS = ("rate_early", "rate_late", "rate_ratio", "remainder")  # gain_per_rate's, one per model


def gain_per_rate(val_losses: np.ndarray, rates: np.ndarray, window: int, lag: int, decay: float) -> dict:
    """Validation gain per unit of learning rate over the last `window` epochs ("rate_late") and over the `window`
    epochs ending `lag` epochs earlier ("rate_early"), their ratio, and what the rest of the schedule would buy at
    the late rate ("remainder": rate_late x lr x d / (1 - d)). NaN where the curve is too short. Epoch k's gain is
    val[k - 1] - val[k], trained at epoch k's recorded rate."""
    out = dict.fromkeys(RATE_COLUMNS, float("nan"))
    if len(val_losses) < window + lag + 1:
        return out
    gains, used = -np.diff(np.asarray(val_losses, float)), np.asarray(rates, float)[1:]
    late = gains[-window:].sum() / used[-window:].sum()
    early = gains[-window - lag : -lag].sum() / used[-window - lag : -lag].sum()
    out.update(rate_early=float(early), rate_late=float(late))
    if early > 0:
        out["rate_ratio"] = float(late / early)
    if 0 < decay < 1:
        out["remainder"] = float(late * rates[-1] * decay / (1 - decay))
    return out


def per_model(df: pd.DataFrame) -> pd.DataFrame:
    """One row per model: epochs, best validation loss, its final gain per epoch, why it stopped (the rule in words,
    whether it is the papers'), whether it was still falling, and the verdict."""
    rows = []
    if df.empty:
        return pd.DataFrame(rows)
    threshold, window = float(df["converged_gain"].iloc[0]), int(df["window"].iloc[0])
    for model_id, sub in df.groupby("model_id", sort=False):
        full = sub[sub["full_epoch"]]
        gain = final_gain(full["val_loss"].to_numpy(), window)
        stopped = sub["stopped"].iloc[0]
        rule, papers = RULES.get(stopped, (f"'{stopped}'", False))
        falling = bool(np.isfinite(gain) and gain > threshold)
        if stopped == "budget":
            verdict = "no: stopped by its character budget"
        elif stopped == "early_stopping":
            verdict = "yes: validation stopped improving"
        elif np.isnan(gain):
            verdict = f"unknown: fewer than {window + 1} epochs"
        elif stopped == "converged":
            verdict = f"no: stopped by the convergence shortcut, gaining {gain:.4f} nats/epoch"
        else:
            verdict = f"no: still gaining {gain:.4f} nats/epoch" if falling else "yes"
        best = sub.loc[sub["val_loss"].idxmin()]
        rate = dict.fromkeys(RATE_COLUMNS, float("nan"))  # read for the models the epoch cap stopped
        if stopped == "epochs":
            rate = gain_per_rate(full["val_loss"].to_numpy(), full["lr"].to_numpy(), int(sub["rate_window"].iloc[0]),
                                 int(sub["rate_lag"].iloc[0]), float(sub["lr_decay"].iloc[0]))  # fmt: skip
        rows.append({
            **sub.iloc[0][["corpus", "arch", "label", "layers", "size", "budget", "dropout", "seed"]].to_dict(),
            "epochs": float(sub["epoch"].max()), "best_val": float(best["val_loss"]),
            "best_epoch": float(best["epoch"]), "train_loss_at_best": float(best["train_loss"]),
            "final_gain_per_epoch": gain, "stopped": stopped, "rule": rule, "papers_rule": papers,
            "still_falling": falling, "converge_delta": float(sub["converge_delta"].iloc[0]),
            "converged": verdict, **rate, "model_id": model_id,
        })  # fmt: skip
    return report_order(pd.DataFrame(rows), "layers", "dropout", "seed") if rows else pd.DataFrame(rows)


def stops(models: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """Per corpus: how many models stopped by which rule, how many were still falling, the threshold, the epoch cap,
    the shortcut's delta, the largest final gain (and its model), and the range of the shortcut models' gains."""
    rows = []
    for corpus, sub in models.groupby("corpus", sort=False):
        raw = df[df["corpus"] == corpus]
        counts = sub["stopped"].value_counts()
        row = {"corpus": corpus, "models": len(sub), "papers_rule": int(sub["papers_rule"].sum()),
               "early_stopping": int(counts.get("early_stopping", 0)), "epoch_cap": int(counts.get("epochs", 0)),
               "shortcut": int(counts.get("converged", 0)), "budget": int(counts.get("budget", 0)),
               "still_falling": int(sub["still_falling"].sum()), "threshold": float(raw["converged_gain"].iloc[0]),
               "window": int(raw["window"].iloc[0]), "max_epochs": raw["max_epochs"].max(),
               "patience": raw["patience"].max()}  # fmt: skip
        row["other"] = row["models"] - row["early_stopping"] - row["epoch_cap"] - row["shortcut"] - row["budget"]
        deltas = sub.loc[sub["stopped"] == "converged", "converge_delta"]
        row["shortcut_delta"] = deltas.max() if len(deltas) else np.nan
        gains = sub["final_gain_per_epoch"].dropna()
        if len(gains):
            worst = sub.loc[gains.idxmax()]
            row.update({"largest_gain": gains.max(), "largest_label": worst["label"],
                        "largest_layers": int(worst["layers"]), "largest_size": int(worst["size"]),
                        "largest_seed": int(worst["seed"]), "largest_epochs": worst["epochs"],
                        "largest_rule": worst["rule"]})  # fmt: skip
        rated = sub[sub["rate_ratio"].notna()]
        if len(rated):
            row.update({"rated": len(rated), "rate_rising": int((rated["rate_ratio"] > 1).sum()),
                        "rate_ratio_median": rated["rate_ratio"].median(),
                        "remainder_median": rated["remainder"].median(), "remainder_min": rated["remainder"].min(),
                        "remainder_max": rated["remainder"].max(), "rate_window": int(raw["rate_window"].iloc[0]),
                        "rate_lag": int(raw["rate_lag"].iloc[0])})  # fmt: skip
        shortcut = sub[(sub["stopped"] == "converged") & sub["final_gain_per_epoch"].notna()]
        if len(shortcut):
            row.update({"shortcut_gain_min": shortcut["final_gain_per_epoch"].min(),
                        "shortcut_gain_max": shortcut["final_gain_per_epoch"].max(),
                        "shortcut_epochs_min": shortcut["epochs"].min(),
                        "shortcut_epochs_max": shortcut["epochs"].max()})  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------ findings


def verdict(row: pd.Series) -> str:
    """Every model stopped by the papers' rule: reproduced; the others all by the convergence shortcut (which stops
    only under its delta): partly; any stopped by a character budget or for an unknown reason: not reproduced."""
    if row["papers_rule"] == row["models"]:
        return "reproduced"
    return "partly" if row["budget"] == 0 and row["other"] == 0 else "not reproduced"


def findings(table: pd.DataFrame) -> list[Finding]:
    out = []
    for _, r in table.iterrows():
        v = {k: r[k] for k in r.index if not isinstance(r[k], float) or np.isfinite(r[k])}
        rules = "{papers_rule} of {models} models stopped by the papers' rule ({early_stopping} by early stopping"
        rules += (
            ", {epoch_cap} at the {max_epochs}-epoch cap)" if pd.notna(r["max_epochs"]) else ", {epoch_cap} at the cap)"
        )
        rules += ", {shortcut} by the convergence shortcut" if r["shortcut"] else ""
        rules += ", {budget} by a character budget" if r["budget"] else ""
        out.append(Finding("{corpus}: " + rules + "; {still_falling} still gaining over {threshold:g} nats/epoch "
                           "when stopped", v, verdict(r), "conv-papers-rule", r["corpus"]))  # fmt: skip
        if r["shortcut"] == 1 and pd.notna(r.get("shortcut_gain_min", np.nan)):
            out.append(Finding("{corpus}: the model the shortcut stopped was still gaining {shortcut_gain_min:.4f} "
                               "nats/epoch, after {shortcut_epochs_min} epochs", v, corpus=r["corpus"]))  # fmt: skip
        elif r["shortcut"] and pd.notna(r.get("shortcut_gain_min", np.nan)):
            text = (
                "{corpus}: the {shortcut} models the shortcut stopped were still gaining {shortcut_gain_min:.4f} "
                "to {shortcut_gain_max:.4f} nats/epoch, after {shortcut_epochs_min} to {shortcut_epochs_max} epochs"
            )
            out.append(Finding(text, v, corpus=r["corpus"]))
        if pd.notna(r.get("rated", np.nan)):
            out.append(Finding(
                "{corpus}: {rate_rising} of {rated} models at the epoch cap gain more validation per unit of "
                "learning rate in their last {rate_window} epochs than {rate_lag} earlier (median ratio "
                "{rate_ratio_median:.2f}; over 1: step size, not capacity, limits them)", v,
                corpus=r["corpus"]))  # fmt: skip
            out.append(Finding(
                "{corpus}: at their last gain per unit of learning rate, the rest of the schedule would buy a median "
                "{remainder_median:.3f} nats/char of validation ({remainder_min:.3f} to {remainder_max:.3f})", v,
                corpus=r["corpus"]))  # fmt: skip
        if pd.notna(r.get("largest_gain", np.nan)):
            out.append(Finding("{corpus}: the largest final gain is {largest_gain:.4f} nats/epoch, {largest_label} "
                               "{largest_layers}x{largest_size} seed {largest_seed}, stopped by {largest_rule} after "
                               "{largest_epochs} epochs", v, corpus=r["corpus"]))  # fmt: skip
    return out


def _column(t: pd.DataFrame, name: str, form: str) -> pd.Series | str:
    """A summary column of `t` formatted, "—" where a value (or the whole column) is missing."""
    return t[name].map(lambda x: form.format(x) if pd.notna(x) else "—") if name in t else "—"


class Convergence(Analysis):
    name = "convergence"
    title = TITLE
    question = QUESTION
    source = "Karpathy et al. (2016) sec 3.3 (the training recipe: at most 50 epochs, early stopping on validation)"
    settings = SETTINGS
    needs = NEEDS
    claims = (
        Claim("conv-papers-rule", "Karpathy et al. (2016) sec 3.3", "every model trained to convergence: at most "
              "50 epochs with early stopping on validation", "50 epochs"),
    )  # fmt: skip
    shows = (
        "Per corpus, every model's validation cross-entropy per epoch (top) and the gain of its best validation loss "
        "per epoch over the epochs before (bottom, log scale) with the still-falling threshold, each model's last "
        "epoch marked by why it stopped."
    )
    deviations = (
        "The reference models trained before issue 38 stopped by a convergence shortcut (best validation gaining "
        "less than the train config's delta per epoch over 3 epochs) that the papers did not use; models trained "
        "since follow the papers' rule alone (the epoch cap and early stopping on validation).",
        "The papers do not state their early-stopping patience; ours is charlm.train's default.",
    )

    def compute(self, ctx: Context) -> Result:
        df = measure(ctx)
        table = stops(per_model(df), df)
        return Result(df, findings(table), tables={"stops": table})

    def plot(self, result: Result):
        from .convergence_plot import plot

        return plot(result.table)

    def summary_table(self, result: Result) -> pd.DataFrame:
        """Per corpus: how many models stopped by which rule, and how many were still falling."""
        t = result.tables["stops"]
        threshold = f"{t['threshold'].iloc[0]:g}" if len(t) else ""
        return pd.DataFrame({
            "corpus": t["corpus"], "models": t["models"], "early stopping": t["early_stopping"],
            "epoch cap": t["epoch_cap"], "convergence shortcut": t["shortcut"], "character budget": t["budget"],
            f"still gaining > {threshold} nats/epoch": t["still_falling"],
            "largest final gain (nats/epoch)": _column(t, "largest_gain", "{:.4f}"),
            "gain per unit of rate, last vs earlier epochs (median ratio)": _column(t, "rate_ratio_median", "{:.2f}"),
            "rest of the schedule at the last rate (median nats)": _column(t, "remainder_median", "{:.3f}"),
        })  # fmt: skip

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        table = per_model(result.table)
        return {"every model: why it stopped and its final gain": table.drop(columns=["model_id", "arch",
                                                                                     "papers_rule"])}  # fmt: skip


ANALYSIS = Convergence()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
