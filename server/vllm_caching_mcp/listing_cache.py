"""The tool listing `tools/list` answers with, kept in the start-up cache from one start to the next.

Building the listing imports every tool module and builds each tool's pydantic models and the
SDK's argument models; with the knowledge loaded first, so that a broken file stops start-up, that
is ~430 ms of CPU on top of a bare SDK server's ~570 ms. A stdio start that finds the listing an
earlier start stored from exactly the same code, knowledge and dependencies answers `tools/list`
at 1.05-1.09 x a bare server's CPU time; neither way tried without a disk cache came closer than
1.37 x (benchmarks/README.md, "The start-up cache"). The key is the bytes of this package's
source and of the knowledge files, and the path, size and modification time of the third-party
files below.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from mcp_types import Tool

from . import __version__, startup_cache
from .knowledge_files import FILE_NAMES, knowledge_dir
from .tools import TOOL_NAMES

NAME = "tool-listing"
# Third-party code that shapes the listing or the knowledge it rests on, fingerprinted by file.
_DEPENDENCIES = (
    "mcp.server.mcpserver.server",
    "mcp.server.mcpserver.tools.base",
    "mcp.server.mcpserver.utilities.func_metadata",
    "mcp_types._types",
    "pydantic.version",
    "pydantic.json_schema",
    "pydantic_core",
    "yaml",
    "packaging.version",
)


def inputs() -> list[bytes]:
    """What a cached listing stands for: this package's source, the knowledge files, and the
    dependencies above. A listing stored under these inputs was written by a start-up that loaded
    and validated exactly this knowledge. Raises OSError when one of them cannot be read."""
    package = Path(__file__).resolve().parent
    root = knowledge_dir()
    parts = [f"{__version__} {sys.version}".encode(), str(root).encode()]
    for path in sorted(package.rglob("*.py")):
        parts += [str(path.relative_to(package)).encode(), path.read_bytes()]
    for name in FILE_NAMES:
        parts += [name.encode(), (root / name).read_bytes()]
    for module_name in _DEPENDENCIES:
        spec = importlib.util.find_spec(module_name)
        if spec is None or spec.origin is None:
            raise OSError(f"{module_name} has no source file")
        stat = os.stat(spec.origin)
        parts.append(f"{spec.origin} {stat.st_size} {stat.st_mtime_ns}".encode())
    return parts


def inputs_if_readable() -> list[bytes] | None:
    try:
        return inputs()
    except OSError:  # a file that vanished or cannot be read: this start-up neither reads nor writes the cache
        return None


def read(keyed_by: list[bytes] | None) -> list[Tool] | None:
    """The listing stored under ``keyed_by`` if it lists exactly this server's tools, else None."""
    if keyed_by is None:
        return None
    listing = startup_cache.read(NAME, keyed_by, list)
    if listing is None or [getattr(t, "name", None) for t in listing] != list(TOOL_NAMES):
        return None
    if not all(isinstance(t, Tool) for t in listing):
        return None
    return listing


def write(keyed_by: list[bytes], listing: list[Tool]) -> None:
    startup_cache.write(NAME, keyed_by, listing)
