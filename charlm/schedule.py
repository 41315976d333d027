"""A priced job graph run on a number of workers: its wall time as the pipeline schedules it (`schedule`: a job starts
when the jobs it needs have finished, longest remaining path first), the progress line's time left while it runs
(`Countdown`), and durations as the suite prints them. charlm.estimate prices the jobs; charlm.sweep runs them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


def critical_paths(jobs: list) -> dict[str, float]:
    """Each job's seconds plus the longest chain of jobs that wait for it: the pipeline starts the largest first."""
    after: dict[str, list] = {j.key: [] for j in jobs}
    for j in jobs:
        for k in j.after:
            if k in after:
                after[k].append(j)
    memo: dict[str, float] = {}

    def path(j) -> float:
        if j.key not in memo:
            memo[j.key] = j.seconds + max((path(n) for n in after[j.key]), default=0.0)
        return memo[j.key]

    return {j.key: path(j) for j in jobs}


def schedule(jobs: list, workers: int) -> float:
    """The wall seconds of `jobs` (with their `seconds` and `after`) on `workers` workers, as the pipeline runs
    them: whenever a worker is free, the ready job with the longest critical path starts."""
    priority = critical_paths(jobs)
    keys = {j.key for j in jobs}
    pending, done, running, now = list(jobs), {}, [], 0.0
    while pending or running:
        ready = [j for j in pending if all(k in done or k not in keys for k in j.after)]
        ready.sort(key=lambda j: -priority[j.key])
        while ready and len(running) < workers:
            j = ready.pop(0)
            pending.remove(j)
            running.append((now + j.seconds, j))
        if not running:
            break  # a cycle: cannot happen with the pipeline's jobs
        running.sort(key=lambda pair: pair[0])
        now, finished = running.pop(0)
        done[finished.key] = now
    return now


@dataclass
class Countdown:
    """The time left of a running job graph, for the progress line: what is still to run scheduled as `schedule`
    does, with each running job's estimate less the time it has run (at least a tenth of its estimate: a job that
    runs over still has something left, rather than "0 s left"), all scaled by how fast this machine goes now
    (`speed`)."""

    jobs: list
    workers: int
    started: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)

    CACHED = 0.2  # a job done in under this share of its estimate found its work cached: it says nothing of speed

    def speed(self, now: float | None = None) -> float:
        """Seconds taken per second estimated, over the finished jobs that did their work and the running jobs
        already past their estimate (their time so far is a lower bound of what they take): a warm run's cached
        parts, done at once, would otherwise price the analyses still to run at a quarter of their time, and a
        loaded machine's long analysis would stay "a few seconds" from its end for minutes."""
        now = time.perf_counter() if now is None else now
        spent = planned = 0.0
        for j in self.jobs:
            if j.seconds <= 0 or j.key not in self.started:
                continue
            took = self.finished.get(j.key, now) - self.started[j.key]
            if (j.key in self.finished and took >= self.CACHED * j.seconds) or took > j.seconds:
                spent, planned = spent + took, planned + j.seconds
        return min(4.0, max(0.25, spent / planned)) if planned > 0 and spent > 0 else 1.0

    def left(self, now: float | None = None) -> float:
        now = time.perf_counter() if now is None else now
        f, rest = self.speed(now), []
        for j in self.jobs:
            if j.key in self.finished:
                continue
            seconds = f * j.seconds
            if j.key in self.started:
                seconds = max(0.1 * seconds, seconds - (now - self.started[j.key]))
            rest.append(_Timed(j.key, seconds, tuple(k for k in j.after if k not in self.finished)))
        return schedule(rest, self.workers)


@dataclass
class _Timed:
    key: str
    seconds: float
    after: tuple[str, ...] = ()


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    if seconds < 86400 * 2:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    return f"{seconds / 86400:.1f} days"
