"""scoring.mode harness: each benchmark's verdict from lmms-eval's own task code
(vlmrobust.score.harness), recorded, counted and stated in the notes and tables."""

from __future__ import annotations

import importlib

import pandas as pd
import pytest

from vlmrobust.core.harness import task_module
from vlmrobust.core.records import OutputRow, Sample
from vlmrobust.metrics.core import scoring_notes
from vlmrobust.score import SCORERS, score_outputs, summarize
from vlmrobust.score.harness import (
    MMMU_OPEN_BUG,
    HarnessJudgeError,
    harness_text,
    harness_verdict,
    reasoning_tags,
)
from vlmrobust.studies.base import scoring_note


def sample(**kw) -> Sample:
    base = {
        "sample_id": "s1",
        "dataset": "d",
        "question": "What is shown?",
        "answer": "A",
        "answer_type": "letter",
        "images": [],
        "choices": [],
        "meta": {},
    }
    base.update(kw)
    return Sample(**base)


MMMU_MC = sample(
    answer="B",
    choices=["$5", "$7", "$9"],
    meta={
        "question_type": "multiple-choice",
        "options": "['$5', '$7', '$9']",
        "source_id": "validation_Accounting_3",
    },
)
MMMU_OPEN = sample(
    answer="24",
    answer_type="number",
    meta={"question_type": "open", "options": "[]", "source_id": "validation_Math_7"},
)


def test_the_response_is_stripped_as_lmms_eval_strips_it():
    # the default of lmms-eval's --reasoning_tags, read from its source
    assert reasoning_tags() == [["<think>", "</think>"], ["<analysis>", "</analysis>"]]
    assert harness_text("<think>A? no.</think>\nThe answer is B") == "The answer is B"
    # a closing tag alone (the chat template opened the block): what follows the last
    assert harness_text("reasoning C ...</think> D") == "D"
    assert harness_text(None) == ""


def test_mmmu_multiple_choice_is_mmmus_parser():
    v = harness_verdict("mmmu", MMMU_MC, "The answer is (B).")
    assert (v.prediction, v.correct, v.method) == ("B", True, "rule")
    assert "tasks/mmmu/utils.py mmmu_process_results" in v.rule
    # more than five words and no letter: the option's text (issue 39, bug 6)
    v = harness_verdict("mmmu", MMMU_MC, "So the total of the costs incurred is $7.")
    assert (v.prediction, v.correct) == ("B", True)


def test_mmmu_random_option_is_seeded_and_counted():
    first = harness_verdict("mmmu", MMMU_MC, "I cannot tell.", seed="0:key-1")
    again = harness_verdict("mmmu", MMMU_MC, "I cannot tell.", seed="0:key-1")
    assert first.method == "random" and "random option" in first.reason
    assert first.prediction == again.prediction
    # the guess depends on the seed only: over 40 seeds every option comes up
    guesses = {
        harness_verdict("mmmu", MMMU_MC, "I cannot tell.", seed=f"0:k{i}").prediction
        for i in range(40)
    }
    assert guesses == {"A", "B", "C"}


def test_mmmu_open_bug_is_reproduced_and_the_corrected_verdict_kept():
    v = harness_verdict("mmmu", MMMU_OPEN, "So the answer is 24.")
    # lmms-eval >= 0.3.5 compares the first candidate's characters: always wrong
    assert (v.correct, v.bug, v.corrected) == (False, MMMU_OPEN_BUG, True)
    assert v.reason.startswith(MMMU_OPEN_BUG)
    v = harness_verdict("mmmu", MMMU_OPEN, "So the answer is 25.")
    assert (v.correct, v.corrected, v.reason) == (False, False, None)


def test_mmstar_reads_the_letter_with_lmms_evals_extractor():
    s = sample(
        answer="C",
        choices=["a", "b", "c", "d"],
        meta={"category": "math", "l2_category": "geo", "index": 3},
    )
    assert harness_verdict("mmstar", s, "<think>A or B</think>The answer is C").correct
    v = harness_verdict("mmstar", s, "option d")
    assert (v.correct, v.method) == (False, "none")


