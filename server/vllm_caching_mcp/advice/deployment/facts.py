"""The numbers review rules compare, each with where it was written: the facts of one workload
(parallel sizes, tier sizes, what the container gives the engine)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from ...knowledge import Connector, FactName, Gated, Knowledge, TierSize
from ...versions import Version
from ..common import readable_number
from .bounds import clip
from .flags import CLI_NUMBER, parse_number
from .model import GIB, ConnectorUse, EnvUse, FlagUse, Location, Mount, Workload


@dataclass
class Numbers:
    """Numbers as vLLM reads them from the flags, variables and extra config, with a note for each
    that is a number too large to use."""

    flags: dict[str, FlagUse]
    notes: list[str]
    transfer_location: Location | None

    def text(self, text: str | bool | None, what: str, where: Location | None) -> float | None:
        value = parse_number(text)
        if value is None and isinstance(text, str) and CLI_NUMBER.fullmatch(text):
            self.notes.append(f"{where}: {what} {clip(text.strip(), 40)} is beyond ±2^63; it is not used")
        return value

    def flag(self, name: str) -> float | None:
        flag = self.flags.get(name)
        return self.text(flag.value, name, flag.location) if flag is not None else None

    def flag_or(self, name: str, default: float) -> float:
        found = self.flag(name)
        return found if found is not None else default

    def extra(self, extra: dict[str, Any], key: str) -> float | None:
        raw = extra.get(key)
        value = readable_number(raw)
        if value is None and isinstance(raw, (int, float)) and not isinstance(raw, bool):
            shown = clip(repr(raw), 40)
            self.notes.append(
                f"{self.transfer_location}: kv_connector_extra_config.{key} {shown} is out of range; not used"
            )
        return value


class InUse(NamedTuple):
    """A connector the workload runs, its knowledge entry, and the extra config it is given."""

    use: ConnectorUse
    entry: Connector | None
    extra: dict[str, Any] | None


def workload_facts(
    workload: Workload, numbers: Numbers, in_use: list[InUse], env: dict[str, EnvUse]
) -> tuple[dict[FactName, float], dict[FactName, Location]]:
    """The numbers the rules compare, and where each was written."""
    flags = numbers.flags
    tp = numbers.flag_or("--tensor-parallel-size", 1)
    pp = numbers.flag_or("--pipeline-parallel-size", 1)
    dp = numbers.flag_or("--data-parallel-size", 1)
    facts: dict[FactName, float] = {"tp": tp, "pp": pp, "dp": dp, "world_size": tp * pp}
    parallel: tuple[tuple[FactName, str], ...] = (
        ("tp", "--tensor-parallel-size"),
        ("pp", "--pipeline-parallel-size"),
        ("dp", "--data-parallel-size"),
    )
    locations: dict[FactName, Location] = {fact: flags[name].location for fact, name in parallel if name in flags}
    world = flags.get("--tensor-parallel-size") or flags.get("--pipeline-parallel-size")
    if world is not None:
        locations["world_size"] = world.location
    facts["gpus_used"] = _gpus_used(numbers, tp * pp, dp)
    sizes = [found for c in in_use if (found := _tier_size(c, numbers, env, tp, pp)) is not None]
    tier_gib = sum(gib for gib, _ in sizes) if sizes else None
    if tier_gib is not None:
        facts["offload_tier_gib"] = tier_gib
        if sizes[0][1] is not None:
            locations["offload_tier_gib"] = sizes[0][1]
    weights = numbers.flag_or("--cpu-offload-gb", 0) * tp * pp
    if tier_gib is not None or weights:
        facts["host_offload_gib"] = ((tier_gib or 0) + weights) * dp / workload.nodes
        where = locations.get("offload_tier_gib") or (flags["--cpu-offload-gb"].location if weights else None)
        if where is not None:
            locations["host_offload_gib"] = where
    parsed_len = numbers.flag("--max-model-len")
    if parsed_len is not None and parsed_len > 0:
        facts["max_model_len"] = parsed_len
        locations["max_model_len"] = flags["--max-model-len"].location
    memory_facts(workload, facts, locations)
    return facts, locations


def _gpus_used(numbers: Numbers, world_size: float, dp: float) -> float:
    """The GPUs one container's engines take: TP x PP x prefill context parallel per data-parallel engine, and
    the engines it runs: --data-parallel-size-local, one with an external rank (--data-parallel-rank), else
    all of --data-parallel-size (wheel:vllm==0.34.0:vllm/engine/arg_utils.py:2484-2566; config/parallel.py:1057)."""
    per_engine = world_size * numbers.flag_or("--prefill-context-parallel-size", 1)
    if "--data-parallel-size-local" in numbers.flags:
        return per_engine * numbers.flag_or("--data-parallel-size-local", 1)
    return per_engine * (1 if "--data-parallel-rank" in numbers.flags else dp)


def memory_facts(workload: Workload, facts: dict[FactName, float], locations: dict[FactName, Location]) -> None:
    """The container's memory limit and request, each where it was written."""
    given: tuple[tuple[FactName, float | None, Location | None], ...] = (
        ("container_memory_limit_gib", workload.memory_limit_gib, workload.memory_limit_location),
        ("container_memory_request_gib", workload.memory_request_gib, workload.memory_request_location),
    )
    for fact, value, where in given:
        if value is not None:
            facts[fact] = value
            if where is not None:
                locations[fact] = where


