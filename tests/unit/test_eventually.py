"""The tests' one wait helper (``tests/eventually.py``): what it returns, what it retries,
what fails at once, and what a timeout says."""

from __future__ import annotations

import time

import pytest
from eventually import eventually, eventually_async


def test_returns_the_first_truthy_value_retrying_errors_meanwhile() -> None:
    answers = iter([ConnectionRefusedError("not listening yet"), None, [], ["ready"]])

    def check() -> list[str] | None:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert eventually(check, 5, "the service") == ["ready"]


def test_a_timeout_names_what_never_happened_and_the_last_error() -> None:
    def check() -> bool:
        raise KeyError("state")

    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"timed out after 0.2 s .* waiting for the leader") as info:
        eventually(check, 0.2, "the leader", every_s=0.05)
    assert 0.2 <= time.monotonic() - started < 2
    assert "KeyError('state')" in str(info.value) and isinstance(info.value.__cause__, KeyError)


def test_an_assertion_in_the_predicate_fails_at_once() -> None:
    """A predicate asserts what makes waiting pointless (the process under test exited)."""
    calls: list[int] = []

    def check() -> bool:
        calls.append(1)
        raise AssertionError("coordinator exited")

    started = time.monotonic()
    with pytest.raises(AssertionError, match="coordinator exited"):
        eventually(check, 30, "commits")
    assert calls == [1] and time.monotonic() - started < 1


def test_checks_start_fast_back_off_to_every_s_and_look_once_more_at_the_deadline() -> None:
    seen: list[float] = []

    def check() -> bool:
        seen.append(time.monotonic())
        return False

    with pytest.raises(AssertionError):
        eventually(check, 0.6, "never", every_s=0.1)
    gaps = [b - a for a, b in zip(seen, seen[1:], strict=False)]
    assert gaps[0] < 0.05, "the first pause is short"
    assert max(gaps) < 0.1 + 0.05, "no pause longer than every_s"
    assert seen[-1] - seen[0] >= 0.6 - 0.02, "a last look at the deadline"
    assert len(seen) < 20, "a slow condition is not polled in a tight loop"


async def test_the_async_twin_awaits_coroutine_predicates_and_lets_the_loop_run() -> None:
    ticks: list[int] = []

    async def check() -> int:
        ticks.append(1)
        return len(ticks) if len(ticks) >= 3 else 0

    assert await eventually_async(check, 5, "three ticks") == 3
    assert await eventually_async(lambda: "plain", 1, "a plain value") == "plain"
    with pytest.raises(AssertionError, match="waiting for nothing"):
        await eventually_async(lambda: False, 0.05, "nothing")


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        eventually(lambda: True, 0, "anything")
