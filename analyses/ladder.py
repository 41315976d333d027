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
the notes define it, ||dL/dh_mid|| / ||dL/dh_end||; analyses/vanishing_measure.py: the gradient of the last
character's loss at mid-window over its value where the loss is, for the memory state, at the
best-on-validation checkpoint) and, on a corpus with braces, the brace
advantage (Karpathy et al. Fig 5 left; analyses/brace_distance.py: the model's mean p('}') where '}'
comes, minus the 20-gram's). Each rung's gain is measured against the rung it was derived from: the GRU
and the pseudo-LSTM are the notes' two fixes of the prototype, and the LSTM comes from the pseudo-LSTM.

The analysis runs on whatever rungs the run trained (the papers' three types alone are a ladder of Elman, GRU and
LSTM): a step whose two rungs are not both there is untested, and the findings name the rungs missing.

Deviations (charlm/model.py): the notes' CBOW sum never forgets and grows without bound over a carried
stream, so `cbow` is its leaking mean, h = 0.99 h + 0.01 E x (a bag of the last ~100 characters); the
notes leave the prototype's output open, and it is tanh(s) here as the pseudo-LSTM's is (the raw state as
output makes the papers' recipe diverge within three updates), so the pseudo-LSTM's step is its reads alone.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from charlm.model import matched_size
from corpora.errors import run_cli

from .base import Analysis, Claim, Finding, Result, majority
from .brace_distance import brace_advantage  # the other analyses' measurements, read per model
from .common import analysis_main
from .context import Context, MissingInput, Needs
from .dropout_choice import at_shared_dropout
from .vanishing_measure import geometric_mean, vanishing_ratio

TITLE = "The lecture notes' ladder from CBOW to the LSTM"
QUESTION = (
    "Deriving the LSTM step by step (CBOW-RNN, Elman, prototype LSTM, GRU, pseudo-LSTM, LSTM) at one parameter "
    "budget: which step buys the cross-entropy, the gradient's reach and the long-range brace structure?"
)
PAPER_SOURCE = (
    "Goldberg and Pitis, lecture notes on RNNs (seed 004): the derivation, no numbers; Karpathy et al. (2016) "
    "sec 3.1 and 4.1 (the GRU, budget rows), Fig 5 left (braces); Maini et al. (2020) (vanishing ratio)"
)
NEEDS = Needs(ngram_n=(20,), dropouts="chosen and 0")  # the brace advantage: the model's p('}') minus the 20-gram's;
# a Fig 1 cell that chose a dropout its rungs lack is read at 0 (dropout_choice.at_shared_dropout)
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
RUNG = {arch: rung for arch, rung, *_ in LADDER}
WHAT = {"cbow-tanh": "a squashing non-linearity", "rnn": "recurrent weights", "proto-lstm": "gates",
        "gru": "a bounded state", "pseudo-lstm": "reads through tanh", "lstm": "the shadow state"}  # fmt: skip
GRU_FORMS = ("gru-paper", "gru")  # the notes' (and papers') GRU; torch's form stands in when it is all there is
NOTES_ONLY = ("cbow", "cbow-tanh", "proto-lstm", "pseudo-lstm")  # rungs no other analysis trains
GATED = ("proto-lstm", "gru", "pseudo-lstm", "lstm")  # the rungs with gates (LADDER's names)
NOISE_FACTOR = 2.0  # a step's gain is beyond noise when larger than this x the largest std (bootstrap or seed)
RUNAWAY = 10.0  # a memory state this many times the LSTM's cell has run away (the notes' unbounded state)
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
        f"no rung of the ladder in budget row {budget} at {layers} layer(s): add "
        f'[[grid]] types = ["cbow", "cbow-tanh", "rnn", "proto-lstm", "gru-paper", "pseudo-lstm", "lstm"], '
        f"layers = [{layers}], budgets = [{budget}] to the profile and run `python -m reports --profile <name>`, or "
        f"train each with `python -m charlm.train --corpus {name} --arch ARCH --layers {layers} --size WIDTH` "
        f"(widths on {name}: {sizes})"
    )


