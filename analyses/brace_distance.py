"""How far back can a model remember an open brace? p('}') against the distance to its '{'.

Karpathy et al. (2016) sec 4.3, "Case study: closing brace", and Fig 5 (left): on the Linux kernel,
"we group closing brace characters on the test set by the distance to their corresponding open
brace and compute the mean probability assigned by the LSTM and the 20-gram model to closing braces
within each group". Their finding: the LSTM "consistently outperforms the 20-gram model at
predicting closing braces", and "the performance difference increases up to a distance of 60.
After this point the performance difference between the models remains relatively constant".

Matching. Braces are matched with a stack over the test text, read as C: a brace inside a comment
(`/* ... */`, or `// ...` to the end of the line, a backslash-newline continuing it), a string
literal ("...", on one line, backslash escapes honoured) or a character literal ('{', '\\'', up to 8
characters between the quotes) is neither pushed nor popped, and its probability is not read: it
closes nothing. The test split of a contiguous split starts mid-file (the Linux one inside a
comment): a '}' whose '{' lies before the split has nothing on the stack, and is dropped and
counted (`unmatched`), as is every '{' still open at the end (`unclosed`). char-rnn splits (the paper
profile) are 100 pieces of the file: each piece is matched on its own. Preprocessor branches with
unbalanced braces (`#ifdef ... { #else { #endif }`) are read as code; they are rare in kernel/.

Distance = position of '}' minus position of its '{' (so "{}" has distance 1). Every recurrent
configuration (its lowest seed: seed 0; seed siblings share a `group_id`) is compared with the same
20-gram (n = 20 characters of context, KenLM); probabilities are exact (Predictions.p_correct).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from corpora.corpus import CHARRNN_BATCH
from corpora.errors import run_cli

from .base import Analysis, Claim, Finding, Result, majority
from .common import analysis_main, headline_id, lowest_seeds, report_order, short_label, style
from .context import Context, MissingInput, Needs

TITLE = "Closing braces: the LSTM against the 20-gram by distance to the open brace"
QUESTION = "Does a recurrent net predict a '}' better than a 20-gram when its '{' is far back, and how far back?"
PAPER_SOURCE = "Karpathy et al. (2016), sec 4.3 and Fig 5 left (Linux kernel; qualitative)"
NGRAM_N = 20  # the paper's 20-gram: 20 characters of context
NEEDS = Needs(ngram_n=(NGRAM_N,))  # any corpus of C code (the paper's Linux kernel, or a user's own); prose has no
# braces and gets compute's one line saying so
SETTINGS = {
    "split": "test",  # split scored
    "edges": [1, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 150, 200, 300, 500, 1000],  # bucket starts (characters)
    "min_braces": 20,  # a bucket with fewer braces is merged into the one before it
    "resamples": 1000,  # bootstrap resamples of the braces of a bucket
    "confidence": 0.95,  # bootstrap percentile interval
}
PAPER_CLAIM = (
    "the LSTM beats the 20-gram on '}' at every distance; the gap grows up to a distance of about 60 and stays "
    "roughly constant beyond"
)

# What C hides from the brace structure, and the braces of code, in the order they appear. The regex engine
# takes the leftmost match, so a quote inside a comment, or a comment opener inside a string, is swallowed whole.
_C_TOKENS = re.compile(
    rb"""
      //(?:\\.|[^\\\n])*            # line comment; a backslash-newline continues it
    | /\*.*?\*/                     # block comment
    | "(?:\\.|[^"\\\n])*"           # string literal, on one line
    | '(?:\\.|[^'\\\n]){1,8}'       # character literal (short: an apostrophe in stray prose is not one)
    | [{}]                          # a brace of code
    """,
    re.S | re.X,
)


@dataclass
class Braces:
    """The closing braces of a text matched to their opening ones."""

    close: np.ndarray  # (K,) position of each matched '}' in the text
    distance: np.ndarray  # (K,) its position minus its '{''s
    unmatched: int  # '}' of code with no open '{' before them (their '{' precedes the text): dropped
    unclosed: int  # '{' of code still open at the end
    hidden: int  # '}' inside comments, strings and character literals: not read


def match_braces(text: bytes, piece_length: int | None = None) -> Braces:
    """Match every '}' of C code in `text` to its '{' with a stack; `piece_length`: match each piece on its own."""
    length = piece_length or max(len(text), 1)
    close, distance, unmatched, unclosed, code_closes = [], [], 0, 0, 0
    for start in range(0, len(text), length):
        stack = []
        for token in _C_TOKENS.finditer(text, start, min(start + length, len(text))):
            if token.group() == b"{":
                stack.append(token.start())
            elif token.group() == b"}":
                code_closes += 1
                if stack:
                    opened = stack.pop()
                    close.append(token.start())
                    distance.append(token.start() - opened)
                else:
                    unmatched += 1
        unclosed += len(stack)
    return Braces(
        close=np.asarray(close, dtype=np.int64), distance=np.asarray(distance, dtype=np.int64),
        unmatched=unmatched, unclosed=unclosed, hidden=text.count(b"}") - code_closes,
    )  # fmt: skip


def split_braces(ctx: Context, row: pd.Series, split: str = "test") -> Braces:
    """The matched closing braces of a corpus's split (char-rnn splits matched piece by piece)."""
    corpus = ctx.corpus(row)
    text = ctx.text(row, split)
    piece = len(text) // CHARRNN_BATCH if corpus.split_mode == "charrnn" else None
    return match_braces(text, piece)


