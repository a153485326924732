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


def make_backend(model_id: str, spec: dict[str, Any]) -> Backend:
    """The backend of a registry entry (``spec["backend"]``), constructed."""
    name = spec.get("backend")
    if name not in BACKENDS:
        raise ValueError(
            f"models.{model_id}.backend: unknown backend {name!r} (known: {', '.join(BACKENDS)})"
        )
    module, cls = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), cls)(model_id, spec)


__all__ = ["BACKENDS", "Backend", "Request", "Result", "make_backend"]
