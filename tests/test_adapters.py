"""Dataset adapters: small local folders in each benchmark's real hub schema -> samples.

Every expectation below is written by hand from the rows the test builds (or, for
Distract-Bench, from the real rows in ``tests/fixtures/distract-bench``).
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from vlmrobust.core.benchmarks import BENCHMARKS
from vlmrobust.core.io import read_json, read_jsonl
from vlmrobust.core.records import read_samples
from vlmrobust.data import ADAPTERS, BadRowError, build_samples
from vlmrobust.data.adapters import most_common, parse_inline_options

from .conftest import FIXTURES

DB_FIXTURE = FIXTURES / "distract-bench"

RED, GREEN, BLUE = (255, 0, 0), (0, 255, 0), (0, 0, 255)


# --------------------------------------------------------------------------- helpers


def img_bytes(color=RED, fmt="PNG", size=(8, 6)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format=fmt)
    return buf.getvalue()


def struct(data: bytes | None, path: str | None = None) -> dict:
    """The hub's image struct as stored in parquet."""
    return {"bytes": data, "path": path}


def write_parquet(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = list(dict.fromkeys(k for r in rows for k in r))  # from_pylist reads row 0's keys only
    pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows]), path)
    return path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def spec(adapter: str, path: Path | None = None, **kw) -> dict:
    """A validated dataset config: every key present, defaults filled."""
    s = {
        "adapter": adapter,
        "source": "local" if path is not None else "hub",
        "hub_id": None,
        "hub_config": None,
        "split": None,
        "revision": None,
        "path": str(path) if path is not None else None,
        "limit": None,
        "expected_size": None,
        "on_bad_row": "error",
        "conditions": ["clean"],  # keys the adapters must ignore
        "group": "general",
    }
    s.update(kw)
    return s


def run(tmp_path: Path, name: str, s: dict):
    out = tmp_path / "results" / "samples" / name / "samples.jsonl"
    report = tmp_path / "results" / "samples" / name / "report.json"
    rep = build_samples(name, s, out, report)
    samples = {x.sample_id: x for x in read_samples(out)}
    assert read_json(report) == rep
    record = BENCHMARKS[s["adapter"]]  # the samples are what the benchmark's record says
    for x in samples.values():
        assert x.answer_type in record.answer_types, x.sample_id
        assert {"source_id", *record.meta} <= set(x.meta), x.sample_id
    return samples, rep, out


def color_of(path: str) -> tuple[int, int, int]:
    with Image.open(path) as im:
        return im.convert("RGB").getpixel((0, 0))


def images_dir(out: Path) -> Path:
    return out.parent / "images"


# --------------------------------------------------------------------------- registry


def test_registry_names_and_defaults():
    # one adapter per benchmark record (a new benchmark needs no edit here)
    assert set(ADAPTERS) == set(BENCHMARKS)
    assert ADAPTERS["visargs"].hub_id == "jiwan-chung/visargs"
    assert (ADAPTERS["mmmu"].hub_id, ADAPTERS["mmmu"].split) == ("lmms-lab/MMMU", "validation")
    assert ADAPTERS["infovqa"].defaults() == {
        "hub_id": "lmms-lab/DocVQA",
        "hub_config": "InfographicVQA",
        "split": "validation",
    }
    assert ADAPTERS["hallusionbench"].split == "image"
    assert ADAPTERS["mmstar"].split == "val"
    assert ADAPTERS["distract-bench"].hub_id == "EthanSun/Distract-Bench"


# --------------------------------------------------------------------------- MMMU


def _mmmu_row(id_, question, options, answer, qtype, **images):
    row = {
        "id": id_,
        "question": question,
        "options": options,
        "explanation": "",
        "img_type": "['Paintings']",
        "answer": answer,
        "topic_difficulty": "Easy",
        "question_type": qtype,
        "subfield": "Art History",
    }
    for n in range(1, 8):
        row[f"image_{n}"] = images.get(f"image_{n}")
    return row


def _mmmu_rows(red_png: bytes, blue_jpg: bytes, green_png: bytes) -> list[dict]:
    """Four MMMU validation rows: two images referenced out of order, an open number
    question, images as options (with a third image nobody references), an open text
    question."""
    return [
        _mmmu_row(
            "validation_Art_1",
            "Compare <image 2> with <image 1>. Which is blue?",
            "['the first', 'the second']",
            "B",
            "multiple-choice",
            image_1=struct(red_png, "a.png"),
            image_2=struct(blue_jpg, "b.jpg"),
        ),
        _mmmu_row(
            "validation_Math_2",
            "<image 1> What is x?",
            "[]",
            "3.5",
            "open",
            image_1=struct(green_png),
        ),
        _mmmu_row(
            "validation_Art_3",
            "Which picture shows a red square?",
            "['<image 1>', '<image 2>', 'neither']",
            "A",
            "multiple-choice",
            image_1=struct(red_png),
            image_2=struct(green_png),
            image_3=struct(blue_jpg),  # present but never referenced: not used
        ),
        _mmmu_row(
            "validation_Geo_4",
            "<image 1> Name the city.",
            "[]",
            "Paris",
            "open",
            image_1=struct(red_png),
        ),
    ]


def test_mmmu(tmp_path):
    red_png, blue_jpg, green_png = img_bytes(RED), img_bytes(BLUE, "JPEG"), img_bytes(GREEN)
    rows = _mmmu_rows(red_png, blue_jpg, green_png)
    folder = tmp_path / "mmmu"
    write_parquet(folder / "data" / "validation-00000-of-00001.parquet", rows)
    # another split beside it must not be read
    write_parquet(
        folder / "data" / "dev-00000-of-00001.parquet",
        [_mmmu_row("dev_x", "q <image 1>", "[]", "1", "open", image_1=struct(red_png))],
    )

    samples, rep, out = run(tmp_path, "mmmu", spec("mmmu", folder))
    assert list(samples) == [
        "mmmu-validation_Art_1",
        "mmmu-validation_Math_2",
        "mmmu-validation_Art_3",
        "mmmu-validation_Geo_4",
    ]
    s = samples["mmmu-validation_Art_1"]
    assert s.dataset == "mmmu"
    assert s.question == "Compare <image 2> with <image 1>. Which is blue?"
    assert (s.answer, s.answer_type, s.choices) == ("B", "letter", ["the first", "the second"])
    img_dir = images_dir(out)
    # image_1 first, image_2 second; the JPEG keeps its bytes and its suffix
    assert s.images == [
        str(img_dir / "mmmu-validation_Art_1_0.png"),
        str(img_dir / "mmmu-validation_Art_1_1.jpg"),
    ]
    assert color_of(s.images[0]) == RED
    assert Path(s.images[1]).read_bytes() == blue_jpg
    assert s.meta["image_numbers"] == [1, 2]
    assert s.meta["source_id"] == "validation_Art_1"
    assert s.meta["question_type"] == "multiple-choice"
    assert s.meta["subfield"] == "Art History"
    assert s.meta["img_type"] == ["Paintings"]
    assert s.meta["topic_difficulty"] == "Easy"

    s = samples["mmmu-validation_Math_2"]
    assert (s.answer, s.answer_type, s.choices) == ("3.5", "number", [])
    assert len(s.images) == 1 and color_of(s.images[0]) == GREEN

    s = samples["mmmu-validation_Art_3"]
    assert (s.answer, s.answer_type) == ("A", "letter")
    assert s.choices == ["<image 1>", "<image 2>", "neither"]
    assert [color_of(p) for p in s.images] == [RED, GREEN]
    assert s.meta["image_numbers"] == [1, 2]

    s = samples["mmmu-validation_Geo_4"]
    assert (s.answer, s.answer_type) == ("Paris", "text")

    assert rep["rows_read"] == 4 and rep["samples_written"] == 4 and rep["skipped"] == 0
    assert rep["files"] == ["data/validation-00000-of-00001.parquet"]
    assert rep["answer_types"] == {"letter": 2, "number": 1, "text": 1}
    assert sorted(p.name for p in img_dir.iterdir()) == sorted(
        Path(p).name for x in samples.values() for p in x.images
    )


