"""Peel the onion: which errors of a model could simpler oracles remove? Karpathy et al. (2016) sec 4.4, Fig 6.

An error is a test character the model gave p(correct) < 0.5 (sec 4.3). The oracles are applied in the
paper's order, each to the errors the earlier ones left; an error belongs to the first oracle that removes it:

1. n-gram: some KenLM n-gram of n = 1..9 previous characters gives the correct character p > 0.5;
2. dynamic n-long memory, n = 100, 500, 1000, 5000: the error is inside a word, from its second character on,
   and the whole word occurs as a substring of the n characters before the word ("Mary ... Mary");
3. rare words, t = 0..5: the error is inside a word (any character of it) that occurs at most t times in
   the training split;
4. word model: the error follows a space, a quote or a newline (choosing the next word);
5. punctuation: the error is on a punctuation character;
6. boost b = 0.1, 0.2, 0.3, 0.4, 0.5: the error goes away when p(correct) is raised by b (p + b >= 0.5), so the
   last boost removes every error left, and the slices sum to all errors, as the paper's pie does.

What a word is, in bytes. A word is a maximal run of word bytes (ASCII letters, digits, the underscore and
every byte >= 0x80, so UTF-8 letters such as the French in War and Peace stay inside their word), where an
apostrophe between two word bytes joins them ("couldn't", "Mary's" are one word each). Hyphens and all other
bytes separate words. A quote is `"`, or `'` not preceded by a word byte (an apostrophe is not a quote).
Newline is `\\n` or `\\r` (War and Peace has CRLF line ends); a tab counts as a space (Linux indents with
tabs). Punctuation is Python's string.punctuation. Words are matched case-sensitively, in the memory oracle as
in the training counts.

The paper subjected its best LSTM and the best LSTM of the smallest budget (50K parameters) to the oracles;
we run every model (every architecture and budget), so the same breakdown is there for each.
"""

from __future__ import annotations

import re
import string
import sys
from collections import Counter

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from charlm.model import ARCH_LABELS
from corpora.errors import UserError, run_cli

from .common import analysis_main, headline_id, report_order, source_digest, style
from .context import Context, Needs

TITLE = "Peeling the onion: error categories"
QUESTION = (
    "Which of a model's errors could a short-context model, a memory of the recent text, more training words, "
    "or a word-level model remove, and which remain?"
)
PAPER_SOURCE = (
    "Karpathy et al. (2016), sec 4.4 and Fig 6 (best War and Peace LSTM: 140K errors of 330K test characters; "
    "n-gram 18 %, memory 6 %, rare words 9 %, word model 37 %; the 50K-parameter LSTM: 184K errors, 81 % of the "
    "44K extra being n-gram errors)"
)
NGRAM_N = tuple(range(1, 10))  # the n-gram oracle's KenLM orders (sec 4.4: n = 1..9)
NEEDS = Needs(ngram_n=NGRAM_N)
SETTINGS = {
    "split": "test",  # split whose errors are peeled
    "error_threshold": 0.5,  # an error is p(correct) below this (sec 4.3)
    "ngram_n": list(NGRAM_N),  # orders of the n-gram oracle (sec 4.4: 1..9)
    "memory_n": [100, 500, 1000, 5000],  # dynamic memory windows in characters (sec 4.4)
    "rare_max": 5,  # rare-word thresholds t = 0..rare_max training occurrences (sec 4.4: 0..5)
    "boosts": [0.1, 0.2, 0.3, 0.4, 0.5],  # amounts added to p(correct) by the boost oracles (not in the paper)
    "examples": 3,  # example strings per model and category
    "context_chars": 30,  # characters shown before an example's error (and a third of that after)
}

