"""check_advisories: the security advisories of vLLM, LMCache, Mooncake or NIXL, live, for a release.

The list comes from the GitHub Advisory Database through `..advisories.current_advisories`: the
client check_bug_status uses (deadline, retries, disk cache, token from GITHUB_TOKEN / GH_TOKEN),
merged with the conditions the stored snapshot (``knowledge/advisories.yaml``) writes down; when
GitHub cannot be asked in time, or ``offline`` is set, the snapshot alone answers, dated, with
the reason. The offline tools (check_version, review_deployment, ...) read the snapshot only.

Each advisory gets a verdict for the release and the deployment conditions given, three-valued
like the lookups in `..advisories`: a condition left out stays open, and the advisory then
"applies only if" it holds; it is never dropped. The floor is the package's lowest release clear
of every critical and high advisory, open conditions taken as not met, with the ones still open
at it named.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from .. import advisories
from ..github import ConfigError, FailureReason
from ..knowledge import LEGACY_CONNECTORS, PIP_NAMES, Advisory, AdvisoryPackage, Component, Knowledge
from ..safe_text import join_lines
from ..verification import verification_state
from ..versions import Version, as_text, parse_version
from .common import (
    PRODUCT_LABELS,
    AdviceError,
    Citation,
    Result,
    ToolSpec,
    VersionContext,
    connector_names,
    first_few,
    resolve_version,
)

Verdict = Literal["applies", "applies_only_if", "not_in_this_release", "ruled_out"]
_VERDICT_ORDER: dict[Verdict, int] = {"applies": 0, "applies_only_if": 1, "not_in_this_release": 2, "ruled_out": 3}
_MAY_APPLY: frozenset[Verdict] = frozenset({"applies", "applies_only_if"})
_SEVERITY_ORDER = {"critical": 0, "high": 1, "medium": 2, "low": 3, "unknown": 4}
# Names, flags and paths a user types: a few dozen at most (max_length on each list), each one short.
Name = Annotated[str, Field(min_length=1, max_length=200)]


class CheckAdvisoriesRequest(BaseModel):
    """Which package and release, and what is known about the deployment (left out: not known)."""

    model_config = ConfigDict(extra="forbid")

    package: AdvisoryPackage = Field(
        default="vllm",
        description="mooncake = pip mooncake-transfer-engine",
    )
    version: str | None = Field(
        default=None,
        max_length=40,
        description="omitted: every advisory with its ranges",
    )
    components: list[Component] | None = Field(
        default=None,
        max_length=10,
    )
    connectors: list[Name] | None = Field(
        default=None,
        max_length=50,
        description="as in --kv-transfer-config",
    )
    configured: list[Name] | None = Field(
        default=None,
        max_length=50,
        description="flags and env vars set, e.g. --api-key; '=value' ignored",
    )
    engine: Literal["v0", "v1"] | None = Field(default=None, description="V0 is gone from 0.11.0")
    multi_node: bool | None = Field(default=None)
    multimodal: list[Literal["image", "video", "audio"]] | None = Field(
        default=None,
        max_length=3,
        description="inputs beyond text; [] = text only",
    )
    endpoints: list[Name] | None = Field(
        default=None,
        max_length=50,
        description="beyond chat and completions",
    )
    architectures: list[Name] | None = Field(
        default=None,
        max_length=50,
        description="e.g. Idefics3",
    )
    offload_tiers: list[Name] | None = Field(
        default=None,
        max_length=50,
        description="native tier types (fs, obj, p2p)",
    )
    include: Literal["serious", "relevant", "all"] = Field(
        default="serious",
        description="serious: critical/high that apply; relevant: all that may",
    )
    offline: bool = Field(default=False, description="snapshot only")
    deadline_seconds: float = Field(
        default=20.0,
        ge=1.0,
        le=120.0,
    )


class CvssScore(BaseModel):
    version: str = Field(description="3.0, 3.1 or 4.0")
    score: float
    vector: str


class AffectedRangeAnswer(BaseModel):
    affected: str = Field(description="the releases the advisory covers, as a PEP 440 range")
    fixed_in: str | None = Field(description="the first release with the fix, for this range; null: none known")
    fix_basis: Literal["published", "derived"] = Field(
        description="published: as the advisory says; derived: read in the released wheels where it names none"
    )
    open_ended: bool = Field(description="the range stops at the newest release of its day, not at a fix")
    flaw_present_from: str | None = Field(
        default=None,
        description="the first release whose code, read in the wheels, already has the flaw, where that is "
        "before the published range (those releases count as affected); left out when not read",
    )

    @model_serializer(mode="wrap")
    def _without_unread(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Most ranges were never read before their start: leaving the null out keeps long lists small.
        data: dict[str, Any] = handler(self)
        if data.get("flaw_present_from") is None:
            data.pop("flaw_present_from", None)
        return data


class AdvisoryAnswer(BaseModel):
    """One advisory, and whether it hits the release and deployment asked about."""

    id: str = Field(description="the GHSA id, else the CVE")
    ghsa: str | None
    cve: str | None
    severity: str = Field(description="critical, high, medium, low or unknown, as published")
    cvss_score: float | None = Field(description="the highest published CVSS score; null: none published")
    cvss: list[CvssScore]
    title: str
    ranges: list[AffectedRangeAnswer]
    fixed_in: str | None = Field(
        description="with `version`: the lowest release above it with the fix; without: the release from which on "
        "every range is fixed; null: no such release is known"
    )
    release_status: Literal["affected", "fixed", "not_affected", "not_established"] | None = Field(
        description="the release against the ranges: affected (inside one), fixed (at or past a fix), not_affected "
        "(before the ranges), not_established (past an open-ended range, no fix known); null: no version given"
    )
    verdict: Verdict = Field(
        description="applies: the release is hit and every condition holds (or it has none); applies_only_if: "
        "hit, if the conditions in only_if hold (they were not given); not_in_this_release: outside the affected "
        "ranges; ruled_out: a condition given rules it out. Without a version, about the affected releases."
    )
    open_conditions: list[str] = Field(description="the condition keys not given on which it depends")
    only_if: list[str] = Field(description="those conditions, with the values that make it apply")
    reason: str = Field(description="why the verdict, in one line")
    applies_when: str = Field(description="when it applies, in one plain line")
    residual: str | None = Field(description="what still holds after the fix")
    published: str
    source: str = Field(description="the advisory page")
    curated: bool = Field(
        description="whether the stored snapshot has it, with its conditions; false: new since the snapshot, "
        "taken to apply to every deployment"
    )
    citation: Citation | None = Field(description="the snapshot entry the conditions come from; null: not stored")

    def line(self) -> str:
        ids = " / ".join(i for i in (self.ghsa, self.cve) if i) or self.id
        score = f" {self.cvss_score:g}" if self.cvss_score is not None else ""
        fix = f"fixed in {self.fixed_in}" if self.fixed_in else "no fixed release known"
        if self.release_status == "not_established":
            fix = "later releases not established clear"
        when = f"; only if {'; '.join(self.only_if)}" if self.verdict == "applies_only_if" else ""
        return f"{ids} [{self.severity}{score}] {fix}: {self.title}{when}"


class AdvisoryFloor(BaseModel):
    """The package's security floor, from the same advisory list."""

    release: str | None = Field(
        description="the lowest release from which on every known release is clear of every critical and high "
        "advisory (conditions not given taken as not met); null: none is, or none is needed"
    )
    status: Literal["floor", "none_clear", "no_serious_advisory"] = Field(
        description="floor: `release` is set; none_clear: no known release is clear; no_serious_advisory: no "
        "critical or high advisory applies, so no release is singled out"
    )
    below_floor: bool | None = Field(description="whether `version` is below the floor; null: no version or no floor")
    considered: list[str] = Field(description="the critical and high advisories the floor is clear of (or not)")
    open_at_floor: list[str] = Field(
        description="critical or high advisories still open at the floor, or holding every release back, when "
        "conditions not given hold"
    )
    candidates: str = Field(description="which releases were tried")


