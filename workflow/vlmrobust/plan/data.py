"""The data side of the run plan: what the samples of a dataset are built from and with
which setting, what a condition's variants read, the local folders' files and image
listings, and what a construction and an import of released files read (rules
``samples``, ``questions``, ``variants``, ``demo_data``, ``construct_candidates``,
``review_page``, ``import_outputs``, ``import_verdicts``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core import paths
from ..core.config import ConfigError, demo_folder_family, demo_image_files, under_demo_idis
from ..core.paths import path
from .scope import RunPlan

#: keys of a dataset's configuration that do not change its samples
NOT_SAMPLE_KEYS = frozenset(
    {
        "conditions",
        "group",
        "display",
        "prompts",
        "max_new_tokens",
        "temperature",
        "top_p",
        "n",
        "prompt_decoding",
        "image_size",
        "generation_config",
        "pixels",
        "fit",
        "shards",
        "scorer",
        "unparsed_choice",
    }
)
#: files of a local dataset folder the samples are read from: the rows ...
ROW_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")
#: ... and the images they name (an edited image must rebuild the samples)
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp", ".tif", ".tiff")
#: keys of a condition naming a samples file its perturbation draws figures from
POOL_KEYS = ("irrelevant_samples", "figure_samples")
#: keys of a condition naming a folder whose files its perturbation reads
FOLDER_KEYS = ("segments", "path")


def files_under(folder: str | Path, suffixes: tuple[str, ...] | None = None) -> list[str]:
    """The files under ``folder`` as it is now (sorted; any case of ``suffixes``, None =
    every file), so that editing one in place reruns the job that reads them; [] for a
    folder that is not there (yet: a job writes it)."""
    root = Path(folder)
    if not root.is_dir():
        return []
    return sorted(
        str(p)
        for p in root.rglob("*")
        if p.is_file() and (suffixes is None or p.suffix.lower() in suffixes)
    )


# ---------------------------------------------------------------------- samples


def samples_spec(plan: RunPlan, dataset: str) -> dict[str, Any]:
    """The dataset's configuration without the keys that do not change its samples
    (editing those must not rebuild the samples)."""
    spec = plan.datasets[dataset]
    return {k: v for k, v in spec.items() if k not in NOT_SAMPLE_KEYS}


def samples_sources(plan: RunPlan, dataset: str, questions: bool = True) -> list[str]:
    """What the samples of a dataset are read from: the demo rows (also for another
    adapter reading a demo family's folder, e.g. VisArgs), the constructed candidates
    and their decisions file, or the local files; plus, for a VisArgs dataset whose
    ``question_writer`` is an LLM, the questions file of the ``questions`` step (not with
    ``questions=False``: the ``questions`` rule reads the rest). A local folder lists its
    row files (:data:`ROW_SUFFIXES`, any case) and, for its image files, their listing
    (:func:`image_listing`), so fixing an image reruns the samples job."""
    spec = plan.datasets[dataset]
    writer = (spec.get("question_writer") or {}).get("backend", "template")
    extra = []
    if questions and spec["adapter"] == "visargs" and writer != "template":
        extra = [path(paths.QUESTIONS, dataset=dataset)]
    if under_demo_idis(spec["path"]):  # written by the demo_idis job
        return [paths.DEMO_IDIS_SUMMARY, *extra]
    family = demo_folder_family(spec["path"])
    if family is not None:  # written by the demo_data job, images declared one by one
        n = plan.config["demo"]["n_per_family"]
        rows = path(paths.DEMO_ROWS, family=family)
        return [rows, *demo_image_files(family, n), *extra]
    if spec["adapter"] == "constructed":
        decisions = [spec["decisions"]] if spec["decisions"] else []
        return [f"{spec['path']}/candidates.jsonl", *decisions]
    if spec["source"] == "local":
        rows = files_under(_local_folder(plan, dataset), ROW_SUFFIXES)
        images = _reads_local_images(plan, dataset)
        return rows + ([path(paths.IMAGE_LISTING, dataset=dataset)] if images else []) + extra
    return extra


def _local_folder(plan: RunPlan, dataset: str) -> Path:
    """The folder of a dataset read from ``source: local``; a missing one is an error."""
    root = Path(plan.datasets[dataset]["path"])
    if not root.exists():
        raise ConfigError(f"datasets.{dataset}.path: folder {root} does not exist")
    return root


def image_listing(plan: RunPlan, dataset: str) -> tuple[str, list[str]] | None:
    """The image files (:data:`IMAGE_SUFFIXES`, any case) of a dataset's local folder
    as it is now, and the listing that stands for them among the samples job's
    inputs (``paths.IMAGE_LISTING``; brought up to date when the Snakefile is read,
    :func:`vlmrobust.plan.hooks.update_listings`); None where the samples read no image
    of a local folder: the hub's datasets, the demo's (its images are the outputs of
    the demo jobs), a constructed one, and ``images: false`` (reviewers without the
    images)."""
    if not _reads_local_images(plan, dataset):
        return None
    files = files_under(_local_folder(plan, dataset), IMAGE_SUFFIXES)
    return path(paths.IMAGE_LISTING, dataset=dataset), files


def _reads_local_images(plan: RunPlan, dataset: str) -> bool:
    spec = plan.datasets[dataset]
    local = spec["source"] == "local" and spec["adapter"] != "constructed"
    demo = under_demo_idis(spec["path"]) or demo_folder_family(spec["path"]) is not None
    return local and not demo and spec.get("images", True)


def demo_images(plan: RunPlan) -> list[str]:
    """Every image the ``demo_data`` job writes (:func:`demo_image_files` per family)."""
    demo = plan.config["demo"]
    return [
        f for family in demo["families"] for f in demo_image_files(family, demo["n_per_family"])
    ]


# ---------------------------------------------------------------------- variants


def variant_manifests(plan: RunPlan) -> list[str]:
    """The manifest of every dataset x condition of the run."""
    return [
        path(paths.MANIFEST, dataset=d, condition=c)
        for d, spec in plan.datasets.items()
        for c in spec["conditions"]
    ]


def condition_spec(plan: RunPlan, condition: str) -> dict[str, Any]:
    """A condition's setting (config ``conditions.<name>``): the ``variants`` job's."""
    return plan.conditions[condition]


def condition_inputs(plan: RunPlan, condition: str) -> list[str]:
    """Files a condition's variants job reads besides the samples: the samples files
    it draws figures from (:data:`POOL_KEYS`), its verification decisions, every
    file a ``*_file`` key names (a prompt, an object list) where it exists, the
    files of the folders it names (:data:`FOLDER_KEYS`: cut-outs, expression
    images), and the demo's Idis assets when a folder lies where the ``demo_idis``
    job writes. Editing any of them in place reruns the condition."""
    spec = plan.conditions[condition]
    found = [spec[k] for k in POOL_KEYS if spec.get(k)]
    if spec.get("verification"):
        found.append(spec["verification"]["decisions"])
    for key, value in sorted(spec.items()):
        if key.endswith("_file") and isinstance(value, str) and Path(value).is_file():
            found.append(value)
    if any(under_demo_idis(v) for v in spec.values() if isinstance(v, str)):
        found.append(paths.DEMO_IDIS_SUMMARY)
    for key in FOLDER_KEYS:
        value = spec.get(key)
        if isinstance(value, str) and not under_demo_idis(value):
            found += files_under(value)
    return found


# ---------------------------------------------------------------------- construction


def construct_spec(plan: RunPlan, construction: str) -> dict[str, Any]:
    """A construction's setting (config ``construct.<name>``)."""
    return plan.config["construct"][construction]


def construct_inputs(plan: RunPlan, construction: str) -> dict[str, Any]:
    """A construction's source samples and seed distractors (``construct.<name>``)."""
    spec = construct_spec(plan, construction)
    return {
        "samples": [path(paths.SAMPLES, dataset=d) for d in spec["from"]],
        "seeds": spec["seeds"] or "resources/distraction/seeds/seeds.jsonl",
    }


def construct_targets(plan: RunPlan) -> list[str]:
    """The review page of every construction."""
    return [path(paths.REVIEW_PAGE, construction=name) for name in plan.config["construct"]]


def review_decisions(plan: RunPlan, construction: str) -> str:
    """The decisions file of the constructed dataset built from this construction (its
    ``decisions``, else one named after the construction)."""
    built = path(paths.CONSTRUCTION, construction=construction)
    for spec in plan.datasets.values():
        if spec["adapter"] == "constructed" and spec["path"] == built:
            return spec["decisions"]
    return f"resources/distraction/decisions-{construction}.csv"


def existing_decisions(plan: RunPlan, construction: str) -> list[str]:
    """That decisions file where it exists (the review page shows them)."""
    found = review_decisions(plan, construction)
    return [found] if Path(found).exists() else []


# ---------------------------------------------------------------------- imports


def import_inputs(plan: RunPlan, imported: str) -> dict[str, str]:
    """What an import of released outputs reads (``imports`` entry ``imported``): the
    released file, the samples and their report (its skipped bad rows: their released
    answers are left out, counted), the released references, and for a jsonl import
    the condition's manifest (its question ids name the variants)."""
    spec = plan.output_imports[imported]
    files = {
        "released": spec["path"],
        "samples": path(paths.SAMPLES, dataset=spec["dataset"]),
        "samples_report": path(paths.SAMPLES_REPORT, dataset=spec["dataset"]),
    }
    if spec["references"]:
        files["references"] = spec["references"]
    if spec["format"] == "jsonl":
        files["manifest"] = path(
            paths.MANIFEST, dataset=spec["dataset"], condition=spec["condition"]
        )
    return files


def import_spec(plan: RunPlan, imported: str) -> dict[str, Any]:
    """An import of released outputs: its entry, the dataset's adapter and the model's
    thinking markers."""
    spec = plan.output_imports[imported]
    markers = (plan.registry[spec["model"]].get("options") or {}).get("thinking_markers")
    return {
        **spec,
        "adapter": plan.datasets[spec["dataset"]]["adapter"],
        "thinking_markers": markers,
    }


def verdict_inputs(plan: RunPlan, imported: str) -> dict[str, str]:
    """What an import of released verdicts reads: the verdicts and the samples."""
    spec = plan.verdict_imports[imported]
    return {
        "references": spec["references"],
        "samples": path(paths.SAMPLES, dataset=spec["dataset"]),
    }


def verdict_spec(plan: RunPlan, imported: str) -> dict[str, Any]:
    """A verdicts-only ``imports`` entry."""
    return plan.verdict_imports[imported]
