"""Throughput of the 20 vision corruptions on one core.

    .venv/bin/python benchmarks/bench_corruptions.py --size 1024 --repeats 3 [--csv out.csv]

For every method (severity 3, ``blank`` without) on a random ``size``×``size`` RGB image:
the time of :func:`vlmrobust.perturb.corrupt_image` (the library call plus the mode
handling, not PNG encoding) and images per second. One untimed warm-up call per method
comes first (numba compiles ``glass_blur`` on its first call, ~2 s).

"One core": the thread pools of OpenMP/BLAS/numba are limited to one thread through the
environment *before* NumPy, OpenCV and numba are imported, OpenCV's own pool through
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
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import cv2  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from vlmrobust.perturb.corruption import CORRUPTION_METHODS, corrupt_image  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=1024, help="side of the square RGB image")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per method")
    p.add_argument("--severity", type=int, default=3, help="severity (blank has none)")
    p.add_argument(
        "--methods",
        nargs="+",
        default=list(CORRUPTION_METHODS),
        choices=CORRUPTION_METHODS,
        metavar="METHOD",
        help="methods to time (default: all 20)",
    )
    p.add_argument("--cpu", type=int, default=0, help="CPU to pin to (-1: do not pin)")
    p.add_argument("--csv", default=None, help="also write the table as CSV here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cv2.setNumThreads(1)
    if args.cpu >= 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    image = Image.fromarray(
        np.random.default_rng(0).integers(0, 256, (args.size, args.size, 3), dtype=np.uint8)
    )
    rows = []
    for method in args.methods:
        severity = None if method == "blank" else args.severity
        corrupt_image(image, method, severity, 0)  # warm-up (numba compilation, caches)
        times = []
        for r in range(args.repeats):
            t0 = time.perf_counter()
            corrupt_image(image, method, severity, r + 1)
            times.append(time.perf_counter() - t0)
        mean = statistics.fmean(times)
        rows.append(
            {
                "method": method,
                "severity": "" if severity is None else severity,
                "mean_s": mean,
                "min_s": min(times),
                "images_per_s": 1.0 / mean,
            }
        )
        print(f"{method:>18}: {mean:.3f} s", file=sys.stderr, flush=True)

    print(
        f"\n{args.size}x{args.size} RGB, severity {args.severity}, {args.repeats} repeats, "
        f"1 core ({platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()})\n"
    )
    print("| method | severity | mean s/img | min s/img | img/s |")
    print("|---|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['method']} | {row['severity']} | {row['mean_s']:.3f} | "
            f"{row['min_s']:.3f} | {row['images_per_s']:.2f} |"
        )
    total = sum(row["mean_s"] for row in rows)
    print(f"\nmean over methods: {total / len(rows):.3f} s/img ({len(rows) / total:.2f} img/s)")
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
