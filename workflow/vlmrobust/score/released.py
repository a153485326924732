"""Importers of released results (lmms-eval, VLMEvalKit) into output rows, and rescoring.

Released runs are rescored with this project's rules; a correctness label in the file
(lmms-eval's ``llm_as_judge_eval.true_false``, VLMEvalKit's ``hit``/``score``) is never
copied — the released Distract-Bench labels are demonstrably wrong in places (a
``\\boxed{B}`` for target B marked False).

The questions are samples keyed by the dataset's own id (``meta["source_id"]``): the
samples stage's samples, or a dataset's rows in its hub schema converted without images
by :func:`vlmrobust.data.released.load_questions` (the ``vlmrobust score-released``
command does that); this module reads no dataset itself.

- :func:`import_lmms_eval` reads an lmms-eval ``*_samples_*.jsonl``: the id is
  ``doc_id`` (or another field, a dotted path reaching into nested ones, e.g.
  ``llm_as_judge_eval.question_id`` — plain lmms-eval numbers ``doc_id`` by row
  position, the released Distract-Bench files by the public id), the response is ``filtered_resps`` (a string, or the
  first string of a possibly nested list), else ``resps``; ``token_counts`` gives
  the completion tokens.
- :func:`import_vlmevalkit` reads a VLMEvalKit prediction file (``xlsx`` when openpyxl
  is installed, ``tsv``, ``csv``, ``json``, ``jsonl``; columns ``index``, ``question``,
  ``answer``, ``prediction``, optionally ``thinking``): the id is ``id`` when the file
  has such a column whose values are the dataset's ids (MMMU), else ``index``.
- :func:`import_jsonl` reads any JSONL of responses (format ``jsonl``, e.g. the
  released Idis outputs: several sampled responses per question): each row holds a
  question id naming a VARIANT of the condition's manifest (or a sample, by its
  ``sample_id`` or ``meta["source_id"]``, that has exactly one variant there, as on the
  clean condition), the response text and optionally the reasoning trace, the draw, the
  condition and the reasoning length; the fields are named by the ``imports`` entry
  (:func:`import_outputs`). Its rows keep their draw (``key`` = ``<variant_id>#<draw>``).
- :func:`score_released` imports a file, scores it and writes a CSV (``sample_id`` =
  the dataset's own id, ``prediction``, ``correct`` 0/1, ``score``, ``method``,
  ``rule``, ``reason``, ...).

Imported rows have ``prompt == "released"``, ``prompt_version`` = the format,
``backend`` = the format, ``source`` = the format, ``draw == 0`` (``jsonl``: the
row's draw), no image hashes (the released files do not say which image bytes were
used) and ``finish_reason "unknown"``.

Command line: ``vlmrobust score-released --format lmms-eval --dataset distract-bench
--questions questions.jsonl --samples model.samples.jsonl --out x.csv``.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..clients.vlm.thinking import split_thinking
from ..core.io import atomic_write, read_jsonl, read_utf8
from ..core.records import OutputRow, Sample, Variant, missing, output_key
from ..core.released import Questions, load_released_references, skipped_by_reason
from . import mode_counts, score_outputs

__all__ = [
    "FORMATS",
    "IMPORT_FORMATS",
    "KEYED_FORMATS",
    "ReleasedRows",
    "format_released_summary",
    "import_jsonl",
    "import_keyed_json",
    "import_lmms_eval",
    "import_outputs",
    "import_vlmevalkit",
    "model_turn",
    "released_summary",
    "score_released",
]

#: released files keyed by the dataset's own id (``{id: {field: value}}``), with the
#: field of the response, of the official pipeline's extraction and of its correctness:
#: MathVista's ``results/<model>/output_<model>.json`` and LogicVista's
#: ``eval/answers/<model>-answers.json``
KEYED_FORMATS: dict[str, dict[str, str | None]] = {
    "mathvista": {"response": "response", "extraction": "extraction", "label": "true_false"},
    "logicvista": {"response": "answer", "extraction": None, "label": None},
}
FORMATS = ("lmms-eval", "vlmevalkit", *KEYED_FORMATS)
#: the formats an ``imports`` entry may name: ``jsonl`` needs the condition's manifest
IMPORT_FORMATS = (*FORMATS, "jsonl")
#: where a released response that echoes its prompt (a LLaVA-style ``USER: ...
#: ASSISTANT: B``, few-shot answers included) starts the model's own turn; the text
#: after the LAST marker is scored, the raw text is kept whole
TURN_MARKERS = ("ASSISTANT:", "[/INST]")
#: VLMEvalKit's marker of a failed API call in ``prediction``
VLMEVALKIT_FAIL = "Failed to obtain answer"
#: the error of an imported row whose response is missing or empty
NO_RESPONSE = "the released row holds no response"

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- helpers


def _first_string(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _first_string(item)
            if found is not None:
                return found
    return None


def _completion_tokens(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, dict):
        for k in ("output_tokens", "completion_tokens", "num_output_tokens"):
            if isinstance(value.get(k), int):
                return value[k]
        return None
    if isinstance(value, (list, tuple)) and value:
        return _completion_tokens(value[0])
    return None


def model_turn(text: str) -> str:
    """The model's own turn of a released response: the text after the last
    :data:`TURN_MARKERS` marker (the whole text when there is none)."""
    cut = max((text.rfind(m) + len(m) for m in TURN_MARKERS if m in text), default=0)
    return text[cut:]


def _lookup(
    questions: Mapping[str, Sample], src_id: Any, where: str, counts: dict[str, int] | None = None
) -> Sample | None:
    """The question of a released row; None when its id is one of the question rows
    skipped as bad rows (``Questions.skipped``): the row is counted in
    ``counts["skipped_questions"]``, not scored."""
    if isinstance(src_id, float) and src_id.is_integer():
        src_id = int(src_id)
    key = str(src_id).strip()
    sample = questions.get(key)
    if sample is None and key in getattr(questions, "skipped_ids", ()):
        if counts is not None:
            counts["skipped_questions"] = counts.get("skipped_questions", 0) + 1
        return None
    if sample is None:
        some = ", ".join(list(questions)[:3])
        raise ValueError(
            f"{where}: id {key!r} is not among the {len(questions)} question rows "
            f"(ids look like {some}); are the questions and the results of the same dataset?"
        )
    return sample


def _output_row(
    sample: Sample,
    dataset: str,
    model: str,
    condition: str,
    fmt: str,
    text: str | None,
    *,
    thinking: str | None = None,
    completion_tokens: int | None = None,
    error: str | None = None,
    extracted: bool = False,
) -> OutputRow:
    """``extracted``: ``text`` is a released extraction, scored as it stands (no turn
    cut, no thinking split; an empty one is an extraction failure, not a fallback to a
    response)."""
    raw = text or ""
    if extracted:
        answer = raw.strip()
    elif thinking is None and raw:
        thinking, answer = split_thinking(model_turn(raw))
    else:
        answer = model_turn(raw).strip()
    return _released_row(
        sample.sample_id, sample.sample_id, dataset, condition, model, fmt, 0,
        raw, answer, thinking, error, completion_tokens=completion_tokens,
    )  # fmt: skip


def _released_row(
    variant_id: str,
    sample_id: str,
    dataset: str,
    condition: str,
    model: str,
    fmt: str,
    draw: int,
    raw: str,
    answer: str,
    thinking: str | None,
    error: str | None,
    **tokens: int | None,
) -> OutputRow:
    """An imported output row (module docstring: prompt ``released``, the format as
    prompt version, backend and source, no image hashes); ``tokens``:
    ``completion_tokens`` or ``thinking_tokens``."""
    return OutputRow(
        key=output_key(variant_id, draw),
        variant_id=variant_id,
        sample_id=sample_id,
        dataset=dataset,
        condition=condition,
        prompt="released",
        prompt_version=fmt,
        model=model,
        backend=fmt,
        model_revision="unknown",
        draw=draw,
        raw_text=raw,
        answer_text=answer,
        thinking=thinking,
        finish_reason="error" if error else "unknown",
        image_sha256=[],
        error=error,
        source=fmt,
        **tokens,
    )


def _check_unique(rows: list[OutputRow], where: str) -> None:
    seen: set[str] = set()
    for row in rows:
        if row.key in seen:
            raise ValueError(f"{where}: more than one result for sample {row.sample_id!r}")
        seen.add(row.key)


# --------------------------------------------------------------------------- lmms-eval


def import_lmms_eval(
    samples_jsonl: str | Path,
    dataset_name: str,
    questions: Mapping[str, Sample],
    model: str,
    condition: str,
    id_field: str = "doc_id",
    extraction_field: str | None = None,
    counts: dict[str, int] | None = None,
) -> list[OutputRow]:
    """Rows of an lmms-eval samples JSONL as output rows (module docstring).

    ``extraction_field`` (dotted): score that released extraction instead of the
    response. ``counts["skipped_questions"]`` counts the rows of skipped questions."""
    path = Path(samples_jsonl)
    rows: list[OutputRow] = []
    counts = counts if counts is not None else {}
    for lineno, rec in enumerate(read_jsonl(path), 1):
        where = f"{path}:{lineno}"
        value = _get_path(rec, id_field)
        if missing(value):
            raise ValueError(
                f"{where}: no {id_field!r} field (the dataset's id of the row; a dotted path "
                "such as llm_as_judge_eval.question_id reaches into nested fields)"
            )
        sample = _lookup(questions, value, where, counts)
        if sample is None:
            continue
        if extraction_field is not None:
            rows.append(_extracted_row(sample, dataset_name, model, condition, "lmms-eval",
                                       rec, extraction_field))  # fmt: skip
            continue
        text = _first_string(rec.get("filtered_resps"))
        if text is None:
            text = _first_string(rec.get("resps"))
        error = None if text is not None else "the released row holds no response"
        rows.append(
            _output_row(
                sample,
                dataset_name,
                model,
                condition,
                "lmms-eval",
                text,
                completion_tokens=_completion_tokens(rec.get("token_counts")),
                error=error,
            )
        )
    _check_unique(rows, str(path))
    return rows


# --------------------------------------------------------------------------- VLMEvalKit


def _read_table(path: Path) -> list[dict[str, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return read_jsonl(path)
    if suffix == ".json":
        try:
            data = json.loads(read_utf8(path))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
        if isinstance(data, dict):
            data = (
                list(data.values()) if all(isinstance(v, dict) for v in data.values()) else [data]
            )
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of rows")
        return data
    import pandas as pd

    if suffix == ".xlsx":
        try:
            import openpyxl  # noqa: F401
        except ImportError as exc:
            raise ValueError(
                f"{path}: reading .xlsx needs openpyxl, which is not installed; install it "
                "or export the sheet as .tsv/.csv"
            ) from exc
        frame = pd.read_excel(path, dtype=str, keep_default_na=False)
    elif suffix in (".tsv", ".csv"):
        text = read_utf8(path)
        try:
            frame = pd.read_csv(
                io.StringIO(text),
                sep="\t" if suffix == ".tsv" else ",",
                dtype=str,
                keep_default_na=False,
            )
        except (pd.errors.ParserError, csv.Error) as exc:
            raise ValueError(f"{path}: not a readable {suffix[1:].upper()} file ({exc})") from exc
    else:
        raise ValueError(f"{path}: unsupported VLMEvalKit file type; use xlsx, tsv, csv or jsonl")
    return frame.to_dict(orient="records")


def import_vlmevalkit(
    path: str | Path,
    dataset_name: str,
    questions: Mapping[str, Sample],
    model: str,
    condition: str,
    id_column: str | None = None,
    extraction_field: str | None = None,
    counts: dict[str, int] | None = None,
) -> list[OutputRow]:
    """Rows of a VLMEvalKit prediction file as output rows (module docstring);
    ``extraction_field`` and ``counts`` as for :func:`import_lmms_eval`."""
    path = Path(path)
    counts = counts if counts is not None else {}
    table = _read_table(path)
    if not table:
        raise ValueError(f"{path}: no rows")
    columns = set(table[0])
    if "prediction" not in columns:
        raise ValueError(
            f"{path}: no 'prediction' column (found {', '.join(sorted(columns))}); is this a "
            "VLMEvalKit prediction file?"
        )
    if id_column is None:
        id_column = "index"
        if "id" in columns and all(str(r.get("id")).strip() in questions for r in table):
            id_column = "id"
    if id_column not in columns:
        raise ValueError(f"{path}: no {id_column!r} column to match the question rows")
    rows = []
    for i, rec in enumerate(table):
        where = f"{path}: row {i + 1}"
        sample = _lookup(questions, rec.get(id_column), where, counts)
        if sample is None:
            continue
        if extraction_field is not None:
            rows.append(_extracted_row(sample, dataset_name, model, condition, "vlmevalkit",
                                       rec, extraction_field))  # fmt: skip
            continue
        value = rec.get("prediction")
        text = None if missing(value) else str(value)
        error = None
        if text is None:
            error = "the released row holds no prediction"
        elif text.startswith(VLMEVALKIT_FAIL):
            error, text = f"VLMEvalKit: {text[:200]}", None
        thinking = rec.get("thinking")
        thinking = None if missing(thinking) else str(thinking)
        rows.append(
            _output_row(
                sample,
                dataset_name,
                model,
                condition,
                "vlmevalkit",
                text,
                thinking=thinking,
                error=error,
            )  # fmt: skip
        )
    _check_unique(rows, str(path))
    return rows


# --------------------------------------------------------------------------- keyed JSON


def _extracted_row(
    sample: Sample, dataset: str, model: str, condition: str, fmt: str, rec: Any, field: str
) -> OutputRow:
    """The output row of a released row scored from its extraction ``field``."""
    value = _get_path(rec, field)
    text = "" if missing(value) else str(value)
    return _output_row(sample, dataset, model, condition, fmt, text, extracted=True)


def _released_label(value: Any) -> bool | None:
    """A released correctness label (``true_false``: a bool, or "true"/"false")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    return None


