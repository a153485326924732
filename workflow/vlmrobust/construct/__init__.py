"""Distract-Bench construction (paper §3): seeds → knowledge base → retrieval →
edit-instruction writer → image editor → candidates for human review."""

from .editor import (
    MAX_AREA_FRACTION,
    CompositeEditor,
    EditorError,
    GeminiImageEditor,
    OpenAIImageEditor,
    editor_prompt,
)
from .pipeline import build_candidates
from .seeds import (
    DEFAULT_SEEDS_DIR,
    KBEntry,
    KnowledgeBase,
    Seed,
    knowledge_base,
    load_seeds,
    retrieve,
    retrieve_entries,
)
from .writer import EDIT_SCHEMA, LLMWriter, OfflineWriter, WriterError, validate_edit

__all__ = [
    "DEFAULT_SEEDS_DIR",
    "EDIT_SCHEMA",
    "MAX_AREA_FRACTION",
    "CompositeEditor",
    "EditorError",
    "GeminiImageEditor",
    "KBEntry",
    "KnowledgeBase",
    "LLMWriter",
    "OfflineWriter",
    "OpenAIImageEditor",
    "Seed",
    "WriterError",
    "build_candidates",
    "editor_prompt",
    "knowledge_base",
    "load_seeds",
    "retrieve",
    "retrieve_entries",
    "validate_edit",
]
