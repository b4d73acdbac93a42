"""Generate knowledge/cli_inventory.yaml: every option `vllm serve` accepts, release by release.

    python scripts/build_cli_inventory.py --src-dir ~/.cache/vllm-caching/src [--out knowledge/cli_inventory.yaml]

The source directory holds extracted wheels as ``vllm-0.33.0/vllm/...``, one per vLLM release
listed in knowledge/releases.yaml (``scripts/check_sources.py --download`` fetches them). The
parser is read statically with ``ast``; nothing from vLLM is imported, so no torch is needed.
Per release the script follows what ``vllm serve`` builds:

- ``make_arg_parser`` (found through the import in ``vllm/entrypoints/cli/serve.py``): its own
  ``add_argument`` calls, then ``FrontendArgs.add_cli_args`` and ``AsyncEngineArgs.add_cli_args``;
- ``add_argument`` calls with literal option strings (long and short spellings), including calls
  in loops over literal lists and the frontend loop that turns every dataclass field into
  ``--field-name`` (plus the short spellings a ``flags`` override adds);
- whether an option takes a value: an explicit ``action=``, else the ``get_kwargs`` rule on the
  config field's annotation (a ``bool`` field becomes ``BooleanOptionalAction``; from the release
  whose ``_compute_kwargs`` special-cases ``bool | str | None`` that one takes an optional value);
- the negations argparse generates: ``--no-X`` for every ``BooleanOptionalAction`` long option,
  and the ``--enable-X``/``--disable-X`` inverse where the release registers an action for it;
- ``-h``/``--help``, which argparse adds to the subcommand parser;
- an option the parser registers but ``FlexibleArgumentParser.parse_args`` rejects under
  ``serve`` (``--model`` in 0.11.0) is left out for that release.

Not listed, because argparse or vLLM accept them as spellings of a listed option rather than as
options: underscores for dashes (``--max_model_len``), ``--opt=value``, unique prefixes of a long
option (argparse ``allow_abbrev``), JSON sub-keys (``--compilation-config.mode``) and ``-O3``.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from vllm_caching_mcp.knowledge import CliInventory, InventoryFlag
from wheel_trees import ExtractionError, Run, released, runs

REPO = Path(__file__).resolve().parents[1]
VERIFIED_AT = "2026-11-30"
ARG_UTILS = "vllm.engine.arg_utils"
SERVE = "vllm.entrypoints.cli.serve"

# argparse actions that never consume a value.
NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "append_const", "count", "help", "version"}
BUILTIN_TYPES = {"bool", "str", "int", "float", "dict", "list", "tuple", "set", "bytes", "None"}
UNION_NAMES = {"Optional", "Union"}
# Subscripted wrappers that `get_type_hints` sees through: `SkipValidation[bool]` is `Annotated[bool, ...]`.
TRANSPARENT_WRAPPERS = {"Annotated", "SkipValidation"}


# ---------------------------------------------------------------------------
# Modules and names of one extracted release


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module

    @property
    def package(self) -> str:
        return self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]


@dataclass
class Release:
    """The extracted source of one vLLM release, with name resolution across its modules."""

    version: str
    root: Path
    _modules: dict[str, Module | None] = field(default_factory=dict)

    def module(self, dotted: str) -> Module | None:
        if dotted not in self._modules:
            base = self.root.joinpath(*dotted.split("."))
            found = None
            for path in (base.with_suffix(".py"), base / "__init__.py"):
                if path.is_file():
                    found = Module(dotted, path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
                    break
            self._modules[dotted] = found
        return self._modules[dotted]

    def require(self, dotted: str) -> Module:
        found = self.module(dotted)
        if found is None:
            raise ExtractionError(f"vllm {self.version}: module {dotted} is missing under {self.root}")
        return found

    def relative_path(self, module: Module) -> str:
        return module.path.relative_to(self.root).as_posix()

    def lookup(self, module: Module, name: str, depth: int = 0) -> tuple[Module, ast.AST] | None:
        """The definition that ``name`` refers to at the top level of ``module``, following imports."""
        if depth > 12:
            return None
        for stmt in _top_level(module.tree.body):
            if isinstance(stmt, ast.ClassDef | ast.FunctionDef) and stmt.name == name:
                return module, stmt
            if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
                return module, stmt.value
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
                return (module, stmt.value) if stmt.value is not None else None
            type_alias = getattr(ast, "TypeAlias", None)
            if type_alias is not None and isinstance(stmt, type_alias) and stmt.name.id == name:
                return module, stmt.value
        for stmt in _top_level(module.tree.body):
            if isinstance(stmt, ast.ImportFrom):
                for alias in stmt.names:
                    if (alias.asname or alias.name) != name:
                        continue
                    source = self._import_source(module, stmt)
                    target = self.module(source) if source else None
                    if target is not None:
                        found = self.lookup(target, alias.name, depth + 1)
                        if found is not None:
                            return found
                    submodule = self.module(f"{source}.{alias.name}") if source else None
                    if submodule is not None:
                        return submodule, submodule.tree
        return None

    @staticmethod
    def _import_source(module: Module, stmt: ast.ImportFrom) -> str | None:
        if stmt.level == 0:
            return stmt.module
        parts = module.package.split(".")
        if stmt.level > 1:
            parts = parts[: -(stmt.level - 1)]
        return ".".join([*parts, stmt.module] if stmt.module else parts)

    def lookup_class(self, module: Module, name: str) -> tuple[Module, ast.ClassDef] | None:
        found = self.lookup(module, name)
        if found is not None and isinstance(found[1], ast.ClassDef):
            return found[0], found[1]
        return None


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Top-level statements, including those under ``if TYPE_CHECKING:`` and ``try:``."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _top_level(stmt.body)
            yield from _top_level(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _top_level(stmt.body)
            for handler in stmt.handlers:
                yield from _top_level(handler.body)


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


# ---------------------------------------------------------------------------
# Dataclass fields and what `get_kwargs` makes of their annotations


@dataclass(frozen=True)
class ConfigClass:
    module: Module
    node: ast.ClassDef

    @property
    def name(self) -> str:
        return self.node.name


def class_chain(release: Release, cls: ConfigClass) -> list[ConfigClass]:
    """``cls`` and its resolvable bases, most derived first (a linear MRO is enough here)."""
    chain = [cls]
    for base in cls.node.bases:
        name = _base_name(base)
        found = release.lookup_class(cls.module, name) if name else None
        if found is not None:
            for parent in class_chain(release, ConfigClass(*found)):
                if parent not in chain:
                    chain.append(parent)
    return chain


def dataclass_fields(release: Release, cls: ConfigClass) -> dict[str, tuple[Module, ast.expr]]:
    """What ``dataclasses.fields(cls)`` returns: name -> (module, annotation), bases included."""
    found: dict[str, tuple[Module, ast.expr]] = {}
    for klass in reversed(class_chain(release, cls)):
        for stmt in klass.node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            outer = stmt.annotation.value if isinstance(stmt.annotation, ast.Subscript) else stmt.annotation
            if _base_name(outer) in {"ClassVar", "InitVar"}:
                continue
            found[stmt.target.id] = (klass.module, stmt.annotation)
    return found


def find_method(release: Release, cls: ConfigClass, name: str) -> tuple[ConfigClass, ast.FunctionDef] | None:
    for klass in class_chain(release, cls):
        for stmt in klass.node.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                return klass, stmt
    return None


def is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if _base_name(target) in {"dataclass", "config"}:
            return True
    return False


def annotation_leaves(release: Release, module: Module, node: ast.expr | None, depth: int = 0) -> set[str]:
    """The members of a type annotation after unions, Optional, Annotated and aliases are unfolded.

    Builtins come back by name, a ``Literal`` as ``Literal``, a dataclass as ``dataclass`` and
    anything else as ``other``; only ``bool`` (and ``bool | str | None``) changes the outcome.
    """
    if node is None or depth > 20:
        return {"other"}
    if isinstance(node, ast.Constant):
        if node.value is None:
            return {"None"}
        if isinstance(node.value, str):  # a forward reference
            return annotation_leaves(release, module, ast.parse(node.value, mode="eval").body, depth + 1)
        return {"other"}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return annotation_leaves(release, module, node.left, depth + 1) | annotation_leaves(
            release, module, node.right, depth + 1
        )
    if isinstance(node, ast.Subscript):
        outer = _base_name(node.value)
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if outer in UNION_NAMES:
            leaves = set().union(*(annotation_leaves(release, module, a, depth + 1) for a in args))
            return leaves | {"None"} if outer == "Optional" else leaves
        if outer in TRANSPARENT_WRAPPERS:
            return annotation_leaves(release, module, args[0], depth + 1)
        if outer == "Literal":
            return {"Literal"}
        return {outer} if outer in BUILTIN_TYPES else {"other"}
    name = _base_name(node)
    if name is None:
        return {"other"}
    if name in BUILTIN_TYPES:
        return {name}
    found = release.lookup(module, name)
    if found is None:
        return {"other"}
    where, definition = found
    if isinstance(definition, ast.ClassDef):
        return {"dataclass"} if is_dataclass(definition) else {"other"}
    if isinstance(definition, ast.expr):
        if isinstance(definition, ast.Call) and _base_name(definition.func) == "TypeVar":
            return {"other"}
        return annotation_leaves(release, where, definition, depth + 1)
    return {"other"}


# ---------------------------------------------------------------------------
# The parser, walked statically


@dataclass
class Table:
    """What ``get_kwargs(cls)`` returns: one kwargs dict per field, plus edits made to them."""

    cls: ConfigClass
    edits: dict[str, dict[str, ast.expr]] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)


@dataclass
class Kwargs:
    """The keyword arguments one ``add_argument`` call ends up with (as far as they matter here)."""

    field_of: tuple[ConfigClass, str] | None = None
    explicit: dict[str, ast.expr] = field(default_factory=dict)

    def merged(self, other: Kwargs) -> Kwargs:
        return Kwargs(other.field_of or self.field_of, {**self.explicit, **other.explicit})


@dataclass
class Scope:
    """One function being walked: its assignments, the edits it makes to kwargs dicts, its class."""

    module: Module
    function: ast.FunctionDef
    cls: ConfigClass | None
    assigned: dict[str, list[ast.expr]] = field(default_factory=dict)
    table_edits: dict[str, dict[str, dict[str, ast.expr]]] = field(default_factory=dict)
    var_edits: dict[str, dict[str, ast.expr]] = field(default_factory=dict)
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)

    @classmethod
    def of(cls, module: Module, function: ast.FunctionDef, klass: ConfigClass | None) -> Scope:
        scope = cls(module, function, klass)
        for node in ast.walk(function):
            for child in ast.iter_child_nodes(node):
                scope.parents[child] = node
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    scope._note_target(target, node.value)
        return scope

    def _note_target(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.assigned.setdefault(target.id, []).append(value)
        elif isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
            key = target.slice.value
            inner = target.value
            if isinstance(inner, ast.Name) and isinstance(key, str):
                self.var_edits.setdefault(inner.id, {})[key] = value
            elif (
                isinstance(inner, ast.Subscript)
                and isinstance(inner.value, ast.Name)
                and isinstance(inner.slice, ast.Constant)
                and isinstance(key, str)
            ):
                per_field = self.table_edits.setdefault(inner.value.id, {})
                per_field.setdefault(str(inner.slice.value), {})[key] = value


@dataclass
class ParserModel:
    """The options of one release's ``vllm serve`` parser: option string -> takes a value."""

    release: Release
    options: dict[str, bool] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)
    inverse_prefixes: dict[str, str] = field(default_factory=dict)
    optional_bool_str: bool = False
    warnings: list[str] = field(default_factory=list)

    # -- entry point -------------------------------------------------------

    def build(self) -> None:
        release = self.release
        serve = release.require(SERVE)
        arg_utils = release.require(ARG_UTILS)
        self.files.update({release.relative_path(serve), release.relative_path(arg_utils)})
        self.optional_bool_str = "{bool, str, type(None)}" in ast.unparse(arg_utils.tree)
        self._read_argparse_utils(serve)
        found = release.lookup(serve, "make_arg_parser")
        module, make_arg_parser = found if found else (serve, None)
        if not isinstance(make_arg_parser, ast.FunctionDef):
            raise ExtractionError(f"vllm {release.version}: make_arg_parser not found from {serve.path}")
        self.files.add(release.relative_path(module))
        self.walk(Scope.of(module, make_arg_parser, None))
        if self._subparser_adds_help(serve):
            self.options.setdefault("-h", False)
            self.options.setdefault("--help", False)
        for rejected in self._rejected_under_serve(serve):
            self.options.pop(rejected, None)
        for short in self._rewritten_by_parse_args(serve):
            self.options.setdefault(short, True)

    def _flexible_parser(self, serve: Module) -> tuple[Module, ast.ClassDef] | None:
        found = self.release.lookup_class(serve, "FlexibleArgumentParser")
        if found is None:
            self.warnings.append("FlexibleArgumentParser not found; no enable/disable pairs or serve checks")
        else:
            self.files.add(self.release.relative_path(found[0]))
        return found

    def _read_argparse_utils(self, serve: Module) -> None:
        """Find an action registered in place of BooleanOptionalAction and the prefixes it inverts."""
        found = self._flexible_parser(serve)
        if found is None:
            return
        module, parser_class = found
        for call in ast.walk(parser_class):
            if not (isinstance(call, ast.Call) and _base_name(call.func) == "register" and len(call.args) == 3):
                continue
            kind, key, replacement = call.args
            if not (isinstance(kind, ast.Constant) and kind.value == "action"):
                continue
            if _base_name(key) != "BooleanOptionalAction":
                continue
            name = _base_name(replacement)
            action = self.release.lookup_class(module, name) if name else None
            if action is None:
                self.warnings.append(f"registered action {name} not found")
                continue
            for stmt in action[1].body:
                if (
                    isinstance(stmt, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "_inverse_prefixes" for t in stmt.targets)
                    and isinstance(stmt.value, ast.Dict)
                ):
                    for k, v in zip(stmt.value.keys, stmt.value.values, strict=True):
                        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant):
                            self.inverse_prefixes[str(k.value)] = str(v.value)

    def _subparser_adds_help(self, serve: Module) -> bool:
        for call in ast.walk(serve.tree):
            if isinstance(call, ast.Call) and _base_name(call.func) == "add_parser":
                for keyword in call.keywords:
                    if keyword.arg == "add_help" and isinstance(keyword.value, ast.Constant):
                        return bool(keyword.value.value)
        return True

    def _rejected_under_serve(self, serve: Module) -> set[str]:
        """Options that ``parse_args`` raises on when the subcommand is ``serve``.

        That is a ``raise`` under ``if ...args[0] == "serve"`` whose own ``if`` compares an argument
        with a literal option (directly or through a local variable), as 0.11.0 does for ``--model``.
        """
        found = self._flexible_parser(serve)
        if found is None:
            return set()
        rejected: set[str] = set()
        for method in found[1].body:
            if not (isinstance(method, ast.FunctionDef) and method.name == "parse_args"):
                continue
            scope = Scope.of(found[0], method, None)
            for branch in ast.walk(method):
                if not (isinstance(branch, ast.If) and "'serve'" in ast.unparse(branch.test)):
                    continue
                for node in ast.walk(ast.Module(body=branch.body, type_ignores=[])):
                    if isinstance(node, ast.If) and any(isinstance(s, ast.Raise) for s in node.body):
                        rejected |= self._compared_options(scope, node.test)
        return rejected

    def _rewritten_by_parse_args(self, serve: Module) -> set[str]:
        """Short options ``parse_args`` rewrites before argparse sees them.

        From 0.12.0 ``-O3``, ``-O 3`` and ``-O=3`` become ``--optimization-level 3`` there, so ``-O``
        is accepted although no ``add_argument`` call registers it.
        """
        found = self._flexible_parser(serve)
        shorts: set[str] = set()
        for method in found[1].body if found else []:
            if not (isinstance(method, ast.FunctionDef) and method.name == "parse_args"):
                continue
            for node in ast.walk(method):
                candidates: list[ast.expr] = []
                if isinstance(node, ast.Compare) and all(isinstance(op, ast.Eq) for op in node.ops):
                    candidates = node.comparators
                elif isinstance(node, ast.Call) and _base_name(node.func) == "startswith":
                    candidates = node.args
                for const in candidates:
                    if isinstance(const, ast.Constant) and re.fullmatch(r"-[A-Za-z]", str(const.value)):
                        shorts.add(str(const.value))
        return shorts

    def _compared_options(self, scope: Scope, test: ast.expr, seen: frozenset[str] = frozenset()) -> set[str]:
        options: set[str] = set()
        for node in ast.walk(test):
            if isinstance(node, ast.Name) and node.id not in seen:
                for value in scope.assigned.get(node.id, []):
                    options |= self._compared_options(scope, value, seen | {node.id})
            if isinstance(node, ast.Compare):
                for const in ast.walk(node):
                    if isinstance(const, ast.Constant) and str(const.value).startswith("--"):
                        options.add(str(const.value))
        return options

    # -- walking functions -------------------------------------------------

    def walk(self, scope: Scope) -> None:
        for node in ast.walk(scope.function):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr == "add_argument":
                self._add_argument(scope, node)
            elif node.func.attr == "add_cli_args":
                self._follow_add_cli_args(scope, node.func.value)

    def _follow_add_cli_args(self, scope: Scope, owner: ast.expr) -> None:
        klass = self._class_named(scope, owner)
        if klass is None:
            self.warnings.append(f"{scope.module.name}: cannot resolve {ast.unparse(owner)}.add_cli_args")
            return
        found = find_method(self.release, klass, "add_cli_args")
        if found is None:
            self.warnings.append(f"{klass.name} has no add_cli_args")
            return
        defining, method = found
        self.files.add(self.release.relative_path(defining.module))
        self.walk(Scope.of(defining.module, method, klass))

    def _class_named(self, scope: Scope, node: ast.expr) -> ConfigClass | None:
        if isinstance(node, ast.Name) and node.id == "cls" and scope.cls is not None:
            return scope.cls
        name = _base_name(node)
        found = self.release.lookup_class(scope.module, name) if name else None
        return ConfigClass(*found) if found else None

    # -- one add_argument call ---------------------------------------------

    def _add_argument(self, scope: Scope, call: ast.Call) -> None:
        for binding in self._loop_bindings(scope, call):
            strings: list[str] = []
            for arg in call.args:
                strings.extend(self._option_strings(scope, arg, binding))
            strings = [s for s in strings if s.startswith("-")]
            if not strings:
                continue  # a positional argument (model_tag)
            kwargs = Kwargs()
            for keyword in call.keywords:
                if keyword.arg is None:
                    kwargs = kwargs.merged(self._kwargs(scope, keyword.value, binding))
                else:
                    kwargs.explicit[keyword.arg] = keyword.value
            self._record(strings, self._action(scope, kwargs))

    def _loop_bindings(self, scope: Scope, call: ast.Call) -> list[dict[str, object]]:
        """One name -> value mapping per iteration of the loops around ``call``."""
        loops: list[ast.For] = []
        node: ast.AST = call
        while node in scope.parents:
            node = scope.parents[node]
            if isinstance(node, ast.For):
                loops.append(node)
        bindings: list[dict[str, object]] = [{}]
        for loop in reversed(loops):
            iterations = self._iterations(scope, loop)
            bindings = [{**outer, **inner} for outer in bindings for inner in iterations]
        return bindings

    def _iterations(self, scope: Scope, loop: ast.For) -> list[dict[str, object]]:
        target = loop.target
        names = [t.id for t in target.elts if isinstance(t, ast.Name)] if isinstance(target, ast.Tuple) else []
        if isinstance(target, ast.Name):
            names = [target.id]
        items = loop.iter
        if isinstance(items, ast.List | ast.Tuple):
            result: list[dict[str, object]] = []
            for element in items.elts:
                values = element.elts if isinstance(element, ast.Tuple) and len(names) > 1 else [element]
                result.append(dict(zip(names, values, strict=False)))
            return result
        if (
            isinstance(items, ast.Call)
            and isinstance(items.func, ast.Attribute)
            and items.func.attr == "items"
            and len(names) == 2
        ):
            table = self._table(scope, items.func.value)
            if table is not None:
                fields = dataclass_fields(self.release, table.cls)
                return [
                    {
                        names[0]: ast.Constant(name),
                        names[1]: Kwargs((table.cls, name), dict(table.edits.get(name, {}))),
                    }
                    for name in fields
                    if name not in table.removed
                ]
        self.warnings.append(f"{scope.module.name}:{loop.lineno}: loop over {ast.unparse(items)} not understood")
        return [{}]

    def _option_strings(self, scope: Scope, arg: ast.expr, binding: dict[str, object]) -> list[str]:
        if isinstance(arg, ast.Starred):
            flags = self._value(scope, arg.value, binding)
            return [f for f in flags if isinstance(f, str)] if isinstance(flags, list) else []
        text = self._value(scope, arg, binding)
        if isinstance(text, str):
            return [text]
        self.warnings.append(f"{scope.module.name}:{arg.lineno}: option string {ast.unparse(arg)} not understood")
        return []

    def _value(self, scope: Scope, node: ast.expr, binding: dict[str, object]) -> object:
        """A small evaluator for the expressions that build option strings."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.List | ast.Tuple):
            return [self._value(scope, e, binding) for e in node.elts]
        if isinstance(node, ast.Name):
            if node.id in binding:
                bound = binding[node.id]
                return self._value(scope, bound, binding) if isinstance(bound, ast.expr) else bound
            assigned = scope.assigned.get(node.id, [])
            return self._value(scope, assigned[-1], binding) if len(assigned) == 1 else None
        if isinstance(node, ast.JoinedStr):
            parts = [self._value(scope, v, binding) for v in node.values]
            texts = [p for p in parts if isinstance(p, str)]
            return "".join(texts) if len(texts) == len(parts) else None
        if isinstance(node, ast.FormattedValue):
            return self._value(scope, node.value, binding)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method = node.func.attr
            if method == "replace" and len(node.args) == 2:
                text, old, new = (self._value(scope, a, binding) for a in (node.func.value, *node.args))
                if all(isinstance(x, str) for x in (text, old, new)):
                    return str(text).replace(str(old), str(new))
            if method == "pop" and node.args and isinstance(node.args[0], ast.Constant):
                owner = self._value(scope, node.func.value, binding)
                key = str(node.args[0].value)
                if isinstance(owner, Kwargs) and key in owner.explicit:
                    return self._value(scope, owner.explicit[key], binding)
                return self._value(scope, node.args[1], binding) if len(node.args) > 1 else None
        return None

    def _table(self, scope: Scope, node: ast.expr, seen: frozenset[int] = frozenset()) -> Table | None:
        """The ``get_kwargs(cls)`` result an expression holds, with the edits made to it."""
        if isinstance(node, ast.Call):
            callee = _base_name(node.func)
            if callee == "get_kwargs" and node.args:
                klass = self._class_named(scope, node.args[0])
                return Table(klass) if klass else None
            if callee == "_customize_cli_kwargs" and node.args and isinstance(node.func, ast.Attribute):
                inner = self._table(scope, node.args[0], seen)
                owner = self._class_named(scope, node.func.value)
                if inner is not None and owner is not None:
                    self._apply_customizations(inner, owner)
                return inner
            return None
        if isinstance(node, ast.Name):
            for value in reversed(scope.assigned.get(node.id, [])):
                if id(value) in seen:
                    continue
                table = self._table(scope, value, seen | {id(value)})
                if table is not None:
                    for name, edits in scope.table_edits.get(node.id, {}).items():
                        table.edits.setdefault(name, {}).update(edits)
                    table.removed |= self._deleted_fields(scope, node.id)
                    return table
        return None

    def _apply_customizations(self, table: Table, owner: ConfigClass) -> None:
        """Edits made by ``_customize_cli_kwargs`` anywhere in the class chain of ``owner``."""
        for klass in class_chain(self.release, owner):
            for stmt in klass.node.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == "_customize_cli_kwargs":
                    inner = Scope.of(klass.module, stmt, owner)
                    for edits in inner.table_edits.values():
                        for name, changes in edits.items():
                            for key, value in changes.items():
                                table.edits.setdefault(name, {}).setdefault(key, value)
                    for param in stmt.args.args:
                        table.removed |= self._deleted_fields(inner, param.arg)

    @staticmethod
    def _deleted_fields(scope: Scope, table_name: str) -> set[str]:
        """Fields removed from a kwargs table (``del t["f"]`` or ``t.pop("f")``) before registration."""
        gone: set[str] = set()
        for node in ast.walk(scope.function):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Delete):
                targets = node.targets
            for target in targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == table_name
                    and isinstance(target.slice, ast.Constant)
                ):
                    gone.add(str(target.slice.value))
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "pop"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == table_name
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                gone.add(str(node.args[0].value))
        return gone

    def _kwargs(self, scope: Scope, node: ast.expr, binding: dict[str, object]) -> Kwargs:
        """What ``**node`` contributes to an ``add_argument`` call."""
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            table = self._table(scope, node.value)
            if table is not None:
                name = str(node.slice.value)
                return Kwargs((table.cls, name), dict(table.edits.get(name, {})))
        if isinstance(node, ast.Dict):
            merged = Kwargs()
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    merged = merged.merged(self._kwargs(scope, value, binding))
                elif isinstance(key, ast.Constant):
                    merged.explicit[str(key.value)] = value
            return merged
        if isinstance(node, ast.Name):
            bound = binding.get(node.id)
            if isinstance(bound, Kwargs):
                return bound
            assigned = scope.assigned.get(node.id, [])
            if assigned:
                base = self._kwargs(scope, assigned[0], binding)
                return base.merged(Kwargs(None, dict(scope.var_edits.get(node.id, {}))))
        self.warnings.append(f"{scope.module.name}:{node.lineno}: **{ast.unparse(node)} not understood")
        return Kwargs()

    # -- what an option does with a value ----------------------------------

    def _action(self, scope: Scope, kwargs: Kwargs) -> str:
        """``value`` (consumes one or more values), ``flag`` (none) or ``bool`` (BooleanOptionalAction)."""
        action = kwargs.explicit.get("action")
        if action is not None:
            if isinstance(action, ast.Constant):
                return "flag" if action.value in NO_VALUE_ACTIONS else "value"
            name = _base_name(action)
            if name == "BooleanOptionalAction":
                return "bool"
            found = self.release.lookup_class(scope.module, name) if name else None
            if found is not None and any(_base_name(b) == "BooleanOptionalAction" for b in found[1].bases):
                return "bool"
            return "value"
        nargs = kwargs.explicit.get("nargs")
        if isinstance(nargs, ast.Constant) and nargs.value == 0:
            return "flag"
        if kwargs.field_of is None:
            return "value"
        klass, name = kwargs.field_of
        fields = dataclass_fields(self.release, klass)
        if name not in fields:
            self.warnings.append(f"{klass.name}.{name}: no such field")
            return "value"
        module, annotation = fields[name]
        leaves = annotation_leaves(self.release, module, annotation)
        # Mirrors `_compute_kwargs`: dataclass first, then the bool | str | None special case, then bool.
        if "dataclass" in leaves or "bool" not in leaves:
            return "value"
        if self.optional_bool_str and leaves == {"bool", "str", "None"}:
            return "value"
        return "bool"

    def _record(self, strings: list[str], action: str) -> None:
        takes_value = action == "value"
        for option in strings:
            self.options[option] = takes_value
        if action != "bool":
            return
        for option in strings:
            if option.startswith("--"):
                self.options.setdefault("--no-" + option[2:], False)
            for prefix, inverse in self.inverse_prefixes.items():
                if option.startswith(prefix):
                    self.options.setdefault(inverse + option[len(prefix) :], False)


# ---------------------------------------------------------------------------
# Across releases


@dataclass(frozen=True)
class Lifecycle:
    flag: str
    introduced: str | None
    removed: str | None
    takes_value: bool


def lifecycles(per_release: dict[str, dict[str, bool]], problems: list[str]) -> list[Lifecycle]:
    """One entry per option and run of consecutive releases that accept it.

    An option that leaves and comes back (``--disable-log-requests``: gone in 0.17.0, back in
    0.33.0 as the inverse of ``--enable-log-requests``) gets one entry per run, which
    ``CliInventory.accepted`` handles as it is.
    """
    versions = list(per_release)
    by_flag: dict[str, list[Run]] = {}
    for run in runs(per_release):
        by_flag.setdefault(run.name, []).append(run)
    found: list[Lifecycle] = []
    for flag, flag_runs in by_flag.items():
        if len(flag_runs) > 1:
            problems.append(f"{flag}: accepted in {len(flag_runs)} separate runs of releases; one entry per run")
        kinds = {per_release[versions[i]][flag] for run in flag_runs for i in run.indexes}
        if len(kinds) > 1:
            problems.append(f"{flag}: takes a value in some releases and not others; recorded as taking one")
        found += [Lifecycle(flag, run.introduced, run.removed, takes_value=True in kinds) for run in flag_runs]
    return found


def render(entries: list[Lifecycle], sources: list[str], command: str) -> str:
    lines = [
        "# Every option `vllm serve` accepts, by release. GENERATED: do not edit by hand; regenerate with",
        f"#   {command}",
        "# from the extracted wheels of every vLLM release in releases.yaml (static ast reading of the",
        "# parser; see the script's docstring for what counts as an option). `introduced`/`removed` are the",
        "# first release that accepts / no longer accepts the option; absent means already in the oldest",
        "# release / still in the newest. `takes_value: false` marks switches (store_true, --[no-]X).",
        "sources:",
        *(f"  - '{s}'" for s in sources),
        f"verified_at: {VERIFIED_AT}",
        "flags:",
    ]
    for e in entries:
        parts = [f"flag: '{e.flag}'"]
        if e.introduced:
            parts.append(f"introduced: '{e.introduced}'")
        if e.removed:
            parts.append(f"removed: '{e.removed}'")
        parts.append(f"takes_value: {'true' if e.takes_value else 'false'}")
        lines.append(f"  - {{{', '.join(parts)}}}")
    return "\n".join(lines) + "\n"


def build(src_dir: Path, versions: list[str], problems: list[str]) -> tuple[list[Lifecycle], list[str]]:
    per_release: dict[str, dict[str, bool]] = {}
    files: dict[str, set[str]] = {}
    for version in versions:
        root = src_dir / f"vllm-{version}"
        if not (root / "vllm").is_dir():
            raise ExtractionError(f"no extracted wheel for vllm {version} at {root}")
        model = ParserModel(Release(version, root))
        model.build()
        problems.extend(f"vllm {version}: {w}" for w in dict.fromkeys(model.warnings))
        per_release[version] = model.options
        files[version] = model.files
    sources = [
        f"wheel:vllm=={version}:{path}"
        for version in (versions[-1], versions[0])
        for path in sorted(files[version])
        if not path.endswith("cli/serve.py")
    ]
    return lifecycles(per_release, problems), list(dict.fromkeys(sources))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src-dir", type=Path, required=True, help="extracted wheels, one directory per release")
    parser.add_argument("--out", type=Path, default=REPO / "knowledge" / "cli_inventory.yaml")
    parser.add_argument(
        "--releases", type=Path, default=REPO / "knowledge" / "releases.yaml", help="the release list to cover"
    )
    args = parser.parse_args(argv)
    problems: list[str] = []
    try:
        versions = released(args.releases, "vllm")
        entries, sources = build(args.src_dir, versions, problems)
    except ExtractionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    kept: list[Lifecycle] = []
    for entry in entries:
        try:
            InventoryFlag.model_validate({"flag": entry.flag, "introduced": entry.introduced, "removed": entry.removed})
        except ValidationError:
            problems.append(f"{entry.flag}: left out, the InventoryFlag schema does not accept this spelling")
            continue
        kept.append(entry)
    text = render(kept, sources, "python scripts/build_cli_inventory.py --src-dir SRC_DIR")
    CliInventory.model_validate(yaml.safe_load(text))  # never write a file the loader would refuse
    args.out.write_text(text, encoding="utf-8")
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    added = sum(1 for e in kept if e.introduced)
    removed = sum(1 for e in kept if e.removed)
    print(
        f"{len(kept)} options across {len(versions)} releases ({versions[0]} .. {versions[-1]}): "
        f"{added} introduced after {versions[0]}, {removed} removed; wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
