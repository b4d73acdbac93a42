"""The transport behind every client of `http_client.make_http_client`.

A module of its own because the class subclasses `httpx.BaseTransport`, so importing it imports
httpx; `make_http_client` imports it on the first network call, keeping httpx out of start-up.
"""

from __future__ import annotations

import ssl
import threading

import httpx

from .http_client import NetworkPath


class RoutedTransport(httpx.BaseTransport):
    """Each request direct or through its proxy, chosen per URL: a redirect may lead to another host."""

    def __init__(self, path: NetworkPath, verify: ssl.SSLContext | bool) -> None:
        self._path = path
        self._verify = verify
        self._transports: dict[str, httpx.HTTPTransport] = {}
        self._lock = threading.Lock()  # an httpx.Client may be shared between threads

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        proxy = self._path.proxy_for(request.url)
        key = str(proxy) if proxy is not None else ""
        with self._lock:
            transport = self._transports.get(key)
            if transport is None:
                transport = httpx.HTTPTransport(verify=self._verify, proxy=httpx.Proxy(proxy) if proxy else None)
                self._transports[key] = transport
        return transport.handle_request(request)

    def close(self) -> None:
        for transport in self._transports.values():
            transport.close()
