"""The ``mask`` perturbation (CRM): geometry, filling, and the variant stage."""

from __future__ import annotations

import time
from itertools import product
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFilter

from vlmrobust.core.io import read_jsonl, sha256_file
from vlmrobust.core.records import Sample, read_variants, write_samples
from vlmrobust.core.seeding import derive_seed, rng_for
from vlmrobust.perturb import PERTURBATIONS, build_variants
from vlmrobust.perturb.masking import (
    box_from_bbox,
    fill_box,
    gap_fraction,
    overlap_area,
    place_random_box,
)
from vlmrobust.perturb.variants import prepared_spec

# ---------------------------------------------------------------- geometry


def test_registered():
    assert "mask" in PERTURBATIONS
    assert PERTURBATIONS["mask"].apply is not None


def test_box_from_bbox():
    assert box_from_bbox({"startX": 3, "startY": 4, "w": 5, "h": 6}) == (3, 4, 8, 10)
    # non-integer edges are rounded half up, each edge on its own: 2.4 → 2, 5.7 → 6
    assert box_from_bbox({"startX": 2.4, "startY": 0.5, "w": 3.3, "h": 1.0}) == (2, 1, 6, 2)
    with pytest.raises(ValueError, match="lacks h"):
        box_from_bbox({"startX": 1, "startY": 1, "w": 2})
    with pytest.raises(ValueError, match="negative"):
        box_from_bbox({"startX": 1, "startY": 1, "w": -2, "h": 3})


@pytest.mark.parametrize(
    ("a", "b", "size", "expected"),
    [
        # side by side, 10 px apart on a 200 px wide image: 10 / 200
        ((0, 0, 20, 20), (30, 0, 50, 20), (200, 100), 0.05),
        ((30, 0, 50, 20), (0, 0, 20, 20), (200, 100), 0.05),
        # one above the other, 15 px apart on a 100 px high image
        ((0, 0, 20, 20), (0, 35, 20, 40), (200, 100), 0.15),
        # diagonal: horizontal 20 / 200 = 0.1, vertical 15 / 100 = 0.15 → the larger
        ((0, 0, 10, 10), (30, 25, 40, 35), (200, 100), 0.15),
        ((30, 25, 40, 35), (0, 0, 10, 10), (200, 100), 0.15),
        # diagonal where the horizontal gap wins: 60 / 200 = 0.3 > 5 / 100
        ((0, 0, 10, 10), (70, 15, 80, 20), (200, 100), 0.3),
        # overlapping, touching, containing: 0
        ((0, 0, 10, 10), (5, 5, 15, 15), (200, 100), 0.0),
        ((0, 0, 10, 10), (10, 0, 20, 10), (200, 100), 0.0),
        ((0, 0, 10, 10), (10, 10, 20, 20), (200, 100), 0.0),
        ((0, 0, 50, 50), (10, 10, 20, 20), (200, 100), 0.0),
    ],
)
def test_gap_fraction(a, b, size, expected):
    assert gap_fraction(a, b, size) == pytest.approx(expected, abs=1e-12)


def test_gap_fraction_is_exact_at_the_threshold():
    # the placement compares gap >= min_distance: 10 px of 200 must equal 0.05 exactly
    assert gap_fraction((0, 0, 20, 20), (30, 0, 50, 20), (200, 100)) >= 0.05


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((0, 0, 10, 10), (5, 5, 20, 20), 25),
        ((5, 5, 20, 20), (0, 0, 10, 10), 25),
        ((0, 0, 10, 10), (2, 3, 4, 8), 10),  # contained: its own area
        ((0, 0, 10, 10), (10, 0, 20, 10), 0),  # touching
        ((0, 0, 10, 10), (30, 30, 40, 40), 0),
        ((0, 0, 10, 4), (8, 0, 30, 10), 8),  # 2 wide, 4 high
    ],
)
def test_overlap_area(a, b, expected):
    assert overlap_area(a, b) == expected


