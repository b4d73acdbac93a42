"""The tool registry: each tool is a request model, a result model and one pure function.

Both adapters — the MCP server and the CLI — read this table and nothing else, so adding a
tool is writing its module in `advice/` (with its `SPEC`) and adding it to `TOOLS` here.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from .advice import backend, bugs, check_version, diagnose, image, render, review, sizing
from .advice.common import AdviceError, Result, ToolSpec
from .knowledge import load_knowledge

# One line per tool; each module defines its SPEC next to its function.
TOOLS: tuple[ToolSpec, ...] = (
    check_version.SPEC,
    backend.SPEC,
    sizing.SPEC,
    render.SPEC,
    review.SPEC,
    diagnose.SPEC,
    bugs.SPEC,
    image.SPEC,
)

BY_NAME = {spec.name: spec for spec in TOOLS}


class ToolInputError(ValueError):
    """The arguments do not fit the tool; the message names the field and what it accepts."""


def describe_validation_error(error: ValidationError) -> str:
    """One line per problem, 'field: what is wrong', without pydantic's links and input echoes."""
    parts = []
    for e in error.errors(include_url=False, include_input=False):
        field = ".".join(str(p) for p in e["loc"]) or "arguments"
        parts.append(f"{field}: {e['msg']}")
    return "; ".join(parts)


def run_tool(name: str, arguments: dict[str, Any]) -> Result:
    """Validate ``arguments`` for tool ``name`` and answer; raises ToolInputError on bad input."""
    spec = BY_NAME.get(name)
    if spec is None:
        raise ToolInputError(f"tool: no tool is called {name!r}; the tools are {', '.join(BY_NAME)}")
    try:
        request = spec.request.model_validate(arguments)
    except ValidationError as exc:
        raise ToolInputError(describe_validation_error(exc)) from None
    try:
        return spec.run(request, load_knowledge())
    except AdviceError as exc:
        raise ToolInputError(str(exc)) from None
