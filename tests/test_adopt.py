"""Your own model (issue 37): charlm.adopt maps an ordinary PyTorch character LM onto the suite's model exactly.

Every user model here is written the ordinary way, without charlm (`UserLM`): nn.Embedding or one-hot input,
nn.LSTM / nn.GRU / nn.RNN of 1 to 3 layers, batch_first both ways, with and without biases, under changing
attribute names, its vocabulary in a shuffled order (sometimes with characters the corpus never uses) saved as a
list or a map. The references are the user's own forward passes: log_softmax of `UserLM.forward` on one stream
from a zero state, and the user's own test cross-entropy.
"""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import assert_one_line_error, cli_env, make_text, run_cli

import corpora
from charlm import adopt
from charlm.checkpoint import load_checkpoint
from corpora.errors import run_cli as run_main

CELLS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}
NAMES = (("embed", "rnn", "head"), ("emb", "encoder", "decoder"), ("tok", "core", "fc"))  # attribute names vary


class UserLM(nn.Module):
    """A character LM as a researcher writes it without charlm."""

    def __init__(self, cell: str, vocab_size: int, hidden: int, layers: int, batch_first: bool = True,
                 bias: bool = True, head_bias: bool = True, embed: int | None = 6, names=NAMES[0]):  # fmt: skip
        super().__init__()
        self.V, self.batch_first, self.names = vocab_size, batch_first, names
        if embed:
            setattr(self, names[0], nn.Embedding(vocab_size, embed))
        width = embed or vocab_size
        setattr(self, names[1], CELLS[cell](width, hidden, layers, batch_first=batch_first, bias=bias))
        setattr(self, names[2], nn.Linear(hidden, vocab_size, bias=head_bias))
        with torch.no_grad():
            for p in self.parameters():  # larger than torch's init, so that the carried state matters
                p.uniform_(-0.4, 0.4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """(T,) class ids of one stream -> (T, V) logits, from a zero state."""
        embed = getattr(self, self.names[0], None)
        x = embed(ids) if embed is not None else F.one_hot(ids, self.V).to(next(self.parameters()).dtype)
        x = x[None] if self.batch_first else x[:, None]
        out, _ = getattr(self, self.names[1])(x)
        return getattr(self, self.names[2])(out[0] if self.batch_first else out[:, 0])


def user_logp(model: UserLM, text: str, stoi: dict) -> np.ndarray:
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([stoi[c] for c in text])).double(), -1).numpy()


def user_cross_entropy(model: UserLM, text: str, stoi: dict) -> float:
    ids = [stoi[c] for c in text]
    logp = user_logp(model, text[:-1], stoi)
    return float(-logp[np.arange(len(ids) - 1), ids[1:]].mean())


def write_user(tmp_path, model: nn.Module, chars: list[str], form: str = "list", name: str = "user"):
    """The user's two files: torch.save(state_dict) and the vocabulary JSON."""
    model_path, vocab_path = tmp_path / f"{name}.pt", tmp_path / f"{name}.json"
    torch.save(model.state_dict(), model_path)
    vocab = {"list": chars, "map": {c: i for i, c in enumerate(chars)}, "inverse": dict(enumerate(chars))}[form]
    vocab_path.write_text(json.dumps(vocab))
    return model_path, vocab_path


def shuffled_chars(text: str, extra: str = "", seed: int = 0) -> list[str]:
    chars = sorted(set(text) | set(extra))
    random.Random(seed).shuffle(chars)
    return chars


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("adopt") / "tiny.txt"
    path.write_bytes(make_text(3000, seed=3))
    return path


def adopted(model_path, vocab_path, corpus_path, **options):
    """Adopt, write, and load the written checkpoint back (what every analysis would read)."""
    found = adopt.adopt(model_path, vocab_path, corpora.load(str(corpus_path)), **options)
    return load_checkpoint(adopt.write(found) / "checkpoint.pt"), found


