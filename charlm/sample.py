"""Sample text from a trained model, as char-rnn's sample.lua and torch-rnn's sample.lua do.

    python -m charlm.sample artifacts/warpeace/<model id>/checkpoint.pt --length 300 --temperature 0.8 \\
        --prime "The " --seed 1

prints the prime followed by `--length` sampled bytes. As in char-rnn: the model first reads the
prime; each next byte is drawn from softmax(log p / T) (T < 1 sharpens, T > 1 flattens); T = 0
takes the argmax (char-rnn's `-sample 0`); the same seed gives the same text (default 123, char-rnn's
default); with no prime the first byte is drawn uniformly from the vocabulary, as char-rnn and
torch-rnn do (a recurrent model has no distribution before its first input).

A recurrent model starts from a zero state, a state the suite's models met once an epoch in training (the state is
carried across batches): a prime of a few hundred characters of real text puts it where its test numbers measure it.
The minGRUs need it most (the `samples` section measures what a zero state costs every model): primed with "The "
alone, they write one byte over and over.

Works for every recurrent architecture, and for the baselines too: an n-NN (checkpoint or folder)
samples from its last n characters, a KenLM n-gram folder from its longest known context.

Bytes are bytes: the sample is written to stdout (or `--out FILE`, atomically) exactly as sampled,
which can cut a multi-byte UTF-8 character; decode it with errors="replace" to display it.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np

from corpora import atomic
from corpora.errors import UserError, run_cli

from . import anymodel

DEFAULT_SEED = 123  # char-rnn's sample.lua default


def check_settings(length: int, temperature: float) -> None:
    if not isinstance(length, (int, np.integer)) or isinstance(length, bool) or length < 0:
        raise UserError(f"length must be a non-negative integer, got {length!r}")
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature >= 0):
        raise UserError(f"temperature must be a finite number >= 0 (0 takes the argmax), got {temperature!r}")


def next_id(logp: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """Draw from softmax(logp / T); T = 0 is the argmax."""
    if temperature == 0:
        return int(np.argmax(logp))
    scaled = logp / temperature
    p = np.exp(scaled - scaled.max())
    return int(rng.choice(p.size, p=p / p.sum()))


def sample(model, length: int, temperature: float = 1.0, prime: bytes = b"", seed: int | None = DEFAULT_SEED) -> bytes:
    """`length` bytes sampled after `prime` (not included) from any model of the suite.

    `model`: a path, a model folder or id (see charlm.anymodel), a loaded CharLM, or an AnyModel.
    """
    check_settings(length, temperature)
    model = anymodel.load(model)
    prime_ids, _ = model.encode(prime, what="the prime text")
    rng = np.random.default_rng(seed)
    stepper = model.stepper()
    V = model.vocab_size
    logp = stepper.read(prime_ids) if prime_ids.size else np.full(V, -math.log(V))  # no prime: uniform, as char-rnn
    out = np.empty(length, dtype=np.int64)
    for k in range(length):
        out[k] = next_id(logp, temperature, rng)
        if k + 1 < length:
            logp = stepper.read(out[k : k + 1])
    return model.decode(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m charlm.sample",
        description="Sample text from a trained model as char-rnn does (temperature, priming, argmax at T = 0, "
        "reproducible with a seed). Prints the prime and the sampled bytes.",
    )
    parser.add_argument(
        "model", help="a checkpoint .pt (any architecture, snapshots too), an n-NN or n-gram folder, or a model id"
    )
    parser.add_argument(
        "--length", type=int, default=2000, help="bytes to sample after the prime (default %(default)s)"
    )
    parser.add_argument(
        "--temperature", type=float, default=1.0, help="divides the log-probabilities; 0 = argmax (default %(default)s)"
    )
    parser.add_argument("--prime", default="", help="text the model reads first (default: none, uniform first byte)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed (default %(default)s, as char-rnn)")
    parser.add_argument("--out", type=Path, default=None, help="write the bytes to this file instead of stdout")
    args = parser.parse_args(argv)
    check_settings(args.length, args.temperature)
    prime = os.fsencode(args.prime)  # the argument's own bytes, undecodable ones included
    text = prime + sample(args.model, args.length, args.temperature, prime, args.seed)
    if args.out:
        atomic.write_bytes(args.out, text)
        return 0
    sys.stdout.flush()
    sys.stdout.buffer.write(text + (b"\n" if sys.stdout.isatty() else b""))
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
