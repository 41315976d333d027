"""Which models predict alike? Karpathy et al. (2016) sec 4.1 and Fig 1 right: a t-SNE of models, and agreement.

Every model, recurrent or baseline (KenLM n-grams, n-NNs), is read at the same fixed sample of test positions
(`charlm.predictions.sample_positions`, where every stored Predictions keeps its full distribution):

- agreement(a, b): the fraction of those positions where models a and b put their highest probability on the same
  character (sec 4.1: "the fraction of times that each pair of models agree on the most likely character");
- distance(a, b) for the embedding: by default the paper's, 1 - agreement (sec 4.1: "we computed the fraction of
  times that each pair of models agree on the most likely character and use it to render a t-SNE"; "we found this
  more stable and robust than the KL divergence"); `--set distance=hellinger` embeds from the probabilities
  instead (Fig 1's caption says "based on the probabilities"): the root mean square over positions of the
  Hellinger distance H(p, q) = sqrt(1/2 sum_v (sqrt p_v - sqrt q_v)^2), in [0, 1];
- a 2-D t-SNE (scikit-learn, precomputed distances) of the recurrent models of one corpus, drawn as in Fig 1 right:
  colour by type, size by budget, marker by depth. The paper's figure holds its recurrent nets only; the baselines
  (KenLM n-grams, n-NNs) stay out of the embedding, so they cannot move its layout, and are shown apart, in the
  agreement heatmap and the table (`--set embed_baselines=true` embeds them too).

Two models with identical predictions have distance 0 and agreement 1 either way, so they sit together. The
findings compare types by architecture: the GRU is either form (`gru-paper`, the papers', when both are there),
twice over:

- within one budget row, the mean agreement of each pair of types (`type_agreement`);
- across the whole population of Fig 1's types (RNN, LSTM, GRU of every depth and size; not Levy's ablations),
  what the t-SNE shows: how many RNNs have an RNN as nearest neighbour by agreement, and how many LSTMs and GRUs an
  LSTM or GRU, and the mean agreement within and across the two groups (`clusters`). The neighbours come from the
  agreement matrix, not from the t-SNE map, whose distances t-SNE distorts.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from sklearn.manifold import TSNE

from charlm import kinds
from charlm.model import ARCH_LABELS
from charlm.predictions import sample_positions
from corpora.errors import UserError, run_cli

from .base import Analysis, Claim, Finding, Result
from .common import analysis_main, report_order
from .context import Context, Needs
from .model_agreement_plot import TYPE_LABELS
from .model_agreement_plot import plot as draw

TITLE = "Model agreement and a t-SNE of models"
QUESTION = "Which models make the same predictions: do the LSTM and the GRU agree, and do RNNs form their own cluster?"
PAPER_SOURCE = (
    "Karpathy et al. (2016), sec 4.1 and Fig 1 right (t-SNE of War and Peace models; the LSTM and GRU make "
    "similar predictions, the RNNs form their own cluster; no numbers are given)"
)
NEEDS = Needs()  # it reads every model the profile built, baselines included
SETTINGS = {
    "split": "test",  # split whose sample of positions is read
    "distance": "disagreement",  # embedding distance: disagreement (1 - agreement, sec 4.1) or hellinger
    "embed_baselines": False,  # also embed the n-gram and n-NN baselines (the paper's t-SNE holds recurrent nets)
    "perplexity": 30.0,  # t-SNE perplexity; lowered to (models - 1) / 3 when a corpus has few models
    "seed": 0,  # t-SNE random state
}
DISTANCES = ("disagreement", "hellinger")
GRU_FORMS = ("gru-paper", "gru")  # the GRU the findings compare, in order of preference (the papers' form first)
IDENTICAL = 1e-6  # a distance this small is two copies of the same predictions (float16 resolution is 5e-4)
CHUNK = 2_000  # positions per block of the Hellinger Gram matrix (bounds memory for many models)


def agreement_matrix(argmax: np.ndarray) -> np.ndarray:
    """(M, M) fraction of positions where two models' most likely characters agree, from (M, K) argmaxes."""
    return np.stack([(argmax == row[None, :]).mean(axis=1) for row in argmax])


