"""The estimate (issue 35): jobs priced from a recorded run, scaled to this machine, scheduled as the pipeline runs
them; the countdown that never says "0 s left" while work remains. Answers known by construction."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from charlm import estimate as est
from charlm import schedule as sched
from charlm.kinds.base import Job, Work


def job(key, seconds=0.0, after=(), work=None):
    j = Job(key, run=lambda: None, work=work, after=tuple(after))
    j.seconds = seconds
    return j


def test_schedule_runs_the_longest_remaining_path_first():
    # two workers: a (10) and b (5) start at once; c (4) waits for a: done at 14 (b's worker idles from 5)
    jobs = [job("b", 5), job("a", 10), job("c", 4, after=["a"])]
    assert sched.schedule(jobs, 2) == pytest.approx(14)
    assert sched.schedule(jobs, 1) == pytest.approx(19)  # one worker: the sum
    # longest path first: d (1) -> e (20) must start before f (15), else the wall time is 1 + 20 + ... later
    jobs = [job("f", 15), job("d", 1), job("e", 20, after=["d"])]
    assert sched.critical_paths(jobs)["d"] == pytest.approx(21)
    assert sched.schedule(jobs, 2) == pytest.approx(21)
    assert sched.schedule([job("x", 3, after=["not in this run"])], 1) == pytest.approx(3)  # done before


def record(profile="rec", bench=1.0, **jobs):
    return est.Record(profile, bench, jobs, {"cells": 100.0, "cells:m1": 40.0}, render_s=20.0, networks=10,
                      measured={"date": "2026-11-26"})  # fmt: skip


def test_the_pricing_rules_in_order(monkeypatch, tmp_path):
    monkeypatch.setattr(est, "PROFILES_DIR", tmp_path)
    rec = record(**{
        "score:c/lstm-a": {"seconds": 30.0, "what": "score", "units": 1000, "shape": "lstm L1 H8", "params": 100,
                           "bytes": 5000},
        "train:c/gru-b": {"seconds": 80.0, "what": "train", "units": 4000, "shape": "gru L1 H9", "params": 200,
                          "bytes": 7000},
    })  # fmt: skip
    rec.save(tmp_path / f"rec{est.RECORD_SUFFIX}")
    assert est.records("rec")[0] == rec
    pricer = est.Pricer.here("rec", bench_s=2.0)  # this machine takes twice the record machine's benchmark
    pricer.training = {"rnn L1 H5": [0.001]}
    assert pricer.speed == pytest.approx(2.0)
    seconds, disk, rule = pricer.price(job("score:c/lstm-a", work=Work("score", 1000, "lstm L1 H8", 100)))
    assert (seconds, disk, rule) == (pytest.approx(60.0), 5000, "recorded")
    seconds, disk, rule = pricer.price(job("score:d/lstm-a", work=Work("score", 3000, "lstm L1 H8", 100)))
    assert seconds == pytest.approx(180.0) and disk == pytest.approx(15000) and rule.startswith("scaled")
    seconds, _, rule = pricer.price(job("train:d/rnn", work=Work("train", 2000, "rnn L1 H5", 50)))
    assert seconds == pytest.approx(4.0) and rule.startswith("shipped")  # 0.001 s/char x 2000 x 2
    pricer.training_by_arch = {"rnn": [(1, 100, 2e-4)]}  # one other rnn shape shipped: per character and parameter
    seconds, _, rule = pricer.price(job("train:d/rnn2", work=Work("train", 2000, "rnn L2 H3", 50, 2)))
    assert seconds == pytest.approx(2e-6 * 2000 * 50 * 2) and rule.startswith("shipped rnn training of other shapes")
    pricer.training_by_arch = {"rnn": [(1, 100, 3e-4), (2, 100, 5e-4)]}  # 2e-4 per layer + 1e-6 per parameter
    seconds, _, rule = pricer.price(job("train:d/rnn3", work=Work("train", 2000, "rnn L3 H3", 50, 3)))
    assert seconds == pytest.approx((3 * 2e-4 + 1e-6 * 50) * 2000 * 2) and rule.endswith("per layer and parameter")
    seconds, disk, rule = pricer.price(job("train:d/lstm", work=Work("train", 2000, "lstm L2 H4", 400)))
    assert seconds == pytest.approx(80 / 4000 / 200 * 2000 * 400 * 2) and rule.startswith("by kind")
    assert disk == 7000  # a training folder's size does not grow with the characters trained
    seconds, disk, _ = pricer.price(job("train:d/gru-b", work=Work("train", 40000, "gru L1 H9", 200)))
    assert seconds == pytest.approx(80 * 10 * 2) and disk == 7000  # ten times the characters, the same folder
    assert pricer.price(job("build:d/ngram", work=Work("build", 10, "ngram n=3")))[2].startswith("unpriced")
    assert pricer.analysis("cells", 10) == (pytest.approx(200.0), "recorded")
    assert pricer.analysis("cells:m1", 10)[0] == pytest.approx(80.0)  # a part of an analysis, by its key
    seconds, rule = pricer.analysis("cells:m9", 10)  # a model no record has: the median recorded part
    assert seconds == pytest.approx(80.0) and rule == "the median recorded part of cells"
    assert pricer.analysis("onion", 10) == (0.0, "unpriced")
    other = est.Pricer.here("another", bench_s=1.0)  # another profile, reading 20 networks: twice the record's
    assert other.analysis("cells", 20) == (pytest.approx(200.0), "scaled from rec's")


def test_the_summary_says_when_nothing_or_part_is_priced(monkeypatch, tmp_path):
    monkeypatch.setattr(est, "PROFILES_DIR", tmp_path)
    jobs = [job("build:c/ngram", work=Work("build", 10, "ngram n=3"))]
    (line,) = est.estimate("empty", jobs, [job("analysis:cells")], 1, 2, bench_s=1.0).summary()
    assert line.startswith("estimate: none:") and "0 s" not in line
    record(**{"build:c/ngram": {"seconds": 12.0, "what": "build", "units": 10, "shape": "ngram n=3", "params": 0,
                                "bytes": 0}}).save(tmp_path / f"rec{est.RECORD_SUFFIX}")  # fmt: skip
    first = est.estimate("rec", jobs, [job("analysis:onion")], 1, 2, bench_s=1.0).summary()
    assert first[0].startswith("estimate: wall time at least 32 s") and "analysis:onion" in first[-1]
    whole = est.estimate("rec", jobs, [job("analysis:cells", after=["build:c/ngram"])], 1, 2, bench_s=1.0)
    assert whole.wall_s == pytest.approx(12 + 100 + 20)  # the n-gram, then the analysis that reads it, rendering
    assert whole.summary()[0].startswith("estimate: wall time about 2 min 12 s")


def test_a_warm_run_is_priced_as_an_upper_bound_and_says_why(monkeypatch, tmp_path):
    """Artifacts holding an earlier run's analysis results (a `git pull` then `make report`): each analysis is priced
    as if computed afresh, so the estimate says "at most" and why, instead of "about" a time the run will beat."""
    from analyses.context import CACHE_DIR, holds_results

    monkeypatch.setattr(est, "PROFILES_DIR", tmp_path)
    record(**{"build:c/ngram": {"seconds": 12.0, "what": "build", "units": 10, "shape": "ngram n=3", "params": 0,
                                "bytes": 0}}).save(tmp_path / f"rec{est.RECORD_SUFFIX}")  # fmt: skip
    artifacts = tmp_path / "artifacts"
    assert not holds_results(artifacts)  # a cold run
    (artifacts / CACHE_DIR / "cells").mkdir(parents=True)
    assert not holds_results(artifacts)  # an empty cache folder holds nothing
    (artifacts / CACHE_DIR / "cells" / "0123456789abcdef.npz").write_bytes(b"")
    assert holds_results(artifacts)

    def summary(warm: bool) -> list[str]:
        jobs = [job("build:c/ngram", work=Work("build", 10, "ngram n=3"))]
        return est.estimate("rec", jobs, [job("analysis:cells", after=["build:c/ngram"])], 1, 2, bench_s=1.0,
                            warm=warm).summary()  # fmt: skip

    cold, warm = summary(False), summary(True)
    assert cold[0].startswith("estimate: wall time about 2 min 12 s") and not any("earlier run" in s for s in cold)
    assert warm[0].startswith("estimate: wall time at most 2 min 12 s")
    assert "earlier run's analysis results" in warm[-1]
    # the analysis whose earlier result is good for this run (reports.sections.cached_analyses) is priced as its read,
    # its recorded part too: the run is the n-gram, the two reads (the part's beside the n-gram) and rendering
    jobs = [job("build:c/ngram", work=Work("build", 10, "ngram n=3"))]
    read = est.estimate("rec", jobs, [job("analysis:cells", after=["build:c/ngram"])], 1, 2, bench_s=1.0, warm=True,
                        cached={"cells"})  # fmt: skip
    assert read.wall_s == pytest.approx(12 + est.CACHED_S["analysis"] + 20)
    lines = read.summary()
    assert lines[0].startswith(f"estimate: wall time about {sched.duration(read.wall_s)}")
    assert "1 of the 1 analyses are read from an earlier run's results" in "\n".join(lines)
    assert not any("priced as if computed afresh" in line for line in lines)
    # the projection is of a cold run: what this run reads is computed there
    fresh = est.estimate("rec", [job("build:c/ngram", work=Work("build", 10, "ngram n=3"))],
                         [job("analysis:cells", after=["build:c/ngram"])], 1, 2, bench_s=1.0)  # fmt: skip
    assert read.projected_s == pytest.approx(fresh.projected_s) and fresh.projected_s > read.wall_s + 50

    # a part found in the cache (reports.sections.cached_parts: a warm run that adds models) is priced as its read,
    # its analysis as computed; the projection stays cold
    def with_part(**options):
        both = [job("part:cells:m1", after=["build:c/ngram"]), job("analysis:cells", after=["part:cells:m1"])]
        return est.estimate("rec", [job("build:c/ngram", work=Work("build", 10, "ngram n=3"))], both, 1, 2,
                            bench_s=1.0, **options)  # fmt: skip

    parts = with_part(warm=True, cached={"cells:m1"})
    assert parts.jobs[1].seconds == pytest.approx(est.CACHED_S["part"]) and parts.jobs[2].seconds > 1
    assert parts.cached == 0 and parts.cached_parts == 1
    lines = parts.summary()
    assert lines[0].startswith("estimate: wall time at most")  # its analysis may reuse more than its parts
    assert "1 of the 1 per-model parts are read from an earlier run's cache" in "\n".join(lines)
    assert parts.projected_s == pytest.approx(with_part().projected_s) and parts.projected_s > parts.wall_s + 30


def test_a_plan_that_cannot_list_an_analysis_s_parts_yet_prices_the_recorded_ones(monkeypatch, tmp_path):
    """`--plan` before the shipped models are installed lists no per-model part of cells: the recorded parts are
    priced beside it (a fresh machine's estimate was 5 minutes short); a plan that lists them gets nothing added,
    and the pipeline's own analysis job keeps its dependencies."""
    monkeypatch.setattr(est, "PROFILES_DIR", tmp_path)
    record().save(tmp_path / f"rec{est.RECORD_SUFFIX}")
    cells = job("analysis:cells", after=["score:x"])
    unlisted = est.estimate("rec", [], [cells], 10, 1, bench_s=1.0)
    assert [j.key for j in unlisted.jobs] == ["analysis:cells", "part:cells:m1"]
    assert sum(j.seconds for j in unlisted.jobs) == pytest.approx(140.0) and cells.after == ("score:x",)
    assert unlisted.jobs[1].after == ("score:x",) and "in 2 jobs" in unlisted.summary()[0]
    listed = est.estimate("rec", [], [job("part:cells:m1"), job("analysis:cells", after=["part:cells:m1"])], 10, 1,
                          bench_s=1.0)  # fmt: skip
    assert len(listed.jobs) == 2 and sum(j.seconds for j in listed.jobs) == pytest.approx(140.0)
    assert est.estimate("other", [], [job("analysis:cells")], 10, 1, bench_s=1.0).jobs[0].key == "analysis:cells"


def test_the_countdown_never_runs_out_while_a_job_runs():
    a, b = job("a", 100), job("b", 50, after=["a"])
    clock = sched.Countdown([a, b], workers=1)
    clock.started["a"] = 0.0
    assert clock.left(now=40.0) == pytest.approx(60 + 50)
    # past its estimate: the machine is slower than priced, so the rest is priced at that pace (at most 4x), and the
    # running job keeps a tenth of its own scaled estimate rather than 0 s
    assert clock.left(now=150.0) == pytest.approx(15 + 75)
    assert clock.left(now=500.0) == pytest.approx(40 + 200)
    clock.finished["a"] = 200.0  # it took twice its estimate: what is left is priced twice as long
    assert clock.left(now=200.0) == pytest.approx(100)


def test_jobs_that_found_their_work_cached_do_not_shorten_the_rest():
    """A warm run's cached parts finish at once: the analyses still to run keep their estimates."""
    parts = [job(f"part:{k}", 10) for k in range(5)]
    rest = job("analysis:samples", 60, after=[p.key for p in parts])
    clock = sched.Countdown([*parts, rest], workers=1)
    for p in parts:
        clock.started[p.key], clock.finished[p.key] = 0.0, 0.5
    assert clock.speed(now=1.0) == 1.0 and clock.left(now=1.0) == pytest.approx(60)
    clock.started[rest.key] = 1.0  # it runs 2.5x its estimate: the countdown follows instead of sitting near 0 s
    assert clock.left(now=151.0) == pytest.approx(0.1 * 150)
    assert clock.speed(now=151.0) == pytest.approx(2.5)


def test_a_record_of_another_format_is_ignored(tmp_path):
    path = record().save(tmp_path / "x.json")
    assert est.Record.load(path) == record()
    path.write_text(path.read_text().replace(f'"format": {est.FORMAT}', '"format": 0'))
    assert est.Record.load(path) is None and est.Record.load(tmp_path / "missing.json") is None


def test_the_benchmark_times_every_worker_at_once_in_wall_seconds(monkeypatch):
    """benchmark(2) runs the workload in two processes started together (the spawn path a plan takes with two
    workers) and reads the mean of their wall seconds per run, the least run; one worker runs in this process."""
    runs = [(5.0, 5.0), (5.0, 5.0), (0.30, 0.10), (0.20, 0.19), (0.25, 0.12)]  # (wall, CPU): 2 warm-ups, 3 timed
    calls = iter(runs)
    monkeypatch.setattr(est, "_workload", lambda: next(calls))
    assert est.benchmark(1, repeats=3) == pytest.approx(0.20)
    calls = iter(runs)  # the CPU clock, for what is priced in CPU seconds: the least CPU run, whatever its wall time
    assert est.benchmark(1, repeats=3, clock="cpu") == pytest.approx(0.10)
    with pytest.raises(ValueError, match="clock"):
        est.benchmark(1, clock="gpu")
    seconds = est.benchmark(2, repeats=1)  # the real workload, in two spawned processes
    assert 0.01 < seconds < 60
    assert 0.0 < est.benchmark(2, repeats=1, clock="cpu") < 60
    asked = []  # --plan prices with as many processes at once as the run will have workers
    monkeypatch.setattr(est, "benchmark", lambda workers=1, **_: asked.append(workers) or 1.0)
    est.estimate("none", [], [], 0, 3)
    assert asked == [3]


def test_durations_read_as_people_say_them():
    assert [sched.duration(s) for s in (0.4, 59, 61, 3599, 3600 * 5 + 60 * 7, 86400 * 3)] == [
        "0 s", "59 s", "1 min 01 s", "59 min 59 s", "5 h 07 min", "3.0 days"]  # fmt: skip


def test_the_projection_adds_the_left_out_models_scoring_and_prices_analyses_by_the_networks_read(
    monkeypatch, tmp_path
):  # fmt: skip
    """A shipping profile's run leaves out the models not shipped yet; its estimate also says what the profile will
    cost once they ship: their scoring added, every analysis (and part) scaled by the networks it would read."""
    monkeypatch.setattr(est, "PROFILES_DIR", tmp_path)
    record(**{"score:c/lstm-a": {"seconds": 30.0, "what": "score", "units": 1000, "shape": "lstm L1 H8",
                                 "params": 100, "bytes": 0}}).save(tmp_path / f"rec{est.RECORD_SUFFIX}")  # fmt: skip
    scoring = job("score:c/lstm-a", work=Work("score", 1000, "lstm L1 H8", 100))
    later = [job("score:c/lstm-b", work=Work("score", 2000, "lstm L1 H8", 100))]  # priced from the record: 60 s
    now = est.estimate("rec", [scoring], [job("part:cells:m1"), job("analysis:cells", after=["part:cells:m1"])], 10,
                       1, bench_s=1.0, later=later, read=(10, 5))  # fmt: skip
    assert now.wall_s == pytest.approx(30 + 40 + 100 + 20)  # this run: scoring, the part, the analysis, rendering
    assert later[0].seconds == pytest.approx(60.0)
    assert now.projected_s == pytest.approx(30 + 60 + 1.5 * (40 + 100) + 20)  # 15 networks read instead of 10
    line = now.summary()[-1]
    assert line.startswith("estimate: this profile once the models left out ship (1; not this run): about 5 min 20 s")
    assert "the 15 networks it would read instead of 10" in line
    same = est.estimate("rec", [scoring], [job("analysis:cells")], 10, 1, bench_s=1.0, later=later, read=(10, 0))
    assert "every analysis reading the same 10 networks" in same.summary()[-1]  # left out: other dropouts, stand-ins
    alone = est.estimate("rec", [scoring], [job("analysis:cells")], 10, 1, bench_s=1.0)
    assert alone.projected_s == pytest.approx(alone.wall_s) and "left out" not in " ".join(alone.summary())
    # a run that reuses models built before has no job of theirs to price: it says where the cold projection is made
    reusing = est.estimate("rec", [], [job("analysis:cells")], 10, 1, bench_s=1.0, later=later, read=(10, 5),
                           reused_models=3)  # fmt: skip
    line = reusing.summary()[-1]
    assert "(1; not this run): this run reuses 3 models built before" in line and "--plan" in line
    assert "cold, the scoring of" not in line

    from reports.pipeline import reused_models

    models = [SimpleNamespace(model_id=m) for m in ("a", "b", "c")]
    assert reused_models(models, [SimpleNamespace(model=models[0]), SimpleNamespace(model=models[0])]) == 2
    assert reused_models(models, [SimpleNamespace(model=models[0])], {"c": 0.0}) == 1  # c: unread, not reused
    # left out: networks of dropout above 0 alone, priced unscored (no scoring to add): the line still counts them
    grid = est.estimate("rec", [scoring], [job("analysis:cells")], 10, 1, bench_s=1.0, later=[], read=(10, 0),
                        left_out=2)  # fmt: skip
    line = grid.summary()[-1]
    assert "(2; not this run)" in line and "priced unscored" in line and grid.projected_s == pytest.approx(grid.wall_s)
    assert "cold, nothing to score added and every analysis reading the same 10 networks" in line


def test_the_networks_the_analyses_read_count_a_cell_trained_at_several_dropouts_once():
    from types import SimpleNamespace

    from charlm.train import TrainConfig
    from reports.pipeline import networks_read

    def model(arch="lstm", dropout=0.0, seed=0, corpus="c", recurrent=True):
        return SimpleNamespace(corpus=SimpleNamespace(name=corpus), kind=SimpleNamespace(recurrent=recurrent),
                               config=TrainConfig(corpus=corpus, arch=arch, dropout=dropout, seed=seed))  # fmt: skip

    adopted = SimpleNamespace(corpus=SimpleNamespace(name="c"), kind=SimpleNamespace(recurrent=True),
                              config=SimpleNamespace(arch="lstm"), model_id="adopted-lstm-L1-H8-abc123")  # fmt: skip
    shipped = [model(), model(seed=1), model("rnn"), model(recurrent=False), adopted]
    left_out = [model(dropout=0.1), model(dropout=0.25), model("gru"), model("gru", dropout=0.1), model(corpus="d")]
    assert networks_read(shipped, left_out) == (4, 2)  # the new GRU cell and the LSTM on corpus d
    assert networks_read(shipped, []) == (4, 0)  # a user's model: no TrainConfig


def test_shipped_training_is_read_per_shape_and_per_architecture_from_models_and_pending(tmp_path):
    for room, arch, size, params, cpu in (("reference", "mingru", 465, 1000, 400.0), ("pending/reference", "mingru",
                                                                                      190, 500, 300.0)):  # fmt: skip
        folder = tmp_path / room / "c" / f"{arch}-{size}"
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text(json.dumps({"cpu_seconds": cpu, "train_config": {
            "arch": arch, "layers": 1, "size": size}}))  # fmt: skip
        (folder / "metrics.json").write_text(json.dumps({"chars_trained": 100, "params": params}))
    by_shape, by_arch = est.shipped_training(tmp_path)
    assert by_shape == {"mingru L1 H465": [4.0], "mingru L1 H190": [3.0]}
    assert sorted(by_arch["mingru"]) == [(1, 500, 3.0), (1, 1000, 4.0)]


def test_shipped_training_reads_cpu_seconds_where_an_architecture_has_them_and_wall_seconds_only_where_not(tmp_path):
    for name, arch, size, seconds in (("a", "lstm", 8, {"cpu_seconds": 500.0}), ("b", "lstm", 8, {"training_seconds":
                                      100.0}), ("c", "rnn", 8, {"training_seconds": 200.0}),
                                      ("d", "lstm", 9, {"training_seconds": 900.0})):  # fmt: skip
        folder = tmp_path / "reference" / "c" / name
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text(json.dumps({**seconds, "train_config": {
            "arch": arch, "layers": 1, "size": size}}))  # fmt: skip
        (folder / "metrics.json").write_text(json.dumps({"chars_trained": 100, "params": 10}))
    by_shape, by_arch = est.shipped_training(tmp_path)
    # the LSTM's wall-time models are left out, the 1 x 9 shape with them (priced by the LSTM's fit instead); the
    # RNN has no CPU-timed model, so its wall time is read
    assert by_shape == {"lstm L1 H8": [5.0], "rnn L1 H8": [2.0]}
    assert by_arch == {"lstm": [(1, 10, 5.0)], "rnn": [(1, 10, 2.0)]}


def test_per_char_cost_recovers_a_cost_per_layer_plus_per_parameter():
    def cost(layers, params):
        return 3e-6 * layers + 1e-10 * params  # known by construction

    shipped = [(n, p, cost(n, p)) for n, p in ((1, 130_000), (2, 122_000), (3, 123_000))]
    seconds, how = est.per_char_cost(shipped, 4, 60_000)
    assert seconds == pytest.approx(cost(4, 60_000), rel=1e-6) and how == "per layer and parameter"
    seconds, how = est.per_char_cost(shipped[:1], 2, 65_000)  # one shape: per parameter
    assert seconds == pytest.approx(cost(1, 130_000) / 2) and how == "per parameter"


def test_leave_one_out_prices_each_shape_from_the_others_and_is_exact_where_the_cost_model_is():
    def cost(layers, params):
        return 3e-6 * layers + 1e-10 * params  # known by construction

    shapes = ((1, 130_000), (2, 122_000), (3, 123_000), (1, 60_000))
    exact = {"gru": [(n, p, cost(n, p)) for n, p in shapes], "rnn": [(1, 10, 1.0)]}  # rnn: alone, skipped
    loo = est.leave_one_out(exact)
    assert loo["fit"][0] == 4 and loo["fit"][1] == pytest.approx(1.0) and loo["fit"][2] == pytest.approx(1.0)
    # per parameter alone: the 1 x 60,000 priced from the others' median cost per parameter, computed here
    per = sorted(cost(n, p) / p for n, p in shapes[:3])[1] * 60_000
    assert loo["per parameter"][2] >= max(per / cost(1, 60_000), cost(1, 60_000) / per) - 1e-12
    assert loo["per parameter"][1] > 1.0
    off = {"gru": [(1, 100, 2.0), (2, 100, 2.0), (1, 100, 8.0)]}  # two models of one shape: both left out together
    n, geo, worst = est.leave_one_out(off)["per parameter"]
    assert n == 3 and worst == pytest.approx(4.0)  # the 1 x 100 at 8.0 priced from the 2 x 100 at 2.0


def test_the_plan_prints_whole_numbers_as_integers_and_empty_cells_blank():
    from reports.__main__ import shown_table

    table = pd.DataFrame({"kind": ["neural", "ngram", "analysis"], "layers": [2.0, None, None],
                          "dropout": [0.25, 0.0, None], "params": [44823.0, 0.0, None]})  # fmt: skip
    text = shown_table(table).to_string(index=False)
    rows = [line.split() for line in text.splitlines()[1:]]
    assert rows[0] == ["neural", "2", "0.25", "44823"]  # not 2.0 and 44823.0
    assert rows[1] == ["ngram", "0.0", "0"] and rows[2] == ["analysis"]  # a fraction column keeps its decimals
