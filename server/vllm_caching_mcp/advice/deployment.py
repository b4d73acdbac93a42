"""Read deployments as operators write them and work out the configuration vLLM will run with.

Accepted: shell text with a `vllm serve` or `python -m vllm.entrypoints.openai.api_server`
line, a `docker run` / `podman run` line, docker-compose files, Kubernetes manifests
(Deployment, StatefulSet, DaemonSet, Job, Pod, LeaderWorkerSet, ConfigMap; multi-document) and
the kustomizations among them (a resource is read as its build makes it: strategic-merge and JSON 6902
patches, `images:` rewrites),
LMCache configuration YAML, and Helm values of the vLLM production-stack chart
(`servingEngineSpec.modelSpec`) and of vLLM's example chart (`image.command`).

Two steps, both pure:

- `parse_documents` finds each vLLM process ("workload") and records every flag, environment
  variable, image and model with where it was written: file and line for text, file, line and
  YAML path (``spec.template.spec.containers[0].args[3]``) for manifests. YAML is read through
  PyYAML's node graph so every value keeps its line.
- `resolve` turns one workload into its effective configuration for a vLLM release: flag values
  after `--no-` negations and `=`/space forms, the `--kv-transfer-config` JSON (also given
  in dotted form), the connector the offload shorthand selects in that release (from the
  knowledge), parallel sizes, offload tier sizes (read where each connector's knowledge entry
  says it takes them) and the numbers rules compare, with where each was written.

What is pasted costs time and memory in proportion to its size: the bounds (MAX_*) refuse what no
deployment holds — alias bombs, nesting past 100 levels, more than 1,000 servers or 50,000
arguments — with an error naming the document, and a number too large to use (a 400-digit
literal, NaN in JSON) is left out with a note rather than read as infinity.
"""

from __future__ import annotations

import ast
import json
import posixpath
import re
import weakref
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, Literal, NamedTuple, TypeVar

import yaml
from pydantic import AfterValidator, BaseModel, Field

from ..knowledge import SAFE_LOADER, Connector, Gated, Gpu, Knowledge, Setting, TierSize, ranged_at
from ..versions import Version, in_range
from .common import AdviceError, docker_run_options, readable_number

GIB = 1 << 30
T = TypeVar("T")


class PerKnowledge(Generic[T]):
    """What ``build`` works out from a Knowledge object, kept for as long as that object lives.

    Keyed by identity, through a weak reference: a Knowledge (a frozen pydantic model) hashes by
    value, which its ``releases`` dict makes fail, so it cannot key a WeakKeyDictionary or an
    lru_cache; and an ``id`` alone is handed to another object once this one is collected, so each
    entry is dropped when its Knowledge goes.
    """

    def __init__(self, build: Callable[[Knowledge], T]) -> None:
        self._build = build
        self._entries: dict[int, tuple[weakref.ref[Knowledge], T]] = {}

    def __call__(self, knowledge: Knowledge) -> T:
        key = id(knowledge)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is knowledge:
            return entry[1]
        value = self._build(knowledge)

        def forget(ref: weakref.ref[Knowledge]) -> None:
            if self._entries.get(key, (None,))[0] is ref:
                del self._entries[key]

        self._entries[key] = (weakref.ref(knowledge, forget), value)
        return value

    def __len__(self) -> int:
        return len(self._entries)


# The official image names its vLLM release in the tag (v0.22.1, v0.22.1-cu130); other images
# (lmcache/vllm-openai, private builds) tag their own versions, so only this repository counts.
_OFFICIAL_IMAGE = re.compile(r"(^|/)vllm/vllm-openai(-[a-z0-9]+)?:v?(?P<version>\d+\.\d+\.\d+(\.post\d+)?)(-[\w.]+)?$")
_SERVE_MODULE = "vllm.entrypoints.openai.api_server"
_SHELLS = {"sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/bash", "/usr/bin/env"}
_WRAPPERS = {"exec", "nohup", "env", "time", "stdbuf"}
# docker/podman run options that take no value; every other option is followed by one.
_DOCKER_SWITCHES = {
    "-d", "--detach", "-i", "--interactive", "-t", "--tty", "-it", "-ti", "--rm", "--privileged", "--init",
    "-P", "--publish-all", "--read-only", "--no-healthcheck", "--oom-kill-disable", "--sig-proxy",
}  # fmt: skip
# Bounds far above any deployment, so that what is pasted costs time in proportion to its size and
# the answer stays readable: vLLM servers in one call, and words in one command or in all the
# vLLM arguments of a call (vLLM has some 400 options), and characters in all the documents.
MAX_WORKLOADS = 1_000
MAX_ARGUMENTS = 50_000
MAX_DOCUMENTS_TEXT = 5_000_000
_WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "Pod", "LeaderWorkerSet"}
_GPU_LABELS = ("nvidia.com/gpu.product", "cloud.google.com/gke-accelerator", "node.kubernetes.io/instance-type")


class Document(BaseModel):
    # One input file (a comment, not a docstring: a docstring would be listed in every tool's schema).
    name: str = Field(min_length=1, max_length=300)
    text: str = Field(max_length=2_000_000)


def _within_total(documents: list[Document]) -> list[Document]:
    total = sum(len(d.text) for d in documents)
    if total > MAX_DOCUMENTS_TEXT:
        raise ValueError(f"{total:,} characters in all; give at most {MAX_DOCUMENTS_TEXT:,} characters in one call")
    return documents


# The documents of one call: review_deployment's documents, diagnose's deployment.
Documents = Annotated[list[Document], AfterValidator(_within_total)]


class Location(BaseModel):
    """Where something was written: a file and line, and for YAML the path to the value."""

    file: str
    line: int | None = Field(default=None, description="1-based")
    path: str | None = Field(default=None, description="YAML path, e.g. spec.template.spec.containers[0].args[3]")

    def __str__(self) -> str:
        where = self.file + (f":{self.line}" if self.line else "")
        return where + (f" ({self.path})" if self.path else "")


class FlagUse(BaseModel):
    """A command-line option as written (``--max_model_len=8k``) and as vLLM reads it."""

    name: str = Field(description="normalised: --lower-case-with-dashes; --no-X is recorded as X = false")
    written: str
    value: str | bool | None = Field(description="true for a bare switch, false for --no-X, else the text")
    location: Location
    unresolved: str | None = Field(
        default=None, description="why its value is not known (a variable the files do not set), when it is not"
    )
    problem: str | None = Field(
        default=None, description="why vLLM's argument parser stops on it (its value expands to nothing)"
    )


class EnvUse(BaseModel):
    name: str
    value: str | None = Field(description="the literal value; null when set by reference (valueFrom, $(VAR), -e NAME)")
    reference: str | None = Field(default=None, description="what the value comes from when it is not a literal")
    location: Location


class Workload(BaseModel):
    """One vLLM server process as the deployment starts it."""

    name: str
    file: str
    source: Literal["command-line", "docker-run", "compose", "kubernetes", "helm-values", "lmcache-config"]
    model: str | None = None
    model_location: Location | None = None
    image: str | None = None
    image_location: Location | None = None
    flags: list[FlagUse] = Field(default_factory=list)
    env: list[EnvUse] = Field(default_factory=list)
    gpu_label: str | None = Field(default=None, description="a GPU product named by a node selector or label")
    memory_limit_gib: float | None = None
    replicas: int | None = None
    nodes: int = Field(default=1, description="hosts one engine spans (a LeaderWorkerSet group's size)")
    location: Location
    memory_request_gib: float | None = Field(default=None, description="the container's memory request")
    gpu_count: int | None = Field(default=None, description="GPUs the container is given (nvidia.com/gpu, --gpus)")
    shm_gib: float | None = Field(
        default=None, description="size of /dev/shm when the files set it (a memory emptyDir, --shm-size)"
    )
    host_ipc: bool = Field(default=False, description="the host's IPC namespace (hostIPC, --ipc=host)")
    shm_mounted: bool = Field(
        default=False,
        description="the files give /dev/shm a size of their own (a memory emptyDir, --shm-size, shm_size); with "
        "shm_gib null it is bounded only by the node's memory",
    )
    unresolved: list[str] = Field(
        default_factory=list, description="values the files do not settle (variables never set, command output)"
    )
    start_problem: str | None = Field(
        default=None,
        description="why the command as written never starts this server (`bash -c` given the words of the "
        "line one by one runs only the first); the flags are read from the line as its author meant it",
    )


class ProxyUse(BaseModel):
    """A P/D proxy script the reviewed files start, recognised by its name."""

    script: str
    location: Location


class LMCacheConfig(BaseModel):
    """An LMCache YAML file, read as the LMCACHE_* variables it stands for."""

    name: str = Field(description="the file's name: the document's, or the ConfigMap key it is stored under")
    env: list[EnvUse]


class UnreadLaunch(BaseModel):
    """A document that names a vLLM launch and gave no workload: nothing in it was reviewed."""

    location: Location
    text: str = Field(description="the line that names the launch, clipped")


class Deployment(BaseModel):
    workloads: list[Workload]
    unread: list[UnreadLaunch] = Field(
        default_factory=list, description="documents that start vLLM in a way the readers could not follow"
    )
    proxies: list[ProxyUse] = Field(default_factory=list, description="P/D proxy scripts named outside comments")
    lmcache_configs: list[LMCacheConfig] = Field(
        default_factory=list,
        description="LMCache YAML files; a server whose LMCACHE_CONFIG_FILE names one reads that one alone",
    )
    services: list[str] = Field(default_factory=list, description="names of Kubernetes Services in the input")
    notes: list[str] = Field(default_factory=list, description="what could not be read, and why")


# ---------------------------------------------------------------------------------------------
# Shell text


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
            if not tokens or not tokens[-1].separator:
                tokens.append(Token(c, line, separator=True))
            line += c == "\n"
            i += 1
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


def _commands(tokens: list[Token]) -> list[list[Token]]:
    commands: list[list[Token]] = [[]]
    for t in tokens:
        if t.separator:
            if commands[-1]:
                commands.append([])
        else:
            commands[-1].append(t)
    return [c for c in commands if c]


_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
# A reference left as written because its value is not known: ${X}, $X, $(X) (Kubernetes or a
# command), $((…)), `…`. Words are searched for these to say why their value is not known.
_REFERENCE = re.compile(r"\$\(\(.*?\)\)|\$\([^)]*\)|\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\$[0-9@*#?!$-]|`[^`]*`")
# A variable's value, and a command's words after expansion, that no deployment comes near: past
# them a value is not used (an assignment that doubles itself grows without end).
MAX_VALUE_CHARS = 100_000
MAX_EXPANDED_CHARS = MAX_DOCUMENTS_TEXT


class _Field(NamedTuple):
    """A word after expansion, and why its value is not known when it is not."""

    text: str
    unresolved: str | None = None


class _Shell:
    """Shell variables as a script sets them, command by command, and the expansions that use them.

    What the files do not settle (a variable they never set, a command's output, a script
    argument) stays as written and is recorded in ``unresolved`` with why, never guessed."""

    def __init__(self, inherited: dict[str, str] | None = None, unresolved: dict[str, str] | None = None) -> None:
        self.values: dict[str, str] = dict(inherited or {})
        self.unresolved: dict[str, str] = dict(unresolved or {})  # reference as written → why
        self.expanded = 0  # characters the expansions of the current command produced

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
            return self.reference(unit, f"{_clip(unit, 60)} is the output of a command, which the files do not show")
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
            return self.reference(unit, f"{_clip(unit, 60)} uses a form of expansion this reader does not follow")
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
                return self.reference(unit, f"{name} in {_clip(unit, 60)} is not set in the files to a number")
            expression = re.sub(rf"\b{name}\b", f"({value.strip()})", expression)
        result = _integer_arithmetic(expression)
        if result is None:
            return self.reference(unit, f"{_clip(unit, 60)} is arithmetic this reader does not follow")
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


@dataclass
class _Launch:
    """What a command line starts: vLLM arguments (after `serve` or the module), image, env."""

    args: list[tuple[str, Location]] = field(default_factory=list)
    env: list[EnvUse] = field(default_factory=list)
    image: tuple[str, Location] | None = None
    source: Literal["command-line", "docker-run"] = "command-line"
    location: Location | None = None
    unresolved: dict[str, str] = field(default_factory=dict)  # a reference as written → why its value is not known
    emptied: set[int] = field(default_factory=set)  # ids of the Locations of words an empty expansion followed
    options: dict[str, str | None] = field(default_factory=dict)  # docker/podman run options, by name
    problem: str | None = None  # why the command as written does not start the server it names


def _vllm_args(words: list[tuple[str, Location]]) -> list[tuple[str, Location]] | None:
    """The vLLM arguments in a command, or None when it does not start vLLM."""
    texts = [w for w, _ in words]
    for i, w in enumerate(texts):
        base = w.rsplit("/", 1)[-1]
        if base == "vllm" and i + 1 < len(texts) and texts[i + 1] == "serve":
            return words[i + 2 :]
        if base.startswith("python") and i + 2 < len(texts) and texts[i + 1] == "-m" and texts[i + 2] == _SERVE_MODULE:
            return words[i + 3 :]
    return None


def _docker_run(words: list[tuple[str, Location]], env: list[EnvUse], exported: dict[str, str]) -> _Launch | None:
    """The launch of a `docker run` / `podman run` of a vLLM image; None for another command or image."""
    texts = [w for w, _ in words]
    start = next(
        (
            i + 2
            for i, w in enumerate(texts[:-1])
            if w.rsplit("/", 1)[-1] in ("docker", "podman") and texts[i + 1] == "run"
        ),
        None,
    )
    if start is None:
        return None
    options, image_at = docker_run_options(texts[start:], _DOCKER_SWITCHES)
    entrypoint: tuple[str, Location] | None = None
    seen: dict[str, str | None] = {}
    for name, value, at in options:
        loc = words[start + at][1]
        seen[name] = value
        if name == "--entrypoint" and value is not None:
            entrypoint = (value, loc)
        if name in ("-e", "--env") and value is not None:
            key, eq, val = value.partition("=")
            if eq:
                env.append(EnvUse(name=key, value=val, location=loc))
            elif key in exported:  # -e NAME passes the value the script exported
                env.append(EnvUse(name=key, value=exported[key], location=loc))
            else:
                env.append(EnvUse(name=key, value=None, reference="the host environment of docker run", location=loc))
    i = start + image_at
    if i >= len(words):
        return None
    image = words[i]
    rest = words[i + 1 :]
    if entrypoint is not None:
        # An overridden entrypoint runs something else (an LMCache server, a proxy) unless it starts vLLM.
        inner = _vllm_args([entrypoint, *rest])
        if inner is None:
            return None
        return _Launch(args=inner, env=env, image=image, source="docker-run", options=seen)
    inner = _vllm_args(rest)
    if inner is None and not _is_vllm_image(image[0]):
        return None
    if inner is None and rest and rest[0][0] == "serve":
        inner = rest[1:]  # images whose entrypoint is `vllm` (lmcache/vllm-openai) take `serve MODEL ...`
    return _Launch(args=inner if inner is not None else rest, env=env, image=image, source="docker-run", options=seen)


def _is_vllm_image(image: str) -> bool:
    return "vllm" in image.lower()


def _may_start_vllm(texts: list[str]) -> bool:
    """Whether `_docker_run` or `_vllm_args` could find a launch in these words: a cheap test, so
    that the words of other commands (echo, curl, ...) get no Location objects."""
    joined = " ".join(texts)
    if not any(program in joined for program in ("vllm", "docker", "podman", "python")):
        return False
    bases = (w.rsplit("/", 1)[-1] for w in texts)
    return any(base in ("vllm", "docker", "podman") or base.startswith("python") for base in bases)


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


_DECLARATIONS = {"export", "declare", "typeset", "local", "readonly"}


