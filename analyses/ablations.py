"""Levy et al.'s LSTM ablations against the LSTM, in the shape of their Table 1, at every depth the run trained.

The LSTM is reported as mean +- std over seeds; each ablation (trained with the LSTM's width and hyperparameters, at
the same depth) sits beside it with its gap to the LSTM mean in units of the LSTM's seed std at that depth, the
yardstick Levy et al. give for "within noise". Levy et al.'s language models had 2 layers (Zaremba et al.'s Medium and
Large configurations); the reference profile trains the ablations at 1 and 2 layers, and the section shows the depths
side by side (`depths`: a depth the run lacks is named, its verdicts untested).

Beside them, Levy's argument carried forward (new): minGRU and minLSTM (Feng et al. 2024), whose gates and content
read the input alone like - S-RNN - HIDDEN's gates, are stacked at 1, 2 and 3 layers in a budget row; `input_only`
(analyses/ablations_min.py) sets each beside the LSTM of its depth and budget row (Fig 1's, the yardstick above where
it has seeds) and asks whether depth closes the gap, and at which depth: within NOISE_STDS LSTM seed stds where the
LSTM has 2 or more seeds, else the gap in nats alone.

Levy et al.'s Table 1, its order and the yardstick (NOISE_STDS) are analyses/levy.py. Below: measure (the tidy table,
one row per corpus, depth, width and architecture), depth_summary (one row per corpus and depth: the ordering, the
ablations within NOISE_STDS LSTM stds, - GATES's gap and rank, Levy's numbers on the same yardstick), hidden_depth
(- S-RNN - HIDDEN at each depth), the findings written from them, and the figure (analyses/ablations_plot.py).
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from corpora.errors import run_cli

from .ablations_min import input_only, input_only_findings
from .base import Analysis, Claim, Finding, Result, majority
from .common import analysis_main
from .context import Context, MissingInput, Needs
from .dropout_choice import at_shared_dropout
from .levy import GATED_SUM, LABELS, NOISE_STDS, ORDER, SHORT, levy_numbers, pairs_in_order, paper_table

TITLE = "Levy et al.'s ablations of the LSTM"
QUESTION = "Is the LSTM's power in its embedded S-RNN or in the gated, element-wise weighted sum of its memory cell?"
PAPER_SOURCE = "Levy et al. (2018), Table 1 (PTB word-level perplexity; LSTM mean +- std over 5 seeds)"
SETTINGS = {
    "split": "test",  # split scored
    "resamples": 100,  # bootstrap resamples of positions
    "depths": [1, 2],  # depths the section reports (the reference profile's [ablations] layers); absent: untested
}


# ------------------------------------------------------------------------------------------ the tidy table


def scored(ctx: Context, scores: dict, row: pd.Series) -> tuple[float, float]:
    """A model's test cross-entropy and bootstrap std, computed once per analysis run (`scores` keeps them by id)."""
    if row["model_id"] not in scores:
        scores[row["model_id"]] = ctx.predictions(row, ctx.settings["split"]).cross_entropy(ctx.settings["resamples"])
    return scores[row["model_id"]]


def measure(ctx: Context, scores: dict | None = None) -> pd.DataFrame:
    """Per corpus and LSTM setting (layers, width): LSTM mean +- seed std, each ablation's cross-entropy and gap.

    Seeds are averaged only within one configuration (`group_id`): models that differ in anything else (the
    corpus bytes, split, budget, recipe) are never pooled.
    """
    scores = {} if scores is None else scores
    every = ctx.models(arch=tuple(ORDER), all_dropouts=True, required=False)
    neural = at_shared_dropout(every, ["corpus_key", "layers", "size"])
    rows = []
    for (_, layers, size), group in neural.groupby(["corpus_key", "layers", "size"]):
        lstm_groups = group[group["arch"] == "lstm"]["group_id"].unique()
        if len(lstm_groups) != 1 or group["arch"].nunique() < 2:
            continue  # an ablation needs its LSTM (one configuration, any number of seeds), and the LSTM its ablations
        for _, r in group.iterrows():
            scored(ctx, scores, r)
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


# ------------------------------------------------------------------------------------------ per corpus and depth


