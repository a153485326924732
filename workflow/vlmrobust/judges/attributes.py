"""The attribute extraction judge of the Idis study (the Idis paper, App. B.1, Tables 6-8).

How much of a reasoning trace is about the distractors? An *extractor* copies the
evidence phrases out of each trace and sorts them into the categories of its task; the
metrics count them (``r_attr``: the share of distractor-category attributes, ``r_target``,
totals against reasoning length). Three tasks, each with its categories:

- ``perception`` (ImageNet-9): ``dog bird vehicle reptile carnivore insect instrument
  primate fish other``: the nine classes (a class label in lower case, ``Vehicle`` ->
  ``vehicle``) and ``other``.
- ``math`` (MathVerse): ``target_related distractor_related other``, one extraction per
  sentence of the trace (:func:`split_sentences`), given the target's concept family,
  the distractors' shapes (the variant's ``params.distractor_classes``) and the
  sample's question (the original one: for a textual variant the inserted sentences
  are distractors, not target).
- ``waterbirds``: ``bio`` (the bird: morphology, features, a name for the kind of bird)
  and ``env`` (the background: habitat, place).

The trace read is the output's ``thinking`` when it is not empty, else its ``raw_text``
(:func:`trace_text`).

Extractors (:func:`make_attribute_extractor`)
--------------------------------------------
- **LLM** (``backend: openai | gemini``): our prompts in ``resources/idis/``
  (``attributes-perception-prompt.txt``, its reworded twin
  ``attributes-perception-alt-prompt.txt`` for the prompt-sensitivity check,
  ``attributes-math-prompt.txt``, ``attributes-waterbirds-prompt.txt``), strict JSON
  (:data:`SCHEMAS`) checked on every answer, a cached one included (a violation makes
  the row's ``error`` ``answer rejected: ...``). Every call goes through the
  content-addressed LLM cache, so a rerun makes no call. The counts are ours: the
  lengths of the lists after :func:`literal_phrases` dropped every phrase that does
  not occur in the text it was extracted from (counted in ``dropped``); a model's own
  count is never read.
- **offline** (``backend: offline``): the strict lexical matcher (the paper's non-LLM
  baseline), :class:`LexicalMatcher` over the vocabularies of
  ``resources/idis/attribute-vocabulary.yaml`` (:func:`load_vocabulary`). Its matching
  rule: a vocabulary phrase matches where it stands as whole words (no letter, digit
  or ``_`` just before or after it; the words of a phrase separated by any white
  space), case-insensitively; the text is scanned left to right, at each position the
  longest phrase that matches wins, and matches never overlap; every occurrence is
  counted (``dog ... dog`` is two). What a category's vocabulary is:

  * perception: each class's words from the vocabulary file (label, class-folder name
    and its words, plurals) plus its objects of ``resources/idis/objects.yaml`` (the
    Idis paper, Table 3); ``other`` = the irrelevant objects (umbrella, clock, TV,
    suitcase) plus the file's ``other`` list.
  * math, per sentence: ``target_related`` = the target family's shape words plus the
    entity names of the question (:func:`question_entities`: point / segment / angle
    names such as ``AB``, ``∠ABC``, and numbers with a unit such as ``3 cm``, ``40°``;
    these are matched case-sensitively, since ``AB`` is a name and ``ab`` is not);
    ``distractor_related`` = the shape words of the distractor families (``table``
    for an irrelevant distractor) that are not target words (so an aligned
    distractor's words count as target); ``other`` stays empty (the matcher knows no
    third vocabulary); ``ignore`` phrases (``square root``) are matched and counted
    nowhere. Handwritten and textual distractors have no vocabulary: no
    distractor_related phrase.
  * waterbirds: the file's ``bio`` and ``env`` lists.

Rows (:func:`extract_rows`, :func:`judge_attributes`), one per output row::

    {key, variant_id, sample_id, task, extractor, judge, attributes {category: [...]},
     counts {category: int}, dropped, sentences, error, method, cached, prompt_version}

``method``: ``llm``, ``lexical``, ``empty`` (an empty trace, or a math trace without a
sentence: every count 0, no call) or ``failed``. A failed row (``error`` set: the
output's own generation failed, a call failed after the backend's retries, an answer
broke the schema; for math ``k of n sentence(s) failed: ...``) has ``attributes``,
``counts`` and ``dropped`` null: it is excluded and counted, never read as zero.
``sentences`` is the number of sentences of a math trace, else null; ``cached`` whether
every call of the row came from the cache (null without a call). An extractor other
than the main one may label a seeded sample of a file's outputs only (the setting's
``sample: {n, seed}``, :func:`sample_rows`): its rows, one per sampled output, also
carry ``sample: {n, seed, of}``; the main extractor's rows never do.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from ..core.idis import ATTRIBUTE_CATEGORIES, ATTRIBUTE_TASKS, IMAGENET9_LABELS
from ..core.io import read_jsonl, write_jsonl
from ..core.records import Sample, read_samples, read_variants
from .base import close_llm, count_by_method, samples_by_id, schema_problem, warn_failed

__all__ = [
    "CATEGORIES",
    "SCHEMAS",
    "TASKS",
    "AttributeItem",
    "LLMAttributeExtractor",
    "LexicalMatcher",
    "OfflineAttributeExtractor",
    "Vocabulary",
    "extract_rows",
    "judge_attributes",
    "literal_phrases",
    "load_vocabulary",
    "make_attribute_extractor",
    "math_prompt",
    "perception_prompt",
    "question_entities",
    "resource_files",
    "sample_rows",
    "split_sentences",
    "summarize",
    "trace_text",
    "waterbirds_prompt",
]

log = logging.getLogger(__name__)

RESOURCES = Path(__file__).resolve().parents[3] / "resources" / "idis"
DEFAULT_VOCABULARY = RESOURCES / "attribute-vocabulary.yaml"
OBJECTS_FILE = RESOURCES / "objects.yaml"
#: the config key of the extractors (errors name ``<SPEC_ROOT>.<name>.<key>``)
SPEC_ROOT = "judge.attributes.extractors"
DEFAULT_MAX_TOKENS = 4096

TASKS = ATTRIBUTE_TASKS
PERCEPTION_CATEGORIES = ATTRIBUTE_CATEGORIES["perception"]
MATH_CATEGORIES = ATTRIBUTE_CATEGORIES["math"]
WATERBIRDS_CATEGORIES = ATTRIBUTE_CATEGORIES["waterbirds"]
CATEGORIES = ATTRIBUTE_CATEGORIES
#: JSON key of an answer -> category, per task
ANSWER_KEYS: dict[str, dict[str, str]] = {
    "perception": {f"{c}_attributes": c for c in PERCEPTION_CATEGORIES},
    "math": {c: c for c in MATH_CATEGORIES},
    "waterbirds": {f"{c}_attributes": c for c in WATERBIRDS_CATEGORIES},
}


def _schema(keys: Iterable[str]) -> dict[str, Any]:
    keys = list(keys)
    return {
        "type": "object",
        "properties": {k: {"type": "array", "items": {"type": "string"}} for k in keys},
        "required": keys,
        "additionalProperties": False,
    }


#: the strict JSON schema of an answer, per task
SCHEMAS: dict[str, dict[str, Any]] = {task: _schema(ANSWER_KEYS[task]) for task in TASKS}
PROMPT_FILES: dict[tuple[str, str], str] = {
    ("perception", "standard"): "attributes-perception-prompt.txt",
    ("perception", "alternative"): "attributes-perception-alt-prompt.txt",
    ("math", "standard"): "attributes-math-prompt.txt",
    ("waterbirds", "standard"): "attributes-waterbirds-prompt.txt",
}
PROMPTS: tuple[str, ...] = ("standard", "alternative")


# ------------------------------------------------------------------ texts


def _get(row: Any, name: str) -> Any:
    return row.get(name) if isinstance(row, Mapping) else getattr(row, name, None)


def trace_text(row: Any) -> str:
    """The reasoning trace of an output row: ``thinking`` when not empty (white space
    aside), else ``raw_text``."""
    thinking = _get(row, "thinking")
    if thinking and str(thinking).strip():
        return str(thinking)
    return str(_get(row, "raw_text") or "")


def _norm(text: str) -> str:
    """Lower case, every run of white space one space, no white space at the ends."""
    return " ".join(text.lower().split())


def literal_phrases(phrases: Iterable[Any], text: str) -> tuple[list[str], int]:
    """The phrases that occur literally in ``text``, and how many did not.

    A phrase occurs when, lower-cased and with every run of white space made one space,
    it is a substring of ``text`` treated the same way. A kept phrase is returned with
    its white space so normalised (its case kept), in the given order, repeats kept.
    Dropped (counted in the second value): a phrase that does not occur, one that is
    empty or only white space, and anything that is not a string.
    """
    norm_text = _norm(text)
    kept: list[str] = []
    dropped = 0
    for phrase in phrases:
        if not isinstance(phrase, str):
            dropped += 1
            continue
        clean = " ".join(phrase.split())
        if clean and _norm(clean) in norm_text:
            kept.append(clean)
        else:
            dropped += 1
    return kept, dropped


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_HAS_CONTENT = re.compile(r"[^\W_]")


def split_sentences(text: str) -> list[str]:
    """The sentences of a trace: split at every line break and wherever white space
    follows ``.``, ``!`` or ``?`` (regex ``(?<=[.!?])\\s+|\\n+``; ``36.0`` and ``x.y`` stay
    whole, ``e.g. the`` is split); each stripped; a piece without any letter or digit
    (empty, ``---``, ``$$``) is skipped."""
    pieces = (p.strip() for p in _SENTENCE_SPLIT.split(text))
    return [p for p in pieces if p and _HAS_CONTENT.search(p)]


_ENTITY = re.compile(r"(?<!\w)([∠△⊙]?)((?:[A-Z][′']*){2,4})(?!\w)")
_UNIT_NUMBER = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)\s*(cm|mm|km|m|°|degrees?|units?|inches|inch|feet|ft)(?!\w)"
)


def question_entities(question: str) -> list[str]:
    """The entity names of a math question, in order of first appearance, no repeats:
    names of 2 to 4 capital letters (each may carry primes: ``AB``, ``ABC``, ``A'B'``),
    also with the symbol before them when there is one (``∠ABC`` gives ``∠ABC`` and
    ``ABC``; single capitals are left out: they are as often an article or a choice
    letter), and numbers with a unit (``3 cm``, ``40°``, ``12 units``)."""
    found: list[tuple[int, str]] = []
    for m in _ENTITY.finditer(question):
        if m.group(1):
            found.append((m.start(), m.group(1) + m.group(2)))
        found.append((m.start(2), m.group(2)))
    for m in _UNIT_NUMBER.finditer(question):
        unit = m.group(2)
        found.append((m.start(), m.group(1) + unit if unit == "°" else f"{m.group(1)} {unit}"))
    out: list[str] = []
    for _, name in sorted(found, key=lambda x: x[0]):
        if name not in out:
            out.append(name)
    return out


# ------------------------------------------------------------------ prompts


@cache
def _template(name: str) -> str:
    return (RESOURCES / name).read_text(encoding="utf-8")


def _fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``{name}`` of ``values`` replaced, in one pass (braces in
    the values are left alone)."""
    pattern = re.compile("|".join(re.escape("{" + k + "}") for k in values))
    return pattern.sub(lambda m: values[m.group()[1:-1]], template)


