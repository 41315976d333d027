"""BiLSTM sequence classifiers with last-state, mean, max, attention and max-attention pooling (Maini et al. 2020).

Maini, Kolluru, Pruthi, Mausam (2020), "Why and when should you pool? Analyzing Pooling in Recurrent
Architectures" (lecture notes, seed 004; their code: dair-iitd/PoolingAnalysis, my_models/models.py): a
bidirectional LSTM reads the sequence, and one vector made of its per-position states [h_fwd_t; h_bwd_t]
goes to a linear classifier. The vector is

    last    [h_fwd at the last position; h_bwd at the first]  (the two final states: "BiLSTM")
    mean    the mean over positions                            ("MEANPOOL")
    max     the element-wise max over positions                ("MAXPOOL")
    att     softmax(w . h_t)-weighted sum of h_t               ("ATT", Luong-style, a learned vector w)
    maxatt  weights softmax(q . h_t / |h_t|), q = the max pool ("MAXATT")

Inputs are one-hot bytes (as for the language models, no embedding). Training goes through
charlm.train's one loop (`fit`): RMSProp with gradient clipping, early stopping on the validation loss,
divergence checks, resume; a run is cached under `<root>/<model id>/` by the hash of its config and data.
Maini et al. train with Adam; the suite's one recipe is RMSProp (Karpathy et al. sec 3.3).

While training, the task follows the running training accuracy (over the minibatches of the last epoch,
scored before each update) and, when it first reaches `target_accuracy` (Maini et al. Table 2: 95 %),
records Maini et al.'s vanishing ratio on a fixed probe batch of training examples: ||dL/dh_t|| of the
concatenated states, through every step (charlm.gradients), on 100 relative-position bins, the middle 10 %
over the two ends (the notes' ||dL/dh_mid|| / ||dL/dh_end||; a BiLSTM's two directions end at either side).
The same is recorded at initialisation. metrics.json holds both, with the step and profile.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from corpora.errors import UserError

from .checkpoint import load_payload
from .gradients import ratio_middle_over_ends, state_gradient_norms, to_bins
from .loop import Task, fit
from .model import INIT_RANGE
from .paths import complete_metrics, config_hash
from .train import TrainConfig, require_positive

FORMAT = 1
POOLS = ("last", "mean", "max", "att", "maxatt")
_RECIPE = {f.name: f.default for f in fields(TrainConfig)}


@dataclass(frozen=True)
class ClassifierConfig:
    pool: str  # how the per-position states become one vector: one of POOLS
    vocab_size: int  # V: inputs are one-hot over the corpus bytes
    classes: int  # number of labels
    hidden: int = 32  # LSTM width per direction (the pooled vector has 2 x hidden)
    forget_bias: float | None = None  # initial forget-gate bias (Maini et al.'s "last1" sets 1); None: uniform init
    seed: int = 0  # initialisation and minibatch order
    batch_size: int = 32  # examples per minibatch (all of one length)
    epochs: int = 30  # passes over the training set (early stopping may end sooner)
    max_chars: int | None = None  # training budget in examples seen (fit counts this task's loss terms, one each)
    lr: float = _RECIPE["lr"]  # RMSProp learning rate
    rms_alpha: float = _RECIPE["rms_alpha"]  # RMSProp decay
    lr_decay: float = _RECIPE["lr_decay"]  # per-epoch factor once decay_after epochs are done
    decay_after: int = _RECIPE["decay_after"]  # epochs at the base learning rate
    grad_clip: float = _RECIPE["grad_clip"]  # max global gradient norm
    patience: int = _RECIPE["patience"]  # early stopping: epochs without validation improvement
    target_accuracy: float = 0.95  # running training accuracy at which the vanishing ratio is recorded (Table 2)
    probe: int = 32  # training examples (of the longest length) the vanishing ratio is measured on

    def validate(self) -> None:
        if self.pool not in POOLS:
            raise UserError(f"unknown pooling '{self.pool}': choose one of {', '.join(POOLS)}")
        for name in ("vocab_size", "classes", "hidden", "batch_size", "probe"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UserError(f"{name} must be a positive integer, got {value!r}")
        if self.classes < 2:
            raise UserError(f"a classifier needs at least 2 classes, got {self.classes}")
        require_positive(self, "epochs", "patience", "lr")

    def to_dict(self) -> dict:
        return asdict(self)

    def model_id(self, data_digest: str) -> str:
        """Readable slug plus a hash of the config and the data it is trained on."""
        identity = {**self.to_dict(), "data": data_digest, "kind": "classifier", "format": FORMAT}
        return f"clf-{self.pool}-H{self.hidden}-s{self.seed}-{config_hash(identity)}"


@dataclass
class Examples:
    """Labelled byte sequences, grouped by length: ids[i] is (n_i, L_i) uint8, labels[i] is (n_i,) int."""

    ids: list[np.ndarray]
    labels: list[np.ndarray]

    def __post_init__(self):
        if not self.ids or len(self.ids) != len(self.labels):
            raise UserError("examples need at least one length group, with one label array per id array")
        for ids, labels in zip(self.ids, self.labels):
            if ids.ndim != 2 or ids.shape[0] != labels.shape[0] or ids.shape[0] == 0 or ids.shape[1] == 0:
                raise UserError(f"a length group needs (n, L) ids and n labels, got {ids.shape} and {labels.shape}")

    def __len__(self) -> int:
        return sum(len(labels) for labels in self.labels)

    def digest(self) -> str:
        h = hashlib.sha256()
        for ids, labels in zip(self.ids, self.labels):
            h.update(np.ascontiguousarray(ids, dtype=np.uint8).tobytes() + b"|")
            h.update(np.ascontiguousarray(labels, dtype=np.int64).tobytes() + b"|")
        return h.hexdigest()


# ------------------------------------------------------------------------------------------ the model


class BiLSTMClassifier(nn.Module):
    """One-hot bytes -> forward and backward LSTM -> pooled [h_fwd_t; h_bwd_t] -> linear -> class logits."""

    def __init__(self, config: ClassifierConfig):
        super().__init__()
        self.config = config
        V, H = config.vocab_size, config.hidden
        self.fwd = nn.LSTM(V, H, batch_first=True)
        self.bwd = nn.LSTM(V, H, batch_first=True)  # reads the sequence right to left
        self.att = nn.Linear(2 * H, 1, bias=False) if config.pool == "att" else None  # Luong score vector w
        self.out = nn.Linear(2 * H, config.classes)
        for p in self.parameters():
            nn.init.uniform_(p, -INIT_RANGE, INIT_RANGE)
        if config.forget_bias is not None:
            with torch.no_grad():
                for lstm in (self.fwd, self.bwd):  # gate order i, f, g, o; torch adds the two biases
                    lstm.bias_ih_l0[H : 2 * H].fill_(config.forget_bias)
                    lstm.bias_hh_l0[H : 2 * H].zero_()

    def onehot(self, ids: torch.Tensor) -> torch.Tensor:
        return F.one_hot(ids.long(), self.config.vocab_size).to(self.out.weight.dtype)  # (B, T, V)

    def states(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, V) inputs -> (B, T, 2H): [h_fwd_t; h_bwd_t], the backward state at t having read T-1..t."""
        forward, _ = self.fwd(x)
        backward, _ = self.bwd(x.flip(1))
        return torch.cat([forward, backward.flip(1)], dim=2)

    def pool(self, states: torch.Tensor) -> torch.Tensor:
        """(B, T, 2H) -> (B, 2H), as `config.pool` says."""
        H, kind = self.config.hidden, self.config.pool
        if kind == "last":
            return torch.cat([states[:, -1, :H], states[:, 0, H:]], dim=1)
        if kind == "mean":
            return states.mean(1)
        if kind == "max":
            return states.max(1).values
        if kind == "att":
            weights = torch.softmax(self.att(states).squeeze(2), dim=1)  # (B, T)
        else:  # maxatt: the max pool queries the directions of the states
            query = states.max(1).values  # (B, 2H)
            keys = states / states.norm(dim=2, keepdim=True).clamp_min(1e-12)
            weights = torch.softmax(torch.einsum("btd,bd->bt", keys, query), dim=1)
        return torch.einsum("bt,btd->bd", weights, states)

    def forward_onehot(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, V) one-hot (or masked) inputs -> (B, classes) logits."""
        return self.out(self.pool(self.states(x)))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.forward_onehot(self.onehot(ids))


def position_gradient_norms(model: BiLSTMClassifier, ids: torch.Tensor, labels: torch.Tensor) -> np.ndarray:
    """Per position t, the mean over examples of || dL / [h_fwd_t; h_bwd_t] ||, through every later step of each
    direction (both LSTMs run one step at a time; charlm.gradients), L the cross-entropy of each example. (T,)"""
    x = model.onehot(ids)  # (B, T, V)
    B, T, _ = x.shape
    H = model.config.hidden

    def step(x_pair, state):
        x_f, x_b = x_pair  # the forward LSTM reads position t, the backward one position T-1-t
        h_f, (_, c_f) = model.fwd(x_f[:, None], (state["fwd"][None], state["fwd_c"][None]))
        h_b, (_, c_b) = model.bwd(x_b[:, None], (state["bwd"][None], state["bwd_c"][None]))
        new = {"fwd": h_f[:, 0], "fwd_c": c_f[0], "bwd": h_b[:, 0], "bwd_c": c_b[0]}
        return (new["fwd"], new["bwd"]), new

    def loss(outputs):
        forward = torch.stack([o[0] for o in outputs], 1)
        backward = torch.stack([o[1] for o in outputs[::-1]], 1)  # back to left-to-right positions
        logits = model.out(model.pool(torch.cat([forward, backward], dim=2)))
        return F.cross_entropy(logits, labels.long(), reduction="none")

    zeros = x.new_zeros(B, H)
    state = {"fwd": zeros, "fwd_c": zeros, "bwd": zeros, "bwd_c": zeros}
    norms = state_gradient_norms(step, state, list(zip(x.unbind(1), x.flip(1).unbind(1))), loss, all_outputs=True)
    per_position = np.sqrt(norms["fwd"] ** 2 + norms["bwd"][::-1] ** 2)  # (T, B)
    return per_position.mean(1)


def vanishing_ratio(profile: np.ndarray) -> float:
    """Maini et al.'s ratio for a BiLSTM: the middle 10 % of the positions over the two ends."""
    return ratio_middle_over_ends(profile, ends="both")


