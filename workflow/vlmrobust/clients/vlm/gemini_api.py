"""The ``gemini`` backend: Google's Gemini API through ``google-genai``.

The SDK's own retries are off (``HttpRetryOptions(attempts=1)``); the chat client both
families share (:class:`~vlmrobust.clients.chat.ChatClient`) retries on top. This module
says only what is Gemini's: the options, the request config and contents and how a
response is read. ``base_url`` (registry) overrides the endpoint, which is how the tests
point the SDK at a local fake server. A request's ``min_pixels`` / ``max_pixels`` (a
dataset's ``pixels`` setting) are not sent: Gemini resizes images its own way.

Registry ``options`` (all optional):

``concurrency`` (8); ``timeout_s`` (120), ``max_retries`` (5), ``base_delay``, ``max_delay``, ``jitter``
    As for every API backend (:class:`~vlmrobust.clients.apicall.RetryPolicy`):
    ``timeout_s`` is the deadline of one attempt, connect, send and the whole answer
    (:mod:`vlmrobust.clients.deadline`).
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
from typing import Any

from ..apicall import Classified, Completion, MalformedResponse, default_classify, png_bytes
from ..chat import ChatClient, Decoding, int_or_none
from ..deadline import deadline_client
from .api_base import APIBackend, content_parts, request_decoding
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


def parse_gemini_response(response: Any, latency_s: float) -> Completion:
    """Read a GenerateContentResponse; raise :class:`MalformedResponse` when it lacks
    the shape (no candidates and no prompt block)."""
    usage = getattr(response, "usage_metadata", None)
    prompt_tokens = int_or_none(getattr(usage, "prompt_token_count", None))
    answer_tokens = int_or_none(getattr(usage, "candidates_token_count", None))
    thought_tokens = int_or_none(getattr(usage, "thoughts_token_count", None))
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


class GeminiChat(ChatClient):
    """``models.generate_content`` of ``google-genai`` as a
    :class:`~vlmrobust.clients.chat.ChatClient` (key, retries, in-flight limit), for
    :class:`GeminiBackend` (VLM) and :class:`vlmrobust.clients.llm.backends.GeminiLLM`;
    ``types`` is the SDK's types module, for the parts and contents of a request."""

    family = "gemini"
    classify = staticmethod(classify_gemini)
    parse = staticmethod(parse_gemini_response)

    @classmethod
    def key_optional(cls, spec: dict[str, Any]) -> bool:
        """A key is required unless a custom endpoint (a proxy or a test server) is set."""
        return bool(spec.get("base_url"))

    def _read_options(self) -> None:
        from google.genai import types

        self.types = types

    def _connect(self, base_url: str | None, api_key: str) -> Any:
        """The SDK client, its HTTP client with a deadline of ``timeout_s`` on every
        request (connect, send, the whole answer); the SDK leaves closing it to us."""
        from google import genai

        self.http_client = deadline_client(self.policy.timeout_s)
        http_options = self.types.HttpOptions(
            base_url=base_url or None,
            api_version=self.options.get("api_version") or None,
            timeout=max(1, int(round(self.policy.timeout_s * 1000))),  # milliseconds
            retry_options=self.types.HttpRetryOptions(attempts=1),  # no SDK retries
            httpx_client=self.http_client,
        )
        return genai.Client(vertexai=False, api_key=api_key, http_options=http_options)

    def close(self) -> None:
        super().close()
        http_client = getattr(self, "http_client", None)
        if http_client is not None:
            http_client.close()

    def config(
        self,
        decoding: Decoding,
        *,
        system: str | None = None,
        json_schema: dict[str, Any] | None = None,
        json_mode: bool = False,
    ) -> Any:
        """A GenerateContentConfig with the decoding fields this model accepts."""
        types = self.types
        kwargs: dict[str, Any] = {
            "max_output_tokens": int(decoding.max_tokens),
            # No tools are sent; switching AFC off keeps the SDK to exactly one request.
            "automatic_function_calling": types.AutomaticFunctionCallingConfig(disable=True),
        }
        kwargs.update(self.sampling(decoding))
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

    def _send(self, request: dict[str, Any]) -> Any:
        """``models.generate_content`` with ``contents`` and ``config``."""
        return self.client.models.generate_content(model=self.model, **request)

    def image_part(self, image: Any) -> Any:
        return self.types.Part.from_bytes(data=png_bytes(image), mime_type="image/png")

    def text_part(self, text: str) -> Any:
        return self.types.Part.from_text(text=text)


class GeminiBackend(APIBackend):
    """A VLM behind the Gemini API."""

    name = "gemini"
    chat_class = GeminiChat
    api_model_hint = "e.g. gemini-2.5-flash"
    refusal_as_text = False

    def _contents(self, request: Request) -> Any:
        parts = content_parts(request, self.chat.text_part, self.chat.image_part)
        return [self.chat.types.Content(role="user", parts=parts)]

    def sent_decoding(self, request: Request) -> dict[str, Any]:
        """The decoding fields of the ``GenerateContentConfig``: ``max_output_tokens``,
        the sampling fields this model accepts and the thinking settings."""
        decoding = request_decoding(request)
        fields: dict[str, Any] = {"max_output_tokens": int(decoding.max_tokens)}
        fields.update(self.chat.sampling(decoding))
        for key in ("include_thoughts", "thinking_budget", "thinking_level"):
            if self.options.get(key) is not None:
                fields[key] = self.options[key]
        return fields

    def _send(self, request: Request, describe: str) -> Completion:
        config = self.chat.config(request_decoding(request), system=request.system)
        contents = self._contents(request)
        return self.chat.call({"contents": contents, "config": config}, describe=describe)
