"""LLM judge and writer backends (text in, text or JSON out) behind one content-addressed
cache (docs/architecture.md): :func:`make_llm` builds one from a small spec;
:func:`llm_from_spec` builds one from a step's LLM setting (:mod:`.spec`), with its cache."""

from .backends import GeminiLLM, LLMBackend, LLMResponse, OpenAILLM, make_llm
from .cache import LLMCache, make_key
from .spec import LLM_SPEC_KEYS, check_llm_spec, llm_from_spec

__all__ = [
    "LLM_SPEC_KEYS",
    "GeminiLLM",
    "LLMBackend",
    "LLMCache",
    "LLMResponse",
    "OpenAILLM",
    "check_llm_spec",
    "llm_from_spec",
    "make_key",
    "make_llm",
]
