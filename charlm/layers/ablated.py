"""Levy et al.'s (2018) ablations of the LSTM: content linear in x, and the memory cell's scan `LinearScan`."""

from __future__ import annotations

import torch
import torch.nn as nn

from .base import TracedLayer, project


class LinearScan(torch.autograd.Function):
    """c_t = f_t * c_{t-1} + w_t over time, with a hand-written backward.

    The element-wise memory recurrence of `lstm-srnn-hidden` has no matrix product in it, so
    autograd's per-step bookkeeping would dominate its cost. The backward is the same
    recurrence run in reverse: a_t = g_t + f_{t+1} a_{t+1}, dw_t = a_t, df_t = a_t c_{t-1}.
    Tensors are time-major inside so every step reads and writes contiguous memory.
    """

    @staticmethod
    def forward(ctx, f: torch.Tensor, w: torch.Tensor, c0: torch.Tensor) -> torch.Tensor:
        f_t, w_t = f.transpose(0, 1).contiguous(), w.transpose(0, 1).contiguous()  # (T, B, H)
        c = torch.empty_like(w_t)
        prev = c0
        for t in range(w_t.shape[0]):
            prev = torch.addcmul(w_t[t], f_t[t], prev, out=c[t])
        ctx.save_for_backward(f_t, c, c0)
        return c.transpose(0, 1)  # (B, T, H)

    @staticmethod
    def backward(ctx, grad_c: torch.Tensor):
        f_t, c, c0 = ctx.saved_tensors
        g = grad_c.transpose(0, 1).contiguous()  # (T, B, H)
        a = torch.empty_like(g)
        a[-1] = g[-1]
        for t in range(g.shape[0] - 2, -1, -1):
            torch.addcmul(g[t], f_t[t + 1], a[t + 1], out=a[t])
        c_prev = torch.cat([c0.unsqueeze(0), c[:-1]], 0)
        grad_f = (a * c_prev).transpose(0, 1)
        return grad_f, a.transpose(0, 1), f_t[0] * a[0]


class AblatedLSTMLayer(TracedLayer):
    """Levy et al.'s LSTM ablations: the content is linear in x (ctilde = W_cx x, eq. 9).

    output_gate=False gives h = tanh(c) (eq. 10); gates_recurrent=False gives gates that read
    x only (-S-RNN-HIDDEN), so the additive memory cell is the only recurrence and the whole
    loop is element-wise.
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

    def trace(self, x, state, keep=True):
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
            c_all = LinearScan.apply(f_all, i_all * content, c)  # c_t = f_t c_{t-1} + i_t ctilde_t, (B, T, H)
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
