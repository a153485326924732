"""Speed of the CRM pieces: random-box placement, filling, and the chain comparison.

    .venv/bin/python benchmarks/bench_masking.py [--pairs 200] [--repeats 5]

- ``place_random_box`` on square images of 512, 1024 and 2048 px with five annotated
  boxes (a tenth of the side each), median over ``--repeats`` seeds;
- ``fill_box`` (black, mean, blur) on a 1024 px image;
- the comparison of ``--pairs`` (original, masked) chains of eight steps each with the
  real all-MiniLM-L6-v2 on the CPU (split, embed, align, answer similarity), i.e. the
  cost of one ``compare_masking`` job without its file reading.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import numpy as np
from PIL import Image

from vlmrobust.clients.embedding import Embedder
from vlmrobust.judges.crm.steps import answer_flip, compare_chains, split_steps
from vlmrobust.perturb.masking import fill_box, place_random_box


def _time(fn, repeats: int) -> float:
    times = []
    for i in range(repeats):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_geometry(repeats: int) -> None:
    for side in (512, 1024, 2048):
        b = side // 10
        boxes = [(k * 2 * b, k * b, k * 2 * b + b, k * b + b) for k in range(5)]
        t = _time(
            lambda i, s=side, bx=boxes: place_random_box(
                bx[0], bx, (s, s), 0.05, np.random.default_rng(i)
            ),
            repeats,
        )
        print(f"place_random_box {side}x{side}, 5 boxes: {t * 1000:.1f} ms")
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (1024, 1024, 3), np.uint8))
    for fill in ("black", "mean", "blur"):
        t = _time(lambda i, f=fill: fill_box(image, (100, 100, 400, 300), f, 0.25), repeats)
        print(f"fill_box {fill:5s} 300x200 box in 1024x1024: {t * 1000:.1f} ms")


def _chain(rng: np.random.Generator, words: list[str], n: int) -> str:
    steps = [" ".join(rng.choice(words, 12)) + "." for _ in range(n)]
    return "\n".join(f"{k}. {s}" for k, s in enumerate(steps, 1))


def bench_compare(pairs: int) -> None:
    words = [
        "the",
        "boy",
        "panda",
        "laptop",
        "forest",
        "sofa",
        "smoke",
        "factory",
        "chimney",
        "tree",
        "leaves",
        "bottle",
        "fish",
        "sea",
        "plastic",
        "phone",
        "screen",
        "bird",
        "car",
        "exhaust",
        "bicycle",
        "smog",
        "sun",
        "solar",
        "panel",
        "wind",
    ]
    rng = np.random.default_rng(0)
    chains = [(_chain(rng, words, 8), _chain(rng, words, 8)) for _ in range(pairs)]
    embedder = Embedder()
    t0 = time.perf_counter()
    embedder.encode(["warm-up"])
    load = time.perf_counter() - t0
    t0 = time.perf_counter()
    split = [(split_steps(o), split_steps(m), o[:30], m[:30]) for o, m in chains]
    # as the stage does: every distinct text embedded once, in batches, first
    embedder.encode(sorted({t for row in split for part in row for t in (
        part if isinstance(part, list) else [part])}))  # fmt: skip
    for original, masked, a, b in split:
        compare_chains(original, masked, embedder)
        answer_flip(a, b, embedder)
    t = time.perf_counter() - t0
    print(f"embedding model load: {load:.2f} s")
    print(f"compare {pairs} chain pairs (8 steps each): {t:.2f} s = {pairs / t:.0f} pairs/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}")
    bench_geometry(args.repeats)
    bench_compare(args.pairs)


if __name__ == "__main__":
    main()
