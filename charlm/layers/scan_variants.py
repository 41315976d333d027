"""The scans measured against `LinearScan` before choosing it (the table in charlm/layers/scan.py's docstring).

Each computes h_t = a_t * h_{t-1} + b_t over time for (B, T, H) a (in (0, 1]) and b from h_0 (B, H), is
differentiable, and equals the step loop to float32 tolerance (tests/test_scan.py):

    (a) log_space     Heinsen (2023), as Feng et al.'s log-space minGRU scans: h = exp(a* + logcumsumexp(log v - a*)),
                      a* = cumsum log a, v = (h_0, b_1, ...); b of either sign as two scans (its positive and
                      negative parts), since the log of a negative number is not real.
    (b) chunked       chunks of k: A = cumprod a within the chunk, h = A (h_in + cumsum(b / A)); sequential across
                      chunks. b / A overflows where the products underflow (unsafe without clamping a).
        two_level     sequential within chunks of k, every chunk at once, with the chunk's products of a beside it,
                      then the carries across chunks; its backward is the same scan run in reverse.
    (c) blocked       chunks of k: h = L b + A h_in, L[t, j] = prod_{j<m<=t} a_m (a cumprod of a masked k x k matrix).
    (d) LinearScan    sequential, with a hand-written backward (charlm/layers/scan.py); `time_major` is its previous
                      form, which copied a and b to time-major layout first and the output back.

`python -m charlm.layers.scan_variants` measures them on one thread (training: forward and backward; scoring:
forward under no_grad) at the 128 row's shapes and prints the table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch

from .scan import LinearScan, scan_loop

Scan = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def log_space(a: torch.Tensor, b: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    """(a) Heinsen's log-space scan, both signs of b and h_0 (a > 0)."""
    a_star = torch.cat([torch.zeros_like(h0)[:, None], torch.cumsum(torch.log(a), 1)], 1)  # (B, 1 + T, H)
    v = torch.cat([h0[:, None], b], 1)
    tiny = torch.finfo(v.dtype).tiny  # log(0) = -inf would give nan gradients: the absent sign's part is exp(-87)
    parts = [torch.exp(a_star + torch.logcumsumexp(torch.log(s.clamp_min(tiny)) - a_star, 1)) for s in (v, -v)]
    return (parts[0] - parts[1])[:, 1:]


def chunked(k: int) -> Scan:
    """(b) cumprod / cumsum within chunks of k steps, sequential across chunks."""

    def scan(a, b, h0):
        outs, h = [], h0
        for s in range(0, a.shape[1], k):
            prods = torch.cumprod(a[:, s : s + k], 1)
            outs.append(prods * (h[:, None] + torch.cumsum(b[:, s : s + k] / prods, 1)))
            h = outs[-1][:, -1]
        return torch.cat(outs, 1)

    return scan


def _two_level(a: torch.Tensor, b: torch.Tensor, h0: torch.Tensor, k: int, reverse: bool = False) -> torch.Tensor:
    """(B, T, H), T a multiple of k -> h (B, T, H); `reverse` scans from the last step back."""
    B, T, H = a.shape
    n = T // k
    ac, bc = a.reshape(B, n, k, H), b.reshape(B, n, k, H)
    local, prods = torch.empty_like(bc), torch.empty_like(ac)  # the scan within each chunk from 0, its products of a
    order = range(k - 1, -1, -1) if reverse else range(k)
    steps = list(order)
    local[:, :, steps[0]], prods[:, :, steps[0]] = bc[:, :, steps[0]], ac[:, :, steps[0]]
    for p, j in zip(steps, steps[1:]):
        torch.addcmul(bc[:, :, j], ac[:, :, j], local[:, :, p], out=local[:, :, j])
        torch.mul(ac[:, :, j], prods[:, :, p], out=prods[:, :, j])
    chunks = list(range(n - 1, -1, -1) if reverse else range(n))
    carry = a.new_empty(B, n, H)  # the state entering each chunk
    carry[:, chunks[0]] = h0
    for p, c in zip(chunks, chunks[1:]):
        torch.addcmul(local[:, p, steps[-1]], prods[:, p, steps[-1]], carry[:, p], out=carry[:, c])
    return local.addcmul_(prods, carry[:, :, None]).reshape(B, T, H)


