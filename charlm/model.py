"""Character language models of every architecture, with every internal readable.

One config dataclass builds all twelve architectures of the suite:

    rnn               Elman S-RNN                h = tanh(W x + U h + b)
    gru               GRU (torch / cuDNN form)   r, z, htilde = tanh(W x + r * (U h + b)), h = (1 - z) h + z htilde
    lstm              LSTM                       i f o ctilde from x and h; c = f c + i ctilde; h = o tanh(c)
    lstm-srnn         Levy et al. eq. 9          ctilde = W_cx x (no recurrence, no tanh)
    lstm-srnn-out     eq. 10                     ... and h = tanh(c): no output gate
    lstm-srnn-hidden  sec 3.1                    ... and gates read x only: the memory cell is the only recurrence
    lstm-gates        sec 3.1                    gates removed: the S-RNN alone, at the LSTM's width

and the rungs of the lecture notes' derivation of the LSTM (seed 004), with the papers' own GRU:

    cbow              CBOW as an RNN             h = d h + (1 - d) E x: the notes' sum s + E[x] as a leaking mean
    cbow-tanh         squashed CBOW              h = tanh(h + E x)
    proto-lstm        prototype LSTM             i f o read c; ctilde = tanh(W (o c) + U x); c = f c + i ctilde
    gru-paper         the papers' GRU            r, z; htilde = tanh(W x + U (r * h) + b): reset before the product
    pseudo-lstm       pseudo-LSTM                the prototype reading tanh(c) instead of c; both output tanh(c)

Every layer has a hand-written loop that returns all its intermediates (`trace`), and the
rnn / gru / lstm / lstm-gates layers also run torch's fused kernel for training, on the very
same parameters, as gru-paper runs its own scan with a hand-written backward (tests prove each
pair agrees, outputs and gradients). The GRUs' `z` is traced in
the papers' convention (the weight on the candidate), which is one minus torch's `z`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from corpora.errors import UserError

ARCHS = (
    "rnn", "gru", "lstm", "lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "lstm-gates",
    "cbow", "cbow-tanh", "proto-lstm", "gru-paper", "pseudo-lstm",
)  # fmt: skip
LSTM_FAMILY = ("lstm", "lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "lstm-gates")
ABLATIONS = ("lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "lstm-gates")  # Levy et al. sec 3.1: at the LSTM's width
GATED_ARCHS = ("lstm", "lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "gru", "gru-paper", "proto-lstm",
               "pseudo-lstm")  # learned gates (a gated additive memory), report order  # fmt: skip
GATELESS_ARCHS = ("rnn", "lstm-gates", "cbow", "cbow-tanh")  # the Elman S-RNN and the CBOW RNNs (cbow's decay is fixed)
GRU_ARCHS = ("gru", "gru-paper")  # torch's form and the papers' form: the same gates r and z
ARCH_LABELS = {  # how the report names each architecture (one name everywhere), in report order
    "rnn": "RNN", "gru": "GRU", "gru-paper": "GRU (papers' form)", "lstm": "LSTM", "lstm-srnn": "LSTM - S-RNN",
    "lstm-srnn-out": "LSTM - S-RNN - OUT", "lstm-srnn-hidden": "LSTM - S-RNN - HIDDEN", "lstm-gates": "LSTM - GATES",
    "cbow": "CBOW", "cbow-tanh": "CBOW-tanh", "proto-lstm": "prototype LSTM", "pseudo-lstm": "pseudo-LSTM",
}  # fmt: skip
BUDGETS = (64, 128, 256, 512)  # Karpathy et al. sec 4.1: the widths of the 1-layer LSTMs that set the four budget rows
INIT_RANGE = 0.08  # Karpathy et al. sec 3.3: every parameter uniform in [-0.08, 0.08]
CBOW_DECAY = 0.99  # d: `cbow` is a leaking mean, h = d h + (1 - d) E x, a bag of the last ~100 characters

State = list[tuple[torch.Tensor, ...]]  # per layer: (h,) or (h, c), each (B, H); h is what the layer outputs


@dataclass(frozen=True)
class ModelConfig:
    arch: str  # one of ARCHS
    vocab_size: int  # V: number of distinct bytes; inputs are one-hot over them
    layers: int = 2  # stacked recurrent layers
    size: int = 128  # hidden width H of every layer
    dropout: float = 0.0  # dropout on the outputs of every layer (between layers and before the softmax)

    def __post_init__(self):
        if self.arch not in ARCHS:
            raise UserError(f"unknown architecture '{self.arch}': choose one of {', '.join(ARCHS)}")
        for field in ("vocab_size", "layers", "size"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise UserError(f"{field} must be a positive integer, got {value!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise UserError(f"dropout must be in [0, 1), got {self.dropout}")

    def to_dict(self) -> dict:
        return asdict(self)


def project(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x W^T + b for a layer's input: features (B, T, d), or the first layer's byte ids (B, T).

    A one-hot vector times W^T is a column of W, so ids are a row lookup instead of a (B*T x V) product: the same
    numbers and gradients (tests compare both), at the cost of a gather. It halves the arithmetic of the
    hand-written cells of the 128 row, whose input projection is as large as their recurrence.
    """
    if x.dtype == torch.long:
        out = F.embedding(x, weight.t())  # (B, T, out)
        return out + bias if bias is not None else out
    return F.linear(x, weight, bias)


