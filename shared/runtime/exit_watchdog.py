"""The hard bound on a service's exit: once stop is asked (SIGTERM/SIGINT) or the service has
returned, the process ends within ``deadline_s`` whatever it is still doing.

Graceful shutdown (``ServiceShell``) is bounded by ``service.shutdown_timeout_ms``, but only
for what it awaits. What it cannot bound runs on: a thread blocked in a call Python cannot
interrupt (the loop's default executor is joined without a bound when ``asyncio.run`` ends,
and again at interpreter exit), an event loop a bug keeps busy, a client whose close never
returns. Kubernetes would SIGKILL such a pod at the end of its grace period anyway; the
watchdog ends it first, on a daemon thread, with a log line saying why. Nothing is lost by
it: what was not committed is re-consumed by the next owner, and staged files no commit
lists are swept by the existing rules.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable

__all__ = ["ExitWatchdog"]

log = logging.getLogger("hudi_sink.runner")


class ExitWatchdog:
    """Armed once (later calls do nothing); when it fires it logs and calls ``force_exit``."""

    def __init__(self, name: str, deadline_s: float,
                 *, force_exit: Callable[[int], object] = os._exit) -> None:
        self._name = name
        self._deadline_s = deadline_s
        self._exit = force_exit
        self._code = 1
        self._why: str | None = None
        self._lock = threading.Lock()

    @property
    def armed(self) -> bool:
        return self._why is not None

    def settle(self, code: int) -> None:
        """The service returned ``code``: a forced exit after that keeps it."""
        self._code = code

    def arm(self, why: str) -> None:
        # Never wait for the lock: a signal handler runs in the main thread between two
        # bytecodes, possibly inside this very block (a second SIGTERM, or a signal during
        # the service's own ``arm``), and waiting there would freeze the process for good.
        # Whoever holds the lock is arming already.
        if not self._lock.acquire(blocking=False):
            return
        try:
            if self._why is not None:
                return
            self._why = why
        finally:
            self._lock.release()
        timer = threading.Timer(self._deadline_s, self._fire)
        timer.name = f"{self._name}-exit-watchdog"
        timer.daemon = True
        timer.start()

    def _fire(self) -> None:
        log.error("%s did not exit within %.1f s of %s (graceful shutdown budget "
                  "service.shutdown_timeout_ms plus a margin): forcing exit with code %d; "
                  "threads still running: %s", self._name, self._deadline_s, self._why,
                  self._code, sorted(t.name for t in threading.enumerate()
                                     if t is not threading.current_thread()))
        with contextlib.suppress(OSError, ValueError):  # a closed stream must not stop the exit
            for handler in logging.getLogger().handlers:
                handler.flush()
            sys.stdout.flush()
            sys.stderr.flush()
        self._exit(self._code)
