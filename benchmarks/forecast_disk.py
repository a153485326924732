"""Forecast of the disk the variants of a run configuration take, from measured bytes.

    .venv/bin/python benchmarks/forecast_disk.py --csv s3.csv s5.csv
        [--config config/paper.yaml] [--data DATA] [--encoders png webp]

Reads the per-image rows ``benchmarks/bench_storage.py --csv`` wrote (bytes per
corruption, severity and encoder on real MATH-V images; the pseudo-method ``none`` is
an image stored unchanged) and the configuration's datasets x conditions, and prints,
per (dataset, condition) that writes images, the images written, their megapixels and
the forecast bytes per encoder:

- ``none``, ``distraction``, ``idis-release``, ``textual``: nothing written (the
  variants name the samples' or the release's own files);
- ``corruption``: ``assignment: random`` one image per sample image, the method uniform
  over ``methods`` and the severity uniform over ``severities``, so the bytes per
  megapixel are the mean over methods of each method's mean over the measured
  severities (severities that were not measured count as the mean of those that were);
  ``all``: every method at every severity (``blank`` once);
- ``mask``: the image stored unchanged (``none``) plus its mask (one ``L`` PNG with
  one box, about :data:`MASK_BYTES` bytes);
- any other perturbation: not forecast (named in a note).

``--measure`` also builds the MATH-V datasets' variants for real, in both formats
(``variants.format`` png and webp), and prints their bytes beside the forecast.

Image sizes: the real distribution where the data is here (MATH-V testmini, the split
config/paper.yaml answers: the mean megapixels of its 304 images from ``--data``), else
:data:`ASSUMED`, a mean per dataset and images per sample (each entry says why). The
bytes per megapixel are MATH-V's (diagrams on white, mostly): a photograph compresses
less, so for photographic datasets the column ``raw`` (3 bytes per pixel, what PNG takes
on a noise-like image) is the upper bound.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

from PIL import Image

REPO = Path(__file__).resolve().parents[1]
MASK_BYTES = 2_000
#: dataset key -> (mean megapixels per image, images per sample, why); assumptions.
ASSUMED = {
    "chartqa": (0.45, 1.0, "ChartQA test charts, about 800 x 560 px"),
    "hallusionbench": (0.6, 1.0, "charts, tables, photos and illusions, mixed sizes"),
    "infovqa": (2.5, 1.0, "InfographicVQA: tall infographics, about 1,000 x 2,500 px"),
    "mmmu": (0.45, 1.15, "MMMU validation: mostly one figure, a few up to 7 images"),
    "mmstar": (0.3, 1.0, "MMStar: images of earlier benchmarks, about 550 x 550 px"),
    "textvqa": (0.75, 1.0, "TextVQA: Open Images photos, longer side up to 1,024 px"),
    "mathvista": (0.5, 1.0, "MathVista testmini: figures, charts and photos"),
    "distract-bench": (0.5, 1.0, "Distract-Bench: images of the benchmarks above"),
    "visargs": (0.8, 1.0, "VisArgs: advertisements and cartoons, about 900 x 900 px"),
}
NOTHING = {"none", "distraction", "idis-release", "textual"}


def rates(paths: list[Path], encoders: list[str]) -> dict[tuple[str, int | None, str], float]:
    """(method, severity, encoder) -> bytes per megapixel over the measured images."""
    acc: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for path in paths:
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                if row["encoder"] not in encoders:
                    continue
                sev = int(row["severity"]) if row["severity"] else None
                a = acc[(row["method"], sev, row["encoder"])]
                a[0] += float(row["bytes"])
                a[1] += float(row["megapixels"])
    return {k: b / mp for k, (b, mp) in acc.items()}


def method_rate(r: dict, method: str, severities: list[int], enc: str) -> float:
    """Bytes per megapixel of ``method`` averaged over ``severities`` (unmeasured ones:
    the mean of the measured)."""
    if method == "blank":
        return r[("blank", None, enc)]
    measured = {s: v for (m, s, e), v in r.items() if m == method and e == enc}
    if not measured:
        raise SystemExit(f"no measurement of {method} with {enc} in the CSV files")
    fill = statistics.fmean(measured.values())
    return statistics.fmean(measured.get(s, fill) for s in severities)


def per_mp(spec: dict, r: dict, enc: str) -> tuple[float, int] | None:
    """(bytes per source megapixel, images written per source image) of a condition."""
    kind = spec["perturbation"]
    if kind in NOTHING:
        return 0.0, 0
    if kind == "mask":
        return r[("none", None, enc)], 1
    if kind != "corruption":
        return None
    sevs = spec["severities"]
    each = [method_rate(r, m, sevs, enc) for m in spec["methods"]]
    if spec["assignment"] == "random":
        return statistics.fmean(each), 1
    n = sum(1 if m == "blank" else len(sevs) for m in spec["methods"])
    total = sum(
        v * (1 if m == "blank" else len(sevs)) for m, v in zip(spec["methods"], each, strict=True)
    )
    return total, n


def mathvision_mp(data: Path, split: str) -> float:
    """Mean megapixels of the images of a MATH-V split here."""
    text = (data / "mathvision" / "data" / f"{split}.jsonl").read_text()
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    sizes = [Image.open(data / "mathvision" / row["image"]).size for row in rows]
    return statistics.fmean(w * h / 1e6 for w, h in sizes)


def measure_mathvision(plan, data: Path) -> None:
    """The configuration's MATH-V datasets under their conditions that write images,
    built for real (``vlmrobust.perturb.build_variants``, one process) in a temporary
    folder in each ``variants.format``: the bytes on disk, beside the forecast."""
    import tempfile

    from vlmrobust.data.build import build_samples
    from vlmrobust.perturb import build_variants

    formats = ["png", "webp"]
    for name, ds in plan.datasets.items():
        if ds["adapter"] != "mathvision":
            continue
        with tempfile.TemporaryDirectory(prefix="vlmrobust-forecast-") as tmp:
            spec = {**ds, "source": "local", "path": str(data / "mathvision")}
            samples = Path(tmp) / "samples" / "samples.jsonl"
            build_samples(name, spec, samples, samples.with_name("report.json"))
            for cond in ds["conditions"]:
                cspec = plan.conditions[cond]
                if cspec["perturbation"] in NOTHING:
                    continue
                for fmt in formats:
                    out = Path(tmp) / cond / fmt / "manifest.jsonl"
                    t0 = time.perf_counter()
                    n = build_variants(samples, cond, cspec, 0, out, image_format=fmt)
                    size = sum(f.stat().st_size for f in out.parent.rglob("*") if f.is_file())
                    print(f"measured {name} {cond} {fmt}: {n} variants, {size / 1e6:.1f} MB "
                          f"in {time.perf_counter() - t0:.0f} s (one process)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--csv", type=Path, nargs="+", required=True)
    ap.add_argument("--config", type=Path, default=REPO / "config" / "paper.yaml")
    ap.add_argument(
        "--data",
        type=Path,
        default=None,
        help="the real-data folder (default: $VLMROBUST_REAL_DATA or data/real, docs/real-data.md)",
    )
    ap.add_argument("--encoders", nargs="+", default=["png", "webp"])
    ap.add_argument("--assignment", choices=["as-configured", "all"], default="as-configured")
    ap.add_argument("--measure", action="store_true", help="also build MATH-V's variants here")
    args = ap.parse_args(argv)
    import sys

    sys.path.insert(0, str(REPO / "workflow"))
    from vlmrobust.core.config import load_yaml
    from vlmrobust.core.paths import real_data
    from vlmrobust.plan import RunPlan

    args.data = args.data or real_data(REPO)

    plan = RunPlan.from_config(load_yaml(args.config))
    r = rates(args.csv, args.encoders)
    rows = forecast(plan, r, args)
    report(rows, args.encoders)
    if args.measure:
        measure_mathvision(plan, args.data)
    return 0


def forecast(plan, r: dict, args: argparse.Namespace) -> list[dict]:
    rows = []
    for name, ds in plan.datasets.items():
        if ds["adapter"] == "mathvision" and (args.data / "mathvision").is_dir():
            mp, per, why = mathvision_mp(args.data, ds["split"]), 1.0, f"real ({ds['split']})"
        elif name in ASSUMED:
            mp, per, why = ASSUMED[name]
        else:
            mp, per, why = None, 1.0, "no images written"
        n = ds.get("expected_size") or 0
        for cond in ds["conditions"]:
            spec = dict(plan.conditions[cond])
            if args.assignment == "all" and spec["perturbation"] == "corruption":
                spec["assignment"] = "all"
            got = {e: per_mp(spec, r, e) for e in args.encoders}
            if any(v is None for v in got.values()):
                rows.append({"dataset": name, "condition": cond, "note": "not forecast"})
                continue
            k = got[args.encoders[0]][1]
            if k == 0:
                continue
            images = n * per * k
            row = {"dataset": name, "condition": cond, "images": images, "mp": mp, "why": why}
            row.update({e: n * per * mp * got[e][0] for e in args.encoders})
            row["raw"] = images * mp * 3e6 + (
                images * MASK_BYTES if spec["perturbation"] == "mask" else 0
            )
            if spec["perturbation"] == "mask":
                for e in args.encoders:
                    row[e] += images * MASK_BYTES
            rows.append(row)
    return rows


def report(rows: list[dict], encoders: list[str]) -> None:
    cols = [*encoders, "raw"]
    print(f"{'dataset':<16} {'condition':<14} {'images':>9} {'MP/img':>6} "
          + " ".join(f"{c + ' GB':>9}" for c in cols) + "  image sizes")  # fmt: skip
    totals = dict.fromkeys(cols, 0.0)
    for row in rows:
        if "note" in row:
            print(f"{row['dataset']:<16} {row['condition']:<14} {row['note']}")
            continue
        for c in cols:
            totals[c] += row[c]
        print(f"{row['dataset']:<16} {row['condition']:<14} {row['images']:>9,.0f} "
              f"{row['mp']:>6.2f} " + " ".join(f"{row[c] / 1e9:>9.2f}" for c in cols)
              + f"  {row['why']}")  # fmt: skip
    print(f"{'total':<16} {'':<14} {'':>9} {'':>6} "
          + " ".join(f"{totals[c] / 1e9:>9.2f}" for c in cols))  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
