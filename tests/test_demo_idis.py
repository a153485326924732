"""The Idis slice of the demo data (vlmrobust_demo.idis): the base datasets written in
their real formats, the distractor assets, determinism, and the real adapters reading
the folders.

Answers are re-derived here from what the rows say (the givens in the Text Dominant
question, the numbers in a table question's reasoning); the foreground copies are
checked pixel by pixel against the object's alpha.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlmrobust.core.idis import (
    IMAGENET9_CLASS_NAMES,
    IMAGENET9_FOLDERS,
    IMAGENET9_LABELS,
    MATHVERSE_VERSIONS,
)
from vlmrobust.core.records import read_samples
from vlmrobust.data.build import build_samples
from vlmrobust.perturb.idis import load_objects, object_slug
from vlmrobust_demo.idis import (
    _JPEG_OPTIONS,
    all_idis_objects,
    generate_idis_demo,
    imagenet9_images,
    imagenet9_stem,
    logicvista_table,
)

from .test_demo import _files

SIZE = 224
MV_FIELDS = {
    "sample_index", "problem_index", "problem_version", "question", "image", "answer",
    "question_type", "metadata", "query_wo", "query_cot", "question_for_eval",
}  # fmt: skip
LV_FIELDS = {
    "imagename", "question", "answer", "reasoning", "skill", "broad_capability",
    "specific_capability", "imagesource", "sourcelink", "liscenced",
}  # fmt: skip
WB_HEADER = ["img_id", "img_filename", "y", "split", "place", "place_filename"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("idis")
    return root, generate_idis_demo(root, seed=0)


# ----------------------------------------------------------------------- layout


def test_layout_and_counts(demo: tuple[Path, dict]) -> None:
    root, summary = demo
    files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    expected = {"summary.json"}
    assert IMAGENET9_FOLDERS[2] == "02_wheeled vehicle" and IMAGENET9_FOLDERS[8] == "08_fish"
    for cls, folder in enumerate(IMAGENET9_FOLDERS):
        stem = imagenet9_stem(cls, 0)
        assert re.fullmatch(r"n\d{8}_\d+", stem)
        expected |= {
            f"imagenet9/{kind}/val/{folder}/{stem}.JPEG" for kind in ("original", "only_fg")
        }
    expected |= {"mathverse/testmini.json", "mathverse/concept_families.csv"}
    expected |= {f"mathverse/images/image_{5 * p + v + 1}.png" for p in range(3) for v in range(4)}
    expected |= {"logicvista/dataset.json"} | {f"logicvista/images/v1_{t}.png" for t in range(4)}
    with open(root / "waterbirds/metadata.csv", encoding="utf-8") as fh:
        wb_rows = list(csv.DictReader(fh))
    expected |= {"waterbirds/metadata.csv"} | {f"waterbirds/{r['img_filename']}" for r in wb_rows}
    expected |= {
        f"segments/{object_slug(name)}/{k}.png" for name in all_idis_objects() for k in (0, 1)
    }
    expected |= {
        f"{style}/{i:03d}.png" for style in ("handwritten", "mathwriting") for i in range(20)
    }
    assert files == expected
    assert len(files) == 1 + 18 + 2 + 12 + 1 + 4 + 1 + 8 + 80 + 40
    counts = summary["counts"]
    assert (counts["imagenet9"], counts["mathverse"], counts["mathverse_problems"]) == (9, 12, 3)
    assert (counts["logicvista"], counts["waterbirds"], counts["segments"]) == (4, 8, 80)
    assert (counts["handwritten"], counts["mathwriting"], counts["segment_objects"]) == (20, 20, 40)
    assert json.loads((root / "summary.json").read_text()) == summary


def test_imagenet9_files_are_plain_224px_jpegs(demo: tuple[Path, dict]) -> None:
    root, _ = demo
    for path in sorted((root / "imagenet9").rglob("*.JPEG")):
        with Image.open(path) as im:
            assert im.format == "JPEG" and im.mode == "RGB" and im.size == (SIZE, SIZE), path
            assert "exif" not in im.info and "icc_profile" not in im.info, path


def test_only_fg_is_the_object_on_black(demo: tuple[Path, dict]) -> None:
    root, _ = demo
    for cls, folder in enumerate(IMAGENET9_FOLDERS):
        original, only_fg, alpha = imagenet9_images(0, cls, 0, SIZE)
        o, f, a = np.asarray(original), np.asarray(only_fg), np.asarray(alpha)
        opaque, empty = a == 255, a == 0
        assert opaque.sum() > 0.05 * SIZE * SIZE, folder  # the object is a real part
        assert np.array_equal(f[opaque], o[opaque]), folder  # exactly the object where opaque
        assert not f[empty].any(), folder  # black elsewhere
        assert o[empty].any(), folder  # the original has a background there
        # the files are these images encoded with the fixed JPEG options
        stem = imagenet9_stem(cls, 0)
        for kind, img in (("original", original), ("only_fg", only_fg)):
            buf = io.BytesIO()
            img.save(buf, format="JPEG", **_JPEG_OPTIONS)
            assert (
                root / f"imagenet9/{kind}/val/{folder}/{stem}.JPEG"
            ).read_bytes() == buf.getvalue()
        # after JPEG: still the object where opaque, black where empty, and the target
        # mask rule ("any channel > 16") recovers the object
        fj = np.asarray(
            Image.open(root / f"imagenet9/only_fg/val/{folder}/{stem}.JPEG"), dtype=float
        )
        oj = np.asarray(
            Image.open(root / f"imagenet9/original/val/{folder}/{stem}.JPEG"), dtype=float
        )
        assert np.abs(fj[opaque] - oj[opaque]).mean() < 3.0, folder
        assert fj[empty].mean() < 1.5, folder
        found = (fj > 16).any(axis=2)
        target = a > 127
        iou = (found & target).sum() / (found | target).sum()
        assert iou > 0.95, (folder, iou)


# -------------------------------------------------------------------- MathVerse


def _expected_answer(text: str) -> tuple[str, str]:
    """(multiple-choice option text, free-form value) recomputed from a Text Dominant
    question's givens."""
    nums = {k: float(v) for k, v in re.findall(r"(\w+) = (\d+(?:\.\d+)?)", text)}
    if "Find the length of AB" in text:
        c = math.hypot(nums["AC"], nums["BC"])
        return f"{c:g}", f"{c:g}"
    if "measure of ∠ACB" in text:
        a, b = (float(v) for v in re.findall(r"= (\d+)°", text))
        return f"{180 - a - b:g}°", f"{180 - a - b:g}"
    if "area of rectangle" in text:
        return f"{nums['AB'] * nums['BC']:g}", f"{nums['AB'] * nums['BC']:g}"
    if "perimeter of rectangle" in text:
        v = 2 * (nums["AB"] + nums["BC"])
        return f"{v:g}", f"{v:g}"
    if "area of parallelogram" in text:
        return f"{nums['AB'] * nums['DE']:g}", f"{nums['AB'] * nums['DE']:g}"
    if "area of circle" in text:
        r = nums["OA"]
        return f"{r * r:g}π", f"{math.pi * r * r:.2f}"
    if "circumference of circle" in text:
        r = nums["OA"]
        return f"{2 * r:g}π", f"{2 * math.pi * r:.2f}"
    lv, wv, hv = nums["length"], nums["width"], nums["height"]
    if "volume" in text:
        return f"{lv * wv * hv:g}", f"{lv * wv * hv:g}"
    v = 2 * (lv * wv + lv * hv + wv * hv)
    return f"{v:g}", f"{v:g}"


