"""Check the option -> config field table the refused-value review uses against EngineArgs.add_cli_args.

    python scripts/check_option_fields.py --src-dir SRC_DIR

advice/flag_values.py judges an option's value by the config field behind it: `--<field with dashes>`
of CacheConfig, SchedulerConfig or ParallelConfig (the classes knowledge/engine_schema.yaml reads),
except the options in its RENAMED table (``add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])``)
and in OTHER_CLASS (a name those classes have that another class's kwargs build). This script reads
every ``add_argument(..., **<x>_kwargs["field"])`` call of vllm/engine/arg_utils.py (``<x>_kwargs =
get_kwargs(<Class>)``) in each extracted release of releases.yaml and reports any option the tables
get wrong. Exit status 1 when one does. Run it when a release is added.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from vllm_caching_mcp.advice.flag_values import CLASSES, OTHER_CLASS, RENAMED
from vllm_caching_mcp.knowledge import load_knowledge

ARG_UTILS = "vllm/engine/arg_utils.py"


def option_fields(tree: ast.Module) -> dict[str, tuple[str, str, int]]:
    """Each long option built from get_kwargs(<Class>)[field]: (class, field, line)."""
    kwargs_of: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Name) and call.func.id == "get_kwargs" and call.args:
                target, cls = node.targets[0], call.args[0]
                if isinstance(target, ast.Name) and isinstance(cls, ast.Name):
                    kwargs_of[target.id] = cls.id
    found: dict[str, tuple[str, str, int]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "add_argument":
            continue
        options = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        for spread in _spreads(node):
            for option in options:
                if option.startswith("--") and spread[0] in kwargs_of:
                    found[option] = (kwargs_of[spread[0]], spread[1], node.lineno)
    return found


def _spreads(call: ast.Call) -> list[tuple[str, str]]:
    """``**x_kwargs["field"]``, directly or inside ``**{**x_kwargs["field"], ...}``."""
    found = []
    for keyword in call.keywords:
        if keyword.arg is not None:
            continue
        values = keyword.value.values if isinstance(keyword.value, ast.Dict) else [keyword.value]
        for value in values:
            if (
                isinstance(value, ast.Subscript)
                and isinstance(value.value, ast.Name)
                and isinstance(value.slice, ast.Constant)
            ):
                found.append((value.value.id, str(value.slice.value)))
    return found


def problems(release: str, options: dict[str, tuple[str, str, int]], fields: set[tuple[str, str]]) -> list[str]:
    out = []
    for option, (cls, field, line) in sorted(options.items()):
        at = f"{release}:{ARG_UTILS}:{line}"
        if cls in CLASSES and option[2:].replace("-", "_") != field and RENAMED.get(option) != (cls, field):
            out.append(f"{at}: {option} sets {cls}.{field}; add it to RENAMED")
    for cls_field in sorted(fields):
        option = "--" + cls_field[1].replace("_", "-")
        built = options.get(option)
        if built is not None and built[:2] != cls_field and option not in OTHER_CLASS and option not in RENAMED:
            out.append(f"{release}: {option} is {built[0]}.{built[1]}, not {cls_field[0]}; add it to OTHER_CLASS")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src-dir", type=Path, required=True, help="extracted wheels as vllm-X.Y.Z/vllm/...")
    args = parser.parse_args()
    knowledge = load_knowledge()
    schema = knowledge.engine_schema
    failures: list[str] = []
    for version in knowledge.release_versions():
        path = args.src_dir / f"vllm-{version}" / ARG_UTILS
        if not path.is_file():
            failures.append(f"{version}: {path} is missing")
            continue
        fields = {
            (e.config, e.name) for e in schema.config_fields if e.config in CLASSES and e.name and e.holds_at(version)
        }
        failures += problems(str(version), option_fields(ast.parse(path.read_text(encoding="utf-8"))), fields)
    print("\n".join(failures) or "the option table agrees with add_cli_args in every release")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
