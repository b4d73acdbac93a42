"""A shell interpreter for what deployments write: tokens with their lines, variables and the
expansions the shell does, and the run of a script that finds the vLLM launches in it."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from ..common import AdviceError
from .bounds import MAX_ARGUMENTS, MAX_EXPANDED_CHARS, MAX_VALUE_CHARS, clip
from .hygiene import install_issues, kill_issue, pulled_image_issue, ray_dashboard_issue, substituted_variable_issue
from .installs import pip_installs, python_selected
from .launch import (
    RAY_CLUSTER,
    WRAPPERS,
    Launch,
    docker_run,
    entrypoint_of,
    may_start_vllm,
    runner_image,
    script_index,
    vllm_args,
    wrapped_vllm_args,
)
from .model import Document, EnvUse, HygieneIssue, Location, ReleaseClaim


@dataclass(slots=True)
class Token:
    text: str
    line: int
    separator: bool = False
    # The word's pieces as (text, quoted, expansion): an expansion ($X, ${X:-d}, $((…)), $(…)) is
    # worked out when its command runs, with the variables set by then; quoted pieces are not split.
    parts: list[tuple[str, bool, bool]] = field(default_factory=list)


# Characters with no meaning to the shell ('#' in a word); '$' and '`' start expansions.
_PLAIN_RUN = re.compile(r"""[^ \t\r\n'"\\;|&$`()]+""")


_PARAMETER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")


_REDIRECTION = re.compile(r"^\d*(?:>>?|<<?|>&|<&|&>)(.*)$", re.S)


# Words that start a compound command; the command proper follows them.
_KEYWORDS = {"do", "then", "else", "elif", "if", "while", "until", "{", "(", "!"}


def _expansion_end(text: str, i: int) -> int:
    """Where the expansion that starts at ``text[i]`` ('$' or '`') ends; ``i + 1`` for a lone '$'."""
    n = len(text)
    if text[i] == "`":
        end = text.find("`", i + 1)
        return n if end < 0 else end + 1
    if i + 1 >= n:
        return n
    opening = text[i + 1]
    if opening in "({":
        closing = ")" if opening == "(" else "}"
        depth, j = 0, i + 1
        while j < n:
            c = text[j]
            if c == "\\":
                j += 2
                continue
            if c == "'" and opening == "(":
                j = text.find("'", j + 1)
                j = n if j < 0 else j + 1
                continue
            depth += (c == opening) - (c == closing)
            if depth == 0:
                return j + 1
            j += 1
        return n
    m = _PARAMETER.match(text, i + 1)
    return m.end() if m else i + 1


# What a backslash escape means inside $'…' (bash's ANSI-C quoting), besides \x, \u, \U, \c and octal.
_ANSI_C_ESCAPES = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "'": "'", '"': '"', "?": "?",
}  # fmt: skip


_ANSI_C_NUMERIC = re.compile(r"x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})")


def _ansi_c_quoted(text: str, i: int) -> tuple[str, int]:
    """The value of the $'…' that starts at ``text[i]`` (the '$'), and the index after its closing quote."""
    out: list[str] = []
    j, n = i + 2, len(text)
    while j < n and text[j] != "'":
        c = text[j]
        if c != "\\" or j + 1 >= n:
            out.append(c)
            j += 1
            continue
        escape = text[j + 1]
        if escape in _ANSI_C_ESCAPES:
            out.append(_ANSI_C_ESCAPES[escape])
            j += 2
        elif escape == "c" and j + 2 < n:  # \cX: control-X
            out.append(chr(ord(text[j + 2]) & 0x1F))
            j += 3
        elif m := _ANSI_C_NUMERIC.match(text, j + 1):
            digits = next(g for g in m.groups() if g is not None)
            code = int(digits, 8 if m.group(4) else 16)
            out.append(chr(code) if code <= 0x10FFFF else "\ufffd")
            j = m.end()
        else:  # an escape bash does not know stays as written
            out.append(text[j : j + 2])
            j += 2
    return "".join(out), min(j + 1, n)


