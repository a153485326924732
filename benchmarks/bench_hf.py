"""Throughput of the hf backend on the embedded demo model (CPU, float32).

    .venv/bin/python benchmarks/bench_hf.py [--requests 32] [--new-tokens 32]
        [--batch-sizes 1 8 32] [--image 224] [--repeats 2] [--csv out.csv]

Builds the demo model (seed 0) in a temporary directory, then times
:meth:`HFBackend.generate` on ``--requests`` requests (one random ``--image``-pixel
square image and a question each; questions of different lengths, so batches are
left-padded) at each batch size. ``min_new_tokens`` is forced to ``--new-tokens``
(``options.generation``), so every request generates exactly that many tokens and the
batch sizes do equal work. One untimed warm-up pass per batch size comes first; the
table shows the best of ``--repeats`` timed passes: wall time, generated tokens per
second, and requests per second.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

QUESTIONS = [
    "What is shown in the image?",
    "How many objects are in the picture? Answer with a number.",
    "Is the sky blue? Please answer yes or no.",
    "Which option is correct: A, B, C, D or E? Think about the triangle and its area.",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--image", type=int, default=224, help="side of the square input image")
    p.add_argument("--repeats", type=int, default=2, help="timed passes per batch size")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--csv", default=None, help="also write the table as CSV here")
    return p.parse_args(argv)


def make_requests(root: Path, args: argparse.Namespace) -> list:
    """``args.requests`` requests on one random square image written under ``root``."""
    from vlmrobust.clients.vlm.base import Request

    rng = np.random.default_rng(0)
    image = root / "image.png"
    pixels = rng.integers(0, 256, (args.image, args.image, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(image)
    return [
        Request(
            key=f"r{i}",
            content=[
                {"type": "image", "path": str(image)},
                {"type": "text", "text": QUESTIONS[i % len(QUESTIONS)]},
            ],
            max_new_tokens=args.new_tokens,
        )
        for i in range(args.requests)
    ]


def time_batch_size(backend, requests: list, batch_size: int, repeats: int) -> dict | None:
    """The best of ``repeats`` timed passes at one batch size (after a warm-up), as a
    table row; None (and the error printed) when a request failed."""
    backend.default_batch_size = batch_size
    list(backend.generate(requests))  # warm-up
    best = float("inf")
    tokens = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        results = list(backend.generate(requests))
        best = min(best, time.perf_counter() - t0)
        errors = [r for r in results if r.finish_reason == "error"]
        if errors:
            print(f"error: {errors[0].error}", file=sys.stderr)
            return None
        tokens = sum(r.completion_tokens for r in results)
    return {
        "batch_size": batch_size,
        "requests": len(requests),
        "new_tokens": tokens,
        "wall_s": round(best, 3),
        "tokens_per_s": round(tokens / best, 1),
        "requests_per_s": round(len(requests) / best, 2),
    }


def report(rows: list[dict], args: argparse.Namespace) -> None:
    """Print the table (and the speed-up over the first batch size); write the CSV."""
    import torch
    import transformers

    print(
        f"hf backend, demo model (random Qwen2-VL, 2 layers, hidden 64), CPU float32; "
        f"python {platform.python_version()}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}, {torch.get_num_threads()} threads, "
        f"{os.cpu_count()} CPUs; {args.image}px image, {args.new_tokens} new tokens each"
    )
    head = list(rows[0])
    print(" | ".join(f"{h:>14}" for h in head))
    for row in rows:
        print(" | ".join(f"{row[h]!s:>14}" for h in head))
    base = rows[0]["tokens_per_s"]
    for row in rows[1:]:
        print(
            f"batch {row['batch_size']}: {row['tokens_per_s'] / base:.1f}x batch {rows[0]['batch_size']}"
        )
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=head)
            writer.writeheader()
            writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from vlmrobust.clients.vlm.hf import HFBackend
    from vlmrobust_demo.model import build_demo_model

    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_hf.") as tmp:
        root = Path(tmp)
        build_demo_model(root / "model", 0)
        requests = make_requests(root, args)
        spec = {
            "local_path": str(root / "model"),
            "options": {
                "batch_size": 8,
                "min_pixels": 3136,
                "max_pixels": 50176,
                "generation": {"min_new_tokens": args.new_tokens},
            },
        }
        backend = HFBackend("demo", spec)
        for bs in args.batch_sizes:
            row = time_batch_size(backend, requests, bs, args.repeats)
            if row is None:
                return 1
            rows.append(row)
        backend.close()
    report(rows, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
