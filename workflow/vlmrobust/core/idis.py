"""The names the Idis study's base datasets share across layers, defined once.

The adapters (:mod:`vlmrobust.data.idis`), the scorers (:mod:`vlmrobust.score.scorers`)
and the demo generators (:mod:`vlmrobust_demo`) all read these; none of them spells a
class label, a class folder or a problem version itself.

- ImageNet-9 (Backgrounds Challenge): nine classes, each a *class name* (the folder
  ``<NN>_<class name>``, e.g. ``02_wheeled vehicle``; ``meta["imagenet9_class"]``) and
  a *label* (the answer a model gives, e.g. ``Vehicle``; ``meta["label"]``).
- Waterbirds: the two labels, by ``y`` (0 landbird, 1 waterbird).
- MathVerse: the four problem versions of the Idis-math task. The concept families
  live with their labels file in :mod:`vlmrobust.core.concept_labels`.
- LogicVista: how an answer names its option letters (:func:`option_letters`), which
  the adapter writes and the scorer reads.

This module imports nothing of the package, so every layer may read it.
"""

from __future__ import annotations

import re

__all__ = [
    "IMAGENET9_CLASSES",
    "IMAGENET9_CLASS_NAMES",
    "IMAGENET9_FOLDERS",
    "IMAGENET9_LABELS",
    "IMAGENET9_QUESTION",
    "ATTRIBUTE_CATEGORIES",
    "ATTRIBUTE_TASKS",
    "AREA_PERTURBATIONS",
    "IDIS_TASKS",
    "MATHVERSE_VERSIONS",
    "WATERBIRDS_LABELS",
    "WATERBIRDS_QUESTION",
    "attribute_categories",
    "attribute_roles",
    "option_letters",
]

#: the attribute-analysis task of each Idis base benchmark (adapter -> task): which
#: attribute categories a trace is sorted into (docs/studies/idis.md)
IDIS_TASKS: dict[str, str] = {
    "imagenet9": "perception",
    "mathverse": "math",
    "waterbirds": "waterbirds",
}
#: perturbations whose variants carry a distractor area (placed objects, figures or
#: rendered text, or the released edited images)
AREA_PERTURBATIONS = ("objects", "typographic", "size", "diagram", "handwritten", "idis-release")

#: (class name, label) of the nine ImageNet-9 classes, in class order (00 ... 08)
IMAGENET9_CLASSES: tuple[tuple[str, str], ...] = (
    ("dog", "Dog"),
    ("bird", "Bird"),
    ("wheeled vehicle", "Vehicle"),
    ("reptile", "Reptile"),
    ("carnivore", "Carnivore"),
    ("insect", "Insect"),
    ("musical instrument", "Instrument"),
    ("primate", "Primate"),
    ("fish", "Fish"),
)
IMAGENET9_CLASS_NAMES: tuple[str, ...] = tuple(name for name, _ in IMAGENET9_CLASSES)
IMAGENET9_LABELS: tuple[str, ...] = tuple(label for _, label in IMAGENET9_CLASSES)
#: the class folders (``<root>/original/<split>/<folder>``), in class order
IMAGENET9_FOLDERS: tuple[str, ...] = tuple(
    f"{i:02d}_{name}" for i, name in enumerate(IMAGENET9_CLASS_NAMES)
)
#: the question every ImageNet-9 sample asks (the Idis perception task)
IMAGENET9_QUESTION = (
    "Which category best describes the main object in the image? Choose exactly one "
    "from: " + ", ".join(IMAGENET9_LABELS) + "."
)

#: the two Waterbirds labels, by ``y`` (0 landbird, 1 waterbird)
WATERBIRDS_LABELS: tuple[str, ...] = ("Landbird", "Waterbird")
WATERBIRDS_QUESTION = "Is the bird in the image a landbird or a waterbird?"

#: the MathVerse problem versions of the Idis-math task, from text- to vision-heavy
MATHVERSE_VERSIONS: tuple[str, ...] = (
    "Text Dominant",
    "Text Lite",
    "Vision Intensive",
    "Vision Dominant",
)

_LETTER_SPLIT = re.compile(r"\s*(?:,|;|&|\band\b|\s)\s*", re.I)


def option_letters(text: str) -> list[str] | None:
    """The option letters an answer names (``"A, C"``, ``"c and a"`` -> ``["A", "C"]``:
    upper case, sorted, no repeats); None when the text is anything but letters A-Z
    (LogicVista's answers: one letter, or several for a multiple-answer question)."""
    parts = [p for p in _LETTER_SPLIT.split(text.strip()) if p]
    if not parts or not all(len(p) == 1 and "A" <= p.upper() <= "Z" for p in parts):
        return None
    return sorted({p.upper() for p in parts})


