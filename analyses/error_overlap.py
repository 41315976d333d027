"""Which test characters does each model get wrong, and does the LSTM share its errors with the baselines?

Karpathy et al. (2016) sec 4.3, "Error analysis", and Fig 4 (left): "we define a character to be an
error if the probability assigned to it by a model on the previous time step is below 0.5", and draw
the overlap of the test-set errors of their best 3-layer LSTM, the best n-NN and the best n-gram as a
Venn diagram ("low area is good"). Their reading: "the majority of errors are shared by all three
models, but each model also has its own unique errors"; the LSTM's circle is the smallest.

Here every error mask comes from the exact p(correct) columns of the Predictions (no storage error).
The best n-NN and the best n-gram are those of lowest test cross-entropy among the orders built (the
paper picks them from its Table 2, a test-set table, the same way). Every recurrent configuration is
crossed with the same two baselines, not just the LSTM; a configuration is represented by its lowest
seed (seed 0 in every profile): seed siblings share a `group_id` and differ only in initialisation.
The headline model of the Venn diagram is the headline LSTM of the suite's one rule (analyses.common.headline_id:
the largest budget row, the deepest, the lowest seed; the paper's "best 3-layer LSTM"); the findings name it.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.patches import Circle

from charlm.predictions import Predictions
from corpora.errors import run_cli

from .base import Analysis, Claim, Finding, Result, majority
from .common import analysis_main, headline_id, lowest_seeds, report_order, short_label, style
from .context import Context, MissingInput, Needs

TITLE = "Errors shared by the LSTM and the finite-context baselines"
QUESTION = "Does the LSTM make fewer errors than the best n-NN and n-gram, and are its errors theirs?"
PAPER_SOURCE = (
    "Karpathy et al. (2016), sec 4.3 and Fig 4 left (qualitative); error rate from sec 4.4; best baselines "
    "from Table 2; the 3-layer LSTM of 512 from Fig 1 left (test cross-entropy, nats/char)"
)
NEEDS = Needs()  # the best n-NN and n-gram among the orders the profile builds ([baselines] ngram_n, nnn_n)
SETTINGS = {
    "split": "test",  # split scored
    "threshold": 0.5,  # an error is p(correct) below this (sec 4.3: 0.5)
}
REGIONS = {  # (model errs, n-NN errs, n-gram errs) -> name; "model" is the recurrent net of the row
    (True, True, True): "all three",
    (True, False, True): "model & n-gram",
    (True, True, False): "model & n-NN",
    (True, False, False): "model only",
    (False, True, True): "n-NN & n-gram",
    (False, True, False): "n-NN only",
    (False, False, True): "n-gram only",
    (False, False, False): "none",
}
# The paper's side. Fig 4 is from its 3-layer LSTM of 512 (Fig 1 left); sec 4.4 counts the errors of its best
# War and Peace LSTM: 140K of 330K test characters. Best baselines from Table 2 (n = characters of context).
PAPER = {
    "warpeace": {"lstm_ce": 1.082, "lstm_error_rate": 140 / 330, "nnn_n": 6, "nnn_ce": 1.321, "ngram_n": 7,
                 "ngram_ce": 1.194},
    "linux": {"lstm_ce": 0.846, "lstm_error_rate": None, "nnn_n": 5, "nnn_ce": 1.256, "ngram_n": 20,
              "ngram_ce": 0.889},
}  # fmt: skip
COLORS = ("#d6604d", "#1b9e77", "#2166ac")  # model, n-NN, n-gram: the same in the Venn diagram and the bars
PAPER_CLAIM = "most errors are shared by all three models; each also has unique errors; the LSTM's set is smallest"


def _command(row: pd.Series, family: str) -> str:
    tool = "charlm.nnn --n 1,2,3,4,5,6" if family == "nnn" else "charlm.ngram --n 1,2,3,4,5,6,7,8,9,20"
    splits = "" if row["corpus_splits"] == "contiguous" else f" --splits {row['corpus_splits']}"
    return f"python -m {tool} --corpus {row['corpus_source']}{splits}"


def best_baseline(ctx: Context, family: str, corpus_key: str, split: str) -> tuple[pd.Series, Predictions, float]:
    """The baseline of `family` ("ngram" or "nnn") with the lowest test cross-entropy on a corpus, its Predictions
    and that cross-entropy (each baseline read once: the Context keeps only a few Predictions)."""
    rows = ctx.index[(ctx.index["family"] == family) & (ctx.index["corpus_key"] == corpus_key)]
    if rows.empty:
        anchor = ctx.index[ctx.index["corpus_key"] == corpus_key].iloc[0]
        what = "n-NN" if family == "nnn" else "KenLM n-gram"
        raise MissingInput(
            f"error_overlap needs {what} baselines on corpus '{anchor['corpus']}': build them with "
            f"`{_command(anchor, family)}`"
        )
    best = None
    for _, row in rows.iterrows():
        preds = ctx.predictions(row, split)
        ce = float(preds.nll.mean())
        if best is None or ce < best[2]:  # the first of equal ones, in index order
            best = (row, preds, ce)
    return best


def compute(ctx: Context) -> pd.DataFrame:
    """One row per (corpus, model, Venn region): how many test characters fall in it, and their fraction."""
    split, threshold = ctx.settings["split"], float(ctx.settings["threshold"])
    neural = ctx.models()
    rows = []
    for key, models in neural.groupby("corpus_key"):
        nnn, nnn_preds, nnn_ce = best_baseline(ctx, "nnn", key, split)
        ngram, ngram_preds, ngram_ce = best_baseline(ctx, "ngram", key, split)
        nnn_err = nnn_preds.p_correct < threshold  # (T,)
        ngram_err = ngram_preds.p_correct < threshold  # (T,)
        del nnn_preds, ngram_preds  # only their error masks are needed
        per_model = []
        for _, model in lowest_seeds(models).iterrows():
            preds = ctx.predictions(model, split)
            model_err = preds.p_correct < threshold  # (T,)
            code = 4 * model_err + 2 * nnn_err + ngram_err  # which of the three err at each position
            counts = np.bincount(code, minlength=8)
            per_model.append((model, float(preds.nll.mean()), counts))
        best = headline_id(lowest_seeds(models))  # the one headline rule (charlm.plan)
        for model, ce, counts in per_model:
            total = int(counts.sum())
            for (m, n, g), region in REGIONS.items():
                count = int(counts[4 * m + 2 * n + g])
                rows.append({
                    "corpus": model["corpus"], "model": short_label(model), "arch": model["arch"],
                    "layers": int(model["layers"]), "size": int(model["size"]), "budget": model["budget"],
                    "seed": int(model["seed"]), "headline": model["model_id"] == best, "model_ce": ce,
                    "nnn_n": int(nnn["n"]), "nnn_ce": nnn_ce, "ngram_n": int(ngram["n"]), "ngram_ce": ngram_ce,
                    "region": region, "model_err": m, "nnn_err": n, "ngram_err": g, "count": count,
                    "positions": total, "fraction": count / total, "model_id": model["model_id"],
                    "group_id": model["group_id"],
                })  # fmt: skip
    return report_order(pd.DataFrame(rows), "model").reset_index(drop=True)


# ------------------------------------------------------------------------------------- the numbers a reader wants


def per_model(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (corpus, model): each one's error rate, and how the errors of the three split up."""

    def rates(sub: pd.DataFrame) -> pd.Series:
        c = sub.set_index("region")["count"]
        total = int(sub["positions"].iloc[0])
        model = c[[r for (m, _, _), r in REGIONS.items() if m]].sum()
        union = total - c["none"]
        return pd.Series({
            "model_errors": model / total,
            "nnn_errors": c[[r for (_, n, _), r in REGIONS.items() if n]].sum() / total,
            "ngram_errors": c[[r for (_, _, g), r in REGIONS.items() if g]].sum() / total,
            "shared_by_all_of_union": c["all three"] / union if union else np.nan,
            "shared_by_all_of_model": c["all three"] / model if model else np.nan,
            "model_only_of_model": c["model only"] / model if model else np.nan,
            "avoided_of_baselines_shared": c["n-NN & n-gram"] / (c["n-NN & n-gram"] + c["all three"])
            if c["n-NN & n-gram"] + c["all three"] else np.nan,
        })  # fmt: skip

    keys = ["corpus", "model", "arch", "headline", "model_ce", "nnn_n", "nnn_ce", "ngram_n", "ngram_ce", "positions"]
    out = df.groupby(keys, sort=False)[["region", "count", "positions"]].apply(rates).reset_index()
    return out