def hellinger_matrix(logps: list[np.ndarray]) -> np.ndarray:
    """(M, M) root mean square over positions of the Hellinger distance, from M (K, V) log-probability arrays.

    sum_v (sqrt p - sqrt q)^2 = |sqrt p|^2 + |sqrt q|^2 - 2 sqrt p . sqrt q, so the mean over positions is a Gram
    matrix of the square-root distributions (accumulated in float64, in blocks of positions).
    """
    n_positions = logps[0].shape[0]
    gram = np.zeros((len(logps), len(logps)))
    for lo in range(0, n_positions, CHUNK):
        roots = np.stack([np.exp(0.5 * lp[lo : lo + CHUNK].astype(np.float64)).ravel() for lp in logps])
        gram += roots @ roots.T
    norms = np.diag(gram)
    squared = (norms[:, None] + norms[None, :] - 2 * gram) / (2 * n_positions)  # mean of H^2 over positions
    return np.sqrt(np.clip(squared, 0.0, None))


def embed(distance: np.ndarray, perplexity: float, seed: int = 0) -> np.ndarray:
    """(M, 2) t-SNE of M models from their (M, M) distances; perplexity lowered to (M - 1) / 3 when needed.

    Models with identical predictions (distance 0) are embedded once and share their point: t-SNE's normalisation
    would push two copies of one point apart, as far as other neighbours when there are only a few models.
    Initialised with classical MDS of the distances (deterministic, keeps the global layout), scaled as
    scikit-learn scales its PCA initialisation.
    """
    copy_of = (distance <= IDENTICAL).argmax(axis=1)  # the first model with the same predictions (itself if none)
    unique = np.unique(copy_of)
    d = np.array(distance[np.ix_(unique, unique)], dtype=np.float64)
    m = unique.size
    if m < 3:
        coords = np.column_stack([np.arange(m) * float(d.max(initial=0.0)), np.zeros(m)])
    else:
        centring = np.eye(m) - 1 / m
        values, vectors = np.linalg.eigh(-0.5 * centring @ (d**2) @ centring)
        init = vectors[:, -2:][:, ::-1] * np.sqrt(np.clip(values[-2:][::-1], 1e-12, None))
        init = init / max(init[:, 0].std(), 1e-12) * 1e-4
        tsne = TSNE(
            n_components=2, perplexity=min(perplexity, (m - 1) / 3), metric="precomputed", init=init,
            method="exact", random_state=seed,
        )  # fmt: skip  # exact: a few dozen models cost nothing; Barnes-Hut is for thousands of points
        coords = tsne.fit_transform(d)
    return coords[np.searchsorted(unique, copy_of)]


def _describe(row: pd.Series) -> dict:
    """What the figure encodes for a model: type, budget (or n for a baseline), depth, and a short label."""
    family = row["family"]
    if family == "neural":
        budget = row["budget"] if pd.notna(row["budget"]) else np.nan  # a model sized to no budget row has none
        scale = f"{int(budget)}" if pd.notna(budget) else f"H{int(row['size'])}"
        label = f"{TYPE_LABELS.get(row['arch'], row['arch'])} {scale} L{int(row['layers'])} s{int(row['seed'])}"
        return {"type": TYPE_LABELS.get(row["arch"], row["arch"]), "budget": budget, "layers": int(row["layers"]),
                "n": np.nan, "label": label}  # fmt: skip
    kind = kinds.kind(family)  # a baseline: its kind names it ("5-gram", "3-NN", ...)
    label, kind_label = kind.order_label(int(row["n"])), TYPE_LABELS.get(family, kind.label)
    return {"type": kind_label, "budget": np.nan, "layers": 0, "n": int(row["n"]), "label": label}


