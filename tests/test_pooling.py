"""Pooling analysis: the task is built as specified, a short-memory last-state model fails in the middle where
pooling succeeds (known by construction), NWI finds the span, bad input is one line and exit 2."""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import fake_neural_model

import corpora
from analyses import common, pooling
from analyses.context import Context, MissingInput, model_index
from corpora import run_cli
from corpora.errors import UserError

FILLER = "the of and to in was he it his that with as had for not but she at on".split()  # all under 6 letters
KEYWORDS = ("zephyr", "quartz")


def keyword_text(n_bytes: int, seed: int = 0, every: int = 300) -> bytes:
    """Short filler words, with one of KEYWORDS about every `every` bytes: the only words of 6+ letters."""
    rng = random.Random(seed)
    out, size, since = [], 0, 0
    while size < n_bytes:
        word = rng.choice(KEYWORDS) if since >= every and rng.random() < 0.2 else rng.choice(FILLER)
        since = 0 if word in KEYWORDS else since + len(word) + 1
        out.append(word)
        size += len(word) + 1
    return " ".join(out).encode()[:n_bytes]


@pytest.fixture
def keyword_corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    path = tmp_path / "keywords.txt"
    path.write_bytes(keyword_text(40000))
    corpus = corpora.load(str(path))
    fake_neural_model(corpus, arch="lstm", size=4)  # the context finds corpora through their models
    return corpus


SMALL = dict(
    classes=2, span=10, lengths=[48], positions=["mid"], train_sizes=[160], val_size=48, test_size=96, hidden=8,
    batch_size=16, lr=0.02, epochs=40, patience=40, max_examples=2400, nwi_examples=24, nwi_window=4,
)  # fmt: skip


def _ctx(**settings) -> Context:
    return Context(model_index(), common.settings(pooling, None, settings))


def test_keywords_and_examples_are_built_as_specified(keyword_corpus):
    text = keyword_corpus.decode(keyword_corpus.split("train"))
    keywords = pooling.choose_keywords(text, 2, 48)
    assert sorted(keywords) == sorted(k.encode() for k in KEYWORDS)
    rng = np.random.default_rng(0)
    for position, at in (("start", 0), ("mid", 19), ("end", 38)):
        examples, labels = pooling.build_examples(text, keywords, 48, position, 20, 10, rng)
        assert list(labels) == [i % 2 for i in range(20)]
        for example, label in zip(examples, labels):
            assert len(example) == 48
            found = [(m.start(), m.group()) for m in re.finditer(rb"zephyr|quartz", example)]
            assert len(found) == 1 and found[0][1] == keywords[label]  # one keyword: the class's
            assert at <= found[0][0] and found[0][0] + 6 <= at + 10  # inside the span, where the position says
    with pytest.raises(UserError, match="fewer classes"):
        pooling.choose_keywords(text, 3, 48)


def test_short_memory_last_state_fails_in_the_middle_where_pooling_succeeds(keyword_corpus):
    """Forget gates shut (bias -20): a last-state BiLSTM cannot carry a span 19 characters from both ends to its
    final states, while mean and max pooling read it where it is. NWI of the max-pool model peaks on the span."""
    df = pooling.compute(_ctx(**SMALL, pools=["last", "mean", "max"], forget_bias=-20.0))
    acc = df[df["measure"] == "accuracy"].set_index("pool")["value"]
    assert acc["last"] < 0.65  # chance is 0.5
    assert acc["mean"] > 0.9 and acc["max"] > 0.9
    nwi = df[(df["measure"] == "nwi") & (df["pool"] == "max")].set_index("bin")["value"]
    span = slice(int(19 / 48 * 99), int(29 / 48 * 99))  # the span's relative positions
    outside = nwi.drop(nwi.loc[span].index)
    assert nwi.loc[span].max() == 1.0 and nwi.loc[span].mean() > 2 * outside.mean()
    ratios = df[df["measure"] == "ratio_init"].set_index("pool")["value"]
    assert ratios["last"] < 1e-3 < ratios["mean"]  # at initialisation the middle gets (almost) no gradient
    assert set(df["keywords"].iloc[0].split("|")) == set(KEYWORDS)
    fig = pooling.plot(df)
    assert len(fig.axes) >= 9
    assert "BiLSTM" in pooling.caption(df) and "Maini" in pooling.summary(df)
    table = pooling.with_paper(df)
    assert {
        "Maini et al. IMDb, 1K (mid / end: in the middle / on the right of Wikipedia)",
        "Maini et al. Table 2, 1K",
    } <= set(table["source"])


def test_classifiers_are_cached_and_rerun_at_once(keyword_corpus, monkeypatch):
    settings = dict(SMALL, pools=["max"], max_examples=320)
    first = pooling.compute(_ctx(**settings))
    monkeypatch.setattr("charlm.classifier.fit", lambda *a, **k: pytest.fail("retrained"))
    monkeypatch.setattr(pooling, "normalised_word_importance", lambda *a, **k: pytest.fail("re-measured"))
    second = pooling.compute(_ctx(**settings))
    assert first.equals(second)


def test_a_damaged_classifier_is_named_by_the_cli_and_retrained_by_the_pipeline(keyword_corpus, capsys):
    settings = dict(SMALL, pools=["max"], max_examples=160)
    pooling.compute(_ctx(**settings))
    root = Path(os.environ["CHARLM_ARTIFACTS"]) / "_classifiers" / keyword_corpus.artifact_name
    (checkpoint,) = root.glob("*/checkpoint.pt")
    checkpoint.write_bytes(checkpoint.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(UserError, match="is damaged"):
        pooling.compute(_ctx(**settings))
    repaired = Context(model_index(), common.settings(pooling, None, settings), repair=True, say=print)
    assert not pooling.compute(repaired).empty
    assert "retraining it" in capsys.readouterr().out


def test_nwi_is_one_on_the_only_window_the_model_reads():
    """A model whose loss depends only on characters 8..11: NWI is 1 there and 0 elsewhere."""
    import torch

    class Reader(torch.nn.Module):
        def onehot(self, ids):
            return torch.nn.functional.one_hot(ids, 5).float()

        def forward_onehot(self, x):
            return torch.stack([x[:, 8:12, 0].sum(1), x[:, 8:12, 1].sum(1)], 1) * 3.0

    ids = np.random.default_rng(0).integers(0, 5, (10, 24))
    nwi = pooling.normalised_word_importance(Reader(), ids, np.arange(10) % 2, 4)
    # six windows (starts 0, 4, .., 20) at bins 0, 19.8, 39.6, ..: only the third one (8..11) matters
    assert nwi.argmax() in (39, 40) and nwi.max() == 1.0
    assert nwi[:20].max() == 0 and nwi[60:].max() == 0 and nwi[20:60].min() > 0


@pytest.mark.parametrize(
    "setting, message",
    [
        ('pools=["sum"]', "pools must be"),
        ('positions=["left"]', "positions must be"),
        ("lengths=[8]", "must exceed the span"),
        ("classes=3", "fewer classes"),
        ("corpus=linux", "no models on corpus 'linux'"),
    ],
)
def test_bad_settings_are_one_line_and_exit_2(keyword_corpus, capsys, setting, message):
    code = run_cli(pooling.main, ["--corpus", keyword_corpus.source, "--set", setting, "--set", "lengths=[48]"]
                   if "lengths" not in setting else ["--corpus", keyword_corpus.source, "--set", setting])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err


def test_no_models_is_a_missing_input(tmp_path, monkeypatch):
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    with pytest.raises(MissingInput, match="python -m reports --profile quick"):
        pooling.compute(_ctx())
