"""Whether a rule's condition holds for one workload: true, false, or unknown with the inputs that would
settle it, and the evidence for each (rules are data: `when:` in knowledge/pitfalls.yaml, keys on
`knowledge.Condition`, one evaluator a key in EVALUATORS)."""

from __future__ import annotations

import datetime as dt
import difflib
import itertools
import json
import re
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, cast

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet

from ..knowledge import (
    Comparison,
    Condition,
    FactName,
    Gated,
    Gpu,
    Knowledge,
    ModelArch,
    Pitfall,
    Setting,
    ValueTest,
    ranged_at,
)
from ..safe_text import one_line
from ..versions import Version, contains, in_range, parse_specifier, parse_version
from .deployment import (
    Deployment,
    Effective,
    EnvUse,
    FlagUse,
    HygieneIssue,
    Location,
    PerKnowledge,
    ProxyUse,
    Workload,
    flag_bool,
    normalize_flag,
    parse_number,
)
from .deployment.bounds import clip
from .deployment.graph import CHECKS, Graph, is_gpu_build, service_link_env
from .deployment.hygiene import floating_tag
from .deployment.images import image_version, lmcache_image_date, lmcache_image_version
from .deployment.server_cli import server_release
from .deployment.shell import ASSIGNMENT
from .engine_schema import (
    Problem,
    check_kv_transfer_config,
    check_lmcache_env,
    check_lmcache_keys,
    check_lmcache_values,
    check_vllm_env,
    check_vllm_env_values,
    lmcache_leftover_default,
    misspelt_vllm_env,
    vllm_env_ever_read,
    vllm_leftover_default,
)
from .flag_values import refused_values
from .model_config import WEIGHT_BYTES
from .review_models import GIB, HostFacts


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
    # Each workload's transfer/events config checked once for both engine_schema rules (keyed by the
    # Effective's id: every one lives as long as the review).
    schema_problems: dict[int, list[tuple[Problem, Location | None]]] = field(default_factory=dict)
    # Likewise its LMCache config files and variables, once for both lmcache_schema rules.
    lmcache_findings: dict[int, LMCacheFindings] = field(default_factory=dict)
    # What the checks across a deployment's objects work out once for all its workloads (graph.py).
    graph_memo: dict[str, Any] = field(default_factory=dict)

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
    hygiene: list[HygieneIssue] = field(default_factory=list)  # what the readers found around it (Workload.hygiene)
    workload: Workload | None = None  # the workload as read, and all the objects read with it (graph checks)
    deployment: Deployment | None = None


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
    "gpus_given": "GPUs the container is given",
    "gpus_used": "GPUs the engine uses",
    "lmcache_disk_gib": "LMCache disk tier GiB",
    "lmcache_disk_volume_gib": "volume sizeLimit GiB",
    "lmcache_disk_memory_gib": "LMCache disk tier in memory GiB",
    "lmcache_disk_layer_gib": "LMCache disk tier in the container's filesystem GiB",
    "lmcache_disk_unbounded_gib": "LMCache disk tier in an emptyDir without sizeLimit GiB",
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
            value = gpu.hbm_gib if isinstance(gpu, Gpu) else None
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


# What a workload whose command the files do not hold (Workload.options_unknown) lacks for every other key.
OPTIONS_UNKNOWN = "the server's vLLM options (the command that starts it is not in the files)"
# Condition keys that read none of the server's options: its environment, image, installs and hygiene, and the
# release's own facts; with its options unknown, the others are unknown too.
OPTION_FREE_KEYS = frozenset(
    {
        "all_", "any_", "not_", "env", "env_value", "env_differs", "entry_unavailable", "entry_deprecated",
        "lmcache_schema", "vllm_env_value_refused", "python_unsupported", "python_caps_release",
        "pin_outside_vllm_requirement", "release_pinned_unknown", "vendor_build", "gpu_build", "hygiene",
    }
)  # fmt: skip


def evaluate(condition: Condition, ctx: Context, workload_flags: Sequence[FlagUse]) -> Outcome:
    """True, false or unknown for this workload; ``workload_flags`` are its flags as written, in order."""
    key = condition.key
    if key not in OPTION_FREE_KEYS and ctx.workload is not None and ctx.workload.options_unknown is not None:
        return Outcome(None, missing=[OPTIONS_UNKNOWN])
    return EVALUATORS[key](getattr(condition, key), Asked(condition, ctx, workload_flags))


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


# LMCache settings that give a cache another server reaches (LMCache 0.5.6 lmcache/v1/config.py; enable_nixl and
# enable_xpyd of 0.3.x; a local_disk may be a volume both sides mount).
_SHARED_LMCACHE_KEYS = (
    "remote_url", "enable_pd", "enable_p2p", "enable_nixl", "enable_xpyd", "gds_path", "local_disk", "maru_path",
    "storage_plugins", "remote_storage_plugins", "external_backends",
)  # fmt: skip


def _kv_role_missing(wanted: bool, asked: Asked) -> Outcome:
    e = asked.ctx.effective
    config = e.transfer_config or {}
    connector = config.get("kv_connector")
    missing = bool(connector) and config.get("kv_role") is None and not e.offload_shorthand
    evidence = [Evidence(f"kv_connector {connector} with no kv_role", e.transfer_location)] if missing else []
    return Outcome(missing is wanted, evidence)


