"""Security advisories for vLLM, LMCache, NIXL and Mooncake: which ones hit a release, and the floor.

The facts come from the GitHub Advisory Database (``GET /advisories?ecosystem=pip&affects=NAME``)
through the same client as check_bug_status (`..github.GitHubClient`: deadline, retries, disk
cache with ETags, token from GITHUB_TOKEN / GH_TOKEN); when GitHub cannot be asked, from the stored
snapshot in ``knowledge/advisories.yaml``, and the answer says which, with the snapshot's date.

What the live list cannot say is kept from the snapshot: the conditions under which an advisory
applies (``requires``), and a fixed release read in the wheels where the advisory names none. An
advisory the snapshot does not know applies to every deployment until someone writes its
conditions down.

Lookups are three-valued, like the review rules: a condition the caller's `DeploymentFacts` leave
open (None) neither applies nor rules an advisory out, it stays "unknown" and is reported as such.
A release past an ``open_ended`` range with no known fix is "not_established": never reported clear.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import ValidationError

from .github import Deadline, Fetched, GitHubClient, GitHubError
from .http_client import FailureReason
from .knowledge import (
    PIP_NAMES,
    Advisory,
    AdvisoryPackage,
    AdvisoryRequires,
    AffectedRange,
    Cvss,
    Knowledge,
)
from .versions import Version, contains, parse_specifier

# Tests replace this with a factory that points at a stand-in server (as advice/bugs.py does).
client_factory: Callable[[], GitHubClient] = GitHubClient.from_env

Status = Literal["affected", "fixed", "not_affected", "not_established"]
Applies = Literal["yes", "no", "unknown"]
FLOOR_SEVERITIES: tuple[str, ...] = ("critical", "high")
MAX_PAGES = 10  # 100 advisories a page; vLLM had fewer than 300 in all by late 2026
_SEVERITY_ORDER = {"critical": 0, "high": 1, "medium": 2, "low": 3, "unknown": 4}
_STATUS_ORDER: dict[Status, int] = {"affected": 0, "not_established": 1, "fixed": 2, "not_affected": 3}


# ---------------------------------------------------------------------------------------------
# Whether an advisory applies to a deployment


@dataclasses.dataclass(frozen=True)
class DeploymentFacts:
    """What is known about a deployment; None means not known (the condition stays open).

    ``connectors`` are connector names as written in --kv-transfer-config (``NixlConnector``);
    ``configured`` are the flags and environment variables that are set (``--api-key``,
    ``VLLM_API_KEY``); ``components`` the KV backends in use (``lmcache``, ``mooncake``, ``nixl``).
    """

    components: frozenset[str] | None = None
    connectors: frozenset[str] | None = None
    configured: frozenset[str] | None = None
    engine: Literal["v0", "v1"] | None = None
    multi_node: bool | None = None
    multimodal: frozenset[str] | None = None
    endpoints: frozenset[str] | None = None
    architectures: frozenset[str] | None = None
    offload_tiers: frozenset[str] | None = None  # the native secondary tiers' types

    def closed(self) -> DeploymentFacts:
        """These facts with every open condition taken as not met: no such feature in use, the V1
        engine, one host."""
        empty: frozenset[str] = frozenset()
        open_as: dict[str, Any] = {"engine": "v1", "multi_node": False}
        return dataclasses.replace(
            self,
            **{f.name: open_as.get(f.name, empty) for f in dataclasses.fields(self) if getattr(self, f.name) is None},
        )


def applies_to(requires: AdvisoryRequires, facts: DeploymentFacts) -> tuple[Applies, tuple[str, ...]]:
    """Whether every condition holds: yes, no (one fails), or unknown, with the keys left open."""
    open_keys: list[str] = []
    for key in requires.given():
        wanted = getattr(requires, key)
        known = getattr(facts, key)
        if known is None:
            open_keys.append(key)
        elif isinstance(wanted, bool) or key == "engine":
            if known != wanted:
                return "no", ()
        elif not set(wanted) & set(known):
            return "no", ()
    return ("unknown", tuple(open_keys)) if open_keys else ("yes", ())


# ---------------------------------------------------------------------------------------------
# Whether a release has it


def range_status(r: AffectedRange, version: Version) -> Status:
    spec = parse_specifier(r.affected, field="affected")
    if contains(spec, version):
        return "affected"
    if r.fixed_in is not None and version >= r.fixed_in:
        return "fixed"
    if r.unfixed_through is not None and version <= r.unfixed_through and _past(spec, version):
        return "affected"
    if flaw_before_range(r, version):
        return "affected"
    if r.open_ended and _past(spec, version):
        return "not_established"
    return "not_affected"


def flaw_before_range(r: AffectedRange, version: Version) -> bool:
    """Whether ``version`` lies below the published range but at or after the release whose code already has
    the flaw (``flaw_present_from``, read in the wheels)."""
    if r.flaw_present_from is None or version < r.flaw_present_from:
        return False
    spec = parse_specifier(r.affected, field="affected")
    lowers = [Version(s.version) for s in spec if s.operator in (">", ">=")]
    return bool(lowers) and not contains(spec, version) and version < min(lowers)


def _past(spec: Any, version: Version) -> bool:
    """Whether ``version`` lies above a range that has an upper bound (and so is not in it)."""
    uppers = [Version(s.version) for s in spec if s.operator in ("<", "<=")]
    return bool(uppers) and not contains(spec, version) and all(version >= u for u in uppers)


def status_at(advisory: Advisory, version: Version) -> Status:
    """The worst status among the advisory's ranges: affected, not established, fixed, not affected."""
    return min((range_status(r, version) for r in advisory.ranges), key=_STATUS_ORDER.__getitem__)