class AdvisoryProvenance(BaseModel):
    source: Literal["live", "cache", "snapshot"] = Field(
        description="live: from the GitHub Advisory Database now; cache: its answer kept on disk; snapshot: the "
        "stored knowledge/advisories.yaml"
    )
    text: str = Field(description="the same in words, with the snapshot's date or the cache's age and the reason")
    snapshot_checked_at: dt.date | None = Field(description="the date of the stored snapshot the conditions come from")
    cache_age_seconds: float | None = None
    fallback_reason: FailureReason | None = Field(
        default=None,
        description="why GitHub's answer now was not used: offline_requested, rate_limited, timeout, "
        "connection_refused, dns_failure, server_error, bad_response, …",
    )
    detail: str | None = None


class CheckAdvisoriesResult(Result):
    package: AdvisoryPackage
    pip_name: str = Field(description="the package name the GitHub Advisory Database files it under (pip)")
    version: str | None = Field(description="the release judged; null: none was given")
    version_context: VersionContext | None = Field(
        description="what the knowledge's release line says about `version` (vLLM and LMCache only)"
    )
    conditions_given: dict[str, list[str] | bool | str] = Field(
        description="the deployment conditions given, as they were matched"
    )
    conditions_not_given: list[str] = Field(description="the conditions left open")
    advisories: list[AdvisoryAnswer] = Field(description="the advisories asked for (`include`): those that apply first")
    verdict_counts: dict[Verdict, int] = Field(description="how many of the package's advisories got each verdict")
    not_listed: int = Field(description="advisories counted in verdict_counts but left out of `advisories`")
    serious_only_if: list[str] = Field(
        default_factory=list,
        description="critical and high advisories that apply only if a condition not given holds, by id, whether "
        "listed in `advisories` or not",
    )
    include: Literal["serious", "relevant", "all"] = Field(
        default="serious", description="what `advisories` lists, as asked (the request's `include`)"
    )
    floor: AdvisoryFloor
    provenance: AdvisoryProvenance
    notes: list[str]

    def summary(self) -> str:
        label = PRODUCT_LABELS[self.package]
        counts = self.verdict_counts
        total = sum(counts.values())
        if self.version:
            head = f"{label} {self.version}: {total} advisories ({self.provenance.text}); "
            head += f"{counts['applies']} apply, {counts['applies_only_if']} only under conditions not given, "
            head += f"{counts['not_in_this_release']} not in this release, {counts['ruled_out']} ruled out"
        else:
            head = f"{label}, every release: {total} advisories ({self.provenance.text}); "
            head += f"{counts['applies']} apply to their affected releases, "
            head += f"{counts['applies_only_if']} only under conditions not given, {counts['ruled_out']} ruled out"
        lines = [head, f"security floor: {_floor_text(self.floor)}"]
        applying = [a for a in self.advisories if a.verdict == "applies"]
        if applying:
            lines.append(f"applies to {self.version}:" if self.version else "applies in the affected releases:")
            lines += [f"  {a.line()}" for a in applying]
        if self.include == "serious" and counts["applies"] > len(applying):
            lines.append(f"  and {counts['applies'] - len(applying)} medium or low")
        conditional = [a for a in self.advisories if a.verdict == "applies_only_if"]
        serious = [a for a in conditional if a.severity in advisories.FLOOR_SEVERITIES]
        if conditional:
            keys = dict.fromkeys(k for a in conditional for k in a.open_conditions)
            lines.append(f"applies only if a condition not given holds ({', '.join(keys)}):")
            lines += [f"  {a.line()}" for a in serious]
            if len(conditional) > len(serious):
                lines.append(f"  and {len(conditional) - len(serious)} medium or low (see `advisories`)")
        elif self.serious_only_if:
            lines.append(
                f"critical or high, applying only if a condition not given holds ({len(self.serious_only_if)}): "
                f"{', '.join(self.serious_only_if)}; the conditions not given settle them"
            )
        if self.not_listed:
            lines.append(_not_listed_text(self.include, self.not_listed, counts))
        lines += [f"note: {n}" for n in self.notes]
        if self.version_context is not None:
            lines += [f"warning: {w}" for w in self.version_context.warnings]
        return join_lines(lines)