def _choices(question: str) -> list[str]:
    block = question.split("\nChoices:\n", 1)[1]
    lines = block.split("\n")
    assert [ln[:2] for ln in lines] == ["A:", "B:", "C:", "D:"]
    return [ln[2:] for ln in lines]


def test_mathverse_rows(demo: tuple[Path, dict]) -> None:
    root, _ = demo
    rows = json.loads((root / "mathverse/testmini.json").read_text(encoding="utf-8"))
    assert isinstance(rows, list) and len(rows) == 12
    for row in rows:
        assert set(row) == MV_FIELDS
        assert row["metadata"]["split"] == "testmini"
        assert set(row["metadata"]) == {"split", "source", "subject", "subfield"}
        assert (root / "mathverse" / row["image"]).is_file()
        assert row["image"] == f"images/image_{row['sample_index']}.png"
        assert row["question_for_eval"] == row["question"]
        assert row["query_wo"].endswith("\nQuestion: " + row["question"])
        assert row["query_cot"].startswith("Please first conduct reasoning")
    by_problem: dict[str, list[dict]] = {}
    for row in rows:
        by_problem.setdefault(row["problem_index"], []).append(row)
    assert list(by_problem) == ["1", "2", "3"]
    types = []
    for p, group in by_problem.items():
        assert [r["problem_version"] for r in group] == list(MATHVERSE_VERSIONS)
        base = 5 * (int(p) - 1)
        assert [r["sample_index"] for r in group] == [str(base + v) for v in (1, 2, 3, 4)]
        assert (
            len({r["answer"] for r in group}) == 1 and len({r["question_type"] for r in group}) == 1
        )
        td, vd = group[0]["question"], group[3]["question"]
        mc_text, value = _expected_answer(td)
        qtype = group[0]["question_type"]
        types.append(qtype)
        if qtype == "multi-choice":
            assert "multiple" not in td
            options = _choices(td)
            assert {_choices(r["question"]) == options for r in group} == {True}
            assert options["ABCD".index(group[0]["answer"])] == mc_text
            assert group[0]["query_wo"].startswith("Please directly answer the question and "
                                                   "provide the correct option letter")  # fmt: skip
        else:
            assert "Choices:" not in td
            assert group[0]["answer"] == value
            assert group[0]["query_wo"].startswith("Please directly answer the question and "
                                                   "provide the final value")  # fmt: skip
        # the givens leave the text as the versions go from Text to Vision Dominant
        givens = re.findall(r"\w+ = \d+°?", td.split("\nChoices:")[0])
        assert givens and not any(g in vd for g in givens)
    assert types == ["multi-choice", "free-form", "multi-choice"]


