"""Review candidates from the variants of an Idis image perturbation.

The Idis paper has people check its constructed images (its appendix A.3). Here the
variant manifest of an Idis condition (objects, typographic, diagram, handwritten,
size, or the released images) is turned into the review page's candidates, one per
variant, and a person decides each one on the criteria of the ``idis-perception`` or
``idis-math`` set (:data:`~vlmrobust.core.decisions.CRITERIA_SETS`) with
``vlmrobust idis-review``. The decisions file is keyed by variant id; a condition's
``verification`` key then drops the rejected variants when the variants are built
(:mod:`vlmrobust.perturb.variants`).

A candidate shows the sample's own image (``original_image``) beside the variant's
(``edited_image``), the variant's question, the sample's answer and choices, and what
was inserted: a one-line summary as the distractor description (kind, semantics,
number, the placed objects or figures and their classes, and the target's class or
concept family that aligned / conflicting refer to) and the variant's params in
full under "more" (``kind``, ``semantics``, ``n``, ``distractors``,
``distractor_classes``, ``size``, the target class or concept family of the sample, the
mask file, the placements).

One decisions file belongs to one condition: variant ids name the sample, semantics
and number of distractors, not the condition, so two conditions can share ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.decisions import Candidate, DecisionError
from ..core.records import Sample, read_samples, read_variants

__all__ = ["IDIS_IMAGE_KINDS", "idis_candidates", "inserted_summary"]

#: the Idis variant kinds whose image carries inserted distractors (what the A.3
#: criteria judge); textual and resolution variants have none
IDIS_IMAGE_KINDS = ("visual", "typographic", "size")

# params shown as their own fields; the rest go under "other_params"
_SHOWN = ("kind", "semantics", "n", "distractors", "distractor_classes", "size")
_HIDDEN = ("placed", "attempt_log")


def _names(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def inserted_summary(params: dict[str, Any]) -> str:
    """What a variant inserted, in one line, e.g. ``visual distractors (conflicting),
    n = 2: tire, bumper; class: Vehicle``."""
    kind = params.get("kind")
    head = f"{kind} distractors" if kind else "distractors"
    if params.get("semantics"):
        head += f" ({params['semantics']})"
    if params.get("n") is not None:
        head += f", n = {params['n']}"
    if params.get("size"):
        head += f", size {params['size']}"
    parts = [head]
    items = _names(params.get("distractors"))
    if items:
        parts[0] += f": {items}"
    classes = _names(params.get("distractor_classes"))
    if classes:
        parts.append(f"class: {classes}")
    return "; ".join(parts)


def idis_candidates(manifest_path: str | Path, samples_path: str | Path) -> list[Candidate]:
    """The review candidates of an Idis variant manifest, one per variant, in its order.

    ``samples_path`` is the samples JSONL the variants were built from (each variant's
    ``sample_id`` must be in it). A candidate's ``sample_id`` is the variant id (the key
    of the decisions file); ``original_image`` is the sample's image and
    ``edited_image`` the variant's. Errors (a :class:`DecisionError` naming the file and
    the variant): a variant whose sample is missing, whose ``params["kind"]`` is not one
    of :data:`IDIS_IMAGE_KINDS` (textual / resolution variants insert nothing into the
    image), without an image or with more than one image, or a variant id seen twice.
    """
    samples: dict[str, Sample] = {s.sample_id: s for s in read_samples(samples_path)}
    out: list[Candidate] = []
    seen: set[str] = set()
    for i, v in enumerate(read_variants(manifest_path), 1):
        where = f"{manifest_path}:{i}: variant {v.variant_id!r}"
        if v.variant_id in seen:
            raise DecisionError(f"{where} appears twice")
        seen.add(v.variant_id)
        params = dict(v.params or {})
        kind = params.get("kind")
        if kind not in IDIS_IMAGE_KINDS:
            raise DecisionError(
                f"{where}: params.kind is {kind!r}; the Idis review judges image "
                f"distractors ({', '.join(IDIS_IMAGE_KINDS)})"
            )
        sample = samples.get(v.sample_id)
        if sample is None:
            raise DecisionError(f"{where}: its sample {v.sample_id!r} is not in {samples_path}")
        if len(v.images) != 1 or len(sample.images) != 1:
            raise DecisionError(
                f"{where}: has {len(v.images)} image(s) and its sample {len(sample.images)}; "
                "the review shows one original and one edited image"
            )
        extra: dict[str, Any] = {k: params.get(k) for k in _SHOWN if k in params}
        extra["condition"] = v.condition
        extra["dataset"] = v.dataset
        extra["base_sample_id"] = v.sample_id
        for key in ("label", "concept_family", "problem_version"):
            if sample.meta.get(key) is not None:
                extra[f"sample_{key}"] = sample.meta[key]
        if v.masks:
            extra["mask"] = v.masks[0]
        if params.get("placed") is not None:
            extra["placed"] = params["placed"]
        rest = {k: p for k, p in params.items() if k not in _SHOWN and k not in _HIDDEN}
        if rest:
            extra["other_params"] = rest
        if v.question != sample.question:
            extra["original_question"] = sample.question
        description = inserted_summary(params)
        target = sample.meta.get("label") or sample.meta.get("concept_family")
        if target:  # what "aligned" / "conflicting" are relative to
            what = "class" if sample.meta.get("label") else "concept family"
            description += f"; target {what}: {target}"
        out.append(
            Candidate(
                sample_id=v.variant_id,
                question=v.question,
                answer=str(sample.answer),
                original_image=sample.images[0],
                edited_image=v.images[0],
                choices=[str(c) for c in sample.choices],
                distractor_description=description,
                extra=extra,
            )
        )
    return out
