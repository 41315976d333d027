"""What every analysis shares: loading one (with its contract checked), its cache key, its CLI, figures.

An analysis is one module `analyses/<name>.py` that ends with `ANALYSIS = <its class>()`, a subclass of
analyses.base.Analysis (the contract: name, title, question, claims, needs, settings; compute(ctx) -> Result;
plot(result); summary_table(result); appendix(result); optionally parts/compute_part, paper_table, html). Its
settings' defaults are overridden by the profile's [analysis.<name>] table and `--set key=value`. Its CLI is

    main = analysis_main(__name__)
    if __name__ == "__main__":
        sys.exit(run_cli(main))
"""

from __future__ import annotations

import argparse
import ast
import functools
import hashlib
import importlib
import json
import logging
import sys
from pathlib import Path
from types import ModuleType

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

import corpora  # noqa: E402
from corpora import atomic  # noqa: E402
from corpora.errors import UserError  # noqa: E402

from .base import Analysis, Result  # noqa: E402
from .context import Context, MissingInput, Needs, model_index, one_recipe_per_corpus  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("corpora", "charlm", "probes", "analyses")  # the code that produces numbers
TEXT_COLUMNS = ("char", "text", "sample", "prime", "keywords")  # columns of corpus text, read back as text


def load_analysis(name: str) -> Analysis:
    """The analysis called `name`: analyses.<name>.ANALYSIS (analyses.base.Analysis); one clear line otherwise."""
    if not name.isidentifier():
        raise UserError(f"'{name}' is not an analysis name")
    try:
        module = importlib.import_module(f"analyses.{name}")
    except ModuleNotFoundError as err:
        if err.name == f"analyses.{name}":
            raise UserError(f"unknown analysis '{name}': no module analyses/{name}.py") from None
        raise
    analysis = getattr(module, "ANALYSIS", None)
    if not isinstance(analysis, Analysis):
        raise UserError(f"analysis module analyses.{name} defines no ANALYSIS (an instance of analyses.base.Analysis)")
    return analysis


def as_analysis(analysis: Analysis | ModuleType) -> Analysis:
    """An Analysis, also from its module (tests and older callers pass the module)."""
    if isinstance(analysis, Analysis):
        return analysis
    found = getattr(analysis, "ANALYSIS", None)
    if not isinstance(found, Analysis):
        raise UserError(f"{getattr(analysis, '__name__', analysis)} defines no ANALYSIS (analyses.base.Analysis)")
    return found


def whole(value) -> int | float:
    """A count from the model index as an int, NaN where the index has none (an adopted network's characters
    trained: it was trained elsewhere)."""
    return float("nan") if value is None or pd.isna(value) else int(value)


def module_of(analysis: Analysis) -> ModuleType:
    """The module that defines an analysis (what its cache key hashes)."""
    return sys.modules[type(analysis).__module__]


def analysis_name(module: ModuleType) -> str:
    """The analysis's name, also when it runs as `python -m analyses.<name>` (then its __name__ is "__main__")."""
    spec = getattr(module, "__spec__", None)
    return (spec.name if spec is not None else module.__name__).rsplit(".", 1)[-1]


def chosen_archs(
    ctx: Context, applies_to: tuple[str, ...], lacking: tuple[str, ...], what: str, name: str
) -> list[str]:
    """The `archs` setting of an analysis that reads one part of a model (gates, a memory cell): a list or a
    comma-separated string; an architecture without the part is a MissingInput, an unknown one a UserError."""
    archs = ctx.settings["archs"]
    archs = [a.strip() for a in archs.split(",")] if isinstance(archs, str) else list(archs)
    without = [a for a in archs if a in lacking]
    if without:
        raise MissingInput(
            f"{' and '.join(without)} {'has' if len(without) == 1 else 'have'} {what}: "
            f"{name} applies to {', '.join(applies_to)} (--set archs=lstm,gru)"
        )
    unknown = [a for a in archs if a not in applies_to]
    if unknown or not archs:
        raise UserError(
            f"{name}: unknown architecture(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(applies_to)}"
        )
    return archs


def ordered_models(df: pd.DataFrame, archs: tuple[str, ...]) -> pd.DataFrame:
    """Rows in report order (corpus, then `archs`, wider first) with a readable `model` label ("LSTM 1x128") and a
    `shape` label shared across corpora (a budget row's width differs a little with each corpus's vocabulary)."""
    from charlm.model import ARCH_LABELS

    name = df["arch"].map(ARCH_LABELS).fillna(df["arch"])
    df = df.assign(model=name + " " + df["layers"].astype(str) + "x" + df["size"].astype(str),
                   order=df["arch"].map({a: k for k, a in enumerate(archs)}))  # fmt: skip
    row = df["budget"].fillna(df["size"]).astype(int).astype(str)
    key = df["arch"] + ":" + df["layers"].astype(str) + ":" + row
    widths = df.groupby(key)["size"].transform(lambda s: "/".join(str(v) for v in sorted(s.unique())))
    df["shape"] = name + " " + df["layers"].astype(str) + "x" + widths
    return df.sort_values(["corpus", "order", "size"], ascending=[True, True, False], kind="stable")


