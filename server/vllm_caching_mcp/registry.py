"""A small OCI distribution client: an image's manifest and config blob, never its layers.

What `inspect_image` needs from a container registry, and nothing more:

- ``GET /v2/<repo>/manifests/<tag or digest>`` with an ``Accept`` header listing the Docker
  manifest list v2, OCI index, Docker manifest v2 and OCI manifest media types; a list or index
  leads to the manifest of the wanted platform (default ``linux/amd64``);
- ``GET /v2/<repo>/blobs/<config digest>``: the image config (env, entrypoint, labels, history).

Authentication follows the distribution spec: a request without credentials, and on ``401`` the
``WWW-Authenticate`` challenge decides. ``Bearer realm=...,service=...,scope=...`` (Docker Hub's
token service at auth.docker.io, Harbor, GHCR, Artifactory, ...) is answered by fetching a token
from the realm, anonymously or with Basic credentials; ``Basic`` is answered with the credentials.

Credentials go only where they belong, since an agent can be steered into naming any image:

- ``VLLM_CACHING_MCP_REGISTRY_USER``/``_PASSWORD`` (or a ready bearer token in ``_TOKEN``) belong
  to the configured mirror's origin (scheme, host and port); with no mirror, to Docker Hub
  (https://registry-1.docker.io), the registry asked then. An image naming any other registry is
  fetched without them, and the answer says so.
- A docker config entry (``$DOCKER_CONFIG/config.json`` or ``~/.docker/config.json``, ``auths``)
  belongs to the registry it is keyed by; credential helpers are not run, and the answer says so.
- A token realm gets Basic credentials only on the registry's own origin, at Docker Hub's
  https://auth.docker.io for Docker Hub itself, or on an origin listed in
  ``VLLM_CACHING_MCP_REGISTRY_REALM_HOSTS`` (``https://host[:port]`` or ``host[:port]``, https implied).

Issued tokens stay in memory, each for the registry origin that asked for it. Every secret (the
password, ``user:password`` and its base64, tokens from the environment or a token service) is
registered with `redact`, so no text this process returns or logs carries one.

Every manifest and blob is checked against its sha256 digest. Content addressed by digest never
changes, so it is cached on disk for good; a tag's manifest is cached for the TTL and, when the
registry cannot be reached, answers from the cache with its age. Timeouts, retries, rate limits
and "the network is down" handling are the shared ones of `http_client.RetryingClient`.

``VLLM_CACHING_MCP_REGISTRY_MIRROR`` (``https://harbor.example.com/dockerhub-proxy``) sends Docker
Hub references to a mirror, with an optional project prefix; references naming their own
registry host go there. TLS is verified; ``VLLM_CACHING_MCP_REGISTRY_CA_BUNDLE`` adds a private CA,
``VLLM_CACHING_MCP_REGISTRY_INSECURE=1`` turns verification off (and the answer says so).

``VLLM_CACHING_MCP_REGISTRIES`` lists the registries a caller may name (``host``, ``host:port``,
``*.domain``; ``*`` for any). Unset, any registry may be named from the command line or a stdio
server, which act for the user on the user's machine; a shared HTTP server (`restrict_registries`)
asks only the public registries of SHARED_SERVER_REGISTRIES, never a loopback or private address
unless its operator lists one, so a caller cannot use it to reach the services beside it.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from . import __version__, redact
from .http_client import (
    LOOPBACK_HOSTS,
    SHAPE_ERRORS,
    CacheEntry,
    Deadline,
    DiskCache,
    FailureReason,
    HttpError,
    NetworkPath,
    RawResponse,
    RetryingClient,
    Secret,
    Trust,
    default_cache_dir,
    is_loopback,
    load_json,
    make_http_client,
)
from .http_client import ConfigError as ConfigError
from .lazy_import import lazy_import

if TYPE_CHECKING:
    import httpx
else:  # loaded on the first network call, not at server start-up
    httpx = lazy_import("httpx")

MIRROR_ENV = "VLLM_CACHING_MCP_REGISTRY_MIRROR"
USER_ENV = "VLLM_CACHING_MCP_REGISTRY_USER"
PASSWORD_ENV = "VLLM_CACHING_MCP_REGISTRY_PASSWORD"
TOKEN_ENV = "VLLM_CACHING_MCP_REGISTRY_TOKEN"
CA_BUNDLE_ENV = "VLLM_CACHING_MCP_REGISTRY_CA_BUNDLE"
INSECURE_ENV = "VLLM_CACHING_MCP_REGISTRY_INSECURE"
REALM_HOSTS_ENV = "VLLM_CACHING_MCP_REGISTRY_REALM_HOSTS"
CACHE_TTL_ENV = "VLLM_CACHING_MCP_CACHE_TTL"
DEFAULT_TTL_SECONDS = 3600.0

DOCKER_HUB = "docker.io"
REGISTRIES_ENV = "VLLM_CACHING_MCP_REGISTRIES"
# What a shared server's callers may name when its operator lists nothing: the public registries that
# carry vLLM, CUDA and Kubernetes images.
SHARED_SERVER_REGISTRIES = (
    DOCKER_HUB, "ghcr.io", "quay.io", "nvcr.io", "public.ecr.aws", "registry.k8s.io", "mcr.microsoft.com",
    "gcr.io", "*.gcr.io", "*.pkg.dev",
)  # fmt: skip
DOCKER_HUB_API = "https://registry-1.docker.io"
# Docker Hub's token service; Docker Hub's own challenge names it, this only lets its credentials go there.
DOCKER_HUB_REALM = "https://auth.docker.io"
_DOCKER_HUB_ALIASES = {"docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"}
DEFAULT_REPOSITORY = "vllm/vllm-openai"

MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX_TYPES = frozenset({MANIFEST_LIST, OCI_INDEX})
MANIFEST_TYPES = frozenset({DOCKER_MANIFEST, OCI_MANIFEST})
_ACCEPT = ", ".join([MANIFEST_LIST, OCI_INDEX, DOCKER_MANIFEST, OCI_MANIFEST])

# The reference grammar of github.com/distribution/reference, reduced to what a pull accepts.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REPOSITORY = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_DOMAIN = re.compile(
    r"^(?:localhost|[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
    r"|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?$"
)
_TAG = re.compile(r"^[\w][\w.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_CHALLENGE_PARAM = re.compile(r'(\w+)=(?:"([^"]*)"|([^,\s]*))')


class RegistryError(HttpError):
    """A registry request that could not be answered; the text carries no credential."""


class PlatformMissing(Exception):
    """The image index has no manifest for the wanted platform; ``available`` lists what it has."""

    def __init__(self, wanted: str, available: list[str]) -> None:
        super().__init__(f"no {wanted} manifest; the image is published for {', '.join(available) or 'no platform'}")
        self.wanted = wanted
        self.available = available


class RegistryNotAllowed(Exception):
    """A registry this process does not ask; the message is one line for the caller."""


class _Shared:
    server = False  # set by restrict_registries: this process answers callers other than its user


_shared = _Shared()


def restrict_registries() -> None:
    """From now on, with no VLLM_CACHING_MCP_REGISTRIES set, ask only SHARED_SERVER_REGISTRIES."""
    _shared.server = True


def allowed_registries(env: Mapping[str, str]) -> tuple[str, ...] | None:
    """The registries a caller may name (None: any), from the environment and the process's role."""
    text = env.get(REGISTRIES_ENV, "").strip()
    if not text:
        return SHARED_SERVER_REGISTRIES if _shared.server else None
    entries = tuple(e.strip().lower() for e in text.split(",") if e.strip())
    if "*" in entries:
        return None
    for entry in entries:
        if not _DOMAIN.match(entry.removeprefix("*.")):
            raise ConfigError(
                f"{REGISTRIES_ENV}: {entry!r} is not a registry; accepted: comma-separated host, host:port, "
                "*.domain, or * for any"
            )
    return entries


