"""Jobs of the perturbation stage: a condition's variants, and the Idis distractor areas."""

from __future__ import annotations

import time
from pathlib import Path

from ..core.commands import Command, arg, required
from ..core.pixels import DEFAULT_MAX_PIXELS
from . import json_object, log
from .args import MANIFEST, SAMPLES, SEED, spec


def variants(
    condition: str,
    spec: str,
    samples: str,
    seed: int,
    threads: int,
    max_pixels: int,
    image_format: str,
    out: str,
) -> None:
    """Apply ``condition`` (its configuration ``spec``) to a dataset's samples, no image
    beyond the dataset's ``max_pixels``, written images stored as ``image_format``."""
    from ..perturb import build_variants

    t0 = time.perf_counter()
    n = build_variants(
        Path(samples),
        condition,
        json_object(spec),
        seed,
        Path(out),
        threads=threads,
        max_pixels=max_pixels,
        image_format=image_format,
    )
    log.info(
        "condition %s: %d variants written to %s (%.1f s)",
        condition,
        n,
        out,
        time.perf_counter() - t0,
    )


def idis_areas(spec: str, manifest: str, samples: str, out: str) -> None:
    """The distractor and target areas of each variant of an Idis condition."""
    from ..perturb.areas import measure_areas

    summary = measure_areas(manifest, samples, json_object(spec), out)
    log.info("%s: %s", out, summary)


#: the perturbation stage's commands
COMMANDS: dict[str, Command] = {
    "variants": Command(
        variants,
        "samples -> variants: apply one condition",
        (
            required("--condition", help="the condition (key under `conditions`)"),
            spec("the condition's configuration"),
            SAMPLES,
            SEED,
            arg("--threads", type=int, default=1, help="worker processes"),
            arg(
                "--max-pixels",
                type=int,
                default=DEFAULT_MAX_PIXELS,
                help="the dataset's max_pixels: no image beyond it (default "
                f"{DEFAULT_MAX_PIXELS}, samples.max_pixels' default)",
            ),
            arg(
                "--image-format",
                choices=["png", "webp"],
                default="png",
                help="how written images are stored (config variants.format; default png)",
            ),
            required("--out", help="variant manifest JSONL (images go beside it)"),
        ),
    ),
    "idis-areas": Command(
        idis_areas,
        "variants -> distractor and target areas and r_area per variant",
        (
            spec("the area setting (idis.areas)"),
            MANIFEST,
            required("--samples", help="samples JSONL (target masks, original images)"),
            required("--out", help="areas JSONL (one row per variant)"),
        ),
    ),
}
