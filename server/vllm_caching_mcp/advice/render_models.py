"""What render_config takes and answers, and what a plan is made of: components with their env, ports and
memory, the plan, and the small helpers the planner and the renderer share."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field
from pydantic_core import PydanticCustomError

from ..knowledge import (
    Backend,
    Connector,
    Fabric,
    Knowledge,
    TierKind,
)
from ..registry import InvalidImageReference, parse_image_reference
from .common import (
    AdviceError,
    Citation,
    Count,
    Result,
    SecurityCheck,
    SizeBytes,
    SizeGiB,
    VersionContext,
)

if TYPE_CHECKING:  # jinja2 is imported on the first render, not at server start-up
    pass


Format = Literal["vllm_serve", "docker_run", "kubernetes", "kv_transfer_config", "lmcache_yaml", "env_file"]


Origin = Literal["user", "default", "computed", "knowledge"]


GIB = 2**30


_DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,40}[a-z0-9])?")


_RESOURCE_NAME = re.compile(r"[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")


_HOST_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"


_HOST = re.compile(rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*")


# What sh, `docker run --env-file` and python-dotenv all read verbatim when written bare (shlex's
# own test for "needs no quoting"); an env file value outside it would reach each reader differently.
BARE_VALUE = re.compile(r"[\w@%+=:,./-]*", re.ASCII)


TEMPLATES = {
    "vllm_serve": "vllm_serve.sh.j2",
    "docker_run": "docker_run.sh.j2",
    "kubernetes": "kubernetes.yaml.j2",
    "kv_transfer_config": "kv_transfer_config.json.j2",
    "lmcache_yaml": "lmcache.yaml.j2",
    "env_file": "env_file.env.j2",
}


# What each caller-supplied text field accepts. A value reaches shell words, env files, YAML, JSON
# and LMCache's comma-separated lists; these rules keep it to what every one of them carries intact.

# Control characters (NUL, which sh drops; newline, which starts a new env-file line; tab), invisible
# format characters, lone surrogates and Unicode line separators.
UNPRINTABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _printable(text: str) -> str:
    for char in text:
        if unicodedata.category(char) in UNPRINTABLE:
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


class Ports:
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


PROXY_DIR = "/opt/proxy"


# The GPUs of one host when the request does not say (gpus_per_host): the usual 8-GPU server.
DEFAULT_GPUS_PER_HOST = 8


# The fs tier's PVC size when sizes.disk_gib is not given: a placeholder the caller should set, noted as such.
SHARED_TIER_DEFAULT_GIB = 1024


def in_dir(bin_dir: str, command: tuple[str, ...]) -> list[str]:
    """A console-script command run from ``bin_dir`` ('' leaves it to PATH); python3 -m stays as it is."""
    if not bin_dir or command[0] == "python3":
        return list(command)
    return [bin_dir + command[0], *command[1:]]


def port_list(ports: list[int]) -> str:
    """LMCache's list syntax for its port settings: the numbers joined by ','."""
    return ",".join(map(str, ports))


def children_key(knowledge: Knowledge) -> str:
    """The kv_connector_extra_config key under which MultiConnector lists the connectors it wraps."""
    multi = knowledge.by_id["connector.multi"]
    assert isinstance(multi, Connector) and multi.children_key is not None
    return multi.children_key


def lmcache_list(kind: Literal["disk", "gds"], entries: list[str]) -> str:
    """LMCache's list syntax for local_disk and gds_path: entries joined by ','; an entry holding one
    would come back as two (a second disk LMCache then writes to)."""
    for i, entry in enumerate(entries):
        if "," in entry:
            raise AdviceError(
                f"paths.{kind}.{i}", "LMCache reads this setting as a ','-separated list, so a path cannot contain ','"
            )
    return ",".join(entries)


def number_text(value: float) -> str:
    """A float without a needless '.0' and without exponent notation."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return number_text(value)
    return str(value)


def typed_value(text: str) -> Any:
    return {"True": True, "False": False}.get(text, text)