def _not_listed_text(include: str, not_listed: int, counts: dict[Verdict, int]) -> str:
    """What `advisories` leaves out, and which `include` lists it."""
    if include != "serious":
        return f"{not_listed} that do not apply are not listed (include='all' lists them)"
    may_apply = counts["applies"] + counts["applies_only_if"]
    more = may_apply - (sum(counts.values()) - not_listed)  # may apply, beyond the serious ones listed
    parts = [f"{more} more that may apply (include='relevant' lists them)"] if more else []
    if not_listed > more:
        parts.append(f"{not_listed - more} that do not apply (include='all' lists them)")
    return "not listed: " + "; ".join(parts)


def _floor_text(floor: AdvisoryFloor) -> str:
    if floor.status == "no_serious_advisory":
        return "none needed (no critical or high advisory applies)"
    if floor.status == "none_clear":
        return f"none: no known release is clear of {first_few(floor.open_at_floor)}"
    text = str(floor.release) + (" (BELOW THE FLOOR)" if floor.below_floor else "")
    if floor.open_at_floor:
        text += f"; still open there where their conditions hold: {first_few(floor.open_at_floor)}"
    return text


# ---------------------------------------------------------------------------------------------
# The deployment conditions, as the advisories' conditions name them


def _connectors(given: Sequence[str], knowledge: Knowledge) -> frozenset[str]:
    """The given connectors under every name an advisory may list them by (their aliases; legacy names)."""
    spellings: dict[str, list[str]] = {n: [n] for n in LEGACY_CONNECTORS}
    spellings |= {c.name: [c.name, *c.aliases] for c in knowledge.connectors}
    known = {name.lower(): canonical for canonical, names in spellings.items() for name in names}
    return frozenset(name for canonical in connector_names(given, known) for name in spellings[canonical])


