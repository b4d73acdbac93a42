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

Version-dependent facts (when cpu_bytes_to_use replaced num_cpu_blocks, when the lmcache
shorthand stopped passing the size, when MLA got a replicated CPU layout, HMA support of
OffloadingConnector) are read from knowledge entries by id; the code holds only formulas.
Estimates (activation reserve, MFU, link and drive rates) are inputs with stated defaults.
"""

from __future__ import annotations

import difflib
import math
from typing import Literal

from pydantic import BaseModel, Field

from ..knowledge import Connector, Gated, Gpu, Knowledge, ModelArch, Nvme, Sourced, model_key
from ..versions import Version
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
from .model_config import Architecture, from_knowledge, read_hf_config

GIB = 1 << 30
KVCacheDType = Literal["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"]
OffloadBackend = Literal["native", "lmcache"]
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
# Bytes per parameter of the released weights; mxfp4 packs 4-bit values with one 8-bit scale per
# 32 (4.25 bits). Only an estimate of the footprint: embeddings and unquantized layers differ.
_WEIGHT_BYTES = {"bfloat16": 2.0, "float16": 2.0, "fp8": 1.0, "mxfp4": 4.25 / 8}
# FlashAttention's kernel block alignment (MultipleOf(16)); MLA hybrids align to 128
# (vllm==0.33.0 vllm/platforms/interface.py:1066-1087).
_KERNEL_BLOCK_ALIGNMENT = 16
_MLA_KERNEL_BLOCK_ALIGNMENT = 128
# Pinned host memory cannot be swapped: keep at least this much of the node for everything else.
DEFAULT_HOST_RESERVE_GIB = 32.0
DEFAULT_HOST_RESERVE_FRACTION = 0.2

SRC_SPEC = "vllm==0.33.0 vllm/v1/kv_cache_interface.py"
SRC_PLAN = "vllm==0.33.0 vllm/v1/core/kv_cache_planning.py"


class SizeOffloadRequest(BaseModel):
    model: str | None = Field(
        default=None,
        max_length=200,
        description="A model in the knowledge: id, name, alias or Hugging Face repo, e.g. 'llama-3.1-70b', "
        "'Qwen/Qwen3-32B', 'deepseek-r1'. Give exactly one of model, config_path, architecture.",
    )
    config_path: str | None = Field(
        default=None, max_length=4096, description="Path to a local Hugging Face config.json (or its directory)."
    )
    architecture: Architecture | None = Field(default=None, description="The attention layout typed in.")
    version: str | None = Field(default=None, max_length=40, description="vLLM release; newest known if left out.")
    kv_cache_dtype: KVCacheDType = Field(default="auto", description="--kv-cache-dtype; auto = the model dtype")
    tensor_parallel_size: int = Field(default=1, ge=1, le=1024)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=1024)
    data_parallel_size: int = Field(default=1, ge=1, le=4096)
    gpu_count: Count | None = Field(default=None, ge=1, description="total GPUs; checked against TP × PP × DP")
    gpus_per_node: int = Field(default=8, ge=1, le=72)
    gpu: str = Field(default="gpu.h100-sxm", max_length=100, description="GPU id or name from hardware.yaml")
    gpu_memory_gib: GpuMemoryGiB | None = Field(
        default=None, gt=0, description="memory per GPU as the driver reports it; default: the vendor's GB figure"
    )
    gpu_memory_utilization: FiniteFloat = Field(default=0.9, gt=0, le=1)
    weights_gib_per_gpu: GpuMemoryGiB | None = Field(default=None, ge=0, description="measured weight memory per GPU")
    params_total_b: ParamsB | None = Field(default=None, description="overrides the model's parameter count")
    activation_reserve_gib: GpuMemoryGiB = Field(
        default=4.0,
        ge=0,
        description="ESTIMATE of what vLLM's profiling run takes besides weights on each GPU (activation peak, "
        "CUDA graphs, NCCL and allocator overhead). Read the real figure from vLLM's startup log.",
    )
    max_model_len: TokenCount | None = Field(
        default=None, ge=1, description="default: the model's max_position_embeddings"
    )
    max_num_batched_tokens: TokenCount = Field(
        default=8192,
        ge=1,
        description="bounds sliding-window and chunked-local holdings; 8192 = server default on H100",
    )
    block_size: int = Field(default=16, ge=1, le=4096, description="--block-size in tokens")
    hybrid_kv_cache_manager: bool | None = Field(
        default=None, description="None: on unless the offload connector lacks HMA support in that release"
    )
    typical_context_tokens: TokenCount = Field(default=8192, ge=1)
    live_sessions: Count | None = Field(default=None, ge=0, description="concurrent sessions you plan to serve")
    warm_sessions: Count | None = Field(default=None, ge=0, description="idle sessions the CPU tier should keep")
    prefix_reuse: FiniteFloat = Field(
        default=1.0, ge=0, le=1, description="share of a returning context found in cache"
    )
    offload_backend: OffloadBackend = "native"
    offload_block_size: TokenCount | None = Field(
        default=None, ge=1, description="offloaded chunk in tokens (block_size key)"
    )
    kv_offloading_size_gib: SizeGiB | None = Field(default=None, gt=0, description="the --kv-offloading-size you plan")
    lmcache_max_local_cpu_size_gib: SizeGiB | None = Field(default=None, gt=0, description="LMCACHE_MAX_LOCAL_CPU_SIZE")
    host_ram_gib: SizeGiB | None = Field(default=None, gt=0, description="RAM installed per node")
    host_ram_reserved_gib: SizeGiB | None = Field(
        default=None,
        ge=0,
        description="RAM kept for the OS, vLLM processes and page cache; default: the larger of 32 GiB and 20 % of "
        "host_ram_gib (pinned memory cannot be swapped, and review_deployment flags tiers above 80 % of RAM)",
    )
    nvme_drives_per_node: int = Field(default=1, ge=1, le=64)
    gds: bool = Field(default=False, description="GPUDirect Storage: NVMe reads skip the host bounce")
    remote_gb_s: FiniteFloat = Field(
        default=25.0, ge=0.001, le=100_000, description="network rate to a remote tier, GB/s (200 Gb/s)"
    )
    prefill_tokens_per_s: FiniteFloat | None = Field(
        default=None, ge=1, le=1e9, description="measured prefill rate per engine"
    )
    mfu: FiniteFloat = Field(default=0.4, ge=0.01, le=1, description="ESTIMATED model FLOPs utilisation during prefill")
    sglang_hicache_size_gb: FiniteFloat | None = Field(default=None, gt=0, le=1e7, description="convert SGLang → vLLM")
    sglang_hicache_ratio: FiniteFloat | None = Field(default=None, gt=0, le=1000, description="convert SGLang → vLLM")


class LayerKind(BaseModel):
    kind: Literal["full_attention", "sliding_window", "chunked_local", "mla", "linear_attention"]
    layers: int
    layers_per_rank: int = Field(description="on the busiest pipeline stage")
    bytes_per_token_per_layer_per_rank: int | None = None
    bytes_per_token_per_rank: int | None = Field(default=None, description="all layers of this kind on one rank")
    bytes_per_token_total: int | None = Field(default=None, description="summed over TP × PP ranks")
    tokens_bounded_to: int | None = Field(default=None, description="sliding/chunked: tokens held at most")
    state_bytes_per_sequence_per_rank: int | None = Field(default=None, description="linear attention: per layer")
    formula: str


class FormulaNote(BaseModel):
    name: str
    formula: str
    value: str
    source: str


class LoadEstimate(BaseModel):
    tier: str
    seconds: float
    formula: str


class OffloadTier(BaseModel):
    backend: OffloadBackend
    kv_offloading_size_gib: float = Field(description="--kv-offloading-size: GiB, total for one engine (all ranks)")
    cpu_bytes_to_use: int = Field(description="kv_connector_extra_config.cpu_bytes_to_use: bytes, total")
    lmcache_max_local_cpu_size_gib: float = Field(description="GiB per worker process = total / (TP × PP)")
    size_basis: str
    replicated_mla_layout: bool
    chunk_bytes: int
    num_chunks: int
    warm_sessions_held: int
    consistency_rule: str


class SglangConversion(BaseModel):
    hicache_size_gb_per_rank: float | None = None
    hicache_ratio: float | None = None
    from_sglang_kv_offloading_size_gib: float | None = None
    note: str


class BenchmarkPlan(BaseModel):
    gpu_kv_tokens: int
    cpu_tier_tokens: int | None
    unique_prefix_tokens: int
    command: str
    rule: str


class SizeOffloadResult(Result):
    version_context: VersionContext
    model: str
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
    live_sessions_at_max_model_len: float
    live_sessions_at_typical_context: float
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

    def summary(self) -> str:
        v = self.version_context
        lines = [
            f"{self.model} on {self.world_size}× {self.gpu}, vLLM {v.version}" + (" (assumed)" if v.assumed else ""),
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
                lines.append(
                    f"  {k.kind}: {k.layers} layers × {k.bytes_per_token_per_layer_per_rank:,} B/token/rank{bound}"
                )
        lines.append(
            f"GPU KV budget {self.gpu_budget_gib_per_rank:.1f} GiB/rank (weights {self.weights_gib_per_gpu:.1f} GiB) → "
            f"{self.num_gpu_blocks:,} blocks; live sessions {self.live_sessions_at_max_model_len:.2f} at "
            f"{self.max_model_len:,} tokens, {self.live_sessions_at_typical_context:.1f} at typical context"
        )
        if self.offload is not None:
            o = self.offload
            lines.append(
                f"CPU tier ({o.backend}): --kv-offloading-size {o.kv_offloading_size_gib:g} (GiB total) = "
                f"cpu_bytes_to_use {o.cpu_bytes_to_use:,}; LMCACHE_MAX_LOCAL_CPU_SIZE "
                f"{o.lmcache_max_local_cpu_size_gib:g} per process; holds {o.warm_sessions_held:,} warm sessions"
            )
        if self.host_ram_left_gib is not None:
            lines.append(f"host RAM left per node: {self.host_ram_left_gib:.1f} GiB")
        lines += [f"load {e.tier}: {e.seconds:.2f} s" for e in self.load_estimates]
        if self.sglang.hicache_size_gb_per_rank is not None:
            ratio = self.sglang.hicache_ratio
            lines.append(
                f"SGLang: --hicache-size {self.sglang.hicache_size_gb_per_rank:g} (per rank)"
                + (f" or --hicache-ratio {ratio:g}" if ratio is not None else "")
            )
        if self.benchmark is not None:
            lines.append(f"benchmark: {self.benchmark.command}")
        lines += [f"warning: {w}" for w in (*v.warnings, *self.warnings)]
        return "\n".join(lines)


# ---------------------------------------------------------------------------- lookups


def _find_model(knowledge: Knowledge, text: str) -> ModelArch:
    model = knowledge.find_model(text)
    if model is not None:
        return model
    close = difflib.get_close_matches(model_key(text), knowledge.model_spellings(), n=4, cutoff=0.5)
    suggestions = dict.fromkeys(m.id for c in close if (m := knowledge.find_model(c)) is not None)
    hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
    known = ", ".join(m.id.split(".", 1)[-1] for m in knowledge.models)
    raise AdviceError("model", f"no model called {text!r} in the knowledge.{hint} Known: {known}.")


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


# ---------------------------------------------------------------------------- arithmetic


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class _Group(BaseModel):
    """One kind of layer as vLLM groups it: page bytes per layer and blocks a session needs."""

    kind: Literal["full_attention", "sliding_window", "chunked_local", "mla", "linear_attention"]
    layers_per_rank: int
    page_bytes: int
    window: int | None = None
    chunk: int | None = None

    def blocks(self, tokens: int, block: int, in_flight: int) -> int:
        if self.kind == "linear_attention":
            return 1  # one state block per sequence (mamba_cache_mode 'none')
        if self.window is not None:
            return _cdiv(min(self.window - 1 + in_flight, tokens), block) + 1
        if self.chunk is not None:
            return _cdiv(min(self.chunk + in_flight, tokens), block)
        return _cdiv(tokens, block)


def _validate_parallel(arch: Architecture, tp: int) -> None:
    if arch.num_attention_heads % tp:
        raise AdviceError(
            "tensor_parallel_size",
            f"vLLM requires the attention heads ({arch.num_attention_heads}) to be divisible by TP ({tp}) "
            "(ModelConfig.verify_with_parallel_config); use a divisor of the head count",
        )
    if arch.attention == "mla":
        return
    kv = arch.num_kv_heads
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


def size_offload(request: SizeOffloadRequest, knowledge: Knowledge) -> SizeOffloadResult:
    given = [x for x in (request.model, request.config_path, request.architecture) if x is not None]
    if len(given) != 1:
        raise AdviceError("model", "give exactly one of model, config_path or architecture")
    version, context = resolve_version(knowledge, request.version)
    citations: list[Citation] = []
    warnings: list[str] = []
    formulas: list[FormulaNote] = []

    def use(entry_id: str) -> Sourced:
        entry = knowledge.by_id[entry_id]
        if not any(c.id == entry_id for c in citations):
            citations.append(cite(entry_id, entry, knowledge))
        return entry

    def note(name: str, formula: str, value: object, source: str) -> None:
        formulas.append(FormulaNote(name=name, formula=formula, value=str(value), source=source))

    if request.model is not None:
        entry = _find_model(knowledge, request.model)
        use(entry.id)
        arch = from_knowledge(entry)
        model_label = entry.name
    elif request.config_path is not None:
        arch = read_hf_config(request.config_path)
        model_label = arch.name
    else:
        assert request.architecture is not None
        arch = request.architecture
        model_label = arch.name
    if request.params_total_b is not None:
        arch = arch.model_copy(update={"params_total_b": request.params_total_b})
    gpu = _find_gpu(knowledge, request.gpu)
    use(gpu.id)

    tp, pp, dp = request.tensor_parallel_size, request.pipeline_parallel_size, request.data_parallel_size
    world = tp * pp
    if request.gpu_count is not None and request.gpu_count != world * dp:
        raise AdviceError("gpu_count", f"TP × PP × DP = {tp} × {pp} × {dp} = {world * dp}, not {request.gpu_count}")
    _validate_parallel(arch, tp)
    max_len = request.max_model_len or arch.max_position_embeddings
    if max_len is None:
        raise AdviceError("max_model_len", "the model gives no max_position_embeddings; set max_model_len")
    if arch.max_position_embeddings and max_len > arch.max_position_embeddings:
        warnings.append(
            f"max_model_len {max_len:,} exceeds the model's max_position_embeddings "
            f"({arch.max_position_embeddings:,}); vLLM refuses it unless told to allow it."
        )
    use("flag.block-size")
    use("flag.max-num-batched-tokens")

    # --- which connector, and whether the hybrid manager stays on
    offload_conn = _entry(knowledge, "connector.offloading")
    assert isinstance(offload_conn, Connector)
    use(offload_conn.id)
    hma = request.hybrid_kv_cache_manager
    if hma is None:
        hma = request.offload_backend != "native" or offload_conn.hma_at(version) not in (None, "no")
    has_bounded = arch.sliding_window_layers or arch.chunked_local_layers
    if not hma and arch.linear_attention_layers:
        warnings.append(
            "This model has linear-attention (Mamba-style) layers, which need the hybrid KV cache manager; with "
            f"it off (OffloadingConnector has no HMA support in {version}) vLLM cannot start. Upgrade or use "
            "another connector."
        )
    elif not hma and has_bounded:
        warnings.append(
            "The hybrid KV cache manager is off, so sliding-window and chunked-local layers are stored as full "
            "attention (every token kept): that costs GPU and CPU memory."
        )

    # --- bytes per token per layer and rank
    kv_dtype = arch.default_dtype if request.kv_cache_dtype == "auto" else request.kv_cache_dtype
    dtype_bytes = _DTYPE_BYTES[kv_dtype]
    use("flag.kv-cache-dtype")
    mla = arch.attention == "mla"
    kv_heads_rank = 1 if mla else max(1, arch.num_kv_heads // tp)
    head = arch.kv_head_size
    per_layer_token = (1 if mla else 2) * kv_heads_rank * head * dtype_bytes
    note(
        "kv heads per rank",
        "1 (MLA: one latent, replicated on every TP rank)" if mla else "max(1, num_kv_heads // TP)",
        kv_heads_rank,
        "vllm==0.33.0 vllm/config/model.py:1663-1683; model_executor/layers/linear.py:1066-1071",
    )
    note(
        "bytes per token per layer per rank",
        f"1 × 1 × (kv_lora_rank {arch.kv_lora_rank} + qk_rope_head_dim {arch.qk_rope_head_dim}) × {dtype_bytes} B"
        if mla
        else f"2 (K,V) × {kv_heads_rank} heads × {head} head_dim × {dtype_bytes} B ({kv_dtype})",
        per_layer_token,
        f"{SRC_SPEC}:586-601 (head_size_v = 0 for MLA: 743); vllm==0.11.0 vllm/v1/kv_cache_interface.py:64-66, 147-153",
    )

    def per_stage(count: int) -> int:
        return _cdiv(count, pp)

    sliding = arch.sliding_window_layers if hma else 0
    chunked = arch.chunked_local_layers if hma else 0
    full = arch.num_layers - arch.linear_attention_layers - sliding - chunked
    linear = arch.linear_attention_layers

    # --- hybrid Mamba/linear models: attention block grows until its page holds the state
    block = request.block_size
    state_bytes = 0
    if linear:
        s = arch.linear_attention
        assert s is not None
        state_dtype = _DTYPE_BYTES[arch.default_dtype]
        conv_dim = s.key_head_dim * s.num_key_heads * 2 + s.value_head_dim * s.num_value_heads
        conv = conv_dim // tp * (s.conv_kernel_dim - 1)
        temporal = s.num_value_heads // tp * s.value_head_dim * s.key_head_dim
        state_bytes = (conv + temporal) * state_dtype
        note(
            "linear-attention state per sequence per layer per rank",
            f"((2·{s.num_key_heads}·{s.key_head_dim} + {s.num_value_heads}·{s.value_head_dim}) / TP × "
            f"({s.conv_kernel_dim} − 1) + {s.num_value_heads} / TP × {s.value_head_dim} × {s.key_head_dim}) × "
            f"{state_dtype} B",
            state_bytes,
            "vllm==0.33.0 vllm/model_executor/layers/mamba/mamba_utils.py:98-110, 272-293",
        )
        align = _MLA_KERNEL_BLOCK_ALIGNMENT if mla else _KERNEL_BLOCK_ALIGNMENT
        align = max(align, request.block_size)
        needed = align * _cdiv(state_bytes, align * per_layer_token)
        needed = _KERNEL_BLOCK_ALIGNMENT * _cdiv(needed, _KERNEL_BLOCK_ALIGNMENT)
        if block < needed:
            block = needed
        note(
            "attention block size for a hybrid linear model",
            f"{align} × cdiv(state {state_bytes:,} B, {align} × {per_layer_token:,} B/token); the state page is "
            "padded to the attention page (assumes FlashAttention's 16-token kernel alignment)",
            block,
            "vllm==0.33.0 vllm/platforms/interface.py:1066-1125",
        )
    page = block * per_layer_token
    in_flight = request.max_num_batched_tokens * pp

    groups_by_kind: list[tuple[_Group, int]] = []
    if full:
        groups_by_kind.append(
            (_Group(kind="mla" if mla else "full_attention", layers_per_rank=per_stage(full), page_bytes=page), full)
        )
    if sliding:
        groups_by_kind.append(
            (
                _Group(
                    kind="sliding_window",
                    layers_per_rank=per_stage(sliding),
                    page_bytes=page,
                    window=arch.sliding_window,
                ),
                sliding,
            )
        )
    if chunked:
        groups_by_kind.append(
            (
                _Group(
                    kind="chunked_local",
                    layers_per_rank=per_stage(chunked),
                    page_bytes=page,
                    chunk=arch.attention_chunk_size,
                ),
                chunked,
            )
        )
    if linear:
        groups_by_kind.append(
            (_Group(kind="linear_attention", layers_per_rank=per_stage(linear), page_bytes=page), linear)
        )

    counts = [g.layers_per_rank for g, _ in groups_by_kind]
    if len(counts) == 1:
        group_size = counts[0]
        group_rule = "one kind of layer: one group holding every layer"
    else:
        group_size = min(counts)
        group_rule = "group size = the smallest layer count among kinds"
        if max(counts) < 1.5 * min(counts):
            group_size = max(counts)
            group_rule = "counts within 1.5×: group size = the largest count (padding layers)"
    groups = [(g, _cdiv(g.layers_per_rank, group_size)) for g, _ in groups_by_kind]
    block_bytes = page * group_size
    note(
        "GPU block bytes per rank",
        f"page {page:,} B (block {block} × {per_layer_token:,} B) × group_size {group_size} ({group_rule})",
        block_bytes,
        f"{SRC_PLAN}:521-533, 678-681 (0.22.0: vllm/v1/core/kv_cache_utils.py get_kv_cache_config_from_groups)",
    )

    def blocks_per_session(tokens: int) -> int:
        return sum(n * g.blocks(tokens, block, in_flight) for g, n in groups)

    # --- layer kinds, per token
    kinds: list[LayerKind] = []
    full_bytes_rank = 0
    full_bytes_total = 0
    for g, count in groups_by_kind:
        if g.kind == "linear_attention":
            kinds.append(
                LayerKind(
                    kind="linear_attention",
                    layers=count,
                    layers_per_rank=g.layers_per_rank,
                    state_bytes_per_sequence_per_rank=state_bytes,
                    formula=f"conv + recurrent state per sequence, padded to one attention page ({page:,} B) per layer",
                )
            )
            continue
        per_rank = per_layer_token * g.layers_per_rank
        bound = None
        if g.window is not None:
            bound = (_cdiv(min(g.window - 1 + in_flight, max_len), block) + 1) * block
        elif g.chunk is not None:
            bound = _cdiv(min(g.chunk + in_flight, max_len), block) * block
        else:
            full_bytes_rank += per_rank
            full_bytes_total += per_layer_token * count * tp
        kinds.append(
            LayerKind(
                kind=g.kind,
                layers=count,
                layers_per_rank=g.layers_per_rank,
                bytes_per_token_per_layer_per_rank=per_layer_token,
                bytes_per_token_per_rank=per_rank,
                bytes_per_token_total=per_layer_token * count * tp,
                tokens_bounded_to=bound,
                formula=(
                    f"{per_layer_token:,} B × {g.layers_per_rank} layers"
                    + (
                        f"; held tokens ≤ (cdiv(min(window−1 + batched {in_flight}, max_len), block) + 1) × block"
                        if g.window
                        else f"; held tokens ≤ cdiv(min(chunk + batched {in_flight}, max_len), block) × block"
                        if g.chunk
                        else ""
                    )
                ),
            )
        )
    if any(k.tokens_bounded_to for k in kinds):
        note(
            "sliding-window / chunked-local holding per request",
            "sliding: cdiv(min(W − 1 + max_num_batched_tokens × PP, len), block) + 1 blocks; "
            "chunked: cdiv(min(chunk + max_num_batched_tokens × PP, len), block) blocks",
            ", ".join(f"{k.kind} {k.tokens_bounded_to:,} tokens" for k in kinds if k.tokens_bounded_to),
            f"{SRC_SPEC}:864-888, 918-955; vllm==0.11.0 vllm/v1/kv_cache_interface.py:177-215",
        )
    note(
        "KV bytes per token (full-context layers)",
        "per rank: bytes per layer × layers on the busiest stage; total: bytes per layer × all layers × TP",
        f"{full_bytes_rank:,} B/rank, {full_bytes_total:,} B total",
        SRC_SPEC,
    )

    # --- GPU budget
    use("flag.gpu-memory-utilization")
    memory_gib = request.gpu_memory_gib or gpu.hbm_gb * 1e9 / GIB
    if request.weights_gib_per_gpu is not None:
        weights_gib = request.weights_gib_per_gpu
        weights_basis = "given"
    elif arch.params_total_b is not None:
        weights_gib = arch.params_total_b * 1e9 * _WEIGHT_BYTES[arch.weights_dtype] / world / GIB
        weights_basis = (
            f"ESTIMATE {arch.params_total_b:g}B params × "
            f"{_WEIGHT_BYTES[arch.weights_dtype]:g} B ({arch.weights_dtype}) / (TP×PP {world})"
        )
    else:
        raise AdviceError(
            "weights_gib_per_gpu", "the model gives no parameter count; give weights_gib_per_gpu or params_total_b"
        )
    budget_gib = memory_gib * request.gpu_memory_utilization - weights_gib - request.activation_reserve_gib
    note(
        "GPU KV budget per rank",
        f"{memory_gib:.2f} GiB × {request.gpu_memory_utilization} − weights {weights_gib:.2f} GiB ({weights_basis}) "
        f"− activation/CUDA-graph reserve {request.activation_reserve_gib:g} GiB (an ESTIMATE; vLLM measures it)",
        f"{budget_gib:.2f} GiB",
        "vllm==0.33.0 vllm/v1/worker/gpu_worker.py (determine_available_memory)",
    )
    num_blocks = max(0, int(budget_gib * GIB) // block_bytes) if budget_gib > 0 else 0
    if budget_gib <= 0:
        warnings.append(
            f"The weights ({weights_gib:.1f} GiB per GPU) and the reserve do not fit in "
            f"{request.gpu_memory_utilization:.0%} of {memory_gib:.1f} GiB: raise TP/PP, quantize, or raise "
            "gpu_memory_utilization."
        )
    note("num_gpu_blocks", "floor(budget bytes / GPU block bytes)", num_blocks, f"{SRC_PLAN}:681")
    max_blocks = blocks_per_session(max_len)
    typical = min(request.typical_context_tokens, max_len)
    typical_blocks = blocks_per_session(typical)
    live_max = num_blocks / max_blocks
    live_typical = num_blocks / typical_blocks
    note(
        "live sessions",
        f"num_gpu_blocks / Σ groups' blocks per request ({max_blocks:,} at max_model_len, {typical_blocks:,} at "
        f"{typical:,} tokens)",
        f"{live_max:.2f} / {live_typical:.1f}",
        "vllm==0.33.0 vllm/v1/core/kv_cache_utils.py:1061-1093",
    )
    if num_blocks and live_max < 1:
        warnings.append(
            f"One request at max_model_len {max_len:,} needs {max_blocks:,} blocks but the GPU pool has "
            f"{num_blocks:,}: vLLM will refuse to start. Lower max_model_len or add GPUs."
        )
    if request.live_sessions is not None and request.live_sessions > live_typical:
        warnings.append(
            f"{request.live_sessions} live sessions at {typical:,} tokens need "
            f"{request.live_sessions * typical_blocks:,} "
            f"GPU blocks; the pool has {num_blocks:,} (about {live_typical:.0f} sessions)."
        )

    # --- the CPU tier
    size_flag = _entry(knowledge, "flag.kv-offloading-size")
    bytes_key = _entry(knowledge, "spec.cpu-bytes-to-use")
    lm_size = _entry(knowledge, "lmcache.max_local_cpu_size")
    for e in (size_flag, bytes_key, lm_size):
        use(e.id)
    blocks_per_chunk = 1
    if request.offload_block_size is not None:
        if request.offload_block_size % block:
            raise AdviceError("offload_block_size", f"must be a multiple of the GPU block size ({block} tokens)")
        blocks_per_chunk = request.offload_block_size // block
    gpus_on_node = min(world, request.gpus_per_node)
    single_node = world <= request.gpus_per_node
    replicated_from = _feature_since(knowledge, "feature.offload-mla-replicated-layout")
    replicated = (
        request.offload_backend == "native"
        and mla
        and len(groups) == 1
        and tp > 1
        and pp == 1
        and single_node
        and version >= replicated_from
    )
    copies = 1 if replicated else world
    chunk_bytes = block_bytes * copies * blocks_per_chunk
    if version >= _feature_since(knowledge, "feature.offload-chunk-page-alignment"):
        use("feature.offload-chunk-page-alignment")
        chunk_bytes = _cdiv(chunk_bytes, 4096) * 4096
    note(
        "offloaded chunk bytes",
        f"GPU block bytes {block_bytes:,} × copies {copies} ("
        + ("one shared copy: pure-MLA, TP-only, one node" if replicated else "one per TP×PP worker")
        + f") × blocks_per_chunk {blocks_per_chunk}",
        chunk_bytes,
        "vllm==0.33.0 vllm/v1/kv_offload/cpu/spec.py:100-123; distributed/kv_transfer/kv_connector/v1/offloading/"
        "config.py:175-209; vllm==0.14.0 vllm/v1/kv_offload/cpu.py:39-50",
    )
    engines_on_node = max(1, min(dp, request.gpus_per_node // world)) if single_node else 1
    usable_host = None
    reserved_gib = request.host_ram_reserved_gib
    if request.host_ram_gib is not None:
        if reserved_gib is None:
            reserved_gib = max(DEFAULT_HOST_RESERVE_GIB, request.host_ram_gib * DEFAULT_HOST_RESERVE_FRACTION)
        usable_host = request.host_ram_gib - reserved_gib
    session_chunks = _cdiv(typical_blocks, blocks_per_chunk)
    size_gib: float | None = request.kv_offloading_size_gib
    size_basis = "given"
    if size_gib is None and request.lmcache_max_local_cpu_size_gib is not None:
        size_gib, size_basis = request.lmcache_max_local_cpu_size_gib * world, "LMCACHE_MAX_LOCAL_CPU_SIZE × TP × PP"
    if size_gib is None and request.warm_sessions:
        size_gib = float(math.ceil(request.warm_sessions * session_chunks * chunk_bytes / GIB))
        size_basis = f"{request.warm_sessions} warm sessions × {session_chunks} chunks × {chunk_bytes:,} B, rounded up"
    if size_gib is None and usable_host is not None and usable_host > 0:
        # Each engine on the node keeps its own tier; an engine spanning nodes keeps a share on each.
        per_engine = usable_host / engines_on_node if single_node else usable_host * world / gpus_on_node
        size_gib = float(math.floor(per_engine))
        size_basis = (
            f"(host RAM {request.host_ram_gib:g} − reserved "
            f"{reserved_gib:g}) GiB / {engines_on_node} engine(s) on the node"
        )
    offload: OffloadTier | None = None
    host_left = None
    if size_gib is not None and size_gib > 0:
        cpu_bytes = int(size_gib * GIB)
        num_chunks = cpu_bytes // chunk_bytes if request.offload_backend == "native" else 0
        per_process = size_gib / world
        if request.offload_backend == "native":
            warm_held = num_chunks // session_chunks
        else:
            per_rank_session = typical_blocks * block_bytes
            warm_held = int(per_process * GIB) // per_rank_session
        mp_from = _feature_since(knowledge, "feature.lmcache-backend-selects-mp")
        rule = (
            "--kv-offloading-size is the total for one engine: native writes it as cpu_bytes_to_use = size × 2^30 "
            "and splits it over the TP × PP workers"
        )
        if request.offload_backend == "lmcache":
            if version >= mp_from:
                rule = (
                    f"From {mp_from} the lmcache backend selects LMCacheMPConnector and does not pass "
                    "--kv-offloading-size on: size the LMCache server (--l1-size-gb) instead; the figures here are "
                    "what it must hold."
                )
                warnings.append(rule)
            else:
                rule = (
                    f"vLLM passes --kv-offloading-size / (TP × PP) = {per_process:g} GiB to each LMCache worker as "
                    "lmcache.max_local_cpu_size, overriding LMCACHE_MAX_LOCAL_CPU_SIZE; set one or the other, "
                    "consistently."
                )
        if request.offload_backend == "native" and bytes_key.status_at(version) == "not_yet":
            warnings.append(
                f"In {version} the native CPU spec is sized by num_cpu_blocks and the --kv-offloading-size shorthand "
                f"cannot start it; pass num_cpu_blocks = {num_chunks:,} in --kv-transfer-config instead."
            )
        if size_flag.status_at(version) == "not_yet":
            warnings.append(f"--kv-offloading-size does not exist in {version}; configure the connector by hand.")
        offload = OffloadTier(
            backend=request.offload_backend,
            kv_offloading_size_gib=size_gib,
            cpu_bytes_to_use=cpu_bytes,
            lmcache_max_local_cpu_size_gib=round(per_process, 3),
            size_basis=size_basis,
            replicated_mla_layout=replicated,
            chunk_bytes=chunk_bytes,
            num_chunks=num_chunks,
            warm_sessions_held=warm_held,
            consistency_rule=rule,
        )
        note(
            "CPU tier",
            f"cpu_bytes_to_use = {size_gib:g} × 2^30; chunks = cpu_bytes_to_use // chunk bytes; warm sessions = "
            f"chunks // {session_chunks} chunks per {typical:,}-token session; LMCache per process = size / (TP×PP)",
            f"{num_chunks:,} chunks, {warm_held:,} sessions",
            "vllm==0.33.0 vllm/config/vllm.py:1167-1175; vllm/v1/kv_offload/cpu/spec.py:110-123",
        )
        if request.warm_sessions and warm_held < request.warm_sessions:
            warnings.append(
                f"The tier holds {warm_held:,} warm sessions of {typical:,} tokens, fewer than the "
                f"{request.warm_sessions:,} asked for."
            )
        if request.host_ram_gib is not None:
            node_share = size_gib * (engines_on_node if single_node else gpus_on_node / world)
            host_left = request.host_ram_gib - node_share
            if reserved_gib is not None and host_left < reserved_gib:
                warnings.append(
                    f"The CPU tier takes {node_share:g} GiB per node and leaves {host_left:.1f} GiB of "
                    f"{request.host_ram_gib:g} GiB, below the {reserved_gib:g} GiB reserve: it does "
                    "not fit; shrink it."
                )
        # A per-rank figure passed as the total: the classic LMCache → native mix-up.
        if world > 1 and request.kv_offloading_size_gib is not None:
            same = (
                request.lmcache_max_local_cpu_size_gib is not None
                and abs(request.lmcache_max_local_cpu_size_gib - request.kv_offloading_size_gib) < 1e-9
            )
            tiny = warm_held < 1 and usable_host is not None and request.kv_offloading_size_gib * world <= usable_host
            if same or tiny:
                warnings.append(
                    f"--kv-offloading-size {request.kv_offloading_size_gib:g} looks like a per-rank figure: it is the "
                    f"TOTAL for all {world} workers (each gets about {request.kv_offloading_size_gib / world:g} GiB). "
                    f"For {request.kv_offloading_size_gib:g} GiB per rank pass "
                    f"{request.kv_offloading_size_gib * world:g}."
                )
    elif request.offload_backend:
        warnings.append(
            "No tier size: give kv_offloading_size_gib, warm_sessions or host_ram_gib to size the CPU tier."
        )

    # --- load vs re-prefill for one returning session
    reuse_tokens = max(1, int(typical * request.prefix_reuse))
    rank_bytes = blocks_per_session(reuse_tokens) * block_bytes
    all_bytes = rank_bytes * world
    link = gpu.host_link_practical_gb_s * 1e9
    loads = [
        LoadEstimate(
            tier="CPU DRAM",
            seconds=rank_bytes / link,
            formula=f"{rank_bytes:,} B per rank / {gpu.host_link_practical_gb_s:g} GB/s "
            f"({gpu.host_link}, ranks in parallel)",
        )
    ]
    for drive in knowledge.hardware.nvme:
        nvme_rate = drive.practical_read_gb_s * 1e9 * request.nvme_drives_per_node
        disk_bytes = rank_bytes * gpus_on_node
        use(drive.id)
        if request.gds:
            seconds = max(disk_bytes / nvme_rate, rank_bytes / link)
            how = (
                f"max({disk_bytes:,} B on the node / "
                f"{request.nvme_drives_per_node} × {drive.practical_read_gb_s:g} GB/s, host link)"
            )
        else:
            seconds = disk_bytes / nvme_rate + rank_bytes / link
            how = (
                f"{disk_bytes:,} B / "
                f"{request.nvme_drives_per_node} × {drive.practical_read_gb_s:g} GB/s + bounce over the host link"
            )
        loads.append(
            LoadEstimate(tier=f"{_nvme_label(drive)}{' + GDS' if request.gds else ''}", seconds=seconds, formula=how)
        )
    loads.append(
        LoadEstimate(
            tier="remote",
            seconds=all_bytes / (request.remote_gb_s * 1e9) + rank_bytes / link,
            formula=f"{all_bytes:,} B / {request.remote_gb_s:g} GB/s network + host link (an ASSUMED network rate)",
        )
    )
    rate = request.prefill_tokens_per_s
    rate_basis = "given"
    flops = gpu.fp8_dense_tflops if request.kv_cache_dtype.startswith("fp8") or arch.weights_dtype == "fp8" else None
    flops = flops or gpu.bf16_dense_tflops
    if rate is None and flops and arch.params_active_b:
        rate = flops * 1e12 * tp * request.mfu / (2 * arch.params_active_b * 1e9)
        rate_basis = (
            f"ESTIMATE {flops:g} TFLOPS × TP {tp} × MFU {request.mfu:g} / "
            f"(2 × {arch.params_active_b:g}B active params); "
            "attention FLOPs ignored, so long contexts prefill slower"
        )
    if rate:
        loads.append(
            LoadEstimate(
                tier="re-prefill",
                seconds=reuse_tokens / rate,
                formula=f"{reuse_tokens:,} tokens / {rate:,.0f} tokens/s ({rate_basis})",
            )
        )
    else:
        warnings.append(
            f"No prefill rate: {gpu.name} has no TFLOPS figure in the knowledge; give prefill_tokens_per_s."
        )

    # --- SGLang
    gpu_pool = num_blocks * block_bytes
    sglang = SglangConversion(
        note="REFERENCE ONLY (not checked against SGLang's code here): --hicache-size is GB per rank, "
        "--hicache-ratio is the host pool over the device KV pool of a rank; vLLM's --kv-offloading-size is GiB "
        "for all ranks together."
    )
    if offload is not None:
        host_per_rank = offload.cpu_bytes_to_use / world
        sglang.hicache_size_gb_per_rank = round(host_per_rank / 1e9, 2)
        sglang.hicache_ratio = round(host_per_rank / gpu_pool, 2) if gpu_pool else None
    if request.sglang_hicache_size_gb is not None:
        sglang.from_sglang_kv_offloading_size_gib = round(request.sglang_hicache_size_gb * 1e9 * world / GIB, 2)
    elif request.sglang_hicache_ratio is not None:
        sglang.from_sglang_kv_offloading_size_gib = round(request.sglang_hicache_ratio * gpu_pool * world / GIB, 2)

    # --- benchmark that pushes the working set past the GPU and into the tier
    benchmark = None
    gpu_tokens = int(live_typical) * typical
    if gpu_tokens and typical < max_len:
        cpu_tokens = offload.warm_sessions_held * typical if offload else None
        target = 2 * gpu_tokens
        if cpu_tokens is not None and cpu_tokens < target:
            warnings.append(
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
        benchmark = BenchmarkPlan(
            gpu_kv_tokens=gpu_tokens,
            cpu_tier_tokens=cpu_tokens,
            unique_prefix_tokens=prefixes * typical,
            command=command,
            rule="unique prefixes ≈ 2 × GPU KV tokens and ≤ the CPU tier; each prefix is sent 4 times so later "
            "rounds must come back from the tier (flags: vllm==0.33.0 vllm/benchmarks/datasets/datasets.py:1810-1840; "
            "vllm==0.11.0 vllm/benchmarks/datasets.py:1313)",
        )

    return SizeOffloadResult(
        version_context=context,
        model=model_label,
        gpu=gpu.name,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        world_size=world,
        hybrid_kv_cache_manager=hma,
        block_size=block,
        kv_heads_per_rank=kv_heads_rank,
        layer_kinds=kinds,
        kv_bytes_per_token_per_rank=full_bytes_rank,
        kv_bytes_per_token_total=full_bytes_total,
        gpu_block_bytes_per_rank=block_bytes,
        gpu_budget_gib_per_rank=round(budget_gib, 3),
        weights_gib_per_gpu=round(weights_gib, 3),
        num_gpu_blocks=num_blocks,
        max_model_len=max_len,
        live_sessions_at_max_model_len=round(live_max, 3),
        live_sessions_at_typical_context=round(live_typical, 3),
        offload=offload,
        host_ram_left_gib=None if host_left is None else round(host_left, 3),
        load_estimates=loads,
        prefill_tokens_per_s=None if rate is None else round(rate, 1),
        sglang=sglang,
        benchmark=benchmark,
        formulas=formulas,
        warnings=warnings,
        citations=citations,
    )


def _nvme_label(drive: Nvme) -> str:
    return "NVMe " + ("gen5" if "Gen5" in drive.name else "gen4" if "Gen4" in drive.name else drive.id)


SPEC = ToolSpec(
    name="size_offload",
    title="Size the KV cache and its offload tiers",
    description=(
        "Architecture-aware KV-cache sizing, with the arithmetic vLLM uses for the given release: KV bytes per "
        "token per rank and in total for each layer kind (GQA/MQA with per-rank head replication, MLA latent, "
        "sliding-window and chunked-local bounds, linear-attention/Mamba state per sequence, fp8 KV, block "
        "rounding); the GPU KV budget, blocks and live sessions; the CPU tier as --kv-offloading-size (GiB total), "
        "cpu_bytes_to_use (bytes total) and LMCACHE_MAX_LOCAL_CPU_SIZE (GiB per process) with the rule linking "
        "them; warm sessions held; host RAM left; load time per tier versus re-prefill; SGLang --hicache-size / "
        "--hicache-ratio equivalents; and a `vllm bench serve` prefix-repetition run that exercises the tier. "
        "Give a model from the knowledge, a local config.json path, or the fields."
    ),
    request=SizeOffloadRequest,
    result=SizeOffloadResult,
    run=size_offload,
)
