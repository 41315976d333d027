"""Every sentence of the report, written from the analyses' findings in one place.

A finding (analyses.base.Finding) is a template and its values; this module fills the template (numbers formatted
one way everywhere), prefixes the verdict where a claim is tested, and builds the first page's verdict lines. No
sentence is typed anywhere else with a number or a model fact in it. `unsupported_numbers` is the check that
tests/test_prose.py runs on a whole report: every number a sentence states must be one the run's tables hold.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .base import Claim, Finding

VERDICT_LABELS = {"reproduced": "Reproduced", "partly": "Partly", "not reproduced": "Not reproduced", "new": "New",
                  "untested": "Untested"}  # fmt: skip
FIRST_PAGE_WORDS = 30  # a verdict line's length at most (issue 36)


def number(value) -> str:
    """A number as the report writes it when its template gives no format: integers with thousands separators,
    other numbers to 3 decimals (the papers' precision for nats per character)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return str(value)
    if isinstance(value, (int, np.integer)) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{float(value):g}" if abs(float(value)) >= 0.01 and len(f"{float(value):g}") <= 5 else f"{value:.3f}"


class _Formatter(string.Formatter):
    def format_field(self, value, format_spec):
        return format(value, format_spec) if format_spec else number(value)


def sentence(finding: Finding) -> str:
    """The finding's template filled with its values."""
    return _Formatter().vformat(finding.template, (), finding.values)


@dataclass
class VerdictLine:
    """One line of the first page: a claim of the papers, our verdict, the sentence, the section it comes from."""

    verdict: str
    label: str  # "Reproduced", ...
    claim: Claim
    text: str  # the finding's sentence
    section: str  # the section's anchor
    corpus: str | None


def verdict_lines(section: str, claims: tuple[Claim, ...], findings: list[Finding]) -> list[VerdictLine]:
    """The first finding of each claim (per corpus), as the first page's lines."""
    lines, seen = [], set()
    by_id = {c.id: c for c in claims}
    for f in findings:
        if f.claim is None or f.claim not in by_id or (f.claim, f.corpus) in seen:
            continue
        seen.add((f.claim, f.corpus))
        lines.append(VerdictLine(f.verdict, VERDICT_LABELS[f.verdict], by_id[f.claim], sentence(f), section, f.corpus))
    return lines


# ------------------------------------------------------------------------------------------ the check

_NUMBER = re.compile(r"(?<![\w.])[-+−]?\d[\d,]*(?:\.\d+)?(?![\w])")


def numbers_in(text: str) -> list[tuple[float, int]]:
    """The numbers a sentence states, each with its decimals ("1.234" -> (1.234, 3); "12,000" -> (12000, 0))."""
    found = []
    for match in _NUMBER.finditer(text):
        raw = match.group(0).replace(",", "").replace("−", "-")
        decimals = len(raw.split(".")[1]) if "." in raw else 0
        found.append((float(raw), decimals))
    return found


def table_values(frames: list[pd.DataFrame]) -> np.ndarray:
    """Every finite number of the tables (and of text cells that are numbers), as one array."""
    values = []
    for df in frames:
        for column in df.columns:
            numeric = pd.to_numeric(df[column], errors="coerce").to_numpy(dtype=float)
            values.append(numeric[np.isfinite(numeric)])
    return np.unique(np.concatenate(values)) if values else np.zeros(0)


def supported(value: float, decimals: int, values: np.ndarray) -> bool:
    """Whether a number written with `decimals` decimals is one of `values` at that precision, as it is, as a
    percentage (12.5 % of a fraction 0.125) or as a magnitude (a gap of 0.05 for a difference of -0.05)."""
    if values.size == 0:
        return False
    tolerance = 0.5 * 10.0**-decimals + 1e-9
    return bool(
        np.any(np.abs(values - value) <= tolerance)
        or np.any(np.abs(np.abs(values) - abs(value)) <= tolerance)
        or np.any(np.abs(100.0 * values - value) <= tolerance)
    )


def unsupported_numbers(text: str, frames: list[pd.DataFrame], allowed: tuple[float, ...] = ()) -> list[str]:
    """The numbers of `text` that no table of `frames` holds at the precision written (`allowed`: constants the
    template itself states, e.g. a threshold the paper defines)."""
    values = table_values(frames)
    out = []
    for value, decimals in numbers_in(text):
        if value in allowed or supported(value, decimals, values):
            continue
        out.append(f"{value:.{decimals}f}")
    return out
