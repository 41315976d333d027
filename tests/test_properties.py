"""Property-based tests (hypothesis) that search for the inputs the geometry and search code fails on: the Venn layout
of any three sets, the merging of brace-distance buckets, the brace matcher on random C full of decoys, memory
spans, and the Predictions file format's round trip and storage error bound."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyses import brace_distance, error_overlap, training_dynamics_kl, weighted_sum
from charlm import predictions

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------------------ the Venn layout

# The 7 regions of three sets (model, n-NN, n-gram), as error_overlap.REGIONS names them, "none" left out.
REGION_KEYS = [key for key in error_overlap.REGIONS if any(key)]
# Counts from none to a War and Peace test split's worth, zeros often: subsets, equal and empty sets come from those.
counts = st.one_of(st.just(0), st.integers(1, 20), st.integers(0, 400_000))


def _sets(region_counts: list[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The three set sizes and the three pairwise intersections (01, 02, 12) of the regions' counts."""
    by_key = dict(zip(REGION_KEYS, region_counts))
    sizes = tuple(sum(c for k, c in by_key.items() if k[j]) for j in range(3))
    pairs = tuple(sum(c for k, c in by_key.items() if k[a] and k[b]) for a, b in ((0, 1), (0, 2), (1, 2)))
    return sizes, pairs


def _distance(centres, a, b) -> float:
    return float(np.linalg.norm(centres[a] - centres[b]))


def test_a_subset_placed_a_rounding_past_tangency_still_overlaps_by_its_whole_area():
    """Found by the property below: set 0 inside sets 1 and 2, circle 2's centre 1 ulp past internal tangency,
    where the lens formula cancels (it gave 7,212.9975 for 7,213)."""
    sizes, pairs = (7213, 7215, 7215), (7213, 7213, 7214)
    centres, radii = error_overlap.venn_layout(sizes, pairs)
    for k, (a, b) in enumerate(((0, 1), (0, 2))):
        got = error_overlap._lens(radii[a], radii[b], _distance(centres, a, b))
        assert got == pytest.approx(pairs[k], abs=1e-7 * max(sizes))


@FAST
@given(st.lists(counts, min_size=7, max_size=7))
def test_the_venn_layout_of_any_three_sets_has_their_areas_and_overlaps(region_counts):
    """Circle areas are the set sizes and the overlaps of circle 0 with 1 and 2 are exact, for any three sets: one
    inside another, equal, disjoint or empty; 1 with 2 too where the asked distances make a triangle."""
    sizes, pairs = _sets(region_counts)
    centres, radii = error_overlap.venn_layout(sizes, pairs)
    assert np.isfinite(centres).all() and np.isfinite(radii).all()
    scale = max(max(sizes), 1)
    np.testing.assert_allclose(np.pi * radii**2, sizes, rtol=1e-9, atol=1e-9)
    for k, (a, b) in enumerate(((0, 1), (0, 2))):
        got = error_overlap._lens(radii[a], radii[b], _distance(centres, a, b))
        assert got == pytest.approx(pairs[k], abs=1e-7 * scale), (sizes, pairs)  # cancellation near touching
    d01, d02, d12 = (error_overlap._distance_for_overlap(radii[a], radii[b], pairs[k])
                     for k, (a, b) in enumerate(((0, 1), (0, 2), (1, 2))))  # fmt: skip
    exact = [(0, 1), (0, 2)]
    if abs(d01 - d02) + 1e-9 < d12 < d01 + d02 - 1e-9:  # a triangle: the third overlap is exact as well
        exact.append((1, 2))
        got = error_overlap._lens(radii[1], radii[2], _distance(centres, 1, 2))
        assert got == pytest.approx(pairs[2], abs=1e-6 * scale), (sizes, pairs)
    # where the overlap is exact, a subset sits inside its superset and equal sets coincide
    for k, (a, b) in enumerate(((0, 1), (0, 2), (1, 2))):
        if (a, b) in exact and pairs[k] == min(sizes[a], sizes[b]):
            assert _distance(centres, a, b) <= abs(radii[a] - radii[b]) + 1e-6 * np.sqrt(scale)


