"""The n-NN baseline: the one-hot function it claims, padding at a split's start, the Predictions contract,
fitting a bigram, the hidden-size grid, caching, checkpoints that load with weights_only, and the CLI."""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil

import numpy as np
import pytest
import torch

import charlm.loop
from charlm import nnn, nnn_model, predictions
from corpora import Corpus
from corpora.errors import UserError, run_cli

FAST = dict(epochs=30, batch_chars=1000)  # tiny corpora: small minibatches so a few seconds see enough steps


@pytest.fixture(autouse=True)
def _artifacts(tmp_path, monkeypatch):
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only add overhead on a shared machine
    yield
    torch.set_num_threads(threads)


def markov1_corpus(length: int = 30_000, seed: int = 0) -> tuple[Corpus, np.ndarray]:
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(4, 0.5), size=4)
    x = np.empty(length, dtype=np.int64)
    x[0] = 0
    u = rng.random(length)
    cum = P.cumsum(1)
    for t in range(1, length):
        x[t] = min(int(np.searchsorted(cum[x[t - 1]], u[t])), 3)
    return Corpus.from_bytes("toy1", np.frombuffer(b"ab \n", dtype=np.uint8)[x].tobytes()), P


def test_embedding_sum_is_the_concatenated_one_hot_layer():
    torch.manual_seed(0)
    n, V, H = 3, 5, 7
    model = nnn_model.NNN(n, V, H)
    ids = np.array([4, 0, 2, 2, 1, 3, 0], dtype=np.uint8)
    rows = nnn_model.context_rows(ids, n, V)
    # Explicit form: the one-hot of n characters (latest first, a zero block where none exists), concatenated.
    onehot = torch.zeros(rows.shape[0], n * V)
    for t in range(rows.shape[0]):
        for i in range(n):
            if t - i >= 0:
                onehot[t, i * V + int(ids[t - i])] = 1.0
    W = model.inp.weight[: n * V].T  # (H, nV)
    explicit = model.out(torch.tanh(onehot @ W.T + model.bias))
    torch.testing.assert_close(model(rows), explicit)
    assert torch.count_nonzero(model.inp.weight[model.pad]) == 0


def test_context_rows_pad_the_start_of_a_split():
    V, n = 4, 3
    rows = nnn_model.context_rows(np.array([1, 2, 3, 0, 1], dtype=np.uint8), n, V)
    pad = n * V
    assert rows.tolist() == [
        [1, pad, pad],  # predicts ids[1] from ids[0] only
        [2, 1 + V, pad],
        [3, 2 + V, 1 + 2 * V],
        [0, 3 + V, 2 + 2 * V],
    ]


def test_init_is_uniform_in_the_recipe_range():
    model = nnn_model.NNN(2, 10, 32)
    for p in model.parameters():
        assert float(p.detach().abs().max()) <= 0.08


def test_one_nn_learns_the_bigram_distribution():
    corpus, _ = markov1_corpus()
    folder = nnn.train_nnn(corpus, 1, hidden_grid=(16,), progress=False, **FAST)
    model = nnn_model.load_nnn(folder / "checkpoint.pt")
    ids = corpus.split("train")
    counts = np.zeros((4, 4))
    np.add.at(counts, (ids[:-1], ids[1:]), 1)
    empirical = counts / counts.sum(1, keepdims=True)
    with torch.no_grad():
        predicted = torch.softmax(model(torch.arange(4)[:, None]), -1).numpy()  # row v = previous char v at slot 0
    assert np.abs(predicted - empirical).max() < 0.05


