"""The model service: one loaded model answers many inference jobs (clients/service.py).

In-process servers with a fake backend check the protocol, batching, merging and error
accounting; real service processes on a random-weight demo checkpoint check start-up,
the owner-bound lifetime, a service killed mid-run and a checkpoint that cannot load.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests import test_infer_run
from tests.conftest import helper_processes
from tests.test_infer_run import EchoBackend, job
from vlmrobust.clients.service import (
    SERVER_MODULE,
    ModelServer,
    ServiceBackend,
    connect,
    find_owner,
    is_snakemake,
    socket_path,
    spec_fingerprint,
)
from vlmrobust.clients.vlm.base import Request
from vlmrobust.core.io import read_jsonl
from vlmrobust.infer.run import Service, run_inference


@pytest.fixture
def service_dir(monkeypatch):
    """A short private folder for the sockets (a socket path holds about 100 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="svc", dir="/tmp"))
    monkeypatch.setenv("VLMROBUST_SERVICE_DIR", str(folder))
    yield folder
    for pid in service_pids(folder):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()


dataset = test_infer_run.dataset  # the runner tests' five-sample dataset (a fixture)


def service_pids(folder: Path) -> list[int]:
    """Service processes whose socket is in ``folder``."""
    return helper_processes(SERVER_MODULE, mentions=folder)


def wait_until(check, timeout: float = 20.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.1)
    return False


class Recording(EchoBackend):
    """EchoBackend that records the batches it was given (and can be slow)."""

    def __init__(self, delay: float = 0.0):
        super().__init__()
        self.batches: list[list[str]] = []
        self.delay = delay

    def generate(self, requests):
        self.batches.append([r.key for r in requests])
        time.sleep(self.delay)
        yield from super().generate(requests)


def serve_in_thread(backend, folder: Path, merge: bool = False):
    spec = backend.spec
    path = socket_path(spec_fingerprint(backend.model_id, spec), os.getpid(), "t")
    server = ModelServer(
        backend,
        path,
        owner=os.getpid(),
        fingerprint=spec_fingerprint(backend.model_id, spec),
        merge=merge,
        poll_s=0.05,
    )
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    assert wait_until(path.with_suffix(".json").exists, 5)  # written once it listens
    return server, thread, path


def request(key: str) -> Request:
    return Request(key=key, content=[{"type": "text", "text": key}], max_new_tokens=4)


def test_a_served_job_writes_the_rows_of_a_job_alone(tmp_path, service_dir, dataset):
    """The same rows (but latency), the same batches, the server's revision."""
    manifest, samples = dataset / "manifest.jsonl", dataset / "samples.jsonl"
    alone = Recording()
    run_inference(job(), manifest, samples, tmp_path / "a.jsonl", alone)

    served = Recording()
    server, thread, path = serve_in_thread(served, service_dir)
    client = ServiceBackend("echo-model", served.spec, path)
    assert (client.name, client.revision, client.default_batch_size) == ("echo", "echo-1", 2)
    run_inference(job(), manifest, samples, tmp_path / "b.jsonl", client)
    client.close()
    a, b = read_jsonl(tmp_path / "a.jsonl"), read_jsonl(tmp_path / "b.jsonl")
    for row in a + b:
        row.pop("latency_s")
    assert a == b and len(a) == 5
    assert (
        served.batches
        == alone.batches
        == [
            ["demo-chart-0000#0", "demo-chart-0001#0"],
            ["demo-chart-0002#0", "demo-chart-0003#0"],
            ["demo-chart-0004#0"],
        ]
    )
    # the socket is the user's alone
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(service_dir.stat().st_mode) == 0o700
    server.stopping.set()
    thread.join(5)
    assert not path.exists() and not path.with_suffix(".json").exists()


def test_merge_pools_the_requests_of_several_clients(service_dir):
    """With merge, requests that wait while the engine is busy go in one batch."""
    backend = Recording(delay=0.3)
    server, thread, path = serve_in_thread(backend, service_dir, merge=True)
    results: dict[str, list[str]] = {}

    def ask(name: str, keys: list[str]) -> None:
        client = ServiceBackend("echo-model", backend.spec, path)
        results[name] = [r.text for r in client.generate([request(k) for k in keys])]
        client.close()

    first = threading.Thread(target=ask, args=("first", ["a"]))
    first.start()
    time.sleep(0.1)  # the engine is busy with "a"
    later = [threading.Thread(target=ask, args=(n, [f"{n}1", f"{n}2"])) for n in "xy"]
    for t in later:
        t.start()
    for t in [first, *later]:
        t.join(10)
    assert backend.batches[0] == ["a"]
    assert sorted(backend.batches[1]) == ["x1", "x2", "y1", "y2"]  # two clients, one batch
    assert results["x"] == [f"<think>looking</think>answer for {k}" for k in ("x1", "x2")]
    server.stopping.set()
    thread.join(5)


