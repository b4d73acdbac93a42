"""The MCP server: every tool in `tools.TOOL_NAMES` and every knowledge file, over stdio or streamable HTTP.

Built on the official SDK's `MCPServer` (mcp 2.x). Each tool's input schema is the tool's
request model, flattened into typed parameters with their `Field` descriptions and bounds;
its output schema is the result model. A call returns the result as structured content plus
a short text summary. Bad input is a tool error whose message names the field; a tool name
the server does not have is a protocol error. Nothing else lives here.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import hmac
import importlib
import importlib.util
import inspect
import ipaddress
import logging
import operator
import os
import re
import socket
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, NoReturn

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from mcp_types import Tool as MCPTool
from pydantic import Field

from . import __version__, startup_cache
from .knowledge_files import FILE_NAMES, KnowledgeError, knowledge_dir
from .prompts import add_prompts
from .tools import TOOL_NAMES, ToolInputError, run_tool, tool_spec

if TYPE_CHECKING:  # the HTTP stack is imported only when serving HTTP, the tools' models on first use
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp, Receive, Scope, Send

    from .advice.common import ToolSpec

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Answers about vLLM tiered KV caching (CPU/NVMe/object-store/peer offload, LMCache, NIXL, Mooncake) "
    "from facts checked against released code. Ask for the user's vLLM version first and pass it to every "
    "tool: flags, defaults and connector support change between releases. Each answer cites its sources "
    "and says which version it assumed."
)


class _Server(MCPServer):
    """MCPServer that registers each tool with the SDK only when it is first needed.

    Given a listing (from the start-up cache: what an earlier start-up built from the same code and
    knowledge), it answers `tools/list` without building any tool's pydantic models, importing any
    tool module or loading the knowledge. A tool is registered, with the SDK validating arguments
    as usual, on its first call, and every tool shortly after the first `tools/list` (on a thread,
    while the agent reads the list). Without a listing, `load` runs before the server starts.
    Unknown tool names are protocol errors rather than tool results. The listing is built once:
    the SDK would otherwise re-validate every tool's schemas (~4 ms) on each `tools/list`.
    """

    def __init__(self, listing: list[MCPTool] | None, listing_inputs: list[bytes] | None, **settings: Any) -> None:
        super().__init__(**settings)
        self._registered: set[str] = set()
        self._registering = threading.Lock()
        self._listed = listing
        self._listing_inputs = listing_inputs  # what a listing built here is cached under; None: not cached
        self._warm_up: threading.Timer | None = None

    def register(self, name: str) -> None:
        """Register tool ``name`` with the SDK (importing its module) unless it already is."""
        if name in self._registered:
            return
        with self._registering:
            if name not in self._registered:
                _add_tool(self, tool_spec(name))
                self._registered.add(name)

    def register_all(self) -> None:
        for name in TOOL_NAMES:
            self.register(name)

    def load(self) -> None:
        """Load the knowledge and register every tool: what a start-up without the cached listing does."""
        from .knowledge import load_knowledge  # the models and YAML: not needed to list the tools

        load_knowledge()
        self.register_all()
        # All of it lives as long as the process: moved out of the collector's sight, so full
        # collections stop walking it (a third of tool registration's time otherwise).
        gc.freeze()

    def _warm(self) -> None:
        try:
            self.load()
        except Exception:  # a tool that cannot load reports it on its own call
            logger.exception("loading the tools in the background failed")

    async def list_tools(self) -> list[MCPTool]:
        if self._listed is None:
            self.load()
            self._listed = await super().list_tools()
            if self._listing_inputs is not None:
                startup_cache.write(LISTING_CACHE, self._listing_inputs, self._listed)
        elif self._warm_up is None and len(self._registered) < len(TOOL_NAMES):
            self._warm_up = threading.Timer(WARM_UP_DELAY_S, self._warm)
            self._warm_up.daemon = True
            self._warm_up.start()
        return list(self._listed)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if name not in TOOL_NAMES:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")
        self.register(name)
        return await super().call_tool(name, arguments, context)


# The listing is answered first; the tools register this long after, off the event loop.
WARM_UP_DELAY_S = 0.2
LISTING_CACHE = "tool-listing"
# Third-party code that shapes the listing or the knowledge it rests on, fingerprinted by file.
_DEPENDENCIES = (
    "mcp.server.mcpserver.server",
    "mcp.server.mcpserver.tools.base",
    "mcp.server.mcpserver.utilities.func_metadata",
    "mcp_types._types",
    "pydantic.version",
    "pydantic.json_schema",
    "pydantic_core",
    "yaml",
    "packaging.version",
)


def listing_cache_inputs() -> list[bytes]:
    """What the cached tool listing stands for: this package's source, the knowledge files, and the
    dependencies above (each by path, size and modification time). A listing stored under these
    inputs was written by a start-up that loaded and validated exactly this knowledge."""
    package = Path(__file__).resolve().parent
    root = knowledge_dir()
    parts = [f"{__version__} {sys.version}".encode(), str(root).encode()]
    for path in sorted(package.rglob("*.py")):
        parts += [str(path.relative_to(package)).encode(), path.read_bytes()]
    for name in FILE_NAMES:
        parts += [name.encode(), (root / name).read_bytes()]
    for module_name in _DEPENDENCIES:
        spec = importlib.util.find_spec(module_name)
        if spec is None or spec.origin is None:
            raise OSError(f"{module_name} has no source file")
        stat = os.stat(spec.origin)
        parts.append(f"{spec.origin} {stat.st_size} {stat.st_mtime_ns}".encode())
    return parts


def _listing_inputs() -> list[bytes] | None:
    try:
        return listing_cache_inputs()
    except OSError:  # a file that vanished or cannot be read: this start-up neither reads nor writes the cache
        return None


def _cached_listing(inputs: list[bytes] | None) -> list[MCPTool] | None:
    if inputs is None:
        return None
    listing = startup_cache.read(LISTING_CACHE, inputs, list)
    if listing is None or [getattr(t, "name", None) for t in listing] != list(TOOL_NAMES):
        return None
    if not all(isinstance(t, MCPTool) for t in listing):
        return None
    return listing


def _tool_function(spec: ToolSpec) -> Any:
    """A function whose signature is the request model's fields, for the SDK to derive the schema from."""

    def call(arguments: dict[str, Any]) -> CallToolResult:
        try:
            result = run_tool(spec.name, arguments)
        except ToolInputError as exc:
            raise ToolError(str(exc)) from None
        return CallToolResult(
            content=[TextContent(type="text", text=result.summary())],
            structured_content=result.model_dump(mode="json"),
        )

    tool: Any
    if spec.open_world:
        # Network tools block on I/O: the SDK runs a plain function on a worker thread.
        def tool(**arguments: Any) -> CallToolResult:
            return call(arguments)
    else:
        # Offline tools are a few milliseconds of CPU: a thread hop would cost more than it frees.
        async def tool(**arguments: Any) -> CallToolResult:
            return call(arguments)

    parameters = []
    for field_name, field in spec.request.model_fields.items():
        # Annotated[...] built at run time from the model's own type, bounds, description and default
        # (a default factory stays a factory, so no call shares a mutable default with another).
        extra = Field(description=field.description)
        default = inspect.Parameter.empty if field.is_required() else field.default
        if field.default_factory is not None:
            extra = Field(description=field.description, default_factory=field.default_factory)
            default = inspect.Parameter.empty
        annotation = operator.getitem(Annotated, (field.annotation, *field.metadata, extra))
        parameters.append(
            inspect.Parameter(field_name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
        )
    tool.__signature__ = inspect.Signature(parameters, return_annotation=spec.result)
    tool.__name__ = spec.name
    tool.__doc__ = spec.description
    return tool


def _add_tool(server: MCPServer, spec: ToolSpec) -> None:
    server.add_tool(
        _tool_function(spec),
        name=spec.name,
        title=spec.title,
        description=spec.description,
        annotations=ToolAnnotations(
            title=spec.title,
            read_only_hint=True,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=spec.open_world,
        ),
        structured_output=True,
    )


def build_server(*, defer: bool = True) -> _Server:
    """The server with every tool and knowledge resource.

    With ``defer``, a start-up that finds its tool listing in the start-up cache (stored by an
    earlier start-up from the same code and knowledge, after validating it) answers `tools/list`
    from it and loads the rest later (see _Server). Any other start-up loads and validates the
    knowledge now, so a broken file stops it with one line, and registers every tool.
    """
    inputs = _listing_inputs()
    listing = _cached_listing(inputs) if defer else None
    server = _Server(listing, inputs, name="vllm-caching-mcp", version=__version__, instructions=INSTRUCTIONS)
    if server._listed is None:
        server.load()
    root = str(knowledge_dir())
    for file_name in FILE_NAMES:
        _add_knowledge_resource(server, root, file_name)
    add_prompts(server)
    return server


def prepare() -> str:
    """Load and validate everything and store the start-up cache: what the first start-up would do."""
    import anyio

    server = build_server(defer=False)
    anyio.run(server.list_tools)
    directory = startup_cache.cache_dir()
    if directory is None or _cached_listing(server._listing_inputs) is None:
        return "knowledge and tools are valid; no writable cache directory, so every start-up loads them in full"
    return f"knowledge and tools are valid; start-up cache written to {directory}"


def _add_knowledge_resource(server: MCPServer, root: str, file_name: str) -> None:
    path = Path(root) / file_name

    @server.resource(
        f"knowledge://{file_name}",
        name=file_name,
        description=f"The knowledge base file {file_name}: sourced, version-ranged facts (read-only).",
        mime_type="application/yaml",
    )
    def read() -> str:
        return path.read_text(encoding="utf-8")


# -- start-up and the HTTP transport --------------------------------------------------------------

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
# Host header patterns the SDK matches: exact, or "name:*" for any port.
_HOST_PATTERN = re.compile(r"(\*|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]+\])(?::(?:\*|\d{1,5}))?")
_ORIGIN_PATTERN = re.compile(r"https?://(?:[A-Za-z0-9][A-Za-z0-9.-]{0,252}|\[[0-9A-Fa-f:.]+\])(?::(?:\*|\d{1,5}))?")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
MIN_TOKEN_LENGTH = 16
HEALTH_PATH = "/healthz"


class StartupError(Exception):
    """A start-up option that cannot work; the message is one line for the operator."""


class HttpOptions(NamedTuple):
    host: str
    port: int
    path: str
    allowed_hosts: tuple[str, ...]  # ("*",) means any Host header
    allowed_origins: tuple[str, ...]
    token: str | None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, no usage dump: start-up errors are read in service logs.
        self.exit(2, f"{self.prog}: {message}\n")


def _is_loopback(host: str) -> bool:
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def http_options(args: argparse.Namespace, environ: dict[str, str]) -> HttpOptions:
    """Check the streamable-http options together; raises StartupError with one line."""
    if not 0 < args.port < 65536:
        raise StartupError(f"--port: {args.port} is not a TCP port (1-65535)")
    if not args.path.startswith("/") or args.path == HEALTH_PATH or any(c.isspace() for c in args.path):
        raise StartupError(f"--path: {args.path!r} must start with '/', contain no spaces and not be {HEALTH_PATH}")
    for value in args.allowed_host:
        if not _HOST_PATTERN.fullmatch(value):
            raise StartupError(f"--allowed-host: {value!r} is not HOST, HOST:PORT, HOST:* or *")
    for value in args.allowed_origin:
        if not _ORIGIN_PATTERN.fullmatch(value):
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
    token = None
    if args.auth_token_env is not None:
        name = args.auth_token_env
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
    return HttpOptions(args.host, args.port, args.path, hosts, origins, token)


def _origin_allowed(origin: str, allowed: tuple[str, ...]) -> bool:
    return origin in allowed or any(a.endswith(":*") and origin.startswith(a[:-1]) for a in allowed)


class _Gate:
    """ASGI wrapper: bearer token and (when every Host is accepted) Origin checks; health is always open.

    The token is compared as SHA-256 digests with `hmac.compare_digest`, so neither its content
    nor its length leaks through timing; it is never logged or echoed.
    """

    def __init__(self, app: ASGIApp, options: HttpOptions) -> None:
        self.app = app
        self.token_digest = hashlib.sha256(options.token.encode()).digest() if options.token else None
        self.check_origin = options.allowed_hosts == ("*",)  # otherwise the SDK checks Host and Origin
        self.allowed_origins = options.allowed_origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == HEALTH_PATH:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v for k, v in scope.get("headers", [])}
        if self.token_digest is not None:
            scheme, _, supplied = headers.get("authorization", b"").partition(b" ")
            supplied_digest = hashlib.sha256(supplied.strip()).digest()
            if scheme.lower() != b"bearer" or not hmac.compare_digest(supplied_digest, self.token_digest):
                await _reply(
                    send, 401, b'{"error": "a valid bearer token is required"}', [(b"www-authenticate", b"Bearer")]
                )
                return
        origin = headers.get("origin")
        if (
            self.check_origin
            and origin is not None
            and not _origin_allowed(origin.decode("latin-1"), self.allowed_origins)
        ):
            await _reply(send, 403, b'{"error": "origin not allowed"}', [])
            return
        await self.app(scope, receive, send)


