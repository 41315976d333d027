"""The pooling analysis's claims (analyses/pooling.py): its views of the tidy table (accuracy per training size,
pooling, length and position; the noise margins), Maini et al.'s numbers, the assessment of each claim, the
comparisons table every finding reads, the findings and the per-cell table."""

from __future__ import annotations

import numpy as np
import pandas as pd

from charlm.classifier import POOLS

from .base import Finding, majority
from .maini import ratio_field, table2_range
from .pooling_task import POSITIONS

LABELS = {"last": "BiLSTM (last)", "mean": "MEANPOOL", "max": "MAXPOOL", "att": "ATT", "maxatt": "MAXATT"}
PAPER_LABELS = {"last": "BiLSTM", "mean": "MEANPOOL", "max": "MAXPOOL", "att": "ATT", "maxatt": "MAXATT"}
RIGHT = 0.9  # a classifier is "right" at a position when its test accuracy there is at least this
NOISE = 2  # two accuracies differ (or one is above chance) by more than this many binomial standard errors
MIN_GAP = 0.05  # ... and two accuracies by at least this much (a gap of a few errors in 160 is no positional bias)
# The notes' Results table: mean accuracy (%) per setting and training size (their +- std left out).
MAINI_RESULTS = {
    "IMDb": {
        "alone": [[64.7, 75.0, 86.6], [73.0, 81.7, 87.1], [69.0, 80.1, 87.8], [75.7, 82.8, 89.0], [75.9, 82.5, 88.5]],
        "mid": [[49.6, 49.9, 50.3], [69.8, 76.2, 84.1], [64.5, 77.2, 86.0], [75.0, 79.4, 86.7], [75.4, 80.9, 86.8]],
        "right": [[53.5, 64.7, 85.9], [70.0, 76.8, 84.8], [65.9, 77.8, 87.2], [74.7, 80.2, 87.1], [77.9, 81.9, 87.2]],
    },
    "Yahoo": {
        "alone": [[38.3, 51.4, 63.5], [48.2, 56.6, 64.7], [50.2, 56.3, 63.9], [47.3, 54.2, 65.1], [51.8, 57.0, 65.1]],
        "mid": [[12.7, 12.7, 11.4], [31.9, 43.1, 58.5], [33.0, 40.1, 58.4], [39.4, 45.1, 61.5], [39.6, 48.5, 62.2]],
        "right": [[18.8, 37.3, 60.1], [33.9, 43.2, 58.6], [33.1, 41.2, 60.9], [37.9, 47.6, 62.2], [40.3, 50.1, 63.1]],
    },
}  # rows: BiLSTM, MEANPOOL, MAXPOOL, ATT, MAXATT; columns: 1K, 2K, 10K
RESULTS_SIZES = ("1K", "2K", "10K")
MAINI_CLASSES = {"IMDb": 2, "Yahoo": 10}  # IMDb: sentiment (binary); Yahoo Answers: 10 topics
MAINI_MID_BILSTM = MAINI_RESULTS["IMDb"]["mid"][0][-1]  # the last-state BiLSTM, IMDb (mid) + Wiki, 10K: 50.3 %


# ------------------------------------------------------------------------------------------ views


