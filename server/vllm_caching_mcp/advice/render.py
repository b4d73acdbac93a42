"""render_config: a ready configuration for a chosen backend, validated before it is returned.

Caller text is held to what every format it reaches can carry before anything is planned: the
request model's field types refuse control characters, a leading '-' where a program would read an
option, and anything that is not an image reference, host name or absolute path where one is
expected; `_check_paths_fit_format` and `_lmcache_list` refuse what one format cannot carry.

Then three steps. `_plan` turns the request and the knowledge into components (each vLLM instance,
proxy, LMCache controller or server): argv, environment, ports, mounts, the kv-transfer-config
and LMCache config as Python values, and where every value came from. The Jinja2 templates in
`knowledge/templates/` lay the components out for one format, in a sandbox with StrictUndefined;
values only reach the text through a filter that encodes them for the context — `shq`
(shlex.quote) in shell, `tojson` in JSON, `yq` (a double-quoted YAML scalar) in YAML, `k8s`
(also doubling `$`, which Kubernetes would otherwise expand in args and env) and `envfile` (a
value bare, as Docker's --env-file reads no quotes). Finally `_validate` reads every output back
the way its reader does — sh words, docker run's options, Docker's env-file rules, python-dotenv,
json, yaml, LMCache's quote stripping and lists — and checks it gives the plan back word by word,
that no caller value stands where it would be read as an option, that every vLLM flag exists in
the release and is not one the release made harmful, the Kubernetes object shapes, and the units
(GiB vs bytes vs per-rank GiB).
"""

from __future__ import annotations

import functools
import io
import json
import math
import re
import shlex
import unicodedata
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, Field, ValidationError
from pydantic_core import PydanticCustomError

from ..knowledge import (
    SAFE_DUMPER,
    SAFE_LOADER,
    Backend,
    Connector,
    Fabric,
    Gated,
    Knowledge,
    LmcacheControllerCommand,
    PdProxy,
    Pitfall,
    Recipes,
    Setting,
    TierKind,
    change_of,
    ranged_at,
)
from ..registry import InvalidImageReference, parse_image_reference
from ..versions import Version, in_range
from .common import (
    AdviceError,
    Citation,
    Count,
    Result,
    SecurityCheck,
    SizeBytes,
    SizeGiB,
    ToolSpec,
    VersionContext,
    backend_facts,
    cite,
    docker_run_options,
    readable_number,
    resolve_version,
    security_check,
)

if TYPE_CHECKING:  # jinja2 is imported on the first render, not at server start-up
    from jinja2.sandbox import SandboxedEnvironment

