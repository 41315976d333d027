"""Build and install KenLM with a large KENLM_MAX_ORDER (run by `make setup`; stdlib only).

    .venv/bin/python charlm/kenlm_setup.py [--version 0.3.0] [--max-order 21] [--cache DIR] [--bindir DIR]

One PyPI sdist (`kenlm==VERSION`) gives both halves of KenLM:

* the Python module, built as a wheel with `MAX_ORDER=<order>` in the environment (the sdist's
  setup.py reads `os.getenv("MAX_ORDER", "6")`; this script checks that before trusting it), and
* the `lmplz` and `build_binary` programs, built with CMake and `-DKENLM_MAX_ORDER=<order>`.

The sdist, the wheel (one per interpreter ABI and platform) and the two programs are kept in a cache
outside the repository (`--cache`, default `$KENLM_CACHE`, else
`${XDG_CACHE_HOME:-~/.cache}/charlm/kenlm-<version>-order<order>`), so another checkout or virtual
environment on the same machine reuses them. The programs are copied into `--bindir` (default: the
directory of this interpreter, i.e. `.venv/bin`), and the wheel is installed into this interpreter.

Every run ends with a self-test, which is also what decides whether anything needs doing: `lmplz -o
<order>` builds a tiny ARPA model, `build_binary` converts it, and `kenlm.Model()` loads it in this
interpreter. When that passes nothing is built or installed, so a second run takes about a second.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import filecmp
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from pathlib import Path

PROGRAMS = ("lmplz", "build_binary")
# Files the sdist must contain for the C++ programs to be buildable from it.
REQUIRED_SOURCES = (
    "CMakeLists.txt",
    "setup.py",
    "lm/builder/lmplz_main.cc",
    "lm/build_binary_main.cc",
    "lm/builder/CMakeLists.txt",
    "util/CMakeLists.txt",
)
SELFTEST_TEXT = (
    "\n".join(
        " ".join(line)
        for line in (
            "the quick brown fox jumps over the lazy dog",
            "pack my box with five dozen liquor jugs",
            "how vexingly quick daft zebras jump",
            "sphinx of black quartz judge my vow",
            "the five boxing wizards jump quickly",
        )
    )
    + "\n"
)


class SetupError(RuntimeError):
    pass


def log(msg: str) -> None:
    print(f"[kenlm-setup] {msg}", flush=True)


def run(
    cmd: list[str], *, cwd: Path | None = None, env: dict | None = None, quiet: bool = False
) -> subprocess.CompletedProcess:
    if not quiet:
        log("$ " + " ".join(str(c) for c in cmd))
    proc = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.PIPE if quiet else None,
        stderr=subprocess.STDOUT if quiet else None,
    )
    if proc.returncode != 0:
        tail = ("\n" + proc.stdout[-4000:]) if quiet and proc.stdout else ""
        raise SetupError(f"command failed (exit {proc.returncode}): {' '.join(str(c) for c in cmd)}{tail}")
    return proc


def default_cache(version: str, order: int) -> Path:
    if os.environ.get("KENLM_CACHE"):
        return Path(os.environ["KENLM_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "charlm" / f"kenlm-{version}-order{order}"


@contextlib.contextmanager
def locked(cache: Path):
    """One builder per cache at a time (a CI job and a developer may share the machine)."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for another build holding {cache / '.lock'} ...")
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


# ---------------------------------------------------------------- self-test


