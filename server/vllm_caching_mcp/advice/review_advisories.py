"""Which published security advisories affect a workload: the facts of its deployment an advisory's
conditions name, and the findings and open questions it gives."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Literal

from .. import advisories as advisory_lookup
from ..knowledge import (
    Advisory,
    Knowledge,
)
from ..versions import Version
from .common import (
    components_of,
    security_floor,
)
from .deployment import (
    Effective,
    Workload,
    parse_number,
)
from .review_models import Finding, NotChecked, Severity, unfixed_fix

ADVISORY_RULE = "advisory."  # review_models.unfixed knows it too


ADVISORY_SEVERITY: dict[str, Severity] = {
    "critical": "error",
    "high": "error",
    "medium": "warning",
    "low": "info",
    "unknown": "info",
}


_MULTI_NODE_FLAGS = ("--headless", "--data-parallel-address", "--data-parallel-start-rank", "--master-addr")


_NEEDS = {
    "components": "the KV backend in use",
    "connectors": "the KV connector in use",
    "configured": "whether {values} is set",
    "engine": "which vLLM engine runs (V0 or V1)",
    "multi_node": "whether one engine spans several hosts",
    "multimodal": "whether the served model takes {values} input from callers",
    "endpoints": "whether the server exposes {values}",
    "architectures": "whether the served model is a {values}",
    "offload_tiers": "whether a {values} secondary offload tier is configured",
}


def advisory_rule_id(advisory: Advisory) -> str:
    return ADVISORY_RULE + advisory.id


def deployment_facts(effective: Effective, workload: Workload, knowledge: Knowledge) -> advisory_lookup.DeploymentFacts:
    """What the deployment shows about the advisories' conditions; what it cannot show stays None."""
    flags, env = effective.flags, effective.env
    version = Version(effective.version)
    unreadable = "--kv-transfer-config" in flags and effective.transfer_config is None
    connectors = None if unreadable else frozenset(c.name for c in effective.connectors)
    use_v1 = env.get("VLLM_USE_V1")
    engine: Literal["v0", "v1"] | None = None
    if version >= Version("0.11.0"):  # the V0 engine is gone from 0.11.0 on
        engine = "v1"
    elif use_v1 is not None and use_v1.value is not None and use_v1.value.strip() in ("0", "1"):
        engine = "v1" if use_v1.value.strip() == "1" else "v0"
    elif version < Version("0.8.0"):  # V1 became the default in 0.8.0
        engine = "v0"
    nnodes = flags.get("--nnodes")
    backend = flags.get("--distributed-executor-backend")
    multi_node: bool | None
    spans = nnodes is not None and parse_number(nnodes.value) not in (None, 1.0)
    if workload.nodes > 1 or spans or any(f in flags for f in _MULTI_NODE_FLAGS):
        multi_node = True
    elif backend is not None and str(backend.value).strip().lower() == "ray":
        multi_node = None  # a Ray cluster may span hosts
    else:
        multi_node = False
    if workload.options_unknown is not None:  # the command is not in the files: only what it cannot change is known
        return advisory_lookup.DeploymentFacts(engine=engine, multi_node=True if workload.nodes > 1 else None)
    return advisory_lookup.DeploymentFacts(
        components=None if connectors is None else components_of(knowledge, connectors),
        connectors=connectors,
        configured=frozenset(flags) | frozenset(env),
        engine=engine,
        multi_node=multi_node,
        offload_tiers=None if unreadable else frozenset(effective.tiers),
    )


def advisory_findings(
    knowledge: Knowledge,
    workload: Workload,
    effective: Effective,
    disabled: AbstractSet[str],
    not_checked: list[NotChecked],
    cache: dict[tuple[Version, advisory_lookup.DeploymentFacts], tuple[list[advisory_lookup.Finding], str | None]],
) -> tuple[list[Finding], str | None, int]:
    """The stored advisories that apply to this workload's release and configuration: findings for
    those whose conditions hold, not-checked entries for critical and high ones whose conditions the
    deployment cannot settle; the floor; how many medium or low ones were left open."""
    version = Version(effective.version)
    facts = deployment_facts(effective, workload, knowledge)
    if (version, facts) not in cache:  # workloads alike in release and configuration are looked up once
        stored = advisory_lookup.stored(knowledge, "vllm")
        floor_release = security_floor(knowledge, "vllm", facts).release
        cache[version, facts] = (
            advisory_lookup.affecting(stored, "vllm", version, facts),
            str(floor_release) if floor_release is not None else None,
        )
    hits, floor = cache[version, facts]
    where = effective.version_location or workload.location  # the image line or pip install the release is read from
    found: list[Finding] = []
    left_open = 0
    for hit in hits:
        a = hit.advisory
        rule_id = advisory_rule_id(a)
        if rule_id in disabled:
            continue
        if hit.applies != "yes":
            if a.severity in advisory_lookup.FLOOR_SEVERITIES:
                needs = _advisory_needs(a, hit.open_conditions)
                not_checked.append(NotChecked(rule_id=rule_id, workload=effective.workload, needs=needs))
            else:
                left_open += 1
            continue
        ids = " / ".join(i for i in (a.ghsa, a.cve) if i)
        state = (
            "is affected by" if hit.status == "affected" else "is past the published range, not established clear, of"
        )
        if hit.fixed_in is not None:
            fix = f"Upgrade vLLM to {hit.fixed_in} or later"
            fix += (
                f" (the security floor for this deployment is {floor})."
                if floor and Version(floor) > hit.fixed_in
                else "."
            )
        else:
            fix = unfixed_fix(a.mitigation)
        found.append(
            Finding(
                rule_id=rule_id,
                severity=ADVISORY_SEVERITY[a.severity],
                title=a.title,
                message=f"vLLM {version} {state} {ids} ({a.severity}): {a.title}; applies: {a.applies}",
                fix=fix,
                location=where,
                workload=effective.workload,
                why=f"{ids} ({a.severity}) affects vLLM {version}: {a.applies}",
                sources=list(a.sources),
            )
        )
    return found, floor, left_open


def _advisory_needs(advisory: Advisory, open_keys: tuple[str, ...]) -> list[str]:
    needs = []
    for key in open_keys:
        wanted = getattr(advisory.requires, key)
        values = " / ".join(map(str, wanted)) if isinstance(wanted, tuple) else str(wanted)
        needs.append(_NEEDS.get(key, key).format(values=values))
    return needs
