"""Vanishing gradients in every architecture: how far back the loss of one character still reaches.

The lecture notes (seed 004, "Simple RNN ... hard to train. Why? Vanishing gradients"; "the gated
architecture also helps the vanishing gradients problems") and Maini et al. (2020), "Why and when should you
pool?" (the notes' "Vanishing Gradients @ Start of Training" and Table 2), measure the norm of the gradient of
the loss with respect to the hidden state at every position and summarise it by a vanishing ratio.

Adapted to a left-to-right language model (/work/shared/ANCHORS.md):
- a window of K + 1 = `max_lag` + 1 characters x_{T-K} .. x_T; its state comes from the `warmup` characters
  before it and is detached at the window's start, so nothing flows back past the window;
- L_T = -log p(x_{T+1} | x_{..T}), the loss at the last position only;
- g_k = || dL_T / dh_{T-k} ||_2 for every lag k = 0..K (and || dL_T / dc_{T-k} || where there is a memory cell),
  the gradient of the state carried out of step T-k as everything later reads it (charlm.gradients; c's use
  in h_t inside step t is not counted, so dL_T/dc_T = 0: the loss reads h_T), per layer, averaged over
  `windows` windows evenly spaced over the split;
- at initialisation (rebuilt exactly: `torch.manual_seed(seed)` then `CharLM(config)`, as
  charlm.train.LanguageModelTask does), at the training snapshots and at the final (best-on-validation) model.

The vanishing ratio is Maini et al.'s, as the notes define it: the gradient norm at the middle of the
sequence over the gradient norm at its end, where the loss is,

    vanishing ratio = ||dL/dh_mid|| / ||dL/dh_end|| = mean(g over the middle 10 % of lags) / g_0

(`ratio_mid_end`; the middle 10 % of 100 relative-position bins, lags about 0.45 K to 0.55 K, interpolated as
their code does). Below 1 the gradient has shrunk between the loss and mid-window. For c the end is the h the
loss reads (dL_T/dc_T is 0 by construction): the ratio says how much of the gradient entering at the loss
reaches the mid-window cell. Maini et al. report it when a classifier first reaches 95 % training accuracy
(Table 2); a language model has no such moment, so here it is measured at initialisation, along training
(snapshots) and at the best-on-validation checkpoint, and every caption says which.

The table also keeps the far end over the middle, g_K / mean(g over the middle 10 %) (`ratio_far_mid`): the
"first bin over the middle bins" of Maini et al.'s code (/work/shared/ANCHORS.md). In a BiLSTM that first bin is
an end the loss touches; in a left-to-right language model it is the far end, which the loss does not touch,
so it says how much further the gradient falls past mid-window, not how much of it reaches there. The two agree
only for one geometric decay g_k ~ r^k (both r^(K/2)); a fast decay followed by a few long-memory cells gives a
small ratio_mid_end and a ratio_far_mid near 1, which is why the captions name each by what it is.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch

from charlm.gradients import (
    charlm_loss,
    charlm_state,
    charlm_step,
    ratio_first_over_middle,
    ratio_middle_over_ends,
    state_gradient_norms,
)
from charlm.model import ARCH_LABELS, ARCHS, LAYERS, CharLM
from corpora.errors import UserError, run_cli

from .common import analysis_main, style
from .context import Context, MissingInput, Needs
from .maini import table2_range, table2_ratios

TITLE = "Vanishing gradients: how far back one character's loss reaches"
QUESTION = (
    "Does the additive memory cell keep the gradient over hundreds of characters where the S-RNN loses it, "
    "and what is left of it in Levy et al.'s ablations?"
)
PAPER_SOURCE = (
    "Maini et al. (2020), 'Why and when should you pool?', Table 2 as quoted in the lecture notes (seed 004): "
    "vanishing ratio of classifiers when they reach 95 % training accuracy, at 1K / 5K / 20K training examples"
)
SETTINGS = {
    "split": "test",  # split the windows are cut from
    "windows": 32,  # windows averaged per checkpoint, evenly spaced over the split
    "max_lag": 200,  # K: the last position's loss is differentiated w.r.t. the states 0..K steps back
    "warmup": 200,  # characters before each window that set its starting state (then detached)
    "snapshots": 8,  # training snapshots profiled per model (spread over the saved ones, last included)
    "snapshot_seeds": 1,  # seeds per configuration profiled along training (the others: init and final)
    "arch": [],  # architectures to profile (empty: every one there is)
    "states": ["h", "c"],  # h, and the memory cell c of the architectures that have one
}
NEEDS = Needs(predictions=False)  # reads checkpoints (traces, gradients, samples), not Predictions
CACHE_FORMAT = 2  # bump when what a cached profile holds changes
LOSS_SCALE = 2.0**80  # float32 gradients down to ~1e-60 stay above underflow; 1e14-fold growth stays finite
LABELS = ARCH_LABELS
COLUMNS = [
    "corpus", "arch", "label", "budget", "size", "layers", "seed", "model_id", "group_id", "checkpoint", "chars",
    "layer", "state", "memory", "lag", "grad_norm", "ratio_mid_end", "ratio_far_mid",
]  # fmt: skip
FACTOR = 10  # a caption says one ratio is larger or smaller than another only when they differ by this factor


# ------------------------------------------------------------------------------------------ the measurement


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


def lag_profile(model: CharLM, warm: np.ndarray, window: np.ndarray, target: np.ndarray) -> dict[str, np.ndarray]:
    """Per state (`layers.{l}.{h|c}`), the mean over windows of || dL_T / d state_{T-k} ||, k = 0..K (index = lag)."""
    state = charlm_state(model, torch.from_numpy(warm), window.shape[0])
    norms = state_gradient_norms(
        charlm_step(model), state, torch.from_numpy(window).unbind(1), charlm_loss(model, torch.from_numpy(target)),
        loss_scale=LOSS_SCALE,
    )  # fmt: skip
    return {name: g[::-1].mean(1) for name, g in norms.items()}  # time order -> lag order


def initial_model(ctx: Context, row: pd.Series) -> CharLM:
    """The model as training started: the seed, then CharLM(config), exactly as LanguageModelTask builds it."""
    config = ctx.model(row).config
    with torch.random.fork_rng():
        torch.manual_seed(int(row["seed"]))
        model = CharLM(config)
    return model.eval()


def checkpoint_profile(ctx: Context, row: pd.Series, snapshot: str | None, settings: dict) -> dict[str, np.ndarray]:
    """`lag_profile` of one checkpoint of a model: None (the final model), "init", or a file of ctx.snapshots(row).
    Cached under artifacts/_cache/vanishing, keyed by the model, the checkpoint's digest and the settings."""
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
    key = {
        "model": ctx.digest(row), "checkpoint": which, "split": split, "windows": count, "max_lag": max_lag,
        "warmup": warmup, "format": CACHE_FORMAT,
    }  # fmt: skip

    def compute_profile():
        ids = ctx.corpus(row).split(split)
        warm, window, target = windows(ids, count, max_lag, warmup, split)
        model = initial_model(ctx, row) if snapshot == "init" else ctx.model(row, snapshot)
        return lag_profile(model, warm, window, target)

    return ctx.cached("vanishing", key, compute_profile)


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

    `state`: "h" or "c" (default: the memory state, c where the model has a cell, else h). `settings`: this
    module's SETTINGS keys to override (split, windows, max_lag, warmup); cached like compute's profiles.
    """
    settings = {**SETTINGS, **(settings or {})}
    profile = checkpoint_profile(ctx, row, snapshot, settings)
    top = int(row["layers"]) - 1
    state = state or ("c" if f"layers.{top}.c" in profile else "h")
    if f"layers.{top}.{state}" not in profile:
        raise MissingInput(f"{row['model_id']} ({row['arch']}) has no state {state!r}: it keeps only h")
    return profile_ratios(profile, top, state)[0]


# ------------------------------------------------------------------------------------------ the analysis


def recorded_lags(max_lag: int) -> np.ndarray:
    """The lags the table keeps: every one up to 20, then every 5th (plus K); the ratios use all of them."""
    return np.unique(np.r_[np.arange(min(max_lag, 20) + 1), np.arange(20, max_lag + 1, 5), max_lag])


def _checkpoints(ctx: Context, row: pd.Series, n_snapshots: int) -> list[tuple[str, int, str | None]]:
    """(label, training characters, snapshot argument) of init, `n_snapshots` snapshots and the final model."""
    out = [("init", 0, "init")]
    if n_snapshots > 0:
        try:
            snaps = ctx.snapshots(row).sort_values("step").reset_index(drop=True)
        except MissingInput:
            snaps = pd.DataFrame(columns=["step", "chars", "file"])
        if len(snaps):
            picked = np.unique(np.linspace(0, len(snaps) - 1, min(n_snapshots, len(snaps))).round().astype(int))
            out += [(f"step {int(snaps['step'][i])}", int(snaps["chars"][i]), snaps["file"][i]) for i in picked]
    final_chars = ctx.model(row).meta.get("chars_trained", row["chars_trained"])
    out.append(("final", int(final_chars), None))
    return out


def _check_settings(settings: dict) -> tuple[list[str], list[str]]:
    states = list(settings["states"]) if not isinstance(settings["states"], str) else [settings["states"]]
    archs = list(settings["arch"]) if not isinstance(settings["arch"], str) else [settings["arch"]]
    bad = [s for s in states if s not in ("h", "c")] or not states
    if bad:
        raise UserError(f"states must be a non-empty list of 'h' and 'c', got {settings['states']!r}")
    unknown = [a for a in archs if a not in ARCHS]
    if unknown:
        raise UserError(f"unknown architecture {', '.join(unknown)}: choose from {', '.join(ARCHS)}")
    return states, archs


def compute(ctx: Context) -> pd.DataFrame:
    """One row per (model, checkpoint, layer, state, lag): the mean gradient norm, with the profile's two ratios."""
    settings = ctx.settings
    states, archs = _check_settings(settings)
    models = ctx.models(arch=tuple(archs) or None)
    cells = {r["model_id"]: has_cell(r["arch"]) for _, r in models.iterrows()}
    if states == ["c"] and not any(cells.values()):
        raise MissingInput(
            f"no memory cell c to differentiate: the models here ({', '.join(sorted(set(models['arch'])))}) keep "
            "only h; ask for states h, or train an LSTM-family model (`python -m charlm.train --arch lstm ...`)"
        )
    for key in models["corpus_key"].unique():  # a lag longer than the split fails before any work
        ids = ctx.corpus(key).split(settings["split"])
        windows(ids, settings["windows"], settings["max_lag"], settings["warmup"], settings["split"])
    lags = recorded_lags(settings["max_lag"])
    budgets = models.groupby("arch")["budget"].nunique()  # the budget row goes into the label where there are several
    rows = []
    for (_, group_id), group in models.groupby(["corpus_key", "group_id"], sort=True):
        for rank, (_, row) in enumerate(group.sort_values("seed").iterrows()):
            n_snaps = settings["snapshots"] if rank < settings["snapshot_seeds"] else 0
            label = LABELS.get(row["arch"], row["arch"])
            label += f" ({int(row['budget'])} row)" if budgets[row["arch"]] > 1 else ""
            memory = "c" if cells[row["model_id"]] and "c" in states else "h"  # the state the headline follows
            for checkpoint, chars, snapshot in _checkpoints(ctx, row, n_snaps):
                profile = checkpoint_profile(ctx, row, snapshot, settings)
                for name, g in profile.items():
                    _, layer, state = name.split(".")
                    if state not in states:
                        continue
                    mid_end, far_mid = profile_ratios(profile, int(layer), state)
                    keep = lags[lags > 0] if state == "c" else lags  # dL_T/dc_T = 0 by construction
                    rows += [{
                        "corpus": row["corpus"], "arch": row["arch"], "label": label, "budget": row["budget"],
                        "size": int(row["size"]),
                        "layers": int(row["layers"]), "seed": int(row["seed"]), "model_id": row["model_id"],
                        "group_id": group_id, "checkpoint": checkpoint, "chars": chars, "layer": int(layer),
                        "state": state, "lag": int(k), "grad_norm": float(g[k]),
                        "ratio_mid_end": mid_end, "ratio_far_mid": far_mid, "memory": state == memory,
                    } for k in keep]  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


