"""The chat client both API families share (OpenAI-compatible and Gemini).

A family's client (:class:`~vlmrobust.clients.vlm.openai_api.OpenAIChat`,
:class:`~vlmrobust.clients.vlm.gemini_api.GeminiChat`) says only what differs: its
options, its SDK client, its request fields, how it sends one request, how it reads the
answer and how it classifies the SDK's errors. :class:`ChatClient` does the rest, the
same way for the VLM backends and the LLM judges and writers of both families:

- the API key from the environment variable the spec names
  (:func:`~vlmrobust.clients.apicall.api_key_from_env`): handed to the SDK client and
  kept nowhere else; every message is scrubbed of it before it is logged or returned;
- the retry policy and in-flight limit of the ``options``
  (:class:`~vlmrobust.clients.apicall.RetryPolicy`, ``concurrency``);
- one attempt timed, its answer read and checked, retried under the policy
  (:func:`~vlmrobust.clients.apicall.call_with_retries`);
- the sampling fields a model accepts (``send_temperature``, ``send_top_p``,
  ``send_seed``) and the cost of the tokens used (``price_input_per_mtok``,
  ``price_output_per_mtok``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .apicall import (
    APICallError,
    Classified,
    Completion,
    MalformedResponse,
    Redactor,
    RetryPolicy,
    api_key_from_env,
    call_with_retries,
    concurrency_from_options,
)


@dataclass(frozen=True)
class Decoding:
    """The decoding settings of one request: the output budget and the sampling fields
    (``top_p`` and ``seed`` are sent only when given)."""

    max_tokens: int
    temperature: float
    top_p: float | None = None
    seed: int | None = None


def int_or_none(value: Any) -> int | None:
    """A token count as an int, or None when the response gave no integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_cost(
    options: dict[str, Any], prompt_tokens: int | None, completion_tokens: int | None
) -> float | None:
    """USD for the tokens of one call at the ``price_input_per_mtok`` and
    ``price_output_per_mtok`` of ``options``; None when a price or a count is unknown."""
    pin = options.get("price_input_per_mtok")
    pout = options.get("price_output_per_mtok")
    if pin is None or pout is None or prompt_tokens is None or completion_tokens is None:
        return None
    return (prompt_tokens * float(pin) + completion_tokens * float(pout)) / 1e6


class ChatClient:
    """One model behind an API family's SDK, with the shared policy (module docstring).

    Subclasses set ``family`` (the default ``who``), ``classify`` (the SDK's errors in
    :mod:`vlmrobust.clients.apicall` terms) and ``parse`` (a response and its latency in
    seconds -> :class:`~vlmrobust.clients.apicall.Completion`, raising
    :class:`~vlmrobust.clients.apicall.MalformedResponse` for a wrong shape), and
    implement :meth:`_connect` and :meth:`_send`; :meth:`_read_options` reads their own
    options.
    """

    family = "?"
    classify: Callable[[BaseException], Classified]
    parse: Callable[[Any, float], Completion]

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str,
        options: dict[str, Any] | None = None,
        who: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.who = self.family if who is None else who
        self.options = dict(options or {})
        self.policy = RetryPolicy.from_options(self.options)
        self.concurrency = concurrency_from_options(self.options)
        self.slots = threading.BoundedSemaphore(self.concurrency)
        self.sleep = sleep
        self.redact = Redactor(api_key)
        self.send_temperature = bool(self.options.get("send_temperature", True))
        self.send_top_p = bool(self.options.get("send_top_p", self.send_temperature))
        self.send_seed = bool(self.options.get("send_seed", True))
        self._read_options()
        self.client = self._connect(base_url, api_key)

    @classmethod
    def key_optional(cls, spec: dict[str, Any]) -> bool:
        """Whether ``spec`` may leave ``api_key_env`` unset (a server that needs no key)."""
        return True

    @classmethod
    def from_spec(
        cls,
        spec: dict[str, Any],
        *,
        model: str,
        who: str,
        options: dict[str, Any],
        sleep: Callable[[float], None] = time.sleep,
    ) -> ChatClient:
        """The client of a registry entry or an LLM spec: its ``base_url`` and the key from
        the environment variable its ``api_key_env`` names (see :meth:`key_optional`)."""
        return cls(
            model=model,
            base_url=spec.get("base_url"),
            api_key=api_key_from_env(spec, who=who, allow_none=cls.key_optional(spec)),
            options=options,
            who=who,
            sleep=sleep,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, who={self.who!r})"

    # --- what a family provides ---------------------------------------------------------
    def _read_options(self) -> None:
        """Check and keep the family's own options (a ValueError naming ``self.who``)."""

    def _connect(self, base_url: str | None, api_key: str) -> Any:
        """The SDK client, with the SDK's own retries off and the policy's timeout."""
        raise NotImplementedError

    def _send(self, request: dict[str, Any]) -> Any:
        """One SDK call with ``request`` (its keyword arguments but the model); the raw
        response."""
        raise NotImplementedError

    # --- the shared part ----------------------------------------------------------------
    def sampling(self, decoding: Decoding) -> dict[str, Any]:
        """The sampling fields of ``decoding`` this model accepts: ``temperature``,
        ``top_p`` and ``seed`` (when given), each unless its ``send_*`` option is off."""
        fields: dict[str, Any] = {}
        if self.send_temperature:
            fields["temperature"] = float(decoding.temperature)
        if self.send_top_p and decoding.top_p is not None:
            fields["top_p"] = float(decoding.top_p)
        if self.send_seed and decoding.seed is not None:
            fields["seed"] = int(decoding.seed)
        return fields

    def attempt(self, request: dict[str, Any]) -> Completion:
        """One request, no retry; raises on any failure (classified by the caller)."""
        start = time.monotonic()
        response = self._send(request)
        try:
            return self.parse(response, time.monotonic() - start)
        except APICallError:
            raise
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
            raise MalformedResponse(f"unexpected shape ({type(exc).__name__}: {exc})") from None

    def call(
        self,
        request: dict[str, Any],
        *,
        describe: str,
        check: Callable[[Completion], Any] | None = None,
    ) -> Completion:
        """:meth:`attempt` under the retry policy, holding one of the in-flight slots;
        ``check`` may raise :class:`~vlmrobust.clients.apicall.APICallError` to reject an
        answer (retried when retryable). Raises
        :class:`~vlmrobust.clients.apicall.CallFailed` when all fail."""

        def once() -> Completion:
            completion = self.attempt(request)
            if check is not None:
                check(completion)
            return completion

        return call_with_retries(
            once,
            self.policy,
            describe=describe,
            classify=self.classify,
            sleep=self.sleep,
            slots=self.slots,
            redact=self.redact,
        )

    def cost(self, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
        """The estimated USD cost of a call's tokens (:func:`usage_cost` of the options)."""
        return usage_cost(self.options, prompt_tokens, completion_tokens)

    def close(self) -> None:
        close = getattr(self.client, "close", None)
        if callable(close):
            close()
