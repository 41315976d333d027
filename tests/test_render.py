"""The report renders to HTML and PDF, escapes hostile text, and loads cleanly in Chromium."""

from __future__ import annotations

import re
import shutil
import zlib
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure

from reports.render import (
    FailedModel,
    ReportContext,
    Section,
    format_duration,
    render,
    render_html,
    render_pdf,
)
from reports.tables import format_cell, table_view

HOSTILE = "<script>alert(1)</script> & friends"
LINUX = "static int __init foo(void) { if (a < b && c > d) return -EINVAL; }"


def _figure(path: Path) -> Path:
    fig = Figure(figsize=(6, 3.5))
    ax = fig.subplots()
    steps = range(1, 21)
    ax.plot(steps, [2.5 / s**0.3 for s in steps], label="LSTM")
    ax.plot(steps, [2.7 / s**0.25 for s in steps], label="RNN")
    ax.set(xlabel="epoch", ylabel="validation bits per char")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def make_context(tmp: Path) -> ReportContext:
    """A small but realistic context: three analyses, a wide table, a paper table, notes."""
    figure = _figure(tmp / "learning_curves.png")
    ce = pd.DataFrame(
        {
            "model": ["lstm-1x64", "gru-1x64", "rnn-1x64", "kenlm-5"],
            "corpus": ["linux", "linux", "linux", "linux"],
            "test bits/char": [2.1234, 2.2071, 2.4012, 2.6600],
            "params": [52_000, 40_000, 14_000, float("nan")],
        }
    )
    paper = pd.DataFrame({"model": ["LSTM", "GRU", "RNN"], "test cross-entropy": [1.077, 1.080, 1.157]})
    wide = pd.DataFrame(
        {f"n={n}": [0.5 / n, 1.0 / n, 2.0 / n] for n in range(1, 15)},
        index=pd.Index(["lstm", "gru", "rnn"], name="model"),
    )
    sections = [
        Section(
            name="cross_entropy",
            title="Test cross-entropy of every model",
            question="How well does each model predict held-out characters?",
            findings=["LSTM beats the RNN by 0.28 bits/char.", f"A cell says {HOSTILE}."],
            table=ce.assign(sample=[LINUX, "ok", HOSTILE, "x" * 90]),
            figure=figure,
            paper_table=paper,
            paper_source="Karpathy et al. 2016, Table 2",
            deviations=["quick profile: far fewer steps than the paper, numbers are higher."],
        ),
        Section(
            name="ngram_errors",
            title="Errors shared with n-gram models",
            question="Which errors does the LSTM share with an n-gram model of each order?",
            findings=["Overlap shrinks with n."],
            table=wide,
            figure=None,
        ),
        Section(
            name="gates",
            title="Gate saturation",
            question="How often are LSTM gates left- or right-saturated?",
            findings=["Forget gates saturate right on Linux more than on War and Peace."],
            table=pd.DataFrame({"gate": ["input", "forget"], "left": [0.1, 0.02], "right": [0.05, 0.31]}),
            figure=figure,
            paper_table=pd.DataFrame({"gate": ["forget"], "right": [0.3]}),
            paper_source="Karpathy et al. 2016, Figure 3",
        ),
    ]
    trainings = pd.DataFrame(
        {
            "model": ["lstm-1x64", "gru-1x64", "rnn-1x64"],
            "corpus": ["linux"] * 3,
            "arch": ["lstm", "gru", "rnn"],
            "layers": [1, 1, 1],
            "size": [64, 64, 64],
            "params": [52_000, 40_000, 14_000],
            "chars trained": [2_000_000, 2_000_000, 2_000_000],
            "seconds": [61.2, 55.0, 20.4],
            "cached": [False, True, False],
        }
    )
    return ReportContext(
        profile="quick",
        profile_description="Tiny models, few steps: checks the pipeline end to end.",
        corpora=[
            {
                "name": "linux",
                "bytes": 6_206_996,
                "vocab_size": 101,
                "sha256": "a" * 64,
                "splits": {"train": 5_586_296, "valid": 310_350, "test": 310_350},
            }
        ],
        trainings=trainings,
        total_seconds=3723.4,
        sections=sections,
        versions={"python": "3.11.2", "torch": "2.13.0", "pandas": pd.__version__, "kenlm": "0.2.0"},
        git_revision="0123456789abcdef0123456789abcdef01234567",
        config_hashes={"lstm-1x64": "f" * 64, "gru-1x64": "e" * 64},
        generated_at="2025-01-02T03:04:05+00:00",
    )


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[ReportContext, Path, Path]:
    tmp = tmp_path_factory.mktemp("report")
    ctx = make_context(tmp)
    html, pdf = render(ctx, tmp / "out")
    return ctx, html, pdf


