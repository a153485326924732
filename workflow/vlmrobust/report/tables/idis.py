"""Tables of the Idis study (definitions: :mod:`vlmrobust.metrics.idis`).

Every table is a view of the study's metrics table (one row per metric and group of
responses; see :data:`TABLE_CAPTIONS` for what each one shows and which table of the
Idis paper it mirrors). Which tables a dataset gets depends on its spec only
(:func:`idis_table_names`), so the workflow knows the files before the metrics exist:

* ``summary`` always;
* ``extractor_agreement`` when the spec names more than one attribute extractor;
* ``sizes`` when the dataset has a ``size`` condition;
* ``mitigation`` when the spec names a mitigation prompt;
* ``sampling`` when the dataset has a ``visual`` condition;
* ``attention_blocking`` when the spec asks for attention blocking.

A table whose rows are not in the metrics is still written: empty, with a footnote
saying what is missing. Every table's footnotes carry the notes of the rows it shows
(failed requests, lengths from completion tokens, excluded traces ...).

This module also holds what the tables and the figures
(:mod:`vlmrobust.report.figures.idis`) share: the normalised metrics frame, the models
in display order, the main prompt and extractor, pooling over groups and the choice of
one group among several.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from ...metrics.idis import EXTRA_COLUMNS, GROUP_COLUMNS, POOLED, group_label, sort_key
from ..common import build_view
from .render import DASH, Table, fmt_count, fmt_pct, is_missing, linked

__all__ = [
    "TABLE_CAPTIONS",
    "attention_blocking_table",
    "extractor_agreement_table",
    "idis_table",
    "idis_table_names",
    "idis_tables",
    "mitigation_table",
    "sampling_table",
    "sizes_table",
    "summary_table",
]

_KEY = ["model", "prompt", "condition", "kind", "semantics", "distractors", "size", "resolution"]
#: kinds whose groups carry a semantics and a number of distractors
DISTRACTOR_KINDS = ("visual", "typographic", "textual")
SEMANTICS_ORDER = (
    "aligned",
    "conflicting",
    "irrelevant",
    "typographic",
    "handwritten",
    "mathwriting",
    "textual",
)
SIZES = ("small", "medium", "large")
BLOCKS = ("none", "distractor", "target")
#: the columns of the mitigation views (Waterbirds groups, or perception semantics)
MITIGATION_SUBSETS = ("aligned", "conflicting", "overall")

TABLE_CAPTIONS: dict[str, str] = {
    "summary": (
        "Idis summary: per model and prompt setting, one row per group of responses "
        "(clean; each distractor kind, semantics and number of distractors; sizes; "
        "resolutions) with the questions, responses, accuracy (metric accuracy, every "
        "draw of every question, with its question-bootstrap interval) and the mean "
        "reasoning length in tokens (metric mean_length)."
    ),
    "extractor_agreement": (
        "Agreement of the attribute extractors (the Idis paper, Table 4): per model, the "
        "Pearson correlation of the per-trace distractor attribute ratio r_attr given by "
        "two extractors, over the traces both judged (metric extractor_pearson, one row "
        "per pair A vs B)."
    ),
    "sizes": (
        "Distractor size (the Idis paper, Table 9): per model, accuracy in percent "
        "(metric accuracy) and, when attributes were extracted, the mean distractor "
        "attribute ratio r_attr in percent (metric r_attr, main extractor) for small, "
        "medium and large pasted distractors."
    ),
    "mitigation": (
        "Mitigation prompt (the Idis paper, Table 10): per model, the main prompt and "
        "each mitigation prompt; accuracy in percent and mean reasoning length in tokens "
        "(metrics accuracy and mean_length) on the aligned and conflicting questions and "
        "overall. Aligned and conflicting are the Waterbirds groups (rows with a subset) "
        "or, without them, the semantics of the distractors; the values pool the groups "
        "weighted by their responses."
    ),
    "sampling": (
        "Sampling variability (the Idis paper, Appendix D.3): per model, prompt and "
        "semantics, the mean reasoning length at each number of distractors (metric "
        "mean_length), the within-image standard deviation of the length over draws "
        "(sampling_within_sd), the length difference between the largest number of "
        "distractors and one distractor with its 95% interval (sampling_delta) and the "
        "probability that a one-distractor draw is longer (sampling_p_longer)."
    ),
    "attention_blocking": (
        "Attention blocking (the Idis paper, Figure 7a as a table): per model, prompt and "
        "condition, the accuracy in percent when nothing, the distractor tokens or the "
        "target tokens are blocked (metric blocked_accuracy, block none, distractor, "
        "target)."
    ),
}


# ---------------------------------------------------------------------------
# What the tables and the figures share
# ---------------------------------------------------------------------------


def prepare_metrics(metrics: pd.DataFrame) -> pd.DataFrame:
    """The metrics with every Idis column present: text columns as str ("" where not
    applicable or absent), value / ci_low / ci_high as floats, n as a number."""
    m = metrics.copy()
    for c in ("metric", "model", "prompt", "condition", "note", *EXTRA_COLUMNS):
        if c not in m.columns:
            m[c] = ""
        m[c] = m[c].fillna("").astype(str)
    for c in ("value", "ci_low", "ci_high", "n"):
        if c not in m.columns:
            m[c] = math.nan
        m[c] = pd.to_numeric(m[c], errors="coerce").astype(float)
    return m


def model_names(spec: Mapping[str, Any]) -> dict[str, str]:
    """Model id -> display name (the registry's ``name``, else the id)."""
    out = {}
    for mid, fields in (spec.get("models") or {}).items():
        name = fields.get("name") if isinstance(fields, Mapping) else None
        out[str(mid)] = str(name or mid)
    return out


def models_present(m: pd.DataFrame, spec: Mapping[str, Any]) -> list[str]:
    """The models of ``m`` in display order: ``model_order``, then the others sorted."""
    present = set(m["model"]) - {""}
    order = [str(x) for x in spec.get("model_order") or [] if str(x) in present]
    return order + sorted(present - set(order))


def main_prompt(m: pd.DataFrame, spec: Mapping[str, Any]) -> str:
    """``spec["main_prompt"]``, else the first prompt setting of ``m``."""
    if spec.get("main_prompt"):
        return str(spec["main_prompt"])
    prompts = sorted(set(m["prompt"]))
    return prompts[0] if prompts else ""


def main_extractor(m: pd.DataFrame, spec: Mapping[str, Any]) -> str:
    """The first of ``spec["extractors"]``, else the first extractor named in ``m``."""
    names = list(spec.get("extractors") or [])
    if names:
        return str(names[0])
    present = sorted(set(m["extractor"]) - {""})
    return present[0] if present else ""


def n_key(value: Any) -> tuple:
    return sort_key([str(value)])


def semantics_key(value: str) -> tuple:
    order = {s: i for i, s in enumerate(SEMANTICS_ORDER)}
    return (order.get(value, len(order) + (value == POOLED)), value)


def bin_key(label: str) -> tuple:
    """Bins sort by their first number ("0.0-0.1" < "0.1-0.2"; "1000+" after "500-1000")."""
    found = re.search(r"-?\d+(?:\.\d+)?", str(label))
    return (0, float(found.group()), str(label)) if found else (1, 0.0, str(label))


def pool_rows(rows: pd.DataFrame) -> dict[str, float] | None:
    """The rows' values pooled, weighted by their ``n`` (exact for means over responses:
    accuracy, mean_length, r_attr ...); one row keeps its interval. None without a value."""
    ok = rows[rows["value"].notna() & (rows["n"] > 0)]
    if ok.empty:
        return None
    if len(ok) == 1:
        r = ok.iloc[0]
        return {"value": r["value"], "ci_low": r["ci_low"], "ci_high": r["ci_high"], "n": r["n"]}
    w = ok["n"].to_numpy(float)
    value = float(np.dot(ok["value"].to_numpy(float), w) / w.sum())
    return {"value": value, "ci_low": math.nan, "ci_high": math.nan, "n": float(w.sum())}


def prefer_group(
    rows: pd.DataFrame,
    fields: Iterable[str] = GROUP_COLUMNS,
    semantics: tuple[str, ...] = (POOLED, "conflicting", ""),
) -> pd.DataFrame:
    """The rows of one group among several: rows over every group (all ``fields`` "")
    first, then by ``semantics`` (default: pooled, conflicting, none), then the others;
    ties in sort order."""
    fields = list(fields)
    if rows.empty:
        return rows

    def score(key: tuple) -> tuple:
        d = dict(zip(fields, key, strict=True))
        sem = d.get("semantics", "")
        rank = semantics.index(sem) if sem in semantics else len(semantics)
        return (any(key), rank, sort_key([str(k) for k in key]))

    keys = rows[fields].drop_duplicates().itertuples(index=False, name=None)
    best = min(keys, key=score)
    mask = np.logical_and.reduce([rows[f] == v for f, v in zip(fields, best, strict=True)])
    return rows[mask]


def subset_source(rows: pd.DataFrame) -> str:
    """ "subset" when ``rows`` hold aligned / conflicting subset rows, else "semantics"."""
    return "subset" if rows["subset"].isin(["aligned", "conflicting"]).any() else "semantics"


def subset_values(
    rows: pd.DataFrame, source: str | None = None
) -> tuple[dict[str, dict[str, float] | None], str]:
    """Aligned / conflicting / overall values of one metric's rows (one model and prompt)
    and where they come from (``source``, by default :func:`subset_source` of ``rows``):
    the ``subset`` rows (Waterbirds groups; overall = the rows without a subset), or the
    semantics of the distractor groups (overall = every semantics); groups are pooled by
    :func:`pool_rows`, the groups pooled over semantics left out so no response counts
    twice."""
    source = source or subset_source(rows)
    base = rows[rows["semantics"] != POOLED]
    if source == "subset":
        parts = {
            "aligned": base[base["subset"] == "aligned"],
            "conflicting": base[base["subset"] == "conflicting"],
            "overall": base[base["subset"] == ""],
        }
        return {k: pool_rows(v) for k, v in parts.items()}, "subset"
    base = base[(base["subset"] == "") & (base["semantics"] != "")]
    parts = {
        "aligned": base[base["semantics"] == "aligned"],
        "conflicting": base[base["semantics"] == "conflicting"],
        "overall": base,
    }
    return {k: pool_rows(v) for k, v in parts.items()}, "semantics"


class RowNotes:
    """The notes of the metric rows a view shows, one footnote line per (model, note)
    with the groups it applies to ("every group" when it applies to every group of that
    model the view shows, more than one)."""

    def __init__(self) -> None:
        self._groups: dict[str, list[str]] = {}
        self._where: dict[tuple[str, str], list[str]] = {}

    def add(self, subject: str, rows: pd.DataFrame | Mapping[str, Any] | None) -> None:
        if rows is None:
            return
        records = rows.to_dict("records") if isinstance(rows, pd.DataFrame) else [rows]
        for r in records:
            where = group_label(r) if r.get("kind") or r.get("condition") else ""
            seen = self._groups.setdefault(subject, [])
            if where not in seen:
                seen.append(where)
            note = str(r.get("note") or "")
            if note:
                wheres = self._where.setdefault((subject, note), [])
                if where not in wheres:
                    wheres.append(where)

    def lines(self) -> tuple[str, ...]:
        out = []
        for (subject, note), wheres in self._where.items():
            every = len(wheres) > 1 and set(wheres) == set(self._groups[subject])
            named = [w for w in wheres if w]
            where = "every group" if every else ", ".join(named)
            text = note if note.endswith((".", "!", "?")) else note + "."
            head = ", ".join(p for p in (subject, where) if p)
            out.append(f"{head}: {text}" if head else text)
        return tuple(out)


def _fmt_ci(value: Any, low: Any, high: Any) -> str:
    if is_missing(value):
        return DASH
    if is_missing(low) or is_missing(high):
        return fmt_pct(value)
    return f"{fmt_pct(value)} [{fmt_pct(low)}, {fmt_pct(high)}]"


#: explorer filter name -> the metrics column of an Idis group
_FILTERS = (
    ("kind", "kind"),
    ("semantics", "semantics"),
    ("n", "distractors"),
    ("size", "size"),
    ("resolution", "resolution"),
)


def _accuracy_link(text: str, spec: Mapping[str, Any], model: str, group: Mapping[str, Any]) -> str:
    """An accuracy cell of one group (prompt, condition, kind, semantics, distractors,
    size, resolution) linked to the explorer: benchmark ``<dataset>:<prompt>``, the
    group's fields as ``filter.<param>`` keys (the variant params they come from; none
    for the clean group, no semantics for one pooled over its semantics) and
    ``errors=exclude``: failed requests are in no Idis number. A dash stays plain."""
    filters: dict[str, str] = {}
    if str(group.get("kind") or "") not in ("", "none"):
        for name, column in _FILTERS:
            value = str(group.get(column) or "")
            if value and not (column == "semantics" and value == POOLED):
                filters[f"filter.{name}"] = value
    dataset = str(spec.get("dataset") or "")
    prompt = str(group.get("prompt") or "")
    bench = f"{dataset}:{prompt}" if prompt else dataset
    condition = str(group.get("condition") or "")
    return linked(text, "accuracy", model, bench, condition, errors="exclude", **filters)


def _fmt_len(value: Any) -> str:
    return DASH if is_missing(value) else f"{float(value):.1f}"


def _fmt_r(value: Any) -> str:
    return DASH if is_missing(value) else f"{float(value):.3f}"


def _fmt_signed(value: Any, low: Any = None, high: Any = None) -> str:
    if is_missing(value):
        return DASH
    text = f"{float(value):+.1f}"
    if is_missing(low) or is_missing(high):
        return text
    return f"{text} [{float(low):+.1f}, {float(high):+.1f}]"


def _missing_note(what: str) -> str:
    return f"{DASH} No rows: the metrics hold no {what}."


def _footnotes(explain: str, notes: RowNotes, data: pd.DataFrame, missing: str) -> list[str]:
    """A table's footnotes: what its columns are, the notes of its rows and, when it has
    no row, which metrics rows it lacks (``missing``)."""
    foot = [explain, *notes.lines()]
    if data.empty:
        foot.append(_missing_note(missing))
    return foot


def _table(
    name: str,
    data: pd.DataFrame,
    spec: Mapping[str, Any],
    title: str,
    groups: list[tuple[str, int]],
    footnotes: Iterable[str],
    stub: int,
) -> Table:
    return Table(
        data,
        row_groups=tuple(groups) if groups and data.shape[0] else (),
        footnotes=tuple(footnotes),
        caption=f"Idis: {title} on {spec.get('dataset')}",
        label=f"tab:idis-{spec.get('dataset')}-{name}",
        row_group_column="Model",
        stub_columns=stub,
    )


# ---------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------


def idis_table_names(spec: Mapping[str, Any]) -> list[str]:
    """The tables of one dataset, from its spec only (module docstring)."""
    kinds = set(spec.get("kinds") or [])
    names = ["summary"]
    if len(spec.get("extractors") or []) > 1:
        names.append("extractor_agreement")
    if "size" in kinds:
        names.append("sizes")
    if spec.get("mitigation_prompts"):
        names.append("mitigation")
    if "visual" in kinds:
        names.append("sampling")
    if spec.get("blocking"):
        names.append("attention_blocking")
    return names


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------


def summary_table(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Table:
    names = model_names(spec)
    m = prepare_metrics(metrics)
    m = m[m["metric"].isin(["accuracy", "mean_length", "questions"])]
    m = m[(m["subset"] == "") & (m["extractor"] == "") & (m["bin"] == "") & (m["block"] == "")]
    cells, groups, notes = [], [], []
    for model in models_present(m, spec):
        start = len(cells)
        groups_of = m[m["model"] == model].groupby(_KEY[1:], sort=False)
        keyed = sorted(
            groups_of,
            key=lambda kg: (
                kg[0][0],  # prompt
                kg[0][2] != "none",  # clean first
                *sort_key(list(kg[0][1:5])),  # condition, kind, semantics, distractors
                *sort_key(list(kg[0][5:])),  # size, resolution
            ),
        )
        for values, sel in keyed:
            key = dict(zip(_KEY[1:], values, strict=True))
            get = {r["metric"]: r for r in sel.to_dict("records")}
            acc, length, q = get.get("accuracy"), get.get("mean_length"), get.get("questions")
            for row in (acc, length):
                if row and row.get("note") and row["note"] not in notes:
                    notes.append(row["note"])
            cells.append(
                {
                    "Prompt": key["prompt"],
                    "Condition": key["condition"],
                    "Group": group_label(key),
                    "Questions": fmt_count(q["value"]) if q else DASH,
                    "Responses": fmt_count(acc["n"]) if acc else DASH,
                    "Accuracy (%)": _accuracy_link(
                        _fmt_ci(acc["value"], acc["ci_low"], acc["ci_high"]), spec, model, key
                    )
                    if acc
                    else DASH,
                    "Mean length (tokens)": _fmt_len(length["value"]) if length else DASH,
                }
            )
        groups.append((names.get(model, model), len(cells) - start))
    columns = [
        "Prompt",
        "Condition",
        "Group",
        "Questions",
        "Responses",
        "Accuracy (%)",
        "Mean length (tokens)",
    ]
    data = pd.DataFrame(cells, columns=columns, dtype=object)  # object: keeps Linked cells
    level = float((spec.get("bootstrap") or {}).get("level", 0.95))
    footnotes = (
        f"Accuracy over every response (all draws); [{round(level * 100)}% bootstrap "
        "interval over questions]. Mean length: reasoning tokens of the thinking part.",
        *notes,
    )
    if data.empty:
        footnotes += (_missing_note("accuracy or mean_length rows"),)
    return Table(
        data,
        row_groups=tuple(groups) if len(data) else (),
        footnotes=footnotes,
        caption=f"Idis: accuracy and reasoning length on {spec.get('dataset')}",
        label=f"tab:idis-{spec.get('dataset')}",
        row_group_column="Model",
        stub_columns=3,
    )


def extractor_agreement_table(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Table:
    """Table 4: per model, one row per extractor pair (and prompt, group)."""
    names = model_names(spec)
    m = prepare_metrics(metrics)
    m = m[m["metric"] == "extractor_pearson"]
    notes = RowNotes()
    cells, groups = [], []
    for model in models_present(m, spec):
        mm = m[m["model"] == model]
        records = sorted(
            mm.to_dict("records"),
            key=lambda r: (r["prompt"], r["extractor"], sort_key([r[f] for f in GROUP_COLUMNS])),
        )
        for r in records:
            cells.append(
                {
                    "Prompt": r["prompt"],
                    "Extractors": r["extractor"],
                    "Group": group_label(r) if r["kind"] or r["condition"] else "all traces",
                    "Pearson r": _fmt_r(r["value"]),
                    "Traces": fmt_count(r["n"]),
                }
            )
        notes.add(names.get(model, model), mm)
        groups.append((names.get(model, model), len(mm)))
    data = pd.DataFrame(cells, columns=["Prompt", "Extractors", "Group", "Pearson r", "Traces"])
    foot = _footnotes(
        "Pearson r of the per-trace distractor attribute ratio r_attr given by the two "
        "extractors, over the traces both judged without error (Traces); an extractor "
        "that labelled a seeded sample of the traces (judge.attributes.validation_sample) "
        "is compared on its sample, as its note says.",
        notes,
        data,
        "extractor_pearson rows (attributes from two extractors)",
    )
    return _table(
        "extractor_agreement", data, spec, "attribute extractor agreement", groups, foot, 3
    )


def sizes_table(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Table:
    """Table 9: accuracy (and r_attr) per distractor size, per model."""
    names = model_names(spec)
    m = prepare_metrics(metrics)
    m = m[(m["kind"] == "size") & (m["subset"] == "")]
    extractor = main_extractor(m, spec)
    acc = m[(m["metric"] == "accuracy") & (m["extractor"] == "")]
    ratio = m[(m["metric"] == "r_attr") & (m["extractor"] == extractor)]
    sizes = [*SIZES, *sorted(set(m["size"]) - set(SIZES) - {""})]
    with_attr = not ratio.empty
    columns: list[tuple[str, str]] = [("", "Prompt"), ("", "Condition")]
    for s in sizes:
        columns.append((s.capitalize(), "Acc. (%)"))
        if with_attr:
            columns.append((s.capitalize(), "r_attr (%)"))
    notes = RowNotes()
    cells, groups = [], []
    for model in models_present(pd.concat([acc, ratio]), spec):
        name = names.get(model, model)
        a, r = acc[acc["model"] == model], ratio[ratio["model"] == model]
        keys = sorted(
            set(zip(a["prompt"], a["condition"], strict=True))
            | set(zip(r["prompt"], r["condition"], strict=True))
        )
        for prompt, cond in keys:
            row: list[str] = [prompt, cond]
            for s in sizes:
                sel = a[(a["prompt"] == prompt) & (a["condition"] == cond) & (a["size"] == s)]
                pooled = pool_rows(sel)
                notes.add(name, sel)
                group = {"prompt": prompt, "condition": cond, "kind": "size", "size": s}
                text = fmt_pct(pooled["value"]) if pooled else DASH
                row.append(_accuracy_link(text, spec, model, group))
                if with_attr:
                    sel = r[(r["prompt"] == prompt) & (r["condition"] == cond) & (r["size"] == s)]
                    pooled = pool_rows(sel)
                    notes.add(name, sel)
                    row.append(fmt_pct(pooled["value"]) if pooled else DASH)
            cells.append(row)
        groups.append((name, len(keys)))
    data = pd.DataFrame(cells, columns=pd.MultiIndex.from_tuples(columns), dtype=object)
    foot = ["Accuracy over every response (all draws)."]
    if with_attr:
        foot.append(
            f"r_attr: mean distractor attribute ratio of the judged traces with at least one "
            f"attribute (extractor {extractor})."
        )
    foot += notes.lines()
    if data.empty:
        foot.append(_missing_note("accuracy rows of a size condition"))
    return _table("sizes", data, spec, "accuracy by distractor size", groups, foot, 2)


def mitigation_prompts(m: pd.DataFrame, spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(prompt id, setting label) of the mitigation views: the main prompt, then each
    mitigation prompt."""
    out = [(main_prompt(m, spec), "prompt")]
    out += [(str(p), "+ mitigation") for p in spec.get("mitigation_prompts") or []]
    return out


def mitigation_table(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Table:
    """Table 10: per model, the main prompt and each mitigation prompt."""
    names = model_names(spec)
    m = prepare_metrics(metrics)
    m = m[m["metric"].isin(["accuracy", "mean_length"]) & (m["extractor"] == "")]
    prompts = mitigation_prompts(m, spec)
    m = m[m["prompt"].isin([p for p, _ in prompts])]
    columns: list[tuple[str, str]] = [("", "Setting"), ("", "Prompt")]
    for s in MITIGATION_SUBSETS:
        columns += [(s.capitalize(), "Acc."), (s.capitalize(), "Len.")]
    notes = RowNotes()
    cells, groups, sources = [], [], set()
    for model in models_present(m, spec):
        name = names.get(model, model)
        count = 0
        for prompt, setting in prompts:
            mp = m[(m["model"] == model) & (m["prompt"] == prompt)]
            if mp.empty:
                continue
            src = subset_source(mp)
            acc, _ = subset_values(mp[mp["metric"] == "accuracy"], src)
            length, _ = subset_values(mp[mp["metric"] == "mean_length"], src)
            sources.add(src)
            notes.add(name, mp)
            row = [setting, prompt]
            for s in MITIGATION_SUBSETS:
                a, ln = acc[s], length[s]
                row += [fmt_pct(a["value"]) if a else DASH, _fmt_len(ln["value"]) if ln else DASH]
            cells.append(row)
            count += 1
        groups.append((name, count))
    data = pd.DataFrame(cells, columns=pd.MultiIndex.from_tuples(columns))
    foot = ["Acc.: accuracy (%) over every response; Len.: mean reasoning length (tokens)."]
    if "subset" in sources:
        foot.append(
            "Aligned / conflicting: the questions of that group (e.g. Waterbirds: bird type "
            "matches / does not match the background); overall: every question."
        )
    if "semantics" in sources:
        foot.append(
            "Aligned / conflicting: the distractor groups of that semantics (every number "
            "of distractors); overall: every distractor group (clean images left out)."
        )
    draws = {
        p: int((spec.get("prompt_draws") or {}).get(p, spec.get("draws", 1))) for p, _ in prompts
    }
    if len(set(draws.values())) > 1:
        foot.append(
            "Responses per question: "
            + "; ".join(f"{p} {n}" for p, n in draws.items())
            + " (each prompt's own decoding, datasets.<d>.prompt_decoding)."
        )
    foot += notes.lines()
    if data.empty:
        foot.append(_missing_note("accuracy rows of the main or the mitigation prompt"))
    return _table("mitigation", data, spec, "mitigation prompt", groups, foot, 2)


_SAMPLING = ("sampling_within_sd", "sampling_delta", "sampling_p_longer")


def sampling_table(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Table:
    """Appendix D.3: per model, prompt, condition and semantics."""
    names = model_names(spec)
    m = prepare_metrics(metrics)
    m = m[(m["subset"] == "") & (m["extractor"] == "")]
    samp = m[m["metric"].isin(_SAMPLING)]
    lengths = m[m["metric"] == "mean_length"]
    key = ["prompt", "condition", "kind", "semantics"]
    ns: set[str] = set()
    for k in samp[key].drop_duplicates().itertuples(index=False, name=None):
        sel = lengths[np.logical_and.reduce([lengths[c] == v for c, v in zip(key, k, strict=True)])]
        ns |= {d for d in sel["distractors"] if d not in ("", "0")}
    ns_sorted = sorted(ns, key=n_key)
    columns: list[tuple[str, str]] = [("", "Prompt"), ("", "Condition"), ("", "Semantics")]
    columns += [("Mean length (tokens)", f"n={n}") for n in ns_sorted]
    columns += [
        ("", "Within-image SD"),
        ("", "\u0394 (max n \u2212 1)"),
        ("", "P(1 longer)"),
    ]
    notes = RowNotes()
    cells, groups = [], []
    for model in models_present(samp, spec):
        name = names.get(model, model)
        sm = samp[samp["model"] == model]
        keys = sorted(
            sm[key].drop_duplicates().itertuples(index=False, name=None),
            key=lambda k: (k[0], k[1], k[2], semantics_key(k[3])),
        )
        for k in keys:
            here = dict(zip(key, k, strict=True))
            sel = sm[np.logical_and.reduce([sm[c] == v for c, v in here.items()])]
            get = {r["metric"]: r for r in sel.to_dict("records")}
            ml = lengths[
                (lengths["model"] == model)
                & np.logical_and.reduce([lengths[c] == v for c, v in here.items()])
            ]
            row = [here["prompt"], here["condition"], here["semantics"] or here["kind"]]
            for n in ns_sorted:
                pooled = pool_rows(ml[ml["distractors"] == n])
                row.append(_fmt_len(pooled["value"]) if pooled else DASH)
            sd, delta, p = (get.get(x) for x in _SAMPLING)
            row.append(_fmt_len(sd["value"]) if sd else DASH)
            row.append(
                _fmt_signed(delta["value"], delta["ci_low"], delta["ci_high"]) if delta else DASH
            )
            row.append(DASH if not p or is_missing(p["value"]) else f"{float(p['value']):.2f}")
            notes.add(name, sel)
            notes.add(name, ml)
            cells.append(row)
        groups.append((name, len(keys)))
    data = pd.DataFrame(cells, columns=pd.MultiIndex.from_tuples(columns))
    foot = _footnotes(
        "Mean length: mean reasoning tokens over every draw at n distractors. Within-image "
        "SD: the standard deviation of the length over the draws of one image, averaged "
        "over images. \u0394: mean length at the largest n minus at n=1 [95% interval]. "
        "P(1 longer): probability that a one-distractor draw is longer than a draw at the "
        "largest n.",
        notes,
        data,
        "sampling_within_sd, sampling_delta or sampling_p_longer rows",
    )
    return _table("sampling", data, spec, "sampling variability of the length", groups, foot, 3)


def attention_blocking_table(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Table:
    """Accuracy with no / distractor / target attention blocked, per model and condition."""
    names = model_names(spec)
    m = prepare_metrics(metrics)
    m = m[m["metric"] == "blocked_accuracy"]
    columns = ["Prompt", "Condition", "Responses"] + [f"{b.capitalize()} (%)" for b in BLOCKS]
    notes = RowNotes()
    cells, groups = [], []
    for model in models_present(m, spec):
        name = names.get(model, model)
        mm = m[m["model"] == model]
        keys = sorted(set(zip(mm["prompt"], mm["condition"], strict=True)))
        for prompt, cond in keys:
            sel = mm[(mm["prompt"] == prompt) & (mm["condition"] == cond)]
            got = {b: pool_rows(sel[sel["block"] == b]) for b in BLOCKS}
            none = got["none"]
            row = [prompt, cond, fmt_count(none["n"]) if none else DASH]
            row += [
                _fmt_ci(g["value"], g["ci_low"], g["ci_high"]) if g else DASH for g in got.values()
            ]
            notes.add(name, sel)
            cells.append(row)
        groups.append((name, len(keys)))
    data = pd.DataFrame(cells, columns=columns)
    foot = _footnotes(
        "Accuracy (%) when nothing (None), the tokens of the distractor phrases (Distractor) "
        "or of the target phrases (Target) are blocked from attention; Responses: the "
        "responses without blocking.",
        notes,
        data,
        "blocked_accuracy rows",
    )
    return _table("attention_blocking", data, spec, "attention blocking", groups, foot, 2)


TABLE_BUILDERS: dict[str, Callable[[pd.DataFrame, Mapping[str, Any]], Table]] = {
    "summary": summary_table,
    "extractor_agreement": extractor_agreement_table,
    "sizes": sizes_table,
    "mitigation": mitigation_table,
    "sampling": sampling_table,
    "attention_blocking": attention_blocking_table,
}


def idis_table(name: str, metrics: pd.DataFrame, spec: Mapping[str, Any]) -> Table:
    """The one table ``name`` (any of :data:`TABLE_BUILDERS`); ValueError for another."""
    return build_view("Idis table", TABLE_BUILDERS, name, metrics, spec)


def idis_tables(metrics: pd.DataFrame, spec: Mapping[str, Any]) -> dict[str, Table]:
    """Every table of :func:`idis_table_names`."""
    return {name: idis_table(name, metrics, spec) for name in idis_table_names(spec)}