@cache
def _objects() -> dict[str, Any]:
    """``resources/idis/objects.yaml``, checked: every class label has a list."""
    data = yaml.safe_load(OBJECTS_FILE.read_text(encoding="utf-8")) or {}
    classes = data.get("classes") or {}
    missing = [label for label in IMAGENET9_LABELS if not classes.get(label)]
    if missing:
        raise ValueError(f"{OBJECTS_FILE}: classes has no objects for {', '.join(missing)}")
    return {
        "classes": {label: [str(o) for o in classes[label]] for label in IMAGENET9_LABELS},
        "irrelevant": [str(o) for o in data.get("irrelevant") or []],
    }


def _class_objects() -> str:
    objects = _objects()
    lines = [
        f"- {label.lower()}: {', '.join(objects['classes'][label])}" for label in IMAGENET9_LABELS
    ]
    lines.append(
        f"- other: {', '.join(objects['irrelevant'])}, and anything that is evidence for "
        "none of the nine classes"
    )
    return "\n".join(lines)


def perception_prompt(trace: str, prompt: str = "standard") -> str:
    """The perception extractor's message (``prompt``: standard | alternative): the
    class objects of ``objects.yaml`` and the trace."""
    template = _template(PROMPT_FILES[("perception", prompt)])
    return _fill(template, {"class_objects": _class_objects(), "trace": trace.strip()})


