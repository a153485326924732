"""Prompt builders, kept in one place: each has a ``name`` and a ``version``.

:func:`build_prompt` turns a sample and one of its variants into the user turn a
backend sends: a list of ``{"type": "text", "text": ...}`` and
``{"type": "image", "path": ...}`` parts, plus an optional system prompt. The builder's
``name`` and ``version`` are recorded in every output row (``prompt``,
``prompt_version``). The version is the builder's human-readable label (``"1"``) plus a
fingerprint of its text (``1+3f9a0c2e``): a sha256 of the source of its text function,
of every function of this module it calls and of the module-level constants they read
(instructions, regular expressions). A changed prompt text therefore reruns the jobs
that use it even when nobody bumps the label; a mere reformatting of that code reruns
them too (the safe side).

The question is ``variant.question`` (a textual perturbation may have changed it), the
images are ``variant.images``; everything else (choices, answer type, precision,
meta) comes from the sample.

Images and text
    A sample with several images whose text holds MMMU-style markers
    (``<image N>``) is interleaved: the first marker of each image is replaced in place
    by that image (image N is ``images[meta["image_numbers"].index(N)]`` when the
    sample has ``image_numbers``, else ``images[N - 1]``); a repeated marker of the
    same image stays as text; images that no marker refers to come first. Every other
    prompt (one image, or no markers) is the image(s) first, then the text, with the
    text unchanged (markers such as Distract-Bench's ``<image1>`` stay in the text, as
    in the released runs).

Builders (``PROMPTS``)
    ``mcq``                question, lettered options (``A. ...``; left out when the
                           question already lists them), "Answer with the option's
                           letter from the given choices."
    ``yesno``              question, "Answer yes or no."
    ``short``              question, "Answer the question using a single word or phrase."
    ``label``              question, the class list when the question lacks it
                           ("Choose exactly one from: ..."), "Answer with the category
                           name only."
    ``mathvision``         "Please solve the problem step by step and put your final
                           answer in one "\\boxed{}"." + question + options (lmms-eval's
                           MathVision prompt, with the missing line break added).
    ``mathvista-solution`` lmms-eval's MathVista ``solution`` setting:
                           ``Question: ...\\nChoices:\\n(A) ...\\nHint: ...\\nSolution:``
    ``mathvista-cot``      lmms-eval's ``step-by-step`` setting (the paper's "cot"):
                           the same without ``Solution:`` — reason, then the answer at
                           the end as the hint asks.
    ``mathvista-format``   lmms-eval's ``format-prompt`` setting: the question, the
                           options as ``A. ...`` and only the required answer format
                           ("Answer with the option's letter from the given choices
                           directly." / "... a single integer number." / "... a single
                           floating-point number with one decimal place." / "... a
                           Python list.").
    ``distract-open``      the open-ended Distract-Bench prompt of the released runs:
                           the ``mathvista-solution`` layout for every row (no "answer
                           briefly" instruction); multiple choice when the row has
                           options, else a free-form hint chosen from the answer's form
                           (integer, float with its decimals, list, text).

    ``crm-cot``            CRM stage 1 (VisArgs): the question, then "Think step by
                           step ..." asking for numbered steps (visual elements,
                           commonsense, conclusion) and a concise final conclusion.
    ``crm-answer``         CRM stage 2, built on the same model's ``crm-cot`` output
                           for the same variant (``needs``): the question, "Your
                           reasoning:" + that chain, and "give only the final answer
                           as a short phrase". The CRM paper does not print its
                           templates; these are ours.

    The Idis prompts are the authors' (effl-lab/Idis at commit b0443df2, copied verbatim
    into ``vlmrobust/prompts/idis.yaml`` with file and constant; each builder's
    ``source`` names them). Every one is the image, then the text, no system prompt:

    ``idis-perception``    ``PERCEPTION_BASE`` (inference/prompts.py): a fixed text that
                           asks for the category among the nine and ``<answer>X</answer>``;
                           the row's own question is not used (run_perception.py).
    ``idis-perception-mitigate``  ``PERCEPTION_STRATEGY``: the attribute-guiding prompt
                           (§6.3).
    ``idis-perception-budget-1024`` / ``-2048`` / ``-4096``  our budget instruction
                           ("You have a thinking budget of N tokens. ...",
                           :data:`IDIS_BUDGET_INSTRUCTION`) on its own line BEFORE
                           ``PERCEPTION_BASE`` (App. E: "we prepend an instruction";
                           its wording is printed nowhere, so it is ours).
    ``idis-math``          the question (MathVerse's ``question`` field, its
                           ``Choices:`` block included; a textual distractor's question
                           for that condition) + ``SUFFIX`` of
                           inference/run_math_vllm.py (think in ``<think> </think>``,
                           the final answer in ``\\boxed{}``), nothing in between.
    ``waterbirds``         ``WATERBIRDS_BASE``; the row's question is not used.
    ``waterbirds-mitigate`` ``WATERBIRDS_STRATEGY``.

    The project's earlier wordings stay available, ours (source ``vlmrobust``):
    ``idis-perception-vlmrobust`` (the question, then "Think step by step, then give
    your final answer as <answer>X</answer>, where X is one of the categories."),
    ``idis-perception-vlmrobust-mitigate`` ("First identify the main object. Base your
    reasoning only on that object's own visual attributes." before it),
    ``idis-perception-vlmrobust-budget-1024|2048|4096`` ("Think for at most N tokens
    before answering." before it), ``idis-math-vlmrobust`` (the question, "Solve the
    problem step by step and put the final answer in \\boxed{}." and, for a letter
    answer, "For a multiple-choice question, put only the option letter in
    \\boxed{}."), ``waterbirds-vlmrobust`` (the question, "Think step by step, then
    give your final answer as <answer>Landbird</answer> or <answer>Waterbird</answer>.")
    and ``waterbirds-vlmrobust-mitigate`` ("First identify the bird. Base your reasoning
    only on the bird's own visual attributes, not on the background." before it).
    The prompts never mention image size: the Idis protocol resizes images at
    inference (the dataset's ``image_size``), not here.

    ``lmms-mmmu``, ``lmms-mmstar``, ``lmms-mathvision``, ``lmms-mathvision-reason``,
    ``lmms-hallusionbench``, ``lmms-chartqa``, ``lmms-textvqa``, ``lmms-infovqa``
                           lmms-eval's own prompts (the papers' harness): built by the
                           pinned lmms-eval's task code for the answering model's
                           ``harness.lmms_eval`` name (:mod:`vlmrobust.core.harness`,
                           docs/prompts.md); their source is recorded per model.

MathVista hints (``mathvista-*`` and ``distract-open``) follow MathVista's
``create_one_query``: question type ``multi_choice`` asks for the option letter;
``free_form`` asks for an integer, a float with ``precision`` decimals (one, two,
three, ... — MathVista itself has only one and two), or a Python list. A free-form
``text`` answer (absent from MathVista, possible in Distract-Bench) gets "Please
answer the question and provide the final answer at the end." — our choice, as
MathVista has no hint for it.

Default prompt per adapter (:func:`default_prompt`): the ``default_prompt`` of the
adapter's benchmark record (:mod:`vlmrobust.core.benchmarks`): ``mathvista`` →
``mathvista-solution`` (the setting of the released Distract-Bench runs; ``cot`` and
``format`` are selected per condition/run config); ``distract-bench`` →
``distract-open``; ``mathvision`` → ``mathvision``; ``imagenet9`` → ``idis-perception``;
``mathverse`` → ``idis-math``; ``waterbirds`` → ``waterbirds``; every other adapter (its record's
``default_prompt`` is ``None``) by the sample's answer type: letter → ``mcq``, yes/no
→ ``yesno``, label → ``label``, number/text/list → ``short``.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from . import harness
from .benchmarks import BENCHMARKS
from .records import Sample, Variant

#: the prompt setting that answers each sample with its dataset's own prompt
#: (:func:`default_prompt`); any other setting names a builder of :data:`PROMPTS`
DEFAULT_PROMPT = "default"

__all__ = [
    "PROMPTS",
    "BuiltPrompt",
    "PromptBuilder",
    "build_prompt",
    "default_prompt",
    "interleave",
    "mathvista_problem",
    "prompt_role",
    "prompt_versions",
]


#: The source of the project's own prompts (their texts are ours, not a harness's).
OWN_SOURCE = "vlmrobust"


@dataclass(frozen=True)
class BuiltPrompt:
    """A finished prompt: builder ``name``, ``version`` and ``source``, user ``content``,
    ``system``."""

    name: str
    version: str
    content: list[dict[str, str]]
    system: str | None = None
    #: where the prompt's text and layout come from (:attr:`PromptBuilder.source`)
    source: str = OWN_SOURCE

    @property
    def text(self) -> str:
        """The text parts joined (images left out): handy for logs and tests."""
        return "".join(p["text"] for p in self.content if p["type"] == "text")

    @property
    def image_paths(self) -> list[str]:
        return [p["path"] for p in self.content if p["type"] == "image"]


#: A builder's text function: (sample, question) -> (user text, system prompt or None).
TextFn = Callable[[Sample, str], tuple[str, str | None]]


#: A second-stage builder's text function: (sample, question, context) -> (text, system),
#: ``context`` being the answer the same model gave to the prompt ``needs`` names.
ContextTextFn = Callable[[Sample, str, str], tuple[str, str | None]]


#: A whole-message builder: (sample, question, image paths, model spec or None) ->
#: (user content parts, system prompt or None, source or None); a source replaces the
#: builder's ``source`` in the output rows (the harness's per-model arguments and chat
#: wrapper). Used where the image placement is the builder's own (a harness's
#: ``doc_to_messages``) or the text depends on the model.
MessageFn = Callable[
    [Sample, str, list[str], "dict[str, Any] | None"],
    tuple[list[dict[str, str]], str | None, str | None],
]


#: module-level values a prompt text may read, fingerprinted by their repr
_CONSTANT_TYPES = (str, int, float, tuple, list, dict, re.Pattern)


def _code_names(code: Any) -> list[str]:
    """The global names a code object and the functions nested in it read."""
    names = list(code.co_names)
    for const in code.co_consts:
        if inspect.iscode(const):
            names += _code_names(const)
    return names


def text_fingerprint(fn: Callable[..., Any]) -> str:
    """8 hex digits of a sha256 over ``fn``'s source, the values it closes over, and,
    recursively, the functions of its module it calls and the constants it reads."""
    digest = hashlib.sha256()
    seen: set[int] = set()

    def add(f: Any) -> None:
        if id(f) in seen:
            return
        seen.add(id(f))
        digest.update(inspect.getsource(f).encode())
        for cell in f.__closure__ or ():
            value = cell.cell_contents
            if inspect.isfunction(value):
                add(value)
            else:
                digest.update(repr(value).encode())
        for name in sorted(set(_code_names(f.__code__))):
            value = f.__globals__.get(name)
            if inspect.isfunction(value) and value.__module__ == f.__module__:
                add(value)
            elif isinstance(value, _CONSTANT_TYPES):
                digest.update(f"{name}={value!r}".encode())

    add(fn)
    return digest.hexdigest()[:8]


@dataclass(frozen=True)
class PromptBuilder:
    name: str
    #: the human-readable label; the recorded version adds the text's fingerprint
    label: str
    description: str
    text: TextFn | ContextTextFn
    #: a second stage: the prompt whose output (same model, same variant) this one is
    #: built on (the CRM final answer is asked after the chain of thought)
    needs: str | None = None
    #: where the text comes from: ``vlmrobust`` (ours), or the harness/code it
    #: reproduces with its version or commit and file (recorded in every output row)
    source: str = OWN_SOURCE
    #: builds the whole message instead of ``text`` + :func:`interleave` (``text`` is
    #: then only fingerprinted); it is given the model's registry entry
    messages: MessageFn | None = None

    @cached_property
    def version(self) -> str:
        """``<label>+<fingerprint of the text>`` (module docstring)."""
        fn = self.messages if self.messages is not None else self.text
        return f"{self.label}+{text_fingerprint(fn)}"


# --------------------------------------------------------------------------- helpers

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MCQ_INSTRUCTION = "Answer with the option's letter from the given choices."
YESNO_INSTRUCTION = "Answer yes or no."
SHORT_INSTRUCTION = "Answer the question using a single word or phrase."
LABEL_INSTRUCTION = "Answer with the category name only."
MATHVISION_INSTRUCTION = (
    'Please solve the problem step by step and put your final answer in one "\\boxed{}".'
)
MATHVISION_MC_NOTE = (
    'If it is a multiple choice question, only one letter is allowed in the "\\boxed{}".'
)


def _letter(i: int) -> str:
    if i >= len(LETTERS):
        raise ValueError(f"too many options ({i + 1}); at most {len(LETTERS)} are supported")
    return LETTERS[i]


def _lists_options(question: str, choices: list[str]) -> bool:
    """Whether ``question`` already lists ``choices`` (``A. x`` / ``(A) x`` / ``A: x``)."""
    if not choices:
        return True
    markers = [
        re.search(rf"(?m)^\s*\(?{_letter(i)}[.):]", question) for i in range(min(len(choices), 2))
    ]
    if not all(markers):
        return False
    return all(str(c).strip() in question for c in choices)


def _append(text: str, line: str) -> str:
    """``text`` + newline + ``line``, unless ``text`` already ends with ``line``."""
    if text.rstrip().lower().endswith(line.lower()):
        return text
    return f"{text}\n{line}" if text else line


def _with_options(question: str, choices: list[str], style: str = "dot") -> str:
    if _lists_options(question, choices):
        return question
    if style == "paren":
        lines = [f"({_letter(i)}) {c}" for i, c in enumerate(choices)]
    else:
        lines = [f"{_letter(i)}. {c}" for i, c in enumerate(choices)]
    return "\n".join([question, *lines])


# --------------------------------------------------------------------------- interleaving

_MARKER = re.compile(r"<image\s*(\d+)>")


def interleave(text: str, images: list[str], meta: dict[str, Any] | None = None) -> list[dict]:
    """The user content: images and text (see the module docstring for the rules)."""
    meta = meta or {}
    parts: list[dict[str, str]] = []
    markers = list(_MARKER.finditer(text)) if len(images) > 1 else []
    numbers = meta.get("image_numbers")
    if not isinstance(numbers, list) or len(numbers) != len(images):
        numbers = None

    def index_of(n: int) -> int | None:
        if numbers is not None:
            return numbers.index(n) if n in numbers else None
        return n - 1 if 1 <= n <= len(images) else None

    placed: dict[int, int] = {}  # image index -> marker position
    for m in markers:
        i = index_of(int(m.group(1)))
        if i is not None and i not in placed:
            placed[i] = m.start()
    if not placed:
        parts = [{"type": "image", "path": str(p)} for p in images]
        if text:
            parts.append({"type": "text", "text": text})
        return parts
    for i, path in enumerate(images):
        if i not in placed:
            parts.append({"type": "image", "path": str(path)})
    pos = 0
    for m in markers:
        i = index_of(int(m.group(1)))
        if i is None or placed.get(i) != m.start():
            continue  # an unknown image number or a repeated marker: stays text
        if m.start() > pos:
            parts.append({"type": "text", "text": text[pos : m.start()]})
        parts.append({"type": "image", "path": str(images[i])})
        pos = m.end()
    if pos < len(text):
        parts.append({"type": "text", "text": text[pos:]})
    return parts


# --------------------------------------------------------------------------- simple builders


def _mcq(sample: Sample, question: str) -> tuple[str, str | None]:
    return _append(_with_options(question, sample.choices), MCQ_INSTRUCTION), None


def _yesno(sample: Sample, question: str) -> tuple[str, str | None]:
    return _append(question, YESNO_INSTRUCTION), None


def _short(sample: Sample, question: str) -> tuple[str, str | None]:
    return _append(question, SHORT_INSTRUCTION), None


def _label(sample: Sample, question: str) -> tuple[str, str | None]:
    text = question
    labels = [str(c) for c in sample.choices]
    if labels and not all(re.search(rf"\b{re.escape(c)}\b", text, re.I) for c in labels):
        text = _append(text, f"Choose exactly one from: {', '.join(labels)}.")
    return _append(text, LABEL_INSTRUCTION), None


def _mathvision(sample: Sample, question: str) -> tuple[str, str | None]:
    lines = [MATHVISION_INSTRUCTION, question]
    if sample.choices and not _lists_options(question, sample.choices):
        lines.append("Choices:")
        lines += [f"{_letter(i)}. {c}" for i, c in enumerate(sample.choices)]
    if sample.choices:
        lines.append(MATHVISION_MC_NOTE)
    return "\n".join(lines), None


# --------------------------------------------------------------------------- MathVista

_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+)$")
_LISTLIKE = re.compile(r"^\s*[\[(].*,.*[\])]\s*$", re.S)
_NUM_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def mathvista_problem(sample: Sample) -> dict[str, Any]:
    """MathVista's problem fields for a sample: question_type, answer_type, precision, unit.

    Taken from ``meta`` when the sample comes from MathVista (or a MathVista-style
    Distract-Bench row); otherwise inferred: options -> ``multi_choice`` (answer type
    ``text``); else ``free_form`` with ``integer`` / ``float`` (precision = the
    answer's decimals unless the sample has one) / ``list`` (``[..]`` or ``(..)`` with
    a comma) / ``text``, read from the answer's form.
    """
    meta = sample.meta or {}
    qtype = str(meta.get("question_type") or "").strip()
    atype = str(meta.get("answer_type") or "").strip()
    precision = sample.precision
    if precision is None and isinstance(meta.get("precision"), (int, float)):
        precision = int(meta["precision"])
    if qtype not in ("multi_choice", "free_form"):
        qtype = "multi_choice" if sample.choices else "free_form"
    if qtype == "multi_choice":
        atype = "text"
    elif atype not in ("integer", "float", "list", "text"):
        answer = sample.answer.strip()
        if sample.answer_type == "list" or _LISTLIKE.match(answer):
            atype = "list"
        elif _INT.match(answer):
            atype = "integer"
        elif _FLOAT.match(answer):
            atype = "float"
            if precision is None or precision <= 0:
                precision = len(answer.split(".")[1])
        else:
            atype = "text"
    if atype == "float" and (precision is None or precision <= 0):
        atype = "integer"  # a float without decimals is asked as an integer
    unit = meta.get("unit")
    unit = str(unit).strip() if isinstance(unit, str) and unit.strip() else ""
    return {"question_type": qtype, "answer_type": atype, "precision": precision, "unit": unit}


def _float_examples(p: int) -> str:
    digits = ("23456789", "34567890", "45678901")
    return ", ".join(f"1.{d[:p]}" for d in digits)


def _decimals(p: int) -> str:
    word = _NUM_WORDS.get(p, str(p))
    return f"{word} decimal place" + ("" if p == 1 else "s")


def _hint(problem: dict[str, Any], setting: str) -> str:
    qtype, atype, p = problem["question_type"], problem["answer_type"], problem["precision"]
    if setting == "format":
        if qtype == "multi_choice":
            return "Answer with the option's letter from the given choices directly."
        if atype == "integer":
            return "Answer the question using a single integer number."
        if atype == "float":
            return f"Answer the question using a single floating-point number with {_decimals(p)}."
        if atype == "list":
            return "Answer the question using a Python list."
        return "Answer the question using a single word or phrase."
    if qtype == "multi_choice":
        return (
            "Hint: Please answer the question and provide the correct option letter, "
            "e.g., A, B, C, D, at the end."
        )
    if atype == "integer":
        return (
            "Hint: Please answer the question requiring an integer answer and provide the "
            "final value, e.g., 1, 2, 3, at the end."
        )
    if atype == "float":
        return (
            f"Hint: Please answer the question requiring a floating-point number with "
            f"{_decimals(p)} and provide the final value, e.g., {_float_examples(p)}, at the end."
        )
    if atype == "list":
        return (
            "Hint: Please answer the question requiring a Python list as an answer and "
            "provide the final list, e.g., [1, 2, 3], [1.2, 1.3, 1.4], at the end."
        )
    return "Hint: Please answer the question and provide the final answer at the end."


def _mathvista_text(sample: Sample, question: str, setting: str) -> str:
    problem = mathvista_problem(sample)
    question_text = question if setting == "format" else f"Question: {question}"
    if problem["unit"]:
        question_text += f" (Unit: {problem['unit']})"
    choices_text = ""
    if sample.choices:
        if setting == "format":
            choices_text = "\n".join(f"{_letter(i)}. {c}" for i, c in enumerate(sample.choices))
        else:
            choices_text = "\n".join(
                ["Choices:", *(f"({_letter(i)}) {c}" for i, c in enumerate(sample.choices))]
            )
    elements = [question_text, choices_text, _hint(problem, setting)]
    if setting == "solution":
        elements.append("Solution: ")
    return "\n".join(e for e in elements if e != "").strip()


def _mathvista(setting: str) -> TextFn:
    def build(sample: Sample, question: str) -> tuple[str, str | None]:
        return _mathvista_text(sample, question, setting), None

    return build


# --------------------------------------------------------------------------- CRM

CRM_COT_INSTRUCTION = (
    "Think step by step. First describe the visual elements of the image that matter "
    "for the question, then the commonsense knowledge they call for, and reason from "
    "them to a conclusion. Write one numbered step per line (1., 2., ...) and end with "
    "a concise final conclusion."
)
CRM_ANSWER_INSTRUCTION = (
    "Based on your reasoning, give only the final answer as a short phrase, without explaining it."
)


def _crm_cot(sample: Sample, question: str) -> tuple[str, str | None]:
    return _append(question, CRM_COT_INSTRUCTION), None


def _crm_answer(sample: Sample, question: str, context: str) -> tuple[str, str | None]:
    chain = context.strip() or "(no reasoning was given)"
    return f"{question}\n\nYour reasoning:\n{chain}\n\n{CRM_ANSWER_INSTRUCTION}", None


# --------------------------------------------------------------------------- Idis

#: the Idis authors' prompt texts (vlmrobust/prompts/idis.yaml): repository, commit and,
#: per constant name, its file and text
IDIS_PROMPTS_FILE = Path(__file__).resolve().parent.parent / "prompts" / "idis.yaml"


def _load_idis_texts(path: Path) -> tuple[str, dict[str, str], dict[str, str]]:
    """(``owner/repo@commit8``, constant -> text, constant -> file) of the authors' prompts."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    prompts = data["prompts"]
    ref = f"{data['repository']}@{str(data['commit'])[:8]}"
    return (
        ref,
        {k: str(v["text"]) for k, v in prompts.items()},
        {k: str(v["file"]) for k, v in prompts.items()},
    )


