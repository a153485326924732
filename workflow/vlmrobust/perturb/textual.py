"""Idis-math textual distractors: k answer-irrelevant sentences inserted into the question.

The perturbation ``textual`` turns a sample into one variant per k in ``counts``
(default 1..4), ``<sample_id>__textual-n<k>``, whose question is the sample's question
with k new sentences inserted between the setup and the final question; the images
are the sample's own (no image is written).

Condition keys (filled in by :func:`prepare`):

``counts`` ([1, 2, 3, 4])
    The numbers of sentences to insert, one variant each (integers 1..8).
``writer`` ({backend: offline})
    Who writes the sentences: ``offline`` (below) or an LLM spec like the VisArgs
    question writer's (``backend: openai | gemini``, ``model``, ``base_url``,
    ``api_key_env``, ``options``, ``temperature`` (0.7), ``max_tokens`` (4096),
    ``cache_dir`` (null = ``results/cache/llm``)). The key is read from the environment
    variable ``api_key_env`` names, never from the config.
``max_attempts`` (3)
    Tries per variant; a variant whose every try fails the checks is excluded.
``prompt_file`` (``resources/idis/textual-distractor-prompt.txt``)
    The LLM's prompt: the Idis paper's Table 5 text with the placeholders
    ``{num_distractors}``, ``{question}``, ``{answer}``, ``{subject}``, ``{subfield}``.
    A relative path is read from the working directory, else from the repository.

**The LLM writer.** The filled-in prompt is sent as one user message. Its answer (a
code fence around it is dropped, nothing else is cleaned) must pass
:func:`check_augmented`:

(a) every sentence of the original question (:func:`split_sentences`: at line breaks
    and at ``.``/``!``/``?`` followed by white space) appears word for word, white
    space aside, and in the original order, as a sentence of the answer;
(b) the choices block (from the last line that starts with ``Choices:`` or
    ``Options:`` to the end) is unchanged line by line and still the end of the
    question (no block when the original had none);
(c) exactly k sentences were added (the answer's sentences minus the original ones),
    each of at least three words.

A failed check is tried again, up to ``max_attempts`` times; the attempt index is sent
as the request's ``seed`` and so is part of the LLM cache key (a retry is a new call,
and a rerun replays the cached tries in order, making no call). Each try is recorded
in the variant's ``params["attempt_log"]`` (attempt, cache key, cached, the failed
check or None). After the last failed try the variant is
:class:`~vlmrobust.perturb.variants.Excluded` with reason ``textual-check-failed`` and
the last failed check as detail; a call that fails at the API (after the backend's own
retries) excludes it with reason ``textual-writer-error`` (not cached: the next run
asks again). Both are counted in the stage's ``report.json``. With the
:func:`~vlmrobust.perturb.variants.build_variants` stage the calls of every sample are
made together (``setup``, ``options.concurrency`` in flight), a round per attempt.

The checks cannot tell whether an LLM's sentence leaves the answer unchanged (the
prompt asks for that); they make sure nothing of the original was lost or reworded.

**The offline writer** (no LLM; the default run and tests): seeded sentences about
new, unconnected objects next to the question's own named points, segments and units
("Note that point P lies outside the figure and is not connected to AB.", "A circle of
radius 7 cm is drawn elsewhere on the page."). They never restate or change a given
(every number is drawn outside the question's numbers, every new point gets a letter
the question does not use), so they are answer-irrelevant by construction; they are
inserted right before the final question sentence (the last one with a ``?``, a ``()``
blank or an asking verb first: "Find ...", "What ..."; without one, before the last
sentence), so after the setup, and pass the same checks.
Every choice comes from ``rng_for(seed, condition, variant_id)`` (a retry: with the
attempt index appended).

Recorded params: ``kind`` "textual", ``semantics`` "textual", ``n`` = k, ``inserted``
(the new sentences, in order), ``attempts`` (tries made), ``attempt_log``, ``writer``
(``offline`` or ``<backend>/<model>``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.records import Sample
from ..core.seeding import derive_seed, rng_for
from .variants import Excluded, Perturbation, VariantPlan, _key, register

__all__ = [
    "DEFAULT_PROMPT_FILE",
    "MAX_COUNT",
    "PLACEHOLDERS",
    "QuestionParts",
    "check_augmented",
    "fill_prompt",
    "offline_sentences",
    "split_question",
    "split_sentences",
    "textual_variant_id",
]

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_PROMPT_FILE = "resources/idis/textual-distractor-prompt.txt"
#: the most sentences one variant may insert (the offline writer has this many patterns)
MAX_COUNT = 8
PLACEHOLDERS = ("{num_distractors}", "{question}", "{answer}", "{subject}", "{subfield}")


def textual_variant_id(sample_id: str, k: int) -> str:
    """``<sample_id>__textual-n<k>``."""
    return f"{sample_id}__textual-n{k}"


# ---------------------------------------------------------------- the question's parts

_CHOICES_HEADER = re.compile(r"^[ \t]*(?:choices|options)[ \t]*:", re.IGNORECASE | re.MULTILINE)
# a sentence ends at . ! ? (closing quotes / brackets kept with it) before white space
_SENTENCE_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*(?=\s|$)")
_LINE = re.compile(r"[^\n]+")
_WORD = re.compile(r"\w+")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n?```$", re.DOTALL)


@dataclass(frozen=True)
class QuestionParts:
    """A question cut into its text (``stem``) and its choices block.

    ``tail`` is everything from the end of the stem's text (the white space before the
    block included) to the end; ``choices`` the block's non-empty lines, white space
    normalized (None when the question has no block).
    """

    stem: str
    tail: str
    choices: tuple[str, ...] | None


def _norm(text: str) -> str:
    return " ".join(text.split())


def split_question(text: str) -> QuestionParts:
    """The stem and the choices block (from the last line starting ``Choices:`` or
    ``Options:``, case-insensitive, to the end) of a question."""
    headers = list(_CHOICES_HEADER.finditer(text))
    if not headers:
        stem = text.rstrip()
        return QuestionParts(stem, text[len(stem) :], None)
    start = headers[-1].start()
    stem = text[:start].rstrip()
    block = text[start:]
    lines = tuple(_norm(line) for line in block.splitlines() if line.strip())
    return QuestionParts(stem, text[len(stem) :], lines)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every sentence of ``text``: cut at line breaks and after
    ``.``/``!``/``?`` followed by white space (``80.0,`` or ``3.5`` are not cut)."""
    spans: list[tuple[int, int]] = []
    for line in _LINE.finditer(text):
        base, body = line.start(), line.group()
        cuts = [m.end() for m in _SENTENCE_END.finditer(body)]
        start = 0
        for end in [*cuts, len(body)]:
            piece = body[start:end]
            if piece.strip():
                lead = len(piece) - len(piece.lstrip())
                trail = len(piece.rstrip())
                spans.append((base + start + lead, base + start + trail))
            start = end
    return spans


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (:func:`sentence_spans`), white space normalized."""
    return [_norm(text[a:b]) for a, b in sentence_spans(text)]


def check_augmented(original: str, augmented: str, k: int) -> tuple[str | None, list[str]]:
    """Check an augmented question against its original (module docstring, (a)-(c)).

    Returns ``(problem, inserted)``: ``problem`` is None when every check passes, else
    the first failed check in words; ``inserted`` the added sentences (in order).
    """
    orig, aug = split_question(original), split_question(augmented)
    if orig.choices is not None:
        if aug.choices is None:
            return "the choices block is missing", []
        if aug.choices != orig.choices:
            return (
                "the choices block changed or is not at the end "
                f"(expected {list(orig.choices)!r}, got {list(aug.choices)!r})"
            ), []
    elif aug.choices is not None:
        return "a choices block was added to a question without one", []
    original_sents = split_sentences(orig.stem)
    output_sents = split_sentences(aug.stem)
    inserted: list[str] = []
    j = 0
    for sentence in output_sents:
        if j < len(original_sents) and sentence == original_sents[j]:
            j += 1
        else:
            inserted.append(sentence)
    if j < len(original_sents):
        missing = original_sents[j]
        where = "is out of order" if missing in output_sents else "was changed or removed"
        return f"original sentence {j + 1} {where}: {missing!r}", inserted
    if len(inserted) != k:
        return f"{len(inserted)} sentence(s) were added, expected {k}: {inserted!r}", inserted
    short = [s for s in inserted if len(_WORD.findall(s)) < 3]
    if short:
        return f"an added sentence has fewer than three words: {short[0]!r}", inserted
    return None, inserted


_ASKS = re.compile(
    r"^(?:find|calculate|compute|determine|what|which|how|solve|evaluate|express|write|"
    r"state|is|are|does|do|can|name)\b",
    re.IGNORECASE,
)


def _asks(sentence: str) -> bool:
    """Whether a sentence poses the question (``?``, a ``()`` blank, or an asking verb
    first); "Give your answer to ..." or "Round ..." are instructions, not the question."""
    return "?" in sentence or "()" in sentence.replace(" ", "") or bool(_ASKS.match(sentence))


def _insert_before_question(stem: str, sentences: Sequence[str]) -> str:
    """``sentences`` put right before the final question sentence of ``stem`` (the last
    sentence that asks, :func:`_asks`; without one, the last sentence)."""
    text = " ".join(sentences)
    spans = sentence_spans(stem)
    if not spans:
        return text
    asking = [a for a, b in spans if _asks(stem[a:b])]
    at = asking[-1] if asking else spans[-1][0]
    return f"{stem[:at]}{text} {stem[at:]}"


def _join(stem: str, parts: QuestionParts) -> str:
    if parts.choices is not None and not parts.tail[:1].isspace():
        return f"{stem}\n{parts.tail}"  # the original had no text before its block
    return stem + parts.tail


# ---------------------------------------------------------------- the offline writer

_NEW_LETTERS = "PQRSTUVWXYZKMNGHJL"
_POINT_WORDS = re.compile(
    r"\b(?:points?|vertex|vertices|angle|circle|centre|center|line|side)\s+([A-Z])\b"
)
_SEGMENT = re.compile(r"\b([A-Z]{2})\b")
_POLYGON = re.compile(r"\b([A-Z]{3,4})\b")
_CAPITAL = re.compile(r"\b([A-Z])\b")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_UNIT = re.compile(
    r"\d+(?:\.\d+)?\s*(mm|cm|km|m|units?|inches|inch|in|feet|ft|meters|metres)\b", re.IGNORECASE
)
_NOT_POINTS = {"AM", "PM", "OK", "ID", "TV", "II", "IV", "VI"}


@dataclass
class _Facts:
    points: list[str]
    segments: list[str]
    numbers: set[float]
    unit: str
    used_letters: set[str]


def _facts(question: str) -> _Facts:
    parts = split_question(question)
    stem = parts.stem
    segments = [s for s in dict.fromkeys(_SEGMENT.findall(stem)) if s not in _NOT_POINTS]
    points: list[str] = list(dict.fromkeys(_POINT_WORDS.findall(stem)))
    for name in [*segments, *_POLYGON.findall(stem)]:
        if name in _NOT_POINTS:
            continue
        points += [c for c in name if c not in points]
    used = set(_CAPITAL.findall(question)) | {c for n in _SEGMENT.findall(question) for c in n}
    used |= {c for n in _POLYGON.findall(question) for c in n} | set(points) | set("ABCDE")
    numbers = {float(x) for x in _NUMBER.findall(question)}
    units = [u.lower() for u in _UNIT.findall(stem)]
    unit = units[0] if units else "cm"
    if unit in ("unit", "units"):
        unit = "units"
    return _Facts(points, segments, numbers, unit, used)


class _Names:
    """Fresh point names (letters the question does not use), handed out in a seeded order."""

    def __init__(self, facts: _Facts, rng: np.random.Generator) -> None:
        free = [c for c in _NEW_LETTERS if c not in facts.used_letters]
        order = rng.permutation(len(free)) if free else []
        self.free = [free[i] for i in order]
        self.extra = 0

    def take(self) -> str:
        if self.free:
            return self.free.pop(0)
        self.extra += 1
        return f"P{self.extra}"


def _value(rng: np.random.Generator, facts: _Facts, low: int, high: int, step: int = 1) -> int:
    """An integer in [low, high] (multiples of ``step``) that is none of the question's
    numbers (when the range allows)."""
    options = [v for v in range(low, high + 1, step) if float(v) not in facts.numbers]
    if not options:
        options = list(range(low, high + 1, step))
    return int(options[int(rng.integers(len(options)))])


def _t_point_apart(rng, facts, names):
    p = names.take()
    if facts.segments:
        seg = facts.segments[int(rng.integers(len(facts.segments)))]
        return f"Note that point {p} lies outside the figure and is not connected to {seg}."
    return f"Note that point {p} lies outside the figure and is not connected to any of its lines."


def _t_circle(rng, facts, names):
    r = _value(rng, facts, 2, 19)
    return f"A circle of radius {r} {facts.unit} is drawn elsewhere on the page."


def _t_segment(rng, facts, names):
    a, b = names.take(), names.take()
    n = _value(rng, facts, 3, 29)
    return (
        f"A separate segment {a}{b} of length {n} {facts.unit} is sketched in the margin "
        "and is not part of the figure."
    )


def _t_angle(rng, facts, names):
    p = names.take()
    d = _value(rng, facts, 15, 165, 5)
    return f"An unrelated angle of {d} degrees is marked at a point {p} far away from the figure."


def _t_far_point(rng, facts, names):
    p = names.take()
    if facts.points:
        q = facts.points[int(rng.integers(len(facts.points)))]
        return (
            f"Point {p} is marked some distance away from point {q}, but it is joined to nothing."
        )
    return f"Point {p} is marked near the edge of the page, but it is joined to nothing."


def _t_rectangle(rng, facts, names):
    w = _value(rng, facts, 2, 15)
    h = _value(rng, facts, 2, 15)
    return (
        f"A rectangle measuring {w} {facts.unit} by {h} {facts.unit} is drawn next to the "
        "figure and shares no point with it."
    )


def _t_other_triangle(rng, facts, names):
    a, b, c = names.take(), names.take(), names.take()
    n = _value(rng, facts, 10, 40)
    return (
        f"On a separate page, a student sketched a triangle {a}{b}{c} with a perimeter "
        f"of {n} {facts.unit}."
    )


def _t_label(rng, facts, names):
    p = names.take()
    n = _value(rng, facts, 2, 12)
    return f"A small label reading {p}{n} is printed in the corner of the page."


_TEMPLATES = (
    _t_point_apart,
    _t_circle,
    _t_segment,
    _t_angle,
    _t_far_point,
    _t_rectangle,
    _t_other_triangle,
    _t_label,
)
assert len(_TEMPLATES) == MAX_COUNT


def offline_sentences(question: str, k: int, rng: np.random.Generator) -> list[str]:
    """k distinct seeded distractor sentences about new objects beside the question's
    own named points, segments and unit (see the module docstring)."""
    if not 1 <= k <= MAX_COUNT:
        raise ValueError(f"the offline writer writes 1..{MAX_COUNT} sentences, not {k}")
    facts = _facts(question)
    names = _Names(facts, rng)
    chosen = sorted(int(i) for i in rng.choice(len(_TEMPLATES), size=k, replace=False))
    order = rng.permutation(k)
    return [_TEMPLATES[chosen[int(i)]](rng, facts, names) for i in order]


def offline_augment(question: str, k: int, rng: np.random.Generator) -> str:
    """``question`` with k :func:`offline_sentences` inserted before its final question."""
    parts = split_question(question)
    sentences = offline_sentences(question, k, rng)
    return _join(_insert_before_question(parts.stem, sentences), parts)


# ---------------------------------------------------------------- the LLM writer


def fill_prompt(template: str, sample: Sample, k: int) -> str:
    """The Table 5 prompt of ``sample`` and k (the placeholders of :data:`PLACEHOLDERS`)."""
    values = {
        "{num_distractors}": str(k),
        "{question}": sample.question,
        "{answer}": str(sample.answer),
        "{subject}": str(sample.meta.get("subject") or "unknown"),
        "{subfield}": str(sample.meta.get("subfield") or "unknown"),
    }
    # one pass, so a question that contains "{answer}" is not filled in again
    pattern = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS))
    return pattern.sub(lambda m: values[m.group()], template)


def _clean_answer(text: str) -> str:
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    return fenced.group(1).strip() if fenced else stripped


def writer_name(writer: dict[str, Any]) -> str:
    """``offline`` or ``<backend>/<model>``."""
    if writer.get("backend", "offline") == "offline":
        return "offline"
    return f"{writer['backend']}/{writer['model']}"


def _read_prompt(condition: str, prompt_file: str) -> str:
    path = Path(prompt_file)
    if not path.is_absolute() and not path.is_file():
        path = REPO_ROOT / prompt_file
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(
            f"{_key(condition, 'prompt_file')}: cannot read {prompt_file!r}: {exc}"
        ) from None
    missing = [p for p in PLACEHOLDERS if p not in text]
    if missing:
        raise ValueError(
            f"{_key(condition, 'prompt_file')}: {prompt_file} lacks the placeholder(s) "
            f"{', '.join(missing)}"
        )
    return text


# ---------------------------------------------------------------- prepare / plan


def _prepare(condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the schema validated it (counts, writer, attempts,
    their defaults); checked here is what the schema cannot say: an LLM writer's prompt
    file is readable and has every placeholder."""
    out = dict(spec)
    out["counts"] = [int(c) for c in out["counts"]]
    out["max_attempts"] = int(out["max_attempts"])
    if out["writer"]["backend"] != "offline":
        _read_prompt(condition, str(out["prompt_file"]))  # fail now, naming the key
    return out