def measure(ctx: Context) -> pd.DataFrame:
    """One row per corpus and rung present: cross-entropy (mean over seeds), gain over its parent, vanishing ratio,
    braces. Every rung the run trained in the budget row, whichever they are."""
    s = ctx.settings
    split, resamples, budget, layers = s["split"], s["resamples"], int(s["budget"]), int(s["layers"])
    archs = tuple(a for a, *_ in LADDER if a != "gru") + GRU_FORMS
    every = _in_row(ctx, ctx.models(arch=archs, all_dropouts=True, required=False), budget, layers)
    ladders = at_shared_dropout(every, ["corpus_key"])  # the rungs alike: a cell that chose dropout is read at theirs
    if ladders.empty:
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


# ------------------------------------------------------------------------------------------ the steps


def _log10(value: float) -> float:
    return float(np.log10(value)) if np.isfinite(value) and value > 0 else np.nan


def steps(df: pd.DataFrame) -> pd.DataFrame:
    """One row per corpus and step of the derivation (every rung with a parent in LADDER): whether both rungs are
    there, the gain in cross-entropy against the corpus's noise (NOISE_FACTOR x its largest std), the vanishing
    ratio before and after (log10), the brace advantage before and after, and the step's verdict."""
    rows = []
    for corpus, sub in df.groupby("corpus", sort=False):
        stds = pd.concat([sub["ce_std"], sub["seed_std"]]).dropna()
        noise = NOISE_FACTOR * float(stds.max()) if len(stds) else np.nan
        present = {("gru" if a in GRU_FORMS else a): r for a, r in zip(sub["arch"], sub.to_dict("records"))}
        lstm_state = present["lstm"]["state_max"] if "lstm" in present else np.nan
        missing = [rung for arch, rung, *_ in LADDER if arch not in present]
        for arch, rung, parent, adds in LADDER:
            if parent is None:
                continue
            row = {"corpus": corpus, "arch": arch, "rung": rung, "parent_arch": parent, "parent": RUNG[parent],
                   "adds": adds, "what": WHAT[arch], "noise": noise, "noise_factor": NOISE_FACTOR,
                   "missing": ", ".join(missing) or "none", "runaway": RUNAWAY, "lstm_state": lstm_state}  # fmt: skip
            here, before = present.get(arch), present.get(parent)
            absent = [r for a, r in ((parent, RUNG[parent]), (arch, rung)) if a not in present]
            row["absent"] = " and ".join(absent)
            row["tested"] = not absent
            if here is not None:
                row.update({"ce": here["ce_nats"], "log10_ratio": _log10(here["vanishing_ratio"]),
                            "brace": here["brace_advantage"], "state_max": here["state_max"],
                            "state_chars": here["state_chars"]})  # fmt: skip
            if before is not None:
                row.update({"parent_ce": before["ce_nats"], "parent_log10_ratio": _log10(before["vanishing_ratio"]),
                            "parent_brace": before["brace_advantage"]})  # fmt: skip
            if row["tested"]:
                row["gain"] = before["ce_nats"] - here["ce_nats"]
                # the step buys cross-entropy when it lowers it by more than the noise
                row["verdict"] = "reproduced" if row["gain"] > noise else "not reproduced"
            else:
                row["verdict"] = "untested"
            rows.append(row)
    return pd.DataFrame(rows)


def gradient(df: pd.DataFrame) -> pd.DataFrame:
    """Per corpus: the Elman RNN's vanishing ratio (log10) against every gated rung's, and how many gated rungs
    keep more gradient than it."""
    rows = []
    for corpus, sub in df.groupby("corpus", sort=False):
        key = sub["arch"].map(lambda a: "gru" if a in GRU_FORMS else a)
        ratios = dict(zip(key, sub["vanishing_ratio"].map(_log10)))
        gated = {a: ratios[a] for a in GATED if a in ratios and np.isfinite(ratios[a])}
        row = {"corpus": corpus, "gated_of": len(gated), "elman_log10_ratio": ratios.get("rnn", np.nan)}
        if gated:
            row.update({"gated_min": min(gated.values()), "gated_max": max(gated.values()),
                        "gated_names": ", ".join(RUNG[a] for a in gated)})  # fmt: skip
        row["holds"] = sum(v > row["elman_log10_ratio"] for v in gated.values()) if "rnn" in ratios else 0
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------ findings


