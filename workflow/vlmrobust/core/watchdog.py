"""An engine's watchdog: a quiet engine says in its log that it waits, and on what.

An engine job (a local VLM's or a local LLM's) can wait a long time on one thing: the
model loading, one generate call of a large pooled round, the lock of a shard another
job writes. It can also stop making progress for good: a process stopped by SIGSTOP (or
a suspended terminal), a driver that hangs. On a cluster the job's runtime limit ends it
in the end; on a workstation nothing does, and the log was silent.

So each engine starts a watcher (:func:`start`): a small process of its own (the
standard library only; ``python -m vlmrobust.core.watchdog``) that the engine tells,
through a pipe, what it waits on (:func:`waiting`) and when it has answered a request
(:func:`answered`). When the engine has answered nothing for ``after`` seconds (config
``service.wait_log_s``), the watcher writes one line to the engine's log (its stderr),
and again every ``after`` seconds while the quiet lasts::

    watchdog: engine results/engines/m/phase0/engine0.json (pid 4242) has answered
    nothing for 600 s (57 answers so far); it waits on: the model's answers to 64
    request(s) of ... (for 598 s); the process is stopped (SIGSTOP: kill -CONT 4242)

It is a process, not a thread, because a stopped engine runs none of its threads. It
ends when the engine ends (its end of the pipe closes, however the engine ended), and
never holds the engine up: a message that finds the pipe full is dropped.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

#: the process states of /proc/<pid>/stat, in words
STATES = {
    "R": "running",
    "S": "sleeping (waiting for an event)",
    "D": "in uninterruptible sleep (waiting for a device or the file system)",
    "T": "stopped (SIGSTOP or a suspended terminal: kill -CONT {pid} continues it)",
    "t": "stopped by a debugger",
    "Z": "a zombie (it has ended)",
}

_PIPE: dict[str, int | None] = {"fd": None}
_LOCK = threading.Lock()


def start(label: str, after: float) -> subprocess.Popen | None:
    """Start the watcher of this process (the engine) named ``label``; ``after`` <= 0:
    none. Returns the watcher's process."""
    if after <= 0:
        return None
    read, write = os.pipe()
    cmd = [sys.executable, "-m", "vlmrobust.core.watchdog"]
    args = ["--pid", str(os.getpid()), "--after", str(after), "--label", label]
    proc = subprocess.Popen([*cmd, *args], stdin=read, stdout=sys.stderr, close_fds=True)
    os.close(read)
    os.set_blocking(write, False)
    _PIPE["fd"] = write
    return proc


def stop(proc: subprocess.Popen | None) -> None:
    """Close the pipe (the watcher ends) and reap the watcher."""
    fd, _PIPE["fd"] = _PIPE["fd"], None
    if fd is not None:
        os.close(fd)
    if proc is not None:
        proc.wait(timeout=30)


def _send(line: str) -> None:
    fd = _PIPE["fd"]
    if fd is None:
        return
    data = (line.replace("\n", " ")[:400] + "\n").encode("utf-8", "replace")
    # never hold the engine up for its watcher: a full pipe drops the line
    with _LOCK, contextlib.suppress(OSError):
        os.write(fd, data)


def waiting(what: str) -> None:
    """The engine waits on ``what`` from now on (no-op without a watcher)."""
    _send(f"waiting {what}")


def answered(n: int = 1) -> None:
    """The engine has answered ``n`` more requests (no-op without a watcher)."""
    _send(f"answered {n}")


def process_state(pid: int) -> str:
    """What /proc says the process is doing, in words."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return "gone"
    code = stat.rsplit(")", 1)[-1].split()[0]
    return STATES.get(code, f"in state {code}").format(pid=pid)


class Watcher:
    """The watcher's state: what the engine said last, and when it last answered."""

    def __init__(self, pid: int, label: str, after: float, clock=time.monotonic):
        self.pid, self.label, self.after, self.clock = pid, label, after, clock
        now = clock()
        self.answers, self.last_answer, self.last_report = 0, now, None
        self.what, self.since = "its start (reading its plan)", now

    def take(self, line: str) -> None:
        kind, _, rest = line.strip().partition(" ")
        now = self.clock()
        if kind == "answered":
            self.answers += int(rest or 1)
            self.last_answer, self.last_report = now, None
        elif kind == "waiting":
            self.what, self.since = rest, now

    def report(self) -> str | None:
        """The line to log now, or None (not quiet long enough, or said recently)."""
        now = self.clock()
        quiet = now - self.last_answer
        due = self.last_report is None or now - self.last_report >= self.after
        if quiet < self.after or not due:
            return None
        self.last_report = now
        return (
            f"{time.strftime('%Y-%m-%d %H:%M:%S')} watchdog: engine {self.label} "
            f"(pid {self.pid}) has answered nothing for {quiet:.0f} s ({self.answers} "
            f"answers so far); it waits on: {self.what} (for {now - self.since:.0f} s); "
            f"the process is {process_state(self.pid)}"
        )


def watch(pid: int, label: str, after: float) -> None:
    """The watcher's loop: read the engine's lines, report quiet spells, end at EOF."""
    watcher = Watcher(pid, label, after)
    fd = sys.stdin.fileno()
    tick = max(0.05, min(1.0, after / 4))
    pending = b""
    while True:
        ready, _, _ = select.select([fd], [], [], tick)
        if ready:
            data = os.read(fd, 1 << 16)
            if not data:
                return  # the engine ended
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                watcher.take(line.decode("utf-8", "replace"))
        text = watcher.report()
        if text:
            print(text, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--after", type=float, required=True)
    parser.add_argument("--label", required=True)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        watch(args.pid, args.label, args.after)


if __name__ == "__main__":
    main()
