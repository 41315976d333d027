"""minGRU and minLSTM (Feng et al. 2024), and the three scanned cells against their step loops.

The traces are checked against Feng et al.'s equations written out here from the raw parameter tensors (minLSTM in
the paper's quotient form f / (f + i)); the scan (`forward(fused=True)`, what trains and scores) against the step
loop (`trace`), outputs and gradients, over truncated-BPTT chunks as charlm.train runs them and from a resumed state.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call

from charlm import archs
from charlm.layers import MinGRULayer, MinLSTMLayer
from charlm.model import CharLM, ModelConfig, count_params, memory_weights

SCANNED = ("lstm-srnn-hidden", "mingru", "minlstm")  # linear recurrences with input-only coefficients
V = 9


def _model(arch: str, layers: int = 2, size: int = 7, dtype=torch.float64, scale: float = 0.7, seed: int = 0):
    torch.manual_seed(seed)
    model = CharLM(ModelConfig(arch, V, layers, size)).to(dtype)
    with torch.no_grad():  # larger than the init: gates away from 0.5, the state far from 0
        for p in model.parameters():
            p.uniform_(-scale, scale)
    return model


def _ids(batch: int = 3, steps: int = 11, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (batch, steps), generator=torch.Generator().manual_seed(seed))


def _state(model: CharLM, batch: int = 3, seed: int = 2):
    g = torch.Generator().manual_seed(seed)
    dtype, H = model.head.weight.dtype, model.config.size
    return [tuple(torch.randn(batch, H, generator=g, dtype=dtype) for _ in layer.state_names) for layer in model.layers]


# ------------------------------------------------------------------------------------------ the paper's equations


def _paper(arch: str, layer, x: torch.Tensor, h: torch.Tensor) -> dict[str, torch.Tensor]:
    """Feng et al. sec 3.1.2 / 3.2.3, sequential mode, one step at a time from the weights: x (B, T, d) features."""
    W, b, H = layer.from_x.weight, layer.from_x.bias, layer.size
    linear = lambda x_t, k: x_t @ W[k * H : (k + 1) * H].t() + b[k * H : (k + 1) * H]  # noqa: E731
    steps = {}
    for t in range(x.shape[1]):
        x_t = x[:, t]
        if arch == "mingru":
            z = torch.sigmoid(linear(x_t, 0))  # z_t = sigm(Linear_z(x_t))
            htilde = linear(x_t, 1)  # h~_t = Linear_h(x_t)
            h = (1 - z) * h + z * htilde
            parts = {"z": z, "htilde": htilde, "h": h}
        else:
            i, f = torch.sigmoid(linear(x_t, 0)), torch.sigmoid(linear(x_t, 1))
            i_n, f_n = i / (f + i), f / (f + i)  # i'_t, f'_t
            htilde = linear(x_t, 2)
            h = f_n * h + i_n * htilde
            parts = {"i": i_n, "f": f_n, "htilde": htilde, "h": h}
        for k, v in parts.items():
            steps.setdefault(k, []).append(v)
    return {k: torch.stack(v, 1) for k, v in steps.items()}


@pytest.mark.parametrize("arch", ["mingru", "minlstm"])
def test_traces_are_the_papers_equations(arch):
    model = _model(arch, layers=2, scale=1.5)
    ids, state = _ids(), _state(model)
    logits, cache, finals = model.run_with_cache(ids, state)
    x = F.one_hot(ids, V).double()
    for l, layer in enumerate(model.layers):
        expected = _paper(arch, layer, x, state[l][0])
        assert tuple(k.split(".")[2] for k in cache if k.startswith(f"layers.{l}.")) == archs.REGISTRY[arch].internals
        for name, value in expected.items():
            torch.testing.assert_close(cache[f"layers.{l}.{name}"], value, rtol=1e-12, atol=1e-12, msg=name)
        torch.testing.assert_close(finals[l][0], expected["h"][:, -1], rtol=1e-12, atol=1e-12)
        x = expected["h"]
    torch.testing.assert_close(logits, model.head(x), rtol=1e-12, atol=1e-12)
    if arch == "minlstm":  # the normalised gates sum to one
        torch.testing.assert_close(cache["layers.0.i"] + cache["layers.0.f"], torch.ones_like(cache["layers.0.f"]))


def test_minlstm_gates_stay_finite_where_both_underflow():
    """f / (f + i) is 0 / 0 where both gates underflow; sigm(ln f - ln i) is the same function, and finite."""
    layer = MinLSTMLayer(1, 1).float()
    with torch.no_grad():
        layer.from_x.weight.zero_()
        layer.from_x.bias.copy_(torch.tensor([-200.0, -210.0, 1.0]))  # k_i, k_f, htilde
    i, f, _ = layer.gates(torch.zeros(1, 1, dtype=torch.long))
    assert torch.sigmoid(torch.tensor(-200.0)) == 0  # the quotient would be nan
    torch.testing.assert_close(f, torch.sigmoid(torch.tensor([[[-10.0]]])))  # f' = sigm(k_f - k_i) out there
    torch.testing.assert_close(i + f, torch.ones_like(f))


@pytest.mark.parametrize("layer_cls, per_unit", [(MinGRULayer, 2), (MinLSTMLayer, 3)])
def test_parameter_count_is_the_papers_linears(layer_cls, per_unit):
    for d_in, size in [(3, 1), (87, 465), (99, 16)]:
        layer = layer_cls(d_in, size)
        assert (
            layer_cls.n_params(d_in, size) == sum(p.numel() for p in layer.parameters()) == per_unit * size * (d_in + 1)
        )
    for arch in ("mingru", "minlstm"):
        config = ModelConfig(arch, 87, 3, 20)
        assert count_params(config) == sum(p.numel() for p in CharLM(config).parameters())


# ------------------------------------------------------------------------------------------ the scan against the loop


def _run(model: CharLM, ids, state, fused: bool):
    """Logits, final state and every parameter's and initial state's gradient of a random linear loss."""
    state = [tuple(t.detach().clone().requires_grad_() for t in s) for s in state]
    logits, finals = model.forward_with_state(ids, state, fused=fused)
    g = torch.Generator().manual_seed(7)
    loss = (logits * torch.randn(logits.shape, generator=g, dtype=logits.dtype)).sum()
    loss = loss + sum((t * torch.randn(t.shape, generator=g, dtype=t.dtype)).sum() for s in finals for t in s)
    model.zero_grad(set_to_none=True)
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    grads |= {f"state{l}.{k}": t.grad for l, s in enumerate(state) for k, t in enumerate(s) if t.grad is not None}
    return logits.detach(), [tuple(t.detach() for t in s) for s in finals], grads


def _assert_same(a, b, tol):
    (la, sa, ga), (lb, sb, gb) = a, b
    torch.testing.assert_close(la, lb, rtol=tol, atol=tol)
    for x, y in zip(sa, sb):
        for u, v in zip(x, y):
            torch.testing.assert_close(u, v, rtol=tol, atol=tol)
    assert ga.keys() == gb.keys()
    for name in ga:
        torch.testing.assert_close(ga[name], gb[name], rtol=tol, atol=tol, msg=name)


@pytest.mark.parametrize("arch", SCANNED)
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
def test_scan_equals_the_step_loop_outputs_and_gradients(arch, dtype, tol):
    model = _model(arch, layers=2, size=16, dtype=dtype)
    ids, state = _ids(batch=4, steps=30), _state(model, batch=4)
    scanned, looped = _run(model, ids, state, fused=True), _run(model, ids, state, fused=False)
    _assert_same(scanned, looped, tol)
    assert torch.equal(scanned[0], looped[0])  # the same fused multiply-add a step: the same numbers, to the bit
    assert all(g.abs().sum() > 0 for g in scanned[2].values())  # every parameter and initial state read is reached


@pytest.mark.parametrize("arch", SCANNED)
def test_scan_equals_the_step_loop_over_truncated_bptt_chunks(arch):
    """As charlm.train runs it: windows of the stream, the state carried and detached between them, a step of
    RMSProp after each; from a resumed (non-zero) state. Both runs see the same weights at every window."""
    ids = _ids(batch=4, steps=40, seed=3)
    targets = _ids(batch=4, steps=40, seed=4)
    runs = {}
    for fused in (True, False):
        model = _model(arch, layers=2, size=12, dtype=torch.float64)
        optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.95)
        state, losses, grads = _state(model, batch=4, seed=5), [], []
        for lo in range(0, 40, 10):
            logits, state = model.forward_with_state(ids[:, lo : lo + 10], state, fused=fused)
            loss = F.cross_entropy(logits.flatten(0, 1), targets[:, lo : lo + 10].flatten())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            state = [tuple(t.detach() for t in s) for s in state]  # truncate BPTT at the window edge
            losses.append(loss.item())
            grads.append([p.grad.clone() for p in model.parameters()])
        runs[fused] = (losses, grads, state)
    (la, ga, sa), (lb, gb, sb) = runs[True], runs[False]
    np.testing.assert_allclose(la, lb, rtol=1e-12)
    for window_a, window_b in zip(ga, gb):
        for x, y in zip(window_a, window_b):
            torch.testing.assert_close(x, y, rtol=1e-10, atol=1e-12)
    for x, y in zip(sa, sb):
        for u, v in zip(x, y):
            torch.testing.assert_close(u, v, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("arch", ["mingru", "minlstm"])
def test_layer_scan_passes_gradcheck(arch):
    layer = {"mingru": MinGRULayer, "minlstm": MinLSTMLayer}[arch](4, 3).double()
    x = torch.randn(2, 6, 4, dtype=torch.float64)
    params = {n: p.detach().clone().requires_grad_() for n, p in layer.named_parameters()}
    h0 = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)

    def scanned(weight, bias, h0):
        return functional_call(layer, {"from_x.weight": weight, "from_x.bias": bias}, (x, (h0,)))[0]

    assert torch.autograd.gradcheck(scanned, (params["from_x.weight"], params["from_x.bias"], h0))


# ------------------------------------------------------------------------------------------ the weighted sum


@pytest.mark.parametrize("arch", ["mingru", "minlstm"])
def test_the_weighted_sum_analysis_reads_them_exactly(arch):
    """Levy et al. eq. 8 with the state carried in, by analyses.weighted_sum on the traces: an identity."""
    from analyses.weighted_sum import _cell_parts, weighted_sum

    model = _model(arch, layers=2, scale=1.2)
    state = _state(model)
    with torch.no_grad():
        cache = {k: v[0].numpy() for k, v in model.trace(_ids(), state).items()}  # stream 0, (T, H)
    for l in range(2):
        write, keep, content, h = _cell_parts(arch, cache, l)
        w, carried, recon = weighted_sum(write, keep, content, state[l][0][0].numpy())
        np.testing.assert_allclose(recon, h, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(w.sum(0) + carried, 1.0, rtol=1e-12)  # coupled: a weighted average
        torch.testing.assert_close(torch.from_numpy(w), memory_weights(torch.from_numpy(write)[None],
                                                                       torch.from_numpy(keep)[None])[0])  # fmt: skip


# ------------------------------------------------------------------------------------------ training


@pytest.mark.parametrize("arch", ["mingru", "minlstm"])
@pytest.mark.parametrize("layers", [1, 2, 3])
def test_charlm_train_lowers_the_loss(arch, layers, tmp_path, text_bytes):
    from charlm.train import TrainConfig, train
    from corpora import Corpus

    path = tmp_path / "tiny.txt"
    path.write_bytes(text_bytes)
    corpus = Corpus.from_bytes(path.stem, text_bytes)
    config = TrainConfig(corpus=str(path), arch=arch, layers=layers, size=16, batch_size=4, unroll=10, epochs=3,
                         snapshots=1, lr=1e-2)  # fmt: skip
    out = train(config, tmp_path / "model", corpus=corpus, progress=False)
    metrics = json.loads((out / "metrics.json").read_text())
    epochs = metrics["epochs"]
    assert metrics["complete"] and len(epochs) == 3
    assert epochs[-1]["train_loss"] < epochs[0]["train_loss"] and epochs[-1]["val_loss"] < epochs[0]["val_loss"]
    assert epochs[-1]["val_loss"] < math.log(corpus.vocab_size) - 0.3  # well below a uniform guess
    assert metrics["params"] == count_params(config.model_config(corpus.vocab_size))