_DEVICE = re.compile(r"\d+|(GPU|MIG)-[0-9A-Za-z/-]+")


def visible_gpus(env: dict[str, EnvUse], facts: dict[FactName, float], locations: dict[FactName, Location]) -> None:
    """``visible_gpus``: how many GPUs a literal CUDA_VISIBLE_DEVICES lets the engine see (indices or
    GPU/MIG UUIDs, comma-separated; an empty value hides every GPU). Left out when it is not literal
    or holds anything else, such as -1, which CUDA reads as the end of the list."""
    use = env.get("CUDA_VISIBLE_DEVICES")
    if use is None or use.value is None:
        return
    devices = [d.strip() for d in use.value.split(",")] if use.value.strip() else []
    if all(_DEVICE.fullmatch(d) for d in devices):
        facts["visible_gpus"] = float(len(devices))
        locations["visible_gpus"] = use.location


# /dev/shm of a container that sets none: Docker's default (docs.docker.com, docker container run
# --shm-size), which containerd and CRI-O give a Kubernetes pod too.
DEFAULT_SHM_GIB = 64 / 1024


# The message queues of the multiprocessing executor (TP x PP > 1), each a ring buffer of 10 chunks in
# /dev/shm: the broadcast queue's chunk is VLLM_MQ_MAX_CHUNK_BYTES_MB (16 MiB by default), each local
# worker's response queue 24 MiB (vllm/v1/executor/multiproc_executor.py, shm_broadcast.py in 0.27.0-0.33.0).
_MQ_CHUNKS, _MQ_CHUNK_MIB, _RESPONSE_CHUNK_MIB = 10, 16, 24