def test_mmmu_bad_options_and_missing_referenced_image(tmp_path):
    rows = [
        _mmmu_row(
            "v_1",
            "<image 1> ok?",
            "['yes', 'no']",
            "A",
            "multiple-choice",
            image_1=struct(img_bytes()),
        ),
        _mmmu_row(
            "v_2",
            "<image 1> broken",
            "['yes', 'no'",
            "A",
            "multiple-choice",
            image_1=struct(img_bytes()),
        ),
        _mmmu_row("v_3", "<image 1> and <image 2>", "[]", "1", "open", image_1=struct(img_bytes())),
    ]
    folder = tmp_path / "mmmu"
    write_parquet(folder / "validation-00000-of-00001.parquet", rows)
    with pytest.raises(
        BadRowError, match=r"dataset 'mmmu', row 1 \(id 'v_2'\): options could not be parsed"
    ):
        run(tmp_path, "mmmu", spec("mmmu", folder))
    samples, rep, _ = run(tmp_path, "mmmu", spec("mmmu", folder, on_bad_row="skip"))
    assert list(samples) == ["mmmu-v_1"]
    assert rep["skipped"] == 2
    assert [(r["row"], r["id"]) for r in rep["skipped_rows"]] == [(1, "v_2"), (2, "v_3")]
    assert "<image 2>" in rep["skipped_rows"][1]["reason"]


# --------------------------------------------------------------------------- MathVista


def _mv_row(
    pid, question, qtype, atype, answer, choices=None, precision=None, decoded=None, image=None
):
    return {
        "pid": pid,
        "question": question,
        "image": image or f"images/{pid}.jpg",
        "decoded_image": decoded,
        "choices": choices,
        "unit": None,
        "precision": precision,
        "answer": answer,
        "question_type": qtype,
        "answer_type": atype,
        "metadata": {
            "category": "math-targeted-vqa",
            "context": "bar chart",
            "grade": "daily life",
            "img_height": 6,
            "img_width": 8,
            "language": "english",
            "skills": ["arithmetic reasoning"],
            "source": "ChartQA",
            "split": "testmini",
            "task": "figure question answering",
        },
        "query": f"Hint: ...\nQuestion: {question}",
    }


def test_mathvista_parquet(tmp_path):
    jpg = img_bytes(BLUE, "JPEG")
    rows = [
        _mv_row(
            "1",
            "Which bar is tallest?",
            "multi_choice",
            "text",
            "green",
            ["red", "green", "blue"],
            decoded=struct(jpg),
        ),
        _mv_row(
            "2", "How many bars?", "free_form", "integer", "12", decoded=struct(img_bytes(RED))
        ),
        _mv_row(
            "3",
            "What is the ratio?",
            "free_form",
            "float",
            "1.5",
            precision=1.0,
            decoded=struct(img_bytes(GREEN)),
        ),
        _mv_row(
            "4", "List the values.", "free_form", "list", "[1, 2]", decoded=struct(img_bytes(RED))
        ),
    ]
    folder = tmp_path / "mathvista"
    write_parquet(folder / "data" / "testmini-00000-of-00001-725687bf7a18d64b.parquet", rows)
    write_parquet(
        folder / "data" / "test-00000-of-00002-aaaa.parquet",
        [_mv_row("99", "q", "free_form", "integer", "1", decoded=struct(img_bytes()))],
    )

    samples, rep, out = run(tmp_path, "mathvista", spec("mathvista", folder))
    assert list(samples) == ["mathvista-1", "mathvista-2", "mathvista-3", "mathvista-4"]
    s = samples["mathvista-1"]
    # multiple choice: the answer is the option TEXT
    assert (s.answer, s.answer_type, s.choices) == ("green", "text", ["red", "green", "blue"])
    assert s.images == [str(images_dir(out) / "mathvista-1_0.jpg")]
    assert Path(s.images[0]).read_bytes() == jpg
    assert s.precision is None
    assert s.meta["question_type"] == "multi_choice"
    assert s.meta["answer_type"] == "text"
    assert s.meta["metadata"]["source"] == "ChartQA"
    assert s.meta["query"] == "Hint: ...\nQuestion: Which bar is tallest?"
    assert s.meta["source_id"] == "1"
    assert (samples["mathvista-2"].answer, samples["mathvista-2"].answer_type) == ("12", "number")
    s3 = samples["mathvista-3"]
    assert (s3.answer, s3.answer_type, s3.precision) == ("1.5", "number", 1)
    assert s3.meta["precision"] == 1.0
    assert (samples["mathvista-4"].answer, samples["mathvista-4"].answer_type) == ("[1, 2]", "list")
    assert rep["answer_types"] == {"list": 1, "number": 2, "text": 1}
    assert rep["rows_read"] == 4


def test_mathvista_jsonl_image_paths_and_bad_choice(tmp_path):
    folder = tmp_path / "mv"
    (folder / "images").mkdir(parents=True)
    (folder / "images" / "7.png").write_bytes(img_bytes(GREEN))
    (folder / "images" / "8.png").write_bytes(img_bytes(RED))
    write_jsonl(
        folder / "testmini.jsonl",
        [
            _mv_row(
                "7",
                "Is it green?",
                "multi_choice",
                "text",
                "Yes",
                ["Yes", "No"],
                image="images/7.png",
            ),
            _mv_row(
                "8", "Pick", "multi_choice", "text", "maybe", ["Yes", "No"], image="images/8.png"
            ),
        ],
    )
    with pytest.raises(
        BadRowError, match=r"dataset 'mv', row 1 \(pid '8'\): multi_choice answer 'maybe'"
    ):
        run(tmp_path, "mv", spec("mathvista", folder))
    samples, rep, _ = run(tmp_path, "mv", spec("mathvista", folder, on_bad_row="skip"))
    assert list(samples) == ["mv-7"]
    assert color_of(samples["mv-7"].images[0]) == GREEN
    assert rep["skipped_rows"][0]["id"] == "8"


