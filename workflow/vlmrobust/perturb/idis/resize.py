"""The ``resize`` perturbation: the visual-token ablation of the Idis study, a square
bicubic resize to each of ``resolutions`` (no mask)."""

from __future__ import annotations

from typing import Any

from PIL import Image

from ...clients.vlm.media import to_rgb
from ...core.records import Sample
from ...core.seeding import derive_seed
from ..variants import Excluded, Perturbation, VariantPlan, register
from .common import _BICUBIC, _as_ints, _info


def _resize_pixels(spec: dict[str, Any]) -> tuple[str, int]:
    """``Perturbation.pixels`` of ``resize``: its largest resolution, squared."""
    return "resolutions", max(int(r) for r in spec["resolutions"]) ** 2


def _prepare_resize(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the schema validated it (the schema says all of it)."""
    out = dict(spec)
    _as_ints(out, "resolutions")
    return out


def _plan_resize(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    sid = sample.sample_id
    return [
        VariantPlan(
            f"{sid}__res{r}",
            {"kind": "resolution", "semantics": None, "n": None, "resolution": r},
            derive_seed(seed, condition, f"{sid}__res{r}"),
        )
        for r in spec["resolutions"]
    ]


def _apply_resize(
    image: Image.Image, params: dict[str, Any], seed: int
) -> tuple[Image.Image, None, dict[str, Any]]:
    r = int(params["resolution"])
    rgb = to_rgb(image)
    out = rgb.copy() if rgb.size == (r, r) else rgb.resize((r, r), _BICUBIC)
    info = {**_info([], [], {}, 0, (r, r)), "source_size": list(image.size)}
    return out, None, info


register(
    Perturbation("resize", _prepare_resize, _plan_resize, _apply_resize, pixels=_resize_pixels)
)
