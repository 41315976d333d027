"""Profiles: plain TOML files in reports/profiles/ naming corpora, model grid, budget, seeds and analyses."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from charlm.paths import config_hash
from charlm.train import TrainConfig
from corpora.errors import UserError

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
_TRAIN_FIELDS = set(TrainConfig.__dataclass_fields__) - {"corpus", "arch", "layers", "size", "seed"}


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    corpora: list[str]  # registry names or paths
    analyses: list[str]  # analyses/<name>.py, in report order
    wants_gpu: bool
    train: dict  # TrainConfig fields shared by every neural model
    grid: dict  # types, layers, sizes (LSTM-width budgets): Karpathy et al. Fig 1 left
    ablations: dict  # archs, layers, size, lstm_seeds: Levy et al. Table 1
    baselines: dict  # ngram_n, nnn_n, nnn_hidden, nnn_max_chars
    run: dict = field(default_factory=dict)  # workers
    splits: str = (
        "contiguous"  # corpus split mode: contiguous in file order, or "charrnn" (the papers' char-rnn splits)
    )

    @property
    def hash(self) -> str:
        return config_hash({k: v for k, v in self.__dict__.items() if k not in ("name", "description")})


def available() -> list[str]:
    return sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))


def load_profile(name_or_path: str) -> Profile:
    path = Path(name_or_path)
    if not path.suffix:
        path = PROFILES_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        raise UserError(
            f"unknown profile '{name_or_path}': choose one of {', '.join(available())} or give a .toml path"
        )
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"profile {path} is not valid TOML: {err}") from None
    unknown = set(raw.get("train", {})) - _TRAIN_FIELDS
    if unknown:
        raise UserError(f"profile {path}: unknown [train] settings {sorted(unknown)}")
    try:
        return Profile(
            name=path.stem,
            description=raw["description"],
            corpora=list(raw["corpora"]),
            analyses=list(raw["analyses"]),
            wants_gpu=bool(raw.get("wants_gpu", False)),
            train=dict(raw.get("train", {})),
            grid=dict(raw["grid"]),
            ablations=dict(raw.get("ablations", {})),
            baselines=dict(raw.get("baselines", {})),
            run=dict(raw.get("run", {})),
            splits=str(raw.get("splits", "contiguous")),
        )
    except KeyError as err:
        raise UserError(f"profile {path} lacks the setting {err}") from None
