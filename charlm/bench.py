"""`make bench`: speeds measured in one run, as ratios, so they hold on a loaded machine.

Training: for every architecture, a model of one layer, width 256, trained for a few batches of
100 streams x 100 steps (forward, backward, RMSProp step) with the hand-written cells (the
ones traces come from), and the fused kernel of its family (nn.RNN, nn.GRU, nn.LSTM; the
fused LSTM for Levy's ablations and the notes' prototype and pseudo-LSTM, the fused RNN for the
CBOW RNNs, torch's GRU for the papers' `gru-paper`, which no fused kernel computes) timed in
alternation with it. Ratios above 1 mean ours is faster; for `gru-paper`, timed as it trains (its
hand-written backward, `PaperGRUScan`), the ratio is what training the papers' GRU costs against torch's.
The papers' GRU is also timed at the reference profile's Linux shapes (16 streams, widths 45 to 100), where
the per-step overhead dominates: its scan against the same cell differentiated by autograd step by step.

Scans: every cell whose recurrence is linear with input-only coefficients (`lstm-srnn-hidden`'s memory cell,
`mingru`, `minlstm`; charlm/layers/scan.py) runs its scan `LinearScan` against its step loop (its trace, through
autograd), in alternation, one layer at the 128 row's width for it: a training step (forward, backward, RMSProp)
of 16 streams x 100 steps, as the reference profile trains, and scoring 128 streams x 256 steps (charlm.predict's
shape) under no_grad. Records `{"bench": "scan", "arch", "mode", "scan_speedup", ...}`. Expect about 1.1-1.5x
in training and 1x in scoring, not 3x: the recurrence is a small part of a step. Each training record also holds
the profile that says why: `rest_ms`, the same step timed with the recurrence swapped out (`_NoRecurrence`), and
`bound` = loop / rest, the most any scan could buy; the bench prints it under every scan below 3x. Profiled on one
core (2026-11-26, AMD EPYC, process CPU time, best of 15 steps, the recurrence swapped for a copy to time the rest):
minGRU at
16 x 100 x 465 takes 34.5 ms a step with the scan, 42.1 ms with the step loop and 23.1 ms with no recurrence at all
(the input projection, the gates, the head's three 1,600 x 465 x 87 products, softmax, RMSProp), so even a free
recurrence would make the step only 1.8x faster than the loop; lstm-srnn-hidden: 15.1, 17.3 and 9.3 ms. In scoring,
under no_grad the step loop has no autograd to shed and does the scan's arithmetic, and the recurrence is under a
tenth of a pass dominated by the head's 32,768 x H x V product.

Scoring: for every architecture, a split scored as one stream from a zero state (how the suite
scored before parallel streams) and as parallel warmed-up streams (charlm.predict), at the quick
profile's shape (one layer, width 128), on the same text.

The baselines add n-gram scoring speed and the lmplz time of the 21-gram on the War and Peace
train split.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from corpora import atomic
from corpora.errors import run_cli

from .archs import ARCHITECTURES, REGISTRY
from .archs import arch as arch_record
from .model import ARCHS, CharLM, ModelConfig, matched_size

FUSED_REFERENCE = {a.name: a.bench_against for a in ARCHITECTURES}  # the fused torch architecture timed beside each
OWN_SCAN = tuple(a.name for a in ARCHITECTURES if a.fused not in ("torch", "loop"))  # trains on a kernel of ours
SCANNED = tuple(a.name for a in ARCHITECTURES if a.fused == "LinearScan")  # linear recurrences, scanned over time
PAPER_GRU_SHAPES = ((2, 54), (2, 100), (3, 45), (3, 80))  # (layers, width): reference's Linux GRUs, Fig 1


def _step_timer(model: CharLM, fused: bool, ids: torch.Tensor, targets: torch.Tensor):
    optimizer = torch.optim.RMSprop(model.parameters(), lr=2e-3, alpha=0.95)

    def step() -> float:
        start = time.perf_counter()
        logits, _ = model.forward_with_state(ids, fused=fused)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return time.perf_counter() - start

    return step


def _alternate(*timers_and_steps) -> tuple[float, ...]:
    """Median seconds of each step timer after a warm-up each, timed in alternation so all see the same load:
    `_alternate(first, second, ..., steps)`."""
    *timers, steps = timers_and_steps
    for timer in timers:
        timer()
    times = [[timer() for timer in timers] for _ in range(steps)]
    return tuple(statistics.median(row[k] for row in times) for k in range(len(timers)))


class _NoRecurrence:
    """`LinearScan` swapped for what feeds it, h_t = b_t + 0 a_t (gradients still reach both): a step with it times
    everything but the recurrence (the input projection, the gates, the head, the softmax, RMSProp)."""

    @staticmethod
    def apply(a: torch.Tensor, b: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        return b + 0.0 * a


def _without_recurrence(timer):
    """The same step timer with every cell's `LinearScan` swapped for `_NoRecurrence` while it runs."""
    from .layers import scan

    users = [
        m for m in list(sys.modules.values()) if getattr(m, "LinearScan", None) is scan.LinearScan and m is not scan
    ]

    def run() -> float:
        for module in users:
            module.LinearScan = _NoRecurrence
        try:
            return timer()
        finally:
            for module in users:
                module.LinearScan = scan.LinearScan

    return run


