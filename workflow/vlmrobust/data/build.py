"""The datasets -> samples stage: one configured dataset to ``samples.jsonl`` + images.

:func:`build_samples` reads the rows (hub or local folder) through the dataset's
adapter, verifies and stores every image under ``<out dir>/images/``, applies the
bad-row policy and writes the samples file and a JSON report. Nothing is written
unless the whole dataset converts (images are staged in a temporary folder that
replaces ``images/`` only at the end; the samples and report files are written
atomically).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ..core.io import atomic_write_bytes, write_json
from ..core.pixels import DEFAULT_MAX_PIXELS, PIL_MAX_PIXELS
from ..core.records import Sample, safe_id, write_samples
from ..core.released import skipped_by_reason
from .adapters import ADAPTERS
from .base import Adapter, BadRowError, EncodedImage, RowProblem, bound_pixels, load_image

log = logging.getLogger(__name__)

SOURCES = ("hub", "local")
ON_BAD_ROW = ("error", "skip")


def skip_summary(n: int, by_reason: dict[str, int]) -> str:
    """``3 bad row(s) skipped (on_bad_row: skip): question is missing (2), ...``."""
    reasons = "; ".join(f"{reason} ({count})" for reason, count in by_reason.items())
    return f"{n} bad row(s) skipped (on_bad_row: skip): {reasons}"


def get_adapter(name: str, spec: dict[str, Any]) -> Adapter:
    adapter_name = spec.get("adapter")
    if adapter_name not in ADAPTERS:
        raise ValueError(
            f"datasets.{name}.adapter: unknown adapter {adapter_name!r}; expected one of "
            f"{', '.join(sorted(ADAPTERS))}"
        )
    return ADAPTERS[adapter_name]


def _check_spec(name: str, spec: dict[str, Any]) -> tuple[str, str, int | None]:
    key = f"datasets.{name}"
    source = spec.get("source") or "hub"
    if source not in SOURCES:
        raise ValueError(f"{key}.source: {source!r} is not one of {', '.join(SOURCES)}")
    on_bad = spec.get("on_bad_row") or "error"
    if on_bad not in ON_BAD_ROW:
        raise ValueError(f"{key}.on_bad_row: {on_bad!r} is not one of {', '.join(ON_BAD_ROW)}")
    limit = spec.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"{key}.limit: {limit!r} is not a positive integer (or null for all rows)")
    return source, on_bad, limit


def spec_max_pixels(key: str, spec: dict[str, Any]) -> int:
    """The dataset's ``max_pixels`` (absent or null: :data:`DEFAULT_MAX_PIXELS`, the
    default of ``samples.max_pixels``); anything but an integer from 1 to PIL's limit is
    an error naming ``<key>.max_pixels``."""
    value = spec.get("max_pixels")
    if value is None:
        return DEFAULT_MAX_PIXELS
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= PIL_MAX_PIXELS:
        raise ValueError(
            f"{key}.max_pixels: {value!r} is not a whole number of pixels from 1 to "
            f"{PIL_MAX_PIXELS:,} (PIL's decompression-bomb limit)"
        )
    return value


def _replace_dir(staged: Path, final: Path) -> None:
    if final.exists() or final.is_symlink():
        old = final.with_name(f".{final.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(final, old)
        os.replace(staged, final)
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)
    else:
        os.replace(staged, final)


@dataclass
class _Images:
    """Where a row's images go and the bound they must keep (``max_pixels``)."""

    base_dir: Path | None
    images_dir: Path
    max_pixels: int


def _stored(
    value: Any, fname_stem: str, where: _Images, downscaled: list[dict[str, Any]]
) -> tuple[str, EncodedImage, tuple[int, int] | None]:
    """One image value read, bounded to ``max_pixels`` and named ``<stem><suffix>``,
    with its size before when it was downscaled (then also added to ``downscaled``:
    file, size before and after)."""
    enc, before = bound_pixels(load_image(value, where.base_dir), where.max_pixels)
    fname = f"{fname_stem}{enc.suffix}"
    if before is not None:
        downscaled.append({"file": fname, "from": list(before), "to": list(enc.size)})
    return fname, enc, before


