"""The memory cell as an element-wise weighted sum (Levy et al. 2018, eq. 8 and appendix A).

Levy et al. expand the LSTM's memory recurrence c_t = i_t * ctilde_t + f_t * c_{t-1} into

    c_t = sum_{j <= t} w_j^t * ctilde_j,      w_j^t = i_j * prod_{k=j+1..t} f_k         (eq. 8)

an element-wise weighted sum of every content vector read so far. On an excerpt whose state was carried in from the
text before it, the sum runs from the excerpt's first step and the state c_0 it started from adds one term:

    c_t = sum_{j=1..t} w_j^t * ctilde_j + (prod_{k=1..t} f_k) * c_0.

The GRU (review version, footnote 1: "they compute weighted-averages, since the gates are coupled") is the same with
i = z and f = 1 - z (z the weight on the candidate htilde, the papers' convention, see charlm/model.py): h_t =
sum_j z_j prod_{k>j} (1 - z_k) htilde_j + prod_k (1 - z_k) h_0, and its weights plus the carried term sum to one.

For every architecture with such a cell (LSTM, - S-RNN, - S-RNN - OUT, - S-RNN - HIDDEN, and the GRU) this analysis

  1. checks the identity on the trained model's own traced gates and states (max abs error, in windows of `window`
     steps, each starting from the traced state before it), and for the GRU that the weights sum to one. Both are
     algebra: unrolling c_t = f_t c_{t-1} + i_t ctilde_t gives eq. 8 for any gate values, trained or random, and
     coupled gates always sum to one. So they check the trace and this code (a layer whose traced state is not the
     recurrence of its traced gates would fail), not a property of trained models, and the report says so;
  2. draws Levy et al.'s appendix heatmap: ||w_j^t||_2 over one sentence of each corpus, current position t on x,
     context position j on y (their Table 5: "each column represents the current word t, and each row [...] a
     context word j"), with the weight on the state carried into the sentence as an extra top row. Reading w_j^t as
     the weight on the *character* at j is literal only where the content ctilde_j is a function of x_j alone: layer
     1 of the ablations without the content S-RNN (LSTM - S-RNN, - S-RNN - OUT, - S-RNN - HIDDEN: ctilde = W_cx x,
     sec 3.1; the appendix draws - S-RNN - OUT, "a weighted sum of context-independent functions of the inputs",
     sec 5). In the LSTM and the GRU ctilde_j reads h_{j-1}, so w_j^t weighs a summary of the whole prefix up to j;
  3. tests the appendix's two readings: "the weights on the diagonal are always the largest", and frequent words are
     "quickly forgotten, while infrequent words [...] are remembered over very long distances" (here: characters,
     by their training-split frequency);
  4. gives each cell's memory span -1 / mean_t ln f_t (the geometric-mean timescale; -1 / ln mean f, the arithmetic
     one, overestimates it, see ANCHORS.md) and its distribution per layer and architecture.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
from matplotlib.colors import LogNorm
from scipy import stats

from charlm import archs
from charlm.model import ARCH_LABELS, GATED_ARCHS, GATELESS_ARCHS, GRU_ARCHS, memory_weights
from corpora.errors import UserError, run_cli

from .common import BRIEF_TRAINING, analysis_main, chosen_archs, ordered_models, style
from .context import Context

TITLE = "The memory cell as a weighted sum"
QUESTION = "Does the cell compute Levy et al.'s element-wise weighted sum, which context does it weigh, and how long?"
PAPER_SOURCE = "Levy et al. (2018), eq. 8 and appendix A (Table 5); review version footnote 1 (the GRU)"

LABELS = ARCH_LABELS

TOLERANCE = 1e-4  # the identity "holds" when the max abs error is below this times max(1, max |state|) (float32)
DIAGONAL_ALWAYS = 0.99  # "always the largest": the diagonal wins at 99 % of steps at least
BPTT = 100  # Karpathy et al.'s unroll: spans beyond it reach past what truncated backprop sees
MIN_OCCURRENCES = 5  # characters rarer than this in the excerpt are left out of the frequency correlation
KEEP_RESOLVED = 1.0 - 2.0**-24  # float32 cannot tell a keep gate above this from 1: spans cap near 1.7e7

CONTENT_FROM_INPUT = archs.names(content_from_input=True)  # ctilde_j = W_cx x_j: no history (Levy sec 3.1)

SETTINGS = {
    "split": "test",  # Levy et al. visualise held-out text
    "start": 1000,  # where the excerpt starts in the split (characters; at least 1: the state before it is read)
    "length": 4000,  # excerpt length (characters): spans and retention are measured over it
    "warmup": 1000,  # characters read before the excerpt to warm the state up (from zero at their start)
    "check_length": 1000,  # the identity is checked over the excerpt's first this many steps ...
    "window": 100,  # ... in windows of this many (w is window x window x cells per window)
    "lags": 50,  # retention: the weight a character keeps over the next this many steps
    "sentence_length": 32,  # characters in each corpus's heatmap sentence
    "archs": list(GATED_ARCHS),  # architectures to analyse; one without a memory cell is an error
}
COLUMNS = ["corpus", "arch", "size", "layers", "budget", "seed", "chars_trained", "model_id", "group_id", "layer",
           "measure", "cell", "t", "j", "char", "count", "steps", "value"]  # fmt: skip


# ------------------------------------------------------------------------------------------ the weighted sum


def weighted_sum(write: np.ndarray, keep: np.ndarray, content: np.ndarray, state0: np.ndarray):
    """Levy et al. eq. 8 from the gates, in float64, with the state carried in.

    write, keep, content: (T, H) the input gate i (GRU: z), forget gate f (GRU: 1 - z) and content ctilde (GRU: htilde)
    at steps 1..T; state0: (H,) the state before step 1. Returns w (T_j, T_t, H), carried (T, H) = prod_{k<=t} keep_k,
    and the reconstruction (T, H) = sum_j w[j, t] * content_j + carried[t] * state0.
    """
    write, keep, content = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (write, keep, content))
    w = memory_weights(write[None], keep[None])[0]  # (T_j, T_t, H)
    carried = torch.cumprod(keep, 0)  # (T, H)
    recon = torch.einsum("jth,jh->th", w, content) + carried * torch.from_numpy(np.asarray(state0, np.float64))
    return w.numpy(), carried.numpy(), recon.numpy()


def memory_span(keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(T, H) keep gates -> per cell the geometric span -1 / mean ln f and the arithmetic -1 / ln mean f (characters).

    A constant f gives -1 / ln f for both: the number of steps over which a stored value decays by a factor e.
    """
    keep = np.clip(np.asarray(keep, dtype=np.float64), 1e-300, KEEP_RESOLVED)
    return -1.0 / np.log(keep).mean(0), -1.0 / np.log(keep.mean(0))


