"""HUDI_SINK_FAULTS parsing: drops, failing flushes, and loud refusal of typos."""

from __future__ import annotations

import pytest

from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.runtime.faults import Faults


def test_drop_counts_down_per_type() -> None:
    faults = Faults("drop:START_COMMIT:2, drop:WRITE_STATUS:1")
    assert [faults.should_drop("START_COMMIT") for _ in range(3)] == [True, True, False]
    assert faults.should_drop("WRITE_STATUS") and not faults.should_drop("WRITE_STATUS")
    assert not faults.should_drop("END_COMMIT")


def test_failing_flush_is_the_nth_of_the_process_on_every_attempt() -> None:
    faults = Faults("fail:flush:3")
    assert [faults.flush_fails(n) for n in (1, 2, 3, 3, 4)] == [False, False, True, True, False]


def test_empty_spec_injects_nothing() -> None:
    faults = Faults("")
    assert not faults.should_drop("START_COMMIT") and not faults.flush_fails(1)


@pytest.mark.parametrize("spec", ["fail:flush", "drop:START_COMMIT:x", "explode:now:1", "fail:commit:1"])
def test_unknown_items_are_refused(spec: str) -> None:
    with pytest.raises(ConfigError, match="HUDI_SINK_FAULTS"):
        Faults(spec)
