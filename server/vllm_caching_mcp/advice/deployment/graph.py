"""Checks across the objects of one deployment: a server's port against its container's ports, probes
and the Services that select its pod; the GPUs a pod is given against the engine's ranks on it; the
LMCache server a vLLM workload connects to against where that server runs.

Each check takes the workload (as read and as resolved) and every object the files define together,
and answers the places that disagree, each naming both sides; an empty answer when they agree or when
a side is not known from the files (a port from a variable, a chart's template). The review's
``graph`` condition (review_conditions) calls ``CHECKS``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...knowledge import Knowledge, ServerListener
from ..ports import deployment_ports
from .bounds import clip
from .flags import parse_number
from .model import Deployment, Effective, EnvUse, FlagUse, Location, PortRef, ProxyLaunch, ServiceSpec, Workload
from .server_cli import refused_options


@dataclass(frozen=True)
class Hit:
    """One place that disagrees with another object of the deployment."""

    text: str
    location: Location | None


@dataclass(frozen=True)
class Graph:
    """What a check is given: the workload as read and as resolved, all the objects, the knowledge."""

    workload: Workload
    effective: Effective
    deployment: Deployment
    knowledge: Knowledge
    others: tuple[Effective, ...] = ()  # the other workloads' resolved configurations, for checks across them
    memo: dict[str, Any] = field(default_factory=dict)  # what one review's checks work out once for all workloads


def _server(knowledge: Knowledge, server_id: str) -> ServerListener | None:
    return next((s for s in knowledge.servers if s.id == server_id), None)


def _where(location: Location | None) -> str:
    return f" ({location})" if location is not None else ""


# --- ports ---


@dataclass(frozen=True)
class Listen:
    """The port a server binds, and where that was written (None: its default)."""

    port: int
    location: Location | None

    def said(self, option: str = "--port") -> str:
        return f"{option} {self.port}" + (_where(self.location) if self.location else " (its default)")


def listen_port(workload: Workload, effective: Effective | None, knowledge: Knowledge) -> Listen | None:
    """The port the server binds: its --port (the positional word of an `lmcache_server`), else the default the
    knowledge read in the wheels; None when the value is not a literal number (a variable, a template)."""
    server = _server(knowledge, workload.server or "ports.vllm-api-server")
    if server is None or (server.port_flag is None and server.port_position is None):
        return None
    flags = effective.flags if effective is not None else {f.name: f for f in workload.flags}
    flag = flags.get("--port")
    if flag is None:
        return Listen(server.port_default, None) if server.port_default is not None else None
    value = parse_number(flag.value)
    if value is None or flag.unresolved or not value.is_integer() or not 0 < value < 65536:
        return None
    return Listen(int(value), flag.location)


def _pod_ports(deployment: Deployment, workload: Workload) -> list[PortRef]:
    """Every port the containers of the workload's pod declare (a sidecar's too)."""
    return deployment.pod_ports.get(workload.pod, workload.ports) if workload.pod else workload.ports


# What Kubernetes accepts as a port's name (an IANA service name): anything else is a value the files do not hold.
_PORT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?")


def _resolve(ref: PortRef, ports: list[PortRef]) -> int | None:
    if ref.number is not None:
        return ref.number
    return next((p.number for p in ports if p.name == ref.name and p.number is not None), None)


def port_mismatches(graph: Graph) -> list[Hit]:
    """The container's ports, its probes' ports and the Services selecting its pod, against the port the
    server binds. Another server of the pod (a sidecar's declared port, an LMCache server, a connector's side
    channel) is something else listening there, not a mismatch."""
    w, d = graph.workload, graph.deployment
    listen = listen_port(w, graph.effective, graph.knowledge)
    if listen is None:
        return []
    who = "vLLM" if w.role == "vllm" else "the LMCache server"
    if w.pod_elsewhere:
        # An operator builds the pod, with sidecars the files do not show; the probes and hooks written beside the
        # server's arguments are its container's, and a port of theirs is the server's only if it is a number.
        return [
            Hit(f"{probe.what} {probe.number}, but {who} listens on {listen.said()}", probe.location)
            for probe in w.probe_ports
            if probe.number is not None and probe.number != listen.port and probe.number not in connector_ports(graph)
        ]
    neighbours = [x for x in [*d.workloads, *d.cache_servers] if x is not w and x.pod is not None and x.pod == w.pod]
    beside = {p.port for x in neighbours if (p := listen_port(x, None, graph.knowledge)) is not None}
    hits: list[Hit] = []
    declared = [p for p in w.ports if p.number is not None]
    shares_container = any(x.location == w.location for x in neighbours)
    if declared and not shares_container and all(p.number != listen.port for p in declared):
        shown = ", ".join(f"{p.what} {p.number}" for p in declared)
        hits.append(Hit(f"{shown}, but {who} listens on {listen.said()}", declared[0].location))
    pod_ports = _pod_ports(d, w)
    own = {(p.location.file, p.location.line) for p in w.ports}
    others = {p.number for p in pod_ports if p.number is not None and (p.location.file, p.location.line) not in own}
    elsewhere = others | beside | connector_ports(graph)
    for probe in w.probe_ports:
        number = _resolve(probe, pod_ports)
        if number is None and (
            any(p.name == probe.name for p in pod_ports) or not _PORT_NAME.fullmatch(probe.name or "")
        ):
            continue  # a named port whose number the files do not hold, or a value no name can be (a template's)
        if number is None:
            text = f"{probe.what} names port {probe.name!r}, which no container of the pod has"
            hits.append(Hit(text, probe.location))
        elif number != listen.port and number not in elsewhere:
            hits.append(Hit(f"{probe.what} {number}, but {who} listens on {listen.said()}", probe.location))
    # a Service reaches the pod as a whole: any port a container of it declares or a server of it binds
    reached = elsewhere | {p.number for p in pod_ports if p.number is not None}
    for service in selecting_services(d, w):
        hits += _service_mismatch(service, listen, who, pod_ports, reached)
    return hits + _proxy_mismatches(graph)


def connector_ports(graph: Graph) -> set[int]:
    """The ports the workload's KV connectors bind in its pod (a NIXL or Mooncake side channel: ports.yaml
    layouts); empty when their settings are not port numbers."""
    return set(_connector_ports(graph.effective, graph.knowledge))


def _connector_ports(e: Effective, knowledge: Knowledge) -> dict[int, str]:
    env = {name: use.value for name, use in e.env.items() if use.value is not None}
    extra = e.extra_configs[0] if e.extra_configs else {}
    tp, dp = int(e.facts.get("tp", 1)), int(e.facts.get("dp", 1))
    try:
        uses = deployment_ports(
            knowledge,
            e.version,
            [c.name for c in e.connectors],
            tensor_parallel_size=max(1, tp),
            data_parallel_size=max(1, dp),
            env=env,
            extra_config=extra,
        )
    except ValueError:
        return {}
    return {u.port: f"{u.connector}'s {u.what} ({u.set_by})" for u in uses if "only connects" not in u.listener}


def _host(workload: Workload) -> tuple[str, str] | None:
    """What shares the workload's network: a script's launches run on one host, a pod's containers share its
    network; None when the files do not say (a container with its own network, a host of a cluster)."""
    if workload.pod is not None:
        return ("pod", workload.pod)
    if workload.source == "command-line":
        return ("host", workload.file)
    return None


def _bound(workload: Workload, effective: Effective, knowledge: Knowledge) -> dict[int, tuple[str, Location | None]]:
    """Each port the server binds: what binds it, and the setting that makes it bind there."""
    connector_at = effective.connectors[0].location if effective.connectors else None
    ports = {port: (what, connector_at) for port, what in _connector_ports(effective, knowledge).items()}
    listen = listen_port(workload, effective, knowledge)
    if listen is not None:
        ports[listen.port] = (f"its HTTP server ({listen.said()})", listen.location)
    return ports


# Files of recipes, each run on its own (`just prefill` and `just decode` in two terminals), not in sequence.
_RECIPES = re.compile(r"(^|[/.])(gnu)?makefile$|(^|[/.])\.?justfile$|\.(mk|just)$", re.I)


@dataclass(frozen=True)
class _SideBySide:
    """A deployment's workloads by position, and per host those still running when a later one starts."""

    positions: dict[int, int]
    running: dict[tuple[str, str], list[tuple[int, Workload, Effective]]]


