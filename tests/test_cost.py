"""What a profile costs before it runs (charlm.cost): the arithmetic on a fake calibration, the schedule, the
countdown of the progress line, the calibration cache per machine, the epochs horizon, and `--plan`."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from conftest import make_text

import corpora
from analyses import common
from charlm import cost, predictions
from charlm.model import count_params
from charlm.plan import available, load_profile, plan
from reports.pipeline import _jobs

MACHINE = {"cpu": "Test CPU 9000", "cores": 2, "torch": "2.13.0+cpu", "device": "cpu"}
FAKE_NEURAL = {"train_cps": 1000.0, "eval_cps": 500.0, "forward_cps": 999.0, "row_s": 0.001,
               "checkpoint_overhead_bytes": 100}  # fmt: skip


@pytest.fixture
def text_10k(tmp_path):
    """10,000 bytes: the 80/10/10 splits have 8,000, 1,000 and 1,000 characters."""
    path = tmp_path / "ten.txt"
    path.write_bytes(make_text(20_000, seed=3)[:10_000])
    assert corpora.load(str(path)).split("train").size == 8000
    return path


def one_lstm_profile(**train):
    """The smoke profile cut to one 1-layer LSTM, no baselines, no analyses."""
    base = load_profile("smoke")
    settings = {"max_chars": 4000, "batch_size": 4, "unroll": 20, "snapshots": 2, "eval_chars": None, **train}
    return dataclasses.replace(
        base, grid=[{"types": ["lstm"], "layers": [1], "budgets": [8]}], ablations={}, baselines={}, analyses=[],
        analysis={}, train=settings,
    )  # fmt: skip


def fake_calibration(tmp_path, **entries) -> cost.Calibration:
    cal = cost.Calibration(tmp_path / "calibration.json", MACHINE)
    cal.entries.update(entries)
    return cal


def neural_entry(model) -> str:
    c = model.config
    return cost.neural_key(c.arch, c.layers, c.size, model.corpus.vocab_size, c.batch_size, c.unroll, c.fused, 1)


def test_the_seconds_and_disk_of_a_budgeted_network_are_its_work_over_the_calibrated_throughput(
    tmp_path, artifacts, text_10k
):
    profile = one_lstm_profile()
    (model,) = plan(profile, [str(text_10k)])[1]
    cal = fake_calibration(tmp_path, **{neural_entry(model): FAKE_NEURAL})
    est = cost.estimate(profile, [model], workers=1, threads=1, snapshots=True, calibration=cal, say=lambda _: None)
    (c,) = est.costs
    # 8,000 train chars in 4 streams of 20 steps: 99 minibatches of 80 chars per epoch; 4,000 chars = 50 minibatches
    assert c.status == "train" and c.chars == 4000 and c.horizon == "character budget"
    assert c.epochs == pytest.approx(50 / 99)
    assert c.seconds["training"] == pytest.approx(4000 / 1000)
    assert c.seconds["validation"] == pytest.approx(1000 / 500)  # one pass over the 1,000 val chars, at the end
    # 999 test positions: one stream (fewer than 2,000 positions), 999 stream-steps at 999/s plus 999 rows at 1 ms,
    # for the final checkpoint and for each of the 2 snapshots (steps 1 and 50; here every row is in the sample)
    assert c.seconds["predictions"] == pytest.approx(3 * (1.0 + 0.999))
    assert est.wall_s == pytest.approx(c.total_s + est.render_s)  # one job, no analysis
    params = count_params(model.config.model_config(model.corpus.vocab_size))
    V = model.corpus.vocab_size
    checkpoints = 5 * (4 * params + 100)  # best, 2 snapshots, state.pt (twice the weights)
    assert c.disk == checkpoints + cost.predictions_bytes(999, V) + 2 * cost.predictions_bytes(999, V, 999)


def test_the_predictions_disk_formula_matches_a_real_file(tmp_path):
    rng = np.random.default_rng(0)
    T, V = 30_000, 87
    logp = np.log(rng.dirichlet(np.ones(V), size=T)).astype(np.float32)
    targets = rng.integers(0, V, T)
    full = predictions.save(tmp_path / "full.npz", predictions.from_logprobs(logp, targets, "m", "d"))
    sample = predictions.sample_positions(T)
    part = predictions.from_logprobs(logp, targets, "m", "d", positions=sample)
    sampled = predictions.save(tmp_path / "sample.npz", part)
    assert full.stat().st_size == pytest.approx(cost.predictions_bytes(T, V), rel=0.01)
    assert sampled.stat().st_size == pytest.approx(cost.predictions_bytes(T, V, len(sample)), rel=0.01)


def test_an_epoch_based_network_trains_the_epochs_comparable_finished_runs_took(tmp_path, artifacts, text_10k):
    profile = one_lstm_profile(max_chars=None, epochs=10, patience=2)
    (model,) = plan(profile, [str(text_10k)])[1]
    cal = fake_calibration(tmp_path, **{neural_entry(model): FAKE_NEURAL})
    quiet = {"workers": 1, "threads": 1, "calibration": cal, "say": lambda _: None}
    capped = cost.estimate(profile, [model], **quiet).costs[0]
    assert capped.epochs == 10 and "epoch cap" in capped.horizon and capped.chars == 10 * 99 * 80

    def finished(name, epochs, **rule):  # a finished run of another width, same stopping rule unless `rule` says
        config = {**dataclasses.asdict(model.config), "size": 99, **rule}
        records = [{"epoch": float(e), "val_loss": 1.0} for e in range(1, epochs + 1)]
        folder = artifacts / "other" / name
        folder.mkdir(parents=True)
        metrics = {"kind": "charlm", "complete": True, "corpus_key": model.corpus.key, "train_config": config,
                   "epochs": records, "model_id": name}  # fmt: skip
        (folder / "metrics.json").write_text(json.dumps(metrics))
        return folder

    finished("a", 4)
    finished("b", 6)
    finished("c", 7)
    finished("d", 1, patience=9)  # another stopping rule: not comparable
    c = cost.estimate(profile, [model], **quiet).costs[0]
    assert c.epochs == 6 and "median of 3 finished runs" in c.horizon
    assert c.chars == 6 * 99 * 80 and c.seconds["training"] == pytest.approx(6 * 99 * 80 / 1000)
    assert c.seconds["validation"] == pytest.approx(6 * 1000 / 500)  # one validation per epoch
    shipped = tmp_path / "models" / "smoke" / "corpus" / "c"  # "c" shipped too, and installed: counted once
    shipped.parent.mkdir(parents=True)
    finished("c-copy", 7).rename(shipped)
    (shipped / "metrics.json").write_text((artifacts / "other" / "c" / "metrics.json").read_text())
    assert len(cost.finished_runs("smoke", shipped_root=tmp_path / "models")) == 4


def test_a_cached_model_costs_nothing_and_a_resumed_one_only_what_is_left(tmp_path, artifacts, text_10k):
    profile = one_lstm_profile()
    (model,) = plan(profile, [str(text_10k)])[1]
    cal = fake_calibration(tmp_path, **{neural_entry(model): FAKE_NEURAL})
    quiet = {"workers": 1, "threads": 1, "snapshots": False, "calibration": cal, "say": lambda _: None}
    model.directory.mkdir(parents=True)
    (model.directory / "metrics.json").write_text(json.dumps({"complete": False, "chars_trained": 1600}))
    resumed = cost.estimate(profile, [model], **quiet).costs[0]
    assert resumed.status == "resume" and resumed.chars == 4000 - 1600
    assert resumed.seconds["training"] == pytest.approx(2.4)

    problems = {model.model_id: None}  # finished, its predictions there
    predictions_file = model.directory / "predictions" / "checkpoint" / "test.npz"
    predictions_file.parent.mkdir(parents=True)
    predictions_file.write_bytes(b"x")
    (model.directory / "metrics.json").write_text(json.dumps({"complete": True, "snapshots": []}))
    done = cost.estimate(profile, [model], problems=problems, **quiet)
    assert done.costs[0].total_s == 0 and done.costs[0].disk == 0 and done.wall_s == done.render_s
    predictions_file.unlink()  # finished, but its predictions are missing: the pipeline scores it
    score = cost.estimate(profile, [model], problems=problems, **quiet).costs[0]
    assert score.status == "cached, to score" and score.seconds == {"predictions": pytest.approx(1.999)}


def test_make_report_does_not_calibrate_for_a_run_of_seconds(tmp_path, artifacts, text_10k, monkeypatch):
    def must_not_run(*args, **kwargs):
        raise AssertionError("calibrated a run of 4,000 characters")

    monkeypatch.setattr(cost, "measure_neural", must_not_run)
    profile = one_lstm_profile()
    (model,) = plan(profile, [str(text_10k)])[1]
    cal = fake_calibration(tmp_path)
    est = cost.estimate(profile, [model], workers=1, threads=1, calibration=cal, say=lambda _: None)
    assert est.costs[0].status == cost.UNCALIBRATED and est.costs[0].total_s == 0
    assert any("not calibrated for them" in line for line in est.summary())
    bigger = one_lstm_profile(max_chars=2_000_000)
    (model,) = plan(bigger, [str(text_10k)])[1]  # 2M characters: 250 epochs capped at 50 x 8,000 = 400,000
    assert cost.planned_chars([model], {model.model_id: "not built"}) == 50 * 8000


def test_jobs_are_scheduled_in_the_pipelines_order_onto_the_first_free_worker(tmp_path, artifacts, text_10k):
    assert cost.makespan([5, 3, 3, 2], 2) == 7  # 5 | 3 + 3, then 2 joins the 5
    assert cost.makespan([5, 3, 3, 2], 1) == 13
    assert cost.makespan([], 2) == 0
    profile = dataclasses.replace(load_profile("smoke"), analyses=["cross_entropy"], analysis={})
    models = plan(profile, [str(text_10k)])[1]
    problems = {m.model_id: "not built" for m in models}
    jobs = _jobs(profile, models, problems, {}, 1)
    costs = {m.model_id: cost.ModelCost(m.model_id, m.kind, "c", "train", seconds={"x": 1.0}) for m in models}
    ids = {cost._planned_identity(m): m.model_id for m in models}
    assert cost.job_order(models, costs) == [ids[cost.job_identity(job)] for job in jobs]
    assert {m.kind for m in models} == {"neural", "ngram", "nnn"}


def test_the_countdown_says_the_time_left_across_all_jobs():
    clock = cost.Countdown([10, 10, 10], workers=2, now=0)
    assert clock.left(now=0) == 20  # two run at once, the third after them
    assert clock.left(now=5) == 15
    clock.done(0, now=20)  # took twice its estimate: the others will too
    assert clock.speed() == 2
    assert clock.left(now=20) == 20  # job 1 should end now; job 2 starts now and takes 2 x 10
    clock.done(1, now=20)
    clock.done(2, now=40)
    assert clock.left(now=40) == 0
    assert "left in all jobs" in clock.postfix(now=40)


def test_calibrations_are_cached_per_machine_and_redone_on_request(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls = []

    def measure():
        calls.append(1)
        return {"train_cps": 123.0}

    first = cost.Calibration(machine_info=MACHINE)
    assert first.path == tmp_path / "cache" / "charlm" / f"calibration-{cost.machine_key(MACHINE)}.json"
    assert first.get("k", measure)["train_cps"] == 123 and len(calls) == 1
    again = cost.Calibration(machine_info=MACHINE)
    assert again.get("k", measure)["train_cps"] == 123 and len(calls) == 1  # read from the cache
    recorded = json.loads(first.path.read_text())
    assert recorded["machine"] == MACHINE and "load_average" in recorded["entries"]["k"]
    other = cost.Calibration(machine_info={**MACHINE, "cores": 16})  # another machine: its own file
    assert other.path != first.path and other.get("k") is None
    other.get("k", measure)
    assert len(calls) == 2
    for torch_version in ("2.13.0+cpu", "2.14.0+cpu"):
        assert (cost.machine_key({**MACHINE, "torch": torch_version}) == cost.machine_key(MACHINE)) == (
            torch_version == MACHINE["torch"]
        )
    redo = cost.Calibration(machine_info=MACHINE, redo=True)
    redo.get("k", measure)
    redo.get("k", measure)  # redone once, then cached
    assert len(calls) == 3


def test_distinct_ngrams_are_counted_exactly():
    ids = np.array([0, 1, 0, 1, 0, 2], dtype=np.uint8)
    assert cost.distinct_ngrams(ids, 3) == [3, 3, 3]  # {0,1,2}; {01,10,02}; {010,101,102}
    text = np.frombuffer(make_text(3000, seed=2), dtype=np.uint8)
    for k in (1, 2, 5):
        windows = {text[t : t + k].tobytes() for t in range(text.size - k + 1)}
        assert cost.distinct_ngrams(text, k)[-1] == len(windows)


def test_a_real_calibration_of_a_tiny_network_is_quick_and_finite(monkeypatch):
    monkeypatch.setattr(cost, "MEASURE_S", 0.02)
    m = cost.measure_neural("gru", 1, 8, 20, 4, 10, True, 1)
    assert all(math.isfinite(v) and v >= 0 for v in m.values())
    assert m["train_cps"] > 0 and m["forward_cps"] > 0


@pytest.fixture
def fake_measurements(tmp_path, monkeypatch):
    """Every measurement faked (no calibration runs), the cache in the test's folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(cost, "machine", lambda: MACHINE)
    monkeypatch.setattr(cost, "measure_neural", lambda *a, **k: dict(FAKE_NEURAL))
    nnn = {"train_cps": 2000.0, "setup_s_per_position": 0.0, "eval_pps": 1e4, "predict_pps": 1e4}
    monkeypatch.setattr(cost, "measure_nnn", lambda *a, **k: dict(nnn))
    kenlm = {"build_start_s": 0.5, "build_s_per_ngram": 1e-5, "bytes_per_ngram": 24.0, "lookup_s": 1e-6,
             "states_per_position": 0.5}  # fmt: skip
    monkeypatch.setattr(cost, "measure_kenlm", lambda *a, **k: dict(kenlm))
    monkeypatch.setattr(cost, "measure_counts", lambda train, top: {"counts": [1e4 * o for o in range(1, top + 1)]})


