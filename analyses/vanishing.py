"""Vanishing gradients in every architecture: how far back the loss of one character still reaches.

The lecture notes (seed 004, "Simple RNN ... hard to train. Why? Vanishing gradients"; "the gated
architecture also helps the vanishing gradients problems") and Maini et al. (2020), "Why and when should you
pool?" (the notes' "Vanishing Gradients @ Start of Training" and Table 2), measure the norm of the gradient of
the loss with respect to the hidden state at every position and summarise it by a vanishing ratio.

Adapted to a left-to-right language model (/work/shared/ANCHORS.md):
- a window of K + 1 = `max_lag` + 1 characters x_{T-K} .. x_T; its state comes from the `warmup` characters
  before it and is detached at the window's start, so nothing flows back past the window;
- L_T = -log p(x_{T+1} | x_{..T}), the loss at the last position only;
- g_k = || dL_T / dh_{T-k} ||_2 for every lag k = 0..K (and || dL_T / dc_{T-k} || where there is a memory cell),
  the gradient of the state carried out of step T-k as everything later reads it (charlm.gradients; c's use
  in h_t inside step t is not counted, so dL_T/dc_T = 0: the loss reads h_T), per layer, averaged over
  `windows` windows evenly spaced over the split;
- at initialisation (rebuilt exactly: `torch.manual_seed(seed)` then `CharLM(config)`, as
  charlm.train.LanguageModelTask does), at the training snapshots and at the final (best-on-validation) model.

The vanishing ratio is Maini et al.'s, as the notes define it: the gradient norm at the middle of the
sequence over the gradient norm at its end, where the loss is,

    vanishing ratio = ||dL/dh_mid|| / ||dL/dh_end|| = mean(g over the middle 10 % of lags) / g_0

(`ratio_mid_end`; the middle 10 % of 100 relative-position bins, lags about 0.45 K to 0.55 K, interpolated as
their code does). Below 1 the gradient has shrunk between the loss and mid-window. For c the end is the h the
loss reads (dL_T/dc_T is 0 by construction): the ratio says how much of the gradient entering at the loss
reaches the mid-window cell. Maini et al. report it when a classifier first reaches 95 % training accuracy
(Table 2); a language model has no such moment, so here it is measured at initialisation, along training
(snapshots) and at the best-on-validation checkpoint, and every finding says which.

The table also keeps the far end over the middle, g_K / mean(g over the middle 10 %) (`ratio_far_mid`): the
"first bin over the middle bins" of Maini et al.'s code (/work/shared/ANCHORS.md). In a BiLSTM that first bin is
an end the loss touches; in a left-to-right language model it is the far end, which the loss does not touch,
so it says how much further the gradient falls past mid-window, not how much of it reaches there. The two agree
only for one geometric decay g_k ~ r^k (both r^(K/2)); a fast decay followed by a few long-memory cells gives a
small ratio_mid_end and a ratio_far_mid near 1, so only ratio_mid_end is compared with Maini et al.

The findings read the vanishing ratio on h, as it is defined, of each model's top layer; the same ratio with the
memory cell at mid-window (||dL/dc_mid|| / ||dL/dh_end||) is named the c ratio wherever it is stated. Seeds are
averaged (geometric mean) within one configuration (architecture, depth, width) only. Below: compute (the tidy
table, one row per model, checkpoint, layer, state and lag), configurations (those means), comparisons (per corpus:
the headline LSTM against Maini et al.'s BiLSTM range, the gated models against the RNN of the same budget row and
depth), the findings, and the figure (analyses/vanishing_plot.py). The gradient profiles themselves (the windows, the
norms per lag, their cache per checkpoint, the ratios read from them) are analyses/vanishing_measure.py.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from charlm.model import ARCH_LABELS, ARCHS
from corpora.errors import UserError, run_cli

from .base import Analysis, Claim, Finding, Result, majority
from .common import analysis_main, headline_id, report_order, whole
from .context import Context, MissingInput, Needs
from .maini import ratio_field, table2, table2_range
from .vanishing_measure import MEASUREMENT, checkpoint_profiles, geometric_mean, has_cell, profile_ratios, windows

TITLE = "Vanishing gradients: how far back one character's loss reaches"
QUESTION = (
    "Does the additive memory cell keep the gradient over hundreds of characters where the S-RNN loses it, "
    "and what is left of it in Levy et al.'s ablations?"
)
PAPER_SOURCE = (
    "Maini et al. (2020), 'Why and when should you pool?', Table 2 as quoted in the lecture notes (seed 004): "
    "vanishing ratio of classifiers when they reach 95 % training accuracy, at 1K / 5K / 20K training examples"
)
SETTINGS = {
    **MEASUREMENT,  # split, windows, max_lag, warmup: the windows the gradient is taken over (vanishing_measure)
    "snapshots": 8,  # training snapshots profiled per model (spread over the saved ones, last included)
    "snapshot_seeds": 1,  # seeds per configuration profiled along training (the others: init and final)
    "arch": [],  # architectures to profile (empty: every one there is)
    "states": ["h", "c"],  # h, and the memory cell c of the architectures that have one
}
NEEDS = Needs(predictions=False)  # reads checkpoints (traces, gradients, samples), not Predictions
LABELS = ARCH_LABELS
COLUMNS = [
    "corpus", "arch", "label", "budget", "size", "layers", "seed", "model_id", "group_id", "checkpoint", "chars",
    "layer", "state", "memory", "lag", "grad_norm", "ratio_mid_end", "ratio_far_mid",
]  # fmt: skip
FACTOR = 10  # one ratio is larger or smaller than another only when they differ by this factor (a decade)
GATED = ("lstm", "gru-paper", "gru")  # the gated models set against the RNN of the same budget row and depth


# ------------------------------------------------------------------------------------------ the analysis


def recorded_lags(max_lag: int) -> np.ndarray:
    """The lags the table keeps: every one up to 20, then every 5th (plus K); the ratios use all of them."""
    return np.unique(np.r_[np.arange(min(max_lag, 20) + 1), np.arange(20, max_lag + 1, 5), max_lag])


def _checkpoints(ctx: Context, row: pd.Series, n_snapshots: int) -> list[tuple[str, int, str | None]]:
    """(label, training characters, snapshot argument) of init, `n_snapshots` snapshots and the final model."""
    out = [("init", 0, "init")]
    if n_snapshots > 0:
        try:
            snaps = ctx.snapshots(row).sort_values("step").reset_index(drop=True)
        except MissingInput:
            snaps = pd.DataFrame(columns=["step", "chars", "file"])
        if len(snaps):
            picked = np.unique(np.linspace(0, len(snaps) - 1, min(n_snapshots, len(snaps))).round().astype(int))
            out += [(f"step {int(snaps['step'][i])}", int(snaps["chars"][i]), snaps["file"][i]) for i in picked]
    final_chars = ctx.model(row).meta.get("chars_trained") or row["chars_trained"]
    out.append(("final", whole(final_chars), None))
    return out


def _check_settings(settings: dict) -> tuple[list[str], list[str]]:
    states = list(settings["states"]) if not isinstance(settings["states"], str) else [settings["states"]]
    archs = list(settings["arch"]) if not isinstance(settings["arch"], str) else [settings["arch"]]
    bad = [s for s in states if s not in ("h", "c")] or not states
    if bad:
        raise UserError(f"states must be a non-empty list of 'h' and 'c', got {settings['states']!r}")
    unknown = [a for a in archs if a not in ARCHS]
    if unknown:
        raise UserError(f"unknown architecture {', '.join(unknown)}: choose from {', '.join(ARCHS)}")
    return states, archs


def compute(ctx: Context) -> pd.DataFrame:
    """One row per (model, checkpoint, layer, state, lag): the mean gradient norm, with the profile's two ratios."""
    settings = ctx.settings
    states, archs = _check_settings(settings)
    models = ctx.models(arch=tuple(archs) or None)
    cells = {r["model_id"]: has_cell(r["arch"]) for _, r in models.iterrows()}
    if states == ["c"] and not any(cells.values()):
        raise MissingInput(
            f"no memory cell c to differentiate: the models here ({', '.join(sorted(set(models['arch'])))}) keep "
            "only h; ask for states h, or train an LSTM-family model (`python -m charlm.train --arch lstm ...`)"
        )
    for key in models["corpus_key"].unique():  # a lag longer than the split fails before any work
        ids = ctx.corpus(key).split(settings["split"])
        windows(ids, settings["windows"], settings["max_lag"], settings["warmup"], settings["split"])
    lags = recorded_lags(settings["max_lag"])
    budgets = models.groupby("arch")["budget"].nunique()  # the budget row goes into the label where there are several
    rows = []
    for (_, group_id), group in models.groupby(["corpus_key", "group_id"], sort=True):
        for rank, (_, row) in enumerate(group.sort_values("seed").iterrows()):
            n_snaps = settings["snapshots"] if rank < settings["snapshot_seeds"] else 0
            label = LABELS.get(row["arch"], row["arch"])
            label += f" ({int(row['budget'])} row)" if budgets[row["arch"]] > 1 else ""
            memory = "c" if cells[row["model_id"]] and "c" in states else "h"  # the state the headline follows
            checkpoints = _checkpoints(ctx, row, n_snaps)
            profiles = checkpoint_profiles(ctx, row, [snapshot for _, _, snapshot in checkpoints], settings)
            for (checkpoint, chars, _), profile in zip(checkpoints, profiles):
                for name, g in profile.items():
                    _, layer, state = name.split(".")
                    if state not in states:
                        continue
                    mid_end, far_mid = profile_ratios(profile, int(layer), state)
                    keep = lags[lags > 0] if state == "c" else lags  # dL_T/dc_T = 0 by construction
                    rows += [{
                        "corpus": row["corpus"], "arch": row["arch"], "label": label, "budget": row["budget"],
                        "size": int(row["size"]),
                        "layers": int(row["layers"]), "seed": int(row["seed"]), "model_id": row["model_id"],
                        "group_id": group_id, "checkpoint": checkpoint, "chars": chars, "layer": int(layer),
                        "state": state, "lag": int(k), "grad_norm": float(g[k]),
                        "ratio_mid_end": mid_end, "ratio_far_mid": far_mid, "memory": state == memory,
                    } for k in keep]  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