def _no_braces(row: pd.Series) -> MissingInput:
    return MissingInput(
        f"no braces: the {row['corpus']} test split has no matched braces of C code (brace_distance reads C): train "
        "models on C text (the Linux kernel: `python -m reports --profile quick`, or "
        "`python -m charlm.train --corpus linux`, or your own C file with --corpus PATH)"
    )


def brace_advantage(ctx: Context, row: pd.Series, min_distance: int = 1, split: str = "test") -> float:
    """Mean p('}') of a model minus the 20-gram's over the matched closing braces of its corpus's split that lie at
    least `min_distance` characters after their '{' (default 1: all of them). The number other analyses cite
    (the ladder); MissingInput when the corpus has no such brace or no 20-gram."""
    braces = split_braces(ctx, row, split)
    far = braces.close[braces.distance >= min_distance]
    if far.size == 0:
        raise _no_braces(row)
    ngram = ctx.baseline("ngram", row["corpus_key"], NGRAM_N)
    rows = far - 1  # prediction row t is the distribution over character t + 1
    return float((ctx.predictions(row, split).p_correct[rows] - ctx.predictions(ngram, split).p_correct[rows]).mean())


def buckets(distance: np.ndarray, edges: list[int], min_braces: int) -> np.ndarray:
    """Bucket starts: `edges` up to the longest distance, a bucket with fewer than `min_braces` merged into the
    one before it (the first into the one after). Every distance falls in a bucket, and no bucket is empty
    (whatever `min_braces`), so each has a mean and an interval: repeated edges count once."""
    starts = [int(e) for e in sorted(set(edges)) if e <= distance.max()] or [int(distance.min())]
    starts[0] = min(starts[0], int(distance.min()))
    while len(starts) > 1:
        counts = np.bincount(np.searchsorted(starts, distance, side="right") - 1, minlength=len(starts))
        small = np.flatnonzero(counts < max(min_braces, 1))
        if small.size == 0:
            break
        k = int(small[0])
        del starts[k if k > 0 else 1]  # merge into the previous bucket (the first into the next)
    return np.asarray(starts)