class _ShellRun:
    """One shell text read command by command: its variables, what it exports, what it starts."""

    def __init__(self, doc: Document, path: str | None, shell: _Shell) -> None:
        self.doc = doc
        self.path = path
        self.shell = shell
        # Exported variables are kept as (name, value, token, why unknown) until a launch takes them:
        # a script of many exports and other commands then builds no EnvUse for each command.
        self.exported: list[tuple[str, str, Token, str | None]] = []
        self.notes: list[str] = []

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
            m = _ASSIGNMENT.match(token.text)
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
        else:
            self.shell.values.pop(name, None)
            self.shell.unresolved["$" + name] = value_field.unresolved
            self.shell.unresolved["${" + name + "}"] = value_field.unresolved
        return value, value_field.unresolved

    def launches(self, first_line: int) -> Iterator[_Launch]:
        for command in _commands(tokenize_shell(self.doc.text, first_line)):
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
            if command[0].text in _DECLARATIONS:
                self.declare(command)
                continue
            yield from self.command(command)

    def command(self, command: list[Token]) -> Iterator[_Launch]:
        assigned: list[tuple[str, str, Token, str | None]] = []  # VAR=value before the command
        self.shell.expanded = 0
        start = 0
        while start < len(command) and (command[start].text in _WRAPPERS or _ASSIGNMENT.match(command[start].text)):
            if _ASSIGNMENT.match(command[start].text):
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
                f"{self.doc.name}, line {rest[0].line}: a command that starts with {_clip(rest[0].text, 40)}: the "
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
        if len(texts) >= 3 and texts[0] in _SHELLS and texts[1] in ("-c", "-lc", "-ec"):
            inherited = {name: value for name, value, _, why in self.exported + assigned if why is None}
            inner = _ShellRun(
                Document(name=self.doc.name, text=texts[2]), self.path, _Shell(inherited, self.shell.unresolved)
            )
            for launch in inner.launches(fields[2][1].line or 1):
                launch.env = self.env_of(self.exported + assigned) + launch.env
                yield launch
            self.notes += inner.notes
            return
        if not _may_start_vllm(texts):
            return
        words = [(f.text, self.at(token)) for f, token in fields]
        env = self.env_of(self.exported + assigned)
        exported = {name: value for name, value, _, why in self.exported if why is None}
        started = _docker_run(words, env, exported)
        if started is None:
            args = _vllm_args(words)
            if args is None:
                return
            started = _Launch(args=args, env=env)
        launch = started
        launch.location = words[0][1]
        launch.unresolved = {f.text: f.unresolved for f, _ in fields if f.unresolved is not None}
        launch.emptied = {id(words[i][1]) for i in emptied}
        yield launch


def _parse_shell(
    doc: Document, first_line: int = 1, path: str | None = None, notes: list[str] | None = None
) -> Iterator[_Launch]:
    """Every vLLM launch in shell text; `export` lines and `VAR=value` prefixes become env, and
    variables set earlier in the script are expanded where they are used."""
    run = _ShellRun(doc, path, _Shell())
    yield from run.launches(first_line)
    if notes is not None:
        notes += run.notes


# ---------------------------------------------------------------------------------------------
# YAML with line numbers

# Bounds on one YAML document (a `---` section), far above any manifest, compose file or values
# file. Nesting: PyYAML's composer and this reader recurse once a level, and libyaml's composer
# overflows the C stack near 50,000 levels. Aliases: every use of an anchor is walked again, so
# nine aliases of nine aliases of ... grow as 9^n from a few hundred bytes; what aliases add is
# bounded both in nodes and in scalar characters (one long string named a thousand times).
MAX_YAML_DEPTH = 100
MAX_ALIAS_NODES = 100_000
MAX_ALIAS_CHARS = 2_000_000
# And the nodes of all the YAML one call reads (PyYAML resolves and builds each in Python, some
# 10 µs a node): a manifest has 15-20 bytes a node, so this is about the whole size bound.
MAX_YAML_NODES = 300_000
_PATH_KEY_CHARS = 80  # a longer key is shortened in paths, which every node below it repeats
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Located:
    """A YAML value with the line it starts on; its path is put together from its parents when asked for,
    so a long key is not copied into every node below it."""

    __slots__ = ("block", "file", "line", "parent", "step", "value")

    def __init__(self, line: int, parent: _Located | None = None, step: str = "") -> None:
        self.file: str | None = None  # the patch a kustomize overlay merged this node in from
        self.value: Any = None
        self.line = line
        self.parent = parent
        self.step = step  # ".key" or "[3]": the part of the path this node adds
        self.block = False  # a literal or folded block scalar: its text starts on the next line

    @property
    def path(self) -> str:
        steps = []
        node: _Located | None = self
        while node is not None:
            steps.append(node.step)
            node = node.parent
        return "".join(reversed(steps)).removeprefix(".")

    def get(self, key: str) -> Any:
        """The `_Located` under ``key``, or None (typed Any: manifests are walked by hand, key by key)."""
        if isinstance(self.value, dict):
            found = self.value.get(key)
            return found if isinstance(found, _Located) else None
        return None

    def each(self, key: str) -> list[_Located]:
        """The list items under ``key``; empty when the key is missing or not a list."""
        found = self.get(key)
        return found.items() if found is not None else []

    def items(self) -> list[_Located]:
        return [v for v in self.value if isinstance(v, _Located)] if isinstance(self.value, list) else []

    def plain(self) -> Any:
        if isinstance(self.value, dict):
            return {k: v.plain() for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.plain() for v in self.value]
        return self.value


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org,2002:") else tag


class _YamlReader:
    """Builds `_Located` trees from PyYAML nodes of one text, with YAML merge keys (``<<: *base``)."""

    def __init__(self, name: str, first_line: int) -> None:
        self.name = name
        self.first_line = first_line
        # A constructor per text: it remembers every node it built, so a shared one grows without
        # end in a long-running server (and is not safe to share between threads).
        self.constructor = yaml.constructor.SafeConstructor()
        self.merged: dict[int, list[tuple[yaml.Node, yaml.Node]]] = {}

    def located(self, node: yaml.Node, parent: _Located | None = None, step: str = "") -> _Located:
        item = _Located(node.start_mark.line + self.first_line, parent, step)
        if isinstance(node, yaml.MappingNode):
            mapping: dict[str, _Located] = {}
            for key_node, value_node in self.pairs(node):
                key = str(self.construct(key_node))
                mapping[key] = self.located(value_node, item, "." + _clip(key, _PATH_KEY_CHARS))
            item.value = mapping
        elif isinstance(node, yaml.SequenceNode):
            item.value = [self.located(v, item, f"[{i}]") for i, v in enumerate(node.value)]
        else:
            assert isinstance(node, yaml.ScalarNode)
            item.value = self.construct(node)
            item.block = node.style in ("|", ">")
        return item

    def pairs(self, node: yaml.MappingNode) -> list[tuple[yaml.Node, yaml.Node]]:
        """The key and value nodes with merge keys expanded: the mapping's own keys win, then the
        merged mappings in the order written (PyYAML's rule). Remembered per node: an anchor is
        flattened once however often it is merged."""
        known = self.merged.get(id(node))
        if known is not None:
            return known
        merged: list[tuple[yaml.Node, yaml.Node]] = []
        own: list[tuple[yaml.Node, yaml.Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE_TAG:
                own.append((key_node, value_node))
                continue
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for source in reversed(sources):
                if not isinstance(source, yaml.MappingNode):
                    raise self.error(source, "a merge key (<<) takes a mapping or a list of mappings")
                merged += self.pairs(source)
        self.merged[id(node)] = merged + own
        return merged + own

    def construct(self, node: yaml.Node) -> Any:
        try:
            return self.constructor.construct_object(node, deep=True)
        except Exception as exc:  # PyYAML's constructors on any text: ValueError, IndexError ('!!int '), ...
            raise self.error(node, self.why_not(node, exc)) from None

    def why_not(self, node: yaml.Node, exc: Exception) -> str:
        tag = _short_tag(node.tag)
        if tag == "!!value":
            return "the value '=' cannot be read: YAML takes a lone = for its 'value' key; quote it"
        if isinstance(exc, yaml.constructor.ConstructorError) and "could not determine a constructor" in str(exc):
            return f"the tag {_clip(tag, 80)} is not one the safe YAML loader reads; remove it or quote the value"
        detail = exc.problem if isinstance(exc, yaml.MarkedYAMLError) else str(exc)
        shown = _clip(repr(node.value), 60) if isinstance(node, yaml.ScalarNode) else f"this {tag} node"
        return f"the value {shown} cannot be read as {_clip(tag, 80)}: {_clip(detail or type(exc).__name__, 120)}"

    def error(self, node: yaml.Node, problem: str) -> AdviceError:
        return AdviceError("text", f"{self.name}, line {node.start_mark.line + self.first_line}: {problem}")


class _Size(NamedTuple):
    """What a YAML node stands for with its aliases expanded."""

    nodes: int
    chars: int  # in its scalars
    height: int  # levels of nesting, itself included


def _check_yaml_shape(name: str, text: str, first_line: int, totals: _Totals) -> None:
    """Refuse a YAML document nested deeper than MAX_YAML_DEPTH (aliases expanded), with a recursive
    alias, or whose aliases add more than MAX_ALIAS_NODES nodes or MAX_ALIAS_CHARS characters; and
    count its nodes into ``totals``, refusing the text that takes them past MAX_YAML_NODES.

    Reads libyaml's event stream, which builds nothing and stops at the first offence, so the
    check costs one pass however the document is built; the size of an anchored node is known
    when its end goes by."""
    number = 0
    anchors: dict[str, _Size] = {}
    open_anchors: set[str] = set()
    stack: list[tuple[list[int], str | None]] = []  # ([nodes, chars, height below], anchor) of open collections
    added = [0, 0]  # nodes and characters the aliases add

    def refuse(problem: str, event: yaml.Event | None = None) -> AdviceError:
        line = f", line {_line_of(event, first_line)}" if event is not None else ""
        return AdviceError("text", f"{name}, YAML document {number}{line}: {problem}")

    for event in yaml.parse(text, Loader=SAFE_LOADER):
        if totals.yaml_nodes > MAX_YAML_NODES:
            raise AdviceError(
                "text",
                f"{name}: more than {MAX_YAML_NODES:,} YAML nodes in the documents together; give the manifests "
                "of the vLLM servers and what they use",
            )
        if isinstance(event, yaml.DocumentStartEvent):
            number += 1
            anchors, open_anchors, added = {}, set(), [0, 0]
            continue
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= MAX_YAML_DEPTH:
                raise refuse(f"nested more than {MAX_YAML_DEPTH} levels deep; manifests nest a few dozen", event)
            stack.append(([1, 0, 0], event.anchor))
            totals.yaml_nodes += 1
            if event.anchor is not None:
                open_anchors.add(event.anchor)
            continue
        anchor: str | None = None
        if isinstance(event, yaml.ScalarEvent):
            size, anchor = _Size(1, len(event.value), 1), event.anchor
            totals.yaml_nodes += 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor in open_anchors:
                raise AdviceError(
                    "text",
                    f"{name}, line {_line_of(event, first_line)}: the alias *{_clip(str(event.anchor), 40)} "
                    "is inside the node it names (a recursive structure)",
                )
            size = anchors.get(str(event.anchor), _Size(1, 0, 1))  # an unknown alias: the composer reports it
            added = [added[0] + size.nodes, added[1] + size.chars]
            totals.yaml_nodes += size.nodes
            if len(stack) + size.height > MAX_YAML_DEPTH:
                raise refuse(f"nested more than {MAX_YAML_DEPTH} levels deep through its aliases", event)
            if added[0] > MAX_ALIAS_NODES:
                raise refuse(f"expands to more than {MAX_ALIAS_NODES:,} nodes through its aliases (an alias bomb?)")
            if added[1] > MAX_ALIAS_CHARS:
                raise refuse(f"expands to more than {MAX_ALIAS_CHARS:,} characters through its aliases")
        elif isinstance(event, yaml.CollectionEndEvent):
            (nodes, chars, below), anchor = stack.pop()
            size = _Size(nodes, chars, below + 1)
            open_anchors.discard(anchor)
        else:
            continue
        if anchor is not None:
            anchors[anchor] = size
        if stack:
            parent = stack[-1][0]
            parent[0] += size.nodes
            parent[1] += size.chars
            parent[2] = max(parent[2], size.height)


def _line_of(event: yaml.Event, first_line: int) -> int:
    return (event.start_mark.line if event.start_mark is not None else 0) + first_line


def _yaml_problem(exc: yaml.YAMLError, first_line: int) -> str:
    """PyYAML's several-line message as one line: what went wrong, and where."""
    if not isinstance(exc, yaml.MarkedYAMLError):
        return _clip(" ".join(str(exc).split()), 200)
    problem = ": ".join(part for part in (exc.context, exc.problem) if part)
    mark = exc.problem_mark or exc.context_mark
    where = f" (line {mark.line + first_line}, column {mark.column + 1})" if mark is not None else ""
    return _clip(problem, 200) + where


def _load_yaml(name: str, text: str, totals: _Totals, first_line: int = 1) -> list[_Located]:
    """The YAML documents in ``text``; AdviceError("text", ...) when this reader cannot take it."""
    try:
        _check_yaml_shape(name, text, first_line, totals)
        nodes = list(yaml.compose_all(text, Loader=SAFE_LOADER))
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(getattr(exc, "problem", "")):
            # PyYAML 6.0.4's scanner has a nesting limit of its own, met while it reads ahead of the
            # events _check_yaml_shape counts: the same refusal, in the same words.
            raise AdviceError(
                "text", f"{name}: nested more than {MAX_YAML_DEPTH} levels deep; manifests nest a few dozen"
            ) from None
        raise AdviceError("text", f"{name} is not valid YAML: {_yaml_problem(exc, first_line)}") from None
    reader = _YamlReader(name, first_line)
    return [reader.located(n) for n in nodes if n is not None]


def _text_of(item: _Located | None) -> str:
    if item is None:
        return ""
    v = item.value
    if isinstance(v, bool):
        return "true" if v else "false"
    return "" if v is None else str(v)


# ---------------------------------------------------------------------------------------------
# Kubernetes, compose, Helm values, LMCache YAML


def _loc(doc: Document, item: _Located, prefix: str = "") -> Location:
    path = f"{prefix}{item.path}" if prefix and item.path else (item.path or prefix or None)
    return Location(file=item.file or doc.name, line=item.line + (1 if item.block else 0), path=path)


def _script_words(doc: Document, item: _Located) -> list[tuple[str, Location]]:
    """Words of a command written as one string, each with its own line."""
    first = _loc(doc, item)
    tokens = [t for t in tokenize_shell(_text_of(item), first.line or 1) if not t.separator]
    _check_words(doc, item, len(tokens))
    return [(t.text, Location(file=doc.name, line=t.line, path=first.path)) for t in tokens]


def _words_from_list(doc: Document, items: list[_Located], prefix: str) -> list[tuple[str, Location]]:
    if items:
        _check_words(doc, items[0], len(items))
    return [(_text_of(i), _loc(doc, i, prefix)) for i in items]


def _check_words(doc: Document, item: _Located, count: int) -> None:
    if count > MAX_ARGUMENTS:
        raise AdviceError(
            "text",
            f"{doc.name}, line {item.line}: a command of more than {MAX_ARGUMENTS:,} words; no deployment runs one "
            "that long",
        )


def _launch_from_argv(
    doc: Document,
    argv: list[tuple[str, Location]],
    image: str | None,
    overridden: bool = False,
    variables: _Shell | None = None,
    notes: list[str] | None = None,
) -> _Launch | None:
    """vLLM arguments from a container's command + args: exec form, a shell script, or the image
    entrypoint's arguments (not when ``overridden``: a command or entrypoint of its own runs instead).
    ``variables``: what a shell script sees (the container's environment)."""
    texts = [w for w, _ in argv]
    if len(texts) >= 3 and texts[0] in _SHELLS and texts[1] in ("-c", "-lc", "-ec"):
        loc = argv[2][1]
        run = _ShellRun(Document(name=doc.name, text=texts[2]), loc.path, variables or _Shell())
        launch = next(run.launches(loc.line or 1), None)
        if notes is not None:
            notes += run.notes
        return launch if launch is not None else _split_script(argv)
    inner = _vllm_args(argv)
    if inner is not None:
        return _Launch(args=inner)
    if overridden or image is None or not _is_vllm_image(image):
        return None
    if texts and texts[0] == "serve":
        return _Launch(args=argv[1:])  # images whose entrypoint is `vllm` (lmcache/vllm-openai) take `serve MODEL`
    if not texts or texts[0].startswith("-") or "/" in texts[0]:
        return _Launch(args=argv)  # the image's entrypoint is the vLLM server; these are its arguments
    return None


def _started_as_written(workload: Workload, launch: _Launch, notes: list[str]) -> None:
    if launch.problem is not None:
        workload.start_problem = launch.problem
        notes.append(f"{workload.name} does not start: {launch.problem}")


def _split_script(argv: list[tuple[str, Location]]) -> _Launch | None:
    """`bash -c vllm serve m …` as separate words: the shell runs only `vllm` (which prints its help and
    exits), and the other words are the script's $0, $1, …; the launch the words spell, with that problem."""
    inner = _vllm_args(argv[2:])
    if inner is None:
        return None
    shell, option, script = (w for w, _ in argv[:3])
    alone = " (vllm alone prints its help and exits)" if script.rsplit("/", 1)[-1] == "vllm" else ""
    problem = (
        f"{argv[2][1]}: `{shell} {option}` runs only the word after it, {script!r}, as its script{alone}; the "
        f"{len(argv) - 3} words after that become the script's $0, $1, …, so vLLM never starts with these arguments; "
        "give the whole line as one word"
    )
    return _Launch(args=inner, problem=problem)


def _k8s_env(
    doc: Document, container: _Located, config_maps: dict[str, _Located], prefix: str
) -> tuple[list[EnvUse], list[str]]:
    env: list[EnvUse] = []
    notes: list[str] = []
    by_ref: dict[str, str] = {}
    for source in container.get("envFrom").items() if container.get("envFrom") else []:
        ref = source.get("configMapRef") or source.get("secretRef")
        name = _text_of(ref.get("name")) if ref and ref.get("name") else "?"
        cm = config_maps.get(name) if source.get("configMapRef") else None
        if cm is not None and cm.get("data") is not None:
            for key, item in (cm.get("data").value or {}).items():
                env.append(EnvUse(name=key, value=_text_of(item), location=_loc(doc, item)))
        else:
            kind = "Secret" if source.get("secretRef") else "ConfigMap"
            notes.append(f"{doc.name}: envFrom {kind} {name!r} is not in the input; its variables are unknown")
    for item in container.get("env").items() if container.get("env") else []:
        name_item = item.get("name")
        if name_item is None:
            continue
        name = _text_of(name_item)
        loc = _loc(doc, item, prefix)
        if item.get("value") is not None:
            value = _text_of(item.get("value"))
            refs = re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", value)
            if refs:
                origin = ", ".join(by_ref.get(r, f"$({r})") for r in refs)
                env.append(EnvUse(name=name, value=None, reference=origin, location=loc))
            else:
                env.append(EnvUse(name=name, value=value, location=loc))
        elif item.get("valueFrom") is not None:
            vf = item.get("valueFrom").plain()
            what = next(iter(vf), "valueFrom") if isinstance(vf, dict) else "valueFrom"
            detail = vf.get(what, {}) if isinstance(vf, dict) else {}
            described = f"valueFrom {what}" + (
                f" {detail.get('fieldPath') or detail.get('name') or ''}".rstrip() if isinstance(detail, dict) else ""
            )
            by_ref[name] = described
            env.append(EnvUse(name=name, value=None, reference=described, location=loc))
        else:
            env.append(EnvUse(name=name, value="", location=loc))
    return env, notes


def _memory_gib(text: str) -> float | None:
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGTP]i?|[kmgtp]|[KMGTP]B?)?\s*", text)
    if not m:
        return None
    number = float(m.group(1))
    unit = (m.group(2) or "").rstrip("B")
    binary = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
    decimal = {"k": 1e3, "K": 1e3, "M": 1e6, "m": 1e6, "G": 1e9, "g": 1e9, "T": 1e12, "t": 1e12, "P": 1e15}
    factor = binary.get(unit) or decimal.get(unit) or 1
    return readable_number(number * factor / GIB)


