"""Predictions: the one contract every model answers through.

For a split of n characters, `logp` is float32 (n - 1, V): row t holds the log-probabilities
over the byte vocabulary of character t + 1 given characters 0..t of the split, read as one
continuous stream. `targets` (n - 1,) are the true next characters. Neural nets, n-grams and
n-NNs all write this, so every analysis that reads Predictions works for every model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from corpora.atomic import atomic_path
from corpora.errors import UserError

LN2 = float(np.log(2.0))


@dataclass(frozen=True, eq=False)
class Predictions:
    logp: np.ndarray  # (T, V) float32 log-probabilities of the next character
    targets: np.ndarray  # (T,) vocabulary index of the true next character
    model_id: str = ""

    @cached_property
    def nll(self) -> np.ndarray:
        """(T,) negative log-likelihood of each true character, in nats."""
        return -self.logp[np.arange(self.targets.size), self.targets].astype(np.float64)

    @cached_property
    def p_correct(self) -> np.ndarray:
        return np.exp(-self.nll)

    def cross_entropy(self, resamples: int = 100, seed: int = 0) -> tuple[float, float]:
        return bootstrap_mean(self.nll, resamples, seed)

    def summary(self, split: str, resamples: int = 100) -> str:
        """One line for the CLIs: cross-entropy in nats and bits per character with its bootstrap std."""
        mean, std = self.cross_entropy(resamples)
        return (
            f"{split} cross-entropy {mean:.4f} +- {std:.4f} nats/char = {mean / LN2:.4f} +- {std / LN2:.4f} bits/char "
            f"({self.targets.size:,} positions)"
        )


def bootstrap_mean(values: np.ndarray, resamples: int = 100, seed: int = 0) -> tuple[float, float]:
    """Mean of `values` and the standard deviation of the mean over `resamples` bootstrap resamples.

    Karpathy et al. report the std of test cross-entropy from 100 bootstrap samples of positions.
    """
    values = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = np.array([values[rng.integers(0, values.size, values.size)].mean() for _ in range(resamples)])
    return float(values.mean()), float(means.std(ddof=1))


def save(path: str | Path, logp: np.ndarray, targets: np.ndarray, model_id: str = "") -> Path:
    logp = np.asarray(logp, dtype=np.float32)
    if logp.ndim != 2 or logp.shape[0] != len(targets):
        raise ValueError(f"logp {logp.shape} and targets {len(targets)} do not match")
    with atomic_path(path, suffix=".tmp.npz") as tmp:
        np.savez(tmp, logp=logp, targets=np.asarray(targets, dtype=np.int16), model_id=np.array(model_id))
    return Path(path)


def load(path: str | Path) -> Predictions:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"predictions {path} do not exist")
    try:
        with np.load(path, allow_pickle=False) as f:
            return Predictions(f["logp"], f["targets"].astype(np.int64), str(f["model_id"]))
    except (ValueError, KeyError, OSError) as err:
        raise UserError(f"predictions {path} are corrupt ({err})") from None
