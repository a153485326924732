"""The explorer's cell folder of one (model, dataset, condition, prompt setting).

:func:`build_cell` reads the cell's scored CSV (``results/scored/<model>/<dataset>/
<condition>/<prompt>.csv``), the clean condition's scored CSV of the same model, dataset
and prompt (for a perturbed condition), the outputs JSONL and the judge files (JSONL
keyed by ``key``; :data:`JUDGE_KINDS`) and writes, under ``results/explorer/cells/
<model>/<dataset>/<condition>/<prompt>/``:

* ``rows.js`` — ``EXPLORER.put("rows/<model>/<dataset>/<condition>/<prompt>", {"model",
  "dataset", "condition", "prompt", "clean_condition", "chunks", "row_parts",
  "columns": COLUMNS, "rows": [[...], ...]})``: one row per scored row, in file order,
  short texts clipped to :data:`ROW_TEXT_LIMIT` characters. ``flip`` pairs a row with
  the clean row of the same (sample, draw): ``lost`` (clean right, here wrong),
  ``gained``, ``right``, ``wrong``, ``unpaired`` (no clean row), ``failed`` (either
  request failed after every retry: no answer to compare); ``""`` on a cell
  without a clean file (the clean cell itself). ``judges``: a short verdict per judge
  kind (:func:`short_verdict`) or null.
* ``rows<r>.js`` (r >= 1, only for a cell too large for one file: ``row_parts`` > 1) —
  ``EXPLORER.put("rows/<model>/<dataset>/<condition>/<prompt>/<r>", {"part": r,
  "row_parts", "rows"})``: the rows continue in file order, part after part.
* ``text<k>.js`` — ``EXPLORER.put("text/<model>/<dataset>/<condition>/<prompt>/<k>",
  {"part": k, "texts": {key: {"answer_text", "thinking", "raw_text", "clipped",
  "judges"}}})``, a key in part ``key_chunk(key, chunks)``; each text clipped to
  :data:`TEXT_LIMIT` characters (``clipped`` true; the outputs file has the whole text);
  ``raw_text`` only when it is more than the answer and the thinking; ``judges``: each
  judge's full record less ``key``, ``model``, ``dataset``, ``condition``, ``prompt``.
* ``summary.json`` — the cell's identity, ``n``, ``chunks``, ``row_parts``, ``bytes``,
  ``counts`` (of each flip class), ``correct``, ``score_sum``, ``errors`` and ``flips``
  (``{key: "lost" | "gained"}``: what the index's cross-model agreement is built from).

Bad input is an error naming the file and line: a scored row whose key repeats or that
is not a scored row, a clean row repeating a (sample, draw), an output or judge row
without key or repeating one, a scored key with no output row, an unknown judge kind or
a named judge file that does not exist.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ...core.io import read_utf8
from ...core.records import chain_text, output_key
from ...core.scored import SCORED_NUMBERS, SCORED_REQUIRED
from ..text import clip_text
from .data import (
    PART_BYTES,
    dumps,
    js_payload,
    remove_stale,
    rows_by,
    write_js,
    write_parts,
    write_summary,
)

__all__ = [
    "COLUMNS",
    "FLIPS",
    "JUDGE_KINDS",
    "ROW_TEXT_LIMIT",
    "TEXT_LIMIT",
    "build_cell",
    "flip_class",
    "judge_files",
    "read_scored",
    "short_verdict",
]

COLUMNS = (
    "key",
    "variant_id",
    "sample_id",
    "draw",
    "correct",
    "score",
    "prediction",
    "method",
    "mode",
    "harness_bug",
    "reason",
    "finish_reason",
    "error",
    "thinking_tokens",
    "completion_tokens",
    "flip",
    "clean_key",
    "judges",
)
#: the flip classes of a perturbed cell's rows, against the clean condition (``failed``:
#: the request of either failed after every retry, no answer to compare; the metrics
#: leave such rows out, so the explorer never counts them as a flip)
FLIPS = ("lost", "gained", "right", "wrong", "unpaired", "failed")
#: the judge kinds a cell reads (``attributes:<extractor>`` for the attribute judges)
JUDGE_KINDS = ("reference", "mathverse", "hallucination", "attributes:<extractor>")
#: the characters of a row's prediction, reason and error; of a full text
ROW_TEXT_LIMIT = 160
TEXT_LIMIT = 32_000
#: what a judge record shown with a text leaves out (the cell says it)
_JUDGE_DROP = ("key", "model", "dataset", "condition", "prompt")


def judge_files(specs: Iterable[str]) -> dict[str, str]:
    """``KIND=PATH`` options -> ``{kind: path}``; an unknown kind, a repeated kind or a
    file that does not exist is an error."""
    found: dict[str, str] = {}
    for spec in specs:
        kind, sep, path = spec.partition("=")
        if not sep or not kind or not path:
            raise ValueError(f"--judge {spec!r}: not KIND=PATH")
        known = kind in JUDGE_KINDS[:3] or (kind.startswith("attributes:") and kind[11:])
        if not known:
            raise ValueError(
                f"--judge {spec!r}: unknown judge kind {kind!r} (known: {JUDGE_KINDS})"
            )
        if kind in found:
            raise ValueError(f"--judge {spec!r}: the kind {kind!r} is given twice")
        if not Path(path).is_file():
            raise FileNotFoundError(f"--judge {spec!r}: no file {path}")
        found[kind] = path
    return found


def _number(path: str, line: int, row: dict[str, Any], col: str) -> Any:
    value = row.get(col)
    if col == "draw" and value is None:
        return 0
    try:
        number = SCORED_NUMBERS[col](value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}:{line}: {col} = {value!r} is not a number") from exc
    if isinstance(number, float) and not math.isfinite(number):
        raise ValueError(f"{path}:{line}: {col} = {value!r} is not a finite number")
    if col == "correct" and number not in (0, 1):
        raise ValueError(f"{path}:{line}: correct = {value!r} is neither 0 nor 1")
    return number


def _tokens(path: str, line: int, row: dict[str, Any], col: str) -> int | None:
    value = row.get(col)
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError as exc:
        raise ValueError(f"{path}:{line}: {col} = {value!r} is not a number") from exc
    if not number.is_integer():
        raise ValueError(f"{path}:{line}: {col} = {value!r} is not a whole number")
    return int(number)


def read_scored(path: str) -> list[dict[str, Any]]:
    """A scored CSV's rows (:mod:`vlmrobust.core.scored`): empty cells None, ``draw``
    (empty: 0) and ``correct`` int, ``score`` float, the token counts int or None,
    ``key`` filled in (``<variant_id>#<draw>``) when empty, ``line`` the row's first
    line in the file. A repeated key is an error naming both lines."""
    reader = csv.DictReader(io.StringIO(read_utf8(path), newline=""))
    lacking = [c for c in SCORED_REQUIRED if c not in (reader.fieldnames or [])]
    if lacking:
        raise ValueError(f"{path}: not a scored CSV (no column(s) {', '.join(lacking)})")
    rows: list[dict[str, Any]] = []
    first: dict[str, int] = {}
    start = reader.line_num + 1
    for raw in reader:
        line, start = start, reader.line_num + 1
        if None in raw:
            raise ValueError(f"{path}:{line}: more fields than the header has")
        row: dict[str, Any] = {k: (v if v not in ("", None) else None) for k, v in raw.items()}
        for col in SCORED_NUMBERS:
            row[col] = _number(path, line, row, col)
        for col in ("thinking_tokens", "completion_tokens"):
            row[col] = _tokens(path, line, row, col)
        if row["variant_id"] is None or row["sample_id"] is None:
            raise ValueError(f"{path}:{line}: a scored row without variant_id or sample_id")
        key = row["key"] = row.get("key") or output_key(row["variant_id"], row["draw"])
        if key in first:
            raise ValueError(f"{path}:{line}: key {key!r} repeats (first at line {first[key]})")
        first[key], row["line"] = line, line
        rows.append(row)
    return rows


def _clean_index(path: str) -> dict[tuple[str, int], dict[str, Any]]:
    """The clean condition's rows by (sample, draw); a repeated pair is an error."""
    index: dict[tuple[str, int], dict[str, Any]] = {}
    for row in read_scored(path):
        pair = (row["sample_id"], row["draw"])
        if pair in index:
            raise ValueError(
                f"{path}:{row['line']}: sample {pair[0]!r} draw {pair[1]} repeats (first at "
                f"line {index[pair]['line']}); a clean condition has one row per sample and draw"
            )
        index[pair] = row
    return index


def flip_class(clean_correct: int | None, correct: int) -> str:
    """``lost`` / ``gained`` / ``right`` / ``wrong`` against the clean row's
    correctness; ``unpaired`` when there is no clean row (None)."""
    if clean_correct is None:
        return "unpaired"
    if clean_correct:
        return "right" if correct else "lost"
    return "gained" if correct else "wrong"


def short_verdict(kind: str, record: Mapping[str, Any]) -> str | int:
    """A judge record's verdict as the rows show it: ``yes`` / ``no`` (reference: the
    output refers to the distractor; mathverse: the answer is right; hallucination: the
    chain hallucinates), an attribute judge's total count of attributes, ``failed`` when
    the judgment gave no verdict."""
    if kind.startswith("attributes:"):
        counts = record.get("counts")
        if record.get("error") or not isinstance(counts, Mapping):
            return "failed"
        return sum(int(v) for v in counts.values() if isinstance(v, (int, float)))
    value = record.get("hallucinated" if kind == "hallucination" else "verdict")
    if kind == "reference":
        return value if isinstance(value, str) and value else "failed"
    if value in (True, 1, "1", "yes"):
        return "yes"
    if value in (False, 0, "0", "no"):
        return "no"
    return "failed"


def _clip_all(value: Any, clipped: list[bool]) -> Any:
    """``value`` with every text cut to :data:`TEXT_LIMIT` characters (``clipped[0]``
    set when one was)."""
    if isinstance(value, str):
        if len(value) > TEXT_LIMIT:
            clipped[0] = True
            return value[:TEXT_LIMIT]
        return value
    if isinstance(value, Mapping):
        return {str(k): _clip_all(v, clipped) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clip_all(v, clipped) for v in value]
    return value


def _split_as_shown(raw: str, thinking: Any, answer: Any) -> bool:
    """Whether the raw text is only the thinking and the answer in their default
    markers (``<think>...</think>``): the page rebuilds nothing from it, so it is not
    stored twice (a model with markers of its own keeps its raw text)."""
    from ...clients.vlm.thinking import split_thinking

    found_thinking, found_answer = split_thinking(raw)
    return found_thinking == (thinking or "").strip() and found_answer == (answer or "").strip()


def _text(output: Mapping[str, Any], judged: Mapping[str, Mapping[str, Any]]) -> dict:
    """A row's full texts (clipped) and its judges' records."""
    answer, thinking, raw = (output.get(k) for k in ("answer_text", "thinking", "raw_text"))
    shown = {(answer or "").strip(), ((thinking or "") + (answer or "")).strip()}
    shown.add(chain_text(dict(output)).strip())
    if raw is not None and (
        str(raw).strip() in shown or _split_as_shown(str(raw), thinking, answer)
    ):
        raw = None
    clipped = [False]
    judges = {
        kind: {k: v for k, v in record.items() if k not in _JUDGE_DROP}
        for kind, record in judged.items()
    }
    text = {"answer_text": answer, "thinking": thinking, "raw_text": raw, "judges": judges}
    text = _clip_all(text, clipped)
    text["clipped"] = clipped[0]
    return text


def _row(row: Mapping[str, Any], flip: str, clean_key: str | None, judges: dict) -> list:
    error = row.get("error")
    return [
        row["key"],
        row["variant_id"],
        row["sample_id"],
        row["draw"],
        row["correct"],
        row["score"],
        clip_text(row.get("prediction"), ROW_TEXT_LIMIT),
        row.get("method"),
        row.get("mode"),
        row.get("harness_bug"),
        clip_text(row.get("reason"), ROW_TEXT_LIMIT),
        row.get("finish_reason"),
        None if error is None else clip_text(error, ROW_TEXT_LIMIT),
        row["thinking_tokens"],
        row["completion_tokens"],
        flip,
        clean_key,
        judges or None,
    ]


def _identity(path: str, rows: list[dict[str, Any]]) -> dict[str, str]:
    """The cell's model, dataset and condition (every row must agree; an empty file's
    are its folders', ``<model>/<dataset>/<condition>/<prompt>.csv``) and its prompt
    setting, the file's stem."""
    p = Path(path).absolute()
    found = {"model": p.parents[2].name, "dataset": p.parents[1].name, "condition": p.parent.name}
    if rows:
        found = {k: rows[0][k] for k in found}
    for row in rows:
        for k, v in found.items():
            if row[k] != v:
                raise ValueError(
                    f"{path}:{row['line']}: {k} {row[k]!r} differs from the first row's {v!r} "
                    "(a scored file holds one model, dataset and condition)"
                )
    return {**found, "prompt": p.stem}


def _write_rows(out: Path, key: str, header: dict[str, Any], rows: list[list]) -> list:
    """``rows.js`` (the header and the first rows) and, when the rows do not fit one
    file, ``rows<r>.js`` with the rest in order; the files written and their sizes."""
    biggest = {**header, "part": 999_999, "row_parts": 999_999, "rows": []}
    limit = PART_BYTES - len(js_payload(key + "/999999", biggest).encode("utf-8"))
    parts: list[list[list]] = [[]]
    size = 0
    for row in rows:
        row_size = len(dumps(row).encode("utf-8")) + 1
        if parts[-1] and size + row_size >= limit:
            parts.append([])
            size = 0
        parts[-1].append(row)
        size += row_size
    written = []
    for r, part in enumerate(parts):
        path = out / ("rows.js" if r == 0 else f"rows{r}.js")
        if r == 0:
            payload = {**header, "row_parts": len(parts), "rows": part}
            written.append((path, write_js(path, key, payload)))
        else:
            payload = {"part": r, "row_parts": len(parts), "rows": part}
            written.append((path, write_js(path, f"{key}/{r}", payload)))
    remove_stale(out, "rows*.js", [p for p, _ in written])
    return written


def _pairs(
    rows: list[dict[str, Any]], clean: dict[tuple[str, int], dict[str, Any]] | None
) -> list[tuple[str, str | None]]:
    """Each row's (flip, clean key): ``("", None)`` without a clean file."""
    if clean is None:
        return [("", None)] * len(rows)
    out = []
    for row in rows:
        match = clean.get((row["sample_id"], row["draw"]))
        if match is None:
            out.append(("unpaired", None))
        elif row.get("error") is not None or match.get("error") is not None:
            out.append(("failed", match["key"]))
        else:
            out.append((flip_class(match["correct"], row["correct"]), match["key"]))
    return out


def _judged(judges: Mapping[str, str]) -> dict[str, dict[str, dict[str, Any]]]:
    return {kind: rows_by(path, "key", f"{kind} judge") for kind, path in sorted(judges.items())}


def build_cell(
    scored: str,
    clean_scored: str | None,
    outputs: str,
    judges: Mapping[str, str],
    out_dir: str,
) -> dict[str, Any]:
    """Write the cell folder of one scored file (module docstring); its summary."""
    rows = read_scored(scored)
    same = clean_scored is not None and Path(clean_scored).resolve() == Path(scored).resolve()
    clean_file = None if same else clean_scored
    clean = _clean_index(clean_file) if clean_file is not None else None
    found = _identity(scored, rows)
    clean_condition = None
    if clean_file is not None:  # the clean rows' condition (an empty file's: its folder)
        first = next(iter(clean.values()), None) if clean else None
        clean_condition = first["condition"] if first else Path(clean_file).absolute().parent.name
    out_rows = rows_by(outputs, "key", "outputs")
    judged = _judged(judges)
    cell = "/".join(found[k] for k in ("model", "dataset", "condition", "prompt"))
    table, texts, flips = [], {}, {}
    counts = dict.fromkeys(FLIPS, 0)
    for row, (flip, clean_key) in zip(rows, _pairs(rows, clean), strict=True):
        key = row["key"]
        if key not in out_rows:
            raise ValueError(f"{scored}:{row['line']}: key {key!r} has no row in {outputs}")
        mine = {kind: by_key[key] for kind, by_key in judged.items() if key in by_key}
        verdicts = {kind: short_verdict(kind, rec) for kind, rec in mine.items()}
        table.append(_row(row, flip, clean_key, verdicts))
        texts[key] = _text(out_rows[key], mine)
        if flip:
            counts[flip] += 1
        if flip in ("lost", "gained"):
            flips[key] = flip
    out = Path(out_dir)

    def payload(k: int, count: int, part: dict[str, Any]) -> dict[str, Any]:
        return {"part": k, "texts": part}

    parts = write_parts(out, "text", f"text/{cell}", texts, payload, scored)
    header = {**found, "clean_condition": clean_condition, "chunks": len(parts)}
    header["columns"] = list(COLUMNS)
    written = _write_rows(out, f"rows/{cell}", header, table) + parts
    summary = {
        **found,
        "clean_condition": clean_condition,
        "n": len(rows),
        "chunks": len(parts),
        "row_parts": len(written) - len(parts),
        "bytes": sum(size for _, size in written),
        "counts": counts,
        "correct": sum(r["correct"] for r in rows),
        "score_sum": math.fsum(r["score"] for r in rows),
        "errors": sum(1 for r in rows if r.get("error") is not None),
        "flips": flips,
    }
    write_summary(out / "summary.json", summary)
    return summary
