"""One adapter per benchmark: hub schema row -> :class:`~vlmrobust.core.records.Sample` draft.

Every adapter reads the benchmark's rows from the hub (``datasets.load_dataset``) or
from a local folder in the same schema (see :mod:`vlmrobust.data.base`). The hub
defaults and answer types come from each benchmark's record in
:mod:`vlmrobust.core.benchmarks` (docs/adding-a-benchmark.md); what each adapter keeps in
``meta`` is listed in its docstring. Every sample's ``meta["source_id"]`` is the
dataset's own id (added by :func:`vlmrobust.data.build_samples`).
The base datasets of the Idis study (ImageNet-9, MathVerse, LogicVista, Waterbirds)
have their adapters in :mod:`vlmrobust.data.idis`.

Distract-Bench local layout (``source: local``, ``path: <folder>``), either

- ``questions.jsonl`` (final_id, image, question, options, answer, ...), optional
  ``edit_instructions.jsonl`` (final_id, edit{...}), the distracted images at the
  paths named by ``image`` / ``image_paths`` (e.g. ``images/1.png``) and the clean
  images under ``original_images/`` with the same file name
  (``original_images/1.png``); a row may instead name its clean image(s) in
  ``original_image`` (a path relative to the folder); or
- a parquet export of the hub dataset (``image`` = distracted, ``original_image`` =
  clean, as ``{bytes, path}`` structs), with ``questions.jsonl`` /
  ``edit_instructions.jsonl`` beside it filling in fields the parquet rows lack.

With ``source: hub`` a ``path`` may name a folder holding ``questions.jsonl`` /
``edit_instructions.jsonl``; they fill in the fields the hub rows lack (joined on
``final_id``; hub rows without an id column are numbered 1, 2, ... in order, as the
released files are sorted by final_id).
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ..core.benchmarks import BENCHMARKS
from ..core.decisions import apply_decisions, read_candidates, read_decisions
from ..core.io import read_jsonl
from .base import (
    IMAGE_PLACEHOLDER,
    Adapter,
    Draft,
    RowProblem,
    RowSource,
    answer_text,
    find_data_files,
    image_list,
    is_number,
    iter_files,
    jsonable,
    letter,
    letter_index,
    missing,
    number_or_text,
    parse_list,
    question_text,
    to_int,
)
from .idis import ImageNet9, LogicVista, MathVerse, Waterbirds
from .visargs import VisArgs


def _pick(row: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: jsonable(row.get(k)) for k in keys}


# --------------------------------------------------------------------------- MMMU

_IMAGE_MARK = re.compile(r"<image\s*(\d+)>")


class MMMU(Adapter):
    """MMMU (``lmms-lab/MMMU`` validation, 900).

    Images: the ``image_N`` columns referenced by ``<image N>`` markers in the
    question or the options, in the order of N (``meta["image_numbers"]`` gives N
    for each image, so marker ``<image N>`` is ``images[image_numbers.index(N)]``);
    a question without markers gets every non-empty image column. Multiple choice:
    answer = letter, choices = the parsed options. Open: answer as given, ``number``
    if it parses as a number else ``text``. Meta: question_type, subfield, img_type,
    topic_difficulty, explanation, image_numbers, options (the hub's ``options`` as
    given, a list literal in a string: lmms-eval's MMMU prompt parses it itself).
    """

    benchmark = BENCHMARKS["mmmu"]
    id_label = "id"

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        question = question_text(row)
        options = parse_list(row.get("options"))
        qtype = str(row.get("question_type") or "").strip()
        answer = answer_text(row.get("answer"))
        if qtype == "multiple-choice":
            i = letter_index(answer, len(options) or None)
            if i is None and answer in options:
                i = options.index(answer)
            if i is None:
                raise RowProblem(
                    f"multiple-choice answer {answer!r} is not an option letter "
                    f"(A-{letter(max(len(options), 1) - 1)})"
                )
            answer, answer_type, choices = letter(i), "letter", options
        elif qtype == "open":
            answer_type, choices = number_or_text(answer), []
        else:
            raise RowProblem(f"question_type {qtype!r} is neither 'multiple-choice' nor 'open'")
        text = question + "\n" + "\n".join(options)
        numbers = sorted({int(n) for n in _IMAGE_MARK.findall(text)})
        if not numbers:
            numbers = [n for n in range(1, 8) if row.get(f"image_{n}") is not None]
        images = []
        for n in numbers:
            value = row.get(f"image_{n}")
            if value is None:
                raise RowProblem(f"the question refers to <image {n}> but image_{n} is empty")
            images.append(value)
        if not images:
            raise RowProblem("image is missing (no image_1 ... image_7)")
        img_type = row.get("img_type")
        if isinstance(img_type, str):
            with contextlib.suppress(RowProblem):
                img_type = parse_list(img_type, "img_type")
        meta = _pick(
            row, ("question_type", "subfield", "topic_difficulty", "explanation", "options")
        )
        meta["img_type"] = jsonable(img_type)
        meta["image_numbers"] = numbers
        return Draft(question, answer, answer_type, images, choices=choices, meta=meta)

    def placeholder_images(self, row: dict[str, Any]) -> dict[str, Any]:
        """Stand-ins for the ``image_N`` columns the question or options refer to (or
        ``image_1`` when they refer to none and every column is empty)."""
        row = dict(row)
        text = str(row.get("question") or "") + "\n" + str(row.get("options") or "")
        numbers = {int(n) for n in _IMAGE_MARK.findall(text)}
        if not numbers and all(row.get(f"image_{n}") is None for n in range(1, 8)):
            numbers = {1}
        for n in numbers:
            if row.get(f"image_{n}") is None:
                row[f"image_{n}"] = IMAGE_PLACEHOLDER
        return row


# --------------------------------------------------------------------------- MathVista

_MATHVISTA_TYPES = {"integer": "number", "float": "number", "list": "list", "text": "text"}


class MathVista(Adapter):
    """MathVista (``AI4Math/MathVista`` testmini, 1,000).

    Image: ``decoded_image``, else the ``image`` path. Multiple choice: choices =
    ``choices``, answer = the option TEXT (answer_type ``text``). Free form: answer
    type integer/float -> ``number``, list -> ``list``, text -> ``text``. ``precision``
    -> Sample.precision. Meta: question_type, answer_type, unit, precision, query,
    metadata.
    """

    benchmark = BENCHMARKS["mathvista"]
    id_label = "pid"

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        question = question_text(row)
        answer = answer_text(row.get("answer"))
        qtype = str(row.get("question_type") or "").strip()
        atype = str(row.get("answer_type") or "").strip()
        if qtype == "multi_choice":
            choices = parse_list(row.get("choices"), "choices")
            if not choices:
                raise RowProblem("multi_choice question without choices")
            if answer not in choices:
                stripped = [c.strip() for c in choices]
                if answer not in stripped:
                    raise RowProblem(f"multi_choice answer {answer!r} is not one of the choices")
                answer = choices[stripped.index(answer)]
            answer_type = "text"
        elif qtype == "free_form":
            choices = []
            if atype not in _MATHVISTA_TYPES:
                raise RowProblem(f"answer_type {atype!r} is not integer, float, list or text")
            answer_type = _MATHVISTA_TYPES[atype]
        else:
            raise RowProblem(f"question_type {qtype!r} is neither 'multi_choice' nor 'free_form'")
        image = row.get("decoded_image")
        if image is None:
            image = row.get("image")
        meta = _pick(
            row, ("question_type", "answer_type", "unit", "precision", "query", "metadata")
        )
        return Draft(
            question,
            answer,
            answer_type,
            [image],
            choices=choices,
            precision=to_int(row.get("precision")),
            meta=meta,
        )


# --------------------------------------------------------------------------- MathVision


def _letter_or_value(options: list[str], answer: str) -> tuple[str, str, list[str]]:
    """Letter answer when there are options, else the value (number or text)."""
    if options:
        if letter_index(answer, len(options)) is None:
            raise RowProblem(
                f"answer {answer!r} is not an option letter A-{letter(len(options) - 1)}"
            )
        return answer, "letter", options
    return answer, number_or_text(answer), []


#: The options of a MATH-V question whose options are pictured: the release lists
#: them as the bare letters (384 of the test set's 1,532 multiple-choice rows).
PICTURED_OPTIONS = ["A", "B", "C", "D", "E"]
#: A placeholder for a part of MATH-V's one composite image (``<image2>`` ...).
_MATHV_PART = re.compile(r"<image([2-9]|\d{2,})>")


class MathVision(Adapter):
    """MathVision (``MathLLMs/MathVision`` testmini, 304; the test set, 3,040).

    Image: ``decoded_image``, else the ``image`` path. Options non-empty -> choices
    and a letter answer; else the value (``number`` if numeric else ``text``). A letter
    ``A``-``E`` answer with empty options (test rows 59 and 434: their image pictures
    the options A-E) is multiple choice over :data:`PICTURED_OPTIONS`, as the release
    writes its other pictured options; ``meta.options_pictured: true`` marks it and the
    report lists the ids (``letter_answers_without_options``). The question is kept
    verbatim: its ``<image1>`` and, in 334 test questions, ``<image2>`` ... ``<image7>``
    name parts of the ONE composite image, which shows each part under its placeholder
    (``<image2>:``), so the text and the picture refer to each other as released; the
    report counts those questions (``questions_with_image_parts``). Meta: level,
    subject, solution (plus ``options_pictured`` where set).
    """

    benchmark = BENCHMARKS["mathvision"]
    id_label = "id"

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        question = question_text(row)
        answer = answer_text(row.get("answer"))
        options = parse_list(row.get("options"))
        meta = _pick(row, ("level", "subject", "solution"))
        if not options and answer in PICTURED_OPTIONS:
            options = list(PICTURED_OPTIONS)
            meta["options_pictured"] = True
        answer, answer_type, choices = _letter_or_value(options, answer)
        image = row.get("decoded_image")
        if image is None:
            image = row.get("image")
        return Draft(question, answer, answer_type, [image], choices=choices, meta=meta)

    def report_fields(self, samples: list[Any]) -> dict[str, Any]:
        """``letter_answers_without_options`` (ids given the pictured options A-E) and
        ``questions_with_image_parts`` (questions naming ``<image2>`` or a later part)."""
        return {
            "letter_answers_without_options": [
                str(s.meta["source_id"]) for s in samples if s.meta.get("options_pictured")
            ],
            "questions_with_image_parts": sum(1 for s in samples if _MATHV_PART.search(s.question)),
        }


# --------------------------------------------------------------------------- ChartQA


class ChartQA(Adapter):
    """ChartQA (``lmms-lab/ChartQA`` test, 2,500). The id is the row index.

    Answer: ``number`` if numeric else ``text``. Meta: type (human_test/augmented).
    """

    benchmark = BENCHMARKS["chartqa"]
    id_label = "row"

    def source_id(self, row: dict[str, Any], index: int) -> str:
        return str(index)

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        answer = answer_text(row.get("answer"))
        meta = _pick(row, ("type",))
        return Draft(
            question_text(row), answer, number_or_text(answer), [row.get("image")], meta=meta
        )


# --------------------------------------------------------------------------- HallusionBench

_HB_KEY = ("category", "subcategory", "set_id", "figure_id", "question_id")


class HallusionBench(Adapter):
    """HallusionBench (``lmms-lab/HallusionBench`` split image, 951).

    The id joins category, subcategory, set_id, figure_id and question_id (one row
    per question per figure). gt_answer ``1``/``0`` -> ``yes``/``no``. A row without an
    image is a bad row. Meta: category, subcategory, set_id, figure_id, question_id,
    sample_note, visual_input, gt_answer_details, filename.
    """

    benchmark = BENCHMARKS["hallusionbench"]
    id_label = "id"

    def source_id(self, row: dict[str, Any], index: int) -> str:
        parts = []
        for k in _HB_KEY:
            value = row.get(k)
            if missing(value):
                raise RowProblem(f"{k} is missing (needed for the id)")
            parts.append(str(value))
        return "_".join(parts)

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        gt = str(row.get("gt_answer") if row.get("gt_answer") is not None else "").strip()
        if gt not in ("1", "0"):
            raise RowProblem(f"gt_answer {gt!r} is neither '1' nor '0'")
        if row.get("image") is None:
            raise RowProblem("image is missing")
        meta = _pick(
            row,
            (
                "category",
                "subcategory",
                "set_id",
                "figure_id",
                "question_id",
                "sample_note",
                "visual_input",
                "gt_answer_details",
                "filename",
            ),
        )
        answer = "yes" if gt == "1" else "no"
        return Draft(question_text(row), answer, "yes/no", [row["image"]], meta=meta)


# --------------------------------------------------------------------------- InfoVQA


class InfoVQA(Adapter):
    """InfographicVQA (``lmms-lab/DocVQA`` config InfographicVQA, validation, 2,801).

    Answer = the first of ``answers``; ``meta["answers"]`` = all (ANLS takes the best).
    Meta: answers, answer_types (the source's ``answer_type`` list).
    """

    benchmark = BENCHMARKS["infovqa"]
    id_label = "questionId"

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        answers = [str(a).strip() for a in (row.get("answers") or []) if not missing(a)]
        if not answers:
            raise RowProblem("no answer (answers is empty)")
        meta = {"answers": answers, "answer_types": jsonable(row.get("answer_type"))}
        return Draft(question_text(row), answers[0], "text", [row.get("image")], meta=meta)


# --------------------------------------------------------------------------- MMStar

_OPTIONS_MARK = re.compile(r"(?:^|\n|\s)Options:\s*")
_CHOICES_MARK = re.compile(r"(?:^|\n)Choices:\s*\n")
_PAREN_OPTION = re.compile(r"^\(([A-Z])\)\s?(.*)$")


def parse_inline_options(text: str) -> tuple[str, list[str]] | None:
    """Split MMStar's question into the stem and its options.

    Handles ``...\\nOptions: A: x, B: y, C: z`` and ``...\\nChoices:\\n(A) x\\n(B) y``.
    Returns ``None`` when the text has no options in either form (or fewer than two).
    """
    marks = list(_OPTIONS_MARK.finditer(text))
    if marks:
        m = marks[-1]
        stem, tail = text[: m.start()].rstrip(), text[m.end() :]
        if tail.startswith("A:"):
            starts = [(0, len("A:"))]
            pos = 2
            for i in range(1, 26):
                nxt = re.compile(rf"[,;]?\s+{letter(i)}:\s?").search(tail, pos)
                if not nxt:
                    break
                starts.append((nxt.start(), nxt.end()))
                pos = nxt.end()
            options = []
            for k, (_, body_start) in enumerate(starts):
                end = starts[k + 1][0] if k + 1 < len(starts) else len(tail)
                options.append(tail[body_start:end].strip().rstrip(",;").strip())
            if len(options) >= 2 and all(options):
                return stem, options
    marks = list(_CHOICES_MARK.finditer(text))
    if marks:
        m = marks[-1]
        stem, tail = text[: m.start()].rstrip(), text[m.end() :]
        options = []
        for line in tail.strip().split("\n"):
            pm = _PAREN_OPTION.match(line.strip())
            if not pm or pm[1] != letter(len(options)):
                break
            options.append(pm[2].strip())
        if len(options) >= 2:
            return stem, options
    return None


class MMStar(Adapter):
    """MMStar (``Lin-Chen/MMStar`` val, 1,500).

    The options are inside the question text (``Options: A: ..., B: ...``); when they
    parse, ``choices`` holds them and ``question`` the stem before them
    (``meta["raw_question"]`` keeps the original text); when they do not,
    ``question`` is the original text and ``choices`` is empty
    (``meta["options_parsed"]`` says which). Answer: the letter. Meta: category,
    l2_category, index, meta_info, raw_question, options_parsed.
    """

    benchmark = BENCHMARKS["mmstar"]
    id_label = "index"

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        raw = question_text(row)
        answer = answer_text(row.get("answer"))
        if letter_index(answer) is None:
            raise RowProblem(f"answer {answer!r} is not an option letter")
        parsed = parse_inline_options(raw)
        if parsed is not None and letter_index(answer, len(parsed[1])) is None:
            parsed = None  # the answer is beyond the parsed options: parse not trusted
        question, choices = parsed if parsed is not None else (raw, [])
        meta = _pick(row, ("category", "l2_category", "index", "meta_info"))
        meta["raw_question"] = raw
        meta["options_parsed"] = parsed is not None
        return Draft(question, answer, "letter", [row.get("image")], choices=choices, meta=meta)


# --------------------------------------------------------------------------- TextVQA


def most_common(answers: list[str]) -> str:
    """The most frequent answer; ties go to the one that comes first."""
    counts = Counter(answers)
    return max(answers, key=lambda a: counts[a])


class TextVQA(Adapter):
    """TextVQA (``lmms-lab/textvqa`` validation, 5,000).

    ``meta["answers"]`` = the ten annotator answers; answer = the most common one
    (after stripping whitespace; ties go to the first). Meta: answers, image_id,
    ocr_tokens.
    """

    benchmark = BENCHMARKS["textvqa"]
    id_label = "question_id"

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        answers = [str(a).strip() for a in (row.get("answers") or []) if not missing(a)]
        if not answers:
            raise RowProblem("no answer (answers is empty)")
        meta = {"answers": answers, **_pick(row, ("image_id", "ocr_tokens"))}
        return Draft(
            question_text(row), most_common(answers), "text", [row.get("image")], meta=meta
        )


# --------------------------------------------------------------------------- Distract-Bench

_DB_MAPPED = {
    "final_id",
    "question",
    "options",
    "choices",
    "answer",
    "image",
    "image_paths",
    "original_image",
    "original_image_paths",
    "decoded_image",
    "edit",
}


def _join_by_final_id(path: Path) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for row in read_jsonl(path):
        fid = row.get("final_id")
        if missing(fid):
            raise ValueError(f"{path}: a row has no final_id")
        rows[str(fid)] = row
    return rows


#: a whole MathVista query held in ``question`` (three released rows: final_id 29, 150,
#: 385): "Hint: ...\nQuestion: ...\nChoices:\n(A) ...\n(B) ..."
_WHOLE_QUERY = re.compile(
    r"^\s*(?P<hint>Hint:.*?)\n(?:Question:\s*)(?P<question>.*?)"
    r"(?:\nChoices:\n(?P<choices>(?:\([A-Z]\)[^\n]*(?:\n|$))+))?\s*$",
    re.S,
)
_CHOICE_LINE = re.compile(r"^\(([A-Z])\)\s?(.*)$")
#: the precision a MathVista query's hint asks for ("... with two decimal places ...")
_QUERY_DECIMALS = re.compile(r"floating-point number with (\w+) decimal place")
_DECIMAL_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def split_whole_query(question: str, options: list[str]) -> tuple[str, str] | None:
    """``(bare question, hint)`` of a ``question`` that holds MathVista's whole query
    (hint, question and choices; :data:`_WHOLE_QUERY`), or None for an ordinary
    question. Its choices must be the row's ``options`` in order (a bad row
    otherwise), so the prompt lists them once, from the options."""
    match = _WHOLE_QUERY.match(question)
    if match is None:
        return None
    listed = []
    for line in (match.group("choices") or "").splitlines():
        choice = _CHOICE_LINE.match(line)
        if choice:
            listed.append(choice.group(2))
    if [c.strip() for c in listed] != [o.strip() for o in options]:
        raise RowProblem(
            f"question holds a whole MathVista query whose choices {listed!r} are not the "
            f"options {options!r}"
        )
    return match.group("question").strip(), match.group("hint").strip()


def float_precision(answer: str, query: Any) -> tuple[int | None, str | None]:
    """(decimals, where from) a float answer is asked with when its row gives no
    precision: the ones the row's MathVista ``query`` hint names ("... with two decimal
    places": ``query``), else the answer's own decimals (``13.8`` -> 1: ``answer``);
    (None, None) for an answer without any. Eight released rows (final_id 32, 78, 232,
    ...) have no precision, and their runs asked for the decimals the hint names."""
    if isinstance(query, str):
        match = _QUERY_DECIMALS.search(query)
        if match:
            word = match.group(1).lower()
            if word in _DECIMAL_WORDS:
                return _DECIMAL_WORDS[word], "query"
            if word.isdigit():
                return int(word), "query"
    text = answer.strip()
    if re.fullmatch(r"[+-]?\d*\.\d+", text):
        return len(text.split(".")[1]), "answer"
    return None, None


def _option_of_text(answer: str, options: list[str]) -> int:
    """The index of the one option whose text is ``answer`` (surrounding spaces
    ignored); a bad row when none or several are."""
    hits = [i for i, o in enumerate(options) if o.strip() == answer.strip()]
    if len(hits) != 1:
        raise RowProblem(
            f"answer {answer!r} is neither an option letter A-{letter(len(options) - 1)} "
            + ("nor the text of one option" if not hits else "and the text of several options")
        )
    return hits[0]


class DistractBench(Adapter):
    """Distract-Bench (``EthanSun/Distract-Bench`` test, 506); local layouts: module doc.

    ``images`` = the ORIGINAL (clean) image(s); the distracted image(s) are stored too
    and listed in ``meta["distracted_images"]``; ``meta["edit"]`` = the edit record
    (dead_end_description, trap_reasoning_path, trap_answer, edit_instruction,
    style_constraints) or ``None`` when there is none. Answers keep the source
    benchmark's convention: MathVista-derived rows (question_type ``multi_choice``)
    answer with the option TEXT (``text``); other rows with options answer with a
    letter; rows without options with the value (``number``/``list``/``text``). A row
    with options, no question_type and an answer equal to one option's text (three
    released rows) answers with that option's letter; ``meta["answer_from_option_text"]``
    keeps the text and the samples report lists them (``answers_from_option_text``).
    Meta: level, subject, solution, source_style (mathvista, mmmu or mathvision,
    inferred from the fields), and every other non-image field of the row.

    As the released runs asked them (``benchmarks/distract_prompts.py``: 506/506): a
    float answer without ``precision`` takes the decimals its ``query`` hint names, else
    the answer's (:func:`float_precision`; ``meta["precision_from"]``), and a
    ``question`` holding MathVista's whole query (hint, question, choices) becomes the
    bare question (:func:`split_whole_query`; ``meta["question_from_query"]``,
    ``meta["query_hint"]``), so the prompt states the choices and the hint once.
    """

    benchmark = BENCHMARKS["distract-bench"]
    id_label = "final_id"
    exclude_files = ("questions.jsonl", "edit_instructions.jsonl")

    def load_rows(self, spec: dict[str, Any], key: str) -> RowSource:
        source = spec.get("source") or "hub"
        split = spec.get("split") or self.split
        questions: dict[str, dict[str, Any]] = {}
        edits: dict[str, dict[str, Any]] = {}
        folder: Path | None = None
        if source == "local" or spec.get("path"):
            folder = self.local_folder(spec, key)
            if (folder / "questions.jsonl").is_file():
                questions = _join_by_final_id(folder / "questions.jsonl")
            if (folder / "edit_instructions.jsonl").is_file():
                edits = _join_by_final_id(folder / "edit_instructions.jsonl")
        if source == "hub":
            src = super().load_rows(spec, key)
            src.rows = self._joined(src.rows, questions, edits, local=False)
            if folder is not None:
                src.info["metadata_path"] = str(folder)
            return src
        assert folder is not None
        files: list[Path] = []
        if any(folder.rglob("*.parquet")):
            files = find_data_files(folder, split, key=key, exclude=self.exclude_files)
        if files:
            rows: Any = iter_files(files)
            info: dict[str, Any] = {"files": [str(p.relative_to(folder)) for p in files]}
        elif questions:
            rows = iter(questions.values())
            info = {"files": ["questions.jsonl"]}
        else:
            raise ValueError(
                f"{key}.path: {str(folder)!r} holds neither questions.jsonl nor parquet files; "
                "expected questions.jsonl (+ edit_instructions.jsonl, images/, "
                "original_images/) or a parquet export with image/original_image columns"
            )
        if edits:
            info["files"].append("edit_instructions.jsonl")
        info = {"path": str(folder), "split": split, **info}
        return RowSource(self._joined(rows, questions, edits, local=not files), folder, info)

    @staticmethod
    def _joined(rows, questions, edits, *, local: bool):
        for i, row in enumerate(rows):
            row = dict(row)
            fid = row.get("final_id", row.get("id"))
            if missing(fid):
                fid = str(i + 1)
                row["final_id_from_position"] = True
            fid = str(fid)
            row["final_id"] = fid
            for k, v in questions.get(fid, {}).items():
                if k not in row or row[k] is None:
                    row[k] = v
            if row.get("edit") is None and fid in edits:
                row["edit"] = edits[fid].get("edit")
            if local:
                row["_clean_from_distracted"] = True
            yield row

    def check(self, samples: list[Any]) -> list[str]:
        warnings = []
        lacking = [s.sample_id for s in samples if not s.meta.get("edit")]
        if lacking:
            warnings.append(
                f"{len(lacking)} sample(s) have no edit record (e.g. {lacking[0]}); the "
                "distractor-reference judge needs it: add edit_instructions.jsonl to the folder"
            )
        texts = self.report_fields(samples)["answers_from_option_text"]
        if texts:
            warnings.append(
                f"{len(texts)} sample(s) give the option's text as answer instead of its "
                f"letter (final_id {', '.join(texts)}); read as that option "
                "(meta.answer_from_option_text keeps the text)"
            )
        return warnings

    def report_fields(self, samples: list[Any]) -> dict[str, Any]:
        """``answers_from_option_text``: the final_ids whose answer was an option's text
        (read as that option's letter)."""
        return {
            "answers_from_option_text": [
                str(s.meta["source_id"]) for s in samples if "answer_from_option_text" in s.meta
            ]
        }

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        if missing(row.get("question")):
            raise RowProblem(
                "question is missing; hub rows without question fields need the dataset's "
                "path set to a folder holding questions.jsonl (joined on final_id)"
            )
        question = question_text(row)
        answer = answer_text(row.get("answer"))
        options = parse_list(row.get("options", row.get("choices")))
        qtype = str(row.get("question_type") or "").strip()
        precision = None
        precision_from: str | None = None
        given_as_text: str | None = None
        if qtype in ("multi_choice", "free_form"):
            style = "mathvista"
        elif qtype in ("multiple-choice", "open"):
            style = "mmmu"
        else:
            style = "mathvision"
        if options and qtype == "multi_choice":
            stripped = [o.strip() for o in options]
            if answer not in options and answer not in stripped:
                raise RowProblem(f"multi_choice answer {answer!r} is not one of the options")
            if answer not in options:
                answer = options[stripped.index(answer)]
            answer_type = "text"
        elif options:
            i = letter_index(answer, len(options))
            if i is None:
                # three released rows (final_id 29, 150, 385: MathVista rows without a
                # question_type) give the option's TEXT; the release's judge reads them as
                # multiple choice, so the text names that option (counted in the report)
                i = _option_of_text(answer, options)
                given_as_text = answer
                answer = letter(i)
            answer_type = "letter"
        else:
            atype = str(row.get("answer_type") or "").strip()
            answer_type = _MATHVISTA_TYPES.get(atype) or number_or_text(answer)
            if answer_type == "text" and is_number(answer):
                answer_type = "number"
            precision = to_int(row.get("precision"))
            if atype == "float" and precision is None:
                precision, precision_from = float_precision(answer, row.get("query"))
        whole = split_whole_query(question, options) if options else None
        if whole is not None:
            # three released rows (final_id 29, 150, 385) hold MathVista's whole query;
            # the released prompt asks the bare question, its choices and hint once
            question, query_hint = whole
        distracted, clean = self._images(row)
        meta = self._meta(row, style)
        if row.get("final_id_from_position"):
            meta["final_id_from_position"] = True
        if given_as_text is not None:
            meta["answer_from_option_text"] = given_as_text
        if precision_from is not None:
            meta["precision_from"] = precision_from
        if whole is not None:
            meta.update({"question_from_query": True, "query_hint": query_hint})
        return Draft(
            question,
            answer,
            answer_type,
            clean,
            choices=options,
            precision=precision,
            meta=meta,
            extra_images={"distracted_images": distracted},
        )

    @staticmethod
    def _meta(row: dict[str, Any], style: str) -> dict[str, Any]:
        """Every non-image field of the row, the common ones always, and the style."""
        meta = {
            k: jsonable(v)
            for k, v in row.items()
            if k not in _DB_MAPPED and not k.startswith("_") and k != "final_id_from_position"
        }
        meta.update(
            {
                "level": jsonable(row.get("level")),
                "subject": jsonable(row.get("subject")),
                "solution": jsonable(row.get("solution")),
                "edit": jsonable(row.get("edit")),
                "source_style": style,
            }
        )
        return meta

    @staticmethod
    def _images(row: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        if row.get("_clean_from_distracted"):
            # questions.jsonl rows: paths relative to the folder
            distracted = [p for p in image_list(row.get("image_paths")) if not missing(p)]
            if not distracted and not missing(row.get("image")):
                distracted = [row["image"]]
            clean = image_list(row.get("original_image"))
            if not clean:
                clean = [str(Path("original_images") / Path(str(p)).name) for p in distracted]
        else:
            distracted = image_list(row.get("image"))
            clean = image_list(row.get("original_image"))
        if not distracted:
            raise RowProblem("distracted image is missing (image)")
        if not clean:
            raise RowProblem("original (clean) image is missing (original_image)")
        return distracted, clean


# --------------------------------------------------------------------------- demo


class Demo(Adapter):
    """The embedded demo: ``<path>/rows.jsonl`` written by the demo generator.

    One JSON object per line: ``{"id", "images" (paths relative to <path>),
    "question", "choices", "answer", "answer_type", "precision", "meta"}``. The images
    are copied into the samples' images folder like every other adapter's.
    """

    benchmark = BENCHMARKS["demo"]
    id_label = "id"

    def load_rows(self, spec: dict[str, Any], key: str) -> RowSource:
        folder = self.local_only_folder(spec, key, "the demo generator's folder")
        rows_file = folder / "rows.jsonl"
        if not rows_file.is_file():
            raise ValueError(
                f"{key}.path: {str(folder)!r} has no rows.jsonl; it should be the folder the "
                "demo generator wrote"
            )
        return RowSource(
            read_jsonl(rows_file), folder, {"path": str(folder), "files": ["rows.jsonl"]}
        )

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        images = row.get("images")
        if not isinstance(images, list) or not images:
            raise RowProblem("images is missing or not a list of paths")
        choices = row.get("choices") or []
        if not isinstance(choices, list):
            raise RowProblem("choices is not a list")
        precision = row.get("precision")
        meta = row.get("meta") or {}
        if not isinstance(meta, dict):
            raise RowProblem("meta is not an object")
        return Draft(
            question_text(row),
            answer_text(row.get("answer")),
            str(row.get("answer_type") or ""),
            images,
            choices=[str(c) for c in choices],
            precision=to_int(precision),
            meta=jsonable(meta),
        )


# --------------------------------------------------------------------------- constructed


class Constructed(Adapter):
    """A distraction benchmark built by this workflow (Distract-Bench §3, vlmrobust.construct).

    Reads ``<path>/candidates.jsonl`` (written by the construction step; image paths as
    written there, relative to the working directory) and the human-verification
    decisions file named by ``datasets.<name>.decisions`` (vlmrobust.core.decisions). Only
    ACCEPTED candidates become samples: the clean image is the original, the edited one
    goes to ``meta["distracted_images"]`` and the edit record to ``meta["edit"]`` (the
    fields of the released Distract-Bench: dead_end_description, trap_reasoning_path,
    trap_answer, edit_instruction), so the ``distraction`` condition and the
    distractor-reference judge read it like the released benchmark. The report counts
    generated, accepted, rejected (per criterion) and undecided candidates.
    """

    benchmark = BENCHMARKS["constructed"]
    id_label = "sample_id"

    def load_rows(self, spec: dict[str, Any], key: str) -> RowSource:
        folder = self.local_folder(spec, key)
        path = folder / "candidates.jsonl"
        if not path.is_file():
            raise ValueError(f"{key}.path: {str(folder)!r} has no candidates.jsonl")
        candidates = read_candidates(path)
        decisions_path = spec.get("decisions")
        if not decisions_path:
            raise ValueError(
                f"{key}.decisions: the human-verification decisions file is required for "
                "adapter 'constructed' (only accepted candidates become samples)"
            )
        ids = [c.sample_id for c in candidates]
        decisions = read_decisions(decisions_path, ids, missing_ok=True)
        accepted, report = apply_decisions(candidates, decisions)
        keep = set(accepted)
        rows = [c.to_dict() for c in candidates if c.sample_id in keep]
        info = {"path": str(folder), "files": ["candidates.jsonl"], "verification": report}
        return RowSource(rows, None, info)

    def convert(self, row: dict[str, Any], index: int) -> Draft:
        meta = dict(row.get("meta") or {})
        meta["edit"] = {
            "dead_end_description": row.get("distractor_description") or "",
            "trap_reasoning_path": row.get("trap_reasoning_path") or "",
            "trap_answer": row.get("trap_answer") or "",
            "edit_instruction": row.get("edit_instruction") or "",
        }
        for extra in ("seed_ids", "writer", "editor", "source_sample_id"):
            if extra in row:
                meta[extra] = row[extra]
        choices = [str(c) for c in row.get("choices") or []]
        answer_type = str(row.get("answer_type") or ("letter" if choices else "text"))
        return Draft(
            str(row.get("question") or ""),
            answer_text(row.get("answer")),
            answer_type,
            [row["original_image"]],
            choices=choices,
            precision=row.get("precision"),
            meta=meta,
            extra_images={"distracted_images": [row["edited_image"]]},
        )


ADAPTERS: dict[str, Adapter] = {
    a.name: a
    for a in (
        MMMU(),
        MathVista(),
        MathVision(),
        ChartQA(),
        HallusionBench(),
        InfoVQA(),
        MMStar(),
        TextVQA(),
        DistractBench(),
        VisArgs(),
        Demo(),
        Constructed(),
        ImageNet9(),
        MathVerse(),
        LogicVista(),
        Waterbirds(),
    )
}
