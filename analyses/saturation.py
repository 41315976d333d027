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
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from charlm.model import ARCH_LABELS, GATED_ARCHS, GATELESS_ARCHS, GRU_ARCHS
from corpora.errors import UserError, run_cli

from .common import BRIEF_TRAINING, analysis_main, chosen_archs, ordered_models, style
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
                "seed": int(row["seed"]), "chars_trained": int(row["chars_trained"]), "model_id": row["model_id"],
                "group_id": row["group_id"],
                "layer": int(layer) + 1, "gate": gate, "cell": np.arange(left.size), "left": left, "right": right,
                "steps": int(ctx.settings["length"]),
            }))  # fmt: skip
    df = pd.concat(rows, ignore_index=True)
    df["gate"] = pd.Categorical(df["gate"], GATES)
    return df.sort_values(["corpus", "arch", "size", "seed", "layer", "gate", "cell"], ignore_index=True).astype(
        {"gate": str}
    )


# ------------------------------------------------------------------------------------------ the paper's findings


def _ordered(df: pd.DataFrame) -> pd.DataFrame:
    return ordered_models(df, GATED_ARCHS)


def _per_model(sub: pd.DataFrame, passes: pd.Series) -> np.ndarray:
    """How many cells of each model (seed) of a group pass a test: an array over the group's seeds."""
    return passes.groupby(sub["model_id"]).sum().to_numpy()


def _group_findings(g: pd.DataFrame) -> list[tuple]:
    """(finding, layer, paper's words, value, our words, found / None when not testable) for one group's cells."""
    out = []
    seeds = g["model_id"].nunique()
    for layer, lg in g.groupby("layer"):
        f, o = lg[lg["gate"] == "f"], lg[lg["gate"] == "o"]
        if not f.empty:
            integrators = _per_model(f, f["right"] >= ALWAYS)
            per_seed = f" (seeds: {', '.join(map(str, integrators))})" if seeds > 1 else ""
            out.append((
                "forget gates as integrators", layer, "multiple cells almost always right-saturated",
                integrators.mean(), f"{integrators.mean():.1f} cells per model right-saturated >= {ALWAYS:.0%} of "
                f"the time{per_seed}; max {f['right'].max():.1%}", integrators.mean() >= MULTIPLE,
            ))  # fmt: skip
            feedforward = _per_model(f, f["left"] >= ALWAYS)
            out.append((
                "no feed-forward forget gate", layer, "no cell consistently left-saturated", feedforward.mean(),
                f"{feedforward.mean():.1f} cells per model left-saturated >= {ALWAYS:.0%} of the time; max "
                f"{f['left'].max():.1%}", feedforward.sum() == 0,
            ))  # fmt: skip
        if not o.empty:
            stuck = _per_model(o, (o["left"] >= ALWAYS) | (o["right"] >= ALWAYS))
            out.append((
                "output gates never stuck", layer, "no cell consistently revealed or blocked", stuck.mean(),
                f"{stuck.mean():.1f} cells per model saturated on one side >= {ALWAYS:.0%} of the time; max left "
                f"{o['left'].max():.1%}, right {o['right'].max():.1%}", stuck.sum() == 0,
            ))  # fmt: skip
        if layer == 1 and g["arch"].iloc[0] in GRU_ARCHS:
            r, z = lg[lg["gate"] == "r"], lg[lg["gate"] == "z"]
            r_rare, z_rare = (r["right"] < RARELY).mean(), (z["left"] < RARELY).mean()
            out.append((
                "GRU layer 1: r nearly never right-saturated", layer, "nearly never right-saturated", r_rare,
                f"{r_rare:.0%} of cells right-saturated < {RARELY:.0%} of the time; mean {r['right'].mean():.1%}",
                r_rare >= MOST,
            ))  # fmt: skip
            out.append((
                "GRU layer 1: z rarely left-saturated", layer, "rarely ever left-saturated", z_rare,
                f"{z_rare:.0%} of cells left-saturated < {RARELY:.0%} of the time; mean {z['left'].mean():.1%}",
                z_rare >= MOST,
            ))  # fmt: skip
    saturated = (g["left"] + g["right"]).groupby(g["layer"]).mean()  # mean saturated fraction per layer
    deeper = saturated.drop(1)
    if deeper.empty:
        words, found = f"1-layer model: layer 1 saturated {saturated[1]:.1%} of the time, no deeper layer", None
    else:
        words = f"mean saturated fraction: layer 1 {saturated[1]:.1%}, " + ", ".join(
            f"layer {layer} {v:.1%}" for layer, v in deeper.items()
        )
        found = bool((saturated[1] < deeper).all())
    paper = "first layer much less saturated than the others (all models)"
    out.append(("diffuse first layer", "1 vs 2+", paper, saturated[1], words, found))
    return out


