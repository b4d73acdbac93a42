"""What reading a deployment yields: documents, workloads with where each value was written, the
effective configuration of one, and a cache of what is worked out once per Knowledge object."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, Field

from ...knowledge import FactName, HygieneCheck, Knowledge
from .bounds import MAX_DOCUMENTS_TEXT

GIB = 1 << 30


T = TypeVar("T")


class PerKnowledge(Generic[T]):
    """What ``build`` works out from a Knowledge object, kept for as long as that object lives.

    Keyed by identity, through a weak reference: a Knowledge (a frozen pydantic model) hashes by
    value, which its ``releases`` dict makes fail, so it cannot key a WeakKeyDictionary or an
    lru_cache; and an ``id`` alone is handed to another object once this one is collected, so each
    entry is dropped when its Knowledge goes.
    """

    def __init__(self, build: Callable[[Knowledge], T]) -> None:
        self._build = build
        self._entries: dict[int, tuple[weakref.ref[Knowledge], T]] = {}

    def __call__(self, knowledge: Knowledge) -> T:
        key = id(knowledge)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is knowledge:
            return entry[1]
        value = self._build(knowledge)

        def forget(ref: weakref.ref[Knowledge]) -> None:
            if self._entries.get(key, (None,))[0] is ref:
                del self._entries[key]

        self._entries[key] = (weakref.ref(knowledge, forget), value)
        return value

    def __len__(self) -> int:
        return len(self._entries)


class Document(BaseModel):
    # One input file (a comment, not a docstring: a docstring would be listed in every tool's schema).
    name: str = Field(min_length=1, max_length=300)
    text: str = Field(max_length=2_000_000)


def _within_total(documents: list[Document]) -> list[Document]:
    total = sum(len(d.text) for d in documents)
    if total > MAX_DOCUMENTS_TEXT:
        raise ValueError(f"{total:,} characters in all; give at most {MAX_DOCUMENTS_TEXT:,} characters in one call")
    return documents


# The documents of one call: review_deployment's documents, diagnose's deployment.
Documents = Annotated[list[Document], AfterValidator(_within_total)]


class Location(BaseModel):
    """Where something was written: a file and line, and for YAML the path to the value."""

    file: str
    line: int | None = Field(default=None, description="1-based")
    path: str | None = Field(default=None, description="YAML path, e.g. spec.template.spec.containers[0].args[3]")

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line else "")
        return where + (f" ({self.path})" if self.path else "")


class FlagUse(BaseModel):
    """A command-line option as written (``--max_model_len=8k``) and as vLLM reads it."""

    name: str = Field(description="normalised: --lower-case-with-dashes; --no-X is recorded as X = false")
    written: str
    value: str | bool | None = Field(description="true for a bare switch, false for --no-X, else the text")
    location: Location
    unresolved: str | None = Field(
        default=None, description="why its value is not known (a variable the files do not set), when it is not"
    )
    problem: str | None = Field(
        default=None, description="why vLLM's argument parser stops on it (its value expands to nothing)"
    )


class EnvUse(BaseModel):
    name: str
    value: str | None = Field(description="the literal value; null when set by reference (valueFrom, $(VAR), -e NAME)")
    reference: str | None = Field(
        default=None,
        description="what the value comes from when it is not a literal (or the .env a literal came from)",
    )
    location: Location


class HygieneIssue(BaseModel):
    """A deployment-hygiene problem found where a workload (or a file of its deployment) is written."""

    check: HygieneCheck
    text: str = Field(description="what is wrong, never a secret's value")
    location: Location
    release: bool = Field(default=False, description="it leaves the vLLM release unknown (the server's own image)")


class ClaimUse(BaseModel):
    """A PersistentVolumeClaim a workload's pod mounts by name (volumes[].persistentVolumeClaim.claimName)."""

    claim: str
    location: Location


class ClaimSpec(BaseModel):
    """A PersistentVolumeClaim the files define, with its access modes."""

    name: str
    access_modes: list[str]
    location: Location


Backing = Literal["memory", "node-disk", "host", "claim", "config", "other"]