def waterbirds_prompt(trace: str) -> str:
    """The waterbirds extractor's message."""
    return _fill(_template(PROMPT_FILES[("waterbirds", "standard")]), {"trace": trace.strip()})


def math_prompt(sentence: str, target: str, distractors: str, question: str) -> str:
    """The math extractor's message for one sentence."""
    values = {
        "target": target,
        "distractors": distractors,
        "question": question.strip(),
        "sentence": sentence.strip(),
    }
    return _fill(_template(PROMPT_FILES[("math", "standard")]), values)


#: how a math prompt names a concept family / a distractor class
_SHAPE_NAMES = {
    "triangle": "triangle",
    "quadrilateral": "quadrilateral (rectangle, square, parallelogram, trapezoid, ...)",
    "circle": "circle",
    "3d": "3-D solid (cube, cylinder, cone, sphere, ...)",
    "irrelevant": "a table (an image of a data table with rows and columns)",
}


def _sha8(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def prompt_version(task: str, prompt: str = "standard") -> str:
    """The LLM extractor's ``prompt_version``: task, prompt and the prompt file's hash."""
    name = PROMPT_FILES[(task, prompt)]
    alt = "-alt" if prompt == "alternative" else ""
    return f"attributes-{task}{alt}-v1+{_sha8(_template(name))}"


# ------------------------------------------------------------------ items


@dataclass
class AttributeItem:
    """One output row to read: its trace and, for math, the target and distractors."""

    key: str
    variant_id: str | None
    sample_id: str | None
    task: str
    trace: str
    error: str | None = None
    #: math: the target's concept family (None when unknown)
    target_family: str | None = None
    #: math: the distractors' classes (concept families or "irrelevant")
    distractor_classes: list[str] = field(default_factory=list)
    #: math: the variant's kind (visual, typographic, textual, ...) or None
    kind: str | None = None
    #: math: the sample's question
    question: str = ""


def _math_descriptions(item: AttributeItem) -> tuple[str, str]:
    target = (
        _SHAPE_NAMES.get(item.target_family, item.target_family)
        if item.target_family
        else "the diagram the question is about (its shape family is not known)"
    )
    parts = [_SHAPE_NAMES.get(c, c) for c in item.distractor_classes]
    if item.kind == "typographic":
        parts.append("handwritten mathematical expressions placed around the diagram")
    return target, "; ".join(parts) if parts else "none"


# ------------------------------------------------------------------ rows


def _row(item: AttributeItem, extractor: str, judge: str, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "key": item.key,
        "variant_id": item.variant_id,
        "sample_id": item.sample_id,
        "task": item.task,
        "extractor": extractor,
        "judge": judge,
        "attributes": None,
        "counts": None,
        "dropped": None,
        "sentences": None,
        "error": None,
        "method": None,
        "cached": None,
        "prompt_version": "",
    }
    row.update(fields)
    return row


def _counted(attributes: Mapping[str, list[str]]) -> dict[str, Any]:
    return {
        "attributes": {c: list(v) for c, v in attributes.items()},
        "counts": {c: len(v) for c, v in attributes.items()},
    }


def _precheck(
    item: AttributeItem, extractor: str, judge: str, version: str
) -> dict[str, Any] | None:
    """The row of an item no extractor needs to read (failed generation, empty trace)."""
    if item.error:
        return _row(
            item,
            extractor,
            judge,
            error=f"generation failed: {item.error}",
            method="failed",
            prompt_version=version,
        )
    empty = not item.trace.strip() or (item.task == "math" and not split_sentences(item.trace))
    if empty:
        return _row(
            item,
            extractor,
            judge,
            **_counted({c: [] for c in CATEGORIES[item.task]}),
            dropped=0,
            sentences=0 if item.task == "math" else None,
            method="empty",
            prompt_version=version,
        )
    return None


# ------------------------------------------------------------------ the lexical matcher


@dataclass(frozen=True)
class Term:
    """A vocabulary phrase, its category (None: matched, counted nowhere) and whether it
    is matched case-sensitively."""

    phrase: str
    category: str | None
    case_sensitive: bool = False


def _phrase_pattern(phrase: str) -> str:
    tokens = phrase.split()
    out = re.escape(tokens[0])
    for prev, tok in zip(tokens, tokens[1:], strict=False):
        out += (r"\s*" if prev[-1].isdigit() else r"\s+") + re.escape(tok)
    if tokens[0][0].isdigit():
        out = r"(?<![.\d])" + out  # "2.36 cm" does not hold "36 cm"
    return out


class LexicalMatcher:
    """Whole-word, case-insensitive (a term may be case-sensitive), leftmost then
    longest, non-overlapping matching of a list of :class:`Term`.

    A phrase given twice with one category counts once; with two categories it is a
    ValueError naming both."""

    def __init__(self, terms: Iterable[Term]) -> None:
        by_phrase: dict[tuple[str, bool], Term] = {}
        for term in terms:
            phrase = " ".join(term.phrase.split())
            if not phrase:
                continue
            key = (phrase if term.case_sensitive else phrase.lower(), term.case_sensitive)
            old = by_phrase.get(key)
            if old is not None and old.category != term.category:
                raise ValueError(
                    f"vocabulary phrase {phrase!r} is in two categories: "
                    f"{old.category} and {term.category}"
                )
            by_phrase[key] = Term(phrase, term.category, term.case_sensitive)
        self.terms = sorted(by_phrase.values(), key=lambda t: (-len(t.phrase), t.phrase))
        parts = []
        for i, term in enumerate(self.terms):
            pattern = _phrase_pattern(term.phrase)
            if term.case_sensitive:
                pattern = f"(?-i:{pattern})"
            parts.append(f"(?P<t{i}>{pattern})")
        self.regex = (
            re.compile(r"(?<!\w)(?:" + "|".join(parts) + r")(?!\w)", re.IGNORECASE)
            if parts
            else None
        )

    def match(self, text: str, categories: Sequence[str]) -> dict[str, list[str]]:
        """Category -> the matched phrases as written in ``text`` (white space made one
        space), in order; every category of ``categories`` is a key."""
        out: dict[str, list[str]] = {c: [] for c in categories}
        if self.regex is None:
            return out
        for m in self.regex.finditer(text):
            assert m.lastgroup is not None
            term = self.terms[int(m.lastgroup[1:])]
            if term.category is not None:
                out[term.category].append(" ".join(m.group(0).split()))
        return out


@dataclass
class Vocabulary:
    """The offline extractor's vocabularies (:func:`load_vocabulary`)."""

    #: perception category -> phrases
    perception: dict[str, list[str]]
    #: math family (triangle, quadrilateral, circle, 3d, irrelevant) -> shape words
    math_families: dict[str, list[str]]
    #: math phrases matched and counted nowhere
    math_ignore: list[str]
    #: waterbirds category (bio, env) -> phrases
    waterbirds: dict[str, list[str]]
    #: sha256 (first 8 hex digits) of the files read
    sha8: str = ""


def _str_list(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
        raise ValueError(f"{where}: expected a list of phrases, got {value!r}")
    return [str(v) for v in value]


def resource_files(spec: Mapping[str, Any] | None, task: str) -> list[Path]:
    """The files an extractor's labels depend on (a workflow job's inputs): an offline
    extractor's vocabulary and the object lists; an LLM's prompt file."""
    spec = dict(spec or {})
    if spec.get("backend", "offline") == "offline":
        vocabulary = spec.get("vocabulary")
        return [Path(vocabulary) if vocabulary else DEFAULT_VOCABULARY, OBJECTS_FILE]
    prompt = spec.get("prompt") or "standard"
    name = PROMPT_FILES.get((task, prompt)) or PROMPT_FILES[(task, "standard")]
    return [RESOURCES / name]


def load_vocabulary(path: str | Path | None = None) -> Vocabulary:
    """The vocabularies of ``path`` (None: ``resources/idis/attribute-vocabulary.yaml``)
    with each perception class's objects and the irrelevant objects of
    ``resources/idis/objects.yaml`` added. Errors name the file and the key."""
    path = Path(path) if path is not None else DEFAULT_VOCABULARY
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"attribute vocabulary {path}: cannot read it ({exc})") from None
    data = yaml.safe_load(text) or {}
    objects = _objects()
    per = data.get("perception") or {}
    classes = per.get("classes") or {}
    unknown = sorted(set(classes) - set(IMAGENET9_LABELS))
    if unknown:
        raise ValueError(
            f"{path}: perception.classes.{unknown[0]}: not a class label "
            f"(expected {', '.join(IMAGENET9_LABELS)})"
        )
    perception = {
        label.lower(): [
            *_str_list(classes.get(label), f"{path}: perception.classes.{label}"),
            *objects["classes"][label],
        ]
        for label in IMAGENET9_LABELS
    }
    perception["other"] = [
        *_str_list(per.get("other"), f"{path}: perception.other"),
        *objects["irrelevant"],
    ]
    math = data.get("math") or {}
    families = {
        str(k): _str_list(v, f"{path}: math.families.{k}")
        for k, v in (math.get("families") or {}).items()
    }
    waterbirds = data.get("waterbirds") or {}
    vocab = Vocabulary(
        perception=perception,
        math_families=families,
        math_ignore=_str_list(math.get("ignore"), f"{path}: math.ignore"),
        waterbirds={
            c: _str_list(waterbirds.get(c), f"{path}: waterbirds.{c}")
            for c in WATERBIRDS_CATEGORIES
        },
        sha8=_sha8(text + OBJECTS_FILE.read_text(encoding="utf-8")),
    )
    try:  # a phrase in two categories is an error now, not at the first trace
        _perception_matcher(vocab)
        _waterbirds_matcher(vocab)
        LexicalMatcher(
            [Term(p, f, False) for f, words in families.items() for p in words]
            + [Term(p, None) for p in vocab.math_ignore]
        )
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return vocab


def _perception_matcher(vocab: Vocabulary) -> LexicalMatcher:
    return LexicalMatcher(Term(p, c) for c, words in vocab.perception.items() for p in words)


def _waterbirds_matcher(vocab: Vocabulary) -> LexicalMatcher:
    return LexicalMatcher(Term(p, c) for c, words in vocab.waterbirds.items() for p in words)


class OfflineAttributeExtractor:
    """The lexical matcher (see the module docstring for its rule)."""

    name = "offline/lexical"

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary
        self.version = f"attributes-lexical-v1+{vocabulary.sha8}"
        self._matchers: dict[Any, LexicalMatcher] = {}

    def _matcher(self, key: Any, build: Any) -> LexicalMatcher:
        if key not in self._matchers:
            self._matchers[key] = build()
        return self._matchers[key]

    def math_matcher(self, item: AttributeItem) -> LexicalMatcher:
        """target_related: the target family's words and the question's entities;
        distractor_related: the distractor families' words that are not target words."""
        families = self.vocabulary.math_families

        def build() -> LexicalMatcher:
            target = list(families.get(item.target_family or "", []))
            target_lower = {p.lower() for p in target}
            terms = [Term(p, "target_related") for p in target]
            terms += [Term(p, "target_related", True) for p in question_entities(item.question)]
            for cls in item.distractor_classes:
                terms += [
                    Term(p, "distractor_related")
                    for p in families.get(cls, [])
                    if p.lower() not in target_lower
                ]
            terms += [Term(p, None) for p in self.vocabulary.math_ignore]
            return LexicalMatcher(terms)

        key = ("math", item.target_family, tuple(item.distractor_classes), item.question)
        return self._matcher(key, build)

    def extract_many(self, items: Sequence[AttributeItem], extractor: str) -> list[dict[str, Any]]:
        out = []
        for item in items:
            pre = _precheck(item, extractor, self.name, self.version)
            if pre is not None:
                out.append(pre)
                continue
            cats = CATEGORIES[item.task]
            sentences = None
            if item.task == "perception":
                found = self._matcher("perception", lambda: _perception_matcher(self.vocabulary))
                attributes = found.match(item.trace, cats)
            elif item.task == "waterbirds":
                found = self._matcher("waterbirds", lambda: _waterbirds_matcher(self.vocabulary))
                attributes = found.match(item.trace, cats)
            else:
                matcher = self.math_matcher(item)
                parts = split_sentences(item.trace)
                sentences = len(parts)
                attributes = {c: [] for c in cats}
                for sentence in parts:
                    for c, phrases in matcher.match(sentence, cats).items():
                        attributes[c].extend(phrases)
            out.append(
                _row(
                    item,
                    extractor,
                    self.name,
                    **_counted(attributes),
                    dropped=0,
                    sentences=sentences,
                    method="lexical",
                    prompt_version=self.version,
                )
            )
        return out


# ------------------------------------------------------------------ the LLM extractor


def answer_problem(task: str, parsed: Any) -> str | None:
    """Why ``parsed`` is not a valid answer of ``task`` (:data:`SCHEMAS`), or None."""
    return schema_problem(parsed, SCHEMAS[task])


class LLMAttributeExtractor:
    """The LLM extractor: one call per trace (math: per sentence), every call through
    the backend's content-addressed cache."""

    def __init__(
        self,
        llm: Any,
        *,
        prompt: str = "standard",
        temperature: float = 0.0,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        where: str = f"{SPEC_ROOT}.default",
    ) -> None:
        if prompt not in PROMPTS:
            raise ValueError(f"{where}.prompt: {prompt!r} is not one of {', '.join(PROMPTS)}")
        self.llm = llm
        self.prompt = prompt
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.where = where
        self.name = f"{getattr(llm, 'name', '?')}/{getattr(llm, 'model', '?')}"

    def check_task(self, task: str) -> None:
        if (task, self.prompt) not in PROMPT_FILES:
            raise ValueError(
                f"{self.where}.prompt: {self.prompt!r} exists for the perception task only, "
                f"not for {task}"
            )

    def _units(self, item: AttributeItem) -> list[tuple[str, str]]:
        """(message, text the phrases must occur in) of each call of an item."""
        if item.task == "perception":
            return [(perception_prompt(item.trace, self.prompt), item.trace)]
        if item.task == "waterbirds":
            return [(waterbirds_prompt(item.trace), item.trace)]
        target, distractors = _math_descriptions(item)
        return [
            (math_prompt(s, target, distractors, item.question), s)
            for s in split_sentences(item.trace)
        ]

    def extract_many(self, items: Sequence[AttributeItem], extractor: str) -> list[dict[str, Any]]:
        for task in sorted({item.task for item in items}):
            self.check_task(task)
        out: list[dict[str, Any] | None] = []
        todo: list[tuple[int, list[tuple[str, str]]]] = []
        for item in items:
            version = prompt_version(item.task, self.prompt)
            pre = _precheck(item, extractor, self.name, version)
            out.append(pre)
            if pre is None:
                todo.append((len(out) - 1, self._units(item)))
        calls = [
            {
                "messages": message,
                "json_schema": SCHEMAS[items[i].task],
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
            }
            for i, units in todo
            for message, _ in units
        ]
        responses = iter(self.llm.complete_many(calls) if calls else [])
        for i, units in todo:
            item = items[i]
            got = [next(responses) for _ in units]
            out[i] = self._item_row(item, extractor, units, got)
        return [r for r in out if r is not None]

    def _item_row(
        self,
        item: AttributeItem,
        extractor: str,
        units: list[tuple[str, str]],
        responses: list[Any],
    ) -> dict[str, Any]:
        cats = CATEGORIES[item.task]
        keys = ANSWER_KEYS[item.task]
        attributes: dict[str, list[str]] = {c: [] for c in cats}
        dropped = 0
        failures: list[str] = []
        for (_, text), resp in zip(units, responses, strict=True):
            if resp.error is not None:
                failures.append(str(resp.error))
                continue
            problem = answer_problem(item.task, resp.parsed_json)
            if problem is not None:  # an old or damaged cache entry, or a lax backend
                failures.append(f"answer rejected: {problem}")
                continue
            for key, cat in keys.items():
                kept, n = literal_phrases(resp.parsed_json[key], text)
                attributes[cat].extend(kept)
                dropped += n
        fields: dict[str, Any] = {
            "sentences": len(units) if item.task == "math" else None,
            "cached": all(bool(r.cached) for r in responses),
            "prompt_version": prompt_version(item.task, self.prompt),
        }
        if failures:
            error = failures[0]
            if item.task == "math":
                error = f"{len(failures)} of {len(units)} sentence(s) failed: {failures[0]}"
            return _row(item, extractor, self.name, error=error, method="failed", **fields)
        return _row(
            item,
            extractor,
            self.name,
            **_counted(attributes),
            dropped=dropped,
            method="llm",
            **fields,
        )


# ------------------------------------------------------------------ entry points


def make_attribute_extractor(
    spec: Mapping[str, Any] | None,
    name: str = "default",
    task: str | None = None,
    cache: Any = None,
) -> OfflineAttributeExtractor | LLMAttributeExtractor:
    """The extractor of the setting ``judge.attributes.extractors.<name>``:
    ``{backend: offline, vocabulary: null}`` (the default; ``vocabulary`` = a
    vocabulary file, null = ``resources/idis/attribute-vocabulary.yaml``) or an LLM
    setting (``backend: openai | gemini``, ``model``, ``base_url``, ``api_key_env``,
    ``options``, ``temperature`` (0), ``max_tokens`` (4096), ``cache_dir`` (null =
    ``results/cache/llm``)); both take ``prompt: standard | alternative`` (the
    alternative perception prompt; an LLM only, and for ``task`` perception only).
    Errors name ``judge.attributes.extractors.<name>.<key>``. ``cache`` overrides the
    LLM cache."""
    where = f"{SPEC_ROOT}.{name}"
    spec = dict(spec or {"backend": "offline"})
    prompt = spec.pop("prompt", None) or "standard"
    if prompt not in PROMPTS:
        raise ValueError(f"{where}.prompt: {prompt!r} is not one of {', '.join(PROMPTS)}")
    if task is not None and task not in TASKS:
        raise ValueError(f"{where}: task {task!r} is not one of {', '.join(TASKS)}")
    backend = spec.get("backend", "offline")
    if backend == "offline":
        extra = sorted(set(spec) - {"backend", "vocabulary"})
        if extra:
            raise ValueError(
                f"{where}.{extra[0]}: unknown key for backend offline "
                "(allowed: backend, prompt, vocabulary)"
            )
        if prompt != "standard":
            raise ValueError(
                f"{where}.prompt: the offline extractor has no prompt; only 'standard' is accepted"
            )
        return OfflineAttributeExtractor(load_vocabulary(spec.get("vocabulary")))
    from ..clients.llm import LLM_SPEC_KEYS, llm_from_spec
    from ..clients.llm.backends import LLM_BACKENDS

    if backend in LLM_BACKENDS:
        extra = sorted(set(spec) - set(LLM_SPEC_KEYS))
        if extra:
            raise ValueError(
                f"{where}.{extra[0]}: unknown key for backend {backend} "
                f"(allowed: {', '.join(LLM_SPEC_KEYS)}, prompt)"
            )
    if task is not None and (task, prompt) not in PROMPT_FILES:
        raise ValueError(
            f"{where}.prompt: {prompt!r} exists for the perception task only, not for {task}"
        )
    return LLMAttributeExtractor(
        llm_from_spec(spec, where, cache, others=("offline",)),
        prompt=prompt,
        temperature=float(spec.get("temperature") or 0.0),
        max_tokens=int(spec.get("max_tokens") or DEFAULT_MAX_TOKENS),
        where=where,
    )


def _items(
    rows: Sequence[Any],
    samples: Mapping[str, Sample],
    task: str,
    params: Mapping[str, Mapping[str, Any]] | None,
) -> list[AttributeItem]:
    items = []
    for row in rows:
        sid, vid = _get(row, "sample_id"), _get(row, "variant_id")
        item = AttributeItem(
            key=str(_get(row, "key")),
            variant_id=vid,
            sample_id=sid,
            task=task,
            trace=trace_text(row),
            error=_get(row, "error") or None,
        )
        if task == "math":
            sample = samples[str(sid)]
            p: Mapping[str, Any] = {}
            if params is not None:
                if str(vid) not in params:
                    raise ValueError(
                        f"variant {vid!r} (output {item.key!r}) is not in the manifest"
                    )
                p = params[str(vid)] or {}
            item.target_family = sample.meta.get("concept_family") or None
            item.distractor_classes = [str(c) for c in p.get("distractor_classes") or []]
            item.kind = p.get("kind")
            item.question = sample.question
        items.append(item)
    return items


def sample_rows(rows: Sequence[Any], n: int | None, seed: int = 0) -> list[Any]:
    """The validation sample of one outputs file (config
    ``judge.attributes.validation_sample``): the ``n`` rows whose output key has the
    smallest ``sha256("<seed>|<key>")`` (ties by key), in their order in ``rows``; every
    row when ``n`` is None or not below the number of rows. The choice depends on the
    keys and the seed only: not on the row order, the job or the extractor."""
    rows = list(rows)
    if n is None or n >= len(rows):
        return rows
    keys = sorted(
        (hashlib.sha256(f"{seed}|{key}".encode()).hexdigest(), key)
        for key in {str(_get(r, "key")) for r in rows}
    )
    chosen = {key for _, key in keys[:n]}
    return [r for r in rows if str(_get(r, "key")) in chosen]


def extract_rows(
    rows: Sequence[Any],
    samples: Mapping[str, Sample] | Iterable[Sample],
    task: str,
    extractor: Any,
    extractor_name: str = "default",
    params: Mapping[str, Mapping[str, Any]] | None = None,
    sample: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One attribute row per output row (an :class:`~vlmrobust.core.records.OutputRow`
    or its dict), in order. ``task``: perception | math | waterbirds; ``extractor``: of
    :func:`make_attribute_extractor`; ``params``: variant id -> the variant's params
    (the manifest; math reads ``distractor_classes`` and ``kind``; None = no
    distractors). A row whose sample is unknown, or (math, with ``params``) whose variant
    is not in ``params``, is a ValueError naming it. ``sample`` ``{n, seed}`` (a
    validation extractor's, :func:`sample_rows`): only the sampled output rows, each
    attribute row with ``sample: {n, seed, of}`` (``of``: the output rows sampled from);
    without it the rows carry no such field."""
    if task not in TASKS:
        raise ValueError(f"task {task!r} is not one of {', '.join(TASKS)}")
    rows = list(rows)
    total = len(rows)
    if sample is not None:
        rows = sample_rows(rows, sample.get("n"), int(sample.get("seed") or 0))
    samples = samples_by_id(rows, samples)
    made = extractor.extract_many(_items(rows, samples, task, params), extractor_name)
    if sample is not None:
        tag = {"n": sample.get("n"), "seed": int(sample.get("seed") or 0), "of": total}
        for row in made:
            row["sample"] = dict(tag)
    return made


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``rows``; ``judged`` (no error) and ``failed``; ``dropped`` (phrases dropped by
    the literal check, over the judged rows); ``mean_total`` (mean of a judged row's
    total attributes, empty traces included; None without a judged row); ``by_method``."""
    judged = [r for r in rows if not r.get("error")]
    totals = [sum((r.get("counts") or {}).values()) for r in judged]
    return {
        "rows": len(rows),
        "judged": len(judged),
        "failed": len(rows) - len(judged),
        "dropped": sum(int(r.get("dropped") or 0) for r in judged),
        "mean_total": sum(totals) / len(totals) if totals else None,
        "by_method": count_by_method(rows),
    }


def judge_attributes(
    outputs_path: str | Path,
    samples_path: str | Path,
    manifest_path: str | Path | None,
    spec: Mapping[str, Any] | None,
    task: str,
    extractor: str,
    out: str | Path,
) -> dict[str, Any]:
    """The CLI entry: extract the attributes of every output row of ``outputs_path``
    (JSONL) with the extractor ``spec`` (named ``extractor``, the key under
    ``judge.attributes.extractors``), reading the samples JSONL and the condition's
    variant manifest (``manifest_path``; may be None for perception and waterbirds,
    which do not read it), write one row per output to ``out`` (JSONL) and return
    :func:`summarize` of them plus ``task``, ``extractor`` and ``judge``. A ``sample``
    ``{n, seed}`` in ``spec`` (the plan's validation sample of an extractor other than
    the main one) labels only those output rows (:func:`sample_rows`); the summary then
    says ``sample: {n, seed, of, labelled}``."""
    outputs = read_jsonl(outputs_path)
    samples = {s.sample_id: s for s in read_samples(samples_path)}
    params = None
    if manifest_path is not None:
        params = {v.variant_id: dict(v.params or {}) for v in read_variants(manifest_path)}
    spec = dict(spec) if spec else None
    sample = spec.pop("sample", None) if spec else None
    made = make_attribute_extractor(spec, extractor, task)
    try:
        rows = extract_rows(outputs, samples, task, made, extractor, params, sample)
    except ValueError as exc:
        raise ValueError(f"{outputs_path}: {exc}") from None
    finally:
        close_llm(made)
    write_jsonl(out, rows)
    summary = summarize(rows)
    warn_failed(log, summary, outputs_path, out, "attributes")
    if sample is not None:
        summary["sample"] = {**sample, "of": len(outputs), "labelled": len(rows)}
    return {**summary, "task": task, "extractor": extractor, "judge": made.name}
