"""Jobs of the explorer (``results/explorer/``, :mod:`vlmrobust.report.explorer`): one
variants folder per (dataset, condition), one cell folder per (model, dataset,
condition, prompt setting), and the index over all of them."""

from __future__ import annotations

import time

from ..core.commands import Command, arg, required
from . import json_arg, json_object, log
from .args import MANIFEST, OUTPUTS, SAMPLES, spec


def variants(manifest: str, samples: str, out_dir: str) -> None:
    """A condition's manifest (and its dataset's samples) -> the explorer's variants
    folder: thumbnails, boxes and the variants' data files."""
    from ..report.explorer.variants import build_variants

    t0 = time.perf_counter()
    summary = build_variants(manifest, samples, out_dir)
    log.info(
        "%s: %d variants, %d thumbnails, %d part(s), %d bytes (%.1f s)",
        out_dir,
        summary["n"],
        summary["thumbs"],
        summary["parts"],
        summary["bytes"],
        time.perf_counter() - t0,
    )


def cell(
    scored: str, clean_scored: str | None, outputs: str, judge: list[str] | None, out_dir: str
) -> None:
    """A scored file (against the clean condition's), its outputs and judges -> the
    explorer's cell folder: the rows with their flips and the full texts."""
    from ..report.explorer.cells import build_cell, judge_files

    t0 = time.perf_counter()
    summary = build_cell(scored, clean_scored, outputs, judge_files(judge or []), out_dir)
    counts = summary["counts"]
    log.info(
        "%s: %d rows, %d lost, %d gained, %d unpaired, %d text part(s) (%.1f s)",
        out_dir,
        summary["n"],
        counts["lost"],
        counts["gained"],
        counts["unpaired"],
        summary["chunks"],
        time.perf_counter() - t0,
    )


def cells(spec: str, out_dir: str) -> None:
    """A model's cells on one dataset, one after the other (the rule's job: a process
    per cell would spend most of its time starting). ``spec``: a JSON list of cells,
    each ``{"scored", "clean_scored" (optional), "outputs", "judges": {kind: path},
    "out_dir"}``, every ``out_dir`` inside ``out_dir``."""
    from pathlib import Path

    found = json_arg(spec, "--spec")
    if not isinstance(found, list):
        raise ValueError("--spec: a JSON list of cells expected")
    root = Path(out_dir).resolve()
    for n, item in enumerate(found):
        where = f"--spec cell {n}"
        if not isinstance(item, dict) or not {"scored", "outputs", "out_dir"} <= set(item):
            raise ValueError(f"{where}: an object with scored, outputs and out_dir expected")
        if root not in Path(item["out_dir"]).resolve().parents:
            raise ValueError(f"{where}: out_dir {item['out_dir']} is not inside {out_dir}")
        judges = [f"{kind}={file}" for kind, file in sorted((item.get("judges") or {}).items())]
        cell(item["scored"], item.get("clean_scored"), item["outputs"], judges, item["out_dir"])
    if not found:
        Path(out_dir).mkdir(parents=True, exist_ok=True)


def index(spec: str, cells: list[str] | None, variants: list[str] | None, out_dir: str) -> None:
    """The explorer's index and app over every cell and variants folder."""
    from ..report.explorer.site import build_site

    t0 = time.perf_counter()
    build_site(json_object(spec), list(cells or []), list(variants or []), out_dir)
    log.info(
        "%s: index of %d cells and %d variants folders (%.1f s)",
        out_dir,
        len(cells or []),
        len(variants or []),
        time.perf_counter() - t0,
    )


#: the explorer's commands
COMMANDS: dict[str, Command] = {
    "explorer-variants": Command(
        variants,
        "a condition's manifest -> the explorer's variants folder (thumbnails, boxes, data)",
        (
            MANIFEST,
            SAMPLES,
            required("--out-dir", help="results/explorer/variants/<dataset>/<condition>"),
        ),
    ),
    "explorer-cell": Command(
        cell,
        "a scored file (vs the clean condition's), its outputs and judges -> the "
        "explorer's cell folder (rows with flips, full texts)",
        (
            required("--scored", help="scored CSV of the cell"),
            arg("--clean-scored", help="the clean condition's scored CSV (same model, prompt)"),
            OUTPUTS,
            arg(
                "--judge",
                action="append",
                default=[],
                metavar="KIND=PATH",
                help="a judge file (reference, mathverse, hallucination, "
                "attributes:<extractor>); repeatable",
            ),
            required(
                "--out-dir", help="results/explorer/cells/<model>/<dataset>/<condition>/<prompt>"
            ),
        ),
    ),
    "explorer-cells": Command(
        cells,
        "a model's cells on one dataset, one after the other (the workflow's job: "
        "--spec lists each cell's files and folder as explorer-cell takes them)",
        (
            spec("the cells: a JSON list of {scored, clean_scored, outputs, judges, out_dir}"),
            required("--out-dir", help="results/explorer/cells/<model>/<dataset>"),
        ),
    ),
    "explorer-index": Command(
        index,
        "every cell and variants folder -> the explorer's index and app (index.html)",
        (
            spec("the explorer's specification (models, datasets, studies)"),
            arg("--cells", nargs="*", default=[], metavar="DIR", help="cell folders"),
            arg("--variants", nargs="*", default=[], metavar="DIR", help="variants folders"),
            required("--out-dir", help="results/explorer"),
        ),
    ),
}
