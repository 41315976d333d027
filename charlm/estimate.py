"""What a run will cost before it runs: each job's measured seconds, scaled to this machine, scheduled as it runs.

Every report run records what each of its jobs took (reports/build/<profile>/data/timings.json). A profile's
record, charlm/profiles/<profile>.timings.json, is one such cold run kept with the suite (`make timings` writes it),
beside the speed of the machine it ran on: the wall seconds of `benchmark(workers)`, a fixed third of a second of the
suite's kinds of work (a recurrent forward pass in torch, a numpy sort, a Python loop) run at once by as many
processes as the run has workers. On any machine, a job is priced

1. "recorded": the same job (model or analysis) in the profile's record, x this machine's benchmark / the record's;
2. "scaled": a recorded job of the same shape (architecture, depth and width; baseline and order) and the same
   work (train, score, build), in any record, per unit of work (characters trained or read, tokens x order), x this
   job's units and the machine ratio: the same model on another corpus, a quick model on a user's text;
3. training that no record holds: the training seconds per character that the shipped models' manifests record
   for the shape (models/), as 2; else those of the architecture's other shipped shapes, fitted as a cost per
   layer plus a cost per parameter (`per_char_cost`: a minGRU 2 x 190 from the shipped 1 x 465 and 3 x 145). The
   manifests' CPU seconds are read wherever an architecture has any, wall seconds only for one that has none;
4. "by kind": the recorded jobs of the same work, per unit and per parameter (a network of a new shape);

An analysis is priced by its record, scaled by the number of networks it reads against the record's; one whose
result in the report's data folder is good for this run (same code, settings and models: reports.sections'
`cached_analyses`) is priced as that read (CACHED_S), and so are its parts; rendering by its record. The wall time
is the job graph list-scheduled onto the workers exactly as the pipeline runs it (`schedule`: a job starts when
the jobs it needs have finished, longest remaining path first). Disk: the bytes each recorded job left in the
artifacts, scaled like its seconds. Every line of the summary says which rule priced what.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from .schedule import duration, schedule

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
RECORD_SUFFIX = ".timings.json"
FORMAT = 3  # bump when what a record holds changes (2: benchmark_s on one torch thread; 3: wall, all workers)
CLOCKS = ("wall", "cpu")  # benchmark's clocks: the pipeline's jobs are wall seconds, a training's CPU seconds
RULES = {"recorded": "recorded", "scaled": "scaled from a recorded shape", "shipped": "from shipped training",
         "by": "by kind of work", "read": "read from an earlier run", "unpriced": "unpriced"}  # fmt: skip
# A result read instead of computed, in seconds on the records' machine: an analysis (its tables loaded, its section
# built) and one per-model part (its cache entry found). Measured on the reference profile's warm run (2026-11-29,
# the 2-core machine, 90 networks): the 11 analyses read took 0.0 to 0.5 s (cells' 0.5, with its appendix), the 72
# parts 0.06 s at the median and 0.48 at most.
CACHED_S = {"analysis": 0.5, "part": 0.1}


# ------------------------------------------------------------------------------------------ the machine


def benchmark(workers: int = 1, repeats: int = 4, clock: str = "wall") -> float:
    """Wall seconds of a fixed workload mixing what a report does (torch, numpy, Python), run at once in `workers`
    processes as the pipeline's workers run it: about a third of a second, the mean over the processes of each
    run, the least of `repeats` runs after two to warm up.

    Wall seconds of concurrent runs, not one process's CPU seconds: the records' jobs are wall seconds of workers
    running side by side, and CPU seconds miss what makes them slow on a shared machine. On 2026-11-28 a fresh
    2-core machine ran the reference report's cold jobs in half the worker-seconds of the machine that had
    recorded them (every kind of work 0.32x to 0.66x: KenLM, sklearn, torch alike), while one process's CPU
    seconds called it 1.21x slower; the estimate said 20 min 22 s for a run of 7 min 58 s. Time taken from a
    process by the hypervisor, by a sibling hyperthread or by another process (a trainer beside the report)
    counts in wall seconds of concurrent runs and in the jobs alike. On one torch thread per process: with two, a
    core another process holds makes OpenMP's threads spin. Each process pays torch's one-time setup in its
    warm-up runs (measured alone, a first run read 0.40 s where the least of the next was 0.29 s).

    `clock="cpu"`: the same runs' CPU seconds instead, for pricing what is counted in CPU seconds (a training's, as
    the manifests record it: `ship train` and `ship status`, run beside trainers). On an idle core the two clocks
    agree; beside busy ones the wall clock counts the waits, which a training's CPU seconds do not (`ship status`
    beside two trainers read 5.12x the record's wall seconds, and priced the training left at five times its CPU)."""
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {', '.join(CLOCKS)}, got {clock!r}")
    workers, which = max(1, int(workers)), CLOCKS.index(clock)
    if workers == 1:
        return min(run[which] for run in _timed_runs(None, repeats))
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # a forked torch with live threads can hang
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=_benchmark_worker, args=(barrier, results, repeats), daemon=True)
             for _ in range(workers)]  # fmt: skip
    for proc in procs:
        proc.start()
    try:
        runs = [results.get(timeout=300) for _ in procs]  # each process's seconds per run, the runs aligned
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
    return min(statistics.fmean(run[which] for run in together) for together in zip(*runs))


