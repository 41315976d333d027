"""error_overlap: Venn counts of hand-built error masks, the choice of the best baselines, the findings and their
verdicts, bad input."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import fake_corpus_file, fake_neural_model, fake_ngram_model, fake_nnn_model

from analyses import common, error_overlap
from analyses.base import Result
from analyses.context import Context, MissingInput, model_index
from analyses.prose import sentence, unsupported_numbers
from corpora import run_cli

WRONG, RIGHT = 2.0, 0.1  # nll of an error (p = 0.14) and of a correct guess (p = 0.90)


def _ctx(**settings) -> Context:
    return Context(model_index(), common.settings(error_overlap, None, settings))


def _masks(T: int) -> dict[str, np.ndarray]:
    """Error masks with known overlaps: blocks of positions, each block erring for a chosen set of models."""
    blocks = {  # (model, n-NN, n-gram) -> block length
        (True, True, True): 100, (True, False, True): 40, (True, True, False): 30, (True, False, False): 20,
        (False, True, True): 70, (False, True, False): 25, (False, False, True): 35,
    }  # fmt: skip
    masks = {"model": np.zeros(T, bool), "nnn": np.zeros(T, bool), "ngram": np.zeros(T, bool)}
    start = 0
    for key, length in blocks.items():
        for name, errs in zip(masks, key):
            masks[name][start : start + length] = errs
        start += length
    assert start < T
    return masks


def test_venn_counts_match_hand_built_error_masks(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path)
    T = corpus.split("test").size - 1
    masks = _masks(T)
    nll = {name: np.where(mask, WRONG, RIGHT) for name, mask in masks.items()}
    fake_neural_model(corpus, nll=nll["model"], arch="lstm")
    fake_neural_model(corpus, nll=np.full(T, WRONG), arch="gru", size=7)  # wrong everywhere
    fake_nnn_model(corpus, 3, nll=nll["nnn"])
    fake_nnn_model(corpus, 1, nll=np.full(T, 3.0))  # worse: not the best n-NN
    fake_ngram_model(corpus, 5, nll=nll["ngram"])
    fake_ngram_model(corpus, 2, nll=np.full(T, 3.0))  # worse: not the best n-gram

    df = error_overlap.compute(_ctx())
    lstm = df[df["arch"] == "lstm"].set_index("region")
    assert set(df["nnn_n"]) == {3} and set(df["ngram_n"]) == {5}
    assert lstm.loc["all three", "count"] == 100
    assert lstm.loc["model & n-gram", "count"] == 40
    assert lstm.loc["model & n-NN", "count"] == 30
    assert lstm.loc["model only", "count"] == 20
    assert lstm.loc["n-NN & n-gram", "count"] == 70
    assert lstm.loc["n-NN only", "count"] == 25
    assert lstm.loc["n-gram only", "count"] == 35
    assert lstm.loc["none", "count"] == T - 320
    assert lstm["count"].sum() == T and lstm["fraction"].sum() == pytest.approx(1.0)
    assert bool(lstm["headline"].all())

    gru = df[df["arch"] == "gru"].set_index("region")  # errs everywhere: every position is in a "model" region
    assert gru.loc["model only", "count"] == T - 300 and gru.loc["n-NN only", "count"] == 0
    assert not gru["headline"].any()

    view = error_overlap.per_model(df).set_index("arch")
    assert view.loc["lstm", "model_errors"] == pytest.approx(190 / T)
    assert view.loc["lstm", "ngram_errors"] == pytest.approx(245 / T)
    assert view.loc["lstm", "shared_by_all_of_union"] == pytest.approx(100 / 320)
    assert view.loc["lstm", "model_only_of_model"] == pytest.approx(20 / 190)
    assert view.loc["lstm", "avoided_of_baselines_shared"] == pytest.approx(70 / 170)
    result = error_overlap.ANALYSIS.compute(_ctx())
    pd.testing.assert_frame_equal(result.table, df)
    s = result.tables["summary"].set_index("corpus").loc["fake"]
    assert s["union"] == 320 and s["shared_of_union"] == pytest.approx(100 / 320)
    assert s["model_only"] == pytest.approx(20 / 320) and s["nnn_only"] == pytest.approx(25 / 320)
    assert s["ngram_only"] == pytest.approx(35 / 320) and s["model_rate"] == pytest.approx(190 / T)
    verdicts = {f.claim: f.verdict for f in result.findings if f.claim}
    # all three share 31 % of the union (no majority) but 53 % of the LSTM's errors (100 of 190): partly
    assert verdicts == {"eo-fig4-shared": "partly", "eo-fig4-unique": "reproduced", "eo-fig4-smallest": "reproduced"}
    first = sentence(result.findings[0])
    assert first.startswith("fake: all three err on 31.2% of the characters any of them gets wrong (52.6% of the")
    table = error_overlap.ANALYSIS.summary_table(result)
    assert len(table) == 1 and table["model errs %"].iloc[0] == pytest.approx(round(100 * 190 / T, 1))
    (appendix,) = error_overlap.ANALYSIS.appendix(result).values()
    assert appendix.loc[appendix["model"] == "LSTM 1x8", "model errs %"].iloc[0] == pytest.approx(100 * 190 / T)
    plt.close(error_overlap.ANALYSIS.plot(result))


def test_threshold_is_strictly_below_one_half(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path)
    T = corpus.split("test").size - 1
    p = np.where(np.arange(T) % 2 == 0, 0.49, 0.51)  # half just under 0.5 (errors), half just over
    fake_neural_model(corpus, nll=-np.log(p), arch="lstm")
    fake_nnn_model(corpus, 1, nll=np.full(T, RIGHT))
    fake_ngram_model(corpus, 1, nll=np.full(T, RIGHT))
    df = error_overlap.compute(_ctx()).set_index("region")
    assert df.loc["model only", "count"] == (T + 1) // 2
    assert df.loc["none", "count"] == T // 2


def test_one_model_per_configuration_the_lowest_seed(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path)
    T = corpus.split("test").size - 1
    fake_neural_model(corpus, nll=np.full(T, RIGHT), arch="lstm", seed=0)
    fake_neural_model(corpus, nll=np.full(T, WRONG), arch="lstm", seed=1)  # a sibling: same group, not read
    fake_nnn_model(corpus, 1, nll=np.full(T, WRONG))
    fake_ngram_model(corpus, 1, nll=np.full(T, WRONG))
    df = error_overlap.compute(_ctx())
    assert set(df["seed"]) == {0} and df["model_id"].nunique() == 1
    assert df.set_index("region").loc["n-NN & n-gram", "count"] == T


def test_venn_layout_has_the_asked_areas_and_pairwise_overlaps():
    sizes, pairs = (190.0, 225.0, 245.0), (130.0, 140.0, 170.0)
    centres, radii = error_overlap.venn_layout(sizes, pairs)
    assert np.pi * radii**2 == pytest.approx(sizes)
    got = [error_overlap._lens(radii[a], radii[b], np.linalg.norm(centres[a] - centres[b]))
           for a, b in ((0, 1), (0, 2), (1, 2))]  # fmt: skip
    assert got == pytest.approx(pairs, rel=1e-6)
    # Disjoint sets sit apart; a subset sits inside its superset.
    centres, radii = error_overlap.venn_layout((10.0, 10.0, 40.0), (0.0, 10.0, 10.0))
    assert np.linalg.norm(centres[0] - centres[1]) == pytest.approx(radii[0] + radii[1])
    assert np.linalg.norm(centres[0] - centres[2]) <= radii[2] - radii[0] + 1e-9


def test_missing_baselines_name_the_command_and_the_cli_exits_2(tmp_path, artifacts, capsys):
    corpus = fake_corpus_file(tmp_path)
    T = corpus.split("test").size - 1
    fake_neural_model(corpus, nll=np.full(T, RIGHT), arch="lstm")
    fake_ngram_model(corpus, 1, nll=np.full(T, WRONG))
    with pytest.raises(MissingInput, match="python -m charlm.nnn"):
        error_overlap.compute(_ctx())
    assert run_cli(error_overlap.main, ["--corpus", corpus.source]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "n-NN" in err[0] and "charlm.nnn" in err[0]

    fake_nnn_model(corpus, 1, nll=np.full(T, WRONG))
    (artifacts / corpus.artifact_name / next(p.name for p in (artifacts / corpus.artifact_name).iterdir()
                                              if p.name.startswith("ngram")) / "metrics.json").unlink()  # fmt: skip
    with pytest.raises(MissingInput, match="python -m charlm.ngram"):
        error_overlap.compute(_ctx())


@pytest.mark.parametrize("weaker_in_ce", [True, False])
def test_the_findings_compare_cross_entropies_before_calling_the_model_weaker(tmp_path, artifacts, weaker_in_ce):
    """A model with more errors than the n-gram (half its positions below p = 0.5, against a fifth) is weaker in
    cross-entropy when its right answers are timid (p 0.55), stronger when they are sure (p 0.99): the findings say
    which, and name the headline model (a GRU where the corpus has no LSTM)."""
    corpus = fake_corpus_file(tmp_path)
    T = corpus.split("test").size - 1
    t = np.arange(T)
    right = 0.55 if weaker_in_ce else 0.99
    fake_neural_model(corpus, nll=-np.log(np.where(t % 2 == 0, 0.45, right)), arch="gru", size=7)
    fake_nnn_model(corpus, 1, nll=np.full(T, RIGHT))
    fake_ngram_model(corpus, 3, nll=-np.log(np.where(t % 5 == 0, 0.4, 0.6)))
    result = error_overlap.ANALYSIS.compute(_ctx())
    view = error_overlap.per_model(result.table).iloc[0]
    assert view["model_errors"] > view["ngram_errors"] and (view["model_ce"] > view["ngram_ce"]) == weaker_in_ce
    text = " ".join(sentence(f) for f in result.findings)
    assert "GRU 1x7" in text and "LSTM 1x" not in text
    assert ("is behind the n-gram in cross-entropy too" in text) == weaker_in_ce
    assert ("yet has the lower cross-entropy" in text) == (not weaker_in_ce)
    # the GRU errs more than both baselines (the n-NN makes no error): its set is not the smallest
    smallest = next(f for f in result.findings if f.claim == "eo-fig4-smallest")
    assert smallest.verdict == "not reproduced" and smallest.values["model_rate"] == pytest.approx(view["model_errors"])


def test_every_number_a_finding_states_is_in_the_results_tables(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path)
    T = corpus.split("test").size - 1
    masks = _masks(T)
    fake_neural_model(corpus, nll=np.where(masks["model"], WRONG, RIGHT), arch="lstm")
    fake_neural_model(corpus, nll=np.where(np.arange(T) % 3 == 0, WRONG, RIGHT), arch="rnn", size=9)
    fake_nnn_model(corpus, 2, nll=np.where(masks["nnn"], WRONG, RIGHT))
    fake_ngram_model(corpus, 4, nll=np.where(masks["ngram"], WRONG, RIGHT))
    result = error_overlap.ANALYSIS.compute(_ctx())
    frames = [result.table, *result.tables.values()]
    assert len(result.findings) >= 4
    for finding in result.findings:
        assert unsupported_numbers(sentence(finding), frames) == [], sentence(finding)
        assert len(sentence(finding).split()) <= 32
    # the same from the files the report writes and reads back
    result.save(tmp_path, "error_overlap")
    back = Result.load(tmp_path, "error_overlap")
    frames = [back.table, *back.tables.values()]
    assert all(unsupported_numbers(sentence(f), frames) == [] for f in back.findings)
    assert [sentence(f) for f in back.findings] == [sentence(f) for f in result.findings]
