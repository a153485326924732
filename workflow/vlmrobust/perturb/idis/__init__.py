"""The image perturbations of the Idis study ("images with distractors").

Six perturbations, each a condition's ``perturbation`` value (config keys in
``workflow/schemas/config.schema.yaml``, checked again by ``prepare``):

* ``objects`` — Idis-perception visual distractors. The image (and the target mask,
  ``meta.target_masks[0]``: any channel > 16 is the target) is resized to ``canvas`` x
  ``canvas`` (bicubic), then ``k`` distinct objects of one semantic category are pasted:
  ``aligned`` = objects of the target's class, ``conflicting`` = objects of ONE other
  class (drawn per variant, recorded in ``distractor_classes``), ``irrelevant`` = the
  irrelevant list (``resources/idis/objects.yaml``, the Idis paper's Table 3). Each
  object is an RGBA cut-out (``<segments>/<object-slug>/*.png``, one file drawn per
  object from the sorted listing), cropped to its alpha's bounding box, its longer side
  drawn from ``scale`` x canvas. The boxes avoid each other and the target mask's
  bounding box by ``margin`` x canvas; when they do not fit, all of a variant's boxes
  are scaled down in steps of 0.85 (``params.fit_scale``) until they fit or a longer
  side would drop under ``min_scale`` x canvas, and then the variant is excluded
  (reason ``no-room``). Every pixel outside the pasted alpha is the resized original's,
  so the target is never touched. The mask is the union of the pasted alpha > 0.
  ``editor: gemini | openai`` sends the resized image with a prompt (keep the target's
  identity, location and appearance; insert the named objects) to an image-editing
  API instead: the edit is cached by content (prompt, the input's pixels, model,
  options) under ``cache_dir``, so a rerun makes no call; a generative edit has no
  mask and no boxes (``apply`` returns ``(image, None, info)`` with ``boxes: None``,
  ``distractor_area: None``), and what it changed outside the objects is unknown.
* ``typographic`` — Idis-perception typographic distractors: the label of a NON-target
  class (e.g. "Bird") written ``k`` times (PIL's built-in scalable font; size drawn
  from ``font_size`` x canvas; a colour drawn from :data:`TEXT_COLORS` with a
  contrasting outline), placed like the objects. One variant per (class, k); the
  classes are the eight others (``classes: all-other``) or that many drawn per sample.
  The mask is the exact glyph pixels (alpha > 0 of the rendered text).
* ``diagram`` — Idis-math visual distractors: the target diagram is pasted UNSCALED at
  the centre of a white square canvas (``canvas``, grown to ``ceil(longer side / 0.6)``
  when the diagram is larger than 60 % of it, but never past the dataset's
  ``max_pixels``: a diagram too large for that canvas is scaled down to fit, recorded in
  ``params.target_source_size``; docs/large-images.md), and ``k`` whole figures around it:
  ``aligned`` = diagrams of other samples of the same concept family
  (``meta.concept_family``), ``conflicting`` = diagrams of ONE other family,
  ``irrelevant`` = table images of LogicVista (``irrelevant_samples``: the samples whose
  ``meta.specific_capability`` contains "table"). Pools are built once (``setup``) from
  every sample of the dataset, one entry per distinct image file content, so a figure is
  never the target's own diagram (nor a copy of it under another problem version). A
  figure's longer side is at most ``figure_scale`` x canvas (never enlarged) and is
  scaled down further when the figures do not fit (``params.scales``). A sample without
  a concept family is excluded from aligned and conflicting (``no-concept-family``); a
  pool with fewer than ``k`` figures excludes the variant (``pool-too-small``).
* ``handwritten`` — Idis-math typographic distractors: ``k`` handwritten expression
  images (a folder of images, or MathWriting from the hub, cached to ``cache_dir``)
  placed around the unscaled diagram like ``diagram`` does; ``name`` is the semantics
  label (``handwritten`` or ``mathwriting``).
* ``size`` — Idis-manual: ``n`` cut-outs of one semantic category whose total object
  area (their alpha > 0 pixels) is a given fraction of the canvas: ``sizes`` maps a
  name to that fraction (default small 3 %, medium 8 %, large 15 %). The objects of a
  sample are drawn once and shared by its sizes, so only the size changes; each object
  gets the same share of the area, its size chosen by measuring its alpha > 0 pixels as
  resized (a few corrected guesses; integer sizes leave a small difference:
  ``placed.distractor_area`` is the exact count). Boxes never shrink here; a size that
  does not fit beside the target is excluded (``no-room``).
* ``resize`` — the visual-token ablation: a square bicubic resize to each of
  ``resolutions``; no mask.

Every random choice (objects, classes, pool figures, cut-out files, sizes, colours,
positions) is made in ``plan`` with ``rng_for(seed, condition, variant_id)`` (the size
perturbation's shared objects: ``rng_for(seed, condition, sample_id, "objects")``) and
recorded in the variant's params; ``apply`` only draws what the params say, so it is
deterministic. Variant params follow the study's conventions: ``kind``, ``semantics``,
``n``, ``distractors`` (object names, figure sample ids, expression file stems),
``distractor_classes``; ``placed`` (one per image) = ``{"boxes", "items",
"target_box", "target_area", "distractor_area", "canvas"}``. These perturbations
(except ``resize``) need samples with exactly one image.

What ``prepare`` / ``setup`` build for ``plan`` (the cut-out listing ``_listing``, the
figure pools ``_pools``) sits in the spec under a key that starts with ``_``: the stage
does not copy such keys into the parameters of the image tasks handed to the worker
processes, and ``apply`` needs none of it.

One module per perturbation registers it: :mod:`.objects`, :mod:`.typographic`,
:mod:`.diagram`, :mod:`.handwritten`, :mod:`.size`, :mod:`.resize`. What they share:
:mod:`.common` (the object lists, canvas and image helpers, the checks of a
condition's settings, fitting the boxes, and planning one variant or excluding it for
want of room), :mod:`.perception` (the target of ``objects``, ``typographic`` and
``size``, the cut-outs, pasting them) and :mod:`.figures` (the canvas around the
diagram and the figures placed on it, for ``diagram`` and ``handwritten``). The
public names are importable from this package. The ``textual`` perturbation
(Idis-math's textual distractors) is :mod:`vlmrobust.perturb.textual`.
"""

# each module registers its perturbation, in this order
# isort: off
from . import objects, typographic, diagram, handwritten, size, resize  # noqa: F401

# isort: on
from .common import (
    DEFAULT_OBJECTS_FILE,
    IMAGE_SUFFIXES,
    SEMANTICS,
    ObjectLists,
    load_objects,
    object_slug,
    to_canvas,
)
from .handwritten import MATHWRITING_DATASET, load_mathwriting
from .objects import objects_prompt
from .typographic import TEXT_COLORS, render_text

__all__ = [
    "DEFAULT_OBJECTS_FILE",
    "IMAGE_SUFFIXES",
    "MATHWRITING_DATASET",
    "SEMANTICS",
    "TEXT_COLORS",
    "ObjectLists",
    "load_mathwriting",
    "load_objects",
    "object_slug",
    "objects_prompt",
    "render_text",
    "to_canvas",
]
