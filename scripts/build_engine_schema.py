"""Generate knowledge/engine_schema.yaml: the configuration keys vLLM and LMCache read, release by release.

    python scripts/build_engine_schema.py --src-dir ~/.cache/vllm-caching/src [--out knowledge/engine_schema.yaml]

The source directory holds extracted releases as ``vllm-0.33.0/vllm/...`` and ``lmcache-0.5.6/lmcache/...``
(the layout `scripts/build_name_inventory.py` reads); a release published without a wheel is read from
its source distribution, ``lmcache-0.3.0-sdist/lmcache/...``, and cited as ``sdist:``. Releases of
knowledge/releases.yaml with neither are skipped and recorded as not read. Per release it reads, with
``ast`` (nothing is imported):

- the fields of the config classes in CONFIGS (``KVTransferConfig``, ``KVEventsConfig``, ``CacheConfig``,
  ``SchedulerConfig``, ``ParallelConfig``, ``CompilationConfig`` and its ``PassConfig``), each found in the
  module CONFIGS names or, in a release that keeps it elsewhere, the one ``vllm/config.py`` of older releases
  or another module of ``vllm/config/``:
  name, annotation (the accepted values of a ``Literal``, a module's Literal aliases spelled out), default
  (of ``field(...)`` or pydantic's ``Field(...)``; a factory's name for a factory; a module or class
  constant resolved to its value), and what the class does with a field it does not have: ``forbid`` when
  the class's pydantic config (its own ``@dataclass(config=ConfigDict(extra=...))`` or the body of vLLM's
  ``@config`` decorator) sets ``extra="forbid"``, else ``ignore`` (pydantic's default for dataclasses). A
  ``field(init=False)`` is computed by vLLM and cannot be set: not recorded; an ``InitVar`` is a constructor
  argument and is;
- the ``kv_connector_extra_config`` keys connectors read: ``<...extra_config>.get("k", default)``,
  ``get_from_extra_config("k", default)``, ``<...extra_config>["k"]`` (a read: no default, a missing key
  is an error) and ``"k" in <...extra_config>``, in the files of
  ``vllm/distributed/kv_transfer/kv_connector/v1`` and ``vllm/v1/kv_offload``. A file belongs to the
  connectors registered (``KVConnectorFactory.register_connector`` in ``kv_connector/factory.py``) for
  the module or package that holds it; ``vllm/v1/kv_offload`` to ``OffloadingConnector``, whose specs
  read it; a file no registered module holds is recorded for every connector (``connectors: []``);
- LMCache's key table: ``_CONFIG_DEFINITIONS`` in ``lmcache/v1/config.py`` (type, default, the
  ``env_converter``), before it existed the ``config.get("k", default)`` reads of
  ``LMCacheEngineConfig.from_file`` with the dataclass's annotations; the names of ``_CONFIG_ALIASES``
  and ``_DEPRECATED_CONFIGS``; and what LMCache does with an alias and with an unknown key, decided by
  running that release's own ``_resolve_config_aliases`` on each one (the one function, compiled from
  the release's source with its tables and a logger that records what it warns); a key's converter where it
  is ``int`` or ``float``, and what loading a config file does with a value the converter refuses
  (``_bad_value_behaviour``);
- vLLM's environment variables, the keys of ``environment_variables`` in ``vllm/envs.py`` (following a
  ``**OTHER`` table of the module): the default and the parse rule as the code writes them, the read
  (``os.getenv(NAME, default)``, ``os.environ.get``, or a helper given the name and the default, such as
  ``env_with_choices``) spelt ``<env>`` in the rule (``bool(int(<env>))``); a default or rule that is not
  a literal is recorded as its expression's text, cut at PARSE_TEXT_LIMIT characters;
- the ``LMCACHE_*`` environment names read outside that table, in every file of both packages (vLLM's
  in-tree LMCache adapter reads some): each string literal that is a whole ``LMCACHE_X`` name, and as a
  prefix (``access: prefix``) each literal or f-string head ``LMCACHE_X_`` (a table of its own, such as
  the cache controller's ``LMCACHE_CONTROLLER_*``). A literal counts whatever the code does with it, so a
  name is only ever missing when no code of the release spells it; the bare ``LMCACHE_`` head is the key
  table's own reader (``get_env_name``) and is not recorded.

Output is compact: one entry per name and run of consecutive releases read that have it
(``introduced``/``removed`` as in name_inventory.yaml); an attribute that changes inside a run is a
list of ``{since, value}``; ``source`` is the file and line in the newest release of the run. The
header records the sha256 of this script and of the module it shares with the other generators
(``scripts/wheel_trees``), so a test fails when the shipped file is older than either.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import logging
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import wheel_trees
from wheel_trees import ExtractionError, released, runs

REPO = Path(__file__).resolve().parents[1]
VERIFIED_AT = "2026-12-02"
RECIPE = "python scripts/build_engine_schema.py --src-dir SRC_DIR"
# The config classes read, each with the module that holds it in the releases covered; a release that keeps it
# elsewhere (the one vllm/config.py of older releases, another module of vllm/config/) is searched for it.
CONFIGS = {
    "KVTransferConfig": "vllm/config/kv_transfer.py",
    "KVEventsConfig": "vllm/config/kv_events.py",
    "CacheConfig": "vllm/config/cache.py",
    "SchedulerConfig": "vllm/config/scheduler.py",
    "ParallelConfig": "vllm/config/parallel.py",
    # --compilation-config (-O) and the pass_config object inside it, validated as classes of their own
    "CompilationConfig": "vllm/config/compilation.py",
    "PassConfig": "vllm/config/compilation.py",
}
LEGACY_CONFIG = "vllm/config.py"
CONFIG_DIR = "vllm/config"
ENVS = "vllm/envs.py"
ENV_TABLE = "environment_variables"
PARSE_TEXT_LIMIT = 160  # a parse rule longer than this is cut (a few lambdas span a screen)
CONFIG_UTILS = "vllm/config/utils.py"
CONNECTOR_DIR = "vllm/distributed/kv_transfer/kv_connector/v1"
FACTORY = "vllm/distributed/kv_transfer/kv_connector/factory.py"
# Read by the offloading specs that only OffloadingConnector builds (spec_name in its extra config).
OWNED_DIRS = {"vllm/v1/kv_offload": "OffloadingConnector"}
LMCACHE_CONFIG = "lmcache/v1/config.py"
LMCACHE_CONFIG_BASE = "lmcache/v1/config_base.py"
LMCACHE_ADAPTER = "lmcache/integration/vllm"
UNKNOWN_PROBE = "no_such_key_probe"
BUILTIN_CONVERTERS = ("int", "float")  # the converters whose refusals the checker can reproduce exactly


@dataclass(frozen=True)
class Tree:
    """One extracted release: where it is and how a source in it is cited."""

    package: str
    version: str
    root: Path
    kind: str  # "wheel" or "sdist"

    def parse(self, relative: str) -> ast.Module | None:
        path = self.root / relative
        if not path.is_file():
            return None
        try:
            return ast.parse(path.read_text(encoding="utf-8"), str(path))
        except (SyntaxError, UnicodeDecodeError):
            return None

    def cite(self, relative: str, line: int) -> str:
        return f"{self.kind}:{self.package}=={self.version}:{relative}:{line}"


# ---------------------------------------------------------------------------------------------
# small ast helpers


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _PEP604(ast.NodeTransformer):
    """``Optional[X]`` -> ``X | None`` and ``Union[A, B]`` -> ``A | B``: one spelling across releases."""

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        name = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", None)
        if name == "Optional":
            return ast.BinOp(node.slice, ast.BitOr(), ast.Constant(None))
        if name == "Union" and isinstance(node.slice, ast.Tuple):
            parts = node.slice.elts
            joined: ast.expr = parts[0]
            for part in parts[1:]:
                joined = ast.BinOp(joined, ast.BitOr(), part)
            return joined
        return node


def annotation_text(node: ast.expr, aliases: dict[str, ast.expr] | None = None) -> str:
    """The annotation as one spelling across releases: PEP 604 unions, and a module's ``Literal`` aliases
    (``KVRole = Literal[KVProducer, KVConsumer]``) spelled out as the one flat ``Literal`` pydantic checks."""
    tree = _PEP604().visit(ast.parse(ast.unparse(node), mode="eval")).body
    if aliases:
        tree = _Literals(aliases).visit(tree)
    return ast.unparse(tree)


class _Literals(ast.NodeTransformer):
    def __init__(self, aliases: dict[str, ast.expr]) -> None:
        self.aliases = aliases

    def visit_Name(self, node: ast.Name) -> ast.AST:
        value = self.aliases.get(node.id)
        return self.visit(ast.parse(ast.unparse(value), mode="eval").body) if value is not None else node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if getattr(node.value, "id", None) != "Literal":
            return node
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        flat: list[ast.expr] = []
        for item in items:  # Literal[Literal[a, b], Literal[b, c]] is Literal[a, b, c]
            inner = (
                item.slice if isinstance(item, ast.Subscript) and getattr(item.value, "id", None) == "Literal" else None
            )
            for value in (inner.elts if isinstance(inner, ast.Tuple) else [inner]) if inner is not None else [item]:
                if ast.dump(value) not in {ast.dump(v) for v in flat}:
                    flat.append(value)
        node.slice = ast.Tuple(flat, ast.Load()) if len(flat) > 1 else flat[0]
        return node


def literal_aliases(module: ast.Module) -> dict[str, ast.expr]:
    """Top-level ``NAME = Literal[...]`` of a module (a Literal of other such names included)."""
    found: dict[str, ast.expr] = {}
    for stmt in module.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = stmt.value
            if isinstance(value, ast.Subscript) and getattr(value.value, "id", None) == "Literal":
                found[stmt.targets[0].id] = value
    return found


def _module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    """Top-level ``NAME = <literal>`` of a module, so a default named by a constant shows its value."""
    return _constants(tree.body)


def _constants(body: list[ast.stmt]) -> dict[str, ast.expr]:
    """``NAME = <literal>`` (or ``NAME: T = <literal>``) of a module's or a class's body."""
    found: dict[str, ast.expr] = {}
    for stmt in body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value, name = stmt.value, stmt.targets[0].id
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            value, name = stmt.value, stmt.target.id
        else:
            continue
        try:
            ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        found[name] = value
    return found


def default_text(node: ast.expr | None, constants: dict[str, ast.expr]) -> str:
    if node is None:
        return "None"
    if isinstance(node, ast.Name) and node.id in constants:
        return ast.unparse(constants[node.id])
    return ast.unparse(node)


def _module_dict(tree: ast.Module, name: str) -> tuple[ast.Dict, int] | None:
    for stmt in tree.body:
        targets = (
            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        )
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and isinstance(value, ast.Dict):
            return value, stmt.lineno
    return None


# ---------------------------------------------------------------------------------------------
# vLLM config classes


def _forbids_by_decorator(tree: Tree) -> bool:
    """Whether vLLM's ``@config`` decorator in this release sets ``extra="forbid"`` (it did not always)."""
    utils = tree.parse(CONFIG_UTILS)
    for stmt in utils.body if utils else ():
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "config":
            if any(isinstance(d, ast.Name) and d.id == "overload" for d in stmt.decorator_list):
                continue
            return _extra_of(stmt) == "forbid"
    return False