_FLAG = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_-]*$")
_ENV_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _configured(given: Sequence[str]) -> frozenset[str]:
    found: set[str] = set()
    for index, text in enumerate(given):
        # The value is dropped, not just ignored: a key set in VLLM_API_KEY=... must not reach the answer.
        name = text.strip().split("=", 1)[0]
        if _FLAG.match(name):
            found.add(name.replace("_", "-"))  # vLLM reads --api_key as --api-key
        elif _ENV_VAR.match(name):
            found.add(name)
        else:
            raise AdviceError(
                f"configured[{index}]",
                f"{name[:60]!r} is neither a flag (e.g. '--api-key') nor an environment variable (e.g. 'VLLM_API_KEY')",
            )
    return frozenset(found)


def _offload_tiers(given: Sequence[str], knowledge: Knowledge) -> frozenset[str]:
    known = sorted({str(r.value) for t in knowledge.recipes.tier_types for r in t.names})
    found: set[str] = set()
    for index, text in enumerate(given):
        name = text.strip().lower()
        if name not in known:
            raise AdviceError(f"offload_tiers[{index}]", f"{text[:60]!r} is not a tier type; known: {', '.join(known)}")
        found.add(name)
    return frozenset(found)


_HF_HEAD = re.compile(r"For[A-Z]\w*$")  # ForCausalLM, ForConditionalGeneration, ...


def _architectures(given: Sequence[str]) -> frozenset[str]:
    """The names as given, and without a Hugging Face head suffix: the advisories name the architecture."""
    return frozenset(n for text in given for n in (text.strip(), _HF_HEAD.sub("", text.strip())) if n)


def _endpoints(given: Sequence[str]) -> frozenset[str]:
    return frozenset((text.strip().rstrip("/") or "/") for text in given)