def features(x: torch.Tensor, vocab_size: int, dtype: torch.dtype) -> torch.Tensor:
    """The one-hot (B, T, V) of byte ids, for torch's fused kernels, which take only features; features pass."""
    return F.one_hot(x, vocab_size).to(dtype) if x.dtype == torch.long else x


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


# The kernels training runs where torch has none and the choice changed after models shipped, recorded with every
# training session (reports.ship.machine). Another kernel sums in another order, so a shipped model retrains bit for
# bit only on the one that trained it; a session without the record ran the one before (gru-paper: autograd
# through `PaperGRULayer.trace`). A change to what a kernel here computes, to the last bit, gets a new name.
TRAINING_KERNELS = {"gru-paper": "PaperGRUScan"}


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


class _TracedLayer(nn.Module):
    """A layer whose forward is its hand-written `trace` without the cache (layers with a fused kernel
    fall back to it when `fused` is off; the others ignore `fused`)."""

    def forward(self, x, state, fused=True):
        out, state, _ = self.trace(x, state, keep=False)
        return out, state


class ElmanLayer(_TracedLayer):
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


class GRULayer(_TracedLayer):
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


class LSTMLayer(_TracedLayer):
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


class AblatedLSTMLayer(_TracedLayer):
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


class CBOWLayer(_TracedLayer):
    """The notes' CBOW as an RNN, R(s, x) = s + E[x] (`cbow`), and its squashed form tanh(s + E[x]) (`cbow-tanh`).

    E x is the embedding of a one-hot byte (above the first layer, a linear map of the layer below's
    output); no bias and no recurrent weights, as in the notes. The notes' plain sum grows without
    bound over a carried stream (linearly in its length once the embeddings have a nonzero mean, and
    a stream is a whole epoch) and never forgets, so `cbow` is its leaking mean instead:

        h_t = d h_{t-1} + (1 - d) E x_t,   d = CBOW_DECAY = 0.99,   so h_t = sum_k (1 - d) d^(t - k) E x_k

    still a bag of the characters read (nothing mixes one with another, no weight depends on content),
    of the last ~1 / (1 - d) = 100 (the unroll) with geometric recency weights that sum to at most one:
    |h| <= max|E x| at every depth and whatever the stream's length. The (1 - d) only rescales E (the
    same functions as the leaking sum). After predict's 1,000-character warm-up a stream keeps
    d^1000 = 4e-5 of what came before, as the parallel scoring assumes.
    """

    state_names = ("h",)

    def __init__(self, d_in: int, size: int, squash: bool):
        super().__init__()
        self.squash = squash
        self.embed = nn.Linear(d_in, size, bias=False)  # E

    @staticmethod
    def n_params(d_in: int, size: int, squash: bool) -> int:
        return d_in * size

    def trace(self, x, state, keep=True):
        (h,) = state
        embedded = project(x, self.embed.weight, self.embed.bias)  # (B, T, H)
        writes = embedded if self.squash else (1.0 - CBOW_DECAY) * embedded
        hs = []
        for w_t in writes.unbind(1):
            h = torch.tanh(h + w_t) if self.squash else torch.add(w_t, h, alpha=CBOW_DECAY)  # d h + (1 - d) E x
            hs.append(h)
        out = torch.stack(hs, 1)
        return out, (h,), {"h": out} if keep else {}


