"""Score a split with a trained model: log-probabilities over the vocabulary at every position.

    python -m charlm.predict artifacts/warpeace/<model id>/checkpoint.pt --split test

writes predictions/<checkpoint>/<split>.npz beside the checkpoint (see predictions.py for the
contract) and prints the cross-entropy in nats and bits per character with its bootstrap std.

Predictions belong to one checkpoint: the file records the checkpoint's sha256 and is recomputed
when the checkpoint changes, so each snapshot of a run has its own. A damaged predictions file is
named in one line (or, with `repair=True` as the report pipeline uses, recomputed).

Speed. A split is scored as many parallel streams: stream s covers one stretch of the split and
first reads the `warmup` characters just before it with its state carried in (from zero at the
warm-up's start), exactly as the one-stream reading would have arrived there had it forgotten
everything older. The first stream starts at the split's start, as the one-stream reading does.
Tests check the result against the one-stream score (within 1e-3 nats); `make bench` times both.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

import corpora
from corpora.errors import UserError, run_cli

from . import predictions
from .checkpoint import file_sha256, load_checkpoint
from .model import CharLM
from .paths import checkpoint_predictions_path
from .predictions import CorruptArtifact, Predictions

MAX_STREAMS = 128  # parallel streams for a long split
MIN_STREAM = 2_000  # positions per stream at least (shorter splits use fewer streams)
WARMUP = 300  # characters each stream reads before its stretch, state carried in (measured on the quick models:
# within 6e-5 nats of one stream for every architecture, lstm-srnn with its long spans included; 1,000 changed nothing)
CHUNK = 256  # time steps per forward call

checkpoint_digest = file_sha256  # a checkpoint's sha256, memoised (charlm.checkpoint.file_sha256)


def stream_layout(n_positions: int, streams: int | None = None, warmup: int = WARMUP):
    """Where each stream starts reading, how many inputs it reads, and which of its rows are scored.

    Returns (first_input (S,), lengths (S,), position (S, Tmax)): position[s, r] is the split position that
    row r of stream s scores, or -1 for its warm-up rows and its padding.
    """
    if streams is None:
        streams = max(1, min(MAX_STREAMS, n_positions // MIN_STREAM))
    per = math.ceil(n_positions / streams)
    starts = np.arange(0, n_positions, per, dtype=np.int64)
    ends = np.minimum(starts + per, n_positions)
    warm = np.minimum(warmup, starts)  # the first stream has nothing before it
    first = starts - warm
    lengths = ends - first
    rows = np.arange(lengths.max(), dtype=np.int64)
    position = first[:, None] + rows[None, :]
    scored = (rows[None, :] >= warm[:, None]) & (rows[None, :] < lengths[:, None])
    return first, lengths, np.where(scored, position, -1)


def sample_layout(positions: np.ndarray, warmup: int = WARMUP):
    """The stream layout (as `stream_layout`) that scores only `positions`: one stream per run of consecutive
    positions (a block of the sample), reading the `warmup` characters before it with its state carried in."""
    positions = np.asarray(positions, dtype=np.int64)
    breaks = np.flatnonzero(np.diff(positions) != 1) + 1
    starts = positions[np.r_[0, breaks]]
    ends = positions[np.r_[breaks - 1, positions.size - 1]] + 1
    warm = np.minimum(warmup, starts)
    first = starts - warm
    lengths = ends - first
    rows = np.arange(lengths.max(), dtype=np.int64)
    position = first[:, None] + rows[None, :]
    scored = (rows[None, :] >= warm[:, None]) & (rows[None, :] < lengths[:, None])
    return first, lengths, np.where(scored, position, -1)


@torch.no_grad()
def score_split(
    model: CharLM,
    ids: np.ndarray,
    positions: np.ndarray | None = None,
    streams: int | None = None,
    warmup: int = WARMUP,
    progress: bool = False,
    desc: str = "",
    sample_only: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Read `ids` as parallel warmed-up streams; returns (target_logp (n - 1,), rows (R, V)), both float32.

    `sample_only`: read only the runs of consecutive `positions` (each after its warm-up, `sample_layout`);
    target_logp is then (R,), the sampled positions' alone: a training snapshot's scoring, a tenth of the split.

    target_logp[t] is the log-probability of ids[t + 1]; rows are the full log-distributions at `positions`
    (every position when None). Only the rows asked for are materialised, so scoring a snapshot (a sample
    of rows) costs the forward pass and the softmax normaliser, not a (T, V) array.
    `streams=1` reads the split as one stream from a zero state (the reference the parallel reading matches).
    """
    model.eval()
    ids = np.asarray(ids, dtype=np.int64)
    n_positions = ids.size - 1
    if n_positions < 1:
        raise UserError(f"a text of {ids.size} characters has no position to predict")
    if sample_only:
        first, lengths, position = sample_layout(positions, warmup)
    else:
        first, lengths, position = stream_layout(n_positions, streams, warmup)
    device = model.head.weight.device
    inputs = np.zeros(position.shape, dtype=np.int64)  # (S, Tmax); padding after a stream's end is never scored
    targets = np.zeros(position.shape, dtype=np.int64)
    for s, (lo, length) in enumerate(zip(first, lengths)):
        inputs[s, :length] = ids[lo : lo + length]
        targets[s, :length] = ids[lo + 1 : lo + length + 1]
    row_of = np.arange(n_positions) if positions is None else np.full(n_positions, -1)
    if positions is not None:
        row_of[np.asarray(positions, dtype=np.int64)] = np.arange(len(positions))
    target_logp = np.full(n_positions, np.nan, dtype=np.float32)
    rows = np.empty((n_positions if positions is None else len(positions), model.config.vocab_size), np.float32)
    inputs_t, targets_t = torch.from_numpy(inputs).to(device), torch.from_numpy(targets).to(device)
    state = None
    steps = range(0, position.shape[1], CHUNK)
    for start in tqdm(steps, desc=desc or "predict", unit="chunk", disable=not progress, leave=False):
        logits, state = model.forward_with_state(inputs_t[:, start : start + CHUNK], state)
        logits = logits.float()  # (S, c, V)
        lse = torch.logsumexp(logits, dim=-1, keepdim=True)  # (S, c, 1)
        where = position[:, start : start + CHUNK]
        scored = where >= 0
        target = (logits.gather(-1, targets_t[:, start : start + CHUNK, None]) - lse)[..., 0].cpu().numpy()
        target_logp[where[scored]] = target[scored]
        row = np.where(scored, row_of[np.maximum(where, 0)], -1)
        kept = row >= 0
        if kept.any():  # normalise and copy only the kept rows (a snapshot keeps a sample), same row order
            sel = torch.from_numpy(kept).to(device)
            rows[row[kept]] = (logits[sel] - lse[sel]).cpu().numpy()
    return (target_logp[positions] if sample_only else target_logp), rows


