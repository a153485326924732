"""VisArgs (``jiwan-chung/visargs``) for Contrastive Region Masking (docs/studies/masking.md).

A VisArgs row is one image (``url``) with its visual premises, one box per premise
(``b_box[k] = {startX, startY, w, h}``, pixels), commonsense premises, a conclusion and
reasoning steps. VisArgs has no question field: this adapter makes **one sample per
(image, visual premise)** — the premise's box is the region the study masks, the
answer is the premise, and the question about the region comes from a *question
writer*:

- ``template`` (the default, offline): "What is shown in the <part> of the image?",
  the part named from the box's centre (top-left / top / top-right / left / centre /
  right / bottom-left / bottom / bottom-right, by thirds of the image);
- an LLM (``question_writer: {backend: openai | gemini, model, ...}``): the questions
  are written beforehand by their own step (:mod:`vlmrobust.construct.questions`, the
  ``vlmrobust write-questions`` command and the workflow's ``questions`` rule), which
  asks the LLM about each item of :func:`question_items` and writes
  ``results/questions/<dataset>/questions.jsonl`` (one line per (image, premise) key:
  question, writer, cache key, error). This adapter only reads that file
  (``questions_file`` in the dataset's settings names another): a key without a line,
  or a line written by another writer, is an error (write the questions again); a line
  with an error is a bad row (``the question writer failed: ...``).

Images: a row's ``image`` (when the rows carry one) or its ``url``. A relative url is a
file of the local folder; an ``http(s)`` url is downloaded once into ``image_cache``
(default ``results/raw/visargs/images``, file name = sha256 of the url + suffix) and
read from there afterwards, so a folder filled beforehand serves a machine without
network. A failed download is a bad row naming the url.

Boxes are in the pixels of the image as shown (EXIF orientation applied). Every box
must have numbers ``startX, startY, w, h`` with ``w > 0`` and
``h > 0`` (else the row is bad, naming the sample and the box); a box reaching outside
the image is clipped to it and counted (``meta.clipped_boxes``; the report warns with
the total); a box entirely outside the image is a bad row. ``visual_premises`` and
``b_box`` must be the same length.

Local folders: ``annotation.json`` (the hub's file) when present, else the data files
like any adapter. The embedded demo writes its VisArgs-like images in this format
(``results/raw/demo/premises/annotation.json``).

Sample ``meta``: ``premise_index``, ``visual_premises``, ``b_box`` (clipped, all boxes
of the image), ``image_size`` [W, H], ``commonsense_premises``, ``conclusion``,
``reasoning_steps``, ``url``, ``clipped_boxes``, ``question_source`` (``template`` or
the writer's backend/model), ``source_row`` (the image's own id).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from PIL import Image

from ..core import paths
from ..core.benchmarks import BENCHMARKS
from ..core.io import read_jsonl
from .base import (
    Adapter,
    Draft,
    RowProblem,
    RowSource,
    iter_files,
    load_image,
    missing,
)

log = logging.getLogger(__name__)

DEFAULT_IMAGE_CACHE = paths.VISARGS_IMAGES
#: where the LLM question writer's step writes a dataset's questions (``{dataset}``)
DEFAULT_QUESTIONS_FILE = paths.QUESTIONS
_FETCH_TIMEOUT_S = 60

_PARTS = (
    ("top-left", "top", "top-right"),
    ("left", "centre", "right"),
    ("bottom-left", "bottom", "bottom-right"),
)


def region_phrase(box: tuple[float, float, float, float], size: tuple[int, int]) -> str:
    """The part of the image a box's centre lies in, by thirds (``"top-left"``, ...)."""
    x0, y0, x1, y1 = box
    w, h = size
    col = min(2, max(0, int(3 * ((x0 + x1) / 2) / w)))
    row = min(2, max(0, int(3 * ((y0 + y1) / 2) / h)))
    return _PARTS[row][col]


def template_question(box: tuple[float, float, float, float], size: tuple[int, int]) -> str:
    part = region_phrase(box, size)
    where = "centre" if part == "centre" else f"{part} part"
    return f"What is shown in the {where} of the image?"


