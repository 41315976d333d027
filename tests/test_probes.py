"""probes/: labels on hand-written text, probe estimators, control tasks, single cells, zeroing cells, the viewer."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch
from conftest import fake_corpus_file
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV, Ridge, RidgeCV
from sklearn.metrics import balanced_accuracy_score, r2_score
from sklearn.model_selection import GroupKFold, cross_val_score
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks
from test_cells import COUNTER, line_counter_lstm

from charlm.model import CharLM, ModelConfig
from corpora import run_cli
from probes import features as F
from probes import view
from probes.activations import more_windows, run_ablated, run_zeroed, trace_windows, window_batch, window_starts
from probes.controls import block_split, context_types, control_informative, control_task, last_chars
from probes.probe import (
    _LOGISTIC_CV_OPTIONS,
    LogisticProbe,
    ProbeRows,
    RidgeProbe,
    _RidgeRows,
    balanced_accuracy,
    contiguous_folds,
    fit_probe,
    make_probe,
    r2,
)
from probes.single_cells import SingleCells


def labels(feature: str, text: str, style: str = F.PROSE) -> list[int]:
    return F.FEATURES[(style, feature)].labels(text.encode()).tolist()


def marked(text: str, feature: str, style: str = F.PROSE) -> str:
    """The characters whose label is on, '_' elsewhere: a hand-checkable picture of a binary label."""
    return "".join(ch if on else "_" for ch, on in zip(text, labels(feature, text, style)))


# ------------------------------------------------------------------------------------------ labels: prose
# The convention: label t is the state after reading character t (an opening delimiter is inside, a closing one
# is outside again).


def test_quotes_open_on_the_opening_quote_and_close_after_the_closing_one():
    assert marked('a "bc" d', "in_quotes") == '__"bc___'
    # A quote running on into the next paragraph is reopened there, not closed: the paragraph break resets.
    assert marked('He said "one\n\n"two" ok', "in_quotes") == '________"one\n_"two____'
    assert labels("in_quotes", '"x\r\n\r\ny') == [1, 1, 1, 1, 1, 0, 0]  # CRLF paragraphs too


def test_line_position_counts_characters_since_the_newline():
    assert labels("line_position", "ab\ncd\n\nx") == [1, 2, 0, 1, 2, 0, 0, 1]
    assert labels("line_position", "ab\r\nc") == [1, 2, 3, 0, 1]  # the \r is part of its line


def test_parentheses_nest_and_close_after_the_closing_one():
    assert marked("a(b(c)d)e", "in_parens") == "_(b(c)d__"
    assert marked("x) (y\n\nz)", "in_parens") == "___(y\n___"  # a stray ')' never goes below 0; paragraphs close


def test_word_position_and_sentence_starts():
    assert labels("word_position", "I'm ok, no.") == [1, 2, 3, 0, 1, 2, 0, 0, 1, 2, 0]
    text = 'End. "The cat." And so. he went! (Yes)'
    assert marked(text, "sentence_start") == "______T" + "_" * 9 + "A" + "_" * 17 + "Y" + "___"


# ------------------------------------------------------------------------------------------ labels: C


def test_comments_strings_and_their_delimiters():
    code = 'a = "x/*y\\"z"; /* c "q" */ b; // d\ne'
    assert marked(code, "in_comment", F.CODE) == "_" * 16 + '* c "q" *' + "_" * 6 + "/ d" + "__"
    assert marked(code, "in_string", F.CODE) == '____"x/*y\\"z' + "_" * 24
    assert marked("c = 'x'; d = '\\'';", "in_string", F.CODE) == "____'x_______'\\'__"


def test_brace_depth_ignores_braces_in_strings_and_comments():
    code = 'f() {\n\tif (x) { s = "}"; /* { */ }\n}\n}'
    depth = labels("brace_depth", code, F.CODE)
    assert depth[code.index("{")] == 1  # the '{' itself is already inside
    assert depth[code.index("{", code.index("if"))] == 2
    assert depth[code.index('"}"') + 1] == 2  # the brace in the string does not count
    assert depth[code.index("/* {") + 3] == 2  # nor the one in the comment
    assert depth[code.index("}\n}")] == 1 and depth[code.index("}\n}") + 2] == 0
    assert depth[-1] == 0  # a stray closing brace never goes below 0


def test_conditions_of_if_for_while_only():
    code = "if (a(b)) x; for (i = 0; i < n; i++) y; foo (c); while(d) e;"
    assert marked(code, "in_condition", F.CODE) == "___(a(b)" + "_" * 9 + "(i = 0; i < n; i++" + "_" * 19 + "(d____"
    # an identifier that merely ends in "if" is not a keyword
    assert set(labels("in_condition", "elif (a) b;", F.CODE)) == {0}


def test_indentation_level_counts_tab_stops_read_so_far():
    text = "\tab\n  \tc\n        d\n"
    assert labels("indent_level", text, F.CODE) == [1, 1, 1, 0, 0, 0, 1, 1, 0] + [0] * 7 + [1, 1, 0]


def test_focus_positions_are_the_predictions_that_need_the_feature():
    line = F.FEATURES[(F.PROSE, "line_position")]
    assert line.focus_positions(b"ab\r\ncd\n").tolist() == [False, True, False, False, False, True, False]
    brace = F.FEATURES[(F.CODE, "brace_depth")]
    assert np.flatnonzero(brace.focus_positions(b"{ a; }\n")).tolist() == [4]
    indent = F.FEATURES[(F.CODE, "indent_level")]
    assert np.flatnonzero(indent.focus_positions(b"a\n\t\tb\n")).tolist() == [1, 2, 3, 5]


def test_window_labels_count_from_where_the_model_started_reading():
    """A window whose model started reading inside three braces: its depth counts only the braces it read."""
    text = b"{{{x{ab}}c}"
    brace = F.FEATURES[(F.CODE, "brace_depth")]
    start = text.index(b"ab")
    assert brace.labels(text)[start : start + 5].tolist() == [4, 4, 3, 2, 2]  # from the text's start
    labels, focus = F.window_labels(brace, text, [start], 5, warmup=1)  # the model read "{ab}}c" from zero
    assert labels.tolist() == [[1, 1, 0, 0, 0]]
    assert focus.tolist() == [[False, True, True, False, False]]  # the predictions of each '}'
    with pytest.raises(ValueError, match="warm-up"):
        F.window_labels(brace, text, [0], 5, warmup=1)


def test_feature_names_are_checked():
    assert [f.name for f in F.features_for(F.PROSE, ["in_quotes"])] == ["in_quotes"]
    with pytest.raises(F.UserError, match="unknown feature 'nope'"):
        F.features_for(F.PROSE, ["nope"])
    with pytest.raises(F.UserError, match="does not apply to prose"):
        F.features_for(F.PROSE, ["in_comment"])
    assert F.style_of("linux", b"") == F.CODE and F.style_of("warpeace", b"int x;") == F.PROSE
    assert F.text_style(b"int main(void) {\n\treturn 0;\n}\n" * 5) == F.CODE
    assert F.text_style(b"It was a dark night; the rain fell.\n" * 5) == F.PROSE


# ------------------------------------------------------------------------------------------ estimators


@parametrize_with_checks([LogisticProbe(), RidgeProbe()])
def test_probes_are_scikit_learn_estimators(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


def informative(n=1200, d=6, column=2, seed=0):
    """Activations in which one column carries the label (plus noise) and the others are noise."""
    rng = np.random.default_rng(seed)
    y = (np.sin(np.arange(n) / 25.0) > 0).astype(int)  # runs of 0s and 1s, as in text
    X = rng.normal(size=(n, d))
    X[:, column] = 3.0 * y + rng.normal(scale=0.5, size=n)
    return X, y, np.arange(n) // 100  # 12 contiguous blocks


def test_probes_work_with_cross_val_score_and_group_k_fold():
    X, y, groups = informative()
    scores = cross_val_score(LogisticProbe(cv=2), X, y, groups=groups, cv=GroupKFold(3), scoring="balanced_accuracy")
    assert scores.min() > 0.9
    counts = X[:, 2] * 2.0 + 1.0
    assert cross_val_score(RidgeProbe(cv=2), X, counts, groups=groups, cv=GroupKFold(3)).min() > 0.99


def test_a_probe_learns_from_the_informative_cell_and_ranks_it_first():
    X, y, groups = informative(column=4)
    probe = LogisticProbe().fit(X, y, groups=groups)
    assert probe.C_ in probe.Cs and probe.importance_.argmax() == 4
    assert probe.score(X, y) > 0.95
    # raw-space weights and intercept reproduce the decision function
    np.testing.assert_allclose(X @ probe.coef_.ravel() + probe.intercept_, probe.decision_function(X), atol=1e-8)
    single = SingleCells(X, block_split(groups, 4))
    train_score, test_score = single.scores(y, "binary")
    assert train_score.argmax() == 4 and test_score[4] > 0.95 and np.median(test_score) < 0.6


def test_single_cell_regression_matches_least_squares():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 3))
    y = 2.0 * X[:, 1] + rng.normal(scale=0.1, size=400)
    test = np.arange(400) >= 300
    _, test_score = SingleCells(X, test).scores(y, "count")
    slope, intercept = np.polyfit(X[~test, 1], y[~test], 1)
    residual = y[test] - (slope * X[test, 1] + intercept)
    assert test_score[1] == pytest.approx(1 - (residual**2).sum() / ((y[test] - y[test].mean()) ** 2).sum())
    assert test_score.argmax() == 1


def test_the_probe_never_sees_the_test_activations():
    """Garbage in the test rows changes the test score, and nothing the probe learned."""
    X, y, groups = informative(n=1600)
    test = block_split(groups, 4)
    types = (np.arange(y.size) % 7).astype(np.int64)
    clean = fit_probe(X, y, test, groups, "binary", {"character": types}, cv=2)
    garbage = X.copy()
    garbage[test] = np.random.default_rng(5).normal(scale=100.0, size=garbage[test].shape)
    dirty = fit_probe(garbage, y, test, groups, "binary", {"character": types}, cv=2)
    assert dirty.strength == clean.strength
    np.testing.assert_array_equal(dirty.probe.coef_, clean.probe.coef_)
    np.testing.assert_array_equal(dirty.probe.scaler_.mean_, clean.probe.scaler_.mean_)
    assert dirty.score < clean.score - 0.2  # the test rows were what got scored


def test_control_task_gives_every_type_one_label_from_the_real_distribution():
    types = np.array([3, 1, 3, 2, 1, 3, 2, 2])
    real = np.array([5, 7, 7, 5, 5, 7, 9, 5])
    test = np.arange(8) >= 6
    control = control_task(types, real, "count", test, seed=0)
    for t in np.unique(types):
        assert np.unique(control[types == t]).size == 1  # one label per type, in every split
    assert set(control) <= set(real)
    np.testing.assert_array_equal(control, control_task(types, real, "count", test, seed=0))  # fixed by the seed
    assert context_types(np.array([1, 2, 3, 4]), np.array([2, 3]), 3).tolist() == [1 * 65536 + 2 * 256 + 3,
                                                                                   2 * 65536 + 3 * 256 + 4]  # fmt: skip


def test_selectivity_tells_a_tracked_state_from_the_character_just_read():
    """Known by construction: a representation of the character alone makes the control easy and the task hard;
    one that carries the feature and not the character makes the task easy and the control hard."""
    rng = np.random.default_rng(0)
    n = 3000
    chars = rng.integers(0, 20, size=n)
    feature = (np.sin(np.arange(n) / 30.0) > 0).astype(int)  # a state held across characters
    groups = np.arange(n) // 150
    test = block_split(groups, 4)
    one_hot = np.eye(20)[chars] + rng.normal(scale=0.05, size=(n, 20))
    tracking = np.c_[feature + rng.normal(scale=0.1, size=n), rng.normal(size=(n, 5))]
    by_char = fit_probe(one_hot, feature, test, groups, "binary", {"character": chars}, cv=2)
    by_state = fit_probe(tracking, feature, test, groups, "binary", {"character": chars}, cv=2)
    assert by_char.controls["character"] > 0.95 and by_char.score < 0.65
    assert by_state.score > 0.95 and by_state.controls["character"] < 0.65
    assert by_state.selectivity("character") > 0.3 > -0.3 > by_char.selectivity("character")


def test_logistic_fits_that_stop_at_the_iteration_cap_are_counted_not_printed():
    """sklearn warns once per lbfgs fit that ends unconverged; a report would print dozens of those blocks. The probe
    counts them instead (as many as sklearn's own search warns), the result carries them with the controls', and its
    numbers are those of the same fit with the warnings left on."""
    rng = np.random.default_rng(0)
    n, d = 1200, 40
    X = rng.normal(size=(n, d))
    y = (X[:, :5].sum(1) + rng.normal(scale=0.5, size=n) > 0).astype(int)
    groups = np.arange(n) // 100
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning that escapes fails the test
        capped = LogisticProbe(max_iter=2).fit(X, y, groups)
        converged = LogisticProbe(max_iter=1000).fit(X, y, groups)
        fixed = LogisticProbe(C=1.0, max_iter=2).fit(X, y)
    with warnings.catch_warnings(record=True) as caught:  # sklearn's own search on the same rows and folds
        warnings.simplefilter("always")
        folds = contiguous_folds(n, groups, 3, y)
        Xs = StandardScaler().fit_transform(X)
        reference = LogisticRegressionCV(Cs=list(capped.Cs), cv=folds, class_weight="balanced", max_iter=2,
                                         scoring="balanced_accuracy", **_LOGISTIC_CV_OPTIONS).fit(Xs, y)  # fmt: skip
    assert capped.unconverged_fits_ == sum(w.category.__name__ == "ConvergenceWarning" for w in caught) > 3
    assert np.allclose(capped.model_.coef_, reference.coef_)
    assert converged.unconverged_fits_ == 0 and fixed.unconverged_fits_ == 1
    test = block_split(groups, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = fit_probe(X, y, test, groups, "binary", {"character": rng.integers(0, 5, size=n)}, cv=2)
    probe_only = fit_probe(X, y, test, groups, "binary", None, cv=2)
    assert result.unconverged == probe_only.unconverged == 0  # lbfgs's default cap of 300 is enough here
    assert fit_probe(X, y.astype(float), test, groups, "count").unconverged == 0  # ridge has no iterations


def test_last_chars_codes_the_bytes_just_read_and_its_baseline_sees_no_further():
    rng = np.random.default_rng(0)
    text = rng.choice(np.frombuffer(b"abcde", dtype=np.uint8), size=4000)
    positions = np.arange(10, 4000)
    X = last_chars(text, positions, 3)
    assert X.shape == (positions.size, 15) and (X.sum(1) == 3).all()
    for back in range(3):  # block `back` is the byte read `back` characters before
        assert (X[:, 5 * back : 5 * back + 5].argmax(1) == text[positions - back] - ord("a")).all()
    with pytest.raises(ValueError, match="2 characters before"):
        last_chars(text, np.array([1, 5]), 3)
    groups = positions // 200
    test = block_split(groups, 4)
    five_back = (text[positions - 5] == ord("a")).astype(int)  # out of reach of the last 3, within the last 10
    near = fit_probe(last_chars(text, positions, 3), five_back, test, groups, "binary", cv=2)
    far = fit_probe(last_chars(text, positions, 10), five_back, test, groups, "binary", cv=2)
    assert near.score < 0.6 and far.score > 0.99


def test_a_control_is_informative_only_away_from_chance_and_from_the_ceiling():
    assert control_informative(0.7, "binary") and control_informative(0.3, "count")
    assert not control_informative(0.97, "binary") and not control_informative(0.55, "binary")  # ceiling, chance
    assert not control_informative(0.02, "count") and not control_informative(-0.4, "count")  # floor
    assert not control_informative(float("nan"), "count")
    assert control_informative(0.93, "binary", margin=0.05) and not control_informative(0.93, "binary")


# ---------------------------------------------------------------------------------- fast paths: sklearn's numbers


def test_balanced_accuracy_and_r2_are_sklearns_numbers():
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # y_pred classes not in y_true, R^2 of constant targets
        for trial in range(40):
            n, k, shift = int(rng.integers(2, 300)), int(rng.integers(2, 5)), trial % 3
            t, p = rng.integers(0, k, n) - shift, rng.integers(0, k + trial % 2, n) - shift
            assert balanced_accuracy(t, p) == balanced_accuracy_score(t, p)
            assert balanced_accuracy(t * 1.0, p * 1.0) == balanced_accuracy_score(t * 1.0, p * 1.0)
            y = rng.integers(0, 9, n) * (trial % 5 > 0)  # every fifth constant
            for pred in ((y + rng.normal(size=n)).astype(np.float32), y + rng.normal(size=n), y * 1.0):
                assert r2(y, pred) == r2_score(y, pred)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_ridge_rows_are_sklearns_ridge_bit_for_bit(dtype):
    rng = np.random.default_rng(1)
    for shape in ((300, 12), (40, 40), (10, 20)):  # the last: more features than rows, sklearn's own route
        X = rng.normal(size=shape).astype(dtype)
        y = 2.0 * X[:, 0] + rng.normal(size=shape[0])
        solver = _RidgeRows(X)
        for alpha in (0.5, 10.0, np.float64(1000.0)):
            ours, theirs = solver.fit(y, alpha), Ridge(alpha=alpha).fit(X, y)
            np.testing.assert_array_equal(ours.coef_, theirs.coef_)
            np.testing.assert_array_equal(ours.intercept_, theirs.intercept_)
            np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


def test_probes_are_the_sklearn_searches_they_replace_and_fit_probe_the_same_on_shared_rows():
    """fit_probe written with sklearn's own estimators and scorers, as before the fast paths: the same numbers."""
    X, y, groups = informative(n=1500, d=8)
    rng = np.random.default_rng(2)
    X = (X + rng.normal(scale=1.5, size=X.shape)).astype(np.float32)  # room for the strength to matter
    counts = np.round(X[:, 2] * 2.0 + rng.normal(size=y.size)).astype(int)
    test, types = block_split(groups, 4), (np.arange(y.size) % 11).astype(np.int64)
    shared = ProbeRows(X, test, 2)
    train = np.flatnonzero(~test)[::2]
    scaler = StandardScaler().fit(X[train])
    Xtr, Xte = scaler.transform(X[train]), scaler.transform(X[test])
    for kind, labels, grid in (("binary", y, (0.001, 0.01, 1.0)), ("count", counts, (1.0, 100.0, 3000.0))):
        folds = contiguous_folds(train.size, groups[train], 3, labels[train] if kind == "binary" else None)
        control = control_task(types, labels, kind, test, 0)
        if kind == "binary":
            cv = LogisticRegressionCV(Cs=list(grid), cv=folds, class_weight="balanced", scoring="balanced_accuracy",
                                      max_iter=300, **_LOGISTIC_CV_OPTIONS).fit(Xtr, labels[train])  # fmt: skip
            strength = float(np.ravel(cv.C_)[0])
            fixed = LogisticRegression(C=strength, class_weight="balanced", max_iter=300)
            metric = balanced_accuracy_score
        else:
            cv = RidgeCV(alphas=list(grid), cv=folds, scoring="r2").fit(Xtr, labels[train].astype(np.float64))
            strength, fixed, metric = cv.alpha_, Ridge(alpha=cv.alpha_), r2_score
        control_score = metric(control[test], fixed.fit(Xtr, control[train]).predict(Xte))
        ours = make_probe(kind, **{"C" if kind == "binary" else "alpha": strength}).fit_rows(shared, control[train])
        assert ours.model_.coef_.dtype == fixed.coef_.dtype  # LogisticRegression fits float32 rows in float32
        np.testing.assert_array_equal(ours.model_.coef_, fixed.coef_)
        for rows in (None, shared):
            r = fit_probe(X, labels, test, groups, kind, {"character": types}, 2, 3, grid, 0, rows)
            assert r.strength == strength and r.score == metric(labels[test], cv.predict(Xte))
            assert r.controls["character"] == control_score
            np.testing.assert_array_equal(r.probe.model_.coef_, cv.coef_)
            np.testing.assert_array_equal(r.probe.predict_rows(X[test]), r.probe.predict(X[test]))
    with pytest.raises(ValueError, match="other test rows"):
        fit_probe(X, y, ~test, groups, "binary", None, 2, rows=shared)


def single_cells_by_hand(X, test, y):
    """Each cell's threshold tried one by one, scored by sklearn (binary labels): first best upwards, first best
    downwards, downwards where strictly better; then its test score."""
    Xtr, ytr, out = X[~test], y[~test], []
    for j in range(X.shape[1]):
        values = np.unique(Xtr[:, j])
        best = {True: (-np.inf, None), False: (-np.inf, None)}
        for lo, hi in zip(values[:-1], values[1:]):
            up = balanced_accuracy_score(ytr, Xtr[:, j] > 0.5 * (lo + hi))
            for down, value in ((False, up), (True, 1.0 - up)):
                if value > best[down][0]:
                    best[down] = (value, 0.5 * (lo + hi))
        down = best[True][0] > best[False][0]
        train, threshold = best[down]
        out.append((train, balanced_accuracy_score(y[test], (X[test, j] > threshold) != down)))
    return np.array(out)


def test_single_cells_are_thresholds_tried_one_by_one():
    rng = np.random.default_rng(3)
    y = (rng.random(160) < 0.3).astype(int)
    X = np.c_[y + rng.normal(scale=0.8, size=160), rng.normal(size=(160, 3)), -2.0 * y + rng.normal(size=160)]
    X[:, 3] = np.round(X[:, 3])  # ties
    test = np.arange(160) >= 110
    train_score, test_score = SingleCells(X.astype(np.float32), test).scores(y, "binary")
    np.testing.assert_allclose(np.c_[train_score, test_score], single_cells_by_hand(X.astype(np.float32), test, y),
                               rtol=1e-12)  # fmt: skip


@pytest.mark.parametrize("arch", ["lstm", "gru-paper", "rnn"])
def test_one_batched_ablation_is_one_pass_per_cell(arch):
    """All runs (clean, cells held at zero and at a mean) of a few windows as rows of one batch, read from `start`:
    what one pass per run over those windows gives, in every layer of a 2-layer model."""
    model = tiny_model(arch)
    windows = np.random.default_rng(4).integers(0, 7, size=(3, 40))
    runs = [(None, 0.0), (1, 0.0), (3, 0.4), (4, -0.3)]
    names = model.layers[0].state_names
    held = np.zeros((len(runs), 3, 5), dtype=bool)
    fill = np.zeros((len(runs), 3, 5), dtype=np.float32)
    for k, (cell, value) in enumerate(runs):
        if cell is not None:
            held[k, :, cell], fill[k, :, cell] = True, value
    for layer in (0, 1):
        logp, states = run_ablated(model, np.tile(windows, (len(runs), 1)), layer, held.reshape(-1, 5),
                                   {n: fill.reshape(-1, 5) for n in names}, start=10)  # fmt: skip
        assert logp.shape == (12, 29) and states["h"].shape == (12, 30, 5)
        for k in range(len(runs)):
            one_logp, one = run_ablated(model, windows, layer, held[k], {n: fill[k] for n in names})
            np.testing.assert_allclose(logp[3 * k : 3 * k + 3], one_logp[:, 10:], rtol=1e-6, atol=1e-6)
            for n in names:
                np.testing.assert_allclose(states[n][3 * k : 3 * k + 3], one[n][:, 10:], rtol=1e-6, atol=1e-6)


def test_an_ablated_run_returns_only_the_states_it_is_asked_for():
    """`keep` drops states from what is returned, not from the run: the kept state and the predictions are those of
    the run that returns every state; a state the layer lacks is an error that names the layer's states."""
    model = tiny_model("lstm")
    ids = np.random.default_rng(5).integers(0, 7, size=(4, 30))
    held = np.zeros((4, 5), dtype=bool)
    held[1, 2] = True
    logp, every = run_ablated(model, ids, 0, held, start=5)
    kept_logp, kept = run_ablated(model, ids, 0, held, start=5, keep=("c",))
    assert set(every) == {"h", "c"} and set(kept) == {"c"}
    np.testing.assert_array_equal(kept_logp, logp)
    np.testing.assert_array_equal(kept["c"], every["c"])
    assert (kept["c"][1, :, 2] == 0).all()
    with pytest.raises(ValueError, match="no state"):
        run_ablated(model, ids, 0, held, keep=("f",))


# ------------------------------------------------------------------------------------------ windows and zeroing


def test_windows_are_spread_and_kept_apart():
    starts = window_starts(10_000, 5, 500, 200)
    assert starts[0] == 200 and starts[-1] == 10_000 - 500
    assert np.diff(starts).min() >= 700
    with pytest.raises(ValueError, match="do not fit"):
        window_starts(2_000, 5, 500, 200)
    extra = more_windows(starts, np.array([3_000, 3_100, 5_300]), 10_000, 500, 200, extra=3)
    for s in extra:
        assert np.abs(np.r_[starts, extra[extra != s]] - s).min() >= 700
    ids = np.arange(10_000) % 50
    batch = window_batch(ids, starts, 500, 200)
    assert batch.shape == (5, 700) and (batch[:, 200] == ids[starts]).all()  # row warmup + i is character start + i


def tiny_model(arch: str, seed: int = 0) -> CharLM:
    torch.manual_seed(seed)
    model = CharLM(ModelConfig(arch, vocab_size=7, layers=2, size=5)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.uniform_(-0.8, 0.8)  # larger than the training init, so every unit matters
    return model


def dead_unit(model: CharLM, layer: int, j: int) -> CharLM:
    """A copy whose unit j of `layer` is 0 at every step by construction of its weights."""
    import copy

    dead = copy.deepcopy(model)
    module = dead.layers[layer]
    H = model.config.size
    with torch.no_grad():
        if model.config.arch == "lstm":  # input gate closed: c_j stays 0, so h_j = o_j tanh(0) = 0
            module.rnn.bias_ih_l0[j] = -1e4
        elif model.config.arch == "gru":  # torch's z' = 1 keeps h_j at its start, 0
            module.rnn.bias_ih_l0[H + j] = 1e4
        elif model.config.arch in ("rnn", "lstm-gates"):  # h_j = tanh(0)
            for p in (module.rnn.weight_ih_l0, module.rnn.weight_hh_l0, module.rnn.bias_ih_l0, module.rnn.bias_hh_l0):
                p[j] = 0.0
        else:  # Levy's ablations: input gate closed
            module.gates_x.bias[j] = -1e4
    return dead


@pytest.mark.parametrize("arch", ["lstm", "gru", "rnn", "lstm-srnn", "lstm-srnn-out", "lstm-srnn-hidden", "lstm-gates"])
@torch.no_grad()
def test_zeroing_a_cell_is_a_model_whose_unit_is_dead(arch):
    model = tiny_model(arch)
    ids = np.random.default_rng(0).integers(0, 7, size=(2, 30))
    zero = np.zeros((2, 5), dtype=bool)
    zero[1, 3] = True  # row 0 clean, row 1 with unit 3 of layer 0 zeroed
    logp, states = run_zeroed(model, ids, 0, zero)
    # the clean row is the model's own forward and trace
    traced = trace_windows(model, ids[:1], 0)
    name = "c" if "c" in states else "h"
    np.testing.assert_allclose(states[name][0], traced[f"layers.0.{name}"][0], atol=1e-5)
    reference = torch.log_softmax(model(torch.from_numpy(ids[:1])), -1)[0, :-1]
    np.testing.assert_allclose(logp[0], reference.gather(-1, torch.from_numpy(ids[0, 1:, None]))[:, 0], atol=1e-5)
    # the zeroed row is the model with unit 3 dead: same states, same predictions
    dead = dead_unit(model, 0, 3)
    dead_trace = trace_windows(dead, ids[1:], 0)
    assert np.abs(states[name][1][:, 3]).max() == 0.0
    np.testing.assert_allclose(states[name][1], dead_trace[f"layers.0.{name}"][0], atol=1e-4)
    dead_logp = torch.log_softmax(dead(torch.from_numpy(ids[1:])), -1)[0, :-1]
    np.testing.assert_allclose(logp[1], dead_logp.gather(-1, torch.from_numpy(ids[1, 1:, None]))[:, 0], atol=1e-4)
    assert np.abs(logp[1] - logp[0]).max() > 1e-3  # and the unit mattered


@torch.no_grad()
def test_holding_a_cell_at_its_mean_is_an_lstm_whose_unit_is_pinned():
    """run_ablated with fill values: written out by hand from the LSTM's equations, the unit's c and h set to the
    given values after every step; other rows of the batch untouched."""
    torch.manual_seed(0)
    model = CharLM(ModelConfig("lstm", vocab_size=7, layers=1, size=5)).eval()
    for p in model.parameters():
        p.uniform_(-0.8, 0.8)
    ids = np.random.default_rng(0).integers(0, 7, size=(2, 30))
    held = np.zeros((2, 5), dtype=bool)
    held[1, 3] = True
    fill = {"h": np.full((2, 5), 0.25, dtype=np.float32), "c": np.full((2, 5), -0.5, dtype=np.float32)}
    logp, states = run_ablated(model, ids, 0, held, fill)
    assert (states["c"][1][:, 3] == -0.5).all() and (states["h"][1][:, 3] == 0.25).all()
    clean, _ = run_ablated(model, ids[:1], 0, np.zeros((1, 5), dtype=bool))
    np.testing.assert_allclose(logp[0], clean[0], atol=1e-6)  # the clean row is untouched

    r = model.layers[0].rnn
    h, c, outs = torch.zeros(5), torch.zeros(5), []
    for t in ids[1]:
        i, f, g, o = (r.weight_ih_l0[:, t] + r.bias_ih_l0 + r.weight_hh_l0 @ h + r.bias_hh_l0).chunk(4)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        c[3], h[3] = -0.5, 0.25
        outs.append(h.clone())
    by_hand = torch.log_softmax(model.head(torch.stack(outs)), -1)[:-1].gather(-1, torch.from_numpy(ids[1, 1:, None]))
    np.testing.assert_allclose(logp[1], by_hand[:, 0].numpy(), atol=1e-5)


# ------------------------------------------------------------------------------------------ the viewer


def test_colours_are_the_diverging_scale():
    assert view.colour(-1.0) == "#ca0020" and view.colour(0.0) == "#f7f7f7" and view.colour(1.0) == "#0571b0"
    assert view.colour(5.0) == "#0571b0" and view.colour(float("nan")) == "#f7f7f7"


def test_whitespace_is_visible_and_utf8_characters_stay_whole():
    chars = view.display_chars("a b\tc\r\né".encode())
    assert chars == ["a", "\u00b7", "b", "\u2192\t", "c", "", "\u21b5\n", "é", ""]


HOSTILE = b"int x = a < b && c > d; /* </script><script>alert(1)</script> <!-- */\n"


def hostile_fragment() -> str:
    values = np.linspace(-1, 1, len(HOSTILE))
    return view.viewer_html(
        {"t": {"text": HOSTILE, "feature": "in_comment", "labels": F.in_comment(HOSTILE), "underline": True}},
        [{"model": "m <x>", "layer": 0, "cell": 1, "text": "t", "values": values, "quantity": "tanh(c)",
          "label": "cell 1", "title": "m <x>, cell 1"}],
    )  # fmt: skip


def test_the_viewer_escapes_every_character_of_corpus_text():
    fragment = hostile_fragment()
    assert "alert(1)</script>" not in fragment and "<script>alert" not in fragment
    assert "<!--" not in fragment and "m <x>" not in fragment
    assert "&lt;" in fragment and "&amp;" in fragment  # the static spans show the text, escaped
    assert len(re.findall(r"<script", fragment)) == 2  # its data and its code, nothing from the text
    assert "http" not in fragment and "@import" not in fragment and "src=" not in fragment  # nothing external
    data = re.search(r'<script type="application/json" class="cv-data">(.*?)</script>', fragment, re.S).group(1)
    assert "<" not in data and ">" not in data and "&" not in data
    import json

    parsed = json.loads(data)
    assert "".join(parsed["texts"]["t"]["chars"]).replace("\u00b7", " ").startswith("int x = a < b && c > d;")


def test_the_viewer_page_loads_in_chromium_without_errors(tmp_path):
    from reports.check import ChromiumMissing, check_html

    page = tmp_path / "view.html"
    page.write_text(view.standalone_page(hostile_fragment() + hostile_fragment(), "two viewers"), encoding="utf-8")
    try:
        errors = check_html(page)
    except ChromiumMissing:
        pytest.skip("chromium is not installed")
    assert errors == []


# ------------------------------------------------------------------------------------------ the command line


def viewer_data(page: str) -> dict:
    """The data a viewer page embeds (what its script draws): texts and series, values decoded to [-1, 1]."""
    import base64
    import json

    data = json.loads(re.search(r'<script type="application/json" class="cv-data">(.*?)</script>', page, re.S)[1])
    for s in data["series"]:
        s["decoded"] = np.frombuffer(base64.b64decode(s["values"]), dtype=np.int8) / 127.0
    return data


def test_view_cli_shows_every_cell_of_the_layer_ranked_and_warmed_up(tmp_path, artifacts):
    """The page holds every cell of the layer, the counter ranked first for line_position, and what it shows for
    the counter is its tanh(c) on the shown text after the warm-up: tanh(0.02 x characters read since the last
    newline, counted from the warm-up's first character)."""
    corpus = fake_corpus_file(tmp_path, n_bytes=40_000)
    folder = line_counter_lstm(corpus, step=0.02)
    data = corpus.decode(corpus.split("test"))[:700]
    text = tmp_path / "t.txt"
    text.write_bytes(data)
    out = tmp_path / "view.html"
    start, chars, warmup = 300, 250, 120
    args = ["--text", str(text), "--start", str(start), "--chars", str(chars), "--warmup", str(warmup)]
    assert run_cli(view.main, [folder.name, *args, "--feature", "line_position", "--out", str(out)]) == 0  # an id
    shown = viewer_data(out.read_text())
    cells_shown = [s["cell"] for s in shown["series"]]
    assert cells_shown[0] == COUNTER and sorted(cells_shown) == list(range(8))
    read = data[start - warmup : start + chars]
    expected = np.tanh(0.02 * F.line_position(read)[warmup:])
    np.testing.assert_allclose(shown["series"][0]["decoded"], expected, atol=0.5 / 127 + 1e-6)
    assert shown["texts"]["text"]["labels"] == F.line_position(read)[warmup:].tolist()  # of the text read
    chars_shown = "".join(shown["texts"]["text"]["chars"])
    assert chars_shown.replace("\u00b7", " ").replace("\u21b5", "") == data[start : start + chars].decode()

    # the model's folder, a split of its corpus, and a chosen cell shown first
    args = [str(folder), "--split", "test", "--chars", "100", "--cell", "0:2", "--out", str(out)]
    assert run_cli(view.main, args) == 0
    shown = viewer_data(out.read_text())
    assert [s["cell"] for s in shown["series"]] == [2, 0, 1, 3, 4, 5, 6, 7]
    assert "cell 2" in shown["series"][0]["title"]


@pytest.mark.parametrize(
    "extra, content, message",
    [
        (["--feature", "nosuch"], None, "unknown feature 'nosuch'"),
        (["--feature", "in_comment"], None, "does not apply to prose"),
        (["--cell", "0:99"], None, "cell 99 is out of range"),
        (["--cell", "4:0"], None, "layer 4 is out of range"),
        (["--cell", "zero"], None, "LAYER:INDEX"),
        (["--start", "5000"], None, "past the end of the text"),
        (["--layer", "1"], None, "name different layers"),
        ([], b"", "the text is empty"),
        ([], b"caf\xc3\xa9 {}", "outside the model's vocabulary"),
        (["--internal", "z"], None, "has no internal"),
    ],
)
def test_view_cli_bad_input_is_one_line_and_exit_2(tiny_run, tmp_path, capsys, extra, content, message):
    text = tmp_path / "t.txt"
    text.write_bytes(tiny_run.corpus_path.read_bytes()[:200] if content is None else content)
    args = [str(tiny_run.out / "checkpoint.pt"), "--text", str(text), "--cell", "0:1", *extra]
    assert run_cli(view.main, args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_view_cli_names_a_missing_model(tmp_path, artifacts, capsys):
    text = tmp_path / "t.txt"
    text.write_bytes(b"abc")
    assert run_cli(view.main, ["no-such-model", "--text", str(text)]) == 2
    assert "model no-such-model does not exist" in capsys.readouterr().err
