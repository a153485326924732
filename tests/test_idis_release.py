"""The ``idis-release`` perturbation: released Idis files as variants of their base samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from vlmrobust.core.io import read_json, sha256_file
from vlmrobust.core.records import Sample, read_variants, write_samples
from vlmrobust.perturb import PERTURBATIONS, build_variants
from vlmrobust.perturb.idis_release import normalise_class
from vlmrobust.perturb.variants import prepared_spec

PERC = "Idis-perception"
MATH = "Idis-math"


def _png(path: Path, shade: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (shade, 255 - shade, 7)).save(path)
    return path


def _meta(path: Path, rows: list[dict | None]) -> None:
    """A meta.jsonl; a None row is a blank line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(("" if r is None else json.dumps(r)) + "\n" for r in rows))


# ---------------------------------------------------------------- perception

# (sample id, stem, ImageNet-9 class, label): what the imagenet9 adapter records
PERC_SAMPLES = [
    ("in9-dog-1", "n0201_1", "dog", "Dog"),
    ("in9-veh-7", "n0301_7", "wheeled vehicle", "Vehicle"),
    ("in9-bird-2", "n0401_2", "bird", "Bird"),  # nothing released for it
    ("in9-dog-dup", "dup", "dog", "Dog"),  # same stem as the next, another class
    ("in9-bird-dup", "dup", "bird", "Bird"),
]


def _perception_samples(tmp_path: Path) -> Path:
    samples = [
        Sample(
            sample_id=sid,
            dataset="imagenet9",
            images=[str(_png(tmp_path / "in9" / f"{stem}_{cls[:3]}.png", i))],
            question="What is the main object?",
            answer=label,
            answer_type="label",
            meta={"stem": stem, "imagenet9_class": cls, "label": label},
        )
        for i, (sid, stem, cls, label) in enumerate(PERC_SAMPLES)
    ]
    path = tmp_path / "samples.jsonl"
    write_samples(path, samples)
    return path


