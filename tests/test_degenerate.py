"""Every analysis survives degenerate input (issue 23, item 2): it returns a table whose views all work, or says in
one line why it cannot (MissingInput), never a traceback.

Each case below is one artifacts tree, built once per module: untrained tiny models of every architecture that get
every character wrong, or none; models (and baselines) with identical errors; one model alone; a corpus of digits
(no words, braces, quotes or newlines); a split shorter than the analyses' windows. Every analysis runs on each, as
the report pipeline runs it: compute, plot, the table read back from its CSV, then caption, summary, notes and the
report's table and HTML.
"""

from __future__ import annotations

import json
import random

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from conftest import fake_neural_model, fake_ngram_model, fake_nnn_model, logp_rows, make_text

import corpora
from analyses import common
from analyses.base import Result
from analyses.context import Context, MissingInput, model_index
from charlm.model import ARCHS, matched_size
from charlm.plan import load_profile
from corpora import atomic
from reports.sections import computed_section

ANALYSES = sorted(load_profile("smoke-all").analyses)  # every analysis of the suite (test_pipeline checks it is)
BUDGET = 4  # every neural model is sized to this tiny budget row (the ladder reads one row)
NGRAM_N = (*range(1, 10), 20)  # every KenLM order an analysis reads (onion, training_dynamics: 1..9; 20)
NNN_N = tuple(range(1, 7))
# fmt: off
SMALL = {  # settings that keep each analysis to a second or so; the rest are the defaults
    "cross_entropy": {"resamples": 10},
    "ablations": {"resamples": 10},
    "ngram": {"resamples": 10},
    "brace_distance": {"resamples": 50},
    "ladder": {"budget": BUDGET, "resamples": 10, "min_braces": 5, "excerpt_chars": 40},
    "samples": {"length": 80, "show": 40},
    "saturation": {"start": 10, "length": 300, "warmup": 10},
    "weighted_sum": {"start": 20, "length": 300, "warmup": 20, "check_length": 100, "window": 25, "lags": 10,
                     "sentence_length": 12},
    "vanishing": {"max_lag": 20, "windows": 2, "warmup": 5, "snapshots": 1},
    "cells": {"windows": 8, "window": 60, "warmup": 20, "extra_windows": 2, "train_stride": 1, "cv": 2, "cs": [1.0],
              "alphas": [1.0], "viewer_cells": 2,
              "features": ["line_position", "in_comment", "brace_depth"]},  # the digits have no comment, no brace
    "pooling": {"classes": 2, "span": 10, "lengths": [24], "positions": ["mid"], "train_sizes": [16], "val_size": 8,
                "test_size": 8, "hidden": 4, "epochs": 1, "patience": 1, "pools": ["last", "max"],
                "max_examples": 32, "nwi_examples": 4, "nwi_window": 4},
}
# fmt: on


# ------------------------------------------------------------------------------------------ the cases


def code_text(n_bytes: int, seed: int = 0) -> bytes:
    """Words with C around them: braces (nested), strings and comments, so every analysis has something to read."""
    rng = random.Random(seed)
    words = make_text(n_bytes, seed=seed).decode().split()
    out, k = [], 0
    while sum(map(len, out)) < n_bytes:
        w = words[k % len(words)]
        k += 1
        out.append(rng.choice([f"int {w}(void) {{ return {w}; }}\n", f'  s = "{w}"; /* {w} */\n', f"{w} ",
                               f"if ({w}) {{ {w}++; {{ x; }} }}\n"]))  # fmt: skip
    return "".join(out).encode()[:n_bytes]


def digits_text(n_bytes: int, seed: int = 0) -> bytes:
    """No words, braces, quotes or newlines: digits only."""
    rng = np.random.default_rng(seed)
    return bytes(rng.integers(ord("0"), ord("9") + 1, n_bytes).astype(np.uint8))


def _epochs(n: int) -> list[dict]:
    return [{"epoch": e + 1.0, "step": 10 * (e + 1), "chars": 1000 * (e + 1), "lr": 2e-3, "train_loss": 3.0 - 0.1 * e,
             "val_loss": 3.0 - 0.1 * e} for e in range(n)]  # fmt: skip