def shown_size(data: bytes) -> tuple[int, int]:
    """The image's size as it is shown, EXIF orientation applied (as the perturbation
    stage and the model backends load it), so boxes are checked against what is seen."""
    with Image.open(io.BytesIO(data)) as im:
        w, h = im.size
        orientation = im.getexif().get(0x0112, 1)
    return (h, w) if orientation in (5, 6, 7, 8) else (w, h)


def check_box(value: Any, k: int) -> tuple[float, float, float, float]:
    """``b_box[k]`` as ``(x0, y0, x1, y1)``; :class:`RowProblem` for a bad one."""
    if not isinstance(value, dict):
        raise RowProblem(f"b_box[{k}] is not an object with startX, startY, w, h: {value!r}")
    nums = []
    for name in ("startX", "startY", "w", "h"):
        v = value.get(name)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise RowProblem(f"b_box[{k}].{name} is not a number: {v!r}")
        nums.append(float(v))
    x, y, w, h = nums
    if w <= 0 or h <= 0:
        raise RowProblem(f"b_box[{k}] is empty or negative (w={w:g}, h={h:g})")
    return x, y, x + w, y + h


def clip_box(
    box: tuple[float, float, float, float], size: tuple[int, int], k: int
) -> tuple[tuple[int, int, int, int], bool]:
    """The box clipped to the image, in whole pixels (outward rounding), and whether
    clipping changed it; a box entirely outside the image is a :class:`RowProblem`."""
    w, h = size
    x0, y0 = math.floor(box[0]), math.floor(box[1])
    x1, y1 = math.ceil(box[2]), math.ceil(box[3])
    cx0, cy0, cx1, cy1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
    if cx1 <= cx0 or cy1 <= cy0:
        raise RowProblem(f"b_box[{k}] {list(box)} lies entirely outside the {w}x{h} image")
    return (cx0, cy0, cx1, cy1), (cx0, cy0, cx1, cy1) != (x0, y0, x1, y1)


def _as_list(row: dict[str, Any], key: str) -> list[Any]:
    value = row.get(key)
    if missing(value):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return [value]
    if not isinstance(value, list | tuple):
        raise RowProblem(f"{key} is not a list")
    return list(value)