WORD_BYTE = rb"[A-Za-z0-9_\x80-\xff]"
WORD = re.compile(WORD_BYTE + rb"+(?:'" + WORD_BYTE + rb"+)*")
WORD_BYTES = np.zeros(256, dtype=bool)
WORD_BYTES[[b for b in range(256) if re.fullmatch(WORD_BYTE, bytes([b]))]] = True
NEWLINE, SPACE = b"\n\r", b" \t"  # a tab separates words as a space does (Linux; War and Peace has none)
PUNCTUATION = string.punctuation.encode()
GROUPS = ["n-gram", "dynamic memory", "rare words", "word model", "punctuation", "boost", "remaining"]
PAPER = {  # sec 4.4, "The error breakdown" and "Errors eliminated by scaling up"
    "best_errors": 140_000, "best_chars": 330_000,
    "best_share": {"n-gram": 18, "dynamic memory": 6, "rare words": 9, "word model": 37},
    "small_errors": 184_000, "small_extra": {"n-gram": 36_000, "boost": 5_000, "other categories": 3_000},
}  # fmt: skip


# ----------------------------------------------------------------------------------------- the oracles


def word_spans(text: bytes) -> np.ndarray:
    """(W, 2) [start, end) byte offsets of every word of `text` (the module docstring defines a word)."""
    spans = [m.span() for m in WORD.finditer(text)]
    return np.array(spans, dtype=np.int64).reshape(-1, 2)


def word_counts(text: bytes) -> Counter:
    """How often each word (bytes, case-sensitive) occurs in `text`."""
    return Counter(WORD.findall(text))


def categories(settings: dict) -> pd.DataFrame:
    """The oracles in the order they are applied: one row per category (its code is its position)."""
    for name in ("ngram_n", "memory_n", "boosts"):
        values = settings[name]
        if not isinstance(values, list) or not values or not all(isinstance(v, (int, float)) and v > 0 for v in values):
            raise UserError(f"onion setting {name} must be a non-empty list of positive numbers, got {values!r}")
    rows = [("n-gram", f"n-gram (n = {min(settings['ngram_n'])}..{max(settings['ngram_n'])})")]
    rows += [("dynamic memory", f"{n}-memory") for n in sorted(settings["memory_n"])]
    rows += [("rare words", f"word {t}-train") for t in range(settings["rare_max"] + 1)]
    rows += [("word model", "word model"), ("punctuation", "punctuation")]
    rows += [("boost", f"boost {b:g}") for b in sorted(settings["boosts"])]
    rows += [("remaining", "remaining")]
    return pd.DataFrame(rows, columns=["group", "category"]).rename_axis("code").reset_index()


def first_oracle(text: bytes, train_counts: Counter, ngram_correct: np.ndarray, settings: dict) -> np.ndarray:
    """(T,) code of the first model-independent oracle that removes an error at each position, -1 if none.

    Position t predicts byte t + 1 of `text` (the Predictions convention). `ngram_correct` (T,) says where some
    n-gram of the oracle gives the correct byte p > 0.5. Codes follow `categories(settings)`.
    """
    n_positions = len(text) - 1
    if ngram_correct.shape != (n_positions,):
        raise UserError(f"n-gram oracle mask has {ngram_correct.size} positions, the text {n_positions}")
    data = np.frombuffer(text, dtype=np.uint8)
    memory_n, rare_max = sorted(settings["memory_n"]), settings["rare_max"]
    spans = word_spans(text)
    starts, lengths = spans[:, 0], spans[:, 1] - spans[:, 0]
    words = [text[a:b] for a, b in spans]
    counts = np.array([train_counts.get(w, 0) for w in words], dtype=np.int64)
    # the latest earlier occurrence of each word within the largest window, as a distance (0: none)
    distance = np.array([a - text.rfind(w, max(0, a - memory_n[-1]), a) if len(w) > 1 else a + 1
                         for w, a in zip(words, starts.tolist())])  # fmt: skip
    found = distance <= starts
    word_memory = np.where(found, 1 + np.searchsorted(memory_n, distance), -1)  # the smallest window n >= distance
    word_rare = np.where(counts <= rare_max, 1 + len(memory_n) + counts, -1)
    # per byte of the text, the oracle that removes an error on it (memory: from a word's second byte on)
    in_word = np.repeat(np.arange(len(words)), lengths)  # (bytes in words,) the word each byte belongs to
    byte = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(lengths.sum())  # their offsets
    memory_code, rare_code = np.full(len(text), -1), np.full(len(text), -1)
    rare_code[byte] = word_rare[in_word]
    second_on = byte != starts[in_word]
    memory_code[byte[second_on]] = word_memory[in_word[second_on]]
    target, previous = data[1:], data[:-1]  # (T,) the byte predicted, and the byte read just before it
    after_quote = (previous == ord('"')) | ((previous == ord("'")) & ~WORD_BYTES[np.r_[0, data[:-2]]])
    word_model = np.isin(previous, list(SPACE + NEWLINE)) | after_quote
    punctuation = np.isin(target, list(PUNCTUATION))
    n_cat = 1 + len(memory_n) + rare_max + 1
    steps = [
        (ngram_correct, np.zeros(n_positions, dtype=np.int64)),
        (memory_code[1:] >= 0, memory_code[1:]),
        (rare_code[1:] >= 0, rare_code[1:]),
        (word_model, np.full(n_positions, n_cat)),
        (punctuation, np.full(n_positions, n_cat + 1)),
    ]
    code = np.full(n_positions, -1, dtype=np.int64)
    for applies, value in steps:  # in the paper's order: an error belongs to the first oracle that removes it
        take = (code < 0) & applies
        code[take] = value[take]
    return code