def findings(df: pd.DataFrame) -> pd.DataFrame:
    """Each of the paper's claims for every group (corpus, architecture, shape): its number and a verdict.

    Seeds of one group are pooled (cell counts are per model, averaged over seeds); groups are never mixed.
    """
    rows = []
    for (corpus, model, _), g in _ordered(df).groupby(["corpus", "model", "group_id"], sort=False):
        for finding, layer, paper, value, words, found in _group_findings(g):
            rows.append({
                "corpus": corpus, "model": model, "seeds": g["model_id"].nunique(), "layer": str(layer),
                "finding": finding, "paper": paper, "value": float(value), "ours": words,
                "verdict": "not testable" if found is None else ("found" if found else "not found"),
            })  # fmt: skip
    return pd.DataFrame(rows)


with_paper = findings  # the report's table: the paper's claims beside our numbers (the per-cell table is the CSV)


# ------------------------------------------------------------------------------------------ figure and words


def plot(df: pd.DataFrame):
    """The paper's scatter: one point per cell, x right-saturated, y left-saturated; one row per model, one panel per
    gate, colour = corpus and layer; the lowest seed of each group (the table has them all)."""
    style()
    group = ["corpus", "arch", "layers", "size", "group_id"]  # ids read back from CSV may not stay strings
    first = _ordered(df[df["seed"] == df.groupby(group)["seed"].transform("min")])
    first["where"] = first["corpus"] + ", layer " + first["layer"].astype(str)
    models = list(dict.fromkeys(first.sort_values(["order", "size"], ascending=[True, False])["shape"]))
    gates_of = {m: [g for g in GATES if g in set(first.loc[first["shape"] == m, "gate"])] for m in models}
    ncols = max(len(v) for v in gates_of.values())
    fig, axes = plt.subplots(len(models), ncols, figsize=(3.3 * ncols, 3.0 * len(models)), squeeze=False)
    hue_order = sorted(first["where"].unique())
    palette = dict(zip(hue_order, sns.color_palette("colorblind", len(hue_order))))
    for r, model in enumerate(models):
        for c in range(ncols):
            ax = axes[r, c]
            if c >= len(gates_of[model]):
                ax.set_axis_off()
                continue
            gate = gates_of[model][c]
            sub = first[(first["shape"] == model) & (first["gate"] == gate)]
            ax.plot([0, 1], [1, 0], color="grey", lw=0.8, ls="--", zorder=0)  # left + right <= 1
            sns.scatterplot(data=sub, x="right", y="left", hue="where", hue_order=hue_order, palette=palette, s=14,
                            alpha=0.6, edgecolor="none", ax=ax, legend=(r == 0 and c == 0))  # fmt: skip
            ax.set(xlim=(-0.03, 1.03), ylim=(-0.03, 1.03))
            ax.set_title(f"{model}: {GATE_NAMES[gate]}", fontsize=9)
            ax.set_xlabel("fraction right-saturated (> 0.9)")
            ax.set_ylabel("fraction left-saturated (< 0.1)" if c == 0 else "")
    if axes[0, 0].get_legend() is not None:
        sns.move_legend(axes[0, 0], "upper right", title="corpus, layer", fontsize=8, title_fontsize=8)
    fig.suptitle("Gate saturation, one point per cell (Karpathy et al. Fig. 3); bottom right = integrator", y=1.0)
    fig.tight_layout()
    return fig