def diagonal_largest(w: np.ndarray) -> np.ndarray:
    """(T_j, T_t, H) weights -> for t = 1..T-1 whether ||w_t^t|| is the largest ||w_j^t||, j <= t (Table 5's claim)."""
    norms = weight_rms(w)  # (T_j, T_t); w[j, t] = 0 for j > t
    steps = np.arange(1, w.shape[1])  # t = 0 has only its own weight
    return norms[:, steps].argmax(0) == steps


def weight_rms(w: np.ndarray) -> np.ndarray:
    """(..., H) -> (...): ||w||_2 / sqrt(H), the root-mean-square weight, so models of different widths compare."""
    return np.sqrt((w**2).mean(-1))


def _cell_parts(arch: str, trace: dict, layer: int) -> tuple[np.ndarray, ...]:
    """(write, keep, content, state) of a traced layer, float64: i, f, ctilde, c (LSTM family); z, 1 - z, htilde, h."""
    get = lambda name: trace[f"layers.{layer}.{name}"].astype(np.float64)  # noqa: E731
    if arch in GRU_ARCHS:
        z = get("z")
        return z, 1.0 - z, get("htilde"), get("h")
    return get("i"), get("f"), get("ctilde"), get("c")


def sentence_start(text: bytes, length: int) -> int:
    """Where the heatmap sentence starts in an excerpt: after the first '. ' followed by a capital letter (prose),
    else at the first line that starts with a non-blank character (code), else at 0; it must leave `length` chars."""
    last = len(text) - length
    for p in range(2, last + 1):
        if text[p - 2 : p] == b". " and chr(text[p]).isupper():
            return p
    for p in range(1, last + 1):
        if text[p - 1 : p] == b"\n" and not chr(text[p]).isspace():
            return p
    return 0


