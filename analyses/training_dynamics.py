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
its full distribution (40 blocks of 500 positions: a snapshot is scored on them alone, a tenth of the split), and
the test loss (exact) of the snapshot and of each baseline on that same sample;
delta loss = baseline loss - snapshot loss, positive where the recurrent net is better (the paper's sign). Each row
also carries the epochs its model trained in all (`epochs_trained`, from its training curve).

Precision. Distributions are stored in float16 (charlm.predictions): each stored log-probability errs by at most
2^-11 of its size, or 2^-25 for the tiny ones of near-certain characters. The `kl_bound` column is an upper bound
on what that does to each KL: the module bound of charlm.predictions.kl_error_bound in both directions, with
|a - b| <= |a| + |b|, max(x, y) <= x + y and e^x - 1 <= x e^x so that it decomposes into the same dot products as
the KL itself (both computed for every snapshot against every baseline in one pass: analyses/training_dynamics_kl.py).
"""

from __future__ import annotations

import sys
from functools import cached_property

import numpy as np
import pandas as pd

from charlm.model import ARCH_LABELS
from charlm.predictions import sample_positions
from corpora.errors import run_cli

from .base import Analysis, Claim, Finding, Result
from .common import analysis_main, headline_id, report_order, source_digest
from .context import Context, MissingInput, Needs
from .training_dynamics_kl import divergences_of_models

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
FAMILY_LABELS = {"nnn": "n-NN", "ngram": "n-gram"}
GROUP_SNAPSHOTS = 32  # snapshots measured together (held as stored, float16: about 4 MB each on these corpora)


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
    """The n-NN and n-gram baselines of one corpus: rows, and (read only when a model's result is not cached) test
    losses and distributions at the sample of positions."""

    def __init__(self, ctx: Context, key: str, positions: np.ndarray):
        self.ctx, self.split, self.positions = ctx, ctx.settings["split"], positions
        self.rows = pd.DataFrame(
            [ctx.baseline("nnn", key, n) for n in ctx.settings["nnn_n"]]
            + [ctx.baseline("ngram", key, n) for n in ctx.settings["ngram_n"]]
        )  # any missing order is a MissingInput naming the command that builds it

    @cached_property
    def measured(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """(B,) test losses and B (K, V) float32 distributions at the sample (a few MB each): one read each."""
        preds = [self.ctx.predictions(b, self.split) for _, b in self.rows.iterrows()]
        losses = np.array([p.nll_at(self.positions).mean() for p in preds])  # on the sample, as the snapshots'
        return losses, [p.distributions(self.positions) for p in preds]


class _Pending(Exception):
    """A model's result that the cache does not hold yet (measured below, with the others missing)."""


def _pending() -> dict:
    raise _Pending


def _measure(ctx: Context, todo: list[tuple[pd.Series, list[str]]], baselines: _Baselines) -> list[dict]:
    """Models' snapshots against the baselines, with the baselines' losses: a cached result is all the table needs.
    The models are measured together (divergences_of_models), their snapshots held as stored (float16)."""
    baseline_loss, baseline_logps = baselines.measured
    logps, losses = [], []
    for model, files in todo:
        preds = [ctx.predictions(model, baselines.split, snapshot=f) for f in files]
        logps.append([p.logp[p.rows(baselines.positions)] for p in preds])  # exact in float64, as distributions()
        losses.append(np.array([p.nll_at(baselines.positions).mean() for p in preds]))
    measured = divergences_of_models(logps, baseline_logps)
    return [{"kl": kl, "bound": bound, "loss": loss, "baseline_loss": baseline_loss}
            for (kl, bound), loss in zip(measured, losses)]  # fmt: skip


def _groups(todo: list, snapshots: int = GROUP_SNAPSHOTS) -> list[list]:
    """`todo` (entries ending in their snapshot files) in runs of at most `snapshots` snapshots (one model at least)."""
    groups, count = [[]], 0
    for entry in todo:
        if groups[-1] and count + len(entry[-1]) > snapshots:
            groups.append([])
            count = 0
        groups[-1].append(entry)
        count += len(entry[-1])
    return [g for g in groups if g]


def epochs_trained(metrics: dict, model: pd.Series, train_chars: int) -> float:
    """How many epochs a model trained in all: its training curve's last epoch, else its training characters over the
    training split's (a model trained without a recorded curve)."""
    curve = metrics.get("epochs") or []
    if curve and curve[-1].get("epoch") is not None:
        return float(curve[-1]["epoch"])
    return float(model["chars_trained"]) / train_chars


def _corpus_frames(ctx: Context, key: str) -> list[pd.DataFrame]:
    split = ctx.settings["split"]
    models = ctx.models(corpus=key, required=False)
    if models.empty:
        return []
    with_snapshots = models[models["snapshots"].fillna(0) > 0]
    if with_snapshots.empty:
        return []  # a corpus whose models kept no snapshots; none anywhere is compute's MissingInput
    positions = sample_positions(ctx.corpus(key).split(split).size - 1)
    baselines = _Baselines(ctx, key, positions)
    train_chars = ctx.corpus(key).split("train").size
    rows, got, todo = [], {}, []
    for _, model in with_snapshots.iterrows():
        snaps = ctx.snapshots(model)
        snaps = snaps[snaps["chars"] <= ctx.settings["max_epochs"] * train_chars].reset_index(drop=True)
        if snaps.empty:
            continue
        cache_key = {
            "source": source_digest(sys.modules[__name__]), "model": ctx.digest(model),
            "snapshots": list(snaps["sha256"]),
            "baselines": [ctx.digest(b) for _, b in baselines.rows.iterrows()], "split": split,
            "positions": int(positions.size),
        }  # fmt: skip
        rows.append((model, snaps, cache_key))
        try:
            got[len(rows) - 1] = ctx.cached("training_dynamics", cache_key, _pending)
        except _Pending:
            todo.append((len(rows) - 1, model, list(snaps["file"])))
    for group in _groups(todo):
        for (k, _, _), result in zip(group, _measure(ctx, [(m, files) for _, m, files in group], baselines)):
            got[k] = ctx.cached("training_dynamics", rows[k][2], lambda result=result: result)
    return [_frame(ctx, model, snaps, got[k], baselines, train_chars) for k, (model, snaps, _) in enumerate(rows)]


def _frame(ctx: Context, model: pd.Series, snaps: pd.DataFrame, got: dict, baselines: _Baselines, train_chars: int):
    """One model's rows: every snapshot against every baseline."""
    positions = baselines.positions
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
        "baseline_loss": got["baseline_loss"][b], "delta_loss": got["baseline_loss"][b] - got["loss"][s],
        "positions": int(positions.size),
    })  # fmt: skip
    frame["closest"] = frame["sym_kl"] == frame.groupby(["step", "baseline"])["sym_kl"].transform("min")
    frame["epochs_trained"] = epochs_trained(ctx.metrics(model), model, train_chars)
    return frame