def registry_allowed(registry: str, allowed: tuple[str, ...] | None) -> bool:
    """Whether ``registry`` (host[:port], as an image reference names it) is one of ``allowed``."""
    if allowed is None:
        return True
    name = registry.lower()
    host = name.rsplit(":", 1)[0] if not name.endswith("]") and ":" in name else name
    return any(
        name == entry or (entry.startswith("*.") and host.endswith(entry[1:]) and ":" not in entry) for entry in allowed
    )


class InvalidImageReference(ValueError):
    """Text that is not an image reference."""


# ---------------------------------------------------------------------------------------------
# Image references


@dataclasses.dataclass(frozen=True)
class ImageRef:
    """A validated reference; every part is safe in a URL path and in a shell word."""

    registry: str  # "docker.io" or host[:port]
    repository: str  # "vllm/vllm-openai", "library/ubuntu"
    tag: str | None
    digest: str | None

    @property
    def reference(self) -> str:
        """What to ask the manifests endpoint for: the digest when given, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        name = self.repository if self.registry == DOCKER_HUB else f"{self.registry}/{self.repository}"
        if self.registry == DOCKER_HUB and name.startswith("library/"):
            name = name[len("library/") :]
        text = name + (f":{self.tag}" if self.tag else "")
        return text + (f"@{self.digest}" if self.digest else "")


def parse_image_reference(text: str, *, default_repository: str = DEFAULT_REPOSITORY) -> ImageRef:
    """``v0.22.1`` (a tag of ``default_repository``), ``repo[:tag][@sha256:...]`` or ``host[:port]/repo...``.

    A bare word with no ``/``, ``:`` or ``@`` is a tag of the default repository; an
    untagged, undigested name means ``:latest``, as with ``docker pull``.
    """
    cleaned = text.strip()
    if not cleaned or len(cleaned) > 512 or any(c.isspace() for c in cleaned):
        raise InvalidImageReference(f"{text!r} is not an image reference (no spaces, at most 512 characters)")
    if not any(c in cleaned for c in "/:@"):
        if not _TAG.match(cleaned):
            raise InvalidImageReference(
                f"{text!r} is not a tag (letters, digits, '_', '.', '-', at most 128, not starting with '.' or '-')"
            )
        return ImageRef(DOCKER_HUB, default_repository, cleaned, None)
    name, _, digest = cleaned.partition("@")
    if digest and not _DIGEST.match(digest):
        raise InvalidImageReference(f"{digest!r} is not a digest (sha256: followed by 64 lowercase hex digits)")
    tag: str | None = None
    last_slash = name.rfind("/")
    if ":" in name[last_slash + 1 :]:
        name, _, tag = name.rpartition(":")
        if not _TAG.match(tag):
            raise InvalidImageReference(f"{tag!r} is not a tag (letters, digits, '_', '.', '-', at most 128)")
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        registry, repository = first.lower(), rest
        if not _DOMAIN.match(registry):
            raise InvalidImageReference(f"{first!r} is not a registry host[:port]")
    else:
        registry, repository = DOCKER_HUB, name
    if registry in _DOCKER_HUB_ALIASES:
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    if not _REPOSITORY.match(repository) or len(repository) > 255:
        raise InvalidImageReference(
            f"{repository!r} is not a repository name (lowercase letters, digits and '.', '_', '-' between them, "
            "components separated by '/')"
        )
    if tag is None and not digest:
        tag = "latest"
    return ImageRef(registry, repository, tag, digest or None)


# ---------------------------------------------------------------------------------------------
# Settings and credentials


@dataclasses.dataclass(frozen=True)
class Credentials:
    """Basic credentials (``username`` + ``password``) or a ready bearer ``token``; never printed."""

    source: str  # "environment" or "docker config (<host>)": safe to show
    username: str | None = None
    password: Secret | None = dataclasses.field(default=None, repr=False)
    token: Secret | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        # The password and token registered themselves as Secrets; what is derived from them is secret too.
        if self.password is not None:
            redact.register(f"{self.username or ''}:{self.password.reveal()}")
            redact.register(self.basic_value())

    def basic_value(self) -> str:
        pair = f"{self.username or ''}:{self.password.reveal() if self.password else ''}"
        return base64.b64encode(pair.encode()).decode()


def _host_key(text: str) -> str:
    """The host[:port] a docker config ``auths`` key names (keys may carry a scheme and a path)."""
    host = re.sub(r"^[a-z]+://", "", text.strip().lower()).split("/", 1)[0]
    return DOCKER_HUB if host in _DOCKER_HUB_ALIASES else host


def docker_config_path(env: Mapping[str, str]) -> Path:
    directory = env.get("DOCKER_CONFIG") or str(Path(env.get("HOME") or Path.home()) / ".docker")
    return Path(directory).expanduser() / "config.json"


def credentials_from_docker_config(path: Path, registry: str) -> tuple[Credentials | None, str | None]:
    """The ``auths`` entry for ``registry`` (base64 ``auth`` or ``username``/``password``), and a note
    when the file defers to a credential helper, which this client does not run."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError):
        return None, f"the docker config file {path.name} could not be read; no credentials taken from it"
    if not isinstance(raw, dict):
        return None, None
    wanted = _host_key(registry)
    auths: dict[str, Any] = raw["auths"] if isinstance(raw.get("auths"), dict) else {}
    for key, entry in auths.items():
        if _host_key(str(key)) != wanted or not isinstance(entry, dict):
            continue
        user, password = entry.get("username"), entry.get("password")
        if isinstance(entry.get("auth"), str) and entry["auth"]:
            redact.register(entry["auth"])  # the file's own spelling of the base64, which may differ from ours
            try:
                user, _, password = base64.b64decode(entry["auth"], validate=True).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                return (
                    None,
                    f"the docker config entry for {wanted} has an 'auth' value that is not base64 user:password",
                )
        if isinstance(user, str) and isinstance(password, str) and (user or password):
            return Credentials(f"docker config ({wanted})", username=user, password=Secret(password)), None
        if entry.get("identitytoken"):
            return None, (
                f"the docker config entry for {wanted} holds an identity token, which this client does not exchange; "
                f"set {USER_ENV}/{PASSWORD_ENV} instead"
            )
    helpers: dict[str, Any] = raw["credHelpers"] if isinstance(raw.get("credHelpers"), dict) else {}
    helper = next((str(v) for k, v in helpers.items() if _host_key(str(k)) == wanted), None) or raw.get("credsStore")
    if isinstance(helper, str) and helper:
        return None, (
            f"the docker config uses the credential helper {helper!r} for {wanted}, which this client does not run; "
            f"set {USER_ENV}/{PASSWORD_ENV} (or {TOKEN_ENV}) to authenticate"
        )
    return None, None


