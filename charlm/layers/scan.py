"""The scan of a linear recurrence with input-only coefficients: h_t = a_t * h_{t-1} + b_t, element-wise over time.

Three cells of the suite are this recurrence once their gates are computed, all steps at once, from the input alone:

    lstm-srnn-hidden  c_t = f_t c_{t-1} + i_t ctilde_t                  a = f,       b = i ctilde   (Levy et al. 3.1)
    mingru            h_t = (1 - z_t) h_{t-1} + z_t htilde_t            a = 1 - z,   b = z htilde   (Feng et al. 2024)
    minlstm           h_t = f'_t h_{t-1} + i'_t htilde_t                a = f',      b = i' htilde  (Feng et al. 2024)

Unrolled, h_t = (prod_{k<=t} a_k) h_0 + sum_{j<=t} (prod_{j<k<=t} a_k) b_j (Levy et al. eq. 8): a
prefix scan, which Feng et al. train in parallel over time (Blelloch 1990; Heinsen 2023, in log space). `LinearScan` is
the kernel every one of the three trains and scores with (`forward(..., fused=True)`), each layer's `trace` the step
loop it is proven against (tests/test_scan.py, tests/test_minrnn.py).

Which scan: measured, not assumed (`python -m charlm.layers.scan_variants`, which holds the candidates)
------------------------------------------------------------------------------------------------------
One scan of h_t = a_t h_{t-1} + b_t, a_t in (0, 1), b_t ~ N(0, 1), random h_0: training = forward and backward (the
gradients of a, b and h_0), scoring = forward under no_grad. Median ms of 12 (scoring 4) rounds in alternating
order; x = speed against the step loop (autograd through h = b_t + a_t * h, one step at a time). AMD EPYC, 2 cores
(KVM, AVX2), torch 2.13.0+cpu, 1 thread, 2026-11-26, while a training job and other engineers' tests shared the two
cores (load 3 to 5: the ratios are the claim, not the milliseconds). Widths: the 128 row's one-layer models on War
and Peace (V = 87): lstm-srnn-hidden 128 (the LSTM's), minlstm 348, mingru 465.

    training, 16 streams x 100 steps           H = 128            H = 348            H = 465
    step loop (autograd)                     11.5 ms  x1.00     19.3 ms  x1.00     23.2 ms  x1.00
    (d) LinearScan, time-major (before)       7.4 ms  x1.55     18.0 ms  x1.07     12.1 ms  x1.93
    (d) LinearScan, in place (now)            7.3 ms  x1.56     10.2 ms  x1.89     10.8 ms  x2.16
    (a) log space, logcumsumexp, signed     159   ms  x0.07    453   ms  x0.04    612   ms  x0.04
    (b) chunks, cumprod / cumsum, k = 10     14.8 ms  x0.77     45.0 ms  x0.43     66.2 ms  x0.35
    (b) two-level, k = 10                     4.1 ms  x2.78     17.2 ms  x1.12     23.2 ms  x1.00
    (b) two-level, k = 16                     9.1 ms  x1.26     18.9 ms  x1.02     22.0 ms  x1.05
    (c) blocked matmul, k = 10              166   ms  x0.07    482   ms  x0.04    645   ms  x0.04

    scoring, 128 streams x 256 steps           H = 128            H = 348            H = 465
    step loop (no_grad)                      27.6 ms  x1.00    119   ms  x1.00    152   ms  x1.00
    (d) LinearScan, time-major (before)      25.5 ms  x1.08    251   ms  x0.47    330   ms  x0.46
    (d) LinearScan, in place (now)           15.1 ms  x1.82    100   ms  x1.19    131   ms  x1.16
    (b) chunks, cumprod / cumsum, k = 16     49.6 ms  x0.56    263   ms  x0.45    359   ms  x0.42
    (b) two-level, k = 16                    34.6 ms  x0.80    220   ms  x0.54    313   ms  x0.48

((a) and (c), over ten times slower in training, are not run at scoring shapes.) A first run at load ~3 ranked them
the same: in training LinearScan x2.8 / x2.1 / x1.6 and the two-level scan (k = 10) x3.0 / x1.4 / x1.0. Largest
error against the float64 loop: 1e-6 for all but (a), 5e-5 (exp of sums of logs).

On one core this recurrence is memory-bound: each variant streams (B, T, H) tensors through memory, and the
sequential scan does the least of that (one fused multiply-add per element and step, forward and backward alike),
while the parallel forms do more work to save steps that cost little here (T = 100 steps of 2,000 to 60,000
elements each): (a) takes a log, two logcumsumexp (torch's CPU kernel is slow, as in the profile of
minGRU-pytorch's issue #13) and an exp per element and sign of b; (b) with cumprod / cumsum divides b by products
of a that underflow (a_t near 0 gives inf: unsafe without clamping a, which changes the function), and is slow;
the two-level scan (sequential within chunks of k, every chunk at once, then across chunks) does two to three times
the memory traffic and wins only where the per-step overhead dominates (16 x 128, by a margin that vanishes in a
whole training step); (c) forms k x k products per element. So `LinearScan` stays sequential, with the arithmetic
it had, to the bit (a test holds it to the time-major version), without the transposes, which cost more than the
scan itself in scoring. A GPU, where a kernel launch per step is the cost, would rank them the other way (a
parallel form there would be a new kernel, under a new name). Numerically the sequential scan is the recurrence
itself: it never forms products of many a_t < 1 (a_t = 0 simply cuts the past off).

In a whole training step or scoring pass the recurrence is a minor part: the input projection, the gates, the
head's products and the softmax are the rest (charlm/bench.py), so the scan buys there far less than it does alone.
"""