def _extra_of(node: ast.AST) -> str | None:
    """The ``extra=`` of the first ``ConfigDict(...)`` call (or ``config={'extra': ...}``) under ``node``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and getattr(sub.func, "id", getattr(sub.func, "attr", None)) == "ConfigDict":
            for keyword in sub.keywords:
                if keyword.arg == "extra" and (text := _string(keyword.value)):
                    return text
    return None


def _config_class(tree: Tree, cls_name: str, relative: str) -> tuple[str, ast.Module, ast.ClassDef] | None:
    """Where this release defines ``cls_name`` (at a module's top level): the module CONFIGS names, else the
    one config module of older releases, else any module of vllm/config/."""
    others = sorted(str(p.relative_to(tree.root)) for p in (tree.root / CONFIG_DIR).glob("*.py"))
    for candidate in dict.fromkeys([relative, LEGACY_CONFIG, *others]):
        module = tree.parse(candidate)
        cls = (
            next((s for s in module.body if isinstance(s, ast.ClassDef) and s.name == cls_name), None)
            if module
            else None
        )
        if module is not None and cls is not None:
            return candidate, module, cls
    return None


def config_fields(tree: Tree, problems: list[str]) -> dict[str, dict[str, Any]]:
    """``{"Class.field": attributes}`` for every class of CONFIGS in this release, and ``"Class"`` itself."""
    found: dict[str, dict[str, Any]] = {}
    by_decorator = None
    for cls_name, expected in CONFIGS.items():
        located = _config_class(tree, cls_name, expected)
        if located is None:
            problems.append(f"vllm {tree.version}: no class {cls_name} in {expected} or another config module")
            continue
        relative, module, cls = located
        extra = next((e for d in cls.decorator_list if (e := _extra_of(d))), None)
        if extra is None and any(getattr(d, "id", None) == "config" for d in cls.decorator_list):
            by_decorator = _forbids_by_decorator(tree) if by_decorator is None else by_decorator
            extra = "forbid" if by_decorator else None
        found[cls_name] = {
            "kind": "config", "file": relative, "unknown_fields": extra or "ignore",
            "source": tree.cite(relative, cls.lineno),
        }  # fmt: skip
        # a class constant (SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS: ClassVar[int]) names a default too
        constants, aliases = _module_constants(module) | _constants(cls.body), literal_aliases(module)
        for stmt in cls.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            annotation = annotation_text(stmt.annotation, aliases)
            # an InitVar is a constructor argument (SchedulerConfig.max_model_len from 0.11.1): kept, typed InitVar[T]
            if annotation.startswith(("ClassVar", "typing.ClassVar")) or _computed(stmt.value):
                continue
            found[f"{cls_name}.{stmt.target.id}"] = {
                "kind": "field",
                "config": cls_name,
                "name": stmt.target.id,
                "type": annotation,
                "default": _field_default(stmt.value, constants),
                "source": tree.cite(relative, stmt.lineno),
            }
    return found


def _computed(value: ast.expr | None) -> bool:
    """A ``field(init=False)``: vLLM computes it, no one can set it (``num_gpu_blocks``)."""
    if not (isinstance(value, ast.Call) and _field_call(value)):
        return False
    return any(k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False for k in value.keywords)


def _field_call(value: ast.expr | None) -> bool:
    """``field(...)`` of dataclasses or pydantic's ``Field(...)``: the default is an argument."""
    return isinstance(value, ast.Call) and getattr(value.func, "id", None) in ("field", "Field")


def _field_default(value: ast.expr | None, constants: dict[str, ast.expr]) -> str:
    """The default as written: ``field(default_factory=f)`` (or pydantic's ``Field``) gives ``f()``; no value:
    required."""
    if value is None:
        return "(required)"
    if isinstance(value, ast.Call) and _field_call(value):
        for keyword in value.keywords:
            if keyword.arg == "default_factory":
                return f"{ast.unparse(keyword.value)}()"
            if keyword.arg == "default":
                return default_text(keyword.value, constants)
        if value.args and getattr(value.func, "id", None) == "Field":  # Field(None, gt=0): the default first
            return default_text(value.args[0], constants)
        return "(required)"
    return default_text(value, constants)


# ---------------------------------------------------------------------------------------------
# connector extra-config keys


def registered_connectors(tree: Tree, lines: dict[str, int] | None = None) -> dict[str, list[str]]:
    """Module path (``vllm/.../v1/nixl``) -> connector names registered for it (``lines``: name -> line)."""
    factory = tree.parse(FACTORY)
    if factory is None:
        raise ExtractionError(f"vllm {tree.version}: {FACTORY} is missing or does not parse")
    modules: dict[str, list[str]] = {}
    for node in ast.walk(factory):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "register_connector":
            name, module = (_string(a) for a in node.args[:2]) if len(node.args) >= 2 else (None, None)
            if name and module:
                modules.setdefault(module.replace(".", "/"), []).append(name)
                if lines is not None:
                    lines[name] = node.lineno
    if not modules:
        raise ExtractionError(f"vllm {tree.version}: no register_connector call in {FACTORY}")
    return modules


def owners(relative: str, modules: dict[str, list[str]]) -> list[str] | None:
    """The connectors a file belongs to (the module-docstring rule); [] for shared code, None: not read."""
    for directory, connector in OWNED_DIRS.items():
        if relative.startswith(directory + "/"):
            return [connector]
    if not relative.startswith(CONNECTOR_DIR + "/"):
        return None
    best: tuple[int, list[str]] | None = None
    for module, names in modules.items():
        areas = [module + ".py", module + "/"]  # the module file, or the package
        if module.count("/") > CONNECTOR_DIR.count("/") + 1:  # a module inside a v1 subpackage: the package
            areas.append(module.rsplit("/", 1)[0] + "/")
        elif module.endswith("_connector"):  # v1/offloading_connector.py also owns v1/offloading*/
            areas.append(module[: -len("_connector")])
        for area in areas:  # the longest area holding the file wins: mooncake/store/ over mooncake/
            if relative.startswith(area) and (best is None or len(area) > best[0]):
                best = (len(area), sorted(set(names)))
    return best[1] if best else []


def _names_extra_config(node: ast.AST) -> bool:
    """``extra_config``, ``kvc_extra_config``, ``x.kv_connector_extra_config``, ``self.extra_config``."""
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name.endswith("extra_config") and not name.startswith(("model_loader", "ec_"))


def _handed_to(tree: Tree, relative: str) -> str | None:
    """The package whose vLLM integration a connector's file imports (``lmcache.integration.vllm...``,
    ``flexkv.integration.vllm...``): the connector builds that package's adapter with the whole vllm_config,
    so the adapter may read extra-config keys no vLLM code reads."""
    module = tree.parse(relative)
    for node in ast.walk(module) if module else ():
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
        for name in names:
            parts = name.split(".")
            if len(parts) > 1 and parts[0] != "vllm" and parts[1] == "integration":
                return parts[0]
    return None


def _prefix_reads(module: ast.Module) -> Iterator[tuple[str, str, str, int]]:
    """``for key, value in <...extra_config>.items(): if key.startswith("lmcache.")``: a namespace of keys."""
    for loop in ast.walk(module):
        if not (
            isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Attribute)
        ):
            continue
        if not (loop.iter.func.attr in ("items", "keys") and _names_extra_config(loop.iter.func.value)):
            continue
        target = loop.target.elts[0] if isinstance(loop.target, ast.Tuple) else loop.target
        for node in ast.walk(loop):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "startswith"
                and isinstance(node.func.value, ast.Name)
                and isinstance(target, ast.Name)
                and node.func.value.id == target.id
                and node.args
                and (prefix := _string(node.args[0]))
            ):
                yield f"{prefix}*", "prefix", "(the rest of the key is passed on)", node.lineno


