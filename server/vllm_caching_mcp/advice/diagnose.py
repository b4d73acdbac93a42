"""diagnose: why KV offload does not help, or why TTFT is still bad — ranked causes with evidence.

Inputs are the symptoms, optionally the deployment (read with `deployment.py` and reviewed with
the same rules as `review_deployment`) and one or two pasted Prometheus `/metrics` dumps. The
dumps are parsed with prometheus_client's exposition-format parser; every metric is looked up
by the names `knowledge/metrics.yaml` gives for the release, so a dump from another release (or
a dashboard on old names) is itself a finding. With two dumps, counters are read as the
difference between them (the "after" minus the "before"), which is what the window measured;
with one, as totals since start. A counter that went down was reset by a restart and is read from
zero; a metric with a NaN, infinite or huge sample is not used, and metric_notes says so. Lines
are bounded (MAX_METRICS_LINE, MAX_METRICS_QUOTES) so that the parser's time stays proportional
to the dump's size.

Each cause gets the readings behind it and the next check to run. The thresholds are stated in
`_THRESHOLDS` and in each cause's text; they are judgement, not facts about vLLM.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..knowledge import Knowledge, Metric, normalize_name
from .common import AdviceError, Citation, Result, ToolSpec, VersionContext, cite, readable_number, resolve_version
from .deployment import Documents
from .review import HostFacts, ReviewRequest, review_deployment

Symptom = Literal[
    "offload_does_not_help", "ttft_high", "tpot_high", "low_hit_rate", "preemptions", "oom", "throughput_low"
]
CauseId = Literal[
    "memory_wall",
    "no_prefix_locality",
    "prefix_caching_off",
    "tier_thrashing",
    "tier_too_small",
    "per_rank_sizing",
    "cold_cache",
    "max_model_len_too_high",
    "decode_bound",
    "connector_not_loaded",
    "wrong_metric_names",
]

# Judgement calls, in one place: what counts as low, high, cold.
_THRESHOLDS = {
    "low_hit_rate": 0.10,  # below 10 % of looked-up tokens found
    "high_gpu_hit_rate": 0.50,  # prefix reuse already works on the GPU
    "kv_usage_full": 0.90,  # GPU KV cache 90 % used
    "cold_queries": 1_000_000,  # fewer looked-up tokens than this: the cache has not warmed up
    "store_to_load": 10.0,  # ten times more bytes stored than loaded back
}

# The metrics a diagnosis reads, by knowledge id.
_READ = (
    "metric.prefix_cache_queries",
    "metric.prefix_cache_hits",
    "metric.gpu_prefix_cache_queries",
    "metric.gpu_prefix_cache_hits",
    "metric.external_prefix_cache_queries",
    "metric.external_prefix_cache_hits",
    "metric.kv_cache_usage_perc",
    "metric.gpu_cache_usage_perc",
    "metric.num_preemptions",
    "metric.kv_offload_cpu_cache_usage_perc",
    "metric.kv_offload_stores_skipped",
    "metric.kv_offload_allocation_failure",
    "metric.kv_offload_store_bytes",
    "metric.kv_offload_load_bytes",
    "metric.kv_offload_total_bytes",
)


class DiagnoseRequest(BaseModel):
    symptoms: list[Symptom] = Field(
        default_factory=list,
        max_length=10,
        description="What is wrong: offload_does_not_help, ttft_high, tpot_high, low_hit_rate, preemptions, oom, "
        "throughput_low",
    )
    description: str | None = Field(default=None, max_length=4000, description="The problem in your own words")
    deployment: Documents | None = Field(
        default=None, max_length=50, description="The deployment (command lines, manifests), as for review_deployment"
    )
    vllm_version: str | None = Field(default=None, max_length=40, description="The vLLM release; else the newest")
    metrics_before: str | None = Field(
        default=None, max_length=5_000_000, description="A /metrics dump (Prometheus text format)"
    )
    metrics_after: str | None = Field(
        default=None,
        max_length=5_000_000,
        description="A second /metrics dump taken later under load; counters are then read as after minus before",
    )
    host: HostFacts | None = None
    p99_context_tokens: int | None = Field(default=None, gt=0, le=100_000_000)


class Reading(BaseModel):
    metric: str
    id: str
    available_in_version: bool
    present: bool = Field(description="found in the dump")
    value: float | None = Field(
        description="the window's delta for counters with two dumps, else the value; null when absent or when a "
        "sample is NaN, infinite or beyond ±2^63 (metric_notes says which)"
    )


class Cause(BaseModel):
    id: CauseId
    likelihood: Literal["high", "medium", "low"]
    title: str
    evidence: list[str]
    next_check: str


class DiagnoseResult(Result):
    version_context: VersionContext
    window: Literal["delta", "since_start", "none"]
    readings: list[Reading]
    derived: dict[str, float] = Field(description="hit rates and ratios computed from the readings")
    causes: list[Cause]
    metric_notes: list[str]
    citations: list[Citation]

    def summary(self) -> str:
        lines = [f"vLLM {self.version_context.version}; metrics: {self.window}"]
        for k, v in self.derived.items():
            lines.append(f"  {k}: {v:.3g}")
        if not self.causes:
            lines.append("No cause stands out from what was given; paste two /metrics dumps taken under load.")
        for i, c in enumerate(self.causes, 1):
            lines.append(f"{i}. [{c.likelihood}] {c.title}")
            lines += [f"     - {e}" for e in c.evidence]
            lines.append(f"     next: {c.next_check}")
        lines += [f"note: {n}" for n in self.metric_notes]
        lines += [f"warning: {w}" for w in self.version_context.warnings]
        return "\n".join(lines)


Families = dict[str, dict[str, Any]]  # normalised family name -> {'name', 'type', 'samples'}

# A /metrics line longer than this is refused. prometheus_client's parser copies the rest of the
# line once for each label and each escaped quote, so one line costs up to its length squared;
# with lines bounded, a dump costs time in proportion to its size. vLLM's longest lines
# (cache_config_info, LoRA adapter lists) run to a few hundred characters, rarely a few thousand.
MAX_METRICS_LINE = 65_536
# And so are more double quotes in one line than this: the parser's copies are one per label (two
# quotes each) and one per escaped quote, so with both bounded a long line costs what a short one
# does. vLLM's series have a few dozen labels at most.
MAX_METRICS_QUOTES = 1_024
_WS = r"[ \t\r\x0b\x0c]+"
# The comment lines the parser reads: HELP and TYPE, with the metric's name (quoted names may hold spaces).
_DESCRIPTOR = re.compile(rf'#{_WS}(HELP|TYPE){_WS}("(?:[^"\\]|\\.)*"|[^"\s]+)(?:{_WS}(.*))?')


def _exposition_lines(text: str, field: str, position: list[int]) -> Iterator[str]:
    """The dump's lines as the parser is to read them, with ``position[0]`` the number of the last one.

    HELP and TYPE lines are rewritten to their name and type, other comments dropped: the parser
    reads those much as it reads labels (one copy of the rest of the line per run of spaces), and
    the help text is never used."""
    for number, line in enumerate(io.StringIO(text), 1):
        position[0] = number
        length = len(line.rstrip("\r\n"))
        if length > MAX_METRICS_LINE:
            raise AdviceError(
                field,
                f"line {number} is {length:,} characters long; /metrics lines are read up to {MAX_METRICS_LINE:,} "
                "characters (vLLM writes a few hundred)",
            )
        quotes = line.count('"')
        if quotes > MAX_METRICS_QUOTES:
            raise AdviceError(
                field,
                f"line {number} has {quotes:,} double quotes; /metrics lines are read with up to "
                f"{MAX_METRICS_QUOTES:,} (two a label, vLLM's series have a few dozen labels)",
            )
        stripped = line.strip()
        if not stripped.startswith("#"):
            yield line
            continue
        described = _DESCRIPTOR.fullmatch(stripped)
        if described is None:
            continue  # a plain comment, which the parser skips too
        kind, name, rest = described.groups()
        kept = " ".join(rest.split()) if kind == "TYPE" and rest else ""
        yield f"# {kind} {name} {kept}".rstrip() + "\n"


def parse_metrics(text: str, field: str) -> Families:
    """Family name (normalised) → {'type', 'samples': [(name, labels, value)]}.

    Values are kept as written, NaN and infinities included: `_read` decides per metric what can be used."""
    # Imported here: only this tool needs the parser, and the server should start without it.
    from prometheus_client.parser import text_fd_to_metric_families

    families: Families = {}
    position = [0]
    try:
        for family in text_fd_to_metric_families(_exposition_lines(text, field, position)):  # type: ignore[arg-type]
            samples = [(s.name, dict(s.labels), float(s.value)) for s in family.samples]
            # One name, several families: series without their TYPE line (a grep of the dump) each
            # read as a family of their own; all their samples count.
            known = families.setdefault(normalize_name(family.name), {"name": family.name, "type": family.type})
            known.setdefault("samples", []).extend(samples)
    except AdviceError:
        raise  # a line past the bounds, from _exposition_lines
    except (ValueError, TypeError, IndexError) as exc:
        problem = " ".join(str(exc).split()) or type(exc).__name__
        raise AdviceError(
            field, f"line {position[0]}: not in the Prometheus text exposition format ({_clip(problem, 160)})"
        ) from None
    if not families:
        raise AdviceError(field, "no metrics found; paste the output of `curl http://HOST:8000/metrics`")
    return families


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _read(
    families: Families, metric: Metric, dump: str, label: tuple[str, str] | None = None
) -> tuple[float | None, str | None]:
    """The metric in one dump — the largest sample of a gauge, the sum of a counter's, over the samples
    with ``label`` when given — or None and why not: a NaN, an infinity or a number past ±2^63 in
    any of the samples makes the sum meaningless."""
    family = families.get(normalize_name(metric.name))
    if family is None:
        return None, None
    values = [
        v
        for name, labels, v in family["samples"]
        if not name.endswith(("_created", "_bucket", "_count", "_sum"))
        and (label is None or labels.get(label[0]) == label[1])
    ]
    if not values:
        return None, None
    unreadable = next((v for v in values if readable_number(v) is None), None)
    if unreadable is not None:
        return None, f"{metric.name} has a sample of {unreadable:g} in {dump}; it is not used"
    return (max(values) if metric.type == "gauge" else sum(values)), None


def _window(
    metric: Metric, before: Families | None, after: Families | None, label: tuple[str, str] | None = None
) -> tuple[float | None, bool, list[str]]:
    """The metric's value for the window, whether the dump has it, and notes on what could not be used.

    With two dumps a counter is read as after minus before; one that went down was reset by a
    restart in between and is read from zero, as Prometheus's increase() does."""
    latest, dump = (after, "metrics_after") if after is not None else (before, "metrics_before")
    assert latest is not None
    value, problem = _read(latest, metric, dump, label)
    present = value is not None or problem is not None
    notes = [problem] if problem else []
    if value is None or after is None or before is None or metric.type != "counter":
        return value, present, notes
    earlier, problem = _read(before, metric, "metrics_before", label)
    if problem:
        return None, present, [problem]
    if earlier is None:
        return value, present, notes
    if value < earlier:
        notes.append(
            f"{metric.name} went down between the dumps ({earlier:g} to {value:g}): the server restarted, so "
            "the window is counted from the restart"
        )
        return value, present, notes
    return value - earlier, present, notes


