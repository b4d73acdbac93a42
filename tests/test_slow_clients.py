"""Slow HTTP clients cannot hold the server: header and idle timeouts, and a cap on open connections.

An attack run held 1,000 connections open for a minute by sending half a request's headers; with
a 256 open-file limit, 300 of them left no file for a real client. uvicorn's h11 protocol times
out only idle keep-alive connections, and any byte resets that timer. Here, with real sockets on
127.0.0.1 and short limits set for the test: connections that trickle their headers, or stop in
the middle of a body, are closed within the timeout while real requests are served; at the cap a
new connection takes the place of the slow one that has waited longest, and when every
connection is busy it is answered 503 and closed at once. A second attack run held every slot with
bodies that came a byte every 3 s (each byte well inside the idle timeout) behind a large
Content-Length, and a 401 left the connection reading the body: a body now has a total deadline and
a minimum average rate, and every refusal closes its connection.
"""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from conftest import running_server
from vllm_caching_mcp.http_transport import MAX_REQUEST_BODY_BYTES

TIMEOUT = 1  # each test below waits this long for the server to close a slow connection
SLACK = 8  # how much later than its timeout a loaded 2-core machine may close a connection
BODY_TIMEOUT = 4
MIN_RATE = 200  # bytes a second
LIMITS = (
    "--header-timeout", str(TIMEOUT), "--idle-timeout", str(TIMEOUT), "--max-connections", "40",
    "--body-timeout", str(BODY_TIMEOUT), "--min-body-rate", str(MIN_RATE),
)  # fmt: skip
INITIALIZE = (
    b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", '
    b'"capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}'
)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _seconds_until_closed(
    sockets: list[socket.socket], *, trickle: bytes = b"", within: float, every: float = 0.25
) -> list[float]:
    """How long the server took to close each socket (reading whatever it sends first), sending
    ``trickle`` on each still-open socket every ``every`` seconds meanwhile."""
    started = time.monotonic()
    waiting = list(sockets)
    closed: list[float] = []
    while waiting and time.monotonic() - started < within:
        readable, _, _ = select.select(waiting, [], [], every)
        for sock in readable:
            try:
                data = sock.recv(65536)
            except ConnectionError:
                data = b""
            if not data:
                closed.append(time.monotonic() - started)
                waiting.remove(sock)
        for sock in list(waiting) if trickle else []:
            with contextlib.suppress(OSError):  # closed by the server: the next select reads the end
                sock.send(trickle)
    for sock in sockets:
        sock.close()
    return closed


_BODY_TO_COME = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{"
)


def _read_to_end(sock: socket.socket) -> bytes:
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    return reply


def _initialize(url: str) -> int:
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    return httpx.post(f"{url}/mcp", content=INITIALIZE, headers=headers, timeout=30).status_code


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server with short limits for the tests below; yields its base URL."""
    with running_server(*LIMITS, log=tmp_path_factory.mktemp("slow-clients") / "server.log") as url:
        yield url


def test_connections_that_trickle_their_headers_are_closed_while_real_requests_are_served(guarded: str) -> None:
    slow = [_connect(_port(guarded)) for _ in range(30)]
    for sock in slow:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    # While they hold their connections, a real client is served.
    assert httpx.get(f"{guarded}/healthz", timeout=30).status_code == 200
    assert _initialize(guarded) == 200
    closed = _seconds_until_closed(slow, trickle=b"a", within=TIMEOUT + SLACK)
    assert len(closed) == len(slow), f"{len(slow) - len(closed)} of {len(slow)} slow connections still open"
    assert _initialize(guarded) == 200


def test_a_kept_alive_connection_that_trickles_its_next_request_is_closed(guarded: str) -> None:
    sock = _connect(_port(guarded))
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
    # Each byte reset uvicorn's own keep-alive timer; the header timeout runs from the response.
    assert len(_seconds_until_closed([sock], trickle=b"G", within=TIMEOUT + SLACK)) == 1


def test_a_request_whose_body_stops_coming_is_closed(guarded: str) -> None:
    sock = _connect(_port(guarded))
    sock.sendall(_BODY_TO_COME)
    assert len(_seconds_until_closed([sock], within=TIMEOUT + SLACK)) == 1
    assert _initialize(guarded) == 200


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server with room for 8 connections and timeouts too long to close any during a test, so that
    only the cap closes or refuses one; yields its base URL. A connection a test leaves behind is
    older than the next test's, so it is the one evicted first."""
    args = ("--max-connections", "8", "--header-timeout", "60", "--idle-timeout", "60")
    with running_server(*args, log=tmp_path_factory.mktemp("capped") / "server.log") as url:
        yield url


