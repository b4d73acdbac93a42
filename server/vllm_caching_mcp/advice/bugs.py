"""check_bug_status: an upstream issue's live state, interpreted for the user's versions.

For each tracked bug (or any ``owner/repo#N`` / issue URL) the answer gives the tracker's state,
who closed it and whether that was a bot, the pull requests linked to it and whether they
merged, the first release containing the fix where that can be established, and the verdict
for the user's vLLM / LMCache release, with the knowledge's avoidance.

How the verdict is reached, strongest evidence first:

1. the knowledge's ``fixed_in`` (read from the released code): your release is at or past it,
   or it is not;
2. the knowledge's ``affected_versions``: your release is inside the range (affected), past a
   range that ends before a later known release (fixed, in the first release after the range),
   or before the range (not affected);
3. the tracker alone: open means it still affects you; closed as not planned or as a duplicate,
   or closed by a bot with no merged fix, means closed without a fix; closed with a merged fix
   whose merge came after your release was published means your release cannot contain it.
   A merge *before* your release does not prove the release has it (releases are cut from
   branches, days before publication), so that stays ``unknown`` and says why.

The live state comes from `..github` (cache first, then the network); when that fails the
stored snapshot from ``bugs.yaml`` answers, marked with its date and the reason.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from ..github import (
    ConfigError,
    Deadline,
    FailureReason,
    GitHubClient,
    GitHubError,
    InvalidReference,
    IssueRef,
    IssueStatus,
    is_bot_login,
    parse_issue_ref,
)
from ..knowledge import Bug, BugSnapshot, Component, Connector, FixedIn, Gated, Knowledge
from ..safe_text import join_lines
from ..versions import Version, contains, in_range, parse_specifier
from .common import (
    PRODUCT_LABELS,
    AdviceError,
    Citation,
    Detail,
    Package,
    Result,
    ToolSpec,
    VersionContext,
    cite,
    components_of,
    connector_names,
    resolve_version,
)

# Tests replace this with a factory that points at a stand-in server; it reads the token itself,
# so the token never travels through a request field.
client_factory: Callable[[], GitHubClient] = GitHubClient.from_env

Verdict = Literal["still_affects_you", "fixed_in_your_version", "closed_without_fix", "not_affected", "unknown"]
Source = Literal["live", "cache", "snapshot", "none"]
Relation = Literal["closes", "closed_it", "connected", "mentioned", "stored"]
# Pull requests that say "this fixed it": GitHub's closing reference, the merge that closed the
# issue, a sidebar link, or a link the knowledge curated. A mere mention is not enough.
_FIX_RELATIONS = {"closes", "closed_it", "connected", "stored"}


class CheckBugStatusRequest(BaseModel):
    bugs: list[Annotated[str, Field(min_length=3, max_length=300)]] | None = Field(
        default=None,
        max_length=50,
        description="'owner/repo#N' or issue URLs; omitted: every tracked bug",
    )
    version: str | None = Field(
        default=None,
        max_length=40,
        description="omitted: the newest known",
    )
    lmcache_version: str | None = Field(default=None, max_length=40, description="omitted: the newest")
    components: list[Component] | None = Field(
        default=None,
        max_length=10,
        description="engine and backends run ([] = plain vLLM): only issues concerning them",
    )
    connectors: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        default=None,
        max_length=50,
        description="as in --kv-transfer-config; add their backends",
    )
    offline: bool = Field(
        default=False,
        description="cache or snapshot only",
    )
    deadline_seconds: float = Field(
        default=20.0,
        ge=1.0,
        le=120.0,
    )
    detail: Detail = "summary"


class ClosedBy(BaseModel):
    login: str
    is_bot: bool = Field(description="a GitHub App ('[bot]') or a known stale bot: closing by a bot is not a fix")


class PullStatus(BaseModel):
    ref: str = Field(description="pr:OWNER/REPO#N")
    relation: Relation = Field(
        description="closes: GitHub's closing reference; closed_it: merged when the issue closed; connected: linked "
        "in the sidebar; mentioned: cross-referenced only; stored: listed in the knowledge snapshot"
    )
    merged: bool | None = Field(description="null when not known")
    merged_at: str | None = None


class FixRelease(BaseModel):
    package: str
    version: str
    basis: Literal["knowledge_fixed_in", "affected_range"] = Field(
        description="knowledge_fixed_in: recorded from the released code; affected_range: the first release after "
        "the knowledge's affected range"
    )


class Provenance(BaseModel):
    source: Source = Field(
        description="live: from GitHub now (or revalidated now); cache: the local cache; snapshot: the copy stored "
        "in bugs.yaml; none: nothing known"
    )
    cache_age_seconds: float | None = None
    snapshot_checked_at: dt.date | None = None
    fallback_reason: FailureReason | None = Field(
        default=None,
        description="why GitHub was not used: dns_failure, connection_refused, proxy_refused, timeout, rate_limited, …",
    )
    detail: str | None = None


class SnapshotChange(BaseModel):
    what: str
    stored: str | None
    now: str | None


class BugStatus(BaseModel):
    id: str = Field(description="OWNER/REPO#N")
    url: str
    tracked: bool = Field(description="whether the knowledge tracks this issue (and has an avoidance for it)")
    title: str | None
    state: Literal["open", "closed"] | None
    state_reason: str | None
    closed_at: str | None
    closed_by: ClosedBy | None
    linked_pulls: list[PullStatus]
    unnamed_links: int = Field(
        default=0, description="pull requests linked in the sidebar that the REST API does not name"
    )
    package: str | None = Field(description="the package whose release the verdict is for")
    your_version: str | None
    fixed_in: FixRelease | None
    fix_merged_at: str | None = Field(default=None, description="when the latest merged fix PR merged, if known")
    first_release_after_merge: str | None = Field(
        default=None,
        description="the first release published after that merge: the fix cannot be in any earlier release; "
        "whether this one contains it is not established",
    )
    verdict: Verdict
    verdict_reason: str
    affects: str | None
    avoidance: str | None
    changes_since_snapshot: list[SnapshotChange]
    provenance: Provenance
    notes: list[str] = Field(default_factory=list)
    citation: Citation | None


class LeftOutBug(BaseModel):
    id: str = Field(description="OWNER/REPO#N")
    concerns: list[str] = Field(description="what a deployment must run for the issue to concern it")


class BugBrief(BaseModel):
    """One issue as a default answer over every tracked issue carries it: the verdict and what to do."""

    id: str = Field(description="OWNER/REPO#N")
    verdict: Verdict
    title: str | None
    verdict_reason: str
    fixed_in: str | None = Field(description="the release with the fix, where established")
    avoidance: str | None = Field(description="what to do meanwhile; only where the issue may still bite")
    source: Source

    @classmethod
    def of(cls, status: BugStatus) -> BugBrief:
        return cls(
            id=status.id,
            verdict=status.verdict,
            title=status.title,
            verdict_reason=status.verdict_reason,
            fixed_in=f"{status.fixed_in.package} {status.fixed_in.version}" if status.fixed_in else None,
            avoidance=status.avoidance if status.verdict not in _CLEAR else None,
            source=status.provenance.source,
        )


# Verdicts under which the issue no longer concerns the release: no avoidance needed.
_CLEAR = frozenset({"fixed_in_your_version", "not_affected"})


class CheckBugStatusResult(Result):
    version_context: VersionContext
    lmcache_context: VersionContext
    stack: list[str] | None = Field(
        default=None,
        description="the components the tracked issues were chosen for (from components, connectors and "
        "lmcache_version); null: not filtered, every tracked issue is checked",
    )
    left_out: list[LeftOutBug] = Field(
        default_factory=list, description="tracked issues not checked because they do not concern `stack`"
    )
    bugs: list[BugStatus] = Field(description="each issue in full; empty when `listed` is brief")
    listed: Literal["all", "brief"] = Field(
        default="all",
        description="all: `bugs` has every issue in full; brief: every tracked issue was checked and `brief` has "
        "each one's verdict (detail: full, or naming the issues in `bugs`, lists them in full)",
    )
    brief: list[BugBrief] = Field(default_factory=list, description="every issue's verdict, when `listed` is brief")
    requests_made: int = Field(description="HTTP requests sent to GitHub for this answer")
    api_mode: Literal["graphql", "rest", "offline"]

    def summary(self) -> str:
        ctx, lm = self.version_context, self.lmcache_context
        releases = [f"vLLM {ctx.version}{' (assumed)' if ctx.assumed else ''}"]
        if self.stack is None or "lmcache" in self.stack:
            releases.append(f"LMCache {lm.version}{' (assumed)' if lm.assumed else ''}")
        chosen_for = f" concerning {', '.join(self.stack)}" if self.stack is not None else ""
        count = len(self.brief) if self.listed == "brief" else len(self.bugs)
        lines = [f"{', '.join(releases)}; {count} issue(s){chosen_for}, {self.requests_made} request(s) to GitHub"]
        if self.listed == "brief":
            lines += _brief_lines(self.brief)
        for b in self.bugs:
            lines.append("")
            lines.append(f"{b.id}  {b.verdict.upper().replace('_', ' ')}  [{_provenance_text(b.provenance)}]")
            if b.title:
                lines.append(f"  {b.title}")
            state: str = b.state or "state unknown"
            if b.state == "closed":
                state += f" ({b.state_reason or 'no reason given'})"
                if b.closed_at:
                    state += f" on {b.closed_at[:10]}"
                if b.closed_by:
                    state += f" by {b.closed_by.login}" + (" — a bot" if b.closed_by.is_bot else "")
            lines.append(f"  {state}")
            if b.linked_pulls:
                pulls = ", ".join(
                    f"{p.ref[3:]} ({'merged' if p.merged else 'not merged' if p.merged is False else 'merge unknown'}"
                    f", {p.relation})"
                    for p in b.linked_pulls
                )
                lines.append(f"  pull requests: {pulls}")
            lines.append(f"  {b.verdict_reason}")
            if b.avoidance and b.verdict != "fixed_in_your_version" and b.verdict != "not_affected":
                lines.append(f"  avoidance: {b.avoidance}")
            lines += [f"  changed since the snapshot: {c.what}: {c.stored} → {c.now}" for c in b.changes_since_snapshot]
            lines += [f"  note: {n}" for n in b.notes]
        if self.left_out:
            lines.append("")
            lines.append(
                f"left out, as they do not concern {', '.join(self.stack or [])}: "
                + ", ".join(f"{b.id} ({' + '.join(b.concerns)})" for b in self.left_out)
                + "; add the component to `components` to check them"
            )
        for context in (ctx, lm) if len(releases) == 2 else (ctx,):
            lines += [f"warning: {w}" for w in context.warnings]
        return join_lines(lines)


def _brief_lines(briefs: Sequence[BugBrief]) -> list[str]:
    """The issues that may still bite, each with its reason and avoidance; the clear ones by id; how to get more."""
    lines = []
    for b in briefs:
        if b.verdict in _CLEAR:
            continue
        lines.append(f"{b.id}  {b.verdict.upper().replace('_', ' ')}  [{b.source}]: {b.title or 'title unknown'}")
        lines.append(f"  {b.verdict_reason}")
        if b.avoidance:
            lines.append(f"  avoidance: {b.avoidance}")
    clear = [b for b in briefs if b.verdict in _CLEAR]
    if clear:
        lines.append(
            f"no longer concern this release ({len(clear)}): "
            + ", ".join(f"{b.id} ({b.verdict.replace('_', ' ')})" for b in clear)
        )
    lines.append("pull requests, closers and sources: detail: full, or name the issues in `bugs`")
    return lines


def _provenance_text(p: Provenance) -> str:
    if p.source == "live":
        return "live"
    why = f"; {p.fallback_reason.replace('_', ' ')}" if p.fallback_reason else ""
    if p.source == "cache":
        return f"cache, {_age_text(p.cache_age_seconds or 0.0)} old{why}"
    if p.source == "snapshot":
        return f"stored snapshot of {p.snapshot_checked_at}{why}"
    return f"nothing known{why}"


def _age_text(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# ---------------------------------------------------------------------------------------------
# What is known about one issue, from GitHub or from the snapshot


@dataclass
class _Observed:
    title: str | None
    state: Literal["open", "closed"] | None
    state_reason: str | None
    closed_at: str | None
    closed_by: ClosedBy | None
    pulls: list[PullStatus]
    unnamed_links: int
    url: str | None
    notes: list[str] = field(default_factory=list)


def _from_live(status: IssueStatus) -> _Observed:
    return _Observed(
        title=status.title or None,
        state=status.state,
        state_reason=status.state_reason,
        closed_at=status.closed_at.isoformat() if status.closed_at else None,
        closed_by=ClosedBy(login=status.closed_by, is_bot=status.closed_by_is_bot) if status.closed_by else None,
        pulls=[
            PullStatus(
                ref=p.ref,
                relation=p.relation,
                merged=p.merged,
                merged_at=p.merged_at.isoformat() if p.merged_at else None,
            )
            for p in status.pulls
        ],
        unnamed_links=status.unnamed_links,
        url=status.html_url or None,
        notes=list(status.notes),
    )


def _snapshot_closer(text: str | None) -> ClosedBy | None:
    if not text:
        return None
    login = text.split()[0]
    # The snapshot may describe the closer in words ("stale bot (as stated in #48224)").
    described_as_bot = " " in text.strip() and "bot" in text.lower().split(" (")[0]
    return ClosedBy(login=text, is_bot=is_bot_login(login) or described_as_bot)


def _from_snapshot(bug: Bug) -> _Observed:
    s = bug.snapshot
    return _Observed(
        title=bug.title,
        state=s.state,
        state_reason=s.state_reason,
        closed_at=s.closed_at.isoformat() if s.closed_at else None,
        closed_by=_snapshot_closer(s.closed_by),
        pulls=[PullStatus(ref=p.ref, relation="stored", merged=p.merged) for p in s.linked_pulls],
        unnamed_links=0,
        url=None,
    )


def _changes(snapshot: BugSnapshot, now: _Observed) -> list[SnapshotChange]:
    changes: list[SnapshotChange] = []

    def compare(what: str, stored: str | None, current: str | None) -> None:
        if stored != current:
            changes.append(SnapshotChange(what=what, stored=stored, now=current))

    compare("state", snapshot.state, now.state)
    if now.state == "closed" or snapshot.state == "closed":
        compare("state_reason", snapshot.state_reason, now.state_reason)
        compare(
            "closed_at",
            snapshot.closed_at.isoformat() if snapshot.closed_at else None,
            (now.closed_at or "")[:10] or None,
        )
        if now.closed_by is not None:
            compare("closed_by", snapshot.closed_by, now.closed_by.login)
    stored = {p.ref: p.merged for p in snapshot.linked_pulls}
    for pull in now.pulls:
        if pull.ref not in stored:
            merged = "merged" if pull.merged else "not merged" if pull.merged is False else "merge unknown"
            changes.append(SnapshotChange(what="new linked pull request", stored=None, now=f"{pull.ref} ({merged})"))
        elif pull.merged is not None and stored[pull.ref] != pull.merged:
            changes.append(
                SnapshotChange(what=f"{pull.ref} merged", stored=str(stored[pull.ref]), now=str(pull.merged))
            )
    return changes


# ---------------------------------------------------------------------------------------------
# The verdict


@dataclass(frozen=True)
class _VersionFacts:
    package: Package | None
    version: Version | None
    releases: list[tuple[Version, dt.date | None]]


def _package_of(bug: Bug | None, repo: str, knowledge: Knowledge) -> Package | None:
    """The package a bug's releases are counted in: its fixed_in or affected range, else its repo's."""
    candidates: list[Bug] = [bug] if bug is not None else []
    candidates += [b for b in knowledge.bugs if b.repo.lower() == repo.lower()]
    for candidate in candidates:
        packages = set(candidate.affected_versions) | ({candidate.fixed_in.package} if candidate.fixed_in else set())
        packages &= {"vllm", "lmcache"}
        if len(packages) == 1:
            return packages.pop()  # type: ignore[return-value]
    return None


def _fix_after_range(spec_text: str, releases: list[Version]) -> Version | None:
    """The first known release after an affected range that ends before the newest release."""
    return _first_release_after(spec_text, tuple(releases))


@functools.lru_cache(maxsize=1024)
def _first_release_after(spec_text: str, releases: tuple[Version, ...]) -> Version | None:
    spec = parse_specifier(spec_text)
    affected = [v for v in releases if contains(spec, v)]
    if not affected:
        return None
    last = max(affected)
    return next((v for v in releases if v > last), None)


@dataclass
class _Verdict:
    verdict: Verdict
    reason: str
    fixed_in: FixRelease | None = None
    fix_merged_at: str | None = None
    first_release_after_merge: str | None = None


def _judge(bug: Bug | None, seen: _Observed, facts: _VersionFacts, stored_refs: set[str]) -> _Verdict:
    """The verdict from the strongest evidence there is: fixed_in, then the affected range, then the tracker."""
    closure = _Closure.of(seen, stored_refs)
    package, version = facts.package, facts.version
    label = PRODUCT_LABELS.get(package or "", package or "")
    if bug is not None and bug.fixed_in is not None and version is not None and bug.fixed_in.package == package:
        spec_text = bug.affected_versions.get(bug.fixed_in.package)
        return _by_fixed_in(bug.fixed_in, spec_text, version, label, seen)
    spec_text = bug.affected_versions.get(package) if bug is not None and package is not None else None
    if spec_text and version is not None:
        known = [v for v, _ in facts.releases]
        return _by_affected_range(spec_text, package or "", version, label, known, closure)
    return _by_tracker(seen, closure, facts, label)


@dataclass(frozen=True)
class _Closure:
    """How the issue was closed, as far as a fix goes."""

    fix_pulls: list[PullStatus]  # merged pull requests that say they fixed it
    without_fix: bool  # closed as not planned or a duplicate, or by a bot, with no merged fix
    why_no_fix: str

    @classmethod
    def of(cls, seen: _Observed, stored_refs: set[str]) -> _Closure:
        fix_pulls = [p for p in seen.pulls if p.merged and (p.relation in _FIX_RELATIONS or p.ref in stored_refs)]
        dismissed = seen.state_reason in ("not_planned", "duplicate")
        by_bot = seen.closed_by is not None and seen.closed_by.is_bot
        if dismissed:
            how = f"closed as {(seen.state_reason or '').replace('_', ' ')}"
        elif seen.closed_by:
            how = f"closed by {seen.closed_by.login}, a bot"
        else:
            how = "closed"
        without_fix = seen.state == "closed" and not fix_pulls and (dismissed or by_bot)
        return cls(fix_pulls, without_fix, how + " with no merged fix")


def _by_fixed_in(fixed_in: FixedIn, spec_text: str | None, version: Version, label: str, seen: _Observed) -> _Verdict:
    """1. The knowledge's fixed_in, read from released code (and its affected range, if it has one)."""
    fixed = FixRelease(package=fixed_in.package, version=str(fixed_in.version), basis="knowledge_fixed_in")
    if version >= fixed_in.version:
        reason = f"fixed in {label} {fixed.version}; you run {version}"
        if seen.state == "open":
            reason += " (the issue is open upstream again: check that the fix covers your case)"
        return _Verdict("fixed_in_your_version", reason, fixed)
    if spec_text and not in_range(spec_text, version):
        return _Verdict("not_affected", f"affects {label} {spec_text} only; you run {version}", fixed)
    return _Verdict("still_affects_you", f"fixed in {label} {fixed.version}; you run {version}: upgrade", fixed)