def _side_by_side(graph: Graph) -> _SideBySide:
    """Worked out once per review (the graph's memo): every workload of the deployment asks."""
    if "side_by_side" in graph.memo:
        found: _SideBySide = graph.memo["side_by_side"]
        return found
    d = graph.deployment
    positions = {id(x): i for i, x in enumerate(d.workloads)}  # by identity: models compare field by field
    by_name = {x.name: x for x in d.workloads}
    running: dict[tuple[str, str], list[tuple[int, Workload, Effective]]] = {}
    effectives = {e.workload: e for e in (*graph.others, graph.effective)}
    for x in d.workloads:
        host, e = _host(x), effectives.get(x.name)
        if host is None or e is None or by_name.get(x.name) is not x:
            continue
        if host[0] != "host" or x.background or _RECIPES.search(x.file):  # one a script waits for has stopped
            running.setdefault(host, []).append((positions[id(x)], x, e))
    index = graph.memo["side_by_side"] = _SideBySide(positions, running)
    return index


def ports_bound_twice(graph: Graph) -> list[Hit]:
    """A port this workload binds that a server started before it on the same host (or in the same pod) binds
    too: the later one cannot bind it. Said once, at the later workload. A script's earlier server counts when it
    runs in the background (`&`): one the script waits for has stopped before the next starts; a Makefile's or a
    Justfile's recipes are run each on its own, side by side."""
    w = graph.workload
    host = _host(w)
    index = _side_by_side(graph)
    if host is None or id(w) not in index.positions:
        return []
    mine_at = index.positions[id(w)]
    earlier_ones = [(x, e) for at, x, e in index.running.get(host, []) if at < mine_at]
    if not earlier_ones:
        return []
    mine = _bound(w, graph.effective, graph.knowledge)
    hits = []
    for earlier, other in earlier_ones:
        theirs = _bound(earlier, other, graph.knowledge)
        for port in sorted(set(mine) & set(theirs)):
            (what, at), (their_what, _) = mine[port], theirs[port]
            hits.append(
                Hit(
                    f"port {port}: {what} and, in {earlier.name} on the same host, {their_what}: the second server "
                    "to start fails to bind it (Address already in use)",
                    at or w.location,
                )
            )
    return hits


