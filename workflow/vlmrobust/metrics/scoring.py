"""How a study's verdicts were made, as its scored rows say it: the metrics rows that the
tables' scoring footnote is written from (docs/scoring.md).

``scoring.mode`` decides how a response becomes a verdict, and each scored row records
what was done to it: ``mode`` (``harness`` or ``extract``), ``method`` (``offline-rule``:
the harness without its LLM judge), ``rule`` (the harness's release and task code) and
``other_correct`` (the other mode's verdict, ``scoring.compare_modes``). The metrics of
a study that reads scored rows record these facts (:func:`scoring_rows`), and its
tables' footnote reads them back (:func:`recorded_scoring`; the views themselves get the
metrics without them, :func:`without_scoring_rows`), never the configuration: tables rebuilt from
released scored files under another ``scoring`` section still say how those rows were
scored. Rows without a ``mode`` (files of an older version, released verdicts) are
counted as not recording it, with a warning.

The rows (``benchmark`` = the dataset; text fields that do not apply ``""``, ``value``
NaN):

    ``scoring_mode``      per dataset and mode of its rows: ``method`` = the mode
                          (``""``: not recorded, note :data:`NOTE_UNRECORDED`), ``n`` =
                          rows; for ``harness`` the note is the lmms-eval release its
                          rows name (``lmms-eval 0.7.2 (= 13fd645a)``).
    ``scoring_offline``   per dataset with harness verdicts made by its offline rules:
                          ``n`` = those rows.
    ``scoring_compared``  per dataset whose rows carry the other mode's verdict: ``n`` =
                          those rows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .core import FLOAT_COLUMNS, METRIC_COLUMNS, metric_row, spec_dataset, text_column

__all__ = [
    "NOTE_UNRECORDED",
    "SCORING_COMPARED",
    "SCORING_METRICS",
    "SCORING_MODE",
    "SCORING_OFFLINE",
    "add_scoring_rows",
    "recorded_scoring",
    "scoring_rows",
    "study_datasets",
    "without_scoring_rows",
]

SCORING_MODE = "scoring_mode"
SCORING_OFFLINE = "scoring_offline"
SCORING_COMPARED = "scoring_compared"
SCORING_METRICS = (SCORING_MODE, SCORING_OFFLINE, SCORING_COMPARED)
NOTE_UNRECORDED = "not recorded in the scored rows"

#: the harness's release at the start of a harness row's ``rule`` (core.harness.version_note)
_RELEASE = re.compile(r"^lmms-eval \S+ \([^)]*\)")
#: a mode's place among a dataset's rows ("": not recorded, last)
_MODE_ORDER = {"harness": 0, "extract": 1}


def _text(scored: pd.DataFrame, column: str) -> pd.Series:
    if column not in scored.columns:
        return pd.Series("", index=scored.index, dtype=object)
    return text_column(scored[column])


def study_datasets(spec: Mapping[str, Any]) -> list[str]:
    """A study spec's datasets in order: the keys of ``datasets``, else ``dataset``."""
    datasets = spec.get("datasets")
    if isinstance(datasets, Mapping):
        return [str(d) for d in datasets]
    return [spec_dataset(spec, "study")] if spec.get("dataset") else []


