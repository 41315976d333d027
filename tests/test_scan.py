"""The hand-written backward of the memory-cell scan (lstm-srnn-hidden) against autograd."""

from __future__ import annotations

import torch

from charlm.model import LinearScan


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