def _by_affected_range(
    spec_text: str, package: str, version: Version, label: str, known: list[Version], closure: _Closure
) -> _Verdict:
    """2. The knowledge's affected range: inside it, past its end, or before it."""
    after = _fix_after_range(spec_text, known)
    if not in_range(spec_text, version):
        if after is not None and version >= after:
            return _Verdict(
                "fixed_in_your_version",
                f"affects {label} {spec_text}: fixed from {after}, the first release past that range; "
                f"you run {version}",
                FixRelease(package=package, version=str(after), basis="affected_range"),
            )
        return _Verdict("not_affected", f"affects {label} {spec_text} only; you run {version}")
    if after is not None and after > version:
        # The range ends: the first release past it no longer has the problem, however the issue closed.
        return _Verdict(
            "still_affects_you",
            f"{label} {version} is in the affected range {spec_text}; fixed from {after}: upgrade",
            FixRelease(package=package, version=str(after), basis="affected_range"),
        )
    beyond = (
        " (the range is open-ended: no release known to the knowledge fixes it)"
        if not any(v > version and not in_range(spec_text, v) for v in known)
        else ""
    )
    if closure.without_fix:
        return _Verdict(
            "closed_without_fix",
            f"{closure.why_no_fix}; {label} {version} is in the affected range {spec_text}{beyond}",
        )
    return _Verdict("still_affects_you", f"{label} {version} is in the affected range {spec_text}{beyond}")