class Mount(BaseModel):
    """A directory the container has mounted, and what backs it."""

    path: str
    backing: Backing = Field(
        description="memory: a Memory emptyDir or tmpfs; node-disk: an emptyDir on the node's disk; host: a "
        "hostPath or bind mount; claim: a PersistentVolumeClaim; config: a ConfigMap, Secret or projected volume"
    )
    read_only: bool = Field(default=False, description="mounted read-only (readOnly, :ro), or a config volume")
    host_path: str | None = Field(default=None, description="a hostPath's path on the node")
    size_limited: bool = Field(default=False, description="an emptyDir that names a sizeLimit")
    size_gib: float | None = Field(default=None, description="that sizeLimit; null too where Kubernetes refuses it")
    size_location: Location | None = Field(default=None, description="the emptyDir's sizeLimit, else the emptyDir")
    location: Location


class PortRef(BaseModel):
    """A port as a container, a probe or a docker run states it: a number, or a name a container port has."""

    what: str = Field(description="where it is stated: containerPort, startupProbe, -p, ports")
    number: int | None = None
    name: str | None = Field(default=None, description="the port's name (a containerPort's, or the name a probe gives)")
    location: Location


class IngressBackend(BaseModel):
    """A Service an Ingress sends a path (or its default backend) to."""

    ingress: str
    service: str
    port: PortRef | None = Field(default=None, description="port.number or port.name of the backend")
    namespace: str | None = None
    location: Location


class ServiceSpec(BaseModel):
    """A Kubernetes Service: the pods it selects and the ports it sends to (targetPort, or port)."""

    name: str
    file: str
    selector: dict[str, str]
    ports: list[PortRef] = Field(default_factory=list, description="the ports it is reached on (port)")
    targets: list[PortRef] = Field(default_factory=list, description="where it sends each (targetPort, else port)")
    namespace: str | None = Field(default=None, description="metadata.namespace; None: where it is applied")
    type: str = Field(default="ClusterIP", description="spec.type: ClusterIP, NodePort, LoadBalancer, ...")
    restricted: bool = Field(
        default=False,
        description="reached from fewer places than its type says: loadBalancerSourceRanges, or an annotation that "
        "makes the cloud's load balancer internal",
    )
    location: Location | None = None


VersionSource = Literal["image-tag", "pip-install", "stated", "assumed-newest"]


class ReleaseClaim(BaseModel):
    """A place that says which release of a package a workload runs, other than its image tag: a pip
    install before the launch (in its script, its container command or its Dockerfile)."""

    package: Literal["vllm", "lmcache", "torch", "transformers", "unknown"] = Field(
        description="torch and transformers: pinned beside vLLM; unknown: packages the files do not name (a "
        "requirements file, a source tree, a URL)"
    )
    version: str | None = Field(description="the release pinned (==); null when the install names none exactly")
    requirement: str = Field(description="the requirement as written: vllm==0.11.0, vllm>=0.10, vllm")
    upgrade: bool = Field(default=False, description="pip's --upgrade: it replaces a release already installed")
    python: str | None = Field(
        default=None, description="the Python (3.9) it installs into, where the files say it: conda, uv, a base image"
    )
    location: Location


