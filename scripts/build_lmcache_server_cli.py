"""Generate knowledge/lmcache_server_cli.yaml: the options each LMCache server command accepts, release by release.

    python scripts/build_lmcache_server_cli.py --src-dir SRC [--out knowledge/lmcache_server_cli.yaml]

The source directory holds the extracted LMCache releases as ``lmcache-0.5.6/lmcache/...`` (the
sdist of 0.3.0 as ``lmcache-0.3.0-sdist/``), one per LMCache release in knowledge/releases.yaml.
The commands are the LMCache servers of knowledge/ports.yaml (``servers:``): each console script of
their ``entry_points`` (``lmcache server`` is the ``server`` subcommand of the ``lmcache`` script)
and ``python -m`` each of their ``modules``. The parsers are read statically with ``ast``; nothing
from LMCache is imported. Per release and command the script follows what the command runs:

- a console script: the function its ``entry_points.txt`` names (``project.scripts`` of an sdist);
  a subcommand: the ``add_arguments`` of the command class whose ``name()`` returns it;
- ``python -m M``: the ``if __name__ == "__main__":`` block of ``M`` (or of ``M/__main__.py``);
- from there, every function it calls that builds an ``ArgumentParser``, and every function it hands
  the parser (or an argument group of it) to, resolved through the module's imports (also imports
  inside the function, as ``add_arguments`` makes them);
- every ``add_argument`` call on the parser or its groups with literal option strings; an option
  takes a value unless its ``action`` is one that consumes none (``store_true``, ...);
- a parser that calls ``parse_known_args`` (unknown options handed back, not refused) is warned about;
- ``-h``/``--help``, which argparse adds, and ``allow_abbrev`` (argparse's default is True: a unique
  prefix of a long option is accepted as that option).

A command that builds no parser (``lmcache_server`` reads ``sys.argv`` by position) is recorded
with ``parser: argv`` and no options. ``--opt=value`` spellings are not listed: they are the option.
"""

from __future__ import annotations

import argparse
import ast
import configparser
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from build_cli_inventory import Module, Release
from vllm_caching_mcp.knowledge import LMCacheServerCli
from wheel_trees import ExtractionError, released, runs

REPO = Path(__file__).resolve().parents[1]
VERIFIED_AT = "2026-12-02"
NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "append_const", "count", "help", "version"}


@dataclass(frozen=True)
class Command:
    """One way to start an LMCache server: its words and the ports.yaml entry it is."""

    words: str
    server: str


@dataclass
class Parser:
    """What one release's command accepts: option -> takes a value."""

    options: dict[str, bool] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)
    built: bool = False
    allow_abbrev: bool = True
    origin: str = "wheel"
    tolerant: bool = False  # parse_known_args: unknown options are handed back, not refused


def commands(ports_file: Path) -> list[Command]:
    raw = yaml.safe_load(ports_file.read_text(encoding="utf-8"))
    found: list[Command] = []
    for server in raw.get("servers", []):
        if server.get("package") != "lmcache":
            continue
        found += [Command(entry, server["id"]) for entry in server.get("entry_points", [])]
        found += [Command(f"python -m {module}", server["id"]) for module in server.get("modules", [])]
    return found


def source_root(src_dir: Path, version: str) -> Path:
    for name in (f"lmcache-{version}", f"lmcache-{version}-sdist"):
        if (src_dir / name / "lmcache").is_dir():
            return src_dir / name
    raise ExtractionError(f"no extracted source for lmcache {version} under {src_dir}")


def console_scripts(root: Path) -> dict[str, str]:
    """Script name -> ``module:function``, from the wheel's entry_points.txt or the sdist's pyproject."""
    for path in [*root.glob("*.dist-info/entry_points.txt"), *root.glob("*.egg-info/entry_points.txt")]:
        parser = configparser.ConfigParser()
        parser.read(path, encoding="utf-8")
        if parser.has_section("console_scripts"):
            return dict(parser["console_scripts"])
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        return dict(tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("scripts", {}))
    return {}


