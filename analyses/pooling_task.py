"""The pooling analysis's task (analyses/pooling.py): keywords chosen from the corpus, examples with the class-bearing
span at the start, middle or end of keyword-free text, and Maini et al.'s Normalised Word Importance."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import torch
import torch.nn.functional as F

from charlm.classifier import Examples
from charlm.gradients import to_bins
from corpora.errors import UserError

from .context import MissingInput

POSITIONS = ("start", "mid", "end")


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
