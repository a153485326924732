"""The names the Idis study's base datasets share across layers, defined once.

The adapters (:mod:`vlmrobust.data.idis`), the scorers (:mod:`vlmrobust.score.scorers`)
and the demo generators (:mod:`vlmrobust.demo`) all read these; none of them spells a
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
    "MATHVERSE_VERSIONS",
    "WATERBIRDS_LABELS",
    "WATERBIRDS_QUESTION",
    "option_letters",
]

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
