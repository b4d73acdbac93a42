"""A systemd unit that starts vLLM, read as the shell text it amounts to (a unit file, or one a script writes).

systemd runs each ExecStartPre=, ExecStart= and ExecStartPost= line as a command (no shell: `$VAR` and
`${VAR}` come from Environment=), with backslash-newline continuations, after the variables of every
Environment= line. Rewritten line for line, so every finding keeps its place: those lines become the
commands they run, Environment= becomes `export`, and every other line of the unit becomes blank.
"""

from __future__ import annotations

import re

from .bounds import clip
from .model import HygieneIssue, Location

_SERVICE = re.compile(r"^[ \t]*\[Service\][ \t]*$", re.MULTILINE)
_SECTION = re.compile(r"^\s*\[([A-Za-z-]+)\]\s*$")
# The start commands and their prefixes: - (failure ignored), @ (argv[0] given), +, !, !! (privileges), : (no
# variable expansion), | (a shell of the user's; systemd 256).
_EXEC = re.compile(r"^(\s*)(ExecStartPre|ExecStart|ExecStartPost)\s*=\s*([-@+!:|]*)")
_ENVIRONMENT = re.compile(r"^(\s*)Environment\s*=")
_RESTART = re.compile(r"^\s*Restart\s*=\s*(\S*)\s*$")
# systemd.service(5), Restart=: any other value is logged "Failed to parse service restart specifier,
# ignoring" and the setting stays at its default, no.
RESTART_VALUES = frozenset({"no", "always", "on-success", "on-failure", "on-abnormal", "on-abort", "on-watchdog"})


def is_unit(text: str) -> bool:
    """A unit file with a [Service] section that starts a command."""
    return _SERVICE.search(text) is not None and re.search(r"^[ \t]*ExecStart[ \t]*=", text, re.MULTILINE) is not None


# A line of a unit: `Key=value`, a comment, or blank; any other line (a heredoc's terminator, the script's next
# command) ends a unit a script writes.
_UNIT_LINE = re.compile(r"^\s*(?:[A-Za-z][A-Za-z0-9]*\s*=|[#;]|$)")


def unit_as_shell(text: str, file: str) -> tuple[str, list[HygieneIssue]]:
    """The text as shell text of as many lines, each unit in it (the whole file, or a unit a script writes with a
    heredoc) as the commands it starts, and what the units set wrong (a Restart= systemd ignores)."""
    out: list[str] = []
    issues: list[HygieneIssue] = []
    section, continued, in_unit = "", False, False
    for number, line in enumerate(text.splitlines(), 1):
        kept = ""
        header = _SECTION.match(line)
        if not continued and header is None and (not in_unit or _UNIT_LINE.match(line) is None):
            in_unit = False
            out.append(line)  # the script around the unit
            continue
        in_unit = True
        if continued:
            kept = line
        elif header is not None:
            section = header.group(1)
        elif section == "Service" and (start := _EXEC.match(line)) is not None:
            kept = start.group(1) + " " * (len(start.group(0)) - len(start.group(1))) + line[start.end() :]
        elif section == "Service" and (env := _ENVIRONMENT.match(line)) is not None:
            kept = env.group(1) + "export " + line[env.end() :]
        elif section == "Service" and (restart := _RESTART.match(line)) is not None:
            issue = _restart_issue(restart.group(1), Location(file=file, line=number))
            issues += [issue] if issue is not None else []
        continued = bool(kept) and kept.rstrip().endswith("\\")
        out.append(kept)
    return "\n".join(out) + "\n", issues


def _restart_issue(value: str, location: Location) -> HygieneIssue | None:
    if value in RESTART_VALUES:
        return None
    return HygieneIssue(
        check="systemd-restart-invalid",
        text=f"Restart={clip(value, 40)} is no value systemd takes ({', '.join(sorted(RESTART_VALUES))}): it logs "
        '"Failed to parse service restart specifier, ignoring" and keeps Restart=no, so the server is not '
        "restarted when it exits",
        location=location,
    )