def deployment_facts(request: CheckAdvisoriesRequest, knowledge: Knowledge) -> advisories.DeploymentFacts:
    """The request's conditions as the advisories test them; a condition left out stays None (open)."""

    def given(values: Iterable[str] | None) -> frozenset[str] | None:
        return None if values is None else frozenset(values)

    r = request
    return advisories.DeploymentFacts(
        components=given(r.components),
        connectors=None if r.connectors is None else _connectors(r.connectors, knowledge),
        configured=None if r.configured is None else _configured(r.configured),
        engine=r.engine,
        multi_node=r.multi_node,
        multimodal=given(r.multimodal),
        endpoints=None if r.endpoints is None else _endpoints(r.endpoints),
        architectures=None if r.architectures is None else _architectures(r.architectures),
        offload_tiers=None if r.offload_tiers is None else _offload_tiers(r.offload_tiers, knowledge),
    )


def _as_given(facts: advisories.DeploymentFacts) -> dict[str, list[str] | bool | str]:
    shown: dict[str, list[str] | bool | str] = {}
    for field in dataclasses.fields(facts):
        value = getattr(facts, field.name)
        if value is not None:
            shown[field.name] = sorted(value) if isinstance(value, frozenset) else value
    return shown


def _own_package_in_use(listed: Iterable[Advisory], package: str) -> list[Advisory]:
    """The advisories with the condition "``package`` is in use" taken as met: asking for Mooncake's
    advisories is asking about a deployment that uses Mooncake. Other components stay as given."""
    kept = []
    for a in listed:
        components = a.requires.components
        if components is not None and package in components:
            a = a.model_copy(update={"requires": a.requires.model_copy(update={"components": None})})
        kept.append(a)
    return kept


# ---------------------------------------------------------------------------------------------
# One advisory's verdict


def _condition_text(advisory: Advisory, key: str) -> str:
    wanted = getattr(advisory.requires, key)
    if isinstance(wanted, tuple):
        return f"{key} includes {' or '.join(map(str, wanted))}"
    return f"{key} is {str(wanted).lower()}"


def _fix_for_all(advisory: Advisory) -> str | None:
    """The release from which on every range is fixed, if every range has a fix."""
    fixes = [r.fixed_in for r in advisory.ranges]
    if any(f is None for f in fixes):
        return None
    return str(max(f for f in fixes if f is not None))


@dataclasses.dataclass(frozen=True)
class _Judged:
    verdict: Verdict
    release_status: advisories.Status | None
    open_conditions: tuple[str, ...]
    only_if: tuple[str, ...]
    fixed_in: str | None
    reason: str


def judge(advisory: Advisory, version: Version | None, facts: advisories.DeploymentFacts) -> _Judged:
    applies, open_keys = advisories.applies_to(advisory.requires, facts)
    only_if = tuple(_condition_text(advisory, k) for k in open_keys)
    ranges = ", ".join(r.affected for r in advisory.ranges)
    if version is None:
        fixed_in = _fix_for_all(advisory)
        status = None
        hit = f"affects {ranges}" + (
            f", fixed from {fixed_in}" if fixed_in else ", no release known to fix every range"
        )
    else:
        next_fix = advisories.next_fix(advisory, version)
        fixed_in = str(next_fix) if next_fix is not None else None
        status = advisories.status_at(advisory, version)
        hit = {
            "affected": f"{version} is in the affected range {ranges}",
            "not_established": f"{version} is past the open-ended range {ranges}; no later release is known clear",
            "fixed": f"{version} has the fix (affected {ranges})",
            "not_affected": f"{version} is outside the affected range {ranges}",
        }[status]
        earlier = advisories.flaw_present_before(advisory, version)
        if earlier is not None:
            hit = f"{version} is below the published range {ranges}, but its code has the flaw (from {earlier} on)"
        if status in ("fixed", "not_affected"):
            return _Judged("not_in_this_release", status, (), (), fixed_in, hit)
    if applies == "no":
        needs = "; ".join(_condition_text(advisory, k) for k in advisory.requires.given())
        return _Judged(
            "ruled_out", status, (), (), fixed_in, f"{hit}, but it needs {needs}, which the conditions rule out"
        )
    if applies == "unknown":
        reason = f"{hit}; applies only if {'; '.join(only_if)}"
        return _Judged("applies_only_if", status, open_keys, only_if, fixed_in, reason)
    return _Judged("applies", status, (), (), fixed_in, hit)


