"""`make report` end to end: the plan, the report, the cache, partial recompute, damaged artifacts, a fresh clone."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys

import pandas as pd
import pytest
from conftest import cli_env, kenlm_available

from analyses import common
from charlm.model import budget_params, count_params
from charlm.paths import checkpoint_predictions_path
from charlm.plan import available, load_profile, plan
from reports.pipeline import RunOptions, damage, model_jobs, run
from reports.render import ReportContext, Section, render_html
from reports.sections import missing_section


@pytest.mark.parametrize("name", ["smoke", "smoke-all", "quick", "standard", "paper", "reference"])
def test_every_shipped_profile_plans_models_sized_to_their_budget_rows(name):
    """Each profile loads, names analyses that exist, and sizes every grid model to its row (sec 4.1)."""
    assert name in available()
    profile = load_profile(name)
    for analysis in profile.analyses:
        common.load_analysis(analysis)
    _, models = plan(profile)
    neural = [m for m in models if m.kind.recurrent]
    assert neural and len({m.model_id for m in models}) == len(models)
    configured = {b for g in profile.grid for b in g["budgets"]} | (
        {profile.ablations["budget"]} if profile.ablations else set()
    )
    for m in neural:
        c, V = m.config, m.corpus.vocab_size
        row = m.kind.describe(m)["budget row"]  # the row read back from the model's shape alone
        assert row != "-" and int(row) in configured, (name, c, row, configured)
        target = budget_params(int(row), V)
        gap = lambda h, c=c, V=V, t=target: abs(count_params(dataclasses.replace(c, size=h).model_config(V)) - t)
        if c.arch in ("lstm", "rnn", "gru"):
            assert gap(c.size) <= min(gap(c.size - 1), gap(c.size + 1)), (name, c)


def test_smoke_all_runs_every_analysis_there_is():
    """smoke-all is the new user's whole report in small (issue 23): a new analysis module must join it."""
    modules = sorted(
        p.stem for p in (common.REPO / "analyses").glob("*.py")
        if not p.stem.startswith("_") and ("\nTITLE = " in p.read_text() or "\nANALYSIS = " in p.read_text())
    )  # fmt: skip
    assert modules and sorted(load_profile("smoke-all").analyses) == modules


def test_a_section_says_not_computed_only_for_an_analysis_whose_inputs_were_missing(tmp_path):
    """Said from the section's missing-input state, not guessed from a missing figure: samples draws none."""
    missing = missing_section(common.load_analysis("ablations"), "no LSTM seeds: train them with `make report`")
    assert missing.missing and missing.figure is None
    computed = Section(name="samples", title="Samples", findings=["Drawn."])
    ctx = ReportContext("smoke", "", [], pd.DataFrame(), 0.0, [missing, computed], {}, "", {}, "2026-01-01T00:00:00")
    html = render_html(ctx, tmp_path).read_text()
    ablations = html.split('id="ablations"')[1].split("</section>")[0]
    samples = html.split('id="samples"')[1].split("</section>")[0]
    assert "Not computed: no LSTM seeds" in ablations and "Not computed" not in samples and "Drawn." in samples


def test_unknown_profile_and_unknown_settings_are_user_errors(tmp_path):
    from corpora.errors import UserError

    with pytest.raises(UserError, match="unknown profile"):
        load_profile("nope")
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'description = "x"\ncorpora = ["warpeace"]\nanalyses = []\n[[grid]]\ntypes = ["lstm"]\nlayers = [1]\n'
        "budgets = [8]\n[ablations]\nsize = 3\n"
    )
    with pytest.raises(UserError, match=r"unknown \[ablations\] settings \['size'\]"):
        load_profile(str(bad))


