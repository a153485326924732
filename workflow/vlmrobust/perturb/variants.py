"""The perturbation stage: samples → variants (docs/architecture.md).

A *condition* (a named entry of ``conditions`` in the config) names a perturbation and
its parameters. :func:`build_variants` turns the samples of one dataset into the
variant manifest of one condition: a JSONL of :class:`~vlmrobust.core.records.Variant` rows
plus the perturbed image files under ``out.parent / "images"``.

Because the image files are named ``<variant_id>_<k>.png`` (``.webp`` with
``variants.format: webp``, :mod:`.storage`; ``variant_id`` is the sample id for
one-variant-per-sample conditions), ``out.parent`` must belong to one (dataset,
condition) alone, e.g. ``results/variants/{dataset}/{condition}/manifest.jsonl``: a
rebuild removes the files of ``images/`` that its manifest does not name.

Perturbations live in the registry :data:`PERTURBATIONS` (re-exported by
``vlmrobust.perturb``). Each is a :class:`Perturbation`:

* ``prepare(condition, spec) -> spec``: takes the condition's config as the schema
  validated it (:func:`build_variants` validates a spec against the config schema's
  ``condition`` definition first, which fills the defaults) and checks only what the
  schema cannot say (a file that must exist, a colour PIL knows, ...); errors name
  ``conditions.<condition>.<key>``.
* ``plan(sample, condition, spec, seed) -> list[VariantPlan]``: the variants of one
  sample (id, recorded params, seed, optionally a changed question).
* ``setup(samples, condition, spec) -> spec`` (optional): called once with every
  sample of the dataset after ``prepare``, for perturbations that draw from the other
  samples (Idis-math's aligned / conflicting figures come from diagrams of the same or
  another concept family); what it adds to the spec is passed to ``plan`` and ``apply``.
* ``plan(sample, condition, spec, seed) -> list[VariantPlan | Excluded]``: the variants
  of one sample (id, recorded params, seed, optionally a changed question). An
  :class:`Excluded` entry is a variant that could not be made (a textual distractor
  that failed its checks after every retry): it is not in the manifest, and the stage's
  report (``report.json`` beside the manifest) counts it by reason and lists its id.
* ``apply(image, params, seed) -> image | (image, mask) | (image, mask, info)``: a plain
  function applied to every image of the variant, with ``params`` = the prepared spec
  (less its keys that start with ``_``: what ``prepare`` / ``setup`` built for ``plan``
  alone, such as pools of figures, is not copied into every image task) overlaid with
  the variant's params and ``seed`` = ``derive_seed(seed, condition,
  variant_id, k)`` for image ``k``. ``info`` (a JSON-able dict: what was placed where,
  areas) is recorded in the variant's params under ``placed`` (one entry per image).
  ``apply=None`` means the variant keeps the sample's own image files.

``report.json`` counts the samples, the variants and the :class:`Excluded` ones (by
reason, with their ids). A perturbation may add to it: the keys of a dict the prepared
spec holds under ``report_extra`` (``setup`` puts it there, e.g. ``idis-release``'s
count of released files that pair with no sample) are merged into ``report.json``
(a key the stage writes itself is an error).

**Human verification** (the Idis paper's appendix A.3): a condition may carry a
``verification`` key, ``{decisions: <csv>, set: idis-perception | idis-math, require:
not-rejected | accepted}`` (``require`` defaults to ``not-rejected``). The decisions
file (:mod:`vlmrobust.core.decisions`, keyed by variant id, written by ``vlmrobust
idis-review``) is read with that criteria set; after planning, a variant a person
rejected is an :class:`Excluded` with reason ``rejected: <failed criterion ids>`` (joined
by ``;``) and, with ``require: accepted``, a variant nobody decided one with reason
``not-verified``. ``report.json`` then holds a ``verification`` block: the file, set and
rule, the variants ``checked`` and how many were ``accepted``, ``rejected``,
``undecided`` and ``dropped``, ``rejected_by_criterion`` (every criterion of the set; a
variant can fail several) and ``decisions_without_variant`` (ids decided in the file
that this run planned no variant for, e.g. another condition's). The key is taken out
of the spec before the perturbation's ``prepare`` sees it (:func:`prepare_verification`),
so any perturbation accepts it (``null``, the schema's default: no verification); it is
meant for the Idis image perturbations. A
decisions file belongs to one condition: variant ids do not name the condition.

A later perturbation (edit, composite, mask, ...) plugs in with :func:`register`, called
at import time of a module that ``vlmrobust/perturb/__init__.py`` imports: with
``threads > 1`` the worker processes (spawned, not forked) look the perturbation up by
name, so ``apply`` must be a module-level function and the registration must happen on
import. A returned mask is written as ``<variant_id>_<k>_mask.png`` and listed in
``Variant.masks`` (one per image; a perturbation returns a mask for every image or none).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from PIL import Image, ImageColor, ImageOps
from tqdm import tqdm

from ..core.config import condition_perturbations, validate_condition
from ..core.decisions import (
    CRITERIA_SEP,
    Decision,
    apply_decisions,
    read_decisions,
)
from ..core.io import atomic_write_bytes, sha256_bytes, sha256_file, write_json
from ..core.pixels import DEFAULT_MAX_PIXELS
from ..core.records import Sample, Variant, read_samples, write_variants
from ..core.seeding import derive_seed, rng_for
from .corruption import corrupt_image
from .storage import FORMATS, encode_image

log = logging.getLogger(__name__)

__all__ = [
    "PERTURBATIONS",
    "Excluded",
    "Perturbation",
    "VariantPlan",
    "Verification",
    "build_variants",
    "corruption_variant_id",
    "prepare_verification",
    "register",
]

ApplyResult = (
    Image.Image
    | tuple[Image.Image, Image.Image | None]
    | tuple[Image.Image, Image.Image | None, dict[str, Any] | None]
)
ApplyFn = Callable[[Image.Image, dict[str, Any], int], ApplyResult]


@dataclass(frozen=True)
class VariantPlan:
    """One variant of a sample: what :func:`build_variants` records and applies."""

    variant_id: str
    params: dict[str, Any]
    seed: int | None
    question: str | None = None  # None: the sample's question, unchanged
    images: tuple[str, ...] | None = (
        None  # existing files to use (apply is None); None: the sample's
    )


@dataclass(frozen=True)
class Excluded:
    """A variant that could not be made; counted by ``reason`` in the stage's report."""

    variant_id: str
    reason: str
    detail: str = ""


