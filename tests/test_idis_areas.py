"""Distractor areas (the Idis paper, eq. 2): the ratio, exact areas from the manifest,
the mask recount check, the change mask of generative edits, the segmenter plug-in and
the settings checks. Every number is counted by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlmrobust.core.io import read_jsonl
from vlmrobust.core.records import Sample, Variant, write_samples, write_variants
from vlmrobust.perturb import areas
from vlmrobust.perturb.areas import (
    area_ratio,
    change_mask,
    check_area_spec,
    measure_areas,
    register_segmenter,
)

# ---------------------------------------------------------------- helpers


def _base(size: int = 64) -> np.ndarray:
    """A smooth RGB picture (values 20..200: room for +-noise without clipping)."""
    y, x = np.mgrid[0:size, 0:size]
    r = 20 + x * 2
    g = 20 + y * 2
    b = 60 + (x + y)
    return np.stack([r, g, b], axis=2).astype(np.uint8)


def _save(arr: np.ndarray, path: Path) -> str:
    Image.fromarray(arr).save(path)
    return str(path)


def _variant(vid: str, sid: str, images: list[str], params: dict, **kw) -> Variant:
    return Variant(
        variant_id=vid,
        sample_id=sid,
        dataset="d",
        condition="c",
        perturbation=kw.pop("perturbation", "objects"),
        images=images,
        sha256=["0" * 64] * len(images),
        question="q?",
        params=params,
        **kw,
    )


def _sample(sid: str, image: str, mask: str | None = None, **meta) -> Sample:
    return Sample(
        sample_id=sid,
        dataset="d",
        images=[image],
        question="What is the main object?",
        answer="Dog",
        answer_type="label",
        meta={"label": "Dog", "imagenet9_class": "dog", "target_masks": [mask], **meta},
    )


def _placed(dist: int | None, target: int | None, box=None, canvas=(64, 64)) -> dict:
    return {
        "boxes": [],
        "items": [],
        "target_box": box,
        "target_area": target,
        "distractor_area": dist,
        "canvas": list(canvas),
    }


def _run(tmp_path: Path, variants: list[Variant], samples: list[Sample], spec=None):
    manifest, samples_path = tmp_path / "manifest.jsonl", tmp_path / "samples.jsonl"
    write_variants(manifest, variants)
    write_samples(samples_path, samples)
    out = tmp_path / "areas" / "c.jsonl"
    summary = measure_areas(manifest, samples_path, spec, out)
    return {r["variant_id"]: r for r in read_jsonl(out)}, summary


# ---------------------------------------------------------------- ratio


def test_area_ratio():
    assert area_ratio(100, 300) == 0.25
    assert area_ratio(0, 50) == 0.0
    assert area_ratio(30, 0) == 1.0
    assert area_ratio(0, 0) is None
    assert area_ratio(None, 10) is None
    assert area_ratio(10, None) is None


# ---------------------------------------------------------------- exact


def test_exact_rows_mask_recount_and_math_box(tmp_path):
    orig = _save(_base(), tmp_path / "s1.png")
    img = _save(_base(), tmp_path / "v.png")  # the variants' image (its pixels unused)
    # a mask with exactly 100 distractor pixels (10 x 10)
    mask = np.zeros((64, 64), np.uint8)
    mask[5:15, 40:50] = 255
    mask_path = _save(mask, tmp_path / "v1_mask.png")
    variants = [
        _variant(
            "s1__aligned-n1",
            "s1",
            [img],
            {"kind": "visual", "semantics": "aligned", "n": 1, "placed": [_placed(100, 300)]},
            masks=[mask_path],
        ),
        # no target mask known: the distractor area stays, r_area is null
        _variant(
            "s1__irrelevant-n1",
            "s1",
            [img],
            {"kind": "visual", "n": 1, "placed": [_placed(40, None)]},
        ),
        # a math diagram without target_area: its placed box (20 x 30 = 600) is the target
        _variant(
            "s1__conflicting-n2",
            "s1",
            [img],
            {
                "kind": "visual",
                "n": 2,
                "placed": [_placed(200, None, box=[10, 10, 30, 40], canvas=(1024, 1024))],
            },
            perturbation="diagram",
        ),
        # a perception variant with a box but no target_area is NOT given the box's area
        _variant(
            "s1__typo-bird-n1",
            "s1",
            [img],
            {"kind": "typographic", "n": 1, "placed": [_placed(10, None, box=[0, 0, 8, 8])]},
            perturbation="typographic",
        ),
    ]
    rows, summary = _run(tmp_path, variants, [_sample("s1", orig)])
    r = rows["s1__aligned-n1"]
    assert (r["distractor_area"], r["target_area"], r["r_area"]) == (100, 300, 0.25)
    assert (r["method"], r["reason"], r["canvas"]) == ("exact", None, [64, 64])
    r = rows["s1__irrelevant-n1"]
    assert (r["distractor_area"], r["target_area"], r["r_area"]) == (40, None, None)
    assert r["reason"] == "no-target-mask"
    r = rows["s1__conflicting-n2"]
    assert (r["distractor_area"], r["target_area"]) == (200, 600)
    assert r["r_area"] == pytest.approx(0.25)
    assert (r["method"], r["canvas"]) == ("exact", [1024, 1024])
    assert rows["s1__typo-bird-n1"]["target_area"] is None
    assert summary["methods"] == {"exact": 4}
    assert summary["null_r_area"] == {"no-target-mask": 2}
    assert summary["variants"] == 4
    assert summary["mean_r_area"] == pytest.approx(0.25)


def test_exact_mask_mismatch_names_the_variant(tmp_path):
    orig = _save(_base(), tmp_path / "s1.png")
    img = _save(_base(), tmp_path / "v.png")
    mask = np.zeros((64, 64), np.uint8)
    mask[0:10, 0:10] = 255  # 100 pixels, the manifest says 99
    mask_path = _save(mask, tmp_path / "m.png")
    v = _variant(
        "s1__aligned-n1",
        "s1",
        [img],
        {"kind": "visual", "n": 1, "placed": [_placed(99, 300)]},
        masks=[mask_path],
    )
    with pytest.raises(ValueError, match=r"'s1__aligned-n1'.*100 distractor pixels.*99"):
        _run(tmp_path, [v], [_sample("s1", orig)])


# ---------------------------------------------------------------- change mask


def _edited(base: np.ndarray, seed: int = 0) -> np.ndarray:
    """``base`` with noise of at most +-30 everywhere (under the threshold of 40), a
    10 x 10 square painted at rows 20..29, columns 30..39, and a one-pixel speck."""
    rng = np.random.default_rng(seed)
    noise = rng.integers(-30, 31, size=base.shape)
    out = np.clip(base.astype(int) + noise, 0, 255)
    out[20:30, 30:40] = [255, 0, 255]
    out[50, 5] = [255, 255, 255]  # a speck: 1 pixel far above the threshold
    return out.astype(np.uint8)


def test_change_mask_square_noise_and_speck():
    base = _base()
    edited = Image.fromarray(_edited(base))
    mask = change_mask(edited, Image.fromarray(base))
    assert mask.dtype == bool and mask.shape == (64, 64)
    assert int(mask.sum()) == 100
    assert mask[20:30, 30:40].all()
    # no opening: the speck stays unless the component filter drops it (1 < 4.096 px)
    raw = change_mask(edited, Image.fromarray(base), open_px=0, min_component=0)
    assert int(raw.sum()) == 101 and raw[50, 5]
    assert int(change_mask(edited, Image.fromarray(base), open_px=0).sum()) == 100
    # a 2 x 2 blob (4 px) survives opening 0 but not the component filter (< 4.096)
    arr = np.asarray(edited).copy()
    arr[2:4, 2:4] = [0, 0, 0]
    assert int(change_mask(Image.fromarray(arr), Image.fromarray(base), open_px=0).sum()) == 100
    # a larger threshold than the square's change: nothing
    assert not change_mask(edited, Image.fromarray(base), threshold=254.9).any()


def test_change_mask_resizes_the_original():
    base = _base(32)
    # the original is 32 x 32; the edit 64 x 64 of the same picture upscaled, plus a square
    big = np.asarray(Image.fromarray(base).resize((64, 64), Image.Resampling.BICUBIC)).copy()
    big[0:12, 0:12] = [0, 255, 0]
    mask = change_mask(Image.fromarray(big), Image.fromarray(base))
    assert mask.shape == (64, 64) and int(mask.sum()) == 144


def test_change_mask_rows_subtract_the_target(tmp_path):
    base = _base()
    orig = _save(base, tmp_path / "s1.png")
    # only_fg image: the target (rows 20..24, columns 30..59) on black; it overlaps the
    # painted square on rows 20..24, columns 30..39 (50 px). Target = 5 x 30 = 150 px.
    fg = np.zeros((64, 64, 3), np.uint8)
    fg[20:25, 30:60] = base[20:25, 30:60]
    fg[40, 0] = [10, 16, 5]  # no channel above 16: not target
    fg_path = _save(fg, tmp_path / "s1_fg.png")
    edited = _save(_edited(base), tmp_path / "v1.png")
    # the sample without a target mask: both areas unknown
    orig2 = _save(base, tmp_path / "s2.png")
    edited2 = _save(_edited(base, 1), tmp_path / "v2.png")
    variants = [
        _variant(
            "s1__aligned-n1",
            "s1",
            [edited],
            {"kind": "visual", "n": 1, "source": "idis-release"},
            perturbation="idis-release",
        ),
        # a generative edit of the objects perturbation: placed without distractor_area
        _variant(
            "s2__aligned-n1",
            "s2",
            [edited2],
            {"kind": "visual", "n": 1, "placed": [_placed(None, 77)]},
        ),
    ]
    samples = [_sample("s1", orig, fg_path), _sample("s2", orig2, None)]
    rows, summary = _run(tmp_path, variants, samples, {"threshold": 40})
    r = rows["s1__aligned-n1"]
    assert (r["distractor_area"], r["target_area"]) == (50, 150)
    assert r["r_area"] == pytest.approx(0.25)
    assert (r["method"], r["reason"], r["canvas"]) == ("change-mask", None, [64, 64])
    r = rows["s2__aligned-n1"]
    assert (r["method"], r["reason"], r["distractor_area"], r["r_area"]) == (
        "change-mask",
        "no-target-mask",
        None,
        None,
    )
    assert summary["methods"] == {"change-mask": 2}
    assert summary["null_r_area"] == {"no-target-mask": 1}


def test_target_mask_resized_nearest(tmp_path):
    # the target mask of a 32 x 32 original, the edit 64 x 64: the target quadruples
    base = _base(32)
    orig = _save(base, tmp_path / "s1.png")
    fg = np.zeros((32, 32, 3), np.uint8)
    fg[0:5, 0:5] = 200  # 25 px -> 100 px at 64 x 64
    fg_path = _save(fg, tmp_path / "fg.png")
    big = np.asarray(Image.fromarray(base).resize((64, 64), Image.Resampling.BICUBIC)).copy()
    big[40:60, 40:60] = [0, 0, 0]  # 400 px of distractor
    edited = _save(big, tmp_path / "v.png")
    v = _variant("s1__irrelevant-n1", "s1", [edited], {"kind": "visual", "n": 1})
    rows, _ = _run(tmp_path, [v], [_sample("s1", orig, fg_path)])
    r = rows["s1__irrelevant-n1"]
    assert (r["distractor_area"], r["target_area"], r["r_area"]) == (400, 100, 0.8)


# ---------------------------------------------------------------- segmenter


class _FakeSegmenter:
    """The target = rows 0..9 (640 px); "dog bowl" = rows 5..14 (overlap 5 rows with
    the target: 320 px new); "tennis ball" = rows 60..63 (256 px); anything else empty."""

    calls: list[list[str]] = []

    def segment(self, image, prompts):
        type(self).calls.append(list(prompts))
        h, w = image.height, image.width
        out = {}
        for p in prompts:
            m = np.zeros((h, w), bool)
            if p == "dog":
                m[0:10] = True
            elif p == "dog bowl":
                m[5:15] = True
            elif p == "tennis ball":
                m[60:64] = True
            out[p] = m
        return out


def test_fake_segmenter_areas(tmp_path):
    register_segmenter("fake", _FakeSegmenter)
    _FakeSegmenter.calls = []
    base = _base()
    orig = _save(base, tmp_path / "s1.png")
    edited = _save(_edited(base), tmp_path / "v.png")
    variants = [
        _variant(
            "s1__aligned-n2",
            "s1",
            [edited],
            {"kind": "visual", "n": 2, "distractors": ["dog bowl", "tennis ball"]},
        ),
        # a released aligned variant: no names, the objects of its class are asked for
        _variant(
            "s1__aligned-n1",
            "s1",
            [edited],
            {"kind": "visual", "n": 1, "distractors": None, "distractor_classes": ["Dog"]},
            perturbation="idis-release",
        ),
        # typographic: the segmenter is for objects; the change mask measures text
        _variant(
            "s1__typo-n4",
            "s1",
            [edited],
            {"kind": "typographic", "n": 4},
            perturbation="idis-release",
        ),
    ]
    rows, summary = _run(tmp_path, variants, [_sample("s1", orig)], {"segmenter": "fake"})
    r = rows["s1__aligned-n2"]
    # distractor = rows 10..14 (320) + rows 60..63 (256) = 576; target = 640
    assert (r["distractor_area"], r["target_area"], r["method"]) == (576, 640, "segmenter")
    assert r["r_area"] == pytest.approx(576 / 1216)
    assert _FakeSegmenter.calls[0] == ["dog", "dog bowl", "tennis ball"]
    assert _FakeSegmenter.calls[1] == [
        "dog",
        "dog bone chew toy",
        "dog bowl",
        "tennis ball",
        "kennel",
    ]
    assert rows["s1__aligned-n1"]["distractor_area"] == 576
    assert rows["s1__typo-n4"]["method"] == "change-mask"
    assert summary["methods"] == {"segmenter": 2, "change-mask": 1}


def test_segmenter_missing_prompt_is_an_error(tmp_path):
    class Forgetful:
        def segment(self, image, prompts):
            return {}

    register_segmenter("forgetful", Forgetful)
    base = _base()
    orig = _save(base, tmp_path / "s1.png")
    edited = _save(_edited(base), tmp_path / "v.png")
    v = _variant("s1__aligned-n1", "s1", [edited], {"kind": "visual", "distractors": ["x"]})
    with pytest.raises(ValueError, match=r"'s1__aligned-n1'.*'forgetful' returned no mask"):
        _run(tmp_path, [v], [_sample("s1", orig)], {"segmenter": "forgetful"})


def test_langsam_not_installed(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "lang_sam", None)  # import fails
    write_variants(tmp_path / "m.jsonl", [])
    write_samples(tmp_path / "s.jsonl", [])
    with pytest.raises(ValueError) as exc:
        measure_areas(
            tmp_path / "m.jsonl",
            tmp_path / "s.jsonl",
            {"segmenter": "langsam"},
            tmp_path / "o.jsonl",
        )
    assert str(exc.value) == "areas.segmenter: langsam is not installed (pip install lang-sam)"


# ---------------------------------------------------------------- none


def test_textual_clean_and_resolution_are_none(tmp_path):
    img = _save(_base(), tmp_path / "s1.png")
    variants = [
        _variant(
            "s1__textual-n2", "s1", [img], {"kind": "textual", "n": 2}, perturbation="textual"
        ),
        _variant("s1", "s1", [img], {}, perturbation="none"),
        _variant(
            "s1__res128",
            "s1",
            [img],
            {
                "kind": "resolution",
                "resolution": 128,
                "placed": [_placed(0, None, canvas=(128, 128))],
            },
            perturbation="resize",
        ),
    ]
    rows, summary = _run(tmp_path, variants, [_sample("s1", img)])
    for r in rows.values():
        assert (r["method"], r["reason"]) == ("none", "no-visual-distractor")
        assert (r["distractor_area"], r["target_area"], r["r_area"]) == (None, None, None)
        assert r["canvas"] == [64, 64]
    assert summary["methods"] == {"none": 3}
    assert summary["null_r_area"] == {"no-visual-distractor": 3}
    out = json.loads((tmp_path / "areas" / "c.jsonl").read_text().splitlines()[0])
    assert set(out) == {
        "variant_id",
        "sample_id",
        "distractor_area",
        "target_area",
        "r_area",
        "method",
        "reason",
        "canvas",
    }


# ---------------------------------------------------------------- settings


def test_spec_checks():
    assert check_area_spec(None) == areas.AREA_DEFAULTS
    with pytest.raises(ValueError, match=r"^idis\.areas\.thresold: unknown key"):
        check_area_spec({"thresold": 3})
    with pytest.raises(ValueError, match=r"^idis\.areas\.segmenter: 'sam9' is not one of"):
        check_area_spec({"segmenter": "sam9"})
    with pytest.raises(ValueError, match=r"^idis\.areas\.threshold"):
        check_area_spec({"threshold": 300})
    with pytest.raises(ValueError, match=r"^idis\.areas\.open_px"):
        check_area_spec({"open_px": 2.5})
    with pytest.raises(ValueError, match=r"^idis\.areas\.min_component"):
        check_area_spec({"min_component": 1.5})
    with pytest.raises(ValueError, match="reserved"):
        register_segmenter("none", _FakeSegmenter)
