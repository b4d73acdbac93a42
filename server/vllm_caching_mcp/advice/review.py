"""review_deployment: findings for a vLLM deployment, from rules kept as data.

A rule is a pitfall in `knowledge/pitfalls.yaml` with a `when:` condition. This module reads the
deployment (`deployment/`), works out each vLLM workload's effective configuration for its
release (the image tag's, else the stated one, else the newest known), and evaluates every rule
whose `versions` range holds with one small interpreter (`evaluate`). Conditions answer true,
false or *unknown* — unknown when they need an input nobody gave (host RAM, the GPU, the model,
the workload's context length); a rule fires only on true, and unknowns are reported as
"not checked" with what would settle them.

Outputs: the result model (JSON), `summary()` text, `to_sarif()` (SARIF 2.1.0) and `exit_code()`
for CI gates.

This module runs a review; what decides each part is beside it: review_conditions (whether a rule's
condition holds: `evaluate`, one evaluator a condition key in `EVALUATORS`), review_advisories (which
security advisories affect a workload), review_models (the request and result), review_sarif (SARIF)
and review_brief (the default answer's size).
"""

from __future__ import annotations

import difflib
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from .. import advisories as advisory_lookup
from ..knowledge import (
    Condition,
    Knowledge,
    Pitfall,
)
from ..versions import Version, as_text, in_range, parse_version
from .common import (
    AdviceError,
    ToolSpec,
    VersionContext,
    cite,
    resolve_version,
    snapshot_source,
)
from .deployment import (
    Deployment,
    Effective,
    NothingToReview,
    Workload,
    derived_image,
    find_gpu,
    parse_documents,
    resolve,
    resolve_cache_server,
)
from .deployment.bounds import clip
from .deployment.model import VersionSource
from .deployment.release import Release, lmcache_release, workload_release
from .deployment.server_cli import server_release
from .review_advisories import advisory_findings, advisory_rule_id
from .review_brief import in_brief
from .review_conditions import MAX_SUGGESTIONS, OPTIONS_UNKNOWN, Context, Outcome, Shared, evaluate, rules
from .review_models import (
    RANK,
    CacheServerReport,
    Finding,
    HostFacts,
    NotChecked,
    ReviewRequest,
    ReviewResult,
    RuleInfo,
    WorkloadReport,
    exit_code,
)
from .review_sarif import to_sarif

# The tool's interface, which the adapters, diagnose and the tests import from here; what decides
# each part is in review_conditions (rule conditions), review_advisories (security advisories),
# review_sarif (SARIF) and review_models (the request and result).
__all__ = [
    "SPEC",
    "Finding",
    "HostFacts",
    "ReviewRequest",
    "ReviewResult",
    "WorkloadReport",
    "exit_code",
    "list_rules",
    "review_deployment",
    "to_sarif",
]


def list_rules(knowledge: Knowledge) -> list[RuleInfo]:
    """Every review rule, in file order, for `vllm-caching review --list-rules`."""
    return [
        RuleInfo(
            id=p.id,
            severity=p.severity,
            title=p.title,
            versions=p.versions,
            heuristic=p.heuristic,
            why=" ".join(p.why.split()),
            premises=list(p.premises),
            fix=p.fix,
        )
        for p in rules(knowledge)
    ]


