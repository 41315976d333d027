"""What does each model write? A sample of every neural model at one temperature, as char-rnn shows them.

Karpathy et al. (2016) compare their models by numbers; char-rnn users (and Karpathy's blog post
"The Unreasonable Effectiveness of Recurrent Neural Networks") compare them first by samples. Every
recurrent model here reads the same prime and samples `length` bytes at one temperature with one
seed (charlm.sample: softmax(log p / T) over the next byte, char-rnn's sample.lua rule). Before the prime
every model reads the same warm-up, the opening `warmup` characters of the validation split cut after their last
line break (not shown, not counted), where char-rnn starts from a zero state: our models train with the state
carried across batches, so a zero state is a state they met once an epoch. The section measures what it costs each
model: the mean nats per character of the warm-up's first ZERO_STATE_CHARS characters read from a zero state, and of
the rest of it (`zero_state_nats`, `after_nats`). The minGRUs pay most (each keeps one unit of its last layer far
from zero, a bias held in the state that a zero start takes some 20 characters to reach; docs/architectures.md), and
sampled from a 4-byte prime alone they wrote one repeated byte. The warm-up the scoring reads
(charlm.predict.WARMUP, 300) puts every model where the report's test numbers measure it.

One number makes the samples comparable: the share of the sample's words (runs of letters, digits, _ and ' starting
with a letter or _; the prime's excluded) that occur in the corpus's train split.

Bytes are bytes: `sample_bytes` keeps each exact sample (prime included) as a Python bytes literal
(`raw_bytes(df)` reads them back); `sample` is its first `show` bytes decoded as UTF-8 with
errors="replace" (a sample can cut a multi-byte character) and CR LF read as one line break, for
display (the report escapes it for HTML).

The section shows the headline model's sample of each corpus and the shares pooled per corpus (best and worst
configuration); every model's sample and share is in the appendix.
"""

from __future__ import annotations

import ast
import re
import sys

import numpy as np
import pandas as pd

from charlm.sample import sample
from charlm.score import score_text
from corpora.errors import run_cli

from .base import Analysis, Finding, Result
from .common import analysis_main, headline_id, short_label
from .context import Context, Needs

TITLE = "Samples from every model"
QUESTION = "What text does each architecture write when sampled like char-rnn?"
PAPER_SOURCE = "Karpathy, The Unreasonable Effectiveness of Recurrent Neural Networks (2015), char-rnn sample.lua"
NEEDS = Needs(predictions=False)
SETTINGS = {
    "length": 1000,  # bytes sampled after the prime (the word share is measured on all of them)
    "show": 300,  # bytes of each sample the report shows (prime included)
    "temperature": 0.8,  # softmax(log p / T): below 1 sharpens the distribution, as char-rnn users usually sample
    "seed": 1,  # the same sampling seed for every model
    "primes": {"warpeace": "The ", "linux": "static int "},  # per corpus; other corpora start from "" (uniform)
    "warmup": 300,  # characters of the validation split's opening every model reads before the prime (see above)
}
ZERO_STATE_CHARS = 50  # the warm-up's first characters read from a zero state, against the rest of it
SECTION_CHARS = 240  # characters of the headline models' samples the section shows (the appendix: `show`)
WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_']*")


def display(data: bytes) -> str:
    """Bytes decoded for reading: UTF-8 with replacement characters, CR LF as one line break."""
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


def warmup(text: bytes, chars: int) -> bytes:
    """The opening `chars` bytes of `text`, cut after their last line break (the whole of them where there is none),
    so that the prime starts a line."""
    head = text[:chars]
    end = head.rfind(b"\n")
    return head[: end + 1] if end >= 0 else head