def tokenize_shell(text: str, first_line: int = 1) -> list[Token]:
    """Split shell text into words with the line each starts on; quotes (ANSI-C ``$'…'`` too),
    backslash-newline continuations, comments and redirections (``2>&1``) are handled; ``;``,
    ``&&``, ``||``, ``|``, ``)`` and newlines separate commands, and ``(`` is a word of its own, so
    a subshell's commands are read as commands. Expansions are kept whole in ``Token.parts``."""
    tokens: list[Token] = []
    i, line, n = 0, first_line, len(text)
    word: list[tuple[str, bool, bool]] | None = None
    word_line = line

    def finish() -> None:
        nonlocal word
        if word is not None:
            tokens.append(Token("".join(p[0] for p in word), word_line, parts=word))
            word = None

    def expansion(start: int, quoted: bool) -> int:
        """Add the expansion at ``start`` to the word; the index after it."""
        nonlocal line
        assert word is not None
        end = _expansion_end(text, start)
        unit = text[start:end]
        word.append((unit, quoted, unit != "$"))
        line += unit.count("\n")
        return end

    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":
            i, line = i + 2, line + 1
            continue
        if c in " \t\r":
            finish()
            i += 1
            continue
        if c == "&" and word and word[-1][0].endswith((">", "<")) and not word[-1][1]:
            word.append((c, False, False))  # 2>&1: a redirection, not a background '&'
            i += 1
            continue
        if c == "\n" or c in ";|&)":
            finish()
            double = c in "&|" and text.startswith(c, i + 1)  # `&&` and `||` are lists, not a background `&`
            if not tokens or not tokens[-1].separator:
                tokens.append(Token(c * (1 + double), line, separator=True))
            line += c == "\n"
            i += 1 + double
            continue
        if c == "(":  # a subshell (or an array's opening): its own word, read as a keyword
            finish()
            tokens.append(Token(c, line, parts=[(c, False, False)]))
            i += 1
            continue
        if c == "#" and word is None:
            while i < n and text[i] != "\n":
                i += 1
            continue
        if word is None:
            word, word_line = [], line
        if c == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            chunk = text[i + 1 : end]
            word.append((chunk, True, False))
            line += chunk.count("\n")
            i = end + 1
        elif c == '"':
            i += 1
            quoted: list[str] = []
            word.append(("", True, False))  # "" is a word of its own, though empty
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n and text[i + 1] in '"\\$`\n':
                    if text[i + 1] != "\n":
                        quoted.append(text[i + 1])
                    else:
                        line += 1
                    i += 2
                    continue
                if text[i] in "$`":
                    word.append(("".join(quoted), True, False))
                    quoted = []
                    i = expansion(i, True)
                    continue
                line += text[i] == "\n"
                quoted.append(text[i])
                i += 1
            word.append(("".join(quoted), True, False))
            i += 1
        elif c == "\\" and i + 1 < n:
            word.append((text[i + 1], True, False))
            i += 2
        elif c == "$" and text.startswith("$'", i):
            value, end = _ansi_c_quoted(text, i)
            word.append((value, True, False))
            line += text.count("\n", i, end)
            i = end
        elif c == "$" and text.startswith('$"', i):
            i += 1  # $"…" is "…" translated to the locale: the same words here
        elif c in "$`":
            i = expansion(i, False)
        else:
            run = _PLAIN_RUN.match(text, i)  # the word's ordinary characters, at once
            word.append((run.group() if run else c, False, False))
            i = run.end() if run else i + 1
    finish()
    return tokens


def split_commands(tokens: list[Token]) -> list[list[Token]]:
    return [command for command, _ in split_commands_ended(tokens)]


def starts_ray(script: str) -> bool:
    """Whether a script's commands (not its comments) start or join a Ray cluster (launch.RAY_CLUSTER)."""
    return RAY_CLUSTER.search(" ".join(t.text for t in tokenize_shell(script) if not t.separator)) is not None


