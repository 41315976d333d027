"""Score any text with any model: per-character log-probability, surprisal and rank, and the cross-entropy.

    python -m charlm.score artifacts/warpeace/<model id>/checkpoint.pt --text my.txt --out my.tsv
    python -m charlm.score artifacts/warpeace/ngram-n9-<hash> --text my.txt --out my.npz

MODEL is a recurrent checkpoint (any architecture, snapshots too), an n-NN checkpoint or folder, a
KenLM n-gram folder, or a bare model id under the artifacts root. The text is read as the report's
Predictions are (charlm/predictions.py): row t scores byte t + 1 from bytes 0..t, so the first byte
is context only and a text of N bytes has N - 1 scored positions. A recurrent model reads long texts
as parallel warmed-up streams (charlm.predict; within 1e-3 nats of one stream), `--streams 1` as one.

Printed: the total cross-entropy in nats and bits per character with its bootstrap std (100
resamples of positions, as Karpathy et al. report test cross-entropy) and the total surprisal.
`--out FILE.tsv` writes one row per scored byte: offset (in the file), byte, char (escaped: see
`byte_label`), logp (nats), surprisal_bits, rank (1 = the model's first guess; ties share the best
rank). `--out FILE.npz` writes a Predictions file: every analysis's loader reads it (ranks and
surprisals follow from its columns, `ranks`).

Bytes outside the model's vocabulary: by default one line names them (value, count, first offset) and
the command exits 2; `--unknown skip` scores the text without them (the TSV's offsets still point into
the file). Empty text, a missing or corrupt model: one line, exit 2. Outputs are written atomically.

`--bench` measures scoring a 3 MB text against the training loop's forward pass on the same bytes.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from corpora import atomic
from corpora.errors import UserError, run_cli

from . import anymodel, predictions
from .predictions import LN2, Predictions

RANK_CHUNK = 65_536  # rows compared at once (bounds the temporary boolean array)
CONTROL_PICTURES = {0x0A: "\u23ce", 0x09: "\u21e5", 0x0D: "\u240d", 0x20: " ", 0x7F: "\u2421"}  # newline ⏎, tab ⇥


def byte_label(b: int) -> str:
    """A one-token, whitespace-free label for a byte (space stays a space).

    Printable ASCII is itself; newline is ⏎, tab ⇥, carriage return ␍, other control bytes their Unicode
    control picture (␀..␟, ␡); bytes >= 0x80 (pieces of multi-byte UTF-8 characters) read \\xNN.
    """
    b = int(b)
    if b in CONTROL_PICTURES:
        return CONTROL_PICTURES[b]
    if b < 0x20:
        return chr(0x2400 + b)
    if b < 0x7F:
        return chr(b)
    return f"\\x{b:02x}"


LABELS = [byte_label(b) for b in range(256)]


def ranks(rows: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(T,) rank of each target in its row of log-probabilities: 1 + how many bytes the model ranks strictly above."""
    out = np.empty(targets.size, dtype=np.int64)
    for s in range(0, targets.size, RANK_CHUNK):
        block = rows[s : s + RANK_CHUNK]
        mine = block[np.arange(block.shape[0]), targets[s : s + RANK_CHUNK]]
        out[s : s + RANK_CHUNK] = 1 + (block > mine[:, None]).sum(axis=1)
    return out


@dataclass(frozen=True, eq=False)
class TextScores:
    """What one model makes of one text: per scored byte, where it sits in the file, its log-probability and rank."""

    rows: np.ndarray  # (T, V) float32 log-probabilities over the vocabulary; row t scores the byte at offsets[t]
    targets: np.ndarray  # (T,) vocabulary index of each scored byte
    offsets: np.ndarray  # (T,) byte offset in the text of each scored byte
    chars: np.ndarray  # (T,) the scored byte values
    model_id: str = ""
    digest: str = ""  # what the scores were computed from (the checkpoint's sha256, or an n-gram's id and size)
    skipped: int = 0  # bytes dropped by unknown="skip"
    context: int = 0  # characters the model read before the text (`score_text(context=...)`), not scored

    @cached_property
    def logp(self) -> np.ndarray:
        """(T,) float64 log-probability of each scored byte, in nats."""
        return self.rows[np.arange(self.targets.size), self.targets].astype(np.float64)

    @property
    def surprisal_bits(self) -> np.ndarray:
        return -self.logp / LN2

    @cached_property
    def rank(self) -> np.ndarray:
        """(T,) 1 = the model's most likely byte."""
        return ranks(self.rows, self.targets)

    @cached_property
    def predictions(self) -> Predictions:
        """The Predictions contract (float16 distributions), what `--out FILE.npz` stores."""
        return predictions.from_parts(self.logp, self.targets, self.rows, None, self.model_id, self.digest)

    def cross_entropy(self, resamples: int = 100, seed: int = 0) -> tuple[float, float]:
        """Mean nats per character and its bootstrap std."""
        return predictions.bootstrap_mean(-self.logp, resamples, seed)

    def summary(self, resamples: int = 100) -> str:
        mean, std = self.cross_entropy(resamples)
        total = float(-self.logp.sum())
        return (
            f"cross-entropy {mean:.4f} +- {std:.4f} nats/char = {mean / LN2:.4f} +- {std / LN2:.4f} bits/char over "
            f"{self.offsets.size:,} scored characters ({self._read_first}); total surprisal "
            f"{total / LN2:,.1f} bits; top-1 accuracy {np.mean(self.rank == 1):.1%}"
        )

    @property
    def _read_first(self) -> str:
        return f"after {self.context:,} characters of context" if self.context else "the first is context only"

    def table(self):
        import pandas as pd

        return pd.DataFrame(
            {
                "offset": self.offsets,
                "byte": self.chars.astype(np.int64),
                "char": [LABELS[b] for b in self.chars],
                "logp": self.logp,
                "surprisal_bits": self.surprisal_bits,
                "rank": self.rank,
            }
        )

    def save(self, path: str | Path) -> Path:
        """FILE.tsv: one row per scored byte; FILE.npz: the Predictions contract. Written atomically."""
        path = Path(path)
        if path.suffix == ".npz":
            return predictions.save(path, self.predictions)
        if path.suffix in (".tsv", ".txt"):
            table = self.table()
            with atomic.atomic_path(path) as tmp:
                table.to_csv(tmp, sep="\t", index=False, float_format="%.6g", lineterminator="\n")
            return path
        raise UserError(f"--out must end in .tsv or .npz, got '{path.name}'")