def review_deployment(request: ReviewRequest, knowledge: Knowledge) -> ReviewResult:
    """Findings for the deployment in ``request``; the request is not changed."""
    all_rules = rules(knowledge)
    _check_disabled_rules(request.disabled_rules, all_rules, knowledge)
    stated, context = resolve_version(knowledge, request.version, field="version")
    host = request.host or HostFacts()
    if host.gpu and find_gpu(knowledge, host.gpu) is None:
        names = ", ".join(g.name for g in knowledge.hardware.gpus)
        raise AdviceError("host.gpu", f"{host.gpu!r} is not a GPU the knowledge knows; known: {names}")
    if not request.documents:  # only with allow_empty: the request refuses no documents otherwise
        return _nothing_to_review(request, context)
    try:
        deployment = parse_documents(request.documents, knowledge)
    except NothingToReview:
        if not request.allow_empty:
            raise
        return _nothing_to_review(request, context)
    notes = list(deployment.notes)
    effectives = _resolve_workloads(deployment, knowledge, stated, context, host, notes)
    if effectives and all(e.version_source in ("image-tag", "pip-install") for e in effectives) and context.assumed:
        _, context = resolve_version(knowledge, effectives[0].version, field="version")
    shared = Shared()
    configuration = _rule_findings(request, deployment, effectives, all_rules, host, knowledge, shared)
    disabled = set(request.disabled_rules)
    security = _security_findings(knowledge, deployment, effectives, disabled, configuration.not_checked)
    notes += _closing_notes(knowledge, security, shared)
    result = ReviewResult(
        version_context=context,
        workloads=_workload_reports(deployment, effectives, security.floors),
        cache_servers=[_cache_server_report(s, knowledge) for s in deployment.cache_servers],
        findings=_as_rendered(configuration.findings, deployment) + security.findings,
        not_reviewed=deployment.unread,
        not_checked=configuration.not_checked,
        disabled_rules=list(request.disabled_rules),
        rules_evaluated=configuration.evaluated,
        notes=notes,
        citations=[cite(p.id, p, knowledge) for p in configuration.used.values()],
    )
    return result if request.detail == "full" else in_brief(result)


def _nothing_to_review(request: ReviewRequest, context: VersionContext) -> ReviewResult:
    """The clean review ``allow_empty`` makes of documents that hold nothing to review (or of none)."""
    notes = [f"{d.name}: no vLLM server found in it" for d in request.documents] or ["no files to review"]
    result = ReviewResult(
        version_context=context,
        workloads=[],
        findings=[],
        not_checked=[],
        disabled_rules=list(request.disabled_rules),
        rules_evaluated=0,
        notes=notes,
        citations=[],
    )
    return result if request.detail == "full" else in_brief(result)


def _check_disabled_rules(disabled: list[str], all_rules: list[Pitfall], knowledge: Knowledge) -> None:
    known_ids = {p.id for p in all_rules} | {advisory_rule_id(a) for a in advisory_lookup.stored(knowledge, "vllm")}
    for rule_id in disabled:
        if rule_id not in known_ids:
            close = difflib.get_close_matches(rule_id, sorted(known_ids), n=1)
            hint = f" Did you mean {close[0]}?" if close else ""
            raise AdviceError("disabled_rules", f"no rule has the id {rule_id!r}.{hint} List them with --list-rules.")


def _resolve_workloads(
    deployment: Deployment,
    knowledge: Knowledge,
    stated: Version,
    context: VersionContext,
    host: HostFacts,
    notes: list[str],
) -> list[Effective]:
    """Each workload's configuration for its release (the one its files say runs, else the stated one), with
    notes on where that release was read, where two places disagree, and a release the knowledge does not cover."""
    effectives: list[Effective] = []
    for workload in deployment.workloads:
        release = workload_release(workload, lambda python: as_text(knowledge.capped_by_python("vllm", python)))
        notes += [f"{workload.name}: {note}" for note in release.notes]
        if workload.options_unknown is not None:
            notes.append(
                f"{workload.name}: {workload.options_unknown}; only what reads none of its vLLM options was checked "
                "(its image, environment, mounts and secrets), and advisories only where no option decides them"
            )
        version, source = _workload_version(release, stated, context)
        if release.version is not None:
            notes += _release_notes(workload, release, version, stated, context, knowledge)
        effective = resolve(workload, deployment, knowledge, version, source, host.gpu)
        effective.version_location = release.location if release.version is not None else None
        lmcache = lmcache_release(workload)
        notes += [f"{workload.name}: {note}" for note in lmcache.notes]
        effective.lmcache_version = lmcache.version
        notes += effective.notes
        effectives.append(effective)
    return effectives


