"""Edit-instruction writers (Distract-Bench §3 stage iii, App. F.1).

A writer has two steps, ``describe(sample, image) -> str`` (the text the seeds are
retrieved with) and ``write(sample, image, demos, description) -> dict`` returning a dict
valid against :data:`EDIT_SCHEMA`: the edit instruction (content, location, style,
layout constraints), a short distractor description, a trap reasoning path, a trap
answer and a structured ``render`` object that :class:`~.editor.CompositeEditor` draws.
A failure raises :class:`WriterError` (the pipeline records it).

- :class:`LLMWriter`: a VLM call through a :mod:`vlmrobust.clients.llm` backend describes the
  image, then a second call (the image, the sample, the retrieved seeds as
  demonstrations and the paper's three constraints — preserve the original content,
  keep the answer unchanged, a factually valid but irrelevant distractor) returns strict
  JSON checked against :data:`EDIT_SCHEMA` (the backend retries invalid JSON and schema
  violations; its content-addressed cache makes a rerun free). The paper's full prompt
  (its Figure 8) is an image not in our copy; :data:`WRITER_PROMPT` is our
  reconstruction from §3 and App. F.1 (:data:`PROMPT_VERSION`).
- :class:`OfflineWriter`: deterministic (seeded by the global seed and ``sample_id``),
  API-free. It fills the best retrieved seed's pattern with the sample's own labels and
  numbers. **Answer preserved by construction**: the injected ``{number}`` is never the
  answer, ``meta.answer_value``, an option's value, or any number already in the
  question, the options or the drawn values; the injected ``{label}`` is never the answer
  or the correct option (a *wrong* option's label may be used — that is the dead end);
  ``trap_answer`` is a wrong option when there are options, else the injected number or
  label, and never equals the answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.records import Sample
from ..core.seeding import rng_for
from .seeds import KBEntry, Seed, render_from_pattern

PROMPT_VERSION = "edit-writer-v1"

_TEXT = {"type": "string", "minLength": 1}
EDIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "edit_instruction": {
            "type": "object",
            "properties": {
                "content": _TEXT,
                "location": _TEXT,
                "style": _TEXT,
                "layout_constraints": _TEXT,
            },
            "required": ["content", "location", "style", "layout_constraints"],
            "additionalProperties": False,
        },
        "distractor_description": _TEXT,
        "trap_reasoning_path": _TEXT,
        "trap_answer": _TEXT,
        "render": {
            "type": "object",
            "properties": {
                "kind": {"type": "string", "enum": ["label", "arrow", "box", "number", "shape"]},
                "text": {"type": "string"},
                "position": {
                    "type": "array",
                    "items": {"type": "number", "minimum": 0, "maximum": 1},
                    "minItems": 2,
                    "maxItems": 2,
                },
                "color": {"type": "string"},
                "size": {"type": "number", "minimum": 0.01, "maximum": 0.3},
                "shape": {"type": "string", "enum": ["star", "circle", "triangle"]},
            },
            "required": ["kind", "text", "position", "color", "size"],
            "additionalProperties": False,
        },
    },
    "required": [
        "edit_instruction",
        "distractor_description",
        "trap_reasoning_path",
        "trap_answer",
        "render",
    ],
    "additionalProperties": False,
}


class WriterError(RuntimeError):
    """A writer that produced no valid instruction; the message says why."""


def validate_edit(obj: Any) -> None:
    """Raise :class:`WriterError` when ``obj`` does not validate against EDIT_SCHEMA."""
    import jsonschema

    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(EDIT_SCHEMA).iter_errors(obj)
    )
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise WriterError(f"edit does not match EDIT_SCHEMA at {where}: {error.message[:200]}")


def instruction_text(edit: Mapping[str, Any]) -> str:
    """The four parts of an edit instruction as one paragraph (the candidates file's
    ``edit_instruction`` string)."""
    ins = edit["edit_instruction"]
    return (
        f"{ins['content']} Location: {ins['location']} Style: {ins['style']} "
        f"Layout constraints: {ins['layout_constraints']}"
    )


def _norm(text: Any) -> str:
    return " ".join(str(text).strip().lower().split())


def _letters(n: int) -> list[str]:
    return [chr(ord("A") + i) for i in range(n)]


def correct_option(sample: Sample) -> str | None:
    """The text of the correct option (answer given as a letter or as the text)."""
    if not sample.choices:
        return None
    ans = sample.answer.strip()
    letters = _letters(len(sample.choices))
    if sample.answer_type == "letter" and ans.upper() in letters:
        return sample.choices[letters.index(ans.upper())]
    for c in sample.choices:
        if _norm(c) == _norm(ans):
            return c
    return None


def sample_query_text(sample: Sample, description: str = "") -> str:
    """The retrieval query of a sample: the family/description, question and options."""
    fam = str(sample.meta.get("source_family") or sample.dataset)
    opts = " ".join(sample.choices)
    return " ".join(p for p in (description, fam, sample.question, opts) if p).strip()


def _demo_text(demo: Seed | KBEntry) -> tuple[Seed, str]:
    if isinstance(demo, KBEntry):
        return demo.seed, demo.text
    return demo, demo.fields_text()


# --------------------------------------------------------------------------- LLM writer

DESCRIBE_PROMPT = """Describe this image precisely for someone who cannot see it: its \
type (chart, diagram, geometry figure, photo, table...), every visible label, number and \
text, the objects and their layout, and which regions are empty. Do not answer the \
question. At most 150 words.

