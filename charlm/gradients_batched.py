"""`state_gradient_norms` of several checkpoints of one CharLM at once, with the same numbers to the bit.

The vanishing analysis differentiates the last character's loss of a window with respect to the state at every
earlier step, for the initial model, its training snapshots and its final model: the same configuration, other
weights, the same windows. `charlm.gradients.charlm_step` runs each checkpoint alone through the layers' `trace`,
one step at a time: per step, most of the time goes to dispatching small operations, not to arithmetic. Here the
checkpoints' weights are stacked and every step runs once for all of them, with exactly the operations of the
layer's trace: an `addmm` of one checkpoint is a slice of a `baddbmm` over the stack (the same product per
slice), and the element-wise operations see the same rows. The first layer's input projection is a row lookup
plus a bias (exact), so it is done for the whole window before the loop.

Only the layers written out here are stacked (`STACKED`); any other architecture, or a model not in eval mode,
goes through `charlm_step`, one checkpoint at a time, and so do shapes where the two would differ in the last bit:
element-wise kernels treat the last elements of a tensor that does not fill their vector registers apart, so a
(windows x width) block must be a multiple of 32 floats (the report's 32 windows always are), and torch computes a
batched product of fewer than 400 multiply-adds per slice with its own loop instead of the gemm `addmm` calls.
tests/test_vanishing.py holds both paths to `charlm_step`'s numbers, bit for bit, for every stacked layer.
"""

from __future__ import annotations

import numpy as np
import torch

from .gradients import charlm_loss, charlm_state, charlm_step, state_gradient_norms
from .layers.ablated import AblatedLSTMLayer
from .layers.base import project
from .layers.elman import ElmanLayer
from .layers.gru import PaperGRULayer
from .layers.lstm import LSTMLayer
from .model import CharLM

VECTOR_BLOCK = 32  # floats: stacking keeps each checkpoint's element-wise blocks aligned to this
SMALL_PRODUCT = 400  # torch's CPU bmm runs products of fewer multiply-adds by its own loop, not the BLAS gemm


def _stack(tensors) -> torch.Tensor:
    return torch.stack([t.detach() for t in tensors])


class _Stacked:
    """One layer of n checkpoints: `inputs(x)` the input projection(s) of a step from the layer below's h (n, B, d),
    `first(ids, layers)` those of the whole window for the first layer, and `step(xs, state)` one step of the
    layer's trace, each (n, B, .)."""

    def __init__(self, layers):
        self.in_w, self.in_b = [], []  # per projection of x: weights (n, d, G) and biases (n, 1, G) or None
        for weight, bias in self.projections(layers):
            self.in_w.append(_stack(weight).transpose(1, 2))
            self.in_b.append(None if bias[0] is None else _stack(bias)[:, None])

    def inputs(self, x):
        return [torch.bmm(x, w) if b is None else torch.baddbmm(b, x, w) for w, b in zip(self.in_w, self.in_b)]

    def first(self, ids, layers):
        """Per projection, the T steps of the window (n, B, G): a row lookup plus a bias, as `project` does a step."""
        return [
            torch.stack([project(ids, w.detach(), b if b is None else b.detach()) for w, b in zip(ws, bs)]).unbind(2)
            for ws, bs in self.projections(layers)
        ]


class _LSTM(_Stacked):
    def __init__(self, layers):
        super().__init__(layers)
        self.w_hh = _stack(l.rnn.weight_hh_l0 for l in layers).transpose(1, 2)

    @staticmethod
    def projections(layers):
        return [([l.rnn.weight_ih_l0 for l in layers], [l.rnn.bias_ih_l0 + l.rnn.bias_hh_l0 for l in layers])]

    def step(self, xs, state):
        h, c = state
        i, f, g, o = torch.baddbmm(xs[0], h, self.w_hh).chunk(4, 2)
        i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
        c = f * c + i * g
        return (o * torch.tanh(c), c)


class _Elman(_LSTM):
    def step(self, xs, state):
        return (torch.tanh(torch.baddbmm(xs[0], state[0], self.w_hh)),)


class _PaperGRU(_Stacked):
    def __init__(self, layers):
        super().__init__(layers)
        self.size = layers[0].size
        self.w_g = _stack(l.gates_h.weight for l in layers).transpose(1, 2)
        self.b_g = _stack(l.gates_h.bias for l in layers)[:, None]
        self.w_n = _stack(l.content_h.weight for l in layers).transpose(1, 2)
        self.b_n = _stack(l.content_h.bias for l in layers)[:, None]

    @staticmethod
    def projections(layers):
        return [([l.from_x.weight for l in layers], [l.from_x.bias for l in layers])]

    def step(self, xs, state):
        (h,), xw, H = state, xs[0], self.size
        rz = torch.sigmoid(xw[..., : 2 * H] + torch.baddbmm(self.b_g, h, self.w_g))
        reset, z = rz[..., :H], rz[..., H:]
        htilde = torch.tanh(xw[..., 2 * H :] + torch.baddbmm(self.b_n, reset * h, self.w_n))
        return (h + z * (htilde - h),)


