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
"""

from __future__ import annotations

import difflib
import itertools
import json
import re
import urllib.parse
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails

from .. import __version__
from .. import advisories as advisory_lookup
from ..knowledge import (
    Advisory,
    Comparison,
    Condition,
    FactName,
    Gated,
    Knowledge,
    Pitfall,
    Setting,
    ValueTest,
    ranged_at,
)
from ..safe_text import join_lines
from ..versions import Version, in_range, parse_version
from .common import (
    AdviceError,
    Citation,
    Detail,
    Result,
    ToolSpec,
    VersionContext,
    cite,
    components_of,
    resolve_version,
    security_floor,
    snapshot_source,
)
from .deployment import (
    Deployment,
    Documents,
    Effective,
    EnvUse,
    FlagUse,
    Location,
    NothingToReview,
    PerKnowledge,
    ProxyUse,
    UnreadLaunch,
    Workload,
    find_gpu,
    flag_bool,
    image_version,
    normalize_flag,
    parse_documents,
    parse_number,
    resolve,
)
from .review_brief import in_brief

Severity = Literal["error", "warning", "info"]
FailOn = Literal["error", "warning", "info", "never"]
_RANK = {"info": 0, "warning": 1, "error": 2}
GIB = 1 << 30


class HostFacts(BaseModel):
    ram_gib: float | None = Field(default=None, gt=0, le=100_000, description="GiB per node")
    gpu: str | None = Field(
        default=None,
        max_length=100,
        description="e.g. 'H200'; else the node selector's",
    )


class ReviewRequest(BaseModel):
    documents: Documents = Field(
        max_length=50,
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
    version_source: Literal["image-tag", "stated", "assumed-newest"]
    model: str | None
    image: str | None
    connectors: list[str]
    offload_shorthand: bool
    tiers: list[str]
    gpu: str | None
    facts: dict[str, float]
    env_by_reference: list[str] = Field(description="variables whose value comes from elsewhere (valueFrom, host)")
    security_floor: str | None = Field(
        default=None,
        description="lowest vLLM release clear of every critical and high advisory that applies to this workload "
        "(stored advisory snapshot); null when the release is not known or no release is clear",
    )


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
                "stated": "as stated",
                "assumed-newest": "assumed: newest known",
            }
            conn = ", ".join(w.connectors) or "no KV connector"
            floor = f"; security floor {w.security_floor}" if w.security_floor else ""
            lines.append(f"{w.name} ({w.file}): vLLM {w.vllm_version} ({source[w.version_source]}); {conn}{floor}")
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


# ---------------------------------------------------------------------------------------------
# The interpreter


@dataclass
class Evidence:
    text: str
    location: Location | None = None


@dataclass
class Outcome:
    """A condition's answer: True, False or None (unknown, with what is missing)."""

    value: bool | None
    evidence: list[Evidence] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    items: list[Evidence] = field(default_factory=list)  # one finding each (unknown flags, removed connectors)


# difflib compares an unknown option with each of some 400 known ones (half a millisecond): the
# closest is looked up once per name, and for this many names at most in one review.
MAX_SUGGESTIONS = 100


@dataclass
class Shared:
    """What the workloads of one review would each work out again: the known option closest to an
    unknown one, and each variable's values across the workloads (for env_differs)."""

    found: dict[str, str | None] = field(default_factory=dict)
    skipped: int = 0
    env_values: dict[str, tuple[list[tuple[Effective, EnvUse | None]], set[str | None]]] = field(default_factory=dict)

    def closest(self, name: str, accepted: AbstractSet[str]) -> str | None:
        if name in self.found:
            return self.found[name]
        if len(self.found) >= MAX_SUGGESTIONS:
            self.skipped += 1
            return None
        close = difflib.get_close_matches(name, sorted(accepted), n=1, cutoff=0.75)
        self.found[name] = close[0] if close else None
        return self.found[name]


@dataclass
class Context:
    effective: Effective
    others: list[Effective]
    knowledge: Knowledge
    version: Version
    host: HostFacts
    p99_context_tokens: int | None
    proxies: list[ProxyUse] = field(default_factory=list)
    shared: Shared = field(default_factory=Shared)
    start_problem: str | None = None  # why the workload's command never starts the server (Workload.start_problem)


def _env_text(use: Any) -> str:
    return f"{use.name}={use.value}" if use.value is not None else f"{use.name} (from {use.reference})"


def _value_test(test: ValueTest, value: str | None) -> bool:
    return value is not None and re.search(test.matches, value) is not None


# How a finding names a fact whose field name reads badly as words.
_FACT_LABELS = {
    "host_offload_gib": "pinned host GiB",
    "container_memory_limit_gib": "memory limit GiB",
    "container_memory_request_gib": "memory request GiB",
    "shm_gib": "/dev/shm GiB",
    "shm_offload_gib": "CPU tier in /dev/shm GiB",
    "worker_queues_shm_gib": "worker queues in /dev/shm GiB",
    "visible_gpus": "visible GPUs",
}


