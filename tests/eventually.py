"""Waiting in tests: the one way a test waits for something to happen.

A fixed sleep is either too short (the test flakes on a loaded 2-core machine) or too long
(every run pays for the worst case), and it hides what the test is waiting *for*. A test
names an observable condition instead and :func:`eventually` polls it: at once, then with
pauses growing from 5 ms up to ``every_s`` (a condition that comes true quickly costs
milliseconds; one that takes a minute — a Spark commit, a process restart — is not polled
hundreds of times a second), with a last look at the deadline. Then it fails naming
``what`` and the predicate's last error, so a timeout says what never happened.

A predicate that raises is tried again (a service not listening yet, a file half there) and
its last error is reported and chained on timeout — except an ``AssertionError``: a predicate
asserts what would make waiting pointless (the service under test exited), so that fails the
test at once instead of after the whole timeout. :func:`eventually_async` is the same for code
on the event loop (its pauses let the loop run the code under test; the predicate may be a
coroutine function).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

FIRST_PAUSE_S = 0.005
"""The first pause; each next one doubles, up to ``every_s``."""


class _Polls:
    """The schedule and the record of one wait, shared by the sync and async versions."""

    def __init__(self, timeout_s: float, what: str, every_s: float) -> None:
        if timeout_s <= 0 or every_s <= 0:
            raise ValueError(f"timeout_s ({timeout_s}) and every_s ({every_s}) must be positive")
        self.timeout_s = timeout_s
        self.what = what
        self.every_s = every_s
        self.deadline = time.monotonic() + timeout_s
        self.pause_s = min(FIRST_PAUSE_S, every_s)
        self.last_error: Exception | None = None
        self.checks = 0

    def next_pause(self) -> float | None:
        """Seconds to wait before the next check; None once the deadline has been checked."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        pause = min(self.pause_s, left)
        self.pause_s = min(self.pause_s * 2, self.every_s)
        return pause

    def failure(self) -> AssertionError:
        error = AssertionError(
            f"timed out after {self.timeout_s:g} s ({self.checks} checks) waiting for {self.what}"
            f" (last error: {self.last_error!r})")
        error.__cause__ = self.last_error
        return error


def eventually(predicate: Callable[[], T], timeout_s: float, what: str, every_s: float = 0.5) -> T:
    """Call ``predicate`` until it returns something truthy and return that; AssertionError
    naming ``what`` after ``timeout_s``. ``every_s`` is the longest pause between checks."""
    polls = _Polls(timeout_s, what, every_s)
    while True:
        polls.checks += 1
        try:
            value = predicate()
            if value:
                return value
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001 - keep polling; reported on timeout
            polls.last_error = exc
        pause = polls.next_pause()
        if pause is None:
            raise polls.failure()
        time.sleep(pause)


async def eventually_async(predicate: Callable[[], T | Awaitable[T]], timeout_s: float, what: str,
                           every_s: float = 0.05) -> T:
    """:func:`eventually` on the event loop: ``predicate`` may return an awaitable, and the
    pauses let the loop's other tasks (the code under test) run."""
    polls = _Polls(timeout_s, what, every_s)
    while True:
        polls.checks += 1
        try:
            value = predicate()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value  # type: ignore[return-value]
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001 - keep polling; reported on timeout
            polls.last_error = exc
        pause = polls.next_pause()
        if pause is None:
            raise polls.failure()
        await asyncio.sleep(pause)
