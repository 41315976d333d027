"""Any trained model of the suite behind one small interface: what sampling and text scoring share.

    model = anymodel.load("artifacts/warpeace/<model id>/checkpoint.pt")   # or a model folder, or a model id

A model is a recurrent checkpoint (every architecture, snapshots included), an n-NN checkpoint or folder,
or a KenLM n-gram folder. Each gives

    model.vocab                  (V,) uint8: index i of every distribution is byte vocab[i]
    model.encode(data, ...)      bytes -> vocabulary ids, with a stated policy for bytes outside the vocabulary
    model.logprobs(ids)          the Predictions contract: row t is log p(ids[t + 1] | ids[: t + 1]), (T, V)
    model.stepper()              reads a few ids at a time and returns log p(next) (V,): what sampling needs

Recurrent text is read as parallel warmed-up streams (charlm.predict), n-NNs position by position,
n-grams as one KenLM stream from the null context (charlm.ngram.score_stream): exactly what the
report's Predictions are, so scoring a split's text here gives the split's stored numbers.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from corpora.errors import UserError

from .checkpoint import file_sha256, load_payload, model_from_payload
from .kinds.base import ModelKind
from .model import CharLM
from .paths import artifacts_root, complete_metrics
from .shipped import MANIFEST, SHIPPED_ROOT, damaged_files


@dataclass(eq=False)
class AnyModel:
    kind: ModelKind  # what it is (charlm.kinds): it scores, steps and describes the model
    net: object  # CharLM, nnn_model.NNN, or a kenlm.Model
    vocab: np.ndarray  # (V,) uint8
    model_id: str
    digest: str  # what its numbers were computed from: the checkpoint's sha256, or an n-gram's id and size
    path: Path | None = None
    meta: dict = field(default_factory=dict)

    @property
    def vocab_size(self) -> int:
        return int(self.vocab.size)

    @property
    def description(self) -> str:
        """A short human name: the architecture and shape, or the baseline and its order."""
        return self.kind.model_description(self)

    def encode(self, data: bytes, unknown: str = "error", what: str = "the text") -> tuple[np.ndarray, np.ndarray]:
        """Bytes -> (ids (N,) int64, offsets (N,) int64: where each id's byte sits in `data`).

        `unknown="error"`: a byte outside the vocabulary is one UserError line naming every such byte, its count
        and first offset. `unknown="skip"`: those bytes are dropped (the model reads the text without them).
        """
        if unknown not in ("error", "skip"):
            raise UserError(f"unknown-byte policy must be 'error' or 'skip', got {unknown!r}")
        raw = np.frombuffer(bytes(data), dtype=np.uint8)
        table = np.full(256, -1, dtype=np.int64)
        table[self.vocab] = np.arange(self.vocab_size)
        ids = table[raw]
        outside = ids < 0
        if outside.any() and unknown == "error":
            raise UserError(f"{what} {describe_unknown(raw, outside, self.vocab_size)}")
        offsets = np.flatnonzero(~outside)
        return ids[offsets], offsets

    def decode(self, ids) -> bytes:
        return self.vocab[np.asarray(ids, dtype=np.int64)].tobytes()

    def logprobs(self, ids: np.ndarray, streams: int | None = None, progress: bool = False) -> np.ndarray:
        """(N,) ids -> (N - 1, V) float32 log-probabilities of each next id (the Predictions contract).

        `streams` (recurrent models only): 1 reads the text as one stream from a zero state; None lets
        charlm.predict choose parallel warmed-up streams (within 1e-3 nats of one stream, much faster).
        """
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size < 2:
            raise UserError(f"a text of {ids.size} character{'s' if ids.size != 1 else ''} has no position to predict")
        return self.kind.logprobs(self, ids, streams=streams, progress=progress)

    def stepper(self) -> Stepper:
        return self.kind.stepper(self)


# ------------------------------------------------------------------------------------------ reading step by step


class Stepper:
    """Reads ids a few at a time; `read(ids)` returns the (V,) float64 log-probabilities of the next id."""

    def read(self, ids) -> np.ndarray:
        raise NotImplementedError


class RecurrentStepper(Stepper):
    def __init__(self, model: AnyModel):
        self.net, self.state = model.net, None

    @torch.no_grad()
    def read(self, ids) -> np.ndarray:
        x = torch.as_tensor(np.asarray(ids, dtype=np.int64))[None]  # (1, k)
        logits, self.state = self.net.forward_with_state(x, self.state)
        return torch.log_softmax(logits[0, -1].double(), -1).numpy()


class WindowStepper(Stepper):
    """The n-NN sees the last n ids; slots before the text's start are its "no character" input."""

    def __init__(self, model: AnyModel):
        self.net, self.history = model.net, []

    @torch.no_grad()
    def read(self, ids) -> np.ndarray:
        from .nnn_model import context_rows

        self.history.extend(int(i) for i in ids)
        window = np.asarray(self.history[-self.net.n :] + [0], dtype=np.int64)  # the trailing id is never read
        rows = context_rows(window, self.net.n, self.net.vocab_size)[-1:]  # (1, n): the context after the last id
        return torch.log_softmax(self.net(rows)[0].double(), -1).numpy()


class KenLMStepper(Stepper):
    """KenLM from its null context, no sentence boundaries; each row normalised over the byte vocabulary."""

    def __init__(self, model: AnyModel):
        import kenlm

        from .ngram import token_names

        self.net, self.words = model.net, token_names(model.vocab)
        self.state, self.scratch = kenlm.State(), kenlm.State()
        self.net.NullContextWrite(self.state)
        self._state_type = kenlm.State

    def read(self, ids) -> np.ndarray:
        for i in ids:
            nxt = self._state_type()
            self.net.BaseScore(self.state, self.words[int(i)], nxt)
            self.state = nxt
        row = np.array([self.net.BaseScore(self.state, w, self.scratch) for w in self.words]) * math.log(10.0)
        return row - np.logaddexp.reduce(row)


# ------------------------------------------------------------------------------------------ loading


def describe_unknown(raw: np.ndarray, outside: np.ndarray, vocab_size: int, show: int = 8) -> str:
    """'holds 3 bytes outside the model's vocabulary of 87 bytes: 0xe2 (x2, first at byte 10), ...'."""
    values, first, counts = np.unique(raw[outside], return_index=True, return_counts=True)
    where = np.flatnonzero(outside)[first]
    listing = ", ".join(
        f"0x{v:02x} (x{c:,}, first at byte {w:,})" for v, c, w in list(zip(values, counts, where))[:show]
    )
    more = f" and {values.size - show} more byte values" if values.size > show else ""
    n = int(outside.sum())
    return (
        f"holds {n:,} byte{'s' if n != 1 else ''} outside the model's vocabulary of {vocab_size} bytes: {listing}{more}"
    )


def _vocab(values, expected: int, path) -> np.ndarray:
    vocab = np.asarray(values if values is not None else [], dtype=np.int64)
    if vocab.size != expected or vocab.size == 0 or vocab.min() < 0 or vocab.max() > 255:
        raise UserError(f"{path} records no usable byte vocabulary (expected {expected} byte values)")
    return vocab.astype(np.uint8)


def from_charlm(net: CharLM, path: str | Path | None = None, digest: str = "") -> AnyModel:
    """Wrap a loaded recurrent model (load_checkpoint, or a Context's `model(row)`); its `meta` holds the vocab."""
    meta = getattr(net, "meta", {})
    vocab = _vocab(meta.get("vocab"), net.config.vocab_size, path or "the model")
    model_id = meta.get("model_id") or (Path(path).parent.name if path else net.config.arch)
    if meta.get("step") is not None and path is not None and Path(path).parent.name == "snapshots":
        model_id = f"{model_id}@step{meta['step']}"
    from .kinds import RECURRENT_KIND

    return AnyModel(RECURRENT_KIND, net.eval(), vocab, model_id, digest, Path(path) if path else None, meta)


def load_recurrent(spec: str | Path | AnyModel | CharLM, purpose: str) -> AnyModel:
    """`load`, refusing an n-NN or n-gram in one line that says why a recurrent model is needed (`purpose`)."""
    model = load(spec)
    if not model.kind.recurrent:
        raise UserError(f"{model.model_id} is not a recurrent model ({model.description}): {purpose}")
    return model


def _resolve(spec: str | Path) -> Path:
    """A checkpoint file, a model folder, or a bare model id: looked up under the artifacts root, else among the
    models the repository ships (models/<profile>/<corpus>/<id>, read in place once their sha256 check out, so a
    fresh clone loads them before any report installed them). A prefix of ids is one line listing them."""
    path = Path(spec).expanduser()
    if path.exists():
        return path
    text = str(spec)
    if text and os.sep not in text and "/" not in text:
        hits = sorted(artifacts_root().glob(f"*/{text}")) or [
            manifest.parent for manifest in sorted(SHIPPED_ROOT.glob(f"*/*/{text}/{MANIFEST}"))
        ]
        if len(hits) > 1:
            raise UserError(f"model id '{text}' names {len(hits)} folders ({', '.join(map(str, hits))}): give a path")
        if hits and hits[0].is_relative_to(SHIPPED_ROOT) and (problem := damaged_files(hits[0])):
            raise UserError(f"the shipped model {hits[0]} cannot be read: {problem}")
        if hits:
            return hits[0]
        near = sorted({f"{p.name} ({p.parent.name})" for p in artifacts_root().glob(f"*/{text}*") if p.is_dir()}
                      | {f"{p.parent.name} ({p.parent.parent.name})"
                         for p in SHIPPED_ROOT.glob(f"*/*/{text}*/{MANIFEST}")})  # fmt: skip
        if near:
            more = f" and {len(near) - 8} more" if len(near) > 8 else ""
            raise UserError(f"no model id is '{text}'; ids that begin so: {', '.join(near[:8])}{more}")
    raise UserError(
        f"model {spec} does not exist (give a checkpoint .pt file, a model folder, or a model id found under "
        f"{artifacts_root()} or shipped in {SHIPPED_ROOT})"
    )


def load(spec: str | Path) -> AnyModel:
    """Load any model of the suite (see the module docstring); bad input is one UserError line."""
    if isinstance(spec, AnyModel):
        return spec
    if isinstance(spec, CharLM):
        return from_charlm(spec)
    path = _resolve(spec)
    from . import kinds

    if path.is_dir():
        metrics = complete_metrics(path / "metrics.json") or {}
        if not metrics and not (path / "checkpoint.pt").is_file():
            raise UserError(
                f"{path} holds no model: a model folder has a checkpoint.pt (recurrent, n-NN) or an n-gram's binary "
                "with a complete metrics.json"
            )
        kind = kinds.of(metrics, path) if metrics else None
        if kind is not None:
            return kind.load(path, metrics)
        path = path / "checkpoint.pt"
    payload = load_payload(path)  # read once: its kind says which model to rebuild from it
    payload_kind = payload.get("kind", "charlm")
    if payload_kind == "charlm":  # the suite's own checkpoint format: rebuilt from this payload, not read again
        return from_charlm(model_from_payload(payload, path), path, file_sha256(path))
    try:
        return kinds.of({}, None, payload_kind).load(path, {})
    except UserError:
        raise UserError(f"{path} is a '{payload_kind}' checkpoint, not a language model of the suite") from None
