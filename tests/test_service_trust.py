"""What the model services and the job runner trust: no one else (docs/architecture.md,
"What the services trust").

Each test plays a hostile or unlucky local process against real code: a socket folder
planted before the run (a symbolic link, another user's folder, an open folder), a
server or client of another uid (a forked child that becomes ``nobody``), a runner that
reports a pid to be killed, a client that connects and says nothing, sends a length
prefix of 4 GB or a line without an end, never reads its answers, or leaves before its
job starts, and two runners started for one owner.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, helper_processes, tool_env
from tests.test_infer_run import EchoBackend
from tests.test_launcher import run_env
from tests.test_service import request, serve_in_thread, wait_until
from vlmrobust import launcher
from vlmrobust.clients import service
from vlmrobust.clients.service import ServiceBackend, spec_fingerprint
from vlmrobust.core import processes
from vlmrobust.core.processes import (
    UnsafeFolderError,
    UntrustedPeerError,
    hold_name,
    listen_at,
    private_folder,
    service_dir,
)

NOBODY = 65534
as_root = pytest.mark.skipif(os.getuid() != 0, reason="playing another user needs root")


@pytest.fixture
def folder():
    """A private folder for sockets (short: a socket path holds about 100 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="trust", dir="/tmp"))
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


@pytest.fixture
def open_folder():
    """A folder anyone can write to (where another user's process binds its socket)."""
    path = Path(tempfile.mkdtemp(prefix="open", dir="/tmp"))
    os.chmod(path, 0o777)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def as_nobody(work, timeout: float = 30.0) -> str:
    """Run ``work()`` in a forked child that has become uid ``nobody``; what it returns
    (a string), or its error."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            out = str(work())
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            out = f"error: {type(exc).__name__}: {exc}"
        os.write(write, out.encode())
        os._exit(0)
    os.close(write)
    chunks = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    return b"".join(chunks).decode()


# --------------------------------------------------------------------- the folder


@pytest.fixture
def short(folder):
    """A short folder of the test (pytest's tmp_path is too deep for socket paths)."""
    return folder


@pytest.fixture
def default_base(short, monkeypatch):
    """The default socket folder's place (normally /tmp) in a folder of the test, no
    $XDG_RUNTIME_DIR or $VLMROBUST_SERVICE_DIR, and a home folder for the fallback."""
    base = short / "tmp"
    base.mkdir()
    os.chmod(base, 0o1777)  # as /tmp: sticky, writable by all
    monkeypatch.setattr(processes, "TMP_BASE", base)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv(processes.SERVICE_DIR_ENV, raising=False)
    monkeypatch.setenv("HOME", str(short / "home"))
    return base


def test_a_planted_symbolic_link_is_not_followed(default_base, short):
    target = short / "victim"
    target.mkdir(mode=0o755)
    planted = default_base / f"vlmrobust-{os.getuid()}"
    planted.symlink_to(target)
    chosen = service_dir()
    assert chosen == short / "home" / ".cache" / "vlmrobust" / "sockets"
    assert stat.S_IMODE(chosen.stat().st_mode) == 0o700
    assert stat.S_IMODE(target.stat().st_mode) == 0o755  # not chmod-ed through the link
    assert planted.is_symlink()
    with pytest.raises(UnsafeFolderError, match=f"{planted} is a symbolic link"):
        private_folder(planted)


@as_root
def test_a_folder_another_user_made_first_is_passed_over(default_base, short, monkeypatch):
    taken = default_base / f"vlmrobust-{os.getuid()}"
    taken.mkdir(mode=0o700)
    os.chown(taken, NOBODY, NOBODY)
    assert service_dir() == short / "home" / ".cache" / "vlmrobust" / "sockets"  # no DoS
    monkeypatch.setenv(processes.SERVICE_DIR_ENV, str(taken))
    with pytest.raises(
        UnsafeFolderError,
        match=rf"\$VLMROBUST_SERVICE_DIR: {taken} belongs to uid {NOBODY}, not to this user",
    ):
        service_dir()


def test_a_folder_open_to_others_is_refused_and_a_narrow_one_narrowed(short, monkeypatch):
    mine = short / "mine"
    mine.mkdir(mode=0o700)
    os.chmod(mine, 0o777)
    with pytest.raises(UnsafeFolderError, match=r"can be written by others \(mode 0777\)"):
        private_folder(mine)
    os.chmod(mine, 0o750)
    assert private_folder(mine) == mine
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700
    # a parent anyone can write (and not sticky): whatever is below can be swapped
    shared = short / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv(processes.SERVICE_DIR_ENV, str(shared / "sockets"))
    with pytest.raises(UnsafeFolderError, match=rf"{shared} \(above the socket folder\) can be"):
        service_dir()
    assert not (shared / "sockets").exists()


def test_the_default_folder_is_made_private_when_missing(default_base):
    made = service_dir()
    assert made == default_base / f"vlmrobust-{os.getuid()}"
    st = os.lstat(made)
    assert (stat.S_ISDIR(st.st_mode), st.st_uid, stat.S_IMODE(st.st_mode)) == (
        True,
        os.getuid(),
        0o700,
    )


# --------------------------------------------------------------------- the peers


def _one_client(path: Path, answer: bytes = b"") -> None:
    """Listen at ``path`` (open to all), take one client, answer it, close."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as srv:
        srv.bind(str(path))
        os.chmod(path, 0o777)
        srv.listen(1)
        srv.settimeout(20)
        conn, _ = srv.accept()
        if answer:
            conn.recv(1000)
            conn.sendall(answer)
        time.sleep(1)
        conn.close()


def _forged_service(path: Path, fingerprint: str):
    """As another user: a fake model service that answers hello with a fingerprint."""
    hello = {"model": "m", "fingerprint": fingerprint, "backend": "hf", "revision": "r"}
    answer = json.dumps({**hello, "batch_size": 1}).encode() + b"\n"
    return lambda: _one_client(path, answer) or "served"


@as_root
def test_a_service_of_another_user_is_refused(open_folder):
    spec = {"options": {}}
    path = open_folder / "fake.sock"
    result = {}
    forger = threading.Thread(
        target=lambda: result.update(
            out=as_nobody(_forged_service(path, spec_fingerprint("m", spec)))
        )
    )
    forger.start()
    assert wait_until(path.exists, 10)
    with pytest.raises(
        UntrustedPeerError, match=f"the peer runs as uid {NOBODY}, not as this user"
    ):
        ServiceBackend("m", spec, path)
    forger.join(30)


@as_root
def test_a_client_of_another_user_gets_nothing_even_through_open_modes(folder, monkeypatch):
    monkeypatch.setenv(processes.SERVICE_DIR_ENV, str(folder))
    server, thread, path = serve_in_thread(EchoBackend(), folder)
    os.chmod(folder, 0o755)  # loosened by hand: the kernel's peer check still holds
    os.chmod(path, 0o777)

    def work():
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(str(path))
            try:
                sock.sendall(b'{"op": "hello"}\n')
                return repr(sock.recv(65536))
            except (ConnectionResetError, BrokenPipeError):  # closed before it read what was sent
                return "b''"

    assert as_nobody(work) == "b''"  # closed without an answer
    server.stopping.set()
    thread.join(5)


@as_root
def test_a_runner_of_another_user_is_refused(open_folder):
    path = open_folder / "fake.runner"

    def work():
        name = hold_name(open_folder / "fake.pid")
        _one_client(path)
        os.close(name)
        return "served"

    result = {}
    forger = threading.Thread(target=lambda: result.update(out=as_nobody(work)))
    forger.start()
    assert wait_until(path.exists, 10)
    with pytest.raises(UntrustedPeerError, match=f"the job runner at {path}: the peer runs as uid"):
        launcher._open(path)
    forger.join(30)


def test_a_job_never_signals_a_pid_the_runner_reports(folder, tmp_path, monkeypatch):
    """A fake runner (it holds the runner's name, so it passes the peer check) says the
    job's child is some other process: a SIGTERM to the job must not reach that
    process; it goes to the runner, as a message."""
    owner = subprocess.Popen(["sleep", "600"])
    victim = subprocess.Popen(["sleep", "600"])
    env = {
        **tool_env(),
        "VLMROBUST_SERVICE_OWNER": str(owner.pid),
        "VLMROBUST_SERVICE_DIR": str(folder),
        "PYTHONPATH": str(REPO / "workflow"),
    }
    monkeypatch.setenv(processes.SERVICE_DIR_ENV, str(folder))
    path = launcher.runner_socket(owner.pid)
    name = hold_name(path.with_suffix(".pid"))
    listener, _ = listen_at(path)
    got: list[bytes] = []

    def fake_runner():
        conn, _ = listener.accept()
        conn.recv(1 << 20)
        conn.sendall(json.dumps({"started": True, "pid": victim.pid}).encode() + b"\n")
        conn.settimeout(20)
        with contextlib.suppress(OSError):
            got.append(conn.recv(1000))
        conn.sendall(b'{"exit": 143}\n')
        conn.close()

    thread = threading.Thread(target=fake_runner)
    thread.start()
    job = subprocess.Popen(
        [sys.executable, "-m", "vlmrobust.launcher", "--version"], cwd=tmp_path, env=env
    )
    time.sleep(3)  # the job is waiting for its exit status
    job.send_signal(signal.SIGTERM)
    try:
        assert job.wait(30) == 143
        thread.join(30)
        assert victim.poll() is None  # alive: the job did not kill what it was told
        assert got and json.loads(got[0]) == {"signal": signal.SIGTERM}
    finally:
        for proc in (owner, victim, job):
            proc.kill()
            proc.wait()
        listener.close()
        os.close(name)


# --------------------------------------------------------------------- the job runner


runner_env = run_env  # an owner, a private socket folder, a job's environment


def job(ctx, *args, timeout: float = 60):
    return subprocess.run(
        [sys.executable, "-m", "vlmrobust.launcher", *args], cwd=ctx["cwd"], env=ctx["env"],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def runner_log(ctx) -> str:
    return (ctx["cwd"] / "logs" / "services" / "runner.log").read_text()


def connect_raw(ctx) -> socket.socket:
    (path,) = ctx["folder"].glob("*.runner")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    return sock


def test_a_client_that_says_nothing_holds_up_no_job(runner_env):
    assert job(runner_env, "--version").returncode == 0  # the runner is up
    silent = connect_raw(runner_env)
    ok = job(runner_env, "--version", timeout=20)  # hung for ever before
    assert (ok.returncode, ok.stdout.strip()) == (0, "vlmrobust 0.1.0")
    silent.settimeout(launcher.REQUEST_TIMEOUT_S + 10)
    answer = silent.recv(1000)  # the runner gives up on it
    assert b"no whole request within 10 s" in answer
    assert "refused: no whole request within 10 s" in runner_log(runner_env)


def test_a_4_gb_length_prefix_is_refused_not_allocated(runner_env):
    assert job(runner_env, "--version").returncode == 0
    (runner,) = helper_processes("vlmrobust.launcher", mentions=runner_env["folder"])
    sock = connect_raw(runner_env)
    socket.send_fds(sock, [struct.pack("!I", 0xFFFFFFF0)], [0, 1, 2])
    sock.settimeout(20)
    answer = json.loads(sock.recv(1000))
    assert answer == {"error": f"a request of {0xFFFFFFF0} bytes is over the limit of {8 << 20}"}
    peak_kb = int(
        next(
            line.split()[1]
            for line in Path(f"/proc/{runner}/status").read_text().splitlines()
            if line.startswith("VmHWM:")
        )
    )
    assert peak_kb < 1 << 20  # under 1 GiB: nothing of the 4 GB was allocated
    assert job(runner_env, "--version").returncode == 0


def test_a_job_whose_client_left_is_not_started(runner_env, tmp_path):
    """The client's whole request waits unread (the runner busy: stopped here), then the
    client dies: the runner must not run that job."""
    assert job(runner_env, "--version").returncode == 0
    (runner,) = helper_processes("vlmrobust.launcher", mentions=runner_env["folder"])
    out = tmp_path / "job.out"
    sock = connect_raw(runner_env)
    os.kill(runner, signal.SIGSTOP)
    try:
        request = {"argv": ["--version"], "cwd": str(tmp_path), "env": runner_env["env"]}
        body = json.dumps(request).encode()
        with open(out, "w") as stream:
            fd = stream.fileno()
            socket.send_fds(sock, [struct.pack("!I", len(body)) + body], [fd, fd, fd])
        sock.close()
    finally:
        os.kill(runner, signal.SIGCONT)
    assert wait_until(lambda: "not started (its client" in runner_log(runner_env), 10)
    time.sleep(1)
    assert out.read_text() == ""  # the job did not run


def test_a_started_job_dies_with_its_client(runner_env, tmp_path):
    assert job(runner_env, "--version").returncode == 0
    (runner,) = helper_processes("vlmrobust.launcher", mentions=runner_env["folder"])
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)  # a job that blocks: reading a FIFO nobody writes to
    client = subprocess.Popen(
        [sys.executable, "-m", "vlmrobust.launcher", "check-config", str(fifo)],
        cwd=runner_env["cwd"], env=runner_env["env"],
    )  # fmt: skip
    children = Path(f"/proc/{runner}/task/{runner}/children")
    assert wait_until(lambda: children.read_text().split(), 30)
    client.kill()  # SIGKILL: nothing is forwarded; the runner sees the connection close
    client.wait()
    assert wait_until(lambda: not children.read_text().split(), 15)


def test_one_runner_per_owner(runner_env):
    assert job(runner_env, "--version").returncode == 0
    (first,) = helper_processes("vlmrobust.launcher", mentions=runner_env["folder"])
    (path,) = runner_env["folder"].glob("*.runner")
    second = subprocess.run(
        [sys.executable, "-m", "vlmrobust.launcher", "--serve", str(path),
         str(runner_env["owner"].pid)],
        env=runner_env["env"], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 0
    assert f"another runner (pid {first}) serves pid {runner_env['owner'].pid}" in second.stderr
    assert helper_processes("vlmrobust.launcher", mentions=runner_env["folder"]) == [first]
    assert job(runner_env, "--version").returncode == 0  # the first still serves


def test_jobs_started_together_start_one_runner(runner_env):
    cmd = [sys.executable, "-m", "vlmrobust.launcher", "--version"]
    procs = [
        subprocess.Popen(cmd, cwd=runner_env["cwd"], env=runner_env["env"], stdout=subprocess.PIPE)
        for _ in range(4)
    ]
    assert [p.wait(120) for p in procs] == [0, 0, 0, 0]
    for p in procs:
        p.stdout.close()
    assert len(helper_processes("vlmrobust.launcher", mentions=runner_env["folder"])) == 1


# --------------------------------------------------------------------- the model service


@pytest.fixture
def served(folder, monkeypatch):
    monkeypatch.setenv(processes.SERVICE_DIR_ENV, str(folder))
    server, thread, path = serve_in_thread(EchoBackend(), folder)
    yield server, path
    server.stopping.set()
    thread.join(5)


def test_a_line_with_no_end_is_refused_at_the_limit(served, monkeypatch):
    monkeypatch.setattr(service, "MAX_LINE", 1 << 20, raising=False)
    _, path = served
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        sock.settimeout(30)
        with contextlib.suppress(OSError):  # the service may close while we still send
            for _ in range(4):
                sock.sendall(b"x" * (1 << 19))
        answer = sock.recv(65536)
    assert json.loads(answer) == {"error": f"model service: a message over {1 << 20} bytes"}


def test_a_client_that_says_nothing_is_dropped(served, monkeypatch):
    monkeypatch.setattr(service, "FRAME_TIMEOUT_S", 0.5, raising=False)
    server, path = served
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        sock.settimeout(10)
        answer = sock.recv(65536)
    assert json.loads(answer) == {
        "error": "model service: the peer did not say anything within 0 s"
    }
    assert wait_until(lambda: server.clients == 0, 5)
    # half a message, then silence
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        sock.settimeout(10)
        sock.sendall(b'{"op": "hel')
        answer = sock.recv(65536)
    assert json.loads(answer) == {
        "error": "model service: the peer did not finish its message within 0 s"
    }


def test_a_client_that_never_reads_delays_no_one(served, monkeypatch):
    monkeypatch.setattr(service, "SEND_TIMEOUT_S", 2.0, raising=False)
    server, path = served
    greedy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    greedy.connect(str(path))
    flood = [
        {"key": f"k{i:05d}-" + "x" * 200, "content": [], "max_new_tokens": 4} for i in range(20000)
    ]
    greedy.sendall(json.dumps({"op": "generate", "requests": flood}).encode() + b"\n")
    time.sleep(1)  # its answers fill the socket; it reads none of them
    other = ServiceBackend("echo-model", {"options": {}}, path)
    other.sock.settimeout(20)  # waited for ever before
    results = list(other.generate([request("mine")]))
    assert [(r.key, r.text) for r in results] == [("mine", "<think>looking</think>answer for mine")]
    other.close()
    greedy.close()


def test_a_second_service_for_one_socket_exits_before_loading(folder):
    """A service whose socket name another process holds exits at once (the checkpoint
    here does not exist: loading it would fail with exit code 1)."""
    path = folder / "model.sock"
    name = hold_name(path.with_suffix(".pid"))
    try:
        spec = json.dumps({"backend": "hf", "local_path": str(folder / "no-such-checkpoint")})
        proc = subprocess.run(
            [sys.executable, "-m", service.SERVER_MODULE, "--model", "m", "--spec", spec,
             "--socket", str(path), "--owner", str(os.getpid())],
            env={**tool_env(), "PYTHONPATH": str(REPO / "workflow")},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(name)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"another service holds {path}: exiting" in proc.stderr
    assert not path.exists()