def _lmcache_shared_backend(wanted: bool, asked: Asked) -> Outcome:
    e = asked.ctx.effective
    env_names = {f"LMCACHE_{key.upper()}" for key in _SHARED_LMCACHE_KEYS}
    extra_names = {f"lmcache.{key}" for key in _SHARED_LMCACHE_KEYS}
    found = [e.env[n] for n in sorted(env_names & set(e.env))]
    if found or any(extra_names & set(extra) for extra in e.extra_configs):
        where = found[0].location if found else e.transfer_location
        return Outcome(wanted, [Evidence("LMCache has a shared backend", where)])
    named = e.env.get("LMCACHE_CONFIG_FILE")
    from_file = (
        any(u.name.startswith("LMCACHE_") and u.location.file != named.location.file for u in e.env.values())
        if named
        else True
    )
    if not from_file:
        return Outcome(None, missing=["the LMCache config file LMCACHE_CONFIG_FILE names"])
    text = "no LMCache backend another server reaches (" + ", ".join(_SHARED_LMCACHE_KEYS[:4]) + ", ... unset)"
    return Outcome(not wanted, [Evidence(text, e.transfer_location)])


def _kv_role(roles: tuple[str, ...], asked: Asked) -> Outcome:
    e = asked.ctx.effective
    role = (e.transfer_config or {}).get("kv_role")
    return Outcome(role in roles, [Evidence(f"kv_role {role}", e.transfer_location)] if role in roles else [])


def _tier(types: tuple[str, ...], asked: Asked) -> Outcome:
    e = asked.ctx.effective
    tiers = [t for t in e.tiers if t in types]
    return Outcome(bool(tiers), [Evidence(f"secondary tier {t}", e.transfer_location) for t in tiers])


def _connector_configured(wanted: bool, asked: Asked) -> Outcome:
    e = asked.ctx.effective
    evidence = [Evidence(f"connector {u.name} (via {u.via})", u.location) for u in e.connectors]
    if not e.connectors and any(e.flags[f].unresolved for f in _KV_CONNECTOR_OPTIONS if f in e.flags):
        return Outcome(None, missing=["the value of the workload's KV connector option"])  # one the files leave open
    return Outcome(bool(e.connectors) is wanted, evidence or [Evidence("no KV connector is configured")])


def _transfer_config_replaced(wanted: bool, asked: Asked) -> Outcome:
    """--kv-transfer-config naming a connector or role the offload shorthand writes over: vLLM sets kv_connector
    to the shorthand's connector and kv_role to kv_both (VllmConfig._post_init_kv_transfer_config), so the one
    the user named is never built."""
    e = asked.ctx.effective
    given = e.transfer_config or {}
    if not e.offload_shorthand or not e.connectors or not isinstance(given.get("kv_connector"), str):
        return Outcome(False is wanted)
    chosen = e.connectors[0].name
    role = given.get("kv_role")
    if given["kv_connector"] == chosen and role in (None, "kv_both"):
        return Outcome(False is wanted)
    said = f"{given['kv_connector']}" + (f" ({role})" if isinstance(role, str) else "")
    text = (
        f"--kv-transfer-config names {said}; --kv-offloading-size makes vLLM {asked.ctx.version} write "
        f"{chosen} and kv_both over it, so {given['kv_connector']} is never built"
    )
    return Outcome(True is wanted, [Evidence(text, e.transfer_location or e.connectors[0].location)])


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


# The severity of the schema problems each verdict of an engine_schema / lmcache_schema rule reports.
_VERDICT_SEVERITY = {"refused": "error", "ignored": "warning", "leftover": "info"}


def _engine_schema(verdict: str, asked: Asked) -> Outcome:
    """Each --kv-transfer-config / --kv-events-config field and extra-config key the release refuses
    ("refused": vLLM stops at start-up) or never reads ("ignored"), from the schema read in the wheels;
    a MultiConnector's children are KVTransferConfigs of their own (vLLM builds one from each)."""
    ctx = asked.ctx
    if not ctx.knowledge.engine_schema.was_read("vllm", ctx.version):
        return Outcome(None, missing=[f"the engine schema of vLLM {ctx.version} (knowledge/engine_schema.yaml)"])
    key = id(ctx.effective)
    if key not in ctx.shared.schema_problems:
        ctx.shared.schema_problems[key] = _transfer_schema_problems(ctx)
    wanted = _VERDICT_SEVERITY[verdict]
    # An unregistered connector is the connector rules' finding; its keys are not checked here.
    items = [
        Evidence(_problem_text(p), where)
        for p, where in ctx.shared.schema_problems[key]
        if p.severity == wanted and p.key != "kv_connector"
    ]
    return Outcome(bool(items), items=items)


def _lmcache_release_by(day: dt.date, knowledge: Knowledge) -> str | None:
    """The newest LMCache release published on or before ``day`` (a nightly image of that day holds its code)."""
    published = [r for r in knowledge.releases["lmcache"].releases if r.date is not None and r.date <= day]
    return str(published[-1].version) if published else None


@dataclass(frozen=True)
class LMCacheFindings:
    """What one workload's LMCache config files and LMCACHE_* variables meet in its LMCache release: the
    problems, the release as the findings say it, or what the check lacks (``missing``) instead."""

    problems: list[tuple[Problem, EnvUse]] = field(default_factory=list)
    said: str = ""
    missing: str | None = None


def _lmcache_schema(verdict: str, asked: Asked) -> Outcome:
    """Each key of the workload's LMCache config files and each LMCACHE_* variable it sets that its LMCache
    release drops, maps with a warning, or never reads, and each file value the key's converter refuses
    ("refused" where that ends the load, else "ignored": set to None); the release is the image tag's
    (lmcache/vllm-openai:vX) or a pip install's pin, else the newest the schema covers, said in each finding."""
    ctx = asked.ctx
    key = id(ctx.effective)
    if key not in ctx.shared.lmcache_findings:
        ctx.shared.lmcache_findings[key] = _lmcache_findings(ctx)
    found = ctx.shared.lmcache_findings[key]
    if found.missing is not None:
        return Outcome(None, missing=[found.missing])
    wanted = _VERDICT_SEVERITY[verdict]
    items = [
        Evidence(f"{_problem_text(p).replace('vLLM says', 'LMCache says')} ({found.said})", u.location)
        for p, u in found.problems
        if p.severity == wanted
    ]
    return Outcome(bool(items), items=items)