def selecting_services(deployment: Deployment, workload: Workload) -> list[ServiceSpec]:
    """The Services of the workload's file set whose selector the pod's labels match (selector ⊆ labels)."""
    labels = workload.pod_labels
    return [
        s
        for s in deployment.service_specs
        if s.selector and labels and all(labels.get(k) == v for k, v in s.selector.items())
    ]


def _service_mismatch(
    service: ServiceSpec, listen: Listen, who: str, pod_ports: list[PortRef], reached: set[int]
) -> list[Hit]:
    """A Service none of whose ports reaches the server (the port it listens on, or another port of its pod), or
    one of whose numbered ports reaches nothing there (a metrics port on 8080 where vLLM serves /metrics on 8000)."""
    if not service.targets:
        return []
    resolved = [(t, _resolve(t, pod_ports)) for t in service.targets]
    if any(n == listen.port or (n is not None and n in reached) for _, n in resolved):
        return [
            Hit(
                f"Service {service.name} sends to {target.what} {number}, where nothing of the pod listens: {who} "
                f"listens on {listen.said()}",
                target.location,
            )
            for target, number in resolved
            if number is not None and number != listen.port and number not in reached
        ]
    target, number = resolved[0]
    if number is None:
        text = f"Service {service.name} sends to {target.what} {target.name!r}, which no container of the pod names"
    else:
        text = f"Service {service.name} sends to {target.what} {number}, but {who} listens on {listen.said()}"
    return [Hit(text, target.location)]


# --- a P/D proxy's upstreams ---

# The toy proxy's --prefiller-hosts/--prefiller-ports and --decoder-hosts/--decoder-ports (the singular
# forms of older releases too), and the Mooncake proxy's --prefill URL / --decode URL.
_TOY = (("--prefiller-hosts", "--prefiller-ports"), ("--decoder-hosts", "--decoder-ports"))
_URL = re.compile(r"(?:\w+://)?\[?([^\]/:]+)\]?:(\d+)/?")


