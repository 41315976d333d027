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

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(autouse=True, scope="session")
def _own_calibration_cache(tmp_path_factory):
    """Report runs record their analyses' seconds in the machine's calibration file (charlm.cost): the tests'
    tiny runs write to a file of their own, not to the one that prices the user's next `make report`."""
    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if saved is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = saved


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


def kenlm_available() -> bool:
    """Whether `make setup` built KenLM here: its Python module and `lmplz` (tests that build n-grams skip without)."""
    try:
        import kenlm  # noqa: F401

        import charlm.ngram as ngram

        ngram.find_tool("lmplz")
        return True
    except Exception:
        return False


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
def artifacts(tmp_path, monkeypatch) -> Path:
    """An empty artifacts folder of the test's own ($CHARLM_ARTIFACTS), for hand-made models."""
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    return tmp_path / "artifacts"


@pytest.fixture
def small_text_file(tmp_path) -> Path:
    """A ~20 KB deterministic text file (used by the pipeline and sweep tests)."""
    path = tmp_path / "small.txt"
    path.write_bytes(make_text(20000, seed=1))
    return path


# ------------------------------------------------------------------------------------------
# Hand-made artifacts: models whose predictions are set by the test, for analyses with known answers.


def logp_rows(targets, nll, vocab_size: int, rng=None) -> np.ndarray:
    """(T, V) float32 log-probabilities giving the true next character exp(-nll) (at most 1 - 1e-6), sharing the rest
    evenly (or at random with `rng`) over the other characters."""

    targets = np.asarray(targets, dtype=np.int64)
    p = np.minimum(np.exp(-np.asarray(nll, dtype=np.float64)) * np.ones(targets.size), 1 - 1e-6)  # no log(0)
    if rng is None:
        rest = np.full((targets.size, vocab_size), 1.0)
    else:
        rest = rng.random((targets.size, vocab_size)) + 0.1
    rest[np.arange(targets.size), targets] = 0.0
    rest *= ((1 - p) / rest.sum(1))[:, None]
    rest[np.arange(targets.size), targets] = p
    return np.log(rest).astype(np.float32)


def random_checkpoint(path: Path, corpus, arch: str = "lstm", layers: int = 1, size: int = 8, seed: int = 0) -> Path:
    """A recurrent checkpoint of random weights, larger than the init's so that the carried state matters."""
    from charlm.checkpoint import save_checkpoint
    from charlm.model import CharLM, ModelConfig

    torch.manual_seed(seed)
    model = CharLM(ModelConfig(arch, corpus.vocab_size, layers, size))
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-0.5, 0.5)
    return save_checkpoint(path, model, corpus.vocab.tolist(), corpus.sha256, model_id=f"{arch}-random")


def full_forward_logp(model, ids) -> np.ndarray:
    """Independent of charlm.predict: one forward over the whole text from a zero state, log-softmax in float64."""
    with torch.no_grad():
        logits = model(torch.as_tensor(np.asarray(ids[:-1], dtype=np.int64))[None])[0]
    return torch.log_softmax(logits.double(), -1).numpy()


def fake_neural_model(
    corpus,
    split: str = "test",
    nll=None,
    logp=None,
    val_loss: float = 1.0,
    snapshots: list | None = None,
    **config_fields,
) -> Path:
    """A trained-looking recurrent model under $CHARLM_ARTIFACTS: metrics.json as charlm.train writes it, a real
    (random) checkpoint, and test predictions set by the test (`nll` per position, or full `logp` rows),
    recorded against that checkpoint's digest so the Context reads them as the model's.
    `snapshots`: a list of (step, logp rows) written as snapshot checkpoints with their own predictions."""

    import torch

    from charlm import predictions
    from charlm.checkpoint import file_sha256, save_checkpoint
    from charlm.model import CharLM
    from charlm.paths import checkpoint_predictions_path, model_dir
    from charlm.train import TrainConfig, identity_meta
    from corpora import atomic

    fields = dict(arch="lstm", layers=1, size=8, max_chars=1000) | config_fields
    config = TrainConfig(corpus=corpus.source or corpus.name, **fields)
    meta = identity_meta(config, corpus)
    out = model_dir(corpus.artifact_name, meta["model_id"])
    ids = corpus.split(split)
    targets = ids[1:]

    def write(checkpoint: Path, rows, seed: int, **extra):
        torch.manual_seed(seed)
        model = CharLM(config.model_config(corpus.vocab_size))
        extra = {k: v for k, v in meta.items() if k != "corpus_sha256"} | extra
        save_checkpoint(checkpoint, model, corpus.vocab.tolist(), corpus.sha256, **extra)
        preds = predictions.from_logprobs(rows, targets, meta["model_id"], file_sha256(checkpoint))
        predictions.save(checkpoint_predictions_path(checkpoint, split), preds)

    rows = logp if logp is not None else logp_rows(targets, np.zeros(targets.size) if nll is None else nll,
                                                    corpus.vocab_size)  # fmt: skip
    write(out / "checkpoint.pt", rows, config.seed)
    snaps = []
    for k, (step, snap_rows) in enumerate(snapshots or []):
        path = out / "snapshots" / f"step{step:07d}.pt"
        write(path, snap_rows, 1000 + k, step=step)
        snaps.append({"step": step, "chars": step * 100, "file": f"snapshots/{path.name}", "sha256": file_sha256(path)})
    atomic.write_json(out / "metrics.json", {
        **meta, "model_config": config.model_config(corpus.vocab_size).to_dict(), "params": 1000, "budget": None,
        "chars_trained": config.max_chars, "seconds": 1.0, "epochs": [], "best_val_loss": val_loss, "best_step": 1,
        "snapshots": snaps, "checkpoint_sha256": file_sha256(out / "checkpoint.pt"), "complete": True,
        "stopped": "budget",
    })  # fmt: skip
    return out


