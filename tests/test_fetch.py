"""`python -m corpora fetch`: download, verify the sha256, write atomically; a wrong file is refused whole.

urllib reads file:// addresses like http ones, so the download path runs here without a network.
"""

from __future__ import annotations

import hashlib

import pytest
from conftest import make_text

from corpora import REGISTRY, UserError
from corpora.corpus import unpack_shipped
from corpora.sources import fetch


def test_fetch_refuses_a_file_with_the_wrong_checksum_and_writes_nothing(tmp_path):
    source = tmp_path / "source.txt"
    source.write_bytes(make_text(5000))
    target = tmp_path / "corpora"
    with pytest.raises(UserError, match="does not match corpus 'warpeace'"):
        fetch("warpeace", directory=target, url=source.as_uri())
    assert not target.exists() or not any(target.iterdir())


def test_fetch_unreachable_address_is_one_clear_error(tmp_path):
    with pytest.raises(UserError, match="could not download"):
        fetch("warpeace", directory=tmp_path, url=(tmp_path / "missing.txt").as_uri())


def test_fetch_verifies_and_writes_the_real_file(tmp_path):
    real = unpack_shipped(REGISTRY["warpeace"], tmp_path / "source")  # the real bytes, served by a file:// address
    written = fetch("warpeace", directory=tmp_path, url=real.as_uri())
    assert written == tmp_path / "warpeace_input.txt"
    assert hashlib.sha256(written.read_bytes()).hexdigest() == REGISTRY["warpeace"].sha256
