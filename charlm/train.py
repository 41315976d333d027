"""Training with the recipe of Karpathy et al. (2016) sec 3.3, resumable and bit-reproducible.

Uniform init in [-0.08, 0.08]; RMSProp (lr 2e-3, alpha 0.95); batch 100 x unroll 100 with
truncated BPTT (state carried across batches); 50 epochs; lr x0.95 per epoch after epoch 10;
gradient-norm clipping; early stopping on validation loss; dropout as an option.

A run writes under `artifacts/<corpus>/<model id>/`:
    state.pt        everything needed to resume (model, optimizer, RNG, carried state, curves)
    checkpoint.pt   the best model on validation so far (self-describing, see checkpoint.py)
    snapshots/      models at log-spaced points of the first epochs (for training dynamics)
    metrics.json    per-epoch train/val curve; "complete": true once the run has ended
Killed at any moment and started again with the same command, a run resumes from state.pt
and ends with the same numbers as an uninterrupted one (same seed, CPU).
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
import torch.nn.functional as F
from tqdm import tqdm

import corpora
from corpora import atomic
from corpora.batching import stream_windows
from corpora.errors import UserError, add_corpus_arguments, run_cli

from .checkpoint import load_payload, save_checkpoint, save_payload
from .model import ARCHS, CharLM, ModelConfig, count_params
from .paths import config_hash, model_dir

EXIT_DIVERGED = 3


@dataclass(frozen=True)
class TrainConfig:
    corpus: str  # registered corpus name or a path to a text file
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
    eval_chars: int | None = None  # validate on the first eval_chars of the val split (None: all of it)
    snapshots: int = 12  # log-spaced model snapshots over the first snapshot_epochs
    snapshot_epochs: float = 3.0  # horizon of the snapshots (Karpathy et al. Fig 5: first 3 epochs)
    fused: bool = True  # train rnn/gru/lstm/lstm-gates with torch's fused kernels (proven equal to the cells)

    def model_config(self, vocab_size: int) -> ModelConfig:
        return ModelConfig(self.arch, vocab_size, self.layers, self.size, self.dropout)

    def model_id(self, corpus_key: str) -> str:
        """Readable slug plus a hash of the full config and the corpus (`Corpus.key`: its bytes and split mode)."""
        digest = config_hash({**asdict(self), "corpus_sha256": corpus_key})
        return f"{self.arch}-L{self.layers}-H{self.size}-s{self.seed}-{digest}"

    def validate(self) -> None:
        ModelConfig(self.arch, 2, self.layers, self.size, self.dropout)  # raises UserError on bad arch/sizes
        require_positive(self, "epochs", "batch_size", "unroll", "snapshots", "patience", "lr")


def require_positive(config, *names: str) -> None:
    """Each named setting (and max_chars, when set) must be positive: one UserError line otherwise."""
    for name in names + (("max_chars",) if getattr(config, "max_chars", None) is not None else ()):
        if getattr(config, name) <= 0:
            raise UserError(f"{name} must be positive, got {getattr(config, name)}")


class TrainingDiverged(RuntimeError):
    pass


def learning_rate(config: TrainConfig, epoch: int) -> float:
    """epoch is 0-based: epochs 0..decay_after-1 at the base rate, then x lr_decay per epoch."""
    return config.lr * config.lr_decay ** max(0, epoch - config.decay_after + 1)


def pick_device(device: str | None = None) -> torch.device:
    """`cuda` when asked for or available (the paper profile), else the CPU (bit-reproducible resume)."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"device '{device}' asked for, but torch sees no CUDA device")
    return torch.device(device)


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


def snapshot_steps(config: TrainConfig, steps_per_epoch: int, total_steps: int) -> list[int]:
    horizon = max(1, min(total_steps, int(config.snapshot_epochs * steps_per_epoch)))
    return sorted({int(s) for s in np.round(np.geomspace(1, horizon, config.snapshots))})


def _state_payload(model, optimizer, carried, progress: dict) -> dict:
    return {
        "config": model.config.to_dict(),
        "state_dict": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "rng": torch.get_rng_state(),
        "carried": [[t.cpu() for t in s] for s in carried] if carried is not None else None,
        "progress": progress,
    }


