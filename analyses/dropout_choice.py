"""Dropout chosen on validation, cell by cell of Fig 1 (part of the cross_entropy section).

The question: where a configuration was trained at several amounts of dropout, which did validation choose, and what
did it buy on the test split against dropout 0?

The paper's definition (Karpathy et al. 2016, sec 3.3): "we cross-validate the amount of dropout for each model
individually"; char-rnn applies it between layers and before the softmax (charlm.model). The analyses read, per
configuration, the dropout with the lowest validation loss, its mean over seeds (analyses.context,
select_by_validation); this module reads every dropout of the configurations trained at more than one. A profile
may search the dropouts by line rather than grid (charlm.dropout_search: the next value only while each beat those
below it): a cell then holds the values it tried, and `tried` names them.

Below: measure (one row per model of such a configuration: its dropout, validation loss, test cross-entropy and
whether validation chose it), per_cell (one row per Fig 1 cell: the values tried, the one chosen, what it bought,
the gap to Fig 1 before and after), by_corpus (those counted and averaged per corpus) and findings (its sentences).
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pandas as pd

from charlm.paths import complete_metrics

from .base import Finding
from .common import whole
from .context import Context, index_row, select_by_validation

COLUMNS = ["corpus", "arch", "layers", "size", "budget", "dropout", "seed", "val_loss", "ce_nats", "ce_std",
           "selected", "model_id", "group_id"]  # fmt: skip


def measure(ctx: Context, archs: tuple[str, ...], split: str, resamples: int) -> pd.DataFrame:
    """Every model of the configurations (`variant`) trained at more than one dropout: its validation loss, whether
    validation chose its dropout, and its test cross-entropy where something reads it: at the dropout validation
    chose (what the analyses read) and at dropout 0 (what the choice is measured against). The test split of a
    dropout validation did not choose is never read (NaN here), as the recipe says, and the report does not score it
    (`unread_networks`)."""
    every = ctx.models(arch=archs, all_dropouts=True, required=False)
    if every.empty:
        return pd.DataFrame(columns=COLUMNS)
    tried = every[every.groupby("variant")["dropout"].transform("nunique") > 1]
    rows = []
    for _, row in tried.iterrows():
        read = is_read(bool(row["selected"]), float(row["dropout"]), "chosen and 0")  # cross_entropy's Needs.dropouts
        mean, std = ctx.predictions(row, split).cross_entropy(resamples) if read else (np.nan, np.nan)
        rows.append({
            "corpus": row["corpus"], "arch": row["arch"], "layers": int(row["layers"]), "size": int(row["size"]),
            "budget": row["budget"], "dropout": float(row["dropout"]), "seed": whole(row["seed"]),
            "val_loss": row["val_loss"], "ce_nats": mean, "ce_std": std, "selected": bool(row["selected"]),
            "model_id": row["model_id"], "group_id": row["group_id"],
        })  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["corpus", "budget", "arch", "layers", "dropout", "seed"],
                                                           ignore_index=True)  # fmt: skip


def per_cell(tried: pd.DataFrame, paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per configuration trained at several dropouts: the values tried and their validation losses (means over
    seeds, in the order tried), the one validation chose, the test cross-entropy at dropout 0 and at the chosen one
    (means over seeds), `bought` = the first minus the second (> 0: dropout helped on test), and with `paper`
    (corpus, arch, layers, budget, paper_ce_nats: Fig 1) the gap to Fig 1 before (dropout 0) and after (the chosen
    dropout)."""
    cols = ["corpus", "arch", "layers", "size", "budget", "tried", "val_tried", "chosen", "val_chosen", "val_zero",
            "ce_zero", "ce_chosen", "bought", "paper_ce_nats", "diff_before", "diff_after"]  # fmt: skip
    if tried.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    keys = ["corpus", "arch", "layers", "size", "budget"]
    for key, sub in tried.groupby(keys, dropna=False, sort=True):
        by = sub.groupby("dropout").agg(ce=("ce_nats", "mean"), val=("val_loss", "mean"), chosen=("selected", "any"))
        chosen = float(by.index[by["chosen"].to_numpy()][0]) if by["chosen"].any() else float(by["val"].idxmin())
        zero = by.loc[0.0] if 0.0 in by.index else None
        row = dict(zip(keys, key)) | {
            "tried": "/".join(f"{d:g}" for d in by.index), "val_tried": " / ".join(f"{v:.4f}" for v in by["val"]),
            "chosen": chosen, "val_chosen": by.loc[chosen, "val"],
            "ce_chosen": by.loc[chosen, "ce"], "val_zero": np.nan if zero is None else zero["val"],
            "ce_zero": np.nan if zero is None else zero["ce"],
        }  # fmt: skip
        row["bought"] = row["ce_zero"] - row["ce_chosen"]
        rows.append(row)
    out = pd.DataFrame(rows)
    if paper is not None and not paper.empty:
        out = out.merge(paper, on=["corpus", "arch", "layers", "budget"], how="left")
    else:
        out["paper_ce_nats"] = np.nan
    out["diff_before"] = out["ce_zero"] - out["paper_ce_nats"]
    out["diff_after"] = out["ce_chosen"] - out["paper_ce_nats"]
    return out[cols]


