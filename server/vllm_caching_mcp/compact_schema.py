"""The tool listing's JSON schemas, written shorter without changing what they accept.

An agent carries every tool's input schema in its context for the whole session, so each byte
of the listing is paid on every turn. pydantic's schemas repeat themselves: a ``title`` that
restates each property's name, ``anyOf: [X, {"type": "null"}]`` for every optional field, and
``"default": null`` beside it, and an integer's ``exclusiveMinimum: 0`` says ``minimum: 1`` longer.
`compact` rewrites those into their shorter equivalents; the set of
documents a schema accepts is the same before and after (tests/test_compact_schema.py checks
that with the jsonschema validator over every tool's schemas and examples).

One change is not exact, on purpose: guard bounds are left out of the listing. A guard bound only
refuses absurd input (a name of 300 characters, 2**31 tokens, 5,000 layers); no value an agent
would choose comes near it, so stating it costs every turn and informs no choice. The rule:

- ``maxLength`` is always a guard: what limits a string's value is its enum or pattern, which stay;
- ``maxItems`` of 50 or more is a guard (a list of at most 3 or 8 things is a limit to know);
- ``maximum`` / ``exclusiveMaximum`` of 1000 or more is a guard; smaller ones (a ratio's 1, 64 GPUs
  per node, a 120-second deadline) bound the value an agent picks and stay, as do all minimums.

The request models keep every bound and refuse a value past it with the field's one-line error; the
listed schema accepts a superset of the SDK's only by these bounds (tests/test_compact_schema.py).
"""

from __future__ import annotations

from typing import Any

# Keys whose value is a map from names to schemas (a property called "title" is not a title).
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_GUARD_MAX_ITEMS = 50
_GUARD_MAXIMUM = 1000
_SIMPLE_TYPES = frozenset({"string", "integer", "number", "boolean", "array", "object"})
# Keywords that apply to instances of one JSON type only (or are annotations), so a null still passes
# them when {"type": T, ...} becomes {"type": [T, "null"], ...}; enum, const, not, allOf and the like
# apply to every instance and keep the anyOf.
_TYPE_ONLY_KEYWORDS = frozenset(
    {
        "type", "description", "format", "examples", "default",
        "pattern", "minLength", "maxLength",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains",
        "properties", "additionalProperties", "required", "minProperties", "maxProperties", "patternProperties",
    }
)  # fmt: skip


def compact(schema: Any) -> Any:
    """``schema`` with redundant titles, null-defaults and guard bounds dropped and optional types merged."""
    if isinstance(schema, list):
        return [compact(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: compact(sub) for name, sub in value.items()}
        elif (
            (key == "title" and isinstance(value, str))
            or (key == "default" and value is None)
            or is_guard_bound(key, value)
        ):
            continue
        else:
            out[key] = compact(value)
    return _merge_nullable(_inclusive_integer_bounds(out))


def _inclusive_integer_bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """For integers only, ``exclusiveMinimum: n`` as the shorter ``minimum: n + 1`` (the same set)."""
    kind = schema.get("type")
    if kind not in ("integer", ["integer", "null"], ["null", "integer"]):
        return schema
    low = schema.get("exclusiveMinimum")
    if isinstance(low, bool) or not isinstance(low, int) or "minimum" in schema:
        return schema
    out = {key: value for key, value in schema.items() if key != "exclusiveMinimum"}
    out["minimum"] = low + 1
    return out


def is_guard_bound(keyword: str, value: Any) -> bool:
    """Whether ``keyword: value`` in a schema only refuses absurd input (see the module's rule)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if keyword == "maxLength":
        return True
    if keyword == "maxItems":
        return value >= _GUARD_MAX_ITEMS
    return keyword in ("maximum", "exclusiveMaximum") and value >= _GUARD_MAXIMUM


def _merge_nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``{"anyOf": [{"type": T, ...}, {"type": "null"}], ...}`` as ``{"type": [T, "null"], ...}``."""
    options = schema.get("anyOf")
    if not isinstance(options, list) or len(options) != 2 or {"type": "null"} not in options:
        return schema
    other = options[0] if options[1] == {"type": "null"} else options[1]
    kind = other.get("type") if isinstance(other, dict) else None
    if not isinstance(kind, str) or kind not in _SIMPLE_TYPES or not set(other) <= _TYPE_ONLY_KEYWORDS:
        return schema  # a $ref, an enum, a nested anyOf: leave it as written
    if set(other) & (set(schema) - {"anyOf"}):
        return schema  # the same keyword outside and inside: merging would change one of them
    merged = {key: value for key, value in schema.items() if key != "anyOf"}
    return {**merged, **other, "type": [kind, "null"]}


def outline(schema: dict[str, Any], full_schema_uri: str) -> dict[str, Any]:
    """An output schema as the listing carries it: its properties one level deep, prose dropped.

    An agent keeps every tool's listed schemas in its context for the whole session, and the output
    schemas were three quarters of the listing (80 KB of 104). The outline keeps each top-level
    property's type (with its enum and bounds), an array's item type and which properties are
    required; a nested object is ``{"type": "object"}``. It accepts every answer the whole schema
    accepts (a client that validates against it never throws an answer away), and names where the
    whole schema is (``$comment``): the server's ``schema://TOOL/output`` resource.
    """
    properties = {name: _outlined(sub, 1) for name, sub in schema.get("properties", {}).items()}
    out: dict[str, Any] = {"$comment": f"the whole schema: {full_schema_uri}", "type": "object"}
    out["properties"] = properties
    if schema.get("required"):
        out["required"] = list(schema["required"])
    return out


_PROSE = ("description", "title", "examples", "default", "$comment")


def _outlined(schema: Any, depth: int) -> Any:
    """``schema`` with every nested object past ``depth`` levels reduced to ``{"type": "object"}``."""
    if not isinstance(schema, dict):
        return schema
    if "$ref" in schema:
        return {"type": "object"}  # every $ref of a pydantic output schema is a model: an object
    if "anyOf" in schema:
        return _union([_outlined(option, depth) for option in schema["anyOf"]])
    out = {key: value for key, value in schema.items() if key not in _PROSE}
    if "items" in out:
        out["items"] = _outlined(out["items"], depth + 1) if depth < 2 else {}
    if "properties" in out:
        return {"type": "object"}
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _outlined(out["additionalProperties"], depth + 1) if depth < 2 else {}
    return out


def _union(options: list[Any]) -> dict[str, Any]:
    """Options that are bare types as one ``type`` list; anything richer stays an ``anyOf``."""
    if all(isinstance(o, dict) and set(o) == {"type"} for o in options):
        kinds: list[str] = []
        for option in options:
            for kind in option["type"] if isinstance(option["type"], list) else [option["type"]]:
                if kind not in kinds:
                    kinds.append(kind)
        return {"type": kinds[0] if len(kinds) == 1 else kinds}
    return {"anyOf": options}