def peel(p_correct: np.ndarray, first: np.ndarray, settings: dict, cats: pd.DataFrame) -> np.ndarray:
    """(T,) category code of each error (p(correct) < threshold), -1 where the model is right; `cats` is
    categories(settings)."""
    boost_codes = cats.index[cats["group"] == "boost"].to_numpy()
    remaining = int(cats.index[cats["group"] == "remaining"][0])
    errors = p_correct < settings["error_threshold"]
    code = np.where(errors, first, -1)
    left = errors & (first < 0)
    boosts = np.sort(np.asarray(settings["boosts"], dtype=np.float64))
    # the smallest boost after which the error is gone (p + b >= threshold); none: it remains
    gone = p_correct[left, None] + boosts[None, :] >= settings["error_threshold"]
    code[left] = np.where(gone.any(1), boost_codes[gone.argmax(1)], remaining)
    return code


def example(text: bytes, t: int, before: int) -> str:
    """The text around position t's error, the erred byte in guillemets, control bytes escaped."""
    i = t + 1
    show = lambda b: b.decode("utf-8", "backslashreplace").translate({10: "\\n", 13: "\\r", 9: "\\t"})
    return (
        show(text[max(0, i - before) : i]) + "«" + show(text[i : i + 1]) + "»" + show(text[i + 1 : i + 1 + before // 3])
    )


# ----------------------------------------------------------------------------------------- the analysis


def _oracle_codes(ctx: Context, key: str, text: bytes) -> np.ndarray:
    """The model-independent part of the onion for one corpus, cached by the n-grams it read and the settings."""
    settings = ctx.settings
    grams = [ctx.baseline("ngram", key, n) for n in settings["ngram_n"]]

    def build():
        correct = np.zeros(len(text) - 1, dtype=bool)
        for row in grams:
            correct |= ctx.predictions(row, settings["split"]).p_correct > 0.5  # sec 4.4: "greater than 0.5"
        counts = word_counts(ctx.text(key, "train"))
        return {"code": first_oracle(text, counts, correct, settings)}

    cache_key = {
        "source": source_digest(sys.modules[__name__]), "corpus": key,
        "ngrams": [f"{r['model_id']}:{r['digest']}" for r in grams],
        **{k: settings[k] for k in ("split", "ngram_n", "memory_n", "rare_max")},
    }  # fmt: skip
    return ctx.cached("onion", cache_key, build)["code"]


def _roles(models: pd.DataFrame) -> dict[str, str]:
    """The paper's two models (sec 4.4: "our best LSTM model and [...] the best LSTM model in the smallest model
    category"): "large" is the headline LSTM of the suite's one rule (analyses.common.headline_id: the largest budget
    row, the deepest, the lowest seed), "small" the same rule within the smallest budget row (width, where a model
    has no row), when that row is smaller."""
    lstm = models[models["arch"] == "lstm"]
    if lstm.empty:
        return {}
    scale = lstm["budget"].fillna(lstm["size"]).astype(float)
    roles = {headline_id(lstm): "large"}
    if scale.min() < scale.max():
        roles[headline_id(lstm[scale == scale.min()])] = "small"
    return roles


def compute(ctx: Context) -> pd.DataFrame:
    """One row per model and oracle category: errors removed, share of the model's errors, example strings."""
    settings = ctx.settings
    cats = categories(settings)  # checks the settings first
    split, k_examples = settings["split"], settings["examples"]
    rows = []
    for key in ctx.corpus_keys():
        models = ctx.models(corpus=key, required=False)
        if models.empty:
            continue
        text = ctx.text(key, split)
        first = _oracle_codes(ctx, key, text)
        roles = _roles(models)
        for _, model in models.iterrows():
            p_correct = ctx.predictions(model, split).p_correct
            code = peel(p_correct, first, settings, cats)
            counts = np.bincount(code[code >= 0], minlength=len(cats))
            n_errors = int((code >= 0).sum())
            for c, cat in cats.iterrows():
                where = np.flatnonzero(code == c)
                quantiles = (np.arange(min(k_examples, where.size)) + 0.5) / k_examples  # away from the split's ends
                picks = where[(quantiles * where.size).astype(int)]
                texts = [example(text, int(t), settings["context_chars"]) for t in picks]
                rows.append({
                    "corpus": model["corpus"], "splits": model["corpus_splits"], "model_id": model["model_id"],
                    "arch": model["arch"],
                    "layers": int(model["layers"]), "size": int(model["size"]), "budget": model["budget"],
                    "params": int(model["params"]), "seed": int(model["seed"]), "group_id": model["group_id"],
                    "role": roles.get(model["model_id"], ""), "positions": int(code.size), "errors": n_errors,
                    "order": c, "group": cat["group"], "category": cat["category"], "removed": int(counts[c]),
                    "share_of_errors": counts[c] / max(n_errors, 1), "share_of_chars": counts[c] / code.size,
                    **{f"example_{j + 1}": texts[j] if j < len(texts) else "" for j in range(k_examples)},
                })  # fmt: skip
    if not rows:
        ctx.models()  # no neural model at all: the MissingInput naming the command
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------- the report


def _label(r) -> str:
    budget = f" {int(r['budget'])}" if pd.notna(r["budget"]) else f" H{int(r['size'])}"
    layers = f" L{int(r['layers'])}" if int(r["layers"]) > 1 else ""
    return f"{ARCH_LABELS.get(r['arch'], r['arch'])}{budget}{layers}"


def _by_group(df: pd.DataFrame) -> pd.DataFrame:
    """Per model configuration (seeds averaged within group_id) and category group: errors and share."""
    per_model = df.groupby(["corpus", "model_id", "group"], as_index=False, sort=False).agg(
        removed=("removed", "sum"), errors=("errors", "first"), positions=("positions", "first"),
        group_id=("group_id", "first"), arch=("arch", "first"), budget=("budget", "first"),
        layers=("layers", "first"), size=("size", "first"), role=("role", "first"),
    )  # fmt: skip
    per_model["share"] = per_model["removed"] / per_model["errors"].clip(lower=1)
    per_model["model"] = per_model.apply(_label, axis=1)
    return per_model


def _extra(df: pd.DataFrame, corpus: str) -> pd.Series | None:
    """Errors the small LSTM makes beyond the large one, per category group (sec 4.4, 'scaling up')."""
    groups = _by_group(df[df["corpus"] == corpus])
    large, small = groups[groups["role"] == "large"], groups[groups["role"] == "small"]
    if large.empty or small.empty:
        return None
    return small.set_index("group")["removed"] - large.set_index("group")["removed"]


def _fmt_pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def with_paper(df: pd.DataFrame) -> pd.DataFrame:
    """One row per corpus and model configuration (seeds averaged): its share of errors in each category group, its
    errors and error rate; then the small LSTM's extra errors by group, and on War and Peace the paper's two rows.
    Long, not wide: a reference report peels 40-odd networks, one column each would not fit a page."""
    rows, columns = [], set()
    for corpus, sub in df.groupby("corpus", sort=False):
        groups = _by_group(sub)
        groups = (
            groups.set_index("model_id")
            .loc[report_order(sub.drop_duplicates("model_id"), "seed")["model_id"]]
            .reset_index()
        )
        present = [g for g in GROUPS if g != "remaining" or groups.loc[groups["group"] == g, "removed"].sum() > 0]
        columns.update(present)
        for _, cfg in groups.groupby("group_id", sort=False):
            models = cfg.drop_duplicates("model_id")
            seeds = models["model_id"].nunique()
            row = {"corpus": corpus, "model": cfg["model"].iloc[0] + (f" ({seeds} seeds)" if seeds > 1 else "")}
            row |= {g: _fmt_pct(cfg.loc[cfg["group"] == g, "share"].mean()) for g in present}
            row |= {"errors": f"{models['errors'].mean():,.0f}",
                    "error rate": _fmt_pct((models["errors"] / models["positions"]).mean())}  # fmt: skip
            rows.append(row)
        extra = _extra(df, corpus)
        if extra is not None:
            total = extra.sum()
            row = {"corpus": corpus, "model": "small - large: extra errors", "errors": f"{total:,.0f}"}
            row |= {g: f"{extra.get(g, 0):,.0f} ({_fmt_pct(extra.get(g, 0) / total) if total else '-'})"
                    for g in present}  # fmt: skip
            rows.append(row)
        if corpus == "warpeace":  # the paper's numbers are for War and Peace only
            together = dict.fromkeys(["dynamic memory", "rare words", "word model", "punctuation"], "3,000 together")
            rows += [
                {"corpus": corpus, "model": "paper: best LSTM", **{g: f"{v} %" for g, v in PAPER["best_share"].items()},
                 "punctuation": "30 % with boost", "boost": "in punctuation", "errors": f"{PAPER['best_errors']:,}",
                 "error rate": "42 %"},
                {"corpus": corpus, "model": "paper: 50K LSTM extra", "n-gram": "36,000 (81 %)", **together,
                 "boost": "5,000 (11 %)", "errors": "44,000 of 184,000", "error rate": "56 %"},
            ]  # fmt: skip
            columns.update(["punctuation", "boost"])
    table = pd.DataFrame(rows)
    order = ["corpus", "model", *[g for g in GROUPS if g in columns], "errors", "error rate"]
    return table.reindex(columns=order).fillna("")


def examples(df: pd.DataFrame) -> list[str]:
    """Per corpus, one error of the large LSTM in each category group: the one of its category that removed most."""
    out = []
    for corpus, sub in df.groupby("corpus", sort=False):
        large = sub[(sub["role"] == "large") & (sub["removed"] > 0)]
        shown = []
        for group in GROUPS:
            cats = large[large["group"] == group]
            if len(cats):
                shown.append(f"{group}: {cats.loc[cats['removed'].idxmax(), 'example_1']}")
        if shown:
            out.append(f"Errors of the large LSTM on {corpus}, one per category group: " + "; ".join(shown) + ".")
    return out


def plot(df: pd.DataFrame):
    style()
    corpora_ = list(dict.fromkeys(df["corpus"]))
    cats = df.drop_duplicates("order").sort_values("order")[["order", "group", "category"]]
    palettes = {"n-gram": "Blues", "dynamic memory": "Oranges", "rare words": "Greens", "word model": "Reds",
                "punctuation": "Purples", "boost": "Greys", "remaining": "Greys"}  # fmt: skip
    colors = {}
    for group, members in cats.groupby("group", sort=False):
        shades = sns.color_palette(palettes[group], len(members) + 2)[2:]
        colors.update(zip(members["category"], shades))
    heights = [df[df["corpus"] == c]["model_id"].nunique() + (2 if c == "warpeace" else 0) for c in corpora_]
    fig, axes = plt.subplots(
        len(corpora_), 1, figsize=(11, 1.2 + 0.42 * sum(heights)), squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )  # fmt: skip
    for ax, corpus in zip(axes[:, 0], corpora_):
        sub = df[df["corpus"] == corpus]
        models = report_order(sub.drop_duplicates("model_id"), "seed")
        models["label"] = models.apply(_label, axis=1) + " s" + models["seed"].astype(str)
        models["label"] += models["role"].map({"large": " (large)", "small": " (small)"}).fillna("")
        models["label"] += (100 * models["errors"] / models["positions"]).map(lambda e: f", {e:.0f} % errors")
        labels = list(models["label"])
        shares = sub.pivot_table(index="model_id", columns="category", values="share_of_errors", sort=False)
        shares = shares.loc[models["model_id"], list(cats["category"])] * 100
        shares.index = labels
        left = np.zeros(len(shares))
        for category in shares.columns:
            ax.barh(shares.index, shares[category], left=left, color=colors[category], label=category, height=0.75)
            left += shares[category].to_numpy()
        if corpus == "warpeace":  # the paper's best LSTM: the four groups its text states, then what they leave
            y, start = len(shares), 0.0
            for group, value in [*PAPER["best_share"].items(), ("punctuation + boost", None)]:
                value = 100 - start if value is None else value
                middle = cats[cats["group"] == group]["category"]
                color = colors[middle.iloc[len(middle) // 2]] if len(middle) else "white"
                ax.barh([y], [value], left=[start], color=color, height=0.75, edgecolor="grey", lw=0.5,
                        hatch=None if len(middle) else "//")  # fmt: skip
                text = f"{value:.0f} %" if len(middle) else f"{group}: {value:.0f} %"  # the colour names the group
                ax.text(start + value / 2, y, text, ha="center", va="center", fontsize=7.5,
                        color="white" if len(middle) else "black")  # fmt: skip
                start += value
            ax.set_yticks(range(y + 1), [*shares.index, "paper: best LSTM, 42 % errors"])
        ax.invert_yaxis()
        ax.set_xlim(0, 100)
        ax.set_xlabel("share of the model's test errors (%), oracles applied left to right")
        ax.set_title(f"{corpus}: errors (p(correct) < 0.5) peeled by the oracles in the paper's order")
    handles, names = axes[0, 0].get_legend_handles_labels()
    keep = [i for i, n in enumerate(names) if n in colors and n in set(df.loc[df["removed"] > 0, "category"])]
    fig.legend([handles[i] for i in keep], [names[i] for i in keep], loc="lower center", ncol=6, fontsize=8,
               bbox_to_anchor=(0.5, -0.01), frameon=False)  # fmt: skip
    fig.tight_layout(rect=(0, 0.06 + 0.02 * (len(keep) > 12), 1, 1))
    return fig


def _group_shares(df: pd.DataFrame, model_id: str) -> pd.Series:
    """A model's share of its errors per category group (the `share` of _by_group), indexed by group."""
    return _by_group(df[df["model_id"] == model_id]).set_index("group")["share"]


def caption(df: pd.DataFrame) -> str:
    parts = []
    for corpus, sub in df.groupby("corpus", sort=False):
        large = sub[sub["role"] == "large"]
        if large.empty:
            continue
        r = large.iloc[0]
        paper = "paper" if corpus == "warpeace" else "paper, on War and Peace"
        shares = _group_shares(sub, r["model_id"])
        listing = ", ".join(f"{g} {100 * shares.get(g, 0):.0f} %" for g in GROUPS[:-1])
        parts.append(
            f"On {corpus} the large LSTM ({_label(r)}, seed {r['seed']}) errs on {r['errors']:,} of "
            f"{r['positions']:,} test characters ({100 * r['errors'] / r['positions']:.0f} %; {paper} 42 %): "
            f"{listing} ({paper}: n-gram 18 %, memory 6 %, rare words 9 %, word model 37 %)."
        )
        extra = _extra(df, corpus)
        if extra is not None and extra.sum() > 0:
            share = extra.get("n-gram", 0) / extra.sum()
            parts.append(
                f"The small LSTM makes {extra.sum():,.0f} more errors; {100 * share:.0f} % of the extra are n-gram "
                "errors (paper: 81 % of 44K)"
                + (", so scaling up mostly fixes short-context errors here too." if share > 0.5 else ".")
            )
        others = sub[sub["role"] != "large"].drop_duplicates("model_id")
        if len(others):
            ngram = {m: _group_shares(sub, m).get("n-gram", 0) for m in others["model_id"]}
            spread = ", ".join(f"{_label(o)} {100 * ngram[o['model_id']]:.0f} %" for _, o in others.iterrows()
                               if o["role"] != "small" and o["arch"] != "lstm")  # fmt: skip
            if spread:
                parts.append(f"n-gram share of the other architectures' errors: {spread}.")
    large = df[df["role"] == "large"].drop_duplicates("model_id")
    if len(large) and (large["errors"] / large["positions"]).min() > 0.5:
        parts.append(
            "These models are weak (they err on more than half the characters; the paper's best on 42 %): the errors "
            "a stronger model would not make are mostly local, which swells the n-gram slice, and a weak model also "
            "errs inside common words that recur within a few thousand characters, which swells the memory slice; "
            "the word-model slice is correspondingly smaller. Compare how the slices move from the small to the "
            "large model, and between architectures, rather than their values."
        )
    return " ".join(parts)


def summary(df: pd.DataFrame) -> str:
    items = []
    for corpus, sub in df.groupby("corpus", sort=False):
        large = sub[sub["role"] == "large"]
        if large.empty:
            continue
        shares = _group_shares(sub, large["model_id"].iloc[0])
        items.append(
            f"{corpus} large LSTM: {100 * large['errors'].iloc[0] / large['positions'].iloc[0]:.0f} % errors, "
            f"n-gram {100 * shares.get('n-gram', 0):.0f} %, memory {100 * shares.get('dynamic memory', 0):.0f} %, "
            f"rare {100 * shares.get('rare words', 0):.0f} %, word {100 * shares.get('word model', 0):.0f} %"
        )
    return "; ".join(items) + " (paper WP: 42 % errors, n-gram 18 %, memory 6 %, rare 9 %, word 37 %)"


def notes(df: pd.DataFrame) -> list[str]:
    boosts = list(df.loc[df["group"] == "boost"].drop_duplicates("order").sort_values("order")["category"])
    out = [
        "Definitions where the paper leaves room (module docstring): a word is a maximal run of letters, digits, "
        "underscores and non-ASCII bytes, joined across an inner apostrophe; the memory oracle looks for the whole "
        "word in the n characters before the word starts; the rare-word oracle removes errors on every character "
        "of the word, counting case-sensitive occurrences in the training split; a quote is \" or a ' not preceded "
        "by a word byte, and a tab counts as a space; the boost oracles add "
        f"{', '.join(c.split()[-1] for c in boosts)} to p(correct) (the paper does not state its amounts)"
        + (", so nothing remains after the last." if float(boosts[-1].split()[-1]) >= 0.5 else "."),
        *examples(df),
        "Examples show the text before the error, the erred character in «», and a little after; \\n, \\r and \\t "
        "are the newline, carriage return and tab bytes.",
        "The dynamic-memory window never reaches back before the test split's start."
        + (
            " The split is contiguous (the test set is the end of the file), where the paper's char-rnn split spread "
            "it over the whole book."
            if (df["splits"] == "contiguous").any()
            else ""
        ),
    ]
    if "warpeace" in set(df["corpus"]):
        out.append(
            "The paper's bar in the figure shows the four groups its text states; punctuation and boost together are "
            "the 30 % the text leaves (its pie splits them, and the groups into slices, without printing the numbers)."
        )
    return out


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