def _labels(families: Families, name: str) -> dict[str, str]:
    family = families.get(normalize_name(name))
    return dict(family["samples"][0][1]) if family and family["samples"] else {}


def diagnose(request: DiagnoseRequest, knowledge: Knowledge) -> DiagnoseResult:
    if not request.symptoms and not request.description and not request.metrics_before and not request.metrics_after:
        raise AdviceError("symptoms", "give symptoms, a description or at least one /metrics dump")
    if request.metrics_after and not request.metrics_before:
        raise AdviceError("metrics_before", "metrics_after needs metrics_before (the earlier dump)")
    version, context = resolve_version(knowledge, request.vllm_version, field="vllm_version")
    review = None
    if request.deployment:
        try:
            review = review_deployment(
                ReviewRequest(
                    documents=request.deployment,
                    vllm_version=request.vllm_version,
                    host=request.host,
                    p99_context_tokens=request.p99_context_tokens,
                ),
                knowledge,
            )
        except AdviceError as exc:
            if not exc.field.startswith("documents"):
                raise
            # review_deployment calls them documents (documents[2].text); this tool's field is deployment.
            field = "deployment" + exc.field.removeprefix("documents")
            raise AdviceError(field, str(exc).removeprefix(f"{exc.field}: ")) from None
        if request.vllm_version is None and review.workloads and review.workloads[0].version_source == "image-tag":
            version, context = resolve_version(knowledge, review.workloads[0].vllm_version, field="vllm_version")
    before = parse_metrics(request.metrics_before, "metrics_before") if request.metrics_before else None
    after = parse_metrics(request.metrics_after, "metrics_after") if request.metrics_after else None
    window: Literal["delta", "since_start", "none"] = "delta" if after else ("since_start" if before else "none")
    latest = after or before
    metrics = {m.id: m for m in knowledge.metrics}
    cited: dict[str, Any] = {}
    readings: dict[str, Reading] = {}
    notes: list[str] = []
    for metric_id in _READ:
        metric = metrics.get(metric_id)
        if metric is None or latest is None:
            continue
        value, present, problems = _window(metric, before, after)
        notes += problems
        readings[metric_id] = Reading(
            metric=metric.name,
            id=metric_id,
            available_in_version=metric.status_at(version) in ("available", "deprecated"),
            present=present,
            value=value,
        )
        cited[metric_id] = metric

    def get(metric_id: str) -> float | None:
        r = readings.get(metric_id)
        return r.value if r is not None else None

    # In the dump but not usable (a NaN, infinite or huge sample): no rate is built on it, where an
    # absent hits counter still reads as no hits.
    unusable = {i for i, r in readings.items() if r.present and r.value is None}
    derived: dict[str, float] = {}
    queries = get("metric.prefix_cache_queries") or get("metric.gpu_prefix_cache_queries")
    hits = get("metric.prefix_cache_hits") or get("metric.gpu_prefix_cache_hits")
    if queries and not unusable & {"metric.prefix_cache_hits", "metric.gpu_prefix_cache_hits"}:
        derived["gpu_prefix_hit_rate"] = (hits or 0) / queries
    ext_q, ext_h = get("metric.external_prefix_cache_queries"), get("metric.external_prefix_cache_hits")
    if ext_q and "metric.external_prefix_cache_hits" not in unusable:
        derived["external_hit_rate"] = (ext_h or 0) / ext_q
    usage = get("metric.kv_cache_usage_perc") or get("metric.gpu_cache_usage_perc")
    if usage is not None:
        derived["gpu_kv_usage"] = usage
    preemptions = get("metric.num_preemptions")
    if preemptions is not None:
        derived["preemptions"] = preemptions
    stored, loaded = get("metric.kv_offload_store_bytes"), get("metric.kv_offload_load_bytes")
    loads_unusable = "metric.kv_offload_load_bytes" in unusable
    if stored is None and latest is not None and "metric.kv_offload_total_bytes" in metrics:
        # Releases without the two byte counters count both directions in one, by transfer_type.
        total = metrics["metric.kv_offload_total_bytes"]
        stored, _, problems = _window(total, before, after, ("transfer_type", "GPU_to_CPU"))
        notes += problems
        loaded, present, problems = _window(total, before, after, ("transfer_type", "CPU_to_GPU"))
        notes += problems
        loads_unusable = present and loaded is None
    if stored is not None:
        derived["offload_store_gib"] = stored / (1 << 30)
    if loaded is not None:
        derived["offload_load_gib"] = loaded / (1 << 30)
    failures = get("metric.kv_offload_allocation_failure")
    if failures is not None:
        derived["offload_allocation_failures"] = failures

    causes: list[Cause] = []
    symptoms = set(request.symptoms)
    text = (request.description or "").lower()
    findings = {f.rule_id: f for f in review.findings} if review else {}
    connectors = [c for w in (review.workloads if review else []) for c in w.connectors]

    # Wrong names: families in the dump that this release does not export under that name.
    if latest is not None:
        wrong = []
        for family in latest.values():
            for entry in knowledge.find(family["name"]):
                if isinstance(entry, Metric) and entry.status_at(version) in ("removed", "not_yet"):
                    state = f"removed in {entry.removed}" if entry.removed else f"first in {entry.introduced}"
                    wrong.append(f"{entry.name} is {state}, so vLLM {version} does not export it")
                    cited[entry.id] = entry
        if wrong:
            causes.append(
                Cause(
                    id="wrong_metric_names",
                    likelihood="high",
                    title="The dump does not match the vLLM release assumed: version or metric names are off",
                    evidence=wrong[:5],
                    next_check="Check the server's version (GET /version) and give it as vllm_version; dashboards "
                    "must query the names of that release (check_version lists them).",
                )
            )
    old_names = metrics.get("metric.gpu_prefix_cache_hits")
    if "gpu_prefix_cache" in text and old_names is not None and old_names.status_at(version) == "removed":
        causes.append(
            Cause(
                id="wrong_metric_names",
                likelihood="high",
                title="Queries on vllm:gpu_prefix_cache_* return nothing on this release",
                evidence=["the description mentions gpu_prefix_cache metrics"],
                next_check="Query vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total instead.",
            )
        )
        _cite_pitfall(knowledge, "pitfall.old-prefix-cache-metric-names", cited)

    config = _labels(latest, "vllm:cache_config_info") if latest else {}
    if config.get("enable_prefix_caching", "").lower() == "false" or "pitfall.prefix-caching-disabled" in findings:
        evidence = []
        if config.get("enable_prefix_caching"):
            evidence.append('vllm:cache_config_info{enable_prefix_caching="False"}')
        if "pitfall.prefix-caching-disabled" in findings:
            evidence.append(str(findings["pitfall.prefix-caching-disabled"].location) + ": --no-enable-prefix-caching")
        causes.append(
            Cause(
                id="prefix_caching_off",
                likelihood="high",
                title="Prefix caching is off, so nothing is ever looked up in the offload tier",
                evidence=evidence,
                next_check="Remove --no-enable-prefix-caching and compare vllm:external_prefix_cache_hits_total.",
            )
        )

    # Connector configured but not loaded: no external lookups at all.
    ext_available = (
        "metric.external_prefix_cache_queries" in readings
        and readings["metric.external_prefix_cache_queries"].available_in_version
    )
    # The engine exports the external counter whether or not a connector runs (it stays at 0 without
    # one), so only a present zero says "no connector"; an absent series means a partial dump.
    if latest is not None and ext_available and (queries or 0) > 0 and ext_q == 0:
        evidence = [f"vllm:prefix_cache_queries = {queries:g} tokens but vllm:external_prefix_cache_queries is 0"]
        if connectors:
            evidence.append(f"the deployment configures {', '.join(sorted(set(connectors)))}")
        causes.append(
            Cause(
                id="connector_not_loaded",
                likelihood="high" if connectors or "offload_does_not_help" in symptoms else "medium",
                title="No KV connector is active in the server that produced the dump",
                evidence=evidence,
                next_check="Look for 'Creating v1 connector' / KVConnectorFactory lines in the start-up log and check "
                "the flags the pod really got (kubectl get pod -o yaml); the shorthand needs --kv-offloading-size.",
            )
        )

    gpu_rate, ext_rate = derived.get("gpu_prefix_hit_rate"), derived.get("external_hit_rate")
    if (usage is not None and usage >= _THRESHOLDS["kv_usage_full"]) and (preemptions or 0) > 0:
        causes.append(
            Cause(
                id="memory_wall",
                likelihood="high",
                title="GPU KV memory is full and requests are preempted: a capacity wall, which reuse cannot fix",
                evidence=[f"GPU KV usage {usage:.0%}", f"{preemptions:g} preemptions in the window"],
                next_check="An offload tier stores finished prefixes, it does not hold running requests; lower "
                "--max-num-seqs or --max-model-len, or add GPUs (size_offload shows the GPU KV budget).",
            )
        )
    elif (preemptions or 0) > 0 or symptoms & {"preemptions", "oom"}:
        causes.append(
            Cause(
                id="memory_wall",
                likelihood="medium",
                title="Requests are preempted for lack of GPU KV blocks",
                evidence=[f"{preemptions:g} preemptions" if preemptions else "reported preemptions or OOM"],
                next_check="Watch vllm:kv_cache_usage_perc under load; near 1.0 the GPU cache is the wall.",
            )
        )
    if queries is not None and queries < _THRESHOLDS["cold_queries"]:
        causes.append(
            Cause(
                id="cold_cache",
                likelihood="medium",
                title="Too little traffic measured for the cache to be warm",
                evidence=[f"{queries:g} prompt tokens looked up (under {_THRESHOLDS['cold_queries']:g})"],
                next_check="Take the two dumps minutes apart under representative traffic, after the first "
                "sessions return.",
            )
        )
    elif "restart" in text or "cold" in text:
        causes.append(
            Cause(
                id="cold_cache",
                likelihood="low",
                title="The cache may be cold after a restart (the CPU tier is not persistent)",
                evidence=["the description mentions a restart / cold start"],
                next_check="Compare hit rates in a window that starts well after the restart.",
            )
        )
    if (
        gpu_rate is not None
        and gpu_rate < _THRESHOLDS["low_hit_rate"]
        and (ext_rate is None or ext_rate < _THRESHOLDS["low_hit_rate"])
    ):
        causes.append(
            Cause(
                id="no_prefix_locality",
                likelihood="high" if (queries or 0) >= _THRESHOLDS["cold_queries"] else "medium",
                title="Requests share few prefixes (or the router spreads sessions), so there is little to reuse",
                evidence=[f"GPU prefix hit rate {gpu_rate:.1%}"]
                + ([f"external hit rate {ext_rate:.1%}"] if ext_rate is not None else []),
                next_check="Check that a session's requests reach the same replica (prefix- or session-aware routing) "
                "and that prompts start with the same system prompt and history, byte for byte.",
            )
        )
    if stored and not loads_unusable and ext_rate is not None and ext_rate < _THRESHOLDS["low_hit_rate"]:
        ratio = stored / loaded if loaded else float("inf")
        if ratio >= _THRESHOLDS["store_to_load"]:
            causes.append(
                Cause(
                    id="tier_thrashing",
                    likelihood="medium",
                    title="The tier stores far more than it ever loads back: blocks are evicted before reuse",
                    evidence=[
                        f"stored {stored / (1 << 30):.3g} GiB, loaded {(loaded or 0) / (1 << 30):.3g} GiB",
                        f"external hit rate {ext_rate:.1%}",
                    ],
                    next_check="Compare the tier size with the working set of returning sessions (size_offload); "
                    "on 0.18.0+ store_threshold: 2 keeps one-off prompts out of the CPU tier.",
                )
            )
    if failures:
        causes.append(
            Cause(
                id="tier_too_small",
                likelihood="high",
                title="The CPU tier ran out of space to store new blocks",
                evidence=[f"vllm:kv_offload_allocation_failure_total = {failures:g} in the window"],
                next_check="Raise --kv-offloading-size (a total across TP ranks) within host RAM, or add a disk tier.",
            )
        )
    if "pitfall.kv-offloading-size-per-rank" in findings:
        f = findings["pitfall.kv-offloading-size-per-rank"]
        causes.append(
            Cause(
                id="per_rank_sizing",
                likelihood="high",
                title="--kv-offloading-size looks like a per-GPU number, leaving the tier TP times too small",
                evidence=[f"{f.location}: {f.message}"],
                next_check="Multiply the per-GPU amount by TP x PP; --kv-offloading-size is the total for the engine.",
            )
        )
    if "pitfall.max-model-len-far-above-workload" in findings:
        f = findings["pitfall.max-model-len-far-above-workload"]
        causes.append(
            Cause(
                id="max_model_len_too_high",
                likelihood="medium",
                title="--max-model-len far above real requests",
                evidence=[f"{f.location}: {f.message}"],
                next_check="Set --max-model-len near the p99 context; see whether preemptions fall.",
            )
        )
    if (
        symptoms & {"tpot_high", "throughput_low"}
        and gpu_rate is not None
        and gpu_rate >= _THRESHOLDS["high_gpu_hit_rate"]
    ):
        causes.append(
            Cause(
                id="decode_bound",
                likelihood="high" if "tpot_high" in symptoms else "medium",
                title="Prefill is already mostly cached; the time goes to decoding, which offload does not speed up",
                evidence=[f"GPU prefix hit rate {gpu_rate:.1%}"],
                next_check="Compare vllm:time_to_first_token_seconds with vllm:inter_token_latency_seconds; decode "
                "speed depends on batch size, CUDA graphs (no --enforce-eager) and speculative decoding.",
            )
        )
    elif "tpot_high" in symptoms and "ttft_high" not in symptoms:
        causes.append(
            Cause(
                id="decode_bound",
                likelihood="low",
                title="The complaint is decode speed, which KV offload does not change",
                evidence=["symptom tpot_high without ttft_high"],
                next_check="Check --enforce-eager, batch size and speculative decoding before touching the cache.",
            )
        )
    if (
        readings.get("metric.kv_offload_cpu_cache_usage_perc")
        and readings["metric.kv_offload_cpu_cache_usage_perc"].present
    ):
        notes.append(
            "vllm:kv_offload_cpu_cache_usage_perc is the share of the CPU tier pinned by transfers in flight, "
            "not how full the tier is; judge tier pressure from the external hit rate and allocation failures."
        )
        _cite_pitfall(knowledge, "pitfall.kv-offload-usage-is-in-flight", cited)
    if (get("metric.kv_offload_stores_skipped") or 0) > 0:
        notes.append(
            "vllm:kv_offload_stores_skipped counts stores the reuse filter (store_threshold) chose to skip, not "
            "stores dropped for lack of space."
        )
    order = {"high": 0, "medium": 1, "low": 2}
    merged: dict[str, Cause] = {}
    for cause in sorted(causes, key=lambda c: order[c.likelihood]):
        merged.setdefault(cause.id, cause)
    citations = [cite(i, e, knowledge) for i, e in cited.items()]
    if review is not None:
        citations += review.citations
    return DiagnoseResult(
        version_context=context,
        window=window,
        readings=list(readings.values()),
        derived=derived,
        causes=list(merged.values()),
        metric_notes=notes,
        citations=citations,
    )


def _cite_pitfall(knowledge: Knowledge, pitfall_id: str, cited: dict[str, Any]) -> None:
    entry = knowledge.by_id.get(pitfall_id)
    if entry is not None:
        cited[pitfall_id] = entry


SPEC = ToolSpec(
    name="diagnose",
    title="Diagnose why KV offload does not help",
    description=(
        "For 'offload doesn't help' and 'TTFT is still bad': give symptoms, optionally the deployment and one or two "
        "pasted Prometheus /metrics dumps (before/after, read as a delta). Computes the GPU prefix-cache hit rate, the "
        "offload tier's (external) hit rate, KV usage, preemptions, stored vs loaded bytes and allocation failures "
        "from the metric names of the vLLM release, and ranks causes — memory wall, no prefix locality, prefix caching "
        "off, tier thrashing, tier too small, per-rank sizing, cold cache, max-model-len too high, decode-bound, "
        "connector not loaded, wrong metric names — each with its evidence and the next check to run."
    ),
    request=DiagnoseRequest,
    result=DiagnoseResult,
    run=diagnose,
)
