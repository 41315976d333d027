"""What report runs cost, as `python -m reports.docs` writes it: the cost section of docs/results.md (one run: its wall
time, estimate, memory, disk, work by phase and the bound its work sets), docs/profile-table.md (every run and
profile record) and the README's table of profiles (the records kept with the suite, between its markers).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from corpora import atomic
from corpora.errors import UserError

from .docs_run import PROFILES_DIR, RECORD_SUFFIX, REPO, Run, _duration, _read_json, table


@dataclass
class CostRow:
    """What one run cost, from its timings.json (or a profile's record, charlm.estimate.Record)."""

    profile: str
    source: str
    date: str
    git: str
    machine: str
    workers: str
    wall_s: float | None
    estimate_s: float | None
    peak_mb: float | None
    artifacts_bytes: float | None
    model_jobs: int | None
    unpriced: int = 0  # jobs the estimate had no record for (counted as 0 s: the estimate is a lower bound)

    def cells(self) -> list:
        estimate = _duration(self.estimate_s)
        if self.unpriced and self.estimate_s:
            estimate = f"at least {estimate} ({self.unpriced} jobs unpriced)"
        if self.estimate_s == 0:
            estimate = "0 s (no record priced it)"
        machine = self.machine + (f", {self.workers} workers" if self.workers != "—" else "")
        return [
            self.profile, f"{self.date}, git {self.git}", machine, _duration(self.wall_s), estimate,
            "—" if self.peak_mb is None else f"{self.peak_mb:,.0f} MB",
            "—" if self.artifacts_bytes is None else f"{self.artifacts_bytes / 1e9:.2f} GB",
            "—" if self.model_jobs is None else self.model_jobs,
        ]  # fmt: skip


COST_HEADER = ["profile", "measured", "machine", "wall time", "estimate at start", "peak memory", "artifacts disk",
               "model jobs run"]  # fmt: skip


def sources(rows: list[CostRow]) -> list[str]:
    return ["From " + "; ".join(f"{r.profile}: {r.source}" for r in rows) + ".", ""]


def cost_row(profile: str, timings: dict, source: str, fallback_date: str = "not recorded") -> CostRow:
    m = timings.get("measured") or {}
    phases = m.get("phases_s") or {}
    machine = m.get("machine") or {}
    wall = phases.get("total", timings.get("total"))  # an older run's timings.json holds the phases at its top
    jobs = timings.get("jobs")
    return CostRow(
        profile=profile,
        source=source,
        date=str(m.get("date") or fallback_date),
        git=str(m.get("git") or "not recorded"),
        machine=f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores" if machine else "not recorded",
        workers=str(m.get("workers", "—")),
        wall_s=wall if isinstance(wall, (int, float)) else None,
        estimate_s=m.get("estimate_s"),
        peak_mb=m.get("peak_rss_mb"),
        artifacts_bytes=m.get("artifacts_bytes"),
        model_jobs=len(jobs) if isinstance(jobs, dict) else None,
        unpriced=int(m.get("estimate_unpriced") or 0),
    )


def cost_section(run: Run) -> list[str]:
    lines = ["## Profile cost", "", run.generated(), ""]
    if run.timings is None:
        return lines + run.missing("timings.json", "cost")
    row = cost_row(run.profile, run.timings, f"`{run.path('timings.json')}`", run.date)
    lines += [
        "The run's own wall time (planning, model jobs, analyses, rendering; not creating the virtual environment); "
        "cold only when it started from an empty artifacts folder (`CHARLM_ARTIFACTS=$(mktemp -d) make report "
        f"PROFILE={run.profile}`): a run that found everything cached ran no model jobs. The estimate is the one "
        "printed at its start (charlm.estimate, from the profile's recorded cold run); peak memory is the largest "
        "process's resident set; artifacts the whole artifacts folder after the run.",
        "",
    ]
    lines += table(COST_HEADER, [row.cells()]) + sources([row])
    if not run.measured:
        phases = {k: v for k, v in run.timings.items() if isinstance(v, (int, float))}
        lines += [
            "This run's `timings.json` is of an older format (its phases only: no date, git, estimate, peak memory "
            f"or artifacts); {run.make()} with this checkout records them.",
            "",
        ]
        if phases:
            lines += table(["phase", "wall time"], [[k, _duration(v)] for k, v in phases.items()])
        return lines
    phases = run.measured.get("phases_s") or {}
    if phases:
        lines += ["Wall time by phase:", ""]
        names = {"jobs": "models and analyses (one job graph)", "render": "model index, HTML and PDF"}
        lines += table(["phase", "wall time"], [[names.get(k, k), _duration(v)] for k, v in phases.items()])
    lines += jobs_by_work(run.timings.get("jobs") or {})
    lines += analyses_by_name(run.timings.get("analyses") or {})
    lines += work_bound(run.timings, run.measured)
    lines += scope_choices(run)
    return lines


KIND_OF_SHAPE = {"ngram": "KenLM n-grams", "nnn": "n-NNs"}  # a job's shape starts with its kind; the rest: networks


def jobs_by_work(jobs: dict) -> list[str]:
    """The model jobs' worker-seconds by work and kind of model (KenLM builds, the networks' and n-NNs' scoring)."""
    if not jobs:
        return []
    work: dict[tuple[str, str], list] = {}
    for j in jobs.values():
        kind = KIND_OF_SHAPE.get(str(j.get("shape", "")).split(" ")[0], "networks")
        seconds = float(j.get("seconds") or 0)
        w = work.setdefault((j.get("what", "?"), kind), [0, 0.0, 0.0, 0])
        w[0] += 1
        w[1] += seconds
        w[2] = max(w[2], seconds)
        w[3] += int(j.get("bytes") or 0)
    rows = [[what, kind, n, _duration(s), _duration(longest), f"{b / 1e9:.2f} GB"]
            for (what, kind), (n, s, longest, b) in sorted(work.items(), key=lambda kv: -kv[1][1])]  # fmt: skip
    header = ["work", "models", "jobs", "worker time", "longest job", "their model folders (bytes after the job)"]
    return ["Model jobs by work, most first (seconds of one worker each; the workers run them side by side):", ""] + [
        *table(header, rows)
    ]


def analyses_by_name(analyses: dict) -> list[str]:
    """Each analysis's worker-seconds, its per-model parts (`name:model`, run as jobs of their own) summed into it."""
    if not analyses:
        return []
    by: dict[str, list] = {}
    for key, seconds in analyses.items():
        name, _, part = key.partition(":")
        a = by.setdefault(name, [0.0, 0, 0.0, 0.0])
        a[0] += float(seconds)
        if part:
            a[1] += 1
            a[2] += float(seconds)
            a[3] = max(a[3], float(seconds))
    rows = [[f"`{name}`", _duration(total), parts or "", _duration(in_parts) if parts else "",
             _duration(longest) if parts else ""]
            for name, (total, parts, in_parts, longest) in sorted(by.items(), key=lambda kv: -kv[1][0])]  # fmt: skip
    header = ["analysis", "worker time", "per-model parts", "of it in those parts", "longest part"]
    return ["Analyses, most work first (worker-seconds; the per-model parts run as jobs of their own, beside the "
            "rest):", ""] + [*table(header, rows)]  # fmt: skip


def _work(timings: dict) -> tuple[float, float, float]:
    """A run's worker-seconds of model jobs and of analyses (their parts included), and its rendering seconds."""
    jobs = sum(float(j.get("seconds") or 0) for j in (timings.get("jobs") or {}).values())
    analyses = sum(float(v) for v in (timings.get("analyses") or {}).values())
    return jobs, analyses, float(timings.get("render_s") or 0)


def work_bound(timings: dict, measured: dict | None) -> list[str]:
    """What the run's work alone says of its wall time: its jobs' and analyses' worker-seconds, spread perfectly over
    its workers, plus rendering: no schedule finishes sooner (the cold default report's 5 minutes are judged by it)."""
    workers = (measured or {}).get("workers")
    jobs, analyses, render = _work(timings)
    if not workers or not (jobs or analyses):
        return []
    bound = (jobs + analyses) / int(workers) + render
    return [f"Work: {_duration(jobs)} of model jobs and {_duration(analyses)} of analyses, in worker-seconds; on "
            f"{workers} workers no schedule ends before {_duration(bound)} (the work spread evenly, then rendering "
            f"{_duration(render)}).", ""]  # fmt: skip


FIVE_MINUTES_S = 300.0  # issue 35: the default report, cold, on 2 cores


def _cells_groups(parts: dict[str, float], models_csv: Path) -> dict[str, float]:
    """`cells`' per-model parts' worker-seconds by what the model is there for, from the architecture records
    (charlm.archs): Levy's ablations, the ladder's rungs, minGRU / minLSTM, Fig 1's grid by budget row."""
    from charlm.archs import REGISTRY

    index = pd.read_csv(models_csv).drop_duplicates("model_id").set_index("model_id") if models_csv.exists() else None
    groups: dict[str, float] = {}
    for model_id, seconds in parts.items():
        if index is None or model_id not in index.index:
            group = "models the run's index does not list"
        else:
            row = index.loc[model_id]
            record = REGISTRY.get(str(row["arch"]))
            if record is not None and record.ablation:
                group = "Levy's ablations"
            elif record is not None and record.family == "ladder":
                group = "the ladder's rungs"
            elif record is not None and record.family == "min":
                group = "minGRU and minLSTM"
            else:
                group = f"Fig 1's grid, row {row['budget']:.0f}"
        groups[group] = groups.get(group, 0.0) + float(seconds)
    return groups


def scope_choices(run: Run) -> list[str]:
    """What each choice of the default report's scope would take off this run's work, and where the wall-time bound
    would then stand against five minutes: exact worker-seconds of the run's own jobs (a `cells` part per model,
    each analysis whole), taken off one after another. Which sections the default report holds is the maintainers'
    call."""
    timings, workers = run.timings or {}, (run.measured or {}).get("workers")
    analyses = {k: float(v) for k, v in (timings.get("analyses") or {}).items()}
    if not workers or not analyses:
        return []
    jobs, analysed, render = _work(timings)
    work = jobs + analysed
    cells_parts = {k.split(":", 1)[1]: v for k, v in analyses.items() if k.startswith("cells:")}
    groups = _cells_groups(cells_parts, run.data_dir / "models.csv")
    rows_ = [g for g in groups if g.startswith("Fig 1's grid, row")]
    central = [max(rows_, key=lambda g: float(g.rsplit(" ", 1)[1]))] if rows_ else []  # Fig 1's largest row
    choices = sorted(((f"`cells` left out for {g}", s) for g, s in groups.items() if g not in central),
                     key=lambda c: -c[1])  # fmt: skip
    choices += sorted(((f"`{name}` in a named profile, not the default", s) for name, s in analyses.items()
                       if ":" not in name and name != "cells" and s >= 0.05 * (work / int(workers))),
                      key=lambda c: -c[1])  # fmt: skip
    choices += [(f"`cells` left out for {g} too (the paper's own figure's models: no `cells` left)", groups[g])
                for g in central]  # fmt: skip
    left = work
    rows = []
    for what, seconds in choices:
        left -= seconds
        rows.append([what, f"{seconds:,.0f}", _duration(left / int(workers) + render)])
    budget = (FIVE_MINUTES_S - render) * int(workers)
    return [
        "### What five minutes would take",
        "",
        f"Five minutes on {workers} workers, rendering ({_duration(render)}) paid, leave {budget:,.0f} worker-seconds; "
        f"this run's jobs took {work:,.0f}. Each row takes one more choice of scope off the run (the worker-seconds "
        "this run spent on it) and gives the wall time the work left would allow at best: first `cells` on the models "
        "beside Fig 1's largest row (Karpathy et al. found Fig 2's cells in their best LSTMs), then whole analyses, "
        "each most work first, then `cells` on that row too. Every choice removes what a section shows, not a cause: "
        "which the default report makes is the maintainers' call (docs/cost-and-plan.md).",
        "",
        *table(["choice", "worker-seconds saved", "wall time at best, with the rows above"], rows),
    ]


def profile_rows(build_dir: Path, records_dir: Path = PROFILES_DIR) -> list[CostRow]:
    """A row per profile run in build_dir (its data/timings.json), then per profile record kept with the suite. A
    record is a copy of one build's timings.json (`--record-timings`): that run is one row, the record's."""
    builds, records = [], []
    for path in sorted(Path(build_dir).glob("*/data/timings.json")):
        timings = _read_json(path)
        if isinstance(timings, dict):
            profile = path.parent.parent.name
            builds.append(cost_row(profile, timings, f"`{path}`", Run(profile, path.parent).date))
    for path in sorted(Path(records_dir).glob(f"*{RECORD_SUFFIX}")):
        record = _read_json(path)
        if isinstance(record, dict) and record.get("measured"):
            name = record.get("profile") or path.name[: -len(RECORD_SUFFIX)]
            where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
            records.append(cost_row(name, record, f"`{where}` (the profile's record)"))
    recorded = {_run(r) for r in records}
    return [r for r in builds if _run(r) not in recorded] + records


def _run(row: CostRow) -> tuple:
    """What tells one run from another."""
    return row.profile, row.date, row.git, row.wall_s, row.estimate_s


def profile_table(build_dir: Path, records_dir: Path = PROFILES_DIR) -> list[str]:
    rows = profile_rows(build_dir, records_dir)
    lines = ["# What a report run costs, per profile", ""]
    if not rows:
        return lines + [
            f"*No run to read: no `{build_dir}/<profile>/data/timings.json` and no `charlm/profiles/*{RECORD_SUFFIX}`; "
            "`make report PROFILE=<profile>` writes the first.*",
            "",
        ]
    lines += [
        "Generated by `python -m reports.docs` from the runs named below the table (each row: its run's date and "
        "git). Wall time is the report run's own, cold only when it started from an empty artifacts folder "
        "(`CHARLM_ARTIFACTS=$(mktemp -d) make report PROFILE=<profile>`; a warm run ran no model jobs); the "
        "estimate is the one printed at the run's start; peak memory the largest process's resident set.",
        "",
    ]
    return lines + table(COST_HEADER, [r.cells() for r in rows]) + sources(rows)


README_START = "<!-- profiles: written by `make docs` from charlm/profiles/*.timings.json; do not edit -->"
README_END = "<!-- /profiles -->"
README_HEADER = ["profile", "what it is", "cold `make report`", "estimate at its start", "peak memory", "artifacts",
                 "training its shipped models took", "measured"]  # fmt: skip


def shipped_training(profile: str, root: Path | None = None) -> str:
    """What training the models a profile ships took, from their manifests (models/<profile>/*/*/manifest.json): CPU
    hours summed over the models that recorded them, and of it the networks of dropout above 0 (issue 40's grid);
    models shipped before manifests counted CPU time are named with their wall hours. "" when it ships none."""
    root = root or REPO / "models"
    cpu, wall, grid = [], [], []
    for path in sorted((root / profile).glob("*/*/manifest.json")):
        m = _read_json(path)
        if not isinstance(m, dict):
            continue
        if m.get("cpu_seconds") is None:
            wall.append(float(m.get("wall_seconds") or 0))
            continue
        cpu.append(float(m["cpu_seconds"]))
        if float((m.get("train_config") or {}).get("dropout") or 0) > 0:
            grid.append(float(m["cpu_seconds"]))
    if not cpu and not wall:
        return ""

    def models(n: int) -> str:
        return f"{n} model{'s' if n != 1 else ''}"

    text = f"{sum(cpu) / 3600:.1f} CPU-h, {models(len(cpu))}"
    if grid:
        text += f" (dropout above 0: {sum(grid) / 3600:.1f} CPU-h, {models(len(grid))})"
    if wall:
        text += f"; {len(wall)} more timed in wall hours alone, {sum(wall) / 3600:.1f} h"
    return text


def readme_table(records_dir: Path = PROFILES_DIR) -> list[str]:
    """The README's table of profiles: one row per profile record kept with the suite (a cold run each)."""
    rows = []
    for path in sorted(Path(records_dir).glob(f"*{RECORD_SUFFIX}")):
        record = _read_json(path)
        if not (isinstance(record, dict) and record.get("measured")):
            continue
        name = record.get("profile") or path.name[: -len(RECORD_SUFFIX)]
        toml = Path(records_dir) / f"{name}.toml"
        about = tomllib.loads(toml.read_text()).get("summary", "") if toml.is_file() else ""
        c = cost_row(name, record, "")
        trained = shipped_training(name) or "none ship: the run trains its models"
        rows.append([f"`{name}`", about, _duration(c.wall_s), c.cells()[4], c.cells()[5], c.cells()[6], trained,
                     f"{c.date}, {c.machine}, {c.workers} workers, git {c.git}"])  # fmt: skip
    if not rows:
        return ["*No profile has a recorded cold run yet: `make timings PROFILE=<profile>` records one.*"]
    return table(README_HEADER, rows)


def update_readme(readme: Path, records_dir: Path = PROFILES_DIR) -> Path:
    """Replace the README's table of profiles (between its markers) by the records' measurements."""
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        raise UserError(f"{readme} has no table markers ({README_START} ... {README_END})")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    body = "\n".join(readme_table(records_dir)).rstrip()
    return atomic.write_text(readme, f"{head}{README_START}\n{body}\n{README_END}{tail}")