@dataclass(frozen=True)
class Upstream:
    option: str
    host: str
    port: int
    location: Location


def _proxy_options(words: list[tuple[str, Location]]) -> dict[str, list[tuple[str, Location]]]:
    """Each option of the proxy's command line with the words after it (argparse's nargs='+'); --x=y too."""
    options: dict[str, list[tuple[str, Location]]] = {}
    current: list[tuple[str, Location]] | None = None
    for word, where in words:
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            current = options.setdefault(name.rstrip("s"), [])  # --prefiller-host and --prefiller-hosts alike
            if eq:
                current.append((value, where))
        elif current is not None:
            current.append((word, where))
    return options


def proxy_upstreams(words: list[tuple[str, Location]]) -> list[Upstream]:
    """The (host, port) pairs a proxy's command line sends to, each where its port is written; a pair whose
    port is its default is left out (not stated in the files)."""
    options = _proxy_options(words)
    found = []
    for hosts_option, ports_option in _TOY:
        hosts = [h for h, _ in options.get(hosts_option.rstrip("s"), [])] or ["localhost"]
        for i, (port, where) in enumerate(options.get(ports_option.rstrip("s"), [])):
            host = hosts[min(i, len(hosts) - 1)]
            if port.isdigit():
                found.append(Upstream(ports_option, host, int(port), where))
    for option in ("--prefill", "--decode"):
        for value, where in options.get(option, []):
            match = _URL.fullmatch(value)
            if match:
                found.append(Upstream(option, match[1], int(match[2]), where))
    return found


def _proxy_targets(d: Deployment, proxy: ProxyLaunch, host: str) -> list[Workload]:
    """The vLLM workloads a proxy reaches at ``host``: its own pod's (or host's) on localhost, a compose
    service by its name."""
    if host in _LOCAL:
        return [
            w
            for w in d.workloads
            if (proxy.pod is not None and w.pod == proxy.pod)
            or (proxy.host_network and (w.host_network or w.source == "command-line"))
        ]
    return [w for w in d.workloads if w.source == "compose" and w.pod == f"{proxy.location.file}:service/{host}"]


def _proxy_mismatches(graph: Graph) -> list[Hit]:
    """Each upstream of a P/D proxy whose host reaches this workload (the first of those it reaches) on a port
    none of them listens on, or names a Service of the files on a port the Service does not have."""
    d, hits = graph.deployment, []
    for proxy in d.proxy_launches:
        for upstream in proxy_upstreams(proxy.words):
            service = service_named(d, upstream.host)
            if service is not None:
                selected = [w for w in d.workloads if service in selecting_services(d, w)]
                if selected[:1] == [graph.workload] and all(p.number != upstream.port for p in service.ports):
                    shown = ", ".join(str(p.number) for p in service.ports)
                    text = f"{proxy.script} {upstream.option} {upstream.port}: Service {service.name} has {shown}"
                    hits.append(Hit(text, upstream.location))
                continue
            targets = _proxy_targets(d, proxy, upstream.host)
            if targets[:1] != [graph.workload]:
                continue
            ports = [p for w in targets if (p := listen_port(w, None, graph.knowledge)) is not None]
            if ports and all(p.port != upstream.port for p in ports):
                shown = ", ".join(p.said() for p in ports)
                text = f"{proxy.script} {upstream.option} {upstream.port} for {upstream.host}: vLLM there binds {shown}"
                hits.append(Hit(text, upstream.location))
    return hits


# --- GPUs ---