def flaw_present_before(advisory: Advisory, version: Version) -> Version | None:
    """The release the code has the flaw from, when ``version`` is hit only below the published ranges."""
    if any(contains(parse_specifier(r.affected, field="affected"), version) for r in advisory.ranges):
        return None
    return next((r.flaw_present_from for r in advisory.ranges if flaw_before_range(r, version)), None)


def next_fix(advisory: Advisory, version: Version) -> Version | None:
    """The lowest fixed release above ``version``, if one is known."""
    fixes = [r.fixed_in for r in advisory.ranges if r.fixed_in is not None]
    later = [f for f in fixes if f > version]
    return min(later) if later else None


@dataclasses.dataclass(frozen=True)
class Finding:
    """An advisory that hits (or may hit) a release of a deployment."""

    advisory: Advisory
    status: Status  # "affected" or "not_established"
    applies: Applies  # "yes" or "unknown"
    open_conditions: tuple[str, ...]
    fixed_in: Version | None
    # Set when the release is hit only because its code has the flaw before the published range starts.
    flaw_present_from: Version | None = None

    def line(self) -> str:
        a = self.advisory
        ids = " / ".join(i for i in (a.ghsa, a.cve) if i)
        state = (
            f"fixed in {self.fixed_in}"
            if self.fixed_in is not None
            else "no fixed release known"
            if self.status == "affected"
            else "later releases not established clear"
        )
        if self.flaw_present_from is not None:
            state += f"; below the published range, but the code has the flaw from {self.flaw_present_from}"
        when = "" if self.applies == "yes" else f"; applies only if: {a.applies}"
        return f"{ids} [{a.severity}] {a.title} ({state}){when}"


def affecting(
    advisories: Iterable[Advisory], package: str, version: Version, facts: DeploymentFacts | None = None
) -> list[Finding]:
    """The advisories for ``package`` that hit ``version`` (or may: not established, conditions open),
    most severe first; advisories whose conditions the facts rule out are left out."""
    facts = facts or DeploymentFacts()
    found: list[Finding] = []
    for a in advisories:
        if a.package != package:
            continue
        status = status_at(a, version)
        if status not in ("affected", "not_established"):
            continue
        applies, open_keys = applies_to(a.requires, facts)
        if applies == "no":
            continue
        earlier = flaw_present_before(a, version)
        found.append(Finding(a, status, applies, open_keys, next_fix(a, version), earlier))
    return sorted(found, key=lambda f: (_SEVERITY_ORDER[f.advisory.severity], f.advisory.id))


