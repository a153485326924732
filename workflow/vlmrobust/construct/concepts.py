"""The concept-family labeler: proposes each MathVerse problem's diagram family.

Idis-math's aligned and conflicting visual distractors are figures of the same or of
another *concept family* as the problem's diagram: ``triangle``, ``quadrilateral``,
``circle`` or ``3d``. MathVerse does not say which, so this step proposes a family per
problem (``meta["problem_index"]``; the versions of a problem share one diagram) and a
person confirms it. The labels live in a CSV::

    problem_index,concept_family,source,status

(the format of :mod:`vlmrobust.core.concept_labels`, which the review page and the
MathVerse adapter read). A proposal's ``concept_family`` is one of :data:`LABELS`
(``other`` = none of the four families, ``unsure`` = several fit or too little is
said), or empty when the LLM gave no valid label; ``source`` is ``rules`` or the LLM
(``<backend>/<model>``); ``status`` is ``proposed`` for a machine's label, and a person
makes it ``confirmed`` (one of the four families) or ``rejected``. Only confirmed rows of one of the four families drive aligned / conflicting
variants (the MathVerse adapter reads ``concept_families.csv`` and keeps ``status ==
confirmed``); every other problem gets none (excluded, ``no-concept-family``).

:func:`write_labels` keeps the rows a person has decided (``confirmed``, ``rejected``)
exactly as they are and proposes labels for the other problems only, so labelling again
never overwrites a human decision (a stale proposal is proposed again).

Two labelers (:func:`propose_labels`):

- **offline rules** (:func:`rule_family`): keywords in the problem's text (the longest
  question among its versions: Text Dominant says the most) and in its subject /
  subfield; see the function for the lists and the tie rule;
- **an LLM** (spec ``{backend: openai | gemini, model, base_url, api_key_env, options,
  temperature, max_tokens, cache_dir}``): the prompt ``resources/idis/
  concept-label-prompt.txt``, strict JSON ``{"concept_family": ...}``
  (:data:`CONCEPT_SCHEMA`), every call cached by content.

Why here (``construct``) and not in ``judges``: like the VisArgs question writer, this
is an LLM step that prepares an input file a dataset adapter reads before any model
runs; judges read model outputs. (The data layer itself may call no LLM.)
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from ..core.concept_labels import CONCEPT_FAMILIES, LABEL_COLUMNS
from ..core.concept_labels import read_labels as read_label_file
from ..core.concept_labels import write_labels as write_label_file
from ..core.records import Sample

__all__ = [
    "CONCEPT_SCHEMA",
    "CSV_FIELDS",
    "FAMILIES",
    "LABELS",
    "label_prompt",
    "problems",
    "propose_labels",
    "rule_family",
    "write_labels",
]

log = logging.getLogger(__name__)

#: the concept families (one definition, in core)
FAMILIES = CONCEPT_FAMILIES
LABELS = (*FAMILIES, "other", "unsure")
CSV_FIELDS = LABEL_COLUMNS  # problem_index, concept_family, source, status
#: the status a machine writes; any other (confirmed, rejected) is a person's and is kept
MACHINE_STATUSES = ("proposed",)
PROMPT_FILE = (
    Path(__file__).resolve().parents[3] / "resources" / "idis" / "concept-label-prompt.txt"
)
#: what errors about the labeler's setting (``vlmrobust concepts --spec``) name
SPEC_NAME = "concept labeler"

CONCEPT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"concept_family": {"enum": list(LABELS)}},
    "required": ["concept_family"],
    "additionalProperties": False,
}

# "square" the shape, not "square root", "squared" or "square units / cm / metres"
_SQUARE = r"squares?\b(?!\s*(?:root|units?|unit|cm|mm|km|m\b|meters?|metres?|feet|inch|inches))"
_KEYWORDS: dict[str, tuple[str, ...]] = {
    "triangle": (r"triangle", r"\bisosceles\b", r"\bequilateral\b", r"\bhypotenuse\b"),
    "quadrilateral": (
        r"\bquadrilateral",
        r"\bparallelogram",
        r"\brectangle",
        r"\brectangular\b(?!\s+(?:box|prism|solid|block|cuboid))",
        r"\b" + _SQUARE,
        r"\btrapezoid",
        r"\btrapezium",
        r"\brhombus",
        r"\brhombi\b",
        r"\bkite\b",
    ),
    "circle": (
        r"circle",
        r"\bchords?\b",
        r"\barcs?\b",
        r"\btangent\b",
        r"\bradius\b",
        r"\bradii\b",
        r"\bdiameter",
        r"\bcircumference",
        r"\bsector\b",
    ),
    "3d": (
        r"\bcones?\b",
        r"\bconical\b",
        r"\bcylinder",
        r"\bcylindrical\b",
        r"\bspheres?\b",
        r"\bhemisphere",
        r"\bprisms?\b",
        r"\bpyramids?\b",
        r"\bcubes?\b",
        r"\bcuboids?\b",
        r"\bsolid\b",
        r"\bvolume\b",
        r"\bsurface area\b",
        r"\brectangular (?:box|prism|solid|block)\b",
    ),
}
_COMPILED = {f: [re.compile(p, re.IGNORECASE) for p in pats] for f, pats in _KEYWORDS.items()}


def rule_family(question: str, subject: str = "", subfield: str = "") -> tuple[str, list[str]]:
    """The offline label of one problem and the families whose keywords matched.

    Keywords (case-insensitive, in the question, subject and subfield):
    triangle: triangle (also inside "Rttriangle"), isosceles, equilateral, hypotenuse;
    quadrilateral: quadrilateral, parallelogram, rectangle / rectangular (not "rectangular
    box"), square (not "square root", "squared", "square units"), trapezoid, trapezium,
    rhombus, kite; circle: circle (also "semicircle"), chord, arc, tangent, radius /
    radii, diameter, circumference, sector; 3d: cone, cylinder, sphere, hemisphere, prism,
    pyramid, cube, cuboid, solid (so the subject "Solid Geometry" too), volume, surface
    area, rectangular box.

    The rule: a solid's text names plane figures too (a cylinder's radius, a cone's
    triangle section), so a 3d keyword gives ``3d``; otherwise exactly one family gives
    it; none gives ``other``; several give ``unsure`` (for a person to decide).
    """
    text = " ".join([question, subject, subfield])
    matched = [f for f in FAMILIES if any(p.search(text) for p in _COMPILED[f])]
    if "3d" in matched:
        return "3d", matched
    if len(matched) == 1:
        return matched[0], matched
    return ("other" if not matched else "unsure"), matched


def problems(samples: Iterable[Sample]) -> dict[str, dict[str, str]]:
    """problem_index -> {question, subject, subfield}: per problem the longest question
    among its samples (the version that says most in text). A sample without
    ``meta["problem_index"]`` is an error naming it."""
    out: dict[str, dict[str, str]] = {}
    for s in samples:
        index = s.meta.get("problem_index")
        if index is None or str(index).strip() == "":
            raise ValueError(
                f"sample {s.sample_id!r} has no meta.problem_index (the MathVerse adapter "
                "provides it); concept families are labelled per problem"
            )
        key = str(index).strip()
        item = {
            "question": s.question,
            "subject": str(s.meta.get("subject") or ""),
            "subfield": str(s.meta.get("subfield") or ""),
        }
        if key not in out or len(s.question) > len(out[key]["question"]):
            out[key] = item
    return out


@cache
def _template() -> str:
    """The prompt file's text, read once per process (not once per problem)."""
    return PROMPT_FILE.read_text(encoding="utf-8")