# ----------------------------------------------------------------------------------------- views


def label(r) -> str:
    budget = f" {int(r['budget'])}" if pd.notna(r["budget"]) else f" H{int(r['size'])}"
    layers = f" L{int(r['layers'])}" if int(r["layers"]) > 1 else ""
    return f"{ARCH_LABELS.get(r['arch'], r['arch'])}{budget}{layers} s{int(r['seed'])}"


def ordered(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows in the report's model order: LSTM, GRU, RNN, then the ablations; larger budgets first; by seed."""
    return report_order(rows, "seed", "model_id")


def closest_orders(df: pd.DataFrame, family: str = "nnn") -> pd.DataFrame:
    """Per model and snapshot: the order n of the closest baseline of `family`, and its KL."""
    best = df[(df["baseline"] == family) & df["closest"]].sort_values(["corpus", "model_id", "step", "n"])
    return best.drop_duplicates(["corpus", "model_id", "step"])


def resolved(df: pd.DataFrame) -> pd.Series:
    """Per model and snapshot: does the closest n-NN beat the second closest by more than their float16 bounds?"""
    nnn = df[df["baseline"] == "nnn"].sort_values("sym_kl")
    first_two = nnn.groupby(["corpus", "model_id", "step"]).head(2).groupby(["corpus", "model_id", "step"])
    return first_two.apply(lambda g: len(g) < 2 or np.diff(g["sym_kl"].to_numpy())[0] > g["kl_bound"].sum())


GROWS = ("in turn", "grows")  # the patterns that are the paper's growth: never down, through three orders or more
PAPER_PATH = "1 -> 2 -> 3 -> 4"  # Fig 5 right: the 1-NN first, then the 2-, 3- and 4-NN in turn
MIN_SNAPSHOTS = 2  # a model with fewer snapshots has no path of orders to judge


def pattern(orders: list[int]) -> str:
    """How the closest order moves over the snapshots (the paper's is 1, then 2, 3 and 4 "in turn", sec 4.3):

    "in turn"       never down, through every order between its first and last, at least three of them;
    "grows"         never down, through at least three orders, skipping some between snapshots;
    "two orders"    never down, but through only two orders: too few to call the paper's growth;
    "constant"      one order at every snapshot: no growth at all;
    "not monotone"  it goes back down at least once.
    """
    if any(b < a for a, b in zip(orders, orders[1:])):
        return "not monotone"
    visited = sorted(set(orders))
    if len(visited) < 3:
        return ("constant", "two orders")[len(visited) - 1]
    return "in turn" if visited == list(range(visited[0], visited[-1] + 1)) else "grows"


def path(orders) -> str:
    """The orders a model passes through, each once, in order: "1 -> 2 -> 6"."""
    return " -> ".join(str(int(n)) for n in dict.fromkeys(orders))


def reference(df: pd.DataFrame, corpus: str) -> str | None:
    """The model the figure details on a corpus: the headline LSTM among the models with snapshots (the suite's one
    rule, analyses.common.headline_id: the largest budget row, the deepest in it, as Fig 5's 3-layer LSTM, the
    lowest seed), else the first architecture in report order by the same rule."""
    return headline_id(df[df["corpus"] == corpus].drop_duplicates("model_id"))


def per_model(df: pd.DataFrame) -> pd.DataFrame:
    """The appendix: per model, its snapshots and their epochs, the closest n-NN and n-gram at each snapshot, the
    pattern, the last snapshot's loss and KL, and the epochs it trained in all."""
    nnn, grams = ordered(closest_orders(df, "nnn")), closest_orders(df, "ngram")
    rows = []
    for (corpus, model_id), r in nnn.groupby(["corpus", "model_id"], sort=False):
        g = grams[(grams["corpus"] == corpus) & (grams["model_id"] == model_id)]
        rows.append({
            "corpus": corpus, "model": label(r.iloc[0]), "snapshots": len(r), "first epoch": r["epoch"].iloc[0],
            "last epoch": r["epoch"].iloc[-1], "trained (epochs)": r["epochs_trained"].iloc[0],
            "closest n-NN by snapshot": ", ".join(str(int(n)) for n in r["n"]),
            "pattern": pattern(list(r["n"])) if len(r) >= MIN_SNAPSHOTS else "one snapshot",
            "closest n-gram by snapshot": ", ".join(str(int(n)) for n in g["n"]),
            "last loss (nats)": r["loss"].iloc[-1], "last KL to closest n-NN": r["sym_kl"].iloc[-1],
        })  # fmt: skip
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame, horizon: float) -> pd.DataFrame:
    """Per corpus, every number the findings state: the models with snapshots (with MIN_SNAPSHOTS or more, with one),
    how many of the former never go back to a lower order, rise through three orders or more, in turn; the epochs the
    snapshots span and the models trained; the headline model's path of closest n-NNs and n-grams, its last loss and
    the n-NNs it beats; the float16 bound and how many snapshots it resolves; the models that end past every n-NN."""
    rows = []
    gap = resolved(df)
    for corpus, sub in df.groupby("corpus", sort=False):
        nnn, grams = closest_orders(sub, "nnn"), closest_orders(sub, "ngram")
        counts = nnn.groupby("model_id").size()
        multi = counts[counts >= MIN_SNAPSHOTS].index
        kinds = {m: pattern(list(nnn.loc[nnn["model_id"] == m, "n"])) for m in multi}
        ref = reference(df, corpus)
        r, g = nnn[nnn["model_id"] == ref], grams[grams["model_id"] == ref]
        head = r.iloc[0]
        last = sub[(sub["model_id"] == ref) & (sub["baseline"] == "nnn")]
        last = last[last["step"] == last["step"].max()]
        beaten = sorted(int(n) for n in last.loc[last["delta_loss"] > 0, "n"])
        final = sub[sub["baseline"] == "nnn"]
        final = final[final["step"] == final.groupby("model_id")["step"].transform("max")]
        epochs = sub.drop_duplicates("model_id")["epochs_trained"]
        rows.append({
            "corpus": corpus, "models": int(counts.size), "multi": len(multi), "single": int((counts == 1).sum()),
            "min_snapshots": MIN_SNAPSHOTS, "monotone": sum(k != "not monotone" for k in kinds.values()),
            "grows": sum(k in GROWS for k in kinds.values()), "in_turn": sum(k == "in turn" for k in kinds.values()),
            "horizon": float(horizon), "first_epoch": float(sub["epoch"].min()),
            "last_epoch": float(sub["epoch"].max()),
            "epochs_min": float(epochs.min()), "epochs_max": float(epochs.max()),
            "points": int(counts.max()), "head": label(head), "head_type": ARCH_LABELS.get(head["arch"], head["arch"]),
            "head_layers": int(head["layers"]), "head_size": int(head["size"]), "head_snapshots": len(r),
            "head_path": path(r["n"]), "head_pattern": pattern(list(r["n"])), "head_first": int(r["n"].iloc[0]),
            "head_last": int(r["n"].iloc[-1]), "head_orders": len(set(r["n"])), "head_ngram_path": path(g["n"]),
            "head_loss": float(r["loss"].iloc[-1]), "head_last_epoch": float(r["epoch"].iloc[-1]),
            "beaten": ", ".join(map(str, beaten)), "beaten_max": max(beaten) if beaten else 0,
            "nnn_orders": int(last["n"].nunique()), "paper_path": PAPER_PATH,
            "bound_max": float(sub["kl_bound"].max()), "resolved": int(gap.loc[corpus].sum()),
            "snapshots_total": int(gap.loc[corpus].size),
            "beyond": int((final.groupby("model_id")["delta_loss"].min() > 0).sum()),
        })  # fmt: skip
    return pd.DataFrame(rows)


