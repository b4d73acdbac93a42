"""What the stand-in servers (GitHub, container registry, proxy, package index) share: starting and
stopping one on a free loopback port, and a canned reply and how it is sent."""

from __future__ import annotations

import dataclasses
import functools
import gzip
import ssl
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

DRIP_INTERVAL = 0.1  # seconds per byte of a dripped part: 10 bytes/s, ten bytes inside a one-second deadline
DRIP_LIMIT = 60.0  # a drip nobody reads any more stops after this long
# A dripped head carries this much filler, so that it lasts DRIP_LIMIT: far past any deadline in the suite.
DRIP_HEAD_FILLER = int(DRIP_LIMIT / DRIP_INTERVAL)


# 1 GiB of zeros gzipped twice: 1,827 bytes (made once with zlib at level 9; shipped, since making it takes seconds).
STACKED_GZIP_BOMB = Path(__file__).parent / "data" / "hostile" / "zeros-1GiB.gz.gz"
BOMB_DECODED_BYTES = 1 << 30


@functools.cache
def gzip_bombs() -> dict[str, tuple[bytes, str]]:
    """Bodies that are small on the wire and huge decoded, with the Content-Encoding each is sent under."""
    stacked = STACKED_GZIP_BOMB.read_bytes()
    one_layer = zlib.decompress(stacked, 16 + zlib.MAX_WBITS)  # about 1 MB: under any body cap of the clients
    return {"stacked gzip bomb": (stacked, "gzip, gzip"), "gzip bomb": (one_layer, "gzip")}


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


# What a handler meets when its client has hung up: a reset, a closed pipe, or over TLS an EOF.
HUNG_UP = (ConnectionResetError, BrokenPipeError, ssl.SSLEOFError)


class StandinServer(ThreadingHTTPServer):
    """A threading HTTP server that says nothing when a client hangs up on it.

    Clients that give up (at their deadline, on an oversized body, on a reset) are what many tests
    want; the socketserver default prints each such error as a traceback from the handler's thread,
    into whatever output is being captured at the time. Any other error is still printed."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], HUNG_UP):
            super().handle_error(request, client_address)


def serve(
    handler: type[BaseHTTPRequestHandler],
    *,
    server_class: type[ThreadingHTTPServer] = StandinServer,
    tls: ssl.SSLContext | None = None,
) -> ThreadingHTTPServer:
    """A server on a free 127.0.0.1 port, answering on a daemon thread (TLS with ``tls``)."""
    server = server_class(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    # a short poll interval: stop_server waits for serve_forever to notice, once per test
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def stop_server(server: ThreadingHTTPServer | None) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()


@dataclasses.dataclass
class Reply:
    status: int = 200
    body: bytes = b"{}"
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    delay: float = 0.0
    no_length: bool = False  # close-delimited body without Content-Length
    drip: Literal["head", "body"] | None = None  # send the status line and headers, or the body, byte by byte
    truncated: bool = False  # declare the whole body's length, send half of it, hang up


def send_reply(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
    """Write ``reply`` after its delay; a client that gave up (timeout, oversized body) is what a test wanted."""
    if reply.delay:
        time.sleep(reply.delay)
    body = reply.body[: len(reply.body) // 2] if reply.truncated else reply.body
    try:
        head = _head(handler, reply)
        if reply.drip == "head":
            _drip(handler, head)
        else:
            handler.wfile.write(head)
        if reply.drip == "body":
            _drip(handler, body)
        else:
            handler.wfile.write(body)
    except HUNG_UP:
        handler.close_connection = True
    if reply.truncated:
        handler.close_connection = True


def _head(handler: BaseHTTPRequestHandler, reply: Reply) -> bytes:
    """The status line and headers, as bytes to send (not through send_response, which writes them at once)."""
    phrase = handler.responses.get(reply.status, ("",))[0]
    lines = [f"HTTP/1.1 {reply.status} {phrase}"]
    lines += [f"{key}: {value}" for key, value in reply.headers.items()]
    if reply.drip == "head":
        lines.append("X-Filler: " + "x" * DRIP_HEAD_FILLER)
    if reply.no_length:
        lines.append("Connection: close")
        handler.close_connection = True
    else:
        lines.append(f"Content-Length: {len(reply.body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _drip(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    """One byte every DRIP_INTERVAL: each arrives well inside any read timeout, the whole takes up to a minute."""
    stop_at = time.monotonic() + DRIP_LIMIT
    for index in range(len(data)):
        if time.monotonic() > stop_at:
            handler.close_connection = True
            return
        handler.wfile.write(data[index : index + 1])
        time.sleep(DRIP_INTERVAL)
