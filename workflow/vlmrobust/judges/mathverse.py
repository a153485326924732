"""The MathVerse two-stage judge (Idis-math is scored this way, with gpt-oss-120b).

MathVerse's own evaluation does not read answers with rules: an LLM first copies the
final answer out of the model's response (stage 1, *extract*, with a few worked
examples), then a second call says whether that answer agrees with the reference
answer of the question (stage 2, *judge*: 1 or 0), reading ``question_for_eval`` (the
question with its choices) to know what is asked. An extracted answer equal to the
reference (white space aside) is 1 without the second call. This module does the same
with prompts of its own (``resources/idis/mathverse-extract-prompt.txt`` and
``mathverse-judge-prompt.txt``) and strict JSON (:data:`EXTRACT_SCHEMA`,
:data:`JUDGE_SCHEMA`), every call through the content-addressed LLM cache (a rerun makes
no call).

One row per output (:func:`judge_rows`, :func:`judge_mathverse`)::

    {key, variant_id, sample_id, extracted, verdict (1 | 0 | None), judge, error,
     method, cached, prompt_version}

``method`` says how the verdict came: ``llm`` (stage 2), ``exact`` (extracted ==
answer, no stage 2), ``no-answer`` (stage 1 found no final answer: 0, as MathVerse's
judge scores it), ``empty`` (the model's answer text is empty: 0, no call), ``rules``
(the offline judge) or ``failed``. A failure — the output's own generation error, a
stage that failed at the API after the backend's retries, an answer breaking the
schema — is recorded in the row (``verdict`` None, ``error`` says which stage and
why), never counted as wrong; the summary counts them.

The response read is the output's ``answer_text`` (the part after the thinking
split), or, when that is empty, the last 2,000 characters of ``raw_text`` (as the
scoring stage does).

**The offline judge** (``backend: offline``; no LLM): rules, documented on
:func:`offline_extract` and :func:`offline_agrees`. It is stricter than an LLM (no
unit conversion, no algebra) and is there for the offline default run, CI and
:func:`agreement` checks. It is a rule set of its own, simpler than the scoring
stage's ``mathverse`` scorer, which also reads LaTeX values (here a reference answer
``2\\sqrt{3}`` does not agree with 3.46, nor ``\\frac{1}{2}`` with 0.5); so in an
offline run the judge-vs-scorer agreement shows where two rule sets differ, not what
an LLM judge would say.

:func:`agreement` compares two sets of verdicts (this judge against the rule-based
scorer's ``correct``, or two judges) by key: agreement rate and Cohen's kappa.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from ..core.io import read_jsonl, write_jsonl
from ..core.records import Sample, read_samples
from .base import close_llm, count_by_method, samples_by_id, warn_failed

__all__ = [
    "EXTRACT_SCHEMA",
    "JUDGE_SCHEMA",
    "PROMPT_VERSION",
    "MathVerseLLMJudge",
    "MathVerseOfflineJudge",
    "agreement",
    "extract_prompt",
    "judge_mathverse",
    "judge_prompt",
    "judge_rows",
    "make_mathverse_judge",
    "offline_agrees",
    "offline_extract",
]

log = logging.getLogger(__name__)

PROMPT_VERSION = "mathverse-v1"
PROMPT_DIR = Path(__file__).resolve().parents[3] / "resources" / "idis"
#: the config key of the judge's setting (errors name it)
SPEC_KEY = "judge.mathverse"
RAW_TAIL_CHARS = 2000

EXTRACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"extracted": {"type": ["string", "null"]}},
    "required": ["extracted"],
    "additionalProperties": False,
}
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"judgement": {"enum": [0, 1]}},
    "required": ["judgement"],
    "additionalProperties": False,
}


@cache
def _template(name: str) -> str:
    """A prompt file's text, read once per process (not once per output)."""
    return (PROMPT_DIR / name).read_text(encoding="utf-8")


def extract_prompt(response: str) -> str:
    """Stage 1's message: the worked examples and the response to read."""
    return _template("mathverse-extract-prompt.txt").replace("{response}", response.strip())


def judge_prompt(question: str, answer: str, extracted: str) -> str:
    """Stage 2's message: the question (with its choices), the reference answer and the
    extracted answer (filled in one pass, so braces in them are left alone)."""
    values = {"{question}": question.strip(), "{answer}": answer.strip(), "{extracted}": extracted}
    pattern = re.compile("|".join(re.escape(k) for k in values))
    return pattern.sub(lambda m: values[m.group()], _template("mathverse-judge-prompt.txt"))