class ProtoLSTMLayer(_TracedLayer):
    """The notes' prototype LSTM (`proto-lstm`) and pseudo-LSTM (`pseudo-lstm`): one state s, traced as `c`.

        read   = s_{t-1}                        (prototype)   or tanh(s_{t-1})   (pseudo)
        i f o  = sigm(W_g read + U_g x + b_g)   (the notes' three gates, each its own W, U, b)
        ctilde = tanh(W (o * read) + U x + b)   (the candidate write reads the state through the read gate o)
        c      = f * s_{t-1} + i * ctilde
        h      = tanh(c)                        (what the next layer and the softmax read)

    The state is unbounded (only f <= 1 restrains it) in both. The prototype reads it raw, which is the
    notes' case for the GRU and the pseudo-LSTM ("the state [can] quickly become large and chaotic"):
    under the papers' recipe its gates saturate within a few updates and the state then grows by one a
    step. The notes give the pseudo-LSTM's output as tanh(s_t) and leave the prototype's open; both
    output tanh(c) here, so the logits stay bounded (the raw state as output makes the loss diverge
    within three updates in every seed and learning rate tried) and the pseudo-LSTM's step is exactly
    "read the state through tanh". The state carried is (h, c) like the LSTM's, so every layer's state
    starts with the output h the layer above reads; the recurrence itself reads c alone.
    """

    state_names = ("h", "c")

    def __init__(self, d_in: int, size: int, squash: bool):
        super().__init__()
        self.size, self.squash = size, squash
        self.from_x = nn.Linear(d_in, 4 * size)  # U_i, U_f, U_o, U and b_i, b_f, b_o, b
        self.gates_h = nn.Linear(size, 3 * size, bias=False)  # W_i, W_f, W_o
        self.content_h = nn.Linear(size, size, bias=False)  # W

    @staticmethod
    def n_params(d_in: int, size: int, squash: bool) -> int:
        return 4 * size * (d_in + 1) + 4 * size * size

    def trace(self, x, state, keep=True):
        H = self.size
        xw = project(x, self.from_x.weight, self.from_x.bias)  # (B, T, 4H)
        h, c = state  # the recurrence reads c alone; h is returned as it came when there are no steps
        w_g, w_c = self.gates_h.weight.t(), self.content_h.weight.t()
        read = torch.tanh(c) if self.squash else c
        names = ("i", "f", "o", "ctilde", "c", "h")
        steps = {k: [] for k in names}
        for xw_t in xw.unbind(1):
            g = torch.sigmoid(torch.addmm(xw_t[:, : 3 * H], read, w_g))
            i, f, o = g[:, :H], g[:, H : 2 * H], g[:, 2 * H :]
            ctilde = torch.tanh(torch.addmm(xw_t[:, 3 * H :], o * read, w_c))
            c = f * c + i * ctilde
            h = torch.tanh(c)
            read = h if self.squash else c
            steps["h"].append(h)
            if keep:
                for k, v in zip(names[:5], (i, f, o, ctilde, c)):
                    steps[k].append(v)
        out = torch.stack(steps["h"], 1)  # (B, T, H)
        cache = {k: (out if k == "h" else torch.stack(steps[k], 1)) for k in names} if keep else {}
        return out, (h, c), cache


class PaperGRULayer(_TracedLayer):
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


LAYERS = {  # architecture -> (layer class, its options)
    "rnn": (ElmanLayer, {}),
    "gru": (GRULayer, {}),
    "lstm": (LSTMLayer, {}),
    "lstm-srnn": (AblatedLSTMLayer, {"output_gate": True, "gates_recurrent": True}),
    "lstm-srnn-out": (AblatedLSTMLayer, {"output_gate": False, "gates_recurrent": True}),
    "lstm-srnn-hidden": (AblatedLSTMLayer, {"output_gate": False, "gates_recurrent": False}),
    "lstm-gates": (ElmanLayer, {}),
    "cbow": (CBOWLayer, {"squash": False}),
    "cbow-tanh": (CBOWLayer, {"squash": True}),
    "proto-lstm": (ProtoLSTMLayer, {"squash": False}),
    "gru-paper": (PaperGRULayer, {}),
    "pseudo-lstm": (ProtoLSTMLayer, {"squash": True}),
}


def make_layer(arch: str, d_in: int, size: int) -> nn.Module:
    cls, options = LAYERS[arch]
    return cls(d_in, size, **options)


def layer_params(arch: str, d_in: int, size: int) -> int:
    cls, options = LAYERS[arch]
    return cls.n_params(d_in, size, **options)


def count_params(config: ModelConfig) -> int:
    """Parameter count of `build_model(config)` without building it."""
    V, H = config.vocab_size, config.size
    layers = sum(layer_params(config.arch, V if l == 0 else H, H) for l in range(config.layers))
    return layers + H * V + V  # + softmax head


def budget_params(budget: int, vocab_size: int) -> int:
    """Parameters of the budget row `budget` (Karpathy et al. sec 4.1): those of a 1-layer LSTM of that width.

    "For a 1-layer LSTM we used hidden size vectors of 64, 128, 256, and 512 cells, which [...] translates
    to approximately 50K, 130K, 400K, and 1.3M parameters"; "Models in each row have nearly equal number
    of parameters" (Fig 1), whatever their type and depth.
    """
    return count_params(ModelConfig("lstm", vocab_size, 1, budget))


