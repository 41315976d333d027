"""Checkpoints that describe themselves: state_dict + plain config, vocabulary and corpus hash.

Only tensors and plain containers are stored, so every file loads with
`torch.load(..., weights_only=True)`: a checkpoint can never run code. Writes are atomic.
"""

from __future__ import annotations

import hashlib
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from corpora.atomic import atomic_path
from corpora.errors import UserError

from .model import CharLM, ModelConfig

FORMAT = 1

_DIGESTS: dict[tuple, str] = {}


def file_sha256(path: str | Path) -> str:
    """sha256 of a file such as a checkpoint, memoised by resolved path, inode, size and modification time (so a
    file replaced by an atomic write, or rewritten, is hashed again)."""
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _DIGESTS[key]


def checkpoint_payload(model: CharLM, vocab: list[int], corpus_sha256: str, /, **extra: Any) -> dict:
    """What a charlm checkpoint holds: weights (on the CPU) plus everything needed to rebuild and trust them."""
    return {
        "format": FORMAT,
        "kind": "charlm",
        "config": model.config.to_dict(),
        "state_dict": {k: v.cpu() for k, v in model.state_dict().items()},
        "vocab": [int(b) for b in vocab],
        "corpus_sha256": corpus_sha256,
        **extra,
    }


def save_checkpoint(path: str | Path, model: CharLM, vocab: list[int], corpus_sha256: str, **extra: Any) -> Path:
    """Write model weights plus everything needed to rebuild and trust them."""
    save_payload(path, checkpoint_payload(model, vocab, corpus_sha256, **extra))
    return Path(path)


def save_payload(path: str | Path, payload: dict) -> None:
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)


def load_payload(path: str | Path) -> dict:
    """Load any of the suite's .pt files safely; bad files end in one UserError line."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"checkpoint {path} does not exist")
    if path.is_dir():
        raise UserError(f"checkpoint {path} is a directory; give the checkpoint.pt file inside it")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, pickle.UnpicklingError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if "Weights only load failed" in first:  # torch's own text advises weights_only=False: never do that here
            first = "it holds objects other than tensors and plain containers, which are never unpickled"
        raise UserError(f"checkpoint {path} is corrupt or not a charlm checkpoint ({first})") from None
    if not isinstance(payload, dict) or "config" not in payload or "state_dict" not in payload:
        raise UserError(f"checkpoint {path} is not a charlm checkpoint (no config/state_dict)")
    return payload


def load_checkpoint(path: str | Path) -> CharLM:
    """Rebuild the model of a checkpoint; `model.meta` holds vocab, corpus hash and the rest."""
    return model_from_payload(load_payload(path), path)


def model_from_payload(payload: dict, path: str | Path) -> CharLM:
    """The model of a checkpoint's loaded payload (`path` names it in errors)."""
    if payload.get("kind", "charlm") != "charlm":
        raise UserError(f"checkpoint {path} is a '{payload['kind']}' checkpoint, not a charlm one")
    try:
        config = ModelConfig(**payload["config"])
    except TypeError as err:
        raise UserError(f"checkpoint {path} is not a charlm checkpoint (its config does not fit: {err})") from None
    model = CharLM(config)
    try:
        model.load_state_dict(payload["state_dict"])
    except RuntimeError as err:
        raise UserError(f"checkpoint {path} does not match its own config ({str(err).splitlines()[0]})") from None
    model.meta = {k: v for k, v in payload.items() if k not in ("state_dict", "optimizer")}
    model.eval()
    return model
