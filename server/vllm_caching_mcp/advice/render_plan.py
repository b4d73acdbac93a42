"""What every plan needs, whatever the backend: the request read into sizes, hosts and ports, the
knowledge it cites, the vLLM command of a role, and what each container needs to start (memory,
/dev/shm, token, model cache, probes). The backends are methods of the mixins beside it.
"""

from __future__ import annotations

import json
import math
import uuid
from typing import TYPE_CHECKING, Any, Literal

from ..knowledge import (
    Backend,
    Connector,
    Gated,
    Knowledge,
    Pitfall,
    Recipes,
    Setting,
    ranged_at,
)
from ..versions import Version, in_range
from .common import (
    AdviceError,
    Citation,
    VersionContext,
    cite,
    readable_number,
    resolve_version,
)

if TYPE_CHECKING:  # jinja2 is imported on the first render, not at server start-up
    pass
from .render_models import (
    GIB,
    SHARED_TIER_DEFAULT_GIB,
    Component,
    ComponentMemory,
    Env,
    HostMemory,
    Origin,
    Plan,
    Port,
    Ports,
    RenderConfigRequest,
    ValueSource,
    model_params_b,
)


class PlannerBase:
    """The state of one rendering and the helpers every backend's method uses."""

    def __init__(self, request: RenderConfigRequest, knowledge: Knowledge, recipes: Recipes, backend: Backend) -> None:
        self.r = request
        self.k = knowledge
        self.recipes = recipes
        self.backend = backend
        self.version, self.context = resolve_version(knowledge, request.version)
        self.lm_version: Version | None = None
        self.lm_context: VersionContext | None = None
        if backend in ("lmcache", "lmcache_p2p", "lmcache_mp"):
            self.lm_version, self.lm_context = resolve_version(
                knowledge, request.lmcache_version, package="lmcache", field="lmcache_version"
            )
        self.kube = request.format == "kubernetes"
        # Stands for "this pod's IP" / "this node's IP" until the format decides how to say it.
        self.pod_ip = f"@@pod-ip-{uuid.uuid4().hex}@@"
        self.host_ip = f"@@host-ip-{uuid.uuid4().hex}@@"
        self.plan = Plan(components=[])
        self.tp = request.parallelism.tensor_parallel_size
        self.pp = request.parallelism.pipeline_parallel_size
        assert request.name is not None  # render_config fills in the default
        self.name: str = request.name
        self.facts = recipes.facts
        # Processes on one host must not share a port; in Kubernetes each pod has its own, so every
        # vLLM keeps the default HTTP port there.
        self._ports: dict[str, Ports] = {}
        self._gpus_taken: dict[str, int] = {}  # by host: the GPUs handed out to the roles there
        result = request.size_offload or {}
        self.size_offload_left = readable_number(result.get("host_ram_left_gib"))
        if request.image is not None:
            self.image = request.image
            self.note("image", self.image, "user")
        else:
            self.image = f"vllm/vllm-openai:v{self.version}"
            self.note("image", self.image, "default", "official image tag for the release")

    # -- helpers ------------------------------------------------------------------------------
    def ports_on(self, host: str | None) -> Ports:
        """The ports handed out on one host (None: this instance's); the helpers' fixed ports are kept
        free on every host, since they may run on any of them."""
        key = host or self.r.hosts.this_instance or "localhost"
        if key not in self._ports:
            ports = self._ports[key] = Ports()
            ports.reserve(self.facts.pd_proxy_port.port)
            if self.backend == "lmcache_p2p":
                ctrl = self.facts.lmcache_controller
                ports.reserve(ctrl.http_port, ctrl.pull_port, ctrl.reply_port)
            if self.backend == "lmcache_mp":
                ports.reserve(self.facts.lmcache_mp_address.port)
        return self._ports[key]

    def note(self, name: str, value: Any, origin: Origin, note: str | None = None) -> None:
        self.plan.values.append(ValueSource(name=name, value=str(value), origin=origin, note=note))

    def cite(self, entry_id: str) -> None:
        entry = self.k.by_id.get(entry_id)
        if entry is not None:
            self.plan.cited.setdefault(entry_id, cite(entry_id, entry, self.k))

    def setting(self, entry_id: str) -> Setting:
        entry = self.k.by_id[entry_id]
        assert isinstance(entry, Setting)
        self.cite(entry_id)
        return entry

    def gated(self, entry_id: str) -> Gated:
        entry = self.k.by_id[entry_id]
        assert isinstance(entry, Gated), entry_id
        return entry

    def available(self, entry_id: str, version: Version | None = None) -> bool:
        entry = self.k.by_id[entry_id]
        assert isinstance(entry, Gated), entry_id
        self.cite(entry_id)
        return entry.exists_in(version or self.version)

    def require(self, entry_id: str, what: str, field: str = "version") -> None:
        if not self.available(entry_id):
            entry = self.k.by_id[entry_id]
            assert isinstance(entry, Gated), entry_id
            when = (
                f"it first ships in {entry.introduced}"
                if entry.status_at(self.version) == "not_yet"
                else f"it was removed in {entry.removed}"
            )
            raise AdviceError(field, f"{what} is not in vLLM {self.version}; {when}")

    def default_of(self, entry_id: str) -> Any:
        found = ranged_at(self.setting(entry_id).defaults, self.version)
        return found.value if found else None

    def pitfall_applies(self, pitfall_id: str) -> bool:
        p = self.k.by_id[pitfall_id]
        assert isinstance(p, Pitfall)
        self.cite(pitfall_id)
        return in_range(p.versions, self.version)

    def hma(self, connector_id: str) -> str:
        c = self.k.by_id[connector_id]
        assert isinstance(c, Connector)
        return c.hma_at(self.version) or "no"

    def host(self, given: str | None, label: str, role: str) -> str:
        if self.kube:
            return self.pod_ip
        if given:
            self.note(f"hosts.{label}", given, "user")
            return given
        self.note(
            f"hosts.{label}", "localhost", "default", f"replace with the {role}'s routable IP for more than one machine"
        )
        return "localhost"

    # -- sizes --------------------------------------------------------------------------------
    def total_gib(self, required: bool = True) -> float | None:
        s = self.r.sizes
        if s.kv_offloading_size_gib is not None:
            self.note("sizes.kv_offloading_size_gib", s.kv_offloading_size_gib, "user", "GiB, total across ranks")
            return s.kv_offloading_size_gib
        if s.cpu_bytes_to_use is not None:
            gib = s.cpu_bytes_to_use / GIB
            self.note("kv_offloading_size_gib", gib, "computed", "cpu_bytes_to_use ÷ 2^30")
            return gib
        if s.lmcache_max_local_cpu_size_gib is not None:
            gib = s.lmcache_max_local_cpu_size_gib * self.tp * self.pp
            self.note("kv_offloading_size_gib", gib, "computed", "LMCache per-worker GiB × TP × PP")
            return gib
        if required:
            raise AdviceError(
                "sizes.kv_offloading_size_gib",
                "give the CPU tier size in GiB (total across ranks), or cpu_bytes_to_use, or a size_offload result",
            )
        return None

    def cpu_bytes(self) -> int:
        gib = self.total_gib()
        assert gib is not None
        value = self.r.sizes.cpu_bytes_to_use or round(gib * GIB)
        self.note(
            "cpu_bytes_to_use", value, "user" if self.r.sizes.cpu_bytes_to_use else "computed", "GiB × 2^30, total"
        )
        self.plan.cpu_bytes = value
        self.cite("spec.cpu-bytes-to-use")
        return value

    # -- kv-transfer-config ---------------------------------------------------------------------
    def ktc(self, connector_id: str, role: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        connector = self.k.by_id[connector_id]
        assert isinstance(connector, Connector)
        self.require(connector_id, connector.name, "backend")
        if role not in connector.roles:
            raise AdviceError("backend", f"{connector.name} does not take kv_role {role}; it takes {connector.roles}")
        keys = self.recipes.facts.kv_transfer_config_keys
        config: dict[str, Any] = {keys.connector: connector.name, keys.role: role}
        if extra:
            config[keys.extra_config] = extra
        return config

    def vllm(
        self,
        name: str,
        description: str,
        config: dict[str, Any] | None,
        extra_flags: list[str] | None = None,
        host: str | None = None,
    ) -> Component:
        """A vLLM instance; ``host`` is the machine it runs on in a script render (None: this instance's)."""
        argv = ["vllm", "serve", self.r.model]
        for flag, value in (
            ("--tensor-parallel-size", self.tp),
            ("--pipeline-parallel-size", self.pp),
            ("--data-parallel-size", self.r.parallelism.data_parallel_size),
        ):
            if value > 1:
                argv += [flag, str(value)]
        default_port = self.facts.vllm_http_port.port
        port = default_port if self.kube else self.ports_on(host).block(default_port)[0]
        if port != default_port:
            argv += ["--port", str(port)]
            self.note(f"{name} --port", port, "computed", "its own HTTP port on a host shared with the others")
        argv += extra_flags or []
        if config is not None:
            argv += ["--kv-transfer-config", json.dumps(config, separators=(",", ":"))]
        return Component(
            name=name,
            description=description,
            argv=argv,
            image=self.image,
            gpus=self.tp * self.pp * self.r.parallelism.data_parallel_size,
            ports=[Port("http", port)],
            kv_transfer_config=config,
        )

    # -- backends -----------------------------------------------------------------------------
    def build(self) -> Plan:
        getattr(self, f"_{self.backend}")()
        for c in self.plan.components:
            self._provision(c)
        self.plan.memory = self._host_memory()
        return self.plan

    # -- what every container needs to start: memory, /dev/shm, token, model cache, probes ---------
    def _shm_tier(self, spec: Literal["cpu", "tiering"], gib: float) -> float:
        """``gib`` where the release keeps that CPU tier in /dev/shm, else 0."""
        shm = self.facts.shared_memory
        versions = shm.native_cpu_versions if spec == "cpu" else shm.tiering_versions
        if not in_range(versions, self.version):
            return 0.0
        self.cite_fact("shared_memory")
        return gib

    def cite_fact(self, name: str) -> None:
        fact = getattr(self.facts, name)
        self.plan.cited.setdefault(
            f"recipes.facts.{name}",
            Citation(
                id=f"recipes.facts.{name}",
                sources=list(fact.sources),
                verified_at=fact.verified_at,
                evidence=fact.evidence,
            ),
        )

    def _provision(self, c: Component) -> None:
        memory = self.facts.host_memory
        if c.kind == "helper":  # a proxy, a controller, or an LMCache server with its L1 pool
            c.memory_gib = math.ceil(c.pinned_gib * (1 + memory.pinned_headroom) + memory.helper_gib)
            return
        shm = self.facts.shared_memory
        workers = self.tp * self.pp * self.r.parallelism.data_parallel_size
        headroom = shm.multi_worker_headroom_gib if workers > 1 else shm.headroom_gib
        if not c.shm:
            c.shm_gib = c.shm_tier_gib + headroom
        # The tier in /dev/shm is charged to the container once: it is part of what it pins.
        pinned = c.pinned_gib * (1 + memory.pinned_headroom)
        c.memory_gib = math.ceil(pinned + headroom + memory.process_gib + memory.per_gpu_gib * c.gpus)
        self.cite_fact("host_memory")
        cache = self.facts.model_cache
        self.cite_fact("model_cache")
        c.env.append(
            Env(cache.token_env, secret=(cache.secret_name, cache.secret_key), optional=self.r.hf_token == "optional")
        )
        if self.kube:
            pvc = self.r.model_cache == "pvc"
            if not pvc and self.r.model_cache_path is None:
                raise AdviceError("model_cache_path", "model_cache host_path needs the node directory to mount")
            c.model_cache = f"{self.name}-{c.name}-model-cache" if pvc else self.r.model_cache_path
        else:
            c.model_cache = self.r.model_cache_path or "vllm-model-cache"
        startup = self.facts.vllm_startup
        self.cite_fact("vllm_startup")
        minutes = startup.minutes_for(model_params_b(self.r.model))
        c.startup_failures = minutes * 60 // startup.period_seconds
        self.note(
            f"{c.name} start-up budget", f"{minutes} min", "knowledge", "startupProbe failureThreshold × periodSeconds"
        )

    def _host_memory(self) -> HostMemory:
        comps = [
            ComponentMemory(
                name=c.name, memory_gib=c.memory_gib, pinned_gib=round(c.pinned_gib, 3), shm_gib=round(c.shm_gib, 3)
            )
            for c in self.plan.components
        ]
        # One host runs every process of a script render; in Kubernetes the largest pod sets the bound.
        on_host = [c.memory_gib for c in self.plan.components]
        needed = max(on_host) if self.kube else sum(on_host)
        pinned = max((c.pinned_gib for c in self.plan.components), default=0.0)
        basis = (
            "the largest pod, as each may land on its own node"
            if self.kube
            else "every process of the render on one host"
        )
        left: float | None = None
        ram = self.r.host_ram_gib
        if ram is not None:
            left = ram - needed
            if left < 0:
                raise AdviceError(
                    "host_ram_gib",
                    f"{ram:g} GiB is less than the {needed} GiB this render gives its containers ({basis}); "
                    "shrink the CPU tier or give a larger host",
                )
            self._check_host_shm(ram)
        elif self.size_offload_left is not None:
            # size_offload's figure is after the tier (and its reservation); take off the rest of ours.
            left = self.size_offload_left - (needed - pinned)
            basis += "; from size_offload's host_ram_left_gib less the memory beyond the tier"
        if left is not None:
            self.note("host RAM left", f"{left:g} GiB", "computed", basis)
        return HostMemory(
            components=comps,
            host_ram_gib=ram,
            host_ram_left_gib=None if left is None else round(left, 3),
            basis=basis,
        )

    def shared_tier_gib(self) -> int:
        """The size the ReadWriteMany PVC of the fs tier asks for: sizes.disk_gib, else a default noted."""
        if self.r.sizes.disk_gib is not None:
            return math.ceil(self.r.sizes.disk_gib)
        return SHARED_TIER_DEFAULT_GIB

    def _check_host_shm(self, ram: float) -> None:
        """Docker with --ipc=host, a bare host and the LMCache MP server use the host's /dev/shm, a tmpfs
        of half the RAM by default."""
        shm = self.facts.shared_memory
        if self.kube and not any(c.shm for c in self.plan.components):
            return
        host_shm = ram * shm.host_default_fraction_of_ram
        needed = sum(c.shm_gib for c in self.plan.components)
        if needed > host_shm:
            self.plan.notes.append(
                f"This render keeps {needed:g} GiB in the host's /dev/shm, more than its default size of "
                f"{host_shm:g} GiB (half of {ram:g} GiB RAM): remount it larger first, e.g. "
                f"mount -o remount,size={math.ceil(needed) + 1}G /dev/shm."
            )

    def _p2p_tier_port(self) -> int:
        """The port the p2p tier binds: VLLM_P2P_SIDE_CHANNEL_PORT's default where vLLM reads it, else the
        tier entry's own default (0.25.x)."""
        for entry_id in ("env.vllm-p2p-side-channel-port", "spec.tier.p2p.port"):
            port = self.default_of(entry_id) if self.available(entry_id) else None
            if isinstance(port, int):
                return port
        raise AdviceError("version", f"no p2p tier port is known for vLLM {self.version}")
