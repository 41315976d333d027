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

from .base import Analysis, Claim, Finding, Result
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


# ------------------------------------------------------------------------------------- findings

WHITESPACE = set(b" \t\n\r\x0b\x0c")
BRACKETS = set(b"{}()[]")
CR = ord("\r")


def is_special(byte: int) -> bool:
    """A special character: an ASCII byte that is neither a letter nor a digit (whitespace, brackets, operators)."""
    return byte < 0x80 and not chr(byte).isalnum()


def _chars(sub: pd.DataFrame) -> str:
    return " ".join(sub["char"]) if len(sub) else "none"


def summary(df: pd.DataFrame, top: int, min_count: int) -> pd.DataFrame:
    """One row per corpus: the headline model against the 20-gram (characters ahead and behind, its top list and
    what it holds, the carriage return's rank), and the spread over the configurations. Every number a finding
    states is here."""
    wins, losses = top_characters(df, "model"), top_characters(df, "20-gram")
    rows = []
    for corpus, sub in df.groupby("corpus", sort=False):
        head = sub[sub["headline"]]
        h = head.iloc[0]
        w = wins[(wins["corpus"] == corpus) & (wins["model"] == h["model"])]
        lo = losses[(losses["corpus"] == corpus) & (losses["model"] == h["model"])]
        structural = w[w["byte"].isin(STRUCTURAL)]
        top_all = wins[wins["corpus"] == corpus]
        models = list(dict.fromkeys(sub["model"]))
        per_model = top_all[top_all["byte"].isin(STRUCTURAL)].groupby("model").size().reindex(models, fill_value=0)
        cr = head[head["byte"] == CR]
        row = {
            "corpus": corpus, "model": h["model"], "arch": h["arch"], "layers": int(h["layers"]),
            "size": int(h["size"]), "model_ce": h["model_ce"], "ngram_n": NGRAM_N, "ngram_ce": h["ngram_ce"],
            "chars": len(head), "ranked": int((head["count"] >= min_count).sum()), "min_count": min_count, "top": top,
            "ahead": int((head["advantage"] > 0).sum()), "behind": int((head["advantage"] < 0).sum()),
            "top_len": len(w), "special": int(w["byte"].map(is_special).sum()), "structural": len(structural),
            "structural_chars": _chars(structural), "whitespace": int(w["byte"].isin(WHITESPACE).sum()),
            "brackets": int(w["byte"].isin(BRACKETS).sum()), "top5": _chars(w.head(5)),
            "ngram_top5": _chars(lo.head(5)), "configs": len(models), "structural_min": int(per_model.min()),
            "structural_max": int(per_model.max()), "cr_present": bool(len(cr)),
            "cr_configs_top": int((top_all["byte"] == CR).sum()),
        }  # fmt: skip
        if len(cr):
            c = cr.iloc[0]
            row |= {"cr_rank": c["model_rank"], "cr_side": c["side"], "cr_advantage": c["advantage"],
                    "cr_p_model": c["p_model"], "cr_p_ngram": c["p_ngram"]}  # fmt: skip
        rows.append(row)
    out = pd.DataFrame(rows)
    if "cr_rank" in out:
        out["cr_rank"] = out["cr_rank"].astype("Int64")
    return out


# The paper's two claims and the corpus each is about (Fig 4 middle: Linux; right: War and Peace).
CLAIM_CORPUS = {"ca-fig4-structure": "linux", "ca-fig4-return": "warpeace"}


def _structure_verdict(s: pd.Series) -> str:
    """Fig 4 middle: reproduced when at least half of the model's top list are special characters and the list holds
    whitespace and a bracket; partly when half are special but whitespace or brackets are missing; not reproduced
    when fewer than half are special (or the model is ahead on no character)."""
    if s["top_len"] == 0 or 2 * s["special"] < s["top_len"]:
        return "not reproduced"
    return "reproduced" if s["whitespace"] > 0 and s["brackets"] > 0 else "partly"


def _return_verdict(s: pd.Series) -> str:
    """Fig 4 right: reproduced when the carriage return is in the model's top list; partly when the model is ahead
    on it but not among its top characters; not reproduced when it is not ahead."""
    if s["cr_side"] == "model":
        return "reproduced"
    return "partly" if s["cr_advantage"] > 0 else "not reproduced"


def _values(s: pd.Series) -> dict:
    return {k: v for k, v in s.items() if not (isinstance(v, float) and np.isnan(v)) and v is not pd.NA}


