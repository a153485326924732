"""The processes of a run: which Snakemake process a job runs under (its *owner*),
whether a process lives, and the private folder of the run's sockets.

Long-lived helpers of a run (model services, the warm job runner) live as long as
their owner: the Snakemake process above the job that started them.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Where sockets live: $VLMROBUST_SERVICE_DIR, else a private folder in /tmp (a Unix
#: socket path is limited to about 100 bytes, so not under a deep work folder).
SERVICE_DIR_ENV = "VLMROBUST_SERVICE_DIR"
#: The process services live for: a pid, or ``off`` (each job loads its own model).
#: Unset: the nearest Snakemake process above the job (none: the job loads its own).
OWNER_ENV = "VLMROBUST_SERVICE_OWNER"
#: How long a model service or the job runner waits unused before it stops, in seconds
#: (a run's services: config ``service.idle_s``; either also ends with its owner).
IDLE_S = 900.0


def service_dir() -> Path:
    base = os.environ.get(SERVICE_DIR_ENV)
    folder = Path(base) if base else Path("/tmp") / f"vlmrobust-{os.getuid()}"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    return folder


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
