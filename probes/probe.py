"""Linear probes as scikit-learn estimators, and Hewitt and Liang's control tasks (single-cell probes: single_cells.py).

A probe reads a representation (one internal of one layer, rows = characters) and predicts a feature of the
text (`probes.features`). The rules that keep a probe honest (ANCHORS.md, "Probes and control tasks"):

* Train and test are different contiguous blocks of text (`block_split`; it, the control tasks and the baseline
  are probes/controls.py): neighbouring characters are nearly the same state, so a random per-character split
  would test on the training data.
* Everything learned comes from the training rows only: the standardisation, the weights, and the
  regularisation strength, chosen by cross-validation over contiguous blocks *of the training rows*.
* Selectivity (Hewitt and Liang 2019, sec 3): the same probe, with the same hyperparameters, is fitted to a
  control task in which every character type (here: the byte just read) has one fixed random label drawn
  from the real label distribution. selectivity = task score - control score: what the representation
  encodes beyond what a probe could memorise from the character alone.

Hewitt and Liang's control can fail in both directions. A representation that encodes the byte just read lets a
probe memorise any random label per byte, so the character control sits at its ceiling and selectivity is about 0
(or below) by construction; a random label per trigram is often unlearnable, so that control sits at its floor and
selectivity is the task score itself. `control_informative` says when a control left room to measure anything. The
baseline that does not fail that way asks a different question: how well the same probe reads the feature off the
last k characters alone (`last_chars`, one-hot), so score - baseline is what the state holds beyond them.

Binary features are scored by balanced accuracy (the mean of the per-class recalls; 0.5 for any constant
guess), so that rare features (a sentence's first letter, 0.8 % of characters) do not hide behind the
majority class; plain accuracy and the majority rate are reported beside it. Counts are scored by R^2
(0 for predicting the mean).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV, Ridge
from sklearn.model_selection import GroupKFold, KFold, StratifiedGroupKFold
from sklearn.preprocessing import StandardScaler
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .controls import control_task

# scikit-learn 1.9 asks for these two to be explicit (plain L2, the simplified fitted attributes); older ones lack them
_LOGISTIC_CV_OPTIONS = {k: v for k, v in {"l1_ratios": (0.0,), "use_legacy_attributes": False}.items()
                        if k in LogisticRegressionCV().get_params()}  # fmt: skip
CS = (0.01, 0.1, 1.0)  # inverse L2 strengths searched for logistic probes (on standardised features)
ALPHAS = (1.0, 10.0, 100.0, 1000.0)  # L2 strengths searched for ridge probes


def contiguous_folds(n_samples: int, groups=None, cv: int = 3, classes=None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Cross-validation folds that never split a block: whole groups (one id per contiguous block of text), spread
    so that every fold holds each class where `classes` are given (StratifiedGroupKFold, else GroupKFold); or
    consecutive runs of rows (KFold without shuffling) when there are no groups."""
    if groups is not None:
        groups = np.asarray(groups)
        n_splits = min(cv, np.unique(groups).size)
        if n_splits < 2:
            raise ValueError("cross-validation needs at least 2 blocks of text in the training rows")
        if classes is not None:
            return list(StratifiedGroupKFold(n_splits).split(np.zeros(n_samples), classes, groups=groups))
        return list(GroupKFold(n_splits).split(np.zeros(n_samples), groups=groups))
    return list(KFold(min(cv, n_samples)).split(np.zeros(n_samples)))


