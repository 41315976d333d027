"""The corpus registry, byte vocabulary and splits, and the corpora shipped with the suite.

Models read bytes, not code points (the papers' War and Peace has 3,258,246 bytes and 87
distinct byte values). The vocabulary is the sorted set of byte values in the corpus. Splits are
contiguous in file order by default, or char-rnn's interleaved ones (`split_mode="charrnn"`), the
splits the papers trained with.

Both registered corpora ship inside this package, xz-compressed (`corpora/data/`, 2.1 MB for
9.5 MB of text; licences in `corpora/data/NOTICE.md`). The first `load` of a registered corpus
that is not yet in the corpora folder unpacks the shipped copy there, verifies its sha256 and
writes it atomically, so a fresh clone runs offline. `python -m corpora fetch` and `build` remain
for provenance and for rebuilding from the original sources.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from . import atomic
from .errors import UserError

SHIPPED_DIR = Path(__file__).resolve().parent / "data"  # the registered corpora, xz-compressed
SPLITS = ("train", "val", "test")
SPLIT_MODES = ("contiguous", "charrnn")
CHARRNN_BATCH, CHARRNN_UNROLL = 100, 100  # the papers' char-rnn run: batch 100, sequence length 100


@dataclass(frozen=True)
class CorpusSpec:
    """What the registry knows of a corpus: where it comes from and what to verify."""

    name: str
    filename: str  # file name inside CORPORA_DIR
    size: int  # bytes
    sha256: str
    split_fractions: tuple[float, float, float]  # train, val, test, contiguous in file order
    source: str  # how to get it: a download address or a build recipe
    url: str | None = None  # downloaded by `python -m corpora fetch NAME` when set


REGISTRY: dict[str, CorpusSpec] = {
    "warpeace": CorpusSpec(
        name="warpeace",
        filename="warpeace_input.txt",
        size=3_258_246,
        sha256="fb66ba999dafe24017cdd59e04c56d385a9c8466993d374fd4c6f08b2142985e",
        split_fractions=(0.8, 0.1, 0.1),
        source="Tolstoy, War and Peace, the file of Karpathy's char-rnn data page (Project Gutenberg ebook "
        "2600, UTF-8 with BOM, CRLF)",
        url="https://cs.stanford.edu/people/karpathy/char-rnn/warpeace_input.txt",
    ),
    "linux": CorpusSpec(
        name="linux",
        filename="linux_input.txt",
        size=6_206_996,
        sha256="a671be291a6125367f6dc61490566e0be600b7b8e1ca098d54ffeea8550e25dc",
        split_fractions=(0.9, 0.05, 0.05),
        source="every *.c and *.h under kernel/ of the Linux 6.1 source, paths sorted, shuffled with "
        "random.Random(0), concatenated, cut at 6,206,996 bytes",
    ),
}


def shipped_path(spec: CorpusSpec) -> Path:
    """The compressed copy of a registered corpus that ships with the suite."""
    return SHIPPED_DIR / f"{spec.filename}.xz"


def unpack_shipped(spec: CorpusSpec, folder: Path) -> Path:
    """Decompress the shipped copy of `spec` into `folder`, verified against the registry's sha256, atomically."""
    _unpack_shipped(spec, folder)
    return folder / spec.filename


def _unpack_shipped(spec: CorpusSpec, folder: Path) -> bytes:
    """`unpack_shipped`, returning the verified bytes it wrote (so a first load need not read and hash them again)."""
    source = shipped_path(spec)
    if not source.is_file():
        raise UserError(f"corpus '{spec.name}' does not ship with this installation ({source} is missing)")
    try:
        data = lzma.decompress(source.read_bytes())
    except lzma.LZMAError as err:
        raise UserError(f"the shipped copy of corpus '{spec.name}' ({source}) is damaged: {err}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise UserError(
            f"the shipped copy of corpus '{spec.name}' ({source}) unpacks to sha256 {digest[:12]}..., expected "
            f"{spec.sha256[:12]}...: the package is damaged; reinstall it or set CORPORA_DIR"
        )
    try:
        atomic.write_bytes(folder / spec.filename, data)
    except OSError as err:
        raise UserError(
            f"cannot unpack corpus '{spec.name}' into {folder}: {err}; set CORPORA_DIR to a writable folder"
        ) from None
    print(f"corpora: unpacked the shipped '{spec.name}' corpus to {folder / spec.filename}", file=sys.stderr)
    return data


