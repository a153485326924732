"""A total deadline for every HTTP request to a served model (connect, send, the whole answer).

httpx's timeouts (and those of httpx2, the fork the ``openai`` and ``google-genai`` SDKs
use) bound each connect, each socket write and each socket read on its own: a server
that sends its headers and then one body byte every few seconds restarts the read
timeout with every byte and holds a request for as long as it likes. A client of
:func:`deadline_client` gives every request a total deadline instead: the connection,
the request and the whole answer (headers and body) within ``timeout_s`` of the request's
start, else the request fails as a timeout (``ConnectTimeout``, ``WriteTimeout``,
``ReadTimeout`` or ``PoolTimeout`` of the stack, with :func:`deadline_message` as its
message), which the retry policy treats like any timeout.

How, without a watchdog thread or polling: ``DeadlineTransport`` is the stack's
``HTTPTransport`` whose connection pool gets a wrapped network backend. Every connect,
read, write and TLS handshake of its streams is given the time left to the deadline of
the request being served as its timeout (or its own timeout, when that is shorter) and
fails at once when no time is left. The request being served is a thread-local, set
while ``handle_request`` runs and while each piece of the response body is read (the
sync client does both in the caller's thread, and a connection serves one request at a
time), so a pooled connection obeys the deadline of the request that reuses it, and a
body read after another request began still obeys its own request's deadline. The wait
for a free connection of the pool is capped at ``timeout_s`` too. The bound is as exact
as a socket timeout, but for an upload, which is checked between 16 KiB pieces, and name
resolution (``getaddrinfo`` takes no timeout). A redirect the client follows is a new
request with a new deadline.

HTTP/1.1 only: an HTTP/2 connection carries the requests of several threads over one
socket, where one request's deadline would end the others', so ``http2=True`` is refused.

Both stacks are served: ``httpx2`` / ``httpcore2`` (:data:`DEFAULT_STACK`, what both SDKs
use by default and require) and ``httpx`` / ``httpcore``; each is imported on first use.
A new version that no longer keeps the pool's network backend at
``transport._pool._network_backend`` (as ``ConnectionPool``, ``HTTPProxy`` and
``SOCKSProxy`` do) fails loudly when the transport is built.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
import time
from collections.abc import Iterator
from types import ModuleType
from typing import Any

#: client package -> its core package
STACKS = {"httpx2": "httpcore2", "httpx": "httpcore"}
#: the stack of :func:`deadline_client` unless told otherwise (the SDKs' own)
DEFAULT_STACK = "httpx2"
#: an upload is written in pieces of this size, the deadline checked before each
WRITE_PIECE = 16 * 1024

_local = threading.local()
_END = object()


def deadline_message(timeout_s: float) -> str:
    """The message of a request that ran out of time."""
    return f"no complete answer within the request's deadline of {timeout_s:g} s (timeout_s)"


class _Deadline:
    """When one request must be done."""

    __slots__ = ("at", "timeout_s")

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.at = time.monotonic() + timeout_s

    def message(self) -> str:
        return deadline_message(self.timeout_s)


@contextlib.contextmanager
def _serving(deadline: _Deadline) -> Iterator[None]:
    """``deadline`` is the current request's in this thread for the block."""
    previous = getattr(_local, "deadline", None)
    _local.deadline = deadline
    try:
        yield
    finally:
        _local.deadline = previous


@contextlib.contextmanager
def _bounded(timeout: float | None, error: type[Exception]) -> Iterator[float | None]:
    """The timeout for one blocking operation: ``timeout``, or the time left to the
    current request's deadline when that is shorter. Raises ``error`` when the deadline
    has passed, and turns an ``error`` the deadline caused into one that says so."""
    deadline: _Deadline | None = getattr(_local, "deadline", None)
    if deadline is None:
        yield timeout
        return
    left = deadline.at - time.monotonic()
    if left <= 0:
        raise error(deadline.message())
    by_deadline = timeout is None or left <= timeout
    try:
        yield left if by_deadline else timeout
    except error as exc:
        if by_deadline:
            raise error(deadline.message()) from exc
        raise


class _Stream:
    """A network stream whose every operation ends by the current request's deadline."""

    def __init__(self, stream: Any, core: ModuleType) -> None:
        self._stream = stream
        self._core = core

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        with _bounded(timeout, self._core.ReadTimeout) as bound:
            return self._stream.read(max_bytes, bound)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return self._stream.write(buffer, timeout)
        for start in range(0, len(buffer), WRITE_PIECE):
            with _bounded(timeout, self._core.WriteTimeout) as bound:
                self._stream.write(buffer[start : start + WRITE_PIECE], bound)
        return None

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> _Stream:
        with _bounded(timeout, self._core.ConnectTimeout) as bound:
            stream = self._stream.start_tls(ssl_context, server_hostname, bound)
        return _Stream(stream, self._core)

    def close(self) -> None:
        self._stream.close()

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _Backend:
    """A network backend whose connects end by the current request's deadline and whose
    streams are :class:`_Stream`."""

    def __init__(self, backend: Any, core: ModuleType) -> None:
        self.wrapped = backend
        self._core = core

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, **kw: Any) -> Any:
        with _bounded(timeout, self._core.ConnectTimeout) as bound:
            stream = self.wrapped.connect_tcp(host, port, timeout=bound, **kw)
        return _Stream(stream, self._core)

    def connect_unix_socket(self, path: str, timeout: float | None = None, **kw: Any) -> Any:
        with _bounded(timeout, self._core.ConnectTimeout) as bound:
            stream = self.wrapped.connect_unix_socket(path, timeout=bound, **kw)
        return _Stream(stream, self._core)

    def sleep(self, seconds: float) -> None:
        self.wrapped.sleep(seconds)


