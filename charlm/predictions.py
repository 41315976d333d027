"""Predictions: the one contract every model answers through.

For a split of n characters, row t predicts character t + 1 from characters 0..t of the split,
read as one continuous stream (t = 0..n-2). Neural nets, n-grams and n-NNs all write this, so every
analysis that reads Predictions works for every model. A file holds, for T = n - 1 positions:

    target_logp  (T,)    float32  log-probability of the true next character (exact)
    targets      (T,)    int16    vocabulary index of the true next character
    logp         (R, V)  float16  log-probabilities over the vocabulary at the fixed sample of rows in
                                  `positions` (SAMPLE_POSITIONS evenly spaced rows: what every analysis reads),
                                  or at every row (R = T) when asked for (`python -m charlm.predict --full`)
    argmax       (R,)    uint8    the most likely next character at those rows (exact)
    source_digest        what they were computed from: the checkpoint's sha256, or an n-gram's id and size

Storage and its error bound. Cross-entropy, p(correct), error masks and argmax come from the exact
columns, so they carry no storage error at all. The full distributions are float16, rounded to
nearest: each stored log-probability a' of an exact a satisfies |a' - a| <= e(a) = max(u |a|, t) with
u = 2^-11, and t = 2^-25 below float16's normal range (|a| < 2^-14, a near-certain character: its subnormals
are spaced 2^-24 apart, so -5e-10 is stored as 0). A KL divergence KL(p || q) = sum_v p_v (a_v - b_v)
computed from stored rows then errs by at most

    B = sum_v p_v [ (exp(e(a_v)) - 1) |a_v - b_v| + exp(e(a_v)) (e(a_v) + e(b_v)) ]    (per row)

(`kl_error_bound`; tests check the actual error against it on a trained model's predictions). Keeping
distributions at a sample of 20,000 rows and exact columns everywhere costs about 6 MB per model on War and Peace
(every row in float16: 57 MB), and no analysis number changes: KL, entropy, agreement and t-SNE were always
computed at that sample.
"""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from corpora.atomic import atomic_path
from corpora.errors import UserError

FORMAT = 3  # 3: the sample is 40 blocks of 500 positions (2: 20,000 single positions spread evenly)
LN2 = float(np.log(2.0))
FLOAT16_UNIT = 2.0**-11  # float16 relative rounding error (half a unit in the last place)
FLOAT16_TINY = 2.0**-25  # float16 absolute rounding error below its normal range (half the subnormal spacing)
SAMPLE_BLOCKS = 40  # the sample every model keeps distributions at: this many blocks of consecutive positions,
SAMPLE_BLOCK = 500  # each this long, evenly spaced over the split (a snapshot is scored on them alone: see predict.py)
SAMPLE_POSITIONS = SAMPLE_BLOCKS * SAMPLE_BLOCK  # 20,000 rows of full distributions (KL, agreement, t-SNE)


class CorruptArtifact(UserError):
    """An artifact on disk that cannot be read back (truncated, damaged, or of another format)."""

    def __init__(self, path: str | Path, why: str):
        self.path = Path(path)
        super().__init__(f"{path} is damaged ({why})")


def sample_positions(n_positions: int, blocks: int = SAMPLE_BLOCKS, block: int = SAMPLE_BLOCK) -> np.ndarray:
    """The fixed sample of rows every model stores distributions for: `blocks` runs of `block` consecutive
    positions, evenly spaced over the split (every position of a split shorter than the sample).

    Blocks, not single positions spread evenly: a model reads a block after a short warm-up, so a training
    snapshot is scored on the sample alone (a tenth of the split's characters, `charlm.predict`) instead of the
    whole split, and its distributions still come from the state the whole text before would have given
    (within the warm-up's 6e-5 nats, charlm.predict.WARMUP)."""
    if n_positions <= blocks * block:
        return np.arange(n_positions, dtype=np.int64)
    starts = np.linspace(0, n_positions - block, blocks).round().astype(np.int64)
    return (starts[:, None] + np.arange(block, dtype=np.int64)[None, :]).ravel()


