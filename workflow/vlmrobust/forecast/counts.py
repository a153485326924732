"""How many samples and variants a run answers, and the images they carry.

Every count says how it is known (:class:`Figure`): ``measured`` (read from the run's
own files: the samples, a variant manifest; or from a local copy of the dataset's rows,
converted by its adapter without reading an image), ``config`` (the run configuration
says so: ``expected_size``, ``limit``, ``expected_variants``, ``demo.n_per_family``),
``registry`` (the benchmark record's ``rows``) or ``assumed`` (a forecast table,
``images.yaml``). Image sizes are read from the image headers only (PIL, lazily), at
most :data:`MAX_IMAGES` per dataset or condition, evenly spread over its files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from ..core.config import demo_folder_family
from ..core.io import read_jsonl
from ..core.paths import MANIFEST, SAMPLES, path
from ..core.pixels import fit_within, max_side
from ..core.records import Sample, Variant
from ..plan import IMAGE_SUFFIXES, RunPlan, files_under
from .tables import image_assumption

#: the most image headers read per dataset or condition (evenly spread), and the most
#: samples or variants whose prompts are built
MAX_IMAGES = 400
MAX_PROMPTS = 400
#: the canvas a perturbation that pastes onto a fixed square draws on
CANVAS_PERTURBATIONS = ("objects", "typographic", "size")
#: composites that grow their square canvas around a large diagram (perturb/idis/figures.py)
MATH_CANVAS = ("diagram", "handwritten")
MAX_TARGET_FRACTION = 0.6
#: the canvas of a composite whose condition names none (the `diagram` default)
IDIS_MATH_CANVAS = 1024
#: the released Idis-perception images (docs/large-images.md)
IDIS_PERCEPTION_SIZE = (1024, 1024)


@dataclass(frozen=True)
class Figure:
    """A number and how it is known (module docstring)."""

    value: float
    how: str  # measured | config | registry | assumed
    note: str


@dataclass
class DatasetFacts:
    """A dataset's samples: how many, their images' sizes (one entry per image read),
    images per sample, and samples to build prompts from (None: none are there)."""

    name: str
    samples: Figure
    sizes: list[tuple[int, int]]
    images_per_sample: float
    sizes_how: str
    prompts_from: list[Sample] | None = None
    question_chars: float = 0.0


@dataclass
class ConditionFacts:
    """One (dataset, condition): its variants, the sizes their images are shown at,
    images per variant, and what they take on disk (``disk_bytes`` measured, else None)."""

    dataset: str
    condition: str
    variants: Figure
    sizes: list[tuple[int, int]]
    images_per_variant: float
    sizes_how: str
    variants_from: list[Variant] | None = None
    disk_bytes: int | None = None
    written_images: float = 0.0
    notes: list[str] = field(default_factory=list)


def spread(items: list[Any], n: int) -> list[Any]:
    """At most ``n`` of ``items``, evenly spaced (all of them when there are fewer)."""
    if len(items) <= n:
        return list(items)
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


def image_size(path: str | Path) -> tuple[int, int] | None:
    """(width, height) as shown (EXIF orientation 5-8 swaps them), from the header
    alone; None for a file that does not open."""
    try:
        with Image.open(path) as im:
            w, h = im.size
            orientation = im.getexif().get(0x0112, 1)
    except (OSError, ValueError):
        return None
    return (h, w) if orientation in (5, 6, 7, 8) else (w, h)


def sizes_of(paths: list[str]) -> list[tuple[int, int]]:
    """The sizes of up to :data:`MAX_IMAGES` of ``paths`` (evenly spread)."""
    return [s for p in spread(paths, MAX_IMAGES) if (s := image_size(p)) is not None]


# --------------------------------------------------------------------------- samples


def dataset_facts(plan: RunPlan, dataset: str) -> DatasetFacts:
    """The samples of ``dataset``: its samples file when there (measured), else a local
    copy of its rows, else the configuration, the registry and ``images.yaml``."""
    spec = plan.datasets[dataset]
    assumed = image_assumption(spec["adapter"])
    samples_file = Path(path(SAMPLES, dataset=dataset))
    if samples_file.is_file():
        samples = [Sample.from_dict(r) for r in read_jsonl(samples_file)]
        paths = [p for s in samples for p in s.images]
        return DatasetFacts(
            dataset,
            Figure(len(samples), "measured", str(samples_file)),
            sizes_of(paths),
            len(paths) / max(1, len(samples)),
            f"measured: headers of {samples_file.parent}/images",
            samples,
        )
    local = _local_samples(plan, dataset)
    count = local if local is not None else _stated_count(plan, dataset)
    limit = spec["limit"]
    if limit is not None and count.value > limit:
        count = Figure(limit, count.how, f"{count.note}; capped by datasets.{dataset}.limit")
    sizes, sizes_how = _unsampled_sizes(plan, dataset, assumed)
    bound = int(spec["max_pixels"])
    return DatasetFacts(
        dataset,
        count,
        [fit_within(s, bound) for s in sizes],
        float(assumed["images"]),
        sizes_how,
        None,
        float(assumed["question_chars"]),
    )


def _local_samples(plan: RunPlan, dataset: str) -> Figure | None:
    """The samples a local copy of the rows gives (the adapter's conversion, images
    neither read nor checked: an upper bound where rows name missing images); None
    when the rows are not there or their adapter reads images while loading."""
    from ..data.adapters import ADAPTERS  # the data stage, only for a local folder
    from ..data.released import samples_from_rows

    spec = plan.datasets[dataset]
    adapter = ADAPTERS.get(spec["adapter"])
    if spec["source"] != "local" or adapter is None or adapter.reads_images:
        return None
    if not spec["path"] or not Path(spec["path"]).is_dir():
        return None
    try:
        source = adapter.load_rows(spec, f"datasets.{dataset}")
        questions = samples_from_rows(spec["adapter"], source.rows, dataset, on_bad_row="skip")
    except (ValueError, OSError, KeyError):
        return None
    note = f"the adapter's rows in {spec['path']} (images not checked)"
    return Figure(len(questions), "measured", note)


def _stated_count(plan: RunPlan, dataset: str) -> Figure:
    """A dataset's size as the configuration or the registry states it."""
    from ..core.benchmarks import BENCHMARKS

    spec = plan.datasets[dataset]
    if spec["expected_size"] is not None:
        return Figure(spec["expected_size"], "config", f"datasets.{dataset}.expected_size")
    family = demo_folder_family(spec["path"])
    if family is not None:
        n = plan.config["demo"]["n_per_family"]
        return Figure(n, "config", f"demo.n_per_family (the {family} family's rows)")
    record = BENCHMARKS.get(spec["adapter"])
    rows = record.rows_of(spec["split"]) if record else None
    if rows is not None:
        split = spec["split"] or record.split or "its split"
        return Figure(rows, "registry", f"benchmarks/{spec['adapter']}.yaml rows ({split})")
    if spec["limit"] is not None:
        return Figure(spec["limit"], "config", f"datasets.{dataset}.limit (assumed reached)")
    raise ValueError(
        f"datasets.{dataset}: the forecast has no sample count (no samples file yet, no "
        f"local rows, no expected_size, no `rows` in benchmarks/{spec['adapter']}.yaml); "
        f"set datasets.{dataset}.expected_size"
    )


