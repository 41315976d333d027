"""The GRU layers: torch's form (`gru`) and the papers' (`gru-paper`, with its own scan `PaperGRUScan`)."""

from __future__ import annotations

import torch
import torch.nn as nn

from .base import TracedLayer, features, project


class GRULayer(TracedLayer):
    """torch's GRU: r, z' = sigm(.), n = tanh(W_n x + b_in + r * (U_n h + b_hn)), h = (1 - z') n + z' h.

    Traced as the papers write it: z = 1 - z' (weight on the candidate htilde = n).
    """

    state_names = ("h",)

    def __init__(self, d_in: int, size: int):
        super().__init__()
        self.rnn = nn.GRU(d_in, size, batch_first=True)

    @staticmethod
    def n_params(d_in: int, size: int) -> int:
        return 3 * size * (d_in + size) + 6 * size

    def forward(self, x, state, fused=True):
        if fused:
            out, h = self.rnn(features(x, self.rnn.input_size, state[0].dtype), state[0].unsqueeze(0))
            return out, (h.squeeze(0),)
        return super().forward(x, state)

    def trace(self, x, state, keep=True):
        r = self.rnn
        H = r.hidden_size
        xw = project(x, r.weight_ih_l0, r.bias_ih_l0)  # (B, T, 3H)
        (h,) = state
        hs, rs, zs, ns = [], [], [], []
        for xw_t in xw.unbind(1):
            hw = torch.addmm(r.bias_hh_l0, h, r.weight_hh_l0.t())  # (B, 3H)
            rz = torch.sigmoid(xw_t[:, : 2 * H] + hw[:, : 2 * H])
            reset, keep_old = rz[:, :H], rz[:, H:]
            n = torch.tanh(xw_t[:, 2 * H :] + reset * hw[:, 2 * H :])
            h = n + keep_old * (h - n)  # (1 - z') n + z' h
            hs.append(h)
            if keep:
                rs.append(reset), zs.append(1.0 - keep_old), ns.append(n)
        out = torch.stack(hs, 1)
        cache = (
            {"r": torch.stack(rs, 1), "z": torch.stack(zs, 1), "htilde": torch.stack(ns, 1), "h": out} if keep else {}
        )
        return out, (h,), cache


class PaperGRUScan(torch.autograd.Function):
    """The papers' GRU over time (see `PaperGRULayer`) with a hand-written backward.

    No fused kernel computes this GRU, and at the papers' widths (45 to 142 units, 16 streams) autograd's
    per-step bookkeeping costs more than the products. Forward runs six in-place ops a step and keeps
    r, z, htilde and r * h; backward is backpropagation through time written out, and the weight gradients
    are one product over all steps instead of one per step. Inside, tensors are time-major (T, B, features).
    Takes the input projections xw (B, T, 3H) = [W_r x + b_ir, W_z x + b_iz, W_n x + b_in] and the
    recurrent weights as nn.Linear stores them: u_g (2H, H) = [U_r; U_z], u_n (H, H) = U_n.
    """

    @staticmethod
    def forward(ctx, xw, h0, u_g, b_g, u_n, b_n):
        H = h0.shape[1]
        x = xw.transpose(0, 1).contiguous()  # (T, B, 3H)
        gates_x, content_x = x[..., : 2 * H] + b_g, x[..., 2 * H :] + b_n  # biases added once, not per step
        T, B = x.shape[:2]
        hs = xw.new_empty(T + 1, B, H)  # h_0 .. h_T
        rz, htilde, rh = xw.new_empty(T, B, 2 * H), xw.new_empty(T, B, H), xw.new_empty(T, B, H)
        hs[0] = h0
        w_g, w_n = u_g.t(), u_n.t()
        h = hs.unbind(0)  # per-step views made once: indexing in the loop costs as much as the arithmetic
        steps = zip(gates_x.unbind(0), content_x.unbind(0), rz.unbind(0), rz[..., :H].unbind(0),
                    rz[..., H:].unbind(0), rh.unbind(0), htilde.unbind(0), h[:-1], h[1:])  # fmt: skip
        for gx, cx, rz_t, r, z, rh_t, ht, h_prev, h_next in steps:
            torch.addmm(gx, h_prev, w_g, out=rz_t).sigmoid_()
            torch.mul(r, h_prev, out=rh_t)
            torch.addmm(cx, rh_t, w_n, out=ht).tanh_()
            torch.lerp(h_prev, ht, z, out=h_next)  # (1 - z) h + z htilde
        ctx.save_for_backward(hs, rz, htilde, rh, u_g, u_n)
        return hs[1:].transpose(0, 1)  # (B, T, H)

    @staticmethod
    def backward(ctx, grad_h):
        hs, rz, htilde, rh, u_g, u_n = ctx.saved_tensors
        T, B, H = htilde.shape
        g = grad_h.transpose(0, 1).contiguous()  # (T, B, H)
        r, z, h_prev = rz[..., :H], rz[..., H:], hs[:-1]
        # The step's local derivatives, for all steps at once: only their products with dh are sequential.
        to_zc = torch.stack([(htilde - h_prev) * z * (1 - z), z * (1 - htilde * htilde)], 2)  # (T, B, 2, H)
        to_r = h_prev * r * (1 - r)  # dL/d(r pre-activation) = dL/d(r h) * this
        keep, r = 1 - z, r.contiguous()  # dh_{t-1} through the carry; the reset's share
        d_pre = rz.new_empty(T, B, 3 * H)  # dL/d(pre-activations) of r, z and the content, laid out as xw
        g_before = (None,) + g.unbind(0)[:-1]  # the output gradient of the step before, which the carry joins
        steps = zip(g_before, to_zc.unbind(0), to_r.unbind(0), keep.unbind(0), r.unbind(0), d_pre.unbind(0))
        dh = g[-1].clone()  # dL/dh_t: from the output at t and from the steps after it, (B, H)
        for g_prev, to_zc_t, to_r_t, keep_t, r_t, d_t in reversed(list(steps)):
            torch.mul(dh[:, None], to_zc_t, out=d_t[:, H:].view(B, 2, H))  # z's and the content's, in one op
            d_rh = torch.mm(d_t[:, 2 * H :], u_n)  # (B, H)
            torch.mul(d_rh, to_r_t, out=d_t[:, :H])
            carry = dh * keep_t if g_prev is None else torch.addcmul(g_prev, dh, keep_t)
            dh = torch.addmm(carry.addcmul_(d_rh, r_t), d_t[:, : 2 * H], u_g)
        d_rz, d_content = d_pre[..., : 2 * H].flatten(0, 1), d_pre[..., 2 * H :].flatten(0, 1)  # (T*B, .)
        grad_u_g = d_rz.t() @ h_prev.flatten(0, 1)
        grad_u_n = d_content.t() @ rh.flatten(0, 1)
        return d_pre.transpose(0, 1), dh, grad_u_g, d_rz.sum(0), grad_u_n, d_content.sum(0)


