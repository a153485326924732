"""Time of the embedded demo data generator.

    .venv/bin/python benchmarks/bench_demo.py [--n 20] [--image-size 384] [--repeats 3]

Runs :func:`vlmrobust_demo.data.generate_demo` (all seven families, default arguments
unless given) into a fresh temporary folder ``--repeats`` times and prints the best
wall time in seconds, then the best time per family (each family generated alone).
The generator is single-threaded (PIL drawing, PNG encoding), so this is one core.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import PIL

from vlmrobust_demo.data import DEMO_FAMILIES, generate_demo


def best_of(repeats: int, **kwargs) -> float:
    best = float("inf")
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            generate_demo(Path(tmp), **kwargs)
            best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20, help="samples per family (default 20)")
    ap.add_argument("--image-size", type=int, default=384)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    common = {"n_per_family": args.n, "seed": args.seed, "image_size": args.image_size}
    print(f"# python {platform.python_version()}, Pillow {PIL.__version__}, {platform.machine()}")
    total = best_of(args.repeats, **common)
    n_total = args.n * len(DEMO_FAMILIES)
    print(
        f"generate_demo: {n_total} samples ({args.n} x {len(DEMO_FAMILIES)} families, "
        f"{args.image_size} px): best of {args.repeats} = {total:.3f} s "
        f"({1000 * total / n_total:.1f} ms/sample)"
    )
    for fam in DEMO_FAMILIES:
        t = best_of(args.repeats, families=[fam], **common)
        print(f"  {fam:<9} {t:.3f} s  ({1000 * t / args.n:.1f} ms/sample)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
