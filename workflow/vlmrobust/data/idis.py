"""The base datasets of the Idis study (images with distractors): four adapters.

- :class:`ImageNet9` (``imagenet9``): the Backgrounds Challenge's ImageNet-9
  ``original`` images, the Idis-perception task (9-way classification);
- :class:`MathVerse` (``mathverse``): MathVerse testmini, the Idis-math task, read in
  four of its problem versions;
- :class:`LogicVista` (``logicvista``): LogicVista's questions; the Idis study only
  draws images from it (its table-capability subset is the pool of irrelevant math
  distractors);
- :class:`Waterbirds` (``waterbirds``): the Waterbirds test split, the mitigation
  experiment (landbird vs waterbird on a land or water background).

Each adapter's docstring gives the folder layout it reads and the ``meta`` it keeps;
every sample also gets ``meta["source_id"]`` (the dataset's own id). The perturbations
of the Idis study read ``meta["label"]``, ``meta["imagenet9_class"]`` and
``meta["target_masks"]`` (perception), ``meta["concept_family"]`` and
``meta["problem_version"]`` (math) and ``meta["specific_capability"]`` (LogicVista).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from PIL import Image

from ..core.benchmarks import BENCHMARKS
from ..core.concept_labels import CONCEPT_FAMILIES, read_labels
from ..core.idis import (
    IMAGENET9_CLASS_NAMES,
    IMAGENET9_FOLDERS,
    IMAGENET9_LABELS,
    IMAGENET9_QUESTION,
    MATHVERSE_VERSIONS,
    WATERBIRDS_LABELS,
    WATERBIRDS_QUESTION,
    option_letters,
)
from ..core.io import read_utf8
from .base import (
    Adapter,
    Draft,
    RowProblem,
    RowSource,
    answer_text,
    jsonable,
    letter,
    letter_index,
    missing,
    number_or_text,
    question_text,
)

__all__ = [
    "CONCEPT_LABELS_FILE",
    "WATERBIRDS_SPLITS",
    "ImageNet9",
    "LogicVista",
    "MathVerse",
    "Waterbirds",
    "parse_choices_block",
]


# --------------------------------------------------------------------------- ImageNet-9

#: image files read (suffix compared in lower case); fg_mask may also hold ``.npy``
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
#: the folders that may hold a target mask, by preference
MASK_FOLDERS = ("only_fg", "fg_mask")


def _images_by_stem(folder: Path, suffixes: tuple[str, ...], key: str) -> dict[str, Path]:
    """The files of ``folder`` with one of ``suffixes``, by stem, in name order; two
    files of one stem (``a.JPEG`` and ``a.png``) are an error naming both."""
    if not folder.is_dir():
        return {}
    out: dict[str, Path] = {}
    for p in sorted(folder.iterdir()):
        if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in suffixes:
            if p.stem in out:
                raise ValueError(
                    f"{key}.path: {str(out[p.stem])!r} and {str(p)!r} have the same stem; "
                    "keep one of them"
                )
            out[p.stem] = p
    return out


def _mask_from_npy(path: Path) -> Image.Image:
    """A foreground mask stored as a NumPy array: non-zero (in any channel) = target,
    as an ``L`` image (255 target, 0 elsewhere)."""
    import numpy as np

    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as exc:  # numpy raises several types for a bad file
        raise RowProblem(f"target mask {path} could not be read: {exc}") from exc
    if arr.ndim == 3 and arr.shape[-1] <= 4:
        arr = np.any(arr != 0, axis=-1)
    elif arr.ndim == 3 and arr.shape[0] <= 4:
        arr = np.any(arr != 0, axis=0)
    elif arr.ndim == 2:
        arr = arr != 0
    else:
        raise RowProblem(f"target mask {path} has shape {arr.shape}, not H x W (x C)")
    return Image.fromarray(arr.astype(np.uint8) * 255, "L")


def _image_size(path: Path) -> tuple[int, int] | None:
    """The size of an image file, or None when it cannot be opened (the image loader
    reports that later)."""
    try:
        with Image.open(path) as im:
            return im.size
    except Exception:  # unreadable here: load_image names the problem
        return None


class ImageNet9(Adapter):
    """ImageNet-9 of the Backgrounds Challenge (``original`` val: 4,050 images, 450 a class).

    Local folder only (``source: local``, ``path`` = the ``bg_challenge`` folder)::

        <path>/original/<split>/00_dog/*.JPEG ... 08_fish/*.JPEG   (the images)
        <path>/only_fg/<split>/<class>/<stem>.JPEG                  (optional)
        <path>/fg_mask/<split>/<class>/<stem>.(png|jpg|npy)         (optional)

    ``split`` (default ``val``) names the sub-folder. The nine class folders
    (:data:`~vlmrobust.core.idis.IMAGENET9_FOLDERS`) are read in class order (00 ...
    08), the files of each sorted by name; ``.JPEG``, ``.jpg``, ``.jpeg`` and ``.png``
    files are images (two of one stem are an error). A missing class folder is an error
    naming it; an empty one is warned about. The id is ``<class folder>/<stem>``
    (``02_wheeled vehicle/n02814533_123``; the sample id is that made file-safe).

    Every sample asks :data:`~vlmrobust.core.idis.IMAGENET9_QUESTION`, answers with its
    class label (``answer_type`` ``label``; ``choices`` = the nine labels of
    :mod:`vlmrobust.core.idis`). Meta: ``label``
    (``Vehicle``), ``imagenet9_class`` (the folder's class name, ``wheeled vehicle``),
    ``class_index`` (0-8), ``stem``, ``target_masks`` (one entry per image: the stored
    copy of the image's ``only_fg`` file, the foreground on black, else of its
    ``fg_mask`` file; a ``.npy`` mask becomes a PNG, 255 = target; ``[None]`` when
    there is neither or its size differs from the image's) and ``target_mask_source``
    (``only_fg``, ``fg_mask`` or None; ``target_mask_problem`` says why a mask of the
    wrong size was not used). The report counts the samples without a target mask.
    """

    benchmark = BENCHMARKS["imagenet9"]
    id_label = "file"

    def load_rows(self, spec: dict[str, Any], key: str) -> RowSource:
        folder = self.local_only_folder(
            spec, key, "the Backgrounds Challenge folder holding original/<split>/"
        )
        split = spec.get("split") or self.split
        root = folder / "original" / str(split)
        if not root.is_dir():
            raise ValueError(
                f"{key}.path: {str(folder)!r} has no original/{split}/ folder; set {key}.path "
                f"to the Backgrounds Challenge folder (bg_challenge) holding "
                f"original/{split}/00_dog ... 08_fish (or {key}.split to its split folder)"
            )
        rows: list[dict[str, Any]] = []
        for class_index, (class_folder, label) in enumerate(
            zip(IMAGENET9_FOLDERS, IMAGENET9_LABELS, strict=True)
        ):
            class_dir = root / class_folder
            if not class_dir.is_dir():
                raise ValueError(
                    f"{key}.path: class folder {str(class_dir)!r} is missing; "
                    f"original/{split}/ must hold the nine folders "
                    + ", ".join(repr(c) for c in IMAGENET9_FOLDERS)
                )
            masks = {
                kind: _images_by_stem(
                    folder / kind / str(split) / class_folder,
                    IMAGE_SUFFIXES + ((".npy",) if kind == "fg_mask" else ()),
                    key,
                )
                for kind in MASK_FOLDERS
            }
            for stem, path in _images_by_stem(class_dir, IMAGE_SUFFIXES, key).items():
                mask, mask_kind = None, None
                for kind in MASK_FOLDERS:
                    if stem in masks[kind]:
                        mask, mask_kind = masks[kind][stem], kind
                        break
                rows.append(
                    {
                        "file": f"{class_folder}/{stem}",
                        "image": str(path.relative_to(folder)),
                        "label": label,
                        "class_index": class_index,
                        "stem": stem,
                        "target_mask": str(mask.relative_to(folder)) if mask else None,
                        "target_mask_source": mask_kind,
                        "_root": str(folder),
                    }
                )
        info = {"path": str(folder), "split": split, "files": [f"original/{split}"]}
        return RowSource(rows, folder, info)

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        label = str(row.get("label") or "")
        if label not in IMAGENET9_LABELS:
            raise RowProblem(f"label {label!r} is not one of {', '.join(IMAGENET9_LABELS)}")
        class_index = int(row["class_index"])
        image = row.get("image")
        meta: dict[str, Any] = {
            "label": label,
            "imagenet9_class": IMAGENET9_CLASS_NAMES[class_index],
            "class_index": class_index,
            "stem": str(row.get("stem")),
            "target_masks": [None],
            "target_mask_source": None,
        }
        extra: dict[str, list[Any]] = {}
        mask_rel = row.get("target_mask")
        if mask_rel:
            root = Path(str(row.get("_root") or "."))
            mask_path = root / str(mask_rel)
            image_size = _image_size(root / str(image)) if image else None
            mask_value: Any
            if mask_path.suffix.lower() == ".npy":
                mask_value = _mask_from_npy(mask_path)
                mask_size: tuple[int, int] | None = mask_value.size
            else:
                mask_value, mask_size = str(mask_rel), _image_size(mask_path)
            if image_size is not None and mask_size is not None and mask_size != image_size:
                meta["target_mask_problem"] = (
                    f"{row.get('target_mask_source')} mask {mask_rel} is "
                    f"{mask_size[0]}x{mask_size[1]}, the image {image_size[0]}x{image_size[1]}"
                )
            else:
                meta["target_mask_source"] = row.get("target_mask_source")
                extra["target_masks"] = [mask_value]
        return Draft(
            IMAGENET9_QUESTION,
            label,
            "label",
            [image],
            choices=list(IMAGENET9_LABELS),
            meta=meta,
            extra_images=extra,
        )

    def report_fields(self, samples: list[Any]) -> dict[str, Any]:
        """``class_counts`` (samples per label, in class order), ``target_masks``
        (samples per mask source; ``none`` = without a target mask),
        ``samples_without_target_mask`` and ``target_mask_size_mismatches``."""
        counts = Counter(s.meta.get("label") for s in samples)
        sources = Counter(s.meta.get("target_mask_source") or "none" for s in samples)
        return {
            "class_counts": {label: counts.get(label, 0) for label in IMAGENET9_LABELS},
            "target_masks": {k: sources.get(k, 0) for k in (*MASK_FOLDERS, "none")},
            "samples_without_target_mask": sources.get("none", 0),
            "target_mask_size_mismatches": sum(
                1 for s in samples if "target_mask_problem" in s.meta
            ),
        }

    def check(self, samples: list[Any]) -> list[str]:
        warnings = []
        counts = Counter(s.meta.get("label") for s in samples)
        empty = [
            folder
            for folder, label in zip(IMAGENET9_FOLDERS, IMAGENET9_LABELS, strict=True)
            if not counts.get(label)
        ]
        if empty:
            warnings.append(
                f"no sample of class folder(s) {', '.join(repr(f) for f in empty)}: the "
                "folder is empty, every row of it was skipped, or a limit stopped before it"
            )
        without = sum(1 for s in samples if not s.meta.get("target_mask_source"))
        if without:
            warnings.append(
                f"{without} sample(s) have no target mask (no only_fg/ or fg_mask/ image of "
                "the same stem and size); meta.target_masks is [None] for them"
            )
        return warnings


# --------------------------------------------------------------------------- MathVerse

#: the concept-family labels file (:mod:`vlmrobust.core.concept_labels`) the adapter
#: looks for in a MathVerse folder when the dataset config names none
CONCEPT_LABELS_FILE = "concept_families.csv"


_CHOICES_MARK = re.compile(r"Choices\s*[:：]", re.I)


def parse_choices_block(question: str) -> list[str]:
    """The options listed after the last ``Choices:`` of a MathVerse question.

    Options are marked ``A:x`` / ``A. x`` / ``A) x`` / ``(A) x``, one a line or several
    on one line, in letter order from A; an option ends at the next marker or at the
    end of its line. Returns ``[]`` when there is no such block (or fewer than two
    options).
    """
    marks = list(_CHOICES_MARK.finditer(question))
    if not marks:
        return []
    tail = question[marks[-1].end() :]
    found: list[re.Match[str]] = []
    pos = 0
    for i in range(26):
        lt = letter(i)
        rx = re.compile(rf"(?:^|(?<=[\s,;]))(?:\({lt}\)|{lt}\s*[:：.)])[ \t]*")
        m = rx.search(tail, pos)
        if not m or (i == 0 and tail[: m.start()].strip()):
            break
        found.append(m)
        pos = m.end()
    options = []
    for k, m in enumerate(found):
        end = found[k + 1].start() if k + 1 < len(found) else len(tail)
        body = tail[m.end() : end].split("\n", 1)[0]
        options.append(body.strip().rstrip(",;").strip())
    if len(options) < 2 or not all(options):
        return []
    return options


def _metadata(row: dict[str, Any]) -> dict[str, Any]:
    value = row.get("metadata")
    if isinstance(value, str) and value.strip():
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise RowProblem(f"metadata is not a JSON object: {value[:80]!r}") from exc
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RowProblem(f"metadata is not an object: {value!r:.80}")
    return value


class MathVerse(Adapter):
    """MathVerse testmini (``AI4Math/MathVerse`` config testmini): the Idis-math task.

    Rows in the hub schema (parquet with the image embedded, or the GitHub/hub
    ``testmini.json``: a list of rows whose ``image`` is a path relative to the folder,
    e.g. ``images_version_1-4/image_685.png``). Only the problem versions in
    :attr:`VERSIONS` (:data:`~vlmrobust.core.idis.MATHVERSE_VERSIONS`: Text Dominant,
    Text Lite, Vision Intensive, Vision Dominant) are read; the others (Vision Only,
    Text Only, ...) are left out and counted per version in the report
    (``skipped_versions``). The id is ``sample_index``.

    ``question_type`` ``multi-choice`` (or ``multi_choice``): the answer is the option
    letter (``letter``); ``choices`` are the options parsed from the question's
    ``Choices:`` block (:func:`parse_choices_block`), empty when the options are only
    in the image. ``free-form`` (or ``free_form``): the answer as given, ``number`` when
    it is a plain number else ``text``. The question is kept as given (options too).

    Concept families: the dataset has none, so they come from a labels CSV (the format
    of :mod:`vlmrobust.core.concept_labels`: problem_index, concept_family, source,
    status; read and validated by its :func:`~vlmrobust.core.concept_labels.read_labels`)
    written by the concept-labelling step: the file named by the dataset's
    ``concept_labels`` key, else ``<path>/concept_families.csv``
    (:data:`CONCEPT_LABELS_FILE`) when the folder has one. Only
    ``status == "confirmed"`` rows set ``meta["concept_family"]``
    (triangle, quadrilateral, circle or 3d); every other sample has None (and gets no
    aligned/conflicting visual distractor). The report counts samples per family.

    Meta: sample_index, problem_index, problem_version, question_type, subject,
    subfield, source (from ``metadata``), question_for_eval (the row's, else the
    question; ``question_for_eval_from_question`` marks and the report counts those),
    query_wo, query_cot, concept_family.
    """

    benchmark = BENCHMARKS["mathverse"]
    id_label = "sample_index"
    #: the problem versions read (the Idis study's four)
    VERSIONS: tuple[str, ...] = MATHVERSE_VERSIONS
    exclude_files = ("testmini_text_only.json", "testmini_text-only.json")

    def load_rows(self, spec: dict[str, Any], key: str) -> RowSource:
        src = super().load_rows(spec, key)
        labels_path = self._labels_path(spec, key)
        _, rows = read_labels(labels_path) if labels_path is not None else ([], {})
        confirmed = {
            pid: row["concept_family"] for pid, row in rows.items() if row["status"] == "confirmed"
        }
        skipped: dict[str, int] = {}
        src.info["skipped_versions"] = skipped
        src.info["concept_labels"] = str(labels_path) if labels_path is not None else None
        src.rows = self._filtered(src.rows, confirmed, skipped)
        return src

    def _labels_path(self, spec: dict[str, Any], key: str) -> Path | None:
        named = spec.get("concept_labels")
        if named:
            path = Path(str(named))
            if not path.is_file():
                raise ValueError(
                    f"{key}.concept_labels: {str(path)!r} is not an existing file (the "
                    "concept-family CSV: problem_index, concept_family, source, status)"
                )
            return path
        if spec.get("path"):
            path = Path(str(spec["path"])) / CONCEPT_LABELS_FILE
            if path.is_file():
                return path
        return None

    def _filtered(
        self,
        rows: Iterable[dict[str, Any]],
        confirmed: dict[str, str],
        skipped: dict[str, int],
    ) -> Iterator[dict[str, Any]]:
        """The rows of the versions read, each with its confirmed family (or None) as
        ``_concept_family``; the others counted per version in ``skipped``."""
        for row in rows:
            version = str(row.get("problem_version") or "").strip()
            if version and version not in self.VERSIONS:
                skipped[version] = skipped.get(version, 0) + 1
                continue
            family = confirmed.get(str(row.get("problem_index") or "").strip())
            yield {**row, "_concept_family": family}

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        version = str(row.get("problem_version") or "").strip()
        if version not in self.VERSIONS:
            raise RowProblem(
                f"problem_version {version!r} is not one of the versions read "
                f"({', '.join(self.VERSIONS)})"
            )
        question = question_text(row)
        answer = answer_text(row.get("answer"))
        qtype = str(row.get("question_type") or "").strip()
        kind = qtype.lower().replace("_", "-")
        if kind == "multi-choice":
            choices = parse_choices_block(question)
            i = letter_index(answer.upper(), len(choices) or None)
            if i is None:
                span = f"A-{letter(len(choices) - 1)}" if choices else "A-Z"
                raise RowProblem(f"multi-choice answer {answer!r} is not an option letter ({span})")
            answer, answer_type = letter(i), "letter"
        elif kind == "free-form":
            choices, answer_type = [], number_or_text(answer)
        else:
            raise RowProblem(f"question_type {qtype!r} is neither 'multi-choice' nor 'free-form'")
        info = _metadata(row)
        for_eval = row.get("question_for_eval")
        meta: dict[str, Any] = {
            "sample_index": jsonable(row.get("sample_index")),
            "problem_index": jsonable(row.get("problem_index")),
            "problem_version": version,
            "question_type": qtype,
            "subject": jsonable(info.get("subject")),
            "subfield": jsonable(info.get("subfield")),
            "source": jsonable(info.get("source")),
            "question_for_eval": question if missing(for_eval) else str(for_eval),
            "query_wo": jsonable(row.get("query_wo")),
            "query_cot": jsonable(row.get("query_cot")),
            "concept_family": row.get("_concept_family"),
        }
        if missing(for_eval):
            meta["question_for_eval_from_question"] = True
        return Draft(question, answer, answer_type, [row.get("image")], choices=choices, meta=meta)

    def report_fields(self, samples: list[Any]) -> dict[str, Any]:
        """``versions`` (samples per problem version), ``concept_families`` (samples per
        confirmed family; ``unlabelled`` = None) and ``question_for_eval_from_question``
        (samples whose row had no question_for_eval). ``skipped_versions`` (rows left
        out, per version) comes with the rows."""
        versions = Counter(s.meta.get("problem_version") for s in samples)
        families = Counter(s.meta.get("concept_family") or "unlabelled" for s in samples)
        return {
            "versions": {v: versions[v] for v in self.VERSIONS if versions[v]},
            "concept_families": {f: families.get(f, 0) for f in (*CONCEPT_FAMILIES, "unlabelled")},
            "question_for_eval_from_question": sum(
                1 for s in samples if s.meta.get("question_for_eval_from_question")
            ),
        }

    def check(self, samples: list[Any]) -> list[str]:
        unlabelled = sum(1 for s in samples if not s.meta.get("concept_family"))
        if unlabelled:
            return [
                f"{unlabelled} sample(s) have no confirmed concept family (no "
                f"{CONCEPT_LABELS_FILE} or no confirmed row for the problem); they get no "
                "aligned or conflicting visual distractor"
            ]
        return []


# --------------------------------------------------------------------------- LogicVista


class LogicVista(Adapter):
    """LogicVista (448 logical-reasoning questions on images); the Idis study draws its
    irrelevant math distractors from the table-capability subset.

    Local folder only: the LogicVista repository's ``data/`` folder (GitHub
    ``Yijia-Xiao/LogicVista``, where the questions are released; the record sets no hub
    id, a hub copy such as ``Yijia-Xiao/LogicVista`` is not read), i.e. ``<path>/dataset.json`` (an object keyed by id: imagename, question,
    answer, reasoning, skill[], broad_capability[], specific_capability[], ...) and
    ``<path>/images/<imagename>``; ``path`` may also be the repository root holding
    ``data/``. The id is the json key (``v1_291``), injected into each row as ``id``.

    Answers: one letter -> ``letter``; several (``"A, C"``) -> ``list`` with the
    canonical answer ``"A, C"`` (sorted, comma + space); a number (one released row,
    options numbered 1-5) -> ``number``, listed in the report
    (``numbered_option_answers``). ``choices`` stay empty: the options are in the image
    or the question. A row without question or answer is a bad row (one released row;
    use ``on_bad_row: skip``). Meta: skill, broad_capability, specific_capability (lists;
    ``"table"`` marks the pool), reasoning, imagename, imagesource, sourcelink.
    """

    benchmark = BENCHMARKS["logicvista"]
    id_label = "id"

    def load_rows(self, spec: dict[str, Any], key: str) -> RowSource:
        folder = self.local_only_folder(spec, key, "LogicVista's data/: dataset.json + images/")
        path = folder / "dataset.json"
        if not path.is_file() and (folder / "data" / "dataset.json").is_file():
            folder = folder / "data"
            path = folder / "dataset.json"
        if not path.is_file():
            raise ValueError(
                f"{key}.path: {str(folder)!r} has no dataset.json; set it to LogicVista's "
                "data/ folder (dataset.json + images/)"
            )
        try:
            obj = json.loads(read_utf8(path))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc.msg})") from exc
        if not isinstance(obj, dict) or not all(isinstance(v, dict) for v in obj.values()):
            raise ValueError(f"{path}: expected an object of rows keyed by id")
        rows = [{**row, "id": str(qid)} for qid, row in obj.items()]
        return RowSource(rows, folder, {"path": str(folder), "files": ["dataset.json"]})

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        question = question_text(row)
        answer = answer_text(row.get("answer"))
        letters = option_letters(answer)
        meta: dict[str, Any] = {}
        if letters is not None and len(letters) == 1:
            answer, answer_type = letters[0], "letter"
        elif letters is not None:
            answer, answer_type = ", ".join(letters), "list"
        elif re.fullmatch(r"\d+", answer):
            answer_type = "number"
            meta["numbered_option_answer"] = True
        else:
            raise RowProblem(
                f"answer {answer!r} is neither option letters ('B' or 'A, C') nor an option number"
            )
        imagename = row.get("imagename")
        if missing(imagename):
            raise RowProblem("imagename is missing")
        sourcelink = row.get("sourcelink", row.get("sourceli,nk"))
        meta.update(
            {
                "skill": jsonable(row.get("skill") or []),
                "broad_capability": jsonable(row.get("broad_capability") or []),
                "specific_capability": jsonable(row.get("specific_capability") or []),
                "reasoning": jsonable(row.get("reasoning")),
                "imagename": str(imagename),
                "imagesource": jsonable(row.get("imagesource")),
                "sourcelink": jsonable(sourcelink),
            }
        )
        image = str(Path("images") / str(imagename))
        return Draft(question, answer, answer_type, [image], meta=meta)

    def report_fields(self, samples: list[Any]) -> dict[str, Any]:
        """``numbered_option_answers`` (ids answered with an option number) and
        ``specific_capabilities`` (samples per specific capability)."""
        caps = Counter(c for s in samples for c in s.meta.get("specific_capability") or [])
        return {
            "numbered_option_answers": [
                str(s.meta["source_id"]) for s in samples if s.meta.get("numbered_option_answer")
            ],
            "specific_capabilities": dict(sorted(caps.items())),
        }


# --------------------------------------------------------------------------- Waterbirds

#: the split names of the config and the codes of metadata.csv's ``split`` column
WATERBIRDS_SPLITS = {"train": 0, "val": 1, "test": 2}
_WB_COLUMNS = ("img_id", "img_filename", "y", "split", "place")
_PLACES = ("land", "water")


def _code(row: dict[str, Any], column: str, allowed: tuple[int, ...]) -> int:
    value = str(row.get(column) if row.get(column) is not None else "").strip()
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not number.is_integer() or int(number) not in allowed:
        raise RowProblem(f"{column} {value!r} is not one of {', '.join(str(a) for a in allowed)}")
    return int(number)


class Waterbirds(Adapter):
    """Waterbirds (the group-DRO release: CUB birds pasted on Places backgrounds).

    Local folder only: the unpacked release, ``<path>/metadata.csv`` (img_id,
    img_filename, y: 1 waterbird / 0 landbird, split: 0 train / 1 val / 2 test, place:
    0 land / 1 water, place_filename) and the images at ``<path>/<img_filename>``.
    ``split`` (``train`` / ``val`` / ``test``, default ``test``) keeps the rows of that
    split code. The id is ``img_id``.

    Question :data:`~vlmrobust.core.idis.WATERBIRDS_QUESTION`; answer ``Waterbird`` or
    ``Landbird`` (``label``; ``choices`` = [Landbird, Waterbird]). Meta: y, place,
    place_name (land / water), group (``aligned`` when the bird type matches the
    background, y == place, else ``conflicting``), img_filename, place_filename. A row
    whose y, place or split is not a valid code, or without img_filename, is a bad row.
    """

    benchmark = BENCHMARKS["waterbirds"]
    id_label = "img_id"

    def load_rows(self, spec: dict[str, Any], key: str) -> RowSource:
        folder = self.local_only_folder(spec, key, "the Waterbirds folder holding metadata.csv")
        split = spec.get("split") or self.split
        if split not in WATERBIRDS_SPLITS:
            raise ValueError(f"{key}.split: {split!r} is not one of {', '.join(WATERBIRDS_SPLITS)}")
        path = folder / "metadata.csv"
        if not path.is_file():
            raise ValueError(
                f"{key}.path: {str(folder)!r} has no metadata.csv; set it to the unpacked "
                "Waterbirds folder (metadata.csv + the bird image folders)"
            )
        with io.StringIO(read_utf8(path), newline="") as fh:
            reader = csv.DictReader(fh)
            absent = [c for c in _WB_COLUMNS if c not in (reader.fieldnames or [])]
            if absent:
                raise ValueError(
                    f"{path}: missing column(s) {', '.join(absent)}; expected "
                    + ", ".join(_WB_COLUMNS)
                )
            all_rows = list(reader)
        code = WATERBIRDS_SPLITS[split]
        rows = []
        for row in all_rows:
            try:
                if _code(row, "split", (0, 1, 2)) != code:
                    continue
            except RowProblem:
                pass  # a bad split code: the conversion names it
            rows.append(row)
        info = {"path": str(folder), "split": split, "split_code": code, "files": ["metadata.csv"]}
        return RowSource(rows, folder, info)

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        _code(row, "split", (0, 1, 2))
        y = _code(row, "y", (0, 1))
        place = _code(row, "place", (0, 1))
        filename = row.get("img_filename")
        if missing(filename):
            raise RowProblem("img_filename is missing")
        meta = {
            "y": y,
            "place": place,
            "place_name": _PLACES[place],
            "group": "aligned" if y == place else "conflicting",
            "img_filename": str(filename),
            "place_filename": jsonable(row.get("place_filename")),
        }
        return Draft(
            WATERBIRDS_QUESTION,
            WATERBIRDS_LABELS[y],
            "label",
            [str(filename)],
            choices=list(WATERBIRDS_LABELS),
            meta=meta,
        )

    def report_fields(self, samples: list[Any]) -> dict[str, Any]:
        """``groups`` (aligned / conflicting) and ``label_place`` (samples per label and
        background, e.g. ``Waterbird/land``)."""
        groups = Counter(s.meta.get("group") for s in samples)
        cells = Counter(f"{s.answer}/{s.meta.get('place_name')}" for s in samples)
        return {
            "groups": {g: groups.get(g, 0) for g in ("aligned", "conflicting")},
            "label_place": dict(sorted(cells.items())),
        }
