"""A clock the test moves: for code that takes an injected ``clock`` (``Callable[[], float]``:
the deleter's context and table-state cache, the participant's runtime and partitions).

Time-based rules (an expiry, a re-send interval, a schedule) are tested by moving the clock
across the boundary, never by sleeping until real time crosses it: exact, and instant.
"""

from __future__ import annotations

import time


class ManualClock:
    """``now`` seconds, changed only by the test (:meth:`advance`, or assigning ``now``).

    :meth:`following_real_time` makes one that runs with ``time.monotonic`` plus what the
    test skipped, for code that also waits on the event loop in real time (a participant
    draining) while the test jumps over a long interval."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self._real_start: float | None = None

    @classmethod
    def following_real_time(cls) -> ManualClock:
        clock = cls(time.monotonic())
        clock._real_start = clock.now
        return clock

    def __call__(self) -> float:
        if self._real_start is None:
            return self.now
        return self.now + (time.monotonic() - self._real_start)

    def advance(self, seconds: float) -> None:
        """Move forward by ``seconds`` (never back: the clocks it stands for are monotonic)."""
        if seconds < 0:
            raise ValueError(f"a clock does not go back ({seconds} s)")
        self.now += seconds
