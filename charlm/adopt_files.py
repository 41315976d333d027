"""Reading a user's files for charlm.adopt: the model file (a state_dict, or a dict holding one; a pickled module or a
TorchScript archive only when trusted) and the vocabulary file (a list of characters, or a {character: index} map),
each character one byte in the encoding the user's code read the corpus with. Every failure is one UserError line.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import warnings
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn

from corpora.errors import UserError

ENCODINGS = ("utf-8", "latin-1")
_LEGACY_MAGIC = b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19."  # torch.save's pre-1.6 format starts with this pickle


@dataclass(frozen=True)
class Vocabulary:
    """A user's vocabulary file, read as bytes."""

    chars: list[str]  # the character of each user class, in the user's class order
    byte_values: list[int]  # the byte of each user class in `encoding`
    form: str  # "list" (i-th entry is class i), "{character: index} map" or "{index: character} map"
    encoding: str  # how the user's code read the corpus into characters
    sha256: str  # of the file


def char_name(byte: int, encoding: str = "latin-1") -> str:
    """How errors name a character: escaped as Python writes it ('\\t', 'a'); a byte >= 0x80 that is no character
    of the encoding (a piece of a multi-byte UTF-8 character) as 'byte 0xc3'."""
    return f"byte 0x{byte:02x}" if encoding == "utf-8" and byte >= 0x80 else repr(chr(byte))


def _state_dict_of(obj, path: Path, trusted: bool) -> tuple[dict, str | None]:
    """The {name: tensor} of what torch.load returned (a module, a state_dict, or a dict holding exactly one)."""
    if isinstance(obj, (nn.Module, torch.jit.ScriptModule)):
        return dict(obj.state_dict()), None
    if isinstance(obj, dict) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        return dict(obj), None
    if isinstance(obj, dict):
        if obj.get("kind") == "charlm" and "config" in obj:
            raise UserError(f"{path} is already a charlm checkpoint: load it directly, there is nothing to adopt")
        inner = [k for k, v in obj.items() if (isinstance(v, nn.Module) and trusted) or (
            isinstance(v, dict) and v and all(isinstance(t, torch.Tensor) for t in v.values()))]  # fmt: skip
        if len(inner) == 1:
            return _state_dict_of(obj[inner[0]], path, trusted)[0], str(inner[0])
    what = f"a dict of {', '.join(map(repr, list(obj)[:6]))}" if isinstance(obj, dict) else type(obj).__name__
    raise UserError(
        f"{path} holds {what}, not a state_dict: save model.state_dict() ({{name: tensor}}) with torch.save"
    )