class TwoLevelScan(torch.autograd.Function):
    """(b) the two-level scan with its backward: the adjoint d_t = g_t + a_{t+1} d_{t+1} scanned the same way."""

    @staticmethod
    def forward(ctx, a, b, h0, k):
        pad = -a.shape[1] % k
        a_p = torch.cat([a, a.new_ones(a.shape[0], pad, a.shape[2])], 1) if pad else a
        b_p = torch.cat([b, b.new_zeros(b.shape[0], pad, b.shape[2])], 1) if pad else b
        h = _two_level(a_p, b_p, h0, k)[:, : a.shape[1]]
        ctx.save_for_backward(a, h, h0)
        ctx.k = k
        return h

    @staticmethod
    def backward(ctx, grad_h):
        a, h, h0 = ctx.saved_tensors
        B, T, H = a.shape
        pad = -T % ctx.k
        a_next = torch.cat([a[:, 1:], a.new_zeros(B, 1 + pad, H)], 1)  # a_{t+1}; past the end nothing flows back
        g = torch.cat([grad_h, grad_h.new_zeros(B, pad, H)], 1)
        d = _two_level(a_next, g, torch.zeros_like(h0), ctx.k, reverse=True)[:, :T]
        h_prev = torch.cat([h0[:, None], h[:, :-1]], 1)
        return d * h_prev, d, a[:, 0] * d[:, 0], None


def two_level(k: int) -> Scan:
    return lambda a, b, h0: TwoLevelScan.apply(a, b, h0, k)


def blocked(k: int) -> Scan:
    """(c) within chunks of k, h = L @ b + A h_in with L[t, j] = prod_{j<m<=t} a_m; sequential across chunks."""

    def scan(a, b, h0):
        B, T, H = a.shape
        pad = -T % k
        if pad:
            a, b = torch.cat([a, a.new_ones(B, pad, H)], 1), torch.cat([b, b.new_zeros(B, pad, H)], 1)
        n = a.shape[1] // k
        ac = a.reshape(B, n, k, H).permute(1, 0, 3, 2)  # (n, B, H, k)
        bc = b.reshape(B, n, k, H).permute(1, 0, 3, 2)
        below = torch.ones(k, k, dtype=torch.bool, device=a.device).tril(-1)  # [t, j] with t > j
        L = torch.cumprod(torch.where(below, ac[..., :, None], torch.ones_like(ac[..., :1, None])), -2)
        L = L * torch.ones(k, k, dtype=a.dtype, device=a.device).tril()  # zero above the diagonal
        local, prods = (L @ bc[..., None])[..., 0], torch.cumprod(ac, -1)  # (n, B, H, k)
        outs, h = [], h0
        for c in range(n):
            outs.append(local[c] + prods[c] * h[..., None])
            h = outs[-1][..., -1]
        return torch.stack(outs, 0).permute(1, 0, 3, 2).reshape(B, n * k, H)[:, :T]

    return scan


class TimeMajorScan(torch.autograd.Function):
    """(d) `LinearScan` as it was: a and b copied to time-major (T, B, H) first, the output transposed back."""

    @staticmethod
    def forward(ctx, f, w, c0):
        f_t, w_t = f.transpose(0, 1).contiguous(), w.transpose(0, 1).contiguous()
        c = torch.empty_like(w_t)
        prev = c0
        for t in range(w_t.shape[0]):
            prev = torch.addcmul(w_t[t], f_t[t], prev, out=c[t])
        ctx.save_for_backward(f_t, c, c0)
        return c.transpose(0, 1)

    @staticmethod
    def backward(ctx, grad_c):
        f_t, c, c0 = ctx.saved_tensors
        g = grad_c.transpose(0, 1).contiguous()
        a = torch.empty_like(g)
        a[-1] = g[-1]
        for t in range(g.shape[0] - 2, -1, -1):
            torch.addcmul(g[t], f_t[t + 1], a[t + 1], out=a[t])
        c_prev = torch.cat([c0.unsqueeze(0), c[:-1]], 0)
        return (a * c_prev).transpose(0, 1), a.transpose(0, 1), f_t[0] * a[0]


