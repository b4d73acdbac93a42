"""A Helm chart's template (templates/deployment.yaml) read as the YAML it renders to, as far as its own text
says: Go template actions are set aside line by line, so every line keeps its number.

A line that holds only actions (`{{- if .Values.x }}`, `{{- include "labels" . | nindent 4 }}`, `{{- end }}`)
becomes empty: both branches of an `if` stay, and what an `include` or `toYaml` adds is not known. An action
that is a whole value (`replicas: {{ .Values.replicaCount }}`, `- --port={{ .Values.port }}` keeps its text)
becomes a quoted string, which the readers treat as a value the files do not hold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_ACTION = re.compile(r"\{\{.*?\}\}")
# What marks a template rather than a file that quotes one: an action that reads the chart's values or
# steers the output.
_TEMPLATE_MARK = re.compile(
    r"\{\{-?\s*(?:\.Values\.|\.Release\.|\.Chart\.|include\s|template\s|if\s|else|end\b|range\s|with\s|define\s|toYaml\s|\$)"
)


def _actions(line: str) -> list[str]:
    return _ACTION.findall(line) if "}}" in line else []  # no end: no action (and no search from every `{{`)


def without_actions(line: str) -> str:
    """The line with its template actions (`{{ ... }}`) taken out."""
    return _ACTION.sub("", line) if "}}" in line else line


def is_chart_template(text: str) -> bool:
    """Whether the text holds Go template actions of a chart (``.Values``, ``include``, ``if``/``end``)."""
    return _TEMPLATE_MARK.search(text) is not None


@dataclass
class Shape:
    """The YAML a template renders to as far as its text says, and which of its lines depend on its values:
    ``conditional``, lines inside an `if`, `with` or `range` (each with that action), and ``filled``, keys whose
    content an action writes (`resources:` then `{{- toYaml .Values.resources | nindent 12 }}`)."""

    text: str
    conditional: dict[int, str] = field(default_factory=dict)
    filled: set[int] = field(default_factory=set)


_OPEN = re.compile(r"\{\{-?\s*(if|with|range)\b")
_END = re.compile(r"\{\{-?\s*end\b")


def rendered_shape(text: str) -> Shape:
    """The template with its actions set aside, line for line, and the lines that depend on its values."""
    lines = text.split("\n")
    shape = Shape("\n".join(_line_shape(line) for line in lines))
    content = [n for n, line in enumerate(lines, 1) if without_actions(line).strip()]
    ends: dict[int, int] = {}  # the line each if/with/range opens on -> the line its end is on
    opened: list[int] = []
    for number, line in enumerate(lines, 1):
        for action in _actions(line):
            if _OPEN.match(action):
                opened.append(number)
            elif _END.match(action) and opened:
                ends[opened.pop()] = number
    # `{{- if .Values.enabled }}` around the whole document: it renders or it does not, no line of it depends
    whole = {start for start, end in ends.items() if content and start < content[0] and end > content[-1]}
    stack: list[tuple[int, str]] = []  # the open blocks that make a line conditional: their end, their action
    for number, line in enumerate(lines, 1):
        while stack and stack[-1][0] <= number:
            stack.pop()
        if stack:
            shape.conditional[number] = f"the template renders it only where `{stack[-1][1]}` holds"
        for action in _actions(line):
            if _OPEN.match(action) and number in ends and number not in whole:
                stack.append((ends[number], action.strip("{}- ")))
    shape.filled = _filled_keys(lines)
    return shape


def _filled_keys(lines: list[str]) -> set[int]:
    """The lines of keys with no value of their own whose next lines, up to the next content, are actions alone."""
    filled = set()
    for i, line in enumerate(lines):
        if not re.fullmatch(r"\s*(- )?[^\s#'\"{][^#'\"]*:\s*(#.*)?", line):
            continue
        indent, actions = len(line) - len(line.lstrip()), 0
        for after in lines[i + 1 :]:
            if not after.strip():
                continue
            if not without_actions(after).strip():
                actions += 1
                continue
            if len(after) - len(after.lstrip()) <= indent and actions:
                filled.add(i + 1)
            break
        else:
            if actions:
                filled.add(i + 1)
    return filled


# `{{ .Values.x | default "2" | quote }}`: the value the template renders where the chart's values set none (the
# last literal default of a chain `.Values.a | default .Values.b | default "x"`).
_DEFAULTED = re.compile(
    r"\{\{-?\s*\.Values\.[\w.]+(?:\s*\|\s*default\s+\.Values\.[\w.]+)*\s*\|\s*default\s+"
    r"(?P<q>\"?)(?P<value>[^\"|{}]*)(?P=q)\s*(?:\|\s*quote\s*)?-?\}\}"
)
_LEAD = re.compile(r"(?:- )*(?:[^\s:'\"#-][^:'\"#]*:\s+(?:- )*)?")  # list dashes, then a key


def _line_shape(line: str) -> str:
    if "{{" not in line or "}}" not in line:
        return line
    if not without_actions(line).strip():
        return ""  # a line of actions alone: a control line, or an include whose output is not known
    body = line.lstrip()
    indent = line[: len(line) - len(body)]
    start = _LEAD.match(body).end()  # type: ignore[union-attr]  # the pattern matches the empty string
    body, start = _quoted_key(body, start)
    value = body[start:]
    defaulted = _DEFAULTED.fullmatch(value.strip())
    if defaulted is not None:
        literal = defaulted["value"].strip()
        return f"{indent}{body[:start]}'{literal}'" if defaulted["q"] else f"{indent}{body[:start]}{literal}"
    if value[:1] in "\"'":
        # inside a quoted string: the action's own quotes would end it early
        value = _DEFAULTED.sub(lambda m: m["value"].strip(), value)
        return indent + body[:start] + _ACTION.sub(lambda m: re.sub(r"[\"']", "", m.group()), value)
    if not value.startswith("{{"):
        return line  # after plain text (`--port={{ .Values.port }}`): valid YAML as it stands
    quoted = value.replace("'", "''")
    return f"{indent}{body[:start]}'{quoted}'"


def _quoted_key(body: str, start: int) -> tuple[str, int]:
    """A key the template fills in (`{{ .Values.labelKey }}: value`) quoted, so YAML reads it as text and not as a
    flow mapping; the body and where its value starts."""
    lead = body[:start]
    dashes = len(lead) - len(lead.lstrip("- "))
    key, colon, rest = lead[dashes:].partition(":")
    if not colon or not key.startswith("{{"):
        return body, start
    quoted = "'" + key.strip().replace("'", "''") + "'"
    return body[:dashes] + quoted + colon + rest + body[start:], dashes + len(quoted) + len(colon) + len(rest)
