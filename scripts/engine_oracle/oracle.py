"""The released vLLM engine as the oracle for size_offload (issue 14).

Runs vLLM's own code on a machine without a GPU and records what the engine would allocate:

* a stand-in CUDA platform (vLLM's ``NonNvmlCudaPlatform`` reporting a chosen device name,
  compute capability and memory) is installed as ``vllm.platforms.current_platform`` before
  anything resolves it;
* vLLM's compiled extensions load against a stub ``libcuda.so.1`` (libcuda_stub.c) whose every
  entry point answers "no device";
* the engine config comes from ``EngineArgs(...).create_engine_config()`` on a local config.json
  (tests/data/engine/configs/), the model class is built on the meta device (no weights) with a
  faked tensor-parallel group of the wanted size;
* then the engine's own sequence: ``Platform.update_block_size_for_backend`` (what the executor
  calls after load_model), ``GPUModelRunner.get_kv_cache_spec`` (each attention layer's
  ``get_kv_cache_spec``), ``get_global_kv_cache_groups``, ``get_kv_cache_configs`` for a fixed
  per-rank budget, ``generate_scheduler_kv_cache_config`` and
  ``get_max_concurrency_for_kv_cache_config`` (vllm/v1/engine/core.py ``_initialize_kv_caches``), as the
  installed release has them (compat.py: older releases plan in kv_cache_utils.py and differ).

The only step replaced is ``determine_available_memory`` (the profiling run): the per-rank KV
budget is an input, so size_offload can be given the same budget.

Run it with the scratch venv's python, never the project's (vLLM is not a dependency):

    "$SCRATCH/venv/bin/python" scripts/engine_oracle/oracle.py   # a venv with vllm==0.33.0, outside the repository

Each cell runs in its own subprocess (vLLM keeps global state: the static forward context, the
parallel groups, the platform). The subprocess gets LD_LIBRARY_PATH with the stub.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "tests" / "data" / "engine" / "configs"
GIB = 1 << 30

# GPUs the stand-in platform can pretend to be: what vLLM's platform and torch.cuda.get_device_properties
# report for them (_install_platform). total_memory is what torch reports (cudaDeviceProp.totalGlobalMem) for
# the 80 GB H100 SXM: 81,559 MiB. The SM counts are not from an NVIDIA datasheet (none was at hand) but the
# values FlashInfer's and vLLM's own code carry for these parts: 132 for the H100 (wheel:vllm==0.33.0:
# vllm/utils/deep_gemm.py:719 "132 for Hopper"; flashinfer-python==0.7.2.post1 flashinfer/cake_vsa_sm90.py:160
# "the 132-SM H100") and 148 for the B200 (flashinfer/cake_fmha.py:305 "148  # B200").
GPUS: dict[str, dict[str, Any]] = {
    "h100": {
        "name": "NVIDIA H100 80GB HBM3",
        "capability": [9, 0],
        "total_memory_bytes": 81559 * (1 << 20),
        "multi_processor_count": 132,
        "knowledge_id": "gpu.h100-sxm",
    },
    # Blackwell. The memory is the vendor's 180 GB (hardware.yaml hbm_gb), not a driver reading: it only has
    # to clear vLLM's 160 GiB tier for the serve defaults (arg_utils.py _set_default_args, which give it
    # max_num_batched_tokens 16384 where the H100 gets 8192); the KV budget is given separately.
    "b200": {
        "name": "NVIDIA B200",
        "capability": [10, 0],
        "total_memory_bytes": 180 * 10**9,
        "multi_processor_count": 148,
        "knowledge_id": "gpu.b200",
    },
    # Ampere: vLLM keeps an A100 on serve's small batch tier by
    # its name, whatever its memory; the memory is the vendor's 80 GB. 108 SMs (NVIDIA's A100 whitepaper).
    "a100": {
        "name": "NVIDIA A100-SXM4-80GB",
        "capability": [8, 0],
        "total_memory_bytes": 80 * 10**9,
        "multi_processor_count": 108,
        "knowledge_id": "gpu.a100-80gb-sxm",
    },
}

# Turing, for the checks vLLM makes on GPUs below compute capability 8.0 (the rules' cases only, not the
# matrix): the vendor's 16 GB, and 40 SMs (NVIDIA's T4 product brief; knowledge/hardware.yaml gpu.t4).
GPUS["t4"] = {
    "name": "Tesla T4",
    "capability": [7, 5],
    "total_memory_bytes": 16 * 10**9,
    "multi_processor_count": 40,
    "knowledge_id": "gpu.t4",
}

DEFAULT_BUDGET_GIB = 40  # per rank; a whole number of GiB so size_offload can be given it exactly


def cell_id(model: str, tp: int, kv_dtype: str, gpu: str, variant: str | None = None) -> str:
    return f"{model}/tp{tp}/{kv_dtype}/{gpu}" + (f"/{variant}" if variant else "")


def _cid(cell: dict[str, Any]) -> str:
    return cell_id(cell["model"], cell["tp"], cell["kv_cache_dtype"], cell["gpu"], cell.get("variant"))


# The matrix: every architecture at TP 1, 2 and 8, with 16-bit and fp8 KV, on Hopper and Blackwell. The models are
# config dirs under tests/data/engine/configs, grouped by the kind of attention they exercise.
DENSE_AND_MOE_MODELS: tuple[str, ...] = (
    "llama-3.1-8b",
    "llama-3.1-70b",
    "llama-3.3-70b",
    "qwen3-32b",
    "mixtral-8x7b",
    "qwen3-235b-a22b",
    "qwen3-coder-30b-a3b",
    "qwen3-coder-480b-a35b",
    "glm-4.5",
)
MLA_MODELS: tuple[str, ...] = ("deepseek-v3", "kimi-k2")
SLIDING_AND_CHUNKED_MODELS: tuple[str, ...] = (
    "gpt-oss-20b",
    "gpt-oss-120b",
    "gemma-3-27b",
    "llama-4-scout",
    "mistral-small-3.1-24b",
)
HYBRID_MODELS: tuple[str, ...] = ("qwen3-next-80b-a3b", "nemotron-h-8b", "qwen3.5-35b-a3b")
MATRIX_MODELS = DENSE_AND_MOE_MODELS + MLA_MODELS + SLIDING_AND_CHUNKED_MODELS + HYBRID_MODELS
MATRIX_TP = (1, 2, 8)
MATRIX_KV_DTYPES = ("auto", "fp8")
MATRIX_GPUS: tuple[str, ...] = ("h100", "b200", "a100")

CELLS: list[dict[str, Any]] = (
    [
        {"model": m, "tp": tp, "kv_cache_dtype": kv, "gpu": gpu}
        for gpu in MATRIX_GPUS
        for m in MATRIX_MODELS
        for kv in MATRIX_KV_DTYPES
        for tp in MATRIX_TP
    ]
    + [
        # Hybrid models with prefix caching off: mamba_cache_mode "none" (one state block per request).
        {
            "model": m,
            "tp": tp,
            "kv_cache_dtype": "auto",
            "gpu": "h100",
            "variant": "no-prefix-caching",
            "engine_args": {"enable_prefix_caching": False},
        }
        for m in HYBRID_MODELS
        for tp in (1, 8)
    ]
    + [
        # Prefix caching asked for: before 0.26.0 a hybrid model has it off by default, so this is the only way
        # those releases run their linear-attention layers in mamba_cache_mode "align" (from 0.26.0 it is the
        # default and these cells repeat the plain ones).
        {
            "model": "qwen3-next-80b-a3b",
            "tp": tp,
            "kv_cache_dtype": "auto",
            "gpu": "h100",
            "variant": "prefix-caching",
            "engine_args": {"enable_prefix_caching": True},
        }
        for tp in (1, 8)
    ]
    + [
        # The hybrid KV cache manager off (--disable-hybrid-kv-cache-manager): sliding layers stored as full.
        {
            "model": "gemma-3-27b",
            "tp": 1,
            "kv_cache_dtype": "auto",
            "gpu": "h100",
            "variant": "no-hma",
            "engine_args": {"disable_hybrid_kv_cache_manager": True},
        }
    ]
    + [
        # Pipeline parallel: two stages (DeepSeek-V3's 61 layers split unevenly).
        {"model": m, "tp": tp, "pp": 2, "kv_cache_dtype": "auto", "gpu": "h100", "variant": "pp2"}
        for m, tp in (("llama-3.1-70b", 4), ("deepseek-v3", 4))
    ]
    + [
        # --block-size given: dense, MLA (FlashMLA takes only 64 with fp8, so bf16 here), sliding, hybrid (the
        # attention block is then raised to fit the Mamba state).
        {
            "model": m,
            "tp": 1,
            "kv_cache_dtype": "auto",
            "gpu": "h100",
            "variant": "block-32",
            "engine_args": {"block_size": 32},
        }
        for m in ("llama-3.1-8b", "deepseek-v3", "gpt-oss-20b", "qwen3-next-80b-a3b")
    ]
    + [
        # Configurations vLLM rejects: TP 3 does not divide Llama 3.1 8B's 32 attention heads (refused in
        # create_engine_config), and divides GLM-4.5's 96 heads but not its 8 KV heads (refused by the
        # attention layer while the model is built). size_offload must refuse them too.
        {"model": m, "tp": 3, "kv_cache_dtype": "auto", "gpu": "h100"}
        for m in ("llama-3.1-8b", "glm-4.5")
    ]
)

# Models a release can load only with the publisher's remote code, which the oracle does not have: the
# model_type of their config.json must be known to the release's transformers or to vLLM's own config
# registry (vllm/transformers_utils/config.py _CONFIG_REGISTRY), read from the installed release, not
# from its version number. Cells of a release that knows neither are recorded as not recorded.
NEEDS_MODEL_TYPE: dict[str, str] = {"nemotron-h-8b": "nemotron_h"}


# ----------------------------------------------------------------------------- in the subprocess


def _install_platform(gpu: dict[str, Any]) -> Any:
    """Make vLLM's current platform a CUDA platform that reports ``gpu``; before anything reads it."""
    import vllm.platforms as platforms

    current = platforms._current_platform
    if current is not None and getattr(current, "stand_in_for", None) == gpu["name"]:
        return current  # a cell forked from the server that installed it
    # 0.28.0 resolves the platform while `import vllm` runs (vllm/utils/torch_utils.py sets PIN_MEMORY from
    # is_pin_memory_available()), finds no device and takes UnspecifiedPlatform; no module keeps that
    # object, so the stand-in replaces it. Any other platform resolved before this is an error.
    from vllm.platforms.interface import UnspecifiedPlatform

    assert current is None or isinstance(current, UnspecifiedPlatform), "current_platform resolved before the stand-in"
    from vllm.platforms.cuda import NonNvmlCudaPlatform
    from vllm.platforms.interface import DeviceCapability

    major, minor = gpu["capability"]

    class StandInCudaPlatform(NonNvmlCudaPlatform):
        """vLLM's non-NVML CUDA platform, with the device facts given instead of read from a driver."""

        stand_in_for = str(gpu["name"])

        @classmethod
        def get_device_capability(cls, device_id: int = 0) -> DeviceCapability:
            return DeviceCapability(major=major, minor=minor)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return str(gpu["name"])

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return int(gpu["total_memory_bytes"])

        @classmethod
        def is_fully_connected(cls, physical_device_ids: list[int]) -> bool:
            return True

        @classmethod
        def device_count(cls) -> int:
            return 8

        @classmethod
        def current_device(cls) -> Any:
            # Platform forwards unknown names to torch.cuda; a layer that asks for the current device
            # to place a parameter (Qwen3-Next's gated norm) gets the meta device the model is built on.
            import torch

            return torch.device("meta")

    platform = StandInCudaPlatform()
    platforms._current_platform = platform
    _install_device_queries(gpu)
    _count_devices_as_the_platform(platform)
    return platform


