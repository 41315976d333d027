"""Feng et al. (2024), "Were RNNs All We Needed?": minGRU and minLSTM, whose gates read the input alone.

Both drop the GRU's and the LSTM's recurrent weights from the gates and the candidate (and the LSTM's output gate
and its tanh), so the state is a linear recurrence with input-only coefficients, trained by a scan over time
(charlm/layers/scan.py). Feng et al. sec 3.1.2 (minGRU) and 3.2.3 (minLSTM), the sequential mode:

    minGRU    z_t  = sigm(Linear_z(x_t))                     minLSTM   f_t  = sigm(Linear_f(x_t))
              h~_t = Linear_h(x_t)                                     i_t  = sigm(Linear_i(x_t))
              h_t  = (1 - z_t) h_{t-1} + z_t h~_t                      f'_t, i'_t = f_t / (f_t + i_t), i_t / (f_t + i_t)
                                                                       h~_t = Linear_h(x_t)
                                                                       h_t  = f'_t h_{t-1} + i'_t h~_t

Each Linear has a bias (nn.Linear's default; some public code drops them): 2H(d + 1) parameters for minGRU, 3H(d + 1)
for minLSTM, sized to a budget row by that count like every non-ablation. Stacked as the suite stacks every layer
(CharLM: one-hot bytes -> layers -> linear head, dropout between layers as configured).

Where we deviate from Feng et al., and why:
- The plain sequential form is the model: h~ is not passed through their log-space variant's g(x) = x + 0.5
  (x >= 0), sigm(x) (x < 0), which keeps h~ positive so the scan can run in log space. Measured on this CPU, the
  log-space scan (logcumsumexp) is 15 to 25 times slower than the step loop (charlm/layers/scan.py), so nothing
  here needs h~ positive, and a model without g is the one the equations above define.
- minLSTM's f' and i' are computed as sigm(d) and sigm(-d), d = log sigm(k_f) - log sigm(k_i) (k the
  pre-activations): the same function (f / (f + i) = 1 / (1 + i / f) = sigm(ln f - ln i)), as Feng et al.'s own
  log-space code computes it (log f' = -softplus(ln i - ln f)), without the 0 / 0 of f / (f + i) where both gates
  underflow in float32 (pre-activations below about -104). The tests check the quotient form.
- Deep models of these layers in public code (lucidrains/minGRU-pytorch) wrap each layer in what our suite gives
  no model (residual connections, normalisation, a feed-forward block), with torch's default initialisation. Here
  every parameter is uniform in [-0.08, 0.08] and the layers are stacked bare, like the suite's LSTM and GRU
  (Karpathy et al. sec 3.3).
- The recurrence is evaluated as one fused multiply-add a step, b_t + a_t * h_{t-1} with b = z h~ (minGRU) or
  i' h~ (minLSTM): the trace and the scan do the same arithmetic, so training and the traces agree to the bit.

Traced internals (`layers.{l}.name`, each (B, T, H)): minGRU `z` (the weight on the candidate, the papers' GRU
convention), `htilde`, `h`; minLSTM `i` and `f`, the normalised i' and f' that the recurrence uses (so Levy et al.'s
weighted sum h_t = sum_j i'_j prod_{j<k<=t} f'_k h~_j + prod f' h_0 holds exactly on the traces), `htilde`, `h`.
The state is h alone.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .base import TracedLayer, project
from .scan import LinearScan, scan_loop


class MinGRULayer(TracedLayer):
    """minGRU (Feng et al. 2024 sec 3.1.2): h_t = (1 - z_t) h_{t-1} + z_t h~_t with z_t, h~_t from x_t alone."""

    state_names = ("h",)

    def __init__(self, d_in: int, size: int):
        super().__init__()
        self.size = size
        self.from_x = nn.Linear(d_in, 2 * size)  # rows [Linear_z; Linear_h], with their biases

    @staticmethod
    def n_params(d_in: int, size: int) -> int:
        return 2 * size * (d_in + 1)

    def gates(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """z (B, T, H) and h~ (B, T, H) of every step at once: nothing in them reads the state."""
        k_z, htilde = project(x, self.from_x.weight, self.from_x.bias).split(self.size, -1)
        return torch.sigmoid(k_z), htilde

    def forward(self, x, state, fused=True):
        if not fused:
            return super().forward(x, state)
        z, htilde = self.gates(x)
        h = LinearScan.apply(1.0 - z, z * htilde, state[0])  # (B, T, H)
        return h, (h[:, -1],)

    def trace(self, x, state, keep=True):
        z, htilde = self.gates(x)
        out = scan_loop(1.0 - z, z * htilde, state[0])  # h_t = (1 - z_t) h_{t-1} + z_t h~_t, step by step
        return out, (out[:, -1],), ({"z": z, "htilde": htilde, "h": out} if keep else {})


class MinLSTMLayer(TracedLayer):
    """minLSTM (Feng et al. 2024 sec 3.2.3): h_t = f'_t h_{t-1} + i'_t h~_t, f' and i' the gates normalised to
    sum to one, every one from x_t alone."""

    state_names = ("h",)

    def __init__(self, d_in: int, size: int):
        super().__init__()
        self.size = size
        self.from_x = nn.Linear(d_in, 3 * size)  # rows [Linear_i; Linear_f; Linear_h], with their biases

    @staticmethod
    def n_params(d_in: int, size: int) -> int:
        return 3 * size * (d_in + 1)

    def gates(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """i' = i / (f + i), f' = f / (f + i) and h~ of every step at once, each (B, T, H)."""
        k_i, k_f, htilde = project(x, self.from_x.weight, self.from_x.bias).split(self.size, -1)
        d = F.logsigmoid(k_f) - F.logsigmoid(k_i)  # ln f - ln i
        return torch.sigmoid(-d), torch.sigmoid(d), htilde

    def forward(self, x, state, fused=True):
        if not fused:
            return super().forward(x, state)
        i, f, htilde = self.gates(x)
        h = LinearScan.apply(f, i * htilde, state[0])  # (B, T, H)
        return h, (h[:, -1],)

    def trace(self, x, state, keep=True):
        i, f, htilde = self.gates(x)
        out = scan_loop(f, i * htilde, state[0])  # h_t = f'_t h_{t-1} + i'_t h~_t, step by step
        return out, (out[:, -1],), ({"i": i, "f": f, "htilde": htilde, "h": out} if keep else {})