def findings(summ: pd.DataFrame) -> list[Finding]:
    """Per corpus: the claim about that corpus (Fig 4 middle on Linux, right on War and Peace), then what the paper
    did not ask; a claim whose corpus the run lacks is untested."""
    out = []
    for _, s in summ.iterrows():
        v, corpus = _values(s), s["corpus"]
        if corpus == CLAIM_CORPUS["ca-fig4-structure"]:
            out.append(Finding(
                "{corpus}: {special} of the {model}'s top {top_len} characters over the {ngram_n}-gram are special, "
                "{structural} whitespace or brackets ({structural_chars}); the paper: whitespace and brackets",
                v, _structure_verdict(s), "ca-fig4-structure", corpus))  # fmt: skip
        if corpus == CLAIM_CORPUS["ca-fig4-return"]:
            if not s["cr_present"]:
                out.append(Finding("{corpus}: the test split has no carriage return to compare", v, "untested",
                                   "ca-fig4-return", corpus))  # fmt: skip
            elif pd.notna(s.get("cr_rank")) and s["cr_side"] == "model":
                out.append(Finding(
                    "{corpus}: the carriage return is the {model}'s advantage number {cr_rank} over the "
                    "{ngram_n}-gram, mean p {cr_p_model:.2f} against {cr_p_ngram:.2f}; the paper: a distinct "
                    "advantage", v, _return_verdict(s), "ca-fig4-return", corpus))  # fmt: skip
            else:
                out.append(Finding(
                    "{corpus}: on the carriage return the {model} gives mean p {cr_p_model:.2f} against the "
                    "{ngram_n}-gram's {cr_p_ngram:.2f}; the paper: a distinct advantage", v, _return_verdict(s),
                    "ca-fig4-return", corpus))  # fmt: skip
        out.append(
            Finding(
                "{corpus}: the {model} has the higher mean p(correct) on {ahead} of {chars} characters, the "
                "{ngram_n}-gram on {behind}; overall {model_ce:.3f} against {ngram_ce:.3f} nats/char",
                v,
                corpus=corpus,
            )
        )
        out.append(Finding("{corpus}: the {model} wins most on {top5}, the {ngram_n}-gram on {ngram_top5}", v,
                           corpus=corpus))  # fmt: skip
        if corpus == CLAIM_CORPUS["ca-fig4-structure"] or s["structural_max"] > 0 and not s["cr_present"]:
            out.append(Finding(
                "{corpus}: over {configs} configurations, whitespace or brackets fill {structural_min} to "
                "{structural_max} places of each top list", v, corpus=corpus))  # fmt: skip
        if s["cr_present"]:
            out.append(Finding("{corpus}: the carriage return is in the top list of {cr_configs_top} of {configs} "
                               "configurations", v, corpus=corpus))  # fmt: skip
    present = set(summ["corpus"]) if len(summ) else set()
    for claim, corpus in CLAIM_CORPUS.items():
        if corpus not in present:
            out.append(Finding("no {corpus} corpus in this run", {"corpus": corpus}, "untested", claim))
    return out


def per_model_view(df: pd.DataFrame) -> pd.DataFrame:
    """The appendix: per configuration, its top characters against the 20-gram and the 20-gram's."""
    wins, losses = top_characters(df, "model"), top_characters(df, "20-gram")
    out = []
    for (corpus, model), sub in df.groupby(["corpus", "model"], sort=False):
        first = sub.iloc[0]
        mine = (wins["corpus"] == corpus) & (wins["model"] == model)
        theirs = (losses["corpus"] == corpus) & (losses["model"] == model)
        out.append({
            "corpus": corpus, "model": model, "nats/char": first["model_ce"], "20-gram nats/char": first["ngram_ce"],
            "ahead on": int((sub["advantage"] > 0).sum()), "behind on": int((sub["advantage"] < 0).sum()),
            "model wins most on": " ".join(wins.loc[mine, "char"]),
            "20-gram wins most on": " ".join(losses.loc[theirs, "char"]),
            "whitespace/brackets among model's top": int(wins.loc[mine, "byte"].isin(STRUCTURAL).sum()),
        })  # fmt: skip
    return pd.DataFrame(out)


# ------------------------------------------------------------------------------------- figure


