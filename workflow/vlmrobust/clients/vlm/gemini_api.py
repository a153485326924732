"""The ``gemini`` backend: Google's Gemini API through ``google-genai``.

The SDK's own retries are off (``HttpRetryOptions(attempts=1)``); the shared policy of
:mod:`vlmrobust.clients.apicall` retries on top. ``base_url`` (registry) overrides the
endpoint, which is how the tests point the SDK at a local fake server.

Registry ``options`` (all optional):

``concurrency`` (8); ``timeout_s`` (120), ``max_retries`` (5), ``base_delay``, ``max_delay``, ``jitter``
    As for every API backend (:class:`~vlmrobust.clients.apicall.RetryPolicy`).
``send_temperature`` (true), ``send_top_p`` (= send_temperature), ``send_seed`` (true)
    Whether these decoding fields are sent.
``include_thoughts`` (unset), ``thinking_budget`` (unset), ``thinking_level`` (unset)
    Sent as ``thinking_config`` when any is set (thinking models only: older models
    such as gemini-1.5 reject a thinking config). Thought parts come back as
    ``<think>...</think>`` before the answer.
``api_version`` (unset = the SDK's default, ``v1`` in google-genai 3.6.1)
    E.g. ``v1beta`` for features only the beta API has.

Finish reasons map to ``stop`` (STOP), ``length`` (MAX_TOKENS), ``content_filter``
(SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, IMAGE_* safety, or a prompt
blocked before generation) and ``other`` (anything else; the raw value is kept in
``Result.extra["gemini_finish_reason"]``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from ..apicall import (
    APICallError,
    Classified,
    Completion,
    MalformedResponse,
    Redactor,
    RetryPolicy,
    api_key_from_env,
    call_with_retries,
    concurrency_from_options,
    default_classify,
    png_bytes,
)
from .api_base import APIBackend
from .base import Request

_CONTENT_FILTER = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)


def map_finish_reason(raw: Any) -> str:
    """Gemini's FinishReason as ``stop`` / ``length`` / ``content_filter`` / ``other``."""
    name = getattr(raw, "value", raw)
    name = str(name or "").upper()
    if name == "STOP":
        return "stop"
    if name == "MAX_TOKENS":
        return "length"
    if name in _CONTENT_FILTER:
        return "content_filter"
    return "other"


def classify_gemini(exc: BaseException) -> Classified:
    """The google-genai SDK's exceptions in :mod:`vlmrobust.clients.apicall` terms."""
    from google.genai import errors

    if isinstance(exc, errors.UnknownApiResponseError | json.JSONDecodeError):
        return Classified(True, "malformed response: body is not JSON")
    if isinstance(exc, errors.APIError):
        status = exc.code if isinstance(exc.code, int) else None
        message = exc.message or exc.status or "API error"
        if status is None:
            return Classified(False, f"API error: {message}")
        base = default_classify(exc)
        return Classified(base.retryable, str(message)[:300], status, base.retry_after)
    try:
        import pydantic

        if isinstance(exc, pydantic.ValidationError):
            return Classified(True, f"malformed response: {exc.error_count()} validation errors")
    except ImportError:  # pragma: no cover - pydantic is a dependency of google-genai
        pass
    return default_classify(exc)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_gemini_response(response: Any, latency_s: float) -> Completion:
    """Read a GenerateContentResponse; raise :class:`MalformedResponse` when it lacks
    the shape (no candidates and no prompt block)."""
    usage = getattr(response, "usage_metadata", None)
    prompt_tokens = _int_or_none(getattr(usage, "prompt_token_count", None))
    answer_tokens = _int_or_none(getattr(usage, "candidates_token_count", None))
    thought_tokens = _int_or_none(getattr(usage, "thoughts_token_count", None))
    completion_tokens = None
    if answer_tokens is not None or thought_tokens is not None:
        completion_tokens = (answer_tokens or 0) + (thought_tokens or 0)
    model = getattr(response, "model_version", None)
    candidates = getattr(response, "candidates", None)
    if not candidates:
        feedback = getattr(response, "prompt_feedback", None)
        block = getattr(feedback, "block_reason", None)
        if block is not None:
            block_name = str(getattr(block, "value", block))
            return Completion(
                text="",
                finish_reason="content_filter",
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                model=model,
                latency_s=latency_s,
                refusal=f"prompt blocked ({block_name})",
                extra={"gemini_finish_reason": f"BLOCKED:{block_name}"},
            )
        raise MalformedResponse("no 'candidates' in the response")
    candidate = candidates[0]
    content = getattr(candidate, "content", None)
    parts = getattr(content, "parts", None) or []
    answer: list[str] = []
    thoughts: list[str] = []
    for part in parts:
        text = getattr(part, "text", None)
        if not isinstance(text, str):
            continue
        (thoughts if getattr(part, "thought", None) is True else answer).append(text)
    raw_finish = getattr(candidate, "finish_reason", None)
    raw_name = str(getattr(raw_finish, "value", raw_finish) or "")
    return Completion(
        text="".join(answer),
        finish_reason=map_finish_reason(raw_finish),
        reasoning="".join(thoughts) or None,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        reasoning_tokens=thought_tokens,
        model=model if isinstance(model, str) else None,
        latency_s=latency_s,
        extra={"gemini_finish_reason": raw_name} if raw_name else {},
    )