def suite_logp(net, data: bytes, vocab: list[int], trace: bool = False) -> np.ndarray:
    ids = torch.tensor([vocab.index(b) for b in data])[None]
    with torch.no_grad():
        logits = net.run_with_cache(ids)[0] if trace else net(ids)
    return torch.log_softmax(logits[0].double(), -1).numpy()


CASES = [(cell, bias, embed, batch_first) for cell in CELLS for bias in ("both", "none", "rnn-only")
         for embed in (6, None) for batch_first in (True, False)]  # fmt: skip


@pytest.mark.parametrize("k", range(len(CASES)), ids=lambda k: "-".join(map(str, CASES[k])))
def test_adopted_model_is_the_users_model(k, corpus_file, artifacts):
    cell, bias, embed, batch_first = CASES[k]
    layers, form, extra = 1 + k % 3, ("list", "map", "inverse")[k % 3], ("", "Z~")[k % 2]
    text = corpus_file.read_text()
    chars = shuffled_chars(text, extra, seed=k)
    torch.manual_seed(k)
    user = UserLM(cell, len(chars), 8, layers, batch_first, bias != "none", bias == "both", embed, NAMES[k % 3])
    net, found = adopted(*write_user(artifacts.parent, user, chars, form), corpus_file)
    vocab = net.meta["vocab"]
    corpus = corpora.load(str(corpus_file))
    assert vocab[: corpus.vocab_size] == corpus.vocab.tolist()  # corpus-first: the corpus's ids are the model's
    assert sorted(vocab[corpus.vocab_size :]) == sorted(map(ord, extra))
    assert (net.config.arch, net.config.layers, net.config.size, net.config.vocab_size) == (cell, layers, 8, len(chars))
    excerpt = text[1000:1300]
    stoi = {c: i for i, c in enumerate(chars)}
    expected = user_logp(user, excerpt, stoi)[:, [stoi[chr(b)] for b in vocab]]
    for trace in (False, True):  # torch's fused kernel and the hand-written cells the analyses trace
        assert np.abs(suite_logp(net, excerpt.encode(), vocab, trace) - expected).max() < 1e-5
    record = net.meta["adopted"]
    assert record["check"]["max_abs_logp_diff"] < 1e-5
    assert record["rnn_biases"] == ("absent: zeros" if bias == "none" else "present")
    assert record["input"].startswith("embedding" if embed else "one-hot")
    assert (record["nonlinearity"] or "").startswith("tanh" if cell == "rnn" else "")
    metrics = json.loads((found.folder / "metrics.json").read_text())
    assert metrics["complete"] and metrics["kind"] == "adopted" and metrics["corpus_key"] == corpus.key
    assert re.fullmatch(rf"adopted-{cell}-L{layers}-H8-[0-9a-f]{{6}}", metrics["model_id"])
    assert found.folder.parent.name == corpus.artifact_name and found.folder.name == metrics["model_id"]


def test_score_is_the_users_cross_entropy(tmp_path, corpus_file, artifacts, capsys):
    """One stream (a short test split): the same numbers; then the CLI in a subprocess and charlm.predict."""
    text = corpus_file.read_text()
    chars = shuffled_chars(text, "Q")
    torch.manual_seed(1)
    user = UserLM("lstm", len(chars), 12, 2, batch_first=False)
    model_path, vocab_path = write_user(tmp_path, user, chars, "map")
    corpus = corpora.load(str(corpus_file))
    lo, hi = corpus.split_bounds()["test"]
    theirs = user_cross_entropy(user, text[lo:hi], {c: i for i, c in enumerate(chars)})
    argv = [str(model_path), "--vocab", str(vocab_path), "--corpus", str(corpus_file), "--score", "test"]
    assert run_main(adopt.main, argv) == 0
    ours = float(re.search(r"test cross-entropy ([0-9.]+) ", capsys.readouterr().out).group(1))
    assert abs(ours - theirs) < 1e-5
    proc = run_cli("charlm.adopt", *argv, env=cli_env(CHARLM_ARTIFACTS=str(artifacts)))
    assert proc.returncode == 0, proc.stderr
    assert float(re.search(r"test cross-entropy ([0-9.]+) ", proc.stdout).group(1)) == ours
    from charlm.predict import predict_split
    from charlm.predictions import load

    folder = next(artifacts.glob("*/adopted-lstm-*"))
    preds = load(predict_split(folder / "checkpoint.pt", "test", progress=False))
    assert abs(preds.cross_entropy(2)[0] - theirs) < 1e-5  # the suite's own predictions read the corpus as it is


