"""The ``openai`` backend: OpenAI and any OpenAI-compatible server.

vLLM, SGLang, LMDeploy and Ollama serve the same chat-completions API; point a
registry entry at one with ``base_url`` (``api_key_env: null`` when the server needs
no key). The official ``openai`` client does the HTTP with its own retries switched
off (``max_retries=0``); the chat client both families share
(:class:`~vlmrobust.clients.chat.ChatClient`) retries on top, the same way for every
provider. This module says only what is OpenAI's: the options, the request fields and
how a chat completion is read.

Registry ``options`` (all optional):

``concurrency`` (8)
    Requests in flight at once.
``timeout_s`` (120), ``max_retries`` (5), ``base_delay`` (1.0), ``max_delay`` (60), ``jitter`` (true)
    The :class:`~vlmrobust.clients.apicall.RetryPolicy`. ``timeout_s`` is the deadline
    of one attempt: connect, send and the whole answer (a server that trickles bytes
    does not extend it; :mod:`vlmrobust.clients.deadline`), after which the attempt
    fails as a timeout and is retried like one.
``max_tokens_param`` ("max_tokens")
    The request field for the output budget. GPT-5 and the o-series reject
    ``max_tokens`` and need ``"max_completion_tokens"`` (which also counts their
    hidden reasoning tokens).
``send_temperature`` (true), ``send_top_p`` (= send_temperature), ``send_seed`` (true)
    Whether to send these fields; GPT-5 and the o-series reject a temperature or
    top_p other than the default, so set ``send_temperature: false`` for them.
``reasoning_effort`` (unset)
    Sent as ``reasoning_effort`` when set (``minimal``/``low``/``medium``/``high``).
``image_detail`` (unset)
    ``low``/``high``/``auto`` on every image part when set.
``extra_body`` ({})
    Extra request fields for the server (e.g. vLLM's ``top_k``,
    ``chat_template_kwargs``, ``mm_processor_kwargs``). Against a vLLM server,
    ``{skip_special_tokens: false}`` keeps a reasoning tag the tokenizer marks special
    (as the offline ``vllm`` backend does).
``tokenizer`` (unset)
    A local folder or hub id of the served model's tokenizer: the reasoning length of
    an output is its thinking part counted with it, where the server reports no
    reasoning tokens (a model served from a checkpoint of this workflow).
``max_images_per_prompt`` (unset)
    The server's image limit (vLLM's ``--limit-mm-per-prompt``); a job whose variants
    carry more images stops before its first request.

Pixel limits: a request's own ``min_pixels`` / ``max_pixels`` (a dataset's ``pixels``
setting) go to a server of the entry's ``base_url`` (a vLLM server) as
``extra_body={"mm_processor_kwargs": {...}}``, over any ``mm_processor_kwargs`` of
``options.extra_body``, and its images are resized first by the request's ``fit``
(``pixels: harness``) as the local backends do; the OpenAI API itself (no ``base_url``)
resizes images its own way and is sent none.

Results: ``text`` is the message content; when the server returns the reasoning in a
separate field (``reasoning_content`` as vLLM/SGLang/DeepSeek, or ``reasoning`` as
Ollama/OpenRouter) it is prepended as ``<think>...</think>`` so the common thinking
split sees it. ``revision`` is the ``model`` the server reports.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from ..apicall import (
    Classified,
    Completion,
    MalformedResponse,
    default_classify,
    png_bytes,
)
from ..chat import ChatClient, Decoding, int_or_none
from ..deadline import deadline_client
from .api_base import APIBackend, content_parts, request_decoding
from .base import Request

_MAX_TOKENS_PARAMS = ("max_tokens", "max_completion_tokens")


def image_part(image: Any, detail: str | None = None) -> dict[str, Any]:
    """An OpenAI ``image_url`` content part carrying the image as a base64 PNG data URL."""
    url = "data:image/png;base64," + base64.b64encode(png_bytes(image)).decode("ascii")
    image_url: dict[str, Any] = {"url": url}
    if detail:
        image_url["detail"] = detail
    return {"type": "image_url", "image_url": image_url}


def classify_openai(exc: BaseException) -> Classified:
    """The openai SDK's exceptions in :mod:`vlmrobust.clients.apicall` terms."""
    import openai

    if isinstance(exc, openai.APIResponseValidationError):
        return Classified(True, f"malformed response: {exc.message}")
    if isinstance(exc, openai.APITimeoutError):
        # the cause is the HTTP client's timeout; the request deadline's says so
        detail = " ".join(str(exc.__cause__ or "").split())[:300]
        return Classified(True, f"timeout ({detail or 'no response within the client timeout'})")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        detail = f" ({type(cause).__name__})" if cause is not None else ""
        return Classified(True, f"connection error{detail}: {exc.message}")
    if isinstance(exc, json.JSONDecodeError):
        return Classified(True, f"malformed response: body is not JSON ({exc.msg})")
    return default_classify(exc)


