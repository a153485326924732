"""The warm job runner behind the `vlmrobust` command (workflow/vlmrobust/launcher.py):
a job under a run is a child of the runner with the job's streams, folder, environment
and exit status; signals reach it; the runner ends with the run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from .conftest import BIN, REPO, helper_processes, tool_env

VLMROBUST = str(BIN / "vlmrobust")


def runners(folder: Path) -> list[int]:
    """Job runners whose socket is in ``folder``."""
    return helper_processes("vlmrobust.launcher", mentions=folder)


@pytest.fixture
def run_env(tmp_path):
    """An owner process (the run), a private socket folder, and the environment of a job
    under that run."""
    owner = subprocess.Popen(["sleep", "600"])
    folder = Path(tempfile.mkdtemp(prefix="run", dir="/tmp"))
    env = {
        **tool_env(),
        "VLMROBUST_SERVICE_OWNER": str(owner.pid),
        "VLMROBUST_SERVICE_DIR": str(folder),
        "PYTHONPATH": str(REPO / "workflow"),
    }
    yield {"owner": owner, "folder": folder, "env": env, "cwd": tmp_path}
    owner.kill()
    owner.wait()
    for pid in runners(folder):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def vlmrobust(ctx, *args, **kw):
    return subprocess.run(
        [VLMROBUST, *args], cwd=ctx["cwd"], env=ctx["env"], capture_output=True, text=True,
        timeout=120, **kw,
    )  # fmt: skip


def test_a_job_runs_in_the_runner_with_its_streams_folder_and_status(run_env):
    (run_env["cwd"] / "config.yaml").write_text("run_name: x\nmodels: []\nseed: 0\n")
    ok = vlmrobust(run_env, "--version")
    assert (ok.returncode, ok.stdout.strip()) == (0, "vlmrobust 0.1.0")
    pids = runners(run_env["folder"])
    assert len(pids) == 1
    # the job's own folder and environment: a relative path, a variable it reads
    bad = vlmrobust(run_env, "check-config", "missing.yaml")
    assert bad.returncode == 2
    assert "missing.yaml" in bad.stderr
    usage = vlmrobust(run_env, "no-such-command")
    assert usage.returncode == 2 and "invalid choice: 'no-such-command'" in usage.stderr
    assert runners(run_env["folder"]) == pids  # one runner served every job
    log = (run_env["cwd"] / "logs" / "services" / "runner.log").read_text()
    assert "ready in" in log
    # the run ends: the runner ends within a second or two
    run_env["owner"].kill()
    run_env["owner"].wait()
    end = time.monotonic() + 10
    while runners(run_env["folder"]) and time.monotonic() < end:
        time.sleep(0.1)
    assert runners(run_env["folder"]) == []
    assert "ends: its owner (pid" in (run_env["cwd"] / "logs/services/runner.log").read_text()


def test_by_hand_or_switched_off_the_command_runs_in_its_own_process(run_env):
    env = {**run_env["env"], "VLMROBUST_SERVICE_OWNER": "off"}
    proc = subprocess.run([VLMROBUST, "--version"], env=env, capture_output=True, text=True)
    assert proc.stdout.strip() == "vlmrobust 0.1.0"
    assert runners(run_env["folder"]) == []


def children_of(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(c) for c in text.split()]


def test_a_stopped_job_stops_its_child(run_env, tmp_path):
    """Snakemake stops a job with SIGTERM: the job's child in the runner ends too, and
    the command reports the signal as a shell would (128 + 15)."""
    assert vlmrobust(run_env, "--version").returncode == 0  # starts the runner
    (runner,) = runners(run_env["folder"])
    # a job that blocks: reading a FIFO nobody writes to
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)
    job = subprocess.Popen(
        [VLMROBUST, "check-config", str(fifo)], cwd=run_env["cwd"], env=run_env["env"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    end = time.monotonic() + 30
    while not children_of(runner) and time.monotonic() < end:
        time.sleep(0.1)
    (child,) = children_of(runner)
    job.send_signal(signal.SIGTERM)
    job.communicate(timeout=30)
    assert job.returncode == 128 + signal.SIGTERM
    assert children_of(runner) == []
    # a command that runs in its own process even under a run (NOT_FORKED)
    own = vlmrobust(run_env, "review", "--help")
    assert own.returncode == 0 and "usage: vlmrobust review" in own.stdout
    assert children_of(runner) == []
    # the runner is still there for the next job
    assert vlmrobust(run_env, "--version").returncode == 0


def test_a_job_is_told_whose_run_it_is_in(monkeypatch, tmp_path):
    """A forked job runs below the runner, not below Snakemake: its environment names
    the run's Snakemake process, so a model service it starts lives for that run."""
    from vlmrobust.launcher import job_request

    monkeypatch.delenv("VLMROBUST_SERVICE_OWNER", raising=False)
    monkeypatch.chdir(tmp_path)
    request = job_request(["score", "--config", "c.yaml"], owner=4321)
    assert request["argv"] == ["score", "--config", "c.yaml"]
    assert request["cwd"] == str(tmp_path)
    assert request["env"]["VLMROBUST_SERVICE_OWNER"] == "4321"
