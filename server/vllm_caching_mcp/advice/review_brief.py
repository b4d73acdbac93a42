"""A review as its default answer carries it: the same finding once, however many workloads share it, and
the whole answer bounded, however large the input.

A review of a 208-workload manifest answered 3.6 MB: each finding once per workload (208 copies of
the same advisory), every workload's report, every rule not checked per workload. An agent reads
the answer in its context; a CI job that wants every finding asks the CLI (which reviews in full,
for SARIF) or `detail: full`. Here the findings that say the same thing (rule, severity, message,
fix) become one, with how many places have it and the first few of them; every list is cut to
keep the JSON within MAX_ANSWER_BYTES (the findings last, the most severe kept), and what is left
out is counted and said.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .review_models import Finding, NotChecked, ReviewResult

MAX_ANSWER_BYTES = 20 * 1024  # the JSON; the text, derived from the same lists, adds about half: ~30 KB in all
PLACES_LISTED = 5  # of a finding many workloads share: the first, and this many more
_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def in_brief(result: ReviewResult) -> ReviewResult:
    """``result`` with its findings grouped and every list cut to fit MAX_ANSWER_BYTES, the cuts counted."""
    grouped = {"findings": _grouped(result.findings), "not_checked": _grouped_not_checked(result.not_checked)}
    brief = result.model_copy(update=grouped)
    if _size(brief) <= MAX_ANSWER_BYTES:
        return brief
    # The workload reports and the rules not checked get a share each; the findings the rest, most
    # severe first, so that what is cut is never more severe than what is kept.
    for field, share in _SHARES.items():
        brief = _cut_to(brief, field, _within(field, share))
    ranked = sorted(brief.findings, key=lambda f: _SEVERITY_ORDER[f.severity])
    brief = brief.model_copy(update={"findings": ranked})
    return _cut_to(brief, "findings", lambda cut: _size(cut) <= MAX_ANSWER_BYTES)


# Bytes of JSON the workload reports and the rules not checked may take when an answer must be cut.
_SHARES = {"workloads": 3 * 1024, "not_checked": 2 * 1024}


def _grouped(findings: Sequence[Finding]) -> list[Finding]:
    from .review_models import FindingPlace

    groups: dict[tuple[str, str, str, str], list[Finding]] = {}
    for finding in findings:
        groups.setdefault((finding.rule_id, finding.severity, finding.message, finding.fix), []).append(finding)
    merged = []
    for same in groups.values():
        first, others = same[0], same[1:]
        places = [FindingPlace(location=f.location, workload=f.workload) for f in others[:PLACES_LISTED]]
        merged.append(first.model_copy(update={"occurrences": len(same), "also_at": places}))
    return merged


def _grouped_not_checked(entries: Sequence[NotChecked]) -> list[NotChecked]:
    groups: dict[tuple[str, tuple[str, ...]], list[NotChecked]] = {}
    for entry in entries:
        groups.setdefault((entry.rule_id, tuple(entry.needs)), []).append(entry)
    return [
        same[0]
        if len(same) == 1
        else same[0].model_copy(update={"workload": f"{same[0].workload} and {len(same) - 1} more"})
        for same in groups.values()
    ]


def _within(field: str, share: int) -> Callable[[ReviewResult], bool]:
    return lambda result: _bytes(result, field) <= share


def _size(result: ReviewResult) -> int:
    return result.structured_bytes()


def _bytes(result: ReviewResult, field: str) -> int:
    return len(json.dumps([item.model_dump(mode="json") for item in getattr(result, field)]).encode())


def _cut_to(result: ReviewResult, field: str, fits: Callable[[ReviewResult], bool]) -> ReviewResult:
    """``result`` with the most entries of ``field`` (from the front) for which ``fits``; the rest counted."""
    items = getattr(result, field)
    counter = f"{field}_left_out"

    def kept(n: int) -> ReviewResult:
        return result.model_copy(update={field: items[:n], counter: getattr(result, counter) + len(items) - n})

    if fits(result):
        return result
    return kept(_largest_fitting(len(items), lambda n: fits(kept(n))))


def _largest_fitting(count: int, fits: Callable[[int], bool]) -> int:
    """The largest n in [0, count] with fits(n) (fits is monotone: fewer entries, a smaller answer)."""
    low, high = 0, count
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


__all__ = ["MAX_ANSWER_BYTES", "in_brief"]