def import_keyed_json(
    path: str | Path,
    fmt: str,
    dataset_name: str,
    questions: Mapping[str, Sample],
    model: str,
    condition: str,
    *,
    response_field: str | None = None,
    extraction_field: str | None = None,
    counts: dict[str, int] | None = None,
) -> list[OutputRow]:
    """Rows of a released file keyed by the dataset's id (:data:`KEYED_FORMATS`) as
    output rows: the response is ``response_field`` (default: the format's), cut to the
    model's own turn (:func:`model_turn`); with ``extraction_field`` that released
    extraction is scored instead. The format's correctness label (MathVista's
    ``true_false``) rides along as ``released["correct"]`` for comparison only.
    ``counts`` as for :func:`import_lmms_eval`."""
    path = Path(path)
    fields = KEYED_FORMATS[fmt]
    response_field = response_field or str(fields["response"])
    counts = counts if counts is not None else {}
    try:
        data = json.loads(read_utf8(path))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from exc
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(
            f"{path}: a {fmt} results file is a JSON object of rows keyed by the "
            "dataset's id ({id: {field: value}})"
        )
    if not data:
        raise ValueError(f"{path}: no rows")
    rows = []
    for qid, rec in data.items():
        where = f"{path}: id {qid!r}"
        sample = _lookup(questions, qid, where, counts)
        if sample is None:
            continue
        if extraction_field is not None:
            row = _extracted_row(sample, dataset_name, model, condition, fmt, rec,
                                 extraction_field)  # fmt: skip
        else:
            value = _get_path(rec, response_field)
            text = None if missing(value) else str(value)
            error = None if text is not None else f"the released row holds no {response_field!r}"
            row = _output_row(sample, dataset_name, model, condition, fmt, text, error=error)
        label = _released_label(rec.get(fields["label"])) if fields["label"] else None
        rows.append(row if label is None else replace(row, released={"correct": label}))
    _check_unique(rows, str(path))
    return rows


