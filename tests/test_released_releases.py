"""Reviewers on the public releases, in their real formats.

- LogicVista's ``data/dataset.json`` has one row (``v1_382``) whose question and
  answer are empty: the dataset and every released answer set must still load, with
  that row skipped and counted (``on_bad_row``, default ``skip``).
- LogicVista's answer sets (``eval/answers/<model>-answers.json``: ``{id: {"answer",
  "reasoning"}}``); some echo the whole prompt, few-shot answers included, before
  ``ASSISTANT:``: only the model's own turn is scored.
- MathVista's released outputs (``results/<model>/output_<model>.json``: the testmini
  row plus ``response``, the official GPT-4 ``extraction``, ``prediction`` and
  ``true_false``): scored from the response (default) or from the released extraction,
  with MathVista's convention for an unparsed choice.

The expected values were worked out by hand from the rows below.
"""

from __future__ import annotations

import csv
import json
import shutil

import pytest
from PIL import Image

from vlmrobust.cli import main as cli_main
from vlmrobust.core.config import load_yaml, validate_config, validate_registry
from vlmrobust.data import build_samples
from vlmrobust.data.released import load_questions
from vlmrobust.score.released import (
    format_released_summary,
    import_outputs,
    model_turn,
    released_summary,
    score_released,
)
from vlmrobust.studies.base import skipped_rows_warnings

from .conftest import FIXTURES, REPO

LOGICVISTA = FIXTURES / "idis" / "logicvista"


def logicvista_folder(tmp_path):
    """The fixture's dataset.json (nine real rows, v1_382 empty) with an image for
    every row, as the repository's data/ folder."""
    folder = tmp_path / "LogicVista" / "data"
    (folder / "images").mkdir(parents=True)
    shutil.copy(LOGICVISTA / "dataset.json", folder / "dataset.json")
    for qid in json.loads((folder / "dataset.json").read_text()):
        Image.new("RGB", (8, 8), "white").save(folder / "images" / f"{qid}.png")
    return folder


# --------------------------------------------------------------------------- LogicVista rows


def test_logicvista_dataset_with_its_empty_row_loads_by_default(tmp_path):
    folder = logicvista_folder(tmp_path)
    out = tmp_path / "samples" / "samples.jsonl"
    config = load_yaml(REPO / "config/config.yaml")
    config["datasets"]["logicvista"] = {"adapter": "logicvista", "source": "local",
                                        "path": str(folder), "conditions": ["clean"]}  # fmt: skip
    registry = validate_registry(load_yaml(REPO / "config/models.yaml"))
    spec = validate_config(config, registry)["datasets"]["logicvista"]  # the default setting
    report = build_samples("logicvista", spec, out, tmp_path / "samples" / "report.json")
    assert report["on_bad_row"] == "skip"
    assert (report["rows_read"], report["samples_written"], report["skipped"]) == (9, 8, 1)
    assert report["skipped_rows"] == [{"row": 8, "id": "v1_382", "reason": "question is missing"}]
    assert report["skipped_by_reason"] == {"question is missing": 1}
    assert "1 bad row(s) skipped (on_bad_row: skip): question is missing (1)" in report["warnings"]
    # the study's warnings.txt says it too
    warnings = skipped_rows_warnings([str(tmp_path / "samples" / "report.json")])
    assert warnings == [
        "dataset logicvista: 1 row(s) of the source skipped as bad rows (on_bad_row: skip), "
        "in no number here: question is missing (1)"
    ]


def test_logicvista_dataset_on_bad_row_error_names_the_row(tmp_path):
    folder = logicvista_folder(tmp_path)
    spec = {"adapter": "logicvista", "source": "local", "path": str(folder), "on_bad_row": "error"}
    with pytest.raises(ValueError, match=r"row 8 \(id 'v1_382'\): question is missing"):
        build_samples("logicvista", spec, tmp_path / "s.jsonl", tmp_path / "r.json")


def test_questions_skip_or_refuse_the_empty_row():
    skipped = load_questions("logicvista", LOGICVISTA, on_bad_row="skip")
    assert len(skipped) == 8 and "v1_382" not in skipped
    assert skipped.skipped == [{"row": 8, "id": "v1_382", "reason": "question is missing"}]
    with pytest.raises(ValueError, match=r"question row 8 \(id 'v1_382'\): question is missing"):
        load_questions("logicvista", LOGICVISTA)


# --------------------------------------------------------------------------- answer sets