def predict_logprobs(
    model: CharLM,
    ids: np.ndarray,
    streams: int | None = None,
    warmup: int = WARMUP,
    progress: bool = False,
    desc: str = "",
) -> np.ndarray:
    """(n,) ids -> (n - 1, V) float32 log-probabilities of each next id, read as parallel warmed-up streams."""
    return score_split(model, ids, None, streams, warmup, progress, desc)[1]


def as_corpus(corpus: str | corpora.Corpus) -> corpora.Corpus:
    """A Corpus as given, or the one a registered name or a text file's path names."""
    return corpus if isinstance(corpus, corpora.Corpus) else corpora.load(corpus)


def corpus_for(model) -> corpora.Corpus:
    """The corpus a checkpoint was trained on (from the source it records), verified by its sha256."""
    meta = model.meta
    source = meta.get("corpus_source") or meta.get("train_config", {}).get("corpus") or meta.get("corpus")
    try:
        corpus = corpora.load(source, split_mode=meta.get("corpus_splits", "contiguous"))
    except UserError as err:
        raise UserError(f"cannot find the corpus this checkpoint was trained on: {err}") from None
    if corpus.sha256 != meta.get("corpus_sha256"):
        raise UserError(
            f"corpus '{corpus.name}' (sha256 {corpus.sha256[:12]}...) is not the one this checkpoint was trained on"
        )
    return corpus