class VisArgs(Adapter):
    benchmark = BENCHMARKS["visargs"]
    id_label = "id"
    reads_images = True  # the premises' boxes are checked against each image's size

    # -- reading ----------------------------------------------------------------
    def load_rows(self, spec: dict[str, Any], key: str) -> RowSource:
        rows, src, cache = self._premise_rows(spec, key)
        writer = spec.get("question_writer") or {"backend": "template"}
        if writer.get("backend", "template") == "template":
            self._template_questions(rows)
        else:
            self._read_questions(rows, writer, questions_file(spec, key), key)
        info = dict(src.info, question_writer=_writer_name(writer), image_cache=str(cache))
        return RowSource(rows, src.base_dir, info)

    def _premise_rows(
        self, spec: dict[str, Any], key: str
    ) -> tuple[list[dict[str, Any]], RowSource, Path]:
        """One row per (image, visual premise), its image read; the source; the cache."""
        if (spec.get("source") or "hub") == "local":
            folder = self.local_folder(spec, key)
            annotation = folder / "annotation.json"
            if annotation.is_file():
                src = RowSource(
                    iter_files([annotation]),
                    folder,
                    {"path": str(folder), "split": None, "files": ["annotation.json"]},
                )
            else:
                src = super().load_rows(spec, key)
        else:
            src = super().load_rows(spec, key)
        cache = Path(spec.get("image_cache") or DEFAULT_IMAGE_CACHE)
        return list(self._expand(src.rows, src.base_dir, cache)), src, cache

    def _expand(self, rows: Any, base_dir: Path | None, cache: Path) -> Iterator[dict[str, Any]]:
        """One row per (image, visual premise); the image is loaded once per image."""
        for index, row in enumerate(rows):
            image_id = self._image_id(row, index)
            try:
                premises = _as_list(row, "visual_premises")
                boxes = _as_list(row, "b_box")
                if len(premises) != len(boxes):
                    raise RowProblem(
                        f"{len(premises)} visual_premises but {len(boxes)} b_box entries"
                    )
                if not premises:
                    raise RowProblem("no visual_premises")
                image = self._image(row, base_dir, cache)
                enc = load_image(image, base_dir)
                size = shown_size(enc.data)
                raw = [check_box(b, k) for k, b in enumerate(boxes)]
                clipped = [clip_box(b, size, k) for k, b in enumerate(raw)]
            except RowProblem as exc:
                # every premise of the image is a bad row of its own, so the bad-row
                # policy (error / skip) applies per sample
                try:
                    n = max(1, len(_as_list(row, "visual_premises")))
                except RowProblem:
                    n = 1
                for k in range(n):
                    yield {"_image_id": image_id, "_premise_index": k, "_problem": exc.reason}
                continue
            for k, premise in enumerate(premises):
                yield {
                    "_image_id": image_id,
                    "_premise_index": k,
                    "_image": enc.data,
                    "_size": list(size),
                    "_boxes": [list(b) for b, _ in clipped],
                    "_clipped": sum(c for _, c in clipped),
                    "premise": str(premise),
                    "row": row,
                }

    @staticmethod
    def _image_id(row: dict[str, Any], index: int) -> str:
        for name in ("id", "image_id", "name"):
            if not missing(row.get(name)):
                return str(row[name])
        url = row.get("url")
        if isinstance(url, str) and url.strip():
            return Path(url.split("?")[0]).stem or str(index)
        return str(index)

    @staticmethod
    def _image(row: dict[str, Any], base_dir: Path | None, cache: Path) -> Any:
        if not missing(row.get("image")):
            return row["image"]
        url = row.get("url")
        if not isinstance(url, str) or not url.strip():
            raise RowProblem("neither image nor url is given")
        url = url.strip()
        if not url.startswith(("http://", "https://")):
            return url  # a file of the local folder
        suffix = Path(url.split("?")[0]).suffix.lower()
        suffix = suffix if suffix in (".jpg", ".jpeg", ".png", ".webp", ".gif") else ".img"
        target = cache / (hashlib.sha256(url.encode("utf-8")).hexdigest()[:32] + suffix)
        # a download is returned as bytes: the url (in the row) names it, the cache is
        # no part of the dataset folder whose files are the samples job's inputs
        if target.is_file():
            return target.read_bytes()
        try:
            req = urllib.request.Request(url, headers={"User-Agent": "vlmrobust"})
            with urllib.request.urlopen(req, timeout=_FETCH_TIMEOUT_S) as resp:
                data = resp.read()
        except Exception as exc:
            raise RowProblem(
                f"image url {url} could not be downloaded ({exc}); put the file at "
                f"{target} or set the dataset's image_cache to a folder holding it"
            ) from exc
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".part")
        tmp.write_bytes(data)
        tmp.replace(target)
        return data

    @staticmethod
    def _template_questions(rows: list[dict[str, Any]]) -> None:
        for r in rows:
            if "_problem" not in r:
                r["_question"] = template_question(r["_boxes"][r["_premise_index"]], r["_size"])
                r["_question_source"] = "template"

    def _read_questions(
        self, rows: list[dict[str, Any]], writer: dict[str, Any], path: Path, key: str
    ) -> None:
        """The LLM writer's questions from its questions file (module docstring)."""
        name = _writer_name(writer)
        again = (
            "write the questions again (vlmrobust write-questions, the workflow's questions rule)"
        )
        if not path.is_file():
            raise ValueError(
                f"{key}.question_writer: the questions file {path} does not exist; {again}"
            )
        written: dict[str, dict[str, Any]] = {}
        for lineno, rec in enumerate(read_jsonl(path), 1):
            if not isinstance(rec, dict) or missing(rec.get("key")):
                raise ValueError(f"{path}:{lineno}: a line without a key")
            written[str(rec["key"])] = rec
        for r in rows:
            if "_problem" in r:
                continue
            sid = self.source_id(r, 0)
            rec = written.get(sid)
            if rec is None:
                raise ValueError(f"{path}: no question for {sid!r}; {again}")
            if rec.get("writer") != name:
                raise ValueError(
                    f"{path}: the question for {sid!r} was written by {rec.get('writer')!r}, "
                    f"but {key}.question_writer is {name!r}; {again}"
                )
            if rec.get("error") is not None or missing(rec.get("question")):
                r["_problem"] = f"the question writer failed: {rec.get('error') or 'no question'}"
                continue
            r["_question"] = str(rec["question"]).strip()
            r["_question_source"] = name

    # -- converting -------------------------------------------------------------
    def source_id(self, row: dict[str, Any], index: int) -> str:
        return f"{row['_image_id']}-vp{row['_premise_index'] + 1}"

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        if "_problem" in row:
            raise RowProblem(row["_problem"])
        src = row["row"]
        k = row["_premise_index"]
        meta = {
            "premise_index": k,
            "visual_premises": [str(p) for p in _as_list(src, "visual_premises")],
            "b_box": [
                {"startX": b[0], "startY": b[1], "w": b[2] - b[0], "h": b[3] - b[1]}
                for b in row["_boxes"]
            ],
            "image_size": row["_size"],
            "commonsense_premises": [str(p) for p in _as_list(src, "commonsense_premises")],
            "conclusion": "" if missing(src.get("conclusion")) else str(src["conclusion"]),
            "reasoning_steps": [str(p) for p in _as_list(src, "reasoning_steps")],
            "url": "" if missing(src.get("url")) else str(src["url"]),
            "clipped_boxes": row["_clipped"],
            "question_source": row["_question_source"],
            "source_row": row["_image_id"],
        }
        return Draft(row["_question"], row["premise"], "text", [row["_image"]], meta=meta)

    def rescale_meta(
        self, meta: dict[str, Any], image: int, before: tuple[int, int], after: tuple[int, int]
    ) -> dict[str, Any]:
        """The boxes and ``image_size`` of a downscaled image in its new pixels (each
        box rounded outward, as :func:`clip_box` does, and kept inside the image)."""
        sx, sy = after[0] / before[0], after[1] / before[1]
        boxes = []
        for b in meta["b_box"]:
            x0, y0 = math.floor(b["startX"] * sx), math.floor(b["startY"] * sy)
            x1 = min(after[0], math.ceil((b["startX"] + b["w"]) * sx))
            y1 = min(after[1], math.ceil((b["startY"] + b["h"]) * sy))
            boxes.append({"startX": x0, "startY": y0, "w": x1 - x0, "h": y1 - y0})
        return {**meta, "b_box": boxes, "image_size": list(after)}

    def check(self, samples: list[Any]) -> list[str]:
        seen: dict[str, int] = {}
        for s in samples:
            seen[s.meta["source_row"]] = s.meta["clipped_boxes"]
        clipped = sum(seen.values())
        if clipped:
            return [
                f"{clipped} box(es) reached outside their image and were clipped "
                f"({sum(1 for v in seen.values() if v)} image(s)); meta.clipped_boxes"
            ]
        return []


