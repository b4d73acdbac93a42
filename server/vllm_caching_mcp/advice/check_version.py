"""check_version: is a flag, setting, connector, metric or feature there in a release, and what changed.

Two questions, one tool:

- *name* (+ *version*): the entry's state in that release — available, deprecated, removed
  or not yet — with its default, accepted values and HMA support there, and what changes later;
- *version* + *compare_to*: every KV-caching change gated between two releases.
"""

from __future__ import annotations

import difflib
import itertools
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, PrivateAttr

from ..knowledge import Connector, Gated, Knowledge, Metric, Setting, Status, normalize_name, ranged_at
from ..safe_text import join_lines
from ..versions import Version, as_text
from . import engine_schema, name_lookup, release_notes
from .common import (
    PRODUCT_LABELS,
    AdviceError,
    Citation,
    Detail,
    Result,
    SecurityCheck,
    ToolSpec,
    VersionContext,
    cite,
    patches_of,
    resolve_version,
    security_check,
)
from .engine_schema import SchemaChange, SchemaMatch
from .name_lookup import InventoryMatch, Suggestion
from .release_notes import ChangeComponent, ReleaseChange

EventKind = Literal["introduced", "deprecated", "removed", "changed", "default_changed", "values_changed"]


class CheckVersionRequest(BaseModel):
    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description=("flag, config field, env variable, connector, metric or feature (case, - and _ ignored)"),
    )
    version: str | None = Field(
        default=None,
        max_length=40,
        description="vLLM release; omitted: the newest known",
    )
    compare_to: str | None = Field(
        default=None,
        max_length=40,
        description="second vLLM release: the KV-caching changes from `version` to it",
    )
    lmcache_version: str | None = Field(
        default=None,
        max_length=40,
        description="LMCache release; omitted: the newest known",
    )
    components: list[ChangeComponent] | None = Field(
        default=None,
        max_length=8,
        description="with compare_to: only these components",
    )
    events: bool = Field(
        default=False,
        description="with compare_to: every entry-level event too",
    )
    connectors: list[str] | None = Field(
        default=None,
        max_length=8,
        description="with compare_to: only changes of these connectors",
    )
    detail: Detail = "summary"
    page: int = Field(default=1, ge=1, le=1000)


class ChangeNote(BaseModel):
    version: str
    summary: str
    sources: list[str]


# The next change only: a second one cost ~0.5 KB and took a one-name answer past 4 KB (issue 29).
_LATER_IN_BRIEF = 1
# The entry sources a brief answer lists (as its text does); detail: full lists every one.
_SOURCES_IN_BRIEF = 3


# The text carries the first sentence of an entry's summary (what it is), this long at most; the whole summary is in
# the structured content.
_SUMMARY_IN_TEXT = 280


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    match = re.search(r"(?<=[a-z0-9)'\"])\.(?= [A-Z])", flat)
    first = flat[: match.end()] if match else flat
    return first if len(first) <= _SUMMARY_IN_TEXT else first[: _SUMMARY_IN_TEXT - 1].rstrip() + "…"


