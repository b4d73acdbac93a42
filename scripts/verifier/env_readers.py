"""Environment variables and LMCache config keys as a release reads them, with their defaults."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from typing import Any

from .readers import LMCACHE_CONFIG, assignment, call_name, env_reads, find_class, first_constant, string_constant
from .source import NotCheckable, Observation, SourceTree

_GETENV = {"getenv", "get"}
_CASTS: dict[str, Any] = {"int": int, "float": float, "bool": bool, "str": str}


def _is_getenv(node: ast.AST, name: str) -> bool:
    """``getenv("name", ...)`` or ``environ.get("name", ...)``."""
    if not (isinstance(node, ast.Call) and call_name(node) in _GETENV and node.args):
        return False
    return string_constant(node.args[0]) == name


def _evaluate_call(node: ast.Call, name: str) -> Any:
    """What ``getenv("X", d)``, ``env_with_choices("X", d, ...)``, ``int(...)`` or ``.lower()`` yields unset."""
    called = call_name(node)
    if _is_getenv(node, name):
        default = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords), None)
        return None if default is None else evaluate_env(default, name)
    choices = called in ("env_with_choices", "env_list_with_choices") and len(node.args) >= 2
    if choices and string_constant(node.args[0]) == name:
        return evaluate_env(node.args[1], name)
    if called in _CASTS and len(node.args) == 1:
        inner = evaluate_env(node.args[0], name)
        return None if inner is None else _CASTS[called](inner)
    if called in ("lower", "upper", "strip") and isinstance(node.func, ast.Attribute):
        inner = evaluate_env(node.func.value, name)
        return getattr(inner, called)() if isinstance(inner, str) else inner
    raise NotCheckable(f"the default of {name} is computed ({ast.unparse(node)[:60]})")


def _evaluate_compare(node: ast.Compare, name: str) -> Any:
    left = evaluate_env(node.left, name)
    right = ast.literal_eval(node.comparators[0])
    op = node.ops[0]
    if isinstance(op, ast.In):
        return left in right
    if isinstance(op, ast.NotIn):
        return left not in right
    if isinstance(op, ast.Eq):
        return left == right
    if isinstance(op, ast.NotEq):
        return left != right
    raise NotCheckable(f"the default of {name} is computed ({ast.unparse(node)[:60]})")


def evaluate_env(node: ast.AST, name: str) -> Any:
    """What an envs.py expression yields when the variable is unset (a small, safe evaluator)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Call):
        return _evaluate_call(node, name)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return _evaluate_compare(node, name)
    if isinstance(node, ast.Lambda):
        return evaluate_env(node.body, name)
    raise NotCheckable(f"the default of {name} is computed ({ast.unparse(node)[:60]})")


def env_default(tree: SourceTree, name: str, files: Iterable[str]) -> Observation:
    files = list(files)
    for path in tree.containing(files, name):
        module = tree.module(path)
        for node in ast.walk(module) if module else ():
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    if string_constant(key) == name:
                        return Observation(evaluate_env(value, name), path, value.lineno)
            if isinstance(node, ast.Call) and _is_getenv(node, name):
                return Observation(evaluate_env(node, name), path, node.lineno)
    # Read only as os.environ["X"] behind an `in os.environ` test: unset means no value.
    read = first_constant(tree, tree.containing(files, name), {name}, env_reads)
    if read.value:
        return Observation(None, read.path, read.line)
    raise NotCheckable(f"{name} is not read in {', '.join(files)}")


# An LMCache config key as defined: (file, default expression or None, line).
ConfigKey = tuple[str, ast.expr | None, int]


def _module_tables(module: ast.Module) -> dict[str, ast.Dict]:
    """Module-level ``NAME = {...}`` tables, by name."""
    tables: dict[str, ast.Dict] = {}
    for node in module.body:
        targets, value = assignment(node)
        if targets and isinstance(targets[0], ast.Name) and isinstance(value, ast.Dict):
            tables[targets[0].id] = value
    return tables


def _definitions_entry(definitions: ast.Dict, key: str) -> ConfigKey | None:
    """``key`` in ``_CONFIG_DEFINITIONS = {"key": {"type": ..., "default": ...}}``."""
    for k, v in zip(definitions.keys, definitions.values, strict=True):
        if k is not None and string_constant(k) == key:
            default = None
            if isinstance(v, ast.Dict):
                default = next(
                    (dv for dk, dv in zip(v.keys, v.values, strict=True) if string_constant(dk) == "default"), None
                )
            return LMCACHE_CONFIG, default, k.lineno
    return None


def _engine_config_field(tree: SourceTree, key: str) -> ConfigKey | None:
    """Before 0.3.4: fields of LMCacheEngineConfig. The entries are environment variables, and
    from_env() starts from from_defaults(), overriding a few of its keyword defaults."""
    _, cls = find_class(tree, "LMCacheEngineConfig", [LMCACHE_CONFIG])
    line = next(
        (s.lineno for s in cls.body if isinstance(s, ast.AnnAssign) and getattr(s.target, "id", "") == key), None
    )
    if line is None:
        return None
    methods = {s.name: s for s in cls.body if isinstance(s, ast.FunctionDef)}
    from_env = methods.get("from_env")
    for node in ast.walk(from_env) if from_env else ():
        if isinstance(node, ast.Call) and call_name(node) == "from_defaults":
            override = next((k.value for k in node.keywords if k.arg == key), None)
            if override is not None:
                return LMCACHE_CONFIG, override, line
    from_defaults = methods.get("from_defaults")
    if from_defaults is not None:
        args = from_defaults.args.args[len(from_defaults.args.args) - len(from_defaults.args.defaults) :]
        for arg, default in zip(args, from_defaults.args.defaults, strict=True):
            if arg.arg == key:
                return LMCACHE_CONFIG, default, line
    return LMCACHE_CONFIG, None, line


def lmcache_config(tree: SourceTree, key: str) -> ConfigKey | None:
    """An LMCache config key: (file, default expression or None, line), or None when not defined."""
    module = tree.module(LMCACHE_CONFIG)
    if module is None:
        raise NotCheckable(f"{LMCACHE_CONFIG} is not in lmcache {tree.version}")
    tables = _module_tables(module)
    aliases = tables.get("_CONFIG_ALIASES")
    for k in aliases.keys if aliases is not None else []:
        if k is not None and string_constant(k) == key:  # a deprecated name LMCache still maps to its successor
            return LMCACHE_CONFIG, None, k.lineno
    definitions = tables.get("_CONFIG_DEFINITIONS")
    if definitions is not None:
        return _definitions_entry(definitions, key)
    return _engine_config_field(tree, key)
