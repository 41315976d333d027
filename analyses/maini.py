"""Maini et al. (2020), "Why and when should you pool?", Table 2 as the lecture notes (seed 004) quote it.

Its own module, imported by analyses/vanishing.py and analyses/pooling.py, so that editing either analysis does
not change the other's cache key (analyses/common.py's source_digest follows imports).
"""

# Vanishing ratio when the model reaches 95 % training accuracy, and the best validation accuracy of that run (%),
# per training size (the notes do not name the data set).
MAINI_TABLE2 = {
    "BiLSTM": ((5e-3, 0.03, 0.06), (64.9, 82.8, 88.4)),
    "MEANPOOL": ((2.5, 0.56, 1.32), (78.4, 82.6, 88.5)),
    "MAXPOOL": ((0.40, 0.42, 0.53), (78.0, 84.7, 89.6)),
    "ATT": ((3.87, 1.04, 1.19), (77.1, 84.6, 90.0)),
    "MAXATT": ((0.69, 0.69, 0.64), (78.1, 86.0, 90.2)),
}
MAINI_SIZES = ("1K", "5K", "20K")  # training examples of Table 2's three columns


def table2_ratios(sizes: tuple[str, ...] = ("1K", "20K")) -> list[tuple[str, str, float]]:
    """(model, training size, vanishing ratio at 95 % training accuracy) of Table 2, model by model in the table's
    order, for the given sizes (default: the two ends of their range, enough beside ours)."""
    return [
        (model, size, ratio)
        for model, (ratios, _) in MAINI_TABLE2.items()
        for size, ratio in zip(MAINI_SIZES, ratios)
        if size in sizes
    ]


def table2_range(model: str | None = None, exclude: str | None = None) -> tuple[float, float]:
    """(smallest, largest) vanishing ratio of Table 2 over every training size: of `model`, or of every model but
    `exclude` (e.g. exclude="BiLSTM": the pooled models)."""
    values = [r for name, (ratios, _) in MAINI_TABLE2.items() for r in ratios
              if (model is None or name == model) and name != exclude]  # fmt: skip
    return min(values), max(values)


def table2():
    """Table 2 as the report shows it: one row per model, the vanishing ratio and the best validation accuracy (%) at
    each training size (a pandas DataFrame)."""
    import pandas as pd

    rows = []
    for model, (ratios, accuracies) in MAINI_TABLE2.items():
        row = {"model": model}
        row.update({f"vanishing ratio, {size}": r for size, r in zip(MAINI_SIZES, ratios)})
        row.update({f"validation accuracy (%), {size}": a for size, a in zip(MAINI_SIZES, accuracies)})
        rows.append(row)
    return pd.DataFrame(rows)


def ratio_field(values: dict, name: str) -> str:
    """The template field of a vanishing ratio in a finding: two significant digits ("0.0015"), or a power of ten
    below 1e-4, where Python would write an exponent that analyses.prose's number check cannot read ("10^-12.1"):
    then `values` gets `<name>_log10`, which the caller's table must hold too (with 10 itself)."""
    import math

    value = values.get(name, 0)
    if not value > 0 or value >= 1e-4:
        return "{" + name + ":.2g}"
    values[f"{name}_log10"] = math.log10(value)
    return "10^{" + name + "_log10:.1f}"
