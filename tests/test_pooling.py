"""Pooling analysis: the task is built as specified, a short-memory last-state model fails in the middle where
pooling succeeds (known by construction), NWI finds the span, bad input is one line and exit 2."""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import numpy as np
import pandas as pd
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
    found = pooling.findings(df)  # the caption's claims, from these accuracies
    assert found["middle"][48][1] == "at chance" and found["beaten"][48][2]
    assert found.get("ends") is None and found["spread"] == {}  # one position: no claim about the ends or position
    caption = pooling.caption(df)
    assert "length 48 (the span 19 characters from each end)" in caption and "(at chance)" in caption
    assert "right at the ends" not in caption and "indifference" not in caption
    assert "48-character texts" in pooling.summary(df)
    fig = pooling.plot(df)
    assert len(fig.axes) >= 9
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


# ------------------------------------------------------------------------------------------ the caption's claims

LENGTHS = (24, 48, 96)
MAINI = {  # Maini et al.'s findings hold: the last state right at the ends, at chance in the middle
    "last": {"start": 0.99, "mid": 0.25, "end": 0.99},
    "mean": {"start": 0.98, "mid": 0.98, "end": 0.97},
    "max": {"start": 0.99, "mid": 0.99, "end": 0.98},
}


def _table(acc: dict, ratio_init: dict | None = None, ratio_95: dict | None = None, n: int = 160) -> pd.DataFrame:
    """A pooling table of 1000 training examples, 4 classes (chance 25 %), a 16-character span and lengths 24, 48,
    96: acc = {pool: {position: accuracy, or one per length}}, n test examples per position and length."""
    ratio_init = {"last": 1e-12, "mean": 1.0, "max": 0.3, **(ratio_init or {})}
    rows = []
    for pool, by_position in acc.items():
        for position, values in by_position.items():
            here = {"corpus": "toy", "keywords": "alpha|beta|gamma|delta", "span": 16, "pool": pool,
                    "position": position, "train_size": 1000}  # fmt: skip
            for length, value in zip(LENGTHS, np.broadcast_to(values, len(LENGTHS))):
                rows += [{**here, "length": length, "measure": "accuracy", "value": value},
                         {**here, "length": length, "measure": "test_examples", "value": n}]  # fmt: skip
            rows += [{**here, "measure": "ratio_init", "value": ratio_init[pool]},
                     {**here, "measure": "ratio_95", "value": (ratio_95 or {}).get(pool, np.nan)}]  # fmt: skip
    return pd.DataFrame(rows, columns=pooling.COLUMNS)


def _with(pool: str, **positions) -> dict:
    return {**MAINI, pool: {**MAINI[pool], **positions}}


@pytest.mark.parametrize(
    "ends, mid, verdict, claim",
    [
        (0.99, 0.25, "at chance", "carries over from Maini et al. (sentiment and topic classification of words, "
                                  "1K-10K examples): the last state fails in the middle and is right at the ends"),
        (0.99, 0.60, "below its ends", "the last state loses accuracy in the middle and is right at the ends"),
        (0.99, 0.97, "as at its ends", "What does not carry over here: the last state's failure in the middle"),
        (0.60, 0.25, "at chance", "is not right at the ends (start 60 %, end 60 %): under-trained"),
    ],
)  # fmt: skip
def test_the_last_state_claims_follow_its_accuracy_at_the_ends_and_in_the_middle(ends, mid, verdict, claim):
    df = _table(_with("last", start=ends, mid=mid, end=ends))
    caption = pooling.caption(df)
    assert f"length 96 (the span 40 characters from each end) {100 * mid:.0f} % ({verdict})" in caption
    assert claim in caption
    if ends < pooling.RIGHT:  # an under-trained last state: no claim about the middle either way
        assert "fails in the middle" not in caption and "failure in the middle" not in caption
    summary = pooling.summary(df)
    assert f"last-state BiLSTM {100 * mid:.0f} % ({verdict}; " in summary
    assert ("not right at the ends" in summary) == (ends < pooling.RIGHT)


def test_the_middle_is_judged_length_by_length_not_averaged():
    """Right in the middle of 24-character texts (4 characters from each end), at chance in 96-character ones:
    the mean over lengths (61 %) would say neither."""
    df = _table(_with("last", mid=[0.97, 0.60, 0.25]))
    caption = pooling.caption(df)
    assert "length 24 (the span 4 characters from each end) 97 % (as at its ends)" in caption
    assert "length 48 (the span 16 characters from each end) 60 % (below its ends)" in caption
    assert "length 96 (the span 40 characters from each end) 25 % (at chance)" in caption
    assert "last state fails in the middle and is right at the ends (length 96)" in caption
    assert "Span in the middle of 96-character texts (40 characters from each end)" in pooling.summary(df)
    table = pooling.with_paper(df)
    last = table[table["model"] == "BiLSTM (last)"].set_index("source")["mid (%)"]
    assert list(last) == [97.0, 60.0, 25.0]


def test_the_pooled_models_beat_the_last_state_in_the_middle_only_beyond_the_noise():
    beats = pooling.caption(_table(MAINI))
    assert "every one of them beats the last state there at every length" in beats
    close = pooling.caption(_table(_with("max", mid=[0.99, 0.99, 0.28])))  # MAXPOOL at chance too at length 96
    assert "every one beats the last state there at length 24, 48 only" in close
    none = pooling.caption(_table(_with("max", mid=0.27)))
    assert "not all of them beat the last state there at any length" in none


def test_pooling_is_called_indifferent_to_position_only_when_its_positions_agree():
    flat = pooling.caption(_table(MAINI))
    assert "MEANPOOL, MAXPOOL as accurate at every position within noise" in flat
    assert "carries over" in flat and "pooling's indifference to position" in flat and "depending on" not in flat
    moved = pooling.caption(_table(_with("mean", end=[0.97, 0.75, 0.97])))
    assert "accuracy depending on position for MEANPOOL (23 points at length 48)" in moved
    assert "What does not carry over here: pooling's indifference to position for MEANPOOL" in moved
    assert "pooling's indifference to position (MAXPOOL)" in moved  # the other one still holds it
    # 10 points on 20 test examples is within 2 binomial standard errors: no claim of a positional bias
    noisy = pooling.caption(_table(_with("mean", end=[0.97, 0.88, 0.97]), n=20))
    assert "depending on position" not in noisy


@pytest.mark.parametrize(
    "last, said, carried",
    [(1e-12, "11 orders of magnitude below the smallest", True), (1e-3, "2 orders of magnitude", True),
     (0.1, "not 10x below them", False)],
)  # fmt: skip
def test_the_initial_vanishing_ratio_claim_follows_the_ratios(last, said, carried):
    caption = pooling.caption(_table(MAINI, ratio_init={"last": last}))
    assert f"is {last:.1g} for the last-state model and 0.3 to 1 for the pooled ones: {said}" in caption
    carries, _, rest = caption.partition("What does not carry over here")
    claim = "a vanishing ratio orders of magnitude smaller without pooling at initialisation"
    assert (claim in carries) == carried and (claim in rest) == (not carried)


def test_the_ratio_at_95_percent_names_the_models_that_never_got_there():
    caption = pooling.caption(_table(MAINI, ratio_95={"last": 0.01, "max": 0.4}))
    assert "BiLSTM (last) 0.01 (3 of 3), MEANPOOL never, MAXPOOL 0.4 (3 of 3)" in caption
