"""The listed schemas are shorter and accept what the SDK's own schemas accept.

They accept more only where compact_schema left out a guard bound (a cap on absurd input), and the
request model still refuses such input with its one-line error naming the field.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import anyio
import jsonschema
import pytest
from jsonschema.exceptions import ValidationError as SchemaError
from mcp.server.mcpserver import MCPServer
from pydantic import ValidationError

from test_mcp_end_to_end import MINIMAL_CALLS
from vllm_caching_mcp.compact_schema import compact, is_guard_bound
from vllm_caching_mcp.mcp_server import build_server
from vllm_caching_mcp.tools import TOOL_NAMES, ToolInputError, run_tool, tool_spec

# Values of every JSON type and a few edges, tried in place of each property.
PROBES: tuple[Any, ...] = (None, "", "x" * 300, "x" * 1000, 0, -1, 10**12, 1.5, True, [], [None], ["a"], {}, {"a": 1})


def _listings() -> tuple[dict[str, Any], dict[str, Any]]:
    server = build_server(defer=False)
    raw = anyio.run(MCPServer.list_tools, server)  # the SDK's schemas, before compaction
    listed = anyio.run(server.list_tools)
    return {t.name: t for t in raw}, {t.name: t for t in listed}


RAW, LISTED = _listings()


def _instances(schema: dict[str, Any], example: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The example, {}, and each probe in place of each property, one level into objects the example gives."""
    yield example
    yield {}
    for name in schema.get("properties", {}):
        for probe in PROBES:
            yield {**example, name: probe}
        nested = example.get(name)
        if isinstance(nested, dict):
            for inner in _instances({"properties": _nested_properties(schema, name)}, nested):
                yield {**example, name: inner}


def _nested_properties(schema: dict[str, Any], name: str) -> dict[str, Any]:
    ref = schema["properties"][name].get("$ref", "")
    return dict(schema.get("$defs", {}).get(ref.rsplit("/", 1)[-1], {}).get("properties", {}))


def _only_guard_bounds(error: SchemaError) -> bool:
    """Whether ``error`` fails only by a guard bound: in an anyOf, some one option fails only so."""
    if error.validator in ("anyOf", "oneOf"):
        by_option: dict[Any, list[SchemaError]] = defaultdict(list)
        for sub in error.context or ():
            by_option[sub.relative_schema_path[0]].append(sub)
        return any(all(_only_guard_bounds(sub) for sub in subs) for subs in by_option.values())
    return is_guard_bound(str(error.validator), error.validator_value)


def _refused_only_by_guard_bounds(validator: jsonschema.Draft202012Validator, instance: Any) -> bool:
    errors = list(validator.iter_errors(instance))
    return bool(errors) and all(_only_guard_bounds(error) for error in errors)


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_the_listed_input_schema_accepts_what_the_sdk_schema_accepts_and_more_only_past_guard_bounds(
    name: str,
) -> None:
    before, after = RAW[name].input_schema, LISTED[name].input_schema
    jsonschema.Draft202012Validator.check_schema(after)
    old, new = jsonschema.Draft202012Validator(before), jsonschema.Draft202012Validator(after)
    checked = 0
    for instance in _instances(before, MINIMAL_CALLS[name]):
        if old.is_valid(instance):
            assert new.is_valid(instance), (name, instance)
        elif new.is_valid(instance):
            assert _refused_only_by_guard_bounds(old, instance), (name, instance)
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_what_only_the_listed_schema_accepts_the_request_model_refuses_naming_the_field(name: str) -> None:
    """Input past a dropped guard bound is still refused, by the request model's one-line error."""
    before, after = RAW[name].input_schema, LISTED[name].input_schema
    old, new = jsonschema.Draft202012Validator(before), jsonschema.Draft202012Validator(after)
    model = tool_spec(name).request
    past_guards = 0
    for instance in _instances(before, MINIMAL_CALLS[name]):
        if not new.is_valid(instance) or old.is_valid(instance):
            continue
        past_guards += 1
        with pytest.raises(ValidationError):
            model.model_validate(instance)
        with pytest.raises(ToolInputError) as refused:
            run_tool(name, instance)  # refused before the tool runs: no network, no knowledge load
        message = str(refused.value)
        changed = next(key for key in instance if instance[key] != MINIMAL_CALLS[name].get(key, object()))
        assert message.startswith(changed) and "\n" not in message, (name, instance, message)
    assert past_guards > 0, name  # every tool has a guard bound the probes cross ("x" * 300, 10**12)


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_the_listed_input_schema_refuses_what_the_request_model_refuses_unless_the_sdk_schema_accepts_it(
    name: str,
) -> None:
    """Compaction adds no way past the model: a refused instance the listing accepts, the SDK's did too
    (a rule between fields no JSON schema states) or refused only by a guard bound."""
    before, after = RAW[name].input_schema, LISTED[name].input_schema
    old, new = jsonschema.Draft202012Validator(before), jsonschema.Draft202012Validator(after)
    model = tool_spec(name).request
    for instance in _instances(before, MINIMAL_CALLS[name]):
        if not new.is_valid(instance):
            continue
        try:
            model.model_validate(instance)
        except ValidationError:
            assert old.is_valid(instance) or _refused_only_by_guard_bounds(old, instance), (name, instance)


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_the_listed_output_outline_accepts_everything_the_sdk_schema_accepts(name: str) -> None:
    """The outline may accept more (a nested object is only an object), never less: a client validating
    against it never throws a real answer away; at the top level it refuses what the whole schema refuses
    by type (a number for an object, null for a required list)."""
    before, after = RAW[name].output_schema, LISTED[name].output_schema
    assert before is not None and after is not None
    answer = run_tool(name, MINIMAL_CALLS[name]).model_dump(mode="json")
    old, new = jsonschema.Draft202012Validator(before), jsonschema.Draft202012Validator(after)
    assert old.is_valid(answer) and new.is_valid(answer), name
    for key in answer:
        for probe in PROBES:
            changed = {**answer, key: probe}
            if old.is_valid(changed):
                assert new.is_valid(changed), (name, key, probe)
            elif not isinstance(probe, dict | list) and probe is not None:
                assert not new.is_valid(changed), (name, key, probe)  # a scalar where the answer has another type


