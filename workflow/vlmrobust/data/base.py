"""The pieces every dataset adapter shares: errors, image handling, row sources.

An :class:`Adapter` knows one benchmark: where it lives on the hub (``hub_id``,
``hub_config``, ``split``: the defaults a run config can override), how to find a
row's own id, and how to turn one row of the benchmark's hub schema into a
:class:`Draft` (question, answer, choices, image values, meta). Reading the rows
(hub or local folder), decoding and storing the images, the bad-row policy and the
report are done once for all adapters in :mod:`vlmrobust.data.build`.

Local folders hold the rows in the dataset's hub schema:

- parquet files as exported by the hub (image columns are ``{bytes, path}`` structs),
  searched recursively; or
- ``*.jsonl`` files, or ``*.json`` files holding a JSON list (or an object whose values
  are the rows, like MathVista's ``testmini.json``); image fields are then paths
  relative to the folder.

If the folder holds parquet files only those are read, else the JSONL files, else
the JSON files. Files named for a split (``<split>-00000-of-00001.parquet``,
``<split>.jsonl``, ``data/<split>-*``, or a ``<split>/`` folder) are sub-selected by
the configured split; a folder whose files are named for other splits only is an
error (never silently the wrong split); files not named for any split are all read.
When the adapter has a hub config (InfoVQA: ``InfographicVQA``) and the folder has a
sub-folder of that name, only that sub-folder is searched.
"""

from __future__ import annotations

import ast
import io
import json
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image, ImageOps

from ..core.benchmarks import Benchmark
from ..core.io import read_jsonl, read_utf8
from ..core.pixels import fit_within
from ..core.records import missing


class BadRowError(ValueError):
    """A row of a dataset cannot become a sample (with ``on_bad_row: error``).

    The message names the dataset, the row index, the dataset's own id and the reason.
    """


class RowProblem(Exception):
    """Raised inside adapters for a bad row; :func:`build_samples` adds the context."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --------------------------------------------------------------------------- images

#: the stand-in of an image field a row lacks when no image is read
IMAGE_PLACEHOLDER = "(image not loaded)"

#: encoded formats kept byte for byte (suffix to write); anything else becomes PNG
KEEP_FORMATS = {"JPEG": ".jpg", "MPO": ".jpg", "PNG": ".png", "WEBP": ".webp"}
_PNG_MODES = {"1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA"}


@dataclass
class EncodedImage:
    """An image that decodes: the bytes to write and the file suffix they need."""

    data: bytes
    suffix: str
    size: tuple[int, int]


def _encode_png(img: Image.Image) -> bytes:
    if img.mode not in _PNG_MODES:
        img = img.convert("RGBA" if "A" in img.getbands() else "RGB")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _resolve_path(path: str | os.PathLike, base_dir: Path | None) -> Path:
    """A row's image path, relative to the dataset folder ``base_dir``. A local dataset's
    images must lie inside its folder (links resolved): the workflow lists the folder's
    files as the samples job's inputs, so an image elsewhere would change unseen."""
    p = Path(path)
    if base_dir is None:
        return p
    if not p.is_absolute():
        p = base_dir / p
    if not p.resolve().is_relative_to(Path(base_dir).resolve()):
        raise RowProblem(
            f"image path {str(path)!r} lies outside the dataset folder {str(base_dir)!r}; "
            "copy the image into the folder (a file outside it is not an input of the "
            "samples job, so a change to it would rerun nothing)"
        )
    return p


