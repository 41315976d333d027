"""Interpretable cells: which cells and layers encode line position, quotes, comments, strings, depth, indentation.

Karpathy et al. (2016) sec 4.2 and Fig 2 found LSTM cells that count the position in a line, turn on inside
quotes, inside strings and comments and inside the parentheses of an `if`, and grow with the indentation of a
block. They found them by looking. Here every architecture gets the same measurements, on the same windows of
the test split:

1. Labels per character from raw text (`probes.features`; label t = the state after reading character t).
2. Linear probes on every probed internal of every layer (`probes.probe`): logistic for binary features
   (scored by balanced accuracy), ridge for counts (R^2), standardised and regularised on training windows
   only, scored on other windows (no neighbouring characters across the split).
3. Hewitt and Liang's (2019) control task: every byte gets one fixed random label from the real label
   distribution; selectivity = task score - control score, same probe and hyperparameters.
4. Single cells of the memory cell c (or h where there is none): each cell alone as a probe, and the full
   probe's |weight| x std. The best single cell is confirmed by ablation (NeuroX): it is held at zero during the
   forward pass and the probe and the language model's loss on that feature's characters are measured again,
   beside the top-k cells by weight and k random cells.
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
    run_zeroed,
    shown,
    trace_windows,
    window_batch,
    window_starts,
)
from probes.features import Feature, check_names, features_for, style_of
from probes.probe import SingleCells, block_split, context_types, fit_probe, score
from probes.view import display_chars, strip_axes, viewer_html

from .common import analysis_main, source_digest, style
from .context import Context, MissingInput

TITLE = "Interpretable cells: probes, control tasks and ablations"
QUESTION = (
    "Do the interpretable cells of Karpathy et al. Fig 2 (line length, quotes, comments and strings, if "
    "conditions, indentation) exist in our models, in which architectures, and does zeroing them hurt?"
)
PAPER_SOURCE = "Karpathy et al. (2016), sec 4.2 and Fig 2 (cells found by inspection in their best LSTMs)"
SETTINGS = {
    "split": "test",  # where the windows come from
    "windows": 40,  # windows of text spread evenly over the split (the probe's blocks)
    "extra_windows": 12,  # more windows where a rare binary feature begins (if fewer than 2 test_every hold it)
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
    "top_k": 3,  # cells zeroed together by |weight| x std, and the number of random cells zeroed as a control
    "viewer_cells": 3,  # best cells per feature and model offered by the viewer
    "found_binary": 0.75,  # a single cell "is" the paper's cell when it alone reaches this balanced accuracy
    "found_count": 0.5,  # ... or this R^2 for a count
    "seed": 0,  # control-task labels and random cells
}
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

    Windows are spread evenly over the split; a binary feature seen in too few of them (parentheses in War and
    Peace: 1 % of characters) gets `extra_windows` more where it begins, so both the training and the test
    windows hold it. Every `test_every`-th window (in text order) is a test window.
    """

    def __init__(self, text: bytes, ids: np.ndarray, features: list[Feature], s: dict):
        self.length, self.warmup = s["window"], s["warmup"]
        full = {f.name: f.labels(text) for f in features}
        starts = window_starts(ids.size, s["windows"], self.length, self.warmup)
        is_test = block_split(np.arange(starts.size), s["test_every"])
        for f in features:
            inside = full[f.name][starts[:, None] + np.arange(self.length)]
            if f.kind == "binary" and np.count_nonzero(inside.any(1)) < 2 * s["test_every"]:
                onsets = np.flatnonzero(np.diff(full[f.name]) > 0) + 1
                extra = more_windows(starts, onsets, ids.size, self.length, self.warmup, s["extra_windows"])
                starts = np.concatenate([starts, extra])  # every test_every-th extra window is a test window too
                is_test = np.concatenate([is_test, block_split(np.arange(extra.size), s["test_every"])])
        order = np.argsort(starts, kind="stable")
        self.starts, is_test = starts[order], is_test[order]
        self.batch = window_batch(ids, self.starts, self.length, self.warmup)  # (W, warmup + L)
        positions = self.starts[:, None] + np.arange(self.length)  # (W, L)
        self.groups = np.repeat(np.arange(len(self.starts)), self.length)
        self.test = np.repeat(is_test, self.length)
        self.test_windows = np.flatnonzero(is_test)
        raw = np.frombuffer(text, dtype=np.uint8)
        self.control_types = {name: context_types(raw, positions, context).ravel()
                              for name, context in CONTROLS.items()}  # fmt: skip
        self.text, self.positions = text, positions
        self.labels, self.focus = {}, {}
        for f in features:
            self.labels[f.name] = full[f.name][positions].ravel()
            self.focus[f.name] = f.focus_positions(text, full[f.name])[positions]  # (W, L)

    def probeable(self, f: Feature) -> bool:
        """Enough of the feature in both parts to fit and score a probe (both classes, or some spread)."""
        y = self.labels[f.name]
        parts = (y[~self.test], y[self.test])
        if f.kind == "binary":
            return all(min(np.count_nonzero(p), np.count_nonzero(p == 0)) >= 10 for p in parts)
        return all(np.ptp(p) > 0 for p in parts)

    def excerpt(self, f: Feature) -> tuple[int, int]:
        """The test window the viewer shows for a feature (the most mixed, binary, or most varied, count) and where
        its text starts: after its first newline when that is near, so the viewer opens on a whole line."""
        y = self.labels[f.name].reshape(len(self.starts), self.length)[self.test_windows]
        spread = np.minimum(y.sum(1), (y == 0).sum(1)) if f.kind == "binary" else y.var(1)
        w = int(self.test_windows[int(np.argmax(spread))])
        newline = self.text[self.starts[w] : self.starts[w] + self.length].find(b"\n")
        return w, newline + 1 if 0 <= newline < self.length // 3 else 0