# ------------------------------------------------------------------ what a row reads


def _get(row: Any, name: str) -> Any:
    return row.get(name) if isinstance(row, Mapping) else getattr(row, name, None)


def response_text(row: Any) -> str:
    """The text the judge reads: ``answer_text``, else the tail of ``raw_text``."""
    answer = str(_get(row, "answer_text") or "")
    if answer.strip():
        return answer
    return str(_get(row, "raw_text") or "")[-RAW_TAIL_CHARS:]


def question_for_eval(sample: Sample) -> str:
    """MathVerse's ``question_for_eval`` (the question with its choices) when the
    adapter kept it in ``meta``, else the sample's question."""
    q = sample.meta.get("question_for_eval")
    return str(q) if q else sample.question


def _base_row(row: Any, judge: str, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "key": str(_get(row, "key")),
        "variant_id": _get(row, "variant_id"),
        "sample_id": _get(row, "sample_id"),
        "extracted": None,
        "verdict": None,
        "judge": judge,
        "error": None,
        "method": None,
        "cached": None,
        "prompt_version": PROMPT_VERSION,
    }
    out.update(fields)
    return out


def _precheck(row: Any, judge: str) -> dict[str, Any] | None:
    """The row of an output no stage needs to read, else None."""
    error = _get(row, "error")
    if error:
        return _base_row(row, judge, method="failed", error=f"generation failed: {error}")
    if not response_text(row).strip():
        return _base_row(row, judge, verdict=0, method="empty")
    return None


# ------------------------------------------------------------------ the LLM judge


class MathVerseLLMJudge:
    """The two stages behind an LLM backend (:func:`vlmrobust.clients.llm.make_llm`)."""

    def __init__(self, llm: Any, *, temperature: float = 0.0, max_tokens: int = 4096) -> None:
        self.llm = llm
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.name = f"{getattr(llm, 'name', '?')}/{getattr(llm, 'model', '?')}"

    def _calls(self, messages: list[str], schema: dict[str, Any]) -> list[Any]:
        calls = [
            {
                "messages": m,
                "json_schema": schema,
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
            }
            for m in messages
        ]
        return self.llm.complete_many(calls) if calls else []

    def judge_many(
        self, rows: Sequence[Any], samples: Mapping[str, Sample]
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any] | None] = [_precheck(r, self.name) for r in rows]
        todo = [i for i, r in enumerate(out) if r is None]
        # stage 1: extract
        first = self._calls([extract_prompt(response_text(rows[i])) for i in todo], EXTRACT_SCHEMA)
        stage2: list[tuple[int, str]] = []
        for i, resp in zip(todo, first, strict=True):
            row = rows[i]
            if resp.error is not None:
                out[i] = _base_row(row, self.name, method="failed", error=f"extract: {resp.error}")
                continue
            parsed = resp.parsed_json
            if not isinstance(parsed, dict) or "extracted" not in parsed:
                out[i] = _base_row(
                    row,
                    self.name,
                    method="failed",
                    error=f"extract: answer rejected: {resp.text[:200]!r}",
                )
                continue
            extracted = parsed["extracted"]
            extracted = (
                None if extracted is None or not str(extracted).strip() else str(extracted).strip()
            )
            sample = samples[str(_get(row, "sample_id"))]
            cached = [bool(resp.cached)]
            if extracted is None or extracted.lower() == "null":
                out[i] = _base_row(row, self.name, verdict=0, method="no-answer", cached=cached)
            elif extracted == str(sample.answer).strip():
                out[i] = _base_row(
                    row, self.name, extracted=extracted, verdict=1, method="exact", cached=cached
                )
            else:
                out[i] = _base_row(row, self.name, extracted=extracted, cached=cached)
                stage2.append((i, extracted))
        # stage 2: judge against question_for_eval and the answer
        messages = []
        for i, extracted in stage2:
            sample = samples[str(_get(rows[i], "sample_id"))]
            messages.append(judge_prompt(question_for_eval(sample), str(sample.answer), extracted))
        second = self._calls(messages, JUDGE_SCHEMA)
        for (i, _), resp in zip(stage2, second, strict=True):
            row_out = out[i]
            assert row_out is not None
            row_out["cached"].append(bool(resp.cached))
            if resp.error is not None:
                row_out.update(method="failed", error=f"judge: {resp.error}")
                continue
            parsed = resp.parsed_json
            value = parsed.get("judgement") if isinstance(parsed, dict) else None
            if value not in (0, 1) or isinstance(value, bool):
                row_out.update(
                    method="failed", error=f"judge: answer rejected: {resp.text[:200]!r}"
                )
                continue
            row_out.update(verdict=int(value), method="llm")
        return [r for r in out if r is not None]