def _benchmark_worker(barrier, results, repeats: int) -> None:
    results.put(_timed_runs(barrier, repeats))


def _timed_runs(barrier, repeats: int) -> list[tuple[float, float]]:
    """Two warm-up runs, then `repeats` timed ones, each started with the other processes (`barrier`): (wall, CPU)
    seconds of each."""
    _workload()
    _workload()
    runs = []
    for _ in range(max(1, repeats)):
        if barrier is not None:
            barrier.wait(timeout=300)
        runs.append(_workload())
    return runs


def _workload() -> tuple[float, float]:
    """(wall, CPU) seconds of the fixed workload, on one torch thread."""
    import numpy as np
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        started, cpu = time.perf_counter(), time.process_time()
        with torch.no_grad():
            torch.manual_seed(0)
            lstm = torch.nn.LSTM(96, 128, batch_first=True)
            x = torch.randn(32, 400, 96)
            for _ in range(3):
                lstm(x)
        rng = np.random.default_rng(0)
        for _ in range(4):
            np.sort(rng.random(1_000_000))
        total = 0
        for i in range(600_000):
            total += i % 7
        return time.perf_counter() - started, time.process_time() - cpu
    finally:
        torch.set_num_threads(threads)


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))  # fmt: skip
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": os.cpu_count() or 1, "python": platform.python_version()}


# ------------------------------------------------------------------------------------------ records


@dataclass
class Record:
    """One cold run's measured seconds (a profile's `<profile>.timings.json`)."""

    profile: str
    benchmark_s: float  # wall seconds of `benchmark(workers)` on the machine that ran it, with its workers
    jobs: dict[str, dict]  # job key -> {"seconds", "what", "units", "shape", "params", "bytes"}
    analyses: dict[str, float]  # analysis -> seconds
    render_s: float = 0.0
    networks: int = 0  # recurrent models its analyses read
    measured: dict = field(default_factory=dict)  # when, where: date, machine, git, workers, wall and peak figures

    def save(self, path: Path) -> Path:
        from corpora import atomic

        atomic.write_json(path, {"format": FORMAT, **self.__dict__})
        return path

    @classmethod
    def load(cls, path: Path) -> Record | None:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError):
            return None
        if data.pop("format", None) != FORMAT:
            return None
        return cls(**data)


def records(profile_name: str) -> list[Record]:
    """The profile's record first, then every other profile's (what `scaled` and `by kind` read)."""
    own = PROFILES_DIR / f"{profile_name}{RECORD_SUFFIX}"
    paths = [own] + sorted(p for p in PROFILES_DIR.glob(f"*{RECORD_SUFFIX}") if p != own)
    return [r for r in (Record.load(p) for p in paths if p.is_file()) if r is not None]