# ------------------------------------------------------------------------------------------ views


def headline(df: pd.DataFrame) -> pd.DataFrame:
    """The memory state of each model's top layer (c where there is a cell, else h), one row per profile."""
    top = df[(df["layer"] == df["layers"] - 1) & df["memory"]]
    return top.drop_duplicates(["model_id", "checkpoint", "state"])


def _order(df: pd.DataFrame) -> list[str]:
    rank = {a: i for i, a in enumerate([*LABELS, *sorted(set(df["arch"]) - set(LABELS))])}
    labels = df.drop_duplicates("label")[["label", "arch", "budget"]]
    return list(labels.sort_values(["arch", "budget"], key=lambda c: c.map(rank) if c.name == "arch" else c)["label"])


def plot(df: pd.DataFrame):
    style()
    corpora_ = sorted(df["corpus"].unique())
    fig, axes = plt.subplots(len(corpora_), 3, figsize=(16, 4.6 * len(corpora_)), squeeze=False)
    top = df[(df["layer"] == df["layers"] - 1) & df["memory"]]
    palette = dict(zip(_order(df), sns.color_palette("tab10", n_colors=max(3, df["label"].nunique()))))
    for axrow, corpus in zip(axes, corpora_):
        sub = top[top["corpus"] == corpus]
        for ax, checkpoint in zip(axrow[:2], ("init", "final")):
            prof = sub[(sub["checkpoint"] == checkpoint) & (sub["grad_norm"] > 0)]
            prof = prof.groupby(["label", "lag"], as_index=False)["grad_norm"].mean()  # mean over seeds of a group
            sns.lineplot(data=prof, x="lag", y="grad_norm", hue="label", hue_order=[k for k in palette if k in
                         set(prof["label"])], palette=palette, ax=ax)  # fmt: skip
            ax.set_yscale("log")
            ax.set_xlabel("lag k (characters back from the predicted one)")
            ax.set_ylabel("mean ||dL_T / d state_{T-k}||  (c, or h without a cell)")
            ax.set_title(f"{corpus}: {'at initialisation' if checkpoint == 'init' else 'after training'}")
            ax.legend(title="", fontsize=8)
        ax = axrow[2]
        ratios = sub.drop_duplicates(["model_id", "checkpoint"])
        ratios = (
            ratios[ratios["ratio_mid_end"] > 0]
            .groupby(["label", "checkpoint"], as_index=False)[["chars", "ratio_mid_end"]]
            .mean()
        )
        sns.lineplot(
            data=ratios, x="chars", y="ratio_mid_end", hue="label", palette=palette, marker="o", ax=ax, legend=False
        )
        ax.set_xscale("symlog", linthresh=1e3)  # linear below 1,000 characters: room for the initial model at 0
        top_decade = int(np.ceil(np.log10(max(ratios["chars"].max(), 1e3))))
        ticks = [0.0] + [10.0**e for e in range(3, top_decade + 1)]
        ax.set_xticks(ticks, ["init"] + [f"$10^{e}$" for e in range(3, top_decade + 1)])
        ax.set_xlim(0, ticks[-1])
        ax.set_yscale("log")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("training characters (0 = initialisation)")
        ax.set_ylabel("vanishing ratio ||dL/d state_mid|| / ||dL/dh_end||")
        ax.set_title(f"{corpus}: vanishing ratio along training (K = {int(df['lag'].max())})")
    fig.tight_layout()
    return fig


