"""Bench: one record per architecture, positive finite speeds and ratios; the CLI writes them as JSON."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from conftest import REPO, cli_env

from charlm import ARCHS, bench
from charlm.bench import bench_cells
from corpora.errors import UserError, run_cli

KEYS = {"arch", "chars_per_s", "ratio_to_fused"}


def _check(records, archs):
    assert [r["arch"] for r in records] == list(archs)
    for r in records:
        assert KEYS <= set(r)
        for key in ("chars_per_s", "fused_chars_per_s", "ratio_to_fused"):
            assert isinstance(r[key], float) and math.isfinite(r[key]) and r[key] > 0, (r["arch"], key, r[key])


def test_bench_cells_one_record_per_arch():
    records = bench_cells(size=8, batch=4, unroll=8, steps=2, vocab=11)
    _check(records, ARCHS)
    for r in records:
        assert (r["size"], r["batch"], r["unroll"], r["steps"], r["layers"]) == (8, 4, 8, 2, 1)
    assert {r["arch"]: r["fused_reference"] for r in records}["gru"] == "gru"


def test_bench_unknown_arch_is_a_user_error():
    with pytest.raises(UserError):
        bench_cells(archs=["lstm", "transformer"], size=8, batch=2, unroll=4, steps=1, vocab=5)


def test_bench_cli_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "charlm.bench",
            "--json",
            str(out),
            "--no-baselines",
            "--size",
            "16",
            "--steps",
            "1",
            "--scoring-chars",
            "300",
        ],  # fmt: skip
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    records = json.loads(out.read_text())
    assert isinstance(records, list)
    scoring = [r for r in records if r.get("bench") == "scoring"]
    _check([r for r in records if "bench" not in r], ARCHS)
    paper_gru = [r for r in records if r.get("bench") == "gru-paper-scan"]
    assert [(r["layers"], r["size"]) for r in paper_gru] == list(bench.PAPER_GRU_SHAPES)
    assert all(r["scan_chars_per_s"] > 0 and r["loop_chars_per_s"] > 0 and r["speedup"] > 0 for r in paper_gru)
    assert [r["arch"] for r in scoring] == list(ARCHS)
    assert all(r["chars"] == 300 and r["one_stream_chars_per_s"] > 0 and r["parallel_chars_per_s"] > 0 for r in scoring)
    assert all(r["size"] == 16 and r["steps"] == 1 for r in records if "bench" not in r)
    for arch in ARCHS:
        assert arch in proc.stdout


def test_bench_cli_bad_arch(tmp_path, capsys):
    code = run_cli(
        bench.main,
        ["--archs", "nope,lstm", "--no-baselines", "--size", "8", "--steps", "1", "--json", str(tmp_path / "b.json")],
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "unknown architecture" in err[0], err
    assert not (tmp_path / "b.json").exists()


def test_a_scans_profile_times_the_step_without_its_recurrence_and_restores_it():
    """`make bench` explains a scan below 3x by the step's other work: the third timer runs the same step with every
    cell's LinearScan swapped for what feeds it, and only while it runs."""
    from charlm.layers import ablated, minrnn, scan

    seen = []
    run = bench._without_recurrence(lambda: seen.append((minrnn.LinearScan, ablated.LinearScan)) or 0.0)
    assert run() == 0.0 and seen == [(bench._NoRecurrence, bench._NoRecurrence)]
    assert minrnn.LinearScan is scan.LinearScan and ablated.LinearScan is scan.LinearScan
    (train, score) = bench.bench_scans(["mingru"], budget=8, steps=1, batch=2, unroll=5, score_batch=2, score_unroll=5)
    assert train["mode"] == "train" and train["rest_ms"] > 0 and train["bound"] == train["loop_ms"] / train["rest_ms"]