def test_html_has_sections_footer_and_relative_figures(rendered):
    ctx, html_path, _ = rendered
    html = html_path.read_text(encoding="utf-8")
    for section in ctx.sections:
        assert section.title in html
        assert f'id="{section.name}"' in html and f'href="#{section.name}"' in html
    assert "charlm report" in html and "Tiny models, few steps" in html
    assert "a" * 64 in html  # corpus sha256
    for package, version in ctx.versions.items():
        assert re.search(rf"<th[^>]*>{package}</th><td><code>{re.escape(version)}</code>", html)
    assert ctx.git_revision in html and "f" * 64 in html and ctx.generated_at in html
    assert "Karpathy et al. 2016, Table 2" in html
    assert "1 h 02 min 03 s" in html  # total time
    assert 'href="report.css"' in html and (html_path.parent / "report.css").is_file()
    assert 'src="figures/cross_entropy.png"' in html
    assert (html_path.parent / "figures" / "cross_entropy.png").is_file()
    assert "http://" not in html and "https://" not in html


def test_hostile_text_is_escaped(rendered):
    _, html_path, _ = rendered
    html = html_path.read_text(encoding="utf-8")
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; friends" in html
    assert html.count("&lt;script&gt;") == 2  # once in the caption, once in a table cell
    assert "if (a &lt; b &amp;&amp; c &gt; d)" in html


def test_render_is_deterministic(rendered, tmp_path):
    ctx, html_path, _ = rendered
    again = render_html(ctx, tmp_path / "again")
    assert again.read_bytes() == html_path.read_bytes()


def test_pdf_has_pages(rendered):
    _, _, pdf_path = rendered
    data = pdf_path.read_bytes()
    assert data.startswith(b"%PDF")
    try:
        from pypdf import PdfReader
    except ImportError:
        pages = _count_page_objects(data)
    else:
        pages = len(PdfReader(pdf_path).pages)
    assert pages >= 2


def _count_page_objects(data: bytes) -> int:
    """Count /Type /Page objects, also inside the compressed object streams WeasyPrint writes."""
    chunks = [data]
    for stream in re.findall(rb"stream\r?\n(.*?)\r?\nendstream", data, re.DOTALL):
        try:
            chunks.append(zlib.decompress(stream))
        except zlib.error:
            pass  # images, fonts with other filters: no page objects there
    return sum(len(re.findall(rb"/Type\s*/Page\b", c)) for c in chunks)


def test_formatting():
    assert format_cell(1234567) == "1,234,567"
    assert format_cell(True) == "yes" and format_cell(None) == "—"
    assert format_cell(float("nan")) == "—"
    assert format_cell(2.12345) == "2.123"
    assert format_duration(12.34) == "12.3 s" and format_duration(125) == "2 min 05 s"
    view = table_view(pd.DataFrame({"ce": [1.0771, 12345.6], "n": [1.0, float("nan")]}))
    assert view.rows == [["1.077", "1"], ["12,345.600", "—"]] and view.numeric == [True, True]


def test_pdf_refuses_missing_figures(tmp_path):
    page = tmp_path / "index.html"
    page.write_text('<!DOCTYPE html><html><body><p>x</p><img src="figures/gone.png"></body></html>')
    with pytest.raises(RuntimeError, match="gone.png"):
        render_pdf(page, tmp_path / "report.pdf")
    assert not (tmp_path / "report.pdf").exists()


def test_paper_numbers_need_a_source():
    with pytest.raises(ValueError, match="paper_source"):
        Section("x", "t", "q", "c", pd.DataFrame({"a": [1]}), None, paper_table=pd.DataFrame({"a": [1]}))


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium is not installed")
def test_chromium_console_is_clean(rendered):
    from reports.check import check_html

    _, html_path, _ = rendered
    shot = html_path.with_name("screenshot.png")
    assert check_html(html_path, screenshot=shot) == []
    assert shot.read_bytes().startswith(b"\x89PNG")


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium is not installed")
def test_chromium_check_reports_broken_pages(tmp_path):
    from reports.check import check_html

    page = tmp_path / "broken.html"
    page.write_text(
        '<!DOCTYPE html><html><head><link rel="stylesheet" href="gone.css"></head>'
        '<body><img src="missing.png"><script>console.error("boom"); nope();</script></body></html>'
    )
    errors = check_html(page)
    assert any("gone.css" in e for e in errors)
    assert any("missing.png" in e for e in errors)
    assert any("boom" in e for e in errors)
    assert any("nope" in e for e in errors)


