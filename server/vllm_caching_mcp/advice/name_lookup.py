"""Names check_version does not track: the generated inventories, and a ranked search over every name.

The tracked entries (flags.yaml, connectors.yaml, ...) carry defaults, units and changes. Behind them,
two inventories generated from the wheels answer plain existence for everything else:
``cli_inventory.yaml`` (every ``vllm serve`` option) and ``name_inventory.yaml`` (every environment
variable vLLM reads, every LMCache config key, class names of the KV-caching packages). A name in
neither gets a definite "in no release" where an inventory is complete for its shape, and ranked
suggestions from every name the knowledge holds either way.
"""

from __future__ import annotations

import difflib
import re
from typing import Literal

from pydantic import BaseModel, Field

from ..knowledge import InventoryFlag, InventoryName, Knowledge, Setting, normalize_name
from ..versions import Version, as_text
from .common import PRODUCT_LABELS

InventoryStatus = Literal["available", "removed", "not_yet", "unknown"]
Shape = Literal["flag", "env_var", "class", "key", "text"]

_ENV_SHAPE = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$")
_CLASS_SHAPE = re.compile(r"^[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*$")
_KEY_SHAPE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)+$")
_KIND_WORDS = {
    "cli_flag": "`vllm serve` option",
    "env_var": "environment variable",
    "lmcache_config": "LMCache config key",
    "class": "class",
    "lmcache_server_option": "option of an LMCache server command",
}


class InventoryMatch(BaseModel):
    """A name found in a generated inventory: which releases have it, not what it does."""

    name: str
    kind: Literal["cli_flag", "env_var", "lmcache_config", "class", "lmcache_server_option"]
    package: Literal["vllm", "lmcache"]
    version: str = Field(description="the release of `package` this status is for")
    status: InventoryStatus = Field(description="unknown: the release is outside the releases whose wheels were read")
    answer: str = Field(description="the status in one sentence")
    introduced: str | None = Field(description="first release read that has it; null: already in the oldest read")
    removed: str | None
    env_name: str | None = Field(default=None, description="LMCache keys: the LMCACHE_* environment variable")
    alias_of: str | None = Field(default=None, description="LMCache: the current key a deprecated name maps to")
    where: str | None = Field(default=None, description="the file that defines or reads it (or the server command)")
    sources: list[str]


class Suggestion(BaseModel):
    name: str
    kind: str
    why: str = Field(description="what matched: the name, an accepted value, or words of the summary")


def shape_of(name: str) -> Shape:
    """What kind of name the text looks like; decides which inventory can answer "in no release"."""
    text = name.strip()
    if text.startswith("-"):
        return "flag"
    if _ENV_SHAPE.match(text):
        return "env_var"
    if _KEY_SHAPE.match(text):
        return "key"
    if _CLASS_SHAPE.match(text):
        return "class"
    return "text"


def _status(since: Version | None, until: Version | None, version: Version, read: list[Version]) -> InventoryStatus:
    if not read or version < read[0]:
        return "unknown"
    if since is not None and version < since:
        return "not_yet"
    if until is not None and version >= until:
        return "removed"
    return "available"


def _sentence(match: InventoryMatch, read: list[Version], version: Version, kind: str | None = None) -> str:
    """The match's status in one sentence; ``kind`` says what the name is where its kind's words do not."""
    label = PRODUCT_LABELS[match.package]
    what = f"{match.name} ({kind or _KIND_WORDS[match.kind]})"
    first, last = as_text(read[0]), as_text(read[-1])
    span = f"from {match.introduced or f'{first} (the oldest release read)'}"
    span += f" until {match.removed} (removed)" if match.removed else f" through {last} (the newest read)"
    alias = f"; a deprecated name LMCache maps to {match.alias_of}" if match.alias_of else ""
    env = f"; set it as the environment variable {match.env_name}" if match.env_name and match.kind != "env_var" else ""
    newer = f" (newer than {last}, the newest release read: answered as of {last})" if version > read[-1] else ""
    gap = "" if version in read or version < read[0] or version > read[-1] else f" ({version} itself was not read)"
    if match.status == "unknown":
        return f"{what}: unknown in {label} {version}, older than {first}, the oldest release read; it exists {span}."
    if match.status == "not_yet":
        return f"{what} is not in {label} {version}{gap}; it exists {span}{alias}."
    if match.status == "removed":
        return f"{what} is not in {label} {version}{gap}; it existed {span}{alias}."
    return f"{what} is in {label} {version}{newer}{gap}; it exists {span}{alias}{env}."


