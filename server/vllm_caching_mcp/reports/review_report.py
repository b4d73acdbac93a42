"""A review as a report people read: Markdown for a GitHub job summary, or a standalone HTML page.

    to_markdown(result, fail_on)   one summary line, then a table per file: severity, rule, line, message, fix
    to_html(result, fail_on)       the same content as one page with its own CSS (light and dark), no external
                                   assets and no script

Both are laid out from one `Report` built here from the review's answer; the templates only write
it out. Everything in a finding may come from the files under review (a file name, a value quoted
in a message), so every cell is escaped: the Markdown escape keeps a `|` from splitting a table,
a newline from ending a row and `<`, `[`, `*` or a backtick from turning into markup; the HTML
template autoescapes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from jinja2 import Environment, PackageLoader, StrictUndefined

from ..advice.review_models import FailOn, ReviewResult, exit_code
from ..safe_text import one_line

_SEVERITIES = ("error", "warning", "info")
_ICON = {"error": "🔴", "warning": "🟠", "info": "🔵"}


@dataclass
class Row:
    severity: str
    rule: str
    line: str
    where: str | None  # the YAML path, when there is one
    message: str
    fix: str


@dataclass
class FileSection:
    name: str
    rows: list[Row] = field(default_factory=list)
    not_reviewed: list[str] = field(default_factory=list)  # lines that start vLLM in a way the review cannot read


@dataclass
class Report:
    summary: str
    passed: bool
    files: list[FileSection]
    clean_files: list[str]
    not_checked: list[str]
    notes: list[str]


def build_report(result: ReviewResult, fail_on: FailOn = "error", ignore_unfixed: bool = False) -> Report:
    """The review's findings grouped by file, in the order the review gives them (most severe first)."""
    sections: dict[str, FileSection] = {}
    for unread in result.not_reviewed:
        section = sections.setdefault(unread.location.file, FileSection(unread.location.file))
        line = f"line {unread.location.line}: " if unread.location.line else ""
        section.not_reviewed.append(f"{line}{unread.text}")
    for f in result.findings:
        section = sections.setdefault(f.location.file, FileSection(f.location.file))
        section.rows.append(
            Row(
                severity=f.severity,
                rule=f.rule_id,
                line=str(f.location.line) if f.location.line else "–",
                where=f.location.path,
                message=f.message + _also_at(f.occurrences, [str(p.location) for p in f.also_at]),
                fix=f.fix,
            )
        )
    reviewed = list(dict.fromkeys(w.file for w in result.workloads))
    clean = [name for name in reviewed if name not in sections]
    notes = [*result.notes, *result.version_context.warnings]
    left_out = result.findings_left_out + result.workloads_left_out + result.not_checked_left_out
    if left_out:
        notes.append(f"{left_out} entries were left out of the answer to keep it short (detail: full lists them)")
    return Report(
        summary=_summary(result, fail_on, len(reviewed) or len(sections), ignore_unfixed),
        passed=exit_code(result, fail_on, ignore_unfixed=ignore_unfixed) == 0,
        files=list(sections.values()),
        clean_files=clean,
        not_checked=[f"{n.rule_id} ({n.workload}) needs {', '.join(n.needs)}" for n in result.not_checked],
        notes=notes,
    )


def _also_at(occurrences: int, places: list[str]) -> str:
    if occurrences <= 1:
        return ""
    more = occurrences - 1 - len(places)
    return " (also at " + ", ".join(places) + (f" and {more} more" if more else "") + ")"


def _summary(result: ReviewResult, fail_on: FailOn, files: int, ignore_unfixed: bool) -> str:
    counts = {s: sum(f.occurrences for f in result.findings if f.severity == s) for s in _SEVERITIES}
    versions = sorted({w.vllm_version for w in result.workloads}) or [result.version_context.version]
    words = [_count(counts["error"], "error"), _count(counts["warning"], "warning"), f"{counts['info']} info"]
    unread = f", {len(result.not_reviewed)} not reviewed" if result.not_reviewed else ""
    gate = "passes" if exit_code(result, fail_on, ignore_unfixed=ignore_unfixed) == 0 else "fails"
    gate_text = "no gate (--fail-on never)" if fail_on == "never" else f"{gate} --fail-on {fail_on}"
    if ignore_unfixed and fail_on != "never":
        gate_text += " --ignore-unfixed"
    return (
        f"vllm-caching review: {', '.join(words)}{unread} in {_count(files, 'file')} "
        f"({_count(len(result.workloads), 'workload')}, vLLM {', '.join(versions)}); {gate_text}"
    )


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# ------------------------------------------------------------------------------------------ Markdown

# What GitHub-flavoured Markdown reads as markup inside a table cell. `<`, `>` and `&` become entities
# (a backslash does not stop every renderer's HTML); the rest get a backslash. With `[` and `]` escaped no
# link can start, so `(`, `!` and `#` stay as written (inside a cell no line starts with them).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md(text: str) -> str:
    """``text`` as one literal line of a Markdown table cell."""
    flat = one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", flat)


_markdown = Environment(
    loader=PackageLoader("vllm_caching_mcp.reports", "templates"),
    autoescape=False,  # Markdown is escaped cell by cell with `md`
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
_markdown.filters["md"] = md
_html = Environment(
    loader=PackageLoader("vllm_caching_mcp.reports", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
_html.filters["one_line"] = one_line


def to_markdown(result: ReviewResult, fail_on: FailOn = "error", ignore_unfixed: bool = False) -> str:
    report = build_report(result, fail_on, ignore_unfixed)
    return _markdown.get_template("review.md.j2").render(report=report, icon=_ICON, passed_icon=_passed(report))


def to_html(result: ReviewResult, fail_on: FailOn = "error", ignore_unfixed: bool = False) -> str:
    report = build_report(result, fail_on, ignore_unfixed)
    return _html.get_template("review.html.j2").render(report=report)


def _passed(report: Report) -> str:
    return "✅" if report.passed else "❌"