def compute(ctx: Context) -> pd.DataFrame:
    """One row per ordered pair of models of a corpus: their agreement and distance, each model's embedding."""
    split, how = ctx.settings["split"], ctx.settings["distance"]
    if how not in DISTANCES:
        raise UserError(f"distance must be one of {', '.join(DISTANCES)}, got {how!r}")
    if not isinstance(ctx.settings["embed_baselines"], bool):
        raise UserError(f"embed_baselines must be true or false, got {ctx.settings['embed_baselines']!r}")
    frames = []
    for key in ctx.corpus_keys():
        neural = ctx.models(corpus=key, required=False)
        neural = report_order(neural, "layers", "seed")
        baselines = ctx.index[(ctx.index["corpus_key"] == key) & ctx.index["family"].isin(kinds.baselines())]
        models = pd.concat([neural, baselines.sort_values(["family", "n"])], ignore_index=True)
        if models.empty:
            continue
        positions = sample_positions(ctx.corpus(key).split(split).size - 1)
        argmax, logps, ce = [], [], []
        for _, row in models.iterrows():
            preds = ctx.predictions(row, split)
            argmax.append(preds.argmax_at(positions))
            logps.append(preds.distributions(positions))
            ce.append(float(preds.nll.mean()))
        agree = agreement_matrix(np.stack(argmax))
        hell = hellinger_matrix(logps)
        distance = hell if how == "hellinger" else 1.0 - agree
        embedded = np.flatnonzero(
            np.ones(len(models), bool) if ctx.settings["embed_baselines"] else models["family"].to_numpy() == "neural"
        )  # the recurrent nets, as Fig 1 right (a corpus of baselines only: those)
        embedded = embedded if embedded.size else np.arange(len(models))
        coords = np.full((len(models), 2), np.nan)  # a baseline left out of the embedding has no point
        coords[embedded] = embed(distance[np.ix_(embedded, embedded)], ctx.settings["perplexity"], ctx.settings["seed"])
        described = pd.DataFrame([_describe(r) for _, r in models.iterrows()])
        m = len(models)
        a, b = np.repeat(np.arange(m), m), np.tile(np.arange(m), m)
        frames.append(pd.DataFrame({
            "corpus": models["corpus"].iloc[0], "model_id": models["model_id"].to_numpy()[a],
            "label": described["label"].to_numpy()[a], "family": models["family"].to_numpy()[a],
            "arch": models["arch"].to_numpy()[a], "type": described["type"].to_numpy()[a],
            "budget": described["budget"].to_numpy()[a], "layers": described["layers"].to_numpy()[a],
            "n": described["n"].to_numpy()[a], "ce_nats": np.array(ce)[a],
            "tsne_x": coords[a, 0], "tsne_y": coords[a, 1],
            "embedded": np.isin(np.arange(m), embedded)[a],
            "other_id": models["model_id"].to_numpy()[b], "other_label": described["label"].to_numpy()[b],
            "other_arch": models["arch"].to_numpy()[b],
            "other_type": described["type"].to_numpy()[b], "other_budget": described["budget"].to_numpy()[b],
            "agreement": agree[a, b], "hellinger": hell[a, b],
            "positions": positions.size, "embedded_by": how,
        }))  # fmt: skip
    if not frames:
        ctx.models()  # nothing at all: the MissingInput naming the command
    return pd.concat(frames, ignore_index=True)


def per_model(df: pd.DataFrame) -> pd.DataFrame:
    """One row per model: its embedding, and the other model it agrees with most."""
    others = df[df["model_id"] != df["other_id"]]
    best = others.loc[others.groupby(["corpus", "model_id"])["agreement"].idxmax()]
    best = best.set_index(["corpus", "model_id"])[["other_label", "agreement"]]
    models = df.drop_duplicates(["corpus", "model_id"]).set_index(["corpus", "model_id"])
    cols = ["label", "type", "budget", "layers", "n", "ce_nats", "tsne_x", "tsne_y"]
    out = models[cols].join(best.rename(columns={"other_label": "agrees most with", "agreement": "its agreement"}))
    return out.reset_index().drop(columns="model_id")