def _closest_width(arch: str, target: int, vocab_size: int, layers: int) -> int:
    """The width whose parameter count is closest to `target` (counts grow with the width: bisect)."""
    count = lambda h: count_params(ModelConfig(arch, vocab_size, layers, h))
    lo, hi = 1, 2
    while count(hi) < target:
        hi *= 2
    while hi - lo > 1:  # invariant: count(lo) < target <= count(hi), or lo == 1
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(mid) < target else (lo, mid)
    return min((lo, hi), key=lambda h: (abs(count(h) - target), h))


def matched_size(arch: str, budget: int, vocab_size: int, layers: int = 1) -> int:
    """Width of an `arch` model of `layers` layers sized to the budget row `budget` (a 1-layer LSTM's width).

    Every type and depth of the paper's grid is sized to the row's count (sec 4.1), so a 2-layer LSTM of
    the 128 row is narrower than 128. Levy et al.'s ablations keep the width of the LSTM they ablate
    (sec 3.2): for them this returns the LSTM's width at that depth.
    """
    sized_as = "lstm" if arch in ABLATIONS else arch
    return _closest_width(sized_as, budget_params(budget, vocab_size), vocab_size, layers)


def budget_of(arch: str, size: int, layers: int, vocab_size: int, budgets=None) -> int | None:
    """The budget row a model of this shape was sized to (the paper's rows first, then any 1-layer LSTM width),
    or None if no row gives this width."""
    candidates = budgets or (*BUDGETS, *range(1, 4 * size + 64))
    return next((b for b in candidates if matched_size(arch, b, vocab_size, layers) == size), None)


# ---------------------------------------------------------------------------------------------


class CharLM(nn.Module):
    """One-hot bytes -> stacked recurrent layers -> linear softmax head (logits over the vocabulary)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        V, H = config.vocab_size, config.size
        self.layers = nn.ModuleList(make_layer(config.arch, V if l == 0 else H, H) for l in range(config.layers))
        self.drop = nn.Dropout(config.dropout)
        self.head = nn.Linear(H, V)
        for p in self.parameters():
            nn.init.uniform_(p, -INIT_RANGE, INIT_RANGE)

    def init_state(self, batch_size: int) -> State:
        p = self.head.weight
        zeros = lambda: p.new_zeros(batch_size, self.config.size)  # noqa: E731
        return [tuple(zeros() for _ in layer.state_names) for layer in self.layers]

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        """The first layer's input: the byte ids themselves (B, T), which every layer reads as one-hot vectors
        (see `project`; the fused kernels get the one-hot built for them)."""
        if ids.dim() != 2:
            raise ValueError(f"ids must be a (B, T) LongTensor, got shape {tuple(ids.shape)}")
        return ids.long()

    def forward_with_state(self, ids: torch.Tensor, state: State | None = None, fused: bool = True):
        """(B, T) ids -> logits (B, T, V) and the state after the last step (to carry across batches)."""
        x = self._embed(ids)
        state = state if state is not None else self.init_state(ids.shape[0])
        new_state = []
        for layer, s in zip(self.layers, state):
            x, s = layer(x, s, fused=fused)  # layers without a fused kernel ignore it
            x = self.drop(x)  # (B, T, H)
            new_state.append(s)
        return self.head(x), new_state

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.forward_with_state(ids)[0]

    def run_with_cache(self, ids: torch.Tensor, state: State | None = None):
        """Hand-written cells only: logits (B, T, V), cache {'layers.{l}.{name}': (B, T, H)}, final state."""
        x = self._embed(ids)
        state = state if state is not None else self.init_state(ids.shape[0])
        cache, new_state = {}, []
        for l, (layer, s) in enumerate(zip(self.layers, state)):
            x, s, layer_cache = layer.trace(x, s)
            cache.update({f"layers.{l}.{k}": v for k, v in layer_cache.items()})
            x = self.drop(x)
            new_state.append(s)
        return self.head(x), cache, new_state

    def trace(self, ids: torch.Tensor, state: State | None = None) -> dict[str, torch.Tensor]:
        """Every internal of every layer, named `layers.{l}.{name}`, each (B, T, H)."""
        return self.run_with_cache(ids, state)[1]


def build_model(config: ModelConfig) -> CharLM:
    return CharLM(config)


def memory_weights(i: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """Levy et al. eq. 8: w[:, j, t] = i_j * prod_{k=j+1..t} f_k for j <= t, else 0.

    i, f: (B, T, H) -> w: (B, T_j, T_t, H), so that c_t = sum_j w[:, j, t] * ctilde_j when c_0 = 0.
    For the GRU pass i = z and f = 1 - z: the weights of its weighted average of htilde.
    """
    B, T, H = i.shape
    w = i.new_zeros(B, T, T, H)
    for j in range(T):
        w[:, j, j] = i[:, j]
        if j + 1 < T:
            w[:, j, j + 1 :] = i[:, j, None] * torch.cumprod(f[:, j + 1 :], dim=1)
    return w
