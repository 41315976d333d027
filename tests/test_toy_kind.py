"""A kind of model is one object (charlm.kinds): this file adds one, a unigram, and every analysis that reads
Predictions runs on a report that holds it (issue 36).

The unigram is the toy: add-one counts of the train split, the same distribution at every position. Its test
cross-entropy and its agreement with every network are known by construction, so the test checks the numbers the
analyses report for it against an independent computation, not only that they ran.
"""

from __future__ import annotations

import dataclasses
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import kenlm_available

import corpora
from charlm import kinds
from charlm import predictions as preds_module
from charlm.kinds.base import Job, ModelKind, Planned, Work, worker_env
from charlm.paths import config_hash, model_dir, predictions_path
from corpora import atomic


def distribution(corpus: corpora.Corpus) -> np.ndarray:
    """(V,) float64 log-probabilities: add-one counts of the train split."""
    counts = np.bincount(corpus.split("train"), minlength=corpus.vocab_size).astype(np.float64)
    return np.log((counts + 1) / (counts.sum() + corpus.vocab_size))


def write_predictions(corpus: corpora.Corpus, model_id: str, folder: Path, split: str) -> Path:
    """The Predictions of one split: every position gets the unigram's distribution (stored at the fixed sample)."""
    logp, targets = distribution(corpus), corpus.split(split)[1:].astype(np.int64)
    positions = preds_module.sample_positions(targets.size)
    rows = np.broadcast_to(logp, (positions.size, logp.size))
    made = preds_module.from_parts(logp[targets], targets, rows, positions, model_id, config_hash({"id": model_id}))
    return preds_module.save(predictions_path(folder, split, "model"), made)


def build(corpus_arg: str, folder: str, model_id: str, env: dict, splits: str) -> str:
    """The unigram's one job: count, write the test Predictions, then its metrics.json (the completion marker)."""
    worker_env(env, 1)
    started, corpus = time.perf_counter(), corpora.load(corpus_arg, split_mode=splits)
    write_predictions(corpus, model_id, Path(folder), "test")
    metrics = {**corpus.identity(), "complete": True, "kind": "unigram", "model_id": model_id, "n": 0,
               "params": corpus.vocab_size, "chars_trained": int(corpus.split("train").size),
               "seconds": time.perf_counter() - started}  # fmt: skip
    atomic.write_json(Path(folder) / "metrics.json", metrics)
    return folder


class Unigram(ModelKind):
    name = "unigram"
    label = "add-one unigram"
    baseline = True  # compared with the networks like Table 2's baselines: its order is n = 0

    def order_label(self, n: int) -> str:
        return "unigram"

    def plan(self, profile, corpus, corpus_arg, extra_orders=((), ())) -> list[Planned]:
        model_id = f"unigram-{config_hash({'corpus_key': corpus.key})}"
        return [Planned(self, corpus_arg, corpus, model_id, model_dir(corpus.artifact_name, model_id), n=0)]

    def damage(self, planned: Planned) -> str | None:
        return None if (planned.directory / "metrics.json").is_file() else "not built"

    def jobs(self, planned, env, threads, splits, snapshots, problem) -> list[Job]:
        if problem is None:
            return []
        run = partial(build, planned.corpus_arg, str(planned.directory), planned.model_id, env, splits)
        work = Work("build", float(planned.corpus.split("train").size), "unigram")
        return [Job(f"build:{planned.label}", run, work, planned)]

    def describe(self, planned: Planned) -> dict:
        return dict.fromkeys(["arch", "layers", "width", "dropout", "seed", "params", "budget row", "train chars"])

    def index_row(self, metrics: dict, directory: Path) -> dict:
        recipe = config_hash({"unigram": "add-one", "corpus_key": metrics["corpus_key"]})
        return {"family": self.name, "kind": self.name, "arch": self.name, "group_id": metrics["model_id"],
                "recipe": recipe, "snapshots": 0}  # fmt: skip

    def predictions(self, row, corpus, split, snapshot, repair, progress) -> Path:
        path = predictions_path(Path(row["dir"]), split, "model")
        return path if path.is_file() else write_predictions(corpus, row["model_id"], Path(row["dir"]), split)

    def owns(self, folder, metrics, payload_kind) -> bool:
        return metrics.get("kind") == "unigram"


UNIGRAM = Unigram()

PREDICTION_ANALYSES = ["cross_entropy", "ngram", "ablations", "error_overlap", "char_advantage", "brace_distance",
                       "onion", "model_agreement", "training_dynamics", "ladder"]  # fmt: skip


def test_these_are_every_analysis_that_reads_predictions():
    import importlib

    from charlm.plan import load_profile

    every = load_profile("smoke-all").analyses  # every analysis there is (test_pipeline checks that)
    reads = [a for a in every if importlib.import_module(f"analyses.{a}").ANALYSIS.needs.predictions]
    assert sorted(reads) == sorted(PREDICTION_ANALYSES)


@pytest.mark.slow
@pytest.mark.skipif(not kenlm_available(), reason="the analyses read KenLM baselines")
def test_a_kind_added_in_one_file_runs_through_every_predictions_analysis(tmp_path, monkeypatch, small_text_file):
    from charlm.plan import load_profile
    from reports.pipeline import RunOptions, run

    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    monkeypatch.setattr(kinds, "KINDS", [*kinds.KINDS, UNIGRAM])  # the kind's one registry line
    profile = dataclasses.replace(load_profile("smoke-all"), analyses=PREDICTION_ANALYSES)
    options = RunOptions(profile, corpora_override=[str(small_text_file)], build_root=tmp_path / "build")
    run(options)  # raises ReportIncomplete if any section failed

    data = tmp_path / "build" / "smoke-all" / "data"
    models = pd.read_csv(data / "models.csv")
    (unigram_id,) = models.loc[models["kind"] == "unigram", "model_id"]
    corpus = corpora.load(str(small_text_file))
    logp, test = distribution(corpus), corpus.split("test")
    expected_ce = -logp[test[1:]].mean()

    baselines = pd.read_csv(data / "ngram.csv").set_index("model_id")
    assert baselines.loc[unigram_id, "family"] == "unigram" and baselines.loc[unigram_id, "n"] == 0
    assert baselines.loc[unigram_id, "ce_nats"] == pytest.approx(expected_ce, abs=1e-5)  # float32 target log-probs

    # model agreement: the unigram's most likely character is the train split's most common one, everywhere
    pairs = pd.read_csv(data / "model_agreement.csv")
    mine = pairs[(pairs["model_id"] == unigram_id) & (pairs["other_id"] != unigram_id)]
    networks = models[models["family"] == "neural"]
    assert set(networks["model_id"]) <= set(mine["other_id"])
    positions = preds_module.sample_positions(test.size - 1)
    for _, net in networks.iterrows():
        folder = tmp_path / "artifacts" / corpus.artifact_name / net["model_id"]
        theirs = preds_module.load(predictions_path(folder, "test"))
        agreement = np.mean(theirs.argmax_at(positions) == int(np.argmax(logp)))
        assert mine.set_index("other_id").loc[net["model_id"], "agreement"] == pytest.approx(agreement)
    page = (tmp_path / "build" / "smoke-all" / "index.html").read_text()
    assert "add-one unigram" in page  # named by its kind in the sections that show it
