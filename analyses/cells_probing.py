"""The probing of one model for the `cells` analysis (analyses/cells.py): the windows every model of a corpus is
probed on (`Windows`), the last-characters baselines, and `probe_model`: the probes, the best single cells and their
ablation, the viewer's values. Which models are probed, and their cache, are analyses/cells_runs.py's.

Each model gives three tidy tables ("probe", "cell", "viewer" records) and the viewer's values, int8 (tanh(c) x 127),
one run of `array_length` values per viewer row.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd
import sklearn

from charlm.model import ARCH_LABELS
from corpora.errors import UserError
from probes.activations import (
    cell_internal,
    more_windows,
    run_ablated,
    shown,
    trace_windows,
    window_batch,
    window_starts,
)
from probes.controls import block_split, context_types, control_informative, last_chars
from probes.features import Feature, check_names, features_for, window_labels
from probes.probe import ProbeRows, fit_probe, score
from probes.single_cells import SingleCells

ARCH_ORDER = list(ARCH_LABELS)
# scikit-learn's own low-overhead settings for the probes' many small fits: no finiteness check (the activations were
# checked once, where ProbeRows standardises them) and no parameter validation (the probes pass fixed, valid ones).
# Neither changes a number; together they cut the fits' time by about a tenth.
FAST_SKLEARN = {"assume_finite": True, "skip_parameter_validation": True}
METRIC = {"binary": "balanced accuracy", "count": "R^2"}
CONTROLS = {"character": 1, "trigram": 3}  # control tasks: the type is the byte read, or the trigram ending there

# ------------------------------------------------------------------------------------------ helpers


@lru_cache(maxsize=1)
def suite_internals() -> frozenset[str]:
    """The names of every internal any architecture of charlm.model traces (`layers.{l}.{name}`)."""
    import torch

    from charlm.model import ARCHS, CharLM, ModelConfig

    names = set()
    with torch.no_grad():
        for arch in ARCHS:
            trace = CharLM(ModelConfig(arch, vocab_size=2, layers=1, size=2)).trace(torch.zeros(1, 1, dtype=torch.long))
            names.update(k.rsplit(".", 1)[1] for k in trace)
    return frozenset(names)


def check_settings(s: dict) -> None:
    """Unknown internals or feature names: one clear UserError."""
    unknown = sorted(set(s["internals"]) - suite_internals() - {"all"})
    if unknown:
        raise UserError(f"no architecture has the internal {', '.join(unknown)} "
                        f"(internals: {', '.join(sorted(suite_internals()))}, or all)")  # fmt: skip
    check_names(list(s["features"] or []))


def check_features_apply(styles: dict[str, str], wanted: list[str]) -> None:
    """Every named feature must apply to at least one corpus analysed."""
    for name in wanted:
        if not any(name in {f.name for f in features_for(s)} for s in styles.values()):
            kinds = " and ".join(sorted(set(styles.values())))
            raise UserError(f"feature '{name}' does not apply to the corpora analysed ({kinds} text)")


class Windows:
    """The windows of one corpus's split that every model is probed on, with their labels.

    Windows are spread evenly over the split; a binary feature held by too few of the training or test windows
    (parentheses in War and Peace: 1 % of characters) gets `extra_windows` more where it begins. Every
    `test_every`-th window (in text order) is a test window. Labels and focus positions are those of the text each
    window's model read, from the start of its warm-up (`probes.features.window_labels`).
    """

    def __init__(self, text: bytes, ids: np.ndarray, features: list[Feature], s: dict):
        self.length, self.warmup = s["window"], s["warmup"]
        self.min_windows, self.min_test_windows = s["min_windows"], s["min_test_windows"]
        starts = window_starts(ids.size, s["windows"], self.length, self.warmup)
        is_test = block_split(np.arange(starts.size), s["test_every"])
        for f in features:
            if f.kind != "binary":
                continue
            full = f.labels(text)  # the whole split's labels, only to find where the feature begins
            inside = full[starts[:, None] + np.arange(self.length)].any(1)
            if (np.count_nonzero(inside & ~is_test) < self.min_windows
                    or np.count_nonzero(inside & is_test) < self.min_test_windows):  # fmt: skip
                onsets = np.flatnonzero(np.diff(full) > 0) + 1
                extra = more_windows(starts, onsets, ids.size, self.length, self.warmup, s["extra_windows"])
                starts = np.concatenate([starts, extra])  # every test_every-th extra window is a test window too
                is_test = np.concatenate([is_test, block_split(np.arange(extra.size), s["test_every"])])
        order = np.argsort(starts, kind="stable")
        self.starts, self.window_is_test = starts[order], is_test[order]
        self.batch = window_batch(ids, self.starts, self.length, self.warmup)  # (W, warmup + L)
        positions = self.starts[:, None] + np.arange(self.length)  # (W, L)
        self.groups = np.repeat(np.arange(len(self.starts)), self.length)
        self.test = np.repeat(self.window_is_test, self.length)
        self.test_windows = np.flatnonzero(self.window_is_test)
        raw = np.frombuffer(text, dtype=np.uint8)
        self.control_types = {name: context_types(raw, positions, context).ravel()
                              for name, context in CONTROLS.items()}  # fmt: skip
        self.text, self.positions = text, positions
        self.labels, self.focus = {}, {}
        for f in features:
            labels, focus = window_labels(f, text, self.starts, self.length, self.warmup)
            self.labels[f.name], self.focus[f.name] = labels.ravel(), focus  # (W * L,), (W, L)

    def holding(self, f: Feature) -> tuple[int, int]:
        """How many training and test windows hold the feature: a binary one on somewhere, a count varying."""
        y = self.labels[f.name].reshape(len(self.starts), self.length)
        held = y.any(1) if f.kind == "binary" else np.ptp(y, 1) > 0
        return int(held[~self.window_is_test].sum()), int(held[self.window_is_test].sum())

    def too_rare(self, f: Feature) -> str:
        """Why a feature cannot be probed here ("" if it can): too few windows hold it, or too few characters.

        A probe and a "best cell" ranked on a handful of training windows learn those windows (the Linux LSTM's
        strings held by 5 of them: a best cell at chance on the test windows), so a minimum count is required."""
        y = self.labels[f.name]
        train, test = self.holding(f)
        if train < self.min_windows or test < self.min_test_windows:
            return (f"too rare: {train} training and {test} test windows hold it, at least {self.min_windows} and "
                    f"{self.min_test_windows} needed")  # fmt: skip
        parts = (y[~self.test], y[self.test])
        if f.kind == "binary" and not all(min(np.count_nonzero(p), np.count_nonzero(p == 0)) >= 10 for p in parts):
            return "too rare: fewer than 10 characters of a class in the training or test windows"
        if f.kind == "count" and not all(np.ptp(p) > 0 for p in parts):
            return "too rare: the count is constant in the training or test windows"
        return ""

    def excerpt(self, f: Feature) -> tuple[int, int]:
        """The test window the viewer shows for a feature (the most mixed, binary, or most varied, count) and where
        its text starts: after its first newline when that is near, so the viewer opens on a whole line."""
        y = self.labels[f.name].reshape(len(self.starts), self.length)[self.test_windows]
        spread = np.minimum(y.sum(1), (y == 0).sum(1)) if f.kind == "binary" else y.var(1)
        w = int(self.test_windows[int(np.argmax(spread))])
        newline = self.text[self.starts[w] : self.starts[w] + self.length].find(b"\n")
        return w, newline + 1 if 0 <= newline < self.length // 3 else 0


def last_chars_baselines(windows: Windows, features: list[Feature], s: dict) -> dict[str, float]:
    """{f"{feature}_last{k}": score}: the same probe as the task's, fitted on the same training windows and scored
    on the same test windows, reading only the one-hot last k characters (k in `last_k`) instead of a state."""
    if max(s["last_k"], default=1) > windows.warmup + 1:
        raise UserError(f"last_k {max(s['last_k'])} reaches before the {windows.warmup} characters of warm-up")
    raw = np.frombuffer(windows.text, dtype=np.uint8)
    out = {}
    for k in s["last_k"]:
        X = last_chars(raw, windows.positions, int(k))
        shared = ProbeRows(X, windows.test, s["train_stride"])  # standardised once for every feature's probe
        for f in features:
            with sklearn.config_context(**FAST_SKLEARN):
                r = fit_probe(X, windows.labels[f.name], windows.test, windows.groups, f.kind, None,
                              s["train_stride"], s["cv"], s["cs"] if f.kind == "binary" else s["alphas"], s["seed"],
                              shared)  # fmt: skip
            out[f"{f.name}_last{k}"] = r.score
    return out


def _against(r, kind: str, baselines: dict[str, float], feature: str, s: dict) -> dict:
    """The columns that say what a probe's score means: each control and whether it is informative, its
    selectivity, each last-k baseline and the probe's lead over it."""
    out = {}
    for name, column in (("character", ""), ("trigram", "_trigram")):
        out[f"control{column}"] = r.controls[name]
        out[f"selectivity{column}"] = r.selectivity(name)
        out[f"control{column}_informative"] = float(control_informative(r.controls[name], kind, s["control_margin"]))
    for k in s["last_k"]:
        out[f"last{k}"] = baselines[f"{feature}_last{k}"]
        out[f"selectivity_last{k}"] = r.score - baselines[f"{feature}_last{k}"]
    return out


