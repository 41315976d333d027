"""What a kind of model is to the suite: one object answers every question that used to be a string switch.

A kind (a recurrent network, a KenLM n-gram, an n-NN, a user's adopted network) says which models a profile needs
(`plan`), whether a built one is whole (`damage`), the jobs that build it and score what the analyses read (`jobs`),
what those jobs do in units the estimate prices (`Work`), how it appears in the model index (`index_row`), how its
Predictions of a split are made (`predictions`) and how to load it for sampling, scoring and the viewer (`load`).
Planning, the pipeline's jobs, the estimate, the analyses' Context and the viewer all ask the kind; nothing compares
kind names. Adding a kind is one module in charlm/kinds/ and one line in `charlm.kinds.KINDS`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # pragma: no cover
    import corpora
    from charlm.plan import Profile


@dataclass
class Planned:
    """One model a run needs: its kind, corpus, id and folder, and the kind's own settings."""

    kind: ModelKind  # what it is (charlm.kinds.KINDS)
    corpus_arg: str  # what a worker loads: a registry name or a file path
    corpus: corpora.Corpus
    model_id: str
    directory: Path  # its folder under the artifacts root
    config: Any = None  # the kind's config: a TrainConfig (recurrent), an NNNConfig (n-NN), None (n-gram)
    n: int | None = None  # a baseline's order (previous characters seen)
    shipped: Path | None = None  # its folder in models/<profile>/ when the repository ships it: installed, not trained
    stand_in_for: str | None = None  # the id of the model this shipped one stands in for until that one ships
    source: Path | None = None  # an adopted model's file

    @property
    def label(self) -> str:
        return f"{self.corpus.name}/{self.model_id}"


@dataclass
class Work:
    """What one job does, in the units the estimate prices (charlm.estimate): the same for any machine."""

    what: str  # "train", "score", "build" (a KenLM n-gram: lmplz + build_binary + scoring)
    units: float  # characters trained, characters read while scoring, or train tokens x order for KenLM
    shape: str  # what the seconds per unit depend on besides the machine: "lstm L3 H68", "ngram n=20", ...
    params: int = 0  # the model's parameters (a fallback's scale between shapes)
    layers: int = 1  # the network's depth (rule 3 prices a new shape per layer and per parameter)


@dataclass
class Job:
    """A unit of work the pipeline runs in a worker and the estimate prices: shared by both (no name parsing)."""

    key: str  # unique in a run: "score:warpeace/lstm-L1-H128-s0-558c1c", "analysis:cells", ...
    run: Callable[[], Any]  # a picklable call (a functools.partial of a top-level function)
    work: Work | None = None  # what it does, for the estimate (None: an analysis, priced by its record)
    model: Planned | None = None  # the model it makes, if any
    after: tuple[str, ...] = ()  # keys of the jobs that must finish before it starts
    seconds: float = 0.0  # its estimate, set by charlm.estimate
    priced_by: str = ""  # how the estimate priced it ("recorded", "scaled from ...", ...)
    extra: dict = field(default_factory=dict)


class ModelKind:
    """The interface every kind of model implements (see the module docstring)."""

    name: ClassVar[str]  # the model index's `family` and the plan's `kind` column
    label: ClassVar[str]  # how the report names the kind
    recurrent: ClassVar[bool] = False  # has a state and internals: traces, probes and gradients apply
    ships: ClassVar[bool] = False  # a profile that ships its models ships this kind's (models/<profile>/)
    baseline: ClassVar[bool] = False  # a model the networks are compared with, named by its order n (Table 2's
    # columns): the baseline table (analyses.ngram) and model_agreement read every such kind

    def __repr__(self) -> str:  # plans and errors print the kind by its name
        return self.name

    def __reduce__(self):  # the kinds are singletons: a worker gets its own module's instance back
        return (_kind, (self.name,))

    # -- planning
    def plan(self, profile: Profile, corpus: corpora.Corpus, corpus_arg: str, extra_orders=((), ())) -> list[Planned]:
        """The models of this kind a run of `profile` needs on one corpus."""
        return []

    def damage(self, planned: Planned) -> str | None:
        """None if the model is complete and whole; "not built" when absent; else what is damaged."""
        raise NotImplementedError

    def jobs(self, planned: Planned, env: dict, threads: int, splits: str, snapshots: bool, problem: str | None):
        """The jobs that build `planned` (when `problem` says it is not whole) and score what the analyses read."""
        raise NotImplementedError

    def describe(self, planned: Planned) -> dict:
        """Its columns of `--plan`: arch, layers, width, dropout, seed, params, budget row, train chars."""
        raise NotImplementedError

    def order_label(self, n: int) -> str:
        """A baseline of order n (previous characters seen) in a figure's legend: "5-gram", "3-NN", ..."""
        return f"{self.name} n={n}"

    # -- reading
    def index_row(self, metrics: dict, directory: Path) -> dict:
        """Its columns of the model index (analyses.context.INDEX_COLUMNS) from a complete metrics.json."""
        raise NotImplementedError

    def predictions(self, row, corpus, split: str, snapshot: str | None, repair: bool, progress: bool) -> Path:
        """The Predictions file of one split (computed if missing), for a model index row."""
        raise NotImplementedError

    def owns(self, folder: Path, metrics: dict, payload_kind: str | None) -> bool:
        """Whether a model folder (its metrics) or a checkpoint (its payload's "kind") is of this kind."""
        return False

    def load(self, path: Path, metrics: dict):
        """An `charlm.anymodel.AnyModel` of a folder or checkpoint of this kind (sampling, scoring, the viewer)."""
        raise NotImplementedError


def _kind(name: str) -> ModelKind:
    from . import kind

    return kind(name)


# glibc's malloc serves a block above 128 KiB (its default threshold, raised as blocks are freed) with a fresh mmap and
# gives it back on free, so every large temporary (numpy, torch, scikit-learn) is zeroed by the kernel page by page:
# a cold default report took 35.8 million minor page faults and 132 s of system time (2026-11-29). Workers keep freed
# memory for the next block instead: these mallopt(3) parameters, as MALLOC_MMAP_THRESHOLD_ etc. would set them.
KEEP_FREED_BYTES = 256 * 2**20  # blocks up to this come from the heap, which keeps this much free memory at its top
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # mallopt's parameter numbers (<malloc.h>)


@functools.cache
def keep_freed_memory(nbytes: int = KEEP_FREED_BYTES) -> bool:
    """Tell glibc's malloc to reuse freed memory up to `nbytes` blocks instead of unmapping it (no effect, and False,
    where the C library is not glibc); once per process. Only speed changes: the same allocations, fewer faults."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the process runs on
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = [mallopt(param, nbytes) for param in (_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD, _M_TOP_PAD)]
    return all(v == 1 for v in ok)


def worker_env(env: dict, threads: int) -> None:
    """A worker's environment: artifacts and corpora where the parent has them; `threads` for torch AND for numpy's
    BLAS (scikit-learn and scipy call it): with 2 workers on 2 cores, BLAS's default of one thread per core made the
    probes 3.7x slower; and freed memory reused (keep_freed_memory)."""
    import os

    os.environ.update(env)
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    threadpool_limits(threads)
    keep_freed_memory()
