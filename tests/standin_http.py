"""What the stand-in servers (GitHub, container registry, proxy, package index) share: starting and
stopping one on a free loopback port, and a canned reply and how it is sent."""

from __future__ import annotations

import dataclasses
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve(
    handler: type[BaseHTTPRequestHandler],
    *,
    server_class: type[ThreadingHTTPServer] = ThreadingHTTPServer,
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


def send_reply(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
    """Write ``reply`` after its delay; a client that gave up (timeout, oversized body) is what a test wanted."""
    if reply.delay:
        time.sleep(reply.delay)
    try:
        handler.send_response(reply.status)
        for key, value in reply.headers.items():
            handler.send_header(key, value)
        if reply.no_length:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        else:
            handler.send_header("Content-Length", str(len(reply.body)))
        handler.end_headers()
        handler.wfile.write(reply.body)
    except (BrokenPipeError, ConnectionResetError):
        pass
