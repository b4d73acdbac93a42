"""Probes: the ones an entry's kind implies, and what each kind observes in one release."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from vllm_caching_mcp.knowledge import Connector, Gated, Metric, Probe, Setting
from vllm_caching_mcp.versions import SpecifierSet

from .env_readers import env_default, lmcache_config
from .readers import (
    FACTORY,
    LMCACHE_CONFIG,
    add_argument_options,
    env_reads,
    field_default,
    first_constant,
    literal,
    literal_values,
    names_and_keys,
    registered_names,
    registrations,
    subclasses,
)
from .source import NotCheckable, Observation, SourceTree

VLLM_FLAG_FILES = ("vllm/engine/arg_utils.py", "vllm/entrypoints/openai/cli_args.py")
FRONTEND_ARGS_FILES = ("vllm/entrypoints/openai/cli_args.py", "vllm/entrypoints/common/cli_args.py")
VLLM_CONFIG_FILES = ("vllm/config/*.py", "vllm/config.py", "vllm/engine/arg_utils.py")


def _spec_key(entry: Setting) -> str:
    """``secondary_tiers[type=fs].root_dir`` -> ``root_dir``; ``lazy_offload (Simple...)`` -> ``lazy_offload``."""
    name = re.sub(r"\s*\(.*\)\s*$", "", entry.name)
    return re.split(r"[.\]]", name)[-1].strip()


def _cited_paths(entry: Gated, package: str) -> tuple[str, ...]:
    paths: list[str] = []
    for source in entry.sources:
        # A release without a wheel is cited by its source distribution, same package paths.
        match = re.match(rf"(?:wheel|sdist):{package}==[^:]+:([^:]+)", source)
        if match and match.group(1).endswith(".py") and match.group(1) not in paths:
            paths.append(match.group(1))
    return tuple(paths)


def _cli_flag_probes(entry: Setting) -> list[Probe]:
    probes = [Probe(kind="flag", target=entry.name)]
    config_path = entry.config_path
    if entry.component != "vllm" or not config_path or not re.fullmatch(r"[A-Z]\w*\.\w+", config_path):
        return probes
    if entry.defaults:
        # The CLI default is EngineArgs' own; most fields copy the config class's.
        engine_args = f"EngineArgs.{config_path.split('.')[1]}"
        probes.append(Probe(kind="default", target=f"{engine_args} or {config_path}"))
    if entry.accepted_values:
        probes.append(Probe(kind="literal", target=config_path))
    return probes


def _env_var_probes(entry: Setting) -> list[Probe]:
    key = entry.name.removeprefix("LMCACHE_").lower()
    if entry.component == "lmcache" and entry.name.startswith("LMCACHE_") and key in entry.aliases:
        read, default = Probe(kind="config_key", target=key), Probe(kind="config_default", target=key)
    else:
        read, default = Probe(kind="env_read", target=entry.name), Probe(kind="env_default", target=entry.name)
    return [read, default] if entry.defaults else [read]


def _setting_probes(entry: Setting) -> list[Probe]:
    if entry.kind == "cli_flag":
        return _cli_flag_probes(entry)
    if entry.kind == "env_var" and entry.component in ("vllm", "lmcache"):
        return _env_var_probes(entry)
    if entry.kind == "spec_key" and entry.component == "vllm":
        return [Probe(kind="spec_key", target=_spec_key(entry), files=_cited_paths(entry, "vllm"))]
    return []


def implied_probes(entry: Gated) -> list[Probe]:
    """The probes an entry's kind implies when none of that kind is written out."""
    if isinstance(entry, Connector) and entry.component == "vllm":
        probes = [Probe(kind="registered", target=entry.name)]
        return [*probes, Probe(kind="subclass", target=entry.name)] if entry.hma else probes
    if isinstance(entry, Setting):
        return _setting_probes(entry)
    if isinstance(entry, Metric):
        return [Probe(kind="metric", target=entry.name)]
    return []


def entry_probes(entry: Gated) -> list[Probe]:
    written = {p.kind for p in entry.probes}
    return [*entry.probes, *(p for p in implied_probes(entry) if p.kind not in written)]


# Each kind's reader: (release, probe, target, names the fact also goes by) -> what the release shows.
Reader = Callable[[SourceTree, Probe, str, tuple[str, ...]], Observation]