@dataclasses.dataclass(frozen=True)
class Floor:
    """The lowest release from which on every known release is clear of the considered advisories.

    ``release`` is None when even the newest candidate is not clear; ``blockers`` then says what
    holds it (with the conditions under which each applies). No release and no blockers: no
    critical or high advisory applies, so no release is singled out. Candidates are the package's known
    releases, or, for a package the knowledge has no release line for, the advisories' fixed releases.
    """

    package: str
    release: Version | None
    considered: tuple[str, ...]
    blockers: tuple[Finding, ...]


def floor(
    advisories: Iterable[Advisory],
    package: str,
    releases: Sequence[Version] = (),
    facts: DeploymentFacts | None = None,
    severities: Sequence[str] = FLOOR_SEVERITIES,
) -> Floor:
    facts = facts or DeploymentFacts()
    considered = [
        a
        for a in advisories
        if a.package == package and a.severity in severities and applies_to(a.requires, facts)[0] != "no"
    ]
    candidates = sorted(set(releases)) or sorted(
        {r.fixed_in for a in considered for r in a.ranges if r.fixed_in is not None}
    )
    ids = tuple(a.id for a in considered)
    if not considered:
        return Floor(package, None, (), ())
    if not candidates:  # no release line and no fixed release: nothing is known to be clear
        unknown = tuple(Finding(a, "not_established", *applies_to(a.requires, facts), None) for a in considered)
        return Floor(package, None, ids, unknown)
    lowest: Version | None = None
    for candidate in reversed(candidates):
        if any(status_at(a, candidate) in ("affected", "not_established") for a in considered):
            break
        lowest = candidate
    blockers = () if lowest is not None else tuple(affecting(considered, package, candidates[-1], facts))
    return Floor(package, lowest, ids, blockers)


# ---------------------------------------------------------------------------------------------
# The list, live or stored


@dataclasses.dataclass(frozen=True)
class Provenance:
    source: Literal["live", "cache", "snapshot"]
    snapshot_checked_at: dt.date | None = None
    cache_age_seconds: float | None = None
    fallback_reason: FailureReason | None = None
    detail: str | None = None

    def text(self) -> str:
        why = f"; {self.fallback_reason.replace('_', ' ')}" if self.fallback_reason else ""
        if self.source == "live":
            return "GitHub Advisory Database, live"
        if self.source == "cache":
            return f"GitHub Advisory Database, cached {self.cache_age_seconds or 0.0:.0f} s ago{why}"
        return f"stored snapshot of {self.snapshot_checked_at or 'unknown date'}{why}"


@dataclasses.dataclass(frozen=True)
class AdvisoryList:
    package: str
    advisories: tuple[Advisory, ...]
    provenance: Provenance
    notes: tuple[str, ...] = ()


def stored(knowledge: Knowledge, package: AdvisoryPackage) -> tuple[Advisory, ...]:
    return tuple(a for a in knowledge.advisories.advisories if a.package == package)


