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
    return_exceptions: bool = False,
    estimates: list[float] | None = None,
    workers: int = 1,
) -> list[Any]:
    """Submit every task (a picklable callable, e.g. functools.partial of a top-level function).

    Results come back in task order. A failing task does not stop the others (their artifacts
    are kept). Once all have finished, the first error is raised; with `return_exceptions`, each
    failing task's exception takes its place in the results instead (its traceback attached: a
    local pool chains the worker's as `__cause__`), and nothing is raised. Only `Exception`s are
    collected: a KeyboardInterrupt, here or from a worker, cancels the jobs not yet started and
    propagates. With `estimates` (seconds per task, charlm.cost.Estimate.job_seconds) the progress
    line says the time left across all tasks on `workers` workers (charlm.cost.Countdown).
    """
    tasks = list(tasks)
    futures = {pool.submit(task): k for k, task in enumerate(tasks)}
    results: list[Any] = [None] * len(tasks)
    errors = []
    countdown = Countdown(estimates, workers) if estimates and any(estimates) else None
    try:
        progress = tqdm(as_completed(futures), total=len(tasks), desc=desc, unit="job")
        if countdown:
            progress.set_postfix_str(countdown.postfix())
        for future in progress:
            try:
                results[futures[future]] = future.result()
            except Exception as err:
                errors.append(err)
                results[futures[future]] = err
            if countdown:
                countdown.done(futures[future])
            postfix = countdown.postfix() if countdown else ""
            if errors:
                postfix = f"{postfix}, failed={len(errors)}" if postfix else f"failed={len(errors)}"
            if postfix:
                progress.set_postfix_str(postfix, refresh=False)
    except BaseException:
        for future in futures:
            future.cancel()
        raise
    if errors and not return_exceptions:
        raise errors[0]
    return results
