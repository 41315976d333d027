"""Why and when should you pool? Last-state BiLSTM classifiers against pooled ones on a position-controlled task.

Maini, Kolluru, Pruthi, Mausam (2020), as the lecture notes (seed 004) give it: a BiLSTM classifier that reads
only its two final states loses the gradient of the middle of its input (vanishing ratio ||dL/dh_mid|| /
||dL/dh_end|| of 5e-3 at 1K examples, Table 2) and cannot learn from text in the middle of irrelevant text
("IMDb (mid) + Wiki": 49.6 to 50.3 % on a binary task, the Results table), while mean, max, attention and
max-attention pooling can; their Normalised Word Importance (Fig. 6) shows where each model looks.

The task here (built from the corpus the language models were trained on; one per run, cached):
- classes: `classes` keywords, chosen automatically as the most frequent words of at least 6 letters that are
  rare enough for a stretch of `max(lengths)` characters to be free of all of them (at most
  |train| / (4 x classes x max length) occurrences each; no keyword inside another);
- the class-bearing span: `span` characters of corpus text around one occurrence of the class's keyword (the
  keyword at a random offset inside it, no other keyword);
- the irrelevant text: a random stretch of the same split free of every keyword; the span goes at its start
  (offset 0), in its middle, or at its end; example lengths `lengths` (equally many of each), the exact
  example checked to hold its keyword once and no other;
- train / validation / test examples come from the train / val / test splits of the corpus; the smaller
  training sets are prefixes of the largest (classes balanced in every one).
A last-state BiLSTM has the span next to one of its final states in the start and end settings; in the
middle setting it is (length - span) / 2 characters from both.

Models (charlm.classifier, one per pooling x position x training size): one-hot bytes, a BiLSTM of `hidden`
cells per direction, trained with charlm.train's loop (RMSProp, early stopping on validation loss, at most
`max_examples` examples seen). Measured: test accuracy per position, length and training size (from the
best-on-validation checkpoint); Maini et al.'s vanishing ratio (middle 10 % over the two ends of the
per-position gradient norm on 100 bins) at initialisation and when the running training accuracy first
reaches 95 % (Table 2); the gradient norm against the relative position at both moments; and Normalised
Word Importance per character window (ANCHORS.md: zero each `nwi_window`-character window of the one-hot input,
|L_masked - L| per example over its maximum, averaged over `nwi_examples` test examples of the longest length,
interpolated onto 100 relative positions, min-max normalised; one seed, where Maini et al. normalise over 5).

The caption's claims are computed (`findings`) on the largest training size, length by length, never averaged
over lengths (the middle of a 24-character text is 4 characters from each end, of a 96-character one 40):
- the last-state model is right at the ends when it reaches RIGHT (90 %) at the start and the end of every
  length; otherwise it is under-trained, its accuracy in the middle says nothing about position, and the
  caption says so instead of claiming a failure;
- in the middle it is "at chance" (within NOISE = 2 binomial standard errors of 1 / classes), "below its
  ends" or "as at its ends"; two accuracies differ when more than 2 binomial standard errors and MIN_GAP (5
  points) apart (`margin`), and the pooled models beat it there when every one of them is above it so;
- a pooled model is indifferent to position when no two of its positions differ so at any length;
- the last-state model's vanishing ratio at initialisation is "orders of magnitude" below the pooled models'
  when it is 100x or more below the smallest of them.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
import torch.nn.functional as F

from charlm.classifier import (
    POOLS,
    ClassifierConfig,
    Examples,
    load_classifier,
    predict,
    train_classifier,
)
from charlm.gradients import to_bins
from charlm.paths import complete_metrics
from charlm.train import TrainingDiverged, file_sha256
from corpora.errors import UserError, run_cli

from .common import analysis_main, style
from .context import Context, MissingInput, Needs
from .maini import MAINI_SIZES, table2_range, table2_ratios

TITLE = "Pooling: last state against mean, max and attention pooling (Maini et al.)"
QUESTION = (
    "Can a BiLSTM that reads only its final states learn from a span in the middle of irrelevant text, and do "
    "pooled models, whose gradient does not vanish at initialisation, avoid that positional bias?"
)
PAPER_SOURCE = (
    "Maini et al. (2020), 'Why and when should you pool?', as quoted in the lecture notes (seed 004): the Results "
    "table (IMDb, Yahoo; relevant text alone, in the middle or on the right of Wikipedia text; 1K / 2K / 10K "
    "training examples) and Table 2 (vanishing ratio at 95 % training accuracy)"
)
POSITIONS = ("start", "mid", "end")
SETTINGS = {
    "corpus": "auto",  # corpus whose text builds the task ("auto": warpeace if present, else the first one)
    "classes": 4,  # keywords, one class each
    "keywords": [],  # the class keywords (empty: chosen from the corpus, see the module docstring)
    "span": 16,  # characters of the class-bearing span (the keyword in its own context)
    "lengths": [24, 48, 96],  # example lengths (span + irrelevant text), equally many examples of each
    "positions": list(POSITIONS),  # where the span sits in the irrelevant text
    "train_sizes": [200, 1000],  # training examples (the smaller sets are prefixes of the largest)
    "val_size": 240,  # validation examples per position (early stopping)
    "test_size": 480,  # test examples per position
    "pools": list(POOLS),  # poolings compared (charlm.classifier.POOLS)
    "hidden": 32,  # LSTM cells per direction
    "batch_size": 16,  # examples per minibatch (small: more updates for the same characters, which set the cost)
    "lr": 0.01,  # RMSProp learning rate (above the language models' 2e-3: few steps to learn in)
    "epochs": 30,  # passes over the training set at most
    "patience": 4,  # early stopping: epochs without validation improvement
    # training examples seen at most per classifier (the time budget). Measured on quick's War and Peace: at 2400
    # the last-state model was 91-94 % right with the span at the start and never reached 95 % training accuracy
    # with it at the end (1000 examples); at 3600 it is 98-99 % right at both, reaching 95 % after 2,160-2,528
    # examples. Cost on one core: 35 s of CPU for the whole analysis at 2400, 47 s at 3600.
    "max_examples": 3600,
    "forget_bias": None,  # initial forget-gate bias (None: the suite's uniform init; Maini's "last1": 1)
    "nwi_window": 5,  # characters zeroed at a time for Normalised Word Importance (Maini et al.: k = 5 words)
    "nwi_examples": 32,  # test examples of the longest length NWI averages over (largest training size only)
    "seed": 0,  # examples, initialisation and minibatch order
}
NEEDS = Needs(predictions=False)  # reads checkpoints (traces, gradients, samples), not Predictions
LABELS = {"last": "BiLSTM (last)", "mean": "MEANPOOL", "max": "MAXPOOL", "att": "ATT", "maxatt": "MAXATT"}
PAPER_LABELS = {"last": "BiLSTM", "mean": "MEANPOOL", "max": "MAXPOOL", "att": "ATT", "maxatt": "MAXATT"}
COLUMNS = ["corpus", "keywords", "span", "pool", "position", "train_size", "length", "measure", "bin", "value"]
CACHE_FORMAT = 1
RIGHT = 0.9  # a classifier is "right" at a position when its test accuracy there is at least this
NOISE = 2  # two accuracies differ (or one is above chance) by more than this many binomial standard errors
MIN_GAP = 0.05  # ... and two accuracies by at least this much (a gap of a few errors in 160 is no positional bias)
# The notes' Results table: mean accuracy (%) per setting and training size (their +- std left out).
MAINI_RESULTS = {
    "IMDb": {
        "alone": [[64.7, 75.0, 86.6], [73.0, 81.7, 87.1], [69.0, 80.1, 87.8], [75.7, 82.8, 89.0], [75.9, 82.5, 88.5]],
        "mid": [[49.6, 49.9, 50.3], [69.8, 76.2, 84.1], [64.5, 77.2, 86.0], [75.0, 79.4, 86.7], [75.4, 80.9, 86.8]],
        "right": [[53.5, 64.7, 85.9], [70.0, 76.8, 84.8], [65.9, 77.8, 87.2], [74.7, 80.2, 87.1], [77.9, 81.9, 87.2]],
    },
    "Yahoo": {
        "alone": [[38.3, 51.4, 63.5], [48.2, 56.6, 64.7], [50.2, 56.3, 63.9], [47.3, 54.2, 65.1], [51.8, 57.0, 65.1]],
        "mid": [[12.7, 12.7, 11.4], [31.9, 43.1, 58.5], [33.0, 40.1, 58.4], [39.4, 45.1, 61.5], [39.6, 48.5, 62.2]],
        "right": [[18.8, 37.3, 60.1], [33.9, 43.2, 58.6], [33.1, 41.2, 60.9], [37.9, 47.6, 62.2], [40.3, 50.1, 63.1]],
    },
}  # rows: BiLSTM, MEANPOOL, MAXPOOL, ATT, MAXATT; columns: 1K, 2K, 10K
RESULTS_SIZES = ("1K", "2K", "10K")


# ------------------------------------------------------------------------------------------ the task


def choose_keywords(
    train_text: bytes, classes: int, longest: int, min_letters: int = 6, also_in: tuple[bytes, ...] = ()
) -> list[bytes]:
    """The most frequent words of >= min_letters letters with at most |train| / (4 x classes x longest)
    occurrences (so keyword-free stretches of `longest` characters are common), none inside another, each also
    occurring in every text of `also_in` (the val and test splits the other examples come from)."""
    counts = Counter(re.findall(rb"[A-Za-z]{%d,}" % min_letters, train_text))
    most = len(train_text) / (4 * classes * longest)
    chosen: list[bytes] = []
    for word, n in counts.most_common():
        if n <= most and n >= 2 and not any(word in c or c in word for c in chosen):
            if not all(word in text for text in also_in):
                continue
            chosen.append(word)
            if len(chosen) == classes:
                return chosen
    raise MissingInput(  # the corpus cannot make this task: the section says so
        f"the corpus has only {len(chosen)} words of {min_letters}+ letters found in every split and rare enough "
        f"({most:.0f} occurrences at most) to leave {longest}-character stretches free of them; {classes} classes "
        f"need {classes}: "
        "ask for fewer classes or shorter lengths, or give keywords"
    )


def keyword_starts(text: bytes, keywords: list[bytes]) -> list[np.ndarray]:
    """Per keyword, where it starts in `text`; a keyword that never occurs there is one clear error."""
    occurrences = [np.array([m.start() for m in re.finditer(re.escape(k), text)]) for k in keywords]
    for k, occ in zip(keywords, occurrences):
        if occ.size == 0:
            raise MissingInput(f"keyword {k.decode(errors='replace')!r} does not occur in a split of the corpus")
    return occurrences


def build_examples(
    text: bytes,
    keywords: list[bytes],
    length: int,
    position: str,
    n: int,
    span: int,
    rng: np.random.Generator,
    occurrences: list[np.ndarray] | None = None,
) -> tuple[list[bytes], np.ndarray]:
    """n examples of `length` bytes: the span of class i % K (keyword i inside `span` bytes of its own context)
    at `position` of a keyword-free stretch of `text`. Returns the examples and their labels.
    `occurrences`: keyword_starts(text, keywords), when the caller has it already (one scan per split)."""
    pattern = re.compile(b"|".join(re.escape(k) for k in keywords))
    occurrences = keyword_starts(text, keywords) if occurrences is None else occurrences
    pad = length - span
    at = {"start": 0, "mid": pad // 2, "end": pad}[position]
    examples, labels = [], np.arange(n) % len(keywords)
    for label in labels:
        word = keywords[label]
        for _ in range(1000):
            start = int(rng.choice(occurrences[label])) - int(rng.integers(0, span - len(word) + 1))
            filler = int(rng.integers(0, len(text) - pad + 1))
            if start < 0 or start + span > len(text):
                continue
            example = text[filler : filler + at] + text[start : start + span] + text[filler + at : filler + pad]
            if pattern.findall(example) == [word]:
                examples.append(example)
                break
        else:
            raise UserError(
                f"could not place keyword {word.decode(errors='replace')!r} in {length}-character keyword-free text "
                "in 1000 tries: the split is too small or the keywords too frequent"
            )
    return examples, labels


def task_sets(
    corpus,
    texts: dict[str, bytes],
    starts: dict[str, list[np.ndarray]],
    keywords: list[bytes],
    position: str,
    settings: dict,
) -> dict:
    """Train (largest size), val and test Examples of one position setting, equally many of each length, from each
    split's bytes (`texts`) and where each keyword starts in them (`starts`, keyword_starts)."""
    lengths = list(settings["lengths"])
    sizes = {"train": max(settings["train_sizes"]), "val": settings["val_size"], "test": settings["test_size"]}
    sets = {}
    for s, (split, n) in enumerate(sizes.items()):
        ids, labels = [], []
        for length in lengths:
            rng = np.random.default_rng([settings["seed"], s, POSITIONS.index(position), length])
            per_length = -(-n // len(lengths))  # ceil
            examples, y = build_examples(
                texts[split], keywords, length, position, per_length, settings["span"], rng, starts[split]
            )
            ids.append(np.stack([corpus.encode(e) for e in examples]))
            labels.append(y)
        sets[split] = Examples(ids, labels)
    return sets


def prefix(examples: Examples, n: int) -> Examples:
    """The first n examples, split equally over the length groups (classes stay balanced: labels cycle)."""
    per_length = -(-n // len(examples.ids))
    return Examples([ids[:per_length] for ids in examples.ids], [y[:per_length] for y in examples.labels])


# ------------------------------------------------------------------------------------------ measurements


@torch.no_grad()
def normalised_word_importance(model, ids: np.ndarray, labels: np.ndarray, window: int) -> np.ndarray:
    """Maini et al.'s NWI with character windows: zero each `window`-character block of the one-hot input,
    |L_masked - L| per example over its maximum, averaged over examples, on 100 relative positions, min-max
    normalised. (100,)"""
    x = model.onehot(torch.from_numpy(ids.astype(np.int64)))  # (n, L, V)
    y = torch.from_numpy(labels.astype(np.int64))
    n, L, _ = x.shape
    starts = list(range(0, L, window))
    base = F.cross_entropy(model.forward_onehot(x), y, reduction="none")  # (n,)
    change = torch.empty(n, len(starts))
    for w, s in enumerate(starts):
        masked = x.clone()
        masked[:, s : s + window] = 0.0
        change[:, w] = (F.cross_entropy(model.forward_onehot(masked), y, reduction="none") - base).abs()
    per_example = change / change.max(1, keepdim=True).values.clamp_min(1e-12)
    curve = to_bins(per_example.mean(0).numpy())
    spread = curve.max() - curve.min()
    return (curve - curve.min()) / spread if spread > 0 else np.zeros_like(curve)


def _choose_corpus(ctx: Context, wanted: str) -> str:
    keys = ctx.corpus_keys()
    if not keys:
        raise MissingInput(
            "pooling builds its task from the corpus of the language models, and there are none: "
            "train them with `python -m reports --profile quick`"
        )
    names = dict(zip(ctx.index["corpus"], ctx.index["corpus_key"]))
    if wanted == "auto":
        return names.get("warpeace", keys[0])
    if wanted not in names:
        raise MissingInput(
            f"no models on corpus '{wanted}' to build the task from (there are: {', '.join(names)}): "
            f"train one with `python -m charlm.train --corpus {wanted} --arch lstm`"
        )
    return names[wanted]


def _check(settings: dict) -> None:
    bad_pools = [p for p in settings["pools"] if p not in POOLS]
    if bad_pools or not settings["pools"]:
        raise UserError(f"pools must be a non-empty list of {', '.join(POOLS)}, got {settings['pools']!r}")
    bad = [p for p in settings["positions"] if p not in POSITIONS]
    if bad or not settings["positions"]:
        raise UserError(f"positions must be a non-empty list of {', '.join(POSITIONS)}, got {settings['positions']!r}")
    if not settings["lengths"] or min(settings["lengths"]) <= settings["span"]:
        raise UserError(f"every length must exceed the span of {settings['span']} characters: {settings['lengths']!r}")
    for name in ("span", "classes", "val_size", "test_size", "nwi_window", "nwi_examples", "max_examples"):
        if int(settings[name]) < 1:
            raise UserError(f"{name} must be positive, got {settings[name]!r}")
    if not settings["train_sizes"] or min(settings["train_sizes"]) < settings["classes"]:
        raise UserError(f"train_sizes must each hold at least one example per class: {settings['train_sizes']!r}")
    if settings["keywords"] and len(settings["keywords"]) != settings["classes"]:
        raise UserError(f"{settings['classes']} classes need {settings['classes']} keywords: {settings['keywords']!r}")


def compute(ctx: Context) -> pd.DataFrame:
    """Train every pooling x position x training size (cached), then measure accuracy, ratios, profiles and NWI."""
    s = ctx.settings
    _check(s)
    key = _choose_corpus(ctx, s["corpus"])
    corpus = ctx.corpus(key)
    texts = {split: ctx.text(key, split) for split in ("train", "val", "test")}  # decoded once for every position
    keywords = [k.encode() for k in s["keywords"]] or choose_keywords(
        texts["train"], int(s["classes"]), max(s["lengths"]), also_in=(texts["val"], texts["test"])
    )
    if max(len(k) for k in keywords) > s["span"]:
        raise UserError(f"the span of {s['span']} characters cannot hold keyword(s) longer than it: {keywords}")
    starts = {split: keyword_starts(text, keywords) for split, text in texts.items()}  # one scan per split
    root = ctx.artifacts / "_classifiers" / corpus.artifact_name
    rows = []
    base = {
        "corpus": corpus.name,
        "keywords": "|".join(k.decode(errors="replace") for k in keywords),
        "span": s["span"],
    }
    for position in s["positions"]:
        sets = task_sets(corpus, texts, starts, keywords, position, s)
        for size in sorted(s["train_sizes"]):
            train = prefix(sets["train"], size)
            for pool in s["pools"]:
                config = ClassifierConfig(
                    pool, corpus.vocab_size, len(keywords), hidden=int(s["hidden"]), forget_bias=s["forget_bias"],
                    seed=int(s["seed"]), batch_size=int(s["batch_size"]), epochs=int(s["epochs"]),
                    max_chars=int(s["max_examples"]), lr=float(s["lr"]), patience=int(s["patience"]),
                )  # fmt: skip
                here = {**base, "pool": pool, "position": position, "train_size": size}
                try:
                    folder = _trained(ctx, config, train, sets["val"], root)
                except TrainingDiverged as err:
                    ctx.say(f"pooling: {err}")
                    rows.append({**here, "measure": "diverged", "value": 1.0})
                    continue
                rows += _measure(ctx, folder, sets["test"], here, size == max(s["train_sizes"]), s)
    return pd.DataFrame(rows, columns=COLUMNS)


def _trained(ctx: Context, config: ClassifierConfig, train: Examples, val: Examples, root) -> Path:
    """The folder of a trained classifier (trained now if missing); a checkpoint that is not the one its
    metrics.json records is retrained when the context repairs, else named in one line."""
    folder = train_classifier(config, train, val, root)
    recorded = complete_metrics(folder / "metrics.json")["checkpoint_sha256"]
    if file_sha256(folder / "checkpoint.pt") != recorded:
        if not ctx.repair:
            raise UserError(f"{folder / 'checkpoint.pt'} is damaged (not the checkpoint its metrics.json records): "
                            f"delete {folder} to retrain it")  # fmt: skip
        ctx.say(f"{folder / 'checkpoint.pt'} is damaged: retraining it")
        shutil.rmtree(folder)
        folder = train_classifier(config, train, val, root)
    return folder


def _measure(ctx: Context, folder, test: Examples, here: dict, with_nwi: bool, s: dict) -> list[dict]:
    """Rows of one trained classifier: test accuracy per length, ratios and profiles, NWI (largest size only)."""
    metrics = complete_metrics(folder / "metrics.json")
    key = {"checkpoint": metrics["checkpoint_sha256"], "test": test.digest(), "nwi": with_nwi,
           "window": s["nwi_window"], "examples": s["nwi_examples"], "format": CACHE_FORMAT}  # fmt: skip

    def evaluate():
        model = load_classifier(folder / "checkpoint.pt")
        logp = predict(model, test)
        out = {"accuracy": np.array([float((lp.argmax(1) == y).mean()) for lp, y in zip(logp, test.labels)])}
        if with_nwi:
            longest = int(np.argmax([ids.shape[1] for ids in test.ids]))
            n = s["nwi_examples"]
            out["nwi"] = normalised_word_importance(
                model, test.ids[longest][:n], test.labels[longest][:n], int(s["nwi_window"])
            )
        return out

    result = ctx.cached("pooling", key, evaluate)
    rows = [{**here, "length": ids.shape[1], "measure": "accuracy", "value": float(a)}
            for ids, a in zip(test.ids, result["accuracy"])]  # fmt: skip
    rows += [{**here, "length": ids.shape[1], "measure": "test_examples", "value": float(len(ids))}
             for ids in test.ids]  # fmt: skip
    examples_target = metrics.get("examples_target")
    rows += [
        {**here, "measure": "ratio_init", "value": metrics["ratio_init"]},
        {
            **here,
            "measure": "ratio_95",
            "value": np.nan if metrics["ratio_target"] is None else metrics["ratio_target"],
        },
        {**here, "measure": "examples_to_95", "value": np.nan if examples_target is None else examples_target},
        {**here, "measure": "examples_seen", "value": metrics["chars_trained"]},
    ]
    if with_nwi:
        rows += [{**here, "length": max(ids.shape[1] for ids in test.ids), "measure": "nwi", "bin": b, "value": v}
                 for b, v in enumerate(result["nwi"])]  # fmt: skip
        for moment in ("init", "target"):
            profile = metrics.get(f"profile_{moment}")
            if profile is not None:
                rows += [{**here, "measure": f"grad_{moment}", "bin": b, "value": v} for b, v in enumerate(profile)]
    return rows


# ------------------------------------------------------------------------------------------ views


def accuracy(df: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy per training size, pooling, length and position (columns: the positions), with `n`, the test
    examples of each cell. Never averaged over lengths: the middle of a 24-character text is 4 characters from
    each end, of a 96-character one 40."""
    acc = df[df["measure"] == "accuracy"].pivot_table(
        index=["train_size", "pool", "length"], columns="position", values="value"
    )
    n = df[df["measure"] == "test_examples"].groupby(["train_size", "pool", "length"])["value"].min()
    return acc.join(n.rename("n"))


def margin(p: float, q: float, n: float) -> float:
    """How far apart two accuracies p and q, each on n test examples, must be to differ: NOISE binomial standard
    errors of their difference (at their pooled proportion, which does not vanish near 100 %), and MIN_GAP."""
    pooled = (p + q) / 2
    return max(MIN_GAP, NOISE * np.sqrt(2 * pooled * (1 - pooled) / n))


def at_chance(p: float, chance: float, n: float) -> bool:
    """Within NOISE binomial standard errors of chance (or below it)."""
    return p <= chance + NOISE * np.sqrt(chance * (1 - chance) / n)


def _value(df: pd.DataFrame, measure: str) -> pd.DataFrame:
    return df[df["measure"] == measure].drop_duplicates(["pool", "position", "train_size"])


def plot(df: pd.DataFrame):
    style()
    df = df.assign(model=df["pool"].map(LABELS))
    models = [LABELS[p] for p in POOLS if p in set(df["pool"])]
    palette = dict(zip(models, sns.color_palette("tab10", n_colors=len(models))))
    hue = {"hue": "model", "hue_order": models, "palette": palette}
    sizes = sorted(df["train_size"].dropna().unique())
    positions = [p for p in POSITIONS if p in set(df["position"])]
    fig, axes = plt.subplots(3, 3, figsize=(16, 13.5))
    acc = df[df["measure"] == "accuracy"].assign(value=lambda d: 100 * d["value"])
    chance = 100 / max(2, _classes(df))
    longest = int(acc["length"].max())  # the middle farthest from both ends: (longest - span) / 2 characters
    for ax, size in zip(axes[0, :2], [sizes[0], sizes[-1]]):
        sub = acc[(acc["train_size"] == size) & (acc["length"] == longest)]
        sns.barplot(data=sub, x="position", y="value", order=positions, ax=ax, **hue)
        ax.axhline(chance, color="grey", ls="--", lw=0.8)
        ax.set_ylim(0, 125)
        ax.set_yticks(range(0, 101, 20))
        ax.set_xlabel("position of the class-bearing span")
        ax.set_ylabel(f"test accuracy (%), {longest}-character texts")
        ax.set_title(f"{int(size)} training examples (dashed: chance; other lengths: right)")
        ax.legend(fontsize=8, title="", ncol=3, loc="upper center")
    ax = axes[0, 2]
    mid = acc[(acc["position"] == "mid") & (acc["train_size"] == sizes[-1])]
    if not mid.empty:
        sns.lineplot(data=mid, x="length", y="value", marker="o", ax=ax, **hue)
        for position, ls in (("start", ":"), ("end", "--")):  # the last state where it should be right
            ends = acc[(acc["pool"] == "last") & (acc["position"] == position) & (acc["train_size"] == sizes[-1])]
            if not ends.empty and "last" in set(df["pool"]):
                ends = ends.sort_values("length")
                ax.plot(ends["length"], ends["value"], ls=ls, color=palette[LABELS["last"]],
                        label=f"{LABELS['last']}, span at the {position}")  # fmt: skip
        ax.axhline(chance, color="grey", ls="--", lw=0.8)
        ax.legend(fontsize=8, title="")
    ax.set_ylim(0, 105)
    ax.set_xlabel("example length (characters)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"span in the middle: accuracy against length ({int(sizes[-1])} examples)")
    nwi = df[df["measure"] == "nwi"]
    span, longest = _span_fraction(df)
    for ax, position in zip(axes[1], POSITIONS):
        sub = nwi[nwi["position"] == position]
        if not sub.empty:
            sns.lineplot(data=sub, x="bin", y="value", ax=ax, **hue)
            lo = {"start": 0.0, "mid": (1 - span) / 2, "end": 1 - span}[position] * 99
            ax.axvspan(lo, lo + span * 99, color="red", alpha=0.12, lw=0)
            ax.legend(fontsize=8, title="")
        ax.set_xlabel(f"relative position in the example (0-99; {longest} characters)")
        ax.set_ylabel("normalised word importance")
        ax.set_title(f"NWI, span at the {position} (shaded)")
    for ax, moment in zip(axes[2, :2], ("init", "target")):
        sub = df[(df["measure"] == f"grad_{moment}") & (df["value"] > 0)]
        if not sub.empty:
            sub = sub.groupby(["model", "bin"], as_index=False)["value"].mean()  # over positions: same probe length
            sns.lineplot(data=sub, x="bin", y="value", ax=ax, **hue)
            ax.set_yscale("log")
            ax.legend(fontsize=8, title="")
        ax.set_xlabel(f"relative position (0-99; {longest} characters)")
        ax.set_ylabel("mean ||dL / dh_t||, h_t = [h_fwd; h_bwd]")
        ax.set_title(
            "gradient norms at initialisation"
            if moment == "init"
            else f"... at 95 % training accuracy (models that got there, {int(sizes[-1])} examples)"
        )
    ax = axes[2, 2]
    ratios = df[df["measure"].isin(["ratio_init", "ratio_95"]) & (df["value"] > 0)]
    ratios = ratios.assign(
        moment=ratios["measure"].map({"ratio_init": "initialisation", "ratio_95": "95 % train acc."})
    )
    sns.stripplot(data=ratios, x="model", y="value", hue="moment", order=models, dodge=True, ax=ax, size=6)
    ax.set_yscale("log")
    ax.axhline(1.0, color="grey", ls="--", lw=0.8)
    ax.set_xlabel("")
    ax.tick_params(axis="x", rotation=20)
    ax.set_ylabel("vanishing ratio ||dL/dh_mid|| / ||dL/dh_end||")
    ax.set_title("vanishing ratio (every position and size)")
    ax.legend(fontsize=8, title="")
    fig.tight_layout()
    return fig


def _keywords(df: pd.DataFrame) -> list[str]:
    return str(df["keywords"].iloc[0]).split("|")


def _classes(df: pd.DataFrame) -> int:
    return len(_keywords(df))


def _span_fraction(df: pd.DataFrame) -> tuple[float, int]:
    longest = df.loc[df["measure"] == "nwi", "length"]
    longest = int(longest.max()) if len(longest) else int(df["length"].max())
    return int(df["span"].iloc[0]) / longest, longest


def with_paper(df: pd.DataFrame) -> pd.DataFrame:
    """Our accuracy per position, length and training size and our ratios beside Maini et al.'s Results table and
    Table 2 (their tasks named)."""
    acc = accuracy(df)
    r0, r95 = _value(df, "ratio_init"), _value(df, "ratio_95")
    span, corpus = int(df["span"].iloc[0]), df["corpus"].iloc[0]
    rows = []
    order = sorted(acc.index, key=lambda key: (key[0], POOLS.index(key[1]), key[2]))  # size, the pools' order, length
    for (size, pool, length), here in acc.loc[order].iterrows():
        at_95 = r95[(r95["pool"] == pool) & (r95["train_size"] == size)]["value"]
        at_init = r0[(r0["pool"] == pool) & (r0["train_size"] == size)]["value"]
        rows.append({
            "source": f"ours: {corpus} keywords, N={int(size)}, length {int(length)} (mid: the span "
                      f"{(int(length) - span) // 2} characters from each end)",
            "model": LABELS[pool], "text alone (%)": np.nan,
            **{f"{p} (%)": 100 * here.get(p, np.nan) for p in POSITIONS},
            "ratio init": at_init.median(), "ratio at 95 %": at_95.median(),
        })  # fmt: skip
    for data, settings in MAINI_RESULTS.items():
        for k, size in enumerate(RESULTS_SIZES):
            if size == "2K":
                continue
            for pool, alone, mid, right in zip(POOLS, settings["alone"], settings["mid"], settings["right"]):
                rows.append({
                    "source": f"Maini et al. {data}, {size} (mid / end: in the middle / on the right of Wikipedia)",
                    "model": PAPER_LABELS[pool], "text alone (%)": alone[k], "mid (%)": mid[k], "end (%)": right[k],
                })  # fmt: skip
    by_size = sorted(table2_ratios(), key=lambda r: MAINI_SIZES.index(r[1]))  # size by size, models in table order
    rows += [{"source": f"Maini et al. Table 2, {size}", "model": model, "ratio at 95 %": ratio}
             for model, size, ratio in by_size]  # fmt: skip
    return pd.DataFrame(rows)


def findings(df: pd.DataFrame) -> dict:
    """Maini et al.'s claims, each computed on the largest training size, length by length (thresholds: RIGHT;
    `at_chance` and `margin`: NOISE binomial standard errors, MIN_GAP):

    ends_right  the last-state model is right (>= RIGHT) at the start and the end at every length
    middle      per length: the last state's accuracy in the middle, and "at chance", "below its ends" (by more
                than the margin) or "as at its ends"
    beaten      per length: the pooled models' lowest and highest accuracy in the middle, and whether every one
                beats the last state there by more than the margin
    spread      per pooled model (with two positions or more): its largest gap between positions, at which
                length, and whether any gap is beyond the margin (then the largest such gap)
    ratio_init  the median vanishing ratio at initialisation per pooling
    """
    acc = accuracy(df)
    size = int(acc.index.get_level_values("train_size").max())
    acc = acc.loc[size]
    pools = [p for p in POOLS if p in set(acc.index.get_level_values("pool"))]
    chance = 1 / _classes(df)
    out = {"size": size, "chance": chance, "span": int(df["span"].iloc[0]), "middle": {}, "beaten": {}, "spread": {}}
    if "last" in pools:
        last = acc.loc["last"]
        ends = [p for p in ("start", "end") if p in last.columns]
        out["ends"] = last[ends] if ends else None
        out["ends_right"] = bool(ends) and bool((last[ends] >= RIGHT).all().all())
        for length, row in last.iterrows():
            if "mid" not in last.columns:
                break
            a, n = row["mid"], row["n"]
            end = row[ends].min() if ends else np.nan
            verdict = (
                "at chance" if at_chance(a, chance, n)
                else "below its ends" if ends and end - a > margin(a, end, n)
                else "as at its ends" if ends else "above chance"
            )  # fmt: skip
            out["middle"][int(length)] = (a, verdict)
            pooled = [acc.loc[(p, length), "mid"] for p in pools if p != "last"]
            if pooled:
                out["beaten"][int(length)] = (min(pooled), max(pooled), all(q - a > margin(a, q, n) for q in pooled))
    positions = [p for p in POSITIONS if p in acc.columns]
    for pool in (p for p in pools if p != "last" and len(positions) > 1):
        sub = acc.loc[pool]
        hi, lo = sub[positions].max(axis=1), sub[positions].min(axis=1)
        gaps = hi - lo
        beyond = gaps[[gaps[L] > margin(hi[L], lo[L], sub.loc[L, "n"]) for L in gaps.index]]
        length = beyond.idxmax() if len(beyond) else gaps.idxmax()
        out["spread"][pool] = (float(gaps[length]), int(length), bool(len(beyond)))
    out["ratio_init"] = _value(df, "ratio_init").groupby("pool")["value"].median()
    return out


def _points(gap: float) -> str:
    return f"{100 * gap:.0f} point" + ("" if round(100 * gap) == 1 else "s")


def _pct(values) -> str:
    lo, hi = 100 * min(values), 100 * max(values)
    return f"{lo:.0f} %" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f} %"


def caption(df: pd.DataFrame) -> str:
    if df.empty or not (df["measure"] == "accuracy").any():
        return "No classifiers were trained."
    f = findings(df)
    size, span, chance = f["size"], f["span"], f["chance"]
    parts = [
        f"A {_classes(df)}-class task: which keyword ({', '.join(_keywords(df))}) a {span}-character span holds, the "
        "span at the start, middle or end of irrelevant corpus text; test accuracy per position and length "
        f"(chance {100 * chance:.0f} %). Claims below are for {size} training examples; two accuracies differ when "
        f"they are more than {NOISE} binomial standard errors and {100 * MIN_GAP:.0f} points apart, one is at chance "
        f"within {NOISE} standard errors of it, and a model is right at a position at {100 * RIGHT:.0f} % or more."
    ]
    carries, not_here = [], []
    if f.get("ends") is not None:
        ends = f["ends"]
        summary = ", ".join(f"{p} {_pct(ends[p])}" for p in ends.columns)
        if f["ends_right"]:
            parts.append(f"The last-state BiLSTM is right at the ends at every length ({summary}).")
        else:
            parts.append(
                f"The last-state BiLSTM is not right at the ends ({summary}): under-trained, so its accuracy in the "
                "middle says nothing about position; the comparison below does not test Maini et al.'s claim."
            )
    if f["middle"]:
        items = "; ".join(
            f"length {L} (the span {(L - span) // 2} characters from each end) {100 * a:.0f} % ({verdict})"
            for L, (a, verdict) in f["middle"].items()
        )
        parts.append(f"In the middle the last-state BiLSTM reaches: {items}.")
        longest = max(f["middle"])
        verdict = f["middle"][longest][1]
        if f.get("ends_right") and verdict in ("at chance", "below its ends"):
            fails = "fails in the middle" if verdict == "at chance" else "loses accuracy in the middle"
            carries.append(f"the last state {fails} and is right at the ends (length {longest})")
        elif f.get("ends_right"):
            not_here.append(f"the last state's failure in the middle (as right there as at the ends, length {longest})")
    if f["beaten"]:
        beat = [L for L, (_, _, b) in f["beaten"].items() if b]
        items = ", ".join(f"{_pct(v[:2])} at length {L}" for L, v in f["beaten"].items())
        verdict = (
            "every one of them beats the last state there at every length" if len(beat) == len(f["beaten"])
            else f"every one beats the last state there at length {', '.join(map(str, beat))} only" if beat
            else "not all of them beat the last state there at any length"
        )  # fmt: skip
        parts.append(f"The pooled models reach {items} in the middle: {verdict}.")
    if f["spread"]:
        flat = [p for p, (_, _, moved) in f["spread"].items() if not moved]
        moved = [p for p in f["spread"] if p not in flat]
        said = []
        if flat:
            gap = max(f["spread"][p][0] for p in flat)
            said.append(
                f"{', '.join(LABELS[p] for p in flat)} as accurate at every position within noise (largest gap "
                f"{_points(gap)})"
            )
        if moved:
            said.append(
                "accuracy depending on position for "
                + ", ".join(
                    f"{LABELS[p]} ({_points(f['spread'][p][0])} at length {f['spread'][p][1]})" for p in moved
                )  # fmt: skip
            )
        parts.append(f"Pooled: {'; '.join(said)}.")
        if flat:
            which = f" ({', '.join(LABELS[p] for p in flat)})" if moved else ""
            carries.append(f"pooling's indifference to position{which}")
        if moved:
            not_here.append(f"pooling's indifference to position for {', '.join(LABELS[p] for p in moved)}")
    r0 = f["ratio_init"]
    if "last" in r0.index and len(r0.drop(index="last")):
        others = r0.drop(index="last")
        fold = others.min() / r0["last"] if r0["last"] > 0 else np.inf
        orders = int(np.floor(np.log10(fold))) if fold > 0 else 0
        parts.append(
            f"At initialisation the vanishing ratio (middle over the two ends) is {r0['last']:.1g} for the last-state "
            f"model and {others.min():.2g} to {others.max():.2g} for the pooled ones"
            + (f": {orders} orders of magnitude below the smallest." if orders >= 1 else ": not 10x below them.")
        )
        claim = "a vanishing ratio orders of magnitude smaller without pooling at initialisation"
        (carries if orders >= 2 else not_here).append(claim)
    r95 = _value(df[df["train_size"] == size], "ratio_95")
    r95 = {p: r95.loc[r95["pool"] == p, "value"] for p in POOLS if p in set(r95["pool"])}
    if any(v.notna().any() for v in r95.values()):
        (b_lo, b_hi), (p_lo, p_hi) = table2_range("BiLSTM"), table2_range(exclude="BiLSTM")
        parts.append(
            "Vanishing ratio when the running training accuracy first reached 95 % (Table 2's moment; median over "
            "the position settings that got there): "
            + ", ".join(
                f"{LABELS[p]} {v.median():.2g} ({v.notna().sum()} of {len(v)})"
                if v.notna().any()
                else f"{LABELS[p]} never"
                for p, v in r95.items()
            )  # fmt: skip
            + f" (Maini et al.: BiLSTM {b_lo:.2g} to {b_hi:.2g}, pooled {p_lo:.2g} to {p_hi:.2g})."
        )
    diverged = int((df["measure"] == "diverged").sum())
    if diverged:
        parts.append(f"{diverged} classifier(s) diverged and are left out.")
    if carries:
        parts.append(
            f"What carries over from Maini et al. (sentiment and topic classification of words, 1K-10K examples): "
            f"{'; '.join(carries)}."
        )
    if not_here:
        parts.append(f"What does not carry over here: {'; '.join(not_here)}.")
    parts.append("The accuracies themselves do not compare: another task, characters, fewer examples.")
    return " ".join(parts)


def notes(df: pd.DataFrame) -> list[str]:
    return [
        "Maini et al. train with Adam until early stopping; here RMSProp (the suite's one loop, charlm.train.fit) "
        "with a budget of examples seen, so a slow learner may stop before it would have succeeded.",
        "The 95 % moment uses the running accuracy of the last epoch's minibatches, each scored before its update "
        "(Maini et al. re-score the training set every 3 batches); the ratio is measured on a fixed batch of the "
        "longest training examples. A model that never gets there has no ratio at 95 %.",
        "NWI is computed for the largest training size, on test examples of the longest length, one seed.",
        "Every classifier has the same budget of examples seen (max_examples), chosen so that the last-state model "
        "is right at the ends; its accuracy in the middle is the one at that budget, not at convergence: a model "
        "that learns the middle later than the ends is counted as not having learned it yet.",
    ]


def summary(df: pd.DataFrame) -> str:
    if df.empty or not (df["measure"] == "accuracy").any():
        return "Pooling: no classifiers were trained."
    f = findings(df)
    if not f["middle"] or not f["beaten"]:
        return "Pooling: see the section (no last-state model, no pooled one or no middle setting)."
    L = max(f["middle"])
    a, verdict = f["middle"][L]
    lo, hi, _ = f["beaten"][L]
    ends = f"right at the ends, {_pct(f['ends'].loc[L])}" if f.get("ends_right") else "not right at the ends"
    return (
        f"Span in the middle of {L}-character texts ({(L - f['span']) // 2} characters from each end), {f['size']} "
        f"examples: last-state BiLSTM {100 * a:.0f} % ({verdict}; {ends}), pooled {_pct([lo, hi])} (Maini et al. "
        "IMDb (mid)+Wiki 10K: BiLSTM 50.3 %, pooled 84.1-86.8 %)"
    )


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
