"""Sampling like char-rnn: argmax at T = 0 equals greedy decoding by the scoring path for every model kind,
draws follow softmax(log p / T), a seed reproduces, the prime is read first; the samples analysis keeps bytes exact."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import fake_corpus_file, fake_neural_model, random_checkpoint

import corpora
from analyses import common, samples
from analyses.context import Context, model_index
from analyses.prose import sentence, unsupported_numbers
from charlm import ARCHS, anymodel, ngram, nnn_model
from charlm import sample as sample_module
from charlm.checkpoint import save_payload
from charlm.sample import next_id, sample
from corpora.errors import UserError, run_cli


@pytest.fixture(autouse=True)
def _artifacts(tmp_path, monkeypatch):
    monkeypatch.setenv("CHARLM_ARTIFACTS", str(tmp_path / "artifacts"))


@pytest.fixture
def corpus(text_bytes):
    return corpora.Corpus.from_bytes("t", text_bytes)


def random_nnn(path, corpus, n=3, hidden=8):
    torch.manual_seed(0)
    model = nnn_model.NNN(n, corpus.vocab_size, hidden)
    with torch.no_grad():
        model.inp.weight.uniform_(-1, 1)
        model.inp.weight[model.pad].zero_()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    save_payload(path, {"kind": "nnn", "config": model.config(), "state_dict": state, "vocab": corpus.vocab.tolist(),
                        "model_id": "nnn-random"})  # fmt: skip
    return path


def greedy_by_scoring(model, prime_ids, length):
    """Independent of the stepper: rescore the whole prefix with the Predictions path, take the last row's argmax."""
    ids = list(prime_ids)
    for _ in range(length):
        ids.append(int(model.logprobs(np.array(ids + [0]), streams=1)[-1].argmax()))  # the trailing 0 is never read
    return model.decode(ids[len(prime_ids) :])


@pytest.mark.parametrize("arch", ARCHS)
def test_argmax_at_zero_temperature_is_greedy_decoding_for_every_architecture(tmp_path, corpus, arch):
    model = anymodel.load(random_checkpoint(tmp_path / "m.pt", corpus, arch, layers=2))
    prime = b"the war"
    got = sample(model, 20, temperature=0, prime=prime)
    assert got == greedy_by_scoring(model, model.encode(prime)[0], 20)
    assert sample(model, 20, temperature=0, prime=prime, seed=99) == got  # the seed plays no part in argmax


def test_nnn_and_ngram_sample_greedily_like_they_score(tmp_path, corpus):
    model = anymodel.load(random_nnn(tmp_path / "nnn.pt", corpus))
    assert sample(model, 8, 0, b"pierre") == greedy_by_scoring(model, model.encode(b"pierre")[0], 8)
    assert sample(model, 8, 0, b"e") == greedy_by_scoring(model, model.encode(b"e")[0], 8)  # prime shorter than n
    pytest.importorskip("kenlm")
    try:
        ngram.find_tool("lmplz"), ngram.find_tool("build_binary")
    except UserError as err:
        pytest.skip(str(err))
    gram = anymodel.load(ngram.build(corpus, 3, progress=False, memory="64M"))
    assert sample(gram, 10, 0, b"the ") == greedy_by_scoring(gram, gram.encode(b"the ")[0], 10)
    assert len(sample(gram, 50, 1.0, b"", seed=4)) == 50


def test_draws_follow_the_tempered_softmax():
    logp = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    rng = np.random.default_rng(0)
    for temperature in (0.5, 1.0, 2.0):
        draws = np.array([next_id(logp, temperature, rng) for _ in range(20_000)])
        expected = np.exp(logp / temperature) / np.exp(logp / temperature).sum()
        np.testing.assert_allclose(np.bincount(draws, minlength=4) / draws.size, expected, atol=0.012)
    assert next_id(logp, 0, rng) == 0


def sample_by_scoring(model, prime_ids, length, temperature, seed):
    """Independent of the stepper: replay the sampler's draws with each step's distribution rescored from the whole
    prefix by the Predictions path (no prime: the first byte uniform, as char-rnn)."""
    rng = np.random.default_rng(seed)
    ids = list(prime_ids)
    for _ in range(length):
        if ids:
            logp = model.logprobs(np.array(ids + [0]), streams=1)[-1].astype(np.float64)
        else:
            logp = np.full(model.vocab_size, -np.log(model.vocab_size))
        scaled = logp / temperature
        p = np.exp(scaled - scaled.max())
        ids.append(int(rng.choice(p.size, p=p / p.sum())))
    return model.decode(ids[len(prime_ids) :])