def with_paper(df: pd.DataFrame) -> pd.DataFrame:
    """Per model type: the vanishing ratio at initialisation and after training, the far end over the middle after
    training (geometric mean over seeds), gradient norms at lags 50 and K after training; Maini et al.'s Table 2
    below, in the vanishing-ratio column only (their task: a sentence classifier at 95 % training accuracy)."""
    top = headline(df)
    K = int(df["lag"].max())
    rows = []
    order = {label: i for i, label in enumerate(_order(df))}
    top = top.assign(rank=top["label"].map(order)).sort_values(["corpus", "rank"])
    for (corpus, label), sub in top.groupby(["corpus", "label"], sort=False):
        final = sub[sub["checkpoint"] == "final"]
        norms = df[df["model_id"].isin(final["model_id"]) & (df["checkpoint"] == "final")]
        norms = norms[(norms["state"] == final["state"].iloc[0]) & (norms["layer"] == final["layer"].iloc[0])]
        rows.append({
            "source": f"ours, {corpus}", "model": label, "state": final["state"].iloc[0], "seeds": len(final),
            "measured at": f"init; best-on-validation after {int(final['chars'].mean()):,} chars",
            "vanishing ratio at init": geometric_mean(sub.loc[sub["checkpoint"] == "init", "ratio_mid_end"]),
            "vanishing ratio trained": geometric_mean(final["ratio_mid_end"]),
            "far end / mid trained": geometric_mean(final["ratio_far_mid"]),
            "norm at lag 50": norms.loc[norms["lag"] == 50, "grad_norm"].mean(),
            f"norm at lag {K}": norms.loc[norms["lag"] == K, "grad_norm"].mean(),
        })  # fmt: skip
    rows += [{"source": f"Maini et al. Table 2, {size} examples", "model": model, "state": "h",
              "measured at": "95 % training accuracy", "vanishing ratio trained": ratio}
             for model, size, ratio in table2_ratios()]  # fmt: skip
    return pd.DataFrame(rows)