def argv_starts_ray(texts: list[str]) -> bool:
    """Whether a container's command words start or join a Ray cluster: the words before a `bash -c` script, and
    that script's commands (its comments do not count)."""
    at = script_index(texts)
    before = texts if at is None else texts[:at]
    return RAY_CLUSTER.search(" ".join(before)) is not None or (at is not None and starts_ray(texts[at]))


def split_commands_ended(tokens: list[Token]) -> list[tuple[list[Token], str]]:
    """Each command and the separator that ends it (`&` runs it in the background; '' at the end)."""
    commands: list[tuple[list[Token], str]] = []
    current: list[Token] = []
    for t in tokens:
        if not t.separator:
            current.append(t)
        elif current:
            commands.append((current, t.text))
            current = []
    if current:
        commands.append((current, ""))
    return commands


_ASSIGNED = re.compile(r"(?:^|[\s;&|(]|export\s+|ENV\s+|ARG\s+)([A-Za-z_][A-Za-z0-9_]*)=", re.M)
_BRACE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?\+|[{}]|\n")


def conditional_lines(text: str) -> dict[int, str]:
    """The lines of each `${NAME:+words}` whose NAME the text never assigns: the words are passed only where
    whoever starts it sets NAME. One pass over the braces: each `}` closes the innermost open one, and a line
    takes the innermost alternate open on it."""
    assigned = set(_ASSIGNED.findall(text))
    found: dict[int, str] = {}
    line = 1
    braces: list[bool] = []  # whether each open brace is an alternate's
    alternates: list[str] = []  # the names of the open alternates, innermost last

    def mark(name: str) -> None:
        found.setdefault(line, f"it is passed only where {name} is set (`${{{name}:+...}}`)")

    for m in _BRACE.finditer(text):
        if m.group() == "\n":
            line += 1
            if alternates:
                mark(alternates[-1])
        elif m.group() == "}":
            if braces and braces.pop():
                alternates.pop()
        elif m.group() == "{" or m[1] in assigned:
            braces.append(False)
        else:
            braces.append(True)
            alternates.append(m[1])
            mark(m[1])
    return found


ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)


# A reference left as written because its value is not known: ${X}, $X, $(X) (Kubernetes or a
# command), $((…)), `…`. Words are searched for these to say why their value is not known.
REFERENCE = re.compile(r"\$\(\(.*?\)\)|\$\([^)]*\)|\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\$[0-9@*#?!$-]|`[^`]*`")


class _Field(NamedTuple):
    """A word after expansion, and why its value is not known when it is not."""

    text: str
    unresolved: str | None = None


# `${A:+...}` inside `${B:+...}`: deeper than this no script nests them, and each level is a call.
MAX_NESTED_ALTERNATES = 32