def probe_model(
    model, windows: Windows, features: list[Feature], s: dict, base: dict, baselines: dict
) -> tuple[dict[str, pd.DataFrame], np.ndarray]:
    """Every record of one model, a table per kind: "probe" (layer x internal x feature), "cell" (best single cells
    and their ablation), "viewer" (the best cells' values on each feature's excerpt); and the viewer's values, int8
    (value x 127), one run of `array_length` per viewer row, end to end."""
    rng = np.random.default_rng(s["seed"])
    acts = trace_windows(model, windows.batch, windows.warmup)  # {'layers.l.name': (W, L, H)}
    W, L = windows.positions.shape
    H = model.config.size
    probeable = [f for f in features if not windows.too_rare(f)]
    rows, cells, viewer, series = [], [], [], []
    for f in features:
        if f not in probeable:
            train, test = windows.holding(f)
            rows.append({**base, "layer": 0, "internal": "", "feature": f.name,
                         "feature_kind": f.kind, "metric": METRIC[f.kind], "train_windows": train,
                         "test_windows": test, "note": windows.too_rare(f)})  # fmt: skip
    for layer in range(model.config.layers):
        names = sorted(k.rsplit(".", 1)[1] for k in acts if k.startswith(f"layers.{layer}."))
        cell_name = cell_internal(names)
        probed = names if "all" in s["internals"] else [n for n in s["internals"] if n in names]
        probed = probed if cell_name in probed else [*probed, cell_name]
        cell_probes = {}
        for internal in probed:
            X = acts[f"layers.{layer}.{internal}"].reshape(W * L, H)
            shared = ProbeRows(X, windows.test, s["train_stride"])  # standardised once for every feature's probe
            for f in probeable:
                y = windows.labels[f.name]
                with sklearn.config_context(**FAST_SKLEARN):
                    r = fit_probe(X, y, windows.test, windows.groups, f.kind, windows.control_types,
                                  s["train_stride"], s["cv"], s["cs"] if f.kind == "binary" else s["alphas"], s["seed"],
                                  shared)  # fmt: skip
                if internal == cell_name:
                    cell_probes[f.name] = r
                train, test = windows.holding(f)
                rows.append({
                    **base, "layer": layer, "internal": internal, "feature": f.name,
                    "feature_kind": f.kind, "metric": METRIC[f.kind], "score": r.score, "baseline": r.baseline,
                    **_against(r, f.kind, baselines, f.name, s), "accuracy": r.accuracy,
                    "majority": r.majority, "strength": r.strength, "unconverged_fits": r.unconverged,
                    "n_train": int((~windows.test).sum()),
                    "n_test": int(windows.test.sum()), "train_windows": train, "test_windows": test,
                    "positive_rate": float(y[windows.test].mean()),
                })  # fmt: skip
        if not cell_probes:
            continue
        found, shown_, values = _cells(model, windows, probeable, cell_probes, acts, layer, cell_name, s, base,
                                       baselines, rng)  # fmt: skip
        cells.extend(found)
        viewer.extend(shown_)
        series.extend(values)
    frames = {"probe": pd.DataFrame(rows), "cell": pd.DataFrame(cells), "viewer": pd.DataFrame(viewer)}
    return frames, np.concatenate(series) if series else np.zeros(0, dtype=np.int8)


