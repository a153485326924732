"""Scoring mode ``harness``: each benchmark's verdict as the papers' harness gave it.

The corruption study's papers scored their outputs with lmms-eval (commit 13fd645a; the
pinned ``lmms-eval==0.7.2`` holds the same task code, :mod:`vlmrobust.core.harness`).
This module calls that code on each output row instead of reimplementing it
(docs/scoring.md says what each benchmark does):

1. The response. lmms-eval's evaluator strips reasoning blocks before scoring
   (``strip_reasoning_tags`` with its command line's default ``--reasoning_tags``,
   ``<think>``/``</think>`` and ``<analysis>``/``</analysis>``, read from the installed
   source; a closing tag alone keeps what follows the last one). The raw output is
   read, so the project's own thinking split plays no part.
2. The verdict. The task's own ``process_results`` on a document rebuilt from the
   sample (the hub fields it reads are kept in ``meta``), then the part of its
   aggregation that decides one row: MMMU ``mmmu_process_results`` +
   ``evaluate_mmmu``; MMStar ``mmstar_process_results`` (``extract_mcq_answer``);
   MathVision ``mathvision_process_results`` (MATH-V's official ``is_equal``); ChartQA
   ``chartqa_process_results`` (relaxed accuracy on the raw response); TextVQA
   ``textvqa_process_results`` (VQA accuracy after the EvalAI processor); InfoVQA the
   ``anls`` metric of ``lmms_eval.api.metrics`` (the task has no ``process_results``,
   so lmms-eval applies the metric to the stripped response and the ``answers`` list);
   MathVista ``mathvista_process_results`` (its evaluator's ``extract_answer``,
   ``normalize_extracted_answer`` and ``safe_equal``); HallusionBench the official
   GPT-4 judge of ``evaluate_by_chatgpt`` + ``assign_correctness``.
3. LLM calls. MathVista's answer extraction and HallusionBench's judge ask GPT-4 in the
   harness. They go to ``scoring.harness_judge`` through the cached LLM client (the
   harness's own prompt, temperature and token limit; the transport is replaced, the
   code is not). Without a judge (offline) MathVista's extraction is the project's own
   rule extraction, and HallusionBench's verdict is lmms-eval's rule-based variant
   (``hb_aggregation_result_*_intern``: "yes" anywhere in the response means yes); the
   row's ``method`` says ``offline-rule`` and the notes count them. A failed judge call
   is a scoring failure of that row (``method none`` with the reason), never the
   harness's own fallback ("unclear", which counts a failed call as an answer).
4. Random guesses. MMMU's parser picks a random option when it finds none
   (``random.choice``). Here the choice is seeded per row (run seed and row key) and
   counted (``method random``): the same output always gets the same guess.
5. Known harness bugs are reproduced and counted. ``mmmu-open-string``: since 0.3.5
   ``mmmu_process_results`` keeps the first parsed candidate of an open question as a
   string and ``eval_open`` then compares it character by character, so every open
   question is wrong. The row keeps that verdict (``correct``) and records the bug and
   the verdict without it (``corrected``: ``eval_open`` on every parsed candidate, as
   MMMU's own code does).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import importlib
import json
import random
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..core.harness import HARNESS_SCORED, task_module, tasks_dir, version_note
from ..core.records import Sample

__all__ = [
    "HARNESS_BENCHMARKS",
    "HarnessJudgeError",
    "HarnessVerdict",
    "Judge",
    "harness_text",
    "harness_verdict",
    "reasoning_tags",
]

#: benchmark (scorer name) -> the lmms-eval code that scores it
HARNESS_BENCHMARKS = HARNESS_SCORED

#: the bug names this module reproduces (module docstring, 5)
MMMU_OPEN_BUG = "mmmu-open-string"

#: a judge: (prompt, max_tokens) -> the reply text; raises HarnessJudgeError on failure
Judge = Callable[[str, int], str]


class HarnessJudgeError(RuntimeError):
    """A call to the harness judge failed (the row is a scoring failure)."""


@dataclass(frozen=True)
class HarnessVerdict:
    """The harness's verdict on one response."""

    prediction: str | None
    correct: bool
    score: float
    method: str  # rule | llm | offline-rule | random | none
    rule: str
    reason: str | None = None
    bug: str | None = None
    corrected: bool | None = None


# --------------------------------------------------------------------------- the response


def _main_source() -> str:
    return (tasks_dir().parent / "__main__.py").read_text(encoding="utf-8")


