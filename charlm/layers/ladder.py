"""The lecture notes' rungs (seed 004) that no paper trains: the CBOW RNNs and the prototype / pseudo-LSTM."""

from __future__ import annotations

import torch
import torch.nn as nn

from .base import TracedLayer, project

CBOW_DECAY = 0.99  # d: `cbow` is a leaking mean, h = d h + (1 - d) E x, a bag of the last ~100 characters


class CBOWLayer(TracedLayer):
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


class ProtoLSTMLayer(TracedLayer):
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
