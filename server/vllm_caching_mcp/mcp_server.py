"""The MCP server: every tool in `tools.TOOLS` and every knowledge file, over stdio or streamable HTTP.

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
import inspect
import ipaddress
import operator
import os
import re
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, NoReturn

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from mcp_types import Tool as MCPTool
from pydantic import Field

from . import __version__
from .advice.common import ToolSpec
from .knowledge import FILES, KnowledgeError, load_knowledge
from .prompts import add_prompts
from .tools import TOOLS, ToolInputError, run_tool

if TYPE_CHECKING:  # the HTTP stack is imported only when serving HTTP
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp, Receive, Scope, Send

INSTRUCTIONS = (
    "Answers about vLLM tiered KV caching (CPU/NVMe/object-store/peer offload, LMCache, NIXL, Mooncake) "
    "from facts checked against released code. Ask for the user's vLLM version first and pass it to every "
    "tool: flags, defaults and connector support change between releases. Each answer cites its sources "
    "and says which version it assumed."
)


class _Server(MCPServer):
    """MCPServer whose unknown tool names are protocol errors rather than tool results, and whose
    tool list is built once: the SDK re-validates every tool's schemas on each `tools/list`
    (~4 ms for ours), though the tools never change after start-up."""

    _listed: list[MCPTool] | None = None

    def add_tool(self, *args: Any, **kwargs: Any) -> None:
        self._listed = None
        super().add_tool(*args, **kwargs)

    async def list_tools(self) -> list[MCPTool]:
        if self._listed is None:
            self._listed = await super().list_tools()
        return list(self._listed)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if name not in _TOOL_NAMES:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")
        return await super().call_tool(name, arguments, context)


_TOOL_NAMES = {spec.name for spec in TOOLS}


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


def build_server() -> MCPServer:
    """The server with every tool and knowledge resource registered; loads the knowledge once."""
    knowledge = load_knowledge()
    # The knowledge and the imported modules live as long as the process: moved out of the collector's
    # sight, so each full collection no longer walks them (a third of tool registration's time otherwise).
    gc.freeze()
    server = _Server(name="vllm-caching-mcp", version=__version__, instructions=INSTRUCTIONS)
    for spec in TOOLS:
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
    root = knowledge.directory
    for file_name in FILES:
        _add_knowledge_resource(server, root, file_name)
    add_prompts(server)
    return server


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
    parser.add_argument("--version", action="version", version=f"vllm-caching-mcp {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    try:
        options = http_options(args, dict(os.environ)) if args.transport == "streamable-http" else None
        if options is None and (args.auth_token_env or args.allowed_host or args.allowed_origin):
            raise StartupError("--auth-token-env, --allowed-host and --allowed-origin apply to streamable-http only")
        server = build_server()
        if options is None:
            server.run("stdio")
        else:
            serve_http(server, options, listen(options.host, options.port))
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
