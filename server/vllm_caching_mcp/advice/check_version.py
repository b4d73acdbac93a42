"""check_version: is a flag, setting, connector, metric or feature there in a release, and what changed.

Two questions, one tool:

- *name* (+ *version*): the entry's state in that release — available, deprecated, removed
  or not yet — with its default, accepted values and HMA support there, and what changes later;
- *version* + *compare_to*: every KV-caching change gated between two releases.
"""

from __future__ import annotations

import difflib
import itertools
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..knowledge import Connector, Gated, Knowledge, Metric, Setting, Status, normalize_name, ranged_at
from ..versions import Version, as_text
from .common import (
    AdviceError,
    Citation,
    Result,
    SecurityCheck,
    ToolSpec,
    VersionContext,
    cite,
    resolve_version,
    security_check,
)

EventKind = Literal["introduced", "deprecated", "removed", "changed", "default_changed", "values_changed"]


class CheckVersionRequest(BaseModel):
    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="What to look up: a CLI flag (--kv-offloading-size), config field (kv_offloading_size), "
        "environment variable (LMCACHE_MAX_LOCAL_CPU_SIZE), connector (OffloadingConnector), metric "
        "(vllm:prefix_cache_hits) or feature. Dashes, underscores and case do not matter. Leave it out "
        "and give compare_to to list every change between two releases.",
    )
    version: str | None = Field(
        default=None,
        max_length=40,
        description="The vLLM release in use, e.g. '0.22.1' or 'v0.22.1'. Left out, the newest release "
        "the knowledge covers is assumed and the answer says so.",
    )
    compare_to: str | None = Field(
        default=None,
        max_length=40,
        description="A second vLLM release, e.g. the one you plan to upgrade to: the answer lists every "
        "KV-caching change between `version` and this one.",
    )
    lmcache_version: str | None = Field(
        default=None,
        max_length=40,
        description="The LMCache release in use, for LMCache settings; left out, the newest known is assumed.",
    )


class ChangeNote(BaseModel):
    version: str
    summary: str
    sources: list[str]


class EntryStatus(BaseModel):
    """One entry's state in the release asked about."""

    id: str
    name: str
    kind: str = Field(description="cli_flag, config_field, env_var, spec_key, lmcache_config, connector, metric, ...")
    component: str
    version: str = Field(description="the release of `component` this status is for")
    status: Status
    answer: str = Field(description="the status in one sentence")
    summary: str
    introduced: str | None = Field(description="first release that has it; null: already in the oldest covered")
    deprecated: str | None
    removed: str | None
    instead: str | None
    unit: str | None = None
    scope: str | None = None
    value_type: str | None = None
    default: Any = Field(default=None, description="the default in this release, where the knowledge records one")
    default_note: str | None = None
    accepted_values: list[str] | None = None
    hma_support: str | None = Field(default=None, description="connectors: yes, no or conditional in this release")
    requires: list[str] = Field(default_factory=list)
    changes_so_far: list[ChangeNote] = Field(default_factory=list)
    later_changes: list[ChangeNote] = Field(default_factory=list, description="changes in releases after this one")
    citation: Citation

    def details(self) -> list[str]:
        """The facts behind the one-sentence answer, one per line."""
        lines = []
        if self.default is not None or self.default_note:
            note = f" ({self.default_note})" if self.default_note else ""
            lines.append(f"default in {self.version}: {self.default!r}{note}")
        if self.accepted_values:
            lines.append(f"accepted values: {', '.join(self.accepted_values)}")
        if self.unit or self.scope:
            lines.append(
                " · ".join(
                    p
                    for p in (
                        self.unit and f"unit: {self.unit}",
                        self.scope and f"scope: {self.scope.replace('_', ' ')}",
                    )
                    if p
                )
            )
        if self.hma_support:
            lines.append(f"supports the hybrid KV cache manager (HMA): {self.hma_support}")
        if self.requires:
            lines.append(f"requires: {', '.join(self.requires)}")
        lines += [f"later, {c.version}: {c.summary}" for c in self.later_changes]
        lines.append(
            f"sources: {', '.join(self.citation.sources[:3])}" + (" …" if len(self.citation.sources) > 3 else "")
        )
        return lines


class GatedEvent(BaseModel):
    version: str = Field(description="first release in which the change holds")
    id: str
    name: str
    kind: str
    event: EventKind
    summary: str
    sources: list[str]


