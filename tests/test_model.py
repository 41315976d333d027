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
}


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
        if arch == "lstm-srnn-hidden" and name.endswith(".h0"):  # nothing reads h_(t-1): no gradient reaches h_0
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


@pytest.mark.parametrize("arch", LSTM_FAMILY)
def test_weighted_sum_identity_lstm_family(arch):
    model = make_model(arch, layers=2, scale=0.8)
    cache = model.trace(random_ids(seed=4))  # zero initial state
    for l in range(2):
        i, f, ctilde, c = (cache[f"layers.{l}.{k}"] for k in ("i", "f", "ctilde", "c"))
        w = memory_weights(i, f)  # (B, j, t, H)
        for t in range(T):
            _close(c[:, t], (w[:, :, t] * ctilde).sum(1))
        later = torch.ones(T, T).tril(-1).bool()  # [j, t] with j > t: content not yet read
        assert (w[:, later] == 0).all()


def test_weighted_average_identity_gru():
    model = make_model("gru", layers=2, scale=0.8)
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
    from reports.profiles import load_profile

    paper = load_profile("paper")
    for vocab in (87, 99):  # War and Peace, our Linux corpus
        for grid in paper.grid:
            for arch in grid["types"]:
                for layers in grid["layers"]:
                    for budget in grid["budgets"]:
                        yield vocab, arch, layers, budget


def test_every_paper_grid_model_is_within_the_nearest_width_of_its_budget():
    """Every type and depth of a row is sized to that row's count: no other width is closer."""
    seen = 0
    for vocab, arch, layers, budget in _paper_grid():
        target = budget_params(budget, vocab)
        width = matched_size(arch, budget, vocab, layers)
        gap = lambda h, a=arch, v=vocab, n=layers, t=target: abs(count_params(ModelConfig(a, v, n, h)) - t)
        assert gap(width) <= gap(width - 1) and gap(width) <= gap(width + 1), (vocab, arch, layers, budget, width)
        assert gap(width) / target < 0.02, (vocab, arch, layers, budget, width)
        assert budget_of(arch, width, layers, vocab) == budget
        seen += 1
    assert seen == 2 * 3 * 3 * 4


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_deeper_models_of_a_row_are_narrower_and_ablations_keep_the_lstms_width(layers):
    widths = {arch: matched_size(arch, 128, 87, layers) for arch in ("lstm", "rnn", "gru")}
    assert widths["rnn"] > widths["gru"] > widths["lstm"]  # fewer weights per unit: wider
    assert widths["lstm"] == 128 if layers == 1 else widths["lstm"] < 128
    for arch in LEVY_ABLATIONS:  # - S-RNN, - S-RNN - OUT, - S-RNN - HIDDEN and - GATES
        assert matched_size(arch, 128, 87, layers) == widths["lstm"]  # Levy et al. sec 3.2
        assert budget_of(arch, widths["lstm"], layers, 87) == 128


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
