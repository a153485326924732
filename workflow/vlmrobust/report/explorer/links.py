"""Links from a table cell to the explorer: the samples behind one number.

A table under ``results/tables/<folder>/`` links each accuracy / RR cell to
``results/explorer/index.html`` with a fragment (URLSearchParams) that names the cell::

    cell=1&study=<folder>&table=<name>&metric=<metric>&model=<id>&bench=<benchmark>
    &condition=<condition>&shown=<displayed text>[&<extra key>=<value> ...]

in this order, the extra keys (``filter.<param>``, ``errors``) sorted after them. The
explorer recomputes the number from the rows it holds and shows it beside ``shown``.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlencode

__all__ = ["EXPLORER_PAGE", "cell_link", "explorer_href"]

#: the explorer's page, relative to ``results/``
EXPLORER_PAGE = "explorer/index.html"


def explorer_href(folder: str) -> str:
    """The explorer's page relative to ``results/tables/<folder>/`` (``folder`` may be
    nested: ``distraction/demo-distract`` is one level deeper)."""
    parts = PurePosixPath(str(folder)).parts
    if not parts or PurePosixPath(str(folder)).is_absolute() or ".." in parts or "." in parts:
        raise ValueError(f"table folder {folder!r}: expected a relative folder like 'corruption'")
    return "../" * (len(parts) + 1) + EXPLORER_PAGE


def cell_link(
    folder: str,
    table: str,
    metric: str,
    model: str,
    benchmark: str,
    condition: str,
    shown: str,
    **extra: Any,
) -> str:
    """The URL of the explorer filtered to one table cell, relative to the table's
    folder ``results/tables/<folder>/`` (see the module docstring for the fragment)."""
    fields: list[tuple[str, str]] = [
        ("cell", "1"),
        ("study", str(folder)),
        ("table", str(table)),
        ("metric", str(metric)),
        ("model", str(model)),
        ("bench", str(benchmark)),
        ("condition", str(condition)),
        ("shown", str(shown)),
    ]
    fields += [(str(k), str(extra[k])) for k in sorted(extra)]
    return f"{explorer_href(folder)}#{urlencode(fields)}"
