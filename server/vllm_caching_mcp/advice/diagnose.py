"""diagnose: why KV offload does not help, or why TTFT is still bad — ranked causes with evidence.

Inputs are the symptoms, optionally the deployment (read with `deployment/` and reviewed with
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

from ..knowledge import Knowledge, Metric, Pitfall, Setting, Sourced, normalize_name
from ..safe_text import join_lines
from ..verification import verification_state
from ..versions import Version, in_range
from .common import AdviceError, Citation, Result, ToolSpec, VersionContext, cite, readable_number, resolve_version
from .deployment import Documents
from .review import Finding, HostFacts, ReviewRequest, ReviewResult, WorkloadReport, review_deployment

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
    "hash_seed_mismatch",
    "host_memory_exhausted",
    "shm_exhausted",
    "refused_at_start",
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
    )
    description: str | None = Field(default=None, max_length=4000)
    deployment: Documents | None = Field(default=None, max_length=50, description="as for review_deployment")
    version: str | None = Field(default=None, max_length=40)
    metrics_before: str | None = Field(default=None, max_length=5_000_000, description="Prometheus /metrics text")
    metrics_after: str | None = Field(
        default=None,
        max_length=5_000_000,
        description="a later dump; counters read as the delta",
    )
    log: str | None = Field(
        default=None,
        max_length=2_000_000,
        description="start-up log or its tail",
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


Likelihood = Literal["high", "medium", "low"]


class Cause(BaseModel):
    id: CauseId
    likelihood: Likelihood = Field(
        description="high only when the evidence shows it and every premise was verified against the wheels"
    )
    title: str
    evidence: list[str]
    next_check: str
    why: str = Field(description="the mechanism in vLLM or LMCache that makes the evidence mean this cause")
    premises: list[str] = Field(
        description="the knowledge entries (facts checked against the wheels) the reason rests on"
    )
    unverified_premises: list[str] = Field(
        default_factory=list,
        description="premises the last verification run did not confirm; such a cause is at most medium",
    )


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
            if c.unverified_premises:
                lines.append(f"     not verified: {', '.join(c.unverified_premises)}")
            lines.append(f"     next: {c.next_check}")
        lines += [f"note: {n}" for n in self.metric_notes]
        lines += [f"warning: {w}" for w in self.version_context.warnings]
        return join_lines(lines)


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
    described = _described_symptoms(request.description or "")
    case = _Case(
        symptoms=frozenset(request.symptoms) | described,
        description=(request.description or "").lower(),
        signals=signals,
        findings={f.rule_id: f for f in review.findings} if review else {},
        connectors=[c for w in (review.workloads if review else []) for c in w.connectors],
        workloads=review.workloads if review else [],
        log=request.log or "",
        dumps=dumps,
        version=version,
        metrics=metrics,
        knowledge=knowledge,
    )
    causes, named = _wrong_metric_names(case)
    refused, refusal_pitfalls = _refused_at_start(case)
    causes += refused
    causes += [cause for check in _CHECKS if (cause := check(case)) is not None]
    causes = [_grounded(cause, knowledge) for cause in causes]
    offload_notes, explained = _offload_metric_notes(case)
    measure_notes, measured = _what_to_measure(case)
    if described - set(request.symptoms):
        measure_notes.insert(0, f"read from the description as: {', '.join(sorted(described - set(request.symptoms)))}")
    cited: dict[str, Sourced] = {metric_id: metrics[metric_id] for metric_id in readings} | named | explained
    cited |= measured | refusal_pitfalls
    return DiagnoseResult(
        version_context=context,
        window=dumps.window,
        readings=list(readings.values()),
        derived=signals.derived(),
        causes=_ranked(causes),
        metric_notes=notes + problems + offload_notes + measure_notes,
        citations=[cite(i, e, knowledge) for i, e in cited.items()] + (review.citations if review else []),
    )


def _check_inputs(request: DiagnoseRequest) -> None:
    given = (request.symptoms, request.description, request.metrics_before, request.metrics_after, request.log)
    if not any(given):
        raise AdviceError("symptoms", "give symptoms, a description, a log or at least one /metrics dump")
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
    """The vLLM release the deployment's files name (its image tag, a pinned pip install), when they name one."""
    if review is None or not review.workloads or review.workloads[0].version_source not in ("image-tag", "pip-install"):
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
    external_hits: float | None  # found there
    external_hit_rate: float | None
    external_counter_exported: bool  # whether this release exports the external query counter
    usage: float | None  # share of the GPU KV cache in use
    preemptions: float | None
    stored: float | None  # bytes stored into the offload tier
    loaded: float | None  # bytes loaded back from it
    loads_unusable: bool  # the dump has the loaded bytes, but not as a number that can be used
    split_byte_counters: bool  # stored and loaded come from their own counters, not the older total by direction
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
    split = stored is not None
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
        external_hits=None if "metric.external_prefix_cache_hits" in unusable else ext_h,
        external_hit_rate=external_hit_rate,
        external_counter_exported=external is not None and external.available_in_version,
        usage=_first_read(get("metric.kv_cache_usage_perc"), get("metric.gpu_cache_usage_perc")),
        preemptions=get("metric.num_preemptions"),
        stored=stored,
        loaded=loaded,
        loads_unusable=loads_unusable,
        split_byte_counters=split,
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
    workloads: list[WorkloadReport]  # the deployment's, as the review read them
    log: str  # the server's log, as given
    dumps: _Dumps
    version: Version
    metrics: dict[str, Metric]  # the knowledge's, by id
    knowledge: Knowledge

    def name(self, metric_id: str) -> str:
        """The metric's name as this release's /metrics writes it, from the knowledge."""
        return self.metrics[metric_id].name

    def logged(self, pattern: str) -> str | None:
        """The first log line matching ``pattern`` (a regular expression, case-insensitive), clipped."""
        found = re.search(rf"^.*(?:{pattern}).*$", self.log, re.IGNORECASE | re.MULTILINE)
        return _clip(found.group(0).strip(), 200) if found else None

    @property
    def cache_config(self) -> dict[str, str]:
        """The labels of vllm:cache_config_info: how the engine's KV cache was configured."""
        return _labels(self.dumps.latest, self.name("metric.cache_config_info")) if self.dumps.latest else {}


