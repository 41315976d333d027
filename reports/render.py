"""Render the charlm report: one HTML page (for browsers) and the same page printed to PDF.

The analyses produce numbers, figures and captions; this module only lays them out.
Design choices, and why:

* Jinja2 with autoescape always on: corpus text (the Linux kernel source) and findings
  contain ``<`` and ``&``. The one fragment marked safe is a section's ``html``, produced by an
  analysis's ``html(result)`` (the activation viewer), which escapes every character of text itself
  and writes its data as JSON with ``<``, ``>`` and ``&`` as backslash-u escapes (tests/test_cells.py).
* Tables are turned into lists of already-formatted strings here and drawn by one
  template macro, so escaping, number formatting and alignment live in one place.
* The HTML references its figures and stylesheet relatively, copied under ``out_dir``, so
  the folder can be moved, opened offline, and printed by WeasyPrint from the same file.
* Rendering is a pure function of the :class:`ReportContext` (the timestamp is passed in),
  and every file is written atomically so a crashed run never leaves a half report.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pandas as pd
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from .tables import PRINT_FITS, TableView, format_cell, table_view

log = logging.getLogger(__name__)
TEMPLATES = Path(__file__).resolve().parent / "templates"
STYLESHEET = "report.css"
_ANCHOR = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
RESERVED_ANCHORS = {"corpora", "trainings", "contents", "provenance", "findings", "standing", "appendix", "failures"}


@dataclass
class Section:
    """One analysis: the question it answers, its figure, what it shows and found, our numbers and the paper's."""

    name: str  # analysis name, used as the HTML anchor id
    title: str
    question: str = ""
    shows: str = ""  # one sentence: what the figure shows
    findings: list[str] = field(default_factory=list)  # the findings as sentences (analyses.prose), verdicts first
    verdicts: list = field(default_factory=list)  # the first page's lines from this section (analyses.prose)
    table: pd.DataFrame | None = None  # the one compact table
    figure: Path | None = None
    paper_table: pd.DataFrame | None = None
    paper_source: str = ""
    appendix: dict = field(default_factory=dict)  # title -> per-model table: the appendix
    deviations: list[str] = field(default_factory=list)  # where we deviate from the papers
    html: str = ""  # an interactive fragment the analysis escaped itself (the activation viewer)
    missing: str = ""  # why the analysis was not computed (its MissingInput sentence); empty when it was
    failed: str = ""  # the analysis raised: its one-line error ("ValueError: ..."); empty when it did not
    failed_in: str = ""  # where it raised ("compute(ctx)", "plot(result)", ...)
    command: str = ""  # the command that reproduces the failure
    log: str = ""  # the file holding its traceback

    def __post_init__(self) -> None:
        if not _ANCHOR.fullmatch(self.name) or self.name in RESERVED_ANCHORS:
            raise ValueError(f"section name {self.name!r} is not a usable, free anchor id")
        if self.paper_table is not None and not self.paper_source.strip():
            raise ValueError(f"section {self.name!r}: paper numbers need a paper_source")
        if self.figure is not None:
            self.figure = Path(self.figure)


@dataclass
class FailedModel:
    """A model (network or baseline) whose training or scoring job raised: the sections that read it lack it."""

    model: str  # model id
    corpus: str
    error: str  # one line: "ValueError: ..."
    log: str  # the file holding its traceback


@dataclass(frozen=True)
class UnshippedModel:
    """A model of a profile that ships its models (charlm.plan.plan_left_out) left out because none is shipped yet."""

    model: str  # model id
    corpus: str


