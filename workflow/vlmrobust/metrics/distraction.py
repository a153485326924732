"""Metrics of the semantic-distraction study (Distract-Bench §5, Tables 3-5, Figs. 5-6).

:func:`compute_distraction_metrics` turns the scored rows of Distract-Bench under the
``clean``, ``distracted`` and ``corrupt`` conditions (same sample ids) and the
distractor-reference judgments of the ``distracted`` outputs into one tidy table with
the columns of :data:`vlmrobust.metrics.core.METRIC_COLUMNS` (same conventions:
fractions in [0, 1], text ``""`` and numbers NaN when they do not apply, every problem
a warning and a ``note``). Every accuracy, RR, retention and pair statistic below is
computed by the shared engine :func:`~vlmrobust.metrics.core.perturbation_metrics`
(without the method x severity breakdown) and relabelled, never recomputed here. ``benchmark`` is the Distract-Bench dataset name throughout.

Table 3 (all scored rows of the dataset; one run with ``perturbed_conditions =
[distracted]``)
    ``accuracy`` (condition clean / distracted; ``n`` = rows), ``rr`` (distracted;
    clean accuracy 0 -> NaN, note, warning), ``retention`` (distracted) and ``missing``
    rows (a model without scored rows: note "no scored outputs", warning) exactly as the
    corruption module gives them, plus
    ``drop_pp``   clean accuracy - distracted accuracy, as a FRACTION (0.063 = 6.3 pp;
                  tables multiply by 100); ``n`` = distracted rows. NaN (note) when
                  either accuracy is missing.

Table 4 (``group`` = ``matched``: only the samples that have scored rows under all
three conditions — the paper's controlled 506-sample comparison; two runs on those
rows, ``perturbed_conditions = [corrupt]`` and ``[distracted]``)
    ``matched_accuracy`` per model x condition (clean once, corrupt, distracted),
    ``matched_rr`` per model x perturbed condition: the corruption module's
    ``accuracy`` / ``rr`` on the matched rows, renamed so they never clash with the
    Table-3 rows.
    Per registry pair (a reasoning model whose ``base`` is among the run's models;
    ``model`` = reasoning, ``base_model`` = base) x condition (corrupt, distracted):
    ``pair_n``, ``agreement``, ``retention_gap`` (with the paired-bootstrap CI),
    ``error_jaccard``: the corruption module's pair statistics (definitions there), and
    ``rr_gap``    matched RR of the base - matched RR of the reasoning model (positive =
                  the base keeps more); ``n`` = matched samples. A pair the corruption
                  module gives no row for (no outputs of both models under that
                  condition) still gets its rows, NaN with a note.

Table 5 / Figure 6 (condition distracted; :func:`reference_rates`)
    ``drr``, ``hfr`` (``n`` = N judged rows with a verdict and a scored row),
    ``ref_correct`` (``n`` = correct ones), ``ref_wrong`` (``n`` = wrong ones). A judged
    row is matched to its scored ``distracted`` row by ``key`` (the model's rows only);
    rows without a verdict, or whose key has no scored row, are excluded and counted in
    ``note``; scored distracted rows with no judgment are counted in ``note`` too. No
    judged rows for a model -> NaN rows, note "no judged rows" and a warning.
    ``hfr_relative`` per registry pair: HFR of the reasoning model / HFR of its base
    (Figure 6B); NaN with a note when either HFR is NaN or the base HFR is 0.
    A model listed in the spec's ``verdicts_only`` (released verdicts, no outputs:
    config ``imports`` with ``references`` and no ``path``) gets ``drr`` from its judged
    rows alone (``n`` = rows with a verdict; the others excluded and counted in the
    note) and ``hfr``, ``ref_correct``, ``ref_wrong`` NaN with the note "no outputs:
    correctness unknown"; it has no scored rows, so its Table-3 rows are missing too.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..core.io import read_jsonl
from .core import (
    FLOAT_COLUMNS,
    METRIC_COLUMNS,
    drop_failed_requests,
    join_notes,
    metric_row,
    model_info,
    perturbation_metrics,
    registry_pairs,
    spec_dataset,
    spec_models,
)

__all__ = [
    "MATCHED",
    "REFERENCE_METRICS",
    "compute_distraction_metrics",
    "distraction_conditions",
    "distraction_dataset",
    "read_judged",
]

#: ``group`` of the Table-4 rows (matched samples)
MATCHED = "matched"
#: metric name -> key of :func:`reference_rates`
REFERENCE_METRICS = {
    "drr": "DRR",
    "hfr": "HFR",
    "ref_correct": "Ref_correct",
    "ref_wrong": "Ref_wrong",
}
PAIR_METRICS = ("pair_n", "agreement", "retention_gap", "error_jaccard")

NOTE_NO_JUDGED = "no judged rows"
NOTE_NO_OUTPUTS = "no outputs: correctness unknown"
NOTE_VERDICTS_ONLY = "released verdicts only, no outputs"
NOTE_NO_MATCHED = "no samples scored under all of clean, distracted and corrupt"

_TEXT = tuple(c for c in METRIC_COLUMNS if c not in (*FLOAT_COLUMNS, "n"))


# --------------------------------------------------------------------------- spec


def distraction_dataset(spec: Mapping[str, Any]) -> str:
    """The Distract-Bench dataset name of the spec (``dataset``: a name or {name: ...})."""
    return spec_dataset(spec, "Distract-Bench")


def distraction_conditions(spec: Mapping[str, Any]) -> tuple[str, str, str]:
    """(clean, distracted, corrupt) condition names, defaults clean/distracted/corrupt."""
    return (
        str(spec.get("clean_condition") or "clean"),
        str(spec.get("distracted_condition") or "distracted"),
        str(spec.get("corruption_condition") or "corrupt"),
    )


# --------------------------------------------------------------------------- rows


def _value(rows: pd.DataFrame, **where: str) -> tuple[float, str, int]:
    """(value, note, n) of the single row matching ``where``; (NaN, '', 0) if none."""
    sel = np.ones(len(rows), dtype=bool)
    for col, val in where.items():
        sel &= (rows[col] == val).to_numpy()
    hit = rows[sel]
    if hit.empty:
        return math.nan, "", 0
    r = hit.iloc[0]
    return float(r["value"]), str(r["note"]), int(r["n"])


# --------------------------------------------------------------------------- inputs


def read_judged(paths: Iterable[str | os.PathLike]) -> dict[str, list[dict[str, Any]]]:
    """Judged rows by model from ``results/judged/<model>/<dataset>/<condition>/<p>.jsonl``
    (the model is the fourth-last path part; a row's own ``model`` field wins)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for p in paths:
        parts = Path(p).parts
        default = parts[-4] if len(parts) >= 4 else ""
        for rec in read_jsonl(p):
            out.setdefault(str(rec.get("model") or default), []).append(rec)
    return out


def _judged_by_model(judged: Any) -> dict[str, list[dict[str, Any]]]:
    if judged is None:
        return {}
    if isinstance(judged, pd.DataFrame):
        if judged.empty:
            return {}
        if "model" not in judged.columns:
            raise ValueError("judged rows (a DataFrame) need a 'model' column")
        out: dict[str, list[dict[str, Any]]] = {}
        for rec in judged.to_dict("records"):
            verdict = rec.get("verdict")
            if verdict is not None and not isinstance(verdict, str) and pd.isna(verdict):
                rec["verdict"] = None
            out.setdefault(str(rec["model"]), []).append(rec)
        return out
    if isinstance(judged, Mapping):
        return {str(m): [dict(r) for r in rows or []] for m, rows in judged.items()}
    raise TypeError(
        f"judged rows must be a mapping model -> rows or a DataFrame, got {type(judged).__name__}"
    )


# --------------------------------------------------------------------------- rates


def _truth(value: Any) -> bool | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("true", "1", "yes", "correct"):
            return True
        if v in ("false", "0", "no", "wrong"):
            return False
        raise ValueError(f"correctness {value!r} is not a boolean")
    return bool(value)


def reference_rates(
    judged: Sequence[Mapping[str, Any]], correct: Mapping[str, Any] | Sequence[Any]
) -> dict[str, Any]:
    """The paper's App. D distractor-reference metrics, as fractions in [0, 1].

    ``judged`` are rows of :func:`judge_reference` (``key``, ``verdict``); ``correct``
    is the correctness of each answer, by key (a mapping) or aligned with ``judged``.
    Rows without a verdict (a failed judgment) or without a correctness are excluded
    and counted in ``n_excluded``. Over the N remaining rows (r = verdict is "yes",
    c = correct):

    - ``DRR`` = sum r / N, ``HFR`` = sum r (1 - c) / N (both over all N rows);
    - ``Ref_correct`` = sum r c / sum c, ``Ref_wrong`` = sum r (1 - c) / sum (1 - c)
      (NaN when there is no correct / no wrong row).

    ``n`` = N, ``n_correct`` = sum c, ``n_wrong`` = sum (1 - c); DRR and HFR are NaN
    when N = 0.
    """
    if isinstance(correct, Mapping):
        lookup = {str(k): v for k, v in correct.items()}
        pairs = []
        for row in judged:
            key = str(row.get("key"))
            if key not in lookup:
                raise KeyError(f"no correctness for judged row {key!r}")
            pairs.append((row, lookup[key]))
    else:
        if len(correct) != len(judged):
            raise ValueError(
                f"correct has {len(correct)} values for {len(judged)} judged rows; pass a "
                "mapping by key or one value per row"
            )
        pairs = list(zip(judged, correct, strict=True))
    r_list: list[int] = []
    c_list: list[int] = []
    excluded = 0
    for row, c in pairs:
        verdict = row.get("verdict")
        truth = _truth(c)
        if verdict not in ("yes", "no") or truth is None:
            excluded += 1
            continue
        r_list.append(1 if verdict == "yes" else 0)
        c_list.append(1 if truth else 0)
    n = len(r_list)
    n_correct = sum(c_list)
    n_wrong = n - n_correct
    ref_and_correct = sum(r * c for r, c in zip(r_list, c_list, strict=True))
    ref_and_wrong = sum(r * (1 - c) for r, c in zip(r_list, c_list, strict=True))
    nan = float("nan")
    return {
        "n": n,
        "n_excluded": excluded,
        "n_correct": n_correct,
        "n_wrong": n_wrong,
        "DRR": sum(r_list) / n if n else nan,
        "HFR": ref_and_wrong / n if n else nan,
        "Ref_correct": ref_and_correct / n_correct if n_correct else nan,
        "Ref_wrong": ref_and_wrong / n_wrong if n_wrong else nan,
    }


def _verdicts_only_rows(
    jrows: Sequence[Mapping[str, Any]], common: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Table 5 of a model with released verdicts but no outputs: DRR needs no
    correctness (yes / rows with a verdict; rows without one excluded and counted);
    HFR, Ref_correct and Ref_wrong need it: NaN, note :data:`NOTE_NO_OUTPUTS`."""
    verdicts = [r.get("verdict") for r in jrows]
    judged = [v for v in verdicts if v in ("yes", "no")]
    n = len(judged)
    excluded = len(verdicts) - n
    note = f"{excluded} judged row(s) without a verdict excluded" if excluded else ""
    drr = sum(v == "yes" for v in judged) / n if n else math.nan
    if not n:
        note = join_notes("no judged row with a verdict", note)
    out = [metric_row("drr", **common, value=drr, n=n, note=note)]
    for metric in ("hfr", "ref_correct", "ref_wrong"):
        out.append(metric_row(metric, **common, note=NOTE_NO_OUTPUTS))
    return out


# --------------------------------------------------------------------------- main


@dataclass
class _Study:
    """The distraction spec, read once, and the warnings of one computation."""

    spec: Mapping[str, Any]
    dataset: str
    clean: str
    distracted: str
    corrupt: str
    models: dict[str, Mapping[str, Any]]
    order: list[str]
    verdicts_only: set[str]
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> _Study:
        """The study of ``spec`` (names, conditions, models), with no warning yet."""
        clean, distracted, corrupt = distraction_conditions(spec)
        models, order = spec_models(spec)
        verdicts_only = {str(m) for m in spec.get("verdicts_only") or []}
        return cls(
            spec,
            distraction_dataset(spec),
            clean,
            distracted,
            corrupt,
            models,
            order,
            verdicts_only,
        )

    def sub_spec(self, perturbed: str) -> dict[str, Any]:
        """The perturbation engine's spec for the clean condition against ``perturbed``."""
        return {
            "models": dict(self.spec.get("models") or {}),
            "model_order": self.order,
            "datasets": {self.dataset: {}},
            "clean_condition": self.clean,
            "perturbed_conditions": [perturbed],
            "bootstrap": dict(self.spec.get("bootstrap") or {}),
        }

    def run(self, frame: pd.DataFrame, perturbed: str) -> pd.DataFrame:
        """The engine's rows of the dataset for ``perturbed`` (its warnings kept)."""
        # one edited image per sample: no method x severity breakdown
        out, warns = perturbation_metrics(frame, None, self.sub_spec(perturbed), by_method=False)
        self.warnings.extend(warns)
        return out[out["benchmark"] == self.dataset]

    def pair_info(self, reasoning: str, base: str) -> dict[str, str]:
        """The registry columns of a (reasoning, base) pair's rows."""
        info = model_info(self.models, reasoning)
        return dict(model=reasoning, base_model=base, family=info["family"], role=info["role"])


def compute_distraction_metrics(
    scored: pd.DataFrame, judged: Any, spec: Mapping[str, Any]
) -> tuple[pd.DataFrame, list[str]]:
    """The distraction study's metrics (tidy, :data:`METRIC_COLUMNS`) and warnings.

    ``scored``: scored rows (the corruption study's schema, with ``key``) — rows of
    other datasets or conditions are ignored; ``judged``: the ``distracted`` judgments,
    a mapping model -> rows ({key, verdict yes|no|None, ...}) or a DataFrame with a
    ``model`` column (see :func:`read_judged`); ``spec``: ``models``, ``model_order``,
    ``dataset``, ``clean_condition``, ``distracted_condition``, ``corruption_condition``,
    ``bootstrap``, optionally ``verdicts_only``. Definitions: the module docstring.
    """
    study = _Study.of(spec)
    df = scored.drop(columns=[c for c in ("prompt_setting",) if c in scored.columns])
    df = df[df["dataset"].astype(str) == study.dataset] if "dataset" in df.columns else df
    rows, seen = _table3_rows(study, df)
    rows += _table4_rows(study, df)
    rows += _table5_rows(study, df, judged, seen)
    return _tidy(rows), list(dict.fromkeys(study.warnings))


def _tidy(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as a frame of :data:`METRIC_COLUMNS` with clean column types."""
    out = pd.DataFrame(rows, columns=list(METRIC_COLUMNS))
    for c in _TEXT:
        out[c] = out[c].astype(object).where(out[c].notna(), "").astype(str)
    for c in FLOAT_COLUMNS:
        out[c] = out[c].astype(float)
    out["n"] = out["n"].astype(np.int64)
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------- Table 3


def _table3_rows(study: _Study, df: pd.DataFrame) -> tuple[list[dict[str, Any]], list[str]]:
    """Table 3 on every scored row of the dataset, and the models it has rows of."""
    full = study.run(df, study.distracted)
    keep = full[full["metric"].isin(["accuracy", "rr", "retention", "missing"])]
    rows: list[dict[str, Any]] = keep.to_dict("records")
    seen = list(dict.fromkeys([*study.order, *full["model"].astype(str)]))
    seen = [m for m in seen if m]
    # a run without clean outputs (released distracted outputs alone) says so
    clean_run = bool((df["condition"].astype(str) == study.clean).any())
    for m in seen:
        rows += _drop_rows(study, full, m, clean_run)
    return rows, seen


def _drop_rows(study: _Study, full: pd.DataFrame, m: str, clean_run: bool) -> list[dict[str, Any]]:
    """Model ``m``'s ``drop_pp`` row, and an ``rr`` row saying why when it has no RR."""
    clean, distracted = study.clean, study.distracted
    common = dict(
        model=m, **model_info(study.models, m), benchmark=study.dataset, condition=distracted
    )
    ca, _, _ = _value(full, metric="accuracy", model=m, condition=clean)
    da, _, dn = _value(full, metric="accuracy", model=m, condition=distracted)
    why = ""
    if m in study.verdicts_only:
        why = NOTE_VERDICTS_ONLY
    elif not clean_run:
        why = f"no {clean} outputs in this run"
    note = ""
    if math.isnan(ca) or math.isnan(da):
        absent = [c for c, a in ((clean, ca), (distracted, da)) if math.isnan(a)]
        note = join_notes(why, f"no scored outputs under {', '.join(absent)}")
    rows = [metric_row("drop_pp", **common, value=ca - da, n=dn, note=note)]
    has_rr = (
        (full["metric"] == "rr") & (full["model"] == m) & (full["condition"] == distracted)
    ).any()
    if not has_rr:  # no RR without both accuracies: say why rather than nothing
        rows.append(metric_row("rr", **common, note=note or "no RR"))
    return rows


# --------------------------------------------------------------------------- Table 4


def _table4_rows(study: _Study, df: pd.DataFrame) -> list[dict[str, Any]]:
    """Table 4: the samples scored under all three conditions, per condition."""
    conds = df["condition"].astype(str)
    ids = df["sample_id"].astype(str)
    shared = (
        set(ids[conds == study.clean])
        & set(ids[conds == study.distracted])
        & set(ids[conds == study.corrupt])
    )
    if not shared:
        study.warnings.append(
            f"dataset {study.dataset}: {NOTE_NO_MATCHED}; the matched comparison (Table 4) is NaN"
        )
    matched = df[ids.isin(shared)]
    rows: list[dict[str, Any]] = []
    for cond in (study.corrupt, study.distracted):
        res = study.run(matched, cond)
        rows += _matched_model_rows(study, res, cond)
        for r, b in registry_pairs(study.models, study.order):
            rows += _matched_pair_rows(study, res, cond, (r, b), len(shared))
    return rows


def _matched_model_rows(study: _Study, res: pd.DataFrame, cond: str) -> list[dict[str, Any]]:
    """The engine's accuracy and RR on the matched rows, as ``matched_*`` rows."""
    rows = []
    for metric, new in (("accuracy", "matched_accuracy"), ("rr", "matched_rr")):
        part = res[res["metric"] == metric]
        if cond == study.distracted and metric == "accuracy":
            part = part[part["condition"] != study.clean]  # clean rows came with the first run
        for rec in part.to_dict("records"):
            rec.update(metric=new, group=MATCHED)
            rows.append(rec)
    return rows


def _matched_pair_rows(
    study: _Study, res: pd.DataFrame, cond: str, pair: tuple[str, str], n_shared: int
) -> list[dict[str, Any]]:
    """A registry pair's statistics on the matched rows under ``cond``, and its ``rr_gap``."""
    r, b = pair
    common = dict(**study.pair_info(r, b), benchmark=study.dataset, group=MATCHED, condition=cond)
    absent_note = (
        NOTE_NO_MATCHED
        if not n_shared
        else (f"no scored outputs of both models under {cond} on the matched samples")
    )
    rows = []
    for metric in PAIR_METRICS:
        hit = res[(res["metric"] == metric) & (res["model"] == r) & (res["base_model"] == b)]
        if hit.empty:
            rows.append(metric_row(metric, **common, note=absent_note))
        else:
            rec = hit.iloc[0].to_dict()
            rec.update(common)
            rows.append(rec)
    rb, nb, _ = _value(res, metric="rr", model=b, condition=cond)
    rr_, nr, _ = _value(res, metric="rr", model=r, condition=cond)
    note = ""
    if math.isnan(rb) or math.isnan(rr_):
        note = join_notes(
            absent_note if not n_shared else "",
            f"{b}: {nb or 'no RR'}" if math.isnan(rb) else "",
            f"{r}: {nr or 'no RR'}" if math.isnan(rr_) else "",
        )
    rows.append(metric_row("rr_gap", **common, value=rb - rr_, n=n_shared, note=note))
    return rows


# --------------------------------------------------------------------------- Table 5


def _table5_rows(
    study: _Study, df: pd.DataFrame, judged: Any, seen: list[str]
) -> list[dict[str, Any]]:
    """Table 5 / Figure 6: each model's reference rates, then each pair's relative HFR."""
    by_model = _judged_by_model(judged)
    # failed requests are no answers (the engine above warned about them): their
    # judgments count as "without a scored row"
    answered = drop_failed_requests(df, {}, [])
    dist = answered[answered["condition"].astype(str) == study.distracted]
    if any(by_model.values()) and "key" not in dist.columns:
        raise ValueError("scored rows lack the column 'key' needed to match the judged rows")
    extra = sorted(m for m in by_model if m not in seen)
    if extra:
        study.warnings.append(
            f"judged rows of model(s) {', '.join(extra)} that are not among the run's models "
            "or have no scored rows; reported without family and role"
        )
    rows: list[dict[str, Any]] = []
    hfr: dict[str, tuple[float, int]] = {}
    for m in [*seen, *extra]:
        mine = dist[dist["model"].astype(str) == m]
        model_rows, hfr[m] = _reference_rows(study, m, by_model.get(m) or [], mine)
        rows += model_rows
    for r, b in registry_pairs(study.models, study.order):
        rows.append(_hfr_relative_row(study, (r, b), hfr))
    return rows


def _reference_rows(
    study: _Study, m: str, jrows: list[dict[str, Any]], mine: pd.DataFrame
) -> tuple[list[dict[str, Any]], tuple[float, int]]:
    """Model ``m``'s Table-5 rows from its judged rows and its scored distracted rows
    ``mine``, and its (HFR, n) for the relative HFR (NaN, 0 when it has none)."""
    common = dict(
        model=m, **model_info(study.models, m), benchmark=study.dataset, condition=study.distracted
    )
    where = f"{study.dataset} / {study.distracted}"
    if not jrows:
        study.warnings.append(
            f"model {m}: {NOTE_NO_JUDGED} for {where}; DRR, HFR, Ref_correct and Ref_wrong are NaN"
        )
        no_rows = [
            metric_row(metric, **common, note=NOTE_NO_JUDGED) for metric in REFERENCE_METRICS
        ]
        return no_rows, (math.nan, 0)
    if m in study.verdicts_only:
        rows = _verdicts_only_rows(jrows, common)
        study.warnings.append(
            f"model {m}: released verdicts only (no outputs) for {where}; DRR from the "
            "verdicts, HFR, Ref_correct and Ref_wrong NaN"
        )
        return rows, (math.nan, 0)
    correct = {}
    if len(mine):
        correct = dict(zip(mine["key"].astype(str), mine["correct"], strict=True))
    known = [r for r in jrows if str(r.get("key")) in correct]
    rates = reference_rates(known, correct)
    base_note = _reference_note(study, m, jrows, correct, rates["n_excluded"])
    if rates["n"] == 0:
        study.warnings.append(f"model {m}: no judged row has a verdict and a scored row; NaN")
    return _rate_rows(rates, common, base_note), (float(rates["HFR"]), int(rates["n"]))


def _reference_note(
    study: _Study,
    m: str,
    jrows: list[dict[str, Any]],
    correct: Mapping[str, Any],
    n_excluded: int,
) -> str:
    """The note of model ``m``'s reference rates: the judged rows left out (no verdict,
    no scored row) and the scored rows not judged; a judged row without a scored row
    is a warning too."""
    distracted = study.distracted
    no_score = sum(1 for r in jrows if str(r.get("key")) not in correct)
    judged_keys = {str(r.get("key")) for r in jrows}
    unjudged = sum(1 for k in correct if k not in judged_keys)
    parts = []
    if n_excluded:
        parts.append(f"{n_excluded} judged row(s) without a verdict excluded")
    if no_score:
        parts.append(f"{no_score} judged row(s) without a scored {distracted} row excluded")
        study.warnings.append(
            f"model {m}: {no_score} judged row(s) whose key has no scored {distracted} "
            "row; excluded from DRR/HFR"
        )
    if unjudged:
        parts.append(f"{unjudged} scored {distracted} row(s) not judged")
    return join_notes(*parts)


def _rate_rows(
    rates: Mapping[str, Any], common: Mapping[str, Any], base_note: str
) -> list[dict[str, Any]]:
    """The rows of :func:`reference_rates`' values (a NaN one says why in its note)."""
    counts = {
        "drr": rates["n"],
        "hfr": rates["n"],
        "ref_correct": rates["n_correct"],
        "ref_wrong": rates["n_wrong"],
    }
    rows = []
    for metric, key in REFERENCE_METRICS.items():
        value = float(rates[key])
        note = base_note
        if math.isnan(value):
            why = {
                "ref_correct": "no correct judged output",
                "ref_wrong": "no wrong judged output",
            }.get(metric, "no judged row with a verdict")
            note = join_notes(why, base_note)
        rows.append(metric_row(metric, **common, value=value, n=counts[metric], note=note))
    return rows


def _hfr_relative_row(
    study: _Study, pair: tuple[str, str], hfr: Mapping[str, tuple[float, int]]
) -> dict[str, Any]:
    """A registry pair's ``hfr_relative``: HFR of the reasoning model / HFR of its base."""
    r, b = pair
    hb, hr = hfr.get(b, (math.nan, 0))[0], hfr.get(r, (math.nan, 0))[0]
    note = ""
    if math.isnan(hb) or math.isnan(hr):
        note = "HFR missing for " + ", ".join(x for x, h in ((b, hb), (r, hr)) if math.isnan(h))
    elif hb == 0:
        note = "base HFR is 0"
        study.warnings.append(f"pair {b} -> {r}: base HFR is 0, so the relative HFR is NaN")
    value = hr / hb if not note else math.nan
    return metric_row(
        "hfr_relative",
        **study.pair_info(r, b),
        benchmark=study.dataset,
        condition=study.distracted,
        value=value,
        n=hfr.get(r, (math.nan, 0))[1],
        note=note,
    )