def geometric_mean(values) -> float:
    """Of ratios that span decades (a ratio of 0, a gradient that is gone, gives 0; none: NaN)."""
    values = np.asarray(values, dtype=float)
    with np.errstate(divide="ignore"):
        return float(np.exp(np.log(values).mean())) if values.size else float("nan")


def _final_ratios(df: pd.DataFrame) -> pd.DataFrame:
    """Geometric mean over seeds of the headline ratios (and the mean training characters), per corpus, budget
    row, model type and checkpoint."""
    top = headline(df).copy()
    top["budget"] = top["budget"].fillna(-1)
    keys = ["corpus", "budget", "arch", "label", "checkpoint"]
    ratios = top.groupby(keys)[["ratio_mid_end", "ratio_far_mid"]].agg(geometric_mean)
    return ratios.join(top.groupby(keys)["chars"].mean()).reset_index()


def _by_arch(sub: pd.DataFrame, checkpoint: str) -> dict[str, pd.Series]:
    return {r["arch"]: r for _, r in sub[sub["checkpoint"] == checkpoint].iterrows()}


def compare(a: float, b: float, factor: float = FACTOR) -> str:
    """'more' when a > factor x b, 'less' when a < b / factor, 'about as much' between; 'unknown' with a NaN."""
    if np.isnan(a) or np.isnan(b):
        return "unknown"
    return "more" if a > factor * b else "less" if a * factor < b else "about as much"


