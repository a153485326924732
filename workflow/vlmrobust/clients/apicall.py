"""Robust remote calls shared by every API backend (VLM, judge, writer, editor).

One small policy, used the same way everywhere:

- :class:`RetryPolicy` says how often and how long to retry, and the deadline of one
  attempt.
- :func:`call_with_retries` runs one call: it retries HTTP 408/409/429 and 5xx, timeouts,
  connection errors and malformed responses (the callable raises
  :class:`MalformedResponse` when a body does not have the expected shape), with
  exponential backoff and full jitter, honouring ``Retry-After``. Every other 4xx (400,
  401, 403, 404, 422, ...) is final at once. When no attempt succeeds it raises
  :class:`CallFailed` whose ``reason`` names the status, the message and the number of
  attempts; the backend turns it into an error result, never a silent drop.
- :func:`map_concurrent` runs many calls with at most ``concurrency`` in flight.

Sleeping and the random source are injectable so tests run in milliseconds.
"""

from __future__ import annotations

import email.utils
import io
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: Status codes that are worth another attempt (besides every 5xx).
RETRYABLE_STATUS = frozenset({408, 409, 429})
DEFAULT_CONCURRENCY = 8


@dataclass(frozen=True)
class RetryPolicy:
    """How a remote call is retried.

    ``max_retries`` counts retries after the first attempt (``max_retries=5`` means at
    most six attempts). The wait before retry ``n`` (1-based) is
    ``min(max_delay, base_delay * 2**(n-1))``, drawn uniformly from ``[0, that]`` when
    ``jitter`` is on ("full jitter"); a ``Retry-After`` from the server replaces it
    (capped at ``max_retry_after``). ``timeout_s`` is the deadline of one attempt:
    connecting, sending and receiving the whole answer, in all (the HTTP API clients
    enforce it with :func:`vlmrobust.clients.deadline.deadline_client`; a server that
    sends a byte now and then does not extend it); an attempt past it fails as a
    timeout, retried like one.
    """

    max_retries: int = 5
    base_delay: float = 1.0
    max_delay: float = 60.0
    jitter: bool = True
    timeout_s: float = 120.0
    max_retry_after: float = 300.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"RetryPolicy.max_retries must be >= 0, got {self.max_retries}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("RetryPolicy delays must be >= 0")
        if self.timeout_s <= 0:
            raise ValueError(f"RetryPolicy.timeout_s must be > 0, got {self.timeout_s}")

    @classmethod
    def from_options(cls, options: dict[str, Any] | None) -> RetryPolicy:
        """Build a policy from registry ``options`` (``max_retries``, ``base_delay``,
        ``max_delay``, ``jitter``, ``timeout_s``, ``max_retry_after``); absent keys keep
        the defaults."""
        options = options or {}
        kwargs: dict[str, Any] = {}
        for name, conv in (
            ("max_retries", int),
            ("base_delay", float),
            ("max_delay", float),
            ("jitter", bool),
            ("timeout_s", float),
            ("max_retry_after", float),
        ):
            if options.get(name) is not None:
                kwargs[name] = conv(options[name])
        return cls(**kwargs)

    def backoff(self, retry: int, rng: random.Random | None = None) -> float:
        """The wait before retry number ``retry`` (1-based), without Retry-After."""
        cap = min(self.max_delay, self.base_delay * (2 ** max(0, retry - 1)))
        if self.jitter:
            return (rng or random).uniform(0.0, cap)
        return cap


class APICallError(Exception):
    """A failed attempt, already classified by the caller.

    ``retryable`` decides whether another attempt is made; ``status`` is the HTTP status
    when there was one; ``retry_after`` a server-requested wait in seconds.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


class MalformedResponse(APICallError):
    """The server answered, but not in the expected shape (not JSON, no choices...)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"malformed response: {message}", retryable=True)


