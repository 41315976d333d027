"""What a profile will cost before it runs: measured throughput times the work each model needs.

`python -m reports --profile NAME --plan` prints it per model and in total, and `make report` says it at its
start. Read top to bottom:

1. Calibration. Per (architecture, depth, width, vocabulary, batch, unroll, threads), about a second of CPU
   time: the very training step `charlm.train.fit` takes (task.loss, backward, clipping, RMSProp, the
   finite-weights check), the validation read (`train.evaluate`) and the scoring of a split (`predict.score_split`
   at its 128 parallel streams, then storing it as `predict_checkpoint` does), each timed on random text. The n-NN
   gets the same for its step, its setup (context rows and targets) and its scoring; KenLM gets lmplz +
   build_binary + scoring of its lowest and highest order on the first 200,000 train characters of each corpus,
   and the number of distinct n-grams of that corpus (counted on the sample and its first half, extrapolated to
   the train split by the power law the two give). Times are CPU time per thread (`cpu_clock`), so a busy machine
   still measures what a worker with its own core takes. Results are cached per machine (CPU model, cores, torch
   version, device) in `~/.cache/charlm/calibration-<machine>.json`; `--calibrate` redoes them. Each records the
   load average it was taken under. `--plan` measures what the cache lacks; `make report` too, when it trains at
   least CALIBRATE_FROM_CHARS characters (a smoke run is not worth the seconds).
2. Work per model. Training characters: the character budget, or epochs x the train split, where the expected
   epochs of an epoch-based profile (early stopping, convergence) are the recorded epochs of comparable finished
   models (same stopping rule; in the artifacts or in `models/<profile>/`), else the epoch cap; the plan says
   which. Validation passes, the test split scored for the final checkpoint (every row) and for each snapshot
   (a sample of rows) when the analyses read snapshots.
3. Seconds = work / measured throughput. Shipped models (`models/<profile>/`) are installed and cached ones are
   read: they cost nothing but the predictions they lack.
4. Wall time: the job list, in the order `reports.pipeline._jobs` submits it (the two largest n-grams first, then
   the networks, the other n-grams, the n-NNs), list-scheduled onto the workers (each job goes to the first free
   worker, as a process pool does), then the analyses the same way (longest first, as the pipeline submits them),
   then rendering. An analysis's and the rendering's seconds are the ones this machine last measured for the same
   profile and threads (each report run records what it computed: `record_report_seconds`), else the quick
   profile's cold run's (README, "Where the 15 minutes of a cold make report go"), and the plan says which.
   Timing an analysis means running it, and what it costs grows with the models it reads (cells: 172 s with 45
   reference networks, 274 s with 60), so a last run's seconds are the best guess there is, not a calibration.
5. Disk: checkpoints from the parameter count (float32), snapshots, resume state, predictions files (their
   format: float16 distributions and the exact float32/int16/uint8 columns, see predictions.py), n-gram binaries
   from the measured bytes per n-gram.

Not modelled: dropout's cost (calibrated without it), checkpoint writes during training, and two workers slowing
each other down (calibration runs alone, on whatever else the machine is doing).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import platform
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import corpora
from corpora import atomic

from .paths import artifacts_root, checkpoint_predictions_path, complete_metrics
from .predictions import SAMPLE_POSITIONS
from .shipped import SHIPPED_ROOT, read_manifest, shipped_folder

FORMAT = 1  # bump when what an entry measures changes: older files are then ignored
MEASURE_S = 0.5  # seconds each throughput measurement runs (at least MIN_STEPS steps, after one warm-up step)
MIN_STEPS = 2
CALIBRATE_FROM_CHARS = 1_000_000  # make report measures what its cache lacks only for a run that trains this many
# characters or more (seconds of training): a smoke run is not worth seconds of calibration; --plan always measures
MAX_STEPS = 200  # tiny models (the smoke profile's) are timed over this many steps, well under MEASURE_S
KENLM_SAMPLE = 200_000  # train characters of the KenLM calibration sample (and of the n-gram counts)
# Seconds of each analysis job and of the index + rendering, measured in the quick profile's cold run on the
# 2-core machine (README, "Where the 15 minutes of a cold make report go"): what the plan assumes until this machine
# has run the profile's analyses itself (`analysis_key`). An analysis not listed counts as their median.
ANALYSIS_SECONDS = {
    "cross_entropy": 4, "ngram": 7, "ablations": 4, "error_overlap": 3, "char_advantage": 2, "brace_distance": 1,
    "onion": 3, "model_agreement": 4, "training_dynamics": 16, "saturation": 5, "weighted_sum": 7, "vanishing": 15,
    "pooling": 29, "cells": 30, "samples": 3,
}  # fmt: skip
RENDER_SECONDS = 16
UNCALIBRATED = "not calibrated"
IDENTITY_FIELDS = {"corpus", "arch", "layers", "size", "dropout", "seed", "fused", "snapshots", "snapshot_epochs"}


# ------------------------------------------------------------------------------------ the machine and its cache


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"


def machine() -> dict:
    """What throughput depends on: the CPU model, its cores, torch's version and the device training uses."""
    import torch

    device = f"cuda {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "cpu"
    return {"cpu": cpu_model(), "cores": os.cpu_count() or 1, "torch": torch.__version__, "device": device}


def machine_key(m: dict | None = None) -> str:
    """A file-name-safe key of `machine()`, e.g. `amd-epyc-2cores-torch2.13.0-cpu-cpu`."""
    m = m or machine()
    text = f"{m['cpu']}-{m['cores']}cores-torch{m['torch']}-{m['device']}"
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/charlm, else ~/.cache/charlm (where `make setup` also caches its KenLM build)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "charlm"


def calibration_path(m: dict | None = None) -> Path:
    return cache_dir() / f"calibration-{machine_key(m)}.json"


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


class NotCalibrated(LookupError):
    """A measurement the cache lacks, asked for while measuring is off (`Calibration.offline`)."""