@dataclass
class ReportContext:
    """Everything the report shows; render output is a function of this alone."""

    profile: str
    profile_description: str
    corpora: list[dict]  # name, bytes, vocab_size, sha256, splits {split: chars}
    trainings: pd.DataFrame
    total_seconds: float
    sections: list[Section]
    versions: dict[str, str]
    git_revision: str
    config_hashes: dict[str, str]
    generated_at: str  # ISO timestamp
    standing: pd.DataFrame | None = None  # where the models stand: test nats beside the n-gram orders they beat
    failed_models: list[FailedModel] = field(default_factory=list)  # models whose job raised (not in the report)
    unshipped_models: list[UnshippedModel] = field(default_factory=list)  # left out: not shipped yet (not a failure)
    limits: list[str] = field(default_factory=list)  # the first page's box: what this run can and cannot show

    @property
    def failed_sections(self) -> list[Section]:
        return [s for s in self.sections if s.failed]

    def __post_init__(self) -> None:
        names = [s.name for s in self.sections]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate section names: {duplicates}")


# --------------------------------------------------------------------------- formatting


def format_duration(seconds: float) -> str:
    """'2 h 03 min 04 s' for long runs, '12.3 s' for short ones."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m:02d} min {s:02d} s" if h else f"{m} min {s:02d} s"


# --------------------------------------------------------------------------- writing


@contextmanager
def _atomic_path(target: Path) -> Iterator[Path]:
    """Yield a temp path next to ``target``; it replaces ``target`` only on success."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _atomic_copy(src: Path, dst: Path) -> None:
    with _atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)


def _place_figure(section: Section, out_dir: Path) -> str | None:
    """Relative URL of the section's figure, copying it under out_dir/figures if needed."""
    if section.figure is None:
        return None
    src = section.figure.resolve()
    if not src.is_file():
        raise FileNotFoundError(f"section {section.name!r}: figure {src} does not exist")
    if src.is_relative_to(out_dir):
        return src.relative_to(out_dir).as_posix()
    dst = out_dir / "figures" / f"{section.name}{src.suffix.lower()}"
    _atomic_copy(src, dst)
    return dst.relative_to(out_dir).as_posix()


@dataclass
class _SectionView:
    """A section as the template needs it: formatted tables, figure URL, page layout."""

    section: Section
    figure: str | None
    ours: TableView | None
    paper: TableView | None
    appendix: list[tuple[str, TableView]]

    @property
    def landscape(self) -> bool:
        """The section's tables (and notes) are printed on landscape pages when a table (or a printed part of one) is
        too wide for portrait A4; its figure stays on the portrait page of its heading, at the full width."""
        return any(part.fit[1] for t in (self.ours, self.paper) if t is not None for part in t.print_parts())

    @property
    def side_by_side(self) -> bool:
        """Paper's numbers beside ours when each fits half a portrait row, else below."""
        half = PRINT_FITS[0][2] // 2 - 2  # minus the gap between the two
        return self.paper is not None and self.ours is not None and max(self.ours.width, self.paper.width) <= half


def _section_view(section: Section, out_dir: Path) -> _SectionView:
    def view_of(table):
        return None if table is None or table.empty and not len(table.columns) else table_view(table)

    view = _SectionView(
        section, _place_figure(section, out_dir), view_of(section.table), view_of(section.paper_table),
        [(title, table_view(t)) for title, t in section.appendix.items()],
    )  # fmt: skip
    for label, table in (("our", view.ours), ("paper", view.paper)):
        if table is not None and any(part.overflows for part in table.print_parts()):
            log.warning(
                "section %r: the key columns of the %s table are too wide for A4 landscape; the PDF cuts it",
                section.name,
                label,
            )
    return view


# --------------------------------------------------------------------------- rendering