# ------------------------------------------------------------------------------------------ training


@torch.no_grad()
def predict(model: BiLSTMClassifier, examples: Examples, batch: int = 256) -> list[np.ndarray]:
    """Class log-probabilities per length group: [(n_i, classes)]."""
    was = model.training
    model.eval()
    out = []
    for ids in examples.ids:
        ids = torch.from_numpy(ids.astype(np.int64))
        out.append(torch.cat([torch.log_softmax(model(ids[s : s + batch]), 1) for s in range(0, len(ids), batch)]))
    model.train(was)
    return [o.numpy() for o in out]


class ClassifierTask(Task):
    """Minibatches of one length each; the order of each epoch comes from (seed, epoch), so a resumed run draws
    the same batches without saving a generator. Tracks the running training accuracy and the vanishing ratio."""

    def __init__(self, config: ClassifierConfig, train: Examples, val: Examples, model_id: str):
        config.validate()
        self.config, self.train_set, self.val_set, self.model_id = config, train, val, model_id
        batches_per_group = [math.ceil(len(labels) / config.batch_size) for labels in train.labels]
        self.steps_per_epoch = sum(batches_per_group)
        self.chars_per_step = config.batch_size  # loss terms (examples) per step: fit's budget unit here
        self.divergence_loss = math.log(config.classes) + 20  # 20 nats worse than a uniform guess: blown up
        torch.manual_seed(config.seed)
        self.model = BiLSTMClassifier(config)
        longest = int(np.argmax([ids.shape[1] for ids in train.ids]))
        self.probe = (
            torch.from_numpy(train.ids[longest][: config.probe].astype(np.int64)),
            torch.from_numpy(train.labels[longest][: config.probe].astype(np.int64)),
        )
        self.order, self.order_epoch = None, None
        self.steps, self.batch_correct = 0, []  # (correct, total) of each step's minibatch, before its update
        self.last_batch = None
        profile = position_gradient_norms(self.model, *self.probe)
        self.record = {
            "ratio_init": vanishing_ratio(profile), "profile_init": to_bins(profile).tolist(),
            "ratio_target": None, "profile_target": None, "step_target": None, "examples_target": None,
        }  # fmt: skip

    def _epoch_order(self, epoch: int) -> list[tuple[int, np.ndarray]]:
        generator = np.random.default_rng([self.config.seed, epoch])
        batches = []
        for group, labels in enumerate(self.train_set.labels):
            order = generator.permutation(len(labels))
            batches += [
                (group, order[s : s + self.config.batch_size]) for s in range(0, len(order), self.config.batch_size)
            ]
        return [batches[i] for i in generator.permutation(len(batches))]

    def loss(self, epoch, batch):
        if self.order_epoch != epoch:
            self.order, self.order_epoch = self._epoch_order(epoch), epoch
        group, idx = self.order[batch]
        ids = torch.from_numpy(self.train_set.ids[group][idx].astype(np.int64))
        labels = torch.from_numpy(self.train_set.labels[group][idx].astype(np.int64))
        logits = self.model(ids)
        self.last_batch = (int((logits.argmax(1) == labels).sum()), len(labels))
        return F.cross_entropy(logits, labels)

    def running_accuracy(self) -> float | None:
        """Training accuracy over the last epoch's minibatches (None before a full epoch)."""
        window = self.batch_correct[-self.steps_per_epoch :]
        if len(window) < self.steps_per_epoch:
            return None
        return sum(c for c, _ in window) / sum(n for _, n in window)

    def after_step(self):
        self.steps += 1
        self.batch_correct.append(self.last_batch)
        del self.batch_correct[: -self.steps_per_epoch]
        accuracy = self.running_accuracy()
        if self.record["step_target"] is None and accuracy is not None and accuracy >= self.config.target_accuracy:
            profile = position_gradient_norms(self.model, *self.probe)
            self.record.update(
                ratio_target=vanishing_ratio(profile), profile_target=to_bins(profile).tolist(),
                step_target=self.steps, examples_target=self.steps * self.config.batch_size,
            )  # fmt: skip

    @torch.no_grad()
    def validate(self):
        logp = predict(self.model, self.val_set)
        nll = np.concatenate([-lp[np.arange(len(y)), y] for lp, y in zip(logp, self.val_set.labels)])
        return float(nll.mean())

    def resume_state(self):
        return {"steps": self.steps, "batch_correct": [list(b) for b in self.batch_correct], "record": self.record}

    def load_resume_state(self, state):
        self.steps = int(state.get("steps", 0))
        self.batch_correct = [tuple(b) for b in state.get("batch_correct", [])]
        self.record = {**self.record, **(state.get("record") or {})}

    def checkpoint(self, **extra):
        extra = {k: v for k, v in extra.items() if k not in ("model_id", "kind")}
        return {
            "format": FORMAT, "kind": "classifier", "config": self.config.to_dict(), "model_id": self.model_id,
            "state_dict": {k: v.detach().clone() for k, v in self.model.state_dict().items()}, **extra,
        }  # fmt: skip

    def describe(self):
        return {
            "classifier_config": self.config.to_dict(),
            "params": sum(p.numel() for p in self.model.parameters()),
            "train_accuracy": self.running_accuracy(),
            **self.record,
        }