def _lmcache_findings(ctx: Context) -> LMCacheFindings:
    e = ctx.effective
    schema = ctx.knowledge.engine_schema
    read = [str(v) for v in schema.releases_read.get("lmcache", ())]
    pinned = e.lmcache_version  # a pip install before the server replaces the image's LMCache
    tagged = pinned or lmcache_image_version(e.image)
    built = lmcache_image_date(e.image)
    by_date = _lmcache_release_by(built, ctx.knowledge) if built is not None and tagged is None else None
    if built is not None and tagged is None and by_date is None:
        return LMCacheFindings(
            missing=f"an LMCache release the knowledge covers (the image was built {built}, before it)"
        )
    release = tagged or by_date or (read[-1] if read else None)
    if release is None or release not in read:
        return LMCacheFindings(missing=f"the engine schema of LMCache {release} (knowledge/engine_schema.yaml)")
    said = (
        f"LMCache {release} (the pip install)"
        if pinned
        else f"LMCache {release} (the image's tag)"
        if tagged
        else f"LMCache {release}, the newest release by the image's build date {built}"
        if by_date
        else f"assumed LMCache {release}, the newest covered"
    )
    vllm = ctx.version if schema.was_read("vllm", ctx.version) else None
    # A chart's own on-switch (production-stack's lmcacheConfig.enabled) writes the variables of the chart's
    # release, such as LMCACHE_USE_EXPERIMENTAL: nothing the user wrote, so nothing to fix here.
    uses = [
        u
        for u in e.env.values()
        if u.name.startswith("LMCACHE_") and not (u.location.path or "").endswith("lmcacheConfig.enabled")
    ]
    from_files = [u for u in uses if _lmcache_file_key(u) is not None]
    # A variable is LMCache's business only where the server runs LMCache: elsewhere it is read by nothing in
    # any release, and a leftover LMCACHE_* line in a plain vLLM manifest is harmless.
    runs_lmcache = any(c.name.startswith("LMCache") for c in e.connectors) or e.offload_backend == "lmcache"
    uses = uses if runs_lmcache else from_files
    problems = [
        (p, u) for u in from_files for p in check_lmcache_keys([_lmcache_file_key(u) or ""], release, ctx.knowledge)
    ]
    for use in (u for u in uses if u not in from_files):
        leftover = lmcache_leftover_default(use.name, use.value, release, ctx.knowledge)
        found = [leftover] if leftover else check_lmcache_env([use.name], release, ctx.knowledge, vllm)
        problems += [(p, use) for p in found]
    problems += [
        (p, u)
        for u in from_files
        if u.value is not None
        for p in check_lmcache_values([(_lmcache_file_key(u) or "", u.value)], release, ctx.knowledge)
    ]
    return LMCacheFindings(problems, said)


def _lmcache_file_key(use: EnvUse) -> str | None:
    """The key of an LMCache config file an entry was read from (the reader names it by its YAML path), else None."""
    path = use.location.path
    return path if path is not None and use.name == "LMCACHE_" + path.upper() else None


def _transfer_schema_problems(ctx: Context) -> list[tuple[Problem, Location | None]]:
    """What the release's schema says of the workload's transfer config (and its MultiConnector children)
    and its events config, each with where it was written."""
    e = ctx.effective
    found: list[tuple[Problem, Location | None]] = []
    if e.transfer_config is not None:
        configs = [e.transfer_config]
        extra = e.transfer_config.get("kv_connector_extra_config")
        children = extra.get("connectors") if isinstance(extra, dict) else None
        configs += [c for c in children if isinstance(c, dict)] if isinstance(children, list) else []
        for config in configs:  # children not a list: resolve notes it
            found += [(p, e.transfer_location) for p in check_kv_transfer_config(config, ctx.version, ctx.knowledge)]
    events = e.flags.get("--kv-events-config")
    parsed = _json_object(events.value) if events is not None else None
    if events is not None and parsed is not None:
        checked = check_kv_transfer_config(parsed, ctx.version, ctx.knowledge, config_class="KVEventsConfig")
        found += [(p, events.location) for p in checked]
    return found + _compilation_schema_problems(ctx)


def _compilation_schema_problems(ctx: Context) -> list[tuple[Problem, Location | None]]:
    """What the release's schema says of --compilation-config (its JSON and -O.KEY words) and of the pass_config
    inside it, which vLLM validates as a PassConfig of its own."""
    flag = ctx.effective.flags.get("--compilation-config")
    parsed = _json_object(flag.value) if flag is not None else None
    schema = ctx.knowledge.engine_schema
    if flag is None or parsed is None or not schema.has_config("CompilationConfig", ctx.version):
        return []
    checked = check_kv_transfer_config(parsed, ctx.version, ctx.knowledge, config_class="CompilationConfig")
    passes = parsed.get("pass_config")
    if (
        isinstance(passes, dict)
        and "pass_config" not in {p.key for p in checked}
        and schema.has_config("PassConfig", ctx.version)
    ):
        inner = check_kv_transfer_config(passes, ctx.version, ctx.knowledge, config_class="PassConfig")
        checked += [p.model_copy(update={"key": f"pass_config.{p.key}"}) for p in inner]
    return [(p, flag.location) for p in checked]