def _gpu_label(pod_spec: _Located) -> str | None:
    selector = pod_spec.get("nodeSelector")
    if selector is not None and isinstance(selector.value, dict):
        for label in _GPU_LABELS:
            if label in selector.value:
                return _text_of(selector.value[label])
    affinity = pod_spec.get("affinity")
    if affinity is not None:
        text = json.dumps(affinity.plain(), default=str)  # dates and bytes, which YAML builds, as text
        for label in _GPU_LABELS:
            m = re.search(re.escape(label) + r'", "operator": "In", "values": \["([^"]+)"', text)
            if m:
                return m.group(1)
    return None


def _whole_number(
    doc: Document, item: _Located | None, what: str, low: int, high: int, notes: list[str], *, quantity: bool = False
) -> int | None:
    """An integer field such as replicas; None, with a note, when it is not a whole number from low to high.
    A resource ``quantity`` may also be written as a string ("8"), as Kubernetes quantities often are."""
    if item is None:
        return None
    value = item.value
    if quantity and isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return value
    shown = _clip(_text_of(item), 40)
    notes.append(f"{_loc(doc, item)}: {what} {shown} is not a whole number from {low} to {high:,}; it is not used")
    return None


def _memory_limit(doc: Document, item: _Located | None, notes: list[str]) -> float | None:
    if item is None:
        return None
    gib = _memory_gib(_text_of(item))
    if gib is None:
        shown = _clip(_text_of(item), 40)
        notes.append(f"{_loc(doc, item)}: memory limit {shown!r} is not a quantity such as 64Gi; it is not used")
    return gib


def _pod_specs(doc: Document, obj: _Located, notes: list[str]) -> list[tuple[_Located, str, int | None, int]]:
    """(pod spec, part, replicas, hosts per engine) of a workload object."""
    kind = _text_of(obj.get("kind"))
    spec = obj.get("spec")
    if spec is None:
        return []
    count = _whole_number(doc, spec.get("replicas"), "replicas", 0, 1_000_000, notes)
    if kind == "Pod":
        return [(spec, "", 1, 1)]
    found: list[tuple[_Located, str, int | None, int]] = []
    if kind == "LeaderWorkerSet":
        template = spec.get("leaderWorkerTemplate")
        size = template.get("size") if template is not None else None
        nodes = _whole_number(doc, size, "leaderWorkerTemplate.size", 1, 100_000, notes) or 1
        for part in ("leaderTemplate", "workerTemplate"):
            part_template = template.get(part) if template is not None else None
            pod = part_template.get("spec") if part_template is not None else None
            if pod is not None:
                found.append((pod, part, count, nodes))
        return found
    template = spec.get("template")
    pod = template.get("spec") if template is not None else None
    if kind in _WORKLOAD_KINDS and pod is not None:
        found.append((pod, "", count, 1))
    return found


def _parse_kubernetes(
    doc: Document, objects: list[_Located], deployment: Deployment, totals: _Totals, lmcache_keys: frozenset[str]
) -> None:
    config_maps = {
        _text_of(o.get("metadata").get("name")): o
        for o in objects
        if o.get("kind") is not None
        and _text_of(o.get("kind")) == "ConfigMap"
        and o.get("metadata") is not None
        and o.get("metadata").get("name") is not None
    }
    for cm in config_maps.values():
        for key, item in (cm.get("data").value if cm.get("data") is not None else {}).items():
            if key.endswith((".yaml", ".yml")) and isinstance(item.value, str):
                _maybe_lmcache_config(doc.name, item.value, deployment, totals, item.line + 1, lmcache_keys, key)
    for obj in objects:
        kind = _text_of(obj.get("kind")) if obj.get("kind") else ""
        meta = obj.get("metadata")
        name = _text_of(meta.get("name")) if meta is not None and meta.get("name") is not None else "?"
        if kind == "Service":
            deployment.services.append(name)
        for pod_spec, part, replicas, nodes in _pod_specs(doc, obj, deployment.notes):
            gpu = _gpu_label(pod_spec)
            containers = pod_spec.get("containers")
            for container in containers.items() if containers else []:
                image_item = container.get("image")
                image = _text_of(image_item) if image_item is not None else None
                command = container.get("command").items() if container.get("command") else []
                args_item = container.get("args")
                if args_item is not None and isinstance(args_item.value, str):
                    args_words = _script_words(doc, args_item)
                else:
                    args_words = _words_from_list(doc, args_item.items() if args_item else [], "")
                argv = _words_from_list(doc, command, "") + args_words
                env, notes = _k8s_env(doc, container, config_maps, "")
                env = _lws_env(part, nodes, container) + env if kind == "LeaderWorkerSet" else env
                variables = _k8s_variables(env)
                argv = [(_k8s_expand(word, variables), where) for word, where in argv]
                found = _launch_from_argv(
                    doc, argv, image, overridden=bool(command), variables=variables, notes=deployment.notes
                )
                if found is None:
                    continue
                args, script_env = found.args, found.env
                deployment.notes += notes
                limits = container.get("resources")
                memory = None
                if limits is not None and limits.get("limits") is not None:
                    mem = limits.get("limits").get("memory")
                    memory = _memory_limit(doc, mem, deployment.notes)
                cname = _text_of(container.get("name")) if container.get("name") else "?"
                label = f"{kind}/{name}" + (f" {part}" if part else "") + f" container {cname}"
                workload = Workload(
                    name=label,
                    file=doc.name,
                    source="kubernetes",
                    image=image,
                    image_location=_loc(doc, image_item) if image_item is not None else None,
                    env=env + script_env,
                    gpu_label=gpu,
                    memory_limit_gib=memory,
                    replicas=replicas,
                    nodes=nodes,
                    location=Location(file=doc.name, line=container.line, path=container.path or None),
                )
                _pod_resources(doc, workload, pod_spec, container, deployment.notes)
                _started_as_written(workload, found, deployment.notes)
                _read_args(workload, args, variables.unresolved | found.unresolved, found.emptied)
                deployment.workloads.append(workload)


def _lws_env(part: str, size: int, container: _Located) -> list[EnvUse]:
    """The variables LeaderWorkerSet sets in every container of a group (its controller's pod
    webhook): the group's size, the leader's address, the pod's index in the group."""
    where = Location(file="LeaderWorkerSet", line=None, path="(set by the LeaderWorkerSet controller)")
    return [
        EnvUse(name="LWS_GROUP_SIZE", value=str(size), location=where),
        EnvUse(
            name="LWS_LEADER_ADDRESS",
            value=None,
            reference="the leader pod's address, known at run time",
            location=where,
        ),
        EnvUse(
            name="LWS_WORKER_INDEX",
            value="0" if part == "leaderTemplate" else None,
            reference=None if part == "leaderTemplate" else "the worker's index in its group",
            location=where,
        ),
    ]


def _k8s_variables(env: list[EnvUse]) -> _Shell:
    """The container's variables as Kubernetes expands $(VAR) with them, and as its shell sees them."""
    values = {use.name: use.value for use in env if use.value is not None}
    unresolved = {
        f"$({use.name})": f"{use.name} is set from {use.reference}, which the files do not show"
        for use in env
        if use.value is None
    }
    unresolved |= {"$" + k[2:-1]: v for k, v in unresolved.items()} | {
        "${" + k[2:-1] + "}": v for k, v in unresolved.items()
    }
    return _Shell(values, unresolved)


_K8S_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _k8s_expand(word: str, variables: _Shell) -> str:
    """A command or argument with $(VAR) expanded from the container's variables, as Kubernetes does:
    $$ is a literal $, and a reference to a variable the container does not have stays as written."""
    if "$" not in word:
        return word

    def one(m: re.Match[str]) -> str:
        if m.group() == "$$":
            return "$"
        name = m.group(1)
        if name in variables.values:
            return variables.values[name]
        variables.unresolved.setdefault(
            m.group(), f"{name} is not a variable of the container, so Kubernetes passes {m.group()} as written"
        )
        return m.group()

    return _K8S_REFERENCE.sub(one, word)


def _pod_resources(
    doc: Document, workload: Workload, pod_spec: _Located, container: _Located, notes: list[str]
) -> None:
    """The container's memory request, its GPUs, /dev/shm (a memory emptyDir mounted there) and hostIPC."""
    resources = container.get("resources")
    for part in ("requests", "limits"):
        given = resources.get(part) if resources is not None else None
        if given is None:
            continue
        if part == "requests" and given.get("memory") is not None:
            workload.memory_request_gib = _memory_limit(doc, given.get("memory"), notes)
        gpus = given.get("nvidia.com/gpu")
        if gpus is not None:
            workload.gpu_count = _whole_number(doc, gpus, "nvidia.com/gpu", 0, 1_000, notes, quantity=True)
    workload.host_ipc = pod_spec.get("hostIPC") is not None and pod_spec.get("hostIPC").value is True
    mounts = {_text_of(m.get("name")): _text_of(m.get("mountPath")) for m in container.each("volumeMounts")}
    for volume in pod_spec.each("volumes"):
        if mounts.get(_text_of(volume.get("name"))) != "/dev/shm":
            continue
        host_path = volume.get("hostPath")
        if host_path is not None and _text_of(host_path.get("path")) == "/dev/shm":
            workload.shm_mounted = True  # the node's own /dev/shm, as with hostIPC: not the container's to size
            continue
        empty_dir = volume.get("emptyDir")
        if empty_dir is None:
            continue
        if empty_dir.get("medium") is not None and _text_of(empty_dir.get("medium")) == "Memory":
            workload.shm_mounted = True
            size = empty_dir.get("sizeLimit")
            workload.shm_gib = _memory_limit(doc, size, notes) if size is not None else workload.memory_limit_gib


def _docker_resources(workload: Workload, options: dict[str, str | None]) -> None:
    """--shm-size, --ipc=host, --memory and --gpus of a docker/podman run."""
    shm = options.get("--shm-size")
    if shm:
        workload.shm_mounted, workload.shm_gib = True, _docker_bytes_gib(shm)
    workload.host_ipc = options.get("--ipc") == "host"
    memory = options.get("--memory") or options.get("-m")
    if memory:
        workload.memory_limit_gib = _docker_bytes_gib(memory)
    gpus = options.get("--gpus")
    if gpus is not None and gpus.isdigit():
        workload.gpu_count = int(gpus)
    elif gpus is not None and "device=" in gpus:
        workload.gpu_count = len(gpus.split("device=", 1)[1].strip("\"'").split(","))