def test_predictions_follow_the_contract():
    corpus, _ = markov1_corpus(6000)
    path = nnn.predict(corpus, 3, split="val", hidden_grid=(8,), progress=False, epochs=2, batch_chars=500)
    preds = predictions.load(path)
    val = corpus.split("val")
    assert preds.logp.shape == (val.size - 1, corpus.vocab_size)
    assert preds.logp.dtype == np.float16 and preds.target_logp.dtype == np.float32  # stored compactly, see predictions
    np.testing.assert_array_equal(preds.targets, val[1:])
    np.testing.assert_allclose(np.exp(preds.logp.astype(np.float64)).sum(1), 1.0, atol=2e-3)
    exact = nnn_model.predict_logprobs(nnn_model.load_nnn(path.parents[2] / "checkpoint.pt"), val)  # recomputed
    np.testing.assert_array_equal(preds.target_logp, exact[np.arange(val.size - 1), val[1:]])
    np.testing.assert_array_equal(preds.argmax, exact.argmax(1))
    assert preds.model_id.startswith("nnn-n3-")
    assert nnn.predict(corpus, 3, split="val", hidden_grid=(8,), progress=False, epochs=2, batch_chars=500) == path


def _every_position_scored(model: nnn_model.NNN, ids: np.ndarray) -> np.ndarray:
    """Each position's own row, in chunks of EVAL_CHUNK positions: how the n-NN was scored before distinct contexts."""
    rows = nnn_model.context_rows(ids, model.n, model.vocab_size)
    with torch.no_grad():
        return np.concatenate(
            [
                torch.log_softmax(model(rows[s : s + nnn_model.EVAL_CHUNK]), -1).numpy()
                for s in range(0, len(rows), nnn_model.EVAL_CHUNK)
            ]
        )


@pytest.mark.parametrize("n, hidden", [(1, 256), (3, 512), (5, 256)])
def test_each_distinct_context_is_scored_once_bit_for_bit(n, hidden):
    """An n-NN scores each distinct context once (`distinct_logprobs`): the same float32 numbers, bit for bit, as
    every position scored in its own chunk, so the stored Predictions do not change (at the report's sizes: a
    vocabulary of 83, hidden 256 and 512, more positions than one chunk)."""
    torch.manual_seed(n)
    V = 83
    model = nnn_model.NNN(n, V, hidden)
    rng = np.random.default_rng(n)
    ids = rng.choice(V, size=60_001, p=rng.dirichlet(np.full(V, 0.3))).astype(np.uint8)
    logp, ctx_of = nnn_model.distinct_logprobs(model, ids)
    assert len(logp) < len(ids) - 1 and ctx_of.shape == (len(ids) - 1,)
    np.testing.assert_array_equal(logp[ctx_of], _every_position_scored(model, ids))
    np.testing.assert_array_equal(nnn_model.predict_logprobs(model, ids), logp[ctx_of])


