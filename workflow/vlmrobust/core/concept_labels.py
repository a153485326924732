"""The concept-family labels of MathVerse problems, and a person's confirmation of them.

The Idis-math visual distractors need each diagram's *concept family* (triangle,
quadrilateral, circle, 3-D): an aligned distractor is a figure of the same family, a
conflicting one of another. MathVerse has no such label, so a labeler proposes one per
problem and a person confirms or corrects it on the review page
(``vlmrobust concepts-review``, :mod:`vlmrobust.review.concepts`).

Labels file (CSV, UTF-8, one problem a row)
-------------------------------------------
Columns ``problem_index,concept_family,source,status`` (in any order; further columns
are kept as they are when the file is rewritten):

- ``problem_index``: MathVerse's problem index (the samples' ``meta.problem_index``);
  unique, not empty;
- ``concept_family``: the family, one of :data:`CONCEPT_FAMILIES` when ``confirmed``
  (what the MathVerse adapter reads); a proposal may carry the labeler's other answers
  (``other``, ``unsure``, ...);
- ``source``: who gave the family: the labeler's name for a proposal, ``human``
  (:data:`HUMAN_SOURCE`) once a person chose a family other than the one in the row;
- ``status``: ``proposed`` (not checked yet), ``confirmed`` (a person chose this
  family) or ``rejected`` (a person said the diagram is of none of the four families).

Only ``confirmed`` rows give a sample its ``meta["concept_family"]``; every other
problem gets no aligned or conflicting distractor.

A person picks one of :data:`REVIEW_CHOICES` (:func:`confirm_label`): one of the four
families writes ``status confirmed`` with that family; ``other`` writes
``concept_family other`` with ``status rejected``, because a confirmed row must name one
of the four families (the adapter refuses any other). The file is rewritten atomically,
keeping the permission bits of the file it replaces (a new file: those the umask gives),
with its rows in their order.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path

from .io import atomic_write_text

__all__ = [
    "CONCEPT_FAMILIES",
    "HUMAN_SOURCE",
    "LABEL_COLUMNS",
    "LABEL_STATUSES",
    "REVIEW_CHOICES",
    "LabelError",
    "confirm_label",
    "format_labels",
    "label_counts",
    "read_labels",
    "write_labels",
]

LABEL_COLUMNS: tuple[str, ...] = ("problem_index", "concept_family", "source", "status")
LABEL_STATUSES: tuple[str, ...] = ("proposed", "confirmed", "rejected")
#: the concept families of the Idis-math distractors (the MathVerse adapter's too)
CONCEPT_FAMILIES: tuple[str, ...] = ("triangle", "quadrilateral", "circle", "3d")
#: what a person can choose on the review page
REVIEW_CHOICES: tuple[str, ...] = (*CONCEPT_FAMILIES, "other")
HUMAN_SOURCE = "human"


class LabelError(ValueError):
    """A labels file or a choice that does not validate; the message names where."""


def _check_row(row: dict[str, str], where: str) -> None:
    pid, family, status = row["problem_index"], row["concept_family"], row["status"]
    if not pid:
        raise LabelError(f"{where}: problem_index is empty")
    if status not in LABEL_STATUSES:
        raise LabelError(
            f"{where}: problem_index {pid!r} has status {status!r}, not one of "
            f"{', '.join(LABEL_STATUSES)}"
        )
    if status == "confirmed" and family not in CONCEPT_FAMILIES:
        raise LabelError(
            f"{where}: problem_index {pid!r} is confirmed with concept_family {family!r}, "
            f"not one of {', '.join(CONCEPT_FAMILIES)}"
        )


def read_labels(path: str | Path) -> tuple[list[str], dict[str, dict[str, str]]]:
    """The header and the rows (``{problem_index: {column: value}}``, file order) of a
    labels CSV, validated: a missing column, an empty or repeated problem_index, an
    unknown status or a confirmed row outside :data:`CONCEPT_FAMILIES` is a
    :class:`LabelError` naming the file and line. Values are stripped; ``status`` and
    ``concept_family`` lower-cased."""
    path = Path(path)
    rows: dict[str, dict[str, str]] = {}
    lines: dict[str, int] = {}
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in (reader.fieldnames or [])]
        absent = [c for c in LABEL_COLUMNS if c not in header]
        if absent or len(set(header)) != len(header):
            raise LabelError(
                f"{path}:1: header must hold {','.join(LABEL_COLUMNS)} once each; got "
                f"{','.join(header) or 'nothing'}"
            )
        reader.fieldnames = header
        for row in reader:
            where = f"{path}:{reader.line_num}"
            if None in row or any(v is None for v in row.values()):
                raise LabelError(f"{where}: expected {len(header)} fields")
            rec = {k: v.strip() for k, v in row.items()}
            if not any(rec.values()):
                continue
            rec["status"] = rec["status"].lower()
            rec["concept_family"] = rec["concept_family"].lower()
            _check_row(rec, where)
            pid = rec["problem_index"]
            if pid in rows:
                raise LabelError(
                    f"{where}: problem_index {pid!r} already on line {lines[pid]} "
                    "(keep one row per problem)"
                )
            rows[pid] = rec
            lines[pid] = reader.line_num
    return header, rows


def format_labels(header: list[str], rows: Mapping[str, Mapping[str, str]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for row in rows.values():
        writer.writerow({k: row.get(k, "") for k in header})
    return buf.getvalue()


def write_labels(
    path: str | Path, header: list[str], rows: Mapping[str, Mapping[str, str]]
) -> None:
    """Write a labels CSV atomically (rows validated first; nothing written on error)."""
    absent = [c for c in LABEL_COLUMNS if c not in header]
    if absent:
        raise LabelError(f"{path}: header lacks {', '.join(absent)}")
    for pid, row in rows.items():
        _check_row({c: str(row.get(c, "")) for c in LABEL_COLUMNS}, f"{path}: row {pid!r}")
    atomic_write_text(path, format_labels(header, rows))


def confirm_label(path: str | Path, problem_index: str, choice: str) -> dict[str, dict[str, str]]:
    """Record a person's family for one problem of the labels file; returns the rows now
    in the file (as :func:`read_labels` gives them; the problem's row is the new one).

    ``choice`` is one of :data:`REVIEW_CHOICES`: a family writes ``status confirmed``
    with it, ``other`` writes ``concept_family other``, ``status rejected``. The source
    becomes :data:`HUMAN_SOURCE` when the family differs from the row's, else it is
    kept (the proposal was right). A problem not in the file or an unknown choice is a
    :class:`LabelError` and nothing is written. Callers that write concurrently must
    serialize calls (the review server holds a lock).
    """
    header, rows = read_labels(path)
    pid = str(problem_index).strip()
    if pid not in rows:
        raise LabelError(f"{path}: no problem_index {pid!r}")
    value = choice.strip().lower() if isinstance(choice, str) else choice
    if value not in REVIEW_CHOICES:
        raise LabelError(
            f"invalid concept family {choice!r} for problem {pid!r} (expected one of "
            f"{', '.join(REVIEW_CHOICES)})"
        )
    row = dict(rows[pid])
    if row["concept_family"] != value:
        row["source"] = HUMAN_SOURCE
    row["concept_family"] = value
    row["status"] = "confirmed" if value in CONCEPT_FAMILIES else "rejected"
    rows[pid] = row
    write_labels(path, header, rows)
    return rows


def label_counts(rows: Mapping[str, Mapping[str, str]]) -> dict[str, object]:
    """``problems``, rows per status (``proposed``, ``confirmed``, ``rejected``) and
    ``confirmed_by_family`` (confirmed rows per family of :data:`CONCEPT_FAMILIES`)."""
    out: dict[str, object] = {"problems": len(rows)}
    for status in LABEL_STATUSES:
        out[status] = sum(1 for r in rows.values() if r["status"] == status)
    out["confirmed_by_family"] = {
        f: sum(1 for r in rows.values() if r["status"] == "confirmed" and r["concept_family"] == f)
        for f in CONCEPT_FAMILIES
    }
    return out