def _operand(text: str, ctx: Context) -> tuple[float | None, str, str | None]:
    """An operand's value, its label, and — when unknown for want of an input — that input."""
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text), text, None
    kind, _, name = text.partition(":")
    e = ctx.effective
    if kind == "flag":
        flag = e.flags.get(name)
        return (parse_number(flag.value) if flag else None), name, None
    if kind == "env":
        use = e.env.get(name)
        if use is not None and use.value is None:
            return None, name, f"the value of {name} (set from {use.reference})"
        return (parse_number(use.value) if use else None), name, None
    if kind == "fact":
        # the loader refused every name that is no FactName (knowledge.Comparison)
        return e.facts.get(cast(FactName, name)), _FACT_LABELS.get(name, name.replace("_", " ")), None
    if kind == "host":
        if name == "ram_gib":
            return ctx.host.ram_gib, "host RAM GiB", None if ctx.host.ram_gib else "host.ram_gib"
        if name == "gpu_hbm_gib":
            gpu = ctx.knowledge.by_id.get(e.gpu) if e.gpu else None
            hbm = getattr(gpu, "hbm_gb", None)
            value = hbm * 1e9 / GIB if hbm else None
            return value, "GPU memory GiB", None if value else "host.gpu (or a nvidia.com/gpu.product node selector)"
    if kind == "workload" and name == "p99_context_tokens":
        p99 = ctx.p99_context_tokens
        return (float(p99) if p99 else None), "p99 context tokens", None if p99 else "p99_context_tokens"
    raise ValueError(f"unknown operand {text!r}")


_ARITHMETIC = re.compile(r"\s+([-+*/])\s+")


def _apply(value: float, op: str, other: float) -> float | None:
    """One step of an expression, left to right; None for a division by zero."""
    if op == "/":
        return value / other if other else None
    return {"*": value * other, "+": value + other, "-": value - other}[op]


def _expression(text: str, ctx: Context) -> tuple[float | None, str, list[str], bool]:
    """Value, label, missing inputs, and whether an absent config value (not an input) left it empty.
    The operators apply left to right, so a headroom is written last: ``fact:x * 1.1 + 4``."""
    parts = _ARITHMETIC.split(text.strip())
    value, label, missing = _operand(parts[0], ctx)
    missing_inputs = [missing] if missing else []
    absent = value is None and not missing
    labels = [label]
    for op, operand in zip(parts[1::2], parts[2::2], strict=True):
        other, other_label, other_missing = _operand(operand, ctx)
        labels.append(f"{op} {other_label}")
        if other_missing:
            missing_inputs.append(other_missing)
        if other is None:
            absent = absent or not other_missing
            value = None
            continue
        if value is not None:
            value = _apply(value, op, other)
    return value, " ".join(labels), missing_inputs, absent


def _shown(label: str, value: float) -> str:
    label = label.strip()
    return f"{label} = {value:g}" if label and not re.fullmatch(r"[-+*/ \d.]+", label) else f"{value:g}"


def _compare(left: float, op: str, right: float) -> bool:
    close = abs(left - right) <= 1e-6 * max(1.0, abs(left), abs(right))
    return {
        "<": left < right and not close,
        "<=": left < right or close,
        ">": left > right and not close,
        ">=": left > right or close,
        "==": close,
        "!=": not close,
    }[op]


def _flag_items_unknown(ctx: Context, workload_flags: Sequence[FlagUse]) -> Outcome:
    accepted = ctx.knowledge.cli_inventory.accepted(ctx.version)
    if not accepted:
        return Outcome(None, missing=["the CLI inventory for this release (knowledge/cli_inventory.yaml is empty)"])
    items = []
    for flag in workload_flags:
        name = flag.name.split(".", 1)[0]
        stem = name[5:] if name.startswith("--no-") else None
        if name in accepted or (stem and "--" + stem in accepted) or _known_lifecycle_flag(ctx, name):
            continue
        if name == "--enable-hybrid-kv-cache-manager" and "--disable-hybrid-kv-cache-manager" in accepted:
            continue
        expansions = _abbreviation_of(name, accepted)
        if len(expansions) == 1:
            continue
        if expansions:
            could = ", ".join(expansions[:5]) + (f" and {len(expansions) - 5} more" if len(expansions) > 5 else "")
            text = f"{flag.written} is ambiguous in vLLM {ctx.version}: it could be {could}; write the option in full"
            items.append(Evidence(text, flag.location))
            continue
        close = ctx.shared.closest(name, accepted)
        hint = f"; did you mean {close}?" if close else ""
        items.append(Evidence(f"{flag.written} is not an option of vLLM {ctx.version}{hint}", flag.location))
    return Outcome(bool(items), items=items)