class Shell:
    """Shell variables as a script sets them, command by command, and the expansions that use them.

    What the files do not settle (a variable they never set, a command's output, a script
    argument) stays as written and is recorded in ``unresolved`` with why, never guessed."""

    def __init__(self, inherited: dict[str, str] | None = None, unresolved: dict[str, str] | None = None) -> None:
        self.values: dict[str, str] = dict(inherited or {})
        self.unresolved: dict[str, str] = dict(unresolved or {})  # reference as written → why
        self.expanded = 0  # characters the expansions of the current command produced
        self.nested = 0  # `${A:+${B:+...}}` being worked out inside each other

    def reference(self, unit: str, why: str) -> tuple[str, str]:
        self.unresolved.setdefault(unit, why)
        return unit, self.unresolved[unit]

    def unit(self, unit: str) -> tuple[str, str | None]:
        """The value of one expansion, or the expansion as written and why it is not known."""
        if unit in self.unresolved:
            return unit, self.unresolved[unit]
        if unit.startswith("$((") and unit.endswith("))"):
            return self.arithmetic(unit)
        if unit.startswith(("$(", "`")):
            return self.reference(unit, f"{clip(unit, 60)} is the output of a command, which the files do not show")
        if unit.startswith("${"):
            return self.braced(unit)
        return self.parameter(unit[1:], unit)

    def parameter(self, name: str, unit: str) -> tuple[str, str | None]:
        if name in self.values:
            return self.values[name], None
        if not (name[0].isalpha() or name[0] == "_"):
            return self.reference(unit, f"{unit} is an argument of the script, which the files do not show")
        return self.reference(unit, f"{name} is not set in the files")

    def braced(self, unit: str) -> tuple[str, str | None]:
        m = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(?:(:?[-=+?])(.*))?\}", unit, re.S)
        if m is None:
            return self.reference(unit, f"{clip(unit, 60)} uses a form of expansion this reader does not follow")
        name, operator, word = m[1], m[2], m[3]
        if operator is None:
            return self.parameter(name, unit)
        value = self.values.get(name)
        empty = value is None or (operator.startswith(":") and value == "")
        kind = operator[-1]
        if kind in "-=":
            if not empty:
                return value or "", None
            default, why = self.string(word)
            if kind == "=" and why is None:
                self.values[name] = default
            return default, why
        if kind == "+":
            if name not in self.values and name.isidentifier():
                # set by whoever starts the script, or not at all: its words are read as given, and the review
                # judges them as passed only where NAME is set (conditional_lines)
                if self.nested >= MAX_NESTED_ALTERNATES:
                    return self.reference(unit, f"expansions nested more than {MAX_NESTED_ALTERNATES} deep")
                self.nested += 1
                try:
                    inner, _ = self.string(word)
                finally:
                    self.nested -= 1
                return inner, None
            return self.string(word) if not empty else ("", None)
        if empty:  # ${X:?message}: the script stops when X is not set
            return self.reference(unit, f"{name} is not set in the files (the script stops without it)")
        return value or "", None

    def string(self, text: str) -> tuple[str, str | None]:
        """A word inside an expansion (a default), with its own expansions and quotes."""
        out: list[str] = []
        why: str | None = None
        i = 0
        while i < len(text):
            c = text[i]
            if c in "$`":
                end = _expansion_end(text, i)
                value, reason = self.unit(text[i:end]) if end > i + 1 else ("$", None)
                out.append(value)
                why = why or reason
                i = end
            elif c == "'":
                end = text.find("'", i + 1)
                end = len(text) if end < 0 else end
                out.append(text[i + 1 : end])
                i = end + 1
            elif c == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 2
            else:
                out.append(c if c != '"' else "")
                i += 1
        return self.bounded("".join(out), why)

    def arithmetic(self, unit: str) -> tuple[str, str | None]:
        expression, why = self.string(unit[3:-2])
        if why is not None:
            return self.reference(unit, why)
        names = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expression)
        for name in sorted(set(names), key=len, reverse=True):
            value = self.values.get(name)
            if value is None or not re.fullmatch(r"\s*-?\d+\s*", value):
                return self.reference(unit, f"{name} in {clip(unit, 60)} is not set in the files to a number")
            expression = re.sub(rf"\b{name}\b", f"({value.strip()})", expression)
        result = _integer_arithmetic(expression)
        if result is None:
            return self.reference(unit, f"{clip(unit, 60)} is arithmetic this reader does not follow")
        return str(result), None

    def bounded(self, value: str, why: str | None) -> tuple[str, str | None]:
        if len(value) > MAX_VALUE_CHARS:
            return value[:0], f"a value longer than {MAX_VALUE_CHARS:,} characters, which no deployment sets"
        return value, why

    def expand(self, token: Token, split: bool = True) -> list[_Field]:
        """The words one shell word becomes: expansions worked out, unquoted ones split on blanks and
        dropped when empty, as the shell does; ``split=False`` for an assignment's value."""
        fields: list[_Field] = []
        current: list[str] = []
        started = False  # quoted text, even empty, makes a word
        why: str | None = None

        def push() -> None:
            nonlocal current, started, why
            fields.append(_Field("".join(current), why))
            current, started, why = [], False, None

        for text, quoted, expansion in token.parts or [(token.text, False, False)]:
            if not expansion:
                current.append(text)
                started = started or quoted or bool(text)
                continue
            value, reason = self.unit(text)
            self.expanded += len(value)
            if self.expanded > MAX_EXPANDED_CHARS:
                raise AdviceError("text", f"line {token.line}: expands to more than {MAX_EXPANDED_CHARS:,} characters")
            if reason is not None or quoted or not split:
                current.append(value)
                started, why = True, why or reason
                continue
            pieces = value.split()
            if value[:1].isspace() and started:
                push()
            for n, piece in enumerate(pieces):
                if n:
                    push()
                current.append(piece)
                started = True
            if pieces and value[-1:].isspace():
                push()
        if started:
            push()
        return fields

    def word(self, token: Token) -> _Field:
        """One word without splitting: an assignment's value, a `bash -c` script."""
        found = self.expand(token, split=False)
        return found[0] if found else _Field("")