class EntryStatus(BaseModel):
    """One entry's state in the release asked about."""

    id: str
    name: str
    kind: str = Field(description="cli_flag, config_field, env_var, spec_key, lmcache_config, connector, metric, ...")
    component: str
    version: str = Field(description="the release of `component` this status is for")
    status: Status | Literal["unknown"] = Field(
        description="unknown: the release is older than the oldest the knowledge covers and the entry is already there"
    )
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
    changes_left_out: int = Field(
        default=0, description="changes of other releases not listed here (detail: full lists them)"
    )
    citation: Citation
    sources_left_out: int = Field(
        default=0, description="sources of the entry and of its changes not listed here (detail: full lists them)"
    )
    # How much the text repeats of what the structured content holds: 0 the first sentence of `summary` and each
    # change whole, 1 no summary, 2 each change's first sentence only, 3 not the change in force either (a brief
    # answer short of room).
    _text_level: int = PrivateAttr(default=0)

    def _change_text(self, summary: str) -> str:
        return _first_sentence(summary) if self._text_level >= 2 else summary

    def in_brief(
        self, in_force: bool = True, later_changes: int = _LATER_IN_BRIEF, sources: int = _SOURCES_IN_BRIEF
    ) -> EntryStatus:
        """The change in force in this release (unless not ``in_force``) and the next ``later_changes`` that
        come, the rest counted; the entry's first ``sources`` and each change's first, the rest counted too."""
        so_far, later = self.changes_so_far[-1:] if in_force else [], self.later_changes[:later_changes]
        left_out = len(self.changes_so_far) + len(self.later_changes) - len(so_far) - len(later)
        changes = [c.model_copy(update={"sources": c.sources[:1]}) for c in (*so_far, *later)]
        # the sources read in the release asked about first (a wheel or sdist of it), then in their own order
        ranked = sorted(self.citation.sources, key=lambda source: f"=={self.version}:" not in source)
        cited = ranked[:sources]
        sources_left = len(self.citation.sources) - len(cited) + sum(len(c.sources) - 1 for c in (*so_far, *later))
        return self.model_copy(
            update={
                "changes_so_far": changes[: len(so_far)],
                "later_changes": changes[len(so_far) :],
                "changes_left_out": self.changes_left_out + left_out,
                "citation": self.citation.model_copy(update={"sources": cited}),
                "sources_left_out": self.sources_left_out + sources_left,
            }
        )

    def details(self) -> list[str]:
        """The facts behind the one-sentence answer, one per line: what it is, the change in force, its default."""
        lines = [_first_sentence(self.summary)] if self.summary and self._text_level == 0 else []
        lines += [
            f"since {c.version}: {self._change_text(c.summary)}" for c in self.changes_so_far if self._text_level < 3
        ]
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
        lines += [f"later, {c.version}: {self._change_text(c.summary)}" for c in self.later_changes]
        if self.changes_left_out:
            changes = "change" if self.changes_left_out == 1 else "changes"
            lines.append(f"{self.changes_left_out} {changes} of other releases not listed (detail: full lists them)")
        lines.append(
            f"sources: {', '.join(self.citation.sources[:_SOURCES_IN_BRIEF])}"
            + (" …" if len(self.citation.sources) > _SOURCES_IN_BRIEF or self.sources_left_out else "")
        )
        return lines


# The changes one page carries, as JSON: with the rest of the answer, a page stays within a few tens of KB.
CHANGES_PAGE_BYTES = 16 * 1024


def _about_another_connector(text: str, wanted: set[str], knowledge: Knowledge) -> bool:
    """Whether ``text`` names a KV connector class and none of the ``wanted`` ones (by id)."""
    named = {c.id for c in knowledge.connectors if re.search(rf"\b{re.escape(c.name)}\b", text)}
    return bool(named) and not named & wanted


def _page(result: CheckVersionResult, page: int) -> None:
    """Keep page ``page`` of ``result.changes`` (pages of about CHANGES_PAGE_BYTES, in order)."""
    pages: list[list[ReleaseChange]] = [[]]
    used = 0
    for change in result.changes:
        size = len(change.model_dump_json())
        if pages[-1] and used + size > CHANGES_PAGE_BYTES:
            pages.append([])
            used = 0
        pages[-1].append(change)
        used += size
    if page > len(pages):
        raise AdviceError("page", f"the changes take {len(pages)} page(s); give a page from 1 to {len(pages)}")
    result.changes, result.changes_page, result.changes_pages = pages[page - 1], page, len(pages)


class GatedEvent(BaseModel):
    version: str = Field(description="first release in which the change holds")
    id: str
    name: str
    kind: str
    event: EventKind
    summary: str


class NotFound(BaseModel):
    """A name in no tracked entry and no inventory."""

    name: str
    answer: str = Field(description="'in no release' where an inventory is complete for the name's shape")
    suggestions: list[Suggestion] = Field(default_factory=list, description="ranked, best first")


