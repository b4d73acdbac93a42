"""The command line: what it prints and its exit status. Two tests start it as a user does (the
console script's process, its exit status); the rest call its main() in this process, which
prints and returns the same and costs no second interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
from mcp import Client

from conftest import Ran, run_in_process
from vllm_caching_mcp import cli
from vllm_caching_mcp.mcp_server import build_server


def run_as_a_process(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "vllm_caching_mcp.cli", *args], capture_output=True, text=True)


def run(*args: str) -> Ran:
    return run_in_process(cli.main, *args)


def test_check_version_prints_a_readable_answer() -> None:
    out = run_as_a_process("check-version", "--name", "--kv-offloading-size", "--version", "0.11.0")
    assert out.returncode == 0, out.stderr
    assert "first appears in 0.11.1" in out.stdout


def test_json_flag_prints_the_whole_result() -> None:
    out = run("check-version", "--name", "kv_offloading_size", "--version", "0.22.1", "--json")
    data = json.loads(out.stdout)
    assert data["matches"][0]["id"] == "flag.kv-offloading-size"
    assert data["version_context"]["version"] == "0.22.1"


def test_call_prints_exactly_what_the_mcp_tool_returns() -> None:
    arguments = {"name": "--kv-offloading-size", "version": "0.22.1", "compare_to": "0.33.0"}
    out = run("call", "check_version", json.dumps(arguments))
    assert out.returncode == 0, out.stderr

    async def via_mcp() -> object:
        async with Client(build_server()) as client:
            return (await client.call_tool("check_version", arguments)).structured_content

    assert json.loads(out.stdout) == anyio.run(via_mcp)


def test_bad_input_exits_2_with_one_line_naming_the_field() -> None:
    out = run_as_a_process("check-version", "--name", "--block-size", "--version", "latest")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0
    assert "version:" in out.stderr and "Traceback" not in out.stderr
    out = run("call", "check_version", "{not json")
    assert out.returncode == 2 and "arguments: not valid JSON" in out.stderr
    out = run("call", "no_such_tool", "{}")
    assert out.returncode == 2 and "check_version" in out.stderr


def test_misspelt_name_gets_a_suggestion() -> None:
    out = run("check-version", "--name", "--kv-offlaoding-size")
    assert out.returncode == 2
    assert "Did you mean: --kv-offloading-size" in out.stderr


def test_tools_lists_every_tool() -> None:
    out = run("tools")
    assert "check_version" in out.stdout


def test_tools_json_prints_the_listing_an_mcp_client_gets() -> None:
    out = run("tools", "--json")
    assert out.returncode == 0, out.stderr

    async def via_mcp() -> list[dict[str, object]]:
        async with Client(build_server()) as client:
            listed = (await client.list_tools()).tools
            return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed]

    assert json.loads(out.stdout) == {"tools": anyio.run(via_mcp)}
