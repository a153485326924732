"""`scoring.unparsed_choice`: an unparsed multiple-choice answer is wrong by default; the
paper-compatible `most-similar` mode maps it to the option at the smallest Levenshtein
distance, as MathVista's official scorer and lmms-eval do (issue "No silent wrong
numbers", item 16). Every distance below is computed by hand."""

from __future__ import annotations

import csv
import json
import os

import pytest

from vlmrobust.cli import main
from vlmrobust.core.io import write_jsonl
from vlmrobust.core.records import OutputRow, Sample, write_samples
from vlmrobust.plan import RunPlan, data, scoring
from vlmrobust.score import SCORERS, score_outputs, summarize, write_summary
from vlmrobust.score.scorers import levenshtein, most_similar_option

from .conftest import REPO, output_row

# --------------------------------------------------------------------------- the pure functions


@pytest.mark.parametrize(
    "a, b, distance",
    [
        ("", "", 0),
        ("", "abc", 3),  # three insertions
        ("abc", "abc", 0),
        ("kitten", "sitting", 3),  # k->s, e->i, insert g
        ("flaw", "lawn", 2),  # delete f, insert n
        ("dgo", "dog", 2),  # a transposition is two edits
        ("dgo", "bird", 4),  # b->d, i->g, r->o, delete d
        ("A", "a", 1),  # case-sensitive
    ],
)
def test_levenshtein_by_hand(a, b, distance):
    assert levenshtein(a, b) == distance
    assert levenshtein(b, a) == distance


def test_most_similar_option_by_hand():
    # dgo: cat 3, dog 2, bird 4
    assert most_similar_option("dgo", ["cat", "dog", "bird"]) == 1
    # a tie goes to the first option, as the official index(min(distances))
    assert most_similar_option("ab", ["ax", "xb"]) == 0
    # the empty answer is nearest to the shortest option: three 5, two 3, four 4
    assert most_similar_option("", ["three", "two", "four"]) == 1
    # the absolute distance, not normalized by length (as the official scorer):
    # xy 6 (two substitutions, four deletions) < abcdefghijklm 7 (seven insertions),
    # although 6/6 > 7/13 after normalizing
    assert most_similar_option("abcdef", ["xy", "abcdefghijklm"]) == 0
    # the text is stripped, the options are compared as given (case-sensitive)
    assert most_similar_option("  Dog \n", ["dog", "Dog"]) == 1
    with pytest.raises(ValueError, match="no options"):
        most_similar_option("x", [])


# --------------------------------------------------------------------------- the scorers

MV_CHOICE = Sample(
    "mathvista-1",
    "mathvista",
    ["x.png"],
    "Is the red bar larger than the blue one?",
    "smaller than",
    "text",
    ["larger than", "equal to", "smaller than"],
    meta={"question_type": "multi_choice", "answer_type": "text"},
)
LETTER = Sample(
    "d-1", "d", ["x.png"], "Which animal?", "B", "letter", ["cat", "dog", "bird", "fish"]
)


def test_default_keeps_an_unparsed_choice_wrong():
    for mode in ({}, {"unparsed_choice": "wrong"}):
        result = SCORERS["mathvista"].score(MV_CHOICE, "smaler thn", None, **mode)
        assert (result.prediction, result.correct, result.method) == (None, False, "none")
        assert result.reason == "no option letter (A-C) or option text found"


def test_mathvista_most_similar_maps_to_the_option_text():
    # smaler thn -> smaller than: two insertions (the others are farther)
    result = SCORERS["mathvista"].score(MV_CHOICE, "smaler thn", None, "most-similar")
    assert (result.prediction, result.correct, result.score) == ("smaller than", True, 1.0)
    assert (result.method, result.rule) == ("most-similar", "most-similar")
    assert result.reason.startswith("no option letter (A-C) or option text found; ")
    assert "guessed option C ('smaller than')" in result.reason
    assert "edit distance (2) to the response" in result.reason
    assert "unparsed_choice: most-similar" in result.reason
    # a parsed answer is untouched by the mode
    parsed = SCORERS["mathvista"].score(MV_CHOICE, "The answer is (A).", None, "most-similar")
    assert (parsed.prediction, parsed.method) == ("larger than", "rule")
    # Distract-Bench's MathVista-style rows follow the MathVista rules
    db = Sample(
        "distract-bench-1",
        "distract-bench",
        ["x.png"],
        MV_CHOICE.question,
        "smaller than",
        "text",
        list(MV_CHOICE.choices),
        meta={"source_style": "mathvista", "question_type": "multi_choice"},
    )
    assert SCORERS["distract-bench"].score(db, "smaler thn", None, "most-similar").correct