def _json_object(value: object) -> dict[str, Any] | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _problem_text(problem: Problem) -> str:
    lines = (line.strip() for line in (problem.engine_message or "").splitlines())
    said = f' (vLLM says: "{one_line("; ".join(line for line in lines if line))}")' if problem.engine_message else ""
    instead = f"; use {problem.instead}" if problem.instead else ""
    return f"{problem.key}: {problem.message}{said}{instead}"


def _start_problem(wanted: bool, asked: Asked) -> Outcome:
    problem = asked.ctx.start_problem
    return Outcome((problem is not None) is wanted, [Evidence(problem)] if problem else [])


def _vendor_build(wanted: bool, asked: Asked) -> Outcome:
    """The release is not stated and the image names no vLLM (a Gaudi, Neuron or in-house build read as
    vLLM by its arguments): its options may be its own, not those of an upstream release."""
    effective = asked.ctx.effective
    image = effective.image
    vendor = effective.version_source == "assumed-newest" and bool(image) and "vllm" not in (image or "").lower()
    evidence = [Evidence("the workload's image names no vLLM release and none is stated")] if vendor else []
    return Outcome(vendor is wanted, evidence)


def _gpu_build(wanted: bool, asked: Asked) -> Outcome:
    ctx = asked.ctx
    if ctx.workload is None:
        return Outcome(None, missing=["the workload's image and device"])
    gpu = is_gpu_build(ctx.workload, ctx.effective)
    image = ctx.effective.image or "no image named"
    return Outcome(gpu is wanted, [Evidence(f"{'a GPU' if gpu else 'not a GPU'} build of vLLM ({clip(image, 80)})")])


def _hygiene(check: str, asked: Asked) -> Outcome:
    """Each problem of this kind the readers found around the workload; a floating vLLM image says the
    release the review took instead."""
    ctx = asked.ctx
    found = [issue for issue in ctx.hygiene if issue.check == check]
    items = [Evidence(issue.text + (_assumed_release(ctx) if issue.release else ""), issue.location) for issue in found]
    return Outcome(bool(items), items=items)


def _assumed_release(ctx: Context) -> str:
    if ctx.workload is not None and ctx.workload.role == "lmcache-server":
        release = server_release(ctx.workload.image, ctx.knowledge)
        basis = release.basis if release.assumed else "the release its tag names today"
        return (
            f"; reviewed as LMCache {release.version}, {basis}: a release tag (lmcache/standalone:vX.Y.Z) or a "
            "digest makes the review exact"
        )
    source = ctx.effective.version_source
    if source == "image-tag":
        return f"; reviewed as vLLM {ctx.version}, the release its tag names today"
    taken = "the newest the review covers" if source == "assumed-newest" else "the version given"
    return f"; reviewed as vLLM {ctx.version}, {taken}: a release tag or a digest makes the review exact"


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


def _vllm_env_unread(wanted: bool | str, asked: Asked) -> Outcome:
    """The VLLM_* variables no code of the release reads: those set to the default their last reader had
    ("leftover"), or the others (true)."""
    ctx = asked.ctx
    if _vendor_build(True, asked).value:
        return Outcome(False)  # a vendor's build (Gaudi's, Neuron's) reads variables of its own
    referenced = ctx.deployment.referenced_env if ctx.deployment is not None else set()
    uses = [u for u in ctx.effective.env.values() if u.name.startswith("VLLM_") and u.name not in referenced]
    if _pinned_to_unknown_release(ctx.effective):
        # A build of a release the files do not name: a variable some covered release reads may be read by it.
        uses = [u for u in uses if not vllm_env_ever_read(u.name, ctx.knowledge)]
    leftovers = {u.name: vllm_leftover_default(u.name, u.value, ctx.version, ctx.knowledge) for u in uses}
    if wanted == "leftover":
        found = [Evidence(f"{u.name}: {p.message}", u.location) for u in uses if (p := leftovers[u.name]) is not None]
        return Outcome(bool(found), items=found)
    items = [
        Evidence(f"{use.name}: {p.message}", use.location)
        for use in uses
        if leftovers[use.name] is None
        for p in check_vllm_env([use.name], ctx.version, ctx.knowledge)
    ]
    for use in ctx.effective.env.values():
        meant = misspelt_vllm_env(use.name, ctx.knowledge) if use.name not in referenced else None
        if meant is not None:
            text = f"{use.name}: no code of vLLM reads it; it looks like a misspelling of {meant}"
            items.append(Evidence(text, use.location))
    return Outcome(bool(items) is wanted, items=items)


# Options after which the weights on a GPU are not the checkpoint's split over the ranks.
_WEIGHTS_CHANGED = ("--quantization", "--cpu-offload-gb", "--load-format")


def _served_model(ctx: Context) -> ModelArch | None:
    """The knowledge entry of the model served: its Hub repository exactly (another org's repository of the same
    name may hold a quantized checkpoint), or one of its own names given without an org."""
    name = ctx.effective.model
    if not name:
        return None
    entry = ctx.knowledge.find_model(name)
    if entry is None or ("/" in name and name.lower() != entry.hf_repo.lower()):
        return None
    return entry


def _model_layers(kind: str, ctx: Context) -> Outcome:
    """Whether the served model is a known one of that layer kind; an unknown model is of none (its name may
    still be matched by a rule's model_matches)."""
    model = _served_model(ctx)
    if model is None:
        return Outcome(False)
    if model.linear_attention_layers or model.mamba2 is not None:
        found = "state"
    elif model.sliding_window_layers or model.chunked_local_layers:
        found = "sliding"
    else:
        found = "full_only"
    label = {"state": "Mamba or linear-attention layers", "sliding": "sliding-window or chunked-local layers"}
    return Outcome(found == kind, [Evidence(f"{model.id}: {label.get(found, 'full attention only')}")])