IDIS_REF, IDIS_TEXTS, IDIS_FILES = _load_idis_texts(IDIS_PROMPTS_FILE)


def idis_source(constant: str) -> str:
    """The ``prompt_source`` of an authors' constant: ``effl-lab/Idis@b0443df2
    inference/prompts.py PERCEPTION_BASE``."""
    return f"{IDIS_REF} {IDIS_FILES[constant]} {constant}"


#: our wording of the App. E budget instruction, prepended (own line) to PERCEPTION_BASE
IDIS_BUDGET_INSTRUCTION = (
    "You have a thinking budget of {tokens} tokens. Keep your reasoning within at most "
    "{tokens} tokens before giving your answer."
)
#: the thinking budgets (tokens) of the ``idis-perception-budget-N`` prompts
IDIS_BUDGETS = (1024, 2048, 4096)

# the project's own wordings (the ``*-vlmrobust*`` builders)
IDIS_PERCEPTION_INSTRUCTION = (
    "Think step by step, then give your final answer as <answer>X</answer>, where X is one "
    "of the categories."
)
IDIS_PERCEPTION_MITIGATION = (
    "First identify the main object. Base your reasoning only on that object's own visual "
    "attributes."
)
IDIS_MATH_INSTRUCTION = "Solve the problem step by step and put the final answer in \\boxed{}."
IDIS_MATH_MC_NOTE = "For a multiple-choice question, put only the option letter in \\boxed{}."
WATERBIRDS_INSTRUCTION = (
    "Think step by step, then give your final answer as <answer>Landbird</answer> or "
    "<answer>Waterbird</answer>."
)
WATERBIRDS_MITIGATION = (
    "First identify the bird. Base your reasoning only on the bird's own visual attributes, "
    "not on the background."
)


