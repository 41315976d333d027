"""Analyses read artifacts through one index; their CLIs build what is missing and write tidy tables."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import make_text

from analyses import cross_entropy
from analyses import ngram as ngram_analysis
from charlm.model import matched_size
from corpora import run_cli


def test_budget_of_recovers_the_lstm_width_a_model_was_matched_to():
    for budget in (64, 128, 256):
        width = matched_size("gru", budget, 87, 2)
        assert cross_entropy.budget_of("gru", width, 2, 87) == budget
    assert cross_entropy.budget_of("lstm-srnn", 96, 2, 87) == 96


def test_paper_tables_are_tidy_and_complete():
    assert len(cross_entropy.paper_table()) == 2 * (4 * 9 - 3)  # the paper has no 512-wide RNNs
    table2 = ngram_analysis.paper_table()
    assert set(table2["family"]) == {"ngram", "nnn"} and len(table2) == 2 * (10 + 6)


def test_ngram_cli_builds_and_reports_exactly_the_requested_models(tmp_path, monkeypatch):
    pytest.importorskip("kenlm")
    from charlm import ngram

    try:
        ngram.find_tool("lmplz")
    except Exception:
        pytest.skip("lmplz not installed (make setup builds it)")
    corpus = tmp_path / "toy.txt"
    corpus.write_bytes(make_text(150_000)[:100_000])  # 10 char-rnn batches, so both split modes have a test split
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    out = tmp_path / "table.csv"
    args = ["--corpus", str(corpus), "--families", "ngram", "--n", "1,2", "--out", str(out)]
    assert run_cli(ngram_analysis.main, args) == 0
    contiguous = pd.read_csv(out)
    assert list(contiguous["n"]) == [1, 2] and set(contiguous["family"]) == {"ngram"}
    assert contiguous["ce_nats"].iloc[1] < contiguous["ce_nats"].iloc[0]  # a bigram beats a unigram on text
    # The other split mode builds other models, and the table holds only those.
    assert run_cli(ngram_analysis.main, args + ["--splits", "charrnn"]) == 0
    charrnn = pd.read_csv(out)
    assert list(charrnn["n"]) == [1, 2]
    assert not set(charrnn["model_id"]) & set(contiguous["model_id"])