def test_concept_families_csv(demo: tuple[Path, dict]) -> None:
    root, summary = demo
    text = (root / "mathverse/concept_families.csv").read_text(encoding="utf-8")
    assert text == (
        "problem_index,concept_family,source,status\n"
        "1,triangle,demo,confirmed\n2,quadrilateral,demo,confirmed\n3,circle,demo,confirmed\n"
    )
    assert summary["counts"]["concept_families"] == {"circle": 1, "quadrilateral": 1, "triangle": 1}
    subjects = {
        r["problem_index"]: r["metadata"]["subject"]
        for r in json.loads((root / "mathverse/testmini.json").read_text(encoding="utf-8"))
    }
    assert set(subjects.values()) == {"Plane Geometry"}


def test_mathverse_3d_problem_is_solid_geometry(tmp_path: Path) -> None:
    generate_idis_demo(tmp_path, seed=0, n_problems=4, n_per_class=1, n_birds=4,
                       n_tables=1, n_expressions=1, n_segment_variants=1)  # fmt: skip
    rows = json.loads((tmp_path / "mathverse/testmini.json").read_text(encoding="utf-8"))
    fourth = [r for r in rows if r["problem_index"] == "4"]
    assert len(fourth) == 4 and {r["metadata"]["subject"] for r in fourth} == {"Solid Geometry"}
    assert (
        (tmp_path / "mathverse/concept_families.csv").read_text().endswith("4,3d,demo,confirmed\n")
    )


# ------------------------------------------------------------------- LogicVista