def type_agreement(df: pd.DataFrame) -> pd.DataFrame:
    """Mean agreement between the recurrent models of two architectures within one budget row (distinct models only).

    Within a budget, so that an LSTM of another size does not dilute the LSTM-GRU comparison; LSTM with LSTM is the
    agreement between seeds, the yardstick for the others.
    """
    df = df.assign(budget=df["budget"].fillna(-1), other_budget=df["other_budget"].fillna(-1))  # -1: no budget row
    pairs = df[(df["model_id"] != df["other_id"]) & (df["budget"] == df["other_budget"]) & (df["family"] == "neural")]
    return pairs.groupby(["corpus", "budget", "arch", "other_arch"], as_index=False)["agreement"].mean()


PAPER_TYPES = ("lstm", "rnn", *GRU_FORMS)  # the types of Fig 1 right


def _reference_budget(df: pd.DataFrame, corpus: str) -> float | None:
    """The budget row the findings compare types in: the one with most of the paper's types, LSTM, GRU (either
    form) and RNN (the largest on ties); -1 stands for models sized to no row."""
    neural = df[(df["corpus"] == corpus) & (df["family"] == "neural")].drop_duplicates("model_id")
    if neural.empty:
        return None
    neural = neural.assign(budget=neural["budget"].fillna(-1), kind=neural["arch"].replace({"gru-paper": "gru"}))
    types = neural[neural["arch"].isin(PAPER_TYPES)].groupby("budget")["kind"].nunique()
    if types.empty:
        return None
    return float(types[types == types.max()].index.max())


def _gru(table: pd.DataFrame, corpus: str, budget: float | None) -> str | None:
    """The GRU the findings compare in a budget row: the papers' form when there, else torch's; None without one."""
    here = set(table.loc[(table["corpus"] == corpus) & (table["budget"] == budget), "arch"])
    return next((g for g in GRU_FORMS if g in here), None)


def _fig1(df: pd.DataFrame, corpus: str) -> pd.DataFrame:
    """The pairs of a corpus's models of Fig 1 right's types, RNN, LSTM and GRU (either form), with each other."""
    return df[(df["corpus"] == corpus) & (df["family"] == "neural") & df["arch"].isin(PAPER_TYPES)
              & df["other_arch"].isin(PAPER_TYPES)]  # fmt: skip


def nearest_neighbours(df: pd.DataFrame, corpus: str) -> pd.DataFrame:
    """Each of a corpus's Fig 1 models (RNN, LSTM, GRU of every depth and size; LSTM seeds are LSTMs, Levy's
    ablations and the baselines are left out) and its nearest neighbour among them: the other model with the highest
    agreement (Karpathy et al. sec 4.1), read from the agreement matrix, not from the 2-D t-SNE, whose distances are
    distorted. `own` is True when that neighbour is of the model's group (RNN, or gated: LSTM or GRU); a tie between
    the best of each group counts against it.
    """
    fig1 = _fig1(df, corpus)
    ids = list(dict.fromkeys(fig1["model_id"]))
    agree = (
        fig1.pivot(index="model_id", columns="other_id", values="agreement").loc[ids, ids].to_numpy(float, copy=True)
    )
    np.fill_diagonal(agree, -np.inf)  # a model is not its own neighbour
    models = fig1.drop_duplicates("model_id").set_index("model_id").loc[ids]
    rnn = (models["arch"] == "rnn").to_numpy()
    same = rnn[:, None] == rnn[None, :]
    best_same = np.where(same, agree, -np.inf).max(axis=1)
    best_other = np.where(~same, agree, -np.inf).max(axis=1)
    own = best_same > best_other
    neighbour = np.where(own, np.where(same, agree, -np.inf).argmax(1), np.where(~same, agree, -np.inf).argmax(1))
    return pd.DataFrame({
        "label": models["label"].to_numpy(), "arch": models["arch"].to_numpy(),
        "group": np.where(rnn, "rnn", "gated"), "neighbour": models["label"].to_numpy()[neighbour],
        "neighbour_arch": models["arch"].to_numpy()[neighbour], "agreement": np.maximum(best_same, best_other),
        "own": own,
    })  # fmt: skip


