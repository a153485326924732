"""Vision tokens per image: what a model's processor makes of an image's size.

One rule per processor family of the model registry (``family``), applied to the size an
image is shown at (width, height), so the count needs the image header only, never the
pixels. :data:`PROCESSORS` holds each family's rule and where its numbers come from:

- ``smart-resize`` (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, the demo models, GLM-4.1V): each side
  rounded to a multiple of ``patch x merge`` pixels and the area brought within
  ``[min_pixels, max_pixels]`` (:func:`smart_resize`, transformers' own rule, written
  out here so that counting needs no transformers import; ``tests/test_vision_tokens.py``
  checks it against transformers on many sizes); the tokens are
  ``(h / (patch x merge)) x (w / (patch x merge))``. A registry entry's
  ``options.min_pixels`` / ``max_pixels`` replace the processor's defaults, as both
  local backends pass them (docs/large-images.md). GLM-4.1V compares
  ``temporal x h x w`` with the bounds (its processor pairs every image with itself
  along time). A dataset shown at the harness's sizes (``pixels: harness``) first
  resizes each image as lmms-eval's Qwen chat wrappers do (:func:`fetch_size`,
  ``qwen_vl_utils.fetch_image``'s rule; ``Processor.prefit``), then the processor's.
- ``tiles`` (InternVL-style dynamic tiling): the image is cut into square tiles on the
  grid (cols x rows, at most ``max_tiles``) whose aspect ratio is closest to the
  image's (transformers' GOT-OCR2 ``get_optimal_tiled_canvas``), plus a thumbnail when
  there is more than one tile; ``tokens_per_tile`` each, plus ``extra``.
- ``mllama-tiles`` (Llama-3.2-Vision): the grid of at most ``max_tiles`` tiles that
  needs the least rescaling (transformers' Mllama rule); ``tokens_per_tile`` each.
- ``openai-tiles`` (GPT-4o, GPT-5 at ``detail: high``, what ``auto`` picks for a large
  image): scaled to fit ``fit x fit``, then the shorter side to at most ``short_side``;
  ``base + per_tile x tiles`` with tiles of ``tile`` pixels.
- ``fixed`` (Gemini): the same count for every image.

:func:`image_tokens` applies a rule to one size; :func:`processor_of` gives a registry
entry's rule with its own limits (None: a family without a rule here).
``benchmarks/vision_tokens.py`` prints the distribution over a folder; the run forecast
(:mod:`vlmrobust.forecast`) counts every request's images with it. This module imports
nothing of the package.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

__all__ = [
    "PROCESSORS",
    "Processor",
    "fetch_size",
    "grid_tiles",
    "image_tokens",
    "mllama_tiles",
    "processor_of",
    "smart_resize",
]


@dataclass(frozen=True)
class Processor:
    """One processor family's rule (module docstring) and the source of its numbers."""

    kind: str  # smart-resize | tiles | mllama-tiles | openai-tiles | fixed
    source: str
    patch: int = 14
    merge: int = 2
    min_pixels: int = 0
    max_pixels: int = 0
    temporal: int = 1
    tile: int = 0
    max_tiles: int = 0
    tokens_per_tile: int = 0
    thumbnail: bool = False
    extra: int = 0
    base: int = 0
    fit: int = 0
    short_side: int = 0
    tokens: int = 0
    #: ``smart-resize``: (factor, min_pixels, max_pixels) of a resize before the
    #: processor's (:func:`fetch_size`), or None
    prefit: tuple[int, int, int] | None = None

    @property
    def factor(self) -> int:
        """Pixels per vision token along one side (``smart-resize``)."""
        return self.patch * self.merge