# --------------------------------------------------------------------------- MathVision


def test_mathvision_jsonl(tmp_path):
    folder = tmp_path / "mathvision"
    (folder / "images").mkdir(parents=True)
    for i, c in ((1, RED), (2, GREEN), (3, BLUE)):
        (folder / "images" / f"{i}.jpg").write_bytes(img_bytes(c, "JPEG"))
    base = {"solution": None, "level": 2, "subject": "algebra"}
    write_jsonl(
        folder / "testmini.jsonl",
        [
            {
                "id": "1",
                "question": "How many? <image1>",
                "options": ["1", "2", "3", "4", "5"],
                "image": "images/1.jpg",
                "answer": "C",
                **base,
            },
            {
                "id": "2",
                "question": "Sum? <image1>",
                "options": [],
                "image": "images/2.jpg",
                "answer": "12",
                **base,
                "level": 5,
            },
            {
                "id": "3",
                "question": "Ratio? <image1>",
                "options": [],
                "image": "images/3.jpg",
                "answer": "$\\frac{1}{2}$",
                **base,
                "solution": "Half.",
            },
        ],
    )
    write_jsonl(
        folder / "test.jsonl",
        [{"id": "999", "question": "x", "options": [], "image": "images/1.jpg", "answer": "1"}],
    )
    samples, rep, _ = run(tmp_path, "mathvision", spec("mathvision", folder))
    assert list(samples) == ["mathvision-1", "mathvision-2", "mathvision-3"]
    s = samples["mathvision-1"]
    assert (s.answer, s.answer_type, s.choices) == ("C", "letter", ["1", "2", "3", "4", "5"])
    assert s.question == "How many? <image1>"
    assert s.meta["level"] == 2 and s.meta["subject"] == "algebra"
    assert Path(s.images[0]).read_bytes() == (folder / "images" / "1.jpg").read_bytes()
    s = samples["mathvision-2"]
    assert (s.answer, s.answer_type, s.choices, s.meta["level"]) == ("12", "number", [], 5)
    s = samples["mathvision-3"]
    assert (s.answer, s.answer_type, s.meta["solution"]) == ("$\\frac{1}{2}$", "text", "Half.")
    assert rep["files"] == ["testmini.jsonl"]


# --------------------------------------------------------------------------- ChartQA


def test_chartqa_and_unreadable_image_bytes(tmp_path):
    folder = tmp_path / "chartqa"
    rows = [
        {
            "type": "human_test",
            "question": "What is the peak?",
            "answer": "42",
            "image": struct(img_bytes(RED)),
        },
        {
            "type": "augmented",
            "question": "Is it rising?",
            "answer": "Yes",
            "image": struct(img_bytes(GREEN)),
        },
    ]
    write_parquet(folder / "test-00000-of-00001.parquet", rows)
    samples, rep, _ = run(tmp_path, "chartqa", spec("chartqa", folder))
    assert list(samples) == ["chartqa-0", "chartqa-1"]
    assert (samples["chartqa-0"].answer, samples["chartqa-0"].answer_type) == ("42", "number")
    assert (samples["chartqa-1"].answer, samples["chartqa-1"].answer_type) == ("Yes", "text")
    assert samples["chartqa-1"].meta == {"source_id": "1", "type": "augmented"}

    # truncated PNG bytes: the row is bad, and nothing of the run is written
    bad = img_bytes(BLUE)[:30]
    write_parquet(
        folder / "test-00000-of-00001.parquet",
        [rows[0], {**rows[1], "image": struct(bad)}, rows[0]],
    )
    dest = tmp_path / "fresh"
    with pytest.raises(BadRowError) as err:
        build_samples(
            "chartqa", spec("chartqa", folder), dest / "samples.jsonl", dest / "report.json"
        )
    assert "dataset 'chartqa', row 1 (row '1'): image could not be decoded" in str(err.value)
    assert sorted(p.name for p in dest.iterdir()) == []  # no samples, report, images or temp dir

    s = spec("chartqa", folder, on_bad_row="skip", expected_size=3)
    rep = build_samples("chartqa", s, dest / "samples.jsonl", dest / "report.json")
    assert rep["samples_written"] == 2 and rep["skipped"] == 1 and rep["rows_read"] == 3
    assert rep["skipped_rows"][0]["row"] == 1 and rep["skipped_rows"][0]["id"] == "1"
    assert rep["skipped_rows"][0]["reason"].startswith("image could not be decoded")
    assert any("expected 3 samples, wrote 2" in w for w in rep["warnings"])
    assert [x.sample_id for x in read_samples(dest / "samples.jsonl")] == ["chartqa-0", "chartqa-2"]
    assert sorted(p.name for p in dest.iterdir()) == ["images", "report.json", "samples.jsonl"]


# --------------------------------------------------------------------------- HallusionBench


def _hb_row(set_id, figure_id, question_id, gt, image, category="VS", subcategory="chart"):
    return {
        "category": category,
        "subcategory": subcategory,
        "visual_input": "1",
        "set_id": str(set_id),
        "figure_id": str(figure_id),
        "sample_note": "note",
        "question_id": str(question_id),
        "question": f"Is statement {question_id} true?",
        "gt_answer_details": "details",
        "gt_answer": gt,
        "filename": f"./{category}/{subcategory}/{set_id}_{figure_id}.png",
        "image": image,
    }


def test_hallusionbench_yes_no_and_skip(tmp_path):
    folder = tmp_path / "hb"
    rows = [
        _hb_row(0, 0, 0, "1", struct(img_bytes(RED))),
        _hb_row(0, 1, 0, "0", struct(img_bytes(GREEN))),
        _hb_row(1, 0, 2, "1", None),  # no image: a bad row
    ]
    write_parquet(folder / "data" / "image-00000-of-00001.parquet", rows)
    write_parquet(
        folder / "data" / "non_image-00000-of-00001.parquet", [_hb_row(5, 0, 0, "1", None)]
    )

    with pytest.raises(
        BadRowError, match=r"dataset 'hb', row 2 \(id 'VS_chart_1_0_2'\): image is missing"
    ):
        run(tmp_path, "hb", spec("hallusionbench", folder))

    samples, rep, _ = run(
        tmp_path, "hb", spec("hallusionbench", folder, on_bad_row="skip", expected_size=3)
    )
    assert list(samples) == ["hb-VS_chart_0_0_0", "hb-VS_chart_0_1_0"]
    a, b = samples.values()
    assert (a.answer, a.answer_type, b.answer, b.answer_type) == ("yes", "yes/no", "no", "yes/no")
    assert a.meta == {
        "source_id": "VS_chart_0_0_0",
        "category": "VS",
        "subcategory": "chart",
        "set_id": "0",
        "figure_id": "0",
        "question_id": "0",
        "sample_note": "note",
        "visual_input": "1",
        "gt_answer_details": "details",
        "filename": "./VS/chart/0_0.png",
    }
    assert rep["skipped"] == 1
    assert rep["skipped_rows"] == [{"row": 2, "id": "VS_chart_1_0_2", "reason": "image is missing"}]
    assert rep["expected_size"] == 3 and rep["warnings"]
    assert rep["answer_types"] == {"yes/no": 2}


