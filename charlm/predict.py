"""Score a split with a trained model: log-probabilities over the vocabulary at every position.

    python -m charlm.predict artifacts/warpeace/<model id>/checkpoint.pt --split test

writes predictions/<split>.npz beside the checkpoint (see predictions.py for the contract) and
prints the cross-entropy in nats and bits per character with its bootstrap standard deviation.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

import corpora
from corpora.errors import UserError, run_cli

from . import predictions
from .checkpoint import load_checkpoint
from .model import CharLM
from .paths import predictions_path


@torch.no_grad()
def predict_logprobs(
    model: CharLM, ids: np.ndarray, chunk: int = 4096, progress: bool = False, desc: str = ""
) -> np.ndarray:
    """(n,) ids read as one stream -> (n - 1, V) float32 log-probabilities of each next id."""
    model.eval()
    inputs = torch.from_numpy(np.asarray(ids[:-1], dtype=np.int64))[None]  # (1, n-1)
    out = np.empty((inputs.shape[1], model.config.vocab_size), dtype=np.float32)
    state, device = None, model.head.weight.device
    inputs = inputs.to(device)
    for start in tqdm(range(0, inputs.shape[1], chunk), desc=desc or "predict", unit="chunk", disable=not progress):
        logits, state = model.forward_with_state(inputs[:, start : start + chunk], state)
        out[start : start + chunk] = torch.log_softmax(logits[0].float(), dim=-1).cpu().numpy()
    return out


def corpus_for(model: CharLM) -> corpora.Corpus:
    """The corpus a checkpoint was trained on, verified by its sha256."""
    meta = model.meta
    name = meta.get("corpus") or meta.get("train_config", {}).get("corpus")
    corpus = corpora.load(
        meta.get("train_config", {}).get("corpus", name), split_mode=meta.get("corpus_splits", "contiguous")
    )
    if corpus.sha256 != meta.get("corpus_sha256"):
        raise UserError(
            f"corpus '{corpus.name}' (sha256 {corpus.sha256[:12]}...) is not the one this checkpoint was trained on"
        )
    return corpus


def predict_split(checkpoint: str | Path, split: str = "test", out: Path | None = None, progress: bool = True) -> Path:
    """Write the Predictions of one split for a checkpoint; returns the .npz path (cached if present)."""
    checkpoint = Path(checkpoint)
    out = out or predictions_path(checkpoint.parent, split)
    if out.exists():
        return out
    model = load_checkpoint(checkpoint)
    corpus = corpus_for(model)
    ids = corpus.split(split)
    logp = predict_logprobs(model, ids, progress=progress, desc=f"predict {model.meta.get('model_id', '')} {split}")
    return predictions.save(out, logp, ids[1:], model.meta.get("model_id", ""))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m charlm.predict", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a checkpoint.pt written by charlm.train")
    parser.add_argument("--split", default="test", choices=corpora.SPLITS, help="split to score (default %(default)s)")
    parser.add_argument(
        "--out", type=Path, default=None, help="output .npz (default: predictions/<split>.npz beside the checkpoint)"
    )
    parser.add_argument(
        "--resamples", type=int, default=100, help="bootstrap resamples for the std (default %(default)s)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    path = predict_split(args.checkpoint, args.split, args.out, progress=not args.quiet)
    preds = predictions.load(path)
    print(f"{preds.model_id or args.checkpoint}: {preds.summary(args.split, args.resamples)} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