def _weights_exceed_gpu(wanted: bool, ctx: Context) -> Outcome:
    """The checkpoint's weights split over TP x PP against what vLLM may use of one GPU (its memory times
    gpu_memory_utilization): weights that alone exceed it leave no memory for the KV cache."""
    e = ctx.effective
    model, gpu = _served_model(ctx), ctx.knowledge.by_id.get(e.gpu) if e.gpu else None
    if model is None or not isinstance(gpu, Gpu) or model.params_total_b is None:
        return Outcome(False)
    if any(name in e.flags for name in _WEIGHTS_CHANGED):
        return Outcome(False)
    dtype = e.flags.get("--dtype")
    if dtype is not None and str(dtype.value) not in ("auto", "bfloat16", "float16", "half"):
        return Outcome(False)
    utilization = _utilization(ctx)
    ranks = e.facts.get("tp", 1) * e.facts.get("pp", 1)
    weights = model.params_total_b * 1e9 * WEIGHT_BYTES[model.weights_dtype] / GIB
    usable = gpu.hbm_gib * utilization
    if weights / ranks <= usable:
        return Outcome(not wanted)
    text = (
        f"{model.hf_repo}: {model.params_total_b:g} B parameters in {model.weights_dtype} are about {weights:.0f} GiB, "
        f"{weights / ranks:.1f} GiB a GPU over TP x PP = {ranks:g}; one {gpu.name} has {gpu.hbm_gib:.1f} "
        f"GiB, of which vLLM may use {usable:.1f} GiB (gpu_memory_utilization {utilization:g})"
    )
    tp = e.flags.get("--tensor-parallel-size")
    where = tp.location if tp is not None else ctx.workload.location if ctx.workload is not None else None
    return Outcome(wanted, [Evidence(text, where)])


def _utilization(ctx: Context) -> float:
    """--gpu-memory-utilization as given, else the release's default (1.0 where the release sizes it itself)."""
    flag = ctx.effective.flags.get("--gpu-memory-utilization")
    value = parse_number(flag.value) if flag is not None and not flag.unresolved else None
    if value is not None and 0 < value <= 1:
        return value
    setting = ctx.knowledge.by_id.get("flag.gpu-memory-utilization")
    default = ranged_at(setting.defaults, ctx.version) if isinstance(setting, Setting) else None
    found = default.value if default is not None else None
    return float(found) if isinstance(found, int | float) and not isinstance(found, bool) else 1.0


def _release_pinned_unknown(wanted: bool, ctx: Context) -> Outcome:
    pinned = _pinned_to_unknown_release(ctx.effective)
    evidence = [Evidence(f"the image {ctx.effective.image} is a fixed build of a release the files do not say")]
    return Outcome(pinned is wanted, evidence if pinned else [])


def _python_unsupported(wanted: bool, ctx: Context) -> Outcome:
    """A `pip install vllm==X` into a Python the release's Requires-Python does not admit: pip finds no release to
    install ("Could not find a version that satisfies the requirement"), so the script stops there."""
    workload = ctx.workload
    items: list[Evidence] = []
    for claim in workload.installs if workload is not None else []:
        if claim.package != "vllm" or claim.version is None or claim.python is None:
            continue
        required = ctx.knowledge.requires_python(claim.package, parse_version(claim.version))
        if required is not None and not contains(parse_specifier(required), parse_version(claim.python)):
            items.append(
                Evidence(
                    f"pip install {claim.requirement} into Python {claim.python}: vLLM {claim.version} requires "
                    f"Python {required}",
                    claim.location,
                )
            )
    return Outcome(bool(items) is wanted, items=items)


def _python_caps_release(wanted: bool, ctx: Context) -> Outcome:
    """An unpinned `pip install vllm` into a Python older than the newest release admits: pip takes the newest
    release that still admits it, an old one, whatever day it runs."""
    workload = ctx.workload
    newest = ctx.knowledge.newest("vllm")
    items: list[Evidence] = []
    for claim in workload.installs if workload is not None else []:
        if claim.package != "vllm" or claim.version is not None or claim.python is None:
            continue
        taken = ctx.knowledge.capped_by_python("vllm", claim.python)
        if taken is not None:
            required = ctx.knowledge.requires_python("vllm", newest)
            items.append(
                Evidence(
                    f"pip install {claim.requirement} into Python {claim.python} takes vLLM {taken}, the newest "
                    f"release that admits it; vLLM {newest} requires Python {required}",
                    claim.location,
                )
            )
    return Outcome(bool(items) is wanted, items=items)


def _pin_outside_vllm_requirement(wanted: bool, ctx: Context) -> Outcome:
    """A torch or transformers release pinned beside a vLLM whose Requires-Dist excludes it: pip refuses the pair in
    one install, and installed over vLLM it replaces the release vLLM was built and tested against."""
    workload = ctx.workload
    if workload is None or ctx.effective.version_source == "assumed-newest":
        return Outcome(False)  # which vLLM runs is not in the files
    items: list[Evidence] = []
    for claim in workload.installs:
        if claim.package not in ("torch", "transformers") or claim.version is None:
            continue
        required = ctx.knowledge.release_requires("vllm", ctx.version, claim.package)
        if required is not None and not contains(parse_specifier(required), parse_version(claim.version)):
            text = (
                f"pip install {claim.requirement} beside vLLM {ctx.version}, which requires {claim.package}{required}"
            )
            items.append(Evidence(text, claim.location))
    return Outcome(bool(items) is wanted, items=items)