# ------------------------------------------------------------------------------------------ one model


def probe_model(model, windows: Windows, features: list[Feature], s: dict, base: dict) -> pd.DataFrame:
    """Every record of one model: probes per layer x internal x feature, best cells and their ablation, viewer."""
    rng = np.random.default_rng(s["seed"])
    acts = trace_windows(model, windows.batch, windows.warmup)  # {'layers.l.name': (W, L, H)}
    W, L = windows.positions.shape
    H = model.config.size
    probeable = [f for f in features if windows.probeable(f)]
    rows = []
    for f in features:
        if f not in probeable:
            rows.append({**base, "record": "probe", "layer": 0, "internal": "", "feature": f.name,
                         "feature_kind": f.kind, "metric": METRIC[f.kind],
                         "note": "too few examples in the windows"})  # fmt: skip
    for layer in range(model.config.layers):
        names = sorted(k.rsplit(".", 1)[1] for k in acts if k.startswith(f"layers.{layer}."))
        cell_name = cell_internal(names)
        probed = names if "all" in s["internals"] else [n for n in s["internals"] if n in names]
        probed = probed if cell_name in probed else [*probed, cell_name]
        cell_probes = {}
        for internal in probed:
            X = acts[f"layers.{layer}.{internal}"].reshape(W * L, H)
            for f in probeable:
                y = windows.labels[f.name]
                r = fit_probe(X, y, windows.test, windows.groups, f.kind, windows.control_types, s["train_stride"],
                              s["cv"], s["cs"] if f.kind == "binary" else s["alphas"], s["seed"])  # fmt: skip
                if internal == cell_name:
                    cell_probes[f.name] = r
                rows.append({
                    **base, "record": "probe", "layer": layer, "internal": internal, "feature": f.name,
                    "feature_kind": f.kind, "metric": METRIC[f.kind], "score": r.score, "baseline": r.baseline,
                    "control": r.controls["character"], "selectivity": r.selectivity("character"),
                    "control_trigram": r.controls["trigram"], "selectivity_trigram": r.selectivity("trigram"),
                    "accuracy": r.accuracy,
                    "majority": r.majority, "strength": r.strength, "n_train": int((~windows.test).sum()),
                    "n_test": int(windows.test.sum()),
                    "positive_rate": float(y[windows.test].mean()),
                })  # fmt: skip
        if not cell_probes:
            continue
        rows.extend(_cells(model, windows, probeable, cell_probes, acts, layer, cell_name, s, base, rng))
    return pd.DataFrame(rows)


