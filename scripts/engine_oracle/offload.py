"""The offload backends in the oracle (issue 14: the matrix "× the offload backends").

For one cell of oracle.py this runs what the engine does with ``--kv-offloading-backend`` on the
scheduler side, with no GPU, from vLLM's own functions:

* ``native``: ``EngineArgs`` with ``kv_offloading_backend="native"`` and ``kv_offloading_size``
  (GiB, the total across the TP × PP workers) → ``create_engine_config`` (the shorthand resolved into
  ``kv_transfer_config`` and the hybrid KV cache manager decided) → the KV cache planned with that
  config on the cell's layer specs → the tail of ``EngineCore._initialize_kv_caches`` (the scheduler's
  KV cache config and its block sizes) → ``KVConnectorFactory.create_connector(role=SCHEDULER)`` (the
  HMA check and the OffloadingConnector's constructor) and the offloading spec the connector builds
  (``build_offloading_config`` → ``OffloadingSpecFactory.create_spec``): the offloaded block size, the
  CPU blocks and their bytes. A configuration the engine refuses is recorded as refused, with the stage.
* ``lmcache``: the same ``create_engine_config`` with ``kv_offloading_backend="lmcache"``: the connector
  class the factory resolves and the HMA decision. The connector is not built: the scheduler side of
  LMCacheMPConnector connects to the LMCache server and waits for it (rules.py records it as hanging).
  The lmcache package comes from ENGINE_ORACLE_LMCACHE_PATH (an unpacked wheel and its pure-python
  dependencies, os.pathsep-separated; the venv is left as it is); without it the section says the
  stage needs a package the venv does not have.

Each part removes the shared-memory files it created (``/dev/shm/vllm_offload_<engine id>.mmap*``,
SharedOffloadRegion's), and only those. Steps that older releases do not have are skipped; a release
without a field records what it lacks instead of figures.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# --kv-offloading-size given to every cell: GiB, the total across the TP × PP workers (CacheConfig).
OFFLOADING_SIZE_GIB = 64.0
LMCACHE_PATH_ENV = "ENGINE_ORACLE_LMCACHE_PATH"
SHM_DIR = Path("/dev/shm")


# ----------------------------------------------------------------------------- shared memory


def shm_region_paths(engine_id: str) -> list[Path]:
    """The files SharedOffloadRegion keeps for ``engine_id``: /dev/shm/vllm_offload_<id>.mmap and its
    segments (.mmap.1, .mmap.2, ...); a DP replica's engine id carries a _dp<rank> suffix."""
    if not engine_id or "/" in engine_id:
        return []
    return sorted(SHM_DIR.glob(f"vllm_offload_{engine_id}*.mmap*"))


def remove_shm_regions(engine_ids: list[str] | set[str]) -> list[str]:
    """Unlink the shared-memory files of these engines (and nothing else); the names removed."""
    removed = []
    for engine_id in sorted(engine_ids):
        for path in shm_region_paths(engine_id):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path.name)
    return removed


@contextlib.contextmanager
def removing_shm_regions() -> Iterator[set[str]]:
    """Collect the engine ids of the configs built inside; their shared-memory files are removed on the way out."""
    engine_ids: set[str] = set()
    try:
        yield engine_ids
    finally:
        remove_shm_regions(engine_ids)


def engine_id_of(vllm_config: Any) -> str | None:
    ktc = getattr(vllm_config, "kv_transfer_config", None)
    return None if ktc is None else getattr(ktc, "engine_id", None)


# ----------------------------------------------------------------------------- the engine's planning


