"""Models: the hand-written cells against torch's kernels and against the papers' equations.

Every comparison is in float64 against a reference written here, step by step, from the raw
parameter tensors (per-gate slices, the seeds' equations), or against independently built
torch modules with copied weights.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from charlm import ARCHS, ModelConfig, build_model, count_params, matched_size, memory_weights
from charlm.layers import CBOW_DECAY
from charlm.model import ABLATIONS as LEVY_ABLATIONS
from charlm.model import budget_of, budget_params
from corpora.errors import UserError

V, B, T = 11, 3, 9
FUSABLE = ("rnn", "gru", "lstm", "lstm-gates")
ABLATIONS = ("lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden")
LSTM_FAMILY = ("lstm",) + ABLATIONS
# Levy et al. (seed 000 sec 3.1, seed 001 eqs 9-10): which parts each ablation keeps.
ABLATION_EQS = {  # arch: (output gate, gates read h_{t-1})
    "lstm-srnn": (True, True),
    "lstm-srnn-out": (False, True),
    "lstm-srnn-hidden": (False, False),
}
TRACE_KEYS = {
    "rnn": {"h"},
    "lstm-gates": {"h"},
    "gru": {"r", "z", "htilde", "h"},
    "lstm": {"i", "f", "o", "ctilde", "c", "h"},
    "lstm-srnn": {"i", "f", "o", "ctilde", "c", "h"},
    "lstm-srnn-out": {"i", "f", "ctilde", "c", "h"},
    "lstm-srnn-hidden": {"i", "f", "ctilde", "c", "h"},
    "cbow": {"h"},
    "cbow-tanh": {"h"},
    "proto-lstm": {"i", "f", "o", "ctilde", "c", "h"},
    "gru-paper": {"r", "z", "htilde", "h"},
    "pseudo-lstm": {"i", "f", "o", "ctilde", "c", "h"},
    "mingru": {"z", "htilde", "h"},
    "minlstm": {"i", "f", "htilde", "h"},
}
LADDER = ("cbow", "cbow-tanh", "proto-lstm", "gru-paper", "pseudo-lstm")  # the notes' rungs (seed 004)


def make_model(arch, layers=2, size=12, seed=0, scale=None, dtype=torch.float64, vocab=V):
    torch.manual_seed(seed)
    model = build_model(ModelConfig(arch, vocab, layers, size)).to(dtype)
    if scale is not None:  # larger weights: gates away from 0.5, so the equations are really exercised
        with torch.no_grad():
            for p in model.parameters():
                p.uniform_(-scale, scale)
    return model


def random_ids(seed=1, batch=B, steps=T, vocab=V):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (batch, steps), generator=g)


def random_state(model, batch=B, seed=2, zero=False):
    g = torch.Generator().manual_seed(seed)
    dtype = model.head.weight.dtype
    make = (
        (lambda: torch.zeros(batch, model.config.size, dtype=dtype))
        if zero
        else (lambda: torch.randn(batch, model.config.size, generator=g, dtype=dtype) * 0.5)
    )
    return [tuple(make() for _ in layer.state_names) for layer in model.layers]


# ------------------------------------------------------------------------------------------
# The reference: every architecture, step by step, from the parameter tensors


def _lin(x, w, b=None):
    return x @ w.t() + (b if b is not None else 0.0)


def reference_layer(arch, layer, x, state):
    """x (B, T, d), state tuple -> (out (B, T, H), final state, {name: (B, T, H)})."""
    steps = {}

    def keep(**kv):
        for k, v in kv.items():
            steps.setdefault(k, []).append(v)

    if arch in ("rnn", "lstm-gates"):  # h = tanh(W_hx x + W_hh h + b)
        r = layer.rnn
        (h,) = state
        for t in range(x.shape[1]):
            h = torch.tanh(_lin(x[:, t], r.weight_ih_l0, r.bias_ih_l0) + _lin(h, r.weight_hh_l0, r.bias_hh_l0))
            keep(h=h)
        final = (h,)
    elif arch == "gru":  # torch's parameterisation; z traced in the papers' convention
        r = layer.rnn
        (h,) = state
        W, U, bW, bU = r.weight_ih_l0, r.weight_hh_l0, r.bias_ih_l0, r.bias_hh_l0
        H = h.shape[1]
        sl = lambda k: slice(k * H, (k + 1) * H)  # noqa: E731
        for t in range(x.shape[1]):
            xt = x[:, t]
            reset = torch.sigmoid(_lin(xt, W[sl(0)], bW[sl(0)]) + _lin(h, U[sl(0)], bU[sl(0)]))
            z_torch = torch.sigmoid(_lin(xt, W[sl(1)], bW[sl(1)]) + _lin(h, U[sl(1)], bU[sl(1)]))
            htilde = torch.tanh(_lin(xt, W[sl(2)], bW[sl(2)]) + reset * _lin(h, U[sl(2)], bU[sl(2)]))
            z = 1.0 - z_torch
            h = (1.0 - z) * h + z * htilde
            keep(r=reset, z=z, htilde=htilde, h=h)
        final = (h,)
    elif arch == "lstm":  # seed 000 eqs 2-7 in torch's gate order i, f, g (= ctilde), o
        r = layer.rnn
        h, c = state
        W, U, b = r.weight_ih_l0, r.weight_hh_l0, r.bias_ih_l0 + r.bias_hh_l0
        H = h.shape[1]
        sl = lambda k: slice(k * H, (k + 1) * H)  # noqa: E731
        for t in range(x.shape[1]):
            xt = x[:, t]
            i = torch.sigmoid(_lin(xt, W[sl(0)], b[sl(0)]) + _lin(h, U[sl(0)]))
            f = torch.sigmoid(_lin(xt, W[sl(1)], b[sl(1)]) + _lin(h, U[sl(1)]))
            ctilde = torch.tanh(_lin(xt, W[sl(2)], b[sl(2)]) + _lin(h, U[sl(2)]))
            o = torch.sigmoid(_lin(xt, W[sl(3)], b[sl(3)]) + _lin(h, U[sl(3)]))
            c = i * ctilde + f * c
            h = o * torch.tanh(c)
            keep(i=i, f=f, o=o, ctilde=ctilde, c=c, h=h)
        final = (h, c)
    elif arch in ("cbow", "cbow-tanh"):  # seed 004: R(s, x) = s + E[x] (here its leaking mean), or tanh(s + E[x])
        E, d = layer.embed.weight, CBOW_DECAY
        (h,) = state
        for t in range(x.shape[1]):
            h = torch.tanh(h + _lin(x[:, t], E)) if arch == "cbow-tanh" else d * h + (1 - d) * _lin(x[:, t], E)
            keep(h=h)
        final = (h,)
    elif arch in ("proto-lstm", "pseudo-lstm"):  # seed 004, "Prototype LSTM" and "Solution 2: Pseudo-LSTM"
        H = layer.content_h.weight.shape[0]
        sl = lambda k: slice(k * H, (k + 1) * H)  # noqa: E731
        U, b, W = layer.from_x.weight, layer.from_x.bias, layer.gates_h.weight
        W_i, W_f, W_o, W_s = W[sl(0)], W[sl(1)], W[sl(2)], layer.content_h.weight
        U_i, U_f, U_o, U_s = U[sl(0)], U[sl(1)], U[sl(2)], U[sl(3)]
        b_i, b_f, b_o, b_s = b[sl(0)], b[sl(1)], b[sl(2)], b[sl(3)]
        phi = torch.tanh if arch == "pseudo-lstm" else (lambda s: s)  # the pseudo-LSTM reads phi(s_{t-1})
        _, s_prev = state  # h_{t-1} = phi(s_{t-1}) is carried too, but the recurrence reads s alone
        for t in range(x.shape[1]):
            xt = x[:, t]
            i = torch.sigmoid(_lin(phi(s_prev), W_i) + _lin(xt, U_i, b_i))
            o = torch.sigmoid(_lin(phi(s_prev), W_o) + _lin(xt, U_o, b_o))
            f = torch.sigmoid(_lin(phi(s_prev), W_f) + _lin(xt, U_f, b_f))
            s_tilde = torch.tanh(_lin(o * phi(s_prev), W_s) + _lin(xt, U_s, b_s))
            s_prev = f * s_prev + i * s_tilde
            keep(i=i, f=f, o=o, ctilde=s_tilde, c=s_prev, h=torch.tanh(s_prev))  # rnn_out = phi(s_t) in both
        final = (torch.tanh(s_prev), s_prev)
    elif arch == "gru-paper":  # Karpathy et al. sec 3.1 (char-rnn's GRU.lua): the reset multiplies h_{t-1}
        H = layer.content_h.weight.shape[0]
        sl = lambda k: slice(k * H, (k + 1) * H)  # noqa: E731
        Wx, bx, Wh, bh = layer.from_x.weight, layer.from_x.bias, layer.gates_h.weight, layer.gates_h.bias
        (h,) = state
        for t in range(x.shape[1]):
            xt = x[:, t]
            reset = torch.sigmoid(_lin(xt, Wx[sl(0)], bx[sl(0)]) + _lin(h, Wh[sl(0)], bh[sl(0)]))
            z = torch.sigmoid(_lin(xt, Wx[sl(1)], bx[sl(1)]) + _lin(h, Wh[sl(1)], bh[sl(1)]))
            htilde = torch.tanh(
                _lin(xt, Wx[sl(2)], bx[sl(2)]) + _lin(reset * h, layer.content_h.weight, layer.content_h.bias)
            )
            h = (1 - z) * h + z * htilde
            keep(r=reset, z=z, htilde=htilde, h=h)
        final = (h,)
    elif arch in ("mingru", "minlstm"):  # Feng et al. (2024) sec 3.1.2 and 3.2.3, gates and candidate from x alone
        H = layer.size
        sl = lambda k: slice(k * H, (k + 1) * H)  # noqa: E731
        W, bW = layer.from_x.weight, layer.from_x.bias
        (h,) = state
        for t in range(x.shape[1]):
            xt = x[:, t]
            if arch == "mingru":
                z = torch.sigmoid(_lin(xt, W[sl(0)], bW[sl(0)]))
                htilde = _lin(xt, W[sl(1)], bW[sl(1)])
                h = (1 - z) * h + z * htilde
                keep(z=z, htilde=htilde, h=h)
            else:
                i, f = torch.sigmoid(_lin(xt, W[sl(0)], bW[sl(0)])), torch.sigmoid(_lin(xt, W[sl(1)], bW[sl(1)]))
                i, f = i / (f + i), f / (f + i)  # f'_t = f_t / (f_t + i_t), i'_t = i_t / (f_t + i_t)
                htilde = _lin(xt, W[sl(2)], bW[sl(2)])
                h = f * h + i * htilde
                keep(i=i, f=f, htilde=htilde, h=h)
        final = (h,)
    else:  # Levy et al.'s ablations: seed 001 eqs 9, 10 and seed 000 sec 3.1 (-HIDDEN)
        output_gate, recurrent = ABLATION_EQS[arch]
        H = layer.content.weight.shape[0]
        n_gates = 3 if output_gate else 2
        assert layer.gates_x.weight.shape == (n_gates * H, x.shape[2])
        assert (layer.gates_h is not None) == recurrent
        Wg, bg, Wc = layer.gates_x.weight, layer.gates_x.bias, layer.content.weight
        Wh = layer.gates_h.weight if recurrent else None
        sl = lambda k: slice(k * H, (k + 1) * H)  # noqa: E731
        h, c = state
        for t in range(x.shape[1]):
            xt = x[:, t]

            def gate(k, xt=xt, h=h):
                return torch.sigmoid(_lin(xt, Wg[sl(k)], bg[sl(k)]) + (_lin(h, Wh[sl(k)]) if recurrent else 0.0))

            i, f = gate(0), gate(1)
            ctilde = _lin(xt, Wc)  # ctilde = W_cx x: no recurrence, no tanh
            c = i * ctilde + f * c
            if output_gate:
                o = gate(2)
                h = o * torch.tanh(c)
                keep(o=o)
            else:
                h = torch.tanh(c)
            keep(i=i, f=f, ctilde=ctilde, c=c, h=h)
        final = (h, c)
    cache = {k: torch.stack(v, 1) for k, v in steps.items()}
    return cache["h"], final, cache


def reference_run(model, ids, state):
    x = F.one_hot(ids, model.config.vocab_size).to(model.head.weight.dtype)
    cache, finals = {}, []
    for l, (layer, s) in enumerate(zip(model.layers, state)):
        x, s, layer_cache = reference_layer(model.config.arch, layer, x, s)
        cache.update({f"layers.{l}.{k}": v for k, v in layer_cache.items()})
        finals.append(s)
    return _lin(x, model.head.weight, model.head.bias), cache, finals


def _close(a, b, tol=1e-10):
    assert a.shape == b.shape, (a.shape, b.shape)
    torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def _loss(logits, cache, finals, seed=5):
    """A random linear functional of everything: its gradient reaches every parameter through every path."""
    g = torch.Generator().manual_seed(seed)
    total = (logits * torch.randn(logits.shape, generator=g, dtype=logits.dtype)).sum()
    for s in finals:
        for t in s:
            total = total + (t * torch.randn(t.shape, generator=g, dtype=t.dtype)).sum()
    return total


# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("arch", ARCHS)
def test_every_trace_matches_the_equations_outputs_and_gradients(arch):
    model = make_model(arch, layers=2, scale=0.6)
    ids, state = random_ids(), random_state(model)
    state = [tuple(t.requires_grad_() for t in s) for s in state]  # gradients reach the initial state too
    logits, cache, finals = model.run_with_cache(ids, state)
    ref_logits, ref_cache, ref_finals = reference_run(model, ids, state)
    assert set(cache) == {f"layers.{l}.{k}" for l in range(2) for k in TRACE_KEYS[arch]}
    assert set(cache) == set(ref_cache)
    for name in ref_cache:
        assert cache[name].shape == (B, T, model.config.size), name
        _close(cache[name], ref_cache[name])
    _close(logits, ref_logits)
    for s, rs in zip(finals, ref_finals):
        assert len(s) == len(rs)
        for a, b in zip(s, rs):
            _close(a, b)
    # Gradients of every parameter, through the cells and through the reference.
    params = [p for p in model.parameters()]
    grads = torch.autograd.grad(_loss(logits, cache, finals), params)
    ref_grads = torch.autograd.grad(_loss(ref_logits, ref_cache, ref_finals), params)
    for (name, _), g, rg in zip(model.named_parameters(), grads, ref_grads):
        assert g.abs().sum() > 0, f"{name} gets no gradient"
        torch.testing.assert_close(g, rg, rtol=1e-9, atol=1e-11, msg=f"gradient of {name}")
    inputs = [t for s in state for t in s]
    names = [f"layers.{l}.{n}0" for l, layer in enumerate(model.layers) for n in layer.state_names]
    grads = torch.autograd.grad(_loss(*model.run_with_cache(ids, state)), inputs, allow_unused=True)
    ref_grads = torch.autograd.grad(_loss(*reference_run(model, ids, state)), inputs, allow_unused=True)
    for name, g, rg in zip(names, grads, ref_grads):
        if arch in ("lstm-srnn-hidden", "proto-lstm", "pseudo-lstm") and name.endswith(".h0"):
            # nothing reads h_(t-1) (the notes' two rungs read their one state s = c): no gradient reaches h_0
            assert g is None and rg is None, name
            continue
        assert g is not None and g.abs().sum() > 0, f"initial state {name} gets no gradient"
        torch.testing.assert_close(g, rg, rtol=1e-9, atol=1e-11, msg=f"gradient of initial state {name}")


@pytest.mark.parametrize("arch", FUSABLE)
def test_fused_and_hand_written_agree_outputs_state_and_gradients(arch):
    model = make_model(arch, layers=2, scale=0.5)
    ids, state = random_ids(), random_state(model)
    params = list(model.parameters())
    results = {}
    for fused in (True, False):
        logits, finals = model.forward_with_state(ids, state, fused=fused)
        grads = torch.autograd.grad(_loss(logits, {}, finals), params)
        results[fused] = (logits, finals, grads)
    (lf, sf, gf), (lc, sc, gc) = results[True], results[False]
    _close(lf, lc)
    for a, b in zip(sf, sc):
        for x, y in zip(a, b):
            _close(x, y)
    for (name, _), x, y in zip(model.named_parameters(), gf, gc):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-11, msg=f"gradient of {name}")


TORCH_MODULE = {"rnn": nn.RNN, "lstm-gates": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}


def _torch_reference(model, n_layers):
    """An independently built multi-layer torch module holding copies of the model's first n_layers."""
    arch, H = model.config.arch, model.config.size
    cls = TORCH_MODULE[arch]
    kwargs = {"nonlinearity": "tanh"} if cls is nn.RNN else {}
    ref = cls(model.config.vocab_size, H, num_layers=n_layers, batch_first=True, **kwargs).double()
    with torch.no_grad():
        for l in range(n_layers):
            src = model.layers[l].rnn
            for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(ref, f"{kind}_l{l}").copy_(getattr(src, f"{kind}_l0"))
    return ref