class ProbeRows:
    """The rows of one representation X that probes read, standardised once on the training rows.

    train: every `train_stride`-th row outside `test` (all rows without `test`); `train_rows` are those rows
    standardised on themselves, `test_rows` the test rows with that same standardisation: what every probe fitted on
    X[train] computes for itself, so handing one ProbeRows to the probe of each feature and each control task changes
    no number, only how often the arrays (and the ridge's X^T X of each cross-validation fold) are computed.
    """

    def __init__(self, X, test=None, train_stride: int = 1):
        X = np.asarray(X)
        self.test = np.zeros(X.shape[0], dtype=bool) if test is None else np.asarray(test, dtype=bool)
        self.train_stride = train_stride
        self.train = np.flatnonzero(~self.test)[::train_stride]
        self.n_features = X.shape[1]
        X_train = X[self.train]
        self.scaler = StandardScaler().fit(X_train)
        self.train_rows = self.scaler.transform(X_train)
        self.test_rows = self.scaler.transform(X[self.test]) if self.test.any() else None
        self._train_rows64 = None
        self._ridge = {}  # rows (their indices into train_rows) -> _RidgeRows

    @property
    def train_rows64(self) -> np.ndarray:
        """The standardised training rows in float64, C order: what LogisticRegressionCV converts them to."""
        if self._train_rows64 is None:
            self._train_rows64 = np.asarray(self.train_rows, dtype=np.float64, order="C")
        return self._train_rows64

    def ridge(self, rows: np.ndarray | None = None) -> _RidgeRows:
        """The ridge solver of these training rows (all, or the subset `rows` of a fold), made once."""
        key = None if rows is None else np.asarray(rows).tobytes()
        if key not in self._ridge:
            self._ridge[key] = _RidgeRows(self.train_rows if rows is None else self.train_rows[rows])
        return self._ridge[key]


class _RidgeRows:
    """sklearn's Ridge (fit_intercept, solver "auto", that is Cholesky on X^T X + alpha I) on fixed rows for any
    number of targets and strengths: the rows centred and X^T X formed once, then the very operations of Ridge.fit in
    the same order and dtype (`tests/test_probes.py` holds it to Ridge's coef_ and intercept_, bit for bit). Where
    Ridge takes another route (more features than rows, a singular system) sklearn's own Ridge fits instead."""

    def __init__(self, X: np.ndarray):
        self.X = X
        self.own = X.ndim == 2 and X.dtype in (np.float32, np.float64) and X.shape[1] <= X.shape[0]
        if self.own:  # Ridge: check_array(copy=True); X_offset = average; X -= X_offset (sklearn _preprocess_data)
            Xc = np.array(X, copy=True)
            self.offset = np.asarray(np.average(Xc, axis=0)).astype(Xc.dtype, copy=False)
            Xc -= self.offset
            self.centred, self.gram = Xc, Xc.T @ Xc

    def fit(self, y: np.ndarray, alpha: float) -> Ridge:
        """A fitted Ridge(alpha) on these rows and targets y (1-D)."""
        model = Ridge(alpha=alpha)
        if self.own:
            try:
                coef, intercept = self._solve(y, alpha)
            except linalg.LinAlgError:  # Ridge falls back on its SVD solver here
                return model.fit(self.X, y)
            model.coef_, model.intercept_ = coef, intercept
            model.n_features_in_, model.n_iter_, model.solver_ = self.X.shape[1], None, "cholesky"
            return model
        return model.fit(self.X, y)

    def _solve(self, y, alpha):
        Xc, d = self.centred, self.centred.shape[1]
        y = np.array(y, dtype=Xc.dtype, copy=True)  # _preprocess_data: y in X's dtype, centred
        y_offset = np.asarray(np.average(y, axis=0))
        y -= y_offset
        Xy = Xc.T @ y.reshape(-1, 1)  # _solve_cholesky
        A = self.gram.copy()
        A.flat[:: d + 1] += np.asarray(alpha, dtype=Xc.dtype).ravel()[0]
        # An ill-conditioned float32 X^T X (near-constant cells): sklearn's Ridge warns and keeps this same solution;
        # here it is kept without the warning, which a report would print once per probe.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", linalg.LinAlgWarning)
            coef = linalg.solve(A, Xy, assume_a="pos", overwrite_a=True).T.reshape(-1)
        coef = np.divide(coef.astype(self.offset.dtype, copy=False), np.ones(d, dtype=Xc.dtype))  # _set_intercept
        return coef, y_offset - self.offset @ coef