def inventory_matches(
    knowledge: Knowledge, name: str, versions: dict[str, tuple[Version, bool]]
) -> list[InventoryMatch]:
    """Every inventory entry called ``name``, with its status in the release of its package in ``versions``."""
    found: list[InventoryMatch] = []
    for flag in _flag_entries(knowledge, name):
        found.append(_flag_match(knowledge, flag, versions["vllm"][0]))
    names = knowledge.name_inventory
    for entry in names.find(name):
        read = list(names.releases_read.get(entry.package, ()))
        found.append(_name_match(entry, versions[entry.package][0], read))
    return found + _server_option_matches(knowledge, name, versions["lmcache"][0])


def _server_option_matches(knowledge: Knowledge, name: str, version: Version) -> list[InventoryMatch]:
    """The LMCache server commands that have (or had) an option of this spelling, each with its span."""
    text = name.strip()
    if not text.startswith("-"):
        return []
    read = knowledge.release_versions("lmcache")
    found = []
    for command, option in knowledge.lmcache_server_cli.options_named(text):
        introduced = option.introduced or command.introduced
        removed = option.removed or command.removed
        match = InventoryMatch(
            name=option.flag,
            kind="lmcache_server_option",
            package="lmcache",
            version=str(version),
            status=_status(introduced, removed, version, read),
            answer="",
            introduced=as_text(introduced),
            removed=as_text(removed),
            where=command.command,
            sources=list(knowledge.lmcache_server_cli.sources[:1]),
        )
        match.answer = _sentence(match, read, version, f"an option of `{command.command}`")
        found.append(match)
    return found


def _flag_entries(knowledge: Knowledge, name: str) -> tuple[InventoryFlag, ...]:
    text = name.strip()
    if " " in text or not re.fullmatch(r"-{0,2}[A-Za-z0-9][A-Za-z0-9_-]*", text):
        return ()
    return knowledge.cli_inventory.entries("--" + normalize_name(text.lstrip("-")))


def _flag_match(knowledge: Knowledge, flag: InventoryFlag, version: Version) -> InventoryMatch:
    read = knowledge.release_versions("vllm")
    match = InventoryMatch(
        name=flag.flag,
        kind="cli_flag",
        package="vllm",
        version=str(version),
        status=_status(flag.introduced, flag.removed, version, read),
        answer="",
        introduced=as_text(flag.introduced),
        removed=as_text(flag.removed),
        sources=list(knowledge.cli_inventory.sources[:2]),
    )
    match.answer = _sentence(match, read, version)
    return match


def _name_match(entry: InventoryName, version: Version, read: list[Version]) -> InventoryMatch:
    last_with_it = _before(read, entry.removed) if entry.removed else read[-1]
    match = InventoryMatch(
        name=entry.name,
        kind=entry.kind,
        package=entry.package,
        version=str(version),
        status=_status(entry.introduced, entry.removed, version, read),
        answer="",
        introduced=as_text(entry.introduced),
        removed=as_text(entry.removed),
        env_name=entry.env_name,
        alias_of=entry.alias_of,
        where=entry.where,
        sources=[f"wheel:{entry.package}=={last_with_it}:{entry.where}"],
    )
    match.answer = _sentence(match, read, version)
    return match


def _before(read: list[Version], version: Version) -> Version:
    """The newest release read before ``version``: the last that still has a removed name."""
    return max(v for v in read if v < version)


def absent_answer(knowledge: Knowledge, name: str) -> str | None:
    """ "In no release" for a name an inventory is complete for; None when the shape allows no such claim."""
    shape = shape_of(name)
    vllm_span = f"{knowledge.oldest('vllm')} to {knowledge.newest('vllm')}"
    names = knowledge.name_inventory
    lm_read = names.releases_read.get("lmcache", ())
    lm_span = f"{lm_read[0]} to {lm_read[-1]}" if lm_read else ""
    if shape == "flag":
        return f"{name.strip()} is not an option of `vllm serve` in any release from {vllm_span}."
    if shape == "env_var":
        if name.strip().startswith("LMCACHE_"):
            return f"No LMCache release read ({lm_span}) has a config key behind {name.strip()}."
        return f"No vLLM release from {vllm_span} reads the environment variable {name.strip()}."
    if shape == "class":
        return (
            f"No class {name.strip()} is defined in the KV-caching packages of vLLM {vllm_span} or LMCache {lm_span} "
            "(kv_transfer, kv_offload, v1/core; LMCache integration, storage_backend, multiprocess)."
        )
    if shape == "key":
        return (
            f"{name.strip()} is neither an LMCache config key ({lm_span}) nor a `vllm serve` option ({vllm_span}), "
            "nor a tracked setting."
        )
    return None