def _cells(model, windows, features, probes, acts, layer, cell_name, s, base, rng) -> list[dict]:
    """Best single cells per feature, confirmed by zeroing them; and the viewer's series."""
    W, L = windows.positions.shape
    H = model.config.size
    Xc = acts[f"layers.{layer}.{cell_name}"].reshape(W * L, H)
    k = min(s["top_k"], H)
    picks, single = {}, SingleCells(Xc, windows.test)
    for f in features:
        train_score, test_score = single.scores(windows.labels[f.name], f.kind)
        by_single = np.argsort(-train_score, kind="stable")  # ranked on the training windows only
        by_weight = np.argsort(-probes[f.name].probe.importance_, kind="stable")
        picks[f.name] = (by_single, by_weight, test_score)
    chosen = {int(c) for f in features for c in (picks[f.name][0][0], *picks[f.name][1][:k])}
    random_cells = rng.choice(np.setdiff1d(np.arange(H), sorted(chosen)), size=min(k, H - len(chosen)), replace=False)

    # zeroing runs on the test windows: the clean run, k random cells, and per feature its best cell and top k
    conditions = [np.array([], dtype=int), random_cells]
    for f in features:
        conditions += [picks[f.name][0][:1], picks[f.name][1][:k]]
    tw = windows.test_windows
    zero = np.zeros((len(conditions) * tw.size, H), dtype=bool)
    for c, units in enumerate(conditions):
        zero[c * tw.size : (c + 1) * tw.size, units] = True
    logp, states = run_zeroed(model, np.tile(windows.batch[tw], (len(conditions), 1)), layer, zero)
    logp = logp.reshape(len(conditions), tw.size, -1)[:, :, windows.warmup : windows.warmup + L - 1]  # (C, n, L-1)
    cells = states[cell_name].reshape(len(conditions), tw.size, -1, H)[:, :, windows.warmup :]  # (C, n, L, H)

    def probe_under(f, c):
        y = windows.labels[f.name].reshape(W, L)[tw].ravel()
        return score(f.kind, y, probes[f.name].probe.predict(cells[c].reshape(-1, H)))

    def loss(c, mask):
        return float(-logp[c][mask].mean()) if mask.any() else float("nan")

    rows = []
    for j, f in enumerate(features):
        by_single, by_weight, test_score = picks[f.name]
        best = int(by_single[0])
        r = probes[f.name]
        focus = windows.focus[f.name][tw][:, : L - 1]
        elsewhere = ~focus
        c_best, c_top = 2 + 2 * j, 3 + 2 * j
        clean = loss(0, focus)
        gain = r.score - r.baseline  # a share of a probe at chance means nothing: below 0.05 it is left out
        found_at = s["found_binary"] if f.kind == "binary" else s["found_count"]
        rows.append({
            **base, "record": "cell", "layer": layer, "internal": cell_name, "feature": f.name,
            "feature_kind": f.kind, "metric": METRIC[f.kind], "probe_score": r.score, "baseline": r.baseline,
            "control": r.controls["character"], "selectivity": r.selectivity("character"),
            "control_trigram": r.controls["trigram"], "selectivity_trigram": r.selectivity("trigram"),
            "best_cell": best, "best_cell_score": float(test_score[best]),
            "best_cell_share": float((test_score[best] - r.baseline) / gain) if gain > 0.05 else float("nan"),
            "weight_cell": int(by_weight[0]), "best_cell_weight_rank": int(np.flatnonzero(by_weight == best)[0]) + 1,
            "top_cells": " ".join(map(str, by_weight[:k])), "random_cells": " ".join(map(str, random_cells)),
            "probe_zero_best": probe_under(f, c_best), "probe_zero_top": probe_under(f, c_top),
            "probe_zero_random": probe_under(f, 1), "lm_focus": clean,
            "lm_delta_best": loss(c_best, focus) - clean, "lm_delta_top": loss(c_top, focus) - clean,
            "lm_delta_random": loss(1, focus) - clean,
            "lm_delta_best_elsewhere": loss(c_best, elsewhere) - loss(0, elsewhere),
            "n_focus": int(focus.sum()),
            "paper_cell": f.paper_cell,
            "focus": f.focus_description,
            "found_at": found_at,
            "found": float(test_score[best] >= found_at),
        })  # fmt: skip
        w, offset = windows.excerpt(f)
        for rank, cell in enumerate(by_single[: s["viewer_cells"]], start=1):
            values, quantity = shown(acts[f"layers.{layer}.{cell_name}"][w, offset:, cell], cell_name)
            rows.append({
                **base, "record": "viewer", "layer": layer, "internal": cell_name, "feature": f.name,
                "feature_kind": f.kind, "cell": int(cell), "rank": rank, "best_cell_score": float(test_score[cell]),
                "quantity": quantity, "values": _b64(np.rint(np.clip(values, -1, 1) * 127), np.int8),
            })  # fmt: skip
    return rows


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
            arrays = ctx.cached("cells", cache_key, lambda row=row, windows=windows, features=features, base=base:
                                _to_arrays(probe_model(ctx.model(row), windows, features, s, base)))  # fmt: skip
            rows.extend(_from_arrays(arrays).to_dict("records"))
    df = pd.DataFrame(rows)
    for column in ("layer", "best_cell", "weight_cell", "best_cell_weight_rank", "cell", "rank", "n_focus"):
        if column in df:
            df[column] = df[column].astype("Int64")
    return df