# ------------------------------------------------------------------------------------------ per configuration


def config_label(row) -> str:
    """A configuration as the findings name it: "LSTM 3x69" (type, layers x width)."""
    return f"{LABELS.get(row['arch'], row['arch'])} {int(row['layers'])}x{int(row['size'])}"


def top_ratios(df: pd.DataFrame) -> pd.DataFrame:
    """One row per model, checkpoint and state of its top layer: the two ratios (every lag row repeats them)."""
    top = df[df["layer"] == df["layers"] - 1]
    return top.drop_duplicates(["model_id", "checkpoint", "state"]).drop(columns=["lag", "grad_norm"])


def configurations(df: pd.DataFrame) -> pd.DataFrame:
    """One row per corpus and configuration (group_id: architecture, depth, width; never pooled across them): the
    top layer's vanishing ratio on h (h_init, h_final) and the c ratio where there is a cell (c_init, c_final),
    geometric means over the configuration's seeds, the far end over the middle on h after training, the decades
    training moved the ratio on h (orders_trained = log10 h_final / h_init), seeds and mean training characters."""
    top = top_ratios(df)
    rows = []
    for (corpus, group_id), g in top.groupby(["corpus", "group_id"], sort=False):
        first = g.iloc[0]
        row = {"corpus": corpus, "arch": first["arch"], "label": config_label(first), "budget": first["budget"],
               "layers": int(first["layers"]), "size": int(first["size"]), "seeds": g["model_id"].nunique(),
               "chars": float(g.loc[g["checkpoint"] == "final", "chars"].mean()), "group_id": group_id}  # fmt: skip
        for state in ("h", "c"):
            for checkpoint in ("init", "final"):
                at = g[(g["state"] == state) & (g["checkpoint"] == checkpoint)]
                row[f"{state}_{checkpoint}"] = geometric_mean(at["ratio_mid_end"]) if len(at) else np.nan
        final_h = g[(g["state"] == "h") & (g["checkpoint"] == "final")]
        row["h_far_mid"] = geometric_mean(final_h["ratio_far_mid"]) if len(final_h) else np.nan
        row["orders_trained"] = _log10(row["h_final"]) - _log10(row["h_init"])  # NaN where a gradient is gone
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out["model_id"] = out["group_id"].map(top.drop_duplicates("group_id").set_index("group_id")["model_id"])
    return report_order(out, "layers", "size").reset_index(drop=True)