def test_an_order_can_have_its_own_hidden_grid_and_a_bad_one_is_a_user_error(tmp_path):
    from charlm.nnn import NNNConfig
    from charlm.plan import nnn_options
    from corpora.errors import UserError

    head = (
        'description = "x"\ncorpora = ["warpeace"]\nanalyses = []\n[[grid]]\ntypes = ["lstm"]\nlayers = [1]\n'
        "budgets = [8]\n[baselines]\nnnn_n = [2, 3]\nnnn_hidden = [16]\nnnn_lr = 0.01\n"
    )
    good = tmp_path / "good.toml"
    good.write_text(head + "[baselines.nnn_hidden_for_n]\n3 = [16, 32]\n")
    profile = load_profile(str(good))
    assert nnn_options(profile, 2) == {"hidden_grid": (16,), "lr": 0.01}
    assert nnn_options(profile, 3) == {"hidden_grid": (16, 32), "lr": 0.01}
    # the other orders keep their ids: the grid is part of the id only where it changed
    assert NNNConfig("warpeace", 2, **nnn_options(profile, 2)) == NNNConfig("warpeace", 2, (16,), lr=0.01)
    for bad_table in ("x = [16]", "0 = [16]", "3 = []", "3 = [16, 0]", "3 = 16"):
        bad = tmp_path / "bad.toml"
        bad.write_text(head + "[baselines.nnn_hidden_for_n]\n" + bad_table + "\n")
        with pytest.raises(UserError, match="nnn_hidden_for_n"):
            load_profile(str(bad))


@pytest.fixture
def smoke_profile():
    profile = load_profile("smoke")
    if not kenlm_available():
        profile = dataclasses.replace(profile, analyses=["cross_entropy", "ablations"], baselines={}, analysis={})
    return profile


def test_report_end_to_end_then_cached(tmp_path, monkeypatch, small_text_file, smoke_profile, capsys):
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    options = RunOptions(smoke_profile, corpora_override=[str(small_text_file)], build_root=tmp_path / "build")
    html, pdf = run(options)
    text = html.read_text()
    for name in smoke_profile.analyses:
        assert (tmp_path / "build" / "smoke" / "data" / f"{name}.csv").exists()
        assert f'id="{name}"' in text
    assert 'id="findings"' in text and 'id="appendix"' in text
    assert pdf.read_bytes().startswith(b"%PDF")
    first = capsys.readouterr().out
    assert "to train" in first and "computed" in first

    run(options)  # nothing changed: nothing is trained or recomputed
    second = capsys.readouterr().out
    assert re.search(r"\((\d+) cached, 0 to train\)", second)
    assert "computed" not in second

    # A finished network goes back to the pool only for predictions it lacks: its checkpoint's, or its
    # snapshots' when an analysis reads them (smoke's do not, so none were made).
    _, models = plan(smoke_profile, options.corpora_override)
    problems = {m.model_id: damage(m) for m in models}
    assert model_jobs(models, problems, {}, 1, "contiguous", snapshots=False) == []
    neural = [m for m in models if m.kind.recurrent]
    assert len(model_jobs(models, problems, {}, 1, "contiguous", snapshots=True)) == len(neural)
    checkpoint_predictions_path(neural[0].directory / "checkpoint.pt", "test").unlink()
    (job,) = model_jobs(models, problems, {}, 1, "contiguous", snapshots=False)
    assert job.model.model_id == neural[0].model_id and job.work.what == "score"

    # One setting changed (the LSTM seeds of the ablations): only the new model trains, only its analyses recompute.
    ablations = dict(smoke_profile.ablations, lstm_seeds=[0, 1, 2])
    run(dataclasses.replace(options, profile=dataclasses.replace(smoke_profile, ablations=ablations)))
    third = capsys.readouterr().out
    assert re.search(r"cached, 1 to train\)", third)
    assert "analysis ablations: computed" in third