def plot(df: pd.DataFrame):
    """Per corpus, Fig 4 middle/right: the headline model's and the 20-gram's mean p(correct) on the characters where
    each wins most (left), and every configuration's advantage on those characters (right)."""
    style()
    corpora_ = list(dict.fromkeys(df["corpus"]))
    n_chars = max(int(((df["side"] != "neither") & df["headline"])[df["corpus"] == c].sum()) for c in corpora_)
    n_models = int(df.groupby("corpus")["model"].nunique().max())
    rows = max(n_chars, n_models, 4)
    height = min(9.0, (0.14 * rows + 1.4) * len(corpora_))
    fig, axes = plt.subplots(len(corpora_), 2, figsize=(7.5, height), squeeze=False,
                             gridspec_kw={"width_ratios": [1, 1.5]})  # fmt: skip
    for (ax_bars, ax_heat), corpus in zip(axes, corpora_):
        sub = df[df["corpus"] == corpus]
        head = sub[sub["headline"] & (sub["side"] != "neither")].sort_values("advantage", ascending=False)
        name = sub[sub["headline"]]["model"].iloc[0]
        labels = [f"{c} ({n:,})" for c, n in zip(head["char"], head["count"])]
        y = np.arange(len(head))
        ax_bars.barh(y - 0.2, head["p_model"], height=0.4, color="#d62728", label=name)
        ax_bars.barh(y + 0.2, head["p_ngram"], height=0.4, color="#1f77b4", label=f"{NGRAM_N}-gram")
        ax_bars.set_yticks(y, labels, fontsize=7)
        ax_bars.invert_yaxis()
        ax_bars.set_xlim(0, 1)
        ax_bars.tick_params(axis="x", labelsize=7)
        split_at = int((head["side"] == "model").sum())  # the model's wins first, then the 20-gram's
        ax_bars.axhline(split_at - 0.5, color="black", lw=0.8, ls="--")
        ax_bars.set_xlabel("mean p(correct character)", fontsize=7.5)
        ax_bars.set_title(f"{corpus}: {name} wins (above the line)\nand the {NGRAM_N}-gram's (below)", fontsize=8)
        ax_bars.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
        chars = head["char"].tolist()
        grid = sub[sub["char"].isin(chars)].pivot_table(index="model", columns="char", values="advantage", sort=False)
        grid = grid.reindex(columns=chars)
        lim = max(0.1, float(np.ceil(10 * np.nanmax(np.abs(grid.to_numpy(float)), initial=0.0)) / 10))
        sns.heatmap(grid, cmap="RdBu_r", center=0, vmin=-lim, vmax=lim, ax=ax_heat, xticklabels=True,
                    yticklabels=True, cbar_kws={"shrink": 0.8})  # fmt: skip
        bar = ax_heat.collections[0].colorbar
        bar.set_label(f"mean p(correct): model − {NGRAM_N}-gram", fontsize=7.5)
        bar.ax.tick_params(labelsize=7)
        ax_heat.set_xlabel("the characters at left, in that order", fontsize=7.5)
        ax_heat.set_ylabel("")
        ax_heat.set_title(f"{corpus}: every configuration on those characters", fontsize=8)
        ax_heat.tick_params(axis="x", rotation=0, labelsize=7)
        ax_heat.tick_params(axis="y", labelsize=7)
        for label in ax_heat.get_yticklabels():
            label.set_fontweight("bold" if label.get_text() == name else "normal")
    fig.tight_layout()
    return fig


class CharAdvantage(Analysis):
    name = "char_advantage"
    title = TITLE
    question = QUESTION
    source = PAPER_SOURCE
    needs = NEEDS
    settings = SETTINGS
    claims = (
        Claim("ca-fig4-structure", "Karpathy et al. (2016) sec 4.3, Fig 4 middle (Linux)",
              "the LSTM's largest advantages over the 20-gram are on special characters that structure C programs, "
              "including whitespace and brackets", "top 10 characters"),
        Claim("ca-fig4-return", "Karpathy et al. (2016) sec 4.3, Fig 4 right (War and Peace)",
              "the LSTM has a distinct advantage on the carriage return", "a carriage return about every 70 "
              "characters"),
    )  # fmt: skip
    shows = (
        "Fig 4 middle and right: the headline LSTM's and the 20-gram's mean probability of the correct character on "
        "the characters where each wins most, and every configuration's advantage on those characters."
    )
    deviations = (
        "A character must occur at least `min_count` times in the test split to be ranked, so one lucky guess on a "
        "rare digit does not top the list (the paper ranks every character); every character is in the data table.",
        "A side's top list holds only characters where it is ahead, so it may be shorter than the paper's ten.",
        "War and Peace ends lines with CR LF: the carriage return (␍) is the character that needs the line length; "
        "the line feed after it is nearly certain for any model.",
        "The model is the suite's headline LSTM (largest budget row, deepest, lowest seed), not the paper's 3-layer "
        "LSTM of 512 cells.",
    )

    def compute(self, ctx: Context) -> Result:
        df = compute(ctx)
        summ = summary(df, int(ctx.settings["top"]), int(ctx.settings["min_count"]))
        return Result(df, findings(summ), tables={"summary": summ})

    def plot(self, result: Result):
        return plot(result.table)

    def summary_table(self, result: Result) -> pd.DataFrame:
        """Per corpus: the headline model against the 20-gram."""
        s = result.tables["summary"]
        return pd.DataFrame({
            "corpus": s["corpus"], "model": s["model"], "nats/char": s["model_ce"].round(3),
            "20-gram nats/char": s["ngram_ce"].round(3),
            "ahead / behind (characters)": s["ahead"].astype(str) + " / " + s["behind"].astype(str),
            "model wins most on": s["top5"], "20-gram wins most on": s["ngram_top5"],
            "special in its top": s["special"].astype(str) + " of " + s["top_len"].astype(str),
            "whitespace/brackets": s["structural_chars"],
            "␍ rank": [f"{int(r)}" if pd.notna(r) else "—" for r in s.get("cr_rank", pd.Series(np.nan, s.index))],
        })  # fmt: skip

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        return {"every configuration against the 20-gram": per_model_view(result.table)}

    def paper_table(self) -> pd.DataFrame:
        return pd.DataFrame([{"corpus": c, "paper (Fig 4, LSTM against the 20-gram)": t} for c, t in PAPER.items()])


ANALYSIS = CharAdvantage()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