def test_chartqa_is_relaxed_accuracy_on_the_raw_response():
    s = sample(answer="24", answer_type="number", meta={"type": "human_test"})
    assert harness_verdict("chartqa", s, "24.5").correct  # within 5 %
    assert not harness_verdict("chartqa", s, "24%").correct  # read as 0.24
    # the raw response, not an extracted answer: a sentence is wrong
    assert not harness_verdict("chartqa", s, "The value is 24.").correct


def test_textvqa_and_infovqa_scores():
    s = sample(answer="2009", answer_type="text", meta={"answers": ["2009."] * 10})
    v = harness_verdict("textvqa", s, "2009")
    assert (v.score, v.prediction) == (1.0, "2009")
    s = sample(answer="abc", answer_type="text", meta={"answers": ["abcd", "xyz"]})
    v = harness_verdict("infovqa", s, " abc ")
    assert v.score == pytest.approx(0.75)  # 1 - 1/4 against "abcd"
    assert v.correct


@pytest.mark.parametrize(
    ("text", "answers"),
    [
        ("$19.99", ["$19.99"] * 10),
        ("$19.99", ["$19.99"] * 2 + ["19.99"] * 8),
        ("19.99", ["$19.99"] * 10),
        ("\\$19.99", ["$19.99"] * 10),
        ("Two", ["2"] * 10),
        ("The Cat.", ["cat"] * 4 + ["dog"] * 6),
        ("dont", ["don't"] * 10),
        ("3,000", ["3000"] * 10),
    ],
)
def test_textvqa_extract_normalizes_answer_and_golds_as_the_evalai_processor(text, answers):
    """Extract mode on a short answer (read whole) scores as lmms-eval's
    textvqa_process_results, which runs the EvalAI processor on the answer and on every
    gold: a "$" stays on both sides."""
    s = sample(answer=answers[0], answer_type="text", meta={"answers": answers})
    official = task_module("textvqa/utils.py").textvqa_process_results(
        {"answers": list(answers), "question_id": 1}, [text]
    )
    processor = importlib.import_module("lmms_eval.tasks._task_utils.vqa_eval_metric")
    ours = SCORERS["textvqa"].score(s, text)
    assert ours.score == pytest.approx(official["exact_match"])
    assert processor.EvalAIAnswerProcessor()(ours.prediction) == official["submission"]["answer"]


def test_textvqa_extract_reads_the_final_answer_and_latex_dollars():
    s = sample(answer="$19.99", answer_type="text", meta={"answers": ["$19.99"] * 10})
    v = SCORERS["textvqa"].score(s, "The tag shows the price.\nThe answer is $19.99.")
    assert (v.prediction, v.score, v.rule) == ("$19.99", 1.0, "cue")
    s = sample(answer="5", answer_type="text", meta={"answers": ["5"] * 10})
    assert SCORERS["textvqa"].score(s, "$5$").score == 1.0  # a LaTeX pair, not a price


MMMU_ION = ["threshold", "resting potential", "depolarization", "rapid repolarization"]


@pytest.mark.parametrize(
    "text",
    [
        # bare letters listed, the option texts too: the letters win (D, not C's text)
        "A is the threshold, B is the resting potential, C is the depolarization and D is"
        " the rapid repolarization; the marked segment is the depolarization",
        "The segments are A. threshold, B. resting potential and C. depolarization, which"
        " is the marked one",
        "The label D marks it; it is not the depolarization but the rapid repolarization",
        # option texts only: the one found last
        "Looking at the trace, the marked part is the depolarization of the membrane",
        "It starts at the resting potential and the marked part is the rapid repolarization",
        # letters only
        "The marked segment is labelled C in the figure, right after B",
    ],
)
def test_mmmu_extract_prefers_letters_to_option_texts_as_mmmus_parser(text):
    """Extract mode reads an MMMU answer without a cue as lmms-eval's
    parse_multi_choice_response does: "(A)", then a letter before a space or a period,
    and only without one the option text."""
    s = sample(answer="D", choices=MMMU_ION)
    official = task_module("mmmu/utils.py").parse_multi_choice_response(
        text, list("ABCD"), dict(zip("ABCD", MMMU_ION, strict=True))
    )
    assert SCORERS["mmmu"].score(s, text).prediction == official