def _docker_bytes_gib(text: str) -> float | None:
    """A Docker size (--shm-size, compose shm_size): Docker's units are binary, 8g is 8 GiB."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bkmgBKMG]?)[bB]?\s*", text)
    unit = {"": "", "b": "", "k": "Ki", "m": "Mi", "g": "Gi"}[m[2].lower()] if m else None
    return _memory_gib(m[1] + unit) if m and unit is not None else None


def _compose_resources(service: _Located, workload: Workload) -> None:
    """A compose service's shm_size, mem_limit and ipc, as docker run's --shm-size, --memory and --ipc."""
    memory = service.get("mem_limit")
    if memory is not None:  # Docker's binary units (64g is 64 GiB) over the Kubernetes reading
        workload.memory_limit_gib = _docker_bytes_gib(_text_of(memory)) or workload.memory_limit_gib
    shm = service.get("shm_size")
    if shm is not None:
        workload.shm_mounted, workload.shm_gib = True, _docker_bytes_gib(_text_of(shm))
    ipc = service.get("ipc")
    workload.host_ipc = ipc is not None and _text_of(ipc) == "host"


_COMPOSE_REFERENCE = re.compile(
    r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])((?:[^{}]|\{[^}]*\})*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)


def read_dotenv(text: str) -> dict[str, str]:
    """The variables of a compose `.env` file: ``NAME=value`` lines, quotes taken off, comments skipped."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip().removeprefix("export ").strip()
        m = _ASSIGNMENT.match(line)
        if not m or line.startswith("#"):
            continue
        value = m[2].strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        else:
            value = re.sub(r"\s+#.*$", "", value)
        found[m[1]] = value
    return found


def _compose_interpolate(root: _Located, dotenv: dict[str, str], unresolved: dict[str, str]) -> None:
    """Work out ``${VAR}``, ``${VAR:-default}``, ``$VAR`` and ``$$`` in every string of a compose file,
    as compose does with the `.env` beside it; a variable neither sets stays as written, in ``unresolved``."""

    def one(m: re.Match[str]) -> str:
        if m.group() == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        operator, word = m.group(2), m.group(3) or ""
        value = dotenv.get(name)
        empty = value is None or (operator is not None and operator.startswith(":") and value == "")
        if operator is not None and operator.endswith("-"):
            return word if empty else value or ""
        if operator is not None and operator.endswith("+"):
            return "" if empty else word
        if value is not None and not (operator is not None and empty):
            return value
        unresolved.setdefault(m.group(), f"{name} is set neither in a .env file among the documents nor in the file")
        return m.group()

    pending = [root]
    while pending:
        node = pending.pop()
        if isinstance(node.value, dict):
            pending += node.value.values()
        elif isinstance(node.value, list):
            pending += node.items()
        elif isinstance(node.value, str) and "$" in node.value:
            node.value = _COMPOSE_REFERENCE.sub(one, node.value)


def _parse_compose(doc: Document, root: _Located, deployment: Deployment, dotenv: dict[str, str]) -> None:
    unresolved: dict[str, str] = {}
    _compose_interpolate(root, dotenv, unresolved)
    services = root.get("services")
    for name, service in (services.value if services is not None and isinstance(services.value, dict) else {}).items():
        image_item = service.get("image")
        image = _text_of(image_item) if image_item is not None else None
        argv: list[tuple[str, Location]] = []
        for key in ("entrypoint", "command"):
            item = service.get(key)
            if item is None:
                continue
            if isinstance(item.value, str):
                argv += _script_words(doc, item)
            else:
                argv += _words_from_list(doc, item.items(), "")
        if service.get("env_file") is not None:
            deployment.notes.append(
                f"{_loc(doc, service.get('env_file'))}: service {name} reads variables from env_file, which is "
                "not read here; give them in environment: to have them reviewed"
            )
        found = _launch_from_argv(doc, argv, image, overridden=service.get("entrypoint") is not None)
        if found is None:
            continue
        args, script_env = found.args, found.env
        env: list[EnvUse] = []
        environment = service.get("environment")
        if environment is not None and isinstance(environment.value, dict):
            for key, item in environment.value.items():
                env.append(
                    EnvUse(name=key, value=_text_of(item), location=_loc(doc, item))
                    if item.value is not None
                    else EnvUse(name=key, value=None, reference="the host environment", location=_loc(doc, item))
                )
        elif environment is not None:
            for item in environment.items():
                key, eq, value = _text_of(item).partition("=")
                env.append(
                    EnvUse(name=key, value=value, location=_loc(doc, item))
                    if eq
                    else EnvUse(name=key, value=None, reference="the host environment", location=_loc(doc, item))
                )
        memory = service.get("mem_limit")
        workload = Workload(
            name=f"service {name}",
            file=doc.name,
            source="compose",
            image=image,
            image_location=_loc(doc, image_item) if image_item is not None else None,
            env=env + script_env,
            memory_limit_gib=_memory_limit(doc, memory, deployment.notes),
            location=Location(file=doc.name, line=service.line, path=service.path),
        )
        _compose_resources(service, workload)
        command = service.get("command")
        if found.problem and command is not None and isinstance(command.value, str):
            found.problem += " (compose splits a command: string into words: write command: as a list of one item)"
        _started_as_written(workload, found, deployment.notes)
        _read_args(workload, args, unresolved | found.unresolved, found.emptied)
        deployment.workloads.append(workload)


# What the production-stack chart's engine template (helm/templates/deployment-vllm-multi.yaml of
# vllm-project/production-stack) writes from a modelSpec: these vllmConfig keys become flags; a
# vllmConfig without enablePrefixCaching true gets --no-enable-prefix-caching; lmcacheConfig sets the
# LMCache variables below and, when enabled, the LMCacheConnectorV1 --kv-transfer-config with its kvRole;
# PYTHONHASHSEED is always "123"; tensorParallelSize mounts a memory emptyDir on /dev/shm of shmSize
# (default 20Gi); enablePD sets hostIPC; requestMemory / requestGPU / limitMemory are the container's
# resources (_helpers.tpl, chart.resources).
_STACK_FLAGS = {
    "maxModelLen": "--max-model-len",
    "dtype": "--dtype",
    "tensorParallelSize": "--tensor-parallel-size",
    "maxNumSeqs": "--max-num-seqs",
    "gpuMemoryUtilization": "--gpu-memory-utilization",
    "maxLoras": "--max-loras",
}
# lmcacheConfig keys the template copies into a variable, as written.
_STACK_LMCACHE_ENV = {
    "diskOffloadingBufferSize": "LMCACHE_MAX_LOCAL_DISK_SIZE",
    "nixlRole": "LMCACHE_NIXL_ROLE",
    "nixlPeerHost": "LMCACHE_NIXL_RECEIVER_HOST",
    "nixlPeerPort": "LMCACHE_NIXL_RECEIVER_PORT",
    "nixlBufferSize": "LMCACHE_NIXL_BUFFER_SIZE",
    "nixlBufferDevice": "LMCACHE_NIXL_BUFFER_DEVICE",
    "instanceId": "LMCACHE_LMCACHE_INSTANCE_ID",
    "workerPorts": "LMCACHE_LMCACHE_WORKER_PORTS",
    "p2pHost": "LMCACHE_P2P_HOST",
    "p2pInitPorts": "LMCACHE_P2P_INIT_PORTS",
    "cudaVisibleDevices": "CUDA_VISIBLE_DEVICES",
}
_STACK_LMCACHE_SWITCHES = {
    "enableNixl": "LMCACHE_ENABLE_NIXL",
    "nixlEnableGc": "LMCACHE_NIXL_ENABLE_GC",
    "enableController": "LMCACHE_ENABLE_CONTROLLER",
}


def _parse_helm_values(doc: Document, root: _Located, deployment: Deployment) -> bool:
    """Values of the production-stack chart or of vLLM's example chart; false when neither."""
    stack = root.get("servingEngineSpec")
    if stack is not None and stack.get("modelSpec") is not None:
        cache_server = root.get("cacheserverSpec")
        deployment.workloads += [
            _stack_model_spec(doc, spec, cache_server, deployment.notes) for spec in stack.get("modelSpec").items()
        ]
        return True
    image_values = root.get("image")
    if image_values is not None and image_values.get("command") is not None:
        workload = _example_chart_values(doc, root, image_values)
        if workload is None:
            return False
        deployment.workloads.append(workload)
        return True
    return False


def _stack_model_spec(doc: Document, spec: _Located, cache_server: _Located | None, notes: list[str]) -> Workload:
    """One ``servingEngineSpec.modelSpec`` entry of the production-stack chart, as its template renders it."""
    name = _text_of(spec.get("name")) if spec.get("name") else "model"
    repo = _text_of(spec.get("repository")) if spec.get("repository") else None
    tag = _text_of(spec.get("tag")) if spec.get("tag") else None
    workload = Workload(
        name=f"servingEngineSpec.modelSpec {name}",
        file=doc.name,
        source="helm-values",
        image=f"{repo}:{tag}" if repo and tag else repo,
        image_location=_loc(doc, spec.get("tag") or spec.get("repository") or spec),
        location=_loc(doc, spec),
        replicas=_whole_number(doc, spec.get("replicaCount"), "replicaCount", 0, 1_000_000, notes),
    )
    where = _loc(doc, spec)
    workload.env.append(EnvUse(name="PYTHONHASHSEED", value="123", location=where))
    url = spec.get("modelURL")
    if url is not None:
        workload.model, workload.model_location = _text_of(url), _loc(doc, url)
    args = _stack_flags(doc, spec.get("vllmConfig"), where)
    lmcache = spec.get("lmcacheConfig")
    if lmcache is not None and isinstance(lmcache.value, dict):
        args += _stack_lmcache(doc, lmcache, workload, cache_server)
    for item in spec.get("env").items() if spec.get("env") else []:
        if item.get("name") is not None:
            value = item.get("value")
            workload.env.append(
                EnvUse(
                    name=_text_of(item.get("name")),
                    value=_text_of(value) if value is not None else None,
                    reference=None if value is not None else "valueFrom",
                    location=_loc(doc, item),
                )
            )
    _stack_resources(doc, spec, workload, notes)
    _read_args(workload, args)
    return workload


def _stack_flags(doc: Document, config: _Located | None, where: Location) -> list[tuple[str, Location]]:
    """The flags the template writes from ``vllmConfig``."""
    if config is None or not isinstance(config.value, dict):
        return []
    args: list[tuple[str, Location]] = []
    chunked = config.get("enableChunkedPrefill")
    if chunked is not None:
        on = chunked.value is True or _text_of(chunked).lower() == "true"
        args.append(("--enable-chunked-prefill" if on else "--no-enable-chunked-prefill", _loc(doc, chunked)))
    prefix = config.get("enablePrefixCaching")
    prefix_on = prefix is not None and (prefix.value is True or _text_of(prefix).lower() == "true")
    args.append(
        (
            "--enable-prefix-caching" if prefix_on else "--no-enable-prefix-caching",
            _loc(doc, prefix) if prefix is not None else _loc(doc, config),
        )
    )
    for key, flag in _STACK_FLAGS.items():
        item = config.get(key)
        if item is not None:
            args += [(flag, _loc(doc, item)), (_text_of(item), _loc(doc, item))]
    extra = config.get("extraArgs")
    return args + _words_from_list(doc, extra.items() if extra else [], "")


def _stack_lmcache(
    doc: Document, lmcache: _Located, workload: Workload, cache_server: _Located | None
) -> list[tuple[str, Location]]:
    """The variables and --kv-transfer-config the template writes from ``lmcacheConfig``."""
    env = workload.env

    def setting(key: str) -> _Located | None:
        found = lmcache.get(key)
        return found if isinstance(found, _Located) else None

    def on(key: str) -> bool:
        item = setting(key)
        return item is not None and (item.value is True or _text_of(item).lower() == "true")

    args: list[tuple[str, Location]] = []
    where = _loc(doc, setting("enabled") or lmcache)
    pd = setting("enablePD") is not None
    if on("enabled"):
        role = _text_of(setting("kvRole")) if setting("kvRole") is not None else "kv_both"
        config: dict[str, Any] = {"kv_connector": "LMCacheConnectorV1", "kv_role": role}
        if pd:
            rpc = _text_of(setting("nixlRole")) if setting("nixlRole") is not None else ""
            config["kv_connector_extra_config"] = {"discard_partial_chunks": False, "lmcache_rpc_port": rpc}
        args += [("--kv-transfer-config", where), (json.dumps(config), where)]
        env.append(EnvUse(name="LMCACHE_USE_EXPERIMENTAL", value="True", location=where))
    if on("enablePD"):
        pd_where = _loc(doc, setting("enablePD") or lmcache)
        workload.host_ipc = True
        env += [
            EnvUse(name="LMCACHE_LOCAL_CPU", value="False", location=pd_where),
            EnvUse(name="LMCACHE_MAX_LOCAL_CPU_SIZE", value="0", location=pd_where),
            EnvUse(name="LMCACHE_REMOTE_SERDE", value="NULL", location=pd_where),
        ]
    for key, variable in _STACK_LMCACHE_SWITCHES.items():
        switch = setting(key)
        if switch is not None:
            env.append(EnvUse(name=variable, value="True" if on(key) else "False", location=_loc(doc, switch)))
    size = setting("cpuOffloadingBufferSize")
    if size is not None and (parse_number(_text_of(size)) or 0) > 0:
        env += [
            EnvUse(name="LMCACHE_LOCAL_CPU", value="True", location=_loc(doc, size)),
            EnvUse(name="LMCACHE_MAX_LOCAL_CPU_SIZE", value=_text_of(size), location=_loc(doc, size)),
        ]
    for key, variable in _STACK_LMCACHE_ENV.items():
        item = setting(key)
        if item is not None:
            env.append(EnvUse(name=variable, value=_text_of(item), location=_loc(doc, item)))
    if cache_server is not None:
        port = cache_server.get("servicePort")
        url = f"lm://<release>-cache-server-service:{_text_of(port)}" if port is not None else None
        env.append(
            EnvUse(
                name="LMCACHE_REMOTE_URL",
                value=url,
                reference=None if url else "cacheserverSpec",
                location=_loc(doc, cache_server),
            )
        )
    return args


def _stack_resources(doc: Document, spec: _Located, workload: Workload, notes: list[str]) -> None:
    """requestMemory, limitMemory, requestGPU and the /dev/shm the template mounts for tensorParallelSize."""
    if spec.get("requestMemory") is not None:
        workload.memory_request_gib = _memory_limit(doc, spec.get("requestMemory"), notes)
    if spec.get("limitMemory") is not None:
        workload.memory_limit_gib = _memory_limit(doc, spec.get("limitMemory"), notes)
    if spec.get("requestGPU") is not None:
        workload.gpu_count = _whole_number(doc, spec.get("requestGPU"), "requestGPU", 0, 1_000, notes, quantity=True)
    config = spec.get("vllmConfig")
    if config is not None and config.get("tensorParallelSize") is not None:
        shm = spec.get("shmSize")
        workload.shm_mounted, workload.shm_gib = True, _memory_limit(doc, shm, notes) if shm is not None else 20.0


def _example_chart_values(doc: Document, root: _Located, image_values: _Located) -> Workload | None:
    """vLLM's example chart: ``image.command`` starts the server; None when it starts something else."""
    repo = image_values.get("repository")
    tag = image_values.get("tag")
    ref = f"{_text_of(repo)}:{_text_of(tag)}" if repo is not None and tag is not None else None
    argv = _words_from_list(doc, image_values.each("command"), "")
    found = _launch_from_argv(doc, argv, ref)
    if found is None:
        return None
    workload = Workload(
        name="image.command",
        file=doc.name,
        source="helm-values",
        image=ref,
        image_location=_loc(doc, tag or repo or image_values),
        env=found.env,
        location=_loc(doc, image_values),
    )
    for item in root.get("env").items() if root.get("env") else []:
        if item.get("name") is not None and item.get("value") is not None:
            workload.env.append(
                EnvUse(name=_text_of(item.get("name")), value=_text_of(item.get("value")), location=_loc(doc, item))
            )
    _read_args(workload, found.args, found.unresolved, found.emptied)
    return workload


def _lmcache_keys(knowledge: Knowledge) -> frozenset[str]:
    """The keys of LMCache's config file: its LMCACHE_* variables, lower case without the prefix."""
    return frozenset(
        s.name[len("LMCACHE_") :].lower()
        for s in knowledge.settings
        if s.component == "lmcache" and s.name.startswith("LMCACHE_")
    )


_LMCACHE_KEYS = PerKnowledge(_lmcache_keys)