# --------------------------------------------------------------------------- jsonl


def _get_path(rec: Any, path: str) -> Any:
    """The value at a dotted path (``a.b`` reaches into nested objects); None if absent."""
    value: Any = rec
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _whole_number(value: Any, what: str, where: str) -> int:
    """A non-negative integer from an int, an integral float or a digit string."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: {what} {value!r} is not a whole number >= 0")
    return value


def _id_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


class _VariantIds:
    """Question ids -> variants of one condition: a variant id, or a sample (its
    ``sample_id`` or ``meta["source_id"]``) with exactly one variant in the manifest."""

    def __init__(self, variants: Sequence[Variant], samples: Sequence[Sample], condition: str):
        self.condition = condition
        self.by_id = {v.variant_id: v for v in variants}
        self.by_sample: dict[str, list[Variant]] = {}
        for v in variants:
            self.by_sample.setdefault(v.sample_id, []).append(v)
        self.source: dict[str, str] = {}
        for s in samples:
            if "source_id" in s.meta:
                self.source.setdefault(_id_text(s.meta["source_id"]), s.sample_id)

    def __call__(self, value: Any, where: str) -> Variant:
        key = _id_text(value)
        found = self.by_id.get(key)
        if found is not None:
            return found
        sample_id = key if key in self.by_sample else self.source.get(key)
        own = self.by_sample.get(sample_id or "", [])
        if len(own) == 1:
            return own[0]
        if own:
            some = ", ".join(v.variant_id for v in own[:3])
            raise ValueError(
                f"{where}: question id {key!r} names sample {sample_id!r}, which has "
                f"{len(own)} variants under condition {self.condition!r} (e.g. {some}); "
                "the row must name one of them by its variant id"
            )
        some = ", ".join(list(self.by_id)[:3])
        raise ValueError(
            f"{where}: question id {key!r} names no variant of condition "
            f"{self.condition!r} ({len(self.by_id)} variants; ids look like {some}) nor a "
            "sample with exactly one variant there; are the manifest and the released "
            "file of the same dataset and condition?"
        )


def _token_counter(tokenizer: str | None) -> Callable[[str], int] | None:
    """Counts a text's tokens with a Hugging Face tokenizer (a local folder or hub id),
    special tokens left out; None without a tokenizer."""
    if not tokenizer:
        return None
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tokenizer)
    except Exception as exc:  # noqa: BLE001 - any failure names the config key
        raise ValueError(
            f"imports: tokenizer {tokenizer!r} could not be loaded ({type(exc).__name__}: {exc})"
        ) from exc
    return lambda text: len(tok.encode(text, add_special_tokens=False))


def _other_condition(rec: Any, condition_field: str, condition: str) -> str | None:
    """The condition a row names when it is not ``condition`` (``(none)`` when it names
    none); None for a row of ``condition``."""
    value = _get_path(rec, condition_field)
    if missing(value) or str(value).strip() != condition:
        return "(none)" if missing(value) else str(value).strip()
    return None


def _question_id(rec: Any, id_field: str, where: str) -> Any:
    """A row's question id (a row without one is an error)."""
    qid = _get_path(rec, id_field)
    if missing(qid):
        raise ValueError(
            f"{where}: no {id_field!r} field (the question id: a variant id of the "
            "condition's manifest, or a sample id; imports[].id_field names the field)"
        )
    return qid