def paper_table() -> pd.DataFrame:
    return pd.DataFrame([{"corpus": c, **v, "claim": PAPER_CLAIM} for c, v in PAPER.items()])


# ------------------------------------------------------------------------------------- figure


def _lens(r1: float, r2: float, d: float) -> float:
    """Area of the intersection of two circles of radii r1, r2 (either may be 0) whose centres are d apart."""
    if d >= r1 + r2:  # apart or touching (an empty circle shares nothing)
        return 0.0
    # one inside the other (equal circles: d = 0); within rounding of tangency too, where the formula below cancels
    # (a centre placed 1 ulp past |r1 - r2| lost 0.0025 of 7,213; the true deficit there is below 1e-12)
    if d <= abs(r1 - r2) + 1e-12 * (r1 + r2):
        return np.pi * min(r1, r2) ** 2
    # here d > 0 and both radii are positive; rounding must not take a cosine past +-1, the kite's area below 0,
    # nor (near touching, where the terms cancel) the lens outside [0, the smaller circle]
    c1 = np.clip((d**2 + r1**2 - r2**2) / (2 * d * r1), -1.0, 1.0)
    c2 = np.clip((d**2 + r2**2 - r1**2) / (2 * d * r2), -1.0, 1.0)
    kite = (-d + r1 + r2) * (d + r1 - r2) * (d - r1 + r2) * (d + r1 + r2)
    lens = r1**2 * np.arccos(c1) + r2**2 * np.arccos(c2) - 0.5 * np.sqrt(max(kite, 0.0))
    return float(np.clip(lens, 0.0, np.pi * min(r1, r2) ** 2))