def score_text(
    model, data: bytes, unknown: str = "error", streams: int | None = None, progress: bool = False,
    name: str = "the text", context: bytes = b"",
) -> TextScores:  # fmt: skip
    """Score `data` with `model` (a path, folder, model id, loaded CharLM or AnyModel; see charlm.anymodel).

    `unknown`: "error" (bytes outside the model's vocabulary are one UserError line naming them) or "skip".
    `name` is how error messages call the text. `context`: text the model reads first, unscored; then every
    character of `data` is scored, its first too. A recurrent model reads from a zero state, which the suite's
    models met once an epoch in training: a few hundred characters of its own corpus as context put it where its
    test numbers measure it (`samples` measures what the first characters from a zero state cost each model).
    """
    model = anymodel.load(model)
    if len(data) == 0:
        raise UserError(f"{name} is empty: there is nothing to score")
    ids, offsets = model.encode(data, unknown, what=name)
    before = model.encode(context, unknown, what="the context")[0] if context else np.zeros(0, dtype=ids.dtype)
    if ids.size < (1 if before.size else 2):
        raise UserError(
            f"{name} has {ids.size} byte{'s' if ids.size != 1 else ''} the model can read: scoring needs at least 2 "
            "(the first is context only), or 1 after a context"
        )
    rows = model.logprobs(np.concatenate([before, ids]), streams=streams, progress=progress)  # (P + T - 1, V)
    first = 0 if before.size else 1  # the data's first character has no prediction without a context
    rows = rows[max(before.size - 1, 0) :]
    raw = np.frombuffer(bytes(data), dtype=np.uint8)
    return TextScores(rows, ids[first:], offsets[first:], raw[offsets[first:]], model.model_id, model.digest,
                      skipped=len(data) - ids.size, context=int(before.size))  # fmt: skip


# ------------------------------------------------------------------------------------------ speed


def benchmark(model=None, n_bytes: int = 3_000_000, batch_size: int = 100, unroll: int = 100, layers: int = 2,
              size: int = 128, repeats: int = 2) -> dict:  # fmt: skip
    """Chars/s of scoring the first `n_bytes` of War and Peace, and of the training loop's forward pass over the
    same bytes (forward + loss with gradients on, `batch_size` x `unroll` windows, state carried), measured in
    one run: `repeats` rounds in alternation, the fastest of each kept (the least disturbed by other load).

    Scoring is what the CLI computes before it writes: `score_text`, the log-probabilities and the ranks.
    `model`: a recurrent checkpoint; default a fresh `layers` x `size` LSTM (speed does not depend on weights).
    """
    import torch
    import torch.nn.functional as F

    import corpora
    from corpora.batching import stream_windows

    from .model import CharLM, ModelConfig

    corpus = corpora.load("warpeace")
    data = corpus.data[:n_bytes].tobytes()
    if model is None:
        torch.manual_seed(0)
        net = CharLM(ModelConfig("lstm", corpus.vocab_size, layers, size))
        net.meta = {"vocab": corpus.vocab.tolist(), "model_id": f"lstm-L{layers}-H{size}-untrained"}
        model = anymodel.from_charlm(net)
    model = anymodel.load_recurrent(model, "--bench compares with training's forward pass (give one, or none)")
    net = model.net
    ids, _ = model.encode(data, "skip")
    x, y = (torch.from_numpy(a) for a in stream_windows(ids, batch_size, unroll))  # (n_batches, B, T)

    def score() -> int:
        scores = score_text(model, data, unknown="skip")
        _ = scores.logp, scores.rank  # the CLI computes both before it writes
        return scores.targets.size

    def train_forward() -> int:
        net.train()
        state = None
        for xb, yb in zip(x, y):
            logits, state = net.forward_with_state(xb, state)
            F.cross_entropy(logits.flatten(0, 1), yb.flatten())
            state = [tuple(t.detach() for t in s) for s in state]
        net.eval()
        return y.numel()

    times = {"score": [], "train_forward": []}
    chars = {}
    for _ in range(repeats):
        for name, fn in (("score", score), ("train_forward", train_forward)):
            start = time.perf_counter()
            chars[name] = fn()
            times[name].append(time.perf_counter() - start)
    c = net.config
    record = {
        "model": model.model_id,
        "arch": c.arch,
        "layers": c.layers,
        "size": c.size,
        "torch_threads": torch.get_num_threads(),
        "batch_size": batch_size,
        "unroll": unroll,
        "repeats": repeats,
    }
    for name in times:
        best = min(times[name])
        record.update({f"{name}_chars": chars[name], f"{name}_seconds": best, f"{name}_chars_per_s": chars[name] / best,
                       f"{name}_all_seconds": [round(t, 2) for t in times[name]]})  # fmt: skip
    record["ratio"] = record["score_chars_per_s"] / record["train_forward_chars_per_s"]
    return record