@cache
def reasoning_tags() -> list[list[str]]:
    """The default of lmms-eval's ``--reasoning_tags`` option, read from its source."""
    tree = ast.parse(_main_source())
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        first = node.args[0]
        if isinstance(first, ast.Constant) and first.value == "--reasoning_tags":
            for kw in node.keywords:
                if kw.arg == "default":
                    value = json.loads(ast.literal_eval(kw.value))
                    if isinstance(value, list) and all(len(p) == 2 for p in value):
                        return [[str(a), str(b)] for a, b in value]
    raise RuntimeError("lmms-eval's __main__.py has no --reasoning_tags default")


def harness_text(raw_text: str | None) -> str:
    """The response lmms-eval scores: reasoning blocks stripped (module docstring, 1)."""
    from lmms_eval.api.reasoning import strip_reasoning_tags

    return strip_reasoning_tags(raw_text or "", reasoning_tags())


# --------------------------------------------------------------------------- helpers


def _meta(sample: Sample, key: str) -> Any:
    meta = sample.meta or {}
    if key not in meta:
        raise KeyError(f"meta has no {key!r} (rebuild the samples with this version)")
    return meta[key]


class _Guesses:
    """A stand-in for the ``random`` module in a harness function: seeded, counted."""

    def __init__(self, seed: str):
        self._rng = random.Random(seed)
        self.count = 0

    def choice(self, seq: Any) -> Any:
        self.count += 1
        return self._rng.choice(seq)


@contextlib.contextmanager
def _seeded_random(module_name: str, seed: str) -> Iterator[_Guesses]:
    module = importlib.import_module(module_name)
    guesses = _Guesses(seed)
    before = module.random
    module.random = guesses
    try:
        yield guesses
    finally:
        module.random = before


def _rule(benchmark: str) -> str:
    return f"{version_note()} {HARNESS_BENCHMARKS[benchmark]}"


# --------------------------------------------------------------------------- benchmarks


def _mmmu_id(sample: Sample) -> str:
    """The hub id (``validation_<subject>_<n>``), whose subject the harness reads; a
    sample whose id lacks it (demo data) gets a placeholder subject."""
    sid = str((sample.meta or {}).get("source_id") or sample.sample_id)
    parts = sid.split("_")
    return sid if len(parts) >= 3 and parts[-1].isdigit() else f"validation_Unknown_{sid}_0"


def _mmmu(sample: Sample, text: str, seed: str, judge: Judge | None) -> HarnessVerdict:
    mod = task_module("mmmu/utils.py")
    qtype = str(_meta(sample, "question_type"))
    doc = {
        "id": _mmmu_id(sample),
        "question_type": qtype,
        "options": _meta(sample, "options") if qtype == "multiple-choice" else "[]",
        "answer": sample.answer,
    }
    with _seeded_random("lmms_eval.tasks._task_utils.mmmu_mcq_utils", seed) as guesses:
        result = mod.mmmu_process_results(doc, [text])["mmmu_acc"]
    _, metric = mod.evaluate_mmmu([result])
    correct = metric["acc"] == 1
    prediction = str(result["parsed_pred"][0])
    rule = _rule("mmmu")
    if guesses.count:
        reason = f"no option parsed: the harness's random option {prediction} (seeded)"
        return HarnessVerdict(prediction, correct, float(correct), "random", rule, reason)
    if qtype == "multiple-choice":
        return HarnessVerdict(prediction, correct, float(correct), "rule", rule)
    fixed = bool(mod.eval_open(sample.answer, mod.parse_open_response(text)))
    reason = None
    if fixed != correct:
        reason = f"{MMMU_OPEN_BUG}: the harness compares the first candidate by characters"
    return HarnessVerdict(
        prediction, correct, float(correct), "rule", rule, reason, MMMU_OPEN_BUG, fixed
    )


def _mmstar(sample: Sample, text: str, seed: str, judge: Judge | None) -> HarnessVerdict:
    mod = task_module("mmstar/utils.py")
    doc = {
        "answer": sample.answer,
        "category": (sample.meta or {}).get("category", ""),
        "l2_category": (sample.meta or {}).get("l2_category", ""),
        "index": (sample.meta or {}).get("index", sample.sample_id),
    }
    score = float(mod.mmstar_process_results(doc, [text])["average"]["score"])
    extract = importlib.import_module("lmms_eval.tasks._task_utils.mcq_extract")
    letter = extract.extract_mcq_answer(text, choices=["A", "B", "C", "D"]) or None
    method, reason = ("rule", None) if letter else ("none", "no option letter found")
    return HarnessVerdict(letter, score == 1, score, method, _rule("mmstar"), reason)


