"""The MCP server: every tool in `tools.TOOL_NAMES` and every knowledge file, over stdio or streamable HTTP.

Built on the official SDK's `MCPServer` (mcp 2.x). Each tool's input schema is the tool's
request model, flattened into typed parameters with their `Field` descriptions and bounds;
its output schema is the result model. A call returns the result as structured content plus
a short text summary. Bad input is a tool error whose message is the line the CLI prints,
naming the field; a tool name the server does not have is a protocol error. The offline tools
run in worker processes, each call under a CPU budget (tool_workers). This module is the wiring; not
here: how a tool and a resource are registered (mcp_tools), the command line and what its options
decide (server_options), the streamable HTTP transport and its guards (http_transport), the tool
listing kept between starts (listing_cache).
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, InputRequiredResult
from mcp_types import Tool as MCPTool

from . import __version__, listing_cache, startup_cache, tool_workers
from .http_transport import (
    HEALTH_PATH,
    MIN_TOKEN_LENGTH,
    HttpOptions,
    StartupError,
    http_app,
    http_options,
    listen,
    serve_http,
)
from .knowledge_files import FILE_NAMES, KnowledgeError, knowledge_dir
from .mcp_tools import (
    WARM_UP_DELAY_S,
    add_knowledge_resource,
    add_output_schema_resource,
    add_tool,
    as_the_cli_says_it,
    client_of,
    compacted,
    current_caller,
    tool_result,
)
from .prompts import add_prompts
from .redact import redact, redact_value
from .reports.mcp_pictures import add_picture_resources, links, note_client
from .safe_text import one_line
from .server_options import ServerOptions, argument_parser, restrict_config_paths, server_options
from .tool_workers import ToolWorkers
from .tools import TOOL_NAMES, ToolInputError, check_argument_names, tool_spec

# The HTTP transport lives in http_transport and the command line in server_options; these names
# are part of this module's interface too.
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

    With ``workers``, the offline tools run in those worker processes under their CPU budget, and
    their calls go there without the SDK's check (see _offline_fields): such a tool is never
    registered here. Without (a server built in-process, as tests and the CLI's comparisons do),
    every tool runs on a thread.
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
                add_tool(self, tool_spec(name))
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
            # With workers the offline tools run there, loaded by their zygote, and are not registered
            # here; a network tool registers at its first call, and the knowledge loads for it: ~16 MiB
            # and ~0.5 s of CPU less at every start-up, in a process tree that already holds them once.
            if self.workers is None:
                self.load()
        except Exception:  # a tool that cannot load reports it on its own call
            logger.exception("loading the tools in the background failed")

    async def run_stdio_async(self) -> None:
        """The SDK's stdio loop, reading requests through `stdio_input` so that each gets an answer."""
        from mcp.server.stdio import stdio_server

        from .stdio_input import diverted_stdin

        with diverted_stdin() as lines:
            async with stdio_server(stdin=lines) as (read_stream, write_stream):
                server = self._lowlevel_server
                await server.run(read_stream, write_stream, server.create_initialization_options())

    async def list_tools(self) -> list[MCPTool]:
        if self._listed is None:
            self.load()
            self._listed = [compacted(tool) for tool in await super().list_tools()]
            if self._listing_inputs is not None:
                listing_cache.write(self._listing_inputs, self._listed)
        elif self._warm_up is None and len(self._registered) < len(TOOL_NAMES):
            self._warm_up = threading.Timer(WARM_UP_DELAY_S, self._warm)
            self._warm_up.daemon = True
            self._warm_up.start()
        return list(self._listed)

    def _offline_fields(self, name: str) -> list[str] | None:
        """The arguments offline tool ``name`` takes, in order, when its calls go straight to a worker; else None.

        Such a call is not checked by the SDK: its check needs the tool's request model and the SDK's
        argument model built from it (~0.5 s of CPU and ~11 MiB for all tools, in a process that never
        runs a tool), and the worker checks the arguments against the request model anyway (run_tool),
        reporting a failure in the same one line. With the cached listing, the names come from it.
        """
        if self.workers is None:
            return None
        if self._listed is None:
            spec = tool_spec(name)  # loaded already (load): no listing without it
            return None if spec.open_world else list(spec.request.model_fields)
        tool = next(tool for tool in self._listed if tool.name == name)
        if tool.annotations is None or tool.annotations.open_world_hint is not False:
            return None
        return list(tool.input_schema.get("properties", {}))

    async def _in_worker(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        assert self.workers is not None
        try:
            answer = await self.workers.call(name, arguments, current_caller.get())
        except (ToolInputError, tool_workers.CallStopped, tool_workers.CallBusy) as exc:
            raise ToolError(one_line(redact(str(exc)))) from None
        except MCPError:
            raise
        except Exception as exc:  # as the SDK reports a tool's crash: logged, and the caller told only that
            raise UnexpectedToolError(f"Error executing tool {name}") from exc
        # The worker holds none of the secrets this process registered (see redact).
        return tool_result(redact(answer.summary), redact_value(answer.structured), links(name, arguments))

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if name not in TOOL_NAMES:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")
        fields = self._offline_fields(name)
        if fields is None:
            self.register(name)
        caller = current_caller.set(client_of(context))
        apps = note_client(context)
        try:
            # The SDK would drop an argument the tool does not take.
            check_argument_names(name, arguments, fields)
            if fields is not None:
                return await self._in_worker(name, arguments)
            return await super().call_tool(name, arguments, context)
        except ToolInputError as exc:
            raise ToolError(one_line(str(exc))) from None
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            raise as_the_cli_says_it(exc) from exc.__cause__
        finally:
            current_caller.reset(caller)
            apps.var.reset(apps)


def build_server(*, defer: bool = True, workers: ToolWorkers | None = None) -> _Server:
    """The server with every tool and knowledge resource.

    With ``defer``, a start-up that finds its tool listing in the start-up cache (stored by an
    earlier start-up from the same code and knowledge, after validating it) answers `tools/list`
    from it and loads the rest later (see _Server). Any other start-up loads and validates the
    knowledge now, so a broken file stops it with one line, and registers every tool.
    """
    inputs = listing_cache.inputs_if_readable()
    listing = listing_cache.read(inputs) if defer else None
    server = _Server(listing, inputs, workers, name="vllm-caching-mcp", version=__version__, instructions=INSTRUCTIONS)
    if server._listed is None:
        server.load()
    root = str(knowledge_dir())
    for file_name in FILE_NAMES:
        add_knowledge_resource(server, root, file_name)
    for name in TOOL_NAMES:
        add_output_schema_resource(server, name)
    add_prompts(server)
    add_picture_resources(server)  # size_offload's pictures, which its answers link to
    return server


def prepare() -> str:
    """Load and validate everything and store the start-up cache: what the first start-up would do."""
    import anyio

    server = build_server(defer=False)
    anyio.run(server.list_tools)
    if os.environ.get(startup_cache.DISABLE_ENV):
        return (
            f"knowledge and tools are valid; the start-up cache is switched off ({startup_cache.DISABLE_ENV}), "
            "so every start-up loads them in full"
        )
    directory = startup_cache.cache_dir()
    if directory is None or listing_cache.read(server._listing_inputs) is None:
        return "knowledge and tools are valid; no writable cache directory, so every start-up loads them in full"
    return f"knowledge and tools are valid; start-up cache written to {directory}"


# -- start-up ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None, workers: ToolWorkers | None = None) -> int:
    """Serve; ``workers``: already made from the same options, their zygote started (see serve.py)."""
    args = argument_parser().parse_args(argv)
    try:
        options = server_options(args, os.environ)
        if options.prepare:
            print(prepare())
            return 0
        workers = workers or options.tool_workers()
        if options.http is None:
            _serve_stdio(options, workers)
        else:
            _serve_http(options, options.http, workers)
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


def _serve_stdio(options: ServerOptions, workers: ToolWorkers | None) -> None:
    if workers is not None:
        workers.start_in_background(1)  # while the client initializes; more start as calls need them
    server = build_server(workers=workers)
    if options.config_paths_restricted:
        restrict_config_paths(options.config_root)
    server.run("stdio")


def _serve_http(options: ServerOptions, http: HttpOptions, workers: ToolWorkers | None) -> None:
    if workers is not None:
        workers.start_in_background(workers.size)
    # A shared server loads everything, and has its workers ready, before it accepts a connection.
    server = build_server(defer=False, workers=workers)
    sock = listen(http.host, http.port)
    restrict_config_paths(options.config_root)
    from .registry import restrict_registries

    restrict_registries()  # callers name registries: not the services beside this server
    if workers is not None:
        try:
            workers.wait_started()
        except tool_workers.WorkerStartError as exc:
            raise StartupError(f"cannot start the tool worker processes: {exc}") from None
    serve_http(server, http, sock)


if __name__ == "__main__":
    sys.exit(main())
