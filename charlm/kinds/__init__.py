"""The kinds of model the suite plans, builds, prices, scores and reads (see base.py for the interface).

    recurrent.py   RECURRENT  "neural"   the recurrent networks of charlm.archs (charlm.train)
    ngram.py       NGRAM      "ngram"    KenLM n-grams (charlm.ngram)
    nnn.py         NNN_KIND   "nnn"      n-NN baselines (charlm.nnn)
    adopted.py     ADOPTED    "adopted"  a user's own PyTorch network, mapped onto the suite's cells (charlm.adopt)

Adding a kind: a module here with a `ModelKind` subclass, and its instance in KINDS.
"""

from __future__ import annotations

from pathlib import Path

from corpora.errors import UserError

from .adopted import ADOPTED
from .base import Job, ModelKind, Planned, Work, worker_env
from .ngram import NGRAM
from .nnn import NNN_KIND
from .recurrent import RECURRENT

KINDS: list[ModelKind] = [ADOPTED, RECURRENT, NGRAM, NNN_KIND]  # the order `of` asks them and a plan lists them


def kind(name: str) -> ModelKind:
    """The kind called `name` (the model index's `family`)."""
    for k in KINDS:
        if k.name == name:
            return k
    raise UserError(f"unknown kind of model {name!r}: one of {', '.join(k.name for k in KINDS)}")


def baselines() -> list[str]:
    """The names of the kinds the networks are compared with (their models have an order n): Table 2's families."""
    return [k.name for k in KINDS if k.baseline]


def of(metrics: dict, folder: Path | None = None, payload_kind: str | None = None) -> ModelKind:
    """The kind that owns a model folder (its complete metrics.json) or a checkpoint (its payload's "kind")."""
    for k in KINDS:
        if k.owns(folder, metrics, payload_kind):
            return k
    what = folder or f"a '{payload_kind}' checkpoint"
    raise UserError(f"{what} is not a model of any kind the suite knows ({', '.join(k.name for k in KINDS)})")


RECURRENT_KIND = RECURRENT

__all__ = [
    "KINDS", "RECURRENT_KIND", "Job", "ModelKind", "Planned", "Work", "baselines", "kind", "of", "worker_env",
]  # fmt: skip
