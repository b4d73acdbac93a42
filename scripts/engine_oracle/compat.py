"""The steps of the engine's KV cache start-up that differ between vLLM releases, for oracle.run_cell.

run_cell does what the installed release's ``EngineCore._initialize_kv_caches`` and its executor do.
Up to the model class and the layer specs every recorded release has the same calls
(``create_engine_config``, ``initialize_model``, ``Platform.update_block_size_for_backend`` after
load_model, the model runner's ``get_kv_cache_spec``). From there the releases differ:

* 0.34.0 has only Model Runner V2 (``vllm/v1/worker/gpu/``): the layer specs come from
  ``gpu/attn_utils.get_kv_cache_spec(vllm_config)``; before it ``GPUModelRunner.get_kv_cache_spec``
  (``vllm/v1/worker/gpu_model_runner.py``) reads the same layers.

* 0.33.0 registers the spec classes (``register_all_kvcache_specs``), resolves one KV cache layout
  for all workers (``resolve_kv_cache_layout``), groups the layers before profiling
  (``kv_cache_planning.get_global_kv_cache_groups``) and hands the groups to
  ``get_kv_cache_configs``; each ``KVCacheTensor`` names the one backing allocation the groups overlay.
* 0.20.2 and 0.22.1 keep the planning in ``vllm/v1/core/kv_cache_utils.py``:
  ``get_kv_cache_configs(vllm_config, specs, available_memory)`` groups the layers itself and
  allocates one tensor per layer slot (each ``page × num_blocks``); the layout is the
  process-wide ``get_kv_cache_layout()``; there is no spec registry.

Each step is chosen by what the installed release has (a module or a name), not by its version
number, so a release between the recorded ones takes whichever path its code has.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def has_kv_cache_planning() -> bool:
    """0.33.0's planning module (kv_cache_planning.py, kv_cache_config_builder.py); older releases lack it."""
    return _has_module("vllm.v1.core.kv_cache_planning")


def init_worker_device_state(vllm_config: Any) -> None:
    """What the GPU worker's init_device sets up before it builds the model runner, where the release has it.

    The workspace manager (vllm/v1/worker/workspace.py, called from gpu_worker.py init_device in 0.20.2, 0.22.1
    and 0.33.0): some attention impls take their scratch buffers from it while the model is built (0.20.2's
    FlashMLA sparse impl does, in __init__). Here on the meta device, so nothing is allocated.
    """
    if not _has_module("vllm.v1.worker.workspace"):
        return
    import torch
    from vllm.v1.worker import workspace

    if workspace.is_workspace_manager_initialized():
        return
    num_ubatches = 2 if vllm_config.parallel_config.enable_dbo else 1
    workspace.init_workspace_manager(torch.device("meta"), num_ubatches)


def register_kv_cache_specs(vllm_config: Any) -> None:
    """What EngineCore._initialize_kv_caches does first where the release has a spec registry."""
    import vllm.v1.core.single_type_kv_cache_manager as managers

    register = getattr(managers, "register_all_kvcache_specs", None)
    if register is not None:
        register(vllm_config)


def kv_cache_layout(vllm_config: Any, runner: Any, world: int, specs: list[dict[str, Any]]) -> str:
    """The KV cache layout the engine settles on, by the release's own function."""
    from vllm.v1.attention.backends import utils as backend_utils

    if hasattr(backend_utils, "resolve_kv_cache_layout"):
        from vllm.v1.worker.worker_base import WorkerBase

        layouts = WorkerBase.get_supported_kv_cache_layouts(runner)
        layout = backend_utils.resolve_kv_cache_layout(
            vllm_config, [layouts] * world, [s for w in specs for s in w.values()]
        )
        return str(layout.name)
    # Before the engine-wide resolution each worker reads one process-wide setting (the environment,
    # or a KV connector's required layout).
    return str(backend_utils.get_kv_cache_layout())


def has_model_runner_v1() -> bool:
    """Whether the release still has Model Runner V1 (gpu_model_runner.py); 0.34.0 has only V2."""
    return _has_module("vllm.v1.worker.gpu_model_runner")


def model_runner_module() -> str:
    """The module that holds the release's layer-spec function, for the server to import before it forks."""
    return "vllm.v1.worker.gpu_model_runner" if has_model_runner_v1() else "vllm.v1.worker.gpu.attn_utils"