def _by_tracker(seen: _Observed, closure: _Closure, facts: _VersionFacts, label: str) -> _Verdict:
    """3. The tracker alone: its state, how it closed, and when the fix merged against when the release shipped."""
    if seen.state is None:
        return _Verdict(
            "unknown", "the issue's state is not known (GitHub could not be asked and there is no snapshot)"
        )
    if seen.state == "open":
        return _Verdict("still_affects_you", "open upstream, with no fixed release recorded in the knowledge")
    if closure.without_fix:
        return _Verdict("closed_without_fix", f"{closure.why_no_fix}: the problem is not fixed, keep the avoidance")
    if not closure.fix_pulls:
        mentioned = [p.ref for p in seen.pulls if p.merged]
        extra = f"; merged pull requests that only mention it: {', '.join(mentioned)}" if mentioned else ""
        return _Verdict("unknown", f"closed as {seen.state_reason or 'closed'} but no merged fix is linked{extra}")
    pulls = ", ".join(p.ref for p in closure.fix_pulls)
    merged_times = [dt.datetime.fromisoformat(p.merged_at) for p in closure.fix_pulls if p.merged_at]
    if not merged_times or facts.package is None or facts.version is None:
        what = "no release line for this repository in the knowledge" if facts.package is None else "merge date unknown"
        return _Verdict(
            "unknown", f"fixed upstream by {pulls}; the release that contains it is not established ({what})"
        )
    return _by_merge_date(max(merged_times), pulls, facts.version, facts.releases, label)