def _convert_row(
    adapter: Adapter,
    name: str,
    sid: str,
    src_id: str,
    row: dict[str, Any],
    index: int,
    where: _Images,
    with_images: bool = True,
) -> tuple[Sample, list[tuple[str, EncodedImage]]]:
    try:
        draft = adapter.convert(row if with_images else adapter.placeholder_images(row), index)
    except RowProblem:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RowProblem(f"unexpected row content ({type(exc).__name__}: {exc})") from exc
    if not with_images:  # images: false -- no image is read or stored
        meta = {**draft.meta, "source_id": src_id, "without_images": True}
        meta.update({meta_key: [] for meta_key in draft.extra_images})
        return _sample(sid, name, [], draft, meta), []
    files: list[tuple[str, EncodedImage]] = []
    downscaled: list[dict[str, Any]] = []
    for k, value in enumerate(draft.images):
        fname, enc, before = _stored(value, f"{sid}_{k}", where, downscaled)
        files.append((fname, enc))
        if before is not None:  # pixel coordinates in the meta follow the image
            draft.meta = adapter.rescale_meta(draft.meta, k, before, enc.size)
    paths = [str(where.images_dir / fname) for fname, _ in files]
    if not paths:
        raise RowProblem("image is missing")
    meta = {"source_id": src_id, **draft.meta}
    meta["source_id"] = src_id
    for meta_key, values in draft.extra_images.items():
        tag = meta_key.removesuffix("_images")
        extra = []
        for k, value in enumerate(values):
            try:
                fname, enc, _ = _stored(value, f"{sid}_{tag}_{k}", where, downscaled)
            except RowProblem as exc:
                raise RowProblem(f"{meta_key}[{k}]: {exc.reason}") from exc
            files.append((fname, enc))
            extra.append(str(where.images_dir / fname))
        meta[meta_key] = extra
    # the stage's own record (never one a draft copied from another sample's meta);
    # only there when an image was downscaled: a sample whose images fit keeps its meta
    meta.pop("downscaled_images", None)
    if downscaled:
        meta["downscaled_images"] = downscaled
    return _sample(sid, name, paths, draft, meta), files


def _sample(sid: str, name: str, paths: list[str], draft: Any, meta: dict[str, Any]) -> Sample:
    try:
        return Sample(
            sample_id=sid,
            dataset=name,
            images=paths,
            question=draft.question,
            answer=draft.answer,
            answer_type=draft.answer_type,
            choices=list(draft.choices),
            precision=draft.precision,
            meta=meta,
        )
    except ValueError as exc:
        raise RowProblem(str(exc)) from exc


def build_samples(name: str, spec: dict[str, Any], out: Path, report: Path) -> dict[str, Any]:
    """Convert the configured dataset ``name`` into ``out`` (samples JSONL) + report.

    ``spec`` is the validated ``datasets.<name>`` config (adapter, source, hub_id,
    hub_config, split, revision, path, limit, expected_size, on_bad_row, max_pixels,
    images; other keys are ignored). Images go to ``out.parent / "images"``; one larger
    than ``max_pixels`` is downscaled (:func:`~vlmrobust.data.base.bound_pixels`), listed
    in its sample's ``meta["downscaled_images"]`` (file, size before and after) and
    counted in the report (``images_downscaled``, ``downscaled_samples``). With ``images: false``
    no image is read or written: every sample has ``images == []`` and
    ``meta["without_images"] = True``, and the report says ``without_images: true``
    (the samples serve imported outputs only). Returns the report dict (also written
    to ``report``). Raises :class:`BadRowError` for a bad row under ``on_bad_row:
    error`` and ``ValueError`` for a config that cannot work; in both cases nothing is
    written.
    """
    out, report = Path(out), Path(report)
    key = f"datasets.{name}"
    adapter = get_adapter(name, spec)
    source, on_bad, limit = _check_spec(name, spec)
    max_pixels = spec_max_pixels(key, spec)
    with_images = spec.get("images", True) is not False
    if not with_images and adapter.reads_images:
        raise ValueError(
            f"{key}.images: adapter {adapter.name!r} reads the images to build its samples; "
            "images: false cannot work for it"
        )
    src = adapter.load_rows(spec, key)

    images_dir = out.parent / "images"
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=".images.", suffix=".tmp", dir=out.parent))
    try:
        stores = _Images(src.base_dir, images_dir, max_pixels)
        done = _convert_rows(name, adapter, src, on_bad, limit, with_images, stores, staged)
        if not done.samples:
            reasons = "; ".join(f"row {s['row']}: {s['reason']}" for s in done.skipped[:3])
            raise ValueError(
                f"{key}: no usable rows ({done.rows_read} read"
                + (f", all skipped; first reasons: {reasons})" if done.skipped else ")")
            )
        _replace_dir(staged, images_dir)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise

    write_samples(out, done.samples)
    rep = _report(name, spec, adapter, src, done, source, on_bad, limit, with_images)
    rep.update({"samples": str(out), "images": str(images_dir)})
    if rep["images_downscaled"]:
        log.info(
            "dataset %r: %d image(s) of %d sample(s) downscaled to at most %d pixels",
            name,
            rep["images_downscaled"],
            len(rep["downscaled_samples"]),
            max_pixels,
        )
    warnings = rep["warnings"]
    write_json(report, rep)
    for w in warnings:
        log.warning("dataset %r: %s", name, w)
    log.info("dataset %r: %d samples from %d rows", name, len(done.samples), done.rows_read)
    return rep