def _workload_version(release: Release, stated: Version, context: VersionContext) -> tuple[Version, VersionSource]:
    if release.version is not None and release.source is not None:
        return parse_version(release.version), release.source
    return stated, "assumed-newest" if context.assumed else "stated"


def _release_notes(
    workload: Workload,
    release: Release,
    version: Version,
    stated: Version,
    context: VersionContext,
    knowledge: Knowledge,
) -> list[str]:
    """Where the release was read, when that is worth saying: against the stated one, from a derived build's
    tag, or outside the releases the knowledge covers."""
    notes = []
    place = "the image tag" if release.source == "image-tag" else f"the pip install at {release.location}"
    if not context.assumed and version != stated:
        notes.append(f"{workload.name}: {place} says vLLM {version}, not the stated {stated}; reviewed for {version}")
    if release.source == "image-tag" and derived_image(workload.image):
        notes.append(
            f"{workload.name}: vLLM {version} read from the tag of {workload.image}, a build of vLLM (not "
            "vllm/vllm-openai itself) whose tag leads with the release it was built from; give version if it is not"
        )
    if version < knowledge.oldest():
        notes.append(
            f"{workload.name}: vLLM {version} from {place} is older than {knowledge.oldest()}, the oldest "
            "release the knowledge covers: its configuration is not judged (only advisories, whose ranges are "
            "published, and the checks no release changes: hygiene, ports, GPUs)"
        )
    elif version not in knowledge.release_versions():
        notes.append(f"{workload.name}: vLLM {version} from {place} is not a release the knowledge covers")
    return notes


# What makes two findings one: a place found wrong for several workloads (a proxy both roles use).
_FindingKey = tuple[str, str, int | None, str | None, str]
# Condition keys whose checks hold whatever the release: the deployment's hygiene and its objects
# against each other (ports, GPUs, the LMCache server it reaches).
_RELEASE_FREE = frozenset({"hygiene", "graph"})


def _key(finding: Finding) -> _FindingKey:
    where = finding.location
    return finding.rule_id, where.file, where.line, where.path, finding.message


@dataclass
class _RuleRun:
    """What the rules found over all the workloads."""

    findings: list[Finding] = field(default_factory=list)
    not_checked: list[NotChecked] = field(default_factory=list)
    used: dict[str, Pitfall] = field(default_factory=dict)
    evaluated: int = 0


def _rule_findings(
    request: ReviewRequest,
    deployment: Deployment,
    effectives: list[Effective],
    all_rules: list[Pitfall],
    host: HostFacts,
    knowledge: Knowledge,
    shared: Shared,
) -> _RuleRun:
    """Every rule whose releases hold each workload's, most severe findings first."""
    run = _RuleRun()
    found_at: dict[_FindingKey, Finding] = {}
    for workload, effective in zip(deployment.workloads, effectives, strict=True):
        version = Version(effective.version)
        # Before the oldest covered release only what no release changes is judged (hygiene, the objects
        # against each other): judged as another release, a flag or key would be called wrong.
        judged = version >= knowledge.oldest()
        ctx = Context(
            effective=effective,
            others=[o for o in effectives if o is not effective],
            knowledge=knowledge,
            version=version,
            host=host,
            p99_context_tokens=request.p99_context_tokens,
            proxies=deployment.proxies,
            shared=shared,
            start_problem=workload.start_problem,
            hygiene=workload.hygiene,
            workload=workload,
            deployment=deployment,
        )
        _run_rules(run, found_at, request, all_rules, ctx, workload, judged)
    newest = Version(effectives[0].version) if effectives else knowledge.newest()
    for server in deployment.cache_servers:
        effective = resolve_cache_server(server, knowledge, newest)
        ctx = Context(
            effective=effective,
            others=effectives,
            knowledge=knowledge,
            version=newest,
            host=host,
            p99_context_tokens=None,
            shared=shared,
            hygiene=server.hygiene,
            workload=server,
            deployment=deployment,
        )
        _run_rules(run, found_at, request, all_rules, ctx, server, judged=True)
    run.findings.sort(key=_severity_order)
    return run


