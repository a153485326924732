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


def environment_python(
    env: str | None, *, who: str, setting: str, make: str, check: bool = True
) -> str:
    """The Python of another software environment: ``<env>/bin/python``, or ``python``
    on PATH when ``env`` is None. A missing environment is a
    :class:`~vlmrobust.core.config.ConfigError` naming ``who``, the ``setting`` and how
    to ``make`` it; with ``check`` False its path is returned all the same (a command
    built before the environment need exist)."""
    from .config import ConfigError

    if env is None:
        return "python"
    path = Path(env) / "bin" / "python"
    if check and not path.exists():
        raise ConfigError(
            f"{who}: its jobs run in the environment {setting} = {env!r}, and {path} "
            f"does not exist: make it with `{make}`, or point {setting} at one (null: "
            "the python on PATH)"
        )
    return str(path)


def environment_cli(env: str | None, package_root: Path) -> str:
    """The shell words that run ``vlmrobust`` in another environment
    (:func:`environment_python`) with this repository's package (``package_root``, the
    folder holding ``vlmrobust``) first on PYTHONPATH. Building them does not need the
    environment: the workflow checks it only before a job that runs in it starts
    (``vlmrobust.plan.hooks.check_vllm_environment``, docs/vllm.md)."""
    import shlex

    python = environment_python(env, who="", setting="", make="", check=False)
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


def live_slurm_jobs(
    folder: str | os.PathLike | None = None, states: str = LIVE_STATES
) -> dict[str, str]:
    """This user's SLURM jobs in ``states`` (default: still queued or running): job id
    -> working folder (all of them, or those started in ``folder``)."""
    if shutil.which("squeue") is None:
        return {}
    out = subprocess.run(
        ["squeue", "--me", "--noheader", "--format=%i|%Z", f"--states={states}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    jobs = dict(line.split("|", 1) for line in out.stdout.split("\n") if "|" in line)
    if folder is not None:
        here = os.path.realpath(folder)
        jobs = {j: d for j, d in jobs.items() if os.path.realpath(d.strip()) == here}
    return jobs


def cancel_orphans(
    folder: str | os.PathLike,
    recorded: Iterable[str] = (),
    timeout: float = 300.0,
    states: str = LIVE_STATES,
) -> list[str]:
    """Cancel the SLURM jobs (in ``states``) an earlier, killed Snakemake of ``folder``
    left, and wait until they are gone; the jobs cancelled, in id order.

    Called when a Snakemake run starts in ``folder`` and before it submits anything, so
    every live job of this user started in ``folder`` is an earlier run's (Snakemake's
    lock on the folder keeps two runs out of it: the earlier one is dead, or
    ``--unlock`` would not have been needed), and so is every job id its
    incomplete-output markers ``recorded`` that SLURM still runs. The markers alone miss
    the group jobs whose inner Snakemake had started: it rewrites the markers of the
    jobs it runs, without the SLURM id. This run is about to make the same outputs
    again; left running, those jobs would hold GPUs beside this run's new allocations
    and write the same shards (one writer at a time: the second waits). A cancelled job
    removes the outputs it was making, so the run must look at its files only after
    this returns (the workflow calls it before the DAG is built, where it can). Their
    partial rows stay, and this run's jobs resume from them."""
    recorded = {str(j) for j in recorded}
    live = live_slurm_jobs(states=states)
    here = live_slurm_jobs(folder, states) if live else {}
    alive = sorted(set(here) | (recorded & set(live)), key=int)
    if not alive:
        return []
    subprocess.run(["scancel", *alive], capture_output=True, text=True, timeout=60)
    end = time.monotonic() + timeout
    while set(alive) & set(live_slurm_jobs()) and time.monotonic() < end:
        time.sleep(2)
    return alive


def allocation() -> str | None:
    """Where this process runs on a SLURM cluster, for its log: the SLURM job (and
    step), the host and the devices it was given (``CUDA_VISIBLE_DEVICES``, set by
    slurmd for the job's GPUs); None outside SLURM."""
    import socket

    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    step = os.environ.get("SLURM_STEP_ID")
    devices = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    where = f"SLURM job {job}" + (f" step {step}" if step else "")
    return f"{where} on {socket.gethostname()}, CUDA_VISIBLE_DEVICES={devices!r}"