def questions_file(spec: dict[str, Any], key: str) -> Path:
    """The questions file of the dataset ``key`` (``datasets.<name>``): the spec's
    ``questions_file``, else :data:`DEFAULT_QUESTIONS_FILE` for ``<name>``."""
    name = key.removeprefix("datasets.")
    return Path(spec.get("questions_file") or DEFAULT_QUESTIONS_FILE.format(dataset=name))


def question_items(name: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """What the LLM question writer is asked about, one item per (image, visual
    premise) of the configured VisArgs dataset ``name`` whose row is usable: ``key``
    (the sample's source id, ``<image id>-vp<k>``), ``premise``, ``box`` (x0, y0, x1,
    y1, clipped), ``image_size`` [W, H], ``region`` (its part of the image) and
    ``conclusion``. Bad rows are left out (the samples step reports them)."""
    adapter = VisArgs()
    rows, _, _ = adapter._premise_rows(spec, f"datasets.{name}")
    items = []
    for r in rows:
        if "_problem" in r:
            continue
        box = r["_boxes"][r["_premise_index"]]
        items.append(
            {
                "key": adapter.source_id(r, 0),
                "premise": r["premise"],
                "box": box,
                "image_size": r["_size"],
                "region": region_phrase(box, r["_size"]),
                "conclusion": r["row"].get("conclusion"),
            }
        )
    return items


def _writer_name(writer: dict[str, Any]) -> str:
    backend = writer.get("backend", "template")
    return backend if backend == "template" else f"{backend}/{writer.get('model')}"
