"""The real MCP SDK client against the real server, over stdio and over streamable HTTP."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from conftest import run_in_process
from vllm_caching_mcp import __version__, cli
from vllm_caching_mcp.knowledge_files import FILE_NAMES
from vllm_caching_mcp.tools import TOOL_NAMES

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module", params=["stdio", "http"])
async def client(request: pytest.FixtureRequest) -> AsyncIterator[Client]:
    """A client over each transport, connected once for the module: the tests below only ask, so one
    server per transport answers them all (over stdio, a server of its own; over HTTP, the session's)."""
    if request.param == "stdio":
        target: Any = StdioServerParameters(command=sys.executable, args=["-m", "vllm_caching_mcp.mcp_server"])
    else:
        target = request.getfixturevalue("http_server")
    async with Client(target) as connected:
        yield connected


async def test_lists_every_tool_with_schemas_and_annotations(client: Client) -> None:
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) == set(TOOL_NAMES)
    # Unknown arguments are refused, and every listed schema says so.
    assert all(t.input_schema.get("additionalProperties") is False for t in listed.values())
    tool = listed["check_version"]
    assert tool.output_schema is not None and "version_context" in tool.output_schema["properties"]
    props = tool.input_schema["properties"]
    assert (
        props["name"]["description"]
        and "maxLength" not in props["version"]  # a guard bound, left out of the listing (compact_schema)
        and props["version"]["type"] == ["string", "null"]
    )
    assert tool.annotations is not None
    assert tool.annotations.read_only_hint and tool.annotations.idempotent_hint
    assert tool.annotations.open_world_hint is False


async def test_server_version_comes_from_package_metadata(client: Client) -> None:
    info = client.server_info if hasattr(client, "server_info") else None
    if info is None:
        pytest.skip("client does not expose server info")
    assert info.version == __version__


async def test_call_returns_structured_content_and_a_text_summary(client: Client) -> None:
    result = await client.call_tool("check_version", {"name": "--kv-offloading-size", "version": "0.11.0"})
    assert not result.is_error
    data = result.structured_content
    assert data is not None
    match = data["matches"][0]
    assert match["status"] == "not_yet" and match["introduced"] == "0.11.1"
    assert "first appears in 0.11.1" in result.content[0].text


async def test_bad_input_is_an_error_result_naming_the_field(client: Client) -> None:
    result = await client.call_tool("check_version", {"name": "--block-size", "version": "zero.two"})
    assert result.is_error
    assert "version:" in result.content[0].text and "MAJOR.MINOR.PATCH" in result.content[0].text
    result = await client.call_tool("check_version", {"name": "x" * 500})
    assert result.is_error and "name" in result.content[0].text
    result = await client.call_tool("check_version", {"name": "--kv-offlaoding-size"})
    assert result.is_error and "Did you mean: --kv-offloading-size" in result.content[0].text


# Refused by the SDK's own check of the tool's input schema (before the tool runs), by the request
# model's validators, and for an argument the tool does not take, which the SDK would drop unsaid.
REFUSED: list[tuple[str, dict[str, Any]]] = [
    ("check_version", {"name": "x" * 500}),
    ("check_version", {"name": 5}),
    ("check_version", {"name": "--block-size", "names": "--kv-offloading-size"}),
    ("size_offload", {"kv_offloading_size_gib": "lots", "model": "llama-3.1-8b"}),
    (
        "size_offload",
        {
            "architecture": {
                "num_layers": 1,
                "num_attention_heads": 1,
                "num_kv_heads": 1,
                "head_dim": 1,
                "sliding_window_layers": 2,
            }
        },
    ),
]


@functools.cache
def cli_error(tool: str, arguments_json: str) -> str:
    """What `vllm-caching call` prints for these arguments: its one error line, without the program's prefix."""
    out = run_in_process(cli.main, "call", tool, arguments_json)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    return out.stderr.removeprefix("vllm-caching: error: ").rstrip("\n")


async def test_refused_arguments_read_as_the_cli_says_them(client: Client) -> None:
    for tool, arguments in REFUSED:
        result = await client.call_tool(tool, arguments)
        text = result.content[0].text
        assert result.is_error and text == cli_error(tool, json.dumps(arguments)), (arguments, text)
        assert "\n" not in text and "pydantic" not in text and "Error executing" not in text, text


async def test_unknown_tool_is_a_protocol_error(client: Client) -> None:
    with pytest.raises(MCPError, match="Unknown tool"):
        await client.call_tool("no_such_tool", {})


async def test_every_knowledge_file_is_a_readable_resource(client: Client) -> None:
    uris = {str(r.uri) for r in (await client.list_resources()).resources}
    # and each tool's whole output schema, which its listed outline names
    assert uris == {f"knowledge://{name}" for name in FILE_NAMES} | {f"schema://{t}/output" for t in TOOL_NAMES}
    read = await client.read_resource("knowledge://releases.yaml")
    text = read.contents[0].text  # type: ignore[union-attr]
    lines = yaml.safe_load(text)["lines"]
    assert {line["package"] for line in lines} >= {"vllm", "lmcache"}


MINIMAL_CALLS: dict[str, dict[str, Any]] = {
    "check_version": {"name": "OffloadingConnector", "version": "0.22.1"},
    "choose_backend": {"version": "0.33.0", "tiers": ["cpu"]},
    "size_offload": {"model": "llama-3.1-8b", "version": "0.33.0", "kv_offloading_size_gib": 64},
    "render_config": {
        "backend": "native_cpu",
        "version": "0.33.0",
        "model": "m",
        "sizes": {"kv_offloading_size_gib": 64},
    },
    "review_deployment": {"documents": [{"name": "serve.sh", "text": "vllm serve m --kv-offloading-size 64"}]},
    "diagnose": {"symptoms": ["ttft_high"], "version": "0.33.0"},
    "check_bug_status": {"offline": True, "bugs": ["LMCache/LMCache#2942"]},
    "check_advisories": {"offline": True, "version": "0.22.1"},
    "inspect_image": {"image": "v0.22.1", "offline": True},
}


async def test_every_tool_answers_over_the_protocol(client: Client) -> None:
    assert set(MINIMAL_CALLS) == set(TOOL_NAMES)
    for name, arguments in MINIMAL_CALLS.items():
        result = await client.call_tool(name, arguments)
        assert not result.is_error, (name, result.content)
        assert result.structured_content is not None and result.content[0].text, name
