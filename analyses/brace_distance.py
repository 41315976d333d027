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
import seaborn as sns

from corpora.corpus import CHARRNN_BATCH
from corpora.errors import run_cli

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


def with_paper(df: pd.DataFrame) -> pd.DataFrame:
    """The report's table: one row per bucket, the 20-gram's p('}') and each model's advantage over it (the headline
    model's with its interval); the paper's finding in the last column."""
    out = []
    for (corpus, bucket), sub in df.groupby(["corpus", "bucket"], sort=False):
        row = {"corpus": corpus, "distance": bucket, "braces": int(sub["braces"].iloc[0]),
               "20-gram p('}')": sub["p_ngram"].iloc[0]}  # fmt: skip
        for _, r in sub.iterrows():
            interval = f" [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]" if r["headline"] else ""
            row[r["model"]] = f"{r['advantage']:+.3f}{interval}"
        out.append(row)
    table = pd.DataFrame(out)
    table["paper"] = ""
    table.loc[table.groupby("corpus").head(1).index, "paper"] = "LSTM ahead at every distance, growing up to 60"
    return table


def caption(df: pd.DataFrame) -> str:
    parts = []
    totals = overall(df)
    for corpus, sub in df.groupby("corpus", sort=False):
        head = sub[sub["headline"]].sort_values("distance_from")
        h = totals[(totals["corpus"] == corpus) & totals["headline"]].iloc[0]
        near, far = head[head["distance_to"] < 60], head[head["distance_from"] >= 60]
        first, best = head.iloc[0], head.loc[head["advantage"].idxmax()]
        at60 = head[(head["distance_from"] <= 60) & (head["distance_to"] >= 60)]
        rise = (
            f"from {first['advantage']:+.3f} at distances {first['bucket']} to {at60['advantage'].iloc[0]:+.3f} at "
            f"{at60['bucket'].iloc[0]}"
            if len(at60) and at60.index[0] != head.index[0]
            else f"{first['advantage']:+.3f} at distances {first['bucket']}"
        )
        parts.append(
            f"On {corpus}, {int(h['matched']):,} closing braces of the test split are matched to their '{{' "
            f"({int(h['unmatched'])} whose '{{' lies before the split are dropped, {int(h['hidden'])} inside comments "
            f"or literals are not read). The {h['model']} ({h['model_ce']:.3f} nats/char, 20-gram "
            f"{h['ngram_ce']:.3f}) gives a '}}' {h['p_model']:.3f} on average against the 20-gram's "
            f"{h['p_ngram']:.3f}, an advantage of {h['advantage']:+.3f}; it is ahead in "
            f"{int((head['ci_low'] > 0).sum())} of {len(head)} distance buckets with the whole interval above zero, "
            f"and behind with the whole interval below zero in {int((head['ci_high'] < 0).sum())}. Its advantage goes "
            f"{rise} (largest at {best['bucket']}: {best['advantage']:+.3f}); mean over the buckets below 60 "
            f"{near['advantage'].mean():+.3f}, from 60 on {far['advantage'].mean():+.3f}."
        )
        others = totals[(totals["corpus"] == corpus)].sort_values("advantage", ascending=False)
        parts.append(
            "Over all matched braces, by architecture: "
            + ", ".join(f"{r['model']} {r['advantage']:+.3f}" for _, r in others.iterrows())
            + "."
        )
        if h["model_ce"] > h["ngram_ce"]:
            parts.append(
                f"The {h['model']} is weaker than the 20-gram overall ({h['model_ce']:.3f} against "
                f"{h['ngram_ce']:.3f} nats/char): it may not have learned the brace structure the paper's 3-layer LSTM "
                "of 512 had."
            )
    parts.append(
        f"Paper (Fig 5 left): {PAPER_CLAIM}. Intervals: {int(df['braces'].min())}+ braces per bucket, 95% "
        "percentile bootstrap over the braces."
    )
    return " ".join(parts)


def summary(df: pd.DataFrame) -> str:
    items = []
    for _, h in overall(df).query("headline").iterrows():
        items.append(
            f"{h['corpus']}: {h['model']} p('}}') {h['p_model']:.2f} vs 20-gram {h['p_ngram']:.2f} "
            f"({h['advantage']:+.2f}, {int(h['matched']):,} braces)"
        )
    return "; ".join(items) + " (paper: the LSTM ahead at every distance, the gap growing up to 60)"


def notes(df: pd.DataFrame) -> list[str]:
    return [
        "Buckets are 10 characters wide up to 100 (where the paper's claims are), then roughly log-spaced up to the "
        "longest distance; a bucket with fewer than `min_braces` braces is merged into the one before it.",
        "Braces inside comments, string and character literals are not matched and not read. The test split starts "
        "mid-file, so braces opened before it are dropped (counted in `unmatched`); until the lexer meets the end of "
        "a comment the split starts inside, that comment is read as code.",
        "`brace_advantage(ctx, row, min_distance)` gives one model's advantage over all matched braces at least "
        "min_distance away (other analyses cite it).",
    ]


def plot(df: pd.DataFrame):
    style()
    corpora_ = list(dict.fromkeys(df["corpus"]))
    fig, axes = plt.subplots(len(corpora_), 2, figsize=(13, 4.2 * len(corpora_)), squeeze=False)
    for (ax_head, ax_all), corpus in zip(axes, corpora_):
        sub = df[df["corpus"] == corpus].copy()
        sub["x"] = sub["median_distance"]
        head = sub[sub["headline"]].sort_values("distance_from")
        name = head["model"].iloc[0]
        ax_head.bar(np.arange(len(head)), head["advantage"], color="#d62728", alpha=0.8,
                    yerr=[head["advantage"] - head["ci_low"], head["ci_high"] - head["advantage"]], capsize=2,
                    error_kw={"lw": 0.8})  # fmt: skip
        ax_head.axhline(0, color="black", lw=0.8)
        ax_head.set_xticks(np.arange(len(head)), [f"{b}\n({n})" for b, n in zip(head["bucket"], head["braces"])],
                           fontsize=6.5, rotation=45)  # fmt: skip
        ax_head.set_xlabel("distance from '{' to its '}' (characters; braces in the bucket)")
        ax_head.set_ylabel(f"mean p('}}'): {name} - 20-gram")
        ax_head.set_title(f"{corpus}: {name} against the 20-gram (95% bootstrap intervals)", fontsize=9)
        order = list(dict.fromkeys(sub["model"]))
        palette = dict(zip(order, sns.color_palette("tab10", len(order))))
        sns.lineplot(data=sub, x="x", y="advantage", hue="model", hue_order=order, palette=palette, marker="o",
                     ax=ax_all, errorbar=None)  # fmt: skip
        ax_all.axhline(0, color="black", lw=0.8)
        ax_all.axvline(60, color="grey", ls=":", lw=1)
        ax_all.text(
            60, 0.02, " 60: the paper's plateau", fontsize=7, color="grey", transform=ax_all.get_xaxis_transform()
        )
        ax_all.set_xscale("log")
        ax_all.set_xlabel("median distance of the bucket (characters, log scale)")
        ax_all.set_ylabel("mean p('}'): model - 20-gram")
        ax_all.set_title(f"{corpus}: every architecture", fontsize=9)
        ax_all.legend(fontsize=7, title=None, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
