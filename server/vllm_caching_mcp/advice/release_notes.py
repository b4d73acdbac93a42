"""compare_to as release notes: the gated changes between two releases, deduplicated and grouped.

One upstream change usually touches several entries (the 0.23.0 LMCache switch moves a flag, two
connectors and two features). Events of one release are merged into one change when their entries
are one entry and its replacement, cite the same line of released code, name each other, have
nested ids (``spec.tier.obj.prefix`` under ``feature.tier-obj``), or are metrics introduced (or
removed) together. Each change belongs to one component, so an answer can be
filtered to what a deployment uses.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

from ..knowledge import Connector, Gated, Knowledge, Metric, Setting

ChangeComponent = Literal["native_offload", "lmcache", "nixl", "mooncake", "hma", "metrics", "flags", "connectors"]
COMPONENTS: tuple[ChangeComponent, ...] = (
    "native_offload", "lmcache", "nixl", "mooncake", "hma", "metrics", "flags", "connectors",
)  # fmt: skip
_TITLES: dict[ChangeComponent, str] = {
    "native_offload": "native offload",
    "lmcache": "LMCache",
    "nixl": "NIXL",
    "mooncake": "Mooncake",
    "hma": "hybrid KV cache manager (HMA)",
    "metrics": "metrics",
    "flags": "flags and environment",
    "connectors": "other connectors",
}
COMPONENTS_BY_SPECIFICITY: tuple[ChangeComponent, ...] = (
    "lmcache", "nixl", "mooncake", "hma", "native_offload", "connectors", "metrics", "flags",
)  # fmt: skip
# Components a deployment's connectors bring in; hma, metrics and flags concern every deployment.
_CONNECTOR_COMPONENT: dict[str, ChangeComponent] = {
    "connector.offloading": "native_offload",
    "connector.simple-cpu-offload": "native_offload",
    "connector.lmcache": "lmcache",
    "connector.lmcache-mp": "lmcache",
    "connector.nixl": "nixl",
    "connector.nixl-pull": "nixl",
    "connector.nixl-push": "nixl",
    "connector.mooncake": "mooncake",
    "connector.mooncake-store": "mooncake",
}
EVERY_DEPLOYMENT: frozenset[ChangeComponent] = frozenset({"hma", "metrics", "flags"})


def component_of(entry: Gated) -> ChangeComponent:
    """The one component a change of ``entry`` is filed under."""
    key = f"{entry.id} {entry.name}".lower()
    if isinstance(entry, Metric):
        return "metrics"
    if entry.id in _CONNECTOR_COMPONENT:
        return _CONNECTOR_COMPONENT[entry.id]
    for word, component in (("lmcache", "lmcache"), ("nixl", "nixl"), ("mooncake", "mooncake")):
        if word in key:
            return component  # type: ignore[return-value]
    if "hma" in key or "hybrid" in key:
        return "hma"
    if isinstance(entry, Setting) and entry.kind == "spec_key":
        return "native_offload"
    if any(word in key for word in ("offload", "tier", "cpu-bytes", "spec.")):
        return "native_offload"
    if isinstance(entry, Connector):
        return "connectors"
    return "flags"


def components_of_connectors(knowledge: Knowledge, names: Iterable[str]) -> tuple[set[ChangeComponent], list[str]]:
    """The components the named connectors bring in, and the names that are no known connector."""
    wanted: set[ChangeComponent] = set(EVERY_DEPLOYMENT)
    unknown: list[str] = []
    for name in names:
        found = [e for e in knowledge.find(name) if isinstance(e, Connector)]
        if not found:
            unknown.append(name)
        for connector in found:
            wanted.add(_CONNECTOR_COMPONENT.get(connector.id, "connectors"))
    return wanted, unknown


class ChangeEntry(BaseModel):
    """What one entry does in a change."""

    id: str
    name: str
    event: str


class ReleaseChange(BaseModel):
    """One upstream change, as release notes would list it: several entries it touched, one summary."""

    version: str = Field(description="first release in which the change holds")
    component: ChangeComponent
    summary: str
    entries: list[ChangeEntry]
    sources: list[str] = Field(description="the first few sources; check_version on an entry id gives all")


class _Linker:
    """Union-find over the events of one release."""

    def __init__(self, size: int) -> None:
        self.parent = list(range(size))

    def root(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def join(self, a: int, b: int) -> None:
        self.parent[self.root(a)] = self.root(b)


def _id_words(entry: Gated) -> frozenset[str]:
    return frozenset(re.split(r"[.\-_\[\]=]+", entry.id.split(".", 1)[-1])) - {""}


Event = tuple[Gated, str, str, str, tuple[str, ...]]  # entry, version, event, summary, sources


def _linked(x: Event, y: Event) -> bool:
    """Whether two events of one release are one change (see the module docstring)."""
    a, b = x[0], y[0]
    # `related` is not used: it links entries that matter together, not one change (a flag and the HMA switch).
    if a.id == b.id or b.id == a.replaced_by or a.id == b.replaced_by:
        return True
    lines = {s for s in x[4] if s.count(":") >= 3}  # wheel:pkg==v:path:line, not a whole file
    if lines & set(y[4]):
        return True
    # One event names the other's entry ('offload_prompt_only' in a feature's change), or one id
    # extends the other (spec.tier.obj.prefix under feature.tier-obj).
    if any(len(p[0].name) >= 8 and p[0].name in q[3] for p, q in ((x, y), (y, x))):
        return True
    words_a, words_b = _id_words(a), _id_words(b)
    if min(len(words_a), len(words_b)) >= 2 and (words_a <= words_b or words_b <= words_a):
        return True
    together = ("introduced", "removed", "deprecated")
    return isinstance(a, Metric) and isinstance(b, Metric) and x[2] == y[2] and x[2] in together


def group(events: list[Event]) -> list[ReleaseChange]:
    """Merge (entry, version, event, summary, sources) events into changes, per release and component."""
    changes: list[ReleaseChange] = []
    for version, batch_iter in itertools.groupby(events, key=lambda e: e[1]):
        batch = list(batch_iter)
        linker = _Linker(len(batch))
        for i, j in itertools.combinations(range(len(batch)), 2):
            if _linked(batch[i], batch[j]):
                linker.join(i, j)
        clusters: dict[int, list[int]] = {}
        for i in range(len(batch)):
            clusters.setdefault(linker.root(i), []).append(i)
        for members in clusters.values():
            changes.append(_change(version, [batch[i] for i in members]))
    order = {c: i for i, c in enumerate(COMPONENTS)}
    return sorted(changes, key=lambda c: (order[c.component], c.version))


def _change(version: str, members: list[Event]) -> ReleaseChange:
    # The lead is the feature (it says what changed for a user), else the first introduction, else the first.
    lead = next((m for m in members if type(m[0]).__name__ == "Feature"), None)
    lead = lead or next((m for m in members if m[2] == "introduced"), members[0])
    metrics = [m for m in members if isinstance(m[0], Metric)]
    summary = lead[3]
    if len(metrics) == len(members) and len(members) > 1:
        summary = f"{len(members)} metrics {lead[2]}: " + ", ".join(m[0].name for m in members)
    # A default that moves with the change is said too: the lead's words seldom carry it (0.14.0's native
    # shorthand: cpu_bytes_to_use, and --kv-offloading-backend defaulting to native).
    defaults = [m for m in members if m is not lead and m[2] == "default_changed" and m[3] not in summary]
    summary += "".join(f" {m[0].name}: {m[3]}" for m in dict((m[0].name, m) for m in defaults).values())
    sources = list(dict.fromkeys(s for m in members for s in m[4]))
    # Filed under the most specific component any member has: an LMCache change that also moves a flag is LMCache's.
    component = min((component_of(m[0]) for m in members), key=COMPONENTS_BY_SPECIFICITY.index)
    return ReleaseChange(
        version=version,
        component=component,
        summary=summary,
        entries=[ChangeEntry(id=m[0].id, name=m[0].name, event=m[2]) for m in members],
        sources=sources[:2],
    )


def headline(changes: list[ReleaseChange], low: str, high: str) -> list[str]:
    """The short summary first: how many changes, per component."""
    if not changes:
        return [f"No KV-caching change is recorded between {low} and {high}."]
    counts = {c: sum(1 for ch in changes if ch.component == c) for c in COMPONENTS}
    parts = [f"{_TITLES[c]} {n}" for c, n in counts.items() if n]
    entries = sum(len(c.entries) for c in changes)
    return [f"{len(changes)} changes ({entries} entries) between {low} and {high}: " + ", ".join(parts) + "."]


def title(component: ChangeComponent) -> str:
    return _TITLES[component]
