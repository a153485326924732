"""Perturbations: conditions turn samples into variants (docs/architecture.md).

* :data:`PERTURBATIONS` — the registry, name → :class:`Perturbation` (``none``,
  ``distraction``, ``corruption``, ``mask``, ``idis-release``; the Idis image
  perturbations ``objects``, ``typographic``, ``diagram``, ``handwritten``, ``size``,
  ``resize`` of :mod:`.idis`; later ones plug in with :func:`register`).
  A perturbation's ``apply`` is a plain function ``(image, params, seed) -> image`` or
  ``-> (image, mask)``.
* :func:`build_variants` — the stage: a samples JSONL → a variant manifest + images.
* :func:`corrupt_image` — the 20 vision corruptions of Distract-Bench
  (:data:`CORRUPTION_METHODS`, paper Table 7 order).
"""

from . import (
    idis,  # noqa: F401  (registers objects, typographic, diagram, handwritten, size, resize)
    idis_release,  # noqa: F401  (registers "idis-release")
    masking,  # noqa: F401  (registers "mask")
    textual,  # noqa: F401  (registers "textual")
)
from .corruption import CORRUPTION_METHODS, SEVERITIES, corrupt_image, result_mode
from .variants import (
    PERTURBATIONS,
    Excluded,
    Perturbation,
    VariantPlan,
    build_variants,
    corruption_variant_id,
    register,
)

__all__ = [
    "CORRUPTION_METHODS",
    "Excluded",
    "PERTURBATIONS",
    "SEVERITIES",
    "Perturbation",
    "VariantPlan",
    "build_variants",
    "corrupt_image",
    "corruption_variant_id",
    "register",
    "result_mode",
]