def _log10(x: float) -> float:
    """log10, -inf for 0 (a gradient that is gone), NaN for NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.log10(np.float64(x)))


def place(ratio: float, lo: float, hi: float) -> tuple[str, float]:
    """Where a ratio falls against a range: ("below" | "inside" | "above", how many times outside it (1 inside))."""
    if ratio < lo:
        return "below", (lo / ratio if ratio > 0 else np.inf)
    return ("above", ratio / hi) if ratio > hi else ("inside", 1.0)


def maini_verdict(where: str, factor: float) -> str:
    """Inside Maini et al.'s BiLSTM range: reproduced; outside it by less than FACTOR: partly (the same order of
    magnitude, on another task); further: not reproduced."""
    return "reproduced" if where == "inside" else ("partly" if factor < FACTOR else "not reproduced")


def per_model(df: pd.DataFrame) -> pd.DataFrame:
    """The appendix: per model (seeds apart), its top layer's ratios at initialisation and after training, the far
    end over the middle, and the gradient norms on h at lag 50 and K after training."""
    K = int(df["lag"].max())
    top = top_ratios(df)
    final_h = df[(df["checkpoint"] == "final") & (df["state"] == "h") & (df["layer"] == df["layers"] - 1)]
    norms = final_h.pivot_table(index="model_id", columns="lag", values="grad_norm")
    ratio = top.pivot_table(index="model_id", columns=["state", "checkpoint"], values="ratio_mid_end")
    far = top[(top["state"] == "h") & (top["checkpoint"] == "final")].set_index("model_id")["ratio_far_mid"]
    models = top.drop_duplicates("model_id").set_index("model_id")
    get = lambda frame, key: frame[key] if key in frame else pd.Series(np.nan, index=models.index)  # noqa: E731
    table = pd.DataFrame({
        "corpus": models["corpus"], "model": models.apply(config_label, axis=1), "budget": models["budget"],
        "seed": models["seed"], "characters": top.groupby("model_id")["chars"].max(),
        "h at init": get(ratio, ("h", "init")), "h trained": get(ratio, ("h", "final")),
        "c at init": get(ratio, ("c", "init")),
        "c trained": get(ratio, ("c", "final")), "far end / mid (h, trained)": far,
        "||dL/dh|| at lag 50": get(norms, 50), f"||dL/dh|| at lag {K}": get(norms, K),
        "arch": models["arch"], "size": models["size"],
    })  # fmt: skip
    return report_order(table.reset_index(drop=True), "model", "seed").drop(columns=["arch", "size"])


def comparisons(configs: pd.DataFrame) -> pd.DataFrame:
    """Per corpus: the headline LSTM's ratio on h after training against Maini et al.'s BiLSTM range ("maini"), and
    the gated models (GATED) against the RNN of the same budget row and depth, after training and at initialisation
    ("gates"). Every number a finding states is here."""
    lo, hi = table2_range("BiLSTM")
    rows = []
    for corpus, sub in configs.groupby("corpus", sort=True):
        lstm = sub[sub["arch"] == "lstm"]
        if len(lstm):
            head = lstm[lstm["model_id"] == headline_id(lstm.assign(seed=0))].iloc[0]
            where, factor = place(head["h_final"], lo, hi)
            rows.append({"corpus": corpus, "comparison": "maini", "label": head["label"], "layers": head["layers"],
                         "size": head["size"], "seeds": head["seeds"], "ratio": head["h_final"],
                         "ratio_c": head["c_final"], "c_over_h": head["c_final"] / head["h_final"]
                         if head["h_final"] > 0 else np.nan, "ratio_init": head["h_init"],
                         "orders_trained": head["orders_trained"], "maini_lo": lo, "maini_hi": hi, "place": where,
                         "factor": factor, "chars": head["chars"], "ratio_log10": _log10(head["h_final"]),
                         "ratio_c_log10": _log10(head["c_final"]), "log_base": 10})  # fmt: skip
        rnn = sub[sub["arch"] == "rnn"].set_index(["budget", "layers"])
        pairs = [(g, rnn.loc[(g["budget"], g["layers"])]) for _, g in sub[sub["arch"].isin(GATED)].iterrows()
                 if (g["budget"], g["layers"]) in rnn.index]  # fmt: skip
        if pairs:
            after = [_log10(g["h_final"]) - _log10(r["h_final"]) for g, r in pairs]
            init = [_log10(g["h_init"]) - _log10(r["h_init"]) for g, r in pairs]
            lstm_init = [x for (g, _), x in zip(pairs, init) if g["arch"] == "lstm"]
            rows.append({"corpus": corpus, "comparison": "gates", "of": len(pairs), "factor": FACTOR,
                         "holds": sum(x > np.log10(FACTOR) for x in after), "orders_min": min(after),
                         "orders_max": max(after), "lstm_of": len(lstm_init),
                         "init_below": sum(x < 0 for x in lstm_init),
                         "gated": " and ".join(dict.fromkeys(LABELS[g["arch"]] for g, _ in pairs))})  # fmt: skip
    return pd.DataFrame(rows)


verdict = majority  # all hold: reproduced; at least half: partly; fewer: not reproduced


def findings(comp: pd.DataFrame, corpora_: list[str]) -> list[Finding]:
    """Per corpus: the headline LSTM against Maini et al.'s BiLSTM (claim), the gated models against the RNN (claim),
    then the c ratio, the start of training and what training did (new)."""
    out = []
    for corpus in corpora_:
        sub = comp[comp["corpus"] == corpus].set_index("comparison") if len(comp) else pd.DataFrame()
        maini = sub.loc["maini"] if "maini" in sub.index else None
        gates = sub.loc["gates"] if "gates" in sub.index else None
        if maini is not None:
            v = {k: maini[k] for k in maini.index if not (isinstance(maini[k], float) and np.isnan(maini[k]))}
            v["corpus"] = corpus
            outside = {
                "below": ", {factor:.1f} times below",
                "above": ", {factor:.1f} times above",
                "inside": ", inside",
            }
            out.append(Finding(
                "{corpus}: the headline {label}'s vanishing ratio on h after training is " + ratio_field(v, "ratio")
                + ", against Maini's BiLSTM {maini_lo:g} to {maini_hi:g}" + outside[maini["place"]], v,
                maini_verdict(maini["place"], maini["factor"]), "van-maini-bilstm", corpus))  # fmt: skip
        else:
            out.append(Finding("{corpus}: no LSTM was profiled", {"corpus": corpus}, "untested", "van-maini-bilstm",
                               corpus))  # fmt: skip
        if gates is not None:
            w = {k: gates[k] for k in gates.index if not (isinstance(gates[k], float) and np.isnan(gates[k]))}
            w["corpus"] = corpus
            out.append(Finding(
                "{corpus}: after training the gated models' vanishing ratio on h beats the same-row, same-depth RNN's "
                "by more than {factor} times in {holds} of {of} pairs ({orders_min:+.1f} to {orders_max:+.1f} "
                "decades)", w,
                verdict(int(gates["holds"]), int(gates["of"])), "van-gates-help", corpus))  # fmt: skip
        else:
            out.append(Finding("{corpus}: no gated model and RNN of the same budget row and depth to compare",
                               {"corpus": corpus}, "untested", "van-gates-help", corpus))  # fmt: skip
        if maini is not None and pd.notna(maini.get("ratio_c", np.nan)):
            out.append(Finding(
                "{corpus}: the {label}'s c ratio ||dL/dc_mid|| / ||dL/dh_end|| is " + ratio_field(v, "ratio_c") + ", "
                "{c_over_h:.1f} times its vanishing ratio on h: more of the gradient reaches the cell", v,
                corpus=corpus))  # fmt: skip
        if gates is not None and gates["lstm_of"]:
            out.append(Finding(
                "{corpus}: at initialisation the LSTM's vanishing ratio on h is below the same-row, same-depth RNN's "
                "in {init_below} of {lstm_of} pairs", w, corpus=corpus))  # fmt: skip
        if maini is not None and np.isfinite(maini["orders_trained"]):
            verb = "raised" if maini["orders_trained"] >= 0 else "lowered"
            trained = "training on {chars:,.0f} characters " if "chars" in v else "training "  # adopted: elsewhere
            out.append(Finding(
                "{corpus}: " + trained + verb + " the {label}'s vanishing ratio on h by "
                "{change:.1f} decades from initialisation", {**v, "change": abs(maini["orders_trained"])},
                corpus=corpus))  # fmt: skip
    return out


# ------------------------------------------------------------------------------------------ the analysis


class Vanishing(Analysis):
    name = "vanishing"
    title = TITLE
    question = QUESTION
    source = PAPER_SOURCE
    settings = SETTINGS
    needs = NEEDS
    claims = (
        Claim("van-maini-bilstm", "Maini et al. (2020) Table 2 (the lecture notes, seed 004)",
              "a BiLSTM's vanishing ratio ||dL/dh_mid|| / ||dL/dh_end|| when it reaches 95 % training accuracy",
              "BiLSTM 0.005 (1K examples), 0.03 (5K), 0.06 (20K)"),
        Claim("van-gates-help", "the lecture notes (seed 004); Maini et al. (2020)",
              "the gated architecture helps the vanishing gradient problem of the simple RNN", ""),
    )  # fmt: skip
    shows = (
        "Per corpus, the gradient of the last character's loss with respect to h of the top layer k characters back, "
        "after training and at initialisation, for the largest budget row's one-layer models and the headline LSTM, "
        "and their vanishing ratio on h along training beside Maini et al.'s BiLSTM range."
    )
    deviations = (
        "Maini et al. measure sentence classifiers (BiLSTMs) when they first reach 95 % training accuracy; a language "
        "model has no such moment, so we measure left-to-right language models at initialisation, along training and "
        "at their best-on-validation checkpoint: compare orders of magnitude, not values.",
        "The loss is that of the last character of a window whose state is detached at its start; the gradient is "
        "averaged over windows (Maini et al. take the norm over a batch of the mean loss).",
        "The c ratio (the memory cell at mid-window over h at the loss) is not Maini et al.'s ratio; it is stated "
        "apart, named as such.",
        "Only the lowest seed of each configuration is profiled at its snapshots; every seed at initialisation and "
        "after training.",
    )

    def compute(self, ctx: Context) -> Result:
        df = compute(ctx)
        configs = configurations(df)
        comp = comparisons(configs)
        return Result(df, findings(comp, sorted(df["corpus"].unique())), tables={"configs": configs,
                                                                                 "comparisons": comp})  # fmt: skip

    def plot(self, result: Result):
        return plot(result.table)

    def summary_table(self, result: Result) -> pd.DataFrame:
        """Per corpus and type, at the largest budget row: the vanishing ratio on h after training at each depth,
        at initialisation (1 layer), and the c ratio after training (1 layer)."""
        c = result.tables["configs"]
        rows = []
        for (corpus, arch), g in c.groupby(["corpus", "arch"], sort=False):
            g = g[g["budget"].fillna(g["size"]) == g["budget"].fillna(g["size"]).max()].set_index("layers")
            row = {"corpus": corpus, "type": LABELS.get(arch, arch), "width": "/".join(map(str, g["size"]))}
            for n in (1, 2, 3):
                row[f"h, {n} layer{'s' if n > 1 else ''}"] = f"{g.loc[n, 'h_final']:.2g}" if n in g.index else "—"
            one = g.loc[g.index.min()]
            row["h at init"] = f"{one['h_init']:.2g}"
            row["c ratio"] = f"{one['c_final']:.2g}" if pd.notna(one["c_final"]) else "—"
            rows.append(row)
        return pd.DataFrame(rows)

    def paper_table(self) -> pd.DataFrame:
        return table2()

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        return {"every model's top layer: the vanishing ratio on h and the c ratio": per_model(result.table)}


def plot(df: pd.DataFrame):
    from .vanishing_plot import plot as draw

    return draw(df)


ANALYSIS = Vanishing()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