def _fold(a: float, b: float) -> str:
    """How many times the larger of a and b is the smaller: '3.2e+05-fold' ('an unbounded factor' with a 0)."""
    return f"{max(a, b) / min(a, b):.2g}-fold" if a > 0 and b > 0 else "by an unbounded factor"


def gradient_kept(first: str, a: float, second: str, b: float, where: str) -> str:
    """One sentence comparing two vanishing ratios, `first`'s a against `second`'s b, by FACTOR."""
    verdict = compare(a, b)
    if verdict == "unknown":
        return f"{first} and {second} cannot be compared{where}: a gradient at the loss is zero."
    if verdict == "about as much":
        return (
            f"{first} keeps about as much of the gradient at mid-window as {second}{where} (within a factor of "
            f"{FACTOR}: vanishing ratio {a:.2g} against {b:.2g})."
        )
    return (
        f"{first} keeps {verdict} of the gradient at mid-window than {second}{where}: vanishing ratio {a:.2g} "
        f"against {b:.2g}, {_fold(a, b)} {'larger' if verdict == 'more' else 'smaller'}."
    )


def table2_place(ratio: float) -> str:
    """Where a vanishing ratio falls against Maini et al.'s Table 2: its BiLSTM range and its pooled models'."""
    bilstm, pooled = table2_range("BiLSTM"), table2_range(exclude="BiLSTM")
    if np.isnan(ratio):
        return "not measured"
    if ratio < bilstm[0]:
        return "below every value there"
    if ratio <= bilstm[1]:
        return "in the BiLSTM's range"
    if ratio < pooled[0]:
        return "between the BiLSTM's and the pooled models' ranges"
    return "in the pooled models' range" if ratio <= pooled[1] else "above every value there"


