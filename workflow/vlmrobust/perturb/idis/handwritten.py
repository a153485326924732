"""The ``handwritten`` perturbation: Idis-math typographic distractors, ``k`` handwritten
expression images (a folder of images, or MathWriting from the hub, cached) around the
unscaled diagram as ``diagram`` places its figures; ``name`` is the semantics label
(``handwritten`` or ``mathwriting``). The package docstring says how
(:mod:`vlmrobust.perturb.idis`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...clients.vlm.media import to_rgb
from ...core.io import atomic_save_image, read_jsonl, write_jsonl
from ...core.records import Sample
from ...core.seeding import rng_for
from ..variants import Excluded, Perturbation, VariantPlan, _key, register
from .common import (
    IMAGE_SUFFIXES,
    _as_ints,
    _bound,
    _canvas_pixels,
    _folder,
    _one_image,
    _shown_size,
)
from .figures import _apply_math, _Figure, _figure_variant, _math_canvas

MATHWRITING_DATASET = "deepcopy/MathWriting-human"


def load_mathwriting(
    cache_dir: str | Path,
    split: str = "test",
    limit: int = 500,
    *,
    load_dataset: Callable[..., Any] | None = None,
) -> list[str]:
    """The first ``limit`` expression images of MathWriting (human-written,
    :data:`MATHWRITING_DATASET` on the Hugging Face hub, field ``image``) of ``split``,
    as PNG files under ``cache_dir/<split>-<limit>/`` (with ``manifest.jsonl``: file and
    LaTeX). A filled folder is reused without the network; otherwise the rows are
    streamed with ``datasets.load_dataset`` (``load_dataset`` replaces it in tests). A
    failure to reach the hub raises :class:`RuntimeError` saying what to do instead."""
    folder = Path(cache_dir) / f"{split}-{limit}"
    manifest = folder / "manifest.jsonl"
    if manifest.is_file():
        return [str(folder / row["file"]) for row in read_jsonl(manifest)]
    try:
        if load_dataset is None:
            from datasets import load_dataset
        rows = []
        for i, row in enumerate(load_dataset(MATHWRITING_DATASET, split=split, streaming=True)):
            if i >= limit:
                break
            name = f"{split}-{i:06d}.png"
            atomic_save_image(to_rgb(row["image"]), folder / name)
            rows.append({"file": name, "latex": row.get("latex")})
    except Exception as exc:
        raise RuntimeError(
            f"cannot load {MATHWRITING_DATASET} (split {split!r}) from the Hugging Face hub: "
            f"{type(exc).__name__}: {exc}. Without network access, put expression images "
            f"in a folder and use source: folder with path: <folder>"
        ) from exc
    if not rows:
        raise RuntimeError(f"{MATHWRITING_DATASET} split {split!r} has no rows")
    write_jsonl(manifest, rows)
    return [str(folder / r["file"]) for r in rows]


def _image_files(folder: Path) -> list[str]:
    return sorted(
        str(p) for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
    )


def _prepare_handwritten(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the schema validated it; checked here is what the
    schema cannot say: ``source: folder`` needs an existing folder ``path``."""
    out = dict(spec)
    _as_ints(out, "counts", "canvas", "limit")
    if out["source"] == "folder":
        out["path"] = _folder(condition, "path", out["path"])
    return out


def _setup_handwritten(
    samples: list[Sample], condition: str, spec: dict[str, Any]
) -> dict[str, Any]:
    if spec["source"] == "folder":
        files = _image_files(Path(spec["path"]))
        if not files:
            raise ValueError(f"{_key(condition, 'path')}: {spec['path']} has no image file")
    else:
        try:
            files = load_mathwriting(spec["cache_dir"], spec["split"], spec["limit"])
        except RuntimeError as exc:
            raise RuntimeError(f"{_key(condition, 'source')}: {exc}") from exc
    pool = [_Figure(Path(f).stem, f, "", _shown_size(f, _key(condition, "path"))) for f in files]
    return {**spec, "_pools": pool}


def _plan_handwritten(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    sid = sample.sample_id
    _one_image(sample, "handwritten")
    pool: list[_Figure] = spec["_pools"]
    layout = _math_canvas(sample, spec["canvas"], _bound(spec))
    name = spec["name"]
    plans: list[VariantPlan | Excluded] = []
    for k in spec["counts"]:
        vid = f"{sid}__{name}-n{k}"
        if len(pool) < k:
            plans.append(Excluded(vid, "pool-too-small", f"{len(pool)} expression(s) for {k}"))
            continue
        rng = rng_for(seed, condition, vid)
        head = {"kind": "typographic", "semantics": name, "n": k}
        plans.append(_figure_variant(vid, condition, seed, head, rng, pool, k, layout, spec))
    return plans


register(
    Perturbation(
        "handwritten",
        _prepare_handwritten,
        _plan_handwritten,
        _apply_math,
        setup=_setup_handwritten,
        pixels=_canvas_pixels,
    )
)