@pytest.mark.parametrize("arch", FUSABLE)
def test_traced_h_equals_an_independent_torch_module_outputs_and_gradients(arch):
    L = 3
    model = make_model(arch, layers=L, scale=0.5)
    ids, state = random_ids(), random_state(model)
    x = F.one_hot(ids, V).double()
    _, cache, finals = model.run_with_cache(ids, state)
    is_lstm = arch == "lstm"

    def ref_state(n):
        h0 = torch.stack([s[0] for s in state[:n]])
        return (h0, torch.stack([s[1] for s in state[:n]])) if is_lstm else h0

    for n in range(1, L + 1):  # a reference of n layers gives layer n-1's full output sequence
        out, _ = _torch_reference(model, n)(x, ref_state(n))
        _close(cache[f"layers.{n - 1}.h"], out)
    ref = _torch_reference(model, L)
    out, hn = ref(x, ref_state(L))
    hn, cn = hn if is_lstm else (hn, None)
    for l in range(L):
        _close(finals[l][0], hn[l])
        if is_lstm:
            _close(finals[l][1], cn[l])
            _close(cache[f"layers.{l}.c"][:, -1], cn[l])
    # Gradients of every recurrent weight, cells vs torch, for the same loss.
    g = torch.Generator().manual_seed(9)
    R = torch.randn(out.shape, generator=g, dtype=torch.float64)
    ours = torch.autograd.grad(
        (cache[f"layers.{L - 1}.h"] * R).sum(), [p for l in model.layers for p in l.rnn.parameters()]
    )
    theirs = torch.autograd.grad(
        (out * R).sum(),
        [getattr(ref, f"{k}_l{l}") for l in range(L) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")],
    )
    names = [f"{k}_l{l}" for l in range(L) for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    assert [n for l in model.layers for n, _ in l.rnn.named_parameters()] == [n[:-1] + "0" for n in names]
    for name, a, b in zip(names, ours, theirs):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11, msg=f"gradient of {name}")


def test_gru_z_is_the_weight_on_the_candidate():
    model = make_model("gru", layers=1, scale=0.8)
    ids, state = random_ids(), random_state(model)
    cache = model.trace(ids, state)
    z, htilde, h = cache["layers.0.z"], cache["layers.0.htilde"], cache["layers.0.h"]
    h_prev = torch.cat([state[0][0][:, None], h[:, :-1]], 1)
    _close(h, (1 - z) * h_prev + z * htilde)
    # And the opposite of torch's update gate: z = 1 - sigmoid(W_iz x + b_iz + W_hz h + b_hz).
    r = model.layers[0].rnn
    H = model.config.size
    x = F.one_hot(ids, V).double()
    z_torch = torch.sigmoid(
        _lin(x, r.weight_ih_l0[H : 2 * H], r.bias_ih_l0[H : 2 * H])
        + _lin(h_prev, r.weight_hh_l0[H : 2 * H], r.bias_hh_l0[H : 2 * H])
    )
    _close(z, 1 - z_torch)


@pytest.mark.parametrize("arch", ABLATIONS)
def test_ablations_content_and_gates_depend_on_the_current_input_only_where_the_equations_say(arch):
    model = make_model(arch, layers=1, scale=0.7)
    ids = random_ids(steps=8)
    other = ids.clone()
    other[:, :4] = (other[:, :4] + 1) % V  # change the past only
    a, b = model.trace(ids), model.trace(other)
    t = slice(4, None)
    _close(a["layers.0.ctilde"][:, t], b["layers.0.ctilde"][:, t])  # ctilde = W_cx x_t
    gates_recurrent = ABLATION_EQS[arch][1]
    for gate in ("i", "f"):
        same = torch.allclose(a[f"layers.0.{gate}"][:, t], b[f"layers.0.{gate}"][:, t], rtol=0, atol=1e-12)
        assert same != gates_recurrent, f"gate {gate} of {arch}: reads h_(t-1) = {not same}, expected {gates_recurrent}"
    assert not torch.allclose(a["layers.0.c"][:, t], b["layers.0.c"][:, t])  # the memory cell carries the past


# ------------------------------------------------------------------------------------------
# The lecture notes' ladder (seed 004) and the papers' GRU


@pytest.mark.parametrize("arch", LADDER)
def test_ladder_gradients_pass_gradcheck(arch):
    """Analytic gradients (autograd through the hand-written cells) against finite differences, for every
    parameter and the initial state, of logits, internals and final state."""
    model = make_model(arch, layers=2, size=3, scale=0.7, vocab=5)
    ids = random_ids(batch=2, steps=5, vocab=5)
    state = random_state(model, batch=2)
    initial = [t.requires_grad_() for s in state for t in s]
    params = list(model.parameters())

    def everything(*_inputs):  # gradcheck perturbs these very tensors in place; the model reads them
        logits, cache, finals = model.run_with_cache(ids, state)
        return (logits, *cache.values(), *(t for s in finals for t in s))

    assert torch.autograd.gradcheck(everything, (*params, *initial), eps=1e-6, atol=1e-7, rtol=1e-5)


def test_cbow_is_a_leaking_mean_of_the_embeddings_and_stays_bounded_on_long_streams():
    """Reading one character T times, the notes' sum s_t = s_{t-1} + E[x] reaches T E[x]; our leaking mean
    reaches E[x] (1 - d^T), d = CBOW_DECAY, and no stream of any length takes a layer past max|E x|."""
    model = make_model("cbow", layers=1, size=8, scale=1.0)
    h = model.trace(torch.full((2, 100), 3))["layers.0.h"]  # (B, T, H)
    steps = torch.arange(1, 101, dtype=torch.float64)[:, None]
    _close(h[0], model.layers[0].embed.weight[:, 3] * (1 - CBOW_DECAY**steps))
    # Gradients through a 100-step unroll shrink by exactly d^100 (= 0.37): they neither explode nor vanish.
    h0 = torch.zeros(1, 8, dtype=torch.float64, requires_grad=True)
    top = model.run_with_cache(random_ids(batch=1, steps=100), [(h0,)])[1]["layers.0.h"]
    (grad,) = torch.autograd.grad(top[0, -1].sum(), h0)
    _close(grad, torch.full_like(grad, CBOW_DECAY**100))
    # 20,000 characters carried across 100-step windows in float32, as trained: finite and within the bound.
    torch.manual_seed(0)
    model = build_model(ModelConfig("cbow", V, 2, 16))
    with torch.no_grad():
        model.layers[0].embed.weight.uniform_(0.5, 1.0)  # every embedding positive: the notes' sum would drift
    bound = model.layers[0].embed.weight.max()
    state, stream = None, random_ids(batch=4, steps=20_000)
    with torch.no_grad():
        for start in range(0, stream.shape[1], 100):
            logits, state = model.forward_with_state(stream[:, start : start + 100], state)
            assert torch.isfinite(logits).all() and state[0][0].abs().max() <= bound
    assert state[0][0].min() > 0.5  # the bound was really approached: the sum would be past 10,000 by now


def test_cbow_state_is_the_recency_weighted_bag_of_the_embeddings():
    """h_T = sum_t (1 - d) d^(T - t) E[x_t]: which characters were read and how long ago, nothing else (no
    weight depends on content, nothing mixes one character with another); from a zero state."""
    model = make_model("cbow", layers=1, scale=0.8)
    ids = random_ids(batch=1, steps=12)
    h = model.trace(ids)["layers.0.h"][0, -1]
    weights = (1 - CBOW_DECAY) * CBOW_DECAY ** torch.arange(11, -1, -1, dtype=torch.float64)  # on character t
    _close(h, (weights[:, None] * model.layers[0].embed.weight.t()[ids[0]]).sum(0))


def _copy_torch_gru_into_paper_form(gru_model, paper_model):
    """Give the papers' GRU torch's GRU weights; torch's update gate weighs the old state, ours the candidate,
    so its weights are negated (sigmoid(-a) = 1 - sigmoid(a))."""
    H = gru_model.config.size
    flip = torch.ones(3 * H, 1, dtype=torch.float64)
    flip[H : 2 * H] = -1
    with torch.no_grad():
        for src, dst in zip(gru_model.layers, paper_model.layers):
            r = src.rnn
            dst.from_x.weight.copy_(r.weight_ih_l0 * flip)
            dst.from_x.bias.copy_(r.bias_ih_l0 * flip[:, 0])
            dst.gates_h.weight.copy_(r.weight_hh_l0[: 2 * H] * flip[: 2 * H])
            dst.gates_h.bias.copy_(r.bias_hh_l0[: 2 * H] * flip[: 2 * H, 0])
            dst.content_h.weight.copy_(r.weight_hh_l0[2 * H :])
            dst.content_h.bias.copy_(r.bias_hh_l0[2 * H :])
        paper_model.head.load_state_dict(gru_model.head.state_dict())


def test_gru_paper_resets_the_state_before_the_product_where_torch_resets_after():
    """Same weights: tanh(W x + U (r h) + b_hn) (the papers') and tanh(W x + r (U h + b_hn)) (torch) agree when
    the reset gate is open (r = 1) and differ when it is not."""
    torch_gru, paper = make_model("gru", layers=2, scale=0.8), make_model("gru-paper", layers=2)
    _copy_torch_gru_into_paper_form(torch_gru, paper)
    ids, state = random_ids(), random_state(torch_gru)
    assert (paper(ids) - torch_gru(ids)).abs().max() > 1e-2
    H = torch_gru.config.size
    with torch.no_grad():
        for src, dst in zip(torch_gru.layers, paper.layers):
            src.rnn.bias_ih_l0[:H] += 60.0  # r = sigmoid(> 55) = 1 in float64
            dst.from_x.bias[:H] += 60.0
    assert paper.trace(ids, state)["layers.0.r"].min() == 1.0
    _close(paper.forward_with_state(ids, state)[0], torch_gru.forward_with_state(ids, state)[0])
    paper_trace, torch_trace = paper.trace(ids, state), torch_gru.trace(ids, state)
    for name in torch_trace:  # z traced the papers' way in both
        _close(paper_trace[name], torch_trace[name])


@pytest.mark.parametrize("arch", ["proto-lstm", "pseudo-lstm"])
def test_prototype_and_pseudo_lstm_outputs_and_what_they_read(arch):
    """Both output tanh(c); the prototype reads c itself, the pseudo-LSTM tanh(c)."""
    model = make_model(arch, layers=1, scale=0.9)
    ids, state = random_ids(), random_state(model)
    cache = model.trace(ids, state)
    c, h, o, ctilde = (cache[f"layers.0.{k}"] for k in ("c", "h", "o", "ctilde"))
    phi = torch.tanh if arch == "pseudo-lstm" else (lambda s: s)
    _close(h, torch.tanh(c))
    # The candidate reads the gated (squashed) previous state: ctilde = tanh(W (o * phi(c_prev)) + U x + b).
    layer, H = model.layers[0], model.config.size
    c_prev = torch.cat([state[0][1][:, None], c[:, :-1]], 1)
    x = F.one_hot(ids, V).double()
    expected = torch.tanh(
        _lin(o * phi(c_prev), layer.content_h.weight)
        + _lin(x, layer.from_x.weight[3 * H :], layer.from_x.bias[3 * H :])
    )
    _close(ctilde, expected)


@pytest.mark.parametrize("arch", ["proto-lstm", "pseudo-lstm"])
def test_an_unbounded_state_runs_away_but_the_output_stays_bounded(arch):
    """The notes' warning: with forget and write saturated open and a candidate of one, s_t = s_{t-1} + 1 without
    end; what the head reads, tanh(s), stays in [-1, 1], so the logits cannot run away with it."""
    model = make_model(arch, layers=1)
    H = model.config.size
    with torch.no_grad():
        model.layers[0].from_x.bias[: 2 * H] = 200.0  # i = f = 1 (past any W c: |W c| <= 12 * 0.08 * 50)
        model.layers[0].from_x.bias[3 * H :] = 200.0  # ctilde = 1
    state = random_state(model)
    logits, cache, finals = model.run_with_cache(random_ids(steps=50), state)
    _close(cache["layers.0.c"][:, -1], state[0][1] + 50)
    assert cache["layers.0.h"].abs().max() <= 1 and logits.abs().max() <= model.head.weight.abs().sum(1).max() + 1


# ------------------------------------------------------------------------------------------
# Levy et al. eq. 8: the memory cell as an element-wise weighted sum


def test_memory_weights_formula():
    g = torch.Generator().manual_seed(3)
    i = torch.rand(2, 6, 4, generator=g, dtype=torch.float64)
    f = torch.rand(2, 6, 4, generator=g, dtype=torch.float64)
    w = memory_weights(i, f)
    assert w.shape == (2, 6, 6, 4)
    for j in range(6):
        for t in range(6):
            expected = i[:, j].clone()
            for k in range(j + 1, t + 1):
                expected = expected * f[:, k]
            _close(w[:, j, t], expected if j <= t else torch.zeros_like(expected))


@pytest.mark.parametrize("arch", LSTM_FAMILY + ("proto-lstm", "pseudo-lstm", "minlstm"))
def test_weighted_sum_identity_lstm_family(arch):
    model = make_model(arch, layers=2, scale=0.8)
    cache = model.trace(random_ids(seed=4))  # zero initial state
    names = ("i", "f", "htilde", "h") if arch == "minlstm" else ("i", "f", "ctilde", "c")  # minLSTM: i', f' and h
    for l in range(2):
        i, f, ctilde, c = (cache[f"layers.{l}.{k}"] for k in names)
        w = memory_weights(i, f)  # (B, j, t, H)
        for t in range(T):
            _close(c[:, t], (w[:, :, t] * ctilde).sum(1))
        later = torch.ones(T, T).tril(-1).bool()  # [j, t] with j > t: content not yet read
        assert (w[:, later] == 0).all()


@pytest.mark.parametrize("arch", ["gru", "gru-paper", "mingru"])
def test_weighted_average_identity_gru(arch):
    model = make_model(arch, layers=2, scale=0.8)
    cache = model.trace(random_ids(seed=6))
    for l in range(2):
        z, htilde, h = (cache[f"layers.{l}.{k}"] for k in ("z", "htilde", "h"))
        w = memory_weights(z, 1 - z)
        for t in range(T):
            _close(h[:, t], (w[:, :, t] * htilde).sum(1))
            # A weighted average: the weights and the share left on h_0 = 0 sum to one.
            _close(w[:, : t + 1, t].sum(1) + torch.prod(1 - z[:, : t + 1], 1), torch.ones_like(h[:, t]))


# ------------------------------------------------------------------------------------------
# Sizes and configs


@pytest.mark.parametrize("arch", ARCHS)
def test_count_params_is_the_real_count(arch):
    for vocab, layers, size in [(3, 1, 1), (11, 2, 5), (87, 3, 16), (99, 1, 32)]:
        config = ModelConfig(arch, vocab, layers, size)
        assert count_params(config) == sum(p.numel() for p in build_model(config).parameters()), (vocab, layers, size)


def test_the_four_budget_rows_are_the_papers_parameter_counts():
    """Karpathy et al. sec 4.1: 1-layer LSTMs of 64/128/256/512 are "approximately 50K, 130K, 400K, and 1.3M"
    parameters with their vocabularies (87 on War and Peace). Computed here by building the models."""
    paper = {64: 50_000, 128: 130_000, 256: 400_000, 512: 1_300_000}
    for budget, approx in paper.items():
        built = sum(p.numel() for p in build_model(ModelConfig("lstm", 87, 1, budget)).parameters())
        assert budget_params(budget, 87) == built
        assert abs(built - approx) / approx < 0.12, (budget, built)  # "approximately": our LSTM has two bias vectors


def _paper_grid():
    from charlm.plan import load_profile

    paper = load_profile("paper")
    for vocab in (87, 99):  # War and Peace, our Linux corpus
        for grid in paper.grid:
            for arch in grid["types"]:
                for layers in grid["layers"]:
                    for budget in grid["budgets"]:
                        yield vocab, arch, layers, budget


def _assert_nearest_width(vocab: int, arch: str, layers: int, budget: int) -> int:
    """The width matched to the row: no other width is closer to its count, within 2%, and read back as the row."""
    target = budget_params(budget, vocab)
    width = matched_size(arch, budget, vocab, layers)
    gap = lambda h: abs(count_params(ModelConfig(arch, vocab, layers, h)) - target)
    assert gap(width) <= gap(width - 1) and gap(width) <= gap(width + 1), (vocab, arch, layers, budget, width)
    assert gap(width) / target < 0.02, (vocab, arch, layers, budget, width)
    assert budget_of(arch, width, layers, vocab) == budget
    return width


def test_every_paper_grid_model_is_within_the_nearest_width_of_its_budget():
    """Every type and depth of a row is sized to that row's count: no other width is closer."""
    seen = 0
    for vocab, arch, layers, budget in _paper_grid():
        _assert_nearest_width(vocab, arch, layers, budget)
        seen += 1
    assert seen > 2 * 36  # the paper profile's whole grid, on both corpora


def test_every_ladder_model_is_within_the_nearest_width_of_its_budget():
    """The notes' rungs are sized to the row's count like the RNN and GRU (Karpathy et al. sec 4.1), every row,
    depth and corpus; the papers' GRU has torch's GRU's count (char-rnn's six biases), so its width."""
    for vocab in (87, 99):
        for arch in LADDER:
            for layers in (1, 2, 3):
                for budget in (64, 128, 256, 512):
                    width = _assert_nearest_width(vocab, arch, layers, budget)
                    if arch == "gru-paper":
                        assert width == matched_size("gru", budget, vocab, layers)


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_deeper_models_of_a_row_are_narrower_and_ablations_keep_the_lstms_width(layers):
    widths = {arch: matched_size(arch, 128, 87, layers) for arch in ("lstm", "rnn", "gru")}
    assert widths["rnn"] > widths["gru"] > widths["lstm"]  # fewer weights per unit: wider
    assert widths["lstm"] == 128 if layers == 1 else widths["lstm"] < 128
    for arch in LEVY_ABLATIONS:  # - S-RNN, - S-RNN - OUT, - S-RNN - HIDDEN and - GATES
        assert matched_size(arch, 128, 87, layers) == widths["lstm"]  # Levy et al. sec 3.2
        assert budget_of(arch, widths["lstm"], layers, 87) == 128
    ladder = {arch: matched_size(arch, 128, 87, layers) for arch in LADDER}
    assert ladder["cbow"] == ladder["cbow-tanh"] > widths["rnn"]  # no recurrent weights: widest of all
    assert ladder["gru-paper"] == widths["gru"]
    assert ladder["proto-lstm"] == ladder["pseudo-lstm"]
    assert widths["lstm"] <= ladder["proto-lstm"] < widths["gru"]  # the LSTM's weights, half its biases


def test_an_unknown_architecture_error_lists_every_architecture():
    with pytest.raises(UserError) as err:
        ModelConfig("gru_paper", V)
    assert "unknown architecture 'gru_paper'" in str(err.value)
    for arch in ARCHS:
        assert f"{arch}," in str(err.value) or str(err.value).endswith(arch), arch
    assert set(LADDER) <= set(ARCHS)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(arch="LSTM"),
        dict(arch="transformer"),
        dict(arch=""),
        dict(size=0),
        dict(size=-4),
        dict(size=2.5),
        dict(size=True),
        dict(layers=0),
        dict(layers=-1),
        dict(vocab_size=0),
        dict(dropout=1.0),
        dict(dropout=1.5),
        dict(dropout=-0.1),
    ],
)
def test_invalid_configs_are_user_errors(kwargs):
    args = dict(arch="lstm", vocab_size=V, layers=1, size=8) | kwargs
    with pytest.raises(UserError):
        ModelConfig(**args)