def caption(df: pd.DataFrame) -> str:
    if df.empty:
        return "No gradient profiles were computed."
    K = int(df["lag"].max())
    finals = _final_ratios(df).query("checkpoint == 'final'")["chars"]
    chars = f"{finals.min():,.0f}" if finals.min() == finals.max() else f"{finals.min():,.0f} to {finals.max():,.0f}"
    parts = [
        f"Gradient of the last character's loss with respect to the state k characters earlier (k = 0..{K}), "
        "averaged over windows whose state is detached at their start; the lines show the memory state (c where "
        "the model has a cell, else h) of the top layer. Vanishing ratio (Maini et al., as the notes define it) = "
        f"||dL/dh_mid|| / ||dL/dh_end||: the mean gradient over the middle 10 % of lags (about {K // 2}) over the "
        "gradient at lag 0, where the loss reads h (for c as well: dL/dc at lag 0 is zero by construction); below "
        "1 the gradient has shrunk between the loss and mid-window. Measured at initialisation and at the "
        f"best-on-validation checkpoint after training ({chars} characters), the lowest seed also at snapshots "
        "(right); Maini et al. measure when a classifier first reaches 95 % training accuracy, a moment a language "
        "model does not have. Ratios are geometric means over seeds."
    ]
    for (corpus, budget), sub in _final_ratios(df).groupby(["corpus", "budget"]):
        trained, init = _by_arch(sub, "final"), _by_arch(sub, "init")
        archs = [a for a in [*LABELS, *sorted(set(trained) - set(LABELS))] if a in trained]
        items = ", ".join(
            f"{trained[a]['label']} {trained[a]['ratio_mid_end']:.2g}"
            + (f" (init {init[a]['ratio_mid_end']:.2g})" if a in init else "")
            for a in archs
        )
        row = f"the {int(budget)} budget row" if budget >= 0 else "models of no budget row"
        parts.append(f"On {corpus}, {row}, vanishing ratio after training (at initialisation): {items}.")
        if "rnn" in init and "lstm" in init:
            lstm, rnn = init["lstm"]["ratio_mid_end"], init["rnn"]["ratio_mid_end"]
            parts.append(gradient_kept("The LSTM's cell", lstm, "the S-RNN's h", rnn, " at initialisation"))
            if compare(lstm, rnn) == "less" and lstm > 0:
                rate = lstm ** (1 / (K / 2))
                parts.append(
                    f"That is a factor of {rate:.2f} a step on average (the geometric rate giving this ratio over "
                    f"{K // 2} lags): its forget gates start near sigmoid(0) = 0.5."
                )
        if "rnn" in trained and "lstm" in trained:
            lstm, rnn = trained["lstm"]["ratio_mid_end"], trained["rnn"]["ratio_mid_end"]
            parts.append(gradient_kept("The LSTM's cell", lstm, "the S-RNN's h", rnn, " after training"))
        moved = {"more": [], "less": [], "about as much": []}
        for a in archs:
            t, i = trained[a]["ratio_mid_end"], init[a]["ratio_mid_end"] if a in init else np.nan
            if compare(t, i) != "unknown":
                moved[compare(t, i)].append(f"{trained[a]['label']} {_fold(t, i)}")
        said = [
            f"{verb} the vanishing ratio of {', '.join(moved[key])}"
            for key, verb in (("more", "raised"), ("less", "lowered"), ("about as much", f"kept within {FACTOR}x"))
            if moved[key]
        ]
        if said:
            start = " (the notes' 'Vanishing Gradients @ Start of Training', for classifiers)" if moved["more"] else ""
            parts.append(f"Training {'; '.join(said)}{start}.")
        differ = [
            f"{trained[a]['label']} (vanishing ratio {trained[a]['ratio_mid_end']:.2g}, far end over the middle "
            f"{trained[a]['ratio_far_mid']:.2g})"
            for a in archs
            if compare(trained[a]["ratio_far_mid"], trained[a]["ratio_mid_end"]) in ("more", "less")
        ]
        if differ:
            parts.append(
                f"The far end over the middle (g_{K} / g_mid: how much further the gradient falls past mid-window; "
                "Maini et al.'s code's first bin, an end the loss touches only in a BiLSTM) differs from the "
                f"vanishing ratio by more than {FACTOR}x after training for {', '.join(differ)}: no single geometric "
                "rate describes these profiles, and only the vanishing ratio compares with Maini et al."
            )
        else:
            parts.append(
                f"After training the far end over the middle (g_{K} / g_mid) agrees with the vanishing ratio within "
                f"{FACTOR}x for every model here, as it would for a geometric decay."
            )
        if "lstm-srnn-hidden" in trained:
            hidden = trained["lstm-srnn-hidden"]["ratio_mid_end"]
            parts.append(
                "In - S-RNN - HIDDEN the cell is the only recurrence (the gates read x only, so dL_T/dh_{T-k} = 0 "
                f"for k > 0) and its c gradient is a plain product of forget gates: vanishing ratio {hidden:.2g}."
            )
        places = ", ".join(f"{trained[a]['label']} {table2_place(trained[a]['ratio_mid_end'])}" for a in archs)
        parts.append(f"Against Maini et al.'s Table 2, after training: {places}.")
    (b_lo, b_hi), (p_lo, p_hi) = table2_range("BiLSTM"), table2_range(exclude="BiLSTM")
    parts.append(
        f"Maini et al.'s Table 2 is of sentence classifiers at 95 % training accuracy (BiLSTM {b_lo:.2g} to "
        f"{b_hi:.2g}, pooled models {p_lo:.2g} to {p_hi:.2g}), not language models at the end of training: compare "
        "orders of magnitude, not values."
    )
    return " ".join(parts)


