"""The explorer's variants folder of one (dataset, condition): what each variant shows.

:func:`build_variants` reads a condition's manifest (``results/variants/<dataset>/
<condition>/manifest.jsonl``) and the dataset's ``samples.jsonl`` and writes, under
``results/explorer/variants/<dataset>/<condition>/``:

* ``thumbs/<n>.webp`` — one thumbnail per (variant, image), ``n`` counting the images in
  manifest order: longest side :data:`THUMB_SIDE` px, WebP quality :data:`THUMB_QUALITY`,
  made from the manifest's image file with its EXIF orientation applied (the pixels a
  model is shown);
* ``part<k>.js`` — ``EXPLORER.put("variants/<dataset>/<condition>/<k>", {"dataset",
  "condition", "part", "parts", "variants": {variant_id: V}})``, a variant in part
  ``key_chunk(variant_id, parts)`` (:mod:`.data`);
* ``summary.json`` — ``dataset``, ``condition``, ``perturbation``, ``n`` (variants),
  ``parts``, ``bytes`` (of the part files and thumbnails), ``thumbs`` and ``param_keys``
  (every key of the variants' params).

A variant ``V`` holds the sample's question (the manifest's question when it has one),
choices (null when none), answer and answer type, its images (``thumb``; ``full``: the
image as a path relative to ``results/explorer/`` when it lies under ``results/``, else
null; the full image's ``width`` and ``height``; ``boxes`` in full-image pixels and their
``box_kind``: a mask condition's masked box, ``mask``, or an Idis condition's distractor
boxes, ``distractor``), its params (long lists and texts clipped, absolute paths cut to
their file name), seed, perturbation and the two facets the page filters on,
``method`` and ``severity`` (:func:`facets`).

Bad input is an error naming the file and line: a manifest row without a variant id, a
repeated variant id, a sample missing from ``samples.jsonl``, an image that cannot be
opened, a box that is not four numbers.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from PIL import Image, ImageOps

from ...core.idis import AREA_PERTURBATIONS
from ...core.io import atomic_write_bytes, iter_jsonl
from .data import remove_stale, rows_by, write_parts, write_summary

__all__ = [
    "IDIS_PERTURBATIONS",
    "THUMB_QUALITY",
    "THUMB_SIDE",
    "build_variants",
    "clip_params",
    "facets",
    "full_image",
    "image_boxes",
    "make_thumbnail",
]

#: the thumbnails' longest side (px) and WebP quality
THUMB_SIDE = 320
THUMB_QUALITY = 80
#: the Idis study's perturbations (their params carry kind, semantics, n, ...)
IDIS_PERTURBATIONS = (*AREA_PERTURBATIONS, "resize", "textual")
#: params shown on the page: lists cut after this many items, texts after these characters
PARAM_LIST_LIMIT = 50
PARAM_TEXT_LIMIT = 2_000


def _str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def facets(perturbation: str, params: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The variant's ``(method, severity)``, the page's two generic filters: a
    corruption's method and severity; an Idis variant's kind (``kind:semantics``) and
    ``n=<n>`` (its size or resolution when it has one); a distraction's source; a
    mask's region; nothing for the clean condition."""
    if perturbation == "corruption":
        return _str(params.get("method")), _str(params.get("severity"))
    if perturbation in IDIS_PERTURBATIONS:
        kind, semantics = _str(params.get("kind")), _str(params.get("semantics"))
        method = f"{kind}:{semantics}" if kind and semantics else kind
        for name in ("size", "resolution"):
            if params.get(name) is not None:
                return method, str(params[name])
        n = params.get("n")
        return method, None if n is None else f"n={n}"
    if perturbation == "distraction":
        return _str(params.get("source")), None
    if perturbation == "mask":
        return _str(params.get("region")), None
    if perturbation == "none":
        return None, None
    return _str(params.get("method")), _str(params.get("severity"))


def _is_absolute_path(text: str) -> bool:
    return (
        bool(text)
        and not any(ch.isspace() for ch in text)
        and (text.startswith(("/", "~", "\\")) or (len(text) > 2 and text[1:3] in (":\\", ":/")))
    )


