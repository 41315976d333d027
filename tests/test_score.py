"""Scoring any text: the numbers equal the report's Predictions for every model kind, ranks and surprisals agree
with independent computations, out-of-vocabulary bytes follow a stated policy, and bad input is one line."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import full_forward_logp, make_text, random_checkpoint
from scipy.stats import rankdata

import corpora
from charlm import anymodel, ngram, nnn, predictions, score
from charlm.predict import predict_checkpoint
from corpora.errors import UserError, run_cli


@pytest.fixture(autouse=True)
def _artifacts(tmp_path, monkeypatch):
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))


def test_a_split_scored_as_text_equals_the_reports_predictions(tiny_run):
    checkpoint = tiny_run.out / "checkpoint.pt"
    ids = tiny_run.corpus.split("test")
    stored = predictions.load(predict_checkpoint(checkpoint, "test", progress=False))
    scores = score.score_text(checkpoint, tiny_run.corpus.decode(ids))
    np.testing.assert_array_equal(scores.targets, stored.targets)
    np.testing.assert_allclose(scores.logp, stored.target_logp, atol=1e-6, rtol=0)
    assert scores.digest == stored.source_digest and scores.model_id == stored.model_id
    np.testing.assert_array_equal(scores.offsets, np.arange(1, ids.size))  # the first byte is context only


def test_one_stream_equals_a_full_forward_and_parallel_streams_stay_within_1e_3(tmp_path, tiny_run):
    model = anymodel.load(tiny_run.out / "checkpoint.pt")
    data = make_text(6000, seed=3)
    ids, _ = model.encode(data)
    one = score.score_text(model, data, streams=1)
    exact = full_forward_logp(model.net, ids)
    np.testing.assert_allclose(one.logp, exact[np.arange(ids.size - 1), ids[1:]], atol=2e-5, rtol=0)
    parallel = score.score_text(model, data)  # 3 streams of 2,000 positions for 6,000 bytes
    assert abs(parallel.logp.mean() - one.logp.mean()) < 1e-3


def test_a_context_is_read_first_and_every_character_of_the_text_is_scored(tmp_path, tiny_run, capsys):
    """Scored after a context, the text's characters get the log-probabilities a full forward pass over context +
    text gives them, its first character too; the CLI's --context reads a file and says how much it read."""
    model = anymodel.load(tiny_run.out / "checkpoint.pt")
    context, data = make_text(300, seed=7), make_text(200, seed=8)
    after = score.score_text(model, data, streams=1, context=context)
    ids, _ = model.encode(context + data)
    exact = full_forward_logp(model.net, ids)[np.arange(ids.size - 1), ids[1:]][len(context) - 1 :]
    np.testing.assert_allclose(after.logp, exact, atol=2e-5, rtol=0)
    np.testing.assert_array_equal(after.offsets, np.arange(len(data)))
    assert after.context == 300 and after.logp.size == len(data)
    cold = score.score_text(model, data, streams=1)
    assert cold.logp.size == len(data) - 1 and not np.allclose(cold.logp[:20], after.logp[1:21], atol=1e-3)
    (tmp_path / "c.txt").write_bytes(context)
    (tmp_path / "t.txt").write_bytes(data)
    assert score.main([str(tiny_run.out / "checkpoint.pt"), "--text", str(tmp_path / "t.txt"), "--context",
                       str(tmp_path / "c.txt"), "--streams", "1", "--quiet"]) == 0  # fmt: skip
    line = capsys.readouterr().out
    assert f"cross-entropy {-after.logp.mean():.4f}" in line and "200 scored characters (after 300 characters" in line
    with pytest.raises(UserError, match="context file .* does not exist"):
        score.main([str(tiny_run.out / "checkpoint.pt"), "--text", str(tmp_path / "t.txt"), "--context", "nope"])