class CheckVersionResult(Result):
    version_context: VersionContext
    compare_context: VersionContext | None = None
    lmcache_context: VersionContext | None = None
    matches: list[EntryStatus] = Field(default_factory=list)
    matches_at_compare: list[EntryStatus] = Field(default_factory=list)
    direction: Literal["upgrade", "downgrade", "same"] | None = None
    changes_between: list[GatedEvent] = Field(default_factory=list)
    security: SecurityCheck | None = Field(
        default=None, description="known advisories for `version` and the security floor (stored snapshot)"
    )
    compare_security: SecurityCheck | None = Field(default=None, description="the same for `compare_to`")
    lmcache_security: SecurityCheck | None = Field(default=None, description="the same for the LMCache release")

    def summary(self) -> str:
        lines = [f"vLLM {self.version_context.version}" + (" (assumed)" if self.version_context.assumed else "")]
        for m in self.matches:
            lines.append(m.answer)
            lines += [f"  {line}" for line in m.details()]
        if self.compare_context is not None:
            lines.append(
                f"{len(self.changes_between)} KV-caching changes between {self.version_context.version} and "
                f"{self.compare_context.version} ({self.direction}):"
            )
            lines += [f"  {e.version}  {e.name}: {e.event} — {e.summary}" for e in self.changes_between]
        for check in (self.security, self.compare_security, self.lmcache_security):
            if check is not None:
                lines += check.lines()
        for ctx in (self.version_context, self.compare_context, self.lmcache_context):
            if ctx is not None:
                lines += [f"warning: {w}" for w in ctx.warnings]
        return "\n".join(lines)


def kind_of(entry: Gated) -> str:
    if isinstance(entry, Setting):
        return entry.kind
    if isinstance(entry, Connector):
        return "connector"
    if isinstance(entry, Metric):
        return "metric"
    return "feature"


_LABEL = {"vllm": "vLLM", "lmcache": "LMCache", "nixl": "NIXL", "mooncake": "Mooncake", "sglang": "SGLang"}


def _sentence(entry: Gated, status: Status, version: Version) -> str:
    where = f"{_LABEL[entry.component]} {version}"
    since = f"since {entry.introduced}" if entry.introduced else "in every covered release"
    instead = f" Use instead: {entry.instead}" if entry.instead else ""
    if status == "not_yet":
        return f"{entry.name} is not in {where}; it first appears in {entry.introduced}."
    if status == "removed":
        return f"{entry.name} was removed in {entry.removed} and is not in {where}.{instead}"
    if status == "deprecated":
        until = f"; it is removed in {entry.removed}" if entry.removed else ""
        return f"{entry.name} is deprecated in {where} (deprecated since {entry.deprecated}{until}).{instead}"
    return f"{entry.name} is available in {where} ({since})."


def describe(entry: Gated, version: Version, knowledge: Knowledge) -> EntryStatus:
    status = entry.status_at(version)
    default = accepted = None
    unit = scope = value_type = None
    hma = None
    requires: list[str] = []
    if isinstance(entry, Setting):
        default = ranged_at(entry.defaults, version)
        accepted = ranged_at(entry.accepted_values, version)
        unit, scope, value_type = entry.unit, entry.scope, entry.type
    if isinstance(entry, Connector):
        hma = entry.hma_at(version)
        requires = list(entry.requires)
    notes = [ChangeNote(version=str(c.version), summary=c.summary, sources=list(c.sources)) for c in entry.changes]
    accepted_list = None
    if accepted is not None and accepted.value is not None:
        accepted_list = list(accepted.value) if isinstance(accepted.value, tuple) else [str(accepted.value)]
    return EntryStatus(
        id=entry.id,
        name=entry.name,
        kind=kind_of(entry),
        component=entry.component,
        version=str(version),
        status=status,
        answer=_sentence(entry, status, version),
        summary=entry.summary,
        introduced=as_text(entry.introduced),
        deprecated=as_text(entry.deprecated),
        removed=as_text(entry.removed),
        instead=entry.instead,
        unit=unit,
        scope=scope,
        value_type=value_type,
        default=default.value if default else None,
        default_note=default.note if default else None,
        accepted_values=accepted_list,
        hma_support=hma,
        requires=requires,
        changes_so_far=[n for n in notes if Version(n.version) <= version],
        later_changes=[n for n in notes if Version(n.version) > version],
        citation=cite(entry.id, entry, knowledge),
    )


