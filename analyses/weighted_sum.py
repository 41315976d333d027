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

Below: compute (the tidy table, one row per observation), per_layer (the appendix: per model and layer), summary
(per corpus and architecture, the counts every finding states), the findings; the figure (the heatmaps of the
headline LSTM and of - S-RNN - OUT, and every cell's span per architecture) is analyses/weighted_sum_plot.py.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import torch
from scipy import stats

from charlm import archs
from charlm.model import ARCH_LABELS, GATED_ARCHS, GATELESS_ARCHS, GRU_ARCHS, memory_weights
from corpora.errors import UserError, run_cli

from .base import Analysis, Claim, Finding, Result, majority
from .common import analysis_main, chosen_archs, ordered_models, whole
from .context import Context, Needs

TITLE = "The memory cell as a weighted sum"
QUESTION = "Does the cell compute Levy et al.'s element-wise weighted sum, which context does it weigh, and how long?"
PAPER_SOURCE = "Levy et al. (2018), eq. 8 and appendix A (Table 5); review version footnote 1 (the GRU)"

LABELS = ARCH_LABELS

TOLERANCE = 1e-4  # the identity "holds" when the max abs error is below this times max(1, max |state|) (float32)
DIAGONAL_ALWAYS = 0.99  # "always the largest": the diagonal wins at 99 % of steps at least
BPTT = 100  # Karpathy et al.'s unroll: spans beyond it reach past what truncated backprop sees
MIN_OCCURRENCES = 5  # characters rarer than this in the excerpt are left out of the frequency correlation
RARE_P = 0.05  # rarer characters are "remembered longer" when Spearman's rho is negative at this significance
KEEP_RESOLVED = 1.0 - 2.0**-24  # float32 cannot tell a keep gate above this from 1: spans cap near 1.7e7
SPAN_CAP = -1.0 / np.log(KEEP_RESOLVED)  # the span of a keep gate of 1 (the proto-LSTM's c = c + ...): "never forgets"

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
NEEDS = Needs(predictions=False)  # reads checkpoints (traces, gradients, samples), not Predictions
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
    """(write, keep, content, state) of a traced layer, float64: i, f, ctilde, c (LSTM family); z, 1 - z, htilde, h
    (the GRUs, minGRU); minLSTM's normalised i', f', htilde, h. Read off the record: its weights, memory, content."""
    record = archs.REGISTRY[arch]
    get = lambda name: trace[f"layers.{layer}.{name}"].astype(np.float64)  # noqa: E731
    content = get("ctilde" if "ctilde" in record.internals else "htilde")
    if record.weights == "z":
        z = get("z")
        return z, 1.0 - z, content, get(record.memory)
    return get("i"), get("f"), content, get(record.memory)


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
            c: whole(row[c]) for c in ("size", "layers", "seed", "chars_trained")
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


# ------------------------------------------------------------------------------------------ the paper's claims


def _ordered(df: pd.DataFrame) -> pd.DataFrame:
    return ordered_models(df, GATED_ARCHS)


def _retention_by_char(g: pd.DataFrame) -> pd.DataFrame:
    """Per character of one model's layer: training count, occurrences in the excerpt, retention (mean over the
    rows given: seeds, when a caller pools them)."""
    r = g[g["measure"] == "retention"]
    per = r.groupby("char").agg(count=("count", "first"), seen=("steps", "mean"), retention=("value", "mean"))
    return per[per["seen"] >= MIN_OCCURRENCES].sort_values("retention")


def per_layer(df: pd.DataFrame) -> pd.DataFrame:
    """One row per model (seeds apart) and layer: the identity's error and its verdict, the GRU's sum, the diagonal's
    share, the rare-character correlation with the characters held longest and shortest, the memory spans."""
    rows = []
    keys = ["corpus", "arch", "model", "shape", "model_id", "seed", "layer"]
    for (corpus, arch, model, shape, model_id, seed, layer), g in _ordered(df).groupby(keys, sort=False):
        value = lambda name, g=g: g.loc[g["measure"] == name, "value"]  # noqa: E731
        error, scale = float(value("identity_error").max()), float(value("state_max").max())
        sums = value("sum_error")
        per = _retention_by_char(g)
        rho, p = stats.spearmanr(per["count"], per["retention"]) if len(per) >= 3 else (np.nan, np.nan)
        spans = value("span")
        rows.append({
            "corpus": corpus, "arch": arch, "model": model, "shape": shape, "seed": int(seed), "layer": int(layer),
            "identity_error": error, "state_max": scale, "identity_holds": bool(error <= TOLERANCE * max(1.0, scale)),
            "sum_error": float(sums.max()) if len(sums) else np.nan,
            "sum_holds": bool(sums.max() <= TOLERANCE) if len(sums) else None,
            "diagonal": float(value("diagonal").mean()), "rho": float(rho), "p": float(p), "characters": len(per),
            "rare_longer": bool(rho < 0 and p < RARE_P) if len(per) >= 3 else None,
            "held_longest": " ".join(per.index[::-1][:4]), "held_shortest": " ".join(per.index[:4]),
            "span_median": float(spans.median()), "span_p90": float(spans.quantile(0.9)),
            "span_max": float(spans.max()), "beyond_bptt": float((spans > BPTT).mean()), "model_id": model_id,
        })  # fmt: skip
    return pd.DataFrame(rows)


def summary(layers: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """Per corpus and architecture (then arch "all": the corpus's every model), the counts the findings state: model
    layers whose identity holds, the largest error, the GRU's sums, the diagonal's share (smallest, largest, layers
    at DIAGONAL_ALWAYS or more), the rare-character correlation (layers where it holds, rho's range), and the memory
    spans of every cell (median, 90th percentile, share beyond BPTT), with the thresholds."""
    rows = []
    spans = df[df["measure"] == "span"]
    for corpus, sub in layers.groupby("corpus", sort=True):
        groups = [(a, g) for a, g in sub.groupby("arch", sort=False)] + [("all", sub)]
        for arch, g in groups:
            cells = spans[(spans["corpus"] == corpus) & ((spans["arch"] == arch) if arch != "all" else True)]["value"]
            sums, rare = g[g["sum_holds"].notna()], g[g["rare_longer"].notna()]
            rows.append({
                "corpus": corpus, "arch": arch, "label": LABELS.get(arch, "every model"),
                "models": g["model_id"].nunique(), "layers": len(g), "identity_passed": int(g["identity_holds"].sum()),
                "identity_max_error": g["identity_error"].max(), "state_max": g["state_max"].max(),
                "gru_layers": len(sums), "sum_passed": int(sums["sum_holds"].astype(bool).sum()),
                "sum_max_error": sums["sum_error"].max() if len(sums) else np.nan,
                "diagonal_min": g["diagonal"].min(), "diagonal_max": g["diagonal"].max(),
                "diagonal_always": int((g["diagonal"] >= DIAGONAL_ALWAYS).sum()),
                "rare_of": len(rare), "rare_found": int(rare["rare_longer"].astype(bool).sum()),
                "rho_min": rare["rho"].min() if len(rare) else np.nan,
                "rho_max": rare["rho"].max() if len(rare) else np.nan,
                "span_median": cells.median(), "span_p90": cells.quantile(0.9), "beyond_bptt": (cells > BPTT).mean(),
                "tolerance": TOLERANCE, "always": DIAGONAL_ALWAYS, "p_max": RARE_P, "bptt": BPTT,
            })  # fmt: skip
    return pd.DataFrame(rows)


verdict = majority  # all hold: reproduced; at least half: partly; fewer: not reproduced


def findings(table: pd.DataFrame) -> list[Finding]:
    """Per corpus: the identity (an implementation check: every layer or it is a bug), the GRU's weighted average,
    the diagonal, the rare characters (Levy et al.'s claims), then the memory spans per architecture (new)."""
    out = []
    for corpus, sub in table.groupby("corpus", sort=True):
        every = sub[sub["arch"] == "all"].iloc[0]
        v = {k: every[k] for k in every.index if not (isinstance(every[k], float) and np.isnan(every[k]))}
        identity = "reproduced" if every["identity_passed"] == every["layers"] else "not reproduced"  # algebra
        out.append(Finding(
            "{corpus}: eq 8 rebuilds the traced state to within {tolerance:g} of its scale in {identity_passed} of "
            "{layers} layers of {models} models (largest error {identity_max_error:.6f})", v, identity, "ws-eq8",
            corpus))  # fmt: skip
        if every["gru_layers"]:
            out.append(Finding(
                "{corpus}: the GRU's weights and its carried term sum to one within {tolerance:g} in {sum_passed} of "
                "{gru_layers} GRU layers", v,
                "reproduced" if every["sum_passed"] == every["gru_layers"] else "not reproduced", "ws-gru-average",
                corpus))  # fmt: skip
        same = f"{every['diagonal_min']:.1%}" == f"{every['diagonal_max']:.1%}"  # one number, not "100.0% to 100.0%"
        out.append(Finding(
            "{corpus}: the current character's weight is its column's largest at "
            + ("{diagonal_min:.1%} of steps in each of" if same
               else "{diagonal_min:.1%} to {diagonal_max:.1%} of steps across")
            + " {layers} model layers, against the paper's 'always'", v,
            verdict(int(every["diagonal_always"]), int(every["layers"])), "ws-diagonal", corpus))  # fmt: skip
        if every["rare_of"]:
            out.append(Finding(
                "{corpus}: characters rarer in training are held longer (negative Spearman rho, p < {p_max}) in "
                "{rare_found} of {rare_of} model layers (rho {rho_min:+.2f} to {rho_max:+.2f})", v,
                verdict(int(every["rare_found"]), int(every["rare_of"])), "ws-rare", corpus))  # fmt: skip
        else:
            out.append(Finding("{corpus}: too few characters recur in the excerpt to correlate", v, "untested",
                               "ws-rare", corpus))  # fmt: skip
        archs = sub[sub["arch"] != "all"].set_index("arch")
        forever = archs["span_median"] >= SPAN_CAP * (1 - 1e-6)  # a keep gate of 1: no span to give, only "never"
        finite = archs[~forever] if (~forever).any() else archs
        longest = finite["span_median"].idxmax()
        w = {**v, "longest": archs.loc[longest, "label"], "longest_span": archs.loc[longest, "span_median"],
             "forever": ", ".join(archs.loc[forever & (archs.index != longest), "label"])}  # fmt: skip
        named = {
            "lstm": "lstm",
            "gru": "gru-paper" if "gru-paper" in archs.index else "gru",
            "mingru": "mingru",
            "minlstm": "minlstm",
        }  # the LSTM, the GRU and Feng et al.'s minimal RNNs (issue 39: their reach)
        for name, arch in named.items():
            if arch in archs.index:
                w[name] = archs.loc[arch, "span_median"]
        parts = [p for p in named if p in w]
        units = {"lstm": "LSTMs", "gru": "GRUs", "mingru": "minGRUs", "minlstm": "minLSTMs"}
        said = ", ".join(
            f"{{{p}:.2f}}" + (" characters" if k == 0 else "") + f" ({units[p]})" for k, p in enumerate(parts)
        )
        out.append(Finding(
            "{corpus}: median memory span per cell " + (said + ", " if said else "") + "longest {longest_span:.2f} "
            "({longest})" + ("; the {forever} never forgets (a keep gate float32 cannot tell from one)"
                             if w["forever"] else "")
            + "; {beyond_bptt:.1%} of cells reach beyond {bptt} characters", w, corpus=corpus))  # fmt: skip
    return out


# ------------------------------------------------------------------------------------------ the analysis


class WeightedSum(Analysis):
    name = "weighted_sum"
    title = TITLE
    question = QUESTION
    source = PAPER_SOURCE
    settings = SETTINGS
    needs = NEEDS
    claims = (
        Claim("ws-eq8", "Levy et al. (2018) eq 8",
              "the memory cell is an element-wise weighted sum of the content vectors, c_t = sum_j w_j^t ctilde_j",
              "an identity of the recurrence (it checks our traces and code, not training)"),
        Claim("ws-gru-average", "Levy et al. (2018), review version, footnote 1",
              "the GRU computes weighted averages, since its gates are coupled", "an identity"),
        Claim("ws-diagonal", "Levy et al. (2018) appendix A, Table 5", "the weights on the diagonal are always the "
              "largest", "always"),
        Claim("ws-rare", "Levy et al. (2018) appendix A", "frequent words are quickly forgotten, infrequent ones "
              "remembered over very long distances", "words only (a word-level model)"),
    )  # fmt: skip
    shows = (
        "Levy et al.'s appendix heatmap, the weight ||w_j^t|| of each context position j (rows, the carried state on "
        "top) in the cell at position t (columns) over one sentence, for the headline LSTM and the ablation whose "
        "content reads its input alone; below, every cell's memory span per architecture."
    )
    deviations = (
        "Eq 8 and the GRU's weighted average are algebra: rebuilding each traced state from its own gates checks our "
        "traces and code, not a property of trained models.",
        "Reading w_j^t as the weight on the character at j is literal only in the first layer of the ablations whose "
        "content reads the input alone (- S-RNN, - S-RNN - OUT, - S-RNN - HIDDEN); in the LSTM and the GRU the "
        "content at j reads the previous state, a summary of the whole prefix.",
        "The appendix's claim on frequent and rare words is tested on characters, by their training-split counts.",
        "Heatmaps use a log colour scale (the paper's darkness is linear) and the root-mean-square weight "
        "||w||_2 / sqrt(H), so models of different widths share a scale.",
        "Memory span is -1 / mean ln f per cell (for a constant f, the steps over which a stored value decays by e); "
        "the paper gives no span.",
    )

    def compute(self, ctx: Context) -> Result:
        df = compute(ctx)
        table = summary(per_layer(df), df)
        return Result(df, findings(table), tables={"summary": table})

    def plot(self, result: Result):
        return plot(result.table)

    def summary_table(self, result: Result) -> pd.DataFrame:
        """Per corpus and architecture: the identity, the diagonal, the rare characters and the spans."""
        t = result.tables["summary"]
        t = t[t["arch"] != "all"]
        return pd.DataFrame({
            "corpus": t["corpus"], "model type": t["label"], "models (layers)": [
                f"{m} ({n})" for m, n in zip(t["models"], t["layers"])],
            "eq 8 holds": [f"{a} of {b}" for a, b in zip(t["identity_passed"], t["layers"])],
            "largest error": t["identity_max_error"].map(lambda e: f"{e:.1e}"),
            "diagonal largest (% of steps)": [f"{100 * a:.1f}-{100 * b:.1f}" for a, b in
                                              zip(t["diagonal_min"], t["diagonal_max"])],
            "rare held longer": [f"{a} of {b}" if b else "—" for a, b in zip(t["rare_found"], t["rare_of"])],
            "median span (chars)": t["span_median"].round(2), "90th percentile": t["span_p90"].round(1),
            f"cells beyond {BPTT}": t["beyond_bptt"].map(lambda x: f"{x:.1%}"),
        })  # fmt: skip

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        layers = per_layer(result.table)
        return {"every model and layer: the identity, the diagonal, rare characters and spans": layers.drop(
            columns=["arch", "shape", "model_id", "characters"])}  # fmt: skip


def plot(df: pd.DataFrame):
    from .weighted_sum_plot import plot as draw

    return draw(df)


ANALYSIS = WeightedSum()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