def by_corpus(cells: pd.DataFrame) -> pd.DataFrame:
    """Per corpus: how many configurations chose among several dropouts, how many chose one above 0, the mean
    of what it bought on test and the cell it bought most, and where Fig 1 has the cell, the mean gap to it before
    (dropout 0) and after (the chosen dropout). Every number the findings state is here."""
    rows = []
    for corpus, sub in cells.groupby("corpus", sort=True):
        row = {"corpus": corpus, "cells": len(sub), "tried": "; ".join(sorted(set(sub["tried"]))),
               "above": int((sub["chosen"] > 0).sum())}  # fmt: skip
        paid = sub.dropna(subset=["bought"])
        if len(paid):
            best = paid.loc[paid["bought"].idxmax()]
            row |= {"mean_bought": paid["bought"].mean(), "most": float(best["bought"]),
                    "most_cell": f"{best['arch']} {int(best['layers'])} x {int(best['size'])}",
                    "most_dropout": best["chosen"]}  # fmt: skip
        fig1 = sub.dropna(subset=["paper_ce_nats", "diff_before"])
        if len(fig1):
            row |= {"fig1_cells": len(fig1), "before": fig1["diff_before"].mean(), "after": fig1["diff_after"].mean()}
        rows.append(row)
    return pd.DataFrame(rows)


def findings(summary: pd.DataFrame) -> list[Finding]:
    """Per corpus (a row of by_corpus): where validation chose a dropout above 0, what it bought, and the gap to
    Fig 1 before and after (said to stay where validation chose 0 everywhere)."""
    out = []
    for _, r in summary.iterrows():
        v = {k: r[k] for k in r.index if not (isinstance(r[k], float) and np.isnan(r[k]))}
        plural = "s" if int(r["cells"]) != 1 else ""
        text = ("{corpus}: of {cells} configuration" + plural + " trained at several dropouts (tried {tried}), "
                "validation chose one above 0 in {above}")  # fmt: skip
        if "mean_bought" in v and int(r["above"]) > 0:
            text += (", buying {mean_bought:.3f} nats/char of test cross-entropy on average against dropout 0 (most: "
                     "{most_cell}, {most:.3f} at dropout {most_dropout:g})")  # fmt: skip
        if "before" in v:
            if int(r["above"]) > 0:
                text += "; against Fig 1 in {fig1_cells} of them, the mean gap went from {before:+.3f} to {after:+.3f}"
            else:
                text += "; against Fig 1 in {fig1_cells} of them, the mean gap stays {before:+.3f}"
        out.append(Finding(text, v, corpus=r["corpus"]))
    return out


READS = ("chosen", "chosen and 0", "all")  # Needs.dropouts, narrowest first


