"""Which models the `cells` analysis probes, on which windows, one model at a time and cached (analyses/cells.py;
the probing itself is analyses/cells_probing.py).

`probe_corpus` gives one corpus's setup (its probed models, features and windows); `model_records` probes one model
of it, in `ctx.cached("cells", ...)`, keyed by the model, the settings, the features and this module's source (and
what it imports: cells_probing's too): `compute` and `compute_part` (one part per model) read and write the same
entry, and `probed_before` tells the estimate whether it is there. A model's records are stored as plain arrays
(`pack`, `unpack`).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

from corpora.errors import UserError
from probes.features import Feature, features_for, style_of

from . import cells_probing as probing
from .cells_probing import ARCH_ORDER, Windows, check_features_apply, check_settings, last_chars_baselines
from .common import short_label, source_digest
from .context import Context, MissingInput

KINDS = ("probe", "cell", "viewer")  # the records of one model: a table each
WHOLE = ("layer", "best_cell", "weight_cell", "best_cell_weight_rank", "cell", "rank", "n_focus", "n_random",
         "train_windows", "test_windows", "window_start", "array_start", "array_length")  # fmt: skip


# ------------------------------------------------------------------------------------------ a model's records as arrays


def _to_arrays(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """A frame as plain arrays for ctx.cached: numbers stay numbers, text becomes fixed-width str ("" = missing)."""
    return {c: df[c].to_numpy() if df[c].dtype.kind in "biuf" else df[c].fillna("").astype(str).to_numpy(dtype=str)
            for c in df}  # fmt: skip


def _from_arrays(arrays: dict[str, np.ndarray]) -> pd.DataFrame:
    df = pd.DataFrame(arrays)
    text = [c for c in df if df[c].dtype.kind not in "biuf"]
    df[text] = df[text].replace("", np.nan)
    return df


def whole_numbers(df: pd.DataFrame) -> pd.DataFrame:
    """The columns that count (layers, cells, ranks, windows) as nullable integers."""
    for column in WHOLE:
        if column in df:
            df[column] = df[column].astype("Int64")
    return df


def pack(frames: dict[str, pd.DataFrame], values: np.ndarray) -> dict[str, np.ndarray]:
    """One model's tables and viewer values as the arrays ctx.cached stores ("<kind>:<column>")."""
    out = {"viewer_values": np.asarray(values, dtype=np.int8)}
    for kind in KINDS:
        out.update({f"{kind}:{c}": a for c, a in _to_arrays(frames[kind]).items()})
    return out


def unpack(arrays: dict[str, np.ndarray]) -> tuple[dict[str, pd.DataFrame], np.ndarray]:
    """What `pack` stored: {kind: table} and the viewer values."""
    frames = {}
    for kind in KINDS:
        columns = {k.split(":", 1)[1]: v for k, v in arrays.items() if k.startswith(kind + ":")}
        frames[kind] = _from_arrays(columns) if columns else pd.DataFrame()
    return frames, np.asarray(arrays["viewer_values"], dtype=np.int8)


def _model_label(row: pd.Series, with_seed: bool = False) -> str:
    return short_label(row) + (f" s{int(row['seed'])}" if with_seed else "")


def probed_models(ctx: Context, key: str, seeds: int) -> pd.DataFrame:
    """The lowest `seeds` seeds of every configuration (group) on a corpus, in architecture order."""
    models = ctx.models(corpus=key, required=False)
    if models.empty:
        return models
    models = models.sort_values("seed").groupby("group_id", sort=False).head(seeds)
    order = {a: k for k, a in enumerate(ARCH_ORDER)}
    return models.sort_values(by=["arch", "size", "seed"], key=lambda c: c.map(order) if c.name == "arch" else c)


# ------------------------------------------------------------------------------------------ one corpus, one model


@dataclass
class CorpusSetup:
    """One corpus as every model on it is probed: its probed models, features, windows and last-k baselines."""

    key: str
    name: str
    models: pd.DataFrame
    text: bytes
    features: list[Feature]
    windows: Windows
    baselines: dict[str, float]
    source: str


def corpus_styles(ctx: Context, s: dict) -> dict[str, tuple[pd.DataFrame, bytes, str]]:
    """{corpus key: (its probed models, its split's text, its text style)} for every corpus with models."""
    out = {}
    for key in ctx.corpus_keys():
        models = probed_models(ctx, key, int(s["seeds"]))
        if not models.empty:
            text = ctx.text(models.iloc[0], s["split"])
            out[key] = (models, text, style_of(str(models["corpus"].iloc[0]), text))
    return out