# ------------------------------------------------------------------ the offline judge

_BOXED = re.compile(r"\\boxed\s*\{")
_STATED = re.compile(
    r"(?:final\s+answer|answer|correct\s+(?:option|choice))\s*(?:is\s*:?|:|=)\s*",
    re.IGNORECASE,
)
_CHOICE_LINE = re.compile(r"^\s*\(?([A-H])\)?\s*[:.)]\s*(.*?)\s*$")
_LETTER_ALONE = re.compile(r"^\(?([A-H])\)?(?:[:.)]|\s|$)")
_LETTER_NAMED = re.compile(r"\b(?:option|choice)\s*\(?([A-H])\)?(?![A-Za-z])", re.IGNORECASE)
_NUM = re.compile(r"[-+]?\d+(?:,\d{3})*(?:\.\d+)?(?:\s*/\s*\d+(?:\.\d+)?)?")
_UNITS = re.compile(
    r"(?:\^?\s*°|degrees?|square\s+units?|sq\.?\s*units?|units?\^?2?|cm\^?[23]?|mm\^?[23]?|"
    r"km|m\^?[23]?|meters?|metres?|inches|inch|feet|ft|radians?|rad)\b",
    re.IGNORECASE,
)


def _boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (braces balanced), or None."""
    found = None
    for m in _BOXED.finditer(text):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        if depth == 0:
            found = text[m.end() : j - 1]
    return found


def _choices(question: str) -> dict[str, str]:
    """Letter -> option text of a ``Choices:`` block (``A:40°`` / ``A. 40°`` lines)."""
    headers = list(re.finditer(r"^\s*(?:choices|options)\s*:", question, re.I | re.M))
    if not headers:
        return {}
    out = {}
    for line in question[headers[-1].end() :].splitlines():
        m = _CHOICE_LINE.match(line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _clean(text: str) -> str:
    text = text.strip().strip("*").strip()
    text = re.sub(r"^\$+|\$+$", "", text).strip()
    text = re.sub(r"^\\\(|\\\)$|^\\\[|\\\]$", "", text).strip()
    text = re.sub(r"\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}", r"\1/\2", text)
    return text.rstrip(".").strip()


def offline_extract(response: str, sample: Sample) -> str | None:
    """The rule-based stage 1: the final answer of ``response``, or None.

    The segment read is the last ``\\boxed{...}``; else the rest of the line after the
    last "answer is" / "answer:" / "correct option is"; else the last non-empty line.
    For a multiple-choice sample (its answer a letter and its ``question_for_eval`` a
    ``Choices:`` block) the result is an option letter: a letter at the segment's start
    or after "option"/"choice", else the option whose text the segment is; None when
    neither. Otherwise the segment itself, without ``$``, ``**`` and a final period;
    when the answer is a number and the segment is not one ("... is 14 cm."), the
    segment's last number.
    """
    text = response.strip()
    if not text:
        return None
    segment = _boxed(text)
    if segment is None:
        stated = list(_STATED.finditer(text))
        if stated:
            segment = text[stated[-1].end() :].split("\n")[0]
        else:
            lines = [ln for ln in text.splitlines() if ln.strip()]
            segment = lines[-1] if lines else ""
    segment = _clean(segment)
    if not segment:
        return None
    choices = _choices(question_for_eval(sample))
    if choices and re.fullmatch(r"[A-H]", str(sample.answer).strip()):
        return _option_letter(segment, choices)
    if _number(segment) is None and _number(str(sample.answer)) is not None:
        numbers = _NUM.findall(segment)  # "... is 14 cm." -> "14"
        if numbers:
            return numbers[-1].strip()
    return segment


def _option_letter(segment: str, choices: Mapping[str, str]) -> str | None:
    """The one option a segment names: "option C" / "choice (C)"; else a letter at its
    start ("C", "(C) 60°", "C: 60°") when no other option letter stands alone in it
    ("A and D" names none); else the option whose text is the segment, or what follows
    its last "=" ("angle C = 27°" -> the option "27°")."""
    named = {m.group(1) for m in _LETTER_NAMED.finditer(segment)} & set(choices)
    if len(named) == 1:
        return named.pop()
    start = _LETTER_ALONE.match(segment)
    if start and start.group(1) in choices:
        alone = set(re.findall(r"(?<![A-Za-z])([A-H])(?![A-Za-z])", segment)) & set(choices)
        return start.group(1) if alone == {start.group(1)} else None
    for text in (segment, segment.split("=")[-1]):
        norm = _norm_text(text)
        hits = [letter for letter, option in choices.items() if norm and norm == _norm_text(option)]
        if len(hits) == 1:
            return hits[0]
    return None


def _norm_text(text: str) -> str:
    text = text.lower().replace("\\left", "").replace("\\right", "").replace("\\!", "")
    text = text.replace("$", "").replace("°", "").replace("^\\circ", "").replace("^{\\circ}", "")
    return re.sub(r"\s+", "", text).rstrip(".")


def _number(text: str) -> float | None:
    """A single number (``14``, ``-2.5``, ``3/4``, ``1,200``), units and ``x =`` aside."""
    text = text.split("=")[-1]
    text = _UNITS.sub("", text).replace("$", "").strip().rstrip(".").strip()
    if not _NUM.fullmatch(text):
        return None
    text = text.replace(",", "").replace(" ", "")
    if "/" in text:
        num, den = text.split("/")
        return float(num) / float(den) if float(den) != 0 else None
    return float(text)


def offline_agrees(extracted: str | None, answer: str) -> bool:
    """The rule-based stage 2. None never agrees. Letters: the same letter. Numbers
    (both sides one number, units aside): an integer answer needs the same value
    (within 1e-6); an answer with d decimals needs the extracted value rounded to d
    decimals to equal it (22.33 agrees with 22.3; 14.32 does not with 14). Otherwise
    the texts compared without case, spaces, ``$``, ``\\left``/``\\right`` or degree
    signs."""
    if extracted is None:
        return False
    gold = str(answer).strip()
    if re.fullmatch(r"[A-H]", gold):
        return extracted.strip().upper() == gold
    a, b = _number(extracted), _number(gold)
    if a is not None and b is not None:
        decimals = len(gold.split(".")[1]) if re.fullmatch(r"[-+]?\d+\.\d+", gold) else 0
        if decimals == 0:
            return abs(a - b) <= 1e-6
        return math.isclose(round(a, decimals), b, abs_tol=10 ** (-decimals) / 2 - 1e-12)
    return _norm_text(extracted) == _norm_text(gold)


class MathVerseOfflineJudge:
    """The rule-based two stages (:func:`offline_extract`, :func:`offline_agrees`)."""

    name = "offline/rules"

    def judge_many(
        self, rows: Sequence[Any], samples: Mapping[str, Sample]
    ) -> list[dict[str, Any]]:
        out = []
        for row in rows:
            pre = _precheck(row, self.name)
            if pre is not None:
                out.append(pre)
                continue
            sample = samples[str(_get(row, "sample_id"))]
            extracted = offline_extract(response_text(row), sample)
            verdict = int(offline_agrees(extracted, sample.answer))
            out.append(
                _base_row(row, self.name, extracted=extracted, verdict=verdict, method="rules")
            )
        return out


# ------------------------------------------------------------------ entry points


def make_mathverse_judge(spec: Mapping[str, Any] | None, cache: Any = None) -> Any:
    """A judge from a ``$defs/mathverse_judge`` spec: ``{backend: offline}`` (the
    default) or an LLM spec (``backend: openai | gemini``, ``model``, ``base_url``,
    ``api_key_env``, ``options``, ``temperature`` (0), ``max_tokens`` (4096),
    ``cache_dir`` (null = ``results/cache/llm``)). ``cache`` overrides the cache."""
    spec = dict(spec or {"backend": "offline"})
    if spec.get("backend", "offline") == "offline":
        extra = sorted(set(spec) - {"backend"})
        if extra:
            raise ValueError(
                f"{SPEC_KEY}.{extra[0]}: unknown key for backend offline (allowed: backend)"
            )
        return MathVerseOfflineJudge()
    from ..clients.llm import llm_from_spec

    return MathVerseLLMJudge(
        llm_from_spec(spec, SPEC_KEY, cache, others=("offline",)),
        temperature=float(spec.get("temperature") or 0.0),
        max_tokens=int(spec.get("max_tokens") or 4096),
    )


def judge_rows(
    rows: Sequence[Any], samples: Mapping[str, Sample] | Iterable[Sample], judge: Any
) -> list[dict[str, Any]]:
    """Judge every output row (an :class:`~vlmrobust.core.records.OutputRow` or its
    dict) against its sample; one result per row, in order. ``judge`` is a judge of
    :func:`make_mathverse_judge`, or an LLM backend (wrapped in
    :class:`MathVerseLLMJudge`). A row whose sample is unknown is an error naming it."""
    samples = samples_by_id(rows, samples)
    if not hasattr(judge, "judge_many") and hasattr(judge, "complete_many"):
        judge = MathVerseLLMJudge(judge)
    return judge.judge_many(list(rows), samples)


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts of judged rows: ``rows``, ``judged`` (a verdict), ``correct``,
    ``failed`` (no verdict), ``accuracy`` (correct / judged; None without any), and
    ``by_method``."""
    judged = [r for r in rows if r.get("verdict") is not None]
    correct = sum(int(r["verdict"]) for r in judged)
    return {
        "rows": len(rows),
        "judged": len(judged),
        "correct": correct,
        "failed": len(rows) - len(judged),
        "accuracy": correct / len(judged) if judged else None,
        "by_method": count_by_method(rows),
    }


