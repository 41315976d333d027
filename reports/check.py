"""Open a rendered report in headless Chromium and list what a reader's browser complains about.

Usage: ``python -m reports.check --profile NAME`` checks ``reports/build/NAME/index.html``,
writes ``screenshot.png`` next to it, prints one error per line and exits 1 if there are
any, 0 if the page is clean, 2 if Chromium is not installed.

How errors are collected, and why this way: Chromium's ``--enable-logging=stderr`` logs
every console message at the same level (``console.log`` looks like ``console.error``)
and does not log failed image or stylesheet loads at all, so parsing stderr is neither
complete nor precise. Instead, a copy of the page is made in a temporary folder with two
things added at the top of ``<head>``: a ``<base href>`` pointing at the report's folder
(so relative figures and CSS resolve exactly as for the original) and a small probe script
that records, before anything else runs,

* failed loads of ``<img>``, ``<link>``, ``<script>`` … (``error`` events, capture phase),
* uncaught exceptions and unhandled promise rejections,
* ``console.error`` calls and CSP violations,
* any resource fetched from outside ``file:``/``data:`` (the report must be offline).

On ``load`` the probe writes its list as JSON into the DOM; ``--dump-dom`` with a
``--virtual-time-budget`` prints the final DOM and this module parses the list back. A
missing list means the page never finished loading, which is reported as an error too.
The screenshot is taken in a second run on the unmodified page.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BUILD_DIR = Path(__file__).resolve().parent / "build"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
TIMEOUT_S = 60
RESULT_ID = "charlm-check-result"
PROBE = """<script>(() => {
  const errors = [];
  const text = (x) => {
    try { return x instanceof Error ? `${x.name}: ${x.message}` : String(x); } catch (e) { return "?"; }
  };
  const consoleError = console.error.bind(console);
  console.error = (...args) => { errors.push("console.error: " + args.map(text).join(" ")); consoleError(...args); };
  window.addEventListener("error", (e) => {
    const t = e.target;
    if (t && t !== window && t.tagName) {
      errors.push(`failed to load <${t.tagName.toLowerCase()}>: ${t.currentSrc || t.src || t.href || "?"}`);
    } else {
      errors.push(`uncaught ${e.message} at ${e.filename}:${e.lineno}`);
    }
  }, true);
  window.addEventListener("unhandledrejection", (e) => errors.push("unhandled rejection: " + text(e.reason)));
  document.addEventListener("securitypolicyviolation", (e) => errors.push("CSP blocked " + e.blockedURI));
  window.addEventListener("load", () => setTimeout(() => {
    for (const r of performance.getEntriesByType("resource")) {
      if (!/^(file|data|blob):/.test(r.name)) errors.push("external resource: " + r.name);
    }
    const out = document.createElement("script");
    out.type = "application/json";
    out.id = "RESULT_ID_PLACEHOLDER";
    out.textContent = JSON.stringify(errors).replace(/</g, "\\\\u003c");
    document.documentElement.appendChild(out);
  }, 0));
})();</script>""".replace("RESULT_ID_PLACEHOLDER", RESULT_ID)


class ChromiumMissing(RuntimeError):
    """Raised when no ``chromium`` binary can be found."""


def _chromium() -> str:
    found = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    if found is None:
        raise ChromiumMissing("chromium not found (Debian: apt-get install chromium); cannot check the report")
    return found


def _with_probe(page: str, base_uri: str) -> str:
    inject = f'<base href="{html.escape(base_uri)}">{PROBE}'
    head = re.search(r"<head\b[^>]*>", page, flags=re.IGNORECASE)
    return page[: head.end()] + inject + page[head.end() :] if head else inject + page


def _run_chromium(chromium: str, args: list[str], scratch: Path) -> subprocess.CompletedProcess[str]:
    """Run Chromium with a fresh profile directory so no state leaks between checks."""
    profile = Path(tempfile.mkdtemp(prefix="profile-", dir=scratch))
    return subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def check_html(path: Path, screenshot: Path | None = None) -> list[str]:
    """Console errors and failed resource loads of the page at ``path`` (empty if clean).

    Also writes a PNG screenshot of the page to ``screenshot`` when given.
    Raises :class:`ChromiumMissing` when Chromium is not installed.
    """
    path = Path(path).resolve()
    chromium = _chromium()
    with tempfile.TemporaryDirectory(prefix="charlm-check-") as tmp:
        scratch = Path(tmp)
        probed = scratch / "probed.html"
        probed.write_text(_with_probe(path.read_text(encoding="utf-8"), path.parent.as_uri() + "/"), encoding="utf-8")
        try:
            dump = _run_chromium(chromium, ["--dump-dom", "--virtual-time-budget=5000", probed.as_uri()], scratch)
            if screenshot is not None:
                shot = _run_chromium(
                    chromium,
                    [f"--screenshot={Path(screenshot).resolve()}", "--window-size=1280,1800", path.as_uri()],
                    scratch,
                )
        except subprocess.TimeoutExpired as e:
            return [f"chromium timed out after {e.timeout:.0f} s on {path}"]
    if dump.returncode != 0:
        return [f"chromium exited with {dump.returncode}: {_tail(dump.stderr)}"]
    found = re.search(rf'<script[^>]*\bid="{RESULT_ID}"[^>]*>(.*?)</script>', dump.stdout, re.DOTALL)
    errors = json.loads(found.group(1)) if found else [f"page did not finish loading within the time budget: {path}"]
    if screenshot is not None and (shot.returncode != 0 or not Path(screenshot).is_file()):
        errors.append(f"screenshot failed (exit {shot.returncode}): {_tail(shot.stderr)}")
    return [" ".join(str(e).split()) for e in errors]  # one line each


def _tail(stderr: str) -> str:
    return " | ".join(stderr.strip().splitlines()[-3:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.check", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", required=True, help="profile whose <build dir>/<profile>/index.html to check")
    parser.add_argument(
        "--build-dir", type=Path, default=BUILD_DIR, help="where the reports were written (default %(default)s)"
    )
    args = parser.parse_args(argv)
    page = args.build_dir / args.profile / "index.html"
    if not page.is_file():
        print(f"no report at {page}; render it first", file=sys.stderr)
        return 1
    screenshot = page.with_name("screenshot.png")
    try:
        errors = check_html(page, screenshot=screenshot)
    except ChromiumMissing as e:
        print(e, file=sys.stderr)
        return 2
    for error in errors:
        print(error)
    if errors:
        return 1
    print(f"clean: {page} (screenshot {screenshot})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