def _distance_for_overlap(r1: float, r2: float, area: float) -> float:
    """Centre distance at which two circles overlap by `area`, clamped to what they can share.

    The lens shrinks steadily as the centres part, from the smaller circle's whole area (nested, d <= |r1 - r2|)
    to nothing (apart, d >= r1 + r2), so bisection on that interval finds the distance for any area: a subset
    (area = the smaller set, which rounding can put a hair above the smaller circle), equal sets, disjoint sets
    and empty ones included. A root finder that needs a sign change at both ends fails on the subset.
    """
    low, high = abs(r1 - r2), r1 + r2
    if area <= 0:
        return high
    if area >= np.pi * min(r1, r2) ** 2:
        return low
    for _ in range(200):  # each step halves [low, high]; it stops changing at float resolution
        mid = 0.5 * (low + high)
        if mid in (low, high):
            break
        if _lens(r1, r2, mid) > area:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


def venn_layout(sizes: tuple[float, float, float], pairs: tuple[float, float, float]):
    """Centres and radii of three circles whose areas are `sizes` and pairwise overlaps `pairs` (01, 02, 12).

    Areas and the overlaps of circle 0 with 1 and with 2 are exact; the overlap of 1 and 2 is exact when the three
    distances this asks for form a triangle (otherwise circle 2 goes on the line through 0 and 1, as near as it
    gets), and the triple overlap follows from the placement (approximate), as in every area-proportional
    three-set Venn diagram with circles. Empty sets have radius 0; equal sets coincide; a subset lies inside.
    """
    radii = np.sqrt(np.asarray(sizes, dtype=float) / np.pi)
    d01 = _distance_for_overlap(radii[0], radii[1], pairs[0])
    d02 = _distance_for_overlap(radii[0], radii[2], pairs[1])
    d12 = _distance_for_overlap(radii[1], radii[2], pairs[2])
    cos = np.clip((d01**2 + d02**2 - d12**2) / (2 * d01 * d02), -1, 1) if d01 > 0 and d02 > 0 else 1.0
    centres = np.array([[0.0, 0.0], [d01, 0.0], [d02 * cos, -d02 * np.sqrt(1 - cos**2)]])
    return centres - centres.mean(axis=0), radii


