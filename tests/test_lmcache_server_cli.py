"""The LMCache server option inventory: the generator on a tiny fake LMCache, and the shipped file."""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path

import pytest
import yaml

from conftest import REPO, script_main
from vllm_caching_mcp.advice.deployment.server_cli import option_problem
from vllm_caching_mcp.knowledge import Knowledge, LMCacheServerCli, ServerCommandCli
from vllm_caching_mcp.versions import Version

SCRIPT = REPO / "scripts" / "build_lmcache_server_cli.py"

# 1.0.0: `python -m lmcache.v1.multiprocess.server` builds its parser in parse_args, with a helper it
# hands the parser to; the remote server reads sys.argv. 1.1.0: the option is renamed, and the `lmcache`
# script's `server` subcommand appears (its add_arguments imports the helper inside the function).
SERVER_1_0 = """\
import argparse

from lmcache.v1.multiprocess.config import add_storage_args


def parse_args():
    parser = argparse.ArgumentParser(description="server")
    parser.add_argument("--port", type=int, default=5555)
    parser.add_argument("--verbose", action="store_true")
    add_storage_args(parser)
    return parser.parse_args()


if __name__ == "__main__":
    args = parse_args()
"""

CONFIG_1_0 = """\
def add_storage_args(parser):
    group = parser.add_argument_group("storage")
    group.add_argument("--cpu-buffer-size", type=float)
    return parser
"""

CONFIG_1_1 = CONFIG_1_0.replace("--cpu-buffer-size", "--l1-size-gb")

COMMAND_1_1 = """\
class ServerCommand:
    def name(self):
        return "server"

    def add_arguments(self, parser):
        from lmcache.v1.multiprocess.config import add_storage_args

        parser.add_argument("--host")
        add_storage_args(parser)
"""

REMOTE = """\
import sys


def main():
    host, port = sys.argv[1], int(sys.argv[2])


if __name__ == "__main__":
    main()
"""

PORTS = """\
layouts: []
servers:
  - id: ports.mp
    package: lmcache
    entry_points: ['lmcache server']
    modules: [lmcache.v1.multiprocess.server]
  - id: ports.remote
    package: lmcache
    entry_points: [lmcache_server]
    modules: [lmcache.v1.server]
"""

RELEASES = """\
lines:
  - package: lmcache
    releases: [{version: '1.0.0'}, {version: '1.1.0'}]
"""


def _release(root: Path, version: str, files: dict[str, str], scripts: dict[str, str]) -> None:
    base = root / f"lmcache-{version}"
    for path, text in files.items():
        (base / path).parent.mkdir(parents=True, exist_ok=True)
        (base / path).write_text(text, encoding="utf-8")
    info = base / f"lmcache-{version}.dist-info"
    info.mkdir(parents=True)
    lines = "".join(f"{name} = {target}\n" for name, target in scripts.items())
    (info / "entry_points.txt").write_text(f"[console_scripts]\n{lines}", encoding="utf-8")


def test_generator_follows_each_command_to_its_options(tmp_path: Path) -> None:
    common = {
        "lmcache/__init__.py": "",
        "lmcache/v1/__init__.py": "",
        "lmcache/v1/multiprocess/__init__.py": "",
        "lmcache/v1/multiprocess/server.py": SERVER_1_0,
        "lmcache/v1/server/__init__.py": "",
        "lmcache/v1/server/__main__.py": REMOTE,
    }
    remote = {"lmcache_server": "lmcache.v1.server.__main__:main"}
    _release(tmp_path / "src", "1.0.0", {**common, "lmcache/v1/multiprocess/config.py": CONFIG_1_0}, remote)
    newer = {
        **common,
        "lmcache/v1/multiprocess/config.py": CONFIG_1_1,
        "lmcache/cli/__init__.py": "",
        "lmcache/cli/main.py": "import argparse\n\ndef main():\n    parser = argparse.ArgumentParser()\n",
        "lmcache/cli/commands/__init__.py": "",
        "lmcache/cli/commands/server.py": COMMAND_1_1,
    }
    _release(tmp_path / "src", "1.1.0", newer, {**remote, "lmcache": "lmcache.cli.main:main"})
    (tmp_path / "ports.yaml").write_text(PORTS, encoding="utf-8")
    (tmp_path / "releases.yaml").write_text(RELEASES, encoding="utf-8")
    out = tmp_path / "out.yaml"
    args = ["--src-dir", str(tmp_path / "src"), "--out", str(out)]
    code = script_main(SCRIPT)(
        [*args, "--ports", str(tmp_path / "ports.yaml"), "--releases", str(tmp_path / "releases.yaml")]
    )
    assert code == 0
    cli = LMCacheServerCli.model_validate(yaml.safe_load(out.read_text(encoding="utf-8")))
    old, new = Version("1.0.0"), Version("1.1.0")
    module = "python -m lmcache.v1.multiprocess.server"
    assert cli.command(module, old) is not None
    assert cli.command(module, old).accepted(old) == {  # type: ignore[union-attr]
        "--port": True, "--verbose": False, "--cpu-buffer-size": True, "-h": False, "--help": False
    }  # fmt: skip
    assert "--l1-size-gb" in cli.command(module, new).accepted(new)  # type: ignore[union-attr]
    assert cli.command("lmcache server", old) is None
    assert set(cli.command("lmcache server", new).accepted(new)) == {"--host", "--l1-size-gb", "-h", "--help"}  # type: ignore[union-attr]
    remote_server = cli.command("lmcache_server", new)
    assert remote_server is not None and remote_server.parser == "argv" and not remote_server.options


