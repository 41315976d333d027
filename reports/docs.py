"""`python -m reports.docs`: the tables of our numbers in docs/, from a finished report run's data.

    python -m reports.docs [--profile reference] [--build-dir reports/build] [--docs-dir docs]   # `make docs`

Reads what `python -m reports --profile P` left in <build-dir>/<P>/data/ and writes three files:

    docs/results.md        the verdict lines (one per claim of the papers and corpus: the verdict and the sentence,
                           from *.findings.json, written by analyses.prose), Fig 1 left beside ours
                           (cross_entropy.csv and cross_entropy.comparisons.csv), Table 2 (ngram.csv), Levy et al.'s
                           Table 1 beside our ablations (ablations.csv) and the run's cost (timings.json)
    docs/stopping-rule.md  what the papers' stopping rule moved: each model it retired beside its replacement, from
                           models/<P>/retired.json (reports.docs_retired; written by `ship pack`, not by the run)
    docs/profile-table.md  one row per profile with a run in <build-dir> or a record kept with the suite
                           (charlm/profiles/<profile>.timings.json): date, git, wall time, the estimate printed at the
                           start, peak memory, artifacts on disk

Nothing here computes a result: every number of ours is read from the run's files, and the papers' numbers come from
the analyses that compare with them (analyses.cross_entropy._PAPER, analyses.ngram._PAPER,
analyses.levy.paper_table). Every table is headed by the run it comes from. A part the run did not write (an
older run, a profile without that analysis) is skipped with one line naming the run that would make it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

import pandas as pd

from charlm.shipped import RETIRED, SHIPPED_ROOT
from corpora import atomic
from corpora.errors import run_cli

from .docs_cost import cost_section, profile_table, update_readme
from .docs_retired import stopping_rule_doc
from .docs_run import (
    BUILD_ROOT,
    DOCS_DIR,
    PROFILES_DIR,
    REPO,
    Run,
    _label,
    _nats,
    _read_csv,
    _signed,
    load_run,
    table,
)

FIG1_ORDER = ("lstm", "rnn", "gru-paper", "gru")  # Fig 1's columns, as analyses.cross_entropy orders them
COMPARISONS = {
    "within_fig1": "cells within {threshold} nats of Fig 1",
    "rnn_behind": "RNN behind both gated networks",
    "lstm_vs_gru": "LSTM and GRU within {threshold} nats",
    "2_vs_1": "2 layers beat 1",
    "3_vs_2": "3 layers beat 2",
}


def _paper_module(name: str):
    """analyses.<name>, where the papers' numbers live; (None, why) when it does not import (say, mid-edit)."""
    import importlib

    try:
        return importlib.import_module(f"analyses.{name}"), ""
    except Exception as err:  # noqa: BLE001 - the table is still written, without the paper's column
        why = f"*The paper's numbers are left out: `analyses.{name}` did not import ({type(err).__name__}: {err}).*"
        return None, why


# ------------------------------------------------------------------------------------------ verdicts


def _analysis_order(profile: str, names: list[str]) -> list[str]:
    """The profile's order of its analyses (its TOML), then any other name alphabetically."""
    try:
        order = tomllib.loads((PROFILES_DIR / f"{profile}.toml").read_text()).get("analyses", [])
    except (OSError, tomllib.TOMLDecodeError):
        order = []
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


def _claims(name: str) -> dict:
    """{claim id: Claim} of an analysis; {} when it cannot be loaded (the verdict line then names the id alone)."""
    try:
        from analyses.common import load_analysis

        return {c.id: c for c in load_analysis(name).claims}
    except Exception:  # noqa: BLE001 - a docs table must not fail on one analysis that does not import
        return {}