# ------------------------------------------------------------------------------------- every configuration, in order
# What the analyses that cross every recurrent configuration with a baseline share: one architecture order, one
# short label, one representative per configuration, one headline model, one row order.


@functools.cache
def arch_order() -> tuple[str, ...]:
    """The report's architecture order: LSTM, GRU, RNN, then Levy's ablations and the rest in ARCH_LABELS's order."""
    from charlm.model import ARCH_LABELS

    first = ("lstm", "gru", "rnn")
    return first + tuple(a for a in ARCH_LABELS if a not in first)


def arch_rank(arch: str) -> int:
    """Where an architecture goes in the report's order (an unknown one last)."""
    order = arch_order()
    return order.index(arch) if arch in order else len(order)


def short_label(row) -> str:
    """A configuration as every table and sentence names it: "LSTM 1x128" (the architecture's label, layers x width)."""
    from charlm.model import ARCH_LABELS

    return f"{ARCH_LABELS.get(row['arch'], row['arch'])} {int(row['layers'])}x{int(row['size'])}"


def lowest_seeds(models: pd.DataFrame) -> pd.DataFrame:
    """One model per configuration: the lowest seed of each group_id (seed 0 in every profile)."""
    return models.sort_values(["group_id", "seed"]).groupby("group_id").head(1)


def headline_id(models: pd.DataFrame) -> str | None:
    """The model_id of the headline LSTM among `models` (one corpus's rows: arch, layers, size, budget, seed, and
    dropout where known), by the one rule of charlm.plan (headline_key): the largest budget row, the deepest, the
    lowest dropout, the lowest seed. Every section that details "the LSTM" asks this function. Without an LSTM the
    same rule picks among the first architecture in report order (arch_rank), so a section still has a model to
    detail; None for no models."""
    from charlm.plan import HEADLINE_ARCH, headline_key

    if models.empty:
        return None
    rank = models["arch"].map(arch_rank)
    pool = (
        models[models["arch"] == HEADLINE_ARCH]
        if (models["arch"] == HEADLINE_ARCH).any()
        else models[rank == rank.min()]
    )
    dropout = pool["dropout"] if "dropout" in pool else pd.Series(0.0, index=pool.index)
    keys = [headline_key(r["budget"], r["size"], r["layers"], dropout[k], r["seed"]) for k, r in pool.iterrows()]
    return pool["model_id"].iloc[min(range(len(keys)), key=keys.__getitem__)]


def report_order(df: pd.DataFrame, *then: str, descending: tuple[str, ...] = ()) -> pd.DataFrame:
    """Rows in the report's model order: corpus, architecture (arch_rank), larger budget row (else width) first, then
    the columns `then` (ascending unless named in `descending`); a stable sort, so ties keep their order."""
    keyed = df.assign(_rank=df["arch"].map(arch_rank), _scale=-df["budget"].fillna(df["size"]))
    keys = ["corpus", "_rank", "_scale", *then]
    ascending = [key not in descending for key in keys]
    return keyed.sort_values(keys, ascending=ascending, kind="stable").drop(columns=["_rank", "_scale"])


def needs(analysis: Analysis | ModuleType) -> Needs:
    return as_analysis(analysis).needs


def settings(analysis: Analysis, profile_settings: dict | None = None, overrides: dict | None = None) -> dict:
    """The analysis's defaults, then the profile's [analysis.<name>] table, then command-line --set values."""
    analysis = as_analysis(analysis)
    defaults = dict(analysis.settings)
    merged = {**defaults, **(profile_settings or {}), **(overrides or {})}
    unknown = sorted(set(merged) - set(defaults))
    if unknown:
        known = ", ".join(sorted(defaults)) or "none"
        raise UserError(f"analysis '{analysis.name}' has no setting {', '.join(unknown)} (its settings: {known})")
    return merged


# ------------------------------------------------------------------------------------- cache key