def extra_config_reads(module: ast.Module) -> Iterator[tuple[str, str, str, int]]:
    """(key, access, default, line) for each literal key read from an extra config in one file; a prefix
    tested with ``key.startswith("lmcache.")`` is ``("lmcache.*", "prefix", ...)``: every key under it is
    passed on (LMCache sets its config key of the rest)."""
    constants = _module_constants(module)
    yield from _prefix_reads(module)
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            key = _string(node.args[0])
            if key is None:
                continue
            if node.func.attr == "startswith":
                continue  # a prefix counts only in a loop over the extra config's keys: _prefix_reads
            if node.func.attr == "get_from_extra_config" or (
                node.func.attr == "get" and _names_extra_config(node.func.value)
            ):
                default = node.args[1] if len(node.args) > 1 else None
                yield key, "get", default_text(default, constants), node.lineno
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _names_extra_config(node.value):
            if (key := _string(node.slice)) is not None:
                yield key, "index", "(required: a missing key is an error)", node.lineno
        elif (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.In | ast.NotIn)
            and _names_extra_config(node.comparators[0])
            and (key := _string(node.left)) is not None
        ):
            yield key, "in", "(tested for presence)", node.lineno


def extra_config_keys(tree: Tree, problems: list[str]) -> dict[str, dict[str, Any]]:
    """``{"Connector|key": attributes}``: the first read in path order gives default and source."""
    lines: dict[str, int] = {}
    modules = registered_connectors(tree, lines)
    order = {name: n for n, name in enumerate(lines)}
    found: dict[str, dict[str, Any]] = {
        f"connector:{name}": {"kind": "connector", "name": name, "source": tree.cite(FACTORY, line)}
        for name, line in lines.items()
    }
    paths = [
        *(tree.root / CONNECTOR_DIR).rglob("*.py"),
        *(p for d in OWNED_DIRS for p in (tree.root / d).rglob("*.py")),
    ]
    for path in sorted(paths):
        relative = path.relative_to(tree.root).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        connectors = owners(relative, modules)
        if connectors and ".integration." in text and (package := _handed_to(tree, relative)):
            for name in connectors:  # its extra config also reaches that package's adapter, which reads more keys
                found[f"connector:{name}"]["hands_to"] = package
        if "extra_config" not in text:
            continue
        module = tree.parse(relative)
        if connectors is None or module is None:
            if module is None:
                problems.append(f"vllm {tree.version}: {relative} does not parse; skipped")
            continue
        reads = sorted(extra_config_reads(module), key=lambda r: r[3])
        # Keyed by the first connector registered for the code (NixlConnector, not the Pull/Push variants
        # 0.24.0 registers for the same package), so a key does not look removed when a variant appears.
        primary = min(connectors, key=lambda c: order[c]) if connectors else "*"
        for key, access, default, line in reads:
            entry_id = f"{primary}|{key}"
            entry = found.get(entry_id)
            if entry is None or (entry["access"] != "get" and access == "get"):  # a get() carries the default
                found[entry_id] = {
                    "kind": "extra", "key": key, "connectors": connectors, "access": access,
                    "default": default, "source": tree.cite(relative, line),
                }  # fmt: skip
    return found


