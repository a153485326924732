"""The VLM backend interface (one small interface per role; docs/architecture.md).

A backend turns :class:`Request` objects (interleaved images and text, decoding
parameters) into :class:`Result` objects. A new provider is one subclass of
:class:`Backend` registered in :data:`vlmrobust.infer.BACKENDS`.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Request:
    """One generation.

    ``content`` is the user turn, in order: ``{"type": "text", "text": ...}`` and
    ``{"type": "image", "path": ...}`` parts (multi-image samples are interleaved where
    the question refers to each image). ``system`` is an optional system prompt.
    ``temperature == 0`` means greedy decoding; ``seed`` seeds sampled decoding.
    ``generation_config`` (:data:`~vlmrobust.core.registry.GENERATION_CONFIGS`) says whether the checkpoint's own
    generation defaults (its ``generation_config.json``: ``repetition_penalty``,
    ``top_k``, ...) apply to the fields the request does not set (``checkpoint``), or
    decoding is exactly the request's (``explicit``); backends without a checkpoint
    (APIs) send the request's fields either way.
    ``min_pixels`` / ``max_pixels`` bound every image's area as the Qwen-VL processors
    resize it, over the registry's ``options.min_pixels`` / ``max_pixels`` (None: the
    model's own); backends that show the model no processor-resized image ignore them
    (:attr:`Backend.applies_pixel_limits`). ``fit`` (``factor``, ``min_pixels``,
    ``max_pixels``; a dataset's ``pixels: harness`` or ``fit``) resizes every image
    before the processor as lmms-eval's Qwen chat wrappers (and the Idis authors'
    ``process_vision_info`` call) do (:func:`~.media.fit_image`); None: the image as it is.
    """

    key: str
    content: list[dict[str, str]]
    max_new_tokens: int
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    system: str | None = None
    generation_config: str = "explicit"
    min_pixels: int | None = None
    max_pixels: int | None = None
    fit: dict[str, int] | None = None

    @property
    def pixels(self) -> dict[str, int] | None:
        """The request's own pixel limits (``min_pixels`` / ``max_pixels``, those set),
        or None: the model's."""
        limits = {
            k: int(v)
            for k, v in (("min_pixels", self.min_pixels), ("max_pixels", self.max_pixels))
            if v is not None
        }
        return limits or None

    @property
    def image_paths(self) -> list[str]:
        return [p["path"] for p in self.content if p["type"] == "image"]

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


