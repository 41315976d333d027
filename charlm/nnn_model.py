"""The n-NN of Karpathy et al. (2016) sec 4.3 as a network: its layers, its input rows, and its scoring.

A one-hidden-layer tanh network on the one-hot vectors of the last n characters (`NNN`); `context_rows` builds its
input for every position of a split, `distinct_logprobs` scores each distinct context once, `load_nnn` rebuilds one
from its checkpoint. Its configuration, training and Predictions are charlm/nnn.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from corpora.errors import UserError

from .checkpoint import load_payload
from .model import INIT_RANGE

EVAL_CHUNK = 50_000  # rows scored at once


class NNN(nn.Module):
    """h = tanh(W [onehot(x_{t-n+1}); ...; onehot(x_t)] + b), logits = U h + c.

    The first layer is stored as an embedding of n * V + 1 rows: row i * V + v is the column of W
    that the one-hot of byte v at position i (0 = the latest character) selects, so summing n
    looked-up rows IS the product of W with the concatenated one-hot vector, exactly the same
    function without the sparse matmul. Row n * V is the "no character" input before a split's
    start: a zero one-hot selects nothing, so that row is fixed at zero (padding_idx: no gradient).
    """

    def __init__(self, n: int, vocab_size: int, hidden: int):
        super().__init__()
        self.n, self.vocab_size, self.hidden = n, vocab_size, hidden
        self.pad = n * vocab_size
        self.inp = nn.Embedding(n * vocab_size + 1, hidden, padding_idx=self.pad)
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.out = nn.Linear(hidden, vocab_size)
        with torch.no_grad():
            for p in self.parameters():
                p.uniform_(-INIT_RANGE, INIT_RANGE)
            self.inp.weight[self.pad].zero_()

    def config(self) -> dict:
        return {"n": self.n, "vocab_size": self.vocab_size, "hidden": self.hidden}

    def forward(self, ctx: torch.Tensor) -> torch.Tensor:
        """ctx (B, n) first-layer row indices (see `context_rows`) -> logits (B, V)."""
        return self.out(torch.tanh(self.inp(ctx).sum(1) + self.bias))


def context_rows(ids: np.ndarray, n: int, vocab_size: int) -> torch.Tensor:
    """(len(ids) - 1, n) int64 first-layer rows: row t holds ids[t - i] at slot i, the pad row where t - i < 0."""
    ids = torch.from_numpy(np.asarray(ids, dtype=np.int64))
    t = torch.arange(ids.numel() - 1)
    rows = torch.empty((t.numel(), n), dtype=torch.int64)
    for i in range(n):
        src = t - i
        rows[:, i] = torch.where(src >= 0, ids[src.clamp(min=0)] + i * vocab_size, n * vocab_size)
    return rows


@torch.no_grad()
def distinct_logprobs(model: NNN, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The log-probabilities of each distinct context of `ids` once: (C, V) float32, and (N - 1,) the context of
    each position, so that row t of the Predictions is logp[ctx_of[t]].

    An n-NN's prediction depends on its n-character context alone, and a split holds far fewer distinct contexts than
    positions (War and Peace's test split: 8,114 for n = 3, 113,048 for n = 6, of 330,000), so each is computed once.
    A row's numbers do not depend on which other rows share its batch (tests/test_nnn.py checks them equal bit for bit
    with every position's own row, and the report's Predictions were checked the same against the earlier scoring).
    """
    model.eval()
    rows = context_rows(ids, model.n, model.vocab_size)
    ctx_of = context_ids(rows)
    first = np.empty(int(ctx_of.max()) + 1 if ctx_of.size else 0, dtype=np.int64)
    first[ctx_of] = np.arange(ctx_of.size)  # any position of a context: they all hold the same row
    distinct = rows[torch.from_numpy(first)]
    out = np.empty((distinct.shape[0], model.vocab_size), dtype=np.float32)
    for s in range(0, distinct.shape[0], EVAL_CHUNK):
        out[s : s + EVAL_CHUNK] = torch.log_softmax(model(distinct[s : s + EVAL_CHUNK]), dim=-1).numpy()
    return out, ctx_of


def predict_logprobs(model: NNN, ids: np.ndarray) -> np.ndarray:
    """(N,) ids -> (N - 1, V) float32 log-probabilities of each next id (the Predictions contract)."""
    logp, ctx_of = distinct_logprobs(model, ids)
    return logp[ctx_of]


@torch.no_grad()
def evaluate(model: NNN, rows: torch.Tensor, targets: torch.Tensor) -> float:
    """Mean cross-entropy in nats over all positions."""
    was = model.training
    model.eval()
    total = 0.0
    for s in range(0, rows.shape[0], EVAL_CHUNK):
        total += F.cross_entropy(model(rows[s : s + EVAL_CHUNK]), targets[s : s + EVAL_CHUNK], reduction="sum").item()
    model.train(was)
    return total / rows.shape[0]


def load_nnn(path: str | Path) -> NNN:
    """Rebuild an n-NN from its checkpoint (weights_only); `model.meta` holds the rest of the payload."""
    return nnn_from_payload(load_payload(path), path)


def nnn_from_payload(payload: dict, path: str | Path) -> NNN:
    """The n-NN of a checkpoint's loaded payload (`path` names it in errors)."""
    if payload.get("kind") != "nnn":
        raise UserError(f"checkpoint {path} is not an n-NN checkpoint (kind {payload.get('kind')!r})")
    try:
        model = NNN(**payload["config"])
        model.load_state_dict(payload["state_dict"])
    except (TypeError, RuntimeError) as err:
        raise UserError(f"checkpoint {path} does not match its own config ({str(err).splitlines()[0]})") from None
    model.meta = {k: v for k, v in payload.items() if k != "state_dict"}
    model.eval()
    return model


def context_ids(rows: torch.Tensor) -> np.ndarray:
    """(N,) the id of each row's context among the distinct rows of `rows` (N, n), in sorted order of the rows."""
    rows = rows.numpy()
    base = int(rows.max()) + 1 if rows.size else 1
    if rows.shape[1] * math.log2(max(base, 2)) >= 63:  # the mixed-radix key would overflow int64: compare rows whole
        return np.unique(rows, axis=0, return_inverse=True)[1].reshape(-1)
    key = np.zeros(rows.shape[0], dtype=np.int64)
    for i in range(rows.shape[1]):
        key = key * base + rows[:, i]
    return np.unique(key, return_inverse=True)[1].reshape(-1)
