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

#: every column of a scored CSV, in file order
SCORED_COLUMNS: tuple[str, ...] = (
    "key",
    "variant_id",
    "sample_id",
    "dataset",
    "condition",
    "prompt",
    "model",
    "draw",
    "answer",
    "answer_type",
    "prediction",
    "correct",
    "score",
    "method",
    "rule",
    "reason",
    "finish_reason",
    "error",
    "thinking_tokens",
    "completion_tokens",
)

#: the columns the metrics read: a file without one of them is not a scored file
SCORED_REQUIRED: tuple[str, ...] = (
    "variant_id",
    "sample_id",
    "dataset",
    "condition",
    "prompt",
    "model",
    "draw",
    "correct",
    "score",
)

#: the numeric columns and their type (an empty draw reads as 0)
SCORED_NUMBERS: dict[str, Callable[[str], int | float]] = {
    "correct": int,
    "score": float,
    "draw": int,
}
