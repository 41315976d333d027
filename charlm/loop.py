"""The one training loop of the suite, `fit`, with the recipe of Karpathy et al. (2016) sec 3.3: RMSProp, the learning
rate schedule, gradient-norm clipping, early stopping on validation, snapshots, divergence checks, and a resume from
`state.pt` that ends with the same numbers as an uninterrupted run.

Each kind of model supplies a `Task` (the loss of one minibatch, its validation loss, the extra state a resume needs
and a self-describing checkpoint): the recurrent language models (charlm.train.LanguageModelTask), the n-NN baseline
(charlm.nnn.NNNTask) and the pooling classifiers (charlm.classifier). The loop owns the rest.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn as nn
from tqdm import tqdm

from corpora import atomic
from corpora.errors import UserError

from .checkpoint import file_sha256, load_payload, save_payload


class TrainingDiverged(RuntimeError):
    """Loss or weights became non-finite (or the loss exploded); the last good state is kept. CLIs exit 3."""


def learning_rate(config, epoch: int) -> float:
    """epoch is 0-based: epochs 0..decay_after-1 at the base rate, then x lr_decay per epoch."""
    return config.lr * config.lr_decay ** max(0, epoch - config.decay_after + 1)


class Task:
    """What `fit` needs from one kind of model. Subclasses set `model`, `steps_per_epoch`, `chars_per_step`."""

    model: nn.Module
    steps_per_epoch: int  # minibatches per pass over the training data
    chars_per_step: int  # training characters (positions) per minibatch
    divergence_loss: float = float("inf")  # a finite loss above this counts as divergence

    def loss(self, epoch: int, batch: int) -> torch.Tensor:
        """Mean loss of minibatch `batch` of epoch `epoch` (0-based), with the graph for backward."""
        raise NotImplementedError

    def after_step(self) -> None:
        """Called after each optimiser step (the recurrent task truncates BPTT here)."""

    def validate(self) -> float:
        """Mean validation loss per position."""
        raise NotImplementedError

    def resume_state(self) -> dict:
        """Extra state a resume needs besides weights, optimiser and RNG (plain tensors and containers)."""
        return {}

    def load_resume_state(self, state: dict) -> None:
        pass

    def checkpoint(self, **extra: Any) -> dict:
        """A self-describing payload of the current weights (see checkpoint.py)."""
        raise NotImplementedError

    def describe(self) -> dict:
        """What metrics.json records about the model (config, parameter count)."""
        return {"params": sum(p.numel() for p in self.model.parameters())}


def converged(val_losses: list[float], delta: float, window: int) -> bool:
    """Whether the best validation loss improved by less than `delta` nats per epoch over the last `window` epochs.

    `val_losses` holds one validation loss per finished epoch. Off (False) when delta is 0 or fewer than
    window + 1 epochs are done.
    """
    if delta <= 0 or len(val_losses) <= window:
        return False
    before, now = min(val_losses[:-window]), min(val_losses)
    return (before - now) / window < delta


def snapshot_steps(config, steps_per_epoch: int, total_steps: int) -> list[int]:
    """Log-spaced steps over the first `snapshot_epochs` epochs (or the whole budget when shorter)."""
    horizon = max(1, min(total_steps, int(config.snapshot_epochs * steps_per_epoch)))
    return sorted({int(s) for s in np.round(np.geomspace(1, horizon, config.snapshots))})


def _rng_state() -> dict:
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state) -> None:
    if isinstance(state, torch.Tensor):  # state files written before the CUDA state was saved
        state = {"cpu": state}
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


OPTIMIZERS = ("rmsprop", "adam")


def weights_finite(model: nn.Module) -> bool:
    """Whether every weight is finite, checked after each update. A finite total norm proves it in one fused pass
    (any inf or NaN makes the norm inf or NaN); only a non-finite norm, which huge finite weights can also give by
    overflowing it, is checked weight by weight. Measured on the LSTM 2 x 85 (one thread, beside two trainers): 0.2 ms
    a step against 1.3 ms weight by weight, which took 1.4 % of a dropout LSTM's training in a py-spy profile."""
    params = list(model.parameters())
    if torch.isfinite(torch.nn.utils.get_total_norm(params)):
        return True
    return bool(torch.stack([torch.isfinite(p).all() for p in params]).all())


def make_optimizer(config, parameters) -> torch.optim.Optimizer:
    """The recipe's RMSProp (Karpathy et al. sec 3.3: lr, alpha = rms_alpha), or Adam for a config whose `optimizer`
    says so (only the n-NNs offer it: charlm.nnn.NNNConfig; a recurrent TrainConfig has no such field)."""
    if getattr(config, "optimizer", "rmsprop") == "adam":
        return torch.optim.Adam(parameters, lr=config.lr)
    return torch.optim.RMSprop(parameters, lr=config.lr, alpha=config.rms_alpha)