def _admits_outside(written: str, required: SpecifierSet) -> bool:
    """Whether pip, asked for ``written`` (transformers, transformers<5.17, transformers==5.25.0), may install a
    release outside ``required``: the newest release it admits is tried against the versions either names."""
    try:
        asked = Requirement(written).specifier
    except InvalidRequirement:
        return True
    named = {s.version for s in (*asked, *required)} | {"9999"}
    return any(asked.contains(v, prereleases=False) and not required.contains(v) for v in named)


def _install_breaks_model(wanted: bool, ctx: Context) -> Outcome:
    """A vLLM the workload pip-installs (not an image's, built with the packages of its day) whose requirement
    admits a package release that breaks the served model's class (a compat pin's breaks_architectures), with no
    install of that package inside the pin: pip takes the newest, and the model fails to load."""
    workload, model = ctx.workload, _served_model(ctx)
    if workload is None or model is None or ctx.effective.version_source != "pip-install":
        return Outcome(False)
    items: list[Evidence] = []
    for pin in ctx.knowledge.pins:
        if model.architecture not in pin.breaks_architectures or not in_range(pin.vllm_versions, ctx.version):
            continue
        required = Requirement(pin.requirement).specifier
        claims = [c for c in workload.installs if c.package == pin.package]
        if claims and not all(_admits_outside(c.requirement, required) for c in claims):
            continue
        vllm = next((c for c in workload.installs if c.package == "vllm"), None)
        asked = ", ".join(c.requirement for c in claims) or f"no {pin.package} of its own"
        text = (
            f"vLLM {ctx.version} installed by pip ({asked}) takes the newest {pin.package} its requirement admits, "
            f"and {model.architecture} ({model.name}) needs {pin.requirement} to load"
        )
        items.append(Evidence(text, vllm.location if vllm is not None else None))
    return Outcome(bool(items) is wanted, items=items)


# Options argparse collects rather than replaces (action="append": wheel:vllm==0.11.0:vllm/entrypoints/openai/
# cli_args.py:211, wheel:vllm==0.34.0:vllm/entrypoints/common/cli_args.py:408).
_APPENDED = frozenset({"--middleware"})


def _option_repeated(wanted: bool, flags: Sequence[FlagUse]) -> Outcome:
    """An option given twice in one command with two values: vLLM's parser (an argparse ArgumentParser) keeps the
    last, so the first value, often the one the author meant, does nothing. Dotted keys (--x.key) merge instead."""
    first: dict[str, FlagUse] = {}
    items: list[Evidence] = []
    for flag in flags:
        name = normalize_flag(flag.name)
        if "." in name or name in _APPENDED or flag.unresolved or not isinstance(flag.value, str):
            continue
        seen = first.setdefault(name, flag)
        if seen is not flag and seen.value != flag.value:
            text = (
                f"{name} is given as {clip(str(seen.value), 40)} at {seen.location} and as {clip(flag.value, 40)} "
                f"here; vLLM takes the last, {clip(flag.value, 40)}"
            )
            items.append(Evidence(text, flag.location))
    return Outcome(bool(items) is wanted, items=items)


def _ray_cluster(wanted: bool, ctx: Context) -> Outcome:
    workload = ctx.workload
    if workload is None:
        return Outcome(None, missing=["the workload"])
    evidence = [Evidence("its script starts or joins a Ray cluster (ray start)", workload.location)]
    return Outcome(workload.ray_cluster is wanted, evidence if workload.ray_cluster else [])


def _entrypoint(module: str, ctx: Context) -> Outcome:
    workload = ctx.workload
    if workload is None or workload.entrypoint != module:
        return Outcome(False)
    return Outcome(True, [Evidence(f"python -m {module}", workload.location)])


# Options that configure a KV connector another way: a value the files do not settle may name LMCache's.
_KV_CONNECTOR_OPTIONS = ("--kv-transfer-config", "--kv-offloading-backend", "--kv-offloading-size")


def _upstream_build(image: str | None) -> bool:
    """No image (an install, a script), vllm/vllm-openai, or a build whose tag names the vLLM release it is of."""
    return image is None or "vllm/vllm-openai" in image or image_version(image) is not None


def _lmcache_settings_unused(wanted: bool, asked: Asked) -> Outcome:
    """LMCACHE_* variables on a vLLM server whose launch, written whole in the files, loads no KV connector: only
    vLLM's LMCache connectors read them. Not judged where a chart or operator builds the command (it may add the
    connector), for Dynamo's worker (its own options configure connectors in some releases), or beside an LMCache
    server the same files start (the variables may be its)."""
    ctx = asked.ctx
    workload, deployment = ctx.workload, ctx.deployment
    if workload is None or deployment is None or workload.pod_elsewhere or workload.entrypoint == "dynamo.vllm":
        return Outcome(False)
    if not _upstream_build(ctx.effective.image):
        return Outcome(False)  # another build (LMCache's old lmcache/lmcache_vllm) may load LMCache by itself
    if ctx.effective.connectors or any(f.name in _KV_CONNECTOR_OPTIONS for f in asked.workload_flags):
        return Outcome(not wanted)
    uses = [u for u in workload.env if u.name.startswith("LMCACHE_")]  # its environment, not a config file's keys
    if uses and (deployment.cache_servers or any(w.role == "lmcache-server" for w in deployment.workloads)):
        return Outcome(False)
    items = [Evidence(f"{u.name} is set, and no KV connector loads LMCache", u.location) for u in uses[:3]]
    return Outcome(bool(items) is wanted, items=items)