def is_gpu_build(workload: Workload, effective: Effective) -> bool:
    """A vLLM server that runs on GPUs: an image named for vLLM's OpenAI server build (vllm/vllm-openai and the
    builds derived from it) or for CUDA, or one that names no vLLM build at all (a base image vLLM is installed
    into, whose wheel is the CUDA build); not a CPU build, a simulator, or another accelerator's. Another
    image named vllm says nothing of its device."""
    image = (workload.image or "").lower()
    if re.search(r"cpu|sim|neuron|tpu|gaudi|habana|hpu|xpu|openvino", image):
        return False
    if "vllm" in image and not re.search(r"vllm-openai|cuda|rocm|nvcr\.io/nvidia/", image):  # NVIDIA's NGC builds
        return False
    device = effective.flags.get("--device")
    if device is not None and str(device.value).lower() != "cuda":
        return False
    target = effective.env.get("VLLM_TARGET_DEVICE")
    return target is None or target.value in (None, "cuda", "rocm")


def _engine_gpus_per_pod(effective: Effective, workload: Workload) -> tuple[int, str] | None:
    """The GPUs the engine's ranks use in one pod: TP x PP over the pods of its group, times the data-parallel
    ranks it runs there; None when the ranks are not known (a value from a variable)."""
    flags = effective.flags
    tp, pp = effective.facts.get("tp", 1), effective.facts.get("pp", 1)
    local = flags.get("--data-parallel-size-local")
    if local is not None:
        dp_local = parse_number(local.value)
        if dp_local is None:
            return None
        dp_text = f" x --data-parallel-size-local {dp_local:g}"
    elif _ranks_placed_elsewhere(flags):
        dp_local, dp_text = 1, ""
    else:
        dp_local = effective.facts.get("dp", 1)
        dp_text = f" x --data-parallel-size {dp_local:g}" if dp_local > 1 else ""
    nnodes = parse_number(flags["--nnodes"].value) if "--nnodes" in flags else None
    if "--nnodes" in flags and nnodes is None:
        return None
    executor = flags.get("--distributed-executor-backend")
    if workload.ray_cluster and executor is not None and executor.value == "ray":
        return None  # the container joins a Ray cluster: Ray places the TP x PP workers on its nodes
    hosts = max(workload.nodes, int(nnodes or 1))
    needed = math.ceil(tp * pp / hosts) * dp_local
    spread = f" over the {hosts} pods of its group" if hosts > 1 else ""
    return int(needed), f"TP {tp:g} x PP {pp:g}{spread}{dp_text}"


def _ranks_placed_elsewhere(flags: dict[str, FlagUse]) -> bool:
    """Data-parallel ranks another process or Ray places: this pod runs one (or its rank's) engine."""
    placed = ("--data-parallel-rank", "--headless", "--data-parallel-start-rank", "--data-parallel-external-lb")
    backend = flags.get("--data-parallel-backend")
    return any(name in flags for name in placed) or (backend is not None and backend.value == "ray")


def gpus_missing(graph: Graph) -> list[Hit]:
    """A GPU vLLM server whose container is given no GPU at all, where the files show all it is given."""
    w, e = graph.workload, graph.effective
    if not w.gpus_stated or not is_gpu_build(w, e) or "NVIDIA_VISIBLE_DEVICES" in e.env:
        return []
    if w.accelerator is not None and w.gpu_count != 0:
        return []
    said = f"{w.accelerator}: 0" if w.gpu_count == 0 else "no GPU (nvidia.com/gpu, amd.com/gpu, --gpus)"
    return [Hit(f"the container is given {said}", w.gpu_location or w.location)]


def gpus_fewer_than_ranks(graph: Graph) -> list[Hit]:
    """The GPUs a pod is given, and the devices CUDA_VISIBLE_DEVICES lists, against the ranks the engine runs in it."""
    w, e = graph.workload, graph.effective
    engine = _engine_gpus_per_pod(e, w)
    if engine is None:
        return []
    needed, how = engine
    hits = []
    if w.gpu_count and w.gpu_count < needed:
        hits.append(Hit(f"{w.gpu_count} GPU(s) given, but {how} = {needed} a pod", w.gpu_location))
    listed = e.env.get("CUDA_VISIBLE_DEVICES")
    shown = (
        [d for d in listed.value.split(",") if d.strip()] if listed is not None and listed.value is not None else None
    )
    if listed is not None and shown is not None and "visible_gpus" in e.facts and len(shown) < needed:
        text = f"CUDA_VISIBLE_DEVICES={listed.value} shows {len(shown)}, but {how} = {needed}"
        hits.append(Hit(text, listed.location))
    return hits


