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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..knowledge import Knowledge, Metric, Setting, Sourced, normalize_name
from ..versions import Version
from .common import AdviceError, Citation, Result, ToolSpec, VersionContext, cite, readable_number, resolve_version
from .deployment import Documents
from .review import Finding, HostFacts, ReviewRequest, ReviewResult, review_deployment

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
    version: str | None = Field(default=None, max_length=40, description="The vLLM release; else the newest")
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


# -- the tool, step by step: inputs, readings, the numbers they give, causes, notes ---------------------


def diagnose(request: DiagnoseRequest, knowledge: Knowledge) -> DiagnoseResult:
    _check_inputs(request)
    version, context = resolve_version(knowledge, request.version, field="version")
    review = _review(request, knowledge)
    tagged = _image_tag_version(review) if request.version is None else None
    if tagged is not None:
        version, context = resolve_version(knowledge, tagged, field="version")
    dumps = _Dumps(
        before=parse_metrics(request.metrics_before, "metrics_before") if request.metrics_before else None,
        after=parse_metrics(request.metrics_after, "metrics_after") if request.metrics_after else None,
    )
    metrics = {m.id: m for m in knowledge.metrics}
    readings, notes = _readings(metrics, dumps, version)
    signals, problems = _signals(readings, metrics, dumps)
    case = _Case(
        symptoms=frozenset(request.symptoms),
        description=(request.description or "").lower(),
        signals=signals,
        findings={f.rule_id: f for f in review.findings} if review else {},
        connectors=[c for w in (review.workloads if review else []) for c in w.connectors],
        dumps=dumps,
        version=version,
        metrics=metrics,
        knowledge=knowledge,
    )
    causes, named = _wrong_metric_names(case)
    causes += [cause for check in _CHECKS if (cause := check(case)) is not None]
    offload_notes, explained = _offload_metric_notes(case)
    cited: dict[str, Sourced] = {metric_id: metrics[metric_id] for metric_id in readings} | named | explained
    return DiagnoseResult(
        version_context=context,
        window=dumps.window,
        readings=list(readings.values()),
        derived=signals.derived(),
        causes=_ranked(causes),
        metric_notes=notes + problems + offload_notes,
        citations=[cite(i, e, knowledge) for i, e in cited.items()] + (review.citations if review else []),
    )


def _check_inputs(request: DiagnoseRequest) -> None:
    if not request.symptoms and not request.description and not request.metrics_before and not request.metrics_after:
        raise AdviceError("symptoms", "give symptoms, a description or at least one /metrics dump")
    if request.metrics_after and not request.metrics_before:
        raise AdviceError("metrics_before", "metrics_after needs metrics_before (the earlier dump)")