def _mathvision(sample: Sample, text: str, seed: str, judge: Judge | None) -> HarnessVerdict:
    mod = task_module("mathvision/utils.py")
    pictured = bool((sample.meta or {}).get("options_pictured"))
    doc = {"answer": sample.answer, "options": [] if pictured else list(sample.choices)}
    ok = bool(mod.mathvision_process_results(doc, [text])["mathvision_standard_eval"]["scores"][0])
    return HarnessVerdict(text[-200:], ok, float(ok), "rule", _rule("mathvision"))


def _chartqa(sample: Sample, text: str, seed: str, judge: Judge | None) -> HarnessVerdict:
    mod = task_module("chartqa/utils.py")
    doc = {"answer": sample.answer, "type": (sample.meta or {}).get("type", "")}
    score = float(mod.chartqa_process_results(doc, [text])["relaxed_overall"])
    return HarnessVerdict(text[:200], score == 1, score, "rule", _rule("chartqa"))


def _answers(sample: Sample) -> list[str]:
    answers = (sample.meta or {}).get("answers")
    return [str(a) for a in answers] if answers else [sample.answer]


def _textvqa(sample: Sample, text: str, seed: str, judge: Judge | None) -> HarnessVerdict:
    mod = task_module("textvqa/utils.py")
    doc = {"answers": list(_answers(sample)), "question_id": sample.sample_id}
    result = mod.textvqa_process_results(doc, [text])
    score = float(result["exact_match"])
    return HarnessVerdict(
        result["submission"]["answer"], score > 0, score, "rule", _rule("textvqa")
    )


def _infovqa(sample: Sample, text: str, seed: str, judge: Judge | None) -> HarnessVerdict:
    metrics = importlib.import_module("lmms_eval.api.metrics")
    score = float(metrics.anls(references=_answers(sample), predictions=[text.strip()])["anls"])
    return HarnessVerdict(text[:200], score >= 0.5, score, "rule", _rule("infovqa"))


def _mathvista(sample: Sample, text: str, seed: str, judge: Judge | None) -> HarnessVerdict:
    mod = task_module("mathvista/utils.py")
    meta = sample.meta or {}
    choices = list(sample.choices) or None
    doc = {
        "pid": meta.get("source_id", sample.sample_id),
        "question_type": _meta(sample, "question_type"),
        "answer_type": _meta(sample, "answer_type"),
        "query": meta.get("query") or sample.question,
        "choices": choices,
        "answer": sample.answer,
        "precision": meta.get("precision") if meta.get("precision") is not None else 0,
        "metadata": meta.get("metadata") or {},
    }
    evaluator = mod.mathvista_evaluator
    asked: list[str] = []

    def chat(prompt: str, temperature: float = 0, max_tokens: int = 256, n: int = 1) -> str:
        asked.append(prompt)
        if judge is not None:
            return judge(prompt, max_tokens)
        from . import get_scorer

        return get_scorer("mathvista").score(sample, text).prediction or ""

    before = evaluator.__dict__.get("get_chat_response")
    evaluator.get_chat_response = chat
    try:
        result = mod.mathvista_process_results(doc, [text])["llm_as_judge_eval"]
    finally:
        if before is None:
            del evaluator.get_chat_response
        else:
            evaluator.get_chat_response = before
    ok = bool(result["true_false"])
    method = "rule" if not asked else ("llm" if judge is not None else "offline-rule")
    reason = None
    if method == "offline-rule":
        reason = "no harness_judge: the project's rule extraction in place of GPT-4's"
    prediction = None if result["prediction"] is None else str(result["prediction"])
    return HarnessVerdict(prediction, ok, float(ok), method, _rule("mathvista"), reason)


class _Reply:
    def __init__(self, text: str):
        self._text = text

    def raise_for_status(self) -> None:
        return None

    def json(self) -> dict[str, Any]:
        return {"choices": [{"message": {"content": self._text}}]}


class _JudgeFailed(BaseException):
    """Escapes the harness's own ``except Exception`` retry loop (module docstring, 3)."""