def test_score_on_parallel_streams_and_charrnn_splits(tmp_path, artifacts, capsys):
    """A test split long enough for several warmed-up streams: within 2e-3 of the user's one stream."""
    path = tmp_path / "long.txt"
    path.write_bytes(make_text(30000, seed=5))
    text = path.read_text()
    chars = shuffled_chars(text)
    torch.manual_seed(2)
    user = UserLM("gru", len(chars), 10, 1)
    model_path, vocab_path = write_user(tmp_path, user, chars)
    corpus = corpora.load(str(path), split_mode="charrnn")
    split = corpus.decode(corpus.split("test")).decode()
    assert len(split) >= 8000  # several streams
    theirs = user_cross_entropy(user, split, {c: i for i, c in enumerate(chars)})
    argv = [str(model_path), "--vocab", str(vocab_path), "--corpus", str(path), "--splits", "charrnn"]
    assert run_main(adopt.main, [*argv, "--score", "test"]) == 0
    ours = float(re.search(r"test cross-entropy ([0-9.]+) ", capsys.readouterr().out).group(1))
    assert abs(ours - theirs) < 2e-3


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning", "ignore::DeprecationWarning")
def test_latin1_nested_and_trusted_pickle(tmp_path, artifacts, capsys):
    """A model that read its corpus as latin-1 (é is one byte), a training checkpoint holding the state_dict, and a
    whole pickled module and a TorchScript archive with --trust-pickle (and without it: one line)."""
    path = tmp_path / "latin.txt"
    path.write_bytes(make_text(2000, seed=7).replace(b"e", b"\xe9"))
    text = path.read_bytes().decode("latin-1")
    chars = shuffled_chars(text)
    torch.manual_seed(3)
    user = UserLM("rnn", len(chars), 8, 2, embed=None).double()  # float64 weights become the suite's float32
    model_path, vocab_path = write_user(tmp_path, user, chars)
    torch.save({"epoch": 3, "model_state_dict": user.state_dict()}, tmp_path / "nested.pt")
    torch.save(user, tmp_path / "whole.pt")
    torch.jit.trace(user, torch.arange(5)).save(tmp_path / "traced.pt")
    base = ["--vocab", str(vocab_path), "--corpus", str(path)]
    assert run_main(adopt.main, [str(model_path), *base]) == 2
    assert "more than one byte in UTF-8: 'é' (U+00E9, 2 bytes)" in capsys.readouterr().err
    for name, extra in (("nested.pt", []), ("whole.pt", ["--trust-pickle"]), ("traced.pt", ["--trust-pickle"])):
        assert run_main(adopt.main, [str(tmp_path / name), *base, "--encoding", "latin-1", *extra]) == 0
    folders = sorted(artifacts.glob("*/adopted-rnn-*"))
    assert len(folders) == 3  # one model id per source file
    stoi = {c: i for i, c in enumerate(chars)}
    for folder in folders:
        net = load_checkpoint(folder / "checkpoint.pt")
        assert 0xE9 in net.meta["vocab"] and net.meta["adopted"]["encoding"] == "latin-1"
        expected = user_logp(user, text[:400], stoi)[:, [stoi[chr(b)] for b in net.meta["vocab"]]]
        assert np.abs(suite_logp(net, text[:400].encode("latin-1"), net.meta["vocab"]) - expected).max() < 1e-5
    assert run_main(adopt.main, [str(tmp_path / "traced.pt"), *base, "--encoding", "latin-1"]) == 2
    assert "TorchScript archive" in capsys.readouterr().err


