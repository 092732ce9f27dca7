"""Child processes must not outlive the interpreter that started them.

The development broker, a test session's Kafka nodes and the bench's Kafka Connect workers are
child processes their caller is meant to stop. An interpreter that exits without stopping one
(an exception, Ctrl-C, a test session cut short) would leave it running, holding ports and
memory. Each registers how to stop it with :func:`stop_at_exit` once started, and
:func:`forget` once stopped; one ``atexit`` hook runs what is left, each step on its own (one
failing stop does not keep the others from running). :func:`terminate` is how each of them
is stopped: asked first, killed when it does not go in time.
"""

from __future__ import annotations

import atexit
import contextlib
import subprocess
from collections.abc import Callable
from typing import Any

__all__ = ["stop_at_exit", "forget", "terminate"]

_leftovers: dict[int, Callable[[], object]] = {}
"""Stop callbacks of what is still running, by the owner's identity."""


def stop_at_exit(owner: object, stop: Callable[[], object]) -> None:
    """Run ``stop`` at interpreter exit unless :func:`forget` is called for ``owner`` first."""
    _leftovers[id(owner)] = stop


def forget(owner: object) -> None:
    """``owner`` was stopped: nothing to do for it at exit."""
    _leftovers.pop(id(owner), None)


@atexit.register
def _stop_leftovers() -> None:
    for stop in list(_leftovers.values()):
        with contextlib.suppress(Exception):
            stop()
    _leftovers.clear()


def terminate(process: subprocess.Popen[Any], timeout_s: float) -> None:
    """SIGTERM (the child stops cleanly), SIGKILL after ``timeout_s``; returns once it has
    exited and is reaped. Nothing to do for a process that already ended. Blocking: async
    callers run it in a worker thread."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
