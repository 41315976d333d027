"""Tables as the report draws them: a DataFrame turned into rows of already-formatted strings (`table_view`), so
that escaping, number formatting and alignment live in one place (reports/render.py lays them out, one template
macro draws them), with the widths that decide whether a table fits the page, wraps or is printed in parts.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
import pandas as pd


def _is_missing(value: object) -> bool:
    return (
        value is None
        or value is pd.NA
        or value is pd.NaT
        or (isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) and math.isnan(value))
    )


def _float_format(values: pd.Series) -> str:
    """One format per column, so decimals line up: 3 decimals unless whole, huge or tiny."""
    finite = values[values.map(lambda v: not _is_missing(v) and math.isfinite(v))].abs()
    nonzero = finite[finite > 0]
    if nonzero.empty or (finite % 1 == 0).all() or nonzero.min() >= 1000:
        return ",.0f"
    if nonzero.min() < 1e-3:
        return ".3g"
    return ",.3f"


def format_cell(value: object, float_format: str = ".3f") -> str:
    """Text of one table cell: thousands separators, yes/no, an em dash when missing."""
    if _is_missing(value):
        return "—"
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    if isinstance(value, numbers.Real):
        return format(float(value), float_format) if math.isfinite(value) else str(float(value))
    return str(value)


# Print layouts from most to least readable: (CSS size class, landscape page, capacity in
# characters of a full-width table row). Capacities are for DejaVu Sans (digits 0.64 em)
# at 8.5/7/5.5 pt on the 180 mm (portrait) or 267 mm (landscape) text width of A4.
PRINT_FITS = [("normal", False, 94), ("small", False, 114), ("small", True, 169), ("tiny", True, 215)]
LONG_TABLE = 12  # rows: a longer table narrow enough to stand two or three times across the page is printed in columns


@dataclass
class TableView:
    """A DataFrame reduced to what the template draws: header, strings, alignment."""

    columns: list[str]
    numeric: list[bool]
    rows: list[list[str]]
    keys: int | None = None  # how many leading columns name a row: a meaningful index's levels (see key_columns)

    @property
    def breakable(self) -> list[bool]:
        """Columns holding long unbroken text (hashes, code) that may wrap anywhere.

        Only these: letting every cell wrap anywhere makes browsers squeeze short
        columns ("model", "corpus") down to one character per line.
        """
        return [any(len(word) > 24 for row in self.rows for word in row[i].split()) for i in range(len(self.columns))]

    def column_width(self, i: int, squeezed: bool = False) -> int:
        """Rough width of column i in characters: its header wraps at spaces, numbers never wrap, text is counted
        as wrapped at 30 characters (`squeezed`: at its longest word, the least a page can give it); plus padding."""
        header_word = max((len(w) for w in self.columns[i].split()), default=0)
        if self.numeric[i]:
            cells = max((len(row[i]) for row in self.rows), default=0)
        elif squeezed:
            cells = max((len(w) for row in self.rows for w in row[i].split()), default=0)
        else:
            cells = min(30, max((len(row[i]) for row in self.rows), default=0))
        return 2 + max(header_word, cells)

    @property
    def width(self) -> int:
        """Rough width of the table in characters with its text wrapped comfortably (the sum of :meth:`column_width`):
        what picks its print layout (:attr:`fit`)."""
        return sum(self.column_width(i) for i in range(len(self.columns)))

    @property
    def squeezed_width(self) -> int:
        """The least width the table can be printed at, in characters: every text cell and header wrapped at its
        longest word, the numbers whole (the sum of :meth:`column_width` squeezed)."""
        return sum(self.column_width(i, squeezed=True) for i in range(len(self.columns)))

    @property
    def fit(self) -> tuple[str, bool]:
        """(size class, landscape) of the most readable print layout the table fits; the smallest layout when it
        fits none (see :attr:`overflows`). A table too wide for the portrait page with its text wrapped comfortably
        still prints there at the small size when its text can wrap to fit (its :attr:`squeezed_width` does): a
        landscape page is for tables whose numbers and words alone are too wide, since it takes the section's
        tables off the pages of its figure (issue 36)."""
        width, squeezed = self.width, self.squeezed_width
        size, landscape, _ = next(
            (f for f in PRINT_FITS if width <= f[2] or (f[0] == "small" and not f[1] and squeezed <= f[2])),
            PRINT_FITS[-1],
        )
        return size, landscape

    @property
    def overflows(self) -> bool:
        """Too wide for the smallest landscape layout even with every text cell wrapped at its longest word (its
        numbers and header words alone overflow): then it is printed in parts (:meth:`print_parts`)."""
        return self.squeezed_width > PRINT_FITS[-1][2]

    @property
    def print_columns(self) -> int:
        """How many columns of the page the PDF prints the table in, its rows running on from one to the next under
        the repeated header: a long table (more than LONG_TABLE rows) as many times as it stands across a portrait
        row at its size (at most 3), e.g. a paper's numbers as one long list; 1 for any other table."""
        size, landscape = self.fit
        if len(self.rows) <= LONG_TABLE or landscape:
            return 1
        capacity = next(f[2] for f in PRINT_FITS if f[:2] == (size, landscape))
        return max(1, min(3, capacity // (self.width + 4)))  # 4: the gap between two columns

    @property
    def key_columns(self) -> int:
        """How many leading columns name a row: the levels of the DataFrame's index when it had a meaningful one,
        else its text columns before the first number (1 to 3)."""
        if self.keys:
            return min(self.keys, len(self.columns))
        keys = 0
        while keys < min(3, len(self.columns) - 1) and not self.numeric[keys]:
            keys += 1
        return max(1, keys)

    def columns_view(self, indices: list[int]) -> TableView:
        keys = sum(i < self.key_columns for i in indices)
        return TableView([self.columns[i] for i in indices], [self.numeric[i] for i in indices],
                         [[row[i] for i in indices] for row in self.rows], keys)  # fmt: skip

    def print_parts(self) -> list[TableView]:
        """The table as the PDF prints it: whole when it fits the smallest layout; else cut into parts of its
        columns, in order, each as wide as that layout allows and each repeating the key columns, so no column
        runs off the page. The HTML shows it whole."""
        if not self.overflows:
            return [self]
        keys = list(range(self.key_columns))
        room = PRINT_FITS[-1][2] - sum(self.column_width(i) for i in keys)
        parts, used = [[]], 0
        for i in range(len(keys), len(self.columns)):
            width = self.column_width(i)
            if parts[-1] and used + width > room:
                parts.append([])
                used = 0
            parts[-1].append(i)
            used += width
        return [self.columns_view(keys + part) for part in parts]


def table_view(df: pd.DataFrame) -> TableView:
    """Format a DataFrame; a meaningful (non-default) index becomes ordinary columns, the key columns a printed
    part repeats (TableView.print_parts)."""
    keys = None
    if not isinstance(df.index, pd.RangeIndex) or any(n is not None for n in df.index.names):
        keys = df.index.nlevels
        df = df.reset_index()
    columns = [" / ".join(str(p) for p in c if str(p)) if isinstance(c, tuple) else str(c) for c in df.columns]
    numeric, cells = [], []
    for _, col in df.items():
        is_num = pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col)
        fmt = _float_format(col) if pd.api.types.is_float_dtype(col) else ".3f"
        numeric.append(is_num)
        cells.append([format_cell(v, fmt) for v in col.tolist()])
    return TableView(columns, numeric, [list(r) for r in zip(*cells)] if cells else [], keys)