def test_the_whole_tools_list_stays_under_40_kb() -> None:
    """tools/list was 99.8 KB (~25k tokens), 75 KB of it output schemas; the outlines bring it under 40 KB."""
    listed = {"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in LISTED.values()]}
    assert _size(listed) <= 40 * 1024, _size(listed)


def _size(value: Any) -> int:
    """Bytes as benchmarks/bench_listing_size.py counts them: compact JSON, UTF-8."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


# The SDK's input schemas + descriptions of the nine tools before issue 17 shortened the descriptions
# (benchmarks/bench_listing_size.py's "SDK input+description" column, commit c64a307): the listing
# may carry half. The SDK's own figure shrank with the descriptions, so it is no longer the yardstick.
SDK_LISTING_BEFORE_ISSUE_17 = {
    "check_version": 2_790, "choose_backend": 4_346, "size_offload": 12_056,
    "render_config": 8_511, "review_deployment": 3_172, "diagnose": 3_477,
    "check_bug_status": 2_732, "check_advisories": 4_678, "inspect_image": 2_014,
}  # fmt: skip


def test_the_listing_carries_at_most_half_of_what_the_sdk_listed_before_issue_17() -> None:
    listed = sum(
        _size(LISTED[name].input_schema) + len((LISTED[name].description or "").encode())
        for name in SDK_LISTING_BEFORE_ISSUE_17
    )
    assert listed <= 0.5 * sum(SDK_LISTING_BEFORE_ISSUE_17.values())


def test_the_listed_schemas_are_shorter_than_the_sdks_with_the_same_descriptions() -> None:
    def size(schemas: dict[str, Any]) -> int:
        return sum(_size(t.input_schema) for t in schemas.values())

    assert size(LISTED) < 0.75 * size(RAW)


@pytest.mark.parametrize(
    ("keyword", "value", "guard"),
    [
        ("maxLength", 40, True),
        ("maxItems", 50, True),
        ("maxItems", 8, False),
        ("maximum", 2**31, True),
        ("exclusiveMaximum", 1000, True),
        ("maximum", 1, False),
        ("maximum", 72, False),
        ("minimum", 10**9, False),
        ("maximum", True, False),
    ],
)
def test_guard_bounds_are_the_caps_no_chosen_value_comes_near(keyword: str, value: Any, guard: bool) -> None:
    assert is_guard_bound(keyword, value) is guard


def test_compact_writes_an_integer_exclusive_minimum_inclusively_but_not_a_number_s() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "exclusiveMinimum": 0}}}
    ratio = {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
    assert compact(schema) == {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}
    assert compact(ratio) == ratio


def test_compact_drops_titles_and_null_defaults_but_keeps_a_property_called_title() -> None:
    schema = {
        "title": "Request",
        "type": "object",
        "properties": {
            "title": {"title": "Title", "type": "string"},
            "size": {"anyOf": [{"type": "integer", "maximum": 9}, {"type": "null"}], "default": None, "title": "S"},
            "name": {"type": "string", "maxLength": 200},
        },
    }
    assert compact(schema) == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "size": {"type": ["integer", "null"], "maximum": 9},
            "name": {"type": "string"},
        },
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