def _params(k: int, inserted: list[str], log_: list[dict[str, Any]], writer: str) -> dict[str, Any]:
    return {
        "kind": "textual",
        "semantics": "textual",
        "n": k,
        "inserted": inserted,
        "attempts": len(log_),
        "attempt_log": log_,
        "writer": writer,
    }


def _plan_offline(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int, k: int
) -> VariantPlan | Excluded:
    vid = textual_variant_id(sample.sample_id, k)
    attempt_log: list[dict[str, Any]] = []
    problem = None
    for attempt in range(spec["max_attempts"]):
        parts = (seed, condition, vid) if attempt == 0 else (seed, condition, vid, attempt)
        augmented = offline_augment(sample.question, k, rng_for(*parts))
        problem, inserted = check_augmented(sample.question, augmented, k)
        attempt_log.append({"attempt": attempt, "check": problem})
        if problem is None:
            params = _params(k, inserted, attempt_log, "offline")
            return VariantPlan(vid, params, derive_seed(seed, condition, vid), question=augmented)
    return Excluded(vid, "textual-check-failed", str(problem))


@dataclass
class _Job:
    sample: Sample
    k: int
    vid: str
    log: list[dict[str, Any]]
    problem: str | None = None


def _run_llm(samples: Sequence[Sample], spec: dict[str, Any], condition: str) -> dict[str, Any]:
    """The outcome of every (sample, k) with the LLM writer: variant id -> a dict
    ``{"question", "inserted", "attempt_log"}`` or ``{"excluded": reason, "detail"}``.
    One round of concurrent calls per attempt."""
    from ..clients.llm import llm_from_spec

    writer = spec["writer"]
    template = _read_prompt(condition, str(spec["prompt_file"]))
    llm = llm_from_spec(writer, _key(condition, "writer"))
    jobs = [
        _Job(s, k, textual_variant_id(s.sample_id, k), []) for s in samples for k in spec["counts"]
    ]
    outcomes: dict[str, Any] = {}
    try:
        for attempt in range(spec["max_attempts"]):
            if not jobs:
                break
            calls = [
                {
                    "messages": [{"role": "user", "content": fill_prompt(template, j.sample, j.k)}],
                    "temperature": float(writer["temperature"]),
                    "max_tokens": int(writer["max_tokens"]),
                    "seed": attempt,
                }
                for j in jobs
            ]
            responses = llm.complete_many(calls)
            retry: list[_Job] = []
            for job, resp in zip(jobs, responses, strict=True):
                entry = {"attempt": attempt, "cache_key": resp.key, "cached": bool(resp.cached)}
                if resp.error is not None:
                    job.log.append({**entry, "check": None, "error": resp.error})
                    log.warning(
                        "%s: textual writer failed for %s: %s", condition, job.vid, resp.error
                    )
                    outcomes[job.vid] = {"excluded": "textual-writer-error", "detail": resp.error}
                    continue
                augmented = _clean_answer(resp.text)
                problem, inserted = check_augmented(job.sample.question, augmented, job.k)
                job.log.append({**entry, "check": problem, "error": None})
                if problem is None:
                    outcomes[job.vid] = {
                        "question": augmented,
                        "inserted": inserted,
                        "attempt_log": job.log,
                    }
                else:
                    job.problem = problem
                    retry.append(job)
            jobs = retry
    finally:
        llm.close()
    for job in jobs:
        outcomes[job.vid] = {"excluded": "textual-check-failed", "detail": str(job.problem)}
    return outcomes