def measure(ctx: Context) -> pd.DataFrame:
    s = ctx.settings
    rows = []
    models = ctx.models()
    for corpus_key in models["corpus_key"].unique():
        train_words = set(WORD.findall(ctx.text(corpus_key, "train")))
        warm = warmup(ctx.text(corpus_key, "val"), int(s["warmup"]))
        for _, row in models[models["corpus_key"] == corpus_key].iterrows():
            prime = s["primes"].get(row["corpus"], "").encode()
            if not set(prime) <= set(ctx.corpus(row).vocab.tolist()):  # a file of that name without the prime's bytes
                prime = b""  # starts uniform, as a corpus without a prime does
            model = ctx.model(row)
            text = sample(model, int(s["length"]), float(s["temperature"]), warm + prime, int(s["seed"]))
            nll = -score_text(model, warm, streams=1).logp if len(warm) > ZERO_STATE_CHARS + 1 else np.array([])
            words = WORD.findall(text)  # the prime's words are not the model's
            rows.append({
                "corpus": row["corpus"], "model": short_label(row),
                "group_id": row["group_id"], "arch": row["arch"], "model_seed": int(row["seed"]),
                "model_id": row["model_id"], "temperature": float(s["temperature"]), "seed": int(s["seed"]),
                "length": int(s["length"]), "warmup": len(warm), "prime": display(prime),
                "sample": display((prime + text)[: int(s["show"])]), "sample_bytes": repr(prime + text),
                "words": len(words), "known_words": sum(w in train_words for w in words),
                "zero_state_nats": nll[:ZERO_STATE_CHARS].mean() if nll.size else np.nan,
                "after_nats": nll[ZERO_STATE_CHARS:].mean() if nll.size else np.nan,
            })  # fmt: skip
    cols = ["corpus", "model", "group_id", "arch", "model_seed", "model_id", "temperature", "seed", "length", "warmup",
            "prime", "sample", "sample_bytes", "words", "known_words", "zero_state_nats", "after_nats"]  # fmt: skip
    return pd.DataFrame(rows, columns=cols).sort_values(["corpus", "model", "model_seed"], ignore_index=True)


def raw_bytes(df: pd.DataFrame) -> list[bytes]:
    """The exact samples (prime included) from the table's `sample_bytes` column."""
    return [ast.literal_eval(b) for b in df["sample_bytes"]]


def known_shares(df: pd.DataFrame) -> pd.DataFrame:
    """Per corpus and model configuration (seeds pooled within one group_id): the share of sampled words found in
    the train split and its binomial std."""
    g = df.groupby(["corpus", "group_id", "model"], as_index=False)[["known_words", "words"]].sum()
    g["share"] = g["known_words"] / g["words"].where(g["words"] > 0)
    g["std"] = np.sqrt(g["share"] * (1 - g["share"]) / g["words"].where(g["words"] > 0))
    return g.sort_values(["corpus", "share"], ascending=[True, False], ignore_index=True)


def per_corpus(df: pd.DataFrame, shares: pd.DataFrame) -> pd.DataFrame:
    """Per corpus: the sampling settings, every model's words pooled (the share found in the train split), the best
    and the worst configuration, and the headline model's share (analyses.common.headline_id)."""
    rows = []
    for corpus, sub in df.groupby("corpus", sort=True):
        g = shares[(shares["corpus"] == corpus) & shares["share"].notna()]
        words = int(sub["words"].sum())
        row = {
            "corpus": corpus,
            "models": len(sub),
            "configurations": len(g),
            "words": words,
            "known_words": int(sub["known_words"].sum()),
            "temperature": sub["temperature"].iloc[0],
            "length": int(sub["length"].iloc[0]),
            "seed": int(sub["seed"].iloc[0]),
            "prime": sub["prime"].iloc[0],
        }
        row["share"] = row["known_words"] / words if words else np.nan
        if len(g):
            best, worst = g.loc[g["share"].idxmax()], g.loc[g["share"].idxmin()]
            row.update({"best": best["model"], "best_share": best["share"], "worst": worst["model"],
                        "worst_share": worst["share"]})  # fmt: skip
        head = sub[sub["model_id"] == sub["headline_id"].iloc[0]] if "headline_id" in sub else sub[:0]
        if len(head) and head["words"].iloc[0] > 0:
            row.update({"headline": head["model"].iloc[0],
                        "headline_share": head["known_words"].iloc[0] / head["words"].iloc[0]})  # fmt: skip
        zero = sub[sub["zero_state_nats"].notna()]
        if len(zero):
            slow = zero.loc[zero["zero_state_nats"].idxmax()]
            row.update({"zero_chars": ZERO_STATE_CHARS, "slowest": slow["model"],
                        "slowest_zero": slow["zero_state_nats"], "slowest_after": slow["after_nats"],
                        "median_zero": zero["zero_state_nats"].median(),
                        "median_after": zero["after_nats"].median()})  # fmt: skip
        rows.append(row)  # fmt: skip
    return pd.DataFrame(rows)