def test_logicvista_tables(demo: tuple[Path, dict]) -> None:
    root, _ = demo
    data = json.loads((root / "logicvista/dataset.json").read_text(encoding="utf-8"))
    assert list(data) == ["v1_0", "v1_1", "v1_2", "v1_3"]
    for qid, entry in data.items():
        assert set(entry) == LV_FIELDS
        assert entry["imagename"] == f"{qid}.png"
        assert entry["specific_capability"] == ["table"]
        assert entry["liscenced"] == "true" and isinstance(entry["skill"], list)
        with Image.open(root / "logicvista/images" / entry["imagename"]) as im:
            assert im.mode == "RGB" and im.width > im.height > 100
        q = entry["question"]
        assert "Select from A, B, C, D, and E." in q
        options = re.findall(r"\(([A-E])\) (.+?)(?= \([A-E]\) |$)", q)
        assert [o[0] for o in options] == list("ABCDE")
        chosen = dict(options)[entry["answer"]]
        assert entry["reasoning"].endswith(f"({entry['answer']}) {chosen}.")
        # recompute the answer from the values the reasoning reads off the table
        if "highest" in q or "lowest" in q:
            values = {
                n: int(v)
                for n, v in re.findall(r"([A-Z][a-z]+(?: Park)?) = (\d+)", entry["reasoning"])
            }
            pick = max if "highest" in q else min
            assert chosen == pick(values, key=values.get)
        elif "total" in q:
            listing = entry["reasoning"].split("column: ")[1].split(". Step 2")[0]
            assert int(chosen) == sum(int(v) for v in re.findall(r"= (\d+)", listing))
        else:
            a, b = (int(v) for v in re.findall(r"= (\d+)", entry["reasoning"])[:2])
            assert int(chosen) == a - b > 0


def test_logicvista_table_values_are_distinct() -> None:
    # unambiguous highest/lowest: no column repeats a value
    for t in range(8):
        entry, img = logicvista_table(5, t)
        assert img.size[0] > 300
        if "highest" in entry["question"] or "lowest" in entry["question"]:
            vals = re.findall(r"= (\d+)", entry["reasoning"])
            assert len(vals) == len(set(vals)) == 5


# ------------------------------------------------------------------- Waterbirds


def test_waterbirds_metadata_and_balanced_groups(demo: tuple[Path, dict]) -> None:
    root, summary = demo
    text = (root / "waterbirds/metadata.csv").read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == WB_HEADER
    body = [dict(zip(WB_HEADER, r, strict=True)) for r in rows[1:]]
    assert [r["img_id"] for r in body] == [str(i) for i in range(1, 9)]
    assert {r["split"] for r in body} == {"2"}
    cells = [(r["y"], r["place"]) for r in body]
    assert sorted(cells) == sorted([("0", "0"), ("1", "1"), ("0", "1"), ("1", "0")] * 2)
    assert sum(y == p for y, p in cells) == 4  # half aligned, half conflicting
    assert summary["counts"]["waterbirds_groups"] == {
        "landbird-land": 2, "waterbird-water": 2, "landbird-water": 2, "waterbird-land": 2,
    }  # fmt: skip
    water_species = {"001.Black_footed_Albatross", "059.California_Gull", "086.Pacific_Loon",
                     "050.Eared_Grebe"}  # fmt: skip
    for r in body:
        folder, name = r["img_filename"].split("/")
        assert (folder in water_species) == (r["y"] == "1"), r
        assert re.fullmatch(r"[A-Za-z_]+_\d{4}_\d+\.jpg", name), name
        water_place = r["place_filename"].startswith(("/o/ocean/", "/l/lake/"))
        assert water_place == (r["place"] == "1"), r
        with Image.open(root / "waterbirds" / r["img_filename"]) as im:
            assert im.format == "JPEG" and im.size == (SIZE, SIZE)


# --------------------------------------------------------------------- assets