def _by_merge_date(
    merged_at: dt.datetime, pulls: str, version: Version, releases: list[tuple[Version, dt.date | None]], label: str
) -> _Verdict:
    """A fix merged after the release was published cannot be in it; one merged before may or may not be."""
    after_merge = next((str(v) for v, d in releases if d is not None and d > merged_at.date()), None)
    published = next((d for v, d in releases if v == version), None)
    if published is not None and published < merged_at.date():
        return _Verdict(
            "still_affects_you",
            f"the fix ({pulls}) merged on {merged_at.date()}, after {label} {version} was published "
            f"({published}), so your release cannot contain it"
            + (f"; the earliest release that can is {after_merge}" if after_merge else ""),
            fix_merged_at=merged_at.isoformat(),
            first_release_after_merge=after_merge,
        )
    return _Verdict(
        "unknown",
        f"the fix ({pulls}) merged on {merged_at.date()}; whether {label} {version} contains it is not established "
        "(releases are cut from branches before they are published): check the release notes",
        fix_merged_at=merged_at.isoformat(),
        first_release_after_merge=after_merge,
    )


# ---------------------------------------------------------------------------------------------
# The tool


# The engine an issue's repository belongs to, and the KV backend it is, where it is one.
_ENGINE_OF_REPO = {"vllm-project/vllm": "vllm", "sgl-project/sglang": "sglang"}
_BACKEND_OF_REPO = {"lmcache/lmcache": "lmcache", "ai-dynamo/nixl": "nixl", "kvcache-ai/mooncake": "mooncake"}
_ENGINES = ("vllm", "sglang")


