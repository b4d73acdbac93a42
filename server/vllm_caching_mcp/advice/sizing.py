"""size_offload: KV-cache sizing for every tier, with the arithmetic vLLM uses to allocate it.

From a model's attention layout (knowledge entry, local config.json or typed-in fields), the
parallel layout and the GPU, this computes what vLLM would allocate per rank and what the
offload tiers should be set to:

1. KV bytes per token per layer kind, per rank and in total (``page_size_bytes`` of the
   FullAttention / SlidingWindow / ChunkedLocal / MLA / Mamba specs in
   ``vllm/v1/kv_cache_interface.py``).
2. The GPU pool: the budget becomes ``num_gpu_blocks = budget // (page × group_size)`` and a
   session costs the sum over KV cache groups of its blocks (``kv_cache_planning.py``,
   ``get_max_concurrency_for_kv_cache_config``), so live sessions follow.
3. The CPU tier as each backend wants it (``--kv-offloading-size`` total GiB,
   ``cpu_bytes_to_use`` total bytes, ``LMCACHE_MAX_LOCAL_CPU_SIZE`` GiB per process), the
   chunks the native spec makes of it and the warm sessions that fit.
4. Load time per tier next to re-prefill; SGLang HiCache equivalents; a benchmark that
   exercises the tier.

Each step is a function of typed inputs; what the answer rests on (citations, the formula
trail, warnings) is collected by a `_Trail` passed along. Every formula names the rule of the
engine's arithmetic it follows (``knowledge/engine.yaml``), whose sources the answer carries.

Version-dependent facts (when cpu_bytes_to_use replaced num_cpu_blocks, when the lmcache
shorthand stopped passing the size, when MLA got a replicated CPU layout, the connector each
backend selects and its HMA support, the default gpu_memory_utilization, the in-flight tokens
a sliding window holds, the null block, the attention backend's block, Mamba align mode) are
read from knowledge entries by id; the code holds only formulas. Estimates (activation reserve,
MFU, link and drive rates) are inputs with stated defaults.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, PrivateAttr

from ..knowledge import (
    Connector,
    EngineRule,
    Gated,
    Gpu,
    Knowledge,
    Mamba2State,
    ModelArch,
    Nvme,
    Pitfall,
    Setting,
    ShortConvState,
    Sourced,
    model_key,
    ranged_at,
)
from ..versions import Version, in_range
from .common import (
    AdviceError,
    Citation,
    Count,
    FiniteFloat,
    GpuMemoryGiB,
    ParamsB,
    Result,
    SizeGiB,
    TokenCount,
    ToolSpec,
    VersionContext,
    cite,
    resolve_version,
)
from .engine_registry import registry_verdict
from .hub_model import RepoNotFound, architecture_from_hub, is_repo_id
from .model_config import WEIGHT_BYTES, Architecture, from_knowledge, read_hf_config, sparse_attention_refusal

GIB = 1 << 30
KVCacheDType = Literal["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"]
OffloadBackend = Literal["native", "lmcache"]
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
# FlashAttention's kernel block alignment (MultipleOf(16)); MLA hybrids align to 128 (engine.hybrid-block-size).
# vLLM's block when neither --block-size nor the attention backend sets another (CacheConfig.DEFAULT_BLOCK_SIZE:
# 16, 64 from 0.34.0) is engine.attention-backend-block's value for the release (_default_block_size).
_KERNEL_BLOCK_ALIGNMENT = 16
_MLA_KERNEL_BLOCK_ALIGNMENT = 128
# Pinned host memory cannot be swapped: keep at least this much of the node for everything else.
DEFAULT_HOST_RESERVE_GIB = 32.0
DEFAULT_HOST_RESERVE_FRACTION = 0.2


class SizeOffloadRequest(BaseModel):
    model: str | None = Field(
        default=None,
        max_length=200,
        description="id, name, alias or HF repo (list: `vllm-caching models`)",
    )
    config_path: str | None = Field(default=None, max_length=4096, description="local config.json or its directory")
    architecture: Architecture | None = Field(default=None)
    version: str | None = Field(default=None, max_length=40)
    kv_cache_dtype: KVCacheDType = Field(default="auto", description="auto = model dtype")
    tensor_parallel_size: int = Field(default=1, ge=1, le=1024)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=1024)
    data_parallel_size: int = Field(default=1, ge=1, le=4096)
    gpu_count: Count | None = Field(default=None, ge=1, description="checked against TP × PP × DP")
    gpus_per_node: int = Field(default=8, ge=1, le=72)
    gpu: str = Field(default="gpu.h100-sxm", max_length=100, description="id or name (list: `vllm-caching gpus`)")
    gpu_memory_gib: GpuMemoryGiB | None = Field(
        default=None, gt=0, description="GiB per GPU as the driver reports; omitted: the vendor's GB"
    )
    gpu_memory_utilization: FiniteFloat | None = Field(
        default=None, gt=0, le=1, description="omitted: the release's default"
    )
    weights_gib_per_gpu: GpuMemoryGiB | None = Field(default=None, ge=0, description="measured")
    params_total_b: ParamsB | None = Field(default=None, description="billions; overrides the model's")
    activation_reserve_gib: GpuMemoryGiB = Field(
        default=4.0,
        ge=0,
        description=(
            "ESTIMATE per GPU besides weights (activations, CUDA graphs, NCCL); read it from vLLM's startup log"
        ),
    )
    max_model_len: TokenCount | None = Field(default=None, ge=1, description="omitted: max_position_embeddings")
    max_num_batched_tokens: TokenCount | None = Field(
        default=None,
        ge=1,
        description="bounds sliding-window and chunked-local holdings; omitted: vllm serve's default for the GPU",
    )
    block_size: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="tokens; omitted: what vLLM picks for the GPU, attention and KV dtype",
    )
    hybrid_kv_cache_manager: bool | None = Field(
        default=None, description="omitted: on unless the connector lacks HMA support"
    )
    enable_prefix_caching: bool | None = Field(
        default=None,
        description="omitted: the release's default; sets a hybrid model's mamba_cache_mode",
    )
    typical_context_tokens: TokenCount = Field(default=8192, ge=1)
    live_sessions: Count | None = Field(default=None, ge=0, description="concurrent")
    warm_sessions: Count | None = Field(default=None, ge=0, description="idle sessions the CPU tier keeps")
    prefix_reuse: FiniteFloat = Field(default=1.0, ge=0, le=1, description="share of a returning context in cache")
    offload_backend: OffloadBackend = "native"
    offload_block_size: TokenCount | None = Field(default=None, ge=1, description="tokens per offloaded chunk")
    kv_offloading_size_gib: SizeGiB | None = Field(
        default=None, gt=0, description="planned --kv-offloading-size, GiB total across TP ranks"
    )
    lmcache_max_local_cpu_size_gib: SizeGiB | None = Field(default=None, gt=0, description="GiB per process")
    host_ram_gib: SizeGiB | None = Field(default=None, gt=0, description="per node")
    host_ram_reserved_gib: SizeGiB | None = Field(
        default=None,
        ge=0,
        description="per node for OS, vLLM and page cache; omitted: max(32, 20 % of RAM)",
    )
    nvme_drives_per_node: int = Field(default=1, ge=1, le=64)
    gds: bool = Field(default=False, description="GPUDirect Storage")
    remote_gb_s: FiniteFloat = Field(default=25.0, ge=0.001, le=100_000, description="remote tier, GB/s")
    prefill_tokens_per_s: FiniteFloat | None = Field(default=None, ge=1, le=1e9, description="measured, per engine")
    mfu: FiniteFloat = Field(default=0.4, ge=0.01, le=1, description="ESTIMATE during prefill")
    sglang_hicache_size_gb: FiniteFloat | None = Field(
        default=None, gt=0, le=1e7, description="SGLang --hicache-size to convert (GB per rank)"
    )
    sglang_hicache_ratio: FiniteFloat | None = Field(
        default=None, gt=0, le=1000, description="SGLang --hicache-ratio to convert (not with the size)"
    )


class LayerKind(BaseModel):
    kind: Literal["full_attention", "sliding_window", "chunked_local", "mla", "linear_attention"]
    layers: int
    layers_per_rank: int = Field(description="on the busiest pipeline stage")
    bytes_per_token_per_layer_per_rank: int | None = None
    bytes_per_token_per_rank: int | None = Field(default=None, description="all layers of this kind on one rank")
    bytes_per_token_total: int | None = Field(default=None, description="summed over TP × PP ranks")
    tokens_bounded_to: int | None = Field(default=None, description="sliding/chunked: tokens held at most")
    block_size: int | None = Field(default=None, description="tokens per block of this kind, after page unification")
    state_bytes_per_sequence_per_rank: int | None = Field(default=None, description="linear attention: per layer")
    formula: str


class FormulaNote(BaseModel):
    name: str
    formula: str
    value: str
    rule: str = Field(description="the rule of the engine's arithmetic it follows (knowledge/engine.yaml)")
    sources: list[str] = Field(description="where the released code does it, as the rule cites it")


class LoadEstimate(BaseModel):
    tier: str
    seconds: float
    formula: str


class OffloadTier(BaseModel):
    backend: OffloadBackend
    kv_offloading_size_gib: float = Field(description="--kv-offloading-size: GiB, total for one engine (all ranks)")
    cpu_bytes_to_use: int = Field(description="kv_connector_extra_config.cpu_bytes_to_use: bytes, total")
    lmcache_max_local_cpu_size_gib: float = Field(description="GiB per worker process = total / (TP × PP)")
    host_gib_per_node: float = Field(
        description="host memory the tier takes on one node: the size times the engines there (each data-parallel "
        "engine has its own tier), or the node's share of an engine that spans nodes"
    )
    size_basis: str
    replicated_mla_layout: bool
    chunk_bytes: int
    num_chunks: int
    warm_sessions_held: int
    consistency_rule: str
    vllm_refuses: str | None = Field(
        default=None,
        description="why vLLM will not start with this tier (the ERROR warning); the figures would not hold",
    )


class SglangConversion(BaseModel):
    hicache_size_gb_per_rank: float | None = Field(default=None, description="this tier as SGLang's --hicache-size")
    hicache_ratio: float | None = Field(default=None, description="this tier as SGLang's --hicache-ratio")
    from_sglang_total_gb: float | None = Field(
        default=None, description="the SGLang host pool given, over all TP × PP ranks, decimal GB (10^9 bytes)"
    )
    from_sglang_kv_offloading_size_gib: float | None = Field(
        default=None, description="the same bytes as --kv-offloading-size takes them: GiB (2^30 bytes), all ranks"
    )
    kv_offloading_size_unit: str = Field(description="the unit and scope of --kv-offloading-size, from the knowledge")
    from_sglang: str | None = Field(default=None, description="the conversion, in words")
    note: str | None = Field(description="how far the SGLang figures can be trusted; null when there are none")


class BenchmarkPlan(BaseModel):
    gpu_kv_tokens: int
    cpu_tier_tokens: int | None
    unique_prefix_tokens: int
    command: str
    rule: str


_CAVEAT_WORDS = re.compile(r"ESTIMATE|ASSUMED|REFERENCE ONLY")


def _caveats(text: str) -> list[str]:
    """The parenthesised clauses of ``text`` that name an ESTIMATE, an ASSUMED value or a REFERENCE ONLY."""
    clauses: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
            if depth == 1:
                start = i + 1
        elif char == ")" and depth:
            depth -= 1
            if depth == 0 and _CAVEAT_WORDS.search(text, start, i):
                clauses.append(text[start:i])
    if not clauses and _CAVEAT_WORDS.search(text):
        clauses.append(text)
    return clauses


class SizeOffloadResult(Result):
    version_context: VersionContext
    model: str
    model_source: str | None = Field(
        default=None, description="a model named by Hub id: the repository, commit and whether the Hub or the cache"
    )
    kv_figures_basis: str = Field(
        description="how sure the KV figures are: verified against the engine for this architecture and release, "
        "or an estimate from the generic reader and what it does not model"
    )
    gpu: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    world_size: int = Field(description="GPUs of one engine: tensor × pipeline parallel size")
    hybrid_kv_cache_manager: bool
    block_size: int = Field(description="GPU block size after hybrid alignment")
    kv_heads_per_rank: int
    layer_kinds: list[LayerKind]
    kv_bytes_per_token_per_rank: int = Field(description="full-context layers only (bounded kinds excluded)")
    kv_bytes_per_token_total: int
    gpu_block_bytes_per_rank: int = Field(description="one block id across every layer of a rank")
    gpu_budget_gib_per_rank: float
    weights_gib_per_gpu: float
    num_gpu_blocks: int
    max_model_len: int
    live_sessions_at_max_model_len: float = Field(
        description="the engine's max_concurrency figure: GPU blocks / blocks one max_model_len request needs "
        "(fractional, as vLLM logs it)"
    )
    live_sessions_at_typical_context: float = Field(description="the same ratio at typical_context_tokens (fractional)")
    whole_sessions_at_max_model_len: int = Field(description="sessions of max_model_len tokens that fit whole")
    whole_sessions_at_typical_context: int = Field(
        description="sessions of typical_context_tokens (at most max_model_len) that fit whole"
    )
    typical_context_tokens: int = Field(description="the context the typical figures are for")
    offload: OffloadTier | None
    host_ram_left_gib: float | None = Field(
        description="per node, after the CPU tier; negative: the tier exceeds the RAM by that much"
    )
    load_estimates: list[LoadEstimate]
    prefill_tokens_per_s: float | None
    sglang: SglangConversion
    benchmark: BenchmarkPlan | None
    formulas: list[FormulaNote]
    warnings: list[str]
    citations: list[Citation]
    # What the pictures draw (reports/sizing_pictures), from the same arithmetic as the fields above; not
    # part of the answer's JSON, so the answer does not grow.
    _figures: SizingFigures | None = PrivateAttr(default=None)

    @property
    def figures(self) -> SizingFigures | None:
        """The memory budget and the capacity function behind this answer (None for a result read back
        from JSON, which does not carry them)."""
        return self._figures

    def summary(self) -> str:
        v = self.version_context
        lines = [
            f"{self.model} on {self.world_size}× {self.gpu}, vLLM {v.version}" + (" (assumed)" if v.assumed else ""),
            *([self.model_source] if self.model_source else []),
            f"KV figures: {self.kv_figures_basis}",
            f"KV per token: {self.kv_bytes_per_token_per_rank:,} B per rank, {self.kv_bytes_per_token_total:,} B total "
            f"(KV heads per rank {self.kv_heads_per_rank}, block {self.block_size})",
        ]
        for k in self.layer_kinds:
            if k.state_bytes_per_sequence_per_rank is not None:
                lines.append(
                    f"  {k.kind}: {k.layers} layers, state "
                    f"{k.state_bytes_per_sequence_per_rank:,} B/sequence/layer/rank"
                )
            else:
                bound = f", bounded to {k.tokens_bounded_to:,} tokens" if k.tokens_bounded_to else ""
                per_layer = k.bytes_per_token_per_layer_per_rank
                size = f" × {per_layer:,} B/token/rank" if per_layer is not None else f": {k.formula}"
                block = f", block {k.block_size}" if k.block_size not in (None, self.block_size) else ""
                lines.append(f"  {k.kind}: {k.layers} layers{size}{bound}{block}")
        lines.append(
            f"GPU KV budget {self.gpu_budget_gib_per_rank:.1f} GiB/rank (weights {self.weights_gib_per_gpu:.1f} GiB) → "
            f"{self.num_gpu_blocks:,} blocks; live sessions: {self.whole_sessions_at_max_model_len:,} at "
            f"{self.max_model_len:,} tokens (the engine's max_concurrency {self.live_sessions_at_max_model_len:.2f}), "
            f"{self.whole_sessions_at_typical_context:,} at {self.typical_context_tokens:,} tokens"
        )
        if self.offload is not None and self.offload.vllm_refuses is not None:
            lines.append(f"CPU tier ({self.offload.backend}): none: {self.offload.vllm_refuses}")
        elif self.offload is not None:
            o = self.offload
            lines.append(
                f"CPU tier ({o.backend}): --kv-offloading-size {o.kv_offloading_size_gib:g} (GiB total) = "
                f"cpu_bytes_to_use {o.cpu_bytes_to_use:,}; LMCACHE_MAX_LOCAL_CPU_SIZE "
                f"{o.lmcache_max_local_cpu_size_gib:g} per process; holds {o.warm_sessions_held:,} warm sessions"
            )
            if abs(o.host_gib_per_node - o.kv_offloading_size_gib) > 1e-9:
                engines = o.host_gib_per_node / o.kv_offloading_size_gib
                lines.append(
                    f"host memory the tier takes per node: {o.host_gib_per_node:g} GiB "
                    f"({o.kv_offloading_size_gib:g} GiB per engine × {engines:g})"
                )
        if self.host_ram_left_gib is not None:
            lines.append(f"host RAM left per node: {self.host_ram_left_gib:.1f} GiB")
        lines += [f"load {e.tier}: {e.seconds:.2f} s" for e in self.load_estimates]
        if self.sglang.hicache_size_gb_per_rank is not None:
            ratio = self.sglang.hicache_ratio
            lines.append(
                f"SGLang: --hicache-size {self.sglang.hicache_size_gb_per_rank:g} (GB per rank)"
                + (f" or --hicache-ratio {ratio:g}" if ratio is not None else "")
            )
        if self.sglang.from_sglang is not None:
            lines.append(f"from SGLang: {self.sglang.from_sglang}")
        if self.benchmark is not None:
            lines.append(f"benchmark: {self.benchmark.command}")
        lines += self.caveat_lines()
        lines += [f"warning: {w}" for w in (*v.warnings, *self.warnings)]
        return "\n".join(lines)

    def caveat_lines(self) -> list[str]:
        """One line for each figure above that rests on an estimate, an assumption or an unchecked reference:
        the text an agent reads must not give those numbers plainly."""
        worded = [(f.name, f.formula) for f in self.formulas]
        worded += [(f"load {e.tier}", e.formula) for e in self.load_estimates]
        lines = [f"caveat: {name}: {'; '.join(clauses)}" for name, text in worded if (clauses := _caveats(text))]
        if self.sglang.note is not None:
            lines.append(f"caveat: SGLang: {self.sglang.note}")
        return lines


# ---------------------------------------------------------------------------- lookups


def _suggestions(knowledge: Knowledge, text: str) -> str:
    close = difflib.get_close_matches(model_key(text), knowledge.model_spellings(), n=4, cutoff=0.5)
    suggestions = dict.fromkeys(m.id for c in close if (m := knowledge.find_model(c)) is not None)
    return f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""


def _find_model(knowledge: Knowledge, text: str) -> ModelArch:
    model = knowledge.find_model(text)
    if model is not None:
        return model
    hint = _suggestions(knowledge, text)
    known = ", ".join(m.id.split(".", 1)[-1] for m in knowledge.models)
    raise AdviceError("model", f"no model called {text!r} in the knowledge.{hint} Known: {known}.")


def _attention_text(model: ModelArch) -> str:
    kinds = ["MLA" if model.attention == "mla" else "GQA"]
    if model.sliding_window_layers:
        kinds.append(f"{model.sliding_window_layers} sliding ({model.sliding_window:,})")
    if model.chunked_local_layers:
        kinds.append(f"{model.chunked_local_layers} chunked local")
    if model.linear_attention_layers:
        state = "Mamba2" if model.mamba2 is not None else "short-convolution" if model.short_conv else "linear"
        kinds.append(f"{model.linear_attention_layers} {state}")
    if model.index_topk is not None:
        kinds.append("sparse-attention indexer (not sized)")
    return " + ".join(kinds)


def known_models_text(knowledge: Knowledge) -> str:
    """The models `model` takes: id, name, Hugging Face repo, layout and context (``vllm-caching models``)."""
    rows = [("ID", "NAME", "HUGGING FACE REPO", "LAYERS", "ATTENTION", "CONTEXT")]
    rows += [
        (
            m.id.split(".", 1)[-1],
            m.name,
            m.hf_repo,
            str(m.num_layers),
            _attention_text(m),
            f"{m.max_position_embeddings:,}",
        )
        for m in knowledge.models
    ]
    footer = "model takes the id, the name, the repo or an alias; any other model: config_path or architecture"
    return _table(rows) + "\n" + footer


def known_gpus_text(knowledge: Knowledge) -> str:
    """The GPUs `gpu` takes: id, name, memory and host link (``vllm-caching gpus``)."""
    rows = [("ID", "NAME", "MEMORY", "HOST LINK")]
    rows += [
        (g.id.split(".", 1)[-1], g.name, f"{g.hbm_gb:g} GB", f"{g.host_link} ({g.host_link_practical_gb_s:g} GB/s)")
        for g in knowledge.hardware.gpus
    ]
    footer = "gpu takes the id or the name; another GPU: the nearest one with gpu_memory_gib set to its memory"
    return _table(rows) + "\n" + footer


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def _find_gpu(knowledge: Knowledge, text: str) -> Gpu:
    gpu = knowledge.hardware.find_gpu(text)
    if gpu is not None:
        return gpu
    known = ", ".join(g.id for g in knowledge.hardware.gpus)
    raise AdviceError("gpu", f"no GPU called {text!r} in the knowledge; known: {known}")


def _entry(knowledge: Knowledge, entry_id: str) -> Gated:
    entry = knowledge.by_id.get(entry_id)
    if not isinstance(entry, Gated):  # pragma: no cover - the knowledge tests guard these ids
        raise LookupError(f"knowledge entry {entry_id!r} is missing")
    return entry


def _feature_since(knowledge: Knowledge, feature_id: str) -> Version:
    """The first release with a feature the arithmetic depends on (a knowledge entry by id)."""
    entry = knowledge.by_id[feature_id]
    assert isinstance(entry, Gated) and entry.introduced is not None, feature_id
    return entry.introduced


# ---------------------------------------------------------------------------- the trail of an answer


@dataclass
class _Trail:
    """What an answer rests on, collected as it is computed: the knowledge entries it cites, the
    formulas it shows and the warnings it gives, each in the order the steps reach them."""

    knowledge: Knowledge
    citations: list[Citation] = field(default_factory=list)
    formulas: list[FormulaNote] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    source: str | None = None  # where the model's layout was read, when it was read from outside the knowledge

    def use(self, entry_id: str) -> Sourced:
        entry = self.knowledge.by_id[entry_id]
        if not any(c.id == entry_id for c in self.citations):
            self.citations.append(cite(entry_id, entry, self.knowledge))
        return entry

    def rule(self, rule_id: str) -> EngineRule:
        """A rule of the engine's arithmetic (knowledge/engine.yaml), cited in the answer."""
        rule = self.knowledge.engine.rule(rule_id)
        if not any(c.id == rule_id for c in self.citations):
            self.citations.append(cite(rule_id, rule, self.knowledge))
        return rule

    def note(self, name: str, formula: str, value: object, rule_id: str, more_sources: Iterable[str] = ()) -> None:
        """Show one step of the arithmetic with the rule it follows and that rule's sources (and the sources
        of the rule's row the step used, if any)."""
        rule = self.rule(rule_id)
        sources = list(dict.fromkeys((*rule.sources, *more_sources)))
        self.formulas.append(FormulaNote(name=name, formula=formula, value=str(value), rule=rule_id, sources=sources))

    def warn(self, text: str) -> None:
        self.warnings.append(text)


