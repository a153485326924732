"""Importers of released results and their rescoring.

The Distract-Bench expectations were checked by hand against the responses in
``tests/fixtures/distract-bench/model_outputs`` (the released ``true_false`` labels
are wrong in places and are never used); the other datasets use small hand-made files
in their real schemas.
"""

from __future__ import annotations

import csv
import json

import pytest

from vlmrobust.data.released import load_questions, samples_from_rows
from vlmrobust.score.released import import_lmms_eval, import_vlmevalkit
from vlmrobust.score.released import score_released as _score_released

from .conftest import FIXTURES

DB = FIXTURES / "distract-bench"
OUT = DB / "model_outputs"
EUREKA = OUT / "FanqingM__MM-Eureka-Qwen-7B.samples.jsonl"
QWEN = OUT / "Qwen__Qwen2.5-VL-7B-Instruct.samples.jsonl"


def score_released(fmt, dataset, questions_path, samples_path, out, **kwargs):
    """What ``vlmrobust score-released`` does: the dataset's rows without images, then
    the rescoring of the released file against them."""
    questions = load_questions(dataset, questions_path)
    return _score_released(fmt, dataset, questions, samples_path, out, **kwargs)


# --------------------------------------------------------------------------- Distract-Bench


def test_load_questions_without_images():
    qs = load_questions("distract-bench", DB / "questions.jsonl")
    assert list(qs) == [str(i) for i in range(1, 13)]
    one = qs["1"]
    assert (one.sample_id, one.answer, one.answer_type, one.images) == (
        "distract-bench-1",
        "B",
        "letter",
        [],
    )
    assert one.choices[1] == "$15^{\\circ}$"
    assert one.meta["source_id"] == "1"
    assert one.meta["edit"]["trap_answer"]  # edit_instructions.jsonl was joined
    assert (qs["12"].answer, qs["12"].answer_type) == ("45", "number")
    assert (qs["11"].answer, qs["11"].answer_type) == ("(3,-4)", "text")


def test_import_lmms_eval_rows():
    qs = load_questions("distract-bench", DB / "questions.jsonl")
    rows = import_lmms_eval(EUREKA, "distract-bench", qs, "eureka", "distracted")
    assert len(rows) == 12
    first = rows[0]
    released = json.loads(EUREKA.read_text().splitlines()[0])
    assert first.raw_text == released["filtered_resps"]
    assert first.answer_text == released["filtered_resps"].strip()
    assert (first.key, first.sample_id, first.variant_id) == (
        "distract-bench-1#0",
        "distract-bench-1",
        "distract-bench-1",
    )
    assert (first.prompt, first.source, first.model, first.condition) == (
        "released",
        "lmms-eval",
        "eureka",
        "distracted",
    )
    assert first.completion_tokens == 709
    assert first.image_sha256 == []
    assert first.error is None


EUREKA_CORRECT = [1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0]
QWEN_CORRECT = [1, 1, 0, 1, 0, 1, 0, 1, 1, 1, 1, 0]


