"""LLM judge and writer backends (text in, text or JSON out) behind one content-addressed
cache (docs/architecture.md): :func:`make_llm` builds one from a small spec."""

from .backends import GeminiLLM, LLMBackend, LLMResponse, OpenAILLM, make_llm
from .cache import LLMCache, make_key

__all__ = [
    "GeminiLLM",
    "LLMBackend",
    "LLMCache",
    "LLMResponse",
    "OpenAILLM",
    "make_key",
    "make_llm",
]