def _source(advisory: Advisory) -> str:
    pages = [s for s in advisory.sources if s.startswith("https://")]
    return next((s for s in pages if s.startswith("https://github.com/advisories/")), pages[0] if pages else "")


def _citation(stored: Advisory, knowledge: Knowledge) -> Citation:
    return Citation(
        id=stored.id,
        sources=list(stored.sources),
        verified_at=stored.verified_at,
        evidence=stored.evidence,
        verification=verification_state(stored.id, knowledge.directory, stored.package),
    )


def _answer(advisory: Advisory, judged: _Judged, stored: Advisory | None, knowledge: Knowledge) -> AdvisoryAnswer:
    scores = [c.score for c in advisory.cvss]
    return AdvisoryAnswer(
        id=advisory.id,
        ghsa=advisory.ghsa,
        cve=advisory.cve,
        severity=advisory.severity,
        cvss_score=max(scores) if scores else None,
        cvss=[CvssScore(version=c.version, score=c.score, vector=c.vector) for c in advisory.cvss],
        title=advisory.title,
        ranges=[
            AffectedRangeAnswer(
                affected=r.affected,
                fixed_in=as_text(r.fixed_in),
                fix_basis=r.fix_basis,
                open_ended=r.open_ended,
                flaw_present_from=as_text(r.flaw_present_from),
            )
            for r in advisory.ranges
        ],
        fixed_in=judged.fixed_in,
        release_status=judged.release_status,
        verdict=judged.verdict,
        open_conditions=list(judged.open_conditions),
        only_if=list(judged.only_if),
        reason=judged.reason,
        applies_when=advisory.applies,
        residual=advisory.residual,
        published=advisory.published.isoformat(),
        source=_source(advisory),
        curated=stored is not None,
        citation=_citation(stored, knowledge) if stored is not None else None,
    )


# ---------------------------------------------------------------------------------------------
# The floor


def _floor(
    listed: Sequence[Advisory],
    package: AdvisoryPackage,
    version: Version | None,
    facts: advisories.DeploymentFacts,
    knowledge: Knowledge,
) -> AdvisoryFloor:
    releases = knowledge.release_versions(package)
    found = advisories.floor(listed, package, releases, facts.closed())
    if found.release is not None:
        serious = [a for a in listed if a.severity in advisories.FLOOR_SEVERITIES]
        still_open = [f for f in advisories.affecting(serious, package, found.release, facts) if f.applies != "yes"]
    else:
        still_open = list(found.blockers)
    status: Literal["floor", "none_clear", "no_serious_advisory"] = (
        "floor" if found.release is not None else "none_clear" if found.considered else "no_serious_advisory"
    )
    candidates = (
        f"the {PRODUCT_LABELS[package]} releases the knowledge covers, {releases[0]} – {releases[-1]}"
        if releases
        else f"the advisories' fixed releases (the knowledge has no {PRODUCT_LABELS[package]} release line)"
    )
    return AdvisoryFloor(
        release=str(found.release) if found.release is not None else None,
        status=status,
        below_floor=(version < found.release) if version is not None and found.release is not None else None,
        considered=list(found.considered),
        open_at_floor=[f.advisory.id for f in still_open],
        candidates=candidates,
    )


# ---------------------------------------------------------------------------------------------
# The tool


def _version(request: CheckAdvisoriesRequest, knowledge: Knowledge) -> tuple[Version | None, VersionContext | None]:
    if request.version is None:
        return None, None
    if not request.version.strip():
        raise AdviceError("version", "is empty; give a release such as '0.22.1', or leave it out for every advisory")
    if request.package in ("vllm", "lmcache"):
        return resolve_version(knowledge, request.version, package=request.package, field="version")
    try:
        return parse_version(request.version, field="version"), None
    except ValueError as exc:
        raise AdviceError("version", str(exc).split(": ", 1)[1]) from None