def _abbreviation_of(name: str, accepted: AbstractSet[str]) -> list[str]:
    """The long options ``name`` abbreviates, as argparse reads it: vLLM's parser keeps argparse's
    ``allow_abbrev`` on, so an unambiguous prefix is that option and an ambiguous one an error."""
    if not name.startswith("--") or len(name) < 3:
        return []
    found = {option for option in accepted if option.startswith(name)}
    if name.startswith("--no-"):  # --no-X exists for each switch --X (BooleanOptionalAction)
        found |= {option for option in accepted if ("--no-" + option[2:]).startswith(name)}
    return sorted(found)


def _known_lifecycle_flag(ctx: Context, name: str) -> Gated | None:
    """A flag the knowledge tracks whose lifecycle excludes this release (reported by flag_unavailable)."""
    stem = "--" + name[5:] if name.startswith("--no-") else name
    for entry in ctx.knowledge.find(stem):
        if entry.name.startswith("-") and entry.status_at(ctx.version) in ("removed", "not_yet"):
            return entry
    return None


def evaluate(condition: Condition, ctx: Context, workload_flags: Sequence[FlagUse]) -> Outcome:
    """True, false or unknown for this workload; ``workload_flags`` are its flags as written, in order."""
    key = condition.key
    return _EVALUATORS[key](getattr(condition, key), Asked(condition, ctx, workload_flags))


@dataclass(frozen=True)
class Asked:
    """What an evaluator may look at: the whole condition (for keys that share one evaluator), the
    workload's context, and its flags as written."""

    condition: Condition
    ctx: Context
    workload_flags: Sequence[FlagUse]

    def evaluate(self, inner: Condition) -> Outcome:
        return evaluate(inner, self.ctx, self.workload_flags)


def _not(inner: Condition, asked: Asked) -> Outcome:
    found = asked.evaluate(inner)
    return Outcome(None if found.value is None else not found.value, found.evidence, found.missing)


def _connector(names: tuple[str, ...], asked: Asked) -> Outcome:
    found = [u for u in asked.ctx.effective.connectors if u.name in names]
    return Outcome(bool(found), [Evidence(f"connector {u.name} (via {u.via})", u.location) for u in found])


def _tier(types: tuple[str, ...], asked: Asked) -> Outcome:
    e = asked.ctx.effective
    tiers = [t for t in e.tiers if t in types]
    return Outcome(bool(tiers), [Evidence(f"secondary tier {t}", e.transfer_location) for t in tiers])


def _connector_configured(wanted: bool, asked: Asked) -> Outcome:
    e = asked.ctx.effective
    evidence = [Evidence(f"connector {u.name} (via {u.via})", u.location) for u in e.connectors]
    return Outcome(bool(e.connectors) is wanted, evidence or [Evidence("no KV connector is configured")])


def _tier_unregistered(wanted: bool, asked: Asked) -> Outcome:
    """Each secondary tier whose type is not one the release registers (an out-of-tree tier named
    with module_path is imported instead, where the release reads module_path)."""
    ctx = asked.ctx
    names = ctx.knowledge.by_id.get("spec.tier.type")
    accepted = ranged_at(names.accepted_values, ctx.version) if isinstance(names, Setting) else None
    if accepted is None or not isinstance(accepted.value, tuple):
        return Outcome(not wanted)
    module_path = ctx.knowledge.by_id.get("spec.tier.module-path")
    imports = isinstance(module_path, Gated) and module_path.exists_in(ctx.version)
    items = []
    for extra in ctx.effective.extra_configs:
        listed = extra.get("secondary_tiers")
        for tier in listed if isinstance(listed, list) else []:
            kind = tier.get("type") if isinstance(tier, dict) else None
            if not isinstance(kind, str) or kind in accepted.value or (imports and tier.get("module_path")):
                continue
            known = ", ".join(accepted.value)
            text = f"secondary tier type {kind!r} is not registered in vLLM {ctx.version} (it registers {known})"
            items.append(Evidence(text, ctx.effective.transfer_location))
    return Outcome(bool(items) is wanted, items=items)


def _start_problem(wanted: bool, asked: Asked) -> Outcome:
    problem = asked.ctx.start_problem
    return Outcome((problem is not None) is wanted, [Evidence(problem)] if problem else [])


def _value_options(knowledge: Knowledge) -> frozenset[str]:
    """Options that take a value: switches (the inventory's, and the knowledge's boolean flags) do not,
    so a word expanding to nothing after one is harmless."""
    switches = {
        s.name for s in knowledge.settings if s.kind == "cli_flag" and (s.type or "").split("|")[0].strip() == "bool"
    }
    return frozenset(f.flag for f in knowledge.cli_inventory.flags if f.takes_value and f.flag not in switches)


_VALUE_OPTIONS = PerKnowledge(_value_options)
# The parser marks an option whose next word expanded to nothing with this. An empty word ('' or
# --x=) is an argument instead: optional types read it as None (the default), others refuse it
# (--max-model-len ''), which takes each option's type to tell apart; this rule leaves it alone.
_NO_ARGUMENT = "expected one argument"


