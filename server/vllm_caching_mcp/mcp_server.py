"""The MCP server: every tool in `tools.TOOLS` and every knowledge file, over stdio or streamable HTTP.

Built on the official SDK's `MCPServer` (mcp 2.x). Each tool's input schema is the tool's
request model, flattened into typed parameters with their `Field` descriptions and bounds;
its output schema is the result model. A call returns the result as structured content plus
a short text summary. Bad input is a tool error whose message names the field; a tool name
the server does not have is a protocol error. Nothing else lives here.
"""

from __future__ import annotations

import argparse
import inspect
import operator
import sys
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field

from . import __version__
from .advice.common import ToolSpec
from .knowledge import FILES, KnowledgeError, load_knowledge
from .tools import TOOLS, ToolInputError, run_tool

INSTRUCTIONS = (
    "Answers about vLLM tiered KV caching (CPU/NVMe/object-store/peer offload, LMCache, NIXL, Mooncake) "
    "from facts checked against released code. Ask for the user's vLLM version first and pass it to every "
    "tool: flags, defaults and connector support change between releases. Each answer cites its sources "
    "and says which version it assumed."
)


class _Server(MCPServer):
    """MCPServer whose unknown tool names are protocol errors rather than tool results."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if name not in _TOOL_NAMES:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")
        return await super().call_tool(name, arguments, context)


_TOOL_NAMES = {spec.name for spec in TOOLS}


def _tool_function(spec: ToolSpec) -> Any:
    """A function whose signature is the request model's fields, for the SDK to derive the schema from."""

    def tool(**arguments: Any) -> CallToolResult:
        try:
            result = run_tool(spec.name, arguments)
        except ToolInputError as exc:
            raise ToolError(str(exc)) from None
        return CallToolResult(
            content=[TextContent(type="text", text=result.summary())],
            structured_content=result.model_dump(mode="json"),
        )

    parameters = []
    for field_name, field in spec.request.model_fields.items():
        # Annotated[...] built at run time from the model's own type, bounds and description.
        annotation = operator.getitem(
            Annotated, (field.annotation, *field.metadata, Field(description=field.description))
        )
        default = inspect.Parameter.empty if field.is_required() else field.default
        parameters.append(
            inspect.Parameter(field_name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
        )
    tool.__signature__ = inspect.Signature(parameters, return_annotation=spec.result)  # type: ignore[attr-defined]
    tool.__name__ = spec.name
    tool.__doc__ = spec.description
    return tool


def build_server() -> MCPServer:
    """The server with every tool and knowledge resource registered; loads the knowledge once."""
    knowledge = load_knowledge()
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="vllm-caching-mcp", description="MCP server for vLLM tiered KV caching (stdio by default)."
    )
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="streamable-http: address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="streamable-http: port (default 8000)")
    parser.add_argument("--path", default="/mcp", help="streamable-http: endpoint path (default /mcp)")
    parser.add_argument("--version", action="version", version=f"vllm-caching-mcp {__version__}")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port: {args.port} is not a TCP port (1-65535)")
    try:
        server = build_server()
    except KnowledgeError as exc:
        print(f"vllm-caching-mcp: the knowledge base is broken: {exc}", file=sys.stderr)
        return 2
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run(
            "streamable-http", host=args.host, port=args.port, streamable_http_path=args.path, stateless_http=True
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