def test_ranks_surprisals_and_the_table_agree_with_independent_computations(tmp_path, tiny_run):
    data = make_text(500, seed=5)
    scores = score.score_text(tiny_run.out / "checkpoint.pt", data, streams=1)
    rows = scores.rows.astype(np.float64)
    expected_rank = [rankdata(-row, method="min")[t] for row, t in zip(rows, scores.targets)]
    np.testing.assert_array_equal(scores.rank, expected_rank)
    assert np.all(scores.rank[scores.rows.argmax(1) == scores.targets] == 1)
    out = scores.save(tmp_path / "s.tsv")
    table = pd.read_csv(out, sep="\t", keep_default_na=False, quoting=3)
    assert list(table.columns) == ["offset", "byte", "char", "logp", "surprisal_bits", "rank"]
    raw = np.frombuffer(data, dtype=np.uint8)
    np.testing.assert_array_equal(table["byte"], raw[1:])
    np.testing.assert_array_equal(table["offset"], np.arange(1, len(data)))
    np.testing.assert_allclose(np.exp(table["logp"]), np.exp(scores.logp), rtol=1e-5)
    np.testing.assert_allclose(table["surprisal_bits"], -table["logp"] / math.log(2), rtol=1e-5)
    assert table.loc[raw[1:] == ord("\n"), "char"].eq("\u23ce").all() and table.loc[raw[1:] == 32, "char"].eq(" ").all()
    mean, std = scores.cross_entropy()
    assert mean == pytest.approx(-scores.logp.mean()) and 0 < std < mean


def test_npz_output_is_a_predictions_file(tmp_path, tiny_run):
    data = make_text(800, seed=6)
    scores = score.score_text(tiny_run.out / "checkpoint.pt", data)
    preds = predictions.load(scores.save(tmp_path / "s.npz"))
    assert preds.complete and preds.n_positions == len(data) - 1
    np.testing.assert_allclose(preds.target_logp, scores.logp, atol=1e-6)
    np.testing.assert_array_equal(score.ranks(preds.distributions(), preds.targets)[preds.argmax == preds.targets], 1)


@pytest.mark.parametrize("arch", ["rnn", "gru", "lstm-srnn-hidden", "lstm-gates"])
def test_every_architecture_scores_like_its_full_forward(tmp_path, text_bytes, arch):
    corpus = corpora.Corpus.from_bytes("t", text_bytes)
    path = random_checkpoint(tmp_path / f"{arch}.pt", corpus, arch, layers=2)
    data = text_bytes[:300]
    scores = score.score_text(path, data)
    ids = corpus.encode(data)
    exact = full_forward_logp(anymodel.load(path).net, ids)
    np.testing.assert_allclose(scores.logp, exact[np.arange(ids.size - 1), ids[1:]], atol=2e-5, rtol=0)


def test_an_nnn_folder_scores_like_its_predictions(tmp_path, text_bytes):
    corpus = corpora.Corpus.from_bytes("t", text_bytes)
    folder = nnn.train_nnn(corpus, 2, hidden_grid=(8,), progress=False, epochs=1, batch_chars=500)
    stored = predictions.load(nnn.predict_folder(folder, corpus, "test"))
    scores = score.score_text(folder, corpus.decode(corpus.split("test")))  # the folder, not the file
    np.testing.assert_allclose(scores.logp, stored.target_logp, atol=1e-6, rtol=0)
    assert scores.digest == stored.source_digest
    assert score.score_text(folder.name, b"the war").model_id == scores.model_id  # a bare model id resolves too


def test_an_ngram_folder_scores_like_its_predictions(tmp_path):
    pytest.importorskip("kenlm")
    try:
        ngram.find_tool("lmplz"), ngram.find_tool("build_binary")
    except UserError as err:
        pytest.skip(str(err))
    corpus = corpora.Corpus.from_bytes("t", make_text(6000, seed=2))
    stored = predictions.load(ngram.predict(corpus, 3, "test", progress=False, whole=True))
    folder = ngram.model_folder(corpus, 3)
    scores = score.score_text(folder, corpus.decode(corpus.split("test")))
    np.testing.assert_allclose(scores.logp, stored.target_logp, atol=1e-5, rtol=0)
    assert scores.digest == stored.source_digest
    np.testing.assert_allclose(np.logaddexp.reduce(scores.rows.astype(np.float64), axis=1), 0.0, atol=1e-5)