@pytest.mark.parametrize("arch", ["lstm", "gru-paper", "rnn"])
@pytest.mark.parametrize("prime", [b"the war", b""])
def test_a_tempered_sample_is_the_draw_from_the_scored_distribution_at_every_step(tmp_path, corpus, arch, prime):
    """At T > 0 each byte is drawn from softmax(log p / T) of the model's distribution after the prime and the bytes
    drawn before it: the stepper's state after feeding its own draws back agrees with rescoring the prefix."""
    model = anymodel.load(random_checkpoint(tmp_path / "m.pt", corpus, arch, layers=2))
    with torch.no_grad():  # weights scaled up from the small init, so the distributions are far from uniform
        for p in model.net.parameters():
            p.mul_(20.0)
    for temperature in (0.7, 1.5):
        got = sample(model, 30, temperature, prime, seed=5)
        assert got == sample_by_scoring(model, model.encode(prime)[0], 30, temperature, seed=5)
    assert sample(model, 30, 0.7, prime, seed=5) != sample(model, 30, 1.5, prime, seed=5)


def test_sampled_frequencies_follow_the_tempered_model_distribution(tmp_path, corpus):
    """A network whose every prediction is softmax(b) (all weights zero but the output bias b): 1,500 sampled bytes
    have the frequencies softmax(log softmax(b) / T) for a sharpening and a flattening temperature, which differ
    from each other by far more than the tolerance."""
    model = anymodel.load(random_checkpoint(tmp_path / "m.pt", corpus, "lstm", layers=1))
    rng = np.random.default_rng(2)
    with torch.no_grad():
        for p in model.net.parameters():
            p.zero_()
        model.net.head.bias.copy_(torch.as_tensor(1.5 * rng.normal(size=model.vocab_size)))
    logp = torch.log_softmax(model.net.head.bias.detach().double(), -1).numpy()
    expected = {}
    for temperature in (0.5, 2.0):
        e = np.exp(logp / temperature - (logp / temperature).max())
        expected[temperature] = e / e.sum()
        draws = model.encode(sample(model, 1500, temperature, b"the ", seed=3))[0]
        freq = np.bincount(draws, minlength=model.vocab_size) / draws.size
        assert np.abs(freq - expected[temperature]).max() < 0.04  # over 3 standard errors (at most 0.013)
    assert np.abs(expected[0.5] - expected[2.0]).max() > 0.1


def test_a_seed_reproduces_and_the_prime_is_read_first(tmp_path, corpus):
    path = random_checkpoint(tmp_path / "m.pt", corpus)
    a = sample(path, 200, 1.0, b"the ", seed=7)
    assert len(a) == 200 and sample(path, 200, 1.0, b"the ", seed=7) == a
    assert sample(path, 200, 1.0, b"the ", seed=8) != a
    assert sample(path, 200, 1.0, b"moscow ", seed=7) != a  # the prime sets the state the sample starts from
    assert sample(path, 0, 1.0, b"the ") == b""


def test_cli_writes_prime_and_sample_exactly(tmp_path, corpus, capsysbinary):
    path = random_checkpoint(tmp_path / "m.pt", corpus)
    argv = [str(path), "--length", "50", "--temperature", "0.8", "--prime", "The ", "--seed", "1"]
    assert run_cli(sample_module.main, argv) == 0
    out = capsysbinary.readouterr().out
    assert out == b"The " + sample(path, 50, 0.8, b"The ", seed=1)
    assert run_cli(sample_module.main, argv + ["--out", str(tmp_path / "s.txt")]) == 0
    assert (tmp_path / "s.txt").read_bytes() == out