def _count_devices_as_the_platform(platform: Any) -> None:
    """Before 0.20.0 ParallelConfig counts the node's GPUs with vllm.utils.torch_utils.cuda_device_count_stateless,
    which asks the driver (0 here), where later releases ask current_platform.device_count(): where the release's
    ParallelConfig does, that function answers the stand-in's count, for every module that imported it."""
    import importlib

    parallel = importlib.import_module("vllm.config.parallel")
    if not hasattr(parallel, "cuda_device_count_stateless"):
        return

    def stand_in_count() -> int:
        return int(platform.device_count())

    for name, module in list(sys.modules.items()):
        if name.startswith("vllm") and hasattr(module, "cuda_device_count_stateless"):
            module.cuda_device_count_stateless = stand_in_count


@dataclasses.dataclass(frozen=True)
class _DeviceProperties:
    """What torch.cuda.get_device_properties answers for the stand-in: the cudaDeviceProp fields the build path
    reads. Any other field is an AttributeError, so a new query fails loudly instead of reading a made-up value."""

    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    is_integrated: bool = False  # vllm/platforms/cuda.py is_integrated_gpu


def _install_device_queries(gpu: dict[str, Any]) -> None:
    """Answer, from ``gpu``, the device queries the model build makes to torch below vLLM's platform.

    FlashInfer's attention impl (vllm/v1/attention/backends/flashinfer.py FlashInferImpl.__init__, the default
    on Blackwell) reads the SM count through torch.cuda.get_device_properties (flashinfer/utils.py
    get_device_sm_count) and allocates its multi-CTA counter buffer with device="cuda". The properties come
    from ``gpu`` (torch.cuda.get_device_capability and get_device_name read the same function), and a tensor
    created on a CUDA device goes to the meta device instead, as the weights do: no driver is asked, nothing
    is allocated and no kernel runs. Installed for the rest of the process, so cells forked from it have it too.
    """
    import torch

    properties = _DeviceProperties(
        name=str(gpu["name"]),
        major=int(gpu["capability"][0]),
        minor=int(gpu["capability"][1]),
        total_memory=int(gpu["total_memory_bytes"]),
        multi_processor_count=int(gpu["multi_processor_count"]),
    )

    def get_device_properties(device: Any = None) -> _DeviceProperties:
        return properties

    torch.cuda.get_device_properties = get_device_properties
    _cuda_tensors_on_meta().__enter__()