def test_mathvision_uses_math_vs_official_rules():
    s = sample(answer="5", answer_type="number")
    assert harness_verdict("mathvision", s, "Thus \\boxed{5}").correct
    assert not harness_verdict("mathvision", s, "Thus \\boxed{6}").correct
    mc = sample(answer="B", choices=["1", "2", "3", "4", "5"])
    assert harness_verdict("mathvision", mc, "The answer is B.").correct


HB = sample(
    answer="yes",
    answer_type="yes/no",
    question="Is the line longer?",
    meta={
        "category": "VD",
        "subcategory": "illusion",
        "set_id": 1,
        "figure_id": 1,
        "question_id": 0,
        "gt_answer_details": "Yes, it is longer.",
    },
)


def test_hallusionbench_offline_rule_is_lmms_evals_yes_anywhere():
    v = harness_verdict("hallusionbench", HB, "No doubt about it: yes.")
    assert (v.correct, v.method, v.prediction) == (True, "offline-rule", "yes")
    assert "hb_aggregation_result_intern" in v.rule


def test_hallusionbench_judge_gets_the_official_prompt():
    asked = []

    def judge(prompt: str, max_tokens: int) -> str:
        asked.append((prompt, max_tokens))
        return "incorrect"

    v = harness_verdict("hallusionbench", HB, "Yes.", judge=judge)
    assert (v.correct, v.method, v.prediction) == (False, "llm", "incorrect")
    prompt, tokens = asked[0]
    assert prompt.startswith("Imagine you are an intelligent teacher.")
    assert "Reference answer: Yes, it is longer.\nPrediction answer:Yes.\nOutput:" in prompt
    assert tokens == 16


def test_hallusionbench_unclear_counts_right_without_a_figure_as_the_harness_does():
    vs = sample(**{**HB.__dict__, "meta": {**HB.meta, "category": "VS", "figure_id": 0}})
    assert harness_verdict("hallusionbench", vs, "Hmm.", judge=lambda p, n: "unclear").correct
    assert not harness_verdict("hallusionbench", HB, "Hmm.", judge=lambda p, n: "unclear").correct


def test_a_failed_judge_call_is_a_failure_not_the_harness_fallback():
    def judge(prompt: str, max_tokens: int) -> str:
        raise HarnessJudgeError("HTTP 500")

    v = harness_verdict("hallusionbench", HB, "Yes.", judge=judge)
    assert (v.correct, v.method) == (False, "none")
    assert v.reason == "judge failed: HTTP 500"


MV = sample(
    answer="3.5",
    answer_type="number",
    precision=1,
    meta={
        "question_type": "free_form",
        "answer_type": "float",
        "precision": 1,
        "query": "How long? Answer with one decimal.",
    },
)


def test_mathvista_extraction_by_the_judge_or_offline():
    # a bare number needs no extraction (the harness's own shortcut)
    assert harness_verdict("mathvista", MV, "3.5").method == "rule"
    asked = []

    def judge(prompt: str, max_tokens: int) -> str:
        asked.append(prompt)
        return "3.5"

    v = harness_verdict("mathvista", MV, "It is 3.5 m long.", judge=judge)
    assert (v.correct, v.method) == (True, "llm")
    assert asked[0].startswith("Please read the following example.")
    assert asked[0].endswith(
        "How long? Answer with one decimal.\n\nIt is 3.5 m long.\n\nExtracted answer: "
    )
    v = harness_verdict("mathvista", MV, "It is 3.5 m long.")
    assert (v.correct, v.method) == (True, "offline-rule")