@dataclass(frozen=True)
class _Concern:
    """What a deployment must run for a tracked issue to concern it."""

    engine: str | None  # None: the issue is in a backend, whichever engine uses it
    backends: frozenset[str]

    @classmethod
    def of(cls, bug: Bug, knowledge: Knowledge) -> _Concern:
        """The repository's engine, and the backends of the repository and of the entries the issue relates to
        (a vLLM issue about NixlConnector concerns NIXL users only)."""
        repo = bug.repo.lower()
        related = [knowledge.by_id.get(entry_id) for entry_id in bug.related]
        connectors = [e.name for e in related if isinstance(e, Connector)]
        backends = set(components_of(knowledge, connectors))
        backends |= {e.component for e in related if isinstance(e, Gated) and e.component not in _ENGINES}
        if repo in _BACKEND_OF_REPO:
            backends.add(_BACKEND_OF_REPO[repo])
        return cls(engine=_ENGINE_OF_REPO.get(repo), backends=frozenset(backends))

    def within(self, stack: frozenset[str]) -> bool:
        engine_runs = self.engine is None or self.engine in stack
        return engine_runs and (not self.backends or bool(self.backends & stack))

    def names(self) -> list[str]:
        return [n for n in (self.engine, *sorted(self.backends)) if n is not None]


