"""Every request to a served model has a total deadline (vlmrobust.clients.deadline):
connect, send and the whole answer within ``timeout_s``, however the server trickles its
bytes; on real sockets against local servers, through both HTTP stacks and the SDKs."""

from __future__ import annotations

import contextlib
import importlib
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.api_server import FakeAPIServer
from vlmrobust.clients import deadline
from vlmrobust.clients.chat import Decoding
from vlmrobust.clients.image_edit import GeminiImageEditor, OpenAIImageEditor
from vlmrobust.clients.vlm.base import Request
from vlmrobust.clients.vlm.gemini_api import GeminiBackend, GeminiChat
from vlmrobust.clients.vlm.openai_api import OpenAIBackend, OpenAIChat

STACKS = list(deadline.STACKS)
KEY_ENV = "VLMROBUST_TEST_DEADLINE_KEY"


class _Handler(BaseHTTPRequestHandler):
    """``?hold=S`` waits S seconds before the headers; then ``n`` body bytes (4), one
    every ``gap`` seconds (0). Each request's client address is recorded."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format, *args):  # noqa: A002 - stdlib name
        pass

    def handle(self):
        with contextlib.suppress(OSError):  # a client that gave up and closed
            super().handle()

    def do_GET(self):  # noqa: N802 - stdlib name
        query = {k: float(v[0]) for k, v in parse_qs(urlsplit(self.path).query).items()}
        self.server.peers.append(self.client_address)
        if self.server.stop.wait(query.get("hold", 0.0)):
            return
        n = int(query.get("n", 4))
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            for _ in range(n):
                self.wfile.write(b"x")
                self.wfile.flush()
                if self.server.stop.wait(query.get("gap", 0.0)):
                    return
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.peers: list[tuple[str, int]] = []
        self.stop = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02})
    thread.daemon = True
    thread.start()
    try:
        yield srv
    finally:
        srv.stop.set()
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that listens but never accepts: connecting works (the kernel's backlog),
    nothing is ever read or answered."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def timed(fn):
    start = time.monotonic()
    try:
        return fn(), time.monotonic() - start
    except Exception as exc:  # noqa: BLE001 - returned for the test to check
        return exc, time.monotonic() - start


# --- the transport, both stacks --------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_a_trickling_body_ends_at_the_deadline(stack, server):
    """Headers at once, then a byte every 0.3 s: each read is quick, the whole is not."""
    http = importlib.import_module(stack)
    with deadline.deadline_client(1, stack=stack) as client:
        error, took = timed(lambda: client.get(f"{server.url}/?n=100&gap=0.3"))
    assert isinstance(error, http.ReadTimeout), error
    assert str(error) == "no complete answer within the request's deadline of 1 s (timeout_s)"
    assert 0.95 <= took < 1.5


@pytest.mark.parametrize("stack", STACKS)
def test_a_slow_answer_within_the_deadline_succeeds(stack, server):
    with deadline.deadline_client(2, stack=stack) as client:
        response, took = timed(lambda: client.get(f"{server.url}/?hold=0.4&n=4&gap=0.15"))
    assert response.status_code == 200 and response.content == b"xxxx"
    assert 0.8 <= took < 2  # the hold and three gaps


@pytest.mark.parametrize("stack", STACKS)
def test_a_server_that_never_answers_or_never_accepts_is_bounded(stack, server, silent_port):
    http = importlib.import_module(stack)
    # the per-operation timeouts are longer: only the deadline can end these
    with deadline.deadline_client(0.8, stack=stack, timeout=30) as client:
        held, took_held = timed(lambda: client.get(f"{server.url}/?hold=10"))
        silent, took_silent = timed(lambda: client.get(f"http://127.0.0.1:{silent_port}/"))
    for error, took in ((held, took_held), (silent, took_silent)):
        assert isinstance(error, http.ReadTimeout), error
        assert "deadline of 0.8 s" in str(error)
        assert 0.75 <= took < 1.3


@pytest.mark.parametrize("stack", STACKS)
def test_an_upload_nobody_reads_is_bounded(stack, silent_port):
    http = importlib.import_module(stack)
    body = b"x" * (64 << 20)  # more than the socket buffers hold
    with deadline.deadline_client(0.8, stack=stack, timeout=30) as client:
        error, took = timed(lambda: client.post(f"http://127.0.0.1:{silent_port}/", content=body))
    assert isinstance(error, http.WriteTimeout), error
    assert "deadline of 0.8 s" in str(error)
    assert 0.75 <= took < 1.5


@pytest.mark.parametrize("stack", STACKS)
def test_the_deadline_is_per_request_on_a_reused_connection(stack, server):
    """Two requests, one connection, one thread: the second has its own deadline, even
    after the first's has passed; a body read after another request began keeps its own
    request's deadline."""
    http = importlib.import_module(stack)
    with deadline.deadline_client(0.6, stack=stack) as client:
        assert client.get(f"{server.url}/?n=2").content == b"xx"
        time.sleep(0.8)  # the first request's deadline is long gone
        assert client.get(f"{server.url}/?n=3&gap=0.1").content == b"xxx"
        assert len(server.peers) == 2 and server.peers[0] == server.peers[1]  # reused
        start = time.monotonic()
        with client.stream("GET", f"{server.url}/?n=100&gap=0.2") as slow:
            assert client.get(f"{server.url}/?n=1").content == b"x"  # another request
            with pytest.raises(http.ReadTimeout, match="deadline of 0.6 s"):
                slow.read()
        assert time.monotonic() - start < 1.0