def test_a_damaged_checkpoint_is_retrained_and_said_so(tmp_path, monkeypatch, small_text_file, capsys):
    profile = load_profile("smoke")
    profile = dataclasses.replace(
        profile, analyses=["cross_entropy"], baselines={}, analysis={}, ablations={},
        grid=[{"types": ["lstm"], "layers": [1], "budgets": [8]}],
    )  # fmt: skip
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    options = RunOptions(profile, corpora_override=[str(small_text_file)], build_root=tmp_path / "build")
    run(options)
    before = (tmp_path / "build" / "smoke" / "data" / "cross_entropy.csv").read_text()
    (checkpoint,) = (tmp_path / "artifacts").glob("*/lstm-*/checkpoint.pt")
    checkpoint.write_bytes(checkpoint.read_bytes()[:200])  # an interrupted copy off another machine
    capsys.readouterr()
    run(options)
    out = capsys.readouterr().out
    assert "is damaged" in out and "recomputing it" in out and "1 to train" in out
    assert (
        tmp_path / "build" / "smoke" / "data" / "cross_entropy.csv"
    ).read_text() == before  # same seed, same numbers


def test_a_dropout_no_analysis_of_the_run_reads_is_not_scored(tmp_path, monkeypatch, small_text_file):
    """Fig 1's cells at dropout 0 and 0.25 (Karpathy et al. sec 3.3: chosen on validation). The analyses say in their
    contract which dropouts they read (`Needs.dropouts`): the chosen one, and cross_entropy dropout 0 beside it (what
    the choice bought). Where validation prefers 0, the 0.25 network's test split is read by nothing, so the run does
    not score it; where it prefers 0.25, dropout 0 is scored only for a run with cross_entropy; a configuration with
    a network still to train is scored whole, its choice unknown before the run."""
    from analyses.context import Needs
    from analyses.dropout_choice import dropouts_read, unread_networks
    from reports.pipeline import run_unread

    profile = dataclasses.replace(
        load_profile("smoke"), ablations={}, baselines={},
        grid=[{"types": ["lstm", "rnn", "gru"], "layers": [1], "budgets": [8], "dropouts": [0.0, 0.25]}],
    )  # fmt: skip
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    _, models = plan(profile, [str(small_text_file)])
    val = {"lstm": (1.0, 1.1), "rnn": (1.2, 1.1), "gru": (1.0, 1.1)}  # validation at dropout 0 and 0.25
    for m in models:
        if m.config.arch == "gru" and m.config.dropout > 0:
            continue  # still to train
        m.directory.mkdir(parents=True)
        metrics = {"complete": True, "kind": "charlm", "model_id": m.model_id, "corpus_key": m.corpus.key,
                   "train_config": dataclasses.asdict(m.config),
                   "best_val_loss": val[m.config.arch][m.config.dropout > 0]}  # fmt: skip
        (m.directory / "metrics.json").write_text(json.dumps(metrics))
    by = {(m.config.arch, m.config.dropout): m.model_id for m in models}
    unread = run_unread(profile, models)  # smoke's analyses: cross_entropy among them
    assert unread == {by["lstm", 0.25]: 0.0}
    scored = {j.model.model_id for j in model_jobs(models, dict.fromkeys(by.values()), {}, 1, "contiguous", False,
                                                   unread=unread) if j.work.what == "score"}  # fmt: skip
    assert scored == set(by.values()) - {by["lstm", 0.25]}
    without = run_unread(dataclasses.replace(profile, analyses=["ngram"]), models)  # reads the chosen dropout alone
    assert without == {by["lstm", 0.25]: 0.0, by["rnn", 0.0]: 0.25}
    assert unread_networks(models, "all") == {}
    assert dropouts_read([Needs(), Needs(dropouts="chosen and 0")]) == "chosen and 0"
    assert dropouts_read([Needs(dropouts="all", predictions=False)]) == "chosen"  # reads no Predictions at all
    with pytest.raises(ValueError, match="Needs.dropouts"):
        dropouts_read([Needs(dropouts="some")])