def shipped_training(root: Path | None = None) -> tuple[dict[str, list[float]], dict[str, list[tuple]]]:
    """Training seconds of every shipped network (models/, the ones waiting for their set in models/pending/
    included), per character: by shape ("lstm L2 H84": [seconds per character]) and by architecture ("mingru":
    [(layers, parameters, seconds per character)], for a shape no shipped model has): rule 3's records. The CPU
    seconds a manifest records (one training thread, every session) are read wherever the architecture has any: a
    shape of it shipped only with wall seconds is then left out of `by_shape`, so that the architecture's fit prices
    it. The wall seconds of models shipped before manifests recorded CPU time are read only for an architecture
    with none, since they count pauses, a busy machine's waits and other machines (Linux's LSTM 1 x 128: 21-23 us of
    CPU per character against 6-7 us of wall on an earlier machine; War and Peace's papers' GRU 3 x 79: 74 us of
    wall, where the papers' GRUs timed in CPU seconds cost 18 to 29)."""
    from .shipped import SHIPPED_ROOT

    rows = []  # (arch, layers, size, params, seconds per character, measured in CPU seconds)
    for path in sorted((root or SHIPPED_ROOT).rglob("manifest.json")):
        m = json.loads(path.read_text())
        tc, seconds = m.get("train_config"), m.get("cpu_seconds") or m.get("training_seconds")
        metrics = path.with_name("metrics.json")
        if not tc or not seconds or not metrics.is_file():
            continue
        record = json.loads(metrics.read_text())
        chars, params = record.get("chars_trained") or 0, record.get("params") or 0
        if chars:
            rows.append((tc["arch"], tc["layers"], tc["size"], params, seconds / chars, bool(m.get("cpu_seconds"))))

    def best(group: list[tuple]) -> list[tuple]:
        return [r for r in group if r[5]] or group

    timed = {r[0] for r in rows if r[5]}  # architectures with a model whose CPU seconds were recorded
    by_shape: dict[str, list[float]] = {}
    for key in {f"{a} L{n} H{h}" for a, n, h, *_ in rows}:
        kept = best([r for r in rows if f"{r[0]} L{r[1]} H{r[2]}" == key])
        if kept[0][0] not in timed or kept[0][5]:  # a wall-timed shape of a CPU-timed architecture: priced by its fit
            by_shape[key] = [r[4] for r in kept]
    by_arch: dict[str, list[tuple]] = {}
    for arch in {r[0] for r in rows}:
        kept = [(r[1], r[3], r[4]) for r in best([r for r in rows if r[0] == arch]) if r[3]]
        if kept:
            by_arch[arch] = kept
    return by_shape, by_arch


def per_char_cost(shipped: list[tuple], layers: int, params: int) -> tuple[float, str]:
    """Seconds per character of a shape from other shipped shapes of its architecture, `shipped` as
    (layers, parameters, seconds per character): with two shapes or more, the least-squares fit of
    a x layers + b x parameters (a, b >= 0, each shape weighted by its inverse cost, so that the fit minimises
    relative errors), since a layer costs its per-step overhead whatever its width (a wide 1-layer minGRU runs
    its scan once); with one shape, its cost per parameter. How well it prices a shape left out: `leave_one_out`
    (printed by `python -m reports.ship status`)."""
    import numpy as np
    from scipy.optimize import nnls

    if len({(n, p) for n, p, _ in shipped}) < 2:
        return statistics.median(s / p for _, p, s in shipped) * params, "per parameter"
    y = np.array([s for _, _, s in shipped])
    a = np.array([[n, p] for n, p, _ in shipped], dtype=float) / y[:, None]
    (per_layer, per_param), _ = nnls(a, np.ones_like(y))
    return per_layer * layers + per_param * params, "per layer and parameter"