def printable(byte: int) -> str:
    """A character as a tick label: newline, tab and space made visible, other control bytes as hex."""
    return {10: "⏎", 13: "←", 9: "⇥", 32: "␣"}.get(byte) or (chr(byte) if 32 < byte < 127 else f"\\x{byte:02x}")


# ------------------------------------------------------------------------------------------ measuring one model


def _settings(ctx: Context) -> dict:
    s = {k: ctx.settings[k] for k in ("split", "start", "length", "warmup", "check_length", "window", "lags",
                                      "sentence_length")}  # fmt: skip
    for key in ("start", "length", "warmup", "check_length", "window", "lags", "sentence_length"):
        if not isinstance(s[key], int) or isinstance(s[key], bool):
            raise UserError(f"weighted_sum: {key} must be an integer, got {s[key]!r}")
    if s["start"] < 1:
        raise UserError("weighted_sum: start must be at least 1 (the state before the excerpt is read)")
    for key in ("check_length", "sentence_length"):
        if not 2 <= s[key] <= s["length"]:
            raise UserError(f"weighted_sum: {key} must be between 2 and length ({s['length']}), got {s[key]}")
    if not 1 <= s["lags"] < s["length"] or s["window"] < 2:
        raise UserError(f"weighted_sum: lags must be between 1 and length - 1 and window at least 2 "
                        f"(got lags={s['lags']}, window={s['window']})")  # fmt: skip
    return s


def _archs(ctx: Context) -> list[str]:
    return chosen_archs(ctx, GATED_ARCHS, GATELESS_ARCHS, "no gated memory cell, so no weighted sum", "weighted_sum")


def retention(write: np.ndarray, keep: np.ndarray, lags: int) -> np.ndarray:
    """How much of each step's content the cell still holds over the next `lags` steps (the appendix's streaks).

    write, keep: (T, H). For every j with `lags` steps after it: sum_{d=1..lags} rms(w_j^{j+d}), with
    w_j^{j+d} = write_j * prod_{k=j+1..j+d} keep_k; in steps (a weight of 1 kept for d steps gives d). (T - lags,)
    """
    n = write.shape[0] - lags
    weight = np.array(write[:n], dtype=np.float64)  # (n, H): w_j^j
    total = np.zeros(n)
    for d in range(1, lags + 1):
        weight *= keep[d : d + n]  # w_j^{j+d}
        total += weight_rms(weight)
    return total


def _measure(ctx: Context, row: pd.Series, s: dict) -> dict[str, np.ndarray]:
    """Everything the table needs from one model, cached by its checkpoint and the settings."""

    def compute() -> dict[str, np.ndarray]:
        ids = ctx.corpus(row).split(s["split"])
        # one step more than the excerpt: trace row 0 is the state carried into its first step, row r is the state
        # after excerpt character r - 1
        trace = ctx.trace(row, s["split"], s["start"] - 1, s["length"] + 1, warmup=s["warmup"])
        excerpt = ids[s["start"] : s["start"] + s["length"]]
        p = sentence_start(ctx.corpus(row).decode(excerpt), s["sentence_length"])
        sentence = slice(p + 1, p + 1 + s["sentence_length"])
        out = {"sentence": excerpt[p : p + s["sentence_length"]].astype(np.int64),
               "retention_ids": excerpt[: s["length"] - s["lags"]].astype(np.int64)}  # fmt: skip
        for layer in range(int(row["layers"])):
            write, keep, content, state = _cell_parts(row["arch"], trace, layer)  # (1 + length, H) each
            errors, sum_errors, diagonal = [], [], []
            for lo in range(1, s["check_length"] + 1, s["window"]):  # steps lo..hi-1, state carried in at lo - 1
                hi = min(lo + s["window"], s["check_length"] + 1)
                w, carried, recon = weighted_sum(write[lo:hi], keep[lo:hi], content[lo:hi], state[lo - 1])
                errors.append(np.abs(recon - state[lo:hi]).max())
                sum_errors.append(np.abs(w.sum(0) + carried - 1.0).max())  # the GRU's weighted average
                diagonal.append(diagonal_largest(w))
            w, carried, _ = weighted_sum(write[sentence], keep[sentence], content[sentence], state[p])
            span, span_arithmetic = memory_span(keep[1:])
            out |= {
                f"L{layer}_error": np.max(errors), f"L{layer}_state_max": np.abs(state[: s["check_length"] + 1]).max(),
                f"L{layer}_sum_error": np.max(sum_errors), f"L{layer}_diagonal": np.concatenate(diagonal).mean(),
                f"L{layer}_span": span, f"L{layer}_span_arithmetic": span_arithmetic,
                f"L{layer}_heat": np.vstack([weight_rms(carried)[None], weight_rms(w)]),  # (1 + S_j, S_t)
                f"L{layer}_retention": retention(write[1:], keep[1:], s["lags"]),
            }  # fmt: skip
        return out

    return ctx.cached("weighted_sum", {"model": ctx.digest(row), **s, "method": 1}, compute)  # method: bump on change