class PaperGRULayer(TracedLayer):
    """The papers' GRU (Karpathy et al. sec 3.1, char-rnn's GRU.lua, the notes' GRU): the reset acts on the state.

        r, z   = sigm(W_r x + b_ir + U_r h + b_hr), sigm(W_z x + b_iz + U_z h + b_hz)
        htilde = tanh(W_n x + b_in + U_n (r * h) + b_hn)
        h      = (1 - z) * h + z * htilde

    torch's `gru` computes tanh(W_n x + b_in + r * (U_n h + b_hn)) instead: the same parameters
    (char-rnn's six biases; 3H(d + H) + 6H in all), another function, and no fused kernel runs this one:
    training runs `PaperGRUScan`, the same function with a hand-written backward.
    """

    state_names = ("h",)

    def __init__(self, d_in: int, size: int):
        super().__init__()
        self.size = size
        self.from_x = nn.Linear(d_in, 3 * size)  # W_r, W_z, W_n and b_ir, b_iz, b_in
        self.gates_h = nn.Linear(size, 2 * size)  # U_r, U_z and b_hr, b_hz
        self.content_h = nn.Linear(size, size)  # U_n and b_hn

    @staticmethod
    def n_params(d_in: int, size: int) -> int:
        return 3 * size * (d_in + size) + 6 * size

    def forward(self, x, state, fused=True):
        if fused:
            xw = project(x, self.from_x.weight, self.from_x.bias)  # (B, T, 3H)
            g, n = self.gates_h, self.content_h
            out = PaperGRUScan.apply(xw, state[0], g.weight, g.bias, n.weight, n.bias)  # (B, T, H)
            return out, (out[:, -1],)
        return super().forward(x, state)

    def trace(self, x, state, keep=True):
        H = self.size
        xw = project(x, self.from_x.weight, self.from_x.bias)  # (B, T, 3H)
        (h,) = state
        w_g, b_g = self.gates_h.weight.t(), self.gates_h.bias
        w_n, b_n = self.content_h.weight.t(), self.content_h.bias
        names = ("r", "z", "htilde", "h")
        steps = {k: [] for k in names}
        for xw_t in xw.unbind(1):
            rz = torch.sigmoid(xw_t[:, : 2 * H] + torch.addmm(b_g, h, w_g))
            reset, z = rz[:, :H], rz[:, H:]
            htilde = torch.tanh(xw_t[:, 2 * H :] + torch.addmm(b_n, reset * h, w_n))
            h = h + z * (htilde - h)  # (1 - z) h + z htilde
            steps["h"].append(h)
            if keep:
                for k, v in zip(names[:3], (reset, z, htilde)):
                    steps[k].append(v)
        out = torch.stack(steps["h"], 1)
        cache = {k: (out if k == "h" else torch.stack(steps[k], 1)) for k in names} if keep else {}
        return out, (h,), cache