def _maybe_lmcache_config(
    name: str,
    text: str,
    deployment: Deployment,
    totals: _Totals,
    first_line: int,
    lmcache_keys: frozenset[str],
    known_as: str,
) -> bool:
    """Read ``text`` as an LMCache config file when it is one (its first line is ``first_line`` of file ``name``;
    ``known_as``: the ConfigMap key it is stored under, which a mount makes its file name)."""
    try:
        roots = _load_yaml(name, text, totals, first_line)
    except AdviceError:
        if totals.yaml_nodes > MAX_YAML_NODES:
            raise
        return False
    return _lmcache_config(name, roots, deployment, lmcache_keys, known_as)


def _lmcache_config(
    name: str, roots: list[_Located], deployment: Deployment, lmcache_keys: frozenset[str], known_as: str | None = None
) -> bool:
    """Read the YAML documents of file ``name`` as an LMCache config file when they are one."""
    if len(roots) != 1 or not isinstance(roots[0].value, dict):
        return False
    root = roots[0]
    keys = set(root.value)
    if not keys or not keys & lmcache_keys:
        return False
    env = []
    for key, item in root.value.items():
        value = item.plain()
        # default=str: YAML also builds dates, timestamps and bytes, which JSON has no type for
        shown = json.dumps(value, default=str) if isinstance(value, (dict, list)) else _text_of(item)
        env.append(
            EnvUse(name="LMCACHE_" + key.upper(), value=shown, location=Location(file=name, line=item.line, path=key))
        )
    deployment.lmcache_configs.append(LMCacheConfig(name=known_as or name, env=env))
    return True


# ---------------------------------------------------------------------------------------------
# kustomize: the resources a kustomization names, with its patches and image rewrites applied

_KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# Lists a strategic merge joins item by item, by this key (the patchMergeKey of the Kubernetes API).
# Another list of mappings is joined by name when every item has one, as kustomize does for kinds it
# has no schema for (LeaderWorkerSet); any other list (args, command) is replaced.
_MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "env": "name", "volumes": "name",
    "volumeMounts": "mountPath", "ports": "containerPort", "imagePullSecrets": "name",
}  # fmt: skip
# A patch is copied into every object it selects: bounded like YAML aliases, so a patch selecting
# every object of a large file, in many overlays, costs no more than a large file does.
MAX_PATCHED_NODES = 1_000_000
_RESOURCE_FILE = (".yaml", ".yml", ".json")


@dataclass
class _Patch:
    source: str  # where it is written, for notes: "kustomization.yaml:4 (patches[0]) patch.yaml"
    objects: list[_Located]  # a strategic-merge patch: the objects it merges in
    operations: list[_Located]  # a JSON 6902 patch: its operations
    target: dict[str, str] | None  # the target selector given; else each patch object selects its kind and name
    applied: int = 0  # objects it was applied to, over every build


@dataclass
class _Overlay:
    """One kustomization: what it includes, its patches and image rewrites, in the order kustomize applies them."""

    name: str
    resources: list[_Located]
    patches: list[_Patch]
    images: list[_Located]


@dataclass
class _Builds:
    """What the kustomizations among the documents build."""

    # resource document → the overlays of each build that includes it, innermost (the base's own) first
    chains: dict[str, list[list[_Overlay]]] = field(default_factory=dict)
    consumed: set[str] = field(default_factory=set)  # kustomizations and patches: read through what they patch
    overlays: list[_Overlay] = field(default_factory=list)

    def unapplied(self) -> list[str]:
        return [
            f"{patch.source}: its target ({_selector_text(patch)}) is not among the files; the patch is not applied"
            for overlay in self.overlays
            for patch in overlay.patches
            if not patch.applied
        ]


def _is_kustomization(name: str) -> bool:
    return name.rsplit("/", 1)[-1] in _KUSTOMIZATION_FILES


def _at(name: str, item: _Located) -> Location:
    return Location(file=item.file or name, line=item.line, path=item.path or None)


def _documents_at(path: str, here: str, names: list[str]) -> list[str]:
    """The documents a kustomization's relative ``path`` may name: those sharing the most trailing path
    parts with it (documents are often given by their file name alone)."""
    wanted = posixpath.normpath(posixpath.join(here, path)).split("/")
    best: list[str] = []
    score = 0
    for name in names:
        parts = posixpath.normpath(name).split("/")
        common = 0
        while common < min(len(parts), len(wanted)) and parts[-1 - common] == wanted[-1 - common]:
            common += 1
        if common and common > score:
            best, score = [name], common
        elif common and common == score:
            best.append(name)
    return best


def _mark_file(node: _Located, name: str) -> None:
    node.file = name
    for child in node.value.values() if isinstance(node.value, dict) else node.items():
        _mark_file(child, name)


def _read_builds(documents: list[Document], totals: _Totals) -> tuple[_Builds, list[str]]:
    """Every kustomization among the documents, which resource documents each build patches, and notes."""
    builds, notes = _Builds(), list[str]()
    overlays: dict[str, _Overlay] = {}
    for index, doc in enumerate(documents):
        if _is_kustomization(doc.name):
            with _reading(index):
                roots = _load_yaml(doc.name, doc.text, totals)
                if len(roots) != 1 or not isinstance(roots[0].value, dict):
                    raise AdviceError("text", f"{doc.name}: a kustomization is one YAML mapping")
                overlays[doc.name] = _read_kustomization(doc.name, roots[0], documents, totals, builds, notes)
    builds.consumed |= overlays.keys()
    builds.overlays = list(overlays.values())
    names = [d.name for d in documents]
    nested = {
        inner
        for overlay in overlays.values()
        for item in overlay.resources
        for inner in _kustomization_at(_text_of(item), overlay.name, list(overlays))
    }
    for name, overlay in overlays.items():
        if name not in nested:
            for resource, chain in _build(overlay, overlays, names, notes, (name,)):
                builds.chains.setdefault(resource, []).append(chain)
    return builds, notes


def _kustomization_at(resource: str, kustomization: str, kustomizations: list[str]) -> list[str]:
    """The kustomization among the documents that a directory resource names, as a list of none or one."""
    if resource.endswith(_RESOURCE_FILE):
        return []
    here = posixpath.dirname(kustomization)
    found = [k for f in _KUSTOMIZATION_FILES for k in _documents_at(f"{resource}/{f}", here, kustomizations)]
    # Given by file name alone, every kustomization shares one part with the path: the directory must match too.
    found = [k for k in found if k != kustomization and "/" in k]
    return found if len(found) == 1 else []


def _build(
    overlay: _Overlay, overlays: dict[str, _Overlay], names: list[str], notes: list[str], seen: tuple[str, ...]
) -> list[tuple[str, list[_Overlay]]]:
    """(resource document, overlays innermost first) for what ``overlay`` builds."""
    found: list[tuple[str, list[_Overlay]]] = []
    here = posixpath.dirname(overlay.name)
    for item in overlay.resources:
        resource = _text_of(item)
        inner = _kustomization_at(resource, overlay.name, list(overlays))
        if inner and inner[0] not in seen:
            below = _build(overlays[inner[0]], overlays, names, notes, (*seen, inner[0]))
            found += [(document, [*chain, overlay]) for document, chain in below]
            continue
        matches = [m for m in _documents_at(resource, here, names) if not _is_kustomization(m)]
        if len(matches) == 1 and resource.endswith(_RESOURCE_FILE):
            found.append((matches[0], [overlay]))
            continue
        what = f"matches several documents ({', '.join(matches)})" if len(matches) > 1 else "is not among the documents"
        notes.append(f"{_at(overlay.name, item)}: resource {_clip(resource, 200)} {what}; its objects are not reviewed")
    return found


def _read_kustomization(
    name: str, root: _Located, documents: list[Document], totals: _Totals, builds: _Builds, notes: list[str]
) -> _Overlay:
    for key in ("resources", "bases", "images", "patchesStrategicMerge", "patches", "patchesJson6902"):
        given = root.get(key)
        if given is not None and not isinstance(given.value, list):
            notes.append(f"{_at(name, given)}: {key} takes a list; what is given is not read")
    overlay = _Overlay(name=name, resources=root.each("resources") + root.each("bases"), patches=[], images=[])
    overlay.images = [i for i in root.each("images") if isinstance(i.value, dict) and i.get("name") is not None]
    for key in ("patchesStrategicMerge", "patches", "patchesJson6902"):
        for entry in root.each(key):
            patch = _read_patch(name, entry, documents, totals, builds, notes)
            if patch is not None:
                overlay.patches.append(patch)
    return overlay


def _read_patch(
    name: str, entry: _Located, documents: list[Document], totals: _Totals, builds: _Builds, notes: list[str]
) -> _Patch | None:
    """One entry of patches / patchesStrategicMerge / patchesJson6902: a file among the documents or inline."""
    where = _at(name, entry)
    inline = entry.get("patch") if isinstance(entry.value, dict) else entry if "\n" in _text_of(entry) else None
    path = entry.get("path") if isinstance(entry.value, dict) else None if inline is not None else entry
    if inline is not None:
        roots = _load_yaml(name, _text_of(inline), totals, inline.line + (1 if inline.block else 0))
        file, source = name, f"{where}"
    elif path is not None:
        matches = _documents_at(_text_of(path), posixpath.dirname(name), [d.name for d in documents])
        if len(matches) != 1:
            notes.append(f"{where}: patch {_clip(_text_of(path), 200)} is not among the documents; it is not applied")
            return None
        [document] = [d for d in documents if d.name == matches[0]]
        roots = _load_yaml(document.name, document.text, totals)
        file, source = document.name, f"{where} {document.name}"
        builds.consumed.add(document.name)
    else:
        notes.append(f"{where}: a patch entry without path or patch; it is not applied")
        return None
    for node in roots:
        _mark_file(node, file)
    target_item = entry.get("target") if isinstance(entry.value, dict) else None
    target = None
    if target_item is not None and isinstance(target_item.value, dict):
        target = {k: _text_of(v) for k, v in target_item.value.items() if not isinstance(v.value, (dict, list))}
    problem = _target_problem(target) if target is not None else None
    if problem is not None:
        notes.append(f"{where}: {problem}; the patch is not applied")
        return None
    if len(roots) == 1 and isinstance(roots[0].value, list):
        if target is None:
            notes.append(f"{where}: a JSON 6902 patch without a target; it is not applied")
            return None
        return _Patch(source=source, objects=[], operations=roots[0].items(), target=target)
    return _Patch(source=source, objects=[r for r in roots if isinstance(r.value, dict)], operations=[], target=target)


# A target's name is a regular expression (Go's, which takes linear time); Python's backtracks, so only
# patterns that cannot backtrack far are evaluated: names, dots, stars and alternatives, a few stars.
_SIMPLE_NAME_PATTERN = re.compile(r"\^?[\w.\-|*]*\$?")
_LABEL_TERM = re.compile(r"(!?)([^=!\s]+)\s*(?:(==|=|!=)\s*(\S*))?")


def _target_problem(target: dict[str, str]) -> str | None:
    """Why this reader cannot evaluate a patch target, when it cannot."""
    name = target.get("name", "")
    if not _SIMPLE_NAME_PATTERN.fullmatch(name) or name.count("*") > 4:
        shown = _clip(name, 100)
        return f"the target name {shown!r} is a regular expression not evaluated here (only names, ., * and |)"
    terms = [t.strip() for t in target.get("labelSelector", "").split(",") if t.strip()]
    if not all(_LABEL_TERM.fullmatch(t) for t in terms):
        return "its labelSelector is not read here (only equality terms: app=x, app!=x, app, !app)"
    return None


def _selector_text(patch: _Patch) -> str:
    if patch.target is not None:
        return ", ".join(f"{k} {v}" for k, v in patch.target.items())
    return "; ".join(f"{_text_of(o.get('kind'))}/{_object_name(o)}" for o in patch.objects)


def _object_name(obj: _Located) -> str:
    meta = obj.get("metadata")
    return _text_of(meta.get("name")) if meta is not None and meta.get("name") is not None else ""


def _selects(obj: _Located, selector: Mapping[str, str], name_pattern: bool) -> bool:
    """Whether a target selector (kind, name, namespace, group, version, labelSelector) picks ``obj``."""
    meta = obj.get("metadata")
    group, _, version = _text_of(obj.get("apiVersion")).rpartition("/")
    namespace = _text_of(meta.get("namespace")) if meta is not None and meta.get("namespace") is not None else ""
    labels = meta.get("labels").plain() if meta is not None and meta.get("labels") is not None else {}
    wanted_name = selector.get("name")
    if wanted_name is not None:
        if not name_pattern:
            wanted_name = re.escape(wanted_name)
        try:  # kustomize reads a target's name as an anchored regular expression
            if re.fullmatch(wanted_name, _object_name(obj)) is None:
                return False
        except re.error:
            if selector["name"] != _object_name(obj):
                return False
    checks = (("kind", _text_of(obj.get("kind"))), ("group", group), ("version", version))
    if any(key in selector and selector[key] != actual for key, actual in checks):
        return False
    if selector.get("namespace") and namespace and selector["namespace"] != namespace:
        return False
    return _labels_match(selector.get("labelSelector"), labels if isinstance(labels, dict) else {})


def _labels_match(selector: str | None, labels: dict[str, Any]) -> bool:
    """A label selector of equality terms (``app=vllm,tier!=cache``, ``app``, ``!app``), as kustomize reads one."""
    for term in filter(None, (t.strip() for t in (selector or "").split(","))):
        m = _LABEL_TERM.fullmatch(term)
        if m is None:
            return False
        negated, key, op, value = m.groups()
        if op is None:
            if (key in labels) == bool(negated):
                return False
        elif (key in labels and str(labels[key]) == value) == (op == "!="):
            return False
    return True


