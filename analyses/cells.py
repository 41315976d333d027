"""Interpretable cells: which cells and layers encode line position, quotes, comments, strings, depth, indentation.

Karpathy et al. (2016) sec 4.2 and Fig 2 found LSTM cells that count the position in a line, turn on inside
quotes, inside strings and comments and inside the parentheses of an `if`, and grow with the indentation of a
block. They found them by looking. Here every architecture gets the same measurements, on the same windows of
the test split:

1. Labels per character from raw text (`probes.features`; label t = the state after reading character t), computed
   on the text the model read: each window's state is warmed up from zero on the characters before it, and its
   labels are counted from there too. A feature held by too few training windows is "too rare": no probe, no cell.
2. Linear probes on every probed internal of every layer (`probes.probe`): logistic for binary features
   (scored by balanced accuracy), ridge for counts (R^2), standardised and regularised on training windows
   only, scored on other windows (no neighbouring characters across the split).
3. What the probe's score means, measured two ways. A baseline: the same probe reading only the last k characters
   (k = 1, 3, 10, one-hot), so probe - baseline is what the state holds beyond them. Hewitt and Liang's (2019)
   control task: every byte (or trigram) gets one fixed random label from the real label distribution;
   selectivity = task score - control score, same probe and hyperparameters. That control is kept only where it
   is informative: the character control sits at its ceiling for most binary features (a state that encodes the
   byte just read lets the probe memorise any label per byte) and the trigram control at its floor for counts.
4. Single cells of the memory cell c (or h where there is none): each cell alone as a probe, and the full
   probe's |weight| x std. The best single cell is confirmed by ablation (NeuroX): held at zero, and held at its
   mean, during the forward pass, the probe and the language model's loss on that feature's characters are
   measured again, beside the same for 20 random single cells: the best cell's effect is read against their spread.
5. For the best cells, an activation viewer as in Fig 2 (`probes.view`): text coloured by tanh(c), -1 red,
   +1 blue.

One table holds all of it, `record` telling the rows apart: "probe" (corpus x model x layer x internal x
feature), "cell" (best single cells and their ablation), "viewer" and "excerpt" (the viewer's data).
"""

from __future__ import annotations

import base64
import sys
from functools import lru_cache

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from charlm.model import ARCH_LABELS
from corpora.errors import UserError, run_cli
from probes.activations import (
    cell_internal,
    more_windows,
    run_ablated,
    shown,
    trace_windows,
    window_batch,
    window_starts,
)
from probes.features import Feature, check_names, features_for, style_of, window_labels
from probes.probe import (
    ProbeRows,
    SingleCells,
    block_split,
    context_types,
    control_informative,
    fit_probe,
    last_chars,
    score,
)
from probes.view import display_chars, strip_axes, viewer_html

from .common import analysis_main, source_digest, style
from .context import Context, MissingInput, Needs

TITLE = "Interpretable cells: probes, control tasks and ablations"
QUESTION = (
    "Do the interpretable cells of Karpathy et al. Fig 2 (line length, quotes, comments and strings, if "
    "conditions, indentation) exist in our models, in which architectures, and does zeroing them hurt?"
)
PAPER_SOURCE = "Karpathy et al. (2016), sec 4.2 and Fig 2 (cells found by inspection in their best LSTMs)"
SETTINGS = {
    "split": "test",  # where the windows come from
    "windows": 40,  # windows of text spread evenly over the split (the probe's blocks)
    "extra_windows": 12,  # more windows where a rare binary feature begins (when too few windows hold it)
    "min_windows": 10,  # a feature held by fewer training windows than this is "too rare" (binary: on somewhere in
    "min_test_windows": 3,  # the window; count: varying in it); and by fewer test windows than this
    "window": 400,  # characters per window
    "warmup": 250,  # characters read before each window (from a zero state) so its state is warmed up
    "test_every": 4,  # every 4th window is a test window: 30 train, 10 test
    "train_stride": 3,  # fit on every 3rd training character (neighbours carry nearly the same state)
    "cv": 3,  # contiguous folds (whole windows) that choose the regularisation, within the training windows
    "cs": [0.01, 0.1, 1.0],  # inverse L2 strengths searched for the logistic probes
    "alphas": [1.0, 10.0, 100.0, 1000.0],  # L2 strengths searched for the ridge probes
    "internals": ["c", "h"],  # internals probed where an architecture has them (["all"]: every internal)
    "features": [],  # feature names to probe (empty: every feature of each corpus's text)
    "seeds": 1,  # models probed per configuration (the lowest seeds); groups are never pooled
    "last_k": [1, 3, 10],  # baselines: the same probe on the last k characters read (one-hot)
    "control_margin": 0.1,  # a control task is informative when its score is this far from chance and from 1
    "random_cells": 20,  # random single cells ablated as the control of the best cell's ablation
    "viewer_cells": 3,  # best cells per feature and model offered by the viewer
    "found_binary": 0.75,  # a single cell "is" the paper's cell when it alone reaches this balanced accuracy
    "found_count": 0.5,  # ... or this R^2 for a count
    "seed": 0,  # control-task labels and random cells
}
NEEDS = Needs(predictions=False)  # reads checkpoints (traces, gradients, samples), not Predictions
ARCH_ORDER = list(ARCH_LABELS)
METRIC = {"binary": "balanced accuracy", "count": "R^2"}
CONTROLS = {"character": 1, "trigram": 3}  # control tasks: the type is the byte read, or the trigram ending there


