"""Text made fit for one line of a table or a page: a model's output may hold line
breaks and control characters. Kept apart from the table renderer so that what needs
only these (the explorer's jobs) does not import pandas."""

from __future__ import annotations

from typing import Any

__all__ = ["clip_text", "printable"]


def printable(text: str) -> str:
    """``text`` on one line: whitespace runs collapsed to one space, control and other
    unprintable characters (a model's raw output may hold them) dropped."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


def clip_text(text: Any, limit: int) -> str:
    """``text`` (None: "") made :func:`printable` and cut to ``limit`` characters, the
    last one an ellipsis when cut."""
    s = printable(str("" if text is None else text))
    return s if len(s) <= limit else s[: limit - 1].rstrip() + "\u2026"
