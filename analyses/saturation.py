"""Gate saturation: how often each gate of each cell is nearly shut or nearly open (Karpathy et al. sec 4.2, Fig 3).

Karpathy et al. call a gate "left-saturated if its activation is less than 0.1 [and] right-saturated if more than
0.9, or unsaturated otherwise", compute for every gate of every cell "the fraction of times [it] spends left or right
saturated" on test data, and plot one point per cell in one panel per gate (layers in colours), right-saturated
fraction on x and left-saturated on y, so the two fractions lie under the diagonal x + y = 1. They read off the
scatter (3-layer models; no numbers are given):

  1. forget gates: "multiple cells that are almost always right-saturated [...] and hence function as nearly perfect
     integrators";
  2. forget gates: "no cells that function in purely feed-forward fashion" (none consistently left-saturated);
  3. output gates: "no cells that get consistently revealed or blocked";
  4. the first layer is "much more diffuse (near the origin)" than the other two, "across all of our models";
  5. the GRU's first layer: "reset gates r are nearly never right-saturated and the update gates z are rarely ever
     left-saturated" (a feed-forward mode: the previous state is barely used).

We measure the same fractions on a test excerpt (state warmed up on the text before it) for every gated architecture:
the LSTM, the GRU and Levy et al.'s ablations that keep gates (- S-RNN, - S-RNN - OUT, - S-RNN - HIDDEN). The RNN and
- GATES have no gates. The GRU's z is the papers' (the weight on the candidate, h = (1 - z) h + z htilde), see
charlm/model.py. "Almost always", "nearly never" and "no cells" become thresholds (ALWAYS, RARELY, MOST below) so each
finding is stated as found or not found with its number.

Below: compute (the tidy table, one row per model, layer, gate and cell), summary (per corpus, the counts each claim's
finding states), per_layer (the appendix: per model and layer), the findings, and the figure (Fig 3's five panels for
the headline LSTM and GRU of each corpus).
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from charlm.model import ARCH_LABELS, GATED_ARCHS, GATELESS_ARCHS
from corpora.errors import UserError, run_cli

from .base import Analysis, Claim, Finding, Result, majority
from .common import analysis_main, chosen_archs, headline_id, ordered_models, style, whole
from .context import Context, Needs

TITLE = "Gate saturation"
QUESTION = "How often is each gate nearly shut (< 0.1) or nearly open (> 0.9), and do the paper's regimes appear?"
PAPER_SOURCE = "Karpathy et al. (2016), sec 4.2 'Gate activation statistics' and Fig. 3 (qualitative claims, 3 layers)"

GATES = ("i", "f", "o", "r", "z")  # traced gate names, in panel order
GATE_NAMES = {"i": "input gate i", "f": "forget gate f", "o": "output gate o", "r": "reset gate r",
              "z": "update gate z"}  # fmt: skip
LABELS = ARCH_LABELS

LEFT, RIGHT = 0.1, 0.9  # sec 4.2: left-saturated below 0.1, right-saturated above 0.9
ALWAYS = 0.9  # a cell "almost always" saturated on one side: at least 90 % of the excerpt's steps (our reading)
RARELY = 0.1  # a cell "nearly never" / "rarely ever" saturated on one side: under 10 % of the steps (our reading)
MOST = 0.9  # a claim about a layer's cells ("are nearly never ...") holds when at least 90 % of them satisfy it
MULTIPLE = 2  # "multiple" integrators: at least two per model

SETTINGS = {
    "split": "test",  # the paper measures on test data
    "start": 1000,  # where the excerpt starts in the split (characters)
    "length": 5000,  # excerpt length (characters; the paper used its whole test set)
    "warmup": 1000,  # characters read before the excerpt to warm the state up (from zero at their start)
    "archs": list(GATED_ARCHS),  # architectures to measure; a gateless one is an error
}
NEEDS = Needs(predictions=False)  # reads checkpoints (traces, gradients, samples), not Predictions


def saturation_fractions(gate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(T, H) activations -> per cell, the fraction of steps left-saturated (< 0.1) and right-saturated (> 0.9)."""
    return (gate < LEFT).mean(0), (gate > RIGHT).mean(0)


