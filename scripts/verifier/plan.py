"""Planning: which releases each probe runs on, and what it should see there."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vllm_caching_mcp.knowledge import (
    PRESENCE_PROBES,
    Advisory,
    Connector,
    Gated,
    Probe,
    Ranged,
    ReleaseLine,
    ReleaseMetadata,
    Setting,
    release_metadata_fact,
)
from vllm_caching_mcp.versions import SpecifierSet, Version, contains

from .probes import canonical_specifier, entry_probes
from .source import NotCheckable, Observation

RANGE_FIELD = {
    "subclass": "hma",
    "default": "defaults",
    "env_default": "defaults",
    "config_default": "defaults",
    "literal": "accepted_values",
}
HMA_EXPECTED = {"yes": True, "no": False}


@dataclass(frozen=True)
class AdvisoryFact:
    """An advisory as the verifier sees a fact: its ranges' probes say where the vulnerable code is."""

    advisory: Advisory
    aliases: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return self.advisory.id

    @property
    def name(self) -> str:
        return self.advisory.id

    @property
    def component(self) -> str:
        return self.advisory.package


@dataclass(frozen=True)
class ReleaseMetadataFact:
    """What releases.yaml records of one package's METADATA (its Requires-Python, or its Requires-Dist for the
    packages it lists), read in each release's wheel."""

    line: ReleaseLine
    field: ReleaseMetadata
    aliases: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return release_metadata_fact(self.line.package, self.field)

    @property
    def name(self) -> str:
        return "Requires-Python" if self.field == "requires_python" else "Requires-Dist"

    @property
    def component(self) -> str:
        return self.line.package


# What the verifier checks: an entry of the knowledge that exists in some releases, an advisory, or a
# package's recorded METADATA.
Fact = Gated | AdvisoryFact | ReleaseMetadataFact


@dataclass
class Check:
    entry: Fact
    probe: Probe
    package: str
    version: Version
    # What the release should show; a NotCheckable when the fact says nothing a probe can compare.
    expected: Any
    label: str  # what the fact says, for the report
    observed: Observation | None = None
    status: str = "pending"  # pass | fail | unknown
    reason: str = ""

    def describe(self) -> str:
        target = self.probe.target or self.entry.name
        return f"{self.probe.kind} {target!r} on {self.package} {self.version}"


def ranged_fields(entry: Gated) -> dict[str, tuple[Ranged, ...]]:
    """The entry's values that hold for a range of releases, by field name (``hma``, ``defaults``, ...)."""
    if isinstance(entry, Connector):
        return {"hma": entry.hma}
    if isinstance(entry, Setting):
        return {"defaults": entry.defaults, "accepted_values": entry.accepted_values}
    return {}


def stretches(releases: list[Version], key: Callable[[Version], object]) -> list[tuple[Version, Any]]:
    """The first and last release of each run of releases with the same expectation."""
    picked: list[tuple[Version, Any]] = []
    run: list[Version] = []
    current: Any = object()
    for version in [*releases, None]:
        value = key(version) if version is not None else object()
        if run and (version is None or value != current):
            picked.append((run[0], current))
            if run[-1] != run[0]:
                picked.append((run[-1], current))
            run = []
        if version is not None:
            run.append(version)
            current = value
    return picked


def _ranged_value(ranges: tuple[Ranged, ...], version: Version) -> Ranged | None:
    return next((r for r in ranges if contains(SpecifierSet(r.versions), version)), None)


def _expected(kind: str, value: Any) -> Any:
    if kind == "subclass":
        return HMA_EXPECTED.get(str(value), NotCheckable("support is conditional at run time"))
    if kind == "literal":
        return tuple(value) if isinstance(value, list | tuple) else (value,)
    return tuple(value) if isinstance(value, list) else value


def read_in_wheels(advisory: Advisory) -> bool:
    """Whether a range's end was read in the wheels (or has probes), so the verifier owes it a check."""
    return any(
        r.probes or r.fix_basis == "derived" or r.unfixed_through or r.flaw_present_from for r in advisory.ranges
    )