# --------------------------------------------------------------------------- InfoVQA


def test_infovqa_config_folder(tmp_path):
    folder = tmp_path / "docvqa"
    row = {
        "questionId": 98765,
        "question": "What share of users are mobile?",
        "answers": ["12%", "12 percent"],
        "answer_type": ["single span"],
        "image": struct(img_bytes(RED, "JPEG")),
        "image_url": "https://example.org/1.jpeg",
        "operation/reasoning": None,
        "ocr": "[]",
        "data_split": "val",
    }
    write_parquet(folder / "InfographicVQA" / "validation-00000-of-00001.parquet", [row])
    # the DocVQA config of the same hub repository must not be read
    write_parquet(
        folder / "DocVQA" / "validation-00000-of-00001.parquet", [{**row, "questionId": 1}]
    )
    samples, rep, _ = run(tmp_path, "infovqa", spec("infovqa", folder))
    assert list(samples) == ["infovqa-98765"]
    s = samples["infovqa-98765"]
    assert (s.answer, s.answer_type) == ("12%", "text")
    assert s.meta["answers"] == ["12%", "12 percent"]
    assert s.meta["answer_types"] == ["single span"]
    assert s.meta["source_id"] == "98765"
    assert s.images[0].endswith("infovqa-98765_0.jpg")
    assert rep["files"] == ["InfographicVQA/validation-00000-of-00001.parquet"]


# --------------------------------------------------------------------------- MMStar


def test_mmstar_options_parsed_from_question(tmp_path):
    q0 = (
        "Which option describe the object relationship in the image correctly?\n"
        "Options: A: The suitcase is on the book., B: The suitcase is beneath the cat., "
        "C: The suitcase is beneath the bed., D: The suitcase is beneath the book."
    )
    q1 = "Hint: answer with a letter.\nQuestion: How many cubes?\nChoices:\n(A) 3\n(B) 4"
    q2 = "Which colors appear?\nOptions: A: red, green and blue, B: black"
    q3 = "Pick the right letter for the scene."
    rows = [
        {
            "index": i,
            "question": q,
            "image": struct(img_bytes()),
            "answer": a,
            "category": "coarse perception",
            "l2_category": "image scene",
            "meta_info": {"source": "MMBench", "split": "val", "image_path": "x.png"},
        }
        for i, (q, a) in enumerate([(q0, "A"), (q1, "B"), (q2, "A"), (q3, "C")])
    ]
    folder = tmp_path / "mmstar"
    write_parquet(folder / "val-00000-of-00001.parquet", rows)
    samples, rep, _ = run(tmp_path, "mmstar", spec("mmstar", folder))
    s0, s1, s2, s3 = (samples[f"mmstar-{i}"] for i in range(4))
    assert s0.question == "Which option describe the object relationship in the image correctly?"
    assert s0.choices == [
        "The suitcase is on the book.",
        "The suitcase is beneath the cat.",
        "The suitcase is beneath the bed.",
        "The suitcase is beneath the book.",
    ]
    assert (s0.answer, s0.answer_type) == ("A", "letter")
    assert s0.meta["raw_question"] == q0 and s0.meta["options_parsed"] is True
    assert s0.meta["category"] == "coarse perception" and s0.meta["l2_category"] == "image scene"
    assert s0.meta["index"] == 0 and s0.meta["source_id"] == "0"
    assert (s1.question, s1.choices, s1.answer) == (
        "Hint: answer with a letter.\nQuestion: How many cubes?",
        ["3", "4"],
        "B",
    )
    assert s2.choices == ["red, green and blue", "black"]
    assert (s3.question, s3.choices, s3.answer, s3.meta["options_parsed"]) == (q3, [], "C", False)
    assert rep["answer_types"] == {"letter": 4}


def test_parse_inline_options_edge_cases():
    assert parse_inline_options("No options here") is None
    assert parse_inline_options("Q?\nOptions: A: only one") is None
    assert parse_inline_options("Q?\nOptions: A: 2:30, B: 3:45") == ("Q?", ["2:30", "3:45"])


# --------------------------------------------------------------------------- TextVQA


def test_textvqa_most_common_answer(tmp_path):
    rows = [
        {
            "image_id": "0054c91397f2fe05",
            "question_id": 34602,
            "question": "what does the sign say?",
            "question_tokens": ["what"],
            "image": struct(img_bytes(RED)),
            "image_width": 8,
            "image_height": 6,
            "flickr_original_url": "",
            "flickr_300k_url": "",
            "answers": ["stop"] * 3 + ["STOP"] * 4 + ["halt"] * 3,
            "image_classes": ["Sign"],
            "set_name": "val",
            "ocr_tokens": ["STOP"],
        },
        {
            "image_id": "00685bc495504d61",
            "question_id": 34603,
            "question": "which brand?",
            "question_tokens": ["which"],
            "image": struct(img_bytes(GREEN)),
            "image_width": 8,
            "image_height": 6,
            "flickr_original_url": "",
            "flickr_300k_url": "",
            "answers": ["nokia", "sony", "sony", "nokia", " nokia "],
            "image_classes": [],
            "set_name": "val",
            "ocr_tokens": [],
        },
    ]
    folder = tmp_path / "textvqa"
    write_parquet(folder / "data" / "validation-00000-of-00003.parquet", rows)
    samples, _, _ = run(tmp_path, "textvqa", spec("textvqa", folder))
    s = samples["textvqa-34602"]
    assert (s.answer, s.answer_type) == ("STOP", "text")
    assert s.meta["answers"] == ["stop"] * 3 + ["STOP"] * 4 + ["halt"] * 3
    assert s.meta["image_id"] == "0054c91397f2fe05" and s.meta["ocr_tokens"] == ["STOP"]
    # whitespace is stripped before counting: nokia 3, sony 2
    assert samples["textvqa-34603"].answer == "nokia"
    assert most_common(["a", "b", "b", "a"]) == "a"


# --------------------------------------------------------------------------- Distract-Bench


def _distract_folder(tmp_path: Path) -> Path:
    """The real 12-row slice plus tiny images: distracted red, clean green."""
    folder = tmp_path / "distract-bench"
    (folder / "images").mkdir(parents=True)
    (folder / "original_images").mkdir()
    shutil.copy(DB_FIXTURE / "questions.jsonl", folder)
    shutil.copy(DB_FIXTURE / "edit_instructions.jsonl", folder)
    for row in read_jsonl(DB_FIXTURE / "questions.jsonl"):
        name = Path(row["image"]).name
        (folder / "images" / name).write_bytes(img_bytes(RED))
        (folder / "original_images" / name).write_bytes(img_bytes(GREEN))
    return folder


