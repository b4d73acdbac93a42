"""The server's command line: its options, checked together, and the parts of start-up they decide.

- `argument_parser` is every option of `vllm-caching-mcp` (the HTTP ones come from http_transport);
- `server_options` checks them and says what is wrong in one line (`StartupError`);
- `ServerOptions.tool_workers` gives the worker processes the offline tools run in, under the CPU
  budget of each call, and `restrict_config_paths` where size_offload may read config files.

serve.main (the command) and mcp_server.main start the server from these; nothing here imports the MCP
SDK, so serve.py can fork the tool workers' zygote before the SDK is imported.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple, NoReturn

from . import __version__, tool_workers
from .http_transport import HttpOptions, StartupError, add_http_arguments, http_options
from .tool_workers import ToolWorkers

logger = logging.getLogger(__name__)

DEFAULT_CALL_CPU_SECONDS = 20
MAX_CALL_CPU_SECONDS = 3600
MAX_CALL_WORKERS = 64

# Options add_http_arguments adds that mean nothing over stdio: given there, they are an error.
_HTTP_ONLY = (
    "auth_token_env",
    "allowed_host",
    "allowed_origin",
    "header_timeout",
    "idle_timeout",
    "body_timeout",
    "min_body_rate",
    "max_connections",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, no usage dump: start-up errors are read in service logs.
        self.exit(2, f"{self.prog}: {message}\n")


def argument_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vllm-caching-mcp", description="MCP server for vLLM tiered KV caching (stdio by default).")
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    add_http_arguments(parser)
    parser.add_argument(
        "--config-dir",
        metavar="DIR",
        help="size_offload reads config.json files (config_path) only under DIR; a relative config_path is then "
        "relative to DIR. Default: anywhere over stdio, nowhere over streamable-http",
    )
    parser.add_argument(
        "--call-cpu-seconds",
        type=float,
        default=DEFAULT_CALL_CPU_SECONDS,
        metavar="SECONDS",
        help="stop an offline tool call that uses more than this much CPU time, with an error for the caller "
        f"(default {DEFAULT_CALL_CPU_SECONDS}). Calls run in worker processes, off the server's event loop",
    )
    parser.add_argument(
        "--call-workers",
        type=int,
        metavar="N",
        help="worker processes for offline tool calls, the most that run at once "
        "(default: the CPU count, between 2 and 4)",
    )
    parser.add_argument(
        "--prepare",
        action="store_true",
        help="load and validate the knowledge and tools, store the start-up cache, and exit (run after installing)",
    )
    parser.add_argument("--version", action="version", version=f"vllm-caching-mcp {__version__}")
    return parser


class CallBudget(NamedTuple):
    cpu_seconds: float
    workers: int


class ServerOptions(NamedTuple):
    http: HttpOptions | None  # None: stdio
    config_root: Path | None
    budget: CallBudget
    prepare: bool

    @property
    def config_paths_restricted(self) -> bool:
        # Over stdio a server reads config files where the user who started it can, unless given a
        # --config-dir; a long-lived shared HTTP server reads none for callers without one.
        return self.http is not None or self.config_root is not None

    def tool_workers(self) -> ToolWorkers | None:
        """The worker processes the offline tools run in, under the CPU budget; None where that cannot work."""
        if not tool_workers.SUPPORTED:
            logger.warning(
                "tool calls run in the server process, without a CPU budget: %s cannot stop one", sys.platform
            )
            return None
        settings = tool_workers.WorkerSettings(
            cpu_seconds=self.budget.cpu_seconds,
            config_paths_restricted=self.config_paths_restricted,
            config_root=str(self.config_root.resolve()) if self.config_root is not None else None,
        )
        return ToolWorkers(settings, self.budget.workers)


def server_options(args: argparse.Namespace, environ: Mapping[str, str]) -> ServerOptions:
    """The parsed command line, checked; raises StartupError naming the first option that cannot work."""
    http = http_options(args, dict(environ)) if args.transport == "streamable-http" else None
    given = [name for name in _HTTP_ONLY if getattr(args, name) not in (None, [])]
    if http is None and given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise StartupError(f"options that apply to streamable-http only: {flags}")
    return ServerOptions(http, _config_root(args.config_dir), _call_budget(args), args.prepare)


def _config_root(config_dir: str | None) -> Path | None:
    if config_dir is None:
        return None
    root = Path(config_dir).expanduser()
    if not root.is_dir():
        raise StartupError(f"--config-dir: {config_dir!r} is not a directory")
    return root


def _default_call_workers() -> int:
    return max(2, min(4, os.cpu_count() or 1))


def _call_budget(args: argparse.Namespace) -> CallBudget:
    if not 0 < args.call_cpu_seconds <= MAX_CALL_CPU_SECONDS:  # also false for NaN
        raise StartupError(
            f"--call-cpu-seconds: {args.call_cpu_seconds:g} is not a number of seconds above 0 and at most "
            f"{MAX_CALL_CPU_SECONDS}"
        )
    workers = _default_call_workers() if args.call_workers is None else args.call_workers
    if not 1 <= workers <= MAX_CALL_WORKERS:
        raise StartupError(f"--call-workers: {workers} is not between 1 and {MAX_CALL_WORKERS}")
    return CallBudget(args.call_cpu_seconds, workers)


def restrict_config_paths(root: Path | None) -> None:
    """size_offload's `config_path` reads files on this host: from here on, only under ``root``, or none."""
    from .advice.model_config import restrict_config_paths as restrict

    restrict(root)