def _draw(rec: Any, draw_field: str | None, vid: str, next_draw: dict[str, int], where: str) -> int:
    """A row's draw: its ``draw_field``, else the variant's next draw in file order."""
    if draw_field is None:
        draw = next_draw[vid] = next_draw.get(vid, -1) + 1
        return draw
    raw_draw = _get_path(rec, draw_field)
    if missing(raw_draw):
        raise ValueError(f"{where}: no {draw_field!r} field (imports[].draw_field)")
    return _whole_number(raw_draw, f"draw ({draw_field})", where)


def _response_parts(
    rec: Any,
    response_field: str,
    thinking_field: str | None,
    markers: Sequence[Sequence[str]] | None,
) -> tuple[str | None, str | None, str, str]:
    """``(response, thinking, answer, raw_text)`` of a row: the response split at the
    thinking markers, or the ``thinking_field`` trace and the response as the answer."""
    value = _get_path(rec, response_field)
    response = None if missing(value) else str(value)
    if thinking_field is None:
        thinking, answer = split_thinking(response, markers) if response else (None, "")
        return response, thinking, answer, response or ""
    trace = _get_path(rec, thinking_field)
    thinking = None if missing(trace) else str(trace).strip()
    answer = (response or "").strip()
    return response, thinking, answer, "\n\n".join(p for p in (thinking, answer) if p)


def _thinking_tokens(
    rec: Any,
    tokens_field: str | None,
    count_tokens: Callable[[str], int] | None,
    thinking: str | None,
    where: str,
) -> int | None:
    """A row's reasoning length: its ``tokens_field``, else the thinking part's tokens
    counted by ``count_tokens``; None when neither gives one."""
    tokens = None
    if tokens_field is not None:
        found = _get_path(rec, tokens_field)
        if not missing(found):
            tokens = _whole_number(found, f"reasoning length ({tokens_field})", where)
    if tokens is None and count_tokens is not None and thinking is not None:
        tokens = count_tokens(thinking)
    return tokens