def leave_one_out(by_arch: dict[str, list[tuple]]) -> dict[str, tuple[int, float, float]]:
    """Rule 3 tested on the shipped models: each priced as a shape no shipped model has, from the other shapes of
    its architecture (`by_arch` as `shipped_training` returns it; a model alone in its architecture is skipped), by
    `per_char_cost` ("fit") and by the median cost per parameter alone ("per parameter"). The error of one price
    is max(price / measured, measured / price). Returns {method: (models, geometric mean error, worst error)}."""
    import numpy as np

    errors: dict[str, list[float]] = {"fit": [], "per parameter": []}
    for shipped in by_arch.values():
        for layers, params, measured in shipped:
            others = [r for r in shipped if (r[0], r[1]) != (layers, params)]
            if not others:
                continue
            prices = {"fit": per_char_cost(others, layers, params)[0],
                      "per parameter": statistics.median(s / p for _, p, s in others) * params}  # fmt: skip
            for method, price in prices.items():
                errors[method].append(max(price / measured, measured / price))
    return {m: (len(e), float(np.exp(np.mean(np.log(e)))), max(e)) for m, e in errors.items() if e}


# ------------------------------------------------------------------------------------------ pricing


@dataclass
class Pricer:
    """Prices jobs and analyses on this machine from the records (see the module docstring)."""

    profile: str
    records: list[Record]
    speed: float  # this machine's benchmark / the records' machine's: above 1 is slower
    training: dict[str, list[float]]  # shipped training, seconds per character, by shape
    training_by_arch: dict[str, list[tuple]] = field(default_factory=dict)  # (layers, params, s/char), by arch

    @classmethod
    def here(cls, profile_name: str, bench_s: float | None = None, workers: int = 1, clock: str = "wall") -> Pricer:
        """This machine's pricer: `clock="cpu"` where what is priced is CPU seconds (training, `benchmark`)."""
        recs = records(profile_name)
        bench = bench_s if bench_s is not None else benchmark(workers, clock=clock)
        ref = statistics.median([r.benchmark_s for r in recs]) if recs else bench
        return cls(profile_name, recs, bench / ref if ref > 0 else 1.0, *shipped_training())

    def _recorded(self) -> list[dict]:
        return [{**j, "key": k} for r in self.records for k, j in r.jobs.items()]

    def price(self, job) -> tuple[float, float, str]:
        """(seconds, bytes, rule) of one model job (charlm.kinds.base.Job)."""
        own = self.records[0] if self.records and self.records[0].profile == self.profile else None
        if own is not None and job.key in own.jobs:
            j = own.jobs[job.key]
            return j["seconds"] * self.speed, j.get("bytes", 0), "recorded"
        w = job.work
        same = [j for j in self._recorded() if j["what"] == w.what and j["shape"] == w.shape and j["units"]]
        if same:
            per = statistics.median(j["seconds"] / j["units"] for j in same)
            return per * w.units * self.speed, self._bytes(same, w), f"scaled from {len(same)} recorded {w.shape}"
        if w.what == "train" and w.shape in self.training:
            per = statistics.median(self.training[w.shape])
            return per * w.units * self.speed, 0.0, f"shipped {w.shape}'s training, per character"
        arch = w.shape.split(" ")[0]
        if w.what == "train" and w.params and arch in self.training_by_arch:
            per, how = per_char_cost(self.training_by_arch[arch], w.layers, w.params)
            return per * w.units * self.speed, 0.0, f"shipped {arch} training of other shapes, {how}"
        kin = [j for j in self._recorded() if j["what"] == w.what and j["units"] and (j["params"] or 0) > 0]
        if kin and w.params:
            per = statistics.median(j["seconds"] / j["units"] / j["params"] for j in kin)
            return per * w.units * w.params * self.speed, self._bytes(kin, w), f"by kind ({w.what}, per parameter)"
        kin = [j for j in self._recorded() if j["what"] == w.what and j["units"]]
        if kin:
            per = statistics.median(j["seconds"] / j["units"] for j in kin)
            return per * w.units * self.speed, 0.0, f"by kind ({w.what})"
        return 0.0, 0.0, "unpriced: no record holds this kind of work"

    @staticmethod
    def _bytes(recorded: list[dict], w) -> float:
        """A job's bytes from recorded ones of its kind: per unit of work (characters scored, built on), but for
        training, whose folder (checkpoint, resume state, a fixed number of snapshots and their predictions) does
        not grow with the characters trained: there the recorded median (scaling it by characters priced a
        `--plan --retrain` of reference at 313 GB)."""
        if w.what == "train":
            return statistics.median(j.get("bytes", 0) for j in recorded)
        return statistics.median(j.get("bytes", 0) / j["units"] for j in recorded) * w.units

    def analysis(self, name: str, networks: int) -> tuple[float, str]:
        for r in self.records:
            if name in r.analyses:
                scale = networks / r.networks if r.networks and r.profile != self.profile else 1.0
                rule = "recorded" if r.profile == self.profile else f"scaled from {r.profile}'s"
                return r.analyses[name] * scale * self.speed, rule
        analysis, _, part = name.partition(":")
        if part:  # a part for a model no record has (cells:<model id>): the median part of that analysis
            same = [s for r in self.records for k, s in r.analyses.items() if k.startswith(f"{analysis}:")]
            if same:
                return statistics.median(same) * self.speed, f"the median recorded part of {analysis}"
        return 0.0, "unpriced"

    def cached(self, name: str) -> tuple[float, str]:
        """An analysis (or one of its parts, "<analysis>:<model>") whose result a run reads instead of computing."""
        return CACHED_S["part" if ":" in name else "analysis"] * self.speed, "read from an earlier run's result"

    def render(self) -> float:
        return next((r.render_s for r in self.records if r.render_s), 0.0) * self.speed