def plan_kv_cache(vllm_config: Any, runner: Any, specs: list[Any], budget_bytes: int) -> list[Any]:
    """Every worker's KVCacheConfig for a fixed per-rank budget, as the release plans it (kv_cache_planning
    from 0.33.0, kv_cache_utils before); ``specs`` are the workers' layer specs, rank-major."""
    import compat

    budgets = [budget_bytes] * len(specs)
    compat.register_kv_cache_specs(vllm_config)
    # the engine core resolves one layout for all workers where the release does (0.32.0 on), before planning
    compat.kv_cache_layout(vllm_config, runner, len(specs), specs)
    if not compat.has_kv_cache_planning():  # before 0.33.0 split the planning out of kv_cache_utils
        from vllm.v1.core.kv_cache_utils import get_kv_cache_configs as configs_before_0_33

        return list(configs_before_0_33(vllm_config, specs, budgets))
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups, get_kv_cache_configs

    groups = get_global_kv_cache_groups(vllm_config, specs)
    if hasattr(vllm_config, "adjust_dcp_kv_cache_interleave_size"):
        vllm_config.adjust_dcp_kv_cache_interleave_size(groups)
    return list(get_kv_cache_configs(vllm_config, specs, budgets, groups))


def _scheduler_kv_cache_config(vllm_config: Any, configs: list[Any]) -> Any:
    """What EngineCore._initialize_kv_caches hands the scheduler (and so its connector) after planning."""
    from vllm.v1.core import kv_cache_utils

    for config in configs:
        if hasattr(config, "kv_cache_layout"):
            config.kv_cache_layout = vllm_config.cache_config.kv_cache_layout
    sched = kv_cache_utils.generate_scheduler_kv_cache_config(configs)
    vllm_config.cache_config.num_gpu_blocks = sched.num_blocks
    groups = sched.kv_cache_groups
    if groups:
        sizes = [g.kv_cache_spec.block_size for g in groups if getattr(g.kv_cache_spec, "prefix_cacheable", True)]
        vllm_config.cache_config.block_size = min(sizes or [g.kv_cache_spec.block_size for g in groups])
    if hasattr(vllm_config, "validate_block_size"):
        vllm_config.validate_block_size()
    if hasattr(kv_cache_utils, "resolve_kv_cache_block_sizes"):
        scheduler_block, hash_block = kv_cache_utils.resolve_kv_cache_block_sizes(sched, vllm_config)
        alignment = None
        resolve_alignment = getattr(kv_cache_utils, "resolve_cache_hit_alignment_tokens", None)
        if resolve_alignment is not None:
            alignment = resolve_alignment(sched, vllm_config, scheduler_block, hash_block)
        for config in (*configs, sched):
            config.hash_block_size = hash_block
            if hasattr(config, "cache_hit_alignment_tokens"):
                config.cache_hit_alignment_tokens = alignment
    return sched


# ----------------------------------------------------------------------------- one backend


class _Refused(Exception):
    """A stage of the engine's start-up raised: the stage, with the exception as its cause."""

    def __init__(self, stage: str, exc: BaseException) -> None:
        super().__init__(stage)
        self.stage, self.exc = stage, exc


def _stage(name: str, fn: Any) -> Any:
    try:
        return fn()
    except Exception as exc:
        raise _Refused(name, exc) from exc


def _raised_at(exc: BaseException) -> str | None:
    """Where in the installed packages the exception was raised: path:line (function)."""
    where = None
    for frame in traceback.extract_tb(exc.__traceback__):
        for package in ("/vllm/", "/lmcache/"):
            if package in frame.filename:
                where = f"{package[1:]}{frame.filename.rsplit(package, 1)[1]}:{frame.lineno} ({frame.name})"
    return where


def _refusal(refused: _Refused) -> dict[str, Any]:
    exc = refused.exc
    text = str(exc).strip()
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    if missing and not missing.startswith("vllm"):
        return {
            "outcome": "not_reachable_offline",
            "stage": refused.stage,
            "why": f"{refused.stage} needs the {missing.split('.')[0]} package, which this venv does not have",
        }
    return {
        "outcome": "refused",
        "stage": refused.stage,
        "exception": f"{type(exc).__module__}.{type(exc).__qualname__}",
        "message": text.splitlines()[0] if text else type(exc).__name__,
        "raised_at": _raised_at(exc),
    }


