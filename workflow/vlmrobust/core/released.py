"""Files of released results read by more than one stage (the released
distractor-reference judgments of Distract-Bench, ``<model>.reference.jsonl``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def load_released_references(path: str | Path) -> dict[str, dict[str, Any]]:
    """The released distractor-reference judgments (``<model>.reference.jsonl`` of the
    Distract-Bench release) by key (``final_id``, else ``doc_id``, as text). Each row is
    kept whole, with ``verdict`` normalized to "yes" / "no", or None when it is neither:
    then ``verdict_error`` says why (``released parse_error`` for the release's judge
    failure, ``released verdict missing`` for none), so a failed released judgment stays
    a failure and is never judged again in silence. Rows with a verdict have
    ``verdict_error`` None."""
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
            raw = str(row.get("verdict") or "").strip()
            verdict = raw.lower()
            row["verdict"] = verdict if verdict in ("yes", "no") else None
            row["verdict_error"] = None
            if row["verdict"] is None:
                row["verdict_error"] = f"released {raw}" if raw else "released verdict missing"
            row["key"] = key
            out[key] = row
    return out
