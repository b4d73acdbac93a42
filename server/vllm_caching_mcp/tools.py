"""The tool registry: each tool is a request model, a result model and one pure function.

Both adapters — the MCP server and the CLI — read this table and nothing else, so adding a
tool is writing its module in `advice/` (with its `SPEC`) and naming it in `_MODULES` here.
A tool's module is imported the first time its spec is asked for: the server can start and
list its tools (from the start-up cache) without building eight tools' pydantic models.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

if TYPE_CHECKING:
    from .advice.common import Result, ToolSpec

# advice.common and knowledge (pydantic models, YAML) are imported when a tool is first used, not
# with this module: the server lists its tools without them.

# Tool name -> the module in advice/ that defines its SPEC, in the order the tools are listed.
_MODULES = {
    "check_version": "check_version",
    "choose_backend": "backend",
    "size_offload": "sizing",
    "render_config": "render",
    "review_deployment": "review",
    "diagnose": "diagnose",
    "check_bug_status": "bugs",
    "check_advisories": "advisories_tool",
    "inspect_image": "image",
}

TOOL_NAMES: tuple[str, ...] = tuple(_MODULES)


def tool_spec(name: str) -> ToolSpec:
    """The spec of tool ``name``, importing its module on first use; raises ToolInputError for an unknown name."""
    if name not in _MODULES:
        raise ToolInputError(f"tool: no tool is called {name!r}; the tools are {', '.join(TOOL_NAMES)}")
    return _import_spec(name)


@functools.cache
def _import_spec(name: str) -> ToolSpec:
    from .advice.common import ToolSpec

    spec = importlib.import_module(f"{__package__}.advice.{_MODULES[name]}").SPEC
    if not isinstance(spec, ToolSpec) or spec.name != name:  # pragma: no cover - tests import every tool
        raise LookupError(f"advice.{_MODULES[name]}.SPEC is not the spec of {name}")
    return spec


def all_tools() -> tuple[ToolSpec, ...]:
    """Every tool's spec, in listing order (imports every tool module)."""
    return tuple(tool_spec(name) for name in TOOL_NAMES)


class ToolInputError(ValueError):
    """The arguments do not fit the tool; the message names the field and what it accepts."""


def describe_validation_error(error: ValidationError) -> str:
    """'field: what is wrong' for each problem, on one line, without pydantic's links, version and input echoes."""
    parts = []
    for e in error.errors(include_url=False, include_input=False):
        field = ".".join(str(p) for p in e["loc"]) or "arguments"
        message = " ".join(str(e["msg"]).split())  # a validator's own message may span lines
        for prefix in _PYDANTIC_PREFIXES:
            message = message.removeprefix(prefix)
        parts.append(f"{field}: {message}")
    return "; ".join(parts)


# What pydantic puts before the message of a ValueError or assert raised in a validator.
_PYDANTIC_PREFIXES = ("Value error, ", "Assertion failed, ")
_SHOWN_NAME_LENGTH = 60


def check_argument_names(name: str, arguments: Mapping[str, Any], fields: Collection[str] | None = None) -> None:
    """Raise ToolInputError naming each argument tool ``name`` does not take: none is dropped unsaid.

    ``fields``: the names the tool takes, in order, when known without importing the tool (the
    server reads them from its cached listing); else the request model's."""
    if fields is None:
        fields = list(tool_spec(name).request.model_fields)
    unknown = [key for key in arguments if key not in fields]
    if unknown:
        shown = ", ".join(
            repr(k[:_SHOWN_NAME_LENGTH] + ("..." if len(k) > _SHOWN_NAME_LENGTH else "")) for k in unknown[:5]
        )
        if len(unknown) > 5:
            shown += f" and {len(unknown) - 5} more"
        noun = "argument" if len(unknown) == 1 else "arguments"
        renamed = [f"{old} is now {new}" for old, new in _RENAMED.items() if old in unknown and new in fields]
        hint = f" ({'; '.join(renamed)})" if renamed else ""
        raise ToolInputError(f"arguments: {name} takes no {noun} {shown}{hint}; it takes {', '.join(fields)}")


def json_strings_parsed(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` with a JSON list or object given as a string parsed, as the MCP SDK does before it checks
    a tool's arguments (clients send `["a"]` as a string): for each field that is not a plain ``str``, a string
    holding JSON other than a string or number is replaced by what it parses to. A call that reaches a worker
    without the SDK's check (mcp_server) is so read exactly as one that went through it."""
    fields = tool_spec(name).request.model_fields
    parsed = dict(arguments)
    for key, value in arguments.items():
        field = fields.get(key)
        if field is None or field.annotation is str or not isinstance(value, str):
            continue
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            continue  # left for validation to accept or reject
        if not isinstance(value, str | int | float):
            parsed[key] = value
    return parsed


# Argument names earlier releases of this server took, and what they are called now.
_RENAMED = {"vllm_version": "version"}


def with_defaults(name: str, structured: dict[str, Any]) -> dict[str, Any]:
    """Tool ``name``'s structured content with every field it left out at its default put back
    (`Result.structured` leaves empty optional fields out)."""
    return tool_spec(name).result.model_validate(structured).model_dump(mode="json")


def run_tool(name: str, arguments: dict[str, Any]) -> Result:
    """Validate ``arguments`` for tool ``name`` and answer; raises ToolInputError on bad input.

    The answer and the error text pass through `redact`: both adapters render from them, and a
    server may have echoed a secret into any string of either.
    """
    from .advice.common import AdviceError
    from .knowledge import load_knowledge
    from .redact import redact, redact_value

    spec = tool_spec(name)
    check_argument_names(name, arguments)
    try:
        request = spec.request.model_validate(arguments)
    except ValidationError as exc:
        raise ToolInputError(redact(describe_validation_error(exc))) from None
    try:
        return redact_value(spec.run(request, load_knowledge()))
    except AdviceError as exc:
        raise ToolInputError(redact(str(exc))) from None
