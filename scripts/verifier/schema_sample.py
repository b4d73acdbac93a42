"""A random sample of knowledge/engine_schema.yaml probed against the wheels, at its run's boundaries.

The schema is generated from the wheels by scripts/build_engine_schema.py; this is a second reading by a
different method (the text of the cited line, and a search of the files at the boundary), so a fault in
the generator's ast reading shows as a contradiction here rather than passing as fact. For each sampled
entry: the cited file and line in the release its source names must contain the name; in the first
release read without it (``removed``, or the release read before ``introduced``) the files where it was
read must not (a release without an extracted tree or wheel is not checkable).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from vllm_caching_mcp.knowledge import EngineSchema, SchemaEntry
from vllm_caching_mcp.versions import Version

from .source import SourceTree

Locate = Callable[[str, str], SourceTree | None]
EXTRA_DIRS = ("vllm/distributed/kv_transfer/kv_connector/v1/*", "vllm/v1/kv_offload/*")


@dataclass(frozen=True)
class SchemaCheck:
    entry: str
    release: str
    expect: str  # "present" or "absent"
    status: str  # "pass", "fail" or "unknown"
    where: str

    def line(self) -> str:
        return f"  {self.status:7} {self.entry}: {self.expect} in {self.release} ({self.where})"


def _label(entry: SchemaEntry) -> str:
    if entry.key is not None:
        return f"extra_config {','.join(entry.connectors or ()) or '*'}.{entry.key}"
    if entry.config is not None:
        return f"{entry.config}.{entry.name}"
    return f"{entry.package} {entry.name}"


def _files(entry: SchemaEntry, tree: SourceTree) -> list[str]:
    """Where the name would be read in ``tree``: the cited file, and for an extra-config key every file that
    reads an extra config (the key may move between files)."""
    path = entry.source.split(":")[2]
    if entry.key is not None:
        return tree.containing(EXTRA_DIRS, "extra_config")
    if entry.package == "lmcache":
        return [p for p in dict.fromkeys((path, "lmcache/v1/config.py")) if tree.text(p) is not None]
    return [path] if tree.text(path) is not None else []


def _scope(entry: SchemaEntry, text: str) -> str:
    """Where a config field would be declared: the body of its class (a module holds several, and a field can
    move between them: ParallelConfig.num_redundant_experts to EPLBConfig); any other name: the whole file."""
    if entry.config is None:
        return text
    start = re.search(rf"^class {re.escape(entry.config)}\b.*$", text, re.MULTILINE)
    if start is None:
        return ""
    end = re.search(r"^\S", text[start.end() + 1 :], re.MULTILINE)
    return text[start.end() : start.end() + 1 + end.start()] if end else text[start.end() :]


def _pattern(entry: SchemaEntry) -> re.Pattern[str]:
    """How the name is written where it is read: a field declaration, a quoted key, a key of envs.py's table."""
    if entry.config is not None:
        return re.compile(rf"^\s+{re.escape(entry.name or '')}\s*:", re.MULTILINE)
    if entry.key is None and entry.package == "vllm":  # a variable of vllm/envs.py's environment_variables
        return re.compile(rf"""^\s+["']{re.escape(entry.name or "")}["']\s*:""", re.MULTILINE)
    if entry.key is None:  # an LMCache key: an entry of the key table, or a read of from_file's config
        name = re.escape(entry.name or "")
        return re.compile(rf"""["']{name}["']\s*:\s*\{{|\.get\(\s*["']{name}["']""")
    return re.compile(rf"""["']{re.escape(entry.key)}["']""")


def _present(entry: SchemaEntry, locate: Locate) -> SchemaCheck:
    _, release_text, path, line = entry.source.split(":", 1)[1].replace("==", ":", 1).split(":")
    package = entry.package
    tree = locate(package, release_text)
    label = _label(entry)
    if tree is None:
        return SchemaCheck(label, release_text, "present", "unknown", f"no {package} {release_text} wheel")
    text = tree.text(path) or ""
    lines = text.splitlines()[max(int(line) - 3, 0) : int(line) + 2]  # a call may span lines
    found = bool(_pattern(entry).search("\n".join(lines)))
    return SchemaCheck(label, release_text, "present", "pass" if found else "fail", f"{path}:{line}")


def _absent(entry: SchemaEntry, release: Version, locate: Locate) -> SchemaCheck:
    label = _label(entry)
    tree = locate(entry.package, str(release))
    if tree is None:
        return SchemaCheck(label, str(release), "absent", "unknown", f"no {entry.package} {release} wheel")
    hits = [p for p in _files(entry, tree) if _pattern(entry).search(_scope(entry, tree.text(p) or ""))]
    if entry.key is not None and entry.connectors:  # another connector may read the same key
        hits = [p for p in hits if _owned(p, entry)]
    return SchemaCheck(label, str(release), "absent", "fail" if hits else "pass", ", ".join(hits) or "not found")


def _owned(path: str, entry: SchemaEntry) -> bool:
    """Whether ``path`` is where the entry's connectors keep their code (the file its source cites, or its
    directory): a coarse stand-in for the generator's ownership rule."""
    cited = entry.source.split(":")[2]
    directory = cited.rsplit("/", 1)[0]
    return path == cited or (directory != EXTRA_DIRS[0][:-2] and path.rsplit("/", 1)[0] == directory)


def sample(schema: EngineSchema, locate: Locate, count: int, seed: int) -> list[SchemaCheck]:
    """``count`` entries drawn with ``seed``; each probed where its source says and at its boundaries."""
    pool = [*schema.config_fields, *schema.extra_config, *schema.lmcache_keys, *schema.vllm_env]
    picked = random.Random(seed).sample(pool, min(count, len(pool)))
    checks: list[SchemaCheck] = []
    for entry in picked:
        checks.append(_present(entry, locate))
        read = list(schema.releases_read[entry.package])
        if entry.removed is not None:
            checks.append(_absent(entry, entry.removed, locate))
        if entry.introduced is not None and entry.introduced in read and read.index(entry.introduced) > 0:
            checks.append(_absent(entry, read[read.index(entry.introduced) - 1], locate))
    return checks