def prompt_role(name: str) -> tuple[str, int | None]:
    """What a prompt setting is to the Idis study: ``("mitigation", None)`` for a
    mitigation prompt (``*-mitigate``), ``("budget", N)`` for a thinking-budget prompt
    (``*-budget-N``), else ``("main", None)``."""
    if name.endswith("-mitigate"):
        return "mitigation", None
    match = re.fullmatch(r".+-budget-(\d+)", name)
    if match:
        return "budget", int(match.group(1))
    return "main", None


def _fixed(constant: str, prefix: str | None = None) -> TextFn:
    """The authors' text ``constant`` as is (the row's question is not used), with
    ``prefix`` on its own line before it when given."""
    text = IDIS_TEXTS[constant]
    if prefix:
        text = f"{prefix}\n{text}"

    def build(sample: Sample, question: str) -> tuple[str, str | None]:
        return text, None

    return build


def _idis_math(sample: Sample, question: str) -> tuple[str, str | None]:
    """The question + the authors' ``SUFFIX`` (run_math_vllm.py: ``question + SUFFIX``)."""
    return question + IDIS_TEXTS["SUFFIX"], None


def _prefixed(instruction: str, prefix: str | None = None) -> TextFn:
    """The question, then ``instruction`` with ``prefix`` (when given) before it."""
    line = f"{prefix} {instruction}" if prefix else instruction

    def build(sample: Sample, question: str) -> tuple[str, str | None]:
        return _append(question, line), None

    return build