class _Patcher:
    """Applies the patches of a build to the objects of one resource document."""

    def __init__(self, totals: _Totals, notes: list[str]) -> None:
        self.totals = totals
        self.notes = notes

    def apply(self, doc: Document, objects: list[_Located], chain: list[_Overlay]) -> None:
        for overlay in chain:
            applied: list[str] = []
            for patch in overlay.patches:
                if self.patch(objects, patch):
                    applied.append(patch.source)
            for obj in objects:
                _rewrite_images(obj, overlay)
            with_patches = f", with {'; '.join(applied)}" if applied else ""
            self.notes.append(f"{doc.name}: reviewed as {overlay.name} builds it{with_patches}")

    def patch(self, objects: list[_Located], patch: _Patch) -> bool:
        """Apply one patch to the objects it selects; whether it selected any."""
        selected = 0
        for obj in objects:
            if patch.operations and patch.target is not None and _selects(obj, patch.target, True):
                selected += 1
                for operation in patch.operations:
                    self.operate(obj, operation, patch.source)
            for patch_object in patch.objects:
                if patch.target is not None:
                    chosen = _selects(obj, patch.target, True)
                else:
                    own = {"kind": _text_of(patch_object.get("kind")), "name": _object_name(patch_object)}
                    chosen = _selects(obj, own, False)
                if chosen:
                    selected += 1
                    self.merge(obj, patch_object)
        patch.applied += selected
        return selected > 0

    def copy(self, node: _Located, parent: _Located, step: str) -> _Located:
        self.totals.patched_nodes += 1
        if self.totals.patched_nodes > MAX_PATCHED_NODES:
            raise AdviceError(
                "documents",
                f"kustomize patches copy more than {MAX_PATCHED_NODES:,} values into the objects they select; "
                "no deployment's overlays are that large",
            )
        new = _Located(node.line, parent, step)
        new.file, new.block = node.file, node.block
        if isinstance(node.value, dict):
            new.value = {
                k: self.copy(v, new, "." + _clip(k, _PATH_KEY_CHARS)) for k, v in node.value.items() if k[:1] != "$"
            }
        elif isinstance(node.value, list):
            new.value = [self.copy(v, new, f"[{i}]") for i, v in enumerate(node.items())]
        else:
            new.value = node.value
        return new

    def merge(self, base: _Located, patch: _Located) -> None:
        """A strategic merge of mapping ``patch`` into mapping ``base``, with its $patch directives."""
        if _directive(patch) == "replace":
            base.value = self.copy(patch, base.parent or base, base.step).value
            for child in base.value.values():
                child.parent = base
            return
        for key, item in patch.value.items():
            if key.startswith("$"):
                continue  # $patch, $setElementOrder/…, $retainKeys: directives, not fields
            current = base.value.get(key)
            if item.value is None or _directive(item) == "delete":
                base.value.pop(key, None)
            elif current is not None and isinstance(current.value, dict) and isinstance(item.value, dict):
                self.merge(current, item)
            elif current is not None and isinstance(current.value, list) and isinstance(item.value, list):
                merge_key = _merge_key(key, current.items() + item.items())
                if merge_key is None:
                    base.value[key] = self.copy(item, base, current.step)
                else:
                    self.merge_list(current, item, merge_key)
            else:
                base.value[key] = self.copy(item, base, "." + _clip(key, _PATH_KEY_CHARS))

    def merge_list(self, base: _Located, patch: _Located, key: str) -> None:
        for item in patch.items():
            ident = item.get(key) if isinstance(item.value, dict) else None
            match = next((b for b in base.items() if ident is not None and _same_key(b, key, ident)), None)
            if _directive(item) == "delete":
                if match is not None:
                    base.value.remove(match)
            elif match is not None and isinstance(match.value, dict):
                self.merge(match, item)
            else:
                base.value.append(self.copy(item, base, f"[{len(base.value)}]"))
        _renumber(base)

    def operate(self, obj: _Located, operation: _Located, source: str) -> None:
        """One JSON 6902 operation (add, replace, remove) on ``obj``; a note when it cannot be applied."""
        op, path = _text_of(operation.get("op")), _text_of(operation.get("path"))
        shown = f"{source}: {_clip(op, 20)} {_clip(path, 200)} on {_text_of(obj.get('kind'))}/{_object_name(obj)}"
        if op not in ("add", "replace", "remove"):
            self.notes.append(f"{shown}: only add, replace and remove are applied here; this operation is not")
            return
        value = operation.get("value")
        steps = [s.replace("~1", "/").replace("~0", "~") for s in path.split("/")[1:]] if path[:1] == "/" else []
        parent: _Located | None = obj
        for step in steps[:-1]:
            parent = _child(parent, step) if parent is not None else None
        if not steps or parent is None or (op != "remove" and value is None):
            self.notes.append(f"{shown}: the path is not in the object, or the value is missing; it is not applied")
            return
        if not self.operate_at(parent, steps[-1], op, value):
            self.notes.append(f"{shown}: {steps[-1]!r} is not there to {op}; it is not applied")

    def operate_at(self, parent: _Located, last: str, op: str, value: _Located | None) -> bool:
        if isinstance(parent.value, dict):
            if op != "add" and last not in parent.value:
                return False
            if op == "remove":
                del parent.value[last]
            else:
                assert value is not None
                parent.value[last] = self.copy(value, parent, "." + _clip(last, _PATH_KEY_CHARS))
            return True
        if not isinstance(parent.value, list):
            return False
        count = len(parent.value)
        index = count if last == "-" and op == "add" else int(last) if last.isdigit() else count + 1
        if index > count or (op != "add" and index == count):
            return False
        if op == "remove":
            del parent.value[index]
        else:
            assert value is not None
            new = self.copy(value, parent, "")
            parent.value[index : index + (op == "replace")] = [new]
        _renumber(parent)
        return True


def _same_key(item: _Located, key: str, ident: _Located) -> bool:
    own = item.get(key)
    return own is not None and bool(own.value == ident.value)


def _directive(node: _Located) -> str | None:
    found = node.get("$patch") if isinstance(node.value, dict) else None
    return _text_of(found) if found is not None else None


def _merge_key(field_name: str, items: list[_Located]) -> str | None:
    if not items or not all(isinstance(i.value, dict) for i in items):
        return None
    if field_name in _MERGE_KEYS:
        return _MERGE_KEYS[field_name]
    return "name" if all("name" in i.value for i in items) else None


def _child(node: _Located, step: str) -> _Located | None:
    if isinstance(node.value, dict):
        found: _Located | None = node.get(step)
        return found
    items = node.items()
    return items[int(step)] if step.isdigit() and int(step) < len(items) else None


def _renumber(node: _Located) -> None:
    for i, item in enumerate(node.items()):
        item.step, item.parent = f"[{i}]", node


def _image_nodes(node: _Located) -> Iterator[_Located]:
    """The image of every container and init container under ``node``."""
    if not isinstance(node.value, dict):
        yield from (found for child in node.items() for found in _image_nodes(child))
        return
    for key, child in node.value.items():
        if key in ("containers", "initContainers"):
            yield from (c.get("image") for c in child.items() if c.get("image") is not None)
        elif isinstance(child.value, (dict, list)):
            yield from _image_nodes(child)


def _rewrite_images(obj: _Located, overlay: _Overlay) -> None:
    """kustomize's images: an image named ``name`` becomes newName, with newTag or digest, where it is set."""
    rules = {_text_of(entry.get("name")): entry for entry in overlay.images}
    for node in _image_nodes(obj) if rules else ():
        image = _text_of(node)
        name, tag = (image.split("@", 1)[0], "@" + image.split("@", 1)[1]) if "@" in image else (image, "")
        if not tag and ":" in name.rsplit("/", 1)[-1]:
            name, tag = name[: name.rindex(":")], name[name.rindex(":") :]
        entry = rules.get(name)
        if entry is None:
            continue
        new_name, new_tag, digest = (entry.get(k) for k in ("newName", "newTag", "digest"))
        tag = "@" + _text_of(digest) if digest is not None else ":" + _text_of(new_tag) if new_tag is not None else tag
        node.value = (_text_of(new_name) if new_name is not None else name) + tag
        setter = digest or new_tag or new_name or entry
        node.file, node.line, node.block = overlay.name, setter.line, False


@contextmanager
def _reading(index: int) -> Iterator[None]:
    """An AdviceError about a document's text, said of ``documents[index].text``."""
    try:
        yield
    except AdviceError as exc:
        if exc.field != "text":
            raise
        raise AdviceError(f"documents[{index}].text", str(exc).removeprefix("text: ")) from None


@dataclass
class _Totals:
    """What the documents of one call hold so far, checked against the bounds as it grows."""

    counted: int = 0  # workloads added to the sums below
    flags: int = 0
    env: int = 0
    yaml_nodes: int = 0  # counted by _check_yaml_shape, which enforces MAX_YAML_NODES itself
    patched_nodes: int = 0  # values kustomize patches copied in, bounded by MAX_PATCHED_NODES

    def check(self, deployment: Deployment) -> None:
        for workload in deployment.workloads[self.counted :]:
            self.flags += len(workload.flags)
            self.env += len(workload.env)
        self.counted = len(deployment.workloads)
        if self.counted > MAX_WORKLOADS:
            raise AdviceError(
                "documents",
                f"more than {MAX_WORKLOADS:,} vLLM servers in the documents; review at most {MAX_WORKLOADS:,} in one "
                "call",
            )
        if self.flags > MAX_ARGUMENTS:
            raise AdviceError(
                "documents",
                f"more than {MAX_ARGUMENTS:,} vLLM arguments in all the documents; no deployment has that many",
            )
        if self.env > MAX_ARGUMENTS:
            raise AdviceError(
                "documents",
                f"more than {MAX_ARGUMENTS:,} environment variables set for the vLLM servers in all; no deployment "
                "sets that many",
            )


def _read_document(
    doc: Document,
    deployment: Deployment,
    totals: _Totals,
    proxy_scripts: list[str],
    lmcache_keys: frozenset[str],
    dotenv: dict[str, str] | None = None,
    build: list[_Overlay] | None = None,
) -> None:
    """Add the workloads of one document, as the kustomize ``build`` (overlays innermost first) patches it
    when it is a resource of one; AdviceError("text", ...) when its text cannot be read."""
    deployment.proxies += _proxy_uses(doc, proxy_scripts)
    # Everything is tried as YAML first: shell text reads as one plain scalar (or, for a `{ …; }`
    # group, as a flow mapping no reader claims).
    yaml_named = doc.name.lower().endswith((".yaml", ".yml"))
    try:
        roots = _load_yaml(doc.name, doc.text, totals)
    except AdviceError:
        if yaml_named:
            raise
        roots = []
    mappings = [r for r in roots if isinstance(r.value, dict)]
    if mappings and build:
        _Patcher(totals, deployment.notes).apply(doc, mappings, build)
    if mappings:
        before = len(deployment.workloads)
        if any(m.get("kind") is not None and m.get("apiVersion") is not None for m in mappings):
            _parse_kubernetes(doc, mappings, deployment, totals, lmcache_keys)
        elif mappings[0].get("services") is not None:
            _parse_compose(doc, mappings[0], deployment, dotenv or {})
        elif not (
            _parse_helm_values(doc, mappings[0], deployment)
            or _lmcache_config(doc.name, roots, deployment, lmcache_keys)
        ):
            if not yaml_named:  # `{ vllm serve …; }` is a YAML flow mapping too: a shell group here
                _read_shell_document(doc, deployment, totals)
                return
            deployment.notes.append(
                f"{doc.name}: a YAML file that is no manifest, compose file, Helm values or LMCache config"
            )
        if len(deployment.workloads) == before and not deployment.lmcache_configs:
            deployment.notes.append(f"{doc.name}: no vLLM server found in it")
        return
    _read_shell_document(doc, deployment, totals)


def _read_shell_document(doc: Document, deployment: Deployment, totals: _Totals) -> None:
    for n, launch in enumerate(_parse_shell(doc, notes=deployment.notes)):
        workload = Workload(
            name=f"{'docker run' if launch.source == 'docker-run' else 'vllm'} #{n + 1}",
            file=doc.name,
            source=launch.source,
            env=launch.env,
            image=launch.image[0] if launch.image else None,
            image_location=launch.image[1] if launch.image else None,
            location=launch.location or Location(file=doc.name, line=1),
        )
        _docker_resources(workload, launch.options)
        _read_args(workload, launch.args, launch.unresolved, launch.emptied)
        if launch.image is not None and launch.image[0] in launch.unresolved:
            workload.unresolved.append(
                f"{launch.image[1]}: the image {launch.image[0]}: {launch.unresolved[launch.image[0]]}"
            )
        deployment.workloads.append(workload)
        totals.check(deployment)  # as they come: a text of 100,000 servers stops at the first past the bound


# `vllm serve` (quoted, escaped or split by a line continuation as the shell allows) or a vLLM entry point.
_LAUNCH_MARKER = re.compile(r"""\bvllm['",\\\s$]{1,8}serve\b|\bvllm\.entrypoints\.""")


# Commands that find, stop, print or log a process by its command line: `pkill -f "vllm serve"` in a
# stop script names the launch, it does not start it.
_NAMES_WITHOUT_RUNNING = {
    "pkill", "pgrep", "killall", "pidof", "ps", "grep", "egrep", "fgrep", "rg", "echo", "printf", "logger", "tail",
}  # fmt: skip


def _starts_a_launch(line: str) -> bool:
    """Whether ``line`` names a vLLM launch in a command that may run it (not only a stop, a search or a print)."""
    for command in _commands(tokenize_shell(line)):
        words = [t.text for t in command]
        while words and (words[0] in _WRAPPERS or words[0] in ("sudo", "!") or _ASSIGNMENT.match(words[0])):
            words = words[1:]
        if any(_LAUNCH_MARKER.search(w) for w in words) and not (words and words[0] in _NAMES_WITHOUT_RUNNING):
            return True
    return False


def _unread_launch(doc: Document) -> UnreadLaunch | None:
    """The first line outside comments that names a vLLM launch, for a document that gave no workload."""
    for number, line in enumerate(doc.text.splitlines(), 1):
        if not line.lstrip().startswith("#") and _LAUNCH_MARKER.search(line) and _starts_a_launch(line):
            return UnreadLaunch(location=Location(file=doc.name, line=number), text=_clip(line.strip(), 120))
    return None


def parse_documents(documents: list[Document], knowledge: Knowledge) -> Deployment:
    """Every vLLM workload (and LMCache configuration) in the documents."""
    if not documents:
        raise AdviceError("documents", "give at least one document: a command line, compose file or manifest")
    deployment = Deployment(workloads=[])
    proxy_scripts = sorted({p.script for p in knowledge.recipes.pd_proxies})
    totals = _Totals()
    # A compose file's `.env` among the documents: compose reads it for ${VAR} in the file beside it.
    dotenv: dict[str, str] = {}
    for doc in documents:
        if doc.name.rsplit("/", 1)[-1] == ".env":
            dotenv |= read_dotenv(doc.text)
    builds, deployment.notes = _read_builds(documents, totals)
    for index, doc in enumerate(documents):
        if doc.name.rsplit("/", 1)[-1] == ".env" or doc.name in builds.consumed:
            continue
        chains: list[list[_Overlay] | None] = [*builds.chains.get(doc.name, [])] or [None]
        read_before = len(deployment.workloads)
        for chain in chains:
            before = len(deployment.workloads)
            with _reading(index):
                _read_document(doc, deployment, totals, proxy_scripts, _LMCACHE_KEYS(knowledge), dotenv, chain)
            if chain and len(chains) > 1:  # one base, built by several overlays
                for workload in deployment.workloads[before:]:
                    workload.name += f" ({chain[-1].name})"
            totals.check(deployment)
        if len(deployment.workloads) == read_before and (unread := _unread_launch(doc)) is not None:
            deployment.unread.append(unread)
    deployment.notes += builds.unapplied()
    deployment.notes += [f"value not known: {u}" for w in deployment.workloads for u in w.unresolved]
    deployment.notes += _image_notes(deployment.workloads)
    if not deployment.workloads and not deployment.lmcache_configs and not deployment.unread:
        raise AdviceError(
            "documents",
            "no vLLM server found: give a `vllm serve` or `python -m vllm.entrypoints.openai.api_server` line, a "
            "`docker run` of a vLLM image, a docker-compose file, Kubernetes manifests, Helm values or an LMCache "
            "config YAML",
        )
    if not deployment.workloads and deployment.lmcache_configs:
        deployment.workloads.append(
            Workload(
                name="LMCache configuration",
                file=documents[0].name,
                source="lmcache-config",
                location=Location(file=documents[0].name, line=1),
            )
        )
    return deployment


def _proxy_uses(doc: Document, scripts: list[str]) -> list[ProxyUse]:
    """Where a known P/D proxy script is named, as a word or a path's last part, outside comment lines."""
    # A name that starts a word or follows a '/' (the last part of a path) and ends the word. Written
    # without a pattern for the path before it: `(?:[\w.-]*/)*` there re-reads every segment of a line
    # from each position, quadratic in them (a 40 KB line of `a/a/…` took 10 s).
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, scripts)) + r")(?![\w.-])")
    return [
        ProxyUse(script=m.group(1), location=Location(file=doc.name, line=number))
        for number, line in enumerate(doc.text.splitlines(), 1)
        if not line.lstrip().startswith("#")
        for m in pattern.finditer(line)
    ]


# ---------------------------------------------------------------------------------------------
# Flags


def normalize_flag(written: str) -> str:
    """``--max_model_len`` → ``--max-model-len``; vLLM accepts underscores for dashes."""
    name = written.split("=", 1)[0]
    if name.startswith("--"):
        base, dot, key = name[2:].partition(".")  # --kv-transfer-config.kv_connector: keys keep their spelling
        return "--" + base.replace("_", "-").lower() + dot + key
    return name


