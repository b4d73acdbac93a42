"""Text that reaches a terminal or an agent without acting on it: control characters made visible.

Registry labels, GitHub titles and logins, file names and a deployment's own flag text are other
people's bytes. Printed as they are, ESC sequences clear the screen, move the cursor up and erase
the line above (an error line vanishes), set the window title, write the clipboard (OSC 52) or
plant links (OSC 8); a CR or a newline in a file name forges lines that pre-commit prints as the
review's. Every text output goes through one of these on its way out:

- `printable`: a whole multi-line text (a summary, a rendered file): every C0 and C1 control, DEL
  and the Unicode bidirectional controls as escapes (``\\x1b``, ``\\u202e``); newlines and tabs stay.
- `one_line`: one line of it (or an error message): the same, and line breaks escaped too.
- `join_lines`: a summary's lines, each `one_line`, joined by newlines.
- `json_printable`: JSON text: the characters JSON may carry raw but terminals act on (C1, DEL,
  bidi, U+2028/U+2029) as ``\\uXXXX`` escapes; they only occur inside strings, so it stays the same JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_IN_TEXT = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\u2028\u2029]")
_IN_LINE = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f{_BIDI}\u2028\u2029]")
_IN_JSON = re.compile(f"[\x7f-\x9f{_BIDI}\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    return _IN_TEXT.sub(_escape, text)


def one_line(text: str) -> str:
    return _IN_LINE.sub(_escape, text)


def join_lines(lines: Iterable[str]) -> str:
    return "\n".join(one_line(line) for line in lines)


def json_printable(text: str) -> str:
    return _IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
