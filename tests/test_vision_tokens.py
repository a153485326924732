"""Vision tokens per image (core/vision_tokens.py) against transformers' own processor
rules, on sizes from tiny to extreme aspect ratios, and the published OpenAI examples."""

from __future__ import annotations

import itertools

import pytest

from vlmrobust.core.vision_tokens import (
    PROCESSORS,
    grid_tiles,
    image_tokens,
    mllama_tiles,
    processor_of,
    smart_resize,
)

SIDES = [1, 7, 28, 55, 100, 224, 333, 448, 512, 729, 1000, 1024, 2048, 2520, 4000, 8526]
SIZES = [(w, h) for w, h in itertools.product(SIDES, SIDES) if max(w, h) / min(w, h) <= 200]


@pytest.mark.parametrize("family", ["qwen2.5-vl", "qwen3-vl"])
def test_smart_resize_is_transformers_qwen2_vl_rule(family):
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize as theirs

    p = PROCESSORS[family]
    for w, h in SIZES:
        for lo, hi in ((p.min_pixels, p.max_pixels), (200704, 1003520), (3136, 50176)):
            assert smart_resize(h, w, p.factor, lo, hi) == theirs(
                h, w, factor=p.factor, min_pixels=lo, max_pixels=hi
            ), (w, h, lo, hi)


def test_glm_rule_is_transformers_glm4v_rule():
    from transformers.models.glm4v.image_processing_glm4v import smart_resize as theirs

    p = PROCESSORS["glm-4.1v"]
    for w, h in SIZES:
        ours = smart_resize(h, w, p.factor, p.min_pixels, p.max_pixels, temporal=2)
        assert ours == theirs(
            2, h, w, temporal_factor=2, factor=p.factor,
            min_pixels=p.min_pixels, max_pixels=p.max_pixels,
        ), (w, h)  # fmt: skip


def test_internvl_tiles_are_transformers_got_ocr2_canvas():
    from transformers.models.got_ocr2.image_processing_pil_got_ocr2 import (
        get_optimal_tiled_canvas,
    )

    for w, h in SIZES:
        cols, rows = get_optimal_tiled_canvas((h, w), (448, 448), 1, 12)
        assert grid_tiles((w, h), 448, 12) == cols * rows, (w, h)


def test_mllama_tiles_are_transformers_mllama_canvas():
    from transformers.models.mllama.image_processing_mllama import get_optimal_tiled_canvas

    for w, h in SIZES:
        ch, cw = get_optimal_tiled_canvas(h, w, 4, 560)
        assert mllama_tiles((w, h), 560, 4) == (ch // 560) * (cw // 560), (w, h)


def test_openai_tiles_follow_the_published_examples():
    openai = PROCESSORS["openai"]
    # OpenAI's vision guide: 1024 x 1024 -> 768 x 768, 4 tiles: 765 tokens; 2048 x 4096
    # -> 1024 x 2048 -> 768 x 1536, 6 tiles: 1,105 tokens
    assert image_tokens((1024, 1024), openai) == 765
    assert image_tokens((2048, 4096), openai) == 1105


def test_a_registry_entry_brings_its_own_pixel_limits():
    entry = {"family": "qwen2.5-vl", "options": {"min_pixels": 200704, "max_pixels": 1003520}}
    p = processor_of(entry)
    assert (p.min_pixels, p.max_pixels) == (200704, 1003520)
    # MATH-V's 2935.jpg (2520 x 8526) under those limits: the 130 x 38 patch grid of
    # docs/large-images.md, 65 x 19 = 1,235 merged tokens
    assert smart_resize(8526, 2520, 28, 200704, 1003520) == (130 * 14, 38 * 14)
    assert image_tokens((2520, 8526), p) == 65 * 19
    assert processor_of({"family": "no-such-family"}) is None
    assert processor_of({"family": "gemini"}).tokens == 258


def test_a_checkpoint_the_workflow_builds_counts_as_the_demo_processor():
    """A stand-in named like Llama-3.2-Vision (tiles of 560 px) but built as a demo
    Qwen2-VL (demo_seed) is counted by the demo rule with its own pixel limits."""
    from vlmrobust.core.vision_tokens import image_tokens, processor_of

    options = {"min_pixels": 3136, "max_pixels": 50176}
    llama = processor_of({"family": "llama-3.2-vision", "options": options})
    standin = processor_of({"family": "llama-3.2-vision", "options": options, "demo_seed": 7})
    assert standin.kind == "smart-resize" and llama.kind != "smart-resize"
    # 1000 x 1000 px within 50,176 px: 224 x 224, 16 x 16 patches of 14 px, 2 x 2 merged
    assert image_tokens((1000, 1000), standin) == 64
