"""How variant images are stored (``variants.format``): exact, deterministic, readable."""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vlmrobust.clients.apicall import png_bytes
from vlmrobust.clients.vlm.media import load_image
from vlmrobust.core.config import (
    ConfigError,
    load_schema,
    load_yaml,
    validate_config,
    validate_registry,
)
from vlmrobust.core.io import sha256_bytes, sha256_file
from vlmrobust.core.records import Sample, read_variants, write_samples
from vlmrobust.core.seeding import derive_seed
from vlmrobust.perturb import build_variants, corrupt_image
from vlmrobust.perturb.storage import FORMATS, WEBP_MAX_SIDE, encode_image, stored_format
from vlmrobust.review.page import build_review_page

from .conftest import REPO

ALL = {"perturbation": "corruption", "assignment": "all", "severities": [5],
       "methods": ["gaussian_noise", "fog", "pixelate", "blank"]}  # fmt: skip


def _noise(mode: str, size: tuple[int, int], seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size[0] * size[1] * Image.getmodebands(mode), np.uint8)
    return Image.frombytes(mode, size, data.tobytes())


def _decoded(data: bytes) -> tuple[str, Image.Image]:
    """The format the bytes hold and the image they decode to."""
    with Image.open(io.BytesIO(data)) as im:
        im.load()
        return im.format, im.copy()


# ---------------------------------------------------------------- the encoders


def test_png_is_what_the_stage_always_wrote():
    # the default keeps the bytes of every earlier run: Pillow's PNG, default settings
    image = _noise("RGB", (50, 40), 0)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    assert encode_image(image) == (buf.getvalue(), ".png")
    assert encode_image(image, "png") == (buf.getvalue(), ".png")


def test_webp_is_lossless_and_keeps_the_colour_under_transparent_pixels():
    rgba = _noise("RGBA", (64, 48), 1)
    arr = np.asarray(rgba).copy()
    arr[:20, :, 3] = 0  # fully transparent rows whose colours must survive
    rgba = Image.fromarray(arr, "RGBA")
    for image in (_noise("RGB", (64, 48), 2), rgba):
        data, suffix = encode_image(image, "webp")
        assert suffix == ".webp" and data[:4] == b"RIFF" and data[8:12] == b"WEBP"
        fmt, back = _decoded(data)
        assert fmt == "WEBP" and back.mode == image.mode
        assert back.tobytes() == image.tobytes()
        assert encode_image(image, "webp") == (data, suffix)  # deterministic


@pytest.mark.parametrize("mode", ["L", "LA", "P", "I;16", "1"])
def test_webp_falls_back_to_png_for_modes_it_cannot_hold(mode):
    if mode == "I;16":
        values = np.random.default_rng(3).integers(0, 65536, (20, 30)).astype("<u2")
        image = Image.frombytes("I;16", (30, 20), values.tobytes())
    else:
        image = _noise("L", (30, 20), 3).convert(mode)
    assert stored_format(image, "webp") == "png"
    data, suffix = encode_image(image, "webp")
    fmt, back = _decoded(data)
    assert suffix == ".png" and fmt == "PNG"
    assert back.mode == image.mode and back.tobytes() == image.tobytes()


def test_webp_falls_back_to_png_past_its_largest_side():
    wide = Image.new("RGB", (WEBP_MAX_SIDE + 1, 2), (10, 20, 30))
    assert stored_format(wide, "webp") == "png"
    assert encode_image(wide, "webp")[1] == ".png"
    assert stored_format(Image.new("RGB", (WEBP_MAX_SIDE, 2)), "webp") == "webp"


def test_unknown_format_is_an_error():
    with pytest.raises(ValueError, match="unknown image format 'jpeg'"):
        encode_image(Image.new("RGB", (4, 4)), "jpeg")


def test_config_declares_the_format_with_png_as_default():
    registry = validate_registry(load_yaml(REPO / "config/models.yaml"))
    # the default run keeps PNG (its bytes as before); the paper's stores WebP
    for shipped, fmt in (("config/config.yaml", "png"), ("config/paper.yaml", "webp")):
        assert validate_config(load_yaml(REPO / shipped), registry)["variants"] == {"format": fmt}
    assert "variants" not in load_yaml(REPO / "config/config.yaml")  # the schema's default
    config = {**load_yaml(REPO / "config/config.yaml"), "variants": {"format": "webp"}}
    assert validate_config(config, registry)["variants"]["format"] == "webp"
    with pytest.raises(ConfigError, match=re.escape("variants.format': 'jpeg' is not one of")):
        validate_config({**config, "variants": {"format": "jpeg"}}, registry)
    schema = load_schema("config")["properties"]["variants"]["properties"]["format"]
    assert tuple(schema["enum"]) == FORMATS


# ---------------------------------------------------------------- the stage


@pytest.fixture
def samples_path(tmp_path: Path) -> Path:
    src = tmp_path / "raw"
    src.mkdir()
    files = []
    for i, (mode, size) in enumerate([("RGB", (48, 40)), ("RGBA", (40, 36)), ("L", (36, 44))]):
        files.append(src / f"{i}.png")
        _noise(mode, size, 10 + i).save(files[-1])
    samples = [
        Sample("s-rgb", "demo", [str(files[0])], "q?", "A", "letter", choices=["x", "y"]),
        Sample("s-two", "demo", [str(files[1]), str(files[2])], "q?", "yes", "yes/no"),
    ]
    path = tmp_path / "samples.jsonl"
    write_samples(path, samples)
    return path


def _build(samples_path: Path, out: Path, image_format: str, threads: int = 1) -> list:
    build_variants(samples_path, "c", ALL, 7, out, threads=threads, image_format=image_format)
    return read_variants(out)