# --- the LMCache server a workload connects to ---

_LOCAL = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


@dataclass(frozen=True)
class Endpoint:
    """Where a vLLM workload's LMCache client connects: host, port, and the setting that says so."""

    host: str
    port: int | None
    setting: str
    location: Location | None
    server_kind: str  # the ports.yaml servers entry that listens for it


def lmcache_endpoints(effective: Effective) -> list[Endpoint]:
    """The LMCache MP server (lmcache.mp.host / lmcache.mp.port, defaults tcp://localhost:5555) of an
    LMCacheMPConnector, and the remote server of LMCACHE_REMOTE_URL (lm://HOST:PORT)."""
    found = []
    if any(c.name == "LMCacheMPConnector" for c in effective.connectors):
        extra = next((x for x in effective.extra_configs if "lmcache.mp.host" in x or "lmcache.mp.port" in x), {})
        host = str(extra.get("lmcache.mp.host", "tcp://localhost"))
        port = parse_number(extra.get("lmcache.mp.port", 5555))
        found.append(
            Endpoint(
                _host_of(host),
                int(port) if port is not None and port.is_integer() else None,
                f"lmcache.mp.host {host}" + ("" if "lmcache.mp.host" in extra else " (its default)"),
                effective.transfer_location,
                "ports.lmcache-mp-server-bind",
            )
        )
    remote = effective.env.get("LMCACHE_REMOTE_URL")
    # lm:// is lmcache_server's protocol; redis://, mooncakestore:// and the others name other servers
    match = re.fullmatch(r"lm://\[?([^\]/:]+)\]?:(\d+)/?", remote.value or "") if remote is not None else None
    if remote is not None and match:
        setting = f"LMCACHE_REMOTE_URL={remote.value}"
        found.append(Endpoint(match[1], int(match[2]), setting, remote.location, "ports.lmcache-remote-server"))
    return found


def _host_of(address: str) -> str:
    text = re.sub(r"^\w+://", "", address.strip())
    return text.rsplit(":", 1)[0].strip("[]") if text.count(":") == 1 or text.startswith("[") else text


def lmcache_unreachable(graph: Graph) -> list[Hit]:
    """A client that connects to localhost while the LMCache server the files start runs in another pod (on
    another network unless both pods use the node's), or to a Service the files define without that port."""
    hits = []
    for endpoint in lmcache_endpoints(graph.effective):
        servers = [s for s in graph.deployment.cache_servers if s.server == endpoint.server_kind]
        if endpoint.host in _LOCAL:
            hits += _local_endpoint(graph, endpoint, servers)
        else:
            hits += _service_endpoint(graph, endpoint)
    return hits


def _local_endpoint(graph: Graph, endpoint: Endpoint, servers: list[Workload]) -> list[Hit]:
    w = graph.workload
    same_pod = [s for s in servers if s.pod is not None and s.pod == w.pod]
    on_node = [s for s in servers if s.host_network and w.host_network]
    reachable = same_pod or on_node
    if reachable:
        listen = listen_port(reachable[0], None, graph.knowledge)
        if listen is not None and endpoint.port is not None and listen.port != endpoint.port:
            name = reachable[0].name
            text = f"{endpoint.setting} port {endpoint.port}, but the LMCache server {name} binds {listen.said()}"
            return [Hit(text, endpoint.location)]
        return []
    if not servers:
        return _nothing_in_the_pod(w, endpoint)
    server = servers[0]
    network = (
        "its pod uses the node's network (hostNetwork) and this pod does not"
        if server.host_network
        else "another pod, with its own network namespace"
    )
    text = (
        f"{endpoint.setting} connects to {endpoint.host}:{endpoint.port} inside this pod, but the LMCache server "
        f"runs in {server.name}{_where(server.location)}: {network}; nothing listens there"
    )
    return [Hit(text, endpoint.location)]


def service_named(d: Deployment, host: str) -> ServiceSpec | None:
    """The Service of the files a host name resolves to in the cluster: NAME, NAME.NAMESPACE, NAME.NAMESPACE.svc
    and NAME.NAMESPACE.svc.cluster.local."""
    for service in d.service_specs:
        name = re.escape(service.name)
        if re.fullmatch(rf"{name}(\.[a-z0-9-]+(\.svc(\.cluster\.local)?)?)?", host):
            return service
    return None