def _versus_random(effect: float, random: np.ndarray) -> str:
    """Where an effect lies against the effects of random cells: "above" or "below" all of them, else "inside"
    (beyond all of 20 draws: a one-sided p of at most 1/21, under 0.05)."""
    if random.size == 0 or not np.isfinite(effect):
        return ""
    return "above" if effect > random.max() else "below" if effect < random.min() else "inside"


def _cells(model, windows, features, probes, acts, layer, cell_name, s, base, baselines, rng) -> tuple[list, ...]:
    """Best single cells per feature, confirmed by holding them at zero and at their mean beside random cells; and
    the viewer's series: (cell rows, viewer rows, viewer values)."""
    W, L = windows.positions.shape
    H = model.config.size
    Xc = acts[f"layers.{layer}.{cell_name}"].reshape(W * L, H)
    picks, single = {}, SingleCells(Xc, windows.test)
    for f in features:
        train_score, test_score = single.scores(windows.labels[f.name], f.kind)
        by_single = np.argsort(-train_score, kind="stable")  # ranked on the training windows only
        by_weight = np.argsort(-probes[f.name].probe.importance_, kind="stable")
        picks[f.name] = (by_single, by_weight, test_score)
    best = {f.name: int(picks[f.name][0][0]) for f in features}
    pool = np.setdiff1d(np.arange(H), sorted(set(best.values())))
    pool = pool if pool.size else np.arange(H)
    random_cells = np.sort(rng.choice(pool, size=min(int(s["random_cells"]), pool.size), replace=False))

    # the runs, on the test windows: clean, then each cell (the best ones, the random ones) held at 0 and at its mean
    states = model.layers[layer].state_names
    means = {n: acts[f"layers.{layer}.{n}"].reshape(W * L, H)[~windows.test].mean(0) for n in states}
    runs = [(-1, "clean")] + [(int(c), how) for c in (*sorted(set(best.values())), *random_cells)
                              for how in ("zero", "mean")]  # fmt: skip
    index = {run: k for k, run in enumerate(runs)}
    tw = windows.test_windows
    held = np.zeros((len(runs), tw.size, H), dtype=bool)
    fill = {n: np.zeros((len(runs), tw.size, H), dtype=np.float32) for n in states}
    for k, (cell, how) in enumerate(runs):
        if cell >= 0:
            held[k, :, cell] = True
            for n in states:
                fill[n][k] = means[n] if how == "mean" else 0.0
    logp, traced = run_ablated(model, np.tile(windows.batch[tw], (len(runs), 1)), layer, held.reshape(-1, H),
                               {n: v.reshape(-1, H) for n, v in fill.items()}, start=windows.warmup,
                               keep=(cell_name,))  # fmt: skip
    logp = logp.reshape(len(runs), tw.size, L - 1)  # (R, n, L-1): the predictions made inside the windows
    cells = traced[cell_name].reshape(len(runs), tw.size, L, H)  # (R, n, L, H)
    under = _probe_scores(cells, runs, features, probes, best, random_cells, windows.labels, tw, W, L)

    rows, viewer, series = [], [], []
    for f in features:
        by_single, by_weight, test_score = picks[f.name]
        cell = best[f.name]
        r = probes[f.name]
        focus = windows.focus[f.name][tw][:, : L - 1]  # position t's prediction is of character t + 1

        def probe_under(run, f=f):
            return under[f.name, run]

        def loss(run, mask):
            return float(-logp[index[run]][mask].mean()) if mask.any() else float("nan")

        def delta(run, mask):
            return loss(run, mask) - loss((-1, "clean"), mask)

        ablation = {}
        for how, tag in (("zero", "zero"), ("mean", "mean")):
            probe_random = np.array([probe_under((int(c), how)) for c in random_cells])
            lm_random = np.array([delta((int(c), how), focus) for c in random_cells])
            probe_best, lm_best = probe_under((cell, how)), delta((cell, how), focus)
            ablation.update({
                f"probe_{tag}_best": probe_best, f"lm_{tag}_best": lm_best,
                f"lm_{tag}_best_elsewhere": delta((cell, how), ~focus),
                f"probe_{tag}_random_lo": _quantile(probe_random, 0.0),
                f"probe_{tag}_random_median": _quantile(probe_random, 0.5),
                f"probe_{tag}_random_hi": _quantile(probe_random, 1.0),
                f"lm_{tag}_random_lo": _quantile(lm_random, 0.0),
                f"lm_{tag}_random_median": _quantile(lm_random, 0.5),
                f"lm_{tag}_random_hi": _quantile(lm_random, 1.0),
                f"probe_{tag}_vs_random": _versus_random(probe_best, probe_random),
                f"lm_{tag}_vs_random": _versus_random(lm_best, lm_random),
            })  # fmt: skip
        gain = r.score - r.baseline  # a share of a probe at chance means nothing: below 0.05 it is left out
        found_at = s["found_binary"] if f.kind == "binary" else s["found_count"]
        rows.append({
            **base, "layer": layer, "internal": cell_name, "feature": f.name,
            "feature_kind": f.kind, "metric": METRIC[f.kind], "probe_score": r.score, "baseline": r.baseline,
            **_against(r, f.kind, baselines, f.name, s),
            "best_cell": cell, "best_cell_score": float(test_score[cell]),
            "best_cell_share": float((test_score[cell] - r.baseline) / gain) if gain > 0.05 else float("nan"),
            "weight_cell": int(by_weight[0]), "best_cell_weight_rank": int(np.flatnonzero(by_weight == cell)[0]) + 1,
            "random_cells": " ".join(map(str, random_cells)), "n_random": int(random_cells.size),
            **ablation, "lm_focus": loss((-1, "clean"), focus), "n_focus": int(focus.sum()),
            "paper_cell": f.paper_cell, "focus": f.focus_description, "found_at": found_at,
            "found": float(test_score[cell] >= found_at),
        })  # fmt: skip
        w, offset = windows.excerpt(f)
        for rank, c in enumerate(by_single[: s["viewer_cells"]], start=1):
            values, quantity = shown(acts[f"layers.{layer}.{cell_name}"][w, offset:, c], cell_name)
            series.append(np.rint(np.clip(values, -1, 1) * 127).astype(np.int8))
            viewer.append({
                **base, "layer": layer, "internal": cell_name, "feature": f.name, "feature_kind": f.kind,
                "cell": int(c), "rank": rank, "best_cell_score": float(test_score[c]), "quantity": quantity,
                "array_length": int(series[-1].size),
            })  # fmt: skip
    return rows, viewer, series


def _probe_scores(cells, runs, features, probes, best, random_cells, labels, tw, W, L) -> dict:
    """{(feature, run): the feature's probe score on the test windows' cells of that run}, for the runs each feature
    reads (its best cell and the random cells, held at zero and at the mean). Each run's cells are standardised once
    for all the probes that share that standardisation (every probe on one internal), then each probe decides."""
    ys = {f.name: labels[f.name].reshape(W, L)[tw].ravel() for f in features}
    out = {}
    for k, run in enumerate(runs):
        readers = [f for f in features if run[0] >= 0 and run[0] in (best[f.name], *random_cells)]
        standardised = {}
        for f in readers:
            probe = probes[f.name].probe
            if id(probe.scaler_) not in standardised:
                standardised[id(probe.scaler_)] = probe.standardise(cells[k].reshape(-1, cells.shape[-1]))
            out[f.name, run] = score(f.kind, ys[f.name], probe.predict_standardised(standardised[id(probe.scaler_)]))
    return out


def _quantile(values: np.ndarray, q: float) -> float:
    values = values[np.isfinite(values)]
    return float(np.quantile(values, q)) if values.size else float("nan")
