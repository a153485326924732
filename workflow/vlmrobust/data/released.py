"""A dataset's question rows as samples without images (rescoring released results).

A released results file (lmms-eval, VLMEvalKit) names each answer by the dataset's own
id; to rescore it, the questions and answers come from the dataset's rows in its hub
schema, converted by the dataset's adapter (:data:`~vlmrobust.data.adapters.ADAPTERS`).
The images are not needed and never read: a missing image field gets a placeholder.

- :func:`load_questions` reads the rows from a JSON list, JSONL or parquet file, or a
  folder laid out as the adapter's ``source: local`` reads it.
- :func:`samples_from_rows` converts rows already in memory.

Both return ``{source_id: Sample}`` (a :class:`Questions`, which also lists the rows
skipped under ``on_bad_row: skip``; ``images == []``, ``meta["source_id"]`` = the
dataset's own id), which the importers and rescoring of
:mod:`vlmrobust.score.released` take as their questions.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..core.records import Sample, safe_id
from ..core.released import Questions
from .adapters import ADAPTERS
from .base import Adapter, RowProblem, iter_files
from .build import ON_BAD_ROW

__all__ = ["Questions", "load_questions", "samples_from_rows"]


def _get_adapter(name: str) -> Adapter:
    if name not in ADAPTERS:
        raise ValueError(f"unknown dataset adapter {name!r}; expected one of {', '.join(ADAPTERS)}")
    return ADAPTERS[name]


def samples_from_rows(
    adapter_name: str,
    rows: Iterable[dict[str, Any]],
    dataset: str | None = None,
    on_bad_row: str = "error",
) -> Questions:
    """Hub-schema rows -> samples without images, keyed by the dataset's own id.

    A row the adapter rejects (e.g. LogicVista's released row ``v1_382``, whose question
    and answer are empty) is, with ``on_bad_row == "error"``, an error naming its index,
    id and reason; with ``"skip"`` it is left out and listed in ``Questions.skipped``
    (a released result for it is then counted, not scored). Duplicate ids are always
    an error.
    """
    if on_bad_row not in ON_BAD_ROW:
        raise ValueError(f"on_bad_row {on_bad_row!r} is not one of {', '.join(ON_BAD_ROW)}")
    adapter = _get_adapter(adapter_name)
    dataset = dataset or adapter_name
    out = Questions()
    for index, row in enumerate(rows):
        src_id: str | None = None
        try:
            src_id = adapter.source_id(row, index)
            draft = adapter.convert(adapter.placeholder_images(row), index)
            sample = Sample(
                sample_id=safe_id(dataset, src_id),
                dataset=dataset,
                images=[],
                question=draft.question,
                answer=draft.answer,
                answer_type=draft.answer_type,
                choices=list(draft.choices),
                precision=draft.precision,
                meta={**draft.meta, "source_id": src_id},
            )
        except (RowProblem, ValueError) as exc:
            reason = exc.reason if isinstance(exc, RowProblem) else str(exc)
            if on_bad_row == "skip":
                out.skipped.append({"row": index, "id": src_id, "reason": reason})
                continue
            raise ValueError(
                f"dataset {dataset!r}, question row {index} ({adapter.id_label} {src_id!r}): "
                f"{reason} (on_bad_row: skip leaves such a row out and counts it)"
            ) from exc
        if src_id in out:
            raise ValueError(f"dataset {dataset!r}: duplicate {adapter.id_label} {src_id!r}")
        out[src_id] = sample
    if not out:
        raise ValueError(
            f"dataset {dataset!r}: no question rows"
            + (f" ({len(out.skipped)} skipped as bad rows)" if out.skipped else "")
        )
    return out


def load_questions(
    adapter_name: str, path: str | Path, dataset: str | None = None, on_bad_row: str = "error"
) -> Questions:
    """A dataset's question rows (file or folder, hub schema) as samples without images.

    A folder is read as the adapter reads a local folder (``source: local``); so is a
    Distract-Bench ``questions.jsonl`` (its folder's ``edit_instructions.jsonl`` is
    joined). Any other file is read as JSON list / JSONL / parquet by its suffix.
    ``on_bad_row``: see :func:`samples_from_rows`.
    """
    adapter = _get_adapter(adapter_name)
    path = Path(path)
    if not path.exists():
        raise ValueError(f"questions file {str(path)!r} does not exist")
    key = f"released.{adapter_name}.questions"
    if path.is_dir():
        rows: Iterable[dict[str, Any]] = adapter.load_rows(
            {"source": "local", "path": str(path)}, key
        ).rows
    elif adapter.name == "distract-bench" and path.name == "questions.jsonl":
        rows = adapter.load_rows({"source": "local", "path": str(path.parent)}, key).rows
    elif path.suffix in (".jsonl", ".json", ".parquet"):
        rows = iter_files([path])
    else:
        raise ValueError(
            f"questions file {str(path)!r}: expected a .jsonl, .json or .parquet file "
            "(or a folder) with the dataset's rows in its hub schema"
        )
    return samples_from_rows(adapter_name, rows, dataset, on_bad_row)
