"""Bytes and encode time of the variant image formats, on real MATH-V images.

    .venv/bin/python benchmarks/bench_storage.py --data DATA [--images 30]
        [--severities 3 5] [--encoders png webp webp:1:20 webp:4:75 png:9]
        [--methods none blank ...] [--cpu 0] [--csv out.csv]

A seeded sample of ``--images`` MATH-V test images (``mathvision/images/*.jpg``, drawn
with ``random.Random(0)`` from the sorted file names), each corrupted by every method at
every ``--severities`` (``blank`` once; ``none``: the image itself, as a perturbation
that keeps the pixels, a mask or a resize, would store it) exactly as the variants stage does
(:func:`vlmrobust.perturb.corrupt_image` on the image as shown, EXIF orientation
applied), then encoded by every encoder:

- ``png`` / ``webp``: the stage's own encoders (:func:`vlmrobust.perturb.storage.encode_image`
  for ``variants.format`` png and webp; webp falls back to PNG where it cannot hold the
  image exactly);
- ``png:L``: Pillow PNG at ``compress_level`` L (the stage's ``png`` is level 6);
- ``webp:M:Q``: Pillow lossless WebP, ``method`` M (0-6), ``quality`` Q (0-100; for
  lossless WebP the effort, not a loss), ``exact=True``.

Every encoding is decoded again and compared with the corrupted image (the pixels and the
mode): an encoder that is not lossless fails the run. Printed per method: the megapixels
encoded, the PNG bytes, each encoder's bytes as a share of PNG, its encode time per
megapixel, and the decode time of each; then the totals and the cost of the corruptions
themselves. ``--csv`` writes one row per (image, method, severity, encoder) as it is
measured (bytes, seconds; a run stopped half-way keeps what it measured), the input of
``benchmarks/forecast_disk.py``.

"One core": the thread pools of OpenMP/BLAS/numba are limited to one thread through the
environment before NumPy, OpenCV and numba are imported, OpenCV's own pool through
``cv2.setNumThreads(1)``, and the process is pinned to one CPU (``--cpu``, Linux only).
"""

from __future__ import annotations

import os