def openai_http_client(timeout_s: float) -> Any:
    """The HTTP client of an ``openai.OpenAI``: the SDK's connection limits, every
    request within ``timeout_s`` in all (:func:`vlmrobust.clients.deadline.deadline_client`)."""
    import openai

    return deadline_client(timeout_s, limits=openai.DEFAULT_CONNECTION_LIMITS)


def _field(obj: Any, name: str) -> Any:
    """A field of an SDK model or a plain dict (the SDK keeps unknown fields as extras)."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None) or {}
        value = extra.get(name)
    return value


def parse_chat_completion(completion: Any, latency_s: float) -> Completion:
    """Read a chat completion; raise :class:`MalformedResponse` when it lacks the shape."""
    if isinstance(completion, str | bytes):
        snippet = completion[:80] if isinstance(completion, str) else repr(completion[:80])
        raise MalformedResponse(f"body is not a JSON chat completion: {snippet!r}")
    choices = _field(completion, "choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedResponse("no 'choices' in the response")
    choice = choices[0]
    message = _field(choice, "message")
    if message is None:
        raise MalformedResponse("choices[0] has no 'message'")
    content = _field(message, "content")
    if content is not None and not isinstance(content, str):
        raise MalformedResponse(f"message content is {type(content).__name__}, not text")
    reasoning = _field(message, "reasoning_content") or _field(message, "reasoning")
    if reasoning is not None and not isinstance(reasoning, str):
        reasoning = None
    refusal = _field(message, "refusal")
    usage = _field(completion, "usage")
    details = _field(usage, "completion_tokens_details")
    model = _field(completion, "model")
    return Completion(
        text=content or "",
        finish_reason=str(_field(choice, "finish_reason") or "unknown"),
        reasoning=reasoning or None,
        prompt_tokens=int_or_none(_field(usage, "prompt_tokens")),
        completion_tokens=int_or_none(_field(usage, "completion_tokens")),
        reasoning_tokens=int_or_none(_field(details, "reasoning_tokens")),
        model=model if isinstance(model, str) else None,
        latency_s=latency_s,
        refusal=refusal if isinstance(refusal, str) and refusal else None,
    )


class OpenAIChat(ChatClient):
    """``chat.completions.create`` of the ``openai`` SDK as a
    :class:`~vlmrobust.clients.chat.ChatClient` (key, retries, in-flight limit), for
    :class:`OpenAIBackend` (VLM) and :class:`vlmrobust.clients.llm.backends.OpenAILLM`."""

    family = "openai"
    classify = staticmethod(classify_openai)
    parse = staticmethod(parse_chat_completion)

    def _read_options(self) -> None:
        param = self.options.get("max_tokens_param", "max_tokens")
        if param not in _MAX_TOKENS_PARAMS:
            raise ValueError(
                f"{self.who}: options.max_tokens_param must be one of "
                f"{', '.join(_MAX_TOKENS_PARAMS)}, got {param!r}"
            )
        self.max_tokens_param = param
        extra_body = self.options.get("extra_body") or {}
        if not isinstance(extra_body, dict):
            raise ValueError(f"{self.who}: options.extra_body must be a mapping")
        self.extra_body = extra_body

    def _connect(self, base_url: str | None, api_key: str) -> Any:
        """The SDK client, its HTTP client with a deadline of ``timeout_s`` on every
        request (connect, send, the whole answer)."""
        import openai

        return openai.OpenAI(
            api_key=api_key,
            base_url=base_url or None,
            max_retries=0,
            timeout=self.policy.timeout_s,
            http_client=openai_http_client(self.policy.timeout_s),
        )

    def request_kwargs(
        self, decoding: Decoding, response_format: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The decoding fields of a request as this model accepts them."""
        kwargs: dict[str, Any] = {self.max_tokens_param: int(decoding.max_tokens)}
        kwargs.update(self.sampling(decoding))
        if self.options.get("reasoning_effort"):
            kwargs["reasoning_effort"] = str(self.options["reasoning_effort"])
        if response_format is not None:
            kwargs["response_format"] = response_format
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        return kwargs

    def _send(self, request: dict[str, Any]) -> Any:
        """``chat.completions.create`` with ``messages`` and the decoding fields; a body
        that is not JSON is a malformed response."""
        try:
            return self.client.chat.completions.create(model=self.model, **request)
        except json.JSONDecodeError as exc:
            raise MalformedResponse(f"body is not JSON ({exc.msg})") from None