PlanFn = Callable[[Sample, str, dict[str, Any], int], list[VariantPlan | Excluded]]
PrepareFn = Callable[[str, dict[str, Any]], dict[str, Any]]
SetupFn = Callable[[list[Sample], str, dict[str, Any]], dict[str, Any]]
#: the config key and the pixels of the largest image a prepared spec builds
PixelsFn = Callable[[dict[str, Any]], tuple[str, int]]


@dataclass(frozen=True)
class Perturbation:
    """A registered perturbation (see the module docstring). ``pixels`` (optional): the
    key and pixel count of the largest image the prepared spec builds whatever the
    samples (a fixed canvas, the largest resolution), checked against the dataset's
    ``max_pixels`` before any image is made."""

    name: str
    prepare: PrepareFn
    plan: PlanFn
    apply: ApplyFn | None
    setup: SetupFn | None = None
    pixels: PixelsFn | None = None


#: name → perturbation; the names a condition's ``perturbation`` key may take.
PERTURBATIONS: dict[str, Perturbation] = {}


def register(perturbation: Perturbation) -> Perturbation:
    """Add ``perturbation`` to :data:`PERTURBATIONS` (a name can be registered once)."""
    if perturbation.name in PERTURBATIONS:
        raise ValueError(f"perturbation {perturbation.name!r} is already registered")
    PERTURBATIONS[perturbation.name] = perturbation
    return perturbation


def _key(condition: str, key: str) -> str:
    return f"conditions.{condition}.{key}"