class TwoTables(nn.Module):
    """Embedding and head both (V, 8) with no head bias, under names given by the test, registered in `order`."""

    def __init__(self, V: int, names: dict, order: str):
        super().__init__()
        make = {
            "embedding": lambda: nn.Embedding(V, 8),
            "rnn": lambda: nn.GRU(8, 8),
            "head": lambda: nn.Linear(8, V, bias=False),
        }
        for part in order.split():
            setattr(self, names[part], make[part]())


def test_head_told_by_names_order_or_head_option(tmp_path, corpus_file, artifacts, capsys):
    """Same shapes and no bias: word_language_model's names tell them apart, as does the ordinary order; when
    neither can, one line asks for --head, and --head decides."""
    chars = shuffled_chars(corpus_file.read_text())
    V, corpus = len(chars), corpora.load(str(corpus_file))
    cases = [
        ({"embedding": "encoder", "rnn": "rnn", "head": "decoder"}, "head rnn embedding", "decoder.weight", "its name"),
        ({"embedding": "a", "rnn": "b", "head": "c"}, "embedding rnn head", "c.weight", "the order"),
    ]
    for k, (names, order, head, told) in enumerate(cases):
        model_path, vocab_path = write_user(tmp_path, TwoTables(V, names, order), chars, name=f"two{k}")
        layout = adopt.adopt(model_path, vocab_path, corpus).provenance["layout"]
        assert (layout["head_weight"], layout["head_told_by"].split(":")[0]) == (head, told)
    model_path, vocab_path = write_user(
        tmp_path, TwoTables(V, {"embedding": "b", "rnn": "r", "head": "a"}, "head embedding rnn"), chars
    )
    argv = [str(model_path), "--vocab", str(vocab_path), "--corpus", str(corpus_file)]
    assert run_main(adopt.main, argv) == 2
    assert "name the head with --head KEY" in capsys.readouterr().err
    assert not artifacts.exists()
    assert run_main(adopt.main, [*argv, "--head", "a.weight"]) == 0
    metrics = json.loads(next(artifacts.glob("*/*/metrics.json")).read_text())
    assert metrics["adopted"]["mapping"]["layers.0.rnn.weight_ih_l0"].startswith("r.weight_ih_l0 @ b.weight^T")


# ------------------------------------------------------------------------------------------ bad input


def _edited(state: dict, changes: dict | None = None, drop=()) -> dict:
    """A copy of a state_dict with keys dropped, replaced or added (added ones last)."""
    return {k: v for k, v in state.items() if k not in drop} | (changes or {})


