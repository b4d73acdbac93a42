"""Refresh the stored `snapshot` of every bug in knowledge/bugs.yaml from the GitHub API.

    python scripts/refresh_bugs.py                 # show the changes as a unified diff
    python scripts/refresh_bugs.py --write         # ... and write them
    python scripts/refresh_bugs.py --bug LMCache/LMCache#2942 --write

Only each entry's ``snapshot:`` block is rewritten (state, state_reason, closed_at, closed_by,
checked_at, linked_pulls); every other line, comment and the order of entries stay as they are,
because the file is edited as text rather than re-dumped. New linked pull requests are appended
after the stored ones. The result is validated against the knowledge schema before anything is
written. A bug GitHub cannot answer for now (offline, rate-limited, ...) is left untouched and
reported; the exit status is then 1.

Settings come from the environment as for the tool: GITHUB_TOKEN / GH_TOKEN (GraphQL, one request
for all bugs), VLLM_CACHING_MCP_GITHUB_API (GitHub Enterprise), VLLM_CACHING_MCP_CACHE_DIR.
"""

from __future__ import annotations

import argparse
import datetime as dt
import difflib
import os
import re
import sys
import tempfile
from pathlib import Path

import yaml
from pydantic import ValidationError

from vllm_caching_mcp.github import (
    ConfigError,
    Deadline,
    GitHubClient,
    GitHubError,
    InvalidReference,
    IssueRef,
    IssueStatus,
    parse_issue_ref,
)
from vllm_caching_mcp.knowledge import FILES, Bug
from vllm_caching_mcp.knowledge_files import knowledge_dir

_PLAIN = re.compile(r"^[A-Za-z0-9][\w.\-\[\]]*$")


def _scalar(text: str) -> str:
    """A YAML scalar as the file writes them: plain when safe, else double-quoted."""
    if _PLAIN.match(text) and text.lower() not in ("null", "true", "false", "yes", "no", "on", "off"):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_snapshot(bug: Bug, live: IssueStatus, today: dt.date) -> str:
    """The new ``snapshot:`` block, indented as in bugs.yaml."""
    lines = ["    snapshot:", f"      state: {live.state}"]
    if live.state_reason and (live.state == "closed" or live.state_reason == "reopened"):
        lines.append(f"      state_reason: {live.state_reason}")
    if live.state == "closed" and live.closed_at is not None:
        lines.append(f"      closed_at: {live.closed_at.date().isoformat()}")
    if live.state == "closed" and live.closed_by:
        lines.append(f"      closed_by: {_scalar(live.closed_by)}")
    lines.append(f"      checked_at: {today.isoformat()}")
    now = {p.ref: p.merged for p in live.pulls}
    pulls: list[tuple[str, bool | None]] = [
        (p.ref, now[p.ref] if now.get(p.ref) is not None else p.merged) for p in bug.snapshot.linked_pulls
    ]
    stored = {ref for ref, _ in pulls}
    pulls += [(p.ref, p.merged) for p in live.pulls if p.ref not in stored]
    if pulls:
        lines.append("      linked_pulls:")
        for ref, merged in pulls:
            flag = "null" if merged is None else str(merged).lower()
            lines.append(f"        - {{ref: '{ref}', merged: {flag}}}")
    return "\n".join(lines) + "\n"


def replace_snapshot(text: str, bug: Bug, block: str) -> str:
    """``text`` with the snapshot block of ``bug``'s entry replaced by ``block``."""
    entry = re.search(rf"^  - repo: {re.escape(bug.repo)}\n    number: {bug.number}\n", text, flags=re.MULTILINE)
    if entry is None:
        raise ValueError(f"{bug.id}: entry not found as '- repo:' followed by 'number:'")
    next_entry = re.compile(r"^  - ", re.MULTILINE).search(text, entry.end())
    end_of_entry = next_entry.start() if next_entry else len(text)
    start = re.compile(r"^    snapshot:\n", re.MULTILINE).search(text, entry.end(), end_of_entry)
    if start is None:
        raise ValueError(f"{bug.id}: entry has no 'snapshot:' block")
    # The block ends at the next line indented four spaces or less (the entry's next key).
    after = re.compile(r"^(?: {0,4}\S)", re.MULTILINE).search(text, start.end(), end_of_entry)
    stop = after.start() if after else end_of_entry
    return text[: start.start()] + block + text[stop:]


