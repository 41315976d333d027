"""What every recurrent layer of the suite shares: the input projection and the traced-layer protocol.

A layer takes (B, T, d) features or, as the first layer, (B, T) byte ids read as one-hot vectors, and a state
(a tuple of (B, H) tensors named by `state_names`); `trace(x, state)` returns its output, its last state and
every internal named (each (B, T, H)), `forward(x, state, fused)` the output and state (a fused or scanned kernel
where the layer has one, proven equal to `trace` by the tests), and `n_params(d_in, size, **options)` its count.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


def project(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x W^T + b for a layer's input: features (B, T, d), or the first layer's byte ids (B, T).

    A one-hot vector times W^T is a column of W, so ids are a row lookup instead of a (B*T x V) product: the same
    numbers and gradients (tests compare both), at the cost of a gather. It halves the arithmetic of the
    hand-written cells of the 128 row, whose input projection is as large as their recurrence.
    """
    if x.dtype == torch.long:
        out = F.embedding(x, weight.t())  # (B, T, out)
        return out + bias if bias is not None else out
    return F.linear(x, weight, bias)


def features(x: torch.Tensor, vocab_size: int, dtype: torch.dtype) -> torch.Tensor:
    """The one-hot (B, T, V) of byte ids, for torch's fused kernels, which take only features; features pass."""
    return F.one_hot(x, vocab_size).to(dtype) if x.dtype == torch.long else x


class TracedLayer(nn.Module):
    """A layer whose forward is its hand-written `trace` without the cache (layers with a fused kernel
    fall back to it when `fused` is off; the others ignore `fused`)."""

    def forward(self, x, state, fused=True):
        out, state, _ = self.trace(x, state, keep=False)
        return out, state