def read_state_dict(path: str | Path, trust_pickle: bool = False) -> tuple[dict[str, torch.Tensor], dict]:
    """The user's state_dict and how it was read. weights_only=True unless `trust_pickle` (then any pickle, whose
    module's .state_dict() is taken). Every failure is one UserError line."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"model file {path} {'is a directory' if path.is_dir() else 'does not exist'}")
    with path.open("rb") as f:
        head = f.read(len(_LEGACY_MAGIC))
    if not (zipfile.is_zipfile(path) or head == _LEGACY_MAGIC):
        raise UserError(
            f"{path} is not a PyTorch file (torch.save writes a zip archive): save model.state_dict() with torch.save"
        )
    scripted = False  # a TorchScript archive: a zip with the module's code
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            scripted = any("/code/" in name for name in archive.namelist())
    if scripted and not trust_pickle:
        raise UserError(f"{path} is a TorchScript archive (torch.jit.save), whose code runs when loaded: pass "
                        "--trust-pickle if the file is trusted, or save model.state_dict() instead")  # fmt: skip
    try:
        with warnings.catch_warnings():  # torch's advice to load it unsafely is never the one line the user gets
            warnings.simplefilter("ignore")
            obj = torch.jit.load(path, map_location="cpu") if scripted else torch.load(
                path, map_location="cpu", weights_only=not trust_pickle)  # fmt: skip
    except Exception as err:  # torch raises many kinds for a damaged file; all are the user's file
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        if not trust_pickle and ("Weights only load failed" in first or isinstance(err, pickle.UnpicklingError)):
            raise UserError(f"{path} holds pickled Python objects (e.g. a whole module saved with torch.save(model)), "
                            "and unpickling runs code: pass --trust-pickle if the file is trusted, or save "
                            "model.state_dict() instead") from None  # fmt: skip
        hint = " (with --trust-pickle the classes it pickled must be importable)" if trust_pickle else ""
        raise UserError(f"{path} cannot be read as a PyTorch checkpoint: {first[:200]}{hint}") from None
    state, nested = _state_dict_of(obj, path, trust_pickle)
    bad = [k for k, v in state.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise UserError(f"{path} is not a state_dict: {', '.join(map(repr, bad[:5]))} are not named tensors")
    how = {"loaded_with": "torch.jit.load" if scripted else "trusted pickle (weights_only=False)" if trust_pickle
           else "weights_only=True"}  # fmt: skip
    return state, how | ({"state_dict_under": nested} if nested else {})


def read_vocab(path: str | Path, encoding: str = "utf-8") -> Vocabulary:
    """A list of characters (class i is entry i) or a {character: index} map (also its inverse {index: character}),
    each character one byte in `encoding`."""
    path = Path(path)
    if encoding not in ENCODINGS:
        raise UserError(f"unknown encoding '{encoding}': choose one of {', '.join(ENCODINGS)}")
    if not path.is_file():
        raise UserError(f"vocabulary file {path} does not exist")
    raw = path.read_bytes()
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise UserError(f"vocabulary {path} is not JSON ({str(err).splitlines()[0]})") from None
    if isinstance(obj, list):
        chars, form = obj, "list"
    elif isinstance(obj, dict) and obj:
        inverse = all(isinstance(v, str) for v in obj.values())  # {"0": "a", ...}: JSON writes int keys as strings
        pairs = [(v, k) for k, v in obj.items()] if inverse else list(obj.items())  # (character, index)
        index = [int(i) if isinstance(i, int) or (isinstance(i, str) and i.isdecimal()) else -1 for _, i in pairs]
        if sorted(index) != list(range(len(pairs))) or any(isinstance(i, bool) for _, i in pairs):
            raise UserError(f"vocabulary {path}: a {{character: index}} map needs the indices 0..{len(pairs) - 1}, "
                            "each exactly once")  # fmt: skip
        chars = [c for _, c in sorted(zip(index, (c for c, _ in pairs)))]
        form = "{index: character} map" if inverse else "{character: index} map"
    else:
        raise UserError(f"vocabulary {path} must be a JSON list of characters or a {{character: index}} map")
    for i, c in enumerate(chars):
        if not isinstance(c, str) or len(c) != 1:
            raise UserError(f"vocabulary {path}: class {i} is {c!r}, not one character (the suite reads bytes: one "
                            "class per byte value)")  # fmt: skip
    repeated = sorted(c for c, n in Counter(chars).items() if n > 1)
    if repeated:
        raise UserError(f"vocabulary {path} lists {', '.join(map(repr, repeated))} more than once")
    limit = 0x80 if encoding == "utf-8" else 0x100
    wide = [c for c in chars if ord(c) >= limit]
    if wide and encoding == "utf-8":
        listing = ", ".join(
            f"{c!r} (U+{ord(c):04X}, {len(c.encode('utf-8', 'surrogatepass'))} bytes)" for c in wide[:5]
        )
        raise UserError(f"vocabulary {path} has characters of more than one byte in UTF-8: {listing}"
                        f"{f' and {len(wide) - 5} more' if len(wide) > 5 else ''}; the suite reads bytes, one class "
                        "per byte value: retrain on bytes (read the corpus with encoding='latin-1' or in binary), or "
                        "pass --encoding latin-1 if your model read the corpus as latin-1")  # fmt: skip
    if wide:
        listing = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in wide[:5])
        raise UserError(f"vocabulary {path} has characters outside latin-1 (U+0000..U+00FF), so no single byte: "
                        f"{listing}; the suite reads bytes: retrain on a byte-level vocabulary")  # fmt: skip
    sha = hashlib.sha256(raw).hexdigest()
    return Vocabulary(list(chars), [ord(c) for c in chars], form, encoding, sha)