def _integer_arithmetic(expression: str) -> int | None:
    """``$((…))`` over whole numbers (+ - * / % and parentheses); None for anything else or a result
    past ±2^63, as the shell's own integers are."""
    if not re.fullmatch(r"[\d\s+\-*/%()]*", expression) or "**" in expression or len(expression) > 1_000:
        return None
    try:
        tree = ast.parse(expression.replace("/", "//"), mode="eval")
    except (SyntaxError, RecursionError, MemoryError):
        return None

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = value(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Add):
                result = left + right
            elif isinstance(node.op, ast.Sub):
                result = left - right
            elif isinstance(node.op, ast.Mult):
                result = left * right
            elif isinstance(node.op, (ast.FloorDiv, ast.Mod)) and right != 0:
                quotient = abs(left) // abs(right) * (1 if (left >= 0) == (right >= 0) else -1)  # toward zero
                result = quotient if isinstance(node.op, ast.FloorDiv) else left - right * quotient
            else:
                raise ValueError("not integer arithmetic")
            if abs(result) >= 2**63:
                raise ValueError("past the shell's integers")
            return result
        raise ValueError("not integer arithmetic")

    try:
        return value(tree.body)
    except (ValueError, RecursionError):
        return None


def _without_redirections(command: list[Token]) -> list[Token]:
    """The command's words without ``> log``, ``2>&1``, ``< input``: the shell's, not the program's."""
    kept: list[Token] = []
    skip = False
    for token in command:
        if skip:
            skip = False
            continue
        unquoted = not token.parts or not token.parts[0][1]
        m = _REDIRECTION.match(token.text) if unquoted else None
        if m is None:
            kept.append(token)
        elif not m[1]:
            skip = True  # the target is the next word
    return kept


def script_install_issues(script: str, where: Location) -> list[HygieneIssue]:
    """What the installs of a `sh -c` script that starts another server (an LMCache server) do wrong: its
    commands read as the shell reads them, as the vLLM launch scripts are."""
    found: list[HygieneIssue] = []
    for command in split_commands(tokenize_shell(script, where.line or 1)):
        command = _without_redirections(command)
        if any(t.text in ("install", "add") for t in command):
            at = Location(file=where.file, line=command[0].line, path=where.path)
            found += install_issues([(t.text, _redirects(t)) for t in command], at)
    return found


def _redirects(token: Token) -> bool:
    """Whether the shell takes a ``>`` or ``<`` inside this word as a redirection (it is not quoted)."""
    return any(not quoted and not expansion and ("<" in text or ">" in text) for text, quoted, expansion in token.parts)


_DECLARATIONS = {"export", "declare", "typeset", "local", "readonly"}