@pytest.mark.parametrize("scorer", ["mmstar", "mmmu", "mathvision", "generic"])
def test_letter_questions_guess_the_letter(scorer):
    result = SCORERS[scorer].score(LETTER, "dgo", None, "most-similar")  # dog: 2
    assert (result.prediction, result.correct, result.method) == ("B", True, "most-similar")


def test_label_question_guesses_the_label():
    labels = Sample("d-2", "d", ["x.png"], "Which animal?", "dog", "label", ["cat", "dog", "bird"])
    result = SCORERS["generic"].score(labels, "dgo", None, "most-similar")
    assert (result.prediction, result.correct, result.method) == ("dog", True, "most-similar")


def test_only_choice_questions_are_guessed():
    free = Sample(
        "mathvista-2",
        "mathvista",
        ["x.png"],
        "How many?",
        "3",
        "number",
        [],
        meta={"question_type": "free_form", "answer_type": "integer"},
    )
    no_options = Sample("d-3", "d", ["x.png"], "(A) one (B) two", "B", "letter", [])
    for scorer, sample in (("mathvista", free), ("mmstar", no_options)):
        result = SCORERS[scorer].score(sample, "no idea at all", None, "most-similar")
        assert (result.prediction, result.method) == (None, "none")


def test_empty_answer_is_the_shortest_option_and_the_llm_text_is_compared():
    # "" -> cat 3, dog 3, bird 4, fish 4: the first of the tie, as the official scorer
    empty = SCORERS["generic"].score(LETTER, "", None, "most-similar")
    assert (empty.prediction, empty.correct) == ("A", False)
    assert "to the empty response" in empty.reason
    # the LLM fallback's unreadable extraction is what is compared (as the official
    # scorer compares its GPT extraction): "dgo" -> dog, although "hmm" is nearest cat
    llm = SCORERS["generic"].score(LETTER, "hmm", lambda s, t: "dgo", "most-similar")
    assert (llm.prediction, llm.method) == ("B", "most-similar")
    assert "LLM extraction 'dgo' could not be read" in llm.reason
    assert "to the LLM extraction" in llm.reason


def _row(sid: str, text: str, **kw) -> OutputRow:
    return output_row(sid, text, **kw)


def test_score_outputs_and_summary_count_the_guesses(tmp_path):
    samples = {
        f"d-{i}": Sample(f"d-{i}", "d", ["x.png"], "Which?", "B", "letter", list(LETTER.choices))
        for i in range(1, 5)
    }
    rows = [
        _row("d-1", "Answer: B"),
        _row("d-2", "dgo", finish_reason="length"),
        _row("d-3", "fsh"),  # fish: 1
        _row("d-4", "", error="CUDA out of memory", finish_reason="error"),
    ]
    default = score_outputs(samples, rows, "mmstar")
    assert [r["method"] for r in default] == ["rule", "none", "none", "none"]
    guessed = score_outputs(samples, rows, "mmstar", unparsed_choice="most-similar")
    assert [r["method"] for r in guessed] == ["rule", "most-similar", "most-similar", "none"]
    assert [r["prediction"] for r in guessed] == ["B", "B", "D", None]
    assert [r["correct"] for r in guessed] == [1, 1, 0, 0]
    assert guessed[1]["rule"] == "most-similar"
    assert guessed[1]["reason"].endswith("output truncated at max_new_tokens")
    assert guessed[3]["reason"] == "generation failed: CUDA out of memory"  # never guessed

    (before,) = summarize(default)
    assert (before["correct"], before["extraction_failures"]) == (1, 2)
    assert before["most_similar_guesses"] == 0
    (after,) = summarize(guessed)
    assert (after["correct"], after["extraction_failures"], after["errors"]) == (2, 0, 1)
    assert after["most_similar_guesses"] == 2
    path = tmp_path / "summary.csv"
    write_summary(path, [after])
    (line,) = csv.DictReader(path.open())
    assert line["most_similar_guesses"] == "2" and line["extraction_failures"] == "0"

    with pytest.raises(ValueError, match="unparsed_choice 'guess'"):
        score_outputs(samples, rows, "mmstar", unparsed_choice="guess")


