"""char-rnn's split mode: the splits the papers trained with, kept apart from the contiguous ones by every hash."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_text

from charlm.predict import predict_split
from charlm.predictions import load as load_predictions
from charlm.train import TrainConfig, train
from corpora import Corpus, UserError


def charrnn_reference(data: bytes, fractions, batch=100, seq=100) -> dict[str, bytes]:
    """char-rnn's CharSplitLMMinibatchLoader, written out as its Lua does it."""
    n_batches = len(data) // (batch * seq)
    data = data[: n_batches * batch * seq]
    width = len(data) // batch
    rows = [data[r * width : (r + 1) * width] for r in range(batch)]  # data:view(batch_size, -1)
    batches = [[row[b * seq : (b + 1) * seq] for row in rows] for b in range(n_batches)]  # :split(seq_length, 2)
    n_train = math.floor(n_batches * fractions[0])
    n_val = math.floor(n_batches * fractions[1])
    parts = {"train": batches[:n_train], "val": batches[n_train : n_train + n_val], "test": batches[n_train + n_val :]}
    # A split read as one text: each row's pieces in order, row after row.
    return {name: b"".join(b"".join(batch_[r] for batch_ in bs) for r in range(batch)) for name, bs in parts.items()}


@pytest.mark.parametrize("fractions", [(0.8, 0.1, 0.1), (0.9, 0.05, 0.05)])
def test_charrnn_split_matches_the_loader(fractions):
    data = make_text(123_457, seed=3)
    corpus = Corpus.from_bytes("toy", data, fractions, split_mode="charrnn")
    expected = charrnn_reference(data, fractions)
    for name, text in expected.items():
        assert corpus.decode(corpus.split(name)) == text
    assert sum(len(t) for t in expected.values()) == len(data) // 10_000 * 10_000


def test_split_mode_is_in_every_hash_and_contiguous_keeps_the_sha():
    data = make_text(50_000)
    contiguous = Corpus.from_bytes("toy", data)
    charrnn = Corpus.from_bytes("toy", data, split_mode="charrnn")
    assert contiguous.key == contiguous.sha256 and charrnn.key != charrnn.sha256
    config = TrainConfig(corpus="toy", arch="lstm")
    assert config.model_id(contiguous.key) != config.model_id(charrnn.key)
    from charlm import ngram, nnn

    assert ngram.model_id(contiguous, 3) != ngram.model_id(charrnn, 3)
    assert nnn.model_folder(contiguous, nnn.NNNConfig("toy", 2)) != nnn.model_folder(charrnn, nnn.NNNConfig("toy", 2))
    with pytest.raises(UserError, match="unknown split mode"):
        Corpus.from_bytes("toy", data, split_mode="random")


def test_a_model_trained_on_charrnn_splits_is_scored_on_them(tmp_path, monkeypatch):
    path = tmp_path / "toy.txt"
    path.write_bytes(make_text(150_000)[:100_000])  # 10 char-rnn batches: 8 train, 1 val, 1 test
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    corpus = Corpus.from_bytes("toy", path.read_bytes(), split_mode="charrnn")
    config = TrainConfig(
        corpus=str(path), arch="lstm", layers=1, size=8, max_chars=2000, batch_size=4, unroll=10, snapshots=1
    )
    out = train(config, corpus=corpus, progress=False)
    preds = load_predictions(predict_split(out / "checkpoint.pt", "test", progress=False))
    assert np.array_equal(preds.targets, corpus.split("test")[1:].astype(np.int64))