def events(knowledge: Knowledge, entry: Gated) -> list[GatedEvent]:
    """Every dated change of one entry: lifecycle, recorded changes, and default or value-set shifts."""

    def event(version: Version, kind: EventKind, summary: str, sources: tuple[str, ...] = entry.sources) -> GatedEvent:
        return GatedEvent(
            version=str(version),
            id=entry.id,
            name=entry.name,
            kind=kind_of(entry),
            event=kind,
            summary=summary,
            sources=list(sources),
        )

    found = [event(entry.introduced, "introduced", entry.summary)] if entry.introduced else []
    if entry.deprecated:
        found.append(event(entry.deprecated, "deprecated", entry.instead or entry.summary))
    if entry.removed:
        found.append(event(entry.removed, "removed", entry.instead or entry.summary))
    found += [event(c.version, "changed", c.summary, c.sources) for c in entry.changes]
    if isinstance(entry, Setting):
        releases = knowledge.release_versions(entry.component)
        for values, is_default in ((entry.defaults, True), (entry.accepted_values, False)):
            if len(values) < 2:
                continue
            for before, after in itertools.pairwise(releases):
                a, b = ranged_at(values, before), ranged_at(values, after)
                if a is None or b is None or a.value == b.value:
                    continue
                if is_default:
                    text = f"default {a.value!r} → {b.value!r}"
                else:
                    listed = b.value if isinstance(b.value, tuple) else (b.value,)
                    text = f"accepted values now {', '.join(map(str, listed))}"
                text += f" ({b.note})" if b.note else ""
                found.append(event(after, "default_changed" if is_default else "values_changed", text))
    return found


def _suggest(knowledge: Knowledge, name: str) -> list[str]:
    key = normalize_name(name)
    close = difflib.get_close_matches(key, knowledge.known_names(), n=5, cutoff=0.6)
    names: list[str] = []
    for k in close:
        for entry in knowledge.find(k):
            if entry.name not in names:
                names.append(entry.name)
    return names[:5]


def _lookup(knowledge: Knowledge, name: str) -> list[Gated]:
    """Entries called ``name``; a leading dash means a command-line flag is meant."""
    entries = knowledge.find(name)
    others: list[Gated] = []
    if name.strip().startswith("-"):
        flags = [e for e in entries if kind_of(e) in ("cli_flag", "sglang_flag")]
        entries, others = flags, [e for e in entries if e not in flags]
    if entries:
        return entries
    hints = _suggest(knowledge, name)
    if name.strip().startswith("-") and any(h.startswith("-") for h in hints):
        hints = [h for h in hints if h.startswith("-")]
    did_you_mean = f" Did you mean: {', '.join(hints)}?" if hints else ""
    also = "".join(f" ({e.name} is a {kind_of(e).replace('_', ' ')}, not a flag.)" for e in others)
    raise AdviceError(
        "name",
        f"nothing in the knowledge is called {name!r}.{did_you_mean}{also} "
        "Known kinds: CLI flags, config fields, environment variables, connectors, metrics, features.",
    )


def check_version(request: CheckVersionRequest, knowledge: Knowledge) -> CheckVersionResult:
    if request.name is None and request.compare_to is None:
        raise AdviceError(
            "name", "give a flag, setting, connector, metric or feature name, or compare_to with a second release"
        )
    version, context = resolve_version(knowledge, request.version)
    result = CheckVersionResult(version_context=context, security=security_check(knowledge, "vllm", version))
    lm_version = None
    if request.name is not None:
        entries = _lookup(knowledge, request.name)
        if any(e.component == "lmcache" for e in entries) or request.lmcache_version:
            lm_version, result.lmcache_context = resolve_version(
                knowledge, request.lmcache_version, package="lmcache", field="lmcache_version"
            )
        if lm_version is not None:
            result.lmcache_security = security_check(knowledge, "lmcache", lm_version)
        result.matches = [
            describe(e, lm_version if e.component == "lmcache" and lm_version else version, knowledge) for e in entries
        ]
    if request.compare_to is not None:
        other, result.compare_context = resolve_version(knowledge, request.compare_to, field="compare_to")
        result.compare_security = security_check(knowledge, "vllm", other)
        low, high = sorted((version, other))
        result.direction = "same" if other == version else ("upgrade" if other > version else "downgrade")
        pool = (
            [e for e in knowledge.find(request.name) if e.component == "vllm"]
            if request.name is not None
            else [e for e in knowledge.gated() if e.component == "vllm"]
        )
        changes = [ev for e in pool for ev in events(knowledge, e) if low < Version(ev.version) <= high]
        result.changes_between = sorted(changes, key=lambda ev: (Version(ev.version), ev.id))
        if request.name is not None:
            result.matches_at_compare = [describe(e, other, knowledge) for e in pool]
    return result


SPEC = ToolSpec(
    name="check_version",
    title="Check a vLLM version gate",
    description=(
        "Is a vLLM flag, config field, environment variable, KV connector, metric or feature available, "
        "deprecated, removed or not yet there in a given vLLM release; since when; what to use instead; "
        "its default, accepted values and unit in that release. With `compare_to`, lists every KV-caching "
        "change between two releases (plan an upgrade). Answers come from facts checked against the released "
        "wheels, each with its sources. Every answer also lists the known security advisories affecting the "
        "release(s) and the security floor (lowest release clear of every critical and high advisory), from "
        "the stored advisory snapshot. Ask this before recommending any flag: these change every release."
    ),
    request=CheckVersionRequest,
    result=CheckVersionResult,
    run=check_version,
)