def corpora_dir() -> Path:
    """Where corpus files live: $CORPORA_DIR, else the user's data folder."""
    env = os.environ.get("CORPORA_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "charlm" / "corpora"


@dataclass(frozen=True, eq=False)
class Corpus:
    """Raw bytes plus the byte vocabulary; splits are views of the encoded corpus."""

    name: str
    data: np.ndarray  # (N,) uint8, the raw bytes, never modified
    split_fractions: tuple[float, float, float]
    split_mode: str = "contiguous"  # "charrnn": the splits char-rnn made, as the papers trained (see _charrnn_split)
    source: str = ""  # how to load it again: a registry name, or the file's absolute path

    def __post_init__(self):
        if self.split_mode not in SPLIT_MODES:
            raise UserError(f"unknown split mode '{self.split_mode}': choose one of {', '.join(SPLIT_MODES)}")
        if self.data.size < 2:
            raise UserError(f"corpus '{self.name}' is empty (needs at least 2 bytes)")
        if abs(sum(self.split_fractions) - 1.0) > 1e-9 or min(self.split_fractions) < 0:
            raise UserError(f"split fractions {self.split_fractions} must be non-negative and sum to 1")

    @classmethod
    def from_bytes(
        cls, name: str, data: bytes, split_fractions=(0.8, 0.1, 0.1), split_mode: str = "contiguous", source: str = ""
    ) -> Corpus:
        return cls(name, np.frombuffer(bytes(data), dtype=np.uint8), tuple(split_fractions), split_mode, source)

    def with_split_mode(self, split_mode: str) -> Corpus:
        """The same bytes split another way (a new corpus key, so never the same artifacts)."""
        return Corpus(self.name, self.data, self.split_fractions, split_mode, self.source)

    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.data.tobytes()).hexdigest()

    @property
    def artifact_name(self) -> str:
        """The folder under artifacts/ that holds this corpus's models.

        A registered corpus keeps its name; any other file gets its stem plus the start of its sha256, so two
        files with the same name in different folders never share artifacts.
        """
        spec = REGISTRY.get(self.name)
        return self.name if spec is not None and spec.sha256 == self.sha256 else f"{self.name}-{self.sha256[:8]}"

    def identity(self) -> dict:
        """What every model's metrics.json records about its corpus (the model index reads these fields)."""
        return {
            "corpus": self.name,
            "corpus_source": self.source or self.name,
            "corpus_key": self.key,
            "corpus_sha256": self.sha256,
            "corpus_splits": self.split_mode,
            "vocab_size": self.vocab_size,
        }

    @property
    def key(self) -> str:
        """What artifact hashes read: the bytes and how they are split (contiguous keeps the bare sha256)."""
        return self.sha256 if self.split_mode == "contiguous" else f"{self.sha256}:{self.split_mode}"

    @cached_property
    def vocab(self) -> np.ndarray:
        """(V,) uint8: the distinct byte values, sorted. Index i of a model's output is byte vocab[i]."""
        return np.flatnonzero(np.bincount(self.data, minlength=256)).astype(np.uint8)

    @property
    def vocab_size(self) -> int:
        return int(self.vocab.size)

    @cached_property
    def ids(self) -> np.ndarray:
        """(N,) uint8 vocabulary indices of the whole corpus."""
        return self.encode(self.data)

    def encode(self, data: bytes | np.ndarray) -> np.ndarray:
        table = np.full(256, 255, dtype=np.uint8)
        table[self.vocab] = np.arange(self.vocab_size, dtype=np.uint8)
        raw = (
            np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray)) else np.asarray(data, np.uint8)
        )
        ids = table[raw]
        if self.vocab_size < 256 and (ids == 255).any():  # 255 is never a valid index then
            bad = sorted(set(raw[ids == 255].tolist()))[:5]
            raise UserError(f"bytes {bad} are not in the vocabulary of corpus '{self.name}'")
        return ids

    def decode(self, ids) -> bytes:
        return self.vocab[np.asarray(ids, dtype=np.int64)].tobytes()

    def split_bounds(self) -> dict[str, tuple[int, int]]:
        n = self.data.size
        train_end = int(round(n * self.split_fractions[0]))
        val_end = int(round(n * (self.split_fractions[0] + self.split_fractions[1])))
        return {"train": (0, train_end), "val": (train_end, val_end), "test": (val_end, n)}

    def split(self, name: str) -> np.ndarray:
        """(n,) uint8 vocabulary ids of one contiguous split."""
        if name not in SPLITS:
            raise UserError(f"unknown split '{name}'; choose one of {', '.join(SPLITS)}")
        if self.split_mode == "charrnn":
            return self._charrnn_split(name)
        lo, hi = self.split_bounds()[name]
        return self.ids[lo:hi]

    def _charrnn_split(self, name: str) -> np.ndarray:
        """The split of char-rnn's CharSplitLMMinibatchLoader, which the papers trained with.

        The file is cut to a multiple of 100 x 100 and read as 100 rows; its batches (blocks of
        100 columns) go in order to train (floor(n * f_train)), val (floor(n * f_val)) and test
        (the rest). A split is thus 100 pieces spread over the whole file, concatenated row by row.
        """
        rows, width = CHARRNN_BATCH, CHARRNN_UNROLL
        n_batches = self.ids.size // (rows * width)
        if n_batches == 0:
            raise UserError(f"corpus '{self.name}' is shorter than one char-rnn batch ({rows * width} bytes)")
        n_train = int(n_batches * self.split_fractions[0])
        n_val = int(n_batches * self.split_fractions[1])
        lo, hi = {"train": (0, n_train), "val": (n_train, n_train + n_val), "test": (n_train + n_val, n_batches)}[name]
        grid = self.ids[: n_batches * rows * width].reshape(rows, n_batches * width)
        return np.ascontiguousarray(grid[:, lo * width : hi * width]).reshape(-1)

    def info(self) -> dict:
        return {
            "name": self.name,
            "bytes": int(self.data.size),
            "vocab_size": self.vocab_size,
            "sha256": self.sha256,
            "split_mode": self.split_mode,
            "splits": {k: int(self.split(k).size) for k in SPLITS},
        }