def _unsampled_sizes(
    plan: RunPlan, dataset: str, assumed: dict[str, Any]
) -> tuple[list[tuple[int, int]], str]:
    """Image sizes before the samples exist: the images of a local folder when there
    (headers), else the assumed size of ``images.yaml``."""
    spec = plan.datasets[dataset]
    if spec["source"] == "local" and spec["path"] and Path(spec["path"]).is_dir():
        found = sizes_of(files_under(spec["path"], IMAGE_SUFFIXES))
        if found:
            return found, f"measured: headers of the images under {spec['path']}"
    size = (int(assumed["size"][0]), int(assumed["size"][1]))
    return [size], f"assumed: {size[0]} x {size[1]} ({assumed['source']})"


# --------------------------------------------------------------------------- variants


def variants_per_sample(plan: RunPlan, dataset: str, condition: str) -> tuple[float, str, str]:
    """(variants per sample, how, why) of a condition that has no manifest yet: the
    configuration's ``expected_variants`` over ``expected_size`` when both are given,
    else the perturbation's own count from its settings (docs/studies/idis.md)."""
    spec = plan.conditions[condition]
    size = plan.datasets[dataset]["expected_size"]
    if spec.get("expected_variants") and size:
        note = f"conditions.{condition}.expected_variants / datasets.{dataset}.expected_size"
        return spec["expected_variants"] / size, "config", note
    p = spec["perturbation"]
    n_counts = len(spec.get("counts") or [1, 2, 3, 4])
    n_semantics = len(spec.get("semantics") or ["aligned", "conflicting", "irrelevant"])
    if p in ("none", "distraction", "mask") or (
        p == "corruption" and spec["assignment"] == "random"
    ):
        return 1.0, "config", f"{p}: one variant per sample"
    if p == "corruption":
        methods = spec["methods"]
        n = (len(methods) - ("blank" in methods)) * len(spec["severities"]) + ("blank" in methods)
        return float(n), "config", "corruption, assignment all: every method x severity"
    if p in ("objects", "diagram"):
        return float(n_semantics * n_counts), "config", f"{p}: semantics x counts"
    if p == "typographic":
        classes = spec["classes"] if isinstance(spec["classes"], int) else 8
        return float(classes * n_counts), "config", "typographic: classes x counts"
    if p in ("handwritten", "textual"):
        return float(n_counts), "config", f"{p}: one variant per count"
    if p == "size":
        return float(len(spec["sizes"])), "config", "size: one variant per size"
    if p == "resize":
        return float(len(spec["resolutions"])), "config", "resize: one per resolution"
    note = f"{p}: semantics x counts (set conditions.{condition}.expected_variants)"
    return float(n_semantics * n_counts), "assumed", note


