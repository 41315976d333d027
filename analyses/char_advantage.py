r"""On which characters does a recurrent net beat the 20-gram, and on which does the 20-gram win?

Karpathy et al. (2016) sec 4.3 and Fig 4 (middle, right): "we compute the mean probability assigned
to each character in the vocabulary across the test set" by the LSTM and by the 20-gram (an unpruned
21-gram of KenLM, modified Kneser-Ney; n = 20 characters of context), and show "the 10 characters
where each model has the largest advantage over the other". Their findings: on the Linux kernel the
LSTM's largest advantages are on "special characters that are used to structure C programs,
including whitespace and brackets"; on War and Peace it has "a distinct advantage" on the carriage
return, which ends a line about every 70 characters, so predicting it needs the distance since the
last one.

Mean p(correct) per character c = the mean, over test positions whose true next character is c, of
the probability the model gave it (exact, from the Predictions' target columns). Every recurrent
configuration is compared with the same 20-gram; a configuration is represented by its lowest seed
(seed 0; seed siblings share a `group_id`). Characters are shown visibly, as charlm.score.byte_label
shows them everywhere (⏎ line feed \n, ␍ carriage return \r, ⇥ tab, \xNN bytes of UTF-8 characters), a
space as ␣.
"""

from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from charlm.score import byte_label
from corpora.errors import run_cli

from .common import analysis_main, headline_id, lowest_seeds, report_order, short_label, style
from .context import Context, Needs

TITLE = "Per-character advantage of the recurrent nets over the 20-gram"
QUESTION = "Which characters does the LSTM predict better than a 20-gram, and are they the ones that need long context?"
PAPER_SOURCE = "Karpathy et al. (2016), sec 4.3 and Fig 4 middle (Linux) and right (War and Peace), qualitative"
NGRAM_N = 20  # the paper's 20-gram: 20 characters of context
NEEDS = Needs(ngram_n=(NGRAM_N,))
SETTINGS = {
    "split": "test",  # split scored
    "top": 10,  # characters shown where each side wins most (Fig 4: 10)
    "min_count": 10,  # a character is ranked only if it occurs this often in the split (the paper ranks all)
}
STRUCTURAL = set(b" \n\t{}()[]")  # whitespace and brackets: the paper's characters that structure C programs
PAPER = {
    "linux": "the LSTM's largest advantages are on characters that structure C programs: whitespace and brackets",
    "warpeace": "the LSTM has a distinct advantage on the carriage return (about every 70 characters)",
}


def visible(byte: int) -> str:
    """A character as a reader can see it: charlm.score.byte_label (⏎ \\n, ␍ \\r, ⇥ tab, \\xNN), but ␣ for a space,
    which byte_label leaves a space and a table or a listing would lose."""
    return "␣" if byte == ord(" ") else byte_label(byte)