async def _reply(send: Send, status: int, body: bytes, extra_headers: list[tuple[bytes, bytes]]) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra_headers]
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

    security: TransportSecuritySettings
    if options.allowed_hosts == ("*",):
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    else:
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=list(options.allowed_hosts),
            allowed_origins=list(options.allowed_origins),
        )
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
    )
    anyio.run(uvicorn.Server(config).serve, [sock])


def _config_root(config_dir: str | None) -> Path | None:
    if config_dir is None:
        return None
    root = Path(config_dir).expanduser()
    if not root.is_dir():
        raise StartupError(f"--config-dir: {config_dir!r} is not a directory")
    return root


def _restrict_config_paths(root: Path | None) -> None:
    """size_offload's `config_path` reads files on this host: from here on, only under ``root``, or none."""
    from .advice.model_config import restrict_config_paths

    restrict_config_paths(root)


def argument_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vllm-caching-mcp", description="MCP server for vLLM tiered KV caching (stdio by default).")
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
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
        "--config-dir",
        metavar="DIR",
        help="size_offload reads config.json files (config_path) only under DIR. Default: anywhere over stdio, "
        "nowhere over streamable-http",
    )
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="load and validate the knowledge and tools, store the start-up cache, and exit (run after installing)",
    )
    parser.add_argument("--version", action="version", version=f"vllm-caching-mcp {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    try:
        options = http_options(args, dict(os.environ)) if args.transport == "streamable-http" else None
        if options is None and (args.auth_token_env or args.allowed_host or args.allowed_origin):
            raise StartupError("--auth-token-env, --allowed-host and --allowed-origin apply to streamable-http only")
        config_root = _config_root(args.config_dir)
        if args.prepare:
            print(prepare())
        elif options is None:
            server = build_server()
            if config_root is not None:  # otherwise a stdio server reads where the user who started it can
                _restrict_config_paths(config_root)
            server.run("stdio")
        else:
            # A long-lived shared server loads everything before it accepts a connection, and reads
            # no file of its host for callers unless given a --config-dir.
            server = build_server(defer=False)
            sock = listen(options.host, options.port)
            _restrict_config_paths(config_root)
            serve_http(server, options, sock)
    except StartupError as exc:
        print(f"vllm-caching-mcp: {exc}", file=sys.stderr)
        return 2
    except KnowledgeError as exc:
        print(f"vllm-caching-mcp: the knowledge base is broken: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