class CheckVersionResult(Result):
    version_context: VersionContext
    compare_context: VersionContext | None = None
    lmcache_context: VersionContext | None = None
    matches: list[EntryStatus] = Field(default_factory=list)
    matches_at_compare: list[EntryStatus] = Field(default_factory=list)
    inventory_matches: list[InventoryMatch] = Field(
        default_factory=list,
        description="names known only from the generated inventories (every serve option, environment variable, "
        "LMCache key and KV-caching class by release): existence, no defaults",
    )
    schema_matches: list[SchemaMatch] = Field(
        default_factory=list,
        description="names of the engine's configuration schema (fields of KVTransferConfig, KVEventsConfig, "
        "CacheConfig, SchedulerConfig, ParallelConfig; connectors' kv_connector_extra_config keys; vllm/envs.py "
        "variables; LMCache keys and old key names), with what setting one does",
    )
    schema_matches_left_out: int = Field(
        default=0,
        description="schema readings of the name not listed, to keep the answer short (detail: full lists them)",
    )
    not_found: NotFound | None = None
    direction: Literal["upgrade", "downgrade", "same"] | None = None
    change_summary: list[str] = Field(default_factory=list, description="with compare_to: the short summary")
    changes: list[ReleaseChange] = Field(
        default_factory=list, description="with compare_to: distinct changes, grouped by component, with sources"
    )
    changes_between: list[GatedEvent] = Field(
        default_factory=list, description="with compare_to and events=true: every entry-level event behind `changes`"
    )
    schema_changes: list[SchemaChange] = Field(
        default_factory=list,
        description="with compare_to: the config fields (KVTransferConfig, KVEventsConfig, CacheConfig), registered "
        "connectors and connectors' kv_connector_extra_config keys the engine's schema adds or removes, by release",
    )
    schema_changes_left_out: int = Field(
        default=0,
        description="schema changes not listed: connectors' extra-config keys (name the connectors, or detail: full), "
        "or all of them on a page of `changes` before the last",
    )
    changes_page: int = Field(default=1, description="which page of `changes` this is (`page`; detail: full: all)")
    changes_pages: int = Field(default=1, description="how many pages the changes take")
    security: SecurityCheck | None = Field(
        default=None,
        description="known advisories for `version` and the security floor (stored snapshot); left out when only "
        "LMCache names were found and no vLLM release was given",
    )
    compare_security: SecurityCheck | None = Field(default=None, description="the same for `compare_to`")
    lmcache_security: SecurityCheck | None = Field(default=None, description="the same for the LMCache release")

    asked_as: str | None = Field(
        default=None, description="the release as written when it stood for another (e.g. 'v0.22' for 0.22.1)"
    )

    def summary(self) -> str:
        lines = [self._header()]
        for m in self.matches:
            lines.append(m.answer)
            lines += [f"  {line}" for line in m.details()]
        lines += [m.answer for m in self.inventory_matches]
        for s in self.schema_matches:
            lines.append(s.answer)
            if s.if_set:
                lines.append(f"  {s.if_set}")
            if s.default is not None:
                changed = f" (by release: {'; '.join(s.default_changes)})" if s.default_changes else ""
                lines.append(f"  default in {s.version}: {s.default}{changed}")
            if s.parse is not None:
                lines.append(f"  read as: {s.parse}")
            if s.siblings:
                lines.append(f"  beside it in {s.owner} {s.version} (default): {', '.join(s.siblings)}")
            lines.append(f"  source: {', '.join(s.sources)}")
        if self.schema_matches_left_out:
            lines.append(
                f"{self.schema_matches_left_out} more readings of this name in the engine's schema not listed "
                "(detail: full lists them)"
            )
        if self.not_found is not None:
            lines.append(self.not_found.answer)
            if self.not_found.suggestions:
                lines.append("  closest names: " + "; ".join(f"{s.name} ({s.why})" for s in self.not_found.suggestions))
        if self.compare_context is not None:
            lines += self.change_summary
            lines += [
                f"  {c.version}  [{release_notes.title(c.component)}] {c.summary}"
                + (f" ({', '.join(e.name for e in c.entries)})" if len(c.entries) > 1 else f" ({c.entries[0].name})")
                for c in self.changes
            ]
            lines += [c.line() for c in self.schema_changes]
            if self.schema_changes_left_out:
                where = (
                    "they come with the last page"
                    if self.changes_page < self.changes_pages
                    else "connectors' kv_connector_extra_config keys: connectors: [...] lists a deployment's, "
                    "detail: full all of them"
                )
                lines.append(f"  and {self.schema_changes_left_out} changes of the engine schema not listed ({where})")
            if self.changes_pages > 1:
                lines.append(
                    f"page {self.changes_page} of {self.changes_pages} of the changes; page={self.changes_page + 1} "
                    "gives the next (detail: full, all at once)"
                    if self.changes_page < self.changes_pages
                    else f"page {self.changes_page} of {self.changes_pages} of the changes, the last"
                )
        for check in (self.security, self.compare_security, self.lmcache_security):
            if check is not None:
                lines += check.lines()
        for ctx in (self.version_context, self.compare_context, self.lmcache_context):
            if ctx is not None:
                lines += [f"warning: {w}" for w in ctx.warnings]
        return join_lines(lines)

    def _header(self) -> str:
        ctx = self.version_context
        header = f"vLLM {ctx.version}"
        if ctx.assumed:
            header += " (assumed)"
        elif self.asked_as:
            header += f" (taken for {self.asked_as!r}: the newest {self.asked_as.lstrip('vV')}.x release)"
        if Version(ctx.version) > Version(ctx.newest_known):
            header += f" — newer than {ctx.newest_known}, the newest release covered: answered as of {ctx.newest_known}"
        elif Version(ctx.version) < Version(ctx.oldest_known):
            header += f" — older than {ctx.oldest_known}, the oldest release covered: earlier state unknown"
        return header


