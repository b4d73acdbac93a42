"""Python that launches vLLM: Modal apps, BentoML services, plain launch scripts. Their `vllm serve` command is a
list of words (`["vllm", "serve", MODEL, "--port", str(PORT)]`, grown with `+=`, `.extend` and `.append`; a
returned list, as BentoML's `__command__`) or a string a subprocess call or `os.system` runs (`f"vllm serve {MODEL}
…"`, a `" ".join(cmd)` with `shell=True`), read with `ast`: nothing is run, and a message or docstring that
mentions `vllm serve` is no launch.

A word is known when it is a literal, a module or function constant, `str()`/`int()` of one, an f-string of
them, `os.environ.get(NAME, default)` (its default, said in a note) or `json.dumps` of a dict literal of them;
anything else (`self.model`, a computed port) stays a reference whose value the files do not say. The image
and its environment come from Modal's image chain (`Image.from_registry(IMAGE)`, `.env({...})`,
`.pip_install("vllm==X")`) and `os.environ[NAME] = value` lines.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..bounds import MAX_ARGUMENTS, clip
from ..containers import shell_launch_workload
from ..installs import requirement_claim
from ..launch import Launch, entrypoint_of, vllm_args
from ..model import Document, EnvUse, Location, ReleaseClaim
from ..shell import parse_shell
from ..yaml_nodes import Located
from .base import Reading

# A module's first statement that is Python and not YAML: an import, a def, a decorator, a class.
_PYTHON_START = re.compile(r"^(import \w|from [\w.]+ import |def \w+\(|class \w+[(:]|@\w)", re.MULTILINE)
# A string a subprocess call runs that starts vLLM.
_STRING_LAUNCH = re.compile(r"\s*(exec\s+)?(\S*/)?(vllm\s+serve\b|python[\d.]*\s+-m\s+vllm\.entrypoints\.)")
_SUBPROCESS = {"Popen", "run", "call", "check_call", "check_output", "system"}
_UNKNOWN = object()


@dataclass
class _Scope:
    """What one body of statements binds: constants, dict literals, and the command lists it builds."""

    values: dict[str, Any] = field(default_factory=dict)
    lists: dict[str, list[tuple[str, Location]]] = field(default_factory=dict)
    joined: set[str] = field(default_factory=set)  # lists run as one shell line (" ".join(cmd), shell=True)
    depth: int = 0  # how many if / for / while / try blocks the statement being read sits in
    list_depth: dict[str, int] = field(default_factory=dict)  # the depth each command list was made at


class _Module:
    def __init__(self, doc: Document, tree: ast.Module) -> None:
        self.doc = doc
        self.tree = tree
        self.globals = _Scope()
        self.notes: list[str] = []
        self.unresolved: dict[str, str] = {}
        self.env: list[EnvUse] = []
        self.image: tuple[str, Location] | None = None
        self.pins: list[ReleaseClaim] = []
        self.launches: list[Launch] = []

    def at(self, node: ast.AST) -> Location:
        return Location(file=self.doc.name, line=getattr(node, "lineno", None))

    # --- values -----------------------------------------------------------------------------------------

    def value(self, node: ast.AST, scope: _Scope) -> Any:
        """The node's value when the file settles it, else _UNKNOWN."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str | int | float | bool):
            return node.value
        if isinstance(node, ast.Name):
            for table in (scope.values, self.globals.values):
                if node.id in table:
                    return table[node.id]
            return _UNKNOWN
        if isinstance(node, ast.JoinedStr):
            parts = []
            for part in node.values:
                found = self.value(part.value if isinstance(part, ast.FormattedValue) else part, scope)
                if found is _UNKNOWN:
                    return _UNKNOWN
                parts.append(str(found))
            return "".join(parts)
        if isinstance(node, ast.Call):
            return self.call_value(node, scope)
        if isinstance(node, ast.Dict):
            keys = [self.value(k, scope) if k is not None else _UNKNOWN for k in node.keys]
            values = [self.value(v, scope) for v in node.values]
            if any(k is _UNKNOWN or not isinstance(k, str) for k in keys) or _UNKNOWN in values:
                return _UNKNOWN
            return dict(zip(keys, values, strict=True))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult):
            left, right = self.value(node.left, scope), self.value(node.right, scope)
            if isinstance(left, int) and isinstance(right, int) and not isinstance(left | right, bool):
                ops = {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}
                return ops[type(node.op)]
            if isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str):
                return left + right
        return _UNKNOWN

    def call_value(self, node: ast.Call, scope: _Scope) -> Any:
        name = _call_name(node)
        args = node.args
        if name in ("str", "int") and len(args) == 1:
            found = self.value(args[0], scope)
            if found is _UNKNOWN:
                return _UNKNOWN
            try:
                return str(found) if name == "str" else int(found)
            except ValueError:
                return _UNKNOWN
        if name == "dumps" and len(args) == 1:  # json.dumps({...})
            found = self.value(args[0], scope)
            return json.dumps(found) if isinstance(found, dict) else _UNKNOWN
        if name in ("get", "getenv") and _is_environ(node) and len(args) == 2:
            variable, default = self.value(args[0], scope), self.value(args[1], scope)
            if isinstance(variable, str) and default is not _UNKNOWN:
                self.notes.append(
                    f"{self.doc.name}:{node.lineno}: {variable} is read from the environment; reviewed with its "
                    f"default, {clip(str(default), 60)}"
                )
                return default
        return _UNKNOWN

    def word(self, node: ast.AST, scope: _Scope) -> tuple[str, Location]:
        """A command word: its value, or its source text kept as a reference the review does not judge."""
        found = self.value(node, scope)
        where = self.at(node)
        if found is not _UNKNOWN and not isinstance(found, dict | bool):
            return str(found), where
        text = "{" + clip(ast.unparse(node), 60) + "}"
        self.unresolved[text] = f"{text} is computed by the Python code; its value is not in the files"
        return text, where

    # --- statements -------------------------------------------------------------------------------------

    def body(self, statements: list[ast.stmt], scope: _Scope) -> None:
        for stmt in statements:
            self.statement(stmt, scope)
        for name, words in scope.lists.items():
            if vllm_args(words) is not None:
                self.launch(words, joined=name in scope.joined)

    def statement(self, stmt: ast.stmt, scope: _Scope) -> None:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            for decorator in stmt.decorator_list:
                self.calls_in(decorator, scope)
            self.body(stmt.body, _Scope() if not isinstance(stmt, ast.ClassDef) else scope)
            return
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            self.assign(stmt.targets[0], stmt.value, scope)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.assign(stmt.target, stmt.value, scope)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            self.grow(stmt.target.id, stmt.value, scope)
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            self.command_value(stmt.value, scope)
        elif isinstance(stmt, ast.With | ast.If | ast.For | ast.While | ast.Try):
            conditional = not isinstance(stmt, ast.With)
            scope.depth += conditional
            for block in ("body", "orelse", "finalbody"):
                self.body_in_place(getattr(stmt, block, []), scope)
            for handler in getattr(stmt, "handlers", []):
                self.body_in_place(handler.body, scope)
            scope.depth -= conditional
            return
        self.calls_in(stmt, scope)

    def calls_in(self, node: ast.AST, scope: _Scope) -> None:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Call):
                self.call(inner, scope)

    def body_in_place(self, statements: list[ast.stmt], scope: _Scope) -> None:
        for stmt in statements:
            self.statement(stmt, scope)

    def assign(self, target: ast.expr, value: ast.expr, scope: _Scope) -> None:
        if isinstance(target, ast.Subscript) and _is_environ_target(target.value):
            name = self.value(target.slice, scope)
            if isinstance(name, str):
                self.env.append(self.env_use(name, value, scope))
            return
        if not isinstance(target, ast.Name):
            return
        if isinstance(value, ast.List):
            scope.lists[target.id] = self.words(value.elts, scope)
            scope.list_depth[target.id] = scope.depth
            return
        found = self.value(value, scope)
        if found is not _UNKNOWN:
            scope.values[target.id] = found
        else:
            scope.values.pop(target.id, None)

    def grow(self, name: str, value: ast.expr, scope: _Scope) -> None:
        if isinstance(value, ast.List) and self.grows(name, value, scope):
            scope.lists[name] += self.words(value.elts, scope)

    def grows(self, name: str, node: ast.AST, scope: _Scope) -> bool:
        """Whether words added to list ``name`` here count: not when added under a condition the list was made
        outside of (`if quantization: cmd.extend([...])`, a loop, a try), which the files do not
        settle (said in a note)."""
        if name not in scope.lists:
            return False
        if scope.depth > scope.list_depth.get(name, 0):
            self.notes.append(
                f"{self.doc.name}:{getattr(node, 'lineno', '?')}: words added to {name} under a condition (if, for, "
                "while, try) are not reviewed: whether they are given is not in the files"
            )
            return False
        return True

    def words(self, items: list[ast.expr], scope: _Scope) -> list[tuple[str, Location]]:
        if len(items) > MAX_ARGUMENTS:
            return []
        return [self.word(i, scope) for i in items if not isinstance(i, ast.Starred)]

    def env_use(self, name: str, value: ast.expr, scope: _Scope) -> EnvUse:
        found = self.value(value, scope)
        if found is _UNKNOWN or isinstance(found, dict):
            return EnvUse(name=name, value=None, reference="a value the Python code computes", location=self.at(value))
        return EnvUse(name=name, value=str(found), location=self.at(value))

    # --- calls ------------------------------------------------------------------------------------------

    def call(self, node: ast.Call, scope: _Scope) -> None:
        name = _call_name(node)
        if name == "from_registry" and node.args:
            image = self.value(node.args[0], scope)
            if isinstance(image, str):
                self.image = (image, self.at(node))
        elif name == "env" and node.args and isinstance(node.args[0], ast.Dict):
            for key, value in zip(node.args[0].keys, node.args[0].values, strict=True):
                variable = self.value(key, scope) if key is not None else None
                if isinstance(variable, str):
                    self.env.append(self.env_use(variable, value, scope))
        elif name in ("pip_install", "uv_pip_install"):
            for arg in node.args:
                requirement = self.value(arg, scope)
                if isinstance(requirement, str) and (claim := requirement_claim(requirement, self.at(arg))):
                    self.pins.append(claim)
        elif name == "extend" and isinstance(node.func, ast.Attribute) and node.args:
            owner = node.func.value
            if isinstance(owner, ast.Name) and isinstance(node.args[0], ast.List):
                self.grow(owner.id, node.args[0], scope)
        elif name == "append" and isinstance(node.func, ast.Attribute) and node.args:
            owner = node.func.value
            if isinstance(owner, ast.Name) and self.grows(owner.id, node, scope):
                scope.lists[owner.id].append(self.word(node.args[0], scope))
        elif name in _SUBPROCESS and node.args:
            self.subprocess(node, scope)

    def subprocess(self, node: ast.Call, scope: _Scope) -> None:
        """What a subprocess call (or os.system) runs: a command list, a list joined into one shell line, or a
        command string (also through shlex.split)."""
        first = node.args[0]
        shell = any(k.arg == "shell" and isinstance(k.value, ast.Constant) and k.value.value for k in node.keywords)
        joined = _joined_name(first)
        if isinstance(first, ast.Call) and _call_name(first) == "split" and first.args:
            first = first.args[0]  # shlex.split("vllm serve …")
        if joined is not None and joined in scope.lists:
            scope.joined.add(joined)
        elif isinstance(first, ast.Name) and first.id in scope.lists and shell:
            scope.joined.add(first.id)
        elif isinstance(first, ast.List):
            words = self.words(first.elts, scope)
            if vllm_args(words) is not None:
                self.launch(words, joined=shell)
        elif isinstance(text := self.value(first, scope), str) and _STRING_LAUNCH.match(text):
            found = parse_shell(Document(name=self.doc.name, text=text), first_line=node.lineno)
            self.launches += [launch for launch in found if launch.source == "command-line"]

    def command_value(self, node: ast.expr, scope: _Scope) -> None:
        """A list or string that is itself a command (`return [...]` of BentoML's __command__, `cmd = f"…"`)."""
        if isinstance(node, ast.List):
            words = self.words(node.elts, scope)
            if vllm_args(words) is not None:
                self.launch(words, joined=False)

    def launch(self, words: list[tuple[str, Location]], joined: bool) -> None:
        if joined:  # one shell line: words with blanks split, as the shell does
            words = [(piece, where) for text, where in words for piece in text.split()]
        args = vllm_args(words)
        if args is not None:
            self.launches.append(Launch(args=args, location=words[0][1], entrypoint=entrypoint_of(words)))


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _is_environ(node: ast.Call) -> bool:
    """os.environ.get(...), os.getenv(...), environ.get(...)."""
    func = node.func
    if not isinstance(func, ast.Attribute):
        return False
    owner = func.value
    return (func.attr == "getenv" and isinstance(owner, ast.Name) and owner.id == "os") or _is_environ_target(owner)


