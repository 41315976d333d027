"""Does a recurrent net learn short contexts first? Karpathy et al. (2016) sec 4.3 "Training dynamics", Fig 5 right.

The paper compares snapshots of its LSTM over the first 3 epochs with trained n-NN models (a one-hidden-layer
net that sees the last n characters) by the symmetric KL divergence between their predictive distributions on
the test set, and by the difference in test loss: "in the first few iterations the LSTM behaves like the 1-NN
model but then diverges from it soon after. The LSTM then behaves most like the 2-NN, 3-NN, and 4-NN models in
turn" (it "grows" its competence over longer dependencies).

For every snapshot of every recurrent model that has them (the LSTM, GRU, RNN and the ablations alike) we measure

    symmetric KL(snapshot, baseline) = mean over positions of sum_v (p_v - q_v)(log p_v - log q_v)   (nats)

to each n-NN (n = 1..6) and to each KenLM n-gram (n = 1..9: exact smoothed counts, so the curves mean something
even where an n-NN is undertrained), at the fixed sample of test positions where every stored Predictions keeps
its full distribution, and the test loss (exact, every position) of the snapshot and of each baseline;
delta loss = baseline loss - snapshot loss, positive where the recurrent net is better (the paper's sign).

Precision. Distributions are stored in float16 (charlm.predictions): each stored log-probability errs by at most
2^-11 of its size. The `kl_bound` column is an upper bound on what that does to each KL: the module bound of
charlm.predictions.kl_error_bound in both directions, with |a - b| <= |a| + |b| and e^x - 1 <= x e^x so that it
decomposes into the same dot products as the KL itself.
"""

from __future__ import annotations

import sys
from functools import cache, partial

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from charlm.predictions import FLOAT16_UNIT, sample_positions
from corpora.errors import run_cli

from .common import analysis_main, source_digest, style
from .context import Context, MissingInput, Needs

TITLE = "Training dynamics against n-NN and n-gram baselines"
QUESTION = (
    "During training, does a recurrent net first predict like a model of 1 previous character, then 2, 3 and 4 in turn?"
)
PAPER_SOURCE = (
    "Karpathy et al. (2016), sec 4.3 and Fig 5 right (3-layer LSTM on War and Peace over its first 3 epochs: "
    "closest to the 1-NN in the first iterations, then to the 2-, 3- and 4-NN in turn; curves only, no numbers)"
)
NNN_N = tuple(range(1, 7))
NGRAM_N = tuple(range(1, 10))
NEEDS = Needs(ngram_n=NGRAM_N, nnn_n=NNN_N, snapshots=True)
SETTINGS = {
    "split": "test",  # split the snapshots are compared on
    "max_epochs": 3.0,  # snapshots taken within this many epochs of training (Fig 5: the first 3)
    "nnn_n": list(NNN_N),  # n-NN orders compared (Fig 5: 1..6)
    "ngram_n": list(NGRAM_N),  # KenLM orders compared (exact counts, n = 1..9)
}
ARCH_LABELS = {
    "rnn": "RNN", "gru": "GRU", "lstm": "LSTM", "lstm-srnn": "LSTM - S-RNN", "lstm-srnn-out": "LSTM - S-RNN - OUT",
    "lstm-srnn-hidden": "LSTM - S-RNN - HIDDEN", "lstm-gates": "LSTM - GATES",
}  # fmt: skip
FAMILY_LABELS = {"nnn": "n-NN", "ngram": "n-gram"}
CHUNK = 2_000  # positions per block: the dot products run in float64 without float64 copies of everything