# ---------------------------------------------------------------------------------------------
# LMCache's key table


def lmcache_keys(tree: Tree, problems: list[str]) -> dict[str, dict[str, Any]]:
    config = tree.parse(LMCACHE_CONFIG)
    if config is None:
        raise ExtractionError(f"lmcache {tree.version}: {tree.root / LMCACHE_CONFIG} is missing or does not parse")
    found: dict[str, dict[str, Any]] = {}
    table = _module_dict(config, "_CONFIG_DEFINITIONS")
    if table is not None:
        for key_node, spec in zip(table[0].keys, table[0].values, strict=True):
            key = _string(key_node)
            if key is None or not isinstance(spec, ast.Dict):
                continue  # a **merged table is read by the loop's own keys; nothing LMCache does here so far
            fields = {_string(k): v for k, v in zip(spec.keys, spec.values, strict=True)}
            found[key] = {
                "kind": "key", "name": key, "type": annotation_text(fields["type"]) if "type" in fields else "?",
                "default": default_text(fields.get("default"), {}),
                "source": tree.cite(LMCACHE_CONFIG, key_node.lineno),  # type: ignore[union-attr]
            }  # fmt: skip
            converter = fields.get("env_converter")
            if isinstance(converter, ast.Name) and converter.id in BUILTIN_CONVERTERS:
                found[key]["converter"] = converter.id
    else:
        found.update(_from_file_keys(tree, config))
    if not found:
        raise ExtractionError(f"lmcache {tree.version}: no _CONFIG_DEFINITIONS and no from_file reads")
    aliases = _literal_table(config, "_CONFIG_ALIASES")
    deprecated = _literal_table(config, "_DEPRECATED_CONFIGS")
    behaviour = _alias_behaviour(tree, config, found, aliases, deprecated, problems)
    for name in sorted({*aliases, *deprecated} - set(found)):
        line = (_module_dict(config, "_CONFIG_ALIASES" if name in aliases else "_DEPRECATED_CONFIGS") or (None, 1))[1]
        found[f"alias:{name}"] = {
            "kind": "alias", "name": name, "maps_to": aliases.get(name), "message": deprecated.get(name),
            **behaviour.get(name, {"effect": "unknown"}), "source": tree.cite(LMCACHE_CONFIG, line),
        }  # fmt: skip
    found["unknown"] = {"kind": "unknown", "name": "(a key LMCache does not have)", **behaviour[UNKNOWN_PROBE]}
    if table is not None:
        found["bad_value"] = {"kind": "bad_value", "name": "(a config file value its converter refuses)",
                              **_bad_value_behaviour(tree, problems)}  # fmt: skip
    found.update(_adapter_reads(tree))
    found.update(env_reads(tree))
    return found