def _bad_inputs(tmp_path, text: str) -> dict:
    """name -> (model file, vocab file, what the one error line must say)."""
    chars = sorted(set(text))
    torch.manual_seed(0)
    lstm2 = UserLM("lstm", len(chars), 8, 2).state_dict()
    narrow = nn.LSTM(8, 6).state_dict()  # a second layer of another width
    cases = {
        "unknown keys": (
            _edited(lstm2, {"norm.weight": torch.ones(8), "norm.bias": torch.zeros(8)}),
            chars,
            ["unexpected keys norm.weight (8), norm.bias (8)", "expected only an nn.LSTM"],
        ),
        "missing key": (
            _edited(lstm2, drop=["rnn.weight_hh_l1"]),
            chars,
            ["missing keys rnn.weight_hh_l1", "weight_ih, weight_hh, bias_ih, bias_hh for every layer"],
        ),
        "no head": (UserLM("gru", len(chars), 8, 1, embed=None).rnn.state_dict(), chars, ["no output layer"]),
        "no recurrent module": ({"fc.weight": torch.zeros(3, 4)}, chars, ["no recurrent weights found (", "fc.weight"]),
        "embedding rows": (
            _edited(lstm2, {"embed.weight": torch.zeros(len(chars) + 1, 6)}),
            chars,
            [f"embed.weight has shape ({len(chars) + 1}, 6): expected ({len(chars)}, 6)"],
        ),
        "layer widths": (
            _edited(lstm2, {"rnn.weight_ih_l1": torch.zeros(32, 9)}),
            chars,
            ["rnn.weight_ih_l1 has shape (32, 9), expected (32, 8)"],
        ),
        "hidden sizes": (
            _edited(lstm2, {f"rnn.{k[:-1]}1": v for k, v in narrow.items()}),
            chars,
            ["hidden sizes differ across layers (8, 6)", "one size"],
        ),
        "vocab too short": (lstm2, chars[:-1], [f"has {len(chars) - 1} characters but the model's head predicts"]),
        "bidirectional": (nn.GRU(4, 4, bidirectional=True).state_dict(), chars, ["bidirectional"]),
        "multi-byte": (
            UserLM("gru", len(chars) + 1, 8, 1).state_dict(),
            [*chars, "é"],
            ["more than one byte in UTF-8: 'é' (U+00E9, 2 bytes)", "the suite reads bytes", "latin-1"],
        ),
        "unencodable": (
            UserLM("gru", len(chars) - 2, 8, 1).state_dict(),
            [c for c in chars if c not in "\n,"],
            [f"2 characters the vocabulary cannot encode: '\\n' (x{text.count(chr(10))}), ',' (x{text.count(',')})"],
        ),  # fmt: skip
        "duplicate": (lstm2, [chars[0], *chars[:-1]], [f"lists {chars[0]!r} more than once"]),
        "not a character": (lstm2, ["ab", *chars[1:]], ["class 0 is 'ab', not one character"]),
    }
    files = {}
    for name, (state, vocab, says) in cases.items():
        slug = name.replace(" ", "_")
        torch.save(state, tmp_path / f"{slug}.pt")
        (tmp_path / f"{slug}.json").write_text(json.dumps(vocab))
        files[name] = (tmp_path / f"{slug}.pt", tmp_path / f"{slug}.json", says)
    good_vocab = tmp_path / "good.json"
    good_vocab.write_text(json.dumps(chars))
    torch.save(UserLM("lstm", len(chars), 8, 1), tmp_path / "pickled.pt")
    (tmp_path / "random.pt").write_bytes(np.random.default_rng(0).bytes(500))
    (tmp_path / "vocab_as_model.pt").write_text(json.dumps(chars))
    (tmp_path / "bad.json").write_bytes(b"\x80not json")
    torch.save(lstm2, tmp_path / "lstm2.pt")
    files |= {
        "pickle": (tmp_path / "pickled.pt", good_vocab, ["pickled Python objects", "pass --trust-pickle if"]),
        "random bytes": (tmp_path / "random.pt", good_vocab, ["is not a PyTorch file"]),
        "a JSON file": (tmp_path / "vocab_as_model.pt", good_vocab, ["is not a PyTorch file"]),
        "missing file": (tmp_path / "nowhere.pt", good_vocab, ["does not exist"]),
        "vocab not JSON": (tmp_path / "lstm2.pt", tmp_path / "bad.json", ["is not JSON"]),
    }
    return files


def test_bad_input_is_one_line_and_writes_nothing(tmp_path, corpus_file, artifacts, capsys):
    for name, (model_path, vocab_path, says) in _bad_inputs(tmp_path, corpus_file.read_text()).items():
        argv = [str(model_path), "--vocab", str(vocab_path), "--corpus", str(corpus_file), "--score", "test"]
        assert run_main(adopt.main, argv) == 2, name
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), (name, err)
        for piece in says:
            assert piece in err, (name, piece, err)
        assert not artifacts.exists(), name


