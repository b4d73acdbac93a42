"""Over stdio, every request gets an answer, whatever its strings hold.

An attack run sent a tools/call whose argument was the JSON escape ``"\\ud800"``: a lone surrogate,
which no UTF-8 text can hold. The SDK's validation refused the line and dropped it without a reply,
so the client waited for ever. The server now reads such an escape as U+FFFD, the replacement
character (as the SDK already does for bytes that are not UTF-8), and answers.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys

import pytest

from vllm_caching_mcp.stdio_input import without_lone_surrogates


@pytest.mark.parametrize(
    ("line", "read"),
    [
        (r'{"a": "\ud800"}', r'{"a": "\ufffd"}'),
        (r'{"a": "x\udfffy"}', r'{"a": "x\ufffdy"}'),
        (r'{"a": "\ud83d\ude00"}', r'{"a": "\ud83d\ude00"}'),  # a pair: 😀
        (r'{"a": "\\ud800"}', r'{"a": "\\ud800"}'),  # an escaped backslash, then text
        (r'{"a": "\\\ud800"}', r'{"a": "\\\ufffd"}'),
        (r'{"a": "\ude00\ud83d"}', r'{"a": "\ufffd\ufffd"}'),  # a pair the wrong way round
        (r'{"a": "\u00e9"}', r'{"a": "\u00e9"}'),
    ],
)
def test_lone_surrogate_escapes_become_the_replacement_character(line: str, read: str) -> None:
    assert without_lone_surrogates(line) == read
    json.loads(read).get("a").encode("utf-8")  # what is left is UTF-8 text


def test_a_request_with_a_lone_surrogate_is_answered_over_stdio() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm_caching_mcp.mcp_server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert server.stdin is not None and server.stdout is not None

    def send(line: str) -> None:
        server.stdin.write(line.encode() + b"\n")  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]

    def reply() -> dict[str, object]:
        ready, _, _ = select.select([server.stdout], [], [], 60)
        assert ready, "no reply within 60 s"
        return dict(json.loads(server.stdout.readline()))  # type: ignore[union-attr]

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}))
        assert reply()["id"] == 1
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "check_version"}}
        send(json.dumps(call)[:-2] + r', "arguments": {"name": "\ud800"}}}')
        answer = reply()
        assert answer["id"] == 2 and "\ufffd" in json.dumps(answer["result"], ensure_ascii=False)
    finally:
        server.kill()
        server.wait()
