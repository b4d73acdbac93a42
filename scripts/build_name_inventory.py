"""Generate knowledge/name_inventory.yaml: every name vLLM and LMCache read, release by release.

    python scripts/build_name_inventory.py --src-dir ~/.cache/vllm-caching/src [--out knowledge/name_inventory.yaml]

The source directory holds extracted wheels as ``vllm-0.33.0/vllm/...`` and ``lmcache-0.5.6/lmcache/...``
(the layout `scripts/build_cli_inventory.py` reads). Releases in knowledge/releases.yaml without an
extracted wheel are skipped and recorded as not read, so a lookup can say where the inventory is blind.
Everything is read statically with ``ast``; nothing is imported. Per release it lists

- vLLM environment variables: the keys of ``environment_variables`` in ``vllm/envs.py``, and the
  names read elsewhere in the package by ``os.getenv("X")``, ``os.environ.get("X")``,
  ``os.environ["X"]`` (a read, not an assignment) or ``"X" in os.environ`` with a literal name;
- LMCache config keys: the keys of ``_CONFIG_DEFINITIONS`` in ``lmcache/v1/config.py`` (before it
  existed, the fields of ``LMCacheEngineConfig``) and the deprecated names of ``_CONFIG_ALIASES``;
  each key is also the environment variable ``LMCACHE_<KEY>`` (``get_env_name`` in that file);
- class names defined at the top level of the KV-caching parts of each package (CLASS_DIRS).

A name present in a run of consecutive releases read gets one entry: ``introduced`` is the first
release read that has it (absent: already in the oldest read), ``removed`` the first read release
after the run (absent: still in the newest read).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from vllm_caching_mcp.knowledge import NameInventory
from wheel_trees import ExtractionError, released, runs

REPO = Path(__file__).resolve().parents[1]
VERIFIED_AT = "2026-12-02"
ENVS = "vllm/envs.py"
LMCACHE_CONFIG = "lmcache/v1/config.py"
ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
# The KV-caching parts of each package whose class names the knowledge talks about.
CLASS_DIRS: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm/distributed/kv_transfer", "vllm/v1/kv_offload", "vllm/v1/core"),
    "lmcache": ("lmcache/integration", "lmcache/v1/storage_backend", "lmcache/v1/multiprocess"),
}


@dataclass(frozen=True)
class Found:
    """One name in one release: what it is and the file that defines or reads it."""

    kind: str
    name: str
    where: str
    alias_of: str | None = None


def _parse(path: Path) -> ast.Module | None:
    if not path.is_file():
        return None
    try:
        return ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (SyntaxError, UnicodeDecodeError):
        return None


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ``."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def environment_reads(tree: ast.Module) -> Iterator[str]:
    """Literal names read from the environment: getenv, environ.get, environ[...] (load), ``in environ``."""
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and (func.attr == "getenv" or (func.attr == "get" and _is_environ(func.value)))
            ) or (isinstance(func, ast.Name) and func.id == "getenv"):
                name = _string(node.args[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            name = _string(node.slice)
        elif (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.In | ast.NotIn)
            and _is_environ(node.comparators[0])
        ):
            name = _string(node.left)
        if name is not None and ENV_NAME.match(name):
            yield name


def _module_dict(tree: ast.Module, name: str) -> ast.Dict | None:
    for stmt in tree.body:
        targets = (
            stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        )
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and isinstance(value, ast.Dict):
            return value
    return None


def _dict_keys(tree: ast.Module, table: ast.Dict, depth: int = 0) -> Iterator[str]:
    """The literal keys of a module-level table, following ``**OTHER_TABLE`` in the same module."""
    for key, value in zip(table.keys, table.values, strict=True):
        if key is None and isinstance(value, ast.Name) and depth < 4:
            inner = _module_dict(tree, value.id)
            if inner is not None:
                yield from _dict_keys(tree, inner, depth + 1)
        elif (text := _string(key)) is not None:
            yield text


def vllm_names(root: Path, version: str, problems: list[str]) -> dict[str, Found]:
    envs = _parse(root / ENVS)
    table = _module_dict(envs, "environment_variables") if envs else None
    if envs is None or table is None:
        raise ExtractionError(f"vllm {version}: no environment_variables table in {root / ENVS}")
    found = {name: Found("env_var", name, ENVS) for name in _dict_keys(envs, table) if ENV_NAME.match(name)}
    for path in sorted((root / "vllm").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative == ENVS:
            continue
        reads_environment = "environ" in (text := path.read_text(encoding="utf-8", errors="replace"))
        reads_environment |= "getenv" in text
        defines_classes = relative.startswith(CLASS_DIRS["vllm"])
        if not (reads_environment or defines_classes):
            continue  # parsing every file of every release would take minutes
        tree = _parse(path)
        if tree is None:
            problems.append(f"vllm {version}: {relative} does not parse; skipped")
            continue
        for name in environment_reads(tree) if reads_environment else ():
            found.setdefault(name, Found("env_var", name, relative))
        found.update(_classes(tree, relative, "vllm", found))
    return found


def _classes(tree: ast.Module, relative: str, package: str, found: dict[str, Found]) -> dict[str, Found]:
    if not relative.startswith(CLASS_DIRS[package]):
        return {}
    return {
        f"class:{stmt.name}": Found("class", stmt.name, relative)
        for stmt in tree.body
        if isinstance(stmt, ast.ClassDef) and not stmt.name.startswith("_") and f"class:{stmt.name}" not in found
    }


def lmcache_names(root: Path, version: str, problems: list[str]) -> dict[str, Found]:
    config = _parse(root / LMCACHE_CONFIG)
    if config is None:
        raise ExtractionError(f"lmcache {version}: {root / LMCACHE_CONFIG} is missing or does not parse")
    found: dict[str, Found] = {}
    definitions = _module_dict(config, "_CONFIG_DEFINITIONS")
    if definitions is not None:
        keys = list(_dict_keys(config, definitions))
    else:  # before 0.3.4: the fields of the config dataclass
        engine = next((s for s in config.body if isinstance(s, ast.ClassDef) and s.name == "LMCacheEngineConfig"), None)
        if engine is None:
            raise ExtractionError(f"lmcache {version}: neither _CONFIG_DEFINITIONS nor LMCacheEngineConfig")
        keys = [s.target.id for s in engine.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    for key in keys:
        found[key] = Found("lmcache_config", key, LMCACHE_CONFIG)
    aliases = _module_dict(config, "_CONFIG_ALIASES")
    for old_node, new_node in zip(aliases.keys, aliases.values, strict=True) if aliases else ():
        old, new = _string(old_node), _string(new_node)
        if old and new and old not in found:
            found[old] = Found("lmcache_config", old, LMCACHE_CONFIG, alias_of=new)
    for path in sorted((root / "lmcache").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if not relative.startswith(CLASS_DIRS["lmcache"]):
            continue
        tree = _parse(path)
        if tree is None:
            problems.append(f"lmcache {version}: {relative} does not parse; skipped")
            continue
        found.update(_classes(tree, relative, "lmcache", found))
    return found


@dataclass(frozen=True)
class Lifecycle:
    package: str
    found: Found
    introduced: str | None
    removed: str | None


def lifecycles(package: str, per_release: dict[str, dict[str, Found]]) -> list[Lifecycle]:
    """One entry per name and run of consecutive releases read that have it (see the module docstring)."""
    versions = list(per_release)
    return [
        # where the newest release of the run has it
        Lifecycle(package, per_release[versions[run.indexes[-1]]][run.name], run.introduced, run.removed)
        for run in runs(per_release, order=str.lower)
    ]


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def render(entries: list[Lifecycle], read: dict[str, list[str]], command: str) -> str:
    sources = [
        f"wheel:{package}=={versions[i]}:{path}"
        for package, path in (("vllm", ENVS), ("lmcache", LMCACHE_CONFIG))
        for versions in (read[package],)
        for i in (-1, 0)
    ]
    lines = [
        "# Every environment variable vLLM reads, every LMCache config key and the class names of the",
        "# KV-caching packages, by release. GENERATED: do not edit by hand; regenerate with",
        f"#   {command}",
        "# (static ast reading of the extracted wheels; the script's docstring says what counts). `introduced` /",
        "# `removed` are the first release read that has / no longer has the name; absent means already in the",
        "# oldest release read / still in the newest. `releases_read` lists the releases whose wheels were read.",
        "sources:",
        *(f"  - {_quote(s)}" for s in sources),
        f"verified_at: {VERIFIED_AT}",
        "releases_read:",
        *(f"  {package}: [{', '.join(_quote(v) for v in versions)}]" for package, versions in read.items()),
        "names:",
    ]
    for e in entries:
        parts = [f"name: {_quote(e.found.name)}", f"kind: {e.found.kind}"]
        if e.introduced:
            parts.append(f"introduced: {_quote(e.introduced)}")
        if e.removed:
            parts.append(f"removed: {_quote(e.removed)}")
        if e.found.alias_of:
            parts.append(f"alias_of: {_quote(e.found.alias_of)}")
        parts.append(f"where: {_quote(e.found.where)}")
        lines.append(f"  - {{{', '.join(parts)}}}")
    return "\n".join(lines) + "\n"


READERS = {"vllm": vllm_names, "lmcache": lmcache_names}


def build(src_dir: Path, releases_file: Path, problems: list[str]) -> tuple[list[Lifecycle], dict[str, list[str]]]:
    entries: list[Lifecycle] = []
    read: dict[str, list[str]] = {}
    for package, reader in READERS.items():
        per_release: dict[str, dict[str, Found]] = {}
        for version in released(releases_file, package):
            root = src_dir / f"{package}-{version}"
            if not (root / package).is_dir():
                problems.append(f"{package} {version}: no extracted wheel at {root}; recorded as not read")
                continue
            per_release[version] = reader(root, version, problems)
        if not per_release:
            raise ExtractionError(f"no extracted {package} wheel under {src_dir}")
        read[package] = list(per_release)
        entries += lifecycles(package, per_release)
    return entries, read


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--src-dir", type=Path, required=True, help="extracted wheels, one directory per release")
    parser.add_argument("--out", type=Path, default=REPO / "knowledge" / "name_inventory.yaml")
    parser.add_argument(
        "--releases", type=Path, default=REPO / "knowledge" / "releases.yaml", help="the release list to cover"
    )
    args = parser.parse_args(argv)
    problems: list[str] = []
    try:
        entries, read = build(args.src_dir, args.releases, problems)
    except ExtractionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    text = render(entries, read, "python scripts/build_name_inventory.py --src-dir SRC_DIR")
    NameInventory.model_validate(yaml.safe_load(text))  # never write a file the loader would refuse
    args.out.write_text(text, encoding="utf-8")
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    counts = {kind: sum(1 for e in entries if e.found.kind == kind) for kind in ("env_var", "lmcache_config", "class")}
    print(
        f"{counts['env_var']} vLLM environment variables, {counts['lmcache_config']} LMCache config keys, "
        f"{counts['class']} classes from {sum(map(len, read.values()))} releases read; wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