def verdict(row) -> str:
    """The headline model's closest n-NN: through the orders in turn from the 1-NN up to the 4-NN or beyond (Fig 5):
    reproduced; never down and through three orders or more (skipping some): partly; else not reproduced; fewer than
    MIN_SNAPSHOTS snapshots: untested."""
    if row["head_snapshots"] < MIN_SNAPSHOTS:
        return "untested"
    if row["head_pattern"] == "in turn" and row["head_first"] == 1 and row["head_last"] >= 4:
        return "reproduced"
    return "partly" if row["head_pattern"] in GROWS else "not reproduced"


def findings(table: pd.DataFrame) -> list[Finding]:
    out = []
    for _, r in table.iterrows():
        v = {k: r[k] for k in r.index if not (isinstance(r[k], float) and np.isnan(r[k]))}
        corpus = r["corpus"]
        out.append(
            Finding(
                "{corpus}: the {head_layers}-layer {head_type}'s closest n-NN over {head_snapshots} snapshots in its "
                "first {last_epoch:.2f} epochs: {head_path} (Fig 5: {paper_path})",
                v,
                verdict(r),
                "td-fig5-growth",
                corpus,
            )
        )
        out.append(
            Finding(
                "{corpus}: snapshots up to epoch {last_epoch:.2f} (the first {horizon:g}, as Fig 5) of trainings that "
                "lasted {epochs_min:g} to {epochs_max:g} epochs",
                v,
                corpus=corpus,
            )
        )
        if r["multi"]:
            out.append(
                Finding(
                    "{corpus}: {monotone} of {multi} models with {min_snapshots}+ snapshots never go back to a lower "
                    "order, {grows} rise through three orders or more ({in_turn} in turn); {single} have one",
                    v,
                    corpus=corpus,
                )
            )
        out.append(
            Finding(
                "{corpus}: over the same snapshots the {head_layers}-layer {head_type}'s closest KenLM "
                "n-gram went {head_ngram_path}",
                v,
                corpus=corpus,
            )
        )
        if r["beaten_max"]:
            out.append(
                Finding(
                    "{corpus}: at its last snapshot (epoch {head_last_epoch:.2f}) the {head_layers}-layer {head_type} "
                    "beats the n-NNs of n = {beaten} in test loss ({head_loss:.3f} nats/char)",
                    v,
                    corpus=corpus,
                )
            )
        else:
            out.append(
                Finding(
                    "{corpus}: at its last snapshot (epoch {head_last_epoch:.2f}) the {head_layers}-layer {head_type} "
                    "beats no n-NN in test loss ({head_loss:.3f} nats/char)",
                    v,
                    corpus=corpus,
                )
            )
        out.append(
            Finding(
                "{corpus}: float16 storage moves no KL by more than {bound_max:.3f} nats; the closest n-NN leads the "
                "second by more than both bounds at {resolved} of {snapshots_total} snapshots",
                v,
                corpus=corpus,
            )
        )
        if r["beyond"]:
            out.append(
                Finding(
                    "{corpus}: {beyond} of {models} models end better than every n-NN in test loss: late snapshots are "
                    "only least unlike an n-NN, where the KenLM n-grams are firmer",
                    v,
                    corpus=corpus,
                )
            )
    return out