class Workload(BaseModel):
    """One server process as the deployment starts it: a vLLM server, or (``role``) an LMCache server."""

    name: str
    file: str
    source: Literal[
        "command-line", "docker-run", "compose", "kubernetes", "helm-values", "lmcache-config", "dockerfile"
    ]
    engine_kwargs: bool = Field(
        default=False,
        description="its options are keyword arguments to EngineArgs (Ray Serve's engine_kwargs), read as the "
        "words that set them; vLLM's argument parser never sees them",
    )
    model: str | None = None
    model_location: Location | None = None
    image: str | None = None
    image_location: Location | None = None
    flags: list[FlagUse] = Field(default_factory=list)
    env: list[EnvUse] = Field(default_factory=list)
    gpu_label: str | None = Field(default=None, description="a GPU product named by a node selector or label")
    memory_limit_gib: float | None = None
    replicas: int | None = None
    nodes: int = Field(default=1, description="hosts one engine spans (a LeaderWorkerSet group's size)")
    location: Location
    memory_request_gib: float | None = Field(default=None, description="the container's memory request")
    gpu_count: int | None = Field(default=None, description="GPUs the container is given (nvidia.com/gpu, --gpus)")
    shm_gib: float | None = Field(
        default=None, description="size of /dev/shm when the files set it (a memory emptyDir, --shm-size)"
    )
    host_ipc: bool = Field(default=False, description="the host's IPC namespace (hostIPC, --ipc=host)")
    pod_elsewhere: bool = Field(
        default=False,
        description="the pod around the container is built elsewhere (a patch with no image, an operator's custom "
        "resource): its /dev/shm is not known from these files",
    )
    shm_mounted: bool = Field(
        default=False,
        description="the files give /dev/shm a size of their own (a memory emptyDir, --shm-size, shm_size); with "
        "shm_gib null it is bounded only by the node's memory",
    )
    unresolved: list[str] = Field(
        default_factory=list, description="values the files do not settle (variables never set, command output)"
    )
    stray_words: list[tuple[str, Location]] = Field(
        default_factory=list,
        description="words among its arguments that are neither an option, an option's value nor the one positional "
        "model (an environment assignment such as CUDA_VISIBLE_DEVICES=0,1 written into args)",
    )
    start_problem: str | None = Field(
        default=None,
        description="why the command as written never starts this server (`bash -c` given the words of the "
        "line one by one runs only the first); the flags are read from the line as its author meant it",
    )
    options_unknown: str | None = Field(
        default=None,
        description="why its vLLM options are not known (the container runs a script or a Dockerfile's command the "
        "files do not hold): only the checks that read none of them are made (image, environment, mounts, secrets)",
    )
    installs: list[ReleaseClaim] = Field(
        default_factory=list, description="pip installs of vLLM or LMCache that run before it starts, in order"
    )
    hygiene: list[HygieneIssue] = Field(
        default_factory=list, description="deployment-hygiene problems around it (secrets, installs, probes, ...)"
    )
    claims: list[ClaimUse] = Field(default_factory=list, description="PersistentVolumeClaims its pod mounts")
    mounts: list[Mount] = Field(default_factory=list, description="the container's volume mounts")
    mounts_known: bool = Field(
        default=False,
        description="the files show the whole pod (a Deployment, StatefulSet, ... that no patch completes): a "
        "directory no mount covers is in the container's own filesystem",
    )
    ray_cluster: bool = Field(
        default=False, description="its container starts or joins a Ray cluster first: Ray places the workers"
    )
    background: bool = Field(
        default=False, description="a script starts it with `&` and goes on: what the script runs next runs beside it"
    )
    role: Literal["vllm", "lmcache-server"] = "vllm"
    entrypoint: str | None = Field(
        default=None, description="the module a `python -m` launch runs (vllm.entrypoints.api_server, dynamo.vllm)"
    )
    server: str | None = Field(default=None, description="the ports.yaml servers entry an LMCache server is")
    command: str | None = Field(
        default=None, description="the command that starts an LMCache server (lmcache server, python -m M)"
    )
    pod: str | None = Field(
        default=None, description="the pod (template) the container runs in: its containers share it"
    )
    pod_labels: dict[str, str] = Field(default_factory=dict)
    host_network: bool = Field(
        default=False, description="the pod (hostNetwork) or container (network_mode: host) uses the node's network"
    )
    namespace: str | None = Field(default=None, description="the Kubernetes object's metadata.namespace")
    service_links: bool = Field(
        default=False,
        description="a Kubernetes pod the kubelet gives the variables of its namespace's Services (enableServiceLinks, "
        "on unless the pod spec turns it off)",
    )
    ports: list[PortRef] = Field(default_factory=list, description="the container's ports (containerPort, -p, ports:)")
    probe_ports: list[PortRef] = Field(default_factory=list)
    gpus_stated: bool = Field(
        default=False,
        description="the files show every resource the container is given (none of them set elsewhere: a chart "
        "template, an operator), so no GPU request means none",
    )
    accelerator: str | None = Field(default=None, description="the accelerator resource given (nvidia.com/gpu, ...)")
    gpu_location: Location | None = None
    memory_limit_location: Location | None = None
    memory_request_location: Location | None = None
    shm_location: Location | None = Field(default=None, description="where /dev/shm is sized (the emptyDir, shm_size)")


class ProxyUse(BaseModel):
    """A P/D proxy script the reviewed files start, recognised by its name."""

    script: str
    location: Location


class ProxyLaunch(BaseModel):
    """A P/D proxy script started with its arguments, and the pod (or host) it runs in."""

    script: str
    words: list[tuple[str, Location]] = Field(description="the words after the script, up to the command's end")
    pod: str | None = None
    host_network: bool = False
    location: Location