@pytest.mark.parametrize("name", available())
def test_every_profile_gets_seconds_and_disk_for_each_model_and_a_wall_time(name, artifacts, fake_measurements):
    profile = load_profile(name)
    models = plan(profile, None, common.orders_read(profile.analyses))[1]
    est = cost.estimate(profile, models, workers=2, snapshots=True, calibrate=True, say=lambda _: None)
    for model, c in zip(models, est.costs, strict=True):
        assert c.total_s > 0 and c.disk > 0, (model.model_id, c)
        assert ("training" in c.seconds) == (c.status == "train" and model.kind == "neural")
        assert c.status == ("shipped, to score" if model.shipped else "train")
    assert est.wall_s > est.models_wall_s >= max(c.total_s for c in est.costs)
    assert est.wall_s < sum(c.total_s for c in est.costs) + sum(s for _, s in est.analyses) + est.render_s
    summary = "\n".join(est.summary())
    assert "wall time about" in summary and ("wants a GPU" in summary) == profile.wants_gpu


def test_the_plan_prices_analyses_by_this_machines_last_run_of_the_profile(artifacts, fake_measurements):
    profile = load_profile("smoke-all")
    models = plan(profile, None, common.orders_read(profile.analyses))[1]
    first = cost.estimate(profile, models, workers=2, threads=1, calibrate=True, say=lambda _: None)
    assert dict(first.analyses)["cells"] == cost.ANALYSIS_SECONDS["cells"]  # nothing run here yet
    assert first.render_s == cost.RENDER_SECONDS and "quick profile's cold run" in first.summary()[0]
    cost.record_report_seconds(first.calibration, profile.name, 1, {"cells": 123.4, "render": 7.0})
    cost.record_report_seconds(first.calibration, profile.name, 2, {"pooling": 999.0})  # other threads: not ours
    cost.record_report_seconds(first.calibration, "quick", 1, {"vanishing": 999.0})  # another profile
    again = cost.estimate(profile, models, workers=2, threads=1, calibrate=True, say=lambda _: None)
    seconds = dict(again.analyses)
    assert seconds["cells"] == 123.4 and again.render_s == 7.0
    assert seconds["pooling"] == cost.ANALYSIS_SECONDS["pooling"]
    assert seconds["vanishing"] == cost.ANALYSIS_SECONDS["vanishing"]
    assert f"1 of {len(profile.analyses)} as this machine last measured them" in again.summary()[0]
    assert again.analyses_wall_s > first.analyses_wall_s  # cells went from 30 s to 123.4 s
    # submitted longest first: cells (last but two in the profile) starts at once instead of near the end
    assert again.analysis_order()[0] == "cells"
    in_profile_order = cost.makespan((seconds[a] for a in profile.analyses), 2)
    assert again.analyses_wall_s == cost.makespan(sorted(seconds.values(), reverse=True), 2) < in_profile_order
    reread = cost.Calibration(machine_info=cost.machine())  # written at once, with when and under which load
    entry = reread.entries[cost.analysis_key(profile.name, "cells", 1)]
    assert entry["seconds"] == 123.4 and "measured_at" in entry and "load_average" in entry


