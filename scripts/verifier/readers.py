"""Facts read out of a release's ast: registrations, options, classes, defaults, Literal values, env reads."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .source import Missing, NotCheckable, Observation, SourceTree

# A visitor: the (string, line) pairs one node offers as candidates.
Candidates = Callable[[ast.AST], Iterable[tuple[str, int]]]

FACTORY = "vllm/distributed/kv_transfer/kv_connector/factory.py"
LMCACHE_CONFIG = "lmcache/v1/config.py"
# How far aliases, imports and base classes are followed before giving up.
MAX_DEPTH = 6


def call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def string_constant(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def assignment(stmt: ast.stmt) -> tuple[list[ast.expr], ast.expr | None]:
    """(targets, value) of ``x = v`` or ``x: T = v``; ([], None) for any other statement."""
    if isinstance(stmt, ast.Assign):
        return stmt.targets, stmt.value
    if isinstance(stmt, ast.AnnAssign):
        return [stmt.target], stmt.value
    return [], None


def _definition(stmt: ast.stmt) -> tuple[list[str], ast.expr | None]:
    """(names, value) a module-level statement defines: an assignment or ``type X = ...`` (3.12)."""
    if type(stmt).__name__ == "TypeAlias":  # ast.TypeAlias does not exist on the 3.11 this runs on
        name, value = getattr(stmt, "name", None), getattr(stmt, "value", None)
        return ([name.id] if isinstance(name, ast.Name) else []), value
    targets, value = assignment(stmt)
    return [t.id for t in targets if isinstance(t, ast.Name)], value


def registrations(tree: SourceTree) -> dict[str, tuple[str, str, int]]:
    """Connector name -> (module, class, line) from ``register_connector`` calls in factory.py."""
    module = tree.module(FACTORY)
    if module is None:
        raise NotCheckable(f"{FACTORY} is not in vllm {tree.version}")
    found: dict[str, tuple[str, str, int]] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and call_name(node) == "register_connector" and len(node.args) >= 3:
            name, mod, cls = (string_constant(a) for a in node.args[:3])
            if name and mod and cls:
                found[name] = (mod, cls, node.lineno)
    return found


def first_constant(
    tree: SourceTree, files: list[str], wanted: set[str], accept: Candidates | None = None
) -> Observation:
    """The first string constant in ``wanted`` (in a position ``accept`` allows) among ``files``."""
    candidates = accept or all_constants
    for path in files:
        module = tree.module(path)
        if module is None:
            continue
        for node in ast.walk(module):
            for candidate, line in candidates(node):
                if candidate in wanted:
                    return Observation(True, path, line)
    return Observation(False)


def all_constants(node: ast.AST) -> Iterator[tuple[str, int]]:
    text = string_constant(node)
    if text is not None:
        yield text, getattr(node, "lineno", 0)


def add_argument_options(node: ast.AST) -> Iterator[tuple[str, int]]:
    if isinstance(node, ast.Call) and call_name(node) == "add_argument":
        for arg in node.args:
            text = string_constant(arg)
            if text is not None:
                yield text, node.lineno


def registered_names(node: ast.AST) -> Iterator[tuple[str, int]]:
    if isinstance(node, ast.Call) and call_name(node).startswith("register") and node.args:
        text = string_constant(node.args[0])
        if text is not None:
            yield text, node.lineno


_ENV_READERS = {"getenv", "get", "pop", "setdefault", "environ_get"}


def env_reads(node: ast.AST) -> Iterator[tuple[str, int]]:
    """A name read as an environment variable: a dict key, ``getenv("X")``, ``environ["X"]``, ``"X" in``."""
    text: str | None = None
    if isinstance(node, ast.Dict):
        for key in node.keys:
            text = string_constant(key)
            if key is not None and text is not None:
                yield text, key.lineno
        return
    if isinstance(node, ast.Call) and call_name(node) in _ENV_READERS and node.args:
        text = string_constant(node.args[0])
    elif isinstance(node, ast.Subscript):
        text = string_constant(node.slice)
    elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
        text = string_constant(node.left)
    if text is not None and isinstance(node, ast.expr):
        yield text, node.lineno


def names_and_keys(node: ast.AST) -> Iterator[tuple[str, int]]:
    """A key as code reads it: a string constant, a constructor keyword or a class field."""
    yield from all_constants(node)
    if isinstance(node, ast.FunctionDef) and node.name == "__init__":
        for arg in (*node.args.args, *node.args.kwonlyargs):
            yield arg.arg, arg.lineno
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        yield node.target.id, node.lineno


def find_class(tree: SourceTree, name: str, files: Iterable[str]) -> tuple[str, ast.ClassDef]:
    for path in tree.containing(files, f"class {name}"):
        module = tree.module(path)
        for node in ast.walk(module) if module else ():
            if isinstance(node, ast.ClassDef) and node.name == name:
                return path, node
    raise Missing(f"no class {name} in {tree.package} {tree.version}")


def imported_from(tree: SourceTree, path: str, name: str) -> str | None:
    """The file that ``from X import name`` in ``path`` points to, inside the package."""
    module = tree.module(path)
    for node in module.body if module else ():
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            if node.level:
                parts = path.split("/")[: -node.level]
                dotted = ".".join([*parts, *(node.module.split(".") if node.module else [])])
            else:
                dotted = node.module or ""
            return tree.module_path(dotted)
    return None


def _alias_of(module: ast.Module, name: str) -> str | None:
    """``X`` when the module says ``name = X`` (``NixlConnector = NixlPullConnector``)."""
    for stmt in module.body:
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
            and isinstance(stmt.value, ast.Name)
        ):
            return stmt.value.id
    return None


def subclasses(tree: SourceTree, path: str, cls: str, base: str, depth: int = 0) -> Observation:
    """Whether class ``cls`` defined in ``path`` has ``base`` among its ancestors inside the package."""
    module = tree.module(path)
    if module is None:
        raise NotCheckable(f"{path} is not in {tree.package} {tree.version}")
    node = next((n for n in ast.walk(module) if isinstance(n, ast.ClassDef) and n.name == cls), None)
    if node is None:
        alias = _alias_of(module, cls)
        if alias is not None and depth <= MAX_DEPTH:
            return subclasses(tree, path, alias, base, depth + 1)
        target = imported_from(tree, path, cls)
        if target is None or depth > MAX_DEPTH:
            raise NotCheckable(f"no class {cls} in {path}")
        return subclasses(tree, target, cls, base, depth + 1)
    found = any(_base_leads_to(tree, module, path, b, base, depth) for b in node.bases)
    return Observation(found, path, node.lineno)


def _base_leads_to(tree: SourceTree, module: ast.Module, path: str, node: ast.expr, base: str, depth: int) -> bool:
    """Whether the base class written as ``node`` is ``base`` or (followed inside the package) has it."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    if name == base:
        return True
    if depth > MAX_DEPTH or not name:
        return False
    local = any(isinstance(n, ast.ClassDef) and n.name == name for n in module.body)
    target = path if local else imported_from(tree, path, name)
    if target is None:
        return False
    try:
        return bool(subclasses(tree, target, name, base, depth + 1).value)
    except NotCheckable:
        return False