VARIANTS: dict[str, Scan] = {
    "step loop (autograd)": scan_loop,
    "(d) LinearScan, time-major (before)": TimeMajorScan.apply,
    "(d) LinearScan": LinearScan.apply,
    "(a) log space, signed": log_space,
    "(b) chunks, cumprod / cumsum, k = 10": chunked(10),
    "(b) chunks, cumprod / cumsum, k = 16": chunked(16),
    "(b) two-level, k = 10": two_level(10),
    "(b) two-level, k = 16": two_level(16),
    "(c) blocked matmul, k = 10": blocked(10),
}


TRAINING_ONLY = ("(a)", "(c)")  # over 10x slower than the loop in training; (c) at scoring shapes needs 0.6 GB


def measure(variants: dict[str, Scan], batch: int, steps: int, size: int, train: bool, rounds: int) -> list[dict]:
    """Median seconds per scan of each variant over `rounds` rounds, the variants in alternating order."""
    torch.manual_seed(0)
    a = torch.sigmoid(torch.randn(batch, steps, size) * 2 + 1)
    b, h0, g = torch.randn(batch, steps, size), torch.randn(batch, size), torch.randn(batch, steps, size)
    reference = scan_loop(a.double(), b.double(), h0.double())
    runs = {}
    for name, scan in variants.items():
        if train:
            leaves = tuple(t.clone().requires_grad_() for t in (a, b, h0))
            runs[name] = lambda scan=scan, leaves=leaves: torch.autograd.grad(scan(*leaves), leaves, g)
        else:
            runs[name] = lambda scan=scan: scan(a, b, h0)
    times = {name: [] for name in variants}
    names = list(variants)
    with torch.set_grad_enabled(train):
        for r in range(rounds + 1):  # round 0 warms up
            for name in names if r % 2 else names[::-1]:
                start = time.perf_counter()
                runs[name]()
                if r:
                    times[name].append(time.perf_counter() - start)
    base = statistics.median(times[names[0]])
    rows = []
    for name, scan in variants.items():
        with torch.no_grad():
            error = (scan(a, b, h0).double() - reference).abs().max().item()
        t = statistics.median(times[name])
        rows.append({"variant": name, "batch": batch, "steps": steps, "size": size, "train": train, "ms": 1e3 * t,
                     "speedup": base / t, "max_error": error})  # fmt: skip
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m charlm.layers.scan_variants", description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="128,348,465", help="widths (default: the 128 row's, %(default)s)")
    parser.add_argument("--rounds", type=int, default=10, help="timed rounds (default %(default)s)")
    parser.add_argument("--variants", default="", help="';'-separated names (default: all; the first is the base)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    variants = {n: VARIANTS[n] for n in args.variants.split(";")} if args.variants else VARIANTS
    for train, (batch, steps) in ((True, (16, 100)), (False, (128, 256))):
        chosen = variants if train else {n: v for n, v in variants.items() if not n.startswith(TRAINING_ONLY)}
        for size in map(int, args.sizes.split(",")):
            print(f"\n{'training' if train else 'scoring'}: {batch} streams x {steps} steps, H = {size}")
            for r in measure(chosen, batch, steps, size, train, args.rounds if train else max(3, args.rounds // 3)):
                print(f"  {r['variant']:<40}{r['ms']:9.2f} ms  x{r['speedup']:5.2f}  max error {r['max_error']:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