_WINDOWS: dict[str, Windows] = {}  # per process: a report worker probes many models of each corpus in turn


def corpus_windows(ctx: Context, model: pd.Series, text: bytes, features: list[Feature]) -> Windows:
    """The Windows of a corpus's split, made once per process for the same corpus, text, features and settings (a
    report worker runs one part per model; each part of a corpus reads the same windows and labels)."""
    s = ctx.settings
    key = json.dumps([str(model["corpus_key"]), s, [f.name for f in features]], sort_keys=True, default=str)
    if key not in _WINDOWS or _WINDOWS[key].text != text:
        if len(_WINDOWS) >= 4:  # a few MB each; a report has a corpus or two
            _WINDOWS.clear()
        _WINDOWS[key] = Windows(text, ctx.corpus(model).split(s["split"]), features, s)
    return _WINDOWS[key]


def chosen_features(style: str, s: dict) -> list[Feature]:
    """The features probed on a text of this style: the settings' choice among those that apply (all by default)."""
    wanted = list(s["features"] or [])
    return [f for f in features_for(style) if not wanted or f.name in wanted]


def records_key(ctx: Context, row: pd.Series, features: list[Feature]) -> dict:
    """What one model's records are cached by: the model, the settings, the features and this module's source (and
    what it imports)."""
    s = ctx.settings
    return {"model": ctx.digest(row), "settings": s, "features": [f.name for f in features],
            "source": source_digest(sys.modules[__name__]), "split": s["split"]}  # fmt: skip


def probe_corpus(ctx: Context, key: str, models: pd.DataFrame, text: bytes, style: str) -> CorpusSetup | None:
    """The windows and baselines of one corpus (None when none of the chosen features applies to its text)."""
    s = ctx.settings
    features = chosen_features(style, s)
    if not features:
        return None
    try:
        windows = corpus_windows(ctx, models.iloc[0], text, features)
    except ValueError as err:
        raise MissingInput(f"{models['corpus'].iloc[0]} {s['split']} split: {err}") from None  # too short
    source = source_digest(sys.modules[__name__])  # this module and what it imports: what makes the numbers
    corpus_key = {"corpus": models.iloc[0]["corpus_key"], "settings": s, "features": [f.name for f in features],
                  "source": source, "split": s["split"]}  # fmt: skip
    probeable = [f for f in features if not windows.too_rare(f)]
    baselines = {k: float(v) for k, v in ctx.cached("cells-baselines", corpus_key, lambda: last_chars_baselines(
        windows, probeable, s)).items()}  # fmt: skip
    return CorpusSetup(key, str(models["corpus"].iloc[0]), models, text, features, windows, baselines, source)


def model_records(ctx: Context, setup: CorpusSetup, row: pd.Series) -> dict[str, np.ndarray]:
    """One model's records (`pack`ed), from the cache or probed now and cached."""
    s = ctx.settings
    base = {"corpus": row["corpus"], "arch": row["arch"], "model": _model_label(row, int(s["seeds"]) > 1),
            "model_id": row["model_id"], "seed": int(row["seed"]), "layers": int(row["layers"]),
            "size": int(row["size"])}  # fmt: skip

    def probe() -> dict[str, np.ndarray]:
        return pack(*probing.probe_model(ctx.model(row), setup.windows, setup.features, s, base, setup.baselines))

    return ctx.cached("cells", records_key(ctx, row, setup.features), probe)