def _adapter_reads(tree: Tree) -> dict[str, dict[str, Any]]:
    """The kv_connector_extra_config keys LMCache's own vLLM adapter (lmcache/integration/vllm) reads: vLLM's
    LMCacheConnectorV1 and LMCacheMPConnector hand it the whole extra config."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((tree.root / LMCACHE_ADAPTER).rglob("*.py")):
        relative = path.relative_to(tree.root).as_posix()
        if "extra_config" not in path.read_text(encoding="utf-8", errors="replace"):
            continue
        module = tree.parse(relative)
        for key, access, default, line in sorted(extra_config_reads(module), key=lambda r: r[3]) if module else ():
            entry = found.get(f"adapter:{key}")
            if entry is None or (entry["access"] != "get" and access == "get"):
                found[f"adapter:{key}"] = {
                    "kind": "adapter", "key": key, "access": access, "default": default,
                    "source": tree.cite(relative, line),
                }  # fmt: skip
    return found


ENV_NAME = re.compile(r"^LMCACHE_[A-Z0-9_]*[A-Z0-9]$")
ENV_PREFIX = re.compile(r"^LMCACHE_[A-Z0-9_]*_$")
ENV_HEAD = re.compile(r"^LMCACHE_[A-Z0-9_]+$")


def env_reads(tree: Tree) -> dict[str, dict[str, Any]]:
    """Every ``LMCACHE_*`` name (or ``LMCACHE_X_`` prefix) a file of the release spells (module docstring)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted((tree.root / tree.package).rglob("*.py")):
        if "LMCACHE_" not in path.read_text(encoding="utf-8", errors="replace"):
            continue
        relative = path.relative_to(tree.root).as_posix()
        module = tree.parse(relative)
        for head, access, line in _env_literals(module) if module else ():
            found.setdefault(
                f"env:{head}",
                {"kind": "env", "name": head, "access": access, "source": tree.cite(relative, line)},
            )
    return found


# ---------------------------------------------------------------------------------------------
# vLLM's environment variables


def vllm_env(tree: Tree, problems: list[str]) -> dict[str, dict[str, Any]]:
    """Each variable of ``environment_variables`` in vllm/envs.py: its default and parse rule as the code
    writes them (see ``env_rule``), cited at its key."""
    module = tree.parse(ENVS)
    table = _module_dict(module, ENV_TABLE) if module else None
    if module is None or table is None:
        problems.append(f"vllm {tree.version}: no {ENV_TABLE} table in {ENVS}")
        return {}
    constants = _module_constants(module)
    found: dict[str, dict[str, Any]] = {}
    for key, value in _table_items(module, table[0]):
        name = _string(key)
        if name is None or key is None:
            continue
        default, parse = env_rule(name, value, constants)
        found[f"vllm_env:{name}"] = {
            "kind": "vllm_env", "name": name, "default": default, "parse": parse, "source": tree.cite(ENVS, key.lineno),
        }  # fmt: skip
    return found


def _table_items(module: ast.Module, table: ast.Dict, depth: int = 0) -> Iterator[tuple[ast.expr | None, ast.expr]]:
    """A module-level dict's items, following ``**OTHER_TABLE`` of the same module."""
    for key, value in zip(table.keys, table.values, strict=True):
        inner = _module_dict(module, value.id) if key is None and isinstance(value, ast.Name) and depth < 4 else None
        if inner is not None:
            yield from _table_items(module, inner[0], depth + 1)
        else:
            yield key, value


