"""Training with the recipe of Karpathy et al. (2016) sec 3.3, resumable and bit-reproducible.

Uniform init in [-0.08, 0.08]; RMSProp (lr 2e-3, alpha 0.95); batch 100 x unroll 100 with
truncated BPTT (state carried across batches); 50 epochs; lr x0.95 per epoch after epoch 10;
gradient-norm clipping; early stopping on validation loss; dropout as an option. Optionally
(`converge_delta`) a run also stops once it has converged: its best validation loss improved by less
than `converge_delta` nats per epoch over the last `converge_window` epochs.

One loop, `fit`, trains every model of the suite: the recurrent language models here, the n-NN
baseline (nnn.py) and the pooling classifiers. Each supplies a `Task`: the loss of one minibatch,
its validation loss, the extra state a resume needs and a self-describing checkpoint. The loop
owns the recipe: schedule, clipping, divergence checks, early stopping, snapshots, resume state,
metrics and the progress bar.

A run writes under `artifacts/<corpus>/<model id>/`:
    state.pt        everything needed to resume (model, optimizer, RNG, carried state, curves)
    checkpoint.pt   the best model on validation so far (self-describing, see checkpoint.py)
    snapshots/      models at log-spaced points of the first epochs (for training dynamics)
    metrics.json    per-epoch train/val curve, identity, checkpoint digests; "complete": true once ended
Killed at any moment and started again with the same command, a run resumes from state.pt
and ends with the same numbers as an uninterrupted one (same seed, CPU).

Identity: a model id is a readable slug plus a hash of the training config and the corpus key
(its bytes and split mode; not the path it was read from). Seed siblings share a `group_id`
(the same hash without the seed): analyses average over seeds within one group and nothing else.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import corpora
from corpora.batching import stream_windows
from corpora.errors import UserError, add_corpus_arguments, run_cli

from .checkpoint import checkpoint_payload
from .loop import Task, TrainingDiverged, fit
from .model import ARCHS, CharLM, ModelConfig, budget_of, count_params
from .paths import complete_metrics, config_hash, model_dir

EXIT_DIVERGED = 3
IDENTITY_FORMAT = 2  # bump when what a model id hashes changes


@dataclass(frozen=True)
class TrainConfig:
    corpus: str  # registered corpus name or a path to a text file (identified by its bytes, not this string)
    arch: str  # one of charlm.ARCHS
    layers: int = 2  # stacked recurrent layers
    size: int = 128  # hidden width
    dropout: float = 0.0  # between layers and before the softmax
    seed: int = 0  # initialisation and dropout
    epochs: int = 50  # passes over the train split
    max_chars: int | None = None  # character budget: stop after this many training characters
    batch_size: int = 100  # parallel streams
    unroll: int = 100  # truncated-BPTT window
    lr: float = 2e-3  # RMSProp base learning rate
    rms_alpha: float = 0.95  # RMSProp decay
    lr_decay: float = 0.95  # per-epoch factor once decay_after epochs are done
    decay_after: int = 10  # epochs at the base learning rate
    grad_clip: float = 5.0  # max global gradient norm
    patience: int = 5  # early stopping: epochs without validation improvement
    converge_delta: float = 0.0  # converged: stop once validation gains < this (nats/epoch) over converge_window
    converge_window: int = 3  # epochs the convergence test averages over
    eval_chars: int | None = None  # validate on the first eval_chars of the val split (None: all of it)
    snapshots: int = 12  # log-spaced model snapshots over the first snapshot_epochs
    snapshot_epochs: float = 3.0  # horizon of the snapshots (Karpathy et al. Fig 5: first 3 epochs)
    fused: bool = True  # rnn/gru/lstm/lstm-gates on torch's fused kernels, gru-paper on its scan (proven equal)

    def model_config(self, vocab_size: int) -> ModelConfig:
        return ModelConfig(self.arch, vocab_size, self.layers, self.size, self.dropout)

    def identity(self, corpus_key: str, without: tuple[str, ...] = ()) -> dict:
        """What a model id hashes: every setting but the corpus string, plus the corpus key (bytes, split mode)."""
        settings = {k: v for k, v in asdict(self).items() if k != "corpus" and k not in without}
        return {**settings, "corpus_key": corpus_key, "kind": "charlm", "identity": IDENTITY_FORMAT}

    def model_id(self, corpus_key: str) -> str:
        """Readable slug plus a hash of the full config and the corpus (`Corpus.key`: its bytes and split mode)."""
        drop = f"-d{self.dropout:g}" if self.dropout else ""
        return f"{self.arch}-L{self.layers}-H{self.size}{drop}-s{self.seed}-{config_hash(self.identity(corpus_key))}"

    def group_id(self, corpus_key: str) -> str:
        """The same hash without the seed: the models that differ only in their seed share it."""
        return config_hash(self.identity(corpus_key, without=("seed",)))

    def validate(self) -> None:
        ModelConfig(self.arch, 2, self.layers, self.size, self.dropout)  # raises UserError on bad arch/sizes
        require_positive(self, "epochs", "batch_size", "unroll", "snapshots", "patience", "lr", "converge_window")
        if self.converge_delta < 0:
            raise UserError(f"converge_delta must be 0 (off) or positive, got {self.converge_delta}")


def require_positive(config, *names: str) -> None:
    """Each named setting (and max_chars, when set) must be positive: one UserError line otherwise."""
    for name in names + (("max_chars",) if getattr(config, "max_chars", None) is not None else ()):
        if getattr(config, name) <= 0:
            raise UserError(f"{name} must be positive, got {getattr(config, name)}")


def pick_device(device: str | None = None) -> torch.device:
    """`cuda` when asked for or available (the paper profile), else the CPU (bit-reproducible resume)."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device '{device}' asked for, but torch sees no CUDA device")
    return torch.device(device)


