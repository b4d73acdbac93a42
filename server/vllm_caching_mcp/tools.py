"""The tool registry: each tool is a request model, a result model and one pure function.

Both adapters — the MCP server and the CLI — read this table and nothing else, so adding a
tool is writing its function in `advice/` and adding one `ToolSpec` here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from .advice.check_version import CheckVersionRequest, CheckVersionResult, check_version
from .advice.common import AdviceError, Result
from .knowledge import Knowledge, load_knowledge


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    request: type[BaseModel]
    result: type[Result]
    run: Callable[[Any, Knowledge], Result]
    open_world: bool = False


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="check_version",
        title="Check a vLLM version gate",
        description=(
            "Is a vLLM flag, config field, environment variable, KV connector, metric or feature available, "
            "deprecated, removed or not yet there in a given vLLM release; since when; what to use instead; "
            "its default, accepted values and unit in that release. With `compare_to`, lists every KV-caching "
            "change between two releases (plan an upgrade). Answers come from facts checked against the released "
            "wheels, each with its sources. Ask this before recommending any flag: these change every release."
        ),
        request=CheckVersionRequest,
        result=CheckVersionResult,
        run=check_version,
    ),
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
