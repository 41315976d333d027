"""Getting the raw corpora: download and verify War and Peace, build the Linux corpus from a kernel tree."""

from __future__ import annotations

import hashlib
import io
import random
import tarfile
import urllib.error
import urllib.request
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from . import atomic
from .corpus import REGISTRY, CorpusSpec, corpora_dir
from .errors import UserError


def _spec(name: str) -> CorpusSpec:
    if name not in REGISTRY:
        raise UserError(f"unknown corpus '{name}': choose one of {', '.join(REGISTRY)}")
    return REGISTRY[name]


def _verify(spec: CorpusSpec, data: bytes, origin: str) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise UserError(
            f"{origin}: sha256 {digest[:12]}... ({len(data)} bytes) does not match corpus '{spec.name}' "
            f"({spec.sha256[:12]}..., {spec.size} bytes); nothing was written"
        )


def fetch(name: str, directory: Path | None = None, url: str | None = None) -> Path:
    """Download a registered corpus, verify size and sha256, and write it atomically."""
    spec = _spec(name)
    url = url or spec.url
    if url is None:
        raise UserError(
            f"corpus '{name}' has no download address; build it with `python -m corpora build {name} --from PATH`"
        )
    target = (directory or corpora_dir()) / spec.filename
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            total = int(response.headers.get("Content-Length") or 0) or None
            buf = io.BytesIO()
            with tqdm(total=total, unit="B", unit_scale=True, desc=f"fetch {name}") as bar:
                while chunk := response.read(1 << 16):
                    buf.write(chunk)
                    bar.update(len(chunk))
    except (urllib.error.URLError, OSError) as err:
        raise UserError(
            f"could not download {url}: {err}; on an offline machine set CORPORA_DIR to a folder holding "
            f"{spec.filename}"
        ) from None
    data = buf.getvalue()
    _verify(spec, data, url)
    return atomic.write_bytes(target, data)


def _is_kernel_source(rel: PurePosixPath) -> bool:
    return len(rel.parts) >= 2 and rel.parts[0] == "kernel" and rel.suffix in (".c", ".h")


def _safe_member(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise UserError(f"refusing tar member '{name}': its path leaves the archive's folder")
    return path


def _kernel_files_from_tar(path: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    try:
        with tarfile.open(path) as tar:
            members = tar.getmembers()
            # Every tar member is checked, even ones we do not read: an archive with an escaping path is refused whole.
            paths = [_safe_member(m.name) for m in members]
            roots = {p.parts[0] for p in paths if p.parts}
            strip = 1 if len(roots) == 1 and "kernel" not in roots else 0  # linux-6.1/kernel/... -> kernel/...
            for member, mpath in zip(members, paths):
                rel = PurePosixPath(*mpath.parts[strip:]) if len(mpath.parts) > strip else None
                if rel is not None and member.isfile() and _is_kernel_source(rel):
                    files[str(rel)] = tar.extractfile(member).read()
    except tarfile.TarError as err:
        raise UserError(f"{path} is not a readable tar archive: {err}") from None
    return files


def _kernel_files_from_tree(root: Path) -> dict[str, bytes]:
    kernel = root / "kernel"
    if not kernel.is_dir():
        raise UserError(f"{root} has no kernel/ folder: give the root of a Linux source tree or a source tarball")
    return {
        str(PurePosixPath(p.relative_to(root).as_posix())): p.read_bytes()
        for p in kernel.rglob("*")
        if p.suffix in (".c", ".h") and p.is_file() and not p.is_symlink()
    }


def linux_bytes(source: Path, size: int, seed: int = 0) -> bytes:
    """The recipe of DESIGN.md sec 7: kernel/**/*.{c,h}, paths sorted, shuffled with Random(seed), concatenated, cut."""
    if not source.exists():
        raise UserError(f"{source} does not exist")
    files = _kernel_files_from_tree(source) if source.is_dir() else _kernel_files_from_tar(source)
    if not files:
        raise UserError(f"no kernel/*.c or kernel/*.h files found in {source}")
    order = sorted(files)
    random.Random(seed).shuffle(order)
    data = b"".join(files[p] for p in order)
    if len(data) < size:
        raise UserError(f"the kernel sources in {source} hold {len(data)} bytes, fewer than the corpus's {size}")
    return data[:size]


def build(name: str, source: Path, directory: Path | None = None, verify: bool = True) -> Path:
    """Build a corpus from its source (only `linux` is built) and write it atomically."""
    spec = _spec(name)
    if name != "linux":
        raise UserError(f"corpus '{name}' is downloaded, not built: `python -m corpora fetch {name}`")
    data = linux_bytes(Path(source), spec.size)
    if verify:
        _verify(spec, data, f"built from {source}")
    return atomic.write_bytes((directory or corpora_dir()) / spec.filename, data)
