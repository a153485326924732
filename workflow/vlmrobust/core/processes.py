"""The processes of a run: which Snakemake process a job runs under (its *owner*),
whether a process lives, and the private folder of the run's sockets.

Long-lived helpers of a run (model services, the warm job runner) live as long as
their owner: the Snakemake process above the job that started them. They talk to the
run's jobs over Unix sockets in a folder only this user can use, and trust no one
else (docs/architecture.md, "What the services trust"):

- the folder is checked, never followed: a real directory (not a symbolic link) owned
  by this user, mode 0700, whose parents only this user or root can change
  (:func:`private_folder`); a folder that fails is refused, and the default location
  falls back to the next candidate (:func:`service_dir`);
- every connection checks its peer with SO_PEERCRED: the same uid, and where the peer
  is a known process (the runner), its pid (:func:`check_peer`);
- a socket appears at its name only once it listens (:func:`listen_at`), and one
  process holds a socket's name for its whole life (:func:`hold_name`): a second
  server for the same name exits instead of taking it over.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import stat
import struct
from pathlib import Path

#: Where sockets live: $VLMROBUST_SERVICE_DIR, else a private folder in
#: $XDG_RUNTIME_DIR, /tmp or the home folder (a Unix socket path is limited to about
#: 100 bytes, so not under a deep work folder).
SERVICE_DIR_ENV = "VLMROBUST_SERVICE_DIR"
#: The process services live for: a pid, or ``off`` (each job loads its own model).
#: Unset: the nearest Snakemake process above the job (none: the job loads its own).
OWNER_ENV = "VLMROBUST_SERVICE_OWNER"
#: How long a model service or the job runner waits unused before it stops, in seconds
#: (a run's services: config ``service.idle_s``; either also ends with its owner).
IDLE_S = 900.0
#: The folder the default socket folder is made in when $XDG_RUNTIME_DIR is not usable.
TMP_BASE = Path("/tmp")
#: The longest path of a Unix socket (sun_path holds 108 bytes with the final NUL); the
#: names in the folder are at most this long.
SOCKET_PATH_MAX = 107
SOCKET_NAME_MAX = 40


_WARNED: set[tuple[str, ...]] = set()  # folders passed over, said once per process


class UnsafeFolderError(PermissionError):
    """A socket folder that another user could plant, read or change."""


class UntrustedPeerError(RuntimeError):
    """The process at the other end of a socket is not who it must be."""


def service_dir() -> Path:
    """The private folder of this user's sockets.

    $VLMROBUST_SERVICE_DIR when set (made if missing; refused, with the reason, if it is
    not private). Else the first of ``$XDG_RUNTIME_DIR/vlmrobust``,
    ``/tmp/vlmrobust-<uid>`` and ``~/.cache/vlmrobust/sockets`` that is (or can be made)
    private: a name in /tmp that another user created first is passed over, not used
    and not a denial of service."""
    explicit = os.environ.get(SERVICE_DIR_ENV)
    if explicit:
        try:
            return private_folder(Path(explicit), parents=True)
        except UnsafeFolderError as exc:
            raise UnsafeFolderError(f"${SERVICE_DIR_ENV}: {exc}") from None
    problems = []
    for folder in _default_folders():
        try:
            chosen = private_folder(folder, parents=folder.parent != TMP_BASE)
        except (UnsafeFolderError, OSError) as exc:
            problems.append(str(exc))
            continue
        if problems and tuple(problems) not in _WARNED:
            _WARNED.add(tuple(problems))
            logging.getLogger(__name__).warning(
                "socket folder %s (passed over: %s)", chosen, "; ".join(problems)
            )
        return chosen
    raise UnsafeFolderError(
        "no private folder for the run's sockets ("
        + "; ".join(problems)
        + f"): set ${SERVICE_DIR_ENV} to a folder only you can use"
    )


def _default_folders() -> list[Path]:
    folders = []
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_absolute():
        folders.append(Path(runtime) / "vlmrobust")
    folders.append(TMP_BASE / f"vlmrobust-{os.getuid()}")
    with contextlib.suppress(RuntimeError, KeyError):  # no home folder: not a candidate
        folders.append(Path.home() / ".cache" / "vlmrobust" / "sockets")
    return folders


def private_folder(folder: Path, *, parents: bool = False) -> Path:
    """``folder``, made (mode 0700) if missing, after checking that only this user can
    use it: a real directory, not a symbolic link, owned by this user, not writable by
    anyone else (a folder of ours with mode 0750 is narrowed to 0700), below parents
    that only this user or root can change. Raises :class:`UnsafeFolderError` naming
    the folder and the reason."""
    folder = Path(os.path.abspath(folder))
    if len(str(folder)) + 1 + SOCKET_NAME_MAX > SOCKET_PATH_MAX:
        raise UnsafeFolderError(f"{folder}: too long for a socket path")
    if parents:
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    check_parents(folder.parent)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)  # made now: ours, and the umask can only narrow it
    st = os.lstat(folder)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeFolderError(f"{folder} is a symbolic link (to {os.readlink(folder)})")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeFolderError(f"{folder} is not a folder")
    if st.st_uid != os.getuid():
        raise UnsafeFolderError(
            f"{folder} belongs to uid {st.st_uid}, not to this user (uid {os.getuid()})"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        raise UnsafeFolderError(f"{folder} can be written by others (mode {mode:04o})")
    if mode != 0o700:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            if (os.fstat(fd).st_ino, os.fstat(fd).st_dev) != (st.st_ino, st.st_dev):
                raise UnsafeFolderError(f"{folder} was replaced while being checked")
            os.fchmod(fd, 0o700)
        finally:
            os.close(fd)
    return folder


def check_parents(folder: Path) -> None:
    """Each folder from ``/`` down to ``folder`` (symbolic links resolved) belongs to
    root or this user and is writable by no one else, unless sticky (as /tmp is: there
    a name can be taken first, but not renamed or removed by another user)."""
    real = Path(os.path.realpath(folder))
    for part in [*reversed(real.parents), real]:
        st = os.stat(part)
        if st.st_uid not in (0, os.getuid()):
            raise UnsafeFolderError(f"{part} (above the socket folder) belongs to uid {st.st_uid}")
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            raise UnsafeFolderError(
                f"{part} (above the socket folder) can be written by others "
                f"(mode {stat.S_IMODE(st.st_mode):04o})"
            )


# --------------------------------------------------------------------- sockets


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket, from the
    kernel (SO_PEERCRED): what the peer was when it connected or listened, not what it
    says."""
    size = struct.calcsize("3i")
    return struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, size))


