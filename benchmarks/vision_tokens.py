"""Vision tokens per image of a dataset under a model's pixel limits (Qwen-VL processors).

    python benchmarks/vision_tokens.py ../shared/data/mathvision/images \
        ../shared/data/logicvista/data/images
    python benchmarks/vision_tokens.py results/samples/mathvision/samples.jsonl \
        --models qwen2.5-vl-7b qwen3-vl-8b-instruct --over 1280 4096

Each argument is a folder of images (read recursively) or a ``samples.jsonl`` (the
images its samples list). Only the image headers are read. For every image the
processor's own resize rule is applied (``smart_resize`` of transformers' Qwen2-VL image
processor, which Qwen2.5-VL and Qwen3-VL use: each side rounded to a multiple of
``patch x merge`` pixels, the area brought within ``[min_pixels, max_pixels]``), and the
vision tokens are ``(height / (patch x merge)) x (width / (patch x merge))``. Printed per
(dataset, setting): images, median, p99 (numpy's linear percentile), max, the images
over each ``--over`` threshold and the total. The settings are the registry entries of
``--models`` (their ``options.min_pixels`` / ``max_pixels``; an unset one takes the
processor's default) and, with ``--defaults``, each family's processor defaults (what a
model without limits gets). ``--max-pixels N`` first applies the samples stage's
downscale (``datasets.<name>.max_pixels``) to every size. The numbers in
docs/large-images.md come from this script.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "workflow"))

from vlmrobust.core.pixels import fit_within  # noqa: E402

#: family -> (patch size, merge size, default min_pixels, default max_pixels) of its
#: processor (preprocessor_config.json of Qwen/Qwen2.5-VL-7B-Instruct and
#: Qwen/Qwen3-VL-8B-Instruct; the demo models are Qwen2-VL, as Qwen2.5-VL)
FAMILIES = {
    "qwen2.5-vl": (14, 2, 3136, 12845056),
    "qwen3-vl": (16, 2, 65536, 16777216),
    "demo": (14, 2, 3136, 12845056),
}
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif"}


def image_files(source: Path) -> list[Path]:
    """The images of a folder (recursively, sorted) or of a samples.jsonl."""
    if source.is_dir():
        return sorted(p for p in source.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES)
    paths = []
    for line in source.read_text().splitlines():
        if line.strip():
            paths += [Path(p) for p in json.loads(line)["images"]]
    return paths


def shown_size(path: Path) -> tuple[int, int]:
    """(width, height) as shown: EXIF orientation 5-8 swaps them."""
    with Image.open(path) as im:
        w, h = im.size
        orientation = im.getexif().get(0x0112, 1)
    return (h, w) if orientation in (5, 6, 7, 8) else (w, h)


def tokens(size: tuple[int, int], setting: dict) -> int:
    """Vision tokens of one image under ``setting`` (patch, merge, min_pixels, max_pixels)."""
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    factor = setting["patch"] * setting["merge"]
    h, w = smart_resize(
        size[1],
        size[0],
        factor=factor,
        min_pixels=setting["min_pixels"],
        max_pixels=setting["max_pixels"],
    )
    return (h // factor) * (w // factor)


def settings(models: list[str], registry: Path, defaults: bool) -> list[dict]:
    """One setting per registry model (its limits, else its family's defaults) and, with
    ``defaults``, one per family of those models with the processor's own limits."""
    entries = yaml.safe_load(registry.read_text())["models"]
    out, families = [], []
    for model in models:
        if model not in entries:
            raise SystemExit(f"--models: {model!r} is not in {registry}")
        entry = entries[model]
        family = entry.get("family")
        if family not in FAMILIES:
            raise SystemExit(f"{model}: family {family!r} has no known processor ({FAMILIES})")
        patch, merge, lo, hi = FAMILIES[family]
        opts = entry.get("options") or {}
        out.append(
            {
                "name": model,
                "patch": patch,
                "merge": merge,
                "min_pixels": int(opts.get("min_pixels") or lo),
                "max_pixels": int(opts.get("max_pixels") or hi),
            }
        )
        if family not in families:
            families.append(family)
    for family in families if defaults else []:
        patch, merge, lo, hi = FAMILIES[family]
        out.append(
            {
                "name": f"{family} processor defaults",
                "patch": patch,
                "merge": merge,
                "min_pixels": lo,
                "max_pixels": hi,
            }
        )
    return out


def summary(counts: list[int], over: list[int]) -> dict:
    a = np.asarray(counts)
    row = {
        "images": len(a),
        "median": float(np.median(a)),
        "p99": float(np.percentile(a, 99)),
        "max": int(a.max()),
        "total": int(a.sum()),
    }
    row.update({f"over {t}": int((a > t).sum()) for t in over})
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="+", type=Path, help="image folders or samples.jsonl files")
    ap.add_argument("--models", nargs="+", default=["qwen2.5-vl-7b", "qwen3-vl-8b-instruct"])
    ap.add_argument("--registry", type=Path, default=REPO / "config" / "models.yaml")
    ap.add_argument("--defaults", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--over", nargs="+", type=int, default=[1280, 4096])
    ap.add_argument("--max-pixels", type=int, help="apply the samples stage's downscale first")
    args = ap.parse_args()
    chosen = settings(args.models, args.registry, args.defaults)
    header = None
    for source in args.sources:
        sizes = [shown_size(p) for p in image_files(source)]
        if args.max_pixels:
            sizes = [fit_within(s, args.max_pixels) for s in sizes]
        for setting in chosen:
            row = {"source": str(source), "setting": setting["name"],
                   **summary([tokens(s, setting) for s in sizes], args.over)}  # fmt: skip
            if header is None:
                header = list(row)
                print("| " + " | ".join(header) + " |")
                print("|" + "---|" * len(header))
            print("| " + " | ".join(f"{row[k]:g}" if isinstance(row[k], float) else
                                    str(row[k]) for k in header) + " |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