def test_shipped_file_knows_the_buffer_option_was_renamed(knowledge: Knowledge) -> None:
    module = knowledge.lmcache_server_cli.command("python -m lmcache.v1.multiprocess.server", Version("0.3.13"))
    assert module is not None and "--cpu-buffer-size" in module.accepted(Version("0.3.13"))
    assert "--cpu-buffer-size" not in module.accepted(Version("0.3.14"))
    assert "--l1-size-gb" in module.accepted(Version("0.3.14"))
    server = knowledge.lmcache_server_cli.command("lmcache server", Version("0.5.6"))
    assert server is not None and server.allow_abbrev and "--l1-size-gb" in server.accepted(Version("0.5.6"))


def _parser_of(command: ServerCommandCli, version: Version) -> argparse.ArgumentParser:
    """An argparse parser with the options the inventory records for ``command`` in ``version``."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=command.allow_abbrev)
    for flag, takes_value in command.accepted(version).items():
        parser.add_argument(flag, action="store" if takes_value else "store_true")
    return parser


@pytest.mark.parametrize(
    ("words", "refused"),
    [
        (["--port", "6555", "--cpu-buffer-size", "60"], True),  # renamed in 0.3.14
        (["--l1-size", "60"], False),  # a unique prefix of --l1-size-gb
        (["--l1", "60"], True),  # ambiguous: --l1-size-gb, --l1-init-size-gb, ...
        (["--l1-size-gb=60", "--max-workers", "4"], False),
    ],
)
def test_argparse_refuses_what_the_review_calls_refused(knowledge: Knowledge, words: list[str], refused: bool) -> None:
    """The premise of pitfall.lmcache-server-option-unknown, run: argparse exits with code 2 exactly on the
    command lines option_problem calls refused (0.5.6's multiprocess server)."""
    version = Version("0.5.6")
    command = knowledge.lmcache_server_cli.command("python -m lmcache.v1.multiprocess.server", version)
    assert command is not None
    problems = [option_problem(w, command, version, {}) for w in words if w.startswith("-")]
    with contextlib.redirect_stderr(io.StringIO()):
        try:
            _parser_of(command, version).parse_args(words)
            code = 0
        except SystemExit as exited:
            code = int(exited.code or 0)
    assert (code == 2) is refused
    assert any(p is not None for p in problems) is refused


def test_shipped_file_was_read_up_to_the_newest_lmcache_release(knowledge: Knowledge) -> None:
    newest = knowledge.releases["lmcache"].releases[-1].version
    assert any(f"lmcache=={newest}:" in str(s) for s in knowledge.lmcache_server_cli.sources), (
        f"knowledge/lmcache_server_cli.yaml does not read LMCache {newest}: run scripts/build_lmcache_server_cli.py"
    )


def test_argparse_refuses_a_switch_given_a_value(knowledge: Knowledge) -> None:
    """The switch half of the premise, run: --x v and --x=v both exit with code 2."""
    version = Version("0.5.6")
    command = knowledge.lmcache_server_cli.command("python -m lmcache.v1.multiprocess.server", version)
    assert command is not None and command.accepted(version)["--disable-metrics"] is False
    for words in (["--disable-metrics", "true"], ["--disable-metrics=true"]):
        with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit) as exited:
            _parser_of(command, version).parse_args(words)
        assert exited.value.code == 2