@pytest.mark.skipif(not kenlm_available(), reason="KenLM is built by make setup")
def test_a_fresh_folder_runs_the_smoke_report_on_the_shipped_corpus(tmp_path):
    """A new user's first command on a fresh clone: no CORPORA_DIR, no network, nothing cached. The shipped War and
    Peace is unpacked, the smoke profile trains, scores and renders (under a minute), and the run records what each
    job took for the next estimate."""
    home = tmp_path / "home"
    work = tmp_path / "fresh"
    work.mkdir()
    env = cli_env(CORPORA_DIR=None, CHARLM_ARTIFACTS=None, HOME=str(home), XDG_DATA_HOME=None, XDG_CACHE_HOME=None)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")  # lmplz sits beside python
    proc = subprocess.run(
        [sys.executable, "-m", "reports", "--profile", "smoke"], cwd=work, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert (home / ".local" / "share" / "charlm" / "corpora" / "warpeace_input.txt").is_file()
    report = work / "reports" / "build" / "smoke"
    assert (report / "index.html").is_file() and (report / "report.pdf").read_bytes().startswith(b"%PDF")
    assert "warpeace" in (report / "index.html").read_text()
    assert (work / "artifacts" / "warpeace").is_dir()
    timings = json.loads((report / "data" / "timings.json").read_text())  # `make timings` keeps such a record
    assert set(timings["analyses"]) == set(load_profile("smoke").analyses)
    assert any(key.startswith("train:") for key in timings["jobs"]) and timings["measured"]["workers"] >= 1
    shutil.rmtree(work / "artifacts")  # 20 MB of tiny models and n-grams


def test_the_first_page_counts_the_seeds_each_configuration_has():
    """The limits box counts configurations by the seeds they have, in the right number (a run with 2 and 3)."""
    from reports.pipeline import run_limits

    rows = [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("c", 0)]
    index = pd.DataFrame({
        "family": "neural", "selected": True, "corpus": "toy", "budget": 128, "layers": 1, "chars_trained": 1000,
        "variant": [g for g, _ in rows], "dropout": 0.0, "group_id": [g for g, _ in rows], "seed": [s for _, s in rows],
    })  # fmt: skip
    lines = run_limits(index, pd.DataFrame(), [])
    assert "toy: 2 configurations have 2-3 seeds; the other 1 has one, so its seed-to-seed noise" in " ".join(lines)
    lines = run_limits(index[index["group_id"] != "b"], pd.DataFrame(), [])
    assert "toy: 1 configuration has 3 seeds; the other 1 has one" in " ".join(lines)


FAULTS_PROBE = """
import resource, sys
from charlm.kinds.base import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def faults(nbytes):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = bytearray(nbytes)  # malloc'd and zeroed: every page touched
    del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults(64 * 2**20)  # the first block: faulted in either way
print(faults(64 * 2**20))
"""


@pytest.mark.skipif(sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_a_worker_reuses_freed_memory_instead_of_faulting_it_in_again():
    """keep_freed_memory (every report worker calls it): a 64 MiB temporary allocated again after being freed comes
    from the heap, not from fresh pages the kernel must zero one by one (by default glibc maps and unmaps it)."""

    def second_faults(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", FAULTS_PROBE, mode], capture_output=True, text=True, check=True)
        return int(out.stdout.split()[-1])

    pages = 64 * 2**20 // resource.getpagesize()
    assert second_faults("default") > pages // 2  # the default: every page faulted in again
    assert second_faults("keep") < pages // 20  # kept: the same memory, no new pages


def test_a_runs_revision_is_dirty_for_code_not_for_models_parked_in_training(tmp_path, monkeypatch):
    """reports.pipeline._git_revision: a change to a tracked file marks the revision "+uncommitted changes"; a change
    under models/partial/ (rewritten by `ship park` while trainers run; no run reads it) does not."""
    from reports import pipeline

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    (tmp_path / "models" / "partial").mkdir(parents=True)
    (tmp_path / "models" / "partial" / "state.pt").write_bytes(b"step 1")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    monkeypatch.setattr(pipeline, "REPO", tmp_path)
    monkeypatch.setattr(pipeline, "SHIPPED_ROOT", tmp_path / "models")
    clean = pipeline._git_revision()
    assert len(clean) == 12 and "+" not in clean
    (tmp_path / "models" / "partial" / "state.pt").write_bytes(b"step 2")
    assert pipeline._git_revision() == clean
    (tmp_path / "code.py").write_text("x = 2\n")
    assert pipeline._git_revision() == clean + "+uncommitted changes"