def validate_mirror(text: str) -> str:
    """An https:// base with an optional path prefix (plain http only on loopback); no credentials or query."""
    try:
        url = httpx.URL(text.strip().rstrip("/"))
    except httpx.InvalidURL:
        raise ConfigError(f"{MIRROR_ENV}: {text!r} is not a URL") from None
    if url.scheme not in ("https", "http") or (url.scheme == "http" and not is_loopback(url.host)) or not url.host:
        raise ConfigError(
            f"{MIRROR_ENV}: {text!r} must be an https:// address (plain http is allowed only for 127.0.0.1)"
        )
    if url.userinfo or url.query or url.fragment:
        raise ConfigError(f"{MIRROR_ENV}: {text!r} must not carry credentials, a query or a fragment")
    prefix = url.path.strip("/")
    if prefix and not _REPOSITORY.match(prefix):
        raise ConfigError(f"{MIRROR_ENV}: the path {url.path!r} is not a repository prefix such as '/dockerhub-proxy'")
    return str(url).rstrip("/")


def origin_of(url: str | httpx.URL) -> str:
    """``scheme://host:port`` with the default port written out, so two spellings of one origin compare equal."""
    parsed = httpx.URL(url)
    host = parsed.host
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return f"{parsed.scheme}://{f'[{host}]' if ':' in host else host}:{port}"


