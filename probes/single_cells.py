"""Single-cell probes: every cell of a representation alone as a one-dimensional probe, all cells at once.

The control that asks whether a feature is held by one unit (Karpathy et al. sec 4.2's interpretable cells) or
spread over many (the linear probes of probes/probe.py): fitted on the training rows only, scored on the held-out
block, with the same scores as the probes (balanced accuracy for a binary feature, R^2 for a count).
"""

from __future__ import annotations

import numpy as np


class SingleCells:
    """Every cell alone as a probe, fitted on the training rows: all cells at once, for any number of features.

    Binary features: a threshold on the cell, in either direction, chosen for the best training balanced accuracy
    (the one-dimensional linear classifier). Counts: least squares on the cell (slope and intercept), R^2. The
    training rows are sorted once per cell, so each feature costs a few cumulative sums.
    """

    def __init__(self, X: np.ndarray, test: np.ndarray):
        self.test = np.asarray(test, dtype=bool)
        self.Xtr, self.Xte = X[~self.test], X[self.test]
        columns = np.ascontiguousarray(self.Xtr.T)  # (d, n_train): one row per cell, sorted along its memory
        # The order of equal values does not matter (a threshold is only placed between different values), except in
        # a constant cell, where the stable order (the rows' own) decides the direction of its meaningless threshold.
        self.order = np.argsort(columns, axis=1)  # (d, n_train)
        self.sorted = np.take_along_axis(columns, self.order, 1)
        self.between = np.hstack([self.sorted[:, 1:] > self.sorted[:, :-1], np.zeros((X.shape[1], 1), dtype=bool)])
        self.order[~self.between.any(1)] = np.arange(columns.shape[1])

    def scores(self, labels: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(train score, test score), each (d,): balanced accuracy (binary) or R^2 (count) of each cell alone."""
        ytr, yte = labels[~self.test], labels[self.test]
        return self._count(ytr, yte) if kind == "count" else self._binary(ytr, yte)

    def _count(self, ytr, yte):
        mean_x, mean_y = self.Xtr.mean(0), ytr.mean()
        slope = ((self.Xtr - mean_x) * (ytr - mean_y)[:, None]).mean(0) / np.maximum(self.Xtr.var(0), 1e-12)
        intercept = mean_y - slope * mean_x

        def r2(X, y):
            if y.size == 0:  # no test rows (a ranking fitted and read on the same text): no test score
                return np.full(X.shape[1], np.nan)
            residual = ((y[:, None] - (intercept + slope * X)) ** 2).sum(0)
            return 1.0 - residual / max(((y - y.mean()) ** 2).sum(), 1e-12)

        return r2(self.Xtr, ytr), r2(self.Xte, yte)

    def _binary(self, ytr, yte):
        positive = ytr == ytr.max()
        P, N = max(positive.sum(), 1), max((~positive).sum(), 1)
        pos_sorted = positive[self.order]  # (d, n)
        positives_below = np.cumsum(pos_sorted, 1)  # at or below sorted row k; the negatives: k + 1 minus these
        negatives_below = np.arange(1, pos_sorted.shape[1] + 1) - positives_below
        # threshold after sorted row k, positive above it: recall of positives (above) and negatives (at or below)
        balanced = 0.5 * ((P - positives_below) / P + negatives_below / N)  # (d, n)
        up = np.where(self.between, balanced, -np.inf).argmax(1)
        down = np.where(self.between, balanced, np.inf).argmin(1)  # the same threshold, positive below it
        cols = np.arange(balanced.shape[0])
        use_down = 1.0 - balanced[cols, down] > balanced[cols, up]
        k = np.where(use_down, down, up)
        threshold = 0.5 * (self.sorted[cols, k] + self.sorted[cols, np.minimum(k + 1, self.sorted.shape[1] - 1)])
        train_score = np.where(use_down, 1.0 - balanced[cols, down], balanced[cols, up])
        train_score = np.where(self.between.any(1), train_score, 0.5)  # a constant cell: chance

        pred = (self.Xte > threshold) != use_down  # (n_test, d)
        truth = (yte == ytr.max())[:, None]
        recall_pos = (pred & truth).sum(0) / max(truth.sum(), 1)
        recall_neg = (~pred & ~truth).sum(0) / max((~truth).sum(), 1)
        test_score = 0.5 * (recall_pos + recall_neg) if yte.size else np.full(cols.size, np.nan)
        return train_score, test_score