def judge_mathverse(
    outputs_path: str | Path,
    samples_path: str | Path,
    spec: Mapping[str, Any] | None,
    out: str | Path,
) -> dict[str, Any]:
    """The CLI entry: judge the outputs JSONL (rows of
    :class:`~vlmrobust.core.records.OutputRow`) against the samples JSONL with the judge
    ``spec`` (``$defs/mathverse_judge``), write one row per output to ``out`` (JSONL)
    and return :func:`summarize` of them (plus ``judge``)."""
    outputs = read_jsonl(outputs_path)
    samples = {s.sample_id: s for s in read_samples(samples_path)}
    try:
        judge = make_mathverse_judge(spec)
        try:
            rows = judge_rows(outputs, samples, judge)
        finally:
            close_llm(judge)
    except ValueError as exc:
        raise ValueError(f"{outputs_path}: {exc}") from None
    write_jsonl(out, rows)
    summary = summarize(rows)
    warn_failed(log, summary, outputs_path, out, "verdict")
    return {**summary, "judge": getattr(judge, "name", "?")}


# ------------------------------------------------------------------ agreement


def _verdict(row: Mapping[str, Any]) -> int | None:
    """A row's 0/1: ``verdict`` (a judge's row) or ``correct`` (a scored row, None when
    its generation failed: ``error`` set)."""
    if "verdict" in row:
        v = row["verdict"]
    elif "correct" in row:
        v = None if row.get("error") else row["correct"]
    else:
        raise ValueError(f"row {row.get('key')!r} has neither 'verdict' nor 'correct'")
    if v is None or v == "":
        return None
    if isinstance(v, str):
        v = {"true": 1, "false": 0, "1": 1, "0": 0}.get(v.strip().lower(), v)
    if v not in (0, 1, True, False):
        raise ValueError(f"row {row.get('key')!r}: {v!r} is not a 0/1 verdict")
    return int(v)