def check_peer(sock: socket.socket, what: str, pid: int | None = None) -> int:
    """The peer's pid, after checking it runs as this user (and is process ``pid``,
    when given); else :class:`UntrustedPeerError` naming ``what``."""
    peer_pid, uid, _ = peer_credentials(sock)
    if uid != os.getuid():
        raise UntrustedPeerError(
            f"{what}: the peer runs as uid {uid}, not as this user ({os.getuid()})"
        )
    if pid is not None and peer_pid != pid:
        raise UntrustedPeerError(f"{what}: the peer is pid {peer_pid}, not the expected pid {pid}")
    return peer_pid


def listen_at(path: Path, backlog: int = 64) -> tuple[socket.socket, int]:
    """A listening socket (mode 0600) that appears at ``path`` only once it listens:
    bound under a temporary name and renamed over ``path``. Returns it and the inode
    of its file (:func:`remove_if_ours`)."""
    tmp = path.with_name(f"{path.stem[:12]}.{os.getpid()}.new")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(str(tmp))
    finally:
        os.umask(old)
    listener.listen(backlog)
    inode = os.lstat(tmp).st_ino
    os.replace(tmp, path)
    return listener, inode


def remove_if_ours(path: Path, inode: int) -> None:
    """Remove ``path`` if it is still the file :func:`listen_at` made (inode)."""
    with contextlib.suppress(FileNotFoundError):
        if os.lstat(path).st_ino == inode:
            path.unlink()


def hold_name(path: Path) -> int | None:
    """Hold the name of a socket for this process's life: an exclusive lock on the file
    ``path`` (its pid written in it). None when another live process holds it. The
    descriptor is inheritable by no program; a forked child must close it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return fd


def name_holder(path: Path) -> int | None:
    """The pid of the live process holding the name ``path`` (:func:`hold_name`), or
    None when no process holds it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:  # held: read who holds it
            text = os.read(fd, 32).decode(errors="replace").strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by this user only (never through a link)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)


# --------------------------------------------------------------------- processes


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces
    return int(stat.rsplit(")", 1)[1].split()[1])


def is_snakemake(argv: list[str]) -> bool:
    """A Snakemake process: ``.../snakemake ...`` or ``python -m snakemake ...``."""
    for i, arg in enumerate(argv[:3]):
        if Path(arg).name == "snakemake" or (arg == "-m" and argv[i + 1 : i + 2] == ["snakemake"]):
            return True
    return False


def find_owner() -> int | None:
    """The process a service started now would live for: $VLMROBUST_SERVICE_OWNER (a
    pid; ``off`` or ``0``: none), else the nearest Snakemake process above this one
    (the run's, or a SLURM job's), else None (a job run by hand loads its own model)."""
    value = os.environ.get(OWNER_ENV, "").strip()
    if value:
        if value.lower() in {"off", "0", "none", "false"}:
            return None
        if not value.isdigit():
            raise ValueError(f"${OWNER_ENV}: {value!r} is not a process id or 'off'")
        return int(value)
    pid = os.getppid()
    while pid and pid > 1:
        if is_snakemake(_cmdline(pid)):
            return pid
        pid = _parent(pid) or 0
    return None


def allocation() -> str | None:
    """Where this process runs on a SLURM cluster, for its log: the SLURM job (and
    step), the host and the devices it was given (``CUDA_VISIBLE_DEVICES``, set by
    slurmd for the job's GPUs); None outside SLURM."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    step = os.environ.get("SLURM_STEP_ID")
    devices = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    where = f"SLURM job {job}" + (f" step {step}" if step else "")
    return f"{where} on {socket.gethostname()}, CUDA_VISIBLE_DEVICES={devices!r}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (ended, not yet reaped) is gone for our purpose
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state != "Z"
