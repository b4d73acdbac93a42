"""The plans of prefill/decode disaggregation: the two roles, their GPUs and side ports, and the proxy
between them (NIXL, Mooncake, NIXL with an offload tier).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..knowledge import (
    PdProxy,
)
from ..versions import in_range
from .common import (
    AdviceError,
    cite,
)

if TYPE_CHECKING:  # jinja2 is imported on the first render, not at server start-up
    pass
from .ports import deployment_ports, layouts_at
from .render_models import DEFAULT_GPUS_PER_HOST, GIB, PROXY_DIR, Component, Env, Origin, Port, children_key
from .render_plan import PlannerBase


class PdPlans(PlannerBase):
    """Backends nixl_pd, multi_nixl_offload and mooncake_pd."""

    def _pd(self, connector_id: str, extra: dict[str, Any] | None, local_tier: bool = False) -> None:
        self.cite(connector_id)
        fabric = self.r.fabric or "ethernet"
        self.note("fabric", fabric, "user" if self.r.fabric else "default")
        for role, label, given in (
            ("kv_producer", "prefill", self.r.hosts.prefill),
            ("kv_consumer", "decode", self.r.hosts.decode),
        ):
            if local_tier:
                children = [
                    self.ktc("connector.nixl", role),
                    self.ktc("connector.offloading", "kv_both", {"cpu_bytes_to_use": self.cpu_bytes()}),
                ]
                self.require("spec.cpu-bytes-to-use", "cpu_bytes_to_use (the byte-sized CPU tier)")
                config = self.ktc("connector.multi", role, {children_key(self.k): children})
            else:
                config = self.ktc(connector_id, role, extra)
            c = self.vllm(label, f"{label} instance ({role})", config, host=given)
            if local_tier:
                gib = self.plan.cpu_bytes / GIB if self.plan.cpu_bytes else 0.0
                c.pinned_gib, c.shm_tier_gib = gib, self._shm_tier("cpu", gib)
            host = self.host(given, label, f"{label} instance")
            if connector_id == "connector.mooncake":
                bootstrap = self._side_ports(label, given, "env.vllm-mooncake-bootstrap-port", "MooncakeConnector")
                c.env.append(Env("VLLM_MOONCAKE_BOOTSTRAP_PORT", str(bootstrap[0])))
                c.ports += [Port("bootstrap" if n == 0 else f"bootstrap-{n}", p) for n, p in enumerate(bootstrap)]
            else:
                side = self._side_ports(label, given, "env.vllm-nixl-side-channel-port", "NixlConnector")
                c.env += [
                    Env("VLLM_NIXL_SIDE_CHANNEL_HOST", host, "status.podIP" if self.kube else None),
                    Env("VLLM_NIXL_SIDE_CHANNEL_PORT", str(side[0])),
                    Env("UCX_TLS", self.facts.ucx_tls_by_fabric.transports(fabric)),
                ]
                self.cite("pitfall.nixl-side-channel-service-address")
                self.cite("pitfall.nixl-ucx-without-cuda")
                c.ports += [Port("side-channel" if n == 0 else f"side-channel-{n}", p) for n, p in enumerate(side)]
            c.rdma = fabric in ("infiniband", "roce")
            if c.rdma:
                self.cite_fact("rdma")
                self.note(
                    f"{label} RDMA resource",
                    self.r.rdma_resource,
                    "user" if "rdma_resource" in self.r.model_fields_set else "default",
                    "device-plugin resource; IPC_LOCK added",
                )
            c.service = "headless"
            self._own_gpus(c, given)
            self.plan.components.append(c)
        proxy = self.recipes.pd_proxy(connector_id, self.version)
        if proxy is None:  # the loader checks every release with the connector; one older than those has none
            raise AdviceError("version", f"no P/D proxy is known for vLLM {self.version}; give a release it covers")
        self.plan.cited.setdefault(proxy.id, cite(proxy.id, proxy, self.k))
        self._pd_proxy(proxy)

    def _own_gpus(self, c: Component, host: str | None) -> None:
        """In a script render each role gets its own GPUs of its host, counted up from the first the
        other role left free (a pod is given its own by Kubernetes); a warning when the host has too few."""
        if self.r.format not in ("vllm_serve", "docker_run"):
            return
        key = host or self.r.hosts.this_instance or "localhost"
        first = self._gpus_taken.get(key, 0)
        c.devices = list(range(first, first + c.gpus))
        self._gpus_taken[key] = first + c.gpus
        if self.r.format == "vllm_serve":
            c.env.append(Env("CUDA_VISIBLE_DEVICES", ",".join(map(str, c.devices))))
        self.note(f"{c.name} GPUs", ",".join(map(str, c.devices)), "computed", "TP × PP × DP of its own on its host")
        host_gpus = self.r.gpus_per_host or DEFAULT_GPUS_PER_HOST
        if first + c.gpus > host_gpus:
            given = "" if self.r.gpus_per_host else f" (gpus_per_host not given: {host_gpus} assumed)"
            self.context.warnings.append(
                f"the roles on {key} need {first + c.gpus} GPUs, more than the {host_gpus} of one host{given}: "
                "put prefill and decode on different hosts (hosts.prefill, hosts.decode) or lower their parallelism"
            )

    def _side_ports(self, label: str, host: str | None, entry_id: str, connector: str) -> list[int]:
        """The ports one role's side channel (or bootstrap server) listens on, as the release's layout in
        knowledge/ports.yaml gives them for its TP and DP (advice/ports.py, the review's own reading); on one host
        the second role's start where the first role's end."""
        self.cite_fact("single_host_ports")
        variable = self.setting(entry_id).name
        uses = deployment_ports(
            self.k,
            self.version,
            [connector],
            tensor_parallel_size=self.tp,
            data_parallel_size=self.r.parallelism.data_parallel_size,
        )
        named = {layout.id for layout in layouts_at(self.k, connector, self.version) if layout.base_env == variable}
        laid_out = sorted({u.port for u in uses if u.layout in named})
        default = laid_out[0] if laid_out else int(self.default_of(entry_id))
        span = max(1, len(laid_out))
        ports = list(range(default, default + span)) if self.kube else self.ports_on(host).block(default, span)
        if ports[0] != default:
            self.note(
                f"{label} {entry_id.removeprefix('env.')}", ports[0], "computed", "its own ports on a shared host"
            )
        return ports

    def _pd_proxy(self, proxy: PdProxy) -> None:
        prefill, decode = (c for c in self.plan.components if c.name in ("prefill", "decode"))
        where = (
            (lambda role: f"{self.name}-{role}" + (f".{self.r.namespace}.svc" if self.r.namespace else ""))
            if self.kube
            else None
        )
        pre = where("prefill") if where else (self.r.hosts.prefill or "localhost")
        dec = where("decode") if where else (self.r.hosts.decode or "localhost")
        pre_port, dec_port = str(prefill.http_port), str(decode.http_port)
        proxy_port = self.facts.pd_proxy_port.port
        if proxy.cli == "toy":
            routes = ["--prefiller-hosts", pre, "--prefiller-ports", pre_port]
            routes += ["--decoder-hosts", dec, "--decoder-ports", dec_port]
        else:
            bootstrap = str(next(p.port for p in prefill.ports if p.name == "bootstrap"))
            routes = ["--prefill", f"http://{pre}:{pre_port}", bootstrap, "--decode", f"http://{dec}:{dec_port}"]
        in_container = self.r.format in ("docker_run", "kubernetes")
        script = f"{PROXY_DIR}/{proxy.script}" if in_container else proxy.script
        component = Component(
            name="proxy",
            description="P/D proxy: each request goes to prefill, then decode",
            argv=["python3", script, "--host", "0.0.0.0", "--port", str(proxy_port), *routes],
            image=self.image,
            kind="helper",
            ports=[Port("http", proxy_port)],
            service="cluster",
            # In Docker it reaches prefill and decode where they listen: on the host's network.
            host_network=self.r.format == "docker_run",
            mounts=[script] if self.r.format == "docker_run" else [],
            notes=[f"{proxy.script} comes from {proxy.path} in the vLLM repository at v{self.version}."],
        )
        self.plan.components.append(component)
        self._proxy_script(component, proxy, script)

    def _proxy_script(self, component: Component, proxy: PdProxy, script: str) -> None:
        """Where the proxy's script comes from: neither the wheel nor the image carries it, and its text
        is not ours to ship, so the pod (or the docker_run script) downloads it from the release's tag."""
        url = f"https://raw.githubusercontent.com/vllm-project/vllm/v{self.version}/{proxy.path}"
        host = url.split("/")[2]
        fetch = ["curl", "-fsSL", "--create-dirs", "-o", script, url]
        if self.r.format == "docker_run":
            component.fetch_argv = fetch
            self.plan.notes.append(
                f"proxy.sh downloads {proxy.script} from {url} first: the host needs egress to {host}."
            )
            return
        if not self.kube:
            self.plan.notes.append(
                f"The proxy script is not in the wheel or image: take {proxy.path} from the vLLM repository at "
                f"v{self.version} ({url}) into this directory."
            )
            return
        config_map = f"{self.name}-proxy"
        create = f"curl -fsSLO {url} && kubectl create configmap {config_map} --from-file={proxy.script}" + (
            f" -n {self.r.namespace}" if self.r.namespace else ""
        )
        origin: Origin = "user" if "proxy_source" in self.r.model_fields_set else "default"
        self.note("proxy_source", self.r.proxy_source, origin)
        if self.r.proxy_source == "config_map":
            component.script_config_map = config_map
            self.plan.notes.append(
                f"The proxy mounts its script from the ConfigMap {config_map}; create it from the vLLM repository "
                f"at v{self.version} before applying: {create}"
            )
            return
        fetcher = self.facts.pd_proxy_fetch
        self.cite_fact("pd_proxy_fetch")
        component.fetch_argv, component.fetch_image = fetch, fetcher.image
        self.note("proxy fetch image", fetcher.image, "knowledge", "our choice: a small image with curl")
        self.plan.notes.append(
            f"The proxy pod's init container ({fetcher.image}) downloads {proxy.script} from {url}: the pod needs "
            f"egress to {host}. Without egress, render with proxy_source config_map and create the ConfigMap: "
            f"{create}"
        )

    def _nixl_pd(self) -> None:
        self._pd("connector.nixl", None)

    def _multi_nixl_offload(self) -> None:
        self._pd("connector.nixl", None, local_tier=True)

    def _mooncake_pd(self) -> None:
        protocol = self.recipes.facts.mooncake_protocol_key
        extra = None
        if (self.r.fabric or "ethernet") == "ethernet" and in_range(protocol.versions, self.version):
            extra = {protocol.key: protocol.without_rdma}
            self.note(protocol.key, protocol.without_rdma, "computed", "no RDMA fabric given")
        self._pd("connector.mooncake", extra)