class Walker:
    """Follows one command of one release from where it starts to every option its parser gets."""

    def __init__(self, release: Release) -> None:
        self.release = release
        self.parser = Parser()
        self._seen: set[tuple[str, int]] = set()

    def start(self, command: Command, scripts: dict[str, str]) -> Parser:
        words = command.words.split()
        if words[:2] == ["python", "-m"]:
            module = self.release.module(words[2])
            if module is not None and module.path.name == "__init__.py":
                module = self.release.module(f"{words[2]}.__main__")
            if module is not None:
                self._note_file(module)
                self._walk_body(module, _main_block(module.tree), set())
        elif words[0] in scripts:
            target, _, function = scripts[words[0]].partition(":")
            module = self.release.module(target.strip())
            found = self.release.lookup(module, function.strip()) if module is not None else None
            if found is not None and not self.parser.files:
                self._note_file(found[0])
            if len(words) == 1 and found is not None and isinstance(found[1], ast.FunctionDef):
                self._walk_function(found[0], found[1], set())
            elif len(words) == 2 and module is not None:
                self._walk_subcommand(words[1])
        else:
            return self.parser
        self.parser.built = self.parser.built or bool(self.parser.options)
        if self.parser.built:
            self.parser.options.setdefault("-h", False)
            self.parser.options.setdefault("--help", False)
        return self.parser

    def _walk_subcommand(self, name: str) -> None:
        """The ``add_arguments`` of the top-level command class (a module of ``lmcache.cli.commands``, not a
        nested command such as ``lmcache bench server``) whose ``name()`` returns ``name``."""
        for module in self._modules_under("lmcache.cli.commands"):
            for node in ast.walk(module.tree):
                if isinstance(node, ast.ClassDef) and _returns(node, "name") == name:
                    method = next(
                        (s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "add_arguments"), None
                    )
                    if method is not None:
                        self.parser.built = True
                        params = [a.arg for a in method.args.args[1:2]]
                        self._walk_function(module, method, set(params))

    def _modules_under(self, package: str) -> Iterator[Module]:
        base = self.release.root.joinpath(*package.split("."))
        for path in sorted([*base.glob("*.py"), *base.glob("*/__init__.py")]):
            dotted = ".".join(path.relative_to(self.release.root).with_suffix("").parts)
            module = self.release.module(dotted.removesuffix(".__init__"))
            if module is not None:
                yield module

    def _walk_function(self, module: Module, function: ast.FunctionDef, parsers: set[str]) -> None:
        key = (str(module.path), function.lineno)
        if key in self._seen:
            return
        self._seen.add(key)
        self._walk_body(module, function.body, parsers, function)

    def _walk_body(self, module: Module, body: list[ast.stmt], parsers: set[str], scope: ast.AST | None = None) -> None:
        local_imports = [n for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.ImportFrom)]
        for stmt in body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    self._note_parser(node, parsers)
                if isinstance(node, ast.Call):
                    self._call(module, node, parsers, local_imports)

    def _note_parser(self, node: ast.Assign, parsers: set[str]) -> None:
        """``p = ArgumentParser(...)``, ``g = p.add_argument_group(...)``, ``p = helper(p)``: names of the parser."""
        call = node.value
        assert isinstance(call, ast.Call)
        name = _name(call.func)
        makes = name == "ArgumentParser" or (
            name in {"add_argument_group", "add_mutually_exclusive_group"} and _receiver(call) in parsers
        )
        passes = any(isinstance(a, ast.Name) and a.id in parsers for a in call.args)
        if makes or passes:
            parsers.update(t.id for t in node.targets if isinstance(t, ast.Name))
        if name == "ArgumentParser":
            self.parser.built = True
            for keyword in call.keywords:
                if keyword.arg == "allow_abbrev" and isinstance(keyword.value, ast.Constant):
                    self.parser.allow_abbrev = bool(keyword.value.value)

    def _call(self, module: Module, call: ast.Call, parsers: set[str], local_imports: list[ast.ImportFrom]) -> None:
        name = _name(call.func)
        if name == "add_argument" and _receiver(call) in parsers:
            self._record(module, call)
            return
        if name == "parse_known_args" and _receiver(call) in parsers:
            self.parser.tolerant = True
            return
        if name is None or isinstance(call.func, ast.Attribute):
            return
        handed = [i for i, a in enumerate(call.args) if isinstance(a, ast.Name) and a.id in parsers]
        found = self._resolve(module, name, local_imports)
        if found is None:
            return
        where, function = found
        if handed:
            params = [a.arg for a in function.args.args]
            self._walk_function(where, function, {params[i] for i in handed if i < len(params)})
        elif any(_name(n.func) == "ArgumentParser" for n in ast.walk(function) if isinstance(n, ast.Call)):
            self._walk_function(where, function, set())

    def _resolve(
        self, module: Module, name: str, local_imports: list[ast.ImportFrom]
    ) -> tuple[Module, ast.FunctionDef] | None:
        found = self.release.lookup(module, name)
        if found is None:
            for stmt in local_imports:
                for alias in stmt.names:
                    if (alias.asname or alias.name) == name and stmt.module:
                        target = self.release.module(stmt.module)
                        found = self.release.lookup(target, alias.name) if target is not None else None
        if found is not None and isinstance(found[1], ast.FunctionDef):
            return found[0], found[1]
        return None

    def _record(self, module: Module, call: ast.Call) -> None:
        strings = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        action = next((k.value for k in call.keywords if k.arg == "action"), None)
        takes_value = not (isinstance(action, ast.Constant) and action.value in NO_VALUE_ACTIONS)
        for option in strings:
            if option.startswith("-"):
                self.parser.options[option] = takes_value
        self._note_file(module)

    def _note_file(self, module: Module) -> None:
        self.parser.files.add(module.path.relative_to(self.release.root).as_posix())


