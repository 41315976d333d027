"""The hand-written backwards (the memory-cell scan of lstm-srnn-hidden, the papers' GRU) against autograd."""

from __future__ import annotations

import torch

from charlm.layers import LinearScan, PaperGRUScan


def test_scan_matches_the_recurrence_and_its_gradients():
    torch.manual_seed(0)
    f = torch.rand(3, 7, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 7, 4, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    c, cs = c0, []
    for t in range(7):
        c = f[:, t] * c + w[:, t]
        cs.append(c)
    expected = torch.stack(cs, 1)
    got = LinearScan.apply(f, w, c0)
    torch.testing.assert_close(got, expected)
    assert torch.autograd.gradcheck(LinearScan.apply, (f, w, c0))


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