def label_prompt(item: Mapping[str, str]) -> str:
    """The LLM labeler's message for one problem."""
    values = {
        "{question}": item["question"].strip() or "(no text: the question is in the image)",
        "{subject}": item.get("subject") or "unknown",
        "{subfield}": item.get("subfield") or "unknown",
    }
    pattern = re.compile("|".join(re.escape(k) for k in values))
    return pattern.sub(lambda m: values[m.group()], _template())


def _index_key(index: str) -> tuple[int, int | str]:
    return (0, int(index)) if index.isdigit() else (1, index)


def propose_labels(
    items: Mapping[str, Mapping[str, str]], spec: Mapping[str, Any] | None, *, cache: Any = None
) -> list[dict[str, str]]:
    """One proposed row per problem of ``items`` (see :func:`problems`), in problem
    order. ``spec``: ``{backend: offline}`` (default) or an LLM spec; an LLM failure is
    a proposal with an empty family (counted; asked again next time, a person may still
    label it)."""
    spec = dict(spec or {"backend": "offline"})
    keys = sorted(items, key=_index_key)
    if spec.get("backend", "offline") == "offline":
        extra = sorted(set(spec) - {"backend"})
        if extra:
            raise ValueError(
                f"{SPEC_NAME}.{extra[0]}: unknown key for backend offline (allowed: backend)"
            )
        return [
            {
                "problem_index": k,
                "concept_family": rule_family(
                    items[k]["question"], items[k].get("subject", ""), items[k].get("subfield", "")
                )[0],
                "source": "rules",
                "status": "proposed",
            }
            for k in keys
        ]
    from ..clients.llm import llm_from_spec

    llm = llm_from_spec(spec, SPEC_NAME, cache, others=("offline",))
    name = f"{spec['backend']}/{spec['model']}"
    calls = [
        {
            "messages": label_prompt(items[k]),
            "json_schema": CONCEPT_SCHEMA,
            "temperature": float(spec.get("temperature") or 0.0),
            "max_tokens": int(spec.get("max_tokens") or 1024),
        }
        for k in keys
    ]
    try:
        responses = llm.complete_many(calls) if calls else []
    finally:
        llm.close()
    rows = []
    for k, resp in zip(keys, responses, strict=True):
        family = (
            resp.parsed_json.get("concept_family") if isinstance(resp.parsed_json, dict) else None
        )
        if resp.error is not None or family not in LABELS:
            log.warning(
                "concept labeler: no label for problem %s: %s", k, resp.error or resp.text[:200]
            )
            family = ""
        rows.append(
            {"problem_index": k, "concept_family": family, "source": name, "status": "proposed"}
        )
    return rows


