"""`make report` end to end on the smoke profile and a tiny corpus: report, cache, partial recompute."""

from __future__ import annotations

import dataclasses
import re
import shutil

import pytest

from reports.pipeline import RunOptions, run
from reports.profiles import available, load_profile


def test_every_shipped_profile_loads():
    names = available()
    assert {"smoke", "quick", "standard", "paper"} <= set(names)
    quick, paper = load_profile("quick"), load_profile("paper")
    assert set(quick.corpora) == {"warpeace", "linux"} and not quick.wants_gpu
    assert paper.wants_gpu and paper.grid["layers"] == [1, 2, 3] and paper.grid["sizes"] == [64, 128, 256, 512]
    assert len(paper.ablations["lstm_seeds"]) == 5


def test_unknown_profile_is_a_user_error():
    from corpora.errors import UserError

    with pytest.raises(UserError, match="unknown profile"):
        load_profile("nope")


@pytest.fixture
def smoke_profile():
    profile = load_profile("smoke")
    if shutil.which("lmplz") is None:
        try:
            import charlm.ngram as ngram

            ngram.find_tool("lmplz")
        except Exception:
            profile = dataclasses.replace(profile, analyses=["cross_entropy", "ablations"], baselines={})
    return profile


def test_report_end_to_end_then_cached(tmp_path, monkeypatch, small_text_file, smoke_profile, capsys):
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))
    options = RunOptions(smoke_profile, corpora_override=[str(small_text_file)], build_root=tmp_path / "build")
    html, pdf = run(options)
    text = html.read_text()
    for name in smoke_profile.analyses:
        assert (tmp_path / "build" / "smoke" / "data" / f"{name}.csv").exists()
        assert f'id="{name}"' in text
    assert pdf.read_bytes().startswith(b"%PDF")
    first = capsys.readouterr().out
    assert "to train" in first and "computing" in first

    run(options)  # nothing changed: nothing is trained or recomputed
    second = capsys.readouterr().out
    assert re.search(r"\((\d+) cached, 0 to train\)", second)
    assert "computing" not in second

    # One setting changed (the LSTM seeds of the ablations): only the new model trains, only its analyses recompute.
    ablations = dict(smoke_profile.ablations, lstm_seeds=[0, 1, 2])
    run(dataclasses.replace(options, profile=dataclasses.replace(smoke_profile, ablations=ablations)))
    third = capsys.readouterr().out
    assert re.search(r"cached, 1 to train\)", third)
    assert "analysis ablations: computing" in third
