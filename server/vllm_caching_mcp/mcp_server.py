"""The MCP server: every tool in `tools.TOOL_NAMES` and every knowledge file, over stdio or streamable HTTP.

Built on the official SDK's `MCPServer` (mcp 2.x). Each tool's input schema is the tool's
request model, flattened into typed parameters with their `Field` descriptions and bounds;
its output schema is the result model. A call returns the result as structured content plus
a short text summary. Bad input is a tool error whose message is the line the CLI prints,
naming the field; a tool name the server does not have is a protocol error. The offline tools
run in worker processes, each call under a CPU budget (tool_workers); the streamable HTTP
transport and its guards are in http_transport.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import inspect
import logging
import operator
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, NoReturn

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from mcp_types import Tool as MCPTool
from pydantic import Field, ValidationError

from . import __version__, startup_cache, tool_workers
from .http_transport import (
    HEALTH_PATH,
    MIN_TOKEN_LENGTH,
    HttpOptions,
    StartupError,
    add_http_arguments,
    http_app,
    http_options,
    listen,
    serve_http,
)
from .knowledge_files import FILE_NAMES, KnowledgeError, knowledge_dir
from .prompts import add_prompts
from .redact import redact, redact_value
from .tool_workers import ToolWorkers
from .tools import TOOL_NAMES, ToolInputError, check_argument_names, describe_validation_error, run_tool, tool_spec

if TYPE_CHECKING:  # the tools' models are imported on first use
    from .advice.common import ToolSpec

# The HTTP transport lives in http_transport; these names are part of this module's interface too.
__all__ = [
    "HEALTH_PATH",
    "MIN_TOKEN_LENGTH",
    "HttpOptions",
    "StartupError",
    "argument_parser",
    "build_server",
    "http_app",
    "http_options",
    "listen",
    "main",
    "prepare",
    "serve_http",
]

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

    With ``workers``, the offline tools run in those worker processes under their CPU budget;
    without (a server built in-process, as tests and the CLI's comparisons do), on a thread.
    """

    def __init__(
        self,
        listing: list[MCPTool] | None,
        listing_inputs: list[bytes] | None,
        workers: ToolWorkers | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(**settings)
        self.workers = workers
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
                _add_tool(self, tool_spec(name), self.workers)
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
        try:
            check_argument_names(name, arguments)  # the SDK would drop an argument the tool does not take
            return await super().call_tool(name, arguments, context)
        except ToolInputError as exc:
            raise ToolError(str(exc)) from None
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            raise _as_the_cli_says_it(exc) from exc.__cause__


def _as_the_cli_says_it(error: ToolError) -> ToolError:
    """A tool error in the words the CLI prints: one line, 'field: what is wrong'.

    The SDK checks the arguments against the tool's schema before the tool runs and reports a
    failure as pydantic's multi-line text, with its documentation URL and version; and it puts
    "Error executing tool NAME: " before every message. Neither reaches the caller.
    """
    cause = error.__cause__
    if isinstance(cause, ValidationError):
        return ToolError(redact(describe_validation_error(cause)))
    if isinstance(cause, ToolError):
        return ToolError(str(cause))
    return error


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


def _tool_function(spec: ToolSpec, workers: ToolWorkers | None) -> Any:
    """A function whose signature is the request model's fields, for the SDK to derive the schema from."""
    tool: Any
    if workers is not None and not spec.open_world:
        # Offline tools are CPU work on caller-sized input: in a worker process, off the event loop,
        # where a call past its CPU budget can be stopped.
        async def tool(**arguments: Any) -> CallToolResult:
            try:
                answer = await workers.call(spec.name, arguments)
            except (ToolInputError, tool_workers.CallStopped) as exc:
                raise ToolError(redact(str(exc))) from None
            # The worker holds none of the secrets this process registered (see redact).
            return _result(redact(answer.summary), redact_value(answer.structured))
    else:
        # Network tools block on I/O: the SDK runs a plain function on a worker thread, as it does
        # every tool of a server built without worker processes.
        def tool(**arguments: Any) -> CallToolResult:
            try:
                result = run_tool(spec.name, arguments)
            except ToolInputError as exc:
                raise ToolError(str(exc)) from None
            return _result(result.summary(), result.model_dump(mode="json"))

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


def _result(summary: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=summary)], structured_content=structured)


