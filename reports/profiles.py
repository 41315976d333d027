"""Profiles: plain TOML files in reports/profiles/ naming corpora, model grid, budget, seeds and analyses.

description = "..."
corpora = ["warpeace", "linux"]     # registered names or file paths
analyses = ["cross_entropy", ...]   # analyses/<name>.py, in report order
splits = "contiguous"               # or "charrnn", the papers' splits
wants_gpu = false

[train]                 # charlm.train.TrainConfig settings shared by every neural model
max_chars = 4_000_000
dropout = [0.0, 0.25]   # a list is a grid: every value is trained, analyses read the best on validation

[[grid]]                # Karpathy et al. Fig 1: types x layers x budget rows (several [[grid]] tables add up)
types = ["lstm", "rnn", "gru"]
layers = [1, 2]
budgets = [64, 128]     # rows: a 1-layer LSTM of this width sets the parameter count of every model in it
corpora = ["warpeace"]  # optional: only on these corpora

[ablations]             # Levy et al. Table 1: every ablation at the LSTM's width, the LSTM over seeds
archs = ["lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "lstm-gates"]
layers = 1
budget = 128
lstm_seeds = [0, 1, 2]

[baselines]             # KenLM and n-NN orders (analyses add the orders they read)
ngram_n = [1, 2, 3]
nnn_n = [1, 2]
nnn_hidden = [256]
nnn_max_chars = 2_000_000
nnn_batch_chars = 1_000

[run]
workers = 2             # local worker processes (one torch thread each when workers = cores)

[analysis.saturation]   # settings of one analysis (see `python -m analyses.saturation --help`)
length = 5000           # excerpt length in characters (analyses/saturation.py SETTINGS)
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from charlm.paths import config_hash
from charlm.train import TrainConfig
from corpora import SPLIT_MODES
from corpora.errors import UserError

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
_TRAIN_FIELDS = set(TrainConfig.__dataclass_fields__) - {"corpus", "arch", "layers", "size", "seed"}
_GRID = {"types", "layers", "budgets", "corpora"}
_SECTIONS = {
    "ablations": {"archs", "layers", "budget", "lstm_seeds"},
    "baselines": {"ngram_n", "nnn_n", "nnn_hidden", "nnn_max_chars", "nnn_batch_chars", "nnn_lr", "nnn_targets"},
    "run": {"workers"},
}
_TOP = {"description", "corpora", "analyses", "wants_gpu", "splits", "train", "analysis", "grid", *_SECTIONS}


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    corpora: list[str]  # registry names or paths
    analyses: list[str]  # analyses/<name>.py, in report order
    wants_gpu: bool
    train: dict  # TrainConfig fields shared by every neural model; a list for `dropout` is a grid
    grid: list[dict]  # [[grid]] tables of types, layers, budgets (and corpora): Karpathy et al. Fig 1 left
    ablations: dict  # archs, layers, budget, lstm_seeds: Levy et al. Table 1
    baselines: dict  # ngram_n, nnn_n, nnn_hidden, nnn_max_chars, nnn_batch_chars
    run: dict = field(default_factory=dict)  # workers
    splits: str = "contiguous"  # split mode: contiguous in file order, or "charrnn" (the papers' char-rnn splits)
    analysis: dict = field(default_factory=dict)  # per-analysis settings: {name: {key: value}}

    @property
    def hash(self) -> str:
        return config_hash({k: v for k, v in self.__dict__.items() if k not in ("name", "description")})

    @property
    def dropouts(self) -> list[float]:
        """The dropout grid (one value when the profile gives a number)."""
        value = self.train.get("dropout", 0.0)
        return [float(v) for v in value] if isinstance(value, list) else [float(value)]


def available() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))


def _check(path: Path, raw: dict) -> None:
    unknown = set(raw) - _TOP
    if unknown:
        raise UserError(f"profile {path}: unknown settings {sorted(unknown)}")
    unknown = set(raw.get("train", {})) - _TRAIN_FIELDS
    if unknown:
        raise UserError(f"profile {path}: unknown [train] settings {sorted(unknown)}")
    grids = raw.get("grid", [])
    for table in grids if isinstance(grids, list) else [grids]:
        unknown = set(table) - _GRID
        missing = {"types", "layers", "budgets"} - set(table)
        if unknown or missing:
            raise UserError(
                f"profile {path}: a [[grid]] table has unknown {sorted(unknown)} or lacks {sorted(missing)}"
            )
    for section, allowed in _SECTIONS.items():
        unknown = set(raw.get(section, {})) - allowed
        if unknown:
            raise UserError(
                f"profile {path}: unknown [{section}] settings {sorted(unknown)} (known: {sorted(allowed)})"
            )
    if raw.get("splits", "contiguous") not in SPLIT_MODES:
        raise UserError(f"profile {path}: splits must be one of {', '.join(SPLIT_MODES)}")
    dropout = raw.get("train", {}).get("dropout", 0.0)
    for value in dropout if isinstance(dropout, list) else [dropout]:
        if not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise UserError(f"profile {path}: dropout values must be in [0, 1), got {value!r}")
    unknown = set(raw.get("analysis", {})) - set(raw.get("analyses", []))
    if unknown:
        raise UserError(f"profile {path}: [analysis.*] settings for analyses it does not run: {sorted(unknown)}")


def load_profile(name_or_path: str) -> Profile:
    path = Path(name_or_path)
    if not path.suffix:
        path = PROFILES_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        choices = ", ".join(available())
        raise UserError(f"unknown profile '{name_or_path}': choose one of {choices} or give a .toml path")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"profile {path} is not valid TOML: {err}") from None
    _check(path, raw)
    try:
        return Profile(
            name=path.stem,
            description=raw["description"],
            corpora=list(raw["corpora"]),
            analyses=list(raw["analyses"]),
            wants_gpu=bool(raw.get("wants_gpu", False)),
            train=dict(raw.get("train", {})),
            grid=[dict(g) for g in (raw["grid"] if isinstance(raw["grid"], list) else [raw["grid"]])],
            ablations=dict(raw.get("ablations", {})),
            baselines=dict(raw.get("baselines", {})),
            run=dict(raw.get("run", {})),
            splits=str(raw.get("splits", "contiguous")),
            analysis={k: dict(v) for k, v in raw.get("analysis", {}).items()},
        )
    except KeyError as err:
        raise UserError(f"profile {path} lacks the setting {err}") from None