def clusters(df: pd.DataFrame, corpus: str) -> dict | None:
    """Fig 1 right's clusters checked on the agreement matrix of its whole population (every depth and size, as the
    t-SNE shows them): Karpathy et al. sec 4.1 read the figure as "the LSTM and the GRU make similar predictions
    while the RNNs form their own cluster". None unless there are 2 RNNs, 2 gated models, an LSTM and a GRU.

    Two measures: how many models of each group have a nearest neighbour of their group (against `chance`, the
    share of the other models in that group, what a neighbour drawn at random would give), and, not hanging on one
    neighbour, each model's mean agreement with the others of its group and of the other group, averaged over the
    group's models. A group `keeps together` when more than half its models, and more than chance, have a
    neighbour of their group.
    """
    nn = nearest_neighbours(df, corpus)
    rnn, gated = nn["group"] == "rnn", nn["group"] == "gated"
    if rnn.sum() < 2 or gated.sum() < 2 or not (nn["arch"] == "lstm").any() or not nn["arch"].isin(GRU_FORMS).any():
        return None
    pairs = _fig1(df, corpus)
    pairs = pairs[pairs["model_id"] != pairs["other_id"]]
    pairs = pairs.assign(rnn=pairs["arch"] == "rnn", other_rnn=pairs["other_arch"] == "rnn")

    def mean_agreement(of_rnn: bool, with_rnn: bool) -> float:  # per model of the group, then over the group
        hit = pairs[(pairs["rnn"] == of_rnn) & (pairs["other_rnn"] == with_rnn)]
        return float(hit.groupby("model_id")["agreement"].mean().mean())

    m = len(nn)
    out = {"rnns": int(rnn.sum()), "gated": int(gated.sum()), "rnn_own": int(nn.loc[rnn, "own"].sum()),
           "gated_own": int(nn.loc[gated, "own"].sum()), "rnn_chance": (rnn.sum() - 1) / (m - 1),
           "gated_chance": (gated.sum() - 1) / (m - 1), "rnn_rnn": mean_agreement(True, True),
           "rnn_gated": mean_agreement(True, False), "gated_gated": mean_agreement(False, False)}  # fmt: skip
    for group, size in (("rnn", "rnns"), ("gated", "gated")):
        share = out[f"{group}_own"] / out[size]
        out[f"{group}_together"] = bool(share > 0.5 and share > out[f"{group}_chance"])
    return out


def _pair(table: pd.DataFrame, corpus: str, budget: float | None, a: str | None, b: str | None) -> float | None:
    hit = table[(table["corpus"] == corpus) & (table["budget"] == budget) & (table["arch"] == a)
                & (table["other_arch"] == b)]  # fmt: skip
    return float(hit["agreement"].iloc[0]) if len(hit) else None


# ------------------------------------------------------------------------------------- findings