def test_at_the_cap_a_new_connection_replaces_the_longest_waiting_slow_one(capped: str) -> None:
    held = [_connect(_port(capped)) for _ in range(8)]
    for sock in held:  # a request line each, never the rest
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        time.sleep(0.05)  # so the first is the longest-waiting one
    time.sleep(0.3)
    assert httpx.get(f"{capped}/healthz", timeout=30).status_code == 200
    assert _read_to_end(held[0]) == b""  # closed to make room
    for sock in held:
        sock.close()


def test_when_every_connection_is_busy_another_is_answered_503_and_closed_at_once(capped: str) -> None:
    busy = [_connect(_port(capped)) for _ in range(8)]
    for sock in busy:  # each in the middle of a request body: not to be evicted
        sock.sendall(_BODY_TO_COME)
    time.sleep(0.5)
    extra = _connect(_port(capped))
    reply = _read_to_end(extra)
    extra.close()
    assert reply.startswith(b"HTTP/1.1 503 ") and b"too many open connections" in reply, reply
    for sock in busy:
        sock.close()
    # Once those are gone, the server takes connections again.
    deadline = time.monotonic() + SLACK
    while True:
        try:
            if httpx.get(f"{capped}/healthz", timeout=5).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the server did not take connections again"
        time.sleep(0.1)


_LONG_BODY_TO_COME = _BODY_TO_COME.replace(b"Content-Length: 1000", b"Content-Length: 10000000")


def test_bodies_that_come_a_byte_at_a_time_are_cut_off_while_real_requests_are_served(guarded: str) -> None:
    slow = [_connect(_port(guarded)) for _ in range(33)]
    for sock in slow:
        sock.sendall(_LONG_BODY_TO_COME)
    # A byte every 0.3 s resets the idle timeout every time; the average rate is what cuts them off.
    assert httpx.get(f"{guarded}/healthz", timeout=30).status_code == 200
    closed = _seconds_until_closed(slow, trickle=b" ", within=BODY_TIMEOUT + SLACK, every=0.3)
    assert min(closed) > 1.0, "closed before the rate was measured: not by the rate"
    assert len(closed) == len(slow), f"{len(slow) - len(closed)} of {len(slow)} dripping bodies still open"
    assert max(closed) < BODY_TIMEOUT, f"closed after {max(closed):.1f} s: by the total deadline, not the rate"
    assert _initialize(guarded) == 200


def test_a_body_above_the_rate_is_still_cut_off_at_the_total_deadline(guarded: str) -> None:
    sock = _connect(_port(guarded))
    sock.sendall(_LONG_BODY_TO_COME)
    [closed] = _seconds_until_closed([sock], trickle=b" " * (MIN_RATE // 2), within=BODY_TIMEOUT + SLACK, every=0.1)
    assert BODY_TIMEOUT - 0.5 <= closed < BODY_TIMEOUT + SLACK


def test_a_declared_body_over_the_cap_is_refused_and_the_connection_closed(guarded: str) -> None:
    sock = _connect(_port(guarded))
    sock.sendall(_BODY_TO_COME.replace(b"Content-Length: 1000", b"Content-Length: %d" % (MAX_REQUEST_BODY_BYTES + 1)))
    reply = _read_to_end(sock)  # returns at the server's close: no body was waited for
    sock.close()
    assert reply.startswith(b"HTTP/1.1 413 ") and b"connection: close" in reply.lower(), reply


@pytest.fixture(scope="module")
def with_token(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {"SLOW_CLIENTS_TOKEN": "t" * 32}
    args = ("--auth-token-env", "SLOW_CLIENTS_TOKEN", "--idle-timeout", "60", "--body-timeout", "60")
    with running_server(*args, env=env, log=tmp_path_factory.mktemp("token") / "server.log") as url:
        yield url


def test_a_refused_request_closes_its_connection_without_reading_the_body(with_token: str) -> None:
    sock = _connect(_port(with_token))
    sock.settimeout(5)
    sock.sendall(_LONG_BODY_TO_COME)
    started = time.monotonic()
    reply = _read_to_end(sock)
    sock.close()
    assert reply.startswith(b"HTTP/1.1 401 ") and b"connection: close" in reply.lower(), reply
    assert time.monotonic() - started < 5