def scoring_rows(
    scored: pd.DataFrame, datasets: Sequence[str], warnings: list[str]
) -> list[dict[str, Any]]:
    """The scoring rows (module docstring) of ``scored``, per dataset: ``datasets``
    first, in their order, then any other dataset of the rows, sorted. A dataset whose
    rows do not record their mode adds a warning."""
    found = pd.DataFrame(
        {c: _text(scored, c) for c in ("dataset", "mode", "method", "rule", "other_correct")}
    )
    present = set(found["dataset"])
    order = [d for d in datasets if d in present] + sorted(present - set(datasets))
    rows: list[dict[str, Any]] = []
    for dataset in order:
        part = found[found["dataset"] == dataset]
        modes = sorted(set(part["mode"]), key=lambda m: (_MODE_ORDER.get(m, 2), m == "", m))
        for mode in modes:
            of_mode = part[part["mode"] == mode]
            note = ""
            if mode == "harness":
                releases = of_mode["rule"].str.extract(f"({_RELEASE.pattern})")[0].dropna()
                note = "; ".join(dict.fromkeys(releases))
            elif mode == "":
                note = NOTE_UNRECORDED
                warnings.append(
                    f"dataset {dataset}: {len(of_mode)} scored row(s) do not record their "
                    "scoring mode (no mode column: files of an older version or released "
                    "verdicts); the tables' scoring footnote says so"
                )
            rows.append(_row(SCORING_MODE, dataset, len(of_mode), method=mode, note=note))
        offline = int((part["method"] == "offline-rule").sum())
        if offline:
            rows.append(_row(SCORING_OFFLINE, dataset, offline))
        compared = int((part["other_correct"] != "").sum())
        if compared:
            rows.append(_row(SCORING_COMPARED, dataset, compared))
    return rows


def _row(metric: str, dataset: str, n: int, **kw: Any) -> dict[str, Any]:
    return metric_row(metric, benchmark=dataset, n=n, **kw)


def add_scoring_rows(
    metrics: pd.DataFrame, scored: pd.DataFrame, spec: Mapping[str, Any], warnings: list[str]
) -> pd.DataFrame:
    """``metrics`` with the scoring rows of the study's scored rows after its own (a
    study's extra columns ``""`` in them)."""
    rows = scoring_rows(scored, study_datasets(spec), warnings)
    if not rows:
        return metrics
    extra = [c for c in metrics.columns if c not in METRIC_COLUMNS]
    found = pd.DataFrame(rows, columns=list(METRIC_COLUMNS)).assign(**{c: "" for c in extra})
    for c in FLOAT_COLUMNS:
        found[c] = found[c].astype(float)
    found["n"] = found["n"].astype(np.int64)
    return pd.concat([metrics, found[list(metrics.columns)]], ignore_index=True)


def without_scoring_rows(metrics: pd.DataFrame) -> pd.DataFrame:
    """``metrics`` without its scoring rows: what a study's views read (a scoring row's
    ``benchmark`` is a dataset, which is no benchmark of a dataset with several prompt
    settings)."""
    keep = ~metrics["metric"].isin(SCORING_METRICS)
    return metrics if keep.all() else metrics[keep].reset_index(drop=True)


def recorded_scoring(metrics: pd.DataFrame) -> dict[str, Any] | None:
    """What a study's metrics say about how its verdicts were made (None: its metrics
    have no scoring rows): ``mode`` (``harness`` when any dataset's rows were scored by
    the harness, else ``extract`` when any by the project's extraction, else None),
    the datasets of each (``harness``, ``extract``; a dataset of rows in both modes is
    in both), those whose rows do not record it (``unrecorded``), those with harness
    verdicts by offline rules (``offline``), whether any row carries the other mode's
    verdict (``compare``) and the harness's release the rows name (``version``)."""
    rows = metrics[metrics["metric"] == SCORING_MODE]
    if rows.empty:
        return None

    def datasets(metric: str, method: str | None = None) -> list[str]:
        sel = metrics["metric"] == metric
        if method is not None:
            sel &= metrics["method"] == method
        return list(dict.fromkeys(metrics.loc[sel, "benchmark"]))

    harness = datasets(SCORING_MODE, "harness")
    extract = datasets(SCORING_MODE, "extract")
    releases = [
        r for n in rows.loc[rows["method"] == "harness", "note"] for r in str(n).split("; ") if r
    ]
    return {
        "mode": "harness" if harness else ("extract" if extract else None),
        "harness": harness,
        "extract": extract,
        "unrecorded": datasets(SCORING_MODE, ""),
        "offline": datasets(SCORING_OFFLINE),
        "compare": bool(datasets(SCORING_COMPARED)),
        "version": " and ".join(dict.fromkeys(releases)) or "lmms-eval (release not in the rows)",
    }