def test_distract_bench_local_jsonl(tmp_path):
    folder = _distract_folder(tmp_path)
    samples, rep, out = run(tmp_path, "distract-bench", spec("distract-bench", folder))
    assert list(samples) == [f"distract-bench-{i}" for i in range(1, 13)]
    edits = {r["final_id"]: r["edit"] for r in read_jsonl(DB_FIXTURE / "edit_instructions.jsonl")}

    s = samples["distract-bench-1"]
    assert s.question.startswith("In triangle $A B C$ (see picture)")
    assert (s.answer, s.answer_type) == ("B", "letter")
    assert s.choices == [
        "$10^{\\circ}$",
        "$15^{\\circ}$",
        "$20^{\\circ}$",
        "$25^{\\circ}$",
        "$30^{\\circ}$",
    ]
    # the sample's image is the clean original; the distracted one is kept in meta
    assert s.images == [str(images_dir(out) / "distract-bench-1_0.png")]
    assert color_of(s.images[0]) == GREEN
    assert s.meta["distracted_images"] == [
        str(images_dir(out) / "distract-bench-1_distracted_0.png")
    ]
    assert color_of(s.meta["distracted_images"][0]) == RED
    assert s.meta["edit"] == edits["1"]
    assert s.meta["edit"]["trap_answer"] == "20°"
    assert set(s.meta["edit"]) == {
        "dead_end_description",
        "trap_reasoning_path",
        "trap_answer",
        "edit_instruction",
        "style_constraints",
    }
    assert (s.meta["level"], s.meta["subject"], s.meta["solution"]) == (
        5,
        "metric geometry - angle",
        None,
    )
    assert s.meta["source_id"] == "1"

    assert (samples["distract-bench-6"].answer, samples["distract-bench-6"].answer_type) == (
        "3",
        "number",
    )
    assert samples["distract-bench-6"].choices == []
    s11 = samples["distract-bench-11"]
    assert (s11.answer, s11.answer_type, s11.meta["subject"]) == (
        "(3,-4)",
        "text",
        "analytic geometry",
    )
    assert s11.meta["solution"].startswith("After reflecting the point $(3,4)$")
    assert rep["answer_types"] == {"letter": 7, "number": 4, "text": 1}
    assert rep["images_written"] == 24
    assert rep["warnings"] == []


def test_distract_bench_missing_clean_image_and_limit(tmp_path):
    folder = _distract_folder(tmp_path)
    (folder / "original_images" / "4.png").unlink()
    with pytest.raises(BadRowError) as err:
        run(tmp_path, "distract-bench", spec("distract-bench", folder))
    msg = str(err.value)
    assert msg.startswith("dataset 'distract-bench', row 3 (final_id '4'): image file not found")
    assert "original_images/4.png" in msg

    # limit keeps the first N usable rows; the bad row 4 is skipped and counted
    s = spec("distract-bench", folder, limit=4, on_bad_row="skip")
    samples, rep, out = run(tmp_path, "distract-bench", s)
    assert list(samples) == [f"distract-bench-{i}" for i in (1, 2, 3, 5)]
    assert rep["rows_read"] == 5 and rep["skipped"] == 1 and rep["samples_written"] == 4
    assert len(list(images_dir(out).iterdir())) == 8  # the images folder holds only this run's

    samples, rep, out = run(
        tmp_path, "distract-bench", spec("distract-bench", folder, limit=2, on_bad_row="skip")
    )
    assert list(samples) == ["distract-bench-1", "distract-bench-2"]
    assert rep["rows_read"] == 2 and rep["skipped"] == 0
    assert sorted(p.name for p in images_dir(out).iterdir()) == [
        "distract-bench-1_0.png",
        "distract-bench-1_distracted_0.png",
        "distract-bench-2_0.png",
        "distract-bench-2_distracted_0.png",
    ]


# --------------------------------------------------------------------------- hub path


def test_hub_source_through_load_dataset(tmp_path, monkeypatch):
    import datasets
    from datasets import Dataset, Features, List, Value
    from datasets import Image as HFImage

    jpg = img_bytes(BLUE, "JPEG")
    feats = Features(
        {
            "pid": Value("string"),
            "question": Value("string"),
            "image": Value("string"),
            "decoded_image": HFImage(),
            "choices": List(Value("string")),
            "unit": Value("string"),
            "precision": Value("float64"),
            "answer": Value("string"),
            "question_type": Value("string"),
            "answer_type": Value("string"),
            "query": Value("string"),
        }
    )
    ds = Dataset.from_dict(
        {
            "pid": ["1", "2"],
            "question": ["Which?", "How many?"],
            "image": ["images/1.jpg", "images/2.jpg"],
            "decoded_image": [
                {"bytes": jpg, "path": "1.jpg"},
                {"bytes": img_bytes(RED), "path": None},
            ],
            "choices": [["yes", "no"], None],
            "unit": [None, "cm"],
            "precision": [None, 2.0],
            "answer": ["no", "3.14"],
            "question_type": ["multi_choice", "free_form"],
            "answer_type": ["text", "float"],
            "query": ["q1", "q2"],
        },
        features=feats,
    )
    calls = []

    def fake_load_dataset(path, name=None, split=None, revision=None, **kw):
        calls.append((path, name, split, revision))
        return ds

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    samples, rep, _ = run(tmp_path, "mathvista", spec("mathvista", revision="abc123"))
    assert calls == [("AI4Math/MathVista", None, "testmini", "abc123")]
    assert (rep["source"], rep["hub_id"], rep["split"], rep["revision"]) == (
        "hub",
        "AI4Math/MathVista",
        "testmini",
        "abc123",
    )
    s1, s2 = samples["mathvista-1"], samples["mathvista-2"]
    assert (s1.answer, s1.answer_type, s1.choices) == ("no", "text", ["yes", "no"])
    assert Path(s1.images[0]).read_bytes() == jpg  # original JPEG bytes, not re-encoded
    assert (s2.answer, s2.answer_type, s2.precision, s2.meta["unit"]) == ("3.14", "number", 2, "cm")
    assert color_of(s2.images[0]) == RED

    # overrides in the config reach load_dataset
    calls.clear()
    run(tmp_path, "mv2", spec("mathvista", hub_id="me/mirror", hub_config="cfg", split="test"))
    assert calls == [("me/mirror", "cfg", "test", None)]