def train(
    config: TrainConfig,
    out_dir: str | Path | None = None,
    corpus: corpora.Corpus | None = None,
    progress: bool = True,
    checkpoint_every_s: float = 60.0,
    threads: int | None = None,
    device: str | None = None,
) -> Path:
    """Train (or resume, or return at once if already complete); returns the model's artifact folder."""
    config.validate()
    corpus = corpus or corpora.load(config.corpus)
    model_id = config.model_id(corpus.key)
    out = Path(out_dir) if out_dir is not None else model_dir(corpus.name, model_id)
    metrics_path = out / "metrics.json"
    if metrics_path.exists():
        previous = json.loads(metrics_path.read_text())
        if previous.get("model_id") != model_id:
            raise UserError(f"{out} holds another model ({previous.get('model_id')}); give a new --out for {model_id}")
        if previous.get("complete"):
            return out
    if threads:
        torch.set_num_threads(threads)

    x_train, y_train = stream_windows(corpus.split("train"), config.batch_size, config.unroll)
    device = pick_device(device)
    x_train, y_train = torch.from_numpy(x_train).to(device), torch.from_numpy(y_train).to(device)
    val_ids = corpus.split("val")[: config.eval_chars] if config.eval_chars else corpus.split("val")
    if val_ids.size < 2:
        raise UserError(
            f"the val split of corpus '{corpus.name}' has {val_ids.size} characters: too few to validate on"
        )
    steps_per_epoch = x_train.shape[0]
    chars_per_step = config.batch_size * config.unroll
    total_steps = config.epochs * steps_per_epoch
    if config.max_chars is not None:
        total_steps = min(total_steps, math.ceil(config.max_chars / chars_per_step))
    snap_at = set(snapshot_steps(config, steps_per_epoch, total_steps))

    torch.manual_seed(config.seed)
    model = CharLM(config.model_config(corpus.vocab_size)).to(device)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=config.lr, alpha=config.rms_alpha)
    vocab = corpus.vocab.tolist()
    meta = {
        "model_id": model_id,
        "train_config": asdict(config),
        "corpus": corpus.name,
        "corpus_splits": corpus.split_mode,
    }
    progress_state = {
        "step": 0,
        "seconds": 0.0,
        "epochs": [],
        "best_val": None,
        "bad_epochs": 0,
        "epoch_loss_sum": 0.0,
        "epoch_steps": 0,
    }
    carried = None
    state_path = out / "state.pt"
    if state_path.exists():
        saved = load_payload(state_path)
        if saved.get("model_id") != model_id:
            raise UserError(
                f"{state_path} belongs to another model ({saved.get('model_id')}); give a new --out for {model_id}"
            )
        model.load_state_dict(saved["state_dict"])
        optimizer.load_state_dict(saved["optimizer"])
        torch.set_rng_state(saved["rng"])
        carried = [tuple(t.to(device) for t in s) for s in saved["carried"]] if saved["carried"] is not None else None
        progress_state = saved["progress"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "snapshots").mkdir(exist_ok=True)

    def write_metrics(complete: bool, stopped: str | None = None):
        atomic.write_json(
            metrics_path,
            {
                **meta,
                "model_config": model.config.to_dict(),
                "params": count_params(model.config),
                "corpus_sha256": corpus.sha256,
                "vocab_size": corpus.vocab_size,
                "chars_trained": progress_state["step"] * chars_per_step,
                "seconds": round(progress_state["seconds"], 2),
                "epochs": progress_state["epochs"],
                "best_val_loss": progress_state["best_val"],
                "complete": complete,
                "stopped": stopped,
            },
        )

    def save_state():
        save_payload(state_path, {"model_id": model_id, **_state_payload(model, optimizer, carried, progress_state)})

    def kept() -> str:
        return f"kept the last good state in {state_path}" if state_path.exists() else "no state had been saved yet"

    model.train()
    started, last_save = time.perf_counter(), time.perf_counter()
    bar = tqdm(
        total=total_steps * chars_per_step,
        initial=progress_state["step"] * chars_per_step,
        unit="char",
        unit_scale=True,
        desc=model_id,
        disable=not progress,
        dynamic_ncols=True,
        mininterval=1.0,
    )
    stopped = None
    try:
        while progress_state["step"] < total_steps:
            step = progress_state["step"]
            epoch, batch = divmod(step, steps_per_epoch)
            if batch == 0:
                carried = None  # each epoch starts its streams from a zero state
            lr = learning_rate(config, epoch)
            for group in optimizer.param_groups:
                group["lr"] = lr
            logits, carried = model.forward_with_state(x_train[batch], carried, fused=config.fused)
            loss = F.cross_entropy(logits.flatten(0, 1), y_train[batch].flatten())
            loss_value = loss.item()
            if not math.isfinite(loss_value) or loss_value > 3 * math.log(corpus.vocab_size) + 1:
                raise TrainingDiverged(
                    f"training of {model_id} diverged at step {step} (epoch {epoch + 1}, loss {loss_value:.3g}); "
                    f"{kept()}; try a lower --lr or gradient clip"
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            if not torch.stack(
                [torch.isfinite(p).all() for p in model.parameters()]
            ).all():  # never save non-finite weights
                raise TrainingDiverged(
                    f"training of {model_id} diverged at step {step} (epoch {epoch + 1}): the update made "
                    "weights non-finite; "
                    f"{kept()}; try a lower --lr or gradient clip"
                )
            carried = [tuple(t.detach() for t in s) for s in carried]  # truncate BPTT at the window edge
            progress_state["step"] = step = step + 1
            progress_state["epoch_loss_sum"] += loss_value
            progress_state["epoch_steps"] += 1
            bar.update(chars_per_step)
            bar.set_postfix(loss=f"{loss_value:.3f}", lr=f"{lr:.2e}", refresh=False)
            if step in snap_at:
                save_checkpoint(
                    out / "snapshots" / f"step{step:07d}.pt",
                    model,
                    vocab,
                    corpus.sha256,
                    step=step,
                    chars_trained=step * chars_per_step,
                    **meta,
                )
            end_of_epoch = step % steps_per_epoch == 0
            if end_of_epoch or step == total_steps:
                val = evaluate(model, val_ids, config.batch_size, config.unroll)
                progress_state["epochs"].append(
                    {
                        "epoch": round(step / steps_per_epoch, 4),
                        "step": step,
                        "chars": step * chars_per_step,
                        "lr": lr,
                        "train_loss": progress_state["epoch_loss_sum"] / progress_state["epoch_steps"],
                        "val_loss": val,
                    }
                )
                progress_state["epoch_loss_sum"], progress_state["epoch_steps"] = 0.0, 0
                bar.write(
                    f"{model_id} epoch {step / steps_per_epoch:.2f}: train "
                    f"{progress_state['epochs'][-1]['train_loss']:.4f}  val {val:.4f} nats/char"
                )
                if progress_state["best_val"] is None or val < progress_state["best_val"]:
                    progress_state["best_val"], progress_state["bad_epochs"] = val, 0
                    save_checkpoint(
                        out / "checkpoint.pt",
                        model,
                        vocab,
                        corpus.sha256,
                        step=step,
                        chars_trained=step * chars_per_step,
                        val_loss=val,
                        **meta,
                    )
                else:
                    progress_state["bad_epochs"] += 1
                if progress_state["bad_epochs"] >= config.patience:
                    stopped = "early_stopping"
                    break
            now = time.perf_counter()
            if end_of_epoch or now - last_save >= checkpoint_every_s:
                progress_state["seconds"] += now - started
                started = last_save = now
                save_state()
                write_metrics(complete=False)
    finally:
        bar.close()
    progress_state["seconds"] += time.perf_counter() - started
    save_state()
    if stopped is None:
        stopped = (
            "budget" if config.max_chars is not None and total_steps < config.epochs * steps_per_epoch else "epochs"
        )
    write_metrics(complete=True, stopped=stopped)
    return out


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
        "--no-fused", action="store_true", help="train with the hand-written cells even where a fused kernel exists"
    )


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(
        corpus=args.corpus,
        arch=args.arch,
        layers=args.layers,
        size=args.size,
        dropout=args.dropout,
        seed=args.seed,
        epochs=args.epochs,
        max_chars=args.max_chars,
        eval_chars=args.eval_chars,
        lr=args.lr,
        batch_size=args.batch_size,
        unroll=args.unroll,
        patience=args.patience,
        fused=not args.no_fused,
    )


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
        "--checkpoint-every", type=float, default=60.0, help="seconds between resume checkpoints (default %(default)s)"
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
        f"{metrics['chars_trained']:,} chars "
        f"({metrics['seconds']:.0f} s, stopped: {metrics['stopped']}) -> {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
