"""Truncated-BPTT batching: B parallel contiguous streams cut into windows of `unroll` steps.

As in char-rnn: the split is cut into `batch_size` equal contiguous streams; batch k holds
window k of every stream, so the hidden state carried from batch k to k+1 continues each
stream exactly where it stopped.
"""

from __future__ import annotations

import numpy as np

from .errors import UserError


def stream_windows(ids: np.ndarray, batch_size: int, unroll: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets as (n_batches, B, unroll) int64 arrays; the tail that fills no window is dropped."""
    n = (ids.size - 1) // batch_size  # steps per stream
    n_batches = n // unroll
    if n_batches == 0:
        raise UserError(f"split of {ids.size} chars is too short for batch {batch_size} x unroll {unroll}")
    steps = n_batches * unroll
    x = ids[: batch_size * n].reshape(batch_size, n)[:, :steps]
    y = ids[1 : batch_size * n + 1].reshape(batch_size, n)[:, :steps]
    x = x.reshape(batch_size, n_batches, unroll).transpose(1, 0, 2)  # (n_batches, B, T)
    y = y.reshape(batch_size, n_batches, unroll).transpose(1, 0, 2)
    return np.ascontiguousarray(x, dtype=np.int64), np.ascontiguousarray(y, dtype=np.int64)
