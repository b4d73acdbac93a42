"""What a review takes and answers: the request, findings, workload reports and the result."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails

from ..safe_text import join_lines
from .common import (
    Citation,
    Detail,
    Result,
    VersionContext,
)
from .deployment import (
    Documents,
    Location,
    UnreadLaunch,
)
from .deployment.model import VersionSource

Severity = Literal["error", "warning", "info"]


FailOn = Literal["error", "warning", "info", "never"]


RANK = {"info": 0, "warning": 1, "error": 2}


GIB = 1 << 30


class HostFacts(BaseModel):
    ram_gib: float | None = Field(default=None, gt=0, le=100_000, description="GiB per node")
    gpu: str | None = Field(
        default=None,
        max_length=100,
        description="e.g. 'H200'; else the node selector's",
    )


# The most documents one review takes; CI reviews more in batches (vllm_caching_mcp.review_batches).
MAX_REVIEW_DOCUMENTS = 50


class ReviewRequest(BaseModel):
    documents: Documents = Field(
        max_length=MAX_REVIEW_DOCUMENTS,
        description="shell, compose, Kubernetes, Helm values or LMCache YAML",
    )
    version: str | None = Field(
        default=None,
        max_length=40,
        description="when no image tag says it",
    )
    host: HostFacts | None = Field(default=None)
    p99_context_tokens: int | None = Field(default=None, gt=0, le=100_000_000)
    disabled_rules: list[str] = Field(
        default_factory=list,
        max_length=100,
        description="rule ids to skip",
    )
    detail: Detail = "summary"
    # For files picked by name (CI, pre-commit): a selection of every changed *.yaml often holds no
    # vLLM server at all (a workflow, a chart's other manifests); a hook must not fail on that.
    # No description in the listing (its byte cap): no documents, or none with a server, review clean.
    allow_empty: bool = False

    @model_validator(mode="after")
    def _documents_unless_allowed_empty(self) -> ReviewRequest:
        if not self.documents and not self.allow_empty:  # the error min_length=1 gives, which it cannot be here
            details = InitErrorDetails(
                type="too_short",
                loc=("documents",),
                input=self.documents,
                ctx={"field_type": "List", "min_length": 1, "actual_length": 0},
            )
            raise ValidationError.from_exception_data(type(self).__name__, [details])
        return self


class FindingPlace(BaseModel):
    location: Location
    workload: str


class Finding(BaseModel):
    rule_id: str
    severity: Severity
    title: str
    message: str = Field(description="what was found, with the values that triggered the rule")
    fix: str
    location: Location
    workload: str
    heuristic: str | None = Field(default=None, description="how the rule guessed, when the configuration cannot say")
    why: str = Field(description="why the rule holds: the mechanism in vLLM or LMCache that makes this a problem")
    premises: list[str] = Field(
        default_factory=list, description="the knowledge entries (facts checked against the wheels) the reason rests on"
    )
    sources: list[str]
    occurrences: int = Field(default=1, description="places with this same finding: this one and also_at's")
    also_at: list[FindingPlace] = Field(
        default_factory=list, description="the first few other places with it (detail: full lists each as its own)"
    )


class NotChecked(BaseModel):
    rule_id: str
    workload: str
    needs: list[str] = Field(description="the inputs that would settle the rule")


class WorkloadReport(BaseModel):
    name: str
    file: str
    vllm_version: str
    version_source: VersionSource
    version_location: Location | None = Field(default=None, description="where the release was read")
    model: str | None
    image: str | None
    connectors: list[str]
    offload_shorthand: bool
    tiers: list[str]
    gpu: str | None
    facts: dict[str, float]
    env_by_reference: list[str] = Field(description="variables whose value comes from elsewhere (valueFrom, host)")
    options_unknown: str | None = Field(
        default=None,
        description="why its vLLM options are not known: only its container was checked, and a --fail-on gate fails",
    )
    security_floor: str | None = Field(
        default=None,
        description="lowest vLLM release clear of every critical and high advisory that applies to this workload "
        "(stored advisory snapshot); null when the release is not known or no release is clear",
    )


class CacheServerReport(BaseModel):
    """An LMCache server the deployment runs beside vLLM (or alone): checked against its pod, not as vLLM."""

    name: str
    file: str
    image: str | None
    lmcache_version: str = Field(description="the LMCache release its command line was checked against")
    version_basis: str = Field(description="how that release is known, or why it is assumed")


class RuleInfo(BaseModel):
    id: str
    severity: Severity
    title: str
    versions: str = Field(description="vLLM releases the rule applies to; empty: all")
    heuristic: str | None
    why: str
    premises: list[str]
    fix: str


class ReviewResult(Result):
    version_context: VersionContext
    workloads: list[WorkloadReport]
    cache_servers: list[CacheServerReport] = Field(default_factory=list)
    findings: list[Finding]
    findings_left_out: int = Field(default=0, description="findings not listed to keep the answer short")
    workloads_left_out: int = Field(default=0, description="workloads not listed to keep the answer short")
    not_checked_left_out: int = Field(default=0, description="not-checked entries not listed")
    not_reviewed: list[UnreadLaunch] = Field(
        default_factory=list,
        description="documents that start vLLM in a way the review cannot read: nothing in them was checked, and "
        "a --fail-on gate fails on them",
    )
    not_checked: list[NotChecked]
    disabled_rules: list[str]
    rules_evaluated: int
    notes: list[str]
    citations: list[Citation]

    def summary(self) -> str:
        lines = [
            f"NOT REVIEWED {u.location}: it starts vLLM in a way this review cannot read ({u.text}); "
            "nothing in it was checked"
            for u in self.not_reviewed
        ]
        for w in self.workloads:
            source = {
                "image-tag": "from the image tag",
                "pip-install": "from a pip install",
                "stated": "as stated",
                "assumed-newest": "assumed: newest known",
            }
            conn = ", ".join(w.connectors) or "no KV connector"
            if w.options_unknown is not None:
                conn = "its options not known: only its container was checked"
            floor = f"; security floor {w.security_floor}" if w.security_floor else ""
            at = w.version_location  # the image line is plain to see; the install that replaces it is named
            read_at = f" at {at.file}:{at.line}" if at is not None and w.version_source == "pip-install" else ""
            lines.append(
                f"{w.name} ({w.file}): vLLM {w.vllm_version} ({source[w.version_source]}{read_at}); {conn}{floor}"
            )
        lines += [
            f"LMCache server {s.name} ({s.file}): LMCache {s.lmcache_version} ({s.version_basis})"
            for s in self.cache_servers
        ]
        counts = {s: sum(f.occurrences for f in self.findings if f.severity == s) for s in ("error", "warning", "info")}
        total = sum(counts.values())
        distinct = f" ({len(self.findings)} distinct)" if total != len(self.findings) else ""
        lines.append(
            f"{total} findings{distinct}: {counts['error']} errors, {counts['warning']} warnings, {counts['info']} info"
        )
        for f in self.findings:
            lines.append(f"{f.severity:7} {f.rule_id}  {f.location}")
            lines.append(f"        {f.message}")
            lines.append(f"        fix: {f.fix}")
            if f.occurrences > 1:
                more = f.occurrences - 1 - len(f.also_at)
                shown = ", ".join(str(p.location) for p in f.also_at) + (f" and {more} more" if more else "")
                lines.append(f"        also at: {shown}")
        left_out = [
            f"{n} {what}"
            for n, what in (
                (self.findings_left_out, "findings"),
                (self.workloads_left_out, "workloads"),
                (self.not_checked_left_out, "not-checked entries"),
            )
            if n
        ]
        if left_out:
            lines.append(f"not listed, to keep the answer short: {', '.join(left_out)} (detail: full lists them)")
        for n in self.not_checked:
            lines.append(f"not checked: {n.rule_id} ({n.workload}) needs {', '.join(n.needs)}")
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"warning: {w}" for w in self.version_context.warnings]
        return join_lines(lines)


# The fix of an advisory finding that no vLLM release fixes (review_advisories writes it): the mark by
# which a gate can leave such findings out, as scanners' --ignore-unfixed does.
# How the fix of an advisory no release fixes starts; its mitigation (knowledge/advisories.yaml) follows,
# else the general one.
UNFIXED_MARK = "No fixed vLLM release is known:"
UNFIXED_ADVISORY_FIX = f"{UNFIXED_MARK} keep what the advisory describes out of untrusted callers' reach."


def unfixed_fix(mitigation: str | None) -> str:
    """The fix of an advisory no release fixes: its mitigation, where the knowledge has one."""
    return f"{UNFIXED_MARK} {mitigation[:1].lower()}{mitigation[1:]}" if mitigation else UNFIXED_ADVISORY_FIX


def unfixed(finding: Finding) -> bool:
    """An advisory finding that no upgrade fixes: what its user can do is the mitigation, not a release."""
    return finding.rule_id.startswith("advisory.") and finding.fix.startswith(UNFIXED_MARK)


def exit_code(result: ReviewResult, fail_on: FailOn = "error", *, ignore_unfixed: bool = False) -> int:
    """1 when a finding is at or above ``fail_on`` (error > warning > info) or a document that starts vLLM
    could not be read (or only its container: Workload.options_unknown), else 0; 'never' always 0.
    ``ignore_unfixed`` leaves out advisory findings that no release fixes, so that a gate fails only on what
    its user can act on; they are still reported."""
    if fail_on == "never":
        return 0
    gated = [f for f in result.findings if not (ignore_unfixed and unfixed(f))]
    partly = any(w.options_unknown is not None for w in result.workloads)
    return int(bool(result.not_reviewed) or partly or any(RANK[f.severity] >= RANK[fail_on] for f in gated))
