"""The HTTP server shared by many agents: who may talk to it, and how it refuses bad start-up options.

Questions an operator asks before exposing the server: does it bind loopback unless told
otherwise; does a web page on another origin (DNS rebinding) get refused, including a Host or
Origin that merely begins like an allowed one; with a token, is every MCP request without it a
401 while the health probe stays open; does the token ever reach a log line; does a bad flag say
what is wrong in one line rather than a traceback; does a caller learn anything about the host's
files (the --config-dir path, what an allowed file holds) from an error; and does the image's
health check reach the server whatever proxy the environment names.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import REPO, free_port, run_in_process, running_server
from vllm_caching_mcp import cli
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


@pytest.fixture(scope="module")
def default_server(http_server: str) -> str:
    """The session's server with no options (loopback, no token, no config directory); its base URL.
    The tests given it only send requests, so one server serves them all."""
    return http_server.removesuffix("/mcp")


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
        (["--call-cpu-seconds", "0"], "--call-cpu-seconds: 0 is not a number of seconds above 0"),
        (["--call-cpu-seconds", "nan"], "--call-cpu-seconds: nan is not a number of seconds"),
        (["--call-cpu-seconds", "lots"], "argument --call-cpu-seconds: invalid float value: 'lots'"),
        (["--call-workers", "0"], "--call-workers: 0 is not between 1 and 64"),
        (["--transport", "streamable-http", "--header-timeout", "0"], "--header-timeout: 0 is not a number of"),
        (["--transport", "streamable-http", "--idle-timeout", "inf"], "--idle-timeout: inf is not a number of"),
        (["--transport", "streamable-http", "--max-connections", "0"], "--max-connections: 0 is not a number of"),
        (["--transport", "streamable-http", "--body-timeout", "-1"], "--body-timeout: -1 is not a number of seconds"),
        (["--transport", "streamable-http", "--min-body-rate", "0"], "--min-body-rate: 0 is not a number of bytes"),
        (["--min-body-rate", "10"], "apply to streamable-http only: --min-body-rate"),
        (["--transport", "streamable-http", "--max-connections", str(2**40)], "need more files than this process"),
        (["--header-timeout", "5", "--max-connections", "9"], "streamable-http only: --header-timeout, --max-conn"),
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


def test_loopback_server_refuses_a_foreign_host_or_origin_and_serves_its_own(default_server: str) -> None:
    url = default_server
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
    args = (
        "--allowed-host",
        "*",
        "--allowed-origin",
        "https://ide.example.com",
        "--allowed-origin",
        "http://localhost:*",
    )
    with running_server(*args, log=tmp_path / "server.log") as url:
        assert post(url, {"host": "whatever.svc.cluster.local:8000"}).status_code == 200
        assert post(url, {"origin": "https://ide.example.com"}).status_code == 200
        assert post(url, {"origin": "http://evil.example"}).status_code == 403
        # Matched as scheme, host and port, not as a prefix of the pattern.
        assert post(url, {"origin": "http://localhost:5173"}).status_code == 200
        assert post(url, {"origin": "http://localhost:1234.evil.com"}).status_code == 403
        assert post(url, {"origin": "https://ide.example.com.evil.com"}).status_code == 403


def test_a_host_or_origin_that_only_begins_like_an_allowed_one_is_refused(default_server: str) -> None:
    url = default_server
    assert post(url, {"host": "localhost:8000"}).status_code == 200
    for host in ("localhost:1234.evil.com", "localhost:80@evil.com", "127.0.0.1:99999", "localhost.evil.com"):
        assert post(url, {"host": host}).status_code == 421, host
    for origin in ("http://localhost:1234.evil.com", "http://127.0.0.1:1.evil.com", "https://localhost:3000"):
        assert post(url, {"origin": origin}).status_code == 403, origin
    # Two Origin headers, one allowed: the parts behind the check might read the other.
    two = [*MCP_HEADERS.items(), ("origin", "http://localhost:3000"), ("origin", "http://evil.example")]
    assert httpx.post(f"{url}/mcp", json=INITIALIZE, headers=two, timeout=10).status_code == 403


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


@pytest.fixture(scope="module")
def host_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A host's files: ``allowed/`` (a model, and every kind of file a caller might point at) and
    ``private/`` beside it, which no caller may read."""
    top = tmp_path_factory.mktemp("host")
    root = top / "allowed"
    _config(root / "model")
    _config(top / "private")
    (root / "escape").symlink_to(top / "private")
    (root / "loop").symlink_to(root / "loop")
    (root / "secret.json").write_text('{"num_hidden_layers": "planted-secret-3f9a", "num_attention_heads": 8}')
    (root / "deep.json").write_text("[" * 100_000)
    (root / "latin1.json").write_bytes(b'{"name": "caf\xe9"}')
    os.mkfifo(root / "fifo")
    return top