@settings(max_examples=15, deadline=None)
@given(st.lists(counts, min_size=7, max_size=7), st.integers(0, 1000))
def test_the_venn_diagram_draws_any_three_sets(region_counts, none):
    """The whole panel (circles, labels, region percentages) draws for any counts, with a frame of positive size."""
    by_key = dict(zip(REGION_KEYS, region_counts)) | {(False, False, False): none}
    total = sum(by_key.values())
    if total == 0:
        by_key[(False, False, False)] = total = 1
    sub = pd.DataFrame([{"model_err": k[0], "nnn_err": k[1], "ngram_err": k[2], "count": c, "positions": total,
                         "model": "LSTM 1x8", "nnn_n": 3, "ngram_n": 5, "corpus": "c"}
                        for k, c in by_key.items()])  # fmt: skip
    fig, ax = plt.subplots()
    try:
        error_overlap._draw_venn(ax, sub)
        low, high = ax.get_xlim()
        assert np.isfinite([low, high]).all() and high > low
    finally:
        plt.close(fig)


# ------------------------------------------------------------------------------------------ brace-distance buckets


@FAST
@given(
    st.lists(st.integers(1, 3000), min_size=1, max_size=300),
    st.lists(st.integers(-5, 2000), max_size=20),
    st.integers(0, 60),
)
def test_buckets_cover_every_distance_and_none_is_empty_or_too_small(distances, edges, min_braces):
    distance = np.array(distances)
    starts = brace_distance.buckets(distance, edges, min_braces)
    assert starts.size >= 1 and (np.diff(starts) > 0).all()  # increasing, no repeated start
    assert starts[0] <= distance.min()  # every distance lies in a bucket
    assert set(starts[1:].tolist()) <= set(edges)  # only the first may move (down to the shortest distance)
    counts = np.bincount(np.searchsorted(starts, distance, side="right") - 1, minlength=starts.size)
    assert counts.sum() == distance.size and (counts >= 1).all()
    if starts.size > 1:
        assert (counts >= min_braces).all()


# ------------------------------------------------------------------------------------------ the brace matcher


ident = st.sampled_from(["x", "f(y)", "a / b", "n * 2", "p->q", ";", "\n", "return 0;", "#define Z 1", "i++", "\t"])
string_part = st.sampled_from(list("{}'/*ab ;(") + ['\\"', "\\\\", "\\n", "//", "/*", "*/"])
char_literal = st.sampled_from(["'{'", "'}'", "'\\''", "'\"'", "'\\\\'", "'/'", "'*'", "'a'", "'\\n'"])
comment_part = st.sampled_from(list("{}'\"/ab;\n\t") + ["//", "\\"])  # no '*': the comment cannot end early
line_part = st.sampled_from(list("{}'\"/*ab; ") + ["/*", "*/"])  # no newline, no backslash: ends at the newline


def decoys():
    """Text whose braces are not code: strings, character literals, block and line comments (continued lines
    included)."""
    return st.one_of(
        st.lists(string_part, max_size=8).map(lambda p: '"' + "".join(p) + '"'),
        char_literal,
        st.lists(comment_part, max_size=10).map(lambda p: "/*" + "".join(p) + "*/"),
        st.tuples(st.lists(line_part, max_size=6), st.none() | st.lists(line_part, max_size=6)).map(
            lambda t: "//" + "".join(t[0]) + ("" if t[1] is None else " \\\n" + "".join(t[1])) + "\n"
        ),
    )


blocks = st.recursive(
    st.one_of(ident.map(lambda s: ("code", s)), decoys().map(lambda s: ("decoy", s))),
    lambda inner: st.lists(inner, max_size=5).map(lambda xs: ("block", xs)),
    max_leaves=40,
)