# A 20x10 image, a 5x5 target at the top left, another box at the bottom right:
#
#   x:  0....5....10...15..19
#   y0  TTTTT...............
#   ..  TTTTT...............
#   y4  TTTTT...............
#   y6  ............OOOO....
#   y9  ............OOOO....
#
# A 5x5 box has top-left x in 0..15, y in 0..5. min_distance 0.1 → horizontal gap
# >= 2 px (0.1 * 20) or vertical gap >= 1 px (0.1 * 10; impossible: y + 0 <= 5 = the
# target's bottom). Horizontal gap = x - 5 → x >= 7. The box O = (12, 6, 16, 10) is hit
# when x + 5 > 12 and x < 16 (x >= 8) and y + 5 > 6 (y >= 2). Valid: x = 7 (any y: 6
# positions) and x in 8..15 with y in 0..1 (16 positions) = 22.
TARGET = (0, 0, 5, 5)
OTHER = (12, 6, 16, 10)
VALID_01 = {(7, y) for y in range(6)} | {(x, y) for x in range(8, 16) for y in range(2)}


def _boxes(xys, w=5, h=5):
    return {(x, y, x + w, y + h) for x, y in xys}


def test_place_random_box_reaches_exactly_the_valid_positions():
    assert len(VALID_01) == 22
    reached = set()
    for seed in range(2000):
        box, info = place_random_box(
            TARGET, [TARGET, OTHER], (20, 10), 0.1, np.random.default_rng(seed)
        )
        assert info["placement"] == "ok" and info["overlap_px"] == 0
        assert box[2] - box[0] == 5 and box[3] - box[1] == 5
        assert box[0] >= 0 and box[2] <= 20 and box[1] >= 0 and box[3] <= 10
        assert gap_fraction(box, TARGET, (20, 10)) >= 0.1
        assert overlap_area(box, OTHER) == 0
        assert info["gap"] == round((box[0] - 5) / 20, 4)
        reached.add(box)
    assert reached == _boxes(VALID_01)


def test_place_random_box_smaller_min_distance():
    # min_distance 0.05 → gap >= 1 px → x >= 6: adds x = 6 (6 positions) = 28
    reached = {
        place_random_box(TARGET, [TARGET, OTHER], (20, 10), 0.05, np.random.default_rng(s))[0]
        for s in range(2000)
    }
    assert reached == _boxes(VALID_01 | {(6, y) for y in range(6)})
    assert len(reached) == 28


def test_place_random_box_is_roughly_uniform():
    counts: dict[tuple, int] = {}
    n = 22 * 200
    for seed in range(n):
        box, _ = place_random_box(
            TARGET, [TARGET, OTHER], (20, 10), 0.1, np.random.default_rng(seed)
        )
        counts[box] = counts.get(box, 0) + 1
    assert len(counts) == 22
    assert min(counts.values()) > 120 and max(counts.values()) < 280  # expected 200 each


def test_place_random_box_overlap_fallback():
    # O = (8, 0, 20, 10) covers the right of the image; a far-enough box (x >= 6)
    # overlaps it by (min(x + 5, 20) - max(x, 8)) * 5: x = 6 → 15, x = 7 → 20, else 25.
    other = (8, 0, 20, 10)
    reached = set()
    for seed in range(300):
        box, info = place_random_box(
            TARGET, [TARGET, other], (20, 10), 0.05, np.random.default_rng(seed)
        )
        assert info == {"placement": "overlap", "gap": 0.05, "overlap_px": 15}
        reached.add(box)
    assert reached == _boxes((6, y) for y in range(6))


def test_place_random_box_too_close_fallback():
    # min_distance 0.6 → 12 px; the farthest a 5x5 box gets is x = 15: 10 px = 0.5
    reached = set()
    for seed in range(300):
        box, info = place_random_box(TARGET, [TARGET], (20, 10), 0.6, np.random.default_rng(seed))
        assert info == {"placement": "too-close", "gap": 0.5, "overlap_px": 0}
        reached.add(box)
    assert reached == _boxes((15, y) for y in range(6))


