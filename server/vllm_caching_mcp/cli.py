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
import errno
import json
import os
import select
import stat
import sys
import time
import types
import typing
from typing import Any

from pydantic import BaseModel

from . import __version__
from .advice.common import ToolSpec
from .advice.deployment import MAX_DOCUMENTS_TEXT, Document
from .advice.review import ReviewResult, exit_code, list_rules, to_sarif
from .knowledge import load_knowledge
from .knowledge_files import KnowledgeError
from .reports.commands import REVIEW_FORMATS, add_plot_options, review_report, write_plot
from .safe_text import json_printable, one_line, printable
from .tools import TOOL_NAMES, ToolInputError, all_tools, check_argument_names, run_tool

_SCALARS = (str, int, float)

# An @FILE is read up to the most text any tool takes in one call (review's documents together).
MAX_FILE_BYTES = MAX_DOCUMENTS_TEXT

_FILE_HELP = (
    "Any text or JSON option takes @FILE: its value is read from FILE (@- reads standard input; at most "
    f"{MAX_FILE_BYTES:,} bytes of UTF-8)."
)


def _option(field: str) -> str:
    return "--" + field.replace("_", "-")


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


def _is_documents(annotation: Any) -> bool:
    """list[Document] (optionally None or Annotated): files the CLI reads as @FILE, one per option."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _is_documents(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_documents(a) for a in typing.get_args(annotation) if a is not type(None))
    return typing.get_origin(annotation) is list and typing.get_args(annotation) == (Document,)


def _is_bool(annotation: Any) -> bool:
    if annotation is bool:
        return True
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and bool in typing.get_args(annotation)


def _add_tool_parser(subparsers: Any, spec: ToolSpec) -> argparse.ArgumentParser:
    command = spec.name.replace("_", "-")
    parser: argparse.ArgumentParser = subparsers.add_parser(
        command, help=spec.title, description=spec.description, epilog=_FILE_HELP
    )
    for name, field in spec.request.model_fields.items():
        flag = _option(name)
        help_text = (field.description or "").replace("%", "%%")  # argparse formats help with %
        if _is_documents(field.annotation):
            parser.add_argument(
                flag,
                dest=name,
                action="append",
                metavar="@FILE",
                help=f"{help_text} (@FILE: that file, repeat for more; or JSON [{{name, text}}])",
            )
        elif _is_bool(field.annotation):
            parser.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None, help=help_text)
        elif _is_scalar_list(field.annotation):
            parser.add_argument(flag, dest=name, metavar="A,B", help=f"{help_text} (comma-separated, or JSON)")
        elif _is_structured(field.annotation):
            parser.add_argument(flag, dest=name, metavar="JSON", help=f"{help_text} (JSON)")
        else:
            parser.add_argument(flag, dest=name, metavar=name.upper(), help=help_text)
    parser.add_argument("--json", dest="_json", action="store_true", help="print the whole result as JSON")
    parser.set_defaults(_tool=spec)
    return parser


def read_file_option(option: str, path: str) -> str:
    """The text of ``path`` (``-``: standard input) given to ``option`` as ``@FILE``, at most
    `MAX_FILE_BYTES`; otherwise one line naming the option and the file."""
    source = "standard input" if path == "-" else repr(path)
    try:
        if path == "-":
            stream = getattr(sys.stdin, "buffer", None)  # a test's StringIO has none, and is text already
            data = stream.read(MAX_FILE_BYTES + 1) if stream else sys.stdin.read(MAX_FILE_BYTES + 1).encode()
        else:
            data = _read_path(path)
    except OSError as exc:
        raise ToolInputError(f"{option}: cannot read {source} ({exc.strerror or type(exc).__name__})") from None
    if len(data) > MAX_FILE_BYTES:
        raise ToolInputError(f"{option}: {source} is larger than {MAX_FILE_BYTES:,} bytes, the most any input takes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolInputError(f"{option}: {source} is not UTF-8 text (byte {exc.start})") from None


# How long a pipe, FIFO or device may take to deliver what it has: a FIFO nobody writes to, or a
# terminal, would otherwise hold the command for ever.
STREAM_READ_SECONDS = 30.0


def _read_path(path: str) -> bytes:
    """At most MAX_FILE_BYTES + 1 bytes of ``path``; a stream (pipe, FIFO, device) within STREAM_READ_SECONDS."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # opening a FIFO without a writer does not wait
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory")
        if stat.S_ISREG(mode):
            os.set_blocking(fd, True)
            with os.fdopen(os.dup(fd), "rb") as file:
                return file.read(MAX_FILE_BYTES + 1)
        return _read_stream(fd, fifo=stat.S_ISFIFO(mode))
    finally:
        os.close(fd)


