"""docs/stopping-rule.md: what training by the papers' stopping rule moved (issue 38), from the ledger `ship pack`
keeps of the models it retired (models/<profile>/retired.json, reports.ship_pack.record_retired).

Each retired model was trained by the earlier rule (stopped once validation gained under `converge_delta` nats per
epoch over `converge_window` epochs) and replaced by the same configuration retrained by the papers' rule (at most 50
epochs, early stopping on validation with patience 5, Karpathy et al. sec 3.3). Both were measured as the report's
cross_entropy measures a model, on the test split, when the old one was retired: nothing here is computed, only read.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from .docs_run import _label, _signed, table


def _config(model_id: str) -> tuple[str, str, str]:
    """(architecture label, layers x width, seed) read off a model id like lstm-srnn-L1-H128-s0-4a2571."""
    parts = model_id.split("-")
    at = next(k for k, p in enumerate(parts) if p.startswith("L") and p[1:].isdigit())
    arch, layers, size = "-".join(parts[:at]), parts[at][1:], parts[at + 1][1:]
    seed = next((p[1:] for p in parts[at + 2 :] if p.startswith("s") and p[1:].isdigit()), "—")
    return _label(arch), f"{layers} x {size}", seed


def _rule(m: dict) -> str:
    r = m.get("rule") or {}
    if r.get("converge_delta"):
        return f"gain < {r['converge_delta']} over {r.get('converge_window') or 3} epochs"
    return f"at most {r.get('epochs')} epochs, patience {r.get('patience')}"


def stopping_rule_doc(profile: str, ledger: Path) -> list[str]:
    """The markdown of docs/stopping-rule.md from `ledger` (a profile with none yet: a line saying so)."""
    lines = [
        "# What the papers' stopping rule moved",
        "",
        f"Written by `python -m reports.docs` (`make docs`) from `{ledger.relative_to(ledger.parents[2])}`, which "
        f"`python -m reports.ship pack --profile {profile}` extends each time a model retrained by the papers' rule "
        "retires the model of the same configuration trained by the earlier rule (docs/shipped-models.md, issue 38); "
        "do not edit by hand. Both were scored as the report's `cross_entropy` scores a model: test nats per "
        "character, +- the bootstrap std of that mean; both read the same characters, so their difference is "
        "more certain than either std suggests.",
        "",
    ]
    records = json.loads(ledger.read_text()) if ledger.is_file() else []
    if not records:
        return lines + ["*No model has been retired yet.*", ""]
    moved = [r["replaced_by"]["test_nats"] - r["retired"]["test_nats"] for r in records]
    capped = sum(r["replaced_by"]["stopped"] == "epochs" for r in records)
    lines += [
        f"{len(records)} models retrained so far: test moved by {_signed(min(moved))} to {_signed(max(moved))} nats "
        f"(median {_signed(statistics.median(moved))}); {sum(m < 0 for m in moved)} of {len(records)} improved. "
        f"{capped} of {len(records)} retrained models ran to the 50-epoch cap instead of stopping early.",
        "",
    ]
    rows = []
    for r, delta in zip(records, moved):
        old, new = r["retired"], r["replaced_by"]
        arch, shape, seed = _config(new["model_id"])
        rows.append([
            r["corpus"], arch, shape, seed,
            f"{old['epochs']} ({old['stopped']})", f"{old['test_nats']:.4f} +- {old['test_std']:.4f}",
            f"{new['epochs']} ({new['stopped']})", f"{new['test_nats']:.4f} +- {new['test_std']:.4f}",
            _signed(delta, 4),
        ])  # fmt: skip
    header = ["corpus", "model", "layers x width", "seed", "earlier rule: epochs", "test (nats/char)",
              "papers' rule: epochs", "test (nats/char)", "moved (nats)"]  # fmt: skip
    rule_old, rule_new = _rule(records[0]["retired"]), _rule(records[0]["replaced_by"])
    return lines + [f"Earlier rule: {rule_old}. Papers' rule: {rule_new}.", ""] + table(header, rows)
