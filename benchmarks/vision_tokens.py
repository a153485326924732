"""Vision tokens per image of a dataset under a model's pixel limits (Qwen-VL processors).

    python benchmarks/vision_tokens.py DATA/mathvision/images DATA/logicvista/data/images
    python benchmarks/vision_tokens.py results/samples/mathvision/samples.jsonl \
        --models qwen2.5-vl-7b qwen3-vl-8b-instruct --over 1280 4096

Each argument is a folder of images (read recursively) or a ``samples.jsonl`` (the
images its samples list). Only the image headers are read. For every image the
processor's own resize rule is applied (``vlmrobust.core.vision_tokens``: for the
Qwen-VL families transformers' ``smart_resize``, each side rounded to a multiple of
``patch x merge`` pixels, the area brought within ``[min_pixels, max_pixels]``; the
vision tokens are ``(height / (patch x merge)) x (width / (patch x merge))``). Printed per
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
from vlmrobust.core.vision_tokens import (  # noqa: E402
    PROCESSORS,
    Processor,
    image_tokens,
    processor_of,
)

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


def settings(models: list[str], registry: Path, defaults: bool) -> list[tuple[str, Processor]]:
    """One setting per registry model (its limits, else its family's defaults) and, with
    ``defaults``, one per family of those models with the processor's own limits."""
    entries = yaml.safe_load(registry.read_text())["models"]
    out, families = [], []
    for model in models:
        if model not in entries:
            raise SystemExit(f"--models: {model!r} is not in {registry}")
        family = entries[model].get("family")
        processor = processor_of(entries[model])
        if processor is None:
            raise SystemExit(f"{model}: family {family!r} has no known processor ({PROCESSORS})")
        out.append((model, processor))
        if family not in families:
            families.append(family)
    for family in families if defaults else []:
        out.append((f"{family} processor defaults", PROCESSORS[family]))
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
        for name, processor in chosen:
            row = {"source": str(source), "setting": name,
                   **summary([image_tokens(s, processor) for s in sizes], args.over)}  # fmt: skip
            if header is None:
                header = list(row)
                print("| " + " | ".join(header) + " |")
                print("|" + "---|" * len(header))
            print("| " + " | ".join(f"{row[k]:g}" if isinstance(row[k], float) else
                                    str(row[k]) for k in header) + " |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