def bench_cells(
    archs=ARCHS, size: int = 256, batch: int = 100, unroll: int = 100, steps: int = 5, vocab: int = 87, layers: int = 1
) -> list[dict]:
    torch.manual_seed(0)
    ids = torch.randint(0, vocab, (batch, unroll))
    targets = torch.randint(0, vocab, (batch, unroll))
    fused_models = {}
    records = []
    for arch in archs:
        ref = FUSED_REFERENCE[arch_record(arch).name]  # an unknown name: one UserError line
        fused_models.setdefault(ref, CharLM(ModelConfig(ref, vocab, layers, size)))
        # `gru-paper` has no torch kernel: it trains with its own scan, so that is what is timed
        ours = _step_timer(CharLM(ModelConfig(arch, vocab, layers, size)), arch in OWN_SCAN, ids, targets)
        theirs = _step_timer(fused_models[ref], True, ids, targets)
        t_ours, t_fused = _alternate(ours, theirs, steps)
        chars = batch * unroll
        rec = {
            "arch": arch,
            "layers": layers,
            "size": size,
            "batch": batch,
            "unroll": unroll,
            "steps": steps,
            "chars_per_s": chars / t_ours,
            "fused_reference": ref,
            "fused_chars_per_s": chars / t_fused,
        }
        rec["ratio_to_fused"] = rec["chars_per_s"] / rec["fused_chars_per_s"]
        records.append(rec)
    return records


def bench_paper_gru(shapes=PAPER_GRU_SHAPES, batch: int = 16, unroll: int = 100, steps: int = 10, vocab: int = 99):
    """Training steps of the papers' GRU: `PaperGRUScan` against autograd through the hand-written cell."""
    torch.manual_seed(0)
    ids = torch.randint(0, vocab, (batch, unroll))
    targets = torch.randint(0, vocab, (batch, unroll))
    records = []
    for layers, size in shapes:
        model = CharLM(ModelConfig("gru-paper", vocab, layers, size))
        scan, loop = _step_timer(model, True, ids, targets), _step_timer(model, False, ids, targets)
        t_scan, t_loop = _alternate(scan, loop, steps)
        scan_speed, loop_speed = batch * unroll / t_scan, batch * unroll / t_loop
        records.append({
            "bench": "gru-paper-scan", "layers": layers, "size": size, "batch": batch, "unroll": unroll,
            "scan_chars_per_s": scan_speed, "loop_chars_per_s": loop_speed, "speedup": scan_speed / loop_speed,
        })  # fmt: skip
    return records


def _score_timer(model: CharLM, fused: bool, ids: torch.Tensor):
    state = model.init_state(ids.shape[0])

    def run() -> float:
        start = time.perf_counter()
        with torch.no_grad():
            model.forward_with_state(ids, state, fused=fused)
        return time.perf_counter() - start

    return run