@dataclass(frozen=True, eq=False)
class Predictions:
    target_logp: np.ndarray  # (T,) float32 log-probability of the true next character
    targets: np.ndarray  # (T,) int64 vocabulary index of the true next character
    argmax: np.ndarray  # (R,) int64 most likely next character at the rows of `logp` (exact)
    logp: np.ndarray  # (R, V) float16 log-probabilities: all rows, or the rows in `positions`
    positions: np.ndarray | None = None  # None: logp holds every row
    model_id: str = ""
    source_digest: str = ""  # the checkpoint's sha256 (or an n-gram's id and size) these were computed from
    sample_only: bool = False  # True: target_logp and targets too hold only the rows at `positions` (a snapshot)

    @property
    def vocab_size(self) -> int:
        return int(self.logp.shape[1])

    @property
    def n_positions(self) -> int:
        return int(self.targets.size)

    @property
    def complete(self) -> bool:
        """True when `logp` holds the distribution of every position."""
        return self.positions is None

    def nll_at(self, positions: np.ndarray) -> np.ndarray:
        """(K,) negative log-likelihood at split `positions` (a sample-only file holds those of its sample)."""
        positions = np.asarray(positions, dtype=np.int64)
        return self.nll[self.rows(positions)] if self.sample_only else self.nll[positions]

    @cached_property
    def nll(self) -> np.ndarray:
        """(T,) negative log-likelihood of each true character, in nats (exact); only the sample's with
        `sample_only`."""
        return -self.target_logp.astype(np.float64)

    @cached_property
    def p_correct(self) -> np.ndarray:
        """(T,) probability given to the true character (exact); an error is p_correct < 0.5 (Karpathy sec 4.3)."""
        return np.exp(-self.nll)

    def rows(self, positions: np.ndarray) -> np.ndarray:
        """Indices into `logp` / `argmax` of the given split positions (which must be stored)."""
        positions = np.asarray(positions, dtype=np.int64)
        if self.positions is None:
            return positions
        rows = np.minimum(np.searchsorted(self.positions, positions), self.positions.size - 1)
        if not np.array_equal(self.positions[rows], positions):
            raise UserError(f"predictions of {self.model_id} hold distributions only at their sample of positions")
        return rows

    def distributions(self, positions: np.ndarray | None = None) -> np.ndarray:
        """(K, V) float32 log-probabilities at `positions` (default: every stored row)."""
        if positions is None:
            return self.logp.astype(np.float32)
        return self.logp[self.rows(positions)].astype(np.float32)

    def argmax_at(self, positions: np.ndarray) -> np.ndarray:
        """(K,) the most likely next character at `positions` (exact)."""
        return self.argmax[self.rows(positions)]

    def cross_entropy(self, resamples: int = 100, seed: int = 0) -> tuple[float, float]:
        return bootstrap_mean(self.nll, resamples, seed)

    def summary(self, split: str, resamples: int = 100) -> str:
        """One line for the CLIs: cross-entropy in nats and bits per character with its bootstrap std."""
        mean, std = self.cross_entropy(resamples)
        return (
            f"{split} cross-entropy {mean:.4f} +- {std:.4f} nats/char = {mean / LN2:.4f} +- {std / LN2:.4f} "
            f"bits/char ({self.targets.size:,} positions)"
        )


def bootstrap_mean(values: np.ndarray, resamples: int = 100, seed: int = 0) -> tuple[float, float]:
    """Mean of `values` and the standard deviation of the mean over `resamples` bootstrap resamples.

    Karpathy et al. report the std of test cross-entropy from 100 bootstrap samples of positions.
    """
    values = np.asarray(values, dtype=np.float64)
    # the resamples gather from a float32 copy where it is exact (stored log-probabilities are float32): half the
    # memory, so the random reads mostly hit the cache (3x faster), and the same float64 values summed in the same order
    narrow = values.astype(np.float32)
    source = narrow if np.array_equal(narrow, values) else values
    rng = np.random.default_rng(seed)
    means = np.array([
        source[rng.integers(0, values.size, values.size)].astype(np.float64, copy=False).mean()
        for _ in range(resamples)
    ])  # fmt: skip
    return float(values.mean()), float(means.std(ddof=1))


def from_logprobs(
    logp: np.ndarray,
    targets: np.ndarray,
    model_id: str = "",
    source_digest: str = "",
    positions: np.ndarray | None = None,
) -> Predictions:
    """The stored form of exact (T, V) log-probabilities; `positions` keeps distributions for those rows only."""
    logp = np.asarray(logp)
    targets = np.asarray(targets, dtype=np.int64)
    if logp.ndim != 2 or logp.shape[0] != targets.size:
        raise ValueError(f"logp {logp.shape} and targets {targets.size} do not match")
    target_logp = logp[np.arange(targets.size), targets]
    rows = logp if positions is None else logp[np.asarray(positions, dtype=np.int64)]
    return from_parts(target_logp, targets, rows, positions, model_id, source_digest)


