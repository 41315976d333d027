"""Which dropouts of a configuration are tried, when a [[grid]] table searches them by line (`dropout_search = "line"`).

Karpathy et al. (sec 3.3) "cross-validate the amount of dropout for each model individually". A grid trains every
value; a line search trains them in increasing order and tries the next value only while each value tried beat every
lower one on validation, so a configuration that dropout does not help costs two trainings (0 and the first value
above it) instead of one per value. The choice is then the grid's wherever validation loss is unimodal in the dropout,
as it was in every cell of Fig 1's 128 row that the shipped profile trained at all three values before the search was
a line (docs/deviations.md; the dropout table of the cross_entropy section shows what each cell tried).

`line_search` is the rule, on numbers; `verdicts` applies it to a profile's planned models from the validation losses
their metrics hold (built here, or shipped). A model that is trained already is always kept: it was tried. Below the
analyses, which read only what was trained (analyses.dropout_choice); read by the plan of a profile that ships its
models (charlm.kinds.recurrent) and by `reports.ship train`, which trains the models one after another.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .paths import complete_metrics, model_dir
from .shipped import PENDING, shipped_folder


@dataclass(frozen=True)
class Verdict:
    """Why a model of a searched line is not to be trained now: "untried" (a lower dropout did not beat the ones
    below it: it never will be) or "waits" (the validation loss of `on`, a lower dropout, is not known yet)."""

    state: str  # "untried" or "waits"
    on: str  # the model id the verdict rests on
    why: str  # one line for logs and tables


def line_search(line: list[tuple[str, float, float | None, bool]]) -> dict[str, Verdict]:
    """{model id: Verdict} for the members of one line, (model id, dropout, best validation loss or None, trained)
    in increasing dropout, that are not to be trained now. The first two values are always tried (0 and the first
    above it); value k (k >= 2) only once every value j in 1..k-1 beat every value below j on validation. A member
    trained already is never in the answer."""
    out = {}
    for k, (model_id, _, _, trained) in enumerate(line):
        if trained or k < 2:
            continue
        for j in range(1, k):
            below = [v for _, _, v, _ in line[:j]]
            mid, dropout, val, _ = line[j]
            if val is None or any(v is None for v in below):
                unknown = next(m for m, _, v, _ in line[: j + 1] if v is None)
                out[model_id] = Verdict("waits", unknown, f"waits for {unknown}'s validation loss (line search)")
                break
            if val >= min(below):
                best = line[below.index(min(below))][1]
                why = (f"not tried: dropout {dropout:g} did not beat dropout {best:g} on validation ({val:.4f} against "
                       f"{min(below):.4f}; line search)")  # fmt: skip
                out[model_id] = Verdict("untried", mid, why)
                break
    return out


def validation_loss(profile_name: str, corpus, model_id: str) -> float | None:
    """The best validation loss of a model trained to its end: built in the artifacts, else shipped (models/ or
    models/pending/); None when it is not finished anywhere."""
    metrics = complete_metrics(model_dir(corpus.artifact_name, model_id) / "metrics.json")
    for room in (profile_name, f"{PENDING}/{profile_name}"):
        if metrics is not None:
            break
        path = shipped_folder(room, corpus.artifact_name, model_id) / "metrics.json"
        metrics = json.loads(path.read_text()) if path.is_file() else None
    return None if metrics is None or not metrics.get("complete") else float(metrics["best_val_loss"])


def verdicts(profile, corpus, corpus_arg: str) -> dict[str, Verdict]:
    """{model id: Verdict} of the profile's models on one corpus that its line searches leave untrained now."""
    from .plan import dropout_lines

    out = {}
    for configs in dropout_lines(profile, corpus, corpus_arg):
        ids = [c.model_id(corpus.key) for c in configs]
        vals = [validation_loss(profile.name, corpus, m) for m in ids]
        out |= line_search([(m, c.dropout, v, v is not None) for m, c, v in zip(ids, configs, vals)])
    return out


def untried(profile, corpus, corpus_arg: str) -> dict[str, Verdict]:
    """{model id: Verdict} of the profile's models on one corpus that its line searches will never try."""
    return {m: v for m, v in verdicts(profile, corpus, corpus_arg).items() if v.state == "untried"}