def _registered(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    names = set(target.split(" or "))
    if probe.files:  # another registry: register_spec("name", ...), register_tier("name", ...)
        return first_constant(tree, tree.glob(probe.files), names, registered_names)
    table = registrations(tree)
    hit = next((table[n] for n in names if n in table), None)
    return Observation(True, FACTORY, hit[2]) if hit else Observation(False, FACTORY)


def _frontend_field(tree: SourceTree, target: str) -> Observation:
    """An option `vllm serve` makes of a FrontendArgs field (its add_cli_args runs get_kwargs over the
    dataclass, so ``--port`` is the field ``port``, with no add_argument call naming it)."""
    field = target.removeprefix("--").replace("-", "_")
    for path in tree.glob(FRONTEND_ARGS_FILES):
        module = tree.module(path)
        for node in ast.walk(module) if module is not None else ():
            if isinstance(node, ast.ClassDef) and node.name in ("FrontendArgs", "BaseFrontendArgs"):
                for stmt in node.body:
                    if (
                        isinstance(stmt, ast.AnnAssign)
                        and isinstance(stmt.target, ast.Name)
                        and stmt.target.id == field
                    ):
                        return Observation(True, path, stmt.lineno)
    return Observation(False)


def _flag(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    pkg = tree.package
    patterns = list(probe.files) or (list(VLLM_FLAG_FILES) if pkg == "vllm" else [f"{pkg}/**.py"])
    found = first_constant(tree, tree.containing(patterns, target), {target}, add_argument_options)
    if found.value or probe.files or pkg != "vllm":
        return found
    return _frontend_field(tree, target)


def _metric(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    names = {target, *aliases}
    if target.endswith("_total"):
        names.add(target.removesuffix("_total"))
    patterns = list(probe.files) or [f"{tree.package}/**.py"]
    candidates = [p for p in tree.glob(patterns) if any(n in (tree.text(p) or "") for n in names)]
    return first_constant(tree, candidates, names)


def _env_files(tree: SourceTree, probe: Probe) -> list[str]:
    return list(probe.files) or (["vllm/envs.py"] if tree.package == "vllm" else [f"{tree.package}/**.py"])


def _env_read(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    return first_constant(tree, tree.containing(_env_files(tree, probe), target), {target}, env_reads)


def _config_key(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    found = lmcache_config(tree, target)
    return Observation(True, found[0], found[2]) if found else Observation(False, LMCACHE_CONFIG)


def _spec_key_read(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    if not probe.files:
        raise NotCheckable("the entry cites no file that reads the key")
    return first_constant(tree, tree.containing(probe.files, target), {target}, names_and_keys)


def _text(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    if not probe.files:
        raise NotCheckable("a text probe needs files")
    pattern = re.compile(target, re.MULTILINE)
    for path in tree.glob(probe.files):
        text = tree.text(path) or ""
        match = pattern.search(text)
        if match:
            # An empty match (a regex that asserts an absence) points at no line in particular.
            line = text.count("\n", 0, match.start()) + 1 if match.group(0) else None
            return Observation(True, path, line)
    return Observation(False)


def _subclass(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    if probe.files:
        matched = tree.glob(probe.files)
        return subclasses(tree, matched[0] if matched else probe.files[0], target, probe.base)
    hit = registrations(tree).get(target)
    if hit is None:
        raise NotCheckable(f"{target} is not registered in vllm {tree.version}")
    module_path = tree.module_path(hit[0])
    if module_path is None:
        raise NotCheckable(f"module {hit[0]} is not in vllm {tree.version}")
    return subclasses(tree, module_path, hit[1], probe.base)


def _default(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    return field_default(tree, target, probe.files or VLLM_CONFIG_FILES)


def _literal(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    return literal_values(tree, target, probe.files or VLLM_CONFIG_FILES)


def _env_default(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    return env_default(tree, target, _env_files(tree, probe))


def _config_default(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    found = lmcache_config(tree, target)
    if found is None:
        raise NotCheckable(f"{target} is not an LMCache config key in {tree.version}")
    path, default, _ = found
    if default is None:
        raise NotCheckable(f"{target} has no literal default")
    module = tree.module(path)
    assert module is not None  # lmcache_config read the key from it
    return Observation(literal(default, module), path, default.lineno)


def canonical_specifier(text: str) -> str:
    """A version range written one way (its clauses sorted), so two spellings of one range compare equal."""
    return ",".join(sorted(str(s) for s in SpecifierSet(text)))


def _metadata_header(tree: SourceTree) -> tuple[str, str]:
    """The release's METADATA headers (its wheel's dist-info/METADATA, or a source distribution's PKG-INFO)."""
    for path in (f"{tree.package}-{tree.version}.dist-info/METADATA", "PKG-INFO"):
        text = tree.text(path)
        if text is not None:
            return path, text.split("\n\n", 1)[0]  # the body after the first blank line is the description
    raise NotCheckable(f"no METADATA in {tree.package} {tree.version}")


def _header_value(path: str, header: str, pattern: str) -> Observation:
    match = re.search(pattern, header, re.MULTILINE)
    if match is None:
        return Observation(None, path)
    return Observation(canonical_specifier(match[1]), path, header.count("\n", 0, match.start()) + 1)


def _requires_python(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    path, header = _metadata_header(tree)
    return _header_value(path, header, r"^Requires-Python:[ \t]*(.+?)\s*$")


def _requires_dist(tree: SourceTree, probe: Probe, target: str, aliases: tuple[str, ...]) -> Observation:
    """The range of the release's unconditional Requires-Dist on ``target`` (no extra, no environment marker)."""
    path, header = _metadata_header(tree)
    return _header_value(path, header, rf"^Requires-Dist:[ \t]*{re.escape(target)}[ \t]*\(?([^;()\n]+?)\)?[ \t]*$")


READERS: dict[str, Reader] = {
    "registered": _registered,
    "flag": _flag,
    "metric": _metric,
    "env_read": _env_read,
    "config_key": _config_key,
    "spec_key": _spec_key_read,
    "text": _text,
    "subclass": _subclass,
    "default": _default,
    "literal": _literal,
    "env_default": _env_default,
    "config_default": _config_default,
    "requires_python": _requires_python,
    "requires_dist": _requires_dist,
}


def observe(tree: SourceTree, probe: Probe, name: str, aliases: tuple[str, ...] = ()) -> Observation:
    """Run one probe on one release; ``name`` and ``aliases`` are the fact's (the default target)."""
    if probe.unchecked:
        raise NotCheckable(probe.unchecked)
    reader = READERS.get(probe.kind)
    if reader is None:  # pragma: no cover - the schema forbids it
        raise NotCheckable(f"unknown probe kind {probe.kind}")
    return reader(tree, probe, probe.target or name, aliases)