from __future__ import annotations

import torch


class LinearScan(torch.autograd.Function):
    """h_t = a_t * h_{t-1} + b_t over time for (B, T, H) a and b from h_0 (B, H), with a hand-written backward.

    Forward is one fused multiply-add a step (`addcmul`, into the output's step); backward the same recurrence
    run in reverse, d_t = g_t + a_{t+1} d_{t+1} (d the total gradient of h_t), then db_t = d_t, da_t = d_t h_{t-1}
    and dh_0 = a_1 d_1, all steps at once. Inputs may be strided views (e.g. gates sliced from one projection):
    each step reads and writes rows of H contiguous numbers in place, with no copy to time-major layout.
    No autograd bookkeeping per step: the element-wise recurrence has no product in it, so autograd's per-step
    nodes would cost more than its arithmetic.

    Its arithmetic is the same, to the bit, as the time-major version that trained `lstm-srnn-hidden` before
    (tests/test_scan.py holds it to that), so the models trained on it retrain on this one bit for bit.
    """

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        h = torch.empty(b.shape, dtype=b.dtype, device=b.device)  # (B, T, H), contiguous
        prev = h0
        for a_t, b_t, h_t in zip(a.unbind(1), b.unbind(1), h.unbind(1)):
            prev = torch.addcmul(b_t, a_t, prev, out=h_t)  # b_t + a_t * h_{t-1}
        ctx.save_for_backward(a, h, h0)
        return h

    @staticmethod
    def backward(ctx, grad_h: torch.Tensor):
        a, h, h0 = ctx.saved_tensors
        T = h.shape[1]
        d = torch.empty(h.shape, dtype=h.dtype, device=h.device)  # dL/dh_t through every later step
        g, d_t, a_t = grad_h.unbind(1), d.unbind(1), a.unbind(1)
        after = d_t[T - 1].copy_(g[T - 1])
        for t in range(T - 2, -1, -1):
            after = torch.addcmul(g[t], a_t[t + 1], after, out=d_t[t])
        grad_a = None
        if ctx.needs_input_grad[0]:
            grad_a = torch.empty_like(d)
            torch.mul(d[:, 0], h0, out=grad_a[:, 0])
            torch.mul(d[:, 1:], h[:, :-1], out=grad_a[:, 1:])
        return grad_a, d, a[:, 0] * d[:, 0]


def scan_loop(a: torch.Tensor, b: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    """The step loop: h_t = a_t * h_{t-1} + b_t, one autograd step at a time, the same fused multiply-add a step as
    `LinearScan` (so the same numbers, to the bit): the reference every scan is proven against, and the cells' trace."""
    h, hs = h0, []
    for a_t, b_t in zip(a.unbind(1), b.unbind(1)):
        h = torch.addcmul(b_t, a_t, h)
        hs.append(h)
    return torch.stack(hs, 1)