def kind_of(entry: Gated) -> str:
    if isinstance(entry, Setting):
        return entry.kind
    if isinstance(entry, Connector):
        return "connector"
    if isinstance(entry, Metric):
        return "metric"
    return "feature"


def status_of(entry: Gated, version: Version, knowledge: Knowledge) -> Status | Literal["unknown"]:
    """The entry's status, except that a release older than the coverage cannot be said to have it."""
    status = entry.status_at(version)
    if version < knowledge.oldest(entry.component) and entry.introduced is None:
        if entry.deprecated_earlier is not None and version >= entry.deprecated_earlier:
            return "deprecated"
        return "unknown"
    return status


def _sentence(entry: Gated, status: Status | Literal["unknown"], version: Version, knowledge: Knowledge) -> str:
    name = entry.name
    if isinstance(entry, Setting) and entry.kind == "spec_key" and entry.config_path:
        name = f"{entry.name} ({entry.config_path} of OffloadingConnector)"  # a bare key could be anyone's
    oldest, newest = knowledge.oldest(entry.component), knowledge.newest(entry.component)
    where = f"{PRODUCT_LABELS[entry.component]} {version}"
    if version > newest:
        where += f" (newer than {newest}, the newest release covered: answered as of {newest})"
    instead = f" Use instead: {entry.instead}" if entry.instead else ""
    first = f"since {entry.introduced}" if entry.introduced else f"already in {oldest}, the oldest release covered"
    until = f"; removed in {entry.removed}" if entry.removed else ""
    if entry.introduced is None and entry.removed is None:
        first = "in every covered release"
    if status == "unknown":
        return (
            f"{name}: unknown in {where}, which is older than {oldest}, the oldest release covered; "
            f"it is there from {oldest}{until}."
        )
    if status == "not_yet":
        return f"{name} is not in {where}; it first appears in {entry.introduced}."
    if status == "removed":
        return f"{name} was removed in {entry.removed} and is not in {where}.{instead}"
    if status == "deprecated":
        return f"{name} is deprecated in {where} ({_deprecated_since(entry, oldest)}{until}).{instead}"
    return f"{name} is available in {where} ({first}{until})."


