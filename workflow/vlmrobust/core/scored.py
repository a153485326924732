"""The scored file: one CSV row per scored output, the contract between the score stage
that writes it and every reader (the metrics, the reviewers' rescoring, the tools).

``results/scored/<model>/<dataset>/<condition>/<prompt>.csv`` has the columns
:data:`SCORED_COLUMNS` in that order; an empty cell is a missing value. ``correct`` is
0/1, ``score`` a float, ``draw`` an integer (an empty ``draw`` is draw 0). A reader
needs :data:`SCORED_REQUIRED` and turns the numbers with :data:`SCORED_NUMBERS`.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["SCORED_COLUMNS", "SCORED_NUMBERS", "SCORED_REQUIRED"]

#: every column of a scored CSV, in file order, and whether a reader needs it (the
#: metrics read only those: a file without one of them is not a scored file)
_COLUMNS: tuple[tuple[str, bool], ...] = (
    ("key", False),
    ("variant_id", True),
    ("sample_id", True),
    ("dataset", True),
    ("condition", True),
    ("prompt", True),
    ("model", True),
    ("draw", True),
    ("answer", False),
    ("answer_type", False),
    ("prediction", False),
    ("correct", True),
    ("score", True),
    ("method", False),
    ("rule", False),
    ("reason", False),
    ("finish_reason", False),
    ("error", False),
    ("thinking_tokens", False),
    ("completion_tokens", False),
    # scoring.mode: which mode gave the verdict (extract | harness), the harness bug
    # the row's verdict reproduces and the verdict without it, and the other mode's
    # verdict (scoring.compare_modes); docs/scoring.md
    ("mode", False),
    ("harness_bug", False),
    ("corrected", False),
    ("other_correct", False),
)
SCORED_COLUMNS: tuple[str, ...] = tuple(name for name, _ in _COLUMNS)
SCORED_REQUIRED: tuple[str, ...] = tuple(name for name, needed in _COLUMNS if needed)

#: the numeric columns and their type (an empty draw reads as 0)
SCORED_NUMBERS: dict[str, Callable[[str], int | float]] = {
    "correct": int,
    "score": float,
    "draw": int,
}