def test_distract_bench_hub_joined_with_metadata(tmp_path, monkeypatch):
    """Hub rows with only images (no id column) are joined to the JSONL metadata by position."""
    import datasets
    from datasets import Dataset, Features
    from datasets import Image as HFImage

    ds = Dataset.from_dict(
        {
            "image": [
                {"bytes": img_bytes(RED), "path": None},
                {"bytes": img_bytes(RED), "path": None},
            ],
            "original_image": [
                {"bytes": img_bytes(GREEN, "JPEG"), "path": None},
                {"bytes": img_bytes(GREEN), "path": None},
            ],
        },
        features=Features({"image": HFImage(), "original_image": HFImage()}),
    )
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: ds)
    meta_dir = tmp_path / "meta"
    meta_dir.mkdir()
    shutil.copy(DB_FIXTURE / "questions.jsonl", meta_dir)
    shutil.copy(DB_FIXTURE / "edit_instructions.jsonl", meta_dir)
    samples, rep, _ = run(tmp_path, "db", spec("distract-bench", path=str(meta_dir), source="hub"))
    assert list(samples) == ["db-1", "db-2"]
    s = samples["db-2"]
    assert (s.answer, s.answer_type, s.choices) == ("B", "letter", ["A", "B", "C", "D", "E"])
    assert s.meta["edit"]["trap_answer"] == "A (sum 22)"
    assert s.meta["final_id_from_position"] is True
    assert s.images[0].endswith("db-2_0.png") and color_of(s.images[0]) == GREEN
    assert samples["db-1"].images[0].endswith("db-1_0.jpg")
    assert color_of(s.meta["distracted_images"][0]) == RED
    assert rep["hub_id"] == "EthanSun/Distract-Bench" and rep["metadata_path"] == str(meta_dir)


def test_distract_bench_parquet_export(tmp_path):
    folder = tmp_path / "dbp"
    rows = [
        {
            "final_id": "7",
            "question": "What is the middle number?",
            "options": [],
            "answer": "5",
            "image": struct(img_bytes(RED)),
            "original_image": struct(img_bytes(GREEN)),
        },
        {
            "final_id": "9",
            "question": "Who won?",
            "options": ["A", "B"],
            "answer": "A",
            "image": struct(img_bytes(RED)),
            "original_image": None,
        },
        {  # MathVista-derived: the answer is the option text; no edit record
            "final_id": "10",
            "question": "Is the function continuous?",
            "options": ["Yes", "No"],
            "answer": "No",
            "question_type": "multi_choice",
            "answer_type": "text",
            "query": "Hint: ...",
            "image": struct(img_bytes(RED)),
            "original_image": struct(img_bytes(GREEN)),
        },
    ]
    write_parquet(folder / "data" / "test-00000-of-00001.parquet", rows)
    write_jsonl(
        folder / "edit_instructions.jsonl", [{"final_id": "7", "edit": {"trap_answer": "6"}}]
    )
    with pytest.raises(
        BadRowError, match=r"row 1 \(final_id '9'\): original \(clean\) image is missing"
    ):
        run(tmp_path, "dbp", spec("distract-bench", folder))
    samples, rep, _ = run(tmp_path, "dbp", spec("distract-bench", folder, on_bad_row="skip"))
    s = samples["dbp-7"]
    assert (s.answer, s.answer_type, s.meta["edit"]) == ("5", "number", {"trap_answer": "6"})
    assert color_of(s.images[0]) == GREEN and color_of(s.meta["distracted_images"][0]) == RED
    assert (s.meta["source_style"], s.meta["source_id"]) == ("mathvision", "7")
    s = samples["dbp-10"]
    assert (s.answer, s.answer_type, s.choices) == ("No", "text", ["Yes", "No"])
    assert (s.meta["source_style"], s.meta["query"], s.meta["edit"]) == (
        "mathvista",
        "Hint: ...",
        None,
    )
    assert rep["skipped"] == 1
    assert rep["warnings"][-1].startswith("1 sample(s) have no edit record (e.g. dbp-10)")


def test_distract_bench_hub_without_metadata_is_a_bad_row(tmp_path, monkeypatch):
    import datasets
    from datasets import Dataset, Features
    from datasets import Image as HFImage

    png = {"bytes": img_bytes(), "path": None}
    ds = Dataset.from_dict(
        {"image": [png], "original_image": [png]},
        features=Features({"image": HFImage(), "original_image": HFImage()}),
    )
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: ds)
    with pytest.raises(
        BadRowError, match=r"row 0 \(final_id '1'\): question is missing.*questions\.jsonl"
    ):
        run(tmp_path, "db", spec("distract-bench"))


# --------------------------------------------------------------------------- demo


def test_demo_adapter(tmp_path):
    folder = tmp_path / "demo-src"
    (folder / "images").mkdir(parents=True)
    (folder / "images" / "0003.png").write_bytes(img_bytes(BLUE))
    (folder / "images" / "0004.png").write_bytes(img_bytes(RED))
    write_jsonl(
        folder / "rows.jsonl",
        [
            {
                "id": "0003",
                "images": ["images/0003.png"],
                "question": "Which bar is highest?",
                "choices": ["a", "b"],
                "answer": "B",
                "answer_type": "letter",
                "precision": None,
                "meta": {"kind": "chart"},
            },
            {
                "id": "0004",
                "images": ["images/0004.png"],
                "question": "Value?",
                "choices": [],
                "answer": "2.5",
                "answer_type": "number",
                "precision": 1,
                "meta": {},
            },
        ],
    )
    samples, rep, out = run(tmp_path, "demo-chart", spec("demo", folder))
    s = samples["demo-chart-0003"]
    assert s.images == [str(images_dir(out) / "demo-chart-0003_0.png")]
    assert Path(s.images[0]).read_bytes() == (folder / "images" / "0003.png").read_bytes()
    assert (s.answer, s.answer_type, s.choices) == ("B", "letter", ["a", "b"])
    assert s.meta == {"source_id": "0003", "kind": "chart"}
    s = samples["demo-chart-0004"]
    assert (s.answer, s.answer_type, s.precision) == ("2.5", "number", 1)
    assert rep["files"] == ["rows.jsonl"]


def test_demo_bad_answer_type_is_a_bad_row(tmp_path):
    folder = tmp_path / "demo-src"
    (folder / "images").mkdir(parents=True)
    (folder / "images" / "a.png").write_bytes(img_bytes())
    write_jsonl(
        folder / "rows.jsonl",
        [
            {
                "id": "a",
                "images": ["images/a.png"],
                "question": "q",
                "answer": "x",
                "answer_type": "essay",
            }
        ],
    )
    with pytest.raises(BadRowError, match=r"row 0 \(id 'a'\): .*answer_type 'essay'"):
        run(tmp_path, "demo", spec("demo", folder))


# --------------------------------------------------------------------------- config errors