def test_place_random_box_too_close_records_overlap():
    # a target as large as the image: every position is the target itself
    boxes = [(0, 0, 8, 6), (1, 1, 3, 3)]
    box, info = place_random_box(boxes[0], boxes, (8, 6), 0.05, np.random.default_rng(0))
    assert box == (0, 0, 8, 6)
    assert info == {"placement": "too-close", "gap": 0.0, "overlap_px": 48 + 4}


def test_place_random_box_deterministic():
    args = ((30, 40, 90, 70), [(30, 40, 90, 70), (150, 10, 190, 60)], (200, 120), 0.05)
    a = place_random_box(*args, np.random.default_rng(123))
    b = place_random_box(*args, np.random.default_rng(123))
    assert a == b
    draws = {place_random_box(*args, np.random.default_rng(s))[0] for s in range(20)}
    assert len(draws) > 10


def _brute_force(target, others, size, min_distance):
    """The placement rule by enumeration: (placement, candidate boxes)."""
    w, h = target[2] - target[0], target[3] - target[1]
    rows = []
    for y, x in product(range(size[1] - h + 1), range(size[0] - w + 1)):
        box = (x, y, x + w, y + h)
        rows.append(
            (box, gap_fraction(box, target, size), sum(overlap_area(box, o) for o in others))
        )
    far = [r for r in rows if r[1] >= min_distance]
    ok = [r for r in far if r[2] == 0]
    if ok:
        return "ok", {r[0] for r in ok}
    if far:
        least = min(r[2] for r in far)
        return "overlap", {r[0] for r in far if r[2] == least}
    top = max(r[1] for r in rows)
    return "too-close", {r[0] for r in rows if r[1] == top}


def test_place_random_box_matches_enumeration():
    gen = np.random.default_rng(7)
    seen = set()
    for _case in range(60):
        size = (int(gen.integers(6, 16)), int(gen.integers(6, 16)))
        boxes = []
        for _ in range(int(gen.integers(1, 4))):
            x0, y0 = int(gen.integers(0, size[0] - 1)), int(gen.integers(0, size[1] - 1))
            x1, y1 = int(gen.integers(x0 + 1, size[0] + 1)), int(gen.integers(y0 + 1, size[1] + 1))
            boxes.append((x0, y0, x1, y1))
        md = float(gen.choice([0.0, 0.05, 0.1, 0.3]))
        placement, expected = _brute_force(boxes[0], boxes, size, md)
        seen.add(placement)
        reached = set()
        for seed in range(40 * len(expected)):
            box, info = place_random_box(boxes[0], boxes, size, md, np.random.default_rng(seed))
            assert info["placement"] == placement
            assert info["overlap_px"] == sum(overlap_area(box, o) for o in boxes)
            reached.add(box)
        assert reached == expected
    assert seen == {"ok", "overlap", "too-close"}


def test_place_random_box_is_fast_on_a_large_image():
    boxes = [
        (100, 100, 400, 300),
        (800, 50, 1200, 600),
        (50, 1500, 700, 1900),
        (1300, 1300, 1900, 1700),
        (900, 900, 1000, 1000),
    ]
    start = time.perf_counter()
    box, info = place_random_box(boxes[4], boxes, (2000, 2000), 0.05, np.random.default_rng(0))
    # ~0.1 s here; a loop over the 3.6 million positions in Python would take minutes
    assert time.perf_counter() - start < 2.0
    assert info["placement"] == "ok"
    assert all(overlap_area(box, b) == 0 for b in boxes)


# ---------------------------------------------------------------- filling


def _two_colour() -> Image.Image:
    # 4x2: 3 pixels (255, 0, 10), 5 pixels (0, 200, 10)
    im = Image.new("RGB", (4, 2), (0, 200, 10))
    for xy in ((0, 0), (3, 0), (2, 1)):
        im.putpixel(xy, (255, 0, 10))
    return im


