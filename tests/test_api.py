"""The notebook API (issue 37): load any model, score, sample and read every internal by name, checked against
computations written here from the network's own weights (a tiny trained LSTM, an adopted GRU, a shipped model)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch
import torch.nn as nn
from conftest import full_forward_logp
from test_adopt import UserLM, shuffled_chars, write_user

import charlm
from charlm import api
from charlm.checkpoint import load_checkpoint
from charlm.kinds import kind
from charlm.shipped import SHIPPED_ROOT
from corpora.errors import UserError


@pytest.fixture(scope="module")
def tiny(tiny_run):
    return api.load(tiny_run.out), load_checkpoint(tiny_run.out / "checkpoint.pt"), tiny_run


def test_load_by_folder_file_id_and_package(tiny, artifacts):
    m, net, run = tiny
    assert charlm.api is api and m.model_id == net.meta["model_id"] and m.net.config == net.config
    assert api.load(run.out / "checkpoint.pt").model.digest == m.model.digest
    shutil.copytree(run.out, artifacts / run.corpus.artifact_name / m.model_id)
    by_id = api.load(m.model_id)
    assert by_id.model.path.parent == artifacts / run.corpus.artifact_name / m.model_id
    assert m.vocab == run.corpus.vocab.tobytes() and len(m.labels) == len(m.vocab) and "⏎" in m.labels
    with pytest.raises(UserError, match="does not exist"):
        api.load("no-such-model-000000")


def test_score_is_the_forward_pass(tiny):
    m, net, run = tiny
    text = run.corpus_path.read_bytes()[:600].decode()
    scores = m.score(text)
    ids = run.corpus.encode(text.encode()).astype(np.int64)
    expected = full_forward_logp(net, ids)[np.arange(ids.size - 1), ids[1:]]  # one stream, float64 log-softmax
    assert np.abs(scores.logp - expected).max() < 1e-5
    assert scores.cross_entropy == pytest.approx(-expected.mean(), abs=1e-6)
    assert scores.bits_per_char == pytest.approx(scores.cross_entropy / np.log(2))
    assert scores.chars == text[1:].encode() and scores.detail.rank.shape == (ids.size - 1,)
    after = m.score(text[400:], context=text[:400])  # the same pass, the first 400 characters read, not scored
    assert np.abs(after.logp - expected[399:]).max() < 1e-5 and after.chars == text[400:].encode()
    with pytest.raises(UserError, match="0x7e"):
        m.score("the ~ is not in this corpus")


def test_sample_is_char_rnns_sampling(tiny):
    m, net, _ = tiny
    text = m.sample(40, prime="The ", temperature=1.0, seed=0)
    assert isinstance(text, str) and len(text) == 40 and text == m.sample(40, prime="The ", seed=0)
    assert m.sample(40, prime="The ", seed=1) != text
    greedy, vocab = [], list(m.vocab)
    ids = torch.tensor([[vocab.index(b) for b in b"The "]])
    with torch.no_grad():  # T = 0 is the argmax: computed here step by step from the network itself
        state = None
        for _ in range(30):
            logits, state = net.forward_with_state(ids, state)
            ids = logits[:, -1:].argmax(-1)
            greedy.append(vocab[int(ids)])
    assert m.sample(30, prime="The ", temperature=0, raw=True) == bytes(greedy)


def test_run_with_cache_names_every_internal(tiny):
    m, net, run = tiny
    text = run.corpus_path.read_bytes()[100:400]
    logits, cache = m.run_with_cache(text)
    ids = torch.as_tensor(run.corpus.encode(text).astype(np.int64))[None]
    with torch.no_grad():
        fused = net(ids)[0].numpy()  # torch's fused LSTM kernel
    assert logits.shape == (len(text), len(m.vocab)) and np.abs(logits - fused).max() < 1e-5
    assert set(cache) == {f"layers.0.{k}" for k in ("i", "f", "o", "ctilde", "c", "h")}
    assert all(v.shape == (len(text), net.config.size) for v in cache.values())
    i, f, o, g, c, h = (cache[f"layers.0.{k}"] for k in ("i", "f", "o", "ctilde", "c", "h"))
    c_prev = np.vstack([np.zeros((1, c.shape[1])), c[:-1]])
    assert np.abs(c - (f * c_prev + i * g)).max() < 1e-5 and np.abs(h - o * np.tanh(c)).max() < 1e-5
    with pytest.raises(KeyError, match="layers.0.ctilde"):
        cache["layers.0.r"]


def test_adopted_model_through_the_api(tmp_path, artifacts):
    """api.adopt, then the cache against the user's own nn.GRU: its outputs are layers.{l}.h, its logits ours."""
    path = tmp_path / "corpus.txt"
    from conftest import make_text

    path.write_bytes(make_text(2500, seed=9))
    text = path.read_text()
    chars = shuffled_chars(text, "~")
    torch.manual_seed(4)
    user = UserLM("gru", len(chars), 8, 2, batch_first=False)
    model_path, vocab_path = write_user(tmp_path, user, chars)
    m = api.adopt(model_path, vocab_path, str(path))
    assert m.model_id.startswith("adopted-gru-L2-H8-") and api.load(m.model_id).model.digest == m.model.digest
    excerpt = text[200:500]
    logits, cache = m.run_with_cache(excerpt)
    stoi = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([stoi[c] for c in excerpt])
    with torch.no_grad():
        out, _ = user.rnn(user.embed(ids)[:, None])  # the top layer's outputs, time-major
        theirs = user(ids).numpy()
    assert np.abs(cache["layers.1.h"] - out[:, 0].numpy()).max() < 1e-5
    assert np.abs(logits - theirs[:, [stoi[chr(b)] for b in m.vocab]]).max() < 1e-5
    assert {"layers.0.r", "layers.0.z", "layers.0.htilde"} <= set(cache)
    metrics = json.loads((m.model.path.parent / "metrics.json").read_text())
    assert metrics["kind"] == "adopted" and metrics["model_config"]["vocab_size"] == len(chars)
    sample = m.sample(50, prime="the ", seed=3)
    assert len(sample) == 50 and set(sample) <= set(chars)