def load_image(value: Any, base_dir: Path | None) -> EncodedImage:
    """Turn any image value a row may hold into verified, encoded bytes.

    Accepted: a PIL image; a dict with ``bytes`` and/or ``path`` (the hub's image
    struct); a path (str or PathLike, relative to ``base_dir``); raw bytes. The image
    must decode fully (``Image.open(...).load()``). JPEG, PNG and WebP bytes are kept
    as they are; other formats and PIL images are stored as PNG.

    Raises :class:`RowProblem` naming what is wrong.
    """
    if value is None:
        raise RowProblem("image is missing")
    if isinstance(value, Image.Image):
        try:
            value.load()
            return EncodedImage(_encode_png(value), ".png", value.size)
        except Exception as exc:  # PIL raises many types
            raise RowProblem(f"image could not be decoded: {exc}") from exc
    data: bytes | None = None
    where = ""
    if isinstance(value, dict):
        raw = value.get("bytes")
        if raw:
            data = bytes(raw)
        elif value.get("path"):
            value = value["path"]
        else:
            raise RowProblem("image is missing (no bytes and no path)")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        if not data:
            raise RowProblem("image is missing (empty bytes)")
    if data is None:
        if not isinstance(value, (str, os.PathLike)):
            raise RowProblem(f"image value of type {type(value).__name__} is not supported")
        if not str(value).strip():
            raise RowProblem("image is missing (empty path)")
        path = _resolve_path(value, base_dir)
        where = f" ({path})"
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise RowProblem(f"image file not found: {path}") from exc
        except OSError as exc:
            raise RowProblem(f"image file could not be read: {path}: {exc}") from exc
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()
            fmt = img.format or ""
            size = img.size
            if fmt in KEEP_FORMATS:
                return EncodedImage(data, KEEP_FORMATS[fmt], size)
            return EncodedImage(_encode_png(img), ".png", size)
    except Exception as exc:
        raise RowProblem(f"image could not be decoded{where}: {exc}") from exc


def _resizable(img: Image.Image) -> Image.Image:
    """``img`` in a mode PIL resizes with a filter and PNG stores: L, LA, RGB and RGBA
    stay; a palette or 1-bit image is expanded first (PIL would resize it with nearest
    neighbour); any other mode becomes RGB (RGBA when it has an alpha band)."""
    if img.mode in ("L", "LA", "RGB", "RGBA"):
        return img
    if img.mode == "1":
        return img.convert("L")
    alpha = "A" in img.getbands() or (img.mode == "P" and "transparency" in img.info)
    return img.convert("RGBA" if alpha else "RGB")


def bound_pixels(enc: EncodedImage, max_pixels: int) -> tuple[EncodedImage, tuple[int, int] | None]:
    """The image within ``max_pixels`` pixels, and its size as shown before when it was
    downscaled (else ``None``).

    An image that fits is returned as it is. A larger one is decoded, its EXIF
    orientation applied, scaled down by one factor keeping the aspect ratio
    (:func:`~vlmrobust.core.pixels.fit_within`, Lanczos: deterministic) and stored as
    PNG (lossless; no EXIF left to apply). The large-image policy: docs/large-images.md.
    """
    w, h = enc.size
    if w * h <= max_pixels:
        return enc, None
    with Image.open(io.BytesIO(enc.data)) as img:
        img.load()
        shown = _resizable(ImageOps.exif_transpose(img))
    size = fit_within(shown.size, max_pixels)
    small = shown.resize(size, Image.Resampling.LANCZOS)
    return EncodedImage(_encode_png(small), ".png", small.size), shown.size


def image_list(value: Any) -> list[Any]:
    """A column that holds one image or a list of images, as a list."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


# --------------------------------------------------------------------------- values


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def is_number(text: Any) -> bool:
    """``True`` for a plain decimal number such as ``12``, ``-3.5``, ``1e3``."""
    return isinstance(text, (int, float, str)) and bool(_NUMBER.match(str(text).strip()))


def number_or_text(answer: str) -> str:
    return "number" if is_number(answer) else "text"


def letter(index: int) -> str:
    return chr(ord("A") + index)


def letter_index(answer: Any, n_choices: int | None = None) -> int | None:
    """Index of a single option letter (``"B"`` -> 1), or ``None``."""
    text = str(answer).strip() if answer is not None else ""
    if len(text) != 1 or not ("A" <= text <= "Z"):
        return None
    i = ord(text) - ord("A")
    if n_choices is not None and i >= n_choices:
        return None
    return i


def answer_text(value: Any) -> str:
    """An answer as text; a missing answer is a bad row."""
    if missing(value):
        raise RowProblem("no answer")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip()


def question_text(row: dict[str, Any]) -> str:
    """The row's ``question`` as text; a missing question is a bad row."""
    text = row.get("question")
    if missing(text):
        raise RowProblem("question is missing")
    return str(text)