def _region_anchors(centres: np.ndarray, radii: np.ndarray, grid: int = 300) -> dict[tuple[bool, ...], np.ndarray]:
    """A point well inside each region (the grid point farthest from every circle's edge)."""
    low, high = (centres - radii[:, None]).min(0), (centres + radii[:, None]).max(0)
    xs, ys = np.meshgrid(np.linspace(low[0], high[0], grid), np.linspace(low[1], high[1], grid))
    points = np.stack([xs.ravel(), ys.ravel()], 1)  # (P, 2)
    dist = np.linalg.norm(points[:, None, :] - centres[None], axis=2)  # (P, 3)
    inside = dist < radii
    margin = np.abs(dist - radii).min(1)
    anchors = {}
    for key in REGIONS:
        mask = (inside == np.array(key)).all(1)
        if any(key) and mask.any():
            anchors[key] = points[np.flatnonzero(mask)[margin[mask].argmax()]]
    return anchors


def _draw_venn(ax, sub: pd.DataFrame, threshold: float = 0.5) -> None:
    counts = {(r["model_err"], r["nnn_err"], r["ngram_err"]): int(r["count"]) for _, r in sub.iterrows()}
    total = int(sub["positions"].iloc[0])
    member = [lambda k, j=j: k[j] for j in range(3)]
    sizes = tuple(sum(c for k, c in counts.items() if member[j](k)) for j in range(3))
    pairs = tuple(sum(c for k, c in counts.items() if k[a] and k[b]) for a, b in ((0, 1), (0, 2), (1, 2)))
    centres, radii = venn_layout(sizes, pairs)
    first = sub.iloc[0]
    names = [
        f"{first['model']}\n{sizes[0] / total:.0%} errors",
        f"{int(first['nnn_n'])}-NN\n{sizes[1] / total:.0%} errors",
        f"n-gram n={int(first['ngram_n'])}\n{sizes[2] / total:.0%} errors",
    ]
    pad = 0.06 * radii.max()
    for j, (centre, radius) in enumerate(zip(centres, radii)):
        ax.add_patch(Circle(centre, radius, facecolor=COLORS[j], alpha=0.25, edgecolor=COLORS[j], lw=2))
        dx, dy = centre / (np.linalg.norm(centre) or 1.0)  # away from the diagram's middle
        ax.text(*(centre + np.array([dx, dy]) * (radius + pad)), names[j], color=COLORS[j], fontsize=7.5,
                fontweight="bold", ha="left" if dx > 0.3 else "right" if dx < -0.3 else "center",
                va="bottom" if dy > 0.3 else "top" if dy < -0.3 else "center")  # fmt: skip
    for key, point in _region_anchors(centres, radii).items():
        ax.text(*point, f"{counts[key] / total:.1%}", ha="center", va="center", fontsize=7.5)
    reach = (np.abs(centres) + radii[:, None]).max() * 1.6 or 1.0  # no errors at all: empty circles, a unit frame
    ax.set_xlim(-reach, reach)
    ax.set_ylim(-reach, reach)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(
        f"{first['corpus']}: test errors (p(correct) < {threshold:g})\nof {total:,} characters; areas to scale",
        fontsize=8,
    )


