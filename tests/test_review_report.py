"""The review as a report: the Markdown the GitHub Action writes to the job summary, and the HTML page.

The reviews are real (the example files, and a file whose name is made of Markdown and HTML), the
Markdown is rendered by a CommonMark parser with GitHub's tables and raw HTML on, as GitHub renders
a job summary, and both pages are opened in headless Chromium and read as a person reads them: the
summary line, one table per file with a row per finding and five cells in each, nothing from the
files turned into markup, nothing cut off or wider than the window at 800 px, readable in dark mode.
"""

from __future__ import annotations

import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

import browser
from conftest import REPO, run_in_process
from reading import review
from vllm_caching_mcp import cli
from vllm_caching_mcp.advice.review import ReviewResult
from vllm_caching_mcp.reports.review_report import md, to_html, to_markdown
from vllm_caching_mcp.safe_text import one_line

HOSTILE_NAME = "a|b <img src=x onerror=alert(1)> [l](e) *y* `z`.sh"
SERVE = (REPO / "examples" / "serve.sh").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def result() -> ReviewResult:
    deploy = (REPO / "examples" / "deploy.yaml").read_text(encoding="utf-8")
    return review(("serve.sh", SERVE), ("deploy.yaml", deploy), (HOSTILE_NAME, SERVE))


class _Tags(HTMLParser):
    """The elements, attributes and style text of a page, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: list[tuple[str, str | None]] = []
        self.style = ""
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attributes += attrs
        self._in_style = tag == "style"

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.style += data


def github_html(markdown: str) -> str:
    """The Markdown as GitHub renders a job summary: CommonMark with tables, raw HTML kept."""
    body = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(markdown)
    return f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{body}</body></html>'


def test_the_summary_line_comes_first_and_counts_what_the_review_found(result: ReviewResult) -> None:
    text = to_markdown(result)
    first = text.splitlines()[0]
    errors = sum(f.occurrences for f in result.findings if f.severity == "error")
    assert first.startswith("❌ **vllm-caching review: ") and first.endswith("fails --fail-on error**")
    assert f"{errors:,} error" in first and "in 3 files" in first
    assert to_markdown(result, "never").splitlines()[0].startswith("✅ **")


def test_each_file_gets_a_table_with_a_row_per_finding(result: ReviewResult) -> None:
    facts = browser.page_facts(github_html(to_markdown(result)))
    by_file: dict[str, int] = {}
    for f in result.findings:
        by_file[f.location.file] = by_file.get(f.location.file, 0) + 1
    # Header and rows, five cells each: no pipe in a message split a row, no newline ended one.
    assert [len(t) for t in facts["tables"]] == [n + 1 for n in by_file.values()]
    assert all(cells == 5 for table in facts["tables"] for cells in table)
    for f in result.findings:
        assert f.message in facts["text"] and f.fix in facts["text"], f.rule_id


def test_nothing_from_the_files_becomes_markup(result: ReviewResult) -> None:
    for page in (github_html(to_markdown(result)), to_html(result)):
        facts = browser.page_facts(page)
        assert HOSTILE_NAME in facts["text"]  # shown as written, the picture and link and emphasis not made
        assert not set(facts["elements"]) & {"img", "a", "em", "strong", "code", "script", "iframe"} - {
            "strong"  # the summary line and NOT REVIEWED are ours
        }


@pytest.mark.parametrize(
    "text",
    ["a | b", "line one\nline two", "<b>bold</b> & co", "[link](http://e) ![img](x)", "*em* _em_ `code` ~~s~~", "\\|"],
)
def test_a_cell_escape_keeps_the_text_literal(text: str) -> None:
    table = f"| A | B |\n| --- | --- |\n| {md(text)} | x |\n"
    facts = browser.page_facts(github_html(table))
    assert facts["tables"] == [[2, 2]]
    shown = facts["text"].split("\n")[1].split("\t")[0]
    assert shown == one_line(text)  # a newline shows as \x0a, as in every one-line text the tools print
    assert not set(facts["elements"]) & {"b", "a", "img", "em", "code", "s", "del"}


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_the_html_page_fits_800_px_and_reads_in_both_modes(result: ReviewResult, dark: bool) -> None:
    page = to_html(result)
    parser = _Tags()
    parser.feed(page)
    assert not [a for a in parser.attributes if a[0] in {"src", "href", "srcset", "action", "data"}]
    assert not parser.tags & {"script", "link", "img", "iframe", "object"} and "url(" not in parser.style
    facts = browser.page_facts(page, dark=dark)
    assert facts["width"] <= facts["viewport"], "the page scrolls sideways"
    assert facts["clipped"] == []
    assert [len(t) for t in facts["tables"]] == [
        1 + sum(1 for f in result.findings if f.location.file == name)
        for name in dict.fromkeys(f.location.file for f in result.findings)
    ]
    for colour, background in facts["colours"]:
        assert browser.contrast(colour, background) >= 4.5, (colour, background)
    background = facts["colours"][0][1]
    assert (browser.luminance(background) < 0.1) is dark


def test_review_formats_through_the_command_line(tmp_path: Path) -> None:
    for name in ("serve.sh", "deploy.yaml"):
        shutil.copy(REPO / "examples" / name, tmp_path / name)
    markdown = run_in_process(cli.main, "review", str(tmp_path / "serve.sh"), "--format", "markdown")
    assert markdown.returncode == 1 and markdown.stdout.startswith("❌ **vllm-caching review: ")
    page = run_in_process(cli.main, "review", str(tmp_path / "serve.sh"), "--format", "html", "--fail-on", "never")
    assert page.returncode == 0 and page.stdout.startswith("<!DOCTYPE html>")


def test_a_review_with_nothing_to_review_still_reports(tmp_path: Path) -> None:
    (tmp_path / "ci.yml").write_text("on: [push]\njobs: {}\n", encoding="utf-8")
    done = run_in_process(cli.main, "review", "--allow-empty", "--format", "markdown", str(tmp_path / "ci.yml"))
    assert done.returncode == 0
    assert done.stdout.splitlines()[0].startswith("✅ **vllm-caching review: 0 errors, 0 warnings, 0 info")


GOLDEN = REPO / "tests" / "data" / "pictures"


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_the_html_page_matches_its_golden(dark: bool, tmp_path: Path) -> None:
    from test_pictures import TOLERANCE, differing_share

    name = "review-page-dark" if dark else "review-page"
    shot = golden_shot(dark, tmp_path / f"{name}.png")
    share = differing_share(shot, GOLDEN / f"{name}.png")
    assert share <= TOLERANCE, f"{name}: {share:.1%} of the pixels differ; look at {shot}"


def golden_shot(dark: bool, out: Path) -> Path:
    """The page of the example script's review, as the top 800 × 700 px of a browser window."""
    return browser.screenshot(to_html(review(("serve.sh", SERVE))), ".html", out, 800, 700, dark=dark)


if __name__ == "__main__":  # python tests/test_review_report.py: new goldens after a deliberate change
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        for dark in (False, True):
            name = "review-page-dark" if dark else "review-page"
            shot = golden_shot(dark, Path(scratch) / f"{name}.png")
            (GOLDEN / f"{name}.png").write_bytes(shot.read_bytes())
            print(f"wrote tests/data/pictures/{name}.png")