def test_config_errors_name_the_key(tmp_path):
    out, rep = tmp_path / "o" / "samples.jsonl", tmp_path / "o" / "report.json"
    with pytest.raises(
        ValueError,
        match=r"datasets\.x\.adapter: unknown adapter 'nope'; expected one of .*mathvista",
    ):
        build_samples("x", spec("nope", tmp_path), out, rep)
    with pytest.raises(
        ValueError, match=r"datasets\.x\.path: required when datasets\.x\.source is 'local'"
    ):
        build_samples("x", spec("chartqa", source="local"), out, rep)
    with pytest.raises(ValueError, match=r"datasets\.x\.path: .*is not an existing folder"):
        build_samples("x", spec("chartqa", tmp_path / "absent"), out, rep)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"datasets\.x\.path: no data files"):
        build_samples("x", spec("chartqa", tmp_path / "empty"), out, rep)
    write_parquet(
        tmp_path / "other" / "train-00000-of-00001.parquet",
        [{"question": "q", "answer": "1", "image": struct(img_bytes())}],
    )
    with pytest.raises(ValueError, match=r"datasets\.x\.split: no file .* for split 'test'.*train"):
        build_samples("x", spec("chartqa", tmp_path / "other"), out, rep)
    with pytest.raises(ValueError, match=r"datasets\.x\.path: .*no rows\.jsonl"):
        build_samples("x", spec("demo", tmp_path / "empty"), out, rep)
    with pytest.raises(ValueError, match=r"datasets\.x\.on_bad_row"):
        build_samples("x", spec("chartqa", tmp_path / "other", on_bad_row="ignore"), out, rep)
    assert not (tmp_path / "o").exists()


def test_constructed_keeps_only_accepted_candidates(tmp_path):
    from vlmrobust.core.io import write_jsonl

    folder = tmp_path / "construct"
    folder.mkdir()
    rows = []
    for i in range(3):
        original, edited = folder / f"o{i}.png", folder / f"e{i}.png"
        Image.new("RGB", (30, 20), "white").save(original)
        Image.new("RGB", (30, 20), "red").save(edited)
        rows.append(
            {
                "sample_id": f"demo-chart-000{i}",
                "question": f"Value of bar {i}?",
                "answer": str(i),
                "answer_type": "number",
                "original_image": str(original),
                "edited_image": str(edited),
                "distractor_description": f"A red label 'x={i + 7}' was added.",
                "trap_reasoning_path": "reads the label",
                "trap_answer": str(i + 7),
                "edit_instruction": {"content": "label"},
            }
        )
    write_jsonl(folder / "candidates.jsonl", rows)
    decisions = tmp_path / "decisions.csv"
    decisions.write_text(
        "sample_id,decision,criteria_failed,note,reviewer,time\n"
        "demo-chart-0000,accept,,,me,\n"
        "demo-chart-0002,reject,irrelevant,changes the answer,me,\n"
    )
    spec = {
        "adapter": "constructed",
        "source": "local",
        "path": str(folder),
        "decisions": str(decisions),
        "on_bad_row": "error",
    }
    out = tmp_path / "samples" / "samples.jsonl"
    report = build_samples("demo-distract", spec, out, tmp_path / "report.json")
    samples = read_samples(out)
    assert [s.sample_id for s in samples] == ["demo-distract-demo-chart-0000"]
    sample = samples[0]
    assert sample.answer == "0" and sample.answer_type == "number"
    assert sample.meta["edit"]["trap_answer"] == "7"
    assert sample.meta["edit"]["dead_end_description"] == "A red label 'x=7' was added."
    assert len(sample.meta["distracted_images"]) == 1
    verification = report["verification"]
    assert (
        verification["generated"],
        verification["accepted"],
        verification["rejected"],
        verification["undecided"],
    ) == (3, 1, 1, 1)
    assert verification["rejected_by_criterion"]["irrelevant"] == 1
    decisions.write_text(
        "sample_id,decision,criteria_failed,note,reviewer,time\ndemo-chart-9999,accept,,,me,\n"
    )
    with pytest.raises(ValueError, match="demo-chart-9999"):
        build_samples("demo-distract", spec, out, tmp_path / "report.json")


def test_distract_bench_answer_given_as_the_option_text(tmp_path):
    """Released rows 29, 150, 385 give the option's text, not its letter, and no
    question_type: read as that option, counted in the report (never skipped)."""
    folder = _distract_folder(tmp_path)
    extra = read_jsonl(DB_FIXTURE / "option_text_answers.jsonl")
    with open(folder / "questions.jsonl", "a", encoding="utf-8") as fh:
        for row in extra:
            fh.write(json.dumps(row) + "\n")
            (folder / "images" / f"{row['final_id']}.png").write_bytes(img_bytes(RED))
            (folder / "original_images" / f"{row['final_id']}.png").write_bytes(img_bytes(GREEN))
    samples, rep, _ = run(tmp_path, "distract-bench", spec("distract-bench", folder))
    assert len(samples) == 15 and rep["skipped"] == 0
    s29 = samples["distract-bench-29"]
    assert (s29.answer, s29.answer_type, s29.choices) == ("A", "letter", ["Yes", "No"])
    assert s29.meta["answer_from_option_text"] == "Yes"
    assert samples["distract-bench-150"].answer == "C"  # "decrease"
    assert samples["distract-bench-385"].answer == "B"  # "No"
    assert rep["answers_from_option_text"] == ["29", "150", "385"]
    assert rep["warnings"][-1] == (  # (the slice has no edit records for these three)
        "3 sample(s) give the option's text as answer instead of its letter (final_id 29, "
        "150, 385); read as that option (meta.answer_from_option_text keeps the text)"
    )
    # neither a letter nor exactly one option's text: still a bad row, named
    bad = dict(extra[0], final_id="900", answer="Maybe")
    twice = dict(extra[0], final_id="901", options=["Yes", "Yes"])
    (folder / "questions.jsonl").write_text(json.dumps(bad) + "\n" + json.dumps(twice) + "\n")
    s = spec("distract-bench", folder, on_bad_row="skip")
    with pytest.raises(ValueError, match="no usable rows"):
        build_samples("db", s, tmp_path / "x" / "samples.jsonl", tmp_path / "x" / "report.json")
    (folder / "questions.jsonl").write_text(json.dumps(bad) + "\n")
    with pytest.raises(BadRowError, match="'Maybe' is neither an option letter A-B nor the text"):
        build_samples(
            "db", spec("distract-bench", folder), tmp_path / "x" / "s.jsonl", tmp_path / "x" / "r"
        )