def kv_cache_spec(runner: Any) -> dict[str, Any]:
    """The model runner's get_kv_cache_spec for one stage: ``runner`` carries vllm_config and
    shared_kv_cache_layers, all that GPUModelRunner.get_kv_cache_spec reads; V2's function takes the config."""
    if has_model_runner_v1():
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        return dict(GPUModelRunner.get_kv_cache_spec(runner))
    from vllm.v1.worker.gpu.attn_utils import get_kv_cache_spec

    return dict(get_kv_cache_spec(runner.vllm_config))


def uses_model_runner_v2(vllm_config: Any) -> bool:
    """Whether the release's worker would build Model Runner V2 for this config (recorded, not used)."""
    if not has_model_runner_v1():
        return True
    decided = getattr(vllm_config, "use_v2_model_runner", None)
    if decided is not None:
        return bool(decided)
    import vllm.envs as envs  # 0.20.2: the worker reads the environment variable alone (default off)

    return bool(getattr(envs, "VLLM_USE_V2_MODEL_RUNNER", False))


def sliding_window_in_flight_tokens(vllm_config: Any) -> int | None:
    """The tokens the release's SlidingWindowSpec adds to window − 1 when it bounds a request.

    Read from the engine itself: a one-token window of one-byte pages asks the release's own
    ``max_memory_usage_bytes`` how many tokens past the window it holds (0.33.0:
    max_in_flight_tokens; before 0.26.0: max_num_batched_tokens). None when max_model_len caps it.
    """
    import torch
    from vllm.v1.kv_cache_interface import SlidingWindowSpec

    probe = SlidingWindowSpec(block_size=1, num_kv_heads=1, head_size=1, dtype=torch.int8, sliding_window=1)
    blocks = probe.max_memory_usage_bytes(vllm_config) // probe.page_size_bytes
    tokens = int(blocks) - 1  # cdiv(min(window − 1 + T, max_model_len), 1) + 1 blocks
    return tokens if tokens < vllm_config.model_config.max_model_len else None


@dataclass
class Plan:
    """The pool the engine plans for one worker (the busiest), and what the scheduler sees."""

    scheduler_config: Any  # KVCacheConfig the scheduler gets (generate_scheduler_kv_cache_config)
    worker_config: Any  # the busiest worker's KVCacheConfig
    max_concurrency: float
    refusal: str | None  # the engine's message when one max_model_len request does not fit
    tensor_bytes: int  # device memory the worker allocates for the KV cache
    pool_block_bytes: int  # bytes of one block id across the worker's layers


def _refusal(exc: ValueError) -> str:
    """The engine's refusal without its advice (the part size_offload words itself)."""
    if "max seq len" not in str(exc):
        raise exc
    return str(exc).split(" Try increasing", 1)[0]


def plan_kv_cache(vllm_config: Any, specs: list[dict[str, Any]], budget_bytes: int, worker: int) -> Plan:
    """get_kv_cache_configs for every worker at the fixed budget, as the release's engine calls it."""
    from vllm.v1.core.kv_cache_utils import (
        generate_scheduler_kv_cache_config,
        get_max_concurrency_for_kv_cache_config,
    )

    if has_kv_cache_planning():
        configs, refusal, tensor_bytes, pool_block_bytes = _plan_with_builder(vllm_config, specs, budget_bytes, worker)
    else:
        configs, refusal, tensor_bytes, pool_block_bytes = _plan_in_kv_cache_utils(
            vllm_config, specs, budget_bytes, worker
        )
    sched = generate_scheduler_kv_cache_config(configs)
    max_concurrency = get_max_concurrency_for_kv_cache_config(vllm_config, sched)
    return Plan(
        scheduler_config=sched,
        worker_config=configs[worker if len(configs) == len(specs) else 0],
        max_concurrency=float(max_concurrency),
        refusal=refusal,
        tensor_bytes=tensor_bytes,
        pool_block_bytes=pool_block_bytes,
    )