def _flag_value_vanished(wanted: bool, asked: Asked) -> Outcome:
    """Each value-taking option (in full or as argparse's unambiguous prefix) whose value expanded to nothing."""
    ctx = asked.ctx
    accepted = ctx.knowledge.cli_inventory.accepted(ctx.version)
    takes_value = _VALUE_OPTIONS(ctx.knowledge)
    items = []
    for flag in asked.workload_flags:
        if flag.problem is None or _NO_ARGUMENT not in flag.problem:
            continue
        expansions = [flag.name] if flag.name in accepted else _abbreviation_of(flag.name, accepted)
        if len(expansions) == 1 and expansions[0] in takes_value:
            items.append(Evidence(f"{flag.written}: {flag.problem}", flag.location))
    return Outcome(bool(items) is wanted, items=items)


# One evaluator per condition key (the names of `Condition`'s fields): a new condition is a
# function taking the key's value and what was asked, and one entry here.
_EVALUATORS: dict[str, Callable[[Any, Asked], Outcome]] = {
    "all_": lambda parts, asked: _all([asked.evaluate(p) for p in parts]),
    "any_": lambda parts, asked: _any([asked.evaluate(p) for p in parts]),
    "not_": _not,
    "flag": lambda _, asked: _flag_state(asked.condition, asked.ctx),
    "flag_on": lambda _, asked: _flag_state(asked.condition, asked.ctx),
    "flag_off": lambda _, asked: _flag_state(asked.condition, asked.ctx),
    "flag_value": lambda test, asked: _flag_value(test, asked.ctx),
    "flag_unknown": lambda _, asked: _flag_items_unknown(asked.ctx, asked.workload_flags),
    "flag_unavailable": lambda skipped, asked: _flag_unavailable(skipped, asked.ctx, asked.workload_flags),
    "env": lambda name, asked: _env_set(name, asked.ctx),
    "env_value": lambda test, asked: _env_value(test, asked.ctx),
    "env_differs": lambda name, asked: _env_differs(asked.ctx, name),
    "connector": _connector,
    "connector_hma": lambda support, asked: _connector_hma(support, asked.ctx),
    "connector_unavailable": lambda skipped, asked: _connector_unavailable(skipped, asked.ctx),
    "offload_shorthand": lambda wanted, asked: _offload_shorthand(wanted, asked.ctx),
    "pd_proxy_mismatch": lambda wanted, asked: _pd_proxy_mismatch(wanted, asked.ctx),
    "extra_config": lambda test, asked: _extra_config(test, asked.ctx),
    "tier": _tier,
    "tier_unregistered": _tier_unregistered,
    "connector_configured": _connector_configured,
    "model_matches": lambda pattern, asked: _model_matches(pattern, asked.ctx),
    "gpu_segment": lambda segments, asked: _gpu_segment(segments, asked.ctx),
    "compare": lambda comparison, asked: _comparison(comparison, asked.ctx),
    "entry_unavailable": lambda entry_id, asked: _entry_unavailable(entry_id, asked.ctx),
    "entry_deprecated": lambda entry_id, asked: _entry_deprecated(entry_id, asked.ctx),
    "start_problem": _start_problem,
    "flag_value_vanished": _flag_value_vanished,
}


def _all(parts: list[Outcome]) -> Outcome:
    """False when one part is false, else unknown when one is, else true with every part's evidence."""
    if any(p.value is False for p in parts):
        return Outcome(False)
    if any(p.value is None for p in parts):
        return Outcome(None, missing=[m for p in parts for m in p.missing])
    return Outcome(True, [ev for p in parts for ev in p.evidence], items=[i for p in parts for i in p.items])


def _any(parts: list[Outcome]) -> Outcome:
    """True with the true parts' evidence, else unknown when one part is, else false."""
    true = [p for p in parts if p.value]
    if true:
        return Outcome(True, [ev for p in true for ev in p.evidence], items=[i for p in true for i in p.items])
    if any(p.value is None for p in parts):
        return Outcome(None, missing=[m for p in parts for m in p.missing])
    return Outcome(False)


def _flag_state(c: Condition, ctx: Context) -> Outcome:
    """``flag`` (given at all), ``flag_on`` (bare, true or non-zero) or ``flag_off`` (--no-X, false or 0)."""
    name = normalize_flag(c.flag or c.flag_on or c.flag_off or "")
    flag = ctx.effective.flags.get(name)
    here = (
        [Evidence(f"{flag.written}" + (f" {flag.value}" if isinstance(flag.value, str) else ""), flag.location)]
        if flag
        else []
    )
    evidence = here or [Evidence(f"{name} is not given")]
    if c.flag is not None:
        return Outcome(flag is not None, evidence)
    return Outcome(flag_bool(flag) is (c.flag_on is not None), evidence)


def _flag_value(test: ValueTest, ctx: Context) -> Outcome:
    flag = ctx.effective.flags.get(normalize_flag(test.name))
    value = flag.value if flag is not None and isinstance(flag.value, str) else None
    return Outcome(_value_test(test, value), [Evidence(f"{test.name} {value}", flag.location)] if flag else [])