def release_free(condition: Condition) -> bool:
    """A rule about the deployment's hygiene or its objects against each other (what else it tests only narrows it)."""
    if condition.key in _RELEASE_FREE:
        return True
    parts = [*(condition.all_ or ()), *(condition.any_ or ()), *((condition.not_,) if condition.not_ else ())]
    return any(release_free(part) for part in parts)


def _run_rules(
    run: _RuleRun,
    found_at: dict[_FindingKey, Finding],
    request: ReviewRequest,
    all_rules: list[Pitfall],
    ctx: Context,
    workload: Workload,
    judged: bool,
) -> None:
    """The rules whose releases hold the workload's and that are about its kind of process (vLLM, an LMCache
    server); not ``judged`` (a release older than the covered ones), only the checks no release changes."""
    effective = ctx.effective
    for rule in all_rules:
        if rule.id in request.disabled_rules or not in_range(rule.versions, ctx.version):
            continue
        if workload.role not in rule.subjects:
            continue
        assert rule.when is not None
        if not judged and not release_free(rule.when):
            continue
        run.evaluated += 1
        outcome = evaluate(rule.when, ctx, workload.flags)
        if outcome.value is None:
            needs = sorted(set(outcome.missing))
            if needs == [OPTIONS_UNKNOWN]:
                continue  # the workload's note says that what reads its options was not checked
            run.not_checked.append(NotChecked(rule_id=rule.id, workload=effective.workload, needs=needs))
            continue
        if not outcome.value:
            continue
        run.used[rule.id] = rule
        for finding in _rule_hits(rule, outcome, workload, effective):
            if _key(finding) in found_at:
                found_at[_key(finding)].workload += f", {effective.workload}"
            else:
                found_at[_key(finding)] = finding
                run.findings.append(finding)


def _rule_hits(rule: Pitfall, outcome: Outcome, workload: Workload, effective: Effective) -> list[Finding]:
    """One finding for each item the rule found (an unknown flag, a removed connector), or one in all."""
    groups = [[item, *outcome.evidence] for item in outcome.items] if outcome.items else [outcome.evidence]
    hits = []
    for group in groups:
        where = next((ev.location for ev in group if ev.location is not None), workload.location)
        detail = "; ".join(dict.fromkeys(ev.text for ev in group if ev.text))
        hits.append(
            Finding(
                rule_id=rule.id,
                severity=rule.severity,
                title=rule.title,
                message=f"{rule.title}: {detail}" if detail else rule.title,
                fix=rule.fix,
                location=where,
                workload=effective.workload,
                heuristic=rule.heuristic,
                why=" ".join(rule.why.split()),
                premises=list(rule.premises),
                sources=list(rule.sources),
            )
        )
    return hits


def _severity_order(finding: Finding) -> tuple[int, str, int, str]:
    return -RANK[finding.severity], finding.location.file, finding.location.line or 0, finding.rule_id


@dataclass
class _SecurityRun:
    """What the stored advisories say about the workloads whose release is known."""

    findings: list[Finding] = field(default_factory=list)
    floors: dict[str, str | None] = field(default_factory=dict)
    unversioned: list[str] = field(default_factory=list)
    left_open: int = 0


def _security_findings(
    knowledge: Knowledge,
    deployment: Deployment,
    effectives: list[Effective],
    disabled: AbstractSet[str],
    not_checked: list[NotChecked],
) -> _SecurityRun:
    """The advisories that apply to the workloads that run vLLM, most severe first: one finding for each
    advisory, file and release, at the first workload's place, naming every workload of the file on that
    release (replicas of one release, the roles of a P/D pair)."""
    run = _SecurityRun()
    seen: dict[tuple[str, str, str], Finding] = {}
    lookups: dict[tuple[Version, advisory_lookup.DeploymentFacts], tuple[list[advisory_lookup.Finding], str | None]]
    lookups = {}
    for workload, effective in zip(deployment.workloads, effectives, strict=True):
        if workload.source == "lmcache-config":  # an LMCache config alone: no vLLM server runs from it
            continue
        if effective.version_source == "assumed-newest":
            run.unversioned.append(effective.workload)
            continue
        hits, run.floors[effective.workload], open_count = advisory_findings(
            knowledge, workload, effective, disabled, not_checked, lookups
        )
        run.left_open += open_count
        for hit in hits:
            group = (hit.rule_id, workload.file, effective.version)
            if group not in seen:
                seen[group] = hit
                run.findings.append(hit)
            elif hit.workload not in seen[group].workload.split(", "):
                seen[group].workload += f", {hit.workload}"
    run.findings.sort(key=_severity_order)
    return run