def verdicts_section(run: Run) -> list[str]:
    lines = ["## Verdicts: the papers' claims", "", run.generated(), ""]
    try:
        from analyses.base import Finding
        from analyses.prose import VERDICT_LABELS, sentence
    except Exception as err:  # noqa: BLE001 - the other tables are still written
        return lines + [f"*No verdicts: analyses.prose did not import ({type(err).__name__}: {err}).*", ""]
    files = {p.name[: -len(".findings.json")]: p for p in run.data_dir.glob("*.findings.json")}
    if not files:
        return lines + [
            f"*No verdicts: this run has no `*.findings.json` in `{run.data_dir}` (a run from before the analysis "
            f"contract, analyses/base.py); {run.make()} with this checkout writes them.*",
            "",
        ]
    rows, others, captions, unreadable = [], [], [], []
    for name in _analysis_order(run.profile, list(files)):
        try:
            findings = [Finding(**d) for d in json.loads(files[name].read_text())]
        except (OSError, ValueError, TypeError):
            unreadable.append(name)
            continue
        claims = _claims(name) if any(f.claim for f in findings) else {}
        seen = set()
        for f in findings:
            if f.claim is None:
                (others if f.values else captions).append((name, f))
                continue
            if (f.claim, f.corpus) in seen:
                continue  # the first finding of a claim is its verdict (analyses.prose.verdict_lines)
            seen.add((f.claim, f.corpus))
            claim = claims.get(f.claim)
            what = f"{claim.text} ({claim.source})" if claim else f.claim
            rows.append([f"`{name}`", what, f.corpus or "all", VERDICT_LABELS.get(f.verdict, f.verdict), sentence(f)])
    if rows:
        lines += table(["analysis", "claim", "corpus", "verdict", "ours (the report's sentence)"], rows)
    else:
        lines += ["*No finding of this run tests a claim of the papers.*", ""]
    if others:
        lines += ["Other findings (no claim of the papers tested):", ""]
        for name, f in others:
            text = sentence(f)
            where = f" ({f.corpus})" if f.corpus and not text.startswith(f.corpus) else ""
            lines.append(f"- `{name}`{where}: {text}")
        lines.append("")
    if captions:
        names = sorted({name for name, _ in captions})
        lines += [
            f"{len(names)} analyses state what they found as their caption only "
            f"({', '.join(f'`{n}`' for n in names)}): read them in the report's sections.",
            "",
        ]
    if unreadable:
        lines += [f"Unreadable findings (another format), skipped: {', '.join(unreadable)}.", ""]
    return lines


# ------------------------------------------------------------------------------------------ Fig 1 left


