"""LSTMVis export: read back, row t is the state after reading character t (checked against model.trace), the
config and dictionary parse as LSTMVis parses them, h only without a memory cell, and one-line errors."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch
import yaml
from conftest import random_checkpoint

import corpora
from charlm import anymodel
from charlm.checkpoint import load_checkpoint
from charlm.score import LABELS
from corpora.errors import run_cli
from probes import export_lstmvis
from probes.export_lstmvis import export_lstmvis as export


def read_dict_like_lstmvis(path) -> dict[int, str]:
    """LSTMVis's own reader (lstmdata/data_handler.py): `token id` per line, or a line starting with a space."""
    id_to_token = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if len(line.split()) == 2:
                token, i = line.split()
                id_to_token[int(i)] = token
            elif line[0] == " ":
                id_to_token[int(line.strip())] = " "
    return id_to_token


def trace_of(model, ids) -> dict[str, np.ndarray]:
    with torch.no_grad():
        cache = model.trace(torch.as_tensor(np.asarray(ids, dtype=np.int64))[None])
    return {k: v[0].numpy() for k, v in cache.items()}


def test_export_reads_back_aligned_with_the_trace(tmp_path, tiny_run):
    checkpoint = tiny_run.out / "checkpoint.pt"
    model = load_checkpoint(checkpoint)
    ids = tiny_run.corpus.split("test")[:400].astype(np.int64)
    start, chars = 50, 300
    out = export(checkpoint, ids, tmp_path / "project", start, chars, chunk=7)  # chunks cross the slice: state carried
    with h5py.File(out / "states.h5", "r") as f:
        np.testing.assert_array_equal(f["word_ids"][:], ids[start : start + chars])
        states, outputs = f["states1"][:], f["output1"][:]
        assert states.dtype == np.float32 and states.shape == (chars, model.config.size)
    whole = trace_of(model, ids)  # one stream from the text's start
    np.testing.assert_allclose(states, whole["layers.0.c"][start : start + chars], atol=1e-5)
    np.testing.assert_allclose(outputs, whole["layers.0.h"][start : start + chars], atol=1e-5)
    for t in (0, 1, 137, chars - 1):  # row t is the state after reading character start + t, and no later one
        prefix = trace_of(model, ids[: start + t + 1])
        np.testing.assert_allclose(states[t], prefix["layers.0.c"][-1], atol=1e-5)
        np.testing.assert_allclose(outputs[t], prefix["layers.0.h"][-1], atol=1e-5)
    assert not np.allclose(states[1:], states[:-1])


def test_config_and_dictionary_parse_as_lstmvis_reads_them(tmp_path, tiny_run):
    vocab = tiny_run.corpus.vocab
    out = export(tiny_run.out / "checkpoint.pt", tiny_run.corpus.split("test"), tmp_path / "p", chars=100)
    config = yaml.safe_load((out / "lstm.yml").read_text(encoding="utf-8"))
    assert config["files"] == {"states": "states.h5", "words": "chars.dict"}
    assert config["word_sequence"] == {"file": "states", "path": "word_ids", "dict_file": "words"}
    assert config["states"]["types"] == [
        {"type": "state", "layer": 1, "path": "states1"},
        {"type": "output", "layer": 1, "path": "output1", "transform": "none"},
    ]
    with h5py.File(out / "states.h5", "r") as f:
        for t in config["states"]["types"]:
            assert f[t["path"]].shape == (100, 16)
    id_to_token = read_dict_like_lstmvis(out / "chars.dict")
    assert id_to_token == {i: LABELS[b] for i, b in enumerate(vocab)}  # every byte, space and newline included
    assert len(set(id_to_token.values())) == vocab.size
    assert {"\u23ce", " "} <= set(id_to_token.values())