def divergences(snapshots: list[np.ndarray], baselines: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(S, B) mean symmetric KL between every snapshot and every baseline, and (S, B) its float16 error bound.

    Each input is (K, V) log-probabilities at the same K positions. sum_v (p - q)(a - b) expands into
    p.a + q.b - p.b - q.a, so the means over positions are Gram-like products accumulated over blocks of positions
    (one pass over each array instead of one per pair).
    """

    def terms(logps: list[np.ndarray], lo: int):
        a = np.stack([x[lo : lo + CHUNK].astype(np.float64).ravel() for x in logps])  # (M, n) log-probabilities
        p = np.exp(a)
        return a, p, p * a  # log p, p, p log p (<= 0)

    n_positions = snapshots[0].shape[0]
    S, B = len(snapshots), len(baselines)
    self_p, self_q, p_a2, q_b2 = np.zeros(S), np.zeros(B), np.zeros(S), np.zeros(B)
    p_b, q_a, pa_b, qb_a = np.zeros((S, B)), np.zeros((S, B)), np.zeros((S, B)), np.zeros((S, B))
    for lo in range(0, n_positions, CHUNK):
        a, p, pa = terms(snapshots, lo)
        b, q, qb = terms(baselines, lo)
        self_p += pa.sum(1)
        self_q += qb.sum(1)
        p_a2 += (pa * a).sum(1)
        q_b2 += (qb * b).sum(1)
        p_b += p @ b.T
        q_a += a @ q.T
        pa_b += pa @ b.T
        qb_a += a @ qb.T
    kl = np.maximum((self_p[:, None] + self_q[None, :] - p_b - q_a) / n_positions, 0.0)  # >= 0 up to rounding
    # bound: u e^{u max|a|} sum p (|a| + 1)(|a| + |b|), both directions; logs are <= 0, so |a| |b| = a b
    c_p = np.exp(FLOAT16_UNIT * np.array([-np.min(x.astype(np.float64)) for x in snapshots]))
    c_q = np.exp(FLOAT16_UNIT * np.array([-np.min(x.astype(np.float64)) for x in baselines]))
    one_way_p = c_p[:, None] * (p_a2[:, None] + pa_b - self_p[:, None] - p_b)
    one_way_q = c_q[None, :] * (q_b2[None, :] + qb_a - self_q[None, :] - q_a)
    return kl, FLOAT16_UNIT * (one_way_p + one_way_q) / n_positions


@cache
def _source() -> str:
    """The hash of this analysis's code: arrays cached by an older version of it are never read."""
    return source_digest(sys.modules[__name__])


def compute(ctx: Context) -> pd.DataFrame:
    """One row per (model, snapshot, baseline): symmetric KL and its bound, test losses and their difference."""
    frames = [frame for key in ctx.corpus_keys() for frame in _corpus_frames(ctx, key)]
    if not frames:
        ctx.models()  # no recurrent model at all: the MissingInput naming the command
        raise MissingInput(
            f"no model has a training snapshot within its first {ctx.settings['max_epochs']:g} epochs: train with "
            "charlm.train (snapshots > 0)"
        )
    return pd.concat(frames, ignore_index=True)


class _Baselines:
    """The n-NN and n-gram baselines of one corpus: rows, test losses, and their distributions read on demand."""

    def __init__(self, ctx: Context, key: str, positions: np.ndarray):
        split = ctx.settings["split"]
        self.ctx, self.split, self.positions = ctx, split, positions
        self.rows = pd.DataFrame(
            [ctx.baseline("nnn", key, n) for n in ctx.settings["nnn_n"]]
            + [ctx.baseline("ngram", key, n) for n in ctx.settings["ngram_n"]]
        )  # any missing order is a MissingInput naming the command that builds it
        self.loss = np.array([ctx.predictions(b, split).nll.mean() for _, b in self.rows.iterrows()])
        self._logps = None

    def logps(self) -> list[np.ndarray]:
        if self._logps is None:  # only when some model's divergences are not cached yet
            self._logps = [
                self.ctx.predictions(b, self.split).distributions(self.positions) for _, b in self.rows.iterrows()
            ]
        return self._logps


def _measure(ctx: Context, model: pd.Series, files: list[str], baselines: _Baselines) -> dict[str, np.ndarray]:
    preds = [ctx.predictions(model, baselines.split, snapshot=f) for f in files]
    kl, bound = divergences([p.distributions(baselines.positions) for p in preds], baselines.logps())
    return {"kl": kl, "bound": bound, "loss": np.array([p.nll.mean() for p in preds])}


def _corpus_frames(ctx: Context, key: str) -> list[pd.DataFrame]:
    split = ctx.settings["split"]
    models = ctx.models(corpus=key, required=False)
    if models.empty:
        return []
    with_snapshots = models[models["snapshots"].fillna(0) > 0]
    if with_snapshots.empty:
        ctx.snapshots(models.iloc[0])  # the MissingInput naming how to train with snapshots
    positions = sample_positions(ctx.corpus(key).split(split).size - 1)
    baselines = _Baselines(ctx, key, positions)
    train_chars = ctx.corpus(key).split("train").size
    frames = []
    for _, model in with_snapshots.iterrows():
        snaps = ctx.snapshots(model)
        snaps = snaps[snaps["chars"] <= ctx.settings["max_epochs"] * train_chars].reset_index(drop=True)
        if snaps.empty:
            continue
        cache_key = {
            "source": _source(), "model": ctx.digest(model),
            "snapshots": list(snaps["sha256"]),
            "baselines": [ctx.digest(b) for _, b in baselines.rows.iterrows()], "split": split,
            "positions": int(positions.size),
        }  # fmt: skip
        got = ctx.cached("training_dynamics", cache_key, partial(_measure, ctx, model, list(snaps["file"]), baselines))
        S, B = got["kl"].shape
        s, b = np.repeat(np.arange(S), B), np.tile(np.arange(B), S)
        frame = pd.DataFrame({
            "corpus": model["corpus"], "model_id": model["model_id"], "arch": model["arch"],
            "layers": int(model["layers"]), "size": int(model["size"]), "budget": model["budget"],
            "seed": int(model["seed"]), "group_id": model["group_id"],
            "step": snaps["step"].to_numpy()[s], "chars": snaps["chars"].to_numpy()[s],
            "epoch": snaps["chars"].to_numpy()[s] / train_chars,
            "baseline": baselines.rows["family"].to_numpy()[b], "n": baselines.rows["n"].to_numpy()[b].astype(int),
            "sym_kl": got["kl"][s, b], "kl_bound": got["bound"][s, b], "loss": got["loss"][s],
            "baseline_loss": baselines.loss[b], "delta_loss": baselines.loss[b] - got["loss"][s],
            "positions": int(positions.size),
        })  # fmt: skip
        frame["closest"] = frame["sym_kl"] == frame.groupby(["step", "baseline"])["sym_kl"].transform("min")
        frames.append(frame)
    return frames


# ----------------------------------------------------------------------------------------- the report


def label(r) -> str:
    budget = f" {int(r['budget'])}" if pd.notna(r["budget"]) else f" H{int(r['size'])}"
    layers = f" L{int(r['layers'])}" if int(r["layers"]) > 1 else ""
    return f"{ARCH_LABELS.get(r['arch'], r['arch'])}{budget}{layers} s{int(r['seed'])}"


def closest_orders(df: pd.DataFrame, family: str = "nnn") -> pd.DataFrame:
    """Per model and snapshot: the order n of the closest baseline of `family`, and its KL."""
    best = df[(df["baseline"] == family) & df["closest"]].sort_values(["corpus", "model_id", "step", "n"])
    return best.drop_duplicates(["corpus", "model_id", "step"])


def resolved(df: pd.DataFrame) -> pd.Series:
    """Per model and snapshot: does the closest n-NN beat the second closest by more than their float16 bounds?"""
    nnn = df[df["baseline"] == "nnn"].sort_values("sym_kl")
    first_two = nnn.groupby(["corpus", "model_id", "step"]).head(2).groupby(["corpus", "model_id", "step"])
    return first_two.apply(lambda g: len(g) < 2 or np.diff(g["sym_kl"].to_numpy())[0] > g["kl_bound"].sum())


def in_turn(orders: list[int]) -> bool:
    """The paper's pattern: the closest order never goes back down, and it moves through at least three orders."""
    return all(b >= a for a, b in zip(orders, orders[1:])) and len(set(orders)) >= 3


def reference(df: pd.DataFrame, corpus: str) -> str | None:
    """The model the figure details on a corpus: the LSTM of the largest budget (lowest seed), else any model."""
    models = df[df["corpus"] == corpus].drop_duplicates("model_id")
    lstm = models[models["arch"] == "lstm"].assign(scale=lambda d: d["budget"].fillna(d["size"]))
    pick = lstm if len(lstm) else models.assign(scale=models["size"])
    return pick.sort_values(["scale", "seed"], ascending=[False, True])["model_id"].iloc[0] if len(pick) else None


def plot(df: pd.DataFrame):
    style()
    corpora_ = list(dict.fromkeys(df["corpus"]))
    fig, axes = plt.subplots(len(corpora_), 4, figsize=(20, 4.3 * len(corpora_)), squeeze=False)
    for row, corpus in zip(axes, corpora_):
        sub = df[df["corpus"] == corpus]
        ref = sub[sub["model_id"] == reference(df, corpus)]
        name = label(ref.iloc[0])
        for ax, family in zip(row[:2], ("nnn", "ngram")):
            part = ref[ref["baseline"] == family]
            palette = sns.color_palette("viridis", part["n"].nunique())
            part = part.assign(sym_kl=part["sym_kl"].clip(lower=1e-4))  # a log axis: an exact 0 drawn at 1e-4
            sns.lineplot(data=part, x="chars", y="sym_kl", hue="n", palette=palette, marker="o", ax=ax, legend="full")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("training characters seen by the snapshot")
            ax.set_ylabel("symmetric KL on test (nats/char)")
            ax.set_title(f"{corpus}: {name} vs {FAMILY_LABELS[family]}")
            ax.legend(title=f"{FAMILY_LABELS[family]} n", fontsize=7, title_fontsize=7, ncol=2)
        part = ref[ref["baseline"] == "nnn"]
        sns.lineplot(data=part, x="chars", y="delta_loss", hue="n", palette="viridis", marker="o", ax=row[2])
        row[2].axhline(0, color="black", lw=0.8)
        row[2].set_xscale("log")
        row[2].set_xlabel("training characters seen by the snapshot")
        row[2].set_ylabel("n-NN loss - snapshot loss (nats/char)")
        row[2].set_title(f"{corpus}: {name}, delta loss (> 0: the net is better)")
        row[2].legend(title="n-NN n", fontsize=7, title_fontsize=7, ncol=2)
        order = closest_orders(sub).assign(model=lambda d: d.apply(label, axis=1))
        sns.lineplot(data=order, x="chars", y="n", hue="model", style="model", markers=True, dashes=False, ax=row[3],
                     drawstyle="steps-post")  # fmt: skip
        row[3].set_xscale("log")
        row[3].set_yticks(sorted(sub.loc[sub["baseline"] == "nnn", "n"].unique()))
        row[3].set_xlabel("training characters seen by the snapshot")
        row[3].set_ylabel("closest n-NN (n)")
        row[3].set_title(f"{corpus}: the closest n-NN of every model's snapshots")
        row[3].legend(fontsize=6.5, ncol=2)
    fig.tight_layout()
    return fig


def _sequence(orders: pd.DataFrame) -> str:
    return ", ".join(f"{int(n)}" for n in orders["n"])


def caption(df: pd.DataFrame) -> str:
    parts = []
    for corpus, sub in df.groupby("corpus", sort=False):
        nnn, grams = closest_orders(sub, "nnn"), closest_orders(sub, "ngram")
        ref = reference(df, corpus)
        r = nnn[nnn["model_id"] == ref]
        g = grams[grams["model_id"] == ref]
        epochs = r["epoch"].to_numpy()
        text = (
            f"On {corpus}, the {label(r.iloc[0])} snapshots at {len(r)} points from {epochs[0]:.4f} to "
            f"{epochs[-1]:.2f} epochs are closest to the n-NN of n = {_sequence(r)} in turn "
            f"(symmetric KL to the closest {r['sym_kl'].iloc[0]:.3f} at the first snapshot, {r['sym_kl'].iloc[-1]:.3f} "
            f"at the last) and to the KenLM n-gram of n = {_sequence(g)}"
        )
        text += (
            "; that is the paper's pattern (the closest order only grows, through at least three orders)."
            if in_turn(list(r["n"]))
            else "; that is not the paper's clean progression through the orders."
        )
        others = [f"{label(m.iloc[0])}: {_sequence(m)}" for mid, m in nnn.groupby("model_id", sort=False) if mid != ref]
        if others:
            text += " Closest n-NN per snapshot for the other models: " + "; ".join(others) + "."
        last = sub[(sub["model_id"] == ref) & (sub["baseline"] == "nnn")]
        last = last[last["step"] == last["step"].max()]
        beaten = sorted(last.loc[last["delta_loss"] > 0, "n"])
        text += (f" At its last snapshot it beats the n-NNs of n = {', '.join(map(str, beaten)) or 'none'} "
                 "in test loss.")  # fmt: skip
        parts.append(text)
    gap = resolved(df)
    parts.append(
        f"The float16 storage of the distributions changes no KL here by more than {df['kl_bound'].max():.4f} nats "
        f"(the bound of charlm.predictions); the closest n-NN is ahead of the second closest by more than both their "
        f"bounds at {int(gap.sum())} of {len(gap)} snapshots."
    )
    if df["epoch"].max() < 3:
        parts.append(
            f"These models trained for only {df['epoch'].max():.2f} epochs, so their snapshots span their whole "
            "training, not the paper's first 3 of 50 epochs; with 1-layer small models and undertrained higher-order "
            "n-NNs the later orders may never be reached. The KenLM n-grams are exact, so their curves are the firmer "
            "yardstick."
        )
    return " ".join(parts)


def summary(df: pd.DataFrame) -> str:
    items = []
    for corpus, sub in df.groupby("corpus", sort=False):
        ref = reference(df, corpus)
        orders = closest_orders(sub)
        r = orders[orders["model_id"] == ref]
        items.append(f"{corpus} {label(r.iloc[0])}: closest n-NN by snapshot {_sequence(r)}")
    return "; ".join(items) + " (paper: 1, then 2, 3, 4 in turn)"


def notes(df: pd.DataFrame) -> list[str]:
    return [
        "The paper compares a 3-layer LSTM over its first 3 epochs with the n-NNs; we compare every recurrent model "
        "that kept training snapshots (log-spaced over its first epochs), with the n-NNs and with the KenLM n-grams.",
        f"KL is averaged over the fixed sample of {int(df['positions'].iloc[0]):,} test positions where every stored "
        "Predictions keeps its full distribution (charlm.predictions.sample_positions); losses use every position.",
        "The paper's n-NNs cross-validated their hidden size with the full recipe; ours chose it from the profile's "
        "grid, so an undertrained higher-order n-NN can sit closer to a weak net than its order suggests.",
    ]


main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