def _cuda_tensors_on_meta() -> Any:
    """A torch function mode that creates on the meta device the tensors a caller asks for on a CUDA device."""
    import torch
    from torch.utils._device import _device_constructors  # the factories torch.device(...) as a context covers

    def on_cuda(device: Any) -> bool:
        return isinstance(device, str | torch.device) and torch.device(device).type == "cuda"

    class CudaTensorsOnMeta(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func in _device_constructors() and on_cuda(kwargs.get("device")):
                kwargs = {**kwargs, "device": torch.device("meta")}
            return func(*args, **kwargs)

    return CudaTensorsOnMeta()


class _FakeProcessGroup:
    """What a layer asks of a torch ProcessGroup while it is built: its size and this rank."""

    def __init__(self, world_size: int, rank: int = 0) -> None:
        self._size, self._rank = world_size, rank

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return self._rank


class _FakeGroup:
    """A GroupCoordinator stand-in: the size and rank a layer reads while it is built, nothing else.

    Building a model on the meta device runs no collective; any other attribute is an error
    (so a model that would talk to its peers fails loudly instead of computing something else).
    """

    def __init__(self, name: str, world_size: int, rank_in_group: int = 0) -> None:
        self.unique_name = name
        self.world_size = world_size
        self.rank_in_group = rank_in_group
        self.rank = rank_in_group
        self.local_rank = rank_in_group
        self.ranks = list(range(world_size))
        self.is_first_rank = rank_in_group == 0
        self.is_last_rank = rank_in_group == world_size - 1
        self.first_rank = 0
        self.last_rank = world_size - 1
        self.device_group = _FakeProcessGroup(world_size, rank_in_group)
        self.cpu_group = _FakeProcessGroup(world_size, rank_in_group)
        self.device_communicator = None
        self.use_device_communicator = False

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"fake process group {self.unique_name!r} has no {name!r} (the oracle runs no collective)")


def _fake_parallel_groups(tp: int, pp: int, pp_rank: int = 0) -> None:
    from vllm.distributed import parallel_state as ps

    ps._WORLD = _FakeGroup("world", tp * pp, pp_rank * tp)
    ps._TP = _FakeGroup("tp", tp)
    ps._PP = _FakeGroup("pp", pp, pp_rank)
    for attr, name in (("_DP", "dp"), ("_DCP", "dcp"), ("_PCP", "pcp"), ("_ETP", "etp"), ("_EPLB", "eplb")):
        if hasattr(ps, attr):
            setattr(ps, attr, _FakeGroup(name, 1))
    # Expert parallelism is off, so the EP group is the TP × DP group (parallel_state.initialize_model_parallel).
    if hasattr(ps, "_EP"):
        ps._EP = _FakeGroup("ep", tp)


