"""The ``idis-release`` perturbation: the released Idis images as conditions of the base data.

The Idis benchmark is published as already-edited images (1024x1024 for
Idis-perception) and, for the textual distractors of Idis-math, as rewritten questions.
This perturbation reads such a download and turns every released item into a *variant
of the base sample it was made from*, with the variant ids and params every Idis
condition uses, so that each distracted answer pairs with the clean answer of the same
sample (the clean condition of the same dataset, ``perturbation: none``). Nothing is
drawn at random and no image is edited: the variants point at the released files, which
the stage checks (they must decode) and hashes.

Base datasets
=============

* Idis-perception pairs with the ImageNet-9 ``original`` dataset. The adapter records
  ``meta["stem"]`` (the image's file name without extension, e.g. ``n02085620_1234``),
  ``meta["imagenet9_class"]`` (``"wheeled vehicle"``) and ``meta["label"]``
  (``"Vehicle"``). A released file pairs with the sample whose stem it carries and
  whose class (ImageNet-9 class or label) its class folder names.
* Idis-math pairs with MathVerse testmini. The adapter records ``meta["sample_index"]``,
  ``meta["problem_index"]`` and ``meta["problem_version"]``. A row of a released
  ``meta.jsonl`` pairs with the sample of the same ``sample_index`` (``pair_on:
  sample_index``) or of the same ``problem_index`` *and* ``problem_version``
  (``pair_on: problem_index+problem_version``; versions compare without regard to case,
  spaces, ``_`` or ``-``). Numeric ids compare as numbers (``"007"`` = ``7``).

Expected release layout
=======================

``root`` is the downloaded Idis folder, the one holding ``Idis-perception/`` and
``Idis-math/`` (``root`` may also be one of these two folders itself). Folder names
compare without regard to case, ``_`` or ``-``; images may be ``.png``, ``.jpg``,
``.jpeg``, ``.webp`` or ``.bmp``.

Idis-perception::

    Idis-perception/visual_distractor/<class>/<n>/<aligned|conflicting|irrelevant>/<stem>.png
    Idis-perception/textual_distractor/<class>/<n>/conflicting/<stem>[_<typo class>].png

* ``<class>`` is the ImageNet-9 class of the base image; ``dog``, ``00_dog``,
  ``wheeled vehicle``, ``02_wheeled_vehicle`` and ``Wheeled-Vehicle`` all name the same
  class (a leading number is dropped, ``_``/``-`` read as spaces, case ignored).
* ``<n>`` is the number of distractors, written ``3`` or ``n3``.
* ``textual_distractor`` holds the *typographic* images (class names rendered into the
  image; the dataset card lists only ``n = 4`` and the folder ``conflicting``, but any
  name of that third folder is read). A file pairs with the sample whose stem
  its own stem starts with (the longest such stem, followed by ``_``, ``-`` or a
  space); what follows names the rendered class (``<stem>_bird.png`` → ``bird``,
  normalised as a class folder is). A file named exactly ``<stem>.png`` has no known
  rendered class (``typo_class`` None).
* A visual file must be named exactly ``<stem>`` (any image extension).

Idis-math::

    Idis-math/visual_distractor/<aligned|conflicting|irrelevant>/{meta.jsonl, n1/, n2/, n3/, n4/}
    Idis-math/typographic/<handwritten|mathwriting>/{meta.jsonl, n1/, ..., n4/}
    Idis-math/textual_distractor/{meta.jsonl, n1/, ..., n4/}

Each ``meta.jsonl`` row describes one released item. A ``meta.jsonl`` may also sit
inside an ``n<k>/`` folder (its rows then have ``n = k``). The fields read:

* ``id_field`` (default ``sample_index``; with ``pair_on:
  problem_index+problem_version`` default ``problem_index``) and ``version_field``
  (default ``problem_version``, that pairing only): the MathVerse ids;
* ``image_field`` (default ``image``): the released image's file name or path, read
  relative to the ``meta.jsonl``'s folder, then to the group folder, then to its
  ``n<k>/`` folders. Required for visual and typographic; optional for textual;
* ``question_field`` (default ``question``): textual only, the question with the
  inserted sentences;
* ``count_field`` (default ``n``): the number of distractors, when the row has it.

The number of distractors of a row comes from (all that are available must agree): the
``n<k>/`` folder of its ``meta.jsonl``; an ``n<k>`` folder in its image path; the
``count_field``. When none is available, every ``n<k>/`` folder holding a file of the
image's name gives one item (visual / typographic; a textual row must be found in
exactly one). The field names are not fixed by the release: when a needed field is not
in the first row of a ``meta.jsonl``, the error lists the fields that row has, so the
right names can be set in the condition.

Configuration (``conditions.<name>``, ``perturbation: idis-release``)
=====================================================================

* ``root`` (required): the downloaded Idis folder (relative paths are taken from the
  directory the workflow runs in).
* ``task`` (required): ``perception`` or ``math``.
* ``kind`` (required): ``visual`` | ``typographic`` | ``textual`` (textual: math only).
* ``semantics``: visual: a list from ``aligned``, ``conflicting``, ``irrelevant``
  (default all three); math typographic: from ``handwritten``, ``mathwriting``
  (default both); null for perception typographic and math textual (their semantics is
  ``typographic`` / ``textual``).
* ``counts``: the numbers of distractors to read; default (null) ``[1, 2, 3, 4]``, for
  perception typographic ``[4]`` (the only count the release has).
* ``pair_on`` (math): ``sample_index`` (default) or ``problem_index+problem_version``.
* ``id_field``, ``version_field``, ``image_field``, ``question_field``, ``count_field``
  (math): the ``meta.jsonl`` field names above.
* ``on_missing``: ``skip`` (default): a (semantics, n) of a base sample with no released
  item is an :class:`~vlmrobust.perturb.variants.Excluded` variant with reason
  ``not-released`` (counted in ``report.json``); ``error``: fail, naming the sample and
  the expected file.

Variants
========

With ``<sid>`` the base sample's id (params common to all: ``kind``, ``semantics``,
``n``, ``source: "idis-release"``):

* visual: ``<sid>__<semantics>-n<k>``; images = the released file; perception adds
  ``distractors`` (None: the release does not name the objects) and
  ``distractor_classes`` (aligned: ``[label]``; irrelevant: ``["irrelevant"]``;
  conflicting: None, the release does not name the other class);
* perception typographic: ``<sid>__typo-<class slug>-n<k>`` (``<sid>__typo-n<k>`` when
  the file does not name the class), ``semantics: "typographic"``,
  ``typo_class`` = the rendered class (e.g. ``"wheeled vehicle"``, slug
  ``wheeled-vehicle``) or None;
* math typographic: ``<sid>__<handwritten|mathwriting>-n<k>``;
* math textual: ``<sid>__textual-n<k>``, ``semantics: "textual"``; the question is the
  released one, the images are the sample's own (the distractor is in the text; a
  released image of the row is recorded as ``release_image``). A released question equal
  to the sample's question is Excluded with reason ``question-unchanged`` (most likely
  ``question_field`` names the original question).

Perception variants record ``release_file`` (the file, relative to ``root``); math
variants ``release_row`` (``<meta.jsonl relative to root>:<line>``), ``release_file``
(or None) and ``release_meta`` (the row, without the question field).

Report
======

``setup`` indexes the release once and stores, under ``report_extra["release"]`` of the
spec (merged into ``report.json`` by the stage), what it found: ``released`` (items in
scope: the selected semantics and counts), ``matched`` / ``unmatched`` (paired with a
base sample of this dataset or not; a subset of the base data leaves many unmatched) with
``unmatched_examples``, ``duplicates`` (an item listed twice, e.g. by two rows naming
the same file: read once), ``matched_by`` (``<semantics>-n<k>`` → items), ``out_of_scope``
(other semantics or counts), ``unrecognised`` files (not where the layout puts them, with
examples) and, for math, ``rows``, ``missing_files`` (rows whose image was not found,
with examples) and ``unreferenced_files`` (images in ``n<k>/`` no row names). When the
release has items in scope but not one pairs with a sample, or has no item in scope at
all, ``setup`` fails with examples of both sides' keys: a wrong ``root``, ``task`` or
field name, not a result.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..core.io import iter_jsonl
from ..core.records import Sample
from .idis import IMAGE_SUFFIXES, object_slug
from .variants import Excluded, Perturbation, VariantPlan, _key, register

__all__ = [
    "normalise_class",
]

TASKS = ("perception", "math")
KINDS = ("visual", "typographic", "textual")
VISUAL_SEMANTICS = ("aligned", "conflicting", "irrelevant")
MATH_TYPO_SOURCES = ("handwritten", "mathwriting")
PAIR_ON = ("sample_index", "problem_index+problem_version")
ON_MISSING = ("skip", "error")

_EXAMPLES = 10

_TASK_DIRS = {"perception": "Idis-perception", "math": "Idis-math"}
# folder names of each (task, kind), the first that exists is read
_KIND_DIRS = {
    ("perception", "visual"): ("visual_distractor",),
    ("perception", "typographic"): ("textual_distractor", "typographic_distractor", "typographic"),
    ("math", "visual"): ("visual_distractor",),
    ("math", "typographic"): ("typographic", "typographic_distractor"),
    ("math", "textual"): ("textual_distractor",),
}


# ---------------------------------------------------------------- names


def _fold(name: str) -> str:
    """A folder name compared without regard to case, ``_``, ``-`` or spaces."""
    return re.sub(r"[\s_-]+", "", name).lower()


def normalise_class(name: str) -> str:
    """An ImageNet-9 class name as folders and file names write it, normalised:
    ``"02_wheeled_vehicle"`` → ``"wheeled vehicle"``, ``"Dog"`` → ``"dog"``."""
    text = re.sub(r"^\d+[\s_.-]*", "", str(name).strip())
    return re.sub(r"[\s_-]+", " ", text).strip().lower()


def _norm_id(value: Any) -> str:
    """A MathVerse id compared as text, numbers as numbers (``"007"`` = ``7`` = ``7.0``)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    return str(int(text)) if text.isdigit() else text