def _archs(ctx: Context) -> list[str]:
    return chosen_archs(ctx, GATED_ARCHS, GATELESS_ARCHS, "no gates to saturate", "saturation")


def _measure(ctx: Context, row: pd.Series) -> dict[str, np.ndarray]:
    """Per layer and gate, the left / right fractions of every cell; cached by checkpoint and excerpt."""
    s = ctx.settings
    excerpt = {k: s[k] for k in ("split", "start", "length", "warmup")}

    def compute() -> dict[str, np.ndarray]:
        trace = ctx.trace(row, s["split"], s["start"], s["length"], warmup=s["warmup"])
        out = {}
        for name, value in trace.items():
            _, layer, gate = name.split(".")
            if gate in GATES:
                out[f"{layer}_{gate}_left"], out[f"{layer}_{gate}_right"] = saturation_fractions(value)
        return out

    key = {"model": ctx.digest(row), **excerpt, "thresholds": [LEFT, RIGHT]}
    return ctx.cached("saturation", key, compute)


def compute(ctx: Context) -> pd.DataFrame:
    """One row per model, layer, gate and cell: the fraction of excerpt steps it is left / right saturated."""
    for key in ("start", "length", "warmup"):  # checked once, before any model is read
        value = ctx.settings[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise UserError(f"saturation: {key} must be a non-negative integer, got {value!r}")
    models = ctx.models(arch=tuple(_archs(ctx)))
    rows = []
    for _, row in models.iterrows():
        fractions = _measure(ctx, row)
        for key in sorted(k for k in fractions if k.endswith("_left")):
            layer, gate, _ = key.split("_")
            left, right = fractions[key], fractions[f"{layer}_{gate}_right"]
            rows.append(pd.DataFrame({
                "corpus": row["corpus"], "arch": row["arch"], "size": int(row["size"]), "layers": int(row["layers"]),
                "budget": row["budget"],
                "seed": int(row["seed"]), "chars_trained": whole(row["chars_trained"]), "model_id": row["model_id"],
                "group_id": row["group_id"],
                "layer": int(layer) + 1, "gate": gate, "cell": np.arange(left.size), "left": left, "right": right,
                "steps": int(ctx.settings["length"]),
            }))  # fmt: skip
    df = pd.concat(rows, ignore_index=True)
    df["gate"] = pd.Categorical(df["gate"], GATES)
    return df.sort_values(["corpus", "arch", "size", "seed", "layer", "gate", "cell"], ignore_index=True).astype(
        {"gate": str}
    )


# ------------------------------------------------------------------------------------------ the paper's claims


def _ordered(df: pd.DataFrame) -> pd.DataFrame:
    return ordered_models(df, GATED_ARCHS)


def the_gru(archs) -> str:
    """The GRU the paper's claims are read on: the papers' form where trained, else torch's."""
    return "gru-paper" if "gru-paper" in set(archs) else "gru"


def _share(passes: pd.Series) -> float:
    return float(passes.mean()) if len(passes) else float("nan")


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per corpus, the counts every finding states (LSTMs: arch "lstm", every depth and seed; GRUs: the_gru):

    lstm_models, lstm_multiple      LSTMs, and those with at least MULTIPLE forget gates right-saturated >= ALWAYS
    lstm_multi, share_l1/_deep      multi-layer LSTMs; the share of their forget gates right-saturated >= ALWAYS of
                                    the steps (integrators) in layer 1 and deeper (counts: integrators_*, f_cells_*)
    f_left, f_left_models           forget gates left-saturated >= ALWAYS (of f_cells), and the LSTMs with one
    o_stuck, o_stuck_models         output gates saturated on one side >= ALWAYS (of o_cells), and the LSTMs with one
    diffuse_holds / diffuse_of      multi-layer LSTMs and GRUs whose layer 1 is less saturated (left + right, mean over
                                    its gates' cells) than each deeper layer; sat_l1, sat_deep: those means pooled
    gru_models, r_rare, z_rare      GRUs; the share of their layer-1 reset gates right-saturated < RARELY of the steps,
                                    of update gates left-saturated < RARELY; gru_holds: GRUs where both shares >= MOST
    """
    rows = []
    for corpus, sub in df.groupby("corpus", sort=True):
        row = {"corpus": corpus, "always": ALWAYS, "rarely": RARELY, "most": MOST, "multiple": MULTIPLE,
               "lstm_models": 0, "gru_models": 0, "diffuse_of": 0}  # fmt: skip
        lstm = sub[sub["arch"] == "lstm"]
        f, o = lstm[lstm["gate"] == "f"], lstm[lstm["gate"] == "o"]
        if not f.empty:
            integrators = (f["right"] >= ALWAYS).groupby(f["model_id"]).sum()
            left = f["left"] >= ALWAYS
            row.update(lstm_models=f["model_id"].nunique(), lstm_multiple=int((integrators >= MULTIPLE).sum()),
                       f_cells=len(f), f_left=int(left.sum()),
                       f_left_models=int(left.groupby(f["model_id"]).any().sum()))  # fmt: skip
            multi = f[f["layers"] > 1]
            if not multi.empty:
                l1, deep = multi[multi["layer"] == 1], multi[multi["layer"] > 1]
                row.update(lstm_multi=multi["model_id"].nunique(), f_cells_l1=len(l1), f_cells_deep=len(deep),
                           integrators_l1=int((l1["right"] >= ALWAYS).sum()),
                           integrators_deep=int((deep["right"] >= ALWAYS).sum()),
                           share_l1=_share(l1["right"] >= ALWAYS),
                           share_deep=_share(deep["right"] >= ALWAYS))  # fmt: skip
        if not o.empty:
            stuck = (o["left"] >= ALWAYS) | (o["right"] >= ALWAYS)
            row.update(o_cells=len(o), o_stuck=int(stuck.sum()),
                       o_stuck_models=int(stuck.groupby(o["model_id"]).any().sum()))  # fmt: skip
        gru_arch = the_gru(sub["arch"])
        gated = sub[sub["arch"].isin(["lstm", gru_arch]) & (sub["layers"] > 1)]
        if not gated.empty:
            saturated = (gated["left"] + gated["right"]).groupby([gated["model_id"], gated["layer"]]).mean().unstack()
            deeper = saturated.drop(columns=1)
            row.update(diffuse_of=len(saturated), diffuse_holds=int((saturated[1] < deeper.min(axis=1)).sum()),
                       sat_l1=float((gated["left"] + gated["right"])[gated["layer"] == 1].mean()),
                       sat_deep=float((gated["left"] + gated["right"])[gated["layer"] > 1].mean()))  # fmt: skip
        first = sub[(sub["arch"] == gru_arch) & (sub["layer"] == 1)]
        r, z = first[first["gate"] == "r"], first[first["gate"] == "z"]
        if not r.empty and not z.empty:
            r_rare = (r["right"] < RARELY).groupby(r["model_id"]).mean()
            z_rare = (z["left"] < RARELY).groupby(z["model_id"]).mean()
            row.update(gru_models=len(r_rare), gru_label=ARCH_LABELS.get(gru_arch, gru_arch),
                       r_rare=_share(r["right"] < RARELY), z_rare=_share(z["left"] < RARELY),
                       gru_holds=int(((r_rare >= MOST) & (z_rare >= MOST)).sum()))  # fmt: skip
        hidden = sub[(sub["arch"] == "lstm-srnn-hidden") & (sub["gate"] == "i")]
        if not hidden.empty:
            row["hidden_i_right"] = float(hidden["right"].mean())
        rows.append(row)
    return pd.DataFrame(rows)


def per_layer(df: pd.DataFrame) -> pd.DataFrame:
    """The appendix: per model (seeds apart) and layer, the counts behind each claim."""
    rows = []
    for (corpus, model, _, seed, layer), g in _ordered(df).groupby(
        ["corpus", "model", "model_id", "seed", "layer"], sort=False
    ):
        by = {gate: x for gate, x in g.groupby("gate")}
        f, o, r, z = (by.get(k) for k in ("f", "o", "r", "z"))
        count = lambda x, test: int(test(x).sum()) if x is not None else np.nan  # noqa: E731
        rows.append({
            "corpus": corpus, "model": model, "seed": int(seed), "layer": int(layer),
            "cells": int(g["cell"].nunique()),
            f"f right >= {ALWAYS:.0%}": count(f, lambda x: x["right"] >= ALWAYS),
            f"f left >= {ALWAYS:.0%}": count(f, lambda x: x["left"] >= ALWAYS),
            f"o one side >= {ALWAYS:.0%}": count(o, lambda x: (x["left"] >= ALWAYS) | (x["right"] >= ALWAYS)),
            f"r right < {RARELY:.0%} (share)": (r["right"] < RARELY).mean() if r is not None else np.nan,
            f"z left < {RARELY:.0%} (share)": (z["left"] < RARELY).mean() if z is not None else np.nan,
            "mean saturated fraction": float((g["left"] + g["right"]).mean()),
        })  # fmt: skip
    out = pd.DataFrame(rows)
    counts = [c for c in out.columns if c.startswith(("f ", "o "))]  # counts, blank where the gate is not there
    return out.astype({c: "Int64" for c in counts})


verdict = majority  # all hold: reproduced; at least half: partly; fewer: not reproduced


def findings(table: pd.DataFrame) -> list[Finding]:
    """Per corpus: the five claims of sec 4.2 (integrators, the diffuse first layer, no feed-forward forget gate, no
    stuck output gate, the GRU's first layer), then the ablation without the S-RNN in its gates (new)."""
    out = []
    for _, r in table.iterrows():
        v = {k: r[k] for k in r.index if not (isinstance(r[k], float) and np.isnan(r[k]))}
        corpus, lstms = r["corpus"], int(r["lstm_models"])
        if lstms:
            out.append(Finding(
                "{corpus}: {lstm_multiple} of {lstm_models} LSTMs have {multiple} or more forget gates right-saturated "
                "at least {always:.0%} of the time (integrators), against the paper's 'multiple'", v,
                verdict(int(r["lstm_multiple"]), lstms), "sat-fig3-integrators", corpus))  # fmt: skip
        else:
            out.append(Finding("{corpus}: no LSTM was measured", v, "untested", "sat-fig3-integrators", corpus))
        if r["diffuse_of"]:
            out.append(Finding(
                "{corpus}: integrators are {share_l1:.1%} of layer-1 forget gates, {share_deep:.1%} deeper; layer 1 "
                "is the least saturated in {diffuse_holds} of {diffuse_of} multi-layer models", v,
                verdict(int(r["diffuse_holds"]), int(r["diffuse_of"])), "sat-fig3-layer1", corpus)
                if pd.notna(r.get("share_l1", np.nan)) else Finding(
                "{corpus}: layer 1 is the least saturated in {diffuse_holds} of {diffuse_of} multi-layer models "
                "(mean saturated fraction {sat_l1:.1%}, deeper {sat_deep:.1%})", v,
                verdict(int(r["diffuse_holds"]), int(r["diffuse_of"])), "sat-fig3-layer1", corpus))  # fmt: skip
        else:
            out.append(Finding("{corpus}: no multi-layer LSTM or GRU, so no first layer to set against deeper ones",
                               v, "untested", "sat-fig3-layer1", corpus))  # fmt: skip
        if lstms:
            out.append(Finding(
                "{corpus}: {f_left} of {f_cells} LSTM forget gates left-saturated at least {always:.0%} of the time, "
                "against the paper's none", v, verdict(lstms - int(r["f_left_models"]), lstms),
                "sat-fig3-no-feedforward", corpus))  # fmt: skip
        if pd.notna(r.get("o_cells", np.nan)):
            out.append(Finding(
                "{corpus}: {o_stuck} of {o_cells} LSTM output gates saturated on one side at least {always:.0%} of the "
                "time, in {o_stuck_models} of {lstm_models} LSTMs, against the paper's none", v,
                verdict(lstms - int(r["o_stuck_models"]), lstms), "sat-fig3-output", corpus))  # fmt: skip
        if r["gru_models"]:
            out.append(Finding(
                "{corpus}: in layer 1 of {gru_models} GRUs, {r_rare:.0%} of reset gates are right-saturated under "
                "{rarely:.0%} of the time and {z_rare:.0%} of update gates left-saturated under {rarely:.0%}", v,
                verdict(int(r["gru_holds"]), int(r["gru_models"])), "sat-fig3-gru", corpus))  # fmt: skip
        else:
            out.append(Finding("{corpus}: no GRU was measured", v, "untested", "sat-fig3-gru", corpus))
        if pd.notna(r.get("hidden_i_right", np.nan)):
            out.append(Finding(
                "{corpus}: in LSTM - S-RNN - HIDDEN, whose gates read only the input, the input gate is "
                "right-saturated {hidden_i_right:.0%} of the time on average", v, corpus=corpus))  # fmt: skip
    return out


# ------------------------------------------------------------------------------------------ the figure


def headlines(df: pd.DataFrame) -> list[tuple[str, str]]:
    """(corpus, model_id) of the models Fig 3 shows: per corpus the headline LSTM and the headline GRU (the suite's
    rule, analyses.common.headline_id), else the headline of the first architecture there."""
    out = []
    for corpus in sorted(df["corpus"].unique()):
        models = df[df["corpus"] == corpus].drop_duplicates("model_id")
        picked = [headline_id(models[models["arch"] == arch]) for arch in ("lstm", the_gru(models["arch"]))]
        picked = [m for m in picked if m is not None] or [headline_id(models)]
        out += [(corpus, m) for m in picked]
    return out


def plot(df: pd.DataFrame):
    """Fig 3: one point per cell, x right-saturated, y left-saturated, colour = layer; one row per headline model
    (LSTM: i, f, o; GRU: r, z), per corpus. Every other model's counts are in the appendix."""
    style()
    shown = headlines(df)
    gates_of = {m: [g for g in GATES if g in set(df.loc[df["model_id"] == m, "gate"])] for _, m in shown}
    ncols = max(3, max(len(v) for v in gates_of.values()))
    layers = sorted(df[df["model_id"].isin(gates_of)]["layer"].unique())
    palette = dict(zip(layers, sns.color_palette("colorblind", len(layers))))
    fig, axes = plt.subplots(len(shown), ncols, figsize=(7.5, min(9.0, 0.4 + 2.15 * len(shown))), squeeze=False)
    label = _ordered(df[df["model_id"].isin(gates_of)]).drop_duplicates("model_id").set_index("model_id")["model"]
    for r, (corpus, model_id) in enumerate(shown):
        sub = df[df["model_id"] == model_id]
        for c in range(ncols):
            ax = axes[r, c]
            if c >= len(gates_of[model_id]):
                ax.set_axis_off()
                continue
            gate = gates_of[model_id][c]
            ax.plot([0, 1], [1, 0], color="grey", lw=0.8, ls="--", zorder=0)  # left + right <= 1
            for layer, part in sub[sub["gate"] == gate].groupby("layer"):
                ax.scatter(part["right"], part["left"], s=9, alpha=0.6, color=palette[layer], edgecolors="none",
                           label=f"layer {layer}")  # fmt: skip
            ax.set(xlim=(-0.03, 1.03), ylim=(-0.03, 1.03))
            ax.set_title(f"{corpus}, {label[model_id]}\n{GATE_NAMES[gate]}", fontsize=7.5)
            ax.set_xlabel("fraction right-saturated (> 0.9)", fontsize=7)
            ax.set_ylabel("fraction left-saturated (< 0.1)" if c == 0 else "", fontsize=7)
            ax.tick_params(labelsize=7)
    handles = [plt.Line2D([], [], ls="", marker="o", color=palette[k], label=f"layer {k}") for k in layers]
    fig.legend(handles=handles, loc="lower center", ncol=len(layers), fontsize=8, frameon=False,
               bbox_to_anchor=(0.5, 0.0))  # fmt: skip
    fig.suptitle("Gate saturation of the headline LSTM and GRU, one point per cell (Karpathy et al. Fig 3);\n"
                 "bottom right: right-saturated nearly always (an integrator, for a forget gate)",
                 fontsize=9)  # fmt: skip
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


# ------------------------------------------------------------------------------------------ the analysis


class Saturation(Analysis):
    name = "saturation"
    title = TITLE
    question = QUESTION
    source = PAPER_SOURCE
    settings = SETTINGS
    needs = NEEDS
    claims = (
        Claim("sat-fig3-integrators", "Karpathy et al. (2016) sec 4.2, Fig 3",
              "forget gates: multiple cells almost always right-saturated, functioning as nearly perfect integrators",
              "words only ('multiple', 'almost always'); 3-layer models"),
        Claim("sat-fig3-layer1", "Karpathy et al. (2016) sec 4.2, Fig 3",
              "the first layer is much more diffuse (near the origin) than the deeper layers, across all models",
              "words only ('much more diffuse')"),
        Claim("sat-fig3-no-feedforward", "Karpathy et al. (2016) sec 4.2, Fig 3",
              "no forget gate is consistently left-saturated (no cell works in purely feed-forward fashion)", "none"),
        Claim("sat-fig3-output", "Karpathy et al. (2016) sec 4.2, Fig 3",
              "no output gate is consistently revealed or blocked", "none"),
        Claim("sat-fig3-gru", "Karpathy et al. (2016) sec 4.2, Fig 3 right",
              "GRU layer 1: reset gates nearly never right-saturated, update gates rarely ever left-saturated",
              "words only ('nearly never', 'rarely ever')"),
    )  # fmt: skip
    shows = (
        "Fig 3's scatter for the headline LSTM and GRU of each corpus: one point per cell, the fraction of test "
        "steps its gate is right-saturated (x) against left-saturated (y), coloured by layer."
    )
    deviations = (
        "Fractions come from a test excerpt whose state is warmed up on the text before it, not the whole test set.",
        "The paper's words become thresholds: 'almost always' is at least 90 % of the steps, 'nearly never' and "
        "'rarely ever' under 10 % for at least 90 % of a layer's cells, 'multiple' at least two cells per model.",
        "The paper's scatter shows 3-layer models; we count every LSTM and GRU the run trained, of every depth, and "
        "compare layer 1 with deeper layers on the multi-layer ones.",
        "The GRU's z is the weight on the candidate (h = (1 - z) h + z htilde, the papers' convention).",
    )

    def compute(self, ctx: Context) -> Result:
        df = compute(ctx)
        table = summary(df)
        return Result(df, findings(table), tables={"summary": table})

    def plot(self, result: Result):
        return plot(result.table)

    def summary_table(self, result: Result) -> pd.DataFrame:
        """Per corpus and claim: our count beside the paper's words."""
        t = result.tables["summary"]
        rows = []
        for _, r in t.iterrows():

            def of(a, b, r=r):
                return f"{int(r[a])} of {int(r[b])}" if pd.notna(r.get(a, np.nan)) else "—"

            share = (f"{r['share_l1']:.1%} in layer 1, {r['share_deep']:.1%} deeper"
                     if pd.notna(r.get("share_l1", np.nan)) else "—")  # fmt: skip
            rows += [
                {"corpus": r["corpus"], "claim": "LSTMs with 2+ integrators (f right >= 90 %)",
                 "ours": of("lstm_multiple", "lstm_models"), "paper": "multiple cells"},
                {"corpus": r["corpus"], "claim": "integrators among forget gates (multi-layer LSTMs)",
                 "ours": share, "paper": "first layer diffuse, deeper layers saturated"},
                {"corpus": r["corpus"], "claim": "layer 1 least saturated (multi-layer LSTMs, GRUs)",
                 "ours": of("diffuse_holds", "diffuse_of"), "paper": "all models"},
                {"corpus": r["corpus"], "claim": "forget gates left-saturated >= 90 %",
                 "ours": of("f_left", "f_cells"), "paper": "none"},
                {"corpus": r["corpus"], "claim": "output gates saturated >= 90 % on one side",
                 "ours": of("o_stuck", "o_cells"), "paper": "none"},
                {"corpus": r["corpus"], "claim": "GRU layer 1: r right < 10 %, z left < 10 % (share of cells)",
                 "ours": f"{r['r_rare']:.0%}, {r['z_rare']:.0%}" if r["gru_models"] else "—",
                 "paper": "nearly all"},
            ]  # fmt: skip
        return pd.DataFrame(rows)

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        return {"every model and layer: the counts behind each claim": per_layer(result.table)}


ANALYSIS = Saturation()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