# --------------------------------------------------------------------------- the plan and the CLI


def _load(path: str) -> RunPlan:
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        return RunPlan.load(path)
    finally:
        os.chdir(cwd)


def test_plan_unparsed_choice_default_and_paper():
    demo = _load("config/config.yaml")
    assert demo.config["scoring"]["unparsed_choice"] == "wrong"
    assert {scoring.unparsed_choice(demo, d) for d in demo.datasets} == {"wrong"}
    paper = _load("config/paper.yaml")
    guessed = [d for d in paper.datasets if scoring.unparsed_choice(paper, d) == "most-similar"]
    assert guessed == ["mathvista"]  # lmms-eval's MathVista scorer; the rest stay wrong
    # the setting is no input of the samples: changing it rebuilds no samples
    assert "unparsed_choice" not in data.samples_spec(paper, "mathvista")


def test_the_score_rule_passes_the_plans_mode(tmp_path, monkeypatch):
    """The plan gives the score job the dataset's unparsed_choice (the rule passes it as
    --unparsed-choice); scoring with it makes the most similar option the answer."""
    config = {
        "model_registry": str(REPO / "config/models.yaml"),
        "models": ["demo-base"],
        "scoring": {"unparsed_choice": "wrong"},
        "datasets": {
            "demo-diagram": {
                "adapter": "demo",
                "source": "local",
                "path": "results/raw/demo/diagram",
                "unparsed_choice": "most-similar",
            }
        },
    }
    (tmp_path / "run.yaml").write_text(json.dumps(config))
    monkeypatch.chdir(tmp_path)
    sample = Sample(
        "demo-diagram-1", "demo-diagram", ["x.png"], "Which?", "B", "letter", ["cat", "dog", "bird"]
    )
    write_samples(tmp_path / "results/samples/demo-diagram/samples.jsonl", [sample])
    row = _row("demo-diagram-1", "dgo")
    row = OutputRow.from_dict({**row.to_dict(), "dataset": "demo-diagram", "model": "demo-base"})
    out = tmp_path / "results/outputs/demo-base/demo-diagram/clean/default.jsonl"
    out.parent.mkdir(parents=True)
    write_jsonl(out, [row.to_dict()])
    plan = RunPlan.load(tmp_path / "run.yaml")
    params = scoring.score_params(plan, "demo-diagram")
    assert params["unparsed_choice"] == "most-similar"
    scored = tmp_path / "results/scored/demo-base/demo-diagram/clean/default.csv"
    argv = [
        "score",
        "--outputs",
        str(out),
        "--samples",
        str(tmp_path / "results/samples/demo-diagram/samples.jsonl"),
        "--scorer",
        params["scorer"],
        "--out",
        str(scored),
    ]
    assert main([*argv, "--unparsed-choice", params["unparsed_choice"]]) == 0
    (line,) = csv.DictReader(scored.open())
    assert (line["prediction"], line["method"], line["correct"]) == ("B", "most-similar", "1")
    # the run's own setting (wrong): an extraction failure
    assert main([*argv, "--unparsed-choice", "wrong"]) == 0
    (line,) = csv.DictReader(scored.open())
    assert (line["prediction"], line["method"], line["correct"]) == ("", "none", "0")