The image belongs to this question: {question}"""

WRITER_PROMPT = """You design ONE visual distractor to add to an image of a \
visual-question-answering sample, for a benchmark of reasoning robustness to semantic \
distraction.

Hard constraints:
1. Preserve the original content: every object, label, number, line and the layout \
stay unchanged; the distractor is ADDED in a free region and covers nothing important.
2. Keep the answer unchanged: the correct answer to the question must be exactly the \
same after the edit; never add information that changes, reveals or contradicts it.
3. The distractor is factually valid but irrelevant: it carries obvious semantic \
information (text, numbers, labels, arrows, boxes or symbols) that is true or plausible \
in context, yet is not needed to answer the question. Ideally it invites a plausible \
dead end or wrong answer.

Human-verified examples of good distractors (retrieved as the most similar seeds):
{demos}

The sample:
Question: {question}
Options: {options}
Correct answer (must stay correct): {answer}
Image description: {description}

Return strict JSON only, exactly these keys:
- "edit_instruction": {{"content": what to add (exact text), "location": where (relative \
to the existing elements; pixel or fraction hints), "style": font / color / size / line \
weight, "layout_constraints": what must not be covered or changed}}
- "distractor_description": one sentence describing the added element
- "trap_reasoning_path": how a careless solver would be misled, step by step
- "trap_answer": the wrong answer that path leads to (never the correct answer)
- "render": {{"kind": one of label, arrow, box, number, shape; "text": the exact text \
drawn; "position": [x, y] centre as fractions of width and height; "color": "#rrggbb"; \
"size": text height as a fraction of the shorter side (0.03-0.1); optional "shape": \
star, circle or triangle for kind shape}}"""


def build_writer_prompt(sample: Sample, description: str, demos: Sequence[Seed | KBEntry]) -> str:
    blocks = []
    for i, demo in enumerate(demos, 1):
        seed, text = _demo_text(demo)
        pat = seed.pattern
        blocks.append(
            f"Example {i} ({seed.seed_id}): {text}\n"
            f"  Injected: {seed.injected}\n  Why irrelevant: {seed.irrelevance}\n"
            f"  How it misleads: {seed.misleading}\n"
            f"  Edit pattern: {pat.get('kind')} '{pat.get('text')}' at {pat.get('location')}"
        )
    letters = _letters(len(sample.choices))
    options = "; ".join(f"({x}) {c}" for x, c in zip(letters, sample.choices, strict=True))
    return WRITER_PROMPT.format(
        demos="\n".join(blocks) or "(none)",
        question=sample.question,
        options=options or "(free-form answer)",
        answer=sample.answer,
        description=description.strip() or "(none)",
    )


class LLMWriter:
    """Describe + write through one LLM backend (see the module docstring)."""

    def __init__(self, llm: Any, *, max_tokens: int = 2000, describe_tokens: int = 600) -> None:
        self.llm = llm
        self.max_tokens = max_tokens
        self.describe_tokens = describe_tokens
        self.name = f"llm:{getattr(llm, 'name', '?')}/{getattr(llm, 'model', '?')}"

    def __repr__(self) -> str:
        return f"LLMWriter({self.llm!r})"

    def describe(self, sample: Sample, image: Any) -> str:
        response = self.llm.complete(
            DESCRIBE_PROMPT.format(question=sample.question),
            images=[image],
            max_tokens=self.describe_tokens,
        )
        if not response.ok:
            raise WriterError(f"describe failed: {response.error}")
        return response.text.strip()

    def write(
        self, sample: Sample, image: Any, demos: Sequence[Seed | KBEntry], description: str
    ) -> dict[str, Any]:
        prompt = build_writer_prompt(sample, description, demos)
        response = self.llm.complete(
            prompt, images=[image], json_schema=EDIT_SCHEMA, max_tokens=self.max_tokens
        )
        if not response.ok:
            raise WriterError(f"write failed: {response.error}")
        edit = response.parsed_json
        validate_edit(edit)
        if _norm(edit["trap_answer"]) in {
            _norm(sample.answer),
            _norm(correct_option(sample) or ""),
        }:
            raise WriterError(f"trap_answer {edit['trap_answer']!r} is the correct answer")
        return edit


# --------------------------------------------------------------------------- offline writer

_NUM = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?")
_CAPS = re.compile(r"\b[A-Z]{1,2}\b")


def _numbers_in(obj: Any, out: set[float]) -> None:
    if isinstance(obj, bool):
        return
    if isinstance(obj, int | float):
        out.add(round(float(obj), 6))
    elif isinstance(obj, str):
        out.update(round(float(m), 6) for m in _NUM.findall(obj))
    elif isinstance(obj, Mapping):
        for v in obj.values():
            _numbers_in(v, out)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _numbers_in(v, out)


def _labels_of(sample: Sample) -> list[str]:
    meta = sample.meta or {}
    labels: list[str] = []
    for key in ("values", "lengths", "given"):
        if isinstance(meta.get(key), Mapping):
            labels += [str(k) for k in meta[key]]
    labels += [str(v) for v in meta.get("image_labels") or [] if isinstance(v, str)]
    labels += [c for c in sample.choices if len(c) <= 20]
    labels += _CAPS.findall(sample.question)
    seen: list[str] = []
    for lab in labels:
        lab = lab.strip()
        if lab and lab not in seen and not _NUM.fullmatch(lab):
            seen.append(lab)
    return seen


def _unit_of(sample: Sample) -> str:
    m = re.search(r"\(([^)]+)\)\s*$", str(sample.meta.get("y_label") or ""))
    return m.group(1) if m else ""


class OfflineWriter:
    """Fill the best retrieved seed's pattern with the sample's labels and numbers
    (deterministic, API-free; the answer-preservation rule is in the module docstring)."""

    name = "offline"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def __repr__(self) -> str:
        return f"OfflineWriter(seed={self.seed})"

    def describe(self, sample: Sample, image: Any = None) -> str:
        meta = sample.meta or {}
        fam = meta.get("source_family") or sample.dataset
        kind = meta.get("chart_type") or meta.get("kind") or meta.get("concept_family") or ""
        return f"A {kind} {fam} image. Labels: {', '.join(_labels_of(sample)[:8])}".strip()

    def _forbidden_numbers(self, sample: Sample) -> set[float]:
        out: set[float] = set()
        _numbers_in([sample.answer, sample.question, sample.choices, sample.meta], out)
        return out

    def _pick_number(self, sample: Sample, rng: Any, degrees: bool) -> str:
        forbidden = self._forbidden_numbers(sample)
        if degrees:
            pool = list(range(15, 90, 5))
        else:
            # the magnitude of the task's own numbers (not pixel coordinates in meta)
            scale: set[float] = set()
            meta = sample.meta or {}
            _numbers_in([sample.answer, sample.question, sample.choices,
                         meta.get("values"), meta.get("given"), meta.get("measures")], scale)  # fmt: skip
            present = sorted(abs(x) for x in scale if x) or [10.0]
            base = max(2, round(present[len(present) // 2]))
            pool = list(range(max(1, base // 2), base + base // 2 + 6))
        pool = [n for n in pool if float(n) not in forbidden]
        if not pool:  # everything near is taken: go above every number present
            pool = [int(max(forbidden, default=0)) + 7]
        return str(pool[int(rng.integers(len(pool)))])

    def _pick_label(self, sample: Sample, rng: Any) -> str:
        bad = {_norm(sample.answer), _norm(sample.meta.get("answer_value", ""))}
        bad.add(_norm(correct_option(sample) or ""))
        labels = [lab for lab in _labels_of(sample) if _norm(lab) not in bad]
        if not labels:
            return "Note"
        return labels[int(rng.integers(len(labels)))]

    def _trap(self, sample: Sample, rng: Any, number: str, label: str, used: set[str]) -> str:
        answer = _norm(sample.answer)
        if sample.choices:
            letters = _letters(len(sample.choices))
            right = correct_option(sample)
            wrong = [i for i, c in enumerate(sample.choices) if c != right]
            # the option the distractor names, when it names one; else a seeded wrong one
            named = [i for i in wrong if _norm(sample.choices[i]) in {_norm(label), _norm(number)}]
            i = named[0] if named else wrong[int(rng.integers(len(wrong)))] if wrong else None
            if i is not None:
                trap = letters[i] if sample.answer_type == "letter" else sample.choices[i]
                if _norm(trap) != answer:
                    return trap
        for value in (number if "number" in used else "", label if "label" in used else ""):
            if value and _norm(value) != answer:
                return value
        return number if _norm(number) != answer else f"not {sample.answer}"

    def write(
        self,
        sample: Sample,
        image: Any = None,
        demos: Sequence[Seed | KBEntry] = (),
        description: str = "",
    ) -> dict[str, Any]:
        if not demos:
            raise WriterError("no seed to fill: the knowledge base returned no demonstration")
        seed, _ = _demo_text(demos[0])
        pattern = seed.pattern
        rng = rng_for(self.seed, "construct-offline", sample.sample_id)
        template = str(pattern["text"])
        used = {s for s in ("number", "label", "unit") if "{" + s + "}" in template}
        number = self._pick_number(sample, rng, degrees="°" in template)
        label = self._pick_label(sample, rng)
        fill = {"number": number, "label": label, "unit": _unit_of(sample)}
        jitter = (float(rng.uniform(-0.04, 0.04)), float(rng.uniform(-0.02, 0.02)))
        render = render_from_pattern(pattern, fill, jitter)
        text = render["text"]
        location = str(pattern.get("location") or "top-right")
        fx, fy = render["position"]
        trap = self._trap(sample, rng, number, label, used)
        kind_words = {"label": "text label", "arrow": "arrow with the text",
                      "box": "dashed box with the note", "number": "note card reading",
                      "shape": f"small {render.get('shape', 'star')} with the text"}  # fmt: skip
        edit = {
            "edit_instruction": {
                "content": f'Add a {kind_words[pattern["kind"]]} "{text}".',
                "location": f"In the {location} area of the image, centred near "
                f"({fx:.2f}, {fy:.2f}) of the width and height, in empty space.",
                "style": f"Color {render['color']}, text height about "
                f"{render['size']:.0%} of the shorter side, plain sans-serif.",
                "layout_constraints": "Do not cover or alter any existing label, number, mark "
                "or object; keep every original element and the answer unchanged.",
            },
            "distractor_description": f"A {render['color']} {kind_words[pattern['kind']]} "
            f'"{text}" added in the {location} of the image.',
            "trap_reasoning_path": f'A careless solver treats "{text}" as information for '
            f"the question ({seed.misleading.rstrip('.')}) and answers {trap} instead of "
            "reading the original figure.",
            "trap_answer": trap,
            "render": render,
        }
        validate_edit(edit)
        return edit