def render(program, stray_closes: int, stray_opens: int):
    """The C text of a program (space-separated pieces), and the positions and distances of its braces' pairs."""
    out, pos, close, distance = [], 0, [], []

    def emit(piece: str) -> int:
        nonlocal pos
        out.append(piece + " ")
        at = pos
        pos += len(piece.encode()) + 1
        return at

    def walk(node):
        kind, value = node
        if kind == "block":
            opened = emit("{")
            for child in value:
                walk(child)
            at = emit("}")
            close.append(at)
            distance.append(at - opened)
        else:
            emit(value)

    for _ in range(stray_closes):  # '}' whose '{' lies before the text (a split starts mid-file)
        emit("}")
    for node in program:
        walk(node)
    for _ in range(stray_opens):  # '{' still open at the end
        emit("{")
    return "".join(out).encode(), close, distance


@FAST
@given(st.lists(blocks, max_size=6), st.integers(0, 3), st.integers(0, 3))
def test_the_brace_matcher_pairs_exactly_the_braces_of_code_among_decoys(program, stray_closes, stray_opens):
    text, close, distance = render(program, stray_closes, stray_opens)
    found = brace_distance.match_braces(text)
    order = np.argsort(close, kind="stable")
    assert found.close.tolist() == np.asarray(close, dtype=np.int64)[order].tolist(), text
    assert found.distance.tolist() == np.asarray(distance, dtype=np.int64)[order].tolist(), text
    assert (found.unmatched, found.unclosed) == (stray_closes, stray_opens), text
    assert found.hidden == text.count(b"}") - len(close) - stray_closes  # the decoys' '}'


@FAST
@given(st.binary(max_size=400).map(lambda b: bytes(b"{}\"'/*\\\n ab"[x % 11] for x in b)), st.integers(1, 60))
def test_the_brace_matcher_reads_any_text_consistently_and_piece_by_piece(text, piece):
    """On any bytes (not C: stray quotes, unterminated comments) every pair is a '{' and a '}' of the text, every '}'
    is paired, unmatched or hidden, and matching in pieces is matching each piece alone (char-rnn splits)."""
    found = brace_distance.match_braces(text)
    raw = np.frombuffer(text, dtype=np.uint8)
    assert (found.distance >= 1).all()
    assert (raw[found.close] == ord("}")).all() and (raw[found.close - found.distance] == ord("{")).all()
    assert found.close.size + found.unmatched + found.hidden == text.count(b"}")
    assert found.close.size + found.unclosed <= text.count(b"{")
    pieces = brace_distance.match_braces(text, piece_length=piece)
    alone = [brace_distance.match_braces(text[s : s + piece]) for s in range(0, len(text), piece)]
    offsets = range(0, len(text), piece)
    assert pieces.close.tolist() == [int(c) + s for a, s in zip(alone, offsets) for c in a.close]
    assert pieces.distance.tolist() == [int(d) for a in alone for d in a.distance]
    assert pieces.unmatched == sum(a.unmatched for a in alone) and pieces.unclosed == sum(a.unclosed for a in alone)


# ------------------------------------------------------------------------------------------ memory spans


@FAST
@given(st.integers(1, 30), st.integers(1, 6), st.integers(0, 2**32 - 1), st.sampled_from(["any", "shut", "open"]))
def test_memory_spans_are_finite_positive_and_the_geometric_never_exceeds_the_arithmetic(T, H, seed, gates):
    """Keep gates anywhere in [0, 1], exactly shut (0) and exactly open (1) included: both spans of every cell are
    positive and finite, the geometric one at most the arithmetic one (Jensen), and a constant gate gives -1 / ln f."""
    rng = np.random.default_rng(seed)
    keep = {"any": rng.random((T, H)), "shut": np.zeros((T, H)), "open": np.ones((T, H))}[gates]
    keep[rng.random((T, H)) < 0.2] = rng.choice([0.0, 1.0])
    geometric, arithmetic = weighted_sum.memory_span(keep)
    assert np.isfinite(geometric).all() and np.isfinite(arithmetic).all()
    assert (geometric > 0).all() and (geometric <= arithmetic * (1 + 1e-12)).all()
    f = np.clip(rng.random(H), 1e-3, 0.999)
    np.testing.assert_allclose(weighted_sum.memory_span(np.tile(f, (T, 1))), [-1 / np.log(f)] * 2, rtol=1e-9)