class GeminiChat:
    """A generate_content client with the shared retry policy and in-flight limit.

    Used by :class:`GeminiBackend` (VLM) and :class:`vlmrobust.clients.llm.backends.GeminiLLM`.
    The API key is handed to the SDK client and kept nowhere else.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str,
        options: dict[str, Any] | None = None,
        who: str = "gemini",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        from google import genai
        from google.genai import types

        self.types = types
        self.model = model
        self.who = who
        self.options = dict(options or {})
        self.policy = RetryPolicy.from_options(self.options)
        self.concurrency = concurrency_from_options(self.options)
        self.slots = threading.BoundedSemaphore(self.concurrency)
        self.sleep = sleep
        self.redact = Redactor(api_key)
        self.send_temperature = bool(self.options.get("send_temperature", True))
        self.send_top_p = bool(self.options.get("send_top_p", self.send_temperature))
        self.send_seed = bool(self.options.get("send_seed", True))
        http_options = types.HttpOptions(
            base_url=base_url or None,
            api_version=self.options.get("api_version") or None,
            timeout=max(1, int(round(self.policy.timeout_s * 1000))),  # milliseconds
            retry_options=types.HttpRetryOptions(attempts=1),  # no SDK retries
        )
        self.client = genai.Client(vertexai=False, api_key=api_key, http_options=http_options)

    def __repr__(self) -> str:
        return f"GeminiChat(model={self.model!r}, who={self.who!r})"

    def config(
        self,
        *,
        max_tokens: int,
        temperature: float,
        top_p: float | None,
        seed: int | None,
        system: str | None = None,
        json_schema: dict[str, Any] | None = None,
        json_mode: bool = False,
    ) -> Any:
        """A GenerateContentConfig with the decoding fields this model accepts."""
        types = self.types
        kwargs: dict[str, Any] = {
            "max_output_tokens": int(max_tokens),
            # No tools are sent; switching AFC off keeps the SDK to exactly one request.
            "automatic_function_calling": types.AutomaticFunctionCallingConfig(disable=True),
        }
        if self.send_temperature:
            kwargs["temperature"] = float(temperature)
        if self.send_top_p and top_p is not None:
            kwargs["top_p"] = float(top_p)
        if self.send_seed and seed is not None:
            kwargs["seed"] = int(seed)
        if system:
            kwargs["system_instruction"] = system
        thinking = {
            k: self.options[k]
            for k in ("include_thoughts", "thinking_budget", "thinking_level")
            if self.options.get(k) is not None
        }
        if thinking:
            kwargs["thinking_config"] = types.ThinkingConfig(**thinking)
        if json_mode or json_schema is not None:
            kwargs["response_mime_type"] = "application/json"
            if json_schema is not None and self.options.get("send_json_schema", True):
                kwargs["response_json_schema"] = json_schema
        return types.GenerateContentConfig(**kwargs)

    def attempt(self, contents: Any, config: Any) -> Completion:
        """One request, no retry; raises on any failure (classified by the caller)."""
        start = time.monotonic()
        response = self.client.models.generate_content(
            model=self.model, contents=contents, config=config
        )
        try:
            return parse_gemini_response(response, time.monotonic() - start)
        except APICallError:
            raise
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
            raise MalformedResponse(f"unexpected shape ({type(exc).__name__}: {exc})") from None

    def call(
        self,
        contents: Any,
        config: Any,
        *,
        describe: str,
        check: Callable[[Completion], Any] | None = None,
    ) -> Completion:
        """:meth:`attempt` under the retry policy (see ``OpenAIChat.call``)."""

        def once() -> Completion:
            completion = self.attempt(contents, config)
            if check is not None:
                check(completion)
            return completion

        return call_with_retries(
            once,
            self.policy,
            describe=describe,
            classify=classify_gemini,
            sleep=self.sleep,
            slots=self.slots,
            redact=self.redact,
        )

    def image_part(self, image: Any) -> Any:
        return self.types.Part.from_bytes(data=png_bytes(image), mime_type="image/png")

    def text_part(self, text: str) -> Any:
        return self.types.Part.from_text(text=text)

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if callable(close):
            close()


class GeminiBackend(APIBackend):
    """A VLM behind the Gemini API."""

    name = "gemini"
    refusal_as_text = False

    def __init__(
        self,
        model_id: str,
        spec: dict[str, Any],
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(model_id, spec)
        self._init_api(model_id, spec, "e.g. gemini-2.5-flash")
        # A key is required unless a custom endpoint (a proxy or a test server) is set.
        self.chat = GeminiChat(
            model=self.api_model,
            base_url=spec.get("base_url"),
            api_key=api_key_from_env(
                spec, who=f"model {model_id!r}", allow_none=bool(spec.get("base_url"))
            ),
            options=self.options,
            who=f"model {model_id!r}",
            sleep=sleep,
        )
        self.default_batch_size = 4 * self.chat.concurrency

    def _contents(self, request: Request) -> Any:
        types = self.chat.types
        parts = []
        for i, part in enumerate(request.content):
            kind = part.get("type")
            if kind == "text":
                parts.append(self.chat.text_part(part["text"]))
            elif kind == "image":
                try:
                    parts.append(self.chat.image_part(part["path"]))
                except (OSError, ValueError) as exc:
                    raise ValueError(
                        f"request {request.key!r}: cannot read image {part.get('path')!r} "
                        f"({type(exc).__name__}: {exc})"
                    ) from None
            else:
                raise ValueError(
                    f"request {request.key!r}: content part {i} has type {kind!r}; "
                    "expected 'text' or 'image'"
                )
        return [types.Content(role="user", parts=parts)]

    def _send(self, request: Request, describe: str) -> Completion:
        config = self.chat.config(
            max_tokens=request.max_new_tokens,
            temperature=request.temperature,
            top_p=request.top_p,
            seed=request.seed,
            system=request.system,
        )
        return self.chat.call(self._contents(request), config, describe=describe)
