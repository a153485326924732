"""A loaded model as a service: one process answers the requests of many jobs.

An inference job that runs a local checkpoint used to spend most of its time starting:
importing torch, loading the weights, starting an engine. :class:`ModelServer` loads a
backend once and answers every job that connects to its Unix socket;
:class:`ServiceBackend` is the job's side, a :class:`~vlmrobust.clients.vlm.base.Backend`
like any other, so the runner's files, per-row resume, image hashes, seeds and error
accounting do not change; :func:`served_embedding` does the same for the sentence-embedding
model of the offline judges. :func:`connect` finds the service of a (model, owner, device
slot) or starts it (docs/architecture.md, "One loaded model per device").

Protocol: one JSON object per line over the socket. The client says ``hello`` (the
server answers with the model id, its fingerprint, backend name and revision),
``generate`` (a list of requests; the server answers one ``result`` line per request as
it finishes, then ``done``), ``count_tokens``, or ``stop_if_idle``. Requests of one
``generate`` call are answered in batches of their own (``merge: false``, as a job alone
would batch them: the same batches give the same numbers), or pooled with every other
client's pending requests (``merge: true``: one engine batches across conditions).

Lifetime: the server binds a socket only its user can use (mode 0600, in a folder of
mode 0700), serves while its *owner* process lives (the Snakemake process of the run,
or of a SLURM group job) and exits within a second once the owner is gone, on
SIGTERM/SIGINT, or after ``idle_s`` seconds without a client. A client whose server
died gets an error result for every request not answered (``finish_reason: error``),
which the runner counts and asks again on a rerun.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..core.processes import (  # noqa: F401 - re-exported: the services' owner
    IDLE_S,
    OWNER_ENV,
    SERVICE_DIR_ENV,
    UntrustedPeerError,
    allocation,
    check_peer,
    find_owner,
    hold_name,
    is_snakemake,
    listen_at,
    name_holder,
    pid_alive,
    remove_if_ours,
    service_dir,
    write_private,
)
from .vlm.base import Backend, Request, Result

log = logging.getLogger(__name__)

#: The device slot of a service: CUDA_VISIBLE_DEVICES (what a job on a GPU node sees).
SLOT_ENV = "CUDA_VISIBLE_DEVICES"
#: Seconds a live service takes at most to answer ``hello``.
HELLO_TIMEOUT_S = 30.0
#: The command line that marks a service process (tests and users find them by it).
SERVER_MODULE = "vlmrobust.clients.service"


# --------------------------------------------------------------------- identity


def checkpoint_stamp(spec: dict[str, Any]) -> list[Any]:
    """Name, size and modification time of each file of a local checkpoint: a cheap
    stamp that changes when the checkpoint is rebuilt, so a service never answers for
    weights that were replaced after it loaded them (hub models: empty)."""
    folder = spec.get("local_path")
    if not folder or not Path(folder).is_dir():
        return []
    return sorted(
        [p.name, st.st_size, st.st_mtime_ns]
        for p in Path(folder).iterdir()
        if p.is_file() and (st := p.stat())
    )


def spec_fingerprint(model_id: str, spec: dict[str, Any]) -> str:
    """The identity of what a service answers with: the registry entry and the stamp
    of its checkpoint files."""
    text = json.dumps(
        {"model": model_id, "spec": spec, "checkpoint": checkpoint_stamp(spec)},
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def socket_path(fingerprint: str, owner: int, slot: str) -> Path:
    """The socket of the service of (model fingerprint, owner process, device slot)."""
    key = hashlib.sha256(f"{fingerprint}|{owner}|{slot}".encode())
    return service_dir() / f"{key.hexdigest()[:24]}.sock"


def device_slot() -> str:
    """The devices a job sees (CUDA_VISIBLE_DEVICES), or ``default``."""
    return os.environ.get(SLOT_ENV) or "default"


# --------------------------------------------------------------------- the wire

#: The longest message a service reads (one JSON line; a job's largest is a batch of
#: requests or of texts to embed, well under this): longer ones are refused.
MAX_LINE = 64 << 20
#: Seconds a client has to say ``hello`` after connecting, and to finish a message once
#: it started one (between two messages a job may take as long as it likes).
FRAME_TIMEOUT_S = 30.0
#: Seconds a service waits for a client to read its answers before it drops it.
SEND_TIMEOUT_S = 120.0


class FrameError(ValueError):
    """A message that breaks the protocol: too long, or not finished in time."""


def _send(sock: socket.socket, obj: dict[str, Any], lock: threading.Lock | None = None) -> None:
    data = (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")
    if lock is None:
        sock.sendall(data)
    else:
        with lock:
            sock.sendall(data)


def _lines(
    sock: socket.socket,
    limit: int | None = None,
    first_timeout: float | None = None,
    frame_timeout: float | None = None,
) -> Iterator[dict[str, Any]]:
    """The JSON objects a peer sends, until it closes the connection.

    Each byte is scanned once. ``limit``: the longest line read (longer:
    :class:`FrameError`, nothing more is buffered); ``first_timeout``: seconds until the
    first line must have started; ``frame_timeout``: seconds a started line may take to
    end (both waited for with select, so the socket's own timeout, which applies
    between lines, is left alone)."""
    buffer = bytearray()
    wait = first_timeout
    while True:
        if wait is not None and not select.select([sock], [], [], wait)[0]:
            what = "finish its message" if buffer else "say anything"
            raise FrameError(f"the peer did not {what} within {wait:.0f} s")
        chunk = sock.recv(1 << 16)
        if not chunk:
            return
        scan = len(buffer)
        buffer += chunk
        start = 0
        while (end := buffer.find(b"\n", scan)) >= 0:
            line = bytes(buffer[start:end])
            start = scan = end + 1
            if line.strip():
                yield json.loads(line)
        del buffer[:start]
        if limit is not None and len(buffer) > limit:
            raise FrameError(f"a message over {limit} bytes")
        wait = frame_timeout if buffer else None


def _ask(path: Path, message: dict[str, Any], timeout: float = 5.0) -> dict[str, Any] | None:
    """One request, one answer; None when nobody (of this user) answers at ``path``."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(path))
            check_peer(sock, f"the model service at {path}")
            _send(sock, message)
            return next(_lines(sock, limit=MAX_LINE), None)
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------- the server


