"""A step's LLM setting in a config, checked before any call, and the backend it names.

Several steps take the same LLM setting (the textual-distractor writer, the MathVerse
judge, the concept-family labeler): what :func:`~vlmrobust.clients.llm.make_llm` reads
(``backend``: ``openai`` | ``gemini``, or ``vllm`` | ``hf`` for a local registry LLM
answered by its engine, ``model``, ``base_url``, ``api_key_env``, ``options``; ``llm``: the
registry id the setting was resolved from, :mod:`vlmrobust.core.llms`) plus the step's own decoding settings ``temperature`` and ``max_tokens``
(each step has its own defaults) and ``cache_dir`` (null = ``results/cache/llm``), the
content-addressed cache's folder. :func:`check_llm_spec` checks such a setting (at
``prepare`` time, before any call); :func:`llm_from_spec` checks it and builds the
backend with its cache.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...core.paths import LLM_CACHE
from .backends import LLM_BACKENDS, LLMBackend, make_llm
from .cache import LLMCache
from .local import LOCAL_LLM_BACKENDS

__all__ = ["DEFAULT_CACHE_DIR", "LLM_SPEC_KEYS", "check_llm_spec", "llm_from_spec"]

DEFAULT_CACHE_DIR = LLM_CACHE
#: the keys an LLM setting may have
LLM_SPEC_KEYS = (
    "backend",
    "model",
    "base_url",
    "api_key_env",
    "options",
    "temperature",
    "max_tokens",
    "cache_dir",
    "llm",
)


def check_llm_spec(spec: Mapping[str, Any], where: str, others: Sequence[str] = ()) -> None:
    """A ValueError naming ``where`` (the setting's config key) when ``spec`` names no
    LLM backend, has a key outside :data:`LLM_SPEC_KEYS` or has no ``model``. ``others``:
    the step's backends that are no LLM (``offline``), listed with the LLM ones in the
    error for an unknown backend."""
    backend = spec.get("backend")
    if backend not in LLM_BACKENDS and backend not in LOCAL_LLM_BACKENDS:
        known = [*others, *LLM_BACKENDS, *LOCAL_LLM_BACKENDS]
        raise ValueError(f"{where}.backend: {backend!r} is not one of {', '.join(known)}")
    extra = sorted(set(spec) - set(LLM_SPEC_KEYS))
    if extra:
        raise ValueError(
            f"{where}.{extra[0]}: unknown key for backend {backend} "
            f"(allowed: {', '.join(LLM_SPEC_KEYS)})"
        )
    if not spec.get("model"):
        raise ValueError(f"{where}: backend {backend} needs 'model'")


def llm_from_spec(
    spec: Mapping[str, Any],
    where: str,
    cache: LLMCache | None = None,
    others: Sequence[str] = (),
) -> LLMBackend:
    """The backend of an LLM setting, checked first (:func:`check_llm_spec`, with
    ``others``), with ``cache``, or without one an :class:`LLMCache` in the setting's
    ``cache_dir`` (null = :data:`DEFAULT_CACHE_DIR`); a problem :func:`make_llm` finds
    (e.g. with ``api_key_env``) is a ValueError naming ``where``."""
    check_llm_spec(spec, where, others)
    if cache is None:
        cache = LLMCache(Path(spec.get("cache_dir") or DEFAULT_CACHE_DIR))
    try:
        return make_llm(dict(spec), cache)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
