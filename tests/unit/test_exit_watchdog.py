"""The hard bound on a service's exit (``shared.runtime.exit_watchdog``, ``shared.runtime.runner``) and the
daemon threads Spark calls run on (``shared.runtime.threads``).

Before them, a participant SIGTERMed while a worker thread was inside a call Python cannot
interrupt (a SparkSession still starting, a Spark job) lived on until that call returned:
``asyncio.run`` joins the default executor's threads without a bound on Python 3.11.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from eventually import eventually

from hudi_sink.shared.runtime.exit_watchdog import ExitWatchdog
from hudi_sink.shared.runtime.threads import in_daemon_thread

ROOT = Path(__file__).resolve().parents[2]

# A service whose routine waits in a default-executor thread that never returns (what a
# py4j call inside a hung Spark job looks like to Python), and whose run returns at once
# when stop is asked: only the watchdog can end this process.
STUCK_SERVICE = textwrap.dedent("""
    import asyncio, sys, threading
    from fastapi import FastAPI
    from hudi_sink.shared.runtime.logs import configure_logging
    from hudi_sink.shared.runtime.runner import serve_service

    class Stuck:
        name = "stuck"

        def __init__(self) -> None:
            self.stop = asyncio.Event()

        async def run(self) -> None:
            blocked = asyncio.ensure_future(asyncio.to_thread(threading.Event().wait))
            print("running", flush=True)
            await self.stop.wait()
            blocked.cancel()

        def shutdown(self) -> None:
            self.stop.set()

        def admin_app(self) -> FastAPI:
            return FastAPI()

    configure_logging()
    sys.exit(asyncio.run(serve_service(Stuck(), "127.0.0.1", 0,
                                       shutdown_timeout_s=0.5, exit_margin_s=0.5)))
""")


def test_a_process_stuck_in_a_thread_exits_within_the_bound_after_sigterm() -> None:
    process = subprocess.Popen([sys.executable, "-c", STUCK_SERVICE], cwd=ROOT, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert process.stdout is not None
        for line in process.stdout:  # the admin app's line first, then the service's
            if line.strip() == "running":  # its thread is blocked now
                break
        asked = time.monotonic()
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=30)
        took = time.monotonic() - asked
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert took < 10, took  # deadline 1 s; without the watchdog: never
    assert "stuck did not exit within 1.0 s of SIGTERM" in output, output
    assert "forcing exit with code 0" in output, output  # the service itself stopped cleanly
    assert process.returncode == 0


def test_the_watchdog_fires_once_after_its_deadline_with_the_settled_code(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exits: list[int] = []
    fired = threading.Event()

    def force_exit(code: int) -> None:
        exits.append(code)
        fired.set()

    watchdog = ExitWatchdog("svc", 0.2, force_exit=force_exit)
    assert not watchdog.armed
    watchdog.settle(3)
    asked = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="hudi_sink.runner"):
        watchdog.arm("SIGTERM")
        watchdog.arm("the service's return")  # already armed: no second timer
        timers = [t for t in threading.enumerate() if t.name == "svc-exit-watchdog"]
        assert len(timers) == 1 and timers[0].daemon
        assert fired.wait(5)
        took = time.monotonic() - asked
        timers[0].join(5)
    assert took >= 0.2
    assert exits == [3]
    assert "svc did not exit within 0.2 s of SIGTERM" in caplog.text


@pytest.mark.timeout(20)
def test_a_signal_arriving_while_the_watchdog_arms_does_not_freeze_the_main_thread() -> None:
    """A SIGTERM handler runs in the main thread, possibly while that thread is inside
    ``arm`` (the service returned, or a first signal's handler): it must return at once,
    and the arming under way still starts the timer."""
    exits: list[int] = []
    watchdog = ExitWatchdog("nested", 0.1, force_exit=exits.append)
    previous = signal.signal(signal.SIGUSR1, lambda *_: watchdog.arm("SIGUSR1"))
    try:
        with watchdog._lock:  # the main thread is inside arm when the signal comes
            signal.raise_signal(signal.SIGUSR1)
        assert not watchdog.armed  # the nested call stepped aside
        watchdog.arm("the service's return")
    finally:
        signal.signal(signal.SIGUSR1, previous)
    eventually(lambda: exits, 5, "the watchdog's forced exit", every_s=0.02)
    assert exits == [1]


async def test_a_daemon_thread_call_returns_its_result_or_raises() -> None:
    assert await in_daemon_thread(sum, [1, 2, 3]) == 6
    with pytest.raises(ZeroDivisionError):
        await in_daemon_thread(lambda: 1 / 0)


async def test_cancelling_the_await_abandons_the_call_on_a_daemon_thread() -> None:
    release = threading.Event()
    task = asyncio.ensure_future(in_daemon_thread(release.wait))
    await asyncio.sleep(0)  # the thread has started
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    stuck = [t for t in threading.enumerate() if t.name.startswith("daemon-")]
    assert stuck and all(t.daemon for t in stuck)  # the process would not wait for it
    release.set()