def notes(df: pd.DataFrame) -> list[str]:
    return [
        "Gradients are exact (autograd through the hand-written cells, one step at a time), per window, then "
        "averaged; Maini et al. take the Frobenius norm over a batch of the mean loss, which weighs the windows "
        "by their squared norm instead: the ratios differ by how skewed the per-window norms are.",
        "The gradient with respect to c is that of the cell carried to the next step; c's use in h = o tanh(c) "
        "within its own step is not counted (that is what makes dL_T/dc_T zero), the same for every architecture.",
        "Only the lowest seed of each configuration is profiled at every snapshot; the other seeds at "
        "initialisation and after training. Ratios near machine precision (1e-30 and below) mean the gradient "
        "is gone, not a precise value.",
    ]


def summary(df: pd.DataFrame) -> str:
    items = []
    for corpus, sub in _final_ratios(df).groupby("corpus"):
        budget = sub.groupby("budget")["arch"].nunique().idxmax()  # the row with most model types: the comparison
        trained = _by_arch(sub[sub["budget"] == budget], "final")
        picks = [a for a in ("rnn", "gru", "lstm", "lstm-srnn-hidden") if a in trained]
        if picks:
            items.append(
                f"{corpus}: " + ", ".join(f"{trained[a]['label']} {trained[a]['ratio_mid_end']:.1g}" for a in picks)
            )
    K = int(df["lag"].max()) if len(df) else 0
    (b_lo, b_hi), (p_lo, p_hi) = table2_range("BiLSTM"), table2_range(exclude="BiLSTM")
    return (
        f"Vanishing ratio ||dL/dh_mid|| / ||dL/dh_end|| (Maini et al.; mid = lag {K // 2} of {K}) at the "
        "best-on-validation checkpoint: "
        + "; ".join(items)
        + f" (Maini et al. Table 2, classifiers at 95 % training accuracy: BiLSTM {b_lo:.2g}-{b_hi:.2g}, pooled "
        f"{p_lo:.2g}-{p_hi:.2g})"
    )


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
