"""Run many independent jobs through a `concurrent.futures.Executor`.

Local processes by default; with a scheduler address (or $DASK_SCHEDULER), a Dask distributed
cluster through `Client(address).get_executor()`. Jobs are plain top-level functions with
plain arguments, so the same job list runs anywhere, and artifacts are keyed by config hash, so
a job that a previous (or interrupted) sweep finished returns at once.
"""
from __future__ import annotations

import contextlib
import os
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from typing import Any, Callable, Iterable, Iterator

from tqdm import tqdm

from corpora.errors import UserError


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
    fn: Callable[..., Any],
    jobs: Iterable[dict],
    desc: str = "jobs",
    on_result: Callable[[dict, Any], None] | None = None,
) -> list[Any]:
    """Submit fn(**job) for every job; results come back in job order. Errors propagate after all others finish."""
    jobs = list(jobs)
    futures = {pool.submit(fn, **job): k for k, job in enumerate(jobs)}
    results: list[Any] = [None] * len(jobs)
    errors = []
    for future in tqdm(as_completed(futures), total=len(jobs), desc=desc, unit="job"):
        k = futures[future]
        try:
            results[k] = future.result()
        except Exception as err:  # keep the other jobs' artifacts; report every failure at the end
            errors.append(err)
            continue
        if on_result:
            on_result(jobs[k], results[k])
    if errors:
        raise errors[0]
    return results
