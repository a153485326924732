"""The perturbation stage: samples JSONL → variant manifest + images."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlmrobust.core.io import read_jsonl, sha256_file
from vlmrobust.core.records import Sample, read_variants, write_samples
from vlmrobust.core.seeding import derive_seed, rng_for
from vlmrobust.perturb import (
    CORRUPTION_METHODS,
    PERTURBATIONS,
    Perturbation,
    VariantPlan,
    build_variants,
    corrupt_image,
)

CORRUPT = {"perturbation": "corruption", "assignment": "random"}


def _image(path: Path, mode: str, size: tuple[int, int], seed: int) -> str:
    rng = np.random.default_rng(seed)
    nb = Image.getmodebands(mode)
    data = rng.integers(0, 256, size[0] * size[1] * nb, np.uint8).tobytes()
    Image.frombytes(mode, size, data).save(path)
    return str(path)


@pytest.fixture
def samples_path(tmp_path: Path) -> Path:
    src = tmp_path / "raw"
    src.mkdir()
    samples = [
        Sample(
            sample_id=f"demo-{i}",
            dataset="demo",
            images=[_image(src / f"{i}.png", "RGB", (40 + i, 36), i)],
            question=f"What is shown in image {i}?",
            answer="A",
            answer_type="letter",
            choices=["x", "y"],
        )
        for i in range(3)
    ]
    samples.append(
        Sample(
            sample_id="demo-multi",
            dataset="demo",
            images=[
                _image(src / "m0.png", "L", (20, 50), 10),  # small side → enlarged inside
                _image(src / "m1.png", "RGBA", (64, 33), 11),
            ],
            question="Compare <image 1> and <image 2>.",
            answer="yes",
            answer_type="yes/no",
        )
    )
    path = tmp_path / "samples.jsonl"
    write_samples(path, samples)
    return path


def test_none_points_to_originals(samples_path, tmp_path):
    out = tmp_path / "variants" / "clean" / "manifest.jsonl"
    n = build_variants(samples_path, "clean", {"perturbation": "none"}, 0, out)
    assert n == 4
    rows = read_variants(out)
    samples = read_jsonl(samples_path)
    assert [r.variant_id for r in rows] == [s["sample_id"] for s in samples]
    for row, sample in zip(rows, samples, strict=True):
        assert row.images == sample["images"]
        assert row.sha256 == [sha256_file(p) for p in sample["images"]]
        assert row.question == sample["question"]
        assert (row.perturbation, row.condition, row.params, row.masks) == ("none", "clean", {}, [])
        assert row.seed is None
    assert not (out.parent / "images").exists()


def test_random_assignment(samples_path, tmp_path):
    out = tmp_path / "a" / "manifest.jsonl"
    assert build_variants(samples_path, "corrupt", CORRUPT, 7, out) == 4
    rows = read_variants(out)
    for row in rows:
        # the draw documented in the spec: method uniform, then severity uniform
        rng = rng_for(7, "corrupt", row.sample_id)
        method = CORRUPTION_METHODS[int(rng.integers(20))]
        severity = None if method == "blank" else [1, 2, 3, 4, 5][int(rng.integers(5))]
        assert row.params == {"method": method, "severity": severity}
        assert row.variant_id == row.sample_id
        assert row.seed == derive_seed(7, "corrupt", row.variant_id)
        assert row.perturbation == "corruption"
        assert row.images == [
            str(out.parent / "images" / f"{row.variant_id}_{k}.png") for k in range(len(row.images))
        ]
        assert row.sha256 == [sha256_file(p) for p in row.images]
        assert row.masks == []
    multi = rows[-1]
    assert multi.sample_id == "demo-multi" and len(multi.images) == 2
    # every image of a sample: same method/severity, own seed; sizes and modes kept
    src = read_jsonl(samples_path)[-1]["images"]
    for k, (orig, new) in enumerate(zip(src, multi.images, strict=True)):
        with Image.open(orig) as a, Image.open(new) as b:
            assert a.size == b.size and a.mode == b.mode
            expected = corrupt_image(
                a,
                multi.params["method"],
                multi.params["severity"],
                derive_seed(7, "corrupt", "demo-multi", k),
            )
            assert b.tobytes() == expected.tobytes()

    # reproducible; another seed draws differently
    again = tmp_path / "b" / "manifest.jsonl"
    build_variants(samples_path, "corrupt", CORRUPT, 7, again)
    assert [r.to_dict() | {"images": None} for r in read_variants(again)] == [
        r.to_dict() | {"images": None} for r in rows
    ]
    other = tmp_path / "c" / "manifest.jsonl"
    build_variants(samples_path, "corrupt", CORRUPT, 8, other)
    assert [r.sha256 for r in read_variants(other)] != [r.sha256 for r in rows]
    assert [r.seed for r in read_variants(other)] != [r.seed for r in rows]


def test_random_respects_methods_and_severities(samples_path, tmp_path):
    spec = {**CORRUPT, "methods": ["fog", "blank"], "severities": [2]}
    out = tmp_path / "v" / "manifest.jsonl"
    build_variants(samples_path, "c", spec, 3, out)
    for row in read_variants(out):
        assert row.params in (
            {"method": "fog", "severity": 2},
            {"method": "blank", "severity": None},
        )


def test_all_assignment(samples_path, tmp_path):
    spec = {
        "perturbation": "corruption",
        "assignment": "all",
        "severities": [1, 4],
        "blank_fill": "black",
    }
    out = tmp_path / "all" / "manifest.jsonl"
    n = build_variants(samples_path, "corrupt-all", spec, 0, out)
    assert n == 4 * (19 * 2 + 1)
    rows = read_variants(out)
    assert Counter(r.sample_id for r in rows) == {
        s: 39 for s in ("demo-0", "demo-1", "demo-2", "demo-multi")
    }
    ids = [r.variant_id for r in rows if r.sample_id == "demo-0"]
    expected = ["demo-0__blank"] + [
        f"demo-0__{m}-s{s}" for m in CORRUPTION_METHODS[1:] for s in (1, 4)
    ]
    assert ids == expected
    for row in rows:
        assert row.seed == derive_seed(0, "corrupt-all", row.variant_id)
        assert row.sha256 == [sha256_file(p) for p in row.images]
        assert all(Path(p).name == f"{row.variant_id}_{k}.png" for k, p in enumerate(row.images))
    blank = next(r for r in rows if r.variant_id == "demo-0__blank")
    assert blank.params == {"method": "blank", "severity": None}
    with Image.open(blank.images[0]) as im:
        assert im.getcolors() == [(im.width * im.height, (0, 0, 0))]  # blank_fill black
    assert len(list((out.parent / "images").iterdir())) == 5 * 39


def test_threads_give_identical_results(samples_path, tmp_path):
    spec = {"perturbation": "corruption", "assignment": "all", "severities": [3]}
    one = tmp_path / "t1" / "manifest.jsonl"
    two = tmp_path / "t2" / "manifest.jsonl"
    build_variants(samples_path, "c", spec, 5, one, threads=1)
    build_variants(samples_path, "c", spec, 5, two, threads=2)
    rows1, rows2 = read_variants(one), read_variants(two)
    assert [r.sha256 for r in rows1] == [r.sha256 for r in rows2]
    assert [r.to_dict() | {"images": None} for r in rows1] == [
        r.to_dict() | {"images": None} for r in rows2
    ]
    for r in rows2:
        assert r.sha256 == [sha256_file(p) for p in r.images]


def test_unknown_perturbation(samples_path, tmp_path):
    with pytest.raises(
        ValueError,
        match=r"conditions\.odd\.perturbation: unknown perturbation 'rain'; known: none, distraction, corruption",
    ):
        build_variants(samples_path, "odd", {"perturbation": "rain"}, 0, tmp_path / "m.jsonl")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"assignment": "some"},
            r"key 'conditions\.c\.assignment': 'some' is not one of \['random', 'all'\]",
        ),
        ({"methods": ["fog", "rain"]}, r"key 'conditions\.c\.methods\.1': 'rain' is not one of"),
        ({"methods": []}, r"key 'conditions\.c\.methods': \[\] should be non-empty"),
        ({"methods": ["fog", "fog"]}, r"key 'conditions\.c\.methods': .* non-unique"),
        ({"severities": [0, 3]}, r"key 'conditions\.c\.severities\.0': 0 is less than the minimum"),
        (
            {"severities": [2.5]},
            r"key 'conditions\.c\.severities\.0': 2.5 is not of type 'integer'",
        ),
        ({"blank_fill": "nocolour"}, r"conditions\.c\.blank_fill: 'nocolour' is not a colour"),
        ({"severity": [3]}, r"unknown key 'conditions\.c\.severity' \(allowed here: .*assignment"),
    ],
)
def test_bad_corruption_spec(samples_path, tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        build_variants(samples_path, "c", {**CORRUPT, **change}, 0, tmp_path / "m.jsonl")
    assert not (tmp_path / "m.jsonl").exists()


@pytest.mark.parametrize("spec", [{"perturbation": "none"}, CORRUPT])
def test_unreadable_image_names_sample_and_file(tmp_path, spec):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"not an image")
    good = _image(tmp_path / "ok.png", "RGB", (40, 40), 0)
    samples = [
        Sample("s-ok", "demo", [good], "q", "a", "text"),
        Sample("s-bad", "demo", [good, str(bad)], "q", "a", "text"),
    ]
    write_samples(tmp_path / "samples.jsonl", samples)
    out = tmp_path / "v" / "manifest.jsonl"
    with pytest.raises(ValueError, match=rf"sample 's-bad': cannot read image {bad}"):
        build_variants(tmp_path / "samples.jsonl", "c", spec, 0, out)
    assert not out.exists()


def test_missing_image_file(tmp_path):
    write_samples(
        tmp_path / "samples.jsonl",
        [Sample("s-gone", "demo", [str(tmp_path / "gone.png")], "q", "a", "text")],
    )
    with pytest.raises(ValueError, match=r"sample 's-gone': cannot read image .*gone\.png"):
        build_variants(tmp_path / "samples.jsonl", "c", CORRUPT, 0, tmp_path / "m.jsonl", 2)


def test_duplicate_sample_ids(tmp_path):
    img = _image(tmp_path / "a.png", "RGB", (40, 40), 0)
    write_samples(
        tmp_path / "samples.jsonl",
        [Sample("dup", "demo", [img], "q", "a", "text")] * 2,
    )
    with pytest.raises(ValueError, match="variant id 'dup' occurs twice"):
        build_variants(tmp_path / "samples.jsonl", "c", CORRUPT, 0, tmp_path / "m.jsonl")


def test_a_plugged_in_perturbation_with_masks(samples_path, tmp_path, monkeypatch):
    """A later perturbation is a plain function (image, params, seed) -> (image, mask)."""

    def invert_box(image, params, seed):
        out = image.convert("RGB")
        box = (0, 0, params["size"], params["size"])
        out.paste(Image.new("RGB", (params["size"],) * 2, "black"), box)
        mask = Image.new("L", image.size, 0)
        mask.paste(255, box)
        return out, mask

    pert = Perturbation(
        "boxtest",
        prepare=lambda condition, spec: {"size": 4, **spec},
        plan=lambda sample, condition, spec, seed: [
            VariantPlan(sample.sample_id, {"size": spec["size"]}, seed, question="new?")
        ],
        apply=invert_box,
    )
    monkeypatch.setitem(PERTURBATIONS, "boxtest", pert)
    out = tmp_path / "box" / "manifest.jsonl"
    assert build_variants(samples_path, "box", {"perturbation": "boxtest"}, 1, out) == 4
    multi = read_variants(out)[-1]
    assert multi.question == "new?" and multi.params == {"size": 4}
    assert multi.masks == [
        str(out.parent / "images" / f"demo-multi_{k}_mask.png") for k in range(2)
    ]
    with Image.open(multi.masks[1]) as m:
        assert sorted(m.getcolors()) == [(16, 255), (64 * 33 - 16, 0)]


def test_distraction_uses_the_released_edited_images(tmp_path):
    src = tmp_path / "raw"
    src.mkdir()
    clean = _image(src / "c.png", "RGB", (40, 30), 1)
    edited = _image(src / "e.png", "RGB", (40, 30), 2)
    sample = Sample(
        sample_id="distract-bench-1",
        dataset="distract-bench",
        images=[clean],
        question="Q?",
        answer="B",
        answer_type="letter",
        choices=["a", "b"],
        meta={"distracted_images": [edited]},
    )
    write_samples(tmp_path / "s.jsonl", [sample])
    n = build_variants(
        tmp_path / "s.jsonl",
        "distracted",
        {"perturbation": "distraction"},
        0,
        tmp_path / "d" / "manifest.jsonl",
    )
    assert n == 1
    row = read_jsonl(tmp_path / "d" / "manifest.jsonl")[0]
    assert row["images"] == [edited] and row["sha256"] == [sha256_file(edited)]
    assert row["variant_id"] == "distract-bench-1" and row["params"] == {"source": "released"}
    write_samples(tmp_path / "s.jsonl", [Sample("x-1", "x", [clean], "Q?", "B", "letter")])
    with pytest.raises(ValueError, match="sample 'x-1': condition 'distracted' uses the released"):
        build_variants(
            tmp_path / "s.jsonl",
            "distracted",
            {"perturbation": "distraction"},
            0,
            tmp_path / "d2" / "manifest.jsonl",
        )