def test_a_sections_own_fragment_is_inserted_as_is_and_nothing_else_is(tmp_path):
    """report_html (the activation viewer) escapes its own text; the template inserts it verbatim, once, inside its
    section, while the section's caption and table stay escaped."""
    ctx = make_context(tmp_path)
    fragment = '<div class="viewer" data-cells="[1,2]"><span style="background:#ca0020">a</span></div>'
    ctx.sections[0].html = fragment
    ctx.sections[0].findings = [HOSTILE]
    html = render_html(ctx, tmp_path / "out").read_text(encoding="utf-8")
    assert html.count(fragment) == 1
    section = html[html.index(f'id="{ctx.sections[0].name}"') : html.index(f'id="{ctx.sections[1].name}"')]
    assert fragment in section and "&lt;script&gt;alert(1)" in section and "<script>" not in section


def test_a_failed_section_and_a_failed_model_are_shown_in_red_with_error_command_and_log(tmp_path):
    """Issue 23: a section whose analysis raised says so where it stands (error, where, how to reproduce, the
    traceback's file), the first page lists it and the models that could not be built, all escaped; a section
    that did not fail shows none of it."""
    ctx = make_context(tmp_path)
    failed = Section(
        name="error_overlap", title="Error overlap", question="Which errors do the models share?",
        table=pd.DataFrame(), figure=None, failed=f"ValueError: {HOSTILE}", failed_in="plot(df)",
        command="python -m analyses.error_overlap --profile smoke-all --set 'split=<test>' --figure error_overlap.png",
        log="reports/build/smoke-all/logs/error_overlap.log",
    )  # fmt: skip
    ctx.sections.insert(1, failed)
    ctx.failed_models = [FailedModel("gru-L1-H10-s0-6afec9", "warpeace", "RuntimeError: x < y", "logs/gru.log")]
    html = render_html(ctx, tmp_path / "out").read_text(encoding="utf-8")
    assert "<script>" not in html and "x < y" not in html

    box = html[html.index('id="error_overlap"') : html.index(f'id="{ctx.sections[2].name}"')]
    assert 'class="failed"' in box
    assert f"Failed in plot(df):</strong> <code>ValueError: {ESCAPED}</code>" in box
    assert "--set &#39;split=&lt;test&gt;&#39; --figure error_overlap.png" in box
    assert "reports/build/smoke-all/logs/error_overlap.log" in box

    first_page = html[: html.index('id="contents"')]
    failures = first_page[first_page.index('id="failures"') : first_page.index('id="findings"')]
    assert "This run is incomplete" in failures
    assert re.search(rf'href="#error_overlap">Error overlap</a>: <code>ValueError: {re.escape(ESCAPED)}</code> in plot',
                     failures)  # fmt: skip
    assert "gru-L1-H10-s0-6afec9" in failures and "RuntimeError: x &lt; y" in failures and "logs/gru.log" in failures
    findings = first_page[first_page.index('id="findings"') :]
    assert "Error overlap" not in findings.split('id="limits"')[0]  # a failed section has no verdict on page one

    computed = html[html.index('id="cross_entropy"') : html.index('id="error_overlap"')]
    assert 'class="failed"' not in computed and "Reproduce" not in computed
    ctx.sections.remove(failed)
    ctx.failed_models = []
    assert 'class="failed' not in render_html(ctx, tmp_path / "clean").read_text(encoding="utf-8")


ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt; &amp; friends"


def _label_characters() -> list[str]:
    from charlm.score import LABELS

    return sorted({ch for label in LABELS for ch in label if ord(ch) > 0x7E} | {"\u2423"})  # ␣: char_advantage's space


@pytest.mark.skipif(shutil.which("fc-list") is None, reason="fontconfig's fc-list is not installed")
def test_the_pdf_has_a_font_for_every_byte_label():
    import subprocess

    # weasyprint draws a glyph from any font fontconfig offers; `make sysdeps` installs DejaVu and Symbola
    missing = [
        f"U+{ord(ch):04X}" for ch in _label_characters()
        if not subprocess.run(["fc-list", f":charset={ord(ch):x}", "family"], capture_output=True, text=True).stdout
    ]  # fmt: skip
    assert not missing, f"no installed font draws {missing}: run `make sysdeps`"


