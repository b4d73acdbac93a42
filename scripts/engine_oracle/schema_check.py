"""What vLLM's own config classes accept, decided by building them: the engine's answer to the readings of
knowledge/engine_schema.yaml that the static reader makes from code (issue 26: "where code reading is
ambiguous, decide it with the engine").

For each config class the schema records at the venv's release, the class is validated the way `vllm serve`
validates a JSON option's value (pydantic's ``TypeAdapter(cls).validate_json``, vllm/engine/arg_utils.py's
``parse_dataclass``): first ``{}`` with the arguments it requires (the control: a class that refuses it cannot
be judged this way), then an
object with a field no release has (accepted: the class ignores unknown fields; refused: it forbids them),
and, for each field whose type is a ``Literal``, one value the schema lists and one it does not. Nothing is
imported from the project; the schema is read as YAML.

    "$SCRATCH/venv/bin/python" scripts/engine_oracle/schema_check.py   # writes tests/data/engine/schema-<vllm>.json

tests/test_engine_schema.py reads the record (no vLLM there) and holds the schema to it.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import importlib
import importlib.metadata
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCHEMA = REPO / "knowledge" / "engine_schema.yaml"
UNKNOWN_FIELD = "no_such_field_engine_oracle"
# Constructor arguments a class requires (its InitVars), given with every object built of it.
REQUIRED = {"SchedulerConfig": {"max_model_len": 8192, "is_encoder_decoder": False}}
BOGUS_VALUE = "not-a-value-engine-oracle"


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def _at(value: Any, version: str) -> Any:
    """A schema attribute at ``version`` (a list of {since, value} changes, or one value)."""
    if isinstance(value, list) and value and isinstance(value[0], dict) and "since" in value[0]:
        found = None
        for change in value:
            if _version_key(change["since"]) <= _version_key(version):
                found = change["value"]
        return found
    return value


def _holds(entry: dict[str, Any], version: str) -> bool:
    key = _version_key(version)
    introduced, removed = entry.get("introduced"), entry.get("removed")
    return (introduced is None or _version_key(introduced) <= key) and (removed is None or key < _version_key(removed))


def _literal_values(annotation: str | None) -> list[Any] | None:
    """The values of a plain ``Literal[...]`` annotation (no union with another type)."""
    if not annotation or not annotation.startswith("Literal[") or "|" in annotation:
        return None
    try:
        node = ast.parse(annotation, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Subscript):
        return None
    items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    values = [i.value for i in items if isinstance(i, ast.Constant)]
    return values if len(values) == len(items) else None


def _validate(adapter: Any, value: dict[str, Any]) -> dict[str, str]:
    try:
        adapter.validate_json(json.dumps(value))
    except Exception as exc:  # what the engine refuses with is the record
        first = str(exc).strip().splitlines()
        return {"outcome": "refused", "exception": type(exc).__name__, "message": " ".join(first[:3])[:300]}
    return {"outcome": "accepted"}


def check(schema: dict[str, Any], version: str) -> dict[str, Any]:
    from pydantic import TypeAdapter

    config = importlib.import_module("vllm.config")
    classes: dict[str, Any] = {}
    for entry in schema["configs"]:
        name = entry["name"]
        if not _holds(entry, version):
            continue
        cls = getattr(config, name, None)
        if cls is None:
            classes[name] = {"importable": False}
            continue
        adapter = TypeAdapter(cls)
        base = REQUIRED.get(name, {})
        unknown_fields = _at(entry.get("unknown_fields"), version)
        record: dict[str, Any] = {"importable": True, "schema_unknown_fields": unknown_fields}
        record["control"] = _validate(adapter, base)
        if record["control"]["outcome"] != "accepted":
            classes[name] = record
            continue
        record["unknown_field"] = _validate(adapter, {**base, UNKNOWN_FIELD: 1})
        literals: dict[str, Any] = {}
        for field in schema["config_fields"]:
            if field.get("config") != name or not _holds(field, version):
                continue
            values = _literal_values(_at(field.get("type"), version))
            if not values:
                continue
            literals[field["name"]] = {
                "listed": values,
                "first_listed": _validate(adapter, {**base, field["name"]: values[0]}),
                "unlisted": _validate(adapter, {**base, field["name"]: BOGUS_VALUE}),
            }
        record["literals"] = literals
        classes[name] = record
    return classes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--out", default=None, help="record file (default tests/data/engine/schema-<vllm>.json)")
    args = parser.parse_args(argv)
    import yaml

    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    version = importlib.metadata.version("vllm")
    schema = yaml.safe_load(SCHEMA.read_text(encoding="utf-8"))
    record = {
        "about": "What vLLM's config classes accept when built as `vllm serve` builds them from JSON; recorded by "
        "scripts/engine_oracle/schema_check.py, read by tests/test_engine_schema.py.",
        "vllm_version": version,
        "provenance": {
            "recorded_at": dt.date.today().isoformat(),
            "method": "pydantic TypeAdapter(cls).validate_json in the release's own venv, no GPU",
            "python": sys.version.split()[0],
        },
        "classes": check(schema, version),
    }
    out = Path(args.out) if args.out else REPO / "tests" / "data" / "engine" / f"schema-{version}.json"
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"{len(record['classes'])} classes in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