def _is_environ_target(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def _joined_name(node: ast.expr) -> str | None:
    """NAME of `" ".join(NAME)`."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "join"
        and isinstance(node.func.value, ast.Constant)
        and node.func.value.value == " "
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
    ):
        return node.args[0].id
    return None


def parse_python(doc: Document) -> ast.Module | None:
    """The module when the document is Python source (named .py, or starting like Python and parsing as it)."""
    if not doc.name.lower().endswith(".py") and not _PYTHON_START.search(doc.text[:4000]):
        return None
    try:
        return ast.parse(doc.text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


class PythonLauncherReader:
    """Python source that starts vLLM. It claims a document that is Python and names a vLLM launch."""

    yaml = False
    partial = False

    def claims(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        return ("vllm" in doc.text) and parse_python(doc) is not None

    def read(self, doc: Document, roots: list[Located], reading: Reading) -> bool:
        tree = parse_python(doc)
        if tree is None:
            return False
        module = _Module(doc, tree)
        module.body(tree.body, module.globals)
        deployment = reading.deployment
        for n, launch in enumerate(module.launches):
            launch.unresolved = {**module.unresolved, **launch.unresolved}
            launch.pins = module.pins + launch.pins
            workload = shell_launch_workload(
                f"python vllm #{n + 1}", doc.name, launch, Location(file=doc.name, line=1), module.env, module.image
            )
            deployment.workloads.append(workload)
            reading.totals.check(deployment)
        deployment.notes += sorted(set(module.notes))
        return True


READER = PythonLauncherReader()