def bootstrap_interval(values: np.ndarray, resamples: int, confidence: float, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (resampling the braces)."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, values.size, (resamples, values.size))].mean(axis=1)  # (resamples,)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def compute(ctx: Context) -> pd.DataFrame:
    """One row per (corpus, model, distance bucket): braces, mean p('}') of the model and the 20-gram, their
    difference with a bootstrap interval. Corpora without braces are skipped; none at all is a MissingInput."""
    s = ctx.settings
    split, resamples, confidence = s["split"], int(s["resamples"]), float(s["confidence"])
    rows, skipped = [], []
    for key, models in ctx.models().groupby("corpus_key"):
        braces = split_braces(ctx, models.iloc[0], split)
        if braces.close.size == 0:
            skipped.append(models.iloc[0])
            continue
        ngram_preds = ctx.predictions(ctx.baseline("ngram", key, NGRAM_N), split)
        at = braces.close - 1  # (K,) prediction rows of the matched '}'
        p_ngram, ngram_ce = ngram_preds.p_correct[at], float(ngram_preds.nll.mean())
        del ngram_preds
        starts = buckets(braces.distance, s["edges"], int(s["min_braces"]))
        bucket = np.searchsorted(starts, braces.distance, side="right") - 1  # (K,)
        ends = np.append(starts[1:], braces.distance.max() + 1)
        per_model = []  # (model, its cross-entropy, (K,) its p('}')): not whole Predictions, a few MB per model
        for _, model in lowest_seeds(models).iterrows():
            preds = ctx.predictions(model, split)
            per_model.append((model, float(preds.nll.mean()), preds.p_correct[at]))
        best = headline_id(lowest_seeds(models))  # the one headline rule (charlm.plan)
        for model, ce, p_model in per_model:
            diff = p_model - p_ngram
            for b, (lo, hi) in enumerate(zip(starts, ends)):
                inside = bucket == b
                low, high = bootstrap_interval(diff[inside], resamples, confidence, seed=b)
                rows.append({
                    "corpus": model["corpus"], "model": short_label(model), "arch": model["arch"],
                    "layers": int(model["layers"]), "size": int(model["size"]), "budget": model["budget"],
                    "seed": int(model["seed"]), "headline": model["model_id"] == best, "model_ce": ce,
                    "ngram_ce": ngram_ce, "bucket": f"{lo}-{hi - 1}", "distance_from": int(lo),
                    "distance_to": int(hi - 1), "median_distance": float(np.median(braces.distance[inside])),
                    "braces": int(inside.sum()), "p_model": float(p_model[inside].mean()),
                    "p_ngram": float(p_ngram[inside].mean()), "advantage": float(diff[inside].mean()),
                    "ci_low": low, "ci_high": high, "matched": int(braces.close.size), "unmatched": braces.unmatched,
                    "unclosed": braces.unclosed, "hidden": braces.hidden, "model_id": model["model_id"],
                    "group_id": model["group_id"],
                })  # fmt: skip
    if not rows:
        raise _no_braces(skipped[0])
    return report_order(pd.DataFrame(rows), "model", "distance_from").reset_index(drop=True)


# ------------------------------------------------------------------------------------- the numbers a reader wants


def overall(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (corpus, model): the advantage over all matched braces (brace-weighted mean of the buckets)."""
    weighted = df.assign(w_adv=df["advantage"] * df["braces"], w_model=df["p_model"] * df["braces"],
                         w_ngram=df["p_ngram"] * df["braces"])  # fmt: skip
    keys = ["corpus", "model", "arch", "headline", "model_ce", "ngram_ce", "matched", "unmatched", "unclosed", "hidden"]
    out = weighted.groupby(keys, sort=False)[["w_adv", "w_model", "w_ngram", "braces"]].sum().reset_index()
    return out.assign(
        advantage=out["w_adv"] / out["braces"], p_model=out["w_model"] / out["braces"],
        p_ngram=out["w_ngram"] / out["braces"],
    ).drop(columns=["w_adv", "w_model", "w_ngram"])  # fmt: skip


# ------------------------------------------------------------------------------------- findings

PLATEAU_AT = 60  # Fig 5 left: "the performance difference increases up to a distance of 60"
FLAT = 0.5  # beyond PLATEAU_AT the gap "remains relatively constant": no trend, |Spearman rho| below this


def _spearman(x: pd.Series, y: pd.Series) -> float:
    """Spearman's rank correlation (NaN for fewer than 3 points; 0 for a constant advantage: no trend)."""
    if len(x) < 3:
        return float("nan")
    y = y.round(6)  # differences below a millionth of a probability are ties, not a trend
    if y.nunique() == 1:
        return 0.0
    return float(x.rank().corr(y.rank()))


def _weighted(part: pd.DataFrame) -> float:
    """The brace-weighted mean advantage of some buckets (NaN for none)."""
    return float(np.average(part["advantage"], weights=part["braces"])) if len(part) else float("nan")


def summary(df: pd.DataFrame, confidence: float) -> pd.DataFrame:
    """One row per corpus: the headline model's advantage over the 20-gram by distance bucket (how many buckets it
    leads, its trend below and beyond PLATEAU_AT), the braces read, and the spread over the configurations. Every
    number a finding states is here."""
    totals = overall(df)
    rows = []
    for corpus, sub in df.groupby("corpus", sort=False):
        head = sub[sub["headline"]].sort_values("distance_from")
        h = totals[(totals["corpus"] == corpus) & totals["headline"]].iloc[0]
        near, far = head[head["distance_to"] < PLATEAU_AT], head[head["distance_from"] >= PLATEAU_AT]
        peak = head.loc[head["advantage"].idxmax()]
        configs = totals[totals["corpus"] == corpus]
        best, worst = configs.loc[configs["advantage"].idxmax()], configs.loc[configs["advantage"].idxmin()]
        rows.append({
            "corpus": corpus, "model": h["model"], "arch": h["arch"], "layers": int(head["layers"].iloc[0]),
            "size": int(head["size"].iloc[0]), "model_ce": h["model_ce"], "ngram_n": NGRAM_N,
            "ngram_ce": h["ngram_ce"], "matched": int(h["matched"]), "unmatched": int(h["unmatched"]),
            "unclosed": int(h["unclosed"]), "hidden": int(h["hidden"]), "p_model": h["p_model"],
            "p_ngram": h["p_ngram"], "advantage": h["advantage"], "buckets": len(head),
            "ahead": int((head["advantage"] > 0).sum()), "ci_above": int((head["ci_low"] > 0).sum()),
            "ci_below": int((head["ci_high"] < 0).sum()), "confidence": confidence,
            "min_braces": int(head["braces"].min()), "plateau_at": PLATEAU_AT, "flat": FLAT,
            "near_buckets": len(near), "far_buckets": len(far), "near_adv": _weighted(near), "far_adv": _weighted(far),
            "rho_near": _spearman(near["distance_from"], near["advantage"]),
            "rho_far": _spearman(far["distance_from"], far["advantage"]),
            "peak_bucket": peak["bucket"], "peak_adv": peak["advantage"], "configs": len(configs),
            "configs_ahead": int((configs["advantage"] > 0).sum()), "best_model": best["model"],
            "best_adv": best["advantage"], "worst_model": worst["model"], "worst_adv": worst["advantage"],
        })  # fmt: skip
    return pd.DataFrame(rows)


def findings(summ: pd.DataFrame) -> list[Finding]:
    """Per corpus with braces: Fig 5 left's two readings (the claims), then what the paper did not ask (new)."""
    out = []
    for _, s in summ.iterrows():
        v = {k: x for k, x in s.items() if not (isinstance(x, float) and np.isnan(x))}
        corpus = s["corpus"]
        # ahead: reproduced when the model's mean p('}') beats the 20-gram's in every bucket; partly in at least half
        out.append(Finding(
            "{corpus}: the {model}'s mean p('}}') beats the {ngram_n}-gram's in {ahead} of {buckets} distance "
            "buckets ({ci_above} with the whole {confidence:.0%} interval above zero), against the paper's every one",
            v, majority(int(s["ahead"]), int(s["buckets"])), "bd-fig5-ahead", corpus))  # fmt: skip
        # grows then flat: the advantage rises with distance below PLATEAU_AT (Spearman rho > 0 over those buckets)
        # and shows no trend beyond (|rho| < FLAT); reproduced when both hold, partly when one does
        if pd.isna(s["rho_near"]) or pd.isna(s["rho_far"]):
            out.append(Finding(
                "{corpus}: {near_buckets} distance buckets below {plateau_at} characters and {far_buckets} beyond: "
                "too few to see a trend", v, "untested", "bd-fig5-grows", corpus))  # fmt: skip
        else:
            holds = int(s["rho_near"] > 0) + int(abs(s["rho_far"]) < FLAT)
            out.append(Finding(
                "{corpus}: the advantage's rank correlation with distance is {rho_near:+.2f} below {plateau_at} "
                "characters and {rho_far:+.2f} beyond (mean {near_adv:+.3f}, then {far_adv:+.3f}), against the "
                "paper's rise to {plateau_at}, then flat", v, majority(holds, 2), "bd-fig5-grows", corpus))  # fmt: skip
        out.append(Finding(
            "{corpus}: over its {matched} matched closing braces the {model} gives p('}}') {p_model:.3f} against the "
            "{ngram_n}-gram's {p_ngram:.3f}; the largest gap, {peak_adv:+.3f}, at distances {peak_bucket}", v,
            corpus=corpus))  # fmt: skip
        if s["model_ce"] > s["ngram_ce"]:
            out.append(
                Finding(
                    "{corpus}: the {model} trails the {ngram_n}-gram overall ({model_ce:.3f} against {ngram_ce:.3f} "
                    "nats/char)" + (" yet leads on closing braces" if s["advantage"] > 0 else ""),
                    v,
                    corpus=corpus,
                )
            )
        out.append(Finding(
            "{corpus}: over all braces {configs_ahead} of {configs} configurations beat the {ngram_n}-gram; best "
            "{best_model} {best_adv:+.3f}, worst {worst_model} {worst_adv:+.3f}", v, corpus=corpus))  # fmt: skip
        out.append(Finding(
            "{corpus}: {unmatched} closing braces whose '{{' lies before the split are dropped, {hidden} inside "
            "comments or literals not read", v, corpus=corpus))  # fmt: skip
    return out


def input_only(df: pd.DataFrame) -> pd.DataFrame:
    """Issue 39, "do they close braces?": per corpus and minimal RNN (minGRU, minLSTM: gates and content read the
    input alone), its brace-weighted advantage over the 20-gram on every matched '}' and on those at least PLATEAU_AT
    characters from their '{', beside the LSTM of its depth and budget row (absent: NaN)."""
    from charlm import archs

    cols = ["corpus", "model", "arch", "layers", "braces", "advantage", "far_braces", "far_adv", "plateau_at",
            "lstm", "lstm_advantage", "lstm_far_adv"]  # fmt: skip
    rows = []
    df = df.assign(_row=df["budget"].astype(object).where(df["budget"].notna(), ""))  # the budget row, "" unknown

    def advantages(part: pd.DataFrame) -> tuple[int, float, int, float]:
        far = part[part["distance_from"] >= PLATEAU_AT]
        return int(part["braces"].sum()), _weighted(part), int(far["braces"].sum()), _weighted(far)

    minimal = df[df["arch"].isin(archs.names(family="min"))]
    for (corpus, model), part in minimal.groupby(["corpus", "model"], sort=False):
        first = part.iloc[0]
        braces, adv, far_braces, far_adv = advantages(part)
        row = {"corpus": corpus, "model": model, "arch": first["arch"], "layers": int(first["layers"]),
               "braces": braces, "advantage": adv, "far_braces": far_braces, "far_adv": far_adv,
               "plateau_at": PLATEAU_AT}  # fmt: skip
        lstm = df[(df["corpus"] == corpus) & (df["arch"] == "lstm") & (df["layers"] == first["layers"])
                  & (df["_row"] == first["_row"])]  # fmt: skip
        if len(lstm):
            name = lstm["model"].iloc[0]
            _, row["lstm_advantage"], _, row["lstm_far_adv"] = advantages(lstm[lstm["model"] == name])
            row["lstm"] = name
        rows.append(row)
    return pd.DataFrame(rows).reindex(columns=cols)


def input_only_findings(table: pd.DataFrame) -> list[Finding]:
    """One sentence per minimal RNN: its advantage on closing braces, near and far, beside its LSTM's (new)."""
    out = []
    for _, r in table.iterrows():
        v = {k: x for k, x in r.items() if not (isinstance(x, float) and np.isnan(x))}
        text = "{corpus}: the {model}'s p('}}') minus the 20-gram's: {advantage:+.3f} over all braces"
        text += ", {far_adv:+.3f} from {plateau_at} characters on" if "far_adv" in v else ""
        if "lstm" in v:
            text += "; the {lstm}'s {lstm_advantage:+.3f}" + (", {lstm_far_adv:+.3f}" if "lstm_far_adv" in v else "")
        out.append(Finding(text, v, corpus=r["corpus"]))
    return out


FAMILIES = {"lstm": "LSTMs", "gru": "GRUs", "gru-paper": "GRUs", "rnn": "RNNs"}  # the rest: Levy's ablations, others


def by_bucket(df: pd.DataFrame) -> pd.DataFrame:
    """The section's table: per corpus and distance bucket, the 20-gram's p('}'), the headline model's and its
    advantage with its interval, and the mean advantage of the LSTM, GRU, RNN and other configurations."""
    df = df.assign(family=df["arch"].map(FAMILIES).fillna("others"))
    out = []
    for (corpus, bucket), sub in df.groupby(["corpus", "bucket"], sort=False):
        h = sub[sub["headline"]].iloc[0]
        row = {"corpus": corpus, "distance": bucket, "braces": int(h["braces"]),
               "20-gram p('}')": round(h["p_ngram"], 3), "headline p('}')": round(h["p_model"], 3),
               "headline − 20-gram": round(h["advantage"], 3),
               "interval": f"[{h['ci_low']:+.3f}, {h['ci_high']:+.3f}]"}  # fmt: skip
        for family in ("LSTMs", "GRUs", "RNNs", "others"):
            group = sub[sub["family"] == family]
            if len(group):
                row[f"{family}, mean"] = round(group["advantage"].mean(), 3)
        out.append(row)
    return pd.DataFrame(out)


def per_model_view(df: pd.DataFrame) -> pd.DataFrame:
    """The appendix: per configuration, its advantage in each distance bucket and over all braces."""
    wide = df.pivot_table(index=["corpus", "model"], columns="bucket", values="advantage", sort=False).reset_index()
    totals = overall(df)[["corpus", "model", "model_ce", "advantage"]].rename(
        columns={"model_ce": "nats/char", "advantage": "all braces"}
    )
    return totals.merge(wide, on=["corpus", "model"]).round(3)


# ------------------------------------------------------------------------------------- figure

TYPE_COLORS = {"lstm": "#d62728", "gru": "#2ca02c", "gru-paper": "#2ca02c", "rnn": "#1f77b4"}  # the rest: grey


def plot(df: pd.DataFrame, confidence: float = 0.95):
    """Per corpus, Fig 5 left: the headline model's advantage over the 20-gram by distance bucket with bootstrap
    intervals (left), and every configuration's, coloured by type (right)."""
    style()
    corpora_ = list(dict.fromkeys(df["corpus"]))
    fig, axes = plt.subplots(len(corpora_), 2, figsize=(7.5, min(9.0, 3.4 * len(corpora_))), squeeze=False)
    for (ax_head, ax_all), corpus in zip(axes, corpora_):
        sub = df[df["corpus"] == corpus]
        head = sub[sub["headline"]].sort_values("distance_from")
        name = head["model"].iloc[0]
        x = np.arange(len(head))
        ax_head.bar(x, head["advantage"], color="#d62728", alpha=0.8,
                    yerr=[head["advantage"] - head["ci_low"], head["ci_high"] - head["advantage"]], capsize=2,
                    error_kw={"lw": 0.8})  # fmt: skip
        ax_head.axhline(0, color="black", lw=0.8)
        ax_head.set_xticks(x, head["bucket"], fontsize=7, rotation=60)
        ax_head.tick_params(axis="y", labelsize=7)
        ax_head.set_xlabel("distance from '{' to its '}' (characters)", fontsize=7.5)
        ax_head.set_ylabel(f"mean p('}}'): model − {NGRAM_N}-gram", fontsize=7.5)
        ax_head.set_title(f"{corpus}: {name} ({confidence:.0%} bootstrap intervals)", fontsize=8)
        for _, group in sub.groupby("model", sort=False):
            group = group.sort_values("distance_from")
            is_head = bool(group["headline"].iloc[0])
            ax_all.plot(group["median_distance"], group["advantage"], color=TYPE_COLORS.get(group["arch"].iloc[0],
                        "#7f7f7f"), lw=2.0 if is_head else 0.8, alpha=1.0 if is_head else 0.6, marker="o",
                        ms=3 if is_head else 1.5, zorder=3 if is_head else 2)  # fmt: skip
        ax_all.axhline(0, color="black", lw=0.8)
        ax_all.axvline(PLATEAU_AT, color="grey", ls=":", lw=1)
        ax_all.text(PLATEAU_AT, 0.97, f" {PLATEAU_AT}: the paper's plateau", fontsize=7, color="grey", va="top",
                    transform=ax_all.get_xaxis_transform())  # fmt: skip
        ax_all.set_xscale("log")
        ax_all.tick_params(labelsize=7)
        ax_all.set_xlabel("median distance of the bucket (characters, log scale)", fontsize=7.5)
        ax_all.set_ylabel(f"mean p('}}'): model − {NGRAM_N}-gram", fontsize=7.5)
        ax_all.set_title(f"{corpus}: every configuration (thick: {name})", fontsize=8)
        shown = dict.fromkeys(TYPE_COLORS.get(a, "#7f7f7f") for a in sub["arch"])
        names = {"#d62728": "LSTM", "#2ca02c": "GRU", "#1f77b4": "RNN", "#7f7f7f": "Levy's ablations, others"}
        ax_all.legend([plt.Line2D([], [], color=c) for c in shown], [names[c] for c in shown], fontsize=7,
                      loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False)  # fmt: skip
    fig.tight_layout()
    return fig


class BraceDistance(Analysis):
    name = "brace_distance"
    title = TITLE
    question = QUESTION
    source = PAPER_SOURCE
    needs = NEEDS
    settings = SETTINGS
    claims = (
        Claim("bd-fig5-ahead", "Karpathy et al. (2016) sec 4.3, Fig 5 left",
              "the LSTM consistently outperforms the 20-gram at predicting closing braces", "at every distance"),
        Claim("bd-fig5-grows", "Karpathy et al. (2016) sec 4.3, Fig 5 left",
              "the difference increases up to a distance of 60, then remains relatively constant", "60 characters"),
    )  # fmt: skip
    shows = (
        "Fig 5 left: the headline LSTM's mean probability of each closing brace minus the 20-gram's, by the distance "
        "to the matching open brace, with bootstrap intervals, beside every configuration's curve."
    )
    deviations = (
        "Braces are matched as C: those inside comments, strings and character literals are neither matched nor read.",
        "The test split starts mid-file, so a '}' whose '{' lies before it is dropped; until the lexer meets the end "
        "of a comment the split starts inside, that comment is read as code.",
        "Buckets are 10 characters wide up to 100 (where the paper's claims are), then roughly log-spaced; a bucket "
        "with fewer than `min_braces` braces is merged into the one before it.",
        "The model is the suite's headline LSTM (largest budget row, deepest, lowest seed), not the paper's 3-layer "
        "LSTM of 512 cells.",
    )

    def compute(self, ctx: Context) -> Result:
        df = compute(ctx)
        summ = summary(df, float(ctx.settings["confidence"]))
        minimal = input_only(df)
        return Result(
            df, findings(summ) + input_only_findings(minimal), tables={"summary": summ, "input_only": minimal}
        )

    def plot(self, result: Result):
        summ = result.tables.get("summary")
        confidence = float(summ["confidence"].iloc[0]) if summ is not None and len(summ) else SETTINGS["confidence"]
        return plot(result.table, confidence)

    def summary_table(self, result: Result) -> pd.DataFrame:
        return by_bucket(result.table)

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        return {"every configuration's advantage over the 20-gram by distance bucket": per_model_view(result.table)}

    def paper_table(self) -> pd.DataFrame:
        return pd.DataFrame([{"corpus": "linux", "paper (Fig 5 left)": PAPER_CLAIM}])


ANALYSIS = BraceDistance()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