for _var in (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import csv  # noqa: E402
import io  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402
from PIL import Image  # noqa: E402

from vlmrobust.perturb.corruption import CORRUPTION_METHODS, corrupt_image  # noqa: E402
from vlmrobust.perturb.storage import encode_image  # noqa: E402
from vlmrobust.perturb.variants import open_shown  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from bench_real import add_data_arg  # noqa: E402

Encoder = Callable[[Image.Image], bytes]
DEFAULT_ENCODERS = ["png", "webp:1:20", "webp:2:25", "webp:4:75"]


def encoder(name: str) -> Encoder:
    """The encoder a ``--encoders`` entry names (see the module docstring)."""
    kind, *opts = name.split(":")
    if kind in ("png", "webp") and not opts:
        return lambda im: encode_image(im, kind)[0]
    if kind == "png" and len(opts) == 1:
        return lambda im: _save(im, format="PNG", compress_level=int(opts[0]))
    if kind == "webp" and len(opts) == 2:
        method, quality = int(opts[0]), int(opts[1])
        return lambda im: _save(
            im, format="WEBP", lossless=True, method=method, quality=quality, exact=True
        )
    raise SystemExit(f"unknown encoder {name!r} (png, webp, png:L, webp:M:Q)")


def _save(image: Image.Image, **kwargs) -> bytes:
    buf = io.BytesIO()
    image.save(buf, **kwargs)
    return buf.getvalue()


def sample_images(data: Path, n: int) -> list[Path]:
    files = sorted((data / "mathvision" / "images").glob("*.jpg"), key=lambda p: int(p.stem))
    if not files:
        raise SystemExit(f"no MATH-V images under {data / 'mathvision' / 'images'}")
    return sorted(random.Random(0).sample(files, min(n, len(files))), key=lambda p: int(p.stem))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_data_arg(p)
    p.add_argument("--images", type=int, default=30, help="MATH-V images in the sample")
    p.add_argument("--severities", type=int, nargs="+", default=[3, 5])
    p.add_argument(
        "--methods",
        nargs="+",
        default=["none", *CORRUPTION_METHODS],
        choices=["none", *CORRUPTION_METHODS],
        metavar="METHOD",
        help="corruptions to measure; none = the clean image itself (default: none and all 20)",
    )
    p.add_argument("--encoders", nargs="+", default=DEFAULT_ENCODERS, metavar="ENCODER")
    p.add_argument("--cpu", type=int, default=0, help="CPU to pin to (-1: do not pin)")
    p.add_argument(
        "--csv", default=None, help="also write one row per image x method x severity x encoder"
    )
    p.add_argument("--resume", action="store_true", help="keep the images --csv already holds")
    return p.parse_args(argv)


FIELDS = ["image", "megapixels", "method", "severity", "encoder", "bytes", "encode_s",
          "decode_s", "corrupt_s"]  # fmt: skip


def measure(args: argparse.Namespace, paths: list[Path], sink: Callable[[dict], None]) -> None:
    """One row per (image, method, severity, encoder) to ``sink``, as it is measured."""
    encoders = {name: encoder(name) for name in args.encoders}
    for i, path in enumerate(paths):
        image = open_shown(str(path), path.name)
        mp = image.width * image.height / 1e6
        for method in args.methods:
            for sev in [None] if method in ("none", "blank") else args.severities:
                t0 = time.perf_counter()
                out = image if method == "none" else corrupt_image(image, method, sev, 1000 + i)
                corrupt_s = time.perf_counter() - t0
                for name, enc in encoders.items():
                    t0 = time.perf_counter()
                    data = enc(out)
                    t_enc = time.perf_counter() - t0
                    t_dec = _check_lossless(data, out, f"{name} {method} s{sev} {path.name}")
                    sink({"image": path.name, "megapixels": mp, "method": method,
                          "severity": sev, "encoder": name, "bytes": len(data),
                          "encode_s": t_enc, "decode_s": t_dec, "corrupt_s": corrupt_s})  # fmt: skip
        print(f"  {i + 1}/{len(paths)} {path.name} {image.width}x{image.height}", flush=True)


def _check_lossless(data: bytes, image: Image.Image, what: str) -> float:
    """Decode ``data``; fail unless it is ``image`` exactly. Returns the decode seconds."""
    t0 = time.perf_counter()
    with Image.open(io.BytesIO(data)) as back:
        back.load()
        seconds = time.perf_counter() - t0
        if back.mode != image.mode or back.tobytes() != image.tobytes():
            raise SystemExit(f"{what}: not lossless ({image.mode} -> {back.mode})")
    return seconds


def report(rows: list[dict], encoders: list[str]) -> None:
    """Per method (severities pooled) and in all: MP, PNG MB, corruption s/MP, and each
    encoder's bytes as a share of the first encoder's and its encode ms/MP."""
    by = _per_method(rows)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    first = encoders[0]
    head = f"{'method':<18} {'MP':>6} {first[:8] + ' MB':>11} {'corr s/MP':>9}"
    print(
        head + "".join(f" {e[:11]:>11}" for e in encoders) + f"   (bytes vs {first} | encode ms/MP)"
    )
    for m in [*methods, "all"]:
        base = by[(m, first)]
        line = f"{m:<18} {base['megapixels']:>6.1f} {base['bytes'] / 1e6:>11.2f} "
        line += f"{base['corrupt_s'] / base['megapixels']:>9.2f}"
        for e in encoders:
            r = by[(m, e)]
            line += f" {r['bytes'] / base['bytes']:>4.0%}|{1000 * r['encode_s'] / r['megapixels']:>5.0f}"
        print(line)
    print("decode ms/MP: " + ", ".join(
        f"{e} {1000 * by[('all', e)]['decode_s'] / by[('all', e)]['megapixels']:.0f}"
        for e in encoders
    ))  # fmt: skip


def _per_method(rows: list[dict]) -> dict[tuple[str, str], dict]:
    """(method or ``all``, encoder) -> the rows' bytes, megapixels and seconds summed."""
    out: dict[tuple[str, str], dict] = {}
    keys = ("bytes", "megapixels", "encode_s", "decode_s", "corrupt_s")
    for r in rows:
        for m in (r["method"], "all"):
            t = out.setdefault((m, r["encoder"]), dict.fromkeys(keys, 0.0))
            for k in keys:
                t[k] += float(r[k])
    return out


def resumed(args: argparse.Namespace, paths: list[Path]) -> list[dict]:
    """The rows of the images ``--csv`` holds completely (an image cut off half-way is
    measured again). A file measured with other methods, severities or encoders is an
    error, left as it is."""
    if not args.csv or not Path(args.csv).exists():
        return []
    with open(args.csv, newline="") as fh:
        old = list(csv.DictReader(fh))
    want = {(m, "" if m in ("none", "blank") else str(s), e) for m in args.methods
            for s in args.severities for e in args.encoders}  # fmt: skip
    other = {(r["method"], r["severity"], r["encoder"]) for r in old} - want
    if other:
        raise SystemExit(f"{args.csv} holds other measurements ({sorted(other)[:3]} ...); "
                         "give its methods, severities and encoders, or another --csv")  # fmt: skip
    keys: dict[str, set] = {}
    for r in old:
        keys.setdefault(r["image"], set()).add((r["method"], r["severity"], r["encoder"]))
    names = {p.name for p in paths}
    full = {n for n, k in keys.items() if k == want and n in names}
    print(f"# resuming: {len(full)} image(s) already measured in {args.csv}")
    return [r for r in old if r["image"] in full]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cv2.setNumThreads(1)
    if args.cpu >= 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    paths = sample_images(args.data, args.images)
    mps = [w * h / 1e6 for w, h in (Image.open(p).size for p in paths)]
    print(
        f"# {platform.python_version()}, Pillow {Image.__version__}, {platform.machine()}; "
        f"{len(paths)} MATH-V images, median {statistics.median(mps):.2f} MP, "
        f"mean {statistics.fmean(mps):.2f} MP, largest {max(mps):.2f} MP; "
        f"severities {args.severities}"
    )
    corrupt_image(Image.new("RGB", (64, 64)), "glass_blur", 1, 0)  # numba compiles once
    rows = resumed(args, paths) if args.resume else []
    done = {r["image"] for r in rows}
    fh = open(args.csv, "w", newline="") if args.csv else None  # noqa: SIM115
    writer = csv.DictWriter(fh, fieldnames=FIELDS) if fh else None
    if writer:
        writer.writeheader()
        writer.writerows(rows)

    def sink(row: dict) -> None:
        rows.append(row)
        if writer:
            writer.writerow(row)
            fh.flush()

    t0 = time.perf_counter()
    try:
        measure(args, [p for p in paths if p.name not in done], sink)
    finally:
        if fh:
            fh.close()
    print(f"# measured in {time.perf_counter() - t0:.0f} s")
    report(rows, args.encoders)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