# -- the causes, in the order they are reported when equally likely ---------------------------------


def _wrong_metric_names(case: _Case) -> tuple[list[Cause], dict[str, Sourced]]:
    """The dump (or the description) uses metric names this release does not export; the entries to cite."""
    causes: list[Cause] = []
    cited: dict[str, Sourced] = {}
    why = "vLLM exports the metric families its release registers; a name removed or not yet added is never written."
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
                    why=why,
                    premises=sorted(cited),
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
                title=f"Queries on {old_hits.name.removesuffix('hits_total')}* return nothing on this release",
                evidence=["the description mentions gpu_prefix_cache metrics"],
                next_check=f"Query {new_names} instead.",
                why=why,
                premises=[m.id for m in (old_hits, old_queries) if m is not None],
            )
        )
        cited |= _pitfall(case.knowledge, "pitfall.old-prefix-cache-metric-names")
    return causes, cited


# What SimpleCPUOffloadConnector logs when it turns itself off (simple_cpu_offload_connector.py in 0.33.0).
_SIMPLE_OFFLOAD_OFF = r"Detected prefix caching disabled, disabling CPU offload"


def _prefix_caching_off(case: _Case) -> Cause | None:
    """Prefix caching off, stated only as far as the figures bear it out.

    The engine hashes request blocks when prefix caching is on or a KV connector is configured, so
    with a connector the offload tier is still asked; only SimpleCPUOffloadConnector turns itself
    off. A dump with external hits shows a connector that works, whatever the flag says."""
    s = case.signals
    disabled = case.findings.get("pitfall.prefix-caching-disabled")
    logged = case.logged(_SIMPLE_OFFLOAD_OFF)
    if (disabled is not None or logged) and not s.external_hits:
        evidence = (
            [f"{disabled.location}: --no-enable-prefix-caching with SimpleCPUOffloadConnector"] if disabled else []
        )
        evidence += [f"log: {logged}"] if logged else []
        if s.external_queries is not None:
            evidence.append(f"{case.name('metric.external_prefix_cache_hits')} = 0 in the window")
        return Cause(
            id="prefix_caching_off",
            likelihood="high",
            title="SimpleCPUOffloadConnector turns itself off without prefix caching: nothing is offloaded",
            evidence=evidence,
            next_check="Remove --no-enable-prefix-caching (or use OffloadingConnector, which works with it off) "
            f"and compare {case.name('metric.external_prefix_cache_hits')}.",
            why="SimpleCPUOffloadConnector builds neither its scheduler nor its worker side when prefix caching "
            "is off, though the engine still hashes blocks for connectors.",
            premises=disabled.premises
            if disabled
            else ["feature.simple-offload-needs-prefix-caching", "connector.simple-cpu-offload"],
        )
    if (case.cache_config.get("enable_prefix_caching") or "").lower() != "false":
        return None
    flag = f'{case.name("metric.cache_config_info")}{{enable_prefix_caching="False"}}'
    premises = ["metric.cache_config_info", "flag.enable-prefix-caching", "feature.block-hashes-with-kv-connector"]
    if s.external_queries:
        evidence = [flag, f"{case.name('metric.external_prefix_cache_queries')} = {s.external_queries:g} tokens"]
        if s.external_hit_rate is not None:
            evidence.append(f"external hit rate {s.external_hit_rate:.1%}")
        return Cause(
            id="prefix_caching_off",
            likelihood="medium",
            title="GPU prefix caching is off: shared prefixes are not kept on the GPU, so each reuse is loaded "
            "from the offload tier",
            evidence=evidence,
            next_check="Turn prefix caching back on (drop --no-enable-prefix-caching) unless the connector asks "
            "for it off (LMCache's MP mode does); the tier keeps serving hits either way.",
            why="With a KV connector the engine hashes request blocks even with prefix caching off, so the tier "
            "is asked and can hit; only the GPU-side reuse is lost.",
            premises=premises,
        )
    return Cause(
        id="prefix_caching_off",
        likelihood="high" if not case.connectors else "medium",
        title="Prefix caching is off and no KV connector is asked: shared prefixes are prefilled every time",
        evidence=[flag],
        next_check=f"Drop --no-enable-prefix-caching and compare {case.name('metric.prefix_cache_hits')}.",
        why="Without a KV connector, prefix caching off stops the engine from hashing request blocks at all, so "
        "nothing is reused.",
        premises=premises,
    )


