"""The listed schemas are shorter and accept exactly what the SDK's own schemas accept."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import jsonschema
import pytest
from mcp.server.mcpserver import MCPServer

from test_mcp_end_to_end import MINIMAL_CALLS
from vllm_caching_mcp.compact_schema import compact
from vllm_caching_mcp.mcp_server import build_server
from vllm_caching_mcp.tools import TOOL_NAMES, run_tool

# Values of every JSON type and a few edges, tried in place of each property.
PROBES: tuple[Any, ...] = (None, "", "x" * 300, 0, -1, 10**12, 1.5, True, [], [None], ["a"], {}, {"a": 1})


def _listings() -> tuple[dict[str, Any], dict[str, Any]]:
    server = build_server(defer=False)
    raw = anyio.run(MCPServer.list_tools, server)  # the SDK's schemas, before compaction
    listed = anyio.run(server.list_tools)
    return {t.name: t for t in raw}, {t.name: t for t in listed}


RAW, LISTED = _listings()


def _instances(schema: dict[str, Any], example: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield example
    yield {}
    for name in schema.get("properties", {}):
        for probe in PROBES:
            yield {**example, name: probe}


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_the_listed_input_schema_accepts_what_the_sdk_schema_accepts(name: str) -> None:
    before, after = RAW[name].input_schema, LISTED[name].input_schema
    jsonschema.Draft202012Validator.check_schema(after)
    old, new = jsonschema.Draft202012Validator(before), jsonschema.Draft202012Validator(after)
    checked = 0
    for instance in _instances(before, MINIMAL_CALLS[name]):
        assert old.is_valid(instance) == new.is_valid(instance), (name, instance)
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_the_listed_output_schema_accepts_what_the_sdk_schema_accepts(name: str) -> None:
    before, after = RAW[name].output_schema, LISTED[name].output_schema
    assert before is not None and after is not None
    answer = run_tool(name, MINIMAL_CALLS[name]).model_dump(mode="json")
    old, new = jsonschema.Draft202012Validator(before), jsonschema.Draft202012Validator(after)
    assert old.is_valid(answer) and new.is_valid(answer), name
    for key in answer:
        for probe in PROBES:
            changed = {**answer, key: probe}
            assert old.is_valid(changed) == new.is_valid(changed), (name, key, probe)


def test_the_listing_is_shorter() -> None:
    def size(schemas: dict[str, Any]) -> int:
        return sum(len(json.dumps(t.input_schema, separators=(",", ":"))) for t in schemas.values())

    assert size(LISTED) < 0.85 * size(RAW)


def test_compact_drops_titles_and_null_defaults_but_keeps_a_property_called_title() -> None:
    schema = {
        "title": "Request",
        "type": "object",
        "properties": {
            "title": {"title": "Title", "type": "string"},
            "size": {"anyOf": [{"type": "integer", "maximum": 9}, {"type": "null"}], "default": None, "title": "S"},
        },
    }
    assert compact(schema) == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "size": {"type": ["integer", "null"], "maximum": 9}},
    }


@pytest.mark.parametrize(
    "option",
    [
        {"$ref": "#/$defs/X"},
        {"type": "string", "enum": ["a", "b"]},
        {"type": "string", "const": "a"},
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    ],
)
def test_compact_leaves_an_optional_it_cannot_merge_exactly(option: dict[str, Any]) -> None:
    schema = {"anyOf": [option, {"type": "null"}], "description": "d"}
    assert compact(schema) == schema
