"""Files of released results read by more than one stage (the released
distractor-reference judgments of Distract-Bench, ``<model>.reference.jsonl``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load_released_references(path: str | Path) -> dict[str, dict[str, Any]]:
    """The released distractor-reference judgments (``<model>.reference.jsonl`` of the
    Distract-Bench release) by key (``final_id``, else ``doc_id``, as text). Each row is
    kept whole, with ``verdict`` normalized to "yes" / "no" (None when it is neither)."""
    out: dict[str, dict[str, Any]] = {}
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
            key = row.get("final_id", row.get("doc_id"))
            if key is None:
                raise ValueError(f"{path}:{lineno}: neither final_id nor doc_id")
            key = str(key)
            if key in out:
                raise ValueError(f"{path}:{lineno}: duplicate key {key!r}")
            verdict = str(row.get("verdict") or "").strip().lower()
            row["verdict"] = verdict if verdict in ("yes", "no") else None
            row["key"] = key
            out[key] = row
    return out
