"""Where a probe is tested and what it is measured against: contiguous block splits, Hewitt and Liang's (2019)
control tasks, and the last-k-characters baseline (the rules are in probes/probe.py's docstring).

block_split          the test blocks of text, every `test_every`-th: no neighbouring characters straddle the split
context_types        a control task's type of each position: the byte read there, or the trigram ending there
control_task         one fixed random label per type, drawn from the real labels' distribution
control_informative  did a control leave room to measure (neither at chance nor at its ceiling)?
last_chars           the one-hot of the last k bytes read: the input of the baseline probe
"""

from __future__ import annotations

import numpy as np


def block_split(groups: np.ndarray, test_every: int = 4) -> np.ndarray:
    """(n,) bool: True for the rows of every `test_every`-th block (by block id), the test blocks; the rest train.

    Blocks are separate windows of text, so no pair of neighbouring characters straddles the split."""
    return np.asarray(groups) % test_every == test_every - 1


def context_types(text: np.ndarray, positions: np.ndarray, context: int = 1) -> np.ndarray:
    """The control task's type of each position: the byte read there (context 1), or it with the bytes before
    it (context 3: the trigram ending there, a harder control, as ANCHORS suggests for characters)."""
    text = np.asarray(text, dtype=np.int64)
    positions = np.asarray(positions)
    if (positions < context - 1).any():
        raise ValueError(f"a context of {context} characters needs {context - 1} characters before every position")
    out = np.zeros(positions.shape, dtype=np.int64)
    for back in range(context - 1, -1, -1):  # oldest byte first
        out = out * 256 + text[positions - back]
    return out


def last_chars(text: np.ndarray, positions: np.ndarray, k: int) -> np.ndarray:
    """(n, k * V) float32: the last k bytes read at each position (the byte at the position and the k - 1 before it),
    each one-hot over the V byte values of `text`: the input of the last-k-characters baseline probe."""
    text = np.asarray(text, dtype=np.uint8)
    positions = np.asarray(positions).ravel()
    if (positions < k - 1).any():
        raise ValueError(f"the last {k} characters need {k - 1} characters before every position")
    values, index = np.unique(text, return_inverse=True)
    out = np.zeros((positions.size, k * values.size), dtype=np.float32)
    rows = np.arange(positions.size)
    for back in range(k):
        out[rows, back * values.size + index[positions - back]] = 1.0
    return out


def control_informative(control_score: float, kind: str, margin: float = 0.1) -> bool:
    """Did a control task leave room to measure? Its score lies at least `margin` above chance (balanced accuracy
    0.5, R^2 0) and `margin` below the ceiling 1: a control at its ceiling makes every selectivity about 0 or below,
    one at its floor makes selectivity the task score itself."""
    chance = 0.5 if kind == "binary" else 0.0
    return bool(np.isfinite(control_score) and chance + margin <= control_score <= 1.0 - margin)


def control_task(types: np.ndarray, labels: np.ndarray, kind: str, test: np.ndarray, seed: int = 0) -> np.ndarray:
    """Hewitt and Liang's control task: each type gets one fixed label drawn at random from the empirical
    distribution of the real labels, the same map in every split (types: from `context_types`).

    For binary features a draw that leaves one split with a single class (a rare feature over few types) is
    redrawn with the next seed, so that the control is a task at all.
    """
    unique, inverse = np.unique(np.asarray(types), return_inverse=True)
    labels = np.asarray(labels)
    for attempt in range(100):
        rng = np.random.default_rng(seed + attempt)
        control = rng.choice(labels, size=unique.size)[inverse]  # i.i.d. from the empirical label distribution
        if kind != "binary" or all(np.unique(control[part]).size > 1 for part in (~test, test)):
            break
    return control
