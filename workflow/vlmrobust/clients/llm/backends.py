"""LLM judge and writer backends: text (and images) in, text or JSON out.

Every call goes through the :class:`~vlmrobust.clients.llm.cache.LLMCache` when one is given:
a cached key makes no request. With ``json_schema`` the backend asks for JSON output
(OpenAI ``response_format``, Gemini ``response_mime_type``), parses it and validates it
against the schema; invalid JSON or a schema violation is retried like a malformed
response (it counts toward ``max_retries``), then returned as an error response. A
refusal is an error. Only successful, valid responses are cached. No call raises for
an API failure: :class:`LLMResponse.error` says what went wrong.

A backend is made from a small spec (:func:`make_llm`)::

    {backend: openai | gemini, model: gpt-4o, base_url: null,
     api_key_env: OPENAI_API_KEY, options: {...}}

``options`` are those of the VLM backends of the same provider
(:mod:`vlmrobust.clients.vlm.openai_api`, :mod:`vlmrobust.clients.vlm.gemini_api`: concurrency,
retry policy, max_tokens_param, send_temperature, ...) plus:

``json_mode`` (openai only; "json_schema")
    ``json_schema`` (structured outputs), ``json_object`` (JSON mode without a schema)
    or ``none`` (ask in the prompt only); the answer is validated in every case.
``send_json_schema`` (gemini only; true)
    Send the schema as ``response_json_schema``; false sends only the JSON MIME type.
``price_input_per_mtok``, ``price_output_per_mtok`` (unset)
    USD per million tokens, for the cost estimate recorded with each response.

Options that change the answer (everything but concurrency, retry and price settings)
are part of the cache key; the base URL is not (the same model on another host is the
same model), nor, of course, the API key.
"""

from __future__ import annotations

import abc
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from jsonschema.exceptions import best_match

from ...core.io import sha256_bytes, sha256_file
from ..apicall import (
    APICallError,
    CallFailed,
    Completion,
    MalformedResponse,
    map_concurrent,
    png_bytes,
)
from ..chat import ChatClient, Decoding
from .cache import LLMCache, make_key, request_payload

#: Options that do not change the answer, so they stay out of the cache key.
OPERATIONAL_OPTIONS = frozenset(
    {
        "concurrency",
        "timeout_s",
        "max_retries",
        "base_delay",
        "max_delay",
        "jitter",
        "max_retry_after",
        "price_input_per_mtok",
        "price_output_per_mtok",
    }
)
_ROLES = ("system", "user", "assistant")
_FENCE = re.compile(r"^```(?:json|JSON)?\s*\n?(.*?)\n?```$", re.DOTALL)


@dataclass
class LLMResponse:
    """The answer to one :meth:`LLMBackend.complete` call.

    ``error`` is None on success; otherwise it says why (status, message, attempts)
    and ``text`` is empty. ``usage`` has ``prompt_tokens`` and ``completion_tokens``
    (None when unknown); ``cached`` says whether it came from the cache (no request).
    ``cost_usd`` is the estimated cost of the call that produced the text (when prices
    are configured); a cached response cost nothing this time. ``key`` is the cache key.
    """

    text: str
    parsed_json: Any | None = None
    usage: dict[str, int | None] = field(default_factory=dict)
    cached: bool = False
    error: str | None = None
    cost_usd: float | None = None
    model: str | None = None
    key: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LLMCall:
    """One call as a family builds its request from it: the messages, the PNG images
    that go with the last user message, the schema of a JSON answer (None: text) and
    the decoding settings."""

    messages: list[dict[str, str]]
    images: list[bytes]
    json_schema: dict[str, Any] | None
    decoding: Decoding


def parse_json_text(text: str) -> Any:
    """The JSON value in a model's answer (a ```json fence around it is tolerated)."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    return json.loads(stripped)


def normalize_messages(messages: str | Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """``messages`` as ``[{"role": ..., "content": str}]``; a string is one user turn."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    out: list[dict[str, str]] = []
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if role not in _ROLES or not isinstance(content, str):
            raise ValueError(
                f"messages[{i}] must be {{'role': one of {', '.join(_ROLES)}, "
                f"'content': str}}, got {message!r:.200}"
            )
        out.append({"role": role, "content": content})
    if not any(m["role"] == "user" for m in out):
        raise ValueError("messages need at least one 'user' message")
    return out


