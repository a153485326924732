"""One served vLLM engine for several conditions vs one engine per condition.

    .venv/bin/python benchmarks/bench_service.py [--conditions 4] [--requests 16]
        [--new-tokens 32] [--model-dir DIR]

At paper scale an engine answers many inference jobs (one per condition); this measures
what that buys on one demo checkpoint (attention heads of 32, random weights, float32,
the vLLM environment of ``bash envs/vllm-env.sh``), in one run:

- ``per condition``: for each of ``--conditions`` conditions in turn, start ``vllm
  serve`` (``vlmrobust vllm-serve``'s command), answer that condition's ``--requests``
  requests through the ``openai`` backend (all in flight at once, as one job sends
  them), stop the server: one engine start per condition, each batching one job's
  requests.
- ``one engine``: start the server once; every condition's client (one thread each, as
  concurrent inference jobs) sends its requests at the same time: one engine start,
  and the engine batches the requests of all conditions together.

Each request is one random 224-px image and a question, generating exactly
``--new-tokens`` tokens. Printed: engine starts, wall time (start-ups included), the
answering time alone, requests/s and generated tokens/s over the wall time, and the
most requests the engine ran at once (vLLM's ``vllm:num_requests_running`` gauge,
polled every 0.1 s), which shows the batching across conditions.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_vllm import (  # noqa: E402
    ENGINE,
    KV_CACHE,
    PIXELS,
    REPO,
    check_results,
    make_requests,
    vllm_env,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``vllm serve`` of the checkpoint on 127.0.0.1, with a poller of its running
    requests."""

    def __init__(self, args, model_dir: Path, work: Path, name: str) -> None:
        from vlmrobust.clients.vlm.vllm import serve_command

        self.port = free_port()
        spec = {"local_path": str(model_dir), "options": {**ENGINE, **PIXELS, "engine": KV_CACHE}}
        python = str(Path(args.vllm_env) / "bin" / "python")
        cmd = serve_command("bench", spec, python=python, port=self.port)
        self.log_path = work / f"serve-{name}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd, env=vllm_env(args), stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url("/v1/models"), timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        self.start_s = time.perf_counter() - t0
        self.max_running = 0.0
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, daemon=True)
        self._poller.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _poll(self) -> None:
        pattern = re.compile(r"^vllm:num_requests_running\{[^}]*\} ([0-9.e+]+)$", re.M)
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(self.url("/metrics"), timeout=2) as r:
                    for value in pattern.findall(r.read().decode()):
                        self.max_running = max(self.max_running, float(value))
            except OSError:
                pass
            time.sleep(0.1)

    def client(self, args):
        from vlmrobust.clients.vlm.openai_api import OpenAIBackend

        spec = {
            "api_model": "bench",
            "base_url": self.url("/v1"),
            "api_key_env": None,
            "options": {
                "extra_body": {"min_tokens": args.new_tokens},
                "max_retries": 0,
                "concurrency": args.requests,  # one job's requests all in flight
            },
        }
        return OpenAIBackend("bench-served", spec)

    def stop(self) -> None:
        self._stop.set()
        os.killpg(self.proc.pid, 15)
        self.proc.wait(timeout=60)
        self.log.close()


def answer(client, reqs, new_tokens: int) -> None:
    check_results(list(client.generate(reqs)), len(reqs), new_tokens, "a condition")


def per_condition(args, model_dir, work, conditions) -> dict:
    t0 = time.perf_counter()
    answering = running = 0.0
    for i, reqs in enumerate(conditions):
        server = Server(args, model_dir, work, f"c{i}")
        try:
            client = server.client(args)
            t1 = time.perf_counter()
            answer(client, reqs, args.new_tokens)
            answering += time.perf_counter() - t1
            client.close()
            running = max(running, server.max_running)
        finally:
            server.stop()
    return {"starts": len(conditions), "wall": time.perf_counter() - t0,
            "answering": answering, "max_running": running}  # fmt: skip


def one_engine(args, model_dir, work, conditions) -> dict:
    t0 = time.perf_counter()
    server = Server(args, model_dir, work, "shared")
    try:
        clients = [server.client(args) for _ in conditions]
        failures: list[BaseException] = []

        def job(client, reqs):
            try:
                answer(client, reqs, args.new_tokens)
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        threads = [
            threading.Thread(target=job, args=(c, r))
            for c, r in zip(clients, conditions, strict=True)
        ]
        t1 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        answering = time.perf_counter() - t1
        if failures:
            raise failures[0]
        for c in clients:
            c.close()
    finally:
        server.stop()
    return {"starts": 1, "wall": time.perf_counter() - t0, "answering": answering,
            "max_running": server.max_running}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conditions", type=int, default=4)
    ap.add_argument("--requests", type=int, default=16, help="requests per condition")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--model-dir", default=None, help="a head-size-32 demo checkpoint")
    ap.add_argument("--vllm-env", default=str(REPO / ".venv-vllm"))
    args = ap.parse_args(argv)
    from vlmrobust_demo.model import build_demo_model

    work = Path(tempfile.mkdtemp(prefix="bench-service-"))
    try:
        model_dir = Path(args.model_dir) if args.model_dir else work / "model"
        if not args.model_dir:
            build_demo_model(model_dir, seed=0, head_dim=32)
        reqs = make_requests(work, args.conditions * args.requests, args.new_tokens)
        conditions = [
            reqs[i * args.requests : (i + 1) * args.requests] for i in range(args.conditions)
        ]
        results = {
            "one engine per condition": per_condition(args, model_dir, work, conditions),
            "one engine for all conditions": one_engine(args, model_dir, work, conditions),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = args.conditions * args.requests
    print(f"# {platform.machine()}, {os.cpu_count()} CPUs; {args.conditions} conditions x "
          f"{args.requests} requests x {args.new_tokens} new tokens, float32, vllm serve")  # fmt: skip
    print("| setup | engine starts | wall (s) | answering (s) | requests/s (wall) | "
          "tokens/s (wall) | most requests running at once |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['starts']} | {r['wall']:.1f} | {r['answering']:.1f} | "
              f"{n / r['wall']:.2f} | {n * args.new_tokens / r['wall']:.1f} | "
              f"{r['max_running']:.0f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