def _flag_unavailable(skipped: tuple[str, ...], ctx: Context, workload_flags: Sequence[FlagUse]) -> Outcome:
    """Each flag given whose lifecycle in the knowledge leaves it out of this release."""
    skip = {normalize_flag(n) for n in skipped}
    items = []
    for flag in workload_flags:
        entry = _known_lifecycle_flag(ctx, flag.name)
        if entry is None or entry.name in skip:
            continue
        when = (
            f"was removed in {entry.removed}"
            if entry.status_at(ctx.version) == "removed"
            else f"first appears in {entry.introduced}"
        )
        instead = f"; instead: {entry.instead}" if entry.instead else ""
        items.append(Evidence(f"{flag.written} {when}, so vLLM {ctx.version} rejects it{instead}", flag.location))
    return Outcome(bool(items), items=items)


def _env_set(name: str, ctx: Context) -> Outcome:
    use = ctx.effective.env.get(name)
    return Outcome(
        use is not None, [Evidence(_env_text(use), use.location)] if use else [Evidence(f"{name} is not set")]
    )


def _env_value(test: ValueTest, ctx: Context) -> Outcome:
    use = ctx.effective.env.get(test.name)
    if use is None:
        return Outcome(False, [Evidence(f"{test.name} is not set")])
    if use.value is None:
        return Outcome(None, missing=[f"the value of {use.name} (set from {use.reference})"])
    return Outcome(_value_test(test, use.value), [Evidence(_env_text(use), use.location)])


def _connector_hma(support: str, ctx: Context) -> Outcome:
    found = [u for u in ctx.effective.connectors if u.hma == support]
    return Outcome(
        bool(found), [Evidence(f"{u.name} HMA support in {ctx.version}: {u.hma}", u.location) for u in found]
    )


def _connector_unavailable(skipped: tuple[str, ...], ctx: Context) -> Outcome:
    """Each connector in use that this release does not register, except those listed."""
    e = ctx.effective
    items = []
    module_path = (e.transfer_config or {}).get("kv_connector_module_path")
    for conn in e.connectors:
        if conn.name in skipped:
            continue
        known = ctx.knowledge.by_id.get(conn.entry_id) if conn.entry_id else None
        if isinstance(known, Gated):
            status = known.status_at(ctx.version)
            if status == "removed":
                items.append(Evidence(f"{conn.name} was removed in {known.removed}", conn.location))
            elif status == "not_yet":
                items.append(Evidence(f"{conn.name} first appears in {known.introduced}", conn.location))
        elif not module_path:
            items.append(Evidence(f"{conn.name} is not a connector any covered vLLM release registers", conn.location))
    return Outcome(bool(items), items=items)


def _offload_shorthand(wanted: bool, ctx: Context) -> Outcome:
    e = ctx.effective
    flag = e.flags.get("--kv-offloading-size")
    here = [Evidence(f"--kv-offloading-size {flag.value} (backend {e.offload_backend})", flag.location)] if flag else []
    return Outcome(e.offload_shorthand is wanted, here)


def _pd_proxy_mismatch(wanted: bool, ctx: Context) -> Outcome:
    """Each P/D proxy the files start that is not the one a connector in use needs in this release."""
    items = []
    for conn in ctx.effective.connectors:
        proxy_needed = ctx.knowledge.recipes.pd_proxy(conn.entry_id, ctx.version) if conn.entry_id else None
        if proxy_needed is None:
            continue
        need = f"{conn.name} in {ctx.version} needs {proxy_needed.script} ({proxy_needed.path} at that tag)"
        items += [
            Evidence(f"{proxy.script} routes the requests, but {need}", proxy.location)
            for proxy in ctx.proxies
            if proxy.script != proxy_needed.script
        ]
    return Outcome(bool(items) == wanted, items=items)


def _extra_config(test: ValueTest, ctx: Context) -> Outcome:
    e = ctx.effective
    for extra in e.extra_configs:
        if test.name in extra:
            raw = extra[test.name]
            text = raw if isinstance(raw, str) else json.dumps(raw)
            if re.search(test.matches, text):
                return Outcome(True, [Evidence(f"kv_connector_extra_config.{test.name} = {text}", e.transfer_location)])
    return Outcome(False)


def _model_matches(pattern: str, ctx: Context) -> Outcome:
    model = ctx.effective.model
    if model is None:
        return Outcome(None, missing=["the model name (none found in the command)"])
    return Outcome(re.search(pattern, model) is not None, [Evidence(f"model {model}")])


def _gpu_segment(segments: tuple[str, ...], ctx: Context) -> Outcome:
    e = ctx.effective
    gpu = ctx.knowledge.by_id.get(e.gpu) if e.gpu else None
    segment = getattr(gpu, "segment", None)
    if segment is None:
        return Outcome(None, missing=["host.gpu (or a nvidia.com/gpu.product node selector)"])
    return Outcome(segment in segments, [Evidence(f"GPU {getattr(gpu, 'name', '?')} ({segment})")])