#: the attribute categories a trace of each task is sorted into: perception, one per
#: ImageNet-9 label (lower case) and ``other``; math, per sentence; waterbirds, the bird
#: and its background
ATTRIBUTE_CATEGORIES: dict[str, tuple[str, ...]] = {
    "perception": (*(label.lower() for label in IMAGENET9_LABELS), "other"),
    "math": ("target_related", "distractor_related", "other"),
    "waterbirds": ("bio", "env"),
}
#: the attribute tasks (the values of :data:`IDIS_TASKS`)
ATTRIBUTE_TASKS: tuple[str, ...] = tuple(ATTRIBUTE_CATEGORIES)
_PERCEPTION_CATEGORIES = ATTRIBUTE_CATEGORIES["perception"]
_LABEL_BY_CLASS_NAME = {name: label for name, label in IMAGENET9_CLASSES}


def _perception_category(label: str, what: str) -> str:
    """The attribute category of an ImageNet-9 label (``Vehicle`` -> ``vehicle``; the
    class name ``wheeled vehicle`` is read as its label too); ``irrelevant`` -> ``other``."""
    text = str(label).strip()
    if text.lower() == "irrelevant":
        return "other"
    text = _LABEL_BY_CLASS_NAME.get(text.lower(), text)
    if text.lower() not in _PERCEPTION_CATEGORIES[:-1]:
        raise ValueError(
            f"{what} {label!r} is not an ImageNet-9 label ({', '.join(IMAGENET9_LABELS)}) "
            "nor 'irrelevant'"
        )
    return text.lower()


def attribute_categories(
    task: str, distractor_classes: list[str] | tuple[str, ...] | None, target_label: str | None
) -> dict[str, list[str]]:
    """Which attribute categories of a trace count as *distractor* and as *target*
    attributes (the Idis paper, §6): ``{"distractor": [...], "target": [...]}``.

    - ``perception`` (visual and typographic variants alike): target = the category of
      the sample's label (``Vehicle`` -> ``vehicle``); distractor = the categories of
      ``distractor_classes`` (the class the placed objects belong to, or the rendered
      class name; ``irrelevant`` -> ``other``). A distractor class equal to the target
      class (aligned semantics) shares the target's category, so it gives no distractor
      category: aligned traces have a target ratio but no distractor ratio. A clean
      image (no distractor classes) has no distractor category either.
    - ``math``: distractor = ``distractor_related``, target = ``target_related``.
    - ``waterbirds``: the background is the distractor: distractor = ``env``,
      target = ``bio``.

    An unknown task or perception label is an error naming it."""
    if task == "math":
        return {"distractor": ["distractor_related"], "target": ["target_related"]}
    if task == "waterbirds":
        return {"distractor": ["env"], "target": ["bio"]}
    if task != "perception":
        raise ValueError(f"attribute task {task!r} is not one of {', '.join(ATTRIBUTE_TASKS)}")
    if not target_label:
        raise ValueError("perception attribute categories need the sample's label (meta.label)")
    target = _perception_category(target_label, "target label")
    distractor: list[str] = []
    for cls in distractor_classes or []:
        cat = _perception_category(cls, "distractor class")
        if cat == target:
            return {"distractor": [], "target": [target]}
        if cat not in distractor:
            distractor.append(cat)
    return {"distractor": distractor, "target": [target]}


# -- attribute roles (the Idis attribute judge's categories) ----------------------------


def attribute_roles(
    task: str,
    judge_row: dict,
    variant_params: dict | None,
    sample_meta: dict | None,
) -> dict[str, list[str]]:
    """The trace's distractor and target attribute phrases, from one attribute judge row:
    ``{"distractor": [phrases], "target": [phrases]}``, the judge's kept phrases of the
    categories :func:`attribute_categories` names for the task, in the row's order (a
    category the row does not list has none).

    The categories come from the variant's ``params["distractor_classes"]`` and the
    sample's ``meta["label"]`` (perception; read only there): an aligned variant (a
    distractor class equal to the target class) and a clean one have no distractor
    phrases, so their distractor ratio is not defined and aligned is reported
    separately. Math: ``distractor_related`` / ``target_related``; waterbirds: ``env`` /
    ``bio``. Pure (reads only its arguments); the attention-blocking stage and the
    attribute metrics share it. A judge row with an error has no attributes: an error
    naming its key.
    """
    key = judge_row.get("key", "?")
    if judge_row.get("error"):
        raise ValueError(
            f"attribute judge row {key!r} failed ({judge_row['error']}): it has no attributes"
        )
    if task == "perception":
        classes = (variant_params or {}).get("distractor_classes")
        label = (sample_meta or {}).get("label")
        if not label:
            raise ValueError(
                f"attribute judge row {key!r}: the sample has no meta.label (the perception target)"
            )
    else:
        classes = label = None
    categories = attribute_categories(task, classes, label)
    attributes = judge_row.get("attributes") or {}
    return {
        role: [p for c in cats for p in attributes.get(c) or []]
        for role, cats in categories.items()
    }
