"""The explorer's index: the app shell, its assets, ``index.js`` and the agreement files.

Input: the run's explorer spec (models, datasets, conditions, studies: what
:func:`vlmrobust.studies.explorer.index_spec` gives) and the folders of every cell and
every variants set, each with its ``summary.json`` (:mod:`.cells`, :mod:`.variants`).
Output, under ``out_dir`` (``results/explorer``)::

    index.html, assets/explorer.js, assets/explorer.css   (copied from the package)
    index.js                                              EXPLORER.put("index", ...)
    agree/<dataset>/<condition>/<prompt>.js               which models flipped each unit

The index holds one line per cell (its flip counts, accuracy sums and studies), never a
cell's rows: those load on demand. The agreement of a (dataset, condition, prompt) is
built from the ``flips`` of its cells' summaries. A file of an earlier run that no cell
makes any more (an agreement file of a removed condition) is removed, so the site shows
only this run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from ...core.io import atomic_write_bytes
from .data import write_js

__all__ = ["ASSETS", "INDEX_VERSION", "assets_fingerprint", "build_site", "cell_studies"]

#: the app's files, copied from the package's ``assets/`` folder (index.html at the top)
ASSETS = ("index.html", "explorer.js", "explorer.css")
INDEX_VERSION = 1
#: the counts every cell summary has (the flip classes of :mod:`.cells`)
FLIP_CLASSES = ("lost", "gained", "right", "wrong", "unpaired", "failed")


def _read_summary(folder: str | Path) -> dict[str, Any]:
    path = Path(folder) / "summary.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{path}: no summary.json in the explorer folder (build it with "
            "vlmrobust explorer-cell / explorer-variants first)"
        ) from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None


def cell_studies(cell: Mapping[str, Any], studies: Sequence[Mapping[str, Any]]) -> list[str]:
    """The folders of the studies a cell belongs to: the study has its model, its
    dataset, and its condition (or the cell is the study's clean condition)."""
    out = []
    for study in studies:
        conditions = set(study.get("conditions") or []) | {study.get("clean_condition")}
        if (
            cell["model"] in (study.get("models") or [])
            and cell["dataset"] in (study.get("datasets") or [])
            and cell["condition"] in conditions
        ):
            out.append(str(study["folder"]))
    return out


def _cell_line(summary: Mapping[str, Any], studies: Sequence[Mapping[str, Any]]) -> dict:
    missing = [
        k for k in ("model", "dataset", "condition", "prompt", "n", "chunks") if k not in summary
    ]
    if missing:
        raise ValueError(f"cell summary lacks {missing}: {dict(summary)}")
    cell = {k: summary[k] for k in ("model", "dataset", "condition", "prompt")}
    counts = summary.get("counts") or {}
    return {
        "id": "/".join(str(cell[k]) for k in ("model", "dataset", "condition", "prompt")),
        **cell,
        "n": int(summary["n"]),
        "chunks": int(summary["chunks"]),
        "row_parts": int(summary.get("row_parts", 1)),
        "counts": {k: int(counts.get(k, 0)) for k in FLIP_CLASSES},
        "correct": summary.get("correct", 0),
        "score_sum": summary.get("score_sum", 0.0),
        "errors": int(summary.get("errors", 0)),
        "bytes": int(summary.get("bytes", 0)),
        "studies": cell_studies(cell, studies),
    }


def _agreement(summaries: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """(dataset/condition/prompt) -> {"models": [...], "flips": {key: {"lost": [...],
    "gained": [...]}}} over the perturbed cells (those with a clean condition of their
    own), models in the order given."""
    out: dict[str, dict[str, Any]] = {}
    for s in summaries:
        if not s.get("clean_condition") or s["condition"] == s.get("clean_condition"):
            continue
        triple = f"{s['dataset']}/{s['condition']}/{s['prompt']}"
        entry = out.setdefault(triple, {"models": [], "flips": {}})
        entry["models"].append(s["model"])
        for key, flip in sorted((s.get("flips") or {}).items()):
            if flip not in ("lost", "gained"):
                raise ValueError(
                    f"cell {s['model']}/{triple}: flip {flip!r} of {key!r} is not lost/gained"
                )
            unit = entry["flips"].setdefault(key, {"lost": [], "gained": []})
            unit[flip].append(s["model"])
    return out


def assets_fingerprint() -> str:
    """sha256 (first 16 hex digits) of the app's files: the index rule's parameter, so
    a new version of the app rewrites the site's copy."""
    import hashlib

    digest = hashlib.sha256()
    package = resources.files(__package__) / "assets"
    for name in ASSETS:
        digest.update(name.encode() + b"\0" + (package / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _copy_assets(out_dir: Path) -> None:
    package = resources.files(__package__) / "assets"
    for name in ASSETS:
        data = (package / name).read_bytes()
        target = out_dir / name if name == "index.html" else out_dir / "assets" / name
        if not target.exists() or target.read_bytes() != data:
            atomic_write_bytes(target, data)


def _remove_stale(out_dir: Path, keep: set[Path]) -> None:
    """Agreement files of an earlier run that this run does not make."""
    for path in sorted((out_dir / "agree").glob("**/*.js")):
        if path not in keep:
            path.unlink()


def build_site(
    spec: Mapping[str, Any],
    cells: Sequence[str | Path],
    variants: Sequence[str | Path],
    out_dir: str | Path,
) -> list[Path]:
    """Write the index, the agreement files and the app into ``out_dir``; return the
    files written (the data files first)."""
    out_dir = Path(out_dir)
    studies = list(spec.get("studies") or [])
    summaries = [_read_summary(c) for c in cells]
    # the run's order: models, datasets, conditions as the spec lists them
    ranks = {
        field: {name: i for i, name in enumerate(names)}
        for field, names in (
            ("model", spec.get("model_order") or []),
            ("dataset", list(spec.get("datasets") or {})),
            ("condition", list(spec.get("conditions") or {})),
        )
    }
    summaries.sort(
        key=lambda s: (
            tuple(
                (ranks[f].get(s[f], len(ranks[f])), s[f]) for f in ("model", "dataset", "condition")
            )
            + (s["prompt"],)
        )
    )
    agree = _agreement(summaries)
    written: list[Path] = []
    for triple, payload in sorted(agree.items()):
        path = out_dir / "agree" / f"{triple}.js"
        write_js(path, f"agree/{triple}", payload)
        written.append(path)
    _remove_stale(out_dir, set(written))
    variant_lines = {}
    for folder in variants:
        v = _read_summary(folder)
        variant_lines[f"{v['dataset']}/{v['condition']}"] = {
            "parts": int(v["parts"]),
            "n": int(v["n"]),
            "perturbation": v.get("perturbation"),
        }
    index = {
        "version": INDEX_VERSION,
        "clean": spec.get("clean", "clean"),
        "models": spec.get("models") or {},
        "model_order": list(spec.get("model_order") or []),
        "datasets": spec.get("datasets") or {},
        "conditions": spec.get("conditions") or {},
        # the run's order (the data files' keys are sorted)
        "dataset_order": list(spec.get("datasets") or {}),
        "condition_order": list(spec.get("conditions") or {}),
        "studies": studies,
        "cells": [_cell_line(s, studies) for s in summaries],
        "variants": dict(sorted(variant_lines.items())),
        "agree": sorted(agree),
    }
    path = out_dir / "index.js"
    write_js(path, "index", index)  # refuses an index over the bound of a data file
    written.append(path)
    _copy_assets(out_dir)
    return written + [out_dir / "index.html"] + [out_dir / "assets" / a for a in ASSETS[1:]]
