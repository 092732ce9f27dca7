"""CommitState: completeness by the set of partitions, ownership, start checks, timers."""

from __future__ import annotations

from hudi_sink.services.coordinator.commit_state import CommitState, StatusOutcome
from hudi_sink.shared.kafka.protocol import WriteStatus

T = "20250101000000001"
A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def _state(
    expected: tuple[tuple[str, int], ...] = (A0, A1, B0),
    start: dict[tuple[str, int], int] | None = None,
    started_at: float = 100.0,
) -> CommitState:
    return CommitState(
        instant=T,
        epoch=2,
        expected=frozenset(expected),
        start_offsets=dict(start if start is not None else {A0: 10, A1: 0, B0: 5}),
        started_at=started_at,
    )


def _status(key: tuple[str, int], start: int, next_offset: int) -> WriteStatus:
    return WriteStatus(topic=key[0], partition=key[1], start_offset=start, next_offset=next_offset)


def test_complete_only_when_every_expected_partition_answered() -> None:
    state = _state()
    assert not state.is_complete()
    assert state.pending() == [A0, A1, B0]
    assert state.record_status(_status(A0, 10, 20), "m1") is StatusOutcome.ACCEPTED
    assert state.record_status(_status(A1, 0, 0), "m1") is StatusOutcome.ACCEPTED
    assert not state.is_complete()
    assert state.pending() == [B0]
    assert state.record_status(_status(B0, 5, 9), "m2") is StatusOutcome.ACCEPTED
    assert state.is_complete()
    assert state.pending() == []


def test_duplicates_do_not_count_towards_completeness() -> None:
    state = _state()
    assert state.record_status(_status(A0, 10, 20), "m1") is StatusOutcome.ACCEPTED
    for _ in range(5):  # as many statuses as there are partitions, all for one partition
        assert state.record_status(_status(A0, 10, 20), "m1") is StatusOutcome.DUPLICATE
    assert not state.is_complete()
    assert state.pending() == [A1, B0]


def test_duplicate_does_not_replace_the_accepted_status() -> None:
    state = _state()
    first = _status(A0, 10, 20)
    state.record_status(first, "m1")
    assert state.record_status(_status(A0, 10, 99), "m1") is StatusOutcome.DUPLICATE
    assert state.statuses[A0] is first
    assert state.next_offsets()[A0] == 20


def test_status_of_unexpected_partition_is_refused() -> None:
    state = _state(expected=(A0,), start={A0: 10})
    for key in (A1, B0, ("c", 0)):
        assert state.record_status(_status(key, 0, 3), "m1") is StatusOutcome.NOT_EXPECTED
    assert not state.is_complete()
    assert state.statuses == {}
    assert state.next_offsets() == {A0: 10}


def test_not_owner_after_another_member_announced() -> None:
    state = _state()
    state.announce(A0, "old-member")
    state.announce(A0, "new-member")  # partition moved in a rebalance
    assert state.record_status(_status(A0, 10, 30), "old-member") is StatusOutcome.NOT_OWNER
    assert A0 not in state.statuses
    assert state.record_status(_status(A0, 10, 25), "new-member") is StatusOutcome.ACCEPTED
    assert state.statuses[A0].next_offset == 25


def test_unannounced_partition_accepts_any_member() -> None:
    state = _state()
    state.announce(A1, "m1")
    assert state.record_status(_status(A0, 10, 11), "anyone") is StatusOutcome.ACCEPTED


def test_bad_start_when_start_offset_differs() -> None:
    state = _state()
    assert state.record_status(_status(A0, 9, 20), "m1") is StatusOutcome.BAD_START
    assert state.record_status(_status(A0, 11, 20), "m1") is StatusOutcome.BAD_START
    assert A0 not in state.statuses
    assert state.record_status(_status(A0, 10, 20), "m1") is StatusOutcome.ACCEPTED


def test_missing_start_offset_means_zero() -> None:
    state = _state(expected=(A0, ("new", 0)), start={A0: 10})
    assert state.record_status(_status(("new", 0), 3, 5), "m1") is StatusOutcome.BAD_START
    assert state.record_status(_status(("new", 0), 0, 5), "m1") is StatusOutcome.ACCEPTED