def from_parts(
    target_logp: np.ndarray,
    targets: np.ndarray,
    rows: np.ndarray,
    positions: np.ndarray | None = None,
    model_id: str = "",
    source_digest: str = "",
    sample_only: bool = False,
) -> Predictions:
    """The stored form from exact target log-probabilities (T,) and exact distributions (R, V) at `positions`;
    with `sample_only`, the targets and their log-probabilities are those of the sampled positions alone."""
    targets = np.asarray(targets, dtype=np.int64)
    rows = np.asarray(rows)
    expected = targets.size if positions is None else len(positions)
    if np.asarray(target_logp).shape != targets.shape or rows.ndim != 2 or rows.shape[0] != expected:
        raise ValueError(f"target_logp {np.shape(target_logp)}, rows {rows.shape}, targets {targets.size} do not match")
    if sample_only and (positions is None or targets.size != len(positions)):
        raise ValueError("sample-only predictions hold one target per sampled position")
    return Predictions(
        target_logp=np.asarray(target_logp, dtype=np.float32),
        targets=targets,
        argmax=rows.argmax(axis=1).astype(np.int64),
        logp=rows.astype(np.float16),
        positions=None if positions is None else np.asarray(positions, dtype=np.int64),
        model_id=model_id,
        source_digest=source_digest,
        sample_only=sample_only,
    )


def save(path: str | Path, preds: Predictions) -> Path:
    arrays = {
        "format": np.array(FORMAT),
        "target_logp": preds.target_logp.astype(np.float32),
        "targets": preds.targets.astype(np.int16),
        "argmax": preds.argmax.astype(np.uint8),
        "logp": preds.logp.astype(np.float16),
        "model_id": np.array(preds.model_id),
        "source_digest": np.array(preds.source_digest),
    }
    if preds.positions is not None:
        arrays["positions"] = preds.positions.astype(np.int64)
    if preds.sample_only:
        arrays["sample_only"] = np.array(True)
    with atomic_path(path, suffix=".tmp.npz") as tmp:
        np.savez(tmp, **arrays)
    return Path(path)


_LAST_READ: dict[tuple, Predictions] = {}  # the last file read, keyed by its identity (see load)


def load(path: str | Path) -> Predictions:
    """Read a predictions file; a missing one is a UserError, a damaged one a CorruptArtifact naming it.

    The file read last is kept (arrays read-only), so the usual pair, a producer that validates a cached file
    and the caller that then reads it, costs one read. Every write is an atomic rename: a new file, a new key.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"predictions {path} do not exist")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key in _LAST_READ:
        return _LAST_READ[key]
    preds = _read(path)
    for array in (preds.target_logp, preds.targets, preds.argmax, preds.logp, preds.positions):
        if array is not None:
            array.flags.writeable = False
    _LAST_READ.clear()
    _LAST_READ[key] = preds
    return preds


def _read(path: Path) -> Predictions:
    try:
        with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as f:
            if "format" not in f.files or int(f["format"]) != FORMAT:
                raise CorruptArtifact(path, f"not a predictions file of format {FORMAT}")
            positions = f["positions"] if "positions" in f.files else None
            preds = Predictions(
                target_logp=f["target_logp"],
                targets=f["targets"].astype(np.int64),
                argmax=f["argmax"].astype(np.int64),
                logp=f["logp"],
                positions=positions,
                model_id=str(f["model_id"]),
                source_digest=str(f["source_digest"]),
                sample_only="sample_only" in f.files and bool(f["sample_only"]),
            )
    except CorruptArtifact:
        raise
    except (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as err:
        raise CorruptArtifact(path, f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}") from None
    rows = preds.n_positions if positions is None else positions.size
    if preds.sample_only and preds.n_positions != rows:
        raise CorruptArtifact(path, "a sample-only file whose targets are not its sample's")
    if not (preds.target_logp.size == preds.n_positions and preds.logp.shape[0] == preds.argmax.size == rows):
        raise CorruptArtifact(path, "its arrays disagree in length")
    return preds


# ----------------------------------------------------------------------------------------- divergences


def kl_divergence(logp: np.ndarray, logq: np.ndarray) -> np.ndarray:
    """(K,) KL(p || q) in nats per row, from (K, V) log-probabilities."""
    logp, logq = np.asarray(logp, np.float64), np.asarray(logq, np.float64)
    return (np.exp(logp) * (logp - logq)).sum(axis=1)


def symmetric_kl(logp: np.ndarray, logq: np.ndarray) -> np.ndarray:
    """(K,) KL(p || q) + KL(q || p), the symmetric divergence of Karpathy et al. Fig 5 (right)."""
    logp, logq = np.asarray(logp, np.float64), np.asarray(logq, np.float64)
    return ((np.exp(logp) - np.exp(logq)) * (logp - logq)).sum(axis=1)


def kl_error_bound(logp: np.ndarray, logq: np.ndarray, unit: float = FLOAT16_UNIT) -> np.ndarray:
    """(K,) the bound B of the module docstring on |KL computed from float16 rows - exact KL|, per row."""
    a, b = np.asarray(logp, np.float64), np.asarray(logq, np.float64)
    err_a, err_b = np.maximum(unit * np.abs(a), FLOAT16_TINY), np.maximum(unit * np.abs(b), FLOAT16_TINY)
    grow = np.exp(err_a)
    return (np.exp(a) * ((grow - 1) * np.abs(a - b) + grow * (err_a + err_b))).sum(axis=1)
