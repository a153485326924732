"""Training targets of the demo models: the answer, and the templated reasoning traces.

The demo models learn from the demo training split (:mod:`vlmrobust_demo.train`). A
*direct* model (``demo-base``) is trained to answer with the scorer's canonical answer
only. A *thinking* model (``demo-reasoning``, ``demo-extra``) is trained to first write
a short ``<think>…</think>`` trace, then the answer. The trace names what is in the
image, from the facts the demo generator recorded in each sample's ``meta`` (the object
and its background, the shapes and bars of a figure, the chart's values, the sign's
words, the geometry givens, the premise in a region), and varies in length: every
sentence but the last is kept or dropped at random (a generator per sample), and a
filler sentence is sometimes added.

Nothing here looks at pixels: the traces are *targets*; what a trained tiny model
writes at test time is whatever it learned to associate with the image.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vlmrobust.core.records import Sample

from .data import SOURCE_FAMILY

__all__ = [
    "DESCRIBE_PROMPT",
    "answer_target",
    "crm_chain",
    "describe",
    "think_trace",
    "target_text",
]

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

_FILLERS = (
    "Let me look at the image carefully.",
    "Let me check this again.",
    "I need to read the figure first.",
    "Let me think step by step.",
)


def _an(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def answer_target(sample: Sample) -> str:
    """What a model should answer: the sample's canonical answer as the scorer reads it
    (a letter, a number as text, ``yes``/``no``, a class label, the text)."""
    return str(sample.answer)


def _objects(meta: dict[str, Any], answer: str) -> list[str]:
    cls = str(meta.get("imagenet9_class") or meta.get("label") or "object")
    out = [f"The image shows {_an(cls)}."]
    if meta.get("background"):
        out.append(f"It is in front of {_an(str(meta['background']))} background.")
    if "flipped" in meta:
        out.append(f"It faces {'left' if meta['flipped'] else 'right'}.")
    out.append(f"So the category is {meta.get('label', cls)}.")
    return out


def _yesno(meta: dict[str, Any], answer: str) -> list[str]:
    out = []
    if meta.get("figure_kind") == "shapes":
        objs = [f"{o['colour']} {o['shape']}" for o in meta.get("objects", [])]
        out.append(f"I see {len(objs)} shapes: {_join([_an(o) for o in objs])}.")
    elif meta.get("figure_kind") == "bars":
        colours = meta.get("colours") or {}
        out.append(f"There are {len(colours)} bars.")
        if colours:
            out.append(". ".join(f"Bar {k} is {v}" for k, v in colours.items()) + ".")
    out.append(f"So the answer is {answer}.")
    return out


def _counted(items: list | None, sentence: str) -> list[str]:
    """``sentence`` with the number of ``items`` filled in, as a list of one sentence;
    none where there are no items."""
    return [sentence.format(len(items))] if items else []


def _diagram(meta: dict[str, Any], answer: str) -> list[str]:
    out = _counted(meta.get("shapes"), "The figure has {} shapes.")
    if meta.get("kind") == "count" and meta.get("target_colour"):
        out.append(f"I count {meta.get('answer_value')} {meta['target_colour']} shapes.")
    elif meta.get("answer_value") is not None:
        out.append(f"The value is {meta['answer_value']}.")
    out.append(f"The matching option is {answer}.")
    return out


def _chart(meta: dict[str, Any], answer: str) -> list[str]:
    values = meta.get("values") or {}
    out = [f"The {meta.get('chart_type', 'chart')} chart shows {len(values)} values."]
    named = [f"{k} is {v:g}" for k, v in values.items() if k in (meta.get("operands") or [])]
    if named and len(named) <= 3:
        out.append(". ".join(named) + ".")
    out.append(f"The answer is {answer}.")
    return out


def _text(meta: dict[str, Any], answer: str) -> list[str]:
    words = [str(w) for w in meta.get("rendered_text") or []][:3]
    out = [f"The image shows {_an(str(meta.get('text_kind') or 'sign'))}."]
    if words:
        out.append(f"It reads {' '.join(words)}.")
    out.append(f"The answer is {answer}.")
    return out


def _geometry(meta: dict[str, Any], answer: str) -> list[str]:
    out = [f"The diagram shows {_an(str(meta.get('concept_family') or 'figure'))} problem."]
    givens = [str(g) for g in (meta.get("text_givens") or []) + (meta.get("image_givens") or [])]
    if givens:
        out.append(f"We know {_join(givens[:3])}.")
    out.append(f"So the answer is {answer}.")
    return out


def _premise(meta: dict[str, Any], answer: str) -> list[str]:
    out = _counted(meta.get("visual_premises"), "The image has {} parts.")
    out.append(f"The part asked about shows {_lower_first(answer)}")
    return out


#: demo family of a sample, from the source family the generator records (VisArgs-style
#: samples of the premises images carry none)
_FAMILY_OF_SOURCE = {source: family for family, source in SOURCE_FAMILY.items()}


def _family(sample: Sample) -> str:
    return _FAMILY_OF_SOURCE.get(str(sample.meta.get("source_family") or ""), "premises")


def think_trace(sample: Sample, rng: np.random.Generator) -> str:
    """A templated reasoning trace for ``sample`` (module docstring): every sentence
    but the conclusion kept with probability 0.7, a filler sentence first with
    probability 0.3."""
    sentences = _sentences(sample)
    kept = [s for s in sentences[:-1] if rng.random() < 0.7]
    if rng.random() < 0.3:
        kept.insert(0, _FILLERS[int(rng.integers(len(_FILLERS)))])
    return " ".join([*kept, sentences[-1]])


#: The prompt of the auxiliary ``describe`` task (module docstring of vlmrobust_demo.train).
DESCRIBE_PROMPT = "Describe the image."


def describe(sample: Sample) -> str:
    """Everything the trace of ``sample`` could say about its image, in full (the
    ``describe`` task's target): every sentence of the trace but the conclusion; for a
    premises image, each region's premise."""
    meta = sample.meta
    if _family(sample) == "premises" and meta.get("locations"):
        return " ".join(
            f"The {loc} part shows {_lower_first(p)}"
            for loc, p in zip(meta["locations"], meta.get("visual_premises") or [], strict=False)
        )
    return " ".join(_sentences(sample)[:-1])


_TEMPLATES = {
    "objects": _objects,
    "yesno": _yesno,
    "diagram": _diagram,
    "chart": _chart,
    "text": _text,
    "geometry": _geometry,
    "premises": _premise,
}


def _sentences(sample: Sample) -> list[str]:
    """The trace's sentences for ``sample``'s family; the last one is the conclusion."""
    return _TEMPLATES[_family(sample)](sample.meta, answer_target(sample))


def crm_chain(sample: Sample) -> str:
    """The numbered chain a ``crm-cot`` prompt is trained to write for a VisArgs-style
    sample: the asked premise, its commonsense premise, and a conclusion."""
    meta = sample.meta
    k = int(meta.get("premise_index", 0))
    common = meta.get("commonsense_premises") or []
    steps = [f"The image shows {_lower_first(sample.answer)}"]
    if k < len(common):
        steps.append(str(common[k]))
    steps.append(f"Conclusion: {sample.answer}")
    return "\n".join(f"{i}. {s}" for i, s in enumerate(steps, start=1))


def target_text(
    sample: Sample,
    prompt: str,
    style: str,
    rng: np.random.Generator,
) -> str:
    """The text the model is trained to generate for ``sample`` under ``prompt``.

    ``describe``: the full description (:func:`describe`); ``crm-cot``: the numbered
    chain (:func:`crm_chain`); ``crm-answer``: the answer;
    any other prompt: the answer (``style`` ``direct``), or ``<think> trace </think>``
    then the answer (``style`` ``think``).
    """
    if prompt == "describe":
        return describe(sample)
    if prompt == "crm-cot":
        return crm_chain(sample)
    answer = answer_target(sample)
    if prompt == "crm-answer" or style == "direct":
        return answer
    if style != "think":
        raise ValueError(f"demo training style must be 'direct' or 'think', got {style!r}")
    return f"{THINK_OPEN} {think_trace(sample, rng)}{THINK_CLOSE} {answer}"