# ------------------------------------------------------------------------------------------ the estimate


@dataclass
class Estimate:
    """A run's priced job graph: model jobs, analyses, rendering; its wall time on `workers`; what it writes."""

    jobs: list  # every job of the run, priced (job.seconds, job.priced_by), analyses included
    workers: int
    render_s: float
    disk: float  # bytes of new artifacts
    speed: float  # this machine against the records'
    record_of: str  # where the prices come from
    read: int = 0  # the recurrent networks this run's analyses read (one per cell at the dropout validation chose)
    later: list = field(default_factory=list)  # the scoring the models left out will add once they ship, priced
    later_read: int = 0  # how many more networks the analyses will read once they ship
    warm: bool = False  # the artifacts hold an earlier run's analysis results: analyses priced as if computed afresh
    cached: int = 0  # of the analyses, those whose earlier result is good for this run: priced as its read
    computed_s: dict = field(default_factory=dict)  # {job key: seconds computed afresh} of those read: the projection
    cached_parts: int = 0  # per-model parts found in the cache, of analyses still to compute: priced as their read
    reused_models: int = 0  # models built before this run (no job of theirs here): the projection cannot be a cold one
    left_out: int = 0  # the models left out until they ship (`later` holds the scoring of those that will be scored)

    @property
    def wall_s(self) -> float:
        return schedule(self.jobs, self.workers) + self.render_s

    @property
    def projected_s(self) -> float:
        """The wall time once the models left out ship: their scoring joins the run, and every analysis (and each
        per-model part) reads (networks + later) / networks times the networks, priced in proportion: a projection
        of what the profile's plan will cost, not a measurement."""
        scale = (self.read + self.later_read) / self.read if self.read else 1.0
        grown = [dataclasses.replace(j, seconds=self.computed_s.get(j.key, j.seconds) * scale) if j.work is None else j
                 for j in self.jobs]  # fmt: skip  # cold: what this run reads is computed then
        return schedule(grown + self.later, self.workers) + self.render_s

    def summary(self) -> list[str]:
        models = [j for j in self.jobs if j.work is not None]
        analyses = [j for j in self.jobs if j.work is None]
        rules: dict[str, int] = {}
        for j in self.jobs:
            rule = RULES.get(j.priced_by.split(" ")[0], j.priced_by)
            rules[rule] = rules.get(rule, 0) + 1
        model_s, analysis_s = sum(j.seconds for j in models), sum(j.seconds for j in analyses)
        parts = sum(j.key.startswith("part:") for j in analyses)  # an analysis's per-model parts (cells:<model>)
        what = f"{len(analyses) - parts} analyses" + (f" in {len(analyses)} jobs" if parts else "")
        unpriced = [j.key for j in self.jobs if j.priced_by.startswith("unpriced")]
        if len(unpriced) == len(self.jobs):
            return [
                f"estimate: none: no recorded run prices this kind of work on {self.workers} worker(s) "
                f"({len(models)} model jobs, {what}); `make timings PROFILE=<this profile>` keeps "
                "this run's seconds as the record the next estimate reads"
            ]
        wall = f"about {duration(self.wall_s)}" if not unpriced else f"at least {duration(self.wall_s)}"
        fresh = len(analyses) - parts - self.cached  # analyses priced as computed
        if self.warm and fresh and not unpriced:  # what they can reuse of an earlier run is read: an upper bound
            wall = f"at most {duration(self.wall_s)}"
        lines = [
            f"estimate: wall time {wall} on {self.workers} worker(s): {len(models)} model "
            f"jobs ({duration(model_s)} of work), {what} ({duration(analysis_s)}), rendering "
            f"{duration(self.render_s)}; about {self.disk / 1e9:.2f} GB of new artifacts",
            f"estimate: priced from {self.record_of}, on this machine at {1 / self.speed:.2f}x its speed; "
            + ", ".join(f"{n} {rule}" for rule, n in sorted(rules.items(), key=lambda kv: -kv[1])),
        ]
        if unpriced:
            lines.append(f"estimate: {len(unpriced)} job(s) no record prices (counted as 0 s): {', '.join(unpriced)}")
        if self.cached:
            lines.append(f"estimate: {self.cached} of the {len(analyses) - parts} analyses are read from an earlier "
                         "run's results (same code, settings and models), priced as that read")  # fmt: skip
        if self.cached_parts:  # of analyses still to compute (a cached analysis's parts are counted with it)
            lines.append(f"estimate: {self.cached_parts} of the {parts} per-model parts are read from an earlier "
                         "run's cache (same code, settings and model), priced as that read")  # fmt: skip
        if self.warm and fresh:
            lines.append(f"estimate: these artifacts hold an earlier run's analysis results; the {fresh} analyses to "
                         "compute are priced as if computed afresh, so a run that reuses part of them ends "
                         "sooner")  # fmt: skip
        left_out = max(self.left_out, len(self.later))
        if left_out and self.reused_models:  # the models built before have no job here: this run cannot price it cold
            lines.append(
                f"estimate: this profile once the models left out ship ({left_out}; not this run): this run "
                f"reuses {self.reused_models} models built before, so a plan on a fresh artifacts folder prices it "
                "cold (CHARLM_ARTIFACTS=$(mktemp -d) python -m reports --plan)"
            )
        elif left_out:
            reads = (
                f"every analysis priced in proportion to the {self.read + self.later_read} networks it would read "
                f"instead of {self.read}"
                if self.later_read
                else f"every analysis reading the same {self.read} networks"
            )
            lines.append(
                f"estimate: this profile once the models left out ship ({left_out}; not this run): about "
                f"{duration(self.projected_s)} cold, "
                + (f"the scoring of {len(self.later)} added" if self.later else "nothing to score added")
                + f" and {reads} (each cell at the dropout validation chooses; a network of dropout above 0 is priced "
                "unscored, as if validation keeps 0)"
            )
        return lines