class LMCacheConfig(BaseModel):
    """An LMCache YAML file, read as the LMCACHE_* variables it stands for."""

    name: str = Field(description="the file's name: the document's, or the ConfigMap key it is stored under")
    env: list[EnvUse]


class UnreadLaunch(BaseModel):
    """A document that names a vLLM launch and gave no workload: nothing in it was reviewed."""

    location: Location
    text: str = Field(description="the line that names the launch, clipped")


class Deployment(BaseModel):
    workloads: list[Workload]
    unread: list[UnreadLaunch] = Field(
        default_factory=list, description="documents that start vLLM in a way the readers could not follow"
    )
    proxies: list[ProxyUse] = Field(default_factory=list, description="P/D proxy scripts named outside comments")
    proxy_launches: list[ProxyLaunch] = Field(
        default_factory=list, description="the proxies started with their arguments, where the readers follow them"
    )
    lmcache_configs: list[LMCacheConfig] = Field(
        default_factory=list,
        description="LMCache YAML files; a server whose LMCACHE_CONFIG_FILE names one reads that one alone",
    )
    services: list[str] = Field(default_factory=list, description="names of Kubernetes Services in the input")
    claims: list[ClaimSpec] = Field(default_factory=list, description="PersistentVolumeClaims the files define")
    hygiene: list[HygieneIssue] = Field(
        default_factory=list, description="hygiene problems of a file as a whole (a duplicate key), for its workloads"
    )
    service_specs: list[ServiceSpec] = Field(default_factory=list, description="the Services, as they select pods")
    ingress_backends: list[IngressBackend] = Field(
        default_factory=list, description="the Services the Ingresses of the files route to"
    )
    pod_ports: dict[str, list[PortRef]] = Field(
        default_factory=dict, description="the ports every container of each pod declares (Workload.pod keys)"
    )
    cache_servers: list[Workload] = Field(
        default_factory=list, description="LMCache servers the files start (role lmcache-server), read like workloads"
    )
    conditional_lines: dict[str, dict[int, str]] = Field(
        default_factory=dict,
        description="per file: lines it renders or passes only where a condition holds (a chart template's "
        "if/with/range, a shell `${VAR:+...}`), with that condition",
    )
    referenced_env: set[str] = Field(
        default_factory=set,
        description="variables the files' own scripts and commands expand, or a launcher they name reads "
        "(KServe's VLLM_ADDITIONAL_ARGS): set for them, not for vLLM",
    )
    template_filled: dict[str, set[int]] = Field(
        default_factory=dict, description="per chart template: keys whose content a template action writes"
    )
    notes: list[str] = Field(default_factory=list, description="what could not be read, and why")


class ConnectorUse(BaseModel):
    name: str
    entry_id: str | None = Field(description="the knowledge entry, null for a connector the knowledge does not know")
    via: Literal["kv-transfer-config", "offload-shorthand", "multi-connector"]
    location: Location
    hma: str | None = Field(default=None, description="HMA support in this release: yes, no or conditional")


class Effective(BaseModel):
    """One workload's configuration as vLLM of ``version`` reads it."""

    workload: str
    version: str
    version_source: VersionSource
    version_location: Location | None = Field(default=None, description="where the release was read")
    lmcache_version: str | None = Field(default=None, description="the LMCache release a pip install pins")
    flags: dict[str, FlagUse] = Field(description="the last occurrence of each flag wins, as in argparse")
    env: dict[str, EnvUse]
    model: str | None
    image: str | None
    connectors: list[ConnectorUse]
    offload_shorthand: bool
    offload_backend: str | None
    transfer_config: dict[str, Any] | None
    transfer_location: Location | None
    extra_configs: list[dict[str, Any]] = Field(
        default_factory=list, description="the kv_connector_extra_config, then those of the connectors it wraps"
    )
    tiers: list[str] = Field(description="types of native secondary tiers")
    gpu: str | None = Field(default=None, description="the GPU entry in the knowledge, when known")
    facts: dict[FactName, float] = Field(description="numbers the rules compare: world_size, offload tier GiB, ...")
    fact_locations: dict[FactName, Location] = Field(
        default_factory=dict, description="where the number behind each fact was written, when it was"
    )
    notes: list[str] = Field(default_factory=list)