@pytest.mark.parametrize(
    "path, expected, model",
    [
        (EUREKA, EUREKA_CORRECT, "FanqingM__MM-Eureka-Qwen-7B"),
        (QWEN, QWEN_CORRECT, "Qwen__Qwen2.5-VL-7B-Instruct"),
    ],
)
def test_score_released_distract_bench(tmp_path, path, expected, model):
    out = tmp_path / "scored.csv"
    rows = score_released("lmms-eval", "distract-bench", DB / "questions.jsonl", path, out)
    with open(out, newline="", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert [r["sample_id"] for r in table] == [str(i) for i in range(1, 13)]
    assert [int(r["correct"]) for r in table] == expected
    assert [r["correct"] for r in rows] == expected
    assert {r["model"] for r in table} == {model}
    assert all(r["method"] == "rule" for r in table)
    assert {"prediction", "score", "method", "reason"} <= set(table[0])


def test_hand_checked_distract_bench_rows(tmp_path):
    eureka = {
        r["sample_id"]: r
        for r in score_released(
            "lmms-eval", "distract-bench", DB / "questions.jsonl", EUREKA, tmp_path / "e.csv"
        )
    }
    qwen = {
        r["sample_id"]: r
        for r in score_released(
            "lmms-eval", "distract-bench", DB / "questions.jsonl", QWEN, tmp_path / "q.csv"
        )
    }
    # doc 1: "\boxed{B}" for target B (released true_false: False) -> correct
    assert (eureka["1"]["prediction"], eureka["1"]["correct"], eureka["1"]["rule"]) == (
        "B",
        1,
        "boxed",
    )
    # doc 12: "\boxed{15}" for 45 -> wrong
    assert (eureka["12"]["prediction"], eureka["12"]["correct"]) == ("15", 0)
    # doc 6: "the answer is:\n\n\[3\]" -> 3
    assert (eureka["6"]["prediction"], eureka["6"]["rule"], eureka["6"]["correct"]) == (
        "3",
        "cue",
        1,
    )
    # doc 11: "The final answer is \([3, -4]\)." for "(3,-4)" (a list asked for)
    assert (eureka["11"]["prediction"], eureka["11"]["correct"]) == ("[3, -4]", 1)
    # Qwen doc 1 ends with "Answer: B"; doc 5 "the correct option is (E).\n\nE" (gold B)
    assert (qwen["1"]["prediction"], qwen["1"]["rule"]) == ("B", "cue")
    assert (qwen["5"]["prediction"], qwen["5"]["correct"]) == ("E", 0)
    # doc 7 ends with "So the middle number b is: \[3\]" for gold 5
    assert (qwen["7"]["prediction"], qwen["7"]["correct"]) == ("3", 0)
    # doc 9 "Final answer: 120"; doc 8 (percent options) "The correct option is (C)."
    assert (qwen["9"]["prediction"], qwen["9"]["correct"]) == ("120", 1)
    assert (qwen["8"]["prediction"], qwen["8"]["correct"]) == ("C", 1)


def test_released_labels_are_not_copied(tmp_path):
    released = [json.loads(line) for line in EUREKA.read_text().splitlines()]
    assert all(r["llm_as_judge_eval"]["true_false"] is False for r in released)
    rows = score_released(
        "lmms-eval", "distract-bench", DB / "questions.jsonl", EUREKA, tmp_path / "x.csv"
    )
    assert sum(r["correct"] for r in rows) == 10


def test_lmms_eval_resps_fallback_missing_response_and_bad_ids(tmp_path):
    qs = load_questions("distract-bench", DB / "questions.jsonl")
    path = tmp_path / "s.jsonl"
    lines = [
        {"doc_id": 1, "filtered_resps": [], "resps": [["Answer: B", "Answer: C"]]},
        {"doc_id": 2, "filtered_resps": [["<think>hmm</think>The answer is C."]]},
        {"doc_id": 3},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    rows = import_lmms_eval(path, "distract-bench", qs, "m", "clean")
    assert rows[0].raw_text == "Answer: B"
    assert (rows[1].thinking, rows[1].answer_text) == ("hmm", "The answer is C.")
    assert rows[2].error and rows[2].finish_reason == "error"

    path.write_text(json.dumps({"doc_id": 99, "filtered_resps": "B"}) + "\n")
    with pytest.raises(ValueError, match="'99'"):
        import_lmms_eval(path, "distract-bench", qs, "m", "clean")
    path.write_text((json.dumps({"doc_id": 1, "filtered_resps": "B"}) + "\n") * 2)
    with pytest.raises(ValueError, match="more than one result"):
        import_lmms_eval(path, "distract-bench", qs, "m", "clean")
    path.write_text(json.dumps({"filtered_resps": "B"}) + "\n")
    with pytest.raises(ValueError, match="'doc_id'"):
        import_lmms_eval(path, "distract-bench", qs, "m", "clean")


# --------------------------------------------------------------------------- MathVista (lmms-eval)

MATHVISTA_ROWS = {
    "1": {
        "pid": "1",
        "question": "What fraction of the shape is blue?",
        "image": "images/1.jpg",
        "choices": ["3/11", "8/11", "6/11", "3/5"],
        "unit": None,
        "precision": None,
        "answer": "8/11",
        "question_type": "multi_choice",
        "answer_type": "text",
        "metadata": {"split": "testmini"},
        "query": "...",
    },
    "2": {
        "pid": "2",
        "question": "How much money does Luca need?",
        "image": "images/2.jpg",
        "choices": None,
        "unit": "$",
        "precision": 2.0,
        "answer": "1.45",
        "question_type": "free_form",
        "answer_type": "float",
        "metadata": {"split": "testmini"},
        "query": "...",
    },
}


def test_mathvista_released_with_nested_id(tmp_path):
    qpath = tmp_path / "testmini.json"
    qpath.write_text(json.dumps(MATHVISTA_ROWS))
    spath = tmp_path / "m.samples.jsonl"
    recs = [
        {
            "doc_id": 0,
            "filtered_resps": ["The correct answer is (B) 8/11."],
            "llm_as_judge_eval": {"question_id": "1", "true_false": False},
        },
        {
            "doc_id": 1,
            "filtered_resps": ["Luca needs $1.50."],
            "llm_as_judge_eval": {"question_id": "2", "true_false": True},
        },
    ]
    spath.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    rows = score_released(
        "lmms-eval",
        "mathvista",
        qpath,
        spath,
        tmp_path / "o.csv",
        id_field="llm_as_judge_eval.question_id",
    )
    assert [(r["sample_id"], r["prediction"], r["correct"]) for r in rows] == [
        ("1", "8/11", 1),
        ("2", "1.5", 0),
    ]
    assert rows[0]["model"] == "m"


# --------------------------------------------------------------------------- VLMEvalKit


def mmstar_rows():
    return [
        {
            "index": i,
            "question": f"Which animal? {i}\nOptions: A: cat, B: dog, C: bird, D: fish",
            "answer": ans,
            "category": "coarse perception",
            "l2_category": "image scene",
            "meta_info": {"source": "x"},
        }
        for i, ans in enumerate(["B", "C", "A"])
    ]


def test_import_vlmevalkit_tsv_and_csv(tmp_path):
    qpath = tmp_path / "mmstar.jsonl"
    qpath.write_text("\n".join(json.dumps(r) for r in mmstar_rows()) + "\n")
    header = "index\tquestion\tanswer\tA\tB\tC\tD\tcategory\tprediction\n"
    body = (
        "0\tWhich animal? 0\tB\tcat\tdog\tbird\tfish\tx\tThe answer is (B).\n"
        "1\tWhich animal? 1\tC\tcat\tdog\tbird\tfish\tx\tA\n"
        "2\tWhich animal? 2\tA\tcat\tdog\tbird\tfish\tx\t\n"
    )
    tsv = tmp_path / "Model_MMStar.tsv"
    tsv.write_text(header + body)
    rows = score_released("vlmevalkit", "mmstar", qpath, tsv, tmp_path / "o.csv")
    assert [(r["sample_id"], r["prediction"], r["correct"]) for r in rows] == [
        ("0", "B", 1),
        ("1", "A", 0),
        ("2", None, 0),
    ]
    assert rows[2]["error"] == "the released row holds no prediction"
    assert rows[0]["model"] == "Model_MMStar"

    qs = load_questions("mmstar", qpath)
    csv_path = tmp_path / "pred.csv"
    csv_path.write_text(
        "index,prediction,thinking\n0,B,checked the dog\n1,Failed to obtain answer via API.,\n"
    )
    out = import_vlmevalkit(csv_path, "mmstar", qs, "m", "clean")
    assert (out[0].answer_text, out[0].thinking, out[0].source) == (
        "B",
        "checked the dog",
        "vlmevalkit",
    )
    assert out[1].error and out[1].error.startswith("VLMEvalKit: Failed to obtain answer")


def test_vlmevalkit_uses_id_column_for_mmmu(tmp_path):
    rows = [
        {
            "id": "validation_Art_1",
            "question": "Which painting shows <image 1>?",
            "options": "['the first', 'the second']",
            "answer": "B",
            "question_type": "multiple-choice",
            "img_type": "['Paintings']",
            "topic_difficulty": "Easy",
            "subfield": "Art",
            "explanation": "",
        },
        {
            "id": "validation_Art_2",
            "question": "Compare <image 1> and <image 2>: how many figures in total?",
            "options": "[]",
            "answer": "7",
            "question_type": "open",
            "img_type": "['Paintings']",
            "topic_difficulty": "Hard",
            "subfield": "Art",
            "explanation": "",
        },
    ]
    qpath = tmp_path / "mmmu.jsonl"
    qpath.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    qs = load_questions("mmmu", qpath)
    assert qs["validation_Art_2"].meta["image_numbers"] == [1, 2]
    assert qs["validation_Art_1"].images == []
    pred = tmp_path / "p.tsv"
    pred.write_text(
        "index\tid\tprediction\n"
        "0\tvalidation_Art_1\tB\n"
        "1\tvalidation_Art_2\tThere are 7 figures in total.\n"
    )
    rows_out = score_released("vlmevalkit", "mmmu", qpath, pred, tmp_path / "o.csv")
    assert [(r["sample_id"], r["correct"]) for r in rows_out] == [
        ("validation_Art_1", 1),
        ("validation_Art_2", 1),
    ]


def test_questions_without_images_for_hallusionbench():
    row = {
        "category": "VD",
        "subcategory": "illusion",
        "visual_input": "1",
        "set_id": "0",
        "figure_id": "0",
        "sample_note": "",
        "question_id": "0",
        "question": "Is the left line longer?",
        "gt_answer_details": "",
        "gt_answer": "0",
        "filename": "x.png",
    }
    qs = samples_from_rows("hallusionbench", [row])
    ((sid, s),) = qs.items()
    assert sid == "VD_illusion_0_0_0" and s.answer == "no" and s.images == []


def test_bad_inputs_are_named(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_questions("mmstar", tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="unknown dataset adapter"):
        load_questions("nope", tmp_path)
    bad = [{"index": 0, "question": "Q? Options: A: x, B: y", "answer": "7"}]
    with pytest.raises(ValueError, match="row 0"):
        samples_from_rows("mmstar", bad)
    qpath = tmp_path / "q.jsonl"
    qpath.write_text(json.dumps(mmstar_rows()[0]) + "\n")
    pred = tmp_path / "p.tsv"
    pred.write_text("index\tanswer\n0\tB\n")
    with pytest.raises(ValueError, match="no 'prediction' column"):
        score_released("vlmevalkit", "mmstar", qpath, pred, tmp_path / "o.csv")
    with pytest.raises(ValueError, match="unknown released format"):
        score_released("harness", "mmstar", qpath, pred, tmp_path / "o.csv")


def test_xlsx_needs_openpyxl(tmp_path):
    try:
        import openpyxl  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("openpyxl is installed: xlsx is read")
    qs = samples_from_rows("mmstar", mmstar_rows())
    path = tmp_path / "p.xlsx"
    path.write_bytes(b"PK")
    with pytest.raises(ValueError, match="openpyxl"):
        import_vlmevalkit(path, "mmstar", qs, "m", "clean")


def test_distract_bench_mathvista_style_row(tmp_path):
    from vlmrobust.core.prompts import build_prompt
    from vlmrobust.core.records import Variant

    row = {
        "final_id": "7",
        "image": "images/7.png",
        "question": "What fraction of the shape is blue?",
        "options": ["3/11", "8/11", "6/11"],
        "answer": "8/11",
        "question_type": "multi_choice",
        "answer_type": "text",
        "precision": None,
        "unit": None,
    }
    (tmp_path / "questions.jsonl").write_text(json.dumps(row) + "\n")
    qs = load_questions("distract-bench", tmp_path / "questions.jsonl")
    s = qs["7"]
    assert (s.answer_type, s.meta["source_style"]) == ("text", "mathvista")
    v = Variant(
        s.sample_id, s.sample_id, s.dataset, "distracted", "edit", ["d.png"], [], s.question
    )
    assert build_prompt(s, v, "distract-open").text == (
        "Question: What fraction of the shape is blue?\nChoices:\n(A) 3/11\n(B) 8/11\n(C) 6/11\n"
        "Hint: Please answer the question and provide the correct option letter, e.g., A, B, "
        "C, D, at the end.\nSolution:"
    )
    spath = tmp_path / "m.samples.jsonl"
    spath.write_text(json.dumps({"doc_id": 7, "filtered_resps": "So it is (B)."}) + "\n")
    rows = score_released("lmms-eval", "distract-bench", tmp_path / "questions.jsonl", spath,
                          tmp_path / "o.csv")  # fmt: skip
    assert [(r["prediction"], r["correct"]) for r in rows] == [("8/11", 1)]


def test_score_released_command(tmp_path):
    from vlmrobust.cli import main

    out = tmp_path / "scored.csv"
    argv = ["score-released", "--format", "lmms-eval", "--dataset", "distract-bench"]
    argv += ["--questions", str(DB / "questions.jsonl"), "--samples", str(EUREKA)]
    assert main([*argv, "--out", str(out)]) == 0
    with open(out, newline="", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert [int(r["correct"]) for r in table] == EUREKA_CORRECT
    # --id-field: the released rows' nested question_id instead of doc_id
    nested = tmp_path / "nested.samples.jsonl"
    nested.write_text(json.dumps({"doc_id": 0, "filtered_resps": "B", "meta": {"qid": "1"}}) + "\n")
    argv = ["score-released", "--format", "lmms-eval", "--dataset", "distract-bench"]
    argv += ["--questions", str(DB / "questions.jsonl"), "--samples", str(nested)]
    assert main([*argv, "--id-field", "meta.qid", "--out", str(out)]) == 0
    with open(out, newline="", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert [(r["sample_id"], r["correct"]) for r in table] == [("1", "1")]


# --------------------------------------------------------------------------- the reviewers' path


def test_score_released_command_prints_accuracy_failures_and_n(tmp_path, capsys):
    from vlmrobust.cli import main

    argv = ["score-released", "--format", "lmms-eval", "--dataset", "distract-bench"]
    argv += ["--questions", str(DB / "questions.jsonl"), "--samples", str(EUREKA)]
    assert main([*argv, "--out", str(tmp_path / "s.csv")]) == 0
    printed = capsys.readouterr().out
    assert "N = 12;" in printed
    assert "accuracy 83.3% (10/12)" in printed
    assert "extraction failures 0 (0.0%)" in printed
    # a response no rule can read is an extraction failure, counted
    blank = tmp_path / "blank.samples.jsonl"
    rows = [json.loads(line) for line in EUREKA.read_text().splitlines()]
    rows[0]["filtered_resps"] = "I cannot tell from this image."
    blank.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv[-1] = str(blank)
    assert main([*argv, "--out", str(tmp_path / "b.csv")]) == 0
    printed = capsys.readouterr().out
    assert "accuracy 75.0% (9/12)" in printed and "extraction failures 1 (8.3%)" in printed


def _option_text_folder(tmp_path):
    """The 12-row slice plus the released rows 29, 150, 385 (answer = the option's text,
    no question_type), as one questions.jsonl; no images."""
    folder = tmp_path / "distract-bench"
    folder.mkdir()
    rows = (DB / "questions.jsonl").read_text() + (DB / "option_text_answers.jsonl").read_text()
    (folder / "questions.jsonl").write_text(rows)
    (folder / "edit_instructions.jsonl").write_text((DB / "edit_instructions.jsonl").read_text())
    return folder


def test_option_text_answers_are_read_as_that_option(tmp_path):
    qs = load_questions("distract-bench", _option_text_folder(tmp_path) / "questions.jsonl")
    assert len(qs) == 15
    got = {k: (qs[k].answer, qs[k].answer_type, qs[k].meta["answer_from_option_text"])
           for k in ("29", "150", "385")}  # fmt: skip
    assert got == {
        "29": ("A", "letter", "Yes"),
        "150": ("C", "letter", "decrease"),
        "385": ("B", "letter", "No"),
    }
    assert "answer_from_option_text" not in qs["1"].meta


def test_released_outputs_for_option_text_rows_import_with_on_bad_row_skip(tmp_path):
    """The stage no longer drops rows 29, 150, 385 (on_bad_row: skip), so a released
    answer to row 29 imports and is scored as multiple choice."""
    from vlmrobust.core.records import read_samples
    from vlmrobust.data import build_samples
    from vlmrobust.score import score_outputs
    from vlmrobust.score.released import import_outputs

    folder = _option_text_folder(tmp_path)
    spec = {"adapter": "distract-bench", "source": "local", "path": str(folder),
            "on_bad_row": "skip", "images": False}  # fmt: skip
    out = tmp_path / "s" / "samples.jsonl"
    report = build_samples("distract-bench", spec, out, tmp_path / "s" / "report.json")
    assert (report["samples_written"], report["skipped"]) == (15, 0)
    assert report["answers_from_option_text"] == ["29", "150", "385"]
    assert any("option's text" in w for w in report["warnings"])
    samples = read_samples(out)
    # a released row for final_id 29 in the release's lmms-eval format
    released = tmp_path / "released.samples.jsonl"
    row = {
        "doc_id": 29,
        "target": "Yes",
        "filtered_resps": "Behind the small metal jet there is one tiny object; left of the "
        "tiny sedan there are two. So the answer is (A) Yes.",
        "token_counts": [{"output_tokens": 31}],
        "input_media": ["data/images/29.png"],
        "llm_as_judge_eval": {"question_id": "29", "answer": "Yes", "true_false": False},
    }
    released.write_text(json.dumps(row) + "\n")
    spec = {"model": "m", "dataset": "distract-bench", "condition": "distracted",
            "prompt": "default", "format": "lmms-eval", "id_field": None,
            "released_labels": False, "references": None}  # fmt: skip
    rows, missing = import_outputs(spec, samples, released)
    assert [r.sample_id for r in rows] == ["distract-bench-29"] and missing == 14
    scored = score_outputs({s.sample_id: s for s in samples}, rows, "distract-bench")
    assert [(s["prediction"], s["correct"]) for s in scored] == [("A", 1)]


def test_released_parse_error_rides_along_as_a_failure(tmp_path):
    from vlmrobust.score.released import import_outputs

    references = tmp_path / "qwen.reference.jsonl"
    lines = (OUT / "Qwen__Qwen2.5-VL-7B-Instruct.reference.jsonl").read_text().splitlines()
    broken = json.loads(lines[1])
    broken["verdict"] = "parse_error"
    lines[1] = json.dumps(broken)
    references.write_text("\n".join(lines) + "\n")
    samples = list(load_questions("distract-bench", DB / "questions.jsonl").values())
    spec = {"model": "qwen", "dataset": "distract-bench", "condition": "distracted",
            "prompt": "default", "format": "lmms-eval", "id_field": None,
            "released_labels": False, "references": str(references)}  # fmt: skip
    rows, _ = import_outputs(spec, samples, QWEN)
    assert rows[1].released == {"verdict": None, "verdict_error": "released parse_error"}
    assert rows[0].released == {"verdict": "no"}


def test_the_config_schema_names_every_import_format():
    """The released formats are named in code (``IMPORT_FORMATS``, one module per format
    under ``score/released/``); the schema's ``imports[].format`` must list the same, so a
    new format cannot be forgotten there (docs/adding-a-benchmark.md)."""
    from vlmrobust.core.config import load_schema
    from vlmrobust.score.released import IMPORT_FORMATS

    entry = load_schema("config")["properties"]["imports"]["items"]["properties"]
    assert entry["format"]["enum"] == list(IMPORT_FORMATS)