def estimate(profile_name: str, jobs: list, analyses: list, networks: int, workers: int, bench_s: float | None = None,
             later: list | None = None, read: tuple[int, int] = (0, 0), warm: bool = False,
             cached: set[str] | frozenset[str] = frozenset(), reused_models: int = 0,
             left_out: int = 0) -> Estimate:  # fmt: skip
    """Price `jobs` (model jobs, charlm.kinds.base.Job) and `analyses` (jobs whose `work` is None, key
    "analysis:<name>") in place, and schedule them. `later`: the scoring jobs of the models a shipping profile leaves
    out until they ship, priced for the projection (`Estimate.projected_s`); `read`: how many networks the analyses
    read now and how many more they will then; `warm`: the artifacts hold an earlier run's analysis results (the
    estimate then says it is an upper bound); `cached`: the analyses whose earlier result is good for this run
    (reports.sections.cached_analyses) and the per-model parts ("<analysis>:<part>") found in the cache
    (reports.sections.cached_parts): each priced as its read; `reused_models`: the models built before this run, which
    have no job in `jobs` (the projection then says it cannot be priced cold here); `left_out`: how many models are left
    out (some of which `later` may not score)."""
    pricer = Pricer.here(profile_name, bench_s, workers)
    disk = 0.0
    for job in jobs:
        job.seconds, bytes_, job.priced_by = pricer.price(job)
        disk += bytes_
    analyses = analyses + _unlisted_parts(pricer, analyses)
    computed_s = {}
    for job in analyses:
        name = job.key.split(":", 1)[1]  # "<analysis>" or, for a part, "<analysis>:<model>"
        job.seconds, job.priced_by = pricer.analysis(name, networks)
        if name in cached or name.split(":")[0] in cached:
            computed_s[job.key] = job.seconds
            job.seconds, job.priced_by = pricer.cached(name)
    for job in later or []:
        job.seconds, _, job.priced_by = pricer.price(job)
    source = ", ".join(f"{r.profile} ({r.measured.get('date', '?')})" for r in pricer.records[:3]) or "no record"
    named = {j.key.split(":", 1)[1] for j in analyses if j.key.startswith("analysis:")}
    parts = {j.key.split(":", 1)[1] for j in analyses if j.key.startswith("part:")}
    parts_read = {p for p in parts if p in cached and p.split(":")[0] not in cached}
    return Estimate(jobs + analyses, workers, pricer.render(), disk, pricer.speed, f"the runs of {source}", read[0],
                    list(later or []), read[1], warm, len(named & set(cached)), computed_s, len(parts_read),
                    reused_models, left_out)  # fmt: skip