def _main_block(tree: ast.Module) -> list[ast.stmt]:
    """The statements under ``if __name__ == "__main__":``."""
    for stmt in tree.body:
        if isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare):
            left, right = stmt.test.left, stmt.test.comparators[0]
            if isinstance(left, ast.Name) and left.id == "__name__" and isinstance(right, ast.Constant):
                return stmt.body
    return []


def _returns(cls: ast.ClassDef, method: str) -> str | None:
    """The literal string a class's ``method`` returns, if it returns one."""
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == method:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant):
                    return str(node.value.value)
    return None


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _receiver(call: ast.Call) -> str | None:
    func = call.func
    return func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else None


# ---------------------------------------------------------------------------
# Across releases


def read_all(src_dir: Path, versions: list[str], wanted: list[Command]) -> dict[Command, dict[str, Parser]]:
    """Command -> release -> its parser, for the releases that have the command."""
    table: dict[Command, dict[str, Parser]] = {c: {} for c in wanted}
    for version in versions:
        root = source_root(src_dir, version)
        scripts = console_scripts(root)
        for command in wanted:
            parser = Walker(Release(version, root)).start(command, scripts)
            parser.origin = "sdist" if root.name.endswith("-sdist") else "wheel"
            if parser.built or _exists(root, command, scripts):
                table[command][version] = parser
    return table


def _exists(root: Path, command: Command, scripts: dict[str, str]) -> bool:
    words = command.words.split()
    if words[:2] == ["python", "-m"]:
        base = root.joinpath(*words[2].split("."))
        return base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()
    return len(words) == 1 and words[0] in scripts


