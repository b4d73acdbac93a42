"""size_offload's pictures over MCP: resource templates the answer links to, no picture in the answer itself.

    picture://size_offload/{kind}/{key}{?p99}   image/svg+xml: kind both, memory or capacity
    ui://size_offload/{key}{?p99}               text/html;profile=mcp-app: a page showing both, for
                                                hosts that render MCP Apps (no script in it)

``key`` is the call's own arguments, as compact JSON in URL-safe base64 without padding: reading a
picture runs the sizing again with them, so any server (another replica, a restart) can answer it
and nothing is kept between calls. ``p99`` (tokens) marks the user's p99 context on the capacity
picture. A size_offload answer carries one resource link (the SVG of both pictures, about 0.25 KB),
and a link to the page only for a client that declares the MCP Apps extension; the pictures
themselves (8 to 20 KB) come only when the client reads them.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import json
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp_types import ResourceLink
from pydantic_core import to_jsonable_python

PICTURE_URI = "picture://size_offload/{kind}/{key}{?p99}"
UI_URI = "ui://size_offload/{key}{?p99}"
SVG_MIME = "image/svg+xml"
MCP_APP_MIME = "text/html;profile=mcp-app"
# A key is the arguments of one call: the tool's own limits keep them far below this.
MAX_KEY_CHARS = 16_384
_KINDS = ("both", "memory", "capacity")
# The MCP Apps extension (SEP-1865) as a client declares it in its capabilities.
APPS_EXTENSION = "io.modelcontextprotocol/ui"
_shows_apps: contextvars.ContextVar[bool] = contextvars.ContextVar("vllm_caching_mcp_shows_apps", default=False)


def note_client(context: Any) -> contextvars.Token[bool]:
    """Remember, for the call under way, whether its client renders MCP Apps (the server's call_tool
    sets this; `links` reads it)."""
    capabilities = None
    try:
        capabilities = context.client_capabilities if context is not None else None
    except (ValueError, AttributeError):  # a call made in-process has no session
        capabilities = None
    extensions = getattr(capabilities, "extensions", None) or {}
    return _shows_apps.set(APPS_EXTENSION in extensions)


def picture_key(arguments: dict[str, Any]) -> str:
    """The key of a call's pictures: its arguments less those at their defaults (the SDK passes every one)."""
    from ..tools import tool_spec

    fields = tool_spec("size_offload").request.model_fields
    plain = to_jsonable_python(arguments)  # the SDK hands nested arguments over as models
    defaults = {k: to_jsonable_python(f.get_default(call_default_factory=True)) for k, f in fields.items()}
    given = {k: v for k, v in plain.items() if k not in defaults or defaults[k] != v}
    text = json.dumps(given, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _arguments(key: str) -> dict[str, Any]:
    if len(key) > MAX_KEY_CHARS:
        raise ResourceError(f"key: longer than {MAX_KEY_CHARS:,} characters; no size_offload call gives such a key")
    try:
        decoded = base64.urlsafe_b64decode(key + "=" * (-len(key) % 4)).decode()
        arguments = json.loads(decoded)
    except (binascii.Error, ValueError):
        raise ResourceError("key: not a picture key (the link in a size_offload answer gives one)") from None
    if not isinstance(arguments, dict):
        raise ResourceError("key: not a picture key (the link in a size_offload answer gives one)")
    return arguments


def _p99(p99: str | None) -> int | None:
    if p99 is None or p99 == "":
        return None
    if not p99.isdigit() or int(p99) < 1:
        raise ResourceError(f"p99: {p99[:40]!r} is not a positive number of tokens")
    return int(p99)


def links(tool: str, arguments: dict[str, Any]) -> list[ResourceLink]:
    """The resource links a ``tool`` answer carries: size_offload's two pictures, nothing for other tools."""
    if tool != "size_offload":
        return []
    key = picture_key(arguments)
    linked = [ResourceLink(uri=f"picture://size_offload/both/{key}", name="sizing picture", mime_type=SVG_MIME)]
    if _shows_apps.get():
        linked.append(ResourceLink(uri=f"ui://size_offload/{key}", name="sizing picture page", mime_type=MCP_APP_MIME))
    return linked


async def _sizing(key: str) -> Any:
    from ..advice.sizing import SizeOffloadResult
    from ..tools import ToolInputError, run_tool

    arguments = _arguments(key)
    try:
        result = await anyio.to_thread.run_sync(run_tool, "size_offload", arguments)
    except ToolInputError as exc:
        raise ResourceError(str(exc)) from None
    assert isinstance(result, SizeOffloadResult)
    return result


def add_picture_resources(server: MCPServer) -> None:
    """Register the two templates on ``server``; the drawing code loads on the first read, not at start-up."""

    @server.resource(
        PICTURE_URI,
        name="size_offload picture",
        description="A size_offload answer as SVG: kind memory (GPU and host budget), capacity (sessions by "
        "context length) or both; key: as the answer's link gives it; p99: tokens to mark",
        mime_type=SVG_MIME,
    )
    async def picture(kind: str, key: str, p99: str | None = None) -> str:
        if kind not in _KINDS:
            raise ResourceError(f"kind: {kind[:40]!r} is not one of {', '.join(_KINDS)}")
        from .sizing_pictures import plot_svg

        mark = _p99(p99)
        return plot_svg(await _sizing(key), kind, mark)

    @server.resource(
        UI_URI,
        name="size_offload picture page",
        description="The size_offload pictures as a page for hosts that show MCP Apps",
        mime_type=MCP_APP_MIME,
    )
    async def page(key: str, p99: str | None = None) -> str:
        from .sizing_pictures import picture_page

        mark = _p99(p99)
        return picture_page(await _sizing(key), mark)