_REALM_HOSTS_ACCEPTED = (
    "accepted: comma-separated https://host[:port] or host[:port] (https implied; http:// only for 127.0.0.1, "
    "localhost or [::1]), without a path"
)


def realm_origin(entry: str) -> str:
    """One ``VLLM_CACHING_MCP_REGISTRY_REALM_HOSTS`` entry as an origin; anything but an origin is refused."""
    if "@" in entry:  # the message must not repeat a credential
        raise ConfigError(
            f"{REALM_HOSTS_ENV}: an entry carries credentials, which it must not; {_REALM_HOSTS_ACCEPTED}"
        )
    refused = ConfigError(f"{REALM_HOSTS_ENV}: {entry!r} is not an origin; {_REALM_HOSTS_ACCEPTED}")
    text = entry.strip().lower()
    scheme, separator, rest = text.partition("://")
    if not separator:
        scheme, rest = "https", text
    rest = rest.removesuffix("/")
    if scheme not in ("https", "http") or not _DOMAIN.match(rest):
        raise refused
    try:
        url = httpx.URL(f"{scheme}://{rest}")
    except httpx.InvalidURL:
        raise refused from None
    if (url.port is not None and not 0 < url.port < 65536) or (scheme == "http" and not is_loopback(url.host)):
        raise refused
    return origin_of(url)