def _deprecated_since(entry: Gated, oldest: Version) -> str:
    if entry.deprecated_earlier is not None:
        return f"deprecated since {entry.deprecated_earlier}, before the releases covered"
    if entry.deprecated == oldest and entry.introduced is None:
        return f"deprecated in {oldest} or earlier: {oldest} is the oldest release covered"
    return f"deprecated since {entry.deprecated}"


def describe(entry: Gated, version: Version, knowledge: Knowledge) -> EntryStatus:
    status = status_of(entry, version, knowledge)
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
        answer=_sentence(entry, status, version, knowledge),
        summary=entry.summary,
        introduced=as_text(entry.introduced),
        deprecated=as_text(entry.deprecated_earlier or entry.deprecated),
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


class Event(BaseModel):
    """One dated change of one entry, with the sources the grouped change cites."""

    entry: Gated
    version: Version
    kind: EventKind
    summary: str
    sources: tuple[str, ...]

    model_config = {"arbitrary_types_allowed": True}

    def public(self) -> GatedEvent:
        return GatedEvent(
            version=str(self.version),
            id=self.entry.id,
            name=self.entry.name,
            kind=kind_of(self.entry),
            event=self.kind,
            summary=self.summary,
        )


def events(knowledge: Knowledge, entry: Gated) -> list[Event]:
    """Every dated change of one entry: lifecycle, recorded changes, and default or value-set shifts."""

    def event(version: Version, kind: EventKind, summary: str, sources: tuple[str, ...] = entry.sources) -> Event:
        return Event(entry=entry, version=version, kind=kind, summary=summary, sources=sources)

    found = [event(entry.introduced, "introduced", entry.summary)] if entry.introduced else []
    if entry.deprecated and entry.deprecated_earlier is None:
        found.append(event(entry.deprecated, "deprecated", entry.instead or entry.summary))
    if entry.removed:
        found.append(event(entry.removed, "removed", entry.instead or entry.summary))
    found += [event(c.version, "changed", c.summary, c.sources) for c in entry.changes]
    if isinstance(entry, Setting):
        found += _value_shifts(knowledge, entry, event)
    return found


def _value_shifts(knowledge: Knowledge, entry: Setting, event: Any) -> list[Event]:
    """Releases where a setting's default or accepted values differ from the release before."""
    found: list[Event] = []
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


def _close_tracked(knowledge: Knowledge, name: str) -> list[str]:
    """Tracked entries whose spelling is close to ``name``: a typo of one of them."""
    key = normalize_name(name)
    close = difflib.get_close_matches(key, knowledge.known_names(), n=5, cutoff=0.8)
    names: list[str] = []
    for k in close:
        for entry in knowledge.find(k):
            if entry.name not in names:
                names.append(entry.name)
    if name.strip().startswith("-") and any(h.startswith("-") for h in names):
        names = [h for h in names if h.startswith("-")]
    return names[:5]


def _tracked(knowledge: Knowledge, name: str) -> tuple[list[Gated], list[Gated]]:
    """Tracked entries called ``name``, and (for a dashed name) the non-flags of that name left out."""
    entries = knowledge.find(name)
    others: list[Gated] = []
    if name.strip().startswith("-"):
        flags = [e for e in entries if kind_of(e) in ("cli_flag", "sglang_flag")]
        entries, others = flags, [e for e in entries if e not in flags]
    return entries, others


def _not_found(knowledge: Knowledge, name: str, others: list[Gated]) -> NotFound:
    """A name found nowhere: a typo of a tracked name is an input error; anything else gets a definite answer."""
    absent = name_lookup.absent_answer(knowledge, name)
    # Free text ("hybrid kv cache manager") is a search, not a misspelt name: it gets ranked suggestions.
    typo = _close_tracked(knowledge, name) if name_lookup.shape_of(name) != "text" else []
    also = "".join(f" ({e.name} is a {kind_of(e).replace('_', ' ')}, not a flag.)" for e in others)
    if typo or others:
        did_you_mean = f" Did you mean: {', '.join(typo)}?" if typo else ""
        raise AdviceError("name", f"{absent or f'nothing in the knowledge is called {name!r}.'}{did_you_mean}{also}")
    answer = absent or f"No name in the knowledge matches {name.strip()!r}; the closest are listed."
    return NotFound(name=name, answer=answer, suggestions=name_lookup.suggest(knowledge, name))


