"""The analysis contract: what every analysis declares, computes and returns.

An analysis is one module `analyses/<name>.py` holding one `Analysis` subclass and its instance `ANALYSIS`:

    name, title, question      what it asks (the report's section heading and question)
    source                     the papers it follows (sections, figures, tables)
    claims                     the papers' claims it tests, each with the paper's numbers (`Claim`)
    needs, settings            what it reads (analyses.context.Needs) and its settings with their defaults
    shows                      one sentence: what its figure shows (no numbers: those are findings)
    deviations                 where we deviate from the papers, and why
    compute(ctx) -> Result     tables (tidy: one row per observation) and findings (`Finding`), from the Context
    plot(result) -> Figure     the figure that mirrors the paper's (None: nothing worth drawing)
    summary_table(result)      the one compact table its section shows (None: the figure says it all)
    appendix(result)           the per-model tables (the report's appendix)

A finding is data, not prose: a template whose every number and model fact is a field of its `values`, a verdict
against the claim it tests, and the corpus it is about. reports.prose writes every sentence of the report from
findings in one place, and tests/test_prose.py fails when a sentence states a number the run's tables do not hold.
"""

from __future__ import annotations

import json
import string
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from corpora import atomic

from .context import Context, Needs

VERDICTS = ("reproduced", "partly", "not reproduced", "new", "untested")


@dataclass(frozen=True)
class Claim:
    """A claim of the papers that an analysis tests."""

    id: str  # unique in the report, e.g. "fig1-rnn-behind"
    source: str  # where the paper makes it: "Karpathy et al. (2016) sec 4.1, Fig 1 left"
    text: str  # the claim, short, in the paper's terms
    paper: str = ""  # the paper's numbers as it states them ("" when it gives none)


@dataclass
class Finding:
    """One thing the run found, as data (reports.prose writes it as a sentence)."""

    template: str  # the sentence: every number and model fact a {field} of `values` ({ce:.3f} formats a number)
    values: dict = field(default_factory=dict)  # the fields: numbers from the result's tables, names, counts
    verdict: str = "new"  # against `claim`: reproduced | partly | not reproduced | new (no claim) | untested
    claim: str | None = None  # the Claim.id it tests; the first finding of a claim is its verdict on page one
    corpus: str | None = None  # the corpus it is about (None: every corpus of the run)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")
        missing = {f for _, f, _, _ in string.Formatter().parse(self.template) if f} - set(self.values)
        if missing:
            raise ValueError(f"finding {self.template!r} lacks the values {sorted(missing)}")
        self.values = {k: _plain(v) for k, v in self.values.items()}


def _plain(value):
    """A value as JSON keeps it: numpy scalars become Python numbers."""
    if isinstance(value, np.generic):
        return value.item()
    return value


@dataclass
class Result:
    """What `compute` returns: the tidy table, more tables, findings, and arrays no table holds."""

    table: pd.DataFrame  # the tidy table: data/<name>.csv
    findings: list[Finding] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)  # data/<name>.<key>.csv
    arrays: dict[str, np.ndarray] = field(default_factory=dict)  # data/<name>.npz (e.g. the activation viewer's)

    def save(self, data_dir: Path, name: str) -> list[Path]:
        """Write every part under data_dir (atomically); returns the files written."""
        from .common import save_table

        paths = [save_table(self.table, data_dir / f"{name}.csv")]
        for key, table in self.tables.items():
            paths.append(save_table(table, data_dir / f"{name}.{key}.csv"))
        findings = data_dir / f"{name}.findings.json"
        atomic.write_text(findings, json.dumps([asdict(f) for f in self.findings], indent=1))
        paths.append(findings)
        if self.arrays:
            with atomic.atomic_path(data_dir / f"{name}.npz", suffix=".tmp.npz") as tmp:
                np.savez(tmp, **self.arrays)
            paths.append(data_dir / f"{name}.npz")
        return paths

    @classmethod
    def load(cls, data_dir: Path, name: str) -> Result:
        """The result `save` wrote (a cached analysis)."""
        from .common import read_table

        table = read_table(data_dir / f"{name}.csv")
        tables = {p.name[len(name) + 1 : -4]: read_table(p) for p in sorted(data_dir.glob(f"{name}.*.csv"))}
        findings = [Finding(**f) for f in json.loads((data_dir / f"{name}.findings.json").read_text())]
        arrays = {}
        if (data_dir / f"{name}.npz").exists():
            with np.load(data_dir / f"{name}.npz", allow_pickle=False) as f:
                arrays = {k: f[k] for k in f.files}
        return cls(table, findings, tables, arrays)


def majority(holds: int, of: int) -> str:
    """The verdict of a claim tested `of` times, holding `holds` times: all: reproduced; at least half: partly;
    fewer: not reproduced; none tested: untested. The rule every analysis's counted claims share."""
    if not of:
        return "untested"
    return "reproduced" if holds == of else ("partly" if 2 * holds >= of else "not reproduced")


class Analysis:
    """The contract every analysis implements (see the module docstring)."""

    name: ClassVar[str]
    title: ClassVar[str]
    question: ClassVar[str]
    source: ClassVar[str] = ""  # the papers it follows
    claims: ClassVar[tuple[Claim, ...]] = ()
    needs: ClassVar[Needs] = Needs()
    settings: ClassVar[dict] = {}
    shows: ClassVar[str] = ""  # one sentence: what the figure shows
    deviations: ClassVar[tuple[str, ...]] = ()  # where we deviate from the papers, and why

    def compute(self, ctx: Context) -> Result:
        raise NotImplementedError

    def parts(self, ctx: Context) -> list[str]:
        """Independent pieces of `compute` (one model each, say) that the pipeline may run as jobs of their own,
        beside other work and before `compute`: each `compute_part` stores its result in `ctx.cached`, where
        `compute` then finds it. [] (the default): `compute` does all the work."""
        return []

    def compute_part(self, ctx: Context, part: str) -> None:
        raise NotImplementedError

    def part_cached(self, ctx: Context, part: str) -> bool:
        """Whether `compute_part(ctx, part)` would find its result in `ctx.cached` already (an earlier run's): the
        estimate prices such a part as that read. False when unsure: the part is then priced as computed."""
        return False

    def plot(self, result: Result):
        return None

    def summary_table(self, result: Result) -> pd.DataFrame | None:
        return None

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        return {}

    def paper_table(self) -> pd.DataFrame | None:
        return None

    def html(self, result: Result) -> str:
        """An interactive fragment it escaped itself (the activation viewer); "" for none."""
        return ""

    def claim(self, claim_id: str) -> Claim:
        return next(c for c in self.claims if c.id == claim_id)
