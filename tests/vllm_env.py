"""The vLLM environment for the tests that run the real engine (marker ``vllm``).

The environment is made by ``bash envs/vllm-env.sh`` (CI does; ``VLMROBUST_VLLM_ENV``
points elsewhere). Without it those tests are skipped with the reason, unless
``VLMROBUST_REQUIRE_VLLM=1`` (CI), where a missing environment is a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VLLM_ENV = Path(os.environ.get("VLMROBUST_VLLM_ENV", REPO / ".venv-vllm"))
VLLM_PYTHON = VLLM_ENV / "bin" / "python"

#: Engine settings vLLM's CPU build runs the tiny checkpoints with: float32 (bfloat16
#: rounds the tiny model's logits into ties), eager mode (no torch.compile: 40 s less
#: start-up), a small context and KV cache.
CPU_ENGINE = {
    "dtype": "float32",
    "max_model_len": 2048,
    "enforce_eager": True,
    "engine": {"kv_cache_memory_bytes": 1 << 30},
}


def require_vllm() -> None:
    """Skip (or, with VLMROBUST_REQUIRE_VLLM=1, fail) where the environment is missing."""
    if VLLM_PYTHON.exists():
        return
    reason = f"no vLLM environment at {VLLM_ENV} (make it with `bash envs/vllm-env.sh`)"
    if os.environ.get("VLMROBUST_REQUIRE_VLLM") == "1":
        pytest.fail(f"VLMROBUST_REQUIRE_VLLM=1 but {reason}")
    pytest.skip(reason)


def vllm_cli() -> list[str]:
    """``vlmrobust`` in the vLLM environment, as rule infer_vllm runs it."""
    return [str(VLLM_PYTHON), "-m", "vlmrobust"]


def vllm_env_vars() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "workflow")
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
            return r.status == 200 and bool(json.loads(r.read())["data"])
    except (OSError, ValueError, KeyError):
        return False


class Server:
    """``vlmrobust vllm-serve`` in its own process group (the API server and its
    engine processes), stopped with the whole group."""

    def __init__(self, cmd: list[str], port: int, log: Path) -> None:
        self.cmd, self.port, self.log = cmd, port, log
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 300) -> Server:
        fh = open(self.log, "a", encoding="utf-8")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(
            self.cmd,
            cwd=REPO,
            env=vllm_env_vars(),
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        fh.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"vllm server exited ({self.proc.returncode}):\n{self.log.read_text()[-6000:]}"
                )
            if _ready(self.port):
                return self
            time.sleep(1)
        self.kill()
        raise AssertionError(
            f"vllm server not ready in {timeout} s:\n{self.log.read_text()[-6000:]}"
        )

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Stop the server and every process it started (its process group): ``sig``,
        then SIGKILL for whatever is left after 60 s."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=60)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def alive_group(self, wait: float = 15) -> bool:
        """Whether any process of the server's group is still there after ``wait``
        seconds (the engine processes of a killed server are reaped by init)."""
        if self.proc is None:
            return False
        deadline = time.monotonic() + wait
        while True:
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return False
            if time.monotonic() > deadline:
                return True
            time.sleep(0.2)


@contextlib.contextmanager
def served(cmd: list[str], port: int, log: Path) -> Iterator[Server]:
    server = Server(cmd, port, log).start()
    try:
        yield server
    finally:
        server.kill(signal.SIGTERM)