def _read_file(path: Path, what: str) -> bytes:
    if not path.exists():
        raise UserError(f"{what}: {path} does not exist")
    if path.is_dir():
        raise UserError(f"{what}: {path} is a directory, not a corpus file")
    data = path.read_bytes()
    if not data:
        raise UserError(f"{what}: {path} is empty")
    return data


def load(name_or_path: str, directory: str | os.PathLike | None = None, split_mode: str = "contiguous") -> Corpus:
    """Load a registered corpus by name (verified by size and sha256) or any file by path (80/10/10).

    A registered corpus missing from the corpora folder is unpacked there from the copy that ships with the suite.
    """
    spec = REGISTRY.get(name_or_path)
    if spec is None:
        path = Path(name_or_path)
        if os.sep not in name_or_path and not path.exists():
            raise UserError(f"unknown corpus '{name_or_path}': choose one of {', '.join(REGISTRY)} or give a file path")
        data = _read_file(path, "corpus")
        return Corpus.from_bytes(path.stem, data, split_mode=split_mode, source=str(path.resolve()))
    folder = Path(directory) if directory is not None else corpora_dir()
    path = folder / spec.filename
    if not path.exists() and shipped_path(spec).is_file():
        data = _unpack_shipped(spec, folder)  # verified against spec.sha256 as it was unpacked
    else:
        if not path.exists():
            hint = (
                f"`python -m corpora fetch {spec.name}`"
                if spec.url
                else f"`python -m corpora build {spec.name} --from PATH`"
            )
            raise UserError(
                f"corpus '{spec.name}' not found at {path}: set CORPORA_DIR to a folder holding {spec.filename}, "
                f"or run {hint}"
            )
        data = _read_file(path, f"corpus '{spec.name}'")
        digest = hashlib.sha256(data).hexdigest()
        if digest != spec.sha256:
            raise UserError(
                f"corpus '{spec.name}' at {path} has sha256 {digest[:12]}..., expected {spec.sha256[:12]}... "
                f"({len(data)} bytes, expected {spec.size}): the file is not the registered corpus"
            )
    corpus = Corpus.from_bytes(spec.name, data, spec.split_fractions, split_mode, source=spec.name)
    corpus.__dict__["sha256"] = spec.sha256  # the data was verified against it above
    return corpus