def env_rule(name: str, value: ast.expr, constants: dict[str, ast.expr]) -> tuple[str | None, str]:
    """(default, parse rule) of one ``environment_variables`` entry. The read is the first ``os.getenv(NAME,
    default)`` / ``os.environ.get(NAME, default)`` in the lambda, whose text becomes ``<env>`` in the rule
    (``int(<env>)``), or a helper called with the name first and the default second
    (``env_with_choices(<env>, 'auto', [...])``); where neither is found the default is not known (None) and
    the rule is the code as written."""
    body = value.body if isinstance(value, ast.Lambda) else value
    text = ast.unparse(body)
    for node in ast.walk(body):
        if not (isinstance(node, ast.Call) and node.args and _string(node.args[0]) == name):
            continue
        callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        given = (
            node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "default"), None)
        )
        default = default_text(given, constants) if given is not None or callee in ("getenv", "get") else None
        if callee in ("getenv", "get"):
            rule = text.replace(ast.unparse(node), "<env>", 1)
        else:
            rule = text.replace(ast.unparse(node.args[0]), "<env>", 1)
        return _cut(default), _cut(rule) or "<env>"
    return None, _cut(text) or ""


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= PARSE_TEXT_LIMIT:
        return text
    return text[: PARSE_TEXT_LIMIT - 1] + "…"


def _env_literals(module: ast.Module) -> Iterator[tuple[str, str, int]]:
    inside = {id(v) for n in ast.walk(module) if isinstance(n, ast.JoinedStr) for v in n.values}
    for node in ast.walk(module):
        if isinstance(node, ast.JoinedStr) and node.values:
            head = node.values[0]
            text = head.value if isinstance(head, ast.Constant) and isinstance(head.value, str) else ""
            if ENV_HEAD.match(text):  # f"LMCACHE_X_{...}": any name under it (not a message that starts so)
                yield text, "prefix", node.lineno
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside:
            if ENV_NAME.match(node.value):
                yield node.value, "name", node.lineno
            elif ENV_PREFIX.match(node.value) and node.value != "LMCACHE_":
                yield node.value, "prefix", node.lineno


def _literal_table(tree: ast.Module, name: str) -> dict[str, str]:
    table = _module_dict(tree, name)
    if table is None:
        return {}
    out: dict[str, str] = {}
    for key, value in zip(table[0].keys, table[0].values, strict=True):
        text = _string(key)
        if text is None:
            continue
        try:
            out[text] = str(ast.literal_eval(value))
        except ValueError:
            out[text] = ast.unparse(value)
    return out


def _from_file_keys(tree: Tree, config: ast.Module) -> dict[str, dict[str, Any]]:
    """Before the key table: the keys ``LMCacheEngineConfig.from_file`` reads, typed by the dataclass."""
    cls = next((s for s in config.body if isinstance(s, ast.ClassDef) and s.name == "LMCacheEngineConfig"), None)
    if cls is None:
        return {}
    types = {
        s.target.id: annotation_text(s.annotation)
        for s in cls.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
    }
    from_file = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "from_file"), None)
    found: dict[str, dict[str, Any]] = {}
    for node in ast.walk(from_file) if from_file else ():
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get" and node.args:
            if getattr(node.func.value, "id", None) != "config" or (key := _string(node.args[0])) is None:  # type: ignore[attr-defined]
                continue
            if key in found:
                continue
            found[key] = {
                "kind": "key", "name": key, "type": types.get(key, "?"),
                "default": default_text(node.args[1] if len(node.args) > 1 else None, {}),
                "source": tree.cite(LMCACHE_CONFIG, node.lineno),
            }  # fmt: skip
    for key, entry in found.items():
        if key not in types:  # read as a fallback for another field: the old spelling of a renamed key
            entry.update(kind="alias", effect="read as a fallback of a renamed key", maps_to=None)
            del entry["type"]
    return found


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _function(tree: Tree, name: str) -> tuple[ast.FunctionDef, str] | None:
    for relative in (LMCACHE_CONFIG_BASE, LMCACHE_CONFIG):
        module = tree.parse(relative)
        for node in ast.walk(module) if module else ():
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return node, tree.cite(relative, node.lineno)
    return None


def _bad_value_behaviour(tree: Tree, problems: list[str]) -> dict[str, Any]:
    """What loading a config file does with a value the key's converter refuses (``int("abc")``): where the file
    loader passes values through ``_apply_env_converter_safely``, that function is run on a refusing converter and
    what it returns and warns is recorded; where it calls ``config["env_converter"](value)`` outside any ``try``,
    the ValueError ends the load (``raises``); any other shape is ``unknown``."""
    loader = _function(tree, "_from_file") or _function(tree, "from_file")
    if loader is None:
        return {"effect": "unknown", "source": tree.cite(LMCACHE_CONFIG, 1)}
    calls = [n for n in ast.walk(loader[0]) if isinstance(n, ast.Call)]
    if any(getattr(c.func, "id", None) == "_apply_env_converter_safely" for c in calls):
        safe = _function(tree, "_apply_env_converter_safely")
        if safe is None:
            return {"effect": "unknown", "source": loader[1]}
        logger = logging.getLogger(f"engine_schema.convert.{tree.version}")
        logger.propagate, logger.handlers = False, [recorder := _Recorder()]
        namespace: dict[str, Any] = {"logger": logger, "json": __import__("json")}
        try:
            exec(compile(ast.Module([safe[0]], []), safe[1], "exec"), namespace)  # the release's own function

            def refuse(value: Any) -> Any:
                raise ValueError("{error}")

            result = namespace["_apply_env_converter_safely"]({"{key}": {"env_converter": refuse}}, "{key}", "{value}")
        except Exception as exc:  # a shape this script does not know: say so, do not guess
            problems.append(f"lmcache {tree.version}: _apply_env_converter_safely does not run alone ({exc})")
            return {"effect": "unknown", "source": safe[1]}
        effect = "set to None" if result is None else f"kept as {result!r}"
        return {"effect": effect, "message": recorder.messages[0] if recorder.messages else None, "source": safe[1]}
    direct = any(isinstance(c.func, ast.Subscript) and _string(c.func.slice) == "env_converter" for c in calls)
    if direct and not any(isinstance(n, ast.Try) for n in ast.walk(loader[0])):
        return {"effect": "raises", "message": "{error}", "source": loader[1]}
    return {"effect": "unknown", "source": loader[1]}