def _review(request: DiagnoseRequest, knowledge: Knowledge) -> ReviewResult | None:
    """The deployment reviewed as review_deployment would, its input errors named by this tool's field."""
    if not request.deployment:
        return None
    try:
        return review_deployment(
            ReviewRequest(
                documents=request.deployment,
                version=request.version,
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


def _image_tag_version(review: ReviewResult | None) -> str | None:
    """The vLLM release the deployment's image tag names, when it names one."""
    if review is None or not review.workloads or review.workloads[0].version_source != "image-tag":
        return None
    return review.workloads[0].vllm_version


@dataclass(frozen=True)
class _Dumps:
    """The one or two /metrics dumps, parsed."""

    before: Families | None
    after: Families | None

    @property
    def latest(self) -> Families | None:
        return self.after or self.before

    @property
    def window(self) -> Literal["delta", "since_start", "none"]:
        return "delta" if self.after else ("since_start" if self.before else "none")


def _readings(metrics: dict[str, Metric], dumps: _Dumps, version: Version) -> tuple[dict[str, Reading], list[str]]:
    """Each metric of `_READ` the knowledge has, read for the window; notes on the samples not used."""
    readings: dict[str, Reading] = {}
    notes: list[str] = []
    if dumps.latest is None:
        return readings, notes
    for metric_id in _READ:
        metric = metrics.get(metric_id)
        if metric is None:
            continue
        value, present, problems = _window(metric, dumps.before, dumps.after)
        notes += problems
        readings[metric_id] = Reading(
            metric=metric.name,
            id=metric_id,
            available_in_version=metric.status_at(version) in ("available", "deprecated"),
            present=present,
            value=value,
        )
    return readings, notes


@dataclass(frozen=True)
class _Signals:
    """The numbers the causes are judged on, for the window; None where the dumps do not give one."""

    queries: float | None  # prompt tokens looked up in the GPU prefix cache
    gpu_hit_rate: float | None
    external_queries: float | None  # looked up in the offload tier (the KV connector)
    external_hit_rate: float | None
    external_counter_exported: bool  # whether this release exports the external query counter
    usage: float | None  # share of the GPU KV cache in use
    preemptions: float | None
    stored: float | None  # bytes stored into the offload tier
    loaded: float | None  # bytes loaded back from it
    loads_unusable: bool  # the dump has the loaded bytes, but not as a number that can be used
    failures: float | None  # allocation failures of the CPU tier
    stores_skipped: float | None
    in_flight_usage_read: bool  # the dump has vllm:kv_offload_cpu_cache_usage_perc

    def derived(self) -> dict[str, float]:
        """Hit rates and ratios, as the answer reports them."""
        named = {
            "gpu_prefix_hit_rate": self.gpu_hit_rate,
            "external_hit_rate": self.external_hit_rate,
            "gpu_kv_usage": self.usage,
            "preemptions": self.preemptions,
            "offload_store_gib": None if self.stored is None else self.stored / (1 << 30),
            "offload_load_gib": None if self.loaded is None else self.loaded / (1 << 30),
            "offload_allocation_failures": self.failures,
        }
        return {name: value for name, value in named.items() if value is not None}


def _signals(readings: dict[str, Reading], metrics: dict[str, Metric], dumps: _Dumps) -> tuple[_Signals, list[str]]:
    """The window's numbers from the readings, and notes on the samples of the fallback byte counter not used."""

    def get(metric_id: str) -> float | None:
        r = readings.get(metric_id)
        return r.value if r is not None else None

    # In the dump but not usable (a NaN, infinite or huge sample): no rate is built on it, where an
    # absent hits counter still reads as no hits.
    unusable = {i for i, r in readings.items() if r.present and r.value is None}
    # A window without lookups measures nothing, as a dump without the counter: no rate, no cause on it.
    queries = get("metric.prefix_cache_queries") or get("metric.gpu_prefix_cache_queries")
    hits = get("metric.prefix_cache_hits") or get("metric.gpu_prefix_cache_hits")
    gpu_hit_rate = None
    if queries and not unusable & {"metric.prefix_cache_hits", "metric.gpu_prefix_cache_hits"}:
        gpu_hit_rate = (hits or 0) / queries
    ext_q, ext_h = get("metric.external_prefix_cache_queries"), get("metric.external_prefix_cache_hits")
    external_hit_rate = None
    if ext_q and "metric.external_prefix_cache_hits" not in unusable:
        external_hit_rate = (ext_h or 0) / ext_q
    stored, loaded = get("metric.kv_offload_store_bytes"), get("metric.kv_offload_load_bytes")
    loads_unusable = "metric.kv_offload_load_bytes" in unusable
    notes: list[str] = []
    if stored is None and dumps.latest is not None and "metric.kv_offload_total_bytes" in metrics:
        # Releases without the two byte counters count both directions in one, by transfer_type.
        total = metrics["metric.kv_offload_total_bytes"]
        stored, _, problems = _window(total, dumps.before, dumps.after, ("transfer_type", "GPU_to_CPU"))
        notes += problems
        loaded, present, problems = _window(total, dumps.before, dumps.after, ("transfer_type", "CPU_to_GPU"))
        notes += problems
        loads_unusable = present and loaded is None
    external = readings.get("metric.external_prefix_cache_queries")
    in_flight = readings.get("metric.kv_offload_cpu_cache_usage_perc")
    signals = _Signals(
        queries=queries,
        gpu_hit_rate=gpu_hit_rate,
        external_queries=ext_q,
        external_hit_rate=external_hit_rate,
        external_counter_exported=external is not None and external.available_in_version,
        usage=_first_read(get("metric.kv_cache_usage_perc"), get("metric.gpu_cache_usage_perc")),
        preemptions=get("metric.num_preemptions"),
        stored=stored,
        loaded=loaded,
        loads_unusable=loads_unusable,
        failures=get("metric.kv_offload_allocation_failure"),
        stores_skipped=get("metric.kv_offload_stores_skipped"),
        in_flight_usage_read=in_flight is not None and in_flight.present,
    )
    return signals, notes


def _first_read(current: float | None, older: float | None) -> float | None:
    """The value under the current name, else under the older one: a zero (an empty cache) is a reading."""
    return current if current is not None else older


@dataclass(frozen=True)
class _Case:
    """Everything a cause is judged on: what the user said, the dumps' numbers, the deployment's findings."""

    symptoms: frozenset[Symptom]
    description: str  # lower-cased
    signals: _Signals
    findings: dict[str, Finding]  # by rule id
    connectors: list[str]  # the KV connectors the deployment configures
    dumps: _Dumps
    version: Version
    metrics: dict[str, Metric]  # the knowledge's, by id
    knowledge: Knowledge

    @property
    def cache_config(self) -> dict[str, str]:
        """The labels of vllm:cache_config_info: how the engine's KV cache was configured."""
        return _labels(self.dumps.latest, "vllm:cache_config_info") if self.dumps.latest else {}


# -- the causes, in the order they are reported when equally likely ---------------------------------


def _wrong_metric_names(case: _Case) -> tuple[list[Cause], dict[str, Sourced]]:
    """The dump (or the description) uses metric names this release does not export; the entries to cite."""
    causes: list[Cause] = []
    cited: dict[str, Sourced] = {}
    if case.dumps.latest is not None:
        wrong = []
        for family in case.dumps.latest.values():
            for entry in case.knowledge.find(family["name"]):
                if isinstance(entry, Metric) and entry.status_at(case.version) in ("removed", "not_yet"):
                    state = f"removed in {entry.removed}" if entry.removed else f"first in {entry.introduced}"
                    wrong.append(f"{entry.name} is {state}, so vLLM {case.version} does not export it")
                    cited[entry.id] = entry
        if wrong:
            causes.append(
                Cause(
                    id="wrong_metric_names",
                    likelihood="high",
                    title="The dump does not match the vLLM release assumed: version or metric names are off",
                    evidence=wrong[:5],
                    next_check="Check the server's version (GET /version) and give it as version; dashboards "
                    "must query the names of that release (check_version lists them).",
                )
            )
    old_hits, old_queries = (case.metrics.get(f"metric.gpu_prefix_cache_{n}") for n in ("hits", "queries"))
    if (
        "gpu_prefix_cache" in case.description
        and old_hits is not None
        and old_hits.status_at(case.version) == "removed"
    ):
        new_names = " / ".join(m.instead for m in (old_hits, old_queries) if m is not None and m.instead)
        causes.append(
            Cause(
                id="wrong_metric_names",
                likelihood="high",
                title="Queries on vllm:gpu_prefix_cache_* return nothing on this release",
                evidence=["the description mentions gpu_prefix_cache metrics"],
                next_check=f"Query {new_names} instead.",
            )
        )
        cited |= _pitfall(case.knowledge, "pitfall.old-prefix-cache-metric-names")
    return causes, cited


def _prefix_caching_off(case: _Case) -> Cause | None:
    disabled = case.findings.get("pitfall.prefix-caching-disabled")
    configured = case.cache_config.get("enable_prefix_caching")
    if (configured or "").lower() != "false" and disabled is None:
        return None
    evidence = []
    if configured:
        evidence.append('vllm:cache_config_info{enable_prefix_caching="False"}')
    if disabled is not None:
        evidence.append(f"{disabled.location}: --no-enable-prefix-caching")
    return Cause(
        id="prefix_caching_off",
        likelihood="high",
        title="Prefix caching is off, so nothing is ever looked up in the offload tier",
        evidence=evidence,
        next_check="Remove --no-enable-prefix-caching and compare vllm:external_prefix_cache_hits_total.",
    )


def _connector_not_loaded(case: _Case) -> Cause | None:
    """A connector is configured, or offload expected, yet no lookup reached one."""
    s = case.signals
    # The engine exports the external counter whether or not a connector runs (it stays at 0 without
    # one), so only a present zero says "no connector"; an absent series means a partial dump.
    if not (case.dumps.latest is not None and s.external_counter_exported and (s.queries or 0) > 0):
        return None
    if s.external_queries != 0:
        return None
    evidence = [f"vllm:prefix_cache_queries = {s.queries:g} tokens but vllm:external_prefix_cache_queries is 0"]
    if case.connectors:
        evidence.append(f"the deployment configures {', '.join(sorted(set(case.connectors)))}")
    return Cause(
        id="connector_not_loaded",
        likelihood="high" if case.connectors or "offload_does_not_help" in case.symptoms else "medium",
        title="No KV connector is active in the server that produced the dump",
        evidence=evidence,
        next_check="Look for 'Creating v1 connector' / KVConnectorFactory lines in the start-up log and check "
        "the flags the pod really got (kubectl get pod -o yaml); the shorthand needs --kv-offloading-size.",
    )


def _memory_wall(case: _Case) -> Cause | None:
    usage, preemptions = case.signals.usage, case.signals.preemptions
    if (usage is not None and usage >= _THRESHOLDS["kv_usage_full"]) and (preemptions or 0) > 0:
        return Cause(
            id="memory_wall",
            likelihood="high",
            title="GPU KV memory is full and requests are preempted: a capacity wall, which reuse cannot fix",
            evidence=[f"GPU KV usage {usage:.0%}", f"{preemptions:g} preemptions in the window"],
            next_check="An offload tier stores finished prefixes, it does not hold running requests; lower "
            "--max-num-seqs or --max-model-len, or add GPUs (size_offload shows the GPU KV budget).",
        )
    if (preemptions or 0) > 0 or case.symptoms & {"preemptions", "oom"}:
        return Cause(
            id="memory_wall",
            likelihood="medium",
            title="Requests are preempted for lack of GPU KV blocks",
            evidence=[f"{preemptions:g} preemptions" if preemptions else "reported preemptions or OOM"],
            next_check="Watch vllm:kv_cache_usage_perc under load; near 1.0 the GPU cache is the wall.",
        )
    return None


def _cold_cache(case: _Case) -> Cause | None:
    queries = case.signals.queries
    if queries is not None and queries < _THRESHOLDS["cold_queries"]:
        return Cause(
            id="cold_cache",
            likelihood="medium",
            title="Too little traffic measured for the cache to be warm",
            evidence=[f"{queries:g} prompt tokens looked up (under {_THRESHOLDS['cold_queries']:g})"],
            next_check="Take the two dumps minutes apart under representative traffic, after the first "
            "sessions return.",
        )
    if "restart" in case.description or "cold" in case.description:
        return Cause(
            id="cold_cache",
            likelihood="low",
            title="The cache may be cold after a restart (the CPU tier is not persistent)",
            evidence=["the description mentions a restart / cold start"],
            next_check="Compare hit rates in a window that starts well after the restart.",
        )
    return None


def _no_prefix_locality(case: _Case) -> Cause | None:
    gpu_rate, ext_rate = case.signals.gpu_hit_rate, case.signals.external_hit_rate
    low = _THRESHOLDS["low_hit_rate"]
    if not (gpu_rate is not None and gpu_rate < low and (ext_rate is None or ext_rate < low)):
        return None
    return Cause(
        id="no_prefix_locality",
        likelihood="high" if (case.signals.queries or 0) >= _THRESHOLDS["cold_queries"] else "medium",
        title="Requests share few prefixes (or the router spreads sessions), so there is little to reuse",
        evidence=[f"GPU prefix hit rate {gpu_rate:.1%}"]
        + ([f"external hit rate {ext_rate:.1%}"] if ext_rate is not None else []),
        next_check="Check that a session's requests reach the same replica (prefix- or session-aware routing) "
        "and that prompts start with the same system prompt and history, byte for byte.",
    )


def _tier_thrashing(case: _Case) -> Cause | None:
    stored, loaded, ext_rate = case.signals.stored, case.signals.loaded, case.signals.external_hit_rate
    if not (stored and not case.signals.loads_unusable and ext_rate is not None):
        return None
    ratio = stored / loaded if loaded else float("inf")
    if not (ext_rate < _THRESHOLDS["low_hit_rate"] and ratio >= _THRESHOLDS["store_to_load"]):
        return None
    threshold = case.knowledge.by_id.get("spec.store-threshold")
    since = f"on {threshold.introduced}+ " if isinstance(threshold, Setting) and threshold.introduced else ""
    return Cause(
        id="tier_thrashing",
        likelihood="medium",
        title="The tier stores far more than it ever loads back: blocks are evicted before reuse",
        evidence=[
            f"stored {stored / (1 << 30):.3g} GiB, loaded {(loaded or 0) / (1 << 30):.3g} GiB",
            f"external hit rate {ext_rate:.1%}",
        ],
        next_check="Compare the tier size with the working set of returning sessions (size_offload); "
        f"{since}store_threshold: 2 keeps one-off prompts out of the CPU tier.",
    )


def _tier_too_small(case: _Case) -> Cause | None:
    if not case.signals.failures:
        return None
    return Cause(
        id="tier_too_small",
        likelihood="high",
        title="The CPU tier ran out of space to store new blocks",
        evidence=[f"vllm:kv_offload_allocation_failure_total = {case.signals.failures:g} in the window"],
        next_check="Raise --kv-offloading-size (a total across TP ranks) within host RAM, or add a disk tier.",
    )


def _per_rank_sizing(case: _Case) -> Cause | None:
    finding = case.findings.get("pitfall.kv-offloading-size-per-rank")
    if finding is None:
        return None
    return Cause(
        id="per_rank_sizing",
        likelihood="high",
        title="--kv-offloading-size looks like a per-GPU number, leaving the tier TP times too small",
        evidence=[f"{finding.location}: {finding.message}"],
        next_check="Multiply the per-GPU amount by TP x PP; --kv-offloading-size is the total for the engine.",
    )


def _max_model_len_too_high(case: _Case) -> Cause | None:
    finding = case.findings.get("pitfall.max-model-len-far-above-workload")
    if finding is None:
        return None
    return Cause(
        id="max_model_len_too_high",
        likelihood="medium",
        title="--max-model-len far above real requests",
        evidence=[f"{finding.location}: {finding.message}"],
        next_check="Set --max-model-len near the p99 context; see whether preemptions fall.",
    )


def _decode_bound(case: _Case) -> Cause | None:
    gpu_rate = case.signals.gpu_hit_rate
    if (
        case.symptoms & {"tpot_high", "throughput_low"}
        and gpu_rate is not None
        and gpu_rate >= _THRESHOLDS["high_gpu_hit_rate"]
    ):
        return Cause(
            id="decode_bound",
            likelihood="high" if "tpot_high" in case.symptoms else "medium",
            title="Prefill is already mostly cached; the time goes to decoding, which offload does not speed up",
            evidence=[f"GPU prefix hit rate {gpu_rate:.1%}"],
            next_check="Compare vllm:time_to_first_token_seconds with vllm:inter_token_latency_seconds; decode "
            "speed depends on batch size, CUDA graphs (no --enforce-eager) and speculative decoding.",
        )
    if "tpot_high" in case.symptoms and "ttft_high" not in case.symptoms:
        return Cause(
            id="decode_bound",
            likelihood="low",
            title="The complaint is decode speed, which KV offload does not change",
            evidence=["symptom tpot_high without ttft_high"],
            next_check="Check --enforce-eager, batch size and speculative decoding before touching the cache.",
        )
    return None


# After _wrong_metric_names, in this order: equally likely causes are reported in it.
_CHECKS: tuple[Callable[[_Case], Cause | None], ...] = (
    _prefix_caching_off,
    _connector_not_loaded,
    _memory_wall,
    _cold_cache,
    _no_prefix_locality,
    _tier_thrashing,
    _tier_too_small,
    _per_rank_sizing,
    _max_model_len_too_high,
    _decode_bound,
)


def _ranked(causes: list[Cause]) -> list[Cause]:
    """Most likely first; of two causes with one id, the likelier (or, equally likely, the first) is kept."""
    order = {"high": 0, "medium": 1, "low": 2}
    merged: dict[str, Cause] = {}
    for cause in sorted(causes, key=lambda c: order[c.likelihood]):
        merged.setdefault(cause.id, cause)
    return list(merged.values())


def _offload_metric_notes(case: _Case) -> tuple[list[str], dict[str, Sourced]]:
    """What two offload metrics do not mean, when the dump has them; the pitfall to cite."""
    notes: list[str] = []
    cited: dict[str, Sourced] = {}
    if case.signals.in_flight_usage_read:
        notes.append(
            "vllm:kv_offload_cpu_cache_usage_perc is the share of the CPU tier pinned by transfers in flight, "
            "not how full the tier is; judge tier pressure from the external hit rate and allocation failures."
        )
        cited |= _pitfall(case.knowledge, "pitfall.kv-offload-usage-is-in-flight")
    if (case.signals.stores_skipped or 0) > 0:
        notes.append(
            "vllm:kv_offload_stores_skipped counts stores the reuse filter (store_threshold) chose to skip, not "
            "stores dropped for lack of space."
        )
    return notes, cited


def _pitfall(knowledge: Knowledge, pitfall_id: str) -> dict[str, Sourced]:
    entry = knowledge.by_id.get(pitfall_id)
    return {pitfall_id: entry} if entry is not None else {}


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