SHIPPED_LSTM = sorted(SHIPPED_ROOT.glob("*/warpeace/lstm-L1-H128-s0-*"))  # the stand-in, or its retrained model


@pytest.mark.skipif(not SHIPPED_LSTM, reason="not shipped here")
def test_shipped_model_by_id(artifacts):
    """An id found nowhere under the (empty) artifacts root is looked up among the shipped models."""
    m = api.load(SHIPPED_LSTM[0].name)
    assert m.model.path.is_relative_to(SHIPPED_ROOT) and m.net.config.size == 128
    scores = m.score("The prince said that war and peace were not the same thing.")
    assert 0.5 < scores.cross_entropy < 3.0  # a converged War and Peace model reads English
    _, cache = m.run_with_cache("Natasha")
    assert cache["layers.0.f"].shape == (7, 128)


@pytest.mark.skipif(not SHIPPED_LSTM, reason="not shipped here")
def test_shipped_ids_in_the_clis_prefixes_and_damage(artifacts, tmp_path, monkeypatch, capsys):
    """A fresh clone's `python -m charlm.sample <id>` finds the shipped model; part of an id names the whole ones
    with their corpora; a shipped model whose file no longer has its manifest's sha256 is refused in one line."""
    from charlm import sample
    from charlm.shipped import read_manifest

    folder = SHIPPED_LSTM[0]
    assert sample.main([folder.name, "--length", "20", "--prime", "The "]) == 0
    assert len(capsys.readouterr().out) >= 24
    with pytest.raises(UserError, match=rf"no model id is 'lstm-L1-H128'; .*{folder.name} \({folder.parent.name}\)"):
        api.load("lstm-L1-H128")
    copy = tmp_path / "models"
    shutil.copytree(folder, copy / "reference" / folder.parent.name / folder.name)
    checkpoint = copy / "reference" / folder.parent.name / folder.name / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:-1] + b"x")
    monkeypatch.setattr("charlm.anymodel.SHIPPED_ROOT", copy)
    assert "checkpoint.pt" in read_manifest(checkpoint.parent)["files"]
    with pytest.raises(UserError, match=r"cannot be read: .*checkpoint.pt is damaged"):
        api.load(folder.name)


def test_not_recurrent_and_empty(tiny):
    m, _, _ = tiny
    with pytest.raises(UserError, match="empty"):
        m.run_with_cache("")
    fake = api.Model(m.model.__class__(kind("nnn"), nn.Identity(), m.model.vocab, "nnn-n3-x", ""))
    with pytest.raises(UserError, match="not a recurrent model"):
        fake.run_with_cache("the")
