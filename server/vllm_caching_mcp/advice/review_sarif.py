"""The review as SARIF 2.1.0, for code-scanning pages: one rule a pitfall or advisory, one result a finding
or an unread launch."""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from .. import __version__
from .. import advisories as advisory_lookup
from ..knowledge import (
    Advisory,
    Knowledge,
    Pitfall,
)
from .review_advisories import ADVISORY_SEVERITY, advisory_rule_id
from .review_conditions import rules
from .review_models import ReviewResult

_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


# Not a rule about the configuration: the review's own report that it could not read a launch.
NOT_REVIEWED_RULE = "review.launch-not-read"


_NOT_REVIEWED_DESCRIPTOR = {
    "id": NOT_REVIEWED_RULE,
    "name": "LaunchNotRead",
    "shortDescription": {"text": "A vLLM launch the review cannot read"},
    "fullDescription": {
        "text": "The file names `vllm serve` or a vLLM entry point outside comments, but no server could be read "
        "from it (a construct the readers do not follow, such as eval or a command built at run time), so none "
        "of its settings were checked. A gate fails on it rather than passing what it did not see."
    },
    "help": {"text": "Write the launch as a plain command, or review the rendered command line instead."},
    "defaultConfiguration": {"level": "error"},
}


def to_sarif(result: ReviewResult, knowledge: Knowledge) -> dict[str, Any]:
    """The review as a SARIF 2.1.0 log, for code-scanning UIs (GitHub, GitLab, Azure DevOps)."""
    all_rules = rules(knowledge)
    index = {p.id: i for i, p in enumerate(all_rules)}
    descriptors = [
        {
            "id": p.id,
            "name": "".join(w.capitalize() for w in re.split(r"[^a-z0-9]+", p.id.split(".", 1)[-1])),
            "shortDescription": {"text": p.title},
            "fullDescription": {"text": " ".join(p.why.split())},
            "help": {"text": _rule_help(p)},
            "defaultConfiguration": {"level": _LEVEL[p.severity]},
            "properties": {"versions": p.versions or "all", "premises": list(p.premises), "sources": list(p.sources)},
        }
        for p in all_rules
    ]
    advisories_used: dict[str, Advisory] = {}
    by_rule = {advisory_rule_id(a): a for a in advisory_lookup.stored(knowledge, "vllm")}
    for f in result.findings:
        if f.rule_id in by_rule and f.rule_id not in advisories_used:
            advisories_used[f.rule_id] = by_rule[f.rule_id]
    for rule_id, a in advisories_used.items():
        index[rule_id] = len(descriptors)
        descriptors.append(_advisory_descriptor(rule_id, a))
    results = []
    for f in result.findings:
        physical: dict[str, Any] = {"artifactLocation": {"uri": urllib.parse.quote(f.location.file)}}
        if f.location.line:
            physical["region"] = {"startLine": f.location.line}
        location: dict[str, Any] = {"physicalLocation": physical}
        if f.location.path:
            location["logicalLocations"] = [{"fullyQualifiedName": f.location.path, "kind": "member"}]
        properties: dict[str, Any] = {"workload": f.workload}
        if f.rule_id in advisories_used:
            properties["tags"] = _advisory_tags(advisories_used[f.rule_id])
        results.append(
            {
                "ruleId": f.rule_id,
                "ruleIndex": index[f.rule_id],
                "level": _LEVEL[f.severity],
                "message": {"text": f"{f.message}. Fix: {f.fix}"},
                "locations": [location],
                "properties": properties,
            }
        )
    if result.not_reviewed:
        index[NOT_REVIEWED_RULE] = len(descriptors)
        descriptors.append(_NOT_REVIEWED_DESCRIPTOR)
    for unread in result.not_reviewed:
        region = {"region": {"startLine": unread.location.line}} if unread.location.line else {}
        results.append(
            {
                "ruleId": NOT_REVIEWED_RULE,
                "ruleIndex": index[NOT_REVIEWED_RULE],
                "level": "error",
                "message": {
                    "text": f"This file starts vLLM in a way the review cannot read ({unread.text}); "
                    "nothing in it was checked."
                },
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": urllib.parse.quote(unread.location.file)},
                            **region,
                        }
                    }
                ],
            }
        )
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "vllm-caching", "version": __version__, "rules": descriptors}},
                "results": results,
                "properties": {
                    "vllmVersions": sorted({w.vllm_version for w in result.workloads}),
                    "notChecked": [n.model_dump() for n in result.not_checked],
                },
            }
        ],
    }


def _rule_help(rule: Pitfall) -> str:
    """Why the rule holds, the fix and the sources, for a code-scanning UI that shows only this text."""
    return f"{' '.join(rule.why.split())} Fix: {' '.join(rule.fix.split())} Sources: {', '.join(rule.sources)}"


def _advisory_tags(a: Advisory) -> list[str]:
    return ["security", *(i for i in (a.cve, a.ghsa) if i)]


def _advisory_descriptor(rule_id: str, a: Advisory) -> dict[str, Any]:
    """A SARIF rule for one advisory: its ids as tags, its page as help, the CVSS score for code scanning."""
    page = next((s for s in a.sources if s.startswith("https://github.com/advisories/")), None)
    page = page or next((s for s in a.sources if s.startswith("https://")), None)
    properties: dict[str, Any] = {"tags": _advisory_tags(a), "sources": list(a.sources)}
    if a.cvss:
        properties["security-severity"] = f"{max(c.score for c in a.cvss):.1f}"
    descriptor: dict[str, Any] = {
        "id": rule_id,
        "name": "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", a.id)),
        "shortDescription": {"text": a.title},
        "fullDescription": {"text": f"{a.title}. Applies: {a.applies}"},
        "help": {"text": f"{' / '.join(i for i in (a.ghsa, a.cve) if i)}: {a.applies}"},
        "defaultConfiguration": {"level": _LEVEL[ADVISORY_SEVERITY[a.severity]]},
        "properties": properties,
    }
    if page is not None:
        descriptor["helpUri"] = page
    return descriptor