def _is_number(text: str) -> bool:
    return re.fullmatch(r"-?\d+(\.\d+)?", text) is not None


def _switches(knowledge: Knowledge) -> frozenset[str]:
    """Flags that take no value: from the CLI inventory, and boolean flags in the knowledge."""
    found = {f.flag for f in knowledge.cli_inventory.flags if not f.takes_value}
    for s in knowledge.settings:
        if s.kind == "cli_flag" and s.type is not None and s.type.split("|")[0].strip() == "bool":
            found.add(s.name)
    return frozenset(found)


_SWITCHES = PerKnowledge(_switches)


def _read_args(
    workload: Workload,
    args: list[tuple[str, Location]],
    unresolved: Mapping[str, str] | None = None,
    emptied: AbstractSet[int] = frozenset(),
) -> None:
    """Flags and the positional model from vLLM arguments (switches are looked up when resolving).

    ``unresolved`` maps references left as written (``$MODEL``) to why their value is not known;
    ``emptied`` holds the ids of the Locations of words that an expansion to nothing followed."""
    known = unresolved or {}

    def why(text: str) -> str | None:
        if not known or ("$" not in text and "`" not in text):
            return None
        if text in known:
            return known[text]
        return next((known[m.group()] for m in _REFERENCE.finditer(text) if m.group() in known), None)

    positional_taken = workload.model is not None
    i = 0
    while i < len(args):
        text, loc = args[i]
        if text.startswith("-") and not _is_number(text) and len(text) > 1:
            name = normalize_flag(text)
            value: str | bool | None
            problem: str | None = None
            if "=" in text:
                value = text.split("=", 1)[1]
            elif id(loc) in emptied:
                value = ""
                problem = (
                    f"its value expands to nothing, so vLLM's argument parser stops (argument {name}: expected one "
                    "argument) or takes the next option's words"
                )
            elif i + 1 < len(args) and (not args[i + 1][0].startswith("-") or _is_number(args[i + 1][0])):
                value = args[i + 1][0]
                i += 1
            else:
                value = True
            if value == "" and problem is None:
                problem = f"its value is empty, which vLLM's argument parser rejects for {name} unless it takes text"
            reason = why(value) if isinstance(value, str) else None
            if reason is not None:
                workload.unresolved.append(f"{loc}: {_clip(text, 60)} {_clip(str(value), 60)}: {reason}")
            workload.flags.append(
                FlagUse(name=name, written=text, value=value, location=loc, unresolved=reason, problem=problem)
            )
        elif text:
            reason = why(text)
            if reason is not None:
                what = "the model" if not positional_taken else "the words"
                workload.unresolved.append(f"{loc}: {what} {_clip(text, 60)}: {reason}; not reviewed")
            elif not positional_taken:
                workload.model, workload.model_location = text, loc
            positional_taken = True
        i += 1


def _switches_fixed(workload: Workload, switches: frozenset[str]) -> Workload:
    """A copy of the workload in which each switch that took the next word as its value while reading
    gives the word back, as the model when none is named; the parsed deployment stays as written."""
    flags: list[FlagUse] = []
    model, model_location = workload.model, workload.model_location
    for flag in workload.flags:
        base = flag.name[5:] if flag.name.startswith("--no-") else flag.name[2:]
        if isinstance(flag.value, str) and "=" not in flag.written and ("--" + base) in switches:
            if model is None and flag.unresolved is None and flag.value:
                model, model_location = flag.value, flag.location
            flag = flag.model_copy(update={"value": True, "unresolved": None, "problem": None})
        flags.append(flag)
    return workload.model_copy(update={"flags": flags, "model": model, "model_location": model_location})


# ---------------------------------------------------------------------------------------------
# Effective configuration


class ConnectorUse(BaseModel):
    name: str
    entry_id: str | None = Field(description="the knowledge entry, null for a connector the knowledge does not know")
    via: Literal["kv-transfer-config", "offload-shorthand", "multi-connector"]
    location: Location
    hma: str | None = Field(default=None, description="HMA support in this release: yes, no or conditional")


class Effective(BaseModel):
    """One workload's configuration as vLLM of ``version`` reads it."""

    workload: str
    version: str
    version_source: Literal["image-tag", "stated", "assumed-newest"]
    flags: dict[str, FlagUse] = Field(description="the last occurrence of each flag wins, as in argparse")
    env: dict[str, EnvUse]
    model: str | None
    image: str | None
    connectors: list[ConnectorUse]
    offload_shorthand: bool
    offload_backend: str | None
    transfer_config: dict[str, Any] | None
    transfer_location: Location | None
    extra_configs: list[dict[str, Any]] = Field(
        default_factory=list, description="the kv_connector_extra_config, then those of the connectors it wraps"
    )
    tiers: list[str] = Field(description="types of native secondary tiers")
    gpu: str | None = Field(default=None, description="the GPU entry in the knowledge, when known")
    facts: dict[str, float] = Field(description="numbers the rules compare: world_size, offload tier GiB, ...")
    fact_locations: dict[str, Location] = Field(
        default_factory=dict, description="where the number behind each fact was written, when it was"
    )
    notes: list[str] = Field(default_factory=list)


def flag_bool(flag: FlagUse | None) -> bool | None:
    """A switch's state: bare or true/1 → True; --no-X or false/0 → False; None when absent."""
    if flag is None:
        return None
    if isinstance(flag.value, bool):
        return flag.value
    text = str(flag.value).strip().lower()
    return text not in ("false", "0", "no", "off")


_CLI_NUMBER = re.compile(r"\s*(-?\d+(?:\.\d+)?)\s*([kmgKMG]?)\s*")


def parse_number(text: str | bool | None) -> float | None:
    """A number as vLLM's CLI reads it: plain, or with k/m/g (decimal) or K/M/G (binary) suffixes;
    None for other text and for numbers beyond ±2^63 (400 digits read as infinity)."""
    if text is None or isinstance(text, bool):
        return None
    m = _CLI_NUMBER.fullmatch(str(text))
    if not m:
        return None
    factor = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]
    return readable_number(float(m.group(1)) * factor)


# lmcache/vllm-openai is built on vLLM's nightly or its latest release when the image is built, and
# its version tags are LMCache's ("lmcache/vllm-openai:{version} - Specific version (e.g., v0.1.0)",
# LMCache/LMCache docker/README.md, Published Images; the Dockerfile's image-build target installs
# vLLM nightly, image-release the stable vLLM of the day): no tag names the vLLM release inside.
_LMCACHE_IMAGE = re.compile(r"(^|/)lmcache/vllm-openai:v?(?P<version>\d+\.\d+\.\d+(\.post\d+)?)$")


def image_release_note(image: str) -> str | None:
    """Why the image's tag does not say which vLLM release it runs; None when it does (vllm/vllm-openai:vX.Y.Z)."""
    if image_version(image) is not None:
        return None
    lmcache = _LMCACHE_IMAGE.search(image.strip())
    if lmcache is not None:
        return (
            f"the image {image} carries LMCache {lmcache['version']} (its tag) with a vLLM release the tag does not "
            "name (LMCache builds it on the vLLM of the day)"
        )
    return f"the tag of the image {_clip(image, 80)} does not name a vLLM release (only vllm/vllm-openai:vX.Y.Z does)"


def _image_notes(workloads: list[Workload]) -> list[str]:
    """One note for each image whose tag leaves the vLLM release unknown, so that no one reads the release
    the review falls back on (the stated one, else the newest known) as the image's."""
    notes: dict[str, str] = {}
    for workload in workloads:
        why = image_release_note(workload.image) if workload.image else None
        if why is not None and workload.image not in notes:
            notes[workload.image or ""] = (
                f"{workload.image_location or workload.location}: {why}; the vLLM release is unknown, so it is "
                "reviewed for the stated version, else the newest known: give version to review the one it runs"
            )
    return list(notes.values())


def image_version(image: str | None) -> str | None:
    if not image:
        return None
    m = _OFFICIAL_IMAGE.search(image.strip())
    return m.group("version") if m else None


def find_gpu(knowledge: Knowledge, text: str | None) -> Gpu | None:
    """A GPU entry from a name or node label: 'H100 SXM', 'NVIDIA-H100-80GB-HBM3', 'gpu.h200-sxm', 'L40S'."""
    return knowledge.hardware.find_gpu(text) if text else None


def _connector_entry(knowledge: Knowledge, name: str) -> Connector | None:
    for c in knowledge.connectors:
        if c.name == name or name in c.aliases:
            return c
    return None


def _env_literal(env: dict[str, EnvUse], name: str) -> str | None:
    use = env.get(name)
    return use.value if use is not None else None


# A --kv-transfer-config nests a few levels (MultiConnector > connectors > extra config > tiers).
_MAX_JSON_DEPTH = 20


def canonical_flag(name: str, accepted: AbstractSet[str]) -> str:
    """The option argparse reads ``name`` as: itself when known, else the one option it is an
    unambiguous prefix of (vLLM's FlexibleArgumentParser keeps argparse's default allow_abbrev=True:
    wheel:vllm==0.33.0:vllm/utils/argparse_utils.py:156), else itself (unknown or ambiguous)."""
    if name in accepted or not name.startswith("--") or "." in name or len(name) < 4:
        return name
    matches = [option for option in accepted if option.startswith(name)]
    return matches[0] if len(matches) == 1 else name


def _effective_flags(
    workload: Workload, knowledge: Knowledge, notes: list[str], version: Version | None = None
) -> tuple[dict[str, FlagUse], dict[str, Any] | None, Location | None]:
    """Each flag under its full name (an abbreviation under the option it abbreviates in ``version``),
    the last occurrence winning as in argparse, and the --kv-transfer-config (JSON or dotted keys)
    with where it was given."""
    flags: dict[str, FlagUse] = {}
    transfer: dict[str, Any] | None = None
    transfer_location: Location | None = None
    accepted = knowledge.cli_inventory.accepted(version) if version is not None else frozenset()
    for flag in workload.flags:
        name = canonical_flag(flag.name, accepted)
        if name != flag.name:
            flag = flag.model_copy(update={"name": name})
        if name.startswith("--no-"):
            name, flag = "--" + name[5:], flag.model_copy(update={"name": "--" + name[5:], "value": False})
        base, dot, sub = name.partition(".")
        if dot and base in ("--kv-transfer-config",):
            transfer = transfer or {}
            if _set_dotted(transfer, sub, flag, notes):
                transfer_location = flag.location
            flags[base] = flag.model_copy(update={"name": base})
            continue
        if not name.startswith("--"):  # short aliases such as -tp, -pp
            full = next((g.name for g in knowledge.find(name) if name in g.aliases and g.name.startswith("--")), None)
            if full is not None:
                name, flag = full, flag.model_copy(update={"name": full})
        if name == "--enable-hybrid-kv-cache-manager":
            on = flag_bool(flag)
            name = "--disable-hybrid-kv-cache-manager"
            flag = flag.model_copy(update={"name": name, "value": (not on) if on is not None else None})
        flags[name] = flag
        if name == "--kv-transfer-config" and isinstance(flag.value, str):
            parsed = _transfer_json(flag, notes)
            if isinstance(parsed, dict):
                transfer, transfer_location = parsed, flag.location
    return flags, transfer, transfer_location


def _set_dotted(transfer: dict[str, Any], keys: str, flag: FlagUse, notes: list[str]) -> bool:
    """Apply ``--kv-transfer-config.a.b value``; false (with a note) when it cannot be."""
    parts = keys.split(".")
    if len(parts) > _MAX_JSON_DEPTH:
        deep = f"is nested {len(parts):,} keys deep, more than {_MAX_JSON_DEPTH}"
        notes.append(f"{flag.location}: --kv-transfer-config.… {deep}; it is not used")
        return False
    target = transfer
    for depth, part in enumerate(parts[:-1]):
        child = target.setdefault(part, {})
        if not isinstance(child, dict):
            given = ".".join(parts[: depth + 1])
            notes.append(
                f"{flag.location}: {_clip(flag.written, 80)} sets a key inside {given}, which is already "
                f"{_clip(repr(child), 40)}; it is not used"
            )
            return False
        target = child
    target[parts[-1]] = flag.value
    return True


def _transfer_json(flag: FlagUse, notes: list[str]) -> Any:
    """The --kv-transfer-config JSON, or None with a note on why it cannot be read."""
    try:
        parsed = json.loads(str(flag.value))
    except RecursionError:
        notes.append(f"{flag.location}: --kv-transfer-config is nested too deep to read; it is not used")
        return None
    except ValueError as exc:  # a JSONDecodeError, or an integer of more than 4,300 digits
        problem = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        notes.append(f"{flag.location}: --kv-transfer-config is not valid JSON ({_clip(problem, 90)}); vLLM rejects it")
        return None
    if _json_depth(parsed) > _MAX_JSON_DEPTH:
        notes.append(f"{flag.location}: --kv-transfer-config is nested more than {_MAX_JSON_DEPTH} levels; not used")
        return None
    return parsed


def _json_depth(value: Any) -> int:
    """How deep lists and objects nest in ``value``, counted without recursion (stops past the limit)."""
    deepest, pending = 0, [(value, 1)]
    while pending and deepest <= _MAX_JSON_DEPTH:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, depth)
            pending += [(child, depth + 1) for child in children]
    return deepest


def resolve(
    workload: Workload,
    deployment: Deployment,
    knowledge: Knowledge,
    version: Version,
    version_source: Literal["image-tag", "stated", "assumed-newest"],
    gpu_hint: str | None = None,
) -> Effective:
    """The configuration vLLM ``version`` runs this workload with; the workload and deployment are not changed."""
    workload = _switches_fixed(workload, _SWITCHES(knowledge))
    notes: list[str] = []
    flags, transfer, transfer_location = _effective_flags(workload, knowledge, notes, version)
    env = _effective_env(workload, deployment, notes)
    numbers = _Numbers(flags, notes, transfer_location)
    backend_flag = flags.get("--kv-offloading-backend")
    backend = _offload_backend(backend_flag, knowledge, version)
    size = numbers.flag("--kv-offloading-size")
    shorthand = size is not None and backend is not None
    extras = _extra_configs(knowledge, transfer, notes, transfer_location)
    if shorthand:
        where = (backend_flag or flags["--kv-offloading-size"]).location
        in_use = _shorthand_connectors(knowledge, version, str(backend), env, where)
    else:
        in_use = _transfer_connectors(knowledge, version, transfer, transfer_location, extras)
    tiers = _secondary_tiers(extras, notes, transfer_location)
    facts, fact_locations = _facts(workload, numbers, in_use, env)
    _visible_gpus(env, facts, fact_locations)
    _container_facts(workload, in_use, numbers, env, knowledge, version, facts, fact_locations)
    gpu = find_gpu(knowledge, gpu_hint) or find_gpu(knowledge, workload.gpu_label)
    model, model_flag = workload.model, flags.get("--model")
    if model is None and model_flag is not None and isinstance(model_flag.value, str) and not model_flag.unresolved:
        model = model_flag.value
    return Effective(
        workload=workload.name,
        version=str(version),
        version_source=version_source,
        flags=flags,
        env=env,
        model=model,
        image=workload.image,
        connectors=[c.use for c in in_use],
        offload_shorthand=shorthand,
        offload_backend=backend if shorthand else None,
        transfer_config=transfer,
        transfer_location=transfer_location,
        extra_configs=extras,
        tiers=tiers,
        gpu=gpu.id if gpu else None,
        facts=facts,
        fact_locations=fact_locations,
        notes=notes,
    )


def _effective_env(workload: Workload, deployment: Deployment, notes: list[str]) -> dict[str, EnvUse]:
    """The variables the workload sees: its LMCache config files', then its own, which override them."""
    env: dict[str, EnvUse] = {}
    for config in _applied_lmcache_configs(workload, deployment.lmcache_configs, notes):
        for use in config.env:
            env[use.name] = use
    for use in workload.env:
        env[use.name] = use
    return env


