"""Activations on windows of text, clean (`trace_windows`) or with chosen cells held fixed (`run_ablated`).

Both run many windows as one batch: the hand-written cells cost one Python step per character whatever the
batch, so 40 windows of 500 characters cost about what one window does. Row t of every array is the state
*after reading* character t of its window (the convention of `probes.features`); each window's state is warmed
up on the `warmup` characters before it, from zero at theirs, as `Context.trace` does.

Zeroing a cell ("ablation", as NeuroX confirms a neuron ranking) needs the state inside the recurrence, which no
hook on a fused kernel reaches: `run_zeroed` re-runs the layer loop one character at a time through each layer's
own `trace` and overwrites the state of the chosen units after every step, so the next step, the other units and the
softmax all see it. Zeroing holds every state of the unit at 0: for the LSTM family c_j and h_j together, which is
exact, as h_j = o_j tanh(c_j) (or tanh(c_j)) is 0 whenever c_j is. Mean-ablation holds each state at its mean over
clean text instead: zero may be a value the unit never takes (a counter's 0 is "start of line"), its mean is the
least informative value it does take. charlm/model.py is not changed.
"""

from __future__ import annotations

import numpy as np
import torch


def window_batch(ids: np.ndarray, starts: np.ndarray, length: int, warmup: int) -> np.ndarray:
    """(B, warmup + length) int64: each window with the `warmup` characters before it (starts >= warmup)."""
    starts = np.asarray(starts, dtype=np.int64)
    if (starts < warmup).any() or (starts + length > ids.size).any():
        raise ValueError(f"windows of {length} characters with {warmup} of warm-up do not fit {ids.size} characters")
    return np.stack([ids[s - warmup : s + length] for s in starts]).astype(np.int64)


def window_starts(n_chars: int, windows: int, length: int, warmup: int) -> np.ndarray:
    """`windows` starts spread evenly over a text of n_chars, each with its warm-up before it, every two windows at
    least `warmup` characters apart (so no two characters of different windows are neighbours)."""
    if windows < 1 or warmup + length > n_chars:
        raise ValueError(f"the text ({n_chars:,} characters) is shorter than one window with its warm-up")
    span = n_chars - warmup - length
    starts = warmup + np.linspace(0, span, windows).astype(np.int64)
    if windows > 1 and np.diff(starts).min() < length + warmup:
        raise ValueError(f"{windows} windows of {length} characters, {warmup} apart, do not fit {n_chars:,} characters")
    return starts


def more_windows(starts, at: np.ndarray, n_chars: int, length: int, warmup: int, extra: int) -> np.ndarray:
    """Starts of up to `extra` more windows, each beginning a quarter window before a position of `at` (spread
    evenly over them), kept only where it stays `warmup` characters away from `starts` and from each other."""
    taken = [int(s) for s in starts]
    new = []
    at = np.asarray(at)
    for position in at[np.linspace(0, at.size - 1, min(extra, at.size)).astype(np.int64)] if at.size else []:
        start = int(np.clip(position - length // 4, warmup, n_chars - length))
        if all(abs(start - s) >= length + warmup for s in taken):
            taken.append(start)
            new.append(start)
    return np.array(new, dtype=np.int64)


def cell_internal(names) -> str:
    """The internal a layer's cells are read from: the memory cell c where the layer has one, else its state h."""
    return "c" if "c" in names else "h"


def shown(values: np.ndarray, internal: str) -> tuple[np.ndarray, str]:
    """What a viewer draws for an internal, and its name: tanh(c) for the (unbounded) memory cell, else itself."""
    return (np.tanh(values), "tanh(c)") if internal == "c" else (values, internal)


@torch.no_grad()
def trace_windows(model, batch: np.ndarray, warmup: int) -> dict[str, np.ndarray]:
    """Every internal of every layer: {'layers.{l}.{name}': (B, length, H) float32}."""
    _, cache, _ = model.run_with_cache(torch.from_numpy(batch))
    return {k: v[:, warmup:].float().numpy() for k, v in cache.items()}


@torch.no_grad()
def run_ablated(
    model, batch: np.ndarray, layer: int, held: np.ndarray, fill: dict[str, np.ndarray] | None = None
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Forward with the units `held[b]` of `layer` held fixed in batch row b at every step: at 0 (zeroing), or at
    `fill[name][b]` for each state of the unit (mean-ablation passes each state's mean over clean text).

    batch (B, T) ids; held (B, H) bool (a row of False is the clean run); fill {state name: (B, H)} or None.
    Returns the log-probabilities of each next character, (B, T - 1), and that layer's states (`h`, and `c` for the
    LSTM family), each (B, T, H).
    """
    ids = torch.from_numpy(np.asarray(batch, dtype=np.int64))
    B, T = ids.shape
    dtype = model.head.weight.dtype
    keep = torch.from_numpy(~np.asarray(held, dtype=bool)).to(dtype)  # (B, H)
    names = model.layers[layer].state_names
    fixed = {name: torch.zeros_like(keep) if fill is None or name not in fill
             else torch.as_tensor(np.asarray(fill[name]), dtype=dtype) * (1 - keep) for name in names}  # fmt: skip
    state = model.init_state(B)
    outputs, states = [], {name: [] for name in names}
    for t in range(T):
        inp = ids[:, t : t + 1]  # (B, 1): the first layer reads ids as a row lookup (charlm.model.project)
        for l, module in enumerate(model.layers):
            out, s, _ = module.trace(inp, state[l], keep=False)
            if l == layer:
                s = tuple(v * keep + fixed[name] for name, v in zip(names, s))  # every state of the unit: h (and c)
                out = s[names.index("h")][:, None]  # the layer's output is its h
                for name, v in zip(names, s):
                    states[name].append(v)
            state[l] = s
            inp = out  # eval mode: dropout is the identity
        outputs.append(inp)
    logp = torch.log_softmax(model.head(torch.cat(outputs, 1)), -1)  # (B, T, V)
    target_logp = logp[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
    return target_logp.numpy(), {name: torch.stack(v, 1).numpy() for name, v in states.items()}


def run_zeroed(model, batch: np.ndarray, layer: int, zero: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """`run_ablated` with the units `zero[b]` of `layer` held at 0 in batch row b."""
    return run_ablated(model, batch, layer, zero)
