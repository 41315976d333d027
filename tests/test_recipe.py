"""The training recipe of Karpathy et al. (2016) sec 3.3 reaches the loop: defaults, optimiser, schedule, clipping,
minibatch layout and the state carried across minibatches (truncated BPTT), observed from outside charlm.train.

Each test watches what the loop hands to torch (the optimiser's settings at every step, the clip it asks for, the
windows and states the model is called with) rather than what a config says, so a default that stops reaching the
optimiser, or a loop that resets its state every minibatch, fails here.
"""

from __future__ import annotations

import pytest
import torch
from conftest import make_text

from charlm.checkpoint import load_payload
from charlm.loop import learning_rate
from charlm.model import INIT_RANGE, CharLM
from charlm.train import TrainConfig, add_train_arguments, config_from_args, train
from corpora import Corpus
from corpora.batching import stream_windows

PAPER = {  # sec 3.3: "batch size 100", "unroll 100", RMSProp lr 2e-3 decay 0.95, after 10 epochs x0.95, 50 epochs
    "batch_size": 100, "unroll": 100, "lr": 2e-3, "rms_alpha": 0.95, "lr_decay": 0.95, "decay_after": 10,
    "epochs": 50, "grad_clip": 5.0, "dropout": 0.0,
}  # fmt: skip


def test_the_defaults_are_the_papers_recipe_in_the_config_and_the_cli():
    import argparse

    config = TrainConfig(corpus="x", arch="lstm")
    assert {k: getattr(config, k) for k in PAPER} == PAPER
    assert INIT_RANGE == 0.08  # sec 3.3: uniform in [-0.08, 0.08]
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    from_cli = config_from_args(parser.parse_args(["--corpus", "x", "--arch", "lstm"]))
    assert from_cli == config  # the command line trains the same recipe


class Watch:
    """Records, at every optimiser step, the optimiser's class and settings and the gradient norm it is given; at
    every clip, its arguments; at every training call of the model, its input windows and states."""

    def __init__(self, monkeypatch):
        self.steps, self.clips, self.calls = [], [], []
        real_step, real_clip = torch.optim.RMSprop.step, torch.nn.utils.clip_grad_norm_
        real_forward = CharLM.forward_with_state

        def step(opt, *args, **kwargs):
            group = opt.param_groups[0]
            self.steps.append({k: group[k] for k in ("lr", "alpha", "eps", "momentum", "centered", "weight_decay")})
            return real_step(opt, *args, **kwargs)

        def clip(parameters, max_norm, *args, **kwargs):
            self.clips.append({"max_norm": max_norm, "args": args, **kwargs})
            return real_clip(parameters, max_norm, *args, **kwargs)

        def forward(model, ids, state=None, fused=True):
            logits, new = real_forward(model, ids, state, fused)
            if model.training:  # validation (evaluate) runs in eval mode: not a training minibatch
                self.calls.append({"ids": ids.clone(), "state_in": state, "state_out": new})
            return logits, new

        monkeypatch.setattr(torch.optim.RMSprop, "step", step)
        monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip)
        monkeypatch.setattr(CharLM, "forward_with_state", forward)


def test_the_default_recipe_reaches_the_optimiser_the_clip_and_the_minibatches(tmp_path, monkeypatch):
    """Two steps of a default run (2-layer LSTM of 128, 100 streams x 100 characters) on a corpus just long enough."""
    text = make_text(30_000, seed=3)
    corpus = Corpus.from_bytes("recipe", text)
    watch = Watch(monkeypatch)
    config = TrainConfig(corpus=str(tmp_path / "recipe.txt"), arch="lstm", max_chars=20_000, snapshots=1)
    train(config, tmp_path / "run", corpus=corpus, progress=False)
    assert len(watch.steps) == 2  # 20,000 characters = 2 minibatches of 100 x 100
    for seen in watch.steps:  # RMSProp, lr 2e-3, alpha 0.95; no momentum, centring or weight decay (plain RMSProp)
        assert seen == {"lr": 2e-3, "alpha": 0.95, "eps": 1e-8, "momentum": 0, "centered": False, "weight_decay": 0}
    assert [c["max_norm"] for c in watch.clips] == [5.0, 5.0]  # a global norm of 5 (the L2 norm: no norm_type given)
    assert all(not c["args"] and "norm_type" not in c for c in watch.clips)
    windows = stream_windows(corpus.split("train"), 100, 100)[0]
    for k, call in enumerate(watch.calls):
        assert tuple(call["ids"].shape) == (100, 100)
        assert torch.equal(call["ids"], torch.from_numpy(windows[k]))  # minibatch k is window k of the 100 streams


