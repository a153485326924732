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
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from .core.processes import IDLE_S, OWNER_ENV, find_owner, pid_alive, service_dir

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


def runner_socket(owner: int) -> Path:
    tag = hashlib.sha256(f"runner|{owner}|{sys.executable}".encode()).hexdigest()[:24]
    return service_dir() / f"{tag}.runner"


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
    with contextlib.suppress(OSError):
        return _open(path)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with contextlib.suppress(OSError):
            return _open(path)
        _start(path, owner)
        return _open(path)


def _open(path: Path) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        raise
    return conn


def _start(path: Path, owner: int) -> None:
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
    while not path.exists():
        if proc.poll() is not None:
            raise RuntimeError(f"it exited with code {proc.returncode} (log: {log})")
        time.sleep(0.05)


def job_request(argv: list[str], owner: int) -> dict:
    """What the runner needs to run a job as this process would: its arguments, folder
    and environment, which names the run's Snakemake process (the child runs below the
    runner, not below Snakemake; a model service it starts lives for that run)."""
    return {"argv": argv, "cwd": os.getcwd(), "env": {**os.environ, OWNER_ENV: str(owner)}}


def _run_remote(conn: socket.socket, argv: list[str], owner: int) -> int:
    request = json.dumps(job_request(argv, owner)).encode()
    socket.send_fds(conn, [struct.pack("!I", len(request)) + request], [0, 1, 2])
    reader = conn.makefile("rb")
    first = reader.readline()
    if not first:
        print("vlmrobust: the job runner closed the connection", file=sys.stderr)
        return 1
    child = json.loads(first)["pid"]

    def forward(signum, _frame):  # Snakemake stopping the job stops its child
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    last = reader.readline()
    if not last:
        print(f"vlmrobust: the job runner died while running {argv[:1]}", file=sys.stderr)
        return 1
    return int(json.loads(last)["exit"])


# --------------------------------------------------------------------- the runner


def serve(path: Path, owner: int) -> int:
    """Import :data:`PRELOAD`, then fork a child per job until the owner is gone."""
    import importlib
    import logging

    log = logging.getLogger("vlmrobust.launcher")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s runner: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # the root logger stays unconfigured for the jobs
    t0 = time.perf_counter()
    for name in PRELOAD:
        importlib.import_module(name)
    if "torch" in sys.modules:
        log.warning("torch was imported while preloading: forked jobs may not use it safely")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    old = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old)
    listener.listen(64)
    listener.settimeout(0.5)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stopping.set())
    log.info("ready in %.1f s (pid %d, for pid %d)", time.perf_counter() - t0, os.getpid(), owner)
    last, jobs, why = time.monotonic(), 0, "stopped"
    active: set[int] = set()
    try:
        while not stopping.is_set():
            if not pid_alive(owner):
                why = f"its owner (pid {owner}) is gone"
                break
            if not active and time.monotonic() - last > IDLE_S:
                why = f"idle for {IDLE_S:.0f} s"
                break
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            last = time.monotonic()
            conn.settimeout(None)
            try:
                child = _fork_job(conn, listener)
            except Exception as exc:  # noqa: BLE001 - one bad request, not the runner
                log.error("a job could not start: %s", exc)
                conn.close()
                continue
            jobs += 1
            active.add(child)
            threading.Thread(target=_watch, args=(conn, child, active), daemon=True).start()
    finally:
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        for child in list(active):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)
        log.info("ends: %s; %d jobs run", why, jobs)
    return 0


def _recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    size = struct.unpack("!I", msg[:4])[0]
    body = msg[4:]
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ConnectionError("the client left")
        body += chunk
    return json.loads(body), fds


def _fork_job(conn: socket.socket, listener: socket.socket) -> int:
    request, fds = _recv_request(conn)
    if len(fds) != 3:
        raise ValueError(f"expected 3 file descriptors, got {len(fds)}")
    pid = os.fork()
    if pid == 0:  # the child: the job, as `python -m vlmrobust ARGS` would run it
        code = 1
        try:
            _set_parent_death_signal()
            listener.close()
            for i, fd in enumerate(fds):
                os.dup2(fd, i)
                os.close(fd)
            conn.close()
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
    for fd in fds:
        os.close(fd)
    conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    return pid


def _watch(conn: socket.socket, child: int, active: set[int]) -> None:
    """Wait for the child; stop it if its client goes away; report its exit status."""
    import select

    client_gone = False
    try:
        while True:
            done, status = os.waitpid(child, os.WNOHANG)
            if done:
                code = os.waitstatus_to_exitcode(status)
                code = 128 - code if code < 0 else code  # killed by a signal: as a shell says
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps({"exit": code}).encode() + b"\n")
                return
            if client_gone:
                time.sleep(0.2)
                continue
            readable, _, _ = select.select([conn], [], [], 0.2)
            if readable and not conn.recv(1, socket.MSG_PEEK):  # the client is gone
                client_gone = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGTERM)
    finally:
        active.discard(child)
        conn.close()


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