def test_webp_variants_are_the_png_variants_pixel_for_pixel(samples_path, tmp_path):
    png = _build(samples_path, tmp_path / "png" / "manifest.jsonl", "png")
    webp = _build(samples_path, tmp_path / "webp" / "manifest.jsonl", "webp")
    assert [v.variant_id for v in webp] == [v.variant_id for v in png]
    assert [v.params for v in webp] == [v.params for v in png]
    sources = {"s-rgb": ["0.png"], "s-two": ["1.png", "2.png"]}
    for p, w in zip(png, webp, strict=True):
        for k, (pp, wp) in enumerate(zip(p.images, w.images, strict=True)):
            with Image.open(samples_path.parent / "raw" / sources[w.sample_id][k]) as src:
                mode = src.mode
                expected = corrupt_image(
                    src,
                    w.params["method"],
                    w.params["severity"],
                    derive_seed(7, "c", w.variant_id, k),
                )
            # RGB and RGBA as WebP, L (WebP has no grey) as PNG; the suffix says which
            assert Path(wp).suffix == (".png" if mode == "L" else ".webp")
            assert Path(pp).suffix == ".png" and Path(wp).stem == Path(pp).stem
            with Image.open(pp) as a, Image.open(wp) as b:
                assert b.mode == a.mode == expected.mode
                assert b.tobytes() == a.tobytes() == expected.tobytes()
            assert w.sha256[k] == sha256_file(wp)
            assert (w.sha256[k] == p.sha256[k]) == (mode == "L")


def test_webp_variants_are_deterministic_in_any_number_of_processes(samples_path, tmp_path):
    one = _build(samples_path, tmp_path / "a" / "manifest.jsonl", "webp")
    two = _build(samples_path, tmp_path / "b" / "manifest.jsonl", "webp", threads=2)
    assert [v.sha256 for v in two] == [v.sha256 for v in one]
    assert all(v.sha256 == [sha256_file(p) for p in v.images] for v in two)


def test_a_rebuild_in_another_format_leaves_only_what_the_manifest_names(samples_path, tmp_path):
    out = tmp_path / "v" / "manifest.jsonl"
    images = out.parent / "images"
    _build(samples_path, out, "png")
    (images / "leftover_0.png").write_bytes(b"an earlier run's image")
    rows = _build(samples_path, out, "webp")
    named = sorted(Path(p).name for v in rows for p in v.images)
    assert sorted(f.name for f in images.iterdir()) == named
    assert sum(n.endswith(".webp") for n in named) == 2 * 4  # RGB and RGBA images
    # a condition that writes nothing (here: the clean one) takes the folder away
    build_variants(samples_path, "c", {"perturbation": "none"}, 7, out)
    assert not images.exists()


def test_masks_stay_png_beside_webp_images(tmp_path):
    img = tmp_path / "img.png"
    _noise("RGB", (60, 40), 4).save(img)
    box = {"startX": 5, "startY": 5, "w": 20, "h": 10}
    meta = {"b_box": [box], "premise_index": 0}
    write_samples(
        tmp_path / "s.jsonl", [Sample("vis-0", "visargs", [str(img)], "q", "a", "text", meta=meta)]
    )
    out = tmp_path / "m" / "manifest.jsonl"
    build_variants(
        tmp_path / "s.jsonl", "mask", {"perturbation": "mask"}, 0, out, image_format="webp"
    )
    (row,) = read_variants(out)
    assert row.images[0].endswith("vis-0_0.webp") and row.masks[0].endswith("vis-0_0_mask.png")
    with Image.open(row.masks[0]) as m:
        assert m.format == "PNG" and m.mode == "L"
    with Image.open(row.images[0]) as im:
        assert im.format == "WEBP"
        assert (np.asarray(im)[5:15, 5:25] == 0).all()


# ---------------------------------------------------------------- the readers


def test_every_reader_sees_the_same_pixels_in_either_format(samples_path, tmp_path):
    png = _build(samples_path, tmp_path / "png" / "manifest.jsonl", "png")
    webp = _build(samples_path, tmp_path / "webp" / "manifest.jsonl", "webp")
    for p, w in zip(png, webp, strict=True):
        for pp, wp in zip(p.images, w.images, strict=True):
            # the local backends (hf, vllm): RGB, transparency on white
            assert load_image(wp).tobytes() == load_image(pp).tobytes()
            # the API backends and the judges send PNG: the very same bytes
            assert png_bytes(wp) == png_bytes(pp)


def test_review_page_embeds_webp_variants_as_webp(tmp_path):
    images = tmp_path / "results" / "images"
    images.mkdir(parents=True)
    original = images / "a.png"
    Image.new("RGB", (8, 8), (1, 2, 3)).save(original)
    edited = images / "a_0.webp"
    edited.write_bytes(encode_image(_noise("RGB", (8, 8), 5), "webp")[0])
    cand = {"sample_id": "x-1", "question": "q", "answer": "A", "choices": [],
            "original_image": "results/images/a.png", "edited_image": "results/images/a_0.webp",
            "distractor_description": "d", "dataset": "x"}  # fmt: skip
    from vlmrobust.core.decisions import Candidate

    page = build_review_page(
        [Candidate.from_dict(cand)], {}, tmp_path / "p.html", image_base=tmp_path, embed_images=True
    ).read_text()
    uris = re.findall(r'<img src="data:(image/\w+);base64,([^"]+)"', page)
    assert [m for m, _ in uris] == ["image/png", "image/webp"]
    import base64

    assert sha256_bytes(base64.b64decode(uris[1][1])) == sha256_file(edited)