def depth_summary(df: pd.DataFrame, depths: list[int]) -> pd.DataFrame:
    """One row per corpus and depth (the `depths` asked for and every depth measured): whether it is tested (the
    LSTM and an ablation there, the LSTM over at least 2 seeds), the LSTM's mean and seed std, our ordering, the
    pairs of models in Levy's order, the gated-sum ablations within NOISE_STDS, - GATES's gap and the worst
    ablation, and Levy's numbers on the same yardstick (PTB Large and Medium)."""
    large, medium = levy_numbers("Large"), levy_numbers("Medium")
    rows = []
    for corpus in sorted(df["corpus"].unique()):
        on = df[df["corpus"] == corpus]
        for layers in sorted(set(int(d) for d in depths) | set(on["layers"].astype(int))):
            row = {"corpus": corpus, "layers": layers, "threshold_std": NOISE_STDS, "paper_within": large["within"],
                   "paper_within_medium": medium["within"], "paper_gates_std": large["gates_std"],
                   "paper_gates_std_medium": medium["gates_std"], "paper_pairs": large["pairs"],
                   "paper_pairs_medium": medium["pairs"], "paper_of": 10}  # fmt: skip
            sub = on[on["layers"] == layers]
            if sub.empty:
                rows.append({**row, "tested": False, "why": "not trained"})
                continue
            sub = sub[sub["size"] == sub["size"].iloc[0]]  # one width per depth (the budget row's LSTM)
            by = sub.set_index("arch")
            lstm = by.loc["lstm"]
            ce = by["ce_nats"].to_dict()
            holds, pairs = pairs_in_order(ce)
            ranked = sub.sort_values("ce_nats")
            ablations = sub[sub["arch"] != "lstm"]
            worst = ablations.loc[ablations["ce_nats"].idxmax()]
            gated = ablations[ablations["arch"].isin(GATED_SUM)]
            within = gated[gated["gap_in_lstm_std"].abs() <= NOISE_STDS]
            tested = int(lstm["seeds"]) >= 2
            row.update({
                "tested": tested, "why": "" if tested else "the LSTM has one seed", "size": int(lstm["size"]),
                "lstm_seeds": int(lstm["seeds"]), "lstm_ce": lstm["ce_nats"], "lstm_std": lstm["seed_std"],
                "order": " < ".join(SHORT[a] for a in ranked["arch"]), "pairs": holds, "pairs_of": pairs,
                "within": len(within), "gated_of": len(gated),
                "within_names": ", ".join(SHORT[a] for a in within["arch"]) or "none",
                "gates_ce": ce.get("lstm-gates", np.nan),
                "gates_std": by["gap_in_lstm_std"].get("lstm-gates", np.nan),
                "worst": SHORT[worst["arch"]], "worst_ce": worst["ce_nats"], "worst_std": worst["gap_in_lstm_std"],
            })  # fmt: skip
            rows.append(row)
    return pd.DataFrame(rows)


HIDDEN_DEPTH_COLUMNS = ["corpus", "layers", "size", "hidden_ce", "gap_nats", "gap_in_lstm_std", "gap_taken_off",
                        "gates_ce", "minus_gates_nats"]  # fmt: skip


def hidden_depth(df: pd.DataFrame) -> pd.DataFrame:
    """Per corpus and depth, - S-RNN - HIDDEN (every gate and the content read the current input alone) against the
    LSTM and - GATES of its depth and width: its gap to the LSTM, the share of its shallowest depth's gap that the
    deeper one takes off, and its distance to - GATES. Issue 38's question: at one layer its gates see only the
    character just read; at two, the second layer's gates read the first layer's summary of the context (new)."""
    rows = []
    for corpus, sub in df.groupby("corpus", sort=True):
        gates = sub[sub["arch"] == "lstm-gates"].set_index(["layers", "size"])["ce_nats"]
        first = None
        hidden = sub[sub["arch"] == "lstm-srnn-hidden"].sort_values(["layers", "size"])
        for _, h in hidden.drop_duplicates("layers", keep="last").iterrows():  # a depth's widest, if several
            row = {"corpus": corpus, "layers": int(h["layers"]), "size": int(h["size"]), "hidden_ce": h["ce_nats"],
                   "gap_nats": h["gap_nats"], "gap_in_lstm_std": h["gap_in_lstm_std"]}  # fmt: skip
            if (h["layers"], h["size"]) in gates.index:
                row["gates_ce"] = float(gates[(h["layers"], h["size"])])
                row["minus_gates_nats"] = h["ce_nats"] - row["gates_ce"]
            if first is None:
                first = h["gap_nats"]
            elif pd.notna(first) and first > 0 and pd.notna(h["gap_nats"]):
                row["gap_taken_off"] = 1.0 - h["gap_nats"] / first
            rows.append(row)
    return pd.DataFrame(rows, columns=HIDDEN_DEPTH_COLUMNS)