@pytest.mark.parametrize(
    "extra, contains",
    [
        (["--length", "-1"], "length"),
        (["--temperature", "-0.5"], "temperature"),
        (["--temperature", "nan"], "temperature"),
        (["--prime", "caf\u00e9"], "0xc3"),
    ],
)
def test_bad_settings_are_one_line_and_exit_2(tmp_path, corpus, capsys, extra, contains):
    path = random_checkpoint(tmp_path / "m.pt", corpus)
    assert run_cli(sample_module.main, [str(path), "--out", str(tmp_path / "s.txt"), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and contains in err[0]
    assert not (tmp_path / "s.txt").exists()


def test_missing_or_corrupt_checkpoints_are_one_line(tmp_path, capsys):
    (tmp_path / "bad.pt").write_bytes(b"\x00" * 100)
    for target, contains in ((tmp_path / "nope.pt", "does not exist"), (tmp_path / "bad.pt", "corrupt")):
        assert run_cli(sample_module.main, [str(target), "--length", "5"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and contains in err[0]
    with pytest.raises(SystemExit) as exit_info:
        sample_module.main(["--help"])
    assert exit_info.value.code == 0 and "--temperature" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------ the samples analysis


def test_samples_analysis_keeps_exact_bytes_and_pools_seeds_by_group(tmp_path, monkeypatch):
    text = (b"Caf\xc3\xa9 \xe2\x80\x94 the war\r\n" * 200)[:6000]  # multi-byte characters and CR LF
    path = tmp_path / "mb.txt"
    path.write_bytes(text)
    corpus = corpora.load(str(path))
    for seed in (0, 1):
        fake_neural_model(corpus, arch="lstm", seed=seed)
    fake_neural_model(corpus, arch="gru", size=7)
    ctx = Context(model_index(), common.settings(samples.ANALYSIS, None, {"length": 120, "show": 40}))
    result = samples.ANALYSIS.compute(ctx)
    df = result.table
    assert len(df) == 3 and set(df["prime"]) == {""}  # no prime for a corpus the settings do not name
    table = pd.read_csv(common.save_table(df, tmp_path / "samples.csv"), keep_default_na=False)
    warm = samples.warmup(corpus.decode(corpus.split("val")), 300)  # every model reads it first, not shown
    assert warm.endswith(b"\n") and 0 < len(warm) <= 300 and (df["warmup"] == len(warm)).all()
    for row, raw in zip(df.itertuples(), samples.raw_bytes(table)):
        model = ctx.model(ctx.index[ctx.index["model_id"] == row.model_id].iloc[0])
        assert raw == sample(model, 120, 0.8, warm, seed=1)  # exact bytes back from the cached CSV
        assert row.sample == raw[:40].decode("utf-8", errors="replace").replace("\r\n", "\n")
    shares = samples.known_shares(df).set_index("model")
    lstm = df[df["arch"] == "lstm"]
    assert shares.loc["LSTM 1x8", "words"] == lstm["words"].sum()  # the two seeds of one group pooled
    assert shares.loc["LSTM 1x8", "share"] == pytest.approx(lstm["known_words"].sum() / lstm["words"].sum())
    shown = samples.report_table(df)
    assert "sample_bytes" not in shown and shown["known_word_share"].between(0, 1).all()
    assert samples.ANALYSIS.plot(result) is None
    # Findings: the words of every model pooled per corpus, the best and the worst configuration, the headline LSTM.
    corpus_row = result.tables["corpora"].iloc[0]
    assert corpus_row["words"] == df["words"].sum() and corpus_row["models"] == 3
    assert corpus_row["share"] == pytest.approx(df["known_words"].sum() / df["words"].sum())
    assert corpus_row["headline"] == "LSTM 1x8" and corpus_row["headline_share"] == pytest.approx(
        df[df["model_seed"] == 0].query("arch == 'lstm'")["known_words"].iloc[0]
        / df[df["model_seed"] == 0].query("arch == 'lstm'")["words"].iloc[0]
    )  # the headline LSTM is the lowest seed
    text = [sentence(f) for f in result.findings]
    assert len(text) == 3 and text[0].startswith("mb: ") and "sampled at temperature 0.8" in text[0]
    assert text[1].startswith("mb: the headline LSTM 1x8 writes ")
    assert text[2].startswith("mb: from a zero state the first 50 characters cost ")
    for row in df.itertuples():  # the warm-up read from a zero state, scored by the network itself
        net = ctx.model(ctx.index[ctx.index["model_id"] == row.model_id].iloc[0])  # a CharLM
        ids = torch.as_tensor(corpus.encode(warm).astype(np.int64))[None]
        with torch.no_grad():
            logp = torch.log_softmax(net(ids[:, :-1])[0].double(), -1)[torch.arange(ids.shape[1] - 1), ids[0, 1:]]
        assert row.zero_state_nats == pytest.approx(-logp[:50].mean().item(), abs=1e-5)
        assert row.after_nats == pytest.approx(-logp[50:].mean().item(), abs=1e-5)
    frames = [result.table, *result.tables.values()]
    assert all(unsupported_numbers(t, frames) == [] for t in text)
    section = samples.ANALYSIS.summary_table(result)
    assert (
        list(section["model"]) == ["LSTM 1x8"] and len(section["sample (start)"].iloc[0]) <= samples.SECTION_CHARS + 1
    )
    appendix = samples.ANALYSIS.appendix(result)
    assert [len(t) for t in appendix.values()] == [2, 3]  # configurations (seeds pooled), then every model


def test_the_warm_up_is_the_opening_cut_after_its_last_line_break():
    assert samples.warmup(b"ab\ncd\nef", 300) == b"ab\ncd\n"
    assert samples.warmup(b"ab\ncd\nef", 4) == b"ab\n"  # cut to 4 bytes, then after its line break
    assert samples.warmup(b"abcdef", 4) == b"abcd"  # no line break: the whole opening
    assert samples.warmup(b"ab\ncd", 0) == b""


def test_known_word_share_counts_train_words(tmp_path):
    corpus = fake_corpus_file(tmp_path, name="words.txt")
    fake_neural_model(corpus, arch="lstm")
    ctx = Context(model_index(), common.settings(samples.ANALYSIS, None, {"length": 300}))
    row = samples.ANALYSIS.compute(ctx).table.iloc[0]
    words = samples.WORD.findall(samples.raw_bytes(pd.DataFrame([row]))[0])
    train = set(corpus.decode(corpus.split("train")).split())  # make_text's words are whitespace-separated
    assert row["words"] == len(words) and row["known_words"] == sum(w in train for w in words)
    assert run_cli(samples.main, ["--corpus", str(tmp_path / "words.txt"), "--out", str(tmp_path / "s.csv")]) == 0