def _layer_rows(m: dict, L: str, s: dict, arch: str, heatmap: bool, sentence: list, vocab, frequency) -> list:
    """The table's rows for one layer of one model (see compute)."""
    scalars = {"identity_error": m[L + "error"], "state_max": m[L + "state_max"], "diagonal": m[L + "diagonal"]}
    if arch in GRU_ARCHS:
        scalars["sum_error"] = m[L + "sum_error"]
    values = np.array(list(scalars.values()), dtype=float)
    frames = [pd.DataFrame({"measure": list(scalars), "steps": s["check_length"], "value": values})]
    for name in ("span", "span_arithmetic"):
        frames.append(pd.DataFrame({"measure": name, "cell": np.arange(m[L + name].size), "steps": s["length"],
                                    "value": m[L + name]}))  # fmt: skip
    if heatmap:
        heat = m[L + "heat"]  # (1 + S, S): row 0 the carried state, row 1 + j context position j
        j, t = np.nonzero(np.triu(np.ones_like(heat[1:], dtype=bool)))
        frames.append(pd.DataFrame({
            "measure": "weight", "t": np.concatenate([np.arange(heat.shape[1]), t]),
            "j": np.concatenate([np.full(heat.shape[1], -1), j]),
            "char": ["before"] * heat.shape[1] + [sentence[x] for x in j],
            "value": np.concatenate([heat[0], heat[1:][j, t]]),
        }))  # fmt: skip
    kept = pd.Series(m[L + "retention"]).groupby(m["retention_ids"]).agg(["mean", "size"])  # per character
    frames.append(pd.DataFrame({
        "measure": "retention", "char": [printable(int(vocab[c])) for c in kept.index],
        "count": frequency[kept.index], "steps": kept["size"].to_numpy(), "value": kept["mean"].to_numpy(),
    }))  # fmt: skip
    return frames