# The line KVConnectorFactory logs for every connector it creates (factory.py, 0.11.0 to 0.33.0).
_CONNECTOR_CREATED = r"Creating v1 connector with name: (\w+)"


def _connector_not_loaded(case: _Case) -> Cause | None:
    """A connector is configured, or offload expected, yet the dump or the log shows none running."""
    s = case.signals
    created = set(re.findall(_CONNECTOR_CREATED, case.log))
    external = case.name("metric.external_prefix_cache_queries")
    evidence: list[str] = []
    premises = ["metric.external_prefix_cache_queries"]
    # The engine exports the external counter whether or not a connector runs (it stays at 0 without
    # one), so only a present zero says "no connector"; an absent series means a partial dump.
    if s.external_queries:
        return None  # the tier was asked: a connector runs
    if (
        case.dumps.latest is not None
        and s.external_counter_exported
        and (s.queries or 0) > 0
        and s.external_queries == 0
    ):
        evidence.append(f"{case.name('metric.prefix_cache_queries')} = {s.queries:g} tokens but {external} is 0")
    missing_metrics = _offload_metrics_missing(case)
    if missing_metrics:
        evidence.append(missing_metrics)
        premises += ["connector.offloading", "metric.kv_offload_total_bytes"]
    configured = sorted(set(case.connectors))
    if case.log and configured and not created:
        evidence.append("the log has no 'Creating v1 connector with name: ...' line (KVConnectorFactory)")
        premises.append("connector.offloading" if "OffloadingConnector" in configured else premises[0])
    if not evidence:
        return None
    if configured:
        evidence.append(f"the deployment configures {', '.join(configured)}")
    strong = len(evidence) > 1 or bool(configured) or "offload_does_not_help" in case.symptoms
    return Cause(
        id="connector_not_loaded",
        likelihood="high" if strong else "medium",
        title="No KV connector is active in the server that produced the dump",
        evidence=evidence,
        next_check="Look for 'Creating v1 connector with name:' in the start-up log and check the flags the pod "
        "really got (kubectl get pod -o yaml); the shorthand needs --kv-offloading-size.",
        why="KVConnectorFactory logs every connector it creates, and a running connector is asked for every "
        f"prompt the engine looks up, which {external} counts.",
        premises=list(dict.fromkeys(premises)),
    )