# ---------------------------------------------------------------------------- arithmetic


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


_Kind = Literal["full_attention", "sliding_window", "chunked_local", "mla", "linear_attention"]


class _Group(BaseModel):
    """One kind of layer as vLLM groups it: its block, page bytes per layer and the blocks a session needs."""

    kind: _Kind
    layers_per_rank: int
    token_bytes: int  # KV bytes of one token in one layer (attention kinds)
    block: int
    page_bytes: int
    window: int | None = None
    chunk: int | None = None
    state_blocks: int = 1  # linear attention: state blocks a request holds (engine.mamba-align-mode)
    # Layers of one kind with different pages that share one block without the hybrid manager: (layers per
    # rank, layers in all, bytes per token of one layer) of each geometry (engine.attention-page-unification).
    mixed: tuple[tuple[int, int, int], ...] = ()

    @property
    def bytes_per_token_per_rank(self) -> int:
        if self.mixed:
            return sum(layers * per_layer for layers, _, per_layer in self.mixed)
        return self.token_bytes * self.layers_per_rank

    def mixed_formula(self) -> str:
        """The bytes per token of a mixed group's layers, geometry by geometry."""
        return " + ".join(f"{per_layer:,} B × {layers} layers" for layers, _, per_layer in self.mixed)

    def bytes_per_token_total(self, count: int, tp: int) -> int:
        if self.mixed:
            return sum(layers * per_layer for _, layers, per_layer in self.mixed) * tp
        return self.token_bytes * count * tp

    def blocks(self, tokens: int, in_flight: int) -> int:
        if self.kind == "linear_attention":
            return self.state_blocks
        if self.window is not None:
            return _cdiv(min(self.window - 1 + in_flight, tokens), self.block) + 1
        if self.chunk is not None:
            return _cdiv(min(self.chunk + in_flight, tokens), self.block)
        return _cdiv(tokens, self.block)


@dataclass(frozen=True)
class _Parallel:
    """The parallel layout of one engine and how it sits on the nodes."""

    tp: int
    pp: int
    dp: int
    gpus_per_node: int

    @property
    def world(self) -> int:
        return self.tp * self.pp

    @property
    def single_node(self) -> bool:
        return self.world <= self.gpus_per_node

    @property
    def gpus_on_node(self) -> int:
        return min(self.world, self.gpus_per_node)

    def per_stage(self, count: int) -> int:
        """Layers on the busiest pipeline stage."""
        return _cdiv(count, self.pp)


@dataclass(frozen=True)
class _Model:
    """What is served where: the attention layout, the GPU, the release, and whether the hybrid manager is on."""

    arch: Architecture
    gpu: Gpu
    version: Version
    hma: bool


@dataclass(frozen=True)
class _TokenBytes:
    """KV bytes one token costs in one attention layer on one rank."""

    kv_dtype: str
    mla: bool
    kv_heads_per_rank: int
    per_layer: int


@dataclass(frozen=True)
class _LayerSpecs:
    """The KV cache layout of one rank: the cache block, the groups, the page they share and the GPU block."""

    token: _TokenBytes
    kv_heads_per_rank: int  # as vLLM reports the model's (_reported_kv_heads)
    block: int  # the cache config's block; a group may have a larger one after page unification
    state_bytes: int
    in_flight: int
    in_flight_formula: str
    kinds: tuple[tuple[_Group, int], ...]  # each kind with its layer count over all stages
    group_size: int
    groups: tuple[tuple[_Group, int], ...]  # each kind with the number of KV cache groups it makes
    page: int  # bytes of one block of one layer, the same for every group
    block_bytes: int  # one block id across a group's layers

    @property
    def group_blocks(self) -> list[int]:
        return sorted({g.block for g, _ in self.groups})

    def blocks_per_session(self, tokens: int) -> int:
        return sum(n * g.blocks(tokens, self.in_flight) for g, n in self.groups)


def _validate_parallel(arch: Architecture, tp: int) -> None:
    if arch.num_attention_heads % tp:
        raise AdviceError(
            "tensor_parallel_size",
            f"vLLM requires the attention heads ({arch.num_attention_heads}) to be divisible by TP ({tp}) "
            "(ModelConfig.verify_with_parallel_config); use a divisor of the head count",
        )
    if arch.attention == "mla":
        return
    for kv in sorted({arch.num_kv_heads, arch.full_kv_heads}):
        if (tp >= kv and tp % kv) or (tp < kv and kv % tp):
            raise AdviceError(
                "tensor_parallel_size",
                f"vLLM's QKVParallelLinear needs TP ({tp}) and the KV heads ({kv}) to divide one another",
            )
    if arch.linear_attention is not None and arch.linear_attention.num_value_heads % tp:
        raise AdviceError(
            "tensor_parallel_size",
            f"the linear-attention value heads ({arch.linear_attention.num_value_heads}) must divide by TP ({tp})",
        )
    if arch.mamba2 is not None:
        _validate_mamba2_parallel(arch.mamba2, tp)
    if arch.short_conv is not None and arch.short_conv.conv_dim % tp:
        raise AdviceError(
            "tensor_parallel_size",
            f"vLLM's ShortConv splits its {arch.short_conv.conv_dim} channels over TP ({tp}): use a divisor",
        )