def _hb_document(sample: Sample, text: str) -> dict[str, Any]:
    meta = sample.meta or {}
    return {
        "question": sample.question,
        "gt_answer_details": str(meta.get("gt_answer_details") or ""),
        "gt_answer": "1" if sample.answer == "yes" else "0",
        "category": str(_meta(sample, "category")),
        "subcategory": str(meta.get("subcategory", "")),
        "set_id": meta.get("set_id", ""),
        "figure_id": _meta(sample, "figure_id"),
        "question_id": meta.get("question_id", ""),
        "model_prediction": text,
    }


def _hallusionbench(sample: Sample, text: str, seed: str, judge: Judge | None) -> HarnessVerdict:
    doc = _hb_document(sample, text)
    if judge is None:
        hb = task_module("hallusion_bench/evaluate_hb.py")
        ok = hb.hb_aggregation_result_aAcc_intern([dict(doc)]) == 1
        prediction = "yes" if "yes" in text.lower() else "no"
        reason = "no harness_judge: lmms-eval's rule ('yes' anywhere) in place of GPT-4"
        rule = f"{version_note()} tasks/hallusion_bench/evaluate_hb.py hb_aggregation_result_intern"
        return HarnessVerdict(prediction, ok, float(ok), "offline-rule", rule, reason)
    mod = task_module("hallusion_bench/utils.py")

    class _Transport:
        @staticmethod
        def post(url: str, headers: Any = None, json: Any = None, timeout: Any = None) -> _Reply:
            prompt = json["messages"][0]["content"]
            try:
                return _Reply(judge(prompt, int(json.get("max_tokens", 16))))
            except HarnessJudgeError as exc:
                raise _JudgeFailed(str(exc)) from exc

    before = mod.requests
    mod.requests = _Transport
    try:
        with tempfile.TemporaryDirectory(prefix="hb-judge-") as tmp:
            out = mod.evaluate_by_chatgpt(
                [copy.deepcopy(doc)],
                output_entry="model_prediction",
                correctness_entry="gpt4v_output_gpt_check",
                save_json_path=str(Path(tmp) / "judged.json"),
            )
        judged = mod.assign_correctness(out, correctness_entry="gpt4v_output_gpt_check")[0]
    except _JudgeFailed as exc:
        return HarnessVerdict(
            None, False, 0.0, "none", _rule("hallusionbench"), f"judge failed: {exc}"
        )
    finally:
        mod.requests = before
    ok = int(judged["correct"]) == 1
    verdict = {"0": "incorrect", "1": "correct", "2": "unclear"}[
        str(judged["gpt4v_output_gpt_check"])
    ]
    return HarnessVerdict(verdict, ok, float(ok), "llm", _rule("hallusionbench"))


_RULES: dict[str, Callable[[Sample, str, str, Judge | None], HarnessVerdict]] = {
    "mmmu": _mmmu,
    "mmstar": _mmstar,
    "mathvision": _mathvision,
    "mathvista": _mathvista,
    "chartqa": _chartqa,
    "textvqa": _textvqa,
    "infovqa": _infovqa,
    "hallusionbench": _hallusionbench,
}


def harness_verdict(
    benchmark: str,
    sample: Sample,
    raw_text: str | None,
    *,
    seed: str = "0",
    judge: Judge | None = None,
) -> HarnessVerdict:
    """The harness's verdict on one raw output of ``sample`` (module docstring).

    ``seed``: the seed of this row's random guess (the run seed and the row key);
    ``judge``: the harness judge (``scoring.harness_judge``; None: offline rules).
    A sample the task code cannot read is a failed verdict naming the problem."""
    if benchmark not in _RULES:
        raise KeyError(f"no harness scorer for benchmark {benchmark!r}")
    text = harness_text(raw_text)
    try:
        with _quiet():
            return _RULES[benchmark](sample, text, seed, judge)
    except (KeyError, ValueError, TypeError, IndexError, SyntaxError, ArithmeticError) as exc:
        reason = f"the harness could not score it ({type(exc).__name__}: {exc})"
        return HarnessVerdict(None, False, 0.0, "none", _rule(benchmark), reason)


@cache
def _loguru_warnings_only() -> None:
    """lmms-eval's task code logs through loguru at INFO for every row: this process
    keeps loguru's messages from WARNING up (set once)."""
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No per-row INFO logs and no progress bars of the harness's code (the judge loop
    draws one per call)."""
    import os

    _loguru_warnings_only()
    before = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = before
