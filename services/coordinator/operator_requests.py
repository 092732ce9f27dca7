"""A commit or an abort asked for from outside the protocol (REST, a drain), bound to the
instant it was asked for: taken once by the step that acts on it, and one asked for another
instant is dropped, never applied to the next one."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["COMMIT_REQUEST_WINDOW_S", "OperatorRequests"]

COMMIT_REQUEST_WINDOW_S = 5.0
"""A forced commit asked for between two instants applies to the next instant only if it
starts this soon (it normally starts within milliseconds); it never lingers."""


class OperatorRequests:
    """The pending commit and abort requests (at most one of each)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._commit: tuple[str | None, float] | None = None
        """(instant it is for, or None for "the next one", when asked)."""
        self._abort: str | None = None  # the instant (never another one)

    def ask_commit(self, instant: str | None) -> None:
        self._commit = (instant, self._clock())

    def ask_abort(self, instant: str | None) -> None:
        self._abort = instant

    def take_abort(self, instant: str) -> bool:
        """Whether an abort applies to ``instant`` (taken once)."""
        requested, self._abort = self._abort, None
        return requested is not None and requested == instant

    def take_commit(self, instant: str, now: float) -> bool:
        """Whether a commit applies to ``instant``: asked for it, or asked between two
        instants just before it started (taken once; a stale request is dropped)."""
        request, self._commit = self._commit, None
        if request is None:
            return False
        target, asked_at = request
        return target == instant or (target is None and now - asked_at <= COMMIT_REQUEST_WINDOW_S)
