"""The engine's watcher (vlmrobust.core.watchdog): when it speaks, what it says, and that
it ends with the engine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from vlmrobust.core.watchdog import Watcher, process_state

from .conftest import tool_env


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_quiet_engine_is_reported_every_period_and_an_answer_resets_it():
    clock = Clock()
    watcher = Watcher(os.getpid(), "engine0.json", after=10, clock=clock)
    clock.now += 9
    assert watcher.report() is None  # quiet for 9 s < 10
    watcher.take("waiting the model's answers to 8 request(s) of c.jsonl")
    clock.now += 2
    first = watcher.report()
    assert "engine engine0.json (pid" in first and "answered nothing for 11 s" in first
    assert (
        "(0 answers so far); it waits on: the model's answers to 8 request(s) of c.jsonl" in first
    )
    assert "(for 2 s)" in first and "the process is running" in first
    clock.now += 5
    assert watcher.report() is None  # said 5 s ago
    clock.now += 5
    assert "answered nothing for 21 s" in watcher.report()
    watcher.take("answered 3")
    clock.now += 9
    assert watcher.report() is None
    clock.now += 1
    assert "answered nothing for 10 s (3 answers so far)" in watcher.report()


def test_the_process_state_in_words():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.2)
        assert process_state(proc.pid).startswith("sleeping")
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(0.2)
        assert process_state(proc.pid) == (
            f"stopped (SIGSTOP or a suspended terminal: kill -CONT {proc.pid} continues it)"
        )
    finally:
        proc.kill()
        proc.wait()
    assert process_state(proc.pid) == "gone"


def test_the_watcher_speaks_while_its_engine_is_quiet_and_ends_with_it(tmp_path):
    """An engine process (here a script) that starts its watcher, says what it waits
    on and sleeps: the watcher's lines reach the engine's stderr, and the watcher ends
    when the engine does."""
    script = (
        "import time\n"
        "from vlmrobust.core import watchdog\n"
        "w = watchdog.start('plan.json', 0.3)\n"
        "watchdog.waiting('the lock of x (held by pid 1)')\n"
        "time.sleep(1.2)\n"
        "print('watcher', w.pid, flush=True)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=tool_env(),
        timeout=60,
    )  # fmt: skip
    lines = [line for line in proc.stderr.splitlines() if "watchdog:" in line]
    assert 2 <= len(lines) <= 5, proc.stderr
    assert all("it waits on: the lock of x (held by pid 1)" in line for line in lines)
    watcher = int(proc.stdout.split()[-1])
    time.sleep(0.5)
    assert process_state(watcher) in ("gone", "a zombie (it has ended)")