class _DeadlineBody:
    """A response body whose reads run under its request's deadline (mixed into the
    stack's ``SyncByteStream``)."""

    def __init__(self, stream: Any, deadline: _Deadline) -> None:
        self._stream = stream
        self._deadline = deadline

    def __iter__(self) -> Iterator[bytes]:
        pieces = iter(self._stream)
        while True:
            with _serving(self._deadline):
                piece = next(pieces, _END)
            if piece is _END:
                return
            yield piece

    def close(self) -> None:
        with _serving(self._deadline):
            self._stream.close()


class _DeadlineTransportMixin:
    """The stack's ``HTTPTransport`` with a total deadline of ``timeout_s`` seconds on
    every request (connect, send, the whole answer), built as
    ``DeadlineTransport(timeout_s, **HTTPTransport arguments)`` (module docstring)."""

    _http: ModuleType
    _core: ModuleType
    _body_class: type
    timeout_s: float

    def __init__(self, timeout_s: float, **kwargs: Any) -> None:
        if not timeout_s > 0:
            raise ValueError(f"a request deadline must be > 0 seconds, got {timeout_s!r}")
        if kwargs.get("http2"):
            raise ValueError(
                "the request deadline supports HTTP/1.1 only (an HTTP/2 connection is "
                "shared by the requests of several threads); leave http2 off"
            )
        super().__init__(**kwargs)
        self.timeout_s = float(timeout_s)
        pool = getattr(self, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None:
            raise RuntimeError(
                f"{type(self).__name__}: this version of {self._core.__name__} keeps no "
                "network backend at transport._pool._network_backend, so the request "
                "deadline cannot be installed; vlmrobust/clients/deadline.py needs "
                "updating for it"
            )
        pool._network_backend = _Backend(backend, self._core)

    def handle_request(self, request: Any) -> Any:
        deadline = _Deadline(self.timeout_s)
        timeouts = dict(request.extensions.get("timeout") or {})
        pool = timeouts.get("pool")
        capped = pool is None or pool >= self.timeout_s  # the deadline bounds the pool wait
        timeouts["pool"] = self.timeout_s if capped else pool
        request.extensions = {**request.extensions, "timeout": timeouts}
        try:
            with _serving(deadline):
                response = super().handle_request(request)
        except self._http.PoolTimeout as exc:
            if capped:
                raise self._http.PoolTimeout(deadline.message()) from exc
            raise
        response.stream = self._body_class(response.stream, deadline)
        return response


@functools.cache
def _stack(name: str) -> tuple[type, type]:
    """The deadline transport and client classes of the stack ``name``."""
    if name not in STACKS:
        raise ValueError(f"unknown HTTP stack {name!r}; one of {', '.join(STACKS)}")
    http = importlib.import_module(name)
    core = importlib.import_module(STACKS[name])
    body = type("DeadlineBody", (_DeadlineBody, http.SyncByteStream), {"__module__": __name__})
    transport = type(
        "DeadlineTransport",
        (_DeadlineTransportMixin, http.HTTPTransport),
        {"__module__": __name__, "_http": http, "_core": core, "_body_class": body},
    )

    class DeadlineClient(http.Client):
        """The stack's ``Client`` whose transports (the default one and any proxy's,
        from ``proxy=`` or the environment) are all deadline transports."""

        def __init__(self, *, timeout_s: float, **kwargs: Any) -> None:
            self.timeout_s = float(timeout_s)
            super().__init__(**kwargs)

        def _init_transport(self, **kwargs: Any) -> Any:
            if kwargs.pop("transport", None) is not None:
                raise ValueError("a deadline client builds its own transport")
            return transport(self.timeout_s, **kwargs)

        def _init_proxy_transport(self, proxy: Any, **kwargs: Any) -> Any:
            return transport(self.timeout_s, proxy=proxy, **kwargs)

    return transport, DeadlineClient


def transport_class(stack: str = DEFAULT_STACK) -> type:
    """``DeadlineTransport`` of ``stack`` (``"httpx2"`` or ``"httpx"``): a subclass of
    the stack's ``HTTPTransport``."""
    return _stack(stack)[0]


def __getattr__(name: str) -> Any:
    """``DeadlineTransport``: the transport of :data:`DEFAULT_STACK` (built on first use,
    so importing this module imports no HTTP stack)."""
    if name == "DeadlineTransport":
        return transport_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def deadline_client(timeout_s: float, *, stack: str = DEFAULT_STACK, **kwargs: Any) -> Any:
    """A sync HTTP client of ``stack`` whose every request must be done (connected, sent,
    answered to the last byte) within ``timeout_s`` seconds; for an SDK's
    ``http_client`` / ``httpx_client``. ``kwargs`` go to the stack's ``Client`` (its
    ``timeout``, the per-operation timeouts, defaults to ``timeout_s``, and
    ``follow_redirects`` to True, as the SDKs' own clients have it); a ``transport``
    is refused, proxies (``proxy=`` or the environment's) get deadline transports too.
    Raises RuntimeError when a transport of the client is not a deadline transport
    (a new version of the stack built one some other way)."""
    kwargs.setdefault("timeout", timeout_s)
    kwargs.setdefault("follow_redirects", True)  # as both SDKs' own clients
    transport, client_class = _stack(stack)
    client = client_class(timeout_s=timeout_s, **kwargs)
    transports = [client._transport, *client._mounts.values()]
    stray = [t for t in transports if t is not None and not isinstance(t, transport)]
    if stray:
        client.close()
        raise RuntimeError(
            f"the {stack} client built {type(stray[0]).__name__} transports without the "
            "request deadline; vlmrobust/clients/deadline.py needs updating for this version"
        )
    return client