def _idis_math_own(sample: Sample, question: str) -> tuple[str, str | None]:
    line = IDIS_MATH_INSTRUCTION
    if sample.answer_type == "letter":
        line = f"{line} {IDIS_MATH_MC_NOTE}"
    return _append(question, line), None


def _idis_budget(tokens: int) -> PromptBuilder:
    return PromptBuilder(
        f"idis-perception-budget-{tokens}",
        "2",
        f"Idis perception (authors' base prompt) after our instruction to think for at "
        f"most {tokens} tokens",
        _fixed("PERCEPTION_BASE", IDIS_BUDGET_INSTRUCTION.format(tokens=tokens)),
        source=f"vlmrobust budget instruction + {idis_source('PERCEPTION_BASE')}",
    )


def _idis_budget_own(tokens: int) -> PromptBuilder:
    return PromptBuilder(
        f"idis-perception-vlmrobust-budget-{tokens}",
        "1",
        f"our Idis perception prompt asking to think for at most {tokens} tokens",
        _prefixed(
            IDIS_PERCEPTION_INSTRUCTION, f"Think for at most {tokens} tokens before answering."
        ),
    )


# --------------------------------------------------------------------------- lmms-eval


def _harness_text(sample: Sample, question: str) -> tuple[str, str | None]:
    """The text function of a harness setting: never called (its ``messages`` builds
    the prompt)."""
    raise NotImplementedError("an lmms-eval prompt is built by its messages function")


