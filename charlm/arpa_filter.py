"""Keep of a character ARPA model only what scoring one text can read: the same probabilities, a fraction of the size.

Scoring a stream with KenLM (charlm.ngram.score_stream) asks, at each position, p(w | h) for the true next byte,
for `</s>` and `<unk>` (the normaliser) and, at sampled positions, for every byte. Every lookup KenLM makes for
p(w | h) reads an n-gram whose context (all but its last token) is a suffix of h, or the backoff of such a suffix,
and the state it carries forward is the longest suffix of h + w the model holds. Every such context is a substring
of the scored text. So an n-gram whose context is not a substring of the text is never read: dropping it changes
no probability, no backoff and no state that scoring reaches. The kept set is closed under taking prefixes and
suffixes (a substring of a substring is one), as KenLM's binary formats require, and the extension of every kept
context is kept, so KenLM's right-state minimisation (a state keeps a context only if some n-gram extends it)
decides the same way for every state the text reaches. Unigrams are all kept.

War and Peace's 21-gram: 37 M n-grams and 2.6 GB of ARPA text; what scoring its test split can read is a small
part of it (charlm.ngram measures it at every build). The cut runs on the ARPA as lmplz writes it, a megabyte at a
time, with numpy: each line's context becomes a 64-bit polynomial hash of its bytes, looked up among the hashes of
the text's substrings of that length. A hash collision can only keep an n-gram that is not needed, never drop one
that is. Tests check the filtered model's scores against the whole model's, position by position.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import BinaryIO

import numpy as np

_PRIME = np.uint64(0x100000001B3)  # FNV's 64-bit prime: any odd multiplier works; this one mixes bytes well
_HEX = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
_X, _NL, _TAB = ord("x"), 10, 9


def _window_hashes(ids: np.ndarray, max_len: int) -> list[np.ndarray]:
    """Sorted hashes of every substring of `ids` of length m, for m = 0..max_len (index m)."""
    ids = np.asarray(ids, dtype=np.uint64) + np.uint64(1)  # byte 0 must not hash like an empty position
    out = [np.zeros(1, dtype=np.uint64)]
    h = np.zeros(ids.size, dtype=np.uint64)
    power = np.uint64(1)
    with np.errstate(over="ignore"):
        for m in range(1, max_len + 1):
            if m > ids.size:
                out.append(np.zeros(0, dtype=np.uint64))
                continue
            h = h[: ids.size - m + 1] + ids[m - 1 :] * power  # windows starting at i, of length m
            power = power * _PRIME
            out.append(np.sort(h))  # searchsorted needs order, not distinct values
    return out


def _context_hashes(ctx: np.ndarray) -> np.ndarray:
    """Hashes of rows of byte ids (L, m), as _window_hashes computes them."""
    h = np.zeros(ctx.shape[0], dtype=np.uint64)
    power = np.uint64(1)
    with np.errstate(over="ignore"):
        for j in range(ctx.shape[1]):
            h = h + (ctx[:, j].astype(np.uint64) + np.uint64(1)) * power
            power = power * _PRIME
    return h


class ArpaFilter:
    """Streams an ARPA file (bytes in, from `feed`) and keeps the n-grams whose context is a substring of `text`.

    Tokens must be `x` + two hex digits per byte (charlm.ngram.token_names), plus KenLM's `<s>`, `</s>`, `<unk>`;
    a context holding `<s>` is never reached by a stream scored from the null context and is dropped.
    `write(out)` writes the filtered ARPA, its header counting what was kept.
    """

    def __init__(self, text_ids: np.ndarray, max_order: int):
        self.windows = _window_hashes(text_ids, max_order - 1)
        self.order = 0  # the section being read; 0: the header
        self.sections: dict[int, list[bytes]] = {}
        self.kept: dict[int, int] = {}
        self.read: dict[int, int] = {}
        self.pending = b""
        self.ended = False

    def feed(self, chunk: bytes) -> None:
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            self.pending += chunk
            return
        self._lines(self.pending + chunk[:cut] if self.pending else chunk[:cut])
        self.pending = chunk[cut:]

    def close(self) -> None:
        if self.pending:
            self._lines(self.pending + b"\n")
            self.pending = b""

    def _lines(self, block: bytes) -> None:
        """Complete lines; the body of a section is cut in bulk, markers and header lines one by one."""
        if self.order == 0:  # the header: a few lines, up to the first section
            at = 0
            while self.order == 0 and at < len(block):
                end = block.index(b"\n", at) + 1
                self._marker(block[at:end])
                at = end
            block = block[at:]
            if not block:
                return
        arr = np.frombuffer(block, dtype=np.uint8)
        ends = np.flatnonzero(arr == _NL)
        starts = np.concatenate(([0], ends[:-1] + 1))
        marker = (arr[starts] == ord("\\")) | (starts == ends)  # "\2-grams:", "\end\", blank lines
        first = 0
        for c in np.flatnonzero(marker).tolist() + [len(starts)]:
            if c > first:
                self._body(arr, starts[first:c], ends[first:c])
            if c < len(starts):
                self._marker(block[starts[c] : ends[c] + 1])
            first = c + 1

    def _marker(self, line: bytes) -> None:
        """A section's start or the end; the header's lines (`\\data\\`, `ngram k=`) are dropped: `write` counts."""
        text = line.strip()
        if text.endswith(b"-grams:"):
            self.order = int(text[1:].split(b"-")[0])
            self.sections.setdefault(self.order, [])
        elif text == b"\\end\\":
            self.ended = True

    def _body(self, arr: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        k = self.order
        self.read[k] = self.read.get(k, 0) + len(starts)
        if k <= 1:
            keep = np.ones(len(starts), dtype=bool)
        else:
            first, last = int(starts[0]), int(ends[-1])
            tabs = np.flatnonzero(arr[first:last] == _TAB) + first
            field = tabs[np.searchsorted(tabs, starts)] + 1  # the n-gram after the first tab
            pos = field[:, None] + 4 * np.arange(k - 1)[None, :]  # each context token's first character
            is_byte = (arr[pos] == _X).all(axis=1)  # `<s>` in a context: never reached
            hi, lo = _HEX[arr[pos + 1]].astype(np.uint16), _HEX[arr[pos + 2]].astype(np.uint16)
            ctx = (hi * 16 + lo).astype(np.uint8)
            hashes = _context_hashes(ctx)
            known = self.windows[k - 1]
            if known.size == 0:
                keep = np.zeros(len(starts), dtype=bool)
            else:
                at = np.minimum(np.searchsorted(known, hashes), known.size - 1)
                keep = is_byte & (known[at] == hashes)
        n = int(keep.sum())
        if n == 0:
            return
        self.kept[k] = self.kept.get(k, 0) + n
        if n == len(starts):
            self.sections[k].append(arr[starts[0] : ends[-1] + 1].tobytes())
            return
        block = arr.data  # the kept lines, sliced out of the block (few, for the large orders)
        self.sections[k].append(
            b"".join([block[a : b + 1] for a, b in zip(starts[keep].tolist(), ends[keep].tolist())])
        )

    def write(self, out: BinaryIO) -> int:
        """The filtered ARPA; returns its bytes."""
        if not self.ended:
            raise ValueError("the ARPA stream ended before its \\end\\ line")
        orders = sorted(self.sections)
        parts: list[bytes] = [b"\n\\data\\\n"] + [f"ngram {k}={self.kept.get(k, 0)}\n".encode() for k in orders]
        for k in orders:
            parts.append(f"\n\\{k}-grams:\n".encode())
            parts.extend(self.sections[k])
        parts.append(b"\n\\end\\\n")
        total = 0
        for part in parts:
            out.write(part)
            total += len(part)
        return total

    def counts(self) -> tuple[list[int], list[int]]:
        """(n-grams read, n-grams kept) per order."""
        orders = sorted(self.sections)
        return [self.read.get(k, 0) for k in orders], [self.kept.get(k, 0) for k in orders]


def filter_arpa(chunks: Iterable[bytes], text_ids: np.ndarray, max_order: int) -> ArpaFilter:
    """Run `ArpaFilter` over an iterable of byte chunks (a convenience for tests and benchmarks)."""
    f = ArpaFilter(text_ids, max_order)
    for chunk in chunks:
        f.feed(chunk)
    f.close()
    return f