def current_advisories(
    knowledge: Knowledge,
    package: AdvisoryPackage,
    *,
    offline: bool = False,
    deadline_seconds: float = 20.0,
    max_age: float | None = None,
) -> AdvisoryList:
    """The advisories for ``package``: GitHub's list now (or from the cache, within ``max_age`` seconds,
    by default the client's TTL), merged with the snapshot's conditions; the stored snapshot, dated,
    when GitHub cannot be asked within the deadline. A bad GitHub setting in the environment raises
    `ConfigError`, whose message names the variable."""
    snapshot = stored(knowledge, package)

    def from_snapshot(error: GitHubError) -> AdvisoryList:
        provenance = Provenance("snapshot", knowledge.advisories.checked_at, None, error.reason, error.detail)
        return AdvisoryList(package, snapshot, provenance)

    if offline:
        return from_snapshot(GitHubError("offline_requested", "offline mode: GitHub was not asked"))
    with client_factory() as client:
        try:
            pages, complete = _fetch(client, package, Deadline(deadline_seconds), max_age)
            items = [item for page in pages for item in page.body]
            withdrawn = {str(i.get("ghsa_id")) for i in items if isinstance(i, Mapping) and i.get("withdrawn_at")}
            live = [_from_github(i, package, client.scrub) for i in items if not _is_withdrawn(i)]
        except GitHubError as exc:
            return from_snapshot(exc)
    merged, notes = merge([a for a in snapshot if a.ghsa not in withdrawn], live)
    notes += [f"{ghsa}: withdrawn by GitHub; left out" for ghsa in sorted(withdrawn)]
    if not complete:
        notes.append(f"GitHub listed more than {MAX_PAGES} pages; later advisories not read")
    return AdvisoryList(package, tuple(merged), _provenance(pages), tuple(notes))


def _fetch(client: GitHubClient, package: str, deadline: Deadline, max_age: float | None) -> tuple[list[Fetched], bool]:
    query = urllib.parse.urlencode({"ecosystem": "pip", "affects": PIP_NAMES[package], "per_page": 100})
    pages: list[Fetched] = []
    url: str | None = f"/advisories?{query}"
    while url is not None and len(pages) < MAX_PAGES:
        page = client.get_json(url, deadline, max_age=max_age)
        if not isinstance(page.body, list):
            raise GitHubError("bad_response", "GitHub's advisory list is not a JSON list")
        pages.append(page)
        url = page.next_url
    return pages, url is None


def _provenance(pages: list[Fetched]) -> Provenance:
    cached = [p for p in pages if p.origin == "cache"]
    if not cached:
        return Provenance("live")
    fallback = next((p.fallback for p in pages if p.fallback is not None), None)
    return Provenance(
        "cache",
        cache_age_seconds=round(max(p.age_seconds for p in cached), 1),
        fallback_reason=fallback.reason if fallback else None,
        detail=fallback.detail if fallback else None,
    )


def merge(snapshot: Sequence[Advisory], live: Sequence[Advisory]) -> tuple[list[Advisory], list[str]]:
    """Live published facts, with the snapshot's conditions and wheel-read fixes; stored advisories
    GitHub does not list (a CVE without a GHSA id, say) are kept as stored."""
    by_id: dict[str, Advisory] = {}
    for a in snapshot:
        for identifier in (a.ghsa, a.cve):
            if identifier:
                by_id[identifier] = a
    merged: list[Advisory] = []
    matched: set[str] = set()
    notes: list[str] = []
    for a in live:
        known = next((by_id[i] for i in (a.ghsa, a.cve) if i and i in by_id), None)
        if known is None:
            merged.append(a)
            notes.append(f"{a.id}: new since the snapshot; its conditions are not curated, so it counts everywhere")
            continue
        matched.add(known.id)
        merged.append(_curated(known, a))
    for a in snapshot:
        if a.id not in matched:
            merged.append(a)
    return merged, notes


def _curated(known: Advisory, live: Advisory) -> Advisory:
    """The live advisory with the stored conditions; the stored ranges where GitHub names no fix and
    the snapshot read one (or its absence) in the wheels."""
    probed = any(r.fix_basis == "derived" or r.unfixed_through is not None for r in known.ranges)
    unfixed_live = any(r.fixed_in is None for r in live.ranges)
    return live.model_copy(
        update={
            "ghsa": live.ghsa or known.ghsa,
            "cve": live.cve or known.cve,
            "title": known.title,
            "requires": known.requires,
            "applies": known.applies,
            "residual": known.residual,
            "mitigation": known.mitigation,
            "ranges": known.ranges if probed and unfixed_live else _with_code_reading(live.ranges, known.ranges),
            "sources": tuple(dict.fromkeys((*known.sources, *live.sources))),
        }
    )