def _alias_behaviour(
    tree: Tree,
    config: ast.Module,
    keys: dict[str, Any],
    aliases: dict[str, str],
    deprecated: dict[str, str],
    problems: list[str],
) -> dict[str, Any]:
    """Run the release's ``_resolve_config_aliases`` on each alias and an unknown key; record the effect."""
    function, where = None, ""
    for relative in (LMCACHE_CONFIG, LMCACHE_CONFIG_BASE):
        module = config if relative == LMCACHE_CONFIG else tree.parse(relative)
        for stmt in module.body if module else ():
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "_resolve_config_aliases":
                function, where = stmt, tree.cite(relative, stmt.lineno)
    if function is None:  # before the key table: from_file reads what it names; anything else is never read
        unread = {"effect": "ignored: from_file reads only the keys it names", "message": None}
        return {UNKNOWN_PROBE: unread | {"source": tree.cite(LMCACHE_CONFIG, 1)}}
    logger = logging.getLogger(f"engine_schema.{tree.package}.{tree.version}")
    logger.propagate, logger.handlers = False, [recorder := _Recorder()]
    definitions: dict[str, dict[str, Any]] = {k: {} for k, v in keys.items() if v["kind"] == "key"}
    namespace: dict[str, Any] = {
        "logger": logger, "_CONFIG_DEFINITIONS": definitions, "_CONFIG_ALIASES": aliases,
        "_DEPRECATED_CONFIGS": deprecated, "Any": Any, "Optional": Any, "dict": dict,
    }  # fmt: skip
    try:
        exec(compile(ast.Module([function], []), where, "exec"), namespace)  # the release's own code, one function
    except Exception as exc:  # a shape this script does not know: say so, do not guess
        problems.append(f"lmcache {tree.version}: _resolve_config_aliases does not compile alone ({exc})")
        return {UNKNOWN_PROBE: {"effect": "unknown", "source": where}}
    resolve = namespace["_resolve_config_aliases"]
    arguments = {"config_definitions": definitions, "config_aliases": aliases, "deprecated_configs": deprecated}
    extra = [arguments[a.arg] for a in function.args.args[2:] if a.arg in arguments]
    found: dict[str, Any] = {}
    for name in {*aliases, *deprecated, UNKNOWN_PROBE} - set(definitions):
        recorder.messages.clear()
        resolved = resolve({name: "x"}, "<source>", *extra)
        message = recorder.messages[0] if recorder.messages else None
        if message and name == UNKNOWN_PROBE:  # the message for any unknown key, the key left to fill in
            message = message.replace(UNKNOWN_PROBE, "{key}")
        if resolved.get(aliases.get(name, "\0")) == "x":
            effect = f"mapped to {aliases[name]}"
        elif name in resolved:
            effect = "kept under its own name, which no key reads" if name not in definitions else "read"
        else:
            effect = "dropped"
        found[name] = {"effect": effect, "message": message}
    found[UNKNOWN_PROBE]["source"] = where
    return found


# ---------------------------------------------------------------------------------------------
# releases, runs and the file


def trees(src_dir: Path, releases_file: Path, package: str, problems: list[str]) -> list[Tree]:
    found = []
    for version in released(releases_file, package):
        for suffix, kind in (("", "wheel"), ("-sdist", "sdist")):
            root = src_dir / f"{package}-{version}{suffix}"
            if (root / package).is_dir():
                found.append(Tree(package, version, root, kind))
                break
        else:
            problems.append(f"{package} {version}: no extracted wheel or sdist under {src_dir}; recorded as not read")
    if not found:
        raise ExtractionError(f"no extracted {package} release under {src_dir}")
    return found


VARYING = (
    "type",
    "default",
    "parse",
    "converter",
    "unknown_fields",
    "access",
    "effect",
    "message",
    "maps_to",
    "hands_to",
)