# --------------------------------------------------------------------------------------------- recurrent LMs


@torch.no_grad()
def evaluate(model: CharLM, ids: np.ndarray, batch_size: int, unroll: int) -> float:
    """Mean cross-entropy (nats/char) over `ids` read as `batch_size` streams, state carried."""
    was_training = model.training
    model.eval()
    batch_size = max(1, min(batch_size, (ids.size - 1) // unroll))
    x, y = stream_windows(ids, batch_size, unroll)
    state, total = None, 0.0
    device = model.head.weight.device
    for xb, yb in zip(torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)):
        logits, state = model.forward_with_state(xb, state)
        total += F.cross_entropy(logits.flatten(0, 1), yb.flatten(), reduction="sum").item()
    model.train(was_training)
    return total / y.size


class LanguageModelTask(Task):
    """Truncated BPTT over `batch_size` contiguous streams; the state is carried across minibatches."""

    def __init__(self, config: TrainConfig, corpus: corpora.Corpus, device: torch.device):
        x, y = stream_windows(corpus.split("train"), config.batch_size, config.unroll)
        self.x, self.y = torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)  # (n_batches, B, T)
        self.val_ids = corpus.split("val")[: config.eval_chars] if config.eval_chars else corpus.split("val")
        if self.val_ids.size < 2:
            raise UserError(
                f"the val split of corpus '{corpus.name}' has {self.val_ids.size} characters: too few to validate on"
            )
        self.config, self.corpus = config, corpus
        torch.manual_seed(config.seed)
        self.model = CharLM(config.model_config(corpus.vocab_size)).to(device)
        self.steps_per_epoch = self.x.shape[0]
        self.chars_per_step = config.batch_size * config.unroll
        self.divergence_loss = 3 * math.log(corpus.vocab_size) + 1  # far above a uniform guess
        self.carried = None

    def loss(self, epoch, batch):
        if batch == 0:
            self.carried = None  # each epoch starts its streams from a zero state
        logits, self.carried = self.model.forward_with_state(self.x[batch], self.carried, fused=self.config.fused)
        return F.cross_entropy(logits.flatten(0, 1), self.y[batch].flatten())

    def after_step(self):
        self.carried = [tuple(t.detach() for t in s) for s in self.carried]  # truncate BPTT at the window edge

    def validate(self):
        return evaluate(self.model, self.val_ids, self.config.batch_size, self.config.unroll)

    def resume_state(self):
        return {"carried": [[t.cpu() for t in s] for s in self.carried] if self.carried is not None else None}

    def load_resume_state(self, state):
        device = self.model.head.weight.device
        carried = state.get("carried")
        self.carried = [tuple(t.to(device) for t in s) for s in carried] if carried is not None else None

    def checkpoint(self, **extra):
        return checkpoint_payload(self.model, self.corpus.vocab, self.corpus.sha256, **extra)

    def describe(self):
        config = self.model.config
        return {
            "model_config": config.to_dict(),
            "params": count_params(config),
            "budget": budget_of(config.arch, config.size, config.layers, config.vocab_size),
        }


def identity_meta(config: TrainConfig, corpus: corpora.Corpus) -> dict:
    """What metrics.json and every checkpoint record about who a model is (DESIGN.md sec 10's model index)."""
    return {
        "model_id": config.model_id(corpus.key),
        "group_id": config.group_id(corpus.key),
        "kind": "charlm",
        "train_config": asdict(config),
        **corpus.identity(),
        "corpus_source": corpus.source or config.corpus,
    }


def resolve_corpus_arg(corpus: str) -> str:
    """A registry name stays; a file path becomes absolute, so a checkpoint finds its corpus from any folder."""
    return corpus if corpus in corpora.REGISTRY else str(Path(corpus).expanduser().resolve())


