"""What every analysis shares: the index of trained models, Predictions loading, figure saving, CLI plumbing."""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from charlm import predictions  # noqa: E402
from charlm.paths import artifacts_root, complete_metrics, predictions_path  # noqa: E402
from corpora import REGISTRY, atomic  # noqa: E402

INDEX_COLUMNS = [
    "corpus",
    "model_id",
    "family",
    "arch",
    "layers",
    "size",
    "seed",
    "n",
    "params",
    "chars_trained",
    "seconds",
    "dir",
]


def _row(metrics: dict, directory: Path) -> dict:
    """One index row from a metrics.json, for neural nets (charlm.train), n-grams and n-NNs alike."""
    tc = metrics.get("train_config") or {}
    config = metrics.get("config") or {}
    family = "neural" if tc else metrics.get("kind", directory.name.split("-")[0])
    best = next((g for g in metrics.get("grid", []) if g.get("hidden") == metrics.get("best_hidden")), {})
    return {
        "corpus": metrics.get("corpus") or directory.parent.name,
        "model_id": metrics.get("model_id", directory.name),
        "family": family,
        "arch": tc.get("arch", family),
        "layers": tc.get("layers"),
        "size": tc.get("size", metrics.get("best_hidden")),
        "seed": tc.get("seed", config.get("seed")),
        "n": metrics.get("n", config.get("n")),
        "params": metrics.get("params", best.get("params")),
        "chars_trained": metrics.get("chars_trained", best.get("chars_trained")),
        "seconds": metrics.get("seconds", metrics.get("build_seconds")),
        "dir": str(directory),
    }


def model_index(root: Path | None = None, corpus: str | None = None) -> pd.DataFrame:
    """Every completed model under the artifacts root (metrics.json with "complete": true)."""
    root = Path(root) if root is not None else artifacts_root()
    pattern = f"{corpus}/*/metrics.json" if corpus else "*/*/metrics.json"
    rows = []
    for path in sorted(root.glob(pattern)):
        metrics = complete_metrics(path)
        if metrics is not None:
            rows.append(_row(metrics, path.parent))
    return pd.DataFrame(rows, columns=INDEX_COLUMNS)


def load_predictions(row, split: str = "test") -> predictions.Predictions:
    return predictions.load(predictions_path(Path(row["dir"]), split))


def save_table(df: pd.DataFrame, path: Path) -> Path:
    atomic.write_text(path, df.to_csv(index=False))
    return path


def save_figure(fig, path: Path) -> Path:
    """PNG at print resolution, written atomically."""
    with atomic.atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=150, bbox_inches="tight", format=path.suffix.lstrip("."))
    plt.close(fig)
    return path


def style() -> None:
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)


def analysis_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The common CLI of an analysis: which corpus, where artifacts are, where the table and figure go."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--corpus",
        action="append",
        default=None,
        help="corpus to analyse (repeatable; default: every corpus with artifacts)",
    )
    parser.add_argument(
        "--artifacts", type=Path, default=None, help="artifacts root (default $CHARLM_ARTIFACTS or ./artifacts)"
    )
    parser.add_argument("--split", default="test", help="split whose predictions are read (default %(default)s)")
    parser.add_argument("--out", type=Path, default=None, help="write the table to this CSV (default: print it)")
    parser.add_argument("--figure", type=Path, default=None, help="write the figure to this PNG/SVG/PDF")
    return parser


def index_for_args(args) -> pd.DataFrame:
    # Artifacts live under the corpus's name: the registry name, or the stem of a corpus file.
    names = [c if c in REGISTRY else Path(c).stem for c in args.corpus] if args.corpus else [None]
    frames = [model_index(args.artifacts, c) for c in names]
    return pd.concat(frames, ignore_index=True)


def emit(df: pd.DataFrame, fig_fn, args) -> None:
    if args.out:
        save_table(df, args.out)
        print(f"wrote {args.out}")
    else:
        with pd.option_context("display.max_rows", 200, "display.width", 160):
            print(df.to_string(index=False))
    if args.figure:
        save_figure(fig_fn(df), args.figure)
        print(f"wrote {args.figure}")
