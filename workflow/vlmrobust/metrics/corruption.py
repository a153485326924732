"""Metrics of the vision-corruption study.

The study answers every benchmark clean and under the corruption conditions (one seeded
corruption method x severity per variant, or all of them); its metrics are the shared
engine :func:`vlmrobust.metrics.core.perturbation_metrics` on the corruption
conditions, with the method x severity of each variant read from the variant manifests
(so the ``acc_method_severity`` / ``rr_method_severity`` rows exist). Every definition
(accuracy, RR, retention, group macro-averages, pair statistics, fingerprints) is
written in :mod:`vlmrobust.metrics.core`; docs/studies/corruption.md explains them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from .core import perturbation_metrics


def compute_corruption_metrics(
    scored: pd.DataFrame, variants: pd.DataFrame | None, spec: Mapping[str, Any]
) -> tuple[pd.DataFrame, list[str]]:
    """The corruption study's tidy metrics and warnings (``spec``: ``models``,
    ``model_order``, ``datasets``, ``clean_condition``, ``perturbed_conditions``,
    ``bootstrap``; see :func:`vlmrobust.metrics.core.perturbation_metrics`)."""
    return perturbation_metrics(scored, variants, spec, by_method=True)