def _known_connectors(knowledge: Knowledge) -> dict[str, str]:
    """Each connector name and alias, lower-cased, to the name the knowledge gives it."""
    return {name.lower(): c.name for c in knowledge.connectors for name in (c.name, *c.aliases)}


def _stack(request: CheckBugStatusRequest, knowledge: Knowledge) -> frozenset[str] | None:
    """The components the deployment runs, from what the request says; None when it says nothing about them."""
    if request.components is None and request.connectors is None:
        return None
    stack: set[str] = set(request.components or ())
    for name in connector_names(request.connectors or (), _known_connectors(knowledge)):
        stack |= components_of(knowledge, [name])
    if request.lmcache_version is not None:
        stack.add("lmcache")  # an LMCache release was named: it is in use
    if not stack & set(_ENGINES):
        stack.add("vllm")  # the engine unsaid: this server is about vLLM
    return frozenset(stack)


def _concerning(
    bugs: Sequence[Bug], stack: frozenset[str] | None, knowledge: Knowledge
) -> tuple[list[Bug], list[LeftOutBug]]:
    """The tracked issues that concern the stack, and those left out with what they concern."""
    if stack is None:
        return list(bugs), []
    kept: list[Bug] = []
    left_out: list[LeftOutBug] = []
    for bug in bugs:
        concern = _Concern.of(bug, knowledge)
        if concern.within(stack):
            kept.append(bug)
        else:
            left_out.append(LeftOutBug(id=bug.id, concerns=concern.names()))
    return kept, left_out