@pytest.fixture
def perception(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "Idis"
    vis = root / PERC / "visual_distractor"
    for i, rel in enumerate(
        [
            "00_dog/1/aligned/n0201_1.png",
            "00_dog/2/aligned/n0201_1.png",
            "00_dog/1/irrelevant/n0201_1.png",
            "00_dog/1/conflicting/n0201_1.png",  # semantics not selected: out of scope
            "00_dog/5/aligned/n0201_1.png",  # count not selected: out of scope
            "wheeled_vehicle/n3/irrelevant/n0301_7.png",
            "bird/1/aligned/dup.png",  # the bird 'dup', not the dog one
            "00_dog/1/aligned/zzz_unknown.png",  # no such sample: unmatched
            "00_dog/extra.png",  # not where the layout puts it: unrecognised
        ]
    ):
        _png(vis / rel, 100 + i)
    (vis / "00_dog" / "1" / "aligned" / "notes.txt").write_text("not an image")
    typo = root / PERC / "textual_distractor"
    for i, rel in enumerate(
        [
            "dog/4/conflicting/n0201_1_bird.png",
            "dog/4/conflicting/n0201_1_wheeled_vehicle.png",
            "02_wheeled vehicle/4/conflicting/n0301_7.png",  # the class is not named
            "dog/4/conflicting/nomatch_bird.png",
        ]
    ):
        _png(typo / rel, 20 + i)
    return root, _perception_samples(tmp_path)


def test_registered_without_apply():
    pert = PERTURBATIONS["idis-release"]
    assert pert.apply is None and pert.setup is not None


def test_names_normalise():
    assert normalise_class("02_wheeled vehicle") == "wheeled vehicle"
    assert normalise_class("wheeled_vehicle") == "wheeled vehicle"
    assert normalise_class("Wheeled-Vehicle") == "wheeled vehicle"
    assert normalise_class("00_dog") == "dog"


def test_perception_visual(perception, tmp_path):
    root, samples = perception
    out = tmp_path / "v" / "manifest.jsonl"
    spec = {
        "perturbation": "idis-release",
        "root": str(root),
        "task": "perception",
        "kind": "visual",
        "semantics": ["aligned", "irrelevant"],
        "counts": [1, 2, 3],
    }
    n = build_variants(samples, "idis-vis", spec, 0, out)
    rows = {v.variant_id: v for v in read_variants(out)}
    assert n == 5
    assert list(rows) == [
        "in9-dog-1__aligned-n1",
        "in9-dog-1__aligned-n2",
        "in9-dog-1__irrelevant-n1",
        "in9-veh-7__irrelevant-n3",
        "in9-bird-dup__aligned-n1",
    ]
    vis = root / PERC / "visual_distractor"
    v = rows["in9-dog-1__aligned-n1"]
    assert v.sample_id == "in9-dog-1"
    assert v.images == [str(vis / "00_dog/1/aligned/n0201_1.png")]
    assert v.sha256 == [sha256_file(vis / "00_dog/1/aligned/n0201_1.png")]
    assert v.seed is None and v.masks == []
    assert v.question == "What is the main object?"
    assert v.params == {
        "kind": "visual",
        "semantics": "aligned",
        "n": 1,
        "source": "idis-release",
        "distractors": None,
        "distractor_classes": ["Dog"],
        "release_file": f"{PERC}/visual_distractor/00_dog/1/aligned/n0201_1.png",
    }
    assert rows["in9-dog-1__aligned-n2"].images == [str(vis / "00_dog/2/aligned/n0201_1.png")]
    veh = rows["in9-veh-7__irrelevant-n3"]
    assert veh.images == [str(vis / "wheeled_vehicle/n3/irrelevant/n0301_7.png")]
    assert veh.params["distractor_classes"] == ["irrelevant"]
    assert veh.params["n"] == 3
    assert rows["in9-bird-dup__aligned-n1"].images == [str(vis / "bird/1/aligned/dup.png")]
    assert rows["in9-bird-dup__aligned-n1"].params["distractor_classes"] == ["Bird"]

    report = read_json(out.parent / "report.json")
    # 5 samples x 2 semantics x 3 counts = 30 slots, 5 released
    assert (report["samples"], report["variants"], report["excluded"]) == (5, 5, 25)
    assert report["excluded_by_reason"] == {"not-released": 25}
    details = {e["variant_id"]: e["detail"] for e in report["excluded_variants"]}
    assert details["in9-bird-2__aligned-n1"] == (
        f"expected {vis / 'bird' / '1' / 'aligned' / 'n0401_2.png'}"
    )
    assert details["in9-veh-7__irrelevant-n1"] == (
        f"expected {vis / 'wheeled_vehicle' / '1' / 'irrelevant' / 'n0301_7.png'}"
    )
    assert "in9-dog-dup__aligned-n1" in details  # the bird's file is not the dog's
    rel = report["release"]
    assert (rel["released"], rel["matched"], rel["unmatched"]) == (6, 5, 1)
    assert rel["unmatched_examples"] == [
        f"{PERC}/visual_distractor/00_dog/1/aligned/zzz_unknown.png"
    ]
    assert rel["matched_by"] == {
        "aligned-n1": 2,
        "aligned-n2": 1,
        "irrelevant-n1": 1,
        "irrelevant-n3": 1,
    }
    assert rel["samples_with_release"] == 3
    assert rel["out_of_scope"] == 2
    assert (rel["unrecognised"], rel["unrecognised_examples"]) == (
        1,
        [f"{PERC}/visual_distractor/00_dog/extra.png"],
    )
    assert rel["folder"] == f"{PERC}/visual_distractor"


def test_perception_visual_defaults_conflicting(perception, tmp_path):
    root, samples = perception
    out = tmp_path / "v" / "manifest.jsonl"
    spec = {"perturbation": "idis-release", "root": str(root / PERC), "task": "perception"}
    spec["kind"] = "visual"
    build_variants(samples, "idis-vis", spec, 0, out)
    rows = {v.variant_id: v for v in read_variants(out)}
    # root may be the Idis-perception folder itself; counts 1-4 now take n=5 out only
    assert sorted(rows) == sorted(
        [
            "in9-dog-1__aligned-n1",
            "in9-dog-1__aligned-n2",
            "in9-dog-1__conflicting-n1",
            "in9-dog-1__irrelevant-n1",
            "in9-veh-7__irrelevant-n3",
            "in9-bird-dup__aligned-n1",
        ]
    )
    assert rows["in9-dog-1__conflicting-n1"].params["distractor_classes"] is None
    report = read_json(out.parent / "report.json")
    assert report["excluded"] == 5 * 3 * 4 - 6
    assert report["release"]["out_of_scope"] == 1


def test_perception_typographic(perception, tmp_path):
    root, samples = perception
    out = tmp_path / "t" / "manifest.jsonl"
    spec = {
        "perturbation": "idis-release",
        "root": str(root),
        "task": "perception",
        "kind": "typographic",
    }
    assert build_variants(samples, "idis-typo", spec, 0, out) == 3
    rows = {v.variant_id: v for v in read_variants(out)}
    typo = root / PERC / "textual_distractor"
    assert list(rows) == [
        "in9-dog-1__typo-bird-n4",
        "in9-dog-1__typo-wheeled-vehicle-n4",
        "in9-veh-7__typo-n4",
    ]
    v = rows["in9-dog-1__typo-wheeled-vehicle-n4"]
    assert v.params == {
        "kind": "typographic",
        "semantics": "typographic",
        "n": 4,
        "source": "idis-release",
        "typo_class": "wheeled vehicle",
        "release_file": f"{PERC}/textual_distractor/dog/4/conflicting/n0201_1_wheeled_vehicle.png",
    }
    assert v.images == [str(typo / "dog/4/conflicting/n0201_1_wheeled_vehicle.png")]
    assert v.sha256 == [sha256_file(v.images[0])]
    assert rows["in9-dog-1__typo-bird-n4"].params["typo_class"] == "bird"
    assert rows["in9-veh-7__typo-n4"].params["typo_class"] is None
    report = read_json(out.parent / "report.json")
    # default counts [4]: one slot per sample; 3 samples have no file
    assert report["excluded_by_reason"] == {"not-released": 3}
    assert sorted(e["variant_id"] for e in report["excluded_variants"]) == [
        "in9-bird-2__typo-n4",
        "in9-bird-dup__typo-n4",
        "in9-dog-dup__typo-n4",
    ]
    assert (report["release"]["released"], report["release"]["unmatched"]) == (4, 1)
    assert report["release"]["unmatched_examples"] == [
        f"{PERC}/textual_distractor/dog/4/conflicting/nomatch_bird.png"
    ]


def test_on_missing_error_names_sample_and_path(perception, tmp_path):
    root, samples = perception
    spec = {
        "perturbation": "idis-release",
        "root": str(root),
        "task": "perception",
        "kind": "visual",
        "semantics": ["aligned"],
        "counts": [1],
        "on_missing": "error",
    }
    with pytest.raises(ValueError) as err:
        build_variants(samples, "idis-vis", spec, 0, tmp_path / "e" / "manifest.jsonl")
    vis = root / PERC / "visual_distractor"
    assert str(err.value) == (
        f"sample 'in9-veh-7': no released Idis item for aligned-n1 (expected "
        f"{vis / 'wheeled_vehicle' / '1' / 'aligned' / 'n0301_7.png'}); "
        "conditions.idis-vis.on_missing is 'error' (use 'skip' to exclude such variants "
        "and count them)"
    )


def test_no_pairing_at_all_is_an_error(tmp_path):
    root = tmp_path / "Idis"
    _png(root / PERC / "visual_distractor" / "dog" / "1" / "aligned" / "other.png", 1)
    samples = _perception_samples(tmp_path)
    spec = {"perturbation": "idis-release", "root": str(root), "task": "perception"}
    with pytest.raises(
        ValueError,
        match=r"none of the 1 released items .* released keys e.g. other; sample keys e.g. n0201_1",
    ):
        build_variants(samples, "c", {**spec, "kind": "visual"}, 0, tmp_path / "o" / "m.jsonl")
    with pytest.raises(ValueError, match=r"has no Idis-math/ folder"):
        build_variants(
            samples, "c", {**spec, "task": "math", "kind": "visual"}, 0, tmp_path / "o" / "m.jsonl"
        )


def test_sample_without_stem_is_an_error(tmp_path):
    root = tmp_path / "Idis"
    _png(root / PERC / "visual_distractor" / "dog" / "1" / "aligned" / "x.png", 1)
    path = tmp_path / "s.jsonl"
    img = str(_png(tmp_path / "x.png", 3))
    write_samples(path, [Sample("in9-x", "imagenet9", [img], "q", "Dog", "label")])
    spec = {
        "perturbation": "idis-release",
        "root": str(root),
        "task": "perception",
        "kind": "visual",
    }
    with pytest.raises(ValueError, match=r"sample 'in9-x': .* has no meta.stem"):
        build_variants(path, "c", spec, 0, tmp_path / "o" / "m.jsonl")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"kind": None}, r"key 'conditions\.c' lacks 'kind'"),
        (
            {"kind": "textual"},
            r"conditions\.c\.kind: 'textual' is not released for task 'perception'",
        ),
        (
            {"kind": "typographic", "semantics": ["aligned"]},
            r"conditions\.c\.semantics: not used with task 'perception', kind 'typographic'",
        ),
        (
            {"kind": "visual", "semantics": ["handwritten"]},
            r"conditions\.c\.semantics: 'handwritten' is not one of aligned, conflicting, irrelevant",
        ),
        (
            {"kind": "visual", "semantics": ["odd"]},
            r"key 'conditions\.c\.semantics\.0': 'odd' is not",
        ),
        (
            {"kind": "visual", "counts": [0]},
            r"key 'conditions\.c\.counts\.0': 0 is less than the minimum",
        ),
        (
            {"kind": "visual", "counts": [1, 1]},
            r"key 'conditions\.c\.counts': \[1, 1\] has non-unique",
        ),
        (
            {"kind": "visual", "pair_on": "stem"},
            r"key 'conditions\.c\.pair_on': 'stem' is not one of",
        ),
        (
            {"kind": "visual", "image_field": ""},
            r"key 'conditions\.c\.image_field': '' (is too short|should be non-empty)",
        ),
        ({"kind": "visual", "root": " "}, r"conditions\.c\.root: expected the path"),
        ({"kind": "visual", "colour": 1}, r"unknown key 'conditions\.c\.colour'"),
    ],
)
def test_prepare_errors(extra, message, tmp_path):
    spec = {"perturbation": "idis-release", "root": str(tmp_path), "task": "perception", **extra}
    spec = {k: v for k, v in spec.items() if v is not None}
    with pytest.raises(ValueError, match=message):
        prepared_spec("c", spec)