def _module_file(name: str) -> Path | None:
    parts = name.split(".")
    if parts[0] not in PACKAGES:
        return None
    base = REPO.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports(path: Path) -> set[str]:
    """Modules of our packages that a file imports (absolute and relative imports)."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.rsplit(".", 1)[0]
    else:
        package = package.rsplit(".", 1)[0] if "." in package else package
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            found.add(prefix)
            found.update(f"{prefix}.{alias.name}" for alias in node.names)  # `from . import predictions`
    return {name for name in found if name.split(".")[0] in PACKAGES}


def source_files(analysis: Analysis | ModuleType) -> list[Path]:
    """The analysis's module and every module of the suite it imports, transitively (package __init__s too)."""
    module = analysis if isinstance(analysis, ModuleType) else module_of(analysis)
    todo, seen = [Path(module.__file__).resolve()], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            parts = name.split(".")
            for k in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
                found = _module_file(".".join(parts[:k]))
                if found is not None and found not in seen:
                    todo.append(found)
    return sorted(seen)


def source_digest(analysis: Analysis | ModuleType) -> str:
    """One hash of every source file whose code can change this analysis's numbers (computed once per process)."""
    module = analysis if isinstance(analysis, ModuleType) else module_of(analysis)
    return _digest(module)


@functools.cache  # the files do not change while a report runs; several analyses key many caches by it
def _digest(module: ModuleType) -> str:
    h = hashlib.sha256()
    for path in source_files(module):
        h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


# ------------------------------------------------------------------------------------- output


def save_table(df: pd.DataFrame, path: Path) -> Path:
    atomic.write_text(path, df.to_csv(index=False))
    return path


def read_table(path: Path) -> pd.DataFrame:
    """A table written by save_table; ids, hashes and text stay strings (a hash like "1e5432" would parse as a float,
    the character "7" or a sample of digits as a number). A table with no columns (written empty) reads back empty."""
    if not path.read_text(encoding="utf-8").strip():
        return pd.DataFrame()
    header = pd.read_csv(path, nrows=0).columns
    text = [
        c for c in header
        if c.endswith("_id") or c in ("digest", "recipe", "variant", "group", "hidden_grid") + TEXT_COLUMNS
    ]  # fmt: skip
    return pd.read_csv(path, dtype={c: str for c in text})


def save_figure(fig, path: Path) -> Path:
    """PNG at print resolution, written atomically."""
    with atomic.atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=150, bbox_inches="tight", format=path.suffix.lstrip("."))
    plt.close(fig)
    return path


# Byte labels (charlm.score.byte_label) draw control pictures; DejaVu lacks some (the carriage return's),
# Symbola has them all (`make sysdeps` installs it). Glyphs missing from the first font come from the next.
SYMBOL_FONT = "Symbola"


@functools.cache
def _symbol_font() -> list[str]:
    """[SYMBOL_FONT] when the machine has it (added to matplotlib's font list if its cache predates it), else []."""
    from matplotlib import font_manager

    def known() -> bool:
        return any(f.name == SYMBOL_FONT for f in font_manager.fontManager.ttflist)

    if not known():
        for path in font_manager.findSystemFonts():
            if SYMBOL_FONT.lower() in Path(path).name.lower():
                font_manager.fontManager.addfont(path)
    return [SYMBOL_FONT] if known() else []


def style() -> None:
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)
    plt.rcParams["font.family"] = ["DejaVu Sans", *_symbol_font(), "sans-serif"]
    # Symbola has no bold face: matplotlib says so once per bold title ("Failed to find font weight bold"),
    # though DejaVu Sans Bold draws every letter and Symbola only the control pictures
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)


# ------------------------------------------------------------------------------------- the CLI


