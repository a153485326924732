"""The explorer's data files: JavaScript files that hand one JSON payload each to the page.

A page opened from the file system (``file://``) may not ``fetch`` a JSON file, but it
may load a ``<script>``; every data file is therefore one statement,
``EXPLORER.put(<key>, <payload>);``, and the page (``assets/explorer.js``) keeps what
``put`` receives under its key. The JSON is compact, its object keys sorted (a rerun
writes the same bytes), and ``<``, ``>``, ``&``, U+2028 and U+2029 are written as
``\\u003c`` ... (only JSON strings can hold them, where the escape means the same
character), so no text of a model's output can end the script or break the parse.

Large collections are split into parts: an item goes to part :func:`key_chunk` (FNV-1a
32-bit of its UTF-8 key, modulo the number of parts; ``explorer.js``'s ``chunkOf``
computes the same), and :func:`chunk_count` picks the smallest number of parts that
keeps every part under :data:`PART_BYTES`. No data file is bigger than
:data:`MAX_FILE_BYTES`: :func:`write_js` refuses to write one.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ...core.io import atomic_write_text, iter_jsonl

__all__ = [
    "MAX_FILE_BYTES",
    "PART_BYTES",
    "chunk_count",
    "dumps",
    "fnv1a32",
    "item_bytes",
    "js_payload",
    "key_chunk",
    "remove_stale",
    "write_parts",
    "write_js",
    "write_summary",
]

#: no data file of the explorer is bigger (the builders split to stay under it)
MAX_FILE_BYTES = 2_000_000
#: the size every part of a split collection stays under
PART_BYTES = 1_500_000

_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def dumps(value: Any) -> str:
    """``value`` as compact JSON with sorted keys and the script-safe escapes; NaN or an
    infinity is an error (JSON has none)."""
    text = json.dumps(
        value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
    )
    return text.translate(_ESCAPES)


def js_payload(key: str, payload: Any) -> str:
    """The data file that hands ``payload`` to the page under ``key``."""
    return f"EXPLORER.put({dumps(key)}, {dumps(payload)});\n"


def write_js(path: str | os.PathLike, key: str, payload: Any) -> int:
    """Write the data file of ``payload`` atomically; its size in bytes. A file over
    :data:`MAX_FILE_BYTES` is an error (the caller splits its data)."""
    data = js_payload(key, payload)
    size = len(data.encode("utf-8"))
    if size > MAX_FILE_BYTES:
        raise ValueError(
            f"{path}: the data file for {key!r} would be {size} bytes, over the explorer's "
            f"limit of {MAX_FILE_BYTES}"
        )
    atomic_write_text(path, data)
    return size


def write_summary(path: str | os.PathLike, summary: Mapping[str, Any]) -> None:
    """A folder's ``summary.json`` (indented, sorted keys, a final newline)."""
    text = json.dumps(summary, ensure_ascii=False, sort_keys=True, indent=1, allow_nan=False)
    atomic_write_text(path, text + "\n")


def fnv1a32(text: str) -> int:
    """The 32-bit FNV-1a hash of ``text``'s UTF-8 bytes (``"a"`` -> ``0xe40c292c``)."""
    h = _FNV_OFFSET
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return h


def key_chunk(key: str, n: int) -> int:
    """The part (0 ... n-1) that holds ``key``'s item when a collection has ``n`` parts."""
    if n < 1:
        raise ValueError(f"a collection has at least one part, not {n}")
    return fnv1a32(key) % n


def item_bytes(key: str, value: Any) -> int:
    """The bytes the item takes in a serialized object (``"key":value``, no comma)."""
    return len(f"{dumps(key)}:{dumps(value)}".encode())


def chunk_count(sizes: Mapping[str, int], overhead: int, what: str) -> int:
    """The smallest number of parts K such that every part (``overhead`` bytes plus its
    items: ``sizes`` maps a key to :func:`item_bytes`, plus a comma between two items)
    stays under :data:`PART_BYTES` with items assigned by :func:`key_chunk`. An item
    that cannot fit any part is an error naming ``what`` and the key."""
    limit = PART_BYTES - overhead
    for key, size in sizes.items():
        if size + 1 >= limit:
            raise ValueError(
                f"{what}: the item {key!r} takes {size} bytes; no part of the explorer can "
                f"hold it (at most {PART_BYTES} bytes a part)"
            )
    total = sum(sizes.values()) + len(sizes)
    start = max(1, math.ceil(total / limit))
    for k in range(start, start + 4 * len(sizes) + 64):
        parts = [0] * k
        for key, size in sizes.items():
            parts[key_chunk(key, k)] += size + 1
        if max(parts) < limit:
            return k
    raise ValueError(f"{what}: found no number of parts that keeps every part under the limit")


def remove_stale(folder: Path, pattern: str, keep: Iterable[Path]) -> None:
    """Remove the files of ``folder`` matching ``pattern`` that this build did not write
    (a rerun with fewer parts or images leaves none behind)."""
    kept = {p.name for p in keep}
    if not folder.is_dir():
        return
    for path in sorted(folder.glob(pattern)):
        if path.is_file() and path.name not in kept:
            path.unlink()


def write_parts(
    folder: Path,
    stem: str,
    key_prefix: str,
    items: Mapping[str, Any],
    payload: Callable[[int, int, dict[str, Any]], dict[str, Any]],
    what: str,
) -> list[tuple[Path, int]]:
    """Split ``items`` into the fewest parts under :data:`PART_BYTES` (by
    :func:`key_chunk` of each item's key) and write part ``k`` as ``<stem><k>.js`` with
    the data key ``<key_prefix>/<k>`` and the payload ``payload(k, K, items of part
    k)``; the files written and their sizes. Part files of an earlier build that this
    one does not write are removed."""
    biggest = payload(999_999, 999_999, {})
    overhead = len(js_payload(f"{key_prefix}/999999", biggest).encode("utf-8"))
    sizes = {key: item_bytes(key, value) for key, value in items.items()}
    count = chunk_count(sizes, overhead, what)
    buckets: list[dict[str, Any]] = [{} for _ in range(count)]
    for key, value in items.items():
        buckets[key_chunk(key, count)][key] = value
    written = []
    for k, bucket in enumerate(buckets):
        path = folder / f"{stem}{k}.js"
        written.append((path, write_js(path, f"{key_prefix}/{k}", payload(k, count, bucket))))
    remove_stale(folder, f"{stem}*.js", [p for p, _ in written])
    return written


def rows_by(path: str, field: str, what: str) -> dict[str, dict[str, Any]]:
    """A JSONL file's rows by the string ``field`` (``key``, ``sample_id``); a row
    without it, or repeating one, is an error naming the file and the line."""
    rows: dict[str, dict[str, Any]] = {}
    lines: dict[str, int] = {}
    for lineno, row in iter_jsonl(path):
        value = row.get(field) if isinstance(row, dict) else None
        if not isinstance(value, str) or not value:
            raise ValueError(f"{path}:{lineno}: a {what} row without {field}")
        if value in rows:
            raise ValueError(
                f"{path}:{lineno}: {field} {value!r} repeats (first at line {lines[value]})"
            )
        rows[value], lines[value] = row, lineno
    return rows