def _nothing_in_the_pod(w: Workload, endpoint: Endpoint) -> list[Hit]:
    """localhost of a pod the files show whole (its containers, its network), none of which runs an LMCache
    server: nothing listens there. A bare host, the node's network or an operator's pod may have one."""
    if w.source not in ("kubernetes", "compose", "docker-run") or w.pod_elsewhere or w.host_network:
        return []
    text = (
        f"{endpoint.setting} connects to {endpoint.host}:{endpoint.port} inside this pod, but no container of it "
        "runs an LMCache server and the pod does not use the node's network (hostNetwork)"
    )
    return [Hit(text, endpoint.location)]


def _service_endpoint(graph: Graph, endpoint: Endpoint) -> list[Hit]:
    """A host that names a Service of the files (``name`` or ``name.namespace.svc...``) without the port used."""
    service = service_named(graph.deployment, endpoint.host)
    if service is None or endpoint.port is None or not service.ports:
        return []
    if any(p.number == endpoint.port for p in service.ports):
        return []
    shown = ", ".join(str(p.number) for p in service.ports if p.number is not None)
    text = f"{endpoint.setting} connects to Service {service.name} on port {endpoint.port}; it has port(s) {shown}"
    return [Hit(text, endpoint.location)]


def cache_server_unbounded(graph: Graph) -> list[Hit]:
    """An LMCache server that keeps every chunk it is sent (no eviction): its pod's memory limit, or the node's
    memory, is what ends it."""
    w = graph.workload
    server = _server(graph.knowledge, w.server or "")
    if server is None or not server.keeps_every_chunk:
        return []
    if w.memory_limit_gib is not None:
        text = f"it evicts nothing: OOM-killed once {w.memory_limit_gib:.3g} GiB of KV (its memory limit) is stored"
        return [Hit(text, w.memory_limit_location or w.location)]
    return [Hit("it evicts nothing and has no memory limit: it grows until the node runs out of memory", w.location)]


def cache_server_option_unknown(graph: Graph) -> list[Hit]:
    """Each option on an LMCache server's command line that its release's parser does not accept."""
    return [Hit(text, flag.location) for flag, text in refused_options(graph.workload, graph.knowledge)]


# Base images of an operating system, a language or a framework: none of them ships vLLM (the vLLM builds of
# these publishers have names of their own: nvcr.io/nvidia/vllm, rocm/vllm, vault.habana.ai/.../vllm-...).
_BASE_IMAGE = re.compile(
    r"^(?:(?:docker\.io|registry-1\.docker\.io)/)?(?:library/)?"
    r"(?:ubuntu|debian|alpine|centos|rockylinux|almalinux|fedora|amazonlinux|busybox|python|"
    r"nvidia/cuda|pytorch/pytorch|rocm/pytorch|rocm/dev-ubuntu-\d+\.\d+|"
    r"nvcr\.io/nvidia/(?:cuda|pytorch)|vault\.habana\.ai/gaudi-docker/[\w./-]*/pytorch-installer-[\w.]+)(?::|@|$)"
)


def vllm_not_in_image(graph: Graph) -> list[Hit]:
    """A command that runs vLLM in a base image that has none, with no install of vLLM before it; quiet where
    something is installed that may bring vLLM (`pip install -r`, a source tree, a URL)."""
    w = graph.workload
    image = (w.image or "").strip().strip("\"'")
    if w.role != "vllm" or not image or _BASE_IMAGE.match(image) is None:
        return []
    if any(c.package in ("vllm", "unknown") for c in w.installs):
        return []
    return [
        Hit(
            f"{clip(image, 80)} is a base image that ships no vLLM, and nothing installs vLLM before {w.name} runs "
            "it: the command exits with 'No module named vllm' (or 'vllm: command not found')",
            w.image_location or w.location,
        )
    ]


# --- the variables a namespace's Services give its pods ---


