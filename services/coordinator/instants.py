"""One picker of instant times per leadership: ingestion and maintenance reserve here.

A time is reserved in the same synchronous step that picks it (``latest_instant`` set before
the caller's first ``await``), so two callers on the event loop never pick the same time, and
times only grow. ``open_ingestion_below`` tells maintenance whether an ingestion instant older
than its own is still in flight (reserved and starting, or open).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from shared.errors import FencedError
from shared.hudi.naming import instant_key, next_instant_time

__all__ = ["open_ingestion_below", "reserve_instant", "wait_for_older_ingestion"]


class _Open(Protocol):
    @property
    def instant(self) -> str: ...


class TransactionDriver(Protocol):
    """What ``services.coordinator.transaction.TransactionDriver`` offers here."""

    latest_instant: str | None
    starting: str | None

    @property
    def current(self) -> _Open | None: ...


def reserve_instant(driver: TransactionDriver) -> str:
    """A new instant time above every one this leadership made, reserved at once (call on
    the event loop, with no ``await`` between this and the caller's use of the result)."""
    driver.latest_instant = next_instant_time(driver.latest_instant, datetime.now(UTC))
    return driver.latest_instant


def open_ingestion_below(driver: TransactionDriver, instant: str) -> str | None:
    """The ingestion instant older than ``instant`` still in flight, or None."""
    current = driver.current
    for candidate in (driver.starting, current.instant if current is not None else None):
        if candidate is not None and instant_key(candidate) < instant_key(instant):
            return candidate
    return None


def wait_for_older_ingestion(driver: TransactionDriver, instant: str, *, timeout_s: float,
                             leading: Callable[[], bool], poll_s: float = 0.05) -> None:
    """Block (worker thread) until no ingestion instant older than ``instant`` is in flight,
    so a replacecommit never completes before an older commit (a timeline hole would let an
    incremental reader checkpoint past rows that land later). Ingestion never waits for
    this; every instant it opens from now on is newer than ``instant``. Raises FencedError
    once ``leading()`` turns false, TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while (older := open_ingestion_below(driver, instant)) is not None:
        if not leading():
            raise FencedError(f"leadership ended while {instant} waited for {older}")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{instant} waited {timeout_s:g} s for ingestion instant {older}")
        time.sleep(poll_s)