#: family -> its rule. ``smart-resize`` defaults are the checkpoints'
#: ``preprocessor_config.json`` (Qwen/Qwen2.5-VL-7B-Instruct, Qwen/Qwen3-VL-8B-Instruct;
#: the demo models are Qwen2-VL, as Qwen2.5-VL) or transformers' class defaults where
#: no checkpoint file was read (marked so).
PROCESSORS: dict[str, Processor] = {
    "qwen2.5-vl": Processor(
        "smart-resize",
        "Qwen/Qwen2.5-VL-7B-Instruct preprocessor_config.json (patch 14, merge 2)",
        patch=14,
        merge=2,
        min_pixels=3136,
        max_pixels=12845056,
    ),
    "qwen3-vl": Processor(
        "smart-resize",
        "Qwen/Qwen3-VL-8B-Instruct preprocessor_config.json (patch 16, merge 2)",
        patch=16,
        merge=2,
        min_pixels=65536,
        max_pixels=16777216,
    ),
    "demo": Processor(
        "smart-resize",
        "the demo checkpoints' Qwen2-VL processor (patch 14, merge 2)",
        patch=14,
        merge=2,
        min_pixels=3136,
        max_pixels=12845056,
    ),
    "glm-4.1v": Processor(
        "smart-resize",
        "transformers 5.24 Glm4vImageProcessor defaults (patch 14, merge 2, temporal 2, "
        "size 112x112 .. 28x28x15000); the checkpoint's own file not read",
        patch=14,
        merge=2,
        min_pixels=112 * 112,
        max_pixels=28 * 28 * 15000,
        temporal=2,
    ),
    "intern-s1": Processor(
        "tiles",
        "assumed: InternVL-style tiling as transformers 5.24's InternVL processor "
        "(448-px tiles, 1-12 tiles + thumbnail, 256 tokens each); Intern-S1-mini's own "
        "processor config not read",
        tile=448,
        max_tiles=12,
        tokens_per_tile=256,
        thumbnail=True,
        extra=2,
    ),
    "llama-3.2-vision": Processor(
        "mllama-tiles",
        "transformers' Mllama processor: at most 4 tiles of 560x560, 1,601 vision "
        "positions per tile (40x40 patches + class token); they enter through "
        "cross-attention, not the prompt",
        tile=560,
        max_tiles=4,
        tokens_per_tile=1601,
    ),
    "openai": Processor(
        "openai-tiles",
        "OpenAI vision guide, GPT-4o at detail high: fit 2048x2048, shorter side 768, "
        "85 + 170 per 512-px tile (GPT-5 assumed the same)",
        tile=512,
        base=85,
        fit=2048,
        short_side=768,
        tokens_per_tile=170,
    ),
    "gemini": Processor(
        "fixed",
        "Gemini API token guide: 258 tokens per image (Gemini 1.5; images up to "
        "384 px); assumed for Gemini 3 Flash at its default media resolution",
        tokens=258,
    ),
}