def _linear_scores(model, X):
    """X @ coef_ + intercept_ as sklearn's linear models compute it (decision_function, LinearModel.predict)."""
    coef = model.coef_
    return X @ coef + model.intercept_ if coef.ndim == 1 else X @ coef.T + model.intercept_


def _linear_predict(model, X):
    """model.predict(X) of a fitted sklearn linear model, without its input checks: the same numbers."""
    scores = _linear_scores(model, X)
    if not hasattr(model, "classes_"):
        return scores
    if scores.ndim > 1 and scores.shape[1] == 1:
        scores = scores.reshape(-1)
    indices = (scores > 0).astype(np.intp) if scores.ndim == 1 else scores.argmax(1)
    return model.classes_.take(indices, axis=0)


def _balanced_accuracy_scorer(estimator, X, y) -> float:
    """sklearn's "balanced_accuracy" scorer, for the models LogisticRegressionCV scores on each fold and strength:
    the same predictions and the same number, without validating X again at every call."""
    return balanced_accuracy(y, _linear_predict(estimator, X))


class _LinearProbe(BaseEstimator):
    """Standardise on the rows given to fit, then a linear model whose L2 strength is fixed, or chosen by
    cross-validation over contiguous folds of those rows (sklearn's LogisticRegressionCV, and RidgeCV's search
    written out, which refit the best strength on all of them). The inner folds share the one standardisation of the
    training rows: only the choice of strength could feel that, never the test rows, which fit does not receive."""

    def fit_rows(self, rows: ProbeRows, y, groups=None):
        """fit(X[rows.train], y, groups) from rows already standardised (`ProbeRows`): the same probe."""
        self.n_features_in_ = rows.n_features
        return self._fit_rows(rows, *self._targets(np.asarray(y)), groups)

    def _fit_rows(self, rows: ProbeRows, y, groups):
        self.scaler_ = rows.scaler
        fixed = getattr(self, self._strength_name)
        n = rows.train_rows.shape[0]
        if fixed is None and n >= 2 * self.cv:
            classes = y if isinstance(self, ClassifierMixin) else None
            self.model_, strength = self._search(rows, y, contiguous_folds(n, groups, self.cv, classes))
        else:
            grid = self._grid()
            strength = fixed if fixed is not None else grid[len(grid) // 2]
            self.model_ = self._fixed(rows, y, strength)
        setattr(self, self._strength_name + "_", float(strength))
        standardised = np.atleast_2d(self.model_.coef_)  # (n_outputs, d): weights on standardised features
        self.importance_ = np.abs(standardised).max(0)  # |w| x std of each input (NeuroX's ranking, standardised)
        self.coef_ = self.model_.coef_ / self.scaler_.scale_  # the same weights on raw activations
        intercept = self.model_.intercept_ - standardised @ (self.scaler_.mean_ / self.scaler_.scale_)
        self.intercept_ = float(intercept[0]) if np.ndim(self.model_.intercept_) == 0 else intercept
        return self

    def _standardised(self, X):
        check_is_fitted(self, "model_")
        return self.scaler_.transform(validate_data(self, X, reset=False))

    def predict(self, X):
        Xs = self._standardised(X)
        return self.model_.predict(Xs)

    def standardise(self, X: np.ndarray) -> np.ndarray:
        """scaler_.transform(X) for a float array the caller vouches for (finite, n_features_in_ columns), without
        its checks: the same operations, (X - mean) / scale in X's dtype."""
        Xs = np.array(X, dtype=X.dtype if X.dtype in (np.float32, np.float64) else np.float64, copy=True)
        Xs -= self.scaler_.mean_.astype(Xs.dtype)
        Xs /= self.scaler_.scale_.astype(Xs.dtype)
        return Xs

    def predict_standardised(self, Xs: np.ndarray) -> np.ndarray:
        """model_.predict(Xs) for rows already standardised (`standardise`, ProbeRows.test_rows): the same numbers
        as predict, without sklearn's checks."""
        return _linear_predict(self.model_, Xs)

    def predict_rows(self, X: np.ndarray) -> np.ndarray:
        """predict(X) for a float array the caller vouches for: the same numbers, without sklearn's checks."""
        return self.predict_standardised(self.standardise(X))


class _counting_unconverged(warnings.catch_warnings):
    """Within it, the lbfgs fits that end before converging (sklearn's ConvergenceWarning: at the max_iter cap, or
    a failed line search) are counted on the probe (`unconverged_fits_`), not printed: sklearn warns once per such
    fit, and a report would print dozens of the same lines. The fits and their numbers are unchanged."""

    def __init__(self, probe):
        super().__init__(record=True)
        self.probe = probe

    def __enter__(self):
        self.caught = super().__enter__()
        warnings.simplefilter("always", ConvergenceWarning)
        return self.caught

    def __exit__(self, *exc):
        out = super().__exit__(*exc)
        for w in self.caught:
            if issubclass(w.category, ConvergenceWarning):
                self.probe.unconverged_fits_ = getattr(self.probe, "unconverged_fits_", 0) + 1
            else:  # every other warning is the user's to see, as it would have been
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        return out


class LogisticProbe(ClassifierMixin, _LinearProbe):
    """L2 logistic regression on standardised activations, classes weighted inversely to their frequency.

    C: a fixed inverse strength (the control task reuses the task's), or None to choose it from `Cs` by
    cross-validation (balanced accuracy) over `cv` contiguous folds of the training rows (blocks: `groups`).
    """

    _strength_name = "C"

    def __init__(self, C=None, Cs=CS, cv=3, max_iter=300):
        self.C = C
        self.Cs = Cs
        self.cv = cv
        self.max_iter = max_iter

    def _grid(self):
        return tuple(self.Cs)

    def _search(self, rows, y, folds):
        with _counting_unconverged(self):
            model = LogisticRegressionCV(Cs=list(self.Cs), cv=folds, class_weight="balanced",
                                         scoring=_balanced_accuracy_scorer, max_iter=self.max_iter,
                                         **_LOGISTIC_CV_OPTIONS).fit(rows.train_rows64, y)  # fmt: skip
        return model, float(np.ravel(model.C_)[0])

    def _fixed(self, rows, y, C):  # LogisticRegression keeps float32 rows (LogisticRegressionCV converts them)
        with _counting_unconverged(self):
            return LogisticRegression(C=C, class_weight="balanced", max_iter=self.max_iter).fit(rows.train_rows, y)

    def _targets(self, y):
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        if self.classes_.size < 2:
            raise ValueError("a probe needs 2 classes in its training labels, got 1 class")
        return (y,)

    def _fit_rows(self, rows, y, groups):
        self.unconverged_fits_ = 0  # lbfgs fits (folds x strengths, and the final fit) that ended unconverged
        super()._fit_rows(rows, y, groups)
        self.n_iter_ = np.atleast_1d(self.model_.n_iter_)
        return self

    def fit(self, X, y, groups=None):
        X, y = validate_data(self, X, y)
        return self._fit_rows(ProbeRows(X), *self._targets(y), groups)

    def decision_function(self, X):
        Xs = self._standardised(X)
        return self.model_.decision_function(Xs)

    def predict_proba(self, X):
        Xs = self._standardised(X)
        return self.model_.predict_proba(Xs)


class RidgeProbe(RegressorMixin, _LinearProbe):
    """Ridge regression on standardised activations; alpha fixed, or chosen from `alphas` by cross-validation
    (R^2) over `cv` contiguous folds of the training rows.

    The search is RidgeCV(alphas, cv=folds, scoring="r2") written out (GridSearchCV over Ridge: the mean R^2 over
    the folds, the first best strength, refitted on all rows), so that the folds' X^T X is formed once for every
    strength, and, through ProbeRows, for every feature and control on the same rows."""

    _strength_name = "alpha"

    def __init__(self, alpha=None, alphas=ALPHAS, cv=3):
        self.alpha = alpha
        self.alphas = alphas
        self.cv = cv

    def _grid(self):
        return tuple(self.alphas)

    def _search(self, rows, y, folds):
        alphas = np.asarray(list(self.alphas))
        scores = np.empty((alphas.size, len(folds)))
        for j, (train, test) in enumerate(folds):
            solver = rows.ridge(train)
            for i, alpha in enumerate(alphas):
                scores[i, j] = r2(y[test], _linear_scores(solver.fit(y[train], alpha), rows.train_rows[test]))
        means = np.average(scores, axis=1)  # GridSearchCV: rank by the mean score, NaN last, ties to the first
        best = 0 if np.isnan(means).all() else int(np.argmax(np.nan_to_num(means, nan=np.nanmin(means) - 1)))
        return rows.ridge().fit(y, alphas[best]), float(alphas[best])

    def _fixed(self, rows, y, alpha):
        return rows.ridge().fit(y, alpha)

    def _targets(self, y):
        return (np.asarray(y).astype(np.float64),)

    def fit(self, X, y, groups=None):
        X, y = validate_data(self, X, y, y_numeric=True)
        return self._fit_rows(ProbeRows(X), *self._targets(y), groups)


def make_probe(kind: str, **params) -> _LinearProbe:
    """The probe of a feature kind: "binary" -> LogisticProbe, "count" -> RidgeProbe."""
    if kind == "binary":
        return LogisticProbe(**params)
    if kind == "count":
        return RidgeProbe(**params)
    raise ValueError(f"unknown feature kind {kind!r}")


def balanced_accuracy(y_true, y_pred) -> float:
    """sklearn's balanced_accuracy_score (the mean recall over the classes of y_true) from one bincount of the
    confusion matrix: the same number, without its input checks (1-D class labels)."""
    y_true, y_pred = np.asarray(y_true).ravel(), np.asarray(y_pred).ravel()
    if y_true.size and y_true.dtype.kind in "biu" and y_pred.dtype.kind in "biu":
        t, p = y_true.astype(np.int64), y_pred.astype(np.int64)
        lo = min(t.min(), p.min())
        k = int(max(t.max(), p.max()) - lo + 1)
        counts = np.bincount((t - lo) * k + (p - lo), minlength=k * k).reshape(k, k)
        present = (counts.sum(0) + counts.sum(1)) > 0  # the labels of either (sklearn's unique_labels)
        counts = counts[np.ix_(present, present)]
    else:
        labels, codes = np.unique(np.concatenate([y_true, y_pred]), return_inverse=True)
        k = labels.size
        counts = np.bincount(codes[: y_true.size] * k + codes[y_true.size :], minlength=k * k).reshape(k, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_class = np.diagonal(counts) / counts.sum(axis=1)
    if np.isnan(per_class).any():
        warnings.warn("y_pred contains classes not in y_true", stacklevel=2)
        per_class = per_class[~np.isnan(per_class)]
    return float(np.mean(per_class))


def r2(y_true, y_pred) -> float:
    """sklearn's r2_score of 1-D targets (the same dtype rules, operations and force_finite cases), without its
    input checks: the same number."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    floats = [a.dtype for a in (y_true, y_pred) if a.dtype.kind == "f"]
    dtype = np.result_type(*floats) if floats else np.float64
    y_true, y_pred = y_true.astype(dtype).reshape(-1, 1), y_pred.astype(dtype).reshape(-1, 1)
    if y_pred.shape[0] < 2:
        return float("nan")
    with np.errstate(over="ignore"):  # a diverged float32 prediction: the inf r2_score also gives, without its warning
        numerator = np.sum((y_true - y_pred) ** 2, axis=0)
        denominator = np.sum((y_true - np.asarray(np.average(y_true, axis=0))) ** 2, axis=0)
    out = np.ones(1, dtype=dtype)
    valid = (denominator != 0) & (numerator != 0)
    out[valid] = 1 - (numerator[valid] / denominator[valid])
    out[(numerator != 0) & (denominator == 0)] = 0.0
    return float(np.average(out))


def score(kind: str, y_true, y_pred) -> float:
    """The task metric: balanced accuracy for binary features, R^2 for counts (sklearn's numbers, computed here)."""
    return balanced_accuracy(y_true, y_pred) if kind == "binary" else r2(y_true, y_pred)


@dataclass
class ProbeResult:
    score: float  # task metric on the test rows (balanced accuracy or R^2)
    baseline: float  # the same metric of the majority class / the training mean (0.5 or about 0)
    controls: dict[str, float]  # per control task (by its name), its metric: same probe, same hyperparameters
    accuracy: float  # plain accuracy (binary) or NaN
    majority: float  # share of the majority class in the test rows (binary) or NaN
    strength: float  # the chosen C (logistic) or alpha (ridge)
    probe: _LinearProbe  # the fitted task probe (fitted on the training rows only)
    unconverged: int = 0  # lbfgs fits of the task probe and its controls that ended unconverged (logistic only)

    def selectivity(self, control: str) -> float:
        """Hewitt and Liang's selectivity: task score minus that control's score."""
        return self.score - self.controls[control]


def fit_probe(
    X: np.ndarray,
    labels: np.ndarray,
    test: np.ndarray,
    groups: np.ndarray,
    kind: str,
    control_types: dict[str, np.ndarray] | None = None,
    train_stride: int = 1,
    cv: int = 3,
    grid: tuple | None = None,
    seed: int = 0,
    rows: ProbeRows | None = None,
) -> ProbeResult:
    """Fit a probe on the training rows and score it on the test rows; the same for each control task.

    X (n, d) activations; labels, groups (n,); test (n,) bool; control_types {name: (n,) types}. Only rows of
    X[~test] (every `train_stride`-th: neighbouring characters carry nearly the same state) are given to `fit`.
    rows: `ProbeRows(X, test, train_stride)`, made once where many features are probed on the same X (else here).
    """
    if rows is None:
        rows = ProbeRows(X, test, train_stride)
    elif rows.train_stride != train_stride or not np.array_equal(rows.test, test):
        raise ValueError("rows were made for other test rows or another train_stride")
    train = rows.train
    params = {"cv": cv} | ({} if grid is None else {"Cs" if kind == "binary" else "alphas": tuple(grid)})
    probe = make_probe(kind, **params).fit_rows(rows, labels[train], groups=groups[train])
    strength = probe.C_ if kind == "binary" else probe.alpha_
    predicted = probe.predict_standardised(rows.test_rows)
    task_score = score(kind, labels[test], predicted)

    controls = {}
    unconverged = getattr(probe, "unconverged_fits_", 0)
    fixed = {"C" if kind == "binary" else "alpha": strength}
    for name, types in (control_types or {}).items():
        control_labels = control_task(types, labels, kind, test, seed)
        if kind == "binary" and np.unique(control_labels[train]).size < 2:
            controls[name] = 0.5  # no draw gave the control two classes: a constant guess, at chance
            continue
        control_probe = make_probe(kind, **params, **fixed).fit_rows(rows, control_labels[train])
        controls[name] = score(kind, control_labels[test], control_probe.predict_standardised(rows.test_rows))
        unconverged += getattr(control_probe, "unconverged_fits_", 0)

    if kind == "binary":
        majority_class = np.bincount(labels[train]).argmax()
        baseline = score(kind, labels[test], np.full(int(test.sum()), majority_class))
        accuracy = float(np.average(labels[test] == predicted))  # sklearn's accuracy_score
        majority = float(np.mean(labels[test] == majority_class))
    else:
        baseline = score(kind, labels[test], np.full(int(test.sum()), labels[train].mean()))
        accuracy = majority = float("nan")
    return ProbeResult(task_score, baseline, controls, accuracy, majority, float(strength), probe, unconverged)
