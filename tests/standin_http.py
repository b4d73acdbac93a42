"""What the stand-in servers (GitHub, container registry) share: a canned reply and how it is sent."""

from __future__ import annotations

import dataclasses
import time
from http.server import BaseHTTPRequestHandler


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