def _unlisted_parts(pricer: Pricer, analyses: list) -> list:
    """The recorded parts of an analysis the plan holds none of: its parts are one per model built, and `--plan` on a
    machine that has not installed the shipped models yet sees none (cells priced as its final step alone made a fresh
    machine's `--plan` 5 minutes short). Priced jobs with the analysis's dependencies."""
    from .kinds import Job

    own = next((r for r in pricer.records if r.profile == pricer.profile), None)
    listed = {j.key.split(":")[1] for j in analyses if j.key.startswith("part:")}
    added = []
    for job in analyses:
        name = job.key.split(":", 1)[1]
        if not job.key.startswith("analysis:") or name in listed or own is None:
            continue
        keys = [f"part:{k}" for k in own.analyses if k.startswith(f"{name}:")]
        # the analysis's own job is the pipeline's and keeps its dependencies (a key the pipeline never runs would
        # stall it): the schedule may start it before these parts, the work it prices is the same
        added += [Job(key, None, after=job.after) for key in keys]
    return added


def record_run(profile_name: str, timings: dict, path: Path | None = None) -> Path:
    """Keep a run's measured seconds (its data/timings.json) as the profile's record (`make timings`)."""
    record = Record(profile_name, timings["benchmark_s"], timings["jobs"], timings["analyses"], timings["render_s"],
                    timings["networks"], timings["measured"])  # fmt: skip
    return record.save(path or PROFILES_DIR / f"{profile_name}{RECORD_SUFFIX}")