def container_facts(
    workload: Workload,
    in_use: list[InUse],
    numbers: Numbers,
    env: dict[str, EnvUse],
    knowledge: Knowledge,
    version: Version,
    facts: dict[FactName, float],
    locations: dict[FactName, Location],
) -> None:
    """``gpus_given`` (the GPUs the container is given) and ``visible_gpus`` from them,
    ``container_memory_request_gib``, and for
    /dev/shm: ``shm_gib`` (the container's own; left out when it is the node's: a bare host, the host's
    IPC namespace, a memory emptyDir without a size), ``shm_offload_gib`` (the native CPU tier one node
    keeps there) and ``worker_queues_shm_gib`` (the executor's message queues), both for every
    data-parallel engine the container runs."""
    if workload.gpu_count is not None and workload.nodes == 1:
        given = float(workload.gpu_count)
        facts["gpus_given"] = given
        locations["gpus_given"] = workload.gpu_location or workload.location  # the nvidia.com/gpu, --gpus
        facts["visible_gpus"] = min(facts.get("visible_gpus", given), given)
        locations.setdefault("visible_gpus", workload.location)
    if workload.shm_gib is not None and not workload.host_ipc:
        facts["shm_gib"] = workload.shm_gib
        locations["shm_gib"] = workload.shm_location or workload.location
    elif not (
        workload.host_ipc
        or workload.shm_mounted
        or workload.pod_elsewhere
        or workload.source in ("command-line", "lmcache-config", "dockerfile")  # /dev/shm is set where it runs
    ):
        facts["shm_gib"] = DEFAULT_SHM_GIB
        # where a /dev/shm volume would be mounted: the container's volumeMounts, else the container
        locations["shm_gib"] = workload.shm_location or workload.location
    in_shm = knowledge.by_id.get("feature.native-cpu-tier-in-shm")
    if isinstance(in_shm, Gated) and in_shm.exists_in(version):
        tp, pp = facts["tp"], facts["pp"]
        native = [c for c in in_use if c.use.name == "OffloadingConnector" and _cpu_spec(c.extra)]
        sizes = [found for c in native if (found := _tier_size(c, numbers, env, tp, pp)) is not None]
        if sizes:
            # each data-parallel engine in the container keeps its own region
            facts["shm_offload_gib"] = sum(gib for gib, _ in sizes) * facts["dp"] / workload.nodes
            if sizes[0][1] is not None:
                locations["shm_offload_gib"] = sizes[0][1]
    if facts["world_size"] > 1:
        chunk = env.get("VLLM_MQ_MAX_CHUNK_BYTES_MB")
        chunk_mib = parse_number(chunk.value) if chunk is not None and chunk.value is not None else None
        local_workers = max(1.0, facts["world_size"] / workload.nodes)
        mib = _MQ_CHUNKS * ((chunk_mib or _MQ_CHUNK_MIB) + _RESPONSE_CHUNK_MIB * local_workers)
        facts["worker_queues_shm_gib"] = mib * facts["dp"] / 1024
        if "world_size" in locations:
            locations["worker_queues_shm_gib"] = locations["world_size"]


def _cpu_spec(extra: dict[str, Any] | None) -> bool:
    """Whether an OffloadingConnector runs the CPU spec (CPUOffloadingSpec, the default spec_name)."""
    spec = (extra or {}).get("spec_name")
    return spec is None or spec == "CPUOffloadingSpec"


def _tier_size(
    connector: InUse, numbers: Numbers, env: dict[str, EnvUse], tp: float, pp: float
) -> tuple[float, Location | None] | None:
    """The GiB of CPU memory the connector's tier takes over all the engine's ranks, and where that was
    given: its readings in the knowledge are in the order vLLM applies them, so the last one given wins."""
    found: tuple[float, Location | None] | None = None
    for reading in connector.entry.tier_size if connector.entry is not None else ():
        given = _given(reading, connector, numbers, env)
        if given is not None:
            value, where = given
            gib = value / GIB if reading.unit == "bytes" else value
            found = (gib * tp * pp if reading.scope == "per_rank" else gib), where
    return found


def _given(
    reading: TierSize, connector: InUse, numbers: Numbers, env: dict[str, EnvUse]
) -> tuple[float, Location | None] | None:
    """The number one tier reading finds in the workload's configuration, and where; None when not given."""
    value: float | None = None
    where: Location | None = None
    if reading.given_by == "kv_offloading_size":
        if connector.use.via == "offload-shorthand":
            value, where = numbers.flag("--kv-offloading-size"), numbers.flags["--kv-offloading-size"].location
    elif reading.given_by == "extra_config":
        if connector.extra is not None and reading.key is not None:
            value, where = numbers.extra(connector.extra, reading.key), numbers.transfer_location
    elif reading.key is not None and reading.key in env:
        use = env[reading.key]
        value, where = numbers.text(use.value, use.name, use.location), use.location
    return None if value is None else (value, where)