def test_fill_black_and_mask():
    im = _two_colour()
    out, mask = fill_box(im, (1, 0, 3, 2), "black", 0.25)
    assert out.mode == "RGB" and out.size == (4, 2)
    for x, y in product(range(4), range(2)):
        inside = 1 <= x < 3
        assert out.getpixel((x, y)) == ((0, 0, 0) if inside else im.getpixel((x, y)))
        assert mask.getpixel((x, y)) == (255 if inside else 0)
    assert mask.mode == "L" and mask.size == (4, 2)
    assert im.getpixel((1, 0)) == (0, 200, 10)  # the input is left alone


def test_fill_mean_is_the_whole_image_mean():
    im = _two_colour()
    # R: 3 * 255 / 8 = 95.625 → 96; G: 5 * 200 / 8 = 125; B: 10
    out, mask = fill_box(im, (0, 0, 1, 1), "mean", 0.25)
    assert out.getpixel((0, 0)) == (96, 125, 10)
    assert out.getpixel((3, 0)) == (255, 0, 10)
    assert sorted(mask.getcolors()) == [(1, 255), (7, 0)]
    # rounding half up: a mean of 0.5 → 1
    half = Image.new("RGB", (2, 1), (0, 0, 0))
    half.putpixel((1, 0), (1, 1, 1))
    assert fill_box(half, (0, 0, 1, 1), "mean", 0.25)[0].getpixel((0, 0)) == (1, 1, 1)


def _edge_image() -> Image.Image:
    im = Image.new("RGB", (20, 20), (0, 0, 0))
    im.paste((255, 255, 255), (10, 0, 20, 20))
    return im


def test_fill_blur_blurs_the_box_only():
    im = _edge_image()
    box = (4, 4, 16, 12)  # 12 x 8: radius 0.25 * 8 = 2
    out, mask = fill_box(im, box, "blur", 0.25)
    got = np.asarray(out)
    orig = np.asarray(im)
    outside = np.asarray(mask) == 0
    assert (got[outside] == orig[outside]).all()
    expected = np.asarray(im.crop(box).filter(ImageFilter.GaussianBlur(2.0)))
    assert (got[4:12, 4:16] == expected).all()
    assert (got[4:12, 4:16] != orig[4:12, 4:16]).any()  # the edge got blurred
    other = np.asarray(im.crop(box).filter(ImageFilter.GaussianBlur(1.0)))
    assert (expected != other).any()  # so the radius is checked
    assert sorted(mask.getcolors()) == [(96, 255), (400 - 96, 0)]


def test_fill_blur_radius_at_least_one_pixel():
    im = _edge_image()
    box = (8, 8, 12, 12)  # 4 x 4: 0.1 * 4 = 0.4 → 1
    out, _ = fill_box(im, box, "blur", 0.1)
    expected = np.asarray(im.crop(box).filter(ImageFilter.GaussianBlur(1.0)))
    assert (np.asarray(out)[8:12, 8:12] == expected).all()


@pytest.mark.parametrize("mode", ["RGBA", "L", "P"])
def test_fill_converts_to_rgb(mode):
    im = _two_colour().convert(mode)
    out, mask = fill_box(im, (0, 0, 2, 2), "black", 0.25)
    assert out.mode == "RGB" and out.size == im.size and mask.size == im.size
    assert out.getpixel((0, 1)) == (0, 0, 0)
    assert out.getpixel((3, 1)) == im.convert("RGB").getpixel((3, 1))


def test_fill_unknown():
    with pytest.raises(ValueError, match="unknown fill 'grey'"):
        fill_box(_two_colour(), (0, 0, 1, 1), "grey", 0.25)


# ---------------------------------------------------------------- the stage

A = {"startX": 0, "startY": 0, "w": 20, "h": 15}  # (0, 0, 20, 15)
B = {"startX": 5, "startY": 5, "w": 10, "h": 5}  # (5, 5, 15, 10), inside A


def _png(path: Path, size=(60, 40), seed=0) -> str:
    rng = np.random.default_rng(seed)
    data = rng.integers(1, 256, size[0] * size[1] * 3, np.uint8).tobytes()  # no black
    Image.frombytes("RGB", size, data).save(path)
    return str(path)


