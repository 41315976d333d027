"""Analyses: numbers worked out by hand on hand-made predictions, model identity, the one-file contract, the CLIs."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import fake_corpus_file, fake_neural_model, fake_ngram_model, make_text

from analyses import ablations, common, cross_entropy
from analyses import ngram as ngram_analysis
from analyses.context import Context, MissingInput, model_index
from corpora import run_cli
from corpora.errors import UserError


def _ctx(settings_of, index=None, **settings) -> Context:
    return Context(model_index() if index is None else index, common.settings(settings_of, None, settings))


# ------------------------------------------------------------------------------------------ numbers by hand


def test_cross_entropy_is_the_mean_nll_of_the_true_characters(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path)
    T = corpus.split("test").size - 1
    half = np.where(np.arange(T) % 2 == 0, 0.5, 1.5)  # mean 1.0 up to the odd position
    fake_neural_model(corpus, nll=np.full(T, 0.7), arch="lstm")
    fake_neural_model(corpus, nll=half, arch="gru", size=7)
    df = cross_entropy.compute(_ctx(cross_entropy))
    by_arch = df.set_index("arch")
    assert by_arch.loc["lstm", "ce_nats"] == pytest.approx(0.7, abs=1e-6)
    assert by_arch.loc["lstm", "ce_std"] == pytest.approx(0.0, abs=1e-6)  # a constant has no spread
    assert by_arch.loc["lstm", "ce_bits"] == pytest.approx(0.7 / np.log(2), abs=1e-6)
    assert by_arch.loc["gru", "ce_nats"] == pytest.approx(half.mean(), abs=1e-6)
    # half the positions at 0.5, half at 1.5: the standard error of the mean is 0.5 / sqrt(T)
    assert by_arch.loc["gru", "ce_std"] == pytest.approx(0.5 / np.sqrt(T), rel=0.25)
    # models trained at a width of their own sit in no budget row: no comparison with Fig 1, and no "nan" said
    assert by_arch["budget"].isna().all()
    from analyses.prose import sentence

    texts = [sentence(f) for f in cross_entropy.findings(df, cross_entropy.comparisons(cross_entropy.cells(df)))]
    assert any("the 1-layer LSTM of width 8" in t for t in texts) and not any("nan" in t for t in texts)


def test_standing_beats_the_ngrams_up_to_the_first_order_the_model_loses_to(tmp_path, artifacts):
    """n-grams at 2.0, 1.5, 1.0, 1.4, 1.6 nats for n = 1..5 (CE rising again past n = 3, as War and Peace's does past
    7): a model at 1.2 beats n = 1, 2 but not 3, so it beats the n-grams up to 2, though it also beats n = 4 and 5."""
    corpus = fake_corpus_file(tmp_path)
    T = corpus.split("test").size - 1
    for n, nll in zip(range(1, 6), (2.0, 1.5, 1.0, 1.4, 1.6), strict=True):
        fake_ngram_model(corpus, n, nll=np.full(T, nll))
    fake_neural_model(corpus, nll=np.full(T, 1.2), arch="lstm")
    fake_neural_model(corpus, nll=np.full(T, 0.9), arch="gru", size=7)
    fake_neural_model(corpus, nll=np.full(T, 2.5), arch="rnn", size=9)
    standing = _ctx(cross_entropy).standing().set_index("arch")
    assert standing.loc["lstm", "ce_nats"] == pytest.approx(1.2, abs=1e-6)
    assert standing.loc["lstm", "beats_ngram_up_to_n"] == 2
    assert standing.loc["gru", "beats_ngram_up_to_n"] == 5  # beats every order
    assert standing.loc["rnn", "beats_ngram_up_to_n"] == 0  # not even the unigram
    assert (standing["ngram_orders"] == 5).all()


# ------------------------------------------------------------------------------------------ model identity


def test_models_that_differ_in_budget_split_or_bytes_are_never_pooled(tmp_path, artifacts):
    """Three LSTM seeds, plus an LSTM trained on another character budget, another split mode, and another file
    with the same name: the CLI refuses to mix recipes, and with a profile-like choice the seeds stay three."""
    corpus = fake_corpus_file(tmp_path, n_bytes=20_000)  # char-rnn's split needs 100 x 100 bytes
    T = corpus.split("test").size - 1
    for seed, ce in enumerate([2.0, 2.2, 2.4]):
        fake_neural_model(corpus, nll=np.full(T, ce), arch="lstm", seed=seed)
    fake_neural_model(corpus, nll=np.full(T, 2.5), arch="lstm-srnn")
    fake_neural_model(corpus, nll=np.full(T, 9.0), arch="lstm", seed=5, max_chars=2000)  # another budget
    charrnn = corpus.with_split_mode("charrnn")
    fake_neural_model(charrnn, nll=np.full(charrnn.split("test").size - 1, 9.0), arch="lstm")  # another split
    (tmp_path / "elsewhere").mkdir()
    twin = fake_corpus_file(tmp_path / "elsewhere", n_bytes=20_000, seed=9)  # same name "fake", other bytes
    assert twin.name == corpus.name and twin.artifact_name != corpus.artifact_name
    fake_neural_model(twin, nll=np.full(twin.split("test").size - 1, 9.0), arch="lstm")

    index = model_index()
    assert len(index) == 7 and index["corpus_key"].nunique() == 3
    lstm = index[(index["arch"] == "lstm") & (index["corpus_key"] == corpus.key)]
    assert lstm["group_id"].nunique() == 2  # the three seeds share a group; the other budget has its own
    assert lstm["recipe"].nunique() == 2

    # The standalone CLI never averages across recipes: one clear line and exit 2.
    code = run_cli(ablations.main, ["--corpus", corpus.source, "--splits", "contiguous"])
    assert code == 2
    # Restricted to one recipe (what --profile does), the LSTM has exactly its three seeds.
    recipe = lstm[lstm["seed"] == 0]["recipe"].iloc[0]
    one = index[(index["corpus_key"] == corpus.key) & (index["recipe"] == recipe)]
    df = ablations.ANALYSIS.compute(_ctx(ablations, one)).table.set_index("arch")
    assert df.loc["lstm", "seeds"] == 3 and df.loc["lstm", "ce_nats"] == pytest.approx(2.2, abs=1e-6)


def test_dropout_is_chosen_on_validation_per_model(tmp_path, artifacts):
    """Karpathy sec 3.3: every dropout of the grid is trained and analyses read the best on validation."""
    corpus = fake_corpus_file(tmp_path)
    T = corpus.split("test").size - 1
    fake_neural_model(corpus, nll=np.full(T, 1.0), arch="lstm", dropout=0.0, val_loss=1.3)
    fake_neural_model(corpus, nll=np.full(T, 1.1), arch="lstm", dropout=0.25, val_loss=1.2)  # best on val
    fake_neural_model(corpus, nll=np.full(T, 1.5), arch="gru", size=7, dropout=0.0, val_loss=1.0)  # best on val
    fake_neural_model(corpus, nll=np.full(T, 1.4), arch="gru", size=7, dropout=0.25, val_loss=1.1)
    ctx = _ctx(cross_entropy)
    chosen = ctx.models().set_index("arch")["dropout"]
    assert chosen["lstm"] == 0.25 and chosen["gru"] == 0.0  # chosen on validation, not on test
    assert len(ctx.models(all_dropouts=True)) == 4
    df = cross_entropy.compute(ctx).set_index("arch")
    assert df.loc["lstm", "ce_nats"] == pytest.approx(1.1, abs=1e-6)


# ------------------------------------------------------------------------------------------ the contract


def test_a_module_without_an_analysis_fails_at_load_with_one_line(monkeypatch):
    broken = types.ModuleType("analyses.broken")
    broken.__file__ = cross_entropy.__file__
    broken.TITLE, broken.QUESTION = "t", "q"
    broken.compute = lambda ctx: pd.DataFrame()
    monkeypatch.setitem(sys.modules, "analyses.broken", broken)
    with pytest.raises(UserError, match=r"analyses.broken defines no ANALYSIS") as err:
        common.load_analysis("broken")  # a module of the old form (TITLE, compute -> DataFrame) is not an analysis
    assert "\n" not in str(err.value)
    broken.ANALYSIS = object()  # not an analyses.base.Analysis
    with pytest.raises(UserError, match=r"defines no ANALYSIS"):
        common.load_analysis("broken")
    with pytest.raises(UserError, match="unknown analysis 'nosuch'"):
        common.load_analysis("nosuch")


def test_the_cache_key_covers_every_module_whose_code_changes_the_numbers():
    files = {str(p.relative_to(common.REPO)) for p in common.source_files(cross_entropy)}
    for needed in ("analyses/cross_entropy.py", "analyses/common.py", "analyses/context.py",
                   "charlm/predictions.py", "charlm/predict.py", "charlm/model.py", "corpora/corpus.py"):  # fmt: skip
        assert needed in files, needed
    assert "analyses/ablations.py" not in files  # another analysis's code does not invalidate this one


def test_tables_read_back_keep_ids_and_hashes_as_strings(tmp_path):
    df = pd.DataFrame({"model_id": ["lstm-L1-H8-s0-1e5432"], "group_id": ["1e5432"], "ce_nats": [1.5]})
    back = common.read_table(common.save_table(df, tmp_path / "t.csv"))
    assert back["group_id"].iloc[0] == "1e5432" and back["ce_nats"].iloc[0] == 1.5


def test_the_cli_names_itself_when_run_as_a_module():
    import subprocess

    from conftest import REPO, cli_env

    proc = subprocess.run([sys.executable, "-m", "analyses.cross_entropy", "--help"], cwd=REPO, env=cli_env(),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.startswith("usage: python -m analyses.cross_entropy")
    assert "resamples=100" in proc.stdout  # the settings are listed


def test_unknown_settings_are_one_clear_error():
    with pytest.raises(UserError, match="has no setting nope"):
        common.settings(cross_entropy, {"nope": 1})
    assert common.settings(cross_entropy, {"resamples": 10}, {"split": "val"}) == {"split": "val", "resamples": 10}


def test_missing_models_give_a_missing_input_naming_the_command(tmp_path, artifacts):
    corpus = fake_corpus_file(tmp_path)
    fake_ngram_model(corpus, 1)  # baselines but no recurrent model
    with pytest.raises(MissingInput, match="python -m reports --profile quick"):
        cross_entropy.compute(_ctx(cross_entropy))
    code = run_cli(cross_entropy.main, ["--corpus", corpus.source])
    assert code == 2


def test_a_profile_whose_models_are_not_built_here_is_named_before_the_analysis_reads_the_rest(artifacts, capsys):
    from charlm.plan import load_profile, planned_model_ids

    planned = planned_model_ids(load_profile("smoke"), None, common.orders_read(load_profile("smoke").analyses))
    assert run_cli(cross_entropy.main, ["--profile", "smoke"]) == 2  # nothing built: the analysis has no model
    note, error = capsys.readouterr().err.strip().splitlines()
    assert note.startswith(f"note: {len(planned)} of profile smoke's {len(planned)} models are not built under ")
    assert "`python -m reports --profile smoke` builds (or installs) them" in note and error.startswith("error: no ")


def test_a_corpus_of_your_own_without_models_names_the_commands_that_train_them(tmp_path, artifacts, capsys):
    corpus = fake_corpus_file(tmp_path)  # nothing trained on it
    assert run_cli(cross_entropy.main, ["--corpus", corpus.source]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"no models trained on '{corpus.source}'" in line
    assert f"`python -m reports --corpus {corpus.source}`" in line and "python -m charlm.train --corpus" in line


def test_a_damaged_predictions_file_is_named_by_a_cli_and_recomputed_by_the_pipeline(tmp_path, artifacts, capsys):
    corpus = fake_corpus_file(tmp_path)
    T = corpus.split("test").size - 1
    out = fake_neural_model(corpus, nll=np.full(T, 0.7), arch="lstm")
    path = out / "predictions" / "checkpoint" / "test.npz"
    path.write_bytes(path.read_bytes()[:100])
    assert run_cli(cross_entropy.main, ["--corpus", corpus.source]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "damaged" in err[0]
    ctx = Context(model_index(), common.settings(cross_entropy), repair=True, say=print)
    df = cross_entropy.compute(ctx)  # the pipeline's context recomputes it from the checkpoint, and says so
    assert "recomputing" in capsys.readouterr().out and len(df) == 1


# ------------------------------------------------------------------------------------------ the n-gram CLI


def test_ngram_cli_builds_and_reports_exactly_the_requested_models(tmp_path, artifacts):
    pytest.importorskip("kenlm")
    from charlm import ngram

    try:
        ngram.find_tool("lmplz")
    except Exception:
        pytest.skip("lmplz not installed (make setup builds it)")
    corpus = tmp_path / "toy.txt"
    corpus.write_bytes(make_text(150_000)[:100_000])  # 10 char-rnn batches, so both split modes have a test split
    out = tmp_path / "table.csv"
    args = ["--corpus", str(corpus), "--families", "ngram", "--n", "1,2", "--out", str(out)]
    assert run_cli(ngram_analysis.main, args) == 0
    contiguous = pd.read_csv(out)
    assert list(contiguous["n"]) == [1, 2] and set(contiguous["family"]) == {"ngram"}
    assert contiguous["ce_nats"].iloc[1] < contiguous["ce_nats"].iloc[0]  # a bigram beats a unigram on text
    # The other split mode builds other models, and the table holds only those.
    assert run_cli(ngram_analysis.main, args + ["--splits", "charrnn"]) == 0
    charrnn = pd.read_csv(out)
    assert list(charrnn["n"]) == [1, 2]
    assert not set(charrnn["model_id"]) & set(contiguous["model_id"])


def test_nothing_below_the_report_imports_it():
    """analyses, charlm and probes produce numbers; reports renders them. An import the other way (even a lazy one
    inside a function, as `--profile` once had) would let the report's code change an analysis: charlm.plan is the
    one list of a profile's models that both read."""
    import ast

    offenders = []
    for package in ("analyses", "charlm", "probes"):
        for path in sorted((common.REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module or ""]
                elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "import_module", "__import__"
                ) and node.args and isinstance(node.args[0], ast.Constant):  # fmt: skip
                    names = [str(node.args[0].value)]
                offenders += [f"{path.relative_to(common.REPO)}:{node.lineno} {n}" for n in names
                              if n == "reports" or n.startswith("reports.")]  # fmt: skip
    assert offenders == []