@pytest.mark.parametrize("stack", STACKS)
def test_the_wait_for_a_pooled_connection_is_bounded(stack, server):
    http = importlib.import_module(stack)
    limits = http.Limits(max_connections=1, max_keepalive_connections=1)
    client = deadline.deadline_client(0.6, stack=stack, timeout=30, limits=limits)
    with client, client.stream("GET", f"{server.url}/?n=100&gap=0.2"):  # holds the connection
        error, took = timed(lambda: client.get(f"{server.url}/?n=1"))
    assert isinstance(error, http.PoolTimeout), error
    assert "deadline of 0.6 s" in str(error)
    assert 0.55 <= took < 1.1


@pytest.mark.parametrize("stack", STACKS)
def test_every_transport_of_the_client_has_the_deadline(stack, monkeypatch):
    """The default transport and the proxies' (given or from the environment) alike."""
    transport_class = deadline.transport_class(stack)
    http = importlib.import_module(stack)
    assert issubclass(transport_class, http.HTTPTransport)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    with deadline.deadline_client(5, stack=stack) as client:
        transports = [client._transport, *client._mounts.values()]
    with deadline.deadline_client(5, stack=stack, proxy="http://127.0.0.1:9") as client:
        transports += [client._transport, *client._mounts.values()]
    assert len(transports) >= 4
    for transport in transports:
        assert isinstance(transport, transport_class) and transport.timeout_s == 5
        assert isinstance(transport._pool._network_backend, deadline._Backend)
    assert deadline.DeadlineTransport is deadline.transport_class()


def test_a_stack_without_the_network_backend_fails_loudly(monkeypatch):
    """Should a new httpx/httpcore keep its network backend elsewhere, building the
    transport says so instead of sending requests without a deadline."""
    http = importlib.import_module(deadline.DEFAULT_STACK)

    def without_backend(self, **kwargs):
        self._pool = object()

    monkeypatch.setattr(http.HTTPTransport, "__init__", without_backend)
    with pytest.raises(RuntimeError, match="_network_backend"):
        deadline.transport_class()(5)
    with pytest.raises(ValueError, match="HTTP/1.1 only"):
        deadline.transport_class()(5, http2=True)
    with pytest.raises(ValueError, match="> 0"):
        deadline.transport_class()(0)


# --- the SDK clients --------------------------------------------------------------------------


