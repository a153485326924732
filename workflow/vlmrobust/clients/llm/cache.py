"""The content-addressed cache every LLM judge / writer / editor call goes through.

The key is the sha256 of a canonical JSON of everything that decides the answer:
backend, model, messages, the sha256 of every input image, and the decoding
parameters (docs/architecture.md). The value is the response text with its token use,
a cost estimate when prices are known, and a timestamp: one JSON file per key under
``root/<key[:2]>/<key>.json``, written atomically (a temporary file renamed into
place), so concurrent writers never leave a torn file and a rerun makes no call it
made before. API keys are never part of a key or a value.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from pathlib import Path
from typing import Any

from ...core.io import atomic_write_text

log = logging.getLogger(__name__)

_KEY = re.compile(r"^[0-9a-f]{64}$")
CACHE_FORMAT = 1


def canonical_json(obj: Any) -> str:
    """One spelling per value: sorted keys, no spaces, UTF-8, no NaN."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def make_key(payload: dict[str, Any]) -> str:
    """The cache key of a request payload (see :func:`request_payload`)."""
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def request_payload(
    *,
    backend: str,
    model: str,
    messages: list[dict[str, Any]],
    image_sha256: list[str],
    params: dict[str, Any],
) -> dict[str, Any]:
    """What a cache key is computed from (and what a cache entry records as ``request``)."""
    return {
        "format": CACHE_FORMAT,
        "backend": backend,
        "model": model,
        "messages": messages,
        "images": list(image_sha256),
        "params": params,
    }


class LLMCache:
    """A directory of cached LLM responses, addressed by :func:`make_key`.

    ``get`` returns the stored dict or None (a miss); ``put`` stores a dict (adding a
    ``timestamp`` when absent). ``stats`` counts hits, misses and writes of this
    instance. Safe to share between threads and between processes.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0
        self._writes = 0

    def __repr__(self) -> str:
        return f"LLMCache({str(self.root)!r})"

    @staticmethod
    def key(payload: dict[str, Any]) -> str:
        return make_key(payload)

    def path(self, key: str) -> Path:
        if not _KEY.match(key):
            raise ValueError(f"LLM cache key {key!r} is not a sha256 hex digest")
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.path(key)
        value: dict[str, Any] | None = None
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = None
        except UnicodeDecodeError as exc:  # a damaged file: asked again, overwritten
            log.warning("LLM cache entry %s is not UTF-8 (%s); treating as a miss", path, exc)
            text = None
        if text is not None:
            try:
                loaded = json.loads(text)
            except json.JSONDecodeError as exc:
                log.warning(
                    "LLM cache entry %s is not valid JSON (%s); treating as a miss", path, exc
                )
            else:
                if isinstance(loaded, dict) and isinstance(loaded.get("text"), str):
                    value = loaded
                else:
                    log.warning("LLM cache entry %s has no 'text'; treating as a miss", path)
        with self._lock:
            if value is None:
                self._misses += 1
            else:
                self._hits += 1
        return value

    def put(self, key: str, value: dict[str, Any]) -> None:
        if not isinstance(value.get("text"), str):
            raise ValueError("an LLM cache value needs a 'text' string")
        record = dict(value)
        record.setdefault("timestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        record["key"] = key
        atomic_write_text(self.path(key), json.dumps(record, ensure_ascii=False, indent=1) + "\n")
        with self._lock:
            self._writes += 1

    def __contains__(self, key: str) -> bool:
        return self.path(key).is_file()

    @property
    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"hits": self._hits, "misses": self._misses, "writes": self._writes}
