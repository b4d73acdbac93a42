"""The streamable HTTP transport: its start-up options, who may talk to it, and its guard against slow clients.

- `http_options` checks the options together and says what is wrong in one line (`StartupError`).
- `_Gate` (ASGI) checks the bearer token, the Host header and the Origin header. Host and Origin
  are parsed and compared as scheme, host and port values, never as prefixes: the SDK's own check
  lets `localhost:1234.evil.com` through a `localhost:*` pattern, so it is switched off.
- `serve_http` runs uvicorn with `_GuardedH11Protocol`: uvicorn has no header-read timeout for h11
  and no cap on open connections, so a few hundred clients that send half a request would hold
  the process's files until real requests could no longer be accepted.

Only this module's option checks are imported for a stdio server; starlette, uvicorn and h11 are
imported when the HTTP server is built.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import re
import socket
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

if TYPE_CHECKING:
    import argparse

    from mcp.server.mcpserver import MCPServer
    from starlette.types import ASGIApp, Receive, Scope, Send

HEALTH_PATH = "/healthz"
MIN_TOKEN_LENGTH = 16
DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_IDLE_TIMEOUT_S = 30.0
DEFAULT_BODY_TIMEOUT_S = 60.0
DEFAULT_MIN_BODY_RATE = 1024  # bytes a second, once a body has had BODY_RATE_GRACE_S to get going
BODY_RATE_GRACE_S = 2.0
BODY_CHECK_INTERVAL_S = 0.5
# The largest review a call takes is 5,000,000 characters (deployment.MAX_DOCUMENTS_TEXT); JSON may
# escape each into six bytes, and the other tools take far less.
MAX_REQUEST_BODY_BYTES = 32 * 1024 * 1024
MAX_TIMEOUT_S = 3600.0
# Files the process needs besides its client connections: the listening socket, worker channels, logs,
# the caches and outgoing connections of the network tools.
RESERVED_FILES = 64
MAX_DEFAULT_CONNECTIONS = 1024

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
_HOST = r"(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]+\])"
_SCHEME = r"(?P<scheme>[Hh][Tt][Tt][Pp][Ss]?)://"
# A Host header value or an Origin, and the --allowed-host / --allowed-origin patterns (a port may be *).
_HOST_VALUE = re.compile(_HOST + r"(?::(?P<port>\d{1,5}))?")
_HOST_PATTERN = re.compile(_HOST + r"(?::(?P<port>\*|\d{1,5}))?")
_ORIGIN_VALUE = re.compile(_SCHEME + _HOST + r"(?::(?P<port>\d{1,5}))?")
_ORIGIN_PATTERN = re.compile(_SCHEME + _HOST + r"(?::(?P<port>\*|\d{1,5}))?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


class StartupError(Exception):
    """A start-up option that cannot work; the message is one line for the operator."""


class HttpOptions(NamedTuple):
    host: str
    port: int
    path: str
    allowed_hosts: tuple[str, ...]  # ("*",) means any Host header
    allowed_origins: tuple[str, ...]
    token: str | None
    header_timeout: float = DEFAULT_HEADER_TIMEOUT_S
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_S
    max_connections: int = 256
    body_timeout: float = DEFAULT_BODY_TIMEOUT_S
    min_body_rate: int = DEFAULT_MIN_BODY_RATE


def add_http_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that apply to streamable-http only."""
    parser.add_argument("--host", default="127.0.0.1", help="streamable-http: address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="streamable-http: port (default 8000)")
    parser.add_argument("--path", default="/mcp", help="streamable-http: endpoint path (default /mcp)")
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT|:*]",
        help="streamable-http: a Host header value to accept (repeatable; DNS-rebinding protection). Default: the "
        "loopback names when bound to loopback; required otherwise ('*' accepts any Host)",
    )
    parser.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="URL",
        help="streamable-http: an Origin to accept from browsers (repeatable; e.g. https://ide.example.com). "
        "Requests without Origin (non-browser clients) are unaffected",
    )
    parser.add_argument(
        "--auth-token-env",
        metavar="NAME",
        help="streamable-http: require 'Authorization: Bearer <token>', the token read from environment variable "
        f"NAME (at least {MIN_TOKEN_LENGTH} characters); {HEALTH_PATH} stays open",
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        metavar="SECONDS",
        help="streamable-http: a connection must send a request's line and headers within this many seconds of "
        f"opening or of its previous response, however it trickles them (default {DEFAULT_HEADER_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        metavar="SECONDS",
        help="streamable-http: a connection that stops sending in the middle of a request body for this many "
        f"seconds is closed (default {DEFAULT_IDLE_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        metavar="SECONDS",
        help="streamable-http: a request's whole body must arrive within this many seconds of its headers "
        f"(default {DEFAULT_BODY_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--min-body-rate",
        type=int,
        metavar="BYTES",
        help="streamable-http: a request body arriving slower than this many bytes a second on average, "
        f"{BODY_RATE_GRACE_S:g} s after its headers, is cut off (default {DEFAULT_MIN_BODY_RATE})",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="streamable-http: open client connections at most; more are answered 503 and closed. Default: half "
        f"the open-file limit, at most {MAX_DEFAULT_CONNECTIONS}",
    )


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _open_file_limit() -> int | None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _max_connections(requested: int | None) -> int:
    limit = _open_file_limit()
    if requested is None:
        return MAX_DEFAULT_CONNECTIONS if limit is None else max(8, min(MAX_DEFAULT_CONNECTIONS, limit // 2))
    if requested < 1:
        raise StartupError(f"--max-connections: {requested} is not a number of connections (1 or more)")
    if limit is not None and requested > limit - RESERVED_FILES:
        raise StartupError(
            f"--max-connections: {requested} connections need more files than this process may open ({limit}, "
            f"{RESERVED_FILES} of them for its own use); lower it or raise the limit (ulimit -n)"
        )
    return requested


def _timeout(flag: str, value: float | None, default: float) -> float:
    if value is None:
        return default
    if not 0 < value <= MAX_TIMEOUT_S:  # also false for NaN
        raise StartupError(f"{flag}: {value:g} is not a number of seconds between 0 and {MAX_TIMEOUT_S:g}")
    return value


def http_options(args: argparse.Namespace, environ: dict[str, str]) -> HttpOptions:
    """Check the streamable-http options together; raises StartupError with one line."""
    if not 0 < args.port < 65536:
        raise StartupError(f"--port: {args.port} is not a TCP port (1-65535)")
    if not args.path.startswith("/") or args.path == HEALTH_PATH or any(c.isspace() for c in args.path):
        raise StartupError(f"--path: {args.path!r} must start with '/', contain no spaces and not be {HEALTH_PATH}")
    for value in args.allowed_host:
        if value != "*" and _parse(_HOST_PATTERN, value) is None:
            raise StartupError(f"--allowed-host: {value!r} is not HOST, HOST:PORT, HOST:* or *")
    for value in args.allowed_origin:
        if _parse(_ORIGIN_PATTERN, value) is None:
            raise StartupError(f"--allowed-origin: {value!r} is not http(s)://HOST[:PORT|:*]")
    hosts = tuple(args.allowed_host)
    origins = tuple(args.allowed_origin)
    if not hosts:
        if not _is_loopback(args.host):
            raise StartupError(
                f"--host {args.host} accepts connections from other machines: name the Host header values "
                "clients use with --allowed-host (e.g. --allowed-host 'mcp.example.internal:*'), "
                "or --allowed-host '*' behind a proxy that checks Host"
            )
        hosts = ("127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*")
        if not origins:
            origins = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")
    if "*" in hosts and len(hosts) > 1:
        raise StartupError("--allowed-host: '*' accepts any Host header and cannot be combined with other values")
    return HttpOptions(
        args.host,
        args.port,
        args.path,
        hosts,
        origins,
        _token(args.auth_token_env, environ),
        _timeout("--header-timeout", args.header_timeout, DEFAULT_HEADER_TIMEOUT_S),
        _timeout("--idle-timeout", args.idle_timeout, DEFAULT_IDLE_TIMEOUT_S),
        _max_connections(args.max_connections),
        _timeout("--body-timeout", args.body_timeout, DEFAULT_BODY_TIMEOUT_S),
        _min_body_rate(args.min_body_rate),
    )


def _min_body_rate(value: int | None) -> int:
    if value is None:
        return DEFAULT_MIN_BODY_RATE
    if not 1 <= value <= MAX_REQUEST_BODY_BYTES:
        raise StartupError(
            f"--min-body-rate: {value} is not a number of bytes a second between 1 and {MAX_REQUEST_BODY_BYTES}"
        )
    return value


def _token(name: str | None, environ: dict[str, str]) -> str | None:
    if name is None:
        return None
    if not _ENV_NAME.fullmatch(name):
        raise StartupError(f"--auth-token-env: {name!r} is not an environment variable name")
    token = environ.get(name, "")
    if not token:
        raise StartupError(f"--auth-token-env: the environment variable {name} is not set or empty")
    if len(token) < MIN_TOKEN_LENGTH or any(c.isspace() or not c.isprintable() for c in token):
        raise StartupError(
            f"--auth-token-env: the token in {name} must be at least {MIN_TOKEN_LENGTH} printable "
            "characters without spaces"
        )
    return token


# -- Host and Origin, as values ---------------------------------------------------------------------


class Address(NamedTuple):
    """A Host header, an Origin or a pattern for either: scheme (Origins only), host, and port."""

    scheme: str | None
    host: str
    port: str | None  # digits without leading zeros, "*" (patterns: any port), or None (none given)


def _parse(pattern: re.Pattern[str], text: str) -> Address | None:
    match = pattern.fullmatch(text)
    if match is None:
        return None
    port = match["port"]
    if port is not None and port != "*":
        if not 0 < int(port) < 65536:
            return None
        port = str(int(port))
    scheme = match.groupdict().get("scheme")
    return Address(scheme.lower() if scheme else None, match["host"].lower(), port)


def _matches(value: Address, allowed: Address) -> bool:
    if (value.scheme, value.host) != (allowed.scheme, allowed.host):
        return False
    if allowed.port == "*":
        return value.port is not None
    return value.port == allowed.port


def address_allowed(text: str, allowed: tuple[Address, ...], *, origin: bool) -> bool:
    """Whether a Host header (or, with ``origin``, an Origin header) matches one of ``allowed``."""
    value = _parse(_ORIGIN_VALUE if origin else _HOST_VALUE, text)
    return value is not None and any(_matches(value, a) for a in allowed)


class _Gate:
    """ASGI wrapper: bearer token, Host and Origin checks; the health probe is always open.

    The token is compared as SHA-256 digests with `hmac.compare_digest`, so neither its content
    nor its length leaks through timing; it is never logged or echoed. A request with two Host or
    two Origin headers is refused: the parts behind this one might read the other. A refusal closes
    the connection, so a refused client cannot go on sending a body the server would read to its
    end. A body over MAX_REQUEST_BODY_BYTES is refused by its declared length, or cut off where a
    streamed one passes it.
    """

    def __init__(self, app: ASGIApp, options: HttpOptions) -> None:
        self.app = app
        self.token_digest = hashlib.sha256(options.token.encode()).digest() if options.token else None
        self.allowed_hosts = (
            None
            if options.allowed_hosts == ("*",)
            else tuple(a for h in options.allowed_hosts if (a := _parse(_HOST_PATTERN, h)) is not None)
        )
        self.allowed_origins = tuple(a for o in options.allowed_origins if (a := _parse(_ORIGIN_PATTERN, o)))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == HEALTH_PATH:
            await self.app(scope, receive, send)
            return
        headers: dict[str, list[bytes]] = {}
        for key, value in scope.get("headers", []):
            headers.setdefault(key.decode("latin-1").lower(), []).append(value)
        if self.token_digest is not None and not self._token_ok(headers.get("authorization", [])):
            await _reply(
                send, 401, b'{"error": "a valid bearer token is required"}', [(b"www-authenticate", b"Bearer")]
            )
            return
        hosts = headers.get("host", [])
        if self.allowed_hosts is not None and not (
            len(hosts) == 1 and address_allowed(hosts[0].decode("latin-1"), self.allowed_hosts, origin=False)
        ):
            await _reply(send, 421, b'{"error": "host not allowed"}', [])
            return
        origins = headers.get("origin", [])
        if origins and not (
            len(origins) == 1 and address_allowed(origins[0].decode("latin-1"), self.allowed_origins, origin=True)
        ):
            await _reply(send, 403, b'{"error": "origin not allowed"}', [])
            return
        declared = headers.get("content-length", [b"0"])
        if len(declared) != 1 or not declared[0].isdigit() or int(declared[0]) > MAX_REQUEST_BODY_BYTES:
            body = b'{"error": "a request body of at most %d bytes, with one Content-Length, is accepted"}'
            await _reply(send, 413, body % MAX_REQUEST_BODY_BYTES, [])
            return
        await self.app(scope, _capped_body(receive), send)

    def _token_ok(self, values: list[bytes]) -> bool:
        assert self.token_digest is not None
        scheme, _, supplied = (values[0] if len(values) == 1 else b"").partition(b" ")
        supplied_digest = hashlib.sha256(supplied.strip()).digest()
        return scheme.lower() == b"bearer" and hmac.compare_digest(supplied_digest, self.token_digest)


def _capped_body(receive: Receive) -> Receive:
    """``receive`` that ends a streamed body passing MAX_REQUEST_BODY_BYTES as a disconnect."""
    received = 0

    async def capped() -> Any:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > MAX_REQUEST_BODY_BYTES:
                return {"type": "http.disconnect"}
        return message

    return capped


async def _reply(send: Send, status: int, body: bytes, extra_headers: list[tuple[bytes, bytes]]) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *extra_headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(server: MCPServer, options: HttpOptions) -> ASGIApp:
    """The streamable HTTP app: stateless (any replica can answer any request), guarded, with /healthz."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    server.custom_route(HEALTH_PATH, methods=["GET"], include_in_schema=False)(health)
    # Host and Origin are checked by _Gate, as parsed values; the SDK still checks Content-Type.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(
        streamable_http_path=options.path, stateless_http=True, transport_security=security, host=options.host
    )
    return _Gate(app, options)


def listen(host: str, port: int) -> socket.socket:
    """A listening socket, so that a bad address or a busy port is one clear line, not a traceback."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except (socket.gaierror, UnicodeError):
        raise StartupError(f"--host: {host!r} is not an address this machine can bind") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def serve_http(server: MCPServer, options: HttpOptions, sock: socket.socket) -> None:
    import anyio
    import uvicorn

    config = uvicorn.Config(
        http_app(server, options),
        host=options.host,
        port=options.port,
        log_level=server.settings.log_level.lower(),
        server_header=False,
        http=guarded_protocol(options),
    )
    anyio.run(uvicorn.Server(config).serve, [sock])


# -- slow clients ------------------------------------------------------------------------------------

_BUSY_BODY = b'{"error": "the server has too many open connections; try again shortly"}\n'
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"retry-after: 1\r\ncontent-length: %d\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)


def guarded_protocol(options: HttpOptions) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a header timeout, body timeouts and a cap on open connections."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        """Closes a connection whose request line and headers have not all arrived ``header_timeout`` after
        it opened (or after its previous response), however it trickles them; one that sends
        nothing for ``idle_timeout`` in the middle of a request body; and one whose body has not
        all come ``body_timeout`` after its head, or comes slower than ``min_body_rate`` on average
        once it has had BODY_RATE_GRACE_S, so a byte every few seconds holds no connection. At
        ``max_connections``, a new connection takes the place of the one that has waited longest for
        a request head (a slow client's, or an idle keep-alive) or of a body below the rate, so slow
        clients cannot crowd real ones out; when every connection is busy with a request, the new one
        is answered 503 and closed at once, so the process never runs out of files. While the
        application has not read what came, the body's clocks stop: that wait is not the client's. A
        request being answered is never timed out here: its budget is the tool's.
        """

        # The connections waiting for a request head, the longest-waiting first.
        awaiting_head: ClassVar[dict[GuardedH11Protocol, None]] = {}

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._refused = False
            self._head_timer: asyncio.TimerHandle | None = None
            self._idle_timer: asyncio.TimerHandle | None = None
            self._body_timer: asyncio.TimerHandle | None = None
            self._body_seconds = 0.0  # how long the body has been the client's to send
            self._body_bytes = 0

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            if len(self.connections) >= options.max_connections and not self._evict_one():
                self._refused = True
                self.transport = transport  # type: ignore[assignment]
                transport.write(_BUSY)  # type: ignore[attr-defined]
                transport.close()
                return
            super().connection_made(transport)  # type: ignore[arg-type]
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return
            self._cancel_timers()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            if self.conn.their_state is h11.SEND_BODY:
                self._body_bytes += len(data)
            super().data_received(data)
            self._follow_request()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._await_head()  # keep-alive: the next request's head is timed from here

        def _evict_one(self) -> bool:
            for waiting in self.awaiting_head:
                waiting._close()
                return True
            slow = [c for c in self.connections if isinstance(c, GuardedH11Protocol) and c._body_too_slow()]
            if slow:
                slow[0]._close()
                return True
            return False

        def _follow_request(self) -> None:
            state = self.conn.their_state
            if state is not h11.IDLE and self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
                self.awaiting_head.pop(self, None)
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
            if state is h11.SEND_BODY:
                self._idle_timer = self.loop.call_later(options.idle_timeout, self._body_stalled)
                if self._body_timer is None:
                    self._body_seconds, self._body_bytes = 0.0, 0
                    self._body_timer = self.loop.call_later(BODY_CHECK_INTERVAL_S, self._check_body)

        def _await_head(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(options.header_timeout, self._head_too_slow)
                self.awaiting_head[self] = None

        def _head_too_slow(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE:
                self._close()

        def _close(self) -> None:
            self._cancel_timers()
            if not self.transport.is_closing():
                self.transport.close()

        def _body_stalled(self) -> None:
            self._idle_timer = None
            if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
                return
            if self.flow.read_paused:  # the application has not read what came; not the client's pause
                self._idle_timer = self.loop.call_later(options.idle_timeout, self._body_stalled)
            else:
                self.transport.close()

        def _check_body(self) -> None:
            self._body_timer = None
            if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
                return
            if not self.flow.read_paused:
                self._body_seconds += BODY_CHECK_INTERVAL_S
            if self._body_seconds >= options.body_timeout or self._body_too_slow():
                self.transport.close()
                return
            self._body_timer = self.loop.call_later(BODY_CHECK_INTERVAL_S, self._check_body)

        def _body_too_slow(self) -> bool:
            if self.conn.their_state is not h11.SEND_BODY or self._body_seconds < BODY_RATE_GRACE_S:
                return False
            return self._body_bytes < options.min_body_rate * self._body_seconds

        def _cancel_timers(self) -> None:
            for timer in (self._head_timer, self._idle_timer, self._body_timer):
                if timer is not None:
                    timer.cancel()
            self._head_timer = self._idle_timer = self._body_timer = None
            self.awaiting_head.pop(self, None)

    return GuardedH11Protocol
