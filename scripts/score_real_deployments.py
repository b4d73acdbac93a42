"""Score the review on the real-deployment corpus against tests/data/real_deployments/EXPECTATIONS.yaml.

    python scripts/score_real_deployments.py --corpus CORPUS > scoreboard.md
    python scripts/score_real_deployments.py --corpus CORPUS --json > scoreboard.json

CORPUS holds each file of the expectations under its key (``<ecosystem>/<name>.<ext>``), as
scripts/fetch_real_deployments.py lays them out. Each file is reviewed on its own, in this process,
exactly as ``vllm-caching review KEY --format json`` run in CORPUS reviews it; the answer is
scored as tests/data/real_deployments/README.md ("How the scoreboard counts") says, and printed as
a markdown scoreboard (totals, one row per file, the findings left for hand judgement) or with
``--json`` as one JSON object. A file missing from CORPUS is reported as missing and not scored.
Exit status: 0 when every file was scored, 1 when some were missing, 2 on bad input.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from vllm_caching_mcp import __version__
from vllm_caching_mcp.advice.review import ReviewResult
from vllm_caching_mcp.advice.review_models import RANK, Finding
from vllm_caching_mcp.cli import read_file_option
from vllm_caching_mcp.tools import ToolInputError, run_tool

REPO = Path(__file__).resolve().parents[1]
DEFAULT_EXPECTATIONS = REPO / "tests" / "data" / "real_deployments" / "EXPECTATIONS.yaml"

LINE_SLACK = 2  # a finding "sits on" an expected problem within this many lines of one of its lines
ADVISORY = re.compile(r"\b(GHSA|CVE)-", re.IGNORECASE)
# A floating tag may be reported as the release the review assumed rather than as a finding, so the
# expected problems about one are also counted apart; they are the ones whose keywords say "floating".
FLOATING_KEYWORD = "floating"


class ExpectationsError(Exception):
    """The expectations file is not what this script reads; the message names the file and the field."""


# -- the review of one file --------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    """What ``vllm-caching review KEY`` answered: exit 2 with its error line, or the result."""

    result: ReviewResult | None
    error: str | None = None


def review_file(corpus: Path, key: str) -> Outcome:
    """The review of one corpus file, named by its key as a review run inside the corpus names it."""
    try:
        text = read_file_option("files", str(corpus / key))
        arguments = {"documents": [{"name": key, "text": text}], "disabled_rules": [], "detail": "full"}
        result = run_tool("review_deployment", arguments)
    except ToolInputError as exc:
        return Outcome(None, str(exc))
    except Exception as exc:  # a crash is a finding of this run, not a reason to stop scoring the rest
        return Outcome(None, f"the review crashed: {type(exc).__name__}: {exc}")
    assert isinstance(result, ReviewResult)
    return Outcome(result)


# -- matching a finding to an expectation ------------------------------------------------------


def finding_lines(finding: Finding) -> list[int]:
    places = [finding.location, *(p.location for p in finding.also_at)]
    return [p.line for p in places if p.line is not None]


def matches(finding: Finding, entry: dict[str, Any]) -> bool:
    """The README's test: names one of the entry's keywords, and sits within LINE_SLACK of its lines."""
    said = f"{finding.rule_id}\n{finding.title}\n{finding.message}".lower()
    if not any(str(word).lower() in said for word in entry.get("keywords") or []):
        return False
    expected_lines = entry.get("lines") or []
    lines = finding_lines(finding)
    if not lines or not expected_lines:
        return True
    return any(abs(line - expected) <= LINE_SLACK for line in lines for expected in expected_lines)


def is_advisory(finding: Finding) -> bool:
    return bool(ADVISORY.search(finding.rule_id))


def label(finding: Finding) -> str:
    line = finding.location.line
    return f"{finding.rule_id} line {line}" if line is not None else finding.rule_id


# -- one file's score --------------------------------------------------------------------------


@dataclasses.dataclass
class Unmatched:
    finding: str
    severity: str
    title: str
    message: str


@dataclasses.dataclass
class FileScore:
    key: str
    missing: bool = False
    unreadable: bool = False
    why_unreadable: str | None = None
    release_expected: str = "unstated"
    release_read: str = "-"
    release_right: bool | None = None  # None: not part of the release measure
    expected: list[str] = dataclasses.field(default_factory=list)
    found: list[str] = dataclasses.field(default_factory=list)
    under_rated: list[str] = dataclasses.field(default_factory=list)
    missed: list[str] = dataclasses.field(default_factory=list)
    floating_expected: int = 0
    floating_found: int = 0
    configuration_findings: int = 0  # at warning or above
    right: int = 0
    wrong: list[str] = dataclasses.field(default_factory=list)
    unmatched: list[Unmatched] = dataclasses.field(default_factory=list)
    advisories: int = 0


def score_file(key: str, entry: dict[str, Any], outcome: Outcome | None) -> FileScore:
    score = FileScore(key=key, release_expected=expected_release(entry))
    score.expected = [str(must["id"]) for must in entry.get("must") or []]
    score.floating_expected = sum(is_floating(must) for must in entry.get("must") or [])
    if outcome is None:
        score.missing = True
        score.release_read = "missing"
        score.missed = list(score.expected)
        return score
    result = outcome.result
    score.unreadable, score.why_unreadable = unreadable(entry, outcome)
    read_release(score, entry, result)
    findings = result.findings if result is not None else []
    score.advisories = sum(is_advisory(f) for f in findings)
    configuration = [f for f in findings if not is_advisory(f)]
    score_musts(score, entry, configuration)
    judge_findings(score, entry, configuration)
    return score


def expected_release(entry: dict[str, Any]) -> str:
    release = entry.get("release") or {}
    return str(release.get("vllm", release.get("lmcache", "unstated")))


def is_floating(must: dict[str, Any]) -> bool:
    return any(str(word).lower() == FLOATING_KEYWORD for word in must.get("keywords") or [])


def unreadable(entry: dict[str, Any], outcome: Outcome) -> tuple[bool, str | None]:
    """Exit 2, or an answer with no workload (neither vLLM nor an LMCache server), where the file runs vLLM or
    LMCache (the README's definition)."""
    if outcome.result is None:
        why = f"exit 2: {outcome.error}"
    elif not outcome.result.workloads and not outcome.result.cache_servers:
        unread = "; ".join(f"line {u.location.line}: {u.text}" for u in outcome.result.not_reviewed)
        why = "no workload" + (f" (not reviewed: {unread})" if unread else "")
    else:
        return False, None
    return (False, None) if entry.get("expect_no_vllm") else (True, why)


def read_release(score: FileScore, entry: dict[str, Any], result: ReviewResult | None) -> None:
    """The release the review judged each workload as, against the one the file states."""
    workloads = result.workloads if result is not None else []
    if entry.get("expect_no_vllm"):
        score.release_read = "no vLLM workload (right)" if not workloads else "a vLLM workload where none runs ✗"
        return
    if result is None:
        return  # exit 2: nothing was read, and the release measure counts answered files only
    if not workloads:
        score.release_read, score.release_right = "no workload", False
        return
    read = sorted({(w.vllm_version, w.version_source) for w in workloads})
    score.release_read = ", ".join(f"{version} ({source})" for version, source in read)
    if "vllm" not in (entry.get("release") or {}):
        return  # an LMCache file: the vLLM release it is judged as is shown, not scored
    stated = score.release_expected
    score.release_right = all(
        source == "assumed-newest" if stated == "unstated" else (version == stated and source != "assumed-newest")
        for version, source in read
    )


def score_musts(score: FileScore, entry: dict[str, Any], configuration: list[Finding]) -> None:
    for must in entry.get("must") or []:
        about = [f for f in configuration if matches(f, must)]
        if not about:
            score.missed.append(str(must["id"]))
            continue
        score.found.append(str(must["id"]))
        score.floating_found += is_floating(must)
        if all(f.severity == "info" for f in about):
            score.under_rated.append(str(must["id"]))


def judge_findings(score: FileScore, entry: dict[str, Any], configuration: list[Finding]) -> None:
    """Each configuration finding at warning or above is wrong, right, or left for hand judgement."""
    for finding in configuration:
        if RANK[finding.severity] < RANK["warning"]:
            continue
        score.configuration_findings += 1
        verdict = verdict_of(finding, entry)
        if verdict is None:
            score.unmatched.append(
                Unmatched(label(finding), finding.severity, one_line(finding.title), one_line(finding.message))
            )
        elif verdict.startswith("wrong"):
            score.wrong.append(f"{label(finding)} [{verdict.removeprefix('wrong: ')}]")
        else:
            score.right += 1


def verdict_of(finding: Finding, entry: dict[str, Any]) -> str | None:
    """ "wrong: <what>", "right", or None when neither a must nor a must_not entry is about it."""
    if entry.get("expect_no_vllm"):
        return "wrong: a finding on a file that runs no vLLM"
    allowed = False
    for must_not in entry.get("must_not") or []:
        if matches(finding, must_not):
            if RANK[finding.severity] > RANK[str(must_not.get("max_severity", "info"))]:
                return f"wrong: {one_line(str(must_not.get('what', '')))}"
            allowed = True  # the expectation allows a finding about it up to this severity
    if allowed or any(matches(finding, must) for must in entry.get("must") or []):
        return "right"
    return None


def one_line(text: str) -> str:
    return " ".join(text.split())


# -- the whole corpus --------------------------------------------------------------------------


def load_expectations(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ExpectationsError(f"{path}: cannot read it ({exc})") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict) or not all(isinstance(v, dict) for v in files.values()):
        raise ExpectationsError(f"{path}: files: must map each key to its expectations")
    return {str(key): entry for key, entry in files.items()}


def score_corpus(corpus: Path, expectations: dict[str, dict[str, Any]]) -> list[FileScore]:
    scores = []
    for key, entry in expectations.items():
        outcome = review_file(corpus, key) if (corpus / key).is_file() else None
        scores.append(score_file(key, entry, outcome))
    return scores


def percent(part: int, whole: int) -> str:
    return f"{round(100 * part / whole)}%" if whole else "-"


def totals(scores: list[FileScore]) -> dict[str, Any]:
    scored = [s for s in scores if not s.missing]
    expected = sum(len(s.expected) for s in scored)
    found = sum(len(s.found) for s in scored)
    floating_expected = sum(s.floating_expected for s in scored)
    floating_found = sum(s.floating_found for s in scored)
    right = sum(s.right for s in scored)
    wrong = sum(len(s.wrong) for s in scored)
    release = [s.release_right for s in scored if s.release_right is not None]
    return {
        "files": len(scored),
        "missing": [s.key for s in scores if s.missing],
        "expected": expected,
        "found": found,
        "under_rated": sum(len(s.under_rated) for s in scored),
        "expected_without_floating": expected - floating_expected,
        "found_without_floating": found - floating_found,
        "configuration_findings": sum(s.configuration_findings for s in scored),
        "right": right,
        "wrong": wrong,
        "not_judged": sum(len(s.unmatched) for s in scored),
        "unreadable": sum(s.unreadable for s in scored),
        "release_right": sum(release),
        "release_judged": len(release),
        "advisories": sum(s.advisories for s in scored),
    }


def missed_most_often(scores: list[FileScore]) -> list[tuple[str, int]]:
    counts = collections.Counter(must for s in scores if not s.missing for must in s.missed)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


# -- output ------------------------------------------------------------------------------------


def cell(text: str) -> str:
    return one_line(text).replace("|", "\\|") or "-"


def cells(items: list[str]) -> str:
    return "<br>".join(cell(i) for i in items) or "-"


def totals_table(t: dict[str, Any]) -> list[str]:
    judged = t["right"] + t["wrong"]
    rows = [
        ("files", str(t["files"])),
        ("files missing from the corpus (not scored)", str(len(t["missing"]))),
        ("real problems expected", str(t["expected"])),
        ("found (at any severity)", f"{t['found']} ({percent(t['found'], t['expected'])})"),
        ("of which under-rated (info only)", str(t["under_rated"])),
        (
            "without the floating-tag class: found / expected",
            f"{t['found_without_floating']} / {t['expected_without_floating']} "
            f"({percent(t['found_without_floating'], t['expected_without_floating'])})",
        ),
        ("configuration findings at warning or above", str(t["configuration_findings"])),
        ("right", str(t["right"])),
        ("wrong", str(t["wrong"])),
        ("not judged", str(t["not_judged"])),
        ("precision (right / judged)", percent(t["right"], judged)),
        ("unreadable files", str(t["unreadable"])),
        (
            "release read right (answered files whose vLLM release is stated, or unstated and assumed newest)",
            f"{t['release_right']} / {t['release_judged']}",
        ),
        ("advisory findings (counted apart)", str(t["advisories"])),
    ]
    return ["| measure | value |", "| --- | --- |", *(f"| {name} | {value} |" for name, value in rows)]


def file_row(s: FileScore) -> str:
    if s.missing:
        return f"| {s.key} | {cell(s.release_expected)} | missing | {len(s.expected)} | - | - | - | - | missing |"
    mark = {True: " ✓", False: " ✗", None: ""}[s.release_right]
    found = [f"{must} (info only)" if must in s.under_rated else must for must in s.found]
    columns = [
        s.key,
        cell(s.release_expected),
        cell(s.release_read) + mark,
        str(len(s.expected)),
        cells(found),
        cells(s.missed),
        cells(s.wrong),
        str(s.right),
        "yes" if s.unreadable else "-",
    ]
    return "| " + " | ".join(columns) + " |"


def markdown(scores: list[FileScore], run: str) -> str:
    t = totals(scores)
    header = (
        "| file | release expected | release read | expected | found | missed | wrong findings "
        "| right findings | unreadable |"
    )
    lines = [
        "# Scoreboard: the review on the real-deployment corpus",
        "",
        f"The review ({run}) was run on each of the {len(scores)} files of `EXPECTATIONS.yaml`, one file at",
        "a time, as `vllm-caching review FILE --format json` reviews it. How a finding is matched to an",
        "expectation, and what counts as wrong or unreadable, is in `README.md`. Findings at warning or",
        'above that matched neither a `must` nor a `must_not` entry are listed under "Not judged", for',
        "judgement by hand against the file and the released code.",
        "",
        "## Totals",
        "",
        *totals_table(t),
        "",
        "## Per file",
        "",
        header,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *(file_row(s) for s in scores),
        "",
        *unreadable_section(scores),
        *not_judged_section(scores),
        *missed_section(scores),
    ]
    return "\n".join(lines) + "\n"


def unreadable_section(scores: list[FileScore]) -> list[str]:
    rows = [f"| {s.key} | {cell(s.why_unreadable or '')} |" for s in scores if s.unreadable]
    if not rows:
        return []
    return ["## Unreadable", "", "| file | why |", "| --- | --- |", *rows, ""]


def not_judged_section(scores: list[FileScore]) -> list[str]:
    rows = [
        f"| {s.key} | {cell(u.finding)} | {u.severity} | {cell(u.title)} | {cell(clip(u.message))} |"
        for s in scores
        for u in s.unmatched
    ]
    if not rows:
        return []
    intro = "Findings that matched neither a `must` nor a `must_not` entry by line and keyword:"
    head = ["## Not judged", "", intro, ""]
    return [*head, "| file | finding | severity | title | message |", "| --- | --- | --- | --- | --- |", *rows, ""]


def missed_section(scores: list[FileScore]) -> list[str]:
    rows = [f"| {must} | {count} |" for must, count in missed_most_often(scores)]
    if not rows:
        return []
    return ["## Missed, by expected problem", "", "| must id | files that miss it |", "| --- | --- |", *rows, ""]


def clip(text: str, limit: int = 240) -> str:
    text = one_line(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def as_json(scores: list[FileScore], run: str) -> str:
    data = {
        "run": run,
        "totals": totals(scores),
        "missed_most_often": [{"id": must, "files": count} for must, count in missed_most_often(scores)],
        "files": [dataclasses.asdict(s) for s in scores],
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--corpus", required=True, type=Path, help="directory holding each file under its key")
    parser.add_argument("--expectations", type=Path, default=DEFAULT_EXPECTATIONS, help="EXPECTATIONS.yaml")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of markdown")
    parser.add_argument("--run", default=f"vllm-caching-mcp {__version__}", help="what was run, for the header")
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        print(f"score_real_deployments: --corpus: {args.corpus} is not a directory", file=sys.stderr)
        return 2
    try:
        expectations = load_expectations(args.expectations)
    except ExpectationsError as exc:
        print(f"score_real_deployments: {exc}", file=sys.stderr)
        return 2
    scores = score_corpus(args.corpus, expectations)
    print(as_json(scores, args.run) if args.json else markdown(scores, args.run), end="")
    missing = [s.key for s in scores if s.missing]
    for key in missing:
        print(f"score_real_deployments: {key}: missing from {args.corpus}, not scored", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