# ------------------------------------------------------------------------------------------
# Trace vs training forward, and carried state


@pytest.mark.parametrize("arch", ARCHS)
def test_trace_equals_the_training_forward(arch):
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch, V, 2, 16, dropout=0.25)).eval()  # float32, as trained
    ids = random_ids(steps=20)
    traced_logits, cache, _ = model.run_with_cache(ids)
    torch.testing.assert_close(traced_logits, model(ids), rtol=1e-5, atol=1e-5)
    # The traced top-layer h is what the head reads.
    top = cache["layers.1.h"]
    torch.testing.assert_close(model.head(top), model(ids), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", ARCHS)
def test_every_state_starts_with_the_output_h_and_carries_the_cell_c(arch):
    """The State convention code outside the model relies on (charlm.gradients reads h from state[0])."""
    model = make_model(arch, layers=2, scale=0.6)
    _, cache, finals = model.run_with_cache(random_ids(), random_state(model))
    for l, (layer, final) in enumerate(zip(model.layers, finals)):
        assert layer.state_names[0] == "h" and set(layer.state_names) <= {"h", "c"}
        _close(final[0], cache[f"layers.{l}.h"][:, -1])
        if "c" in layer.state_names:
            _close(final[1], cache[f"layers.{l}.c"][:, -1])


@pytest.mark.parametrize("arch", ARCHS)
def test_carried_state_equals_one_pass(arch):
    model = make_model(arch, layers=2, scale=0.5)
    ids = random_ids(steps=14)
    for fused in (True, False):
        full, full_state = model.forward_with_state(ids, fused=fused)
        first, mid_state = model.forward_with_state(ids[:, :5], fused=fused)
        second, end_state = model.forward_with_state(ids[:, 5:], mid_state, fused=fused)
        _close(torch.cat([first, second], 1), full)
        for a, b in zip(end_state, full_state):
            for x, y in zip(a, b):
                _close(x, y)
    # The trace carries state the same way.
    _, cache_full, _ = model.run_with_cache(ids)
    _, cache_a, s = model.run_with_cache(ids[:, :5])
    _, cache_b, _ = model.run_with_cache(ids[:, 5:], s)
    for name in cache_full:
        _close(torch.cat([cache_a[name], cache_b[name]], 1), cache_full[name])


def test_byte_ids_project_exactly_as_their_one_hot_vectors():
    """The first layer reads byte ids as a row lookup: the same numbers and gradients as the one-hot product."""
    from charlm.model import project

    torch.manual_seed(0)
    weight, bias = torch.randn(12, 7, requires_grad=True), torch.randn(12, requires_grad=True)
    ids = torch.randint(0, 7, (3, 5))
    looked_up = project(ids, weight, bias)
    multiplied = torch.nn.functional.linear(torch.nn.functional.one_hot(ids, 7).float(), weight, bias)
    torch.testing.assert_close(looked_up, multiplied)
    g1 = torch.autograd.grad(looked_up.square().sum(), (weight, bias))
    g2 = torch.autograd.grad(multiplied.square().sum(), (weight, bias))
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)
    for arch in ARCHS:  # every layer: ids in give the same logits as one-hot features in
        model = build_model(ModelConfig(arch, 7, 2, 6))
        x = torch.nn.functional.one_hot(ids, 7).float()
        by_ids = model.forward_with_state(ids, fused=False)[0]
        state = model.init_state(3)
        by_features = x
        for layer, s in zip(model.layers, state):
            by_features, _ = layer(by_features, s, fused=False)
        torch.testing.assert_close(by_ids, model.head(by_features), msg=arch)
