"""The tool listing's JSON schemas, written shorter without changing what they accept.

An agent carries every tool's input schema in its context for the whole session, so each byte
of the listing is paid on every turn. pydantic's schemas repeat themselves: a ``title`` that
restates each property's name, ``anyOf: [X, {"type": "null"}]`` for every optional field, and
``"default": null`` beside it. `compact` rewrites those into their shorter equivalents; the set of
documents a schema accepts is the same before and after (tests/test_compact_schema.py checks
that with the jsonschema validator over every tool's schemas and examples).
"""

from __future__ import annotations

from typing import Any

# Keys whose value is a map from names to schemas (a property called "title" is not a title).
_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
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
    """``schema`` with redundant titles and null-defaults dropped and optional types merged."""
    if isinstance(schema, list):
        return [compact(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: compact(sub) for name, sub in value.items()}
        elif (key == "title" and isinstance(value, str)) or (key == "default" and value is None):
            continue
        else:
            out[key] = compact(value)
    return _merge_nullable(out)


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