# ------------------------------------------------------------------------------------------ views of the table


def _records(df: pd.DataFrame, record: str) -> pd.DataFrame:
    return df[df["record"] == record].reset_index(drop=True) if "record" in df else df.iloc[0:0]


def with_paper(df: pd.DataFrame) -> pd.DataFrame:
    """The table the report shows: per corpus, feature and model, the full probe on the memory cell, its controls
    and selectivities, the best single cell and what zeroing it does; beside it, the cell Fig 2 shows."""
    cells = _records(df, "cell")
    if cells.empty:
        return cells
    return pd.DataFrame({
        "corpus": cells["corpus"], "feature": cells["feature"], "model": cells["model"],
        "layer": cells["layer"], "internal": cells["internal"], "metric": cells["metric"],
        "probe": cells["probe_score"].round(3), "selectivity (character)": cells["selectivity"].round(3),
        "selectivity (trigram)": cells["selectivity_trigram"].round(3), "best cell": cells["best_cell"],
        "cell alone": cells["best_cell_score"].round(3), "share of probe": cells["best_cell_share"].round(2),
        "probe, cell zeroed": cells["probe_zero_best"].round(3),
        "probe, random zeroed": cells["probe_zero_random"].round(3),
        "loss change, cell zeroed (nats)": cells["lm_delta_best"].round(3),
        "loss change, random zeroed (nats)": cells["lm_delta_random"].round(3),
        "Fig 2": cells["paper_cell"].fillna("").replace("", "-"),
    })  # fmt: skip


def plot(df: pd.DataFrame):
    """Selectivity by model, layer and internal (against each control), and Fig 2's cells in the LSTM."""
    style()
    probes_ = _records(df, "probe").dropna(subset=["selectivity"])
    corpora_ = sorted(probes_["corpus"].unique())
    strips = [strip for corpus in corpora_ for strip in _strips(df, corpus)]
    rows = max((probes_[probes_["corpus"] == c].groupby(["model", "layer", "internal"]).ngroups for c in corpora_),
               default=1)  # fmt: skip
    heat_h, strip_h = 0.24 * rows + 1.5, 0.95
    ncols = max(1, len(corpora_))
    fig = plt.figure(figsize=(5.6 * ncols, 2 * heat_h + strip_h * len(strips)), layout="constrained")
    fig.set_layout_engine("none")  # until the end: seaborn draws the figure to colour each annotation
    grid = fig.add_gridspec(2 + len(strips), ncols, height_ratios=[heat_h] * 2 + [strip_h] * len(strips))
    for r, (column, control) in enumerate((("selectivity", "character"), ("selectivity_trigram", "trigram"))):
        for k, corpus in enumerate(corpora_):
            ax = fig.add_subplot(grid[r, k])
            sub = probes_[probes_["corpus"] == corpus].copy()
            layers = sub["layer"].nunique() > 1
            sub["probed"] = sub["model"] + (" L" + sub["layer"].astype(str) if layers else "") + " " + sub["internal"]
            table = sub.pivot_table(index="probed", columns="feature", values=column, sort=False)
            sns.heatmap(table, annot=True, fmt=".2f", cmap="vlag_r", center=0, vmin=-1, vmax=1, ax=ax,
                        annot_kws={"fontsize": 7}, cbar_kws={"label": "task - control"})  # fmt: skip
            ax.set_title(f"{corpus}: selectivity against the {control} control", fontsize=10)
            ax.set_xlabel("feature (binary: balanced accuracy; count: R^2)")
            ax.set_ylabel("model, internal")
            ax.tick_params(axis="both", labelsize=8)
    for r, (title, chars, values, underline) in enumerate(strips):
        ax = fig.add_subplot(grid[2 + r, :])
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