def mean_by_character(targets: np.ndarray, p_correct: np.ndarray, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(V,) occurrences of each character as the true next one, and (V,) the mean probability given to it there."""
    counts = np.bincount(targets, minlength=vocab_size)
    sums = np.bincount(targets, weights=p_correct, minlength=vocab_size)
    with np.errstate(invalid="ignore", divide="ignore"):
        return counts, sums / counts


def compute(ctx: Context) -> pd.DataFrame:
    """One row per (corpus, model, character seen in the split): mean p(correct) of the model and of the 20-gram."""
    split, top, min_count = ctx.settings["split"], int(ctx.settings["top"]), int(ctx.settings["min_count"])
    rows = []
    for key, models in ctx.models().groupby("corpus_key"):
        ngram = ctx.baseline("ngram", key, NGRAM_N)
        ngram_preds = ctx.predictions(ngram, split)
        vocab = ctx.corpus(key).vocab
        targets = ngram_preds.targets  # (T,) the same true characters for every model of the corpus
        counts, ngram_mean = mean_by_character(targets, ngram_preds.p_correct, vocab.size)
        ngram_ce = float(ngram_preds.nll.mean())
        seen = np.flatnonzero(counts)
        per_model = []
        for _, model in lowest_seeds(models).iterrows():
            preds = ctx.predictions(model, split)
            if not np.array_equal(preds.targets, targets):
                raise ValueError(f"{model['model_id']} and the 20-gram scored different texts")
            _, model_mean = mean_by_character(targets, preds.p_correct, vocab.size)
            per_model.append((model, float(preds.nll.mean()), model_mean))
        best = headline_id(lowest_seeds(models))  # the one headline rule (charlm.plan)
        for model, ce, model_mean in per_model:
            advantage = model_mean[seen] - ngram_mean[seen]  # (C,) over the characters seen in the split
            ranked = counts[seen] >= min_count
            order = np.argsort(-np.where(ranked, advantage, np.nan), kind="stable")  # NaNs (unranked) sort last
            wins_rank = np.full(seen.size, np.nan)
            wins_rank[order[: ranked.sum()]] = np.arange(1, ranked.sum() + 1)
            loses_rank = np.full(seen.size, np.nan)
            loses_rank[order[: ranked.sum()][::-1]] = np.arange(1, ranked.sum() + 1)
            for j, v in enumerate(seen):
                # a character is a side's win only where that side is ahead: with fewer than `top` characters in
                # its favour, a side's list is shorter (not padded with its smallest losses)
                side = (
                    "model" if wins_rank[j] <= top and advantage[j] > 0
                    else "20-gram" if loses_rank[j] <= top and advantage[j] < 0
                    else "neither"
                )  # fmt: skip
                rows.append({
                    "corpus": model["corpus"], "model": short_label(model), "arch": model["arch"],
                    "layers": int(model["layers"]), "size": int(model["size"]), "budget": model["budget"],
                    "seed": int(model["seed"]), "headline": model["model_id"] == best, "model_ce": ce,
                    "ngram_ce": ngram_ce,
                    "byte": int(vocab[v]), "char": visible(int(vocab[v])), "count": int(counts[v]),
                    "p_model": float(model_mean[v]), "p_ngram": float(ngram_mean[v]),
                    "advantage": float(advantage[j]), "model_rank": wins_rank[j], "ngram_rank": loses_rank[j],
                    "side": side, "model_id": model["model_id"], "group_id": model["group_id"],
                })  # fmt: skip
    df = pd.DataFrame(rows)
    df["model_rank"] = df["model_rank"].astype("Int64")
    df["ngram_rank"] = df["ngram_rank"].astype("Int64")
    return report_order(df, "model", "advantage", descending=("advantage",)).reset_index(drop=True)


# ------------------------------------------------------------------------------------- the numbers a reader wants


def top_characters(df: pd.DataFrame, side: str) -> pd.DataFrame:
    """The ranked characters where `side` ("model" or "20-gram") wins most, per (corpus, model), best first."""
    rank = "model_rank" if side == "model" else "ngram_rank"
    return df[df["side"] == side].sort_values(["corpus", "model", rank], kind="stable")


def _listing(sub: pd.DataFrame, k: int | None = None) -> str:
    sub = sub.head(k) if k else sub
    return ", ".join(f"{r['char']} ({r['advantage']:+.2f}, n={int(r['count']):,})" for _, r in sub.iterrows())


def with_paper(df: pd.DataFrame) -> pd.DataFrame:
    """The report's table: per model, its 10 best and 10 worst characters against the 20-gram; the paper's finding."""
    wins, losses = top_characters(df, "model"), top_characters(df, "20-gram")
    out = []
    for (corpus, model), sub in df.groupby(["corpus", "model"], sort=False):
        first = sub.iloc[0]
        structural = sub[sub["byte"].isin(STRUCTURAL) & (sub["side"] == "model")]
        out.append({
            "corpus": corpus, "model": model, "nats/char": first["model_ce"], "20-gram nats/char": first["ngram_ce"],
            "model wins most on": " ".join(wins[(wins["corpus"] == corpus) & (wins["model"] == model)]["char"]),
            "20-gram wins most on": " ".join(losses[(losses["corpus"] == corpus) & (losses["model"] == model)]["char"]),
            "whitespace/brackets among model's top": len(structural),
            "paper (LSTM vs 20-gram)": PAPER.get(corpus, "") if first["headline"] else "",
        })  # fmt: skip
    return pd.DataFrame(out)


def _newline_rank(sub: pd.DataFrame) -> str:
    """Where the line-ending characters stand in a model's ranking against the 20-gram."""
    items = []
    for byte in (ord("\r"), ord("\n")):
        row = sub[sub["byte"] == byte]
        if not row.empty:
            r = row.iloc[0]
            where = (
                f"rank {int(r['model_rank'])} of the model's advantages" if pd.notna(r["model_rank"]) else "unranked"
            )
            items.append(f"{r['char']} {r['p_model']:.2f} vs {r['p_ngram']:.2f} ({where})")
    return "; ".join(items)


def caption(df: pd.DataFrame) -> str:
    parts = []
    wins, losses = top_characters(df, "model"), top_characters(df, "20-gram")
    for corpus, sub in df.groupby("corpus", sort=False):
        head = sub[sub["headline"]]
        h = head.iloc[0]
        name = h["model"]
        w = wins[(wins["corpus"] == corpus) & (wins["model"] == name)]
        lo = losses[(losses["corpus"] == corpus) & (losses["model"] == name)]
        ahead, behind = int((head["advantage"] > 0).sum()), int((head["advantage"] < 0).sum())
        tied = len(head) - ahead - behind
        parts.append(
            f"On {corpus} the {name} ({h['model_ce']:.3f} nats/char, 20-gram {h['ngram_ce']:.3f}) "
            + (f"wins most on {_listing(w, 5)}" if len(w) else "wins on no ranked character")
            + ", and the 20-gram "
            + (f"most on {_listing(lo, 5)}." if len(lo) else "on no ranked character.")
        )
        parts.append(
            f"Of the {len(head)} characters of the test split, the {name} gives the higher mean p(correct) on "
            f"{ahead} and the 20-gram on {behind}" + (f" ({tied} tied)." if tied else ".")
        )
        structural = w[w["byte"].isin(STRUCTURAL)]
        if corpus == "linux" or structural.shape[0]:
            parts.append(
                f"{len(structural)} of its top {len(w)} are whitespace or brackets"
                + (f" ({' '.join(structural['char'])})" if len(structural) else "")
                + "."
            )
        lines = _newline_rank(head)
        if lines and corpus != "linux":
            parts.append(f"Line endings: {lines}.")
        models = sub.drop_duplicates("model")["model"]
        top = wins[wins["corpus"] == corpus]
        structural_per_model = top[top["byte"].isin(STRUCTURAL)].groupby("model").size().reindex(models, fill_value=0)
        longest = int(top.groupby("model").size().max()) if len(top) else 0
        parts.append(
            f"Across the {len(models)} recurrent configurations, whitespace and brackets fill "
            f"{structural_per_model.min()} to {structural_per_model.max()} of their top lists (up to {longest} "
            "characters each, only characters where the model is ahead)."
        )
        carriage = top[top["byte"] == ord("\r")]
        if (sub["byte"] == ord("\r")).any():
            listing = ", ".join(f"{r['model']} (rank {int(r['model_rank'])})" for _, r in carriage.iterrows())
            parts.append(
                f"The carriage return is among the top characters of {len(carriage)} of them"
                + (f": {listing}." if listing else ".")
            )
        if h["model_ce"] > h["ngram_ce"]:
            parts.append(
                f"This {name} is weaker than the 20-gram overall ({h['model_ce']:.3f} against {h['ngram_ce']:.3f} "
                "nats/char)"
                + (
                    ", and behind it on most characters: the paper's pattern can only show among the few where it is "
                    "not."
                    if behind > ahead
                    else ", yet ahead on as many characters or more: cross-entropy weighs characters by their "
                    "frequency and by log-probability, the per-character means do not."
                )
            )
        if corpus in PAPER:
            parts.append(f"Paper: {PAPER[corpus]}.")
    parts.append(
        "Mean p(correct) per character over the test split; positive advantage = the recurrent net is better. "
        "Characters seen fewer times than the ranking threshold are in the table but not ranked."
    )
    return " ".join(parts)


def summary(df: pd.DataFrame) -> str:
    items = []
    wins = top_characters(df, "model")
    for corpus, sub in df[df["headline"]].groupby("corpus", sort=False):
        name = sub["model"].iloc[0]
        w = wins[(wins["corpus"] == corpus) & (wins["model"] == name)]
        ahead, behind = int((sub["advantage"] > 0).sum()), int((sub["advantage"] < 0).sum())
        most = f", most on {' '.join(w['char'].head(5))}" if len(w) else ""
        items.append(f"{corpus}: {name} ahead of the 20-gram on {ahead} characters, behind on {behind}{most}")
    return "; ".join(items) + " (paper: whitespace and brackets on Linux, the carriage return on War and Peace)"


def notes(df: pd.DataFrame) -> list[str]:
    return [
        "The paper ranks every character of the vocabulary; here a character must occur at least `min_count` times "
        "(setting, default 10) in the test split to be ranked, so a single lucky guess on a rare digit does not top "
        "the list. Every character is in the CSV table with its count.",
        "War and Peace ends lines with CR LF: the carriage return (␍) is the character that needs the line length; "
        "the line feed after it is nearly certain for any model.",
    ]


# ------------------------------------------------------------------------------------- figure


def plot(df: pd.DataFrame):
    style()
    corpora_ = list(dict.fromkeys(df["corpus"]))
    n_models = df.groupby("corpus")["model"].nunique().max()
    fig, axes = plt.subplots(
        len(corpora_), 2, figsize=(13, max(4.2, 0.35 * n_models + 2.5) * len(corpora_)), squeeze=False,
        gridspec_kw={"width_ratios": [1, 1.5]},
    )  # fmt: skip
    for (ax_bars, ax_heat), corpus in zip(axes, corpora_):
        sub = df[df["corpus"] == corpus]
        head = sub[sub["headline"] & (sub["side"] != "neither")].sort_values("advantage", ascending=False)
        name = head["model"].iloc[0] if len(head) else sub[sub["headline"]]["model"].iloc[0]
        labels = [f"{c} ({n:,})" for c, n in zip(head["char"], head["count"])]
        y = np.arange(len(head))
        ax_bars.barh(y - 0.2, head["p_model"], height=0.4, color="#d62728", label=name)
        ax_bars.barh(y + 0.2, head["p_ngram"], height=0.4, color="#1f77b4", label=f"{NGRAM_N}-gram")
        ax_bars.set_yticks(y, labels, fontsize=8)
        ax_bars.invert_yaxis()
        ax_bars.set_xlim(0, 1)
        split_at = int((head["side"] == "model").sum())  # the model's wins first, then the 20-gram's
        ax_bars.axhline(split_at - 0.5, color="black", lw=0.8, ls="--")
        ax_bars.set_xlabel("mean probability of the correct character")
        ax_bars.set_title(
            f"{corpus}: top {split_at} for the {name} (above the line) and for the 20-gram (below)\n"
            "character (occurrences in the test split)",
            fontsize=9,
        )
        ax_bars.legend(fontsize=7, loc="lower right")
        chars = head["char"].tolist()
        grid = sub[sub["char"].isin(chars)].pivot_table(index="model", columns="char", values="advantage", sort=False)
        grid = grid.reindex(columns=chars)
        sns.heatmap(grid, cmap="RdBu_r", center=0, vmin=-1, vmax=1, ax=ax_heat, annot=True, fmt=".2f",
                    annot_kws={"fontsize": 6}, cbar_kws={"label": "mean p(correct): model - 20-gram"})  # fmt: skip
        ax_heat.set_xlabel(f"characters where the {name} or the 20-gram wins most")
        ax_heat.set_ylabel("")
        ax_heat.set_title(f"{corpus}: every architecture on those characters", fontsize=9)
        ax_heat.tick_params(axis="x", rotation=0, labelsize=8)
    fig.tight_layout()
    return fig


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