def say_to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_or_remove(path: Path, repair: bool, say=print) -> Predictions | None:
    """The predictions at `path`; None when absent, or when damaged and `repair` (then the file is removed)."""
    if not path.exists():
        return None
    try:
        return predictions.load(path)
    except CorruptArtifact as err:
        if not repair:
            raise
        say(f"{err}: recomputing it")
        path.unlink(missing_ok=True)
        return None


def cached_predictions(out: Path, digest: str, need_complete: bool, repair: bool, say=print) -> Predictions | None:
    """The predictions at `out` when they are still good: computed from `digest`, and holding every row when
    `need_complete`. None when they must be (re)computed; a damaged file is removed with `repair` (and said so)."""
    existing = load_or_remove(out, repair, say)
    if existing is None or existing.source_digest != digest or (need_complete and not existing.complete):
        return None
    return existing


def predict_checkpoint(
    checkpoint: str | Path,
    split: str = "test",
    out: Path | None = None,
    sample: bool = True,
    progress: bool = True,
    repair: bool = True,
    corpus: corpora.Corpus | None = None,
    sample_only: bool = False,
) -> Path:
    """Write (or find, keyed by the checkpoint's digest) the Predictions of one split; returns the .npz path.

    Every position's exact columns (target log-probability, target) are stored; the full distributions only at
    `predictions.sample_positions` (`sample=True`, what every analysis reads: KL, entropy, agreement and t-SNE are
    computed at that sample), or at every row with `sample=False` (`python -m charlm.predict --full`). A file that
    holds every row serves a request for the sample too. `sample_only` (a training snapshot, read only by
    training_dynamics) scores the sample's blocks alone, so its exact columns too cover only the sample.
    """
    checkpoint = Path(checkpoint)
    if not checkpoint.is_file():
        load_checkpoint(checkpoint)  # the one clear line for a missing file or a folder
    digest = checkpoint_digest(checkpoint)
    out = out or checkpoint_predictions_path(checkpoint, split)
    cached = cached_predictions(out, digest, need_complete=not sample, repair=repair)
    if cached is not None and (sample_only or not cached.sample_only):
        return out
    model = load_checkpoint(checkpoint)
    corpus = corpus or corpus_for(model)
    ids = corpus.split(split)
    positions = predictions.sample_positions(ids.size - 1) if sample else None
    desc = f"predict {model.meta.get('model_id', '')} {split}"
    if sample_only:
        positions = predictions.sample_positions(ids.size - 1)
    with torch.inference_mode():  # the model is this call's own: no op keeps autograd's bookkeeping (the same numbers;
        # measured up to ~5-10% faster for the hand-written cells, which run a few ops per time step)
        target_logp, rows = score_split(model, ids, positions, progress=progress, desc=desc, sample_only=sample_only)
    targets = ids[1:][positions] if sample_only else ids[1:]
    preds = predictions.from_parts(
        target_logp, targets, rows, positions, model.meta.get("model_id", ""), digest, sample_only=sample_only
    )
    return predictions.save(out, preds)


def predict_split(checkpoint: str | Path, split: str = "test", out: Path | None = None, progress: bool = True) -> Path:
    """The Predictions of one split for a checkpoint (every row's distribution stored)."""
    return predict_checkpoint(checkpoint, split, out, sample=False, progress=progress)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m charlm.predict", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a checkpoint.pt (or snapshots/step*.pt) written by charlm.train")
    parser.add_argument("--split", default="test", choices=corpora.SPLITS, help="split to score (default %(default)s)")
    parser.add_argument(
        "--out", type=Path, default=None, help="output .npz (default: predictions/<checkpoint>/<split>.npz)"
    )
    parser.add_argument(
        "--resamples", type=int, default=100, help="bootstrap resamples for the std (default %(default)s)"
    )
    parser.add_argument(
        "--full", action="store_true",
        help="store the distribution of every position (default: the exact columns of every position and the "
        f"distributions at {predictions.SAMPLE_POSITIONS:,} evenly spaced positions, what the analyses read)",
    )  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    path = predict_checkpoint(
        args.checkpoint, args.split, args.out, sample=not args.full, progress=not args.quiet, repair=False
    )
    preds = predictions.load(path)
    print(f"{preds.model_id or args.checkpoint}: {preds.summary(args.split, args.resamples)} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
