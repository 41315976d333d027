"""Every artifact path, defined once. Artifacts are derived, git-ignored, and keyed by config hash."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def artifacts_root() -> Path:
    """$CHARLM_ARTIFACTS, else ./artifacts."""
    return Path(os.environ.get("CHARLM_ARTIFACTS", "artifacts"))


def config_hash(obj: dict, length: int = 6) -> str:
    """Short stable hash of a plain config dict (sorted JSON)."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


def model_dir(corpus: str, model_id: str) -> Path:
    return artifacts_root() / corpus / model_id


def predictions_path(model_directory: Path, split: str, source: str = "checkpoint") -> Path:
    """Predictions of one split by one checkpoint of a model (`source`: the checkpoint's stem, or "model")."""
    return Path(model_directory) / "predictions" / source / f"{split}.npz"


def checkpoint_predictions_path(checkpoint: str | os.PathLike, split: str) -> Path:
    """Where the predictions of a checkpoint go: its model folder, keyed by the checkpoint (snapshots included)."""
    checkpoint = Path(checkpoint)
    folder = checkpoint.parent.parent if checkpoint.parent.name == "snapshots" else checkpoint.parent
    return predictions_path(folder, split, checkpoint.stem)


def complete_metrics(metrics_path: Path) -> dict | None:
    """A metrics.json that marks its artifact complete (the cache's only marker), else None."""
    try:
        metrics = json.loads(Path(metrics_path).read_text())
    except (OSError, ValueError):
        return None
    return metrics if isinstance(metrics, dict) and metrics.get("complete") else None