def test_cutouts_for_all_forty_objects(demo: tuple[Path, dict]) -> None:
    root, _ = demo
    names = all_idis_objects()
    assert len(names) == len(set(names)) == 40
    assert names[:4] == ["dog bone chew toy", "dog bowl", "tennis ball", "kennel"]
    assert names[-4:] == ["umbrella", "clock", "TV", "suitcase"]
    assert object_slug("TV") == "tv" and object_slug("dog bowl") == "dog-bowl"
    assert object_slug("empty net designed for catching insects") == (
        "empty-net-designed-for-catching-insects"
    )
    assert len({object_slug(n) for n in names}) == 40
    for name in names:
        variants = []
        for k in (0, 1):
            with Image.open(root / "segments" / object_slug(name) / f"{k}.png") as im:
                assert im.mode == "RGBA", name
                alpha = np.asarray(im.getchannel("A"))
                assert (alpha > 0).sum() > 1000, name  # a real object (the rod is thin)
                assert im.getchannel("A").getbbox() == (0, 0, im.width, im.height), name
                assert 100 <= max(im.size) <= 220, (name, im.size)
                variants.append(np.asarray(im))
        assert variants[0].shape != variants[1].shape or not np.array_equal(*variants), name


def test_the_object_lists_name_the_imagenet9_classes() -> None:
    # the shipped objects.yaml (the demo's and the perturbations' object lists) is keyed
    # by the labels of vlmrobust.core.idis and maps them to its class names
    objects = load_objects()
    assert list(objects.classes) == list(IMAGENET9_LABELS)
    assert objects.labels == dict(zip(IMAGENET9_LABELS, IMAGENET9_CLASS_NAMES, strict=True))


def test_handwritten_expressions(demo: tuple[Path, dict]) -> None:
    root, summary = demo
    for style in ("handwritten", "mathwriting"):
        assert len(summary["expressions"][style]) == 20
        for i in range(20):
            with Image.open(root / style / f"{i:03d}.png") as im:
                assert im.mode == "RGB"
                a = np.asarray(im.convert("L"))
            h, w = a.shape
            assert w > h >= 30, (style, i, a.shape)
            assert a[0, 0] == a[-1, -1] == a[0, -1] == 255  # white paper around the ink
            ink = (a < 128).mean()
            assert a.min() < 70 and 0.02 < ink < 0.5, (style, i, ink)
    same = [
        i
        for i in range(20)
        if (root / f"handwritten/{i:03d}.png").read_bytes()
        == (root / f"mathwriting/{i:03d}.png").read_bytes()
    ]
    assert same == []
    assert summary["expressions"]["handwritten"][1] == r"\int f(x)\,dx"


# ----------------------------------------------------------------- determinism


def test_same_arguments_give_identical_bytes(tmp_path: Path, demo: tuple[Path, dict]) -> None:
    root, _ = demo
    generate_idis_demo(tmp_path / "again", seed=0)
    a, b = _files(root), _files(tmp_path / "again")
    assert a.keys() == b.keys()
    assert [name for name in a if a[name] != b[name]] == []


def test_different_seed_changes_the_images(tmp_path: Path, demo: tuple[Path, dict]) -> None:
    root, _ = demo
    generate_idis_demo(tmp_path, seed=1)
    a, b = _files(root), _files(tmp_path)
    for name in ("segments/banana/0.png", "handwritten/000.png", "logicvista/images/v1_0.png",
                 f"imagenet9/original/val/00_dog/{imagenet9_stem(0, 0)}.JPEG"):  # fmt: skip
        assert a[name] != b[name], name