def advisory_plan(fact: AdvisoryFact, releases: dict[str, list[Version]]) -> list[Check]:
    """The vulnerable code is present in the last release a range covers, in ``unfixed_through`` and in
    ``flaw_present_from``, absent (unless ``absent_outside`` is false) in ``fixed_in``, the newest release
    and the known release before ``flaw_present_from``."""
    versions = releases.get(fact.component)
    if not versions:
        return []
    checks: list[Check] = []
    for r in fact.advisory.ranges:
        spec = SpecifierSet(r.affected)
        points: dict[Version, bool] = {}
        affected = [v for v in versions if contains(spec, v)]
        if affected:
            points[affected[-1]] = True
        if r.unfixed_through is not None and r.unfixed_through in versions:
            points[r.unfixed_through] = True
        if r.flaw_present_from is not None:
            # Read in the wheels, possibly before the releases the knowledge lists: its wheel is fetched the same way.
            points[r.flaw_present_from] = True
            before = [v for v in versions if v < r.flaw_present_from]
            if before:
                points.setdefault(before[-1], False)
        if r.fixed_in is not None:
            fixed = [v for v in versions if v >= r.fixed_in]
            for version in {fixed[0], fixed[-1]} if fixed else ():
                points.setdefault(version, False)
        for probe in r.probes:
            for version, present in sorted(points.items()):
                if present or probe.absent_outside:
                    label = "present" if present else "absent"
                    checks.append(Check(fact, probe, fact.component, version, present, label))
    return checks


def _presence_checks(entry: Gated, probe: Probe, versions: list[Version]) -> list[Check]:
    """A presence probe holds wherever the entry exists and (unless ``absent_outside`` is false) fails elsewhere."""

    def expect(v: Version) -> bool | None:
        present = entry.exists_in(v)
        return present if present or probe.absent_outside else None

    return [
        Check(entry, probe, entry.component, version, expected, "present" if expected else "absent")
        for version, expected in stretches(versions, expect)
        if expected is not None
    ]


def _value_checks(entry: Gated, probe: Probe, inside: list[Version]) -> list[Check]:
    """A value probe compares with the range's value at both ends of each stretch the value holds."""
    ranges = ranged_fields(entry).get(RANGE_FIELD[probe.kind], ())

    def value_at(v: Version) -> tuple[str, str] | None:
        ranged = _ranged_value(ranges, v)
        return None if ranged is None else (ranged.versions, repr(ranged.value))

    checks: list[Check] = []
    for version, key in stretches(inside, value_at):
        ranged = _ranged_value(ranges, version)
        if key is None or ranged is None:
            continue
        if any(p.kind == probe.kind for p in ranged.probes):
            continue  # the range brings its own probe of this kind
        expected = _expected(probe.kind, ranged.value)
        checks.append(Check(entry, probe, entry.component, version, expected, repr(ranged.value)))
    return checks


def _range_written_checks(entry: Gated, inside: list[Version]) -> list[Check]:
    """Probes written on one ranged value run only inside that range, at its first and last release."""
    checks: list[Check] = []
    for ranges in ranged_fields(entry).values():
        for ranged in ranges:
            spec = SpecifierSet(ranged.versions)
            chosen = [v for v in inside if contains(spec, v)]
            for probe in ranged.probes:
                for version in sorted({chosen[0], chosen[-1]}) if chosen else []:
                    if probe.kind in PRESENCE_PROBES:
                        checks.append(Check(entry, probe, entry.component, version, True, "present"))
                    else:
                        expected = _expected(probe.kind, ranged.value)
                        checks.append(Check(entry, probe, entry.component, version, expected, repr(ranged.value)))
    return checks


def release_metadata_plan(fact: ReleaseMetadataFact, releases: dict[str, list[Version]]) -> list[Check]:
    """Each stretch of releases with one recorded value, read at its first and last release: the Requires-Python,
    or each listed dependency's Requires-Dist range."""
    versions = releases.get(fact.component, [])
    if fact.field == "requires_python":
        python = {r.version: r.requires_python for r in fact.line.releases}
        targets: dict[str, dict[Version, str | None]] = {"": python}
    else:
        names = sorted({name for r in fact.line.releases for name in r.requires})
        targets = {name: {r.version: r.requires.get(name) for r in fact.line.releases} for name in names}
    checks: list[Check] = []
    for target, recorded in targets.items():
        probe = Probe(kind="requires_python" if fact.field == "requires_python" else "requires_dist", target=target)
        for version, value in stretches(versions, recorded.get):
            if value is not None:
                label = f"{target} {value}" if target else value
                checks.append(Check(fact, probe, fact.component, version, canonical_specifier(value), label))
    return checks


def plan(entry: Fact, releases: dict[str, list[Version]]) -> list[Check]:
    """Every (probe, release, expectation) the entry asks for."""
    if isinstance(entry, AdvisoryFact):
        return advisory_plan(entry, releases)
    if isinstance(entry, ReleaseMetadataFact):
        return release_metadata_plan(entry, releases)
    versions = releases.get(entry.component)
    if not versions:
        return []
    inside = [v for v in versions if entry.exists_in(v)]
    checks: list[Check] = []
    for probe in entry_probes(entry):
        if probe.kind in PRESENCE_PROBES:
            checks += _presence_checks(entry, probe, versions)
        else:
            checks += _value_checks(entry, probe, inside)
    return checks + _range_written_checks(entry, inside)