def _offload_metrics_missing(case: _Case) -> str | None:
    """OffloadingConnector configured on a release whose connector registers its metrics at start-up, yet
    the dump (which has the engine's own counters) holds none of them."""
    latest = case.dumps.latest
    total = case.metrics.get("metric.kv_offload_total_bytes")
    if latest is None or total is None or "OffloadingConnector" not in case.connectors:
        return None
    if total.status_at(case.version) not in ("available", "deprecated") or not case.signals.external_counter_exported:
        return None
    if normalize_name(case.name("metric.prefix_cache_queries")) not in latest:
        return None  # not a whole dump: nothing can be said about what is absent
    offload_metrics = {normalize_name(m.name) for i, m in case.metrics.items() if i.startswith("metric.kv_offload_")}
    if offload_metrics & set(latest):
        return None
    return (
        f"the dump has none of the OffloadingConnector's metrics ({total.name} and the like), which it registers "
        "when it loads"
    )


def _hash_seed_mismatch(case: _Case) -> Cause | None:
    """Instances sharing a cache whose token hashes are seeded differently never find each other's blocks."""
    s = case.signals
    finding = case.findings.get("pitfall.lmcache-sharing-without-hash-seed") or case.findings.get(
        "pitfall.shared-tier-without-hash-seed"
    )
    logged = case.logged(r"PYTHONHASHSEED not set")
    said = re.search(r"pythonhashseed|hash ?seed", case.description)
    if finding is None and not logged and not said:
        return None
    lookups_without_hits = (
        s.external_queries is not None and s.external_queries > 0 and s.external_hit_rate is not None
    ) and s.external_hit_rate < _THRESHOLDS["low_hit_rate"]
    if s.external_hit_rate is not None and not lookups_without_hits:
        return None  # the shared tier does hit: the seed is not what stands in the way
    evidence = [f"{finding.location}: {finding.message}"] if finding else []
    evidence += [f"log: {logged}"] if logged else []
    evidence += ["the description mentions the hash seed"] if said and not (finding or logged) else []
    if lookups_without_hits:
        evidence.append(
            f"{case.name('metric.external_prefix_cache_queries')} = {s.external_queries:g} tokens looked up, "
            f"external hit rate {s.external_hit_rate:.1%}"
        )
    return Cause(
        id="hash_seed_mismatch",
        likelihood="high" if lookups_without_hits and (finding or logged) else "medium",
        title="Instances sharing a cache hash tokens with different seeds: lookups, but no hits across them",
        evidence=evidence,
        next_check="Set PYTHONHASHSEED to one value (e.g. 0) on every instance that shares the LMCache remote, "
        "P/D pair or fs/p2p tier, restart them all, and compare the external hit rate.",
        why="Block and chunk keys are hashes seeded from PYTHONHASHSEED where no fixed seed applies; LMCache "
        "warns at start-up when it is unset with a remote cache or P/D.",
        premises=finding.premises if finding else ["env.pythonhashseed", "feature.lmcache-hash-seed-warning"],
    )


# What the kernel and vLLM write when host memory runs out: the cgroup OOM killer, the pod status,
# a failed allocation, and vLLM's own pre-flight warning before a shared region (0.33.0).
_HOST_OOM = (
    r"oom[ -]?kill|exit code:? ?137|killed process|out of memory: kill|cannot allocate memory|"
    r"memory cgroup out of memory|current headroom is below the requested allocation"
)


# The review's rules on pinned host memory against the host and the pod's memory limit.
_HOST_MEMORY_RULES = ("pitfall.offload-exceeds-host-ram", "pitfall.pinned-memory-over-pod-limit")


