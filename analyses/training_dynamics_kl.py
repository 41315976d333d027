"""The symmetric KL of every snapshot against every baseline, and its float16 error bound, in one pass over the
positions: the batched form of charlm.predictions.symmetric_kl and kl_error_bound, for analyses/training_dynamics.py
(tests/test_training_dynamics.py holds it to them, position by position).
"""

from __future__ import annotations

import numpy as np

from charlm.predictions import FLOAT16_TINY, FLOAT16_UNIT

CHUNK = 2_000  # positions per block: the dot products run in float64 without float64 copies of everything


def divergences(snapshots: list[np.ndarray], baselines: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(S, B) mean symmetric KL between every snapshot and every baseline, and (S, B) its float16 error bound.

    Each input is (K, V) log-probabilities at the same K positions. sum_v (p - q)(a - b) expands into
    p.a + q.b - p.b - q.a, so the means over positions are Gram-like products accumulated over blocks of positions
    (one pass over each array instead of one per pair).
    """
    return divergences_of_models([snapshots], baselines)[0]


def _terms(logps: list[np.ndarray], lo: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Log p, p and p log p (<= 0) of one block of positions, each (M, n) float64 (float16 and float32 inputs are
    exact in float64)."""
    a = np.stack([x[lo : lo + CHUNK].astype(np.float64).ravel() for x in logps])
    p = np.exp(a)
    return a, p, p * a


def divergences_of_models(models: list[list[np.ndarray]], baselines: list[np.ndarray]) -> list[tuple]:
    """`divergences` of several models' snapshots against the same baselines: the baselines' terms (the bulk of the
    work: 15 baselines against a model's few snapshots) are computed once per block of positions for all of them.
    Each model's products are those of `divergences` alone (the same shapes, so the same numbers)."""
    n_positions = baselines[0].shape[0]
    B = len(baselines)
    self_q, q_b2 = np.zeros(B), np.zeros(B)
    sums = []
    for snapshots in models:
        S = len(snapshots)
        sums.append({"self_p": np.zeros(S), "p_a2": np.zeros(S), **{k: np.zeros((S, B)) for k in PRODUCTS}})
    for lo in range(0, n_positions, CHUNK):
        b, q, qb = _terms(baselines, lo)
        self_q += qb.sum(1)
        q_b2 += (qb * b).sum(1)
        for snapshots, acc in zip(models, sums):
            a, p, pa = _terms(snapshots, lo)
            acc["self_p"] += pa.sum(1)
            acc["p_a2"] += (pa * a).sum(1)
            acc["p_b"] += p @ b.T
            acc["q_a"] += a @ q.T
            acc["pa_b"] += pa @ b.T
            acc["qb_a"] += a @ qb.T
    c_q = np.exp(FLOAT16_UNIT * np.array([-np.min(x.astype(np.float64)) for x in baselines]) + FLOAT16_TINY)
    return [_finish(snapshots, acc, self_q, q_b2, c_q, n_positions) for snapshots, acc in zip(models, sums)]


PRODUCTS = ("p_b", "q_a", "pa_b", "qb_a")  # sum p b, sum a q, sum p a b, sum a q b: snapshot x baseline


def _finish(snapshots, acc: dict, self_q, q_b2, c_q, n_positions: int) -> tuple[np.ndarray, np.ndarray]:
    """The KL and its bound from the sums over positions (see `divergences`)."""
    self_p, p_a2, p_b, q_a, pa_b, qb_a = acc["self_p"], acc["p_a2"], *(acc[k] for k in PRODUCTS)
    kl = np.maximum((self_p[:, None] + self_q[None, :] - p_b - q_a) / n_positions, 0.0)  # >= 0 up to rounding
    # bound, both directions, with each stored log-probability's error e(a) <= u|a| + t (charlm.predictions):
    # e^{u max|a| + t} sum p [u (|a| + 1)(|a| + |b|) + t (|a| + |b| + 2)]; logs are <= 0, so |a| |b| = a b
    u, t = FLOAT16_UNIT, FLOAT16_TINY
    c_p = np.exp(u * np.array([-np.min(x.astype(np.float64)) for x in snapshots]) + t)
    far_p, far_q = -self_p[:, None] - p_b, -self_q[None, :] - q_a  # sum p (|a| + |b|), sum q (|a| + |b|)
    one_way_p = c_p[:, None] * (u * (p_a2[:, None] + pa_b + far_p) + t * (far_p + 2 * n_positions))
    one_way_q = c_q[None, :] * (u * (q_b2[None, :] + qb_a + far_q) + t * (far_q + 2 * n_positions))
    return kl, (one_way_p + one_way_q) / n_positions