def test_the_figures_have_a_font_for_every_byte_label():
    import matplotlib.pyplot as plt
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    from analyses.common import style

    style()
    fonts = [FT2Font(str(p)) for p in font_manager.fontManager._find_fonts_by_props(
        font_manager.FontProperties(family=plt.rcParams["font.family"]))]  # fmt: skip
    missing = [f"U+{ord(ch):04X}" for ch in _label_characters() if not any(f.get_char_index(ord(ch)) for f in fonts)]
    assert not missing, f"the figures' fonts ({plt.rcParams['font.family']}) do not draw {missing}"


def test_a_table_too_wide_for_a_page_prints_in_parts_that_fit_each_repeating_its_key_columns(tmp_path):
    """A 40-column table (the reference profile's cells table is ~280 characters wide): the HTML keeps it whole,
    the PDF prints it in parts of its columns, each naming the rows again, and every table stays on its page."""
    from weasyprint import HTML

    wide = pd.DataFrame({"corpus": ["warpeace", "linux"], "model": ["LSTM 128 L3", "GRU (papers' form) 128"],
                         **{f"probe score variant {k}": [0.123456 * k, 0.5] for k in range(40)}})  # fmt: skip
    view = table_view(wide)
    parts = view.print_parts()
    assert view.overflows and len(parts) > 1 and view.key_columns == 2
    assert all(p.columns[:2] == ["corpus", "model"] and not p.overflows for p in parts)
    assert [c for p in parts for c in p.columns[2:]] == view.columns[2:]  # every column once, in order
    assert [r for p in parts for r in p.rows[1][2:]] == view.rows[1][2:]
    narrow = table_view(wide.iloc[:, :6])
    assert narrow.print_parts() == [narrow]
    prose = table_view(pd.DataFrame({f"note {k}": ["a cell that wraps inside quotes " * 3] for k in range(9)}))
    assert prose.width > 215 and prose.print_parts() == [prose]  # text wraps: it fits a landscape page whole
    indexed = table_view(wide.set_index(["corpus", "model", "probe score variant 0"]))  # an index names the rows
    assert indexed.key_columns == 3 and all(p.columns[:3] == indexed.columns[:3] for p in indexed.print_parts())

    ctx = make_context(tmp_path)
    ctx.sections.append(Section(name="wide", title="A wide table", question="Does it fit?", findings=["It does."],
                                table=wide, figure=None))  # fmt: skip
    html = render_html(ctx, tmp_path / "out")
    text = html.read_text()
    assert f"printed in {len(parts)} parts" in text and text.count("probe score variant 39") == 2  # whole, and part

    def boxes(box):
        yield box
        for child in getattr(box, "children", None) or []:
            yield from boxes(child)

    for page in HTML(filename=str(html)).render().pages:
        tables = [b for b in boxes(page._page_box) if type(b).__name__ == "TableBox"]
        assert all(b.position_x + b.margin_width() <= page.width for b in tables)


# ---------------------------------------------------------------------------------------- the printed layout (issue 36)


def _boxes(box, section=None):
    """Every box of a laid-out page with the id of the report section it is in (None outside one)."""
    if getattr(box, "element_tag", None) == "section":
        section = box.element.get("id")
    yield box, section
    for child in getattr(box, "children", None) or []:
        yield from _boxes(child, section)


def _tall_figure(path: Path) -> Path:
    """A figure as the analyses draw them (7.5 in wide, 150 dpi), as tall as any of theirs (9 in)."""
    fig = Figure(figsize=(7.5, 9.0))
    for k, ax in enumerate(fig.subplots(3, 2).flat):
        ax.plot(range(10), [v * (k + 1) for v in range(10)])
        ax.set_title(f"panel {k}", fontsize=7)
    fig.savefig(path, dpi=150)
    return path