def excerpts(setup: CorpusSetup) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The viewer's excerpt of each feature of the corpus (one test window's text, from a whole line): a row each,
    with the cell Fig 2 shows for the feature (`paper_cell`, empty for none); and their text (uint8) and labels
    (int16) end to end, `array_length` per row."""
    w_ = setup.windows
    rows, texts, labels = [], [], []
    for f in setup.features:
        w, offset = w_.excerpt(f)
        start = int(w_.starts[w]) + offset
        text = setup.text[start : int(w_.starts[w]) + w_.length]
        rows.append({"corpus": setup.name, "feature": f.name, "feature_kind": f.kind, "window_start": start,
                     "paper_cell": f.paper_cell or np.nan, "array_length": len(text)})  # fmt: skip
        texts.append(np.frombuffer(text, dtype=np.uint8))
        y = w_.labels[f.name].reshape(len(w_.starts), -1)[w, offset:]
        labels.append(np.clip(y, -32768, 32767).astype(np.int16))
    return pd.DataFrame(rows), np.concatenate(texts), np.concatenate(labels)


def _ends(table: pd.DataFrame) -> pd.DataFrame:
    """array_start: where each row's run of values begins in its array (the rows' runs end to end)."""
    if "array_length" not in table:
        return table
    lengths = table["array_length"].to_numpy(dtype=np.int64)
    return table.assign(array_start=np.cumsum(lengths) - lengths)


def probe_all(ctx: Context) -> tuple[dict[str, pd.DataFrame], dict[str, np.ndarray]]:
    """Every selected model of every corpus (lowest seeds per configuration) probed on the same windows (from the
    cache where `compute_part` or an earlier run left it): {"probe", "cell", "viewer", "excerpt": table} and the
    arrays the viewer reads (viewer_values, excerpt_text, excerpt_labels)."""
    s = ctx.settings
    check_settings(s)
    corpora_ = corpus_styles(ctx, s)
    if not corpora_:
        raise MissingInput("no trained recurrent models: train them with `python -m reports --profile quick`")
    check_features_apply({k: v[2] for k, v in corpora_.items()}, list(s["features"] or []))
    frames = {kind: [] for kind in (*KINDS, "excerpt")}
    arrays = {"viewer_values": [], "excerpt_text": [], "excerpt_labels": []}
    for key, (models, text, style) in corpora_.items():
        setup = probe_corpus(ctx, key, models, text, style)
        if setup is None:
            continue
        table, chars, labels = excerpts(setup)
        frames["excerpt"].append(table)
        arrays["excerpt_text"].append(chars)
        arrays["excerpt_labels"].append(labels)
        for _, row in models.iterrows():
            tables, values = unpack(model_records(ctx, setup, row))
            for kind in KINDS:
                frames[kind].append(tables[kind])
            arrays["viewer_values"].append(values)
    out = {kind: whole_numbers(_ends(pd.concat([p for p in parts if len(p)], ignore_index=True)))
           if any(len(p) for p in parts) else pd.DataFrame() for kind, parts in frames.items()}  # fmt: skip
    dtypes = {"viewer_values": np.int8, "excerpt_text": np.uint8, "excerpt_labels": np.int16}
    return out, {k: np.concatenate(v).astype(dtypes[k]) if v else np.zeros(0, dtypes[k]) for k, v in arrays.items()}


def model_ids(ctx: Context) -> list[str]:
    """The models `probe_all` probes, every corpus's (the analysis's parts)."""
    seeds = int(ctx.settings["seeds"])
    return [m for key in ctx.corpus_keys() for m in probed_models(ctx, key, seeds)["model_id"]]


def probed_before(ctx: Context, model_id: str) -> bool:
    """Whether `probe_one(ctx, model_id)` would read the model's records from the cache (the estimate's question):
    the same key as `model_records`, without making the corpus's windows."""
    s = ctx.settings
    for key in ctx.corpus_keys():
        models = probed_models(ctx, key, int(s["seeds"]))
        if model_id in set(models["model_id"]):
            text = ctx.text(models.iloc[0], s["split"])
            features = chosen_features(style_of(str(models["corpus"].iloc[0]), text), s)
            row = models[models["model_id"] == model_id].iloc[0]
            return bool(features) and ctx.is_cached("cells", records_key(ctx, row, features))
    return False


def probe_one(ctx: Context, model_id: str) -> None:
    """Probe one model into the cache entry `probe_all` reads (nothing when no chosen feature applies to its text)."""
    s = ctx.settings
    check_settings(s)
    for key in ctx.corpus_keys():
        models = probed_models(ctx, key, int(s["seeds"]))
        if model_id in set(models["model_id"]):
            text = ctx.text(models.iloc[0], s["split"])
            setup = probe_corpus(ctx, key, models, text, style_of(str(models["corpus"].iloc[0]), text))
            if setup is not None:
                model_records(ctx, setup, models[models["model_id"] == model_id].iloc[0])
            return
    raise UserError(f"cells: no probed model {model_id}")