def caption(df: pd.DataFrame) -> str:
    cells = _records(df, "cell")
    probes_ = _records(df, "probe").dropna(subset=["selectivity"])
    if cells.empty:
        return "No feature had enough examples in the probed windows to fit a probe."
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
            share = (f"; {best['best_cell_share']:.0%} of its probe's gain over chance"
                     if np.isfinite(best["best_cell_share"]) else "; its probe is near chance")  # fmt: skip
            text = (
                f"{feature}{f' (Fig 2: {paper})' if paper else ''}, best single cell alone ({metric}): "
                f"{per_model}; passes {best['found_at']:g} in {', '.join(found) if found else 'none'}."
            )
            if paper:  # the paper's cells: what zeroing the best one does
                text += (
                    f" Zeroing the {best['model']}'s cell {int(best['best_cell'])} ({best['internal']}{share}) moves "
                    f"its probe {best['probe_score']:.2f} -> {best['probe_zero_best']:.2f} "
                    f"({_count(best['random_cells'])} random cells: {best['probe_zero_random']:.2f}) and the loss on "
                    f"{best['focus']} "
                    f"({int(best['n_focus'])} predictions) by {best['lm_delta_best']:+.3f} nats (random cells "
                    f"{best['lm_delta_random']:+.3f}; elsewhere {best['lm_delta_best_elsewhere']:+.3f})."
                )  # fmt: skip
            items.append(text)
        parts.append(f"{corpus}. " + " ".join(items) + _survival(sub))
    if not probes_.empty:
        lines = []
        for column, control in (("selectivity", "character"), ("selectivity_trigram", "trigram")):
            sel = probes_[column]
            lines.append(
                f"against the {control} control {sel.min():.2f} to {sel.max():.2f} (median {sel.median():.2f})"
            )
        parts.append(
            "Selectivity (probe minus control, Hewitt and Liang) ranges " + "; ".join(lines) + ". A linear probe "
            "reads the byte just read from almost any state, so the character control sits near 1 for binary "
            "features and their selectivity against it is mostly negative: what they show beyond the current "
            "character is better read against the trigram control, whose random labels a probe cannot memorise."
        )
    parts.append(
        "Binary features are scored by balanced accuracy (0.5 = chance) and counts by R^2, on test windows never "
        'seen in training. A single cell "passes" at balanced accuracy 0.75 or R^2 0.5 (settings found_binary, '
        "found_count). The paper found its cells by inspection in converged 3-layer LSTMs; ours are 1-layer models "
        "trained on a few million characters, so a cell the paper shows may be missing here only because the model "
        "is weak."
    )
    return "\n\n".join(parts)


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


def _count(cells_text) -> int:
    return len(str(cells_text).split()) if isinstance(cells_text, str) else 0


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
    probes_ = _records(df, "probe").dropna(subset=["n_train"])
    sizes = ""
    if not probes_.empty:
        sizes = (f" ({int(probes_['n_train'].iloc[0]):,} training and {int(probes_['n_test'].iloc[0]):,} test "
                 "characters per corpus)")  # fmt: skip
    return [
        "Probes read windows of the test split spread evenly over it, each after a warm-up from a zero state, and "
        f"are tested on held-out windows{sizes}; windows are at least a warm-up apart, so no neighbouring "
        "characters straddle the split. Labels describe the state after reading each character.",
        "Binary features use balanced accuracy and logistic probes with balanced class weights (a deviation from "
        "Hewitt and Liang's plain accuracy, so that rare features such as a sentence's first letter do not hide "
        "behind the majority class); plain accuracy and the majority rate are in the probe rows of the table.",
        "Control tasks: every byte value (character control, as in the issue) or every trigram ending at the "
        "character (the harder control ANCHORS suggests) gets one fixed label drawn from the real labels' "
        "distribution; a binary draw that leaves a split with one class is redrawn. Same probe, same regularisation.",
        "Zeroing a cell holds c_j and h_j (h_j alone without a memory cell) at 0 at every step of the forward pass, "
        "warm-up included; the probe is the one fitted on clean training windows. Zeroing a cell whose values sit "
        "far from 0 can push a ridge probe's R^2 far below 0.",
        "One model per configuration (the lowest seed) is probed: seeds are not averaged here.",
    ]


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