def test_a_finished_model_shows_what_its_training_took_next_to_the_estimate(
    tmp_path, artifacts, text_10k, fake_measurements
):
    """Issue 22: `--plan` says what each finished model took (recorded), here and in models/, so the estimate can
    be read against it: a cached model's metrics, a shipped one's manifest (CPU seconds included)."""
    profile = one_lstm_profile()
    (model,) = plan(profile, [str(text_10k)])[1]
    quiet = {"workers": 2, "threads": 1, "snapshots": False, "say": lambda _: None, "calibrate": True}
    assert cost.estimate(profile, [model], **quiet).costs[0].trained_s is None  # nothing finished: nothing measured
    model.directory.mkdir(parents=True)
    (model.directory / "metrics.json").write_text(json.dumps({"complete": True, "snapshots": [], "seconds": 12.5}))
    est = cost.estimate(profile, [model], problems={model.model_id: None}, **quiet)
    assert (est.costs[0].trained_s, est.costs[0].cpu_s) == (12.5, None)
    assert model.row(est.costs[0])["trained s"] == 12 and "training took 12 s of one worker" in "\n".join(est.summary())

    reference = load_profile("reference")
    shipped = [m for m in plan(reference, None)[1] if m.shipped and m.kind == "neural"]
    est = cost.estimate(reference, shipped, retrain=True, **quiet)  # retrained: estimated, and measured beside it
    for m, c in zip(shipped, est.costs, strict=True):
        manifest = json.loads((cost.shipped_folder("reference", m.corpus.artifact_name, m.model_id)
                               / "manifest.json").read_text())  # fmt: skip
        assert c.status == "train" and c.total_s > 0
        assert c.trained_s == manifest["training_seconds"] and c.cpu_s == manifest.get("cpu_seconds")
    assert any(c.cpu_s is not None for c in est.costs)


