"""A forward proxy on 127.0.0.1, standing in for a site's HTTP proxy.

Plain-http requests arrive in absolute form and are relayed; https arrives as CONNECT and is tunnelled
byte for byte, so the proxy sees the target's host and port but nothing inside TLS. Every request is
recorded (with the raw bytes of the request head) so a test can say what the proxy saw. With
``credentials`` set, a request without the matching ``Proxy-Authorization`` gets 407.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import http.client
import select
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from standin_http import serve, stop_server


@dataclasses.dataclass
class Seen:
    method: str
    target: str
    head: str  # the request line and headers, as received


class FakeProxy:
    def __init__(self, *, credentials: str | None = None) -> None:
        self.credentials = credentials  # "user:password"
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.address = ""  # host:port once started

    def start(self) -> str:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_CONNECT(self) -> None:
                if proxy._admit(self):
                    proxy._tunnel(self)

            def do_GET(self) -> None:
                if proxy._admit(self):
                    proxy._relay(self, "GET")

            def do_POST(self) -> None:
                if proxy._admit(self):
                    proxy._relay(self, "POST")

        self._server = serve(Handler)
        self.address = f"127.0.0.1:{self._server.server_address[1]}"
        return self.address

    def stop(self) -> None:
        stop_server(self._server)
        self._server = None

    def __enter__(self) -> FakeProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def everything_seen(self) -> str:
        return "\n".join(s.head for s in self.seen)

    # -- serving ---------------------------------------------------------------------------------

    def _admit(self, handler: BaseHTTPRequestHandler) -> bool:
        with self._lock:
            self.seen.append(Seen(handler.command, handler.path, f"{handler.requestline}\n{handler.headers}"))
        if self.credentials is None:
            return True
        expected = "Basic " + base64.b64encode(self.credentials.encode()).decode()
        if handler.headers.get("Proxy-Authorization") == expected:
            return True
        handler.send_response(407)
        handler.send_header("Proxy-Authenticate", 'Basic realm="site proxy"')
        handler.send_header("Content-Length", "0")
        handler.end_headers()
        handler.close_connection = True
        return False

    def _relay(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("proxy-authorization", "host")}
        upstream = http.client.HTTPConnection(url.hostname or "", url.port or 80, timeout=10)
        try:
            path = url.path + (f"?{url.query}" if url.query else "")
            upstream.request(method, path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
        finally:
            upstream.close()
        handler.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _tunnel(self, handler: BaseHTTPRequestHandler) -> None:
        host, _, port = handler.path.rpartition(":")
        try:
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
        except OSError:
            handler.send_error(502)
            return
        handler.send_response(200, "Connection established")
        handler.end_headers()
        client = handler.connection
        with upstream, contextlib.suppress(OSError):
            while True:
                readable, _, _ = select.select([client, upstream], [], [], 10)
                if not readable:
                    return
                for source in readable:
                    data = source.recv(65536)
                    if not data:
                        return
                    (upstream if source is client else client).sendall(data)
        handler.close_connection = True
