"""The `cells` analysis's tables (analyses/cells.py): the records of every probed model as one tidy table, and the
tables its findings read: the probed models, per corpus and feature (Fig 2's cells found or not), per corpus (the
controls and the ablations) and per architecture. Probing itself is analyses/cells_probing.py; which models, cached
one by one, analyses/cells_runs.py."""

from __future__ import annotations

import numpy as np
import pandas as pd

from charlm.archs import names
from charlm.model import ARCH_LABELS
from probes.probe import LogisticProbe

from . import cells_probing, cells_runs
from .common import headline_id, whole
from .context import Context

METRIC = cells_probing.METRIC
LEAD = 0.05  # a probe "reads more than the last k characters" when it beats their baseline by more than this
KINDS = ("excerpt", "probe", "cell", "viewer")  # the records of the tidy table, in the order they were written
# Fig 2's cells, by the feature that labels them (a feature whose Feature.paper_cell is empty on a corpus tests none)
CLAIM_OF = {"line_position": "cells-line-length", "in_quotes": "cells-quotes", "in_comment": "cells-comments",
            "in_string": "cells-strings", "in_condition": "cells-if", "indent_level": "cells-indent",
            "brace_depth": "cells-depth"}  # fmt: skip


# ------------------------------------------------------------------------------------------ the tidy table