def clip_params(value: Any) -> Any:
    """``value`` (a variant's params) as the page shows it: lists longer than
    :data:`PARAM_LIST_LIMIT` cut (their last item says how many more), texts longer
    than :data:`PARAM_TEXT_LIMIT` cut with an ellipsis, an absolute path replaced by
    ``…/<file name>`` (no absolute path reaches a page)."""
    if isinstance(value, Mapping):
        return {str(k): clip_params(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        kept = [clip_params(v) for v in value[:PARAM_LIST_LIMIT]]
        if len(value) > PARAM_LIST_LIMIT:
            kept.append(f"\u2026 {len(value) - PARAM_LIST_LIMIT} more")
        return kept
    if isinstance(value, str):
        if _is_absolute_path(value):
            return "\u2026/" + PurePosixPath(value.replace("\\", "/")).name
        if len(value) > PARAM_TEXT_LIMIT:
            return value[: PARAM_TEXT_LIMIT - 1] + "\u2026"
    return value


def full_image(image: str) -> str | None:
    """The image as the page links it, relative to ``results/explorer/``
    (``results/samples/x.png`` -> ``../samples/x.png``), or None when the file does not
    lie under ``results/`` (an absolute path counts when it lies under the working
    folder's ``results/``)."""
    path = os.path.normpath(image)
    if os.path.isabs(path):
        cwd = os.getcwd()
        if os.path.commonpath([path, cwd]) != cwd:
            return None
        path = os.path.relpath(path, cwd)
    parts = PurePosixPath(path.replace(os.sep, "/")).parts
    if len(parts) < 2 or parts[0] != "results" or ".." in parts:
        return None
    return "../" + "/".join(parts[1:])


def _box(box: Any, where: str, what: str) -> list[int | float]:
    numbers = isinstance(box, (list, tuple)) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in box
    )
    if not numbers or len(box) != 4:
        raise ValueError(f"{where}: {what} {box!r} is not a box [x0, y0, x1, y1]")
    return list(box)


def _mask_box(path: str, where: str) -> list[list[int]]:
    """The bounding box of a mask file's masked pixels (> 127), or none."""
    try:
        with Image.open(path) as im:
            bbox = im.convert("L").point(lambda v: 255 if v > 127 else 0).getbbox()
    except Exception as exc:
        raise ValueError(f"{where}: cannot open the mask image {path}: {exc}") from exc
    return [] if bbox is None else [list(bbox)]


def image_boxes(row: Mapping[str, Any], k: int, where: str) -> tuple[list[list], str | None]:
    """The boxes drawn on image ``k`` of a manifest row and their kind: a mask
    condition's masked box (``params.box``; without it, the bounding box of the
    ``masks`` file), ``"mask"``; an Idis condition's distractor boxes
    (``params.boxes``), ``"distractor"``; otherwise none (kind None). These
    perturbations take one image, so only image 0 has boxes."""
    params = row.get("params") or {}
    perturbation = row.get("perturbation")
    if k != 0 or perturbation not in ("mask", *IDIS_PERTURBATIONS):
        return [], None
    if perturbation == "mask":
        masks = row.get("masks") or []
        if params.get("box") is not None:
            boxes = [_box(params["box"], where, "params.box")]
        else:
            boxes = _mask_box(masks[0], where) if masks else []
        return boxes, "mask" if boxes else None
    found = params.get("boxes") or []
    if not isinstance(found, list):
        raise ValueError(f"{where}: params.boxes {found!r} is not a list of boxes")
    boxes = [_box(b, where, "a box of params.boxes") for b in found]
    return boxes, "distractor" if boxes else None


def make_thumbnail(image: str, where: str) -> tuple[bytes, int, int]:
    """``(WebP bytes, width, height)``: the thumbnail of ``image`` (longest side
    :data:`THUMB_SIDE`) and the full image's size (EXIF orientation applied)."""
    try:
        with Image.open(image) as opened:
            opened.load()
            im = ImageOps.exif_transpose(opened)
    except Exception as exc:
        raise ValueError(f"{where}: cannot open the image {image}: {exc}") from exc
    width, height = im.size
    scale = THUMB_SIDE / max(width, height)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    has_alpha = im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info
    im = im.convert("RGBA" if has_alpha else "RGB").resize(size, Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    im.save(buf, format="WEBP", quality=THUMB_QUALITY, method=4)
    return buf.getvalue(), width, height


def _read_manifest(path: str) -> list[tuple[int, dict[str, Any]]]:
    rows: list[tuple[int, dict[str, Any]]] = []
    first: dict[str, int] = {}
    for lineno, row in iter_jsonl(path):
        where = f"{path}:{lineno}"
        vid = row.get("variant_id") if isinstance(row, dict) else None
        if not isinstance(vid, str) or not vid:
            raise ValueError(f"{where}: a manifest row without variant_id")
        if vid in first:
            raise ValueError(f"{where}: variant {vid!r} repeats (first at line {first[vid]})")
        if not isinstance(row.get("sample_id"), str) or not row["sample_id"]:
            raise ValueError(f"{where}: variant {vid!r} has no sample_id")
        images = row.get("images")
        if not isinstance(images, list) or not all(isinstance(p, str) for p in images):
            raise ValueError(f"{where}: variant {vid!r}: images is not a list of paths")
        if not isinstance(row.get("params") or {}, dict):
            raise ValueError(f"{where}: variant {vid!r}: params is not an object")
        first[vid] = lineno
        rows.append((lineno, row))
    return rows


def _identity(path: str, rows: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """The manifest's dataset, condition and perturbation (every row must agree); an
    empty manifest's dataset and condition are its folders'
    (``.../<dataset>/<condition>/manifest.jsonl``)."""
    if not rows:
        folder = Path(path).absolute().parent
        return {"dataset": folder.parent.name, "condition": folder.name, "perturbation": None}
    _, first = rows[0]
    found = {k: first.get(k) for k in ("dataset", "condition", "perturbation")}
    for lineno, row in rows:
        for k, v in found.items():
            if not isinstance(row.get(k), str) or not row[k]:
                raise ValueError(f"{path}:{lineno}: the row has no {k}")
            if row[k] != v:
                raise ValueError(
                    f"{path}:{lineno}: {k} {row.get(k)!r} differs from the first row's {v!r} "
                    "(a manifest holds one dataset and condition)"
                )
    return found


def _variant(row: dict[str, Any], sample: dict[str, Any], images: list[dict]) -> dict[str, Any]:
    params = row.get("params") or {}
    method, severity = facets(row["perturbation"], params)
    question = row.get("question")
    return {
        "sample_id": row["sample_id"],
        "question": question if isinstance(question, str) and question else sample.get("question"),
        "choices": list(sample.get("choices") or []) or None,
        "answer": sample.get("answer"),
        "answer_type": sample.get("answer_type"),
        "images": images,
        "params": clip_params(params),
        "seed": row.get("seed"),
        "perturbation": row["perturbation"],
        "method": method,
        "severity": severity,
    }


def _images(
    row: dict[str, Any], prefix: str, thumbs: Path, first: int, where: str, cache: dict
) -> tuple[list[dict[str, Any]], list[tuple[Path, int]]]:
    """The image entries of a variant and the thumbnails written (numbered from
    ``first``); ``cache`` keeps the last image's thumbnail (variants of one sample often
    share their image)."""
    entries, written = [], []
    for k, image in enumerate(row["images"]):
        n = first + k
        if cache.get("image") != image:
            cache.update(image=image, thumb=make_thumbnail(image, where))
        data, width, height = cache["thumb"]
        path = thumbs / f"{n}.webp"
        atomic_write_bytes(path, data)
        written.append((path, len(data)))
        boxes, box_kind = image_boxes(row, k, where)
        entries.append(
            {
                "thumb": f"{prefix}/thumbs/{n}.webp",
                "full": full_image(image),
                "width": width,
                "height": height,
                "boxes": boxes,
                "box_kind": box_kind,
            }
        )
    return entries, written


def build_variants(manifest: str, samples: str, out_dir: str) -> dict[str, Any]:
    """Write the variants folder of one manifest (module docstring); its summary."""
    rows = _read_manifest(manifest)
    by_id = rows_by(samples, "sample_id", "sample")
    found = _identity(manifest, rows)
    dataset, condition = found["dataset"], found["condition"]
    prefix = f"variants/{dataset}/{condition}"
    out = Path(out_dir)
    thumbs = out / "thumbs"
    variants: dict[str, dict[str, Any]] = {}
    written: list[tuple[Path, int]] = []
    param_keys: set[str] = set()
    cache: dict[str, Any] = {}
    for lineno, row in rows:
        where = f"{manifest}:{lineno}"
        sample = by_id.get(row["sample_id"])
        if sample is None:
            raise ValueError(f"{where}: sample {row['sample_id']!r} is not in {samples}")
        entries, thumbs_written = _images(row, prefix, thumbs, len(written), where, cache)
        written += thumbs_written
        param_keys.update(str(k) for k in (row.get("params") or {}))
        variants[row["variant_id"]] = _variant(row, sample, entries)
    remove_stale(thumbs, "*.webp", [p for p, _ in written])

    def payload(k: int, count: int, part: dict[str, Any]) -> dict[str, Any]:
        return {
            "dataset": dataset,
            "condition": condition,
            "part": k,
            "parts": count,
            "variants": part,
        }

    parts = write_parts(out, "part", prefix, variants, payload, manifest)
    summary = {
        **found,
        "n": len(variants),
        "parts": len(parts),
        "bytes": sum(size for _, size in parts + written),
        "thumbs": len(written),
        "param_keys": sorted(param_keys),
    }
    write_summary(out / "summary.json", summary)
    return summary