def _engine_config(args: Any, backend: str, size_gib: float, engine_ids: set[str]) -> Any:
    from vllm.usage.usage_lib import UsageContext

    asked = dataclasses.replace(args, kv_offloading_backend=backend, kv_offloading_size=size_gib)
    config = asked.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
    engine_id = engine_id_of(config)
    if engine_id:
        engine_ids.add(engine_id)
    return config


def _resolved(vllm_config: Any) -> dict[str, Any]:
    """The kv_transfer_config the shorthand resolved into, and the hybrid KV cache manager decision."""
    ktc = vllm_config.kv_transfer_config
    extra = dict(getattr(ktc, "kv_connector_extra_config", None) or {})
    return {
        "kv_transfer_config": {
            "kv_connector": getattr(ktc, "kv_connector", None),
            "kv_role": getattr(ktc, "kv_role", None),
            "kv_connector_extra_config": {k: v for k, v in extra.items() if isinstance(v, int | float | str | bool)},
        },
        "hybrid_kv_cache_manager": not vllm_config.scheduler_config.disable_hybrid_kv_cache_manager,
    }


def _has_offloading_fields(args: Any) -> bool:
    names = {f.name for f in dataclasses.fields(args)}
    return {"kv_offloading_backend", "kv_offloading_size"} <= names


@contextlib.contextmanager
def _capturing_specs() -> Iterator[list[Any]]:
    """The offloading specs OffloadingSpecFactory.create_spec builds inside (the connector's own), in order."""
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    built: list[Any] = []
    original = OffloadingSpecFactory.__dict__["create_spec"]
    create = OffloadingSpecFactory.create_spec

    def create_and_keep(*args: Any, **kwargs: Any) -> Any:
        spec = create(*args, **kwargs)
        built.append(spec)
        return spec

    OffloadingSpecFactory.create_spec = create_and_keep
    try:
        yield built
    finally:
        OffloadingSpecFactory.create_spec = original


def _first(obj: Any, *names: str) -> Any:
    """The first of ``names`` the object has (the releases name the same figure differently), else None."""
    return next((getattr(obj, n) for n in names if getattr(obj, n, None) is not None), None)


