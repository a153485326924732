"""Small I/O helpers shared by every stage: atomic writes, JSONL, hashing."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any


def _create_temp(path: Path) -> str:
    """Create an empty, new temporary file beside ``path``; its name.

    Created with mode 0666 less the process umask, like any file ``open()`` creates
    (``tempfile.mkstemp`` would make it 0600, and the rename would pass that on).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return str(tmp)
    raise FileExistsError(f"no free temporary file name beside {path}")


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """Open a temporary file beside ``path``; rename it onto ``path`` only on success.

    A job killed half-way leaves at most a ``.tmp`` file that nothing reads, never a
    truncated ``path`` that a rerun would trust. The file keeps the permission bits of
    the file it replaces; a new file gets those the umask gives (0666 & ~umask).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _create_temp(path)
    try:
        with open(tmp, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_write(path, "wb") as fh:
        fh.write(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_write(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def atomic_save_image(image, path: str | os.PathLike, **save_kwargs: Any) -> None:
    """Save a PIL image atomically; the format follows the suffix of ``path``."""
    path = Path(path)
    fmt = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".webp": "WEBP"}.get(
        path.suffix.lower(), "PNG"
    )
    with atomic_write(path, "wb") as fh:
        image.save(fh, format=fmt, **save_kwargs)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> int:
    """Write rows as JSON lines atomically; return the number of rows written."""
    n = 0
    with atomic_write(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def read_utf8(path: str | os.PathLike) -> str:
    """A text file's content; bytes that are not UTF-8 are an error naming the file, the
    line and the column (``data.tsv:7: not UTF-8 text: byte 0xff at column 12``)."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ValueError(
            f"{path}:{line}: not UTF-8 text: byte 0x{data[exc.start]:02x} at column {column} "
            "(save the file as UTF-8)"
        ) from exc


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of each non-blank line of a JSON-lines file (numbered
    from 1, blank lines counted), for readers whose errors name the line; a malformed
    line, or one that is not UTF-8, is an error naming file and line."""
    for lineno, line in enumerate(read_utf8(path).split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from exc
        yield lineno, value


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """Read a JSON-lines file; a malformed line is an error naming file and line."""
    return [row for _, row in iter_jsonl(path)]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def exclusive(path: str | os.PathLike, waiting: Any = None, wait: bool = True) -> Iterator[None]:
    """Hold the lock file ``path`` (an exclusive ``flock``; its pid written in it) for
    the ``with`` block: one holder at a time, on one machine or across the nodes of a
    shared file system whose locks are shared (NFS, Lustre with ``-o flock``, GPFS).
    A second holder waits; ``waiting(pid)`` is called once when it has to (with
    ``wait=False`` it raises :class:`BlockingIOError` instead). The file is removed on
    release; a waiter that then finds its file gone opens the new one."""
    import fcntl

    path = Path(path)
    told = False
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                os.close(fd)
                raise
            if not told and waiting is not None:
                holder = os.read(fd, 32).decode(errors="replace").strip()
                waiting(int(holder) if holder.isdigit() else None)
                told = True
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # released and removed by the holder before we got it: again
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)
