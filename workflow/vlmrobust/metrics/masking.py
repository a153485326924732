"""Metrics of the Contrastive Region Masking study (CRM paper §3.5, §3.6, Tables 2, 4, 5; docs/studies/masking.md).

:func:`compute_masking_metrics` turns the *compared rows* of one masking dataset (one
per model x sample x masked condition; schema in :mod:`vlmrobust.judges.crm`) into one tidy
table with the columns of :data:`vlmrobust.metrics.core.METRIC_COLUMNS` (same
conventions: fractions in [0, 1], text ``""`` and numbers NaN when they do not apply,
every problem a logged warning and a ``note``).

Columns: ``benchmark`` = the dataset, ``condition`` = the masked condition
(``mask-specific``, ``mask-random``), ``method`` = its region (``specific`` /
``random``), ``model``, ``family`` / ``role`` / ``base_model`` from the registry entry;
``group``, ``prompt`` ``""`` and ``severity``, ``ci_low``, ``ci_high`` NaN throughout.
The standard errors are rows of their own (metric ``<rate>_se``), not an interval.

Per model x masked condition, over the rows whose ``error`` is None (or ``""``):
    ``answer_flip_rate``      fraction with ``answer_flipped``; ``n`` = those rows.
    ``step_disruption_rate``  fraction with ``step_disrupted`` (an image counts as
                              disrupted if any step is: §3.5); ``n`` = those rows.
    ``hallucination_rate``    fraction with ``hallucinated`` over the rows whose
                              ``hallucinated`` is not None (None: the judge failed);
                              the excluded rows are counted in ``note``.
    ``<rate>_se``             binomial standard error sqrt(p (1 - p) / n) of each of
                              the three rates (Table 2's "±": 58.78% of 1611 -> 1.23%),
                              same ``n``; NaN when the rate is.
    ``step_disruption_share`` pooled (n_modified + n_disappeared) / original steps over
                              the rows; ``n`` = original steps (new masked steps are not
                              in the denominator, so the share stays in [0, 1]).
    ``mean_step_similarity``  mean over the rows of ``step_similarity`` (each row's mean
                              over its matched step pairs); rows with None (no matched
                              pair) are excluded and counted in ``note``; ``n`` = rows used.
    ``attribution_correct`` / ``attribution_partial`` / ``attribution_incorrect``
                              shares of ``region_attribution`` over the rows with one of
                              the three values (others excluded, in ``note``).
    ``compared``              value = ``n`` = rows compared without error.
    ``failed``                value = ``n`` = rows with an ``error`` (their most frequent
                              reasons in ``note``); they count in no rate.
A rate whose denominator is empty is NaN with a note saying why (and a warning). A model
of the run without any compared row for a condition gets every metric row, rates NaN,
``compared`` and ``failed`` 0, note "no compared rows", and a logged warning. Rows of
another dataset or of a condition that is not one of ``spec["masked_conditions"]`` are
ignored (warning); rows of a model not in the spec's models are kept, after them.
"""

from __future__ import annotations

import logging
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..core.io import read_jsonl
from ..core.records import output_key
from .core import FLOAT_COLUMNS, METRIC_COLUMNS, join_notes, metric_row, spec_dataset

__all__ = [
    "ATTRIBUTIONS",
    "MASKING_METRICS",
    "NOTE_NO_ROWS",
    "RATE_FIELDS",
    "binomial_se",
    "compute_masking_metrics",
    "example_condition",
    "example_samples",
    "masked_conditions",
    "masking_dataset",
    "read_compared",
]

log = logging.getLogger(__name__)

NOTE_NO_ROWS = "no compared rows"
#: rate metric -> the boolean field of a compared row it averages
RATE_FIELDS = {
    "answer_flip_rate": "answer_flipped",
    "step_disruption_rate": "step_disrupted",
    "hallucination_rate": "hallucinated",
}
ATTRIBUTIONS = ("correct", "partial", "incorrect")
#: every metric, in the order of the rows of one model x condition
MASKING_METRICS: tuple[str, ...] = (
    *(m for r in RATE_FIELDS for m in (r, f"{r}_se")),
    "step_disruption_share",
    "mean_step_similarity",
    *(f"attribution_{a}" for a in ATTRIBUTIONS),
    "compared",
    "failed",
)
_COUNTS = ("compared", "failed")


# --------------------------------------------------------------------------- spec


def masking_dataset(spec: Mapping[str, Any]) -> str:
    """The masking dataset name of the spec (``dataset``: a name or {name: ...})."""
    return spec_dataset(spec, "masking")