def selftest_programs(bindir: Path, order: int, work: Path) -> Path | None:
    """Build a tiny order-`order` ARPA with lmplz and binarize it; return the ARPA path, or None on failure."""
    lmplz, build_binary = bindir / "lmplz", bindir / "build_binary"
    if not (os.access(lmplz, os.X_OK) and os.access(build_binary, os.X_OK)):
        return None
    text, arpa, binary = work / "selftest.txt", work / f"selftest-{order}.arpa", work / f"selftest-{order}.binary"
    text.write_text(SELFTEST_TEXT)
    try:
        with open(text, "rb") as fin, open(arpa, "wb") as fout:
            proc = subprocess.run(
                [str(lmplz), "-o", str(order), "--discount_fallback", "-S", "64M", "-T", str(work)],
                stdin=fin,
                stdout=fout,
                stderr=subprocess.PIPE,
                timeout=120,
            )
        if proc.returncode != 0:
            log(f"{lmplz} -o {order} failed: {proc.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
            return None
        proc = subprocess.run(
            [str(build_binary), "-S", "64M", "-T", str(work), "probing", str(arpa), str(binary)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=120,
        )
        if proc.returncode != 0:
            log(f"{build_binary} failed: {proc.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
            return None
    except (OSError, subprocess.TimeoutExpired) as exc:  # e.g. a shared library (boost) went away
        log(f"cannot run {lmplz}: {exc}")
        return None
    return arpa


def selftest_module(arpa: Path, order: int) -> str | None:
    """Load `arpa` with this interpreter's kenlm module (in a child process); None on success, else the error."""
    code = (
        "import sys, kenlm\n"
        "m = kenlm.Model(sys.argv[1])\n"
        "assert m.order == int(sys.argv[2]), m.order\n"
        "s = m.score('t h e q u i c k', bos=True, eos=True)\n"
        "assert s < 0, s\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(arpa), str(order)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if proc.returncode == 0:
        return None
    lines = proc.stdout.strip().splitlines()
    return lines[-1] if lines else f"exit {proc.returncode}"


# ---------------------------------------------------------------- sdist


def fetch_sdist(version: str, cache: Path) -> Path:
    sdist = cache / f"kenlm-{version}.tar.gz"
    if sdist.is_file():
        return sdist
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        # --no-binary only for kenlm: its build requirements (setuptools, wheel, cmake) stay wheels.
        # (--no-binary :all: would compile CMake itself from source to prepare kenlm's metadata.)
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                "kenlm",
                f"kenlm=={version}",
                "-d",
                tmp,
            ]
        )
        found = list(Path(tmp).glob(f"kenlm-{version}.tar.gz"))
        if not found:
            raise SetupError(f"pip download kenlm=={version} gave no sdist: {os.listdir(tmp)}")
        os.replace(found[0], sdist)
    return sdist


def unpack_sdist(sdist: Path, dest: Path, order: int) -> Path:
    with tarfile.open(sdist) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)
    roots = [p for p in dest.iterdir() if p.is_dir()]
    if len(roots) != 1:
        raise SetupError(f"unexpected layout in {sdist}: {roots}")
    src = roots[0]
    missing = [f for f in REQUIRED_SOURCES if not (src / f).is_file()]
    if missing:
        raise SetupError(f"{sdist.name} lacks the C++ build files {missing}: cannot build lmplz/build_binary from it")
    setup_py = (src / "setup.py").read_text()
    if not re.search(r"""os\.getenv\(\s*["']MAX_ORDER["']""", setup_py):
        raise SetupError(
            f"{sdist.name}'s setup.py does not read $MAX_ORDER: the wheel would silently get the "
            f"default order instead of {order}; update charlm/kenlm_setup.py"
        )
    return src


# ---------------------------------------------------------------- builds


def build_programs(sdist: Path, cache: Path, order: int, jobs: int) -> Path:
    """lmplz + build_binary with -DKENLM_MAX_ORDER=order into cache/bin (kept if they already work)."""
    out = cache / "bin"
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        if selftest_programs(out, order, Path(tmp)):
            return out
    if not shutil.which("cmake"):
        raise SetupError("cmake not found on PATH (run `make sysdeps`)")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(dir=cache, prefix="build-") as tmp:
        src = unpack_sdist(sdist, Path(tmp) / "src", order)
        build = Path(tmp) / "build"
        run(
            [
                "cmake",
                "-S",
                src,
                "-B",
                build,
                "-DCMAKE_BUILD_TYPE=Release",
                f"-DKENLM_MAX_ORDER={order}",
                "-DCOMPILE_TESTS=OFF",
                "-DENABLE_PYTHON=OFF",
            ],
            quiet=True,
        )
        run(["cmake", "--build", build, "--target", *PROGRAMS, "--parallel", str(jobs)], quiet=True)
        staged = Path(tmp) / "bin"
        staged.mkdir()
        for prog in PROGRAMS:
            hits = [p for p in build.rglob(prog) if p.is_file() and os.access(p, os.X_OK)]
            if not hits:
                raise SetupError(f"cmake build produced no {prog}")
            shutil.copy2(hits[0], staged / prog)
        if not selftest_programs(staged, order, Path(tmp)):
            raise SetupError(f"freshly built lmplz/build_binary fail the order-{order} self-test")
        if out.exists():
            shutil.rmtree(out)
        os.replace(staged, out)
    log(f"built lmplz, build_binary (KENLM_MAX_ORDER={order}) in {time.monotonic() - t0:.0f}s -> {out}")
    return out


def wheel_dir(cache: Path) -> Path:
    return cache / "wheels" / f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}"


