"""What does each model write? A sample of every neural model at one temperature, as char-rnn shows them.

Karpathy et al. (2016) compare their models by numbers; char-rnn users (and Karpathy's blog post
"The Unreasonable Effectiveness of Recurrent Neural Networks") compare them first by samples. Every
recurrent model here reads the same prime and samples `length` bytes at one temperature with one
seed (charlm.sample: softmax(log p / T) over the next byte, char-rnn's sample.lua rule). One number
makes the samples comparable: the share of the sample's words (runs of letters, digits, _ and '
starting with a letter or _; the prime's excluded) that occur in the corpus's train split.

Bytes are bytes: `sample_bytes` keeps each exact sample (prime included) as a Python bytes literal
(`raw_bytes(df)` reads them back); `sample` is its first `show` bytes decoded as UTF-8 with
errors="replace" (a sample can cut a multi-byte character) and CR LF read as one line break, for
display (the report escapes it for HTML).
"""

from __future__ import annotations

import ast
import re
import sys

import numpy as np
import pandas as pd

from charlm.sample import sample
from corpora.errors import run_cli

from .common import analysis_main, short_label
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
}
WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_']*")


def display(data: bytes) -> str:
    """Bytes decoded for reading: UTF-8 with replacement characters, CR LF as one line break."""
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


def compute(ctx: Context) -> pd.DataFrame:
    s = ctx.settings
    rows = []
    models = ctx.models()
    for corpus_key in models["corpus_key"].unique():
        train_words = set(WORD.findall(ctx.text(corpus_key, "train")))
        for _, row in models[models["corpus_key"] == corpus_key].iterrows():
            prime = s["primes"].get(row["corpus"], "").encode()
            if not set(prime) <= set(ctx.corpus(row).vocab.tolist()):  # a file of that name without the prime's bytes
                prime = b""  # starts uniform, as a corpus without a prime does
            text = sample(ctx.model(row), int(s["length"]), float(s["temperature"]), prime, int(s["seed"]))
            words = WORD.findall(text)  # the prime's words are not the model's
            rows.append({
                "corpus": row["corpus"], "model": short_label(row),
                "group_id": row["group_id"], "arch": row["arch"], "model_seed": int(row["seed"]),
                "model_id": row["model_id"], "temperature": float(s["temperature"]), "seed": int(s["seed"]),
                "length": int(s["length"]), "prime": display(prime),
                "sample": display((prime + text)[: int(s["show"])]), "sample_bytes": repr(prime + text),
                "words": len(words), "known_words": sum(w in train_words for w in words),
            })  # fmt: skip
    cols = ["corpus", "model", "group_id", "arch", "model_seed", "model_id", "temperature", "seed", "length", "prime",
            "sample", "sample_bytes", "words", "known_words"]  # fmt: skip
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


def report_table(df: pd.DataFrame) -> pd.DataFrame:
    """What a reader needs beside each sample: the model, its seed, the word share; the exact bytes stay in the CSV."""
    table = df[["corpus", "model", "model_seed", "temperature", "seed", "known_words", "words", "sample"]].copy()
    table["known_words"] = table["known_words"] / table["words"].where(table["words"] > 0)
    return table.rename(columns={"known_words": "known_word_share", "seed": "sampling_seed"})


def plot(df: pd.DataFrame):
    return None  # the samples are the result; the report shows them as text


def caption(df: pd.DataFrame) -> str:
    if df.empty:
        return "No neural models to sample from."
    first = df.iloc[0]
    parts = [
        f"Text sampled from each of {len(df)} neural models at temperature {first['temperature']:g} with seed "
        f"{int(first['seed'])}, each after the same prime per corpus (char-rnn's rule: softmax(log p / T) over the "
        f"next byte); the start of each is shown. Known words: the share of the "
        f"words of each {int(first['length']):,}-byte sample (prime excluded) that occur in the train "
        "split, seeds of one configuration pooled, +- its binomial std."
    ]
    for corpus, sub in known_shares(df).groupby("corpus"):
        parts.append(
            f"On {corpus}: "
            + ", ".join(f"{r['model']} {r['share']:.0%} +- {r['std']:.0%}" for _, r in sub.iterrows())
            + "."
        )
    parts.append(
        "A sample is an illustration: the shares separate models only where they differ by several stds; the "
        "cross-entropy sections are the measurement."
    )
    return " ".join(parts)


def summary(df: pd.DataFrame) -> str:
    items = []
    for corpus, sub in known_shares(df).groupby("corpus"):
        items.append(f"{corpus}: " + ", ".join(f"{r['model']} {r['share']:.0%}" for _, r in sub.iterrows()))
    t = df["temperature"].iloc[0] if not df.empty else float("nan")
    return f"words of the samples (T = {t:g}) found in the train split: " + "; ".join(items)


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