def compute(ctx: Context) -> pd.DataFrame:
    """A long table, one row per observation, its `measure` saying what it is:

    identity_error   max |c_t - (sum_j w_j^t ctilde_j + prod f c_0)| over the excerpt (one per model and layer)
    state_max        max |c_t| (the scale of that error)
    sum_error        GRU only: max |sum_j w_j^t + prod (1 - z) - 1|
    diagonal         fraction of steps t whose largest ||w_j^t|| is at j = t
    span, span_arithmetic   per cell, in characters
    weight           ||w_j^t||_2 / sqrt(H) over the corpus's sentence (lowest seed of each group); j = -1: the state
                     carried into the sentence; `char` is the character at j (at t where j = t)
    retention        per character of the excerpt: mean over its occurrences of the weight kept over the next `lags`
                     steps; `count` = its count in the training split, `steps` = its occurrences in the excerpt

    `steps` is how many excerpt steps a value summarises (the identity's check_length, the span's length).
    """
    s = _settings(ctx)
    models = ctx.models(arch=tuple(_archs(ctx)))
    lowest_seed = models["seed"] == models.groupby("group_id")["seed"].transform("min")
    frequency = {}
    frames = []
    for k, row in models.iterrows():
        m = _measure(ctx, row, s)
        ident = {c: row[c] for c in ("corpus", "arch", "budget", "model_id", "group_id")} | {
            c: int(row[c]) for c in ("size", "layers", "seed", "chars_trained")
        }
        if row["corpus_key"] not in frequency:  # the model's notion of a rare character: its training counts
            frequency[row["corpus_key"]] = np.bincount(ctx.corpus(row).split("train"), minlength=256)
        vocab = ctx.corpus(row).vocab
        sentence = [printable(int(vocab[c])) for c in m["sentence"]]
        for layer in range(int(row["layers"])):
            parts = _layer_rows(m, f"L{layer}_", s, row["arch"], bool(lowest_seed[k]), sentence, vocab,
                                frequency[row["corpus_key"]])  # fmt: skip
            frames += [f.assign(layer=layer + 1, **ident) for f in parts]
    df = pd.concat(frames, ignore_index=True)
    return df.reindex(columns=COLUMNS)


# ------------------------------------------------------------------------------------------ the paper's findings


def _ordered(df: pd.DataFrame) -> pd.DataFrame:
    return ordered_models(df, GATED_ARCHS)


def _retention_by_char(g: pd.DataFrame) -> pd.DataFrame:
    """Per character of one group and layer: training count, occurrences in the excerpt, retention (seed mean)."""
    r = g[g["measure"] == "retention"]
    per = r.groupby("char").agg(count=("count", "first"), seen=("steps", "mean"), retention=("value", "mean"))
    return per[per["seen"] >= MIN_OCCURRENCES].sort_values("retention")


CHECK, FINDING = "implementation check", "finding"  # what a row of findings() is: algebra checked, or a measurement


def _layer_findings(g: pd.DataFrame) -> list[tuple]:
    """(finding, paper's words, value, our words, found / None when the paper has no number, CHECK or FINDING) for
    one group's layer."""
    value = lambda name: g.loc[g["measure"] == name, "value"]  # noqa: E731
    error, scale, check = (
        value("identity_error").max(),
        value("state_max").max(),
        int(g.loc[g["measure"] == "identity_error", "steps"].iloc[0]),
    )
    out = [("eq. 8 identity", "an identity for any gate values (a check of the trace and this code)", error,
            f"max |error| {error:.1e} over {check:,} steps (|state| up to {scale:.1f})",
            error <= TOLERANCE * max(1.0, scale), CHECK)]  # fmt: skip
    if g["arch"].isin(GRU_ARCHS).any():
        sum_error = value("sum_error").max()
        words = f"max |sum_j w_j^t + prod(1 - z) - 1| = {sum_error:.1e}"
        paper = "a weighted average, since the gates are coupled (footnote 1): algebra, a check of this code"
        out.append(("GRU weights sum to one", paper, sum_error, words, sum_error <= TOLERANCE, CHECK))
    diagonal = value("diagonal").mean()
    out.append(("diagonal weight largest", "the weights on the diagonal are always the largest", diagonal,
                f"largest at j = t at {diagonal:.1%} of steps", diagonal >= DIAGONAL_ALWAYS, FINDING))  # fmt: skip
    per = _retention_by_char(g)
    if len(per) >= 3:
        rho, p = stats.spearmanr(per["count"], per["retention"])
        words = (f"Spearman rho(training count, retention) = {rho:+.2f} (p = {p:.2g}) over {len(per)} characters; "
                 f"longest: {' '.join(per.index[::-1][:4])}; shortest: {' '.join(per.index[:4])}")  # fmt: skip
        paper = "function words quickly forgotten, infrequent words remembered over very long distances (words)"
        out.append(("rare context remembered longer", paper, rho, words, rho < 0 and p < 0.05, FINDING))
    spans = value("span")
    beyond = (spans > BPTT).mean()
    out.append(("memory span", "(no number in the paper)", float(spans.median()),
                f"median {spans.median():.2f}, 90th percentile {spans.quantile(0.9):.1f}, max {spans.max():.0f} "
                f"characters; {beyond:.0%} of cells beyond {BPTT}", None, FINDING))  # fmt: skip
    return out


