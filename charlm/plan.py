"""Profiles and plans: which models a profile trains. Below both the analyses and the report, which read it.

A profile is a plain TOML file in charlm/profiles/ naming corpora, model grid, budget, seeds and analyses:

description = "..."
corpora = ["warpeace", "linux"]     # registered names or file paths
analyses = ["cross_entropy", ...]   # analyses/<name>.py, in report order
splits = "contiguous"               # or "charrnn", the papers' splits
wants_gpu = false
ships_models = false                # true: the repository ships the models (models/<name>/); a run trains none of
                                    # them, and leaves out (names) those not shipped yet unless --retrain

[train]                 # charlm.train.TrainConfig settings shared by every neural model
max_chars = 4_000_000
dropout = [0.0, 0.25]   # a list is a grid: every value is trained, analyses read the best on validation

[[grid]]                # Karpathy et al. Fig 1: types x layers x budget rows (several [[grid]] tables add up)
types = ["lstm", "rnn", "gru"]
layers = [1, 2]
budgets = [64, 128]     # rows: a 1-layer LSTM of this width sets the parameter count of every model in it
corpora = ["warpeace"]  # optional: only on these corpora
dropouts = [0.0, 0.25]  # optional: this table's own dropout grid
dropout_search = "grid" # or "line": in increasing order, the next only while each beat those below it on validation
                        # (charlm.dropout_search; honoured by `reports.ship train` and a shipping profile's plan)

[ablations]             # Levy et al. Table 1: every ablation at the LSTM's width, the LSTM over seeds
archs = ["lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "lstm-gates"]
layers = 1
budget = 128
lstm_seeds = [0, 1, 2]
noise_seeds = [{corpus = "warpeace", layers = 1, arch = "lstm-srnn"}]  # this ablation at the LSTM's seeds too (its
                        # gap within 3 LSTM seed-stds at one seed: the verdict depends on noise)

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

import dataclasses
import math
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import corpora
from corpora import SPLIT_MODES
from corpora.errors import UserError

from .kinds.base import Planned
from .model import budget_of, matched_size
from .paths import complete_metrics, config_hash
from .train import TrainConfig

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
_TRAIN_FIELDS = set(TrainConfig.__dataclass_fields__) - {"corpus", "arch", "layers", "size", "seed"}
_GRID = {"types", "layers", "budgets", "corpora", "dropouts", "dropout_search"}  # dropouts: this table's own grid of
# dropout values; dropout_search: "grid" (every value trained) or "line" (charlm.dropout_search: in increasing order,
# the next value tried only while each one tried beat those below it on validation)
DROPOUT_SEARCHES = ("grid", "line")
_NNN_OPTIONS = {  # a profile's [baselines] key -> the charlm.nnn.NNNConfig field it sets
    "nnn_hidden": "hidden_grid", "nnn_max_chars": "max_chars", "nnn_batch_chars": "batch_chars", "nnn_lr": "lr",
    "nnn_targets": "targets", "nnn_epochs": "epochs", "nnn_epoch_chars": "epoch_chars", "nnn_lr_decay": "lr_decay",
    "nnn_decay_after": "decay_after", "nnn_patience": "patience", "nnn_converge_delta": "converge_delta",
    "nnn_converge_window": "converge_window", "nnn_optimizer": "optimizer",
}  # fmt: skip
_HIDDEN_FOR_N = "nnn_hidden_for_n"  # [baselines.nnn_hidden_for_n] n = [sizes]: that order's grid instead of nnn_hidden
_SECTIONS = {
    "ablations": {"archs", "layers", "budget", "lstm_seeds", "noise_seeds"},
    "baselines": {"ngram_n", "nnn_n", _HIDDEN_FOR_N, *_NNN_OPTIONS},
    "run": {"workers"},
}
_TOP = {
    "description", "summary", "corpora", "analyses", "wants_gpu", "splits", "ships_models", "train", "analysis", "grid",
    *_SECTIONS,
}  # fmt: skip


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
    ships_models: bool = False  # the repository ships its trained models (models/<name>/, reports.ship): a run
    # installs them, and a model not shipped yet is left out of it (named) rather than trained for hours

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
        drops = table.get("dropouts", [0.0])
        if table.get("dropout_search", "grid") not in DROPOUT_SEARCHES:
            raise UserError(f"profile {path}: a [[grid]] table's dropout_search is one of "
                            f"{', '.join(DROPOUT_SEARCHES)}, got {table['dropout_search']!r}")  # fmt: skip
        if not (isinstance(drops, list) and drops and all(isinstance(d, (int, float)) and 0 <= d < 1 for d in drops)):
            raise UserError(
                f"profile {path}: a [[grid]] table's dropouts must be a list of numbers in [0, 1), got {drops}"
            )
    for section, allowed in _SECTIONS.items():
        unknown = set(raw.get(section, {})) - allowed
        if unknown:
            raise UserError(
                f"profile {path}: unknown [{section}] settings {sorted(unknown)} (known: {sorted(allowed)})"
            )
    abl = raw.get("ablations", {})
    for entry in abl.get("noise_seeds", []):
        if not (isinstance(entry, dict) and set(entry) == {"corpus", "layers", "arch"}
                and entry["arch"] in abl.get("archs", []) and isinstance(entry["layers"], int)):  # fmt: skip
            raise UserError(
                f"profile {path}: [ablations] noise_seeds entries are {{corpus, layers, arch}} with arch one of its "
                f"archs, got {entry!r}"
            )
    for order, sizes in raw.get("baselines", {}).get(_HIDDEN_FOR_N, {}).items():
        if (
            not order.isdigit()
            or int(order) < 1
            or not isinstance(sizes, list)
            or not sizes
            or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in sizes)
        ):
            raise UserError(
                f"profile {path}: [baselines.{_HIDDEN_FOR_N}] maps an order n >= 1 to a list of hidden sizes, "
                f"got {order} = {sizes!r}"
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
            ships_models=bool(raw.get("ships_models", False)),
        )
    except KeyError as err:
        raise UserError(f"profile {path} lacks the setting {err}") from None


# ------------------------------------------------------------------------------------ the plan


def neural_configs(profile: Profile, corpus: corpora.Corpus, corpus_arg: str) -> list[TrainConfig]:
    """The type x layers x budget grid (every model sized to its row, Karpathy sec 4.1), each at every dropout of
    its table (`dropouts`, else the profile's), then Levy's ablations at the width of the LSTM of their budget and
    depth, the LSTM over seeds, at every dropout of the profile. Analyses read, per configuration, the dropout with
    the lowest validation loss (Karpathy et al. sec 3.3; analyses.context.select_by_validation)."""
    configs = [c for g in _grids(profile, corpus, corpus_arg) for c in _grid_configs(profile, g, corpus, corpus_arg)]
    for dropout in profile.dropouts:
        for layers in ablation_depths(profile):
            configs += ablation_set(profile, corpus.vocab_size, corpus_arg, layers, dropout)
    unique = {c.model_id(corpus.key): c for c in configs}
    return list(unique.values())


def dropout_lines(profile: Profile, corpus: corpora.Corpus, corpus_arg: str) -> list[list[TrainConfig]]:
    """Each configuration of a [[grid]] table whose dropouts are searched by line (`dropout_search = "line"`) and
    that has several: its configs, lowest dropout first (charlm.dropout_search decides which of them are tried)."""
    lines = []
    for grid in _grids(profile, corpus, corpus_arg):
        if grid.get("dropout_search", "grid") != "line":
            continue
        by_cell: dict[tuple, list[TrainConfig]] = {}
        for c in _grid_configs(profile, grid, corpus, corpus_arg):
            by_cell.setdefault((c.arch, c.layers, c.size), []).append(c)
        lines += [sorted(line, key=lambda c: c.dropout) for line in by_cell.values() if len(line) > 1]
    return lines


def _grids(profile: Profile, corpus: corpora.Corpus, corpus_arg: str) -> list[dict]:
    """The profile's [[grid]] tables that apply to a corpus (all, but where a table names its corpora)."""
    return [g for g in profile.grid if "corpora" not in g or corpus.name in g["corpora"] or corpus_arg in g["corpora"]]


def _grid_configs(profile: Profile, grid: dict, corpus: corpora.Corpus, corpus_arg: str) -> list[TrainConfig]:
    """One [[grid]] table's configs: every dropout of it x type x layers x budget row."""
    train, V = {k: v for k, v in profile.train.items() if k != "dropout"}, corpus.vocab_size
    return [
        TrainConfig(corpus_arg, arch, layers, matched_size(arch, budget, V, layers), dropout, 0, **train)
        for dropout in [float(d) for d in grid.get("dropouts", profile.dropouts)]
        for arch in grid["types"]
        for layers in grid["layers"]
        for budget in grid["budgets"]
    ]


def ablation_set(profile: Profile, vocab_size: int, corpus_arg: str, layers: int, dropout: float) -> list[TrainConfig]:
    """Levy's table at one depth: the LSTM over its seeds (the yardstick), then every ablation at the LSTM's width,
    at seed 0, and at the LSTM's other seeds too where `noise_seeds` names it for this corpus and depth (issue 38: an
    ablation whose gap is within a few LSTM seed-stds at one seed gets the seeds its verdict needs). The verdict
    compares the members with each other, so a profile that ships its models ships such a set only whole
    (reports.ship pack)."""
    abl, train = profile.ablations, {k: v for k, v in profile.train.items() if k != "dropout"}
    width = matched_size("lstm", abl["budget"], vocab_size, layers)
    seeds = abl.get("lstm_seeds", [0])
    lstms = [TrainConfig(corpus_arg, "lstm", layers, width, dropout, s, **train) for s in seeds]
    noisy = {e["arch"] for e in abl.get("noise_seeds", []) if e["corpus"] == corpus_arg and e["layers"] == layers}
    return lstms + [
        TrainConfig(corpus_arg, arch, layers, width, dropout, s, **train)
        for arch in abl["archs"]
        for s in ([0, *(s for s in seeds if s != 0)] if arch in noisy else [0])
    ]


def ablation_sets(profile: Profile, corpus: corpora.Corpus, corpus_arg: str) -> list[list[TrainConfig]]:
    """Every (depth, dropout) set of Levy's table a profile trains on a corpus (see ablation_set)."""
    return [
        ablation_set(profile, corpus.vocab_size, corpus_arg, layers, dropout)
        for dropout in profile.dropouts
        for layers in ablation_depths(profile)
    ]


def ablation_depths(profile: Profile) -> list[int]:
    """The depths of Levy's ablations: [ablations] layers, a number or a list (Levy et al. ran 2-layer networks)."""
    layers = profile.ablations.get("layers", []) if profile.ablations else []
    return [int(n) for n in (layers if isinstance(layers, list) else [layers])]


# ------------------------------------------------------------------------------------------ the headline LSTM
# One rule names "the LSTM" that the report's sections detail (the Venn diagram, the per-character bars, the brace
# curve, the training-dynamics figure, the onion's large model, the snapshots shipped in full). Karpathy et al. detail
# "our best 3-layer LSTM" (Fig 4 left, Fig 5 right: the deepest of their grid, in its largest budget row). We fix the
# choice by the configuration rather than by a test loss, so every section names the same model and none is picked
# on the test set: among the LSTMs of a corpus,
#   1. the largest budget row (its width, for a model sized to no row),
#   2. the deepest in that row,
#   3. the lowest dropout (analyses see only the dropout chosen on validation, Karpathy et al. sec 3.3, so this
#      matters only before training, where the profile has no validation loss yet),
#   4. the lowest seed.
# analyses.common.headline_id applies it to the models an analysis reads; headline_config to a profile's configs.

HEADLINE_ARCH = "lstm"


def headline_key(budget, size, layers, dropout=0.0, seed=0) -> tuple:
    """Sort key of the headline rule, smallest first (see above); `budget` None or NaN: the model has no row."""
    scale = size if budget is None or (isinstance(budget, float) and math.isnan(budget)) else budget
    return (-float(scale), -int(layers), float(dropout or 0.0), int(seed or 0))


def headline_config(configs: list[TrainConfig], vocab_size: int) -> TrainConfig | None:
    """The profile's headline LSTM on one corpus (the rule above), or None when it trains no LSTM."""
    lstms = [c for c in configs if c.arch == HEADLINE_ARCH]
    if not lstms:
        return None
    return min(
        lstms, key=lambda c: headline_key(budget_of(c.arch, c.size, c.layers, vocab_size), c.size, c.layers,
                                          c.dropout, c.seed)
    )  # fmt: skip


def baseline_orders(profile: Profile, extra: tuple[Iterable[int], Iterable[int]] = ((), ())) -> tuple[list, list]:
    """KenLM and n-NN orders: the profile's, plus `extra` (the orders its analyses read, common.orders_read)."""
    ngram_n = set(profile.baselines.get("ngram_n", [])) | set(extra[0])
    nnn_n = set(profile.baselines.get("nnn_n", [])) | set(extra[1])
    return sorted(ngram_n, reverse=True), sorted(nnn_n)


def nnn_options(profile: Profile, n: int) -> dict:
    """The NNNConfig settings of the profile's n-NN of order n: [baselines] nnn_*, with the hidden-size grid of
    `nnn_hidden_for_n` where it names n (sec 4.3 cross-validates the hidden size; a profile can afford a wider grid
    at the orders it compares with the paper)."""
    base = profile.baselines
    options = {option: base[key] for key, option in _NNN_OPTIONS.items() if key in base}
    grid = base.get(_HIDDEN_FOR_N, {}).get(str(n), base.get("nnn_hidden"))
    if grid is not None:
        options["hidden_grid"] = tuple(grid)
    return options


def plan(
    profile: Profile, corpora_override: list[str] | None = None, extra_orders: tuple = ((), ())
) -> tuple[dict, list[Planned]]:
    """The corpora (loaded) and every model a run of the profile uses: for a profile that ships its models, those
    not shipped yet are left out (`plan_left_out` also names them), or a shipped predecessor stands in for them.

    `extra_orders`: the KenLM and n-NN orders its analyses read besides the profile's own (the caller knows them:
    analyses.common.orders_read)."""
    loaded, models, _ = plan_left_out(profile, corpora_override, extra_orders)
    return loaded, models


def plan_left_out(
    profile: Profile, corpora_override: list[str] | None = None, extra_orders: tuple = ((), ()), retrain: bool = False
) -> tuple[dict, list[Planned], list[Planned]]:
    """`plan`, and the models it leaves out: those of a profile that ships its models (`ships_models`) which the
    repository does not ship yet, which are not already built in the artifacts and for which no shipped model stands
    in (charlm.kinds.recurrent). A run leaves them out rather than train them (hours on a CPU); `python -m
    reports.ship train --profile NAME` trains them with their provenance, `retrain` (--retrain) in the run itself,
    and then nothing is left out."""
    loaded, models = plan_all(profile, corpora_override, extra_orders, stand_ins=not retrain)
    if retrain or not profile.ships_models:
        return loaded, models, []
    out = [
        m for m in models
        if m.kind.ships and m.shipped is None and complete_metrics(m.directory / "metrics.json") is None
    ]  # fmt: skip
    return loaded, [m for m in models if all(m is not o for o in out)], out


def check_networks_served(profile: Profile, models: list[Planned], left_out: list[Planned]) -> None:
    """A UserError when a shipping profile would read no network on some corpus of the run (every one left out): a
    corpus of the user's own, for which the repository ships nothing, gives a report of n-grams alone."""
    have = {m.corpus.name for m in models if m.kind.recurrent}
    bare = sorted({m.corpus.name for m in left_out if m.kind.recurrent} - have)
    if bare:
        raise UserError(
            f"profile {profile.name} ships its networks for {', '.join(sorted(profile.corpora))} and has none for "
            f"{', '.join(repr(b) for b in bare)}, so its report would hold the n-grams alone: `--profile quick` trains "
            f"every section's networks on it here (--plan prices it), `--retrain` trains {profile.name}'s recipe "
            f"(hours on a CPU)"
        )


def left_out_line(profile: Profile, left_out: list[Planned]) -> str:
    """The one line (run log, --plan) naming the models a run of a shipping profile leaves out."""
    from .dropout_search import verdicts

    names = ", ".join(f"{m.corpus.name}/{m.model_id}" for m in left_out)
    searched = {(arg, m) for arg, corpus in {m.corpus_arg: m.corpus for m in left_out}.items()
                for m, v in verdicts(profile, corpus, arg).items() if v.state == "waits"}  # fmt: skip
    maybe = sum((m.corpus_arg, m.model_id) in searched for m in left_out)
    return (
        f"{len(left_out)} model(s) of profile {profile.name} are not shipped yet and are left out (`python -m "
        f"reports.ship train --profile {profile.name}` trains them"
        + (f", {maybe} of them only if their line search of dropout gets to them" if maybe else "")
        + f"; --retrain trains everything): {names}"
    )


def plan_all(
    profile: Profile, corpora_override: list[str] | None = None, extra_orders: tuple = ((), ()), stand_ins: bool = True
) -> tuple[dict, list[Planned]]:
    """`plan` with every model of the profile, shipped or not; every kind plans its own (charlm.kinds). Without
    `stand_ins`, each model is the profile's own configuration (what `reports.ship train` trains)."""
    from charlm.kinds import KINDS

    corpus_args = corpora_override or profile.corpora
    loaded = {arg: corpora.load(arg, split_mode=profile.splits) for arg in corpus_args}
    planning = profile if stand_ins else dataclasses.replace(profile, ships_models=False)
    models = [m for arg, corpus in loaded.items() for k in KINDS for m in k.plan(planning, corpus, arg, extra_orders)]
    return loaded, models


def planned_model_ids(
    profile: Profile, corpora_override: list[str] | None = None, extra_orders: tuple = ((), ())
) -> set[str]:
    """The ids of every model a profile uses (what `python -m analyses.X --profile NAME` reads)."""
    return {p.model_id for p in plan(profile, corpora_override, extra_orders)[1]}


def damage(planned: Planned) -> str | None:
    """None if the model is complete and whole; "not built" when absent; else what is damaged (its kind says)."""
    return planned.kind.damage(planned)