def is_read(selected, dropout, reads: str):
    """Whether a network (or each of a column of them) is read under `reads` (Needs.dropouts): the dropout validation
    chose, and dropout 0 beside it for "chosen and 0", every one for "all". The one rule `measure` reads by and
    `unread_networks` scores by."""
    return selected | (dropout == 0) if reads == "chosen and 0" else selected | (reads == "all")


def dropouts_read(needs: list) -> str:
    """Which dropouts of a configuration a run's analyses read Predictions of: the widest `Needs.dropouts` among those
    that read Predictions ("chosen" when none does, so that a run scores what `Context.models` gives)."""
    wanted = [n.dropouts for n in needs if n.predictions]
    if unknown := sorted(set(wanted) - set(READS)):
        raise ValueError(f"Needs.dropouts {unknown}: one of {', '.join(READS)}")
    return max(wanted, key=READS.index, default="chosen")


def unread_networks(models: list, reads: str = "chosen and 0") -> dict[str, float]:
    """{model id: the dropout validation chose instead} for every network of a run (its charlm.kinds.Planned models)
    whose test split none of its analyses reads (`reads`: `dropouts_read` of their needs), so that the run does not
    score it: a dropout that validation did not choose for its configuration (Karpathy et al. sec 3.3: the amount of
    dropout is chosen on validation; analyses read the chosen one, select_by_validation), but dropout 0 where `reads`
    is "chosen and 0" (`measure` reads it beside the chosen one, as what the choice bought is measured against), and
    none where it is "all". Decided from the validation losses the models' metrics hold (built, or shipped to be
    installed) by the analyses' own rule on the same models; a configuration with a network still to train is left
    whole, since its choice is not known before the run."""
    rows, open_variants = [], set()
    for m in models:
        if not (m.kind.recurrent and m.kind.ships):  # the networks trained here (an adopted one has one dropout)
            continue
        metrics = complete_metrics(m.directory / "metrics.json")
        if metrics is None and m.shipped is not None:
            metrics = complete_metrics(m.shipped / "metrics.json")
        if metrics is None:  # to train in this run: its configuration's choice waits for it
            planned = {"train_config": asdict(m.config), "corpus_key": m.corpus.key, "kind": "charlm"}
            open_variants.add(m.kind.index_row(planned, m.directory)["variant"])
            continue
        rows.append(index_row(metrics, m.directory))
    if not rows:
        return {}
    index = select_by_validation(pd.DataFrame(rows))
    chosen = index[index["selected"]].groupby("variant")["dropout"].first()
    unread = index[~is_read(index["selected"], index["dropout"], reads) & ~index["variant"].isin(open_variants)]
    return {m: float(chosen.get(v, 0.0)) for m, v in zip(unread["model_id"], unread["variant"])}


def at_shared_dropout(every: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Of models at every dropout they were trained at (`Context.models(all_dropouts=True)`), those that compare at
    one dropout: per group of `by` (corpus, depth, width), only the dropouts every architecture of the group was
    trained at (all of its own, where they share none), and among those each configuration's choice on validation
    (select_by_validation, Karpathy et al. sec 3.3). Levy et al. train every member of their table alike (sec 4): an
    LSTM that Fig 1's grid also trained at dropouts its ablations never had (the 128 row's 0.1 and 0.25) is read at
    the ablations' dropout, not at the one validation chose for its Fig 1 cell. The ladder compares its rungs so too.
    """
    kept = []
    for _, group in every.groupby(by, sort=False):
        shared = set.intersection(*(set(sub["dropout"]) for _, sub in group.groupby("arch")))
        kept.append(group[group["dropout"].isin(shared)] if shared else group)
    return chosen_among(pd.concat(kept)) if kept else every


def chosen_among(rows: pd.DataFrame) -> pd.DataFrame:
    """Of these rows (models at several dropouts), each configuration's at the dropout validation chooses among them."""
    if rows.empty:
        return rows
    rows = select_by_validation(rows.drop(columns="selected"))
    return rows[rows["selected"]].sort_index().reset_index(drop=True)
