"""Candidates to review and the human decisions about them (Distract-Bench §3).

Candidates file (JSON lines, one generated sample a line)
---------------------------------------------------------
Required keys: ``sample_id`` (unique), ``question``, ``answer``, ``original_image``,
``edited_image``. Optional: ``choices`` (list of strings, default none),
``distractor_description``, ``trap_reasoning_path``, ``trap_answer`` (strings, default
empty) and ``edit_instruction`` (a string or any JSON value). Image paths are relative
to an *image base* directory (the workflow's working directory unless told otherwise)
or absolute. Any further key is kept in :attr:`Candidate.extra` and shown on the review
page (e.g. ``style_constraints``, ``dataset``).

Decisions file (CSV, UTF-8, one decided sample a row)
-----------------------------------------------------
Header ``sample_id,decision,criteria_failed,note,reviewer,time``, then one row per
decided sample:

- ``decision``: ``accept`` or ``reject``.
- ``criteria_failed``: the criterion ids the sample fails, joined by ``;`` (empty for
  none). Ids: ``obvious``, ``factual``, ``irrelevant``, ``dead_end`` (:data:`CRITERIA`).
  A ``reject`` names at least one; an ``accept`` may name only the optional
  ``dead_end`` (the distractor does not lead to a dead end, which the paper allows).
- ``note``: free text (at most :data:`MAX_NOTE` characters when written through
  :func:`write_decision`); ``reviewer``: free text (at most :data:`MAX_REVIEWER`);
  ``time``: ISO 8601 (empty allowed in hand-written rows; the review server writes UTC,
  e.g. ``2026-05-01T12:00:00Z``).

Criteria sets
-------------
The same file format serves several verification protocols; a decisions file belongs to
one *criteria set* (:data:`CRITERIA_SETS`), which the reader, writer and
:func:`apply_decisions` are told (``criteria_set=``, default ``"distraction"``):

- ``distraction`` (the default): the four criteria above (Distract-Bench §3);
- ``idis-perception``: the Idis paper's human-verification criteria (its appendix A.3)
  for the perception images, phrased as failures (a sample fails a criterion when the
  statement is true): ``target-lost`` (the target object disappears or is not
  preserved), ``wrong-concept`` (the distractor differs from the intended concept),
  ``other-class`` (an object of another class is generated), ``occludes`` (the
  distractor occludes the target object), ``class-text`` (class-indicative text
  appears in the image and could serve as a hint);
- ``idis-math``: our own criteria for the math diagrams, mirroring the perception
  ones (the paper states none for math): ``target-changed`` (the target diagram is
  altered, cropped or covered), ``wrong-family`` (the distractor figure is not of the
  intended concept family), ``answer-hint`` (the distractor gives away or changes the
  answer).

Every criterion of the two Idis sets is required: a sample failing any is rejected, and
an accept names none. The sets share no criterion id, so a file read with the wrong set
fails on its first criterion, naming it and the set.

Reading validates every row; a problem is a :class:`DecisionError` naming the file,
the line and the offending value: an unknown sample id, a decision other than
accept/reject, an unknown criterion, an accept that fails a required criterion, a
reject without a criterion, an unparsable time, a wrong header or field count, a field
longer than the csv module's limit or a line that is not valid CSV. A sample
decided on two rows is an error too (naming both lines), never "the last one wins": two
rows for one sample are a merge mistake, and which one counts must be a human choice.
:func:`write_decision` keeps one row per sample by replacing it in place.

Undecided samples do not go downstream: :func:`apply_decisions` returns only the
accepted ids, and reports how many were left undecided, so a half-finished review is
visible in the report rather than silently widening or narrowing the benchmark.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .io import atomic_write_text

# The four criteria of the paper (Distract-Bench §3), in its order and words.
CRITERIA: dict[str, str] = {
    "obvious": "Contain obvious semantic information",
    "factual": "Factually correct and visually plausible",
    "irrelevant": "Be irrelevant to the query and therefore not affect the correct answer",
    "dead_end": "Optionally lead to dead ends or plausible wrong answers",
}
# Failing one of these removes a sample; dead_end is optional in the paper.
REQUIRED_CRITERIA: tuple[str, ...] = ("obvious", "factual", "irrelevant")
OPTIONAL_CRITERIA: tuple[str, ...] = ("dead_end",)

# The Idis paper's human-verification criteria for its perception images (appendix
# A.3), each phrased as the failure: a sample fails a criterion when the text is true.
IDIS_PERCEPTION_CRITERIA: dict[str, str] = {
    "target-lost": "The target object disappears or is not preserved",
    "wrong-concept": "The distractor differs from the intended concept",
    "other-class": "An object from another class is generated",
    "occludes": "The distractor occludes the target object",
    "class-text": "Class-indicative text appears in the image and could serve as a hint",
}
# Our own criteria for the Idis math diagrams (the paper states none), mirroring the
# perception ones: the target kept, the intended distractor, no hint.
IDIS_MATH_CRITERIA: dict[str, str] = {
    "target-changed": "The target diagram is altered, cropped or covered",
    "wrong-family": "The distractor figure is not of the intended concept family",
    "answer-hint": "The distractor gives away or changes the answer",
}
DEFAULT_CRITERIA_SET = "distraction"
#: criteria set name -> (criteria {id: text}, required ids, optional ids)
CRITERIA_SETS: dict[str, tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]] = {
    "distraction": (CRITERIA, REQUIRED_CRITERIA, OPTIONAL_CRITERIA),
    "idis-perception": (IDIS_PERCEPTION_CRITERIA, tuple(IDIS_PERCEPTION_CRITERIA), ()),
    "idis-math": (IDIS_MATH_CRITERIA, tuple(IDIS_MATH_CRITERIA), ()),
}
#: the Idis sets: what ``vlmrobust idis-review --set`` and a condition's
#: ``verification.set`` may name
IDIS_CRITERIA_SETS: tuple[str, ...] = ("idis-perception", "idis-math")
DECISIONS: tuple[str, ...] = ("accept", "reject")
COLUMNS: tuple[str, ...] = ("sample_id", "decision", "criteria_failed", "note", "reviewer", "time")
CRITERIA_SEP = ";"
# Longest note and reviewer name a writer accepts (characters), far below the csv
# module's field limit (131,072), so a file this module writes always reads back.
MAX_NOTE = 10_000
MAX_REVIEWER = 200

_CANDIDATE_REQUIRED = ("sample_id", "question", "answer", "original_image", "edited_image")
_CANDIDATE_TEXT = ("distractor_description", "trap_reasoning_path", "trap_answer")


class DecisionError(ValueError):
    """A decision (or candidate) that does not validate; the message names where."""


def get_criteria_set(
    name: str = DEFAULT_CRITERIA_SET,
) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """``(criteria, required ids, optional ids)`` of the criteria set ``name``; an unknown
    name is a :class:`DecisionError` listing the known ones."""
    try:
        return CRITERIA_SETS[name]
    except (KeyError, TypeError):
        raise DecisionError(
            f"unknown criteria set {name!r} (known: {', '.join(CRITERIA_SETS)})"
        ) from None


# --------------------------------------------------------------------------- candidates


@dataclass
class Candidate:
    """One generated distraction sample awaiting human verification."""

    sample_id: str
    question: str
    answer: str
    original_image: str
    edited_image: str
    choices: list[str] = field(default_factory=list)
    distractor_description: str = ""
    trap_reasoning_path: str = ""
    trap_answer: str = ""
    edit_instruction: Any = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, row: Mapping[str, Any], where: str = "candidate") -> Candidate:
        if not isinstance(row, Mapping):
            raise DecisionError(f"{where}: expected a JSON object, got {type(row).__name__}")
        missing = [k for k in _CANDIDATE_REQUIRED if row.get(k) in (None, "")]
        if missing:
            raise DecisionError(f"{where}: missing {', '.join(missing)}")
        for key in (*_CANDIDATE_REQUIRED, *_CANDIDATE_TEXT):
            value = row.get(key)
            if value is not None and not isinstance(value, str):
                if key == "answer" and isinstance(value, int | float):
                    continue
                raise DecisionError(f"{where}: {key} must be a string, got {value!r}")
        choices = row.get("choices") or []
        if not isinstance(choices, list):
            raise DecisionError(f"{where}: choices must be a list, got {choices!r}")
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        return cls(
            sample_id=row["sample_id"],
            question=row["question"],
            answer=str(row["answer"]),
            original_image=row["original_image"],
            edited_image=row["edited_image"],
            choices=[str(c) for c in choices],
            distractor_description=row.get("distractor_description") or "",
            trap_reasoning_path=row.get("trap_reasoning_path") or "",
            trap_answer=row.get("trap_answer") or "",
            edit_instruction=row.get("edit_instruction") or "",
            extra={k: v for k, v in row.items() if k not in known},
        )

    def to_dict(self) -> dict[str, Any]:
        out = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "extra"}
        out.update(self.extra)
        return out


def as_candidates(candidates: Iterable[Candidate | Mapping[str, Any]]) -> list[Candidate]:
    """Candidates from rows or Candidate objects; a repeated sample id is an error."""
    out: list[Candidate] = []
    seen: set[str] = set()
    for i, c in enumerate(candidates, 1):
        cand = c if isinstance(c, Candidate) else Candidate.from_dict(c, f"candidate {i}")
        if cand.sample_id in seen:
            raise DecisionError(f"candidate {i}: sample id {cand.sample_id!r} appears twice")
        seen.add(cand.sample_id)
        out.append(cand)
    return out


def read_candidates(path: str | Path) -> list[Candidate]:
    """Read and validate a candidates JSONL file (errors name the line)."""
    out: list[Candidate] = []
    seen: dict[str, int] = {}
    lineno = 0
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DecisionError(f"{where}: not valid JSON ({exc.msg})") from exc
            cand = Candidate.from_dict(row, where)
            if cand.sample_id in seen:
                raise DecisionError(
                    f"{where}: sample id {cand.sample_id!r} already on line {seen[cand.sample_id]}"
                )
            seen[cand.sample_id] = lineno
            out.append(cand)
    return out


# --------------------------------------------------------------------------- decisions


@dataclass(frozen=True)
class Decision:
    """One human verdict on one candidate (one row of the decisions file)."""

    sample_id: str
    decision: str  # "accept" | "reject"
    criteria_failed: tuple[str, ...] = ()
    note: str = ""
    reviewer: str = ""
    time: str = ""

    def to_row(self) -> list[str]:
        return [
            self.sample_id,
            self.decision,
            CRITERIA_SEP.join(self.criteria_failed),
            spreadsheet_safe(self.note),
            spreadsheet_safe(self.reviewer),
            self.time,
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "sample_id": self.sample_id,
            "decision": self.decision,
            "criteria_failed": list(self.criteria_failed),
            "note": self.note,
            "reviewer": self.reviewer,
            "time": self.time,
        }


#: first characters that make a spreadsheet read a cell as a formula
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(text: str) -> str:
    """Free text as a CSV cell no spreadsheet runs as a formula: a text starting with
    one of :data:`FORMULA_START` (or with ``'``) gets a leading ``'``, which
    :func:`from_spreadsheet_safe` removes again when the file is read."""
    return f"'{text}" if text.startswith((*FORMULA_START, "'")) else text


def from_spreadsheet_safe(text: str) -> str:
    """The text :func:`spreadsheet_safe` was given."""
    return text[1:] if text.startswith("'") else text


def _as_set(ids: Iterable[str]) -> set[str] | frozenset[str]:
    return ids if isinstance(ids, set | frozenset) else set(ids)


def now_iso() -> str:
    """The current UTC time as the decisions file writes it: ``2026-05-01T12:00:00Z``."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def make_decision(
    sample_id: str,
    decision: str,
    criteria: Iterable[str] | str = (),
    note: str = "",
    reviewer: str = "",
    time: str = "",
    *,
    known_ids: Iterable[str] | None = None,
    where: str = "decision",
    criteria_set: str = DEFAULT_CRITERIA_SET,
) -> Decision:
    """Validate one decision against the criteria of ``criteria_set``; errors start with
    ``where`` and name the offending value."""
    crit, required, _ = get_criteria_set(criteria_set)
    if not isinstance(sample_id, str) or not sample_id.strip():
        raise DecisionError(f"{where}: empty sample id")
    sample_id = sample_id.strip()
    if known_ids is not None and sample_id not in _as_set(known_ids):
        raise DecisionError(f"{where}: unknown sample id {sample_id!r}")
    value = decision.strip().lower() if isinstance(decision, str) else decision
    if value not in DECISIONS:
        raise DecisionError(
            f"{where}: invalid decision {decision!r} for {sample_id!r} (expected accept or reject)"
        )
    if isinstance(criteria, str):
        items = [c.strip() for c in criteria.split(CRITERIA_SEP)]
    else:
        items = list(criteria)
    failed: set[str] = set()
    for c in items:
        if c == "":
            continue
        if not isinstance(c, str) or c not in crit:
            raise DecisionError(
                f"{where}: invalid criterion {c!r} for {sample_id!r} "
                f"(criteria set {criteria_set}: expected some of {', '.join(crit)})"
            )
        failed.add(c)
    ordered = tuple(c for c in crit if c in failed)
    if value == "accept":
        bad = [c for c in ordered if c in required]
        if bad:
            raise DecisionError(
                f"{where}: {sample_id!r} is accepted but fails required criteria "
                f"{', '.join(bad)} (reject it, or clear those criteria)"
            )
    elif not ordered:
        raise DecisionError(f"{where}: {sample_id!r} is rejected without a failed criterion")
    for name, text in (("note", note), ("reviewer", reviewer), ("time", time)):
        if not isinstance(text, str):
            raise DecisionError(f"{where}: {name} must be text, got {text!r}")
    time = time.strip()
    if time:
        try:
            datetime.fromisoformat(time)
        except ValueError:
            raise DecisionError(f"{where}: invalid time {time!r} (ISO 8601 expected)") from None
    return Decision(
        sample_id=sample_id,
        decision=value,
        criteria_failed=ordered,
        note=note.replace("\r\n", "\n").strip(),
        reviewer=reviewer.strip(),
        time=time,
    )