def _lmms_builder(name: str) -> PromptBuilder:
    """The prompt setting ``name`` of :data:`vlmrobust.core.harness.HARNESS_TASKS`: the
    pinned lmms-eval's own task code builds it (docs/prompts.md). Its label carries the
    lmms-eval release and the digest of the supplied templates, so another release or a
    changed template reruns the jobs that use it."""
    task = harness.HARNESS_TASKS[name]
    return PromptBuilder(
        name,
        f"1-lmms-eval-{harness.lmms_eval_version()}-templates-{harness.templates_digest()}",
        task.description,
        _harness_text,
        source=f"{harness.version_note()} tasks/{task.yaml}",
        messages=harness.messages_builder(name),
    )


# --------------------------------------------------------------------------- registry

PROMPTS: dict[str, PromptBuilder] = {
    b.name: b
    for b in (
        PromptBuilder("mcq", "1", "multiple choice: options + answer with the letter", _mcq),
        PromptBuilder("yesno", "1", "yes/no question", _yesno),
        PromptBuilder("short", "1", "short answer: a single word or phrase", _short),
        PromptBuilder("label", "1", "class label choice (ImageNet-9 style)", _label),
        PromptBuilder("mathvision", "1", "step by step, final answer in \\boxed{}", _mathvision),
        PromptBuilder("mathvista-cot", "1", "MathVista step-by-step (cot)", _mathvista("cot")),
        PromptBuilder(
            "mathvista-format", "1", "MathVista answer-format only", _mathvista("format")
        ),
        PromptBuilder(
            "mathvista-solution", "1", "MathVista 'Solution:' write-up", _mathvista("solution")
        ),
        PromptBuilder(
            "distract-open",
            "1",
            "Distract-Bench open-ended prompt of the released runs (solution layout)",
            _mathvista("solution"),
        ),
        PromptBuilder("crm-cot", "1", "CRM stage 1: numbered chain of thought (VisArgs)", _crm_cot),
        PromptBuilder(
            "crm-answer",
            "1",
            "CRM stage 2: the final answer only, after the model's own crm-cot chain",
            _crm_answer,
            needs="crm-cot",
        ),
        PromptBuilder(
            "idis-perception",
            "2",
            "Idis perception, the authors' base prompt (PERCEPTION_BASE)",
            _fixed("PERCEPTION_BASE"),
            source=idis_source("PERCEPTION_BASE"),
        ),
        PromptBuilder(
            "idis-perception-mitigate",
            "2",
            "Idis perception, the authors' attribute-guiding prompt (PERCEPTION_STRATEGY)",
            _fixed("PERCEPTION_STRATEGY"),
            source=idis_source("PERCEPTION_STRATEGY"),
        ),
        *(_idis_budget(n) for n in IDIS_BUDGETS),
        PromptBuilder(
            "idis-math",
            "2",
            "Idis math: the question + the authors' SUFFIX (<think>, \\boxed{})",
            _idis_math,
            source=idis_source("SUFFIX"),
        ),
        PromptBuilder(
            "waterbirds",
            "2",
            "Waterbirds, the authors' base prompt (WATERBIRDS_BASE)",
            _fixed("WATERBIRDS_BASE"),
            source=idis_source("WATERBIRDS_BASE"),
        ),
        PromptBuilder(
            "waterbirds-mitigate",
            "2",
            "Waterbirds, the authors' attribute-guiding prompt (WATERBIRDS_STRATEGY)",
            _fixed("WATERBIRDS_STRATEGY"),
            source=idis_source("WATERBIRDS_STRATEGY"),
        ),
        PromptBuilder(
            "idis-perception-vlmrobust",
            "1",
            "our Idis perception prompt: step by step, the category in <answer></answer>",
            _prefixed(IDIS_PERCEPTION_INSTRUCTION),
        ),
        PromptBuilder(
            "idis-perception-vlmrobust-mitigate",
            "1",
            "our Idis perception prompt with the instruction to reason on the main object only",
            _prefixed(IDIS_PERCEPTION_INSTRUCTION, IDIS_PERCEPTION_MITIGATION),
        ),
        *(_idis_budget_own(n) for n in IDIS_BUDGETS),
        PromptBuilder(
            "idis-math-vlmrobust",
            "1",
            "our Idis math prompt: step by step, the final answer in \\boxed{}",
            _idis_math_own,
        ),
        PromptBuilder(
            "waterbirds-vlmrobust",
            "1",
            "our Waterbirds prompt: step by step, Landbird or Waterbird in <answer></answer>",
            _prefixed(WATERBIRDS_INSTRUCTION),
        ),
        PromptBuilder(
            "waterbirds-vlmrobust-mitigate",
            "1",
            "our Waterbirds prompt with the instruction to reason on the bird, not the background",
            _prefixed(WATERBIRDS_INSTRUCTION, WATERBIRDS_MITIGATION),
        ),
        *(_lmms_builder(name) for name in harness.HARNESS_TASKS),
    )
}