def _host_memory_exhausted(case: _Case) -> Cause | None:
    """The CPU tier (pinned host memory) does not fit the container or the host: the pod is OOM-killed."""
    evidence: list[str] = []
    premises: list[str] = []
    for finding in case.findings.values():
        if finding.rule_id in _HOST_MEMORY_RULES:
            evidence.append(f"{finding.location}: {finding.message}")
            premises += finding.premises
    for workload in case.workloads:
        pinned, limit = workload.facts.get("host_offload_gib"), workload.facts.get("container_memory_limit_gib")
        if pinned is not None and limit is not None and pinned >= limit and not premises:
            evidence.append(f"{workload.name}: {pinned:g} GiB pinned for the tier, memory limit {limit:g} GiB")
            premises += ["flag.kv-offloading-size", "spec.cpu-bytes-to-use", "lmcache.max_local_cpu_size"]
    told = re.search(_HOST_OOM, case.description, re.IGNORECASE)
    logged = case.logged(_HOST_OOM)
    evidence += [f"the description says '{_clip(told.group(0), 60)}'"] if told else []
    evidence += [f"log: {logged}"] if logged else []
    if not evidence:
        return None
    return Cause(
        id="host_memory_exhausted",
        likelihood="high" if premises and (told or logged or "oom" in case.symptoms) else "medium",
        title="Host memory runs out: the pinned CPU tier does not fit the container, which is OOM-killed",
        evidence=evidence,
        next_check="Compare the tier (--kv-offloading-size, or LMCache's local CPU size × workers) plus ~16 GiB "
        "for the process with the pod's memory limit (kubectl describe pod: Last State OOMKilled, exit 137); "
        "shrink the tier or raise the limit.",
        why="The CPU tier is pinned host memory allocated at start-up; pinned pages cannot be swapped, so a "
        "tier near the container's limit gets the process killed by the cgroup OOM killer.",
        premises=list(dict.fromkeys(premises or ["flag.kv-offloading-size", "spec.cpu-bytes-to-use"])),
    )


# vLLM's own error when /dev/shm cannot hold a shared region (check_shm_free_space, 0.28.0 on),
# and what a full /dev/shm looks like before that check: 0.27.x pre-faults the region with
# madvise(MADV_POPULATE_WRITE), which fails with EFAULT (reproduced: scripts/reproductions/shm_prefault.py);
# a write past the tmpfs elsewhere is ENOSPC or SIGBUS.
_SHM_CHECK = r"Insufficient space in /dev/shm"
_SHM_FULL = r"no space left on device|sigbus|bus error|\[errno 14\] bad address|oserror\(14, 'bad address'\)"


# The review's rules on /dev/shm against the CPU tier and the workers' queues.
_SHM_RULES = (
    "pitfall.offload-tier-over-shm",
    "pitfall.offload-tier-over-shm-unchecked",
    "pitfall.shm-too-small-for-workers",
)


def _refused_at_start(case: _Case) -> tuple[list[Cause], dict[str, Sourced]]:
    """The start-up refusals the log shows that a pitfall names (its `logged` patterns, held to what the engine
    printed by tests/test_engine_rules.py): one cause per log line, from the pitfall whose pattern says most."""
    best: dict[str, tuple[int, Pitfall]] = {}
    for pitfall in case.knowledge.pitfalls:
        if not pitfall.logged or (pitfall.versions and not in_range(pitfall.versions, case.version)):
            continue
        for pattern in pitfall.logged:
            line = case.logged(pattern)
            if line is not None and len(pattern) > best.get(line, (0, pitfall))[0]:
                best[line] = (len(pattern), pitfall)
    causes = [
        Cause(
            id="refused_at_start",
            likelihood="high",
            title=f"vLLM stops at start-up: {pitfall.title} ({pitfall.id})",
            evidence=[f"log: {line}"],
            next_check=pitfall.fix,
            why=pitfall.why,
            premises=list(pitfall.premises) or [pitfall.id],
        )
        for line, (_, pitfall) in best.items()
    ]
    return causes, {pitfall.id: pitfall for _, pitfall in best.values()}


def _shm_exhausted(case: _Case) -> Cause | None:
    """/dev/shm too small for what vLLM puts there: the native CPU tier's region, TP workers' queues."""
    evidence = [f"{f.location}: {f.message}" for f in case.findings.values() if f.rule_id in _SHM_RULES]
    premises = [p for f in case.findings.values() if f.rule_id in _SHM_RULES for p in f.premises]
    checked = case.logged(_SHM_CHECK) or case.logged(r"insufficient space in /dev/shm")
    text = case.description + "\n" + case.log.lower()
    full = re.search(_SHM_FULL, text, re.IGNORECASE)
    shm_named = "/dev/shm" in text or "shm" in text
    if checked:
        evidence.append(f"log: {checked}")
    elif full and shm_named:
        evidence.append(f"'{full.group(0)}' with /dev/shm named")
    if not evidence:
        return None
    return Cause(
        id="shm_exhausted",
        likelihood="high" if checked or premises else "medium",
        title="/dev/shm is too small for what vLLM keeps there (the native CPU tier, TP workers' queues)",
        evidence=evidence,
        next_check="Give the container /dev/shm above the tier: a memory-medium emptyDir on /dev/shm with a "
        "sizeLimit in Kubernetes (64 MiB by default), --shm-size or --ipc=host with docker run.",
        why="The native CPU tier is a shared-memory file in /dev/shm on the releases that map it there, and "
        "vLLM checks the free space at start-up before creating it.",
        premises=list(dict.fromkeys(premises or ["connector.offloading", "flag.kv-offloading-size"])),
    )


