"""A flaky or hostile GitHub never stalls an agent or leaks its token.

check_bug_status is called the way the server calls it (`tools.run_tool`, settings from the
environment), against the stand-in GitHub on 127.0.0.1 scripted to misbehave on every request:
slow replies, connection resets, a storm of 5xx, 403 and 429 rate limits whose reset is an hour
away, malformed JSON and bodies larger than the client reads. Every call must return within its
deadline (plus a little for Python) with the tracked bug's stored snapshot, and the planted
token must appear in no result, summary or log line — even when the server echoes it back.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from github_standin import FakeGitHub, Reply
from vllm_caching_mcp.knowledge import Knowledge
from vllm_caching_mcp.tools import run_tool

TOKEN = "ghp_PLANTEDfaultTOKEN0123456789abcdefXYZ"
BUG = "vllm-project/vllm#40259"
DEADLINE = 3.0
SLACK = 1.5  # interpreter and thread scheduling on a loaded CI machine
PATHS = ("/graphql", "/repos/vllm-project/vllm/issues/40259", "/repos/vllm-project/vllm/issues/40259/timeline")
HOUR = str(int(time.time()) + 3600)

FAULTS: dict[str, list[Reply]] = {
    "slow": [Reply(200, b"{}", delay=DEADLINE + 5)] * 3,
    "5xx storm": [Reply(503, b"unavailable")] * 40,
    "403 rate limit": [Reply(403, b"{}", {"x-ratelimit-remaining": "0", "x-ratelimit-reset": HOUR})] * 10,
    "429 retry-after": [Reply(429, b"{}", {"retry-after": "3600", "x-ratelimit-reset": HOUR})] * 10,
    "malformed JSON": [Reply(200, b'{"data": {"repository": ')] * 10,
    "oversized body": [Reply(200, b"[" + b"0," * (3 * 1024 * 1024) + b"0]")] * 3,
    "oversized, no length": [Reply(200, b" " * (5 * 1024 * 1024) + b"{}", no_length=True)] * 3,
}


@pytest.fixture
def environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("VLLM_CACHING_MCP_CACHE_DIR", str(tmp_path / "cache"))
    yield


def ask_within_deadline() -> tuple[dict[str, object], str, float]:
    start = time.monotonic()
    result = run_tool("check_bug_status", {"bugs": [BUG], "deadline_seconds": DEADLINE})
    return result.model_dump(mode="json"), result.summary(), time.monotonic() - start


def assert_snapshot_without_token(data: dict[str, object], summary: str, logs: str) -> None:
    [bug] = data["bugs"]  # type: ignore[misc]
    assert bug["provenance"]["source"] == "snapshot", bug["provenance"]
    assert bug["state"] is not None
    for text in (str(data), summary, logs):
        assert TOKEN not in text


@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
def test_a_misbehaving_github_gives_the_snapshot_within_the_deadline(
    fault: str,
    knowledge: Knowledge,
    environment: None,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    github = FakeGitHub.from_knowledge(knowledge)
    github.reflect_authorization = True
    for path in PATHS:
        github.script(path, *FAULTS[fault])
    monkeypatch.setenv("VLLM_CACHING_MCP_GITHUB_API", github.start())
    try:
        data, summary, elapsed = ask_within_deadline()
    finally:
        github.stop()
    assert github.requests, "the fault was never reached: the call did not go to the stand-in"
    assert elapsed < DEADLINE + SLACK, f"{fault}: {elapsed:.1f} s"
    assert_snapshot_without_token(data, summary, caplog.text)


@pytest.fixture
def resetting_server() -> Iterator[str]:
    """Accepts each connection and resets it (RST, not FIN) at once."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join(timeout=2)
    listener.close()


def test_connection_resets_give_the_snapshot_within_the_deadline(
    resetting_server: str, environment: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("VLLM_CACHING_MCP_GITHUB_API", resetting_server)
    data, summary, elapsed = ask_within_deadline()
    assert elapsed < DEADLINE + SLACK, f"{elapsed:.1f} s"
    assert_snapshot_without_token(data, summary, caplog.text)
