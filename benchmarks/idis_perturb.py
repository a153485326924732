"""Throughput of the offline Idis image perturbations on one process.

    .venv/bin/python benchmarks/idis_perturb.py [--samples 24] [--cpu 0]   (--samples >= 20)

Synthetic inputs in a temporary folder: ImageNet-like photos (500x375, smooth colour
fields plus noise) with a target mask in the upper left (a centred target of a third
of the image leaves no room for a 15 % object: every ``size large`` variant would be
excluded), RGBA object cut-outs
(about 400x300) for every object of ``resources/idis/objects.yaml``, math diagrams
(600x420 line drawings, four concept families), LogicVista-like table images and
handwritten-expression images. For each perturbation at a 1024x1024 canvas
(``objects`` composite k=4, ``typographic`` k=4, ``diagram`` k=4, ``handwritten`` k=4,
``size`` large, ``resize`` to 1024) the script plans ``--samples`` samples (prepare,
setup, plan; the plan reads the target masks and cut-out sizes) and then times
``apply`` on one variant per sample: decoding the source image, rendering, the mask and
the placement record, not the PNG encoding the stage adds (timed separately as
``+png``: ``PIL.Image.save(format="PNG")`` of the result and its mask). One untimed
warm-up call per perturbation comes first. The process is pinned to one CPU with
``--cpu`` (Linux only).
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from vlmrobust.core.records import Sample, read_samples, write_samples
from vlmrobust.perturb import PERTURBATIONS
from vlmrobust.perturb.idis import load_objects, object_slug
from vlmrobust.perturb.variants import VariantPlan, prepared_spec

FAMILIES = ("triangle", "quadrilateral", "circle", "3d")


def _photo(rng: np.random.Generator, w: int, h: int) -> Image.Image:
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([(x * 0.4 + rng.integers(255)) % 256, (y * 0.5 + rng.integers(255)) % 256,
                     ((x + y) * 0.3) % 256], axis=2)  # fmt: skip
    noise = rng.normal(0, 12, base.shape)
    return Image.fromarray(np.clip(base + noise, 0, 255).astype(np.uint8))


def _make_assets(root: Path, n: int) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    objects = load_objects()
    seg = root / "segments"
    for i, name in enumerate([o for v in objects.classes.values() for o in v] + objects.irrelevant):
        d = seg / object_slug(name)
        d.mkdir(parents=True)
        for j in range(2):
            im = Image.new("RGBA", (400 + 20 * j, 300), (0, 0, 0, 0))
            ImageDraw.Draw(im).ellipse([10, 10, 390 + 20 * j, 290],
                                       fill=(40 + 5 * i, 200 - 4 * i, 90 + 60 * j, 255))  # fmt: skip
            im.save(d / f"{j}.png")
    labels = list(objects.classes)
    photos = []
    for i in range(n):
        img, mask = root / f"p{i}.jpg", root / f"p{i}_fg.png"
        _photo(rng, 500, 375).save(img, quality=90)
        m = Image.new("RGB", (500, 375))
        ImageDraw.Draw(m).ellipse([30, 30, 190, 155], fill=(120, 100, 80))
        m.save(mask)
        label = labels[i % len(labels)]
        photos.append(Sample(f"p{i}", "in9", [str(img)], "Q", label, "label",
                             meta={"label": label, "target_masks": [str(mask)]}))  # fmt: skip
    write_samples(root / "photos.jsonl", photos)
    diagrams = []
    for i in range(n):
        img = root / f"m{i}.png"
        im = Image.new("RGB", (600, 420), "white")
        d = ImageDraw.Draw(im)
        d.polygon([(50, 380), (550, 380), (rng.integers(100, 500), 40)], outline="black", width=3)
        d.text((60, 20), f"Figure {i}", fill="black")
        im.save(img)
        diagrams.append(Sample(f"m{i}", "mathverse", [str(img)], "Q", "1", "number",
                               meta={"concept_family": FAMILIES[i % 4],
                                     "problem_index": i}))  # fmt: skip
    write_samples(root / "math.jsonl", diagrams)
    tables = []
    for i in range(8):
        img = root / f"t{i}.png"
        im = Image.new("RGB", (500, 260), "white")
        d = ImageDraw.Draw(im)
        for r in range(6):
            d.line([(0, r * 50), (500, r * 50)], fill="black")
        im.save(img)
        tables.append(Sample(f"t{i}", "logicvista", [str(img)], "Q", "A", "letter",
                             meta={"specific_capability": ["table"]}))  # fmt: skip
    write_samples(root / "logicvista.jsonl", tables)
    hw = root / "handwritten"
    hw.mkdir()
    for i in range(12):
        im = Image.new("RGB", (360, 110), (250, 250, 250))
        ImageDraw.Draw(im).line([(10, 60), (120, 20), (240, 90), (350, 30)], fill="black", width=4)
        im.save(hw / f"e{i}.png")
    return {"segments": seg, "photos": root / "photos.jsonl", "math": root / "math.jsonl",
            "logicvista": root / "logicvista.jsonl", "handwritten": hw}  # fmt: skip


def _cases(a: dict[str, Path]) -> list[tuple[str, dict, str, str]]:
    """(label, condition spec, samples, variant id suffix to time)."""
    seg = str(a["segments"])
    return [
        ("objects composite k=4", {"perturbation": "objects", "segments": seg,
                                   "semantics": ["conflicting"], "counts": [4]},
         "photos", "__conflicting-n4"),
        ("typographic k=4", {"perturbation": "typographic", "counts": [4], "classes": 1},
         "photos", "-n4"),
        ("diagram k=4", {"perturbation": "diagram", "counts": [4], "semantics": ["aligned"],
                         "irrelevant_samples": str(a["logicvista"])}, "math", "__aligned-n4"),
        ("handwritten k=4", {"perturbation": "handwritten", "path": str(a["handwritten"]),
                             "counts": [4]}, "math", "__handwritten-n4"),
        ("size large", {"perturbation": "size", "segments": seg, "sizes": {"large": 0.15}},
         "photos", "__size-large"),
        ("resize 1024", {"perturbation": "resize", "resolutions": [1024]}, "photos", "__res1024"),
    ]  # fmt: skip


def _png(image: Image.Image) -> None:
    image.save(io.BytesIO(), format="PNG")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=24, help="samples (= timed images) per case")
    ap.add_argument("--cpu", type=int, default=None, help="pin the process to this CPU")
    args = ap.parse_args()
    if args.samples < 5 * len(FAMILIES):  # each diagram needs 4 others of its family
        ap.error(f"--samples must be at least {5 * len(FAMILIES)} (diagram aligned k=4)")
    if args.cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"{args.samples} images per case, canvas 1024")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        assets = _make_assets(Path(tmp), args.samples)
        header = f"{'perturbation':24s} {'plan/s':>8s} {'apply ms':>9s} {'img/s':>7s} {'+png img/s':>11s}"
        print(header)
        print("-" * len(header))
        for label, spec, which, suffix in _cases(assets):
            pert = PERTURBATIONS[spec["perturbation"]]
            samples = read_samples(assets[which])
            t0 = time.perf_counter()
            prepared = prepared_spec("bench", spec)
            if pert.setup is not None:
                prepared = pert.setup(samples, "bench", prepared)
            jobs: list[tuple[Sample, VariantPlan]] = []
            n_plans = 0
            for s in samples:
                plans = pert.plan(s, "bench", prepared, 0)
                n_plans += len(plans)
                chosen = [p for p in plans if isinstance(p, VariantPlan)
                          and p.variant_id.endswith(suffix)]  # fmt: skip
                if chosen:
                    jobs.append((s, chosen[0]))
            plan_rate = n_plans / (time.perf_counter() - t0)
            assert jobs, f"{label}: no variant planned"

            def run(job, png=False, prepared=prepared, pert=pert):
                sample, plan = job
                with Image.open(sample.images[0]) as im:
                    im.load()
                    image = im.copy()
                res = pert.apply(image, {**prepared, **plan.params}, plan.seed)
                if png:
                    _png(res[0])
                    if res[1] is not None:
                        _png(res[1])

            run(jobs[0])  # warm-up: fonts, cut-out cache
            times = []
            for job in jobs:
                t0 = time.perf_counter()
                run(job)
                times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for job in jobs:
                run(job, png=True)
            with_png = len(jobs) / (time.perf_counter() - t0)
            median = statistics.median(times)
            print(f"{label:24s} {plan_rate:8.1f} {median * 1000:9.1f} {len(jobs) / sum(times):7.1f} "
                  f"{with_png:11.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