def _memory_wall(case: _Case) -> Cause | None:
    usage, preemptions = case.signals.usage, case.signals.preemptions
    premises = ["metric.kv_cache_usage_perc", "metric.num_preemptions"]
    why = "A request is preempted when the GPU has no free KV block for it; an offload tier keeps finished "
    why += "prefixes, not the KV of running requests, so it does not make room."
    if (usage is not None and usage >= _THRESHOLDS["kv_usage_full"]) and (preemptions or 0) > 0:
        return Cause(
            id="memory_wall",
            likelihood="high",
            title="GPU KV memory is full and requests are preempted: a capacity wall, which reuse cannot fix",
            evidence=[f"GPU KV usage {usage:.0%}", f"{preemptions:g} preemptions in the window"],
            next_check="An offload tier stores finished prefixes, it does not hold running requests; lower "
            "--max-num-seqs or --max-model-len, or add GPUs (size_offload shows the GPU KV budget).",
            why=why,
            premises=premises,
        )
    host_oom = re.search(_HOST_OOM, case.description, re.IGNORECASE) or case.logged(_HOST_OOM)
    if (preemptions or 0) > 0 or "preemptions" in case.symptoms or ("oom" in case.symptoms and not host_oom):
        return Cause(
            id="memory_wall",
            likelihood="medium",
            title="Requests are preempted for lack of GPU KV blocks",
            evidence=[f"{preemptions:g} preemptions" if preemptions else "reported preemptions or OOM"],
            next_check=f"Watch {case.name('metric.kv_cache_usage_perc')} under load; near 1.0 the GPU cache is "
            "the wall.",
            why=why,
            premises=premises,
        )
    return None


def _cold_cache(case: _Case) -> Cause | None:
    queries = case.signals.queries
    why = "A hit rate over few lookups says little, and the CPU tier is process memory: a restart empties it."
    if queries is not None and queries < _THRESHOLDS["cold_queries"]:
        return Cause(
            id="cold_cache",
            likelihood="medium",
            title="Too little traffic measured for the cache to be warm",
            evidence=[f"{queries:g} prompt tokens looked up (under {_THRESHOLDS['cold_queries']:g})"],
            next_check="Take the two dumps minutes apart under representative traffic, after the first "
            "sessions return.",
            why=why,
            premises=["metric.prefix_cache_queries"],
        )
    if "restart" in case.description or "cold" in case.description:
        return Cause(
            id="cold_cache",
            likelihood="low",
            title="The cache may be cold after a restart (the CPU tier is not persistent)",
            evidence=["the description mentions a restart / cold start"],
            next_check="Compare hit rates in a window that starts well after the restart.",
            why=why,
            premises=["metric.prefix_cache_queries"],
        )
    return None