# ------------------------------------------------------------------------------------ bytes outside the vocabulary


def test_unknown_bytes_are_named_or_skipped_as_asked(tmp_path, tiny_run, capsys):
    checkpoint = tiny_run.out / "checkpoint.pt"
    text = tmp_path / "t.txt"
    text.write_bytes(b"the war\xff and \xff\xfe peace")
    out = tmp_path / "s.tsv"
    assert run_cli(score.main, [str(checkpoint), "--text", str(text), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "0xfe (x1, first at byte 14)" in err[0]
        and "t.txt holds 3 bytes" in err[0]
        and "0xff (x2, first at byte 7)" in err[0]
    )
    assert not out.exists()  # nothing half-written
    assert run_cli(score.main, [str(checkpoint), "--text", str(text), "--out", str(out), "--unknown", "skip"]) == 0
    captured = capsys.readouterr()
    assert "skipped 3 bytes" in captured.err and "cross-entropy" in captured.out
    table = pd.read_csv(out, sep="\t", keep_default_na=False, quoting=3)
    kept = [i for i, b in enumerate(text.read_bytes()) if b < 0xFE]
    np.testing.assert_array_equal(table["offset"], kept[1:])  # offsets point into the file, past the skipped bytes
    expected = score.score_text(checkpoint, bytes(text.read_bytes()[i] for i in kept), streams=1)
    np.testing.assert_allclose(table["logp"], expected.logp, atol=1e-5)


@pytest.mark.parametrize(
    "case, contains",
    [
        ("missing_model", "does not exist"),
        ("corrupt_model", "corrupt"),
        ("empty_folder", "holds no model"),
        ("missing_text", "does not exist"),
        ("empty_text", "empty"),
        ("one_byte", "at least 2"),
        ("bad_out", ".tsv or .npz"),
        ("no_text", "--text"),
        ("bad_streams", "--streams"),
        ("bad_resamples", "--resamples"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, tiny_run, capsys, case, contains):
    checkpoint = str(tiny_run.out / "checkpoint.pt")
    text = tmp_path / "t.txt"
    text.write_bytes(b"the war")
    args = {
        "missing_model": [str(tmp_path / "nope.pt"), "--text", str(text)],
        "corrupt_model": [str(tmp_path / "bad.pt"), "--text", str(text)],
        "empty_folder": [str(tmp_path / "folder"), "--text", str(text)],
        "missing_text": [checkpoint, "--text", str(tmp_path / "nope.txt")],
        "empty_text": [checkpoint, "--text", str(tmp_path / "empty.txt")],
        "one_byte": [checkpoint, "--text", str(tmp_path / "one.txt")],
        "bad_out": [checkpoint, "--text", str(text), "--out", str(tmp_path / "s.csv")],
        "no_text": [checkpoint],
        "bad_streams": [checkpoint, "--text", str(text), "--streams", "0"],
        "bad_resamples": [checkpoint, "--text", str(text), "--resamples", "1"],
    }[case]
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    (tmp_path / "folder").mkdir()
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "one.txt").write_bytes(b"t")
    assert run_cli(score.main, args + ["--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and contains in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "s.csv").exists()


def test_help_and_benchmark_run(tmp_path, text_bytes, monkeypatch, capsys):
    with pytest.raises(SystemExit) as exit_info:
        score.main(["--help"])
    assert exit_info.value.code == 0 and "--unknown" in capsys.readouterr().out
    monkeypatch.setattr(corpora, "load", lambda name: corpora.Corpus.from_bytes("warpeace", text_bytes))
    record = score.benchmark(n_bytes=3000, batch_size=4, unroll=10, layers=1, size=8, repeats=1)
    assert record["score_chars"] == 2999 and record["train_forward_chars"] == 4 * 10 * ((2999 // 4) // 10)
    assert record["score_chars_per_s"] > 0 and record["train_forward_chars_per_s"] > 0