def _chat(api: str, server: FakeAPIServer, **options):
    cls = OpenAIChat if api == "openai" else GeminiChat
    spec = {"api_key_env": KEY_ENV, "base_url": server.url + ("/v1" if api == "openai" else "")}
    options = {"max_retries": 1, "base_delay": 0.01, "max_delay": 0.01, **options}
    return cls.from_spec(spec, model=f"{api}-m", who="test", options=options)


def _request(chat, text: str) -> dict:
    decoding = Decoding(max_tokens=16, temperature=0.0)
    if isinstance(chat, OpenAIChat):
        return {"messages": [{"role": "user", "content": text}], **chat.request_kwargs(decoding)}
    contents = [chat.types.Content(role="user", parts=[chat.text_part(text)])]
    return {"contents": contents, "config": chat.config(decoding)}


@pytest.mark.parametrize("api", ["openai", "gemini"])
def test_a_trickling_model_fails_every_attempt_at_its_deadline(api, monkeypatch):
    """timeout_s 1, one retry, a served model that sends its headers and then a byte
    every 0.3 s: two attempts of about 1 s each, then an error result naming the model
    and the deadline (the VLM backend, as a job runs it)."""
    monkeypatch.setenv(KEY_ENV, "test-deadline-key")
    with FakeAPIServer() as server:
        server.add_fault("trickle", times=2, interval=0.3)
        spec = {
            "api_model": "served-vlm",
            "base_url": server.url + ("/v1" if api == "openai" else ""),
            "api_key_env": KEY_ENV,
            "options": {"timeout_s": 1, "max_retries": 1, "base_delay": 0.01, "max_delay": 0.01},
        }
        backend = (OpenAIBackend if api == "openai" else GeminiBackend)("local", spec)
        request = Request(key="q1", content=[{"type": "text", "text": "hi"}], max_new_tokens=8)
        try:
            (result,), took = timed(lambda: list(backend.generate([request])))
        finally:
            backend.close()
        assert [r.fault for r in server.requests] == ["trickle", "trickle"]
    assert result.finish_reason == "error" and result.extra["attempts"] == 2
    assert result.error == (
        f"{api} served-vlm request 'q1' failed after 2 attempts (retries exhausted): timeout ("
        + ("" if api == "openai" else "ReadTimeout: ")
        + "no complete answer within the request's deadline of 1 s (timeout_s))"
    )
    assert 1.9 <= took < 2.8  # measured: 2.01-2.04 s


@pytest.mark.parametrize("api", ["openai", "gemini"])
def test_a_slow_model_within_the_deadline_answers(api, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "test-deadline-key")
    with FakeAPIServer(delay_s=0.5) as server:
        chat = _chat(api, server, timeout_s=2)
        try:
            first = chat.call(_request(chat, "one"), describe="c")
            second = chat.call(_request(chat, "two"), describe="c")  # the same connection
        finally:
            chat.close()
        assert server.count == 2
    assert (first.text, second.text) == ("echo: one", "echo: two")
    assert first.latency_s >= 0.5


def test_every_api_client_sends_through_the_deadline(monkeypatch):
    """The chat clients of both families and both image editors."""
    monkeypatch.setenv(KEY_ENV, "test-deadline-key")
    transport_class = deadline.transport_class()
    spec = {"api_key_env": KEY_ENV, "base_url": "http://127.0.0.1:9", "options": {"timeout_s": 7}}
    openai_chat = OpenAIChat.from_spec(spec, model="m", who="t", options=spec["options"])
    gemini_chat = GeminiChat.from_spec(spec, model="m", who="t", options=spec["options"])
    clients = {
        "openai chat": openai_chat.client._client,
        "gemini chat": gemini_chat.client._api_client._httpx_client,
        "openai editor": OpenAIImageEditor(spec).client._client,
        "gemini editor": GeminiImageEditor(spec).client._api_client._httpx_client,
    }
    for name, client in clients.items():
        assert isinstance(client._transport, transport_class), name
        assert client._transport.timeout_s == 7, name
    assert gemini_chat.http_client is clients["gemini chat"]
    for chat in (openai_chat, gemini_chat):
        chat.close()
    assert clients["openai chat"].is_closed and clients["gemini chat"].is_closed