def service_link_env(deployment: Deployment, workload: Workload) -> list[EnvUse]:
    """The VLLM_* variables the kubelet sets in the workload's pod for the Services of its namespace (service links,
    on unless the pod spec turns them off): a Service named ``vllm`` gives every pod ``VLLM_PORT=tcp://IP:PORT``.
    A variable the container sets itself wins, and one the pod's namespace may not share is left out (a Service in
    another namespace, or one of the two written without a namespace and the other with one)."""
    if not workload.service_links:
        return []
    own = {e.name for e in workload.env}
    found = []
    for service in deployment.service_specs:
        prefix = service.name.upper().replace("-", "_")
        if not prefix.startswith("VLLM") or service.namespace != workload.namespace:
            continue
        port = next((p.number for p in service.ports if p.number is not None), None)
        shown = str(port) if port is not None else "<port>"
        where = service.location or Location(file=service.file, line=None)
        reference = f"set by the kubelet for Service {service.name} ({where})"
        values = {
            f"{prefix}_SERVICE_HOST": "<cluster IP>",
            f"{prefix}_SERVICE_PORT": shown,
            f"{prefix}_PORT": f"tcp://<cluster IP>:{shown}",
        }
        found += [
            EnvUse(name=name, value=value, reference=reference, location=where)
            for name, value in values.items()
            if name not in own
        ]
    return found


# Service types that take traffic from outside the cluster: every node's port, or the cloud's load balancer.
_REACHED_FROM_OUTSIDE = {"LoadBalancer", "NodePort"}


def exposed_without_key(graph: Graph) -> list[Hit]:
    """A Service that reaches the vLLM pod from outside the cluster while the server takes no API key
    (--api-key, else VLLM_API_KEY: feature.api-key-guards-the-server): anyone who finds the address calls it."""
    w, e = graph.workload, graph.effective
    if "--api-key" in e.flags or "VLLM_API_KEY" in e.env:
        return []
    return [
        Hit(f"Service {s.name} is of type {s.type} and the server takes no --api-key or VLLM_API_KEY", s.location)
        for s in selecting_services(graph.deployment, w)
        if s.type in _REACHED_FROM_OUTSIDE and not s.restricted
    ]


def ingress_backend_missing(graph: Graph) -> list[Hit]:
    """The Ingresses of the files that route to a Service the files do not define, or to a port of a Service that
    selects this server which that Service does not expose; judged only where a Service of the files selects the
    server's pod (so its Services are among the files)."""
    w, d = graph.workload, graph.deployment
    selecting = selecting_services(d, w)
    if not selecting:
        return []
    ours = {s.name: s for s in selecting}
    hits = []
    for backend in d.ingress_backends:
        if backend.namespace != w.namespace and None not in (backend.namespace, w.namespace):
            continue
        if backend.service not in d.services:
            shown = ", ".join(sorted(ours))
            text = (
                f"Ingress {backend.ingress} routes to Service {backend.service!r}, which the files do not define (the "
                f"Service selecting this server is {shown}): the controller has no endpoints to send to"
            )
            hits.append(Hit(text, backend.location))
        elif backend.service in ours and backend.port is not None:
            service = ours[backend.service]
            wanted = backend.port
            exposed = [
                p
                for p in service.ports
                if (wanted.number is not None and wanted.number == p.number)
                or (wanted.name is not None and wanted.name == p.name)
            ]
            if service.ports and not exposed:
                port = backend.port.number if backend.port.number is not None else repr(backend.port.name)
                text = f"Ingress {backend.ingress} routes to port {port} of Service {backend.service}, which has none"
                hits.append(Hit(text, backend.location))
    return hits


CHECKS: dict[str, Callable[[Graph], list[Hit]]] = {
    "ingress-backend-missing": ingress_backend_missing,
    "exposed-without-key": exposed_without_key,
    "port-mismatch": port_mismatches,
    "no-gpu": gpus_missing,
    "gpus-fewer-than-ranks": gpus_fewer_than_ranks,
    "lmcache-unreachable": lmcache_unreachable,
    "cache-server-unbounded": cache_server_unbounded,
    "cache-server-option-unknown": cache_server_option_unknown,
    "vllm-not-in-image": vllm_not_in_image,
    "ports-bound-twice": ports_bound_twice,
}