def _read_stream(fd: int, *, fifo: bool) -> bytes:
    chunks: list[bytes] = []
    size = 0
    deadline = time.monotonic() + STREAM_READ_SECONDS
    while size <= MAX_FILE_BYTES:
        try:
            chunk = os.read(fd, 65536)  # a FIFO no program has open for writing reads as its end at once
        except BlockingIOError:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError(errno.ETIMEDOUT, f"nothing more arrived within {STREAM_READ_SECONDS:g} s") from None
            continue
        if not chunk:
            if fifo and not chunks:
                raise BrokenPipeError(errno.EPIPE, "a named pipe no program is writing to")
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _documents_value(option: str, values: list[str]) -> list[Any]:
    """A documents option's values: each ``@FILE`` is that file, named by its path; any other value
    is JSON, a list of {name, text} or one of them."""
    documents: list[Any] = []
    for value in values:
        if value.startswith("@") and len(value) > 1:
            documents.append({"name": value[1:], "text": read_file_option(option, value[1:])})
            continue
        parsed = _json_value(option, value, None)
        documents.extend(parsed if isinstance(parsed, list) else [parsed])
    return documents


def _json_value(option: str, text: str, path: str | None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        what = f"{path!r} is not valid JSON" if path else "not valid JSON"
        raise ToolInputError(f"{option}: {what} ({exc.msg}, line {exc.lineno})") from None


def _arguments(spec: ToolSpec, namespace: argparse.Namespace) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for name, field in spec.request.model_fields.items():
        value = getattr(namespace, name, None)
        if value is None:
            continue
        option = _option(name)
        if _is_documents(field.annotation):
            arguments[name] = _documents_value(option, value)
            continue
        path = value[1:] if isinstance(value, str) and value.startswith("@") and len(value) > 1 else None
        if path is not None:
            value = read_file_option(option, path)
        if _is_scalar_list(field.annotation) and not value.lstrip().startswith("["):
            value = [item.strip() for item in value.split(",") if item.strip()]
        elif _is_structured(field.annotation):
            value = _json_value(option, value, path)
        arguments[name] = value
    return arguments


def tool_arguments(argv: list[str]) -> tuple[ToolSpec, dict[str, Any]]:
    """The tool a tool subcommand names and the arguments its options give, files read, as `main`
    would pass them; nothing is run. Raises ToolInputError (and SystemExit for argparse's refusals)."""
    args = build_parser().parse_args(_glue_option_values(argv))
    spec: ToolSpec | None = getattr(args, "_tool", None)
    if spec is None:
        raise ToolInputError(f"command: {argv[0] if argv else ''!r} is not a tool subcommand")
    return spec, _arguments(spec, args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vllm-caching",
        description="Verified, version-gated answers about vLLM tiered KV caching.",
        epilog=_FILE_HELP,
    )
    parser.add_argument("--version", action="version", version=f"vllm-caching {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for spec in all_tools():
        tool_parser = _add_tool_parser(sub, spec)
        if spec.name == "size_offload":
            add_plot_options(tool_parser)
    call = sub.add_parser("call", help="run a tool with JSON arguments and print its structured result")
    call.add_argument("tool", help="tool name: " + ", ".join(TOOL_NAMES))
    call.add_argument("arguments", nargs="?", default="{}", help="the arguments as one JSON object")
    tools = sub.add_parser("tools", help="list the tools")
    tools.add_argument(
        "--json",
        action="store_true",
        help="print the whole listing as the MCP server answers tools/list: names, descriptions, input and "
        "output schemas",
    )
    # size_offload's names, one command away (over MCP: the knowledge://models.yaml and hardware.yaml resources)
    sub.add_parser("models", help="list the models size_offload knows by name")
    sub.add_parser("gpus", help="list the GPUs size_offload knows by name")
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
    review.add_argument("--format", choices=["text", "json", "sarif", *REVIEW_FORMATS], default="text")
    review.add_argument("--fail-on", choices=["error", "warning", "info", "never"], default="error")
    review.add_argument(
        "--ignore-unfixed",
        action="store_true",
        help="leave advisory findings that no vLLM release fixes out of --fail-on (they are still reported)",
    )
    review.add_argument("--list-rules", action="store_true", help="list the rules and exit")
    _add_allow_empty_option(review)


def _review(args: argparse.Namespace) -> int:
    knowledge = load_knowledge()
    if args.list_rules:
        for rule in list_rules(knowledge):
            releases = rule.versions or "all releases"
            print(f"{rule.id:<48} {rule.severity:<8} {releases:<22} {rule.title}")
        return 0
    if not args.files and not args.allow_empty:
        raise ToolInputError("files: give at least one file to review (or - for standard input)")
    host = {k: v for k, v in (("ram_gib", args.host_ram_gib), ("gpu", args.gpu)) if v is not None}
    arguments: dict[str, Any] = {
        "documents": [{"name": path, "text": read_file_option("files", path)} for path in args.files],
        "disabled_rules": args.disable,
        "detail": "full",  # CI and SARIF want every finding at its own place
        "allow_empty": args.allow_empty,
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
        print(json_printable(result.model_dump_json(indent=2)))
    elif args.format in REVIEW_FORMATS:
        print(review_report(result, args.format, args.fail_on, args.ignore_unfixed), end="")
    else:
        print(printable(result.summary()))
    return exit_code(result, args.fail_on, ignore_unfixed=args.ignore_unfixed)


# -- files picked by name (CI, pre-commit): nothing to review is a clean review ------------------


def _add_allow_empty_option(review: argparse.ArgumentParser) -> None:
    review.add_argument(
        "--allow-empty",
        action="store_true",
        help="no files, or files none of which holds a vLLM server or LMCache config, are a clean review "
        "(exit 0) instead of bad input (exit 2): for files picked by name, as CI and pre-commit pick them",
    )


def _tool_listing() -> dict[str, Any]:
    """The result of tools/list, exactly as the server sends it."""
    import anyio

    from .mcp_server import build_server

    tools = anyio.run(build_server(defer=False).list_tools)
    return {"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]}


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
        if args.command in ("models", "gpus"):
            from .advice.sizing import known_gpus_text, known_models_text

            listing = known_models_text if args.command == "models" else known_gpus_text
            print(listing(load_knowledge()))
            return 0
        if args.command == "tools":
            if args.json:
                print(json.dumps(_tool_listing(), indent=2, ensure_ascii=False))
                return 0
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
            print(json_printable(json.dumps(result.structured(), indent=2, ensure_ascii=False)))
            return 0
        spec: ToolSpec = args._tool
        result = run_tool(spec.name, _arguments(spec, args))
        if spec.name == "size_offload":
            write_plot(args, result)
        print(json_printable(result.model_dump_json(indent=2)) if args._json else printable(result.summary()))
        return 0
    except ToolInputError as exc:
        print(f"vllm-caching: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KnowledgeError as exc:
        print(f"vllm-caching: the knowledge base is broken: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); stop quietly instead of a traceback at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