def findings(df: pd.DataFrame) -> pd.DataFrame:
    """The paper's claims for every group (corpus, architecture, shape) and layer, seeds pooled: number and verdict."""
    rows = []
    for (corpus, model, _, layer), g in _ordered(df).groupby(["corpus", "model", "group_id", "layer"], sort=False):
        for finding, paper, value, words, found, kind in _layer_findings(g):
            verdict = (("passed" if found else "FAILED") if kind == CHECK
                       else "no paper number" if found is None else ("found" if found else "not found"))  # fmt: skip
            rows.append({
                "corpus": corpus, "model": model, "seeds": g["model_id"].nunique(), "layer": int(layer),
                "kind": kind, "finding": finding, "paper": paper, "value": float(value), "ours": words,
                "verdict": verdict,
            })  # fmt: skip
    return pd.DataFrame(rows)


with_paper = findings  # the report's table: the paper's claims beside our numbers (the long table is the CSV)


# ------------------------------------------------------------------------------------------ figure and words


def _heatmap(ax, sub: pd.DataFrame, title: str, ylabel: str, yticks: bool) -> object:
    """||w_j^t|| over the sentence: t (current) on x, j (context) on y, the carried state as the top row; log colour."""
    size = int(sub["t"].max()) + 1
    grid = np.full((size + 1, size), np.nan)
    grid[sub["j"].astype(int) + 1, sub["t"].astype(int)] = sub["value"]
    chars = sub[sub["j"] == sub["t"]].sort_values("t")["char"].tolist()
    top = np.nanmax(grid)
    norm = LogNorm(vmin=top * 1e-3, vmax=top)
    image = ax.imshow(np.clip(grid, top * 1e-3, None), cmap="Greys", norm=norm, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(size), chars, fontsize=5.5, family="monospace")
    ax.set_yticks(range(size + 1), ["c0"] + chars if yticks else [], fontsize=5.5, family="monospace")
    ax.tick_params(length=0, pad=1)
    ax.grid(False)
    ax.set_title(title, fontsize=8)
    ax.set_xlabel("current position t", fontsize=8)
    ax.set_ylabel(ylabel, fontsize=8)
    return image


def plot(df: pd.DataFrame):
    """Top: Levy et al.'s appendix heatmap per corpus (rows) and model (columns); bottom: memory spans per cell."""
    style()
    df = _ordered(df)
    weights = df[(df["measure"] == "weight") & (df["layer"] == 1)]
    corpora_ = sorted(df["corpus"].unique())
    shapes = list(dict.fromkeys(df.sort_values(["order", "size"], ascending=[True, False])["shape"]))
    n_layers = int(df["layers"].max())
    fig = plt.figure(figsize=(2.9 * len(shapes) + 1.2, 3.1 * len(corpora_) + 3.4))
    grid = fig.add_gridspec(len(corpora_) + 1, len(shapes), height_ratios=[1] * len(corpora_) + [1.05],
                            hspace=0.4, wspace=0.12, top=0.93)  # fmt: skip
    heat_axes, image = [], None
    for r, corpus in enumerate(corpora_):  # the same sentence along a row: characters on the first panel's y axis
        for c, shape in enumerate(shapes):
            sub = weights[(weights["corpus"] == corpus) & (weights["shape"] == shape)]
            if sub.empty:
                continue
            sub = sub[sub["model_id"] == sub["model_id"].iloc[0]]  # one model per panel, whatever the index holds
            ax = fig.add_subplot(grid[r, c])
            ylabel = f"{corpus}\ncontext position j" if c == 0 else ""
            image = _heatmap(ax, sub, sub["model"].iloc[0], ylabel, yticks=c == 0)
            heat_axes.append(ax)
    if image is not None:
        fig.colorbar(image, ax=heat_axes, shrink=0.7, pad=0.01, label=r"$\|w_j^t\|_2 / \sqrt{H}$ (log scale)")
    fig.suptitle("Weights of the memory cell's sum over one sentence (layer 1; Levy et al. appendix A, Table 5), "
                 "and memory spans", y=0.98)  # fmt: skip
    spans = df[df["measure"] == "span"].assign(layer=lambda d: "layer " + d["layer"].astype(int).astype(str))
    span_grid = grid[len(corpora_), :].subgridspec(1, len(corpora_), wspace=0.12)
    for k, corpus in enumerate(corpora_):
        ax = fig.add_subplot(span_grid[0, k])
        sub = spans[spans["corpus"] == corpus]
        hue = "layer" if n_layers > 1 else None
        shade = {"palette": "dark:0.85"} if hue else {"color": "0.85"}  # layers: greys from dark to light
        sns.boxplot(data=sub, x="model", y="value", hue=hue, log_scale=True, showfliers=False, ax=ax, **shade)
        sns.stripplot(data=sub, x="model", y="value", hue=hue, dodge=hue is not None, log_scale=True, size=2,
                      alpha=0.5, ax=ax, legend=False)  # fmt: skip
        ax.axhline(BPTT, color="C3", lw=0.8, ls="--")
        ax.text(0.01, BPTT, f" {BPTT}: the BPTT unroll", color="C3", fontsize=7, va="bottom",
                transform=ax.get_yaxis_transform())  # fmt: skip
        ax.set_title(f"{corpus}: memory span per cell, -1 / mean ln f", fontsize=9)
        ax.set_xlabel("")
        ax.set_ylabel("span (characters, log scale)" if k == 0 else "")
        ax.tick_params(axis="x", rotation=20, labelsize=7)
    return fig