class Calibration:
    """Measured throughputs of one machine: {entry key: measurement}, read from and written to its cache file.

    `get(key, measure)` returns the cached measurement, or runs `measure()` (redone when `redo` is set), records
    when and under which load it ran, and writes the file at once (merged with what another process wrote). With
    `offline` set, a missing measurement raises NotCalibrated instead."""

    def __init__(self, path: Path | None = None, machine_info: dict | None = None, redo: bool = False, say=print):
        self.machine = machine_info or machine()
        self.path = Path(path) if path else calibration_path(self.machine)
        self.redo, self.say, self.offline = redo, say, False
        self.entries: dict[str, dict] = self._read()
        self.measured: set[str] = set()  # measured by this process (redo applies once per key)

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return {}
        return dict(data.get("entries", {}))

    def has(self, key: str) -> bool:
        return key in self.entries and not (self.redo and key not in self.measured)

    def get(self, key: str, measure: Callable[[], dict] | None = None) -> dict | None:
        if self.has(key):
            return self.entries[key]
        if measure is None:
            return None
        if self.offline:
            raise NotCalibrated(key)
        load = load_average()
        started = time.perf_counter()
        value = measure()
        value = {**value, "seconds_to_measure": round(time.perf_counter() - started, 2)}
        return self.record({key: value}, load)[key]

    def record(self, values: dict[str, dict], load: float | None = None) -> dict[str, dict]:
        """Store measurements {key: value} (one taken by `get`, or a report run's analysis seconds) with when they
        were taken and the load average they began under (`load`; now when not given), in one write of the file."""
        stamp = {"load_average": load_average() if load is None else load,
                 "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}  # fmt: skip
        values = {key: {**value, **stamp} for key, value in values.items()}
        self.entries.update(values)
        self.measured.update(values)
        self._write(values)
        return values

    def _write(self, values: dict[str, dict]) -> None:
        entries = self._read()  # another process may have added entries since we read
        entries.update(self.entries)
        entries.update(values)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_json(self.path, {"format": FORMAT, "machine": self.machine, "entries": entries})


def neural_key(arch, layers, size, vocab, batch, unroll, fused, threads) -> str:
    from .model import TRAINING_KERNELS

    # our own kernel named: a cache from before it (the papers' GRU on autograd) is measured anew
    kernel = f" kernel={TRAINING_KERNELS[arch]}" if fused and arch in TRAINING_KERNELS else ""
    return f"neural arch={arch} layers={layers} size={size} vocab={vocab} batch={batch} unroll={unroll} " \
           f"fused={int(bool(fused))} threads={threads}{kernel}"  # fmt: skip


def nnn_key(n, hidden, vocab, batch, targets, threads) -> str:
    return f"nnn n={n} hidden={hidden} vocab={vocab} batch={batch} targets={targets} threads={threads}"


def analysis_key(profile_name: str, analysis: str, threads: int) -> str:
    """The entry of one analysis's seconds as a report run of `profile_name` measured it (`render` for the index and
    rendering)."""
    return f"analysis {analysis} profile={profile_name} threads={threads}"


def record_report_seconds(cal: Calibration, profile_name: str, threads: int, seconds: dict[str, float]) -> None:
    """Record what a report run measured ({analysis name or "render": seconds}, only what it computed), so the next
    plan of the same profile on this machine prices its analyses by them."""
    cal.record(
        {analysis_key(profile_name, name, threads): {"seconds": round(float(s), 1)} for name, s in seconds.items()}
    )


def kenlm_key(corpus_key: str, orders: tuple[int, int]) -> str:
    return f"kenlm corpus={corpus_key} sample={KENLM_SAMPLE} orders={orders[0]},{orders[1]}"


def counts_key(corpus_key: str, max_order: int) -> str:
    return f"ngram-counts corpus={corpus_key} sample={KENLM_SAMPLE} max_order={max_order}"


# ------------------------------------------------------------------------------------ measurements


@contextlib.contextmanager
def torch_threads(threads: int):
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def cpu_clock(threads: int = 1) -> Callable[[], float]:
    """Seconds of this process's CPU time per thread: on a busy machine, what the work costs a worker that has its
    cores (wall time there measures the neighbours). On a GPU the wall time is what counts."""
    import torch

    if torch.cuda.is_available():

        def wall() -> float:
            torch.cuda.synchronize()
            return time.perf_counter()

        return wall
    return lambda: time.process_time() / max(1, threads)


def rate(step: Callable[[], int], budget_s: float = MEASURE_S, clock: Callable[[], float] = time.process_time) -> float:
    """Units per second of `step` (which returns the units it processed): one untimed warm-up call, then calls for
    `budget_s` seconds of `clock` (at least MIN_STEPS, at most MAX_STEPS)."""
    step()
    units, calls, start = 0, 0, clock()
    while calls < MIN_STEPS or (calls < MAX_STEPS and clock() - start < budget_s):
        units += step()
        calls += 1
    return units / max(clock() - start, 1e-9)


def random_ids(vocab: int, n: int, seed: int = 0) -> np.ndarray:
    """n ids over the whole vocabulary (each id at least once)."""
    ids = np.random.default_rng(seed).integers(0, vocab, n).astype(np.uint8)
    ids[: min(vocab, n)] = np.arange(min(vocab, n))
    return ids


def _random_corpus(vocab: int, train_chars: int) -> corpora.Corpus:
    """A corpus of random bytes 0..vocab-1 whose train split has at least `train_chars` characters."""
    total = math.ceil((train_chars + 2) / 0.8) + 20
    return corpora.Corpus.from_bytes("calibration", random_ids(vocab, total).tobytes())


def _fit_step(task, optimizer, grad_clip: float = 5.0) -> Callable[[], int]:
    """One optimiser step exactly as `charlm.train.fit` takes it (without its bookkeeping); cycles the batches."""
    import torch

    batches = iter(range(10**12))

    def step() -> int:
        batch = next(batches) % task.steps_per_epoch
        loss = task.loss(0, batch)
        loss.item()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(task.model.parameters(), grad_clip)
        optimizer.step()
        torch.stack([torch.isfinite(p).all() for p in task.model.parameters()]).all().item()
        task.after_step()
        return task.chars_per_step

    return step


@functools.lru_cache(maxsize=256)
def scored_cells(n_positions: int, streams: int | None = None) -> int:
    """Stream-steps (streams x longest stream, warm-up included) `predict.score_split` runs to score a split."""
    from .predict import stream_layout

    return int(np.prod(stream_layout(n_positions, streams)[2].shape))


def measure_neural(arch, layers, size, vocab, batch, unroll, fused, threads, device=None) -> dict:
    """Training, validation and scoring throughput of one recurrent model shape on this machine.

    train_cps and eval_cps are characters per second; scoring is `forward_cps` stream-steps per second at the
    parallel streams a test split is read with (`scored_cells`), plus `row_s` seconds per full distribution kept
    (normalised, copied and stored as predict_checkpoint stores it)."""
    import torch

    from . import predictions
    from .checkpoint import checkpoint_payload, save_payload
    from .predict import MAX_STREAMS, score_split
    from .train import LanguageModelTask, TrainConfig, evaluate, identity_meta, pick_device

    with torch_threads(threads), tempfile.TemporaryDirectory(prefix="charlm-calibration-") as tmp:
        corpus = _random_corpus(vocab, batch * unroll * 4 + 1)
        config = TrainConfig("calibration", arch, layers, size, batch_size=batch, unroll=unroll, fused=fused)
        task = LanguageModelTask(config, corpus, pick_device(device))
        optimizer = torch.optim.RMSprop(task.model.parameters(), lr=config.lr, alpha=config.rms_alpha)
        clock = cpu_clock(threads)
        train_cps = rate(_fit_step(task, optimizer), clock=clock)
        model = task.model
        val = random_ids(vocab, max(2 * batch * unroll, 10_000) + 1, seed=1)
        eval_cps = rate(lambda: (evaluate(model, val, batch, unroll), val.size)[1], MEASURE_S / 2, clock)
        # scoring: MAX_STREAMS streams as a test split is read, 50 positions each; a stream-step costs the same in the
        # warm-up as after it, so the warm-up is left out here (scored_cells counts it for the real split)
        text = random_ids(vocab, MAX_STREAMS * 50 + 1, seed=2)

        def forward() -> int:  # the forward pass and the target column: no distribution kept
            score_split(model, text, np.arange(0), streams=MAX_STREAMS, warmup=0)
            return text.size - 1

        def store_all() -> int:  # every distribution kept, stored as predict_checkpoint stores them
            logp, rows = score_split(model, text, streams=MAX_STREAMS, warmup=0)
            predictions.save(Path(tmp) / "p.npz", predictions.from_parts(logp, text[1:], rows, None, "x", "y"))
            return text.size - 1

        forward_cps = rate(forward, MEASURE_S / 2, clock)
        full_pps = rate(store_all, MEASURE_S / 2, clock)
        path = Path(tmp) / "checkpoint.pt"
        save_payload(path, checkpoint_payload(model, corpus.vocab.tolist(), corpus.sha256, step=1, chars_trained=1,
                                              val_loss=1.0, **identity_meta(config, corpus)))  # fmt: skip
        overhead = path.stat().st_size - 4 * sum(p.numel() for p in model.parameters())
    # a kept row costs its normalisation, copy and storage: the full reading less the forward's share per position
    row_s = max(0.0, 1 / full_pps - 1 / forward_cps)
    return {"train_cps": train_cps, "eval_cps": eval_cps, "forward_cps": forward_cps, "row_s": row_s,
            "checkpoint_overhead_bytes": int(overhead)}  # fmt: skip


def measure_nnn(n, hidden, vocab, batch, targets, threads) -> dict:
    """n-NN: steps (positions/s), setup (seconds per train position), validation and full scoring (positions/s)."""
    import torch

    from . import nnn, predictions

    with torch_threads(threads), tempfile.TemporaryDirectory(prefix="charlm-calibration-") as tmp:
        corpus = _random_corpus(vocab, 100_000)
        config = nnn.NNNConfig("calibration", n, (hidden,), batch_chars=batch, targets=targets)
        clock = cpu_clock(threads)
        started = clock()
        task = nnn.NNNTask(config, hidden, corpus, "calibration")
        setup_s = (clock() - started) / task.positions
        optimizer = torch.optim.RMSprop(task.model.parameters(), lr=config.lr, alpha=config.rms_alpha)
        train_cps = rate(_fit_step(task, optimizer), clock=clock)
        x_val, y_val = task.x_val, task.y_val
        eval_pps = rate(lambda: (nnn.evaluate(task.model, x_val, y_val), len(y_val))[1], MEASURE_S / 2, clock)
        text = random_ids(vocab, 50_001, seed=2)

        def store_all() -> int:
            logp = nnn.predict_logprobs(task.model, text)
            predictions.save(Path(tmp) / "p.npz", predictions.from_logprobs(logp, text[1:], "x", "y"))
            return text.size - 1

        predict_pps = rate(store_all, MEASURE_S / 2, clock)
    return {"train_cps": train_cps, "setup_s_per_position": setup_s, "eval_pps": eval_pps, "predict_pps": predict_pps}


def distinct_ngrams(ids: np.ndarray, max_order: int) -> list[int]:
    """Distinct k-grams of `ids` for k = 1..max_order (a 64-bit polynomial hash per k-gram; collisions among a few
    million k-grams are negligible)."""
    ids = np.asarray(ids, dtype=np.uint64)
    multiplier = np.uint64(1_000_003)
    counts, h = [], ids.copy()
    for k in range(1, max_order + 1):
        if k > 1:
            h = h[:-1] * multiplier + ids[k - 1 :]  # h[t] hashes ids[t : t + k]; uint64 arithmetic wraps
        counts.append(int(np.unique(h).size) if h.size else 0)
    return counts


def measure_counts(train: np.ndarray, max_order: int) -> dict:
    """n-gram counts per order (an order-o model holds every k-gram, k <= o), extrapolated to the whole train split:
    C(T) = C(S) (T / S)^b, with b from the sample S and its first half, clipped to [0, 1]."""
    sample = train[:KENLM_SAMPLE]
    full = np.cumsum(distinct_ngrams(sample, max_order)).astype(float)
    if train.size <= KENLM_SAMPLE:
        return {"orders": list(range(1, max_order + 1)), "counts": full.tolist(), "exact": True}
    half = np.cumsum(distinct_ngrams(sample[: sample.size // 2], max_order)).astype(float)
    exponent = np.clip(np.log(full / np.maximum(half, 1)) / np.log(sample.size / (sample.size // 2)), 0, 1)
    counts = full * (train.size / sample.size) ** exponent
    return {"orders": list(range(1, max_order + 1)), "counts": counts.tolist(), "exact": False}


@contextlib.contextmanager
def _artifacts_in(folder: Path):
    """charlm.ngram writes under the artifacts root: point it at a scratch folder for the calibration builds."""
    before = os.environ.get("CHARLM_ARTIFACTS")
    os.environ["CHARLM_ARTIFACTS"] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CHARLM_ARTIFACTS", None)
        else:
            os.environ["CHARLM_ARTIFACTS"] = before


def _children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def measure_kenlm(corpus: corpora.Corpus, orders: tuple[int, int]) -> dict:
    """KenLM on the first KENLM_SAMPLE train characters of `corpus`, for two orders (order = n + 1): CPU seconds of
    lmplz + build_binary per n-gram (with a start-up cost, the line through the two), bytes per n-gram of the binary,
    and CPU seconds per KenLM lookup when scoring the sample's test split."""
    from . import ngram

    train = corpus.split("train")
    sample = corpora.Corpus.from_bytes("kenlm-calibration", corpus.decode(train[: math.ceil(KENLM_SAMPLE / 0.8)]))
    points = []
    with tempfile.TemporaryDirectory(prefix="charlm-calibration-") as tmp, _artifacts_in(Path(tmp)):
        for order in sorted(set(orders)):
            before = _children_cpu()
            folder = ngram.build(sample, order - 1, progress=False)
            build_s = _children_cpu() - before
            before = time.process_time()
            ngram.predict(sample, order - 1, split="test", progress=False)
            score_s = time.process_time() - before
            m = complete_metrics(folder / "metrics.json")
            stats = m["scoring"]["test"]
            points.append({"order": order, "ngrams": sum(m["ngram_counts"]), "build_s": build_s,
                           "model_bytes": m["model_bytes"], "score_s": score_s, "positions": stats["positions"],
                           "lookups": stats["basescore_calls"], "states": stats["distinct_states"]})  # fmt: skip
    lo, hi = points[0], points[-1]
    if hi["ngrams"] > lo["ngrams"]:
        per_ngram = max(0.0, (hi["build_s"] - lo["build_s"]) / (hi["ngrams"] - lo["ngrams"]))
        start = max(0.0, hi["build_s"] - per_ngram * hi["ngrams"])
    else:
        per_ngram, start = hi["build_s"] / max(hi["ngrams"], 1), 0.0
    return {"sample_chars": int(sample.split("train").size), "points": points, "build_start_s": start,
            "build_s_per_ngram": per_ngram, "bytes_per_ngram": hi["model_bytes"] / max(hi["ngrams"], 1),
            "lookup_s": sum(p["score_s"] for p in points) / max(sum(p["lookups"] for p in points), 1),
            "states_per_position": hi["states"] / max(hi["positions"], 1)}  # fmt: skip


# ------------------------------------------------------------------------------------ work per model


@dataclass
class ModelCost:
    """What one planned model costs: seconds by phase, disk it adds, and why."""

    model_id: str
    kind: str
    corpus: str
    status: str  # train | resume | score | cached | shipped
    chars: int | None = None  # training characters still to train (the budget, or epochs x train split)
    epochs: float | None = None  # the horizon the chars come from
    horizon: str = ""  # where the epochs come from: "budget", "cap", "median of k finished ..."
    seconds: dict = field(default_factory=dict)  # phase -> seconds (training, validation, predictions, kenlm, nnn)
    disk: int = 0  # bytes the run adds
    trained_s: float | None = None  # measured: the training seconds a finished copy recorded (one worker's wall)
    cpu_s: float | None = None  # measured: its CPU seconds, where a shipped manifest records them (issue 22 on)

    @property
    def total_s(self) -> float:
        return float(sum(self.seconds.values()))


def stopping_rule(train_config: dict) -> dict:
    """The settings that decide when a run stops (what makes two runs' epochs comparable)."""
    return {k: v for k, v in train_config.items() if k not in IDENTITY_FIELDS}


def finished_runs(profile_name: str, root: Path | None = None, shipped_root: Path | None = None) -> list[dict]:
    """metrics.json of every finished recurrent model and n-NN: in the artifacts, and shipped with `profile_name`."""
    root = Path(root) if root is not None else artifacts_root()
    folders = list(root.glob("*/*/metrics.json")) if root.is_dir() else []
    folders += list(((shipped_root or SHIPPED_ROOT) / profile_name).glob("*/*/metrics.json"))
    runs = {}  # by model id: a shipped model installed in the artifacts counts once
    for path in folders:
        metrics = complete_metrics(path)
        if metrics and metrics.get("kind") in ("charlm", "nnn"):
            runs.setdefault(metrics.get("model_id") or str(path), metrics)
    return list(runs.values())


def neural_horizon(config, corpus_key: str, runs: list[dict]) -> tuple[float, str]:
    """Expected epochs of an epoch-based run: the median of comparable finished runs (same stopping rule; the
    closest group of: same corpus, architecture and depth; same corpus and architecture; same corpus; same
    architecture; any), at most the epoch cap; without any, the epoch cap."""
    from dataclasses import asdict

    rule = stopping_rule(asdict(config))
    same = [r for r in runs if r.get("kind") == "charlm" and stopping_rule(r.get("train_config", {})) == rule]
    mine = (corpus_key, config.arch, config.layers)
    groups = [
        ("same corpus, architecture and depth", lambda k: k == mine),
        ("same corpus and architecture", lambda k: k[:2] == mine[:2]),
        ("same corpus", lambda k: k[0] == mine[0]),
        ("same architecture", lambda k: k[1] == mine[1]),
        ("any architecture", lambda k: True),
    ]
    for what, keep in groups:
        epochs = [_epochs_run(r) for r in same if keep(_run_key(r))]
        epochs = [e for e in epochs if e]
        if epochs:
            median = min(float(statistics.median(epochs)), float(config.epochs))
            n = len(epochs)
            return median, f"the median of {n} finished run{'s' * (n != 1)} with this stopping rule ({what})"
    return float(config.epochs), "the epoch cap (no finished run with this stopping rule to go by)"


def _run_key(run: dict) -> tuple:
    return (run.get("corpus_key"), run["train_config"].get("arch"), run["train_config"].get("layers"))


def _epochs_run(metrics: dict) -> float | None:
    """Epochs a finished run trained (its last validation record), None if it recorded none."""
    records = metrics.get("epochs") or []
    return float(records[-1]["epoch"]) if records else None


def split_size(corpus: corpora.Corpus, split: str) -> int:
    """Characters in a split (remembered per corpus key: a charrnn split is a copy of the corpus each time)."""
    key = (corpus.key, split)
    if key not in _SPLIT_SIZES:
        _SPLIT_SIZES[key] = int(corpus.split(split).size)
    return _SPLIT_SIZES[key]


_SPLIT_SIZES: dict[tuple[str, str], int] = {}


def steps_per_epoch(train_chars: int, batch: int, unroll: int) -> int:
    """Minibatches per pass, as corpora.batching.stream_windows cuts them."""
    return max(0, ((train_chars - 1) // batch) // unroll)


def predictions_bytes(positions: int, vocab: int, rows: int | None = None) -> int:
    """Size of a predictions file (predictions.save: float32 target log-probability and int16 target per position;
    float16 distribution and uint8 argmax per stored row, int64 positions when a sample is kept)."""
    rows_kept = positions if rows is None else min(rows, positions)
    sample = 0 if rows is None else 8 * rows_kept
    return 6 * positions + rows_kept * (2 * vocab + 1) + sample + 2048  # + the npz headers


def _incomplete_chars(directory: Path) -> int:
    """Training characters an interrupted run has done (its metrics.json before "complete"), else 0."""
    try:
        metrics = json.loads((Path(directory) / "metrics.json").read_text())
    except (OSError, ValueError):
        return 0
    return 0 if metrics.get("complete") else int(metrics.get("chars_trained") or 0)


def checkpoints_lacking_predictions(folder: Path, snapshots: bool) -> int | None:
    """How many checkpoints of a finished network (its final one, and its snapshots when analyses read them) lack
    test predictions; None when the folder holds no finished model (see reports.pipeline.predictions_missing)."""
    metrics = complete_metrics(Path(folder) / "metrics.json")
    if metrics is None:
        return None
    checkpoints = [Path(folder) / "checkpoint.pt"]
    if snapshots:
        checkpoints += [Path(folder) / s["file"] for s in metrics.get("snapshots") or []]
    return sum(not checkpoint_predictions_path(c, "test").is_file() for c in checkpoints)


def measured_training(planned, problem: str | None, profile_name: str) -> tuple[float | None, float | None]:
    """What training a finished copy of `planned` took, as recorded: (training seconds, CPU seconds). The copy is the
    artifact when it is finished here, else the shipped one; (None, None) when there is neither. `--plan --retrain`
    prints them next to the estimate, so an estimate can be checked against what the same model took."""
    shipped = shipped_folder(profile_name, planned.corpus.artifact_name, planned.model_id) if planned.shipped else None
    folder = planned.directory if problem is None else shipped
    metrics = complete_metrics(folder / "metrics.json") if folder is not None else None
    if metrics is None:
        return None, None
    try:
        cpu = read_manifest(shipped).get("cpu_seconds") if shipped is not None else None
    except (OSError, ValueError):
        cpu = None
    return metrics.get("seconds"), cpu


def neural_cost(planned, cal: Calibration, threads: int, snapshots: bool, runs: list[dict], problem: str | None,
                retrain: bool = False, profile_name: str = "", device=None) -> ModelCost:  # fmt: skip
    """Seconds and disk of one recurrent model (see the module docstring, 2 and 3)."""
    from .model import count_params
    from .train import snapshot_steps

    c, corpus = planned.config, planned.corpus
    V, test = corpus.vocab_size, split_size(corpus, "test") - 1

    def measured() -> dict:
        key = neural_key(c.arch, c.layers, c.size, V, c.batch_size, c.unroll, c.fused, threads)
        return cal.get(key, lambda: measure_neural(c.arch, c.layers, c.size, V, c.batch_size, c.unroll, c.fused,
                                                   threads, device))  # fmt: skip

    def scoring(rows: int) -> float:
        m = measured()
        return scored_cells(test) / m["forward_cps"] + rows * m["row_s"]

    sample_rows = min(SAMPLE_POSITIONS, test)
    cost = ModelCost(planned.model_id, "neural", corpus.name, "train")
    existing = None
    if problem is None:  # finished here: only the predictions it lacks
        existing, cost.status = planned.directory, "cached"
    elif planned.shipped and not retrain:  # installed from models/<profile>/, then scored
        existing, cost.status = shipped_folder(profile_name, corpus.artifact_name, planned.model_id), "shipped"
    if existing is not None:
        metrics = complete_metrics(existing / "metrics.json") or {}
        cost.epochs, cost.horizon = _epochs_run(metrics), "recorded"
        final = True
        lacking = 1 + (len(metrics.get("snapshots") or []) if snapshots else 0)
        if cost.status == "cached":
            lacking = checkpoints_lacking_predictions(existing, snapshots) or 0
            final = not checkpoint_predictions_path(existing / "checkpoint.pt", "test").is_file()
        if lacking:
            cost.seconds["predictions"] = final * scoring(test) + (lacking - final) * scoring(sample_rows)
            cost.disk = final * predictions_bytes(test, V) + (lacking - final) * predictions_bytes(test, V, sample_rows)
            cost.status += ", to score"
        if cost.status.startswith("shipped"):
            cost.disk += sum(f.get("bytes", 0) for f in _manifest_files(existing).values())
        return cost
    m = measured()
    train_chars = split_size(corpus, "train")
    spe = steps_per_epoch(train_chars, c.batch_size, c.unroll)
    chars_per_step = c.batch_size * c.unroll
    total_steps, cost.horizon = _planned_steps(
        c.max_chars, chars_per_step, c.epochs, spe, lambda: neural_horizon(c, corpus.key, runs)
    )
    cost.epochs = total_steps / spe
    done = _incomplete_chars(planned.directory) if problem == "not built" else 0
    cost.chars = max(0, total_steps * chars_per_step - done)
    if done:
        cost.status = "resume"
    validations = total_steps // spe + (1 if total_steps % spe else 0)
    val_chars = min(c.eval_chars or 10**18, split_size(corpus, "val"))
    left = cost.chars / (total_steps * chars_per_step)  # the share of the run still to do
    n_snap = len(snapshot_steps(c, spe, total_steps)) if c.snapshots else 0
    read_snaps = n_snap if snapshots else 0
    cost.seconds = {
        "training": cost.chars / m["train_cps"],
        "validation": left * validations * val_chars / m["eval_cps"],
        "predictions": scoring(test) + read_snaps * scoring(sample_rows),
    }
    checkpoint = 4 * count_params(c.model_config(V)) + m["checkpoint_overhead_bytes"]
    # the best checkpoint, the snapshots, state.pt (weights and RMSProp's averages), the predictions
    cost.disk = (1 + n_snap + 2) * checkpoint + predictions_bytes(test, V)
    cost.disk += read_snaps * predictions_bytes(test, V, sample_rows)
    return cost


def _planned_steps(max_chars, chars_per_step: int, epoch_cap: int, spe: int, horizon) -> tuple[int, str]:
    """Optimiser steps a run will take and what ends it: its character budget when that comes before the epoch
    cap, else `horizon()`'s expected epochs (early stopping, convergence) and where they come from."""
    if max_chars is not None and math.ceil(max_chars / chars_per_step) < epoch_cap * spe:
        return math.ceil(max_chars / chars_per_step), "character budget"
    epochs, source = horizon()
    return max(1, round(epochs * spe)), source


def _manifest_files(folder: Path) -> dict:
    """The files a shipped model's manifest lists ({} when it is unreadable: damage() reports that)."""
    try:
        return read_manifest(folder).get("files", {})
    except (OSError, ValueError):
        return {}


def nnn_cost(
    planned, cal: Calibration, threads: int, runs: list[dict], problem: str | None, retrain: bool = False,
    profile_name: str = "",
) -> ModelCost:  # fmt: skip
    """Seconds and disk of one n-NN: every hidden size of its grid trained, the best one scores the test split; a
    shipped one (models/<profile>/) is installed and only scores it."""
    from . import nnn

    corpus, n = planned.corpus, planned.n
    V = corpus.vocab_size
    config = nnn.NNNConfig(corpus.source or corpus.name, n, **planned.options)
    cost = ModelCost(planned.model_id, "nnn", corpus.name, "train")
    if problem is None:
        cost.status = "cached"
        return cost
    positions = split_size(corpus, "train") - 1
    val = min(config.eval_chars or 10**18, split_size(corpus, "val")) - 1
    test = split_size(corpus, "test") - 1
    if planned.shipped and not retrain:  # installed, then only its test split scored
        files = _manifest_files(shipped_folder(profile_name, corpus.artifact_name, planned.model_id))
        hidden, batch = max(config.hidden_grid), config.batch_chars  # the largest size bounds the scoring
        m = cal.get(nnn_key(n, hidden, V, batch, config.targets, threads),
                    lambda: measure_nnn(n, hidden, V, batch, config.targets, threads))  # fmt: skip
        cost.status, cost.horizon = "shipped, to score", "recorded"
        cost.seconds = {"nnn": test / m["predict_pps"]}
        cost.disk = predictions_bytes(test, V) + sum(f.get("bytes", 0) for f in files.values())
        return cost
    rows = distinct_contexts(corpus, n) if config.targets == "distinct" else positions  # the rows a pass draws
    batch = min(config.batch_chars, rows)
    spe = math.ceil((config.epoch_chars or rows) / batch)
    steps, cost.horizon = _planned_steps(
        config.max_chars, batch, config.epochs, spe, lambda: nnn_horizon(config, corpus.key, runs)
    )
    cost.epochs = steps / spe
    validations = steps // spe + (1 if steps % spe else 0)
    seconds, measured = {"nnn": 0.0}, {}
    for hidden in config.hidden_grid:
        m = measured[hidden] = cal.get(nnn_key(n, hidden, V, batch, config.targets, threads),
                    lambda h=hidden: measure_nnn(n, h, V, batch, config.targets, threads))  # fmt: skip
        seconds["nnn"] += positions * m["setup_s_per_position"] + steps * batch / m["train_cps"]
        seconds["nnn"] += validations * val / m["eval_pps"]
        params = (n * V + 1) * hidden + hidden + hidden * V + V
        cost.disk += 3 * (4 * params + 4096)  # the member's checkpoint and its state.pt (weights + RMSProp's)
    # the size chosen on validation scores the test split, every row kept (timed: the largest of the grid)
    seconds["nnn"] += test / measured[max(config.hidden_grid)]["predict_pps"]
    cost.chars = steps * batch * len(config.hidden_grid)
    cost.seconds = seconds
    cost.disk += predictions_bytes(test, V)
    return cost


def distinct_contexts(corpus, n: int) -> int:
    """How many distinct n-character contexts the train split holds (the rows of a "distinct" n-NN's pass)."""
    from .nnn import context_ids, context_rows

    key = (corpus.key, n)
    if key not in _DISTINCT:
        _DISTINCT[key] = int(context_ids(context_rows(corpus.split("train"), n, corpus.vocab_size)).max()) + 1
    return _DISTINCT[key]


_DISTINCT: dict[tuple[str, int], int] = {}


def nnn_horizon(config, corpus_key: str, runs: list[dict]) -> tuple[float, str]:
    """Expected epochs of an epoch-based n-NN: the median over the members of comparable finished n-NNs (same
    settings but n, seed and the hidden grid), else the epoch cap."""
    ignore = {"corpus", "n", "seed", "hidden_grid"}
    rule = {k: v for k, v in config.to_dict().items() if k not in ignore}
    epochs = []
    for r in runs:
        if r.get("kind") != "nnn" or {k: v for k, v in r.get("config", {}).items() if k not in ignore} != rule:
            continue
        epochs += [_epochs_run(member) for member in r.get("grid", [])]
    epochs = [e for e in epochs if e]
    if epochs:
        n = len(epochs)
        return min(float(statistics.median(epochs)), float(config.epochs)), f"the median of {n} finished n-NN members"
    return float(config.epochs), "the epoch cap (no finished n-NN with these settings to go by)"


def ngram_costs(planned_ngrams: list, cal: Calibration, problems: dict) -> list[ModelCost]:
    """Seconds and disk of the KenLM models of one corpus (lmplz + build_binary + scoring, by their n-gram count)."""
    if not planned_ngrams:
        return []
    corpus = planned_ngrams[0].corpus
    orders = [p.n + 1 for p in planned_ngrams]
    todo = [p for p in planned_ngrams if problems.get(p.model_id) is not None]
    costs = {p.model_id: ModelCost(p.model_id, "ngram", corpus.name, "cached") for p in planned_ngrams}
    if todo:
        train = corpus.split("train")
        counts = cal.get(counts_key(corpus.key, max(orders)), lambda: measure_counts(train, max(orders)))
        k = cal.get(kenlm_key(corpus.key, (min(orders), max(orders))),
                    lambda: measure_kenlm(corpus, (min(orders), max(orders))))  # fmt: skip
        V, test = corpus.vocab_size, split_size(corpus, "test") - 1
        rows = min(SAMPLE_POSITIONS, test)
        for p in todo:
            order = p.n + 1
            ngrams = counts["counts"][order - 1]
            states = min(test * k["states_per_position"], ngrams)  # distinct KenLM states met while scoring
            lookups = test + 2 * states + min(rows, states) * V
            cost = costs[p.model_id]
            cost.status, cost.chars = "train", int(train.size)
            cost.seconds = {"kenlm": k["build_start_s"] + ngrams * k["build_s_per_ngram"] + lookups * k["lookup_s"]}
            cost.disk = int(ngrams * k["bytes_per_ngram"]) + predictions_bytes(test + 1, V, rows)
    return [costs[p.model_id] for p in planned_ngrams]


# ------------------------------------------------------------------------------------ the schedule


def job_order(models: list, costs: dict[str, ModelCost]) -> list[str]:
    """Model ids of the jobs the pipeline submits, in its order (charlm.plan.submission_order). Cached ones send
    no job."""
    from .plan import submission_order

    todo = [m for m in models if costs[m.model_id].total_s > 0]
    return [m.model_id for m in submission_order(todo, len({m.corpus_arg for m in models}))]


def makespan(seconds: Iterable[float], workers: int) -> float:
    """Wall time of jobs taken in order by `workers` workers, each job going to the first free one."""
    free = [0.0] * max(1, workers)
    for s in seconds:
        k = free.index(min(free))
        free[k] += s
    return max(free)


class Countdown:
    """Time left across all jobs of a pool, for its progress line.

    The pool runs the jobs in submission order on `workers` workers: the first `workers` start at once and each
    finished job frees its worker for the next. The jobs still running have their estimate minus the time they
    have run left; the waiting ones are list-scheduled after them. Estimates are scaled by how long the finished
    jobs took against their estimates (so a machine slower than its calibration says so as soon as one job ends).
    """

    def __init__(self, estimates: list[float], workers: int, now: float | None = None):
        self.estimates, self.workers = [max(0.0, float(e)) for e in estimates], max(1, workers)
        start = time.perf_counter() if now is None else now
        self.started = {k: start for k in range(min(self.workers, len(self.estimates)))}
        self.finished: dict[int, float] = {}
        self.next = len(self.started)

    def done(self, k: int, now: float | None = None) -> None:
        now = time.perf_counter() if now is None else now
        self.finished[k] = now
        if k not in self.started:  # an out-of-order start (a Dask cluster): count it as started now
            self.started[k] = now
        while self.next < len(self.estimates) and self.next in self.started:
            self.next += 1
        if self.next < len(self.estimates):
            self.started[self.next] = now
            self.next += 1

    def speed(self) -> float:
        """Measured time of the finished jobs over their estimates (1 until one has finished), clipped to 1/4..4."""
        spent = sum(self.finished[k] - self.started[k] for k in self.finished)
        planned = sum(self.estimates[k] for k in self.finished)
        return min(4.0, max(0.25, spent / planned)) if planned > 0 and spent > 0 else 1.0

    def left(self, now: float | None = None) -> float:
        now = time.perf_counter() if now is None else now
        f = self.speed()
        running = [k for k in self.started if k not in self.finished]
        free = [max(0.0, f * self.estimates[k] - (now - self.started[k])) for k in running]
        free += [0.0] * (self.workers - len(free))
        for k in range(self.next, len(self.estimates)):
            j = free.index(min(free))
            free[j] += f * self.estimates[k]
        return max(free) if free else 0.0

    def postfix(self, now: float | None = None) -> str:
        return f"about {duration(self.left(now))} left in all jobs"


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    if seconds < 86400 * 2:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    return f"{seconds / 86400:.1f} days"


# ------------------------------------------------------------------------------------ the estimate


@dataclass
class Estimate:
    profile: str
    workers: int
    threads: int
    costs: list[ModelCost]  # in plan order
    order: list[str]  # model ids of the jobs, in submission order
    analyses: list[tuple[str, float]]  # (name, seconds; 0 when its table is cached)
    render_s: float
    wants_gpu: bool
    device: str
    calibration: Calibration
    job_ids: dict = field(default_factory=dict)  # what identifies a pipeline job -> model id (see job_seconds)
    notes: list[str] = field(default_factory=list)
    analyses_measured: list[str] = field(default_factory=list)  # priced by this machine's last run of the profile

    def analyses_source(self) -> str:
        """Where the analyses' seconds come from, for the summary."""
        quick = "as measured in the quick profile's cold run: not calibrated"
        n, k = len(self.analyses), len(self.analyses_measured)
        if k == 0:
            return quick
        here = f"as this machine last measured them in a run of profile {self.profile} with {self.threads} thread(s)"
        return here if k == n else f"{k} of {n} {here}, the others {quick}"

    @property
    def by_id(self) -> dict[str, ModelCost]:
        return {c.model_id: c for c in self.costs}

    @property
    def models_wall_s(self) -> float:
        by_id = self.by_id
        return makespan((by_id[m].total_s for m in self.order), self.workers)

    def analysis_order(self) -> list[str]:
        """The analyses longest first, as the pipeline submits them: with the longest (cells) last in the profile's
        order, a worker would start it when the others were nearly done and the run would wait for it alone."""
        return [name for name, _ in sorted(self.analyses, key=lambda a: -a[1])]  # stable: ties keep the profile's

    @property
    def analyses_wall_s(self) -> float:
        seconds = dict(self.analyses)
        return makespan((seconds[name] for name in self.analysis_order()), self.workers)

    @property
    def wall_s(self) -> float:
        return self.models_wall_s + self.analyses_wall_s + self.render_s

    @property
    def disk(self) -> int:
        return sum(c.disk for c in self.costs)

    def phase_seconds(self) -> dict[str, float]:
        phases: dict[str, float] = {}
        for c in self.costs:
            for phase, s in c.seconds.items():
                phases[phase] = phases.get(phase, 0.0) + s
        return phases

    def job_seconds(self, jobs: list) -> list[float]:
        """Estimated seconds of each of the pipeline's jobs (functools.partial of its train, ngram and nnn jobs:
        a network is known by its config, a baseline by its corpus and n); 0 for a job it does not know."""
        by_id = self.by_id
        return [by_id[self.job_ids[job_identity(job)]].total_s if job_identity(job) in self.job_ids else 0.0
                for job in jobs]  # fmt: skip

    def summary(self) -> list[str]:
        """The lines `--plan` ends with and `make report` starts with."""
        todo = [c for c in self.costs if c.total_s > 0]
        phases = self.phase_seconds()
        parts = ", ".join(f"{p} {duration(s)}" for p, s in phases.items() if s > 0)
        lines = [
            f"estimate: {len(todo)} of {len(self.costs)} models to compute: {duration(sum(phases.values()))} of "
            f"worker time ({parts or 'nothing'}); analyses {duration(sum(s for _, s in self.analyses))} and "
            f"rendering {duration(self.render_s)} ({self.analyses_source()})",
            f"estimate: wall time about {duration(self.wall_s)} on {self.workers} worker(s) x {self.threads} "
            f"thread(s) (models {duration(self.models_wall_s)}, analyses {duration(self.analyses_wall_s)}, "
            f"rendering {duration(self.render_s)}); about {self.disk / 1e9:.2f} GB of new artifacts",
        ]
        cached = [c for c in self.costs if c.status.startswith("cached")]
        shipped = [c for c in self.costs if c.status.startswith("shipped")]
        if cached or shipped:
            free = sum(c.total_s == 0 for c in cached + shipped)
            lines.append(
                f"estimate: {len(cached)} models are cached and {len(shipped)} shipped (models/{self.profile}/, "
                f"installed, not trained): {free} of them cost nothing, the others only the predictions they lack"
            )
        finished = [c for c in self.costs if c.trained_s is not None]
        if finished:
            cpu = [c.cpu_s for c in finished if c.cpu_s is not None]
            lines.append(
                f"measured: {len(finished)} of {len(self.costs)} models have a finished copy (cached or shipped); "
                f"their training took {duration(sum(c.trained_s for c in finished))} of one worker each, "
                f"{duration(makespan((c.trained_s for c in finished), self.workers))} on {self.workers} worker(s) "
                f"(column `trained s`: recorded wall seconds; `CPU s` for the {len(cpu)} whose manifest records "
                f"them: {duration(sum(cpu))})"
            )
        horizons: dict[str, list] = {}
        for c in todo:
            if c.horizon and c.horizon not in ("character budget", "recorded"):
                horizons.setdefault(c.horizon, []).append(c)
        for what, group in horizons.items():
            epochs = sorted({round(c.epochs, 1) for c in group if c.epochs})
            n, count = len(group), "/".join(f"{e:g}" for e in epochs)
            lines.append(f"estimate: {n} model{'s' * (n != 1)} train {count} epochs: {what}")
        loads = [e["load_average"] for e in self.calibration.entries.values() if e.get("load_average") is not None]
        m = self.calibration.machine
        lines.append(
            f"estimate: calibrated on {m['cpu']} ({m['cores']} cores, {self.device}) under a load average of "
            f"{min(loads, default=0):g} to {max(loads, default=0):g}; {self.calibration.path} (--calibrate redoes it)"
        )
        lines += [f"estimate: {note}" for note in self.notes]
        if self.wants_gpu:
            where = "on this GPU" if self.device.startswith("cuda") else "on this machine's CPU"
            lines.append(f"estimate: this profile wants a GPU; the times above are what it costs {where}")
        return lines


def job_identity(job) -> tuple:
    """What identifies one of reports.pipeline's jobs: (train_job, its config) or (ngram_job / nnn_job, corpus, n)."""
    name = getattr(getattr(job, "func", None), "__name__", "")
    args = getattr(job, "args", ())
    if name == "train_job" and args:
        return (name, json.dumps(args[0], sort_keys=True, default=str))
    if name in ("ngram_job", "nnn_job") and len(args) >= 2:
        return (name, str(args[0]), int(args[1]))
    return (name,)


def _planned_identity(m) -> tuple:
    if m.kind == "neural":
        return ("train_job", json.dumps(m.config.__dict__, sort_keys=True, default=str))
    return (f"{m.kind}_job", str(m.corpus_arg), int(m.n))


def estimate(
    profile,
    models: list,
    workers: int,
    threads: int | None = None,
    snapshots: bool = True,
    problems: dict | None = None,
    build_dir: Path | None = None,
    retrain: bool = False,
    calibration: Calibration | None = None,
    say: Callable[[str], None] = print,
    device: str | None = None,
    calibrate: bool | None = None,
) -> Estimate:
    """The cost of running `profile`'s `models` (charlm.plan.plan) on `workers` workers of `threads` threads.

    `problems`: damage() of each model (computed when not given); `snapshots`: whether analyses read the snapshots'
    predictions; `build_dir`: the report's folder (an analysis with a cached table there costs nothing when no model
    changes). Missing calibrations are measured now (and cached, and said so first) when `calibrate` is True, or
    when it is None and the run trains at least CALIBRATE_FROM_CHARS characters; else those models are left out of
    the estimate and the summary says so."""
    from corpora.errors import UserError

    from .plan import damage
    from .train import pick_device

    threads = threads or max(1, (os.cpu_count() or 1) // max(1, workers))
    problems = problems if problems is not None else {m.model_id: damage(m) for m in models}
    cal = calibration or Calibration(say=say)
    device = str(pick_device(device))
    runs = finished_runs(profile.name)
    if calibrate is None:
        calibrate = planned_chars(models, problems) >= CALIBRATE_FROM_CHARS
    cal.offline = not calibrate
    missing = _missing_calibrations(models, cal, threads, problems)
    if missing and calibrate:
        say(f"calibrating {missing} measurement(s) of this machine, a few seconds each (cached in {cal.path})")
    costs: dict[str, ModelCost] = {}
    notes = []
    for m in models:
        try:
            if m.kind == "neural":
                costs[m.model_id] = neural_cost(m, cal, threads, snapshots, runs, problems[m.model_id], retrain,
                                                profile.name, device)  # fmt: skip
            elif m.kind == "nnn":
                costs[m.model_id] = nnn_cost(m, cal, threads, runs, problems[m.model_id], retrain, profile.name)
        except NotCalibrated:
            costs[m.model_id] = ModelCost(m.model_id, m.kind, m.corpus.name, UNCALIBRATED)
        if m.kind in ("neural", "nnn"):
            measured = measured_training(m, problems[m.model_id], profile.name)
            costs[m.model_id].trained_s, costs[m.model_id].cpu_s = measured
    by_corpus: dict[str, list] = {}
    for m in models:
        if m.kind == "ngram":
            by_corpus.setdefault(m.corpus.key, []).append(m)
    for group in by_corpus.values():
        try:
            found = ngram_costs(group, cal, problems)
        except (UserError, NotCalibrated) as err:  # KenLM not built here: the run would fail on the same line
            if isinstance(err, UserError):
                notes.append(f"KenLM models of {group[0].corpus.name} not estimated: {err}")
            found = [ModelCost(m.model_id, "ngram", m.corpus.name, UNCALIBRATED) for m in group]
        for c in found:
            costs[c.model_id] = c
    unknown = sum(c.status == UNCALIBRATED for c in costs.values())
    if unknown:
        notes.append(f"{unknown} models left out: this machine is not calibrated for them (a run training under "
                     f"{CALIBRATE_FROM_CHARS:,} characters is not worth it; "
                     f"`python -m reports --profile {profile.name} --plan` measures them)")  # fmt: skip
    ordered = [costs[m.model_id] for m in models]
    anything = any(c.total_s > 0 for c in ordered)
    data = Path(build_dir) / "data" if build_dir else None
    median = statistics.median(ANALYSIS_SECONDS.values())

    def last_measured(name: str) -> float | None:
        entry = cal.entries.get(analysis_key(profile.name, name, threads))
        return float(entry["seconds"]) if entry and "seconds" in entry else None

    analyses, measured_here = [], []
    for name in profile.analyses:
        key = data / f"{name}.key" if data else None
        cached = not anything and key is not None and key.is_file() and key.read_text().strip() != ""
        seconds = last_measured(name)
        if seconds is None:
            seconds = ANALYSIS_SECONDS.get(name, median)
        else:
            measured_here.append(name)
        analyses.append((name, 0.0 if cached else seconds))
    render_s = last_measured("render")
    return Estimate(
        profile.name, workers, threads, ordered, job_order(models, costs), analyses,
        RENDER_SECONDS if render_s is None else render_s, profile.wants_gpu, device, cal,
        {_planned_identity(m): m.model_id for m in models}, notes, measured_here,
    )  # fmt: skip


def planned_chars(models, problems: dict) -> int:
    """Characters the models still to compute would train at most (their budget, or their epoch cap x the train
    split; n-NNs once per hidden size): what decides whether calibrating is worth its seconds."""
    from . import nnn

    total = 0
    for m in models:
        if problems.get(m.model_id) is None or m.kind == "ngram":
            continue
        if m.kind == "neural":
            cap, epochs, grid = m.config.max_chars, m.config.epochs, 1
        else:
            config = nnn.NNNConfig(m.corpus.source or m.corpus.name, m.n, **m.options)
            cap, epochs, grid = config.max_chars, config.epochs, len(config.hidden_grid)
        per_epoch = split_size(m.corpus, "train")
        total += grid * min(cap or epochs * per_epoch, epochs * per_epoch)
    return total


def _missing_calibrations(models, cal: Calibration, threads: int, problems: dict) -> int:
    """How many measurements `estimate` will run (to say so before the seconds they take)."""
    from . import nnn

    keys, ngram_orders = set(), {}
    for m in models:
        V = m.corpus.vocab_size
        if m.kind == "neural":
            c = m.config
            keys.add(neural_key(c.arch, c.layers, c.size, V, c.batch_size, c.unroll, c.fused, threads))
        elif m.kind == "nnn" and problems.get(m.model_id) is not None:
            config = nnn.NNNConfig(m.corpus.source or m.corpus.name, m.n, **m.options)
            batch = min(config.batch_chars, split_size(m.corpus, "train") - 1)
            keys |= {nnn_key(m.n, h, V, batch, config.targets, threads) for h in config.hidden_grid}
        elif m.kind == "ngram":
            ngram_orders.setdefault(m.corpus.key, []).append((m.n + 1, problems.get(m.model_id) is not None))
    for key, orders in ngram_orders.items():
        if any(todo for _, todo in orders):
            o = [order for order, _ in orders]
            keys |= {kenlm_key(key, (min(o), max(o))), counts_key(key, max(o))}
    return sum(not cal.has(k) for k in keys)
