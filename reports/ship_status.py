"""Where each model a profile ships stands, and how much training is left: `python -m reports.ship status`.

One row per planned model, in the order `ship train` trains them (reports.ship.queue), with the group it trains in
(the issue it serves) and its state:

    shipped          in models/<profile>/ with its manifest
    waits for set    finished and packed into models/pending/<profile>/: its Levy set is not whole yet
    to pack          finished here (the artifacts folder): `ship pack` ships it
    training (pid)   a live `ship train` on this machine holds its lock
    partly trained   trained here for some epochs: `ship train` resumes it from its state.pt
    parked in models/partial/   trained partly on another machine and parked (`ship park`): `ship train` resumes it
    to train         nothing yet (a shipped model trained by an earlier stopping rule may stand in for it); "after
                     <model>" where its line search of dropout waits for that lower dropout (charlm.dropout_search)

beside its epochs and best validation loss so far, the CPU seconds it has cost (every session, summed) and what
the estimate says its whole training costs: the figure `ship train` recorded as its first session started, where
there is one ("before", so that it can be set beside the measured cost), else the estimate on this machine now
(charlm.estimate: one thread, priced per character to the epoch cap, since early stopping cannot be foreseen).
A second table sums the same per group, and the summary adds up the CPU hours left by the estimate (a partly
trained model: its estimate less what it has used) and the size the profile's shipped models will have once every
planned one ships (a model not packed yet: as reports.ship_pack.projected_bytes projects it), against the
repository's budget. The models a line search of dropout will not try are not in the table: a line names them.
Its last line tests the estimate's rule 3 on the shipped models (`charlm.estimate.leave_one_out`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from charlm.dropout_search import untried
from charlm.kinds.recurrent import shipped_stand_in
from charlm.plan import load_profile
from charlm.shipped import MANIFEST, PENDING, shipped_folder, whole

from .ship import PROVENANCE, is_nnn, line_verdict, lock_holder, queue, training_estimate
from .ship_pack import SHIPPED_BUDGET_MB, projected_bytes
from .ship_park import parked_folder


@dataclass
class Standing:
    """Where one planned model stands (see the module docstring)."""

    state: str
    epochs: int | None = None
    best_val: float | None = None
    cpu_s: float | None = None  # CPU seconds every session so far cost, where all were recorded
    estimate_s: float | None = None  # what the estimate said (recorded before training) or says (now) it costs
    estimated_before: bool = False  # estimate_s was recorded as its first session started
    shipped_bytes: int = 0

    @property
    def left_s(self) -> float:
        """CPU seconds still to spend on it by the estimate (0 once finished)."""
        if self.state in ("shipped", "waits for set", "to pack") or self.estimate_s is None:
            return 0.0
        return max(self.estimate_s - (self.cpu_s or 0.0), 0.0)


def _sessions_cpu(sessions: list[dict]) -> float | None:
    return round(sum(s["cpu_seconds"] for s in sessions), 1) if all("cpu_seconds" in s for s in sessions) else None


def _first_estimate(sessions: list[dict]) -> float | None:
    return sessions[0].get("estimate_cpu_seconds") if sessions else None


def _from_manifest(folder: Path, state: str) -> Standing:
    m = json.loads((folder / MANIFEST).read_text())
    sessions = m.get("sessions") or []
    before = _first_estimate(sessions)
    return Standing(state, m.get("epochs"), m.get("best_val_loss"), m.get("cpu_seconds"), before, before is not None,
                    sum(e["bytes"] for e in m["files"].values()))  # fmt: skip


def standing(profile_name: str, corpus, config, root: Path | None = None) -> Standing:
    """Where one model of the profile stands: shipped, waiting for its set, or here in the artifacts folder."""
    from charlm.paths import model_dir

    model_id = config.model_id(corpus.key)
    for room, state in ((profile_name, "shipped"), (f"{PENDING}/{profile_name}", "waits for set")):
        folder = shipped_folder(room, corpus.artifact_name, model_id, root)
        if whole(folder):
            return _from_manifest(folder, state)
    out = model_dir(corpus.artifact_name, model_id)
    parked = parked_folder(profile_name, corpus.artifact_name, model_id, root)
    if not (out / "state.pt").is_file() and whole(parked):
        out = parked  # trained partly on another machine: `ship train` resumes it from there
    try:
        metrics = json.loads((out / "metrics.json").read_text())
    except (OSError, ValueError):
        metrics = {}
    try:
        sessions = json.loads((out / PROVENANCE).read_text())["sessions"]
    except (OSError, ValueError, KeyError):
        sessions = []
    holder = lock_holder(out)
    if metrics.get("complete") and sessions:
        state = "to pack"
    elif holder is not None:
        state = f"training (pid {holder})"
    elif out == parked:
        state = "parked in models/partial/"
    elif metrics.get("epochs") or (out / "state.pt").is_file():
        state = "partly trained"
    else:
        state = "to train"
    stand_in = None if is_nnn(config) else shipped_stand_in(profile_name, corpus, config)
    if stand_in and state != "to pack":
        state += f"; {stand_in['model_id']} stands in"
    epochs = metrics.get("epochs")
    before = _first_estimate(sessions)
    return Standing(state, len(epochs) if isinstance(epochs, list) else None, metrics.get("best_val_loss"),
                    _sessions_cpu(sessions) if sessions else None, before, before is not None)  # fmt: skip


def headlines(planned: list[tuple]) -> dict:
    """Corpus key -> the headline LSTM (charlm.plan.headline_config: it ships every snapshot) of a `queue`."""
    from charlm.plan import headline_config

    found = {}
    for corpus in {c.key: c for c, _, _ in planned}.values():
        configs = [cf for c, cf, _ in planned if c.key == corpus.key and not is_nnn(cf)]
        found[corpus.key] = headline_config(configs, corpus.vocab_size)
    return found


def cost(seconds: float | None) -> str:
    """CPU seconds as the table writes them: hours to two decimals, seconds below a hundredth of an hour."""
    if seconds is None:
        return ""
    return f"{seconds / 3600:.2f} h" if seconds >= 36 else f"{seconds:.1f} s"


def status(profile_name: str, root: Path | None = None) -> int:
    """Print the markdown table of the profile's models and the summary of what is left (module docstring)."""
    from charlm.estimate import Pricer, leave_one_out

    profile = load_profile(profile_name)
    pricer = Pricer.here(profile.name, clock="cpu")  # training is priced in CPU seconds, beside busy trainers
    planned = queue(profile)
    headline = headlines(planned)
    print("| corpus | model | group | state | epochs | best val | CPU | estimate CPU | shipped MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows, projected, by_group = [], 0, {}
    for corpus, config, group in planned:
        s = standing(profile.name, corpus, config, root)
        verdict = line_verdict(profile, corpus, config) if s.state.startswith("to train") else None
        if verdict is not None and verdict.state == "waits":
            s.state = s.state.replace("to train", f"to train after {verdict.on} (line search)", 1)
        if s.estimate_s is None:
            s.estimate_s = training_estimate(pricer, corpus, config)
        rows.append(s)
        by_group.setdefault(group, []).append(s)
        if s.shipped_bytes or is_nnn(config):
            projected += s.shipped_bytes
        else:
            projected += projected_bytes(config, corpus.vocab_size, config == headline[corpus.key])
        best = "" if s.best_val is None else f"{s.best_val:.4f}"
        estimate = cost(s.estimate_s) + (" (before)" if s.estimated_before else "")
        size = f"{s.shipped_bytes / 1e6:.1f}" if s.shipped_bytes else ""
        print(f"| {corpus.name} | {config.model_id(corpus.key)} | {group} | {s.state} | {s.epochs or ''} | {best} | "
              f"{cost(s.cpu_s)} | {estimate} | {size} |")  # fmt: skip
    count = lambda *states, rows=rows: sum(r.state.split(" (")[0].split(";")[0] in states for r in rows)  # noqa: E731
    print("\n| group (in training order) | models | shipped | waiting for their set | not finished | CPU-hours left |")
    print("|---|---|---|---|---|---|")
    for group, members in by_group.items():
        unfinished = len(members) - count("shipped", "waits for set", "to pack", rows=members)
        print(f"| {group} | {len(members)} | {count('shipped', rows=members)} | "
              f"{count('waits for set', rows=members)} | {unfinished} | "
              f"{sum(r.left_s for r in members) / 3600:.1f} |")  # fmt: skip
    left = sum(r.left_s for r in rows)
    after = [r for r in rows if r.state.startswith("to train after")]  # their line search may not try them
    cores = os.cpu_count() or 1
    measured = [
        (r.cpu_s, r.estimate_s)
        for r in rows
        if r.estimated_before and r.cpu_s and r.estimate_s and r.state == "shipped"
    ]
    line = (
        f"\n{count('shipped')} of {len(rows)} models shipped ({sum(r.shipped_bytes for r in rows) / 1e6:.1f} MB), "
        f"{count('waits for set')} waiting for their set, {count('to pack')} to pack, "
        f"{count('training', 'partly trained')} training or partly trained here, {count('to train')} to train, "
        f"{len(after)} to train if their line search of dropout gets to them; by the estimate "
        f"{left / 3600:.1f} CPU-hours of training left ({sum(r.left_s for r in after) / 3600:.1f} of them for those "
        f"{len(after)}): about {left / 3600 / cores:.1f} h on "
        f"{cores} one-thread workers, one per core (this machine runs the estimate's benchmark in "
        f"{pricer.speed:.2f}x the records' time, in CPU seconds, whatever else it runs); shipped once all "
        f"{len(rows)} ship, by the snapshot rule: about "
        f"{projected / 1e6:.0f} MB (budget {SHIPPED_BUDGET_MB} MB)"
    )
    loaded = {cf.corpus: c for c, cf, _ in planned if not is_nnn(cf)}  # the profile's corpus names -> corpora
    skipped = [f"{c.name}/{m}" for arg, c in loaded.items() for m in untried(profile, c, arg)]
    if skipped:
        line += (f"; {len(skipped)} not tried by their line search of dropout (a lower dropout did not help): "
                 + ", ".join(sorted(skipped)))  # fmt: skip
    if measured:
        ratios = sorted(cpu / est for cpu, est in measured)
        spread = f"{ratios[0]:.2f}x" if len(ratios) == 1 else f"{ratios[0]:.2f}x to {ratios[-1]:.2f}x"
        line += f"; the {len(ratios)} shipped with an estimate recorded before training cost {spread} of it"
    print(line)
    loo = leave_one_out(pricer.training_by_arch)
    if "fit" in loo:
        (n, fit, fit_worst), (_, per, per_worst) = loo["fit"], loo["per parameter"]
        print(
            f"\nThe estimate's rule 3 (a shape nobody shipped, from its architecture's other shipped shapes), "
            f"left out in turn on {n} shipped models: within {fit:.2f}x on geometric mean (worst {fit_worst:.2f}x) "
            f"by the fit per layer and parameter, against {per:.2f}x (worst {per_worst:.2f}x) per parameter alone"
        )
    return 0
