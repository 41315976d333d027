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
    model,
    batch: np.ndarray,
    layer: int,
    held: np.ndarray,
    fill: dict[str, np.ndarray] | None = None,
    start: int = 0,
    keep: tuple[str, ...] | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Forward with the units `held[b]` of `layer` held fixed in batch row b at every step: at 0 (zeroing), or at
    `fill[name][b]` for each state of the unit (mean-ablation passes each state's mean over clean text).

    batch (B, T) ids; held (B, H) bool (a row of False is the clean run); fill {state name: (B, H)} or None.
    Returns the log-probabilities of each next character from position `start` on, (B, T - 1 - start), and that
    layer's states (`h`, and `c` for the LSTM family) from `start` on, each (B, T - start, H): the whole run is
    computed (warm-up included), only what is returned is cut. `keep` names the states to return (all by default):
    each kept state costs B x (T - start) x H floats, the bulk of the memory this takes.

    The layers below `layer` see no held unit, so they run once per distinct row of `batch` (the ablations of one
    set of windows repeat its rows), and their outputs are copied to the rows that repeat them.
    """
    ids = torch.from_numpy(np.asarray(batch, dtype=np.int64))
    B, T = ids.shape
    if not 0 <= start < T - 1:
        raise ValueError(f"start {start} leaves no prediction in {T} characters")
    dtype = model.head.weight.dtype
    held = torch.from_numpy(np.asarray(held, dtype=bool))  # (B, H)
    names = model.layers[layer].state_names
    fixed = {name: torch.zeros(held.shape, dtype=dtype) if fill is None or name not in fill
             else torch.as_tensor(np.asarray(fill[name]), dtype=dtype) * held for name in names}  # fmt: skip
    kept = names if keep is None else tuple(keep)
    if unknown := set(kept) - set(names):
        raise ValueError(f"layer {layer} has no state {sorted(unknown)}: it has {list(names)}")
    below = _below(model, np.asarray(batch, dtype=np.int64), layer)  # (T, B, H) outputs of layer - 1, or None
    state = model.init_state(B)
    # written in place step by step (a list of steps stacked at the end would hold every value twice)
    states = {name: torch.empty(B, T - start, held.shape[1], dtype=dtype) for name in kept}
    target_logp = torch.empty(B, T - 1 - start, dtype=dtype)
    for t in range(T):
        # (B, 1): the first layer reads ids as a row lookup (charlm.model.project); a later one, the layer below
        inp = ids[:, t : t + 1] if below is None else below[t][:, None]
        for l in range(layer, len(model.layers)):
            out, s, _ = model.layers[l].trace(inp, state[l], keep=False)
            if l == layer:
                s = tuple(torch.where(held, fixed[name], v) for name, v in zip(names, s))  # every state: h (and c)
                out = s[names.index("h")][:, None]  # the layer's output is its h
                if t >= start:
                    for name, v in zip(names, s):
                        if name in states:
                            states[name][:, t - start] = v
            state[l] = s
            inp = out  # eval mode: dropout is the identity
        if start <= t < T - 1:  # the prediction made at the last position has no next character
            logp = torch.log_softmax(model.head(inp[:, 0]), -1)  # (B, V), each step's alone: no (B, T, V) at once
            target_logp[:, t - start] = logp.gather(-1, ids[:, t + 1, None])[:, 0]
    return target_logp.numpy(), {name: v.numpy() for name, v in states.items()}


def _below(model, batch: np.ndarray, layer: int) -> torch.Tensor | None:
    """The outputs of the layers below `layer` on the rows of batch as `run_ablated` would compute them on the whole
    batch, step by step, but each distinct row only about once; (T, B, H), None for the first layer.

    Bit for bit: a matrix product's row does not depend on the other rows (from 4 rows on), but torch computes the
    last (size mod 16) elements of an element-wise op on a contiguous tensor in its scalar loop, and those are the
    end of the batch's last row. So the small batch has as many rows as the batch modulo 16, ends with that same last
    row, and the batch's other copies of it are read from a copy that is not last."""
    if layer == 0:
        return None
    B = batch.shape[0]
    rows, inverse = np.unique(batch, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    pad = (B - rows.shape[0]) % 16
    pad = pad + 16 if pad == 0 or rows.shape[0] + pad < 4 else pad
    if rows.shape[0] + pad >= B:
        order, rows = np.arange(B), batch
    else:  # pad copies of the last row, the distinct rows, that last row again at the end
        last = inverse[-1]
        others = np.delete(np.arange(rows.shape[0]), last)
        small = np.concatenate([np.full(pad, last), others, [last]])
        where = np.empty(rows.shape[0], dtype=np.int64)
        where[others] = np.arange(pad, pad + others.size)
        where[last] = 0  # the batch's copies of its last row, but the last, read the first pad copy
        order = where[inverse]
        order[-1] = small.size - 1
        rows = rows[small]
    ids = torch.from_numpy(np.ascontiguousarray(rows))
    state = model.init_state(len(rows))
    outputs = []
    for t in range(ids.shape[1]):
        inp = ids[:, t : t + 1]
        for l in range(layer):
            inp, state[l], _ = model.layers[l].trace(inp, state[l], keep=False)
        outputs.append(inp[:, 0])
    return torch.stack(outputs, 0)[:, torch.from_numpy(order)]


def run_zeroed(model, batch: np.ndarray, layer: int, zero: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """`run_ablated` with the units `zero[b]` of `layer` held at 0 in batch row b."""
    return run_ablated(model, batch, layer, zero)
