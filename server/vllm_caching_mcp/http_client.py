"""What every HTTP client of this project shares: never hang, retry what is worth retrying, keep secrets out.

`github.py` (issue status), `registry.py` (image metadata) and `hub.py` (model files) are built on this
module; each adds only what its service needs (URLs, authentication, how to read a rate limit, what a status
means).
What lives here:

- `Deadline`: the caller's time allowance. It bounds each whole exchange, from connect to the
  last byte: `ExchangeGuard` hands it to the transport (`routed_transport`), which clamps every
  socket operation to the time left and cuts the connection when it runs out, so a peer dripping
  its status line, headers or body a byte at a time cannot stretch a call past it.
- `RetryingClient`: one exchange with bounded reads, then retries with exponential backoff and
  full jitter on connection errors, timeouts and 5xx; rate limits (``Retry-After`` by default, a
  subclass may read more headers) are waited out only when the wait fits in the deadline; once the
  network is found down, later requests of the same client fail at once instead of each paying the
  timeout. A failure raises `HttpError` with a machine-readable `reason` (`FailureReason`) and a
  text passed through the client's `scrub` (`redact.redact` and more), so a secret never reaches
  an error, a log or a result.
- `DiskCache`: one JSON file per key under ``$XDG_CACHE_HOME/vllm-caching-mcp``, written atomically.
- `NetworkPath`: the proxies (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY) and certificate
  authorities (SSL_CERT_FILE, SSL_CERT_DIR) a site sets for every program; `make_http_client`
  builds an `httpx.Client` that follows them and reads nothing else from the environment.
- `Secret`: a credential whose text leaves it only for a request header; it registers itself
  with `redact`, as do the proxy credentials `NetworkPath` reads.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import dataclasses
import errno
import functools
import hashlib
import ipaddress
import json
import logging
import os
import random
import re
import socket
import ssl
import stat
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, Self, TypeVar, cast

from . import redact, startup_cache
from .lazy_import import lazy_import

if TYPE_CHECKING:
    import httpx
else:  # loaded on the first network call, not at server start-up
    httpx = lazy_import("httpx")

log = logging.getLogger(__name__)

CACHE_DIR_ENV = startup_cache.CACHE_DIR_ENV
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})

FailureReason = Literal[
    "offline_requested",
    "dns_failure",
    "connection_refused",
    "timeout",
    "network_error",
    "rate_limited",
    "deadline",
    "server_error",
    "bad_response",
    "not_found",
    "proxy_refused",
    "unauthorized",
    "forbidden",
    "http_error",
]
# Failures that say the network (or our allowance on it) is gone, not that one resource is bad:
# after one of these, a client stops trying for the rest of its life.
NETWORK_DOWN: frozenset[str] = frozenset(
    {"dns_failure", "connection_refused", "timeout", "network_error", "rate_limited", "deadline", "proxy_refused"}
)
# Transport failures that a second attempt may cure.
_RETRYABLE_TRANSPORT = frozenset({"timeout", "connection_refused", "network_error", "dns_failure"})
_MAX_REDIRECTS = 3


class ConfigError(ValueError):
    """A setting that cannot be used; the message names the variable and what it accepts."""


class HttpError(Exception):
    """A request that could not be answered; ``reason`` is machine-readable, the text is secret-free."""

    def __init__(self, reason: FailureReason, detail: str) -> None:
        super().__init__(detail)
        self.reason: FailureReason = reason
        self.detail = detail


class Secret:
    """A credential; its text leaves this object only through `reveal`, for a request header."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value
        redact.register(value)

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"{type(self).__name__}(***)"

    __str__ = __repr__


