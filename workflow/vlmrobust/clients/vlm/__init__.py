"""VLM backends (generate text from images and a prompt) behind one interface.

Backends are imported lazily (torch, vllm, openai and google-genai load only when a
model of that backend runs).
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import Backend, Request, Result

#: backend name -> "module:Class"
BACKENDS: dict[str, str] = {
    "hf": "vlmrobust.clients.vlm.hf:HFBackend",
    "vllm": "vlmrobust.clients.vlm.vllm:VLLMBackend",
    "openai": "vlmrobust.clients.vlm.openai_api:OpenAIBackend",
    "gemini": "vlmrobust.clients.vlm.gemini_api:GeminiBackend",
}


def backend_class(model_id: str, spec: dict[str, Any]) -> type[Backend]:
    """The backend class of a registry entry (``spec["backend"]``), not constructed (its
    module imports no engine: torch, vllm and the API clients load in ``__init__``)."""
    name = spec.get("backend")
    if name not in BACKENDS:
        raise ValueError(
            f"models.{model_id}.backend: unknown backend {name!r} (known: {', '.join(BACKENDS)})"
        )
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)


def make_backend(model_id: str, spec: dict[str, Any]) -> Backend:
    """The backend of a registry entry (``spec["backend"]``), constructed."""
    return backend_class(model_id, spec)(model_id, spec)


__all__ = ["BACKENDS", "Backend", "Request", "Result", "backend_class", "make_backend"]