def _with_code_reading(live: tuple[AffectedRange, ...], known: tuple[AffectedRange, ...]) -> tuple[AffectedRange, ...]:
    """The live ranges, each with the ``flaw_present_from`` the snapshot read in the wheels for the range that
    ends at the same fix (GitHub publishes only the advisory's own range)."""
    earlier = {r.fixed_in: r.flaw_present_from for r in known if r.flaw_present_from is not None}
    return tuple(
        r.model_copy(update={"flaw_present_from": earlier[r.fixed_in]})
        if r.fixed_in in earlier and r.flaw_present_from is None
        else r
        for r in live
    )


# ---------------------------------------------------------------------------------------------
# GitHub's advisory JSON


def _from_github(item: Any, package: str, scrub: Callable[[str], str]) -> Advisory:
    """One entry of ``GET /advisories``; anything malformed fails the whole list (never a partial one)."""
    try:
        if not isinstance(item, Mapping):
            raise ValueError("an entry is not a JSON object")
        ranges = tuple(_ranges(item.get("vulnerabilities"), PIP_NAMES[package]))
        if not ranges:
            raise ValueError(f"{item.get('ghsa_id')!r} lists no range for {PIP_NAMES[package]}")
        published = str(item.get("published_at") or "")[:10]
        html_url = scrub(str(item.get("html_url") or f"https://github.com/advisories/{item.get('ghsa_id')}"))
        return Advisory.model_validate(
            {
                "ghsa": item.get("ghsa_id"),
                "cve": item.get("cve_id") or None,
                "package": package,
                "title": scrub(str(item.get("summary") or item.get("ghsa_id"))),
                "severity": item.get("severity"),
                "cvss": _cvss(item),
                "ranges": ranges,
                "applies": "Conditions not curated: taken to apply to every deployment.",
                "published": published,
                "sources": [html_url],
                "verified_at": dt.datetime.now(dt.UTC).date(),
            }
        )
    except (ValueError, TypeError, AttributeError, ValidationError) as exc:
        message = str(exc).splitlines()[0]
        raise GitHubError("bad_response", f"GitHub's advisory list has a malformed entry: {message}") from None


def _is_withdrawn(item: Any) -> bool:
    return isinstance(item, Mapping) and bool(item.get("withdrawn_at"))


def _ranges(vulnerabilities: Any, pip_name: str) -> Iterable[dict[str, Any]]:
    for v in vulnerabilities or ():
        pkg = v.get("package") or {}
        if pkg.get("ecosystem") != "pip" or str(pkg.get("name", "")).lower() != pip_name:
            continue
        patched = v.get("first_patched_version")
        yield {
            "affected": pep440_range(str(v.get("vulnerable_version_range") or "")),
            "fixed_in": patched or None,
            "open_ended": not patched,
        }


def pep440_range(text: str) -> str:
    """GitHub's ``">= 0.6.5, < 0.8.5"`` (or ``"= 0.9.0"``) as a PEP 440 range; raises on anything else."""
    parts = []
    for part in text.split(","):
        clause = part.strip().replace(" ", "")
        if clause.startswith("=") and not clause.startswith("=="):
            clause = "=" + clause
        parts.append(clause)
    spec = ",".join(parts)
    if not text.strip():
        raise ValueError("an advisory range is empty")
    parse_specifier(spec, field="vulnerable_version_range")
    return spec


def _cvss(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    metrics = [*(item.get("cvss_severities") or {}).values(), item.get("cvss")]
    for metric in metrics:
        if not isinstance(metric, Mapping) or not metric.get("vector_string"):
            continue
        vector = str(metric["vector_string"])
        version = vector.split("/", 1)[0].removeprefix("CVSS:")
        entry = {"version": version, "score": metric.get("score"), "vector": vector}
        Cvss.model_validate(entry)
        if entry not in found:
            found.append(entry)
    return found
