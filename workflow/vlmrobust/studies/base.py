"""What a study is: one object that declares its inputs, its specification, the files
it produces and the functions that make them.

A study turns stage files (scored rows, judged labels, compared chains, manifests) into
a tidy metrics table, and that table (plus, for some views, the stage files) into
tables, figures and HTML pages. A study has *scopes*: a pooled study (the corruption
study pools every dataset) has one scope, ``""``; a per-dataset study has one scope per
dataset it applies to. Each scope has a folder (``corruption``,
``distraction/<dataset>``) under which every file of the study lives::

    results/metrics/<folder>/metrics.csv, warnings.txt
    results/tables/<folder>/<table>.csv, .md, .tex, .html
    figures/<folder>/<figure>.png, .pdf
    figures/<folder>/<page>.html

The workflow has one generic rule per kind of file (``metrics``, ``table``,
``figure``, ``page``) with the folder as a wildcard; the CLI has one command per kind
(``vlmrobust metrics|table|figure|page --study S --scope X``). Adding a study is one
module under :mod:`vlmrobust.studies` defining a :class:`Study` subclass and ``STUDY``.
"""

from __future__ import annotations

import dataclasses
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from ..core import paths
from ..core.io import atomic_write_text
from ..core.paths import path
from ..metrics.core import read_metrics, write_metrics
from ..metrics.scoring import NOTE_UNRECORDED, recorded_scoring, without_scoring_rows
from ..plan import RunPlan
from ..report.common import save_figure
from ..report.tables.render import Table, write_table

#: named lists of input files (e.g. {"scored": [...], "manifests": [...]})
Inputs = Mapping[str, list[str]]

#: a table's files; its .md and .html link accuracy / RR cells to results/explorer/
TABLE_EXTS = ("csv", "md", "tex", "html")
FIGURE_EXTS = ("png", "pdf")


def skipped_rows_warnings(reports: list[str]) -> list[str]:
    """One warning per dataset whose samples stage skipped bad rows (``on_bad_row:
    skip``): how many, by reason; they are in no number of the study."""
    out = []
    for report_path in reports:
        report = json.loads(Path(report_path).read_text(encoding="utf-8"))
        if report.get("skipped"):
            reasons = "; ".join(
                f"{reason} ({n})" for reason, n in (report.get("skipped_by_reason") or {}).items()
            )
            out.append(
                f"dataset {report.get('dataset')}: {report['skipped']} row(s) of the source "
                f"skipped as bad rows (on_bad_row: skip), in no number here: {reasons}"
            )
    return out


