"""Shared fixtures: a tiny deterministic corpus, CLI runners, and one tiny trained model.

Every test here runs on small data it builds itself. torch is pinned to one thread: on a
shared 2-core machine torch's default of 2 OpenMP threads makes a tiny fused LSTM step
~100x slower (spin-waiting threads), and the CLI subprocesses get the same pin through
OMP_NUM_THREADS.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

torch.set_num_threads(1)

WORDS = (
    "the prince said that war and peace were not the same thing ; natasha laughed , "
    'pierre looked at the old count and smiled . " yes " she said . moscow was burning'
).split()


def make_text(n_bytes: int = 4000, seed: int = 0) -> bytes:
    """A deterministic, learnable pseudo-English text of exactly n_bytes bytes (lines of words)."""
    rng = random.Random(seed)
    out, line = [], []
    while sum(len(w) + 1 for w in out) < n_bytes + 100:
        word = rng.choice(WORDS)
        line.append(word)
        if len(line) >= rng.randint(6, 12):
            out.append(" ".join(line).capitalize() + "\n")
            line = []
    return "".join(out).encode()[:n_bytes]


def cli_env(**overrides: str | None) -> dict[str, str]:
    """Environment for CLI subprocesses: the repo importable, one torch thread, no stray CORPORA_DIR."""
    env = dict(os.environ)
    env.pop("CORPORA_DIR", None)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["OMP_NUM_THREADS"] = "1"
    env["MKL_NUM_THREADS"] = "1"
    env["PYTHONWARNINGS"] = "ignore"
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


def run_cli(
    *args: str | os.PathLike, cwd: str | os.PathLike | None = None, env: dict | None = None, timeout: float = 120
):
    """Run `python -m <args>` in a subprocess; returns the CompletedProcess (text mode)."""
    return subprocess.run(
        [sys.executable, "-m", *map(str, args)],
        cwd=cwd or REPO,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_one_line_error(proc, code: int = 2, contains: str | None = None) -> str:
    """The CLI contract for bad input: exit `code`, exactly one line on stderr, no traceback."""
    lines = proc.stderr.strip("\n").splitlines()
    assert proc.returncode == code, f"exit {proc.returncode}, expected {code}; stderr:\n{proc.stderr}"
    assert len(lines) == 1, f"expected exactly one stderr line, got {len(lines)}:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    if contains is not None:
        assert contains.lower() in lines[0].lower(), lines[0]
    return lines[0]


@pytest.fixture(scope="session")
def text_bytes() -> bytes:
    return make_text(4000)


@dataclass
class TinyRun:
    out: Path  # the model's artifact folder
    corpus_path: Path  # the text file it was trained on (absolute; recorded in the checkpoint)
    corpus: object  # corpora.Corpus of that file
    config: object  # charlm.train.TrainConfig

    @property
    def metrics(self) -> dict:
        return json.loads((self.out / "metrics.json").read_text())


TINY = dict(arch="lstm", layers=1, size=16, batch_size=4, unroll=10, epochs=3, snapshots=4, lr=1e-2)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, text_bytes) -> TinyRun:
    """One tiny LSTM trained for 3 epochs on a 4 KB corpus (about a second), shared by the train and predict tests."""
    from charlm.train import TrainConfig, train
    from corpora import Corpus

    root = tmp_path_factory.mktemp("tiny_run")
    corpus_path = root / "tiny.txt"
    corpus_path.write_bytes(text_bytes)
    corpus = Corpus.from_bytes(corpus_path.stem, text_bytes)
    config = TrainConfig(corpus=str(corpus_path), **TINY)
    out = train(config, root / "model", corpus=corpus, progress=False)
    return TinyRun(out=Path(out), corpus_path=corpus_path, corpus=corpus, config=config)


@pytest.fixture
def small_text_file(tmp_path) -> Path:
    """A ~20 KB deterministic text file (used by the pipeline and sweep tests)."""
    path = tmp_path / "small.txt"
    path.write_bytes(make_text(20000, seed=1))
    return path