def test_next_offset_below_start_is_refused() -> None:
    state = _state()
    assert state.record_status(_status(A0, 10, 9), "m1") is StatusOutcome.BAD_START
    assert state.record_status(_status(A0, 10, 10), "m1") is StatusOutcome.ACCEPTED


def test_interval_predicate_uses_injected_clock() -> None:
    state = _state(started_at=100.0)
    assert not state.is_interval_reached(100.0, 5.0)
    assert not state.is_interval_reached(104.999, 5.0)
    assert state.is_interval_reached(105.0, 5.0)
    assert state.is_interval_reached(1000.0, 5.0)
    state.mark_ended(106.0)
    assert not state.is_interval_reached(1000.0, 5.0)  # already ended


def test_interval_counts_from_the_previous_end_but_never_before_start() -> None:
    # The previous instant ended at 100 and committed at 101: END is due at 105.
    state = _state(started_at=101.0)
    state.window_from = 100.0
    assert not state.is_interval_reached(104.999, 5.0)
    assert state.is_interval_reached(105.0, 5.0)
    # Its flushes outlasted the interval (END at 100, committed at 112): due at once.
    late = _state(started_at=112.0)
    late.window_from = 100.0
    assert late.is_interval_reached(112.0, 5.0)
    late.mark_ended(112.0)
    assert not late.is_interval_reached(112.0, 5.0)


def test_timeout_counts_from_end() -> None:
    state = _state(started_at=100.0)
    assert not state.is_timed_out(10_000.0, 30.0)  # never ended: no write-status timeout
    state.mark_ended(200.0)
    assert state.ended_at == 200.0
    assert state.end_sent_at == 200.0
    assert not state.is_timed_out(229.9, 30.0)
    assert state.is_timed_out(230.0, 30.0)


def test_resend_end_only_while_incomplete() -> None:
    state = _state(expected=(A0,), start={A0: 10})
    assert not state.should_resend_end(1000.0, 2.0)  # END not sent yet
    state.mark_ended(50.0)
    assert not state.should_resend_end(51.9, 2.0)
    assert state.should_resend_end(52.0, 2.0)
    state.end_sent_at = 52.0  # re-sent
    assert not state.should_resend_end(53.0, 2.0)
    assert state.should_resend_end(54.5, 2.0)
    state.record_status(_status(A0, 10, 12), "m1")
    assert not state.should_resend_end(100.0, 2.0)


def test_next_offsets_keep_unanswered_partitions() -> None:
    state = _state()
    state.record_status(_status(A0, 10, 42), "m1")
    state.record_status(_status(B0, 5, 5), "m1")  # empty status
    assert state.next_offsets() == {A0: 42, A1: 0, B0: 5}
    # The start offsets themselves are not mutated (an abort restarts from them).
    assert state.start_offsets == {A0: 10, A1: 0, B0: 5}


def test_refused_statuses_never_move_offsets() -> None:
    state = _state()
    state.announce(A1, "owner")
    state.record_status(_status(A0, 3, 50), "m1")  # BAD_START
    state.record_status(_status(A1, 0, 50), "zombie")  # NOT_OWNER
    state.record_status(_status(("zz", 0), 0, 50), "m1")  # NOT_EXPECTED
    assert state.next_offsets() == {A0: 10, A1: 0, B0: 5}


def test_complete_with_empty_expected_set() -> None:
    state = _state(expected=(), start={})
    assert state.is_complete()
    assert state.record_status(_status(A0, 0, 1), "m1") is StatusOutcome.NOT_EXPECTED


def test_carried_names_silent_partitions_and_those_that_gave_up() -> None:
    state = _state()
    assert state.carried() == [A0, A1, B0]
    state.record_status(_status(A0, 10, 20), "m1")
    gave_up = WriteStatus(topic="a", partition=1, start_offset=0, next_offset=0,
                          failed="flush failed for good")
    assert state.record_status(gave_up, "m1") is StatusOutcome.ACCEPTED
    assert state.carried() == [A1, B0]
    assert state.next_offsets() == {A0: 20, A1: 0, B0: 5}


def test_known_owner_from_an_announcement_or_an_answer() -> None:
    state = _state()
    assert not state.has_known_owner()
    state.announce(A0, "m1")
    assert state.has_known_owner()
    other = _state()
    other.record_status(_status(B0, 5, 5), "m2")
    assert other.has_known_owner()
