"""The large-image policy (docs/large-images.md): ``max_pixels`` at samples time (downscale,
meta, report, VisArgs boxes), in every variant (kept, made, fixed canvases, the Idis
composites), the MATH-V adapter's pictured options and image parts, the registry's
per-model pixel limits and the vision-token counts of benchmarks/vision_tokens.py."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest
import yaml
from PIL import Image, ImageDraw

from tests.conftest import REPO
from vlmrobust.core.config import ConfigError, load_schema, validate_config
from vlmrobust.core.pixels import DEFAULT_MAX_PIXELS, PIL_MAX_PIXELS, fit_within, max_side
from vlmrobust.core.records import Sample, read_samples, read_variants, write_samples
from vlmrobust.data.build import build_samples
from vlmrobust.perturb import build_variants

# ---------------------------------------------------------------- the bound itself


def test_fit_within_keeps_the_aspect_ratio_and_rounds_down():
    # 2935.jpg of MATH-V: 2520 x 8526 = 21,485,520 pixels; factor sqrt(4194304 / that)
    # = 0.44183...: 1113.4 x 3767.05, rounded down
    assert fit_within((2520, 8526), 4_194_304) == (1113, 3767)
    assert 1113 * 3767 <= 4_194_304 < 1114 * 3768
    assert fit_within((1000, 500), 500_000) == (1000, 500)  # fits: unchanged
    assert fit_within((1001, 500), 500_000) == (1000, 499)
    assert fit_within((10_000, 1), 100) == (100, 1)  # a side never drops under 1
    assert max_side(4_194_304) == 2048 and max_side(4_194_303) == 2047
    with pytest.raises(ValueError, match="empty"):
        fit_within((0, 5), 10)


def test_the_schema_default_is_the_code_default_and_datasets_inherit_it(monkeypatch):
    monkeypatch.chdir(REPO)  # the registry path of a config is relative to the repository
    samples = load_schema("config")["properties"]["samples"]["properties"]["max_pixels"]
    assert samples["default"] == DEFAULT_MAX_PIXELS == 2048 * 2048
    assert samples["maximum"] == PIL_MAX_PIXELS == Image.MAX_IMAGE_PIXELS
    ds = {"adapter": "demo", "source": "local", "path": "results/raw/demo/chart"}
    config = validate_config({"models": [], "datasets": {"a": dict(ds),
                              "b": {**ds, "max_pixels": 10_000}}})  # fmt: skip
    assert config["datasets"]["a"]["max_pixels"] == DEFAULT_MAX_PIXELS
    assert config["datasets"]["b"]["max_pixels"] == 10_000
    config = validate_config({"models": [], "samples": {"max_pixels": 20_000},
                              "datasets": {"a": dict(ds)}})  # fmt: skip
    assert config["datasets"]["a"]["max_pixels"] == 20_000
    with pytest.raises(ConfigError, match=r"max_pixels"):
        validate_config({"models": [], "datasets": {"a": {**ds, "max_pixels": PIL_MAX_PIXELS + 1}}})


# ---------------------------------------------------------------- samples


def _photo(size: tuple[int, int], seed: int = 0) -> Image.Image:
    """A picture with detail (so a resize is visible), the same for the same arguments."""
    im = Image.new("RGB", size, (250, 250, 250))
    draw = ImageDraw.Draw(im)
    for i in range(0, max(size), 7):
        draw.line([(i, 0), (0, i)], fill=((i * 37 + seed) % 255, (i * 11) % 255, 90), width=2)
    return im


@pytest.fixture
def mathv(tmp_path: Path) -> Path:
    """A MATH-V-like local folder: a 3-megapixel JPEG (2000 x 1500), a small one, a row with
    a letter answer and no options, a row with image parts."""
    root = tmp_path / "mathv"
    (root / "images").mkdir(parents=True)
    (root / "data").mkdir()
    _photo((2000, 1500)).save(root / "images" / "1.jpg", quality=90)
    _photo((300, 200), 1).save(root / "images" / "2.jpg", quality=90)
    _photo((320, 240), 2).save(root / "images" / "3.jpg", quality=90)
    rows = [
        {"id": "1", "question": "How long?\n<image1>", "options": [], "answer": "9",
         "image": "images/1.jpg"},
        {"id": "2", "question": "<image1>\nWhich side?\n<image2>\n<image3>", "options": [],
         "answer": "C", "image": "images/2.jpg"},
        {"id": "3", "question": "Which bike?\n<image1>", "options": ["A", "B", "C", "D", "E"],
         "answer": "A", "image": "images/3.jpg"},
    ]  # fmt: skip
    (root / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def _samples(tmp_path: Path, folder: Path, **spec) -> tuple[list[Sample], dict]:
    out = tmp_path / "out" / "samples.jsonl"
    spec = {"adapter": "mathvision", "source": "local", "path": str(folder), "split": "test",
            **spec}  # fmt: skip
    report = build_samples("mathvision", spec, out, out.parent / "report.json")
    return read_samples(out), report


def test_a_large_image_is_downscaled_once_recorded_and_counted(tmp_path, mathv):
    samples, report = _samples(tmp_path, mathv, max_pixels=1_000_000)
    by_id = {s.meta["source_id"]: s for s in samples}
    big = by_id["1"]
    # 2000 x 1500 -> factor sqrt(1e6 / 3e6) = 0.57735: 1154.7 x 866.03, rounded down
    assert big.images[0].endswith("mathvision-1_0.png")
    with Image.open(big.images[0]) as im:
        assert (im.size, im.format, im.mode) == ((1154, 866), "PNG", "RGB")
    assert big.meta["downscaled_images"] == [
        {"file": "mathvision-1_0.png", "from": [2000, 1500], "to": [1154, 866]}
    ]
    assert report["max_pixels"] == 1_000_000
    assert report["images_downscaled"] == 1
    assert report["downscaled_samples"] == ["1"]
    # an image that fits keeps its bytes and its sample carries no record
    small = by_id["2"]
    assert "downscaled_images" not in small.meta
    assert small.images[0].endswith(".jpg")
    digest = hashlib.sha256(Path(small.images[0]).read_bytes()).hexdigest()
    assert digest == hashlib.sha256((mathv / "images" / "2.jpg").read_bytes()).hexdigest()
    # deterministic: the same bytes again
    first = Path(big.images[0]).read_bytes()
    again, _ = _samples(tmp_path / "again", mathv, max_pixels=1_000_000)
    assert Path(again[0].images[0]).read_bytes() == first


def test_the_default_bound_leaves_images_under_it_alone(tmp_path, mathv):
    samples, report = _samples(tmp_path, mathv)  # no max_pixels: the default, 2048 x 2048
    assert report["max_pixels"] == DEFAULT_MAX_PIXELS
    assert report["images_downscaled"] == 0 and report["downscaled_samples"] == []
    assert all("downscaled_images" not in s.meta for s in samples)
    assert all(s.images[0].endswith(".jpg") for s in samples)


def test_the_exif_orientation_is_applied_before_downscaling(tmp_path, mathv):
    im = _photo((2000, 1000))
    exif = im.getexif()
    exif[0x0112] = 6  # shown rotated: 1000 x 2000
    im.save(mathv / "images" / "1.jpg", exif=exif)
    samples, _ = _samples(tmp_path, mathv, max_pixels=500_000)
    big = samples[0]
    assert big.meta["downscaled_images"][0]["from"] == [1000, 2000]
    with Image.open(big.images[0]) as out:
        assert out.size == (500, 1000) and not out.getexif().get(0x0112)


def test_a_bad_max_pixels_names_the_key(tmp_path, mathv):
    with pytest.raises(ValueError, match=r"datasets\.mathvision\.max_pixels: 0 is not"):
        _samples(tmp_path, mathv, max_pixels=0)


def test_visargs_boxes_follow_a_downscaled_image(tmp_path):
    folder = tmp_path / "visargs"
    (folder / "img").mkdir(parents=True)
    Image.new("RGB", (2000, 1000), (10, 20, 30)).save(folder / "img" / "a.png")
    rows = [{"id": "a", "url": "img/a.png", "visual_premises": ["p0", "p1"],
             "b_box": [{"startX": 0, "startY": 0, "w": 101, "h": 50},
                       {"startX": 1001, "startY": 333, "w": 999, "h": 667}],
             "commonsense_premises": ["c", "c"], "conclusion": "C.",
             "reasoning_steps": ["(VP1, CP1 -> IC1): x"]}]  # fmt: skip
    (folder / "annotation.json").write_text(json.dumps(rows))
    out = tmp_path / "out" / "samples.jsonl"
    spec = {"adapter": "visargs", "source": "local", "path": str(folder), "max_pixels": 500_000}
    report = build_samples("visargs", spec, out, out.parent / "report.json")
    samples = read_samples(out)
    assert report["images_downscaled"] == 2  # one image per premise sample
    # 2000 x 1000 -> 1000 x 500 (factor 0.5); boxes rounded outward, inside the image
    for s in samples:
        assert s.meta["image_size"] == [1000, 500]
        assert s.meta["b_box"] == [
            {"startX": 0, "startY": 0, "w": 51, "h": 25},
            {"startX": 500, "startY": 166, "w": 500, "h": 334},
        ]


# ---------------------------------------------------------------- MATH-V adapter


def test_mathvision_letter_answers_without_options_get_the_pictured_letters(tmp_path, mathv):
    samples, report = _samples(tmp_path, mathv)
    by_id = {s.meta["source_id"]: s for s in samples}
    assert (by_id["2"].answer, by_id["2"].answer_type) == ("C", "letter")
    assert by_id["2"].choices == ["A", "B", "C", "D", "E"]
    assert by_id["2"].meta["options_pictured"] is True
    assert "options_pictured" not in by_id["3"].meta  # options as released
    assert (by_id["1"].answer_type, by_id["1"].choices) == ("number", [])
    # the placeholders stay verbatim
    assert by_id["2"].question == "<image1>\nWhich side?\n<image2>\n<image3>"
    assert report["letter_answers_without_options"] == ["2"]
    assert report["questions_with_image_parts"] == 1
    assert report["answer_types"] == {"letter": 2, "number": 1}


# ---------------------------------------------------------------- variants


def _tall_sample(tmp_path: Path, size=(300, 1200)) -> Path:
    path = tmp_path / "tall.png"
    _photo(size, 3).save(path)
    table = tmp_path / "table.png"
    _photo((120, 60), 4).save(table)
    write_samples(tmp_path / "samples.jsonl", [Sample("d-1", "d", [str(path)], "Q", "1", "number")])
    lv = Sample("lv-1", "lv", [str(table)], "Q", "A", "letter",
                meta={"specific_capability": ["table"]})  # fmt: skip
    write_samples(tmp_path / "lv.jsonl", [lv])
    return tmp_path / "samples.jsonl"


def test_the_diagram_canvas_stays_within_max_pixels(tmp_path):
    samples = _tall_sample(tmp_path)
    spec = {"perturbation": "diagram", "canvas": 256, "counts": [1],
            "semantics": ["irrelevant"], "irrelevant_samples": str(tmp_path / "lv.jsonl")}  # fmt: skip
    out = tmp_path / "var" / "manifest.jsonl"
    # unbounded the canvas would be ceil(1200 / 0.6) = 2000 px; the bound 1000 x 1000
    # leaves a 1000 px side and the diagram's longer side floor(0.6 * 1000) = 600
    assert build_variants(samples, "dia", spec, 0, out, max_pixels=1_000_000) == 1
    [v] = read_variants(out)
    p = v.params
    assert p["canvas"] == 1000 and p["target_source_size"] == [300, 1200]
    assert p["target_size"] == [150, 600] and p["target_area"] == 150 * 600
    assert p["target_box"] == [425, 200, 575, 800]
    with Image.open(v.images[0]) as im:
        assert im.size == (1000, 1000)
        # the diagram (scaled) fills its box: its top-left pixel is the source's, no white
        assert im.getpixel((425, 200)) != (255, 255, 255)
    # under the default bound it is pasted unscaled, and nothing new is recorded
    out2 = tmp_path / "var2" / "manifest.jsonl"
    build_variants(samples, "dia", spec, 0, out2)
    [v2] = read_variants(out2)
    assert v2.params["canvas"] == 2000 and v2.params["target_size"] == [300, 1200]
    assert "target_source_size" not in v2.params


@pytest.mark.parametrize(
    ("spec", "key", "pixels"),
    [
        ({"perturbation": "resize", "resolutions": [128, 2048]}, "resolutions", 2048**2),
        ({"perturbation": "diagram", "canvas": 1500, "semantics": ["irrelevant"]}, "canvas",
         1500**2),
    ],
)  # fmt: skip
def test_a_fixed_canvas_over_max_pixels_names_the_key(tmp_path, spec, key, pixels):
    samples = _tall_sample(tmp_path)
    spec = {**spec, "irrelevant_samples": str(tmp_path / "lv.jsonl")} if "canvas" in spec else spec
    with pytest.raises(ValueError, match=rf"conditions\.c\.{key}: its images have {pixels:,}"):
        build_variants(samples, "c", spec, 0, tmp_path / "m.jsonl", max_pixels=2_000_000)
    assert not (tmp_path / "images").exists()


@pytest.mark.parametrize("perturbation", ["none", "corruption"])
def test_an_image_over_max_pixels_is_an_error_naming_sample_and_file(tmp_path, perturbation):
    samples = _tall_sample(tmp_path, size=(400, 300))  # 120,000 pixels
    spec = {"perturbation": perturbation}
    if perturbation == "corruption":
        spec["methods"] = ["contrast"]
    with pytest.raises((ValueError, RuntimeError)) as err:
        build_variants(samples, "c", spec, 0, tmp_path / "m.jsonl", max_pixels=100_000)
    message = str(err.value)
    assert "sample 'd-1'" in message and str(tmp_path / "tall.png") in message
    assert "400x300 = 120,000 pixels, more than the dataset's max_pixels (100,000" in message
    assert not (tmp_path / "m.jsonl").exists()


# ---------------------------------------------------------------- models


def _registry() -> dict:
    return yaml.safe_load((REPO / "config" / "models.yaml").read_text())["models"]


def test_every_qwen_model_has_its_familys_pixel_limits_and_the_doc_says_why():
    limits = {
        "qwen2.5-vl": {"min_pixels": 256 * 28 * 28, "max_pixels": 1280 * 28 * 28},
        "qwen3-vl": {"min_pixels": 65536, "max_pixels": 4096 * 32 * 32},
    }
    seen = set()
    for model, entry in _registry().items():
        if entry.get("family") in limits:
            opts = entry.get("options") or {}
            got = {k: opts.get(k) for k in ("min_pixels", "max_pixels")}
            assert got == limits[entry["family"]], model
            seen.add(model)
    assert len(seen) == 9  # 7 on Qwen2.5-VL, the Qwen3-VL pair
    doc = (REPO / "docs" / "large-images.md").read_text()
    for n in (200_704, 1_003_520, 65_536, 4_194_304):
        assert f"{n:,}" in doc


def _vision_tokens():
    spec = importlib.util.spec_from_file_location(
        "vision_tokens", REPO / "benchmarks" / "vision_tokens.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_vision_tokens_follow_the_processors_resize_rule():
    vt = _vision_tokens()
    from vlmrobust.core.vision_tokens import image_tokens

    named = vt.settings(
        ["qwen2.5-vl-7b", "qwen3-vl-8b-instruct"], REPO / "config" / "models.yaml", True
    )
    [q25, q3, q25_default, q3_default] = [processor for _, processor in named]
    size = (2520, 8526)  # 2935.jpg
    # defaults: 8526 x 2520 -> 6580 x 1932 (multiples of 28, <= 12,845,056): 235 x 69
    assert image_tokens(size, q25_default) == 235 * 69
    # registry limits: <= 1,003,520 -> 1820 x 532: 65 x 19
    assert image_tokens(size, q25) == 65 * 19
    # Qwen3-VL, 32-pixel tokens, <= 4,194,304 -> 3744 x 1088: 117 x 34
    assert image_tokens(size, q3) == 117 * 34
    assert q3_default.max_pixels == 16_777_216
    # a small image is enlarged to min_pixels: 40 x 54 = 2,160 pixels (MATH-V's smallest)
    # -> 19 x 14 = 266 tokens under 200,704 (sqrt(200704 / 2160) = 9.64 times each side,
    # rounded up to 28 px); 3 x 2 = 6 under the default 3,136
    assert image_tokens((40, 54), q25) == 19 * 14
    assert image_tokens((40, 54), q25_default) == 3 * 2
    row = vt.summary([1, 2, 3, 100], [2, 50])
    assert row == {"images": 4, "median": 2.5, "p99": pytest.approx(97.09), "max": 100,
                   "total": 106, "over 2": 2, "over 50": 1}  # fmt: skip