def read_decisions(
    path: str | Path,
    known_ids: Iterable[str] | None = None,
    *,
    missing_ok: bool = False,
    criteria_set: str = DEFAULT_CRITERIA_SET,
) -> dict[str, Decision]:
    """Read and validate a decisions CSV; ``{sample_id: Decision}`` in file order.

    ``known_ids`` (the candidates' ids) makes an unknown id an error; None skips that
    check. A missing file is an error unless ``missing_ok`` (then: no decisions yet).
    Criteria are those of ``criteria_set`` (:data:`CRITERIA_SETS`).
    """
    get_criteria_set(criteria_set)
    path = Path(path)
    if missing_ok and not path.exists():
        return {}
    known = set(known_ids) if known_ids is not None else None
    with open(path, encoding="utf-8-sig", newline="") as fh:
        return _parse_decisions(fh, str(path), known, criteria_set)


def _csv_rows(fh: Iterable[str], name: str) -> Iterator[tuple[int, list[str]]]:
    """``(first line, row)`` for each CSV row; a row the csv module cannot read (a field
    over its limit, bad quoting) is a :class:`DecisionError` naming the file and line."""
    reader = csv.reader(fh)
    prev_end = 0
    while True:
        start = prev_end + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            if "field limit" in str(exc):
                raise DecisionError(
                    f"{name}:{start}: a field is longer than {csv.field_size_limit()} "
                    f"characters, the most the csv module reads (notes are limited to "
                    f"{MAX_NOTE}); shorten it by hand"
                ) from None
            raise DecisionError(f"{name}:{start}: not valid CSV ({exc})") from None
        prev_end = reader.line_num
        yield start, row


