"""What the API backends (openai, gemini) share: the chat client of the registry entry,
one request at a time under its retry policy and concurrency limit, failures as error
results (never lost), the user turn's parts in order, and the model the server reports
as the revision."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..apicall import CallFailed, Completion, map_concurrent
from ..chat import ChatClient, Decoding
from .base import Backend, Request, Result


class APIBackend(Backend):
    """Subclasses set ``chat_class`` (their family's :class:`~vlmrobust.clients.chat.ChatClient`)
    and ``api_model_hint``, and implement :meth:`_send`."""

    chat_class: type[ChatClient] = ChatClient
    #: what ``api_model`` names, for the error when it is missing
    api_model_hint = "?"
    #: an empty answer with a refusal message becomes that message (OpenAI's `refusal`);
    #: Gemini's block reasons stay in ``extra`` and the text stays empty
    refusal_as_text = True

    def __init__(
        self,
        model_id: str,
        spec: dict[str, Any],
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(model_id, spec)
        api_model = spec.get("api_model")
        if not api_model:
            raise ValueError(
                f"model {model_id!r}: backend {self.name} needs api_model ({self.api_model_hint})"
            )
        self.api_model = str(api_model)
        self._reported_model: str | None = None
        self._lock = threading.Lock()
        who = f"model {model_id!r}"
        self.chat = self.chat_class.from_spec(
            spec, model=self.api_model, who=who, options=self.options, sleep=sleep
        )
        self.default_batch_size = 4 * self.chat.concurrency

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_id={self.model_id!r}, api_model={self.api_model!r})"

    # the server names its model in its answers only: a resumed job cannot compare it
    # with its rows' before asking (the registry entry's fingerprint decides)
    revision_before_answers = False

    @property
    def revision(self) -> str:
        """The model the server reported (fallback: the registry revision or api_model)."""
        return self._reported_model or super().revision

    def _send(self, request: Request, describe: str) -> Completion:
        """Build the provider's request and call it through ``self.chat``."""
        raise NotImplementedError

    def sent_decoding(self, request: Request) -> dict[str, Any]:
        """The decoding fields of the provider's request for ``request``, as sent
        (recorded in the output row's ``generation.sent``): the output budget under its
        request name and the sampling fields this model accepts."""
        raise NotImplementedError

    def _one(self, request: Request) -> Result:
        describe = f"{self.name} {self.api_model} request {request.key!r}"
        start = time.monotonic()
        try:
            completion = self._send(request, describe)
        except CallFailed as exc:
            return error_result(request, exc.reason, time.monotonic() - start, exc.attempts)
        except Exception as exc:  # noqa: BLE001 - one bad request never loses the batch
            reason = self.chat.redact(f"{describe} failed: {type(exc).__name__}: {exc}")
            return error_result(request, reason, time.monotonic() - start, 0)
        if completion.model:
            with self._lock:
                self._reported_model = completion.model
        extra: dict[str, Any] = {"model": completion.model or self.api_model, **completion.extra}
        extra["generation"] = {"sent": self.sent_decoding(request)}
        if completion.reasoning_tokens is not None:
            extra["reasoning_tokens"] = completion.reasoning_tokens
        text = completion.text_with_thinking()
        if completion.refusal:
            extra["refusal"] = completion.refusal
            if self.refusal_as_text:
                text = text or completion.refusal
        return Result(
            key=request.key,
            text=text,
            finish_reason=completion.finish_reason,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            latency_s=completion.latency_s,
            extra=extra,
        )

    def generate(self, requests: list[Request]) -> Iterator[Result]:
        yield from map_concurrent(self._one, requests, self.chat.concurrency)

    def close(self) -> None:
        self.chat.close()


def error_result(request: Request, reason: str, latency_s: float, attempts: int) -> Result:
    return Result(
        key=request.key,
        text="",
        finish_reason="error",
        latency_s=latency_s,
        error=reason,
        extra={"attempts": attempts},
    )


def request_decoding(request: Request) -> Decoding:
    """The decoding settings of a VLM request."""
    return Decoding(
        max_tokens=request.max_new_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
    )


def content_parts(
    request: Request,
    text_part: Callable[[str], Any],
    image_part: Callable[[Any], Any],
) -> list[Any]:
    """The user turn of ``request`` as a family's parts, images and text in order:
    ``text_part(text)`` of each text part, ``image_part(path)`` of each image; an
    unreadable image or another kind of part is a ValueError naming the request."""
    parts: list[Any] = []
    for i, part in enumerate(request.content):
        kind = part.get("type")
        if kind == "text":
            parts.append(text_part(part["text"]))
        elif kind == "image":
            try:
                parts.append(image_part(part["path"]))
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
    return parts
