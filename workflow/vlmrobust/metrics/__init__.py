"""The metrics layer: pure functions from stage files (scored rows, judged labels,
compared chains, variant manifests) to tidy metric tables.

:mod:`.core` is shared by every study (columns, rows, pairs, bootstrap, the
perturbation engine, the files, the index views read); each study has one module of
its own (:mod:`.corruption`, :mod:`.distraction`, :mod:`.masking`) that imports the
core and no other study. :mod:`.scoring` adds to a study's metrics what its scored rows
record about their scoring (the tables' scoring footnote).
"""

from __future__ import annotations

from .core import (
    FLOAT_COLUMNS,
    METRIC_COLUMNS,
    bootstrap_gap_ci,
    join_notes,
    metric_row,
    model_info,
    perturbation_metrics,
    read_inputs,
    read_metrics,
    registry_pairs,
    spec_models,
    write_metrics,
)
from .corruption import compute_corruption_metrics
from .distraction import compute_distraction_metrics, read_judged

__all__ = [
    "FLOAT_COLUMNS",
    "METRIC_COLUMNS",
    "bootstrap_gap_ci",
    "compute_corruption_metrics",
    "compute_distraction_metrics",
    "join_notes",
    "metric_row",
    "model_info",
    "perturbation_metrics",
    "read_inputs",
    "read_judged",
    "read_metrics",
    "registry_pairs",
    "spec_models",
    "write_metrics",
]