def accuracy(df: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy per training size, pooling, length and position (columns: the positions), with `n`, the test
    examples of each cell. Never averaged over lengths: the middle of a 24-character text is 4 characters from
    each end, of a 96-character one 40."""
    acc = df[df["measure"] == "accuracy"].pivot_table(
        index=["train_size", "pool", "length"], columns="position", values="value"
    )
    n = df[df["measure"] == "test_examples"].groupby(["train_size", "pool", "length"])["value"].min()
    return acc.join(n.rename("n"))


def margin(p: float, q: float, n: float) -> float:
    """How far apart two accuracies p and q, each on n test examples, must be to differ: NOISE binomial standard
    errors of their difference (at their pooled proportion, which does not vanish near 100 %), and MIN_GAP."""
    pooled = (p + q) / 2
    return max(MIN_GAP, NOISE * np.sqrt(2 * pooled * (1 - pooled) / n))


def at_chance(p: float, chance: float, n: float) -> bool:
    """Within NOISE binomial standard errors of chance (or below it)."""
    return p <= chance + NOISE * np.sqrt(chance * (1 - chance) / n)


def _value(df: pd.DataFrame, measure: str) -> pd.DataFrame:
    return df[df["measure"] == measure].drop_duplicates(["pool", "position", "train_size"])


def _keywords(df: pd.DataFrame) -> list[str]:
    return str(df["keywords"].iloc[0]).split("|")


def _classes(df: pd.DataFrame) -> int:
    return len(_keywords(df))


def _span_fraction(df: pd.DataFrame) -> tuple[float, int]:
    longest = df.loc[df["measure"] == "nwi", "length"]
    longest = int(longest.max()) if len(longest) else int(df["length"].max())
    return int(df["span"].iloc[0]) / longest, longest


# ------------------------------------------------------------------------------------------ the claims


def assess(df: pd.DataFrame) -> dict:
    """Maini et al.'s claims, each computed on the largest training size, length by length (thresholds: RIGHT;
    `at_chance` and `margin`: NOISE binomial standard errors, MIN_GAP):

    ends_right  the last-state model is right (>= RIGHT) at the start and the end at every length
    middle      per length: the last state's accuracy in the middle, and "at chance", "below its ends" (by more
                than the margin) or "as at its ends"
    beaten      per length: the pooled models' lowest and highest accuracy in the middle, and whether every one
                beats the last state there by more than the margin
    spread      per pooled model (with two positions or more): its largest gap between positions, at which
                length, and whether any gap is beyond the margin (then the largest such gap)
    ratio_init  the median vanishing ratio at initialisation per pooling
    """
    acc = accuracy(df)
    size = int(acc.index.get_level_values("train_size").max())
    acc = acc.loc[size]
    pools = [p for p in POOLS if p in set(acc.index.get_level_values("pool"))]
    chance = 1 / _classes(df)
    out = {"size": size, "chance": chance, "span": int(df["span"].iloc[0]), "middle": {}, "beaten": {}, "spread": {}}
    if "last" in pools:
        last = acc.loc["last"]
        ends = [p for p in ("start", "end") if p in last.columns]
        out["ends"] = last[ends] if ends else None
        out["ends_right"] = bool(ends) and bool((last[ends] >= RIGHT).all().all())
        for length, row in last.iterrows():
            if "mid" not in last.columns:
                break
            a, n = row["mid"], row["n"]
            end = row[ends].min() if ends else np.nan
            verdict = (
                "at chance" if at_chance(a, chance, n)
                else "below its ends" if ends and end - a > margin(a, end, n)
                else "as at its ends" if ends else "above chance"
            )  # fmt: skip
            out["middle"][int(length)] = (a, verdict)
            pooled = [acc.loc[(p, length), "mid"] for p in pools if p != "last"]
            if pooled:
                out["beaten"][int(length)] = (min(pooled), max(pooled), all(q - a > margin(a, q, n) for q in pooled))
    positions = [p for p in POSITIONS if p in acc.columns]
    for pool in (p for p in pools if p != "last" and len(positions) > 1):
        sub = acc.loc[pool]
        hi, lo = sub[positions].max(axis=1), sub[positions].min(axis=1)
        gaps = hi - lo
        beyond = gaps[[gaps[L] > margin(hi[L], lo[L], sub.loc[L, "n"]) for L in gaps.index]]
        length = beyond.idxmax() if len(beyond) else gaps.idxmax()
        out["spread"][pool] = (float(gaps[length]), int(length), bool(len(beyond)))
    out["ratio_init"] = _value(df, "ratio_init").groupby("pool")["value"].median()
    r95 = _value(df[df["train_size"] == size], "ratio_95")
    out["ratio_95"] = {p: r95.loc[r95["pool"] == p, "value"] for p in POOLS if p in set(r95["pool"])}
    return out


def _log10(x: float) -> float:
    with np.errstate(divide="ignore"):
        return float(np.log10(x)) if x >= 0 else float("nan")


def comparisons(df: pd.DataFrame) -> pd.DataFrame:
    """Per claim, one row with every number its finding states (assess's results on the largest training size, the
    longest length where a claim is about the middle, chance as a value, Maini et al.'s numbers beside ours)."""
    if df.empty or not (df["measure"] == "accuracy").any():
        return pd.DataFrame()
    f = assess(df)
    base = {"corpus": df["corpus"].iloc[0], "size": f["size"], "chance": f["chance"], "classes": _classes(df),
            "span": f["span"]}  # fmt: skip
    rows = []
    ends = f.get("ends")
    for L, (a, word) in f["middle"].items():
        rows.append({**base, "comparison": "middle", "length": L, "from_end": (L - f["span"]) // 2, "acc": a,
                     "over_chance": a / f["chance"], "word": word, "ends_right": f.get("ends_right", False),
                     "ends_min": float(ends.loc[L].min()) if ends is not None else np.nan, "right": RIGHT,
                     "maini_acc": MAINI_MID_BILSTM, "maini_chance": 1 / MAINI_CLASSES["IMDb"],
                     "maini_over_chance": MAINI_MID_BILSTM / (100 / MAINI_CLASSES["IMDb"])})  # fmt: skip
    if f["beaten"]:
        L = max(f["beaten"])
        lo, hi, _ = f["beaten"][L]
        pooled = MAINI_RESULTS["IMDb"]["mid"][1:]
        rows.append({**base, "comparison": "pooled", "length": L, "lo": lo, "hi": hi,
                     "beaten": sum(b for _, _, b in f["beaten"].values()), "lengths": len(f["beaten"]),
                     "maini_lo": min(r[-1] for r in pooled), "maini_hi": max(r[-1] for r in pooled),
                     "maini_chance": 1 / MAINI_CLASSES["IMDb"]})  # fmt: skip
    if f["spread"]:
        flat = [p for p, (_, _, moved) in f["spread"].items() if not moved]
        rows.append({**base, "comparison": "position", "flat": len(flat), "pools": len(f["spread"]),
                     "gap_points": round(100 * max(g for g, _, _ in f["spread"].values())),
                     "moved": ", ".join(LABELS[p] for p in f["spread"] if p not in flat)})  # fmt: skip
    r0 = f["ratio_init"]
    if "last" in r0.index and len(r0.drop(index="last")):
        others = r0.drop(index="last")
        decades = _log10(others.min()) - _log10(r0["last"])
        rows.append({**base, "comparison": "ratio_init", "last": r0["last"], "pooled_min": others.min(),
                     "pooled_max": others.max(), "decades": decades, "last_log10": _log10(r0["last"]),
                     "log_base": 10})  # fmt: skip
    r95 = f["ratio_95"]
    if "last" in r95 and any(v.notna().any() for p, v in r95.items() if p != "last"):
        pooled = [v.median() for p, v in r95.items() if p != "last" and v.notna().any()]
        (b_lo, b_hi), (p_lo, p_hi) = table2_range("BiLSTM"), table2_range(exclude="BiLSTM")
        last = r95["last"]
        rows.append({**base, "comparison": "ratio_95", "target": 0.95, "last": last.median(), "log_base": 10,
                     "last_reached": int(last.notna().sum()), "settings": len(last), "pooled_min": min(pooled),
                     "pooled_max": max(pooled), "maini_bilstm_lo": b_lo, "maini_bilstm_hi": b_hi,
                     "maini_pooled_lo": p_lo, "maini_pooled_hi": p_hi})  # fmt: skip
    diverged = int((df["measure"] == "diverged").sum())
    if diverged:
        rows.append({**base, "comparison": "diverged", "diverged": diverged})
    return pd.DataFrame(rows)


_verdict = majority  # all hold: reproduced; at least half: partly; fewer: not reproduced


def findings(comp: pd.DataFrame) -> list[Finding]:
    """Maini et al.'s claims on the largest training size, then what the papers did not ask (new). Verdicts:

    pool-mid-chance      the last state at chance in the middle of the longest texts: reproduced; below its ends but
                         above chance: partly; as right as at its ends: not reproduced; not right at the ends (it is
                         under-trained, so the middle says nothing): untested
    pool-pooled-middle   every pooled model beats it there at every length: reproduced (_verdict over lengths)
    pool-position        pooled models as right at every position within noise (_verdict over models)
    pool-ratio-init      the last state's ratio at initialisation 2+ decades below every pooled one: reproduced; 1+:
                         partly; less: not reproduced
    pool-table2          at 95 % training accuracy: the last state in Table 2's BiLSTM range and the pooled medians in
                         its pooled range: reproduced; the last state below every pooled median: partly
    """
    if comp.empty:
        return []
    out = []
    corpus = comp["corpus"].iloc[0]
    rows = {what: g for what, g in comp.groupby("comparison")}

    def values(row) -> dict:
        return {k: row[k] for k in row.index if not (isinstance(row[k], float) and np.isnan(row[k]))}

    middle = rows.get("middle")
    if middle is not None:
        m = middle.loc[middle["length"].idxmax()]
        v = values(m)
        if pd.isna(m["ends_min"]):
            out.append(Finding(
                "{corpus}: no last-state BiLSTM was trained with the span at the start or end, so nothing shows it "
                "learned the task at all", v, "untested", "pool-mid-chance", corpus))  # fmt: skip
        elif not m["ends_right"]:
            out.append(Finding(
                "{corpus}: the last-state BiLSTM is right only {ends_min:.0%} of the time at the ends, so it is "
                "under-trained and its accuracy in the middle says nothing", v, "untested", "pool-mid-chance",
                corpus))  # fmt: skip
        else:
            word = {"at chance": "reproduced", "below its ends": "partly"}.get(m["word"], "not reproduced")
            out.append(Finding(
                "{corpus}: span in the middle of {length}-character texts: the last-state BiLSTM is right {acc:.0%} of "
                "the time, chance {chance:.0%}; Maini's IMDb (mid) {maini_acc:g}%, chance {maini_chance:.0%}", v,
                word, "pool-mid-chance", corpus))  # fmt: skip
    else:
        out.append(Finding("{corpus}: no last-state model with the span in the middle was trained", {"corpus": corpus},
                           "untested", "pool-mid-chance", corpus))  # fmt: skip
    pooled = rows.get("pooled")
    if pooled is not None:
        p = pooled.iloc[0]
        out.append(Finding(
            "{corpus}: in the middle of {length}-character texts the pooled models score {lo:.0%} to {hi:.0%}, beating "
            "the last state at {beaten} of {lengths} lengths (Maini: {maini_lo:g}% to {maini_hi:g}%, chance "
            "{maini_chance:.0%})", values(p), _verdict(int(p["beaten"]), int(p["lengths"])), "pool-pooled-middle",
            corpus))  # fmt: skip
    position = rows.get("position")
    if position is not None:
        p = position.iloc[0]
        out.append(Finding(
            "{corpus}: {flat} of {pools} pooled models are as right at the start, middle and end within noise at every "
            "length (largest gap {gap_points} points)", values(p), _verdict(int(p["flat"]), int(p["pools"])),
            "pool-position", corpus))  # fmt: skip
    ratio = rows.get("ratio_init")
    if ratio is not None:
        r = ratio.iloc[0]
        v = values(r)
        verdict = "reproduced" if r["decades"] >= 2 else ("partly" if r["decades"] >= 1 else "not reproduced")
        out.append(Finding(
            "{corpus}: at initialisation the last-state BiLSTM's vanishing ratio is " + ratio_field(v, "last")
            + ", {decades:.1f} decades below the smallest pooled one ({pooled_min:.2g})", v, verdict,
            "pool-ratio-init", corpus))  # fmt: skip
    r95 = rows.get("ratio_95")
    if r95 is not None:
        r = r95.iloc[0]
        v = values(r)
        if not r["last_reached"]:
            out.append(Finding(
                "{corpus}: the last-state BiLSTM never reached {target:.0%} training accuracy in {settings} position "
                "settings, so Table 2's moment never came", v, "untested", "pool-table2", corpus))  # fmt: skip
        else:
            inside = r["maini_bilstm_lo"] <= r["last"] <= r["maini_bilstm_hi"] and (
                r["maini_pooled_lo"] <= r["pooled_min"] and r["pooled_max"] <= r["maini_pooled_hi"]
            )
            verdict = "reproduced" if inside else ("partly" if r["last"] < r["pooled_min"] else "not reproduced")
            out.append(Finding(
                "{corpus}: at {target:.0%} training accuracy the vanishing ratio is " + ratio_field(v, "last")
                + " without pooling (Maini: {maini_bilstm_lo:g} to {maini_bilstm_hi:g}), {pooled_min:.3g} to "
                "{pooled_max:.3g} with (Maini: {maini_pooled_lo:g} to {maini_pooled_hi:g})", v, verdict,
                "pool-table2", corpus))  # fmt: skip
    if middle is not None and len(middle) > 1:
        m = middle.loc[middle["length"].idxmin()]
        out.append(Finding(
            "{corpus}: with the span {from_end} characters from each end ({length}-character texts) the last-state "
            "BiLSTM is right {acc:.0%} of the time ({word})", values(m), corpus=corpus))  # fmt: skip
    if "diverged" in rows:
        diverged = values(rows["diverged"].iloc[0])
        out.append(Finding("{corpus}: {diverged} classifiers diverged and are left out", diverged, corpus=corpus))
    return out


# ------------------------------------------------------------------------------------------ the tables


def per_cell(df: pd.DataFrame) -> pd.DataFrame:
    """The appendix: test accuracy (%) per training size, pooling and length, at each position, with chance, the
    test examples of each cell, the vanishing ratio at initialisation and at 95 % training accuracy (median over the
    position settings) and the examples seen until then."""
    acc = accuracy(df)
    r0, r95, seen = _value(df, "ratio_init"), _value(df, "ratio_95"), _value(df, "examples_to_95")
    rows = []
    order = sorted(acc.index, key=lambda key: (key[0], POOLS.index(key[1]), key[2]))  # size, the pools' order, length
    for (size, pool, length), here in acc.loc[order].iterrows():
        at = lambda t, pool=pool, size=size: t[(t["pool"] == pool) & (t["train_size"] == size)]["value"]  # noqa: E731
        rows.append({
            "training examples": int(size), "model": LABELS[pool], "length": int(length),
            **{f"{p} (%)": 100 * here.get(p, np.nan) for p in POSITIONS}, "chance (%)": 100 / _classes(df),
            "test examples": int(here["n"]), "ratio at init": at(r0).median(), "ratio at 95 %": at(r95).median(),
            "examples to 95 %": at(seen).median(),
        })  # fmt: skip
    return pd.DataFrame(rows)


def paper_results() -> pd.DataFrame:
    """Maini et al.'s Results table (mean accuracy, %) at 1K and 10K examples, with each task's chance."""
    rows = []
    for data, settings in MAINI_RESULTS.items():
        for pool, alone, mid, right in zip(POOLS, settings["alone"], settings["mid"], settings["right"]):
            row = {"data": data, "classes": MAINI_CLASSES[data], "chance (%)": 100 / MAINI_CLASSES[data],
                   "model": PAPER_LABELS[pool]}  # fmt: skip
            for k, size in enumerate(RESULTS_SIZES):
                if size != "2K":
                    row.update({f"alone, {size}": alone[k], f"mid + Wiki, {size}": mid[k],
                                f"right + Wiki, {size}": right[k]})  # fmt: skip
            rows.append(row)
    return pd.DataFrame(rows)
