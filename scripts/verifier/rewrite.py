"""``--update``: refresh ``verified_at`` and the newest source pointer of verified facts in the YAML, in place.

The files are edited as text, line by line, so their comments and layout stay as written.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from pathlib import Path

from vllm_caching_mcp.knowledge import Gated, Knowledge
from vllm_caching_mcp.versions import SpecifierSet, Version

from .plan import Check, ranged_fields
from .run import Verdict

# A source line citing a wheel: (prefix "  - ", package, version, path).
WHEEL_SOURCE = re.compile(r"^(\s*- )wheel:(\w+)==([^:]+):([^:]+)")


def _entry_block(lines: list[str], entry_id: str) -> tuple[int, int, str] | None:
    """(first line, end line, key indent) of the entry written as ``- id: entry_id``."""
    start = next(
        (i for i, line in enumerate(lines) if re.match(rf"^(\s*)- id: ['\"]?{re.escape(entry_id)}['\"]?\s*$", line)),
        None,
    )
    if start is None:
        return None
    dash = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines):
        line = lines[end]
        indent = len(line) - len(line.lstrip())
        if line.strip() and (indent < dash or (indent == dash and line.lstrip().startswith("- "))):
            break
        end += 1
    return start, end, " " * (dash + 2)


def boundary_versions(entry: Gated, checks: list[Check], releases: list[Version]) -> set[Version]:
    """Releases whose sources witness a boundary (either side): never rewritten by --update."""
    points = {v for v in (entry.introduced, entry.deprecated, entry.removed) if v}
    points |= {c.version for c in entry.changes}
    for ranges in ranged_fields(entry).values():
        for ranged in ranges:
            points |= {Version(s.version) for s in SpecifierSet(ranged.versions)}
    protected = {c.version for c in checks} - {max((c.version for c in checks), default=Version("0"))}
    for point in points:
        protected.add(point)
        earlier = [v for v in releases if v < point]
        if earlier:
            protected.add(earlier[-1])
    return protected


def _point_to_newest(lines: list[str], items: list[int], best: Check, pointer: str, keep: set[Version]) -> list[str]:
    """Replace the newest citation of the same file (unless it witnesses a boundary), else add ``pointer``."""
    assert best.observed is not None
    cited = [(n, m) for n in items if (m := WHEEL_SOURCE.match(lines[n]))]
    if any(m.group(2) == best.package and Version(m.group(3)) >= best.version for _, m in cited):
        return lines  # already cites this release or a newer one
    same_path = [(n, m) for n, m in cited if m.group(2) == best.package and m.group(4) == best.observed.path]
    if same_path:
        n, m = max(same_path, key=lambda nm: Version(nm[1].group(3)))
        if Version(m.group(3)) not in keep:
            lines[n] = f"{m.group(1)}{pointer}"
            return lines
    prefix = re.match(r"^(\s*- )", lines[items[-1]])
    assert prefix is not None  # every item line starts so
    lines.insert(items[-1] + 1, f"{prefix.group(1)}{pointer}")
    return lines


def update_text(text: str, verdict: Verdict, entry: Gated, today: dt.date, releases: list[Version]) -> str:
    """Refresh ``verified_at`` and the newest source pointer of one verified entry, keeping layout."""
    lines = text.split("\n")
    block = _entry_block(lines, entry.id)
    if block is None:
        return text
    start, end, indent = block
    for i in range(start, end):
        if re.match(rf"^{indent}verified_at: ", lines[i]):
            lines[i] = f"{indent}verified_at: {today.isoformat()}"
    best = verdict.newest_evidence()
    header = next((i for i in range(start, end) if re.match(rf"^{indent}sources:\s*$", lines[i])), None)
    if best is None or best.observed is None or best.observed.where is None or header is None:
        return "\n".join(lines)
    items = []
    i = header + 1
    while i < end and re.match(rf"^{indent}\s*- ", lines[i]):
        items.append(i)
        i += 1
    if not items:
        return "\n".join(lines)
    pointer = f"wheel:{best.package}=={best.version}:{best.observed.where}"
    keep = boundary_versions(entry, verdict.checks, releases)
    return "\n".join(_point_to_newest(lines, items, best, pointer, keep))


def apply_updates(root: Path, verdicts: list[Verdict], today: dt.date, knowledge: Knowledge) -> int:
    """Rewrite the knowledge files under ``root`` for the verified facts; the number of files changed."""
    by_file: dict[str, list[tuple[Verdict, Gated]]] = defaultdict(list)
    for v in verdicts:
        # An advisory's wheel probe checks only where its range ends, not the rest of the entry.
        if v.status == "verified" and isinstance(v.entry, Gated):
            by_file[v.file].append((v, v.entry))
    changed = 0
    for name, chosen in by_file.items():
        path = root / name
        original = text = path.read_text(encoding="utf-8")
        for verdict, entry in chosen:
            text = update_text(text, verdict, entry, today, knowledge.release_versions(entry.component))
        if text != original:
            path.write_text(text, encoding="utf-8")
            changed += 1
    return changed