def _hidden_metrics_version_mismatch(wanted: bool, asked: Asked) -> Outcome:
    """--show-hidden-metrics-for-version X shows the hidden metrics only where X is the release line before the
    one that runs, written as vLLM compares it: "MAJOR.MINOR" (vllm/version.py _prev_minor_version_was)."""
    ctx = asked.ctx
    flag = next((f for f in asked.workload_flags if f.name == "--show-hidden-metrics-for-version"), None)
    if flag is None or not isinstance(flag.value, str) or not flag.value or flag.unresolved:
        return Outcome(False)
    previous = f"{ctx.version.major}.{ctx.version.minor - 1}"
    if flag.value == previous:
        return Outcome(False)
    text = (
        f"--show-hidden-metrics-for-version {flag.value}: vLLM {ctx.version} shows its hidden metrics only for "
        f"{previous}, so the option does nothing and the metrics hidden since {previous} stay hidden"
    )
    return Outcome(wanted, items=[Evidence(text, flag.location)])


def _pinned_to_unknown_release(effective: Effective) -> bool:
    """The release is assumed, yet the image is one fixed build (a dated dev build, a vendor's tag): not the newest
    release a moving tag (latest, nightly) or an unpinned install gets, but a release the files do not say."""
    image = effective.image
    return effective.version_source == "assumed-newest" and bool(image) and floating_tag(image or "") is None


def _vllm_env_value_refused(wanted: bool, asked: Asked) -> Outcome:
    ctx = asked.ctx
    if _vendor_build(True, asked).value:
        return Outcome(False)  # a vendor's build defines its variables its own way
    set_literally = [u for u in ctx.effective.env.values() if u.name.startswith("VLLM_") and u.value is not None]
    if ctx.workload is not None and ctx.deployment is not None:
        set_literally += service_link_env(ctx.deployment, ctx.workload)
    by_name = {u.name: u for u in set_literally}
    items = []
    for p in check_vllm_env_values([(u.name, u.value or "") for u in set_literally], ctx.version, ctx.knowledge):
        use = by_name[p.key]
        origin = f", {use.reference}," if use.reference else ""
        items.append(Evidence(f"{p.key}={use.value!r}{origin} {p.message} ({p.engine_message})", use.location))
    return Outcome(bool(items) is wanted, items=items)


def _graph(check: str, asked: Asked) -> Outcome:
    """Each place where the workload disagrees with another object of the deployment (deployment/graph.py)."""
    ctx = asked.ctx
    if ctx.workload is None or ctx.deployment is None:
        return Outcome(False)
    graph = Graph(ctx.workload, ctx.effective, ctx.deployment, ctx.knowledge, tuple(ctx.others), ctx.shared.graph_memo)
    hits = CHECKS[check](graph)
    items = [Evidence(hit.text, hit.location) for hit in hits]
    return Outcome(bool(items), items=items)


