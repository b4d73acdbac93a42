"""The command line: one subcommand per tool, generated from the same registry as the MCP server.

    vllm-caching check-version --name --kv-offloading-size --version 0.22.1
    vllm-caching check-version --version 0.22.1 --compare-to 0.33.0 --json
    vllm-caching call check_version '{"name": "OffloadingConnector"}'

Readable text by default, `--json` for the full result; `call` prints exactly the structured
content the MCP tool returns. Bad input exits 2 with one line naming the field.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
import typing
from typing import Any

from pydantic import BaseModel

from . import __version__
from .advice.common import ToolSpec
from .knowledge import KnowledgeError
from .tools import TOOLS, ToolInputError, run_tool

_SCALARS = (str, int, float)


def _is_structured(annotation: Any) -> bool:
    """Whether a field takes a list, mapping or model, which the CLI reads as JSON."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, dict, set):
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_structured(a) for a in typing.get_args(annotation))
    return False


def _is_bool(annotation: Any) -> bool:
    if annotation is bool:
        return True
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and bool in typing.get_args(annotation)


def _add_tool_parser(subparsers: Any, spec: ToolSpec) -> None:
    command = spec.name.replace("_", "-")
    parser = subparsers.add_parser(command, help=spec.title, description=spec.description)
    for name, field in spec.request.model_fields.items():
        flag = "--" + name.replace("_", "-")
        help_text = field.description or ""
        if _is_bool(field.annotation):
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        elif _is_structured(field.annotation):
            parser.add_argument(flag, dest=name, metavar="JSON", help=f"{help_text} (JSON)")
        else:
            parser.add_argument(flag, dest=name, metavar=name.upper(), help=help_text)
    parser.add_argument("--json", dest="_json", action="store_true", help="print the whole result as JSON")
    parser.set_defaults(_tool=spec)


def _arguments(spec: ToolSpec, namespace: argparse.Namespace) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for name, field in spec.request.model_fields.items():
        value = getattr(namespace, name, None)
        if value is None:
            continue
        if _is_structured(field.annotation):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ToolInputError(f"{name}: not valid JSON ({exc.msg})") from None
        arguments[name] = value
    return arguments


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vllm-caching", description="Verified, version-gated answers about vLLM tiered KV caching."
    )
    parser.add_argument("--version", action="version", version=f"vllm-caching {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for spec in TOOLS:
        _add_tool_parser(sub, spec)
    call = sub.add_parser("call", help="run a tool with JSON arguments and print its structured result")
    call.add_argument("tool", help="tool name: " + ", ".join(s.name for s in TOOLS))
    call.add_argument("arguments", nargs="?", default="{}", help="the arguments as one JSON object")
    sub.add_parser("tools", help="list the tools")
    return parser


def _glue_option_values(argv: list[str]) -> list[str]:
    """Join each tool option with its value, so ``--name --block-size`` reads as a value, not a flag."""
    spec = next((s for s in TOOLS if argv and argv[0] == s.name.replace("_", "-")), None)
    if spec is None:
        return argv
    takes_value = {
        "--" + name.replace("_", "-")
        for name, field in spec.request.model_fields.items()
        if not _is_bool(field.annotation)
    }
    glued: list[str] = []
    tokens = iter(argv)
    for token in tokens:
        value = next(tokens, None) if token in takes_value else None
        glued.append(f"{token}={value}" if value is not None else token)
    return glued


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_glue_option_values(list(sys.argv[1:] if argv is None else argv)))
    try:
        if args.command == "tools":
            for tool in TOOLS:
                print(f"{tool.name:<20} {tool.title}")
            return 0
        if args.command == "call":
            try:
                arguments = json.loads(args.arguments)
            except json.JSONDecodeError as exc:
                raise ToolInputError(f"arguments: not valid JSON ({exc.msg})") from None
            if not isinstance(arguments, dict):
                raise ToolInputError('arguments: must be a JSON object, e.g. \'{"name": "--block-size"}\'')
            result = run_tool(args.tool, arguments)
            print(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False))
            return 0
        spec: ToolSpec = args._tool
        result = run_tool(spec.name, _arguments(spec, args))
        print(result.model_dump_json(indent=2) if args._json else result.summary())
        return 0
    except ToolInputError as exc:
        print(f"vllm-caching: error: {exc}", file=sys.stderr)
        return 2
    except KnowledgeError as exc:
        print(f"vllm-caching: the knowledge base is broken: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
