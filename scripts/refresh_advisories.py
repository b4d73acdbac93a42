"""Compare knowledge/advisories.yaml with the GitHub Advisory Database now.

    python scripts/refresh_advisories.py            # list what GitHub says differently
    python scripts/refresh_advisories.py --write    # ... and, when nothing differs, date the snapshot today

For each package (vllm, lmcache, nixl, mooncake-transfer-engine) the live list is read afresh (no
cache) and set against the stored entries: advisories GitHub lists that the snapshot lacks, stored
ones whose severity, CVSS or ranges GitHub now publishes differently, and stored ones GitHub has
withdrawn. Those need a person: a new advisory's conditions (`requires`, `applies`) and a paraphrased
title are written by hand, so nothing is added automatically. Only when GitHub agrees with every
stored entry does ``--write`` move the snapshot's ``checked_at`` to today (the date offline answers
report), editing that one line. Exit status: 0 when GitHub agrees, 1 when something differs or
GitHub could not be asked (nothing is written then), 2 on bad settings.

Settings come from the environment as for the tools: GITHUB_TOKEN / GH_TOKEN, VLLM_CACHING_MCP_GITHUB_API.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
import tempfile
import typing
from pathlib import Path

from vllm_caching_mcp import advisories
from vllm_caching_mcp.github import ConfigError
from vllm_caching_mcp.http_client import NETWORK_DOWN
from vllm_caching_mcp.knowledge import Advisory, AdvisoryPackage, load_knowledge


def differences(stored: Advisory, live: Advisory) -> list[str]:
    """What GitHub publishes differently for one stored advisory (conditions are ours, not compared)."""
    found = []
    if stored.severity != live.severity:
        found.append(f"severity {stored.severity} -> {live.severity}")
    if {c.vector for c in stored.cvss} - {c.vector for c in live.cvss} and live.cvss:
        found.append(f"cvss {[c.vector for c in stored.cvss]} -> {[c.vector for c in live.cvss]}")
    if [(r.affected, r.fixed_in) for r in stored.ranges] != [(r.affected, r.fixed_in) for r in live.ranges]:
        found.append(
            f"ranges {[(r.affected, r.fixed_in) for r in stored.ranges]} -> "
            f"{[(r.affected, r.fixed_in) for r in live.ranges]}"
        )
    return found


def report(knowledge_dir: str | None, deadline: float) -> tuple[list[str], list[str]]:
    """(differences, problems) over every package."""
    knowledge = load_knowledge(knowledge_dir)
    changed: list[str] = []
    problems: list[str] = []
    for package in typing.get_args(AdvisoryPackage):
        answer = advisories.current_advisories(knowledge, package, deadline_seconds=deadline, max_age=0)
        if answer.provenance.source != "live":
            problems.append(f"{package}: GitHub not asked ({answer.provenance.text()}: {answer.provenance.detail})")
            if answer.provenance.fallback_reason in NETWORK_DOWN:  # the next package would wait as long
                problems.append("the other packages: not asked, GitHub is out of reach")
                break
            continue
        stored = {i: a for a in advisories.stored(knowledge, package) for i in (a.ghsa, a.cve) if i}
        for advisory in answer.advisories:
            known = stored.get(advisory.ghsa or "") or stored.get(advisory.cve or "")
            if known is None:
                changed.append(
                    f"{package}: {advisory.id} ({advisory.cve or 'no CVE'}) is new: {advisory.severity}, "
                    f"{[(r.affected, r.fixed_in) for r in advisory.ranges]}; {advisory.title}"
                )
            elif known is not advisory:  # stored entries GitHub does not list come back as they are
                changed += [f"{package}: {advisory.id}: {d}" for d in differences(known, advisory)]
        changed += [f"{package}: {note}" for note in answer.notes if "withdrawn" in note]
    return changed, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compare knowledge/advisories.yaml with GitHub's advisories.")
    parser.add_argument("--knowledge-dir", default=None, help="the knowledge directory (default: the installed one)")
    parser.add_argument("--write", action="store_true", help="date the snapshot today when GitHub agrees")
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds allowed per package (default 60)")
    args = parser.parse_args(argv)
    try:
        changed, problems = report(args.knowledge_dir, args.deadline)
    except ConfigError as exc:
        print(f"refresh_advisories: {exc}", file=sys.stderr)
        return 2
    for line in changed:
        print(line)
    for problem in problems:
        print(f"refresh_advisories: {problem}", file=sys.stderr)
    if changed or problems:
        why = "the snapshot needs editing by hand first" if changed else "GitHub could not be asked"
        print(f"refresh_advisories: not written; {why}", file=sys.stderr)
        return 1
    print("refresh_advisories: GitHub agrees with the snapshot", file=sys.stderr)
    if args.write:
        path = Path(load_knowledge(args.knowledge_dir).directory) / "advisories.yaml"
        today = dt.datetime.now(dt.UTC).date().isoformat()
        text = re.sub(
            r"^checked_at: .*$", f"checked_at: {today}", path.read_text(encoding="utf-8"), count=1, flags=re.M
        )
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".advisories-", suffix=".yaml")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)
        print(f"refresh_advisories: dated {path} {today}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
