"""One picker of instant times per leadership: ingestion and maintenance reserve here.

A time is reserved in the same synchronous step that picks it (``latest_instant`` set before
the caller's first ``await``), so two callers on the event loop never pick the same time, and
times only grow. ``older_ingestion`` tells maintenance whether an ingestion instant older
than its own is unfinished (reserved and starting, open, or pending on the timeline).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Protocol

from hudi_sink.shared.errors import FencedError
from hudi_sink.shared.hudi.naming import instant_key, next_instant_time

__all__ = ["older_ingestion", "open_ingestion_below", "reserve_instant", "wait_for_older_ingestion"]


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
    """The ingestion instant older than ``instant`` this leadership has in flight, or None."""
    current = driver.current
    for candidate in (driver.starting, current.instant if current is not None else None):
        if candidate is not None and instant_key(candidate) < instant_key(instant):
            return candidate
    return None


def older_ingestion(driver: TransactionDriver, instant: str,
                    pending: Callable[[], Iterable[str]]) -> str | None:
    """An ingestion instant older than ``instant`` not yet finished, or None: one this
    leadership has in flight, else one still requested or inflight on the table's timeline
    (``pending``). The timeline is what counts: after a failed step the driver forgets its
    open instant (``stand_by``) while that instant may already be decided COMMIT and only
    completes when the next leadership rolls it forward. Memory is read first: an instant
    reserved before ``instant`` is in memory until it is on the timeline."""
    held = open_ingestion_below(driver, instant)
    if held is not None:
        return held
    return min((p for p in pending() if instant_key(p) < instant_key(instant)),
               key=instant_key, default=None)


def wait_for_older_ingestion(driver: TransactionDriver, instant: str, *, timeout_s: float,
                             leading: Callable[[], bool], pending: Callable[[], Iterable[str]],
                             poll_s: float = 0.05, timeline_poll_s: float = 0.5) -> None:
    """Block (worker thread) until no ingestion instant older than ``instant`` is unfinished
    (``older_ingestion``), so a replacecommit never completes before an older commit (a
    timeline hole would let an incremental reader checkpoint past rows that land later).
    Ingestion never waits for this; every instant it opens from now on is newer than
    ``instant``. Raises FencedError once ``leading()`` turns false, TimeoutError after
    ``timeout_s``. Polls memory every ``poll_s``, the timeline (a listing) every
    ``timeline_poll_s``."""
    deadline = time.monotonic() + timeout_s
    while (older := older_ingestion(driver, instant, pending)) is not None:
        if not leading():
            raise FencedError(f"leadership ended while {instant} waited for {older}")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{instant} waited {timeout_s:g} s for ingestion instant {older}")
        held = open_ingestion_below(driver, instant) is not None
        time.sleep(poll_s if held else max(poll_s, timeline_poll_s))