def test_images_false_reads_no_image(tmp_path):
    """`images: false` (reviewers with released outputs, no images): the same samples
    without images, marked; the variants keep their ids and params, without images."""
    from vlmrobust.core.records import read_variants
    from vlmrobust.perturb import build_variants

    with_images = _distract_folder(tmp_path / "a")
    bare = tmp_path / "b" / "distract-bench"  # questions and edits only
    bare.mkdir(parents=True)
    for name in ("questions.jsonl", "edit_instructions.jsonl"):
        shutil.copy(DB_FIXTURE / name, bare)
    with pytest.raises(BadRowError, match="image file not found"):
        run(tmp_path / "b", "distract-bench", spec("distract-bench", bare))
    full, _, full_out = run(tmp_path / "a", "distract-bench", spec("distract-bench", with_images))
    samples, rep, out = run(
        tmp_path / "b", "distract-bench", spec("distract-bench", bare, images=False)
    )
    assert (rep["without_images"], rep["images_written"], rep["samples_written"]) == (True, 0, 12)
    assert "images: false: no image was read" in rep["warnings"][0]
    assert not list(images_dir(out).iterdir())
    for sid, s in samples.items():
        assert s.images == [] and s.meta["without_images"] is True
        assert s.meta["distracted_images"] == []
        other = full[sid]
        assert (s.question, s.answer, s.answer_type, s.choices) == (
            other.question,
            other.answer,
            other.answer_type,
            other.choices,
        )
    for condition, cspec in (
        ("distracted", {"perturbation": "distraction"}),
        ("corrupt", {"perturbation": "corruption"}),
    ):
        manifests = {}
        for tag, src in (("full", full_out), ("bare", out)):
            target = tmp_path / tag / condition / "manifest.jsonl"
            assert build_variants(src, condition, cspec, 0, target) == 12
            manifests[tag] = read_variants(target)
        for v, w in zip(manifests["bare"], manifests["full"], strict=True):
            assert v.variant_id == w.variant_id and (v.images, v.sha256) == ([], [])
            assert v.params == {**w.params, "without_images": True}
    # an MMMU row without its image columns converts too (placeholders, never read)
    row = _mmmu_row("validation_Art_1", "<image 1> Which?", "['a', 'b']", "B", "multiple-choice")
    write_jsonl(tmp_path / "mmmu" / "validation.jsonl", [row])
    samples, rep, _ = run(
        tmp_path / "m", "mmmu", spec("mmmu", tmp_path / "mmmu", images=False, split="validation")
    )
    assert samples["mmmu-validation_Art_1"].answer == "B" and rep["without_images"]


def test_no_model_answers_variants_without_images(tmp_path):
    """`vlmrobust infer` by hand on a manifest of an images: false dataset stops: a
    model never answers a question without its image."""
    from vlmrobust.infer.run import Job, run_inference
    from vlmrobust.perturb import build_variants

    bare = tmp_path / "distract-bench"
    bare.mkdir()
    for name in ("questions.jsonl", "edit_instructions.jsonl"):
        shutil.copy(DB_FIXTURE / name, bare)
    _, _, out = run(tmp_path, "distract-bench", spec("distract-bench", bare, images=False))
    manifest = tmp_path / "v" / "manifest.jsonl"
    build_variants(out, "distracted", {"perturbation": "distraction"}, 0, manifest)
    job = Job(model="m", model_spec={}, prompt="default", max_new_tokens=8)
    with pytest.raises(ValueError, match="12 variant\\(s\\) have no images"):
        run_inference(job, manifest, out, tmp_path / "o.jsonl", backend=object())
    assert not (tmp_path / "o.jsonl").exists()


# --- Distract-Bench: the prompts of the released runs -----------------------------------

DB_PROMPTS = FIXTURES / "distract-bench-prompts"


def _distract_prompts() -> dict[str, str]:
    """The distract-open prompt text of every fixture row, by final_id."""
    from vlmrobust.core.prompts import build_prompt
    from vlmrobust.core.records import Variant
    from vlmrobust.data.released import samples_from_rows

    samples = samples_from_rows("distract-bench", read_jsonl(DB_PROMPTS / "questions.jsonl"))
    texts = {}
    for fid, s in samples.items():
        variant = Variant(
            s.sample_id, s.sample_id, s.dataset, "distracted", "none", [], [], s.question
        )
        built = build_prompt(s, variant, "distract-open")
        texts[fid] = "".join(p["text"] for p in built.content if p["type"] == "text")
    return texts


def test_distract_prompts_equal_the_released_inputs():
    released = {
        str(r["doc_id"]): r["input"] for r in read_jsonl(DB_PROMPTS / "released_inputs.jsonl")
    }
    assert _distract_prompts() == released
    # the three kinds of row, spelled out
    assert released["32"] == (
        "Question: Natalie buys 4.6 kilograms of turmeric. What is the total cost? (Unit: $)\n"
        "Hint: Please answer the question requiring a floating-point number with one decimal "
        "place and provide the final value, e.g., 1.2, 1.3, 1.4, at the end.\nSolution:"
    )
    assert released["232"].endswith(
        "with two decimal places and provide the final value, e.g., 1.23, 1.34, 1.45, at the "
        "end.\nSolution:"
    )
    assert released["29"] == (
        "Question: Is the number of tiny objects that are behind the small metal jet less than "
        "the number of tiny things left of the tiny sedan?\nChoices:\n(A) Yes\n(B) No\n"
        "Hint: Please answer the question and provide the correct option letter, e.g., A, B, "
        "C, D, at the end.\nSolution:"
    )


def test_distract_rows_precision_and_whole_query_fields():
    from vlmrobust.data.released import samples_from_rows

    samples = samples_from_rows("distract-bench", read_jsonl(DB_PROMPTS / "questions.jsonl"))
    # float answers without a precision: the decimals the query's hint names
    assert (samples["32"].precision, samples["32"].meta["precision_from"]) == (1, "query")
    assert (samples["232"].precision, samples["232"].meta["precision_from"]) == (2, "query")
    assert samples["1"].precision is None and "precision_from" not in samples["1"].meta
    # a whole MathVista query in `question`: the bare question, the hint kept in meta
    s29 = samples["29"]
    assert s29.question.startswith("Is the number of tiny objects") and "Hint" not in s29.question
    assert s29.choices == ["Yes", "No"] and (s29.answer, s29.answer_type) == ("A", "letter")
    assert s29.meta["question_from_query"] is True
    assert s29.meta["query_hint"] == (
        "Hint: Please answer the question and provide the correct option letter, e.g., A, B, "
        "C, D, at the end."
    )


def test_distract_precision_from_the_answer_and_whole_query_checks():
    from vlmrobust.data.adapters import float_precision, split_whole_query
    from vlmrobust.data.base import RowProblem

    assert float_precision("13.8", None) == (1, "answer")
    assert float_precision("0.330", "no hint here") == (3, "answer")
    assert float_precision("7", None) == (None, None)
    hint = "... a floating-point number with two decimal places ..."
    assert float_precision("7", hint) == (2, "query")
    assert split_whole_query("What is x?", ["1", "2"]) is None
    whole = "Hint: Pick one.\nQuestion: What is x?\nChoices:\n(A) 1\n(B) 2"
    assert split_whole_query(whole, ["1", "2"]) == ("What is x?", "Hint: Pick one.")
    with pytest.raises(RowProblem, match=r"choices \['1', '2'\] are not the options \['1', '3'\]"):
        split_whole_query(whole, ["1", "3"])