# ------------------------------------------------------------------------------------------ CLI


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m charlm.score",
        description="Score any text with any model of the suite (recurrent checkpoint, n-NN, KenLM n-gram): "
        "per-character log-probability, surprisal in bits and rank of the true character, and the total "
        "cross-entropy with its bootstrap std.",
    )
    parser.add_argument(
        "model", nargs="?", help="a checkpoint .pt, a model folder under artifacts/ (n-gram, n-NN, recurrent), or a "
        "model id",
    )  # fmt: skip
    parser.add_argument("--text", type=Path, help="the file to score (read as bytes)")
    parser.add_argument("--out", type=Path, default=None, help="per-character scores: FILE.tsv, or FILE.npz")
    parser.add_argument(
        "--unknown", choices=("error", "skip"), default="error",
        help="bytes outside the model's vocabulary: name them and exit 2 (default), or skip them",
    )  # fmt: skip
    parser.add_argument(
        "--streams", type=int, default=None, help="recurrent models: 1 reads the text as one stream (default: "
        "parallel warmed-up streams, within 1e-3 nats)",
    )  # fmt: skip
    parser.add_argument(
        "--context", type=Path, default=None, help="a file the model reads before the text, unscored (a recurrent "
        "model reads from a zero state: a few hundred characters of its own corpus put it where its test numbers "
        "measure it)",
    )  # fmt: skip
    parser.add_argument("--resamples", type=int, default=100, help="bootstrap resamples (default %(default)s)")
    parser.add_argument(
        "--bench", action="store_true", help="time scoring 3 MB of War and Peace against training's forward pass "
        "(MODEL: a recurrent checkpoint, default a fresh 2 x 128 LSTM)",
    )  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.bench:
        record = benchmark(args.model)
        print(
            f"{record['model']} ({record['torch_threads']} torch threads): scoring "
            f"{record['score_chars']:,} chars at {record['score_chars_per_s']:,.0f} chars/s "
            f"({record['score_seconds']:.1f} s); training's forward pass (batch {record['batch_size']} x unroll "
            f"{record['unroll']}, gradients on) {record['train_forward_chars_per_s']:,.0f} chars/s "
            f"({record['train_forward_seconds']:.1f} s); ratio {record['ratio']:.2f} (fastest of "
            f"{record['repeats']} alternating rounds: {record['score_all_seconds']} s and "
            f"{record['train_forward_all_seconds']} s)"
        )
        return 0
    if args.model is None or args.text is None:
        raise UserError("give a MODEL and --text FILE (or --bench)")
    if args.resamples < 2:
        raise UserError(f"--resamples must be at least 2 (a std needs two resamples), got {args.resamples}")
    if args.streams is not None and args.streams < 1:
        raise UserError(f"--streams must be at least 1, got {args.streams}")
    if args.out is not None and args.out.suffix not in (".tsv", ".txt", ".npz"):
        raise UserError(f"--out must end in .tsv or .npz, got '{args.out.name}'")
    if not args.text.is_file():
        raise UserError(f"text file {args.text} does not exist")
    if args.context is not None and not args.context.is_file():
        raise UserError(f"context file {args.context} does not exist")
    data = args.text.read_bytes()
    context = args.context.read_bytes() if args.context is not None else b""
    scores = score_text(args.model, data, args.unknown, args.streams, not args.quiet, f"text file {args.text}", context)
    if scores.skipped:
        print(f"skipped {scores.skipped:,} bytes outside the model's vocabulary", file=sys.stderr)
    line = f"{args.text}: {scores.model_id}: {scores.summary(args.resamples)}"
    if args.out:
        scores.save(args.out)
        line += f" -> {args.out}"
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