def _plan_with_builder(
    vllm_config: Any, specs: list[dict[str, Any]], budget_bytes: int, worker: int
) -> tuple[list[Any], str | None, int, int]:
    """0.33.0: groups first, then the configs; the builder places one backing allocation per worker."""
    from vllm.v1.core.kv_cache_config_builder import get_kv_cache_config_builder
    from vllm.v1.core.kv_cache_planning import (
        _pool_bytes_per_block_from_builder,
        get_global_kv_cache_groups,
        get_kv_cache_configs,
    )

    world = len(specs)
    groups = get_global_kv_cache_groups(vllm_config, specs)
    vllm_config.adjust_dcp_kv_cache_interleave_size(groups)
    refusal = None
    try:
        configs = get_kv_cache_configs(vllm_config, specs, [budget_bytes] * world, groups)
    except ValueError as exc:
        # The engine refuses to start; what the pool would have been, from the same planning functions.
        refusal = _refusal(exc)
        builder = get_kv_cache_config_builder(vllm_config)
        bytes_per_block = _pool_bytes_per_block_from_builder(builder, vllm_config, groups)
        configs = [builder.get_kv_cache_config_from_groups(vllm_config, groups, budget_bytes // bytes_per_block)]
    config = configs[worker if len(configs) == world else 0]
    # Every KVCacheTensor describes the one backing allocation (groups overlay it), so the allocation is
    # that size, not the sum; the pool's bytes per block come from vLLM's own probe.
    backing = {int(t.size) for t in config.kv_cache_tensors if not t.host_resident}
    assert len(backing) == 1, f"expected one device backing allocation, got sizes {sorted(backing)}"
    pool_block_bytes = _pool_bytes_per_block_from_builder(
        get_kv_cache_config_builder(vllm_config), vllm_config, config.kv_cache_groups
    )
    return configs, refusal, backing.pop(), int(pool_block_bytes)


def _plan_in_kv_cache_utils(
    vllm_config: Any, specs: list[dict[str, Any]], budget_bytes: int, worker: int
) -> tuple[list[Any], str | None, int, int]:
    """0.20.2 to 0.32.0: get_kv_cache_configs groups the layers itself (and places the tensors)."""
    from vllm.v1.core import kv_cache_utils

    world = len(specs)
    refusal = None
    try:
        configs = kv_cache_utils.get_kv_cache_configs(vllm_config, specs, [budget_bytes] * world)
    except ValueError as exc:
        # The engine refuses to start. The same function with its memory check skipped plans the pool it
        # would have had: the check is the only thing that raised, and nothing after it reads its result.
        refusal = _refusal(exc)
        check = kv_cache_utils._check_enough_kv_cache_memory
        kv_cache_utils._check_enough_kv_cache_memory = lambda *args, **kwargs: None
        try:
            configs = kv_cache_utils.get_kv_cache_configs(vllm_config, specs, [budget_bytes] * world)
        finally:
            kv_cache_utils._check_enough_kv_cache_memory = check
    config = configs[worker]
    tensor_bytes = _allocation_bytes(config.kv_cache_tensors)
    if hasattr(kv_cache_utils, "_pool_bytes_per_block"):
        pool_block_bytes = _call_with_config(kv_cache_utils._pool_bytes_per_block, vllm_config, config.kv_cache_groups)
    else:
        pool_block_bytes = _pool_bytes_per_block_before_0_20(config.kv_cache_groups)
    return configs, refusal, tensor_bytes, int(pool_block_bytes)


def _pool_bytes_per_block_before_0_20(groups: list[Any]) -> int:
    """Before 0.20.0 vLLM has no function for it; what its get_kv_cache_config_from_groups divides the memory by:
    one spec's page for UniformTypeKVCacheSpecs (each layer its own tensor), else the groups' one page size times
    the largest group, the layers that share each pool tensor (vllm/v1/core/kv_cache_utils.py, 0.19.1:1106-1140)."""
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs

    if len(groups) == 1 and isinstance(groups[0].kv_cache_spec, UniformTypeKVCacheSpecs):
        return int(groups[0].kv_cache_spec.page_size_bytes)
    page_size = kv_cache_utils.get_uniform_page_size([group.kv_cache_spec for group in groups])
    return int(page_size) * max(len(group.layer_names) for group in groups)


def _allocation_bytes(tensors: list[Any]) -> int:
    """The device bytes a worker's KVCacheTensors allocate. Up to 0.28.0 each is its own allocation (one per
    layer slot, ``shared_by`` one layer of each group): their sum. From 0.32.0 each places its ``layers`` in
    one backing allocation of ``size`` bytes (``offset``, ``layer_stride``), and tensors that overlap alias
    it: that one size."""
    on_device = [t for t in tensors if not getattr(t, "host_resident", False)]
    if not on_device or not hasattr(on_device[0], "layer_stride"):
        return sum(int(t.size) for t in on_device)
    backing = {int(t.size) for t in on_device}
    assert len(backing) == 1, f"expected one device backing allocation, got sizes {sorted(backing)}"
    return backing.pop()


def _call_with_config(function: Any, vllm_config: Any, *args: Any) -> Any:
    """Call ``function`` with the VllmConfig first where the release's signature takes it (0.28.0's
    _pool_bytes_per_block does, to see whether the groups are packed into one tensor); else without."""
    import inspect

    if "vllm_config" in inspect.signature(function).parameters:
        return function(vllm_config, *args)
    return function(*args)