FAINT = 0.05  # LSTM and GRU closer to each other than to the RNN by less than this: a faint separation (5 points)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per corpus: in its reference budget row, the agreement of each pair of Fig 1's types; across Fig 1's
    population, the nearest-neighbour counts and the mean agreement within and across the RNNs and the gated
    networks; the baseline closest to a recurrent net. Every number a finding states is here."""
    types = type_agreement(df)
    rows = []
    for corpus, sub in df.groupby("corpus", sort=False):
        row = {"corpus": corpus, "models": sub["model_id"].nunique(), "positions": int(sub["positions"].iloc[0]),
               "neural": sub.loc[sub["family"] == "neural", "model_id"].nunique(), "faint": FAINT}  # fmt: skip
        budget = _reference_budget(df, corpus)
        gru = _gru(types, corpus, budget)
        pairs = {"lstm_gru": ("lstm", gru), "lstm_rnn": ("lstm", "rnn"), "gru_rnn": (gru, "rnn"),
                 "lstm_lstm": ("lstm", "lstm")}  # fmt: skip
        found = {k: _pair(types, corpus, budget, *p) for k, p in pairs.items()}
        if None not in (found["lstm_gru"], found["lstm_rnn"], found["gru_rnn"]):
            row |= {"budget": budget, "gru": ARCH_LABELS[gru], **{k: v for k, v in found.items() if v is not None},
                    "margin": found["lstm_gru"] - max(found["lstm_rnn"], found["gru_rnn"])}  # fmt: skip
        if (c := clusters(df, corpus)) is not None:
            row |= c
        grams = sub[(sub["family"] != "neural") & (sub["other_type"].isin(sub.loc[sub["family"] == "neural", "type"]))]
        grams = grams[grams["other_id"].isin(sub.loc[sub["family"] == "neural", "model_id"])]
        if len(grams):
            best = grams.loc[grams["agreement"].idxmax()]
            row |= {"baseline": best["label"], "baseline_agreement": best["agreement"],
                    "baseline_with": best["other_label"]}  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)


def _values(s: pd.Series) -> dict:
    return {k: v for k, v in s.items() if not (isinstance(v, float) and np.isnan(v))}


def findings(summ: pd.DataFrame) -> list[Finding]:
    """Per corpus: Fig 1 right's two readings (the claims), then what the paper did not ask."""
    out = []
    for _, s in summ.iterrows():
        v, corpus = _values(s), s["corpus"]
        if "lstm_gru" in v:
            # reproduced when the LSTM and GRU agree more with each other than either with the RNN by at least
            # FAINT; partly when by less (a faint separation); not reproduced when they are not closer
            verdict = "reproduced" if s["margin"] >= FAINT else "partly" if s["margin"] > 0 else "not reproduced"
            row = "{budget} budget row" if s["budget"] > 0 else "models of no budget row"
            out.append(Finding(
                "{corpus}, " + row + ": argmax agreement LSTM–{gru} {lstm_gru:.1%}, LSTM–RNN {lstm_rnn:.1%}, "
                "{gru}–RNN {gru_rnn:.1%}; the paper: LSTM and GRU alike",
                v, verdict, "ma-fig1-lstm-gru", corpus))  # fmt: skip
        else:
            out.append(Finding("{corpus}: no budget row holds an LSTM, a GRU and an RNN to compare", v, "untested",
                               "ma-fig1-lstm-gru", corpus))  # fmt: skip
        if "rnn_own" in v:
            # reproduced when most RNNs (and more than chance) have an RNN as nearest neighbour and the RNNs agree
            # more with each other than with the gated networks; partly when one of the two holds
            holds = int(bool(s["rnn_together"])) + int(s["rnn_rnn"] > s["rnn_gated"])
            verdict = ("not reproduced", "partly", "reproduced")[holds]
            out.append(Finding(
                "{corpus}: {rnn_own} of {rnns} RNNs have an RNN as nearest neighbour (chance {rnn_chance:.0%}); "
                "RNNs agree {rnn_rnn:.1%} among themselves, {rnn_gated:.1%} with LSTMs and GRUs",
                v, verdict, "ma-fig1-rnn-cluster", corpus))  # fmt: skip
            out.append(Finding(
                "{corpus}: {gated_own} of {gated} LSTMs and GRUs have an LSTM or GRU as nearest neighbour (chance "
                "{gated_chance:.0%}); they agree {gated_gated:.1%} among themselves", v, corpus=corpus))  # fmt: skip
        else:
            out.append(Finding("{corpus}: too few RNNs, LSTMs or GRUs (two of each group, an LSTM and a GRU) to "
                               "count neighbours", v, "untested", "ma-fig1-rnn-cluster", corpus))  # fmt: skip
        if "lstm_lstm" in v and "lstm_gru" in v:
            out.append(Finding(
                "{corpus}: LSTMs of the {budget} row agree with each other on {lstm_lstm:.1%}; the LSTM and "
                "{gru} on {lstm_gru:.1%}" if s["budget"] > 0 else
                "{corpus}: LSTMs agree with each other on {lstm_lstm:.1%}; the LSTM and {gru} on {lstm_gru:.1%}",
                v, corpus=corpus))  # fmt: skip
        if "baseline" in v:
            out.append(Finding(
                "{corpus}: the baseline closest to a recurrent net is the {baseline}, agreeing with {baseline_with} "
                "on {baseline_agreement:.1%}", v, corpus=corpus))  # fmt: skip
    return out