_verdict = majority  # all hold: reproduced; at least half: partly; fewer: not reproduced


def _clean(row: pd.Series) -> dict:
    return {k: v for k, v in row.items() if not (isinstance(v, float) and np.isnan(v))}


def step_finding(r: pd.Series) -> Finding:
    """What one step buys, or why it is untested."""
    v = _clean(r)
    if not r["tested"]:
        return Finding("{corpus}: {what} ({rung} over {parent}) untested: {absent} not trained", v, "untested",
                       "ladder-steps", r["corpus"])  # fmt: skip
    if r["gain"] < 0:  # a step that costs cross-entropy (the prototype's raw state) says so in words, not a sign
        v["loss"] = -float(r["gain"])
        text = "{corpus}: {what} ({rung} over {parent}) loses {loss:.3f} nats/char"
    else:
        text = "{corpus}: {what} ({rung} over {parent}) gains {gain:.3f} nats/char"
    if pd.notna(r.get("log10_ratio")) and pd.notna(r.get("parent_log10_ratio")):
        text += ", log10 vanishing ratio {parent_log10_ratio:.1f} -> {log10_ratio:.1f}"
    if pd.notna(r.get("brace")) and pd.notna(r.get("parent_brace")):
        text += ", brace advantage {parent_brace:+.3f} -> {brace:+.3f}"
    return Finding(text, v, r["verdict"], "ladder-steps", r["corpus"])


def findings(df: pd.DataFrame, step_table: pd.DataFrame, grad: pd.DataFrame) -> list[Finding]:
    """Per corpus: the steps' verdict (how many of the tested steps buy cross-entropy, which rungs are missing), the
    gradient's reach, then what each tested step buys, the rungs' cross-entropies, a runaway state, the GRU's form.
    An untested step has no sentence of its own: the first names the rungs missing, the steps table its verdict."""
    out = []
    for corpus, sub in step_table.groupby("corpus", sort=False):
        tested = sub[sub["tested"]]
        v = {"corpus": corpus, "missing": sub["missing"].iloc[0], "noise": sub["noise"].iloc[0],
             "helps": int((tested["verdict"] == "reproduced").sum()), "tested": len(tested),
             "untested": len(sub) - len(tested)}  # fmt: skip
        if len(tested):
            text = "{corpus}: {helps} of {tested} derivation steps lower cross-entropy by more than {noise:.3f} nats"
            text += "; {untested} untested (not trained: {missing})" if v["untested"] else ""
        else:
            text = "{corpus}: every step of the derivation untested; not trained: {missing}"
        out.append(Finding(text, v, _verdict(v["helps"], v["tested"]), "ladder-steps", corpus))
        g = grad[grad["corpus"] == corpus].iloc[0]
        gv = _clean(g)
        if g["gated_of"] and pd.notna(g["elman_log10_ratio"]):
            out.append(Finding("{corpus}: {holds} of {gated_of} gated rungs keep more gradient than Elman (log10 "
                               "vanishing ratio {elman_log10_ratio:.1f}; {gated_names}: {gated_min:.1f} to "
                               "{gated_max:.1f})", gv, _verdict(int(g["holds"]), int(g["gated_of"])),
                               "ladder-gradient", corpus))  # fmt: skip
        else:
            gv["why"] = "no Elman RNN" if pd.isna(g["elman_log10_ratio"]) else "no gated rung"
            out.append(Finding("{corpus}: the gradient's reach untested: {why} in this run", gv, "untested",
                               "ladder-gradient", corpus))  # fmt: skip
        for _, r in tested.iterrows():
            out.append(step_finding(r))
        rungs = df[df["corpus"] == corpus].sort_values("step")
        values, chain = {"corpus": corpus}, []
        for k, (_, r) in enumerate(rungs.iterrows()):
            values[f"r{k}"], values[f"c{k}"] = r["rung"], r["ce_nats"]
            chain.append(f"{{r{k}}} {{c{k}:.3f}}")
        out.append(Finding("{corpus}, test cross-entropy of the rungs trained: " + ", ".join(chain) + " nats/char",
                           values, corpus=corpus))  # fmt: skip
        for _, r in sub.iterrows():
            if (
                pd.notna(r.get("state_max"))
                and np.isfinite(r["lstm_state"])
                and r["state_max"] > RUNAWAY * r["lstm_state"]
            ):
                out.append(Finding("{corpus}: the {rung}'s memory state reached {state_max:.1f} over the first "
                                   "{state_chars} characters, over {runaway}x the LSTM's cell ({lstm_state:.2f})",
                                   _clean(r), corpus=corpus))  # fmt: skip
        if (df[df["corpus"] == corpus]["arch"] == "gru").any():
            out.append(Finding("{corpus}: the GRU rung is torch's form (reset after the recurrent product), not the "
                               "notes'", {"corpus": corpus}, corpus=corpus))  # fmt: skip
    return out