# One evaluator per condition key (the names of `Condition`'s fields): a new condition is a
# function taking the key's value and what was asked, and one entry here.
EVALUATORS: dict[str, Callable[[Any, Asked], Outcome]] = {
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
    "kv_role": _kv_role,
    "kv_role_missing": _kv_role_missing,
    "lmcache_shared_backend": _lmcache_shared_backend,
    "connector_hma": lambda support, asked: _connector_hma(support, asked.ctx),
    "connector_unavailable": lambda skipped, asked: _connector_unavailable(skipped, asked.ctx),
    "offload_shorthand": lambda wanted, asked: _offload_shorthand(wanted, asked.ctx),
    "pd_proxy_mismatch": lambda wanted, asked: _pd_proxy_mismatch(wanted, asked.ctx),
    "extra_config": lambda test, asked: _extra_config(test, asked.ctx),
    "tier": _tier,
    "tier_unregistered": _tier_unregistered,
    "connector_configured": _connector_configured,
    "transfer_config_replaced": _transfer_config_replaced,
    "model_matches": lambda pattern, asked: _model_matches(pattern, asked.ctx),
    "model_layers": lambda kind, asked: _model_layers(kind, asked.ctx),
    "gpu_segment": lambda segments, asked: _gpu_segment(segments, asked.ctx),
    "gpu_capability_below": lambda floor, asked: _gpu_capability_below(floor, asked.ctx),
    "compare": lambda comparison, asked: _comparison(comparison, asked.ctx),
    "entry_unavailable": lambda entry_id, asked: _entry_unavailable(entry_id, asked.ctx),
    "entry_deprecated": lambda entry_id, asked: _entry_deprecated(entry_id, asked.ctx),
    "start_problem": _start_problem,
    "engine_schema": _engine_schema,
    "lmcache_schema": _lmcache_schema,
    "flag_value_vanished": _flag_value_vanished,
    "vllm_env_unread": _vllm_env_unread,
    "lmcache_settings_unused": _lmcache_settings_unused,
    "entrypoint": lambda module, asked: _entrypoint(module, asked.ctx),
    "ray_cluster": lambda wanted, asked: _ray_cluster(wanted, asked.ctx),
    "python_unsupported": lambda wanted, asked: _python_unsupported(wanted, asked.ctx),
    "python_caps_release": lambda wanted, asked: _python_caps_release(wanted, asked.ctx),
    "pin_outside_vllm_requirement": lambda wanted, asked: _pin_outside_vllm_requirement(wanted, asked.ctx),
    "install_breaks_model": lambda wanted, asked: _install_breaks_model(wanted, asked.ctx),
    "option_repeated": lambda wanted, asked: _option_repeated(wanted, asked.workload_flags),
    "weights_exceed_gpu": lambda wanted, asked: _weights_exceed_gpu(wanted, asked.ctx),
    "release_pinned_unknown": lambda wanted, asked: _release_pinned_unknown(wanted, asked.ctx),
    "vllm_env_value_refused": _vllm_env_value_refused,
    "hidden_metrics_version_mismatch": _hidden_metrics_version_mismatch,
    "flag_release_dependent": lambda wanted, asked: _flag_release_dependent(asked.ctx, asked.workload_flags),
    "flag_value_refused": lambda wanted, asked: _flag_value_refused(wanted, asked),
    "vendor_build": _vendor_build,
    "gpu_build": _gpu_build,
    "hygiene": _hygiene,
    "graph": _graph,
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


def _accepts(accepted: AbstractSet[str], name: str) -> bool:
    stem = name[5:] if name.startswith("--no-") else None
    if name in accepted or (stem is not None and "--" + stem in accepted):
        return True
    return len(_abbreviation_of(name, accepted)) == 1


def _flag_release_dependent(ctx: Context, workload_flags: Sequence[FlagUse]) -> Outcome:
    """With the release assumed (no tag or version says it), each option the assumed release accepts that
    covered releases after its first one refuse: whether the server starts depends on the release it runs."""
    if ctx.effective.version_source != "assumed-newest":
        return Outcome(False)
    releases = ctx.knowledge.release_versions()
    accepted = {v: ctx.knowledge.cli_inventory.accepted(v) for v in releases}
    items = []
    for flag in dict.fromkeys(f.name.split(".", 1)[0] for f in workload_flags):
        if not flag.startswith("--") or not _accepts(accepted[ctx.version], flag):
            continue
        known = [v for v in releases if _accepts(accepted[v], flag)]
        refused = [v for v in releases if v > known[0] and v not in known]
        if refused:
            where = next(f.location for f in workload_flags if f.name.split(".", 1)[0] == flag)
            items.append(
                Evidence(
                    f"{flag} is accepted by vLLM {ctx.version} (assumed) but refused by {_runs(refused, releases)}; "
                    "the files do not say which release runs",
                    where,
                )
            )
    return Outcome(bool(items), items=items)


def _flag_value_refused(wanted: bool, asked: Asked) -> Outcome:
    """Each option whose value as written the release refuses before the server starts (advice/flag_values.py),
    with the covered releases that take it, where some do."""
    ctx = asked.ctx
    workload = ctx.workload
    named = workload is not None and (workload.model is not None or any(f.name == "--model" for f in workload.flags))
    parsed = workload is None or not workload.engine_kwargs
    releases = ctx.knowledge.release_versions()
    items = []
    for r in refused_values(asked.workload_flags, ctx.version, ctx.knowledge, named, parsed):
        taken = [
            v
            for v in releases
            if r.option in ctx.knowledge.cli_inventory.accepted(v)
            and not refused_values([r.flag], v, ctx.knowledge, named, parsed)
        ]
        elsewhere = f"; vLLM {_runs(taken, releases)} take it" if taken else ""
        if taken and ctx.effective.version_source == "assumed-newest":
            elsewhere += f" (the files do not say which release runs; reviewed as {ctx.version})"
        written = r.flag.written + ("" if "=" in r.flag.written else f" {r.value}")
        text = f"{written}: vLLM {ctx.version}{r.stage} ({r.error}); it accepts {r.accepted}{elsewhere}"
        items.append(Evidence(text, r.flag.location))
    if workload is not None and parsed:
        items += [_stray_word(word, where, ctx.version) for word, where in workload.stray_words]
    return Outcome(bool(items) is wanted, items=items)


def _stray_word(word: str, where: Location, version: Version) -> Evidence:
    """A second positional word after the model: `vllm serve` has one positional (the model tag), so argparse
    stops with "unrecognized arguments"."""
    shown = clip(word, 60)
    text = f'{shown}: a positional word after the model; vLLM {version} stops ("unrecognized arguments: {shown}")'
    if ASSIGNMENT.match(word):
        text += "; an environment variable is set in the container's env, not among its arguments"
    return Evidence(text, where)


def _runs(picked: list[Version], releases: list[Version]) -> str:
    """Releases as runs of consecutive covered ones: "0.17.0 - 0.32.0, 0.33.1"."""
    runs: list[list[Version]] = []
    for v in picked:
        if runs and releases.index(v) == releases.index(runs[-1][-1]) + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(f"{r[0]} - {r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


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


def _gpu_capability_below(floor: str, ctx: Context) -> Outcome:
    gpu_id = ctx.effective.gpu
    capability = ctx.knowledge.engine.capability(gpu_id) if gpu_id else None
    if capability is None:
        return Outcome(
            None, missing=["host.gpu (or a nvidia.com/gpu.product node selector) with a known compute capability"]
        )
    name = getattr(ctx.knowledge.by_id.get(gpu_id or ""), "name", gpu_id)
    below = capability.as_tuple < tuple(int(part) for part in floor.split("."))
    return Outcome(below, [Evidence(f"GPU {name}: compute capability {capability.compute_capability}")])


def _comparison(compare: Comparison, ctx: Context) -> Outcome:
    """False when the configuration leaves a side empty; unknown when an input is missing."""
    left, left_label, left_missing, left_absent = _expression(compare.left, ctx)
    right, right_label, right_missing, right_absent = _expression(compare.right, ctx)
    if left_absent or right_absent:
        return Outcome(False)
    if left is None or right is None:
        return Outcome(None, missing=left_missing + right_missing)
    holds = _compare(left, compare.op, right)
    # the evidence states what is true: under `not`, a comparison that fails is shown with the operator that holds
    op = compare.op if holds else _NEGATED[compare.op]
    text = f"{_shown(left_label, left)} {op} {_shown(right_label, right)}"
    return Outcome(holds, [Evidence(text, _operand_location(compare.left, ctx))])


_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


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


def rules(knowledge: Knowledge) -> list[Pitfall]:
    return [p for p in knowledge.pitfalls if p.when is not None]
