"""Run many independent jobs through a `concurrent.futures.Executor`.

Local processes by default; with a scheduler address (or $DASK_SCHEDULER), a Dask distributed
cluster through `Client(address).get_executor()`. Jobs are plain top-level functions with
plain arguments, so the same job list runs anywhere, and artifacts are keyed by config hash, so
a job that a previous (or interrupted) sweep finished returns at once.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from typing import Any

from tqdm import tqdm

from corpora.errors import UserError

from .cost import Countdown


@contextlib.contextmanager
def executor(scheduler: str | None = None, workers: int | None = None) -> Iterator[Executor]:
    """A local process pool, or a Dask cluster's executor when `scheduler` (or $DASK_SCHEDULER) is set."""
    scheduler = scheduler or os.environ.get("DASK_SCHEDULER") or None
    if scheduler:
        try:
            from distributed import Client
        except ImportError:  # pragma: no cover - distributed is a dependency
            raise UserError("a Dask scheduler was given but dask.distributed is not installed") from None
        try:
            client = Client(scheduler, timeout="20s")
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
    pool: Executor,
    tasks: Iterable[Callable[[], Any]],
    desc: str = "jobs",
    estimates: list[float] | None = None,
    workers: int = 1,
) -> list[Any]:
    """Submit every task (a picklable callable, e.g. functools.partial of a top-level function).

    Results come back in task order. A failing task does not stop the others (their artifacts
    are kept); the first error is raised once all have finished. With `estimates` (seconds per
    task, charlm.cost.Estimate.job_seconds) the progress line says the time left across all tasks
    on `workers` workers (charlm.cost.Countdown).
    """
    tasks = list(tasks)
    futures = {pool.submit(task): k for k, task in enumerate(tasks)}
    results: list[Any] = [None] * len(tasks)
    errors = []
    countdown = Countdown(estimates, workers) if estimates and any(estimates) else None
    bar = tqdm(as_completed(futures), total=len(tasks), desc=desc, unit="job")
    if countdown:
        bar.set_postfix_str(countdown.postfix())
    for future in bar:
        try:
            results[futures[future]] = future.result()
        except Exception as err:
            errors.append(err)
        if countdown:
            countdown.done(futures[future])
            bar.set_postfix_str(countdown.postfix(), refresh=False)
    if errors:
        raise errors[0]
    return results