class CallFailed(Exception):
    """Every attempt failed, or one failed for good. ``reason`` says why, in one line."""

    def __init__(self, reason: str, *, status: int | None, attempts: int, describe: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.attempts = attempts
        self.describe = describe


@dataclass
class Classified:
    """What :func:`call_with_retries` needs to know about an exception."""

    retryable: bool
    message: str
    status: int | None = None
    retry_after: float | None = None


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: a number of seconds or an HTTP date."""
    if value is None:
        return None
    value = str(value).strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        seconds = email.utils.mktime_tz(parsed) - (time.time() if now is None else now)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):  # NaN / inf
        return None
    return max(0.0, seconds)


def retry_after_from_headers(headers: Any) -> float | None:
    """``retry-after-ms`` or ``retry-after`` from a response's headers (any mapping)."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000.0)
    except (TypeError, ValueError):
        pass
    try:
        return parse_retry_after(headers.get("retry-after"))
    except (AttributeError, TypeError):
        return None


def status_is_retryable(status: int) -> bool:
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def _transport_error_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [TimeoutError, ConnectionError]
    for mod in ("httpx", "httpx2"):
        try:
            module = __import__(mod)
        except ImportError:
            continue
        exc = getattr(module, "TransportError", None)
        if isinstance(exc, type):
            types.append(exc)
    return tuple(types)


_TRANSPORT_ERRORS: tuple[type[BaseException], ...] | None = None


def _first_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def default_classify(exc: BaseException) -> Classified:
    """Classify an exception: already-classified errors, anything with an HTTP status
    (``status_code`` or an integer ``code``, as the openai and google-genai SDKs raise),
    transport errors (timeouts, refused or dropped connections). Anything else is a
    final failure (a bug or a bad request is not fixed by waiting)."""
    global _TRANSPORT_ERRORS
    if isinstance(exc, APICallError):
        return Classified(exc.retryable, exc.message, exc.status, exc.retry_after)
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        code = getattr(exc, "code", None)
        status = code if isinstance(code, int) and 100 <= code <= 599 else None
    if isinstance(status, int):
        response = getattr(exc, "response", None)
        retry_after = retry_after_from_headers(getattr(response, "headers", None))
        message = getattr(exc, "message", None) or str(exc)
        return Classified(status_is_retryable(status), _first_line(message), status, retry_after)
    if _TRANSPORT_ERRORS is None:
        _TRANSPORT_ERRORS = _transport_error_types()
    if isinstance(exc, _TRANSPORT_ERRORS):
        kind = "timeout" if "timeout" in type(exc).__name__.lower() else "connection error"
        return Classified(True, f"{kind} ({type(exc).__name__}: {_first_line(str(exc))})")
    return Classified(False, f"{type(exc).__name__}: {_first_line(str(exc))}")


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    describe: str,
    classify: Callable[[BaseException], Classified] = default_classify,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    slots: threading.Semaphore | None = None,
    redact: Callable[[str], str] | None = None,
) -> T:
    """Call ``fn`` until it returns, retrying transient failures under ``policy``.

    ``describe`` names the call in messages and logs (``"openai gpt-4o request 'x#0'"``).
    ``slots`` (a semaphore) is held during each attempt, not during the waits between,
    so it bounds the requests in flight. ``redact`` scrubs messages (secrets) before they
    are logged or raised. Raises :class:`CallFailed` when no attempt succeeded.
    """
    scrub = redact or (lambda s: s)
    attempts = 0
    last: Classified | None = None
    while True:
        attempts += 1
        try:
            if slots is not None:
                with slots:
                    return fn()
            return fn()
        except Exception as exc:  # noqa: BLE001 - classified below, never swallowed
            last = classify(exc)
            last.message = scrub(last.message)
        status = f"HTTP {last.status}: " if last.status is not None else ""
        if not last.retryable or attempts > policy.max_retries:
            final = "not retryable" if not last.retryable else "retries exhausted"
            reason = (
                f"{describe} failed after {attempts} attempt{'s' if attempts != 1 else ''} "
                f"({final}): {status}{last.message}"
            )
            log.warning("%s", reason)
            raise CallFailed(reason, status=last.status, attempts=attempts, describe=describe)
        if last.retry_after is not None:
            delay = min(last.retry_after, policy.max_retry_after)
        else:
            delay = policy.backoff(attempts, rng)
        log.info(
            "%s: attempt %d failed (%s%s); retrying in %.2fs",
            describe,
            attempts,
            status,
            last.message,
            delay,
        )
        sleep(delay)