def _provenance(p: advisories.Provenance, knowledge: Knowledge) -> AdvisoryProvenance:
    return AdvisoryProvenance(
        source=p.source,
        text=p.text(),
        snapshot_checked_at=knowledge.advisories.checked_at,
        cache_age_seconds=p.cache_age_seconds,
        fallback_reason=p.fallback_reason,
        detail=p.detail,
    )


def _listed(verdict: Verdict, severity: str, include: Literal["serious", "relevant", "all"]) -> bool:
    """Whether `advisories` lists one. By default the decision's evidence only: the critical and high ones that
    certainly apply (a release's list runs to dozens, ~1.4 KB each); the conditional serious ones go by id."""
    if include == "all":
        return True
    if include == "relevant":
        return verdict in _MAY_APPLY
    return verdict == "applies" and severity in advisories.FLOOR_SEVERITIES


def _snapshot_entry(advisory: Advisory, stored: dict[str, Advisory]) -> Advisory | None:
    return next((stored[i] for i in (advisory.ghsa, advisory.cve) if i and i in stored), None)


def check_advisories(request: CheckAdvisoriesRequest, knowledge: Knowledge) -> CheckAdvisoriesResult:
    package = request.package
    version, context = _version(request, knowledge)
    facts = deployment_facts(request, knowledge)
    try:
        found = advisories.current_advisories(
            knowledge, package, offline=request.offline, deadline_seconds=request.deadline_seconds
        )
    except ConfigError as exc:
        name, _, message = str(exc).partition(": ")
        raise AdviceError(name, message) from None
    stored = {i: a for a in advisories.stored(knowledge, package) for i in (a.ghsa, a.cve) if i}
    listed = _own_package_in_use(found.advisories, package)
    judged = sorted(
        ((advisory, judge(advisory, version, facts)) for advisory in listed),
        key=lambda pair: (_VERDICT_ORDER[pair[1].verdict], _SEVERITY_ORDER[pair[0].severity], pair[0].id),
    )
    counts: dict[Verdict, int] = dict.fromkeys(_VERDICT_ORDER, 0)
    for _, verdict in judged:
        counts[verdict.verdict] += 1
    # Only what is listed is built into an answer (a release's list runs to dozens, most of them counted only).
    shown = [
        _answer(advisory, verdict, _snapshot_entry(advisory, stored), knowledge)
        for advisory, verdict in judged
        if _listed(verdict.verdict, advisory.severity, request.include)
    ]
    notes = list(found.notes)
    if not judged:
        notes.append(f"no published advisory names {PIP_NAMES[package]} (pip)")
    return CheckAdvisoriesResult(
        package=package,
        pip_name=PIP_NAMES[package],
        version=str(version) if version is not None else None,
        version_context=context,
        conditions_given=_as_given(facts),
        conditions_not_given=[f.name for f in dataclasses.fields(facts) if getattr(facts, f.name) is None],
        advisories=shown,
        verdict_counts=counts,
        not_listed=len(judged) - len(shown),
        serious_only_if=[
            a.id
            for a, verdict in judged
            if verdict.verdict == "applies_only_if" and a.severity in advisories.FLOOR_SEVERITIES
        ],
        include=request.include,
        floor=_floor(listed, package, version, facts, knowledge),
        provenance=_provenance(found.provenance, knowledge),
        notes=notes,
    )


SPEC = ToolSpec(
    name="check_advisories",
    title="Check security advisories, live",
    description=(
        "Security advisories (GHSA / CVE) of vllm, lmcache, mooncake or nixl, read live, judged for a release and "
        "deployment, with the security floor; omitted facts stay open, [] means none. check_version & co. give the "
        "stored snapshot's."
    ),
    request=CheckAdvisoriesRequest,
    result=CheckAdvisoriesResult,
    run=check_advisories,
    open_world=True,
)