def entries_by_run(per_release: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One entry per id and run of consecutive releases read; changing attributes as ``[{since, value}]``."""
    versions = list(per_release)
    entries: list[dict[str, Any]] = []
    for run in runs(per_release):
        newest = dict(per_release[versions[run.indexes[-1]]][run.name])
        for attribute in VARYING:
            values = [(versions[i], per_release[versions[i]][run.name].get(attribute)) for i in run.indexes]
            changes = [(v, value) for n, (v, value) in enumerate(values) if n == 0 or value != values[n - 1][1]]
            if len(changes) > 1:
                newest[attribute] = [{"since": v, "value": value} for v, value in changes]
        if run.introduced:
            newest["introduced"] = run.introduced
        if run.removed:
            newest["removed"] = run.removed
        entries.append(newest)
    return entries


ORDER = ("config", "name", "key", "connectors", "kind", "introduced", "removed", *VARYING, "file", "source")


def _flow(entry: dict[str, Any]) -> str:
    keys = [k for k in ORDER if k in entry and entry[k] is not None and k != "kind"]
    return "{" + ", ".join(f"{k}: {_value(entry[k])}" for k in keys) + "}"


def _value(value: Any) -> str:
    if isinstance(value, list):
        if value and isinstance(value[0], dict):
            return (
                "[" + ", ".join("{" + ", ".join(f"{k}: {_value(v)}" for k, v in d.items()) + "}" for d in value) + "]"
            )
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if value is None:
        return "null"
    return "'" + str(value).replace("'", "''") + "'"


def render(vllm: list[dict[str, Any]], lmcache: list[dict[str, Any]], read: dict[str, list[Tree]], digest: str) -> str:
    newest = {package: trees[-1] for package, trees in read.items()}
    sources = [
        newest["vllm"].cite(CONFIGS["KVTransferConfig"], 1).rsplit(":", 1)[0],
        newest["vllm"].cite(FACTORY, 1).rsplit(":", 1)[0],
        newest["vllm"].cite(ENVS, 1).rsplit(":", 1)[0],
        newest["lmcache"].cite(LMCACHE_CONFIG, 1).rsplit(":", 1)[0],  # the last: the checks cite LMCache's by it
    ]
    lines = [
        "# What vLLM's config classes (KV transfer and events, cache, scheduler, parallel, compilation),",
        "# connectors' extra config, environment variables and LMCache's config table accept, by release. "
        "GENERATED: do not edit; regenerate:",
        f"#   {RECIPE}",
        "# (static ast reading of the extracted wheels; the script's docstring says what counts). `introduced` /",
        "# `removed`: the first release read that has / no longer has the name (absent: the oldest read / still",
        "# in the newest); an attribute given as [{since, value}] changes inside the run. `source`: the newest",
        "# release of the run.",
        "sources:",
        *(f"  - {_value(s)}" for s in sources),
        f"verified_at: {VERIFIED_AT}",
        f"generator_sha256: '{digest}'",
        "releases_read:",
        *(f"  {p}: [{', '.join(_value(t.version) for t in ts)}]" for p, ts in read.items()),
        "sdist_read:",
        *(f"  {p}: [{', '.join(_value(t.version) for t in ts if t.kind == 'sdist')}]" for p, ts in read.items()),
    ]
    sections = (
        ("connectors", [e for e in vllm if e["kind"] == "connector"]),
        ("configs", [e for e in vllm if e["kind"] == "config"]),
        ("config_fields", [e for e in vllm if e["kind"] == "field"]),
        ("extra_config", [e for e in vllm if e["kind"] == "extra"]),
        ("lmcache_keys", [e for e in lmcache if e["kind"] == "key"]),
        ("lmcache_aliases", [e for e in lmcache if e["kind"] == "alias"]),
        ("lmcache_unknown_key", [e for e in lmcache if e["kind"] == "unknown"]),
        ("lmcache_bad_value", [e for e in lmcache if e["kind"] == "bad_value"]),
        ("lmcache_adapter_extra_config", [e for e in lmcache if e["kind"] == "adapter"]),
        ("lmcache_env", [e for e in lmcache + vllm if e["kind"] == "env"]),
        ("vllm_env", [e for e in vllm if e["kind"] == "vllm_env"]),
    )
    for title, entries in sections:
        lines.append(f"{title}:" + ("" if entries else " []"))
        if title == "configs":
            entries = [{**e, "name": e.get("name") or e["source"]} for e in entries]
        lines += [f"  - {_flow(e)}" for e in entries]
    return "\n".join(lines) + "\n"


def build(
    src_dir: Path, releases_file: Path, problems: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, list[Tree]]]:
    read = {package: trees(src_dir, releases_file, package, problems) for package in ("vllm", "lmcache")}
    vllm_found: dict[str, dict[str, dict[str, Any]]] = {}
    for tree in read["vllm"]:
        found = config_fields(tree, problems)
        for cls_name in CONFIGS:
            if cls_name in found:
                found[cls_name]["name"] = cls_name
        vllm_found[tree.version] = (
            found | extra_config_keys(tree, problems) | env_reads(tree) | vllm_env(tree, problems)
        )
    lmcache_found = {tree.version: lmcache_keys(tree, problems) for tree in read["lmcache"]}
    return entries_by_run(vllm_found), entries_by_run(lmcache_found), read


def script_digest() -> str:
    """The sha256 of what writes the file: this script followed by the shared module it imports."""
    return hashlib.sha256(Path(__file__).read_bytes() + wheel_trees.SOURCE.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--src-dir", type=Path, required=True, help="extracted releases, one directory each")
    parser.add_argument("--out", type=Path, default=REPO / "knowledge" / "engine_schema.yaml")
    parser.add_argument(
        "--releases", type=Path, default=REPO / "knowledge" / "releases.yaml", help="the release list to cover"
    )
    args = parser.parse_args(argv)
    problems: list[str] = []
    try:
        vllm, lmcache, read = build(args.src_dir, args.releases, problems)
    except ExtractionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    text = render(vllm, lmcache, read, script_digest())
    from vllm_caching_mcp.knowledge import EngineSchema  # the loader's model: never write a file it refuses

    EngineSchema.model_validate(yaml.safe_load(text))
    args.out.write_text(text, encoding="utf-8")
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    counts = {k: sum(1 for e in vllm + lmcache if e["kind"] == k) for k in ("field", "extra", "key", "alias")}
    print(
        f"{counts['field']} config fields, {counts['extra']} extra-config keys, {counts['key']} LMCache keys, "
        f"{counts['alias']} LMCache aliases from {sum(map(len, read.values()))} releases read; wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