def map_concurrent(
    fn: Callable[[T], R], items: Iterable[T], concurrency: int = DEFAULT_CONCURRENCY
) -> Iterator[R]:
    """Apply ``fn`` to every item with at most ``concurrency`` calls in flight; yield
    the results as they finish (in any order). ``fn`` must not raise (turn failures
    into values), or the exception ends the iteration."""
    items = list(items)
    if not items:
        return
    workers = max(1, min(int(concurrency), len(items)))
    if workers == 1:
        for item in items:
            yield fn(item)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="apicall") as pool:
        futures = [pool.submit(fn, item) for item in items]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:  # the caller stopped early (an error, Ctrl-C): start nothing new
            for future in futures:
                future.cancel()


def concurrency_from_options(options: dict[str, Any] | None) -> int:
    value = (options or {}).get("concurrency", DEFAULT_CONCURRENCY)
    try:
        value = int(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"options.concurrency must be a positive integer, got {value!r}") from exc
    if value < 1:
        raise ValueError(f"options.concurrency must be a positive integer, got {value}")
    return value


class Redactor:
    """Replaces a secret in text with ``***``; its repr never shows the secret."""

    __slots__ = ("_secret",)

    def __init__(self, secret: str | None) -> None:
        self._secret = secret if secret and len(secret) >= 4 else None

    def __call__(self, text: str) -> str:
        if self._secret and self._secret in text:
            return text.replace(self._secret, "***")
        return text

    def __repr__(self) -> str:
        return "Redactor(***)"


#: What ``api_key_env`` may hold: an environment variable's name (never the key itself).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def api_key_from_env(spec: dict[str, Any], *, who: str, allow_none: bool = True) -> str:
    """The API key from the environment variable the registry names (``api_key_env``).

    ``api_key_env: null`` (a local OpenAI-compatible server that needs no key) gives the
    dummy key ``"EMPTY"`` when ``allow_none``. A missing or empty variable is an error
    naming the variable, never the value; so is a value that is no variable name (a key
    pasted by mistake), which the error does not show.
    """
    env = spec.get("api_key_env")
    if env is None:
        if allow_none:
            return "EMPTY"
        raise ValueError(
            f"{who}: api_key_env is not set; name the environment variable that holds the "
            "API key (for example api_key_env: GEMINI_API_KEY)"
        )
    if not isinstance(env, str) or not ENV_NAME.fullmatch(env):
        raise ValueError(
            f"{who}: api_key_env is not the name of an environment variable (letters, digits "
            "and _, not starting with a digit); name the variable that holds the API key, "
            "never the key itself (the value is not shown)"
        )
    value = os.environ.get(env)
    if not value:
        raise ValueError(
            f"{who}: the environment variable {env} (api_key_env) is not set or empty; "
            f"export {env}=<your key> before running, or set api_key_env: null for a local "
            "server that needs no key"
        )
    return value.strip()


def png_bytes(image: Any) -> bytes:
    """PNG-encode an image for an API request: a path, raw bytes or a PIL image.

    The image is opened with PIL, rotated by its EXIF orientation, converted to RGB and
    PNG-encoded without metadata (the same input always gives the same bytes).
    """
    from PIL import Image, ImageOps

    if isinstance(image, Image.Image):
        rgb = ImageOps.exif_transpose(image).convert("RGB")
    else:
        if isinstance(image, bytes | bytearray | memoryview):
            opened = Image.open(io.BytesIO(bytes(image)))
        else:
            opened = Image.open(os.fspath(image))
        with opened as img:
            rgb = ImageOps.exif_transpose(img).convert("RGB")
    buf = io.BytesIO()
    rgb.save(buf, format="PNG")
    return buf.getvalue()


@dataclass
class Completion:
    """One successful answer from a chat API, in the provider-neutral shape the VLM
    and LLM backends share. ``text`` is the answer; ``reasoning`` the separately
    returned thinking (None when the server returned none)."""

    text: str
    finish_reason: str
    reasoning: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    model: str | None = None
    latency_s: float = 0.0
    refusal: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def text_with_thinking(self) -> str:
        """The answer with the reasoning prepended as ``<think>...</think>`` (the markers
        the common thinking split of :mod:`vlmrobust.clients.vlm.thinking` understands)."""
        if self.reasoning:
            return f"<think>{self.reasoning}</think>\n\n{self.text}"
        return self.text
