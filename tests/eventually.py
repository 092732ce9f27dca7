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
        """Checks that came back false or raised."""

    def failed(self, error: Exception) -> None:
        """A check raised: an assertion ends the wait at once, anything else is kept for the
        timeout's message and the next check goes ahead."""
        if isinstance(error, AssertionError):
            raise error
        self.last_error = error

    def next_pause(self) -> float:
        """Seconds to wait before the next check; the timeout's AssertionError once the
        deadline has had its check."""
        self.checks += 1
        left = self.deadline - time.monotonic()
        if left <= 0:
            error = AssertionError(
                f"timed out after {self.timeout_s:g} s ({self.checks} checks) waiting for "
                f"{self.what} (last error: {self.last_error!r})")
            raise error from self.last_error
        pause = min(self.pause_s, left)
        self.pause_s = min(self.pause_s * 2, self.every_s)
        return pause


def eventually(predicate: Callable[[], T], timeout_s: float, what: str, every_s: float = 0.5) -> T:
    """Call ``predicate`` until it returns something truthy and return that; AssertionError
    naming ``what`` after ``timeout_s``. ``every_s`` is the longest pause between checks."""
    polls = _Polls(timeout_s, what, every_s)
    while True:
        try:
            if value := predicate():
                return value
        except Exception as exc:  # noqa: BLE001 - see _Polls.failed
            polls.failed(exc)
        time.sleep(polls.next_pause())


async def eventually_async(predicate: Callable[[], T | Awaitable[T]], timeout_s: float, what: str,
                           every_s: float = 0.05) -> T:
    """:func:`eventually` on the event loop: ``predicate`` may return an awaitable, and the
    pauses let the loop's other tasks (the code under test) run."""
    polls = _Polls(timeout_s, what, every_s)
    while True:
        try:
            value = predicate()
            if value := await value if inspect.isawaitable(value) else value:
                return value  # type: ignore[return-value]
        except Exception as exc:  # noqa: BLE001 - see _Polls.failed
            polls.failed(exc)
        await asyncio.sleep(polls.next_pause())