def findings(summary: pd.DataFrame) -> list[Finding]:
    """Per corpus: the pooled share of known words, the best and the worst configuration, the headline model."""
    out = []
    for _, r in summary.iterrows():
        v = {k: r[k] for k in r.index if not (isinstance(r[k], float) and np.isnan(r[k]))}
        if pd.isna(r["share"]):
            out.append(Finding("{corpus}: the samples of the {models} models hold no word", v, corpus=r["corpus"]))
            continue
        text = (
            "{corpus}: {share:.0%} of the words sampled at temperature {temperature:g} occur in the train split "
            "({models} models pooled)"
        )
        if "best" in v and r["best"] != r["worst"]:
            text += ", from {worst_share:.0%} ({worst}) to {best_share:.0%} ({best})"
        out.append(Finding(text, v, corpus=r["corpus"]))
        if "headline" in v:
            out.append(Finding("{corpus}: the headline {headline} writes {headline_share:.0%} known words", v,
                               corpus=r["corpus"]))  # fmt: skip
        if "slowest" in v:
            out.append(Finding(
                "{corpus}: from a zero state the first {zero_chars} characters cost {median_zero:.2f} nats each "
                "(median model; the rest of the warm-up {median_after:.2f}), the {slowest}'s {slowest_zero:.2f} "
                "({slowest_after:.2f})", v, corpus=r["corpus"]))  # fmt: skip
    return out


def report_table(df: pd.DataFrame) -> pd.DataFrame:
    """What a reader needs beside each sample: the model, its seed, the word share; the exact bytes stay in the CSV."""
    table = df[["corpus", "model", "model_seed", "temperature", "seed", "known_words", "words", "sample"]].copy()
    table["known_words"] = table["known_words"] / table["words"].where(table["words"] > 0)
    return table.rename(columns={"known_words": "known_word_share", "seed": "sampling_seed"})


class Samples(Analysis):
    name = "samples"
    title = TITLE
    question = QUESTION
    source = PAPER_SOURCE
    settings = SETTINGS
    needs = NEEDS
    shows = ""  # no figure: the samples are the result
    deviations = (
        "Karpathy's samples are chosen to illustrate; ours are one sample per model with one seed and one temperature, "
        "so a share separates models only where they differ by several binomial stds.",
        "char-rnn samples from a zero state; every model here first reads the opening of the validation split (up to "
        "300 characters, cut after a line break), as the test numbers' streams do: trained with the state carried "
        "across batches, a model meets a zero state once an epoch, and what it costs is measured below; the minGRUs, "
        "sampled from the prime alone, wrote one repeated byte.",
        "A known word is a run of letters, digits, _ and ' starting with a letter or _ that occurs in the train split: "
        "a crude measure of well-formed text, blind to grammar and to code's syntax.",
    )

    def compute(self, ctx: Context) -> Result:
        df = measure(ctx)
        shares = known_shares(df)
        heads = {c: headline_id(m) for c, m in ctx.models().groupby("corpus")}
        summary = per_corpus(df.assign(headline_id=df["corpus"].map(heads)), shares)
        return Result(df, findings(summary), tables={"shares": shares, "corpora": summary})

    def summary_table(self, result: Result) -> pd.DataFrame:
        """The headline model's sample on each corpus, cut to SECTION_CHARS characters, with its known-word share."""
        df, summary = result.table, result.tables["corpora"]
        rows = []
        for _, r in summary.iterrows():
            if pd.isna(r.get("headline", np.nan)):
                continue
            head = df[(df["corpus"] == r["corpus"]) & (df["model"] == r["headline"])].iloc[0]
            text = head["sample"] if isinstance(head["sample"], str) else ""
            cut = text[:SECTION_CHARS] + ("…" if len(text) > SECTION_CHARS else "")
            rows.append({"corpus": r["corpus"], "model": r["headline"], "seed": int(head["model_seed"]),
                         "known words": f"{r['headline_share']:.0%}", "sample (start)": cut})  # fmt: skip
        return pd.DataFrame(rows)

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        return {"known-word share per configuration (seeds pooled, binomial std)": result.tables["shares"],
                "every model's sample": report_table(result.table)}  # fmt: skip


ANALYSIS = Samples()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