def _sample(sid, images, meta) -> Sample:
    return Sample(sid, "visargs", images, "What is shown?", "a cat", "text", meta=meta)


@pytest.fixture
def samples_path(tmp_path: Path) -> Path:
    img = _png(tmp_path / "img.png")
    samples = [
        _sample("vis-0", [img], {"b_box": [A, B], "premise_index": 0, "image_size": [60, 40]}),
        _sample("vis-1", [img], {"b_box": [A, B], "premise_index": 1}),  # size from the file
    ]
    path = tmp_path / "samples.jsonl"
    write_samples(path, samples)
    return path


def _pixels(path) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def test_specific(samples_path, tmp_path):
    out = tmp_path / "v" / "mask-specific" / "manifest.jsonl"
    spec = {"perturbation": "mask"}  # region specific, fill black by default
    assert build_variants(samples_path, "mask-specific", spec, 3, out) == 2
    rows = read_variants(out)
    assert [r.params for r in rows] == [
        {
            "region": "specific",
            "premise_index": 0,
            "target_box": [0, 0, 20, 15],
            "box": [0, 0, 20, 15],
            "image_size": [60, 40],
            "gap": 0.0,
            "placement": "ok",
            "overlap_px": 50,  # B lies inside A
            "covered": [0, 1],
        },
        {
            "region": "specific",
            "premise_index": 1,
            "target_box": [5, 5, 15, 10],
            "box": [5, 5, 15, 10],
            "image_size": [60, 40],
            "gap": 0.0,
            "placement": "ok",
            "overlap_px": 50,
            "covered": [1],  # A: 50 of 300 px, less than half
        },
    ]
    orig = _pixels(read_jsonl(samples_path)[0]["images"][0])
    images_dir = out.parent / "images"
    for row in rows:
        assert row.perturbation == "mask" and row.variant_id == row.sample_id
        assert row.seed == derive_seed(3, "mask-specific", row.sample_id)
        assert row.images == [str(images_dir / f"{row.variant_id}_0.png")]
        assert row.masks == [str(images_dir / f"{row.variant_id}_0_mask.png")]
        assert row.sha256 == [sha256_file(row.images[0])]
        x0, y0, x1, y1 = row.params["box"]
        got = _pixels(row.images[0])
        assert (got[y0:y1, x0:x1] == 0).all()
        inside = np.zeros(got.shape[:2], bool)
        inside[y0:y1, x0:x1] = True
        assert (got[~inside] == orig[~inside]).all()
        with Image.open(row.masks[0]) as m:
            assert m.mode == "L"
            assert (np.asarray(m) == np.where(inside, 255, 0)).all()


def test_random(samples_path, tmp_path):
    out = tmp_path / "v" / "mask-random" / "manifest.jsonl"
    spec = {"perturbation": "mask", "region": "random"}
    build_variants(samples_path, "mask-random", spec, 3, out)
    rows = read_variants(out)
    boxes = [(0, 0, 20, 15), (5, 5, 15, 10)]
    for row in rows:
        p = row.params
        target = boxes[p["premise_index"]]
        box = tuple(p["box"])
        # the documented draw: rng_for(seed, condition, sample_id)
        exp_box, info = place_random_box(
            target, boxes, (60, 40), 0.05, rng_for(3, "mask-random", row.sample_id)
        )
        assert box == exp_box
        assert (p["gap"], p["placement"], p["overlap_px"]) == (
            info["gap"],
            info["placement"],
            info["overlap_px"],
        )
        assert p["region"] == "random" and p["target_box"] == list(target)
        assert p["placement"] == "ok" and p["overlap_px"] == 0 and p["covered"] == []
        assert box[2] - box[0] == target[2] - target[0] and box[3] - box[1] == target[3] - target[1]
        assert gap_fraction(box, target, (60, 40)) >= 0.05
        got = _pixels(row.images[0])
        assert (got[box[1] : box[3], box[0] : box[2]] == 0).all()
        assert row.masks and Path(row.masks[0]).exists()
    # a second run gives the same manifest and bytes
    again = tmp_path / "w" / "mask-random" / "manifest.jsonl"
    build_variants(samples_path, "mask-random", spec, 3, again, threads=1)
    rows2 = read_variants(again)
    strip = {"images": None, "masks": None}
    assert [r.to_dict() | strip for r in rows2] == [r.to_dict() | strip for r in rows]
    for r1, r2 in zip(rows, rows2, strict=True):
        assert sha256_file(r1.masks[0]) == sha256_file(r2.masks[0])
    # another seed: other boxes
    other = tmp_path / "x" / "manifest.jsonl"
    build_variants(samples_path, "mask-random", spec, 4, other)
    assert [r.params["box"] for r in read_variants(other)] != [r.params["box"] for r in rows]


