"""The LLM question writer of VisArgs: one question per (image, visual premise).

VisArgs has no question field (:mod:`vlmrobust.data.visargs`). When a dataset's
``question_writer`` is an LLM spec (``backend: openai | gemini``, model, base_url,
api_key_env, options, temperature, max_tokens, cache_dir), this step asks it for each
(image, visual premise) — strict JSON ``{"question": ...}`` (:data:`QUESTION_SCHEMA`),
every call cached by content in the LLM cache (a rerun makes no call) — and writes the
questions file the VisArgs adapter then reads (``results/questions/<dataset>/
questions.jsonl`` in the workflow), one JSON line per (image, premise)::

    {"key": "<image id>-vp<k>", "question": "...", "writer": "<backend>/<model>",
     "cache_key": "<sha256 of the call>", "error": null}

A failed call writes ``"question": null`` and its ``error``; the adapter turns it into a
bad row (``the question writer failed: ...``), so the dataset's ``on_bad_row`` applies.
The LLM cache keeps no failed call: writing the questions again retries exactly those.

The items asked about come from the data layer
(:func:`vlmrobust.data.visargs.question_items`: key, premise, box, image_size, region,
conclusion); the ``vlmrobust write-questions`` command joins the two.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..clients.llm import LLMCache, make_llm
from ..core.io import write_jsonl
from ..core.paths import LLM_CACHE

__all__ = [
    "DEFAULT_CACHE_DIR",
    "QUESTION_SCHEMA",
    "question_prompt",
    "write_questions",
    "writer_name",
]

log = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = LLM_CACHE

QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["question"],
    "properties": {"question": {"type": "string", "minLength": 5}},
}


def writer_name(writer: dict[str, Any]) -> str:
    """``<backend>/<model>``: how the questions file and the samples name the writer."""
    return f"{writer.get('backend')}/{writer.get('model')}"


def question_prompt(item: dict[str, Any]) -> list[dict[str, str]]:
    """The question writer's messages for one (image, premise) item."""
    box, size = item["box"], item["image_size"]
    return [
        {
            "role": "system",
            "content": (
                "You write evaluation questions for a visual-reasoning benchmark. Answer "
                'with JSON only: {"question": "..."}.'
            ),
        },
        {
            "role": "user",
            "content": (
                "An image shows a visual argument. One annotated region of it, the box "
                f"{box} (x0, y0, x1, y1 in pixels of a {size[0]}x{size[1]} "
                f"image, in the {item['region']} part), shows:\n"
                f"{item['premise']}\n\nThe image's conclusion: "
                f"{item.get('conclusion') or '(none given)'}\n\n"
                "Write one short question about the image whose answer is what this "
                "region shows. The question must not reveal the answer; it may name the "
                "region's position."
            ),
        },
    ]


def write_questions(
    items: Sequence[dict[str, Any]],
    writer: dict[str, Any],
    out: str | Path,
    *,
    cache_dir: str | Path | None = None,
    where: str = "question_writer",
) -> dict[str, int]:
    """Ask the LLM ``writer`` one question per item and write them to ``out``.

    ``cache_dir`` (default: the writer's ``cache_dir``, else ``results/cache/llm``) is
    the LLM cache. ``where`` names the writer's setting in errors. Returns counts:
    ``written`` (lines), ``failed`` (calls that gave no question), ``cached`` (answers
    that came from the cache, no request).
    """
    if writer.get("backend", "template") == "template":
        raise ValueError(
            f"{where}: the template writer needs no questions file (the adapter writes "
            "its questions); set an LLM spec (backend: openai | gemini) to write them"
        )
    cache = LLMCache(Path(cache_dir or writer.get("cache_dir") or DEFAULT_CACHE_DIR))
    try:
        llm = make_llm(writer, cache)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    keys = [str(item["key"]) for item in items]
    if len(set(keys)) != len(keys):
        dup = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"{where}: the items repeat keys {', '.join(dup[:5])}")
    calls = [
        {
            "messages": question_prompt(item),
            "json_schema": QUESTION_SCHEMA,
            "temperature": float(writer.get("temperature", 0.0)),
            "max_tokens": int(writer.get("max_tokens", 256)),
        }
        for item in items
    ]
    responses = llm.complete_many(calls) if calls else []
    name = writer_name(writer)
    rows = []
    failed = cached = 0
    for key, resp in zip(keys, responses, strict=True):
        if resp.error is not None:
            failed += 1
            log.warning("%s: no question for %s: %s", where, key, resp.error)
            rows.append(
                {"key": key, "question": None, "writer": name, "cache_key": resp.key,
                 "error": resp.error}
            )  # fmt: skip
            continue
        cached += int(resp.cached)
        question = str(resp.parsed_json["question"]).strip()
        rows.append(
            {"key": key, "question": question, "writer": name, "cache_key": resp.key,
             "error": None}
        )  # fmt: skip
    n = write_jsonl(out, rows)
    return {"written": n, "failed": failed, "cached": cached}
