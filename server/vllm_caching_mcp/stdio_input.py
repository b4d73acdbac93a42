"""The server's standard input over stdio, read so that every request gets an answer.

The SDK validates each line as a JSON-RPC message; one whose JSON carries a lone surrogate escape
(``"\\ud800"``, which no UTF-8 text can hold) fails that validation and is dropped without a reply,
so the client waits for ever. Here each such escape becomes ``\\ufffd`` (the replacement
character, as the SDK already does for bytes that are not UTF-8) before the SDK sees the line:
the request is answered, with the character replaced. Escaped backslashes and valid surrogate
pairs are left as they are.

The SDK, given its own streams, skips pointing file descriptor 0 at the null device while it
serves (so that a child process cannot read the wire); `diverted_stdin` does that here.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio

# Left to right: an escaped backslash (kept), a surrogate pair (kept), or a lone surrogate escape.
_ESCAPES = re.compile(
    r"(?P<backslash>\\\\)|(?P<pair>\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?P<lone>\\u[dD][89a-fA-F][0-9a-fA-F]{2})"
)


def without_lone_surrogates(line: str) -> str:
    """``line`` with each lone surrogate escape replaced by ``\\ufffd``."""
    if "\\u" not in line:
        return line
    return _ESCAPES.sub(lambda m: "\\ufffd" if m.group("lone") else m.group(), line)


class SafeLines:
    """The lines of ``file`` as the SDK's stdio reader iterates them, each `without_lone_surrogates`."""

    def __init__(self, file: anyio.AsyncFile[str]) -> None:
        self._file = file

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while line := await self._file.readline():
            yield without_lone_surrogates(line)


@contextlib.contextmanager
def diverted_stdin() -> Iterator[Any]:
    """The wire's standard input as lines for the SDK; fd 0 reads the null device meanwhile."""
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    text = io.TextIOWrapper(os.fdopen(private, "rb"), encoding="utf-8", errors="replace")
    try:
        yield SafeLines(anyio.wrap_file(text))
    finally:
        with contextlib.suppress(OSError):
            os.dup2(text.buffer.fileno(), 0)
        text.close()