class ModelServer:
    """Serves one loaded backend on a Unix socket until its owner process is gone."""

    def __init__(
        self,
        backend: Backend,
        path: Path,
        *,
        owner: int,
        fingerprint: str,
        slot: str = "default",
        merge: bool = False,
        gpu: bool = False,
        idle_s: float = IDLE_S,
        poll_s: float = 0.5,
        name: int | None = None,
    ) -> None:
        self.backend, self.path, self.owner = backend, Path(path), int(owner)
        self.name = name  # the held lock on the socket's name (:func:`hold_name`), if taken
        self.gpu = gpu  # holds a GPU: a service of another model there may evict it
        self.fingerprint, self.slot, self.merge = fingerprint, slot, merge
        self.idle_s, self.poll_s = idle_s, poll_s
        self.work: queue.Queue[tuple[Any, list[Request]]] = queue.Queue()
        self.stopping = threading.Event()
        self.clients = 0
        self.busy = 0  # generate calls queued or running
        self.last_active = time.monotonic()
        self.answered = 0
        self._lock = threading.Lock()
        self._engine = threading.Lock()  # one encode call at a time

    @property
    def info_path(self) -> Path:
        return self.path.with_suffix(".json")

    # -- lifetime -----------------------------------------------------------------------

    def serve(self) -> None:
        """Bind, serve, and remove the socket when done (any reason). A second server
        for the same socket (another process holds its name) returns at once."""
        name = self.name if self.name is not None else hold_name(self.path.with_suffix(".pid"))
        if name is None:
            log.info("model service %s: another service holds %s", self.backend.model_id, self.path)
            self.backend.close()
            return
        listener, inode = listen_at(self.path)
        listener.settimeout(self.poll_s)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, lambda *_: self.stopping.set())
        write_private(self.info_path, json.dumps(self._hello()))
        worker = threading.Thread(target=self._work, daemon=True)
        worker.start()
        why = "stopped"
        try:
            why = self._accept(listener)
        finally:
            self.stopping.set()
            listener.close()
            remove_if_ours(self.path, inode)
            with contextlib.suppress(FileNotFoundError):
                self.info_path.unlink()
            os.close(name)
            log.info(
                "model service %s (%s) ends: %s; %d requests answered",
                self.backend.model_id,
                self.path,
                why,
                self.answered,
            )
            self.backend.close()

    def _accept(self, listener: socket.socket) -> str:
        """Accept clients (a thread each) until the owner is gone, idle or stopped."""
        while not self.stopping.is_set():
            if not pid_alive(self.owner):
                return f"its owner (pid {self.owner}) is gone"
            if self._idle():
                return f"idle for {self.idle_s:.0f} s"
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                check_peer(conn, "a client of the model service")
            except UntrustedPeerError as exc:
                log.warning("refused: %s", exc)
                conn.close()
                continue
            threading.Thread(target=self._client, args=(_Client(conn),), daemon=True).start()
        return "stopped"

    def _idle(self) -> bool:
        with self._lock:
            return (
                self.clients == 0
                and self.busy == 0
                and time.monotonic() - self.last_active > self.idle_s
            )

    # -- one client ---------------------------------------------------------------------

    def _client(self, client: _Client) -> None:
        with self._lock:
            self.clients += 1
        try:
            for msg in _lines(client.conn, MAX_LINE, FRAME_TIMEOUT_S, FRAME_TIMEOUT_S):
                if not self._handle(client, msg):
                    break
        except FrameError as exc:
            log.warning("model service %s: a client dropped: %s", self.backend.model_id, exc)
            client.send({"error": f"model service: {exc}"})
        except (OSError, ValueError):
            pass  # the client went away, or sent something that is not JSON
        finally:
            client.close()
            with self._lock:
                self.clients -= 1
                self.last_active = time.monotonic()

    def _handle(self, client: _Client, msg: dict[str, Any]) -> bool:
        """Answer one message; False when the client is gone."""
        op = msg.get("op")
        if op == "hello":
            client.send(self._hello())
        elif op == "count_tokens":
            client.send({"counts": [self.backend.count_tokens(t) for t in msg["texts"]]})
        elif op == "generate":
            requests = [Request(**r) for r in msg["requests"]]
            with self._lock:
                self.busy += 1
            self.work.put((client, requests))
            client.done.wait()
            client.done.clear()
            client.send({"done": True})
        elif op == "encode":
            self._encode(client, msg)
        elif op == "stop_if_idle":
            with self._lock:
                idle = self.clients == 1 and self.busy == 0  # only the asker
            if idle:
                self.stopping.set()
            client.send({"stopping": idle})
        else:
            client.send({"error": f"unknown op {op!r}"})
        return not client.gone.is_set()

    def _encode(self, client: _Client, msg: dict[str, Any]) -> None:
        with self._lock:
            self.busy += 1
        try:
            with self._engine:
                vectors = self.backend.encode(msg["texts"], **msg.get("kwargs", {}))
            client.send({"vectors": [list(map(float, v)) for v in vectors]})
        finally:
            with self._lock:
                self.busy -= 1
                self.last_active = time.monotonic()

    def _hello(self) -> dict[str, Any]:
        return {
            "model": self.backend.model_id,
            "fingerprint": self.fingerprint,
            "backend": self.backend.name,
            "revision": self.backend.revision,
            "batch_size": self.backend.default_batch_size,
            "merge": self.merge,
            "slot": self.slot,
            "owner": self.owner,
            "gpu": self.gpu,
            "pid": os.getpid(),
        }

    # -- the engine ---------------------------------------------------------------------

    def _work(self) -> None:
        """Answer queued requests: each client's as sent, or pooled (``merge``). The
        requests of a client that left are not generated."""
        while not self.stopping.is_set():
            try:
                jobs = [self.work.get(timeout=self.poll_s)]
            except queue.Empty:
                continue
            if self.merge:
                with contextlib.suppress(queue.Empty):
                    while True:
                        jobs.append(self.work.get_nowait())
            live = [job for job in jobs if not job[0].gone.is_set()]
            if live:
                self._answer(live)
            for client, _ in jobs:
                client.done.set()
            with self._lock:
                self.busy -= len(jobs)
                self.last_active = time.monotonic()

    def _answer(self, jobs: list[tuple[_Client, list[Request]]]) -> None:
        """One ``generate`` call for the requests of ``jobs``; each result goes back to
        the client that asked (keys are unique within a client, not across clients).
        Results are queued to each client's own writer: a client that does not read
        delays no one."""
        batch: list[Request] = []
        owners: dict[str, list[_Client]] = {}
        for client, requests in jobs:
            for r in requests:
                batch.append(r)
                owners.setdefault(r.key, []).append(client)
        t0 = time.perf_counter()
        try:
            for result in self.backend.generate(batch):
                owners[result.key].pop(0).send({"result": asdict(result)})
                self.answered += 1
            # the engine's busy time, read back by benchmarks/bench_cluster.py
            log.info("generated %d requests in %.3f s", len(batch), time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - an engine failure fails the requests
            reason = f"model service: {type(exc).__name__}: {exc}"[:1000]
            log.exception("model service %s: generate failed", self.backend.model_id)
            for key, clients in owners.items():
                for client in clients:
                    client.send({"result": asdict(Result(key, "", "error", error=reason))})


class _Client:
    """One connection to a service: its messages are written by a thread of its own, so
    a client that stops reading blocks only itself (and is dropped after
    :data:`SEND_TIMEOUT_S`)."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.outbox: queue.Queue[bytes | None] = queue.Queue()
        self.gone = threading.Event()
        self.done = threading.Event()  # its generate call is answered
        self.writer = threading.Thread(target=self._write, daemon=True)
        self.writer.start()

    def send(self, obj: dict[str, Any]) -> None:
        if not self.gone.is_set():
            self.outbox.put((json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8"))

    def _write(self) -> None:
        try:
            while (data := self.outbox.get()) is not None:
                view = memoryview(data)
                while view:
                    ready = select.select([], [self.conn], [], SEND_TIMEOUT_S)[1]
                    if not ready:
                        raise TimeoutError(f"the client read nothing for {SEND_TIMEOUT_S:.0f} s")
                    with contextlib.suppress(BlockingIOError):
                        view = view[self.conn.send(view, socket.MSG_DONTWAIT) :]
        except OSError as exc:
            if isinstance(exc, TimeoutError):
                log.warning("model service: a client dropped: %s", exc)
            self.gone.set()
            with contextlib.suppress(OSError):
                self.conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        """Flush what is queued, then close (the reading side calls this once)."""
        self.outbox.put(None)
        self.writer.join(SEND_TIMEOUT_S)
        self.gone.set()
        with contextlib.suppress(OSError):
            self.conn.close()


def evict_idle(owner: int, slot: str, keep: Path) -> list[str]:
    """Ask the idle services of other models on the same device slot of this owner to
    stop (a GPU holds one model's weights at a time); returns the models that stopped."""
    stopped = []
    for info in sorted(service_dir().glob("*.json")):
        sock = info.with_suffix(".sock")
        if sock == keep:
            continue
        try:
            meta = json.loads(info.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if meta.get("owner") != owner or meta.get("slot") != slot or not meta.get("gpu"):
            continue
        answer = _ask(sock, {"op": "stop_if_idle"})
        if answer and answer.get("stopping"):
            stopped.append(str(meta.get("model")))
    return stopped


# --------------------------------------------------------------------- the client


class ServiceBackend(Backend):
    """An inference job's side of a :class:`ModelServer`: the served backend's name and
    revision, its batches, and an error result for each request a dead server leaves."""

    def __init__(self, model_id: str, spec: dict[str, Any], path: Path) -> None:
        super().__init__(model_id, spec)
        self.path = Path(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(HELLO_TIMEOUT_S)  # a live service answers at once
        self.sock.connect(str(self.path))
        # the kernel's word on who listens, not the service's: this user, and its pid
        self.server_pid = check_peer(self.sock, f"models.{model_id}: the service at {self.path}")
        self.reader = _lines(self.sock)
        _send(self.sock, {"op": "hello"})
        hello = next(self.reader, None)
        self.sock.settimeout(None)  # a generate call waits as long as the engine works
        if hello is None:
            raise ConnectionError(f"models.{model_id}: the service at {self.path} closed")
        if hello.get("fingerprint") != spec_fingerprint(model_id, spec):
            raise RuntimeError(
                f"models.{model_id}: the service at {self.path} serves another model or "
                f"other settings ({hello.get('model')!r})"
            )
        self.hello = hello
        self.name = str(hello["backend"])
        self._revision = str(hello["revision"])
        self.default_batch_size = int(hello["batch_size"])

    @property
    def revision(self) -> str:
        return self._revision

    def count_tokens(self, text: str) -> int | None:
        _send(self.sock, {"op": "count_tokens", "texts": [text]})
        answer = next(self.reader, None)
        if answer is None:
            raise ConnectionError(f"models.{self.model_id}: the model service {self.path} died")
        return answer["counts"][0]

    def generate(self, requests: list[Request]) -> Iterator[Result]:
        """The results of one call, yielded once the service has answered all of them
        (the caller may ask ``count_tokens`` between two results, and the connection
        carries one conversation at a time)."""
        pending = {r.key for r in requests}
        results: list[Result] = []
        reason = None
        try:
            _send(self.sock, {"op": "generate", "requests": [asdict(r) for r in requests]})
            for msg in self.reader:
                if msg.get("done"):
                    break
                result = Result(**msg["result"])
                pending.discard(result.key)
                results.append(result)
            else:
                reason = "the connection closed"
        except (OSError, ValueError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
        yield from results
        if reason is None:
            return
        for key in sorted(pending):  # the server died: no answer, counted and re-asked
            yield Result(key, "", "error", error=f"model service {self.path} died ({reason})")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


#: The backends whose model a service holds (API backends hold none).
SERVED_BACKENDS = ("hf", "vllm")


class EmbeddingModel(Backend):
    """A sentence-transformers model as a service's backend (``encode`` only)."""

    name = "sentence-transformers"

    def __init__(self, model_dir: str) -> None:
        from .embedding import load_embedding_model

        super().__init__(f"embedding:{model_dir}", embedding_spec(model_dir))
        self.model = load_embedding_model(model_dir)

    @property
    def revision(self) -> str:
        return self.spec["local_path"]

    def generate(self, requests: list[Request]) -> Iterator[Result]:
        raise TypeError("an embedding model generates no text")

    def encode(self, texts: list[str], **kwargs: Any) -> Any:
        return self.model.encode(texts, **kwargs)


def embedding_spec(model_dir: str) -> dict[str, Any]:
    return {"backend": "embedding", "local_path": str(model_dir)}


class ServedEmbedding:
    """A job's side of an embedding model's service: ``encode`` as the model's own."""

    def __init__(self, client: ServiceBackend) -> None:
        self.client = client

    def encode(self, texts: list[str], **kwargs: Any) -> Any:
        import numpy as np

        _send(self.client.sock, {"op": "encode", "texts": list(texts), "kwargs": kwargs})
        answer = next(self.client.reader, None)
        if answer is None:
            raise ConnectionError(
                f"the embedding service {self.client.path} died while encoding {len(texts)} texts"
            )
        return np.asarray(answer["vectors"], dtype=np.float32)


def served_embedding(model_dir: str | Path) -> ServedEmbedding | None:
    """The embedding model in ``model_dir`` through the service of the Snakemake run
    above this process (started by the first job that asks), or None: there is no run
    (a step by hand), or $VLMROBUST_SERVICE_OWNER is ``off``."""
    owner = find_owner()
    if owner is None:
        return None
    folder = str(Path(model_dir).resolve())
    spec = embedding_spec(folder)
    log_path = Path("logs/services/embedding.log")  # jobs run in the workflow's folder
    client = connect(
        f"embedding:{folder}", spec, owner=owner, slot="cpu", merge=False, log_path=log_path
    )
    return ServedEmbedding(client)


def default_merge(spec: dict[str, Any]) -> bool:
    """Pool requests of several jobs into one engine batch: for vLLM (continuous
    batching; each request carries its own seed), not for transformers, whose padded
    batches would change the numbers."""
    return spec.get("backend") == "vllm"


def connect(
    model_id: str,
    spec: dict[str, Any],
    *,
    owner: int,
    slot: str | None = None,
    threads: int | None = None,
    merge: bool | None = None,
    idle_s: float = IDLE_S,
    log_path: Path | None = None,
    python: str | None = None,
) -> ServiceBackend:
    """The service of (model, owner, device slot), started first if there is none.

    One client starts it (a lock beside the socket serializes them) and waits until it
    listens; a service that exits while starting (a checkpoint that cannot load) is an
    error naming the model, with the end of its log."""
    slot = slot or device_slot()
    fingerprint = spec_fingerprint(model_id, spec)
    path = socket_path(fingerprint, owner, slot)
    with contextlib.suppress(OSError, ConnectionError, StopIteration):
        return ServiceBackend(model_id, spec, path)
    lock_path = path.with_suffix(".lock")
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with contextlib.suppress(OSError, ConnectionError, StopIteration):
            return ServiceBackend(model_id, spec, path)  # another client started it
        start(
            model_id,
            spec,
            path,
            owner=owner,
            slot=slot,
            threads=threads,
            merge=default_merge(spec) if merge is None else merge,
            idle_s=idle_s,
            log_path=log_path,
            python=python,
        )
        return ServiceBackend(model_id, spec, path)


def start(
    model_id: str,
    spec: dict[str, Any],
    path: Path,
    *,
    owner: int,
    slot: str,
    threads: int | None,
    merge: bool,
    idle_s: float,
    log_path: Path | None,
    python: str | None = None,
) -> int:
    """Start a service process (its own session: a Ctrl-C or a failed job's kill does
    not reach it; it ends with its owner) and wait until it listens; its pid."""
    cmd = [
        python or sys.executable,
        "-m",
        SERVER_MODULE,
        "--model",
        model_id,
        "--spec",
        json.dumps(spec, sort_keys=True),
        "--socket",
        str(path),
        "--owner",
        str(owner),
        "--slot",
        slot,
        "--idle-s",
        str(idle_s),
    ]
    if threads:
        cmd += ["--threads", str(threads)]
    if merge:
        cmd.append("--merge")
    if log_path is None:
        log_path = path.with_suffix(".log")
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    log.info("started the model service of %s (pid %d, log %s)", model_id, proc.pid, log_path)
    while not path.exists() or _ask(path, {"op": "hello"}) is None:
        code = proc.poll()
        if code == 0 and name_holder(path.with_suffix(".pid")) is not None:
            time.sleep(0.1)  # another service holds the name: it is starting
            continue
        if code is not None:
            tail = log_path.read_text(encoding="utf-8", errors="replace")[-3000:]
            raise RuntimeError(
                f"models.{model_id}: the model service could not start (exit code {code}); "
                f"the end of its log {log_path}:\n{tail}"
            )
        time.sleep(0.1)
    return proc.pid


# --------------------------------------------------------------------- the process


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def serve_main(argv: list[str] | None = None) -> int:
    """``python -m vlmrobust.clients.service``: load one backend and serve it."""
    ap = argparse.ArgumentParser(prog=f"python -m {SERVER_MODULE}", description=__doc__)
    ap.add_argument("--model", required=True, help="the registry id")
    ap.add_argument("--spec", required=True, help="the registry entry as JSON")
    ap.add_argument("--socket", required=True, type=Path)
    ap.add_argument("--owner", required=True, type=int, help="serve while this pid lives")
    ap.add_argument("--slot", default="default", help="the device slot (CUDA_VISIBLE_DEVICES)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--merge", action="store_true", help="pool the requests of all clients")
    ap.add_argument("--idle-s", type=float, default=IDLE_S, help="stop after this long unused")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from .vlm import make_backend

    name = hold_name(args.socket.with_suffix(".pid"))  # before the model is loaded
    if name is None:
        log.info("another service holds %s: exiting", args.socket)
        return 0
    spec = json.loads(args.spec)
    gpu = spec.get("backend") != "embedding" and _cuda_available()
    if gpu:
        stopped = evict_idle(args.owner, args.slot, args.socket)
        if stopped:
            log.info("stopped idle services on slot %s: %s", args.slot, ", ".join(stopped))
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    if spec.get("backend") == "embedding":
        backend: Backend = EmbeddingModel(spec["local_path"])
    else:
        backend = make_backend(args.model, spec)
    log.info(
        "model service %s (%s, revision %s) loaded in %.1f s; serving on %s for pid %d%s",
        args.model,
        backend.name,
        backend.revision,
        time.perf_counter() - t0,
        args.socket,
        args.owner,
        f" in {where}" if (where := allocation()) else "",
    )
    server = ModelServer(
        backend,
        args.socket,
        owner=args.owner,
        fingerprint=spec_fingerprint(args.model, spec),
        slot=args.slot,
        merge=args.merge,
        gpu=gpu,
        idle_s=args.idle_s,
        name=name,
    )
    server.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(serve_main())