def tidy(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The records of every model as one table, in the order the analysis wrote them before its per-model work
    moved to cells_runs: per corpus its excerpts, then per model its probes layer by layer, each layer's probes
    followed by each feature's best cell and its viewer rows. The excerpts' paper_cell stays in the "features"
    table (the cell rows carry it)."""
    parts = [frames[k].assign(record=k) for k in KINDS if k in frames and len(frames[k])]
    if not parts:
        return pd.DataFrame({"record": pd.Series(dtype=str)})
    df = pd.concat(parts, ignore_index=True)
    df = df[["record", *[c for c in df.columns if c != "record"]]]
    if "excerpt" in frames and len(frames["excerpt"]):
        df.loc[df["record"] == "excerpt", "paper_cell"] = np.nan
    corpora_ = {c: k for k, c in enumerate(pd.unique(df["corpus"]))}
    models = {m: k for k, m in enumerate(pd.unique(df["model_id"].dropna()))} if "model_id" in df else {}
    features = {(c, f): k for k, (c, f) in enumerate(zip(df["corpus"], df["feature"]))}
    excerpt, probe = df["record"] == "excerpt", df["record"] == "probe"
    layer = df["layer"].astype(float).fillna(-1) if "layer" in df else pd.Series(-1.0, index=df.index)
    rank = df["rank"].astype(float).fillna(0) if "rank" in df else pd.Series(0.0, index=df.index)
    keys = pd.DataFrame({
        "corpus": df["corpus"].map(corpora_),
        "model": np.where(excerpt, -1, df["model_id"].map(models) if models else -1),
        "layer": np.where(excerpt, -1, layer),
        "after_probes": np.where(excerpt | probe, 0, 1),
        "feature": np.where(excerpt | probe, 0, [features[cf] for cf in zip(df["corpus"], df["feature"])]),
        "rank": np.where(df["record"] == "viewer", rank, 0),
    })  # fmt: skip
    order = np.lexsort([keys[c].to_numpy(dtype=float) for c in reversed(keys.columns)])  # stable: ties keep order
    return df.iloc[order].reset_index(drop=True)


def records(df: pd.DataFrame, record: str) -> pd.DataFrame:
    return df[df["record"] == record].reset_index(drop=True) if "record" in df else df.iloc[0:0]


def last_k(df: pd.DataFrame) -> list[int]:
    """The k of the last-k-characters baselines the table holds, in increasing order."""
    return sorted(int(c[len("selectivity_last") :]) for c in df if c.startswith("selectivity_last"))


def informative(df: pd.DataFrame, column: str) -> pd.Series:
    """A selectivity column where its control was informative, NaN where it sat at its ceiling or floor."""
    flag = "control_informative" if column == "selectivity" else "control_trigram_informative"
    return df[column].where(df[flag] == 1)


def best_per_model(cells: pd.DataFrame) -> pd.DataFrame:
    """Per model and feature, the layer whose best single cell scores highest (a model passes when any does)."""
    if cells.empty:
        return cells
    cells = cells.assign(_score=cells["best_cell_score"].fillna(-np.inf))
    best = cells.loc[cells.groupby(["model_id", "feature"], sort=False)["_score"].idxmax()]
    return best.drop(columns="_score").reset_index(drop=True)


# ------------------------------------------------------------------------------------------ the other tables


def model_table(ctx: Context, probed: set[str]) -> pd.DataFrame:
    """The probed models as the index lists them (depth, width, characters read), and each corpus's headline
    (analyses.common.headline_id: the model the paper's "best LSTM" stands for here)."""
    rows = []
    seeds = int(ctx.settings["seeds"])
    for key in ctx.corpus_keys():
        models = cells_runs.probed_models(ctx, key, seeds)
        models = models[models["model_id"].isin(probed)] if not models.empty else models
        if models.empty:
            continue
        head = headline_id(models)
        for _, r in models.iterrows():
            label = cells_runs._model_label(r, seeds > 1)
            rows.append({"corpus": r["corpus"], "model_id": r["model_id"], "model": label, "arch": r["arch"],
                         "layers": int(r["layers"]), "size": int(r["size"]), "budget": r["budget"],
                         "seed": int(r["seed"]), "chars_trained": whole(r["chars_trained"]),
                         "headline": int(r["model_id"] == head)})  # fmt: skip
    return pd.DataFrame(rows, columns=["corpus", "model_id", "model", "arch", "layers", "size", "budget", "seed",
                                       "chars_trained", "headline"])  # fmt: skip


def _best(rows: pd.DataFrame, prefix: str) -> dict:
    """{prefix_score, prefix_model} of the best single cell among one feature's per-model rows (empty: none)."""
    if rows.empty or rows["best_cell_score"].isna().all():
        return {}
    r = rows.loc[rows["best_cell_score"].idxmax()]
    return {f"{prefix}_score": float(r["best_cell_score"]), f"{prefix}_model": r["model"]}


def feature_table(frames: dict[str, pd.DataFrame], models: pd.DataFrame, s: dict) -> pd.DataFrame:
    """Per corpus and feature: Fig 2's cell (the claim it tests), whether it was too rare to probe, how many
    models (and LSTMs, and the headline) have a single cell that passes found_at, the best, what the state's probe
    reads beyond the last k characters, and where zeroing the best cell lies against the random cells."""
    excerpt, probe = frames.get("excerpt", pd.DataFrame()), frames.get("probe", pd.DataFrame())
    per_model = best_per_model(frames.get("cell", pd.DataFrame()))
    cells = frames.get("cell", pd.DataFrame())
    ks = last_k(cells)
    rows = []
    for _, e in excerpt.iterrows():
        corpus, feature, kind = e["corpus"], e["feature"], e["feature_kind"]
        paper = e["paper_cell"] if isinstance(e["paper_cell"], str) else ""
        r = {"corpus": corpus, "feature": feature, "feature_kind": kind, "metric": METRIC[kind],
             "claim": CLAIM_OF.get(feature, "") if paper else "", "paper_cell": paper,
             "found_at": s["found_binary"] if kind == "binary" else s["found_count"],
             "min_windows": s["min_windows"], "min_test_windows": s["min_test_windows"]}  # fmt: skip
        mine = probe[(probe["corpus"] == corpus) & (probe["feature"] == feature)] if len(probe) else probe
        rare = mine[mine["note"].fillna("").str.startswith("too rare")] if "note" in mine else mine.iloc[0:0]
        r["too_rare"] = int(len(rare) > 0)
        if len(rare):
            r.update(train_windows=int(rare["train_windows"].iloc[0]), test_windows=int(rare["test_windows"].iloc[0]))
        pm = (
            per_model[(per_model["corpus"] == corpus) & (per_model["feature"] == feature)]
            if len(per_model)
            else per_model
        )
        lstm = pm[pm["arch"] == "lstm"] if len(pm) else pm
        r.update(models=len(pm), models_found=int(pm["found"].sum()) if len(pm) else 0, lstm_models=len(lstm),
                 lstm_found=int(lstm["found"].sum()) if len(lstm) else 0, **_best(pm, "best"),
                 **_best(lstm, "lstm_best"))  # fmt: skip
        head = models[(models["corpus"] == corpus) & (models["headline"] == 1)]
        if len(head) and len(pm):
            h = pm[pm["model_id"] == head["model_id"].iloc[0]]
            if len(h):
                r.update(
                    headline_model=h["model"].iloc[0],
                    headline_arch=h["arch"].iloc[0],
                    headline_score=float(h["best_cell_score"].iloc[0]),
                    headline_found=int(h["found"].iloc[0]),
                )
        fc = cells[(cells["corpus"] == corpus) & (cells["feature"] == feature)] if len(cells) else cells
        if len(fc) and ks:
            k = ks[-1]
            lead = fc.loc[fc[f"selectivity_last{k}"].idxmax()]
            r.update(k=k, lead=float(lead[f"selectivity_last{k}"]), lead_model=lead["model"],
                     lead_probe=float(lead["probe_score"]), lead_last=float(lead[f"last{k}"]))  # fmt: skip
        if len(fc):
            r.update(cases=len(fc), zero_above=int((fc["lm_zero_vs_random"] == "above").sum()),
                     zero_below=int((fc["lm_zero_vs_random"] == "below").sum()),
                     mean_above=int((fc["lm_mean_vs_random"] == "above").sum()))  # fmt: skip
        rows.append(r)
    return pd.DataFrame(rows)


def _span(values: pd.Series, scale: float = 1.0) -> tuple:
    return round(float(values.min()) / scale), round(float(values.max()) / scale)


def corpus_table(
    frames: dict[str, pd.DataFrame], models: pd.DataFrame, features: pd.DataFrame, s: dict
) -> pd.DataFrame:
    """Per corpus: the probed models (how many, depth, width, characters read: millions when over a million),
    the probes beyond the last k characters, the controls and the ablations, every number its findings state."""
    probe, cells = frames.get("probe", pd.DataFrame()), frames.get("cell", pd.DataFrame())
    rows = []
    for corpus, m in models.groupby("corpus", sort=False):
        scale = 1e6 if m["chars_trained"].max() >= 1e6 else 1.0
        r = {"corpus": corpus, "models": len(m), "seeds": int(s["seeds"])}
        (r["min_layers"], r["max_layers"]), (r["min_size"], r["max_size"]) = _span(m["layers"]), _span(m["size"])
        (r["min_chars"], r["max_chars"]) = _span(m["chars_trained"], scale)
        r["chars_unit"] = "million" if scale > 1 else ""
        f = features[features["corpus"] == corpus] if len(features) else features
        f = f[f["k"].notna()] if "k" in f else f.iloc[0:0]
        if len(f):
            ahead = f["lead"] > LEAD
            r.update(k=int(f["k"].iloc[0]), lead_threshold=LEAD, probed_features=len(f), ahead=int(ahead.sum()),
                     behind=", ".join(f.loc[~ahead, "feature"]))  # fmt: skip
        p = (
            probe[probe["corpus"] == corpus].dropna(subset=["selectivity"])
            if "selectivity" in probe
            else probe.iloc[0:0]
        )
        if len(p):
            r["probes"] = len(p)
            for name, column, flag, score in (("char", "selectivity", "control_informative", "control"),
                                              ("trigram", "selectivity_trigram", "control_trigram_informative",
                                               "control_trigram")):  # fmt: skip
                on = p[flag] == 1
                high = p[score] > np.where(p["feature_kind"] == "binary", 0.75, 0.5)  # nearer the ceiling than chance
                r.update({f"{name}_informative": int(on.sum()), f"{name}_ceiling": int((~on & high).sum()),
                          f"{name}_floor": int((~on & ~high).sum()),
                          f"{name}_median": float(p.loc[on, column].median()) if on.any() else np.nan})  # fmt: skip
        logistic = (
            probe[(probe["corpus"] == corpus) & (probe["feature_kind"] == "binary")].dropna(subset=["unconverged_fits"])
            if "unconverged_fits" in probe
            else probe.iloc[0:0]
        )
        if len(logistic):
            r.update(logistic_probes=len(logistic), unconverged_probes=int((logistic["unconverged_fits"] > 0).sum()),
                     max_iter=LogisticProbe().max_iter)  # fmt: skip
        c = cells[cells["corpus"] == corpus] if len(cells) else cells
        if len(c):
            r.update(cases=len(c), n_random=int(c["n_random"].max()),
                     **{f"{how}_{side}": int((c[f"lm_{how}_vs_random"] == side).sum())
                        for how in ("zero", "mean") for side in ("above", "below", "inside")})  # fmt: skip
        rows.append(r)
    return pd.DataFrame(rows)


def architecture_table(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per corpus and architecture: its probed models, (model, feature) pairs and the pairs whose single cell passes
    at some layer; and Levy's four LSTM ablations pooled ("lstm ablations"; charlm.archs' `ablation` records)."""
    pm = best_per_model(frames.get("cell", pd.DataFrame()))
    if pm.empty:
        return pd.DataFrame(columns=["corpus", "arch", "label", "models", "pairs", "found"])
    rows = []
    rank = {a: k for k, a in enumerate(cells_probing.ARCH_ORDER)}
    for corpus, sub in pm.groupby("corpus", sort=False):
        for arch, a in sorted(sub.groupby("arch"), key=lambda item: rank.get(item[0], len(rank))):
            rows.append({"corpus": corpus, "arch": arch, "label": ARCH_LABELS.get(arch, arch),
                         "models": a["model_id"].nunique(), "pairs": len(a),
                         "found": int(a["found"].sum())})  # fmt: skip
        ablated = sub[sub["arch"].isin(names(ablation=True))]  # not the min-RNNs nor the ladder's rungs
        if len(ablated):
            rows.append({"corpus": corpus, "arch": "lstm ablations", "label": "Levy's ablations",
                         "models": ablated["model_id"].nunique(), "pairs": len(ablated),
                         "found": int(ablated["found"].sum())})  # fmt: skip
    return pd.DataFrame(rows)
