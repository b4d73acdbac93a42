"""A shared server asks only the registries its operator allows: its callers cannot reach the services beside it.

An attack run pointed `inspect_image` of a shared HTTP server at `127.0.0.1:<port>/repo:tag` for
every port: the server connected to each over plain HTTP, and its answers (refused, not a registry,
timed out) told the ports apart, a map of that host's services. A shared server now asks only the
public registries (`SHARED_SERVER_REGISTRIES`) unless `VLLM_CACHING_MCP_REGISTRIES` lists others,
refusing anything else before a byte is sent and with the same line whatever is there. The command
line and a stdio server act for their own user and ask any registry, loopback included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from conftest import running_server
from registry_standin import FakeRegistry, vllm_openai_config
from vllm_caching_mcp.http_client import ConfigError
from vllm_caching_mcp.registry import (
    REGISTRIES_ENV,
    SHARED_SERVER_REGISTRIES,
    _shared,
    allowed_registries,
    registry_allowed,
)


@pytest.mark.parametrize(
    ("registry", "allowed"),
    [
        ("docker.io", True),
        ("ghcr.io", True),
        ("nvcr.io", True),
        ("us-docker.pkg.dev", True),
        ("eu.gcr.io", True),
        ("127.0.0.1:6379", False),
        ("localhost:5000", False),
        ("[::1]:8080", False),
        ("10.0.0.7:5000", False),
        ("169.254.169.254", False),
        ("registry.internal.example:5000", False),
        ("ghcr.io.evil.example", False),
        ("nvcr.io:444", False),
    ],
)
def test_the_shared_servers_default_names_public_registries_only(registry: str, allowed: bool) -> None:
    assert registry_allowed(registry, SHARED_SERVER_REGISTRIES) is allowed


def test_the_environment_lists_registries_and_star_allows_any(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_shared, "server", True)
    assert allowed_registries({}) == SHARED_SERVER_REGISTRIES
    listed = allowed_registries({REGISTRIES_ENV: "harbor.example.com, 127.0.0.1:5000,*.corp.example"})
    assert listed == ("harbor.example.com", "127.0.0.1:5000", "*.corp.example")
    assert registry_allowed("127.0.0.1:5000", listed) and not registry_allowed("127.0.0.1:5001", listed)
    assert registry_allowed("a.corp.example", listed)
    assert allowed_registries({REGISTRIES_ENV: "*"}) is None
    with pytest.raises(ConfigError, match=rf"{REGISTRIES_ENV}: 'http://x' is not a registry"):
        allowed_registries({REGISTRIES_ENV: "http://x"})
    monkeypatch.setattr(_shared, "server", False)
    assert allowed_registries({}) is None  # the user's own command line or stdio server


async def _inspect(url: str, image: str) -> tuple[bool, str]:
    async with Client(f"{url}/mcp") as client:
        result = await client.call_tool("inspect_image", {"image": image, "deadline_seconds": 5})
        return bool(result.is_error), result.content[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_shared_server_refuses_a_loopback_registry_before_sending_anything(tmp_path: Path) -> None:
    with FakeRegistry() as registry:
        registry.add_image("vllm/vllm-openai", "v0.22.1", {"amd64": vllm_openai_config()})
        image = f"127.0.0.1:{registry.port}/vllm/vllm-openai:v0.22.1"
        env = {"VLLM_CACHING_MCP_CACHE_DIR": str(tmp_path / "cache")}
        with running_server(env=env, log=tmp_path / "server.log") as url:
            refused, text = await _inspect(url, image)
            closed_refused, closed_text = await _inspect(url, "127.0.0.1:9/vllm/vllm-openai:v0.22.1")
        assert refused and text.startswith(f"image: 127.0.0.1:{registry.port} is not a registry this server asks")
        assert registry.requests == []
        # A closed port is refused with the same words: nothing tells what listens where.
        assert closed_refused and closed_text == text.replace(f"127.0.0.1:{registry.port}", "127.0.0.1:9")

        allowed = {**env, REGISTRIES_ENV: f"127.0.0.1:{registry.port}"}
        with running_server(env=allowed, log=tmp_path / "allowed.log") as url:
            refused, text = await _inspect(url, image)
        assert not refused and registry.requests, text


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_the_command_line_asks_a_loopback_registry(tmp_path: Path) -> None:
    with FakeRegistry() as registry:
        registry.add_image("vllm/vllm-openai", "v0.22.1", {"amd64": vllm_openai_config()})
        out = subprocess.run(
            [sys.executable, "-m", "vllm_caching_mcp.cli", "inspect-image", "--image",
             f"127.0.0.1:{registry.port}/vllm/vllm-openai:v0.22.1"],
            capture_output=True, text=True, check=False,
            env={**os.environ, "VLLM_CACHING_MCP_CACHE_DIR": str(tmp_path), "DOCKER_CONFIG": str(tmp_path)},
        )  # fmt: skip
    assert out.returncode == 0 and registry.requests, out.stdout + out.stderr
