"""How each tool becomes an MCP tool, and each knowledge file and output schema a resource.

The wiring of the server is mcp_server; this module holds what it registers: a function whose
signature is the request model's fields (for the SDK to derive the input schema from), the listed
form of a tool (compact_schema), the tool error in the words the CLI prints, and the resources.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import json
import operator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.context import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, ResourceLink, TextContent, ToolAnnotations
from mcp_types import Tool as MCPTool
from pydantic import Field, ValidationError

from .compact_schema import compact, outline
from .redact import redact
from .reports.mcp_pictures import links
from .safe_text import one_line, printable
from .tools import ToolInputError, describe_validation_error, run_tool, tool_spec

if TYPE_CHECKING:  # the tools' models are imported on first use
    from .advice.common import ToolSpec


# Who is calling, for the worker queue's fairness: the peer address over HTTP, "stdio" otherwise.
current_caller: contextvars.ContextVar[str] = contextvars.ContextVar("vllm_caching_mcp_caller", default="")


def client_of(context: Context[Any, Any] | None) -> str:
    request = None
    if context is not None:
        with contextlib.suppress(ValueError):  # no request: a call made in-process
            request = context.request_context.request
    peer = getattr(request, "client", None)
    return f"http:{peer.host}" if peer is not None else "stdio"


def as_the_cli_says_it(error: ToolError) -> ToolError:
    """A tool error in the words the CLI prints: one line, 'field: what is wrong'.

    The SDK checks the arguments against the tool's schema before the tool runs and reports a
    failure as pydantic's multi-line text, with its documentation URL and version; and it puts
    "Error executing tool NAME: " before every message. Neither reaches the caller.
    """
    cause = error.__cause__
    if isinstance(cause, ValidationError):
        return ToolError(one_line(redact(describe_validation_error(cause))))
    if isinstance(cause, ToolError):
        return ToolError(one_line(str(cause)))
    return ToolError(one_line(str(error)))


# The listing is answered first; the tools register this long after, off the event loop.
WARM_UP_DELAY_S = 0.2


def tool_function(spec: ToolSpec) -> Any:
    """A function whose signature is the request model's fields, for the SDK to derive the schema from.

    It runs the tool in this process: a server with worker processes sends an offline tool's calls to
    them without the SDK (mcp_server._Server.call_tool), and only a network tool's come here. Those
    block on I/O: the SDK runs a plain function on a worker thread.
    """

    def run(**arguments: Any) -> CallToolResult:
        try:
            result = run_tool(spec.name, arguments)
        except ToolInputError as exc:
            raise ToolError(one_line(str(exc))) from None
        return tool_result(result.summary(), result.structured(), links(spec.name, arguments))

    tool: Any = run

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


def compacted(tool: MCPTool) -> MCPTool:
    """The tool as listed: its input schema in the shorter equivalent form, its output schema outlined (the
    whole one is the resource OUTPUT_SCHEMA_URI; see compact_schema)."""
    uri = OUTPUT_SCHEMA_URI.format(tool=tool.name)
    output = outline(compact(tool.output_schema), uri) if tool.output_schema is not None else None
    # The server refuses an argument a tool does not take (tools.check_argument_names); the schema says so.
    arguments = {**compact(tool.input_schema), "additionalProperties": False}
    return tool.model_copy(update={"input_schema": arguments, "output_schema": output})


def tool_result(summary: str, structured: dict[str, Any], linked: list[ResourceLink]) -> CallToolResult:
    text = TextContent(type="text", text=printable(summary))
    return CallToolResult(content=[text, *linked], structured_content=structured)


def add_tool(server: MCPServer, spec: ToolSpec) -> None:
    server.add_tool(
        tool_function(spec),
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


OUTPUT_SCHEMA_URI = "schema://{tool}/output"


def add_output_schema_resource(server: MCPServer, name: str) -> None:
    @server.resource(
        OUTPUT_SCHEMA_URI.format(tool=name),
        name=f"{name} output schema",
        description=f"The whole JSON Schema of {name}'s structured answers; the listing carries its outline.",
        mime_type="application/schema+json",
    )
    def read() -> str:
        model = tool_spec(name).result
        return json.dumps(compact(model.model_json_schema(mode="serialization")), separators=(",", ":"))


def add_knowledge_resource(server: MCPServer, root: str, file_name: str) -> None:
    path = Path(root) / file_name

    @server.resource(
        f"knowledge://{file_name}",
        name=file_name,
        description=f"The knowledge base file {file_name}: sourced, version-ranged facts (read-only).",
        mime_type="application/yaml",
    )
    def read() -> str:
        return path.read_text(encoding="utf-8")