def _comparison(compare: Comparison, ctx: Context) -> Outcome:
    """False when the configuration leaves a side empty; unknown when an input is missing."""
    left, left_label, left_missing, left_absent = _expression(compare.left, ctx)
    right, right_label, right_missing, right_absent = _expression(compare.right, ctx)
    if left_absent or right_absent:
        return Outcome(False)
    if left is None or right is None:
        return Outcome(None, missing=left_missing + right_missing)
    text = f"{_shown(left_label, left)} {compare.op} {_shown(right_label, right)}"
    return Outcome(_compare(left, compare.op, right), [Evidence(text, _operand_location(compare.left, ctx))])


def _gated(entry_id: str, ctx: Context) -> Gated:
    gated = ctx.knowledge.by_id.get(entry_id)
    if not isinstance(gated, Gated):
        raise ValueError(f"{entry_id} is not a gated knowledge entry")
    return gated


def _entry_unavailable(entry_id: str, ctx: Context) -> Outcome:
    gated = _gated(entry_id, ctx)
    status = gated.status_at(ctx.version)
    text = {"removed": f"removed in {gated.removed}", "not_yet": f"first in {gated.introduced}"}.get(status, "")
    return Outcome(status in ("removed", "not_yet"), [Evidence(f"{gated.name}: {text}")] if text else [])


def _entry_deprecated(entry_id: str, ctx: Context) -> Outcome:
    gated = _gated(entry_id, ctx)
    status = gated.status_at(ctx.version)
    return Outcome(
        status in ("deprecated", "removed"), [Evidence(f"{gated.name}: deprecated since {gated.deprecated}")]
    )


def _env_differs(ctx: Context, name: str) -> Outcome:
    """Whether the workloads set ``name`` to different values, this workload's first in the evidence.

    The values are gathered once per review (each workload asks about all the others), and ten
    are shown at most."""
    e = ctx.effective
    if name not in ctx.shared.env_values:
        everyone = [(w, w.env.get(name)) for w in [e, *ctx.others]]
        ctx.shared.env_values[name] = everyone, {use.value if use else None for _, use in everyone}
    everyone, distinct = ctx.shared.env_values[name]
    count = 1 + len(ctx.others)
    values = [(e, e.env.get(name)), *itertools.islice(((w, u) for w, u in everyone if w is not e), 9)]
    shown = ", ".join(f"{w.workload}: {u.value if u and u.value is not None else 'unset'}" for w, u in values)
    more = f" and {count - len(values)} more" if count > len(values) else ""
    return Outcome(count > 1 and len(distinct) > 1, [Evidence(f"{name} differs between workloads ({shown}{more})")])


def _operand_location(expression: str, ctx: Context) -> Location | None:
    """Where the first operand of ``expression`` that the deployment gives was written."""
    e = ctx.effective
    for operand in _ARITHMETIC.split(expression.strip())[::2]:
        kind, _, name = operand.partition(":")
        if kind == "fact" and name in e.fact_locations:
            return e.fact_locations[name]
        if kind == "flag" and name in e.flags:
            return e.flags[name].location
        if kind == "env" and name in e.env:
            return e.env[name].location
    return None


# ---------------------------------------------------------------------------------------------
# Security advisories (the stored snapshot; review is offline)

