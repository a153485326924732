"""The ``vlmrobust`` command: a warm runner for the jobs of a Snakemake run.

Most jobs of a run are short (a gather, a score, a judge, a table): starting Python and
importing numpy, pandas, matplotlib and the package took most of their time. Under a
Snakemake run, the ``vlmrobust`` command therefore does not import the package itself:
it hands its arguments, environment, working folder and standard streams (the file
descriptors themselves, over a Unix socket) to the run's *job runner*, a process that
imported all of that once and forks a child per job. The child runs exactly what
``python -m vlmrobust ARGS`` would run (:func:`vlmrobust.cli.main`) with the job's
streams, folder and environment; its exit status becomes the command's.

The runner is started by the first job of the run that needs it and lives as long as
the Snakemake process above the jobs (its *owner*, as for the model services:
:mod:`vlmrobust.core.processes`); it ends within a second after the run, on a signal,
or after ``IDLE_S`` unused. A signal to a job (Snakemake stopping it) reaches its child;
a child whose runner dies is killed with it; a job whose client is killed has its child
killed. Run by hand (no Snakemake above), with ``VLMROBUST_SERVICE_OWNER=off`` or for
the commands in ``NOT_FORKED``, the command runs in its own process, as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import json
import os
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from .core.processes import (
    IDLE_S,
    OWNER_ENV,
    UntrustedPeerError,
    check_peer,
    find_owner,
    hold_name,
    listen_at,
    name_holder,
    pid_alive,
    remove_if_ours,
    service_dir,
)

#: Commands that run in their own process even under Snakemake (a demo training is
#: minutes of torch: nothing to gain, and torch's thread pools prefer a fresh process).
NOT_FORKED = frozenset({"demo-model", "review", "idis-review", "concepts-review"})
#: Modules the runner imports before it forks (no torch: a child may import it).
PRELOAD = (
    "numpy",
    "pandas",
    "PIL.Image",
    "scipy.stats",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
    "jsonschema",
    "yaml",
    "tqdm",
    "vlmrobust.cli",
    "vlmrobust.studies",
    "vlmrobust.score",
    "vlmrobust.infer.run",
    "vlmrobust.judges.attributes",
    "vlmrobust.perturb",
    "vlmrobust.clients.service",
)
_RUNNER_ENV = "VLMROBUST_RUNNER"  # set in a child: a nested `vlmrobust` runs in place


#: The longest job request the runner reads (argv, folder and environment as JSON).
MAX_REQUEST = 8 << 20
#: Seconds a client has, once connected, to send its whole request.
REQUEST_TIMEOUT_S = 10.0
#: Seconds a client waits for its job to start once the request is sent.
START_TIMEOUT_S = 60.0
#: Seconds a stopped job's child has between SIGTERM and SIGKILL.
KILL_GRACE_S = 10.0


def runner_socket(owner: int) -> Path:
    tag = hashlib.sha256(f"runner|{owner}|{sys.executable}".encode()).hexdigest()[:24]
    return service_dir() / f"{tag}.runner"


def _name_file(path: Path) -> Path:
    """The file a runner holds locked while it lives, its pid in it."""
    return path.with_suffix(".pid")


# --------------------------------------------------------------------- the client


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    owner = None
    if not os.environ.get(_RUNNER_ENV) and argv and argv[0] not in NOT_FORKED:
        owner = find_owner()
    if owner is None:
        return _in_place(argv)
    try:
        conn = _connect(owner)
    except (OSError, RuntimeError) as exc:
        print(f"vlmrobust: the job runner is not available ({exc}); running here", file=sys.stderr)
        return _in_place(argv)
    return _run_remote(conn, argv, owner)


def _in_place(argv: list[str]) -> int:
    from .cli import main as cli_main

    return cli_main(argv)


def _connect(owner: int) -> socket.socket:
    path = runner_socket(owner)
    with contextlib.suppress(ConnectionError, FileNotFoundError):
        return _open(path)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with contextlib.suppress(ConnectionError, FileNotFoundError):
            return _open(path)
        return _start(path, owner)


def _open(path: Path) -> socket.socket:
    """A connection to the runner at ``path``, checked: the peer is this user's process
    that holds the runner's name (its pid from the kernel, not from the runner)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
        holder = name_holder(_name_file(path))
        if holder is None:
            raise ConnectionRefusedError(f"no runner holds {path}")
        check_peer(conn, f"the job runner at {path}", pid=holder)
    except BaseException:
        conn.close()
        raise
    return conn