def test_nnns_that_differ_only_in_their_hidden_grid_share_a_recipe():
    """A profile may cross-validate a wider hidden grid at one order (reference: 256 and 512 at n = 3); that n-NN
    is still compared with the others, while another learning rate is another recipe."""
    from charlm.kinds import kind

    _baseline_row = kind("nnn").index_row

    def metrics(n, **config):
        base = {"n": n, "hidden_grid": [256], "lr": 4e-3, "optimizer": "adam", "seed": 0, "corpus": "warpeace"}
        return {"kind": "nnn", "model_id": f"nnn-n{n}", "corpus_key": "k", "best_hidden": 256,
                "config": {**base, **config}}  # fmt: skip

    recipe = {n: _baseline_row(metrics(n), Path(f"nnn-n{n}"))["recipe"] for n in (2, 4)}
    wider = _baseline_row(metrics(3, hidden_grid=[256, 512]), Path("nnn-n3"))["recipe"]
    other_lr = _baseline_row(metrics(3, lr=5e-3), Path("nnn-n3"))["recipe"]
    assert recipe[2] == recipe[4] == wider != other_lr


def test_a_counted_claim_has_one_verdict_rule():
    from analyses.base import majority

    assert [majority(h, n) for h, n in ((3, 3), (2, 3), (1, 2), (1, 3), (0, 4), (0, 0))] == [
        "reproduced", "partly", "partly", "not reproduced", "not reproduced", "untested"]  # fmt: skip
