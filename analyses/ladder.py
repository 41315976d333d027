"""The lecture notes' ladder: what each step of the derivation from CBOW to the LSTM buys.

Goldberg and Pitis's notes (seed 004) derive the LSTM in steps, each a model one can train:

    CBOW as an RNN   s_t = s_{t-1} + E[x_t], and squashed, tanh(s_{t-1} + E[x_t])          `cbow`, `cbow-tanh`
    Elman RNN        tanh(W^s s_{t-1} + W^x x_t): recurrent weights, "entire memory is written"        `rnn`
    prototype LSTM   gates i, f, o read s_{t-1}; candidate tanh(W (o * s_{t-1}) + U x + b);
                     s_t = f * s_{t-1} + i * candidate: selective read, write and forget        `proto-lstm`
    GRU              "Solution 1": forget tied to write (1 - z), a bounded state; the reset gate
                     multiplies the state before the recurrent product (Karpathy et al. sec 3.1)  `gru-paper`
    pseudo-LSTM      "Solution 2": gates and candidate read tanh(s_{t-1}), output tanh(s_t)       `pseudo-lstm`
    LSTM             the shadow state h = o * tanh(c) feeds the gates, the candidate and the output    `lstm`

Here every rung is trained in one budget row (every model sized to the parameter count of a 1-layer
LSTM of that width, Karpathy et al. sec 4.1) and measured three ways: test cross-entropy (nats/char,
from the model's predictions, bootstrap std over positions), the vanishing ratio (Maini et al. 2020 as
the notes define it, ||dL/dh_mid|| / ||dL/dh_end||; analyses/vanishing.py: the gradient of the last
character's loss at mid-window over its value where the loss is, for the memory state, at the
best-on-validation checkpoint) and, on a corpus with braces, the brace
advantage (Karpathy et al. Fig 5 left; analyses/brace_distance.py: the model's mean p('}') where '}'
comes, minus the 20-gram's). Each rung's gain is measured against the rung it was derived from: the GRU
and the pseudo-LSTM are the notes' two fixes of the prototype, and the LSTM comes from the pseudo-LSTM.

Deviations (charlm/model.py): the notes' CBOW sum never forgets and grows without bound over a carried
stream, so `cbow` is its leaking mean, h = 0.99 h + 0.01 E x (a bag of the last ~100 characters); the
notes leave the prototype's output open, and it is tanh(s) here as the pseudo-LSTM's is (the raw state as
output makes the papers' recipe diverge within three updates), so the pseudo-LSTM's step is its reads alone.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from charlm.model import matched_size
from corpora.errors import run_cli

from .brace_distance import brace_advantage  # the other analyses' measurements, read per model
from .common import BRIEF_TRAINING, analysis_main, style
from .context import Context, MissingInput, Needs
from .vanishing import geometric_mean, vanishing_ratio

TITLE = "The lecture notes' ladder from CBOW to the LSTM"
QUESTION = (
    "Deriving the LSTM step by step (CBOW-RNN, Elman, prototype LSTM, GRU, pseudo-LSTM, LSTM) at one parameter "
    "budget: which step buys the cross-entropy, the gradient's reach and the long-range brace structure?"
)
PAPER_SOURCE = (
    "Goldberg and Pitis, lecture notes on RNNs (seed 004): the derivation, no numbers; Karpathy et al. (2016) "
    "sec 3.1 and 4.1 (the GRU, budget rows), Fig 5 left (braces); Maini et al. (2020) (vanishing ratio)"
)
NEEDS = Needs(ngram_n=(20,))  # the brace advantage is the model's p('}') minus the 20-gram's
SETTINGS = {
    "budget": 128,  # the budget row: every rung has the parameters of a 1-layer LSTM of this width
    "layers": 1,  # depth of every rung
    "split": "test",  # split scored
    "resamples": 100,  # bootstrap resamples of positions for the cross-entropy's std (Karpathy et al. Fig 1)
    "min_braces": 100,  # the brace advantage is measured on corpora whose split has at least this many '}'
    "excerpt_chars": 3000,  # the state's largest |value| is read over the split's first this many characters
}
# (arch, rung, the rung it is derived from, what the step adds), in the notes' order
LADDER = (
    ("cbow", "CBOW", None, "a bag of characters: s + E[x]"),
    ("cbow-tanh", "CBOW-tanh", "cbow", "a squashing non-linearity: tanh(s + E[x])"),
    ("rnn", "Elman", "cbow-tanh", "recurrent weights: tanh(W s + U x)"),
    ("proto-lstm", "proto-LSTM", "rnn", "gates: selective read, write and forget of an additive state"),
    ("gru", "GRU", "proto-lstm", "a bounded state: forget tied to write (1 - z)"),
    ("pseudo-lstm", "pseudo-LSTM", "proto-lstm", "reads through tanh: gates and candidate see tanh(s), not s"),
    ("lstm", "LSTM", "pseudo-lstm", "the shadow state h = o tanh(c) for gates, candidate and output"),
)
GRU_FORMS = ("gru-paper", "gru")  # the notes' (and papers') GRU; torch's form stands in when it is all there is
NOTES_ONLY = ("cbow", "cbow-tanh", "proto-lstm", "pseudo-lstm")  # rungs no other analysis trains
COLUMNS = [
    "corpus", "step", "arch", "rung", "parent", "adds", "budget", "layers", "size", "params", "seeds",
    "chars_trained", "ce_nats", "ce_std", "seed_std", "gain_nats", "memory", "state_max", "state_chars",
    "vanishing_ratio",
    "brace_advantage", "brace_gain",
]  # fmt: skip


def _in_row(ctx: Context, models: pd.DataFrame, budget: int, layers: int) -> pd.DataFrame:
    """The models of `layers` layers sized to budget row `budget` (the recorded row, or the width it gives)."""
    models = models[models["layers"] == layers]

    def sized(row) -> bool:
        if pd.notna(row["budget"]):
            return int(row["budget"]) == budget
        return matched_size(row["arch"], budget, ctx.corpus(row).vocab_size, layers) == int(row["size"])

    return models.loc[np.array([sized(r) for _, r in models.iterrows()], dtype=bool)]


def state_max(ctx: Context, row: pd.Series, split: str, length: int) -> tuple[str, float, int]:
    """The memory state of the top layer (c where the model has a cell, else h), its largest |value| over the
    split's first `length` characters read from a zero state, and that length: bounded rungs stay within 1
    (or max|E x|), an unbounded state shows how far it ran."""
    top = int(row["layers"]) - 1
    length = min(length, ctx.corpus(row).split(split).size)
    trace = ctx.trace(row, split, 0, length, warmup=0)
    memory = "c" if f"layers.{top}.c" in trace else "h"
    return memory, float(np.abs(trace[f"layers.{top}.{memory}"]).max()), length


def _missing(ctx: Context, budget: int, layers: int) -> MissingInput:
    key = ctx.corpus_keys()[0] if ctx.corpus_keys() else None
    name = ctx._name_of(key) if key else "warpeace"
    vocab = ctx.corpus(key).vocab_size if key else 87
    sizes = ", ".join(f"{a} {matched_size(a, budget, vocab, layers)}" for a in NOTES_ONLY)
    return MissingInput(
        f"the ladder needs the notes' rungs ({', '.join(NOTES_ONLY)}) in budget row {budget} at {layers} layer(s): add "
        f'[[grid]] types = ["cbow", "cbow-tanh", "rnn", "proto-lstm", "gru-paper", "pseudo-lstm", "lstm"], '
        f"layers = [{layers}], budgets = [{budget}] to the profile and run `python -m reports --profile <name>`, or "
        f"train each with `python -m charlm.train --corpus {name} --arch ARCH --layers {layers} --size WIDTH` "
        f"(widths on {name}: {sizes})"
    )


def compute(ctx: Context) -> pd.DataFrame:
    """One row per corpus and rung: cross-entropy (mean over seeds), gain over its parent, vanishing ratio, braces."""
    s = ctx.settings
    split, resamples, budget, layers = s["split"], s["resamples"], int(s["budget"]), int(s["layers"])
    archs = tuple(a for a, *_ in LADDER if a != "gru") + GRU_FORMS
    models = _in_row(ctx, ctx.models(arch=archs, required=False), budget, layers)
    ladders = models.groupby("corpus_key", sort=False).filter(lambda m: m["arch"].isin(NOTES_ONLY).any())
    if ladders.empty:  # only the papers' three types: that is cross_entropy's table, not a ladder
        raise _missing(ctx, budget, layers)
    rows = []
    for corpus_key, on_corpus in ladders.groupby("corpus_key", sort=False):
        braces = ctx.text(corpus_key, split).count(b"}") >= s["min_braces"]
        gru = next((g for g in GRU_FORMS if g in set(on_corpus["arch"])), None)
        by_step = {}
        for step, (arch, rung, parent, adds) in enumerate(LADDER):
            arch = gru if arch == "gru" else arch
            group = on_corpus[on_corpus["arch"] == arch]
            if arch is None or group.empty:
                continue
            group = group[group["group_id"] == group["group_id"].iloc[0]]  # seeds of one configuration only
            scores = np.array([ctx.predictions(r, split).cross_entropy(resamples) for _, r in group.iterrows()])
            ratios = np.array(
                [vanishing_ratio(ctx, r, settings={"split": split}) for _, r in group.iterrows()], dtype=float
            )
            brace = np.mean([brace_advantage(ctx, r, split=split) for _, r in group.iterrows()]) if braces else np.nan
            first = group.iloc[0]
            memory, largest, read = state_max(ctx, first, split, int(s["excerpt_chars"]))
            by_step[LADDER[step][0]] = {
                "corpus": first["corpus"], "step": step, "arch": arch,
                "rung": rung if arch != "gru" else "GRU (torch's form)", "parent": parent, "adds": adds,
                "budget": budget, "layers": layers, "size": int(first["size"]), "params": int(first["params"]),
                "seeds": len(group), "chars_trained": int(first["chars_trained"]),
                "ce_nats": float(scores[:, 0].mean()), "ce_std": float(scores[:, 1].mean()),
                "seed_std": float(scores[:, 0].std(ddof=1)) if len(group) > 1 else np.nan,
                "memory": memory, "state_max": largest, "state_chars": read,
                "vanishing_ratio": geometric_mean(ratios),
                "brace_advantage": float(brace),
            }  # fmt: skip
        for rec in by_step.values():
            parent = by_step.get(rec["parent"])
            rec["parent"] = parent["rung"] if parent else None
            rec["gain_nats"] = parent["ce_nats"] - rec["ce_nats"] if parent else np.nan  # > 0: this step helps
            rec["brace_gain"] = rec["brace_advantage"] - parent["brace_advantage"] if parent else np.nan
            rows.append(rec)
    return pd.DataFrame(rows, columns=COLUMNS)


# ------------------------------------------------------------------------------------------ views


PANELS = (  # column, axis label, scale
    ("ce_nats", "test cross-entropy (nats/char)", "linear"),
    ("state_max", "largest |memory state| (c, or h without a cell)", "log"),
    ("vanishing_ratio", "vanishing ratio ||dL/d mid-window|| / ||dL/dh_end||", "log"),
    ("brace_advantage", "brace advantage: p('}') model - 20-gram", "linear"),
)


def plot(df: pd.DataFrame):
    """One panel per measurement; each rung is joined to the rung it is derived from (a tree, not a line)."""
    style()
    order = [rung for _, rung, *_ in LADDER]
    step_of = {rung: k for k, (_, rung, *_) in enumerate(LADDER)}
    panels = [p for p in PANELS if df[p[0]].notna().any()]  # the brace panel only with a corpus with braces
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.4), squeeze=False)
    colors = dict(zip(df["corpus"].unique(), sns.color_palette("tab10")))
    for ax, (column, label, scale) in zip(axes[0], panels):
        for corpus, sub in df.groupby("corpus", sort=False):
            sub = sub[sub[column].notna()]
            at = dict(zip(sub["step"], sub[column]))
            for _, r in sub.iterrows():
                parent = step_of.get(r["parent"])
                if parent in at:
                    ax.plot([parent, r["step"]], [at[parent], r[column]], color=colors[corpus], lw=1.2)
            ax.plot(sub["step"], sub[column], "o", color=colors[corpus], label=corpus)
            if column == "ce_nats" and sub["seed_std"].notna().any():
                ax.errorbar(sub["step"], sub[column], yerr=sub["seed_std"].fillna(0), fmt="none", ecolor="grey")
        ax.set_yscale(scale)
        if column in ("vanishing_ratio", "state_max"):
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        if column == "brace_advantage":
            ax.axhline(0.0, color="grey", lw=0.8, ls="--")
        ax.set_xticks(range(len(order)))
        ax.set_xticklabels(order, rotation=35, ha="right")
        ax.set_xlabel("")
        ax.set_ylabel(label)
    axes[0][0].legend(title="corpus", fontsize=8)
    fig.suptitle(
        f"The notes' ladder at budget row {int(df['budget'].iloc[0])}, {int(df['layers'].iloc[0])} layer(s): each "
        "rung joined to the one it is derived from (the GRU and the pseudo-LSTM both fix the prototype)"
    )
    fig.tight_layout()
    return fig


def _chain(sub: pd.DataFrame) -> str:
    return " -> ".join(f"{r['rung']} {r['ce_nats']:.3f}" for _, r in sub.iterrows())


def caption(df: pd.DataFrame) -> str:
    parts = [
        f"Every rung has the parameters of a 1-layer LSTM of width {int(df['budget'].iloc[0])} "
        f"({int(df['layers'].iloc[0])} layer(s)); a step's gain is its parent's cross-entropy minus its own "
        "(positive: the step helps), parents as the notes derive them."
    ]
    for corpus, sub in df.groupby("corpus", sort=False):
        sub = sub.sort_values("step")
        noise = 2 * max(sub["ce_std"].max(), sub["seed_std"].max(skipna=True) if sub["seed_std"].notna().any() else 0)
        steps = sub[sub["gain_nats"].notna()]
        gains = "; ".join(
            f"{r['adds']} ({r['rung']} over {r['parent']}) {r['gain_nats']:+.3f}"
            + (" (within noise)" if abs(r["gain_nats"]) < noise else "")
            for _, r in steps.iterrows()
        )
        text = f"On {corpus} (nats/char): {_chain(sub)}. What each step buys: {gains}."
        if len(steps):
            best = steps.loc[steps["gain_nats"].idxmax()]
            text += f" The largest step is {best['adds'].split(':')[0]} ({best['rung']}, {best['gain_nats']:+.3f})."
        states = ", ".join(f"{r['rung']} {r['state_max']:,.3g}" for _, r in sub.iterrows())
        text += (
            f" Largest |memory state| (c, or h without a cell) over the first {int(sub['state_chars'].iloc[0]):,} "
            f"characters of the split from a zero state: {states}."
        )
        lstm = sub[sub["arch"] == "lstm"]
        runaway = sub[sub["state_max"] > 10 * lstm["state_max"].max()] if len(lstm) else sub.iloc[:0]
        if len(runaway):
            text += (
                f" {' and '.join(runaway['rung'])} ran to more than ten times the LSTM's cell: the unbounded "
                "state the notes warn of (gates that read it saturate, and it grows by up to one a step)."
            )
        ratios = ", ".join(f"{r['rung']} {r['vanishing_ratio']:.2g}" for _, r in sub.iterrows())
        text += (
            " Vanishing ratio (Maini et al., ||dL/dh_mid|| / ||dL/dh_end||: the gradient of the last character's "
            f"loss at mid-window over its value where the loss is, after training; below 1 it has shrunk): {ratios}."
        )
        if sub["brace_advantage"].notna().any():
            braces = ", ".join(f"{r['rung']} {r['brace_advantage']:+.3f}" for _, r in sub.iterrows())
            text += f" Brace advantage over the 20-gram: {braces}."
        missing = [rung for arch, rung, *_ in LADDER if arch != "gru" and arch not in set(sub["arch"])]
        if not sub["arch"].isin(GRU_FORMS).any():
            missing.append("GRU")
        if missing:
            text += f" Not trained here: {', '.join(missing)}."
        if "gru" in set(sub["arch"]):
            text += " The GRU rung is torch's form (reset after the recurrent product), not the notes'."
        parts.append(text)
    chars = int(df["chars_trained"].max())
    if chars < BRIEF_TRAINING:
        parts.append(
            f"These models saw {chars:,} training characters, far from the papers' 50 epochs: gains between rungs "
            "are those of briefly trained models, and the slower learners among the gated rungs are handicapped."
        )
    return " ".join(parts)


def report_table(df: pd.DataFrame) -> pd.DataFrame:
    """The report's view: one row per rung with what it scores and what the step to it buys (the CSV keeps every
    column; the full one is ~260 characters wide, past A4 landscape)."""
    view = df[["corpus", "rung", "params", "seeds", "ce_nats", "ce_std", "gain_nats", "vanishing_ratio",
               "brace_advantage"]]  # fmt: skip
    return view.rename(columns={
        "ce_nats": "test nats/char", "ce_std": "bootstrap std", "gain_nats": "gain over parent (nats)",
        "vanishing_ratio": "vanishing ratio", "brace_advantage": "brace advantage",
    })  # fmt: skip


def summary(df: pd.DataFrame) -> str:
    items = []
    for corpus, sub in df.groupby("corpus", sort=False):
        sub = sub.sort_values("step")
        steps = sub[sub["gain_nats"].notna()]
        best = steps.loc[steps["gain_nats"].idxmax()] if len(steps) else None
        item = f"{corpus}: {sub.iloc[0]['rung']} {sub.iloc[0]['ce_nats']:.2f} -> {sub.iloc[-1]['rung']} "
        item += f"{sub.iloc[-1]['ce_nats']:.2f} nats/char"
        if best is not None:
            item += f", largest step {best['rung']} over {best['parent']} ({best['gain_nats']:+.2f})"
        items.append(item)
    return "Ladder: " + "; ".join(items) + " (the notes give no numbers)"


def notes(df: pd.DataFrame) -> list[str]:
    return [
        "`cbow` is the notes' CBOW sum as a leaking mean, h = 0.99 h + 0.01 E x: the plain sum never forgets and "
        "grows without bound over a carried stream (a whole epoch). It is still a bag of characters (no weight "
        "depends on content or mixes characters), of the last ~100 with geometric recency weights; its gradient "
        "shrinks by exactly 0.99 a step, so its vanishing ratio is set by the leak, not learned.",
        "The prototype and pseudo-LSTM have one bias per gate and candidate, as the notes write them; the LSTM "
        "and GRUs have torch's and char-rnn's two. Budgets count every parameter.",
        "The notes leave the prototype's output open; here it is tanh(s), as the pseudo-LSTM's. With the raw "
        "state as output the papers' recipe diverged within three updates in every seed and learning rate "
        "tried (2e-3 to 5e-4): the gates read the unbounded state, saturate, and the state then grows by one a "
        "step, the runaway the notes warn of. With tanh(s) the runaway stays inside the state, and the "
        "pseudo-LSTM's step over the prototype is exactly its reads through tanh.",
        "The GRU rung is `gru-paper`, the form of the notes, of Karpathy et al. sec 3.1 and of char-rnn's GRU.lua "
        "(reset applied to the state before the recurrent product); torch's fused `gru` stands in, and the "
        "caption says so, only where no `gru-paper` was trained.",
        "The vanishing ratio is that of analyses/vanishing.py for the memory state (c where a model has a cell, "
        "else h) of the top layer, after training; across seeds its geometric mean. The brace advantage is "
        "analyses/brace_distance.py's, mean over seeds, on corpora with braces only.",
    ]


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