def _start(path: Path, owner: int) -> socket.socket:
    """Start a runner and connect once it listens. A runner that finds another one
    holding the name exits at once; the connection then goes to the other one."""
    log = Path("logs/services/runner.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"}  # fmt: skip
    cmd = [sys.executable, "-m", "vlmrobust.launcher", "--serve", str(path), str(owner)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True, env=env,
        )  # fmt: skip
    end = time.monotonic() + START_TIMEOUT_S
    while True:
        with contextlib.suppress(ConnectionError, FileNotFoundError):
            return _open(path)
        code = proc.poll()
        if code not in (None, 0):
            raise RuntimeError(f"it exited with code {code} (log: {log})")
        if code == 0 and name_holder(_name_file(path)) is None:
            raise RuntimeError(f"it exited before it listened (log: {log})")
        if time.monotonic() > end:
            raise RuntimeError(f"it did not listen within {START_TIMEOUT_S:.0f} s (log: {log})")
        time.sleep(0.05)


def job_request(argv: list[str], owner: int) -> dict:
    """What the runner needs to run a job as this process would: its arguments, folder
    and environment, which names the run's Snakemake process (the child runs below the
    runner, not below Snakemake; a model service it starts lives for that run)."""
    return {"argv": argv, "cwd": os.getcwd(), "env": {**os.environ, OWNER_ENV: str(owner)}}


def _run_remote(conn: socket.socket, argv: list[str], owner: int) -> int:
    """Send the job, then wait for its exit status. A signal to this process (from the
    moment the request is sent) is passed on to the runner, which delivers it to the
    job's child: this process never signals a pid it was told."""
    request = json.dumps(job_request(argv, owner)).encode()
    sending, held = [True], []  # signals that come while the request is being sent wait

    def forward(signum, _frame):  # Snakemake stopping the job stops its child
        if sending[0]:
            held.append(signum)
            return
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"signal": signum}).encode() + b"\n", socket.MSG_DONTWAIT)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    socket.send_fds(conn, [struct.pack("!I", len(request)) + request], [0, 1, 2])
    sending[0] = False
    for signum in held:
        forward(signum, None)
    conn.settimeout(START_TIMEOUT_S)
    reader = conn.makefile("rb")
    try:
        first = json.loads(reader.readline() or b"null")
    except (TimeoutError, ValueError):
        first = None
    if not isinstance(first, dict) or not first.get("started"):
        why = first.get("error") if isinstance(first, dict) else "no answer"
        print(f"vlmrobust: the job runner did not start the job ({why})", file=sys.stderr)
        return 1
    conn.settimeout(None)
    last = reader.readline()
    if not last:
        print(f"vlmrobust: the job runner died while running {argv[:1]}", file=sys.stderr)
        return 1
    return int(json.loads(last)["exit"])


# --------------------------------------------------------------------- the runner


def serve(path: Path, owner: int) -> int:
    """Import :data:`PRELOAD`, then fork a child per job until the owner is gone. A
    second runner for the same owner (another process holds the name) exits at once."""
    log = _runner_log()
    name = hold_name(_name_file(path))
    if name is None:
        log.info(
            "another runner (pid %s) serves pid %d: exiting", name_holder(_name_file(path)), owner
        )
        return 0
    t0 = time.perf_counter()
    for module in PRELOAD:
        importlib.import_module(module)
    if "torch" in sys.modules:
        log.warning("torch was imported while preloading: forked jobs may not use it safely")
    listener, inode = listen_at(path)
    listener.setblocking(False)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stopping.set())
    log.info("ready in %.1f s (pid %d, for pid %d)", time.perf_counter() - t0, os.getpid(), owner)
    runner = _Runner(listener, owner, name, log)
    why = "stopped"
    try:
        why = runner.loop(stopping)
    finally:
        listener.close()
        remove_if_ours(path, inode)
        runner.stop_children()
        log.info("ends: %s; %d jobs run", why, runner.jobs)
    return 0


def _runner_log():
    import logging

    log = logging.getLogger("vlmrobust.launcher")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s runner: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # the root logger stays unconfigured for the jobs
    return log