def fake_ngram_model(corpus, n: int, split: str = "test", nll=None, logp=None) -> Path:
    """A built-looking KenLM model (its binary is filler of the recorded size) with predictions set by the test."""

    from charlm import ngram, predictions
    from charlm.paths import predictions_path
    from corpora import atomic

    folder = ngram.model_folder(corpus, n)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ngram.binary_name(n)).write_bytes(b"\0" * 64)
    atomic.write_json(folder / "metrics.json", {
        "model_id": folder.name, "group_id": folder.name, "kind": "ngram", "corpus": corpus.name,
        "corpus_source": corpus.source or corpus.name, "corpus_key": corpus.key, "corpus_sha256": corpus.sha256,
        "corpus_splits": corpus.split_mode, "n": n, "kenlm": ngram.kenlm_settings(n), "model_bytes": 64,
        "build_seconds": 1.0, "complete": True,
    })  # fmt: skip
    targets = corpus.split(split)[1:]
    rows = logp if logp is not None else logp_rows(targets, np.zeros(targets.size) if nll is None else nll,
                                                    corpus.vocab_size)  # fmt: skip
    preds = predictions.from_logprobs(rows, targets, folder.name, ngram.source_digest(folder, 64))
    predictions.save(predictions_path(folder, split, "model"), preds)
    return folder


def fake_nnn_model(corpus, n: int, split: str = "test", nll=None, logp=None) -> Path:
    """A trained-looking n-NN (its checkpoint is filler) with predictions set by the test, recorded against it."""
    from charlm import predictions
    from charlm.checkpoint import file_sha256
    from charlm.paths import artifacts_root, predictions_path
    from corpora import atomic

    folder = artifacts_root() / corpus.artifact_name / f"nnn-n{n}-fake00"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "checkpoint.pt").write_bytes(b"nnn" + bytes([n]) * 61)
    digest = file_sha256(folder / "checkpoint.pt")
    atomic.write_json(folder / "metrics.json", {
        "model_id": folder.name, "group_id": folder.name, "kind": "nnn", "corpus": corpus.name,
        "corpus_source": corpus.source or corpus.name, "corpus_key": corpus.key, "corpus_sha256": corpus.sha256,
        "corpus_splits": corpus.split_mode, "n": n, "config": {"seed": 0, "hidden_grid": [8]}, "best_hidden": 8,
        "params": 10, "chars_trained": 100, "seconds": 1.0, "best_val_loss": 1.0, "checkpoint_sha256": digest,
        "complete": True,
    })  # fmt: skip
    targets = corpus.split(split)[1:]
    rows = logp if logp is not None else logp_rows(targets, np.zeros(targets.size) if nll is None else nll,
                                                    corpus.vocab_size)  # fmt: skip
    predictions.save(predictions_path(folder, split), predictions.from_logprobs(rows, targets, folder.name, digest))
    return folder


def fake_corpus_file(tmp_path: Path, n_bytes: int = 6000, seed: int = 0, name: str = "fake.txt"):
    """A text file and its Corpus (loaded from the file, so models record where it lives)."""
    import corpora

    path = tmp_path / name
    path.write_bytes(make_text(n_bytes, seed=seed))
    return corpora.load(str(path))