@dataclass
class _Converted:
    """What the rows of a dataset became: samples, skipped bad rows, counts."""

    samples: list[Sample] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    rows_read: int = 0
    n_images: int = 0


def _convert_rows(
    name: str,
    adapter: Adapter,
    src: Any,
    on_bad: str,
    limit: int | None,
    with_images: bool,
    stores: _Images,
    staged: Path,
) -> _Converted:
    """Every row of ``src`` as a sample (its images written to ``staged``), a bad row
    skipped and counted or, under ``on_bad_row: error``, a :class:`BadRowError`."""
    done = _Converted()
    seen: dict[str, int] = {}
    total = None
    if limit is None and hasattr(src.rows, "__len__"):
        total = len(src.rows)
    bar = tqdm(src.rows, total=total, desc=f"samples {name}", unit="row", disable=None)
    for index, row in enumerate(bar):
        done.rows_read += 1
        src_id: str | None = None
        try:
            src_id = adapter.source_id(row, index)
            sid = safe_id(name, src_id)
            if sid in seen:
                raise RowProblem(
                    f"duplicate id: sample id {sid!r} is already used by row {seen[sid]}"
                )
            sample, files = _convert_row(
                adapter, name, sid, src_id, row, index, stores, with_images
            )
        except RowProblem as exc:
            where = f"{adapter.id_label} {src_id!r}" if src_id is not None else (
                f"{adapter.id_label} missing"
            )  # fmt: skip
            if on_bad == "error":
                raise BadRowError(f"dataset {name!r}, row {index} ({where}): {exc.reason}") from exc
            done.skipped.append({"row": index, "id": src_id, "reason": exc.reason})
            log.warning("dataset %r, row %d (%s): skipped: %s", name, index, where, exc.reason)
            continue
        for fname, enc in files:
            atomic_write_bytes(staged / fname, enc.data)
        done.n_images += len(files)
        seen[sid] = index
        done.samples.append(sample)
        if limit is not None and len(done.samples) >= limit:
            break
    bar.close()
    return done


def _downscale_fields(samples: list[Sample], max_pixels: int) -> dict[str, Any]:
    """The report's large-image counts: the bound, the images downscaled to it and the
    source ids of their samples (``meta.downscaled_images`` lists each one)."""
    ids = [str(s.meta["source_id"]) for s in samples if s.meta.get("downscaled_images")]
    n = sum(len(s.meta.get("downscaled_images") or []) for s in samples)
    return {"max_pixels": max_pixels, "images_downscaled": n, "downscaled_samples": ids}


def _report(
    name: str,
    spec: dict[str, Any],
    adapter: Adapter,
    src: Any,
    done: _Converted,
    source: str,
    on_bad: str,
    limit: int | None,
    with_images: bool,
) -> dict[str, Any]:
    """The samples report: counts, skipped rows by kind of reason, warnings."""
    samples, skipped = done.samples, done.skipped
    expected = spec.get("expected_size")
    warnings: list[str] = []
    by_reason = skipped_by_reason(skipped)
    if skipped:
        warnings.append(skip_summary(len(skipped), by_reason))
    if expected is not None and expected != len(samples):
        why = f" (limit {limit})" if limit is not None else ""
        warnings.append(f"expected {expected} samples, wrote {len(samples)}{why}")
    if not with_images:
        warnings.append(
            "images: false: no image was read; the samples serve imported outputs only "
            "(no model can run on them)"
        )
    warnings.extend(adapter.check(samples))
    return {
        "dataset": name,
        "adapter": adapter.name,
        "source": source,
        "hub_id": None,
        "hub_config": None,
        "split": None,
        "revision": None,
        "path": None,
        **src.info,
        "limit": limit,
        "on_bad_row": on_bad,
        "rows_read": done.rows_read,
        "samples_written": len(samples),
        "images_written": done.n_images,
        **_downscale_fields(samples, spec_max_pixels(f"datasets.{name}", spec)),
        "without_images": not with_images,
        "skipped": len(skipped),
        "skipped_by_reason": by_reason,
        "skipped_rows": skipped,
        "expected_size": expected,
        "answer_types": dict(sorted(Counter(s.answer_type for s in samples).items())),
        **adapter.report_fields(samples),
        "warnings": warnings,
    }
