"""A local LLM (registry backend ``vllm`` or ``hf``) as a judge's or extractor's backend.

A step whose setting names a local registry LLM (``llm: gpt-oss-120b``, resolved to
``backend: vllm, model: gpt-oss-120b``; :mod:`vlmrobust.core.llms`) runs inside that
model's LLM engine job (docs/judges.md): the engine loads the model once and opens it in
its process (:func:`serving`); :func:`~vlmrobust.clients.llm.make_llm` then gives the
step's code a :class:`LocalLLM` whose calls go to that engine. The step's own code does
not change: the same messages, schemas and parsing, and every call through the same
content-addressed cache (its key names the backend, ``vllm`` or ``hf``, and the registry
id, so a served copy of the model, ``backend: openai``, keeps its own entries).

What differs from an API backend:

- the calls of one :meth:`LocalLLM.complete_many` go to the engine together (the engine
  pools the calls of the cells it runs at once into each generate call);
- a response is written to the cache as soon as its engine call returns, so a killed
  engine's rerun asks only what no entry holds (the cache is the engine's resume cache);
- a JSON answer is constrained by the schema where the engine can (vLLM's structured
  outputs, as a vLLM server does for ``response_format``), and validated either way; an
  invalid one is an error response, not retried (greedy decoding would repeat it);
- a sampled call (temperature > 0) without a seed is seeded by its cache key, so a
  rerun draws the same answer;
- images are not taken (a text model): such a call is an error response.

Outside an engine job, a local setting is an error naming the step and the model: its
calls are answered by the model's engine jobs, or by a server (``backend: openai``).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from jsonschema.exceptions import best_match

from .backends import (
    LLMBackend,
    LLMResponse,
    _usage,
    _validator,
    normalize_messages,
    parse_json_text,
)
from .cache import LLMCache, make_key, request_payload

__all__ = ["LOCAL_LLM_BACKENDS", "LocalLLM", "Transport", "open_local", "serving"]

#: The registry backends a local LLM is answered with.
LOCAL_LLM_BACKENDS = ("vllm", "hf")
#: The engine's generate call: text requests in, results out, in order
#: (:class:`vlmrobust.clients.llm.engines.TextRequest` / ``TextResult``).
Transport = Callable[[list[Any]], list[Any]]

_OPEN: dict[str, Transport] = {}
_OPEN_LOCK = threading.Lock()


@contextlib.contextmanager
def serving(model: str, transport: Transport) -> Iterator[None]:
    """Within the block, a step of this process whose setting names ``model`` (a local
    registry LLM) is answered through ``transport`` (the engine's pooled generate)."""
    with _OPEN_LOCK:
        if model in _OPEN:
            raise RuntimeError(f"models.{model}: an engine of this process already serves it")
        _OPEN[model] = transport
    try:
        yield
    finally:
        with _OPEN_LOCK:
            _OPEN.pop(model, None)


def open_local(spec: dict[str, Any], cache: LLMCache | None) -> LocalLLM:
    """The :class:`LocalLLM` of a resolved local setting, answered by the engine this
    process serves it with; a ValueError when none does."""
    model = str(spec.get("model"))
    with _OPEN_LOCK:
        transport = _OPEN.get(model)
    if transport is None:
        raise ValueError(
            f"models.{model} (backend {spec.get('backend')}) is a local LLM: its calls are "
            "answered inside its engine jobs (rule llm_engine_*, docs/judges.md), not by this "
            "process. Run the workflow, or serve the model (`vlmrobust vllm-serve`) and give "
            "the step an inline setting (backend: openai, model, base_url)"
        )
    return LocalLLM(spec, cache, transport)


class LocalLLM(LLMBackend):
    """An LLM judge/extractor backend answered by an engine of this process."""

    def __init__(  # noqa: D107 - no chat client: the engine is the transport
        self, spec: dict[str, Any], cache: LLMCache | None, transport: Transport
    ) -> None:
        self.name = str(spec["backend"])
        self.model = str(spec["model"])
        self.spec = dict(spec)
        self.options: dict[str, Any] = {}
        self.cache = cache
        self.transport = transport

    def _chat_class(self) -> Any:  # pragma: no cover - never called: no chat client
        raise NotImplementedError

    def _request(self, call: Any) -> dict[str, Any]:  # pragma: no cover - as above
        raise NotImplementedError

    @property
    def concurrency(self) -> int:
        return 1

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        return None  # GPU time, not money: the forecast counts it

    def close(self) -> None:
        return None  # the engine owns the model

    def complete(self, messages: Any, **kwargs: Any) -> LLMResponse:
        return self.complete_many([{"messages": messages, **kwargs}])[0]

    def complete_many(self, calls: Sequence[dict[str, Any]]) -> list[LLMResponse]:
        """Answer ``calls`` (each :meth:`complete`'s arguments): cached ones from the
        cache, the others in one engine call; results in order."""
        out: list[LLMResponse | None] = [None] * len(calls)
        todo: list[tuple[int, Any, str, dict[str, Any]]] = []
        for i, kwargs in enumerate(calls):
            answered = self._prepare(dict(kwargs))
            if isinstance(answered, LLMResponse):
                out[i] = answered
            else:
                todo.append((i, *answered))
        if todo:
            results = self.transport([request for _, request, _, _ in todo])
            for (i, request, key, payload), result in zip(todo, results, strict=True):
                out[i] = self._answered_locally(result, request, key, payload)
        return [r for r in out if r is not None]

    def _prepare(self, kwargs: dict[str, Any]) -> LLMResponse | tuple[Any, str, dict[str, Any]]:
        """A call's response from the cache (or its error), else (its engine request,
        cache key, payload)."""
        from .engines import TextRequest

        messages = normalize_messages(kwargs.pop("messages"))
        if kwargs.pop("images", None):
            return LLMResponse(
                text="", error=f"{self.name} {self.model}: a text LLM takes no images"
            )
        schema = kwargs.get("json_schema")
        temperature = float(kwargs.get("temperature", 0.0))
        max_tokens = int(kwargs.get("max_tokens", 1024))
        seed = kwargs.get("seed")
        params = {
            "temperature": temperature,
            "max_tokens": max_tokens,
            "seed": seed,
            "json_schema": schema,
            "options": {},
        }
        payload = request_payload(
            backend=self.name, model=self.model, messages=messages, image_sha256=[], params=params
        )
        key = make_key(payload)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return self._from_cache(hit, key, schema is not None)
        if seed is None and temperature > 0:
            seed = int(key[:8], 16)  # a sampled call is reproducible without a seed
        request = TextRequest(messages, schema, max_tokens, temperature, None, seed)
        return request, key, payload

    def _answered_locally(
        self, result: Any, request: Any, key: str, payload: dict[str, Any]
    ) -> LLMResponse:
        """The response of one engine result: an error, a rejected JSON answer, or the
        text (stored in the cache with its request)."""
        # worded as an API backend's final failure (clients.apicall), so a row reads the
        # same from an engine and from a server but for the transport and the key
        failed = f"{self.name} {self.model} call {key[:12]} failed after 1 attempt (not retried)"
        if result.error is not None:
            return LLMResponse(text="", error=f"{failed}: {result.error}", key=key)
        parsed = None
        if request.json_schema is not None:
            problem, parsed = _json_problem(result.text, request.json_schema, result.finish_reason)
            if problem is not None:
                return LLMResponse(text="", error=f"{failed}: {problem}", key=key)
        usage = _usage(result.prompt_tokens, result.completion_tokens)
        if self.cache is not None:
            entry = {
                "text": result.text,
                "usage": usage,
                "cost_usd": None,
                "model": self.model,
                "finish_reason": result.finish_reason,
                "request": payload,
            }
            self.cache.put(key, entry)
        return LLMResponse(
            text=result.text, parsed_json=parsed, usage=usage, model=self.model, key=key
        )


def _json_problem(text: str, schema: dict[str, Any], finish: str) -> tuple[str | None, Any]:
    """(None, the parsed value) for a JSON answer that follows ``schema``, else (what is
    wrong, None), in the API backends' words (:func:`.backends.answer_check`)."""
    try:
        parsed = parse_json_text(text)
    except json.JSONDecodeError as exc:
        reason = f"invalid JSON ({exc.msg} at char {exc.pos}; finish_reason={finish})"
        return f"malformed response: {reason}", None
    error = best_match(_validator(schema).iter_errors(parsed))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        return f"schema violation at {where}: {error.message[:200]}", None
    return None, parsed