def parse_list(value: Any, what: str = "options") -> list[str]:
    """A list given as a list or as a Python/JSON list literal (MMMU's ``options``)."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
            raise RowProblem(
                f"{what} could not be parsed as a list literal: {text[:80]!r}"
            ) from exc
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list):
        raise RowProblem(f"{what} is not a list: {value!r:.80}")
    return [str(v) for v in value]


def to_int(value: Any) -> int | None:
    """MathVista's precision (``1.0``) as an int; missing -> ``None``."""
    if missing(value):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError) as exc:
        raise RowProblem(f"precision {value!r} is not a number") from exc
    if not f.is_integer():
        raise RowProblem(f"precision {value!r} is not a whole number")
    return int(f)


def jsonable(value: Any) -> Any:
    """Meta values as plain JSON types (numpy scalars/arrays, tuples, nested)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist"):  # numpy scalar or array
        return jsonable(value.tolist())
    if isinstance(value, (bytes, bytearray, Image.Image)):
        return None
    return str(value)


# --------------------------------------------------------------------------- drafts


@dataclass
class Draft:
    """What an adapter makes of one row; build_samples adds id, dataset and image paths.

    ``images`` are raw image values (see :func:`load_image`) in question order.
    ``extra_images`` maps a meta key to further image values that are stored beside
    the sample's images and listed (as paths) under that meta key, e.g.
    Distract-Bench's ``distracted_images``.
    """

    question: str
    answer: str
    answer_type: str
    images: list[Any]
    choices: list[str] = field(default_factory=list)
    precision: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    extra_images: dict[str, list[Any]] = field(default_factory=dict)


# --------------------------------------------------------------------------- row sources


@dataclass
class RowSource:
    """The rows of one configured dataset and where relative image paths resolve."""

    rows: Iterable[dict[str, Any]]
    base_dir: Path | None
    info: dict[str, Any]


DATA_SUFFIXES = (".parquet", ".jsonl", ".json")
KNOWN_SPLITS = {
    "train",
    "validation",
    "valid",
    "val",
    "dev",
    "test",
    "testmini",
    "minival",
    "image",
    "non_image",
}
_HUB_SHARD = re.compile(r"^(?P<split>.+?)-\d{5}-of-\d{5}")


def _file_split(path: Path, root: Path) -> str | None:
    """The split a data file is named for, if any."""
    m = _HUB_SHARD.match(path.name)
    if m:
        return m["split"]
    stem = path.name.split(".")[0]
    if stem in KNOWN_SPLITS:
        return stem
    for part in path.relative_to(root).parts[:-1]:
        if part in KNOWN_SPLITS:
            return part
    return None


def _matches_split(path: Path, root: Path, split: str) -> bool:
    name = path.name
    stem = name.split(".")[0]
    parents = path.relative_to(root).parts[:-1]
    return (
        _file_split(path, root) == split
        or name.startswith(f"{split}-")
        or stem == split
        or split in parents
    )


def find_data_files(
    folder: Path,
    split: str | None,
    *,
    key: str,
    config: str | None = None,
    exclude: Iterable[str] = (),
) -> list[Path]:
    """The data files of a local folder for ``split`` (see the module docstring).

    ``key`` is the config key prefix (``datasets.<name>``) used in error messages.
    Returns ``[]`` when the folder holds no data file at all.
    """
    root = folder / config if config and (folder / config).is_dir() else folder
    excluded = set(exclude)
    found: list[Path] = []
    for suffix in DATA_SUFFIXES:
        found = sorted(
            p
            for p in root.rglob(f"*{suffix}")
            if p.is_file()
            and p.name not in excluded
            and not any(part.startswith(".") for part in p.relative_to(root).parts)
        )
        if found:
            break
    if not found or split is None:
        return found
    chosen = [p for p in found if _matches_split(p, root, split)]
    if chosen:
        return chosen
    named = sorted({s for p in found if (s := _file_split(p, root)) is not None})
    if named:
        raise ValueError(
            f"{key}.split: no file in {folder} is for split {split!r}; the files there are "
            f"for split(s) {', '.join(named)}. Set {key}.split to one of them or add the files."
        )
    return found


def _iter_parquet(path: Path) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(path)
    for batch in pf.iter_batches(batch_size=64):
        yield from batch.to_pylist()


def _iter_json(path: Path) -> Iterator[dict[str, Any]]:
    try:
        obj = json.loads(read_utf8(path))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
    if isinstance(obj, dict):
        rows = list(obj.values())
        if not all(isinstance(r, dict) for r in rows):
            raise ValueError(f"{path}: expected a JSON list of rows or an object of rows")
    elif isinstance(obj, list):
        rows = obj
    else:
        raise ValueError(f"{path}: expected a JSON list of rows, found {type(obj).__name__}")
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"{path}: item {i} is not a JSON object")
        yield row


def iter_files(files: list[Path]) -> Iterator[dict[str, Any]]:
    """The rows of data files, in file order then row order."""
    for path in files:
        if path.suffix == ".parquet":
            yield from _iter_parquet(path)
        elif path.suffix == ".jsonl":
            yield from read_jsonl(path)
        else:
            yield from _iter_json(path)


def _undecode_images(ds: Any) -> Any:
    """Cast image columns to ``decode=False`` so the original encoded bytes are kept."""
    from datasets import Image as HFImage
    from datasets import List

    for col, feat in dict(getattr(ds, "features", None) or {}).items():
        try:
            if isinstance(feat, HFImage) and feat.decode:
                ds = ds.cast_column(col, HFImage(decode=False))
            elif isinstance(getattr(feat, "feature", None), HFImage) and feat.feature.decode:
                ds = ds.cast_column(col, List(HFImage(decode=False)))
        except Exception:  # keep decoded PIL images; load_image accepts them too
            continue
    return ds


def load_hub(hub_id: str, config: str | None, split: str, revision: str | None) -> Any:
    """``datasets.load_dataset`` for one split, images left encoded."""
    import datasets

    ds = datasets.load_dataset(hub_id, config, split=split, revision=revision)
    return _undecode_images(ds)


# --------------------------------------------------------------------------- adapter


class Adapter:
    """One benchmark's conversion from its hub schema to :class:`Sample` rows.

    Subclasses name their record of the benchmark registry
    (``benchmark = BENCHMARKS["mmmu"]``, :mod:`vlmrobust.core.benchmarks`), which sets
    ``name``, ``hub_id``, ``hub_config``, ``split`` and ``description``; they set
    ``id_label`` and implement :meth:`convert`; most also override :meth:`source_id`.
    The defaults ``hub_id``, ``hub_config`` and ``split`` are used when the run config
    leaves them ``null``.
    """

    #: the benchmark's record; the attributes below it are copied from it
    benchmark: Benchmark | None = None
    name: str = ""
    hub_id: str | None = None
    hub_config: str | None = None
    split: str | None = None
    #: the dataset's own id field, as named in error messages (``pid '17'``)
    id_label: str = "id"
    description: str = ""
    #: file names a local folder may hold that are not rows (metadata files)
    exclude_files: tuple[str, ...] = ()
    #: the adapter reads the images itself while loading the rows (VisArgs: the
    #: premises' boxes are checked against the image size), so ``images: false`` cannot
    #: work for it
    reads_images: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        record = cls.__dict__.get("benchmark")
        if record is not None:
            cls.name = record.name
            cls.hub_id = record.hub_id
            cls.hub_config = record.hub_config
            cls.split = record.split
            cls.description = record.description

    def defaults(self) -> dict[str, str | None]:
        return {"hub_id": self.hub_id, "hub_config": self.hub_config, "split": self.split}

    # -- reading ----------------------------------------------------------------
    def load_rows(self, spec: dict[str, Any], key: str) -> RowSource:
        source = spec.get("source") or "hub"
        hub_id = spec.get("hub_id") or self.hub_id
        config = spec.get("hub_config") or self.hub_config
        split = spec.get("split") or self.split
        if source == "hub":
            if not hub_id:
                raise ValueError(
                    f"{key}.hub_id: adapter {self.name!r} has no default hub id; set "
                    f"{key}.hub_id, or use {key}.source: local with {key}.path"
                )
            rows = load_hub(hub_id, config, split, spec.get("revision"))
            info = {
                "hub_id": hub_id,
                "hub_config": config,
                "split": split,
                "revision": spec.get("revision"),
            }
            return RowSource(rows, None, info)
        folder = self.local_folder(spec, key)
        files = find_data_files(folder, split, key=key, config=config, exclude=self.exclude_files)
        if not files:
            raise ValueError(
                f"{key}.path: no data files (*.parquet, *.jsonl, *.json) found in {folder}; "
                f"it should hold the {self.name} rows in their hub schema"
            )
        info = {
            "path": str(folder),
            "split": split,
            "files": [str(p.relative_to(folder)) for p in files],
        }
        return RowSource(iter_files(files), folder, info)

    def local_folder(self, spec: dict[str, Any], key: str) -> Path:
        path = spec.get("path")
        if not path:
            raise ValueError(
                f"{key}.path: required when {key}.source is 'local'; set it to the folder "
                f"holding the {self.name} rows"
            )
        folder = Path(path)
        if not folder.is_dir():
            raise ValueError(f"{key}.path: {str(folder)!r} is not an existing folder")
        return folder

    def local_only_folder(self, spec: dict[str, Any], key: str, layout: str) -> Path:
        """:meth:`local_folder` for an adapter that reads a local folder only; any other
        ``source`` is an error naming the key and the ``layout`` expected."""
        if (spec.get("source") or "local") != "local":
            raise ValueError(
                f"{key}.source: the {self.name} adapter reads a local folder only ({layout}); "
                f"set {key}.source: local and {key}.path to that folder"
            )
        return self.local_folder(spec, key)

    # -- converting -------------------------------------------------------------
    def source_id(self, row: dict[str, Any], index: int) -> str:
        """The dataset's own id of a row (kept in ``meta["source_id"]``)."""
        value = row.get(self.id_label)
        if missing(value):
            raise RowProblem(f"{self.id_label} is missing")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return str(value)

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        raise NotImplementedError

    def rescale_meta(
        self, meta: dict[str, Any], image: int, before: tuple[int, int], after: tuple[int, int]
    ) -> dict[str, Any]:
        """The draft's meta once image ``image`` was downscaled from ``before`` to
        ``after`` (width, height; the large-image policy, :func:`bound_pixels`). An
        adapter whose meta holds pixel coordinates of an image scales them here (VisArgs:
        the premises' boxes); by default the meta holds none and stays as it is."""
        return meta

    def check(self, samples: list[Any]) -> list[str]:
        """Warnings about the finished sample list, for the report."""
        return []

    def report_fields(self, samples: list[Any]) -> dict[str, Any]:
        """Counts of what the adapter did to the finished samples (beyond the generic
        ones), added to the samples report; e.g. answers it had to interpret."""
        return {}

    def placeholder_images(self, row: dict[str, Any]) -> dict[str, Any]:
        """The row with a stand-in for every image field it lacks, for a conversion that
        never reads an image (``images: false``, rescoring released results): the
        adapters check that a row names its images, not what they hold."""
        row = dict(row)
        for key in ("image", "original_image"):
            if row.get(key) is None:
                row[key] = IMAGE_PLACEHOLDER
        return row