def caption(df: pd.DataFrame) -> str:
    found = findings(df)
    parts = []
    for (corpus, model), sub in _ordered(df).groupby(["corpus", "model"], sort=False):
        means = sub.groupby("gate").agg(left=("left", "mean"), right=("right", "mean"))
        gates = ", ".join(f"{g} {means.loc[g, 'left']:.0%}/{means.loc[g, 'right']:.0%}" for g in GATES
                          if g in means.index)  # fmt: skip
        parts.append(f"{corpus} {model}: {gates}")
    text = (
        f"Mean fraction of test steps a gate is left/right-saturated (< {LEFT} / > {RIGHT}), over cells and seeds: "
        + "; ".join(parts) + "."
    )  # fmt: skip
    verdicts = []
    for finding, sub in found.groupby("finding", sort=False):
        testable = sub[sub["verdict"] != "not testable"]
        if testable.empty:
            continue
        missing = testable[testable["verdict"] == "not found"]
        tail = (" (not for " + ", ".join(f"{r['corpus']} {r['model']}" for _, r in missing.iterrows()) + ")"
                if len(missing) else "")  # fmt: skip
        verdicts.append(f"{finding}: found in {len(testable) - len(missing)} of {len(testable)}{tail}")
    text += " The paper's findings, per model and layer: " + "; ".join(verdicts) + "."
    if int(df["layers"].max()) == 1:
        text += (
            " These models have one layer, so the paper's contrast between a diffuse first layer and nearly binary "
            "deeper layers cannot appear; its GRU claim is about the first layer, which ours is."
        )
    chars = int(df["chars_trained"].max())
    if chars < BRIEF_TRAINING:
        text += (
            f" The models saw {chars:,} training characters (the paper's, about 130M on War and Peace): fewer "
            "integrators than a converged model may simply mean less training."
        )
    return text


def summary(df: pd.DataFrame) -> str:
    """The paper's models only (LSTM and GRU); the ablations are in the table."""
    found = findings(df)
    lstm = found[found["model"].str.match(r"LSTM \d")]
    integrators = lstm[lstm["finding"] == "forget gates as integrators"]
    left = lstm[lstm["finding"] == "no feed-forward forget gate"]
    gru = found[found["finding"].str.startswith("GRU layer 1")]
    items = [
        "forget-gate integrators (right-saturated >= 90% of steps) per LSTM: "
        + ", ".join(f"{r['corpus']} {r['model']} {r['value']:.1f}" for _, r in integrators.iterrows()),
        f"no left-saturated forget gate in {(left['verdict'] == 'found').sum()} of {len(left)} LSTMs",
    ]
    if not gru.empty:
        r_rare = gru[gru["finding"].str.contains(" r ")]["value"]
        z_rare = gru[gru["finding"].str.contains(" z ")]["value"]
        items.append(f"GRU layer 1: r rarely right-saturated in {r_rare.min():.0%}-{r_rare.max():.0%} of cells, z "
                     f"rarely left-saturated in {z_rare.min():.0%}-{z_rare.max():.0%}")  # fmt: skip
    return "; ".join(items) + " (paper, 3-layer models: multiple integrators, none left-saturated; GRU: nearly all)"


def notes(df: pd.DataFrame) -> list[str]:
    return [
        f"Thresholds from the paper: left-saturated < {LEFT}, right-saturated > {RIGHT}. The paper's words become "
        f"numbers here: 'almost always' = at least {ALWAYS:.0%} of steps, 'nearly never' / 'rarely ever' = under "
        f"{RARELY:.0%} of steps for at least {MOST:.0%} of a layer's cells, 'multiple' = at least {MULTIPLE} cells per "
        "model, 'no cells' = none in any seed.",
        f"Fractions come from a test excerpt of {int(df['steps'].iloc[0]):,} characters whose state is warmed up on "
        "the characters before it; the paper used its test set. The figure shows the lowest seed of each model; the "
        "table has every seed.",
        "The GRU's z is the weight on the candidate (h = (1 - z) h + z htilde, the papers' convention), so a z "
        "rarely left-saturated means the candidate is rarely ignored. The RNN and LSTM - GATES have no gates.",
    ]


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