def test_a_tall_figure_prints_at_full_width_on_the_page_of_its_heading_and_wide_tables_go_landscape_alone(tmp_path):
    """Every figure on the page of its heading and question, at the text width (180 mm of A4): never scaled down
    (its 7 pt text would print below 6.5 pt), never pushed off its heading; a table too wide for portrait even
    wrapped takes its section's tables to a landscape page, the figure stays portrait; a wide table whose text can
    wrap prints portrait at the small size."""
    from weasyprint import HTML

    ctx = make_context(tmp_path)
    tall = _tall_figure(tmp_path / "tall.png")
    wrapping = pd.DataFrame({"corpus": ["linux"], **{f"a long header {k}": ["a cell with words that wrap"] for k in
                                                     range(6)}})  # fmt: skip
    numbers = pd.DataFrame({"model": ["lstm"], **{f"n={n}": [123456.789 + n] for n in range(1, 21)}})
    assert table_view(wrapping).width > 114 and table_view(wrapping).fit == ("small", False)
    assert table_view(numbers).fit[1] and not table_view(numbers).overflows
    question = "A question long enough to take two lines of the page, as the longest questions of the report do. " * 2
    ctx.sections = [
        Section(name=f"s{k}", title=f"Section {k} with a long title that may wrap on the page", question=question,
                findings=["A finding."] * 12, table=table, figure=tall)
        for k, table in enumerate([wrapping, numbers, wrapping])
    ]  # fmt: skip
    html = render_html(ctx, tmp_path / "out", "main")
    document = HTML(filename=str(html)).render()
    mm = 25.4 / 96  # CSS px
    where: dict[str, list] = {}
    for number, page in enumerate(document.pages):
        landscape = page.width > page.height
        for box, section in _boxes(page._page_box):
            if getattr(box, "element_tag", None) is None:
                continue
            if box.element_tag == "h2" and section:
                where.setdefault(section, []).append(("heading", number, landscape))
            if box.element_tag == "img" and section:
                where.setdefault(section, []).append(("figure", number, landscape))
                assert abs(box.width * mm - 180) < 1, "a figure is printed at the text width"
                assert box.position_y + box.height <= page.height - 18 / mm, "the figure ends above the margin"
            if box.element_tag == "table" and section and type(box).__name__ == "TableBox":
                where.setdefault(section, []).append(("table", number, landscape))
    for section, found in where.items():
        (_, heading_page, heading_landscape), (_, figure_page, figure_landscape) = found[0], found[1]
        assert heading_page == figure_page and not heading_landscape and not figure_landscape, (section, found)
    assert {landscape for what, _, landscape in where["s1"] if what == "table"} == {True}
    assert {landscape for what, _, landscape in where["s0"] + where["s2"] if what == "table"} == {False}


def test_the_first_page_states_each_claim_once_with_its_verdict_per_corpus(tmp_path):
    """Issue 36: a claim tested on two corpora is one shaded row, with a verdict line per corpus under it."""
    from analyses.base import Claim
    from analyses.prose import VerdictLine

    ctx = make_context(tmp_path)
    claim = Claim("rnn-behind", "Karpathy et al. (2016) sec 4.1", "the LSTM and the GRU beat the RNN", "Fig 1")
    other = Claim("depth", "Karpathy et al. (2016) sec 4.1", "depth of two helps")
    ctx.sections[0].verdicts = [
        VerdictLine("reproduced", "Reproduced", claim, "linux: 6 of 6", "cross_entropy", "linux"),
        VerdictLine("partly", "Partly", other, "linux: 2 of 3", "cross_entropy", "linux"),
        VerdictLine("not reproduced", "Not reproduced", claim, "warpeace: 1 of 6", "cross_entropy", "warpeace"),
    ]
    html = render_html(ctx, tmp_path / "out", "main").read_text(encoding="utf-8")
    table = html[html.index('class="verdicts"') : html.index('id="limits"')]
    assert table.count("the LSTM and the GRU beat the RNN") == 1 and table.count("depth of two helps") == 1
    groups = table.split("<tbody>")[1:]
    assert len(groups) == 2
    assert "linux: 6 of 6" in groups[0] and "warpeace: 1 of 6" in groups[0] and "linux: 2 of 3" in groups[1]
    assert groups[0].index('class="claim"') < groups[0].index("v-reproduced") < groups[0].index("v-not-reproduced")


def test_a_long_narrow_table_prints_in_columns(tmp_path):
    """A paper's numbers as one long list (32 rows of 4 short columns) print in two columns; a short or a wide
    table whole."""
    long = pd.DataFrame({"corpus": ["warpeace"] * 32, "family": ["ngram"] * 32, "n": range(1, 33),
                         "paper_ce_nats": [1.234] * 32})  # fmt: skip
    assert table_view(long).print_columns == 2
    assert table_view(long.head(10)).print_columns == 1
    assert table_view(long.assign(note="a note long enough to need the width of the page " * 2)).print_columns == 1
    ctx = make_context(tmp_path)
    ctx.sections[1].table = long
    html = render_html(ctx, tmp_path / "out", "main").read_text(encoding="utf-8")
    assert html.count('class="table-wrap columns-2"') == 1
