"""minGRU and minLSTM (Feng et al. 2024) beside the LSTM: Levy et al.'s argument carried forward (new), a table and
findings of analyses/ablations.py.

Their gates and content read the input alone, like - S-RNN - HIDDEN's gates; stacked at 1, 2 and 3 layers in a budget
row, each is set beside the LSTM of its depth and budget row (Fig 1's, the ablations' yardstick where it has seeds):
does depth close the gap, and at which depth? Within NOISE_STDS LSTM seed stds where the LSTM has 2 or more seeds,
else the gap in nats alone.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from charlm import archs

from .base import Finding
from .context import Context
from .dropout_choice import chosen_among
from .levy import LABELS, NOISE_STDS

INPUT_ONLY = archs.names(family="min")  # minGRU, minLSTM: every gate and the content read the input alone
PARAMS_MATCH = 1.25  # a minimal RNN's LSTM has its depth and at most 25 % more or fewer parameters (its budget row)


def input_only(ctx: Context, score: Callable[[pd.Series], float]) -> pd.DataFrame:
    """One row per corpus and minimal-RNN configuration (INPUT_ONLY): its cross-entropy (mean over its seeds)
    beside the LSTM of its depth and budget row (the LSTM configuration of that depth nearest in parameters, within
    PARAMS_MATCH, with the most seeds; mean and seed std over its seeds), the gap in nats and in LSTM seed stds (where
    the LSTM has 2 or more seeds), and - S-RNN - HIDDEN of that depth (at the LSTM's width), the ablation whose gates
    also read the input alone. Empty where the run has no minimal RNN. `score`: a model's test cross-entropy (the
    ablations' own, so that a model both tables read is scored once)."""
    cols = ["corpus", "layers", "arch", "model", "size", "params", "seeds", "ce_nats", "lstm_size",
            "lstm_params", "lstm_seeds", "lstm_ce", "lstm_std", "gap_nats", "gap_in_lstm_std", "hidden_ce",
            "hidden_gap_nats", "within_noise"]  # fmt: skip
    minimal = ctx.models(arch=INPUT_ONLY, required=False)
    if minimal.empty:
        return pd.DataFrame(columns=cols)

    def ce(models: pd.DataFrame) -> np.ndarray:  # each model's test cross-entropy
        return np.array([score(r) for _, r in models.iterrows()])

    # the LSTM and - S-RNN - HIDDEN at the minimal RNNs' dropouts, chosen among those (as at_shared_dropout)
    at = set(minimal["dropout"])

    def at_their_dropouts(arch: str) -> pd.DataFrame:
        every = ctx.models(arch=arch, all_dropouts=True, required=False)
        return chosen_among(every[every["dropout"].isin(at)])

    lstms, hidden = at_their_dropouts("lstm"), at_their_dropouts("lstm-srnn-hidden")
    rows = []
    for (key, _), sub in minimal.groupby(["corpus_key", "group_id"], sort=False):
        first = sub.iloc[0]
        layers = int(first["layers"])
        lstm = lstms[(lstms["corpus_key"] == key) & (lstms["layers"] == layers)]
        if len(lstm):  # its budget row's: the LSTM nearest in parameters (within PARAMS_MATCH), most seeds
            far = np.abs(np.log(lstm["params"].astype(float) / float(first["params"])))
            lstm = lstm[far <= np.log(PARAMS_MATCH)]
        if len(lstm):
            nearest = far[lstm.index].min()
            lstm = lstm[far[lstm.index] == nearest]
            lstm = lstm[lstm["group_id"] == lstm.groupby("group_id").size().idxmax()]
        mean = float(ce(sub).mean())
        row = {"corpus": first["corpus"], "layers": layers, "arch": first["arch"], "model": LABELS[first["arch"]],
               "size": int(first["size"]), "params": int(first["params"]), "seeds": len(sub),
               "ce_nats": mean}  # fmt: skip
        if len(lstm):
            lstm_ce = ce(lstm)
            std = float(lstm_ce.std(ddof=1)) if lstm_ce.size > 1 else float("nan")
            gap = mean - float(lstm_ce.mean())
            row.update({"lstm_size": int(lstm["size"].iloc[0]), "lstm_params": int(lstm["params"].iloc[0]),
                        "lstm_seeds": lstm_ce.size, "lstm_ce": float(lstm_ce.mean()), "lstm_std": std,
                        "gap_nats": gap, "gap_in_lstm_std": gap / std if std > 0 else np.nan})  # fmt: skip
            if np.isfinite(row["gap_in_lstm_std"]):
                row["within_noise"] = bool(abs(row["gap_in_lstm_std"]) <= NOISE_STDS)
        ablated = hidden[(hidden["corpus_key"] == key) & (hidden["layers"] == layers)]
        if len(ablated):
            ablated = ablated[ablated["group_id"] == ablated.groupby("group_id").size().idxmax()]
            row["hidden_ce"] = float(ce(ablated).mean())
            if "lstm_ce" in row:
                row["hidden_gap_nats"] = row["hidden_ce"] - row["lstm_ce"]
        rows.append(row)
    df = pd.DataFrame(rows).reindex(columns=cols)
    return df.sort_values(["corpus", "arch", "layers"], key=lambda c: c.map(INPUT_ONLY.index) if c.name == "arch"
                          else c, ignore_index=True)  # fmt: skip


def input_only_findings(df: pd.DataFrame) -> list[Finding]:
    """Per corpus and minimal RNN: its gap to the LSTM of each depth trained, and whether depth closes it (new; Feng et
    al. report no character-level numbers): within NOISE_STDS LSTM seed stds from the shallowest depth where it is; a
    depth whose LSTM has one seed gives its gap in nats and no verdict on noise."""
    out = []
    for (corpus, arch), sub in df.groupby(["corpus", "arch"], sort=False):
        values = {"corpus": corpus, "model": LABELS[arch], "threshold": NOISE_STDS}
        parts, closes, tested = [], None, 0
        for k, (_, r) in enumerate(sub.sort_values("layers").iterrows()):
            values[f"l{k}"] = int(r["layers"])
            where = f"at {{l{k}}} layer" + ("s" if int(r["layers"]) > 1 else "")
            if pd.isna(r["lstm_ce"]):
                parts.append(f"no LSTM {where}")
                continue
            values[f"g{k}"] = r["gap_nats"]
            if pd.notna(r["gap_in_lstm_std"]):
                tested += 1
                values[f"d{k}"] = r["gap_in_lstm_std"]
                parts.append(f"{{g{k}:+.3f}} nats {where} ({{d{k}:+.1f}} stds)")
                if closes is None and r["within_noise"]:
                    closes = int(r["layers"])
            else:
                values[f"n{k}"] = int(r["lstm_seeds"])
                parts.append(f"{{g{k}:+.3f}} {where} ({{n{k}}} LSTM seed)")
        if closes is not None:
            values["closes"] = closes
            end = "; within {threshold:g} stds from {closes} layer" + ("s" if closes > 1 else "")
        elif tested:
            end = "; beyond {threshold:g} stds wherever the LSTM has seeds"
        else:
            end = "; within noise untested (LSTMs of one seed)"
        out.append(Finding("{corpus}: {model} minus the LSTM of its depth and budget row: " + ", ".join(parts) + end,
                           values, corpus=corpus))  # fmt: skip
    return out