class Ladder(Analysis):
    name = "ladder"
    title = TITLE
    question = QUESTION
    source = PAPER_SOURCE
    settings = SETTINGS
    needs = NEEDS
    claims = (
        Claim("ladder-steps", "Goldberg and Pitis, lecture notes (seed 004)", "each step of the derivation (CBOW, "
              "tanh, recurrent weights, gates, the GRU's and the pseudo-LSTM's fixes, the LSTM's shadow state) "
              "buys a better model"),
        Claim("ladder-gradient", "Goldberg and Pitis, lecture notes (seed 004); Maini et al. (2020)", "the gated "
              "architecture also helps the vanishing gradients problem of the simple RNN"),
    )  # fmt: skip
    shows = (
        "Per measurement (test cross-entropy, largest memory state, vanishing ratio, brace advantage), every rung of "
        "the ladder in the notes' order, each joined to the rung it is derived from; rungs not trained are gaps."
    )
    deviations = (
        "The notes' CBOW sum never forgets and grows without bound over a carried stream, so `cbow` is its leaking "
        "mean, h = 0.99 h + 0.01 E x (a bag of recent characters); its vanishing ratio is set by the leak.",
        "The notes leave the prototype's output open; it is tanh(s) here, as the pseudo-LSTM's: with the raw state "
        "as output the papers' recipe diverged within a few updates, so the pseudo-LSTM's step is its reads alone.",
        "The prototype and pseudo-LSTM have one bias per gate and candidate, as the notes write them; the LSTM and "
        "GRUs have torch's and char-rnn's two. Budgets count every parameter.",
        "The vanishing ratio is analyses/vanishing.py's for the memory state (c where a rung has a cell, else h) of "
        "the top layer after training, geometric mean over seeds; the brace advantage is analyses/brace_distance.py's, "
        "on corpora with braces only.",
    )

    def compute(self, ctx: Context) -> Result:
        df = measure(ctx)
        step_table, grad = steps(df), gradient(df)
        return Result(df, findings(df, step_table, grad), tables={"steps": step_table, "gradient": grad})

    def plot(self, result: Result):
        from .ladder_plot import plot

        return plot(result.table)

    def summary_table(self, result: Result) -> pd.DataFrame:
        """One row per corpus and rung: its cross-entropy, what the step to it buys, its vanishing ratio and braces."""
        df = result.table
        return pd.DataFrame({
            "corpus": df["corpus"], "rung": df["rung"], "from": df["parent"].astype(object).fillna("—"),
            "test nats/char": df["ce_nats"].map("{:.3f}".format),
            "gain over parent": df["gain_nats"].map(lambda g: f"{g:+.3f}" if pd.notna(g) else "—"),
            "vanishing ratio": df["vanishing_ratio"].map(lambda r: f"{r:.2g}" if pd.notna(r) else "—"),
            "brace advantage": df["brace_advantage"].map(lambda b: f"{b:+.3f}" if pd.notna(b) else "—"),
        })  # fmt: skip

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        rungs = result.table[["corpus", "rung", "parent", "size", "params", "seeds", "ce_nats", "ce_std", "seed_std",
                              "gain_nats", "memory", "state_max", "vanishing_ratio", "brace_advantage"]]  # fmt: skip
        steps = result.tables["steps"]
        steps = steps[[c for c in ("corpus", "what", "rung", "parent", "verdict", "gain", "noise", "parent_log10_ratio",
                                   "log10_ratio", "parent_brace", "brace", "absent") if c in steps]]  # fmt: skip
        return {"every rung": rungs, "every step of the derivation": steps}


ANALYSIS = Ladder()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