def hidden_depth_findings(table: pd.DataFrame) -> list[Finding]:
    """Per corpus with - S-RNN - HIDDEN at two depths or more: its gap to the LSTM at each, what depth takes off it,
    and its distance to - GATES (new)."""
    out = []
    for corpus, sub in table.groupby("corpus", sort=True):
        if len(sub) < 2:
            continue
        values, gaps, gates = {"corpus": corpus}, [], []
        for k, (_, r) in enumerate(sub.iterrows()):
            values.update({f"l{k}": int(r["layers"]), f"g{k}": r["gap_nats"]})
            where = f"at {{l{k}}} layer" + ("s" if int(r["layers"]) > 1 else "")
            stds = ""
            if pd.notna(r["gap_in_lstm_std"]):
                values[f"d{k}"] = r["gap_in_lstm_std"]
                stds = f" ({{d{k}:+.1f}} stds)"
            gaps.append(f"{{g{k}:+.3f}} nats {where}{stds}")
            if pd.notna(r["minus_gates_nats"]):
                values[f"x{k}"] = r["minus_gates_nats"]
                gates.append(f"{{x{k}:+.3f}}")
        last = sub.iloc[-1]
        text = "{corpus}: - S-RNN - HIDDEN (input-only gates) minus the LSTM: " + ", ".join(gaps)
        if pd.notna(last["gap_taken_off"]):
            values["taken"] = last["gap_taken_off"]
            text += "; depth takes {taken:.0%} off" if last["gap_taken_off"] >= 0 else "; depth does not narrow it"
        if len(gates) == len(sub):  # - GATES at every depth: its distance at each, in the same order
            text += "; minus - GATES: " + ", ".join(gates)
        out.append(Finding(text, values, corpus=corpus))
    return out


# ------------------------------------------------------------------------------------------ findings


_verdict = majority  # all hold: reproduced; at least half: partly; fewer: not reproduced


def _at(k: int, r: pd.Series, values: dict) -> str:
    """ "at {lk} layer(s)", the depth a field of `values`."""
    values[f"l{k}"] = int(r["layers"])
    return f"at {{l{k}}} layer" + ("s" if int(r["layers"]) > 1 else "")


def _untested(k: int, r: pd.Series, values: dict, why: str | None = None) -> str:
    values[f"why{k}"] = why or r["why"]
    return f"untested {_at(k, r, values)} ({{why{k}}})"


def corpus_findings(corpus: str, rows: pd.DataFrame) -> list[Finding]:
    """The three claims' verdicts on one corpus, each sentence covering every depth (the page-one lines)."""
    tested = rows[rows["tested"]]
    first = rows.iloc[0]
    out = []

    # Levy's ordering: the pairs of models that keep Levy's PTB Large order, at every tested depth
    # (verdict: every pair at every tested depth: reproduced; at least half of them: partly; fewer: not reproduced)
    values, parts = {"corpus": corpus, "paper_pairs": first["paper_pairs_medium"], "paper_of": first["paper_of"]}, []
    for k, (_, r) in enumerate(rows.iterrows()):
        if not r["tested"]:
            parts.append(_untested(k, r, values))
            continue
        values.update({f"h{k}": int(r["pairs"]), f"o{k}": int(r["pairs_of"])})
        parts.append(f"{{h{k}}} of {{o{k}}} model pairs {_at(k, r, values)}")
    verdict = _verdict(int(tested["pairs"].sum()), int(tested["pairs_of"].sum())) if len(tested) else "untested"
    out.append(Finding("{corpus}: Levy's PTB Large order holds in " + "; ".join(parts)
                       + " (Levy's own Medium: {paper_pairs} of {paper_of})", values, verdict, "abl-order",
                       corpus))  # fmt: skip

    # the gated weighted sum: ablations within NOISE_STDS of the LSTM
    # (verdict: all of them at every tested depth: reproduced; some: partly; none: not reproduced)
    values = {"corpus": corpus, "threshold": first["threshold_std"], "paper_within": first["paper_within"]}
    parts = []
    for k, (_, r) in enumerate(rows.iterrows()):
        if not r["tested"]:
            parts.append(_untested(k, r, values))
            continue
        values.update({f"w{k}": int(r["within"]), f"g{k}": int(r["gated_of"]), f"n{k}": r["within_names"]})
        parts.append(f"{{w{k}}} of {{g{k}}} {_at(k, r, values)} ({{n{k}}})")
    within, of = (int(tested["within"].sum()), int(tested["gated_of"].sum())) if len(tested) else (0, 0)
    verdict = "untested" if of == 0 else ("reproduced" if within == of else "partly" if within else "not reproduced")
    out.append(Finding("{corpus}: gated-sum ablations within {threshold} LSTM stds: " + "; ".join(parts)
                       + " (Levy, same yardstick: {paper_within} of 3)", values, verdict, "abl-gated-sum",
                       corpus))  # fmt: skip

    # - GATES far behind: beyond NOISE_STDS and the worst ablation
    # (verdict: both at every tested depth: reproduced; beyond the noise somewhere: partly; else not reproduced)
    values, parts, worst_beyond, beyond, n = {"corpus": corpus, "paper_gates": first["paper_gates_std"]}, [], 0, 0, 0
    for k, (_, r) in enumerate(rows.iterrows()):
        if not r["tested"] or pd.isna(r["gates_std"]):
            parts.append(_untested(k, r, values, None if not r["tested"] else "- GATES not trained"))
            continue
        n += 1
        values[f"s{k}"] = r["gates_std"]
        is_worst = r["worst"] == SHORT["lstm-gates"]
        worst_beyond += bool(is_worst and r["gates_std"] > NOISE_STDS)
        beyond += bool(r["gates_std"] > NOISE_STDS)
        if is_worst:
            parts.append(f"{{s{k}:+.1f}} {_at(k, r, values)}, the worst")
        else:
            values.update({f"wn{k}": r["worst"], f"ws{k}": r["worst_std"]})
            parts.append(f"{{s{k}:+.1f}} {_at(k, r, values)}, behind {{wn{k}}} ({{ws{k}:+.1f}})")
    verdict = (
        "untested" if n == 0 else ("reproduced" if worst_beyond == n else "partly" if beyond else "not reproduced")
    )
    out.append(Finding("{corpus}: - GATES in LSTM seed-stds " + "; ".join(parts) + " (Levy, PTB Large: "
                       "{paper_gates:+.0f})", values, verdict, "abl-gates", corpus))  # fmt: skip
    return out