# The in-process LMCache connector: each vLLM worker process (TP x PP rank) builds its own LMCache engine.
IN_PROCESS_LMCACHE = "connector.lmcache"


def lmcache_disk_facts(
    workload: Workload,
    in_use: list[InUse],
    numbers: Numbers,
    env: dict[str, EnvUse],
    facts: dict[FactName, float],
    locations: dict[FactName, Location],
) -> None:
    """The local disk tier of an in-process LMCache and the volume it is written to.

    LMCache builds a LocalDiskBackend only when local_disk is set and max_local_disk_size > 0, and each
    one fills up to that size (wheel:lmcache==0.5.6:lmcache/v1/storage_backend/__init__.py:216-219;
    local_disk_backend.py:190), one per worker process: ``lmcache_disk_gib`` is the container's whole disk
    tier. Where the files show the whole pod, the directory's mount gives ``lmcache_disk_volume_gib`` (an
    emptyDir's sizeLimit), ``lmcache_disk_unbounded_gib`` (an emptyDir without one: the node's ephemeral
    storage), ``lmcache_disk_memory_gib`` (a Memory emptyDir: the tier is RAM) or ``lmcache_disk_layer_gib``
    (no mount: the container's own filesystem)."""
    lmcache = next((c for c in in_use if c.use.entry_id == IN_PROCESS_LMCACHE), None)
    if lmcache is None:
        return
    extra = lmcache.extra or {}
    path, size, where = _disk_setting(extra, env, numbers)
    if not path or size is None or size <= 0:
        return
    gib = size * facts["world_size"] / workload.nodes * facts["dp"]
    facts["lmcache_disk_gib"] = gib
    if where is not None:
        locations["lmcache_disk_gib"] = where
    if not workload.mounts_known:
        return
    mount = _mount_of(workload.mounts, path)
    if mount is None:
        facts["lmcache_disk_layer_gib"] = gib
    elif mount.read_only:
        return  # LMCache cannot write there at all; no size of it is judged
    elif mount.backing == "memory":
        facts["lmcache_disk_memory_gib"] = gib
    elif mount.backing == "node-disk" and mount.size_gib is not None:
        facts["lmcache_disk_volume_gib"] = mount.size_gib
        locations["lmcache_disk_volume_gib"] = mount.location
    elif mount.backing == "node-disk":
        facts["lmcache_disk_unbounded_gib"] = gib


def _disk_setting(
    extra: dict[str, Any], env: dict[str, EnvUse], numbers: Numbers
) -> tuple[str | None, float | None, Location | None]:
    """The first local_disk directory, max_local_disk_size and where the size was given: the connector's
    lmcache.* extra config is applied after the variables and config file, so it wins."""
    path_use, size_use = env.get("LMCACHE_LOCAL_DISK"), env.get("LMCACHE_MAX_LOCAL_DISK_SIZE")
    path = path_use.value if path_use is not None else None
    size = numbers.text(size_use.value, size_use.name, size_use.location) if size_use is not None else None
    where = size_use.location if size_use is not None else None
    if isinstance(extra.get("lmcache.local_disk"), str):
        path = extra["lmcache.local_disk"]
    if "lmcache.max_local_disk_size" in extra:
        size, where = numbers.extra(extra, "lmcache.max_local_disk_size"), numbers.transfer_location
    first = path.split(",")[0].strip().removeprefix("file://") if path else None
    return first, size, where


def _mount_of(mounts: list[Mount], path: str) -> Mount | None:
    """The mount a directory is in: the one with the longest mount path above it."""
    above = [m for m in mounts if path == m.path or path.startswith(m.path.rstrip("/") + "/")]
    return max(above, key=lambda m: len(m.path), default=None)
