"""A start-up that finds its tool listing in the start-up cache lists the tools without loading them,
answers every tool as a full start-up does, and loads the rest in the background."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from test_mcp_end_to_end import MINIMAL_CALLS
from vllm_caching_mcp import listing_cache, mcp_server, startup_cache
from vllm_caching_mcp.tools import TOOL_NAMES

# Modules a listing-only start-up must not import: every tool's module, the knowledge models, YAML.
_DEFERRED = sorted(
    {*(f"vllm_caching_mcp.advice.{m}" for m in ("common", "sizing", "review")), "vllm_caching_mcp.knowledge", "yaml"}
)

_PROBE = (
    "import asyncio, json, sys, vllm_caching_mcp.mcp_server as m;"
    "s = m.build_server(); listed = asyncio.run(s.list_tools());"
    "print(json.dumps({'cached': s._listed is not None and sys.modules.get('vllm_caching_mcp.knowledge') is None,"
    f" 'loaded': sorted(n for n in {_DEFERRED!r} if n in sys.modules),"
    " 'tools': [t.model_dump(mode='json', by_alias=True) for t in listed]}))"
)


def _start(cache: Path) -> dict[str, Any]:
    env = {**os.environ, "VLLM_CACHING_MCP_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, env=env)
    return dict(json.loads(out.stdout))


def test_second_start_lists_the_same_tools_without_importing_them(tmp_path: Path) -> None:
    first = _start(tmp_path)
    second = _start(tmp_path)
    assert first["loaded"] == _DEFERRED and not first["cached"]
    assert second["loaded"] == [] and second["cached"]
    assert second["tools"] == first["tools"]
    assert [t["name"] for t in second["tools"]] == list(TOOL_NAMES)


def test_a_listing_from_other_inputs_or_naming_other_tools_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path))
    inputs = listing_cache.inputs()
    listing = anyio.run(mcp_server.build_server().list_tools)
    assert listing_cache.read(inputs) == listing
    listing_cache.write(inputs, listing[:-1])  # a tool short
    assert listing_cache.read(inputs) is None
    listing_cache.write([*inputs[:-1], b"another pydantic"], listing)
    assert listing_cache.read(inputs) is None


def test_tools_register_in_the_background_after_the_first_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path))
    anyio.run(mcp_server.build_server().list_tools)  # stores the listing
    server = mcp_server.build_server()
    assert isinstance(server, mcp_server._Server) and server._registered == set()
    anyio.run(server.list_tools)
    deadline = time.monotonic() + 30
    while server._registered != set(TOOL_NAMES) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server._registered == set(TOOL_NAMES)


def test_a_deferred_start_answers_every_tool_as_a_full_one(tmp_path: Path) -> None:
    env = {**os.environ, "VLLM_CACHING_MCP_CACHE_DIR": str(tmp_path)}
    params = StdioServerParameters(command=sys.executable, args=["-m", "vllm_caching_mcp.mcp_server"], env=env)

    async def answers() -> dict[str, Any]:
        async with Client(params) as client:
            await client.list_tools()
            out = {}
            for name, arguments in MINIMAL_CALLS.items():
                result = await client.call_tool(name, arguments)
                assert not result.is_error, (name, result.content)
                out[name] = result.structured_content
            return out

    full = anyio.run(answers)
    assert (tmp_path / startup_cache.file_name(listing_cache.NAME)).is_file()
    deferred = anyio.run(answers)
    assert deferred == full


def test_prepare_validates_and_stores_the_cache_so_the_next_start_is_deferred(tmp_path: Path) -> None:
    env = {**os.environ, "VLLM_CACHING_MCP_CACHE_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "vllm_caching_mcp.mcp_server", "--prepare"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    assert out.stdout.strip() == f"knowledge and tools are valid; start-up cache written to {tmp_path}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        startup_cache.file_name("knowledge"),
        startup_cache.file_name(listing_cache.NAME),
    ]
    assert _start(tmp_path)["cached"]


def test_prepare_with_the_cache_switched_off_validates_and_says_so(tmp_path: Path) -> None:
    env = {**os.environ, "VLLM_CACHING_MCP_CACHE_DIR": str(tmp_path), startup_cache.DISABLE_ENV: "1"}
    out = subprocess.run(
        [sys.executable, "-m", "vllm_caching_mcp.mcp_server", "--prepare"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    assert out.stdout.strip() == (
        "knowledge and tools are valid; the start-up cache is switched off (VLLM_CACHING_MCP_NO_STARTUP_CACHE), "
        "so every start-up loads them in full"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_server_built_not_to_defer_loads_everything_despite_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What streamable HTTP does: a shared, long-lived server is fully loaded before it takes a request.
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path))
    anyio.run(mcp_server.build_server().list_tools)
    server = mcp_server.build_server(defer=False)
    assert isinstance(server, mcp_server._Server) and server._registered == set(TOOL_NAMES)


_WORKER_PROBE = (
    "import asyncio, json, sys, vllm_caching_mcp.mcp_server as m\n"
    "from vllm_caching_mcp.tool_workers import ToolWorkers, WorkerSettings\n"
    "from mcp.server.mcpserver.exceptions import ToolError\n"
    "workers = ToolWorkers(WorkerSettings(cpu_seconds=60), size=1)\n"
    "s = m.build_server(workers=workers)\n"
    "async def calls():\n"
    "    await s.list_tools()\n"
    "    answers = []\n"
    "    for arguments in json.loads(sys.argv[1]):\n"
    "        try:\n"
    "            answers.append(sorted((await s.call_tool('check_version', arguments)).structured_content)[:2])\n"
    "        except ToolError as exc:\n"
    "            answers.append(str(exc))\n"
    "    return answers\n"
    "try:\n"
    "    answers = asyncio.run(calls())\n"
    "finally:\n"
    "    workers.close()\n"
    f"print(json.dumps({{'answers': answers, 'loaded': sorted(n for n in {_DEFERRED!r} if n in sys.modules),"
    " 'pydantic_models_built': 'vllm_caching_mcp.advice.check_version' in sys.modules}))\n"
)


def test_with_workers_an_offline_call_is_checked_by_the_worker_and_no_tool_loads_here(tmp_path: Path) -> None:
    """The server sends an offline call to a worker without importing the tool: an unknown argument and a
    bad value are refused in the one line the CLI prints, and a JSON list sent as a string is read as the
    SDK reads it."""
    from vllm_caching_mcp.tools import ToolInputError, run_tool

    env = {**os.environ, "VLLM_CACHING_MCP_CACHE_DIR": str(tmp_path)}
    _start(tmp_path)  # stores the listing
    calls = [
        {"name": "--kv-offloading-size", "version": "0.22.1"},
        {"name": "--kv-offloading-size", "version": "0.22.1", "vllm_version": "0.22.1"},
        {"name": "--kv-offloading-size", "version": 12},
    ]
    expected: list[Any] = [sorted(run_tool("check_version", calls[0]).structured())[:2]]
    for arguments in calls[1:]:
        with pytest.raises(ToolInputError) as refused:
            run_tool("check_version", arguments)
        expected.append(str(refused.value))
    out = subprocess.run(
        [sys.executable, "-c", _WORKER_PROBE, json.dumps(calls)], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr
    probe = json.loads(out.stdout)
    assert probe["answers"] == expected
    assert expected[1].startswith("arguments: check_version takes no argument 'vllm_version' (vllm_version is now")
    assert probe["loaded"] == [] and not probe["pydantic_models_built"]


def test_a_json_list_sent_as_a_string_is_parsed_for_a_worker_as_the_sdk_parses_it() -> None:
    from vllm_caching_mcp.tools import json_strings_parsed

    given = {"documents": '[{"name": "a.yaml", "text": "x: 1"}]', "version": '"0.22.1"', "detail": "null"}
    parsed = json_strings_parsed("review_deployment", {k: v for k, v in given.items() if k != "detail"})
    assert parsed["documents"] == [{"name": "a.yaml", "text": "x: 1"}]
    assert parsed["version"] == '"0.22.1"'  # JSON holding a string stays the string it was sent as
