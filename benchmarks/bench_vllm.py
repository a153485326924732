"""Throughput of hf (batched) vs vLLM offline vs vLLM served, on one demo checkpoint.

    .venv/bin/python benchmarks/bench_vllm.py [--requests 64] [--new-tokens 32]
        [--batch-sizes 1 8 32] [--model-dir results/models/demo-vllm] [--csv out.csv]

Needs the vLLM environment (``bash envs/vllm-env.sh``; ``--vllm-env`` elsewhere). The
checkpoint is a demo Qwen2-VL with attention heads of 32 (``demo_sizes: {head_dim:
32}``, the smallest vLLM's CPU attention accepts): random weights from seed 0 in a
temporary folder, or ``--model-dir`` (e.g. the trained ``results/models/demo-vllm``).
All three engines run it in float32 on the CPU with the same requests: ``--requests``
prompts of one random 224-px image and a question each (four lengths), every one
generating exactly ``--new-tokens`` tokens (a minimum forced by each engine's own
setting), so the batch sizes and engines do equal work.

- ``hf``: :class:`HFBackend` in this process, ``batch_size`` requests per
  ``generate`` (left padding).
- ``vllm``: :class:`VLLMBackend` in the vLLM environment (one engine for every batch
  size), ``batch_size`` requests per ``LLM.generate`` call.
- ``served``: ``vlmrobust vllm-serve``'s command (the same engine settings) on
  127.0.0.1, answered by :class:`OpenAIBackend` with ``concurrency`` = batch size
  requests in flight (the server batches them itself).

One untimed warm-up pass per (engine, batch size) comes first; the table shows the best
of ``--repeats`` passes: requests/s and generated tokens/s, plus each engine's start-up.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "workflow"))

QUESTIONS = [
    "What is shown in the image?",
    "How many objects are in the picture? Answer with a number.",
    "Is the sky blue? Please answer yes or no.",
    "Which option is correct: A, B, C, D or E? Think about the triangle and its area.",
]
ENGINE = {"dtype": "float32", "max_model_len": 2048, "enforce_eager": True}
PIXELS = {"min_pixels": 3136, "max_pixels": 50176}
KV_CACHE = {"kv_cache_memory_bytes": 1 << 30}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--model-dir", default=None, help="a head-size-32 demo checkpoint")
    p.add_argument("--vllm-env", default=str(REPO / ".venv-vllm"))
    p.add_argument("--engines", nargs="+", default=["hf", "vllm", "served"])
    p.add_argument("--csv", default=None)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)  # internal
    p.add_argument("--work", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def make_requests(work: Path, n: int, new_tokens: int):
    import numpy as np
    from PIL import Image

    from vlmrobust.clients.vlm.base import Request

    rng = np.random.default_rng(0)
    reqs = []
    for i in range(n):
        path = work / f"img{i}.png"
        if not path.exists():
            Image.fromarray(rng.integers(0, 256, (224, 224, 3), dtype=np.uint8)).save(path)
        content = [{"type": "image", "path": str(path)}, {"type": "text", "text": QUESTIONS[i % 4]}]
        reqs.append(Request(key=f"r{i}", content=content, max_new_tokens=new_tokens))
    return reqs


def check_results(results, n_requests: int, new_tokens: int, what: str) -> None:
    """Every request answered, with exactly ``new_tokens`` tokens (equal work)."""
    errors = [r.error for r in results if r.error]
    if errors:
        raise RuntimeError(f"{what}: {len(errors)} failed, e.g. {errors[0]}")
    tokens = sum(r.completion_tokens or 0 for r in results)
    if tokens != n_requests * new_tokens:
        raise RuntimeError(f"{what}: {tokens} tokens, not {n_requests * new_tokens}")


def time_backend(backend, reqs, batch_sizes, repeats, new_tokens, set_batch) -> list[dict]:
    """Best-of-``repeats`` wall time per batch size, after one warm-up pass."""
    rows = []
    for bs in batch_sizes:
        set_batch(backend, bs)
        best = None
        for rep in range(repeats + 1):
            t0 = time.perf_counter()
            results = list(backend.generate(reqs))
            wall = time.perf_counter() - t0
            check_results(results, len(reqs), new_tokens, f"batch {bs}")
            if rep and (best is None or wall < best):
                best = wall
        rows.append(
            {
                "batch_size": bs,
                "wall_s": round(best, 3),
                "requests_per_s": round(len(reqs) / best, 2),
                "tokens_per_s": round(len(reqs) * new_tokens / best, 1),
            }
        )
    return rows


def set_batch_size(backend, bs: int) -> None:
    backend.default_batch_size = bs


def measure(make, args, reqs) -> dict:
    """Start a local backend (``make()``), time it at every batch size, close it."""
    t0 = time.perf_counter()
    backend = make()
    start = time.perf_counter() - t0
    rows = time_backend(
        backend, reqs, args.batch_sizes, args.repeats, args.new_tokens, set_batch_size
    )
    backend.close()
    return {"start_s": round(start, 1), "rows": rows}


def run_hf(args, model_dir: Path, reqs) -> dict:
    from vlmrobust.clients.vlm.hf import HFBackend

    generation = {"min_new_tokens": args.new_tokens}
    options = {**PIXELS, "dtype": "float32", "generation": generation}
    return measure(
        lambda: HFBackend("bench", {"local_path": str(model_dir), "options": options}), args, reqs
    )


def run_vllm_worker(args) -> None:
    """In the vLLM environment: one engine, every batch size; JSON on stdout."""
    import vllm

    from vlmrobust.clients.vlm.vllm import VLLMBackend

    reqs = make_requests(Path(args.work), args.requests, args.new_tokens)
    generation = {"min_tokens": args.new_tokens}
    options = {**ENGINE, **PIXELS, "engine": KV_CACHE, "generation": generation}
    spec = {"local_path": args.model_dir, "options": options}
    result = measure(lambda: VLLMBackend("bench", spec), args, reqs)
    print(json.dumps({**result, "version": vllm.__version__}))


def vllm_env(args) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "workflow")
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    return env


def run_vllm(args, model_dir: Path, work: Path) -> dict:
    python = Path(args.vllm_env) / "bin" / "python"
    cmd = [str(python), __file__, "--worker", "vllm", "--work", str(work),
           "--model-dir", str(model_dir), "--requests", str(args.requests),
           "--new-tokens", str(args.new_tokens), "--repeats", str(args.repeats),
           "--batch-sizes", *map(str, args.batch_sizes)]  # fmt: skip
    proc = subprocess.run(cmd, env=vllm_env(args), capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"vllm worker failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_served(args, model_dir: Path, reqs, work: Path) -> dict:
    import socket

    from vlmrobust.clients.vlm.openai_api import OpenAIBackend
    from vlmrobust.clients.vlm.vllm import serve_command

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = {"local_path": str(model_dir), "options": {**ENGINE, **PIXELS, "engine": KV_CACHE}}
    python = str(Path(args.vllm_env) / "bin" / "python")
    cmd = serve_command("bench", spec, python=python, port=port)
    log = open(work / "serve.log", "w")  # noqa: SIM115 - closed below
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=vllm_env(args), stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {(work / 'serve.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        start = time.perf_counter() - t0
        client = OpenAIBackend(
            "bench-served",
            {
                "api_model": "bench",
                "base_url": f"http://127.0.0.1:{port}/v1",
                "api_key_env": None,
                "options": {"extra_body": {"min_tokens": args.new_tokens}, "max_retries": 0},
            },
        )

        def set_batch(b, bs):  # requests in flight at once
            import threading

            b.chat.concurrency = bs
            b.chat.slots = threading.BoundedSemaphore(bs)

        rows = time_backend(
            client, reqs, args.batch_sizes, args.repeats, args.new_tokens, set_batch
        )
        client.close()
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)
        log.close()
    return {"start_s": round(start, 1), "rows": rows}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker == "vllm":
        run_vllm_worker(args)
        return 0
    from vlmrobust_demo.model import build_demo_model

    work = Path(tempfile.mkdtemp(prefix="bench-vllm-"))
    try:
        model_dir = Path(args.model_dir) if args.model_dir else work / "model"
        if not args.model_dir:
            build_demo_model(model_dir, seed=0, head_dim=32)
        reqs = make_requests(work, args.requests, args.new_tokens)
        results = {}
        for engine in args.engines:
            if engine == "hf":
                results[engine] = run_hf(args, model_dir, reqs)
            elif engine == "vllm":
                results[engine] = run_vllm(args, model_dir, work)
            elif engine == "served":
                results[engine] = run_served(args, model_dir, reqs, work)
            print(f"{engine}: {results[engine]}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"{args.requests} requests x {args.new_tokens} new tokens, float32")  # fmt: skip
    print("| engine | start-up (s) | batch | wall (s) | requests/s | generated tokens/s |")
    print("|---|---|---|---|---|---|")
    table = []
    for engine, res in results.items():
        for row in res["rows"]:
            table.append({"engine": engine, "start_s": res["start_s"], **row})
            print(f"| {engine} | {res['start_s']} | {row['batch_size']} | {row['wall_s']} | "
                  f"{row['requests_per_s']} | {row['tokens_per_s']} |")  # fmt: skip
    if args.csv:
        with open(args.csv, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(table[0]))
            writer.writeheader()
            writer.writerows(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
