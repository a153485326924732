"""Jobs of the perturbation stage: a condition's variants, and the Idis distractor areas."""

from __future__ import annotations

import time
from pathlib import Path

from . import json_object, log


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