def literal(node: ast.expr, module: ast.Module) -> Any:
    """The value of a default expression, resolving module-level constants; else NotCheckable."""
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        pass
    if isinstance(node, ast.Name):
        for stmt in module.body:
            targets, value = assignment(stmt)
            if value is not None and any(isinstance(t, ast.Name) and t.id == node.id for t in targets):
                return literal(value, module)
    raise NotCheckable(f"the default is computed ({ast.unparse(node)[:60]})")


def field_default(tree: SourceTree, target: str, files: Iterable[str]) -> Observation:
    """The default of ``Class.field``; ``A.x or B.y`` tries each in turn while the field is missing."""
    if " or " in target:
        first, _, rest = target.partition(" or ")
        try:
            return field_default(tree, first, files)
        except Missing:
            return field_default(tree, rest, files)
    cls, _, name = target.partition(".")
    path, node = find_class(tree, cls, files)
    module = tree.module(path)
    assert module is not None  # find_class found the class in it
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            if stmt.value is None:
                raise NotCheckable(f"{target} has no default (required)")
            value = _default_expression(stmt.value, target)
            copied = _copied_field(value)
            if copied is not None:
                return field_default(tree, copied, files)
            return Observation(literal(value, module), path, stmt.lineno)
    raise Missing(f"{cls} has no field {name} in {tree.package} {tree.version}")


def _default_expression(value: ast.expr, target: str) -> ast.expr:
    """The default inside ``field(default=...)`` or ``Field(...)``; the value itself otherwise."""
    if not (isinstance(value, ast.Call) and call_name(value) in ("field", "Field")):
        return value
    keywords = {k.arg: k.value for k in value.keywords}
    if "default" in keywords:
        return keywords["default"]
    if value.args and call_name(value) == "Field":
        return value.args[0]
    raise NotCheckable(f"{target} uses a default factory")


def _copied_field(value: ast.expr) -> str | None:
    """``Class.field`` when a default copies another class's: ``CacheConfig.x`` or ``get_field(CacheConfig, "x")``."""
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        return f"{value.value.id}.{value.attr}"
    if isinstance(value, ast.Call) and call_name(value) == "get_field" and len(value.args) == 2:
        owner, attr = value.args[0], string_constant(value.args[1])
        if isinstance(owner, ast.Name) and attr:
            return f"{owner.id}.{attr}"
    return None


def _literal_values(node: ast.expr | None, tree: SourceTree, path: str, depth: int = 0) -> list[Any]:
    """Values accepted by a ``Literal`` inside an annotation (through unions, aliases, wrappers)."""
    if node is None or depth > MAX_DEPTH:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and depth:
        try:  # a string annotation
            return _literal_values(ast.parse(node.value, mode="eval").body, tree, path, depth + 1)
        except SyntaxError:
            return []
    if isinstance(node, ast.Subscript):
        head = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Literal":
            return [ast.literal_eval(i) for i in items]
        values: list[Any] = []
        for item in items[:1] if head == "Annotated" else items:
            values.extend(_literal_values(item, tree, path, depth + 1))
        return values
    if isinstance(node, ast.BinOp):
        return _literal_values(node.left, tree, path, depth + 1) + _literal_values(node.right, tree, path, depth + 1)
    if isinstance(node, ast.Name):
        module = tree.module(path)
        for stmt in module.body if module else ():
            names, value = _definition(stmt)
            if value is not None and node.id in names:
                return _literal_values(value, tree, path, depth + 1)
        source = imported_from(tree, path, node.id)
        if source is not None:
            return _literal_values(node, tree, source, depth + 1)
    return []


def literal_values(tree: SourceTree, target: str, files: Iterable[str]) -> Observation:
    cls, _, name = target.partition(".")
    path, node = find_class(tree, cls, files)
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            values = [v for v in _literal_values(stmt.annotation, tree, path, 1) if v is not None]
            if not values:
                raise NotCheckable(f"{target} is not annotated with a Literal type")
            return Observation(tuple(values), path, stmt.lineno)
    raise NotCheckable(f"{cls} has no field {name} in {tree.package} {tree.version}")
