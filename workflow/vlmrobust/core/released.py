"""Released data read by more than one stage: the released distractor-reference
judgments of Distract-Bench (``<model>.reference.jsonl``), a release's question rows
with the rows that could not be a sample (:class:`Questions`), and how such bad rows
are counted by the kind of their reason (:func:`skipped_by_reason`)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from .io import iter_jsonl


def load_released_references(path: str | Path) -> dict[str, dict[str, Any]]:
    """The released distractor-reference judgments (``<model>.reference.jsonl`` of the
    Distract-Bench release) by key (``final_id``, else ``doc_id``, as text). Each row is
    kept whole, with ``verdict`` normalized to "yes" / "no", or None when it is neither:
    then ``verdict_error`` says why (``released parse_error`` for the release's judge
    failure, ``released verdict missing`` for none), so a failed released judgment stays
    a failure and is never judged again in silence. Rows with a verdict have
    ``verdict_error`` None."""
    out: dict[str, dict[str, Any]] = {}
    for lineno, row in iter_jsonl(path):
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


class Questions(dict):
    """``{source_id: Sample}`` plus the rows that could not be a sample (``skipped``: one
    ``{"row", "id", "reason"}`` per row, in file order) under ``on_bad_row: skip``."""

    def __init__(self, *args: Any, skipped: list[dict[str, Any]] | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self.skipped: list[dict[str, Any]] = list(skipped or [])

    @property
    def skipped_ids(self) -> set[str]:
        return {str(s["id"]) for s in self.skipped if s["id"] is not None}


def reason_kind(reason: str) -> str:
    """What kind of problem a bad row's reason names, without the row's own details:
    the text before its first ``": "`` or ``"; "``, quoted values as ``…``
    (``image file not found: /data/v1_3.png`` -> ``image file not found``; ``answer 'Q'
    is neither ...`` -> ``answer … is neither ...``)."""
    head = re.split(r": |; ", str(reason), maxsplit=1)[0]
    return re.sub(r"'[^']*'|\"[^\"]*\"", "…", head).strip()


def skipped_by_reason(skipped: list[dict[str, Any]]) -> dict[str, int]:
    """The skipped rows counted by the kind of their reason (:func:`reason_kind`), most
    frequent first; each row's own reason stays in ``skipped_rows``."""
    counts = Counter(reason_kind(s["reason"]) for s in skipped)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