class Deadline:
    """A point in monotonic time by which the caller wants an answer."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        return self.at - time.monotonic()


def is_loopback(host: str | None) -> bool:
    return (host or "") in LOOPBACK_HOSTS


def default_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    found = startup_cache.cache_dir(env)
    # No home at all: let Path.home() raise, as before, rather than cache nowhere.
    return found if found is not None else Path.home() / ".cache" / "vllm-caching-mcp"


# ---------------------------------------------------------------------------------------------
# The way out: proxies and certificate authorities

_PROXY_SCHEMES = ("https", "http", "all")


def _env_value(env: Mapping[str, str], name: str) -> str:
    # Lower case first, as Python's urllib and curl read them.
    return (env.get(name.lower()) or env.get(name.upper()) or "").strip()


def _proxy_url(variable: str, text: str) -> str:
    """``host:port`` or ``http(s)://[user:password@]host:port``; the message never repeats the text,
    which may hold a password."""
    candidate = text if "://" in text else f"http://{text}"
    try:
        url = httpx.URL(candidate)
    except (httpx.InvalidURL, ValueError):
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(
            f"{variable}: not a proxy this server can use; accepted: http://host:port or https://host:port "
            "(user:password@ before the host for a proxy that asks for credentials)"
        )
    if url.password:
        # The proxy sees these as Proxy-Authorization: Basic base64(user:password).
        pair = f"{url.username}:{url.password}"
        for secret in (url.password, pair, base64.b64encode(pair.encode()).decode()):
            redact.register(secret)
    return candidate


def _has_port(entry: str) -> bool:
    """``host:443`` or ``[::1]:443`` ends in a port; a bare IPv6 address such as ``::1`` does not."""
    head, colon, tail = entry.rpartition(":")
    return bool(colon) and tail.isdigit() and (head.endswith("]") or ":" not in head)


def _in_network(address: ipaddress.IPv4Address | ipaddress.IPv6Address | None, entry: str) -> bool:
    if address is None or "/" not in entry:
        return False
    try:
        return address in ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return False


def proxy_label(proxy: httpx.URL) -> str:
    """The proxy as ``host:port``, without the credentials its URL may carry."""
    return f"{proxy.host}:{proxy.port}" if proxy.port else proxy.host


@dataclasses.dataclass(frozen=True)
class NetworkPath:
    """How requests leave this host, from the variables curl, pip and git honour too.

    ``HTTPS_PROXY`` / ``HTTP_PROXY`` name the proxy for each URL scheme and ``ALL_PROXY`` the one for
    any; ``NO_PROXY`` lists hosts, domains and networks reached directly (``*`` for all), matched as
    curl matches it. ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` replace the bundled certificate
    authorities with the site's (a TLS-inspecting proxy's, say). Netrc files and every other
    variable are ignored, so no credential reaches a server unless this project put it there.
    """

    # "https"/"http"/"all" -> proxy URL; out of the repr, since a URL may carry a password
    proxies: Mapping[str, str] = dataclasses.field(default_factory=dict, repr=False)
    no_proxy: str = ""
    ca_file: Path | None = None
    ca_dir: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> NetworkPath:
        env = os.environ if env is None else env
        proxies = {
            scheme: _proxy_url(f"{scheme.upper()}_PROXY", text)
            for scheme in _PROXY_SCHEMES
            if (text := _env_value(env, f"{scheme}_proxy"))
        }
        ca_file, ca_dir = env.get("SSL_CERT_FILE", "").strip(), env.get("SSL_CERT_DIR", "").strip()
        if ca_file and not Path(ca_file).expanduser().is_file():
            raise ConfigError("SSL_CERT_FILE: no such file; give a PEM file of certificate authorities, or unset it")
        if ca_dir and not Path(ca_dir).expanduser().is_dir():
            raise ConfigError("SSL_CERT_DIR: no such directory; give a directory of hashed PEM files, or unset it")
        return cls(
            proxies=proxies,
            no_proxy=_env_value(env, "no_proxy"),
            ca_file=Path(ca_file).expanduser() if ca_file else None,
            ca_dir=Path(ca_dir).expanduser() if ca_dir else None,
        )

    def proxy_for(self, url: httpx.URL) -> httpx.URL | None:
        """The proxy a request to ``url`` goes through, or None when it goes direct."""
        text = self.proxies.get(url.scheme) or self.proxies.get("all")
        if text is None or self.goes_direct(url.host, url.port):
            return None
        return httpx.URL(text)

    def goes_direct(self, host: str, port: int | None = None) -> bool:
        """Whether NO_PROXY names ``host``, as curl reads it: ``*`` names every host; ``example.com``
        and ``.example.com`` name that domain and its subdomains; ``host:port`` names one port;
        ``10.0.0.0/8`` or ``fd00::/8`` name the addresses in that network."""
        host = host.lower().strip("[]")
        try:
            address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
        except ValueError:
            address = None
        for entry in self.no_proxy.lower().split(","):
            entry = entry.strip()
            if entry == "*":
                return True
            name, _, entry_port = entry.rpartition(":") if _has_port(entry) else (entry, "", "")
            name = name.strip("[]").lstrip(".")
            if not name or (entry_port and str(port) != entry_port):
                continue
            if host == name or host.endswith("." + name) or _in_network(address, name):
                return True
        return False

    def verify(self, ca_bundle: Path | None = None) -> Trust:
        """What TLS trusts: a service's own bundle, else the site's, else the bundled authorities.

        A function that gives the context, called when the first request is sent: loading a bundle
        takes tens of milliseconds, which an offline call (or one answered from the cache) must not
        pay. Each bundle is loaded once per process and its context shared by every client.
        """
        if ca_bundle is not None:
            return functools.partial(tls_context, str(ca_bundle), None)
        if self.ca_file is not None or self.ca_dir is not None:
            return functools.partial(
                tls_context, str(self.ca_file) if self.ca_file else None, str(self.ca_dir) if self.ca_dir else None
            )
        return functools.partial(tls_context, None, None)


# What a client trusts: a context, True (the bundled authorities), False (no verification), or a function
# giving one of those when the first request is sent.
Trust = ssl.SSLContext | bool | Callable[[], ssl.SSLContext | bool]


@functools.cache
def tls_context(ca_file: str | None, ca_dir: str | None) -> ssl.SSLContext:
    """One context per set of authorities for the whole process (with neither: certifi's, as httpx's default)."""
    if ca_file is None and ca_dir is None:
        import certifi

        return ssl.create_default_context(cafile=certifi.where())
    return ssl.create_default_context(cafile=ca_file, capath=ca_dir)


def make_http_client(
    path: NetworkPath,
    *,
    headers: Mapping[str, str],
    transport: httpx.BaseTransport | None = None,
    verify: Trust = True,
) -> httpx.Client:
    """A client that follows no redirect by itself and takes nothing from the environment but ``path``."""
    from .routed_transport import RoutedTransport  # subclasses an httpx class: imports httpx

    return httpx.Client(
        headers=dict(headers),
        follow_redirects=False,
        trust_env=False,
        transport=transport if transport is not None else RoutedTransport(path, verify),
    )


# ---------------------------------------------------------------------------------------------
# Disk cache


@dataclasses.dataclass
class CacheEntry:
    body: Any
    etag: str | None
    stored_at: float
    next_url: str | None = None

    def age(self) -> float:
        return max(0.0, time.time() - self.stored_at)


class DiskCache:
    """One JSON file per request, named by a hash of it; atomic writes, corrupt files are misses."""

    def __init__(
        self, directory: Path | None, scrub: Callable[[str], str] = redact.redact, *, label: str = "HTTP"
    ) -> None:
        self.directory = directory
        self._scrub = scrub  # a server that echoes a secret must not get it written to disk
        self._label = label
        self._warned = False

    @staticmethod
    def key(method: str, url: str, body: bytes = b"") -> str:
        return hashlib.sha256(method.encode() + b" " + url.encode() + b"\n" + body).hexdigest()

    def get(self, key: str) -> CacheEntry | None:
        """The entry stored under ``key``, if this user wrote it and no one else could have: a file or a
        directory owned by another user, or writable by group or others, is a miss (it could be planted)."""
        if self.directory is None:
            return None
        try:
            if not (_private(os.stat(self.directory)) and _private_file(self.directory / f"{key}.json")):
                self._warn_once("entries another user could have written are not read")
                return None
            raw = json.loads((self.directory / f"{key}.json").read_text(encoding="utf-8"))
            return CacheEntry(
                body=raw["body"],
                etag=raw.get("etag"),
                stored_at=float(raw["stored_at"]),
                next_url=raw.get("next_url"),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, entry: CacheEntry) -> None:
        if self.directory is None:
            return
        # Scrubbed before it is encoded: JSON escapes would hide a secret holding a quote from the scrub.
        payload = json.dumps(redact.redact_value(dataclasses.asdict(entry), self._scrub), separators=(",", ":"))
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    out.write(payload)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(tmp, self.directory / f"{key}.json")
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            # A read-only or full disk costs the cache, never the answer.
            self._warn_once(f"cannot write to the cache directory ({exc.strerror})")

    def _warn_once(self, why: str) -> None:
        if not self._warned:
            log.warning("%s response cache disabled: %s", self._label, why)
            self._warned = True


def _private(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _private_file(path: Path) -> bool:
    """Whether ``path`` is a regular file (not a link) of this user that only this user can write."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True  # a miss of its own, read as one below
    return stat.S_ISREG(st.st_mode) and _private(st)


# ---------------------------------------------------------------------------------------------
# The retrying client


class RetryPolicy(Protocol):
    """The settings a `RetryingClient` reads; GitHubSettings and RegistrySettings both have them."""

    @property
    def timeout(self) -> float: ...
    @property
    def max_retries(self) -> int: ...
    @property
    def backoff_base(self) -> float: ...
    @property
    def backoff_cap(self) -> float: ...
    @property
    def max_body_bytes(self) -> int: ...
    @property
    def network(self) -> NetworkPath: ...


@dataclasses.dataclass
class RawResponse:
    status: int
    headers: httpx.Headers
    body: bytes
    next_url: str | None
    url: str


def classify_connect_error(exc: httpx.ConnectError) -> tuple[FailureReason, str]:
    """Tell a DNS failure from a refused connection by the OS error underneath httpx's."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, socket.gaierror):
            return "dns_failure", "the host name does not resolve"
        if isinstance(cause, ConnectionRefusedError) or getattr(cause, "errno", None) == errno.ECONNREFUSED:
            return "connection_refused", "connection refused"
        cause = cause.__cause__ or cause.__context__
    text = str(exc).lower()
    if "name or service not known" in text or "nodename nor servname" in text or "getaddrinfo" in text:
        return "dns_failure", "the host name does not resolve"
    if "refused" in text:
        return "connection_refused", "connection refused"
    if "certificate" in text or "ssl" in text:
        return "network_error", "TLS handshake failed (certificate not trusted?)"
    return "network_error", "connection failed"


# What a client asks for and reads; httpx would also offer br and zstd when their packages are present.
ACCEPTED_ENCODINGS = "gzip, deflate"
_ENCODING_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class BodyRefused(Exception):
    """A response body that is not read; the text completes "the response body ..." or "answered with ..."."""


class BoundedDecoder:
    """A body's bytes as they arrive, inflated at most up to ``limit`` decoded bytes.

    One content coding at most (gzip or deflate, or none): a stacked coding such as ``gzip, gzip``
    has no use but to multiply a small body, and is refused with any coding that was not offered.
    Inflating asks zlib for no more than one byte past what the cap still allows, so the memory a
    body can take is the cap, whatever its compression ratio.
    """

    def __init__(self, codings: list[str], limit: int) -> None:
        names = [c.strip().lower() for c in codings if c.strip() and c.strip().lower() != "identity"]
        if len(names) > 1:
            raise BodyRefused(f"stacked content encodings ({', '.join(names)}), which are not read")
        if names and names[0] not in _ENCODING_WBITS:
            raise BodyRefused(f"a content encoding that was not asked for ({names[0]}); accepted: {ACCEPTED_ENCODINGS}")
        self._limit = limit
        self._coding = names[0] if names else None
        self._inflater = zlib.decompressobj(_ENCODING_WBITS[self._coding]) if self._coding else None
        self._raw_deflate_tried = False
        self._chunks: list[bytes] = []
        self._size = 0

    def feed(self, data: bytes) -> None:
        if self._inflater is None:
            self._keep(data)
            return
        while data:
            room = self._limit - self._size + 1  # one byte past the cap tells "too large" from "exactly the cap"
            try:
                out = self._inflater.decompress(data, room)
            except zlib.error:
                if self._coding == "deflate" and not self._raw_deflate_tried and self._size == 0:
                    # Some servers send raw deflate without the zlib header, as browsers accept.
                    self._raw_deflate_tried = True
                    self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise BodyRefused(f"is not valid {self._coding} data") from None
            self._keep(out)
            data = self._inflater.unconsumed_tail
            if self._inflater.eof:
                return  # what follows the compressed data is not part of the body

    def finish(self) -> bytes:
        if self._inflater is not None and not self._inflater.eof:
            self._keep(self._inflater.flush(self._limit - self._size + 1))
            if not self._inflater.eof:
                raise BodyRefused(f"ends before its {self._coding} data does")
        return b"".join(self._chunks)

    def _keep(self, data: bytes) -> None:
        self._size += len(data)
        if self._size > self._limit:
            raise BodyRefused(f"is larger than {self._limit} bytes" + (" once decoded" if self._coding else ""))
        if data:
            self._chunks.append(data)


MAX_JSON_DEPTH = 64  # registries and GitHub nest their answers a dozen levels at most


def load_json(body: bytes) -> Any:
    """A peer's JSON body; ValueError for text that is not JSON or nests deeper than MAX_JSON_DEPTH.

    A peer may answer ``[[[[…]]]]`` a hundred thousand levels deep: the decoder itself, and every
    walk over the value after it (redaction, the cache's encoder), would recurse until the
    interpreter's limit ends the call with an internal error.
    """
    try:
        value = json.loads(body)
    except (RecursionError, ValueError):  # UnicodeDecodeError is a ValueError
        raise ValueError("not valid JSON") from None
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > MAX_JSON_DEPTH:
                    raise ValueError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
                pending.append((child, depth + 1))
    return value


# What a peer's well-formed JSON of the wrong shape raises where the code reads it ([] for {}, 5 for []).
SHAPE_ERRORS = (TypeError, KeyError, ValueError, AttributeError, IndexError)


class ExchangeGuard:
    """One exchange's deadline, for the transport to enforce from connect to the last byte.

    httpx's timeouts restart with every byte received, so a peer sending its status line, headers or
    body a byte at a time could hold a call for minutes. While a guard is entered, `routed_transport`
    clamps each socket operation on this thread to the time left and registers the socket it uses;
    at the deadline the guard shuts those sockets down, which also ends a read the clamp does not see
    (TLS inside a TLS proxy tunnel loops over several reads).
    """

    def __init__(self, at: float) -> None:
        self.at = at
        self.fired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._entered: contextvars.Token[ExchangeGuard | None] | None = None

    def remaining(self) -> float:
        return self.at - time.monotonic()

    @property
    def expired(self) -> bool:
        return self.fired or self.remaining() <= 0

    def watch(self, sock: object) -> None:
        """Cut ``sock`` at the deadline too; the transport calls this before each operation on a socket."""
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            if any(known is sock for known in self._sockets):
                return
            self._sockets.append(sock)
            late = self.fired
        if late:
            _shut_down(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut_down(sock)

    def __enter__(self) -> ExchangeGuard:
        self._entered = _current_exchange.set(self)
        # A little after the deadline: the clamped operations end on time by themselves, with a timeout
        # that says so; the cut is for whatever loops past them.
        self._timer = threading.Timer(max(0.0, self.remaining()) + _CUT_GRACE_SECONDS, self._fire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._entered is not None:
            _current_exchange.reset(self._entered)


_CUT_GRACE_SECONDS = 0.25
_current_exchange: contextvars.ContextVar[ExchangeGuard | None] = contextvars.ContextVar(
    "vllm_caching_mcp_exchange", default=None
)


def current_exchange() -> ExchangeGuard | None:
    """The guard of the exchange this thread is in, if any."""
    return _current_exchange.get()


def _shut_down(sock: socket.socket) -> None:
    # The plain socket's shutdown: an SSLSocket's own would unwrap TLS under the reading thread.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class SettingsFromEnv(Protocol):
    """A client's settings class: what the environment sets, ``overrides`` replacing any of it."""

    def from_env(self, env: Mapping[str, str] | None = None, **overrides: Any) -> Any: ...


ErrorT = TypeVar("ErrorT", bound=HttpError)


class RetryingClient(Generic[ErrorT]):
    """One service's HTTP exchanges with deadlines, retries and bounded reads.

    Subclasses name the service (``service``, used in messages), their exception type (``error_type``:
    every failure is raised as one) and their settings class (``settings_type``, which `from_env` reads),
    are built from their settings alone, build the `httpx.Client`, and may override the hooks: `scrub`
    (secrets out of text), `_rate_limit_wait` / `_note_rate_limit` (how the service signals limits),
    `_redirect` (which redirects may be followed, with which headers) and `_status_error` (what a 4xx means).
    A client is a context manager that closes its connections.
    """

    service = "the server"
    error_type: type[ErrorT]
    settings_type: ClassVar[SettingsFromEnv]

    def __init__(
        self, policy: RetryPolicy, http: httpx.Client, *, offline: bool = False, sleep: Callable[[float], None]
    ) -> None:
        self._policy = policy
        self._http = http
        self._sleep = sleep
        self.offline = offline
        self.requests_made = 0
        self._down: HttpError | None = None
        self._blocked_until = 0.0  # wall-clock time until which the rate limit is known to be spent

    @classmethod
    def from_env(cls, **overrides: Any) -> Self:
        """A client with the settings the environment gives (``overrides`` win), one per tool call."""
        build = cast("Callable[[Any], Self]", cls)  # every subclass is built from its settings alone
        return build(cls.settings_type.from_env(**overrides))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- hooks -------------------------------------------------------------------------------------

    def scrub(self, text: str) -> str:
        """The text without any secret this process holds; a subclass may remove more."""
        return redact.redact(text)

    def _error(self, reason: FailureReason, detail: str) -> ErrorT:
        return self.error_type(reason, detail)

    def _fail(self, reason: FailureReason, detail: str) -> ErrorT:
        return self._error(reason, self.scrub(detail))

    def _rate_limit_wait(self, response: RawResponse) -> float | None:
        """How long the service asks us to wait, or None when a 403/429 is not about a limit."""
        retry_after = response.headers.get("retry-after")
        if retry_after is not None:
            try:
                return max(0.0, float(retry_after))
            except ValueError:
                return 60.0
        return 60.0 if response.status == 429 else None

    def _note_rate_limit(self, headers: httpx.Headers) -> None:
        """A success may say the allowance is spent; by default nothing is read."""

    def _redirect(self, url: str, location: str, headers: dict[str, str]) -> tuple[str, dict[str, str]]:
        raise self._fail("bad_response", f"{self.service} answered with a redirect, which is not followed")

    def _status_error(self, status: int, response: RawResponse) -> HttpError:
        if status == 401:
            return self._fail("unauthorized", f"{self.service} asks for credentials (HTTP 401)")
        if status == 403:
            return self._fail("forbidden", f"{self.service} refused the request (HTTP {status})")
        if status in (404, 410):
            return self._fail("not_found", f"{self.service} has no such resource (HTTP {status})")
        return self._fail("http_error", f"{self.service} answered HTTP {status}")

    def _proxy_refused(self, proxy: httpx.URL | None, host: str, status: int | None) -> HttpError:
        name = f"the proxy {proxy_label(proxy)}" if proxy is not None else "a proxy"
        answer = f"HTTP {status}" if status is not None else "an error"
        hint = (
            "; it asks for credentials: put them in the proxy URL (http://user:password@host:port)"
            if status == 407
            else ""
        )
        return self._fail("proxy_refused", f"{name} refused to reach {host} ({answer}){hint}")

    # -- one exchange --------------------------------------------------------------------------------

    def _backoff(self, attempt: int) -> float:
        # Full jitter: a random wait in [0, base * 2^attempt], capped.
        return random.uniform(0, min(self._policy.backoff_cap, self._policy.backoff_base * 2**attempt))

    def _wait(self, seconds: float, deadline: Deadline, reason: FailureReason, why: str) -> None:
        """Sleep ``seconds`` if that leaves time to try again, else give up with ``reason``."""
        if seconds >= deadline.remaining() - 0.05:
            raise self._fail(reason, f"{why}; waiting {seconds:.1f} s would pass the deadline")
        self._sleep(max(0.0, seconds))

    def _read_bounded(self, response: httpx.Response, deadline: Deadline) -> bytes:
        """The body, decoded as it streams in, refused as soon as the decoded size passes the cap.

        httpx would inflate each received chunk whole before anything could count it: a 2 KB body
        compressed twice is a gigabyte in one step. So the raw bytes are read and inflated here, never
        more than the cap allows at once; an encoding stacked on another, or one not asked for, is
        refused before any byte is decoded.
        """
        limit = self._policy.max_body_bytes
        declared = response.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise self._fail("bad_response", f"the response body ({declared} bytes) is larger than {limit} bytes")
        try:
            decoder = BoundedDecoder(response.headers.get_list("content-encoding", split_commas=True), limit)
        except BodyRefused as exc:
            raise self._fail("bad_response", f"{self.service} answered with {exc}") from None
        try:
            for chunk in response.iter_raw():
                if deadline.remaining() <= 0:
                    raise self._fail("timeout", "the response was still arriving when the deadline passed")
                decoder.feed(chunk)
            return decoder.finish()
        except BodyRefused as exc:
            raise self._fail("bad_response", f"the response body {exc}") from None

    def _send_once(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None, deadline: Deadline
    ) -> RawResponse:
        timeout = min(self._policy.timeout, deadline.remaining())
        if timeout <= 0.05:
            raise self._fail("deadline", f"no time left before the deadline to ask {self.service}")
        self.requests_made += 1
        target = httpx.URL(url)
        proxy = self._policy.network.proxy_for(target)
        request = self._http.build_request(
            method,
            url,
            headers={**headers, "Accept-Encoding": ACCEPTED_ENCODINGS},
            content=body,
            timeout=httpx.Timeout(timeout),
        )
        guard = ExchangeGuard(deadline.at)
        try:
            with guard:
                response = self._http.send(request, stream=True)
                try:
                    data = self._read_bounded(response, deadline)
                finally:
                    response.close()
        except httpx.HTTPError as exc:
            # A cut socket reads as a broken connection; a clamped timeout is already a timeout.
            if guard.expired and not isinstance(exc, httpx.TimeoutException):
                raise self._deadline_passed(proxy) from None
            raise self._transport_failure(exc, proxy, target.host, timeout) from None
        if guard.fired:  # a close-delimited body cut at the deadline looks complete: it is not
            raise self._deadline_passed(proxy)
        if response.status_code == 407:  # a plain-http request's proxy speaks for itself
            raise self._proxy_refused(proxy, target.host, 407)
        next_link = response.links.get("next", {}).get("url")
        return RawResponse(response.status_code, response.headers, data, next_link, url)

    def _deadline_passed(self, proxy: httpx.URL | None) -> HttpError:
        via = f" through the proxy {proxy_label(proxy)}" if proxy is not None else ""
        return self._fail("timeout", f"{self.service} was still answering{via} when the deadline passed")

    def _transport_failure(self, exc: httpx.HTTPError, proxy: httpx.URL | None, host: str, timeout: float) -> HttpError:
        """What an httpx error means, in the words of `FailureReason`."""
        via = f" through the proxy {proxy_label(proxy)}" if proxy is not None else ""
        if isinstance(exc, httpx.TimeoutException):
            return self._fail("timeout", f"{self.service} did not answer within {timeout:.1f} s{via}")
        if isinstance(exc, httpx.ProxyError):
            # The proxy answered the tunnel request with an error status (407, 403, 502...).
            status = re.match(r"\d{3}", str(exc))
            return self._proxy_refused(proxy, host, int(status.group()) if status else None)
        if isinstance(exc, httpx.ConnectError):
            reason, what = classify_connect_error(exc)
            if proxy is not None:
                return self._fail(reason, f"cannot connect to the proxy {proxy_label(proxy)} for {host}: {what}")
            return self._fail(reason, f"cannot connect to {host}: {what}")
        return self._fail("network_error", f"network error talking to {host}{via}: {type(exc).__name__}")

    def _request(
        self,
        method: str,
        url: str,
        deadline: Deadline,
        *,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        passthrough: frozenset[int] = frozenset(),
    ) -> RawResponse:
        """Send with retries; returns a 2xx, a 304 or a status in ``passthrough``, raises otherwise."""
        if self.offline:
            raise self._fail("offline_requested", f"offline mode: {self.service} was not asked")
        if self._down is not None:
            raise self._down
        try:
            return self._request_with_retries(method, url, deadline, dict(headers or {}), body, passthrough)
        except HttpError as exc:
            if exc.reason in NETWORK_DOWN:
                self._down = exc
            raise

    def _request_with_retries(
        self,
        method: str,
        url: str,
        deadline: Deadline,
        headers: dict[str, str],
        body: bytes | None,
        passthrough: frozenset[int],
    ) -> RawResponse:
        redirects = 0
        attempt = 0
        while True:
            blocked_for = self._blocked_until - time.time()
            if blocked_for > 0:
                self._wait(blocked_for, deadline, "rate_limited", f"{self.service}'s rate limit is spent")
            try:
                response = self._send_once(method, url, headers, body, deadline)
            except HttpError as exc:
                if exc.reason not in _RETRYABLE_TRANSPORT or attempt >= self._policy.max_retries:
                    raise
                self._wait(self._backoff(attempt), deadline, exc.reason, exc.detail)
                attempt += 1
                continue
            status = response.status
            self._note_rate_limit(response.headers)
            if 200 <= status < 300 or status == 304 or status in passthrough:
                return response
            if status in (301, 302, 303, 307, 308) and method == "GET":
                if redirects >= _MAX_REDIRECTS:
                    raise self._fail(
                        "bad_response", f"{self.service} redirected more than {_MAX_REDIRECTS} times (a redirect loop?)"
                    )
                url, headers = self._redirect(url, response.headers.get("location", ""), headers)
                redirects += 1
                continue
            if status in (403, 429):
                wait = self._rate_limit_wait(response)
                if wait is None:
                    raise self._status_error(status, response)
                if attempt >= self._policy.max_retries:
                    raise self._fail("rate_limited", f"still rate-limited after {attempt + 1} attempts")
                # The wait happens once, at the top of the loop, for this and every later request.
                self._blocked_until = max(self._blocked_until, time.time() + wait)
                attempt += 1
                continue
            if status >= 500:
                if attempt >= self._policy.max_retries:
                    raise self._fail("server_error", f"{self.service} answered HTTP {status} {attempt + 1} times")
                self._wait(self._backoff(attempt), deadline, "server_error", f"{self.service} answered HTTP {status}")
                attempt += 1
                continue
            raise self._status_error(status, response)
