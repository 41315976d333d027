"""Corpora: byte vocabulary, contiguous splits, the CLI's bad-input contract, the Linux build recipe, batching."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import random
import re
import tarfile
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error, cli_env, make_text, run_cli

import corpora
from corpora import REGISTRY, Corpus, UserError
from corpora.batching import stream_windows
from corpora.sources import build, linux_bytes

# ------------------------------------------------------------------------------------------
# Byte vocabulary


def test_vocab_is_sorted_distinct_bytes_and_round_trips():
    # Non-ASCII on purpose: a UTF-8 BOM, accented letters (two bytes each), CRLF, NUL and 0xff.
    data = "\ufeffNatasha, Pierre — Москва!\r\n".encode() + b"\x00\xff plain ascii\r\n" * 3
    corpus = Corpus.from_bytes("t", data)
    expected_vocab = sorted(set(data))
    assert corpus.vocab.tolist() == expected_vocab
    assert corpus.vocab.dtype == np.uint8
    assert corpus.vocab_size == len(expected_vocab)
    # Index i of the model's output is byte vocab[i]: check the encoding against a plain dict lookup.
    index = {b: i for i, b in enumerate(expected_vocab)}
    assert corpus.ids.tolist() == [index[b] for b in data]
    assert corpus.decode(corpus.ids) == data
    assert corpus.decode(corpus.encode(data[5:40])) == data[5:40]
    assert corpus.decode(corpus.encode(np.frombuffer(data, np.uint8))) == data


def test_full_256_byte_vocabulary_round_trips():
    data = bytes(range(256)) * 2 + bytes(reversed(range(256)))
    corpus = Corpus.from_bytes("all", data)
    assert corpus.vocab_size == 256
    assert corpus.ids.tolist() == list(data)  # the identity map when every byte value occurs
    assert corpus.decode(corpus.ids) == data


def test_encoding_a_byte_outside_the_vocabulary_is_a_user_error():
    corpus = Corpus.from_bytes("abc", b"abcabcabc")
    with pytest.raises(UserError, match="not in the vocabulary"):
        corpus.encode(b"abz")


def test_corpus_needs_at_least_two_bytes():
    with pytest.raises(UserError):
        Corpus.from_bytes("one", b"x")


# ------------------------------------------------------------------------------------------
# Contiguous splits


@pytest.mark.parametrize("fractions", [(0.8, 0.1, 0.1), (0.9, 0.05, 0.05), (0.5, 0.3, 0.2)])
@pytest.mark.parametrize("n", [1000, 1003, 4097])
def test_splits_are_contiguous_follow_the_fractions_and_rebuild_the_corpus(fractions, n):
    data = make_text(n, seed=n)
    corpus = Corpus.from_bytes("t", data, fractions)
    parts = [corpus.split(s) for s in ("train", "val", "test")]
    sizes = [p.size for p in parts]
    assert sum(sizes) == n
    for size, frac in zip(sizes, fractions):
        assert abs(size - n * frac) <= 1, (sizes, fractions)
    assert np.array_equal(np.concatenate(parts), corpus.ids)
    assert b"".join(corpus.decode(p) for p in parts) == data
    # Contiguous in file order: train is a prefix, test a suffix.
    assert corpus.decode(parts[0]) == data[: sizes[0]]
    assert corpus.decode(parts[2]) == data[n - sizes[2] :]
    assert corpus.info()["splits"] == dict(zip(("train", "val", "test"), sizes))


def test_default_fractions_and_registry_fractions():
    assert Corpus.from_bytes("t", b"0123456789" * 10).split_fractions == (0.8, 0.1, 0.1)
    assert REGISTRY["warpeace"].split_fractions == (0.8, 0.1, 0.1)
    assert REGISTRY["linux"].split_fractions == (0.9, 0.05, 0.05)


def test_a_file_path_loads_with_80_10_10(tmp_path):
    path = tmp_path / "some.txt"
    data = make_text(2000)
    path.write_bytes(data)
    corpus = corpora.load(str(path))
    assert corpus.name == "some" and corpus.split_fractions == (0.8, 0.1, 0.1)
    assert corpus.sha256 == hashlib.sha256(data).hexdigest()
    assert [corpus.split(s).size for s in ("train", "val", "test")] == [1600, 200, 200]


@pytest.mark.parametrize("name, sizes", [("warpeace", [1600, 200, 200]), ("linux", [1800, 100, 100])])
def test_registered_corpus_is_verified_and_split_with_its_fractions(tmp_path, monkeypatch, name, sizes):
    data = make_text(2000, seed=7)
    spec = REGISTRY[name]
    monkeypatch.setitem(
        REGISTRY, name, dataclasses.replace(spec, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    )
    (tmp_path / spec.filename).write_bytes(data)
    corpus = corpora.load(name, tmp_path)
    assert corpus.name == name
    assert [corpus.split(s).size for s in ("train", "val", "test")] == sizes
    monkeypatch.setenv("CORPORA_DIR", str(tmp_path))  # the same through $CORPORA_DIR
    assert corpora.load(name).sha256 == corpus.sha256


def test_unknown_split_is_a_user_error():
    with pytest.raises(UserError, match="unknown split"):
        Corpus.from_bytes("t", b"abcdefgh").split("dev")


# ------------------------------------------------------------------------------------------
# `python -m corpora info` on the real corpora (when present)


@pytest.mark.parametrize("name, n_bytes, n_symbols", [("warpeace", 3_258_246, 87), ("linux", 6_206_996, 99)])
def test_info_on_the_shipped_corpora(tmp_path, name, n_bytes, n_symbols):
    """A fresh corpora folder: the shipped copy is unpacked on first use, verified, and split by the registry."""
    proc = run_cli("corpora", "info", name, env=cli_env(CORPORA_DIR=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert f"unpacked the shipped '{name}' corpus" in proc.stderr
    fields = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in proc.stdout.strip().splitlines())
    assert fields["corpus"] == name
    assert fields["bytes"] == f"{n_bytes:,}"
    assert fields["vocabulary"] == f"{n_symbols} symbols"
    assert fields["sha256"] == REGISTRY[name].sha256
    # Independent check of the unpacked file itself, and of the split sizes against the registry's fractions.
    raw = np.fromfile(tmp_path / REGISTRY[name].filename, dtype=np.uint8)
    assert raw.size == n_bytes and np.unique(raw).size == n_symbols
    assert hashlib.sha256(raw.tobytes()).hexdigest() == REGISTRY[name].sha256
    assert list(tmp_path.iterdir()) == [tmp_path / REGISTRY[name].filename]  # no temporary file left behind
    splits = [int(fields[s].split()[0].replace(",", "")) for s in ("train", "val", "test")]
    assert sum(splits) == n_bytes
    for size, frac in zip(splits, REGISTRY[name].split_fractions):
        assert abs(size - n_bytes * frac) <= 1
    again = run_cli("corpora", "info", name, env=cli_env(CORPORA_DIR=str(tmp_path)))  # the second use reads the file
    assert again.returncode == 0 and "unpacked" not in again.stderr


def test_a_damaged_shipped_corpus_is_refused_and_nothing_is_written(tmp_path, monkeypatch):
    import lzma

    import corpora.corpus as corpus_module

    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "warpeace_input.txt.xz").write_bytes(lzma.compress(make_text(3000)))  # the wrong text
    (shipped / "linux_input.txt.xz").write_bytes(b"not xz at all")
    monkeypatch.setattr(corpus_module, "SHIPPED_DIR", shipped)
    target = tmp_path / "corpora"
    with pytest.raises(UserError, match="shipped copy of corpus 'warpeace'.*sha256"):
        corpora.load("warpeace", target)
    with pytest.raises(UserError, match="shipped copy of corpus 'linux'.*damaged"):
        corpora.load("linux", target)
    assert not target.exists() or not any(target.iterdir())


def test_a_corpus_in_corpora_dir_wins_over_the_shipped_copy(tmp_path):
    """CORPORA_DIR still overrides: a file there is read (and verified), not replaced by the shipped copy."""
    (tmp_path / "warpeace_input.txt").write_bytes(make_text(3000))
    proc = run_cli("corpora", "info", "warpeace", env=cli_env(CORPORA_DIR=str(tmp_path)))
    assert_one_line_error(proc, contains="sha256")
    assert (tmp_path / "warpeace_input.txt").read_bytes() == make_text(3000)


# ------------------------------------------------------------------------------------------
# Bad input: exit 2 and one line on stderr


def test_cli_unknown_corpus(tmp_path):
    proc = run_cli("corpora", "info", "nosuchcorpus", cwd=tmp_path, env=cli_env(CORPORA_DIR=str(tmp_path)))
    assert_one_line_error(proc, contains="unknown corpus")


def test_cli_wrong_checksum(tmp_path):
    (tmp_path / "warpeace_input.txt").write_bytes(make_text(3000))
    proc = run_cli("corpora", "info", "warpeace", env=cli_env(CORPORA_DIR=str(tmp_path)))
    assert_one_line_error(proc, contains="sha256")


def test_cli_empty_file(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    proc = run_cli("corpora", "info", str(tmp_path / "empty.txt"))
    assert_one_line_error(proc, contains="empty")


def test_cli_empty_registered_corpus(tmp_path):
    (tmp_path / "linux_input.txt").write_bytes(b"")
    proc = run_cli("corpora", "info", "linux", env=cli_env(CORPORA_DIR=str(tmp_path)))
    assert_one_line_error(proc, contains="empty")


def test_cli_directory_as_corpus(tmp_path):
    (tmp_path / "adir").mkdir()
    proc = run_cli("corpora", "info", str(tmp_path / "adir"))
    assert_one_line_error(proc, contains="directory")


def test_cli_missing_corpus_file(tmp_path):
    proc = run_cli("corpora", "info", str(tmp_path / "missing.txt"))
    assert_one_line_error(proc, contains="does not exist")


def test_a_registered_corpus_neither_present_nor_shipped_names_how_to_get_it(tmp_path, monkeypatch):
    import corpora.corpus as corpus_module

    monkeypatch.setattr(corpus_module, "SHIPPED_DIR", tmp_path / "no-shipped-copies")
    with pytest.raises(UserError, match="not found.*python -m corpora build linux"):
        corpora.load("linux", tmp_path / "nothing-here")


# ------------------------------------------------------------------------------------------
# The Linux corpus recipe: kernel/**/*.{c,h}, paths sorted, shuffled with Random(0), concatenated, cut


KERNEL_FILES = {
    "kernel/sched/core.c": "int schedule(void) { return 0; }\n" * 7,
    "kernel/sched/sched.h": "#define SCHED_H 1\n" * 5,
    "kernel/fork.c": "/* fork */\nlong do_fork(void) { if (a < b && c) return -1; }\n" * 4,
    "kernel/exit.c": "void do_exit(long code) { }\n" * 9,
    "kernel/time/timer.c": "static int timer = 0;\n" * 6,
    "kernel/time/deep/x.h": "#ifndef X\n#define X\n#endif\n" * 3,
    "kernel/bpf/verifier.c": "int check(struct bpf *b) { return b->x; }\n" * 8,
    "kernel/power/main.h": "extern int pm;\n" * 2,
    # not part of the corpus:
    "kernel/Makefile": "EXCLUDED_MAKEFILE obj-y += fork.o\n",
    "kernel/sched/README.txt": "EXCLUDED_TEXT\n",
    "kernel/entry.S": "EXCLUDED_ASM\n",
    "fs/open.c": "EXCLUDED_FS int open(void);\n",
    "include/linux/sched.h": "EXCLUDED_INCLUDE\n",
}


def _write_tree(root: Path) -> Path:
    for rel, text in KERNEL_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _reference_linux_bytes(root: Path, size: int) -> bytes:
    """An independent re-implementation of the recipe on a tree, with os.walk."""
    paths = []
    for folder, _, files in os.walk(root / "kernel"):
        for f in files:
            if f.endswith((".c", ".h")):
                paths.append((Path(folder) / f).relative_to(root).as_posix())
    paths.sort()
    random.Random(0).shuffle(paths)
    return b"".join((root / p).read_bytes() for p in paths)[:size]


def _tar(path: Path, root: Path, prefix: str) -> Path:
    """A tar.gz of the tree, under one top folder `prefix` (as kernel.org ships it) or with kernel/ at the root."""
    with tarfile.open(path, "w:gz") as tar:
        if prefix:
            tar.add(root, arcname=prefix)
        else:
            for top in sorted(os.listdir(root)):
                tar.add(root / top, arcname=top)
    return path


@pytest.fixture
def kernel_tree(tmp_path) -> Path:
    return _write_tree(tmp_path / "linux-6.1")


def test_linux_bytes_from_a_tree(kernel_tree):
    full = _reference_linux_bytes(kernel_tree, 10**9)
    assert b"EXCLUDED" not in full
    # Order matters: the recipe's shuffle is not the sorted order.
    assert full != b"".join(
        (kernel_tree / p).read_bytes() for p in sorted(k for k in KERNEL_FILES if "EXCLUDED" not in KERNEL_FILES[k])
    )
    for size in (len(full), len(full) - 37, 100):
        assert linux_bytes(kernel_tree, size) == _reference_linux_bytes(kernel_tree, size)
    with pytest.raises(UserError, match="fewer than"):
        linux_bytes(kernel_tree, len(full) + 1)


@pytest.mark.parametrize("prefix", ["linux-6.1", ""])
def test_linux_bytes_from_a_tarball(tmp_path, kernel_tree, prefix):
    tarball = _tar(tmp_path / "linux.tar.gz", kernel_tree, prefix)
    size = len(_reference_linux_bytes(kernel_tree, 10**9)) - 11
    assert linux_bytes(tarball, size) == _reference_linux_bytes(kernel_tree, size)


def test_linux_build_writes_the_corpus_atomically(tmp_path, kernel_tree, monkeypatch):
    size = 500
    expected = _reference_linux_bytes(kernel_tree, size)
    spec = dataclasses.replace(REGISTRY["linux"], size=size, sha256=hashlib.sha256(expected).hexdigest())
    monkeypatch.setitem(REGISTRY, "linux", spec)
    out = tmp_path / "corpora"
    written = build("linux", kernel_tree, directory=out)
    assert written == out / "linux_input.txt"
    assert written.read_bytes() == expected
    assert sorted(os.listdir(out)) == ["linux_input.txt"]  # no temporary file left behind
    # A source that is not the registered file is refused and nothing is written.
    for path in (kernel_tree / "kernel").rglob("*.[ch]"):
        path.write_text("changed\n" * 40)
    other = tmp_path / "other"
    with pytest.raises(UserError, match="sha256"):
        build("linux", kernel_tree, directory=other)
    assert not other.exists() or not any(other.iterdir())


@pytest.mark.parametrize("evil", ["../evil.c", "/tmp/evil_abs.c", "linux-6.1/../../evil.c"])
def test_tarball_with_escaping_member_is_refused(tmp_path, kernel_tree, evil):
    tarball = tmp_path / "evil.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(kernel_tree, arcname="linux-6.1")
        payload = b"int evil(void) { return 1; }\n" * 10
        info = tarfile.TarInfo(evil)
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    before = sorted(p for p in tmp_path.parent.rglob("*evil*.c"))
    with pytest.raises(UserError, match="refusing"):
        linux_bytes(tarball, 100)
    out = tmp_path / "out"
    with pytest.raises(UserError, match="refusing"):
        build("linux", tarball, directory=out, verify=False)
    assert not out.exists() or not any(out.iterdir())
    assert sorted(p for p in tmp_path.parent.rglob("*evil*.c")) == before
    proc = run_cli("corpora", "build", "linux", "--from", tarball, "--no-verify", env=cli_env(CORPORA_DIR=str(out)))
    assert_one_line_error(proc, contains="refusing")
    assert not out.exists() or not any(out.iterdir())


def test_build_from_a_folder_without_kernel_is_a_user_error(tmp_path):
    (tmp_path / "empty_tree").mkdir()
    with pytest.raises(UserError, match="no kernel/"):
        linux_bytes(tmp_path / "empty_tree", 10)


# ------------------------------------------------------------------------------------------
# Batching


@pytest.mark.parametrize("n, batch, unroll", [(103, 4, 5), (1000, 3, 7), (64, 1, 8), (41, 4, 10)])
def test_stream_windows_shift_and_continuation(n, batch, unroll):
    pos_x, pos_y = stream_windows(np.arange(n), batch, unroll)  # positions in the split
    steps = (n - 1) // batch
    n_batches = steps // unroll
    assert pos_x.shape == pos_y.shape == (n_batches, batch, unroll)
    assert pos_x.dtype == np.int64 and pos_y.dtype == np.int64
    # Targets are the inputs shifted by one position.
    assert np.array_equal(pos_y, pos_x + 1)
    assert pos_y.max() < n
    # Batch k+1 continues every stream exactly where batch k stopped.
    assert np.array_equal(pos_x[1:, :, 0], pos_x[:-1, :, -1] + 1)
    # Each stream, read over all batches, is one contiguous run; streams are equal-length and disjoint.
    streams = pos_x.transpose(1, 0, 2).reshape(batch, -1)
    assert np.all(np.diff(streams, axis=1) == 1)
    assert np.unique(streams).size == streams.size
    assert np.array_equal(streams[:, 0], np.arange(batch) * steps)
    # The same windows hold the data's values.
    rng = np.random.default_rng(n)
    ids = rng.integers(0, 50, n).astype(np.uint8)
    x, y = stream_windows(ids, batch, unroll)
    assert np.array_equal(x, ids[pos_x]) and np.array_equal(y, ids[pos_y])


def test_stream_windows_too_short_raises():
    with pytest.raises(UserError, match="too short"):
        stream_windows(np.arange(50), 10, 10)
