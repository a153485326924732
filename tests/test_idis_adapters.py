"""The Idis base-dataset adapters (vlmrobust.data.idis): ImageNet-9, MathVerse,
LogicVista and Waterbirds folders -> samples.

ImageNet-9 and Waterbirds folders are drawn here (tiny PIL images in the real layouts);
MathVerse and LogicVista rows are the real ones in ``tests/fixtures/idis`` (README
there). Every expectation is written by hand from those rows.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from vlmrobust.core.benchmarks import BENCHMARKS
from vlmrobust.core.idis import IMAGENET9_LABELS, IMAGENET9_QUESTION
from vlmrobust.data import ADAPTERS, BadRowError
from vlmrobust.data.idis import CONCEPT_LABELS_FILE, MathVerse, parse_choices_block

from .conftest import FIXTURES
from .test_adapters import run as build
from .test_adapters import spec

IDIS = FIXTURES / "idis"
RED, GREEN, BLUE, BLACK, WHITE = (255, 0, 0), (0, 255, 0), (0, 0, 255), (0, 0, 0), (255,) * 3


# --------------------------------------------------------------------------- helpers


def run(tmp_path: Path, name: str, s: dict):
    """The samples' ids, the samples by id and the report (the checks of test_adapters'
    ``run``: report file = returned report, answer types and meta keys of the record)."""
    samples, rep, _ = build(tmp_path, name, s)
    return list(samples), samples, rep


def save(path: Path, color=RED, size=(12, 10), fmt=None, image: Image.Image | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    (image or Image.new("RGB", size, color)).save(path, format=fmt)
    return path


def pixel(path: str, xy=(0, 0)):
    with Image.open(path) as im:
        return im.getpixel(xy)


def size_of(path: str) -> tuple[int, int]:
    with Image.open(path) as im:
        return im.size


# --------------------------------------------------------------------------- registry


def test_records_and_defaults():
    assert ADAPTERS["imagenet9"].defaults() == {"hub_id": None, "hub_config": None, "split": "val"}
    assert ADAPTERS["mathverse"].defaults() == {
        "hub_id": "AI4Math/MathVerse",
        "hub_config": "testmini",
        "split": "testmini",
    }
    assert ADAPTERS["logicvista"].defaults()["hub_id"] is None
    assert ADAPTERS["waterbirds"].defaults() == {
        "hub_id": None,
        "hub_config": None,
        "split": "test",
    }
    assert [BENCHMARKS[n].default_prompt for n in ADAPTERS if n in BENCHMARKS][-4:] == [
        "idis-perception",
        "idis-math",
        None,
        "waterbirds",
    ]
    assert IMAGENET9_QUESTION == (
        "Which category best describes the main object in the image? Choose exactly one "
        "from: Dog, Bird, Vehicle, Reptile, Carnivore, Insect, Instrument, Primate, Fish."
    )


# --------------------------------------------------------------------------- ImageNet-9

CLASSES = [
    "00_dog",
    "01_bird",
    "02_wheeled vehicle",
    "03_reptile",
    "04_carnivore",
    "05_insect",
    "06_musical instrument",
    "07_primate",
    "08_fish",
]


def _bg_challenge(root: Path) -> Path:
    """original/val with 10 images (05_insect empty), masks for four of them."""
    orig = root / "original" / "val"
    for c in CLASSES:
        (orig / c).mkdir(parents=True)
    save(orig / "00_dog" / "n2.jpg", GREEN)
    save(orig / "00_dog" / "n1.JPEG", RED, fmt="JPEG")
    (orig / "00_dog" / "notes.txt").write_text("not an image")
    save(orig / "00_dog" / ".hidden.png", RED)
    save(orig / "01_bird" / "b1.png", BLUE)
    save(orig / "02_wheeled vehicle" / "c1.JPEG", RED, fmt="JPEG")
    save(orig / "03_reptile" / "r1.png", GREEN)
    save(orig / "04_carnivore" / "k1.png", GREEN)
    save(orig / "06_musical instrument" / "i1.jpeg", BLUE, fmt="JPEG")
    save(orig / "07_primate" / "p1.png", RED)
    save(orig / "08_fish" / "f2.png", RED)
    save(orig / "08_fish" / "f1.png", BLUE)
    # only_fg: the foreground on black (00_dog/n1); fg_mask: a PNG (01_bird/b1) and a
    # NumPy array (vehicle/c1); a mask of the wrong size (03_reptile/r1)
    fg = Image.new("RGB", (12, 10), BLACK)
    fg.paste(WHITE, (2, 2, 6, 5))
    save(root / "only_fg" / "val" / "00_dog" / "n1.JPEG", image=fg, fmt="JPEG")
    save(root / "fg_mask" / "val" / "00_dog" / "n1.png", image=Image.new("L", (12, 10), 0))
    save(root / "fg_mask" / "val" / "01_bird" / "b1.png", image=Image.new("L", (12, 10), 255))
    arr = np.zeros((10, 12, 3), dtype=np.uint8)
    arr[1:3, 4:9, 0] = 1
    (root / "fg_mask" / "val" / "02_wheeled vehicle").mkdir(parents=True)
    np.save(root / "fg_mask" / "val" / "02_wheeled vehicle" / "c1.npy", arr)
    save(root / "only_fg" / "val" / "03_reptile" / "r1.png", WHITE, size=(6, 5))
    # a mask for an image that does not exist is not read
    save(root / "only_fg" / "val" / "07_primate" / "zz.png", WHITE)
    return root


def test_imagenet9_folders_labels_and_target_masks(tmp_path):
    root = _bg_challenge(tmp_path / "bg_challenge")
    ids, samples, rep = run(tmp_path, "imagenet9", spec("imagenet9", root))
    assert ids == [
        "imagenet9-00_dog_n1",
        "imagenet9-00_dog_n2",
        "imagenet9-01_bird_b1",
        "imagenet9-02_wheeled_vehicle_c1",
        "imagenet9-03_reptile_r1",
        "imagenet9-04_carnivore_k1",
        "imagenet9-06_musical_instrument_i1",
        "imagenet9-07_primate_p1",
        "imagenet9-08_fish_f1",
        "imagenet9-08_fish_f2",
    ]
    car = samples["imagenet9-02_wheeled_vehicle_c1"]
    assert (car.question, car.answer, car.answer_type) == (IMAGENET9_QUESTION, "Vehicle", "label")
    assert car.choices == list(IMAGENET9_LABELS) and len(car.choices) == 9
    assert car.meta["source_id"] == "02_wheeled vehicle/c1"
    assert (car.meta["label"], car.meta["imagenet9_class"], car.meta["class_index"]) == (
        "Vehicle",
        "wheeled vehicle",
        2,
    )
    inst = samples["imagenet9-06_musical_instrument_i1"]
    assert (inst.answer, inst.meta["imagenet9_class"], inst.meta["stem"]) == (
        "Instrument",
        "musical instrument",
        "i1",
    )
    # the images are stored as they were (JPEG bytes kept)
    dog = samples["imagenet9-00_dog_n1"]
    src = root / "original" / "val" / "00_dog" / "n1.JPEG"
    assert Path(dog.images[0]).read_bytes() == src.read_bytes()
    # target masks: only_fg first (n1 has an fg_mask too), then fg_mask (PNG or .npy)
    assert dog.meta["target_mask_source"] == "only_fg"
    (mask,) = dog.meta["target_masks"]
    assert Path(mask).name == "imagenet9-00_dog_n1_target_masks_0.jpg"
    assert Path(mask).read_bytes() == (root / "only_fg/val/00_dog/n1.JPEG").read_bytes()
    bird = samples["imagenet9-01_bird_b1"]
    assert (
        bird.meta["target_mask_source"] == "fg_mask" and pixel(bird.meta["target_masks"][0]) == 255
    )
    (npy_mask,) = car.meta["target_masks"]
    assert car.meta["target_mask_source"] == "fg_mask" and size_of(npy_mask) == (12, 10)
    assert [pixel(npy_mask, xy) for xy in ((4, 1), (8, 2), (3, 1), (4, 3), (0, 0))] == [
        255,
        255,
        0,
        0,
        0,
    ]
    reptile = samples["imagenet9-03_reptile_r1"]
    assert reptile.meta["target_masks"] == [None] and reptile.meta["target_mask_source"] is None
    assert reptile.meta["target_mask_problem"] == (
        "only_fg mask only_fg/val/03_reptile/r1.png is 6x5, the image 12x10"
    )
    assert samples["imagenet9-00_dog_n2"].meta["target_masks"] == [None]
    # report: per class, per mask source, and the warnings
    assert rep["class_counts"] == {
        "Dog": 2,
        "Bird": 1,
        "Vehicle": 1,
        "Reptile": 1,
        "Carnivore": 1,
        "Insect": 0,
        "Instrument": 1,
        "Primate": 1,
        "Fish": 2,
    }
    assert rep["target_masks"] == {"only_fg": 1, "fg_mask": 2, "none": 7}
    assert (rep["samples_without_target_mask"], rep["target_mask_size_mismatches"]) == (7, 1)
    assert (rep["samples_written"], rep["images_written"]) == (10, 13)
    assert rep["split"] == "val" and rep["files"] == ["original/val"]
    assert any("'05_insect'" in w for w in rep["warnings"])
    assert any(w.startswith("7 sample(s) have no target mask") for w in rep["warnings"])


def test_imagenet9_errors_name_the_folder_and_key(tmp_path):
    root = _bg_challenge(tmp_path / "bg")
    shutil.rmtree(root / "original" / "val" / "08_fish")
    with pytest.raises(ValueError, match=r"datasets.in9.path: class folder '.*08_fish' is missing"):
        run(tmp_path, "in9", spec("imagenet9", root))
    with pytest.raises(ValueError, match=r"datasets.in9.path: .* has no original/test/ folder"):
        run(tmp_path, "in9", spec("imagenet9", root, split="test"))
    with pytest.raises(ValueError, match=r"datasets.in9.source: the imagenet9 adapter reads a "):
        run(tmp_path, "in9", spec("imagenet9", root, source="hub"))
    save(root / "original" / "val" / "01_bird" / "b1.jpg", RED)
    with pytest.raises(ValueError, match=r"01_bird/b1.jpg' and '.*01_bird/b1.png' have the same"):
        run(tmp_path, "in9", spec("imagenet9", root))
    assert not (tmp_path / "results" / "samples" / "in9" / "samples.jsonl").exists()


def test_imagenet9_split_folder_and_limit(tmp_path):
    root = tmp_path / "bg"
    for c in CLASSES:
        save(root / "original" / "train" / c / "a.png", RED)
    ids, samples, rep = run(tmp_path, "in9", spec("imagenet9", root, split="train", limit=3))
    assert ids == ["in9-00_dog_a", "in9-01_bird_a", "in9-02_wheeled_vehicle_a"]
    assert rep["class_counts"]["Reptile"] == 0 and rep["samples_without_target_mask"] == 3


# --------------------------------------------------------------------------- MathVerse


def _mathverse_folder(root: Path, labels: list[tuple[str, ...]] | None = None) -> Path:
    """testmini.json = the five versions of problem 685 + the four Text Only rows + two
    multiple-choice rows made from the first Text Only one (Text Dominant, with images)."""
    versions = json.loads((IDIS / "mathverse" / "testmini_versions_sample.json").read_text())
    text_only = json.loads((IDIS / "mathverse" / "testmini_text_only_first4.json").read_text())
    mc = dict(text_only[0], sample_index="9001", problem_version="Text Dominant")
    mc["image"] = "images_version_1-4/image_1.png"
    mc2 = dict(mc, sample_index="9002", problem_version="Vision Intensive", answer="B")
    mc2["question_type"] = "multi_choice"
    mc2["question_for_eval"] = "In triangle ABC ... angle CED? A:40° B:60° C:120° D:140°"
    root.mkdir(parents=True)
    (root / "testmini.json").write_text(json.dumps(versions + text_only + [mc, mc2]))
    for name, color in (
        ("images_version_1-4/image_685.png", RED),
        ("images_version_5/image_685.png", GREEN),
    ):
        save(root / name, color)
    save(root / "images_version_1-4/image_1.png", BLUE)
    if labels is not None:
        with open(root / CONCEPT_LABELS_FILE, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["problem_index", "concept_family", "source", "status"])
            writer.writerows(labels)
    return root


def test_mathverse_versions_answers_meta_and_concept_families(tmp_path):
    root = _mathverse_folder(
        tmp_path / "mathverse",
        [("685", "3d", "human", "confirmed"), ("1", "triangle", "rules", "proposed")],
    )
    ids, samples, rep = run(tmp_path, "mathverse", spec("mathverse", root))
    assert ids == [
        "mathverse-3421",
        "mathverse-3422",
        "mathverse-3423",
        "mathverse-3424",
        "mathverse-9001",
        "mathverse-9002",
    ]
    assert rep["skipped_versions"] == {"Vision Only": 1, "Text Only": 4}
    assert rep["rows_read"] == 6  # the skipped rows never reach the conversion
    assert rep["files"] == ["testmini.json"]
    lite = samples["mathverse-3422"]
    assert lite.question == (
        "The radius is 3 cm. Find L.\n\nGive your answer rounded down to the nearest cm."
    )
    assert (lite.answer, lite.answer_type, lite.choices) == ("14", "number", [])
    assert {k: lite.meta[k] for k in ("sample_index", "problem_index", "problem_version")} == {
        "sample_index": "3422",
        "problem_index": "685",
        "problem_version": "Text Lite",
    }
    assert (lite.meta["question_type"], lite.meta["subject"], lite.meta["subfield"]) == (
        "free-form",
        "Solid Geometry",
        "Length",
    )
    assert lite.meta["source"] == "Geo3D_collected" and lite.meta["concept_family"] == "3d"
    assert lite.meta["query_cot"].startswith("Please first conduct reasoning")
    # no question_for_eval in the GitHub rows: the question, counted
    assert lite.meta["question_for_eval"] == lite.question
    assert lite.meta["question_for_eval_from_question"] is True
    assert pixel(samples["mathverse-3424"].images[0]) == GREEN  # images_version_5
    mc = samples["mathverse-9001"]
    assert (mc.answer, mc.answer_type) == ("D", "letter")
    assert mc.choices == ["40°", "60°", "120°", "140°"]
    assert mc.question.endswith("Choices:\nA:40°\nB:60°\nC:120°\nD:140°")
    assert mc.meta["concept_family"] is None  # status 'proposed' is not confirmed
    mc2 = samples["mathverse-9002"]
    assert (mc2.answer, mc2.meta["question_type"]) == ("B", "multi_choice")
    assert mc2.meta["question_for_eval"].startswith("In triangle ABC")
    assert "question_for_eval_from_question" not in mc2.meta
    assert rep["concept_families"] == {
        "triangle": 0,
        "quadrilateral": 0,
        "circle": 0,
        "3d": 4,
        "unlabelled": 2,
    }
    assert rep["versions"] == {
        "Text Dominant": 2,
        "Text Lite": 1,
        "Vision Intensive": 2,
        "Vision Dominant": 1,
    }
    assert rep["question_for_eval_from_question"] == 5
    assert rep["concept_labels"] == str(root / CONCEPT_LABELS_FILE)
    assert rep["answer_types"] == {"letter": 2, "number": 4}
    assert any(
        w.startswith("2 sample(s) have no confirmed concept family") for w in rep["warnings"]
    )


def test_mathverse_without_labels_and_a_class_with_other_versions(tmp_path):
    root = _mathverse_folder(tmp_path / "mv")
    ids, samples, rep = run(tmp_path, "mv", spec("mathverse", root))
    assert all(s.meta["concept_family"] is None for s in samples.values())
    assert rep["concept_labels"] is None and rep["concept_families"]["unlabelled"] == 6

    class TextOnly(MathVerse):
        VERSIONS = ("Text Only",)

    rows = list(TextOnly().load_rows(spec("mathverse", root), "datasets.x").rows)
    assert [r["sample_index"] for r in rows] == ["1", "2", "3", "4"]


def test_mathverse_concept_labels_errors(tmp_path):
    """The labels file is read by vlmrobust.core.concept_labels (its own tests check
    every error); here: its errors and the missing file stop the adapter."""
    root = _mathverse_folder(tmp_path / "mv", [("685", "cylinder", "human", "confirmed")])
    with pytest.raises(
        ValueError, match=r"concept_families.csv:2: problem_index '685' is confirmed "
    ):
        run(tmp_path, "mv", spec("mathverse", root))
    with pytest.raises(ValueError, match=r"datasets.mv.concept_labels: '.*nope.csv' is not an "):
        run(tmp_path, "mv", spec("mathverse", root, concept_labels=str(tmp_path / "nope.csv")))
    no_source = tmp_path / "three.csv"
    no_source.write_text("problem_index,concept_family,status\n685,circle,confirmed\n")
    with pytest.raises(ValueError, match=r"three.csv:1: header must hold problem_index,"):
        run(tmp_path, "mv", spec("mathverse", root, concept_labels=str(no_source)))
    # a rejected row (and an upper-case confirmed one) as the review page may leave them
    ok = tmp_path / "ok.csv"
    ok.write_text(
        "problem_index,concept_family,source,status\n685,other,human,rejected\n"
        "1,Circle,human,CONFIRMED\n"
    )
    _, samples, rep = run(tmp_path, "mv", spec("mathverse", root, concept_labels=str(ok)))
    assert {s.meta["source_id"]: s.meta["concept_family"] for s in samples.values()} == {
        "3421": None,
        "3422": None,
        "3423": None,
        "3424": None,
        "9001": "circle",
        "9002": "circle",
    }
    assert rep["concept_labels"] == str(ok)


def test_mathverse_bad_rows(tmp_path):
    root = _mathverse_folder(tmp_path / "mv")
    rows = json.loads((root / "testmini.json").read_text())
    rows[-2]["answer"] = "F"  # beyond the four parsed options
    (root / "testmini.json").write_text(json.dumps(rows))
    with pytest.raises(
        BadRowError,
        match=r"row 4 \(sample_index '9001'\): multi-choice answer 'F' is not an option letter \(A-D\)",
    ):
        run(tmp_path, "mv", spec("mathverse", root))
    rows[-2]["answer"], rows[-2]["question_type"] = "D", "essay"
    (root / "testmini.json").write_text(json.dumps(rows))
    with pytest.raises(BadRowError, match="question_type 'essay' is neither 'multi-choice'"):
        run(tmp_path, "mv", spec("mathverse", root))


def test_mathverse_hub_parquet_and_concept_labels_key(tmp_path, monkeypatch):
    """Hub rows (image embedded, metadata a struct, question_for_eval) through
    datasets.load_dataset; the labels file named by the concept_labels key."""
    import datasets

    buf = io.BytesIO()
    Image.new("RGB", (8, 6), BLUE).save(buf, format="PNG")
    text_dominant = {
        "sample_index": "3421",
        "problem_index": "685",
        "problem_version": "Text Dominant",
        "question": "Find L.",
        "image": {"bytes": buf.getvalue(), "path": "image_685.png"},
        "answer": "14",
        "question_type": "free-form",
        "metadata": {"split": "testmini", "source": "S", "subject": "G", "subfield": "L"},
        "query_wo": "q",
        "query_cot": "c",
        "question_for_eval": "Find L (eval).",
    }
    vision_only = dict(
        text_dominant,
        sample_index="3425",
        problem_version="Vision Only",
        question="",
        image={"bytes": buf.getvalue(), "path": "x.png"},
        question_for_eval="",
    )
    rows = [text_dominant, vision_only]
    calls = []

    def fake_load_dataset(path, name=None, split=None, revision=None, **kw):
        calls.append((path, name, split))
        return rows

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    labels = tmp_path / "labels.csv"
    labels.write_text("problem_index,concept_family,source,status\n685,circle,human,confirmed\n")
    ids, samples, rep = run(tmp_path, "mv", spec("mathverse", concept_labels=str(labels)))
    assert calls == [("AI4Math/MathVerse", "testmini", "testmini")]
    (s,) = samples.values()
    assert ids == ["mv-3421"] and rep["skipped_versions"] == {"Vision Only": 1}
    assert (s.meta["question_for_eval"], s.meta["concept_family"], s.meta["subject"]) == (
        "Find L (eval).",
        "circle",
        "G",
    )
    assert pixel(s.images[0]) == BLUE
    # the same rows as a local parquet export
    folder = tmp_path / "pq"
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), folder / "testmini.parquet")
    ids, samples, rep = run(tmp_path / "b", "mv", spec("mathverse", folder))
    assert ids == ["mv-3421"] and rep["files"] == ["testmini.parquet"]


def test_parse_choices_block():
    assert parse_choices_block("Q ()\nChoices:\nA:40°\nB:60°\nC:120°") == ["40°", "60°", "120°"]
    assert parse_choices_block("Q\nChoices: (A) 3 cm (B) 4 cm (C) 5 cm") == ["3 cm", "4 cm", "5 cm"]
    assert parse_choices_block("Q\nchoices:\nA. $\\frac{1}{2}$\nB. 2\nThen?") == [
        "$\\frac{1}{2}$",
        "2",
    ]
    assert parse_choices_block("Find angle A. No options here.") == []
    assert parse_choices_block("Choices:\nA:only one") == []
    assert parse_choices_block("Choices: see the figure, A:1 B:2") == []  # text before A


# --------------------------------------------------------------------------- LogicVista


def _logicvista_folder(root: Path) -> Path:
    shutil.copytree(IDIS / "logicvista", root)
    for qid in ("v1_1", "v1_4", "v1_20", "v1_220", "v1_382"):
        save(root / "images" / f"{qid}.png", GREEN)
    return root


def test_logicvista_answers_meta_and_bad_row(tmp_path):
    root = _logicvista_folder(tmp_path / "data")
    with pytest.raises(BadRowError, match=r"row 8 \(id 'v1_382'\): question is missing"):
        run(tmp_path, "lv", spec("logicvista", root))
    ids, samples, rep = run(tmp_path, "lv", spec("logicvista", root, on_bad_row="skip"))
    assert ids == [
        "lv-v1_1",
        "lv-v1_4",
        "lv-v1_20",
        "lv-v1_220",
        "lv-v1_291",
        "lv-v1_292",
        "lv-v1_313",
        "lv-v1_314",
    ]
    assert rep["skipped_rows"] == [{"row": 8, "id": "v1_382", "reason": "question is missing"}]
    two = samples["lv-v1_1"]
    assert (two.answer, two.answer_type, two.choices) == ("A, C", "list", [])
    assert (samples["lv-v1_4"].answer, samples["lv-v1_4"].answer_type) == ("G", "letter")
    numbered = samples["lv-v1_20"]
    assert (numbered.answer, numbered.answer_type) == ("3", "number")
    assert rep["numbered_option_answers"] == ["v1_20"]
    table = samples["lv-v1_291"]
    assert table.question.startswith("Charles has two children")
    assert (table.answer, table.answer_type) == ("C", "letter")
    assert table.meta["specific_capability"] == ["table"]
    assert (table.meta["skill"], table.meta["broad_capability"]) == (["deductive"], ["ocr"])
    assert table.meta["imagename"] == "v1_291.png" and table.meta["reasoning"].startswith(
        " Charles"
    )
    assert (
        Path(table.images[0]).read_bytes() == (IDIS / "logicvista/images/v1_291.png").read_bytes()
    )
    assert samples["lv-v1_220"].meta["sourcelink"].startswith("https://assess.ly")
    assert rep["specific_capabilities"] == {
        "common sense ocr": 1,
        "complex ocr": 1,
        "rule based pattern": 2,
        "table": 4,
    }
    assert rep["answer_types"] == {"letter": 6, "list": 1, "number": 1}


def test_logicvista_repository_root_and_errors(tmp_path):
    repo = tmp_path / "LogicVista"
    _logicvista_folder(repo / "data")
    ids, _, rep = run(tmp_path, "lv", spec("logicvista", repo, on_bad_row="skip", limit=2))
    assert ids == ["lv-v1_1", "lv-v1_4"] and rep["path"] == str(repo / "data")
    with pytest.raises(ValueError, match=r"datasets.lv.path: .* has no dataset.json"):
        run(tmp_path, "lv", spec("logicvista", tmp_path))
    with pytest.raises(ValueError, match=r"datasets.lv.source: the logicvista adapter reads a"):
        run(tmp_path, "lv", spec("logicvista", repo, source="hub"))
    bad = _logicvista_folder(tmp_path / "bad")
    data = json.loads((bad / "dataset.json").read_text())
    data["v1_4"]["answer"] = "maybe"
    (bad / "dataset.json").write_text(json.dumps(data))
    with pytest.raises(
        BadRowError, match=r"\(id 'v1_4'\): answer 'maybe' is neither option letters"
    ):
        run(tmp_path, "lv", spec("logicvista", bad))


# --------------------------------------------------------------------------- Waterbirds

WB_HEADER = ["img_id", "img_filename", "y", "split", "place", "place_filename"]


def _waterbirds_folder(root: Path, rows: list[list]) -> Path:
    root.mkdir(parents=True)
    with open(root / "metadata.csv", "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(WB_HEADER)
        writer.writerows(rows)
    for row in rows:
        save(root / str(row[1]), RED, fmt="JPEG")
    return root


WB_ROWS = [
    [1, "001.Black_footed_Albatross/a_1.jpg", 1, 0, 1, "/o/ocean/x.jpg"],
    [2, "001.Black_footed_Albatross/a_2.jpg", 1, 2, 1, "/o/ocean/y.jpg"],
    [3, "001.Black_footed_Albatross/a_3.jpg", 1, 2, 0, "/b/bamboo/z.jpg"],
    [4, "012.Yellow_headed_Blackbird/b_1.jpg", 0, 2, 0, "/f/forest/w.jpg"],
    [5, "012.Yellow_headed_Blackbird/b_2.jpg", 0, 2, 1, "/l/lake/v.jpg"],
    [6, "012.Yellow_headed_Blackbird/b_3.jpg", 0, 1, 1, "/l/lake/u.jpg"],
]


def test_waterbirds_split_labels_and_groups(tmp_path):
    root = _waterbirds_folder(tmp_path / "waterbird_complete95_forest2water2", WB_ROWS)
    ids, samples, rep = run(tmp_path, "waterbirds", spec("waterbirds", root))
    assert ids == ["waterbirds-2", "waterbirds-3", "waterbirds-4", "waterbirds-5"]
    s2, s3, s4, s5 = (samples[f"waterbirds-{i}"] for i in (2, 3, 4, 5))
    assert s2.question == "Is the bird in the image a landbird or a waterbird?"
    assert (s2.answer, s2.answer_type, s2.choices) == (
        "Waterbird",
        "label",
        ["Landbird", "Waterbird"],
    )
    assert [(s.answer, s.meta["place_name"], s.meta["group"]) for s in (s2, s3, s4, s5)] == [
        ("Waterbird", "water", "aligned"),
        ("Waterbird", "land", "conflicting"),
        ("Landbird", "land", "aligned"),
        ("Landbird", "water", "conflicting"),
    ]
    assert (s3.meta["y"], s3.meta["place"], s3.meta["img_filename"]) == (
        1,
        0,
        "001.Black_footed_Albatross/a_3.jpg",
    )
    assert s5.meta["place_filename"] == "/l/lake/v.jpg" and s5.meta["source_id"] == "5"
    assert Path(s4.images[0]).read_bytes() == (root / WB_ROWS[3][1]).read_bytes()
    assert rep["groups"] == {"aligned": 2, "conflicting": 2}
    assert rep["label_place"] == {
        "Landbird/land": 1,
        "Landbird/water": 1,
        "Waterbird/land": 1,
        "Waterbird/water": 1,
    }
    assert (rep["split"], rep["split_code"]) == ("test", 2)
    ids, _, _ = run(tmp_path / "t", "wb", spec("waterbirds", root, split="train"))
    assert ids == ["wb-1"]
    ids, _, _ = run(tmp_path / "v", "wb", spec("waterbirds", root, split="val"))
    assert ids == ["wb-6"]


def test_waterbirds_errors(tmp_path):
    root = _waterbirds_folder(tmp_path / "wb", WB_ROWS)
    with pytest.raises(
        ValueError, match=r"datasets.wb.split: 'validation' is not one of train, val"
    ):
        run(tmp_path, "wb", spec("waterbirds", root, split="validation"))
    with pytest.raises(ValueError, match=r"datasets.wb.path: .* has no metadata.csv"):
        run(tmp_path, "wb", spec("waterbirds", tmp_path))
    bad = _waterbirds_folder(
        tmp_path / "bad",
        [*WB_ROWS[:2], [7, "x/c.jpg", 2, 2, 0, "p"], [8, "x/d.jpg", 0, "?", 0, "p"]],
    )
    with pytest.raises(BadRowError, match=r"row 1 \(img_id '7'\): y '2' is not one of 0, 1"):
        run(tmp_path, "wb", spec("waterbirds", bad))
    _, _, rep = run(tmp_path, "wb", spec("waterbirds", bad, on_bad_row="skip"))
    assert [(r["id"], r["reason"]) for r in rep["skipped_rows"]] == [
        ("7", "y '2' is not one of 0, 1"),
        ("8", "split '?' is not one of 0, 1, 2"),
    ]
    cols = tmp_path / "cols"
    cols.mkdir()
    (cols / "metadata.csv").write_text("img_id,img_filename,y\n1,a.jpg,0\n")
    with pytest.raises(ValueError, match=r"metadata.csv: missing column\(s\) split, place"):
        run(tmp_path, "wb", spec("waterbirds", cols))