def image_sha256(image: Any) -> str:
    """The sha256 identifying an input image: of the file bytes for a path, of the
    bytes for bytes, of the PNG encoding for a PIL image."""
    if isinstance(image, bytes | bytearray | memoryview):
        return sha256_bytes(bytes(image))
    if hasattr(image, "save") and hasattr(image, "mode"):  # a PIL image
        return sha256_bytes(png_bytes(image))
    return sha256_file(image)


class LLMBackend(abc.ABC):
    """A text (+ images) → text / JSON model behind the cache and the retry policy of its
    family's chat client (``self.chat``, a :class:`~vlmrobust.clients.chat.ChatClient`)."""

    name: str = "?"

    def __init__(
        self,
        spec: dict[str, Any],
        cache: LLMCache | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        model = spec.get("model") or spec.get("api_model")
        if not model:
            raise ValueError(f"LLM spec for backend {self.name!r} needs 'model'")
        self.model = str(model)
        self.spec = dict(spec)
        self.options: dict[str, Any] = dict(spec.get("options") or {})
        self.cache = cache
        self.sleep = sleep
        self._read_options()
        self.chat = self._chat_class().from_spec(
            spec, model=self.model, who=f"LLM {self.model!r}", options=self.options, sleep=sleep
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"

    # --- what subclasses provide --------------------------------------------------------
    @abc.abstractmethod
    def _chat_class(self) -> type[ChatClient]:
        """The family's chat client class (imported here, on first use)."""

    def _read_options(self) -> None:  # noqa: B027 - optional hook
        """Check and keep the backend's own options (a ValueError naming the model)."""

    @abc.abstractmethod
    def _request(self, call: LLMCall) -> dict[str, Any]:
        """The family's SDK request for ``call`` (see ``ChatClient.call``)."""

    # --- the interface ------------------------------------------------------------------
    @property
    def concurrency(self) -> int:
        return self.chat.concurrency

    def answer_options(self) -> dict[str, Any]:
        """The options that change the answer (part of the cache key)."""
        return {k: v for k, v in sorted(self.options.items()) if k not in OPERATIONAL_OPTIONS}

    def cache_key(
        self,
        messages: str | Sequence[dict[str, Any]],
        *,
        images: Sequence[Any] = (),
        json_schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        seed: int | None = None,
    ) -> str:
        return make_key(
            self._payload(
                normalize_messages(messages),
                [image_sha256(img) for img in images],
                json_schema,
                temperature,
                max_tokens,
                seed,
            )
        )

    def _payload(
        self,
        messages: list[dict[str, str]],
        hashes: list[str],
        json_schema: dict[str, Any] | None,
        temperature: float,
        max_tokens: int,
        seed: int | None,
    ) -> dict[str, Any]:
        return request_payload(
            backend=self.name,
            model=self.model,
            messages=messages,
            image_sha256=hashes,
            params={
                "temperature": float(temperature),
                "max_tokens": int(max_tokens),
                "seed": seed,
                "json_schema": json_schema,
                "options": self.answer_options(),
            },
        )

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        """The estimated USD cost of a call's tokens at the configured prices."""
        return self.chat.cost(prompt_tokens, completion_tokens)

    def complete(
        self,
        messages: str | Sequence[dict[str, Any]],
        *,
        images: Sequence[Any] = (),
        json_schema: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        seed: int | None = None,
    ) -> LLMResponse:
        """Answer ``messages`` (images, as paths, bytes or PIL images, go with the last
        user message). Never raises for an API failure; see :class:`LLMResponse`."""
        msgs = normalize_messages(messages)
        validator = _validator(json_schema) if json_schema is not None else None
        try:
            hashes = [image_sha256(img) for img in images]
        except (OSError, ValueError) as exc:
            return LLMResponse(text="", error=f"cannot read an input image: {exc}")
        payload = self._payload(msgs, hashes, json_schema, temperature, max_tokens, seed)
        key = make_key(payload)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return self._from_cache(hit, key, json_schema is not None)
        describe = f"{self.name} {self.model} call {key[:12]}"
        try:
            pngs = [png_bytes(img) for img in images]
        except (OSError, ValueError) as exc:
            return LLMResponse(text="", error=f"cannot read an input image: {exc}", key=key)
        call = LLMCall(msgs, pngs, json_schema, Decoding(max_tokens, temperature, None, seed))
        try:
            completion = self.chat.call(
                self._request(call), describe=describe, check=answer_check(validator)
            )
        except CallFailed as exc:
            return LLMResponse(text="", error=exc.reason, key=key)
        except Exception as exc:  # noqa: BLE001 - one failed call never kills a batch
            reason = self.chat.redact(f"{describe} failed: {type(exc).__name__}: {exc}")
            return LLMResponse(text="", error=reason, key=key)
        return self._answered(completion, key, payload, json_schema is not None)

    def _answered(
        self, completion: Completion, key: str, payload: dict[str, Any], want_json: bool
    ) -> LLMResponse:
        """The response of a successful call, stored in the cache (with its request)."""
        usage = _usage(completion.prompt_tokens, completion.completion_tokens)
        cost = self.cost(completion.prompt_tokens, completion.completion_tokens)
        parsed = parse_json_text(completion.text) if want_json else None
        if self.cache is not None:
            self.cache.put(
                key,
                {
                    "text": completion.text,
                    "usage": usage,
                    "cost_usd": cost,
                    "model": completion.model,
                    "finish_reason": completion.finish_reason,
                    "request": payload,
                },
            )
        return LLMResponse(
            text=completion.text,
            parsed_json=parsed,
            usage=usage,
            cached=False,
            cost_usd=cost,
            model=completion.model,
            key=key,
        )

    def complete_many(self, calls: Sequence[dict[str, Any]]) -> list[LLMResponse]:
        """Run many :meth:`complete` calls (each a dict of its arguments, ``messages``
        included) with at most ``options.concurrency`` in flight; results in order."""
        indexed = list(enumerate(calls))

        def run(item: tuple[int, dict[str, Any]]) -> tuple[int, LLMResponse]:
            i, kwargs = item
            kwargs = dict(kwargs)
            messages = kwargs.pop("messages")
            return i, self.complete(messages, **kwargs)

        out: list[LLMResponse | None] = [None] * len(indexed)
        for i, response in map_concurrent(run, indexed, self.concurrency):
            out[i] = response
        return [r for r in out if r is not None]

    def _from_cache(self, hit: dict[str, Any], key: str, want_json: bool) -> LLMResponse:
        parsed = None
        if want_json:
            try:
                parsed = parse_json_text(hit["text"])
            except json.JSONDecodeError:
                parsed = None
        usage = hit.get("usage") or {}
        return LLMResponse(
            text=hit["text"],
            parsed_json=parsed,
            usage=_usage(usage.get("prompt_tokens"), usage.get("completion_tokens")),
            cached=True,
            cost_usd=hit.get("cost_usd"),
            model=hit.get("model"),
            key=key,
        )

    def close(self) -> None:
        """Release the connections."""
        self.chat.close()

    def __enter__(self) -> LLMBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _usage(prompt_tokens: int | None, completion_tokens: int | None) -> dict[str, int | None]:
    """The ``usage`` of a response: its prompt and completion tokens (None when unknown)."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}


def answer_check(validator: Any | None) -> Callable[[Completion], None]:
    """What a call's answer must pass, as a ``check`` for the retry loop: a refusal is a
    final error; with a schema ``validator``, invalid JSON is a malformed response and
    a schema violation a retryable error."""

    def check(completion: Completion) -> None:
        if completion.refusal:
            raise APICallError(f"refused: {completion.refusal}", retryable=False)
        if validator is not None:
            try:
                parsed = parse_json_text(completion.text)
            except json.JSONDecodeError as exc:
                raise MalformedResponse(
                    f"invalid JSON ({exc.msg} at char {exc.pos}; "
                    f"finish_reason={completion.finish_reason})"
                ) from None
            error = best_match(validator.iter_errors(parsed))
            if error is not None:
                where = "/".join(str(p) for p in error.absolute_path) or "(root)"
                raise APICallError(
                    f"schema violation at {where}: {error.message[:200]}", retryable=True
                )

    return check


def _validator(schema: dict[str, Any]) -> Any:
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"json_schema is not a valid JSON schema: {exc.message}") from None
    return cls(schema)


class OpenAILLM(LLMBackend):
    """A judge/writer behind the OpenAI chat-completions API (or a compatible server)."""

    name = "openai"

    def _chat_class(self) -> type[ChatClient]:
        from ..vlm.openai_api import OpenAIChat

        return OpenAIChat

    def _read_options(self) -> None:
        mode = self.options.get("json_mode", "json_schema")
        if mode not in ("json_schema", "json_object", "none"):
            raise ValueError(
                f"LLM {self.model!r}: options.json_mode must be json_schema, json_object or "
                f"none, got {mode!r}"
            )
        self.json_mode = mode

    def _response_format(self, json_schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if json_schema is None or self.json_mode == "none":
            return None
        if self.json_mode == "json_object":
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": json_schema, "strict": False},
        }

    def _request(self, call: LLMCall) -> dict[str, Any]:
        """``messages`` with the images as parts of the last user message, and the
        decoding fields with the ``response_format`` of ``json_mode``."""
        from ..vlm.openai_api import image_part

        wire: list[dict[str, Any]] = [dict(m) for m in call.messages]
        if call.images:
            last_user = max(i for i, m in enumerate(wire) if m["role"] == "user")
            text = wire[last_user]["content"]
            parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
            parts += [image_part(png) for png in call.images]
            wire[last_user] = {"role": "user", "content": parts}
        response_format = self._response_format(call.json_schema)
        return {"messages": wire, **self.chat.request_kwargs(call.decoding, response_format)}


class GeminiLLM(LLMBackend):
    """A judge/writer behind the Gemini API."""

    name = "gemini"

    def _chat_class(self) -> type[ChatClient]:
        from ..vlm.gemini_api import GeminiChat

        return GeminiChat

    def _request(self, call: LLMCall) -> dict[str, Any]:
        """The system messages as the system instruction, the other turns as contents
        (assistant turns in the ``model`` role; the images with the last user turn), and
        a config asking for JSON when there is a schema."""
        types = self.chat.types
        messages = call.messages
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system") or None
        turns = [m for m in messages if m["role"] != "system"]
        last_user = max(i for i, m in enumerate(turns) if m["role"] == "user")
        contents = []
        for i, m in enumerate(turns):
            parts = [self.chat.text_part(m["content"])]
            if i == last_user:
                parts += [self.chat.image_part(png) for png in call.images]
            role = "model" if m["role"] == "assistant" else "user"
            contents.append(types.Content(role=role, parts=parts))
        config = self.chat.config(
            call.decoding,
            system=system,
            json_schema=call.json_schema,
            json_mode=call.json_schema is not None,
        )
        return {"contents": contents, "config": config}


LLM_BACKENDS: dict[str, type[LLMBackend]] = {"openai": OpenAILLM, "gemini": GeminiLLM}


def make_llm(
    spec: dict[str, Any],
    cache: LLMCache | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> LLMBackend:
    """The LLM backend a spec names: ``{backend, model, base_url, api_key_env, options}``;
    a local registry LLM (``backend: vllm | hf``, ``model`` its registry id) is answered by
    the engine this process serves it with (:mod:`.local`)."""
    backend = spec.get("backend")
    if backend in ("vllm", "hf"):  # a local registry LLM: its engine in this process
        from .local import open_local

        return open_local(spec, cache)
    cls = LLM_BACKENDS.get(str(backend))
    if cls is None:
        raise ValueError(
            f"LLM spec backend {backend!r} is unknown; expected one of "
            f"{', '.join([*LLM_BACKENDS, 'vllm', 'hf'])}"
        )
    return cls(spec, cache, sleep=sleep)