def test_a_non_default_alpha_and_the_decay_schedule_reach_the_optimiser(tmp_path, monkeypatch, text_bytes):
    """rms_alpha is passed through, and the learning rate the optimiser uses at each step is learning_rate(epoch)."""
    corpus = Corpus.from_bytes("t", text_bytes)
    watch = Watch(monkeypatch)
    config = TrainConfig(corpus=str(tmp_path / "t.txt"), arch="lstm", layers=1, size=8, batch_size=4, unroll=10,
                         epochs=4, lr=1e-2, rms_alpha=0.9, lr_decay=0.5, decay_after=2, snapshots=1)  # fmt: skip
    train(config, tmp_path / "run", corpus=corpus, progress=False)
    per_epoch = stream_windows(corpus.split("train"), 4, 10)[0].shape[0]
    assert len(watch.steps) == 4 * per_epoch
    assert {s["alpha"] for s in watch.steps} == {0.9}
    lrs = [s["lr"] for s in watch.steps]
    assert lrs == [learning_rate(config, k // per_epoch) for k in range(len(lrs))]
    assert sorted(set(lrs), reverse=True) == [1e-2, 5e-3, 2.5e-3]  # epochs 1-2 at the base rate, then halved


def _tiny(tmp_path, **fields) -> TrainConfig:
    base = dict(corpus=str(tmp_path / "t.txt"), arch="lstm", layers=2, size=8, batch_size=4, unroll=10, epochs=2,
                lr=1e-2, snapshots=1)  # fmt: skip
    return TrainConfig(**(base | fields))


@pytest.mark.parametrize("arch", ["lstm", "gru-paper", "lstm-srnn-hidden"])  # fused, hand-written, and (h, c) or h
def test_each_minibatch_starts_from_the_previous_ones_final_state_detached(tmp_path, monkeypatch, text_bytes, arch):
    """Truncated BPTT (sec 3.3): the state a minibatch starts from is, value for value, the state the previous one
    ended in, cut from its graph; the first minibatch of each epoch starts from zero (None)."""
    corpus = Corpus.from_bytes("t", text_bytes)
    watch = Watch(monkeypatch)
    train(_tiny(tmp_path, arch=arch), tmp_path / "run", corpus=corpus, progress=False)
    per_epoch = stream_windows(corpus.split("train"), 4, 10)[0].shape[0]
    assert len(watch.calls) == 2 * per_epoch and per_epoch > 2
    for k, call in enumerate(watch.calls):
        if k % per_epoch == 0:
            assert call["state_in"] is None
            continue
        previous = watch.calls[k - 1]["state_out"]
        assert len(call["state_in"]) == len(previous) == 2  # every layer's state is carried
        for now, before in zip(call["state_in"], previous):
            assert len(now) == len(before)  # (h,) or (h, c)
            for a, b in zip(now, before):
                assert torch.equal(a, b) and a.abs().sum() > 0  # the same values, and not a zero state
                assert a.grad_fn is None and not a.requires_grad  # cut from the previous graph
                assert b.grad_fn is not None  # (which it was part of until the step)


def test_training_with_the_carried_state_differs_from_training_from_zero_states(tmp_path, monkeypatch, text_bytes):
    """The same run with every minibatch started from zeros ends with other weights: the carried state is used."""
    corpus = Corpus.from_bytes("t", text_bytes)
    carried = train(_tiny(tmp_path), tmp_path / "carried", corpus=corpus, progress=False)
    from charlm.train import LanguageModelTask

    monkeypatch.setattr(LanguageModelTask, "after_step", lambda self: setattr(self, "carried", None))
    zero = train(_tiny(tmp_path), tmp_path / "zero", corpus=corpus, progress=False)
    a, b = (load_payload(run / "state.pt")["state_dict"] for run in (carried, zero))
    assert a.keys() == b.keys()
    gap = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert gap > 1e-4
    # and the zero-state run really did what it says: the reference run with the patch removed is reproducible
    monkeypatch.undo()
    again = train(_tiny(tmp_path), tmp_path / "again", corpus=corpus, progress=False)
    c = load_payload(again / "state.pt")["state_dict"]
    assert all(torch.equal(a[k], c[k]) for k in a)