def _validate_mamba2_parallel(s: Mamba2State, tp: int) -> None:
    """What vLLM's MambaMixer2 asserts while the model is built (rule engine.mamba2-state)."""
    if s.mamba_num_heads % tp:
        raise AdviceError(
            "tensor_parallel_size",
            f"vLLM's MambaMixer2 needs the Mamba2 heads ({s.mamba_num_heads}) divisible by TP ({tp})",
        )
    if s.n_groups % tp and s.n_groups != 1:
        raise AdviceError(
            "tensor_parallel_size",
            f"vLLM's MambaMixer2 needs the Mamba2 groups ({s.n_groups}) divisible by TP ({tp}), or a single group",
        )


# ---------------------------------------------------------------------------- the model and the layout


def _architecture(
    request: SizeOffloadRequest, knowledge: Knowledge, version: Version, trail: _Trail
) -> tuple[Architecture, str]:
    """The model's attention layout and the name to show for it; a layout read from a config is refused where
    the release cannot load or build it."""
    arch, label = _read_architecture(request, knowledge, trail)
    if request.model is None or knowledge.find_model(request.model) is None:
        verdict = registry_verdict(knowledge.model_registry, arch, version)
        field = (
            "config_path" if request.config_path is not None else "architecture" if request.model is None else "model"
        )
        if verdict.refusal is not None:
            raise AdviceError(field, f"{label}: {verdict.refusal}")
        if verdict.note is not None:
            trail.warn(verdict.note)
    return arch, label


def _read_architecture(request: SizeOffloadRequest, knowledge: Knowledge, trail: _Trail) -> tuple[Architecture, str]:
    if request.model is not None and knowledge.find_model(request.model) is None and is_repo_id(request.model):
        try:
            found = architecture_from_hub(request.model)  # any other model, by its Hub id
        except RepoNotFound as exc:  # a misspelt known model is likelier than a missing repository
            raise AdviceError(
                "model", str(exc).removeprefix("model: ") + _suggestions(knowledge, request.model)
            ) from None
        trail.source = f"config read from {found.source}"
        arch = found.arch.model_copy(update={"checkpoint_bytes": found.weights_bytes})
        label = request.model
    elif request.model is not None:
        entry = _find_model(knowledge, request.model)
        if entry.index_topk is not None:  # the config reader refuses the same layout (config_path)
            raise AdviceError("model", sparse_attention_refusal(entry.name, entry.index_topk))
        trail.use(entry.id)
        arch = from_knowledge(entry)
        label = entry.name
        if "max_position_embeddings" in entry.class_defaults and request.max_model_len is None:
            trail.warn(
                f"{entry.name}'s max_position_embeddings {entry.max_position_embeddings:,} is its config class's "
                "default, not read from the published checkpoint: give max_model_len for the length you serve."
            )
    elif request.config_path is not None:
        arch = read_hf_config(request.config_path)
        label = arch.name
    else:
        assert request.architecture is not None
        arch = request.architecture
        label = arch.name
    if request.params_total_b is not None:
        arch = arch.model_copy(update={"params_total_b": request.params_total_b, "checkpoint_bytes": None})
    if arch.default_dtype == "float32":
        trail.note(
            "model dtype", "float32 config.json → bfloat16 (--dtype auto)", "bfloat16", "engine.auto-dtype-float32"
        )
        # float32 tensors are loaded as bfloat16: half the bytes the checkpoint stores
        halved = arch.checkpoint_bytes // 2 if arch.checkpoint_bytes else None
        arch = arch.model_copy(update={"default_dtype": "bfloat16", "checkpoint_bytes": halved})
    return arch, label


def _parallel_layout(request: SizeOffloadRequest, arch: Architecture) -> _Parallel:
    layout = _Parallel(
        tp=request.tensor_parallel_size,
        pp=request.pipeline_parallel_size,
        dp=request.data_parallel_size,
        gpus_per_node=request.gpus_per_node,
    )
    total = layout.world * layout.dp
    if request.gpu_count is not None and request.gpu_count != total:
        raise AdviceError(
            "gpu_count", f"TP × PP × DP = {layout.tp} × {layout.pp} × {layout.dp} = {total}, not {request.gpu_count}"
        )
    _validate_parallel(arch, layout.tp)
    return layout


def _max_model_len(request: SizeOffloadRequest, arch: Architecture, trail: _Trail) -> int:
    max_len = request.max_model_len or arch.max_position_embeddings
    if max_len is None:
        raise AdviceError("max_model_len", "the model gives no max_position_embeddings; set max_model_len")
    if arch.max_position_embeddings and max_len > arch.max_position_embeddings:
        trail.warn(
            f"max_model_len {max_len:,} exceeds the model's max_position_embeddings "
            f"({arch.max_position_embeddings:,}); vLLM refuses it unless told to allow it."
        )
    return max_len


# The connector each backend means where the release has no --kv-offloading-backend shorthand, so it is
# configured by hand through --kv-transfer-config.
_HAND_CONFIGURED_CONNECTOR: dict[OffloadBackend, str] = {
    "native": "connector.offloading",
    "lmcache": "connector.lmcache",
}


def _offload_connector(request: SizeOffloadRequest, knowledge: Knowledge, version: Version) -> Connector:
    """The connector --kv-offloading-backend selects in this release (knowledge offload_shorthand)."""
    connector_id = next(
        (
            s.connector
            for s in knowledge.offload_shorthand
            if s.backend == request.offload_backend and s.when_env is None and in_range(s.versions, version)
        ),
        _HAND_CONFIGURED_CONNECTOR[request.offload_backend],
    )
    connector = _entry(knowledge, connector_id)
    assert isinstance(connector, Connector)
    return connector


def _hybrid_manager(
    request: SizeOffloadRequest, knowledge: Knowledge, version: Version, arch: Architecture, trail: _Trail
) -> bool:
    """Whether the hybrid KV cache manager stays on with the offload connector asked for: vLLM turns it off
    for a connector without HMA support in that release (connectors.yaml hma)."""
    connector = _offload_connector(request, knowledge, version)
    trail.use(connector.id)
    hma = request.hybrid_kv_cache_manager
    if hma is None:
        hma = connector.hma_at(version) not in (None, "no")
    has_bounded = arch.sliding_window_layers or arch.chunked_local_layers
    why_off = (
        "as asked" if request.hybrid_kv_cache_manager is False else f"{connector.name} has no HMA support in {version}"
    )
    if not hma and arch.linear_attention_layers:
        trail.warn(
            "ERROR: This model has linear-attention (Mamba-style) layers, which need the hybrid KV cache manager; "
            f"with it off ({why_off}) vLLM cannot start: it cannot put their state and the attention layers in "
            "one KV cache group. Upgrade or use another connector."
        )
    elif not hma and has_bounded:
        trail.rule("engine.hma-off-stores-full")
        if _stores_bounded_as_full(arch, hma):
            trail.warn(
                "The hybrid KV cache manager is off, so sliding-window and chunked-local layers are stored as full "
                "attention (every token kept): that costs GPU and CPU memory."
            )
    return hma


def _stores_bounded_as_full(arch: Architecture, hma: bool) -> bool:
    """Without the hybrid manager vLLM unifies a model that mixes full-attention layers with sliding-window or
    chunked-local ones into full attention; a model whose layers all slide (or are all chunked) has one kind
    of layer and keeps its bound (engine.hma-off-stores-full)."""
    return not hma and arch.full_attention_layers > 0


# ---------------------------------------------------------------------------- step 1: layer specs


