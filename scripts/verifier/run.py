"""Running the planned checks release by release, and each fact's verdict."""

from __future__ import annotations

import fnmatch
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from vllm_caching_mcp.knowledge import PRESENCE_PROBES, Knowledge, ReleaseMetadata
from vllm_caching_mcp.versions import Version

from .download import download, locate
from .plan import AdvisoryFact, Check, Fact, ReleaseMetadataFact, plan, read_in_wheels
from .probes import observe
from .source import NotCheckable, SourceTree

PACKAGES = ("vllm", "lmcache")


def _gone_from_the_fixed_side(check: Check, tree: SourceTree) -> bool:
    """Vulnerable code missing from a file that is gone says nothing about the fix."""
    return (
        isinstance(check.entry, AdvisoryFact)
        and check.expected is False
        and bool(check.probe.files)
        and not tree.glob(check.probe.files)
    )


def run_check(check: Check, tree: SourceTree) -> None:
    if isinstance(check.expected, NotCheckable):
        check.status, check.reason = "unknown", str(check.expected)
        return
    if _gone_from_the_fixed_side(check, tree):
        check.status, check.reason = "unknown", f"none of {', '.join(check.probe.files)} is in {tree.version}"
        return
    try:
        observed = observe(tree, check.probe, check.entry.name, check.entry.aliases)
    except NotCheckable as exc:
        check.status, check.reason = "unknown", str(exc)
        return
    check.observed = observed
    if check.probe.kind == "literal":
        # The schema keeps accepted values as strings; `Literal[1, 8, 16]` holds ints.
        agrees = {str(v) for v in observed.value} == {str(v) for v in check.expected}
    elif check.probe.kind == "env_default" and isinstance(observed.value, str):
        agrees = _same(_as_env(observed.value, check.expected), check.expected)
    else:
        agrees = _same(observed.value, check.expected)
    check.status = "pass" if agrees else "fail"
    if not agrees:
        presence = check.probe.kind in PRESENCE_PROBES
        seen = ("present" if observed.value else "absent") if presence else repr(observed.value)
        check.reason = f"the knowledge says {check.label}, the wheel has {seen}"


def _as_env(raw: str, expected: Any) -> Any:
    """An environment variable's default string read the way the fact states it (bool, int, float)."""
    try:
        if isinstance(expected, bool):
            return {"1": True, "true": True, "0": False, "false": False, "": False}.get(raw.strip().lower(), raw)
        if isinstance(expected, int):
            return int(raw)
        if isinstance(expected, float):
            return float(raw)
    except ValueError:
        pass
    return raw


def _same(observed: Any, expected: Any) -> bool:
    if isinstance(observed, list | tuple) and isinstance(expected, list | tuple):
        return list(observed) == list(expected)
    if isinstance(observed, bool) or isinstance(expected, bool):
        return observed is expected
    return bool(observed == expected)


@dataclass
class Verdict:
    entry: Fact
    file: str
    checks: list[Check] = field(default_factory=list)

    @property
    def status(self) -> str:
        if any(c.status == "fail" for c in self.checks):
            return "contradicted"
        if any(c.status == "pass" for c in self.checks):
            return "verified"
        return "not_checkable"

    @property
    def versions(self) -> list[str]:
        return [str(v) for v in sorted({c.version for c in self.checks if c.status != "unknown"})]

    def newest_evidence(self) -> Check | None:
        passing = [c for c in self.checks if c.status == "pass" and c.observed and c.observed.line and c.observed.value]
        return max(passing, key=lambda c: c.version) if passing else None

    def detail(self) -> str:
        if self.status == "contradicted":
            return "; ".join(f"{c.describe()}: {c.reason}" for c in self.checks if c.status == "fail")
        if self.status == "not_checkable":
            reasons = sorted({c.reason for c in self.checks if c.reason})
            if not reasons and isinstance(self.entry, AdvisoryFact):
                return "the range's end was read in the wheels but has no probe"
            return "; ".join(reasons) or "no probe applies (a feature or a kind without an implied probe)"
        unknown = sorted({c.reason for c in self.checks if c.status == "unknown"})
        return ("partly unchecked: " + "; ".join(unknown)) if unknown else ""


def entry_files(knowledge_root: Path) -> dict[str, str]:
    """Entry id -> the knowledge file it is written in."""
    files: dict[str, str] = {}
    for path in sorted(knowledge_root.glob("*.yaml")):
        for match in re.finditer(r"^\s*- id: ['\"]?([\w.+-]+)", path.read_text(encoding="utf-8"), re.MULTILINE):
            files.setdefault(match.group(1), path.name)
    return files


def facts_to_verify(knowledge: Knowledge, only: list[str] | None) -> list[Verdict]:
    """An empty verdict for every fact a probe can check (those ``only`` matches, when given)."""
    where = entry_files(Path(knowledge.directory))
    verdicts = [Verdict(e, where.get(e.id, "?")) for e in knowledge.gated()]
    verdicts += [
        Verdict(AdvisoryFact(a), "advisories.yaml")
        for a in knowledge.advisories.advisories
        if a.package in PACKAGES and read_in_wheels(a)
    ]
    verdicts += [
        Verdict(ReleaseMetadataFact(line, field), "releases.yaml")
        for package, line in knowledge.releases.items()
        for field in get_args(ReleaseMetadata)
        if package in PACKAGES and any(getattr(r, field) for r in line.releases)
    ]
    if only:
        verdicts = [v for v in verdicts if any(fnmatch.fnmatchcase(v.entry.id, p) for p in only)]
    return verdicts


def verify(
    knowledge: Knowledge,
    newest: dict[str, Version],
    directories: list[Path],
    *,
    fetch: bool,
    log: Callable[[str], object] = print,
    only: list[str] | None = None,
) -> tuple[list[Verdict], dict[str, list[str]]]:
    """The verdicts, and the releases (by package) whose wheels were missing; downloads into the last directory."""
    releases = {pkg: [v for v in knowledge.release_versions(pkg) if v <= newest[pkg]] for pkg in newest}
    verdicts = facts_to_verify(knowledge, only)
    by_release: dict[tuple[str, Version], list[Check]] = defaultdict(list)
    for verdict in verdicts:
        verdict.checks = plan(verdict.entry, releases)
        for check in verdict.checks:
            by_release[(check.package, check.version)].append(check)
    missing: dict[str, list[str]] = defaultdict(list)
    for (package, version), checks in sorted(by_release.items()):
        location = locate(package, str(version), directories)
        if location is None and fetch:
            log(f"downloading {package}=={version} into {directories[-1]}")
            location = download(package, str(version), directories[-1])
        if location is None:
            missing[package].append(str(version))
            for check in checks:
                check.status, check.reason = "unknown", f"no wheel for {package} {version}"
            continue
        tree = SourceTree(package, str(version), location)
        try:
            for check in checks:
                run_check(check, tree)
        finally:
            tree.close()
    return verdicts, missing


def checked_versions(verdicts: list[Verdict]) -> dict[str, list[str]]:
    seen: dict[str, set[Version]] = defaultdict(set)
    for verdict in verdicts:
        for check in verdict.checks:
            if check.observed is not None:
                seen[check.package].add(check.version)
    return {pkg: [str(v) for v in sorted(vs)] for pkg, vs in sorted(seen.items())}