class ModelAgreement(Analysis):
    name = "model_agreement"
    title = TITLE
    question = QUESTION
    source = PAPER_SOURCE
    needs = NEEDS
    settings = SETTINGS
    claims = (
        Claim("ma-fig1-lstm-gru", "Karpathy et al. (2016) sec 4.1, Fig 1 right",
              "the LSTM and the GRU make similar predictions (agreement on the most likely character)"),
        Claim("ma-fig1-rnn-cluster", "Karpathy et al. (2016) sec 4.1, Fig 1 right", "the RNNs form their own cluster"),
    )  # fmt: skip
    shows = (
        "Fig 1 right: a t-SNE of the recurrent models from how often two models agree on the most likely next "
        "character (colour: type, size: budget row, marker: depth), beside the mean agreement between types."
    )
    deviations = (
        "Agreement is counted at the fixed sample of test positions whose full distributions every model stores "
        "(evenly spaced blocks of consecutive positions), not at every test position.",
        "Nearest neighbours are read from the agreement matrix, not from the t-SNE map, whose distances t-SNE "
        "distorts; the t-SNE's perplexity is lowered to a third of the models when there are few.",
        "The embedding holds every recurrent net of the profile (Levy's ablations too), one per corpus; the n-gram and "
        "n-NN baselines are compared in the heatmap and the tables, not embedded (`--set embed_baselines=true`).",
        "Types are compared within one budget row (the one with most of Fig 1's types), so a model of another size "
        "does not dilute the LSTM-GRU comparison; the cluster counts take every depth and size, as Fig 1 right.",
    )

    def compute(self, ctx: Context) -> Result:
        df = compute(ctx)
        summ = summary(df)
        return Result(df, findings(summ), tables={"summary": summ})

    def plot(self, result: Result):
        return draw(result.table)

    def summary_table(self, result: Result) -> pd.DataFrame:
        """Per corpus: the agreement of Fig 1's types in the reference row and the nearest-neighbour counts."""
        s = result.tables["summary"]
        pct = lambda col: (100 * s[col]).round(1) if col in s else np.nan  # noqa: E731
        count = lambda own, of: [
            f"{int(a)} of {int(b)}" if pd.notna(a) else "—"
            for a, b in zip(s.get(own, pd.Series(np.nan, s.index)), s.get(of, pd.Series(np.nan, s.index)))  # noqa: E731
        ]
        return pd.DataFrame({
            "corpus": s["corpus"],
            "budget row": [f"{int(b)}" if pd.notna(b) and b > 0 else "—"
                           for b in s.get("budget", pd.Series(np.nan, s.index))],
            "LSTM–GRU %": pct("lstm_gru"), "LSTM–RNN %": pct("lstm_rnn"), "GRU–RNN %": pct("gru_rnn"),
            "LSTM–LSTM %": pct("lstm_lstm"), "RNNs with an RNN neighbour": count("rnn_own", "rnns"),
            "LSTMs/GRUs with a gated neighbour": count("gated_own", "gated"),
        })  # fmt: skip

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        return {"every model: its t-SNE point and the model it agrees with most": per_model(result.table)}


ANALYSIS = ModelAgreement()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