@dataclasses.dataclass(frozen=True)
class RegistrySettings:
    """Where to ask, how long to wait, what to trust; build it with `from_env`."""

    mirror: str | None = None
    cache_dir: Path | None = None
    cache_ttl: float = DEFAULT_TTL_SECONDS
    credentials: Credentials | None = dataclasses.field(default=None, repr=False)
    docker_config: Path | None = None
    ca_bundle: Path | None = None
    verify_tls: bool = True
    realm_hosts: tuple[str, ...] = ()
    timeout: float = 10.0
    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    max_body_bytes: int = 4 * 1024 * 1024
    offline: bool = False
    network: NetworkPath = dataclasses.field(default_factory=NetworkPath)
    allowed: tuple[str, ...] | None = None  # registries a caller may name; None: any

    def __post_init__(self) -> None:
        if self.mirror is not None:
            object.__setattr__(self, "mirror", validate_mirror(self.mirror))
        if self.cache_ttl < 0:
            raise ConfigError(f"{CACHE_TTL_ENV}: the cache TTL must be zero or more seconds")
        object.__setattr__(self, "realm_hosts", tuple(dict.fromkeys(realm_origin(e) for e in self.realm_hosts)))

    @property
    def home(self) -> str:
        """The origin the environment's credentials belong to: the mirror's, else Docker Hub's."""
        return origin_of(self.mirror or DOCKER_HUB_API)

    def credentials_belong_to(self, registry_base: str) -> bool:
        """Whether the environment's credentials may be sent to the registry at ``registry_base``."""
        return origin_of(registry_base) == self.home

    def realm_is_trusted(self, realm: str, registry_base: str) -> bool:
        """Whether the token service at ``realm`` may get the credentials of the registry at ``registry_base``."""
        asked, registry = origin_of(realm), origin_of(registry_base)
        if asked == registry or asked in self.realm_hosts:
            return True
        return registry == origin_of(DOCKER_HUB_API) and asked == origin_of(DOCKER_HUB_REALM)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> RegistrySettings:
        """Settings from the environment; keyword arguments take precedence."""
        env = os.environ if env is None else env
        ttl_text = env.get(CACHE_TTL_ENV)
        try:
            ttl = float(ttl_text) if ttl_text else DEFAULT_TTL_SECONDS
        except ValueError:
            raise ConfigError(f"{CACHE_TTL_ENV}: {ttl_text!r} is not a number of seconds") from None
        user, password, token = env.get(USER_ENV, ""), env.get(PASSWORD_ENV, ""), env.get(TOKEN_ENV, "").strip()
        credentials: Credentials | None = None
        if token:
            credentials = Credentials("environment", token=Secret(token))
        elif user or password:
            if not (user and password):
                raise ConfigError(f"{USER_ENV} and {PASSWORD_ENV} must be set together")
            credentials = Credentials("environment", username=user, password=Secret(password))
        ca = env.get(CA_BUNDLE_ENV)
        if ca and not Path(ca).expanduser().is_file():
            raise ConfigError(f"{CA_BUNDLE_ENV}: no such file")
        values: dict[str, Any] = {
            "mirror": env.get(MIRROR_ENV) or None,
            "cache_dir": default_cache_dir(env) / "registry",
            "cache_ttl": ttl,
            "credentials": credentials,
            "docker_config": docker_config_path(env),
            "ca_bundle": Path(ca).expanduser() if ca else None,
            "verify_tls": env.get(INSECURE_ENV, "").strip().lower() not in ("1", "true", "yes"),
            "realm_hosts": tuple(h.strip() for h in env.get(REALM_HOSTS_ENV, "").split(",") if h.strip()),
            "network": NetworkPath.from_env(env),
            "allowed": allowed_registries(env),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


# ---------------------------------------------------------------------------------------------
# What the client returns


@dataclasses.dataclass(frozen=True)
class Manifest:
    media_type: str
    digest: str
    body: dict[str, Any]
    size: int


@dataclasses.dataclass(frozen=True)
class ImageMetadata:
    """An image's registry metadata for one platform; ``origin`` says whether it came live or from the cache."""

    ref: ImageRef
    endpoint: str  # base URL and repository path asked, without credentials
    top_digest: str  # the digest of what the tag points at (an index, or the manifest itself)
    top_media_type: str
    manifest_digest: str
    manifest_media_type: str
    platform: str
    platforms: tuple[str, ...]  # every platform in the index (or the one of a single manifest)
    config_digest: str
    config: dict[str, Any]
    layer_sizes: tuple[int, ...]
    origin: Literal["live", "cache"]
    age_seconds: float
    fallback: RegistryError | None
    credentials_source: str | None
    notes: tuple[str, ...] = ()


def platform_name(platform: Mapping[str, Any]) -> str:
    text = f"{platform.get('os', '?')}/{platform.get('architecture', '?')}"
    return text + (f"/{platform['variant']}" if platform.get("variant") else "")


# ---------------------------------------------------------------------------------------------
# The client


@dataclasses.dataclass(frozen=True)
class _Challenge:
    scheme: str
    params: dict[str, str]


def parse_challenge(header: str) -> _Challenge | None:
    """``Bearer realm="...",service="...",scope="..."`` or ``Basic realm="..."``."""
    scheme, _, rest = header.strip().partition(" ")
    if not scheme:
        return None
    params = {
        m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3)
        for m in _CHALLENGE_PARAM.finditer(rest)
    }
    return _Challenge(scheme.lower(), params)


