"""Levy et al.'s (2018) ablations of the LSTM: content linear in x; -S-RNN-HIDDEN's memory cell by `LinearScan`."""

from __future__ import annotations

import torch
import torch.nn as nn

from .base import TracedLayer, project
from .scan import LinearScan, scan_loop


class AblatedLSTMLayer(TracedLayer):
    """Levy et al.'s LSTM ablations: the content is linear in x (ctilde = W_cx x, eq. 9).

    output_gate=False gives h = tanh(c) (eq. 10); gates_recurrent=False gives gates that read
    x only (-S-RNN-HIDDEN), so the additive memory cell is the only recurrence and the whole
    loop is element-wise: c_t = f_t c_{t-1} + i_t ctilde_t is a linear recurrence with input-only
    coefficients, which `forward` runs as `LinearScan` and `trace` step by step (`scan_loop`: the
    same fused multiply-add a step, so the same numbers to the bit).
    """

    state_names = ("h", "c")

    def __init__(self, d_in: int, size: int, output_gate: bool, gates_recurrent: bool):
        super().__init__()
        self.size, self.output_gate, self.gates_recurrent = size, output_gate, gates_recurrent
        n_gates = 3 if output_gate else 2  # i, f[, o]
        self.gates_x = nn.Linear(d_in, n_gates * size)  # W_gx x + b_g
        self.gates_h = nn.Linear(size, n_gates * size, bias=False) if gates_recurrent else None  # W_gh h
        self.content = nn.Linear(d_in, size, bias=False)  # ctilde = W_cx x

    @staticmethod
    def n_params(d_in: int, size: int, output_gate: bool, gates_recurrent: bool) -> int:
        n_gates = 3 if output_gate else 2
        return n_gates * size * (d_in + 1) + (n_gates * size * size if gates_recurrent else 0) + size * d_in

    def forward(self, x, state, fused=True):
        if fused and not self.gates_recurrent:
            out, state, _ = self.trace(x, state, keep=False, scan=LinearScan.apply)
            return out, state
        return super().forward(x, state)

    def trace(self, x, state, keep=True, scan=scan_loop):
        H = self.size
        gx = project(x, self.gates_x.weight, self.gates_x.bias)  # (B, T, nH)
        content = project(x, self.content.weight)  # (B, T, H)
        h, c = state
        if self.gates_recurrent:
            gates, cs, hs = [], [], []
            w_h = self.gates_h.weight.t()
            for gx_t, ct_t in zip(gx.unbind(1), content.unbind(1)):
                g = torch.sigmoid(torch.addmm(gx_t, h, w_h))
                c = g[:, H : 2 * H] * c + g[:, :H] * ct_t
                h = g[:, 2 * H :] * torch.tanh(c) if self.output_gate else torch.tanh(c)
                hs.append(h)
                if keep:  # the forward pass needs only the outputs
                    gates.append(g), cs.append(c)
            out = torch.stack(hs, 1)  # (B, T, H)
            g_all = torch.stack(gates, 1) if keep else None  # (B, T, nH)
            c_all = torch.stack(cs, 1) if keep else None
        else:
            g_all = torch.sigmoid(gx)  # every gate at once: no recurrence in them
            i_all, f_all = g_all[..., :H], g_all[..., H : 2 * H]
            c_all = scan(f_all, i_all * content, c)  # c_t = f_t c_{t-1} + i_t ctilde_t, (B, T, H)
            c = c_all[:, -1]
            if self.output_gate:
                out = g_all[..., 2 * H :] * torch.tanh(c_all)
            else:
                out = torch.tanh(c_all)
            h = out[:, -1]
        cache = {}
        if keep:
            cache = {"i": g_all[..., :H], "f": g_all[..., H : 2 * H]}
            if self.output_gate:
                cache["o"] = g_all[..., 2 * H :]
            cache.update(ctilde=content, c=c_all, h=out)
        return out, (h, c), cache