# --- ranked search over every name ---------------------------------------------------------------

_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_STOP = frozenset({"the", "a", "an", "of", "for", "to", "in", "on", "is", "and", "or", "with", "vllm", "use", "does"})


def words(text: str) -> frozenset[str]:
    """Lower-case words of a name or text, camelCase and snake_case split ('CPUOffloadingSpec': cpu offloading spec)."""
    return frozenset(w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP)


Candidate = tuple[str, str, str, frozenset[str], frozenset[str]]
# Built once per loaded knowledge (a process holds one or two); keyed by identity, the model is large to hash.
_CANDIDATES: dict[int, tuple[Knowledge, tuple[Candidate, ...]]] = {}


def _candidates(knowledge: Knowledge) -> tuple[Candidate, ...]:
    cached = _CANDIDATES.get(id(knowledge))
    if cached is None or cached[0] is not knowledge:
        cached = _CANDIDATES[id(knowledge)] = (knowledge, _build_candidates(knowledge))
    return cached[1]


def _build_candidates(knowledge: Knowledge) -> tuple[Candidate, ...]:
    """(name, kind, shown-as, name words, summary words) for every name the knowledge holds."""
    rows: list[Candidate] = []
    for entry in knowledge.gated():
        kind = entry.kind if isinstance(entry, Setting) else type(entry).__name__.lower()
        own = words(" ".join((entry.name, *entry.aliases, entry.id.split(".", 1)[-1])))
        rows.append((entry.name, kind, entry.name, own, words(entry.summary)))
        if isinstance(entry, Setting):
            for ranged in entry.accepted_values:
                values = ranged.value if isinstance(ranged.value, tuple) else (ranged.value,)
                for value in values:
                    if isinstance(value, str):
                        shown = f"{entry.name} {value}"
                        rows.append((shown, f"{kind} value", shown, words(value) | own, frozenset()))
    for flag in knowledge.cli_inventory.flags:
        rows.append((flag.flag, "cli_flag", flag.flag, words(flag.flag), frozenset()))
    for item in knowledge.name_inventory.names:
        shown = item.name if item.kind != "lmcache_config" else f"{item.name} ({item.env_name})"
        rows.append((item.name, item.kind, shown, words(item.name), frozenset()))
    return tuple(dict.fromkeys(rows))


def suggest(knowledge: Knowledge, text: str, limit: int = 6) -> list[Suggestion]:
    """Names ranked by how well they match ``text``: shared words first, then spelling similarity."""
    query = words(text)
    key = normalize_name(text).replace("-", "")
    scored: list[tuple[float, str, Suggestion]] = []
    for name, kind, shown, own, summary in _candidates(knowledge):
        matcher = difflib.SequenceMatcher(None, key, normalize_name(name).replace("-", ""))
        spelling = matcher.ratio() if matcher.real_quick_ratio() >= 0.5 and matcher.quick_ratio() >= 0.5 else 0.0
        named = len(query & own) / len(query) if query else 0.0
        described = len(query & summary) / len(query) if query else 0.0
        # A word matched as part of a longer one ('fastsafetensor' in 'fastsafetensors') counts half.
        partial = sum(0.5 for q in query - own if len(q) > 4 and any(q in w for w in own)) / max(len(query), 1)
        score = max(spelling, named + partial, 0.6 * described)
        if score < 0.5:
            continue
        why = "name" if spelling >= named + partial else "words of the name"
        if kind.endswith(" value"):
            why = "an accepted value"
        elif 0.6 * described > max(spelling, named + partial):
            why = "words of its summary"
        scored.append((score, shown, Suggestion(name=shown, kind=kind.replace(" value", ""), why=why)))
    scored.sort(key=lambda row: (-row[0], len(row[1])))
    unique: dict[str, Suggestion] = {}
    for _, shown, suggestion in scored:
        unique.setdefault(shown, suggestion)
    return list(unique.values())[:limit]
