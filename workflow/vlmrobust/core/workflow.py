"""Support for the Snakefile (kept here so the rule files stay declarative)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

from .io import atomic_write_text


def ensure_cli_on_path() -> None:
    """Make the ``vlmrobust`` script reachable by the rules' shell commands.

    When snakemake runs from a virtual environment that is not activated
    (``.venv/bin/snakemake``), its scripts are not on PATH; conda environments, when
    used, put their own first.
    """
    if shutil.which("vlmrobust") is None:
        os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"


def environment_python(env: str | None, *, who: str, setting: str, make: str) -> str:
    """The Python of another software environment: ``<env>/bin/python``, or ``python``
    on PATH when ``env`` is None. A missing environment is a
    :class:`~vlmrobust.core.config.ConfigError` naming ``who``, the ``setting`` and how
    to ``make`` it."""
    from .config import ConfigError

    if env is None:
        return "python"
    path = Path(env) / "bin" / "python"
    if not path.exists():
        raise ConfigError(
            f"{who}: its jobs run in the environment {setting} = {env!r}, and {path} "
            f"does not exist: make it with `{make}`, or point {setting} at one (null: "
            "the python on PATH)"
        )
    return str(path)


def environment_cli(
    env: str | None, package_root: Path, *, who: str, setting: str, make: str
) -> str:
    """The shell words that run ``vlmrobust`` in another environment
    (:func:`environment_python`) with this repository's package (``package_root``, the
    folder holding ``vlmrobust``) first on PYTHONPATH."""
    import shlex

    python = environment_python(env, who=who, setting=setting, make=make)
    root = shlex.quote(str(package_root))
    return (
        f'env PYTHONPATH={root}"${{PYTHONPATH:+:$PYTHONPATH}}" {shlex.quote(python)} -m vlmrobust'
    )


def alternation(names: Iterable[str]) -> str:
    """A regular expression matching exactly one of ``names`` (wildcard constraints)."""
    names = list(names)
    return "|".join(re.escape(n) for n in names) if names else "(?!)"


def file_listing(files: Iterable[str]) -> str:
    """``files`` one per line, each with its size in bytes and its modification time in
    nanoseconds (tab-separated, under a header): what Snakemake would compare of them."""
    lines = ["path\tbytes\tmtime_ns"]
    for name in files:
        try:
            st = os.stat(name)
        except FileNotFoundError:  # removed since it was found: not there to read
            continue
        lines.append(f"{name}\t{st.st_size}\t{st.st_mtime_ns}")
    return "\n".join(lines) + "\n"


def update_listing(listing: str | Path, files: Iterable[str]) -> bool:
    """Write the :func:`file_listing` of ``files`` to ``listing`` when its text differs
    from the file's (or there is none); True when written.

    A job with the listing as its input in place of the files then reruns exactly when
    one of them is edited, added or removed (the listing is newer than the job's outputs,
    and its content differs from the one the job last ran with), while the dry run and
    the job's messages name one file instead of thousands. Called when the DAG is built,
    so the listing is up to date before Snakemake compares it; a rewrite is atomic.
    """
    text = file_listing(files)
    path = Path(listing)
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    atomic_write_text(path, text)
    return True


#: SLURM job states of a job that still holds (or waits for) an allocation.
LIVE_STATES = "PENDING,CONFIGURING,RUNNING,COMPLETING,SUSPENDED,REQUEUED,RESIZING"


def live_slurm_jobs(job_ids: Iterable[str]) -> list[str]:
    """Those of ``job_ids`` that SLURM still has queued or running (this user's)."""
    wanted = {str(j) for j in job_ids}
    if not wanted or shutil.which("squeue") is None:
        return []
    out = subprocess.run(
        ["squeue", "--me", "--noheader", "--format=%i", f"--states={LIVE_STATES}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return sorted(wanted & set(out.stdout.split()), key=int)


def cancel_orphans(job_ids: Iterable[str], timeout: float = 300.0) -> list[str]:
    """Cancel those of ``job_ids`` SLURM still runs, and wait until they are gone.

    The ids are those an earlier Snakemake of this folder recorded for outputs it left
    incomplete (it was killed: ``kill -9``, a lost login session). This run is about to
    make the same outputs again; the jobs that still make them are a dead run's (a live
    one would hold the folder's lock on them), and left running they would write the
    same shards and, when they fail, remove outputs this run has made. Their partial
    rows stay, and this run's jobs resume from them. Returns the jobs cancelled."""
    alive = live_slurm_jobs(job_ids)
    if not alive:
        return []
    subprocess.run(["scancel", *alive], capture_output=True, text=True, timeout=60)
    end = time.monotonic() + timeout
    while live_slurm_jobs(alive) and time.monotonic() < end:
        time.sleep(2)
    return alive