def _issue_ref(bug: Bug) -> IssueRef:
    owner, repo = bug.repo.split("/")  # the schema holds it to owner/repo
    return IssueRef(owner, repo, bug.number)


def refresh(
    path: Path, client: GitHubClient, *, only: list[IssueRef], deadline: float, today: dt.date
) -> tuple[str, str, list[str]]:
    """(old text, new text, problems) for bugs.yaml at ``path``."""
    old = path.read_text(encoding="utf-8")
    document = yaml.safe_load(old)
    FILES["bugs.yaml"].model_validate(document)  # the whole file, as the loader checks it
    bugs = [Bug.model_validate(b) for b in document["bugs"]]
    selected = [b for b in bugs if not only or _issue_ref(b) in only]
    refs = [_issue_ref(b) for b in selected]
    statuses = client.issue_statuses(refs, Deadline(deadline), max_age=0)
    new = old
    problems: list[str] = []
    for bug, ref in zip(selected, refs, strict=True):
        live = statuses[ref]
        if isinstance(live, GitHubError):
            problems.append(f"{bug.id}: not refreshed ({live.reason}: {live.detail})")
        elif live.origin != "live":
            why = live.fallback.reason if live.fallback else "cached"
            problems.append(f"{bug.id}: not refreshed (GitHub did not answer: {why})")
        else:
            new = replace_snapshot(new, bug, render_snapshot(bug, live, today))
    missing = {str(r) for r in only} - {str(r) for r in refs}
    problems += [f"{ref}: not tracked in {path.name}" for ref in sorted(missing)]
    FILES["bugs.yaml"].model_validate(yaml.safe_load(new))  # never write a file the loader would refuse
    return old, new, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Refresh bug snapshots in knowledge/bugs.yaml from GitHub.")
    parser.add_argument("--file", type=Path, default=knowledge_dir() / "bugs.yaml", help="the bugs.yaml to refresh")
    parser.add_argument("--bug", action="append", default=[], help="only this issue (owner/repo#N); repeatable")
    parser.add_argument("--write", action="store_true", help="write the changes (default: only show the diff)")
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds allowed for GitHub (default 60)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="response cache directory")
    args = parser.parse_args(argv)
    try:
        only = [parse_issue_ref(text) for text in args.bug]
        client = GitHubClient.from_env(cache_dir=args.cache_dir)
    except (InvalidReference, ConfigError) as exc:
        print(f"refresh_bugs: {exc}", file=sys.stderr)
        return 2
    try:
        with client:
            old, new, problems = refresh(
                args.file, client, only=only, deadline=args.deadline, today=dt.datetime.now(dt.UTC).date()
            )
    except (OSError, ValueError, ValidationError) as exc:
        print(f"refresh_bugs: {args.file}: {exc}", file=sys.stderr)
        return 2
    diff = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), str(args.file), str(args.file) + " (GitHub now)"
    )
    sys.stdout.writelines(diff)
    for problem in problems:
        print(f"refresh_bugs: {problem}", file=sys.stderr)
    if new == old:
        print("refresh_bugs: no changes", file=sys.stderr)
    elif args.write:
        fd, tmp = tempfile.mkstemp(dir=args.file.parent, prefix=".bugs-", suffix=".yaml")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(new)
        os.replace(tmp, args.file)
        print(f"refresh_bugs: wrote {args.file}", file=sys.stderr)
    else:
        print("refresh_bugs: not written; run again with --write", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
