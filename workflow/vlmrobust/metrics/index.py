"""The metrics index every view reads: a tidy metrics table checked, typed and indexed
by (metric, model, benchmark, condition), and the lookup of one table cell with the
reason it is missing, if it is (the ``missing`` rows and ``note`` of the metrics)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .core import METRIC_COLUMNS

__all__ = ["METRIC_COLUMNS", "Cell", "MetricsIndex", "is_missing", "lookup", "normalise_metrics"]

NUMERIC_COLUMNS: tuple[str, ...] = ("severity", "value", "ci_low", "ci_high", "n")
TEXT_COLUMNS: tuple[str, ...] = tuple(c for c in METRIC_COLUMNS if c not in NUMERIC_COLUMNS)
NO_OUTPUTS = "no scored outputs"
NOT_EVALUATED = "not in the metrics table"


def is_missing(value: Any) -> bool:
    """True for None, NaN, pandas NA and non-finite floats."""
    if value is None:
        return True
    try:
        return bool(pd.isna(value)) or not math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def normalise_metrics(metrics: pd.DataFrame) -> pd.DataFrame:
    """Check the columns; text columns as str ('' for empty), number columns as float."""
    missing = [c for c in METRIC_COLUMNS if c not in metrics.columns]
    if missing:
        raise ValueError(
            f"metrics table lacks column(s) {missing}; expected exactly {list(METRIC_COLUMNS)}"
        )
    out = pd.DataFrame(index=range(len(metrics)))
    for col in TEXT_COLUMNS:
        values = metrics[col].tolist()
        out[col] = pd.Series(
            ["" if is_missing(v) else str(v) for v in values], dtype=object, index=out.index
        )
    for col in NUMERIC_COLUMNS:
        try:
            out[col] = pd.to_numeric(metrics[col].reset_index(drop=True), errors="raise").astype(
                float
            )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"metrics table: column {col!r} holds a non-number ({exc})") from exc
    return out


class MetricsIndex:
    """Fast look-ups of metric rows by (metric, model, benchmark, condition)."""

    def __init__(self, metrics: pd.DataFrame):
        self.frame = normalise_metrics(metrics)
        self._rows: list[dict[str, Any]] = self.frame.to_dict("records")
        self._by_key: dict[tuple[str, str, str, str], list[dict[str, Any]]] = {}
        self._by_metric: dict[str, list[dict[str, Any]]] = {}
        for row in self._rows:
            key = (row["metric"], row["model"], row["benchmark"], row["condition"])
            self._by_key.setdefault(key, []).append(row)
            self._by_metric.setdefault(row["metric"], []).append(row)

    @property
    def records(self) -> list[dict[str, Any]]:
        return self._rows

    def metric_rows(self, metric: str) -> list[dict[str, Any]]:
        return list(self._by_metric.get(metric, []))

    def rows(
        self, metric: str, model: str, benchmark: str, condition: str, base_model: str | None = None
    ) -> list[dict[str, Any]]:
        rows = self._by_key.get((metric, model, benchmark, condition), [])
        if base_model is not None:
            rows = [r for r in rows if r["base_model"] == base_model]
        return rows

    def one(
        self, metric: str, model: str, benchmark: str, condition: str, base_model: str | None = None
    ) -> dict[str, Any] | None:
        """The single matching row, None if there is none; several are an error."""
        rows = self.rows(metric, model, benchmark, condition, base_model)
        if len(rows) > 1:
            raise ValueError(
                f"metrics table has {len(rows)} rows for metric={metric!r}, model={model!r}, "
                f"benchmark={benchmark!r}, condition={condition!r}"
                + (f", base_model={base_model!r}" if base_model is not None else "")
                + "; expected at most one"
            )
        return rows[0] if rows else None

    def models(self) -> list[str]:
        """Every model named in the table (model and base_model columns), sorted."""
        names = {r["model"] for r in self._rows if r["model"]}
        names |= {r["base_model"] for r in self._rows if r["base_model"]}
        return sorted(names)

    def benchmarks(self) -> list[str]:
        return sorted({r["benchmark"] for r in self._rows if r["benchmark"]})


@dataclass(frozen=True)
class Cell:
    """One looked-up value: the row (None if absent) and why it is missing, if it is."""

    row: dict[str, Any] | None
    note: str

    @property
    def value(self) -> float:
        return math.nan if self.row is None else float(self.row["value"])

    @property
    def missing(self) -> bool:
        return is_missing(self.value)


def lookup(
    index: MetricsIndex,
    metric: str,
    model: str,
    benchmark: str,
    condition: str,
    base_model: str | None = None,
) -> Cell:
    """The row for one table cell and its footnote text ('' when there is nothing to say)."""
    row = index.one(metric, model, benchmark, condition, base_model)
    if row is None:
        miss = index.one("missing", model, benchmark, condition) or index.one(
            "missing", model, benchmark, ""
        )
        if miss is not None:
            return Cell(None, miss["note"] or NO_OUTPUTS)
        return Cell(None, NOT_EVALUATED)
    note = row["note"]
    if is_missing(row["value"]) and not note:
        miss = index.one("missing", model, benchmark, condition) or index.one(
            "missing", model, benchmark, ""
        )
        note = (miss["note"] or NO_OUTPUTS) if miss is not None else "undefined"
    return Cell(row, note)
