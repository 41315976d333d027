"""The hand-written backwards (the linear recurrences' scan `LinearScan`, the papers' GRU) against autograd, and the
scans measured before choosing `LinearScan` (charlm/layers/scan_variants.py) against the step loop."""

from __future__ import annotations

import pytest
import torch

from charlm.layers import LinearScan, PaperGRUScan, scan_loop
from charlm.layers.scan_variants import VARIANTS, TimeMajorScan, TwoLevelScan


def _recurrence(a, b, h0):
    """h_t = a_t h_{t-1} + b_t written out."""
    h, hs = h0, []
    for t in range(a.shape[1]):
        h = a[:, t] * h + b[:, t]
        hs.append(h)
    return torch.stack(hs, 1)


def _leaves(B=3, T=7, H=4, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(B, T, H, generator=g, dtype=dtype).requires_grad_()
    b = torch.randn(B, T, H, generator=g, dtype=dtype).requires_grad_()
    h0 = torch.randn(B, H, generator=g, dtype=dtype).requires_grad_()
    return a, b, h0


def test_scan_matches_the_recurrence_and_its_gradients():
    a, b, h0 = _leaves()
    torch.testing.assert_close(LinearScan.apply(a, b, h0), _recurrence(a, b, h0))
    assert torch.autograd.gradcheck(LinearScan.apply, (a, b, h0))
    one_step = tuple(t.detach()[:, :1].clone().requires_grad_() for t in (a, b)) + (h0,)
    assert torch.autograd.gradcheck(LinearScan.apply, one_step)


def test_scan_reads_strided_views_as_the_layers_pass_them():
    """Gates sliced from one projection (B, T, 2H): strided views, read in place."""
    g = torch.Generator().manual_seed(1)
    both = torch.randn(3, 9, 10, generator=g, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(3, 5, generator=g, dtype=torch.float64, requires_grad=True)
    a, b = torch.sigmoid(both[..., :5]), both[..., 5:]
    assert not a.is_contiguous() or not b.is_contiguous()
    scanned = LinearScan.apply(a, b, h0)
    torch.testing.assert_close(scanned, _recurrence(a, b, h0))
    weights = torch.randn(scanned.shape, generator=g, dtype=torch.float64).transpose(0, 1).contiguous().transpose(0, 1)
    got = torch.autograd.grad((scanned * weights).sum(), (both, h0), retain_graph=True)
    want = torch.autograd.grad((_recurrence(a, b, h0) * weights).sum(), (both, h0))
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y)


@pytest.mark.parametrize("shape", [(16, 100, 128), (3, 7, 5), (4, 10, 465), (1, 33, 9)])
def test_scan_computes_what_it_computed_before_to_the_bit(shape):
    """`lstm-srnn-hidden` trained on the time-major form: the in-place scan gives the same bits, forward and backward
    (so those models retrain bit for bit: the kernel keeps its name), and so does the step loop, forward."""
    a, b, h0 = _leaves(*shape, dtype=torch.float32, seed=sum(shape))
    g = torch.randn(shape, generator=torch.Generator().manual_seed(3))
    now, before = LinearScan.apply(a, b, h0), TimeMajorScan.apply(a, b, h0)
    assert torch.equal(now, before) and torch.equal(now, scan_loop(a, b, h0))
    for x, y in zip(torch.autograd.grad(now, (a, b, h0), g), torch.autograd.grad(before, (a, b, h0), g)):
        assert torch.equal(x, y)


def test_scan_is_safe_where_products_of_the_coefficients_underflow():
    """prod a_t underflows float32 within a few steps here (and a_t = 0 cuts the past off): the scan never forms it."""
    a = torch.full((2, 60, 3), 1e-20)
    a[:, 30] = 0.0
    b, h0 = torch.randn(2, 60, 3), torch.randn(2, 3)
    leaves = [t.clone().requires_grad_() for t in (a, b, h0)]
    scanned = LinearScan.apply(*leaves)
    assert torch.isfinite(scanned).all()
    torch.testing.assert_close(scanned, _recurrence(a, b, h0))
    grads = torch.autograd.grad(scanned.sum(), leaves)
    assert all(torch.isfinite(x).all() for x in grads)
    torch.testing.assert_close(grads[1], torch.ones_like(b) + torch.cat([a[:, 1:], torch.zeros(2, 1, 3)], 1))


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("T", [1, 7, 23])
def test_every_measured_scan_is_the_recurrence(name, T):
    a, b, h0 = _leaves(T=T, seed=T)
    a = (a.detach() * 0.9 + 0.05).requires_grad_()  # (0, 1): the log-space scan needs a > 0
    got = VARIANTS[name](a, b, h0)
    want = _recurrence(a, b, h0)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    weights = torch.randn(got.shape, generator=torch.Generator().manual_seed(5), dtype=got.dtype)
    for x, y in zip(torch.autograd.grad((got * weights).sum(), (a, b, h0)),
                    torch.autograd.grad((want * weights).sum(), (a, b, h0))):  # fmt: skip
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-10)


def test_the_two_level_scan_passes_gradcheck():
    a, b, h0 = _leaves(T=11)
    assert torch.autograd.gradcheck(lambda a, b, h0: TwoLevelScan.apply(a, b, h0, 4), (a, b, h0))


def test_paper_gru_scan_matches_the_papers_equations_and_its_gradients():
    """Karpathy et al. sec 3.1: r, z = sigm(.); htilde = tanh(W_n x + U_n (r * h) + b); h = (1 - z) h + z htilde."""
    torch.manual_seed(0)
    B, T, H = 3, 6, 4
    leaf = lambda *shape: (torch.randn(*shape, dtype=torch.float64) * 0.8).requires_grad_()  # noqa: E731
    xw, h0, u_g, b_g, u_n, b_n = leaf(B, T, 3 * H), leaf(B, H), leaf(2 * H, H), leaf(2 * H), leaf(H, H), leaf(H)
    h, hs = h0, []
    for t in range(T):
        r = torch.sigmoid(xw[:, t, :H] + h @ u_g[:H].t() + b_g[:H])
        z = torch.sigmoid(xw[:, t, H : 2 * H] + h @ u_g[H:].t() + b_g[H:])
        htilde = torch.tanh(xw[:, t, 2 * H :] + (r * h) @ u_n.t() + b_n)
        h = (1 - z) * h + z * htilde
        hs.append(h)
    torch.testing.assert_close(PaperGRUScan.apply(xw, h0, u_g, b_g, u_n, b_n), torch.stack(hs, 1))
    assert torch.autograd.gradcheck(PaperGRUScan.apply, (xw, h0, u_g, b_g, u_n, b_n))


def test_the_measurement_reports_every_variant_with_its_error():
    from charlm.layers.scan_variants import measure

    for train in (True, False):
        rows = measure(VARIANTS, batch=2, steps=12, size=3, train=train, rounds=1)
        assert [r["variant"] for r in rows] == list(VARIANTS) and rows[0]["speedup"] == 1.0
        assert all(r["ms"] > 0 and r["max_error"] < 1e-4 for r in rows)