# ------------------------------------------------------------------------------------------ helpers


def _b64(array: np.ndarray, dtype) -> str:
    return base64.b64encode(np.ascontiguousarray(array, dtype=dtype).tobytes()).decode("ascii")


def _unb64(text: str, dtype) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=dtype)


def _to_arrays(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """A frame as plain arrays for ctx.cached: numbers stay numbers, text becomes fixed-width str ("" = missing)."""
    return {c: df[c].to_numpy() if df[c].dtype.kind in "biuf" else df[c].fillna("").astype(str).to_numpy(dtype=str)
            for c in df}  # fmt: skip


def _from_arrays(arrays: dict[str, np.ndarray]) -> pd.DataFrame:
    df = pd.DataFrame(arrays)
    text = [c for c in df if df[c].dtype.kind not in "biuf"]
    df[text] = df[text].replace("", np.nan)
    return df


def _model_label(row: pd.Series, with_seed: bool = False) -> str:
    label = f"{ARCH_LABELS.get(row['arch'], row['arch'])} {int(row['layers'])}x{int(row['size'])}"
    return label + (f" s{int(row['seed'])}" if with_seed else "")


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


def _probed_models(ctx: Context, key: str, seeds: int) -> pd.DataFrame:
    """The lowest `seeds` seeds of every configuration (group) on a corpus, in architecture order."""
    models = ctx.models(corpus=key, required=False)
    if models.empty:
        return models
    models = models.sort_values("seed").groupby("group_id", sort=False).head(seeds)
    order = {a: k for k, a in enumerate(ARCH_ORDER)}
    return models.sort_values(by=["arch", "size", "seed"], key=lambda c: c.map(order) if c.name == "arch" else c)


def _choose_features(styles: dict[str, str], wanted: list[str]) -> dict[str, list[Feature]]:
    """Per corpus key its features; every named feature must exist and apply to at least one corpus."""
    check_names(wanted)
    chosen = {key: [f for f in features_for(s) if not wanted or f.name in wanted] for key, s in styles.items()}
    if wanted:
        for name in wanted:
            if not any(name in {f.name for f in fs} for fs in chosen.values()):
                kinds = " and ".join(sorted(set(styles.values())))
                raise UserError(f"feature '{name}' does not apply to the corpora analysed ({kinds} text)")
    return chosen


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
            r = fit_probe(X, windows.labels[f.name], windows.test, windows.groups, f.kind, None, s["train_stride"],
                          s["cv"], s["cs"] if f.kind == "binary" else s["alphas"], s["seed"], shared)  # fmt: skip
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


# ------------------------------------------------------------------------------------------ one model


def probe_model(model, windows: Windows, features: list[Feature], s: dict, base: dict, baselines: dict) -> pd.DataFrame:
    """Every record of one model: probes per layer x internal x feature, best cells and their ablation, viewer."""
    rng = np.random.default_rng(s["seed"])
    acts = trace_windows(model, windows.batch, windows.warmup)  # {'layers.l.name': (W, L, H)}
    W, L = windows.positions.shape
    H = model.config.size
    probeable = [f for f in features if not windows.too_rare(f)]
    rows = []
    for f in features:
        if f not in probeable:
            train, test = windows.holding(f)
            rows.append({**base, "record": "probe", "layer": 0, "internal": "", "feature": f.name,
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
                r = fit_probe(X, y, windows.test, windows.groups, f.kind, windows.control_types, s["train_stride"],
                              s["cv"], s["cs"] if f.kind == "binary" else s["alphas"], s["seed"], shared)  # fmt: skip
                if internal == cell_name:
                    cell_probes[f.name] = r
                train, test = windows.holding(f)
                rows.append({
                    **base, "record": "probe", "layer": layer, "internal": internal, "feature": f.name,
                    "feature_kind": f.kind, "metric": METRIC[f.kind], "score": r.score, "baseline": r.baseline,
                    **_against(r, f.kind, baselines, f.name, s), "accuracy": r.accuracy,
                    "majority": r.majority, "strength": r.strength, "n_train": int((~windows.test).sum()),
                    "n_test": int(windows.test.sum()), "train_windows": train, "test_windows": test,
                    "positive_rate": float(y[windows.test].mean()),
                })  # fmt: skip
        if not cell_probes:
            continue
        rows.extend(_cells(model, windows, probeable, cell_probes, acts, layer, cell_name, s, base, baselines, rng))
    return pd.DataFrame(rows)


def _versus_random(effect: float, random: np.ndarray) -> str:
    """Where an effect lies against the effects of random cells: "above" or "below" all of them, else "inside"
    (beyond all of 20 draws: a one-sided p of at most 1/21, under 0.05)."""
    if random.size == 0 or not np.isfinite(effect):
        return ""
    return "above" if effect > random.max() else "below" if effect < random.min() else "inside"


def _cells(model, windows, features, probes, acts, layer, cell_name, s, base, baselines, rng) -> list[dict]:
    """Best single cells per feature, confirmed by holding them at zero and at their mean beside random cells; and
    the viewer's series."""
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
                               {n: v.reshape(-1, H) for n, v in fill.items()}, start=windows.warmup)  # fmt: skip
    logp = logp.reshape(len(runs), tw.size, L - 1)  # (R, n, L-1): the predictions made inside the windows
    cells = traced[cell_name].reshape(len(runs), tw.size, L, H)  # (R, n, L, H)
    under = _probe_scores(cells, runs, features, probes, best, random_cells, windows.labels, tw, W, L)

    rows = []
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
            **base, "record": "cell", "layer": layer, "internal": cell_name, "feature": f.name,
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
            rows.append({
                **base, "record": "viewer", "layer": layer, "internal": cell_name, "feature": f.name,
                "feature_kind": f.kind, "cell": int(c), "rank": rank, "best_cell_score": float(test_score[c]),
                "quantity": quantity, "values": _b64(np.rint(np.clip(values, -1, 1) * 127), np.int8),
            })  # fmt: skip
    return rows


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


# ------------------------------------------------------------------------------------------ compute


def compute(ctx: Context) -> pd.DataFrame:
    """Probe every selected model of every corpus (lowest seed per configuration) on the same windows."""
    s = ctx.settings
    wanted = list(s["features"] or [])
    unknown = sorted(set(s["internals"]) - suite_internals() - {"all"})
    if unknown:
        raise UserError(f"no architecture has the internal {', '.join(unknown)} "
                        f"(internals: {', '.join(sorted(suite_internals()))}, or all)")  # fmt: skip
    corpora_ = {}
    for key in ctx.corpus_keys():
        models = _probed_models(ctx, key, int(s["seeds"]))
        if not models.empty:
            text = ctx.text(models.iloc[0], s["split"])
            corpora_[key] = (models, text, style_of(str(models["corpus"].iloc[0]), text))
    if not corpora_:
        raise MissingInput("no trained recurrent models: train them with `python -m reports --profile quick`")
    chosen = _choose_features({k: v[2] for k, v in corpora_.items()}, wanted)
    source = source_digest(sys.modules[__name__])
    rows = []
    for key, (models, text, _) in corpora_.items():
        features = chosen[key]
        if not features:
            continue
        ids = ctx.corpus(models.iloc[0]).split(s["split"])
        try:
            windows = Windows(text, ids, features, s)
        except ValueError as err:
            raise MissingInput(f"{models['corpus'].iloc[0]} {s['split']} split: {err}") from None  # too short
        corpus_key = {"corpus": models.iloc[0]["corpus_key"], "settings": s, "features": [f.name for f in features],
                      "source": source, "split": s["split"]}  # fmt: skip
        probeable = [f for f in features if not windows.too_rare(f)]
        baselines = {k: float(v) for k, v in ctx.cached("cells-baselines", corpus_key, lambda windows=windows,
                     probeable=probeable: last_chars_baselines(windows, probeable, s)).items()}  # fmt: skip
        for f in features:
            w, offset = windows.excerpt(f)
            start = int(windows.starts[w]) + offset
            labels = windows.labels[f.name].reshape(len(windows.starts), -1)[w, offset:]
            rows.append({
                "record": "excerpt", "corpus": models["corpus"].iloc[0], "feature": f.name, "feature_kind": f.kind,
                "window_start": start,
                "text": base64.b64encode(text[start : int(windows.starts[w]) + windows.length]).decode(),
                "labels": _b64(np.clip(labels, -32768, 32767), np.int16),
            })  # fmt: skip
        for _, row in models.iterrows():
            base = {"corpus": row["corpus"], "arch": row["arch"], "model": _model_label(row, int(s["seeds"]) > 1),
                    "model_id": row["model_id"], "seed": int(row["seed"]), "layers": int(row["layers"]),
                    "size": int(row["size"])}  # fmt: skip
            cache_key = {"model": ctx.digest(row), "settings": s, "features": [f.name for f in features],
                         "source": source, "split": s["split"]}  # fmt: skip
            arrays = ctx.cached("cells", cache_key, lambda row=row, windows=windows, features=features, base=base,
                                baselines=baselines: _to_arrays(probe_model(ctx.model(row), windows, features, s,
                                                                            base, baselines)))  # fmt: skip
            rows.extend(_from_arrays(arrays).to_dict("records"))
    df = pd.DataFrame(rows)
    whole = ("layer", "best_cell", "weight_cell", "best_cell_weight_rank", "cell", "rank", "n_focus", "n_random",
             "train_windows", "test_windows")  # fmt: skip
    for column in whole:
        if column in df:
            df[column] = df[column].astype("Int64")
    return df


# ------------------------------------------------------------------------------------------ views of the table


def _records(df: pd.DataFrame, record: str) -> pd.DataFrame:
    return df[df["record"] == record].reset_index(drop=True) if "record" in df else df.iloc[0:0]


def _with(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """The rows where `column` has a value (none when no row has it: every feature too rare)."""
    return rows.dropna(subset=[column]) if column in rows else rows.iloc[0:0]


def _last_k(df: pd.DataFrame) -> list[int]:
    """The k of the last-k-characters baselines the table holds, in increasing order."""
    return sorted(int(c[len("selectivity_last") :]) for c in df if c.startswith("selectivity_last"))


def _informative(df: pd.DataFrame, column: str) -> pd.Series:
    """A selectivity column where its control was informative, NaN where it sat at its ceiling or floor."""
    flag = "control_informative" if column == "selectivity" else "control_trigram_informative"
    return df[column].where(df[flag] == 1)


def _range(lo, hi, fmt: str = "+.3f") -> str:
    return f"{lo:{fmt}} to {hi:{fmt}}" if np.isfinite(lo) and np.isfinite(hi) else "-"


def with_paper(df: pd.DataFrame) -> pd.DataFrame:
    """The table the report shows: per corpus, feature and model, the full probe on the memory cell against the
    last-k baseline and the (informative) controls, the best single cell, and what holding it at zero or at its
    mean does beside the range of random cells; beside it, the cell Fig 2 shows."""
    cells = _records(df, "cell")
    if cells.empty:
        return cells
    k = _last_k(cells)[-1]
    table = {
        "corpus": cells["corpus"], "feature": cells["feature"], "model": cells["model"], "layer": cells["layer"],
        "internal": cells["internal"], "metric": cells["metric"], "probe": cells["probe_score"].round(3),
        f"last {k} chars": cells[f"last{k}"].round(3), f"probe - last {k}": cells[f"selectivity_last{k}"].round(3),
        "selectivity (character)": _informative(cells, "selectivity").round(3),
        "selectivity (trigram)": _informative(cells, "selectivity_trigram").round(3),
        "best cell": cells["best_cell"], "cell alone": cells["best_cell_score"].round(3),
        "share of probe": cells["best_cell_share"].round(2),
    }  # fmt: skip
    for how, words in (("zero", "zeroed"), ("mean", "at mean")):
        table[f"probe, cell {words}"] = cells[f"probe_{how}_best"].round(3)
        if how == "zero":
            table["probe, random cells zeroed"] = [
                _range(lo, hi, ".3f") for lo, hi in zip(cells["probe_zero_random_lo"], cells["probe_zero_random_hi"])
            ]
        table[f"loss change, cell {words} (nats)"] = cells[f"lm_{how}_best"].round(3)
        if how == "zero":  # the ranges at the mean are in the CSV (lm_mean_random_lo, _hi)
            table["loss change, random cells zeroed"] = [
                _range(lo, hi) for lo, hi in zip(cells["lm_zero_random_lo"], cells["lm_zero_random_hi"])
            ]
        table[f"loss, {words}, vs random"] = cells[f"lm_{how}_vs_random"].fillna("")
    table["Fig 2"] = cells["paper_cell"].fillna("").replace("", "-")
    return pd.DataFrame(table).set_index(["corpus", "feature", "model", "layer", "internal"])  # what names a row


HEATMAPS = (  # (column, what it is measured against)
    ("last", "a probe on the last {k} characters"),
    ("selectivity", "the character control"),
    ("selectivity_trigram", "the trigram control"),
)


def plot(df: pd.DataFrame):
    """The probe's lead over the last-k-characters baseline and its selectivity against each control (blank where
    the control sat at its ceiling or floor), by model, layer and internal; and Fig 2's cells in the LSTM."""
    style()
    probes_ = _with(_records(df, "probe"), "selectivity")
    if probes_.empty:
        return None  # every feature too rare (or no probe at all): the caption says why, nothing to draw
    corpora_ = sorted(probes_["corpus"].unique())
    strips = [strip for corpus in corpora_ for strip in _strips(df, corpus)]
    rows = max((probes_[probes_["corpus"] == c].groupby(["model", "layer", "internal"]).ngroups for c in corpora_),
               default=1)  # fmt: skip
    heat_h, strip_h = 0.24 * rows + 1.5, 0.95
    ncols = max(1, len(corpora_))
    k = _last_k(probes_)[-1] if _last_k(probes_) else None
    fig = plt.figure(figsize=(5.6 * ncols, len(HEATMAPS) * heat_h + strip_h * len(strips)), layout="constrained")
    fig.set_layout_engine("none")  # until the end: seaborn draws the figure to colour each annotation
    grid = fig.add_gridspec(len(HEATMAPS) + len(strips), ncols,
                            height_ratios=[heat_h] * len(HEATMAPS) + [strip_h] * len(strips))  # fmt: skip
    for r, (column, against) in enumerate(HEATMAPS):
        for c, corpus in enumerate(corpora_):
            ax = fig.add_subplot(grid[r, c])
            sub = probes_[probes_["corpus"] == corpus].copy()
            layers = sub["layer"].nunique() > 1
            sub["probed"] = sub["model"] + (" L" + sub["layer"].astype(str) if layers else "") + " " + sub["internal"]
            if column == "last":
                sub["value"], title = sub[f"selectivity_last{k}"], against.format(k=k)
            else:
                sub["value"], title = _informative(sub, column), against + " (blank: at ceiling or floor)"
            table = sub.pivot_table(index="probed", columns="feature", values="value", sort=False, dropna=False)
            sns.heatmap(table, annot=True, fmt=".2f", cmap="vlag_r", center=0, vmin=-1, vmax=1, ax=ax,
                        annot_kws={"fontsize": 7}, cbar_kws={"label": "probe - " + ("baseline" if column == "last"
                                                                                    else "control")})  # fmt: skip
            ax.set_title(f"{corpus}: against {title}", fontsize=9)
            ax.set_xlabel("feature (binary: balanced accuracy; count: R^2)")
            ax.set_ylabel("model, internal")
            ax.tick_params(axis="both", labelsize=8)
    for r, (title, chars, values, underline) in enumerate(strips):
        ax = fig.add_subplot(grid[len(HEATMAPS) + r, :])
        strip_axes(ax, chars, values, underline, width=120, lines=4)
        ax.set_title(title, fontsize=8, loc="left")
    fig.set_layout_engine("constrained")
    return fig


def _strip_model(viewer: pd.DataFrame) -> str:
    """The model whose cells the static strips show: the widest LSTM (the paper's), else the first model."""
    lstm = viewer[viewer["arch"] == "lstm"]
    pool = lstm if not lstm.empty else viewer
    return str(pool.sort_values(["size", "seed"], ascending=[False, True])["model_id"].iloc[0])


def _strips(df: pd.DataFrame, corpus: str) -> list[tuple]:
    """(title, characters, values, underline) of the best cell per feature of one corpus's strip model."""
    viewer, excerpts = _records(df, "viewer"), _records(df, "excerpt")
    viewer = viewer[(viewer["corpus"] == corpus) & (viewer["rank"] == 1)]
    if viewer.empty:
        return []
    viewer = viewer[viewer["model_id"] == _strip_model(viewer)]
    cells = _records(df, "cell")
    out = []
    for _, v in viewer.iterrows():
        cell = cells[(cells["model_id"] == v["model_id"]) & (cells["feature"] == v["feature"])]
        paper = cell["paper_cell"].fillna("").iloc[0] if not cell.empty else ""
        if not paper:
            continue
        e = excerpts[(excerpts["corpus"] == corpus) & (excerpts["feature"] == v["feature"])].iloc[0]
        labels = _unb64(e["labels"], np.int16)
        metric = METRIC[v["feature_kind"]]
        title = (f"{corpus}, {v['model']}, cell {int(v['cell'])}, {v['quantity']} (red -1, blue +1): {v['feature']}, "
                 f"{metric} {v['best_cell_score']:.2f} alone" + (f"; Fig 2: {paper}" if paper else "")
                 + ("; underlined: feature on" if v["feature_kind"] == "binary" else ""))  # fmt: skip
        out.append((title, display_chars(base64.b64decode(e["text"])), _unb64(v["values"], np.int8) / 127.0,
                    labels > 0 if v["feature_kind"] == "binary" else None))  # fmt: skip
    return out


def report_html(df: pd.DataFrame) -> str:
    """The report's interactive part of this section: the activation viewers of the table as one self-contained
    HTML fragment (one viewer per corpus).

    Every character of corpus text is escaped inside; the result may be inserted into a page as is.
    """
    viewer, excerpts = _records(df, "viewer"), _records(df, "excerpt")
    parts = []
    for corpus, sub in viewer.groupby("corpus", sort=True):
        texts = {}
        for _, e in excerpts[excerpts["corpus"] == corpus].iterrows():
            texts[e["feature"]] = {"text": base64.b64decode(e["text"]), "feature": e["feature"],
                                   "labels": _unb64(e["labels"], np.int16),
                                   "underline": e["feature_kind"] == "binary"}  # fmt: skip
        first = _strip_model(sub)
        sub = pd.concat([sub[sub["model_id"] == first], sub[sub["model_id"] != first]])  # the strips' model first
        series = []
        for _, v in sub.iterrows():
            metric = "bal. acc." if v["feature_kind"] == "binary" else "R^2"
            series.append({
                "model": v["model"], "layer": int(v["layer"]), "cell": int(v["cell"]), "text": v["feature"],
                "values": _unb64(v["values"], np.int8) / 127.0, "quantity": v["quantity"],
                "label": f"cell {int(v['cell'])}: {v['feature']} #{int(v['rank'])} "
                         f"({metric} {v['best_cell_score']:.2f})",
                "title": f"{v['model']}, layer {int(v['layer'])}, cell {int(v['cell'])}, {v['quantity']}: "
                         f"{v['feature']} (alone: {metric} {v['best_cell_score']:.2f})",
            })  # fmt: skip
        parts.append(viewer_html(texts, series, heading=f"{corpus}: the best cells of each feature, per model"))
    return "".join(parts)


LEAD = 0.05  # a probe "reads more than the last k characters" when it beats their baseline by more than this


def caption(df: pd.DataFrame) -> str:
    cells = _records(df, "cell")
    probes_ = _records(df, "probe")
    rare = _too_rare(probes_)
    if cells.empty:
        return "No feature had enough examples in the probed windows to fit a probe." + "".join(
            f" {corpus}: {text}" for corpus, text in rare.items()
        )
    parts = []
    for corpus, sub in cells.groupby("corpus", sort=True):
        items = []
        for feature, fs in sub.groupby("feature", sort=False):
            metric = fs["metric"].iloc[0]
            ranked = fs.sort_values("best_cell_score", ascending=False)
            best = ranked.iloc[0]
            paper = fs["paper_cell"].fillna("").iloc[0]
            per_model = ", ".join(f"{r['model']} {r['best_cell_score']:.2f}" for _, r in ranked.iterrows())
            found = list(ranked.loc[ranked["found"] == 1, "model"])
            text = (
                f"{feature}{f' (Fig 2: {paper})' if paper else ''}, best single cell alone ({metric}): "
                f"{per_model}; passes {best['found_at']:g} in {', '.join(found) if found else 'none'}."
            )
            if paper:  # the paper's cells: what ablating the best one does
                text += " " + _ablation_sentence(best)
            items.append(text)
        parts.append(f"{corpus}. " + " ".join(items) + rare.get(corpus, "") + _survival(sub))
    parts.append(_beyond_sentence(cells))
    parts.append(_controls_sentence(_with(probes_, "selectivity")))
    parts.append(_ablation_count(cells))
    parts.append(
        "Binary features are scored by balanced accuracy (0.5 = chance) and counts by R^2, on test windows never "
        'seen in training. A single cell "passes" at balanced accuracy 0.75 or R^2 0.5 (settings found_binary, '
        "found_count). The paper found its cells by inspection in converged 3-layer LSTMs; ours are 1-layer models "
        "trained on a few million characters, so a cell the paper shows may be missing here only because the model "
        "is weak."
    )
    return "\n\n".join(p for p in parts if p)


def _too_rare(probes_: pd.DataFrame) -> dict[str, str]:
    """Per corpus, one sentence naming the features too rare in the windows to probe (no best cell is named)."""
    if probes_.empty or "note" not in probes_:
        return {}
    rare = probes_[probes_["note"].fillna("").str.startswith("too rare")].drop_duplicates(["corpus", "feature"])
    out = {}
    for corpus, sub in rare.groupby("corpus", sort=True):
        named = "; ".join(f"{r['feature']} ({r['note'][len('too rare: ') :]})" for _, r in sub.iterrows())
        out[corpus] = f" Too rare in the probed windows to name a cell: {named}."
    return out


def _versus_words(delta: float, versus: str, n: int, lo: float, hi: float) -> str:
    """'the loss rises by +0.120 nats, above all 20 random cells (-0.010 to +0.020)' and its other directions."""
    if not np.isfinite(delta):
        return "there is no prediction to measure the loss on"
    verb = (f"the loss rises by {delta:+.3f} nats" if delta >= 0.0005 else f"the loss falls by {delta:+.3f} nats"
            if delta <= -0.0005 else f"the loss is unchanged ({delta:+.3f} nats)")  # fmt: skip
    where = {"above": f"above all {n} random cells", "below": f"below all {n} random cells",
             "inside": f"within the range of {n} random cells"}.get(versus, "")  # fmt: skip
    return verb + (f", {where} ({_range(lo, hi)})" if where else "")


def _ablation_sentence(best: pd.Series) -> str:
    """What holding one best cell at zero and at its mean does to its probe and to the loss, against random cells."""
    n = int(best["n_random"])
    share = (f"; {best['best_cell_share']:.0%} of its probe's gain over chance"
             if np.isfinite(best["best_cell_share"]) else "; its probe is near chance")  # fmt: skip
    effect = {how: _versus_words(best[f"lm_{how}_best"], best[f"lm_{how}_vs_random"], n,
                                 best[f"lm_{how}_random_lo"], best[f"lm_{how}_random_hi"])
              for how in ("zero", "mean")}  # fmt: skip
    return (
        f"Zeroing the {best['model']}'s cell {int(best['best_cell'])} ({best['internal']}{share}) moves its probe "
        f"{best['probe_score']:.2f} -> {best['probe_zero_best']:.2f} ({n} random cells: "
        f"{_range(best['probe_zero_random_lo'], best['probe_zero_random_hi'], '.2f')}); on {best['focus']} "
        f"({int(best['n_focus'])} predictions) {effect['zero']}. Held at its mean instead, the cell moves the "
        f"probe to {best['probe_mean_best']:.2f} and {effect['mean']}."
    )


def _ablation_count(cells: pd.DataFrame) -> str:
    """Over every best cell (model x layer x feature): where its effect on the loss lies against random cells."""
    n = len(cells)
    parts = []
    for how, words in (("zero", "Zeroing the best cell"), ("mean", "Holding it at its mean")):
        versus = cells[f"lm_{how}_vs_random"].fillna("")
        lowers = int((cells[f"lm_{how}_best"] < 0).sum())
        parts.append(
            f"{words} raises the loss on the feature's characters beyond every random cell in "
            f"{int((versus == 'above').sum())} of {n} cases, lowers it below every one in "
            f"{int((versus == 'below').sum())}, and stays within their range in {int((versus == 'inside').sum())}; "
            f"it lowers the loss at all in {lowers} of {n}."
        )
    return " ".join(parts)


def _beyond_sentence(cells: pd.DataFrame) -> str:
    """Per feature, does the memory-cell probe of some model read more than a probe on the last k characters?"""
    ks = _last_k(cells)
    if not ks:
        return ""
    k = ks[-1]
    ahead, behind = [], []
    for (corpus, feature), fs in cells.groupby(["corpus", "feature"], sort=True):
        best = fs.loc[fs[f"selectivity_last{k}"].idxmax()]
        lead = best[f"selectivity_last{k}"]
        smaller = ", ".join(f"last {j}: {best[f'last{j}']:.2f}" for j in ks[:-1])
        text = (f"{feature} ({corpus}; {best['model']} {best['probe_score']:.2f} against {best[f'last{k}']:.2f}, "
                f"{lead:+.2f}{'; ' + smaller if smaller else ''})")  # fmt: skip
        (ahead if lead > LEAD else behind).append(text)
    return (
        f"Against the same probe reading only the last {k} characters, the memory cell reads more (by over {LEAD}) "
        f"for {'; '.join(ahead) if ahead else 'no feature'}, and no more for {'; '.join(behind) if behind else 'none'}."
    )


def _controls_sentence(probes_: pd.DataFrame) -> str:
    """How often each of Hewitt and Liang's controls left room to measure, and the selectivity where it did."""
    if probes_.empty:
        return ""
    lines = []
    for column, control in (("selectivity", "character"), ("selectivity_trigram", "trigram")):
        flag = probes_["control_informative" if column == "selectivity" else "control_trigram_informative"] == 1
        scores = probes_["control" if column == "selectivity" else "control_trigram"]
        high = scores > np.where(probes_["feature_kind"] == "binary", 0.75, 0.5)  # nearer the ceiling than chance
        ceiling, floor = int((~flag & high).sum()), int((~flag & ~high).sum())
        sel = probes_.loc[flag, column]
        where = (f"; where it is, selectivity runs {sel.min():.2f} to {sel.max():.2f} (median {sel.median():.2f})"
                 if flag.any() else "")  # fmt: skip
        lines.append(f"the {control} control is informative for {int(flag.sum())} of {len(probes_)} probes "
                     f"(at its ceiling for {ceiling}, at its floor for {floor}){where}")  # fmt: skip
    return (
        "Hewitt and Liang's controls (a random label per byte or per trigram): " + "; ".join(lines) + ". A control "
        "at its ceiling (the state encodes the byte just read, so a probe memorises any label per byte) makes "
        "selectivity about 0 by construction, one at its floor makes it the task score itself: neither says what "
        "the state holds, so the table and figure leave those selectivities out."
    )


def _survival(cells: pd.DataFrame) -> str:
    """Do the LSTM's cells survive Levy's ablations? Which of the features whose single cell passes in the LSTM
    also pass in each ablation."""
    lstm = cells[cells["arch"] == "lstm"]
    if lstm.empty:
        return ""
    widest = lstm[lstm["size"] == lstm["size"].max()]
    kept = sorted(set(widest.loc[widest["found"] == 1, "feature"]))
    if not kept:
        return " No single LSTM cell passes for any feature, so there is nothing for the ablations to keep."
    parts = []
    for arch in ARCH_ORDER[3:]:
        sub = cells[(cells["arch"] == arch) & cells["feature"].isin(kept)]
        if not sub.empty:
            have = sorted(set(sub.loc[sub["found"] == 1, "feature"]))
            parts.append(f"{ARCH_LABELS[arch]} {len(have)} ({', '.join(have) if have else 'none'})")
    if not parts:
        return ""
    return (f" Of the {len(kept)} features with a passing LSTM cell ({', '.join(kept)}), Levy's ablations keep: "
            + "; ".join(parts) + ".")  # fmt: skip


def summary(df: pd.DataFrame) -> str:
    cells = _records(df, "cell")
    if cells.empty:
        return "no feature had enough examples to probe"
    items = []
    for (corpus, feature), fs in cells.groupby(["corpus", "feature"], sort=True):
        if not fs["paper_cell"].fillna("").iloc[0]:
            continue
        best = fs.loc[fs["best_cell_score"].idxmax()]
        metric = "bal. acc." if best["feature_kind"] == "binary" else "R^2"
        items.append(f"{corpus} {feature} {best['best_cell_score']:.2f} {metric} ({best['model']})")
    return ("best single cell for each of Fig 2's cells: " + "; ".join(items)
            + " (paper: such cells exist in its LSTMs, found by inspection, no numbers)")  # fmt: skip


def notes(df: pd.DataFrame) -> list[str]:
    probes_ = _with(_records(df, "probe"), "n_train")
    sizes = ""
    if not probes_.empty:
        sizes = (f" ({int(probes_['n_train'].iloc[0]):,} training and {int(probes_['n_test'].iloc[0]):,} test "
                 "characters per corpus)")  # fmt: skip
    ks = ", ".join(map(str, _last_k(probes_))) or "none"
    return [
        "Probes read windows of the test split spread evenly over it, each after a warm-up from a zero state, and "
        f"are tested on held-out windows{sizes}; windows are at least a warm-up apart, so no neighbouring "
        "characters straddle the split. Labels describe the state after reading each character, and are counted "
        "from where the model started reading (the warm-up's first character), not from the split's start: a "
        "brace depth the model never saw is not asked of it.",
        "A feature held by fewer than 10 training windows or 3 test windows (settings min_windows, "
        "min_test_windows; binary: on somewhere in the window, count: varying in it) is called too rare and gets "
        "no probe and no best cell; a rare binary feature first gets up to 12 more windows where it begins.",
        "Binary features use balanced accuracy and logistic probes with balanced class weights (a deviation from "
        "Hewitt and Liang's plain accuracy, so that rare features such as a sentence's first letter do not hide "
        "behind the majority class); plain accuracy and the majority rate are in the probe rows of the table.",
        f"Baselines (k = {ks}): the same probe, regularisation chosen the same way, on the one-hot codes of the last "
        "k characters read instead of a state; probe - baseline is what the state holds beyond them.",
        "Control tasks: every byte value (character control, as in the issue) or every trigram ending at the "
        "character (the harder control ANCHORS suggests) gets one fixed label drawn from the real labels' "
        "distribution; a binary draw that leaves a split with one class is redrawn. Same probe, same regularisation. "
        "A control counts as informative when its score lies 0.1 (setting control_margin) above chance and below 1; "
        "selectivities against the others are in the CSV but not in the report's table and figure.",
        "Ablation: a cell is held at 0 (c_j and h_j; h_j alone without a memory cell), or at its mean over the "
        "clean training windows, at every step of the forward pass, warm-up included; the probe is the one fitted "
        "on clean training windows. The control is 20 random single cells (setting random_cells, none of them a "
        "best cell) treated the same way; the best cell's effect is 'above' or 'below' when it lies beyond all of "
        "theirs (a one-sided p of 1/21). Zeroing a cell whose values sit far from 0 can push a ridge probe's R^2 "
        "far below 0; holding it at its mean does not.",
        "One model per configuration (the lowest seed) is probed: seeds are not averaged here.",
    ]


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