def fit(
    task: Task,
    config,
    out: Path,
    model_id: str,
    meta: dict,
    progress: bool = True,
    checkpoint_every_s: float = 60.0,
    snapshots: bool = True,
    stop_after_steps: int | None = None,
) -> Path:
    """Train `task.model` with the recipe in `config` (lr, rms_alpha, lr_decay, decay_after, grad_clip, epochs,
    max_chars, patience, snapshots, snapshot_epochs); resume from `out/state.pt` if present.

    Writes out/checkpoint.pt (best on validation), out/snapshots/, out/state.pt and out/metrics.json, whose
    "complete": true marks the run done. Raises TrainingDiverged on a non-finite or exploding loss.
    `stop_after_steps` ends the run early, unfinished (the provenance test retrains a shipped model to its first
    snapshot with the very loop that trained it, tests/test_shipped.py).
    """
    out = Path(out)
    metrics_path = out / "metrics.json"
    state_path = out / "state.pt"
    model = task.model
    optimizer = make_optimizer(config, model.parameters())
    steps_per_epoch, chars_per_step = task.steps_per_epoch, task.chars_per_step
    total_steps = config.epochs * steps_per_epoch
    if config.max_chars is not None:
        total_steps = min(total_steps, math.ceil(config.max_chars / chars_per_step))
    snap_at = set(snapshot_steps(config, steps_per_epoch, total_steps)) if snapshots else set()
    progress_state = {
        "step": 0,
        "seconds": 0.0,
        "epochs": [],
        "best_val": None,
        "best_step": None,
        "bad_epochs": 0,
        "epoch_loss_sum": 0.0,
        "epoch_steps": 0,
        "snapshots": [],
    }
    if state_path.exists():
        saved = load_payload(state_path)
        if saved.get("model_id") != model_id:
            raise UserError(
                f"{state_path} belongs to another model ({saved.get('model_id')}); give a new --out for {model_id}"
            )
        model.load_state_dict(saved["state_dict"])
        optimizer.load_state_dict(saved["optimizer"])
        _set_rng_state(saved["rng"])
        task.load_resume_state(saved.get("task") or {})
        progress_state = {**progress_state, **saved["progress"]}
    out.mkdir(parents=True, exist_ok=True)
    if snap_at:
        (out / "snapshots").mkdir(exist_ok=True)

    def write_metrics(complete: bool, stopped: str | None = None):
        best = out / "checkpoint.pt"
        atomic.write_json(
            metrics_path,
            {
                **meta,
                **task.describe(),
                "chars_trained": progress_state["step"] * chars_per_step,
                "seconds": round(progress_state["seconds"], 2),
                "epochs": progress_state["epochs"],
                "best_val_loss": progress_state["best_val"],
                "best_step": progress_state["best_step"],
                "snapshots": progress_state["snapshots"],
                "checkpoint_sha256": file_sha256(best) if complete and best.exists() else None,
                "complete": complete,
                "stopped": stopped,
            },
        )

    def save_state():
        save_payload(
            state_path,
            {
                "model_id": model_id,
                "config": task.describe(),
                "state_dict": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "rng": _rng_state(),
                "task": task.resume_state(),
                "progress": progress_state,
            },
        )

    def diverged(step: int, epoch: int, what: str) -> TrainingDiverged:
        kept = f"kept the last good state in {state_path}" if state_path.exists() else "no state had been saved yet"
        return TrainingDiverged(
            f"training of {model_id} diverged at step {step} (epoch {epoch + 1}, {what}); {kept}; "
            "try a lower --lr or gradient clip"
        )

    model.train()
    started = last_save = time.perf_counter()
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
            if stop_after_steps is not None and step >= stop_after_steps:
                return out  # unfinished on purpose: no metrics claim completion
            epoch, batch = divmod(step, steps_per_epoch)
            lr = learning_rate(config, epoch)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss = task.loss(epoch, batch)
            loss_value = loss.item()
            if not math.isfinite(loss_value) or loss_value > task.divergence_loss:
                raise diverged(step, epoch, f"loss {loss_value:.3g}")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            if not weights_finite(model):
                raise diverged(step, epoch, "the update made weights non-finite")  # never save non-finite weights
            task.after_step()
            progress_state["step"] = step = step + 1
            progress_state["epoch_loss_sum"] += loss_value
            progress_state["epoch_steps"] += 1
            bar.update(chars_per_step)
            bar.set_postfix(loss=f"{loss_value:.3f}", lr=f"{lr:.2e}", refresh=False)
            if step in snap_at:
                path = out / "snapshots" / f"step{step:07d}.pt"
                save_payload(path, task.checkpoint(step=step, chars_trained=step * chars_per_step, **meta))
                progress_state["snapshots"].append(
                    {"step": step, "chars": step * chars_per_step, "file": f"snapshots/{path.name}",
                     "sha256": file_sha256(path)}
                )  # fmt: skip
            end_of_epoch = step % steps_per_epoch == 0
            if end_of_epoch or step == total_steps:
                val = task.validate()
                record = {
                    "epoch": round(step / steps_per_epoch, 4),
                    "step": step,
                    "chars": step * chars_per_step,
                    "lr": lr,
                    "train_loss": progress_state["epoch_loss_sum"] / progress_state["epoch_steps"],
                    "val_loss": val,
                }
                progress_state["epochs"].append(record)
                progress_state["epoch_loss_sum"], progress_state["epoch_steps"] = 0.0, 0
                if progress:
                    bar.write(
                        f"{model_id} epoch {record['epoch']:.2f}: train {record['train_loss']:.4f}  "
                        f"val {val:.4f} nats/char"
                    )
                if progress_state["best_val"] is None or val < progress_state["best_val"]:
                    progress_state["best_val"], progress_state["best_step"], progress_state["bad_epochs"] = val, step, 0
                    payload = task.checkpoint(step=step, chars_trained=step * chars_per_step, val_loss=val, **meta)
                    save_payload(out / "checkpoint.pt", payload)
                else:
                    progress_state["bad_epochs"] += 1
                if progress_state["bad_epochs"] >= config.patience:
                    stopped = "early_stopping"
                    break
                full_epochs = [e["val_loss"] for e in progress_state["epochs"] if e["step"] % steps_per_epoch == 0]
                delta, window = getattr(config, "converge_delta", 0.0), getattr(config, "converge_window", 3)
                if end_of_epoch and step < total_steps and converged(full_epochs, delta, window):
                    stopped = "converged"
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
        stopped = "budget" if total_steps < config.epochs * steps_per_epoch else "epochs"
    write_metrics(complete=True, stopped=stopped)
    return out