def depth_finding(corpus: str, r: pd.Series, sub: pd.DataFrame) -> Finding:
    """Our ordering at one depth with every value, worst last: which ablation is worse than which (new)."""
    ranked = sub.sort_values("ce_nats")
    values = {"corpus": corpus, "layers": int(r["layers"]), "size": int(r["size"]), "std": r["lstm_std"],
              "seeds": int(r["lstm_seeds"])}  # fmt: skip
    chain = []
    for k, (_, m) in enumerate(ranked.iterrows()):
        values[f"m{k}"], values[f"c{k}"] = SHORT[m["arch"]], m["ce_nats"]
        chain.append(f"{{m{k}}} {{c{k}:.3f}}")
    spread = " (LSTM seed std {std:.3f}, {seeds} seeds)" if pd.notna(r["lstm_std"]) else " ({seeds} LSTM seed)"
    return Finding("{corpus}, {layers} x {size}: " + " < ".join(chain) + " nats/char" + spread, values,
                   corpus=corpus)  # fmt: skip


def findings(df: pd.DataFrame, depths: pd.DataFrame) -> list[Finding]:
    out = []
    for corpus, rows in depths.groupby("corpus", sort=True):
        out += corpus_findings(corpus, rows.reset_index(drop=True))
    for _, r in depths[depths["size"].notna()].iterrows():
        sub = df[(df["corpus"] == r["corpus"]) & (df["layers"] == r["layers"]) & (df["size"] == r["size"])]
        out.append(depth_finding(r["corpus"], r, sub))
    return out


# ------------------------------------------------------------------------------------------ the analysis


