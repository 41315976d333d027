"""The Elman S-RNN layer (`rnn`, and `lstm-gates`: Levy et al.'s LSTM without gates, at the LSTM's width)."""

from __future__ import annotations

import torch
import torch.nn as nn

from .base import TracedLayer, features, project


class ElmanLayer(TracedLayer):
    """h_t = tanh(W x_t + b_ih + U h_{t-1} + b_hh): the `rnn`, and `lstm-gates` at the LSTM's width."""

    state_names = ("h",)

    def __init__(self, d_in: int, size: int):
        super().__init__()
        self.rnn = nn.RNN(d_in, size, batch_first=True, nonlinearity="tanh")

    @staticmethod
    def n_params(d_in: int, size: int) -> int:
        return size * (d_in + size) + 2 * size

    def forward(self, x, state, fused=True):
        if fused:
            out, h = self.rnn(features(x, self.rnn.input_size, state[0].dtype), state[0].unsqueeze(0))
            return out, (h.squeeze(0),)
        return super().forward(x, state)

    def trace(self, x, state, keep=True):
        r = self.rnn
        xw = project(x, r.weight_ih_l0, r.bias_ih_l0 + r.bias_hh_l0)  # (B, T, H)
        (h,) = state
        hs = []
        for xw_t in xw.unbind(1):
            h = torch.tanh(torch.addmm(xw_t, h, r.weight_hh_l0.t()))
            hs.append(h)
        out = torch.stack(hs, 1)  # (B, T, H)
        return out, (h,), {"h": out}