@cache
def _environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,  # always: no template may emit unescaped analysis text
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["duration"] = format_duration
    env.filters["paragraphs"] = lambda text: [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    return env


def _corpora_view(corpora: list[dict]) -> TableView:
    """One row per corpus, one numeric column per split (union of splits, in order)."""
    splits = list(dict.fromkeys(k for c in corpora for k in c["splits"]))
    rows = [
        [str(c["name"]), format_cell(c["bytes"]), format_cell(c["vocab_size"])]
        + [format_cell(c["splits"].get(k)) for k in splits]
        + [str(c["sha256"])]
        for c in corpora
    ]
    columns = ["corpus", "bytes", "vocabulary", *(f"{k} chars" for k in splits), "sha256"]
    return TableView(columns, [False, True, True, *(True for _ in splits), False], rows)


@dataclass
class VerdictGroup:
    """A claim of the papers on the first page, stated once, with its verdict line for each corpus under it."""

    claim: object  # analyses.base.Claim
    lines: list  # analyses.prose.VerdictLine, in the section's order


def verdict_groups(sections: list[Section]) -> list[VerdictGroup]:
    """The first page's verdict lines grouped by claim, in the order the claims are first met: one claim tested on
    two corpora is printed once with its two verdicts, not twice (issue 36: the verdicts on as few pages as read)."""
    groups: dict[tuple[str, str], VerdictGroup] = {}
    for line in (v for s in sections for v in s.verdicts):
        groups.setdefault((line.section, line.claim.id), VerdictGroup(line.claim, [])).lines.append(line)
    return list(groups.values())


PARTS = {"all": "index.html", "main": ".report-print.html", "appendix": ".appendix-print.html"}


def render_html(ctx: ReportContext, out_dir: Path, part: str = "all") -> Path:
    """Write the HTML of one part (`all`: index.html, the appendix collapsed; `main` and `appendix`: what the two
    PDFs print) plus its stylesheet and figures; return its path."""
    out_dir = Path(out_dir).resolve()
    sections = [_section_view(s, out_dir) for s in ctx.sections]
    verdicts = verdict_groups(ctx.sections)
    _atomic_copy(TEMPLATES / STYLESHEET, out_dir / STYLESHEET)
    html = (
        _environment()
        .get_template("report.html.j2")
        .render(
            ctx=ctx,
            part=part,
            sections=sections,
            verdicts=verdicts,
            corpora=_corpora_view(ctx.corpora),
            trainings=table_view(ctx.trainings),
            standing=None if ctx.standing is None or ctx.standing.empty else table_view(ctx.standing),
            stylesheet=STYLESHEET,
        )
    )
    path = out_dir / PARTS[part]
    with _atomic_path(path) as tmp:
        tmp.write_text(html, encoding="utf-8")
    return path


class _ErrorCollector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def render_pdf(html_path: Path, pdf_path: Path) -> Path:
    """Print the HTML with WeasyPrint (A4, print CSS); fail if a figure or CSS did not load.

    WeasyPrint only logs missing images and stylesheets; a PDF silently lacking a
    figure would be worse than no PDF, so those log errors are raised here.
    """
    from weasyprint import HTML  # heavy import (pango); only needed for the PDF

    html_path, pdf_path = Path(html_path).resolve(), Path(pdf_path)
    collector = _ErrorCollector()
    logger = logging.getLogger("weasyprint")
    logger.addHandler(collector)
    try:
        document = HTML(filename=html_path, base_url=html_path.parent.as_uri() + "/").render()
    finally:
        logger.removeHandler(collector)
    if collector.messages:
        raise RuntimeError("WeasyPrint could not render the report:\n" + "\n".join(collector.messages))
    with _atomic_path(pdf_path) as tmp:
        document.write_pdf(tmp)
    return pdf_path


def render(ctx: ReportContext, out_dir: Path) -> tuple[Path, Path]:
    """Render ``out_dir/index.html`` (everything; the appendix collapsed), ``report.pdf`` (the first page, every
    section) and ``appendix.pdf`` (the per-model tables); return the HTML and the report's PDF."""
    from concurrent.futures import ProcessPoolExecutor

    html = render_html(ctx, out_dir)
    appendix = render_html(ctx, out_dir, "appendix")
    with ProcessPoolExecutor(max_workers=1) as side:  # the two PDFs print at once, one per core (WeasyPrint holds
        printing = side.submit(render_pdf, appendix, Path(out_dir) / "appendix.pdf")  # the GIL: a process)
        pdf = render_pdf(render_html(ctx, out_dir, "main"), Path(out_dir) / "report.pdf")
        printing.result()
    return html, pdf