def smart_resize(
    height: int,
    width: int,
    factor: int,
    min_pixels: int,
    max_pixels: int,
    temporal: int = 1,
) -> tuple[int, int]:
    """(height, width) the Qwen-VL / GLM-4V processors resize an image to: both sides
    multiples of ``factor``, ``temporal x h x w`` within ``[min_pixels, max_pixels]``,
    the aspect ratio kept as closely as possible (transformers'
    ``image_processing_qwen2_vl.smart_resize``; with ``temporal`` 2,
    ``image_processing_glm4v.smart_resize`` for one image)."""
    if temporal > 1 and (height < factor or width < factor):
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"image {width}x{height}: aspect ratio over 200, no processor takes it")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if temporal * h_bar * w_bar > max_pixels:
        beta = math.sqrt((temporal * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif temporal * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (temporal * height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def fetch_size(
    height: int, width: int, factor: int, min_pixels: int, max_pixels: int
) -> tuple[int, int]:
    """(height, width) ``qwen_vl_utils.fetch_image`` (qwen-vl-utils 0.0.14) resizes an
    image to before any processor sees it, as lmms-eval's Qwen chat wrappers call it:
    its ``smart_resize``, which differs from transformers' (:func:`smart_resize`) at the
    edges: a side below ``factor`` rounds up to ``factor``, and a downscaled side may
    floor to 0. ``tests/test_wrapper_tensors.py`` checks it against the package."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"image {width}x{height}: aspect ratio over 200, qwen-vl-utils refuses it")
    h_bar = max(factor, round(height / factor) * factor)
    w_bar = max(factor, round(width / factor) * factor)
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = math.floor(height / beta / factor) * factor
        w_bar = math.floor(width / beta / factor) * factor
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def grid_tiles(size: tuple[int, int], tile: int, max_tiles: int) -> int:
    """Tiles of the grid (cols x rows <= ``max_tiles``) whose aspect ratio is closest to
    the image's; a tie goes to more tiles while the image covers over half of them
    (transformers' ``get_optimal_tiled_canvas``)."""
    width, height = size
    aspect, area = width / height, width * height
    grids = [(c, r) for c in range(1, max_tiles + 1) for r in range(1, max_tiles + 1)]
    grids = sorted((g for g in grids if g[0] * g[1] <= max_tiles), key=lambda g: g[0] * g[1])
    best, best_diff = (1, 1), float("inf")
    for cols, rows in grids:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and area > 0.5 * tile * tile * cols * rows:
            best = (cols, rows)
    return best[0] * best[1]


def mllama_tiles(size: tuple[int, int], tile: int, max_tiles: int) -> int:
    """Tiles of Llama-3.2-Vision's canvas: of the grids (a x b <= ``max_tiles``) the one
    needing the least upscaling, else the least downscaling, the smallest on a tie
    (transformers' ``image_processing_mllama.get_optimal_tiled_canvas``)."""
    width, height = size
    grids = [(a, b) for a in range(1, max_tiles + 1) for b in range(1, max_tiles + 1)]
    grids = [g for g in grids if g[0] * g[1] <= max_tiles]
    scales = [min(a * tile / height, b * tile / width) for a, b in grids]
    up = [s for s in scales if s >= 1]
    chosen = min(up) if up else max(scales)
    return min(a * b for (a, b), s in zip(grids, scales, strict=True) if s == chosen)


def _openai_tiles(size: tuple[int, int], p: Processor) -> int:
    w, h = float(size[0]), float(size[1])
    scale = min(1.0, p.fit / max(w, h))
    w, h = w * scale, h * scale
    scale = min(1.0, p.short_side / min(w, h))
    w, h = w * scale, h * scale
    return p.base + p.tokens_per_tile * math.ceil(w / p.tile) * math.ceil(h / p.tile)


def image_tokens(size: tuple[int, int], processor: Processor) -> int:
    """Vision tokens of one image of ``size`` (width, height) under ``processor``."""
    width, height = int(size[0]), int(size[1])
    if width < 1 or height < 1:
        raise ValueError(f"image size {width}x{height} is empty")
    if processor.kind == "smart-resize":
        f = processor.factor
        if processor.prefit is not None:
            height, width = fetch_size(height, width, *processor.prefit)
        h, w = smart_resize(
            height, width, f, processor.min_pixels, processor.max_pixels, processor.temporal
        )
        return (h // f) * (w // f)
    if processor.kind == "tiles":
        n = grid_tiles((width, height), processor.tile, processor.max_tiles)
        n += 1 if processor.thumbnail and n > 1 else 0
        return n * processor.tokens_per_tile + processor.extra
    if processor.kind == "mllama-tiles":
        n = mllama_tiles((width, height), processor.tile, processor.max_tiles)
        return n * processor.tokens_per_tile
    if processor.kind == "openai-tiles":
        return _openai_tiles((width, height), processor)
    if processor.kind == "fixed":
        return processor.tokens
    raise ValueError(f"unknown processor kind {processor.kind!r}")


def processor_of(entry: dict[str, Any], limits: dict[str, Any] | None = None) -> Processor | None:
    """A registry entry's rule: its family's, with the entry's ``options.min_pixels`` /
    ``max_pixels`` (a ``smart-resize`` family), ``limits`` (a dataset's: ``min_pixels`` /
    ``max_pixels``, and ``fit``: the resize before the processor,
    :attr:`Processor.prefit`) over them; None for a family without a rule. A
    checkpoint the workflow builds (``demo_seed``) is a demo Qwen2-VL whatever family
    it names (the stand-ins of the papers' run keep the paper models' families): the
    ``demo`` rule."""
    family = "demo" if entry.get("demo_seed") is not None else entry.get("family") or ""
    processor = PROCESSORS.get(family)
    if processor is None or processor.kind != "smart-resize":
        return processor
    options = {**(entry.get("options") or {}), **(limits or {})}
    fit = options.get("fit")
    return replace(
        processor,
        min_pixels=int(options.get("min_pixels") or processor.min_pixels),
        max_pixels=int(options.get("max_pixels") or processor.max_pixels),
        prefit=(
            (int(fit["factor"]), int(fit["min_pixels"]), int(fit["max_pixels"])) if fit else None
        ),
    )