def _requested_refs(request: CheckBugStatusRequest, tracked: Sequence[Bug], web_hosts: list[str]) -> list[IssueRef]:
    if not request.bugs:
        return [IssueRef(b.repo.split("/")[0], b.repo.split("/")[1], b.number) for b in tracked]
    refs: list[IssueRef] = []
    for index, text in enumerate(request.bugs):
        try:
            ref = parse_issue_ref(text, web_hosts=web_hosts)
        except InvalidReference as exc:
            raise AdviceError(
                f"bugs[{index}]", f"{exc}; write 'owner/repo#N' or https://{web_hosts[0]}/OWNER/REPO/issues/N"
            ) from None
        if ref not in refs:
            refs.append(ref)
    return refs


def check_bug_status(request: CheckBugStatusRequest, knowledge: Knowledge) -> CheckBugStatusResult:
    vllm_version, vllm_context = resolve_version(knowledge, request.version, field="version")
    lmcache_version, lmcache_context = resolve_version(
        knowledge, request.lmcache_version, package="lmcache", field="lmcache_version"
    )
    try:
        client = client_factory()
    except ConfigError as exc:
        name, _, message = str(exc).partition(": ")
        raise AdviceError(name, message) from None
    stack = _stack(request, knowledge)
    # Issues named in `bugs` are checked whatever the stack: they were asked for.
    chosen, left_out = _concerning(knowledge.bugs, None if request.bugs else stack, knowledge)
    with client:
        web_hosts = list(dict.fromkeys([client.settings.web_host, "github.com"]))
        refs = _requested_refs(request, chosen, web_hosts)
        tracked = {(b.repo.lower(), b.number): b for b in knowledge.bugs}
        client.offline = client.offline or request.offline
        mode: Literal["graphql", "rest", "offline"] = (
            "offline" if request.offline else "graphql" if client.has_token else "rest"
        )
        statuses = client.issue_statuses(refs, Deadline(request.deadline_seconds))
        requests_made = client.requests_made
        answers = []
        for ref in refs:
            bug = tracked.get((ref.full_repo.lower(), ref.number))
            package = _package_of(bug, ref.full_repo, knowledge)
            version = {"vllm": vllm_version, "lmcache": lmcache_version}.get(package or "")
            releases = [(r.version, r.date) for r in knowledge.releases[package].releases] if package else []
            answers.append(
                _answer(
                    ref,
                    bug,
                    statuses[ref],
                    _VersionFacts(package, version, releases),
                    client.settings.web_host,
                    knowledge,
                )
            )
    if request.bugs and stack is not None:
        _note_outside_stack(answers, tracked, stack, knowledge)
    # Every tracked issue in full runs to ~2 KB each; by default they come as their verdicts. Issues named in
    # `bugs` were asked about and come in full.
    brief = request.detail == "summary" and not request.bugs
    return CheckBugStatusResult(
        version_context=vllm_context,
        lmcache_context=lmcache_context,
        stack=sorted(stack) if stack is not None else None,
        left_out=left_out,
        bugs=[] if brief else answers,
        listed="brief" if brief else "all",
        brief=[BugBrief.of(a) for a in answers] if brief else [],
        requests_made=requests_made,
        api_mode=mode,
    )