def _release_asked(knowledge: Knowledge, text: str | None) -> tuple[str | None, str | None]:
    """``v0.22`` stands for the newest 0.22.x release: (the release to resolve, the text as asked) or as given."""
    if text is None:
        return text, None
    try:
        patches = patches_of(knowledge.release_versions(), text)
    except ValueError:
        return text, None
    if not patches:
        return text, None
    return str(patches[-1]), text.strip()


def check_version(request: CheckVersionRequest, knowledge: Knowledge) -> CheckVersionResult:
    if request.name is None and request.compare_to is None:
        raise AdviceError(
            "name", "give a flag, setting, connector, metric or feature name, or compare_to with a second release"
        )
    if request.compare_to is None and (request.components or request.connectors or request.events):
        field = "components" if request.components else "connectors" if request.connectors else "events"
        raise AdviceError(field, "applies to the changes of compare_to; give compare_to with a second release")
    version_text, asked_as = _release_asked(knowledge, request.version)
    version, context = resolve_version(knowledge, version_text)
    result = CheckVersionResult(
        version_context=context,
        security=security_check(knowledge, "vllm", version).for_detail(request.detail),
        asked_as=asked_as,
    )
    if request.name is not None:
        _answer_name(request, knowledge, version, result)
    if request.compare_to is not None:
        _compare(request, knowledge, version, result)
    elif context.assumed and _about_lmcache_alone(result):
        result.security = None  # the advisories of a vLLM release nobody named say nothing about an LMCache name
    if request.name is not None and request.compare_to is None and request.detail == "summary":
        _fit_brief(result, request.name.strip())
    return result


# A one-name answer's structured content and text together: with the tools/call envelope around them (the
# result's wrapper, the text escaped as JSON; about 200 bytes) it reaches the agent within 4 KB.
BRIEF_BYTES = 3840


def _wire_bytes(result: CheckVersionResult) -> int:
    return result.structured_bytes() + len(result.summary().encode())


def _fit_brief(result: CheckVersionResult, asked: str) -> None:
    """Within `BRIEF_BYTES`: the tracked entries stay, and the first schema reading when it is spelled as asked
    and no tracked entry is (or nothing is tracked); the schema's further readings of the name (the same key
    read by another connector or by LMCache) are counted instead, then a second tracked entry keeps neither
    its changes nor more than its first source, then the first entry cites one source, then the text leaves to the
    structured content what each entry is (its summary), then all but the first sentence of each change, then the
    change in force."""
    # a schema reading spelled as asked (enable_prefix_caching, a CacheConfig field) is what was asked for
    result.schema_matches.sort(key=lambda m: m.name != asked)
    spelled = any(m.name == asked for m in result.matches)
    keep = 0 if result.matches and (spelled or not any(m.name == asked for m in result.schema_matches)) else 1
    while len(result.schema_matches) > keep and _wire_bytes(result) > BRIEF_BYTES:
        result.schema_matches.pop()
        result.schema_matches_left_out += 1
    if _wire_bytes(result) > BRIEF_BYTES:  # a name several entries track: the second on cites and changes less
        result.matches[1:] = [m.in_brief(in_force=False, later_changes=0, sources=1) for m in result.matches[1:]]
    if result.matches and _wire_bytes(result) > BRIEF_BYTES:
        result.matches[0] = result.matches[0].in_brief(sources=1)
    for level in (1, 2, 3):  # what each entry is, then its changes beyond their first sentence: structured only
        for match in result.matches:
            if _wire_bytes(result) <= BRIEF_BYTES:
                return
            match._text_level = level


def _about_lmcache_alone(result: CheckVersionResult) -> bool:
    """Whether every name the answer found is LMCache's (its key, variable or server option)."""
    found = [m.component for m in result.matches]
    found += [m.package for m in result.schema_matches] + [m.package for m in result.inventory_matches]
    return bool(found) and all(owner == "lmcache" for owner in found)