def render(table: dict[Command, dict[str, Parser]], versions: list[str], command_line: str, problems: list[str]) -> str:
    lines = [
        "# The options each LMCache server command accepts, by release. GENERATED: do not edit by hand; regenerate",
        f"#   {command_line}",
        "# from the extracted source of every LMCache release in releases.yaml (static ast reading of the",
        "# parsers; see the script's docstring). A command's `introduced`/`removed` are the first release that",
        "# has it / no longer has it; an option's are within the command's releases (absent: in the command's",
        "# first release / still in its newest). `parser: argv`: the command reads sys.argv by position and",
        "# takes no options. `allow_abbrev`: argparse accepts a unique prefix of a long option as that option.",
        "sources:",
    ]
    sources: list[str] = []
    for per_release in table.values():
        present = [v for v in versions if v in per_release]
        for version in dict.fromkeys(present[-1:] + present[:1]):
            found = per_release[version]
            sources += [f"{found.origin}:lmcache=={version}:{f}" for f in sorted(found.files)]
    lines += [f"  - '{s}'" for s in dict.fromkeys(sources)]
    lines += [f"verified_at: {VERIFIED_AT}", "commands:"]
    for command, per_release in table.items():
        lines += _render_command(command, per_release, versions, problems)
    return "\n".join(lines) + "\n"


def _render_command(
    command: Command, per_release: dict[str, Parser], versions: list[str], problems: list[str]
) -> list[str]:
    if not per_release:
        problems.append(f"{command.words}: in no release read; left out")
        return []
    present = [v for v in versions if v in per_release]
    first, last = versions.index(present[0]), versions.index(present[-1])
    if len(present) != last - first + 1:
        problems.append(f"{command.words}: missing from some releases between {present[0]} and {present[-1]}")
    lines = [f"  - command: '{command.words}'", f"    server: {command.server}"]
    if first > 0:
        lines.append(f"    introduced: '{present[0]}'")
    if last + 1 < len(versions):
        lines.append(f"    removed: '{versions[last + 1]}'")
    newest = per_release[present[-1]]
    if not newest.built:
        return [*lines, "    parser: argv", "    options: []"]
    tolerant = [v for v in present if per_release[v].tolerant]
    if tolerant:  # the review calls every unregistered option refused; it would be wrong here
        problems.append(f"{command.words}: parse_known_args in {', '.join(tolerant)}; unknown options are not refused")
    if len({p.allow_abbrev for p in per_release.values()}) > 1:
        problems.append(f"{command.words}: allow_abbrev differs between releases; the newest's recorded")
    if not newest.allow_abbrev:
        lines.append("    allow_abbrev: false")
    lines.append("    options:")
    options = {v: per_release[v].options for v in present}
    for run in runs(options):
        parts = [f"flag: '{run.name}'"]
        if run.introduced:
            parts.append(f"introduced: '{run.introduced}'")
        if run.removed:
            parts.append(f"removed: '{run.removed}'")
        if not options[present[run.indexes[0]]][run.name]:
            parts.append("takes_value: false")
        lines.append(f"      - {{{', '.join(parts)}}}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--src-dir", type=Path, required=True, help="extracted LMCache sources, one per release")
    parser.add_argument("--out", type=Path, default=REPO / "knowledge" / "lmcache_server_cli.yaml")
    parser.add_argument("--releases", type=Path, default=REPO / "knowledge" / "releases.yaml")
    parser.add_argument("--ports", type=Path, default=REPO / "knowledge" / "ports.yaml")
    args = parser.parse_args(argv)
    problems: list[str] = []
    try:
        versions = released(args.releases, "lmcache")
        table = read_all(args.src_dir, versions, commands(args.ports))
    except ExtractionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    text = render(table, versions, "python scripts/build_lmcache_server_cli.py --src-dir SRC_DIR", problems)
    LMCacheServerCli.model_validate(yaml.safe_load(text))  # never write a file the loader would refuse
    args.out.write_text(text, encoding="utf-8")
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    print(f"{sum(1 for p in table.values() if p)} commands across {len(versions)} LMCache releases; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
