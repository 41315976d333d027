"""Vanishing gradients: closed-form answers, an independent computation, exact initialisation, bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import fake_corpus_file, fake_neural_model
from test_saturation import edit_weights

from analyses import common, vanishing, vanishing_measure
from analyses.base import Result
from analyses.context import Context, MissingInput, model_index
from analyses.prose import sentence, unsupported_numbers
from charlm.gradients import (
    charlm_loss,
    charlm_state,
    charlm_step,
    ratio_first_over_middle,
    ratio_middle_over_ends,
    state_gradient_norms,
)
from charlm.gradients_batched import charlm_gradient_norms, stackable
from charlm.model import ARCHS, CharLM, ModelConfig
from corpora import run_cli


def _ctx(**settings) -> Context:
    return Context(model_index(), common.settings(vanishing, None, settings))


# ------------------------------------------------------------------------------------------ the machinery


@pytest.mark.parametrize("a", [0.9, -0.5, 1.1])
def test_linear_recurrence_gradients_are_powers_of_a(a):
    """h_t = A h_{t-1} + x_t with A = a Q (Q orthogonal), L = w . h_T: dL/dh_{T-k} = (A^T)^k w, norm |a|^k |w|."""
    torch.manual_seed(0)
    H, B, T = 5, 3, 30
    Q, _ = torch.linalg.qr(torch.randn(H, H, dtype=torch.float64))
    A = a * Q
    w = torch.randn(B, H, dtype=torch.float64)

    def step(x, s):
        h = s["h"] @ A.T + x
        return h, {"h": h}  # the output is the state itself: the loss reads h_T

    norms = state_gradient_norms(
        step, {"h": torch.zeros(B, H, dtype=torch.float64)}, torch.randn(T, B, H, dtype=torch.float64),
        lambda out: (out * w).sum(1), loss_scale=2.0**40,
    )["h"]  # fmt: skip
    lags = np.arange(T)[::-1]  # time order: the last step is lag 0
    expected = np.abs(a) ** lags[:, None] * w.norm(dim=1).numpy()[None]
    np.testing.assert_allclose(norms, expected, rtol=1e-9)
    # the ratios of a geometric profile: |a|^K over the mean of |a|^k in the middle 10 % of lags, so between
    # |a|^(0.55 K) and |a|^(0.45 K); the notes' middle-over-end form gives the same band
    K, g = T - 1, np.abs(a) ** lags
    band = sorted([np.abs(a) ** (0.55 * K), np.abs(a) ** (0.45 * K)])
    assert band[0] <= ratio_first_over_middle(g) <= band[1]
    assert band[0] <= ratio_middle_over_ends(g) <= band[1]


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("arch", ARCHS)
def test_carried_state_gradient_equals_the_gradient_of_a_run_started_after_it(arch, layers):
    """Independent computation: dL_T/d state_{T-k} is the gradient w.r.t. the initial state of the whole-sequence
    forward (torch's fused kernel where there is one) started right after step T-k (top layer)."""
    torch.manual_seed(1)
    model = CharLM(ModelConfig(arch, vocab_size=7, layers=layers, size=6)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8.0)  # larger weights than the init: gradients that still matter many steps back
    B, T = 3, 12
    ids = torch.randint(0, 7, (B, T + 1))
    window, target = ids[:, :T], ids[:, T]
    state0 = charlm_state(model, ids[:, :0], B)
    norms = state_gradient_norms(charlm_step(model), state0, window.unbind(1), charlm_loss(model, target))
    for k in (0, 1, 5, T - 1):
        t = T - 1 - k  # the step whose carried state is differentiated
        with torch.no_grad():
            _, before = model.forward_with_state(window[:, : t + 1])
        leaves = [tuple(x.clone().requires_grad_() for x in s) for s in before]
        rest = window[:, t + 1 :]
        if rest.shape[1]:
            logits, _ = model.forward_with_state(rest, leaves, fused=True)
            logits = logits[:, -1]
        else:  # k = 0: the loss reads the top h directly (lower layers reach it through the layer above: k > 0 checks)
            leaves = leaves[-1:]
            logits = model.head(leaves[0][0])
        loss = torch.nn.functional.cross_entropy(logits, target, reduction="sum")
        grads = torch.autograd.grad(loss, [x for s in leaves for x in s], allow_unused=True)
        first = len(model.layers) - len(leaves)
        flat_names = [
            f"layers.{l}.{n}" for l, layer in enumerate(model.layers) if l >= first for n in layer.state_names
        ]
        for name, g in zip(flat_names, grads):
            if not name.startswith(f"layers.{layers - 1}."):
                continue  # a lower layer's h also reaches the layer above within its own step: not a restart
            expected = np.zeros(B) if g is None else g.double().norm(dim=1).numpy()
            np.testing.assert_allclose(norms[name][t], expected, rtol=1e-4, atol=1e-9, err_msg=f"{name} lag {k}")


@pytest.mark.parametrize("windows", [32, 3])  # 32 x 6 is a multiple of 32 floats: stacked; 3 x 6 runs one by one
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("arch", ARCHS)
def test_checkpoints_computed_together_give_each_one_s_numbers_to_the_bit(arch, layers, windows):
    """charlm_gradient_norms of several checkpoints (stacked where the layers are written out there) equals
    state_gradient_norms of charlm_step, one checkpoint at a time, bit for bit."""
    torch.manual_seed(3)
    models = []
    for scale in (1.0, 4.0, 8.0):
        model = CharLM(ModelConfig(arch, vocab_size=7, layers=layers, size=6)).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(scale)
        models.append(model)
    ids = torch.randint(0, 7, (windows, 30))
    warm, window, target = ids[:, :10], ids[:, 10:29], ids[:, 29]
    together = charlm_gradient_norms(models, warm, window, target, loss_scale=2.0**80)
    for model, got in zip(models, together):
        alone = state_gradient_norms(
            charlm_step(model), charlm_state(model, warm, windows), window.unbind(1), charlm_loss(model, target),
            loss_scale=2.0**80,
        )  # fmt: skip
        assert got.keys() == alone.keys()
        for name in alone:
            np.testing.assert_array_equal(got[name], alone[name], err_msg=name)
    assert stackable(models[0]) == (arch in ("lstm", "rnn", "gru-paper", "lstm-srnn", "lstm-srnn-out", "lstm-gates"))


def test_srnn_hidden_keeps_nothing_in_h():
    """-S-RNN-HIDDEN: no gate reads h, so dL/dh_{T-k} = 0 for k > 0 (the c values are checked against the
    independent computation above); and the loss reads h_T, so dL/dc_T = 0 for every architecture."""
    torch.manual_seed(2)
    model = CharLM(ModelConfig("lstm-srnn-hidden", vocab_size=5, layers=1, size=4)).eval()
    ids = torch.randint(0, 5, (2, 9))
    norms = state_gradient_norms(
        charlm_step(model), charlm_state(model, None, 2), ids[:, :8].unbind(1), charlm_loss(model, ids[:, 8])
    )
    assert np.all(norms["layers.0.h"][:-1] == 0) and np.all(norms["layers.0.h"][-1] > 0)
    assert np.all(norms["layers.0.c"][-1] == 0) and np.all(norms["layers.0.c"][:-1] > 0)


# ------------------------------------------------------------------------------------------ the analysis


def test_vanishing_ratio_of_a_near_linear_rnn_is_a_to_the_half_window(tmp_path, artifacts):
    """An Elman RNN with U = a I and tiny inputs stays in tanh's linear range: g_k = a^k g_0, so the ratio
    through the whole analysis is the ratio of the profile a^k (known by construction)."""
    corpus = fake_corpus_file(tmp_path, n_bytes=20000)
    a, H = 0.95, 4
    out = fake_neural_model(corpus, arch="rnn", size=H)

    def linear(sd):
        sd["layers.0.rnn.weight_hh_l0"] = a * torch.eye(H)
        sd["layers.0.rnn.weight_ih_l0"] = 1e-5 * sd["layers.0.rnn.weight_ih_l0"]
        for name in ("layers.0.rnn.bias_ih_l0", "layers.0.rnn.bias_hh_l0"):
            sd[name] = torch.zeros(H)

    edit_weights(out, linear)
    ctx = _ctx(max_lag=60, windows=4, warmup=10, snapshots=0)
    row = ctx.models(arch="rnn").iloc[0]
    geometric = a ** np.arange(61)[::-1]  # time order
    expected = ratio_middle_over_ends(geometric)  # the mean of a^k over the middle lags: close to a^30
    assert vanishing_measure.vanishing_ratio(ctx, row, settings=ctx.settings) == pytest.approx(expected, rel=1e-3)
    df = vanishing.compute(ctx)
    final = df[(df["checkpoint"] == "final") & (df["state"] == "h")].set_index("lag")
    np.testing.assert_allclose(final.loc[[1, 10, 60], "grad_norm"] / final.loc[0, "grad_norm"], a ** np.r_[1, 10, 60],
                               rtol=1e-3)  # fmt: skip
    assert final["ratio_mid_end"].iloc[0] == pytest.approx(expected, rel=1e-3)
    assert final["ratio_far_mid"].iloc[0] == pytest.approx(ratio_first_over_middle(geometric), rel=1e-3)


def test_the_vanishing_ratio_is_mid_over_the_loss_end_where_the_far_end_says_otherwise(
    tmp_path, artifacts, monkeypatch
):
    """A trained LSTM's profile: fast decay near the loss, then a plateau of long-memory cells. Maini et al.'s
    ratio (the notes: ||dL/dh_mid|| / ||dL/dh_end||, the end where the loss is) is ~1e-3; the far end over the
    middle is ~1. The configurations' table, vanishing_ratio (the ladder's) and the findings give the former, on h."""
    corpus = fake_corpus_file(tmp_path, n_bytes=20000)
    fake_neural_model(corpus, arch="lstm", size=4)
    K = 60
    lags = np.arange(K + 1)
    h = 0.5**lags + 1e-3  # lag order: lag 0 (the loss) first
    c = np.where(lags == 0, 0.0, 0.4 * 0.5**lags + 1e-3)  # dL_T/dc_T = 0: the loss reads h_T
    monkeypatch.setattr(
        vanishing_measure, "lag_profiles", lambda models, *a: [{"layers.0.h": h, "layers.0.c": c}] * len(models)
    )
    ctx = _ctx(max_lag=K, windows=2, warmup=5, snapshots=0)
    df = vanishing.compute(ctx)
    (config,) = vanishing.configurations(df).to_dict("records")
    assert config["h_final"] == pytest.approx(1e-3 / (1 + 1e-3), rel=1e-4)  # mid-window h over h at the loss
    assert config["c_final"] == pytest.approx(1e-3 / (1 + 1e-3), rel=1e-4)  # the c ratio: c mid-window, h at the loss
    assert config["h_far_mid"] == pytest.approx(1.0, rel=1e-3)  # the far end says "nothing more is lost"
    row = ctx.models().iloc[0]
    ratio = vanishing_measure.vanishing_ratio
    assert ratio(ctx, row, settings=ctx.settings) == pytest.approx(config["c_final"])
    assert ratio(ctx, row, state="h", settings=ctx.settings) == pytest.approx(config["h_final"])
    comp = vanishing.comparisons(vanishing.configurations(df)).set_index("comparison")
    assert comp.loc["maini", "place"] == "below" and comp.loc["maini", "factor"] == pytest.approx(5.005, rel=1e-3)
    (claim, *_) = vanishing.findings(comp.reset_index(), [corpus.name])
    assert (
        claim.verdict == "partly"
        and "on h after training is 0.001, against Maini's BiLSTM 0.005 to 0.06, 5.0 times below" in sentence(claim)
    )


# ------------------------------------------------------------------------------------------ the findings


def _table(models: list[dict], K: int = 200) -> pd.DataFrame:
    """A vanishing table of each model's top layer: models given as {arch, layers, seed, budget, ratios: {(state,
    checkpoint): (ratio_mid_end, ratio_far_mid)}}."""
    rows = []
    for m in models:
        arch, layers, seed = m["arch"], m.get("layers", 1), m.get("seed", 0)
        size = m.get("size", 8 + layers)
        for (state, checkpoint), (mid_end, far_mid) in m["ratios"].items():
            for lag in (1, K // 2, K):
                rows.append({
                    "corpus": "toy", "arch": arch, "label": vanishing.LABELS[arch], "budget": m.get("budget", 128),
                    "size": size, "layers": layers, "seed": seed, "model_id": f"{arch}-{layers}-{seed}",
                    "group_id": f"{arch}-{layers}", "checkpoint": checkpoint,
                    "chars": 0 if checkpoint == "init" else 10**6, "layer": layers - 1, "state": state,
                    "memory": state == "c" or not vanishing_measure.has_cell(arch), "lag": lag, "grad_norm": 0.5**lag,
                    "ratio_mid_end": mid_end, "ratio_far_mid": far_mid,
                })  # fmt: skip
    return pd.DataFrame(rows, columns=vanishing.COLUMNS)


def _h(init: float, final: float) -> dict:
    return {("h", "init"): (init, init), ("h", "final"): (final, final)}


def test_seeds_are_averaged_within_one_configuration_never_across_depths():
    """The old caption's "geometric means over seeds" pooled the 1-, 2- and 3-layer LSTMs of one budget row."""
    df = _table([{"arch": "lstm", "seed": 0, "ratios": _h(1e-20, 1e-2)},
                 {"arch": "lstm", "seed": 1, "ratios": _h(1e-20, 1e-4)},
                 {"arch": "lstm", "layers": 3, "ratios": _h(1e-22, 1e-6)}])  # fmt: skip
    configs = vanishing.configurations(df).set_index("layers")
    assert configs.loc[1, "h_final"] == pytest.approx(1e-3) and configs.loc[1, "seeds"] == 2
    assert configs.loc[3, "h_final"] == pytest.approx(1e-6) and configs.loc[3, "seeds"] == 1
    assert configs.loc[1, "orders_trained"] == pytest.approx(17.0)
    comp = vanishing.comparisons(vanishing.configurations(df)).set_index("comparison")
    assert comp.loc["maini", "label"] == "LSTM 3x11"  # the headline LSTM: the deepest of the largest row


@pytest.mark.parametrize(
    "ratio, where, verdict",
    [(1e-5, "below", "not reproduced"), (1e-3, "below", "partly"), (0.01, "inside", "reproduced"),
     (0.2, "above", "partly"), (10.0, "above", "not reproduced")],
)  # fmt: skip
def test_the_place_against_maini_s_bilstm_follows_the_ratio_on_h(ratio, where, verdict):
    """Table 2's BiLSTM: 0.005 to 0.06. The c ratio, however large, does not enter the verdict."""
    ratios = {**_h(1e-20, ratio), ("c", "init"): (1e-20, 1e-20), ("c", "final"): (0.03, 0.03)}
    comp = vanishing.comparisons(vanishing.configurations(_table([{"arch": "lstm", "ratios": ratios}])))
    (claim, *rest) = vanishing.findings(comp, ["toy"])
    assert comp.loc[0, "place"] == where and claim.verdict == verdict and claim.claim == "van-maini-bilstm"
    said = f"{ratio:.2g}" if ratio >= 1e-4 else f"10^{np.log10(ratio):.1f}"  # an exponent the check cannot read
    assert f"is {said}, against Maini's BiLSTM 0.005 to 0.06" in sentence(claim)
    assert unsupported_numbers(sentence(claim), [comp]) == []
    (c_ratio,) = [f for f in rest if "c ratio" in f.template]
    assert "is 0.03," in sentence(c_ratio) and c_ratio.verdict == "new"


def test_the_gated_models_against_the_rnn_of_the_same_row_and_depth():
    df = _table([{"arch": "lstm", "ratios": _h(1e-20, 1e-2)}, {"arch": "rnn", "ratios": _h(1e-12, 1e-7)},
                 {"arch": "gru", "ratios": _h(1e-19, 1e-8)},  # after training: below the RNN
                 {"arch": "lstm", "layers": 2, "ratios": _h(1e-11, 1e-3)}, {"arch": "rnn", "layers": 2,
                                                                             "ratios": _h(1e-13, 1e-9)},
                 {"arch": "lstm", "layers": 3, "ratios": _h(1e-11, 1e-3)}])  # no 3-layer RNN: no pair  # fmt: skip
    comp = vanishing.comparisons(vanishing.configurations(df)).set_index("comparison")
    gates = comp.loc["gates"]
    assert (gates["holds"], gates["of"], gates["lstm_of"], gates["init_below"]) == (2, 3, 2, 1)
    assert gates["orders_min"] == pytest.approx(-1.0) and gates["orders_max"] == pytest.approx(6.0)
    found = {f.claim: f for f in vanishing.findings(comp.reset_index(), ["toy"]) if f.claim}
    assert found["van-gates-help"].verdict == "partly" and "in 2 of 3 pairs (-1.0 to +6.0 decades)" in sentence(
        found["van-gates-help"]
    )
    alone = vanishing.comparisons(vanishing.configurations(_table([{"arch": "lstm", "ratios": _h(1e-20, 1e-2)}])))
    found = {f.claim: f for f in vanishing.findings(alone, ["toy"]) if f.claim}
    assert found["van-gates-help"].verdict == "untested"


def test_profiles_cover_init_snapshots_and_final_for_every_architecture(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path, n_bytes=20000)
    rows = np.zeros((corpus.split("test").size - 1, corpus.vocab_size), dtype=np.float32)
    fake_neural_model(corpus, arch="lstm", size=6, snapshots=[(1, rows), (3, rows)])
    fake_neural_model(corpus, arch="lstm", size=6, seed=1, snapshots=[(1, rows), (3, rows)])
    fake_neural_model(corpus, arch="gru", size=5)
    fake_neural_model(corpus, arch="lstm-srnn-hidden", size=6)
    fake_neural_model(corpus, arch="rnn", size=4, layers=2)
    ctx = _ctx(max_lag=30, windows=3, warmup=5)
    df = vanishing.compute(ctx)
    assert set(df["arch"]) == {"lstm", "gru", "lstm-srnn-hidden", "rnn"}
    assert set(df[df["arch"] == "rnn"]["layer"]) == {0, 1}  # every layer, the findings from the top one
    assert set(vanishing.top_ratios(df).query("arch == 'rnn'")["layer"]) == {1}
    seed0 = df[(df["arch"] == "lstm") & (df["seed"] == 0)]
    assert seed0.groupby("checkpoint")["chars"].first().to_dict() == {"init": 0, "step 1": 100, "step 3": 300,
                                                                       "final": 1000}  # fmt: skip
    assert set(df[(df["arch"] == "lstm") & (df["seed"] == 1)]["checkpoint"]) == {"init", "final"}  # snapshot_seeds=1
    assert set(df[df["arch"] == "gru"]["state"]) == {"h"}  # no cell, no c
    assert df[df["state"] == "c"]["lag"].min() == 1  # dL_T/dc_T = 0 by construction: not kept
    hidden = df[(df["arch"] == "lstm-srnn-hidden") & (df["state"] == "h")]
    assert (hidden[hidden["lag"] > 0]["grad_norm"] == 0).all()
    # the initial model is exactly the one training started from: a different seed gives a different profile
    init = df[(df["checkpoint"] == "init") & (df["arch"] == "lstm") & (df["state"] == "c")]
    assert not np.allclose(*(g["grad_norm"].to_numpy() for _, g in init.groupby("seed")))
    result = vanishing.ANALYSIS.compute(ctx)
    assert isinstance(result, Result) and set(result.tables) == {"configs", "comparisons"}
    pd.testing.assert_frame_equal(result.table, df)
    fig = vanishing.ANALYSIS.plot(result)
    assert len(fig.axes) == 3 and tuple(fig.get_size_inches()) <= (7.5, 9.0)
    assert len(vanishing.ANALYSIS.summary_table(result)) == 4  # one row per type
    (appendix,) = vanishing.ANALYSIS.appendix(result).values()
    assert len(appendix) == 5  # one row per model
    assert list(vanishing.ANALYSIS.paper_table()["model"]) == ["BiLSTM", "MEANPOOL", "MAXPOOL", "ATT", "MAXATT"]
    frames = [result.table, *result.tables.values()]
    assert {f.claim for f in result.findings} >= {c.id for c in vanishing.ANALYSIS.claims}
    for f in result.findings:
        assert unsupported_numbers(sentence(f), frames) == [], sentence(f)
        assert len(sentence(f).split()) <= 30, sentence(f)


def test_initial_model_is_the_one_training_starts_from(tmp_path, artifacts):
    from charlm.train import LanguageModelTask, TrainConfig

    corpus = fake_corpus_file(tmp_path)
    fake_neural_model(corpus, arch="gru", size=5, seed=3)
    ctx = _ctx()
    row = ctx.models().iloc[0]
    config = TrainConfig(corpus=corpus.source, arch="gru", layers=1, size=5, seed=3, batch_size=4, unroll=10)
    task = LanguageModelTask(config, corpus, torch.device("cpu"))
    rebuilt = vanishing_measure.initial_model(ctx, row)
    for (name, p), q in zip(task.model.state_dict().items(), rebuilt.state_dict().values()):
        assert torch.equal(p, q), name


# ------------------------------------------------------------------------------------------ bad input


def test_asking_for_the_cell_of_models_without_one_is_one_line_and_exit_2(tmp_path, artifacts, capsys):
    corpus = fake_corpus_file(tmp_path)
    fake_neural_model(corpus, arch="rnn", size=5)
    with pytest.raises(MissingInput, match="no memory cell"):
        vanishing.compute(_ctx(states=["c"]))
    code = run_cli(vanishing.main, ["--corpus", corpus.source, "--set", 'states=["c"]'])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "memory cell" in err[0]
    with pytest.raises(MissingInput, match="keeps only h"):
        vanishing_measure.vanishing_ratio(_ctx(), model_index().iloc[0], state="c")


def test_a_lag_longer_than_the_split_is_one_line_and_exit_2(tmp_path, artifacts, capsys):
    corpus = fake_corpus_file(tmp_path)
    fake_neural_model(corpus, arch="lstm", size=5)
    n = corpus.split("test").size
    code = run_cli(vanishing.main, ["--corpus", corpus.source, "--set", f"max_lag={n}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"a lag of {n}" in err[0]
    code = run_cli(vanishing.main, ["--corpus", corpus.source, "--set", "states=x"])
    assert code == 2 and "states must be" in capsys.readouterr().err


def test_cached_profiles_are_reused_and_keyed_by_the_settings(tmp_path, artifacts, monkeypatch):
    corpus = fake_corpus_file(tmp_path)
    fake_neural_model(corpus, arch="lstm", size=5)
    ctx = _ctx(max_lag=20, windows=2, warmup=5, snapshots=0)
    first = vanishing.compute(ctx)
    calls = []
    monkeypatch.setattr(vanishing_measure, "lag_profiles", lambda models, *a: calls.append(1) or [{}] * len(models))
    pd.testing.assert_frame_equal(vanishing.compute(ctx), first)
    assert calls == []
    vanishing.compute(_ctx(max_lag=21, windows=2, warmup=5, snapshots=0))
    assert calls  # another lag range is another computation