class ShellRun:
    """One shell text read command by command: its variables, what it exports, what it starts."""

    def __init__(
        self, doc: Document, path: str | None, shell: Shell, vllm_options: frozenset[str] = frozenset()
    ) -> None:
        self.doc = doc
        self.vllm_options = vllm_options  # every option a covered release takes: a launcher's own is read by them
        self.path = path
        self.shell = shell
        # Exported variables are kept as (name, value, token, why unknown) until a launch takes them:
        # a script of many exports and other commands then builds no EnvUse for each command.
        self.exported: list[tuple[str, str, Token, str | None]] = []
        self.notes: list[str] = []
        self.installs: list[HygieneIssue] = []  # what the installs run so far do wrong
        self.file_issues: list[HygieneIssue] = []  # what the script does wrong wherever it does it (kill by name)
        # The pip installs of vLLM and LMCache run so far: each launch after them runs what they installed.
        self.pins: list[ReleaseClaim] = []
        self.python: str | None = None  # the Python the commands so far chose (conda create python=3.9, uv venv -p)

    def at(self, token: Token) -> Location:
        return Location(file=self.doc.name, line=token.line, path=self.path)

    def env_of(self, variables: list[tuple[str, str, Token, str | None]]) -> list[EnvUse]:
        if len(variables) > MAX_ARGUMENTS:
            raise AdviceError(
                "documents",
                f"more than {MAX_ARGUMENTS:,} environment variables set for the vLLM servers in all; no deployment "
                "sets that many",
            )
        return [
            EnvUse(name=name, value=value, location=self.at(token))
            if why is None
            else EnvUse(name=name, value=None, reference=why, location=self.at(token))
            for name, value, token, why in variables
        ]

    def declare(self, command: list[Token]) -> None:
        """``export A=1 B``, ``declare -x A=1``, ``local A=1``: variables, exported or not."""
        exporting = command[0].text == "export" or any(t.text.startswith("-") and "x" in t.text for t in command[1:])
        for token in command[1:]:
            if token.text.startswith("-"):
                continue
            m = ASSIGNMENT.match(token.text)
            if m:
                value, why = self.assign(token)
                if exporting:
                    self.exported.append((m[1], value, token, why))
            elif exporting and token.text in self.shell.values:
                self.exported.append((token.text, self.shell.values[token.text], token, None))

    def assign(self, token: Token) -> tuple[str, str | None]:
        """Set the variable of a ``NAME=value`` word; its value and why it is not known."""
        name, _, _ = token.text.partition("=")
        value_field = self.shell.word(token)
        value, why = self.shell.bounded(value_field.text.partition("=")[2], value_field.unresolved)
        value_field = _Field(value, why)
        if value_field.unresolved is None:
            self.shell.values[name] = value
            # a later assignment (the else branch after the if's) settles what an earlier one left open
            self.shell.unresolved.pop("$" + name, None)
            self.shell.unresolved.pop("${" + name + "}", None)
        else:
            self.shell.values.pop(name, None)
            self.shell.unresolved["$" + name] = value_field.unresolved
            self.shell.unresolved["${" + name + "}"] = value_field.unresolved
        return value, value_field.unresolved

    def launches(self, first_line: int) -> Iterator[Launch]:
        previous: list[str] = []
        for command, end in split_commands_ended(tokenize_shell(self.doc.text, first_line)):
            if command and (found := kill_issue([t.text for t in command], previous, self.at(command[0]))):
                self.file_issues.append(found)
            if self.path is None and command:  # a shell file, run on a host (not a script held in YAML)
                self.file_issues += self.host_script_issues(command)
            previous = [t.text for t in command]
            if len(command) > MAX_ARGUMENTS:
                raise AdviceError(
                    "text",
                    f"{self.doc.name}, line {command[0].line}: a command of more than {MAX_ARGUMENTS:,} words; "
                    "no deployment runs one that long",
                )
            command = _without_redirections(command)
            while command and command[0].text in _KEYWORDS and not command[0].parts[0][1]:
                command = command[1:]
            if not command:
                continue
            if any(t.text in ("install", "add") for t in command):
                words = [(t.text, _redirects(t)) for t in command]
                self.installs += install_issues(words, self.at(command[0]))
            if command[0].text in _DECLARATIONS:
                self.declare(command)
                continue
            for launch in self.command(command):
                launch.background = end == "&"
                yield launch

    def command(self, command: list[Token]) -> Iterator[Launch]:
        assigned: list[tuple[str, str, Token, str | None]] = []  # VAR=value before the command
        self.shell.expanded = 0
        start = 0
        while start < len(command) and (command[start].text in WRAPPERS or ASSIGNMENT.match(command[start].text)):
            if ASSIGNMENT.match(command[start].text):
                saved = dict(self.shell.values)
                value, why = self.assign(command[start])
                assigned.append((command[start].text.partition("=")[0], value, command[start], why))
                if start + 1 < len(command):
                    self.shell.values = saved  # VAR=value before a command is that command's alone
            start += 1
        rest = command[start:]
        if not rest:
            return  # a plain assignment line: a shell variable, not exported
        if rest[0].text.startswith("--") and len(rest[0].text) > 2:
            self.notes.append(
                f"{self.doc.name}, line {rest[0].line}: a command that starts with {clip(rest[0].text, 40)}: the "
                "line before ends its command (a backslash followed by a space, or none?), so the shell runs this "
                "line on its own and vLLM never sees these options"
            )
            return
        fields: list[tuple[_Field, Token]] = []
        emptied: list[int] = []  # indexes of the fields an empty expansion followed
        for token in rest:
            found = self.shell.expand(token)
            if not found and any(expansion for _, _, expansion in token.parts) and fields:
                emptied.append(len(fields) - 1)
            fields += [(f, token) for f in found]
        texts = [f.text for f, _ in fields]
        if len(texts) > MAX_ARGUMENTS:
            raise AdviceError(
                "text",
                f"{self.doc.name}, line {rest[0].line}: a command of more than {MAX_ARGUMENTS:,} words after "
                "expansion; no deployment runs one that long",
            )
        at = script_index(texts)
        if at is not None or (texts[0] == "eval" and len(texts) > 1):
            # `bash -c SCRIPT` runs its script in a shell of its own; `eval WORDS` reads its words, joined
            # by blanks, as a command line of this shell (KServe's `eval "exec vllm serve …"`)
            script = texts[at] if at is not None else " ".join(texts[1:])
            yield from self.nested(script, fields[at or 1][1].line, assigned, shared=at is None)
            return
        self.python = python_selected(texts) or self.python
        if (pulled := pulled_image_issue(texts, self.at(rest[0]))) is not None:
            self.file_issues.append(pulled)
        if "install" in texts:
            self.pins += pip_installs([(f.text, self.at(token)) for f, token in fields], self.python)
        named = may_start_vllm(texts)
        if not named and not (self.vllm_options and "--model" in " ".join(texts)):
            return
        words = [(f.text, self.at(token)) for f, token in fields]
        env = self.env_of(self.exported + assigned)
        exported = {name: value for name, value, _, why in self.exported if why is None}
        started = docker_run(words, env, exported) if named else None
        if started is None:
            args = vllm_args(words) if named else None
            if args is None:
                args = self.launcher_args(words)
            if args is None:
                return
            # not a container's: docker run
            started = Launch(
                args=args, env=env, pins=list(self.pins), entrypoint=entrypoint_of(words), image=runner_image(words)
            )
        launch = started
        launch.location = words[0][1]
        launch.unresolved = {f.text: f.unresolved for f, _ in fields if f.unresolved is not None}
        launch.emptied = {id(words[i][1]) for i in emptied}
        launch.hygiene = list(self.installs) + launch.hygiene
        yield launch

    def host_script_issues(self, command: list[Token]) -> list[HygieneIssue]:
        """What a command of a shell file does wrong: `$(NAME)` where NAME is a variable the script set (a command
        substitution meant as `${NAME}`; in a manifest `$(VAR)` is Kubernetes' own), and Ray's dashboard on every
        interface (in a container, the pod's network and its Services decide who reaches the port: KubeRay binds
        0.0.0.0 for its Service)."""
        assigned = set(self.shell.values) | {k.strip("${}") for k in self.shell.unresolved}
        found = [
            issue
            for token in command
            for text, _, expansion in token.parts
            if expansion and (issue := substituted_variable_issue(text, assigned, self.at(token)))
        ]
        token_auth = any(name == "RAY_AUTH_MODE" and value == "token" for name, value, _, _ in self.exported)
        exposed = ray_dashboard_issue([t.text for t in command], self.at(command[0]), token_auth)
        return found + ([exposed] if exposed is not None else [])

    def launcher_args(self, words: list[tuple[str, Location]]) -> list[tuple[str, Location]] | None:
        """The vLLM options a launcher of its own passes on (launch.wrapped_vllm_args), said in a note."""
        found = wrapped_vllm_args(words, self.vllm_options)
        if found is None:
            return None
        at, args = found
        launcher = " ".join(w for w, _ in words[: min(at, 3)])
        self.notes.append(
            f"{self.doc.name}, line {words[0][1].line}: `{clip(launcher, 60)}` is no vLLM command; the options it "
            f"passes from {words[at][0]} on are `vllm serve` options, read as the server it starts (what the "
            "launcher itself adds or changes is not known)"
        )
        return args

    def nested(
        self, script: str, line: int, assigned: list[tuple[str, str, Token, str | None]], shared: bool
    ) -> Iterator[Launch]:
        """The launches of a script this one runs: in a shell of its own that inherits what is exported
        (`bash -c`), or ``shared``, in this very shell (`eval`)."""
        if shared:
            inner = ShellRun(Document(name=self.doc.name, text=script), self.path, self.shell, self.vllm_options)
            inner.exported = self.exported
            outer_env = self.env_of(assigned)
        else:
            inherited = {name: value for name, value, _, why in self.exported + assigned if why is None}
            shell = Shell(inherited, self.shell.unresolved)
            inner = ShellRun(Document(name=self.doc.name, text=script), self.path, shell, self.vllm_options)
            outer_env = self.env_of(self.exported + assigned)
        inner.installs = list(self.installs)
        inner.pins = self.pins  # what `sh -c "pip install …"` installs, the script's later lines run on
        inner.python = self.python
        for launch in inner.launches(line or 1):
            launch.env = outer_env + launch.env
            yield launch
        self.notes += inner.notes
        self.file_issues += inner.file_issues