def _closing_notes(knowledge: Knowledge, security: _SecurityRun, shared: Shared) -> list[str]:
    """Where the advisories come from and what they leave open, and what went unsuggested."""
    notes = []
    if security.floors:
        notes.append(
            f"security advisories: from the {snapshot_source(knowledge)}"
            + (
                f"; {security.left_open} medium or low ones may apply under conditions the deployment does not show"
                if security.left_open
                else ""
            )
        )
    if security.unversioned:
        notes.append(
            f"{', '.join(security.unversioned)}: the vLLM release is not known (no vllm/vllm-openai image tag, no "
            "pinned pip install, no version), so security advisories were not checked; that is not a finding that "
            "it is clear of them"
        )
    if shared.skipped:
        notes.append(
            f"closest options were looked for the first {MAX_SUGGESTIONS} unknown options only; "
            f"{shared.skipped} more are reported without one"
        )
    return notes


def _workload_reports(
    deployment: Deployment, effectives: list[Effective], floors: dict[str, str | None]
) -> list[WorkloadReport]:
    return [
        WorkloadReport(
            name=e.workload,
            file=w.file,
            vllm_version=e.version,
            version_source=e.version_source,
            version_location=e.version_location,
            model=e.model,
            image=e.image,
            connectors=[conn.name for conn in e.connectors],
            offload_shorthand=e.offload_shorthand,
            tiers=e.tiers,
            gpu=e.gpu,
            facts={name: value for name, value in e.facts.items()},  # FactName keys, as the plain names they are
            env_by_reference=[u.name for u in e.env.values() if u.value is None],
            options_unknown=w.options_unknown,
            security_floor=floors.get(e.workload),
        )
        for w, e in zip(deployment.workloads, effectives, strict=True)
    ]


def _as_rendered(findings: list[Finding], deployment: Deployment) -> list[Finding]:
    """Findings judged by what the files render or pass: none at a chart template's key whose content an action
    writes; one on a line passed only where a condition holds (a template's if/with/range, a shell
    `${VAR:+...}`) at most a warning that says so (a key written in two branches is not written twice)."""
    kept = []
    for finding in findings:
        file, line = finding.location.file, finding.location.line or 0
        if line in deployment.template_filled.get(file, set()):
            continue
        condition = deployment.conditional_lines.get(file, {}).get(line)
        if condition is None:
            kept.append(finding)
            continue
        if finding.rule_id == "pitfall.duplicate-yaml-key":
            continue
        said = f"{finding.message} (line {line}: {clip(condition, 120)})"
        kept.append(
            finding.model_copy(
                update={"severity": "warning" if finding.severity == "error" else finding.severity, "message": said}
            )
        )
    return kept


def _cache_server_report(server: Workload, knowledge: Knowledge) -> CacheServerReport:
    release = server_release(server.image, knowledge)
    basis = (
        f"assumed, {release.basis}" + (f": {release.because}" if release.because else "")
        if release.assumed
        else release.basis
    )
    return CacheServerReport(
        name=server.name,
        file=server.file,
        image=server.image,
        lmcache_version=str(release.version),
        version_basis=basis,
    )


SPEC = ToolSpec(
    name="review_deployment",
    title="Review a vLLM deployment for KV-caching mistakes",
    description=(
        "Reviews deployment files against version-gated KV-caching rules and security advisories; each finding"
        " has location, fix, sources. Release: the image tag, else `version`."
    ),
    request=ReviewRequest,
    result=ReviewResult,
    run=review_deployment,
)
