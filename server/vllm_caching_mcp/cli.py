"""The command line: one subcommand per tool, generated from the same registry as the MCP server.

    vllm-caching check-version --name --kv-offloading-size --version 0.22.1
    vllm-caching check-version --version 0.22.1 --compare-to 0.33.0 --json
    vllm-caching call check_version '{"name": "OffloadingConnector"}'
    vllm-caching review deploy.yaml serve.sh --format sarif --fail-on warning

Readable text by default, `--json` for the full result; `call` prints exactly the structured
content the MCP tool returns. A text option given as `@FILE` is read from that file (`@-`: standard
input). Bad input exits 2 with one line naming the field; `review` exits 1 when a finding reaches
`--fail-on`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from . import __version__
from .advice.common import ToolSpec
from .advice.review import ReviewResult, exit_code, list_rules, to_sarif
from .knowledge import load_knowledge
from .knowledge_files import KnowledgeError
from .tools import TOOL_NAMES, ToolInputError, all_tools, check_argument_names, run_tool

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


def _is_scalar_list(annotation: Any) -> bool:
    """list[str] or list[Literal[...]] (optionally None): the CLI also takes these comma-separated."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_scalar_list(a) for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) not in (list, tuple, set):
        return False
    items = [a for a in typing.get_args(annotation) if a is not Ellipsis]
    items = [typing.get_args(a)[0] if typing.get_origin(a) is typing.Annotated else a for a in items]
    return all(a is str or typing.get_origin(a) is typing.Literal for a in items)


def _is_bool(annotation: Any) -> bool:
    if annotation is bool:
        return True
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and bool in typing.get_args(annotation)


def _add_tool_parser(subparsers: Any, spec: ToolSpec) -> None:
    command = spec.name.replace("_", "-")
    parser = subparsers.add_parser(command, help=spec.title, description=spec.description)
    for name, field in spec.request.model_fields.items():
        flag = "--" + name.replace("_", "-")
        help_text = (field.description or "").replace("%", "%%")  # argparse formats help with %
        if _is_bool(field.annotation):
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        elif _is_scalar_list(field.annotation):
            parser.add_argument(flag, dest=name, metavar="A,B", help=f"{help_text} (comma-separated, or JSON)")
        elif _is_structured(field.annotation):
            parser.add_argument(flag, dest=name, metavar="JSON", help=f"{help_text} (JSON)")
        else:
            parser.add_argument(flag, dest=name, metavar=name.upper(), help=help_text)
    parser.add_argument("--json", dest="_json", action="store_true", help="print the whole result as JSON")
    parser.set_defaults(_tool=spec)


def _read_text(field: str, path: str) -> str:
    """The contents of ``path`` (``-``: standard input) for a text field; a clear error if unreadable."""
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise ToolInputError(f"{field}: cannot read {path!r} ({reason})") from None


def _arguments(spec: ToolSpec, namespace: argparse.Namespace) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for name, field in spec.request.model_fields.items():
        value = getattr(namespace, name, None)
        if value is None:
            continue
        if isinstance(value, str) and value.startswith("@") and len(value) > 1:
            value = _read_text(name, value[1:])
        if _is_scalar_list(field.annotation) and not value.lstrip().startswith("["):
            value = [item.strip() for item in value.split(",") if item.strip()]
        elif _is_structured(field.annotation):
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
    for spec in all_tools():
        _add_tool_parser(sub, spec)
    call = sub.add_parser("call", help="run a tool with JSON arguments and print its structured result")
    call.add_argument("tool", help="tool name: " + ", ".join(TOOL_NAMES))
    call.add_argument("arguments", nargs="?", default="{}", help="the arguments as one JSON object")
    sub.add_parser("tools", help="list the tools")
    _add_review_parser(sub)
    return parser


def _add_review_parser(sub: Any) -> None:
    review = sub.add_parser(
        "review",
        help="review deployment files for KV-caching mistakes (text, JSON or SARIF; exit 1 at --fail-on)",
        description="Review vllm serve / docker run lines, docker-compose files, Kubernetes manifests, Helm values "
        "and LMCache configs. Exit status: 0 clean, 1 a finding at or above --fail-on, 2 bad input.",
    )
    review.add_argument("files", nargs="*", metavar="FILE", help="files to review; - reads standard input")
    review.add_argument("--version", dest="vllm_version", help="vLLM release when no image tag says it")
    review.add_argument("--host-ram-gib", type=float, help="installed host RAM per node, GiB")
    review.add_argument("--gpu", help="GPU model, e.g. H100 SXM")
    review.add_argument("--p99-context-tokens", type=int, help="99th-percentile context length of real requests")
    review.add_argument("--disable", action="append", default=[], metavar="RULE", help="skip a rule (repeatable)")
    review.add_argument("--format", choices=["text", "json", "sarif"], default="text")
    review.add_argument("--fail-on", choices=["error", "warning", "info", "never"], default="error")
    review.add_argument("--list-rules", action="store_true", help="list the rules and exit")


def _review(args: argparse.Namespace) -> int:
    knowledge = load_knowledge()
    if args.list_rules:
        for rule in list_rules(knowledge):
            releases = rule.versions or "all releases"
            print(f"{rule.id:<48} {rule.severity:<8} {releases:<22} {rule.title}")
        return 0
    if not args.files:
        raise ToolInputError("files: give at least one file to review (or - for standard input)")
    host = {k: v for k, v in (("ram_gib", args.host_ram_gib), ("gpu", args.gpu)) if v is not None}
    arguments: dict[str, Any] = {
        "documents": [{"name": path, "text": _read_text("files", path)} for path in args.files],
        "disabled_rules": args.disable,
    }
    for key, value in (
        ("version", args.vllm_version),
        ("host", host or None),
        ("p99_context_tokens", args.p99_context_tokens),
    ):
        if value is not None:
            arguments[key] = value
    result = run_tool("review_deployment", arguments)
    assert isinstance(result, ReviewResult)
    if args.format == "sarif":
        print(json.dumps(to_sarif(result, knowledge), indent=2))
    elif args.format == "json":
        print(result.model_dump_json(indent=2))
    else:
        print(result.summary())
    return exit_code(result, args.fail_on)


def _glue_option_values(argv: list[str]) -> list[str]:
    """Join each tool option with its value, so ``--name --block-size`` reads as a value, not a flag."""
    spec = next((s for s in all_tools() if argv and argv[0] == s.name.replace("_", "-")), None)
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
            for tool in all_tools():
                print(f"{tool.name:<20} {tool.title}")
            return 0
        if args.command == "review":
            return _review(args)
        if args.command == "call":
            try:
                arguments = json.loads(args.arguments)
            except json.JSONDecodeError as exc:
                raise ToolInputError(f"arguments: not valid JSON ({exc.msg})") from None
            if not isinstance(arguments, dict):
                raise ToolInputError('arguments: must be a JSON object, e.g. \'{"name": "--block-size"}\'')
            check_argument_names(args.tool, arguments)
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
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); stop quietly instead of a traceback at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