def parse_shell(
    doc: Document,
    first_line: int = 1,
    path: str | None = None,
    notes: list[str] | None = None,
    hygiene: list[HygieneIssue] | None = None,
    pins: list[ReleaseClaim] | None = None,
    vllm_options: frozenset[str] = frozenset(),
) -> Iterator[Launch]:
    """Every vLLM launch in shell text; `export` lines and `VAR=value` prefixes become env, and
    variables set earlier in the script are expanded where they are used. ``hygiene`` gets what the
    script does wrong wherever it does it (a kill of every Python process); ``pins``: the pip installs of
    vLLM and LMCache of a step run before this text (a setup script), which its launches run on too."""
    run = ShellRun(doc, path, Shell(), vllm_options)
    run.pins = list(pins or [])
    yield from run.launches(first_line)
    if notes is not None:
        notes += run.notes
    if hygiene is not None:
        hygiene += run.file_issues


def script_installs(doc: Document, first_line: int = 1, path: str | None = None) -> list[ReleaseClaim]:
    """The pip installs of vLLM and LMCache that shell text makes, in order (a setup step's, for the launches
    of the step after it: `parse_shell(..., pins=...)`)."""
    run = ShellRun(doc, path, Shell())
    for _ in run.launches(first_line):
        pass
    return run.pins