def _answer_name(
    request: CheckVersionRequest, knowledge: Knowledge, version: Version, result: CheckVersionResult
) -> None:
    assert request.name is not None
    entries, others = _tracked(knowledge, request.name)
    spelled_absent = _flag_spelled_nowhere(knowledge, request.name, entries, version)
    if spelled_absent:
        entries = []
    inventory: list[InventoryMatch] = []
    lm_version = None
    dashed = request.name.strip().startswith("-")
    newest_lm = knowledge.newest("lmcache")
    in_schema = [] if dashed else engine_schema.lookup(knowledge, request.name, version, newest_lm)
    wants_lmcache = any(e.component == "lmcache" for e in entries) or bool(request.lmcache_version)
    wants_lmcache |= any(m.package == "lmcache" for m in in_schema)
    if not entries:
        wants_lmcache |= any(e.package == "lmcache" for e in knowledge.name_inventory.find(request.name))
        wants_lmcache |= dashed and bool(knowledge.lmcache_server_cli.options_named(request.name.strip()))
    if wants_lmcache:
        lm_version, result.lmcache_context = resolve_version(
            knowledge, request.lmcache_version, package="lmcache", field="lmcache_version"
        )
        result.lmcache_security = security_check(knowledge, "lmcache", lm_version).for_detail(request.detail)
    if in_schema:
        result.schema_matches = engine_schema.lookup(knowledge, request.name, version, lm_version or newest_lm)
    if not entries:
        versions = {"vllm": (version, True), "lmcache": (lm_version or newest_lm, True)}
        inventory = name_lookup.inventory_matches(knowledge, request.name, versions)
        if dashed:
            inventory = [m for m in inventory if m.kind in ("cli_flag", "lmcache_server_option")]
        if in_schema:  # the schema says more about an LMCache key than the name inventory's existence
            inventory = [m for m in inventory if m.kind != "lmcache_config"]
        if any(m.kind == "env_var" and m.status == "available" for m in result.schema_matches):
            inventory = [m for m in inventory if m.kind != "env_var"]  # and of a variable envs.py reads now
        if spelled_absent:  # its inventory lines say the same; the answer says it once
            inventory, result.not_found = [], spelled_absent
        elif not inventory and not in_schema:
            result.not_found = _not_found(knowledge, request.name, others)
    result.matches = [
        describe(e, lm_version if e.component == "lmcache" and lm_version else version, knowledge) for e in entries
    ]
    if request.detail == "summary":
        result.matches = [m.in_brief() for m in result.matches]
    result.inventory_matches = inventory


def _flag_spelled_nowhere(knowledge: Knowledge, name: str, entries: list[Gated], version: Version) -> NotFound | None:
    """An option spelled as no release's parser builds it, found only through a tracked entry's other spelling.

    ``--enable-hybrid-kv-cache-manager`` folds onto the tracked ``--disable-hybrid-kv-cache-manager``; before
    0.33.0 no parser builds it, so vLLM refuses it: the answer is that it does not exist there, and the
    tracked option goes into the suggestions, not the answer."""
    text = name.strip()
    if not text.startswith("-") or not entries:
        return None
    spelled = "--" + normalize_name(text.lstrip("-"))
    if any(spelled == "--" + normalize_name(e.name.lstrip("-")) for e in entries):
        return None
    accepted = knowledge.cli_inventory.accepted(version)
    if spelled in accepted:
        return None
    shown = [e.name for e in entries if e.name in accepted] or [e.name for e in entries]
    later = [f.introduced for f in knowledge.cli_inventory.entries(spelled) if f.introduced and f.introduced > version]
    since = f" (its parser builds it from {min(later)})" if later else ""
    return NotFound(
        name=name,
        answer=f"{text} is not an option of `vllm serve` in vLLM {version}{since}; vLLM refuses it "
        f"(unrecognized arguments). {', '.join(shown)} is.",
        suggestions=[Suggestion(name=n, kind="cli_flag", why="the option this spelling is taken for") for n in shown],
    )


