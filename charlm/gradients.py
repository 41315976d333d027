"""How far back a loss reaches: the norm of dL / d(state) at every earlier step, and Maini et al.'s vanishing ratio.

Maini, Kolluru, Pruthi, Mausam (2020), "Why and when should you pool?" (lecture notes, seed 004), measure
||dL/dh_t|| at every position t of a sequence and summarise it by the vanishing ratio, which the notes define
as ||dL/dh_mid|| / ||dL/dh_end||: the middle over the end where the loss is (`ratio_middle_over_ends`, the
definition every analysis here reports as "the vanishing ratio"). Their code (dair-iitd/PoolingAnalysis,
grad_cam.py; /work/shared/ANCHORS.md) interpolates the per-position norms onto 100 relative-position bins,
the middle being bins 45..54 (10 %), and takes the first bin over that middle (`ratio_first_over_middle`): in a
BiLSTM the first position is an end the loss touches, in a left-to-right model it is the far end, which the
loss does not touch, so there it is another quantity (how much further the gradient falls past the middle).

`state_gradient_norms` runs any recurrence one step at a time, keeping every state on the autograd graph,
and returns the *total* derivative of the loss with respect to each state (through every later step, not
only the direct path to the output): exactly what the per-step hooks of their custom LSTM record. The
recurrence is a plain function, so the same code measures a CharLM (`charlm_step`), the pooling
classifiers (charlm.classifier) and a hand-made linear recurrence whose answer is known in closed form.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from .model import CharLM

BINS = 100  # relative-position bins (Maini et al.'s code)
MIDDLE = slice(45, 55)  # "h_mid": the middle 10 % of the bins

Step = Callable[[torch.Tensor, dict], tuple[torch.Tensor, dict]]  # (input at t, state) -> (output, new state)


def state_gradient_norms(
    step: Step,
    state: dict[str, torch.Tensor],
    inputs,
    loss: Callable,
    loss_scale: float = 1.0,
    all_outputs: bool = False,
) -> dict[str, np.ndarray]:
    """Per state name, a (T, B) array of || dL_b / d state_t ||_2 for every step t (time order) and sequence b.

    `state` maps names to (B, H) tensors (the state before the first input; it is detached here); `inputs`
    is a sequence of per-step inputs; `loss(output of the last step)` (with `all_outputs`: `loss(list of every
    step's output)`, e.g. a pooling classifier's) gives one loss per sequence, (B,). The
    sequences of a batch never interact, so one backward pass of the summed loss gives every sequence's own
    gradient.

    The gradient is taken with respect to the state tensors `step` returns, so it counts exactly the uses
    of those tensors: `step` must route everything later (the next step, the layer above, the output) through
    them. Then the state gradient is that of the state carried out of step t as all later computation reads
    it: for one layer (and the top layer of a stack) the gradient with respect to the initial state of a run
    started at t + 1; a lower layer's h also reaches the layers above within step t, and that path counts too.
    A state that nothing later reads (h of `lstm-srnn-hidden`, c at the last step) has gradient zero.

    `loss_scale` multiplies the loss before the backward pass and divides the norms after it (gradients are
    linear in it): a power of two such as 2**80 keeps float32 gradients that vanish to 1e-60 from underflowing
    to zero, as loss scaling does in mixed-precision training.
    """
    state = {name: t.detach().requires_grad_() for name, t in state.items()}
    states, outputs = [], []
    for x in inputs:
        out, state = step(x, state)
        states.append(state)
        outputs.append(out)
    if not outputs:
        raise ValueError("no inputs: a gradient profile needs at least one step")
    names = list(states[-1])
    flat = [s[name] for s in states for name in names]
    total = loss(outputs if all_outputs else outputs[-1]).sum() * loss_scale
    grads = torch.autograd.grad(total, flat, allow_unused=True)
    norms = {}
    for k, name in enumerate(names):
        rows = []
        for t, s in enumerate(states):
            g = grads[t * len(names) + k]
            rows.append(np.zeros(s[name].shape[0]) if g is None else g.double().flatten(1).norm(dim=1).numpy())
        norms[name] = np.stack(rows) / loss_scale  # (T, B)
    return norms


def charlm_step(model: CharLM) -> Step:
    """One step of a CharLM's hand-written cells on (B,) ids; state names `layers.{l}.{h|c}`; output = the top
    layer's h as the softmax head reads it (apply `model.head` to get the logits: `charlm_loss`).

    The state a layer returns is carried forward as fresh tensors: the layer above reads h from them (equal
    to the layer's output), the logits come from the top h, and the next step reads both, so the gradient of
    h_t and c_t is that of the carried state: what the future reads, with c_t's own use in h_t = o tanh(c_t)
    left inside step t (the same for every architecture, fused into one tensor or not).
    """
    names = [[f"layers.{l}.{s}" for s in layer.state_names] for l, layer in enumerate(model.layers)]

    def step(ids: torch.Tensor, state: dict) -> tuple[torch.Tensor, dict]:
        x = model._embed(ids[:, None])  # (B, 1, V)
        new = {}
        for layer, layer_names in zip(model.layers, names):
            _, s = layer(x, tuple(state[n] for n in layer_names), fused=False)
            s = tuple(t.view_as(t) for t in s)  # fresh nodes: the layer's own uses inside this step stay out
            new.update(zip(layer_names, s))
            x = model.drop(s[0][:, None])  # (B, 1, H): h, as the next layer (or the head) sees it
        return x[:, 0], new

    return step


def charlm_loss(model: CharLM, targets: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """The cross-entropy of the next character at the last step, one per sequence: L_T (B,)."""
    return lambda top_h: torch.nn.functional.cross_entropy(model.head(top_h), targets, reduction="none")


def charlm_state(model: CharLM, ids: torch.Tensor | None, batch_size: int) -> dict[str, torch.Tensor]:
    """The detached state after reading `ids` (B, W) from a zero state (None: the zero state), by name."""
    with torch.no_grad():
        if ids is None or ids.shape[1] == 0:
            layers = model.init_state(batch_size)
        else:
            _, layers = model.forward_with_state(ids)
    return {
        f"layers.{l}.{s}": t.detach() for l, (layer, st) in enumerate(zip(model.layers, layers))
        for s, t in zip(layer.state_names, st)
    }  # fmt: skip


def to_bins(norms: np.ndarray, bins: int = BINS) -> np.ndarray:
    """Per-position norms (time order, first position first) linearly interpolated onto `bins` relative positions."""
    norms = np.asarray(norms, dtype=np.float64)
    return np.interp(np.arange(bins), np.linspace(0, bins - 1, norms.size), norms)


def ratio_first_over_middle(norms: np.ndarray) -> float:
    """The reference code's `first_ratio`: the first bin over the mean of the middle 10 % (time order in).

    Not the notes' vanishing ratio for a left-to-right model: its loss sits at the last position, so the first
    position is the far end, and small values mean the gradient keeps shrinking from the middle to the far end
    (call it the far end over the middle). Equal to `ratio_middle_over_ends` only for a geometric decay.
    """
    b = to_bins(norms)
    middle = b[MIDDLE].mean()
    return float(b[0] / middle) if middle > 0 else float("nan")


def ratio_middle_over_ends(norms: np.ndarray, ends: str = "last") -> float:
    """Maini et al.'s vanishing ratio as the notes define it, ||dL/dh_mid|| / ||dL/dh_end||: the middle 10 % of
    the bins over the end(s) where the loss is.

    `ends="last"`: the last position (where a left-to-right model's loss sits); `"both"`: the mean of the
    first and last positions (a BiLSTM, whose two directions end there).
    """
    b = to_bins(norms)
    end = b[-1] if ends == "last" else 0.5 * (b[0] + b[-1])
    return float(b[MIDDLE].mean() / end) if end > 0 else float("nan")