@pytest.mark.parametrize("arch", ["rnn", "gru", "lstm-gates"])
def test_architectures_without_a_memory_cell_export_h_only(tmp_path, text_bytes, capsys, arch):
    corpus = corpora.Corpus.from_bytes("t", text_bytes)
    path = random_checkpoint(tmp_path / "m.pt", corpus, arch, layers=2)
    text = tmp_path / "t.txt"
    text.write_bytes(text_bytes[:200])
    assert run_cli(export_lstmvis.main, [str(path), "--text", str(text), "--out", str(tmp_path / "p")]) == 0
    assert "no memory cell" in capsys.readouterr().out
    config = yaml.safe_load((tmp_path / "p" / "lstm.yml").read_text())
    assert [t["type"] for t in config["states"]["types"]] == ["output", "output"]
    assert "no memory cell" in config["description"]
    whole = trace_of(anymodel.load(path).net, corpus.encode(text_bytes[:200]))
    with h5py.File(tmp_path / "p" / "states.h5", "r") as f:
        assert sorted(f) == ["output1", "output2", "word_ids"]
        np.testing.assert_allclose(f["output2"][:], whole["layers.1.h"], atol=1e-5)


def test_ablation_with_a_cell_exports_both_per_layer(tmp_path, text_bytes):
    corpus = corpora.Corpus.from_bytes("t", text_bytes)
    path = random_checkpoint(tmp_path / "m.pt", corpus, "lstm-srnn-hidden", layers=2)
    ids = corpus.encode(text_bytes[:300])
    export(path, ids, tmp_path / "p", chunk=64)
    whole = trace_of(anymodel.load(path).net, ids)
    with h5py.File(tmp_path / "p" / "states.h5", "r") as f:
        assert sorted(f) == ["output1", "output2", "states1", "states2", "word_ids"]
        np.testing.assert_allclose(f["states2"][:], whole["layers.1.c"], atol=1e-5)


def test_cli_split_and_replacing_an_earlier_export(tmp_path, tiny_run, capsys):
    checkpoint = str(tiny_run.out / "checkpoint.pt")
    out = tmp_path / "p"
    assert run_cli(export_lstmvis.main, [checkpoint, "--split", "test", "--chars", "50", "--out", str(out)]) == 0
    assert run_cli(export_lstmvis.main, [checkpoint, "--split", "val", "--start", "10", "--out", str(out)]) == 0
    val = tiny_run.corpus.split("val")
    with h5py.File(out / "states.h5", "r") as f:
        np.testing.assert_array_equal(f["word_ids"][:], val[10:])  # --chars beyond the text: all of it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p"]  # no temporary folder left behind
    with pytest.raises(SystemExit) as exit_info:
        export_lstmvis.main(["--help"])
    assert exit_info.value.code == 0 and "--split" in capsys.readouterr().out


@pytest.mark.parametrize("case, contains", [
    ("oov", "0xff (x1, first at byte 3)"), ("empty", "empty"), ("missing", "does not exist"), ("corrupt", "corrupt"),
    ("chars", "--chars"), ("start", "past the end"), ("not_export", "not an earlier LSTMVis export"),
    ("nnn", "not a recurrent model"),
])  # fmt: skip
def test_bad_input_is_one_line_and_leaves_nothing(tmp_path, tiny_run, capsys, case, contains):
    from charlm.checkpoint import save_payload
    from charlm.nnn_model import NNN

    checkpoint = str(tiny_run.out / "checkpoint.pt")
    (tmp_path / "oov.txt").write_bytes(b"the\xff war")
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "ok.txt").write_bytes(b"the war")
    (tmp_path / "bad.pt").write_bytes(b"garbage")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    tiny_nnn = NNN(1, 2, 2)
    save_payload(tmp_path / "nnn.pt", {"kind": "nnn", "config": tiny_nnn.config(), "state_dict": tiny_nnn.state_dict(),
                                       "vocab": [32, 97]})  # fmt: skip
    out = tmp_path / "p"
    argv = {
        "oov": [checkpoint, "--text", str(tmp_path / "oov.txt")],
        "empty": [checkpoint, "--text", str(tmp_path / "empty.txt")],
        "missing": [str(tmp_path / "nope.pt"), "--split", "test"],
        "corrupt": [str(tmp_path / "bad.pt"), "--split", "test"],
        "chars": [checkpoint, "--split", "test", "--chars", "-3"],
        "start": [checkpoint, "--text", str(tmp_path / "ok.txt"), "--start", "7"],
        "not_export": [checkpoint, "--split", "test", "--out", str(tmp_path / "taken")],
        "nnn": [str(tmp_path / "nnn.pt"), "--split", "test"],
    }[case]
    if "--out" not in argv:
        argv += ["--out", str(out)]
    assert run_cli(export_lstmvis.main, argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and contains in err[0], err
    assert not out.exists() and (tmp_path / "taken" / "notes.txt").read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