@dataclass
class Result:
    """What a backend returns for one request.

    ``finish_reason``: ``stop`` (end of sequence), ``length`` (max_new_tokens reached),
    ``error`` (the request failed after every retry; ``error`` says why; ``text`` is
    empty), or a provider-specific value (``content_filter``, ...).
    """

    key: str
    text: str
    finish_reason: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Backend(abc.ABC):
    """A vision-language model behind one interface.

    ``model_id`` is the registry id, ``spec`` its validated registry entry (hf_repo,
    local_path, api_model, base_url, api_key_env, revision, options, ...). Secrets are
    read from the environment variable the registry names, never stored.
    """

    name: str = "?"
    #: Requests per :meth:`generate` batch the caller should group (the runner slices
    #: its requests into chunks of this size so progress is written after each).
    default_batch_size: int = 1
    #: Whether a request's ``min_pixels`` / ``max_pixels`` reach the model's image
    #: processor (local checkpoints, a vLLM server); API models ignore them.
    applies_pixel_limits: bool = False

    def __init__(self, model_id: str, spec: dict[str, Any]) -> None:
        self.model_id = model_id
        self.spec = spec
        self.options: dict[str, Any] = dict(spec.get("options") or {})

    #: whether an engine job pools its cells' requests into each generate call
    #: (:mod:`vlmrobust.infer.engine`; a backend whose numbers depend on the batch keeps
    #: each cell's own batches)
    pools_requests = False
    #: whether :attr:`revision` is known before the first answer (a loaded checkpoint:
    #: yes; an API: only once the server has reported its model)
    revision_before_answers = True

    @property
    def revision(self) -> str:
        """What exactly answers: a checkpoint commit or hash, or the API model name."""
        return str(self.spec.get("revision") or self.spec.get("api_model") or "unknown")

    @abc.abstractmethod
    def generate(self, requests: list[Request]) -> Iterator[Result]:
        """Yield one :class:`Result` per request (in any order; ``key`` matches).

        A failure of one request yields a Result with ``finish_reason='error'`` and
        the reason, never an exception that loses the others.
        """

    @classmethod
    def image_limit(cls, model_id: str, spec: dict[str, Any]) -> int | None:
        """The most images one request may carry with this registry entry (None: no limit
        the workflow knows of). Checked before the model is loaded, so a job whose
        variants need more stops before any row is written."""
        return None

    def pixel_limits(self, request: Request) -> dict[str, int] | None:
        """The pixel limits ``request``'s images were shown at, as an output row records
        them (``pixels``): the request's own over the registry's ``options``
        (``min_pixels`` / ``max_pixels``) with ``set_by`` ``dataset`` where the request set
        any, else ``model``, and the request's ``fit`` where it sets one; None for a
        backend that applies none, or where neither sets any (the processor's
        defaults)."""
        if not self.applies_pixel_limits:
            return None
        own = {
            k: int(self.options[k])
            for k in ("min_pixels", "max_pixels")
            if self.options.get(k) is not None
        }
        fit = {"fit": dict(request.fit)} if request.fit else {}
        if request.pixels is not None:
            return {**own, **request.pixels, "set_by": "dataset", **fit}
        return {**own, "set_by": "model", **fit} if own or fit else None

    def count_tokens(self, text: str) -> int | None:
        """Tokens of ``text`` with the model's own tokenizer (the reasoning length of a
        thinking part), or None when the backend has no tokenizer (API models report
        their reasoning tokens instead)."""
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model or the connections."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def chat_messages(req: Request) -> list[dict[str, Any]]:
    """The request as chat-template messages (image placeholders in content order),
    shared by the backends that apply a processor's chat template (hf, vllm)."""
    content: list[dict[str, str]] = []
    for part in req.content:
        if part["type"] == "image":
            content.append({"type": "image"})
        elif part["type"] == "text":
            content.append({"type": "text", "text": part["text"]})
        else:
            raise ValueError(f"request {req.key!r}: unknown content part type {part['type']!r}")
    messages: list[dict[str, Any]] = []
    if req.system:
        messages.append({"role": "system", "content": [{"type": "text", "text": req.system}]})
    messages.append({"role": "user", "content": content})
    return messages


def media_marks(processor: Any) -> list[str]:
    """The media placeholder strings a processor expands in the text
    (``image_token``, ``video_token``, ``audio_token``; e.g. ``<|image_pad|>``)."""
    return [
        m
        for name in ("image_token", "video_token", "audio_token")
        if isinstance(m := getattr(processor, name, None), str) and m
    ]


def without_marks(req: Request, marks: list[str]) -> Request:
    """``req`` with ``marks`` removed from its text parts. A processor expands every
    media placeholder in the text into the tokens of one image or video, so a literal
    one in the text — e.g. a model's own earlier output fed back, as the CRM
    final-answer stage does — would fail the request ("Found 1 <|video_pad|> tokens in
    the text but no videos were passed")."""
    if not marks or not any(
        m in p["text"] for p in req.content if p["type"] == "text" for m in marks
    ):
        return req
    content = []
    for part in req.content:
        if part["type"] == "text":
            text = part["text"]
            for m in marks:
                text = text.replace(m, "")
            part = {**part, "text": text}
        content.append(part)
    return dataclasses.replace(req, content=content)


def template_messages(req: Request, processor: Any) -> list[dict[str, Any]]:
    """:func:`chat_messages` of ``req`` for ``processor``'s chat template (a processor,
    tokenizer or template string), its media marks taken out of the text first
    (:func:`without_marks`)."""
    return chat_messages(without_marks(req, media_marks(processor)))


def chunks(items: list[Any], size: int) -> Iterable[list[Any]]:
    for i in range(0, len(items), max(1, size)):
        yield items[i : i + size]
