"""One analysis run in a worker and turned into its report section (analyses.base's contract, reports.render's
Section): computed or read from its cache, its figure drawn, its findings written as sentences (analyses.prose).

A failure is contained where it happens (issue 23): an analysis that raises, in `compute`, `plot` or anything its
section calls, becomes a failed section (its one-line error, the command that reproduces it, its traceback in
<build>/<profile>/logs/<analysis>.log).
"""

from __future__ import annotations

import datetime as dt
import shlex
import time
import traceback
from pathlib import Path

from analyses import common
from analyses.base import Analysis, Result
from analyses.context import Context, MissingInput, holds_results, model_index
from analyses.prose import VERDICT_LABELS, sentence, verdict_lines
from charlm.kinds import worker_env
from charlm.paths import config_hash
from corpora import atomic

from .render import Section


def say(message: str) -> None:
    print(f"[report] {message}", flush=True)


def error_line(err: BaseException, limit: int = 300) -> str:
    """An exception as the report shows it: "ValueError: its first line" (cut to `limit` characters)."""
    lines = str(err).strip().splitlines()
    text = f"{type(err).__name__}: {lines[0].strip()}" if lines else type(err).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def write_log(path: Path, err: BaseException, what: str) -> Path:
    """The full traceback of `err` (a worker's too: a local pool chains it as the cause) to `path`, atomically."""
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    atomic.write_text(path, f"{what}\n{stamp}\n\n" + "".join(traceback.format_exception(err)))
    return path


def _text(value) -> str:
    """A model's digest in a cache key: a kind may have none (pandas' string dtype would make None a NaN)."""
    return "" if value is None or value != value else str(value)


def wanted_index(wanted: list[str]):
    """The artifacts' model index, cut to the run's models."""
    index = model_index()
    return index[index["model_id"].isin(wanted)].reset_index(drop=True)


def models_read(analysis: Analysis, index):
    """The models an analysis's result depends on, as its cache key and its Context see them: every model, or for one
    that reads checkpoints alone (Needs.predictions False) the neural networks alone. Such an analysis starts once the
    networks are trained, while the n-grams and n-NNs may still be building: keyed by whatever of them was built by
    then, a cold run's result was never read by the next run."""
    return index if common.needs(analysis).predictions else index[index["family"] == "neural"].reset_index(drop=True)


def analysis_key(analysis: Analysis, models, settings: dict) -> str:
    """What an analysis's cached result in the report's data folder is good for: its source, its (resolved) settings
    and the models it reads (`models_read`: their ids, digests and folders); `analysis_job` reads the result instead
    of computing it when its `<name>.key` holds this."""
    return config_hash(
        {"analysis": analysis.name, "source": common.source_digest(analysis), "settings": settings,
         "models": sorted(models["model_id"] + ":" + models["digest"].map(_text) + ":" + models["dir"])},
        16,
    )  # fmt: skip


def cached_analyses(names: list[str], wanted: list[str], settings: dict[str, dict], data_dir: Path) -> set[str]:
    """The analyses a run would read from `data_dir` instead of computing, as the artifacts stand now: a model still
    to build or score changes the key, so its analyses count as computed."""
    data = Path(data_dir)
    candidates = [n for n in names if (data / f"{n}.key").is_file() and (data / f"{n}.findings.json").is_file()]
    if not candidates:
        return set()
    index = wanted_index(wanted)
    reused = set()
    for name in candidates:
        analysis = common.load_analysis(name)
        key = analysis_key(analysis, models_read(analysis, index), common.settings(analysis, settings.get(name, {})))
        if (data / f"{name}.key").read_text().strip() == key:
            reused.add(name)
    return reused


def cached_parts(names: list[str], wanted: list[str], settings: dict[str, dict]) -> set[str]:
    """The per-model parts ("<analysis>:<part>", Analysis.parts) whose results a run would read from the cache
    instead of computing (Analysis.part_cached), as the artifacts stand now; a part that cannot tell counts as
    computed."""
    if not holds_results():  # a cold run: nothing to look for
        return set()
    index = wanted_index(wanted)
    found = set()
    for name in names:
        analysis = common.load_analysis(name)
        if type(analysis).part_cached is Analysis.part_cached:  # it cannot tell: every part is priced as computed
            continue
        try:
            ctx = Context(index, common.settings(analysis, settings.get(name, {})), repair=False)
            found |= {f"{name}:{part}" for part in analysis.parts(ctx) if analysis.part_cached(ctx, part)}
        except Exception:  # its job says what is wrong; the estimate prices its parts as computed
            continue
    return found