def build_prompt(
    sample: Sample,
    variant: Variant,
    name: str,
    context: str | None = None,
    model: dict[str, Any] | None = None,
) -> BuiltPrompt:
    """The prompt ``name`` for ``sample`` under ``variant`` (question and images of the
    variant). A second-stage prompt (``needs`` set) takes ``context``: the answer the
    model gave to the ``needs`` prompt on the same variant. ``model`` is the answering
    model's registry entry: a builder whose text or system prompt depends on the model
    (a harness's per-model settings) reads it; the others ignore it."""
    builder = PROMPTS.get(name)
    if builder is None:
        raise ValueError(f"unknown prompt {name!r}; known prompts: {', '.join(sorted(PROMPTS))}")
    if variant.sample_id != sample.sample_id:
        raise ValueError(
            f"variant {variant.variant_id!r} belongs to sample {variant.sample_id!r}, "
            f"not {sample.sample_id!r}"
        )
    question = variant.question if variant.question is not None else sample.question
    if builder.messages is not None:
        if context is not None:
            raise ValueError(f"prompt {name!r} takes no context")
        images = [str(p) for p in variant.images]
        content, system, source = builder.messages(sample, question, images, model)
        return BuiltPrompt(builder.name, builder.version, content, system, source or builder.source)
    if builder.needs is not None:
        if context is None:
            raise ValueError(
                f"prompt {name!r} is built on the model's {builder.needs!r} output, but "
                f"variant {variant.variant_id!r} has none (no --context file, or no row "
                "for the variant in it)"
            )
        text, system = builder.text(sample, question, context)  # type: ignore[call-arg]
    else:
        if context is not None:
            raise ValueError(f"prompt {name!r} takes no context")
        text, system = builder.text(sample, question)  # type: ignore[call-arg]
    content = interleave(text, list(variant.images), sample.meta)
    source = builder.source
    if builder.name in harness.CHAT_WRAPPED_PROMPTS and system is None:
        system, wrapper = harness.wrapper_system(model)
        if system is not None:
            source = f"{source}; system message of lmms-eval's {wrapper} chat wrapper"
    return BuiltPrompt(builder.name, builder.version, content, system, source)