def _spec_summary(spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": type(spec).__name__}
    for key in (
        "block_size",
        "num_kv_heads",
        "head_size",
        "head_size_v",
        "sliding_window",
        "attention_chunk_size",
        "page_size_padded",
    ):
        if hasattr(spec, key):
            value = getattr(spec, key)
            out[key] = value if isinstance(value, int | None) else str(value)
    if hasattr(spec, "dtype"):
        out["dtype"] = str(spec.dtype).replace("torch.", "")
    out["page_size_bytes"] = int(spec.page_size_bytes)
    real = _real_page_size_bytes(spec)
    if real is not None:
        out["real_page_size_bytes"] = real
    return out


def _real_page_size_bytes(spec: Any) -> int | None:
    """The bytes a page holds before padding. A Mamba state in a release whose MambaSpec has no
    real_page_size_bytes (0.22.1 and before) is what its page_size_bytes sums before padding: each state
    tensor's elements × dtype size."""
    if hasattr(spec, "real_page_size_bytes"):
        return int(spec.real_page_size_bytes)
    if hasattr(spec, "shapes") and hasattr(spec, "dtypes"):
        import math

        return sum(math.prod(shape) * dtype.itemsize for shape, dtype in zip(spec.shapes, spec.dtypes, strict=True))
    return None


def _kind(spec: Any) -> str:
    name = type(spec).__name__
    return {
        "FullAttentionSpec": "full_attention",
        "MLAAttentionSpec": "mla",
        "SlidingWindowSpec": "sliding_window",
        "ChunkedLocalAttentionSpec": "chunked_local",
        "MambaSpec": "linear_attention",
    }.get(name, name)


def _layer_kinds(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The per-rank layer specs by kind: how many layers, and their bytes per token (or state per sequence)."""
    layer_kinds: dict[str, dict[str, Any]] = {}
    for s in spec.values():
        kind = layer_kinds.setdefault(_kind(s), {"layers_per_rank": 0, "spec": _spec_summary(s)})
        kind["layers_per_rank"] += 1
        if _kind(s) == "linear_attention":
            # A state per sequence, not bytes per token: its content, and the page it is padded to.
            kind["state_bytes_per_sequence_per_layer_per_rank"] = _real_page_size_bytes(s)
            kind["page_size_bytes"] = int(s.page_size_bytes)
            continue
        per_token = s.page_size_bytes // s.block_size
        assert per_token * s.block_size == s.page_size_bytes, "page not a whole number of bytes per token"
        # Layers of one kind may differ (Gemma 4's global layers, stored as full with the hybrid manager off):
        # the per-layer figure only where they agree, the per-rank figure summed over the layers.
        same = kind.get("bytes_per_token_per_layer_per_rank", per_token) == per_token
        kind["bytes_per_token_per_layer_per_rank"] = per_token if same else None
        kind["bytes_per_token_per_rank"] = kind.get("bytes_per_token_per_rank", 0) + per_token
    return layer_kinds


def _provenance(vllm_version: str, torch_version: str) -> dict[str, Any]:
    import compat

    spec_call = (
        "GPUModelRunner.get_kv_cache_spec" if compat.has_model_runner_v1() else "gpu.attn_utils.get_kv_cache_spec"
    )
    import importlib.metadata

    return {
        "vllm_version": vllm_version,
        "torch_version": torch_version,
        # vLLM's requirement may admit a transformers newer than its release (0.28.0: >=5.5.3), which pip takes
        "transformers_version": importlib.metadata.version("transformers"),
        "recorded_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "method": "model class built on the meta device (EngineArgs.create_engine_config; "
        f"initialize_model; update_block_size_for_backend; {spec_call}; get_kv_cache_configs)",
        "determine_available_memory": "replaced by the per-rank budget",
    }


def _config_dir(cell: dict[str, Any]) -> Path:
    """Where the cell's config.json is: under tests/data/engine/configs, or the root --configs named."""
    return Path(cell.get("config_root") or CONFIGS) / cell["model"]


def _shown_config(config_dir: Path) -> str:
    """The config file as the record names it: relative to the repository, or as given for one outside it."""
    path = (config_dir / "config.json").resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _gpu_inputs(key: str) -> dict[str, Any]:
    gpu = GPUS[key]
    return {
        "key": key,
        "name": gpu["name"],
        "compute_capability": ".".join(map(str, gpu["capability"])),
        "total_memory_bytes": gpu["total_memory_bytes"],
        "knowledge_id": gpu["knowledge_id"],
    }


def _inputs(
    cell: dict[str, Any], gpu: dict[str, Any], config_dir: Path, budget_bytes: int, vllm_config: Any
) -> dict[str, Any]:
    """What the cell asked, as the engine resolved it (its defaults included)."""
    import compat

    mc = vllm_config.model_config
    return {
        "model": cell["model"],
        "config": _shown_config(config_dir),
        "tensor_parallel_size": int(cell["tp"]),
        "pipeline_parallel_size": vllm_config.parallel_config.pipeline_parallel_size,
        "dtype": str(mc.dtype).replace("torch.", ""),
        "kv_cache_dtype": cell["kv_cache_dtype"],
        "block_size_flag": cell.get("engine_args", {}).get("block_size"),
        "engine_args": cell.get("engine_args", {}),
        "gpu": _gpu_inputs(cell["gpu"]),
        "kv_budget_bytes_per_rank": budget_bytes,
        "max_model_len": mc.max_model_len,
        "max_num_batched_tokens": vllm_config.scheduler_config.max_num_batched_tokens,
        "max_num_seqs": vllm_config.scheduler_config.max_num_seqs,
        "usage_context": "OPENAI_API_SERVER",
        "async_scheduling": bool(vllm_config.scheduler_config.async_scheduling),
        # 0.26.0 on; before, a sliding window is bounded by max_num_batched_tokens (the next field reads it).
        "max_in_flight_tokens": getattr(vllm_config, "max_in_flight_tokens", None),
        "sliding_window_in_flight_tokens": compat.sliding_window_in_flight_tokens(vllm_config),
        "model_runner": "v2" if compat.uses_model_runner_v2(vllm_config) else "v1",
        "mamba_cache_mode": str(vllm_config.cache_config.mamba_cache_mode),
        "enable_prefix_caching": bool(vllm_config.cache_config.enable_prefix_caching),
        "hybrid_kv_cache_manager": not vllm_config.scheduler_config.disable_hybrid_kv_cache_manager,
    }


def _scheduler_groups(sched: Any, vllm_config: Any) -> list[dict[str, Any]]:
    return [
        {
            "spec": _spec_summary(g.kv_cache_spec),
            "layers": len(g.layer_names),
            "max_memory_usage_bytes": int(g.kv_cache_spec.max_memory_usage_bytes(vllm_config)),
        }
        for g in sched.kv_cache_groups
    ]


def _specs_as_stored(spec: dict[str, Any], vllm_config: Any) -> dict[str, Any]:
    """The layer specs as the KV cache manager stores them. With the hybrid manager off, vLLM's grouping
    (get_kv_cache_groups → unify_hybrid_kv_cache_specs) stores sliding-window and chunked-local layers as
    full attention, every token kept; the layers still compute over their window. The same call on a copy,
    so the record's layer kinds are what is allocated."""
    if not vllm_config.scheduler_config.disable_hybrid_kv_cache_manager:
        return spec
    try:
        from vllm.v1.core.kv_cache_planning import unify_hybrid_kv_cache_specs
    except ImportError:  # before the planning moved out of kv_cache_utils
        from vllm.v1.core.kv_cache_utils import unify_hybrid_kv_cache_specs
    stored = dict(spec)
    unify_hybrid_kv_cache_specs(stored)
    return stored


class _Runner:
    """What GPUModelRunner.get_kv_cache_spec reads: only vllm_config, and it fills shared_kv_cache_layers."""


def _engine_args(cell: dict[str, Any], config_dir: Path) -> Any:
    from vllm.engine.arg_utils import EngineArgs

    return EngineArgs(
        model=str(config_dir),
        skip_tokenizer_init=True,
        tensor_parallel_size=int(cell["tp"]),
        pipeline_parallel_size=int(cell.get("pp", 1)),
        dtype=cell.get("dtype", "auto"),
        kv_cache_dtype=cell["kv_cache_dtype"],
        load_format="dummy",
        **({"max_model_len": cell["max_model_len"]} if cell.get("max_model_len") else {}),
        **cell.get("engine_args", {}),
    )


class EngineRefusal(Exception):
    """vLLM itself rejected the configuration (its config validation, or a model layer's own check while
    the model is built): a result to record, not a failure of the oracle."""

    def __init__(self, stage: str, exc: BaseException) -> None:
        super().__init__(f"{stage}: {type(exc).__name__}: {exc}")
        self.stage = stage
        self.exc = exc

    def message(self) -> str:
        """The engine's reason in one line (a pydantic error's own message, not its summary line)."""
        errors = getattr(self.exc, "errors", None)
        text = str(errors()[0].get("msg", "")) if callable(errors) else str(self.exc)
        first = text.strip().splitlines()[0] if text.strip() else ""
        if not first:  # a bare assert: its source line is the reason
            first = (self._frame().line or "").strip()
        return f"{type(self.exc).__name__}: {first}"[:400]

    def _frame(self) -> traceback.FrameSummary:
        frames = traceback.extract_tb(self.exc.__traceback__)
        inside = [f for f in frames if "/vllm/" in f.filename]
        return (inside or frames)[-1]

    def where(self) -> str:
        frame = self._frame()
        return f"{frame.filename.split('/site-packages/', 1)[-1]}:{frame.lineno}"


# What vLLM raises when it rejects a configuration (a pydantic ValidationError is a ValueError); anything
# else (a RuntimeError from the stand-in, an AttributeError from a fake group) is the oracle's failure.
_REFUSALS = (ValueError, AssertionError, NotImplementedError)


def _stage_specs(args: Any, tp: int, pp: int, platform: Any) -> tuple[list[dict[str, Any]], list[Any], Any]:
    """What each worker does up to get_kv_cache_spec: its config, its stage of the model, the block update.

    One model per pipeline stage (each worker builds only its stage's layers); TP ranks of a stage have
    the same specs. Each stage gets its own config, as each worker process has its own.
    """
    import compat
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.usage.usage_lib import UsageContext
    from vllm.utils.torch_utils import set_default_torch_dtype

    stage_specs: list[dict[str, Any]] = []
    stage_configs: list[Any] = []
    runner = None
    for stage in range(pp):
        # As `vllm serve` builds it: the usage context decides defaults such as max_num_batched_tokens.
        try:
            stage_config = args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
        except _REFUSALS as exc:
            raise EngineRefusal("create_engine_config", exc) from exc
        # Layers that place a buffer on "the" device (the Transformers backend's parameters) get the meta
        # device the model is built on: no device exists here.
        stage_config.device_config.device = torch.device("meta")
        _fake_parallel_groups(tp, pp, stage)
        compat.init_worker_device_state(stage_config)  # the worker's init_device, before the model runner
        # What the worker's load_model does (DefaultModelLoader): the model class under the model dtype,
        # here on the meta device, so no weight is ever allocated.
        with set_current_vllm_config(stage_config), set_default_torch_dtype(stage_config.model_config.dtype):
            with torch.device("meta"):
                try:
                    initialize_model(vllm_config=stage_config)
                except _REFUSALS as exc:
                    raise EngineRefusal("model build", exc) from exc
            # What the executor does next (uniproc_executor / multiproc_executor after load_model; the same
            # call in every recorded release).
            platform.update_block_size_for_backend(stage_config)
            stage_runner = _Runner()
            stage_runner.vllm_config = stage_config  # type: ignore[attr-defined]
            stage_runner.shared_kv_cache_layers = {}  # type: ignore[attr-defined]
            stage_specs.append(compat.kv_cache_spec(stage_runner))
        stage_configs.append(stage_config)
        runner = runner or stage_runner
    return stage_specs, stage_configs, runner


def _attention_backends(vllm_config: Any) -> list[str]:
    return sorted(
        {
            f"{type(layer).__name__}:{layer.get_attn_backend().get_name()}"
            for layer in vllm_config.compilation_config.static_forward_context.values()
            if hasattr(layer, "get_attn_backend")
        }
    )


def run_cell(cell: dict[str, Any], budget_bytes: int) -> dict[str, Any]:
    """One cell, in this process: the engine's own figures, by the installed release's own sequence."""
    gpu = GPUS[cell["gpu"]]
    platform = _install_platform(gpu)

    import compat  # the sibling module: the steps that differ between releases
    import torch
    import vllm
    from vllm.config import set_current_vllm_config
    from vllm.utils.torch_utils import set_default_torch_dtype

    tp = int(cell["tp"])
    pp = int(cell.get("pp", 1))
    config_dir = _config_dir(cell)
    args = _engine_args(cell, config_dir)
    # MoE shared experts take vLLM's one auxiliary CUDA stream at build time (torch.cuda.Stream() needs a
    # driver); a placeholder stands in, as nothing runs on it here.
    import vllm.utils.torch_utils as torch_utils

    torch_utils._aux_stream = object()  # type: ignore[assignment]

    stage_specs, stage_configs, runner = _stage_specs(args, tp, pp, platform)
    vllm_config = stage_configs[0]
    _fake_parallel_groups(tp, pp, 0)
    # The busiest stage (most layers with a KV cache) bounds the pool; its specs are the per-rank figures.
    busiest = max(range(pp), key=lambda i: len(stage_specs[i]))
    spec = stage_specs[busiest]

    with set_current_vllm_config(vllm_config), set_default_torch_dtype(vllm_config.model_config.dtype):
        # EngineCore._initialize_kv_caches, with the profiled memory replaced by the budget.
        compat.register_kv_cache_specs(vllm_config)
        world = vllm_config.parallel_config.world_size
        specs = [stage_specs[stage] for stage in range(pp) for _ in range(tp)]  # rank = stage × TP + tp_rank
        assert len(specs) == world
        layout = compat.kv_cache_layout(vllm_config, runner, world, specs)
        try:
            plan = compat.plan_kv_cache(vllm_config, specs, budget_bytes, busiest * tp)
        except _REFUSALS as exc:  # the specs cannot be grouped (a hybrid model with the hybrid manager off)
            raise EngineRefusal("KV cache groups", exc) from exc

    layer_kinds = _layer_kinds(_specs_as_stored(spec, vllm_config))
    sched = plan.scheduler_config
    block_sizes = [g.kv_cache_spec.block_size for g in sched.kv_cache_groups]
    mc = vllm_config.model_config
    return {
        "id": _cid(cell),
        "provenance": _provenance(vllm.__version__, torch.__version__),
        "inputs": _inputs(cell, gpu, config_dir, budget_bytes, vllm_config),
        "engine": {
            "architecture": mc.architectures[0] if mc.architectures else None,
            "attention_backends": _attention_backends(vllm_config),
            "num_kv_heads_per_rank": mc.get_num_kv_heads(vllm_config.parallel_config),
            "use_mla": bool(mc.use_mla),
            "block_size": min(block_sizes) if block_sizes else None,
            "cache_config_block_size": vllm_config.cache_config.block_size,
            "kv_cache_layout": layout,
            "layers_with_kv_cache_per_rank": len(spec),
            "layers_with_kv_cache_per_stage": [len(x) for x in stage_specs],
            "layer_kinds": layer_kinds,
            "kv_bytes_per_token_per_rank": sum(k.get("bytes_per_token_per_rank", 0) for k in layer_kinds.values()),
            "kv_cache_groups": _scheduler_groups(sched, vllm_config),
            "num_gpu_blocks": int(sched.num_blocks),
            "kv_cache_tensor_bytes_per_rank": plan.tensor_bytes,
            "block_bytes_per_rank": plan.pool_block_bytes,
            "kv_cache_tensors_per_rank": len(plan.worker_config.kv_cache_tensors),
            "max_concurrency_at_max_model_len": plan.max_concurrency,
            "starts": plan.refusal is None,
            "refusal": plan.refusal,
        },
        "offload": __import__("offload").offload_figures(args, specs, runner, budget_bytes),  # the offload backends
    }


# ----------------------------------------------------------------------------- the driver


def _refusal_record(cell: dict[str, Any], budget_bytes: int, refusal: EngineRefusal) -> dict[str, Any]:
    """A cell vLLM rejects before it plans a KV cache: what was asked and where the engine said no."""
    import torch
    import vllm

    return {
        "id": _cid(cell),
        "provenance": _provenance(vllm.__version__, torch.__version__),
        "inputs": {
            "model": cell["model"],
            "config": _shown_config(_config_dir(cell)),
            "tensor_parallel_size": int(cell["tp"]),
            "pipeline_parallel_size": int(cell.get("pp", 1)),
            "kv_cache_dtype": cell["kv_cache_dtype"],
            "block_size_flag": cell.get("engine_args", {}).get("block_size"),
            "engine_args": cell.get("engine_args", {}),
            "gpu": _gpu_inputs(cell["gpu"]),
            "kv_budget_bytes_per_rank": budget_bytes,
            "max_model_len": cell.get("max_model_len"),
        },
        "engine": {
            "starts": False,
            "refused_at": refusal.stage,
            "refusal": refusal.message(),
            "raised_at": refusal.where(),
        },
    }


def _record_or_error(cell: dict[str, Any], budget_bytes: int) -> dict[str, Any]:
    try:
        return {"record": run_cell(cell, budget_bytes)}
    except EngineRefusal as refusal:
        return {"record": _refusal_record(cell, budget_bytes, refusal)}
    except Exception as exc:  # the driver records the failure with the cell
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}


# Imported once by the server before it forks a child per cell: these take most of a cell's time
# (torch, the engine, the model runner); each child still imports its own model's module.
_PRELOAD = (
    "torch",
    "vllm.engine.arg_utils",
    "vllm.model_executor.model_loader.utils",
    "vllm.v1.core.kv_cache_utils",
)  # and the model runner's module (compat.model_runner_module)


def _serve(gpu_key: str, budget_bytes: int, jobs: int, timeout: float) -> int:
    """Run the cells read from stdin (one JSON per line) for one GPU, each in a child forked from here.

    vLLM keeps global state (the platform, the parallel groups, the static forward context), so every
    cell needs a fresh process; forking one that has already installed the stand-in platform and
    imported the engine gives each cell that fresh state without paying for the imports again.
    Prints one "ORACLE-RESULT <json>" line per cell, in the order the cells finish.
    """
    import importlib

    _install_platform(GPUS[gpu_key])
    import compat

    for name in (*_PRELOAD, compat.model_runner_module()):
        importlib.import_module(name)
    cells = [json.loads(line) for line in sys.stdin if line.strip()]
    running: dict[int, tuple[dict[str, Any], Path, float]] = {}
    scratch = Path(tempfile.mkdtemp(prefix="engine-oracle-"))

    def start(cell: dict[str, Any]) -> None:
        out = scratch / f"{len(running)}-{time.monotonic_ns()}.json"
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:  # the child: one cell, its result in a file, and out without running the parent's exit code
            # The engine logs to stdout; a log line left unfinished would swallow the next result line the
            # server prints, so the child's stdout is its stderr.
            os.dup2(2, 1)
            code = 0
            try:
                out.write_text(json.dumps(_record_or_error(cell, budget_bytes)))
            except BaseException:  # nothing may escape a forked child
                code = 1
            os._exit(code)
        running[pid] = (cell, out, time.monotonic())

    def finish(pid: int, status: int) -> None:
        cell, out, t0 = running.pop(pid)
        if out.exists():
            result = json.loads(out.read_text())
        else:
            result = {"error": f"the cell's process ended with status {status} and wrote no result"}
        result["id"], result["seconds"] = _cid(cell), round(time.monotonic() - t0, 1)
        print("ORACLE-RESULT " + json.dumps(result), flush=True)

    queue = list(cells)
    while queue or running:
        while queue and len(running) < jobs:
            start(queue.pop(0))
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid:
            if pid in running:  # not a helper process an import started (it is reaped here too)
                finish(pid, status)
            continue
        for pid, (_, _, t0) in list(running.items()):
            if time.monotonic() - t0 > timeout:
                os.kill(pid, 9)
        time.sleep(0.2)
    return 0


def _cells_for(root: Path, models: list[str]) -> list[dict[str, Any]]:
    """The matrix (TP × KV dtype × GPU) over the config directories under ``root`` (or the named ones)."""
    names = models or sorted(d.name for d in root.iterdir() if (d / "config.json").is_file())
    missing = [m for m in names if not (root / m / "config.json").is_file()]
    if missing:
        raise SystemExit(f"--configs {root}: no config.json for {', '.join(missing)}")
    matrix = [
        {"model": m, "tp": tp, "kv_cache_dtype": kv, "gpu": gpu, "config_root": str(root)}
        for gpu in MATRIX_GPUS
        for m in names
        for kv in MATRIX_KV_DTYPES
        for tp in MATRIX_TP
    ]
    # With the hybrid KV cache manager off, layers of different kinds or page sizes are unified differently:
    # one cell a model (as the matrix does for gemma-3-27b).
    no_hma = [
        {
            "model": m,
            "tp": 1,
            "kv_cache_dtype": "auto",
            "gpu": "h100",
            "variant": "no-hma",
            "engine_args": {"disable_hybrid_kv_cache_manager": True},
            "config_root": str(root),
        }
        for m in names
    ]
    return matrix + no_hma


def _known_model_types() -> set[str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    return set(CONFIG_MAPPING_NAMES) | set(_CONFIG_REGISTRY)


def _unknown_model_type(cell: dict[str, Any], known: set[str]) -> str | None:
    """Why the installed release cannot load the cell's model offline, or None when it can."""
    model_type = NEEDS_MODEL_TYPE.get(cell["model"])
    if model_type is None or model_type in known:
        return None
    return (
        f"the transformers this release pins does not know model_type {model_type}, and vLLM's config registry "
        "does not carry it, so the model loads only with the publisher's remote code (--trust-remote-code "
        "and the repository's configuration file), which the oracle does not have"
    )


def _stub_env(stub_dir: str) -> dict[str, str]:
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (stub_dir, env.get("LD_LIBRARY_PATH", "")) if p)
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    # With no active Triton driver vLLM swaps Triton for placeholders, and some kernel modules then fail
    # at import (ssd_chunk_scan reads triton.Config attributes). An empty CUDA_VISIBLE_DEVICES is the
    # case vLLM keeps real Triton for (vllm/triton_utils/importing.py: "distributed environment").
    env["CUDA_VISIBLE_DEVICES"] = ""
    # FlashInfer probes NVIDIA's cubin repository over HTTPS (vllm/utils/flashinfer.py has_nvidia_artifactory)
    # when it is selected: point it at a closed loopback port so no request ever leaves the machine.
    env["FLASHINFER_CUBINS_REPOSITORY"] = "http://127.0.0.1:9/"
    return env


def _run_gpu(gpu: str, cells: list[dict[str, Any]], args: argparse.Namespace, env: dict[str, str]) -> Any:
    """Start the server for one GPU; yields each cell's result as it comes."""
    command = [sys.executable, __file__, "--serve", gpu, "--budget-gib", str(args.budget_gib)]
    command += ["--jobs", str(args.jobs), "--timeout", str(args.timeout)]
    with subprocess.Popen(command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(c) + "\n" for c in cells))
        proc.stdin.close()
        for line in proc.stdout:
            if line.startswith("ORACLE-RESULT "):
                yield json.loads(line.removeprefix("ORACLE-RESULT "))
    if proc.returncode:
        yield {"id": f"{gpu} server", "error": f"the server for {gpu} exited with {proc.returncode}", "seconds": 0}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--budget-gib", type=int, default=DEFAULT_BUDGET_GIB, help="KV budget per rank, GiB")
    parser.add_argument("--only", action="append", default=[], help="cell id prefix to run (repeatable)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="cells run at once (default: CPUs)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a cell may take")
    parser.add_argument(
        "--stub-dir",
        default=os.path.join(tempfile.gettempdir(), "engine-oracle-lib"),
        help="where the libcuda stub is built",
    )
    parser.add_argument("--out", default=None, help="golden file (default tests/data/engine/golden-<vllm>.json)")
    parser.add_argument(
        "--configs",
        type=Path,
        default=None,
        help="a directory of <model>/config.json to record instead of the matrix's models (needs --out outside "
        "the repository)",
    )
    parser.add_argument("--model", action="append", default=[], help="with --configs: only these models")
    parser.add_argument(
        "--gpu", action="append", choices=sorted(GPUS), default=[], help="the GPUs to run (default: the matrix's)"
    )
    args = parser.parse_args(argv)
    budget_bytes = args.budget_gib * GIB
    if args.serve:
        return _serve(args.serve, budget_bytes, args.jobs, args.timeout)

    import importlib.metadata

    version = importlib.metadata.version("vllm")
    out = Path(args.out) if args.out else REPO / "tests" / "data" / "engine" / f"golden-{version}.json"
    stub = subprocess.run(
        ["bash", str(Path(__file__).with_name("build_stub.sh")), args.stub_dir],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    env = _stub_env(args.stub_dir)
    existing: dict[str, Any] = {}
    if out.exists():
        existing = {r["id"]: r for r in json.loads(out.read_text())["cells"]}
    cells = CELLS if args.configs is None else _cells_for(args.configs.resolve(), args.model)
    if args.gpu:  # the matrix's cells moved to the GPUs asked for
        cells = [{**c, "gpu": gpu} for gpu in args.gpu for c in cells if c["gpu"] == MATRIX_GPUS[0]]
    if args.configs is not None and (args.out is None or Path(args.out).resolve().is_relative_to(REPO)):
        parser.error("--configs records models outside the matrix: give --out a file outside the repository")
    selected = [c for c in cells if not args.only or any(_cid(c).startswith(p) for p in args.only)]
    known = _known_model_types()
    selected = [c for c in selected if _unknown_model_type(c, known) is None]
    failures: dict[str, str] = {}
    seen: set[str] = set()
    started = time.monotonic()
    for gpu in sorted({c["gpu"] for c in selected}):
        for result in _run_gpu(gpu, [c for c in selected if c["gpu"] == gpu], args, env):
            cid = result["id"]
            seen.add(cid)
            if "record" in result:
                record = result["record"]
                record["provenance"]["seconds"] = result["seconds"]
                existing[cid] = record
                print(f"{cid}: ok in {result['seconds']:.0f} s", flush=True)
            else:
                failures[cid] = result["error"]
                tail = "\n".join(str(result.get("traceback", "")).strip().splitlines()[-12:])
                print(f"{cid}: FAILED: {result['error']}\n{tail}", flush=True)
    missing = [_cid(c) for c in selected if _cid(c) not in seen]
    for cid in missing:
        failures.setdefault(cid, "no result came back from the server")
        print(f"{cid}: FAILED: no result came back from the server", flush=True)
    order = {_cid(c): i for i, c in enumerate(cells)}
    golden = {
        "about": "vLLM's own KV-cache figures, recorded by scripts/engine_oracle/oracle.py; "
        "compared with size_offload by tests/test_engine_golden.py. See knowledge/ENGINE.md.",
        "vllm_version": version,
        "libcuda_stub": str(Path(stub).name),
        "cells": [existing[k] for k in sorted(existing, key=lambda k: order.get(k, len(order)))],
        "not_recorded": [
            {"id": _cid(c), "why": why}
            for c in cells
            if (why := _unknown_model_type(c, known)) is not None and _cid(c) not in existing
        ],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(golden, indent=1, sort_keys=False) + "\n")
    print(f"{len(golden['cells'])} cells in {out} ({time.monotonic() - started:.0f} s); {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