def _setup(samples: list[Sample], condition: str, spec: dict[str, Any]) -> dict[str, Any]:
    """With an LLM writer: every (sample, k) of the dataset asked together."""
    if spec["writer"]["backend"] == "offline":
        return spec
    return {**spec, "_outcomes": _run_llm(samples, spec, condition)}


def _plan(
    sample: Sample, condition: str, spec: dict[str, Any], seed: int
) -> list[VariantPlan | Excluded]:
    writer = spec["writer"]
    if writer["backend"] == "offline":
        return [_plan_offline(sample, condition, spec, seed, k) for k in spec["counts"]]
    outcomes = spec.get("_outcomes") or {}
    if any(textual_variant_id(sample.sample_id, k) not in outcomes for k in spec["counts"]):
        outcomes = _run_llm([sample], spec, condition)  # plan called without setup
    name = writer_name(writer)
    out: list[VariantPlan | Excluded] = []
    for k in spec["counts"]:
        vid = textual_variant_id(sample.sample_id, k)
        got = outcomes[vid]
        if "excluded" in got:
            out.append(Excluded(vid, got["excluded"], got["detail"]))
            continue
        params = _params(k, list(got["inserted"]), list(got["attempt_log"]), name)
        out.append(VariantPlan(vid, params, None, question=got["question"]))
    return out


register(Perturbation("textual", _prepare, _plan, None, setup=_setup))
