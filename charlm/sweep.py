"""Run many independent jobs through a `concurrent.futures.Executor`.

Local processes by default; with a scheduler address (or $DASK_SCHEDULER), a Dask distributed
cluster through `Client(address).get_executor()`. Jobs are plain top-level functions with
plain arguments, so the same job list runs anywhere, and artifacts are keyed by config hash, so
a job that a previous (or interrupted) sweep finished returns at once.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, ProcessPoolExecutor, as_completed, wait
from typing import Any

from tqdm import tqdm

from corpora.errors import UserError


@contextlib.contextmanager
def executor(
    scheduler: str | None = None, workers: int | None = None, connect_timeout: str = "20s",
) -> Iterator[Executor]:  # fmt: skip
    """A local process pool, or a Dask cluster's executor when `scheduler` (or $DASK_SCHEDULER) is set.

    `connect_timeout`: how long Dask keeps trying to reach the scheduler before the one clear error."""
    scheduler = scheduler or os.environ.get("DASK_SCHEDULER") or None
    if scheduler:
        try:
            from distributed import Client
        except ImportError:  # pragma: no cover - distributed is a dependency
            raise UserError("a Dask scheduler was given but dask.distributed is not installed") from None
        try:
            client = Client(scheduler, timeout=connect_timeout)
        except OSError as err:
            raise UserError(f"cannot reach the Dask scheduler at {scheduler}: {err}") from None
        try:
            yield client.get_executor(pure=False)
        finally:
            client.close()
    else:
        workers = workers or max(1, (os.cpu_count() or 1) // 2)
        with ProcessPoolExecutor(max_workers=workers) as pool:
            yield pool


def run_jobs(
    pool: Executor, tasks: Iterable[Callable[[], Any]], desc: str = "jobs", return_exceptions: bool = False,
) -> list[Any]:  # fmt: skip
    """Submit every task (a picklable callable, e.g. functools.partial of a top-level function); results in task
    order. A failing task does not stop the others; once all have finished the first error is raised, or, with
    `return_exceptions`, each failing task's exception takes its place. A KeyboardInterrupt cancels the rest."""
    tasks = list(tasks)
    futures = {pool.submit(task): k for k, task in enumerate(tasks)}
    results: list[Any] = [None] * len(tasks)
    errors = []
    try:
        for future in tqdm(as_completed(futures), total=len(tasks), desc=desc, unit="job"):
            try:
                results[futures[future]] = future.result()
            except Exception as err:
                errors.append(err)
                results[futures[future]] = err
    except BaseException:
        for future in futures:
            future.cancel()
        raise
    if errors and not return_exceptions:
        raise errors[0]
    return results


def run_graph(
    pool: Executor, jobs: list, workers: int, desc: str = "jobs", on_done: Callable[[Any, Any], None] | None = None
) -> dict[str, Any]:
    """Run a job graph (charlm.kinds.base.Job: `key`, `run`, `after`, `seconds`) on `workers` workers: whenever one
    is free, the ready job with the longest remaining path starts (the order charlm.schedule.schedule assumes), so
    an analysis that needs only checkpoints starts beside the models' scoring instead of after it. A job runs once
    the jobs before it have finished, failed or not (an analysis reads what was built). Returns {key: result or
    exception}; `on_done(job, result)` is
    called as each finishes. The progress line's time left is recomputed every second from the estimates
    (charlm.schedule.Countdown), so it stays honest while one long job runs."""
    from .schedule import Countdown, critical_paths, duration

    priority = critical_paths(jobs)
    known = {j.key for j in jobs}
    pending = sorted(jobs, key=lambda j: -priority[j.key])
    running: dict = {}
    results: dict[str, Any] = {}
    countdown = Countdown(jobs, workers)
    tty = sys.stderr.isatty()  # in a log, a line every half minute rather than one a second
    # no tqdm rate or time left: jobs differ 1000-fold in length, so its extrapolation contradicts the countdown
    bar = tqdm(
        total=len(jobs),
        desc=desc,
        unit="job",
        mininterval=1.0 if tty else 30.0,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} jobs [{elapsed}{postfix}]",
    )
    try:
        while pending or running:
            for job in list(pending):
                if len(running) >= workers:
                    break
                waits = [k for k in job.after if k in known and k not in results]
                if waits:
                    continue
                pending.remove(job)  # it runs even when a job before it failed: an analysis reads the other models
                countdown.started[job.key] = time.perf_counter()
                running[pool.submit(job.run)] = job
            if not running:
                if pending and all(any(k in known and k not in results for k in j.after) for j in pending):
                    raise RuntimeError(f"jobs wait for each other: {', '.join(j.key for j in pending)}")
                continue
            done, _ = wait(running, timeout=1.0, return_when=FIRST_COMPLETED)
            for future in done:
                job = running.pop(future)
                try:
                    results[job.key] = future.result()
                except Exception as err:
                    results[job.key] = err
                countdown.finished[job.key] = time.perf_counter()
                job.extra["seconds"] = round(countdown.finished[job.key] - countdown.started[job.key], 2)
                bar.update(1)
                if on_done is not None:
                    on_done(job, results[job.key])
            bar.set_postfix_str(f"about {duration(countdown.left())} left", refresh=tty)
    except BaseException:
        for future in running:
            future.cancel()
        raise
    finally:
        bar.close()
    return results