# ----------------------------------------------------------------------------------------- the analysis


class TrainingDynamics(Analysis):
    name = "training_dynamics"
    title = TITLE
    question = QUESTION
    source = PAPER_SOURCE
    settings = SETTINGS
    needs = NEEDS
    claims = (
        Claim("td-fig5-growth", "Karpathy et al. (2016) sec 4.3, Fig 5 right",
              "over its first 3 epochs the LSTM is closest to the 1-NN at first, then to the 2-, 3- and 4-NN in turn",
              "curves only: 1 -> 2 -> 3 -> 4 (no numbers)"),
    )  # fmt: skip
    shows = (
        "Fig 5 right for the headline LSTM of each corpus: the symmetric KL of its snapshots to each n-NN and the "
        "n-NNs' loss minus its loss against training characters, and below, the closest n-NN of every snapshot of "
        "every model that kept two or more."
    )
    deviations = (
        "We compare every recurrent model that kept training snapshots, with the n-NNs and with the KenLM n-grams; the "
        "paper follows one 3-layer LSTM.",
        "Snapshots are log-spaced over the first epochs, so the orders a model passes through between two snapshots "
        "are not seen; most models kept four snapshots or one.",
        "KL and losses are on a fixed sample of test positions (blocks of consecutive positions) where every stored "
        "prediction keeps its full distribution, not the whole test set.",
        "The paper's n-NNs cross-validated their hidden size with the full recipe; ours chose it from the profile's "
        "grid, so an undertrained higher-order n-NN can sit closer to a weak net than its order suggests.",
    )

    def compute(self, ctx: Context) -> Result:
        df = compute(ctx)
        table = summary(df, ctx.settings["max_epochs"])
        return Result(df, findings(table), tables={"summary": table})

    def plot(self, result: Result):
        return plot(result.table)

    def summary_table(self, result: Result) -> pd.DataFrame:
        """Per corpus: the headline model's path of closest n-NNs beside Fig 5's, and how the other models move."""
        t = result.tables["summary"]
        rows = [{
            "corpus": r["corpus"], "model": f"{r['head_type']}, {r['head_layers']} layers, width {r['head_size']}",
            "snapshots up to epoch": f"{r['last_epoch']:.2f}",
            "trained (epochs)": f"{r['epochs_min']:g}-{r['epochs_max']:g}",
            "closest n-NN": r["head_path"], "closest n-gram": r["head_ngram_path"],
            "models with 2+ snapshots: never down / 3+ orders / in turn":
                f"{r['monotone']} / {r['grows']} / {r['in_turn']} of {r['multi']} ({r['single']} with one)",
        } for _, r in t.iterrows()]  # fmt: skip
        rows.append({"corpus": "warpeace (paper)", "model": "LSTM, 3 layers", "snapshots up to epoch": "3",
                     "trained (epochs)": "up to 50", "closest n-NN": PAPER_PATH, "closest n-gram": "—",
                     "models with 2+ snapshots: never down / 3+ orders / in turn": "—"})  # fmt: skip
        return pd.DataFrame(rows)

    def appendix(self, result: Result) -> dict[str, pd.DataFrame]:
        return {"every model with snapshots: the closest n-NN and n-gram at each": per_model(result.table)}


def plot(df: pd.DataFrame):
    from .training_dynamics_plot import plot as draw

    return draw(df)


ANALYSIS = TrainingDynamics()
main = analysis_main(__name__)


if __name__ == "__main__":
    sys.exit(run_cli(main))
