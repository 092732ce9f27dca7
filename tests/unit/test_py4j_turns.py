"""The short GIL switch interval holds exactly while some thread builds a job, however the
builds of two Spark slots overlap, and the process's own value comes back after."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from hudi_sink.services.participant.py4j_turns import BUILD_SWITCH_INTERVAL_S, quick_turns


@pytest.fixture
def own_interval() -> Iterator[float]:
    saved = sys.getswitchinterval()
    sys.setswitchinterval(0.004)
    try:
        yield 0.004
    finally:
        sys.setswitchinterval(saved)


def test_overlapping_builds_keep_it_short_until_the_last_ends(own_interval: float) -> None:
    first, second = quick_turns(), quick_turns()
    first.__enter__()
    assert sys.getswitchinterval() == pytest.approx(BUILD_SWITCH_INTERVAL_S)
    second.__enter__()
    first.__exit__(None, None, None)  # the first build ends while the second still runs
    assert sys.getswitchinterval() == pytest.approx(BUILD_SWITCH_INTERVAL_S)
    second.__exit__(None, None, None)
    assert sys.getswitchinterval() == pytest.approx(own_interval)


def test_a_failed_build_restores_the_interval(own_interval: float) -> None:
    with pytest.raises(RuntimeError), quick_turns():
        raise RuntimeError("the job could not be built")
    assert sys.getswitchinterval() == pytest.approx(own_interval)


def test_builds_from_many_threads_end_with_the_processs_value(own_interval: float) -> None:
    start = threading.Barrier(8)
    seen: list[float] = []

    def build() -> None:
        start.wait()
        for _ in range(200):
            with quick_turns():
                seen.append(sys.getswitchinterval())

    threads = [threading.Thread(target=build) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 1600 and all(v == pytest.approx(BUILD_SWITCH_INTERVAL_S) for v in seen)
    assert sys.getswitchinterval() == pytest.approx(own_interval)


def test_a_shorter_interval_of_the_process_is_kept() -> None:
    saved = sys.getswitchinterval()
    sys.setswitchinterval(0.0001)
    shorter = sys.getswitchinterval()  # as Python stores it (in whole microseconds)
    try:
        with quick_turns():
            assert sys.getswitchinterval() == shorter
    finally:
        sys.setswitchinterval(saved)