def _no_prefix_locality(case: _Case) -> Cause | None:
    gpu_rate, ext_rate = case.signals.gpu_hit_rate, case.signals.external_hit_rate
    low = _THRESHOLDS["low_hit_rate"]
    if not (gpu_rate is not None and gpu_rate < low and (ext_rate is None or ext_rate < low)):
        return None
    if (case.cache_config.get("enable_prefix_caching") or "").lower() == "false":
        return None  # no GPU hits because nothing is kept: prefix_caching_off says so
    return Cause(
        id="no_prefix_locality",
        likelihood="high" if (case.signals.queries or 0) >= _THRESHOLDS["cold_queries"] else "medium",
        title="Requests share few prefixes (or the router spreads sessions), so there is little to reuse",
        evidence=[f"GPU prefix hit rate {gpu_rate:.1%}"]
        + ([f"external hit rate {ext_rate:.1%}"] if ext_rate is not None else []),
        next_check="Check that a session's requests reach the same replica (prefix- or session-aware routing) "
        "and that prompts start with the same system prompt and history, byte for byte.",
        why="Both caches are keyed by the hash of whole blocks of prompt tokens from the start: only a prompt "
        "that begins with the same tokens as an earlier one can hit.",
        premises=["metric.prefix_cache_hits", "metric.prefix_cache_queries", "metric.external_prefix_cache_hits"],
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
    counters = (
        ["metric.kv_offload_store_bytes", "metric.kv_offload_load_bytes"]
        if case.signals.split_byte_counters
        else ["metric.kv_offload_total_bytes"]
    )
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
        why="Every block the GPU finishes is copied to the tier, and it is loaded back only when a later prompt "
        "matches it; a tier evicting blocks before they return stores without loading.",
        premises=[*counters, "spec.store-threshold"],
    )


def _tier_too_small(case: _Case) -> Cause | None:
    if not case.signals.failures:
        return None
    return Cause(
        id="tier_too_small",
        likelihood="high",
        title="The CPU tier ran out of space to store new blocks",
        evidence=[f"{case.name('metric.kv_offload_allocation_failure')} = {case.signals.failures:g} in the window"],
        next_check="Raise --kv-offloading-size (a total across TP ranks) within host RAM, or add a disk tier.",
        why="The counter rises each time the tier finds no room for a block to store.",
        premises=["metric.kv_offload_allocation_failure", "flag.kv-offloading-size"],
    )


def _from_finding(
    case: _Case, rule_id: str, cause_id: CauseId, likelihood: Likelihood, title: str, next_check: str
) -> Cause | None:
    """A cause the deployment review found outright: its finding is the evidence, its reason the why."""
    finding = case.findings.get(rule_id)
    if finding is None:
        return None
    return Cause(
        id=cause_id,
        likelihood=likelihood,
        title=title,
        evidence=[f"{finding.location}: {finding.message}"],
        next_check=next_check,
        why=finding.why,
        premises=finding.premises,
    )


def _per_rank_sizing(case: _Case) -> Cause | None:
    return _from_finding(
        case,
        "pitfall.kv-offloading-size-per-rank",
        "per_rank_sizing",
        "high",
        "--kv-offloading-size looks like a per-GPU number, leaving the tier TP times too small",
        "Multiply the per-GPU amount by TP x PP; --kv-offloading-size is the total for the engine.",
    )


def _max_model_len_too_high(case: _Case) -> Cause | None:
    return _from_finding(
        case,
        "pitfall.max-model-len-far-above-workload",
        "max_model_len_too_high",
        "medium",
        "--max-model-len far above real requests",
        "Set --max-model-len near the p99 context; see whether preemptions fall.",
    )


def _decode_bound(case: _Case) -> Cause | None:
    gpu_rate = case.signals.gpu_hit_rate
    ttft, itl = case.name("metric.time_to_first_token_seconds"), case.name("metric.inter_token_latency_seconds")
    why = "Prefix and offload hits skip prefill, which is the time to first token; the time between tokens is "
    why += "decoding, which reads the KV already on the GPU."
    premises = ["metric.time_to_first_token_seconds", "metric.inter_token_latency_seconds"]
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
            next_check=f"Compare {ttft} with {itl}; decode speed depends on batch size, CUDA graphs (no "
            "--enforce-eager) and speculative decoding.",
            why=why,
            premises=[*premises, "metric.prefix_cache_hits"],
        )
    if "tpot_high" in case.symptoms and "ttft_high" not in case.symptoms:
        return Cause(
            id="decode_bound",
            likelihood="low",
            title="The complaint is decode speed, which KV offload does not change",
            evidence=["symptom tpot_high without ttft_high"],
            next_check=f"Check {itl}, --enforce-eager, batch size and speculative decoding before touching the cache.",
            why=why,
            premises=premises,
        )
    return None


# After _wrong_metric_names, in this order: equally likely causes are reported in it.
_CHECKS: tuple[Callable[[_Case], Cause | None], ...] = (
    _prefix_caching_off,
    _connector_not_loaded,
    _hash_seed_mismatch,
    _shm_exhausted,
    _host_memory_exhausted,
    _memory_wall,
    _cold_cache,
    _no_prefix_locality,
    _tier_thrashing,
    _tier_too_small,
    _per_rank_sizing,
    _max_model_len_too_high,
    _decode_bound,
)


