"""The LSTM layer on torch's fused kernel, with its hand-written trace (Karpathy et al. sec 3.1)."""

from __future__ import annotations

import torch
import torch.nn as nn

from .base import TracedLayer, features, project


class LSTMLayer(TracedLayer):
    """torch's LSTM (gate order i, f, g, o; g is Levy's content ctilde)."""

    state_names = ("h", "c")

    def __init__(self, d_in: int, size: int):
        super().__init__()
        self.rnn = nn.LSTM(d_in, size, batch_first=True)

    @staticmethod
    def n_params(d_in: int, size: int) -> int:
        return 4 * size * (d_in + size) + 8 * size

    def forward(self, x, state, fused=True):
        if fused:
            h0, c0 = state
            x = features(x, self.rnn.input_size, h0.dtype)
            out, (h, c) = self.rnn(x, (h0.unsqueeze(0), c0.unsqueeze(0)))
            return out, (h.squeeze(0), c.squeeze(0))
        return super().forward(x, state)

    def trace(self, x, state, keep=True):
        r = self.rnn
        xw = project(x, r.weight_ih_l0, r.bias_ih_l0 + r.bias_hh_l0)  # (B, T, 4H)
        h, c = state
        names = ("i", "f", "ctilde", "o", "c", "h")
        steps = {k: [] for k in names}
        for xw_t in xw.unbind(1):
            i, f, g, o = torch.addmm(xw_t, h, r.weight_hh_l0.t()).chunk(4, 1)
            i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
            c = f * c + i * g
            h = o * torch.tanh(c)
            steps["h"].append(h)
            if keep:
                for k, v in zip(names[:5], (i, f, g, o, c)):
                    steps[k].append(v)
        out = torch.stack(steps["h"], 1)
        cache = (
            {k: (out if k == "h" else torch.stack(steps[k], 1)) for k in ("i", "f", "o", "ctilde", "c", "h")}
            if keep
            else {}
        )
        return out, (h, c), cache