def _spec_figures(spec: Any, world: int) -> dict[str, Any]:
    """What the offloading spec the connector built decided: the CPU blocks and their bytes, by the names
    0.33.0 uses (num_chunks, kv_bytes_per_chunk, ...) or the older ones (num_blocks, block_size_factor, ...)."""
    config = getattr(spec, "config", None)
    blocks_per_chunk = _first(spec, "blocks_per_chunk", "block_size_factor")
    tokens_per_block = _first(spec, "tokens_per_block", "gpu_block_size") or ()
    replicated = bool(getattr(spec, "replicated_layout", False))
    num_cpu_blocks = _first(spec, "num_chunks", "num_blocks")
    cpu_block_bytes = getattr(spec, "kv_bytes_per_chunk", None)
    figures: dict[str, Any] = {
        "offloading_spec": type(spec).__name__,
        "worker_kv_bytes_per_block": getattr(config, "worker_kv_bytes_per_block", None),
        "blocks_per_chunk": blocks_per_chunk,
        "offloaded_block_size_tokens": [int(t) * int(blocks_per_chunk or 1) for t in tokens_per_block],
        "tokens_per_hash": _first(spec, "tokens_per_hash", "hash_block_size"),
        "replicated_layout": replicated,
        "copies_per_cpu_block": 1 if replicated else world,
        "num_cpu_blocks": num_cpu_blocks,
        "cpu_block_bytes": cpu_block_bytes,
        "cpu_block_bytes_per_rank": getattr(spec, "cpu_page_size_per_worker", None),
        "cpu_bytes_allocated": None if None in (num_cpu_blocks, cpu_block_bytes) else num_cpu_blocks * cpu_block_bytes,
    }
    return {k: int(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in figures.items()}


def _native(args: Any, specs: list[Any], runner: Any, budget_bytes: int, size_gib: float) -> dict[str, Any]:
    from vllm.config import set_current_vllm_config
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole
    from vllm.utils.torch_utils import set_default_torch_dtype

    out: dict[str, Any] = {"engine_args": {"kv_offloading_backend": "native", "kv_offloading_size": size_gib}}
    with removing_shm_regions() as engine_ids:
        try:
            config = _stage("create_engine_config", lambda: _engine_config(args, "native", size_gib, engine_ids))
            out.update(_resolved(config))
            with set_current_vllm_config(config), set_default_torch_dtype(config.model_config.dtype):
                configs = _stage("kv_cache_plan", lambda: plan_kv_cache(config, runner, specs, budget_bytes))
                sched = _stage("scheduler_kv_cache_config", lambda: _scheduler_kv_cache_config(config, configs))
                out["num_gpu_blocks"] = int(sched.num_blocks)
                with _capturing_specs() as built:
                    connector = _stage(
                        "scheduler_connector",
                        lambda: KVConnectorFactory.create_connector(config, KVConnectorRole.SCHEDULER, sched),
                    )
        except _Refused as refused:
            out.update(_refusal(refused))
            return out
    out["connector_class"] = type(connector).__name__
    manager = getattr(getattr(connector, "connector_scheduler", None), "manager", None)
    if manager is not None:
        out["offloading_manager"] = type(manager).__name__
    if built:
        out.update(_spec_figures(built[0], int(config.parallel_config.world_size)))
    out["outcome"] = "works"
    return out


def _lmcache_on_path() -> str | None:
    """Put the unpacked lmcache (ENGINE_ORACLE_LMCACHE_PATH) on sys.path; its version, if it imports."""
    for entry in reversed([p for p in os.environ.get(LMCACHE_PATH_ENV, "").split(os.pathsep) if p]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    importlib.invalidate_caches()
    try:
        return importlib.metadata.version("lmcache")
    except importlib.metadata.PackageNotFoundError:
        return None


def _lmcache(args: Any, size_gib: float) -> dict[str, Any]:
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1 import supports_hma

    out: dict[str, Any] = {"engine_args": {"kv_offloading_backend": "lmcache", "kv_offloading_size": size_gib}}
    out["lmcache_version"] = _lmcache_on_path()
    with removing_shm_regions() as engine_ids:
        try:
            config = _stage("create_engine_config", lambda: _engine_config(args, "lmcache", size_gib, engine_ids))
            out.update(_resolved(config))
            cls = _stage("connector_class", lambda: KVConnectorFactory.get_connector_class(config.kv_transfer_config))
        except _Refused as refused:
            out.update(_refusal(refused))
            return out
    out["connector_class"] = f"{cls.__module__}.{cls.__qualname__}"
    out["connector_supports_hma"] = bool(supports_hma(cls))
    out["outcome"] = "configured"
    out["not_built"] = (
        "LMCacheMPConnector's scheduler side waits for the LMCache server (rules.py records it hanging) and "
        "LMCacheConnectorV1's starts LMCache's engine; the factory's HMA check reads the class (SupportsHMA)"
    )
    return out


def offload_figures(args: Any, specs: list[Any], runner: Any, budget_bytes: int) -> dict[str, Any]:
    """The offload section of a cell: what the engine does with each --kv-offloading-backend.

    ``args`` is the cell's EngineArgs, ``specs`` the workers' layer specs (rank-major), ``runner`` what
    get_supported_kv_cache_layouts reads, ``budget_bytes`` the per-rank KV budget of the cell."""
    size = OFFLOADING_SIZE_GIB
    if not _has_offloading_fields(args):
        return {"kv_offloading_size_gib": size, "not_in_release": "EngineArgs has no kv_offloading_backend/size"}
    section: dict[str, Any] = {"kv_offloading_size_gib": size}
    for backend, run in (
        ("native", lambda: _native(args, specs, runner, budget_bytes, size)),
        ("lmcache", lambda: _lmcache(args, size)),
    ):
        try:
            section[backend] = run()
        except Exception as exc:  # the oracle's own failure (a release it does not know): recorded, the cell kept
            section[backend] = {"outcome": "oracle_error", "error": f"{type(exc).__name__}: {exc}"}
    return section