def _norm_version(value: Any) -> str:
    return _fold(str(value))


def _parse_n(name: str, prefix_required: bool = False) -> int | None:
    m = re.fullmatch(r"n(\d+)" if prefix_required else r"n?(\d+)", name.strip().lower())
    return int(m.group(1)) if m else None


def _child(parent: Path, names: tuple[str, ...]) -> Path | None:
    """The first directory of ``parent`` whose folded name is one of ``names``'."""
    if not parent.is_dir():
        return None
    children = {_fold(p.name): p for p in sorted(parent.iterdir()) if p.is_dir()}
    for name in names:
        if _fold(name) in children:
            return children[_fold(name)]
    return None


def _is_image(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES


# ---------------------------------------------------------------- prepare


def _semantics_allowed(task: str, kind: str) -> tuple[str, ...]:
    """The released semantics groups of (task, kind); () when the kind has none."""
    if kind == "visual":
        return VISUAL_SEMANTICS
    return MATH_TYPO_SOURCES if (task, kind) == ("math", "typographic") else ()


def _check_semantics(condition: str, out: dict[str, Any]) -> None:
    """``semantics`` against the groups its task and kind release (null = all of them)."""
    task, kind = out["task"], out["kind"]
    sem_allowed = _semantics_allowed(task, kind)
    sems = out["semantics"]
    if not sem_allowed:
        if sems is not None:
            fixed = "typographic" if kind == "typographic" else "textual"
            raise ValueError(
                f"{_key(condition, 'semantics')}: not used with task {task!r}, kind {kind!r} "
                f"(the semantics is {fixed!r}); leave it out"
            )
        return
    sems = list(sem_allowed) if sems is None else sems
    bad = [s for s in sems if s not in sem_allowed]
    if bad:
        raise ValueError(
            f"{_key(condition, 'semantics')}: {bad[0]!r} is not one of "
            f"{', '.join(sem_allowed)} (task {task!r}, kind {kind!r})"
        )
    out["semantics"] = list(sems)


def _prepare(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the schema validated it (keys, enums, types, the
    defaults); checked and filled here is what depends on other keys: ``root`` is not
    blank, the kind is released for the task, the semantics are the kind's groups, and
    the defaults of ``semantics``, ``counts`` and ``id_field`` that depend on the task,
    kind and ``pair_on``."""
    out = dict(spec)
    if not out["root"].strip():
        raise ValueError(
            f"{_key(condition, 'root')}: expected the path of the downloaded Idis folder, "
            f"got {out['root']!r}"
        )
    task, kind = out["task"], out["kind"]
    if (task, kind) not in _KIND_DIRS:
        raise ValueError(
            f"{_key(condition, 'kind')}: {kind!r} is not released for task {task!r} "
            "(Idis-perception: visual, typographic; Idis-math: visual, typographic, textual)"
        )
    _check_semantics(condition, out)
    counts = out["counts"]
    if counts is None:
        counts = [4] if (task, kind) == ("perception", "typographic") else [1, 2, 3, 4]
    out["counts"] = [int(c) for c in counts]
    if out["id_field"] is None:
        out["id_field"] = "sample_index" if out["pair_on"] == "sample_index" else "problem_index"
    return out


# ---------------------------------------------------------------- the index


@dataclass
class _Item:
    """One released item: a file (and for textual a question) of one (semantics, n)."""

    semantics: str
    n: int
    path: Path | None
    where: str  # the file, or "<meta.jsonl>:<line>", relative to root
    typo_class: str | None = None
    question: str | None = None
    row: dict[str, Any] | None = None


@dataclass
class _Scan:
    """What walking the release found (before pairing)."""

    # (pairing key, item); perception pairs while scanning: the key is the sample id or None
    items: list[tuple[Any, _Item]] = field(default_factory=list)
    unrecognised: list[str] = field(default_factory=list)
    out_of_scope: int = 0
    rows: int = 0
    missing_files: list[str] = field(default_factory=list)
    unreferenced: list[str] = field(default_factory=list)
    class_dirs: dict[str, str] = field(default_factory=dict)  # class → folder name
    n_dirs: dict[int, str] = field(default_factory=dict)  # n → folder name (perception)
    groups: dict[str, Path] = field(default_factory=dict)  # semantics → folder (math)


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _task_dir(condition: str, root: Path, task: str) -> Path:
    if not root.is_dir():
        raise ValueError(f"{_key(condition, 'root')}: {root} is not a folder")
    name = _TASK_DIRS[task]
    if _fold(root.name) == _fold(name):
        return root
    found = _child(root, (name,))
    if found is None:
        raise ValueError(
            f"{_key(condition, 'root')}: {root} has no {name}/ folder (root is the "
            f"downloaded Idis folder, holding Idis-perception/ and Idis-math/)"
        )
    return found


def _kind_dir(condition: str, root: Path, spec: dict[str, Any]) -> Path:
    task_dir = _task_dir(condition, root, spec["task"])
    names = _KIND_DIRS[(spec["task"], spec["kind"])]
    found = _child(task_dir, names)
    if found is None:
        raise ValueError(
            f"conditions.{condition}: {task_dir} has no {' or '.join(n + '/' for n in names)} "
            f"folder (task {spec['task']!r}, kind {spec['kind']!r})"
        )
    return found


def _scan_perception(kind_dir: Path, root: Path, spec: dict[str, Any]) -> tuple[_Scan, list]:
    """Walk ``<class>/<n>/<semantics>/<file>``; return the scan and the raw files
    ``(class, n, semantics, file stem, path)`` in scope (paired later)."""
    scan = _Scan()
    files = []
    typographic = spec["kind"] == "typographic"
    for path in sorted(kind_dir.rglob("*")):
        if not _is_image(path):
            continue
        parts = path.relative_to(kind_dir).parts
        n = _parse_n(parts[1]) if len(parts) == 4 else None
        if n is None:
            scan.unrecognised.append(_rel(path, root))
            continue
        cls, sem = normalise_class(parts[0]), parts[2].strip().lower()
        scan.class_dirs.setdefault(cls, parts[0])
        scan.n_dirs.setdefault(n, parts[1])
        if n not in spec["counts"] or (not typographic and sem not in spec["semantics"]):
            scan.out_of_scope += 1
            continue
        files.append((cls, n, sem, path.stem, path))
    return scan, files


def _sample_classes(sample: Sample) -> set[str]:
    meta = sample.meta
    return {normalise_class(meta[k]) for k in ("imagenet9_class", "label") if meta.get(k)} - {""}


def _pair_perception(
    condition: str, samples: list[Sample], files: list, scan: _Scan, root: Path, spec: dict
) -> None:
    # stem -> (sample, its normalised classes): the classes once per sample, not per file
    by_stem: dict[str, list[tuple[Sample, set[str]]]] = {}
    for sample in samples:
        stem = sample.meta.get("stem")
        if not stem:
            raise ValueError(
                f"sample {sample.sample_id!r}: condition {condition!r} pairs released Idis "
                "files on the ImageNet-9 file stem, but the sample has no meta.stem (the "
                "imagenet9 adapter provides it)"
            )
        by_stem.setdefault(str(stem), []).append((sample, _sample_classes(sample)))
    typographic = spec["kind"] == "typographic"

    def owner(cls: str, stem: str, path: Path) -> Sample | None:
        hits = [s for s, classes in by_stem.get(stem, []) if not classes or cls in classes]
        if len(hits) > 1:
            raise ValueError(
                f"released file {path} pairs with several samples "
                f"({', '.join(s.sample_id for s in hits)}): their stems and classes agree"
            )
        return hits[0] if hits else None

    for cls, n, sem, fstem, path in files:
        found, typo = None, None
        if typographic:
            # the longest sample stem the file stem starts with; the rest names the class
            cuts = [len(fstem)] + [m.start() for m in re.finditer(r"[\s_-]", fstem)][::-1]
            for cut in sorted(set(cuts), reverse=True):
                found = owner(cls, fstem[:cut], path)
                if found is not None:
                    rest = fstem[cut + 1 :]
                    typo = (normalise_class(rest) or rest.strip().lower()) if rest else None
                    break
        else:
            found = owner(cls, fstem, path)
        item = _Item(
            semantics="typographic" if typographic else sem,
            n=n,
            path=path,
            where=_rel(path, root),
            typo_class=typo,
        )
        scan.items.append((found.sample_id if found else None, item))


def _read_meta(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """The rows of a ``meta.jsonl`` with their line numbers (``release_row`` names them)."""
    rows = list(iter_jsonl(path))
    for lineno, row in rows:
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{lineno}: expected a JSON object, got {row!r}")
    return rows


def _math_groups(condition: str, kind_dir: Path, spec: dict[str, Any]) -> dict[str, Path]:
    if spec["kind"] == "textual":
        return {"textual": kind_dir}
    groups = {}
    for sem in spec["semantics"]:
        found = _child(kind_dir, (sem,))
        if found is None:
            raise ValueError(
                f"conditions.{condition}: {kind_dir} has no {sem}/ folder (semantics {sem!r})"
            )
        groups[sem] = found
    return groups


def _n_dirs(group: Path) -> dict[int, Path]:
    out = {}
    for p in sorted(group.iterdir()):
        n = _parse_n(p.name, prefix_required=True) if p.is_dir() else None
        if n is not None:
            out[n] = p
    return out


def _scan_math(condition: str, kind_dir: Path, root: Path, spec: dict[str, Any]) -> _Scan:
    scan = _Scan()
    textual = spec["kind"] == "textual"
    needed = [("id_field", spec["id_field"])]
    if spec["pair_on"] != "sample_index":
        needed.append(("version_field", spec["version_field"]))
    needed.append(
        ("question_field", spec["question_field"])
        if textual
        else ("image_field", spec["image_field"])
    )
    scan.groups = _math_groups(condition, kind_dir, spec)
    for sem, group in scan.groups.items():
        ndirs = _n_dirs(group)
        metas = [(group / "meta.jsonl", None)] + [(d / "meta.jsonl", n) for n, d in ndirs.items()]
        metas = [(m, n) for m, n in metas if m.is_file()]
        if not metas:
            raise ValueError(
                f"conditions.{condition}: no meta.jsonl in {group} (expected "
                f"{group / 'meta.jsonl'} or {group}/n<k>/meta.jsonl)"
            )
        referenced: set[Path] = set()
        for meta, meta_n in metas:
            rows = _read_meta(meta)
            if rows:
                first = rows[0][1]
                for key, name in needed:
                    if name not in first:
                        raise ValueError(
                            f"{meta}: field {name!r} ({_key(condition, key)}) is not in the "
                            f"first row; the fields found there: "
                            f"{', '.join(sorted(map(str, first))) or '(none)'}. Set "
                            f"{_key(condition, key)} to the field that holds it"
                        )
            for lineno, row in rows:
                scan.rows += 1
                where = f"{_rel(meta, root)}:{lineno}"
                for key, name in needed:
                    if name not in row:
                        raise ValueError(
                            f"{meta}:{lineno}: field {name!r} ({_key(condition, key)}) is "
                            f"missing; the fields of this row: {', '.join(sorted(map(str, row)))}"
                        )
                if spec["pair_on"] == "sample_index":
                    pair_key: Any = _norm_id(row[spec["id_field"]])
                else:
                    pair_key = (
                        _norm_id(row[spec["id_field"]]),
                        _norm_version(row[spec["version_field"]]),
                    )
                for item in _math_row_items(
                    condition, spec, sem, group, meta, meta_n, row, ndirs, where, root, scan
                ):
                    if item.path is not None:
                        referenced.add(item.path.resolve())
                    if item.n not in spec["counts"]:
                        scan.out_of_scope += 1
                        continue
                    scan.items.append((pair_key, item))
        if not textual:
            for d in ndirs.values():
                for p in sorted(d.iterdir()):
                    if _is_image(p) and p.resolve() not in referenced:
                        scan.unreferenced.append(_rel(p, root))
    return scan


def _math_row_items(
    condition: str,
    spec: dict[str, Any],
    sem: str,
    group: Path,
    meta: Path,
    meta_n: int | None,
    row: dict[str, Any],
    ndirs: dict[int, Path],
    where: str,
    root: Path,
    scan: _Scan,
) -> list[_Item]:
    """The items of one ``meta.jsonl`` row (one per count it resolves to)."""
    textual = spec["kind"] == "textual"
    image = _row_image(condition, spec, meta, row, where)
    known = _row_counts(condition, spec, meta_n, image, row, where)
    question = str(row[spec["question_field"]]) if textual else None
    kept = {k: v for k, v in row.items() if not (textual and k == spec["question_field"])}

    def item(n: int, path: Path | None) -> _Item:
        return _Item(sem, n, path, where, question=question, row=kept)

    if known:
        n = next(iter(known.values()))
        if image is None:
            return [item(n, None)]
        # the n<k>/ folder of this count first, then beside the meta.jsonl, then the group
        cands = ([ndirs[n] / image] if n in ndirs else []) + [meta.parent / image, group / image]
        for cand in cands:
            if cand.is_file():
                return [item(n, cand)]
        if textual:  # the image is not needed: the question is the distractor
            return [item(n, None)]
        scan.missing_files.append(f"{where}: {image}")
        return []
    if image is None:
        raise ValueError(
            f"{where}: cannot tell the number of distractors of this row: it has no "
            f"{spec['count_field']!r} field ({_key(condition, 'count_field')}), no image "
            f"path with an n<k>/ folder, and its meta.jsonl is not inside an n<k>/ folder"
        )
    hits = [(n, d / image) for n, d in ndirs.items() if (d / image).is_file()]
    if not hits:
        if (meta.parent / image).is_file():
            raise ValueError(
                f"{where}: cannot tell the number of distractors of {image!r}: it is not "
                f"in an n<k>/ folder and the row has no {spec['count_field']!r} field "
                f"({_key(condition, 'count_field')})"
            )
        scan.missing_files.append(f"{where}: {image}")
        return []
    if textual and len(hits) > 1:
        raise ValueError(
            f"{where}: cannot tell the number of inserted sentences: {image!r} is in "
            f"{', '.join(ndirs[n].name for n, _ in hits)}/ and the row has no "
            f"{spec['count_field']!r} field ({_key(condition, 'count_field')})"
        )
    return [item(n, p) for n, p in hits]


def _row_image(
    condition: str, spec: dict[str, Any], meta: Path, row: dict[str, Any], where: str
) -> str | None:
    """The image file name a ``meta.jsonl`` row gives (a one-element list taken as its
    element), or None when it gives none or a blank one."""
    image = row.get(spec["image_field"])
    if isinstance(image, list) and len(image) == 1:
        image = image[0]
    if image is not None and not isinstance(image, str):
        raise ValueError(
            f"{meta}:{where.rsplit(':', 1)[1]}: field {spec['image_field']!r} "
            f"({_key(condition, 'image_field')}) is {image!r}, not a file name"
        )
    if image is not None and not image.strip():
        image = None
    return image


def _row_counts(
    condition: str,
    spec: dict[str, Any],
    meta_n: int | None,
    image: str | None,
    row: dict[str, Any],
    where: str,
) -> dict[str, int]:
    """What tells a row's number of distractors -> the number it tells: the n<k>/ folder
    of its meta.jsonl, its image path and its count field; when they disagree, an
    error."""
    known: dict[str, int] = {}
    if meta_n is not None:
        known["the n<k>/ folder of its meta.jsonl"] = meta_n
    if image is not None:
        for part in PurePosixPath(image.replace("\\", "/")).parts[:-1]:
            k = _parse_n(part, prefix_required=True)
            if k is not None:
                known["its image path"] = k
    raw = row.get(spec["count_field"])
    if raw is not None:
        try:
            known[f"field {spec['count_field']!r}"] = int(str(raw).strip())
        except ValueError:
            raise ValueError(
                f"{where}: field {spec['count_field']!r} ({_key(condition, 'count_field')}) "
                f"is {raw!r}, not an integer"
            ) from None
    if len(set(known.values())) > 1:
        raise ValueError(
            f"{where}: the number of distractors disagrees: "
            + ", ".join(f"{k} says {v}" for k, v in known.items())
        )
    return known


def _sample_key(condition: str, sample: Sample, spec: dict[str, Any]) -> Any:
    meta = sample.meta
    fields = (
        ["sample_index"]
        if spec["pair_on"] == "sample_index"
        else ["problem_index", "problem_version"]
    )
    missing = [f for f in fields if meta.get(f) is None]
    if missing:
        raise ValueError(
            f"sample {sample.sample_id!r}: condition {condition!r} pairs released Idis-math "
            f"rows on {spec['pair_on']}, but the sample has no meta.{missing[0]} (the "
            "mathverse adapter provides it)"
        )
    if spec["pair_on"] == "sample_index":
        return _norm_id(meta["sample_index"])
    return _norm_id(meta["problem_index"]), _norm_version(meta["problem_version"])


def _setup(samples: list[Sample], condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Scan the release once, pair its items with the samples and check that some
    pair; the spec gains the items of each sample and the release's ``report_extra``."""
    root = Path(spec["root"])
    kind_dir = _kind_dir(condition, root, spec)
    scan, items, sample_keys, released_keys = _paired_items(
        condition, samples, kind_dir, root, spec
    )
    by_sample, unmatched, matched_by, duplicates = _items_by_sample(items)
    matched = sum(matched_by.values())
    if not items and samples:
        raise ValueError(_nothing_released(condition, kind_dir, spec, scan))
    if items and samples and not matched:
        release_side = (
            sorted({Path(w).stem for w in unmatched})
            if spec["task"] == "perception"
            else released_keys
        )
        raise ValueError(
            f"conditions.{condition}: none of the {len(items)} released items under "
            f"{kind_dir} pairs with a sample of this dataset (check root, task and the "
            f"field names); released keys e.g. {', '.join(release_side[:3])}; sample keys "
            f"e.g. {', '.join(sample_keys[:3])}"
        )
    report: dict[str, Any] = {
        "root": str(root),
        "folder": _rel(kind_dir, root),
        "released": len(items),
        "matched": matched,
        "unmatched": len(unmatched),
        "unmatched_examples": unmatched[:_EXAMPLES],
        "duplicates": duplicates,
        "matched_by": dict(sorted(matched_by.items())),
        "samples_with_release": len(by_sample),
        "out_of_scope": scan.out_of_scope,
        "unrecognised": len(scan.unrecognised),
        "unrecognised_examples": scan.unrecognised[:_EXAMPLES],
    }
    if spec["task"] == "math":
        report.update(
            rows=scan.rows,
            missing_files=len(scan.missing_files),
            missing_examples=scan.missing_files[:_EXAMPLES],
            unreferenced_files=len(scan.unreferenced),
            unreferenced_examples=scan.unreferenced[:_EXAMPLES],
        )
    return {
        **spec,
        "report_extra": {"release": report},
        "_by_sample": by_sample,
        "_kind_dir": kind_dir,
        "_class_dirs": scan.class_dirs,
        "_n_dirs": scan.n_dirs,
        "_groups": scan.groups,
    }


def _paired_items(
    condition: str, samples: list[Sample], kind_dir: Path, root: Path, spec: dict[str, Any]
) -> tuple[_Scan, list[tuple[str | None, _Item]], list[str], list[str]]:
    """The scan of the release, its items with the id of the sample each pairs with
    (or None), the samples' pairing keys and the release's (math; for the error that
    nothing pairs)."""
    if spec["task"] == "perception":
        scan, files = _scan_perception(kind_dir, root, spec)
        _pair_perception(condition, samples, files, scan, root, spec)
        sample_keys = [str(s.meta.get("stem")) for s in samples]
        return scan, scan.items, sample_keys, []
    scan = _scan_math(condition, kind_dir, root, spec)
    key_to_sample: dict[Any, str] = {}
    for sample in samples:
        key = _sample_key(condition, sample, spec)
        if key in key_to_sample:
            raise ValueError(
                f"samples {key_to_sample[key]!r} and {sample.sample_id!r} have the same "
                f"{spec['pair_on']} ({key!r}): conditions.{condition}.pair_on cannot "
                "pair released rows with one sample"
            )
        key_to_sample[key] = sample.sample_id
    items = [(key_to_sample.get(key), it) for key, it in scan.items]
    sample_keys = [repr(k) for k in key_to_sample]
    released_keys = sorted({repr(k) for k, _ in scan.items})
    return scan, items, sample_keys, released_keys


def _items_by_sample(
    items: list[tuple[str | None, _Item]],
) -> tuple[dict[str, dict[tuple[str, int, str | None], _Item]], list[str], Counter[str], int]:
    """The paired items by sample and (semantics, n, class); the unpaired items' places,
    the pairs counted by ``<semantics>-n<k>`` and the items listed twice. Two different
    items for one slot of a sample are an error."""
    by_sample: dict[str, dict[tuple[str, int, str | None], _Item]] = {}
    unmatched: list[str] = []
    matched_by: Counter[str] = Counter()
    duplicates = 0
    for sid, item in items:
        if sid is None:
            unmatched.append(item.where)
            continue
        slot = (item.semantics, item.n, item.typo_class)
        have = by_sample.setdefault(sid, {})
        if slot in have:
            other = have[slot]
            if (other.path, other.question) == (item.path, item.question):
                duplicates += 1  # the same item listed twice
                continue
            raise ValueError(
                f"sample {sid!r}: two released items for {item.semantics}-n{item.n}"
                f"{'' if item.typo_class is None else ' (' + item.typo_class + ')'}: "
                f"{other.where} and {item.where}"
            )
        have[slot] = item
        matched_by[f"{item.semantics}-n{item.n}"] += 1
    return by_sample, unmatched, matched_by, duplicates


def _nothing_released(condition: str, kind_dir: Path, spec: dict[str, Any], scan: _Scan) -> str:
    """The error that the release holds no item in the condition's scope, with what the
    scan saw instead."""
    scope = (
        f"semantics {spec['semantics']}, counts {spec['counts']}"
        if spec["semantics"]
        else f"counts {spec['counts']}"
    )
    return (
        f"conditions.{condition}: no released item found under {kind_dir} for {scope}"
        + (
            f"; {scan.out_of_scope} files are of other semantics or counts"
            if scan.out_of_scope
            else ""
        )
        + (
            f"; {len(scan.unrecognised)} files are not where the layout puts them, e.g. "
            + ", ".join(scan.unrecognised[:3])
            if scan.unrecognised
            else ""
        )
        + (
            f"; {len(scan.missing_files)} meta.jsonl rows name a missing image, e.g. "
            + "; ".join(scan.missing_files[:3])
            if scan.missing_files
            else ""
        )
    )


# ---------------------------------------------------------------- plan


def _expected(sample: Sample, spec: dict[str, Any], sem: str, n: int) -> str:
    """Where the missing released item was looked for (for Excluded / errors)."""
    kind_dir: Path = spec["_kind_dir"]
    if spec["task"] == "perception":
        classes = _sample_classes(sample)
        cls_dir = next(
            (spec["_class_dirs"][c] for c in sorted(classes) if c in spec["_class_dirs"]),
            sample.meta.get("imagenet9_class") or "<class>",
        )
        n_dir = spec["_n_dirs"].get(n, str(n))
        sem_dir = "conflicting" if spec["kind"] == "typographic" else sem
        name = (
            f"{sample.meta.get('stem')}{'[_<class>]' if spec['kind'] == 'typographic' else ''}.png"
        )
        return str(kind_dir / cls_dir / n_dir / sem_dir / name)
    group: Path = spec["_groups"][sem]
    if spec["pair_on"] == "sample_index":
        ident = f"{spec['id_field']}={sample.meta.get('sample_index')!r}"
    else:
        ident = (
            f"{spec['id_field']}={sample.meta.get('problem_index')!r}, "
            f"{spec['version_field']}={sample.meta.get('problem_version')!r}"
        )
    return f"a row of {group}/[n{n}/]meta.jsonl with {ident} and n={n}"


def _plan(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    """The released variants of a sample: one per (semantics, n) of the spec (perception
    typographic: one per released class and n); a missing one is an :class:`Excluded`
    or, with ``on_missing: error``, an error."""
    sid = sample.sample_id
    have: dict[tuple[str, int, str | None], _Item] = spec["_by_sample"].get(sid, {})
    out: list[VariantPlan | Excluded] = []

    def missing(vid: str, sem: str, n: int) -> None:
        expected = _expected(sample, spec, sem, n)
        if spec["on_missing"] == "error":
            raise ValueError(
                f"sample {sid!r}: no released Idis item for {sem}-n{n} (expected {expected}); "
                f"{_key(condition, 'on_missing')} is 'error' (use 'skip' to exclude such "
                "variants and count them)"
            )
        out.append(Excluded(vid, "not-released", f"expected {expected}"))

    if spec["task"] == "perception" and spec["kind"] == "typographic":
        for n in spec["counts"]:
            found = sorted(
                (it for (_s, k, _t), it in have.items() if k == n),
                key=lambda it: it.typo_class or "",
            )
            if not found:
                missing(f"{sid}__typo-n{n}", "typographic", n)
            for it in found:
                slug = "" if it.typo_class is None else f"{object_slug(it.typo_class)}-"
                params = {
                    **_base_params(spec, "typographic", n),
                    "typo_class": it.typo_class,
                    "release_file": it.where,
                }
                out.append(
                    VariantPlan(f"{sid}__typo-{slug}n{n}", params, None, images=(str(it.path),))
                )
        return out

    sems = spec["semantics"] or ["textual"]
    for sem in sems:
        for n in spec["counts"]:
            vid = f"{sid}__{sem}-n{n}"
            it = have.get((sem, n, None))
            if it is None:
                missing(vid, sem, n)
                continue
            out.append(_released_variant(sample, condition, spec, vid, sem, n, it))
    return out


def _base_params(spec: dict[str, Any], sem: str, n: int) -> dict[str, Any]:
    """The params every released variant records."""
    return {"kind": spec["kind"], "semantics": sem, "n": n, "source": "idis-release"}


def _released_variant(
    sample: Sample,
    condition: str,
    spec: dict[str, Any],
    vid: str,
    sem: str,
    n: int,
    it: _Item,
) -> VariantPlan | Excluded:
    """The variant of a released item (not perception typographic): the released image
    or, for math textual, the released question (excluded when it equals the
    sample's)."""
    params = _base_params(spec, sem, n)
    if spec["task"] == "perception":
        label = sample.meta.get("label") or sample.meta.get("imagenet9_class")
        params.update(
            distractors=None,
            distractor_classes=(
                [label]
                if sem == "aligned" and label
                else ["irrelevant"]
                if sem == "irrelevant"
                else None
            ),
            release_file=it.where,
        )
        return VariantPlan(vid, params, None, images=(str(it.path),))
    kind = spec["kind"]
    release_file = None if it.path is None else _rel(it.path, Path(spec["root"]))
    if kind == "visual":
        params["distractors"] = None
    params.update(release_row=it.where, release_meta=it.row)
    if kind == "textual":
        params["release_image"] = release_file
        assert it.question is not None
        if it.question.strip() == sample.question.strip():
            return Excluded(
                vid,
                "question-unchanged",
                f"{it.where}: the released question equals the sample's "
                f"(check {_key(condition, 'question_field')})",
            )
        return VariantPlan(vid, params, None, question=it.question)
    params["release_file"] = release_file
    return VariantPlan(vid, params, None, images=(str(it.path),))


register(Perturbation("idis-release", _prepare, _plan, None, setup=_setup))