def test_mean_and_blur_fill(samples_path, tmp_path):
    orig = _pixels(read_jsonl(samples_path)[0]["images"][0])
    out = tmp_path / "m" / "manifest.jsonl"
    build_variants(samples_path, "mm", {"perturbation": "mask", "fill": "mean"}, 0, out)
    row = read_variants(out)[1]  # box (5, 5, 15, 10)
    mean = tuple(int(v) for v in np.floor(orig.reshape(-1, 3).mean(axis=0) + 0.5))
    assert (_pixels(row.images[0])[5:10, 5:15] == mean).all()
    out = tmp_path / "b" / "manifest.jsonl"
    spec = {"perturbation": "mask", "fill": "blur", "blur_radius": 0.4}
    build_variants(samples_path, "mb", spec, 0, out)
    row = read_variants(out)[1]
    with Image.open(read_jsonl(samples_path)[0]["images"][0]) as im:
        expected = np.asarray(im.crop((5, 5, 15, 10)).filter(ImageFilter.GaussianBlur(2.0)))
    assert (_pixels(row.images[0])[5:10, 5:15] == expected).all()


def test_exif_orientation_swaps_the_size(tmp_path):
    im = Image.new("RGB", (40, 30), (200, 100, 50))
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated 90°: shown as 30 x 40
    im.save(tmp_path / "rot.png", exif=exif)
    box = {"startX": 0, "startY": 30, "w": 30, "h": 10}  # fits only the shown orientation
    write_samples(
        tmp_path / "s.jsonl",
        [_sample("rot", [str(tmp_path / "rot.png")], {"b_box": [box], "premise_index": 0})],
    )
    out = tmp_path / "v" / "manifest.jsonl"
    build_variants(tmp_path / "s.jsonl", "m", {"perturbation": "mask"}, 0, out)
    row = read_variants(out)[0]
    assert row.params["image_size"] == [30, 40]
    got = _pixels(row.images[0])
    assert got.shape == (40, 30, 3)
    assert (got[30:40] == 0).all() and (got[:30] == (200, 100, 50)).all()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"region": "elsewhere"},
            r"'conditions\.c\.region': 'elsewhere' is not one of \['specific', 'random'\]",
        ),
        (
            {"fill": "grey"},
            r"'conditions\.c\.fill': 'grey' is not one of \['black', 'mean', 'blur'\]",
        ),
        (
            {"blur_radius": 0},
            r"'conditions\.c\.blur_radius': 0 is less than or equal to the minimum",
        ),
        ({"blur_radius": "big"}, r"'conditions\.c\.blur_radius': 'big' is not of type 'number'"),
        ({"min_distance": 1.5}, r"'conditions\.c\.min_distance': 1\.5 is greater than the maximum"),
        ({"min_distance": True}, r"'conditions\.c\.min_distance': True is not of type 'number'"),
        ({"radius": 3}, r"unknown key 'conditions\.c\.radius' \(allowed here: .*fill, blur_radius"),
    ],
)
def test_bad_spec(samples_path, tmp_path, change, message):
    with pytest.raises(ValueError, match=message):
        build_variants(
            samples_path, "c", {"perturbation": "mask", **change}, 0, tmp_path / "m.jsonl"
        )
    assert not (tmp_path / "m.jsonl").exists()