def _compare(request: CheckVersionRequest, knowledge: Knowledge, version: Version, result: CheckVersionResult) -> None:
    compare_text, compare_asked = _release_asked(knowledge, request.compare_to)
    other, result.compare_context = resolve_version(knowledge, compare_text, field="compare_to")
    if compare_asked:
        result.compare_context.warnings.insert(
            0, f"compare_to {compare_asked!r} is taken as {other}, its newest patch."
        )
    result.compare_security = security_check(knowledge, "vllm", other).for_detail(request.detail)
    low, high = sorted((version, other))
    result.direction = "same" if other == version else ("upgrade" if other > version else "downgrade")
    pool = (
        [e for e in knowledge.find(request.name) if e.component == "vllm"]
        if request.name is not None
        else [e for e in knowledge.gated() if e.component == "vllm"]
    )
    wanted = set(request.components or release_notes.COMPONENTS)
    if request.connectors:
        used, unknown = release_notes.components_of_connectors(knowledge, request.connectors)
        if unknown:
            raise AdviceError("connectors", f"no known KV connector is called {', '.join(map(repr, unknown))}")
        wanted &= used
        named = {c.id for n in request.connectors for c in knowledge.find(n) if isinstance(c, Connector)}
        pool = [e for e in pool if not isinstance(e, Connector) or e.id in named]  # not another connector's
    pool = [e for e in pool if release_notes.component_of(e) in wanted]
    found = sorted(
        (ev for e in pool for ev in events(knowledge, e) if low < ev.version <= high),
        key=lambda ev: (ev.version, ev.entry.id),
    )
    if request.connectors:
        found = [ev for ev in found if not _about_another_connector(ev.summary, named, knowledge)]
    unique = list({(ev.entry.id, ev.version, ev.kind, ev.summary): ev for ev in found}.values())
    result.changes_between = [ev.public() for ev in unique] if request.events else []
    result.changes = release_notes.group(
        [(ev.entry, str(ev.version), ev.kind, ev.summary, ev.sources) for ev in unique]
    )
    result.change_summary = release_notes.headline(result.changes, str(low), str(high))
    schema_changes = [
        c
        for c in engine_schema.schema_changes(knowledge.engine_schema, low, high, request.connectors or None)
        if _schema_component(knowledge, c.owner) in wanted
    ]
    # In brief, the config classes' fields, the registrations and the keys of the connectors named; every
    # connector's keys with detail: full.
    brief = [c for c in schema_changes if request.connectors or c.owner in _SCHEMA_OWNERS_IN_BRIEF]
    result.schema_changes = schema_changes if request.detail == "full" else brief
    if request.detail == "summary":
        _page(result, request.page)
        if result.changes_page < result.changes_pages:
            result.schema_changes = []  # they come with the last page
    elif request.page != 1:
        raise AdviceError("page", "detail: full gives every change at once; leave page at 1")
    result.schema_changes_left_out = len(schema_changes) - len(result.schema_changes)
    if request.name is not None:
        result.matches_at_compare = [describe(e, other, knowledge) for e in pool]


_SCHEMA_OWNERS_IN_BRIEF = (*engine_schema.NOTED_CONFIGS, "KVConnectorFactory")


def _schema_component(knowledge: Knowledge, owner: str) -> release_notes.ChangeComponent:
    """The component a schema change is filed under: a config class's fields are flags', the factory's
    registrations connectors', a connector's keys that connector's."""
    if owner in engine_schema.NOTED_CONFIGS:
        return "flags"
    entry = next((e for e in knowledge.find(owner) if isinstance(e, Connector)), None)
    return release_notes.component_of(entry) if entry is not None else "connectors"


SPEC = ToolSpec(
    name="check_version",
    title="Check a vLLM version gate",
    description=(
        "Whether a vLLM or LMCache flag, config field, env variable, connector, metric or feature exists in a "
        "release, since when, its default and replacement; with compare_to, the KV-caching changes. Ask before "
        "recommending a flag."
    ),
    request=CheckVersionRequest,
    result=CheckVersionResult,
    run=check_version,
)