def test_cli_pickle_error_in_a_subprocess(tmp_path, corpus_file, artifacts):
    torch.save(UserLM("gru", 5, 4, 1), tmp_path / "whole.pt")
    (tmp_path / "v.json").write_text(json.dumps(list("abcde")))
    proc = run_cli("charlm.adopt", tmp_path / "whole.pt", "--vocab", tmp_path / "v.json", "--corpus", corpus_file,
                   env=cli_env(CHARLM_ARTIFACTS=str(artifacts)))  # fmt: skip
    assert_one_line_error(proc, contains="--trust-pickle")
    assert not artifacts.exists()


def test_out_folder_of_another_model_is_refused(tmp_path, corpus_file, artifacts, capsys):
    chars = shuffled_chars(corpus_file.read_text())
    model_path, vocab_path = write_user(tmp_path, UserLM("gru", len(chars), 4, 1), chars)
    other = tmp_path / "other"
    other.mkdir()
    (other / "metrics.json").write_text(json.dumps({"model_id": "lstm-L1-H8-s0-abcdef", "complete": True}))
    argv = [str(model_path), "--vocab", str(vocab_path), "--corpus", str(corpus_file), "--out", str(other)]
    assert run_main(adopt.main, argv) == 2
    assert "holds another model (lstm-L1-H8-s0-abcdef)" in capsys.readouterr().err
    assert sorted(p.name for p in other.iterdir()) == ["metrics.json"] and not artifacts.exists()
    assert run_main(adopt.main, argv[:-1] + [str(tmp_path / "mine")]) == 0
    assert run_main(adopt.main, argv[:-1] + [str(tmp_path / "mine")]) == 0  # adopting again rewrites the same model
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["checkpoint.pt", "metrics.json"]


def test_the_report_puts_an_adopted_model_beside_the_profiles(tmp_path, small_text_file, artifacts):
    """`python -m reports --corpus TEXT --adopt MODEL.pt --vocab VOCAB.json`: the user's GRU is scored and traced
    like the suite's own LSTM; its cross-entropy in the report is the user's own on the test split."""
    import dataclasses

    import pandas as pd

    from charlm.plan import load_profile
    from reports.pipeline import RunOptions, run

    text = small_text_file.read_text()
    chars = shuffled_chars(text)
    torch.manual_seed(4)
    user = UserLM("gru", len(chars), 9, 2, names=NAMES[1])
    model_path, vocab_path = write_user(tmp_path, user, chars, "map")
    profile = dataclasses.replace(
        load_profile("smoke"), analyses=["cross_entropy", "saturation"], baselines={}, ablations={},
        analysis={"saturation": {"start": 100, "length": 500, "warmup": 100}},
        grid=[{"types": ["lstm"], "layers": [1], "budgets": [8]}],
    )  # fmt: skip
    options = RunOptions(profile, corpora_override=[str(small_text_file)], build_root=tmp_path / "build",
                         adopt=[(str(model_path), str(vocab_path))])  # fmt: skip
    run(options)  # raises ReportIncomplete if a section failed
    data = tmp_path / "build" / "smoke" / "data"
    models = pd.read_csv(data / "models.csv")
    (adopted_id,) = models.loc[models["kind"] == "adopted", "model_id"]
    assert adopted_id.startswith("adopted-gru-L2-H9-") and set(models["kind"]) == {"neural", "adopted"}
    ce = pd.read_csv(data / "cross_entropy.csv").set_index("model_id")
    corpus = corpora.load(str(small_text_file))
    lo, hi = corpus.split_bounds()["test"]
    theirs = user_cross_entropy(user, text[lo:hi], {c: i for i, c in enumerate(chars)})
    assert abs(ce.loc[adopted_id, "ce_nats"] - theirs) < 2e-3 and len(ce) == 2
    saturation = pd.read_csv(data / "saturation.csv")
    assert set(saturation["model_id"]) == set(ce.index)  # the gates of both, the user's GRU's included
    page = (tmp_path / "build" / "smoke" / "index.html").read_text()
    assert f"{adopted_id} is your own GRU (2 x 9), adopted from {model_path}" in page  # named, with its source
