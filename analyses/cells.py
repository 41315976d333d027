"""Interpretable cells: which cells and layers encode line position, quotes, comments, strings, depth, indentation.

Karpathy et al. (2016) sec 4.2 and Fig 2 found LSTM cells that count the position in a line, turn on inside
quotes, inside strings and comments and inside the parentheses of an `if`, and grow with the indentation of a
block. They found them by looking. Here every architecture gets the same measurements, on the same windows of
the test split (probing one model: analyses/cells_probing.py; which models, cached one by one: cells_runs.py; the
tables the findings read: cells_tables.py):

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

The tidy table holds the records, `record` telling the rows apart: "probe" (corpus x model x layer x internal x
feature), "cell" (best single cells and their ablation), "viewer" and "excerpt" (where the viewer's values, text and
labels lie in the result's arrays: array_start, array_length). The result's other tables: "features" (per corpus and
feature: how many models have a single cell that passes, the claims' numbers), "corpora" (per corpus: the models'
depth, width and characters read, the controls, the ablations), "architectures" (per corpus and architecture) and
"models" (the probed models as the index lists them).
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from charlm.archs import names
from corpora.errors import run_cli
from probes.view import viewer_html

from . import cells_plot, cells_runs
from .base import Analysis, Claim, Finding, Result
from .cells_tables import (
    architecture_table,
    best_per_model,
    corpus_table,
    feature_table,
    last_k,
    model_table,
    records,
    tidy,
)
from .common import analysis_main
from .context import Context, Needs

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
FAMILIES = {"lstm": "LSTM", "gru": "GRU", "gru-paper": "GRU", "rnn": "RNN"}  # Levy's ablations pool; the rest each


# ------------------------------------------------------------------------------------------ findings


def _verdict(f: pd.Series) -> str:
    """Fig 2's claim on one feature: the paper shows such a cell in its best LSTMs, found by inspection. Ours: a
    single cell passes when it alone reaches found_at on the test windows (at any layer). Reproduced: the headline
    LSTM has one (the model that stands for the paper's best LSTM); partly: only other LSTMs have one; not
    reproduced: no LSTM has one; untested: the feature was too rare to probe, or no LSTM was probed."""
    if f["too_rare"] or not f["lstm_models"]:
        return "untested"
    if f.get("headline_arch") == "lstm" and f.get("headline_found") == 1:
        return "reproduced"
    return "partly" if f["lstm_found"] else "not reproduced"


def _values(row: pd.Series) -> dict:
    return {k: v for k, v in row.items() if not (isinstance(v, float) and np.isnan(v))}


def claim_finding(f: pd.Series) -> Finding:
    """The verdict on Fig 2's cell for one feature of one corpus."""
    v, verdict = _values(f), _verdict(f)
    v["lstms"] = "LSTM" if f["lstm_models"] == 1 else "LSTMs"
    if f["too_rare"]:
        text = ("{corpus}: {feature} untested: too rare in the probed windows ({train_windows} training and "
                "{test_windows} test windows hold it; {min_windows} and {min_test_windows} needed)")  # fmt: skip
    elif not f["lstm_models"]:
        text = "{corpus}: {feature} untested: no LSTM was probed" + (
            "; the best single cell of any model reaches {best_score:.2f} ({best_model})" if "best_score" in v else ""
        )
    elif verdict == "not reproduced":
        text = ("{corpus}: no single cell of {lstm_models} {lstms} alone tracks {feature} ({metric} at least "
                "{found_at}); best {lstm_best_score:.2f} ({lstm_best_model})")  # fmt: skip
    else:
        head = ", the headline {headline_model} " + ("among them" if verdict == "reproduced" else "not among them")
        text = ("{corpus}: a single cell alone tracks {feature} ({metric} at least {found_at}) in {lstm_found} of "
                "{lstm_models} {lstms}" + (head if "headline_model" in v else "")
                + "; best {lstm_best_score:.2f} ({lstm_best_model})")  # fmt: skip
    return Finding(text, v, verdict, f["claim"], f["corpus"])


def _range(lo: str, hi: str, v: dict) -> str:
    return f"{{{lo}}}" if v[lo] == v[hi] else f"{{{lo}}} to {{{hi}}}"


def corpus_findings(c: pd.Series, archs: pd.DataFrame) -> list[Finding]:
    """What the papers did not ask, per corpus: the models probed, which architectures have single cells, what
    the state reads beyond the last characters, the controls, the ablations."""
    v, out = _values(c), []
    out.append(Finding(
        "{corpus}: {models} models probed, the lowest "
        + ("seed" if v.get("seeds", 1) == 1 else "{seeds} seeds") + " of each configuration: depth "
        + _range("min_layers", "max_layers", v) + ", width " + _range("min_size", "max_size", v)
        + ", trained on " + _range("min_chars", "max_chars", v) + (" {chars_unit}" if v.get("chars_unit") else "")
        + " characters", v, corpus=c["corpus"],
    ))  # fmt: skip
    if len(archs):
        gru = "gru-paper" if (archs["arch"] == "gru-paper").any() else "gru"
        levy = set(names(ablation=True))
        others = [a for a in archs["arch"] if a not in (*FAMILIES, "lstm ablations") and a not in levy]
        shown = [a for a in ("lstm", gru, "rnn", "lstm ablations", *others) if (archs["arch"] == a).any()]
        av, parts = {"corpus": c["corpus"]}, []
        for i, arch in enumerate(shown):
            a = archs[archs["arch"] == arch].iloc[0]
            av.update({f"f{i}": int(a["found"]), f"p{i}": int(a["pairs"]), f"l{i}": a["label"]})
            parts.append(f"{{f{i}}} of {{p{i}}} {{l{i}}}")
        out.append(Finding("{corpus}: a single cell passes in " + ", ".join(parts) + " (model, feature) pairs", av,
                           corpus=c["corpus"]))  # fmt: skip
    if "ahead" in v:
        text = ("{corpus}: the state's probe beats a probe on the last {k} characters by over {lead_threshold} for "
                "{ahead} of {probed_features} features in some model")  # fmt: skip
        out.append(Finding(text + ("; not for {behind}" if v.get("behind") else ""), v, corpus=c["corpus"]))
    if "probes" in v:
        char = " (median selectivity {char_median:.2f})" if "char_median" in v else ""
        tri = " ({trigram_median:.2f})" if "trigram_median" in v else ""
        out.append(Finding("{corpus}: Hewitt and Liang's character control is informative for {char_informative} of "
                           "{probes} probes" + char + ", the trigram control for {trigram_informative}" + tri
                           + "; the rest sit at ceiling or floor", v, corpus=c["corpus"]))  # fmt: skip
    if v.get("unconverged_probes"):
        out.append(Finding("{corpus}: {unconverged_probes} of {logistic_probes} logistic probes had an lbfgs fit (of a "
                           "fold, a strength or a control) stop unconverged, at its {max_iter}-iteration cap or a "
                           "failed line search; their scores stand as fitted (column unconverged_fits)", v,
                           corpus=c["corpus"]))  # fmt: skip
    if "cases" in v:
        out.append(Finding("{corpus}: zeroing a best cell raises the loss on its feature's characters beyond all "
                           "{n_random} random cells in {zero_above} of {cases} cases, and lowers it below all in "
                           "{zero_below}", v, corpus=c["corpus"]))  # fmt: skip
    return out


def findings(features: pd.DataFrame, corpora_: pd.DataFrame, archs: pd.DataFrame) -> list[Finding]:
    """Per corpus: the verdict on each of Fig 2's cells (its claims), then what the papers did not ask."""
    out = []
    for _, c in corpora_.iterrows():
        mine = features[features["corpus"] == c["corpus"]] if len(features) else features
        out += [claim_finding(f) for _, f in mine.iterrows() if f["claim"]]
        out += corpus_findings(c, archs[archs["corpus"] == c["corpus"]] if len(archs) else archs)
    return out


# ------------------------------------------------------------------------------------------ the views


def summary_table(features: pd.DataFrame) -> pd.DataFrame | None:
    """Per corpus and feature: Fig 2's cell, the LSTMs and all models with a single cell that passes, the best
    LSTM cell, the state's lead over the last-k probe, and how often zeroing the best cell hurts beyond random."""
    if features.empty:
        return None

    def of(a, b) -> list[str]:
        return [f"{int(x)} of {int(y)}" if pd.notna(x) and pd.notna(y) else "—" for x, y in zip(a, b)]

    f = features.reindex(columns=[*features.columns, *(c for c in ("lstm_best_score", "lstm_best_model", "lead", "k",
                                  "zero_above", "cases") if c not in features)])  # fmt: skip
    k = int(f["k"].dropna().iloc[0]) if f["k"].notna().any() else None
    return pd.DataFrame({
        "corpus": f["corpus"], "feature": f["feature"], "metric": f["metric"],
        "Fig 2": f["paper_cell"].fillna("").replace("", "—"),
        "LSTMs with a cell": of(f["lstm_found"], f["lstm_models"]),
        "best LSTM cell": [f"{s:.2f} ({m})" if pd.notna(s) else "—" for s, m in zip(f["lstm_best_score"],
                                                                                   f["lstm_best_model"])],
        "all models with a cell": of(f["models_found"], f["models"]),
        f"best probe - last {k} chars" if k else "best probe - last k chars": f["lead"].round(3),
        "zeroing hurts beyond random (model layers)": of(f["zero_above"], f["cases"]),
    })  # fmt: skip


def appendix_tables(table: pd.DataFrame, models: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Per corpus, per model (rows) and feature (columns), at the layer whose best single cell scores highest:
    that cell's score alone, the state's probe minus the last-k probe, and the loss change with the cell zeroed."""
    per_model = best_per_model(records(table, "cell"))
    if per_model.empty:
        return {}
    k = last_k(per_model)[-1]
    out = {}
    for corpus, sub in per_model.groupby("corpus", sort=False):
        order = list(models.loc[models["corpus"] == corpus, "model"]) or list(pd.unique(sub["model"]))
        views = (
            ("best_cell_score", "best single cell alone (balanced accuracy or R^2)"),
            (f"selectivity_last{k}", f"probe on the cell state minus a probe on the last {k} characters"),
            ("lm_zero_best", "loss change on the feature's characters, best cell zeroed (nats)"),
        )
        for column, what in views:
            wide = sub.pivot_table(index="model", columns="feature", values=column, sort=False, dropna=False)
            wide = wide.reindex([m for m in order if m in wide.index])
            wide.columns.name = None
            out[f"{corpus}: {what}, per model and feature (its best layer)"] = wide.round(3)
    return out


def viewer_fragment(table: pd.DataFrame, models: pd.DataFrame, arrays: dict[str, np.ndarray]) -> str:
    """The activation viewers (one per corpus) as one self-contained HTML fragment, the headline model's cells
    first; every character of corpus text is escaped inside."""
    viewer, excerpts = records(table, "viewer"), records(table, "excerpt")
    if viewer.empty or "viewer_values" not in arrays:
        return ""

    def run(name: str, row: pd.Series) -> np.ndarray:
        start = int(row["array_start"])
        return arrays[name][start : start + int(row["array_length"])]

    heads = set(models.loc[models["headline"] == 1, "model_id"]) if len(models) else set()
    parts = []
    for corpus, sub in viewer.groupby("corpus", sort=True):
        texts = {}
        for _, e in excerpts[excerpts["corpus"] == corpus].iterrows():
            texts[e["feature"]] = {"text": run("excerpt_text", e).tobytes(), "feature": e["feature"],
                                   "labels": run("excerpt_labels", e),
                                   "underline": e["feature_kind"] == "binary"}  # fmt: skip
        sub = pd.concat([sub[sub["model_id"].isin(heads)], sub[~sub["model_id"].isin(heads)]])
        series = []
        for _, v in sub.iterrows():
            metric = "bal. acc." if v["feature_kind"] == "binary" else "R^2"
            series.append({
                "model": v["model"], "layer": int(v["layer"]) + 1, "cell": int(v["cell"]), "text": v["feature"],
                "values": run("viewer_values", v) / 127.0, "quantity": v["quantity"],
                "label": f"cell {int(v['cell'])}: {v['feature']} #{int(v['rank'])} "
                         f"({metric} {v['best_cell_score']:.2f})",
                "title": f"{v['model']}, layer {int(v['layer']) + 1}, cell {int(v['cell'])}, {v['quantity']}: "
                         f"{v['feature']} (alone: {metric} {v['best_cell_score']:.2f})",
            })  # fmt: skip
        parts.append(viewer_html(texts, series, heading=f"{corpus}: the best cells of each feature, per model"))
    return "".join(parts)


# ------------------------------------------------------------------------------------------ the analysis


class Cells(Analysis):
    name = "cells"
    title = TITLE
    question = QUESTION
    source = PAPER_SOURCE
    settings = SETTINGS
    needs = NEEDS
    claims = (
        Claim("cells-line-length", "Karpathy et al. (2016) sec 4.2, Fig 2", "one cell acts as a line length counter",
              "found by inspection in the best War and Peace LSTM; no numbers"),
        Claim("cells-quotes", "Karpathy et al. (2016) sec 4.2, Fig 2", "cells turn on inside quotes",
              "found by inspection; no numbers"),
        Claim("cells-comments", "Karpathy et al. (2016) sec 4.2, Fig 2", "cells turn on inside comments",
              "found by inspection in the best Linux LSTM; no numbers"),
        Claim("cells-strings", "Karpathy et al. (2016) sec 4.2, Fig 2", "cells turn on inside strings",
              "found by inspection; no numbers"),
        Claim("cells-if", "Karpathy et al. (2016) sec 4.2, Fig 2",
              "cells activate inside the parentheses after if statements", "found by inspection; no numbers"),
        Claim("cells-indent", "Karpathy et al. (2016) sec 4.2, Fig 2",
              "cells grow in strength with the indentation of a block of code", "found by inspection; no numbers"),
        Claim("cells-depth", "Karpathy et al. (2016) Fig 2", "a cell is sensitive to the depth of an expression",
              "found by inspection; no numbers"),
    )  # fmt: skip
    shows = (
        "Per corpus, how well the best single cell of each architecture alone tracks each feature, what the state's "
        "probe reads beyond the last characters, and Fig 2's view: the headline model's best cells on test text."
    )
    deviations = (
        "The paper found its cells by looking at its best LSTMs; we rank every cell of every architecture by how well "
        "it alone predicts a label computed from the text, on held-out windows, and call a cell found above a set "
        "threshold (settings found_binary and found_count).",
        "The headline model (the largest budget row, the deepest, the lowest seed) stands for the paper's best LSTM; "
        "seeds are not averaged: one model per configuration, its lowest seed, is probed.",
        "Binary features are scored by balanced accuracy with class-weighted logistic probes, not Hewitt and Liang's "
        "plain accuracy, so that rare features do not hide behind the majority class.",
        "A control task is kept only where it is informative: the character control sits at its ceiling for most "
        "binary features (a state that encodes the byte just read lets a probe memorise any label per byte), the "
        "trigram control at its floor for most counts.",
        "Probes read windows of the test split, each after a warm-up from a zero state, so labels are counted from "
        "where the model began reading, not from the split's start.",
    )

    def parts(self, ctx: Context) -> list[str]:
        return cells_runs.model_ids(ctx)

    def compute_part(self, ctx: Context, part: str) -> None:
        cells_runs.probe_one(ctx, part)

    def part_cached(self, ctx: Context, part: str) -> bool:
        return cells_runs.probed_before(ctx, part)

    def compute(self, ctx: Context) -> Result:
        """Every selected model of every corpus (lowest seed per configuration) probed on the same windows."""
        frames, arrays = cells_runs.probe_all(ctx)
        table = tidy(frames)
        probed = set(records(table, "probe")["model_id"]) if len(table) else set()
        models = model_table(ctx, probed)
        features = feature_table(frames, models, ctx.settings)
        corpora_ = corpus_table(frames, models, features, ctx.settings)
        archs = architecture_table(frames)
        tables = {"features": features, "corpora": corpora_, "architectures": archs, "models": models}
        return Result(table, findings(features, corpora_, archs), tables=tables, arrays=arrays)

    def plot(self, result: Result):
        return cells_plot.plot(result.table, result.tables.get("models", pd.DataFrame()), result.arrays)

    def summary_table(self, result: Result) -> pd.DataFrame | None:
        return summary_table(result.tables.get("features", pd.DataFrame()))

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        return appendix_tables(result.table, result.tables.get("models", pd.DataFrame()))

    def html(self, result: Result) -> str:
        return viewer_fragment(result.table, result.tables.get("models", pd.DataFrame()), result.arrays)


ANALYSIS = Cells()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