def test_an_engine_failure_fails_the_requests_not_the_server(service_dir):
    class Broken(EchoBackend):
        def generate(self, requests):
            raise RuntimeError("CUDA out of memory")

    server, thread, path = serve_in_thread(Broken(), service_dir)
    client = ServiceBackend("echo-model", {"options": {}}, path)
    out = list(client.generate([request("a"), request("b")]))
    assert [(r.key, r.finish_reason) for r in out] == [("a", "error"), ("b", "error")]
    assert out[0].error == "model service: RuntimeError: CUDA out of memory"
    # still serving
    assert list(client.generate([])) == []
    server.stopping.set()
    thread.join(5)


def test_a_client_of_another_model_is_refused(service_dir):
    server, thread, path = serve_in_thread(EchoBackend(), service_dir)
    with pytest.raises(RuntimeError, match="models.other: the service at .* serves another model"):
        ServiceBackend("other", {"options": {}}, path)
    server.stopping.set()
    thread.join(5)


def test_the_owner_of_a_job_is_the_snakemake_process_above_it(monkeypatch, tmp_path):
    assert is_snakemake(["/v/bin/python3", "/v/bin/snakemake", "--cores", "2"])
    assert is_snakemake(["python", "-m", "snakemake", "--target-jobs", "infer:x"])
    assert not is_snakemake(["python", "-m", "pytest", "tests/snakemake_test.py"])
    monkeypatch.delenv("VLMROBUST_SERVICE_OWNER", raising=False)
    assert find_owner() is None  # pytest runs no Snakemake: a job by hand loads its model
    monkeypatch.setenv("VLMROBUST_SERVICE_OWNER", "off")
    assert find_owner() is None
    monkeypatch.setenv("VLMROBUST_SERVICE_OWNER", "1234")
    assert find_owner() == 1234
    monkeypatch.setenv("VLMROBUST_SERVICE_OWNER", "me")
    with pytest.raises(ValueError, match="VLMROBUST_SERVICE_OWNER: 'me' is not a process id"):
        find_owner()
    # a real process tree: a process named snakemake -> bash -> python
    script = tmp_path / "owner.py"
    script.write_text("from vlmrobust.clients.service import find_owner\nprint(find_owner())\n")
    env = {k: v for k, v in os.environ.items() if k != "VLMROBUST_SERVICE_OWNER"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "workflow")
    fake = subprocess.Popen(
        ["bash", "-c", f"exec -a snakemake bash -c '{sys.executable} {script}; true'"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    out, _ = fake.communicate(timeout=60)
    assert out.strip() == str(fake.pid)


# --------------------------------------------------------------------- real processes


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from vlmrobust_demo.model import build_demo_model

    root = tmp_path_factory.mktemp("svcmodel")
    build_demo_model(root / "model", 5)
    spec = {
        "backend": "hf",
        "local_path": str(root / "model"),
        "options": {"batch_size": 4, "min_pixels": 3136, "max_pixels": 50176},
    }
    return spec


@pytest.fixture
def owner():
    """A process standing in for the Snakemake run: services live while it does."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_service_serves_every_job_of_its_owner_and_ends_with_it(
    tmp_path, service_dir, dataset, tiny_model, owner
):
    manifest, samples = dataset / "manifest.jsonl", dataset / "samples.jsonl"
    tiny = job(model="tiny", model_spec=tiny_model)
    alone = tmp_path / "alone.jsonl"
    run_inference(tiny, manifest, samples, alone)  # loads the model here
    service = Service(owner.pid, threads=1, log=tmp_path / "service.log")
    for out in ("one.jsonl", "two.jsonl"):
        run_inference(tiny, manifest, samples, tmp_path / out, service=service)
    pids = service_pids(service_dir)
    assert len(pids) == 1  # two jobs, one loaded model
    log_text = (tmp_path / "service.log").read_text()
    assert log_text.count("loaded in") == 1
    rows = {name: read_jsonl(tmp_path / name) for name in ("alone.jsonl", "one.jsonl", "two.jsonl")}
    for name, got in rows.items():
        assert [
            (r["raw_text"], r["completion_tokens"], r["model_revision"], r["backend"]) for r in got
        ] == [
            (r["raw_text"], r["completion_tokens"], r["model_revision"], r["backend"])
            for r in rows["alone.jsonl"]
        ], name
    # the run ends: the service ends within a second or two, its socket removed
    owner.kill()
    owner.wait()
    assert wait_until(lambda: not service_pids(service_dir), 10)
    assert list(service_dir.glob("*.sock")) == []
    assert "its owner (pid" in (tmp_path / "service.log").read_text()


def test_a_service_killed_mid_run_fails_requests_that_a_rerun_asks_again(
    tmp_path, service_dir, dataset, tiny_model, owner
):
    manifest, samples = dataset / "manifest.jsonl", dataset / "samples.jsonl"
    tiny = job(model="tiny", model_spec=tiny_model)
    client = connect("tiny", tiny_model, owner=owner.pid, log_path=tmp_path / "s.log")
    first = client.server_pid

    class DiesAfterOneBatch(ServiceBackend):
        """The service is killed (an out-of-memory kill, a node failure) once the
        first batch is answered."""

        calls = 0

        def generate(self, requests):
            DiesAfterOneBatch.calls += 1
            if DiesAfterOneBatch.calls == 2:
                os.kill(first, signal.SIGKILL)
                wait_until(lambda: not service_pids(service_dir), 5)
            yield from super().generate(requests)

    dying = DiesAfterOneBatch("tiny", tiny_model, client.path)
    out = tmp_path / "out.jsonl"
    stats = run_inference(tiny, manifest, samples, out, dying)
    assert stats["generated"] == 5 and stats["errors"] == 1  # batches of 4: 4 answered, 1 failed
    failed = [r for r in read_jsonl(out) if r["error"]]
    assert len(failed) == 1 and failed[0]["finish_reason"] == "error"
    assert "died" in failed[0]["error"] and failed[0]["raw_text"] == ""
    # the rerun starts a new service and asks only the failed request again
    service = Service(owner.pid, log=tmp_path / "s.log")
    stats = run_inference(tiny, manifest, samples, out, service=service)
    assert (stats["generated"], stats["reused"], stats["errors"]) == (1, 4, 0)
    assert all(r["error"] is None for r in read_jsonl(out))
    assert service_pids(service_dir) and first not in service_pids(service_dir)


def test_a_checkpoint_that_cannot_load_stops_the_job_naming_the_model(tmp_path, service_dir, owner):
    spec = {"backend": "hf", "local_path": str(tmp_path / "missing"), "options": {}}
    with pytest.raises(RuntimeError) as err:
        connect("broken", spec, owner=owner.pid, log_path=tmp_path / "s.log")
    text = str(err.value)
    assert text.startswith("models.broken: the model service could not start (exit code 1)")
    assert "models.broken.local_path:" in text and "is not a directory" in text
    assert service_pids(service_dir) == []


def test_a_service_with_no_client_stops_after_idle_s(tmp_path, service_dir, tiny_model, owner):
    client = connect("tiny", tiny_model, owner=owner.pid, idle_s=1, log_path=tmp_path / "s.log")
    assert json.loads(client.path.with_suffix(".json").read_text())["model"] == "tiny"
    assert service_pids(service_dir)
    client.close()
    assert wait_until(lambda: not service_pids(service_dir), 15)
    assert "idle for 1 s" in (tmp_path / "s.log").read_text()


def test_judges_share_one_embedding_service_with_the_same_vectors(service_dir, owner, monkeypatch):
    """The offline judges' sentence-embedding model, served: the vectors of a model
    loaded in the job, bit for bit, and one load for every Embedder of the run."""
    from vlmrobust.clients.embedding import Embedder, default_model_dir, load_embedding_model

    texts = ["Step 1: the bar is red.", "The answer is B.", "A dog on the grass."]
    local = Embedder(load_embedding_model()).encode(texts)
    monkeypatch.setenv("VLMROBUST_SERVICE_OWNER", str(owner.pid))
    first, second = Embedder(), Embedder()
    assert (first.encode(texts) == local).all()
    assert (second.encode(texts[::-1]) == local[::-1]).all()
    assert type(first.model).__name__ == "ServedEmbedding"
    assert len(service_pids(service_dir)) == 1
    info = json.loads(next(service_dir.glob("*.json")).read_text())
    assert info["model"] == f"embedding:{default_model_dir().resolve()}"