def _parse_setting(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise UserError(f"--set takes KEY=VALUE, got '{text}'")
    key, value = text.split("=", 1)
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


def analysis_parser(analysis: Analysis) -> argparse.ArgumentParser:
    """The common CLI of an analysis: which corpora and models, settings, where the table and figure go."""
    module = module_of(analysis)
    doc = (module.__doc__ or analysis.title).strip().split("\n\n")[0]
    defaults = analysis.settings
    epilog = "settings (--set KEY=VALUE): " + ", ".join(f"{k}={v!r}" for k, v in defaults.items()) if defaults else None
    parser = argparse.ArgumentParser(prog=f"python -m analyses.{analysis.name}", description=doc, epilog=epilog)
    parser.add_argument(
        "--corpus", action="append", default=None,
        help="corpus to analyse: a registered name or a file path (repeatable; default: every corpus with models)",
    )  # fmt: skip
    parser.add_argument(
        "--splits", default=None, choices=corpora.SPLIT_MODES,
        help="with --corpus: the split mode the models were trained on (default: any)",
    )  # fmt: skip
    parser.add_argument(
        "--profile", default=None,
        help="read exactly the models this report profile trains (e.g. quick); needed when the artifacts hold "
        "models of several training recipes",
    )  # fmt: skip
    parser.add_argument(
        "--artifacts", type=Path, default=None, help="artifacts root (default $CHARLM_ARTIFACTS or ./artifacts)"
    )
    parser.add_argument(
        "--set", dest="settings", action="append", default=[], metavar="KEY=VALUE",
        help="an analysis setting (repeatable; the list is below)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="write the table to this CSV (default: print it)")
    parser.add_argument("--figure", type=Path, default=None, help="write the figure to this PNG/SVG/PDF")
    return parser


def index_for_args(args) -> pd.DataFrame:
    """The models a standalone analysis may read: the chosen corpora (by their bytes), the profile's models."""
    index = model_index(args.artifacts)
    if args.corpus:
        keys = set()
        for name in args.corpus:
            modes = [args.splits] if args.splits else list(corpora.SPLIT_MODES)
            corpus = corpora.load(name)
            keys.update(corpus.with_split_mode(m).key for m in modes)
        index = index[index["corpus_key"].isin(keys)]
        if index.empty:
            names = " ".join(f"--corpus {name}" for name in args.corpus)
            raise MissingInput(
                f"no models trained on {', '.join(repr(n) for n in args.corpus)}: `python -m reports {names}` trains "
                f"every section's models on it (--plan prices it first), `python -m charlm.train --corpus "
                f"{args.corpus[0]} --arch lstm` one LSTM"
            )
    elif args.splits:
        index = index[index["corpus_splits"] == args.splits]
    if args.profile:
        from charlm.plan import load_profile, planned_model_ids  # the one list of a profile's models

        profile = load_profile(args.profile)
        ids = planned_model_ids(profile, args.corpus, orders_read(profile.analyses))
        index = index[index["model_id"].isin(ids)]
        if missing := len(ids) - len(set(index["model_id"])):
            from charlm.paths import artifacts_root

            print(f"note: {missing} of profile {profile.name}'s {len(ids)} models are not built under "
                  f"{args.artifacts or artifacts_root()}, so this reads the {len(ids) - missing} that are: `python -m "
                  f"reports --profile {args.profile}` builds (or installs) them", file=sys.stderr)  # fmt: skip
    one_recipe_per_corpus(index, "choose with --profile, or --corpus and --splits")
    return index.reset_index(drop=True)


def orders_read(names: list[str]) -> tuple[set[int], set[int]]:
    """The KenLM and n-NN orders the named analyses read (their needs), which a profile builds besides its own."""
    ngram_n, nnn_n = set(), set()
    for name in names:
        need = load_analysis(name).needs
        ngram_n.update(need.ngram_n)
        nnn_n.update(need.nnn_n)
    return ngram_n, nnn_n


def run_module(module: ModuleType, ctx: Context) -> pd.DataFrame:
    """The tidy table of an analysis given by its module (tests)."""
    return run_analysis(as_analysis(module), ctx).table


def run_analysis(analysis: Analysis, ctx: Context) -> Result:
    """compute(ctx), after checking the corpora the analysis is about are there."""
    wanted = analysis.needs.corpora
    if wanted:
        present = {str(c) for c in ctx.index["corpus"].unique()}
        if not present & set(wanted):
            raise MissingInput(
                f"{analysis.name} needs models trained on the {' or '.join(wanted)} corpus: "
                f"run `python -m reports --profile quick` (or charlm.train --corpus {wanted[0]})"
            )
    return analysis.compute(ctx)


def analysis_main(module_name: str):
    """The `main(argv)` of an analysis module: index -> Context -> compute -> tables, figure and findings."""

    def main(argv=None) -> int:
        module = sys.modules[module_name]
        analysis = as_analysis(module)
        parser = analysis_parser(analysis)
        if hasattr(module, "add_arguments"):
            module.add_arguments(parser)
        args = parser.parse_args(argv)
        if hasattr(module, "prepare"):
            module.prepare(args)  # e.g. build missing baselines first
        overrides = dict(_parse_setting(s) for s in args.settings)
        analysis_settings = settings(analysis, None, overrides)
        ctx = Context(index_for_args(args), analysis_settings, repair=False, progress=True, artifacts=args.artifacts)
        emit(run_analysis(analysis, ctx), analysis, args)
        return 0

    return main


def emit(result: Result, analysis: Analysis, args) -> None:
    from .prose import sentence

    if args.out:
        save_table(result.table, args.out)
        print(f"wrote {args.out}")
    else:
        with pd.option_context("display.max_rows", 200, "display.width", 160):
            print(result.table.to_string(index=False))
    if args.figure:
        figure = analysis.plot(result)
        if figure is None:
            print("this analysis draws no figure")
        else:
            save_figure(figure, args.figure)
            print(f"wrote {args.figure}")
    for finding in result.findings:
        print(sentence(finding))