def display_models(spec: Mapping[str, Any], extra: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(id, display name) of the study's models: ``model_order``, then the rest of the
    registry entries in the spec, then ``extra`` (e.g. models found only in metrics)."""
    registry = spec.get("models") or {}
    order = [str(m) for m in spec.get("model_order") or []]
    order += [str(m) for m in registry if str(m) not in order]
    order += [str(m) for m in extra if str(m) not in order]
    out = []
    for m in order:
        entry = registry.get(m)
        name = entry.get("name") if isinstance(entry, Mapping) else None
        out.append((m, str(name or m)))
    return out


def masked_conditions(spec: Mapping[str, Any]) -> dict[str, str]:
    """condition -> region ("specific" | "random"), in spec order."""
    conds = spec.get("masked_conditions") or {}
    if not isinstance(conds, Mapping):
        raise ValueError("spec: 'masked_conditions' must map condition -> region")
    return {str(c): str(r) for c, r in conds.items()}


def _condition_of(spec: Mapping[str, Any], region: str) -> str | None:
    for cond, reg in masked_conditions(spec).items():
        if reg == region:
            return cond
    return None


def example_condition(spec: Mapping[str, Any]) -> str | None:
    """The condition the examples (Table 3, example figures) and Table 2 use: the
    specific-masking one, else the random one, else None."""
    return _condition_of(spec, "specific") or _condition_of(spec, "random")


# --------------------------------------------------------------------------- inputs


#: what a compared row gets from the hallucination judge's file
HALLUCINATION_FIELDS = (
    "hallucinated",
    "hallucination_judge",
    "hallucination_evidence",
    "hallucination_reason",
    "hallucination_error",
)
NO_JUDGMENT = "no hallucination judgment for this row"


def _read_with_path_defaults(path: Path) -> list[dict[str, Any]]:
    """Rows of ``<...>/<model>/<dataset>/<condition>.jsonl``; a row without ``model``,
    ``dataset`` or ``condition`` gets it from the path; its own fields win."""
    parts = path.parts
    defaults = {
        "model": parts[-3] if len(parts) >= 3 else "",
        "dataset": parts[-2] if len(parts) >= 2 else "",
        "condition": path.stem,
    }
    rows = []
    for rec in read_jsonl(path):
        for key, val in defaults.items():
            if not rec.get(key):
                rec[key] = val
        rows.append(rec)
    return rows


def read_compared(
    paths: Iterable[str | os.PathLike],
    hallucination: Iterable[str | os.PathLike] | None = None,
) -> list[dict[str, Any]]:
    """Compared rows of ``results/compared/<model>/<dataset>/<condition>.jsonl`` files, in
    file and line order, with the hallucination judge's verdicts
    (``results/judged-hallucination/<model>/<dataset>/<condition>.jsonl``) joined on
    (model, condition, variant#draw) when ``hallucination`` files are given. A comparable
    row (no ``error``) the judge has no row for gets ``hallucinated`` None and
    ``hallucination_error`` saying so: it counts in no hallucination rate."""
    out = [rec for p in paths for rec in _read_with_path_defaults(Path(p))]
    if hallucination is None:
        return out
    verdicts = {
        (str(r["model"]), str(r["condition"]), str(r["key"])): r
        for p in hallucination
        for r in _read_with_path_defaults(Path(p))
    }
    for row in out:
        if not _ok(row):
            continue
        key = (str(row["model"]), str(row["condition"]), output_key(row["variant_id"], row["draw"]))
        verdict = verdicts.get(key)
        if verdict is None:
            row.update({f: None for f in HALLUCINATION_FIELDS}, hallucination_error=NO_JUDGMENT)
            row["hallucination_evidence"] = row["hallucination_reason"] = ""
        else:
            row.update({f: verdict.get(f) for f in HALLUCINATION_FIELDS})
    return out


def _ok(row: Mapping[str, Any]) -> bool:
    return row.get("error") in (None, "")


def example_samples(
    rows: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]
) -> tuple[str | None, list[str]]:
    """(condition, sample ids) of the examples: :func:`example_condition`, and the sample
    ids of its rows compared without error (any model) in order of first appearance.
    All of them: callers take the first ``spec["examples"]``."""
    cond = example_condition(spec)
    if cond is None:
        return None, []
    dataset = spec.get("dataset")
    ids: dict[str, None] = {}
    for r in rows:
        if str(r.get("condition")) != cond or not _ok(r):
            continue
        if dataset and r.get("dataset") and str(r.get("dataset")) != masking_dataset(spec):
            continue
        ids.setdefault(str(r.get("sample_id")), None)
    return cond, list(ids)


def masking_examples(
    rows: Sequence[Mapping[str, Any]], spec: Mapping[str, Any]
) -> tuple[str | None, int, list[tuple[str, list[tuple[str, Mapping[str, Any]]]]]]:
    """(condition, number of candidate samples, [(sample id, [(model name, row)])]) of
    the first ``spec["examples"]`` examples; models in run order (others after, sorted)."""
    cond, samples = example_samples(rows, spec)
    chosen = samples[: int(spec.get("examples") or 0)]
    dataset = masking_dataset(spec)
    by_sample: dict[str, dict[str, Mapping[str, Any]]] = {s: {} for s in chosen}
    for r in rows:
        sid = str(r.get("sample_id"))
        if (
            sid in by_sample
            and str(r.get("condition")) == cond
            and str(r.get("dataset") or dataset) == dataset
        ):
            by_sample[sid].setdefault(str(r.get("model")), r)
    models = display_models(spec)
    known = dict(models)
    out = []
    for sid in chosen:
        have = by_sample[sid]
        pairs = [(name, have[m]) for m, name in models if m in have]
        pairs += [(m, have[m]) for m in sorted(have) if m not in known]
        out.append((sid, pairs))
    return cond, len(samples), out


# --------------------------------------------------------------------------- rows


def binomial_se(p: float, n: int) -> float:
    """sqrt(p (1 - p) / n); NaN for n = 0 or a NaN p."""
    if n <= 0 or math.isnan(p):
        return math.nan
    return math.sqrt(p * (1.0 - p) / n)


def _failed_note(failed: list[Mapping[str, Any]]) -> str:
    if not failed:
        return ""
    reasons = Counter(str(r.get("error")) for r in failed)
    top = [f"{k} x{v}" if v > 1 else k for k, v in reasons.most_common(3)]
    more = len(reasons) - len(top)
    return "errors: " + "; ".join(top) + (f"; {more} other reason(s)" if more > 0 else "")


@dataclass(frozen=True)
class _Notes:
    """The notes shared by the metrics of one model x condition: ``empty`` when no row
    compared without error, ``failed`` when some rows failed to compare ("" if not)."""

    empty: str
    failed: str

    def around(self, why: str) -> str:
        """``why`` between the two shared notes."""
        return join_notes(self.empty, why, self.failed)


def _model_rows(
    rows: list[Mapping[str, Any]], common: dict[str, Any], label: str
) -> list[dict[str, Any]]:
    """The metric rows of one model x condition (``label`` names it in warnings)."""
    if not rows:
        log.warning("%s: %s; every masking metric is NaN", label, NOTE_NO_ROWS)
        return [
            metric_row(
                metric, **common, value=0.0 if metric in _COUNTS else math.nan, note=NOTE_NO_ROWS
            )
            for metric in MASKING_METRICS
        ]
    ok = [r for r in rows if _ok(r)]
    failed = [r for r in rows if not _ok(r)]
    if not ok:
        log.warning(
            "%s: all %d compared row(s) have an error; the masking rates are NaN",
            label,
            len(rows),
        )
    notes = _Notes(
        empty="" if ok else f"no row compared without error ({len(failed)} failed)",
        failed=f"{len(failed)} row(s) failed to compare" if failed else "",
    )
    out = _rate_rows(ok, common, label, notes)
    out += _step_rows(ok, common, notes)
    out += _attribution_rows(ok, common, notes)
    out.append(metric_row("compared", **common, value=float(len(ok)), n=len(ok)))
    out.append(
        metric_row(
            "failed",
            **common,
            value=float(len(failed)),
            n=len(failed),
            note=_failed_note(failed),
        )
    )
    return out


def _rate_rows(
    ok: list[Mapping[str, Any]], common: Mapping[str, Any], label: str, notes: _Notes
) -> list[dict[str, Any]]:
    """Each rate of :data:`RATE_FIELDS` and its binomial standard error, over the rows
    that have the field (the others excluded and counted)."""
    out = []
    for metric, field in RATE_FIELDS.items():
        known = [r for r in ok if r.get(field) is not None]
        excluded = len(ok) - len(known)
        why = ""
        if excluded:
            what = "the hallucination judge failed" if field == "hallucinated" else f"no {field}"
            why = f"{excluded} row(s) excluded ({what})"
        n = len(known)
        p = sum(bool(r.get(field)) for r in known) / n if n else math.nan
        note = notes.around(why)
        if ok and not n:
            log.warning("%s: no row with %s; %s is NaN", label, field, metric)
        out.append(metric_row(metric, **common, value=p, n=n, note=note))
        out.append(metric_row(f"{metric}_se", **common, value=binomial_se(p, n), n=n, note=note))
    return out


def _step_rows(
    ok: list[Mapping[str, Any]], common: Mapping[str, Any], notes: _Notes
) -> list[dict[str, Any]]:
    """``step_disruption_share`` (modified or disappeared steps / original steps) and
    ``mean_step_similarity`` (over the rows with a matched step pair)."""
    total = sum(len(r.get("original_steps") or []) for r in ok)
    changed = sum(int(r.get("n_modified") or 0) + int(r.get("n_disappeared") or 0) for r in ok)
    note = notes.empty or ("" if total else "no original steps")
    sims = [float(r["step_similarity"]) for r in ok if r.get("step_similarity") is not None]
    excluded = len(ok) - len(sims)
    return [
        metric_row(
            "step_disruption_share",
            **common,
            value=changed / total if total else math.nan,
            n=total,
            note=join_notes(note, notes.failed),
        ),
        metric_row(
            "mean_step_similarity",
            **common,
            value=sum(sims) / len(sims) if sims else math.nan,
            n=len(sims),
            note=notes.around(
                f"{excluded} row(s) without a matched step pair excluded" if excluded else ""
            ),
        ),
    ]


def _attribution_rows(
    ok: list[Mapping[str, Any]], common: Mapping[str, Any], notes: _Notes
) -> list[dict[str, Any]]:
    """The share of each region attribution over the rows with a known one."""
    known = [a for a in (str(r.get("region_attribution")) for r in ok) if a in ATTRIBUTIONS]
    excluded = len(ok) - len(known)
    note = notes.around(
        f"{excluded} row(s) without a region attribution excluded" if excluded else ""
    )
    counts = Counter(known)
    n = len(known)
    return [
        metric_row(
            f"attribution_{a}", **common, value=counts[a] / n if n else math.nan, n=n, note=note
        )
        for a in ATTRIBUTIONS
    ]


# --------------------------------------------------------------------------- main


def compute_masking_metrics(
    rows: Iterable[Mapping[str, Any]], spec: Mapping[str, Any]
) -> pd.DataFrame:
    """The masking study's metrics (tidy, :data:`METRIC_COLUMNS`; definitions: the
    module docstring). ``rows``: compared rows (:func:`read_compared`); ``spec``:
    ``dataset``, ``models``, ``model_order``, ``masked_conditions`` (condition -> region).
    Problems are logged as warnings and written in the rows' ``note``."""
    dataset = masking_dataset(spec)
    conds = masked_conditions(spec)
    models = spec.get("models") or {}
    order = [m for m, _ in display_models(spec)]

    grouped: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    other_ds: Counter[str] = Counter()
    other_cond: Counter[str] = Counter()
    for r in rows:
        ds = str(r.get("dataset") or dataset)
        cond = str(r.get("condition") or "")
        if ds != dataset:
            other_ds[ds] += 1
            continue
        if cond not in conds:
            other_cond[cond] += 1
            continue
        grouped.setdefault((str(r.get("model") or ""), cond), []).append(r)
    for ds, k in other_ds.items():
        log.warning("%d compared row(s) of dataset %r ignored (the run is %r)", k, ds, dataset)
    for cond, k in other_cond.items():
        log.warning(
            "dataset %s: %d compared row(s) of condition %r ignored (masked conditions: %s)",
            dataset,
            k,
            cond,
            ", ".join(conds) or "none",
        )
    extra = list(dict.fromkeys(m for m, _ in grouped if m not in order))
    if extra:
        log.warning(
            "dataset %s: compared rows of model(s) %s that are not among the run's models",
            dataset,
            ", ".join(extra),
        )

    out: list[dict[str, Any]] = []
    for m in [*order, *extra]:
        entry = models.get(m) or {}
        info = {
            "model": m,
            "base_model": str(entry.get("base") or ""),
            "family": str(entry.get("family") or ""),
            "role": str(entry.get("role") or ""),
        }
        for cond, region in conds.items():
            common = dict(**info, benchmark=dataset, condition=cond, method=region)
            out += _model_rows(grouped.get((m, cond), []), common, f"model {m}, {dataset} / {cond}")
    df = pd.DataFrame(out, columns=list(METRIC_COLUMNS))
    for c in FLOAT_COLUMNS:
        df[c] = df[c].astype(float)
    df["n"] = df["n"].astype("int64")
    return df