_BY_ANSWER_TYPE = {
    "letter": "mcq",
    "yes/no": "yesno",
    "label": "label",
    "number": "short",
    "text": "short",
    "list": "short",
}
#: the benchmarks whose record names a default prompt (the others go by answer type)
_BY_ADAPTER = {b.name: b.default_prompt for b in BENCHMARKS.values() if b.default_prompt}


def default_prompt(adapter: str, sample: Sample) -> str:
    """The prompt a dataset gets when the run config names none (module docstring)."""
    if adapter in _BY_ADAPTER:
        return _BY_ADAPTER[adapter]
    try:
        return _BY_ANSWER_TYPE[sample.answer_type]
    except KeyError:
        raise ValueError(
            f"sample {sample.sample_id!r}: no default prompt for answer_type {sample.answer_type!r}"
        ) from None


def prompt_versions(prompt: str, adapter: str) -> dict[str, str]:
    """Versions of the builders a job with prompt setting ``prompt`` may use, by name:
    the named builder, or for ``"default"`` every prompt :func:`default_prompt` can
    choose for ``adapter``. The workflow puts them in the inference job, so bumping a
    builder's version reruns the jobs that use it."""
    if prompt != DEFAULT_PROMPT:
        names = [prompt]
    elif adapter in _BY_ADAPTER:
        names = [_BY_ADAPTER[adapter]]
    else:
        names = sorted(set(_BY_ANSWER_TYPE.values()))
    return {n: PROMPTS[n].version for n in names if n in PROMPTS}
