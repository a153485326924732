"""The Idis image perturbations: placement geometry, the six perturbations through the
variants stage (exact masks, untouched targets, determinism, exclusions), the image
edit cache and the config checks."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from itertools import combinations
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image, ImageDraw

from vlmrobust.clients.image_edit import ImageEditCache, OpenAIImageEditor
from vlmrobust.core.config import load_schema, validate_condition
from vlmrobust.core.io import read_json
from vlmrobust.core.records import Sample, read_samples, read_variants, write_samples
from vlmrobust.perturb import PERTURBATIONS, build_variants, idis
from vlmrobust.perturb.idis import load_mathwriting, load_objects, object_slug, render_text
from vlmrobust.perturb.placement import (
    PlacementError,
    box_gap,
    boxes_conflict,
    mask_blocked,
    paste_layers,
    place_boxes,
    place_fitting,
)
from vlmrobust.perturb.variants import prepared_spec

OBJECTS = load_objects()
BICUBIC = Image.Resampling.BICUBIC
LANCZOS = Image.Resampling.LANCZOS


# ---------------------------------------------------------------- assets


def _gradient(w: int, h: int, seed: int) -> Image.Image:
    """A smooth RGB picture (cheap to encode) that differs per seed."""
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255 // max(1, w - 1) + seed * 37) % 256
    g = (y * 255 // max(1, h - 1) + seed * 11) % 256
    b = ((x + y) * 3 + seed * 71) % 256
    return Image.fromarray(np.stack([r, g, b], axis=2).astype(np.uint8))


def _cutout(w: int, h: int, colour: tuple[int, int, int]) -> Image.Image:
    """An RGBA object on a transparent margin, with a half-transparent rim."""
    im = Image.new("RGBA", (w + 10, h + 8), (0, 0, 0, 0))
    d = ImageDraw.Draw(im)
    d.ellipse([5, 4, 5 + w - 1, 4 + h - 1], fill=(*colour, 128))
    d.ellipse([7, 6, 5 + w - 3, 4 + h - 3], fill=(*colour, 255))
    return im


def _all_objects() -> list[str]:
    return [o for objs in OBJECTS.classes.values() for o in objs] + OBJECTS.irrelevant


@pytest.fixture(scope="module")
def segments(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("segments")
    for i, name in enumerate(_all_objects()):
        folder = root / object_slug(name)
        folder.mkdir()
        _cutout(60 + i % 5 * 6, 40 + i % 3 * 5, (200, 40 + i * 5, 90)).save(folder / "a.png")
        _cutout(44, 56, (30, 120, 40 + i * 5)).save(folder / "b.png")
    return root


def _perception_sample(root: Path, sid: str, label: str, rect=(20, 20, 110, 90), seed=0):
    img = root / f"{sid}.png"
    _gradient(320, 240, seed).save(img)
    meta: dict = {"label": label, "imagenet9_class": OBJECTS.labels[label]}
    if rect is None:
        meta["target_masks"] = [None]
    else:
        mask = Image.new("RGB", (320, 240), (0, 0, 0))
        ImageDraw.Draw(mask).ellipse(rect, fill=(150, 90, 40))
        mask.save(root / f"{sid}_fg.png")
        meta["target_masks"] = [str(root / f"{sid}_fg.png")]
    return Sample(sid, "in9", [str(img)], "Which class?", label, "label", meta=meta)


@pytest.fixture(scope="module")
def perception(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("perception")
    samples = [
        _perception_sample(root, "p-dog", "Dog", seed=1),
        _perception_sample(root, "p-bird", "Bird", rect=(150, 100, 260, 200), seed=2),
        _perception_sample(root, "p-fish", "Fish", rect=None, seed=3),
    ]
    write_samples(root / "samples.jsonl", samples)
    return root / "samples.jsonl"


def _resized(path: str, canvas: int) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB").resize((canvas, canvas), BICUBIC))


def _target_pixels(path: str, canvas: int) -> np.ndarray:
    return (_resized(path, canvas) > 16).any(axis=2)


def _read(path: str) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB")).copy()


def _mask(path: str) -> np.ndarray:
    with Image.open(path) as im:
        assert im.mode == "L"
        arr = np.asarray(im)
    assert set(np.unique(arr)) <= {0, 255}
    return arr == 255


def _expected_cutout(path: str, box) -> Image.Image:
    with Image.open(path) as im:
        rgba = im.convert("RGBA")
    rgba = rgba.crop(rgba.getchannel("A").getbbox())
    return rgba.resize((box[2] - box[0], box[3] - box[1]), LANCZOS)


def _outside(boxes, shape) -> np.ndarray:
    keep = np.ones(shape, dtype=bool)
    for x0, y0, x1, y1 in boxes:
        keep[y0:y1, x0:x1] = False
    return keep


def _first_sample(path) -> Sample:
    return Sample.from_dict(json.loads(Path(path).read_text().splitlines()[0]))


def _build(samples, condition, spec, out_dir: Path, seed=0):
    out = out_dir / condition / "manifest.jsonl"
    build_variants(samples, condition, spec, seed, out)
    return read_variants(out), read_json(out.parent / "report.json")


# ---------------------------------------------------------------- geometry


def test_place_boxes_keeps_the_margin_to_each_other_and_the_forbidden_box():
    forbidden = (40, 30, 90, 80)
    for seed in range(60):
        rng = np.random.default_rng(seed)
        sizes = [(int(rng.integers(8, 30)), int(rng.integers(8, 30))) for _ in range(4)]
        boxes = place_boxes(sizes, (160, 120), rng, forbidden=[forbidden], margin=3)
        assert [(b[2] - b[0], b[3] - b[1]) for b in boxes] == sizes  # in the order given
        for b in boxes:
            assert b[0] >= 0 and b[1] >= 0 and b[2] <= 160 and b[3] <= 120
            assert box_gap(b, forbidden) >= 3 and not boxes_conflict(b, forbidden, 3)
        for a, b in combinations(boxes, 2):
            assert box_gap(a, b) >= 3


def test_box_gap_and_conflict_by_hand():
    assert box_gap((0, 0, 10, 10), (13, 0, 20, 10)) == 3
    assert box_gap((0, 0, 10, 10), (10, 10, 20, 20)) == 0  # touching corners
    assert not boxes_conflict((0, 0, 10, 10), (10, 0, 20, 10))  # touching: no shared pixel
    assert boxes_conflict((0, 0, 10, 10), (9, 0, 20, 10))
    assert boxes_conflict((0, 0, 10, 10), (12, 0, 20, 10), margin=3)  # 2 px apart
    assert not boxes_conflict((0, 0, 10, 10), (13, 0, 20, 10), margin=3)  # 3 px apart


def test_a_box_that_fits_only_in_a_strip_is_placed_there():
    # the forbidden box leaves x in [80, 100): a 20x20 box must sit at x = 80, y in 0..40
    ys = set()
    for seed in range(300):
        (box,) = place_boxes([(20, 20)], (100, 60), np.random.default_rng(seed),
                             forbidden=[(0, 0, 80, 60)])  # fmt: skip
        assert box[0] == 80 and 0 <= box[1] <= 40
        ys.add(box[1])
    assert len(ys) >= 35  # drawn among all the valid positions, not a few
    # with a margin of 10 the box must keep 10 px from a box ending at x = 70
    for seed in range(20):
        (box,) = place_boxes([(20, 20)], (100, 60), np.random.default_rng(seed),
                             forbidden=[(0, 0, 70, 60)], margin=10)  # fmt: skip
        assert box[0] == 80


def test_no_room_is_an_error_naming_the_box():
    with pytest.raises(PlacementError, match=r"no room for box 0 \(30x30\)"):
        place_boxes([(30, 30)], (100, 100), np.random.default_rng(0), forbidden=[(10, 10, 90, 90)])
    with pytest.raises(PlacementError, match="larger than the 100x100 canvas"):
        place_boxes([(120, 10)], (100, 100), np.random.default_rng(0))


def test_place_fitting_shrinks_until_the_boxes_fit():
    # a 20 px wide free strip: 40 px boxes fit once round(40 * 0.85**n) <= 20, n = 5
    boxes, factor, sizes = place_fitting(
        lambda f: [(round(40 * f), round(40 * f))],
        (100, 100),
        np.random.default_rng(0),
        forbidden=[(20, 0, 100, 100)],
    )
    assert factor == pytest.approx(0.85**5)
    assert sizes == [(18, 18)] and boxes[0][2] <= 20
    with pytest.raises(PlacementError, match="did not make them fit"):
        place_fitting(lambda f: [(round(40 * f), round(40 * f))], (100, 100),
                      np.random.default_rng(0), forbidden=[(20, 0, 100, 100)], min_side=19)  # fmt: skip


def test_paste_layers_mask_is_the_pasted_alpha():
    base = _gradient(40, 30, 0)
    layer = Image.new("RGBA", (10, 6), (0, 0, 0, 0))
    px = layer.load()
    px[1, 1] = (255, 0, 0, 255)
    px[2, 1] = (0, 255, 0, 1)
    px[3, 2] = (0, 0, 255, 128)
    opaque = Image.new("RGB", (5, 4), (9, 9, 9))
    out, mask = paste_layers(base, [(layer, (20, 10, 30, 16)), (opaque, (0, 0, 5, 4))])
    expected = np.zeros((30, 40), dtype=bool)
    expected[11, 21] = expected[11, 22] = expected[12, 23] = True
    expected[0:4, 0:5] = True
    assert (mask == expected).all()
    a, o = np.asarray(base), np.asarray(out)
    assert (o[~expected] == a[~expected]).all()  # alpha 0: untouched
    assert tuple(o[11, 21]) == (255, 0, 0) and (o[0:4, 0:5] == 9).all()
    with pytest.raises(ValueError, match="layer 0 is 10x6 but its box"):
        paste_layers(base, [(layer, (0, 0, 5, 5))])


# ---------------------------------------------------------------- objects


def test_objects_default_plan_is_twelve_variants_per_image(perception, segments):
    pert = PERTURBATIONS["objects"]
    spec = prepared_spec("obj", {"perturbation": "objects", "segments": str(segments)})
    plans = pert.plan(_first_sample(perception), "obj", spec, 0)
    assert [p.variant_id for p in plans] == [
        f"p-dog__{s}-n{k}" for s in ("aligned", "conflicting", "irrelevant") for k in (1, 2, 3, 4)
    ]
    assert all(p.params["canvas"] == 1024 for p in plans)


@pytest.fixture(scope="module")
def objects_run(perception, segments, tmp_path_factory):
    out = tmp_path_factory.mktemp("objects")
    spec = {"perturbation": "objects", "segments": str(segments), "canvas": 256}
    variants, report = _build(perception, "obj", spec, out)
    return variants, report, out, spec


def test_objects_variants_and_semantics(objects_run, segments):
    variants, report, _, _ = objects_run
    assert report["variants"] == len(variants) == 36 and report["excluded"] == 0
    for v in variants:
        p = v.params
        label = p["target_class"]
        k = p["n"]
        assert v.variant_id == f"{v.sample_id}__{p['semantics']}-n{k}"
        assert p["kind"] == "visual" and p["editor"] == "composite"
        assert len(p["distractors"]) == len(set(p["distractors"])) == len(p["boxes"]) == k
        (cls,) = p["distractor_classes"]
        if p["semantics"] == "aligned":
            assert cls == label and set(p["distractors"]) <= set(OBJECTS.classes[label])
        elif p["semantics"] == "conflicting":
            assert cls in OBJECTS.classes and cls != label
            assert set(p["distractors"]) <= set(OBJECTS.classes[cls])
        else:
            assert cls == "irrelevant" and set(p["distractors"]) <= set(OBJECTS.irrelevant)
        for name, f in zip(p["distractors"], p["files"], strict=True):
            assert Path(f).parent == segments / object_slug(name)
    # conflicting classes are drawn per variant: more than one class shows up
    drawn = {v.params["distractor_classes"][0] for v in variants
             if v.params["semantics"] == "conflicting"}  # fmt: skip
    assert len(drawn) > 1


def test_objects_boxes_avoid_each_other_and_the_target(objects_run, perception):
    variants, _, _, _ = objects_run
    margin = round(0.01 * 256)
    for v in variants:
        p = v.params
        (placed,) = p["placed"]
        assert placed["boxes"] == p["boxes"] and placed["canvas"] == [256, 256]
        for a, b in combinations(p["boxes"], 2):
            assert box_gap(a, b) >= margin
        if v.sample_id == "p-fish":
            assert p["target_box"] is None and placed["target_box"] is None
            assert placed["target_area"] is None
            continue
        target = _target_pixels(f"{Path(perception).parent}/{v.sample_id}_fg.png", 256)
        ys, xs = np.nonzero(target)
        assert p["target_box"] == [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
        assert placed["target_area"] == int(target.sum())
        for b in p["boxes"]:
            assert box_gap(b, p["target_box"]) >= margin


def test_objects_keep_every_other_pixel_and_masks_are_exact(objects_run, perception):
    variants, _, _, _ = objects_run
    root = Path(perception).parent
    for v in variants:
        p = v.params
        out = _read(v.images[0])
        base = _resized(str(root / f"{v.sample_id}.png"), 256)
        keep = _outside(p["boxes"], out.shape[:2])
        assert (out[keep] == base[keep]).all()
        if v.sample_id != "p-fish":
            target = _target_pixels(str(root / f"{v.sample_id}_fg.png"), 256)
            assert (out[target] == base[target]).all()
        expected = np.zeros((256, 256), dtype=bool)
        for f, (x0, y0, x1, y1) in zip(p["files"], p["boxes"], strict=True):
            cut = _expected_cutout(f, (x0, y0, x1, y1))
            alpha = np.asarray(cut.getchannel("A"))
            expected[y0:y1, x0:x1] |= alpha > 0
            full = alpha == 255
            assert (out[y0:y1, x0:x1][full] == np.asarray(cut.convert("RGB"))[full]).all()
        (mask_path,) = v.masks
        mask = _mask(mask_path)
        assert (mask == expected).all()
        assert p["placed"][0]["distractor_area"] == int(expected.sum()) > 0
        assert (out[~mask] == base[~mask]).all()


def test_objects_are_deterministic_and_differ_between_variants(objects_run, perception, tmp_path):
    variants, _, _, spec = objects_run
    again, _ = _build(perception, "obj", spec, tmp_path)
    assert [v.sha256 for v in again] == [v.sha256 for v in variants]
    assert [v.params for v in again] == [v.params for v in variants]
    placements = [tuple(map(tuple, v.params["boxes"])) for v in variants]
    assert len(set(placements)) == len(placements)
    other, _ = _build(perception, "obj", spec, tmp_path / "seed1", seed=1)
    assert [v.params["boxes"] for v in other] != [v.params["boxes"] for v in variants]


def test_objects_in_worker_processes_are_identical(objects_run, perception, tmp_path):
    variants, _, _, spec = objects_run
    out = tmp_path / "obj" / "manifest.jsonl"
    build_variants(perception, "obj", spec, 0, out, threads=2)
    assert [v.sha256 for v in read_variants(out)] == [v.sha256 for v in variants]


def test_objects_without_room_are_excluded_and_counted(tmp_path, segments):
    # the target fills the whole image: no box fits beside it
    s = _perception_sample(tmp_path, "p-big", "Dog", rect=(0, 0, 319, 239))
    write_samples(tmp_path / "s.jsonl", [s])
    spec = {"perturbation": "objects", "segments": str(segments), "canvas": 128,
            "semantics": ["aligned"], "counts": [1, 2]}  # fmt: skip
    variants, report = _build(tmp_path / "s.jsonl", "obj", spec, tmp_path)
    assert variants == [] and report["excluded_by_reason"] == {"no-room": 2}
    assert [e["variant_id"] for e in report["excluded_variants"]] == [
        "p-big__aligned-n1",
        "p-big__aligned-n2",
    ]


def test_objects_shrink_when_the_drawn_sizes_do_not_fit(tmp_path, segments):
    # a target over the middle leaves bands of about 28 px: 0.3-0.35 x 128 px cut-outs shrink
    s = _perception_sample(tmp_path, "p-mid", "Dog", rect=(70, 52, 250, 188))
    write_samples(tmp_path / "s.jsonl", [s])
    spec = {"perturbation": "objects", "segments": str(segments), "canvas": 128,
            "semantics": ["irrelevant"], "counts": [2], "scale": [0.3, 0.35]}  # fmt: skip
    (v,), _ = _build(tmp_path / "s.jsonl", "obj", spec, tmp_path)
    assert v.params["fit_scale"] < 1
    longest = max(max(b[2] - b[0], b[3] - b[1]) for b in v.params["boxes"])
    assert longest <= round(0.35 * 128 * v.params["fit_scale"]) + 1


def test_objects_through_an_image_editing_api_are_cached(perception, tmp_path, monkeypatch):
    calls = []

    class Images:
        def edit(self, **kw):
            calls.append(kw)
            import base64
            import io

            buf = io.BytesIO()
            Image.new("RGB", (80, 80), (0, 200, 0)).save(buf, format="PNG")
            return SimpleNamespace(data=[SimpleNamespace(b64_json=base64.b64encode(
                buf.getvalue()).decode())])  # fmt: skip

    made = []

    def fake_editor(spec):
        made.append(spec)
        return OpenAIImageEditor(spec, client=SimpleNamespace(images=Images()))

    monkeypatch.setattr(idis.objects, "make_api_editor", fake_editor)
    spec = {"perturbation": "objects", "editor": {"backend": "openai", "model": "img-1"},
            "canvas": 64, "counts": [2], "semantics": ["aligned"],
            "cache_dir": str(tmp_path / "cache")}  # fmt: skip
    variants, _ = _build(perception, "api", spec, tmp_path / "a")
    assert len(variants) == 3 and len(calls) == 3
    assert made[0] == {"backend": "openai", "model": "img-1", "options": {"size": "1024x1024"}}
    for v, kw in zip(variants, calls, strict=True):
        p = v.params
        assert v.masks == [] and p["boxes"] is None and p["editor"] == "openai"
        placed = p["placed"][0]
        assert placed["boxes"] is None and placed["distractor_area"] is None
        assert placed["canvas"] == [64, 64] and placed["edit"]["model"] == "img-1"
        assert kw["prompt"] == p["prompt"] and kw["size"] == "1024x1024"
        for name in p["distractors"]:
            assert name in p["prompt"]
        assert "64x64" in p["prompt"] and OBJECTS.labels[p["target_class"]] in p["prompt"]
        assert _read(v.images[0]).shape == (64, 64, 3)
    again, _ = _build(perception, "api", spec, tmp_path / "b")
    assert len(calls) == 3  # every edit came from the cache
    assert [v.sha256 for v in again] == [v.sha256 for v in variants]
    assert [v.params for v in again] == [v.params for v in variants]


def test_image_edit_cache_key_covers_prompt_image_and_model(tmp_path):
    cache = ImageEditCache(tmp_path)
    a = OpenAIImageEditor({"model": "m1", "options": {"max_retries": 3}})
    b = OpenAIImageEditor({"model": "m2"})
    img, other = _gradient(8, 8, 0), _gradient(8, 8, 1)
    key = cache.key(cache.request(a, img, "p"))
    assert key == cache.key(cache.request(OpenAIImageEditor({"model": "m1"}), img, "p"))
    assert key != cache.key(cache.request(b, img, "p"))
    assert key != cache.key(cache.request(a, other, "p"))
    assert key != cache.key(cache.request(a, img, "q"))
    assert cache.get(key) is None
    cache.put(key, other, cache.request(a, img, "p"))
    assert (np.asarray(cache.get(key)) == np.asarray(other)).all()


# ---------------------------------------------------------------- typographic


def test_typographic_default_plan_is_32_variants(perception):
    pert = PERTURBATIONS["typographic"]
    spec = prepared_spec("typo", {"perturbation": "typographic"})
    sample = _first_sample(perception)
    plans = pert.plan(sample, "typo", spec, 0)
    assert len(plans) == 32
    others = [c for c in OBJECTS.classes if c != "Dog"]
    assert [p.variant_id for p in plans] == [
        f"p-dog__typo-{c.lower()}-n{k}" for c in others for k in (1, 2, 3, 4)
    ]
    for p in plans:
        assert (
            p.params["text"] != "Dog"
            and p.params["distractors"] == [p.params["text"]] * p.params["n"]
        )
        assert p.params["kind"] == "typographic" and p.params["semantics"] == "typographic"
    spec3 = prepared_spec("typo", {"perturbation": "typographic", "classes": 3})
    plans3 = pert.plan(sample, "typo", spec3, 0)
    assert len(plans3) == 12 and len({p.params["text"] for p in plans3}) == 3
    assert "Dog" not in {p.params["text"] for p in plans3}


def test_typographic_masks_are_the_glyph_pixels(perception, tmp_path):
    spec = {"perturbation": "typographic", "canvas": 256, "counts": [3], "classes": 2}
    variants, report = _build(perception, "typo", spec, tmp_path)
    assert len(variants) == 6 and report["excluded"] == 0
    root = Path(perception).parent
    for v in variants:
        p = v.params
        out = _read(v.images[0])
        base = _resized(str(root / f"{v.sample_id}.png"), 256)
        expected = np.zeros((256, 256), dtype=bool)
        for fs, (fill, outline), (x0, y0, x1, y1) in zip(
            p["font_sizes"], p["colors"], p["boxes"], strict=True
        ):
            layer = render_text(p["text"], fs, fill, outline)
            assert layer.size == (x1 - x0, y1 - y0)
            expected[y0:y1, x0:x1] |= np.asarray(layer.getchannel("A")) > 0
        mask = _mask(v.masks[0])
        assert (mask == expected).all() and p["placed"][0]["distractor_area"] == expected.sum()
        assert (out[~mask] == base[~mask]).all()
        if p["target_box"] is not None:
            for b in p["boxes"]:
                assert not boxes_conflict(b, p["target_box"], round(0.01 * 256))


# ---------------------------------------------------------------- diagram


def _math_sample(root: Path, sid: str, family, problem, size=(60, 40), seed=0, image=None):
    path = root / f"{sid}.png"
    if image is None:
        _gradient(*size, seed).save(path)
    else:
        path = image
    meta = {"concept_family": family, "problem_index": problem, "problem_version": "Text Lite"}
    return Sample(sid, "mathverse", [str(path)], "Find x.", "3", "number", meta=meta)


@pytest.fixture(scope="module")
def math_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("math")
    samples = [
        _math_sample(root, "m-tri-a", "triangle", 1, seed=1),
        _math_sample(root, "m-tri-a2", "triangle", 1, seed=2),  # another version of 1
        _math_sample(root, "m-tri-b", "triangle", 2, seed=3),
        _math_sample(root, "m-tri-c", "triangle", 3, size=(100, 90), seed=4),  # grows the canvas
        _math_sample(root, "m-circ-a", "circle", 4, seed=5),
        _math_sample(root, "m-circ-b", "circle", 5, seed=6),
        _math_sample(root, "m-quad-a", "quadrilateral", 7, seed=7),
        _math_sample(root, "m-none", None, 8, seed=8),
    ]
    write_samples(root / "samples.jsonl", samples)
    lv = []
    for i, caps in enumerate((["table"], ["table", "diagram"], ["graph"])):
        path = root / f"lv{i}.png"
        _gradient(70, 30, 20 + i).save(path)
        lv.append(Sample(f"lv-{i}", "logicvista", [str(path)], "Q", "A", "letter",
                         meta={"specific_capability": caps}))  # fmt: skip
    write_samples(root / "logicvista.jsonl", lv)
    return root


@pytest.fixture(scope="module")
def diagram_run(math_data, tmp_path_factory):
    spec = {"perturbation": "diagram", "canvas": 128, "counts": [1, 2],
            "irrelevant_samples": str(math_data / "logicvista.jsonl")}  # fmt: skip
    out = tmp_path_factory.mktemp("diagram")
    variants, report = _build(math_data / "samples.jsonl", "dia", spec, out)
    return variants, report


def test_diagram_exclusions_are_counted(diagram_run):
    variants, report = diagram_run
    assert report["excluded_by_reason"] == {"no-concept-family": 4, "pool-too-small": 4}
    excluded = {e["variant_id"] for e in report["excluded_variants"]}
    assert excluded == {
        "m-none__aligned-n1", "m-none__aligned-n2", "m-none__conflicting-n1",
        "m-none__conflicting-n2", "m-quad-a__aligned-n1", "m-quad-a__aligned-n2",
        "m-circ-a__aligned-n2", "m-circ-b__aligned-n2",
    }  # fmt: skip
    assert report["variants"] == len(variants) == 8 * 6 - 8
    assert "m-none__irrelevant-n2" in {v.variant_id for v in variants}


def test_diagram_figures_come_from_the_right_pools(diagram_run):
    variants, _ = diagram_run
    family = {"m-tri-a": "triangle", "m-tri-b": "triangle", "m-tri-c": "triangle",
              "m-circ-a": "circle", "m-circ-b": "circle", "m-quad-a": "quadrilateral"}  # fmt: skip
    problem = {"m-tri-a": 1, "m-tri-a2": 1, "m-tri-b": 2, "m-tri-c": 3, "m-circ-a": 4,
               "m-circ-b": 5, "m-quad-a": 7, "m-none": 8}  # fmt: skip
    for v in variants:
        p = v.params
        assert p["kind"] == "visual" and len(p["distractors"]) == p["n"]
        assert v.sample_id not in p["distractors"]
        (cat,) = p["distractor_classes"]
        if p["semantics"] == "irrelevant":
            assert cat == "irrelevant" and set(p["distractors"]) <= {"lv-0", "lv-1"}
            continue
        # m-tri-a2 is in no pool: the pool keeps one figure per problem
        assert "m-tri-a2" not in p["distractors"]
        assert all(problem[d] != problem[v.sample_id] for d in p["distractors"])
        own = family.get(v.sample_id, "triangle")
        if p["semantics"] == "aligned":
            assert cat == own and all(family[d] == own for d in p["distractors"])
        else:
            assert cat != own and all(family[d] == cat for d in p["distractors"])


def test_diagram_keeps_the_target_unscaled_and_masks_the_figures(diagram_run, math_data):
    variants, _ = diagram_run
    for v in variants:
        p = v.params
        out = _read(v.images[0])
        original = _read(str(math_data / f"{v.sample_id}.png"))
        x0, y0, x1, y1 = p["target_box"]
        assert (out[y0:y1, x0:x1] == original).all()
        side = 167 if v.sample_id == "m-tri-c" else 128  # ceil(100 / 0.6)
        assert out.shape == (side, side, 3) and p["canvas"] == side
        assert p["target_area"] == original.shape[0] * original.shape[1]
        assert x0 == (side - original.shape[1]) // 2 and y0 == (side - original.shape[0]) // 2
        mask = _mask(v.masks[0])
        expected = ~_outside(p["boxes"], (side, side))
        assert (mask == expected).all()
        assert p["placed"][0]["distractor_area"] == int(expected.sum())
        assert (out[~mask & _outside([p["target_box"]], (side, side))] == 255).all()
        for b, s in zip(p["boxes"], p["scales"], strict=True):
            assert max(b[2] - b[0], b[3] - b[1]) <= round(0.3 * side) + 1 and s <= 1
            assert box_gap(b, p["target_box"]) >= round(0.01 * side)


def test_diagram_setup_hashes_each_image_once(math_data, monkeypatch):
    calls: list[str] = []
    real = idis.diagram.sha256_file

    def counting(path):
        calls.append(Path(path).name)
        return real(path)

    monkeypatch.setattr(idis.diagram, "sha256_file", counting)
    pert = PERTURBATIONS["diagram"]
    samples = read_samples(math_data / "samples.jsonl")
    spec = prepared_spec("dia", {"perturbation": "diagram",
                                "irrelevant_samples": str(math_data / "logicvista.jsonl")})  # fmt: skip
    spec = pert.setup(samples, "dia", spec)
    for s in samples:
        pert.plan(s, "dia", spec, 0)
    # the 8 diagrams (7 of them also in a family pool) and the 2 LogicVista tables
    assert sorted(calls) == sorted([f"{s.sample_id}.png" for s in samples] + ["lv0.png", "lv1.png"])


def test_plan_only_lookups_stay_out_of_the_image_tasks(math_data, tmp_path, monkeypatch):
    seen: list[dict] = []

    def spy(image, params, seed):
        seen.append(params)
        return idis.figures._apply_math(image, params, seed)

    real = PERTURBATIONS["diagram"]
    monkeypatch.setitem(PERTURBATIONS, "diagram", replace(real, apply=spy))
    spec = {"perturbation": "diagram", "canvas": 128, "counts": [1], "semantics": ["irrelevant"],
            "irrelevant_samples": str(math_data / "logicvista.jsonl")}  # fmt: skip
    variants, _ = _build(math_data / "samples.jsonl", "dia", spec, tmp_path)
    assert len(seen) == len(variants) == 8
    for params in seen:
        assert [k for k in params if k.startswith("_")] == []  # no figure pools per task
        assert params["irrelevant_samples"] == spec["irrelevant_samples"]  # the rest is there


def test_diagram_without_logicvista_path_names_the_key(math_data, tmp_path):
    with pytest.raises(ValueError, match=r"conditions\.dia\.irrelevant_samples: irrelevant"):
        build_variants(math_data / "samples.jsonl", "dia", {"perturbation": "diagram"}, 0,
                       tmp_path / "m.jsonl")  # fmt: skip


# ---------------------------------------------------------------- handwritten


@pytest.fixture(scope="module")
def expressions(tmp_path_factory):
    root = tmp_path_factory.mktemp("hw")
    for i in range(4):
        im = Image.new("RGB", (90 + 10 * i, 30), (250, 250, 245))
        ImageDraw.Draw(im).line([(5, 15), (80, 5 + 5 * i)], fill=(10, 10, 10), width=3)
        im.save(root / f"expr{i}.png")
    rgba = Image.new("RGBA", (50, 30), (0, 0, 0, 0))
    ImageDraw.Draw(rgba).line([(3, 3), (45, 25)], fill=(0, 0, 0, 255), width=4)
    rgba.save(root / "expr-rgba.png")
    (root / "notes.txt").write_text("not an image")
    return root


def test_handwritten_from_a_folder(math_data, expressions, tmp_path):
    spec = {"perturbation": "handwritten", "path": str(expressions), "name": "mathwriting",
            "canvas": 128, "counts": [1, 5]}  # fmt: skip
    variants, report = _build(math_data / "samples.jsonl", "hw", spec, tmp_path)
    assert report["excluded"] == 0 and len(variants) == 16
    names = {f"expr{i}" for i in range(4)} | {"expr-rgba"}
    for v in variants:
        p = v.params
        k = p["n"]
        assert v.variant_id == f"{v.sample_id}__mathwriting-n{k}"
        assert p["kind"] == "typographic" and p["semantics"] == "mathwriting"
        assert len(set(p["distractors"])) == k and set(p["distractors"]) <= names
        out = _read(v.images[0])
        original = _read(str(math_data / f"{v.sample_id}.png"))
        x0, y0, x1, y1 = p["target_box"]
        assert (out[y0:y1, x0:x1] == original).all()
        mask = _mask(v.masks[0])
        assert mask.sum() == p["placed"][0]["distractor_area"]
        assert not (mask & _outside(p["boxes"], mask.shape)).any()
        for f, b in zip(p["files"], p["boxes"], strict=True):
            inside = mask[b[1] : b[3], b[0] : b[2]]
            if f.endswith("expr-rgba.png"):
                alpha = np.asarray(_expected_alpha(f, b))
                assert (inside == (alpha > 0)).all() and not inside.all()
            else:
                assert inside.all()  # an opaque expression image covers its box


def _expected_alpha(path, box):
    with Image.open(path) as im:
        return (
            im.convert("RGBA").resize((box[2] - box[0], box[3] - box[1]), LANCZOS).getchannel("A")
        )


def test_mathwriting_download_is_cached_and_failures_are_clear(tmp_path, monkeypatch):
    rows = [{"image": Image.new("L", (30 + i, 20), 255), "latex": f"x^{i}"} for i in range(5)]
    calls = []

    def fake_load(name, split, streaming):
        calls.append((name, split, streaming))
        return iter(rows)

    files = load_mathwriting(tmp_path / "mw", "val", 3, load_dataset=fake_load)
    assert calls == [("deepcopy/MathWriting-human", "val", True)]
    assert [Path(f).name for f in files] == ["val-000000.png", "val-000001.png", "val-000002.png"]
    assert Image.open(files[2]).size == (32, 20)

    def boom(*a, **k):
        raise ConnectionError("no network")

    assert load_mathwriting(tmp_path / "mw", "val", 3, load_dataset=boom) == files  # cached
    with pytest.raises(RuntimeError, match="cannot load deepcopy/MathWriting-human .*no network"):
        load_mathwriting(tmp_path / "other", "val", 3, load_dataset=boom)


def test_mathwriting_source_names_the_key_when_the_hub_is_out_of_reach(
    math_data, tmp_path, monkeypatch
):
    def boom(*a, **k):
        raise ConnectionError("no network")

    monkeypatch.setitem(sys.modules, "datasets", SimpleNamespace(load_dataset=boom))
    spec = {"perturbation": "handwritten", "source": "mathwriting", "name": "mathwriting",
            "cache_dir": str(tmp_path / "mw")}  # fmt: skip
    with pytest.raises(RuntimeError, match=r"conditions\.hw\.source: cannot load deepcopy"):
        build_variants(math_data / "samples.jsonl", "hw", spec, 0, tmp_path / "m.jsonl")


# ---------------------------------------------------------------- size


def test_size_variants_share_the_objects_and_reach_the_area(perception, segments, tmp_path):
    spec = {"perturbation": "size", "segments": str(segments), "canvas": 256, "n": 2}
    variants, report = _build(perception, "size", spec, tmp_path)
    # p-bird's target sits in the lower right: a large pair fits; all 9 are made
    assert report["excluded"] == 0 and len(variants) == 9
    by_sample: dict[str, list] = {}
    for v in variants:
        p = v.params
        assert v.variant_id == f"{v.sample_id}__size-{p['size']}"
        assert p["kind"] == "size" and p["semantics"] is None and p["n"] == 2
        assert p["distractor_semantics"] == "conflicting"
        (cls,) = p["distractor_classes"]
        assert cls != p["target_class"] and set(p["distractors"]) <= set(OBJECTS.classes[cls])
        area = p["placed"][0]["distractor_area"]
        assert area == _mask(v.masks[0]).sum()
        assert area / 256**2 == pytest.approx(p["area_fraction"], rel=0.02)
        by_sample.setdefault(v.sample_id, []).append(v)
    for vs in by_sample.values():
        assert [v.params["size"] for v in vs] == ["small", "medium", "large"]
        assert len({tuple(v.params["files"]) for v in vs}) == 1  # the same objects
        areas = [v.params["placed"][0]["distractor_area"] for v in vs]
        assert areas == sorted(areas)


def test_size_that_does_not_fit_is_excluded(tmp_path, segments):
    s = _perception_sample(tmp_path, "p-mid", "Dog", rect=(70, 52, 250, 188))
    write_samples(tmp_path / "s.jsonl", [s])
    spec = {"perturbation": "size", "segments": str(segments), "canvas": 128,
            "sizes": {"tiny": 0.005, "huge": 0.3}}  # fmt: skip
    variants, report = _build(tmp_path / "s.jsonl", "size", spec, tmp_path)
    assert [v.variant_id for v in variants] == ["p-mid__size-tiny"]
    assert report["excluded_by_reason"] == {"no-room": 1}


def test_mask_blocked_is_exact_for_every_position():
    mask = np.zeros((5, 5), dtype=bool)
    mask[2, 3] = True
    # a 2x2 box: top-left (x, y) covers (2, 3) iff x in {2, 3} and y in {1, 2}
    expected = np.zeros((4, 4), dtype=bool)
    expected[1:3, 2:4] = True
    assert (mask_blocked(mask, 2, 2) == expected).all()
    # with a margin of 1 the widened box reaches one pixel further each way
    wide = np.zeros((4, 4), dtype=bool)
    wide[0:4, 1:4] = True
    assert (mask_blocked(mask, 2, 2, margin=1) == wide).all()


def test_a_box_may_sit_inside_the_targets_box_but_not_on_its_pixels():
    # a ring-shaped target: its bounding box is the whole canvas, its hole is free
    ring = np.ones((20, 20), dtype=bool)
    ring[6:14, 6:14] = False
    for seed in range(5):
        (box,) = place_boxes([(6, 6)], (20, 20), np.random.default_rng(seed), forbidden_mask=ring)
        x0, y0, x1, y1 = box
        assert x0 >= 6 and x1 <= 14 and y0 >= 6 and y1 <= 14
        assert not ring[y0:y1, x0:x1].any()
    with pytest.raises(PlacementError, match="the forbidden pixels"):
        place_boxes([(9, 9)], (20, 20), np.random.default_rng(0), forbidden_mask=ring)
    with pytest.raises(PlacementError):  # the bounding box leaves no room at all
        place_boxes([(6, 6)], (20, 20), np.random.default_rng(0), forbidden=[(0, 0, 20, 20)])


def test_size_avoid_is_checked(tmp_path, segments, perception):
    spec = {"perturbation": "size", "segments": str(segments), "avoid": "mask"}
    with pytest.raises(
        ValueError, match=r"'conditions\.size\.avoid': 'mask' is not one of \['box', 'pixels'\]"
    ):
        _build(perception, "size", spec, tmp_path)
    ok = {"perturbation": "size", "segments": str(segments), "canvas": 256, "avoid": "pixels"}
    variants, report = _build(perception, "size", ok, tmp_path / "ok")
    samples = {s.sample_id: s for s in read_samples(perception)}
    assert variants and report["excluded"] + len(variants) == 9
    for v in variants:
        masks = samples[v.sample_id].meta.get("target_masks")
        if not masks or masks[0] is None:
            continue
        target = _target_pixels(masks[0], 256)
        for x0, y0, x1, y1 in v.params["boxes"]:  # beside the target's pixels, margin kept
            m = round(0.01 * 256)
            assert not target[max(0, y0 - m) : y1 + m, max(0, x0 - m) : x1 + m].any()


# ---------------------------------------------------------------- resize


def test_resize_is_a_square_bicubic_resize(perception, tmp_path):
    spec = {"perturbation": "resize", "resolutions": [32, 100]}
    variants, _ = _build(perception, "res", spec, tmp_path)
    assert [v.variant_id for v in variants][:2] == ["p-dog__res32", "p-dog__res100"]
    root = Path(perception).parent
    for v in variants:
        r = v.params["resolution"]
        assert v.params["kind"] == "resolution" and v.params["semantics"] is None
        assert v.params["n"] is None and v.masks == []
        assert v.params["placed"][0]["canvas"] == [r, r]
        assert (_read(v.images[0]) == _resized(str(root / f"{v.sample_id}.png"), r)).all()
    spec = prepared_spec("res", {"perturbation": "resize"})
    assert spec["resolutions"] == [128, 256, 512, 1024, 2048]


# ---------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"perturbation": "objects", "colour": 1}, r"unknown key 'conditions\.c\.colour'"),
        ({"perturbation": "objects"}, r"conditions\.c\.segments: the composite editor needs"),
        ({"perturbation": "objects", "segments": "SEG", "counts": [5]},
         r"conditions\.c\.counts: 5 distinct objects"),
        ({"perturbation": "objects", "segments": "SEG", "semantics": ["odd"]},
         r"'conditions\.c\.semantics\.0': 'odd' is not one of"),
        ({"perturbation": "objects", "segments": "SEG", "scale": [0.3, 0.2]},
         r"conditions\.c\.scale: expected \[low, high\]"),
        ({"perturbation": "objects", "editor": {"backend": "openai", "colour": 1}},
         r"'conditions\.c\.editor': \{'backend': 'openai', 'colour': 1\} is not valid"),
        ({"perturbation": "objects", "editor": "paint"}, r"'conditions\.c\.editor': 'paint' is not valid"),
        ({"perturbation": "objects", "segments": "/nonexistent"},
         r"conditions\.c\.segments: /nonexistent is not a folder"),
        ({"perturbation": "typographic", "classes": 9}, r"conditions\.c\.classes: expected"),
        ({"perturbation": "typographic", "font_size": 40}, r"conditions\.c\.font_size"),
        ({"perturbation": "diagram", "figure_scale": 1.5}, r"conditions\.c\.figure_scale"),
        ({"perturbation": "diagram", "semantics": ["aligned"], "canvas": 8},
         r"'conditions\.c\.canvas': 8 is less than the minimum of 16"),
        ({"perturbation": "handwritten"}, r"conditions\.c\.path: expected a folder path"),
        ({"perturbation": "handwritten", "source": "web"}, r"'conditions\.c\.source': 'web' is not one of"),
        ({"perturbation": "size", "segments": "SEG", "sizes": {"Big": 0.1}},
         r"'conditions\.c\.sizes': 'Big' does not match"),
        ({"perturbation": "size", "segments": "SEG", "sizes": {"big": 2}},
         r"'conditions\.c\.sizes\.big': 2 is greater than or equal to the maximum"),
        ({"perturbation": "size", "segments": "SEG", "n": 5}, r"conditions\.c\.n: 5 objects"),
        ({"perturbation": "resize", "resolutions": [0]}, r"conditions\.c\.resolutions"),
        ({"perturbation": "resize", "size": 3}, r"unknown key 'conditions\.c\.size'"),
    ],
)  # fmt: skip
def test_bad_condition_keys_name_the_key(spec, message, perception, segments, tmp_path):
    spec = {k: (str(segments) if v == "SEG" else v) for k, v in spec.items()}
    with pytest.raises(ValueError, match=message):
        build_variants(perception, "c", spec, 0, tmp_path / "m.jsonl")


def test_counts_are_checked_against_the_categories_the_semantics_use(tmp_path):
    lists = tmp_path / "objects.yaml"
    lists.write_text(
        "classes: {Cat: [ball, bowl], Bird: [nest, cage, seed]}\n"
        "irrelevant: [clock, umbrella, tv, suitcase]\n"
        "labels: {Cat: cat, Bird: bird}\n"
    )
    prepare = prepared_spec
    base = {"perturbation": "objects", "editor": "openai", "objects_file": str(lists)}
    # irrelevant objects come from the list of 4 alone: the classes' sizes do not matter
    assert prepare("c", {**base, "semantics": ["irrelevant"], "counts": [4]})["counts"] == [4]
    with pytest.raises(ValueError, match=r"conditions\.c\.counts: 3 distinct .* has only 2"):
        prepare("c", {**base, "semantics": ["conflicting", "irrelevant"], "counts": [3]})
    with pytest.raises(ValueError, match=r"conditions\.c\.n: 3 objects, a category has 2"):
        prepared_spec(
            "c", {"perturbation": "size", "objects_file": str(lists), "n": 3, "segments": "x"}
        )


def test_a_missing_cutout_folder_names_the_object(perception, segments, tmp_path):
    import shutil

    partial = tmp_path / "seg"
    shutil.copytree(segments, partial)
    shutil.rmtree(partial / "dog-bowl")
    spec = {"perturbation": "objects", "segments": str(partial)}
    with pytest.raises(ValueError, match=r"conditions\.c\.segments: no cut-out of 'dog bowl'"):
        build_variants(perception, "c", spec, 0, tmp_path / "m.jsonl")
    spec["semantics"] = ["irrelevant"]  # the irrelevant objects alone need no dog bowl
    assert build_variants(perception, "c", {**spec, "canvas": 64, "counts": [1]}, 0,
                          tmp_path / "m.jsonl") == 3  # fmt: skip


def test_samples_must_have_one_image_and_a_known_label(tmp_path, segments):
    s = _perception_sample(tmp_path, "p-two", "Dog")
    s.images.append(s.images[0])
    write_samples(tmp_path / "two.jsonl", [s])
    spec = {"perturbation": "typographic"}
    with pytest.raises(
        ValueError, match="sample 'p-two'.*needs exactly one image; the sample has 2"
    ):
        build_variants(tmp_path / "two.jsonl", "c", spec, 0, tmp_path / "m.jsonl")
    s = _perception_sample(tmp_path, "p-odd", "Dog")
    s.meta["imagenet9_class"] = "bird"
    write_samples(tmp_path / "odd.jsonl", [s])
    with pytest.raises(ValueError, match="meta.imagenet9_class 'bird' does not match meta.label"):
        build_variants(tmp_path / "odd.jsonl", "c", spec, 0, tmp_path / "m.jsonl")


#: the settings of each Idis perturbation with their defaults (the schema states them all)
IDIS_DEFAULTS = {
    "objects": {
        "semantics": ["aligned", "conflicting", "irrelevant"],
        "counts": [1, 2, 3, 4],
        "editor": "composite",
        "segments": None,
        "canvas": 1024,
        "scale": [0.12, 0.22],
        "margin": 0.01,
        "min_scale": 0.05,
        "objects_file": None,
        "cache_dir": "results/cache/image_edit",
    },
    "typographic": {
        "counts": [1, 2, 3, 4],
        "classes": "all-other",
        "canvas": 1024,
        "font_size": [0.05, 0.09],
        "margin": 0.01,
        "min_scale": 0.03,
        "objects_file": None,
    },
    "diagram": {
        "semantics": ["aligned", "conflicting", "irrelevant"],
        "counts": [1, 2, 3, 4],
        "canvas": 1024,
        "irrelevant_samples": None,
        "figure_samples": None,
        "figure_scale": 0.3,
        "margin": 0.01,
        "min_scale": 0.05,
    },
    "handwritten": {
        "source": "folder",
        "path": None,
        "name": "handwritten",
        "counts": [1, 2, 3, 4],
        "canvas": 1024,
        "figure_scale": 0.3,
        "margin": 0.01,
        "min_scale": 0.03,
        "split": "test",
        "limit": 500,
        "cache_dir": "results/cache/mathwriting",
    },
    "size": {
        "sizes": {"small": 0.03, "medium": 0.08, "large": 0.15},
        "semantics": "conflicting",
        "n": 1,
        "segments": None,
        "canvas": 1024,
        "margin": 0.01,
        "avoid": "box",
        "objects_file": None,
    },
    "resize": {"resolutions": [128, 256, 512, 1024, 2048]},
}
STAGE_DEFAULTS = {"expected_variants": None, "verification": None}


def test_schema_branches_list_the_keys_and_defaults():
    branches = {
        b["if"]["properties"]["perturbation"]["const"]: b["then"]["properties"]
        for b in load_schema("config")["$defs"]["condition"]["allOf"]
    }
    for name, defaults in IDIS_DEFAULTS.items():
        props = branches[name]
        assert set(props) == set(defaults), name
        assert {k: v["default"] for k, v in props.items()} == defaults, name
        assert all(v.get("description") for v in props.values()), name
        filled = validate_condition("c", {"perturbation": name})
        assert filled == {"perturbation": name, **defaults, **STAGE_DEFAULTS}, name


def test_the_object_lists_are_table_3():
    assert list(OBJECTS.classes) == ["Dog", "Bird", "Vehicle", "Reptile", "Carnivore",
                                     "Insect", "Instrument", "Primate", "Fish"]  # fmt: skip
    assert all(len(v) == 4 for v in OBJECTS.classes.values())
    assert OBJECTS.classes["Vehicle"] == ["tire", "steering wheel", "license plate", "bumper"]
    assert OBJECTS.irrelevant == ["umbrella", "clock", "TV", "suitcase"]
    assert OBJECTS.labels["Instrument"] == "musical instrument"
    assert object_slug("empty net designed for catching insects") == (
        "empty-net-designed-for-catching-insects"
    )
    assert object_slug("TV") == "tv"