class Study(ABC):
    """One study of the workflow; subclasses fill the class variables and methods."""

    #: short name: the first part of every folder, the CLI's ``--study``
    name: ClassVar[str]
    #: the report's category for its files
    title: ClassVar[str]
    #: report captions (reStructuredText) of its tables, figures and pages
    table_caption: ClassVar[str] = ""
    figure_caption: ClassVar[str] = ""
    page_caption: ClassVar[str] = ""
    #: the study's own metrics columns after the shared ones (metrics.core.METRIC_COLUMNS)
    extra_columns: ClassVar[tuple[str, ...]] = ()

    # ------------------------------------------------------------------ what it reads

    @abstractmethod
    def scopes(self, plan: RunPlan) -> list[str]:
        """The study's scopes in this run ([] when it does not apply)."""

    @abstractmethod
    def spec(self, plan: RunPlan, scope: str) -> dict[str, Any]:
        """What the metrics and views need from the configuration and the registry."""

    def run_spec(self, plan: RunPlan, scope: str) -> dict[str, Any]:
        """The spec the rules pass: :meth:`spec`. How the verdicts were made is not in
        it: the metrics read that from the scored rows (:mod:`vlmrobust.metrics.scoring`)
        and every table states it from there (:func:`with_scoring_note`)."""
        return self.spec(plan, scope)

    @abstractmethod
    def inputs(self, plan: RunPlan, scope: str) -> dict[str, list[str]]:
        """The metrics' input files by name."""

    def view_inputs(self, plan: RunPlan, scope: str) -> dict[str, list[str]]:
        """Stage files the views read besides the metrics (e.g. example rows)."""
        return {}

    # ------------------------------------------------------------------ what it makes

    @abstractmethod
    def compute(self, inputs: Inputs, spec: Mapping[str, Any]) -> tuple[pd.DataFrame, list[str]]:
        """The tidy metrics table and its warnings."""

    @abstractmethod
    def table_names(self, spec: Mapping[str, Any]) -> list[str]:
        """File stems of its tables (they depend on the spec only)."""

    def figure_names(self, spec: Mapping[str, Any]) -> list[str]:
        return []

    def page_names(self, spec: Mapping[str, Any]) -> list[str]:
        return []

    @abstractmethod
    def tables(
        self, metrics: pd.DataFrame, inputs: Inputs, spec: Mapping[str, Any]
    ) -> dict[str, Table]:
        """Every table by file stem."""

    def figures(self, metrics: pd.DataFrame, inputs: Inputs, spec: Mapping[str, Any]) -> dict:
        """Every figure (matplotlib Figure) by file stem."""
        return {}

    def pages(self, metrics: pd.DataFrame, inputs: Inputs, spec: Mapping[str, Any]) -> dict:
        """Every HTML page (text) by file stem."""
        return {}

    def view_caption(self, kind: str, name: str) -> str:
        """The report caption of one table, figure or page (default: the study's one
        caption of that kind)."""
        return getattr(self, f"{kind}_caption")

    # ------------------------------------------------------------------ files (generic)

    def folder(self, scope: str) -> str:
        return f"{self.name}/{scope}" if scope else self.name

    def metrics_path(self, scope: str) -> str:
        return path(paths.METRICS, folder=self.folder(scope))

    def warnings_path(self, scope: str) -> str:
        return path(paths.WARNINGS, folder=self.folder(scope))

    def table_files(self, plan: RunPlan, scope: str) -> list[str]:
        names = self.table_names(self.spec(plan, scope))
        return self._view_files(paths.TABLE, scope, names, TABLE_EXTS)

    def figure_files(self, plan: RunPlan, scope: str) -> list[str]:
        names = self.figure_names(self.spec(plan, scope))
        return self._view_files(paths.FIGURE, scope, names, FIGURE_EXTS)

    def page_files(self, plan: RunPlan, scope: str) -> list[str]:
        names = self.page_names(self.spec(plan, scope))
        return self._view_files(paths.FIGURE, scope, names, ("html",))

    def _view_files(
        self, template: str, scope: str, names: list[str], exts: tuple[str, ...]
    ) -> list[str]:
        """The files of the views ``names`` of a scope: ``template`` (a table's or a
        figure's path without its extension) filled in, once per extension."""
        folder = self.folder(scope)
        return [f"{path(template, folder=folder, name=n)}.{ext}" for n in names for ext in exts]

    def targets(self, plan: RunPlan) -> list[str]:
        """Every final file of the study in this run."""
        return [
            path
            for scope in self.scopes(plan)
            for path in [self.metrics_path(scope), self.warnings_path(scope)]
            + self.table_files(plan, scope)
            + self.figure_files(plan, scope)
            + self.page_files(plan, scope)
        ]

    # ------------------------------------------------------------------ running (generic)

    def metrics_inputs(self, plan: RunPlan, scope: str) -> dict[str, list[str]]:
        """Everything the metrics job reads: :meth:`inputs`, and the samples reports of
        the datasets those files belong to (a dataset is a folder of every stage file),
        so that rows skipped as bad rows reach the warnings (:func:`skipped_rows_warnings`)."""
        inputs = self.inputs(plan, scope)
        folders = {part for paths in inputs.values() for p in paths for part in Path(p).parts}
        names = sorted(folders & set(plan.datasets))
        return {**inputs, "samples_reports": [path(paths.SAMPLES_REPORT, dataset=d) for d in names]}

    def write_metrics(self, inputs: Inputs, spec: Mapping[str, Any], out: Path, warnings: Path):
        metrics, found = self.compute(inputs, spec)
        found = [*skipped_rows_warnings(inputs.get("samples_reports") or []), *found]
        write_metrics(metrics, out, self.extra_columns)
        atomic_write_text(warnings, "".join(f"{w}\n" for w in found))
        return metrics, found

    def view(self, kind: str, name: str, metrics: pd.DataFrame, inputs: Inputs, spec) -> Any:
        """One table, figure or page by name; a study whose views are costly to build all
        at once (one job writes one file) overrides this to build only the one asked for."""
        make = {"table": self.tables, "figure": self.figures, "page": self.pages}[kind]
        return make(metrics, inputs, spec)[name]

    def _view(self, kind: str, name: str, metrics: pd.DataFrame, inputs: Inputs, spec):
        names = {
            "table": self.table_names,
            "figure": self.figure_names,
            "page": self.page_names,
        }[kind](spec)
        if name not in names:
            known = ", ".join(names) or "none"
            raise ValueError(f"study {self.name}: no {kind} {name!r} (its {kind}s: {known})")
        return self.view(kind, name, without_scoring_rows(metrics), inputs, spec)

    def write_table(
        self,
        name: str,
        metrics: Path,
        inputs: Inputs,
        spec,
        out_dir: Path,
        folder: str | None = None,
    ):
        """One table's files; with ``folder`` (the scope's :meth:`folder`) also its
        .html, and its .md and .html link cells to the explorer (links relative to
        ``results/tables/<folder>/``)."""
        frame = read_metrics(metrics)
        table = self._view("table", name, frame, inputs, spec)
        return write_table(with_scoring_note(table, frame), Path(out_dir) / name, folder)

    def write_figure(self, name: str, metrics: Path, inputs: Inputs, spec, out_dir: Path):
        import matplotlib.style

        with matplotlib.style.context("default"):
            fig = self._view("figure", name, read_metrics(metrics), inputs, spec)
            return save_figure(fig, Path(out_dir) / name)

    def write_page(self, name: str, metrics: Path, inputs: Inputs, spec, out_dir: Path):
        path = Path(out_dir) / f"{name}.html"
        atomic_write_text(path, self._view("page", name, read_metrics(metrics), inputs, spec))
        return [path]

    def write_views(
        self, metrics: Path, inputs: Inputs, spec, out_dir: Path, folder: str | None = None
    ) -> list[Path]:
        """Every table (``<out_dir>/tables/``), figure and page (``<out_dir>/figures/``)
        of one scope, built in one process from one reading of the metrics: the same
        files as :meth:`write_table`, :meth:`write_figure` and :meth:`write_page`.
        With ``folder`` (the scope's :meth:`folder`) the tables get their .html and
        explorer links (relative to ``results/tables/<folder>/``, where the workflow
        copies them)."""
        import matplotlib.pyplot as plt
        import matplotlib.style

        recorded = read_metrics(metrics)
        frame = without_scoring_rows(recorded)
        out_dir = Path(out_dir)
        paths: list[Path] = []
        tables = self.tables(frame, inputs, spec) if self.table_names(spec) else {}
        for name in self.table_names(spec):
            table = with_scoring_note(tables[name], recorded)
            paths += write_table(table, out_dir / "tables" / name, folder)
        if self.figure_names(spec):
            with matplotlib.style.context("default"):
                figures = self.figures(frame, inputs, spec)
                for name in self.figure_names(spec):
                    paths += save_figure(figures[name], out_dir / "figures" / name)
                    plt.close(figures[name])
        pages = self.pages(frame, inputs, spec) if self.page_names(spec) else {}
        for name in self.page_names(spec):
            path = out_dir / "figures" / f"{name}.html"
            atomic_write_text(path, pages[name])
            paths.append(path)
        return paths