class RegistryClient(RetryingClient[RegistryError]):
    """Image metadata from one registry; one instance per tool call (it remembers that the network is down)."""

    service = "the registry"
    error_type = RegistryError
    settings_type = RegistrySettings

    def __init__(
        self,
        settings: RegistrySettings,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        # (registry origin, scope) -> bearer token, in memory only: a token goes back only where it came from
        self._tokens: dict[tuple[str, str], str] = {}
        self._basic_scopes: set[tuple[str, str]] = set()  # (origin, scope)s whose registry asked for Basic
        self.notes: list[str] = []
        self.credentials: Credentials | None = None
        verify: Trust = False
        if settings.verify_tls:
            verify = settings.network.verify(settings.ca_bundle)
        else:
            self.notes.append(
                f"TLS certificate verification is off ({INSECURE_ENV}); the registry's identity was not checked"
            )
        http = make_http_client(
            settings.network,
            headers={"User-Agent": f"vllm-caching-mcp/{__version__}"},
            transport=transport,
            verify=verify,
        )
        super().__init__(settings, http, offline=settings.offline, sleep=sleep)
        self.cache = DiskCache(settings.cache_dir, self.scrub, label="Registry")

    # -- where to ask -----------------------------------------------------------------------------

    def endpoint(self, ref: ImageRef) -> tuple[str, str]:
        """The API base and the repository path to use there (a mirror may add a project prefix)."""
        if ref.registry == DOCKER_HUB:
            if self.settings.mirror:
                url = httpx.URL(self.settings.mirror)
                prefix = url.path.strip("/")
                base = str(url.copy_with(path="/")).rstrip("/")
                return base, f"{prefix}/{ref.repository}" if prefix else ref.repository
            return DOCKER_HUB_API, ref.repository
        host = ref.registry.split(":")[0].strip("[]")
        scheme = "http" if host in LOOPBACK_HOSTS or f"[{host}]" in LOOPBACK_HOSTS else "https"
        return f"{scheme}://{ref.registry}", ref.repository

    def credentials_for(self, ref: ImageRef) -> Credentials | None:
        """The credentials for the registry ``ref`` is fetched from: the environment's when that registry is
        their home (the mirror, else Docker Hub), else that registry's own docker config entry."""
        base, _ = self.endpoint(ref)
        configured = self.settings.credentials
        if configured is not None:
            if self.settings.credentials_belong_to(base):
                return configured
            home = httpx.URL(self.settings.mirror).netloc.decode() if self.settings.mirror else "Docker Hub"
            self.notes.append(
                f"the credentials from the {configured.source} were not sent to {httpx.URL(base).netloc.decode()}: "
                f"they belong to {home} only"
            )
        if self.settings.docker_config is None:
            return None
        registry = ref.registry
        if registry == DOCKER_HUB and self.settings.mirror:
            registry = httpx.URL(self.settings.mirror).netloc.decode()
        creds, note = credentials_from_docker_config(self.settings.docker_config, registry)
        if note:
            self.notes.append(note)
        return creds

    # -- redirects and statuses -------------------------------------------------------------------

    def _redirect(self, url: str, location: str, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
        # Registries send blobs from a CDN or object store on another host: follow, but carry the
        # Authorization header only to the same origin.
        target = httpx.URL(url).join(location)
        if target.scheme != "https" and not (target.scheme == "http" and is_loopback(target.host)):
            raise self._fail("bad_response", f"refusing a redirect to a non-https address ({target.host})")
        origin = httpx.URL(url)
        if (target.scheme, target.host, target.port) != (origin.scheme, origin.host, origin.port):
            headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
        return str(target), headers

    def _status_error(self, status: int, response: RawResponse) -> RegistryError:
        code = _error_code(response.body)
        if status in (401, 403) or code in ("UNAUTHORIZED", "DENIED"):
            how = (
                "the credentials were refused"
                if self.credentials is not None
                else f"it needs credentials ({USER_ENV}/{PASSWORD_ENV}, {TOKEN_ENV} or docker login)"
            )
            reason: FailureReason = "unauthorized" if status == 401 else "forbidden"
            return self._fail(
                reason, f"the registry refused access (HTTP {status}{', ' + code if code else ''}): {how}"
            )
        if status in (404, 410):
            return self._fail(
                "not_found", f"the registry has no such {code.lower() if code else 'resource'} (HTTP {status})"
            )
        return self._fail("http_error", f"the registry answered HTTP {status}{' ' + code if code else ''}")

    # -- authentication ---------------------------------------------------------------------------

    def _auth_headers(self, key: tuple[str, str]) -> dict[str, str]:
        """What to send for ``key`` (registry origin, scope); ``self.credentials`` are that registry's own."""
        creds = self.credentials
        if key in self._basic_scopes and creds is not None:
            return {"Authorization": f"Basic {creds.basic_value()}"}
        if key in self._tokens:
            return {"Authorization": f"Bearer {self._tokens[key]}"}
        if creds is not None and creds.token is not None:
            return {"Authorization": f"Bearer {creds.token.reveal()}"}
        return {}

    def _answer_challenge(
        self, response: RawResponse, registry_url: str, key: tuple[str, str], deadline: Deadline
    ) -> bool:
        """Get what a 401 challenge asks for; False when there is nothing more worth trying."""
        challenge = parse_challenge(response.headers.get("www-authenticate", ""))
        creds = self.credentials
        if challenge is None or key in self._tokens or key in self._basic_scopes:
            return False  # no challenge, or what it asked for was just refused
        if challenge.scheme == "basic":
            if creds is None or creds.password is None:
                return False
            self._basic_scopes.add(key)
            return True
        if challenge.scheme != "bearer" or "realm" not in challenge.params:
            return False
        try:
            realm = httpx.URL(challenge.params["realm"])
        except httpx.InvalidURL:
            raise self._fail("bad_response", "the registry named a token realm that is not a URL") from None
        if not realm.host or (realm.scheme != "https" and not (realm.scheme == "http" and is_loopback(realm.host))):
            raise self._fail("bad_response", f"refusing a token realm that is not https ({realm.host or 'no host'})")
        params = {"service": challenge.params.get("service", ""), "scope": challenge.params.get("scope") or key[1]}
        headers: dict[str, str] = {}
        if creds is not None and creds.password is not None:
            if self.settings.realm_is_trusted(str(realm), registry_url):
                headers["Authorization"] = f"Basic {creds.basic_value()}"
            else:
                self.notes.append(
                    f"credentials were not sent to the token service at {realm.netloc.decode()}, which is not the "
                    f"registry's origin; list it in {REALM_HOSTS_ENV} to allow it"
                )
        url = str(realm.copy_merge_params({k: v for k, v in params.items() if v}))
        reply = self._request("GET", url, deadline, headers=headers)
        try:
            body = json.loads(reply.body)
            token = body.get("token") or body.get("access_token")
        except (ValueError, UnicodeDecodeError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            raise self._fail("bad_response", f"the token service at {realm.host} answered without a token")
        redact.register(token, transient=True)
        self._tokens[key] = token
        return True

    def _get(self, url: str, scope: str, deadline: Deadline, accept: str | None = None) -> RawResponse:
        """GET with authentication: try, answer a 401 challenge once, try again."""
        key = (origin_of(url), scope)
        while True:
            headers = self._auth_headers(key)
            if accept:
                headers["Accept"] = accept
            response = self._request("GET", url, deadline, headers=headers, passthrough=frozenset({401}))
            if response.status != 401:
                return response
            if not self._answer_challenge(response, url, key, deadline):
                raise self._status_error(401, response)

    # -- manifests and blobs ----------------------------------------------------------------------

    def _fetch_json(
        self, url: str, scope: str, deadline: Deadline, *, accept: str | None, digest: str | None
    ) -> tuple[dict[str, Any], str, str, int]:
        """A JSON document, its digest (checked when known), media type and size; by digest from the cache."""
        key = DiskCache.key("GET", url)
        entry = self.cache.get(key)
        if digest is not None and entry is not None and (cached := _verified(entry.body, digest)) is not None:
            return cached
        response = self._get(url, scope, deadline, accept)
        actual = "sha256:" + hashlib.sha256(response.body).hexdigest()
        declared = response.headers.get("docker-content-digest")
        if digest is not None and actual != digest:
            raise self._fail("bad_response", f"the content does not match its digest {digest}")
        if digest is None and declared and declared.startswith("sha256:") and declared != actual:
            raise self._fail("bad_response", "the manifest does not match the Docker-Content-Digest header")
        try:
            parsed = load_json(response.body)
        except ValueError as exc:
            raise self._fail("bad_response", f"the registry's answer is {exc}") from None
        if not isinstance(parsed, dict):
            raise self._fail("bad_response", "the registry's answer is not a JSON object")
        content_type = response.headers.get("content-type", "").split(";")[0].strip()
        media_type = parsed.get("mediaType") if isinstance(parsed.get("mediaType"), str) else content_type
        # The bytes themselves, so that a read by digest checks them again: a cache file is only a file.
        record = {"raw": base64.b64encode(response.body).decode("ascii"), "media_type": media_type}
        self.cache.put(key, CacheEntry(record, None, time.time()))
        return parsed, actual, str(media_type), len(response.body)

    def manifest(self, base: str, repository: str, reference: str, deadline: Deadline) -> Manifest:
        scope = f"repository:{repository}:pull"
        url = f"{base}/v2/{repository}/manifests/{reference}"
        digest = reference if _DIGEST.match(reference) else None
        body, actual, media_type, size = self._fetch_json(url, scope, deadline, accept=_ACCEPT, digest=digest)
        if media_type not in INDEX_TYPES | MANIFEST_TYPES:
            raise self._fail(
                "bad_response",
                f"the manifest has media type {media_type or 'none'}, which this client does not read "
                "(Docker schema 1 manifests are not supported)",
            )
        return Manifest(media_type, actual, body, size)

    def _tag_manifest(
        self, base: str, repository: str, reference: str, deadline: Deadline
    ) -> tuple[Manifest, Literal["live", "cache"], float, RegistryError | None]:
        """A tag's manifest, fresh within the TTL from the cache, else asked; stale cache covers a failure."""
        key = "tag:" + DiskCache.key("GET", f"{base}/v2/{repository}/manifests/{reference}")
        entry = self.cache.get(key)
        if entry is not None and isinstance(entry.body, dict) and entry.age() < self.settings.cache_ttl:
            return Manifest(**entry.body), "cache", entry.age(), None
        try:
            manifest = self.manifest(base, repository, reference, deadline)
        except RegistryError as exc:
            if entry is not None and isinstance(entry.body, dict) and exc.reason not in ("not_found", "unauthorized"):
                return Manifest(**entry.body), "cache", entry.age(), exc
            raise
        self.cache.put(key, CacheEntry(dataclasses.asdict(manifest), None, time.time()))
        return manifest, "live", 0.0, None

    def inspect(
        self, ref: ImageRef, deadline: Deadline, *, arch: str = "amd64", os_name: str = "linux"
    ) -> ImageMetadata:
        """The manifest of ``os_name/arch`` and its config blob; raises RegistryError, PlatformMissing or
        RegistryNotAllowed (before anything is sent)."""
        if not registry_allowed(ref.registry, self.settings.allowed):
            raise RegistryNotAllowed(
                f"{ref.registry} is not a registry this server asks; it asks {', '.join(self.settings.allowed or ())} "
                f"(its operator can list others in {REGISTRIES_ENV})"
            )
        self.credentials = self.credentials_for(ref)
        try:
            return self._inspect(ref, deadline, arch, os_name)
        except SHAPE_ERRORS as exc:  # JSON of another shape than a manifest's: `"manifests": 5`, `"layers": 7`
            raise self._fail(
                "bad_response", f"the registry's answer is not shaped like an image manifest ({type(exc).__name__})"
            ) from None

    def _inspect(self, ref: ImageRef, deadline: Deadline, arch: str, os_name: str) -> ImageMetadata:
        base, repository = self.endpoint(ref)
        scope = f"repository:{repository}:pull"
        if ref.digest:
            top = self.manifest(base, repository, ref.digest, deadline)
            origin: Literal["live", "cache"] = "live"
            age, fallback = 0.0, None
        else:
            top, origin, age, fallback = self._tag_manifest(base, repository, ref.reference, deadline)
        wanted = f"{os_name}/{arch}"
        if top.media_type in INDEX_TYPES:
            entries = [m for m in top.body.get("manifests") or [] if isinstance(m, dict)]
            # Attestation manifests (buildx provenance) sit in the index as platform unknown/unknown.
            real = [m for m in entries if isinstance(m.get("platform"), dict) and m["platform"].get("os") != "unknown"]
            platforms = tuple(dict.fromkeys(platform_name(m["platform"]) for m in real))
            chosen = next(
                (m for m in real if m["platform"].get("os") == os_name and m["platform"].get("architecture") == arch),
                None,
            )
            if chosen is None or not isinstance(chosen.get("digest"), str) or not _DIGEST.match(chosen["digest"]):
                raise PlatformMissing(wanted, list(platforms))
            manifest = self.manifest(base, repository, chosen["digest"], deadline)
            if manifest.media_type not in MANIFEST_TYPES:
                raise self._fail("bad_response", f"the {wanted} entry of the index is not an image manifest")
            platform = platform_name(chosen["platform"])
        else:
            manifest = top
            platforms = ()
            platform = ""
        config_ref: dict[str, Any] = manifest.body["config"] if isinstance(manifest.body.get("config"), dict) else {}
        config_digest = config_ref.get("digest")
        if not isinstance(config_digest, str) or not _DIGEST.match(config_digest):
            raise self._fail("bad_response", "the manifest names no sha256 config blob")
        config, _, _, _ = self._fetch_json(
            f"{base}/v2/{repository}/blobs/{config_digest}", scope, deadline, accept=None, digest=config_digest
        )
        if not platform:
            platform = platform_name(
                {"os": config.get("os"), "architecture": config.get("architecture"), "variant": config.get("variant")}
            )
            platforms = (platform,)
            if config.get("os") != os_name or config.get("architecture") != arch:
                raise PlatformMissing(wanted, list(platforms))
        layers = [m for m in manifest.body.get("layers") or [] if isinstance(m, dict)]
        sizes = tuple(int(m["size"]) for m in layers if isinstance(m.get("size"), int) and m["size"] >= 0)
        # The config and every name in it are the registry's to choose: a copy of a secret stops here.
        return redact.redact_value(
            ImageMetadata(
                ref=ref,
                endpoint=f"{base}/v2/{repository}",
                top_digest=top.digest,
                top_media_type=top.media_type,
                manifest_digest=manifest.digest,
                manifest_media_type=manifest.media_type,
                platform=platform,
                platforms=platforms,
                config_digest=config_digest,
                config=config,
                layer_sizes=sizes,
                origin=origin,
                age_seconds=age,
                fallback=fallback,
                credentials_source=self.credentials.source if self.credentials else None,
                notes=tuple(dict.fromkeys(self.notes)),
            ),
            self.scrub,
        )


def _verified(record: Any, digest: str) -> tuple[dict[str, Any], str, str, int] | None:
    """A cached document read by ``digest``, if its bytes still hash to it and parse; else None (a miss)."""
    try:
        raw = base64.b64decode(record["raw"], validate=True)
        parsed = load_json(raw)
        media_type = str(record["media_type"])
    except (*SHAPE_ERRORS, binascii.Error):
        return None
    if "sha256:" + hashlib.sha256(raw).hexdigest() != digest or not isinstance(parsed, dict):
        return None
    return parsed, digest, media_type, len(raw)


def _error_code(body: bytes) -> str | None:
    """The first ``errors[].code`` of a distribution-spec error body (MANIFEST_UNKNOWN, DENIED, ...)."""
    try:
        errors = json.loads(body[:65536]).get("errors")
        code = errors[0].get("code") if isinstance(errors, list) and errors else None
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None
    return code if isinstance(code, str) and re.fullmatch(r"[A-Z_]{1,40}", code) else None