def _with_curve(folder, epochs: int) -> None:
    """Give a fake model a training curve of `epochs` validation points (fake_neural_model writes none)."""
    metrics = json.loads((folder / "metrics.json").read_text())
    atomic.write_json(folder / "metrics.json", metrics | {"epochs": _epochs(epochs)})


def _build(case: str, root) -> None:
    """One case's corpus and models under the current $CHARLM_ARTIFACTS (`root` holds the corpus file)."""
    text = {
        "all_errors": lambda: code_text(8000),
        "no_errors": lambda: code_text(8000),
        "identical": lambda: code_text(8000),
        "one_model": lambda: code_text(8000),
        "digits": lambda: digits_text(8000),
        "short_split": lambda: code_text(300),
    }[case]()
    path = root / "linux.txt"  # named as the Linux corpus, so brace_distance's corpus check lets it in
    path.write_bytes(text)
    corpus = corpora.load(str(path))
    T, V = corpus.split("test").size - 1, corpus.vocab_size
    rng = np.random.default_rng(0)
    mixed = np.where(rng.random(T) < 0.5, 3.0, 0.1)  # errors (p(correct) = 0.05) at about half the positions
    nll = {"all_errors": np.full(T, 30.0), "no_errors": np.zeros(T)}.get(case, mixed)
    if case == "one_model":
        _with_curve(fake_neural_model(corpus, nll=nll, arch="lstm", size=matched_size("lstm", BUDGET, V)), 1)
        return
    archs = ARCHS if case == "all_errors" else ("lstm", "gru", "rnn", "cbow")
    rows = logp_rows(corpus.split("test")[1:], nll, V)
    for k, arch in enumerate(archs):
        snapshots = [(1, rows), (2, rows)] if arch in ("lstm", "gru") else None
        folder = fake_neural_model(
            corpus, logp=rows, arch=arch, size=matched_size(arch, BUDGET, V), snapshots=snapshots
        )
        _with_curve(folder, 0 if case == "digits" else k % 4)  # none, shorter than the convergence window, longer
    # "identical": the models' errors are one set; the n-gram's lie inside it and the n-NN makes none (the Venn
    # diagram's nested and empty circles)
    ngram_nll = np.where((nll > 1) & (rng.random(T) < 0.5), 3.0, 0.1) if case == "identical" else nll
    nnn_nll = np.zeros(T) if case == "identical" else nll
    for n in NGRAM_N:
        fake_ngram_model(corpus, n, nll=ngram_nll)
    for n in NNN_N:
        fake_nnn_model(corpus, n, nll=nnn_nll)


CASES = ("all_errors", "no_errors", "identical", "one_model", "digits", "short_split")


@pytest.fixture(scope="module", params=CASES)
def case(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CHARLM_ARTIFACTS", str(root / "artifacts"))
        _build(request.param, root)
    return request.param, root / "artifacts"


# ------------------------------------------------------------------------------------------ the test


def _one_line(text: str) -> bool:
    return bool(text.strip()) and "\n" not in text.strip()


@pytest.mark.parametrize("name", ANALYSES)
def test_every_analysis_returns_a_table_or_one_line_on_degenerate_models(case, name, monkeypatch, tmp_path):
    label, artifacts = case
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(artifacts))
    analysis = common.load_analysis(name)
    ctx = Context(model_index(artifacts), common.settings(analysis, None, SMALL.get(name, {})), say=lambda _: None)
    try:
        result = common.run_analysis(analysis, ctx)
    except MissingInput as err:
        assert _one_line(str(err)), f"{name} on {label}: not one line: {err!r}"
        return
    assert isinstance(result.table, pd.DataFrame) and not result.table.empty, f"{name} on {label}: an empty table"
    result.save(tmp_path, name)
    back = Result.load(tmp_path, name)  # what the report's section reads when the analysis is cached
    figure = analysis.plot(back)
    if figure is not None:
        common.save_figure(figure, tmp_path / f"{name}.png")
    plt.close("all")
    section = computed_section(analysis, back, None)
    assert section.title and all(isinstance(f, str) and f.strip() for f in section.findings)
