"""Generative image editing through an API, and a content-addressed cache of its results.

Two editors share one method, ``edit(image, instruction) -> PIL.Image``:

- :class:`OpenAIImageEditor` — ``images.edit`` of the ``openai`` client (gpt-image-1
  by default), base64 result;
- :class:`GeminiImageEditor` — ``models.generate_content`` of ``google-genai`` with an
  image response modality.

Both go through :func:`vlmrobust.clients.apicall.call_with_retries` (``options.timeout_s``
is the deadline of one attempt, connect, send and the whole answer:
:mod:`vlmrobust.clients.deadline`), return an image of the input's size (a result of
another size is resized back with LANCZOS, so the pair stays comparable) and raise
:class:`EditorError` when no image came back. The text the model receives is
:meth:`APIImageEditor.prompt` of the instruction: here a string is sent as it is; a
stage that writes structured instructions subclasses the editor and turns them into its
own text (the Distract-Bench construction does).

:class:`ImageEditCache` stores each edited image under the sha256 of everything that
decides it (backend, model, prompt, the input's pixels, the options that change the
output), so a rerun makes no call it made before; :func:`cached_edit` is the one call a
stage needs.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from PIL import Image

from ..core.io import atomic_write_bytes, atomic_write_text
from .apicall import CallFailed, RetryPolicy, api_key_from_env, call_with_retries, png_bytes
from .deadline import deadline_client

__all__ = [
    "API_EDITORS",
    "APIImageEditor",
    "EditorError",
    "GeminiImageEditor",
    "ImageEditCache",
    "OpenAIImageEditor",
    "cached_edit",
    "decode_image",
    "image_pixels_sha256",
    "make_api_editor",
]


class EditorError(RuntimeError):
    """An edit that produced no image; the message says why."""


def decode_image(data: bytes, size: tuple[int, int]) -> Image.Image:
    """Decode an API's image bytes to RGB, resized (LANCZOS) to ``size`` when it differs."""
    with Image.open(io.BytesIO(data)) as opened:
        img = opened.convert("RGB")
    if img.size != size:
        img = img.resize(size, Image.Resampling.LANCZOS)
    return img