def _parse_decisions(
    fh: Iterable[str],
    name: str,
    known: set[str] | None,
    criteria_set: str = DEFAULT_CRITERIA_SET,
) -> dict[str, Decision]:
    out: dict[str, Decision] = {}
    lines: dict[str, int] = {}
    header: list[str] | None = None
    start = 0
    for start, row in _csv_rows(fh, name):
        if not any(cell.strip() for cell in row):
            continue
        where = f"{name}:{start}"
        if header is None:
            header = [h.strip() for h in row]
            unknown = [h for h in header if h not in COLUMNS]
            missing = [c for c in COLUMNS if c not in header]
            if unknown or missing or len(set(header)) != len(header):
                raise DecisionError(
                    f"{where}: header must be {','.join(COLUMNS)}; got {','.join(header)}"
                )
            continue
        if len(row) != len(header):
            raise DecisionError(f"{where}: {len(row)} fields, expected {len(header)}")
        rec = dict(zip(header, row, strict=True))
        dec = make_decision(
            rec["sample_id"],
            rec["decision"],
            rec["criteria_failed"],
            from_spreadsheet_safe(rec["note"]),
            from_spreadsheet_safe(rec["reviewer"]),
            rec["time"],
            known_ids=known,
            where=where,
            criteria_set=criteria_set,
        )
        if dec.sample_id in lines:
            raise DecisionError(
                f"{where}: sample id {dec.sample_id!r} already decided on line "
                f"{lines[dec.sample_id]} (keep one row per sample)"
            )
        lines[dec.sample_id] = start
        out[dec.sample_id] = dec
    if header is None and start:
        raise DecisionError(f"{name}: no header")
    return out


