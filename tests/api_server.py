"""A local fake of the OpenAI chat-completions and Gemini generateContent APIs.

Stdlib only (``ThreadingHTTPServer`` on port 0, in a thread). Tests script it:

- ``server.add_fault(kind, match=None, times=1, **kw)`` queues a fault; a request whose
  body contains ``match`` (any request when None) gets the first fault that applies.
  Kinds: any HTTP status as text (``429`` with ``retry_after``, ``500``, ``503``, ``400``,
  ``401``...; ``echo_auth=True`` puts the received key in the error message),
  ``timeout`` (hold the request ``seconds`` before answering, longer than the client
  timeout), ``trickle`` (the normal answer's headers at once, then its body one byte
  every ``interval`` seconds: every read is quick, the whole answer takes minutes),
  ``not_json`` (200 with a body that is not JSON), ``no_choices`` (200 JSON
  without ``choices`` / ``candidates``), ``refusal`` (OpenAI ``refusal``), ``drop``
  (close the connection without an answer), ``blocked`` (Gemini prompt feedback block).
- Normal answers echo the last text part of the request (``"echo: <text>"``), unless
  ``server.replies`` (a queue of texts, used in order) or ``server.reply_fn`` says
  otherwise; ``server.reasoning`` adds a separate reasoning field / thought part.
- ``fake_llm_spec(server, model, ...)`` is an LLM spec pointed at the server; the
  ``fake_api`` fixture (tests/conftest.py) is a running server with its test key set.
- ``server.requests`` records every request (path, headers, JSON body), and
  ``server.max_in_flight`` the most requests handled at once (``server.delay_s`` holds
  each normal answer a while so concurrency shows).

The Gemini route mirrors what google-genai 3.6.1 sends: ``POST
/{api_version}/models/{model}:generateContent`` (``v1`` by default in that SDK,
``v1beta`` with ``GOOGLE_GENAI_API_VERSION=beta``), key in ``x-goog-api-key``, body
``{"contents": [{"role": "user", "parts": [{"text": ...}, {"inlineData": {"data":
<URL-safe base64>, "mime_type": "image/png"}}]}], "systemInstruction": {"parts":
[...]}, "generationConfig": {"maxOutputTokens", "temperature", "topP", "seed", ...}}``;
it answers ``{"candidates": [{"content": {"role": "model", "parts": [{"text", "thought"?}]},
"finishReason"}], "usageMetadata": {...}, "modelVersion"}``.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_GEMINI_PATH = re.compile(r"^/(v1|v1beta|v1alpha)/models/([^/:]+):generateContent$")
_OPENAI_PATH = "/v1/chat/completions"


@dataclass
class Fault:
    kind: str
    match: str | None = None
    times: int = 1
    retry_after: str | None = None
    seconds: float = 2.0
    interval: float = 1.0  # between the body bytes of a trickle
    echo_auth: bool = False  # put the received key in the error message (as some proxies do)


@dataclass
class Recorded:
    api: str  # "openai" | "gemini" | "?"
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes
    fault: str | None = None


@dataclass
class FakeAPIServer:
    delay_s: float = 0.0
    reasoning: str | None = None
    finish: str = "stop"  # or "length"
    model_suffix: str = "-served"
    replies: deque[str] = field(default_factory=deque)
    reply_fn: Callable[[str, Any], str] | None = None
    requests: list[Recorded] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- scripting -------------------------------------------------------------------
    def add_fault(self, kind: str, match: str | None = None, times: int = 1, **kw: Any) -> None:
        with self._lock:
            self.faults.append(Fault(kind=str(kind), match=match, times=times, **kw))

    def reply(self, *texts: str) -> None:
        with self._lock:
            self.replies.extend(texts)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def count_matching(self, text: str) -> int:
        with self._lock:
            return sum(1 for r in self.requests if text.encode() in r.raw)

    # --- lifecycle -------------------------------------------------------------------
    def start(self) -> FakeAPIServer:
        server = self

        class Handler(_Handler):
            fake = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeAPIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- internals -------------------------------------------------------------------
    def _take_fault(self, raw: bytes) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.times > 0 and (fault.match is None or fault.match.encode() in raw):
                    fault.times -= 1
                    return fault
        return None

    def _reply_text(self, last_text: str, body: Any) -> str:
        with self._lock:
            if self.replies:
                return self.replies.popleft()
        if self.reply_fn is not None:
            return self.reply_fn(last_text, body)
        return f"echo: {last_text}"


#: The environment variable the ``fake_api`` fixture (tests/conftest.py) sets to a test key.
FAKE_KEY_ENV = "VLMROBUST_TEST_FAKE_API_KEY"


def fake_llm_spec(
    server: FakeAPIServer,
    model: str,
    *,
    api: str = "openai",
    cache_dir: Any = None,
    **options: Any,
) -> dict[str, Any]:
    """An LLM spec (``vlmrobust.clients.llm.make_llm``) for ``server``: the key from
    :data:`FAKE_KEY_ENV`, quick retries (``max_retries`` 1, millisecond delays, a 5 s
    timeout; ``options`` override them) and ``cache_dir`` when one is given."""
    spec: dict[str, Any] = {
        "backend": api,
        "model": model,
        "base_url": server.url + ("/v1" if api == "openai" else ""),
        "api_key_env": FAKE_KEY_ENV,
        "options": {
            "max_retries": 1,
            "base_delay": 0.001,
            "max_delay": 0.005,
            "timeout_s": 5,
            **options,
        },
    }
    if cache_dir is not None:
        spec["cache_dir"] = str(cache_dir)
    return spec


def _last_text_openai(body: dict[str, Any]) -> tuple[str, int]:
    text, images = "", 0
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            for part in content:
                if part.get("type") == "text":
                    text = part.get("text", "")
                elif part.get("type") == "image_url":
                    images += 1
    return text, images


def _last_text_gemini(body: dict[str, Any]) -> tuple[str, int]:
    text, images = "", 0
    for content in body.get("contents", []):
        for part in content.get("parts", []):
            if "text" in part:
                text = part["text"]
            elif "inlineData" in part or "inline_data" in part:
                images += 1
    return text, images


class _Handler(BaseHTTPRequestHandler):
    fake: FakeAPIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    def _send(
        self,
        status: int,
        payload: Any,
        headers: dict[str, str] | None = None,
        trickle: float | None = None,
    ) -> None:
        """Answer; with ``trickle``, the body one byte every ``trickle`` seconds."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if trickle is None:
                self.wfile.write(data)
                return
            for i in range(len(data)):
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                if self.fake._stop.wait(trickle):
                    return
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        fake = self.fake
        with fake._lock:
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        try:
            self._handle()
        finally:
            with fake._lock:
                fake.in_flight -= 1

    def _handle(self) -> None:
        fake = self.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        gemini = _GEMINI_PATH.match(path)
        api = "openai" if path == _OPENAI_PATH else "gemini" if gemini else "?"
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        fault = fake._take_fault(raw)
        with fake._lock:
            fake.requests.append(
                Recorded(
                    api=api,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    raw=raw,
                    fault=fault.kind if fault else None,
                )
            )
        if api == "?":
            self._send(404, {"error": {"message": f"no route {path}", "code": 404}})
            return
        if not isinstance(body, dict):
            self._send(400, _error(api, 400, "request body is not a JSON object"))
            return
        if fault is not None and self._fault(api, fault):
            return
        if fake.delay_s:
            fake._stop.wait(fake.delay_s)
        trickle = fault.interval if fault is not None and fault.kind == "trickle" else None
        if api == "openai":
            last, images = _last_text_openai(body)
            text = fake._reply_text(last, body)
            self._send(200, self._openai_ok(body, text, images, fault), trickle=trickle)
        else:
            last, images = _last_text_gemini(body)
            text = fake._reply_text(last, body)
            ok = self._gemini_ok(gemini.group(2), body, text, images, fault)
            self._send(200, ok, trickle=trickle)

    def _fault(self, api: str, fault: Fault) -> bool:
        """Answer with the fault; return False when a normal answer should follow."""
        kind = fault.kind
        if kind.isdigit():
            status = int(kind)
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else None
            message = f"injected {status}"
            if fault.echo_auth:
                got = self.headers.get("Authorization") or self.headers.get("x-goog-api-key")
                message += f": invalid credentials {got}"
            self._send(status, _error(api, status, message), headers)
            return True
        if kind == "timeout":
            self.fake._stop.wait(fault.seconds)
            self._send(200, _error(api, 200, "too late"))
            return True
        if kind == "not_json":
            self._send(200, b"<html>upstream proxy error</html>")
            return True
        if kind == "no_choices":
            self._send(200, {"id": "x", "object": "chat.completion"} if api == "openai" else {})
            return True
        if kind == "drop":
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(2)
            return True
        if kind in ("refusal", "blocked"):
            return False  # a well-formed answer that says no; built below
        if kind == "trickle":
            return False  # the normal answer, sent slowly below
        raise ValueError(f"unknown fault kind {kind!r}")

    def _openai_ok(self, body: dict, text: str, images: int, fault: Fault | None) -> dict:
        fake = self.fake
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if fault is not None and fault.kind == "refusal":
            message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
        if fake.reasoning is not None:
            message["reasoning_content"] = fake.reasoning
        completion_tokens = len(text.split())
        return {
            "id": f"chatcmpl-{len(fake.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": str(body.get("model")) + fake.model_suffix,
            "choices": [{"index": 0, "message": message, "finish_reason": fake.finish}],
            "usage": {
                "prompt_tokens": 10 + 100 * images,
                "completion_tokens": completion_tokens,
                "total_tokens": 10 + 100 * images + completion_tokens,
            },
        }

    def _gemini_ok(self, model: str, body: dict, text: str, images: int, fault: Fault | None):
        fake = self.fake
        usage = {
            "promptTokenCount": 10 + 100 * images,
            "candidatesTokenCount": len(text.split()),
            "totalTokenCount": 10 + 100 * images + len(text.split()),
        }
        if fault is not None and fault.kind == "blocked":
            return {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": usage}
        parts: list[dict[str, Any]] = []
        if fake.reasoning is not None:
            parts.append({"text": fake.reasoning, "thought": True})
            usage["thoughtsTokenCount"] = len(fake.reasoning.split())
        parts.append({"text": text})
        return {
            "candidates": [
                {
                    "content": {"role": "model", "parts": parts},
                    "finishReason": {"stop": "STOP", "length": "MAX_TOKENS"}.get(
                        fake.finish, fake.finish
                    ),
                    "index": 0,
                }
            ],
            "usageMetadata": usage,
            "modelVersion": model + fake.model_suffix,
        }


def _error(api: str, status: int, message: str) -> dict[str, Any]:
    if api == "gemini":
        return {"error": {"code": status, "message": message, "status": "INJECTED"}}
    return {"error": {"message": message, "type": "injected", "code": str(status)}}