def import_jsonl(
    path: str | Path,
    variants: Sequence[Variant],
    samples: Sequence[Sample],
    model: str,
    condition: str,
    *,
    id_field: str = "question_id",
    response_field: str = "response",
    thinking_field: str | None = None,
    draw_field: str | None = None,
    condition_field: str | None = None,
    tokens_field: str | None = None,
    tokenizer: str | None = None,
    markers: Sequence[Sequence[str]] | None = None,
) -> tuple[list[OutputRow], dict[str, int]]:
    """Rows of any JSONL of responses as output rows of ``condition`` (module docstring).

    Every field name is a dotted path. ``id_field`` names a variant of ``variants`` (the
    condition's manifest) or a sample with exactly one variant there. ``thinking_field``
    None: the response is split at the thinking ``markers`` (the model family's; None =
    the defaults of :func:`split_thinking`); else that field is the trace and the
    response the answer (``raw_text`` = trace and response, a blank line between).
    ``draw_field`` None: a question's rows are draws 0, 1, 2, ... in file order.
    ``condition_field``: only rows whose field equals ``condition`` are read; the others
    are counted. ``tokens_field`` gives ``thinking_tokens``; where it is None or a row
    lacks it, ``tokenizer`` (when given) counts the thinking part's tokens. A row without
    a response is kept with an error. Returns the rows in manifest order, then draw,
    and counts: ``read``, ``other_condition`` (rows skipped), ``without_response``,
    ``without_tokens`` (rows whose reasoning length stays unknown).
    """
    path = Path(path)
    resolve = _VariantIds(variants, samples, condition)
    order = {v.variant_id: i for i, v in enumerate(variants)}
    count_tokens = _token_counter(tokenizer)
    counts = {"read": 0, "other_condition": 0, "without_response": 0, "without_tokens": 0}
    seen_conditions: dict[str, int] = {}
    next_draw: dict[str, int] = {}
    first_line: dict[tuple[str, int], int] = {}
    rows: list[OutputRow] = []
    for lineno, rec in enumerate(read_jsonl(path), 1):
        where = f"{path}:{lineno}"
        if condition_field is not None:
            other = _other_condition(rec, condition_field, condition)
            if other is not None:
                counts["other_condition"] += 1
                seen_conditions[other] = seen_conditions.get(other, 0) + 1
                continue
        variant = resolve(_question_id(rec, id_field, where), where)
        vid = variant.variant_id
        draw = _draw(rec, draw_field, vid, next_draw, where)
        if (vid, draw) in first_line:
            raise ValueError(
                f"{where}: variant {vid!r} draw {draw} appears twice (first at line "
                f"{first_line[vid, draw]}); each (question, draw) may be released once"
            )
        first_line[vid, draw] = lineno
        counts["read"] += 1
        response, thinking, answer, raw = _response_parts(
            rec, response_field, thinking_field, markers
        )
        error = None
        if response is None:
            error = NO_RESPONSE
            counts["without_response"] += 1
        tokens = _thinking_tokens(rec, tokens_field, count_tokens, thinking, where)
        if tokens is None and error is None:
            counts["without_tokens"] += 1
        rows.append(
            _released_row(vid, variant.sample_id, variant.dataset, condition, model, "jsonl",
                          draw, raw, answer, thinking, error, thinking_tokens=tokens)
        )  # fmt: skip
    if condition_field is not None and not counts["read"] and counts["other_condition"]:
        seen = ", ".join(f"{k!r} ({n})" for k, n in sorted(seen_conditions.items()))
        raise ValueError(
            f"{path}: no row's {condition_field!r} equals condition {condition!r} "
            f"(found {seen}); imports[].condition must be the file's name of the condition"
        )
    rows.sort(key=lambda r: (order[r.variant_id], r.draw))
    return rows, counts


# --------------------------------------------------------------------------- rescoring