def test_context_ids_of_long_contexts_do_not_overflow():
    """A context of many characters over a wide vocabulary has no int64 key: its rows are compared whole instead."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 3, size=5_000).astype(np.uint8)
    ids[rng.random(ids.size) < 0.01] = 250  # a wide vocabulary: 20 slots of 251 values need more than 63 bits
    rows = nnn_model.context_rows(ids, 20, 251)
    expected = np.unique(rows.numpy(), axis=0, return_inverse=True)[1].reshape(-1)
    np.testing.assert_array_equal(nnn_model.context_ids(rows), expected)
    short = rows[:, :3]  # 3 slots fit an int64 key: the same ids
    np.testing.assert_array_equal(
        nnn_model.context_ids(short), np.unique(short.numpy(), axis=0, return_inverse=True)[1].reshape(-1)
    )


def test_grid_picks_the_lowest_validation_loss_and_records_all(monkeypatch):
    corpus, _ = markov1_corpus(8000)
    folder = nnn.train_nnn(corpus, 2, hidden_grid=(2, 16), progress=False, epochs=3, batch_chars=500)
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["complete"] is True
    assert [g["hidden"] for g in metrics["grid"]] == [2, 16]
    best = min(metrics["grid"], key=lambda g: g["best_val_loss"])
    assert metrics["best_hidden"] == best["hidden"]
    payload = torch.load(folder / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert payload["kind"] == "nnn" and payload["config"]["hidden"] == best["hidden"]
    assert payload["corpus_sha256"] == corpus.sha256
    # the chosen network's val loss, recomputed from its checkpoint
    model = nnn_model.load_nnn(folder / "checkpoint.pt")
    val = corpus.split("val")
    logp = nnn_model.predict_logprobs(model, val)
    recomputed = -logp[np.arange(val.size - 1), val[1:]].astype(np.float64).mean()
    assert recomputed == pytest.approx(best["best_val_loss"], rel=1e-5)
    # complete: a second call trains nothing
    monkeypatch.setattr(nnn, "_train_one", lambda *a, **k: pytest.fail("retrained a cached grid"))
    assert nnn.train_nnn(corpus, 2, hidden_grid=(2, 16), progress=False, epochs=3, batch_chars=500) == folder


def test_a_finished_grid_member_is_reused(monkeypatch):
    corpus, _ = markov1_corpus(4000)
    kwargs = dict(hidden_grid=(4, 8), progress=False, epochs=1, batch_chars=500)
    real = nnn._train_one
    calls = []

    def flaky(config, hidden, *args):
        calls.append(hidden)
        if hidden == 8 and calls.count(8) == 1:
            raise KeyboardInterrupt
        return real(config, hidden, *args)

    monkeypatch.setattr(nnn, "_train_one", flaky)
    with pytest.raises(KeyboardInterrupt):
        nnn.train_nnn(corpus, 1, **kwargs)
    nnn.train_nnn(corpus, 1, **kwargs)
    assert calls == [4, 8, 8]


def test_character_budget_is_respected():
    corpus, _ = markov1_corpus(8000)
    folder = nnn.train_nnn(corpus, 1, hidden_grid=(4,), progress=False, max_chars=2500, batch_chars=1000)
    grid = json.loads((folder / "metrics.json").read_text())["grid"][0]
    assert grid["chars_trained"] == 3000 and grid["stopped"] == "budget"


def test_bad_config_is_one_user_error():
    corpus, _ = markov1_corpus(2000)
    with pytest.raises(UserError, match="n must be a positive integer"):
        nnn.train_nnn(corpus, 0, progress=False)
    with pytest.raises(UserError, match="hidden sizes"):
        nnn.train_nnn(corpus, 1, hidden_grid=(0,), progress=False)


def test_cli_trains_scores_and_fails_in_one_line(tmp_path, capsys):
    corpus, _ = markov1_corpus(5000)
    text = tmp_path / "tiny.txt"
    text.write_bytes(corpus.data.tobytes())
    assert run_cli(nnn.main, ["--corpus", str(text), "--n", "1,2", "--hidden", "4", "--epochs", "1", "--quiet"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2 and "cross-entropy" in out[0] and out[1].startswith("nnn-n2-")
    assert run_cli(nnn.main, ["--corpus", str(text), "--n", "1", "--hidden", "4,x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --hidden")
    assert run_cli(nnn.main, ["--corpus", str(tmp_path / "missing.txt"), "--n", "1", "--hidden", "4"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_a_diverging_nnn_exits_3_with_one_line_and_keeps_no_nonfinite_checkpoint(tmp_path, monkeypatch, capsys):
    """The n-NN trains through charlm.loop's loop: divergence is the same clear stop as for the recurrent nets."""
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    corpus_file = tmp_path / "m.txt"
    corpus_file.write_bytes(markov1_corpus(4000)[0].data.tobytes())
    code = run_cli(nnn.main, ["--corpus", str(corpus_file), "--n", "2", "--hidden", "8", "--epochs", "3",
                              "--batch-chars", "200", "--quiet", "--lr", "1e6"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1 and "diverged" in err[0], (code, err)
    for path in (tmp_path / "artifacts").rglob("checkpoint.pt"):
        state = torch.load(path, weights_only=True)["state_dict"]
        assert all(torch.isfinite(v).all() for v in state.values())


def test_an_interrupted_nnn_resumes_bit_identical(monkeypatch):
    corpus, _ = markov1_corpus(6000)
    kwargs = dict(hidden_grid=(8,), progress=False, epochs=3, batch_chars=300)
    reference = nnn.train_nnn(corpus, 2, **kwargs)
    ref_metrics = json.loads((reference / "metrics.json").read_text())
    shutil.rmtree(reference)
    calls = {"n": 0}
    real = nnn.NNNTask.loss

    def interrupted(self, epoch, batch):
        calls["n"] += 1
        if calls["n"] == 25:  # mid-epoch 2
            raise KeyboardInterrupt
        return real(self, epoch, batch)

    monkeypatch.setattr(nnn.NNNTask, "loss", interrupted)
    monkeypatch.setattr(nnn, "fit", functools.partial(charlm.loop.fit, checkpoint_every_s=0))  # save every step
    with pytest.raises(KeyboardInterrupt):
        nnn.train_nnn(corpus, 2, **kwargs)
    monkeypatch.setattr(nnn.NNNTask, "loss", real)
    resumed = nnn.train_nnn(corpus, 2, **kwargs)
    metrics = json.loads((resumed / "metrics.json").read_text())
    assert metrics["grid"][0]["epochs"] == ref_metrics["grid"][0]["epochs"]  # the whole curve, bit for bit
    assert metrics["best_val_loss"] == ref_metrics["best_val_loss"]


def test_context_targets_are_the_same_likelihood_as_positions():
    """Over a batch that holds every position, the soft-target loss and its gradient equal the one-hot loss's:
    the objective is unchanged, only the noise of a minibatch is."""
    corpus, _ = markov1_corpus(3000)
    config = nnn.NNNConfig(corpus="m", n=2, hidden_grid=(8,), targets="contexts", batch_chars=10**9)
    soft = nnn.NNNTask(config, 8, corpus, "m")
    hard = nnn.NNNTask(dataclasses.replace(config, targets="positions"), 8, corpus, "m")
    hard.model.load_state_dict(soft.model.state_dict())
    losses = [task.loss(0, 0) for task in (soft, hard)]
    assert losses[0].item() == pytest.approx(losses[1].item(), rel=1e-6)
    grads = [torch.autograd.grad(loss, list(task.model.parameters())) for loss, task in zip(losses, (soft, hard))]
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    # The table itself, against a brute-force count of what follows each two-character context.
    train = corpus.split("train")
    idx = np.arange(train.size - 1)
    targets = soft._soft_targets(soft.soft[0][idx[:200]]).numpy()
    np.testing.assert_allclose(targets.sum(1), 1.0, rtol=1e-6)
    for t in (0, 1, 57, 199):
        context = tuple(train[max(0, t - 1) : t + 1]) if t >= 1 else (train[0],)
        follow = [train[s + 1] for s in range(train.size - 1)
                  if (tuple(train[max(0, s - 1) : s + 1]) if s >= 1 else (train[0],)) == context
                  and (s >= 1) == (t >= 1)]  # fmt: skip
        expected = np.bincount(follow, minlength=corpus.vocab_size) / len(follow)
        np.testing.assert_allclose(targets[t], expected, rtol=1e-6, atol=1e-7)
    with pytest.raises(UserError, match="targets"):
        nnn.NNNConfig(corpus="m", n=2, targets="words").validate()


def test_distinct_contexts_weighted_by_count_are_the_same_likelihood_as_positions():
    """`targets="distinct"` trains on one row per distinct context, weighted by its count: a batch of every row has
    the loss and gradient of a batch of every position, and a pass draws each distinct context exactly once."""
    corpus, _ = markov1_corpus(3000)
    config = nnn.NNNConfig(corpus="m", n=2, hidden_grid=(8,), targets="distinct", batch_chars=10**9)
    distinct = nnn.NNNTask(config, 8, corpus, "m")
    hard = nnn.NNNTask(dataclasses.replace(config, targets="positions"), 8, corpus, "m")
    hard.model.load_state_dict(distinct.model.state_dict())
    train = corpus.split("train")
    pairs = {(train[t - 1] if t else -1, train[t]) for t in range(train.size - 1)}  # (previous, current) contexts
    assert distinct.positions == len(pairs) < hard.positions
    assert int(distinct.weights.sum()) == hard.positions
    losses = [task.loss(0, 0) for task in (distinct, hard)]
    assert losses[0].item() == pytest.approx(losses[1].item(), rel=1e-6)
    grads = [torch.autograd.grad(loss, list(task.model.parameters())) for loss, task in zip(losses, (distinct, hard))]
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    small = nnn.NNNTask(dataclasses.replace(config, batch_chars=7), 8, corpus, "m")
    one_pass = torch.cat([small.batch_positions(0, b) for b in range(small.steps_per_pass)])
    assert torch.equal(one_pass.sort().values, torch.arange(len(pairs)))
    assert len({tuple(row) for row in small.x_train.tolist()}) == len(pairs)  # the rows are the distinct contexts


def test_converge_delta_stops_an_nnn_once_validation_stops_gaining(tmp_path):
    """With `converge_delta` an n-NN stops as the recurrent models do, once its best validation loss gains less than
    that per epoch over `converge_window` epochs; off (0, the default), it runs to its cap."""
    corpus, _ = markov1_corpus(3000)
    kwargs = dict(hidden_grid=(8,), progress=False, epochs=30, batch_chars=10**9, lr=5e-2, targets="distinct")
    runs = {}
    for delta in (0.0, 0.01):
        folder = nnn.train_nnn(corpus, 1, converge_delta=delta, **kwargs)
        runs[delta] = json.loads((folder / "H8" / "metrics.json").read_text())
    assert len(runs[0.0]["epochs"]) == 30
    assert runs[0.01]["stopped"] == "converged" and 3 < len(runs[0.01]["epochs"]) < 30
    vals = [e["val_loss"] for e in runs[0.01]["epochs"]]
    assert (min(vals[:-3]) - min(vals)) / 3 < 0.01  # the rule it stopped by: the last 3 epochs gained < 0.01 each
    with pytest.raises(UserError, match="converge_delta"):
        nnn.NNNConfig(corpus="m", n=1, converge_delta=-1.0).validate()


def test_short_epochs_cut_the_same_passes_and_anneal_the_lr_within_them():
    """`epoch_chars` makes an epoch (validation, early stopping, the recipe's lr decay) shorter than a pass, while
    the passes still draw every position once each, in the same order as one-pass epochs."""
    corpus, _ = markov1_corpus(4000)
    config = nnn.NNNConfig(corpus="m", n=2, hidden_grid=(4,), batch_chars=300)
    whole = nnn.NNNTask(config, 4, corpus, "m")
    short = nnn.NNNTask(dataclasses.replace(config, epoch_chars=900), 4, corpus, "m")
    assert short.steps_per_epoch == 3 and whole.steps_per_epoch == whole.steps_per_pass > 3
    steps = 2 * whole.steps_per_pass
    drawn = {
        name: torch.cat([task.batch_positions(*divmod(g, task.steps_per_epoch)) for g in range(steps)])
        for name, task in (("whole", whole), ("short", short))
    }
    torch.testing.assert_close(drawn["short"], drawn["whole"])
    for k in range(2):  # each pass is a permutation of the positions
        one_pass = drawn["short"][k * whole.positions : (k + 1) * whole.positions]
        assert torch.equal(one_pass.sort().values, torch.arange(whole.positions))
    # trained: an epoch every 900 positions, the lr halved per epoch after the first
    folder = nnn.train_nnn(corpus, 1, hidden_grid=(4,), progress=False, epochs=4, batch_chars=300, epoch_chars=900,
                           lr=4e-3, lr_decay=0.5, decay_after=1)  # fmt: skip
    epochs = json.loads((folder / "H4" / "metrics.json").read_text())["epochs"]
    assert [e["chars"] for e in epochs] == [900, 1800, 2700, 3600]
    assert [e["lr"] for e in epochs] == [4e-3, 2e-3, 1e-3, 5e-4]


def test_models_trained_before_epoch_chars_keep_their_ids():
    """A setting added later is hashed only when set: quick's cached n-NNs keep their ids (these were computed with
    the code before `epoch_chars`)."""
    corpus, _ = markov1_corpus(3000)
    quick_like = nnn.NNNConfig(corpus="m", n=2, hidden_grid=(8,), targets="contexts", lr=5e-3, batch_chars=512)
    ids = [quick_like.model_id(corpus.key), nnn.NNNConfig(corpus="m", n=3).model_id(corpus.key)]
    assert ids == ["nnn-n2-191b52", "nnn-n3-8308d7"]
    assert nnn.NNNConfig(corpus="m", n=3, epoch_chars=1000).model_id(corpus.key) != ids[1]
    with pytest.raises(UserError, match="epoch_chars"):
        nnn.NNNConfig(corpus="m", n=3, epoch_chars=0).validate()


def test_the_optimizer_is_rmsprop_unless_an_nnn_asks_for_adam():
    """The recurrent recipe and the n-NN default train with sec 3.3's RMSProp (its alpha); an n-NN can ask for Adam,
    which changes its id (a later setting: the ids of the n-NNs trained before it stay)."""
    from charlm.loop import make_optimizer
    from charlm.train import TrainConfig

    corpus, _ = markov1_corpus(3000)
    params = [torch.nn.Parameter(torch.zeros(3))]
    recurrent = make_optimizer(TrainConfig("c", "lstm", 1, 8), params)
    assert isinstance(recurrent, torch.optim.RMSprop) and recurrent.defaults["alpha"] == 0.95
    assert isinstance(make_optimizer(nnn.NNNConfig(corpus="m", n=3), params), torch.optim.RMSprop)
    adam = nnn.NNNConfig(corpus="m", n=3, optimizer="adam", lr=1e-3)
    assert (
        isinstance(make_optimizer(adam, params), torch.optim.Adam)
        and make_optimizer(adam, params).defaults["lr"] == 1e-3
    )
    assert nnn.NNNConfig(corpus="m", n=3, optimizer="rmsprop").model_id(corpus.key) == "nnn-n3-8308d7"
    assert adam.model_id(corpus.key) != nnn.NNNConfig(corpus="m", n=3, lr=1e-3).model_id(corpus.key)
    with pytest.raises(UserError, match="optimizer"):
        nnn.NNNConfig(corpus="m", n=3, optimizer="sgd").validate()


def test_an_adam_nnn_trains_and_learns(tmp_path, monkeypatch):
    """Adam through the one training loop: the 1-NN of a first-order Markov chain gets near the chain's entropy."""
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path))
    corpus, P = markov1_corpus(20000)
    values, vectors = np.linalg.eig(P.T)
    stationary = np.real(vectors[:, np.argmax(np.real(values))])
    stationary /= stationary.sum()
    entropy = float(-(stationary[:, None] * P * np.log(P)).sum())  # nats/char of the chain: no model does better
    folder = nnn.train_nnn(corpus, 1, hidden_grid=(16,), progress=False, epochs=6, batch_chars=500, epoch_chars=1000,
                           lr=1e-2, targets="distinct", optimizer="adam")  # fmt: skip
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["config"]["optimizer"] == "adam"
    assert entropy - 0.05 < metrics["best_val_loss"] < entropy + 0.05