#: the registry fields a study reads (display name, family, base/reasoning pair): editing
#: anything else of a model (its checkpoint, resources, studies) reruns no study view
MODEL_FIELDS = ("name", "family", "role", "base")


def model_fields(plan: RunPlan, models: list[str]) -> dict[str, dict[str, Any]]:
    """The study-relevant registry fields of ``models``, in order."""
    return {m: {k: plan.models[m].get(k) for k in MODEL_FIELDS} for m in models}


def scoring_note(scoring: Mapping[str, Any] | None) -> str:
    """The footnote that says how a table's verdicts were made, from what its scored
    rows record (:func:`vlmrobust.metrics.scoring.recorded_scoring`; "" for None)."""
    if not scoring:
        return ""
    unrecorded = list(scoring.get("unrecorded") or [])
    if scoring.get("mode") == "harness":
        version = scoring.get("version")
        if version is None:
            from ..core.harness import version_note

            version = version_note()
        line = f"Scoring: the papers' harness, {version} task code (scoring.mode harness)"
        if scoring.get("harness"):
            line += " on " + ", ".join(scoring["harness"])
        if scoring.get("extract"):
            line += "; the project's answer extraction on " + ", ".join(scoring["extract"])
            line += " (no harness scorer)"
        if scoring.get("offline"):
            line += "; without the harness's GPT-4 judge on " + ", ".join(scoring["offline"])
            line += " (offline rules, counted in the notes)"
    elif scoring.get("mode") == "extract":
        line = "Scoring: the project's answer extraction (scoring.mode extract)"
        if unrecorded:
            line += " on " + ", ".join(scoring.get("extract") or [])
    else:
        line = f"Scoring: the mode is {NOTE_UNRECORDED} (no mode column: files of an older "
        line += "version, or released verdicts)"
    if unrecorded and scoring.get("mode"):
        line += f"; the mode is {NOTE_UNRECORDED} of " + ", ".join(unrecorded)
    if scoring.get("compare"):
        line += "; the other mode's differing verdicts are counted in the notes"
    return line + "."


def with_scoring_note(table: Table, metrics: pd.DataFrame) -> Table:
    """``table`` with :func:`scoring_note` of its study's ``metrics`` (what their scored
    rows record) as its last footnote; unchanged when the metrics have no scoring rows
    (a study whose numbers rest on no scored verdict)."""
    note = scoring_note(recorded_scoring(metrics))
    if not note:
        return table
    return dataclasses.replace(table, footnotes=(*table.footnotes, note))


def spec_json(spec: Mapping[str, Any]) -> str:
    """A spec as the rules pass it (sorted keys: a stable params rerun trigger)."""
    return json.dumps(spec, sort_keys=True)