def _model_from_name(name: str) -> str:
    """``Org__Model-7B.samples.jsonl`` -> ``Org__Model-7B``."""
    for suffix in (".jsonl", ".json", ".xlsx", ".tsv", ".csv"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return name.removesuffix(".samples")


class ReleasedRows(list):
    """The CSV rows of :func:`score_released` and how they were made (``info``: the
    scored text, the unparsed-choice convention, the rows of skipped questions)."""

    def __init__(self, rows: Sequence[Mapping[str, Any]] = (), **info: Any):
        super().__init__(rows)
        self.info: dict[str, Any] = info


def released_summary(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    """N, correct, accuracy, extraction failures (no answer found in a response), rows
    without a response, and (from :class:`ReleasedRows`) what was scored, the question
    rows skipped as bad rows with the released rows left out for them, and the
    agreement with a released correctness label, over the rows of
    :func:`score_released`."""
    n = len(rows)
    correct = sum(int(r["correct"]) for r in rows)
    errors = sum(1 for r in rows if r.get("error"))
    failures = sum(1 for r in rows if not r.get("error") and r.get("method") == "none")
    labelled = [r for r in rows if r.get("released_correct") not in (None, "")]
    info = getattr(rows, "info", {})
    return {
        "n": n,
        "correct": correct,
        "accuracy": correct / n if n else math.nan,
        "extraction_failures": failures,
        "extraction_failure_rate": failures / n if n else math.nan,
        "errors": errors,
        "scored_text": info.get("scored_text", "response"),
        "unparsed_choice": info.get("unparsed_choice", "wrong"),
        "skipped_questions": info.get("skipped_questions", {}),
        "released_rows_of_skipped_questions": info.get("released_rows_of_skipped_questions", 0),
        "released_labels": len(labelled),
        "agree_with_released_labels": sum(
            1 for r in labelled if int(r["correct"]) == int(r["released_correct"])
        ),
        **(mode_counts(list(rows)) if n else {}),
    }


def format_released_summary(summary: Mapping[str, Any]) -> str:
    """One line: N, accuracy (correct / N), extraction failures, empty responses, what
    was scored and how, skipped questions, agreement with released labels."""
    n = summary["n"]
    if not n:
        return "N = 0: no rows scored"
    parts = [
        f"N = {n}; accuracy {summary['accuracy']:.1%} ({summary['correct']}/{n}); "
        f"extraction failures {summary['extraction_failures']} "
        f"({summary['extraction_failure_rate']:.1%}); rows without a response "
        f"{summary['errors']}"
    ]
    scored = summary.get("scored_text", "response")
    unparsed = summary.get("unparsed_choice", "wrong")
    if scored != "response" or unparsed != "wrong":
        parts.append(f"scored: {scored}, unparsed choice {unparsed}")
    skipped = summary.get("skipped_questions") or {}
    if skipped:
        reasons = ", ".join(f"{reason} ({k})" for reason, k in skipped.items())
        parts.append(
            f"question rows skipped as bad rows {sum(skipped.values())} ({reasons}); "
            f"released rows left out for them {summary['released_rows_of_skipped_questions']}"
        )
    if summary.get("released_labels"):
        k, m = summary["agree_with_released_labels"], summary["released_labels"]
        parts.append(f"agrees with the released labels on {k}/{m} ({k / m:.1%})")
    parts += _mode_parts(summary)
    return "; ".join(parts)


def _mode_parts(summary: Mapping[str, Any]) -> list[str]:
    """What :func:`format_released_summary` says of the scoring mode."""
    if summary.get("mode", "extract") == "extract" and summary.get("mode_differences") is None:
        return []
    parts = [f"scoring mode {summary['mode']}"]
    if summary.get("random_guesses"):
        parts.append(f"the harness's random options {summary['random_guesses']} (seeded)")
    if summary.get("offline_rules"):
        parts.append(f"verdicts by offline rules {summary['offline_rules']}")
    if summary.get("corrected_accuracy") is not None:
        parts.append(
            f"verdicts a harness bug changed {summary['harness_bug_rows']} (accuracy "
            f"without them {summary['corrected_accuracy']:.1%})"
        )
    if summary.get("mode_differences") is not None:
        parts.append(f"verdicts the other mode gives differently {summary['mode_differences']}")
    return parts


RELEASED_COLUMNS = (
    "sample_id",
    "sample_key",
    "model",
    "condition",
    "answer",
    "prediction",
    "correct",
    "score",
    "method",
    "rule",
    "reason",
    "error",
    "released_correct",
    "mode",
    "harness_bug",
    "corrected",
    "other_correct",
)


def _import_released(
    fmt: str,
    path: str | Path,
    dataset: str,
    questions: Mapping[str, Sample],
    model: str,
    condition: str,
    *,
    id_field: str | None,
    response_field: str | None,
    extraction_field: str | None,
    counts: dict[str, int],
) -> list[OutputRow]:
    """The output rows of a released file keyed by the dataset's ids: lmms-eval,
    VLMEvalKit or one of :data:`KEYED_FORMATS` (``fmt``)."""
    if fmt == "lmms-eval":
        return import_lmms_eval(
            path, dataset, questions, model, condition, id_field=id_field or "doc_id",
            extraction_field=extraction_field, counts=counts,
        )  # fmt: skip
    if fmt == "vlmevalkit":
        return import_vlmevalkit(
            path, dataset, questions, model, condition, id_column=id_field,
            extraction_field=extraction_field, counts=counts,
        )  # fmt: skip
    return import_keyed_json(
        path, fmt, dataset, questions, model, condition,
        response_field=response_field, extraction_field=extraction_field, counts=counts,
    )  # fmt: skip


def _check_released_args(format: str, response_field: str | None) -> None:
    """The format is known and ``response_field`` is given only for a keyed format."""
    if format not in FORMATS:
        raise ValueError(
            f"unknown released format {format!r}; expected one of {', '.join(FORMATS)}"
        )
    if response_field is not None and format not in KEYED_FORMATS:
        raise ValueError(
            f"--response-field is for the keyed formats ({', '.join(KEYED_FORMATS)}); "
            f"{format} files name their response themselves"
        )


def _released_csv_row(
    s: Mapping[str, Any], sample: Sample, labels: Mapping[str, Any]
) -> dict[str, Any]:
    """The CSV row of a scored row (:data:`RELEASED_COLUMNS`)."""
    return {
        "sample_id": sample.meta["source_id"],
        "sample_key": s["sample_id"],
        "model": s["model"],
        "condition": s["condition"],
        "answer": s["answer"],
        "prediction": s["prediction"],
        "correct": s["correct"],
        "score": s["score"],
        "method": s["method"],
        "rule": s["rule"],
        "reason": s["reason"],
        "error": s["error"],
        "released_correct": None if s["key"] not in labels else int(labels[s["key"]]),
        "mode": s.get("mode"),
        "harness_bug": s.get("harness_bug"),
        "corrected": s.get("corrected"),
        "other_correct": s.get("other_correct"),
    }


def _write_released_csv(out_csv: str | Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write the rows of :func:`score_released` (empty cells for None)."""
    with atomic_write(out_csv, "w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(RELEASED_COLUMNS))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if row[k] is None else row[k] for k in RELEASED_COLUMNS})


def score_released(
    format: str,
    dataset: str,
    questions: Mapping[str, Sample],
    samples_path: str | Path,
    out_csv: str | Path,
    *,
    model: str | None = None,
    condition: str = "released",
    id_field: str | None = None,
    fallback: Callable[[Sample, str], str | None] | None = None,
    unparsed_choice: str = "wrong",
    response_field: str | None = None,
    extraction_field: str | None = None,
    mode: str = "extract",
    compare: bool = False,
) -> ReleasedRows:
    """Rescore a released results file with this project's rules (``mode`` extract) or
    as the papers' harness scored it (``mode`` harness; ``compare``: also the other
    mode's verdict, column ``other_correct``); write ``out_csv``.

    ``dataset`` is the adapter name (``distract-bench``, ``mathvista``, ...), which also
    picks the scorer. ``questions`` are the dataset's samples keyed by its own id
    (:func:`vlmrobust.data.released.load_questions`, or the samples stage's samples
    keyed by ``meta["source_id"]``). ``model`` defaults to the results file's name
    without its suffix and a trailing ``.samples`` (``Org__Model.samples.jsonl`` ->
    ``Org__Model``). ``unparsed_choice``: see :func:`~vlmrobust.score.score_outputs`
    (``most-similar`` is MathVista's official convention). ``response_field`` (keyed
    formats) names the response; ``extraction_field`` scores a released extraction
    instead (MathVista's ``extraction``). Released rows of questions skipped as bad rows
    (``questions.skipped``) are counted, not scored. Returns the CSV rows (``sample_id``
    = the dataset's own id; ``released_correct`` = a released label, where the format
    has one, for comparison only).
    """
    _check_released_args(format, response_field)
    model = model or _model_from_name(Path(samples_path).name)
    counts: dict[str, int] = {}
    outputs = _import_released(
        format, samples_path, dataset, questions, model, condition, id_field=id_field,
        response_field=response_field, extraction_field=extraction_field, counts=counts,
    )  # fmt: skip
    by_key = {s.sample_id: s for s in questions.values()}
    labels = {o.key: o.released["correct"] for o in outputs if o.released}
    scored = score_outputs(
        by_key, outputs, dataset, fallback, unparsed_choice, mode=mode, compare=compare
    )
    skipped = getattr(questions, "skipped", [])
    rows = ReleasedRows(
        scored_text=(
            f"the released extraction ({extraction_field})" if extraction_field else "response"
        ),
        unparsed_choice=unparsed_choice,
        skipped_questions=skipped_by_reason(skipped),
        released_rows_of_skipped_questions=counts.get("skipped_questions", 0),
    )
    rows.extend(_released_csv_row(s, by_key[s["sample_id"]], labels) for s in scored)
    _write_released_csv(out_csv, rows)
    return rows


# --- released outputs as the outputs of one job (config `imports`) --------------------------


def released_labels(spec: Mapping[str, Any], released: str | Path, questions: Mapping[str, Sample]):
    """{sample_id: {"correct": ..., "verdict": ...}} from the released files, where the
    ``imports`` entry asks for them (``released_labels``, ``references``)."""
    labels: dict[str, dict[str, Any]] = {}
    if spec.get("released_labels") and spec["format"] in KEYED_FORMATS:
        if not KEYED_FORMATS[spec["format"]]["label"]:
            raise ValueError(f"imports: {spec['format']} files carry no correctness label")
    elif spec.get("released_labels"):
        if spec["format"] != "lmms-eval":
            raise ValueError(
                "imports: released_labels is supported for lmms-eval and "
                f"{', '.join(f for f, v in KEYED_FORMATS.items() if v['label'])} files only"
            )
        id_field = spec.get("id_field") or "doc_id"
        for lineno, rec in enumerate(read_jsonl(released), 1):
            sample = questions.get(str(_get_path(rec, id_field)))
            verdict = (rec.get("llm_as_judge_eval") or {}).get("true_false")
            if sample is None or verdict is None:
                raise ValueError(f"{released}:{lineno}: no released correctness (true_false)")
            labels.setdefault(sample.sample_id, {})["correct"] = bool(verdict)
    if spec.get("references"):
        for source_id, row in load_released_references(spec["references"]).items():
            sample = questions.get(str(source_id))
            if sample is None:
                continue
            # a failed released judgment (parse_error) rides along as a failure: verdict
            # None with its reason, never judged again in silence
            entry = labels.setdefault(sample.sample_id, {})
            entry["verdict"] = row["verdict"]
            if row["verdict"] is None:
                entry["verdict_error"] = row["verdict_error"]
    return labels


def _import_jsonl_entry(
    spec: Mapping[str, Any],
    samples: list[Sample],
    released: str | Path,
    variants: Sequence[Variant] | None,
) -> tuple[list[OutputRow], int]:
    """The output rows of an ``imports`` entry of format ``jsonl`` (:func:`import_jsonl`)
    and the number of variants without a released answer; the rows of other conditions,
    without a response or without a reasoning length are logged with their count."""
    if variants is None:
        raise ValueError(
            f"imports: format jsonl ({spec['model']}/{spec['dataset']}/"
            f"{spec['condition']}) needs the condition's variant manifest "
            "(import-outputs --manifest): its question ids name variants"
        )
    if spec.get("released_labels"):
        raise ValueError("imports: released_labels is supported for lmms-eval files only")
    rows, counts = import_jsonl(
        released,
        variants,
        samples,
        spec["model"],
        spec["condition"],
        id_field=spec.get("id_field") or "question_id",
        response_field=spec.get("response_field") or "response",
        thinking_field=spec.get("thinking_field"),
        draw_field=spec.get("draw_field"),
        condition_field=spec.get("condition_field"),
        tokens_field=spec.get("tokens_field"),
        tokenizer=spec.get("tokenizer"),
        markers=spec.get("thinking_markers"),
    )
    if counts["other_condition"]:
        log.info(
            "%s: %d rows of other conditions skipped (%s is not %r)",
            released,
            counts["other_condition"],
            spec.get("condition_field"),
            spec["condition"],
        )
    for name, what in (
        ("without_response", "rows hold no response (kept as failures)"),
        ("without_tokens", "answered rows have no reasoning length (tokens_field/tokenizer)"),
    ):
        if counts[name]:
            log.warning("%s: %d of %d %s", released, counts[name], counts["read"], what)
    return rows, len(variants) - len({r.variant_id for r in rows})


def _check_one_variant_per_labelled_sample(
    labels: Mapping[str, Any], variants: Sequence[Variant] | None, condition: str
) -> None:
    """Released verdicts are per sample: a labelled sample must have one variant."""
    per_sample: dict[str, int] = {}
    for v in variants or ():
        per_sample[v.sample_id] = per_sample.get(v.sample_id, 0) + 1
    several = [sid for sid in labels if per_sample.get(sid, 0) > 1]
    if several:
        raise ValueError(
            f"imports: references are verdicts per sample, but sample "
            f"{several[0]!r} has {per_sample[several[0]]} variants under condition "
            f"{condition!r}"
        )


def import_outputs(
    spec: Mapping[str, Any],
    samples: list[Sample],
    released: str | Path,
    variants: Sequence[Variant] | None = None,
    skipped_ids: Sequence[str] = (),
) -> tuple[list[OutputRow], int]:
    """The output rows of one ``imports`` entry and the number of questions without a
    released answer: samples (lmms-eval, VLMEvalKit) or variants of the condition's
    manifest (``jsonl``). The rows stand for the run's prompt setting, so they sit where
    a run would put them; released labels ride along in ``released``.

    ``spec``: model, dataset, condition, prompt, format, id_field, released_labels,
    references; format ``jsonl`` also reads response_field (default ``response``),
    thinking_field, draw_field, condition_field, tokens_field, tokenizer and
    thinking_markers (the model's registry ``options.thinking_markers``; None = the
    defaults), see :func:`import_jsonl`, and needs ``variants`` (the manifest's rows).
    ``extraction_field`` (not jsonl) scores a released extraction instead of the
    response; ``response_field`` also names the response of the keyed formats.
    ``skipped_ids``: the dataset's ids the samples stage skipped as bad rows; their
    released rows are left out (logged with their count), any other unknown id is an
    error.
    """
    questions = Questions(
        {str(s.meta.get("source_id", s.sample_id)): s for s in samples},
        skipped=[{"row": None, "id": str(i), "reason": "skipped"} for i in skipped_ids],
    )
    counts: dict[str, int] = {}
    dataset = samples[0].dataset if samples else spec["dataset"]
    fmt = spec["format"]
    if fmt not in IMPORT_FORMATS:
        raise ValueError(
            f"imports: unknown format {fmt!r}; expected one of {', '.join(IMPORT_FORMATS)}"
        )
    if fmt == "jsonl":
        rows, unanswered = _import_jsonl_entry(spec, samples, released, variants)
    else:
        rows = _import_released(
            fmt, released, dataset, questions, spec["model"], spec["condition"],
            id_field=spec.get("id_field"), response_field=spec.get("response_field"),
            extraction_field=spec.get("extraction_field"), counts=counts,
        )  # fmt: skip
    if fmt in KEYED_FORMATS:
        # a released label is used only where the entry asks for it (released_labels)
        rows = [r if spec.get("released_labels") else replace(r, released=None) for r in rows]
    if counts.get("skipped_questions"):
        log.warning(
            "%s: %d released row(s) answer questions the samples stage skipped as bad rows "
            "(see its report.json): left out",
            released,
            counts["skipped_questions"],
        )
    rows = [replace(r, prompt=spec["prompt"]) for r in rows]
    labels = released_labels(spec, released, questions)
    if labels:
        if fmt == "jsonl":
            _check_one_variant_per_labelled_sample(labels, variants, spec["condition"])
        rows = [
            replace(r, released={**(r.released or {}), **labels[r.sample_id]} or None)
            if r.sample_id in labels
            else r
            for r in rows
        ]
    if fmt != "jsonl":
        unanswered = len(samples) - len({r.sample_id for r in rows})
    return rows, unanswered


def use_released_correctness(scored: list[dict[str, Any]], rows: list[OutputRow]) -> int:
    """Replace the correctness of scored rows whose output carries a released one
    (``imports[].released_labels``); return how many were replaced."""
    released = {r.key: r.released for r in rows if r.released and "correct" in r.released}
    n = 0
    for row in scored:
        if row["key"] in released:
            row["correct"] = int(released[row["key"]]["correct"])
            row["score"] = float(row["correct"])
            row["method"], row["rule"] = "released", "released"
            row["reason"] = "correctness as stated by the released file"
            n += 1
    return n
