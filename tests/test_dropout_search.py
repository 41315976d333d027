"""The line search of dropout (charlm.dropout_search): the rule on numbers whose answer is known by construction, and
`reports.ship train` applying it to tiny models it trains, whichever way their validation losses fall."""

from __future__ import annotations

import json

import pytest

from charlm import shipped
from charlm.dropout_search import line_search
from charlm.plan import left_out_line, load_profile, plan_all, plan_left_out
from corpora.errors import UserError
from reports import ship, ship_pack


def _line(*vals, trained=()):
    """A line at dropouts 0, 0.1, 0.25, 0.5 ... with these validation losses (None: not finished)."""
    drops = [0.0, 0.1, 0.25, 0.5, 0.75][: len(vals)]
    return [(f"d{d:g}", d, v, v is not None or f"d{d:g}" in trained) for d, v in zip(drops, vals)]


def test_the_first_two_dropouts_are_always_tried_and_the_third_only_if_the_second_beat_the_first():
    assert set(line_search(_line(None, None, None))) == {"d0.25"}  # 0 and 0.1 are never held back
    lost = line_search(_line(1.20, 1.25, None))
    assert lost["d0.25"].state == "untried" and lost["d0.25"].on == "d0.1"
    assert "1.2500 against 1.2000" in lost["d0.25"].why
    assert line_search(_line(1.20, 1.18, None)) == {}  # 0.1 helped: 0.25 is tried
    assert line_search(_line(1.20, 1.20, None))["d0.25"].state == "untried"  # a tie does not beat it


def test_a_search_waits_for_the_first_loss_it_needs_and_never_holds_back_a_trained_model():
    waits = line_search(_line(None, 1.25, None))
    assert waits["d0.25"].state == "waits" and waits["d0.25"].on == "d0"
    assert line_search(_line(1.2, None, None))["d0.25"].on == "d0.1"
    assert line_search(_line(1.20, 1.25, 1.30)) == {}  # trained before the search was a line: it was tried


def test_a_longer_line_stops_at_the_first_dropout_that_does_not_beat_those_below_it():
    out = line_search(_line(1.30, 1.25, 1.27, None, None))  # 0.1 helped, 0.25 did not: 0.5 and 0.75 are not tried
    assert {m: (v.state, v.on) for m, v in out.items()} == {"d0.5": ("untried", "d0.25"), "d0.75": ("untried", "d0.25")}
    assert "dropout 0.25 did not beat dropout 0.1" in out["d0.5"].why
    out = line_search(_line(1.30, 1.25, 1.20, None, None))  # each helped: 0.5 is tried, 0.75 waits for it
    assert set(out) == {"d0.75"} and out["d0.75"].state == "waits" and out["d0.75"].on == "d0.5"


def test_a_profile_names_a_known_search(tmp_path, small_text_file):
    toml = tmp_path / "bad.toml"
    toml.write_text(
        f'description = "x"\ncorpora = ["{small_text_file}"]\nanalyses = ["cross_entropy"]\n'
        '[[grid]]\ntypes = ["lstm"]\nlayers = [1]\nbudgets = [8]\ndropouts = [0.0, 0.5]\ndropout_search = "binary"\n'
    )
    with pytest.raises(UserError, match="dropout_search is one of grid, line"):
        load_profile(str(toml))


def test_ship_train_tries_the_third_dropout_only_where_the_second_beat_the_first(
    tmp_path, monkeypatch, small_text_file, capsys
):
    """A shipping profile's tiny LSTM at dropouts 0, 0.8 and 0.9 searched by line: `ship train` trains 0 and 0.8,
    then 0.9 exactly when 0.8 beat 0 on validation (read from what it trained); status, the queue and the report's
    plan leave out what it did not try."""
    toml = tmp_path / "line.toml"
    toml.write_text(
        f'description = "a line search"\ncorpora = ["{small_text_file}"]\nanalyses = ["cross_entropy"]\n'
        "ships_models = true\n[train]\nmax_chars = 20000\neval_chars = 1000\nbatch_size = 4\nunroll = 20\n"
        '[[grid]]\ntypes = ["lstm"]\nlayers = [1]\nbudgets = [8]\ndropouts = [0.0, 0.8, 0.9]\ndropout_search = "line"\n'
    )
    monkeypatch.setattr(shipped, "SHIPPED_ROOT", tmp_path / "models")
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "art"))
    profile = load_profile(str(toml))
    ids = {cf.dropout: cf.model_id(c.key) for c, cf, _ in ship.queue(profile)}
    assert sorted(ids) == [0.0, 0.8, 0.9]
    _, _, left_out = plan_left_out(profile)  # nothing trained: all three left out, 0.9 only maybe to come
    assert "3 model(s)" in left_out_line(profile, left_out)
    assert "1 of them only if their line search of dropout gets to them" in left_out_line(profile, left_out)

    assert ship.main(["train", "--profile", str(toml), "--only", ids[0.9]]) == 0  # nothing below it is trained
    assert "wait for lower dropouts that no process trains now" in capsys.readouterr().out
    assert not list((tmp_path / "art").glob(f"*/{ids[0.9]}/metrics.json"))

    assert ship.main(["train", "--profile", str(toml)]) == 0
    out = capsys.readouterr().out
    val = {d: json.loads(next((tmp_path / "art").glob(f"*/{m}/metrics.json")).read_text())["best_val_loss"]
           for d, m in ids.items() if d < 0.9}  # fmt: skip
    trained = {d for d, m in ids.items() if list((tmp_path / "art").glob(f"*/{m}/metrics.json"))}
    helped = val[0.8] < val[0.0]
    assert trained == ({0.0, 0.8, 0.9} if helped else {0.0, 0.8})
    assert (f"training {ids[0.9]}" in out) == helped  # tried, or not, on the validation losses it trained
    assert (f"{ids[0.9]} on {small_text_file.stem}: not tried: dropout 0.8 did not beat dropout 0" in out) != helped

    ship_pack.pack_all(str(toml), root=tmp_path / "models")
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "fresh"))  # a fresh clone reads the shipped losses
    assert {cf.dropout for _, cf, _ in ship.queue(profile)} == ({0.0, 0.8, 0.9} if helped else {0.0, 0.8})
    _, models = plan_all(profile)
    assert {m.config.dropout for m in models if m.kind.recurrent} == trained
    assert ship.main(["status", "--profile", str(toml)]) == 0
    said = capsys.readouterr().out
    named = said.partition("not tried by their line search of dropout (a lower dropout did not help): ")[2]
    assert (f"/{ids[0.9]}" in named) == (not helped)