Format = Literal["vllm_serve", "docker_run", "kubernetes", "kv_transfer_config", "lmcache_yaml", "env_file"]
Origin = Literal["user", "default", "computed", "knowledge"]
GIB = 2**30
_DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,40}[a-z0-9])?")
_RESOURCE_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")
_HOST_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOST = re.compile(rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*")
# What sh, `docker run --env-file` and python-dotenv all read verbatim when written bare (shlex's
# own test for "needs no quoting"); an env file value outside it would reach each reader differently.
_BARE_VALUE = re.compile(r"[\w@%+=:,./-]*", re.ASCII)
_TEMPLATES = {
    "vllm_serve": "vllm_serve.sh.j2",
    "docker_run": "docker_run.sh.j2",
    "kubernetes": "kubernetes.yaml.j2",
    "kv_transfer_config": "kv_transfer_config.json.j2",
    "lmcache_yaml": "lmcache.yaml.j2",
    "env_file": "env_file.env.j2",
}


# ---------------------------------------------------------------------------------------------
# What each caller-supplied text field accepts. A value reaches shell words, env files, YAML, JSON
# and LMCache's comma-separated lists; these rules keep it to what every one of them carries intact.

# Control characters (NUL, which sh drops; newline, which starts a new env-file line; tab), invisible
# format characters, lone surrogates and Unicode line separators.
_UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _printable(text: str) -> str:
    for char in text:
        if unicodedata.category(char) in _UNPRINTABLE:
            raise PydanticCustomError(
                "unprintable_text",
                "must be printable text: no control characters such as NUL, tab or newline (found {char})",
                {"char": f"U+{ord(char):04X}"},
            )
    return text


def _not_an_option(text: str) -> str:
    if text.startswith("-"):
        raise PydanticCustomError("option_like_text", "must not start with '-': it would be read as an option")
    return text


def _image_reference(text: str) -> str:
    accepts = "must be an image reference such as vllm/vllm-openai:v0.22.1 or registry:5000/team/vllm@sha256:<64 hex>"
    if text.startswith("-") or text != text.strip():
        raise PydanticCustomError("image_reference", accepts + " (not starting with '-', no spaces)")
    try:
        parse_image_reference(text)
    except InvalidImageReference as exc:
        raise PydanticCustomError("image_reference", accepts + "; {reason}", {"reason": str(exc)}) from None
    return text


def _host_name(text: str) -> str:
    if len(text) > 253 or not _HOST.fullmatch(text):
        raise PydanticCustomError(
            "host_name",
            "must be a host name or IPv4 address: dot-separated labels of letters, digits, '-' and '_' that do "
            "not start or end with '-' (an IPv6 literal is not taken here: give a name that resolves to it)",
        )
    return text


def _absolute_path(text: str) -> str:
    if not text.startswith("/") or text != text.rstrip():
        raise PydanticCustomError(
            "absolute_path",
            "must be an absolute path (starting with '/') without trailing spaces, which LMCache would strip",
        )
    return text


def _resource_name(text: str) -> str:
    if len(text) > 253 or not _RESOURCE_NAME.fullmatch(text):
        raise PydanticCustomError(
            "resource_name",
            "must be a Kubernetes extended resource name such as rdma/ib or rdma/roce_a: DOMAIN/NAME of letters, "
            "digits, '.', '_' and '-'",
        )
    return text


def _dns_label(text: str) -> str:
    if not _DNS_LABEL.fullmatch(text):
        raise PydanticCustomError(
            "dns_label", "must be a DNS label: lower-case letters, digits and '-', up to 42 characters"
        )
    return text


PlainText = Annotated[str, AfterValidator(_printable)]
Argument = Annotated[str, AfterValidator(_printable), AfterValidator(_not_an_option)]
ImageReference = Annotated[str, AfterValidator(_printable), AfterValidator(_image_reference)]
HostName = Annotated[str, AfterValidator(_printable), AfterValidator(_host_name)]
AbsolutePath = Annotated[str, Field(max_length=4096), AfterValidator(_printable), AfterValidator(_absolute_path)]
DnsLabel = Annotated[str, AfterValidator(_dns_label)]
ResourceName = Annotated[str, AfterValidator(_resource_name)]


class Parallelism(BaseModel):
    tensor_parallel_size: int = Field(default=1, ge=1, le=64)
    pipeline_parallel_size: int = Field(default=1, ge=1, le=64)
    data_parallel_size: int = Field(default=1, ge=1, le=1024)


class Sizes(BaseModel):
    kv_offloading_size_gib: SizeGiB | None = Field(
        default=None, gt=0, le=1_000_000, description="GiB total across TP × PP ranks"
    )
    cpu_bytes_to_use: SizeBytes | None = Field(default=None, gt=0, description="bytes total")
    lmcache_max_local_cpu_size_gib: SizeGiB | None = Field(
        default=None, gt=0, description="GiB per worker (= total ÷ TP × PP)"
    )
    num_cpu_blocks: Count | None = Field(default=None, gt=0, description="vLLM < 0.14.0 only")
    disk_gib: SizeGiB | None = Field(default=None, gt=0, description="GiB per worker")
    gds_buffer_mib: int | None = Field(default=None, gt=0, le=1_048_576, description="MiB")
    lmcache_server_l1_gib: SizeGiB | None = Field(default=None, gt=0, description="GiB")


class Paths(BaseModel):
    disk: list[AbsolutePath] = Field(default_factory=list, max_length=16, description="absolute NVMe directories")
    gds: list[AbsolutePath] = Field(default_factory=list, max_length=16, description="absolute")
    lmcache_config_file: AbsolutePath = Field(default="/etc/lmcache/lmcache.yaml", max_length=500)


class ObjectStore(BaseModel):
    bucket: PlainText = Field(min_length=1, max_length=255)
    endpoint_override: PlainText = Field(min_length=1, max_length=500)
    prefix: PlainText = Field(default="", max_length=255)


class Hosts(BaseModel):
    """Addresses for command-line formats; Kubernetes uses pod IPs and Service names instead."""

    this_instance: HostName | None = Field(default=None)
    prefill: HostName | None = None
    decode: HostName | None = None
    lmcache_server: HostName | None = None
    controller: HostName | None = None


class RenderConfigRequest(BaseModel):
    backend: Backend | None = Field(default=None, description="or give `choice`")
    choice: dict[str, Any] | None = Field(default=None, description="a choose_backend result")
    tiers: list[TierKind] | None = Field(default=None, description="native_tiering: tiers in order")
    model: Argument = Field(min_length=1, max_length=300, description="HF id or path")
    version: str | None = Field(default=None, max_length=40)
    lmcache_version: str | None = Field(default=None, max_length=40)
    parallelism: Parallelism = Field(default_factory=Parallelism)
    sizes: Sizes = Field(default_factory=Sizes)
    size_offload: dict[str, Any] | None = Field(default=None, description="a size_offload result")
    paths: Paths = Field(default_factory=Paths)
    object_store: ObjectStore | None = None
    hosts: Hosts = Field(default_factory=Hosts)
    fabric: Fabric | None = None
    instances: int = Field(default=2, ge=2, le=64, description="lmcache_p2p: instances sharing")
    name: DnsLabel | None = Field(default=None, description="DNS label; omitted: <model>-<backend>")
    namespace: DnsLabel | None = Field(default=None)
    image: ImageReference | None = Field(
        default=None, max_length=300, description="omitted: vllm/vllm-openai:v<version>"
    )
    lmcache_image: ImageReference | None = Field(default=None, max_length=300)
    format: Format = "vllm_serve"
    hf_token: Literal["optional", "required"] = Field(
        default="optional",
        description="HF_TOKEN from Secret hf-token; required for gated models",
    )
    model_cache: Literal["pvc", "host_path"] = Field(
        default="pvc",
        description="a PVC per workload, or model_cache_path on the node",
    )
    model_cache_path: AbsolutePath | None = Field(
        default=None,
    )
    shared_tier_volume: Literal["pvc", "host_path"] = Field(
        default="pvc",
        description="fs tier on a shared RWX PVC, or the node's paths.disk",
    )
    rdma_resource: ResourceName = Field(
        default="rdma/ib",
        description="RDMA device-plugin resource per P/D pod, as your plugin names it",
    )
    host_ram_gib: SizeGiB | None = Field(default=None, gt=0, le=100_000, description="GiB per node")
    gpus_per_host: int | None = Field(default=None, ge=1, le=64, description="P/D roles on one host get their own")
    proxy_source: Literal["fetch", "config_map"] = Field(
        default="fetch",
    )


class ComponentMemory(BaseModel):
    name: str
    memory_gib: int = Field(description="the memory request and limit of the container, GiB")
    pinned_gib: float = Field(description="what it pins: CPU tier, LMCache local CPU of every worker, server L1")
    shm_gib: float = Field(
        description="/dev/shm it needs: the CPU tier where the release keeps it there, plus headroom"
    )

    def line(self) -> str:
        shm = f", /dev/shm {self.shm_gib:g} GiB" if self.shm_gib else ""
        return f"{self.name} {self.memory_gib} GiB (pins {self.pinned_gib:g} GiB{shm})"


class HostMemory(BaseModel):
    components: list[ComponentMemory]
    host_ram_gib: float | None = Field(default=None, description="the node's RAM, when given")
    host_ram_left_gib: float | None = Field(
        default=None,
        description="RAM the node keeps after what this render runs on it; from host_ram_gib or a "
        "size_offload result's host_ram_left_gib",
    )
    basis: str


class RenderedFile(BaseModel):
    name: str
    format: Format
    content: str


class ValueSource(BaseModel):
    name: str
    value: str
    origin: Origin
    note: str | None = None


class RenderConfigResult(Result):
    version_context: VersionContext
    lmcache_context: VersionContext | None = None
    backend: Backend
    format: Format
    files: list[RenderedFile]
    values: list[ValueSource] = Field(description="where each value came from: user, default, computed, knowledge")
    checks: list[str] = Field(description="what was verified on the rendered text before returning it")
    notes: list[str]
    citations: list[Citation]
    security: SecurityCheck | None = Field(
        default=None,
        description="known advisories for the vLLM release rendered and the security floor (stored snapshot)",
    )
    lmcache_security: SecurityCheck | None = Field(default=None, description="the same for the LMCache release")
    memory: HostMemory | None = Field(
        default=None, description="memory and /dev/shm of each container, and the host RAM left"
    )

    def summary(self) -> str:
        lines = [f"{self.backend} as {self.format} for vLLM {self.version_context.version}"]
        for f in self.files:
            lines += [f"===== {f.name}", f.content.rstrip()]
        lines += [f"note: {n}" for n in self.notes]
        if self.memory is not None:
            lines.append("memory: " + "; ".join(m.line() for m in self.memory.components))
            if self.memory.host_ram_left_gib is not None:
                lines.append(f"host RAM left: {self.memory.host_ram_left_gib:g} GiB ({self.memory.basis})")
        lines.append(f"checked: {'; '.join(self.checks)}")
        lines += [check.lines()[0] for check in (self.security, self.lmcache_security) if check is not None]
        lines += [f"warning: {w}" for w in self.version_context.warnings]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The plan


@dataclass
class Env:
    name: str
    value: str = ""
    field: str | None = None  # Kubernetes downward API path; value is used elsewhere
    # A Secret (name, key) in Kubernetes; docker run passes the caller's own variable, a script inherits it.
    secret: tuple[str, str] | None = None
    optional: bool = True

    @property
    def written(self) -> bool:
        """Whether the value itself stands in a command line or env file."""
        return self.field is None and self.secret is None


@dataclass
class Port:
    name: str
    port: int


@dataclass
class Component:
    name: str
    description: str
    argv: list[str]
    image: str
    kind: Literal["vllm", "helper"] = "vllm"
    env: list[Env] = field(default_factory=list)
    ports: list[Port] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    gpus: int = 0
    replicas: int = 1
    service: Literal["headless", "cluster", ""] = ""
    host_network: bool = False
    shm: bool = False  # shares the host's /dev/shm (the LMCache MP server and its vLLM)
    pod_ip: bool = False
    host_ip: bool = False
    kv_transfer_config: dict[str, Any] | None = None
    lmcache_config: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    pinned_gib: float = 0.0  # host memory it pins (CPU tier, LMCache DRAM, server L1)
    shm_tier_gib: float = 0.0  # the part of that the release keeps in /dev/shm
    shm_gib: float = 0.0  # the /dev/shm it is given (tier + headroom); 0: the default
    memory_gib: int = 0
    rdma: bool = False
    model_cache: str | None = None  # docker -v source / Kubernetes PVC name or host path of the model cache
    shared_mounts: list[str] = field(default_factory=list)  # Kubernetes: on the ReadWriteMany tier PVC
    startup_failures: int = 0  # startupProbe failureThreshold; 0: no probes
    script_config_map: str | None = None  # Kubernetes: the ConfigMap its script is mounted from
    # The command that downloads its script before it starts: a Kubernetes init container, a docker_run line.
    fetch_argv: list[str] = field(default_factory=list)
    fetch_image: str = ""
    devices: list[int] = field(default_factory=list)  # the GPUs of its host it is given; []: all of them

    @property
    def http_port(self) -> int | None:
        return next((p.port for p in self.ports if p.name == "http"), None)

    @property
    def docker_gpus(self) -> str:
        """docker run's --gpus: its devices (in double quotes, the way docker reads a list with commas), else all."""
        return f'"device={",".join(map(str, self.devices))}"' if self.devices else "all"

    @property
    def lines(self) -> list[list[str]]:
        """argv grouped for display: the program words, then each option with its values."""
        groups: list[list[str]] = [[]]
        for word in self.argv:
            if word.startswith("--") and groups[-1]:
                groups.append([])
            groups[-1].append(word)
        return groups


@dataclass
class Plan:
    components: list[Component]
    values: list[ValueSource] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    cited: dict[str, Citation] = field(default_factory=dict)
    # What the units check compares the output with.
    offloading_gib: float | None = None
    cpu_bytes: int | None = None
    lmcache_per_rank_gib: float | None = None
    memory: HostMemory | None = None


class _Ports:
    """The ports of the processes of one render that share a host (or a pod): each handed out once."""

    def __init__(self) -> None:
        self.taken: set[int] = set()

    def reserve(self, *ports: int) -> None:
        self.taken.update(ports)

    def block(self, start: int, count: int = 1) -> list[int]:
        """The first ``count`` consecutive free ports from ``start``, now taken."""
        base = start
        while any(port in self.taken for port in range(base, base + count)):
            base += 1
        if base + count - 1 > 65535:
            raise AdviceError(
                "instances",
                f"the processes of this render need more ports than a host has from {start}; render fewer "
                "instances or ranks per host, or use the kubernetes format",
            )
        ports = list(range(base, base + count))
        self.taken.update(ports)
        return ports


# A size in a model id: 70B, 8B, 1.5B; a mixture such as 8x7B counts every expert.
_MODEL_SIZE = re.compile(r"(?:(\d+)x)?(\d+(?:\.\d+)?)[bB](?![a-zA-Z0-9])")


def model_params_b(model: str) -> float | None:
    """Billions of parameters as the model id states them (the largest such figure), None when it does not."""
    sizes = [float(m.group(2)) * int(m.group(1) or 1) for m in _MODEL_SIZE.finditer(model)]
    return max(sizes) if sizes else None


def default_name(model: str, backend: Backend) -> str:
    """<model>-<backend> as a DNS label: the last part of the model id, lower case, runs of other
    characters as one '-', cut so the whole fits the 42 characters a name prefix may take."""
    suffix = backend.replace("_", "-")
    stem = re.sub(r"[^a-z0-9]+", "-", model.rstrip("/").rsplit("/", 1)[-1].lower()).strip("-")
    stem = stem[: 41 - len(suffix)].strip("-")
    return f"{stem}-{suffix}" if stem else suffix


class _Planner:
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
        self._ports: dict[str, _Ports] = {}
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
    def ports_on(self, host: str | None) -> _Ports:
        """The ports handed out on one host (None: this instance's); the helpers' fixed ports are kept
        free on every host, since they may run on any of them."""
        key = host or self.r.hosts.this_instance or "localhost"
        if key not in self._ports:
            ports = self._ports[key] = _Ports()
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
        if c.kind == "helper":
            c.memory_gib = math.ceil(c.pinned_gib + memory.helper_gib)
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
        return _SHARED_TIER_DEFAULT_GIB

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

    def _none(self) -> None:
        self.plan.components.append(self.vllm("vllm", "vLLM with GPU prefix caching only", None))

    def _native_cpu(self) -> None:
        self.cite("connector.offloading")
        gib = self.total_gib()
        assert gib is not None
        self._native_cpu_tier(gib)

    def _native_cpu_tier(self, gib: float) -> None:
        shorthand = self.available("flag.kv-offloading-size") and not self.pitfall_applies(
            "pitfall.native-backend-before-0.14"
        )
        if shorthand:
            flags = ["--kv-offloading-size", _num(gib), "--kv-offloading-backend", "native"]
            self.plan.offloading_gib = gib
            if (
                self.pitfall_applies("pitfall.hma-flag-missing-with-shorthand")
                and self.hma("connector.offloading") == "no"
            ):
                flags.append("--disable-hybrid-kv-cache-manager")
                self.note(
                    "--disable-hybrid-kv-cache-manager", "set", "knowledge", "pitfall.hma-flag-missing-with-shorthand"
                )
            c = self.vllm("vllm", "vLLM with native CPU KV offload", None, flags)
            c.pinned_gib, c.shm_tier_gib = gib, self._shm_tier("cpu", gib)
            self.plan.components.append(c)
            return
        blocks = self.r.sizes.num_cpu_blocks
        if blocks is None:
            raise AdviceError(
                "sizes.num_cpu_blocks",
                f"vLLM {self.version} sizes the native CPU tier in blocks (num_cpu_blocks) and its offload shorthand "
                "does not work; give num_cpu_blocks (e.g. from size_offload), or use 0.14.0+",
            )
        self.note("num_cpu_blocks", blocks, "user")
        self.cite("spec.num-cpu-blocks")
        config = self.ktc("connector.offloading", "kv_both", {"num_cpu_blocks": blocks})
        c = self.vllm("vllm", "vLLM with native CPU KV offload", config)
        c.pinned_gib = gib  # before 0.14.0 the tier is a private pinned tensor per worker
        self.plan.components.append(c)

    def _tiers(self) -> list[TierKind]:
        if self.r.tiers is not None:
            self.note("tiers", ",".join(self.r.tiers), "user")
            return list(self.r.tiers)
        self.note("tiers", "fs", "default")
        return ["fs"]

    def _secondary(self, kinds: list[TierKind]) -> list[dict[str, Any]]:
        self.require("feature.native-multi-tier-offload", "native multi-tier offload (TieringOffloadingSpec)")
        tiers: list[dict[str, Any]] = []
        for kind in kinds:
            name = self.recipes.tier_type(kind, self.version)
            feature = self.recipes.tier_names_entry(kind).feature
            self.require(feature, f"the {kind} secondary tier", "tiers")
            assert name is not None
            self.note(f"secondary_tiers[{kind}].type", name, "knowledge", "tier type name registered in this release")
            self.cite("spec.tier.type")
            if kind == "fs":
                if len(self.r.paths.disk) != 1:
                    raise AdviceError("paths.disk", "the fs tier takes exactly one root directory")
                tiers.append({"type": name, "root_dir": self.r.paths.disk[0]})
                self.note("root_dir", self.r.paths.disk[0], "user")
            elif kind == "obj":
                store = self.r.object_store
                if store is None:
                    raise AdviceError("object_store", "the obj tier needs bucket and endpoint_override")
                tier: dict[str, Any] = {
                    "type": name,
                    "store_config": {"bucket": store.bucket, "endpoint_override": store.endpoint_override},
                }
                if store.prefix:
                    tier["prefix"] = store.prefix
                tiers.append(tier)
                optional_keys = change_of(self.gated(feature).changes, "keys-optional")
                if optional_keys and self.version < optional_keys.version:
                    self.plan.notes.append(
                        f"vLLM {self.version} needs access_key and secret_key in store_config (optional from "
                        f"{optional_keys.version}); add them from your secret store — they are never rendered here."
                    )
            else:
                entry: dict[str, Any] = {"type": name}
                if not self.available("env.vllm-p2p-side-channel-host"):
                    entry["host"] = self.host(self.r.hosts.this_instance, "this_instance", "instance")
                tiers.append(entry)
        return tiers

    def _native_tiering(self) -> None:
        self.cite("connector.offloading")
        kinds = self._tiers()
        tiers = self._secondary(kinds)
        spec = {"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": self.cpu_bytes(), "secondary_tiers": tiers}
        self.cite("spec.spec-name")
        c = self.vllm(
            "vllm", "vLLM with native multi-tier KV offload", self.ktc("connector.offloading", "kv_both", spec)
        )
        gib = self.plan.cpu_bytes / GIB if self.plan.cpu_bytes else 0.0
        c.pinned_gib, c.shm_tier_gib = gib, self._shm_tier("tiering", gib)
        if "fs" in kinds:
            shared = self.kube and self.r.shared_tier_volume == "pvc"
            if shared:
                c.shared_mounts = list(self.r.paths.disk)
                self.note(
                    "fs tier volume",
                    f"PersistentVolumeClaim {self.name}-kv-tier, ReadWriteMany, {self.shared_tier_gib()} GiB",
                    "user" if self.r.sizes.disk_gib is not None else "default",
                    "set sizes.disk_gib to size it; its storage class must offer ReadWriteMany",
                )
            else:
                c.mounts = list(self.r.paths.disk)
        # Blocks in a secondary tier outlive the process: finding them again after a restart, or from
        # another instance, needs the same block hashes, i.e. one fixed seed where vLLM has none.
        if kinds and not self.available("feature.prefix-hash-fixed-default-seed"):
            c.env.append(Env("PYTHONHASHSEED", "0"))
            self.note(
                "PYTHONHASHSEED", "0", "knowledge", "pitfall.shared-tier-without-hash-seed: same on every instance"
            )
            self.cite("pitfall.shared-tier-without-hash-seed")
        if "p2p" in kinds:
            port = self._p2p_tier_port()
            if self.available("env.vllm-p2p-side-channel-host"):
                host = self.host(self.r.hosts.this_instance, "this_instance", "instance")
                c.env.append(Env("VLLM_P2P_SIDE_CHANNEL_HOST", host, "status.podIP" if self.kube else None))
            c.ports.append(Port("p2p", port))
            c.service = "headless"
            c.replicas = 2
            c.pod_ip = self.kube and not self.available("env.vllm-p2p-side-channel-host")
        self.plan.components.append(c)

    def _p2p_tier_port(self) -> int:
        """The port the p2p tier binds: VLLM_P2P_SIDE_CHANNEL_PORT's default where vLLM reads it, else the
        tier entry's own default (0.25.x)."""
        for entry_id in ("env.vllm-p2p-side-channel-port", "spec.tier.p2p.port"):
            port = self.default_of(entry_id) if self.available(entry_id) else None
            if isinstance(port, int):
                return port
        raise AdviceError("version", f"no p2p tier port is known for vLLM {self.version}")

    def _lmcache_env(self, component: Component, per_rank: float) -> dict[str, Any]:
        """LMCache settings for in-process LMCache, as both env and the YAML config."""
        assert self.lm_version is not None
        config: dict[str, Any] = {"local_cpu": True, "max_local_cpu_size": per_rank}
        self.cite("lmcache.max_local_cpu_size")
        self.cite("pitfall.lmcache-local-cpu-false")
        if self.r.paths.disk:
            disk_gib = self.r.sizes.disk_gib
            if disk_gib is None:
                raise AdviceError("sizes.disk_gib", "give the LMCache disk tier size in GiB per worker")
            many = change_of(self.gated("lmcache.local_disk").changes, "path-list")
            if len(self.r.paths.disk) > 1 and many and self.lm_version < many.version:
                raise AdviceError(
                    "paths.disk", f"LMCache {self.lm_version} takes one disk path; a list needs {many.version}+"
                )
            config["local_disk"] = _lmcache_list("disk", [f"file://{p}" for p in self.r.paths.disk])
            config["max_local_disk_size"] = disk_gib
            self.note("max_local_disk_size", disk_gib, "user", "GiB per worker process")
            component.mounts += self.r.paths.disk
            self.cite("pitfall.lmcache-async-loading-with-disk")
        if self.r.paths.gds:
            buffer = self.r.sizes.gds_buffer_mib
            if buffer is None:
                raise AdviceError("sizes.gds_buffer_mib", "the GDS tier needs its staging buffer size in MiB")
            key = (
                "gds_buffer_size"
                if self.available("lmcache.gds_buffer_size", self.lm_version)
                else "cufile_buffer_size"
            )
            config["gds_path"] = _lmcache_list("gds", self.r.paths.gds)
            config[key] = buffer
            self.note(key, buffer, "user", "MiB (not bytes)")
            component.mounts += self.r.paths.gds
        return config

    def _lmcache(self) -> None:
        self.cite("connector.lmcache")
        gib = self.total_gib()
        assert gib is not None
        per_rank = self.r.sizes.lmcache_max_local_cpu_size_gib or gib / (self.tp * self.pp)
        self.plan.lmcache_per_rank_gib = per_rank
        self.note("LMCACHE_MAX_LOCAL_CPU_SIZE", _num(per_rank), "computed", "GiB per worker = total ÷ (TP × PP)")
        c = self.vllm("vllm", "vLLM with in-process LMCache", self.ktc("connector.lmcache", "kv_both"))
        c.pinned_gib = per_rank * self.tp * self.pp
        config = self._lmcache_env(c, per_rank)
        self._attach_lmcache(c, config)
        self.plan.components.append(c)

    def _attach_lmcache(self, c: Component, config: dict[str, Any]) -> None:
        c.lmcache_config = config
        if self.r.format == "lmcache_yaml":
            return
        for key, value in config.items():
            if isinstance(value, Env):
                c.env.append(Env(f"LMCACHE_{key.upper()}", value.value, value.field))
            else:
                c.env.append(Env(f"LMCACHE_{key.upper()}", _env_value(value)))

    def _lmcache_p2p(self) -> None:
        self.cite("connector.lmcache")
        gib = self.total_gib()
        assert gib is not None
        per_rank = self.r.sizes.lmcache_max_local_cpu_size_gib or gib / (self.tp * self.pp)
        self.plan.lmcache_per_rank_gib = per_rank
        ctrl_host = (
            f"{self.name}-lmcache-controller" + (f".{self.r.namespace}.svc" if self.r.namespace else "")
            if self.kube
            else (self.r.hosts.controller or "localhost")
        )
        self.note(
            "controller host",
            ctrl_host,
            "computed" if self.kube else ("user" if self.r.hosts.controller else "default"),
        )
        controller = self.recipes.facts.lmcache_controller
        count = 1 if self.kube else self.r.instances
        components = [self._lmcache_peer(i, per_rank, ctrl_host, controller) for i in range(count)]
        components.append(self._lmcache_controller(controller))
        self.cite("pitfall.lmcache-p2p-incomplete")
        self.plan.components += components

    def _lmcache_peer(self, i: int, per_rank: float, ctrl_host: str, controller: LmcacheControllerCommand) -> Component:
        """vLLM instance ``i`` of an LMCache P2P group: every setting LMCache asserts for P2P, and its own ports."""
        name = "vllm" if self.kube else f"vllm-{i}"
        c = self.vllm(name, "vLLM with LMCache P2P sharing", self.ktc("connector.lmcache", "kv_both"))
        ranks = self.tp * self.pp
        c.pinned_gib = per_rank * ranks
        config = self._lmcache_env(c, per_rank)
        for e in self.recipes.recipe("lmcache_p2p").required_env:
            self.cite(e.setting)
            config[e.name.removeprefix("LMCACHE_").lower()] = _typed(e.value)
        base = self.facts.lmcache_p2p_ports.base
        init_ports, lookup_ports, worker_ports = (self.ports_on(None).block(base, ranks) for _ in range(3))
        config |= {
            "controller_pull_url": f"{ctrl_host}:{controller.pull_port}",
            "controller_reply_url": f"{ctrl_host}:{controller.reply_port}",
            "lmcache_worker_ports": _port_list(worker_ports),
            "p2p_init_ports": _port_list(init_ports),
            "p2p_lookup_ports": _port_list(lookup_ports),
            "p2p_host": Env(
                "",
                self.host(self.r.hosts.this_instance, "this_instance", "instance"),
                "status.podIP" if self.kube else None,
            ),
            "lmcache_instance_id": Env("", f"{self.name}-{i}", "metadata.name" if self.kube else None),
        }
        self.note("p2p ports", config["p2p_init_ports"], "computed", "one per worker rank (TP × PP)")
        c.env.append(Env("PYTHONHASHSEED", "0"))
        c.ports += [Port(f"p2p-{r}", port) for r, port in enumerate(init_ports[:4])]
        if not self.kube:  # every port it listens on, for the one-host check
            c.ports += [Port(f"lookup-{r}", port) for r, port in enumerate(lookup_ports)]
            c.ports += [Port(f"worker-{r}", port) for r, port in enumerate(worker_ports)]
            c.ports += [Port(f"p2p-{r}", port) for r, port in enumerate(init_ports[4:], start=4)]
        c.service, c.replicas = "headless", self.r.instances
        self._attach_lmcache(c, config)
        if self.r.format == "lmcache_yaml":
            c.lmcache_config = {k: (v.value if isinstance(v, Env) else v) for k, v in config.items()}
        return c

    def _lmcache_helper_image(self) -> tuple[str, str]:
        """The image of the LMCache controller or server, and the directory its commands are run from
        ('' for the caller's image or a host install: on PATH)."""
        if self.r.lmcache_image is not None:
            return self.r.lmcache_image, ""
        if self.r.format not in ("docker_run", "kubernetes"):
            return self.image, ""
        fact = self.facts.lmcache_image
        self.cite_fact("lmcache_image")
        self.note("lmcache_image", fact.image, "knowledge", "LMCache's own image; pin one through lmcache_image")
        self.cite("feature.release-image-kv-connectors")
        self.plan.notes.append(
            f"The LMCache helpers run from {fact.image}, LMCache's own image: the vllm/vllm-openai release images "
            "carry LMCache (built with INSTALL_KV_CONNECTORS=true) but not a release their tag names; the nightly "
            f"tag moves, so pin one with LMCache {self.lm_version} through lmcache_image. A vLLM image built "
            "without INSTALL_KV_CONNECTORS needs LMCache installed for the connector."
        )
        return fact.image, fact.bin_dir + "/"

    def _lmcache_controller(self, controller: LmcacheControllerCommand) -> Component:
        monitor = json.dumps({"pull": controller.pull_port, "reply": controller.reply_port})
        image, bin_dir = self._lmcache_helper_image()
        return Component(
            name="lmcache-controller",
            description="LMCache controller: tracks which instance holds which chunks",
            argv=[
                *_in_dir(bin_dir, controller.command),
                "--host",
                "0.0.0.0",
                "--port",
                str(controller.http_port),
                "--monitor-ports",
                monitor,
            ],
            image=image,
            kind="helper",
            ports=[
                Port("http", controller.http_port),
                Port("pull", controller.pull_port),
                Port("reply", controller.reply_port),
            ],
            service="cluster",
        )

    def _lmcache_mp(self) -> None:
        self.cite("connector.lmcache-mp")
        assert self.lm_version is not None
        server, address = self.recipes.facts.lmcache_server, self.recipes.facts.lmcache_mp_address
        l1 = self.r.sizes.lmcache_server_l1_gib or self.total_gib()
        self.note("--l1-size-gb", l1, "user", "GiB, one pool for every vLLM on the node")
        self.cite("lmcache.mp_server.l1_size_gb")
        port = address.port
        host = self.host_ip if self.kube else (self.r.hosts.lmcache_server or "localhost")
        config = self.ktc(
            "connector.lmcache-mp", "kv_both", {address.host_key: f"tcp://{host}", address.port_key: port}
        )
        c = self.vllm("vllm", "vLLM connected to the node's LMCache server", config)
        c.host_ip, c.shm = self.kube, True
        image, bin_dir = self._lmcache_helper_image()
        if self.pitfall_applies("pitfall.lmcache-backend-means-mp-server"):
            self.plan.notes.append(
                "Written as an explicit LMCacheMPConnector config; --kv-offloading-size is not passed on to it."
            )
        self.plan.components += [
            Component(
                name="lmcache-server",
                description="LMCache MP server: one shared KV pool per node",
                argv=[
                    *_in_dir(bin_dir, server.command_for(self.lm_version)),
                    "--host",
                    "0.0.0.0",
                    "--port",
                    str(port),
                    "--l1-size-gb",
                    _num(l1 or 0),
                    "--eviction-policy",
                    server.eviction_policy,
                ],
                image=image,
                kind="helper",
                ports=[Port("zmq", port)],
                host_network=True,
                shm=True,
                pinned_gib=l1 or 0.0,
            ),
            c,
        ]

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
                config = self.ktc("connector.multi", role, {_children_key(self.k): children})
            else:
                config = self.ktc(connector_id, role, extra)
            c = self.vllm(label, f"{label} instance ({role})", config, host=given)
            if local_tier:
                gib = self.plan.cpu_bytes / GIB if self.plan.cpu_bytes else 0.0
                c.pinned_gib, c.shm_tier_gib = gib, self._shm_tier("cpu", gib)
            host = self.host(given, label, f"{label} instance")
            if connector_id == "connector.mooncake":
                bootstrap = self._side_ports(label, given, "env.vllm-mooncake-bootstrap-port")
                c.env.append(Env("VLLM_MOONCAKE_BOOTSTRAP_PORT", str(bootstrap[0])))
                c.ports += [Port("bootstrap" if n == 0 else f"bootstrap-{n}", p) for n, p in enumerate(bootstrap)]
            else:
                side = self._side_ports(label, given, "env.vllm-nixl-side-channel-port")
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
        host_gpus = self.r.gpus_per_host or _DEFAULT_GPUS_PER_HOST
        if first + c.gpus > host_gpus:
            given = "" if self.r.gpus_per_host else f" (gpus_per_host not given: {host_gpus} assumed)"
            self.context.warnings.append(
                f"the roles on {key} need {first + c.gpus} GPUs, more than the {host_gpus} of one host{given}: "
                "put prefill and decode on different hosts (hosts.prefill, hosts.decode) or lower their parallelism"
            )

    def _side_ports(self, label: str, host: str | None, entry_id: str) -> list[int]:
        """The ports one role's side channel (or bootstrap server) listens on: the release's default
        plus one per data-parallel rank (× TP before 0.14.0); on one host the second role's start where
        the first role's end."""
        self.cite_fact("single_host_ports")
        span = self.r.parallelism.data_parallel_size * self.tp
        default = int(self.default_of(entry_id))
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
        script = f"{_PROXY_DIR}/{proxy.script}" if in_container else proxy.script
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


_PROXY_DIR = "/opt/proxy"
# The GPUs of one host when the request does not say (gpus_per_host): the usual 8-GPU server.
_DEFAULT_GPUS_PER_HOST = 8
# The fs tier's PVC size when sizes.disk_gib is not given: a placeholder the caller should set, noted as such.
_SHARED_TIER_DEFAULT_GIB = 1024


def _in_dir(bin_dir: str, command: tuple[str, ...]) -> list[str]:
    """A console-script command run from ``bin_dir`` ('' leaves it to PATH); python3 -m stays as it is."""
    if not bin_dir or command[0] == "python3":
        return list(command)
    return [bin_dir + command[0], *command[1:]]


def _port_list(ports: list[int]) -> str:
    """LMCache's list syntax for its port settings: the numbers joined by ','."""
    return ",".join(map(str, ports))


def _children_key(knowledge: Knowledge) -> str:
    """The kv_connector_extra_config key under which MultiConnector lists the connectors it wraps."""
    multi = knowledge.by_id["connector.multi"]
    assert isinstance(multi, Connector) and multi.children_key is not None
    return multi.children_key


def _lmcache_list(kind: Literal["disk", "gds"], entries: list[str]) -> str:
    """LMCache's list syntax for local_disk and gds_path: entries joined by ','; an entry holding one
    would come back as two (a second disk LMCache then writes to)."""
    for i, entry in enumerate(entries):
        if "," in entry:
            raise AdviceError(
                f"paths.{kind}.{i}", "LMCache reads this setting as a ','-separated list, so a path cannot contain ','"
            )
    return ",".join(entries)


def _check_paths_fit_format(request: RenderConfigRequest) -> None:
    """Paths the chosen format cannot write as given. docker run -v splits SOURCE:TARGET[:OPTIONS] at
    every ':'; an env file's values stand bare on their line, as Docker's --env-file reads no quotes."""
    for kind in ("disk", "gds"):
        for i, path in enumerate(getattr(request.paths, kind)):
            where = f"paths.{kind}.{i}"
            if request.format == "docker_run" and ":" in path:
                raise AdviceError(
                    where,
                    "docker run -v splits SOURCE:TARGET at ':', so a mounted path cannot contain ':'; "
                    "the kubernetes format carries it",
                )
            if request.format == "env_file" and not _BARE_VALUE.fullmatch(path):
                raise AdviceError(
                    where,
                    "the env_file format writes each value bare (docker run --env-file does no quote processing), "
                    "so a path there takes only letters, digits and _@%+=:,./-; vllm_serve, docker_run and "
                    "kubernetes quote it",
                )


# ---------------------------------------------------------------------------------------------
# Encoding filters and templates


def _num(value: float) -> str:
    """A float without a needless '.0' and without exponent notation."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def _env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return _num(value)
    return str(value)


def _typed(text: str) -> Any:
    return {"True": True, "False": False}.get(text, text)


_NO_WRAP = 1 << 30  # the emitter's line width: never fold a value


def _yaml_scalar(value: Any) -> str:
    try:
        return _cached_yaml_scalar(value)
    except TypeError:  # unhashable: never cached
        return _dump_yaml_scalar(value)


# typed: True, 1 and 1.0 are equal keys to a plain cache, but dump as three different scalars.
@functools.lru_cache(maxsize=4096, typed=True)
def _cached_yaml_scalar(value: Any) -> str:
    return _dump_yaml_scalar(value)


def _dump_yaml_scalar(value: Any) -> str:
    if isinstance(value, bool | int | float) and not isinstance(value, str):
        return yaml.dump(value, Dumper=SAFE_DUMPER, width=_NO_WRAP).split("\n", 1)[0]
    return yaml.dump(str(value), Dumper=SAFE_DUMPER, default_style='"', width=_NO_WRAP, allow_unicode=False).strip()


def _env_file_value(value: Any) -> str:
    """A value written bare in an env file. Caller text that needs quoting is refused before planning
    (`_check_paths_fit_format`); anything else that does is refused here rather than mangled."""
    text = str(value)
    if not _BARE_VALUE.fullmatch(text):
        raise RenderCheckError("format", f"{text!r} cannot be written bare in an env file; pick another format")
    return text


def _comment(value: Any) -> str:
    return re.sub(r"[\r\n\x00-\x1f]+", " ", str(value))


@functools.cache
def _environment(directory: str) -> SandboxedEnvironment:
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    env = SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(directory),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
    )
    env.filters["shq"] = lambda v: shlex.quote(str(v))
    env.filters["shwords"] = lambda words: " ".join(shlex.quote(str(w)) for w in words)
    env.filters["tojson"] = lambda v: json.dumps(v, indent=2, ensure_ascii=False)
    env.filters["yq"] = _yaml_scalar
    env.filters["comment"] = _comment
    env.filters["envfile"] = _env_file_value
    env.filters["k8s"] = jinja2.pass_context(_k8s)
    env.filters["gib_ceil"] = lambda gib: math.ceil(gib)
    return env


def _k8s(context: Any, value: Any) -> str:
    """A value for a Kubernetes manifest: Kubernetes expands $(VAR) in args and env, and $$ is a literal $;
    the planner's placeholder addresses become the downward-API variables. Registered with the template's
    context as first argument (jinja2.pass_context, in `_environment`)."""
    text = str(value).replace("$", "$$")
    text = text.replace(context["pod_ip"], "$(POD_IP)").replace(context["host_ip"], "$(HOST_IP)")
    return _yaml_scalar(text)


def _render(planner: _Planner, directory: str) -> list[RenderedFile]:
    r, plan = planner.r, planner.plan
    # One environment per directory, so each template is compiled once per process.
    template = _environment(directory).get_template(_TEMPLATES[r.format])
    common = {
        "title": planner.recipes.recipe(planner.backend).title,
        "version": str(planner.version),
        "model_cache_mount": planner.facts.model_cache.mount_path,
        "rdma": planner.facts.rdma,
    }
    if r.format == "kubernetes":
        for c in plan.components:
            c.pod_ip = c.pod_ip or any(planner.pod_ip in a for a in c.argv)
        facts = planner.facts
        text = template.render(
            components=plan.components,
            base=r.name,
            namespace=r.namespace,
            notes=plan.notes,
            pod_ip=planner.pod_ip,
            host_ip=planner.host_ip,
            model_cache_pvc=r.model_cache == "pvc",
            model_cache_gib=facts.model_cache.volume_gib,
            shared_tier=any(c.shared_mounts for c in plan.components),
            shared_tier_gib=planner.shared_tier_gib(),
            health_path=facts.vllm_startup.path,
            probe_period=facts.vllm_startup.period_seconds,
            rdma_resource=r.rdma_resource,
            rdma_capability=facts.rdma.capability,
            proxy_dir=_PROXY_DIR,
            **common,
        )
        return [RenderedFile(name=f"{r.name}.yaml", format=r.format, content=text)]
    chosen = plan.components
    if r.format == "kv_transfer_config":
        chosen = [c for c in plan.components if c.kv_transfer_config is not None]
        if not chosen:
            raise AdviceError("format", f"backend {planner.backend} uses no --kv-transfer-config; pick vllm_serve")
    elif r.format == "lmcache_yaml":
        chosen = [c for c in plan.components if c.lmcache_config is not None]
        if not chosen:
            raise AdviceError("format", "lmcache_yaml applies to the lmcache and lmcache_p2p backends")
    elif r.format == "env_file":
        chosen = [c for c in plan.components if c.env]
        if not chosen:
            raise AdviceError("format", f"backend {planner.backend} needs no environment variables here")
    suffix = {
        "vllm_serve": "sh",
        "docker_run": "sh",
        "kv_transfer_config": "json",
        "lmcache_yaml": "yaml",
        "env_file": "env",
    }
    return [
        RenderedFile(
            name=f"{c.name}.{suffix[r.format]}", format=r.format, content=template.render(component=c, **common)
        )
        for c in chosen
    ]


# ---------------------------------------------------------------------------------------------
# Validation of the rendered text


class RenderCheckError(AdviceError):
    """The rendered text failed a check; the message says which."""


def shell_words(text: str) -> list[str]:
    """Split a rendered script as sh would: comments dropped, backslash-newline joins lines."""
    out, quote, i = [], "", 0
    while i < len(text):
        ch = text[i]
        if quote == "'":
            quote = "" if ch == "'" else quote
        elif not quote and ch == "#" and (i == 0 or text[i - 1] in " \t\n"):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif ch == "\\" and i + 1 < len(text):
            if text[i + 1] == "\n":
                i += 2
                continue
            out.append(text[i : i + 2])
            i += 2
            continue
        elif ch in "'\"":
            quote = "" if quote == ch else (quote or ch)
        out.append(ch)
        i += 1
    return shlex.split("".join(out), comments=True, posix=True)


def _accepted_flags(planner: _Planner) -> tuple[frozenset[str] | set[str], str]:
    inventory = planner.k.cli_inventory
    if inventory.flags:
        return inventory.accepted(planner.version), "cli_inventory.yaml"
    names: set[str] = set()
    for s in planner.k.settings:
        if (
            s.kind == "cli_flag"
            and s.component == "vllm"
            and s.status_at(planner.version) in ("available", "deprecated")
        ):
            names |= {n for n in (s.name, *s.aliases) if n.startswith("-")}
    return names, "flags.yaml"


def _check_vllm_argv(planner: _Planner, argv: list[str], where: str) -> None:
    accepted, source = _accepted_flags(planner)
    for token in argv[3:]:
        flag = token.split("=", 1)[0]
        if token.startswith("-") and flag not in accepted:
            raise RenderCheckError("version", f"{where}: vLLM {planner.version} has no flag {flag} ({source})")
    # From the pitfall's first release vLLM decides HMA per connector; forcing it off only costs memory.
    harmful = planner.pitfall_applies("pitfall.hma-flag-with-hma-connector")
    if "--disable-hybrid-kv-cache-manager" in argv and harmful:
        raise RenderCheckError("version", f"{where}: --disable-hybrid-kv-cache-manager is harmful on {planner.version}")


def _check_units(planner: _Planner, argv: list[str], env: dict[str, str], where: str) -> None:
    plan = planner.plan
    if plan.offloading_gib is not None and "--kv-offloading-size" in argv:
        value = float(argv[argv.index("--kv-offloading-size") + 1])
        if not math.isclose(value, plan.offloading_gib, rel_tol=1e-6):
            raise RenderCheckError("sizes", f"{where}: --kv-offloading-size {value} GiB ≠ {plan.offloading_gib}")
    if "--kv-transfer-config" in argv:
        config = json.loads(argv[argv.index("--kv-transfer-config") + 1])
        _check_ktc(planner, config, where)
    if plan.lmcache_per_rank_gib is not None and "LMCACHE_MAX_LOCAL_CPU_SIZE" in env:
        value = float(env["LMCACHE_MAX_LOCAL_CPU_SIZE"])
        if not math.isclose(value, plan.lmcache_per_rank_gib, rel_tol=1e-5):
            raise RenderCheckError(
                "sizes", f"{where}: LMCACHE_MAX_LOCAL_CPU_SIZE {value} GiB ≠ per-rank {plan.lmcache_per_rank_gib}"
            )


def _check_ktc(planner: _Planner, config: dict[str, Any], where: str) -> None:
    keys = planner.recipes.facts.kv_transfer_config_keys
    if not set(config) <= set(keys.names) or keys.connector not in config:
        raise RenderCheckError(
            "backend", f"{where}: kv-transfer-config keys {sorted(config)} are not {list(keys.names)}"
        )
    extra = config.get(keys.extra_config, {})
    children = extra.get(_children_key(planner.k), []) if isinstance(extra, dict) else []
    for child in [config, *children]:
        inner = child.get(keys.extra_config, {})
        if "cpu_bytes_to_use" in inner:
            value = inner["cpu_bytes_to_use"]
            if not isinstance(value, int) or value != planner.plan.cpu_bytes:
                raise RenderCheckError("sizes", f"{where}: cpu_bytes_to_use must be an integer byte count")


# -- readers: each file read the way the program that takes it reads it --------------------------

_DOCKER_VALUE_OPTIONS = frozenset(
    {"--name", "--gpus", "--ipc", "--network", "--entrypoint", "--cap-add", "--device", "-p", "-e", "-v"}
)
_DOCKER_SWITCHES = frozenset({"--rm"})


def docker_run_words(words: list[str]) -> tuple[list[tuple[str, str | None]], list[str]]:
    """The words after `docker run` as Docker reads them (`docker_run_options`): the options with their
    values, and the positional words (the image, then what goes to the entrypoint as it is). An
    option this project never writes, or one left without its value, is an error."""
    options, image_at = docker_run_options(words, _DOCKER_SWITCHES)
    for name, value, at in options:
        known = name in _DOCKER_SWITCHES if value is None else name in _DOCKER_VALUE_OPTIONS
        if not known:
            raise RenderCheckError("format", f"docker run would read {words[at]!r} as an option this plan never writes")
    return [(name, value) for name, value, _ in options], words[image_at:]


def read_docker_env_file(text: str) -> list[tuple[str, str | None]]:
    """An env file as `docker run --env-file` reads it (docker/cli opts/file.go): line by line, leading
    whitespace trimmed, empty and '#' lines skipped, NAME=VALUE split at the first '=' with the value
    taken verbatim: no quote removal, no escapes, no expansion. A line without '=' would take its value
    from the host's environment; it comes back as (line, None)."""
    pairs: list[tuple[str, str | None]] = []
    for line in text.split("\n"):
        line = line.removesuffix("\r").lstrip()
        if line and not line.startswith("#"):
            name, eq, value = line.partition("=")
            pairs.append((name, value) if eq and not any(c.isspace() for c in name) else (line, None))
    return pairs


def _read_dotenv(text: str) -> list[tuple[str, str | None]] | None:
    """The env file as python-dotenv reads it (with its default interpolation); None if it is not installed."""
    try:
        from dotenv import dotenv_values
    except ImportError:
        return None
    return list(dotenv_values(stream=io.StringIO(text)).items())


def _read_sh_env(text: str) -> list[tuple[str, str | None]]:
    """The env file as `set -a; . ./FILE` assigns it: each word NAME=value."""
    return [(name, value if eq else None) for name, eq, value in (w.partition("=") for w in shell_words(text))]


def _lmcache_entries(value: str) -> list[str]:
    """local_disk / gds_path as LMCache 0.4.4+ splits them: at ',', each entry stripped, file:// dropped."""
    return [p.strip().removeprefix("file://") for p in value.split(",") if p.strip()]


def _lmcache_reads_verbatim(value: str) -> bool:
    """Whether LMCache takes an LMCACHE_* environment value as written: it strips surrounding whitespace
    and one pair of matching outer quotes first (config_base._parse_quoted_string)."""
    quoted = len(value) >= 2 and value[0] == value[-1] and value[0] in "'\""
    return value == value.strip() and not quoted


# -- checks -------------------------------------------------------------------------------------


def _check_option_slots(planner: _Planner, c: Component) -> None:
    """No caller text stands as a whole word where a program would take it for an option: the image
    (docker run's positional), the model (vllm serve's), a host after a proxy option."""
    r = planner.r
    given = {"model": r.model, "image": r.image, "lmcache_image": r.lmcache_image}
    given |= {f"hosts.{k}": v for k, v in r.hosts.model_dump().items()}
    field_of = {value: name for name, value in given.items() if value}
    for word in [c.image, *c.argv]:
        if word.startswith("-") and word in field_of:
            raise RenderCheckError(field_of[word], f"{c.name}: {word!r} would be read as an option, not as a value")


def _check_plain_text(f: RenderedFile) -> None:
    """sh drops a NUL from a word, and other control characters reach the reader changed or not at all."""
    for char in f.content:
        if char != "\n" and unicodedata.category(char) in _UNPRINTABLE:
            raise RenderCheckError("format", f"{f.name}: carries the control character U+{ord(char):04X}")


def _check_lmcache_reads(planner: _Planner, settings: dict[str, str], where: str, from_env: bool) -> None:
    """What LMCache makes of its settings: from the environment each value after its quote stripping,
    and local_disk / gds_path as its lists, which must give back exactly the paths the caller gave."""
    if from_env:
        settings = {k.removeprefix("LMCACHE_").lower(): v for k, v in settings.items() if k.startswith("LMCACHE_")}
        for name, value in settings.items():
            if not _lmcache_reads_verbatim(value):
                raise RenderCheckError("format", f"{where}: LMCache would strip quotes or spaces from {name}")
    for name, given in (("local_disk", planner.r.paths.disk), ("gds_path", planner.r.paths.gds)):
        if name in settings and _lmcache_entries(settings[name]) != given:
            raise RenderCheckError("format", f"{where}: LMCache would read {name} as other paths than were given")


def _check_command(planner: _Planner, c: Component, argv: list[str], env: list[tuple[str, str]], where: str) -> None:
    """A command read back from a file: the planned words and environment, then what vLLM and LMCache make of them."""
    if argv != c.argv or env != [(e.name, e.value) for e in c.env if e.written]:
        raise RenderCheckError("format", f"{where}: the rendered command does not read back as planned")
    _check_lmcache_reads(planner, dict(env), where, from_env=True)
    if c.kind == "vllm":
        _check_vllm_argv(planner, argv, where)
        _check_units(planner, argv, dict(env), where)


def _validate_serve(planner: _Planner, c: Component, f: RenderedFile) -> None:
    words = shell_words(f.content)
    env: list[tuple[str, str]] = []
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env.append((name, value))
    _check_command(planner, c, words, env, f.name)


def _planned_docker_options(planner: _Planner, c: Component) -> list[tuple[str, str | None]]:
    options: list[tuple[str, str | None]] = [("--rm", None), ("--name", c.name)]
    if c.gpus:
        options.append(("--gpus", c.docker_gpus))
    if c.gpus or c.shm:
        options.append(("--ipc", "host"))
    if c.rdma:
        options += [("--cap-add", planner.facts.rdma.capability), ("--device", planner.facts.rdma.docker_device)]
    if c.host_network or c.service == "headless":
        options.append(("--network", "host"))
    else:
        options += [("-p", f"{p.port}:{p.port}") for p in c.ports]
    options += [("-e", f"{e.name}={e.value}" if e.written else e.name) for e in c.env]
    options += [("-v", f"{m}:{m}") for m in c.mounts]
    if c.model_cache:
        options.append(("-v", f"{c.model_cache}:{planner.facts.model_cache.mount_path}"))
    return [*options, ("--entrypoint", c.argv[0])]


def _validate_docker(planner: _Planner, c: Component, f: RenderedFile) -> None:
    words = shell_words(f.content)
    if c.fetch_argv:  # the download of its script, stopping the script when it fails
        fetch = [*c.fetch_argv, "||", "exit", "1"]
        if words[: len(fetch)] != fetch:
            raise RenderCheckError("format", f"{f.name}: the download of its script does not read back as planned")
        words = words[len(fetch) :]
    options, positional = docker_run_words(words[2:])
    # Docker splits a -v value at every ':' and an -e value at its first '='.
    mounts = [tuple(v.split(":")) for k, v in options if k == "-v" and v is not None]
    planned_mounts = [(m, m) for m in c.mounts]
    if c.model_cache:
        planned_mounts.append((c.model_cache, planner.facts.model_cache.mount_path))
    if (
        words[:2] != ["docker", "run"]
        or options != _planned_docker_options(planner, c)
        or mounts != planned_mounts
        or positional[:1] != [c.image]
    ):
        raise RenderCheckError("format", f"{f.name}: the docker run options and image do not read back as planned")
    # `-e NAME` alone passes the caller's own variable (the token); only NAME=value is written here.
    env = [(k, v) for k, eq, v in (value.partition("=") for name, value in options if name == "-e" and value) if eq]
    _check_command(planner, c, [c.argv[0], *positional[1:]], env, f.name)


def _validate_env_file(planner: _Planner, c: Component, f: RenderedFile) -> list[str]:
    """Read as each program that loads env files reads them; returns the readers used."""
    planned: list[tuple[str, str | None]] = [(e.name, e.value) for e in c.env if e.written]
    readers = {"Docker's --env-file": read_docker_env_file(f.content), "sh": _read_sh_env(f.content)}
    dotenv = _read_dotenv(f.content)
    if dotenv is not None:
        readers["python-dotenv"] = dotenv
    for reader, pairs in readers.items():
        if pairs != planned:
            raise RenderCheckError("format", f"{f.name}: {reader} does not read the env file as planned")
    env = {e.name: e.value for e in c.env}
    _check_lmcache_reads(planner, env, f.name, from_env=True)
    _check_units(planner, [], env, f.name)
    return list(readers)


def _validate(planner: _Planner, files: list[RenderedFile]) -> list[str]:
    fmt, comps = planner.r.format, planner.plan.components
    by_name = {c.name: c for c in comps}
    for component in comps:
        _check_option_slots(planner, component)
    env_readers: list[str] = []
    for f in files:
        _check_plain_text(f)
        c = by_name.get(f.name.rsplit(".", 1)[0])
        if fmt == "kubernetes":
            _validate_kubernetes(planner, f.content)
            continue
        assert c is not None
        if fmt == "vllm_serve":
            _validate_serve(planner, c, f)
        elif fmt == "docker_run":
            _validate_docker(planner, c, f)
        elif fmt == "env_file":
            env_readers = _validate_env_file(planner, c, f)
        elif fmt == "kv_transfer_config":
            config = json.loads(f.content)
            if config != c.kv_transfer_config:
                raise RenderCheckError("format", f"{f.name}: the JSON does not read back as planned")
            _check_ktc(planner, config, f.name)
        else:
            assert c.lmcache_config is not None
            config = yaml.load(f.content, Loader=SAFE_LOADER)
            if config != c.lmcache_config:
                raise RenderCheckError("format", f"{f.name}: the LMCache YAML does not read back as planned")
            _check_lmcache_reads(planner, {k: v for k, v in config.items() if isinstance(v, str)}, f.name, False)
    return _checks_made(planner, env_readers)


def _checks_made(planner: _Planner, env_readers: list[str]) -> list[str]:
    fmt = planner.r.format
    readers = ", ".join(env_readers[:-1]) + " and " + env_readers[-1] if len(env_readers) > 1 else "".join(env_readers)
    checks = [
        {
            "vllm_serve": "re-split as sh splits it and compared with the plan word by word",
            "docker_run": "re-split as sh splits it, read as docker run reads its options, image and command, "
            "and compared with the plan word by word",
            "kv_transfer_config": "re-parsed as JSON and compared with the plan value by value",
            "lmcache_yaml": "re-parsed as YAML and compared with the plan value by value",
            "env_file": f"read the way {readers} read env files, each compared with the plan value by value",
            "kubernetes": "re-parsed as YAML and compared with the plan value by value",
        }[fmt],
        "no caller value stands where a program would read it as an option; no file carries a control character",
    ]
    if any(c.lmcache_config for c in planner.plan.components):
        checks.append("LMCache reads every LMCACHE_* value as written and its disk/GDS lists as the paths given")
    if fmt in ("vllm_serve", "docker_run", "kubernetes"):
        checks.append(
            f"every vLLM flag exists in {planner.version} ({_accepted_flags(planner)[1]}) and none is harmful there"
        )
        checks.append(
            "units: --kv-offloading-size GiB total, cpu_bytes_to_use integer bytes, "
            "LMCACHE_MAX_LOCAL_CPU_SIZE GiB per rank"
        )
    if fmt == "kubernetes":
        checks.append("Kubernetes objects have apiVersion, kind, metadata.name and containers with name and image")
    return checks


def _unk8s(planner: _Planner, value: str) -> str:
    text = value.replace("$(POD_IP)", planner.pod_ip).replace("$(HOST_IP)", planner.host_ip)
    return text.replace("$$", "$")


def _validate_kubernetes(planner: _Planner, text: str) -> None:
    docs = [d for d in yaml.load_all(text, Loader=SAFE_LOADER) if d is not None]
    by_name = {f"{planner.r.name}-{c.name}": c for c in planner.plan.components}
    seen = set()
    for doc in docs:
        if (
            not isinstance(doc, dict)
            or not {"apiVersion", "kind", "metadata"} <= set(doc)
            or "name" not in doc["metadata"]
        ):
            raise RenderCheckError("format", "a Kubernetes object lacks apiVersion, kind or metadata.name")
        if doc["kind"] in ("Deployment", "DaemonSet"):
            c = by_name[doc["metadata"]["name"]]
            pod = doc["spec"]["template"]["spec"]
            containers = pod["containers"]
            if not containers or not all({"name", "image"} <= set(x) for x in containers):
                raise RenderCheckError("format", "a container lacks name or image")
            if containers[0]["image"] != c.image:
                raise RenderCheckError("format", f"{c.name}: the container image does not read back as planned")
            argv = [_unk8s(planner, a) for a in [*containers[0]["command"], *containers[0]["args"]]]
            env = [(e["name"], _unk8s(planner, e["value"])) for e in containers[0].get("env", []) if "value" in e]
            _check_command(planner, c, argv, env, c.name)
            fetches = [[_unk8s(planner, a) for a in x["command"]] for x in pod.get("initContainers", [])]
            if fetches != ([c.fetch_argv] if c.fetch_argv else []):
                raise RenderCheckError("format", f"{c.name}: the init container does not read back as planned")
            seen.add(c.name)
        elif doc["kind"] == "Service":
            c = by_name[doc["metadata"]["name"]]
            headless = doc["spec"].get("clusterIP") == "None" and doc["spec"].get("publishNotReadyAddresses") is True
            if (c.service == "headless") != headless:
                raise RenderCheckError(
                    "format", f"{c.name}: Service headlessness does not match what the backend needs"
                )
    if seen != {c.name for c in planner.plan.components}:
        raise RenderCheckError("format", "not every component became a workload")


# ---------------------------------------------------------------------------------------------


def _with_size_offload(request: RenderConfigRequest) -> RenderConfigRequest:
    """The request with the sizes of a size_offload result filled in (and the parallelism they were
    sized for), refusing numbers that disagree with each other. The request given stays as it is."""
    data = request.size_offload
    if not data:
        return request
    parallelism = request.parallelism
    if isinstance(data.get("offload"), dict):
        # A whole size_offload result, as the tool returns it: the tier values sit under `offload`,
        # and the parallelism they were sized for at the top.
        parallelism = _adopted_parallelism(request, data)
        data = data["offload"]
    filled: dict[str, int | float] = {}
    for key in ("kv_offloading_size_gib", "cpu_bytes_to_use", "lmcache_max_local_cpu_size_gib"):
        value = data.get(key)
        if value is None:
            continue
        if readable_number(value) is None or value <= 0:
            raise AdviceError(f"size_offload.{key}", f"must be a positive number below 2^63; got {value!r}")
        if getattr(request.sizes, key) is None:
            filled[key] = int(value) if key == "cpu_bytes_to_use" else float(value)
    sizes = request.sizes.model_copy(update=filled)
    ranks = parallelism.tensor_parallel_size * parallelism.pipeline_parallel_size
    gib, raw, lm = sizes.kv_offloading_size_gib, sizes.cpu_bytes_to_use, sizes.lmcache_max_local_cpu_size_gib
    if gib is not None and raw is not None and abs(raw - gib * GIB) > GIB / 1024:
        raise AdviceError("size_offload.cpu_bytes_to_use", f"{raw} bytes is not {gib} GiB × 2^30 = {round(gib * GIB)}")
    if gib is not None and lm is not None and not math.isclose(lm * ranks, gib, rel_tol=1e-3):
        raise AdviceError(
            "size_offload.lmcache_max_local_cpu_size_gib",
            f"{lm} GiB per worker × {ranks} ranks ≠ {gib} GiB total; LMCache sizes per worker (total ÷ TP × PP)",
        )
    return request.model_copy(update={"sizes": sizes, "parallelism": parallelism})


def _adopted_parallelism(request: RenderConfigRequest, result: dict[str, Any]) -> Parallelism:
    """TP and PP from the size_offload result unless given; a mismatch is refused, since the
    per-worker sizes (LMCache, native's split of the total) depend on them."""
    sized = {k: result[k] for k in ("tensor_parallel_size", "pipeline_parallel_size") if result.get(k) is not None}
    if "parallelism" in request.model_fields_set:
        for key, value in sized.items():
            given = getattr(request.parallelism, key)
            if given != value:
                raise AdviceError(
                    f"parallelism.{key}",
                    f"is {given}, but the size_offload result was sized for {value!r}; give the same or leave it out",
                )
        return request.parallelism
    try:
        return Parallelism.model_validate({**request.parallelism.model_dump(), **sized}, strict=True)
    except ValidationError as exc:
        problem = exc.errors(include_url=False, include_input=False)[0]
        raise AdviceError(f"size_offload.{problem['loc'][0]}", problem["msg"].lower()) from None


def _with_choice(request: RenderConfigRequest, knowledge: Knowledge) -> tuple[Backend | None, RenderConfigRequest]:
    """The backend, and the request with what a choose_backend result fills in where the caller gave
    nothing: its release, and for native_tiering its tiers. The request given stays as it is."""
    recipes, backend, choice = knowledge.recipes, request.backend, request.choice
    if choice is None:
        return backend, request
    rec = choice.get("recommendation")
    chosen = rec.get("backend") if isinstance(rec, dict) else None
    backends = [r.backend for r in recipes.recipes]
    if not isinstance(chosen, str) or chosen not in backends:
        raise AdviceError(
            "choice",
            f"expected a choose_backend result with recommendation.backend one of {', '.join(backends)}",
        )
    if backend is not None and backend != chosen:
        raise AdviceError("backend", f"{backend} disagrees with the choice's {chosen}; give one of them")
    update: dict[str, Any] = {}
    context = choice.get("version_context")
    if request.version is None and isinstance(context, dict) and isinstance(context.get("version"), str):
        update["version"] = context["version"]
    version = update.get("version", request.version)
    tiers = rec.get("tiers", []) if isinstance(rec, dict) else []
    if not isinstance(tiers, list) or not all(isinstance(t, str) for t in tiers):
        raise AdviceError("choice", "recommendation.tiers: expected a list of tier names, as choose_backend gives")
    if request.tiers is None and chosen == "native_tiering":
        # resolve_version: a version such as 'latest' is a one-line error naming the field, not InvalidVersion
        tier_version = resolve_version(knowledge, version)[0] if version else Version("0")
        names = {recipes.tier_type(t.kind, tier_version): t.kind for t in recipes.tier_types}
        update["tiers"] = [names[t] for t in tiers if t in names and t != "cpu"]
    return chosen, request.model_copy(update=update)


def render_config(request: RenderConfigRequest, knowledge: Knowledge) -> RenderConfigResult:
    recipes = knowledge.recipes
    backend, request = _with_choice(request, knowledge)
    if backend is None:
        raise AdviceError("backend", f"give a backend ({', '.join(r.backend for r in recipes.recipes)}) or a choice")
    request = _with_size_offload(request)
    if request.name is None:
        request = request.model_copy(update={"name": default_name(request.model, backend)})
    _check_paths_fit_format(request)
    planner = _Planner(request, knowledge, recipes, backend)
    planner.build()
    directory = str(Path(knowledge.directory) / "templates")
    files = _render(planner, directory)
    checks = _validate(planner, files)
    recipe = recipes.recipe(backend)
    citations = [*planner.plan.cited.values()]
    citations.append(
        Citation(id=recipe.id, sources=list(recipe.sources), verified_at=recipe.verified_at, evidence=recipe.evidence)
    )
    facts = backend_facts(knowledge, backend, request.tiers)
    security = security_check(knowledge, "vllm", planner.version, facts)
    lm_security = None
    if planner.lm_version is not None:
        lm_security = security_check(knowledge, "lmcache", planner.lm_version, facts)
    for check, ctx in ((security, planner.context), (lm_security, planner.lm_context)):
        warning = check.floor_warning() if check is not None else None
        if warning is not None and ctx is not None:
            ctx.warnings.append(warning)
    return RenderConfigResult(
        version_context=planner.context,
        lmcache_context=planner.lm_context,
        security=security.for_detail("summary"),
        lmcache_security=lm_security.for_detail("summary") if lm_security is not None else None,
        backend=backend,
        format=request.format,
        files=files,
        values=planner.plan.values,
        checks=checks,
        notes=planner.plan.notes,
        citations=citations,
        memory=planner.plan.memory,
    )


SPEC = ToolSpec(
    name="render_config",
    title="Render a validated vLLM KV caching config",
    description=(
        "A ready configuration for a backend or a choose_backend result (vllm serve, docker run, Kubernetes,"
        " --kv-transfer-config, LMCache YAML, env file), checked against the release's flags and units."
    ),
    request=RenderConfigRequest,
    result=RenderConfigResult,
    run=render_config,
)