def agreement(
    a_rows: Iterable[Mapping[str, Any]], b_rows: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """Agreement of two sets of 0/1 verdicts, paired by ``key``.

    ``n`` = keys with a verdict on both sides (a key missing on one side, or without a
    verdict there, is left out and counted in ``dropped``); ``agree`` = pairs with the
    same verdict; ``rate`` = agree / n; ``cohen_kappa`` = (p_o - p_e) / (1 - p_e) with
    p_o = rate and p_e = p_a(1) p_b(1) + p_a(0) p_b(0) from each side's own rates
    (NaN when p_e = 1: both sides give one and the same verdict everywhere, or n = 0).
    """
    a = {str(r["key"]): _verdict(r) for r in a_rows}
    b = {str(r["key"]): _verdict(r) for r in b_rows}
    keys = sorted(set(a) | set(b))
    pairs = [(a[k], b[k]) for k in keys if a.get(k) is not None and b.get(k) is not None]
    n = len(pairs)
    dropped = len(keys) - n
    if n == 0:
        return {"n": 0, "agree": 0, "rate": math.nan, "cohen_kappa": math.nan, "dropped": dropped}
    agree = sum(1 for x, y in pairs if x == y)
    p_o = agree / n
    pa1 = sum(x for x, _ in pairs) / n
    pb1 = sum(y for _, y in pairs) / n
    p_e = pa1 * pb1 + (1 - pa1) * (1 - pb1)
    kappa = math.nan if math.isclose(p_e, 1.0) else (p_o - p_e) / (1 - p_e)
    return {"n": n, "agree": agree, "rate": p_o, "cohen_kappa": kappa, "dropped": dropped}