def _grounded(cause: Cause, knowledge: Knowledge) -> Cause:
    """The cause as certain as its premises: one that rests on a fact the wheels did not confirm is at most medium."""
    unverified = [p for p in cause.premises if verification_state(p, knowledge.directory).status != "verified"]
    if not unverified:
        return cause
    likelihood: Likelihood = "medium" if cause.likelihood == "high" else cause.likelihood
    return cause.model_copy(update={"likelihood": likelihood, "unverified_premises": unverified})


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
            f"{case.name('metric.kv_offload_cpu_cache_usage_perc')} is the share of the CPU tier pinned by "
            "transfers in flight, not how full the tier is; judge tier pressure from the external hit rate and "
            "allocation failures."
        )
        cited |= _pitfall(case.knowledge, "pitfall.kv-offload-usage-is-in-flight")
    if (case.signals.stores_skipped or 0) > 0:
        notes.append(
            f"{case.name('metric.kv_offload_stores_skipped')} counts stores the reuse filter (store_threshold) "
            "chose to skip, not stores dropped for lack of space."
        )
    return notes, cited


# Symptoms as operators describe them; each pattern is matched on the lower-cased description.
_DESCRIBED: tuple[tuple[Symptom, str], ...] = (
    (
        "offload_does_not_help",
        r"offload\w*\b.{0,80}\b(barely|no (real )?(gain|improvement|difference)|"
        r"(doesn'?t|does not|didn'?t|did not|not) (help|improve|change|move))|"
        r"(barely|hardly) (moved|changed|improved)",
    ),
    ("low_hit_rate", r"hit ?(rate|ratio)|cache hits?\b"),
    ("ttft_high", r"\bttft\b|time to first token"),
    ("tpot_high", r"\btpot\b|\bitl\b|inter-token|time per output token"),
    ("preemptions", r"preempt"),
    ("oom", r"\boom\b|out of memory|oom-?kill"),
    ("throughput_low", r"throughput"),
)


def _described_symptoms(description: str) -> frozenset[Symptom]:
    """The symptoms a free-text description names, so that a question asked in words is judged as one asked
    with symptoms."""
    text = description.lower()
    return frozenset(symptom for symptom, pattern in _DESCRIBED if re.search(pattern, text))


def _what_to_measure(case: _Case) -> tuple[list[str], dict[str, Sourced]]:
    """With no /metrics dump and a question about the offload tier's benefit: which series show it in this
    release. The logged "Prefix cache hit rate" and vllm:prefix_cache_* count the GPU prefix cache alone."""
    if case.dumps.latest is not None or not case.symptoms & {"offload_does_not_help", "low_hit_rate"}:
        return [], {}
    gpu, external = case.metrics["metric.prefix_cache_hits"], case.metrics["metric.external_prefix_cache_hits"]
    queries = case.metrics["metric.external_prefix_cache_queries"]
    if external.status_at(case.version) not in ("available", "deprecated"):
        note = (
            f'vLLM {case.version} counts only the GPU prefix cache ({gpu.name}, the logged "Prefix cache hit '
            f'rate"); what a KV connector supplies has no series of its own before {external.introduced}.'
        )
    else:
        note = (
            f'The logged "Prefix cache hit rate" and {gpu.name} count the GPU prefix cache only; tokens the '
            f"offload tier or another KV connector supplies are {external.name} out of {queries.name} (logged as "
            '"External prefix cache hit rate" once a connector has counted any). Compare the two over a window '
            "under load (two /metrics dumps)."
        )
    return [note], {m.id: m for m in (gpu, external, queries)}


def _pitfall(knowledge: Knowledge, pitfall_id: str) -> dict[str, Sourced]:
    entry = knowledge.by_id.get(pitfall_id)
    return {pitfall_id: entry} if entry is not None else {}


SPEC = ToolSpec(
    name="diagnose",
    title="Diagnose why KV offload does not help",
    description=(
        "For 'offload doesn't help' or 'TTFT is still bad': ranks causes from symptoms, the deployment, /metrics "
        "dumps and a start-up log, with evidence and the next check."
    ),
    request=DiagnoseRequest,
    result=DiagnoseResult,
    run=diagnose,
)