def _add_tool(server: MCPServer, spec: ToolSpec, workers: ToolWorkers | None) -> None:
    server.add_tool(
        _tool_function(spec, workers),
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


def build_server(*, defer: bool = True, workers: ToolWorkers | None = None) -> _Server:
    """The server with every tool and knowledge resource.

    With ``defer``, a start-up that finds its tool listing in the start-up cache (stored by an
    earlier start-up from the same code and knowledge, after validating it) answers `tools/list`
    from it and loads the rest later (see _Server). Any other start-up loads and validates the
    knowledge now, so a broken file stops it with one line, and registers every tool.
    """
    inputs = _listing_inputs()
    listing = _cached_listing(inputs) if defer else None
    server = _Server(listing, inputs, workers, name="vllm-caching-mcp", version=__version__, instructions=INSTRUCTIONS)
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


# -- start-up ---------------------------------------------------------------------------------------

DEFAULT_CALL_CPU_SECONDS = 20
MAX_CALL_CPU_SECONDS = 3600
MAX_CALL_WORKERS = 64


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, no usage dump: start-up errors are read in service logs.
        self.exit(2, f"{self.prog}: {message}\n")


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


def _default_call_workers() -> int:
    return max(2, min(4, os.cpu_count() or 1))


class CallBudget(NamedTuple):
    cpu_seconds: float
    workers: int


def _call_budget(args: argparse.Namespace) -> CallBudget:
    if not 0 < args.call_cpu_seconds <= MAX_CALL_CPU_SECONDS:  # also false for NaN
        raise StartupError(
            f"--call-cpu-seconds: {args.call_cpu_seconds:g} is not a number of seconds above 0 and at most "
            f"{MAX_CALL_CPU_SECONDS}"
        )
    workers = _default_call_workers() if args.call_workers is None else args.call_workers
    if not 1 <= workers <= MAX_CALL_WORKERS:
        raise StartupError(f"--call-workers: {workers} is not between 1 and {MAX_CALL_WORKERS}")
    return CallBudget(args.call_cpu_seconds, workers)


def _tool_workers(budget: CallBudget, restricted: bool, config_root: Path | None) -> ToolWorkers | None:
    """The worker processes the offline tools run in, under the CPU budget; None where that cannot work."""
    if not tool_workers.SUPPORTED:
        logger.warning("tool calls run in the server process, without a CPU budget: %s cannot stop one", sys.platform)
        return None
    settings = tool_workers.WorkerSettings(
        cpu_seconds=budget.cpu_seconds,
        config_paths_restricted=restricted,
        config_root=str(config_root.resolve()) if config_root is not None else None,
    )
    return ToolWorkers(settings, budget.workers)


def argument_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vllm-caching-mcp", description="MCP server for vLLM tiered KV caching (stdio by default).")
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    add_http_arguments(parser)
    parser.add_argument(
        "--config-dir",
        metavar="DIR",
        help="size_offload reads config.json files (config_path) only under DIR; a relative config_path is then "
        "relative to DIR. Default: anywhere over stdio, nowhere over streamable-http",
    )
    parser.add_argument(
        "--call-cpu-seconds",
        type=float,
        default=DEFAULT_CALL_CPU_SECONDS,
        metavar="SECONDS",
        help="stop an offline tool call that uses more than this much CPU time, with an error for the caller "
        f"(default {DEFAULT_CALL_CPU_SECONDS}). Calls run in worker processes, off the server's event loop",
    )
    parser.add_argument(
        "--call-workers",
        type=int,
        metavar="N",
        help="worker processes for offline tool calls, the most that run at once "
        "(default: the CPU count, between 2 and 4)",
    )
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="load and validate the knowledge and tools, store the start-up cache, and exit (run after installing)",
    )
    parser.add_argument("--version", action="version", version=f"vllm-caching-mcp {__version__}")
    return parser


_HTTP_ONLY = ("auth_token_env", "allowed_host", "allowed_origin", "header_timeout", "idle_timeout", "max_connections")


def main(argv: list[str] | None = None) -> int:
    args = argument_parser().parse_args(argv)
    workers: ToolWorkers | None = None
    try:
        options = http_options(args, dict(os.environ)) if args.transport == "streamable-http" else None
        given = [name for name in _HTTP_ONLY if getattr(args, name) not in (None, [])]
        if options is None and given:
            flags = ", ".join("--" + name.replace("_", "-") for name in given)
            raise StartupError(f"options that apply to streamable-http only: {flags}")
        config_root = _config_root(args.config_dir)
        budget = _call_budget(args)
        if args.prepare:
            print(prepare())
            return 0
        # Over stdio a server reads config files where the user who started it can, unless given a
        # --config-dir; a long-lived shared HTTP server reads none for callers without one.
        restricted = options is not None or config_root is not None
        workers = _tool_workers(budget, restricted, config_root)
        if options is None:
            if workers is not None:
                workers.start_in_background(1)  # while the client initializes; more start as calls need them
            server = build_server(workers=workers)
            if restricted:
                _restrict_config_paths(config_root)
            server.run("stdio")
        else:
            if workers is not None:
                workers.start_in_background(workers.size)
            # A shared server loads everything, and has its workers ready, before it accepts a connection.
            server = build_server(defer=False, workers=workers)
            sock = listen(options.host, options.port)
            _restrict_config_paths(config_root)
            if workers is not None:
                _wait_for(workers)
            serve_http(server, options, sock)
    except StartupError as exc:
        print(f"vllm-caching-mcp: {exc}", file=sys.stderr)
        return 2
    except KnowledgeError as exc:
        print(f"vllm-caching-mcp: the knowledge base is broken: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        if workers is not None:
            workers.close()
    return 0


def _wait_for(workers: ToolWorkers) -> None:
    try:
        workers.wait_started()
    except tool_workers.WorkerStartError as exc:
        raise StartupError(f"cannot start the tool worker processes: {exc}") from None


if __name__ == "__main__":
    sys.exit(main())