def train(
    config: TrainConfig,
    out_dir: str | Path | None = None,
    corpus: corpora.Corpus | None = None,
    progress: bool = True,
    checkpoint_every_s: float = 60.0,
    threads: int | None = None,
    device: str | None = None,
    stop_after_steps: int | None = None,
) -> Path:
    """Train (or resume, or return at once if already complete); returns the model's artifact folder.

    `stop_after_steps` leaves the run unfinished after that many optimiser steps (see `fit`)."""
    config.validate()
    source = corpus.source if corpus is not None and corpus.source else config.corpus
    config = dataclasses.replace(config, corpus=resolve_corpus_arg(source))
    corpus = corpus or corpora.load(config.corpus)
    model_id = config.model_id(corpus.key)
    out = Path(out_dir) if out_dir is not None else model_dir(corpus.artifact_name, model_id)
    metrics_path = out / "metrics.json"
    if metrics_path.exists():
        try:
            previous = json.loads(metrics_path.read_text())
        except ValueError:
            previous = {}  # a damaged metrics file: the run resumes from state.pt and rewrites it
        if previous and previous.get("model_id") != model_id:
            raise UserError(f"{out} holds another model ({previous.get('model_id')}); give a new --out for {model_id}")
        if complete_metrics(metrics_path) and (out / "checkpoint.pt").exists():
            return out
    if threads:
        torch.set_num_threads(threads)
    task = LanguageModelTask(config, corpus, pick_device(device))
    meta = identity_meta(config, corpus)
    return fit(task, config, out, model_id, meta, progress, checkpoint_every_s, stop_after_steps=stop_after_steps)


# --------------------------------------------------------------------------------------------- CLI


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = {f.name: f.default for f in fields(TrainConfig)}
    add_corpus_arguments(parser)
    parser.add_argument("--arch", required=True, help=f"one of: {', '.join(ARCHS)}")
    parser.add_argument(
        "--layers", type=int, default=defaults["layers"], help="stacked recurrent layers (default %(default)s)"
    )
    parser.add_argument("--size", type=int, default=defaults["size"], help="hidden width (default %(default)s)")
    parser.add_argument(
        "--dropout", type=float, default=defaults["dropout"], help="dropout between layers (default %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=defaults["seed"], help="random seed (default %(default)s)")
    parser.add_argument(
        "--epochs", type=int, default=defaults["epochs"], help="passes over the train split (default %(default)s)"
    )
    parser.add_argument(
        "--max-chars", type=int, default=None, help="stop after this many training characters (default: no budget)"
    )
    parser.add_argument(
        "--eval-chars",
        type=int,
        default=None,
        help="validate on a prefix of this many chars (default: the whole val split)",
    )
    parser.add_argument("--lr", type=float, default=defaults["lr"], help="RMSProp learning rate (default %(default)s)")
    parser.add_argument(
        "--batch-size", type=int, default=defaults["batch_size"], help="parallel streams (default %(default)s)"
    )
    parser.add_argument(
        "--unroll", type=int, default=defaults["unroll"], help="truncated-BPTT steps (default %(default)s)"
    )
    parser.add_argument(
        "--patience",
        type=int,
        default=defaults["patience"],
        help="early-stopping patience in epochs (default %(default)s)",
    )
    parser.add_argument(
        "--converge-delta",
        type=float,
        default=defaults["converge_delta"],
        help="stop once validation improves by less than this many nats per epoch over the last "
        "--converge-window epochs (default %(default)s: off)",
    )
    parser.add_argument(
        "--converge-window",
        type=int,
        default=defaults["converge_window"],
        help="epochs the convergence test averages over (default %(default)s)",
    )
    parser.add_argument(
        "--no-fused", action="store_true", help="train with the hand-written cells even where a fused kernel exists"
    )


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """Every option named after a TrainConfig field sets it (`--no-fused` sets `fused`); the rest keep the recipe."""
    settings = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if hasattr(args, f.name)}
    return TrainConfig(**settings, fused=not args.no_fused)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m charlm.train",
        description="Train one character language model with the recipe of Karpathy et al. (2016) sec 3.3. "
        "Rerun the same command after an interruption to resume; a finished run returns at once.",
    )
    add_train_arguments(parser)
    parser.add_argument("--out", type=Path, default=None, help="output folder (default artifacts/<corpus>/<model id>)")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (default: cuda when available)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument(
        "--checkpoint-every",
        type=float,
        default=60.0,
        help="seconds between resume checkpoints (default %(default)s)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    config = config_from_args(args)
    config.validate()  # bad settings are reported before the corpus is read
    try:
        out = train(
            config,
            args.out,
            corpora.load(config.corpus, split_mode=args.splits),
            progress=not args.quiet,
            checkpoint_every_s=args.checkpoint_every,
            threads=args.threads,
            device=args.device,
        )
    except TrainingDiverged as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_DIVERGED
    metrics = json.loads((out / "metrics.json").read_text())
    print(
        f"{metrics['model_id']}: best val {metrics['best_val_loss']:.4f} nats/char after "
        f"{metrics['chars_trained']:,} chars ({metrics['seconds']:.0f} s, stopped: {metrics['stopped']}) -> {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