class Ablations(Analysis):
    name = "ablations"
    needs = Needs(dropouts="chosen and 0")  # at_shared_dropout: an LSTM whose Fig 1 cell chose more is read at 0
    title = TITLE
    question = QUESTION
    source = PAPER_SOURCE
    settings = SETTINGS
    claims = (
        Claim("abl-order", "Levy et al. (2018) Table 1", "the ablations rank - S-RNN < - S-RNN - OUT < LSTM < "
              "- S-RNN - HIDDEN << - GATES (perplexity, lower is better)",
              "PTB Large 76.0 < 78.5 < 78.8 < 82.9 << 126.1; Medium 80.5, 81.6, 83.9 (LSTM), 83.3, 140.9"),
        Claim("abl-gated-sum", "Levy et al. (2018) sec 5, Table 1", "the three ablations that keep the gated "
              "weighted sum are within a few LSTM seed-stds of the LSTM",
              "LSTM 78.8 +- 0.2 (Large), 83.9 +- 0.3 (Medium); - S-RNN 76.0 / 80.5, - S-RNN - OUT 78.5 / 81.6, "
              "- S-RNN - HIDDEN 82.9 / 83.3"),
        Claim("abl-gates", "Levy et al. (2018) sec 5, Table 1", "removing the gates (LSTM - GATES) is far worse",
              "126.1 against 78.8 (Large); 140.9 against 83.9 (Medium)"),
    )  # fmt: skip
    shows = (
        "Test cross-entropy of the LSTM and Levy's ablations, one row of panels per corpus and one column per depth, "
        "with bands of one LSTM seed std and of the noise threshold around the LSTM's mean and each ablation's gap "
        "in LSTM stds; minGRU and minLSTM of the same depth and budget row beside them (diamonds)."
    )
    deviations = (
        "Levy et al. measured word-level perplexity on PTB with Zaremba et al.'s tuned 2-layer LSTMs; ours are "
        "character-level cross-entropies with Karpathy et al.'s recipe, so gaps are compared in units of the LSTM's "
        "seed std, not in perplexity points.",
        "Each ablation is trained at the LSTM's width (so with fewer parameters), at one seed, or at the LSTM's "
        "seeds where the profile names it (`noise_seeds`: its gap was within noise at one seed), and then its mean "
        "stands for it; the LSTM's seed std comes from its few seeds and is itself uncertain.",
        "On the same yardstick Levy et al.'s own Table 1 puts - S-RNN and - S-RNN - HIDDEN beyond the noise "
        "threshold: the paper's 'within a few points' is in perplexity; the findings give their count beside ours.",
    )

    def compute(self, ctx: Context) -> Result:
        scores: dict = {}  # model id -> test cross-entropy and bootstrap std, shared by the two tables
        df = measure(ctx, scores)
        asked = list(ctx.settings.get("depths") or [])
        depths = depth_summary(df, asked)
        minimal = input_only(ctx, lambda row: scored(ctx, scores, row)[0])
        hidden = hidden_depth(df)
        return Result(df, findings(df, depths) + hidden_depth_findings(hidden) + input_only_findings(minimal),
                      tables={"depths": depths, "input_only": minimal, "hidden_depth": hidden})  # fmt: skip

    def plot(self, result: Result):
        from .ablations_plot import plot

        return plot(result.table, result.tables["depths"], result.tables.get("input_only"))

    def summary_table(self, result: Result) -> pd.DataFrame:
        """Per corpus and depth: the LSTM, each ablation's gap in LSTM seed stds, how many are within noise."""
        df, depths = result.table, result.tables["depths"]
        rows = []
        for _, r in depths.iterrows():
            row = {"corpus": r["corpus"], "layers": int(r["layers"])}
            if pd.isna(r.get("size", np.nan)):
                rows.append({**row, "LSTM (nats/char)": "not trained"})
                continue
            sub = df[(df["corpus"] == r["corpus"]) & (df["layers"] == r["layers"]) & (df["size"] == r["size"])]
            std = f" +- {r['lstm_std']:.3f}" if pd.notna(r["lstm_std"]) else ""
            lstm = f"{r['lstm_ce']:.3f}{std} ({int(r['lstm_seeds'])} seeds)"
            row.update({"width": str(int(r["size"])), "LSTM (nats/char)": lstm})
            gaps = sub.set_index("arch")["gap_in_lstm_std"]
            for arch in ORDER[1:]:
                row[f"{SHORT[arch]} (LSTM stds)"] = (
                    f"{gaps[arch]:+.1f}" if arch in gaps and pd.notna(gaps[arch]) else "—"
                )
            row[f"gated sum within {NOISE_STDS:g} stds"] = (
                f"{int(r['within'])} of {int(r['gated_of'])}" if r["tested"] else "untested"
            )
            rows.append(row)
        return pd.DataFrame(rows).fillna("—")

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        out = {"every model, with its gap to the LSTM of its depth and width": result.table}
        minimal = result.tables.get("input_only")
        if minimal is not None and len(minimal):
            out["minGRU and minLSTM beside the LSTM of their depth and budget row"] = minimal
        hidden = result.tables.get("hidden_depth")
        if hidden is not None and hidden["layers"].nunique() > 1:
            out[
                "- S-RNN - HIDDEN at each depth: its gap to the LSTM, what depth takes off it, its distance to - GATES"
            ] = hidden
        return out

    def paper_table(self) -> pd.DataFrame:
        return paper_table()


ANALYSIS = Ablations()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
