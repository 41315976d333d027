"""Running KenLM's programs for charlm.ngram: finding `lmplz` and `build_binary`, the order KenLM was compiled for,
lmplz's sorting memory, and lmplz's ARPA piped into build_binary, whole or cut as it comes to what scoring one split
reads (charlm.arpa_filter). A failing program is one UserError line, its log kept beside the model folder.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from corpora.errors import UserError

DEFAULT_MAX_ORDER = 21  # `make setup` builds KenLM with KENLM_MAX_ORDER=21 (the paper's 20-gram baseline is a 21-gram)


# ----------------------------------------------------------------------------- the programs


def _search_dirs() -> list[Path]:
    return [Path(sys.executable).parent]


def find_tool(name: str) -> Path:
    """KenLM's `lmplz` / `build_binary`: the virtual environment's bin first, then PATH."""
    for folder in _search_dirs():
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise UserError(
        f"{name} not found (looked in {_search_dirs()[0]} and PATH): run `make setup` to build KenLM with "
        f"KENLM_MAX_ORDER={DEFAULT_MAX_ORDER}"
    )


def import_kenlm():
    try:
        import kenlm
    except ImportError:
        raise UserError(
            "the kenlm Python module is not installed: run `make setup` to build KenLM with "
            f"KENLM_MAX_ORDER={DEFAULT_MAX_ORDER}"
        ) from None
    return kenlm


_MAX_ORDER_RE = re.compile(
    r"(?:compiled to support up to|KENLM_MAX_ORDER\s*=?\s*|maximum order(?: of| is)?)\s*(\d+)", re.I
)


def max_order() -> int:
    """The highest order KenLM supports here: $KENLM_MAX_ORDER, else 21 (what `make setup` compiles in).

    A build with a lower maximum is still caught: lmplz itself estimates any order, but
    build_binary and the Python module refuse an order above their compiled maximum ("This model
    has order 22 but KenLM was compiled to support up to 21"), and that refusal becomes one
    UserError line naming the limit.
    """
    env = os.environ.get("KENLM_MAX_ORDER")
    if env:
        try:
            return int(env)
        except ValueError:
            raise UserError(f"KENLM_MAX_ORDER must be an integer, got '{env}'") from None
    return DEFAULT_MAX_ORDER


def order_error(order: int, limit: int | None) -> UserError:
    limit_text = f"the compiled maximum {limit}" if limit else "KenLM's compiled maximum (KENLM_MAX_ORDER)"
    return UserError(
        f"n-gram order {order} (n = {order - 1}) is above {limit_text}: choose n <= "
        f"{(limit or DEFAULT_MAX_ORDER) - 1}, "
        f"or rebuild KenLM with a larger KENLM_MAX_ORDER"
    )


# ----------------------------------------------------------------------------- lmplz into build_binary


SORT_MEMORY_CAP = 1 << 30  # measured on the Linux 21-gram: -S 800M peaks at 1.1 GB, the uncapped default at 3.0 GB,
# in about the same time (lmplz sorts in blocks on disk); the cap keeps two builds at once far under 6 GB


SORT_BLOCK = "4M"  # lmplz's --sort_block (its default 64M): the same ARPA byte for byte (md5, War and Peace's
# 21-gram), in 31 CPU-s instead of 41 (its threads wait on each other less: 17 s of system time becomes 10) (2026-11-29)
PIPE_BYTES = 1 << 20  # the ARPA pipe's kernel buffer (Linux's default 64 KiB, its usual maximum 1 MiB): lmplz and the
# reader swap turns 16 times less often; War and Peace's 21-gram cut in 34 s instead of 39 (2026-11-29)


def wide_pipe(stream) -> None:
    """Ask the kernel for a PIPE_BYTES buffer on a pipe (Linux's F_SETPIPE_SZ); elsewhere, or refused, as it was."""
    with contextlib.suppress(AttributeError, OSError, ValueError):
        import fcntl

        fcntl.fcntl(stream.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)


def default_memory(tokens: int, order: int) -> str:
    """lmplz sorting memory: enough to sort in RAM (~48 bytes per token and order), at most 1 GiB or 30% of RAM."""
    want = min(max(64 << 20, tokens * order * 48), SORT_MEMORY_CAP)
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        want = min(want, int(total * 0.3))
    except (ValueError, OSError, AttributeError):
        pass
    return f"{max(want, 64 << 20) >> 20}M"


def arpa_counts(head: bytes) -> list[int]:
    """n-gram counts per order from the start of an ARPA file (its header's `ngram k=count` lines)."""
    counts = []
    for raw in head.splitlines():
        line = raw.strip()
        if line.startswith(b"ngram ") and b"=" in line:
            counts.append(int(line.split(b"=")[1]))
        elif line.startswith(b"\\1-grams"):
            break
    return counts


def tool_error(log: Path, what: str, order: int, code: int) -> UserError:
    """The one line a failed KenLM tool gets: its order limit named when that is why, else the log's last line."""
    text = log.read_text(errors="replace")
    if "KENLM_MAX_ORDER" in text or "max order" in text.lower() or "maximum order" in text.lower():
        match = _MAX_ORDER_RE.search(text)
        return order_error(order, int(match.group(1)) if match else None)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    tail = lines[-1] if lines else "no output"
    return UserError(f"{what} failed for order {order} (exit {code}): {tail[:300]} (log: {log})")


def kept_failure(what: str, own: Path, code: int, keep: Path, order: int) -> UserError:
    """A failed tool's one line; its own log is kept beside the model folder as `<keep>.<tool>.log` (the temp
    folder it was written in goes)."""
    kept = keep.with_name(f"{keep.name}.{what}.log")
    shutil.copyfile(own, kept)
    return tool_error(kept, what, order, code)


def lmplz_into_binary(
    lmplz_cmd: list[str], binary_cmd: list[str], log: Path, order: int, keep: Path
) -> tuple[float, float, int, list]:
    """Run lmplz with its ARPA on stdout, streamed into build_binary reading /dev/stdin; both log to `log`.
    Returns (seconds until lmplz finished, seconds build_binary ran after it, ARPA bytes, n-gram counts). A failing
    tool is one UserError from its own log, which is kept as `<keep>.<tool>.log` (the model folder's name)."""
    start = time.perf_counter()
    binary_log = log.with_name(log.name + ".build_binary")
    with open(log, "ab") as lm_log, open(binary_log, "wb") as bb_log:
        lm_log.write((" ".join(lmplz_cmd) + " | " + " ".join(binary_cmd) + "\n").encode())
        lm_log.flush()
        lm = subprocess.Popen(lmplz_cmd, stdout=subprocess.PIPE, stderr=lm_log, stdin=subprocess.DEVNULL)
        wide_pipe(lm.stdout)
        bb = subprocess.Popen(binary_cmd, stdin=subprocess.PIPE, stdout=bb_log, stderr=subprocess.STDOUT)
        total, head, broken = 0, b"", False
        try:
            while chunk := lm.stdout.read(1 << 20):
                if len(head) < 65536:
                    head += chunk[:65536]
                total += len(chunk)
                try:
                    bb.stdin.write(chunk)
                except BrokenPipeError:  # build_binary stopped: its log says why
                    broken = True
                    lm.kill()
                    break
        finally:
            lm.stdout.close()
            with contextlib.suppress(BrokenPipeError):
                bb.stdin.close()
            lm_code = lm.wait()
            lmplz_s = time.perf_counter() - start
            bb_code = bb.wait()
    binary_s = time.perf_counter() - start - lmplz_s
    failed = ("lmplz", log, lm_code) if lm_code != 0 and not broken else None
    if failed is None and (bb_code != 0 or broken):
        failed = ("build_binary", binary_log, bb_code)
    if failed is not None:
        raise kept_failure(*failed, keep, order)
    with open(log, "ab") as out:  # one log: lmplz's, then build_binary's
        out.write(binary_log.read_bytes())
    binary_log.unlink()
    return lmplz_s, binary_s, total, arpa_counts(head)


def lmplz_cut_into_binary(
    lmplz_cmd: list[str], binary_cmd: list[str], log: Path, order: int, keep: Path, text_bytes: np.ndarray
) -> tuple[float, float, int, list, list]:
    """lmplz's ARPA read as it comes and cut to what scoring `text_bytes` reads (charlm.arpa_filter), then that
    (small) ARPA written to `binary_cmd`'s input file and binarised. Returns (lmplz seconds, build_binary seconds,
    whole ARPA bytes, n-gram counts of the whole model, n-gram counts kept); a failing tool is one UserError."""
    from .arpa_filter import ArpaFilter

    start = time.perf_counter()
    cut = ArpaFilter(text_bytes, order)
    with open(log, "ab") as lm_log:
        lm_log.write((" ".join(lmplz_cmd) + " | cut to the scored split | " + " ".join(binary_cmd) + "\n").encode())
        lm_log.flush()
        lm = subprocess.Popen(lmplz_cmd, stdout=subprocess.PIPE, stderr=lm_log, stdin=subprocess.DEVNULL)
        wide_pipe(lm.stdout)
        total = 0
        try:
            while chunk := lm.stdout.read(1 << 20):
                total += len(chunk)
                cut.feed(chunk)
        finally:
            lm.stdout.close()
            lm_code = lm.wait()
    cut.close()
    lmplz_s = time.perf_counter() - start
    if lm_code != 0 or not cut.ended:
        raise kept_failure("lmplz", log, lm_code or 1, keep, order)
    arpa = Path(binary_cmd[2])  # build_binary's input: the cut ARPA, small enough for a file
    with open(arpa, "wb") as out:
        cut.write(out)
    with open(log, "ab") as out:
        proc = subprocess.run(binary_cmd, stdout=out, stderr=subprocess.STDOUT)
    arpa.unlink()
    if proc.returncode != 0:
        raise kept_failure("build_binary", log, proc.returncode, keep, order)
    read, kept = cut.counts()
    return lmplz_s, time.perf_counter() - start - lmplz_s, total, read, kept