#: an answer set in the release's format; v1_291 echoes a few-shot prompt whose example
#: answers ("answer: C", "answer: A") come before the model's own turn
ANSWER_SET = {
    "v1_1": {"answer": " A, C", "reasoning": "none"},
    "v1_4": {"answer": " The odd one out is B.", "reasoning": "none"},
    "v1_20": {"answer": " 3", "reasoning": "none"},
    "v1_220": {"answer": " D", "reasoning": "none"},
    "v1_291": {
        "answer": "USER: <image>\nExample question. Select from A, B, C, D.\nanswer: C\n"
        "Another example. Select from A, B, C, D.\nanswer: A\n"
        "Charles has two children ... Select from A, B, C, D and E. ASSISTANT: B",
        "reasoning": "none",
    },
    "v1_292": {"answer": " B", "reasoning": "none"},
    "v1_313": {"answer": " C", "reasoning": "none"},
    "v1_314": {"answer": " A", "reasoning": "none"},
    "v1_382": {"answer": " A", "reasoning": "none"},
}


def test_model_turn_is_the_text_after_the_last_assistant_marker():
    assert model_turn("USER: x answer: C ASSISTANT: ok ASSISTANT: B") == " B"
    assert model_turn("[INST] q answer: C [/INST] D") == " D"
    assert model_turn("The answer is C.") == "The answer is C."


def test_score_released_logicvista_answer_set(tmp_path):
    answers = tmp_path / "LLAVA7B-answers.json"
    answers.write_text(json.dumps(ANSWER_SET))
    questions = load_questions("logicvista", LOGICVISTA, on_bad_row="skip")
    rows = score_released("logicvista", "logicvista", questions, answers, tmp_path / "o.csv")
    got = {r["sample_id"]: (r["prediction"], r["correct"]) for r in rows}
    # v1_291 (gold C): the model's own turn says B; the echoed "answer: C" is not read
    assert got["v1_291"] == ("B", 0)
    assert got["v1_1"] == ("A, C", 1) and got["v1_4"] == ("B", 0)
    assert "v1_382" not in got and len(rows) == 8
    assert rows[[r["sample_id"] for r in rows].index("v1_291")]["model"] == "LLAVA7B-answers"
    summary = released_summary(rows)
    assert summary["skipped_questions"] == {"question is missing": 1}
    assert summary["released_rows_of_skipped_questions"] == 1
    assert summary["correct"] == 5  # all but v1_4, v1_291 and v1_314 (gold D)
    line = format_released_summary(summary)
    assert line.endswith(
        "question rows skipped as bad rows 1 (question is missing (1)); "
        "released rows left out for them 1"
    )
    with (tmp_path / "o.csv").open() as fh:
        assert [r["sample_id"] for r in csv.DictReader(fh)][:2] == ["v1_1", "v1_4"]


def test_score_released_command_on_bad_row(tmp_path, capsys):
    folder = logicvista_folder(tmp_path)
    answers = tmp_path / "LLAVA7B-answers.json"
    answers.write_text(json.dumps(ANSWER_SET))
    args = ["score-released", "--format", "logicvista", "--dataset", "logicvista",
            "--questions", str(folder), "--samples", str(answers),
            "--out", str(tmp_path / "o.csv")]  # fmt: skip
    assert cli_main(args) == 0
    printed = capsys.readouterr().out
    assert "N = 8; accuracy 62.5% (5/8)" in printed
    assert "released rows left out for them 1" in printed
    assert cli_main([*args, "--on-bad-row", "error"]) != 0
    assert "question row 8 (id 'v1_382'): question is missing" in capsys.readouterr().err


# --------------------------------------------------------------------------- MathVista

#: testmini rows in the hub schema (the questions file)
MATHVISTA_ROWS = [
    {"pid": "1", "question": "What fraction of the shape is blue?",
     "choices": ["3/11", "8/11", "6/11", "3/5"], "unit": None, "precision": None,
     "answer": "8/11", "question_type": "multi_choice", "answer_type": "text"},
    {"pid": "2", "question": "How much money does Luca need?", "choices": None, "unit": "$",
     "precision": 2.0, "answer": "1.45", "question_type": "free_form", "answer_type": "float"},
    {"pid": "3", "question": "How many birds are there?", "choices": None, "unit": None,
     "precision": None, "answer": "7", "question_type": "free_form", "answer_type": "integer"},
    {"pid": "4", "question": "Is the red bar larger than, equal to, or smaller than the blue?",
     "choices": ["larger than", "equal to", "smaller than"], "unit": None, "precision": None,
     "answer": "smaller than", "question_type": "multi_choice", "answer_type": "text"},
    {"pid": "5", "question": "What is the sum of the two numbers?", "choices": None,
     "unit": None, "precision": None, "answer": "12", "question_type": "free_form",
     "answer_type": "integer"},
]  # fmt: skip