def _token_bytes(request: SizeOffloadRequest, arch: Architecture, tp: int, trail: _Trail) -> _TokenBytes:
    """Bytes per token per layer and rank (``page_size_bytes`` / block size of the attention specs)."""
    kv_dtype = arch.default_dtype if request.kv_cache_dtype == "auto" else request.kv_cache_dtype
    dtype_bytes = _DTYPE_BYTES[kv_dtype]
    trail.use("flag.kv-cache-dtype")
    mla = arch.attention == "mla"
    kv_heads_rank = 1 if mla else max(1, arch.num_kv_heads // tp)
    head = arch.kv_head_size
    # K and V heads, V's own size where the model gives it one (DiffKV); MLA caches one latent
    per_layer_token = (head if mla else head + arch.v_head_size) * kv_heads_rank * dtype_bytes
    if arch.sliding_window_layers and not mla and arch.full_layers_own_geometry:
        trail.rule("engine.per-layer-attention-geometry")
        what = "sliding-window layers (the full-attention layers have their own geometry)"
    else:
        what = "layer"
    trail.note(
        "kv heads per rank",
        "1 (MLA: one latent, replicated on every TP rank)" if mla else "max(1, num_kv_heads // TP)",
        kv_heads_rank,
        "engine.kv-heads-per-rank",
    )
    trail.note(
        f"bytes per token per {what} per rank",
        f"1 × 1 × (kv_lora_rank {arch.kv_lora_rank} + qk_rope_head_dim {arch.qk_rope_head_dim}) × {dtype_bytes} B"
        if mla
        else f"(K {head} + V {arch.v_head_size}) × {kv_heads_rank} heads × {dtype_bytes} B ({kv_dtype})",
        per_layer_token,
        "engine.attention-page-bytes",
    )
    return _TokenBytes(kv_dtype=kv_dtype, mla=mla, kv_heads_per_rank=kv_heads_rank, per_layer=per_layer_token)


def _reported_kv_heads(arch: Architecture, tp: int, token: _TokenBytes, full_token: _TokenBytes) -> int:
    """The KV heads per rank vLLM reports for the model: its config's num_key_value_heads where the reader kept it
    (MiMo-V2), else the largest layer's (Gemma 4's per-layer configs collapse to the largest)."""
    if arch.reported_kv_heads is not None:
        return max(1, arch.reported_kv_heads // tp)
    return max(token.kv_heads_per_rank, full_token.kv_heads_per_rank)


def _full_attention_token_bytes(arch: Architecture, tp: int, token: _TokenBytes, trail: _Trail) -> _TokenBytes:
    """The full-attention layers' bytes per token per layer and rank: their own head size and KV heads where the
    model gives them (Gemma 4's global layers), else the same as every layer's."""
    if not arch.full_layers_own_geometry:
        return token
    kv_heads_rank = max(1, arch.full_kv_heads // tp)
    dtype_bytes = _DTYPE_BYTES[token.kv_dtype]
    v_head = arch.v_head_dim or arch.full_head_dim
    per_layer = (arch.full_head_dim + v_head) * kv_heads_rank * dtype_bytes
    trail.note(
        "bytes per token per full-attention layer per rank",
        f"(K {arch.full_head_dim} + V {v_head}; an attention_k_eq_v layer still caches both) × max(1, "
        f"{arch.full_kv_heads} KV heads // TP) = {kv_heads_rank} × {dtype_bytes} B ({token.kv_dtype})",
        per_layer,
        "engine.per-layer-attention-geometry",
    )
    return _TokenBytes(kv_dtype=token.kv_dtype, mla=False, kv_heads_per_rank=kv_heads_rank, per_layer=per_layer)


def _linear_state_bytes(arch: Architecture, tp: int, version: Version, trail: _Trail) -> int:
    """Conv + recurrent state of one sequence in one linear-attention layer on one rank."""
    if arch.mamba2 is not None:
        return _mamba2_state_bytes(arch, arch.mamba2, tp, version, trail)
    if arch.short_conv is not None:
        return _short_conv_state_bytes(arch, arch.short_conv, tp, trail)
    s = arch.linear_attention
    assert s is not None
    conv_bytes = _DTYPE_BYTES[arch.default_dtype]
    ssm_dtype = _ssm_state_dtype(arch, version, trail)
    conv_dim = s.key_head_dim * s.num_key_heads * 2 + s.value_head_dim * s.num_value_heads
    conv = conv_dim // tp * (s.conv_kernel_dim - 1)
    temporal = s.num_value_heads // tp * s.value_head_dim * s.key_head_dim
    state_bytes = conv * conv_bytes + temporal * _DTYPE_BYTES[ssm_dtype]
    trail.note(
        "linear-attention state per sequence per layer per rank",
        f"(2·{s.num_key_heads}·{s.key_head_dim} + {s.num_value_heads}·{s.value_head_dim}) / TP × "
        f"({s.conv_kernel_dim} − 1) × {conv_bytes} B ({arch.default_dtype}) + {s.num_value_heads} / TP × "
        f"{s.value_head_dim} × {s.key_head_dim} × {_DTYPE_BYTES[ssm_dtype]} B ({ssm_dtype} recurrent state)",
        state_bytes,
        "engine.linear-attention-state",
    )
    return state_bytes


def _mamba2_state_bytes(arch: Architecture, s: Mamba2State, tp: int, version: Version, trail: _Trail) -> int:
    """Conv + SSM state of one sequence in one Mamba2 layer on one rank (MambaStateShapeCalculator.mamba2_state_shape):
    the groups are replicated up to TP when TP does not divide them."""
    conv_bytes = _DTYPE_BYTES[arch.default_dtype]
    ssm_dtype = _ssm_state_dtype(arch, version, trail)
    groups = s.n_groups if s.n_groups % tp == 0 else tp
    heads, head_dim, size = s.mamba_num_heads, s.mamba_head_dim, s.ssm_state_size
    conv = (heads * head_dim + 2 * groups * size) // tp * (s.conv_kernel - 1)
    ssm = heads // tp * head_dim * size
    state_bytes = conv * conv_bytes + ssm * _DTYPE_BYTES[ssm_dtype]
    trail.note(
        "Mamba2 state per sequence per layer per rank",
        f"({heads}·{head_dim} + 2·{groups} groups·{size}) / TP × ({s.conv_kernel} − 1) × {conv_bytes} B "
        f"({arch.default_dtype} conv state) + {heads} / TP × {head_dim} × {size} × {_DTYPE_BYTES[ssm_dtype]} B "
        f"({ssm_dtype} SSM state)",
        state_bytes,
        "engine.mamba2-state",
    )
    return state_bytes


def _short_conv_state_bytes(arch: Architecture, s: ShortConvState, tp: int, trail: _Trail) -> int:
    """The conv state of one sequence in one LFM2 short-convolution layer on one rank, in the model dtype with
    --mamba-cache-dtype auto (MambaStateShapeCalculator.short_conv_state_shape; no recurrent state)."""
    conv_bytes = _DTYPE_BYTES[arch.default_dtype]
    state_bytes = s.conv_dim // tp * (s.conv_kernel - 1) * conv_bytes
    trail.note(
        "short-convolution state per sequence per layer per rank",
        f"conv_dim {s.conv_dim} / TP × (conv_L_cache {s.conv_kernel} − 1) × {conv_bytes} B ({arch.default_dtype})",
        state_bytes,
        "engine.short-conv-state",
    )
    return state_bytes


def _hooked(rule: EngineRule, version: Version, architecture: str | None) -> bool:
    """Whether the release's config hook named by ``rule`` (a tuple of architectures per range) takes this model."""
    found = rule.value_at(version)
    return (
        architecture is not None
        and found is not None
        and isinstance(found.value, tuple)
        and (architecture in found.value)
    )


def _ssm_state_dtype(arch: Architecture, version: Version, trail: _Trail) -> str:
    """The recurrent (SSM) state's dtype with --mamba-ssm-cache-dtype auto: the model dtype, unless the release's
    config hook for the architecture sets it from config.json (Qwen3.5's mamba_ssm_dtype; Nemotron-H's
    mamba_ssm_cache_dtype, or the hook's default when the config names none). A layout typed in without a
    model class keeps the dtype it gives."""
    engine = trail.knowledge.engine
    trail.rule("engine.mamba-state-dtypes")
    if arch.architecture is None and arch.ssm_state_dtype is not None:
        return arch.ssm_state_dtype  # a typed-in layout with no model class: the dtype its engine keeps
    if _hooked(engine.rule("engine.nemotron-h-ssm-dtype"), version, arch.architecture):
        trail.rule("engine.nemotron-h-ssm-dtype")
        if arch.ssm_state_dtype is not None:
            return arch.ssm_state_dtype
        default = trail.rule("engine.nemotron-h-ssm-dtype-default").value_at(version)
        return default.value if default is not None and isinstance(default.value, str) else arch.default_dtype
    if _hooked(engine.rule("engine.qwen3_5-ssm-dtype"), version, arch.architecture):
        trail.rule("engine.qwen3_5-ssm-dtype")
        return arch.ssm_state_dtype or arch.default_dtype
    if arch.ssm_state_dtype is not None and arch.ssm_state_dtype != arch.default_dtype:
        trail.warn(
            f"The model declares a {arch.ssm_state_dtype} recurrent state, which vLLM {version} reads from "
            f"config.json only for Qwen3.5 and Nemotron-H architectures, not {arch.architecture or 'this one'}: "
            f"the figures keep it in {arch.default_dtype}; serve with --mamba-ssm-cache-dtype "
            f"{arch.ssm_state_dtype} for the declared one (each state then takes "
            f"{_DTYPE_BYTES[arch.ssm_state_dtype] / _DTYPE_BYTES[arch.default_dtype]:g}× the recurrent bytes)."
        )
    return arch.default_dtype


def _fp8_on_triton_check(arch: Architecture, gpu: Gpu, version: Version, token: _TokenBytes, trail: _Trail) -> None:
    """An fp8 KV cache where vLLM runs the model on a Triton backend of a GPU below compute capability 8.9:
    the backend refuses it and vLLM does not start (rule engine.fp8-kv-triton-needs-sm89)."""
    capability = trail.knowledge.engine.capability(gpu.id)
    if not token.kv_dtype.startswith("fp8") or capability is None:
        return
    if capability.as_tuple >= (8, 9):
        return
    refused = trail.rule("engine.fp8-kv-triton-needs-sm89").value_at(version)
    kinds = refused.value if refused is not None and isinstance(refused.value, tuple) else ()
    sizes = trail.rule("engine.flashinfer-head-sizes").value_at(version)
    flashinfer_sizes = sizes.value if sizes is not None and isinstance(sizes.value, tuple) else ()
    head_size_off = not token.mla and bool(flashinfer_sizes) and str(arch.kv_head_size) not in flashinfer_sizes
    on_triton = (
        ("mla" in kinds and token.mla)
        or ("head-size" in kinds and head_size_off)
        or (arch.architecture is not None and arch.architecture in kinds)
    )
    if not on_triton:
        return
    backend = "Triton MLA" if token.mla else "Triton attention"
    trail.warn(
        f"ERROR: vLLM {version} will not start: on {gpu.name} (compute capability {capability.compute_capability}) "
        f"it runs this model on its {backend} backend, which refuses an fp8 KV cache below compute capability "
        "8.9 ('native FP8 (fp8e4nv) requires SM89+'). Use --kv-cache-dtype bfloat16 (or auto), or a GPU of "
        "compute capability 8.9 or newer."
    )


_FA4_BLACKWELL_MAX_HEAD = 128  # FA4 on 10.x takes heads above this only at 256 (fa_utils.py)


def _fp8_on_diffkv_blackwell_check(
    arch: Architecture, gpu: Gpu, version: Version, token: _TokenBytes, trail: _Trail
) -> None:
    """An fp8 KV cache for a model whose V head differs from K's on Blackwell: FlashAttention's DiffKV backend
    refuses it (rule engine.fp8-kv-diffkv-blackwell)."""
    capability = trail.knowledge.engine.capability(gpu.id)
    if not token.kv_dtype.startswith("fp8") or capability is None or capability.major < 10 or not arch.v_head_dim:
        return
    head = arch.head_dim
    if head <= _FA4_BLACKWELL_MAX_HEAD or head == 256:
        return
    refused = trail.rule("engine.fp8-kv-diffkv-blackwell").value_at(version)
    if refused is None or refused.value is not True:
        return
    trail.warn(
        f"ERROR: vLLM {version} will not start: on {gpu.name} this model's attention (K {head}, V {arch.v_head_dim}) "
        "runs FlashAttention's DiffKV backend, which refuses an fp8 KV cache there ('FlashAttention does not "
        "support fp8 kv-cache on this device'). Use --kv-cache-dtype auto, or a Hopper GPU."
    )


def _default_block_size(knowledge: Knowledge, version: Version) -> int:
    """CacheConfig.DEFAULT_BLOCK_SIZE of the release: the value of engine.attention-backend-block."""
    found = knowledge.engine.rule("engine.attention-backend-block").value_at(version)
    value = None if found is None else found.value
    if not isinstance(value, int) or isinstance(value, bool):  # pragma: no cover - the knowledge tests
        raise LookupError(f"engine.attention-backend-block has no default block for {version}")
    return value


def _backend_block_size(request: SizeOffloadRequest, model: _Model, token: _TokenBytes, trail: _Trail) -> int:
    """The block before hybrid alignment: --block-size, or the one the default attention backend brings
    (knowledge/engine.yaml attention_backends; without a row for the case, the release's default block)."""
    if request.block_size is not None:
        return request.block_size
    knowledge, version, gpu = trail.knowledge, model.version, model.gpu
    default_block = _default_block_size(knowledge, version)
    capability = knowledge.engine.capability(gpu.id)
    head_size = max(model.arch.kv_head_size, model.arch.full_head_dim)  # vLLM's model head size: the largest layer's
    dtype_kind = "fp8" if token.kv_dtype.startswith("fp8") else "16-bit"
    attention = "mla" if token.mla else "gqa"
    row = None
    if capability is not None:
        row = knowledge.engine.backend_block(version, capability.major, attention, dtype_kind, head_size)
    if capability is not None and capability.major < 8:
        trail.warn(
            f"vLLM on compute capability {capability.compute_capability} ({gpu.name}) is not recorded: which attention "
            f"backend it picks there, and its block, are assumed ({default_block}-token blocks); no FlashAttention "
            "runs below 8.0, and --dtype bfloat16 is refused there (feature.bf16-refused-below-sm80)."
        )
    if row is None and not token.mla:
        return default_block  # every backend vLLM picks for it takes the release's default block
    trail.rule("engine.attention-backend-block")
    if row is None:
        trail.warn(
            f"Which MLA attention backend vLLM {version} picks on {gpu.name} for {dtype_kind} KV, and the block it "
            f"brings, is not recorded: the figures assume {default_block}-token blocks. A backend with larger "
            "blocks (FlashInfer MLA 32/64, CUTLASS MLA 128) gives proportionally fewer, larger blocks; the bytes "
            "per token and the sessions do not change."
        )
        return default_block
    trail.note(
        "block size of the attention backend",
        f"{row.backend}, vLLM's default for {'MLA' if token.mla else 'attention'} with {dtype_kind} KV"
        + (f" and {row.head_size}-wide heads" if row.head_size else "")
        + f" on compute capability {capability.compute_capability if capability else '?'}: its block when "
        "--block-size is not given",
        row.block_size,
        "engine.attention-backend-block",
        row.sources,
    )
    return row.block_size


@dataclass(frozen=True)
class _MambaLayout:
    """How a hybrid model keeps linear-attention state: blocks per request and the checkpoint alignment."""

    mode: Literal["none", "align"]
    state_blocks: int
    checkpoint_alignment: int  # 1: none


_NONE_LAYOUT = _MambaLayout(mode="none", state_blocks=1, checkpoint_alignment=1)
# In 'align' mode a request holds 2 state blocks (MambaSpec.max_memory_usage_bytes) plus the prefill checkpoint
# block GDN layers add when FlashInfer's GDN prefill kernel exports checkpoints, which 0.33.0 picks on compute
# capability 9.0 (engine.mamba-align-mode), and on Blackwell (10.x) and 12.x only with linear key heads of 128 and
# a CUDA 13 runtime (engine.release-cuda-runtime).
_ALIGN_STATE_BLOCKS = 2
_GDN_CHECKPOINT_BLOCKS = 1
_FLASHINFER_GDN_CAPABILITY_MAJOR = 9
_FLASHINFER_GDN_CUDA13_MAJORS = (10, 12)
_FLASHINFER_GDN_KEY_HEAD_DIM = 128
_FLASHINFER_GDN_CUDA_MAJOR = 13


def _flashinfer_gdn_prefill(model: _Model, alignment: int, trail: _Trail) -> bool:
    """Whether vLLM runs FlashInfer's GDN prefill, which exports the align-mode prefill checkpoints: on 9.0, and
    on 10.x / 12.x with key heads of 128 when the release's published builds run CUDA 13."""
    capability = trail.knowledge.engine.capability(model.gpu.id)
    if capability is None:
        return False
    if capability.major == _FLASHINFER_GDN_CAPABILITY_MAJOR:
        return True
    state = model.arch.linear_attention
    if capability.major not in _FLASHINFER_GDN_CUDA13_MAJORS or state is None:
        return False
    if state.key_head_dim != _FLASHINFER_GDN_KEY_HEAD_DIM:
        return False
    found = trail.rule("engine.release-cuda-runtime").value_at(model.version)
    cuda = found.value if found is not None else None
    with_checkpoints = (
        f"the block is a multiple of {alignment} tokens and each request holds "
        f"{_ALIGN_STATE_BLOCKS + _GDN_CHECKPOINT_BLOCKS} state blocks per linear group"
    )
    without = f"{_ALIGN_STATE_BLOCKS} state blocks per linear group and no checkpoint alignment"
    if not isinstance(cuda, int) or isinstance(cuda, bool):
        trail.warn(
            f"On {model.gpu.name} vLLM {model.version} uses FlashInfer's GDN prefill only with a CUDA 13 runtime, and "
            f"which CUDA that release's builds run is not recorded: the figures assume the Triton prefill ({without}). "
            f"With CUDA 13 {with_checkpoints}."
        )
        return False
    if cuda < _FLASHINFER_GDN_CUDA_MAJOR:
        return False
    trail.warn(
        f"On {model.gpu.name} vLLM {model.version}'s published builds (CUDA {cuda}) run FlashInfer's GDN prefill, so "
        f"{with_checkpoints}; a build for CUDA 12 runs the Triton prefill instead: {without}."
    )
    return True


def _prefix_caching(request: SizeOffloadRequest, version: Version, trail: _Trail) -> bool | None:
    """Whether prefix caching is on for a hybrid model: as given, or the release's default (None: not known)."""
    trail.use("flag.enable-prefix-caching")
    if request.enable_prefix_caching is not None:
        return request.enable_prefix_caching
    default = trail.rule("engine.hybrid-prefix-caching-default").value_at(version)
    return default.value if default is not None and isinstance(default.value, bool) else None


def _mamba_layout(request: SizeOffloadRequest, model: _Model, trail: _Trail) -> _MambaLayout:
    """mamba_cache_mode follows prefix caching: 'align' with it on, 'none' with it off."""
    version = model.version
    prefix_caching = _prefix_caching(request, version, trail)
    if prefix_caching is False:
        return _NONE_LAYOUT
    if prefix_caching is None:
        trail.warn(
            f"Whether vLLM {version} turns prefix caching on for a hybrid model by default is not recorded: the "
            "figures assume it is off (mamba_cache_mode 'none'); give enable_prefix_caching to say."
        )
        return _NONE_LAYOUT
    found = trail.rule("engine.mamba-align-mode").value_at(version)
    alignment = found.value if found is not None else None
    if not isinstance(alignment, int) or isinstance(alignment, bool):
        trail.warn(
            f"With prefix caching on, vLLM {version} keeps the linear-attention state in mamba_cache_mode 'align', "
            "which this answer does not model for that release: the figures are for 'none' (1 state block per "
            "request), so the block size and the state blocks per request may be larger in the engine. Pass "
            "enable_prefix_caching=false for the layout shown."
        )
        return _NONE_LAYOUT
    if alignment == _NO_PREFILL_CHECKPOINTS:
        return _align_without_checkpoints(model, trail)
    if model.arch.mamba2 is not None:
        return _mamba2_align_layout(trail)
    if model.arch.short_conv is not None:
        return _short_conv_align_layout(trail)
    if _flashinfer_gdn_prefill(model, alignment, trail):
        layout = _MambaLayout(
            mode="align", state_blocks=_ALIGN_STATE_BLOCKS + _GDN_CHECKPOINT_BLOCKS, checkpoint_alignment=alignment
        )
        how = f"FlashInfer GDN prefill exports checkpoints: {_GDN_CHECKPOINT_BLOCKS} checkpoint block, alignment"
    else:
        layout = _MambaLayout(mode="align", state_blocks=_ALIGN_STATE_BLOCKS, checkpoint_alignment=1)
        how = "the Triton GDN prefill exports no checkpoints: no checkpoint block, alignment"
    trail.note(
        "linear-attention state blocks per request",
        f"mamba_cache_mode 'align' (prefix caching on): {_ALIGN_STATE_BLOCKS} + checkpoint blocks per linear group; "
        f"{how} {layout.checkpoint_alignment}",
        layout.state_blocks,
        "engine.mamba-align-mode",
    )
    return layout


# A Mamba2 layer exports its block-boundary state from inside one prefill: one checkpoint block, alignment 1
# (engine.mamba2-prefill-checkpoint).
_MAMBA2_CHECKPOINT_BLOCKS = 1


def _mamba2_align_layout(trail: _Trail) -> _MambaLayout:
    """'align' mode for Mamba2 groups: 2 state blocks and the checkpoint block per request, whatever the GPU."""
    layout = _MambaLayout(
        mode="align", state_blocks=_ALIGN_STATE_BLOCKS + _MAMBA2_CHECKPOINT_BLOCKS, checkpoint_alignment=1
    )
    trail.note(
        "linear-attention state blocks per request",
        f"mamba_cache_mode 'align' (prefix caching on): {_ALIGN_STATE_BLOCKS} + {_MAMBA2_CHECKPOINT_BLOCKS} "
        "checkpoint block per Mamba2 group; MambaMixer2's checkpoints align to 1 token, so the block keeps the "
        "kernel's alignment",
        layout.state_blocks,
        "engine.mamba2-prefill-checkpoint",
    )
    return layout


def _short_conv_align_layout(trail: _Trail) -> _MambaLayout:
    """'align' mode for short-convolution groups: 2 state blocks per request; ShortConv exports no prefill
    checkpoints, so the block keeps the kernel's alignment."""
    layout = _MambaLayout(mode="align", state_blocks=_ALIGN_STATE_BLOCKS, checkpoint_alignment=1)
    trail.note(
        "linear-attention state blocks per request",
        f"mamba_cache_mode 'align' (prefix caching on): {_ALIGN_STATE_BLOCKS} state blocks per short-convolution "
        "group; ShortConv exports no prefill checkpoints",
        layout.state_blocks,
        "engine.mamba-align-mode",
    )
    return layout


# engine.mamba-align-mode's value for a release whose Gated DeltaNet layers export no prefill checkpoints in 'align'
# mode (before 0.29.0, and 0.32.0).
_NO_PREFILL_CHECKPOINTS = 0


def _align_without_checkpoints(model: _Model, trail: _Trail) -> _MambaLayout:
    """'align' where Gated DeltaNet layers export no prefill checkpoints (before 0.29.0, and 0.32.0): 2 state
    blocks per linear group, and the block 'none' would have.

    A Mamba2 group differs: before 0.28.0 a model class that declares Mamba prefix caching runs 'all' (a state
    block per block of tokens; engine.mamba2-prefix-caching-all), which is not modelled, and from 0.32.0
    MambaMixer2 adds a checkpoint block of its own (engine.mamba2-prefill-checkpoint)."""
    version = model.version
    if model.arch.mamba2 is not None:
        all_mode = trail.rule("engine.mamba2-prefix-caching-all").value_at(version)
        if all_mode is None or all_mode.value is not False:
            trail.warn(
                f"With prefix caching on, vLLM {version} keeps Mamba2 state in mamba_cache_mode 'all' where the "
                "model class supports Mamba prefix caching (a state block per block of tokens), which this answer "
                "does not model: the figures are for 'none' (1 state block per request). Pass "
                "enable_prefix_caching=false for the layout shown."
            )
            return _NONE_LAYOUT
        checkpoint = trail.rule("engine.mamba2-prefill-checkpoint").value_at(version)
        if checkpoint is not None and checkpoint.value is True:
            return _mamba2_align_layout(trail)
    layout = _MambaLayout(mode="align", state_blocks=_ALIGN_STATE_BLOCKS, checkpoint_alignment=1)
    trail.note(
        "linear-attention state blocks per request",
        f"mamba_cache_mode 'align' (prefix caching on): {_ALIGN_STATE_BLOCKS} state blocks per linear group; vLLM "
        f"{version} exports no prefill checkpoints, so the block is the one 'none' has",
        layout.state_blocks,
        "engine.mamba-align-mode",
    )
    return layout


def _hybrid_block_size(
    block_flag: int, token: _TokenBytes, state_bytes: int, mamba: _MambaLayout, trail: _Trail
) -> int:
    """The attention block grows until one attention page holds a linear layer's state."""
    align = _MLA_KERNEL_BLOCK_ALIGNMENT if token.mla else _KERNEL_BLOCK_ALIGNMENT
    align = math.lcm(max(align, block_flag), mamba.checkpoint_alignment)
    needed = align * _cdiv(state_bytes, align * token.per_layer)
    needed = _KERNEL_BLOCK_ALIGNMENT * _cdiv(needed, _KERNEL_BLOCK_ALIGNMENT)
    block = max(block_flag, needed)
    trail.note(
        "attention block size for a hybrid linear model",
        f"{align} × cdiv(state {state_bytes:,} B, {align} × {token.per_layer:,} B/token)"
        + (
            f" (alignment lcm'd with the checkpoint alignment {mamba.checkpoint_alignment})"
            if mamba.mode == "align"
            else ""
        )
        + "; the state page is padded to the attention page (assumes FlashAttention's 16-token kernel alignment)",
        block,
        "engine.hybrid-block-size",
    )
    return block


def _kinds_of_layers(
    arch: Architecture,
    hma: bool,
    layout: _Parallel,
    block: int,
    token: _TokenBytes,
    full_token: _TokenBytes,
    state_blocks: int,
) -> list[tuple[_Group, int]]:
    """Each kind of layer with its per-rank count, and its count over all stages."""
    as_full = _stores_bounded_as_full(arch, hma)
    sliding = 0 if as_full else arch.sliding_window_layers
    chunked = 0 if as_full else arch.chunked_local_layers
    linear = arch.linear_attention_layers
    full = arch.num_layers - linear - sliding - chunked

    def group(kind: _Kind, count: int, per_layer: int, **extra: object) -> tuple[_Group, int]:
        layers = layout.per_stage(count)
        return _Group.model_validate(
            {
                "kind": kind,
                "layers_per_rank": layers,
                "token_bytes": per_layer,
                "block": block,
                "page_bytes": block * per_layer,
                **extra,
            }
        ), count

    kinds: list[tuple[_Group, int]] = []
    if full:
        mixed: tuple[tuple[int, int, int], ...] = ()
        if as_full and full_token is not token:  # the sliding layers stored as full keep their own pages
            sliding_layers = arch.num_layers - arch.full_attention_layers
            mixed = (
                (layout.per_stage(sliding_layers), sliding_layers, token.per_layer),
                (layout.per_stage(arch.full_attention_layers), arch.full_attention_layers, full_token.per_layer),
            )
        kinds.append(group("mla" if token.mla else "full_attention", full, full_token.per_layer, mixed=mixed))
    if sliding:
        kinds.append(group("sliding_window", sliding, token.per_layer, window=arch.sliding_window))
    if chunked:
        kinds.append(group("chunked_local", chunked, token.per_layer, chunk=arch.attention_chunk_size))
    if linear:
        kinds.append(group("linear_attention", linear, token.per_layer, state_blocks=state_blocks))
    return kinds


def _unified_pages(kinds: list[tuple[_Group, int]], trail: _Trail) -> list[tuple[_Group, int]]:
    """With the hybrid manager on, attention kinds whose pages differ share the largest page: a smaller page's
    block grows by the ratio when it divides the largest, else the page is padded (engine.attention-page-
    unification). Linear-attention state pages are already padded to the attention page."""
    pages = {g.page_bytes for g, _ in kinds if g.kind != "linear_attention" and not g.mixed}
    if len(pages) <= 1:
        return kinds
    largest = max(pages)
    unified: list[tuple[_Group, int]] = []
    for g, count in kinds:
        if g.page_bytes != largest and g.kind != "linear_attention":
            ratio, rest = divmod(largest, g.page_bytes)
            block = g.block * ratio if not rest else g.block
            g = g.model_copy(update={"block": block, "page_bytes": largest})
        unified.append((g, count))
    trail.note(
        "page unification",
        f"the largest page {largest:,} B; a smaller page's block × (largest page / its page) when that divides, "
        "else its page padded to the largest",
        ", ".join(f"{g.kind} block {g.block}" for g, _ in unified if g.kind != "linear_attention"),
        "engine.attention-page-unification",
    )
    return unified


def _group_size(counts: list[int]) -> tuple[int, str]:
    """Layers per KV cache group, as vLLM's planner picks it, and the rule that picked it."""
    if len(counts) == 1:
        return counts[0], "one kind of layer: one group holding every layer"
    if max(counts) < 1.5 * min(counts):
        return max(counts), "counts within 1.5×: group size = the largest count (padding layers)"
    return min(counts), "group size = the smallest layer count among kinds"


def _serve_batched_tokens(gpu: Gpu, version: Version, trail: _Trail) -> int:
    """`vllm serve`'s max_num_batched_tokens when none is given: by the GPU's memory (and name) and release."""
    tiers = trail.rule("engine.serve-batch-defaults").value_at(version)
    memory_gib = gpu.hbm_gib
    if tiers is not None and tiers.value == "three-tier" and memory_gib >= 160:
        batched, why = 16_384, f"{gpu.name}: {memory_gib:.0f} GiB ≥ 160 GiB"
    elif memory_gib >= 70 and "a100" not in gpu.name.lower():
        batched, why = 8_192, f"{gpu.name}: {memory_gib:.0f} GiB ≥ 70 GiB, not an A100"
    else:
        batched, why = 2_048, f"{gpu.name}: below 70 GiB or an A100"
    trail.note("max_num_batched_tokens (vllm serve default)", why, batched, "engine.serve-batch-defaults")
    return batched


def _in_flight_tokens(request: SizeOffloadRequest, model: _Model, layout: _Parallel, trail: _Trail) -> tuple[int, str]:
    """Tokens scheduled but not yet freed, which a sliding-window or chunked-local layer holds on top of its
    window; and how that count came about."""
    version = model.version
    batched = request.max_num_batched_tokens or _serve_batched_tokens(model.gpu, version, trail)
    bound = trail.rule("engine.bounded-attention-holding").value_at(version)
    if bound is None or bound.value == "max_num_batched_tokens":
        return batched, f"max_num_batched_tokens {batched:,}"
    runner = trail.rule("engine.max-in-flight-tokens").value_at(version)
    pp = layout.pp
    if pp == 1:
        batches, why = 2, "2 (async scheduling)"
    elif runner is not None and _runs_model_runner_v2(runner.value, model.arch):
        batches, why = pp + 1, f"PP + 1 = {pp + 1} (Model Runner V2, async scheduling)"
    else:
        batches, why = pp, f"PP = {pp} (the V1 model runner turns async scheduling off with PP)"
    return batches * batched, f"max_concurrent_batches {why} × max_num_batched_tokens {batched:,}"


def _runs_model_runner_v2(value: object, arch: Architecture) -> bool:
    """Whether the release's default model runner is V2 for this model: 'v2' for every model, or (a tuple of
    architectures) for a model that is neither hybrid nor MoE and for the listed architectures."""
    if not isinstance(value, tuple):
        return value == "v2"
    if arch.architecture is not None and arch.architecture in value:
        return True
    total, active = arch.params_total_b, arch.params_active_b
    # vLLM asks the model class whether it is MoE; fewer active than total parameters says the same.
    moe = total is not None and active is not None and active < total
    return not moe and not arch.linear_attention_layers


def _layer_specs(request: SizeOffloadRequest, model: _Model, layout: _Parallel, trail: _Trail) -> _LayerSpecs:
    """Step 1: per-layer bytes, the block size, the KV cache groups and the GPU block they share."""
    arch, version = model.arch, model.version
    token = _token_bytes(request, arch, layout.tp, trail)
    full_token = _full_attention_token_bytes(arch, layout.tp, token, trail)
    _fp8_on_triton_check(arch, model.gpu, version, token, trail)
    _fp8_on_diffkv_blackwell_check(arch, model.gpu, version, token, trail)
    block = _backend_block_size(request, model, token, trail)
    state_bytes = 0
    mamba = _NONE_LAYOUT
    if arch.linear_attention_layers:
        state_bytes = _linear_state_bytes(arch, layout.tp, version, trail)
        mamba = _mamba_layout(request, model, trail)
        block = _hybrid_block_size(block, token, state_bytes, mamba, trail)
    kinds = _kinds_of_layers(arch, model.hma, layout, block, token, full_token, mamba.state_blocks)
    kinds = _unified_pages(kinds, trail)
    group_size, group_rule = _group_size([g.layers_per_rank for g, _ in kinds])
    bounded = any(g.window is not None or g.chunk is not None for g, _ in kinds)
    in_flight, in_flight_formula = _in_flight_tokens(request, model, layout, trail) if bounded else (0, "")
    page = max(g.page_bytes for g, _ in kinds)
    mixed = kinds[0][0] if kinds[0][0].mixed else None
    if mixed is not None:  # one group whose block holds every layer's own page
        block_bytes = block * mixed.bytes_per_token_per_rank
        formula = f"block {block} × ({mixed.mixed_formula()}): one group of layers with different pages ({group_rule})"
    else:
        block_bytes = page * group_size
        formula = f"page {page:,} B (block {kinds[0][0].block} × {kinds[0][0].token_bytes:,} B) × group_size "
        formula += f"{group_size} ({group_rule})"
    specs = _LayerSpecs(
        token=token,
        kv_heads_per_rank=_reported_kv_heads(arch, layout.tp, token, full_token),
        block=block,
        state_bytes=state_bytes,
        in_flight=in_flight,
        in_flight_formula=in_flight_formula,
        kinds=tuple(kinds),
        group_size=group_size,
        groups=tuple((g, _cdiv(g.layers_per_rank, group_size)) for g, _ in kinds),
        page=page,
        block_bytes=block_bytes,
    )
    trail.note("GPU block bytes per rank", formula, specs.block_bytes, "engine.kv-cache-groups")
    return specs


@dataclass(frozen=True)
class _PerToken:
    """The layer kinds as the answer shows them, and the KV bytes per token of the full-context ones."""

    kinds: list[LayerKind]
    full_bytes_per_rank: int
    full_bytes_total: int


def _bounded_tokens(group: _Group, specs: _LayerSpecs, max_len: int) -> int | None:
    """Tokens a sliding-window or chunked-local layer holds at most; None for the full-context kinds."""
    if group.window is None and group.chunk is None:
        return None
    return group.blocks(max_len, specs.in_flight) * group.block


def _attention_kind(group: _Group, count: int, specs: _LayerSpecs, tp: int, max_len: int) -> LayerKind:
    bound = _bounded_tokens(group, specs, max_len)
    per_layer: int | None = group.token_bytes
    formula = f"{group.token_bytes:,} B × {group.layers_per_rank} layers"
    if group.mixed:
        per_layer = None  # the layers differ: the sliding ones stored as full keep their own geometry
        formula = group.mixed_formula()
    per_rank = group.bytes_per_token_per_rank
    if group.window:
        formula += f"; held tokens ≤ (cdiv(min(window−1 + in-flight {specs.in_flight}, max_len), block) + 1) × block"
    elif group.chunk:
        formula += f"; held tokens ≤ cdiv(min(chunk + in-flight {specs.in_flight}, max_len), block) × block"
    return LayerKind(
        kind=group.kind,
        layers=count,
        layers_per_rank=group.layers_per_rank,
        bytes_per_token_per_layer_per_rank=per_layer,
        bytes_per_token_per_rank=per_rank,
        bytes_per_token_total=group.bytes_per_token_total(count, tp),
        tokens_bounded_to=bound,
        block_size=group.block,
        formula=formula,
    )


def _layer_kinds(specs: _LayerSpecs, tp: int, max_len: int, trail: _Trail) -> _PerToken:
    kinds: list[LayerKind] = []
    for group, count in specs.kinds:
        if group.kind == "linear_attention":
            kinds.append(
                LayerKind(
                    kind="linear_attention",
                    layers=count,
                    layers_per_rank=group.layers_per_rank,
                    state_bytes_per_sequence_per_rank=specs.state_bytes,
                    formula="conv + recurrent state per sequence, padded to one attention page "
                    f"({specs.page:,} B) per layer; {group.state_blocks} state block(s) per request",
                )
            )
        else:
            kinds.append(_attention_kind(group, count, specs, tp, max_len))
    full = [k for k in kinds if k.bytes_per_token_per_rank is not None and k.tokens_bounded_to is None]
    per_token = _PerToken(
        kinds=kinds,
        full_bytes_per_rank=sum(k.bytes_per_token_per_rank or 0 for k in full),
        full_bytes_total=sum(k.bytes_per_token_total or 0 for k in full),
    )
    if any(k.tokens_bounded_to for k in kinds):
        trail.note(
            "sliding-window / chunked-local holding per request",
            f"sliding: cdiv(min(W − 1 + in-flight, len), block) + 1 blocks; chunked: cdiv(min(chunk + in-flight, "
            f"len), block) blocks; in-flight tokens {specs.in_flight:,} = {specs.in_flight_formula}",
            ", ".join(f"{k.kind} {k.tokens_bounded_to:,} tokens" for k in kinds if k.tokens_bounded_to),
            "engine.bounded-attention-holding",
        )
    trail.note(
        "KV bytes per token (full-context layers)",
        "per rank: bytes per layer × layers on the busiest stage; total: bytes per layer × all layers × TP",
        f"{per_token.full_bytes_per_rank:,} B/rank, {per_token.full_bytes_total:,} B total",
        "engine.full-attention-bytes",
    )
    return per_token


# ---------------------------------------------------------------------------- step 2: the GPU pool


@dataclass(frozen=True)
class _Budget:
    memory_gib: float
    utilization: float
    weights_gib: float
    budget_gib: float


@dataclass(frozen=True)
class _Pool:
    """The GPU KV pool of one rank and the sessions it holds."""

    num_blocks: int
    max_len: int
    max_blocks: int
    typical: int
    typical_blocks: int

    @property
    def live_max(self) -> float:
        return self.num_blocks / self.max_blocks

    @property
    def live_typical(self) -> float:
        return self.num_blocks / self.typical_blocks

    @property
    def whole_max(self) -> int:
        return self.num_blocks // self.max_blocks

    @property
    def whole_typical(self) -> int:
        return self.num_blocks // self.typical_blocks


@dataclass(frozen=True)
class Capacity:
    """Sessions of a given length that stay whole on the GPU pool and in the CPU tier: the formulas the answer's
    whole_sessions_* and warm_sessions_held figures come from, callable at any context length."""

    specs: _LayerSpecs
    num_gpu_blocks: int
    blocks_per_chunk: int = 1
    native: bool = True
    num_chunks: int = 0  # native: chunks of the CPU tier
    per_process_bytes: int = 0  # lmcache: bytes of one worker's share
    has_tier: bool = False

    def gpu_sessions(self, tokens: int) -> int:
        return self.num_gpu_blocks // self.specs.blocks_per_session(tokens)

    def tier_sessions(self, tokens: int) -> int | None:
        """Whole sessions the CPU tier holds; None without a tier."""
        if not self.has_tier:
            return None
        blocks = self.specs.blocks_per_session(tokens)
        if self.native:
            return self.num_chunks // _cdiv(blocks, self.blocks_per_chunk)
        return self.per_process_bytes // (blocks * self.specs.block_bytes)


@dataclass(frozen=True)
class SizingFigures:
    """Per GPU and per node, where the memory goes, as the answer computed it (GiB), and the capacity."""

    gpu_memory_gib: float
    gpu_memory_utilization: float
    weights_gib: float
    activation_reserve_gib: float
    kv_budget_gib: float
    kv_pool_gib: float  # num_gpu_blocks whole blocks: at most the budget
    host_ram_gib: float | None
    host_reserved_gib: float | None
    tier_per_node_gib: float | None
    capacity: Capacity


def _gpu_memory_utilization(request: SizeOffloadRequest, version: Version, trail: _Trail) -> tuple[float, str]:
    """The fraction of GPU memory vLLM may use: as given, or the release's default (flag.gpu-memory-utilization)."""
    setting = trail.use("flag.gpu-memory-utilization")
    if request.gpu_memory_utilization is not None:
        return request.gpu_memory_utilization, "given"
    assert isinstance(setting, Setting)
    default = ranged_at(setting.defaults, version)
    value = None if default is None else default.value
    if value is None:
        # From 0.34.0 the default is None, resolved by the sizing mode (engine.gpu-kv-budget): 1.0 with the
        # extensible KV cache, 0.92 without it (LMCacheMPConnector, the lmcache backend's connector, turns it off).
        resolved = trail.rule("engine.gpu-kv-budget").value_at(version)
        pair = resolved.value if resolved is not None else None
        if isinstance(pair, tuple) and len(pair) == 2:
            if request.offload_backend == "lmcache":
                return float(pair[1]), f"vLLM {version}'s default without the extensible KV cache (LMCacheMPConnector)"
            return float(pair[0]), f"vLLM {version}'s default with the extensible KV cache (sized from measured memory)"
    if not isinstance(value, int | float) or isinstance(value, bool):  # pragma: no cover - the knowledge tests
        raise LookupError(f"flag.gpu-memory-utilization has no numeric default for {version}")
    return float(value), f"vLLM {version}'s default"


def _gpu_budget(
    request: SizeOffloadRequest, arch: Architecture, gpu: Gpu, world: int, version: Version, trail: _Trail
) -> _Budget:
    """The bytes left for the KV cache on one rank: the usable memory less weights and the reserve."""
    utilization, utilization_basis = _gpu_memory_utilization(request, version, trail)
    memory_gib = request.gpu_memory_gib or gpu.hbm_gib
    if request.weights_gib_per_gpu is not None:
        weights_gib = request.weights_gib_per_gpu
        weights_basis = "given"
    elif arch.checkpoint_bytes is not None:
        weights_gib = arch.checkpoint_bytes / world / GIB
        weights_basis = (
            f"the checkpoint's {arch.checkpoint_bytes:,} B (safetensors index total_size, in the served dtype) / "
            f"(TP×PP {world}) (an ESTIMATE of the split: a few replicated tensors are left out)"
        )
    elif arch.params_total_b is not None:
        weights_gib = arch.params_total_b * 1e9 * WEIGHT_BYTES[arch.weights_dtype] / world / GIB
        weights_basis = (
            f"weights an ESTIMATE: {arch.params_total_b:g}B params × "
            f"{WEIGHT_BYTES[arch.weights_dtype]:g} B ({arch.weights_dtype}) / (TP×PP {world}); "
            "weights_gib_per_gpu gives the measured figure"
        )
    else:
        raise AdviceError(
            "weights_gib_per_gpu", "the model gives no parameter count; give weights_gib_per_gpu or params_total_b"
        )
    budget_gib = memory_gib * utilization - weights_gib - request.activation_reserve_gib
    trail.note(
        "GPU KV budget per rank",
        f"{memory_gib:.2f} GiB × {utilization} ({utilization_basis}) − weights {weights_gib:.2f} GiB ({weights_basis}) "
        f"− activation/CUDA-graph reserve {request.activation_reserve_gib:g} GiB (the reserve an ESTIMATE: vLLM "
        "measures it at start-up)",
        f"{budget_gib:.2f} GiB",
        "engine.gpu-kv-budget",
    )
    return _Budget(memory_gib=memory_gib, utilization=utilization, weights_gib=weights_gib, budget_gib=budget_gib)


def _gpu_pool(
    request: SizeOffloadRequest, version: Version, specs: _LayerSpecs, budget: _Budget, max_len: int, trail: _Trail
) -> _Pool:
    """Step 2: blocks in the pool, blocks a session needs, and whether one max_model_len request fits."""
    budget_gib = budget.budget_gib
    num_blocks = max(0, int(budget_gib * GIB) // specs.block_bytes) if budget_gib > 0 else 0
    if budget_gib <= 0:
        trail.warn(
            f"The weights ({budget.weights_gib:.1f} GiB per GPU) and the reserve do not fit in "
            f"{budget.utilization:.0%} of {budget.memory_gib:.1f} GiB: raise TP/PP, quantize, or raise "
            "gpu_memory_utilization."
        )
    trail.note("num_gpu_blocks", "floor(budget bytes / GPU block bytes)", num_blocks, "engine.num-gpu-blocks")
    typical = min(request.typical_context_tokens, max_len)
    if request.typical_context_tokens > max_len:
        trail.warn(
            f"typical_context_tokens {request.typical_context_tokens:,} is above max_model_len {max_len:,}: no "
            f"request can be that long, so the typical figures are for {max_len:,} tokens."
        )
    pool = _Pool(
        num_blocks=num_blocks,
        max_len=max_len,
        max_blocks=specs.blocks_per_session(max_len),
        typical=typical,
        typical_blocks=specs.blocks_per_session(typical),
    )
    trail.note(
        "live sessions",
        f"num_gpu_blocks / Σ groups' blocks per request ({pool.max_blocks:,} at max_model_len, "
        f"{pool.typical_blocks:,} at {typical:,} tokens)",
        f"{pool.live_max:.2f} / {pool.live_typical:.1f}",
        "engine.max-concurrency",
    )
    if num_blocks:
        _start_check(version, specs, pool, trail)
    if request.live_sessions is not None and request.live_sessions > pool.live_typical:
        trail.warn(
            f"{request.live_sessions} live sessions at {typical:,} tokens need "
            f"{request.live_sessions * pool.typical_blocks:,} "
            f"GPU blocks; the pool has {num_blocks:,} ({pool.whole_typical:,} whole sessions)."
        )
    return pool


def _longest_fitting_request(specs: _LayerSpecs, usable_blocks: int, max_len: int) -> int:
    """The longest request whose blocks fit ``usable_blocks`` (0 when not even one token does)."""
    low, high = 0, max_len
    while low < high:
        mid = (low + high + 1) // 2
        if specs.blocks_per_session(mid) <= usable_blocks:
            low = mid
        else:
            high = mid - 1
    return low


def _start_check(version: Version, specs: _LayerSpecs, pool: _Pool, trail: _Trail) -> None:
    """vLLM refuses to start unless one max_model_len request fits the blocks it can hand out."""
    found = trail.rule("engine.null-block").value_at(version)
    held_back = int(found.value) if found is not None and isinstance(found.value, int) else 0
    usable = pool.num_blocks - held_back
    if pool.max_blocks <= usable:
        return
    null_block = f", {held_back} of them the null block it never hands out," if held_back else ""
    fits = _longest_fitting_request(specs, usable, pool.max_len)
    shorter = f"lower max_model_len to at most {fits:,} tokens" if fits else "lower max_model_len"
    trail.warn(
        f"ERROR: vLLM {version} will refuse to start: one request at max_model_len {pool.max_len:,} needs "
        f"{pool.max_blocks:,} blocks and the GPU pool has {pool.num_blocks:,}{null_block} so {usable:,} are "
        "usable. Give the KV cache more GPU memory (raise gpu_memory_utilization, add GPUs to TP/PP, quantize "
        f"the weights) or {shorter}."
    )


# ---------------------------------------------------------------------------- step 3: the CPU tier


@dataclass(frozen=True)
class _Chunks:
    """How the native spec cuts the CPU tier: GPU blocks per chunk and the bytes of one chunk."""

    blocks_per_chunk: int
    replicated: bool
    copies: int
    bytes: int


@dataclass(frozen=True)
class _TierSize:
    size_gib: float | None
    basis: str
    usable_host_gib: float | None
    reserved_gib: float | None
    engines_on_node: int


def _chunks(
    request: SizeOffloadRequest,
    knowledge: Knowledge,
    version: Version,
    specs: _LayerSpecs,
    layout: _Parallel,
    trail: _Trail,
) -> _Chunks:
    blocks_per_chunk = 1
    if request.offload_block_size is not None:
        if len(specs.group_blocks) > 1:
            raise AdviceError(
                "offload_block_size",
                f"this model's KV cache groups have blocks of {' and '.join(map(str, specs.group_blocks))} tokens; "
                "how the native backend cuts a larger offloaded block across them is not modelled: leave it unset",
            )
        if request.offload_block_size % specs.block:
            raise AdviceError("offload_block_size", f"must be a multiple of the GPU block size ({specs.block} tokens)")
        blocks_per_chunk = request.offload_block_size // specs.block
    replicated = (
        request.offload_backend == "native"
        and specs.token.mla
        and len(specs.groups) == 1
        and layout.tp > 1
        and layout.pp == 1
        and layout.single_node
        and version >= _feature_since(knowledge, "feature.offload-mla-replicated-layout")
    )
    copies = 1 if replicated else layout.world
    chunk_bytes = specs.block_bytes * copies * blocks_per_chunk
    if version >= _feature_since(knowledge, "feature.offload-chunk-page-alignment"):
        trail.use("feature.offload-chunk-page-alignment")
        chunk_bytes = _cdiv(chunk_bytes, 4096) * 4096
    trail.note(
        "offloaded chunk bytes",
        f"GPU block bytes {specs.block_bytes:,} × copies {copies} ("
        + ("one shared copy: pure-MLA, TP-only, one node" if replicated else "one per TP×PP worker")
        + f") × blocks_per_chunk {blocks_per_chunk}",
        chunk_bytes,
        "engine.offload-chunk-bytes",
    )
    return _Chunks(blocks_per_chunk=blocks_per_chunk, replicated=replicated, copies=copies, bytes=chunk_bytes)


def _tier_size(request: SizeOffloadRequest, layout: _Parallel, session_chunks: int, chunk_bytes: int) -> _TierSize:
    """The tier's total GiB: as given, from LMCache's per-process figure, from warm sessions or from host RAM."""
    world = layout.world
    engines_on_node = max(1, min(layout.dp, request.gpus_per_node // world)) if layout.single_node else 1
    usable_host = None
    reserved_gib = request.host_ram_reserved_gib
    if request.host_ram_gib is not None:
        if reserved_gib is None:
            reserved_gib = max(DEFAULT_HOST_RESERVE_GIB, request.host_ram_gib * DEFAULT_HOST_RESERVE_FRACTION)
        usable_host = request.host_ram_gib - reserved_gib
    size_gib: float | None = request.kv_offloading_size_gib
    size_basis = "given"
    if size_gib is None and request.lmcache_max_local_cpu_size_gib is not None:
        size_gib, size_basis = request.lmcache_max_local_cpu_size_gib * world, "LMCACHE_MAX_LOCAL_CPU_SIZE × TP × PP"
    if size_gib is None and request.warm_sessions:
        size_gib = float(math.ceil(request.warm_sessions * session_chunks * chunk_bytes / GIB))
        size_basis = f"{request.warm_sessions} warm sessions × {session_chunks} chunks × {chunk_bytes:,} B, rounded up"
    if size_gib is None and usable_host is not None and usable_host > 0:
        # Each engine on the node keeps its own tier; an engine spanning nodes keeps a share on each.
        per_engine = usable_host / engines_on_node if layout.single_node else usable_host * world / layout.gpus_on_node
        size_gib = float(math.floor(per_engine))
        size_basis = (
            f"(host RAM {request.host_ram_gib:g} − reserved "
            f"{reserved_gib:g}) GiB / {engines_on_node} engine(s) on the node"
        )
    return _TierSize(
        size_gib=size_gib,
        basis=size_basis,
        usable_host_gib=usable_host,
        reserved_gib=reserved_gib,
        engines_on_node=engines_on_node,
    )


def _consistency_rule(
    request: SizeOffloadRequest, knowledge: Knowledge, version: Version, per_process: float, trail: _Trail
) -> str:
    """How --kv-offloading-size reaches the backend in this release (and a warning where it does not)."""
    if request.offload_backend != "lmcache":
        return (
            "--kv-offloading-size is the total for one engine: native writes it as cpu_bytes_to_use = size × 2^30 "
            "and splits it over the TP × PP workers"
        )
    mp_from = _feature_since(knowledge, "feature.lmcache-backend-selects-mp")
    if version >= mp_from:
        rule = (
            f"From {mp_from} the lmcache backend selects LMCacheMPConnector and does not pass "
            "--kv-offloading-size on: size the LMCache server (--l1-size-gb) instead; the figures here are "
            "what it must hold."
        )
        trail.warn(rule)
        return rule
    return (
        f"vLLM passes --kv-offloading-size / (TP × PP) = {per_process:g} GiB to each LMCache worker as "
        "lmcache.max_local_cpu_size, overriding LMCACHE_MAX_LOCAL_CPU_SIZE; set one or the other, "
        "consistently."
    )


def _release_warnings(
    request: SizeOffloadRequest, version: Version, size_flag: Gated, bytes_key: Gated, num_chunks: int, trail: _Trail
) -> None:
    if request.offload_backend == "native" and bytes_key.status_at(version) == "not_yet":
        trail.warn(
            f"In {version} the native CPU spec is sized by num_cpu_blocks and the --kv-offloading-size shorthand "
            f"cannot start it; pass num_cpu_blocks = {num_chunks:,} in --kv-transfer-config instead."
        )
    if size_flag.status_at(version) == "not_yet":
        trail.warn(f"--kv-offloading-size does not exist in {version}; configure the connector by hand.")


def _offload_start_checks(
    request: SizeOffloadRequest, knowledge: Knowledge, version: Version, specs: _LayerSpecs, trail: _Trail
) -> None:
    """What stops vLLM from starting with the CPU tier asked for: each an ERROR warning that names the fix."""
    connector = _offload_connector(request, knowledge, version)
    _shorthand_leaves_hma_on(request, knowledge, version, connector, trail)
    _hybrid_needs_prefix_caching(request, version, connector, specs, trail)
    _chunked_local_unsupported(version, connector, specs, trail)


def _refuses_in(trail: _Trail, rule_id: str, version: Version) -> bool:
    """Whether the release refuses what the rule describes (its value there is true; null: not recorded)."""
    refuses = trail.rule(rule_id).value_at(version)
    return refuses is not None and refuses.value is True


def _chunked_local_unsupported(version: Version, connector: Connector, specs: _LayerSpecs, trail: _Trail) -> None:
    """OffloadingConnector from 0.21.0 to 0.27.x takes no chunked-local KV cache group (its scheduler side asserts
    each group is full attention, sliding window or Mamba), and vLLM does not start."""
    if connector.id != "connector.offloading" or not any(g.chunk is not None for g, _ in specs.kinds):
        return
    if not _refuses_in(trail, "engine.offload-chunked-local-unsupported", version):
        return
    trail.warn(
        f"ERROR: vLLM {version} will not start: {connector.name}'s scheduler side does not take chunked-local "
        "attention layers (with the hybrid KV cache manager on they are a KV cache group of their own, and its "
        "window sizing asserts on it). Pass --disable-hybrid-kv-cache-manager (the chunked layers are then stored "
        "as full attention, every token kept), or use vLLM 0.28.0 or later for the native CPU tier."
    )


def _shorthand_leaves_hma_on(
    request: SizeOffloadRequest, knowledge: Knowledge, version: Version, connector: Connector, trail: _Trail
) -> None:
    """Up to 0.21.0 the --kv-offloading-backend shorthand leaves the hybrid KV cache manager on, and the connector
    factory then refuses a connector without HMA support (pitfall.hma-flag-missing-with-shorthand)."""
    pitfall = knowledge.by_id["pitfall.hma-flag-missing-with-shorthand"]
    assert isinstance(pitfall, Pitfall)
    shorthand = _entry(knowledge, "flag.kv-offloading-size").exists_in(version)
    if not shorthand or request.hybrid_kv_cache_manager is False or not in_range(pitfall.versions, version):
        return
    if connector.hma_at(version) != "no":
        return
    trail.use(pitfall.id)
    trail.warn(
        f"ERROR: vLLM {version} will not start with --kv-offloading-backend {request.offload_backend} unless "
        f"--disable-hybrid-kv-cache-manager is passed: the shorthand leaves the hybrid KV cache manager on and "
        f"{connector.name} has no HMA support in {version} ('does not support HMA but HMA is enabled'). Pass the "
        "flag (the figures here assume it), or upgrade."
    )


def _hybrid_needs_prefix_caching(
    request: SizeOffloadRequest, version: Version, connector: Connector, specs: _LayerSpecs, trail: _Trail
) -> None:
    """OffloadingConnector refuses a hybrid linear-attention model with prefix caching off (its Mamba blocks
    are then max_model_len tokens and the offloaded blocks share no hash size), and vLLM does not start."""
    if connector.id != "connector.offloading" or not any(g.kind == "linear_attention" for g, _ in specs.kinds):
        return
    if _prefix_caching(request, version, trail) is not False:
        return
    if not _refuses_in(trail, "engine.offload-hybrid-needs-prefix-caching", version):
        return
    trail.warn(
        f"ERROR: vLLM {version} will not start: {connector.name} refuses a model with linear-attention layers "
        "when prefix caching is off (their state blocks are then max_model_len tokens and the offloaded blocks "
        "cannot be hashed alike: 'need --enable-prefix-caching to align block sizes'). Leave prefix caching on "
        "(drop --no-enable-prefix-caching), or serve this model without the native CPU tier."
    )


def _engines_per_node(layout: _Parallel, size: _TierSize) -> float:
    """The engines whose tiers one node holds: the data-parallel engines on it, or the share of one spanning nodes."""
    return size.engines_on_node if layout.single_node else layout.gpus_on_node / layout.world


def _fit_warnings(
    request: SizeOffloadRequest, layout: _Parallel, size: _TierSize, tier: OffloadTier, pool: _Pool, trail: _Trail
) -> float | None:
    """Warnings on what the tier holds and where it fits; the host RAM it leaves per node."""
    world = layout.world
    warm_held = tier.warm_sessions_held
    if request.warm_sessions and warm_held < request.warm_sessions:
        trail.warn(
            f"The tier holds {warm_held:,} warm sessions of {pool.typical:,} tokens, fewer than the "
            f"{request.warm_sessions:,} asked for."
        )
    host_left = None
    if request.host_ram_gib is not None:
        node_share = tier.host_gib_per_node
        host_left = request.host_ram_gib - node_share
        if size.reserved_gib is not None and host_left < size.reserved_gib:
            trail.warn(
                f"The CPU tier takes {node_share:g} GiB per node and leaves {host_left:.1f} GiB of "
                f"{request.host_ram_gib:g} GiB, below the {size.reserved_gib:g} GiB reserve: it does "
                "not fit; shrink it."
            )
    # A per-rank figure passed as the total: the classic LMCache → native mix-up.
    given = request.kv_offloading_size_gib
    if world > 1 and given is not None:
        same = (
            request.lmcache_max_local_cpu_size_gib is not None
            and abs(request.lmcache_max_local_cpu_size_gib - given) < 1e-9
        )
        usable = size.usable_host_gib
        tiny = warm_held < 1 and usable is not None and given * world <= usable
        if same or tiny:
            trail.warn(
                f"--kv-offloading-size {given:g} looks like a per-rank figure: it is the "
                f"TOTAL for all {world} workers (each gets about {given / world:g} GiB). "
                f"For {given:g} GiB per rank pass "
                f"{given * world:g}."
            )
    return host_left


@dataclass(frozen=True)
class _CpuTier:
    offload: OffloadTier | None
    host_left_gib: float | None
    reserved_gib: float | None = None
    capacity: Capacity | None = None


def _cpu_tier(
    request: SizeOffloadRequest,
    knowledge: Knowledge,
    version: Version,
    specs: _LayerSpecs,
    layout: _Parallel,
    pool: _Pool,
    trail: _Trail,
) -> _CpuTier:
    """Step 3: the CPU tier as each backend wants it, the chunks it makes and the warm sessions it keeps."""
    size_flag = _entry(knowledge, "flag.kv-offloading-size")
    bytes_key = _entry(knowledge, "spec.cpu-bytes-to-use")
    lm_size = _entry(knowledge, "lmcache.max_local_cpu_size")
    for e in (size_flag, bytes_key, lm_size):
        trail.use(e.id)
    chunks = _chunks(request, knowledge, version, specs, layout, trail)
    session_chunks = _cdiv(pool.typical_blocks, chunks.blocks_per_chunk)
    size = _tier_size(request, layout, session_chunks, chunks.bytes)
    if size.size_gib is None or size.size_gib <= 0:
        trail.warn("No tier size: give kv_offloading_size_gib, warm_sessions or host_ram_gib to size the CPU tier.")
        return _CpuTier(offload=None, host_left_gib=None, reserved_gib=size.reserved_gib)
    size_gib = size.size_gib
    cpu_bytes = int(size_gib * GIB)
    native = request.offload_backend == "native"
    num_chunks = cpu_bytes // chunks.bytes if native else 0
    per_process = size_gib / layout.world
    capacity = Capacity(
        specs=specs,
        num_gpu_blocks=pool.num_blocks,
        blocks_per_chunk=chunks.blocks_per_chunk,
        native=native,
        num_chunks=num_chunks,
        per_process_bytes=int(per_process * GIB),
        has_tier=True,
    )
    warm_held = capacity.tier_sessions(pool.typical) or 0
    rule = _consistency_rule(request, knowledge, version, per_process, trail)
    _release_warnings(request, version, size_flag, bytes_key, num_chunks, trail)
    errors_before = sum(w.startswith("ERROR") for w in trail.warnings)
    _offload_start_checks(request, knowledge, version, specs, trail)
    refusals = [w for w in trail.warnings if w.startswith("ERROR")][errors_before:]
    offload = OffloadTier(
        vllm_refuses="vLLM will not start with it (see the ERROR warning)" if refusals else None,
        backend=request.offload_backend,
        kv_offloading_size_gib=size_gib,
        cpu_bytes_to_use=cpu_bytes,
        lmcache_max_local_cpu_size_gib=round(per_process, 3),
        host_gib_per_node=round(size_gib * _engines_per_node(layout, size), 3),
        size_basis=size.basis,
        replicated_mla_layout=chunks.replicated,
        chunk_bytes=chunks.bytes,
        num_chunks=num_chunks,
        warm_sessions_held=warm_held,
        consistency_rule=rule,
    )
    trail.note(
        "CPU tier",
        f"cpu_bytes_to_use = {size_gib:g} × 2^30; chunks = cpu_bytes_to_use // chunk bytes; warm sessions = "
        f"chunks // {session_chunks} chunks per {pool.typical:,}-token session; LMCache per process = size / (TP×PP)",
        f"{num_chunks:,} chunks, {warm_held:,} sessions",
        "engine.offload-cpu-tier",
    )
    host_left = _fit_warnings(request, layout, size, offload, pool, trail)
    return _CpuTier(offload=offload, host_left_gib=host_left, reserved_gib=size.reserved_gib, capacity=capacity)


# ---------------------------------------------------------------------------- step 4: load estimates


def _tier_loads(
    request: SizeOffloadRequest, knowledge: Knowledge, gpu: Gpu, rank_bytes: int, layout: _Parallel, trail: _Trail
) -> list[LoadEstimate]:
    """Seconds to bring one returning session back from each tier."""
    all_bytes = rank_bytes * layout.world
    link = gpu.host_link_practical_gb_s * 1e9
    loads = [
        LoadEstimate(
            tier="CPU DRAM",
            seconds=rank_bytes / link,
            formula=f"{rank_bytes:,} B per rank / {gpu.host_link_practical_gb_s:g} GB/s "
            f"({gpu.host_link}, ranks in parallel)",
        )
    ]
    drives = request.nvme_drives_per_node
    for drive in knowledge.hardware.nvme:
        nvme_rate = drive.practical_read_gb_s * 1e9 * drives
        disk_bytes = rank_bytes * layout.gpus_on_node
        trail.use(drive.id)
        if request.gds:
            seconds = max(disk_bytes / nvme_rate, rank_bytes / link)
            how = f"max({disk_bytes:,} B on the node / {drives} × {drive.practical_read_gb_s:g} GB/s, host link)"
        else:
            seconds = disk_bytes / nvme_rate + rank_bytes / link
            how = f"{disk_bytes:,} B / {drives} × {drive.practical_read_gb_s:g} GB/s + bounce over the host link"
        loads.append(
            LoadEstimate(tier=f"{_nvme_label(drive)}{' + GDS' if request.gds else ''}", seconds=seconds, formula=how)
        )
    loads.append(
        LoadEstimate(
            tier="remote",
            seconds=all_bytes / (request.remote_gb_s * 1e9) + rank_bytes / link,
            formula=f"{all_bytes:,} B / {request.remote_gb_s:g} GB/s network + host link "
            f"({request.remote_gb_s:g} GB/s an ASSUMED network rate; remote_gb_s sets it)",
        )
    )
    return loads


def _prefill_rate(request: SizeOffloadRequest, arch: Architecture, gpu: Gpu, tp: int) -> tuple[float | None, str]:
    """Tokens per second of prefill: as given, or estimated from the GPU's FLOPS."""
    if request.prefill_tokens_per_s is not None:
        return request.prefill_tokens_per_s, "given"
    flops = gpu.fp8_dense_tflops if request.kv_cache_dtype.startswith("fp8") or arch.weights_dtype == "fp8" else None
    flops = flops or gpu.bf16_dense_tflops
    if not (flops and arch.params_active_b):
        return None, "given"
    rate = flops * 1e12 * tp * request.mfu / (2 * arch.params_active_b * 1e9)
    basis = (
        f"the rate an ESTIMATE: {flops:g} TFLOPS × TP {tp} × MFU {request.mfu:g} / "
        f"(2 × {arch.params_active_b:g}B active params), attention FLOPs ignored, so long contexts prefill "
        "slower; prefill_tokens_per_s gives the measured rate"
    )
    return rate, basis


def _load_estimates(
    request: SizeOffloadRequest,
    knowledge: Knowledge,
    arch: Architecture,
    gpu: Gpu,
    specs: _LayerSpecs,
    layout: _Parallel,
    pool: _Pool,
    trail: _Trail,
) -> tuple[list[LoadEstimate], float | None]:
    """Step 4: load time per tier next to re-prefill, for one returning session."""
    reuse_tokens = max(1, int(pool.typical * request.prefix_reuse))
    rank_bytes = specs.blocks_per_session(reuse_tokens) * specs.block_bytes
    loads = _tier_loads(request, knowledge, gpu, rank_bytes, layout, trail)
    rate, rate_basis = _prefill_rate(request, arch, gpu, layout.tp)
    if rate:
        loads.append(
            LoadEstimate(
                tier="re-prefill",
                seconds=reuse_tokens / rate,
                formula=f"{reuse_tokens:,} tokens / {rate:,.0f} tokens/s ({rate_basis})",
            )
        )
    else:
        trail.warn(f"No prefill rate: {gpu.name} has no TFLOPS figure in the knowledge; give prefill_tokens_per_s.")
    return loads, rate


_SCOPE_WORDS = {"total_across_ranks": "total across the TP × PP ranks of one engine", "per_rank": "per rank"}


def _sglang(
    request: SizeOffloadRequest,
    knowledge: Knowledge,
    offload: OffloadTier | None,
    gpu_pool: int,
    world: int,
    trail: _Trail,
) -> SglangConversion:
    """SGLang's HiCache sizes (GB per rank, or a ratio of the device pool) as vLLM's total GiB, and back."""
    size_flag = trail.use("flag.kv-offloading-size")
    assert isinstance(size_flag, Setting)
    unit = f"{size_flag.unit}, {_SCOPE_WORDS.get(size_flag.scope or '', size_flag.scope or 'scope not recorded')}"
    figures = (
        offload is not None or request.sglang_hicache_size_gb is not None or request.sglang_hicache_ratio is not None
    )
    sglang = SglangConversion(
        kv_offloading_size_unit=unit,
        # No SGLang figure, nothing for the caveat to qualify.
        note="The SGLang side is REFERENCE ONLY (not checked against SGLang's code here): --hicache-size is GB "
        "(10^9 bytes) per rank, --hicache-ratio the host pool over a rank's device KV pool. The vLLM side is "
        f"from the knowledge: --kv-offloading-size is {unit}."
        if figures
        else None,
    )
    if offload is not None:
        host_per_rank = offload.cpu_bytes_to_use / world
        sglang.hicache_size_gb_per_rank = round(host_per_rank / 1e9, 2)
        sglang.hicache_ratio = round(host_per_rank / gpu_pool, 2) if gpu_pool else None
    if request.sglang_hicache_size_gb is not None:
        total_bytes = request.sglang_hicache_size_gb * 1e9 * world
        given = f"--hicache-size {request.sglang_hicache_size_gb:g} GB per rank × {world} ranks"
    elif request.sglang_hicache_ratio is not None:
        total_bytes = request.sglang_hicache_ratio * gpu_pool * world
        given = (
            f"--hicache-ratio {request.sglang_hicache_ratio:g} × the {gpu_pool / 1e9:,.2f} GB device KV pool of a "
            f"rank × {world} ranks"
        )
    else:
        return sglang
    sglang.from_sglang_total_gb = round(total_bytes / 1e9, 2)
    sglang.from_sglang_kv_offloading_size_gib = round(total_bytes / GIB, 2)
    sglang.from_sglang = (
        f"{given} = {_amount(total_bytes / 1e9)} GB = {_amount(total_bytes / GIB)} GiB: pass --kv-offloading-size "
        f"{sglang.from_sglang_kv_offloading_size_gib:g} (it takes {unit})"
    )
    return sglang


def _amount(value: float) -> str:
    """A size with thousands separators and at most two decimals: 1,600 or 1,490.12."""
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _benchmark(pool: _Pool, offload: OffloadTier | None, trail: _Trail) -> BenchmarkPlan | None:
    """A benchmark that pushes the working set past the GPU and into the tier."""
    typical, max_len = pool.typical, pool.max_len
    gpu_tokens = int(pool.live_typical) * typical
    if not gpu_tokens or typical >= max_len:
        return None
    cpu_tokens = offload.warm_sessions_held * typical if offload else None
    target = 2 * gpu_tokens
    if cpu_tokens is not None and cpu_tokens < target:
        trail.warn(
            f"The CPU tier ({cpu_tokens:,} tokens) is smaller than twice the GPU KV ({target:,} tokens): a "
            "benchmark cannot show the tier's benefit at the usual 2× working set."
        )
        target = cpu_tokens
    prefixes = max(1, target // typical)
    suffix = min(256, max_len - typical)
    command = (
        "vllm bench serve --dataset-name prefix_repetition "
        f"--prefix-repetition-prefix-len {typical} --prefix-repetition-suffix-len {suffix} "
        f"--prefix-repetition-num-prefixes {prefixes} --prefix-repetition-output-len 128 "
        f"--num-prompts {prefixes * 4}"
    )
    trail.rule("engine.bench-prefix-repetition")
    return BenchmarkPlan(
        gpu_kv_tokens=gpu_tokens,
        cpu_tier_tokens=cpu_tokens,
        unique_prefix_tokens=prefixes * typical,
        command=command,
        rule="unique prefixes ≈ 2 × GPU KV tokens and ≤ the CPU tier; each prefix is sent 4 times so later "
        "rounds must come back from the tier (flags: rule engine.bench-prefix-repetition)",
    )


# ---------------------------------------------------------------------------- the tool


def _check_request(request: SizeOffloadRequest) -> None:
    """What the fields cannot say one at a time: the inputs that exclude one another."""
    given = [x for x in (request.model, request.config_path, request.architecture) if x is not None]
    if len(given) != 1:
        raise AdviceError(
            "model",
            "give exactly one of model, config_path or architecture (`vllm-caching models` lists the models known)",
        )
    if request.sglang_hicache_size_gb is not None and request.sglang_hicache_ratio is not None:
        raise AdviceError(
            "sglang_hicache_ratio",
            "give sglang_hicache_size_gb or sglang_hicache_ratio, not both: SGLang sizes the host pool by one of them",
        )


def size_offload(request: SizeOffloadRequest, knowledge: Knowledge) -> SizeOffloadResult:
    _check_request(request)
    version, context = resolve_version(knowledge, request.version)
    trail = _Trail(knowledge)
    arch, model_label = _architecture(request, knowledge, version, trail)
    gpu = _find_gpu(knowledge, request.gpu)
    trail.use(gpu.id)
    layout = _parallel_layout(request, arch)
    max_len = _max_model_len(request, arch, trail)
    trail.use("flag.block-size")
    trail.use("flag.max-num-batched-tokens")
    hma = _hybrid_manager(request, knowledge, version, arch, trail)

    specs = _layer_specs(request, _Model(arch=arch, gpu=gpu, version=version, hma=hma), layout, trail)
    per_token = _layer_kinds(specs, layout.tp, max_len, trail)
    budget = _gpu_budget(request, arch, gpu, layout.world, version, trail)
    pool = _gpu_pool(request, version, specs, budget, max_len, trail)
    tier = _cpu_tier(request, knowledge, version, specs, layout, pool, trail)
    loads, rate = _load_estimates(request, knowledge, arch, gpu, specs, layout, pool, trail)
    sglang = _sglang(request, knowledge, tier.offload, pool.num_blocks * specs.block_bytes, layout.world, trail)
    benchmark = _benchmark(pool, tier.offload, trail)

    result = SizeOffloadResult(
        version_context=context,
        model=model_label,
        model_source=trail.source,
        kv_figures_basis=_kv_figures_basis(arch, gpu, layout, version, trail),
        gpu=gpu.name,
        tensor_parallel_size=layout.tp,
        pipeline_parallel_size=layout.pp,
        world_size=layout.world,
        hybrid_kv_cache_manager=hma,
        block_size=specs.block,
        kv_heads_per_rank=specs.kv_heads_per_rank,
        layer_kinds=per_token.kinds,
        kv_bytes_per_token_per_rank=per_token.full_bytes_per_rank,
        kv_bytes_per_token_total=per_token.full_bytes_total,
        gpu_block_bytes_per_rank=specs.block_bytes,
        gpu_budget_gib_per_rank=round(budget.budget_gib, 3),
        weights_gib_per_gpu=round(budget.weights_gib, 3),
        num_gpu_blocks=pool.num_blocks,
        max_model_len=max_len,
        live_sessions_at_max_model_len=round(pool.live_max, 3),
        live_sessions_at_typical_context=round(pool.live_typical, 3),
        whole_sessions_at_max_model_len=pool.whole_max,
        whole_sessions_at_typical_context=pool.whole_typical,
        typical_context_tokens=pool.typical,
        offload=tier.offload,
        host_ram_left_gib=None if tier.host_left_gib is None else round(tier.host_left_gib, 3),
        load_estimates=loads,
        prefill_tokens_per_s=None if rate is None else round(rate, 1),
        sglang=sglang,
        benchmark=benchmark,
        formulas=trail.formulas,
        warnings=trail.warnings,
        citations=trail.citations,
    )
    result._figures = _figures(request, budget, pool, specs, tier)
    return result


def _figures(
    request: SizeOffloadRequest, budget: _Budget, pool: _Pool, specs: _LayerSpecs, tier: _CpuTier
) -> SizingFigures:
    host_left, ram = tier.host_left_gib, request.host_ram_gib
    return SizingFigures(
        gpu_memory_gib=budget.memory_gib,
        gpu_memory_utilization=budget.utilization,
        weights_gib=budget.weights_gib,
        activation_reserve_gib=request.activation_reserve_gib,
        kv_budget_gib=budget.budget_gib,
        kv_pool_gib=pool.num_blocks * specs.block_bytes / GIB,
        host_ram_gib=ram,
        host_reserved_gib=tier.reserved_gib,
        # host_left is the RAM less the tier's share of the node (_fit_warnings)
        tier_per_node_gib=None
        if host_left is None or request.host_ram_gib is None
        else request.host_ram_gib - host_left,
        capacity=tier.capacity or Capacity(specs=specs, num_gpu_blocks=pool.num_blocks),
    )


# The cells of the recorded engine matrix (scripts/engine_oracle/oracle.py MATRIX_TP, MATRIX_GPUS; tests/
# test_figures_basis.py checks them against the golden files): a request outside them is of a recorded
# architecture, not itself a recorded cell.
_RECORDED_TP = (1, 2, 8)
_RECORDED_GPUS = ("gpu.h100-sxm", "gpu.b200", "gpu.a100-80gb-sxm")


def _kv_figures_basis(arch: Architecture, gpu: Gpu, layout: _Parallel, version: Version, trail: _Trail) -> str:
    """Whether the engine's own planner was run on this model class at this release (rule
    engine.recorded-architectures), or the figures are the generic reader's."""
    found = trail.knowledge.engine.rule("engine.recorded-architectures").value_at(version)
    recorded = found.value if found is not None and isinstance(found.value, tuple) else ()
    name = arch.architecture
    if name is not None and name in recorded:
        trail.rule("engine.recorded-architectures")
        basis = f"verified against the engine for {name} at {version}"
        if layout.tp not in _RECORDED_TP or gpu.id not in _RECORDED_GPUS or layout.pp > 1:
            basis += " (recorded at TP 1, 2 and 8 on H100, B200 and A100; this layout is not itself a recorded cell)"
        return basis
    which = f"{name} has no engine recording at {version}" if name is not None else "no model class is named"
    return (
        f"estimate from the generic reader ({which}); not modelled: any per-layer head size, KV-head count or "
        "state its model class gives layers beyond config.json's shared keys"
    )


def _nvme_label(drive: Nvme) -> str:
    return "NVMe " + ("gen5" if "Gen5" in drive.name else "gen4" if "Gen4" in drive.name else drive.id)


SPEC = ToolSpec(
    name="size_offload",
    title="Size the KV cache and its offload tiers",
    description=(
        "Sizes the GPU KV cache and the CPU tier with vLLM's arithmetic for the release (--kv-offloading-size, "
        "cpu_bytes_to_use, LMCACHE_MAX_LOCAL_CPU_SIZE), load time versus re-prefill and SGLang equivalents. Give "
        "exactly one of model, config_path, architecture."
    ),
    request=SizeOffloadRequest,
    result=SizeOffloadResult,
    run=size_offload,
)