def prepared_spec(condition: str, spec: Any) -> dict[str, Any]:
    """``spec`` validated (:func:`_validated_spec`: the config schema's ``condition``
    definition, defaults filled) and then prepared by its perturbation, without the
    stage's keys: what the perturbation's ``plan`` and ``apply`` read. For a caller
    outside :func:`build_variants` (which does the same in its own steps)."""
    checked = _validated_spec(condition, spec)
    name = checked["perturbation"]
    return PERTURBATIONS[name].prepare(condition, _without_stage_keys(checked))


def _without_stage_keys(spec: dict[str, Any]) -> dict[str, Any]:
    """A validated spec less the keys the stage reads itself (:data:`_STAGE_KEYS`)."""
    return {k: v for k, v in spec.items() if k not in _STAGE_KEYS}


def _check_keys(condition: str, spec: dict[str, Any], allowed: Iterable[str]) -> None:
    allowed = set(allowed) | {"perturbation"}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise ValueError(
            f"{_key(condition, unknown[0])}: unknown key for perturbation "
            f"{spec.get('perturbation')!r}; allowed keys: {', '.join(sorted(allowed))}"
        )


# ---------------------------------------------------------------- none


def _prepare_none(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The validated spec as it is (the schema allows no key of its own)."""
    return dict(spec)


def _plan_none(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan]:
    return [VariantPlan(sample.sample_id, {}, None)]


register(Perturbation("none", _prepare_none, _plan_none, None))


# ---------------------------------------------------------------- distraction


def _prepare_distraction(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The validated spec as it is (``source``: the schema's enum and default)."""
    return dict(spec)


def _plan_distraction(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan]:
    """The benchmark's own edited images (Distract-Bench: ``meta["distracted_images"]``)."""
    if sample.meta.get("without_images"):  # images: false -- imported outputs only
        return [VariantPlan(sample.sample_id, {"source": spec["source"]}, None, images=())]
    images = sample.meta.get("distracted_images")
    if not images:
        raise ValueError(
            f"sample {sample.sample_id!r}: condition {condition!r} uses the released "
            "distracted images, but the sample has none (meta.distracted_images; the "
            "distract-bench adapter provides them)"
        )
    return [VariantPlan(sample.sample_id, {"source": spec["source"]}, None, images=tuple(images))]


register(Perturbation("distraction", _prepare_distraction, _plan_distraction, None))


# ---------------------------------------------------------------- corruption


def _prepare_corruption(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The validated spec (the schema checks the keys, methods and severities and fills
    their defaults); checked here is what the schema cannot say: that ``blank_fill`` is
    a colour PIL knows. Severities become plain ``int`` (the schema's integers include
    ``3.0``)."""
    fill = spec["blank_fill"]
    try:
        ImageColor.getrgb(fill)
    except ValueError:
        raise ValueError(
            f"{_key(condition, 'blank_fill')}: {fill!r} is not a colour (use a PIL colour "
            f"name such as 'white' or '#rrggbb')"
        ) from None
    return {**spec, "severities": [int(s) for s in spec["severities"]]}


def corruption_variant_id(sample_id: str, method: str, severity: int | None) -> str:
    """The variant id of assignment ``all``: ``<sample_id>__<method>-s<k>`` (blank: ``__blank``)."""
    if method == "blank":
        return f"{sample_id}__blank"
    return f"{sample_id}__{method}-s{severity}"


def _plan_corruption(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan]:
    sid = sample.sample_id
    if spec["assignment"] == "random":
        rng = rng_for(seed, condition, sid)
        method = spec["methods"][int(rng.integers(len(spec["methods"])))]
        severity = (
            None
            if method == "blank"
            else spec["severities"][int(rng.integers(len(spec["severities"])))]
        )
        pairs = [(sid, method, severity)]
    else:
        pairs = []
        for method in spec["methods"]:
            sevs = [None] if method == "blank" else spec["severities"]
            for severity in sevs:
                pairs.append((corruption_variant_id(sid, method, severity), method, severity))
    return [
        VariantPlan(vid, {"method": m, "severity": s}, derive_seed(seed, condition, vid))
        for vid, m, s in pairs
    ]


def _apply_corruption(image: Image.Image, params: dict[str, Any], seed: int) -> Image.Image:
    return corrupt_image(
        image,
        params["method"],
        params["severity"],
        seed,
        blank_fill=params["blank_fill"],
    )


register(Perturbation("corruption", _prepare_corruption, _plan_corruption, _apply_corruption))


# ---------------------------------------------------------------- verification


@dataclass
class Verification:
    """A condition's ``verification``: the decisions read, and what :meth:`check` saw."""

    decisions_path: str
    criteria_set: str
    require: str
    decisions: dict[str, Decision]
    checked: list[str] = field(default_factory=list)
    planned_excluded: set[str] = field(default_factory=set)

    def check(self, plan: VariantPlan | Excluded) -> VariantPlan | Excluded:
        """The plan, or an :class:`Excluded` when the decisions drop it."""
        if isinstance(plan, Excluded):  # excluded by the perturbation itself
            self.planned_excluded.add(plan.variant_id)
            return plan
        vid = plan.variant_id
        self.checked.append(vid)
        d = self.decisions.get(vid)
        if d is None:
            if self.require == "accepted":
                return Excluded(vid, "not-verified", f"no decision in {self.decisions_path}")
            return plan
        if d.decision == "reject":
            who = " ".join(x for x in (d.reviewer, d.time) if x)
            detail = "; ".join(x for x in (d.note, who) if x)
            return Excluded(vid, f"rejected: {CRITERIA_SEP.join(d.criteria_failed)}", detail)
        return plan

    def report(self) -> dict[str, Any]:
        """The ``verification`` block of ``report.json`` (the counts of the checked
        variants are :func:`~vlmrobust.core.decisions.apply_decisions`'s)."""
        checked = set(self.checked)
        on_checked = {vid: d for vid, d in self.decisions.items() if vid in checked}
        _, counts = apply_decisions(self.checked, on_checked, criteria_set=self.criteria_set)
        seen = checked | self.planned_excluded
        stray = [vid for vid in self.decisions if vid not in seen]
        dropped = counts["rejected"] + (counts["undecided"] if self.require == "accepted" else 0)
        return {
            "decisions": self.decisions_path,
            "set": self.criteria_set,
            "require": self.require,
            "checked": len(self.checked),
            **{k: counts[k] for k in ("accepted", "rejected", "undecided")},
            "dropped": dropped,
            "rejected_by_criterion": counts["rejected_by_criterion"],
            "decisions_without_variant": len(stray),
            "decisions_without_variant_ids": stray,
        }


def prepare_verification(condition: str, value: Any) -> Verification:
    """Check a condition's ``verification`` value against the schema (errors name
    ``conditions.<condition>.verification[.<key>]``) and read its decisions file."""
    checked = validate_condition(condition, {"perturbation": "none", "verification": value})
    return _read_verification(condition, checked["verification"])


def _read_verification(condition: str, value: dict[str, Any]) -> Verification:
    """Read the decisions file of a validated ``verification`` value; checked here is
    what the schema cannot say: that the file exists (a bad row of the file: an error
    naming the file and line)."""
    path, name, require = value["decisions"], value["set"], value["require"]
    if not Path(path).is_file():
        raise ValueError(
            f"{_key(condition, 'verification')}.decisions: {path!r} is not an existing file"
        )
    decisions = read_decisions(path, criteria_set=name)
    return Verification(path, name, require, decisions)


# ---------------------------------------------------------------- the stage


@dataclass(frozen=True)
class _Task:
    perturbation: str
    sample_id: str
    source: str
    image_stem: str  # the image's path less its suffix (the format gives it)
    image_format: str  # variants.format (vlmrobust.perturb.storage)
    mask_path: str
    params: dict[str, Any]
    seed: int
    max_pixels: int = DEFAULT_MAX_PIXELS


#: What an image task gives: the stored image's path, its sha256, the mask's sha256 (or
#: None) and what the perturbation says it placed (or None).
_TaskResult = tuple[str, str, str | None, dict[str, Any] | None]


def open_shown(path: str, what: str) -> Image.Image:
    """Open and decode ``path`` with its EXIF orientation applied (as viewers and
    ``transformers.image_utils.load_image`` do), so the pixels are the ones a model is
    shown; an unreadable file is an error naming ``what`` and the path."""
    try:
        with Image.open(path) as im:
            im.load()
            return ImageOps.exif_transpose(im)
    except Exception as exc:
        raise ValueError(f"{what}: cannot read image {path}: {exc}") from exc


def _load_image(sample_id: str, path: str) -> Image.Image:
    return open_shown(path, f"sample {sample_id!r}")


def _check_image(sample_id: str, path: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
    """Fail, naming the sample and the file, unless ``path`` decodes as an image of at
    most ``max_pixels`` pixels."""
    try:
        with Image.open(path) as im:
            im.load()
            size = im.size
    except Exception as exc:
        raise ValueError(f"sample {sample_id!r}: cannot read image {path}: {exc}") from exc
    _check_pixels(f"sample {sample_id!r}: image {path}", size, max_pixels)


def _check_pixels(what: str, size: tuple[int, int], max_pixels: int) -> None:
    """The large-image policy (:mod:`vlmrobust.core.pixels`): an image over the
    dataset's ``max_pixels`` is an error naming it, never written or answered."""
    if size[0] * size[1] > max_pixels:
        raise ValueError(
            f"{what} is {size[0]}x{size[1]} = {size[0] * size[1]:,} pixels, more than the "
            f"dataset's max_pixels ({max_pixels:,}; datasets.<name>.max_pixels, default "
            "samples.max_pixels); rebuild its samples, or raise max_pixels"
        )


def _run_task(task: _Task) -> _TaskResult:
    """Perturb one image, write it in its format (and its mask, as PNG); return the
    image's path, the sha256 of the bytes written and what the perturbation placed."""
    image = _load_image(task.sample_id, task.source)
    apply = PERTURBATIONS[task.perturbation].apply
    assert apply is not None
    try:
        result = apply(image, task.params, task.seed)
    except Exception as exc:
        raise RuntimeError(
            f"sample {task.sample_id!r}: perturbation {task.perturbation!r} "
            f"{task.params} failed on {task.source}: {exc}"
        ) from exc
    mask = info = None
    if isinstance(result, tuple):
        if len(result) == 3:
            result, mask, info = result
        else:
            result, mask = result
    what = f"sample {task.sample_id!r}: the {task.perturbation!r} image of {task.source}"
    _check_pixels(what, result.size, task.max_pixels)
    data, suffix = encode_image(result, task.image_format)
    path = task.image_stem + suffix
    atomic_write_bytes(path, data)
    mask_sha = None
    if mask is not None:
        mdata, _ = encode_image(mask, "png")
        atomic_write_bytes(task.mask_path, mdata)
        mask_sha = sha256_bytes(mdata)
    return path, sha256_bytes(data), mask_sha, info


def _init_worker() -> None:
    """One process = one core: keep the libraries' own thread pools to one thread."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        import cv2

        cv2.setNumThreads(1)
    except ImportError:  # pragma: no cover - cv2 comes with imagecorruptions
        pass


@contextlib.contextmanager
def _opencv_threads(n: int) -> Iterator[None]:
    """OpenCV's thread pool at ``n`` threads while this process makes a job's images (its
    default is every core of the machine whatever the job's ``threads``: two one-thread
    jobs beside each other would each run as many threads as there are cores). The
    results do not depend on it (OpenCV splits the rows of an image among its threads)."""
    try:
        import cv2
    except ImportError:  # pragma: no cover - cv2 comes with imagecorruptions
        yield
        return
    before = cv2.getNumThreads()
    cv2.setNumThreads(n)
    try:
        yield
    finally:
        cv2.setNumThreads(before)


def _run_tasks(tasks: list[_Task], threads: int, desc: str) -> list[_TaskResult]:
    bar = tqdm(total=len(tasks), desc=desc, unit="img", file=sys.stderr, dynamic_ncols=True)
    results: list[_TaskResult] = []
    try:
        workers = min(threads, len(tasks))
        if workers <= 1:
            with _opencv_threads(threads):
                for task in tasks:
                    results.append(_run_task(task))
                    bar.update()
        else:
            # spawn: a fresh interpreter per worker, never a fork of a process whose
            # thread pools (OpenMP, cv2, tqdm's monitor) may hold locks.
            with ProcessPoolExecutor(
                max_workers=workers, mp_context=get_context("spawn"), initializer=_init_worker
            ) as pool:
                for res in pool.map(_run_task, tasks, chunksize=1):
                    results.append(res)
                    bar.update()
    finally:
        bar.close()
    return results


def build_variants(
    samples_path: str | os.PathLike,
    condition: str,
    spec: dict[str, Any],
    seed: int,
    out: str | os.PathLike,
    threads: int = 1,
    max_pixels: int = DEFAULT_MAX_PIXELS,
    image_format: str = "png",
) -> int:
    """Build the variant manifest of ``condition`` for the samples in ``samples_path``.

    Writes the manifest JSONL at ``out`` (atomically, after every image is written) and
    the perturbed images as ``out.parent / "images" / f"{variant_id}_{k}.png"`` (or
    ``.webp``: ``image_format``, config ``variants.format``, :mod:`.storage`; masks
    are always PNG); returns the number of manifest rows. Files of the images folder
    that the new manifest does not name (an earlier run's, in another format, say) are
    removed. ``spec`` is the condition's config
    (``{"perturbation": "none"}``, ``{"perturbation": "corruption", "assignment": ...}``);
    ``seed`` the global seed; ``threads`` > 1 perturbs images in that many processes
    (the result is identical to ``threads=1``). Samples without images (a dataset with
    ``images: false``, ``meta["without_images"]``) give variants with the same ids and
    params, ``params["without_images"] = True`` and no image (for imported outputs).
    ``max_pixels`` is the dataset's bound (``datasets.<name>.max_pixels``): a configured
    canvas beyond it is an error before any image is made, an adaptive canvas (the Idis
    composites) is planned within it (the spec's ``_max_pixels``), and an image beyond it
    (kept or made) is an error naming the sample and the file.
    """
    out = Path(out)
    spec = _validated_spec(condition, spec)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
    if image_format not in FORMATS:
        raise ValueError(f"image format {image_format!r}: use one of {', '.join(FORMATS)}")
    name = spec["perturbation"]
    pert = PERTURBATIONS[name]
    verification = None
    if spec["verification"] is not None:  # the stage's keys, not the perturbation's
        verification = _read_verification(condition, spec["verification"])
    expected = spec["expected_variants"]
    spec = pert.prepare(condition, _without_stage_keys(spec))
    _check_canvas(condition, pert, spec, max_pixels)
    spec = {**spec, "_max_pixels": max_pixels}
    samples = read_samples(samples_path)
    if pert.setup is not None:
        spec = pert.setup(samples, condition, spec)
    images_dir = out.parent / "images"
    variants, tasks, slots, excluded = _plan_variants(
        samples_path, samples, condition, spec, seed, verification, (images_dir, image_format)
    )
    if tasks:
        images_dir.mkdir(parents=True, exist_ok=True)
        results = _run_tasks(tasks, threads, desc=f"variants {condition}")
        _record_results(name, variants, tasks, slots, results)
    n = write_variants(out, variants)
    _remove_stale(images_dir, variants)
    _write_report(
        out.parent / "report.json",
        condition,
        name,
        len(samples),
        n,
        excluded,
        extra=spec.get("report_extra"),
        stage=_stage_blocks(condition, n, verification, expected),
    )
    return n


def _check_canvas(
    condition: str, pert: Perturbation, spec: dict[str, Any], max_pixels: int
) -> None:
    """A perturbation's fixed canvas (``Perturbation.pixels``) within ``max_pixels``, or
    an error naming the key."""
    if pert.pixels is None:
        return
    key, pixels = pert.pixels(spec)
    if pixels > max_pixels:
        raise ValueError(
            f"{_key(condition, key)}: its images have {pixels:,} pixels, more than the "
            f"dataset's max_pixels ({max_pixels:,}; datasets.<name>.max_pixels, default "
            "samples.max_pixels); lower it, or raise max_pixels"
        )


#: The keys of a condition that the stage reads itself (taken out of the spec before
#: the perturbation's ``prepare``).
_STAGE_KEYS = ("verification", "expected_variants")


def _validated_spec(condition: str, spec: Any) -> dict[str, Any]:
    """``spec`` validated against the config schema's ``condition`` definition (a copy,
    defaults filled; a validated spec passes unchanged). A perturbation plugged in with
    :func:`register` that the schema does not know has its own keys checked by its
    ``prepare`` alone; the stage's keys are validated all the same."""
    if not isinstance(spec, dict):
        raise ValueError(f"conditions.{condition}: expected a mapping, got {spec!r}")
    name = spec.get("perturbation")
    if name not in PERTURBATIONS:
        raise ValueError(
            f"{_key(condition, 'perturbation')}: unknown perturbation {name!r}; known: "
            f"{', '.join(PERTURBATIONS)}"
        )
    if name in condition_perturbations():
        return validate_condition(condition, spec)
    stage = {k: spec[k] for k in _STAGE_KEYS if k in spec}
    checked = validate_condition(condition, {"perturbation": "none", **stage})
    return {**spec, **{k: checked[k] for k in _STAGE_KEYS}}


def _plan_variants(
    samples_path: str | os.PathLike,
    samples: list[Sample],
    condition: str,
    spec: dict[str, Any],
    seed: int,
    verification: Verification | None,
    storage: tuple[Path, str],
) -> tuple[list[Variant], list[_Task], list[tuple[int, int]], list[Excluded]]:
    """Plan every sample's variants: the manifest rows (images and hashes filled for
    variants that keep existing files), the image tasks with the (variant index, image
    index) each fills, and the excluded variants. ``storage``: the images folder and
    the format of the images written there."""
    images_dir, image_format = storage
    name = spec["perturbation"]
    pert = PERTURBATIONS[name]
    task_spec = {k: v for k, v in spec.items() if not k.startswith("_")}  # module doc
    excluded: list[Excluded] = []
    variants: list[Variant] = []
    tasks: list[_Task] = []
    slots: list[tuple[int, int]] = []  # (variant index, image index) of each task
    seen: dict[str, str] = {}
    for sample in samples:
        # a dataset with images: false: the variants are planned (ids, params such as
        # the corruption's method and severity) but no image is read or written
        without_images = bool(sample.meta.get("without_images"))
        if not sample.images and not without_images:
            raise ValueError(f"sample {sample.sample_id!r} in {samples_path} has no images")
        for plan in pert.plan(sample, condition, spec, seed):
            if verification is not None:
                plan = verification.check(plan)
            if isinstance(plan, Excluded):
                excluded.append(plan)
                continue
            if plan.variant_id in seen:
                raise ValueError(
                    f"variant id {plan.variant_id!r} occurs twice (samples "
                    f"{seen[plan.variant_id]!r} and {sample.sample_id!r}); sample ids in "
                    f"{samples_path} must be unique"
                )
            seen[plan.variant_id] = sample.sample_id
            variant = _new_variant(sample, plan, condition, name)
            vi = len(variants)
            variants.append(variant)
            if without_images:
                variant.params["without_images"] = True
                continue
            if pert.apply is None:  # existing files (the sample's own by default), hashed
                for path in plan.images if plan.images is not None else sample.images:
                    _check_image(sample.sample_id, path, spec["_max_pixels"])
                    variant.images.append(path)
                    variant.sha256.append(sha256_file(path))
                continue
            params = {**task_spec, **plan.params}
            for k, path in enumerate(sample.images):
                stem = f"{plan.variant_id}_{k}"
                tasks.append(
                    _Task(
                        perturbation=name,
                        sample_id=sample.sample_id,
                        source=path,
                        image_stem=str(images_dir / stem),
                        image_format=image_format,
                        mask_path=str(images_dir / f"{stem}_mask.png"),
                        params=params,
                        seed=derive_seed(seed, condition, plan.variant_id, k),
                        max_pixels=spec["_max_pixels"],
                    )
                )
                slots.append((vi, k))
    return variants, tasks, slots, excluded


def _remove_stale(images_dir: Path, variants: list[Variant]) -> None:
    """Remove the files of ``images_dir`` that no variant names (as image or mask): an
    earlier run's images in another format, or of variants this run no longer plans;
    the folder itself when nothing is left in it."""
    if not images_dir.is_dir():
        return
    named = {Path(p).absolute() for v in variants for p in (*v.images, *v.masks)}
    stale = [f for f in images_dir.iterdir() if f.is_file() and f.absolute() not in named]
    for f in stale:
        f.unlink()
    if stale:
        log.info("%s: removed %d file(s) no variant names", images_dir, len(stale))
    if not any(images_dir.iterdir()):
        images_dir.rmdir()


def _new_variant(sample: Sample, plan: VariantPlan, condition: str, name: str) -> Variant:
    """The manifest row of a planned variant, its images not yet listed."""
    return Variant(
        variant_id=plan.variant_id,
        sample_id=sample.sample_id,
        dataset=sample.dataset,
        condition=condition,
        perturbation=name,
        images=[],
        sha256=[],
        question=sample.question if plan.question is None else plan.question,
        params=dict(plan.params),
        seed=plan.seed,
        masks=[],
    )


def _record_results(
    name: str,
    variants: list[Variant],
    tasks: list[_Task],
    slots: list[tuple[int, int]],
    results: list[_TaskResult],
) -> None:
    """Fill the variants with what their image tasks gave: the stored images and their
    hashes, ``placed`` (when the perturbation said what it placed) and the masks (for
    every image or none). A variant's tasks come in the order of its images."""
    masks: dict[int, list[str | None]] = {}
    infos: dict[int, list[dict[str, Any] | None]] = {}
    for task, (vi, _k), (path, sha, mask_sha, info) in zip(tasks, slots, results, strict=True):
        variants[vi].images.append(path)
        variants[vi].sha256.append(sha)
        masks.setdefault(vi, []).append(task.mask_path if mask_sha is not None else None)
        infos.setdefault(vi, []).append(info)
    for vi, ilist in infos.items():
        if any(i is not None for i in ilist):
            variants[vi].params["placed"] = ilist
    for vi, mlist in masks.items():
        if all(m is None for m in mlist):
            continue
        if any(m is None for m in mlist):
            raise RuntimeError(
                f"perturbation {name!r} returned a mask for some images of variant "
                f"{variants[vi].variant_id!r} but not for all"
            )
        variants[vi].masks = [m for m in mlist if m is not None]


def _stage_blocks(
    condition: str, n: int, verification: Verification | None, expected: int | None
) -> dict[str, Any]:
    """The stage's own blocks of report.json (verification, the expected count); a count
    other than the expected one is logged."""
    stage: dict[str, Any] = {}
    if verification is not None:
        stage["verification"] = verification.report()
    if expected is not None:
        stage["expected_variants"] = expected
        if n != expected:
            log.warning(
                "condition %s: %d variants, the paper reports %d (%+d); report.json says "
                "which were excluded and why",
                condition,
                n,
                expected,
                n - expected,
            )
            stage["expected_mismatch"] = n - expected
    return stage


def _write_report(
    path: Path,
    condition: str,
    name: str,
    n_samples: int,
    n: int,
    excluded: list[Excluded],
    extra: dict[str, Any] | None = None,
    stage: dict[str, Any] | None = None,
) -> None:
    """``report.json``: the counts and the excluded variants, the stage's own blocks
    (``stage``: verification, expected count) and the perturbation's ``report_extra``
    (``extra``); an ``extra`` key that would replace anything the stage writes is an
    error."""
    by_reason = Counter(e.reason for e in excluded)
    report = {
        "condition": condition,
        "perturbation": name,
        "samples": n_samples,
        "variants": n,
        "excluded": len(excluded),
        "excluded_by_reason": dict(sorted(by_reason.items())),
        "excluded_variants": [asdict(e) for e in excluded],
    }
    report.update(stage or {})
    clash = sorted(set(extra or {}) & set(report))
    if clash:
        raise ValueError(
            f"perturbation {name!r}: report_extra key {clash[0]!r} is one the stage writes"
        )
    write_json(path, {**report, **(extra or {})})