ADVISORY_RULE = "advisory."
_ADVISORY_SEVERITY: dict[str, Severity] = {
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


def deployment_facts(effective: Effective, nodes: int, knowledge: Knowledge) -> advisory_lookup.DeploymentFacts:
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
    if nodes > 1 or spans or any(f in flags for f in _MULTI_NODE_FLAGS):
        multi_node = True
    elif backend is not None and str(backend.value).strip().lower() == "ray":
        multi_node = None  # a Ray cluster may span hosts
    else:
        multi_node = False
    return advisory_lookup.DeploymentFacts(
        components=None if connectors is None else components_of(knowledge, connectors),
        connectors=connectors,
        configured=frozenset(flags) | frozenset(env),
        engine=engine,
        multi_node=multi_node,
        offload_tiers=None if unreadable else frozenset(effective.tiers),
    )


def _advisory_findings(
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
    facts = deployment_facts(effective, workload.nodes, knowledge)
    if (version, facts) not in cache:  # workloads alike in release and configuration are looked up once
        stored = advisory_lookup.stored(knowledge, "vllm")
        floor_release = security_floor(knowledge, "vllm", facts).release
        cache[version, facts] = (
            advisory_lookup.affecting(stored, "vllm", version, facts),
            str(floor_release) if floor_release is not None else None,
        )
    hits, floor = cache[version, facts]
    where = workload.location
    if effective.version_source == "image-tag" and workload.image_location is not None:
        where = workload.image_location
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
            fix = "No fixed vLLM release is known: keep what the advisory describes out of untrusted callers' reach."
        found.append(
            Finding(
                rule_id=rule_id,
                severity=_ADVISORY_SEVERITY[a.severity],
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


# ---------------------------------------------------------------------------------------------
# The tool


def rules(knowledge: Knowledge) -> list[Pitfall]:
    return [p for p in knowledge.pitfalls if p.when is not None]


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


def _workload_version(
    knowledge: Knowledge, image_version: str | None, stated: Version, stated_source: bool
) -> tuple[Version, Literal["image-tag", "stated", "assumed-newest"]]:
    if image_version is not None:
        return parse_version(image_version), "image-tag"
    return stated, "stated" if stated_source else "assumed-newest"


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
    if effectives and all(e.version_source == "image-tag" for e in effectives) and context.assumed:
        _, context = resolve_version(knowledge, effectives[0].version, field="version")
    shared = Shared()
    configuration = _rule_findings(request, deployment, effectives, all_rules, host, knowledge, shared)
    disabled = set(request.disabled_rules)
    security = _security_findings(knowledge, deployment, effectives, disabled, configuration.not_checked)
    notes += _closing_notes(knowledge, security, shared)
    result = ReviewResult(
        version_context=context,
        workloads=_workload_reports(deployment, effectives, security.floors),
        findings=configuration.findings + security.findings,
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
    """Each workload's configuration for its release (the image tag's, else the stated one), with notes
    on a tag that disagrees with the stated release or names one the knowledge does not cover."""
    effectives: list[Effective] = []
    for workload in deployment.workloads:
        tag = image_version(workload.image)
        version, source = _workload_version(knowledge, tag, stated, not context.assumed)
        if tag is not None and not context.assumed and version != stated:
            notes.append(
                f"{workload.name}: the image tag says vLLM {version}, not the stated {stated}; reviewed for {version}"
            )
        if tag is not None and version not in knowledge.release_versions():
            notes.append(f"{workload.name}: vLLM {version} from the image tag is not a release the knowledge covers")
        effective = resolve(workload, deployment, knowledge, version, source, host.gpu)
        notes += effective.notes
        effectives.append(effective)
    return effectives


# What makes two findings one: a place found wrong for several workloads (a proxy both roles use).
_FindingKey = tuple[str, str, int | None, str | None, str]


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
        )
        for rule in all_rules:
            if rule.id in request.disabled_rules or not in_range(rule.versions, version):
                continue
            assert rule.when is not None
            run.evaluated += 1
            outcome = evaluate(rule.when, ctx, workload.flags)
            if outcome.value is None:
                needs = sorted(set(outcome.missing))
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
    run.findings.sort(key=_severity_order)
    return run


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
    return -_RANK[finding.severity], finding.location.file, finding.location.line or 0, finding.rule_id


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
    """The advisories that apply, after the configuration findings, most severe first."""
    run = _SecurityRun()
    seen: dict[_FindingKey, Finding] = {}
    lookups: dict[tuple[Version, advisory_lookup.DeploymentFacts], tuple[list[advisory_lookup.Finding], str | None]]
    lookups = {}
    for workload, effective in zip(deployment.workloads, effectives, strict=True):
        if effective.version_source == "assumed-newest":
            run.unversioned.append(effective.workload)
            continue
        hits, run.floors[effective.workload], open_count = _advisory_findings(
            knowledge, workload, effective, disabled, not_checked, lookups
        )
        run.left_open += open_count
        for hit in hits:
            if _key(hit) in seen:  # one image line several workloads share is one finding
                seen[_key(hit)].workload += f", {hit.workload}"
            else:
                seen[_key(hit)] = hit
                run.findings.append(hit)
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
            "version), so security advisories were not checked; that is not a finding that it is clear of them"
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
            model=e.model,
            image=e.image,
            connectors=[conn.name for conn in e.connectors],
            offload_shorthand=e.offload_shorthand,
            tiers=e.tiers,
            gpu=e.gpu,
            facts={name: value for name, value in e.facts.items()},  # FactName keys, as the plain names they are
            env_by_reference=[u.name for u in e.env.values() if u.value is None],
            security_floor=floors.get(e.workload),
        )
        for w, e in zip(deployment.workloads, effectives, strict=True)
    ]


# ---------------------------------------------------------------------------------------------
# Output for CI


def exit_code(result: ReviewResult, fail_on: FailOn = "error") -> int:
    """1 when a finding is at or above ``fail_on`` (error > warning > info) or a document that starts vLLM
    could not be read, else 0; 'never' always 0."""
    if fail_on == "never":
        return 0
    return int(bool(result.not_reviewed) or any(_RANK[f.severity] >= _RANK[fail_on] for f in result.findings))


_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
# Not a rule about the configuration: the review's own report that it could not read a launch.
NOT_REVIEWED_RULE = "review.launch-not-read"
_NOT_REVIEWED_DESCRIPTOR = {
    "id": NOT_REVIEWED_RULE,
    "name": "LaunchNotRead",
    "shortDescription": {"text": "A vLLM launch the review cannot read"},
    "fullDescription": {
        "text": "The file names `vllm serve` or a vLLM entry point outside comments, but no server could be read "
        "from it (a construct the readers do not follow, such as eval or a command built at run time), so none "
        "of its settings were checked. A gate fails on it rather than passing what it did not see."
    },
    "help": {"text": "Write the launch as a plain command, or review the rendered command line instead."},
    "defaultConfiguration": {"level": "error"},
}


def to_sarif(result: ReviewResult, knowledge: Knowledge) -> dict[str, Any]:
    """The review as a SARIF 2.1.0 log, for code-scanning UIs (GitHub, GitLab, Azure DevOps)."""
    all_rules = rules(knowledge)
    index = {p.id: i for i, p in enumerate(all_rules)}
    descriptors = [
        {
            "id": p.id,
            "name": "".join(w.capitalize() for w in re.split(r"[^a-z0-9]+", p.id.split(".", 1)[-1])),
            "shortDescription": {"text": p.title},
            "fullDescription": {"text": " ".join(p.why.split())},
            "help": {"text": _rule_help(p)},
            "defaultConfiguration": {"level": _LEVEL[p.severity]},
            "properties": {"versions": p.versions or "all", "premises": list(p.premises), "sources": list(p.sources)},
        }
        for p in all_rules
    ]
    advisories_used: dict[str, Advisory] = {}
    by_rule = {advisory_rule_id(a): a for a in advisory_lookup.stored(knowledge, "vllm")}
    for f in result.findings:
        if f.rule_id in by_rule and f.rule_id not in advisories_used:
            advisories_used[f.rule_id] = by_rule[f.rule_id]
    for rule_id, a in advisories_used.items():
        index[rule_id] = len(descriptors)
        descriptors.append(_advisory_descriptor(rule_id, a))
    results = []
    for f in result.findings:
        physical: dict[str, Any] = {"artifactLocation": {"uri": urllib.parse.quote(f.location.file)}}
        if f.location.line:
            physical["region"] = {"startLine": f.location.line}
        location: dict[str, Any] = {"physicalLocation": physical}
        if f.location.path:
            location["logicalLocations"] = [{"fullyQualifiedName": f.location.path, "kind": "member"}]
        properties: dict[str, Any] = {"workload": f.workload}
        if f.rule_id in advisories_used:
            properties["tags"] = _advisory_tags(advisories_used[f.rule_id])
        results.append(
            {
                "ruleId": f.rule_id,
                "ruleIndex": index[f.rule_id],
                "level": _LEVEL[f.severity],
                "message": {"text": f"{f.message}. Fix: {f.fix}"},
                "locations": [location],
                "properties": properties,
            }
        )
    if result.not_reviewed:
        index[NOT_REVIEWED_RULE] = len(descriptors)
        descriptors.append(_NOT_REVIEWED_DESCRIPTOR)
    for unread in result.not_reviewed:
        region = {"region": {"startLine": unread.location.line}} if unread.location.line else {}
        results.append(
            {
                "ruleId": NOT_REVIEWED_RULE,
                "ruleIndex": index[NOT_REVIEWED_RULE],
                "level": "error",
                "message": {
                    "text": f"This file starts vLLM in a way the review cannot read ({unread.text}); "
                    "nothing in it was checked."
                },
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": urllib.parse.quote(unread.location.file)},
                            **region,
                        }
                    }
                ],
            }
        )
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "vllm-caching", "version": __version__, "rules": descriptors}},
                "results": results,
                "properties": {
                    "vllmVersions": sorted({w.vllm_version for w in result.workloads}),
                    "notChecked": [n.model_dump() for n in result.not_checked],
                },
            }
        ],
    }