@pytest.fixture(scope="module")
def config_dir_server(host_files: Path) -> Iterator[str]:
    """A server reading config files from ``allowed/`` only; its base URL (the tests only ask it)."""
    with running_server("--config-dir", str(host_files / "allowed"), log=host_files / "server.log") as url:
        yield url


async def _size_from(url: str, config_path: str) -> tuple[bool, str]:
    async with Client(f"{url}/mcp") as client:
        result: Any = await client.call_tool(
            "size_offload", {"config_path": config_path, "params_total_b": 1, "kv_offloading_size_gib": 8}
        )
        return bool(result.is_error), str(result.content[0].text)


@pytest.mark.anyio
async def test_a_shared_server_reads_no_config_file_unless_given_a_directory(
    host_files: Path, default_server: str, config_dir_server: str
) -> None:
    allowed = host_files / "allowed"
    inside = allowed / "model"
    # Refused before any lookup: no '~' expanded, no name too long for the file system, no NUL.
    for path in (str(inside), "~nosuchuser/x", "a" * 300, "a\x00b"):
        failed, text = await _size_from(default_server, path)
        assert failed and text.startswith("config_path: this shared server reads no files"), text
    failed, text = await _size_from(config_dir_server, str(inside))
    assert not failed and "KV per token: 2,048 B" in text, text
    for outside in (host_files / "private", allowed / "escape", allowed / ".." / "private"):
        failed, text = await _size_from(config_dir_server, str(outside))
        assert failed and "is outside" in text, text


@pytest.mark.anyio
async def test_errors_about_config_paths_show_neither_the_config_dir_nor_what_a_file_holds(
    host_files: Path, config_dir_server: str
) -> None:
    failed, text = await _size_from(config_dir_server, "model")  # relative to the directory
    assert not failed and "KV per token: 2,048 B" in text, text
    refusals = {
        "../private": "is outside the directory this server reads config files from",
        "escape": "is outside the directory",
        "loop": "leads into a loop of symbolic links",
        "~/model": "no config.json at '~/model'",  # a shared server expands no '~'
        "a" * 300: "File name too long",
        "a\x00b": "a path cannot contain a NUL character",
        "secret.json": "config.json field 'num_hidden_layers' must be a positive integer",
        "deep.json": "nests arrays or objects too deeply",
        "latin1.json": "is not UTF-8 text",
        "fifo": "is not a regular file",
    }
    for path, expected in refusals.items():
        failed, text = await _size_from(config_dir_server, path)
        assert failed and text.startswith("config_path: ") and expected in text, (path, text)
        assert "\n" not in text and str(host_files) not in text and "planted-secret" not in text, text
        assert "Error executing" not in text, text


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("~nosuchuser/x", "config_path: '~nosuchuser/x': no home directory is known for user 'nosuchuser'"),
        ("a" * 300, "File name too long"),
        ("a\x00b", "config_path: a path cannot contain a NUL character"),
        ("/dev/zero", "config_path: '/dev/zero' is not a regular file"),
    ],
)
def test_a_config_path_the_file_system_cannot_take_is_one_line_from_the_cli(path: str, expected: str) -> None:
    arguments = json.dumps({"config_path": path, "kv_offloading_size_gib": 8})
    out = run_in_process(cli.main, "call", "size_offload", arguments)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and expected in out.stderr, out.stderr


# -- the container image ------------------------------------------------------------------------------


class _Health(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"status": "ok"}'
        self.send_response(200 if self.path == "/healthz" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_the_image_health_check_reaches_the_server_even_with_a_proxy_set() -> None:
    joined = (REPO / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    [check] = [line for line in joined.splitlines() if line.startswith("HEALTHCHECK")]
    command = json.loads(check.split(" CMD ", 1)[1])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        code = command[2].replace("127.0.0.1:8000", f"127.0.0.1:{server.server_address[1]}")
        # A proxy that refuses every connection: a check that used it would fail.
        env = {k: v for k, v in os.environ.items() if k.lower() != "no_proxy"}
        env["HTTP_PROXY"] = env["http_proxy"] = f"http://127.0.0.1:{free_port()}"
        out = subprocess.run([sys.executable, *command[1:2], code], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    finally:
        server.shutdown()
        server.server_close()