def _applied_lmcache_configs(workload: Workload, configs: list[LMCacheConfig], notes: list[str]) -> list[LMCacheConfig]:
    """The LMCache config files this server reads: the one its LMCACHE_CONFIG_FILE names (matched by
    file name: a mount path and a document or ConfigMap key seldom share directories), else all given."""
    named = next((use for use in reversed(workload.env) if use.name == "LMCACHE_CONFIG_FILE"), None)
    if named is None or not configs:
        return configs
    if named.value is None:
        notes.append(
            f"{named.location}: LMCACHE_CONFIG_FILE is set from {named.reference}, so which LMCache config file "
            "this server reads is not known; every one given is read"
        )
        return configs
    wanted = named.value.rsplit("/", 1)[-1]
    applied = [c for c in configs if c.name.rsplit("/", 1)[-1] == wanted]
    others = sorted({c.name for c in configs if c not in applied})
    said = f"{named.location}: LMCACHE_CONFIG_FILE={_clip(named.value, 200)}"
    if not applied:
        notes.append(
            f"{said} names a file that is not among the documents, so its settings are not known; "
            f"{', '.join(others)} {'is' if len(others) == 1 else 'are'} not read by {workload.name}"
        )
    else:
        notes.append(
            f"{said}: {workload.name} reads {', '.join(sorted({c.name for c in applied}))}"
            + (f", not {', '.join(others)}" if others else "")
        )
    return applied


def _offload_backend(flag: FlagUse | None, knowledge: Knowledge, version: Version) -> str | None:
    """The --kv-offloading-backend given, else the release's default (none before 0.14.0)."""
    if flag is not None and isinstance(flag.value, str):
        return flag.value
    setting = next((s for s in knowledge.settings if s.id == "flag.kv-offloading-backend"), None)
    default = ranged_at(setting.defaults, version) if isinstance(setting, Setting) else None
    return str(default.value) if default is not None and default.value is not None else None


@dataclass
class _Numbers:
    """Numbers as vLLM reads them from the flags, variables and extra config, with a note for each
    that is a number too large to use."""

    flags: dict[str, FlagUse]
    notes: list[str]
    transfer_location: Location | None

    def text(self, text: str | bool | None, what: str, where: Location | None) -> float | None:
        value = parse_number(text)
        if value is None and isinstance(text, str) and _CLI_NUMBER.fullmatch(text):
            self.notes.append(f"{where}: {what} {_clip(text.strip(), 40)} is beyond ±2^63; it is not used")
        return value

    def flag(self, name: str) -> float | None:
        flag = self.flags.get(name)
        return self.text(flag.value, name, flag.location) if flag is not None else None

    def flag_or(self, name: str, default: float) -> float:
        found = self.flag(name)
        return found if found is not None else default

    def extra(self, extra: dict[str, Any], key: str) -> float | None:
        raw = extra.get(key)
        value = readable_number(raw)
        if value is None and isinstance(raw, (int, float)) and not isinstance(raw, bool):
            shown = _clip(repr(raw), 40)
            self.notes.append(
                f"{self.transfer_location}: kv_connector_extra_config.{key} {shown} is out of range; not used"
            )
        return value


class _InUse(NamedTuple):
    """A connector the workload runs, its knowledge entry, and the extra config it is given."""

    use: ConnectorUse
    entry: Connector | None
    extra: dict[str, Any] | None


_Via = Literal["kv-transfer-config", "offload-shorthand", "multi-connector"]


def _in_use(
    knowledge: Knowledge, version: Version, name: str, via: _Via, where: Location, extra: dict[str, Any] | None
) -> _InUse:
    entry = _connector_entry(knowledge, name)
    use = ConnectorUse(
        name=name,
        entry_id=entry.id if entry else None,
        via=via,
        location=where,
        hma=entry.hma_at(version) if entry is not None else None,
    )
    return _InUse(use, entry, extra)


def _shorthand_connectors(
    knowledge: Knowledge,
    version: Version,
    backend: str,
    env: dict[str, EnvUse],
    where: Location,
) -> list[_InUse]:
    """The connector --kv-offloading-backend ``backend`` selects in this release: the mapping whose
    variable is set to a matching value, else the plain one; none when no mapping covers the release.
    The shorthand writes the connector's config itself, so it has no extra config of the user's."""
    mapping = None
    for m in knowledge.offload_shorthand:
        if m.backend != backend or not in_range(m.versions, version):
            continue
        if m.when_env is not None:
            value = _env_literal(env, m.when_env.name)
            if value is None or not re.search(m.when_env.matches, value):
                continue
            mapping = m
            break
        mapping = mapping or m
    if mapping is None:
        return []
    entry = knowledge.by_id.get(mapping.connector)
    name = entry.name if isinstance(entry, Connector) else mapping.connector
    return [_in_use(knowledge, version, name, "offload-shorthand", where, None)]


def _transfer_connectors(
    knowledge: Knowledge,
    version: Version,
    transfer: dict[str, Any] | None,
    where: Location | None,
    extras: list[dict[str, Any]],
) -> list[_InUse]:
    """The --kv-transfer-config connector, then the ones it wraps, each with its own extra config."""
    if transfer is None or not isinstance(transfer.get("kv_connector"), str) or where is None:
        return []
    root = _in_use(
        knowledge, version, transfer["kv_connector"], "kv-transfer-config", where, extras[0] if extras else None
    )
    found = [root]
    for child in _children(root.entry, transfer.get("kv_connector_extra_config")):
        if isinstance(child.get("kv_connector"), str):
            extra = child.get("kv_connector_extra_config")
            found.append(
                _in_use(
                    knowledge,
                    version,
                    child["kv_connector"],
                    "multi-connector",
                    where,
                    extra if isinstance(extra, dict) else None,
                )
            )
    return found


def _children(entry: Connector | None, extra: Any) -> list[dict[str, Any]]:
    """The configs of the connectors a wrapping connector (MultiConnector) lists in its extra config."""
    key = entry.children_key if entry is not None else None
    listed = extra.get(key) if key is not None and isinstance(extra, dict) else None
    return [child for child in listed if isinstance(child, dict)] if isinstance(listed, list) else []


def _extra_configs(
    knowledge: Knowledge, transfer: dict[str, Any] | None, notes: list[str], where: Location | None
) -> list[dict[str, Any]]:
    """The kv_connector_extra_config of the --kv-transfer-config, then those of the connectors it wraps."""
    root = (transfer or {}).get("kv_connector_extra_config")
    if not isinstance(root, dict):
        return []
    name = (transfer or {}).get("kv_connector")
    entry = _connector_entry(knowledge, name) if isinstance(name, str) else None
    if entry is not None and entry.children_key is not None:
        listed = root.get(entry.children_key)
        if listed is not None and not isinstance(listed, list):
            notes.append(f"{where}: kv_connector_extra_config.{entry.children_key} is not a list; it is not used")
    children = [child.get("kv_connector_extra_config") for child in _children(entry, root)]
    return [root, *(extra for extra in children if isinstance(extra, dict))]


def _secondary_tiers(extras: list[dict[str, Any]], notes: list[str], where: Location | None) -> list[str]:
    """The types of the native secondary tiers (TieringOffloadingSpec) the extra configs list."""
    tiers: list[str] = []
    for extra in extras:
        listed = extra.get("secondary_tiers")
        if listed is not None and not isinstance(listed, list):
            notes.append(f"{where}: kv_connector_extra_config.secondary_tiers is not a list; it is not used")
            continue
        tiers += [t["type"] for t in listed or [] if isinstance(t, dict) and isinstance(t.get("type"), str)]
    return tiers


def _facts(
    workload: Workload, numbers: _Numbers, in_use: list[_InUse], env: dict[str, EnvUse]
) -> tuple[dict[str, float], dict[str, Location]]:
    """The numbers the rules compare, and where each was written."""
    flags = numbers.flags
    tp = numbers.flag_or("--tensor-parallel-size", 1)
    pp = numbers.flag_or("--pipeline-parallel-size", 1)
    dp = numbers.flag_or("--data-parallel-size", 1)
    facts: dict[str, float] = {"tp": tp, "pp": pp, "dp": dp, "world_size": tp * pp}
    parallel = (("tp", "--tensor-parallel-size"), ("pp", "--pipeline-parallel-size"), ("dp", "--data-parallel-size"))
    locations = {fact: flags[name].location for fact, name in parallel if name in flags}
    world = flags.get("--tensor-parallel-size") or flags.get("--pipeline-parallel-size")
    if world is not None:
        locations["world_size"] = world.location
    sizes = [found for c in in_use if (found := _tier_size(c, numbers, env, tp, pp)) is not None]
    tier_gib = sum(gib for gib, _ in sizes) if sizes else None
    if tier_gib is not None:
        facts["offload_tier_gib"] = tier_gib
        if sizes[0][1] is not None:
            locations["offload_tier_gib"] = sizes[0][1]
    weights = numbers.flag_or("--cpu-offload-gb", 0) * tp * pp
    if tier_gib is not None or weights:
        facts["host_offload_gib"] = ((tier_gib or 0) + weights) * dp / workload.nodes
        where = locations.get("offload_tier_gib") or (flags["--cpu-offload-gb"].location if weights else None)
        if where is not None:
            locations["host_offload_gib"] = where
    parsed_len = numbers.flag("--max-model-len")
    if parsed_len is not None and parsed_len > 0:
        facts["max_model_len"] = parsed_len
        locations["max_model_len"] = flags["--max-model-len"].location
    if workload.memory_limit_gib is not None:
        facts["container_memory_limit_gib"] = workload.memory_limit_gib
    return facts, locations


_DEVICE = re.compile(r"\d+|(GPU|MIG)-[0-9A-Za-z/-]+")


def _visible_gpus(env: dict[str, EnvUse], facts: dict[str, float], locations: dict[str, Location]) -> None:
    """``visible_gpus``: how many GPUs a literal CUDA_VISIBLE_DEVICES lets the engine see (indices or
    GPU/MIG UUIDs, comma-separated; an empty value hides every GPU). Left out when it is not literal
    or holds anything else, such as -1, which CUDA reads as the end of the list."""
    use = env.get("CUDA_VISIBLE_DEVICES")
    if use is None or use.value is None:
        return
    devices = [d.strip() for d in use.value.split(",")] if use.value.strip() else []
    if all(_DEVICE.fullmatch(d) for d in devices):
        facts["visible_gpus"] = float(len(devices))
        locations["visible_gpus"] = use.location


# ---- What the container gives the engine: GPUs, memory, /dev/shm (review rules on pinned memory and /dev/shm)

# /dev/shm of a container that sets none: Docker's default (docs.docker.com, docker container run
# --shm-size), which containerd and CRI-O give a Kubernetes pod too.
DEFAULT_SHM_GIB = 64 / 1024
# The message queues of the multiprocessing executor (TP x PP > 1), each a ring buffer of 10 chunks in
# /dev/shm: the broadcast queue's chunk is VLLM_MQ_MAX_CHUNK_BYTES_MB (16 MiB by default), each local
# worker's response queue 24 MiB (vllm/v1/executor/multiproc_executor.py, shm_broadcast.py in 0.27.0-0.33.0).
_MQ_CHUNKS, _MQ_CHUNK_MIB, _RESPONSE_CHUNK_MIB = 10, 16, 24


def _container_facts(
    workload: Workload,
    in_use: list[_InUse],
    numbers: _Numbers,
    env: dict[str, EnvUse],
    knowledge: Knowledge,
    version: Version,
    facts: dict[str, float],
    locations: dict[str, Location],
) -> None:
    """``visible_gpus`` from the GPUs the container is given, ``container_memory_request_gib``, and for
    /dev/shm: ``shm_gib`` (the container's own; left out when it is the node's: a bare host, the host's
    IPC namespace, a memory emptyDir without a size), ``shm_offload_gib`` (the native CPU tier one node
    keeps there) and ``worker_queues_shm_gib`` (the executor's message queues), both for every
    data-parallel engine the container runs."""
    if workload.gpu_count is not None and workload.nodes == 1:
        given = float(workload.gpu_count)
        facts["visible_gpus"] = min(facts.get("visible_gpus", given), given)
        locations.setdefault("visible_gpus", workload.location)
    if workload.memory_request_gib is not None:
        facts["container_memory_request_gib"] = workload.memory_request_gib
    if workload.shm_gib is not None and not workload.host_ipc:
        facts["shm_gib"] = workload.shm_gib
    elif not (workload.host_ipc or workload.shm_mounted or workload.source in ("command-line", "lmcache-config")):
        facts["shm_gib"] = DEFAULT_SHM_GIB
    in_shm = knowledge.by_id.get("feature.native-cpu-tier-in-shm")
    if isinstance(in_shm, Gated) and in_shm.exists_in(version):
        tp, pp = facts["tp"], facts["pp"]
        native = [c for c in in_use if c.use.name == "OffloadingConnector" and _cpu_spec(c.extra)]
        sizes = [found for c in native if (found := _tier_size(c, numbers, env, tp, pp)) is not None]
        if sizes:
            # each data-parallel engine in the container keeps its own region
            facts["shm_offload_gib"] = sum(gib for gib, _ in sizes) * facts["dp"] / workload.nodes
            if sizes[0][1] is not None:
                locations["shm_offload_gib"] = sizes[0][1]
    if facts["world_size"] > 1:
        chunk = env.get("VLLM_MQ_MAX_CHUNK_BYTES_MB")
        chunk_mib = parse_number(chunk.value) if chunk is not None and chunk.value is not None else None
        local_workers = max(1.0, facts["world_size"] / workload.nodes)
        mib = _MQ_CHUNKS * ((chunk_mib or _MQ_CHUNK_MIB) + _RESPONSE_CHUNK_MIB * local_workers)
        facts["worker_queues_shm_gib"] = mib * facts["dp"] / 1024
        if "world_size" in locations:
            locations["worker_queues_shm_gib"] = locations["world_size"]


def _cpu_spec(extra: dict[str, Any] | None) -> bool:
    """Whether an OffloadingConnector runs the CPU spec (CPUOffloadingSpec, the default spec_name)."""
    spec = (extra or {}).get("spec_name")
    return spec is None or spec == "CPUOffloadingSpec"


def _tier_size(
    connector: _InUse, numbers: _Numbers, env: dict[str, EnvUse], tp: float, pp: float
) -> tuple[float, Location | None] | None:
    """The GiB of CPU memory the connector's tier takes over all the engine's ranks, and where that was
    given: its readings in the knowledge are in the order vLLM applies them, so the last one given wins."""
    found: tuple[float, Location | None] | None = None
    for reading in connector.entry.tier_size if connector.entry is not None else ():
        given = _given(reading, connector, numbers, env)
        if given is not None:
            value, where = given
            gib = value / GIB if reading.unit == "bytes" else value
            found = (gib * tp * pp if reading.scope == "per_rank" else gib), where
    return found


def _given(
    reading: TierSize, connector: _InUse, numbers: _Numbers, env: dict[str, EnvUse]
) -> tuple[float, Location | None] | None:
    """The number one tier reading finds in the workload's configuration, and where; None when not given."""
    value: float | None = None
    where: Location | None = None
    if reading.given_by == "kv_offloading_size":
        if connector.use.via == "offload-shorthand":
            value, where = numbers.flag("--kv-offloading-size"), numbers.flags["--kv-offloading-size"].location
    elif reading.given_by == "extra_config":
        if connector.extra is not None and reading.key is not None:
            value, where = numbers.extra(connector.extra, reading.key), numbers.transfer_location
    elif reading.key is not None and reading.key in env:
        use = env[reading.key]
        value, where = numbers.text(use.value, use.name, use.location), use.location
    return None if value is None else (value, where)
