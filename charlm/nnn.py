"""The n-NN baseline of Karpathy et al. (2016) sec 4.3: a one-hidden-layer tanh network on the last n characters.

"A fully-connected neural network with one hidden layer and tanh nonlinearities. The input to the
network is a sparse binary vector of dimension nK that concatenates the one-of-K encodings of n
consecutive characters. We optimize the model as described in Section 3.3 and cross-validate the
size of the hidden layer." (n = 1..6, Table 2.)

    python -m charlm.nnn --corpus warpeace --n 3 --max-chars 20000000

Recipe (sec 3.3, the field meanings and defaults of charlm.train.TrainConfig): uniform init in
[-0.08, 0.08], RMSProp lr 2e-3 alpha 0.95, minibatches of 10,000 positions (the 100 x 100
characters of the recurrent recipe; positions are shuffled, the model has no state to carry),
up to 50 epochs, lr x0.95 per epoch after epoch 10, gradient-norm clipping at 5, early stopping on
the validation loss (patience 5 epochs), an optional character budget per trained network.
The hidden size is chosen on the validation split from a grid (default 64, 256, 512): every size
is trained, the lowest validation loss wins, and metrics.json records the whole grid.

Budget note (measured on War and Peace, 2 shared CPU cores): with 10,000-position minibatches the
n-NN converges slowly per character (about 260 updates per epoch; 3-NN, hidden 256: val 2.06 after
5M characters), so a run of minutes lands far above the paper. Sec 3.3's "batch size 100" read
literally for a feed-forward net is 100 positions; at equal characters `batch_chars=1000` reached
1.77 and 100 reached 1.74 (1000 was also the fastest per character on this CPU). Budgeted runs
should pass a smaller `batch_chars`; the default keeps the recurrent recipe's 10,000.

The first n - 1 positions of a split have fewer than n previous characters: the missing ones are
a dedicated "no character" input (an all-zero one-hot block), so row t of the Predictions predicts
split[t + 1] from split[max(0, t + 1 - n) : t + 1] for every t >= 0, as the contract requires.

Artifacts: `artifacts/<corpus>/nnn-n{n}-{hash}/` with `H{size}/checkpoint.pt` + `H{size}/metrics.json`
per grid member (a finished member is reused after an interruption), `checkpoint.pt` (the chosen
size), `metrics.json` ("complete": true once the grid is done) and `predictions/<split>.npz`.
Checkpoints are a plain config + state_dict, loaded with `torch.load(..., weights_only=True)`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm import tqdm

import corpora
from corpora import atomic
from corpora.errors import UserError, add_corpus_arguments, parse_int_list, run_cli

from . import predictions
from .checkpoint import load_payload, save_payload
from .model import INIT_RANGE
from .paths import artifacts_root, complete_metrics, config_hash, predictions_path
from .train import TrainConfig, learning_rate, require_positive

FORMAT = 1
_RECIPE = {f.name: f.default for f in fields(TrainConfig)}  # the recurrent models' recipe, one source of truth
DEFAULT_GRID = (64, 256, 512)
EVAL_CHUNK = 50_000


@dataclass(frozen=True)
class NNNConfig:
    corpus: str  # registered corpus name or a path to a text file
    n: int  # previous characters the network sees
    hidden_grid: tuple[int, ...] = DEFAULT_GRID  # hidden sizes cross-validated on the val split
    seed: int = 0
    epochs: int = _RECIPE["epochs"]
    max_chars: int | None = None  # character budget for each network of the grid (None: epochs only)
    batch_chars: int = _RECIPE["batch_size"] * _RECIPE["unroll"]  # positions per minibatch (10,000)
    lr: float = _RECIPE["lr"]
    rms_alpha: float = _RECIPE["rms_alpha"]
    lr_decay: float = _RECIPE["lr_decay"]  # charlm.train.learning_rate reads lr, lr_decay, decay_after
    decay_after: int = _RECIPE["decay_after"]
    grad_clip: float = _RECIPE["grad_clip"]
    patience: int = _RECIPE["patience"]
    eval_chars: int | None = _RECIPE["eval_chars"]  # validate on a prefix of the val split (None: all)

    def validate(self) -> None:
        if not isinstance(self.n, int) or isinstance(self.n, bool) or self.n < 1:
            raise UserError(f"n must be a positive integer, got {self.n!r}")
        if not self.hidden_grid:
            raise UserError("the hidden-size grid is empty")
        for h in self.hidden_grid:
            if not isinstance(h, int) or isinstance(h, bool) or h < 1:
                raise UserError(f"hidden sizes must be positive integers, got {h!r}")
        require_positive(self, "epochs", "batch_chars", "patience", "lr")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["hidden_grid"] = list(self.hidden_grid)
        return d

    def model_id(self, corpus_key: str) -> str:
        """`corpus_key` is `Corpus.key`: the corpus bytes and how they are split."""
        digest = config_hash({**self.to_dict(), "kind": "nnn", "format": FORMAT, "corpus_sha256": corpus_key})
        return f"nnn-n{self.n}-{digest}"


class NNN(nn.Module):
    """h = tanh(W [onehot(x_{t-n+1}); ...; onehot(x_t)] + b), logits = U h + c.

    The first layer is stored as an embedding of n * V + 1 rows: row i * V + v is the column of W
    that the one-hot of byte v at position i (0 = the latest character) selects, so summing n
    looked-up rows IS the product of W with the concatenated one-hot vector, exactly the same
    function without the sparse matmul. Row n * V is the "no character" input before a split's
    start: a zero one-hot selects nothing, so that row is fixed at zero (padding_idx: no gradient).
    """

    def __init__(self, n: int, vocab_size: int, hidden: int):
        super().__init__()
        self.n, self.vocab_size, self.hidden = n, vocab_size, hidden
        self.pad = n * vocab_size
        self.inp = nn.Embedding(n * vocab_size + 1, hidden, padding_idx=self.pad)
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.out = nn.Linear(hidden, vocab_size)
        with torch.no_grad():
            for p in self.parameters():
                p.uniform_(-INIT_RANGE, INIT_RANGE)
            self.inp.weight[self.pad].zero_()

    def config(self) -> dict:
        return {"n": self.n, "vocab_size": self.vocab_size, "hidden": self.hidden}

    def forward(self, ctx: torch.Tensor) -> torch.Tensor:
        """ctx (B, n) first-layer row indices (see `context_rows`) -> logits (B, V)."""
        return self.out(torch.tanh(self.inp(ctx).sum(1) + self.bias))


def context_rows(ids: np.ndarray, n: int, vocab_size: int) -> torch.Tensor:
    """(len(ids) - 1, n) int64 first-layer rows: row t holds ids[t - i] at slot i, the pad row where t - i < 0."""
    ids = torch.from_numpy(np.asarray(ids, dtype=np.int64))
    t = torch.arange(ids.numel() - 1)
    rows = torch.empty((t.numel(), n), dtype=torch.int64)
    for i in range(n):
        src = t - i
        rows[:, i] = torch.where(src >= 0, ids[src.clamp(min=0)] + i * vocab_size, n * vocab_size)
    return rows


@torch.no_grad()
def predict_logprobs(model: NNN, ids: np.ndarray) -> np.ndarray:
    """(N,) ids -> (N - 1, V) float32 log-probabilities of each next id (the Predictions contract)."""
    model.eval()
    rows = context_rows(ids, model.n, model.vocab_size)
    out = np.empty((rows.shape[0], model.vocab_size), dtype=np.float32)
    for s in range(0, rows.shape[0], EVAL_CHUNK):
        out[s : s + EVAL_CHUNK] = torch.log_softmax(model(rows[s : s + EVAL_CHUNK]), dim=-1).numpy()
    return out


@torch.no_grad()
def evaluate(model: NNN, rows: torch.Tensor, targets: torch.Tensor) -> float:
    """Mean cross-entropy in nats over all positions."""
    was = model.training
    model.eval()
    total = 0.0
    for s in range(0, rows.shape[0], EVAL_CHUNK):
        total += F.cross_entropy(model(rows[s : s + EVAL_CHUNK]), targets[s : s + EVAL_CHUNK], reduction="sum").item()
    model.train(was)
    return total / rows.shape[0]


def _payload(model: NNN, corpus: corpora.Corpus, config: NNNConfig, model_id: str, **extra) -> dict:
    return {
        "format": FORMAT,
        "kind": "nnn",
        "config": model.config(),
        "state_dict": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "vocab": [int(b) for b in corpus.vocab],
        "corpus_sha256": corpus.sha256,
        "corpus": corpus.name,
        "model_id": model_id,
        "nnn_config": config.to_dict(),
        **extra,
    }


def load_nnn(path: str | Path) -> NNN:
    """Rebuild an n-NN from its checkpoint (weights_only); `model.meta` holds the rest of the payload."""
    payload = load_payload(path)
    if payload.get("kind") != "nnn":
        raise UserError(f"checkpoint {path} is not an n-NN checkpoint (kind {payload.get('kind')!r})")
    try:
        model = NNN(**payload["config"])
        model.load_state_dict(payload["state_dict"])
    except (TypeError, RuntimeError) as err:
        raise UserError(f"checkpoint {path} does not match its own config ({str(err).splitlines()[0]})") from None
    model.meta = {k: v for k, v in payload.items() if k != "state_dict"}
    model.eval()
    return model


def _complete(path: Path) -> dict | None:
    return complete_metrics(path)


def _train_one(
    config: NNNConfig, hidden: int, corpus: corpora.Corpus, out: Path, model_id: str, progress: bool
) -> dict:
    """Train one hidden size with the recipe; write out/checkpoint.pt (best on val) and out/metrics.json."""
    V = corpus.vocab_size
    train_ids = corpus.split("train")
    val_ids = corpus.split("val")[: config.eval_chars] if config.eval_chars else corpus.split("val")
    if train_ids.size < 2 or val_ids.size < 2:
        raise UserError(f"corpus '{corpus.name}' is too small: train and val splits need at least 2 characters each")
    x_train = context_rows(train_ids, config.n, V)
    y_train = torch.from_numpy(train_ids[1:].astype(np.int64))
    x_val, y_val = context_rows(val_ids, config.n, V), torch.from_numpy(val_ids[1:].astype(np.int64))
    positions = x_train.shape[0]
    batch = min(config.batch_chars, positions)
    steps_per_epoch = math.ceil(positions / batch)
    total_steps = config.epochs * steps_per_epoch
    if config.max_chars is not None:
        total_steps = min(total_steps, math.ceil(config.max_chars / batch))

    torch.manual_seed(config.seed)
    model = NNN(config.n, V, hidden)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=config.lr, alpha=config.rms_alpha)
    shuffler = torch.Generator().manual_seed(config.seed)
    curve, best_val, best_state, bad, stopped = [], None, None, 0, None
    loss_sum, loss_steps, order = 0.0, 0, None
    started = time.perf_counter()
    bar = tqdm(
        total=total_steps * batch,
        unit="char",
        unit_scale=True,
        desc=f"{model_id} H{hidden}",
        disable=not progress,
        dynamic_ncols=True,
        mininterval=1.0,
    )
    model.train()
    try:
        for step in range(total_steps):
            epoch, k = divmod(step, steps_per_epoch)
            if k == 0:
                order = torch.randperm(positions, generator=shuffler)
            lr = learning_rate(config, epoch)
            for group in optimizer.param_groups:
                group["lr"] = lr
            idx = order[k * batch : (k + 1) * batch]
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            value = loss.item()
            if not math.isfinite(value):
                raise UserError(
                    f"training of {model_id} (hidden {hidden}) diverged at step {step} (loss {value}); try a lower lr"
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            loss_sum, loss_steps = loss_sum + value, loss_steps + 1
            bar.update(idx.numel())
            bar.set_postfix(loss=f"{value:.3f}", lr=f"{lr:.2e}", refresh=False)
            done = step + 1
            if done % steps_per_epoch == 0 or done == total_steps:
                val = evaluate(model, x_val, y_val)
                curve.append(
                    {
                        "epoch": round(done / steps_per_epoch, 4),
                        "step": done,
                        "chars": done * batch,
                        "lr": lr,
                        "train_loss": loss_sum / loss_steps,
                        "val_loss": val,
                    }
                )
                loss_sum, loss_steps = 0.0, 0
                if progress:
                    bar.write(
                        f"{model_id} H{hidden} epoch {done / steps_per_epoch:.2f}: train "
                        f"{curve[-1]['train_loss']:.4f}  val {val:.4f} nats/char"
                    )
                if best_val is None or val < best_val:
                    best_val, bad = val, 0
                    best_state = _payload(
                        model, corpus, config, model_id, hidden=hidden, val_loss=val, chars_trained=done * batch
                    )
                else:
                    bad += 1
                    if bad >= config.patience:
                        stopped = "early_stopping"
                        break
    finally:
        bar.close()
    seconds = time.perf_counter() - started
    if stopped is None:
        stopped = "budget" if total_steps < config.epochs * steps_per_epoch else "epochs"
    save_payload(out / "checkpoint.pt", best_state)
    record = {
        "hidden": hidden,
        "params": sum(p.numel() for p in model.parameters())
        - hidden,  # the fixed zero "no character" row is no parameter
        "best_val_loss": best_val,
        "chars_trained": curve[-1]["chars"],
        "chars_per_s": curve[-1]["chars"] / seconds if seconds > 0 else None,
        "seconds": round(seconds, 2),
        "stopped": stopped,
        "epochs": curve,
        "complete": True,
    }
    atomic.write_json(out / "metrics.json", record)
    return record


def _load_corpus(corpus: str | corpora.Corpus) -> corpora.Corpus:
    return corpus if isinstance(corpus, corpora.Corpus) else corpora.load(corpus)


def model_folder(corpus: corpora.Corpus, config: NNNConfig) -> Path:
    return artifacts_root() / corpus.name / config.model_id(corpus.key)


def train_nnn(
    corpus: str | corpora.Corpus,
    n: int,
    hidden_grid=DEFAULT_GRID,
    max_chars: int | None = None,
    epochs: int = _RECIPE["epochs"],
    seed: int = 0,
    progress: bool = True,
    **recipe,
) -> Path:
    """Train the grid of hidden sizes, keep the best on val; returns the artifact folder (cached when complete).

    `recipe` overrides other NNNConfig fields (batch_chars, lr, patience, eval_chars, ...).
    """
    corpus = _load_corpus(corpus)
    if isinstance(hidden_grid, int):
        hidden_grid = (hidden_grid,)
    config = NNNConfig(
        corpus=corpus.name, n=n, hidden_grid=tuple(hidden_grid), seed=seed, epochs=epochs, max_chars=max_chars, **recipe
    )
    config.validate()
    mid = config.model_id(corpus.key)
    out = model_folder(corpus, config)
    if _complete(out / "metrics.json") and (out / "checkpoint.pt").is_file():
        return out
    grid = []
    for hidden in config.hidden_grid:
        member = out / f"H{hidden}"
        record = _complete(member / "metrics.json")
        if record is None or not (member / "checkpoint.pt").is_file():
            record = _train_one(config, hidden, corpus, member, mid, progress)
        grid.append(record)
    best = min(grid, key=lambda r: r["best_val_loss"])
    payload = load_payload(out / f"H{best['hidden']}" / "checkpoint.pt")
    save_payload(out / "checkpoint.pt", payload)
    atomic.write_json(
        out / "metrics.json",
        {
            "model_id": mid,
            "kind": "nnn",
            "corpus": corpus.name,
            "corpus_sha256": corpus.sha256,
            "vocab_size": corpus.vocab_size,
            "config": config.to_dict(),
            "best_hidden": best["hidden"],
            "best_val_loss": best["best_val_loss"],
            "grid": [{k: v for k, v in r.items() if k != "complete"} for r in grid],
            "seconds": round(sum(r["seconds"] for r in grid), 2),
            "complete": True,
        },
    )
    return out


def predict(corpus: str | corpora.Corpus, n: int, split: str = "test", progress: bool = True, **train_kwargs) -> Path:
    """Predictions of one split by the chosen n-NN (training what is missing); returns the .npz path (cached)."""
    corpus = _load_corpus(corpus)
    ids = corpus.split(split)
    folder = train_nnn(corpus, n, progress=progress, **train_kwargs)
    out = predictions_path(folder, split)
    if out.exists():
        return out
    model = load_nnn(folder / "checkpoint.pt")
    if model.meta.get("corpus_sha256") != corpus.sha256:
        raise UserError(f"checkpoint in {folder} was not trained on corpus '{corpus.name}' (sha256 mismatch)")
    return predictions.save(out, predict_logprobs(model, ids), ids[1:], model.meta.get("model_id", folder.name))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m charlm.nnn",
        description="Train the n-NN baseline (one tanh hidden layer on the "
        "one-hot of the last n characters; hidden size cross-validated), score a split, print its cross-entropy.",
    )
    add_corpus_arguments(parser)
    parser.add_argument("--n", required=True, help="previous characters seen; several as 1,2,3")
    parser.add_argument(
        "--hidden",
        default=",".join(map(str, DEFAULT_GRID)),
        help="hidden sizes to cross-validate (default %(default)s)",
    )
    parser.add_argument(
        "--max-chars", type=int, default=None, help="training-character budget per network (default: epochs only)"
    )
    parser.add_argument(
        "--epochs", type=int, default=_RECIPE["epochs"], help="passes over the train split (default %(default)s)"
    )
    parser.add_argument(
        "--batch-chars",
        type=int,
        default=_RECIPE["batch_size"] * _RECIPE["unroll"],
        help="positions per minibatch (default %(default)s = the recurrent recipe's 100 x 100 characters)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default %(default)s)")
    parser.add_argument("--split", default="test", choices=corpora.SPLITS, help="split to score (default %(default)s)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument(
        "--resamples", type=int, default=100, help="bootstrap resamples for the std (default %(default)s)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    ns = parse_int_list(args.n, "--n")
    grid = tuple(parse_int_list(args.hidden, "--hidden"))
    for n in ns:
        NNNConfig(args.corpus, n, grid, args.seed, args.epochs, args.max_chars, args.batch_chars).validate()
    if args.threads:
        torch.set_num_threads(args.threads)
    corpus = corpora.load(args.corpus, split_mode=args.splits)
    for n in ns:
        path = predict(
            corpus,
            n,
            args.split,
            progress=not args.quiet,
            hidden_grid=grid,
            max_chars=args.max_chars,
            epochs=args.epochs,
            seed=args.seed,
            batch_chars=args.batch_chars,
        )
        metrics = json.loads((path.parent.parent / "metrics.json").read_text())
        preds = predictions.load(path)
        grid_text = ", ".join(f"H{r['hidden']} {r['best_val_loss']:.4f}" for r in metrics["grid"])
        print(
            f"{preds.model_id}: hidden {metrics['best_hidden']} (val: {grid_text}); "
            f"{preds.summary(args.split, args.resamples)} -> {path}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
