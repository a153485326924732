"""A private, single-node SLURM cluster for tests.

`start_cluster()` builds a throw-away cluster in a temporary directory:

* its own munge key, socket, pid, seed and log file, served by a `munged` that runs as
  the `munge` user (the machine's own `/etc/munge` and `/run/munge` are not touched);
* a `slurm.conf` for one node (this host, all its CPUs, memory a bit below the total),
  one partition `debug` (the default), no accounting, no cgroups, free TCP ports, and
  every state, spool, pid and log path inside the temporary directory;
* `slurmctld` and `slurmd` in the foreground (`-D`), started with `-f <slurm.conf>`;
* optionally (`gpus=N`) GPUs as generic resources: `GresTypes=gpu`, the node's
  `Gres=gpu:N` and a `gres.conf` naming N stand-in device files (`<root>/dev/gpu<i>`,
  character devices with /dev/null's numbers, as slurmd accepts no other kind: no
  driver, no cgroup device limits here), so `sbatch --gpus=K`
  is accepted, scheduled against N and answered with `CUDA_VISIBLE_DEVICES` (the
  indices of the K devices given, set by slurmd's gres/gpu plugin);
* optionally a node declared bigger than the machine (`cpus=`, `memory_mb=`: what a
  GPU node of the papers' size declares), with `SlurmdParameters=config_overrides` so
  slurmd keeps the declared sizes instead of draining the node. Nothing enforces them
  (no cgroups): they only shape what slurmctld schedules.

Clients (`sinfo`, `sbatch`, `squeue`, Snakemake's SLURM executor) find the cluster
through `SLURM_CONF`: run them with `cluster.env`. `stop_cluster()` cancels what is
still queued, stops the daemons it started (by process id) and removes the directory.

Requirements: Linux, root, and Debian's `slurm-wlm` and `munge` packages
(`.ci/install-slurm.sh` installs them). `missing_requirements()` says what is missing.

Run `python tests/slurm_cluster.py [--gpus N --cpus C --memory-mb M]` to get a cluster
for manual experiments; it prints the `SLURM_CONF` to export and stops the cluster on
Ctrl-C.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

INSTALL_HINT = "install them with `.ci/install-slurm.sh` (as root: apt-get install slurm-wlm munge)"

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sinfo", "sbatch", "squeue", "scancel", "scontrol", "srun")

# Daemons live in /usr/sbin, which is not on every PATH.
_SEARCH_PATH = os.pathsep.join(
    [os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"]
)

#: Set to 1 to keep the cluster directory (configuration and daemon logs) after stopping.
KEEP_ENV = "SLURM_TEST_KEEP"


class ClusterError(RuntimeError):
    """The cluster could not be started; the message says why (with log excerpts)."""


def which(program: str) -> str | None:
    """Path of `program`, also looking in the sbin directories."""
    return shutil.which(program, path=_SEARCH_PATH)


def missing_requirements() -> list[str]:
    """What keeps this machine from running a test cluster (empty when nothing)."""
    problems = []
    if not sys.platform.startswith("linux"):
        problems.append(f"a Linux machine (this is {sys.platform})")
        return problems
    missing = [p for p in DAEMONS + CLIENTS if which(p) is None]
    if missing:
        problems.append(f"the programs {', '.join(missing)}: {INSTALL_HINT}")
    if os.geteuid() != 0:
        problems.append(
            "root (munged has to run as the `munge` user and slurmd as root); "
            "run the tests as root, e.g. in CI or a container"
        )
    try:
        pwd.getpwnam("munge")
    except KeyError:
        problems.append(f"a `munge` system user (the munge package creates it): {INSTALL_HINT}")
    return problems


def free_port() -> int:
    """A TCP port that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_cpus() -> int:
    """The number of CPUs this process may use (what `nproc` prints)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def node_memory_mb() -> int:
    """Memory to declare for the node: 90 % of the total, so slurmd never finds less."""
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                total_mb = int(line.split()[1]) // 1024
                return max(256, int(total_mb * 0.9))
    raise ClusterError("/proc/meminfo has no MemTotal line")


@dataclass
class SlurmCluster:
    """A running test cluster; `env` is what clients need to reach it."""

    root: Path
    hostname: str
    cpus: int
    memory_mb: int
    partition: str = "debug"
    gpus: int = 0
    overrides: bool = False
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    start_seconds: float = 0.0

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def gres_conf(self) -> Path:
        return self.root / "etc" / "gres.conf"

    def gpu_devices(self) -> list[Path]:
        """The stand-in device files of the node's GPUs, in index order."""
        return [self.root / "dev" / f"gpu{i}" for i in range(self.gpus)]

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def env(self) -> dict[str, str]:
        """The current environment plus `SLURM_CONF` and a PATH with the SLURM tools.

        PATH starts with `bin_dir`, whose wrappers set `SLURM_CONF` again: Snakemake's
        slurm-jobstep plugin (0.6.1) removes every `SLURM_*` variable but a few job ids
        before it calls `srun` inside the job, and `srun` without `SLURM_CONF` looks for
        /etc/slurm/slurm.conf, then DNS SRV records, and fails.
        """
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        env["PATH"] = os.pathsep.join([str(self.bin_dir), _SEARCH_PATH])
        # A test started inside a SLURM job must not inherit that job's settings.
        for key in list(env):
            if key.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_")) and key != "SLURM_CONF":
                del env[key]
        return env

    def run(self, *args: str, check: bool = True, timeout: float = 30) -> str:
        """Run a SLURM client against this cluster and return its stdout."""
        proc = subprocess.run(
            list(args), env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise ClusterError(
                f"`{' '.join(args)}` failed with exit code {proc.returncode}: "
                f"{proc.stderr.strip() or proc.stdout.strip()}"
            )
        return proc.stdout

    def node_state(self) -> str:
        """The node's state as `sinfo` reports it ('idle', 'idle*', 'down*', ...)."""
        try:
            out = self.run("sinfo", "--noheader", "--Node", "--format=%T", check=False, timeout=5)
        except subprocess.TimeoutExpired:
            return ""
        return out.strip()

    def job_states(self, job_ids: list[str]) -> dict[str, str]:
        """Job id -> state (COMPLETED, FAILED, ...) for jobs slurmctld still remembers.

        Without accounting, finished jobs stay visible for `MinJobAge` seconds (3600 here).
        """
        out = self.run(
            "squeue",
            "--noheader",
            "--states=all",
            "--format=%i|%T",
            f"--jobs={','.join(job_ids)}",
        )
        return dict(line.split("|", 1) for line in out.split() if "|" in line)

    def job_info(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` as a dict (NumCPUs, TimeLimit, MinMemoryNode, JobState...)."""
        out = self.run("scontrol", "show", "job", "--oneliner", job_id)
        return dict(re.findall(r"([\w:/]+)=(\S*)", out))

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of every daemon log, for error messages."""
        parts = []
        for log in sorted((self.root / "log").glob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.name} ---\n" + "\n".join(text))
        return "\n".join(parts) or "(no daemon logs)"


def parse_jobs(text: str) -> list[dict[str, str]]:
    """`scontrol show job -d --oneliner` as one dict per job. The detail keys name what
    the job got: `GRES` (e.g. `gpu:2(IDX:0-1)`, while it runs) and `CPU_IDs`; the
    request is `TresPerJob` (`gres:gpu:2`) and `TRES`."""
    return [
        dict(re.findall(r"([\w:/]+)=(\S*)", line)) for line in text.splitlines() if "JobId=" in line
    ]


def gpu_indices(gres: str) -> list[int]:
    """The GPU indices of a job's `GRES=gpu:2(IDX:0-1)` detail (`IDX:0,2-3` too)."""
    m = re.search(r"IDX:([\d,\-]+)", gres or "")
    if not m:
        return []
    out: list[int] = []
    for part in m.group(1).split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


class JobRecorder:
    """Keeps the scheduler's word on a run: every `interval` s it asks `scontrol show job
    -d` (all jobs, with what each got) and `sinfo` (the node's state), and appends each
    change to a JSONL file, one `{"t": <unix time>, "job": {...}}` or `{"t", "node"}`
    per line. slurmctld forgets what a finished job got (its GRES detail), so the run's
    records are the ones taken while it ran. A poll that fails (slurmctld restarting)
    is skipped and counted (`failures`)."""

    def __init__(self, cluster: SlurmCluster, path: Path, interval: float = 1.0) -> None:
        self.cluster, self.path, self.interval = cluster, Path(path), interval
        self.failures = 0
        self._last: dict[str, tuple] = {}
        self._node = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> JobRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.poll()  # the last word

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        try:
            jobs = parse_jobs(
                self.cluster.run("scontrol", "show", "job", "-d", "--oneliner", timeout=10)
            )
            node = self.cluster.run("sinfo", "--noheader", "--Node", "--format=%T|%E", timeout=10)
        except (ClusterError, subprocess.TimeoutExpired):
            self.failures += 1
            return
        lines = []
        now = time.time()
        for job in jobs:
            key = tuple(job.get(k) for k in ("JobState", "Reason", "GRES", "NodeList", "Restarts"))
            if self._last.get(job["JobId"]) != key:
                self._last[job["JobId"]] = key
                lines.append({"t": now, "job": job})
        if node.strip() != self._node:
            self._node = node.strip()
            lines.append({"t": now, "node": self._node})
        if lines:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.writelines(json.dumps(line) + "\n" for line in lines)


def read_records(path: Path) -> dict[str, list[dict]]:
    """A recorder's file: `jobs` (job id -> its records in time order, each with `t`)
    and `node` (the node's states in order)."""
    jobs: dict[str, list[dict]] = {}
    nodes = []
    for line in Path(path).read_text().splitlines():
        rec = json.loads(line)
        if "job" in rec:
            jobs.setdefault(rec["job"]["JobId"], []).append({"t": rec["t"], **rec["job"]})
        else:
            nodes.append(rec)
    return {"jobs": jobs, "node": nodes}


def write_config(cluster: SlurmCluster) -> None:
    """Create the directory layout, the munge key and slurm.conf."""
    root = cluster.root
    # munged (as the munge user) has to reach its files below root.
    root.chmod(0o755)
    munge_user = pwd.getpwnam("munge")
    for sub in ("etc", "state", "spool", "log", "run"):
        (root / sub).mkdir(mode=0o755, exist_ok=True)
    munge_dir = root / "munge"
    munge_dir.mkdir(mode=0o700, exist_ok=True)
    key = munge_dir / "munge.key"
    if not key.exists():
        key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    for path in (munge_dir, key):
        os.chown(path, munge_user.pw_uid, munge_user.pw_gid)

    ctld_port, slurmd_port = free_port(), free_port()
    while slurmd_port == ctld_port:
        slurmd_port = free_port()
    host = cluster.hostname
    gres = write_gres(cluster)
    conf = f"""\
# Written by tests/slurm_cluster.py: a private one-node cluster, no accounting.
ClusterName=snaketest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={cluster.munge_socket}
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=3600
KillWait=5
StateSaveLocation={root / "state"}
SlurmdSpoolDir={root / "spool" / "slurmd-%n"}
SlurmctldPidFile={root / "run" / "slurmctld.pid"}
SlurmdPidFile={root / "run" / "slurmd-%n.pid"}
SlurmctldLogFile={root / "log" / "slurmctld.log"}
SlurmdLogFile={root / "log" / "slurmd.log"}
SlurmctldDebug=info
SlurmdDebug=info
{gres["types"]}{gres["overrides"]}NodeName={host} NodeAddr=127.0.0.1 CPUs={cluster.cpus} RealMemory={cluster.memory_mb}{gres["node"]} State=UNKNOWN
PartitionName={cluster.partition} Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""
    cluster.conf.write_text(conf)

    cluster.bin_dir.mkdir(mode=0o755, exist_ok=True)
    for program in CLIENTS:
        wrapper = cluster.bin_dir / program
        wrapper.write_text(
            f'#!/bin/sh\nexport SLURM_CONF="{cluster.conf}"\nexec "{which(program)}" "$@"\n'
        )
        wrapper.chmod(0o755)


def write_gres(cluster: SlurmCluster) -> dict[str, str]:
    """The GPU lines of slurm.conf (and gres.conf with its stand-in device files) when
    the cluster declares GPUs; empty strings when not."""
    lines = {"types": "", "node": "", "overrides": ""}
    if cluster.overrides:
        lines["overrides"] = "SlurmdParameters=config_overrides\n"
    if cluster.gpus <= 0:
        return lines
    (cluster.root / "dev").mkdir(mode=0o755, exist_ok=True)
    null = os.stat("/dev/null").st_rdev  # slurmd wants character devices; nothing opens them
    for device in cluster.gpu_devices():
        if not device.exists():
            os.mknod(device, 0o666 | stat.S_IFCHR, null)
    files = f"{cluster.root / 'dev'}/gpu[0-{cluster.gpus - 1}]"
    cluster.gres_conf.write_text(
        "# Written by tests/slurm_cluster.py: stand-in GPUs (empty files, no driver).\n"
        f"AutoDetect=off\nNodeName={cluster.hostname} Name=gpu File={files}\n"
    )
    lines["types"] = "GresTypes=gpu\n"
    lines["node"] = f" Gres=gpu:{cluster.gpus}"
    return lines


try:
    _LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - no C library to ask
    _LIBC = None


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it when the process that started it dies,
    so a test run that is killed outright leaves no daemons behind (Linux prctl)."""
    if _LIBC is not None:
        _LIBC.prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def _spawn(cluster: SlurmCluster, name: str, args: list[str], **kwargs) -> None:
    log = open(cluster.root / "log" / f"{name}.stdout", "wb")  # noqa: SIM115 - kept by Popen
    try:
        cluster.processes[name] = subprocess.Popen(
            args,
            env=cluster.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C in the terminal goes to pytest, not to them
            preexec_fn=_die_with_parent,
            **kwargs,
        )
    finally:
        log.close()


def _wait(predicate, timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def _check_alive(cluster: SlurmCluster) -> None:
    for name, proc in cluster.processes.items():
        if proc.poll() is not None:
            out = (cluster.root / "log" / f"{name}.stdout").read_text(errors="replace")
            raise ClusterError(
                f"{name} exited with code {proc.returncode}.\n{out.strip()}\n{cluster.log_tail()}"
            )


def start_cluster(
    root: Path | None = None,
    timeout: float = 30.0,
    gpus: int = 0,
    cpus: int | None = None,
    memory_mb: int | None = None,
) -> SlurmCluster:
    """Start munged, slurmctld and slurmd; return once `sinfo` shows the node idle.

    `gpus` declares that many stand-in GPUs (GRES); `cpus` and `memory_mb` declare the
    node bigger than this machine (default: its own CPUs and 90 % of its memory).

    Raises `ClusterError` (after stopping whatever it started) when a requirement is
    missing or the node is not idle within `timeout` seconds.
    """
    problems = missing_requirements()
    if problems:
        raise ClusterError("a SLURM test cluster needs " + "; ".join(problems))
    started = time.monotonic()
    root = Path(root or tempfile.mkdtemp(prefix="slurm-test-"))
    cluster = SlurmCluster(
        root=root,
        hostname=socket.gethostname().split(".")[0],
        cpus=cpus or node_cpus(),
        memory_mb=memory_mb or node_memory_mb(),
        gpus=gpus,
    )
    cluster.overrides = cluster.cpus > node_cpus() or cluster.memory_mb > node_memory_mb()
    try:
        write_config(cluster)
        munge_dir = root / "munge"
        _spawn(
            cluster,
            "munged",
            [
                which("munged"),
                "--foreground",
                "--force",
                f"--socket={cluster.munge_socket}",
                f"--key-file={munge_dir / 'munge.key'}",
                f"--pid-file={munge_dir / 'munged.pid'}",
                f"--seed-file={munge_dir / 'munged.seed'}",
                f"--log-file={munge_dir / 'munged.log'}",
            ],
            user="munge",
            group="munge",
            extra_groups=[],
        )
        if not _wait(lambda: cluster.munge_socket.exists(), timeout=10):
            _check_alive(cluster)
            raise ClusterError(f"munged did not create {cluster.munge_socket} within 10 s")
        conf = str(cluster.conf)
        _spawn(cluster, "slurmctld", [which("slurmctld"), "-D", "-f", conf])
        _spawn(cluster, "slurmd", [which("slurmd"), "-D", "-f", conf])

        def node_idle() -> bool:
            _check_alive(cluster)
            return cluster.node_state() == "idle"

        remaining = timeout - (time.monotonic() - started)
        if not _wait(node_idle, timeout=max(remaining, 1), interval=0.5):
            raise ClusterError(
                f"the node was not idle within {timeout:.0f} s "
                f"(sinfo says {cluster.node_state()!r}).\n{cluster.log_tail()}"
            )
    except BaseException:
        stop_cluster(cluster)
        raise
    cluster.start_seconds = time.monotonic() - started
    return cluster


def restart_slurmctld(cluster: SlurmCluster, down_s: float = 0.0, timeout: float = 30) -> None:
    """Stop slurmctld (SIGTERM: it saves its state), leave it down `down_s` seconds,
    start it again from its saved state (jobs, node) and wait until it answers."""
    _stop(cluster.processes["slurmctld"])
    time.sleep(down_s)
    _spawn(cluster, "slurmctld", [which("slurmctld"), "-D", "-f", str(cluster.conf)])

    def answers() -> bool:
        _check_alive(cluster)
        return bool(cluster.node_state())

    if not _wait(answers, timeout=timeout, interval=0.5):
        raise ClusterError(f"slurmctld did not answer within {timeout:.0f} s\n{cluster.log_tail()}")


def set_node_state(cluster: SlurmCluster, state: str, reason: str = "test") -> None:
    """`scontrol update` the node: `DRAIN` (running jobs go on, no new one starts) or
    `RESUME`."""
    args = ["scontrol", "update", f"NodeName={cluster.hostname}", f"State={state}"]
    cluster.run(*args, *([f"Reason={reason}"] if state.upper() == "DRAIN" else []))


def _processes_using(conf: Path) -> list[int]:
    """Processes that run with our SLURM_CONF (slurmstepd, job steps), except this one."""
    marker = f"SLURM_CONF={conf}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def _stop(proc: subprocess.Popen, timeout: float = 10) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


def stop_cluster(cluster: SlurmCluster) -> None:
    """Cancel remaining jobs, stop the daemons this cluster started, remove its directory."""
    procs = cluster.processes
    if procs.get("slurmctld") and procs["slurmctld"].poll() is None:
        with contextlib.suppress(Exception):
            cluster.run("scancel", f"--user={pwd.getpwuid(os.geteuid()).pw_name}", timeout=10)
            _wait(lambda: not cluster.run("squeue", "--noheader", timeout=5).strip(), timeout=15)
    for name in ("slurmd", "slurmctld"):
        if name in procs:
            _stop(procs[name])
    # Job steps and slurmstepd detach from slurmd; they carry our SLURM_CONF.
    for pid in _processes_using(cluster.conf):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if "munged" in procs:
        _stop(procs["munged"])
    if os.environ.get(KEEP_ENV) == "1":
        print(f"kept the SLURM test cluster directory {cluster.root}", file=sys.stderr)
    else:
        shutil.rmtree(cluster.root, ignore_errors=True)


@contextlib.contextmanager
def running_cluster(timeout: float = 30.0, **sizes) -> Iterator[SlurmCluster]:
    """`with running_cluster() as cluster:` start a cluster and always stop it
    (`sizes`: `gpus`, `cpus`, `memory_mb` of `start_cluster`)."""
    cluster = start_cluster(timeout=timeout, **sizes)
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description="A private one-node SLURM cluster.")
    ap.add_argument("--gpus", type=int, default=0, help="stand-in GPUs (GRES) of the node")
    ap.add_argument("--cpus", type=int, default=None, help="CPUs to declare")
    ap.add_argument("--memory-mb", type=int, default=None, help="memory (MB) to declare")
    args = ap.parse_args(argv)
    sizes = {"gpus": args.gpus, "cpus": args.cpus, "memory_mb": args.memory_mb}
    try:
        with running_cluster(**sizes) as cluster:
            print(f"SLURM test cluster up in {cluster.start_seconds:.1f} s (Ctrl-C stops it):")
            print(f"  export SLURM_CONF={cluster.conf}")
            with contextlib.suppress(KeyboardInterrupt):
                while all(p.poll() is None for p in cluster.processes.values()):
                    time.sleep(1)
                print("a daemon exited:\n" + cluster.log_tail(), file=sys.stderr)
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