class APIImageEditor:
    """The shared part of the API editors: spec, lazily built client, retry loop."""

    name = "?"
    default_model = "?"

    def __init__(
        self,
        spec: Mapping[str, Any] | None = None,
        *,
        client: Any = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.spec = dict(spec or {})
        self.model = str(self.spec.get("model") or self.default_model)
        self.options: dict[str, Any] = dict(self.spec.get("options") or {})
        self.policy = RetryPolicy.from_options(self.options)
        self._client = client
        self.sleep = sleep

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"

    def prompt(self, instruction: Any) -> str:
        """The text sent to the model: a string as it is (subclasses may accept more)."""
        if not isinstance(instruction, str):
            raise TypeError(
                f"{type(self).__name__} takes the edit prompt as a string, got "
                f"{type(instruction).__name__}"
            )
        return instruction

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def _make_client(self) -> Any:  # pragma: no cover - needs the SDK and a key
        raise NotImplementedError

    def _run(self, fn: Callable[[], Any], classify: Any) -> Any:
        try:
            return call_with_retries(
                fn,
                self.policy,
                describe=f"{self.name} {self.model} image edit",
                classify=classify,
                sleep=self.sleep,
            )
        except CallFailed as exc:
            raise EditorError(exc.reason) from None

    def edit(self, image: Image.Image, instruction: Any) -> Image.Image:  # pragma: no cover
        raise NotImplementedError


class OpenAIImageEditor(APIImageEditor):
    """gpt-image edits through ``client.images.edit`` (spec: ``model``, ``base_url``,
    ``api_key_env``, ``options``: ``size`` (default ``auto``), ``quality`` and the retry
    options of :class:`vlmrobust.clients.apicall.RetryPolicy`)."""

    name = "openai-image"
    default_model = "gpt-image-1"

    def _make_client(self) -> Any:  # pragma: no cover - needs a key
        import openai

        from .vlm.openai_api import openai_http_client

        return openai.OpenAI(
            api_key=api_key_from_env(self.spec, who=f"image editor {self.model!r}"),
            base_url=self.spec.get("base_url"),
            timeout=self.policy.timeout_s,
            max_retries=0,
            http_client=openai_http_client(self.policy.timeout_s),
        )

    def build_request(self, image: Image.Image, instruction: Any) -> dict:
        request: dict[str, Any] = {
            "model": self.model,
            "image": ("image.png", png_bytes(image), "image/png"),
            "prompt": self.prompt(instruction),
            "n": 1,
            "size": str(self.options.get("size", "auto")),
        }
        if self.options.get("quality"):
            request["quality"] = str(self.options["quality"])
        return request

    def edit(self, image: Image.Image, instruction: Any) -> Image.Image:
        from .vlm.openai_api import classify_openai

        request = self.build_request(image, instruction)
        response = self._run(lambda: self.client.images.edit(**request), classify_openai)
        data = getattr(response, "data", None) or []
        b64 = getattr(data[0], "b64_json", None) if data else None
        if not b64:
            raise EditorError(f"{self.name} {self.model}: the response has no b64_json image")
        return decode_image(base64.b64decode(b64), image.size)


class GeminiImageEditor(APIImageEditor):
    """Image edits through google-genai ``models.generate_content`` with
    ``response_modalities=["TEXT", "IMAGE"]`` (spec: ``model``, ``api_key_env``,
    ``base_url``, retry ``options``)."""

    name = "gemini-image"
    default_model = "gemini-2.5-flash-image"

    def _make_client(self) -> Any:  # pragma: no cover - needs a key
        from google import genai
        from google.genai import types

        http = types.HttpOptions(
            base_url=self.spec.get("base_url"),
            timeout=int(self.policy.timeout_s * 1000),
            httpx_client=deadline_client(self.policy.timeout_s),
        )
        key = api_key_from_env(self.spec, who=f"image editor {self.model!r}", allow_none=False)
        return genai.Client(vertexai=False, api_key=key, http_options=http)

    def build_request(self, image: Image.Image, instruction: Any) -> dict:
        from google.genai import types

        return {
            "model": self.model,
            "contents": [
                types.Part.from_text(text=self.prompt(instruction)),
                types.Part.from_bytes(data=png_bytes(image), mime_type="image/png"),
            ],
            "config": types.GenerateContentConfig(response_modalities=["TEXT", "IMAGE"]),
        }

    def edit(self, image: Image.Image, instruction: Any) -> Image.Image:
        from .vlm.gemini_api import classify_gemini

        request = self.build_request(image, instruction)
        response = self._run(lambda: self.client.models.generate_content(**request),
                             classify_gemini)  # fmt: skip
        for cand in getattr(response, "candidates", None) or []:
            content = getattr(cand, "content", None)
            for part in getattr(content, "parts", None) or []:
                inline = getattr(part, "inline_data", None)
                data = getattr(inline, "data", None) if inline is not None else None
                if data:
                    raw = base64.b64decode(data) if isinstance(data, str) else bytes(data)
                    return decode_image(raw, image.size)
        raise EditorError(f"{self.name} {self.model}: the response has no image part")


#: backend name -> API editor class
API_EDITORS: dict[str, type[APIImageEditor]] = {
    "openai": OpenAIImageEditor,
    "gemini": GeminiImageEditor,
}


def make_api_editor(spec: Mapping[str, Any], **kwargs: Any) -> APIImageEditor:
    """The API editor of ``spec["backend"]`` (``openai`` or ``gemini``)."""
    backend = spec.get("backend")
    if backend not in API_EDITORS:
        raise ValueError(f"image editor backend {backend!r} is not one of {', '.join(API_EDITORS)}")
    return API_EDITORS[backend](spec, **kwargs)


# --------------------------------------------------------------------------- cache

#: Options that do not change the edited image (retry policy, concurrency): not in the key.
_NON_OUTPUT_OPTIONS = frozenset(
    {"max_retries", "base_delay", "max_delay", "jitter", "timeout_s", "max_retry_after",
     "concurrency"}
)  # fmt: skip
_KEY = re.compile(r"^[0-9a-f]{64}$")
EDIT_CACHE_FORMAT = 1


def image_pixels_sha256(image: Image.Image) -> str:
    """sha256 of an image's RGB pixels and size (independent of any file encoding)."""
    rgb = image.convert("RGB")
    h = hashlib.sha256(f"RGB {rgb.width}x{rgb.height}\n".encode())
    h.update(rgb.tobytes())
    return h.hexdigest()


class ImageEditCache:
    """A folder of edited images: ``root/<key[:2]>/<key>.png`` plus ``<key>.json``
    (the request it answers, without the image bytes). Files are written atomically,
    the JSON after the PNG, so an entry counts only once both are there."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"ImageEditCache({str(self.root)!r})"

    @staticmethod
    def request(editor: APIImageEditor, image: Image.Image, prompt: str) -> dict[str, Any]:
        """What the key is computed from."""
        return {
            "format": EDIT_CACHE_FORMAT,
            "backend": editor.name,
            "model": editor.model,
            "prompt": prompt,
            "image_sha256": image_pixels_sha256(image),
            "size": list(image.size),
            "options": {
                k: v for k, v in sorted(editor.options.items()) if k not in _NON_OUTPUT_OPTIONS
            },
        }

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        text = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _paths(self, key: str) -> tuple[Path, Path]:
        if not _KEY.match(key):
            raise ValueError(f"image edit cache key {key!r} is not a sha256 hex digest")
        base = self.root / key[:2] / key
        return base.with_suffix(".png"), base.with_suffix(".json")

    def get(self, key: str) -> Image.Image | None:
        png, meta = self._paths(key)
        if not (png.is_file() and meta.is_file()):
            return None
        with Image.open(png) as opened:
            return opened.convert("RGB")

    def put(self, key: str, image: Image.Image, request: dict[str, Any]) -> None:
        png, meta = self._paths(key)
        buf = io.BytesIO()
        image.convert("RGB").save(buf, format="PNG")
        atomic_write_bytes(png, buf.getvalue())
        record = {
            **request,
            "key": key,
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        atomic_write_text(meta, json.dumps(record, ensure_ascii=False, indent=1) + "\n")


def cached_edit(
    editor: APIImageEditor, image: Image.Image, prompt: str, cache: ImageEditCache
) -> tuple[Image.Image, dict[str, Any]]:
    """``editor.edit(image, prompt)`` through ``cache``; returns the image and
    ``{"key", "cached", "backend", "model"}`` (``cached``: no call was made)."""
    request = cache.request(editor, image, editor.prompt(prompt))
    key = cache.key(request)
    info = {"key": key, "backend": editor.name, "model": editor.model}
    hit = cache.get(key)
    if hit is not None:
        return hit, {**info, "cached": True}
    out = editor.edit(image, prompt)
    cache.put(key, out, request)
    return out, {**info, "cached": False}