class _Pending:
    """A connection whose request is still arriving (read without blocking anyone)."""

    def __init__(self, conn: socket.socket, peer: int) -> None:
        self.conn, self.peer = conn, peer
        self.deadline = time.monotonic() + REQUEST_TIMEOUT_S
        self.data = bytearray()
        self.rest = bytearray()
        self.fds: list[int] = []

    def read(self) -> dict | None:
        """Read what has arrived; the request once complete, else None. Raises
        ValueError (a bad or oversized request) or ConnectionError (the client left)."""
        msg, fds, _, _ = socket.recv_fds(self.conn, 1 << 16, 3)
        self.fds += fds
        if not msg:
            raise ConnectionError("the client left before its request was complete")
        self.data += msg
        if len(self.data) < 4:
            return None
        size = struct.unpack("!I", self.data[:4])[0]
        if size > MAX_REQUEST:
            raise ValueError(f"a request of {size} bytes is over the limit of {MAX_REQUEST}")
        if len(self.data) < 4 + size:
            return None
        self.rest = bytearray(self.data[4 + size :])  # signals the client sent already
        return _valid_request(json.loads(self.data[4 : 4 + size]), self.fds)

    def close_fds(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []

    def close(self) -> None:
        self.close_fds()
        self.conn.close()


def _valid_request(request: object, fds: list[int]) -> dict:
    if len(fds) != 3:
        raise ValueError(f"expected 3 file descriptors, got {len(fds)}")
    ok = (
        isinstance(request, dict)
        and isinstance(request.get("argv"), list)
        and all(isinstance(a, str) for a in request["argv"])
        and isinstance(request.get("cwd"), str)
        and isinstance(request.get("env"), dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in request["env"].items())
    )
    if not ok:
        raise ValueError("a request must hold argv (strings), cwd and env (strings)")
    return request


def _client_gone(conn: socket.socket, peer: int) -> bool:
    """The client closed its end, or its process is gone."""
    if not pid_alive(peer):
        return True
    if select.select([conn], [], [], 0)[0]:
        with contextlib.suppress(BlockingIOError):
            return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    return False


class _Runner:
    """The runner's loop: accept, read requests as they arrive (a selector; no client
    can hold up another), fork the jobs, and watch the owner."""

    def __init__(self, listener: socket.socket, owner: int, name: int, log) -> None:
        self.listener, self.owner, self.name, self.log = listener, owner, name, log
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, None)
        self.active: set[int] = set()
        self.conns: set[socket.socket] = set()  # connections of running jobs
        self.jobs = 0
        self.last = time.monotonic()

    def loop(self, stopping: threading.Event) -> str:
        while not stopping.is_set():
            if not pid_alive(self.owner):
                return f"its owner (pid {self.owner}) is gone"
            if not self.active and time.monotonic() - self.last > IDLE_S:
                return f"idle for {IDLE_S:.0f} s"
            for key, _ in self.selector.select(timeout=0.5):
                if key.data is None:
                    self._accept()
                else:
                    self._read(key.data)
            self._expire()
        return "stopped"

    def _accept(self) -> None:
        with contextlib.suppress(BlockingIOError):
            conn, _ = self.listener.accept()
            self.last = time.monotonic()
            try:
                peer = check_peer(conn, "a client of the job runner")
            except UntrustedPeerError as exc:
                self.log.warning("refused: %s", exc)
                conn.close()
                return
            conn.setblocking(False)
            self.selector.register(conn, selectors.EVENT_READ, _Pending(conn, peer))

    def _read(self, pending: _Pending) -> None:
        try:
            request = pending.read()
        except BlockingIOError:
            return
        except (OSError, ValueError) as exc:
            self._refuse(pending, str(exc))
            return
        if request is None:
            return
        self.selector.unregister(pending.conn)
        if _client_gone(pending.conn, pending.peer):
            self.log.info(
                "not started (its client, pid %d, is gone): %s", pending.peer, request["argv"][:1]
            )
            pending.close()
            return
        self._start(pending, request)

    def _refuse(self, pending: _Pending, why: str) -> None:
        self.log.warning("a request from pid %d refused: %s", pending.peer, why)
        with contextlib.suppress(OSError):
            pending.conn.send(json.dumps({"error": why}).encode() + b"\n", socket.MSG_DONTWAIT)
        self.selector.unregister(pending.conn)
        pending.close()

    def _expire(self) -> None:
        now = time.monotonic()
        for key in list(self.selector.get_map().values()):
            if key.data is not None and now > key.data.deadline:
                self._refuse(key.data, f"no whole request within {REQUEST_TIMEOUT_S:.0f} s")

    def _start(self, pending: _Pending, request: dict) -> None:
        conn = pending.conn
        conn.setblocking(True)
        pendings = [k.data.conn for k in self.selector.get_map().values() if k.data is not None]
        close = [self.listener, self.selector, self.name, conn, *self.conns, *pendings]
        try:
            child = _fork_job(request, pending.fds, close)
        except OSError as exc:
            self._refuse(pending, f"the job could not start: {exc}")
            return
        finally:
            pending.close_fds()
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"started": True}).encode() + b"\n")
        self.jobs += 1
        self.active.add(child)
        self.conns.add(conn)

        def done(pid: int) -> None:
            self.active.discard(pid)
            self.conns.discard(conn)
            self.last = time.monotonic()

        watch = (conn, child, done, pending.rest)
        threading.Thread(target=_watch, args=watch, daemon=True).start()

    def stop_children(self) -> None:
        for child in list(self.active):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)