class _AblatedLSTM(_Stacked):
    """Levy et al.'s ablations whose gates read h (lstm-srnn, lstm-srnn-out); -S-RNN-HIDDEN is not stacked."""

    def __init__(self, layers):
        super().__init__(layers)
        self.size, self.output_gate = layers[0].size, layers[0].output_gate
        self.w_h = _stack(l.gates_h.weight for l in layers).transpose(1, 2)

    @staticmethod
    def projections(layers):
        return [
            ([l.gates_x.weight for l in layers], [l.gates_x.bias for l in layers]),
            ([l.content.weight for l in layers], [None for _ in layers]),
        ]

    def step(self, xs, state):
        (gx, content), (h, c), H = xs, state, self.size
        g = torch.sigmoid(torch.baddbmm(gx, h, self.w_h))
        c = g[..., H : 2 * H] * c + g[..., :H] * content
        return (g[..., 2 * H :] * torch.tanh(c) if self.output_gate else torch.tanh(c), c)


def _stacked_class(layer):
    if type(layer) is AblatedLSTMLayer:
        return _AblatedLSTM if layer.gates_recurrent else None
    return {LSTMLayer: _LSTM, ElmanLayer: _Elman, PaperGRULayer: _PaperGRU}.get(type(layer))


def stackable(model: CharLM) -> bool:
    """Whether every layer of the model has a stacked step here (and dropout is off: eval mode)."""
    return not model.training and all(_stacked_class(layer) is not None for layer in model.layers)


def _stacked_norms(models, states, window, target, loss_scale):
    """Per model, per state name, (T, B) norms: `state_gradient_norms` of `charlm_step`, all models in one loop."""
    first = models[0]
    names = [[f"layers.{l}.{s}" for s in layer.state_names] for l, layer in enumerate(first.layers)]
    layers = [_stacked_class(layer)([m.layers[l] for m in models]) for l, layer in enumerate(first.layers)]
    state = [tuple(_stack(s[n] for s in states).requires_grad_() for n in layer_names) for layer_names in names]
    inputs0 = layers[0].first(window, [m.layers[0] for m in models])
    carried = []
    for t in range(window.shape[1]):
        new = []
        for l, (layer, s) in enumerate(zip(layers, state)):
            # the layer above reads h through one node, as charlm_step's `model.drop(h[:, None])`: its projections'
            # gradients are summed there before they join the next step's (the same order of additions)
            xs = [p[t] for p in inputs0] if l == 0 else layer.inputs(new[-1][0].view_as(new[-1][0]))
            new.append(tuple(v.view_as(v) for v in layer.step(xs, s)))  # the carried state, as charlm_step
        state = new
        carried.append(new)
    top = state[-1][0]  # (n, B, H)
    total = sum(charlm_loss(m, target)(top[k]).sum() * loss_scale for k, m in enumerate(models))
    flat = [s for step in carried for layer in step for s in layer]
    grads = iter(torch.autograd.grad(total, flat, allow_unused=True))
    rows = {n: [] for layer_names in names for n in layer_names}
    for step in carried:
        for layer_names, layer in zip(names, step):
            for n, s in zip(layer_names, layer):
                g = next(grads)
                rows[n].append(np.zeros(s.shape[:2]) if g is None else g.double().norm(dim=2).numpy())
    stacked = {n: np.stack(r, 1) / loss_scale for n, r in rows.items()}  # (n, T, B)
    return [{n: a[k] for n, a in stacked.items()} for k in range(len(models))]


def charlm_gradient_norms(
    models: list[CharLM], warm: torch.Tensor, window: torch.Tensor, target: torch.Tensor, loss_scale: float = 1.0
) -> list[dict[str, np.ndarray]]:
    """Per model (checkpoints of one configuration), `state_gradient_norms(charlm_step(model), charlm_state(model,
    warm), window.unbind(1), charlm_loss(model, target), loss_scale)`: per state name, (T, B) norms."""
    B, H = window.shape[0], models[0].config.size
    states = [charlm_state(m, warm, B) for m in models]
    if all(stackable(m) for m in models) and (B * H) % VECTOR_BLOCK == 0 and B * H * H >= SMALL_PRODUCT:
        return _stacked_norms(models, states, window, target, loss_scale)
    return [
        state_gradient_norms(charlm_step(m), s, window.unbind(1), charlm_loss(m, target), loss_scale=loss_scale)
        for m, s in zip(models, states)
    ]
