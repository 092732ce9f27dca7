"""``leftovers.terminate``, the one way the broker, the bench's Connect workers and its sink
processes are stopped: a child that obeys SIGTERM exits by it (its own clean-up runs), one that
ignores it is killed once the wait is over, and one that already ended is left alone."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from hudi_sink.shared.runtime.leftovers import terminate

_OBEYS = """
import signal, sys
def bye(*_):
    print("cleaned up", flush=True)
    sys.exit(3)
signal.signal(signal.SIGTERM, bye)
print("ready", flush=True)
signal.pause()
"""
_IGNORES = """
import signal
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("ready", flush=True)
while True:
    signal.pause()
"""


def _started(code: str) -> subprocess.Popen[str]:
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"  # its SIGTERM handler is in place
    return process


def test_a_child_that_obeys_sigterm_exits_by_it() -> None:
    with _started(_OBEYS) as process:
        terminate(process, timeout_s=30)
        assert process.returncode == 3
        assert process.stdout is not None and process.stdout.read().strip() == "cleaned up"


def test_a_child_that_ignores_sigterm_is_killed_after_the_wait() -> None:
    with _started(_IGNORES) as process:
        started = time.monotonic()
        terminate(process, timeout_s=0.5)
        assert process.returncode == -signal.SIGKILL
        assert time.monotonic() - started >= 0.5


def test_a_child_that_already_ended_is_left_alone() -> None:
    with subprocess.Popen([sys.executable, "-c", "raise SystemExit(7)"]) as process:
        process.wait()
        terminate(process, timeout_s=30)
        assert process.returncode == 7