def _context_reading(df: pd.DataFrame) -> str:
    """Whom the heatmap's per-context-character reading applies to: the models whose content is history-free."""
    models = _ordered(df).drop_duplicates("model")
    literal = models[models["arch"].isin(CONTENT_FROM_INPUT)]["model"].tolist()
    others = models[~models["arch"].isin(CONTENT_FROM_INPUT)]["model"].tolist()
    text = "Reading w_j^t as the weight on the character at j (Levy et al.'s appendix) is literal "
    if literal:
        text += f"for {', '.join(literal)}, whose content ctilde_j = W_cx x_j depends on that character alone (layer 1)"
    else:
        names = ", ".join(LABELS[a] for a in CONTENT_FROM_INPUT)
        text += f"only for the ablations whose content does not depend on history ({names}: ctilde_j = W_cx x_j), "
        text += "and none is analysed here"
    if others:
        text += (f"; in {', '.join(others)} the content at j reads h_{{j-1}}, so w_j^t weighs a summary of the whole "
                 "prefix up to j, not one character")  # fmt: skip
    return text + "."


def caption(df: pd.DataFrame) -> str:
    found = findings(df)
    ident = found[found["finding"] == "eq. 8 identity"]
    failed = ident[ident["verdict"] != "passed"]
    parts = [
        "Implementation check, not a finding: eq. 8 is an identity (unrolling c_t = f_t c_{t-1} + i_t ctilde_t gives "
        "it for any gate values, trained or not), so rebuilding each traced state from its own gates checks the trace "
        f"and this code. It passes in {len(ident) - len(failed)} of {len(ident)} model layers (max abs error "
        f"{ident['value'].max():.1e}, tolerance {TOLERANCE:g} x the state's scale), the state carried in from the "
        "text before the excerpt entering as the (prod f) c_0 term"
        + (
            "."
            if failed.empty
            else "; it FAILS for "
            + ", ".join(f"{r['corpus']} {r['model']} layer {r['layer']}" for _, r in failed.iterrows())
            + ": their traces or this code are wrong."
        )  # fmt: skip
    ]
    gru = found[found["finding"] == "GRU weights sum to one"]
    if not gru.empty:
        parts.append(f"The GRU's weights z_j prod (1 - z_k) plus its carried term sum to one within "
                     f"{gru['value'].max():.0e}: a weighted average, as footnote 1 says, and as coupled gates must "
                     "be (another check of the code, not of training).")  # fmt: skip
    parts.append(_context_reading(df))
    diag = found[found["finding"] == "diagonal weight largest"]
    low, high = diag["value"].min(), diag["value"].max()
    share = (
        f"{low:.1%} of steps in every model" if f"{low:.1%}" == f"{high:.1%}" else f"{low:.1%} to {high:.1%} of steps"
    )
    parts.append(f"The current character's weight is the largest of its column at {share} (paper: always).")
    spans = found[found["finding"] == "memory span"]
    parts.append("Median memory span per cell (characters): " + ", ".join(
        f"{r['corpus']} {r['model']} {r['value']:.2f}" for _, r in spans.iterrows()) + ".")  # fmt: skip
    rare = found[found["finding"] == "rare context remembered longer"]
    if not rare.empty:
        parts.append(f"The appendix's reading that rare context is remembered longer, transposed to characters: "
                     f"found in {(rare['verdict'] == 'found').sum()} of {len(rare)} models (Spearman rho from "
                     f"{rare['value'].min():+.2f} to {rare['value'].max():+.2f}); the table names the characters held "
                     "longest and shortest.")  # fmt: skip
    weights = df[(df["measure"] == "weight") & (df["j"] == df["t"])]
    sentences = [f"{corpus} '{''.join(g[g['model_id'] == g['model_id'].iloc[0]].sort_values('t')['char'])}'"
                 for corpus, g in weights.groupby("corpus")]  # fmt: skip
    if sentences:
        parts.append("Heatmap sentences: " + "; ".join(sentences).replace("␣", " ").replace("←", "") + ".")
    parts.append("Heatmaps use a log colour scale (the paper's darkness is linear) and the root-mean-square weight "
                 "||w||_2 / sqrt(H), so models of different widths share a scale; the top row is the weight on the "
                 "state carried into the sentence.")  # fmt: skip
    chars = int(df["chars_trained"].max())
    if chars < BRIEF_TRAINING:
        parts.append(f"These models saw {chars:,} training characters; short spans may be a sign of little training.")
    return " ".join(parts)


