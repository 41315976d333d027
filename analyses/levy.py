"""Levy et al. (2018), Table 1: the LSTM and its four ablations on PTB (word-level perplexity, LSTM mean +- std over
5 seeds), their order, and the yardstick this suite reads them on (gaps in the LSTM's seed stds, NOISE_STDS).

Its own module, imported by analyses/ablations.py (and its figure), its minimal-RNN table (analyses/ablations_min.py)
and reports/docs.py, as analyses/maini.py holds Maini et al.'s numbers.
"""

from __future__ import annotations

from itertools import combinations

import pandas as pd

from charlm.model import ARCH_LABELS

ORDER = ["lstm", "lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "lstm-gates"]
GATED_SUM = ("lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden")  # the ablations that keep the gated weighted sum
LEVY_ORDER = ("lstm-srnn", "lstm-srnn-out", "lstm", "lstm-srnn-hidden", "lstm-gates")  # PTB Large, best first
NOISE_STDS = 3.0  # an ablation is within noise of the LSTM when |gap| <= this many LSTM seed stds
LABELS = ARCH_LABELS
SHORT = {a: LABELS[a].removeprefix("LSTM ") if a != "lstm" else "LSTM" for a in ORDER}  # "- S-RNN", ...
# Levy et al. Table 1: the LSTM's perplexity and seed std, then - S-RNN, - S-RNN - OUT, - S-RNN - HIDDEN, - GATES
_LEVY = {"Large": (78.8, 0.2, [76.0, 78.5, 82.9, 126.1]), "Medium": (83.9, 0.3, [80.5, 81.6, 83.3, 140.9])}


def paper_table() -> pd.DataFrame:
    """Table 1 of Levy et al.: perplexity (lower is better); gap in units of the LSTM's std, computed here."""
    rows = []
    for size in ("Medium", "Large"):
        lstm, std, others = _LEVY[size]
        rows.append({"configuration": f"PTB ({size})", "model": "LSTM", "perplexity": lstm, "lstm_std": std,
                     "gap_in_lstm_std": 0.0})  # fmt: skip
        for arch, value in zip(ORDER[1:], others):
            rows.append({"configuration": f"PTB ({size})", "model": LABELS[arch], "perplexity": value, "lstm_std": std,
                         "gap_in_lstm_std": round((value - lstm) / std, 1)})  # fmt: skip
    return pd.DataFrame(rows)


def levy_numbers(size: str = "Large") -> dict:
    """Levy et al.'s Table 1 on our yardstick: how many gated-sum ablations are within NOISE_STDS of their LSTM, the
    gap of - GATES in their LSTM's stds, and how many model pairs their own table orders as LEVY_ORDER."""
    lstm, std, others = _LEVY[size]
    ppl = {"lstm": lstm, **dict(zip(ORDER[1:], others))}
    return {
        "within": sum(abs(ppl[a] - lstm) / std <= NOISE_STDS for a in GATED_SUM),
        "gates_std": (ppl["lstm-gates"] - lstm) / std,
        "pairs": pairs_in_order(ppl)[0],
    }


def pairs_in_order(ce: dict) -> tuple[int, int]:
    """Of the pairs of models present in `ce` ({arch: value}, lower is better), how many LEVY_ORDER puts in the
    order `ce` does, and how many pairs there are."""
    present = [a for a in LEVY_ORDER if a in ce]
    pairs = list(combinations(present, 2))  # each (better in Levy's order, worse)
    return sum(ce[a] < ce[b] for a, b in pairs), len(pairs)