def bench_scans(
    archs=SCANNED,
    budget: int = 128,
    vocab: int = 87,
    batch: int = 16,
    unroll: int = 100,
    score_batch: int = 128,
    score_unroll: int = 256,
    steps: int = 5,
) -> list[dict]:
    """Each scanned cell's kernel against its step loop (its trace through autograd), one layer of the budget row's
    width: training steps of batch x unroll and scoring passes of score_batch x score_unroll, timed in alternation."""
    torch.manual_seed(0)
    ids, targets = torch.randint(0, vocab, (batch, unroll)), torch.randint(0, vocab, (batch, unroll))
    score_ids = torch.randint(0, vocab, (score_batch, score_unroll))
    records = []
    for arch in archs:
        size = matched_size(arch, budget, vocab)
        model = CharLM(ModelConfig(arch, vocab, 1, size))
        common = {"bench": "scan", "arch": arch, "kernel": REGISTRY[arch].fused, "budget": budget, "layers": 1,
                  "size": size}  # fmt: skip
        scan = _step_timer(model, True, ids, targets)
        t_scan, t_loop, t_rest = _alternate(scan, _step_timer(model, False, ids, targets), _without_recurrence(scan),
                                            steps)  # fmt: skip
        # the profile: a step without any recurrence bounds what a scan can buy (Amdahl): loop / rest
        records.append({**common, "mode": "train", "batch": batch, "unroll": unroll, "steps": steps,
                        "scan_ms": 1e3 * t_scan, "loop_ms": 1e3 * t_loop, "scan_speedup": t_loop / t_scan,
                        "rest_ms": 1e3 * t_rest, "bound": t_loop / t_rest})  # fmt: skip
        model.eval()

        passes = max(2, steps // 2)
        t_scan, t_loop = _alternate(_score_timer(model, True, score_ids), _score_timer(model, False, score_ids), passes)
        records.append({**common, "mode": "score", "batch": score_batch, "unroll": score_unroll, "steps": passes,
                        "scan_ms": 1e3 * t_scan, "loop_ms": 1e3 * t_loop, "scan_speedup": t_loop / t_scan})  # fmt: skip
    return records


def bench_predictions(
    archs=ARCHS, size: int = 128, chars: int = 20_000, vocab: int = 87, layers: int = 1
) -> list[dict]:
    """Scoring speed: one stream (streams=1) against parallel warmed-up streams (the default), same text."""
    from .predict import predict_logprobs

    torch.manual_seed(0)
    ids = torch.randint(0, vocab, (chars,)).numpy().astype("uint8")
    records = []
    for k, arch in enumerate(archs):
        model = CharLM(ModelConfig(arch, vocab, layers, size)).eval()
        timings = {}
        for mode in ("one", "parallel") if k % 2 == 0 else ("parallel", "one"):  # alternate the order
            start = time.perf_counter()
            predict_logprobs(model, ids, streams=1 if mode == "one" else None)
            timings[mode] = time.perf_counter() - start
        records.append({
            "arch": arch, "layers": layers, "size": size, "chars": chars,
            "one_stream_chars_per_s": chars / timings["one"], "parallel_chars_per_s": chars / timings["parallel"],
            "speedup": timings["one"] / timings["parallel"],
        })  # fmt: skip
    return records


NGRAM_POSITIONS = 20_000  # test positions the n-gram's full-distribution scoring is timed on


def ngram_benchmark(
    corpus_name: str = "warpeace", n: int = 20, positions: int = NGRAM_POSITIONS, progress: bool = False
) -> list[dict]:
    """lmplz time of the KenLM (n+1)-gram (charlm.ngram) on the train split, and its full-distribution scoring speed.

    The lmplz time is measured when the model is built; a cached build reports the time it recorded
    ("lmplz_cached": true). Scoring speed is measured now, from a cold cache, on the first
    `positions` test positions. Missing KenLM or corpus gives a record with a "skipped" reason.
    """
    import corpora
    from corpora.errors import UserError

    from . import ngram
    from .kenlm_tools import find_tool, import_kenlm
    from .paths import complete_metrics

    record: dict = {"baseline": "ngram", "corpus": corpus_name, "n": n, "order": n + 1}
    try:
        import_kenlm()
        find_tool("lmplz"), find_tool("build_binary")
        corpus = corpora.load(corpus_name)
    except UserError as err:
        return [{**record, "skipped": str(err)}]
    cached = complete_metrics(ngram.model_folder(corpus, n) / "metrics.json") is not None
    folder = ngram.build(corpus, n, progress=progress)
    metrics = complete_metrics(folder / "metrics.json") or {}
    model = ngram.load_model(folder)
    ids = corpus.split("test")[: positions + 1]
    _, _, _, stats = ngram.score_stream(model, ids, ngram.token_names(corpus.vocab))  # full rows: the costly case
    record.update(
        {
            "lmplz_seconds": float(metrics.get("lmplz_seconds", float("nan"))),
            "build_binary_seconds": float(metrics.get("build_binary_seconds", float("nan"))),
            "lmplz_cached": cached,
            "model_mib": metrics.get("model_bytes", 0) / 2**20,
            "positions": stats["positions"],
            "positions_per_s": float(stats["positions_per_s"]),
            "distinct_states": stats["distinct_states"],
        }
    )
    return [record]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m charlm.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, default=None, help="also write the records to this JSON file")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps per model (default %(default)s)")
    parser.add_argument("--size", type=int, default=256, help="hidden width (default %(default)s)")
    parser.add_argument("--archs", default=",".join(ARCHS), help="comma-separated architectures (default: all)")
    parser.add_argument("--no-baselines", action="store_true", help="skip the n-gram timings")
    parser.add_argument("--no-scoring", action="store_true", help="skip the one-stream against parallel-stream scoring")
    parser.add_argument("--no-scans", action="store_true", help="skip the scans against their step loops")
    parser.add_argument(
        "--scan-budget", type=int, default=128, help="budget row whose widths the scans run at (default %(default)s)"
    )
    parser.add_argument(
        "--scoring-chars", type=int, default=20_000, help="characters scored per architecture (default %(default)s)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's choice; 1 is steadier on a busy machine)",
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    records = bench_cells(args.archs.split(","), size=args.size, steps=args.steps)
    print(
        f"{'arch':<18}{'ours chars/s':>14}{'fused chars/s':>15}{'ratio':>8}  (fused reference; batch 100 x "
        f"unroll 100, width {args.size}, torch {torch.__version__}, {torch.get_num_threads()} threads)"
    )
    for r in records:
        print(
            f"{r['arch']:<18}{r['chars_per_s']:>14,.0f}{r['fused_chars_per_s']:>15,.0f}"
            f"{r['ratio_to_fused']:>7.2f}x  ({r['fused_reference']})"
        )
    if "gru-paper" in args.archs.split(","):
        paper_gru = bench_paper_gru(steps=args.steps)
        print(f"\n{'papers GRU':<18}{'scan chars/s':>14}{'autograd loop':>15}{'speedup':>9}  (16 streams x unroll 100)")
        for r in paper_gru:
            print(
                f"{r['layers']} x {r['size']:<14}{r['scan_chars_per_s']:>14,.0f}{r['loop_chars_per_s']:>15,.0f}"
                f"{r['speedup']:>8.2f}x"
            )
        records += paper_gru
    scanned = [a for a in args.archs.split(",") if a in SCANNED]
    if scanned and not args.no_scans:
        scans = bench_scans(scanned, budget=args.scan_budget, steps=args.steps)
        print(f"\n{'scan':<18}{'mode':<7}{'shape':>16}{'scan ms':>10}{'loop ms':>10}{'speedup':>9}  (one layer, "
              f"{args.scan_budget} row's width)")  # fmt: skip
        for r in scans:
            shape = f"{r['batch']} x {r['unroll']} x {r['size']}"
            print(f"{r['arch']:<18}{r['mode']:<7}{shape:>16}{r['scan_ms']:>10.2f}{r['loop_ms']:>10.2f}"
                  f"{r['scan_speedup']:>8.2f}x")  # fmt: skip
        for r in scans:
            if r["mode"] == "train" and r["scan_speedup"] < 3:
                print(f"{r['arch']}: below 3x because the recurrence is only part of a step: without any recurrence "
                      f"the step takes {r['rest_ms']:.1f} of the loop's {r['loop_ms']:.1f} ms (projections, gates, "
                      f"head, softmax, RMSProp), so even a free scan would be at most {r['bound']:.2f}x the loop; "
                      f"LinearScan reaches {r['scan_speedup']:.2f}x")  # fmt: skip
        records += scans
    if not args.no_scoring:
        scoring = bench_predictions(args.archs.split(","), chars=args.scoring_chars)
        print(f"\n{'arch':<18}{'one stream':>12}{'parallel':>12}{'speedup':>9}  (chars/s scoring a split, width 128)")
        for r in scoring:
            print(
                f"{r['arch']:<18}{r['one_stream_chars_per_s']:>12,.0f}{r['parallel_chars_per_s']:>12,.0f}"
                f"{r['speedup']:>8.1f}x"
            )
        records += [{"bench": "scoring", **r} for r in scoring]
    if not args.no_baselines:
        for r in ngram_benchmark():
            records.append(r)
            print(" ".join(f"{k}={v:,.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()))
    if args.json:
        atomic.write_json(args.json, records)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