def shown_sizes(
    plan: RunPlan, dataset: str, condition: str, sizes: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """The sizes the images of a condition's variants are made at from the samples'
    ``sizes``: a fixed canvas, a composite's grown canvas, the released Idis-perception
    size, each resolution of a resize; the samples' own otherwise."""
    spec = plan.conditions[condition]
    p = spec["perturbation"]
    bound = max_side(int(plan.datasets[dataset]["max_pixels"]))
    if p in CANVAS_PERTURBATIONS:
        return [(spec["canvas"], spec["canvas"])]
    if p == "resize":
        return [(r, r) for r in spec["resolutions"]]
    released_math = p == "idis-release" and spec["task"] == "math" and spec["kind"] != "textual"
    if p in MATH_CANVAS or released_math:  # the release: assumed made as `diagram` makes them
        canvas = spec.get("canvas") or IDIS_MATH_CANVAS
        grown = [max(canvas, math.ceil(max(s) / MAX_TARGET_FRACTION)) for s in sizes]
        return [(min(side, bound), min(side, bound)) for side in grown]
    if p == "idis-release" and spec["task"] == "perception":
        return [IDIS_PERCEPTION_SIZE]
    return list(sizes)


def condition_facts(plan: RunPlan, facts: DatasetFacts, condition: str) -> ConditionFacts:
    """A condition's variants: its manifest when there (measured, with the bytes of
    its images folder), else the samples times :func:`variants_per_sample`."""
    dataset = facts.name
    manifest = Path(path(MANIFEST, dataset=dataset, condition=condition))
    if manifest.is_file():
        variants = [Variant.from_dict(r) for r in read_jsonl(manifest)]
        paths = [p for v in variants for p in v.images]
        folder = manifest.parent / "images"
        written = files_under(folder)
        return ConditionFacts(
            dataset,
            condition,
            Figure(len(variants), "measured", str(manifest)),
            sizes_of(paths),
            len(paths) / max(1, len(variants)),
            "measured: headers of the variants' images",
            spread(variants, MAX_PROMPTS),
            sum(Path(f).stat().st_size for f in written),
            float(len([f for f in written if not f.endswith("_mask.png")])),
        )
    per, how, why = variants_per_sample(plan, dataset, condition)
    how = "assumed" if "assumed" in (how, facts.samples.how) else how
    note = (
        f"{facts.samples.value:g} samples ({facts.samples.how}: {facts.samples.note}) x "
        f"{per:g} ({why})"
    )
    sizes = shown_sizes(plan, dataset, condition, facts.sizes)
    changed = sizes != facts.sizes
    sizes_how = f"{facts.sizes_how}; the perturbation's canvas" if changed else facts.sizes_how
    return ConditionFacts(
        dataset,
        condition,
        Figure(facts.samples.value * per, how, note),
        sizes,
        facts.images_per_sample,
        sizes_how,
    )