# ------------------------------------------------------------------------------------------ Predictions


@st.composite
def exact_predictions(draw):
    """Exact (T, V) log-probabilities (softmax of logits up to +-40: near-certain rows included), their targets, and
    a sorted sample of positions (or None: every row stored)."""
    T, V = draw(st.integers(0, 40)), draw(st.integers(1, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    scale = draw(st.sampled_from([0.0, 0.5, 3.0, 40.0]))
    logits = scale * rng.normal(size=(T, V))
    logp = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True) if T else np.zeros((0, V))
    targets = rng.integers(0, V, T)
    positions = None
    if T and draw(st.booleans()):
        positions = np.unique(rng.integers(0, T, draw(st.integers(1, T))))
    return logp, targets, positions


names = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs")), max_size=30)


@FAST
@given(exact_predictions(), names, names)
def test_predictions_survive_a_round_trip_through_their_file(tmp_path_factory, exact, model_id, digest):
    logp, targets, positions = exact
    preds = predictions.from_logprobs(logp.astype(np.float32), targets, model_id, digest, positions)
    path = predictions.save(tmp_path_factory.mktemp("p") / "test.npz", preds)
    back = predictions.load(path)
    for name in ("target_logp", "targets", "argmax", "logp"):
        a, b = getattr(preds, name), getattr(back, name)
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True), name
    assert (back.positions is None) == (positions is None)
    if positions is not None:
        assert np.array_equal(back.positions, positions)
    assert (back.model_id, back.source_digest) == (model_id, digest)
    # the exact columns are exact; the stored rows' argmax is the exact one's (ties: the first)
    rows = np.arange(targets.size) if positions is None else positions
    np.testing.assert_array_equal(back.target_logp, logp[np.arange(targets.size), targets].astype(np.float32))
    np.testing.assert_array_equal(back.argmax, logp.astype(np.float32)[rows].argmax(1))
    np.testing.assert_array_equal(back.argmax_at(rows), back.argmax)
    np.testing.assert_allclose(back.p_correct, np.exp(back.target_logp.astype(np.float64)))


@FAST
@given(exact_predictions(), exact_predictions())
def test_kl_from_stored_rows_stays_within_the_documented_bound(first, second):
    """The module docstring's bound B on |KL from float16 rows - exact KL| holds for any pair of distributions,
    near-certain ones included (their log-probabilities near 0 are float16 subnormals)."""
    a, b = first[0], second[0]
    n, V = min(a.shape[0], b.shape[0]), min(a.shape[1], b.shape[1])
    if n == 0 or V < 2:
        return
    # renormalise the first V columns so both are distributions over the same V characters
    a = a[:n, :V] - np.logaddexp.reduce(a[:n, :V], axis=1, keepdims=True)
    b = b[:n, :V] - np.logaddexp.reduce(b[:n, :V], axis=1, keepdims=True)
    stored_a, stored_b = (x.astype(np.float16).astype(np.float64) for x in (a, b))
    error = np.abs(predictions.kl_divergence(stored_a, stored_b) - predictions.kl_divergence(a, b))
    assert (error <= predictions.kl_error_bound(a, b) + 1e-12).all()
    # and the symmetric KL's bound that training_dynamics reports (mean over positions, both directions)
    kl, bound = training_dynamics_kl.divergences([a], [b])
    exact = predictions.symmetric_kl(a, b).mean()
    assert kl[0, 0] == pytest.approx(exact, abs=1e-9)
    assert abs(predictions.symmetric_kl(stored_a, stored_b).mean() - exact) <= bound[0, 0] + 1e-12
