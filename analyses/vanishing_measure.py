"""How analyses/vanishing.py measures: the gradient of one character's loss with respect to every state k steps
back (a lag profile), per checkpoint, cached, and Maini et al.'s vanishing ratio read from it.

The definition is in analyses/vanishing.py's docstring. This is its own module, imported by analyses/vanishing.py
and analyses/ladder.py (whose rungs state their vanishing ratio), so that editing the vanishing section's tables or
findings does not change the ladder's cache key (analyses/common.py's source_digest follows imports).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from charlm.gradients import ratio_first_over_middle, ratio_middle_over_ends
from charlm.gradients_batched import charlm_gradient_norms
from charlm.model import LAYERS, CharLM
from corpora.errors import UserError

from .context import Context, MissingInput

MEASUREMENT = {
    "split": "test",  # split the windows are cut from
    "windows": 32,  # windows averaged per checkpoint, evenly spaced over the split
    "max_lag": 200,  # K: the last position's loss is differentiated w.r.t. the states 0..K steps back
    "warmup": 200,  # characters before each window that set its starting state (then detached)
}
CACHE_FORMAT = 2  # bump when what a cached profile holds changes
LOSS_SCALE = 2.0**80  # float32 gradients down to ~1e-60 stay above underflow; 1e14-fold growth stays finite


def windows(ids: np.ndarray, count: int, max_lag: int, warmup: int, split: str = "test"):
    """`count` windows of max_lag + 1 characters evenly spaced over `ids`, each with the `warmup` characters before
    it (fewer when the split is short) and the character after it: (warm (B, W), window (B, K + 1), target (B,))."""
    n = ids.size
    if max_lag < 1 or count < 1:
        raise UserError(f"max_lag and windows must be positive, got max_lag={max_lag}, windows={count}")
    if max_lag + 2 > n:
        raise MissingInput(
            f"a lag of {max_lag} needs windows of {max_lag + 2} characters, but the {split} split has only {n}"
        )
    warm = min(warmup, n - max_lag - 2)
    starts = np.unique(np.linspace(warm, n - max_lag - 2, count).round().astype(np.int64))
    stack = lambda lo, hi: np.stack([ids[s + lo : s + hi] for s in starts]).astype(np.int64)  # noqa: E731
    return stack(-warm, 0), stack(0, max_lag + 1), ids[starts + max_lag + 1].astype(np.int64)


def lag_profiles(
    models: list[CharLM], warm: np.ndarray, window: np.ndarray, target: np.ndarray
) -> list[dict[str, np.ndarray]]:
    """Per model (checkpoints of one configuration, computed together: charlm.gradients_batched), per state
    (`layers.{l}.{h|c}`), the mean over windows of || dL_T / d state_{T-k} ||, k = 0..K (index = lag)."""
    norms = charlm_gradient_norms(
        models, torch.from_numpy(warm), torch.from_numpy(window), torch.from_numpy(target), LOSS_SCALE
    )
    return [{name: g[::-1].mean(1) for name, g in n.items()} for n in norms]  # time order -> lag order


def lag_profile(model: CharLM, warm: np.ndarray, window: np.ndarray, target: np.ndarray) -> dict[str, np.ndarray]:
    """`lag_profiles` of one model."""
    return lag_profiles([model], warm, window, target)[0]


def initial_model(ctx: Context, row: pd.Series) -> CharLM:
    """The model as training started: the seed, then CharLM(config), exactly as LanguageModelTask builds it."""
    config = ctx.model(row).config
    with torch.random.fork_rng():
        torch.manual_seed(int(row["seed"]))
        model = CharLM(config)
    return model.eval()


def _profile_key(ctx: Context, row: pd.Series, snapshot: str | None, settings: dict) -> dict:
    if snapshot in (None, "init"):
        which = snapshot or "final"
    else:
        snaps = ctx.snapshots(row)
        match = snaps[snaps["file"] == snapshot]
        if match.empty:
            raise UserError(
                f"{row['model_id']} has no snapshot {snapshot!r} (its snapshots: {', '.join(snaps['file'])})"
            )
        which = f"{snapshot}:{match['sha256'].iloc[0]}"
    split, count, max_lag, warmup = (settings[k] for k in ("split", "windows", "max_lag", "warmup"))
    return {
        "model": ctx.digest(row), "checkpoint": which, "split": split, "windows": count, "max_lag": max_lag,
        "warmup": warmup, "format": CACHE_FORMAT,
    }  # fmt: skip


class _NotCached(Exception):
    pass


def _not_cached():
    raise _NotCached


def checkpoint_profiles(
    ctx: Context, row: pd.Series, snapshots: list[str | None], settings: dict
) -> list[dict[str, np.ndarray]]:
    """`lag_profile` of checkpoints of a model, each None (the final model), "init", or a file of ctx.snapshots(row).
    Cached under artifacts/_cache/vanishing, each keyed by the model, the checkpoint's digest and the settings;
    those not cached are computed together (`lag_profiles`: the same numbers as one at a time)."""
    keys = [_profile_key(ctx, row, snapshot, settings) for snapshot in snapshots]
    out, missing = {}, []
    for i, key in enumerate(keys):
        try:
            out[i] = ctx.cached("vanishing", key, _not_cached)
        except _NotCached:
            missing.append(i)
    if missing:
        ids = ctx.corpus(row).split(settings["split"])
        warm, window, target = windows(ids, *(settings[k] for k in ("windows", "max_lag", "warmup", "split")))
        models = [initial_model(ctx, row) if snapshots[i] == "init" else ctx.model(row, snapshots[i]) for i in missing]
        for i, profile in zip(missing, lag_profiles(models, warm, window, target)):
            out[i] = ctx.cached("vanishing", keys[i], lambda profile=profile: profile)
    return [out[i] for i in range(len(keys))]


def checkpoint_profile(ctx: Context, row: pd.Series, snapshot: str | None, settings: dict) -> dict[str, np.ndarray]:
    """`checkpoint_profiles` of one checkpoint."""
    return checkpoint_profiles(ctx, row, [snapshot], settings)[0]


def has_cell(arch: str) -> bool:
    """Whether the architecture's layers carry a memory cell c besides h (the LSTM family but - GATES, the
    prototype and pseudo-LSTM): read from the layer class, so no checkpoint is loaded to ask."""
    layer_class, _ = LAYERS[arch]
    return "c" in layer_class.state_names


def profile_ratios(profile: dict[str, np.ndarray], layer: int, state: str) -> tuple[float, float]:
    """(vanishing ratio, far end over middle) of one state of a lag profile (lag order, index = lag).

    The vanishing ratio (Maini et al. as the notes define it): mean g over the middle 10 % of the lags over g at
    the end where the loss is, lag 0 of h (for c too: dL_T/dc_T = 0, the loss reads h_T). The other: g_K over
    the same middle, the far end the loss does not touch."""
    g = profile[f"layers.{layer}.{state}"][::-1]  # time order: the far end first, lag 0 last
    end = profile[f"layers.{layer}.h"][0]  # where the loss attaches: the h the head reads
    return ratio_middle_over_ends(np.r_[g[:-1], end]), ratio_first_over_middle(g)


def vanishing_ratio(
    ctx: Context, row: pd.Series, snapshot: str | None = None, state: str | None = None, settings: dict | None = None
) -> float:
    """Maini et al.'s vanishing ratio of one checkpoint (None: final; "init"; or a snapshot file): the mean g of
    the middle 10 % of lags over g at lag 0 (where the loss is), g_k = || dL_T / d state_{T-k} || of the top layer,
    averaged over windows (`profile_ratios`).

    `state`: "h" or "c" (default: the memory state, c where the model has a cell, else h). `settings`: the keys of
    MEASUREMENT to override (split, windows, max_lag, warmup); cached like analyses/vanishing.py's profiles.
    """
    settings = {**MEASUREMENT, **(settings or {})}
    profile = checkpoint_profile(ctx, row, snapshot, settings)
    top = int(row["layers"]) - 1
    state = state or ("c" if f"layers.{top}.c" in profile else "h")
    if f"layers.{top}.{state}" not in profile:
        raise MissingInput(f"{row['model_id']} ({row['arch']}) has no state {state!r}: it keeps only h")
    return profile_ratios(profile, top, state)[0]


def geometric_mean(values) -> float:
    """Of ratios that span decades (a ratio of 0, a gradient that is gone, gives 0; none: NaN)."""
    values = np.asarray(values, dtype=float)
    with np.errstate(divide="ignore"):
        return float(np.exp(np.log(values).mean())) if values.size else float("nan")