def _note_outside_stack(
    answers: list[BugStatus], tracked: dict[tuple[str, int], Bug], stack: frozenset[str], knowledge: Knowledge
) -> None:
    """An issue asked for by name that does not concern the stack given says so (it is still answered)."""
    for answer in answers:
        repo, _, number = answer.id.rpartition("#")
        bug = tracked.get((repo.lower(), int(number)))
        if bug is None:
            continue
        concern = _Concern.of(bug, knowledge)
        if not concern.within(stack):
            answer.notes.append(
                f"concerns {' + '.join(concern.names())}, which the stack given ({', '.join(sorted(stack))}) "
                "does not run"
            )


def _answer(
    ref: IssueRef,
    bug: Bug | None,
    status: IssueStatus | GitHubError,
    facts: _VersionFacts,
    host: str,
    knowledge: Knowledge,
) -> BugStatus:
    stored_refs = {p.ref for p in bug.snapshot.linked_pulls} if bug else set()
    if isinstance(status, IssueStatus):
        seen = _from_live(status)
        provenance = Provenance(
            source=status.origin,
            cache_age_seconds=round(status.age_seconds, 1) if status.origin == "cache" else None,
            fallback_reason=status.fallback.reason if status.fallback else None,
            detail=status.fallback.detail if status.fallback else None,
        )
        changes = _changes(bug.snapshot, seen) if bug else []
    elif bug is not None:
        seen = _from_snapshot(bug)
        provenance = Provenance(
            source="snapshot",
            snapshot_checked_at=bug.snapshot.checked_at,
            fallback_reason=status.reason,
            detail=status.detail,
        )
        changes = []
    else:
        seen = _Observed(None, None, None, None, None, [], 0, None)
        provenance = Provenance(source="none", fallback_reason=status.reason, detail=status.detail)
        changes = []
    verdict = _judge(bug, seen, facts, stored_refs)
    notes = list(seen.notes)
    if seen.unnamed_links:
        notes.append(
            f"{seen.unnamed_links} pull request link(s) made in the sidebar are not named by the REST API; "
            "set GITHUB_TOKEN to read them through GraphQL"
        )
    if bug is None:
        notes.append("not tracked in the knowledge: there is no recorded avoidance or affected range")
    return BugStatus(
        id=str(ref),
        url=seen.url or f"https://{host}/{ref.owner}/{ref.repo}/issues/{ref.number}",
        tracked=bug is not None,
        title=seen.title or (bug.title if bug else None),
        state=seen.state,
        state_reason=seen.state_reason,
        closed_at=seen.closed_at,
        closed_by=seen.closed_by,
        linked_pulls=seen.pulls,
        unnamed_links=seen.unnamed_links,
        package=facts.package,
        your_version=str(facts.version) if facts.version is not None else None,
        fixed_in=verdict.fixed_in,
        fix_merged_at=verdict.fix_merged_at,
        first_release_after_merge=verdict.first_release_after_merge,
        verdict=verdict.verdict,
        verdict_reason=verdict.reason,
        affects=bug.affects if bug else None,
        avoidance=bug.avoidance if bug else None,
        changes_since_snapshot=changes,
        provenance=provenance,
        notes=notes,
        citation=cite(bug.id, bug, knowledge) if bug else None,
    )


SPEC = ToolSpec(
    name="check_bug_status",
    title="Check upstream bug status",
    description=(
        "Live state of upstream vLLM / LMCache / SGLang issues that bite tiered KV caching, judged for your release: "
        "fix release, avoidance. Offline: the stored snapshot."
    ),
    request=CheckBugStatusRequest,
    result=CheckBugStatusResult,
    run=check_bug_status,
    open_world=True,
)