# ---------------------------------------------------------------- math


# (sample id, sample_index, problem_index, problem_version): the mathverse adapter's meta
MATH_SAMPLES = [
    ("mathverse-1", "1", "1", "Text Dominant"),
    ("mathverse-2", "2", "2", "Text Dominant"),
    ("mathverse-3", "3", "3", "Vision Intensive"),
    ("mathverse-5", "5", "1", "Vision Dominant"),
]


def _math_samples(tmp_path: Path) -> Path:
    samples = [
        Sample(
            sample_id=sid,
            dataset="mathverse",
            images=[str(_png(tmp_path / "mv" / f"{idx}.png", 40 + i))],
            question=f"Question {idx}: find x.",
            answer="A",
            answer_type="letter",
            choices=["1", "2"],
            meta={"sample_index": idx, "problem_index": pidx, "problem_version": version},
        )
        for i, (sid, idx, pidx, version) in enumerate(MATH_SAMPLES)
    ]
    path = tmp_path / "samples.jsonl"
    write_samples(path, samples)
    return path


@pytest.fixture
def math_release(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "Idis"
    vis = root / MATH / "visual_distractor"
    # aligned: one meta.jsonl for the group; n from the folder that holds the file or
    # from the image path
    _meta(
        vis / "aligned" / "meta.jsonl",
        [
            {"sample_index": "1", "image": "1.png", "family": "triangle"},  # in n1/ and n2/
            {"sample_index": 2, "image": "n3/2.png"},
            {"sample_index": "99", "image": "99.png"},  # no such sample: unmatched
            {"sample_index": "3", "image": "missing.png"},  # no such file
        ],
    )
    _png(vis / "aligned" / "n1" / "1.png", 1)
    _png(vis / "aligned" / "n2" / "1.png", 2)
    _png(vis / "aligned" / "n3" / "2.png", 3)
    _png(vis / "aligned" / "n1" / "99.png", 4)
    _png(vis / "aligned" / "n4" / "stray.png", 5)  # no row names it: unreferenced
    # irrelevant: a meta.jsonl inside n2/, after a blank line (release_row counts it)
    _meta(
        vis / "irrelevant" / "n2" / "meta.jsonl",
        [None, {"sample_index": "003", "image": "3.png"}, {"sample_index": 3, "image": "3.png"}],
    )  # the same item twice: read once
    _png(vis / "irrelevant" / "n2" / "3.png", 6)
    # conflicting: the count in a field
    _meta(vis / "conflicting" / "meta.jsonl", [{"sample_index": "1", "image": "1.png", "n": 4}])
    _png(vis / "conflicting" / "n4" / "1.png", 7)
    return root, _math_samples(tmp_path)


def test_math_visual(math_release, tmp_path):
    root, samples = math_release
    out = tmp_path / "mv" / "manifest.jsonl"
    spec = {"perturbation": "idis-release", "root": str(root), "task": "math", "kind": "visual"}
    assert build_variants(samples, "idis-mvis", spec, 0, out) == 5
    rows = {v.variant_id: v for v in read_variants(out)}
    assert list(rows) == [
        "mathverse-1__aligned-n1",
        "mathverse-1__aligned-n2",
        "mathverse-1__conflicting-n4",
        "mathverse-2__aligned-n3",
        "mathverse-3__irrelevant-n2",
    ]
    vis = root / MATH / "visual_distractor"
    v = rows["mathverse-1__aligned-n2"]
    assert v.images == [str(vis / "aligned/n2/1.png")]
    assert v.sha256 == [sha256_file(vis / "aligned/n2/1.png")]
    assert v.question == "Question 1: find x."
    assert v.params == {
        "kind": "visual",
        "semantics": "aligned",
        "n": 2,
        "source": "idis-release",
        "distractors": None,
        "release_row": f"{MATH}/visual_distractor/aligned/meta.jsonl:1",
        "release_meta": {"sample_index": "1", "image": "1.png", "family": "triangle"},
        "release_file": f"{MATH}/visual_distractor/aligned/n2/1.png",
    }
    assert rows["mathverse-2__aligned-n3"].images == [str(vis / "aligned/n3/2.png")]
    assert rows["mathverse-3__irrelevant-n2"].images == [str(vis / "irrelevant/n2/3.png")]
    assert rows["mathverse-3__irrelevant-n2"].params["release_row"] == (
        f"{MATH}/visual_distractor/irrelevant/n2/meta.jsonl:2"
    )
    assert rows["mathverse-1__conflicting-n4"].images == [str(vis / "conflicting/n4/1.png")]

    report = read_json(out.parent / "report.json")
    # 4 samples x 3 semantics x 4 counts = 48 slots, 5 released
    assert (report["variants"], report["excluded"]) == (5, 43)
    assert report["excluded_by_reason"] == {"not-released": 43}
    details = {e["variant_id"]: e["detail"] for e in report["excluded_variants"]}
    assert details["mathverse-5__aligned-n1"] == (
        f"expected a row of {vis / 'aligned'}/[n1/]meta.jsonl with sample_index='5' and n=1"
    )
    rel = report["release"]
    assert rel["rows"] == 7
    assert (rel["released"], rel["matched"], rel["unmatched"]) == (7, 5, 1)
    assert rel["duplicates"] == 1
    assert rel["unmatched_examples"] == [f"{MATH}/visual_distractor/aligned/meta.jsonl:3"]
    assert rel["missing_files"] == 1
    assert rel["missing_examples"] == [
        f"{MATH}/visual_distractor/aligned/meta.jsonl:4: missing.png"
    ]
    assert rel["unreferenced_files"] == 1
    assert rel["unreferenced_examples"] == [f"{MATH}/visual_distractor/aligned/n4/stray.png"]
    assert rel["matched_by"] == {
        "aligned-n1": 1,
        "aligned-n2": 1,
        "aligned-n3": 1,
        "conflicting-n4": 1,
        "irrelevant-n2": 1,
    }


def test_math_field_not_found_lists_fields(tmp_path):
    root = tmp_path / "Idis"
    group = root / MATH / "typographic" / "handwritten"
    _meta(group / "meta.jsonl", [{"sample_index": "1", "file": "1.png", "n": 1}])
    _png(group / "n1" / "1.png", 1)
    samples = _math_samples(tmp_path)
    spec = {
        "perturbation": "idis-release",
        "root": str(root),
        "task": "math",
        "kind": "typographic",
        "semantics": ["handwritten"],
    }
    with pytest.raises(ValueError) as err:
        build_variants(samples, "c", spec, 0, tmp_path / "o" / "m.jsonl")
    assert str(err.value) == (
        f"{group / 'meta.jsonl'}: field 'image' (conditions.c.image_field) is not in the "
        "first row; the fields found there: file, n, sample_index. Set "
        "conditions.c.image_field to the field that holds it"
    )
    with pytest.raises(
        ValueError,
        match=r"field 'idx' \(conditions.c.id_field\) .* found there: file, n, sample_index",
    ):
        build_variants(samples, "c", {**spec, "id_field": "idx"}, 0, tmp_path / "o" / "m.jsonl")
    # with the right name it reads: handwritten, n = 1 from the field
    out = tmp_path / "o" / "m.jsonl"
    assert build_variants(samples, "c", {**spec, "image_field": "file"}, 0, out) == 1
    (v,) = read_variants(out)
    assert v.variant_id == "mathverse-1__handwritten-n1"
    assert (v.params["kind"], v.params["semantics"], v.params["n"]) == (
        "typographic",
        "handwritten",
        1,
    )
    assert v.images == [str(group / "n1" / "1.png")]
    # the group not selected (mathwriting) is not required; a selected one is
    with pytest.raises(ValueError, match=r"has no mathwriting/ folder"):
        build_variants(samples, "c", {**spec, "semantics": ["mathwriting"]}, 0, out)


def test_math_textual(tmp_path):
    root = tmp_path / "Idis"
    text = root / MATH / "textual_distractor"
    _meta(
        text / "meta.jsonl",
        [
            {"sample_index": "1", "question": "Question 1: find x. The sky is blue.", "n": 1},
            {"sample_index": "1", "question": "Q1 with two more sentences.", "image": "n2/1.png"},
            {"sample_index": "2", "question": "Question 2: find x.", "n": 1},  # unchanged
            {"sample_index": "42", "question": "Who?", "n": 1},  # no such sample
        ],
    )
    _png(text / "n2" / "1.png", 9)
    samples = _math_samples(tmp_path)
    out = tmp_path / "tx" / "manifest.jsonl"
    spec = {"perturbation": "idis-release", "root": str(root), "task": "math", "kind": "textual"}
    assert build_variants(samples, "idis-text", spec, 0, out) == 2
    rows = {v.variant_id: v for v in read_variants(out)}
    assert list(rows) == ["mathverse-1__textual-n1", "mathverse-1__textual-n2"]
    v1 = rows["mathverse-1__textual-n1"]
    assert v1.question == "Question 1: find x. The sky is blue."
    clean = str(tmp_path / "mv" / "1.png")
    assert v1.images == [clean] and v1.sha256 == [sha256_file(clean)]  # the sample's own
    assert v1.params == {
        "kind": "textual",
        "semantics": "textual",
        "n": 1,
        "source": "idis-release",
        "release_row": f"{MATH}/textual_distractor/meta.jsonl:1",
        "release_meta": {"sample_index": "1", "n": 1},
        "release_image": None,
    }
    v2 = rows["mathverse-1__textual-n2"]
    assert v2.question == "Q1 with two more sentences."
    assert v2.images == [clean]
    assert v2.params["release_image"] == f"{MATH}/textual_distractor/n2/1.png"
    report = read_json(out.parent / "report.json")
    # 4 samples x 4 counts = 16 slots: 2 made, 1 unchanged question, 13 not released
    assert report["excluded_by_reason"] == {"not-released": 13, "question-unchanged": 1}
    (unchanged,) = [e for e in report["excluded_variants"] if e["reason"] == "question-unchanged"]
    assert unchanged["variant_id"] == "mathverse-2__textual-n1"
    assert unchanged["detail"].startswith(f"{MATH}/textual_distractor/meta.jsonl:3:")
    assert (report["release"]["released"], report["release"]["unmatched"]) == (4, 1)
    # the question field must be there
    with pytest.raises(
        ValueError,
        match=r"field 'augmented' \(conditions.idis-text.question_field\) .* found there: n, question, sample_index",
    ):
        build_variants(samples, "idis-text", {**spec, "question_field": "augmented"}, 0, out)


def test_math_textual_needs_a_count(tmp_path):
    root = tmp_path / "Idis"
    _meta(
        root / MATH / "textual_distractor" / "meta.jsonl", [{"sample_index": "1", "question": "Q"}]
    )
    spec = {"perturbation": "idis-release", "root": str(root), "task": "math", "kind": "textual"}
    with pytest.raises(ValueError, match=r"meta.jsonl:1: cannot tell the number of distractors"):
        build_variants(_math_samples(tmp_path), "c", spec, 0, tmp_path / "o" / "m.jsonl")


def test_math_pair_on_problem_index_and_version(tmp_path):
    root = tmp_path / "Idis"
    _meta(
        root / MATH / "textual_distractor" / "n3" / "meta.jsonl",
        [{"problem_index": 1, "problem_version": "vision_dominant", "question": "Q5 noise"}],
    )
    spec = {
        "perturbation": "idis-release",
        "root": str(root),
        "task": "math",
        "kind": "textual",
        "pair_on": "problem_index+problem_version",
        "counts": [3],
    }
    out = tmp_path / "o" / "m.jsonl"
    assert build_variants(_math_samples(tmp_path), "c", spec, 0, out) == 1
    (v,) = read_variants(out)
    # problem 1 is both mathverse-1 (Text Dominant) and mathverse-5 (Vision Dominant)
    assert (v.variant_id, v.sample_id, v.question) == (
        "mathverse-5__textual-n3",
        "mathverse-5",
        "Q5 noise",
    )
    assert v.params["n"] == 3


def test_report_extra_cannot_replace_stage_keys(tmp_path):
    from vlmrobust.perturb.variants import Excluded, _write_report

    path = tmp_path / "report.json"
    gone = [Excluded("s__aligned-n1", "not-released", "expected x.png"), Excluded("s__t", "r")]
    _write_report(path, "c", "p", 2, 1, gone, extra={"release": {"matched": 1}})
    assert read_json(path) == {
        "condition": "c",
        "perturbation": "p",
        "samples": 2,
        "variants": 1,
        "excluded": 2,
        "excluded_by_reason": {"not-released": 1, "r": 1},
        "excluded_variants": [
            {"variant_id": "s__aligned-n1", "reason": "not-released", "detail": "expected x.png"},
            {"variant_id": "s__t", "reason": "r", "detail": ""},
        ],
        "release": {"matched": 1},
    }
    with pytest.raises(ValueError, match="report_extra key 'variants'"):
        _write_report(path, "c", "p", 2, 1, [], extra={"variants": 3})
    # nor the stage's own blocks (the expected count, the verification)
    with pytest.raises(ValueError, match="report_extra key 'expected_variants'"):
        _write_report(
            path, "c", "p", 2, 1, [], extra={"expected_variants": 1}, stage={"expected_variants": 2}
        )


def test_schema_fills_defaults_prepare_accepts(perception, tmp_path):
    from vlmrobust.core.config import ConfigError, validate_config

    root, samples = perception
    cond = {"perturbation": "idis-release", "root": str(root), "task": "perception"}
    cond["kind"] = "visual"
    filled = validate_config({"conditions": {"idis-vis": cond}})["conditions"]["idis-vis"]
    # the schema fills the defaults (plus the stage's own two keys)
    assert filled == {
        "semantics": None,
        "counts": None,
        "pair_on": "sample_index",
        "id_field": None,
        "version_field": "problem_version",
        "image_field": "image",
        "question_field": "question",
        "count_field": "n",
        "on_missing": "skip",
        **cond,
        "expected_variants": None,
        "verification": None,
    }
    out = tmp_path / "s" / "manifest.jsonl"
    assert build_variants(samples, "idis-vis", filled, 0, out) == 6
    with pytest.raises(ConfigError, match="semantics"):
        validate_config({"conditions": {"c": {**cond, "semantics": ["sideways"]}}})
    with pytest.raises(ConfigError, match="lacks 'root'"):
        validate_config({"conditions": {"c": {"perturbation": "idis-release"}}})


def test_two_files_for_one_variant_is_an_error(tmp_path):
    root = tmp_path / "Idis"
    vis = root / PERC / "visual_distractor"
    _png(vis / "dog" / "1" / "aligned" / "n0201_1.png", 1)
    _png(vis / "00_dog" / "1" / "aligned" / "n0201_1.png", 2)
    spec = {"perturbation": "idis-release", "root": str(root), "task": "perception"}
    with pytest.raises(ValueError) as err:
        build_variants(
            _perception_samples(tmp_path), "c", {**spec, "kind": "visual"}, 0, tmp_path / "m.jsonl"
        )
    assert str(err.value) == (
        "sample 'in9-dog-1': two released items for aligned-n1: "
        f"{PERC}/visual_distractor/00_dog/1/aligned/n0201_1.png and "
        f"{PERC}/visual_distractor/dog/1/aligned/n0201_1.png"
    )