def summary(df: pd.DataFrame) -> str:
    found = findings(df)
    ident = found[found["finding"] == "eq. 8 identity"]
    diag = found[found["finding"] == "diagonal weight largest"]
    shapes = _ordered(df)[["model", "shape", "order", "size"]].drop_duplicates("model")
    spans = found[found["finding"] == "memory span"].merge(shapes, on="model")
    ranges = []
    for shape, g in spans.sort_values(["order", "size"], ascending=[True, False]).groupby("shape", sort=False):
        low, high = f"{g['value'].min():.2g}", f"{g['value'].max():.2g}"
        ranges.append(f"{shape} {low}" + (f"-{high}" if high != low else ""))
    least = diag["value"].min()
    share = "every step" if least == 1 else f"{least:.1%} of steps or more"
    passed = int((ident["verdict"] == "passed").sum())
    return (f"the diagonal weight is the largest at {share} (paper: always); median memory span (characters, over "
            "corpora): " + ", ".join(ranges) + f" (implementation check: eq. 8 rebuilds the traced states of {passed} "
            f"of {len(ident)} model layers to {ident['value'].max():.0e}, as algebra says it must)")  # fmt: skip


def notes(df: pd.DataFrame) -> list[str]:
    return [
        "Memory span = -1 / mean_t ln f_t per cell (the geometric-mean timescale; for a constant f it is the number of "
        "steps over which a stored value decays by e). The table also has -1 / ln mean f (span_arithmetic), which "
        "overestimates it when f varies. For the GRU f is 1 - z, the weight on the old state.",
        "Retention of a context character = the sum over the next `lags` steps of its weight's root-mean-square over "
        f"cells; characters seen fewer than {MIN_OCCURRENCES} times in the excerpt are left out of the correlation. "
        "The paper's claim is about words in a word-level model; this is its character-level transposition.",
        f"The identity is checked in windows of `window` steps, each starting from the traced state before it; "
        f"float32 traces limit the error to about 1e-6 times the state's size. {LABELS.get('lstm')} - GATES and the "
        "RNN have no memory cell and are not analysed.",
        "Heatmaps show the lowest seed of each model and layer 1; every seed's spans and checks are in the table.",
    ]


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
