"""Jobs of the studies: a study's metrics, and its tables, figures and pages.

These are also the reviewers' commands: besides the ``--spec`` and ``--inputs`` JSON the
rules pass, ``--config FILE`` builds the run plan and asks the study for the same spec
and inputs (:meth:`vlmrobust.studies.base.Study.spec`, ``metrics_inputs``,
``view_inputs``), so released intermediate files give byte-identical tables and figures
without Snakemake.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ..core import paths
from ..core.commands import Command
from ..core.config import ConfigError
from ..core.paths import path
from . import json_arg, log
from .args import study_args


def _spec_and_inputs(
    kind: str, study: Any, scope: str, config: str | None, spec: str | None, inputs: str | None
) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """The study's specification and input files: from the run plan of ``config``, or
    from the rule's JSON."""
    if config is not None:
        from ..plan import RunPlan
        from ..studies.base import spec_json

        plan = RunPlan.load(config)
        scopes = study.scopes(plan)
        if scope not in scopes:
            known = ", ".join(repr(s) for s in scopes) or "none in this run"
            raise ConfigError(
                f"{config}: study {study.name} has no scope {scope!r} (scopes: {known})"
            )
        # exactly the spec the rule passes (sorted JSON), so the files are the same
        resolved = json.loads(spec_json(study.run_spec(plan, scope)))
        files = study.metrics_inputs(plan, scope) if kind == "metrics" else None
        return resolved, files if files is not None else study.view_inputs(plan, scope)
    if spec is None:
        raise ConfigError("give either --config FILE or --spec JSON (and --inputs JSON)")
    return json_arg(spec, "--spec"), (json_arg(inputs, "--inputs") if inputs else {})


def metrics(
    study: str,
    scope: str,
    config: str | None,
    spec: str | None,
    inputs: str | None,
    out: str | None,
    warnings: str | None,
) -> None:
    """A study's tidy metrics (and its warnings) from the stage files."""
    from ..studies import get_study

    found_study = get_study(study)
    resolved, files = _spec_and_inputs("metrics", found_study, scope, config, spec, inputs)
    t0 = time.perf_counter()
    out_path = Path(out or found_study.metrics_path(scope))
    warnings_path = Path(warnings or found_study.warnings_path(scope))
    rows, found = found_study.write_metrics(files, resolved, out_path, warnings_path)
    for w in found:
        log.warning("%s", w)
    log.info(
        "%s: %d metric rows, %d warnings (%.1f s)",
        out_path,
        len(rows),
        len(found),
        time.perf_counter() - t0,
    )


def _view(
    kind: str,
    name: str | None,
    study: str,
    scope: str,
    config: str | None,
    spec: str | None,
    inputs: str | None,
    metrics: str | None,
    out_dir: str | None,
) -> None:
    """Every view of a study's scope (``views``), or one table, figure or page."""
    from ..studies import get_study

    found_study = get_study(study)
    resolved, files = _spec_and_inputs(kind, found_study, scope, config, spec, inputs)
    t0 = time.perf_counter()
    metrics_path = Path(metrics or found_study.metrics_path(scope))
    folder = found_study.folder(scope)
    if kind == "views":
        target = Path(out_dir or path(paths.VIEWS, folder=folder))
        written = found_study.write_views(metrics_path, files, resolved, target, folder)
        log.info("%s: %d files (%.1f s)", target, len(written), time.perf_counter() - t0)
        return
    default = path(paths.TABLES if kind == "table" else paths.FIGURES, folder=folder)
    write = getattr(found_study, f"write_{kind}")
    links = {"folder": folder} if kind == "table" else {}  # a table's explorer links
    written = write(name, metrics_path, files, resolved, Path(out_dir or default), **links)
    log.info("%s (%.1f s)", ", ".join(str(p) for p in written), time.perf_counter() - t0)


def views(**options: Any) -> None:
    """Every table, figure and page of a study's scope, from one reading of its metrics."""
    _view("views", None, **options)


def table(name: str, **options: Any) -> None:
    """One table of a study (csv, md, tex, html)."""
    _view("table", name, **options)


def figure(name: str, **options: Any) -> None:
    """One figure of a study (png, pdf)."""
    _view("figure", name, **options)


def page(name: str, **options: Any) -> None:
    """One HTML page of a study."""
    _view("page", name, **options)


#: the study commands
COMMANDS: dict[str, Command] = {
    command: Command(function, what, study_args(command))
    for command, function, what in (
        ("metrics", metrics, "stage files -> a study's tidy metrics (and warnings)"),
        ("table", table, "metrics -> one table of a study (csv, md, tex)"),
        ("figure", figure, "metrics -> one figure of a study (png, pdf)"),
        ("page", page, "metrics -> one HTML page of a study"),
        (
            "views",
            views,
            "metrics -> every table, figure and page of a study's scope, in one "
            "process (OUT_DIR/tables/, OUT_DIR/figures/)",
        ),
    )
}