def test_stale_images_are_removed(tmp_path: Path) -> None:
    small = {"n_problems": 1, "n_tables": 1, "n_expressions": 2, "n_segment_variants": 1}
    generate_idis_demo(tmp_path, seed=0, n_per_class=2, n_birds=8, **small)
    assert len(list((tmp_path / "imagenet9/original/val").rglob("*.JPEG"))) == 18
    generate_idis_demo(tmp_path, seed=0, n_per_class=1, n_birds=4, **small)
    assert len(list((tmp_path / "imagenet9/original/val").rglob("*.JPEG"))) == 9
    assert len(list((tmp_path / "imagenet9/only_fg/val").rglob("*.JPEG"))) == 9
    assert len(list((tmp_path / "waterbirds").rglob("*.jpg"))) == 4


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_birds": 0}, "demo-idis --n-birds must be from 1 to 2000, got 0"),
        ({"n_per_class": 1.5}, "demo-idis --n-per-class must be an integer from 1 to 450, got 1.5"),
        ({"image_size": 32}, "demo-idis --image-size must be from 64 to 1024, got 32"),
        ({"seed": "0"}, "seed must be an integer, got '0'"),
    ],
)
def test_bad_arguments_are_errors(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        generate_idis_demo(tmp_path, **kwargs)
    assert str(exc.value) == message
    assert not any(tmp_path.iterdir())


# ------------------------------------------------------------------------- CLI


def test_cli_demo_idis(tmp_path: Path) -> None:
    from vlmrobust.cli import main

    out = tmp_path / "cli"
    assert main(["demo-idis", "--out", str(out), "--seed", "4", "--n-birds", "4",
                 "--n-expressions", "2"]) == 0  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seed"] == 4 and summary["counts"]["waterbirds"] == 4
    assert summary["arguments"]["n_per_class"] == 1 and summary["counts"]["handwritten"] == 2
    config = tmp_path / "config.yaml"
    config.write_text("seed: 7\nmodels: []\ndatasets: {}\nconditions: {}\n")
    assert main(["demo-idis", "--out", str(tmp_path / "c"), "--config", str(config),
                 "--n-expressions", "1", "--n-segment-variants", "1"]) == 0  # fmt: skip
    assert json.loads((tmp_path / "c/summary.json").read_text())["seed"] == 7
    assert main(["demo-idis", "--out", str(tmp_path / "bad"), "--n-tables", "0"]) == 2


# --------------------------------------------------------------------- adapters


def test_the_real_adapters_read_the_folders(demo: tuple[Path, dict], tmp_path: Path) -> None:
    root, _ = demo
    reports, samples = {}, {}
    for name, adapter in (("in9", "imagenet9"), ("mv", "mathverse"), ("lv", "logicvista"),
                          ("wb", "waterbirds")):  # fmt: skip
        spec = {"adapter": adapter, "source": "local", "path": str(root / adapter)}
        out = tmp_path / name / "samples.jsonl"
        reports[name] = build_samples(name, spec, out, out.with_name("report.json"))
        samples[name] = read_samples(out)
        assert reports[name]["skipped"] == 0 and reports[name]["warnings"] == [], name

    assert reports["in9"]["samples_written"] == 9
    assert reports["in9"]["target_masks"] == {"only_fg": 9, "fg_mask": 0, "none": 0}
    assert [s.answer for s in samples["in9"]] == list(IMAGENET9_LABELS)
    assert [s.meta["imagenet9_class"] for s in samples["in9"]] == list(IMAGENET9_CLASS_NAMES)

    mv = samples["mv"]
    assert len(mv) == 12
    assert reports["mv"]["concept_families"] == {
        "triangle": 4, "quadrilateral": 4, "circle": 4, "3d": 0, "unlabelled": 0,
    }  # fmt: skip
    assert [s.meta["problem_version"] for s in mv[:4]] == list(MATHVERSE_VERSIONS)
    assert {s.answer_type for s in mv} == {"letter", "number"}
    assert all(len(s.choices) == 4 for s in mv if s.answer_type == "letter")

    assert reports["lv"]["specific_capabilities"] == {"table": 4}
    assert {s.answer_type for s in samples["lv"]} == {"letter"}

    assert reports["wb"]["groups"] == {"aligned": 4, "conflicting": 4}
    assert reports["wb"]["label_place"] == {
        "Landbird/land": 2, "Landbird/water": 2, "Waterbird/land": 2, "Waterbird/water": 2,
    }  # fmt: skip