def rows(texts: list[str]) -> list[OutputRow]:
    return [
        OutputRow.from_dict(
            {
                "key": f"v{i}#0",
                "variant_id": f"v{i}",
                "sample_id": f"s{i}",
                "dataset": "mmmu",
                "condition": "clean",
                "prompt": "p",
                "model": "m",
                "draw": 0,
                "raw_text": t,
                "answer_text": t,
                "prompt_version": "1",
                "backend": "hf",
                "model_revision": "r",
            }
        )
        for i, t in enumerate(texts)
    ]


def test_score_outputs_records_the_mode_the_bug_and_the_other_verdict():
    samples = {
        "s0": sample(**{**MMMU_MC.__dict__, "sample_id": "s0"}),
        "s1": sample(**{**MMMU_OPEN.__dict__, "sample_id": "s1"}),
    }
    out = score_outputs(
        samples,
        rows(["The answer is (B).", "So the answer is 24."]),
        "mmmu",
        mode="harness",
        compare=True,
    )
    assert [r["mode"] for r in out] == ["harness", "harness"]
    assert [r["correct"] for r in out] == [1, 0]
    assert [r["corrected"] for r in out] == [None, 1]
    assert out[1]["harness_bug"] == MMMU_OPEN_BUG
    assert [r["other_correct"] for r in out] == [1, 1]  # the project reads 24 as right
    summary = summarize(out)[0]
    assert summary["mode"] == "harness"
    assert (
        summary["harness_bug_rows"],
        summary["corrected_accuracy"],
        summary["mode_differences"],
    ) == (1, 1.0, 1)
    # extract mode, compared with the harness
    out = score_outputs(
        samples, rows(["The answer is (B).", "So the answer is 24."]), "mmmu", compare=True
    )
    assert [r["mode"] for r in out] == ["extract", "extract"]
    assert [r["correct"] for r in out] == [1, 1]
    assert [r["other_correct"] for r in out] == [1, 0]


def test_a_benchmark_without_a_harness_scorer_keeps_extract():
    s = {"s0": sample(sample_id="s0", answer="B", choices=["x", "y"])}
    out = score_outputs(s, rows(["B"]), "logicvista", mode="harness")
    assert out[0]["mode"] == "extract" and out[0]["correct"] == 1
    with pytest.raises(ValueError, match="scoring mode 'exact' is not one of extract, harness"):
        score_outputs(s, rows(["B"]), "logicvista", mode="exact")


def test_scoring_notes_count_what_the_mode_did():
    df = pd.DataFrame(
        {
            "model": ["m"] * 4,
            "benchmark": ["mmmu"] * 4,
            "condition": ["clean"] * 4,
            "correct": [1, 0, 0, 0],
            "mode": ["harness"] * 4,
            "method": ["rule", "random", "rule", "rule"],
            "harness_bug": ["", "", MMMU_OPEN_BUG, MMMU_OPEN_BUG],
            "corrected": [None, None, 1, 0],
            "other_correct": [1, 1, 1, 0],
        }
    )
    warnings: list[str] = []
    notes = scoring_notes(df, warnings)
    note = notes[("m", "mmmu", "clean")]
    assert "1 answer(s) the harness read as no option got its random option (seeded)" in note
    assert (
        f"{MMMU_OPEN_BUG}: 1 verdict(s) the harness gets wrong by its own bug (kept); accuracy without it 50.0%"
        in note
    )
    assert "2 of 4 verdict(s) differ in the other scoring mode than harness" in note
    assert warnings == [f"model m, benchmark mmmu, condition clean: {note}"]


def test_every_table_states_the_mode():
    assert scoring_note({"mode": "extract", "compare": False}) == (
        "Scoring: the project's answer extraction (scoring.mode extract)."
    )
    line = scoring_note(
        {
            "mode": "harness",
            "harness": ["mmmu", "hallusionbench"],
            "extract": ["distract-bench"],
            "offline": ["hallusionbench"],
            "compare": True,
        }
    )
    assert line.startswith("Scoring: the papers' harness, lmms-eval 0.7.2")
    assert (
        "on mmmu, hallusionbench; the project's answer extraction on distract-bench (no harness scorer)"
        in line
    )
    assert "without the harness's GPT-4 judge on hallusionbench (offline rules" in line
    assert scoring_note(None) == ""
