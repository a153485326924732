"""Scored rows -> tidy metric tables (DESIGN.md "Metrics are tidy long tables").

:mod:`vlmrobust.metrics.corruption` computes the vision-corruption study of
Distract-Bench (SPEC.md §1a, paper App. D): accuracy, relative robustness, retention,
macro group aggregates, base-vs-reasoning pair statistics with paired-bootstrap
intervals, RR-fingerprint correlations and RR per corruption method x severity. Every
definition and choice is written in that module's docstring.
"""

from __future__ import annotations

from .corruption import (
    METRIC_COLUMNS,
    bootstrap_gap_ci,
    compute_corruption_metrics,
    read_inputs,
    read_metrics,
    write_metrics,
)
from .distraction import compute_distraction_metrics, read_judged

__all__ = [
    "METRIC_COLUMNS",
    "bootstrap_gap_ci",
    "compute_corruption_metrics",
    "compute_distraction_metrics",
    "read_inputs",
    "read_judged",
    "read_metrics",
    "write_metrics",
]