def build_user_content(
    request: Request, detail: str | None = None, fit: bool = False
) -> list[dict[str, Any]]:
    """The user turn of ``request`` as OpenAI content parts, images and text in order;
    with ``fit`` (a server that takes the request's pixel limits), each image resized
    first by the request's ``fit`` as the local backends do (:func:`~.media.load_fitted`)."""
    from .media import load_fitted

    def text_part(text: str) -> dict[str, Any]:
        return {"type": "text", "text": text}

    def image_path_part(path: Any) -> dict[str, Any]:
        if fit and request.fit:
            return image_part(load_fitted(path, request.fit), detail)
        return image_part(path, detail)

    return content_parts(request, text_part, image_path_part)


class OpenAIBackend(APIBackend):
    """A VLM behind the OpenAI chat-completions API (OpenAI or a compatible server)."""

    name = "openai"
    chat_class = OpenAIChat
    api_model_hint = "the model name at the API or the name the server serves"
    #: the tokenizer of ``options.tokenizer``, loaded on first use
    _tokenizer: Any = None

    @classmethod
    def image_limit(cls, model_id: str, spec: dict[str, Any]) -> int | None:
        limit = (spec.get("options") or {}).get("max_images_per_prompt")
        return None if limit is None else int(limit)

    def __init__(self, model_id: str, spec: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(model_id, spec, **kwargs)
        # a server of our own (vLLM's) takes a request's pixel limits; OpenAI's does not
        self.applies_pixel_limits = bool(spec.get("base_url"))

    def request_kwargs(self, request: Request) -> dict[str, Any]:
        """The chat-completions fields of ``request`` besides its messages: the
        decoding fields, and its pixel limits as ``extra_body.mm_processor_kwargs``
        where the server takes them."""
        kwargs = self.chat.request_kwargs(request_decoding(request))
        if self.applies_pixel_limits and request.pixels is not None:
            extra = dict(kwargs.get("extra_body") or {})
            mm = {**(extra.get("mm_processor_kwargs") or {}), **request.pixels}
            kwargs["extra_body"] = {**extra, "mm_processor_kwargs": mm}
        return kwargs

    def count_tokens(self, text: str) -> int | None:
        """With ``options.tokenizer``: tokens of ``text`` with that tokenizer."""
        name = self.options.get("tokenizer")
        if not name:
            return None
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(str(name))
        return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])

    def _messages(self, request: Request) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        detail = self.options.get("image_detail")
        content = build_user_content(request, detail, fit=self.applies_pixel_limits)
        messages.append({"role": "user", "content": content})
        return messages

    def sent_decoding(self, request: Request) -> dict[str, Any]:
        """The decoding fields of the chat-completions request (``extra_body`` as its
        fields, which the SDK merges into the body)."""
        kwargs = self.request_kwargs(request)
        extra = kwargs.pop("extra_body", None) or {}
        return {**kwargs, **extra}

    def _send(self, request: Request, describe: str) -> Completion:
        kwargs = self.request_kwargs(request)
        return self.chat.call({"messages": self._messages(request), **kwargs}, describe=describe)