def test_plan_prints_each_models_cost_and_the_total(tmp_path, monkeypatch, capsys, small_text_file, fake_measurements):
    """`python -m reports --plan` on the smoke profile, every throughput faked: the table has the estimate columns
    and the totals say the wall time for the workers asked for."""
    from reports.__main__ import main

    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    assert main(["--profile", "smoke", "--corpus", str(small_text_file), "--plan", "--workers", "3"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "est. seconds" in line)
    assert all(column in header for column in ("train chars", "epochs", "status", "disk MB", "trained s", "CPU s"))
    assert "on 3 worker(s)" in out and "wall time about" in out and "GB of new artifacts" in out
    assert "calibrated on Test CPU 9000" in out
    assert not (tmp_path / "artifacts").exists()  # a plan trains nothing


def test_a_kernel_of_our_own_is_calibrated_apart_from_what_trained_before_it():
    """The papers' GRU's scan replaced autograd through its cell: a calibration cached before must not price it."""
    args = (2, 100, 99, 16, 100)
    before = "neural arch=gru-paper layers=2 size=100 vocab=99 batch=16 unroll=100 fused=1 threads=1"
    assert cost.neural_key("gru-paper", *args, True, 1) == f"{before} kernel=PaperGRUScan"
    assert cost.neural_key("gru-paper", *args, False, 1) == before.replace("fused=1", "fused=0")  # the trace
    assert "kernel" not in cost.neural_key("lstm", *args, True, 1)  # torch's kernels: keyed by the machine