def _fork_job(request: dict, fds: list[int], close: list) -> int:
    """Fork the job's child; ``close``: what the child must not keep (the runner's
    sockets, its name lock, other jobs' connections)."""
    pid = os.fork()
    if pid == 0:  # the child: the job, as `python -m vlmrobust ARGS` would run it
        code = 1
        try:
            _set_parent_death_signal()
            for thing in close:
                with contextlib.suppress(OSError):
                    thing.close() if hasattr(thing, "close") else os.close(thing)
            for i, fd in enumerate(fds):
                os.dup2(fd, i)
                os.close(fd)
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            os.environ[_RUNNER_ENV] = "1"
            sys.argv = ["vlmrobust", *request["argv"]]
            code = _in_place(request["argv"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - the job's traceback, as Python prints it
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    return pid


def _watch(conn: socket.socket, child: int, done, inbox: bytearray) -> None:
    """Wait for the child; pass on the signals its client forwards; stop it (SIGTERM,
    then SIGKILL after :data:`KILL_GRACE_S`) when its client goes away; report its exit
    status. ``inbox``: what the client sent after its request. ``done(child)`` is
    called once it has ended."""
    killed_at = None
    _deliver_signals(inbox, child)
    try:
        while True:
            ended, status = os.waitpid(child, os.WNOHANG)
            if ended:
                code = os.waitstatus_to_exitcode(status)
                code = 128 - code if code < 0 else code  # killed by a signal: as a shell says
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
                return
            if killed_at is not None:
                if time.monotonic() - killed_at > KILL_GRACE_S:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(child, signal.SIGKILL)
                time.sleep(0.2)
                continue
            if not select.select([conn], [], [], 0.2)[0]:
                continue
            chunk = b""
            with contextlib.suppress(OSError):
                chunk = conn.recv(4096)
            if not chunk:  # the client is gone: so is its job
                killed_at = time.monotonic()
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGTERM)
                continue
            inbox += chunk
            _deliver_signals(inbox, child)
    finally:
        done(child)
        conn.close()


#: The signals a client may pass on to its job.
FORWARDED = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})


def _deliver_signals(inbox: bytearray, child: int) -> None:
    """Deliver the ``{"signal": N}`` lines in ``inbox`` to the child (the runner's own
    child: its pid cannot have been reused while unreaped); drops what is not one."""
    while (end := inbox.find(b"\n")) >= 0:
        line = bytes(inbox[:end])
        del inbox[: end + 1]
        with contextlib.suppress(ValueError, TypeError, AttributeError, ProcessLookupError):
            signum = int(json.loads(line)["signal"])
            if signum in FORWARDED:
                os.kill(child, signum)
    if len(inbox) > 4096:
        inbox.clear()


def _set_parent_death_signal() -> None:
    """Linux: the child is killed when the runner dies (no job outlives it)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        raise SystemExit(serve(Path(sys.argv[2]), int(sys.argv[3])))
    raise SystemExit(main())