def train_classifier(
    config: ClassifierConfig,
    train: Examples,
    val: Examples,
    root: str | Path,
    progress: bool = False,
    checkpoint_every_s: float = 60.0,
) -> Path:
    """Train (or resume, or return at once when complete) one classifier; returns its folder under `root`.

    The folder is `<root>/<model id>`, the id hashing the config and both example sets; raises
    charlm.loop.TrainingDiverged when the loss or weights go non-finite (the last good state is kept).
    """
    config.validate()
    data = hashlib.sha256((train.digest() + val.digest()).encode()).hexdigest()
    model_id = config.model_id(data)
    out = Path(root) / model_id
    if complete_metrics(out / "metrics.json") and (out / "checkpoint.pt").is_file():
        return out
    task = ClassifierTask(config, train, val, model_id)
    meta = {"model_id": model_id, "kind": "classifier", "data_sha256": data}
    fit(task, config, out, model_id, meta, progress, checkpoint_every_s=checkpoint_every_s, snapshots=False)
    return out


def load_classifier(path: str | Path) -> BiLSTMClassifier:
    """Rebuild a classifier from its checkpoint (weights_only); `model.meta` holds the rest of the payload."""
    payload = load_payload(path)
    if payload.get("kind") != "classifier":
        raise UserError(f"checkpoint {path} is not a classifier checkpoint (kind {payload.get('kind')!r})")
    try:
        model = BiLSTMClassifier(ClassifierConfig(**payload["config"]))
        model.load_state_dict(payload["state_dict"])
    except (TypeError, RuntimeError) as err:
        raise UserError(f"checkpoint {path} does not match its own config ({str(err).splitlines()[0]})") from None
    model.meta = {k: v for k, v in payload.items() if k != "state_dict"}
    return model.eval()