def analysis_job(
    name: str, wanted: list[str], profile_settings: dict, data_dir: str, env: dict, threads: int, command: str = "",
    log: str | None = None,
) -> dict:  # fmt: skip
    """Run one analysis (or read its cached result) and build its report section; returns {"name", "status",
    "seconds", "section"} and, when it raised, "failed" (its one-line error) and "log" (its traceback's file).

    Any exception of the analysis is caught here, in the worker, where its traceback is whole; its result is then
    not keyed as good, so the next run computes it again. A KeyboardInterrupt is not caught: it stops the run."""
    started = time.perf_counter()
    data = Path(data_dir)
    key_path, figure_path = data / f"{name}.key", data / f"{name}.png"
    stage = "setup"
    try:
        worker_env(env, threads)
        index = wanted_index(wanted)  # built here, once the jobs this analysis waited for have finished
        analysis = common.load_analysis(name)
        settings = common.settings(analysis, profile_settings)
        index = models_read(analysis, index)
        key = analysis_key(analysis, index, settings)
        if key_path.exists() and key_path.read_text().strip() == key and (data / f"{name}.findings.json").exists():
            status, result = "cached", Result.load(data, name)
        else:
            key_path.unlink(missing_ok=True)  # what is below is not good until every step has run
            ctx = Context(index, settings, repair=True, say=say)
            stage = "compute(ctx)"
            try:
                result = common.run_analysis(analysis, ctx)
            except MissingInput as err:
                out = {"name": name, "missing": str(err), "seconds": round(time.perf_counter() - started, 1)}
                return {**out, "status": "missing input", "section": missing_section(analysis, str(err))}
            result.save(data, name)
            stage = "plot(result)"
            figure = analysis.plot(result)
            if figure is None:  # nothing worth drawing (e.g. text samples)
                figure_path.unlink(missing_ok=True)
            else:
                common.save_figure(figure, figure_path)
            status = "computed"
        stage = "the report section"
        figure = str(figure_path) if figure_path.exists() else None
        out = {"name": name, "status": status, "section": computed_section(analysis, result, figure)}
        if status == "computed":
            atomic.write_text(key_path, key)  # only now: a section that fails to build is computed again next run
    except Exception as err:
        key_path.unlink(missing_ok=True)
        out = failed_result(name, err, stage, command, Path(log) if log else None)
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def analysis_part_job(name: str, part: str, wanted: list[str], profile_settings: dict, env: dict, threads: int):
    """One part of an analysis (Analysis.parts), cached where its `compute` will find it. An exception here is left
    to the analysis's own job, which then computes the part itself and reports what fails."""
    try:
        worker_env(env, threads)
        index = wanted_index(wanted)
        analysis = common.load_analysis(name)
        ctx = Context(index, common.settings(analysis, profile_settings), repair=True, say=say)
        analysis.compute_part(ctx, part)
    except Exception as err:  # the analysis's job computes the part again and reports what fails, where
        return f"{part}: {error_line(err)}"
    return part


def analysis_parts(name: str, wanted: list[str], profile_settings: dict) -> list[str]:
    """The parts of an analysis over the models built so far (none when its models are still to be trained)."""
    index = wanted_index(wanted)
    analysis = common.load_analysis(name)
    try:
        return analysis.parts(Context(index, common.settings(analysis, profile_settings), repair=False))
    except Exception:  # its compute says what is wrong, in its own section
        return []


def failed_result(name: str, err: BaseException, stage: str, command: str, log: Path | None) -> dict:
    """What a failed analysis's section shows: the error, where it happened, how to reproduce it, its traceback."""
    if command and stage == "plot(result)":
        command += " " + shlex.join(["--figure", f"{name}.png"])  # the CLI draws only when asked
    if log is not None:
        write_log(log, err, f"analysis {name} failed in {stage}; reproduce with: {command}")
    try:
        analysis = common.load_analysis(name)
        title, question = analysis.title, analysis.question
    except Exception:  # the module does not even import: its name stands for its title
        title, question = name, ""
    section = Section(name=name, title=title, question=question, failed=error_line(err), failed_in=stage,
                      command=command, log=str(log) if log is not None else "")  # fmt: skip
    return {"name": name, "failed": error_line(err), "stage": stage, "command": command,
            "log": str(log) if log is not None else "", "status": "FAILED", "section": section}  # fmt: skip


def missing_section(analysis: Analysis, why: str) -> Section:
    return Section(name=analysis.name, title=analysis.title, question=analysis.question, missing=why)


def computed_section(analysis: Analysis, result: Result, figure: str | None) -> Section:
    """The section of a computed (or cached) result: the figure, what it shows, the findings as sentences (with their
    verdicts), the compact table and the paper's, the appendix's per-model tables, the deviations."""
    findings = []
    for f in result.findings:
        text = sentence(f)
        findings.append(f"{VERDICT_LABELS[f.verdict]}: {text}" if f.claim else text)
    return Section(
        name=analysis.name, title=analysis.title, question=analysis.question, shows=analysis.shows,
        findings=findings, verdicts=verdict_lines(analysis.name, analysis.claims, result.findings),
        table=analysis.summary_table(result), paper_table=analysis.paper_table(), paper_source=analysis.source,
        appendix=analysis.appendix(result), deviations=list(analysis.deviations), figure=figure,
        html=analysis.html(result),
    )  # fmt: skip