def plot(df: pd.DataFrame, threshold: float = 0.5):
    """Per corpus, Fig 4 left's Venn diagram of the headline model (left) and every configuration's errors split by
    who else errs there (right), one row per corpus."""
    style()
    corpora_ = list(dict.fromkeys(df["corpus"]))
    n_models = int(df.groupby("corpus")["model"].nunique().max())
    height = min(9.0, max(3.2, 0.16 * n_models + 1.6) * len(corpora_) + 0.5)
    fig, axes = plt.subplots(len(corpora_), 2, figsize=(7.5, height), squeeze=False,
                             gridspec_kw={"width_ratios": [1, 1.45]})  # fmt: skip
    segments = [("all three", "#4d4d4d"), ("model & n-gram", COLORS[2]), ("model & n-NN", COLORS[1]),
                ("model only", COLORS[0])]  # fmt: skip
    for (ax_venn, ax_bar), corpus in zip(axes, corpora_):
        sub = df[df["corpus"] == corpus]
        _draw_venn(ax_venn, sub[sub["headline"]], threshold)
        models = list(dict.fromkeys(sub["model"]))
        errors = sub[sub["model_err"]].pivot_table(index="model", columns="region", values="fraction", sort=False)
        errors = errors.reindex(index=models, columns=[r for r, _ in segments]).fillna(0.0)
        left = np.zeros(len(models))
        for region, color in segments:
            ax_bar.barh(models, errors[region], left=left, color=color, height=0.8, label=f"error of {region}")
            left += errors[region].to_numpy()
        view = per_model(sub).iloc[0]
        for rate, name, color, ls in ((view["ngram_errors"], "best n-gram", COLORS[2], "--"),
                                      (view["nnn_errors"], "best n-NN", COLORS[1], ":")):  # fmt: skip
            ax_bar.axvline(rate, color=color, ls=ls, lw=1.3, label=f"{name}: all its errors")
        ax_bar.invert_yaxis()
        ax_bar.tick_params(axis="y", labelsize=7)
        ax_bar.tick_params(axis="x", labelsize=7)
        headline = sub.loc[sub["headline"], "model"].iloc[0]
        for label in ax_bar.get_yticklabels():
            label.set_fontweight("bold" if label.get_text() == headline else "normal")
        ax_bar.set_xlabel("fraction of test characters the model gets wrong", fontsize=8)
        ax_bar.set_title(f"{corpus}: every configuration (bold: the Venn's)", fontsize=8)
    handles, labels = axes[0, 1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


# ------------------------------------------------------------------------------------- findings

SHARED_MAJORITY = 0.5  # "the majority of errors are shared by all three" (sec 4.3): more than half


def summary(df: pd.DataFrame, threshold: float) -> pd.DataFrame:
    """One row per corpus: the headline model's errors and the Venn regions as shares, the best baselines beside
    Table 2's, and the spread of error rates over the configurations. Every number a finding states is here."""
    rows = []
    view = per_model(df)
    for corpus, sub in df.groupby("corpus", sort=False):
        head = sub[sub["headline"]]
        c = head.set_index("region")["count"]
        total = int(head["positions"].iloc[0])
        union = total - int(c["none"])
        h = view[(view["corpus"] == corpus) & view["headline"]].iloc[0]
        models = view[view["corpus"] == corpus]
        fewest, most = models.loc[models["model_errors"].idxmin()], models.loc[models["model_errors"].idxmax()]
        first = head.iloc[0]
        paper = PAPER.get(corpus, {})
        rows.append({
            "corpus": corpus, "model": h["model"], "arch": h["arch"], "layers": int(first["layers"]),
            "size": int(first["size"]), "model_ce": h["model_ce"], "positions": total, "threshold": threshold,
            "model_rate": h["model_errors"], "nnn_n": int(h["nnn_n"]), "nnn_ce": h["nnn_ce"],
            "nnn_rate": h["nnn_errors"], "ngram_n": int(h["ngram_n"]), "ngram_ce": h["ngram_ce"],
            "ngram_rate": h["ngram_errors"], "union": union,
            "shared_of_union": c["all three"] / union if union else np.nan,
            "shared_of_model": h["shared_by_all_of_model"],
            "model_only": c["model only"] / union if union else np.nan,
            "nnn_only": c["n-NN only"] / union if union else np.nan,
            "ngram_only": c["n-gram only"] / union if union else np.nan,
            "unique_sets": int((c[["model only", "n-NN only", "n-gram only"]] > 0).sum()),
            "avoided": h["avoided_of_baselines_shared"], "configs": len(models),
            "min_rate": fewest["model_errors"], "min_model": fewest["model"], "max_rate": most["model_errors"],
            "max_model": most["model"], "majority": SHARED_MAJORITY,
            "paper_nnn_n": paper.get("nnn_n"), "paper_nnn_ce": paper.get("nnn_ce"),
            "paper_ngram_n": paper.get("ngram_n"), "paper_ngram_ce": paper.get("ngram_ce"),
        })  # fmt: skip
    return pd.DataFrame(rows)


def findings(summ: pd.DataFrame) -> list[Finding]:
    """Per corpus: Fig 4 left's three readings (the claims), then what the paper did not ask (new)."""
    out = []
    for _, s in summ.iterrows():
        v = {k: x for k, x in s.items() if x is not None and not (isinstance(x, float) and np.isnan(x))}
        corpus = s["corpus"]
        if s["union"] == 0:  # no model errs anywhere: nothing to overlap
            for claim in ("eo-fig4-shared", "eo-fig4-unique", "eo-fig4-smallest"):
                out.append(Finding("{corpus}: none of the three errs on any of the {positions:,} test characters", v,
                                   "untested", claim, corpus))  # fmt: skip
            continue
        # shared: reproduced when all three share more than half of the union of errors; partly when they share
        # more than half of the headline model's errors only; not reproduced otherwise
        shared = (
            "reproduced" if s["shared_of_union"] > SHARED_MAJORITY
            else "partly" if s["shared_of_model"] > SHARED_MAJORITY else "not reproduced"
        )  # fmt: skip
        of_model = " ({shared_of_model:.1%} of the {model}'s errors)" if "shared_of_model" in v else ""
        out.append(Finding(
            "{corpus}: all three err on {shared_of_union:.1%} of the characters any of them gets wrong" + of_model
            + ", against the paper's majority", v, shared, "eo-fig4-shared", corpus))  # fmt: skip
        # unique: reproduced when each of the three has errors of its own; partly when two do
        out.append(Finding(
            "{corpus}: errors of one model alone, as shares of all errors: {model} {model_only:.1%}, "
            "{nnn_n}-NN {nnn_only:.1%}, n-gram {ngram_only:.1%}; the paper: each has its own",
            v, majority(int(s["unique_sets"]), 3), "eo-fig4-unique", corpus))  # fmt: skip
        # smallest: reproduced when the headline model errs less than both baselines; partly when less than one
        beats = int(s["model_rate"] < s["nnn_rate"]) + int(s["model_rate"] < s["ngram_rate"])
        out.append(Finding(
            "{corpus}: error rate {model} {model_rate:.1%}, best n-NN ({nnn_n}-NN) {nnn_rate:.1%}, best n-gram "
            "(n={ngram_n}) {ngram_rate:.1%}, against the paper's smallest LSTM set",
            v, majority(beats, 2), "eo-fig4-smallest", corpus))  # fmt: skip
        if s["model_rate"] > s["ngram_rate"]:
            stronger = s["model_ce"] < s["ngram_ce"]
            out.append(Finding(
                "{corpus}: the {model} makes more errors than the n-gram yet has the lower cross-entropy "
                "({model_ce:.3f} against {ngram_ce:.3f} nats/char): an error count ignores how far p falls below "
                "{threshold}" if stronger else
                "{corpus}: the {model} is behind the n-gram in cross-entropy too ({model_ce:.3f} against "
                "{ngram_ce:.3f} nats/char)", v, corpus=corpus))  # fmt: skip
        if s["configs"] > 1:
            out.append(Finding(
                "{corpus}: over {configs} configurations the error rate runs from {min_rate:.1%} ({min_model}) to "
                "{max_rate:.1%} ({max_model})", v, corpus=corpus))  # fmt: skip
        if "paper_nnn_n" in v:
            out.append(Finding(
                "{corpus}: best baselines by test cross-entropy: {nnn_n}-NN ({nnn_ce:.3f}) and n={ngram_n} "
                "({ngram_ce:.3f}); the paper's: {paper_nnn_n}-NN ({paper_nnn_ce:.3f}) and n={paper_ngram_n} "
                "({paper_ngram_ce:.3f})", v, corpus=corpus))  # fmt: skip
    return out


def per_model_view(df: pd.DataFrame) -> pd.DataFrame:
    """The appendix: one row per configuration, percentages of test characters and of errors."""
    view = per_model(df)
    return pd.DataFrame({
        "corpus": view["corpus"], "model": view["model"], "nats/char": view["model_ce"],
        "model errs %": 100 * view["model_errors"],
        "best n-NN": "n=" + view["nnn_n"].astype(str) + ", " + view["nnn_errors"].mul(100).map("{:.1f}".format) + " %",
        "best n-gram": "n=" + view["ngram_n"].astype(str) + ", " + view["ngram_errors"].mul(100).map("{:.1f}".format)
        + " %",
        "all three, % of union": 100 * view["shared_by_all_of_union"],
        "model only, % of its errors": 100 * view["model_only_of_model"],
        "baselines' shared errors the model avoids %": 100 * view["avoided_of_baselines_shared"],
    })  # fmt: skip


class ErrorOverlap(Analysis):
    name = "error_overlap"
    title = TITLE
    question = QUESTION
    source = PAPER_SOURCE
    needs = NEEDS
    settings = SETTINGS
    claims = (
        Claim("eo-fig4-shared", "Karpathy et al. (2016) sec 4.3, Fig 4 left",
              "the majority of errors are shared by the LSTM, the best n-NN and the best n-gram", "a majority"),
        Claim("eo-fig4-unique", "Karpathy et al. (2016) sec 4.3, Fig 4 left",
              "each of the three models also has its own unique errors"),
        Claim("eo-fig4-smallest", "Karpathy et al. (2016) Fig 4 left",
              "the LSTM's error set is the smallest of the three (low area is good)"),
    )  # fmt: skip
    shows = (
        "Fig 4 left's Venn diagram of the test errors of the headline LSTM, the best n-NN and the best n-gram per "
        "corpus, beside every recurrent configuration's errors split by which baselines also err there."
    )
    deviations = (
        "The Venn's model is the suite's headline LSTM (largest budget row, deepest, lowest seed), not the paper's "
        "3-layer LSTM of 512 cells; its size comes from the run's profile.",
        "The best n-NN and n-gram are those of lowest test cross-entropy among the orders built, as the paper reads "
        "them off its Table 2.",
        "Every recurrent configuration (its lowest seed) is crossed with the same two baselines, not the LSTM alone.",
        "Venn areas are to scale for each set and each pair of sets; the region of all three is as close as three "
        "circles allow. The percentages printed in the regions are exact.",
    )

    def compute(self, ctx: Context) -> Result:
        df = compute(ctx)
        summ = summary(df, float(ctx.settings["threshold"]))
        return Result(df, findings(summ), tables={"summary": summ})

    def plot(self, result: Result):
        summ = result.tables.get("summary")
        threshold = float(summ["threshold"].iloc[0]) if summ is not None and len(summ) else SETTINGS["threshold"]
        return plot(result.table, threshold)

    def summary_table(self, result: Result) -> pd.DataFrame:
        """Per corpus: the headline model and the best baselines' error rates, and how their errors overlap."""
        s = result.tables["summary"]
        pct = lambda col: (100 * s[col]).round(1)  # noqa: E731
        return pd.DataFrame({
            "corpus": s["corpus"], "model": s["model"], "model errs %": pct("model_rate"),
            "best n-NN": s["nnn_n"].astype(int).astype(str) + "-NN, " + pct("nnn_rate").astype(str) + " %",
            "best n-gram": "n=" + s["ngram_n"].astype(int).astype(str) + ", " + pct("ngram_rate").astype(str) + " %",
            "all three, % of all errors": pct("shared_of_union"), "model only %": pct("model_only"),
            "n-NN only %": pct("nnn_only"), "n-gram only %": pct("ngram_only"),
        })  # fmt: skip

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        return {"error overlap of every configuration with the same two baselines": per_model_view(result.table)}

    def paper_table(self) -> pd.DataFrame:
        return paper_table()


ANALYSIS = ErrorOverlap()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
