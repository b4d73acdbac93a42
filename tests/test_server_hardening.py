"""The HTTP server shared by many agents: who may talk to it, and how it refuses bad start-up options.

Questions an operator asks before exposing the server: does it bind loopback unless told
otherwise; does a web page on another origin (DNS rebinding) get refused; with a token, is
every MCP request without it a 401 while the health probe stays open; does the token ever
reach a log line; and does a bad flag say what is wrong in one line rather than a traceback.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import running_server
from vllm_caching_mcp.mcp_server import main

TOKEN = "planted-token-5f0c1e9a7b3d4c21"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def post(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"{url}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **(headers or {})}, timeout=10)


# -- start-up options: one line, exit status 2, no traceback, no path ------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--transport", "streamable-http", "--port", "0"], "--port: 0 is not a TCP port (1-65535)"),
        (["--transport", "websocket"], "argument --transport: invalid choice: 'websocket'"),
        (["--transport", "streamable-http", "--port", "http"], "argument --port: invalid int value: 'http'"),
        (["--transport", "streamable-http", "--host", "0.0.0.0"], "--host 0.0.0.0 accepts connections from other"),
        (["--transport", "streamable-http", "--allowed-host", "a b"], "--allowed-host: 'a b' is not HOST"),
        (["--transport", "streamable-http", "--allowed-host", "*", "--allowed-host", "x"], "cannot be combined"),
        (["--transport", "streamable-http", "--allowed-origin", "evil.example"], "--allowed-origin: 'evil.example'"),
        (["--transport", "streamable-http", "--path", "mcp"], "--path: 'mcp' must start with '/'"),
        (["--transport", "streamable-http", "--path", "/healthz"], "not be /healthz"),
        (["--transport", "streamable-http", "--auth-token-env", "UNSET_FOR_THIS_TEST"], "is not set or empty"),
        (["--transport", "streamable-http", "--auth-token-env", "1BAD-NAME"], "is not an environment variable name"),
        (["--auth-token-env", "TOKEN"], "apply to streamable-http only"),
        (["--config-dir", "/no/such/directory"], "--config-dir: '/no/such/directory' is not a directory"),
    ],
)
def test_a_bad_start_up_option_is_one_line_naming_it(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("UNSET_FOR_THIS_TEST", raising=False)
    with pytest.raises(SystemExit) as exited:
        raise SystemExit(main(argv))
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err, err
    assert err.startswith("vllm-caching-mcp: ") and "Traceback" not in err and "/work" not in err


def test_a_short_token_is_refused_without_echoing_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TOKEN", "short-secret")
    assert main(["--transport", "streamable-http", "--auth-token-env", "MCP_TOKEN"]) == 2
    err = capsys.readouterr().err
    assert "at least 16 printable characters" in err and "short-secret" not in err


def test_a_busy_port_is_one_line_not_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert main(["--transport", "streamable-http", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}: Address already in use" in err


# -- DNS rebinding: Host and Origin ------------------------------------------------------------------


def test_loopback_server_refuses_a_foreign_host_or_origin_and_serves_its_own(tmp_path: Path) -> None:
    with running_server(log=tmp_path / "server.log") as url:
        assert post(url).status_code == 200
        assert post(url, {"origin": "http://localhost:3000"}).status_code == 200  # a local web UI
        # A page on evil.example whose DNS name now resolves to 127.0.0.1: the Host header gives it away.
        assert post(url, {"host": "evil.example"}).status_code == 421
        assert post(url, {"origin": "http://evil.example"}).status_code == 403


def test_named_hosts_and_origins_are_the_only_ones_accepted(tmp_path: Path) -> None:
    args = ("--allowed-host", "mcp.internal:*", "--allowed-origin", "https://ide.example.com")
    with running_server(*args, log=tmp_path / "server.log") as url:
        assert post(url, {"host": "mcp.internal:8000"}).status_code == 200
        assert post(url, {"host": "mcp.internal:8000", "origin": "https://ide.example.com"}).status_code == 200
        assert post(url, {"host": "mcp.internal:8000", "origin": "https://evil.example"}).status_code == 403
        assert post(url).status_code == 421  # 127.0.0.1 was not named


def test_any_host_still_checks_origin(tmp_path: Path) -> None:
    args = ("--allowed-host", "*", "--allowed-origin", "https://ide.example.com")
    with running_server(*args, log=tmp_path / "server.log") as url:
        assert post(url, {"host": "whatever.svc.cluster.local:8000"}).status_code == 200
        assert post(url, {"origin": "https://ide.example.com"}).status_code == 200
        assert post(url, {"origin": "http://evil.example"}).status_code == 403


# -- the bearer token ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_token_guards_every_mcp_request_but_not_the_health_probe(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with running_server("--auth-token-env", "MCP_TOKEN", env={"MCP_TOKEN": TOKEN}, log=log) as url:
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
        missing = post(url)
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert post(url, {"authorization": f"Bearer {TOKEN[:-1]}"}).status_code == 401
        assert post(url, {"authorization": f"Basic {TOKEN}"}).status_code == 401
        assert post(url, {"authorization": f"Bearer {TOKEN}x"}).status_code == 401
        assert TOKEN not in missing.text

        http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
        async with http_client, Client(streamable_http_client(f"{url}/mcp", http_client=http_client)) as client:
            result: Any = await client.call_tool("check_version", {"name": "--kv-offloading-size", "version": "0.22.1"})
            assert not result.is_error and result.structured_content["matches"][0]["status"] == "available"
    assert TOKEN not in log.read_text()


# -- files on the server host ---------------------------------------------------------------------------


def _config(directory: Path) -> Path:
    directory.mkdir(parents=True)
    config = {
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "hidden_size": 512,
        "max_position_embeddings": 4096,
    }
    (directory / "config.json").write_text(json.dumps(config))
    return directory


async def _size_from(url: str, config_path: str) -> tuple[bool, str]:
    async with Client(f"{url}/mcp") as client:
        result: Any = await client.call_tool(
            "size_offload", {"config_path": config_path, "params_total_b": 1, "kv_offloading_size_gib": 8}
        )
        return bool(result.is_error), str(result.content[0].text)


@pytest.mark.anyio
async def test_a_shared_server_reads_no_config_file_unless_given_a_directory(tmp_path: Path) -> None:
    inside = _config(tmp_path / "allowed" / "model")
    outside = _config(tmp_path / "private")
    (tmp_path / "allowed" / "escape").symlink_to(outside)
    with running_server(log=tmp_path / "a.log") as url:
        failed, text = await _size_from(url, str(inside))
        assert failed and "config_path: this shared server reads no files" in text
    with running_server("--config-dir", str(tmp_path / "allowed"), log=tmp_path / "b.log") as url:
        failed, text = await _size_from(url, str(inside))
        assert not failed and "KV per token: 2,048 B" in text, text
        for path in (outside, tmp_path / "allowed" / "escape", tmp_path / "allowed" / ".." / "private"):
            failed, text = await _size_from(url, str(path))
            assert failed and "is outside" in text, text