def _rule_help(rule: Pitfall) -> str:
    """Why the rule holds, the fix and the sources, for a code-scanning UI that shows only this text."""
    return f"{' '.join(rule.why.split())} Fix: {' '.join(rule.fix.split())} Sources: {', '.join(rule.sources)}"


def _advisory_tags(a: Advisory) -> list[str]:
    return ["security", *(i for i in (a.cve, a.ghsa) if i)]


def _advisory_descriptor(rule_id: str, a: Advisory) -> dict[str, Any]:
    """A SARIF rule for one advisory: its ids as tags, its page as help, the CVSS score for code scanning."""
    page = next((s for s in a.sources if s.startswith("https://github.com/advisories/")), None)
    page = page or next((s for s in a.sources if s.startswith("https://")), None)
    properties: dict[str, Any] = {"tags": _advisory_tags(a), "sources": list(a.sources)}
    if a.cvss:
        properties["security-severity"] = f"{max(c.score for c in a.cvss):.1f}"
    descriptor: dict[str, Any] = {
        "id": rule_id,
        "name": "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", a.id)),
        "shortDescription": {"text": a.title},
        "fullDescription": {"text": f"{a.title}. Applies: {a.applies}"},
        "help": {"text": f"{' / '.join(i for i in (a.ghsa, a.cve) if i)}: {a.applies}"},
        "defaultConfiguration": {"level": _LEVEL[_ADVISORY_SEVERITY[a.severity]]},
        "properties": properties,
    }
    if page is not None:
        descriptor["helpUri"] = page
    return descriptor


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