#: (response, official extraction, official true_false) per pid
MATHVISTA_OUTPUTS = {
    "1": ("Eight of the eleven parts are blue, so the answer is B.", "B", True),
    "2": ("Luca needs one dollar and forty-five cents in total.", "1.45", True),
    "3": ("I count seven birds on the branch.", "7", True),
    "4": ("The red bar is clearly shorter.", "smaller", True),
    "5": ("The answer is 13.", "13", False),
}


def mathvista_release(tmp_path):
    qpath = tmp_path / "testmini.json"
    qpath.write_text(json.dumps(MATHVISTA_ROWS))
    out = {}
    for row in MATHVISTA_ROWS:
        response, extraction, label = MATHVISTA_OUTPUTS[row["pid"]]
        out[row["pid"]] = {**row, "metadata": {"split": "testmini"}, "query": "...",
                           "response": response, "extraction": extraction,
                           "prediction": extraction, "true_false": label}  # fmt: skip
    path = tmp_path / "output_gpt4.json"
    path.write_text(json.dumps(out))
    return qpath, path


def test_mathvista_release_scored_from_responses_by_default(tmp_path):
    qpath, path = mathvista_release(tmp_path)
    rows = score_released(
        "mathvista", "mathvista", load_questions("mathvista", qpath), path, tmp_path / "o.csv"
    )
    assert [(r["sample_id"], r["correct"], r["released_correct"]) for r in rows] == [
        ("1", 1, 1), ("2", 0, 1), ("3", 0, 1), ("4", 0, 1), ("5", 0, 0),
    ]  # fmt: skip
    summary = released_summary(rows)
    assert (summary["released_labels"], summary["agree_with_released_labels"]) == (5, 2)
    assert summary["scored_text"] == "response"
    assert format_released_summary(summary).endswith(
        "agrees with the released labels on 2/5 (40.0%)"
    )


def test_mathvista_release_from_the_official_extraction_reproduces_its_labels(tmp_path):
    qpath, path = mathvista_release(tmp_path)
    questions = load_questions("mathvista", qpath)
    rows = score_released("mathvista", "mathvista", questions, path, tmp_path / "o.csv",
                          extraction_field="extraction", unparsed_choice="most-similar")  # fmt: skip
    assert [r["correct"] for r in rows] == [1, 1, 1, 1, 0]
    assert rows[3]["method"] == "most-similar" and rows[3]["prediction"] == "smaller than"
    summary = released_summary(rows)
    assert (summary["agree_with_released_labels"], summary["released_labels"]) == (5, 5)
    line = format_released_summary(summary)
    assert "scored: the released extraction (extraction), unparsed choice most-similar" in line
    # without MathVista's convention the unparsed "smaller" is an extraction failure
    strict = score_released("mathvista", "mathvista", questions, path, tmp_path / "s.csv",
                            extraction_field="extraction")  # fmt: skip
    assert [r["correct"] for r in strict] == [1, 1, 1, 0, 0]
    assert released_summary(strict)["extraction_failures"] == 1


def test_mathvista_release_as_an_import_with_its_extraction(tmp_path):
    qpath, path = mathvista_release(tmp_path)
    samples = list(load_questions("mathvista", qpath).values())
    spec = {"model": "gpt4", "dataset": "mathvista", "condition": "clean", "prompt": "default",
            "format": "mathvista", "extraction_field": "extraction"}  # fmt: skip
    rows, missing = import_outputs(spec, samples, path)
    assert missing == 0
    assert [r.answer_text for r in rows] == ["B", "1.45", "7", "smaller", "13"]
    assert all(r.released is None for r in rows)  # labels only with released_labels
    rows, _ = import_outputs({**spec, "extraction_field": None}, samples, path)
    assert rows[0].answer_text.startswith("Eight of the eleven parts")


def test_logicvista_import_leaves_out_the_answers_of_skipped_rows(tmp_path):
    answers = tmp_path / "LLAVA7B-answers.json"
    answers.write_text(json.dumps(ANSWER_SET))
    samples = list(load_questions("logicvista", LOGICVISTA, on_bad_row="skip").values())
    spec = {"model": "llava", "dataset": "logicvista", "condition": "clean",
            "prompt": "default", "format": "logicvista"}  # fmt: skip
    rows, missing = import_outputs(spec, samples, answers, skipped_ids=["v1_382"])
    assert (len(rows), missing) == (8, 0)
    with pytest.raises(ValueError, match="id 'v1_382' is not among the 8 question rows"):
        import_outputs(spec, samples, answers)