def format_decisions(decisions: Iterable[Decision]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for d in decisions:
        writer.writerow(d.to_row())
    return buf.getvalue()


def write_decisions(path: str | Path, decisions: Mapping[str, Decision] | Iterable[Decision]):
    """Write a whole decisions file atomically (header included).

    A field longer than the csv module reads back is an error, and nothing is written.
    """
    rows = list(decisions.values() if isinstance(decisions, Mapping) else decisions)
    limit = csv.field_size_limit()
    for d in rows:
        for column, cell in zip(COLUMNS, d.to_row(), strict=True):
            if len(cell) >= limit:
                raise DecisionError(
                    f"{path}: {column} of {d.sample_id[:80]!r} has {len(cell)} characters; "
                    f"the file could not be read back (limit {limit})"
                )
    atomic_write_text(path, format_decisions(rows))


def check_lengths(note: Any, reviewer: Any, where: str = "decision") -> None:
    """A note over :data:`MAX_NOTE` or a reviewer over :data:`MAX_REVIEWER` characters
    (as they would be stored) is a :class:`DecisionError`."""
    for name, text, most in (("note", note, MAX_NOTE), ("reviewer", reviewer, MAX_REVIEWER)):
        if isinstance(text, str):
            n = len(text.replace("\r\n", "\n").strip())
            if n > most:
                raise DecisionError(
                    f"{where}: {name} of {n} characters is too long (at most {most})"
                )


def write_decision(
    path: str | Path,
    sample_id: str,
    decision: str,
    criteria: Iterable[str] | str = (),
    note: str = "",
    reviewer: str = "",
    time: str | None = None,
    *,
    known_ids: Iterable[str] | None = None,
    criteria_set: str = DEFAULT_CRITERIA_SET,
) -> dict[str, Decision]:
    """Add or replace the decision on one sample; rewrites the file atomically.

    The file is read (and validated) first, created if missing; a replaced row keeps its
    place, a new one is appended. ``time`` defaults to now (UTC). Returns the decisions
    now in the file. Callers that write concurrently must serialize calls (the review
    server holds a lock). A note over :data:`MAX_NOTE` or a reviewer over
    :data:`MAX_REVIEWER` characters is an error, and nothing is written. The file and
    the new decision are validated against ``criteria_set``.
    """
    check_lengths(note, reviewer)
    known = set(known_ids) if known_ids is not None else None
    current = read_decisions(path, known, missing_ok=True, criteria_set=criteria_set)
    new = make_decision(
        sample_id,
        decision,
        criteria,
        note,
        reviewer,
        now_iso() if time is None else time,
        known_ids=known,
        criteria_set=criteria_set,
    )
    current[new.sample_id] = new
    write_decisions(path, current)
    return current


def remove_decision(
    path: str | Path, sample_id: str, *, criteria_set: str = DEFAULT_CRITERIA_SET
) -> dict[str, Decision]:
    """Drop the decision on one sample (it becomes undecided); rewrites atomically."""
    current = read_decisions(path, missing_ok=True, criteria_set=criteria_set)
    if current.pop(sample_id, None) is not None:
        write_decisions(path, current)
    return current


# --------------------------------------------------------------------------- apply


def apply_decisions(
    candidates: Iterable[Candidate | Mapping[str, Any] | str],
    decisions: Mapping[str, Decision],
    *,
    criteria_set: str = DEFAULT_CRITERIA_SET,
) -> tuple[list[str], dict[str, Any]]:
    """The accepted sample ids (in candidate order) and a report of the verification.

    Report keys: ``generated``, ``accepted``, ``rejected``, ``undecided`` (counts),
    ``rejected_by_criterion`` (criterion id -> rejected samples failing it; a sample can
    fail several, so these may sum to more than ``rejected``),
    ``accepted_failing_optional`` (optional criterion -> accepted samples noted as
    failing it) and ``undecided_ids``. Undecided samples are not accepted. A decision on
    a sample that is not among the candidates is an error. The criteria counted are
    those of ``criteria_set``; a decision failing a criterion outside it is an error
    naming the criterion and the set.
    """
    crit, _, optional_ids = get_criteria_set(criteria_set)
    ids: list[str] = []
    for c in candidates:
        if isinstance(c, str):
            ids.append(c)
        elif isinstance(c, Candidate):
            ids.append(c.sample_id)
        else:
            ids.append(str(c["sample_id"]))
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise DecisionError(f"candidates: sample ids appear twice: {', '.join(dup)}")
    id_set = set(ids)
    stray = [sid for sid in decisions if sid not in id_set]
    if stray:
        raise DecisionError(f"decisions on unknown sample ids: {', '.join(map(repr, stray))}")
    accepted: list[str] = []
    undecided: list[str] = []
    by_criterion = dict.fromkeys(crit, 0)
    optional = dict.fromkeys(optional_ids, 0)
    rejected = 0
    for sid in ids:
        d = decisions.get(sid)
        if d is not None:
            outside = [c for c in d.criteria_failed if c not in crit]
            if outside:
                raise DecisionError(
                    f"decision on {sid!r}: invalid criterion {outside[0]!r} (criteria set "
                    f"{criteria_set}: expected some of {', '.join(crit)})"
                )
        if d is None:
            undecided.append(sid)
        elif d.decision == "accept":
            accepted.append(sid)
            for c in d.criteria_failed:
                if c in optional:
                    optional[c] += 1
        else:
            rejected += 1
            for c in d.criteria_failed:
                by_criterion[c] += 1
    report = {
        "generated": len(ids),
        "accepted": len(accepted),
        "rejected": rejected,
        "undecided": len(undecided),
        "rejected_by_criterion": by_criterion,
        "accepted_failing_optional": optional,
        "undecided_ids": undecided,
    }
    return accepted, report
