"""The transport behind every client of `http_client.make_http_client`.

A module of its own because its classes subclass httpx and httpcore ones, so importing it imports
httpx; `make_http_client` imports it on the first network call, keeping httpx out of start-up.

Two jobs: route each request direct or through its proxy (`RoutedTransport`), and hold every
socket operation to the deadline of the exchange in progress (`DeadlineBackend`, which the
connection pools open their connections with): a connect, a TLS handshake, a write or a read gets
at most the time left in the current `http_client.ExchangeGuard`, and the socket is registered with
the guard, which cuts it at the deadline. httpx's own timeouts restart with every byte, so this is
what keeps a peer dripping its headers from holding a call past its deadline.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from .http_client import NetworkPath, Trust, current_exchange


def _time_left(timeout: float | None, expired: type[Exception]) -> float | None:
    """``timeout`` cut to what the current exchange has left; ``expired`` raised when nothing is left."""
    guard = current_exchange()
    if guard is None:
        return timeout
    remaining = guard.remaining()
    if guard.fired or remaining <= 0:
        raise expired("the deadline passed")
    return remaining if timeout is None else min(timeout, remaining)


class DeadlineStream(httpcore.NetworkStream):
    """A connection whose every operation is bounded by the current exchange's deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def _bound(self, timeout: float | None, expired: type[Exception]) -> float | None:
        guard = current_exchange()
        if guard is not None:
            guard.watch(self._inner.get_extra_info("socket"))
        return _time_left(timeout, expired)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._bound(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._bound(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        bounded = self._bound(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, bounded))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own blocking sockets, each wrapped in a `DeadlineStream`."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _time_left(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._inner.connect_tcp(host, port, bounded, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        bounded = _time_left(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._inner.connect_unix_socket(path, bounded, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _deadline_bound_transport(verify: ssl.SSLContext | bool, proxy: httpx.URL | None) -> httpx.HTTPTransport:
    transport = httpx.HTTPTransport(verify=verify, proxy=httpx.Proxy(proxy) if proxy else None)
    # httpx builds the pool without a way to pass a network backend; the pool (httpcore's
    # ConnectionPool or HTTPProxy) opens every connection through this attribute.
    pool = transport._pool
    if not isinstance(getattr(pool, "_network_backend", None), httpcore.NetworkBackend):  # pragma: no cover
        raise RuntimeError(f"this httpcore ({httpcore.__version__}) pool takes no network backend; deadlines need one")
    pool._network_backend = DeadlineBackend()
    return transport


class RoutedTransport(httpx.BaseTransport):
    """Each request direct or through its proxy, chosen per URL: a redirect may lead to another host."""

    def __init__(self, path: NetworkPath, verify: Trust) -> None:
        self._path = path
        self._verify = verify  # a function is called when the first connection needs it
        self._transports: dict[str, httpx.HTTPTransport] = {}
        self._lock = threading.Lock()  # an httpx.Client may be shared between threads

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        proxy = self._path.proxy_for(request.url)
        key = str(proxy) if proxy is not None else ""
        with self._lock:
            transport = self._transports.get(key)
            if transport is None:
                if callable(self._verify):
                    self._verify = self._verify()
                transport = _deadline_bound_transport(self._verify, proxy)
                self._transports[key] = transport
        return transport.handle_request(request)

    def close(self) -> None:
        for transport in self._transports.values():
            transport.close()