def test_defaults_filled():
    spec = prepared_spec("c", {"perturbation": "mask"})
    assert spec == {
        "perturbation": "mask",
        "region": "specific",
        "fill": "black",
        "blur_radius": 0.25,
        "min_distance": 0.05,
    }


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"premise_index": 0}, r"sample 'bad': meta\.b_box must be a non-empty list"),
        ({"b_box": [A], "premise_index": 0, "image_size": [60]}, r"sample 'bad': meta\.image_size"),
        ({"b_box": [A, B]}, r"sample 'bad': meta\.premise_index must be an integer; got None"),
        (
            {"b_box": [A, B], "premise_index": 3},
            r"sample 'bad': meta\.premise_index 3 is out of range for 2 boxes in meta\.b_box",
        ),
        (
            {"b_box": [A, {"startX": 50, "startY": 0, "w": 20, "h": 5}], "premise_index": 0},
            r"sample 'bad': meta\.b_box\[1\] \[50, 0, 70, 5\] is not inside the 60x40 image",
        ),
        (
            {"b_box": [{"startX": 1, "startY": 1, "w": 2}], "premise_index": 0},
            r"sample 'bad': meta\.b_box\[0\]: .*lacks h",
        ),
        (
            {"b_box": [{**A, "w": 0}], "premise_index": 0},
            r"sample 'bad': meta\.b_box\[0\] \(the premise's box\) \[0, 0, 0, 15\] is empty",
        ),
    ],
)
def test_bad_sample_meta(tmp_path, meta, message):
    write_samples(tmp_path / "s.jsonl", [_sample("bad", [_png(tmp_path / "a.png")], meta)])
    with pytest.raises(ValueError, match=message):
        build_variants(tmp_path / "s.jsonl", "m", {"perturbation": "mask"}, 0, tmp_path / "m.jsonl")


def test_two_images_name_the_sample(tmp_path):
    imgs = [_png(tmp_path / "a.png"), _png(tmp_path / "b.png", seed=1)]
    meta = {"b_box": [A], "premise_index": 0}
    write_samples(tmp_path / "s.jsonl", [_sample("two", imgs, meta)])
    with pytest.raises(
        ValueError, match=r"sample 'two': perturbation 'mask' needs exactly one image"
    ):
        build_variants(tmp_path / "s.jsonl", "m", {"perturbation": "mask"}, 0, tmp_path / "m.jsonl")


def test_wrong_image_size_in_meta(tmp_path):
    meta = {"b_box": [A], "premise_index": 0, "image_size": [61, 40]}
    write_samples(tmp_path / "s.jsonl", [_sample("sz", [_png(tmp_path / "a.png")], meta)])
    with pytest.raises(
        RuntimeError, match=r"sample 'sz'.*the image is 60x40 but the boxes were planned for 61x40"
    ):
        build_variants(tmp_path / "s.jsonl", "m", {"perturbation": "mask"}, 0, tmp_path / "m.jsonl")


def test_covered_needs_half_of_a_premise_box():
    # T = (0, 0, 10, 10) filled; C = (5, 0, 15, 10): 50 of 100 px covered (half → in);
    # D = (6, 0, 16, 10): 40 of 100 (out); E = (2, 2, 4, 4) inside T (in)
    boxes = [
        {"startX": 0, "startY": 0, "w": 10, "h": 10},
        {"startX": 5, "startY": 0, "w": 10, "h": 10},
        {"startX": 6, "startY": 0, "w": 10, "h": 10},
        {"startX": 2, "startY": 2, "w": 2, "h": 2},
    ]
    sample = _sample(
        "cov", ["unused.png"], {"b_box": boxes, "premise_index": 0, "image_size": [30, 20]}
    )
    pert = PERTURBATIONS["mask"]
    spec = prepared_spec("m", {"perturbation": "mask"})
    (plan,) = pert.plan(sample, "m", spec, 0)
    assert plan.params["covered"] == [0, 1, 3]
    assert plan.params["overlap_px"] == 50 + 40 + 4
    assert plan.variant_id == "cov" and plan.seed == derive_seed(0, "m", "cov")
