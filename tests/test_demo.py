"""The embedded demo data generator (vlmrobust_demo.data).

Answers are re-derived here from what each row says was drawn (``meta``), and for the
counting diagrams and the geometry boxes from the pixels themselves.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage

from vlmrobust.core.records import ANSWER_TYPES, Sample, safe_id
from vlmrobust_demo.data import (
    CONCEPT_FAMILIES,
    DEMO_FAMILIES,
    DEMO_VERSION,
    NAMED_COLOURS,
    OBJECT_CLASSES,
    OBJECT_LABELS,
    OBJECT_QUESTION,
    PROBLEM_VERSIONS,
    YESNO_ASKED,
    generate_demo,
)

N = 20
ROW_KEYS = {"id", "images", "question", "choices", "answer", "answer_type", "precision", "meta"}


def _rows(root: Path, family: str) -> list[dict]:
    with open(root / family / "rows.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("demo")
    return root, generate_demo(root, n_per_family=N, seed=0)


@pytest.fixture(scope="module")
def rows(demo: tuple[Path, dict]) -> dict[str, list[dict]]:
    root, _ = demo
    return {fam: _rows(root, fam) for fam in DEMO_FAMILIES}


# ----------------------------------------------------------------- determinism


def test_same_arguments_give_identical_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    generate_demo(a, n_per_family=6, seed=3)
    generate_demo(b, n_per_family=6, seed=3)
    fa, fb = _files(a), _files(b)
    # images + rows.jsonl per family, premises/annotation.json (VisArgs format), summary.json
    assert len(fa) == 7 * (6 + 1) + 1 + 1
    assert "premises/annotation.json" in fa
    assert fa.keys() == fb.keys()
    differing = [name for name in fa if fa[name] != fb[name]]
    assert differing == []


def test_different_seed_gives_different_images(tmp_path: Path) -> None:
    generate_demo(tmp_path / "s0", n_per_family=3, seed=0)
    generate_demo(tmp_path / "s1", n_per_family=3, seed=1)
    for fam in DEMO_FAMILIES:
        for i in range(3):
            name = f"{fam}/images/{i:04d}.png"
            assert (tmp_path / "s0" / name).read_bytes() != (tmp_path / "s1" / name).read_bytes(), (
                name
            )


def test_a_family_subset_matches_the_full_run(tmp_path: Path, demo: tuple[Path, dict]) -> None:
    root, _ = demo
    summary = generate_demo(tmp_path, n_per_family=N, families=["geometry", "chart"])
    assert list(summary["families"]) == ["geometry", "chart"]
    assert not (tmp_path / "diagram").exists()
    for fam in ("geometry", "chart"):
        assert _files(tmp_path / fam) == _files(root / fam)


def test_rerun_with_fewer_samples_removes_stale_images(tmp_path: Path) -> None:
    generate_demo(tmp_path, n_per_family=5, families=["objects"])
    (tmp_path / "objects" / "images" / "notes.txt").write_text("keep me")
    generate_demo(tmp_path, n_per_family=2, families=["objects"])
    names = sorted(p.name for p in (tmp_path / "objects" / "images").iterdir())
    assert names == ["0000.png", "0001.png", "notes.txt"]
    assert len(_rows(tmp_path, "objects")) == 2


# ------------------------------------------------------------- counts, summary


def test_counts_and_summary(demo: tuple[Path, dict], rows: dict[str, list[dict]]) -> None:
    root, summary = demo
    assert json.loads((root / "summary.json").read_text()) == summary
    assert summary["version"] == DEMO_VERSION
    assert summary["seed"] == 0
    assert summary["n_per_family"] == N
    assert list(summary["families"]) == list(DEMO_FAMILIES)
    assert summary["n_total"] == 7 * N
    total: dict[str, int] = {}
    for fam in DEMO_FAMILIES:
        assert len(rows[fam]) == N
        assert len(list((root / fam / "images").glob("*.png"))) == N
        counts: dict[str, int] = {}
        for r in rows[fam]:
            counts[r["answer_type"]] = counts.get(r["answer_type"], 0) + 1
        assert summary["families"][fam]["n"] == N
        assert summary["families"][fam]["answer_types"] == counts
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
    assert summary["answer_types"] == total
    # the fixed answer types of the families
    assert summary["families"]["diagram"]["answer_types"] == {"letter": N}
    assert summary["families"]["chart"]["answer_types"] == {"number": N}
    assert summary["families"]["yesno"]["answer_types"] == {"yes/no": N}
    assert summary["families"]["objects"]["answer_types"] == {"label": N}
    assert summary["families"]["premises"]["answer_types"] == {"text": N}


# ----------------------------------------------------------------------- schema


def test_every_row_has_the_schema(demo: tuple[Path, dict], rows: dict[str, list[dict]]) -> None:
    root, _ = demo
    for fam in DEMO_FAMILIES:
        for i, r in enumerate(rows[fam]):
            where = f"{fam}/{r.get('id')}"
            assert set(r) == ROW_KEYS, where
            assert r["id"] == f"{i:04d}"
            assert r["images"] == [f"images/{r['id']}.png"]
            with Image.open(root / fam / r["images"][0]) as im:
                assert im.mode == "RGB"
                assert min(im.size) >= 0.5 * 384 and max(im.size) <= 1.5 * 384, where
            assert isinstance(r["question"], str) and r["question"].strip(), where
            assert isinstance(r["answer"], str) and r["answer"].strip(), where
            assert r["answer_type"] in ANSWER_TYPES, where
            assert r["precision"] is None or isinstance(r["precision"], int), where
            assert all(isinstance(c, str) for c in r["choices"]), where
            assert isinstance(r["meta"], dict) and r["meta"]["source_family"], where
            # the records module accepts every row as a Sample
            Sample(
                sample_id=safe_id("demo", fam, r["id"]),
                dataset=f"demo-{fam}",
                images=r["images"],
                question=r["question"],
                answer=r["answer"],
                answer_type=r["answer_type"],
                choices=r["choices"],
                precision=r["precision"],
                meta=r["meta"],
            )
            if r["answer_type"] == "letter":
                assert 4 <= len(r["choices"]) <= 5, where
                assert len(set(r["choices"])) == len(r["choices"]), where
                assert r["answer"] in "ABCDE"[: len(r["choices"])], where
                for k, choice in enumerate(r["choices"]):  # options rendered in the question
                    assert f"\n{'ABCDE'[k]}. {choice}" in r["question"], where
            elif r["answer_type"] == "number":
                value = float(r["answer"])
                if r["precision"] is None:
                    assert r["answer"] == str(int(value)), where
                else:
                    assert r["answer"] == f"{value:.{r['precision']}f}", where
            elif r["answer_type"] == "yes/no":
                assert r["answer"] in ("yes", "no"), where
            elif r["answer_type"] == "label":
                assert r["answer"] in r["choices"], where


# ------------------------------------------------------------ family by family


def test_diagram_answers(rows: dict[str, list[dict]]) -> None:
    kinds = set()
    for r in rows["diagram"]:
        m = r["meta"]
        kinds.add(m["kind"])
        assert m["source_family"] == "mmmu/mathvision"
        picked = r["choices"]["ABCDE".index(r["answer"])]
        if m["kind"] == "count":
            expected = str(sum(1 for s in m["shapes"] if s["colour"] == m["target_colour"]))
        elif m["kind"] == "longest":
            expected = max(m["lengths"], key=m["lengths"].get)
        elif m["kind"] == "length":
            expected = str(m["given"]["AB"] - m["given"]["AC"])
        else:
            row, col = m["cell"]
            expected = m["grid"][row][col]
        assert picked == expected, r["id"]
    assert kinds == {"count", "longest", "length", "position"}


def test_diagram_count_matches_the_pixels(demo: tuple[Path, dict], rows: dict) -> None:
    """Count the filled regions of the asked colour in the image itself."""
    root, _ = demo
    checked = 0
    for r in rows["diagram"]:
        m = r["meta"]
        if m["kind"] != "count":
            continue
        arr = np.asarray(Image.open(root / "diagram" / r["images"][0]))
        mask = np.all(arr == NAMED_COLOURS[m["target_colour"]], axis=-1)
        labels, n = ndimage.label(mask)
        sizes = ndimage.sum(mask, labels, range(1, n + 1))
        blobs = int(np.sum(sizes > 10))  # the shapes are solid; no anti-aliasing
        assert str(blobs) == r["choices"]["ABCDE".index(r["answer"])], r["id"]
        checked += 1
    assert checked == N // 4


def test_chart_answers_rederived_from_values(rows: dict[str, list[dict]]) -> None:
    kinds, types = set(), set()
    for r in rows["chart"]:
        m = r["meta"]
        values = m["values"]
        kinds.add(m["question_kind"])
        types.add(m["chart_type"])
        if m["question_kind"] == "value":
            expected = values[m["operands"][0]]
        elif m["question_kind"] == "difference":
            a, b = m["operands"]
            expected = abs(values[a] - values[b])
        elif m["question_kind"] == "max":
            expected = max(values.values())
        else:
            expected = sum(values.values())
        is_float = any(isinstance(v, float) for v in values.values())
        assert r["precision"] == (1 if is_float else None), r["id"]
        assert math.isclose(float(r["answer"]), round(expected, r["precision"] or 0)), r["id"]
        for op in m["operands"]:
            assert op in values
    assert kinds == {"value", "difference", "max", "sum"}
    assert types == {"bar", "line"}


def test_chart_hand_checked_example(rows: dict[str, list[dict]]) -> None:
    """The first chart of seed 0, its bars read off the image by eye (DEMO_VERSION 1)."""
    r = rows["chart"][0]
    assert r["meta"]["chart_type"] == "bar"
    assert r["meta"]["values"] == {
        "Bananas": 17.8,
        "Cherries": 2.9,
        "Pears": 6.0,
        "Mangoes": 7.4,
        "Lemons": 19.2,
    }
    assert r["question"] == "What is the value of Cherries in the chart?"
    assert (r["answer"], r["precision"]) == ("2.9", 1)


def test_yesno_balanced_pairs_and_answers(
    demo: tuple[Path, dict], rows: dict[str, list[dict]]
) -> None:
    root, _ = demo
    rs = rows["yesno"]
    answers = [r["answer"] for r in rs]
    assert answers.count("yes") == answers.count("no") == N // 2

    def colours(meta: dict) -> list[str]:
        if meta["figure_kind"] == "shapes":
            return [o["colour"] for o in meta["objects"]]
        return list(meta["colours"].values())

    def layout(meta: dict) -> object:
        if meta["figure_kind"] == "shapes":
            return [(o["shape"], o["row"], o["col"]) for o in meta["objects"]]
        return meta["heights"]

    for even, odd in zip(rs[::2], rs[1::2], strict=True):
        # HallusionBench-like figure pair: one question, the original figure (yes) and
        # the figure edited so that the asked colour is gone (no), same layout
        e, o = even["meta"], odd["meta"]
        assert e["figure_id"] == o["figure_id"] and even["question"] == odd["question"]
        assert (even["answer"], odd["answer"]) == ("yes", "no")
        assert (e["edited"], o["edited"]) == (False, True)
        assert layout(e) == layout(o) and e["figure_kind"] == o["figure_kind"]
        assert (root / "yesno" / even["images"][0]).read_bytes() != (
            root / "yesno" / odd["images"][0]
        ).read_bytes()
    for r in rs:
        m = r["meta"]
        asked = m["query"]["colour"]
        assert asked in YESNO_ASKED[m["figure_kind"]]
        noun = "shape" if m["figure_kind"] == "shapes" else "bar"
        assert f"Is there a {asked} {noun} in the" in r["question"]
        assert r["answer"] == ("yes" if asked in colours(m) else "no"), r["id"]
    assert len({r["meta"]["figure_id"] for r in rs}) == N // 2


def test_text_answers(rows: dict[str, list[dict]]) -> None:
    kinds = set()
    for r in rows["text"]:
        m = r["meta"]
        kinds.add(m["text_kind"])
        assert r["answer_type"] == "text"
        assert isinstance(m["answers"], list) and r["answer"] in m["answers"]
        # the answer is (a form of) text that was rendered into the image
        rendered = " ".join(m["rendered_text"]).lower()
        assert any(a.lower() in rendered for a in m["answers"]), r["id"]
        if m["text_kind"] == "infographic" and m["question_kind"] == "value":
            assert r["answer"].replace(",", "") in {str(v) for v in m["values"].values()}
    assert kinds == {"sign", "poster", "infographic", "plate"}


def test_objects_cover_every_class_with_boxes(
    demo: tuple[Path, dict], rows: dict[str, list[dict]]
) -> None:
    root, _ = demo
    seen = set()
    for r in rows["objects"]:
        m = r["meta"]
        assert r["question"] == OBJECT_QUESTION
        assert r["choices"] == list(OBJECT_LABELS)
        assert r["answer"] == m["label"] == OBJECT_LABELS[m["class_index"]]
        assert m["imagenet9_class"] == OBJECT_CLASSES[m["class_index"]]
        seen.add(m["label"])
        x0, y0, x1, y1 = m["box"]
        with Image.open(root / "objects" / r["images"][0]) as im:
            w, h = im.size
        assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h
        assert (x1 - x0) * (y1 - y0) >= 0.05 * w * h  # the main object, not a speck
    assert seen == set(OBJECT_LABELS)


def _geometry_expected(m: dict) -> tuple[float, str]:
    """(value, multiple-choice option text) re-derived from the drawn measures."""
    s, p = m["measures"], m["problem"]
    if p == "right triangle hypotenuse":
        v = math.hypot(s["AC"], s["BC"])
        assert v == s["AB"]
        return v, str(int(v))
    if p == "triangle angle sum":
        v = 180 - s["CAB"] - s["ABC"]
        return v, f"{v}°"
    if p == "rectangle area":
        return s["AB"] * s["BC"], str(s["AB"] * s["BC"])
    if p == "rectangle perimeter":
        return 2 * (s["AB"] + s["BC"]), str(2 * (s["AB"] + s["BC"]))
    if p == "parallelogram area":
        return s["AB"] * s["DE"], str(s["AB"] * s["DE"])
    if p == "circle area":
        return math.pi * s["radius"] ** 2, f"{s['radius'] ** 2}π"
    if p == "circle circumference":
        return 2 * math.pi * s["radius"], f"{2 * s['radius']}π"
    lwh = s["length"], s["width"], s["height"]
    if p == "cuboid volume":
        return math.prod(lwh), str(math.prod(lwh))
    assert p == "cuboid surface area"
    a, b, c = lwh
    return 2 * (a * b + a * c + b * c), str(2 * (a * b + a * c + b * c))


def test_geometry_answers_versions_and_boxes(
    demo: tuple[Path, dict], rows: dict[str, list[dict]]
) -> None:
    root, _ = demo
    combos = set()
    for i, r in enumerate(rows["geometry"]):
        m = r["meta"]
        assert m["concept_family"] == CONCEPT_FAMILIES[i % 4]
        assert m["problem_version"] == PROBLEM_VERSIONS[(i // 4) % 4]
        combos.add((m["concept_family"], m["problem_version"]))
        value, option = _geometry_expected(m)
        if r["answer_type"] == "letter":
            assert r["choices"]["ABCDE".index(r["answer"])] == option, r["id"]
        else:
            assert r["answer_type"] == "number"
            assert math.isclose(float(r["answer"]), round(value, r["precision"] or 0)), r["id"]
        # MathVerse versions: the givens move from the question into the picture
        for g in m["text_givens"]:
            assert g in r["question"], r["id"]
        for g in m["image_givens"]:
            assert g not in r["question"], r["id"]
        if m["problem_version"] in ("Text Dominant", "Text Lite"):
            assert m["image_givens"] == []
        if m["problem_version"] == "Vision Dominant":
            assert m["text_givens"] == []
        # everything drawn lies inside meta.box; the rest of the canvas is white
        arr = np.asarray(Image.open(root / "geometry" / r["images"][0])).copy()
        x0, y0, x1, y1 = m["box"]
        assert arr[y0:y1, x0:x1].min() < 255
        arr[y0:y1, x0:x1] = 255
        assert arr.min() == 255, r["id"]
    assert len(combos) == 16  # every concept family under every version


def test_premises_boxes_and_answers(demo: tuple[Path, dict], rows: dict[str, list[dict]]) -> None:
    root, _ = demo
    for r in rows["premises"]:
        m = r["meta"]
        vp, boxes = m["visual_premises"], m["b_box"]
        assert 2 <= len(vp) == len(boxes) == len(m["commonsense_premises"]) <= 4
        assert len(set(vp)) == len(vp)
        assert len(m["reasoning_steps"]) == len(vp) + 1
        assert m["reasoning_steps"][-1].endswith(m["conclusion"])
        with Image.open(root / "premises" / r["images"][0]) as im:
            w, h = im.size
        rects = []
        for b in boxes:
            assert set(b) == {"startX", "startY", "w", "h"}
            assert all(isinstance(v, int) for v in b.values())
            assert b["w"] > 0 and b["h"] > 0
            assert b["startX"] >= 0 and b["startX"] + b["w"] <= w
            assert b["startY"] >= 0 and b["startY"] + b["h"] <= h
            rects.append((b["startX"], b["startY"], b["startX"] + b["w"], b["startY"] + b["h"]))
        for i, a in enumerate(rects):
            for b in rects[i + 1 :]:
                overlap = min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])
                assert not overlap, (r["id"], a, b)
        assert r["answer_type"] == "text"
        if m["question_kind"] == "premise":
            assert r["answer"] == vp[m["target_premise"]]
            assert m["locations"][m["target_premise"]] in r["question"]
        else:
            assert r["answer"] == m["conclusion"]


# ------------------------------------------------------------------------ errors


@pytest.mark.parametrize("bad", [0, -1, 501, 2.5, "20", True, None])
def test_bad_n_per_family_names_the_key(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ValueError, match=r"demo\.n_per_family"):
        generate_demo(tmp_path, n_per_family=bad)  # type: ignore[arg-type]
    assert not any(tmp_path.iterdir())  # nothing written


def test_unknown_family_names_the_key_and_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"demo\.families") as err:
        generate_demo(tmp_path, families=["chart", "charts"])
    message = str(err.value)
    assert "'charts'" in message
    for fam in DEMO_FAMILIES:
        assert fam in message
    with pytest.raises(ValueError, match=r"demo\.families is empty"):
        generate_demo(tmp_path, families=[])
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("bad", [64, 5000, "384"])
def test_bad_image_size_names_the_key(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ValueError, match=r"demo\.image_size"):
        generate_demo(tmp_path, image_size=bad)  # type: ignore[arg-type]


def test_other_image_sizes_work(tmp_path: Path) -> None:
    generate_demo(tmp_path, n_per_family=2, image_size=160)
    with Image.open(tmp_path / "objects" / "images" / "0000.png") as im:
        assert im.size == (160, 160)
    with Image.open(tmp_path / "chart" / "images" / "0000.png") as im:
        assert im.size == (213, 160)