def fig1_paper(cross_entropy) -> pd.DataFrame:
    """Fig 1 left as corpus, arch, layers, budget, paper_ce_nats: analyses.cross_entropy's `_PAPER`, not retyped."""
    if cross_entropy is None:
        return pd.DataFrame(columns=["corpus", "arch", "layers", "budget", "paper_ce_nats"])
    if hasattr(cross_entropy, "paper_table"):
        return cross_entropy.paper_table()
    rows = []
    for corpus, grid in cross_entropy._PAPER.items():  # columns: (LSTM, RNN, GRU) x (1, 2, 3 layers)
        for budget, values in grid.items():
            for k, value in enumerate(values):
                if value is not None:
                    arch, layers = ("lstm", "rnn", "gru")[k // 3], k % 3 + 1
                    rows.append({"corpus": corpus, "arch": arch, "layers": layers, "budget": budget,
                                 "paper_ce_nats": value})  # fmt: skip
    return pd.DataFrame(rows)


def fig1_cells(df: pd.DataFrame, cross_entropy=None) -> pd.DataFrame:
    """One row per configuration (seeds of one group averaged) beside Fig 1's number for its cell."""
    keys = ["corpus", "arch", "layers", "budget"] + (["group_id"] if "group_id" in df.columns else ["size"])
    agg = {"ce_nats": ("ce_nats", "mean"), "ce_std": ("ce_std", "mean"), "seeds": ("ce_nats", "size")}
    if "size" in df.columns and "size" not in keys:
        agg["size"] = ("size", "first")
    ours = df.groupby(keys, as_index=False, dropna=False).agg(**agg)
    paper_arch = getattr(cross_entropy, "PAPER_ARCH", {"gru-paper": "gru"})
    ours["paper_arch"] = ours["arch"].replace(paper_arch)
    paper = fig1_paper(cross_entropy).rename(columns={"arch": "paper_arch"})
    merged = ours.merge(paper, on=["corpus", "paper_arch", "layers", "budget"], how="left")
    merged["paper_ce_nats"] = pd.to_numeric(merged["paper_ce_nats"])
    merged["diff_nats"] = (merged["ce_nats"].round(3) - merged["paper_ce_nats"]).round(3)  # at Fig 1's precision
    rank = {a: k for k, a in enumerate(FIG1_ORDER)}
    merged["_rank"] = merged["arch"].map(lambda a: rank.get(a, len(rank)))
    return merged.sort_values(["corpus", "budget", "_rank", "layers"], na_position="last", ignore_index=True)


def fig1_section(run: Run) -> list[str]:
    lines = ["## Fig 1 left: test cross-entropy beside Karpathy et al.'s", "", run.generated(), ""]
    df = _read_csv(run.path("cross_entropy.csv"))
    if df is None:
        return lines + run.missing("cross_entropy.csv", "Fig 1 grid")
    needed = {"corpus", "arch", "layers", "budget", "ce_nats", "ce_std"}
    if not needed <= set(df.columns):
        return lines + [f"*Skipped: `cross_entropy.csv` lacks {', '.join(sorted(needed - set(df.columns)))}.*", ""]
    if df.empty:
        return lines + ["*`cross_entropy.csv` holds no model.*", ""]
    module, why = _paper_module("cross_entropy")
    cells = fig1_cells(df, module)
    lines += ([why, ""] if why else []) + [
        "Nats per character on the test split; ours +- the bootstrap std (100 resamples of test positions), seeds of "
        "one configuration averaged; Fig 1's number for the same cell (— where it has none) and ours - Fig 1 at its "
        "3 decimals. Every model of a budget row has about the parameters of a 1-layer LSTM of that width.",
        "",
    ]
    rows = []
    for _, c in cells.iterrows():
        budget = "—" if pd.isna(c["budget"]) else f"{int(c['budget'])}"
        width = f"{int(c['size'])}" if "size" in c and not pd.isna(c["size"]) else "—"
        rows.append([c["corpus"], budget, _label(c["arch"]), int(c["layers"]), width, int(c["seeds"]),
                     f"{c['ce_nats']:.3f} +- {c['ce_std']:.3f}", _nats(c["paper_ce_nats"]),
                     _signed(c["diff_nats"])])  # fmt: skip
    lines += table(["corpus", "budget row", "type", "layers", "width", "seeds", "ours", "Fig 1", "ours - Fig 1"], rows)
    comp = _read_csv(run.path("cross_entropy.comparisons.csv"))
    if comp is None:
        lines += run.missing("cross_entropy.comparisons.csv", "count of sec 4.1's findings")
        return lines
    rows = []
    for _, c in comp.iterrows():
        threshold = c.get("threshold")
        name = COMPARISONS.get(c["comparison"], c["comparison"]).format(
            threshold="—" if threshold is None or pd.isna(threshold) else f"{threshold:g}"
        )
        paper = "—" if pd.isna(c.get("paper_holds")) else f"{int(c['paper_holds'])} of {int(c['paper_of'])}"
        rows.append([c["corpus"], name, f"{int(c['holds'])} of {int(c['of'])}", paper])
    lines += ["Sec 4.1's findings counted cell by cell (`cross_entropy.comparisons.csv`), ours and Fig 1's on the same "
              "cells:", ""]  # fmt: skip
    lines += table(["corpus", "comparison", "ours", "Fig 1"], rows)
    return lines


# ------------------------------------------------------------------------------------------ Table 2


def table2_section(run: Run) -> list[str]:
    lines = ["## Table 2: n-grams and n-NNs beside Karpathy et al.'s", "", run.generated(), ""]
    df = _read_csv(run.path("ngram.csv"))
    if df is None:
        return lines + run.missing("ngram.csv", "Table 2")
    if not {"corpus", "family", "n", "ce_nats"} <= set(df.columns) or df.empty:
        return lines + ["*Skipped: `ngram.csv` holds no baseline with corpus, family, n and ce_nats.*", ""]
    ngram, why = _paper_module("ngram")
    paper = ngram.paper_table() if ngram else pd.DataFrame(columns=["corpus", "family", "n", "paper_ce_nats"])
    lines += [why, ""] if why else []
    lines += [
        "Test cross-entropy in nats per character, ours / the paper's (KenLM: an (n+1)-gram seeing n characters; "
        "n-NN: a one-hidden-layer net on the last n characters); the last column is the mean of ours - the paper's "
        "over the orders both have.",
        "",
    ]
    ns = sorted(set(df["n"].astype(int)) | set(paper["n"].astype(int)))
    family_label = {"ngram": "KenLM n-gram", "nnn": "n-NN"}
    rows = []
    for (corpus, family), sub in df.groupby(["corpus", "family"], sort=True):
        ours = {int(r["n"]): r["ce_nats"] for _, r in sub.iterrows()}
        theirs = {int(r["n"]): r["paper_ce_nats"]
                  for _, r in paper[(paper["corpus"] == corpus) & (paper["family"] == family)].iterrows()}  # fmt: skip
        shared = [n for n in ours if n in theirs]
        mean = sum(ours[n] - theirs[n] for n in shared) / len(shared) if shared else None
        cells = [f"{_nats(ours.get(n))} / {_nats(theirs.get(n))}" if n in ours or n in theirs else "" for n in ns]
        rows.append([corpus, family_label.get(family, family), *cells, _signed(mean)])
    lines += table(["corpus", "model", *[f"n={n}" if k == 0 else str(n) for k, n in enumerate(ns)], "mean diff"], rows)
    notes = []
    if "splits" in df.columns:
        splits = df.groupby("corpus")["splits"].agg(lambda s: "/".join(sorted(set(s.dropna()))))
        notes.append("Splits: " + "; ".join(f"{c} {s}" for c, s in splits.items()) + ".")
    if "hidden" in df.columns:
        nnn = df[(df["family"] == "nnn") & df["hidden"].notna()].sort_values(["corpus", "n"])
        grid = nnn["hidden_grid"] if "hidden_grid" in nnn.columns else pd.Series("", index=nnn.index)
        chosen = [f"{int(r['hidden'])} of {g} at {r['corpus']} n={int(r['n'])}"
                  for (_, r), g in zip(nnn.iterrows(), grid) if isinstance(g, str) and "/" in g]  # fmt: skip
        fixed = sorted(
            {int(r["hidden"]) for (_, r), g in zip(nnn.iterrows(), grid) if not (isinstance(g, str) and "/" in g)}
        )
        if chosen or fixed:
            parts = (["validation chose " + ", ".join(chosen)] if chosen else []) + (
                [f"hidden {', '.join(map(str, fixed))} {'elsewhere' if chosen else 'at every order'}"] if fixed else []
            )
            notes.append("n-NN hidden sizes: " + "; ".join(parts) + ".")
    return lines + ([" ".join(notes), ""] if notes else [])


# ------------------------------------------------------------------------------------------ Levy et al.


def levy_section(run: Run) -> list[str]:
    lines = ["## Levy et al.'s ablations (Table 1) beside ours", "", run.generated(), ""]
    df = _read_csv(run.path("ablations.csv"))
    if df is None:
        return lines + run.missing("ablations.csv", "ablations table")
    if not {"corpus", "model", "ce_nats"} <= set(df.columns) or df.empty:
        return lines + ["*Skipped: `ablations.csv` holds no model with corpus, model and ce_nats.*", ""]
    table1, why = _paper_module("levy")
    paper = (table1.paper_table() if table1
             else pd.DataFrame(columns=["configuration", "model", "gap_in_lstm_std"]))  # fmt: skip
    lines += [why, ""] if why else []
    configs = list(dict.fromkeys(paper["configuration"]))
    levy = {(r["configuration"], r["model"]): r["gap_in_lstm_std"] for _, r in paper.iterrows()}
    lines += [
        "Ours: test cross-entropy in nats per character (the LSTM +- its seed-to-seed std), each ablation's gap to "
        "the LSTM in nats and in units of that std. Levy et al.: PTB word-level perplexity, the same gap in units of "
        "their LSTM's std over seeds (computed from their Table 1 by analyses/levy.py). Compare orderings and "
        "gaps in std units, not values.",
        "",
    ]
    rows = []
    for _, r in df.iterrows():
        shape = f"{int(r['layers'])} x {int(r['size'])}" if {"layers", "size"} <= set(df.columns) else "—"
        is_lstm = r.get("arch") == "lstm" or r["model"] == "LSTM"
        seeds = int(r["seeds"]) if "seeds" in df.columns and not pd.isna(r["seeds"]) else "—"
        ours = f"{r['ce_nats']:.3f}"
        if is_lstm and "seed_std" in df.columns and not pd.isna(r["seed_std"]):
            ours += f" +- {r['seed_std']:.3f}"
        gap = "" if is_lstm else _signed(r.get("gap_nats"))
        gap_std = "" if is_lstm else _signed(r.get("gap_in_lstm_std"), 1)
        theirs = ["" if is_lstm else _signed(levy.get((c, r["model"])), 1) for c in configs]
        rows.append([r["corpus"], shape, r["model"], seeds, ours, gap, gap_std, *theirs])
    header = ["corpus", "layers x width", "model", "seeds", "ours (nats/char)", "gap (nats)", "gap (LSTM std)"]
    return lines + table(header + [f"Levy {c}: gap (std)" for c in configs], rows)


def min_rnn_section(run: Run) -> list[str]:
    """Issue 39: minGRU and minLSTM beside the LSTM of their depth and budget row (analyses/ablations_min.py)."""
    lines = ["## minGRU and minLSTM beside the LSTM of their depth", "", run.generated(), ""]
    name = "ablations.input_only.csv"
    df = _read_csv(run.path(name))
    if df is None:
        return lines + run.missing(name, "minimal RNNs' table")
    if df.empty:
        return lines + ["*This run has no minGRU or minLSTM.*", ""]
    lines += [
        "Feng et al.'s (2024) minGRU and minLSTM read the input alone in every gate and in the content, like the gates "
        "of Levy's - S-RNN - HIDDEN. Ours: test cross-entropy in nats per character beside the LSTM of the same depth "
        "and budget row (+- its seed-to-seed std where it has 2 or more seeds), the gap in nats and in that std, and "
        "the gap of - S-RNN - HIDDEN at that depth (the LSTM's width, fewer parameters).",
        "",
    ]
    rows = []
    for _, r in df.iterrows():
        lstm = "—"
        if not pd.isna(r.get("lstm_ce")):
            std = "" if pd.isna(r.get("lstm_std")) else f" +- {r['lstm_std']:.3f}"
            seeds = f"{int(r['lstm_seeds'])} seed" + ("s" if int(r["lstm_seeds"]) > 1 else "")
            lstm = f"{r['lstm_ce']:.3f}{std} ({int(r['layers'])} x {int(r['lstm_size'])}, {seeds})"
        rows.append([r["corpus"], r["model"], f"{int(r['layers'])} x {int(r['size'])}", f"{r['ce_nats']:.3f}", lstm,
                     _signed(r.get("gap_nats")), _signed(r.get("gap_in_lstm_std"), 1),
                     _signed(r.get("hidden_gap_nats"))])  # fmt: skip
    header = ["corpus", "model", "layers x width", "ours (nats/char)", "LSTM of its depth and row", "gap (nats)",
              "gap (LSTM std)", "- S-RNN - HIDDEN's gap (nats)"]  # fmt: skip
    return lines + table(header, rows)


# ------------------------------------------------------------------------------------------ writing


def results(run: Run) -> list[str]:
    lines = [
        "# Our numbers, from the last report run",
        "",
        f"Written by `python -m reports.docs --profile {run.profile}` (`make docs PROFILE={run.profile}`) from "
        f"`{run.data_dir}`; do not edit by hand. What the numbers mean, and where we deviate from the papers: "
        "[deviations.md](deviations.md), [shipped-models.md](shipped-models.md).",
        "",
    ]
    for section in (verdicts_section, fig1_section, table2_section, levy_section, min_rnn_section, cost_section):
        lines += section(run)
    return lines


def write_docs(
    build_dir: Path, profile: str, docs_dir: Path = DOCS_DIR, records_dir: Path = PROFILES_DIR,
    readme: Path | None = None, models_dir: Path | None = None,
) -> list[Path]:  # fmt: skip
    """Write docs/results.md (this profile's run), docs/stopping-rule.md (the ledger of retired models in
    `models_dir`, default the repository's models/), docs/profile-table.md (every run and record) and the README's
    table of profiles (the records); returns them."""
    run = load_run(build_dir, profile)
    docs_dir = Path(docs_dir)
    ledger = Path(models_dir or SHIPPED_ROOT) / profile / RETIRED
    written = [
        atomic.write_text(docs_dir / "results.md", "\n".join(results(run)).rstrip() + "\n"),
        atomic.write_text(docs_dir / "stopping-rule.md", "\n".join(stopping_rule_doc(profile, ledger)).rstrip() + "\n"),
        atomic.write_text(
            docs_dir / "profile-table.md", "\n".join(profile_table(build_dir, records_dir)).rstrip() + "\n"
        ),
    ]
    if readme is not None:
        written.append(update_readme(readme, records_dir))
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reports.docs", description=__doc__.split("\n")[0].split(": ", 1)[1]
    )
    parser.add_argument(
        "--profile", default="reference", help="the profile whose last run to read (default %(default)s)"
    )
    parser.add_argument(
        "--build-dir", type=Path, default=BUILD_ROOT, help="where the reports were written (default %(default)s)"
    )
    parser.add_argument(
        "--docs-dir", type=Path, default=DOCS_DIR, help="where to write (default: the repository's docs/)"
    )
    args = parser.parse_args(argv)
    readme = REPO / "README.md" if args.docs_dir == DOCS_DIR else None  # the repository's docs: its README too
    for path in write_docs(args.build_dir, args.profile, args.docs_dir, readme=readme):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