def build_wheel(sdist: Path, cache: Path, version: str, order: int) -> Path:
    wdir = wheel_dir(cache)
    found = sorted(wdir.glob(f"kenlm-{version}-*.whl"))
    if found:
        return found[0]
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(dir=cache, prefix="wheel-") as tmp:
        unpack_sdist(sdist, Path(tmp) / "check", order)  # refuse an sdist that ignores MAX_ORDER
        # setup.py builds a standalone libkenlm with CMake (-j4), then the extension with setuptools (serially).
        env = dict(os.environ, MAX_ORDER=str(order))
        run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "-w", Path(tmp) / "out", sdist],
            env=env,
            quiet=True,
        )
        built = sorted((Path(tmp) / "out").glob("kenlm-*.whl"))
        if not built:
            raise SetupError("pip wheel produced no kenlm wheel")
        wdir.mkdir(parents=True, exist_ok=True)
        dest = wdir / built[0].name
        os.replace(built[0], dest)
    log(f"built {dest.name} (MAX_ORDER={order}) in {time.monotonic() - t0:.0f}s -> {wdir}")
    return dest


# ---------------------------------------------------------------- main


def install_programs(src: Path, bindir: Path) -> None:
    bindir.mkdir(parents=True, exist_ok=True)
    for prog in PROGRAMS:
        target = bindir / prog
        if target.is_file() and not target.is_symlink() and filecmp.cmp(src / prog, target, shallow=False):
            continue
        tmp = bindir / f".{prog}.tmp"
        shutil.copy2(src / prog, tmp)  # a copy, not a link: clearing the cache must not break the venv
        os.replace(tmp, target)
        log(f"installed {target}")


def ensure(version: str, order: int, cache: Path, bindir: Path, jobs: int, force: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="kenlm-selftest-") as tmp:
        work = Path(tmp)
        arpa = None if force else selftest_programs(bindir, order, work)
        module_error = selftest_module(arpa, order) if arpa else "not checked yet"
        if arpa and module_error is None and not force:
            log(f"OK (nothing to do): {bindir}/lmplz -o {order} works and {sys.executable} loads a {order}-gram")
            return

        with locked(cache):
            sdist = None
            if arpa is None:
                sdist = fetch_sdist(version, cache)
                install_programs(build_programs(sdist, cache, order, jobs), bindir)
                arpa = selftest_programs(bindir, order, work)
                if arpa is None:
                    raise SetupError(f"{bindir}/lmplz still fails the order-{order} self-test after install")
                module_error = selftest_module(arpa, order)
            if force or module_error is not None:
                log(f"kenlm module needs (re)installing: {'--force' if force else module_error}")
                if force:
                    shutil.rmtree(wheel_dir(cache), ignore_errors=True)
                sdist = sdist or fetch_sdist(version, cache)
                wheel = build_wheel(sdist, cache, version, order)
                run(
                    [sys.executable, "-m", "pip", "install", "--no-deps", "--force-reinstall", "--no-index", wheel],
                    quiet=True,
                )
                log(f"installed {wheel.name} into {sys.prefix}")
                module_error = selftest_module(arpa, order)
                if module_error is not None:
                    raise SetupError(f"the installed kenlm module cannot load a {order}-gram: {module_error}")
        log(f"OK: {bindir}/lmplz -o {order} works and {sys.executable} loads a {order}-gram (cache: {cache})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--version", default="0.3.0", help="kenlm version on PyPI (default %(default)s)")
    ap.add_argument("--max-order", type=int, default=21, help="KENLM_MAX_ORDER (default %(default)s)")
    ap.add_argument("--cache", type=Path, help="cache dir (default $KENLM_CACHE or ~/.cache/charlm/kenlm-<v>-order<n>)")
    ap.add_argument(
        "--bindir",
        type=Path,
        default=Path(sys.executable).parent,
        help="where lmplz/build_binary go (default: this interpreter's dir, %(default)s)",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 2,
        help="parallel jobs for the lmplz/build_binary build (default %(default)s)",
    )
    ap.add_argument(
        "--force", action="store_true", help="rebuild the cached wheel and reinstall it even if the self-test passes"
    )
    args = ap.parse_args(argv)
    if args.max_order < 2:
        ap.error("--max-order must be >= 2")
    cache = (args.cache or default_cache(args.version, args.max_order)).expanduser().absolute()
    try:
        ensure(args.version, args.max_order, cache, args.bindir.absolute(), max(1, args.jobs), args.force)
    except SetupError as exc:
        print(f"[kenlm-setup] ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