def write_labels(
    samples: Iterable[Sample],
    spec: Mapping[str, Any] | None,
    out_csv: str | Path,
    existing: str | Path | Sequence[Mapping[str, str]] | None = None,
    *,
    cache: Any = None,
) -> dict[str, int]:
    """Write the labels CSV ``out_csv`` (format: :mod:`vlmrobust.core.concept_labels`).

    The rows a person decided in ``existing`` (a labels CSV path, read with its extra
    columns, or rows; status ``confirmed`` or ``rejected``) are kept exactly as they
    are, and so is every row of a problem not among ``samples``; every other problem of
    ``samples`` gets a fresh proposal (:func:`propose_labels`). Rows are in problem
    order; the file is written atomically. Returns counts: ``problems`` (of the
    samples), ``kept`` (rows kept as they were), ``proposed`` (proposals with a family),
    ``errors`` (proposals without one: the LLM gave no valid label), and per label
    ``family_<label>`` of the new proposals.
    """
    header = list(CSV_FIELDS)
    old: dict[str, dict[str, str]] = {}
    if isinstance(existing, str | Path):
        if Path(existing).is_file():
            header, old = read_label_file(existing)
    elif existing is not None:
        for r in existing:
            row = {k: str(v if v is not None else "").strip() for k, v in r.items()}
            old[row["problem_index"]] = row
        header = [*CSV_FIELDS, *[k for r in old.values() for k in r if k not in CSV_FIELDS]]
        header = list(dict.fromkeys(header))
    items = problems(samples)
    kept = {
        pid: row
        for pid, row in old.items()
        if row["status"] not in MACHINE_STATUSES or pid not in items
    }
    todo = {k: v for k, v in items.items() if k not in kept}
    new = propose_labels(todo, spec, cache=cache)
    merged = sorted([*kept.values(), *new], key=lambda r: _index_key(r["problem_index"]))
    write_label_file(out_csv, header, {r["problem_index"]: r for r in merged})
    counts = {
        "problems": len(items),
        "kept": len(kept),
        "proposed": sum(1 for r in new if r["concept_family"]),
        "errors": sum(1 for r in new if not r["concept_family"]),
    }
    for label in LABELS:
        counts[f"family_{label}"] = sum(1 for r in new if r["concept_family"] == label)
    return counts
