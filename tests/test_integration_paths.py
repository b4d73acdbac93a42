"""Every documented way to plug the server into an agent, tried against a fresh non-editable install.

The package is built and installed into a new virtual environment without downloads (as in
test_install.py); the documented commands and config files are then read from the repository and the
command each one names is started from that environment's `bin` and driven over stdio by the MCP
client. `pipx install .` and `uv tool install .` are not run (no network, no pipx/uv in CI); what they
expose is the console scripts of a non-editable install, which is what is checked.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from conftest import REPO
from vllm_caching_mcp import __version__
from vllm_caching_mcp.tools import TOOL_NAMES, all_tools

INTEGRATIONS = REPO / "integrations"


@pytest.fixture(scope="module")
def fresh_bin(fresh_install: Path) -> Path:
    """The `bin` directory of a new venv holding a non-editable install of this checkout."""
    return fresh_install / "bin"


def server_env(bin_dir: Path) -> dict[str, str]:
    """PATH with only the fresh venv's bin in front, as after `pipx install` / `uv tool install`."""
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"}


def resolve(command: str, bin_dir: Path) -> str:
    found = shutil.which(command, path=server_env(bin_dir)["PATH"])
    assert found is not None, f"{command} is not on the PATH of the fresh install"
    assert found.startswith(str(bin_dir)), found
    return found


@functools.cache
def list_tools_and_ask(command: str, args: tuple[str, ...], bin_dir: Path) -> tuple[set[str], dict[str, Any]]:
    """Start the server as a client would, list its tools and ask one question. Once per command
    line: the documented ways mostly name the same one, and its answer does not change."""

    async def go() -> tuple[set[str], dict[str, Any]]:
        params = StdioServerParameters(command=resolve(command, bin_dir), args=list(args), env=server_env(bin_dir))
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            answer = await client.call_tool("check_version", {"name": "--kv-offloading-size", "version": "0.11.0"})
            assert answer.structured_content is not None
            return names, answer.structured_content

    return anyio.run(go)


def documented_block(path: Path, first_word: str) -> list[list[str]]:
    """The shell lines of `path`'s ```bash blocks that start with `first_word`, split like a shell."""
    text = path.read_text(encoding="utf-8")
    lines = [line for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith(first_word + " ")]


def test_pipx_and_uv_tool_get_both_console_scripts(fresh_bin: Path) -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {"vllm-caching", "vllm-caching-mcp"}
    documented = documented_block(INTEGRATIONS / "README.md", "pipx") + documented_block(
        INTEGRATIONS / "README.md", "uv"
    )
    assert documented == [["pipx", "install", "."], ["uv", "tool", "install", "."]]
    out = subprocess.run(
        [resolve("vllm-caching", fresh_bin), "tools"], capture_output=True, text=True, env=server_env(fresh_bin)
    )
    assert out.returncode == 0, out.stderr
    assert {line.split()[0] for line in out.stdout.splitlines()} == set(TOOL_NAMES)
    version = subprocess.run(
        [resolve("vllm-caching-mcp", fresh_bin), "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.strip() == f"vllm-caching-mcp {__version__}"


def test_claude_mcp_add_lines_name_a_server_that_answers(fresh_bin: Path) -> None:
    lines = documented_block(INTEGRATIONS / "README.md", "claude")
    adds = [argv for argv in lines if argv[:3] == ["claude", "mcp", "add"]]
    assert len(adds) == 2
    for argv in adds:
        # claude mcp add [options] NAME -- COMMAND [ARGS...]
        separator = argv.index("--")
        assert argv[separator - 1] == "vllm-caching"
        command, *args = argv[separator + 1 :]
        names, answer = list_tools_and_ask(command, tuple(args), fresh_bin)
        assert names == set(TOOL_NAMES)
        assert answer["matches"][0]["status"] == "not_yet"


@pytest.mark.parametrize(
    "config",
    ["claude-code/.mcp.json", "cursor/.cursor/mcp.json", "claude-plugin/.mcp.json"],
)
def test_mcp_json_files_start_the_server(config: str, fresh_bin: Path) -> None:
    servers = json.loads((INTEGRATIONS / config).read_text())["mcpServers"]
    assert set(servers) == {"vllm-caching"}
    entry = servers["vllm-caching"]
    assert entry.get("type", "stdio") == "stdio"
    names, answer = list_tools_and_ask(entry["command"], tuple(entry.get("args", [])), fresh_bin)
    assert names == set(TOOL_NAMES)
    assert answer["matches"][0]["introduced"] == "0.11.1"


def front_matter(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    match = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    assert match, f"{path} has no YAML front matter"
    data = yaml.safe_load(match.group(1))
    assert isinstance(data, dict)
    return data


def test_skill_front_matter_follows_the_agent_skills_format() -> None:
    meta = front_matter(REPO / "SKILL.md")
    assert set(meta) == {"name", "description"}
    # Agent Skills: name 1-64 chars of lowercase letters, digits and single hyphens; description <= 1024 chars.
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", meta["name"]) and len(meta["name"]) <= 64
    assert 0 < len(meta["description"]) <= 1024
    for trigger in ("--kv-offloading-size", "LMCache", "NixlConnector", "TTFT still bad", "SGLang"):
        assert trigger in meta["description"], trigger
    body = (REPO / "SKILL.md").read_text(encoding="utf-8")
    for spec in all_tools():
        assert f"`{spec.name}`" in body, spec.name
    assert "vllm-caching call TOOL" in body and "vllm-caching tools" in body


def test_plugin_layout_bundles_the_skill_and_the_server() -> None:
    plugin = INTEGRATIONS / "claude-plugin"
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "vllm-caching" and manifest["version"] == __version__
    skill = plugin / "skills" / manifest["name"] / "SKILL.md"
    # The plugin carries a copy of the skill; it must not drift from the repository's SKILL.md.
    assert skill.read_text(encoding="utf-8") == (REPO / "SKILL.md").read_text(encoding="utf-8")
    assert front_matter(skill)["name"] == skill.parent.name
    # Only the manifest lives inside .claude-plugin/; components sit at the plugin root.
    assert sorted(p.name for p in (plugin / ".claude-plugin").iterdir()) == ["plugin.json"]
