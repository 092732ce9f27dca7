"""TransactionParticipant: the per-partition exactly-once rules, with a real decoder."""

from __future__ import annotations

from dataclasses import dataclass

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.errors import IllegalTransition
from hudi_sink.shared.kafka.protocol import StagedFile
from hudi_sink.shared.runtime.states import PartitionPhase

SCHEMA = TableConfig(schema="id STRING, country STRING, amount DOUBLE", record_key_field="id",
                partition_field="country").table_schema()
T1, T2, T3 = "20250101000000001", "20250101000000002", "20250101000000003"


@dataclass(frozen=True)
class Rec:
    offset: int
    value: bytes | None
    key: bytes | None = None
    timestamp: int = 1_700_000_000_000


def good(offset: int, key: str | None = None) -> Rec:
    value = orjson.dumps({"id": key or f"id-{offset}", "country": "de", "amount": float(offset)})
    return Rec(offset, value, key=f"k{offset}".encode(), timestamp=1_700_000_000_000 + offset)


def bad(offset: int) -> Rec:
    return Rec(offset, b'{"id": "x", "amount": "not a number"}', key=b"bad", timestamp=42 + offset)


def tombstone(offset: int) -> Rec:
    return Rec(offset, None, key=b"gone")


def _participant(flush_records: int = 1000, fail_on_error: bool = False) -> TransactionParticipant:
    return TransactionParticipant(
        topic="orders",
        partition=3,
        decoder=RecordDecoder(SCHEMA, 1 << 20),
        flush_records=flush_records,
        fail_on_error=fail_on_error,
    )


def _staged(instant: str, n: int, flush_no: int = 0) -> StagedFile:
    return StagedFile(
        staged_path=f".hoodie/.temp/{instant}/de/f{flush_no}_0-{flush_no}-1_{instant}.parquet",
        final_path=f"de/f{flush_no}_0-{flush_no}-1_{instant}.parquet",
        file_id=f"f{flush_no}",
        partition_path="de",
        num_records=n,
        size_bytes=100,
    )


# --- begin / seek -------------------------------------------------------------------------


def test_initial_state() -> None:
    p = _participant()
    assert p.phase is PartitionPhase.WAITING
    assert p.key == ("orders", 3)
    assert p.instant is None
    assert not p.accepting
    assert not p.should_flush()
    assert p.take_buffer() is None
    assert p.lag() is None


def test_records_before_begin_are_ignored() -> None:
    p = _participant()
    p.accept([good(0), good(1)])
    assert p.rows == [] and p.offsets == [] and p.next_offset == 0


def test_begin_resets_to_coordinator_offset() -> None:
    p = _participant()
    p.begin(T1, 1, 10)
    assert p.phase is PartitionPhase.WRITING
    assert (p.instant, p.epoch, p.start_offset, p.next_offset) == (T1, 1, 10, 10)
    p.accept([good(8), good(9), good(10), good(11)])
    assert p.offsets == [10, 11]
    assert [r.record_key for r in p.rows] == ["id-10", "id-11"]
    assert p.next_offset == 12


def test_records_below_next_offset_are_skipped_after_refetch() -> None:
    p = _participant()
    p.begin(T1, 1, 0)
    p.accept([good(0), good(1), good(2)])
    # A re-fetch after a seek delivers the same offsets again: nothing is written twice.
    p.accept([good(1), good(2), good(3)])
    assert p.offsets == [0, 1, 2, 3]
    assert p.next_offset == 4
    assert p.counters.records_skipped == 0


def test_gaps_are_accepted() -> None:
    p = _participant()
    p.begin(T1, 1, 5)
    p.accept([good(7), good(20), good(21), good(100)])
    assert p.offsets == [7, 20, 21, 100]
    assert p.next_offset == 101
    assert p.failure is None


def test_begin_again_drops_everything_of_the_old_instant() -> None:
    p = _participant(flush_records=2)
    p.begin(T1, 1, 0)
    p.accept([good(0), good(1), bad(2), tombstone(3), good(4)])
    p.take_buffer()
    p.add_staged(T1, [_staged(T1, 2)])
    p.begin(T2, 1, 0)  # coordinator aborted T1: restart from its committed offset
    assert (p.instant, p.start_offset, p.next_offset, p.flush_no) == (T2, 0, 0, 0)
    assert p.rows == [] and p.offsets == [] and p.staged == [] and p.dead_letters == []
    assert (p.counters.records_written, p.counters.records_dlq, p.counters.records_skipped) == (0, 0, 0)
    p.accept([good(0), good(1)])
    assert p.offsets == [0, 1]  # offsets are written again for the new instant


# --- every offset ends exactly once ---------------------------------------------------------


def test_each_offset_is_a_row_a_dead_letter_or_a_skipped_tombstone() -> None:
    p = _participant()
    p.begin(T1, 4, 100)
    p.accept([good(100), bad(101), tombstone(102), good(104), bad(107), tombstone(108)])
    assert p.offsets == [100, 104]
    assert [d.offset for d in p.dead_letters] == [101, 107]
    assert p.counters.records_skipped == 2
    assert p.counters.records_dlq == 2
    assert p.next_offset == 109
    letter = p.dead_letters[0]
    assert (letter.topic, letter.partition, letter.offset) == ("orders", 3, 101)
    assert letter.key == b"bad"
    assert letter.value == bad(101).value
    assert letter.timestamp_ms == 42 + 101
    assert letter.error_class == "TypeMismatch"
    assert "amount" in letter.message


def test_unknown_fields_are_counted() -> None:
    p = _participant()
    p.begin(T1, 1, 0)
    p.accept([Rec(0, orjson.dumps({"id": "a", "extra": 1, "more": 2}))])
    assert p.counters.unknown_fields == 2
    assert p.build_status().unknown_fields == 2


KINDS = st.sampled_from(["row", "bad", "tombstone"])


@settings(max_examples=150, deadline=None)
@given(
    start=st.integers(0, 20),
    steps=st.lists(st.tuples(st.integers(-3, 4), KINDS), max_size=60),
    chunk=st.integers(1, 7),
    flush_records=st.integers(1, 5),
)
def test_every_accepted_offset_ends_exactly_once(
    start: int, steps: list[tuple[int, str]], chunk: int, flush_records: int
) -> None:
    records: list[Rec] = []
    offset = start
    for delta, kind in steps:
        offset = max(0, offset + delta)
        records.append({"row": good, "bad": bad, "tombstone": tombstone}[kind](offset))
    # Model: offsets below the next offset are skipped, later ones accepted in order.
    expected: dict[int, str] = {}
    model_next = start
    for record in records:
        if record.offset >= model_next:
            expected[record.offset] = (
                "tombstone" if record.value is None
                else "bad" if record.value == bad(record.offset).value else "row"
            )
            model_next = record.offset + 1

    p = _participant(flush_records=flush_records)
    p.begin(T1, 1, start)
    flushed: list[int] = []
    for index in range(0, len(records), chunk):
        p.accept(records[index:index + chunk])
        if p.should_flush():
            buffer = p.take_buffer()
            assert buffer is not None
            assert len(buffer.rows) == len(buffer.offsets)
            flushed.extend(buffer.offsets)
    row_offsets = flushed + p.offsets
    dlq_offsets = [d.offset for d in p.dead_letters]

    assert row_offsets == [o for o, k in expected.items() if k == "row"]
    assert dlq_offsets == [o for o, k in expected.items() if k == "bad"]
    assert p.counters.records_skipped == sum(1 for k in expected.values() if k == "tombstone")
    assert p.counters.records_dlq == len(dlq_offsets)
    assert not set(row_offsets) & set(dlq_offsets)
    assert len(row_offsets) + len(dlq_offsets) + p.counters.records_skipped == len(expected)
    assert p.next_offset == model_next
    assert all(start <= o < p.next_offset for o in row_offsets + dlq_offsets)


# --- flushing -------------------------------------------------------------------------------


def test_should_flush_and_take_buffer() -> None:
    p = _participant(flush_records=3)
    p.begin(T1, 1, 0)
    p.accept([good(0), good(1)])
    assert not p.should_flush()
    p.accept([tombstone(2), bad(3)])  # neither counts as a buffered row
    assert not p.should_flush()
    p.accept([good(4)])
    assert p.should_flush()

    first = p.take_buffer()
    assert first is not None
    assert first.offsets == [0, 1, 4]
    assert [r.record_key for r in first.rows] == ["id-0", "id-1", "id-4"]
    assert (first.flush_no, first.instant) == (0, T1)
    assert p.flush_no == 1
    assert p.rows == [] and p.offsets == []
    assert not p.should_flush()
    assert p.take_buffer() is None  # empty buffer: nothing to flush, flush_no unchanged
    assert p.flush_no == 1

    p.accept([good(5)])
    second = p.take_buffer()
    assert second is not None
    assert (second.offsets, second.flush_no) == ([5], 1)
    assert p.flush_no == 2
    assert p.next_offset == 6


def test_should_flush_only_while_writing() -> None:
    p = _participant(flush_records=1)
    p.begin(T1, 1, 0)
    p.accept([good(0)])
    assert p.should_flush()
    p.drain(0.0)
    assert p.should_flush()  # draining still takes fetched records
    assert not p.is_drained(0.01, fetched_now=False)
    assert p.is_drained(0.1, fetched_now=False)
    assert not p.is_drained(0.1, fetched_now=True)
    assert p.is_drained(2.5, fetched_now=True)
    p.end()
    assert not p.should_flush()
    buffer = p.take_buffer()  # the final flush at END still takes the rest
    assert buffer is not None and buffer.offsets == [0]


def test_add_staged_counts_written_records() -> None:
    p = _participant()
    p.begin(T1, 1, 0)
    assert p.add_staged(T1, [_staged(T1, 3, 0), _staged(T1, 4, 1)])
    assert p.counters.records_written == 7
    assert [f.file_id for f in p.staged] == ["f0", "f1"]


def test_add_staged_ignores_stale_instant() -> None:
    p = _participant()
    p.begin(T1, 1, 0)
    p.begin(T2, 1, 0)
    assert not p.add_staged(T1, [_staged(T1, 5)])  # a flush of T1 that finished late
    assert p.staged == []
    assert p.counters.records_written == 0
    assert p.add_staged(T2, [_staged(T2, 2)])
    assert p.counters.records_written == 2


# --- errors.tolerance=fail ------------------------------------------------------------------


def test_fail_stops_at_the_bad_record() -> None:
    p = _participant(fail_on_error=True)
    p.begin(T1, 1, 10)
    p.accept([good(10), tombstone(11), bad(12), good(13), good(14)])
    assert p.phase is PartitionPhase.FAILED
    assert p.next_offset == 12  # nothing at or past the bad record commits
    assert p.offsets == [10]
    assert p.dead_letters == []
    assert p.counters.records_dlq == 0
    assert p.counters.records_skipped == 1
    assert p.failure is not None
    assert "orders-3 offset 12" in p.failure
    assert "TypeMismatch" in p.failure
    assert not p.accepting

    p.accept([good(15), bad(16)])  # later fetches change nothing
    assert (p.next_offset, p.offsets, p.phase) == (12, [10], PartitionPhase.FAILED)

    p.end()
    status = p.build_status()
    assert status.failed == p.failure
    assert (status.start_offset, status.next_offset) == (10, 12)


def test_failed_partition_restarts_on_new_instant() -> None:
    p = _participant(fail_on_error=True)
    p.begin(T1, 1, 0)
    p.accept([bad(0)])
    assert p.phase is PartitionPhase.FAILED and p.next_offset == 0
    p.begin(T2, 1, 0)
    assert p.phase is PartitionPhase.WRITING
    assert p.failure is None
    p.accept([good(1)])
    assert p.offsets == [1]


def test_a_start_past_the_poison_record_resumes_there_and_writes_nothing_below_it() -> None:
    """An operator's offset change (POST /offsets) reaches a participant as the next START:
    buffered rows and the old position are dropped, records below the new offset are never
    written (a fetch from the old position included), a late flush of the old instant counts
    for nothing."""
    p = _participant(fail_on_error=True)
    p.begin(T1, 1, 10)
    p.accept([good(10), good(11), bad(12), good(13)])
    assert p.phase is PartitionPhase.FAILED and p.rows and p.next_offset == 12
    p.begin(T2, 1, 13)
    assert (p.phase, p.rows, p.offsets, p.failure) == (PartitionPhase.WRITING, [], [], None)
    p.accept([good(11), bad(12), good(13), good(14)])  # fetched from the old position
    assert p.offsets == [13, 14] and p.phase is PartitionPhase.WRITING
    assert not p.add_staged(T1, [_staged(T1, 2)])  # the old instant's flush, finishing late
    assert p.staged == [] and p.counters.records_written == 0
    p.drain(0.0)
    p.end()
    assert (p.build_status().start_offset, p.build_status().next_offset) == (13, 15)


def test_dlq_tolerance_routes_bad_records_and_continues() -> None:
    p = _participant(fail_on_error=False)
    p.begin(T1, 1, 0)
    p.accept([bad(0), good(1)])
    assert p.phase is PartitionPhase.WRITING
    assert [d.offset for d in p.dead_letters] == [0]
    assert p.offsets == [1]
    assert p.next_offset == 2


# --- status / phases ------------------------------------------------------------------------


def test_status_fields_and_report_ack_cycle() -> None:
    p = _participant(flush_records=2)
    p.begin(T1, 2, 50)
    p.accept([good(50), good(51), bad(52), tombstone(53), good(55)])
    buffer = p.take_buffer()
    assert buffer is not None
    p.add_staged(T1, [_staged(T1, 3)])
    p.drain(0.0)
    p.end()
    assert p.phase is PartitionPhase.ENDING
    status = p.build_status()
    assert status.key() == ("orders", 3)
    assert (status.start_offset, status.next_offset) == (50, 56)
    assert status.records_written == 3
    assert status.records_dlq == 1
    assert status.records_skipped == 1
    assert status.failed is None
    assert status.files == [_staged(T1, 3)]

    p.reported(status)
    assert p.phase is PartitionPhase.REPORTED
    assert p.last_status == status
    assert p.dead_letters == []  # sent before the status

    p.acked(56)
    assert p.phase is PartitionPhase.WAITING
    assert p.committed_offset == 56
    assert p.lag() == 0
    p.accept([good(56)])  # paused: fetched, not accepted
    assert p.lag() == 1
    assert p.rows == []


def test_fetched_offset_counts_every_fetched_record() -> None:
    # fetched_offset is "highest offset fetched + 1" and drives the lag metric; records of a
    # batch that are not accepted (paused, failed) are still fetched.
    p = _participant(fail_on_error=True)
    p.accept([good(0), good(1)])  # before any START
    assert p.fetched_offset == 2
    p.begin(T1, 1, 2)
    p.accept([good(2), bad(3), good(4), good(5)])
    assert p.phase is PartitionPhase.FAILED
    assert p.fetched_offset == 6


def test_empty_status_when_nothing_new() -> None:
    p = _participant()
    p.begin(T1, 1, 7)
    p.drain(0.0)
    p.end()
    status = p.build_status()
    assert (status.start_offset, status.next_offset) == (7, 7)
    assert status.files == []
    assert (status.records_written, status.records_dlq, status.records_skipped) == (0, 0, 0)


def test_records_after_end_are_not_accepted() -> None:
    p = _participant()
    p.begin(T1, 1, 0)
    p.accept([good(0)])
    p.drain(0.0)
    p.accept([good(1)])  # fetched before the drain ended: still taken
    p.end()
    p.accept([good(2)])
    assert p.offsets == [0, 1]
    assert p.next_offset == 2


def test_illegal_phase_changes_raise() -> None:
    p = _participant()
    with pytest.raises(IllegalTransition):
        p.end()  # no instant yet
    with pytest.raises(IllegalTransition):
        p.acked(0)
    p.begin(T1, 1, 0)
    with pytest.raises(IllegalTransition):
        p.reported(p.build_status())  # must END first
    with pytest.raises(IllegalTransition):
        p.acked(0)


# --- should_begin ---------------------------------------------------------------------------


def test_should_begin_orders_by_epoch_then_instant() -> None:
    p = _participant()
    assert p.should_begin(T1, 0)  # no instant yet: anything begins
    p.begin(T2, 5, 0)
    assert not p.should_begin(T2, 5)  # a repeat of the current START
    assert not p.should_begin(T1, 5)  # older instant, same epoch
    assert p.should_begin(T3, 5)  # newer instant
    assert not p.should_begin(T3, 4)  # older epoch, even with a newer instant
    assert p.should_begin(T1, 6)  # newer epoch wins even with an older instant


def test_repeated_start_after_ack_is_ignored() -> None:
    p = _participant()
    p.begin(T1, 1, 0)
    p.drain(0.0)
    p.end()
    p.reported(p.build_status())
    p.acked(0)
    assert not p.should_begin(T1, 1)
    assert p.should_begin(T2, 1)


# --- a flush that fails for good gives the instant up (issue 9, finding 1) ----------------
def test_failed_flush_reports_nothing_of_the_instant() -> None:
    p = _participant(flush_records=2)
    p.begin(T1, 1, 100)
    p.accept([good(100), good(101)])
    first = p.take_buffer()
    assert first is not None
    p.add_staged(T1, [_staged(T1, 2, 0)])  # the first flush succeeded
    p.accept([good(102), good(103)])
    second = p.take_buffer()
    assert second is not None and second.offsets == [102, 103]
    assert p.give_up(T1, "flush failed for good: disk full")
    assert p.phase is PartitionPhase.FAILED
    p.accept([good(104)])  # nothing is taken in after giving up
    assert p.take_buffer() is None
    p.end()
    status = p.build_status()
    # Offsets must not pass rows no listed file holds: nothing of T1 is reported.
    assert status.next_offset == status.start_offset == 100
    assert status.files == []
    assert status.records_written == 0
    assert status.failed is not None and "disk full" in status.failed


def test_give_up_of_a_finished_instant_changes_nothing() -> None:
    p = _participant(flush_records=1)
    p.begin(T1, 1, 0)
    p.accept([good(0)])
    assert p.take_buffer() is not None
    p.begin(T2, 1, 0)  # the instant moved on while the old flush ran
    assert not p.give_up(T1, "late failure")
    assert p.phase is PartitionPhase.WRITING and p.gave_up is None


def test_give_up_while_ending_still_reports_nothing() -> None:
    p = _participant(flush_records=100)
    p.begin(T1, 1, 5)
    p.accept([good(5), good(6)])
    p.drain(0.0)
    p.end()
    assert p.take_buffer() is not None  # the final flush at END ...
    assert p.give_up(T1, "final flush failed")  # ... fails
    assert p.phase is PartitionPhase.ENDING
    status = p.build_status()
    assert (status.start_offset, status.next_offset, status.files) == (5, 5, [])


def test_next_instant_after_giving_up_writes_the_same_records_again() -> None:
    p = _participant(flush_records=100)
    p.begin(T1, 1, 10)
    p.accept([good(10), good(11)])
    p.give_up(T1, "failed")
    p.end()
    p.reported(p.build_status())
    p.begin(T2, 1, 10)  # the coordinator carried offset 10
    assert p.gave_up is None and p.failure is None
    p.accept([good(10), good(11)])
    assert p.offsets == [10, 11] and p.next_offset == 12


def test_dead_letters_are_taken_as_they_arrive() -> None:
    p = _participant()
    p.begin(T1, 1, 0)
    p.accept([good(0), bad(1), bad(2)])
    assert [d.offset for d in p.take_dead_letters()] == [1, 2]
    assert p.take_dead_letters() == []
    assert p.counters.records_dlq == 2


def test_lag_uses_the_high_watermark_and_the_table_offset() -> None:
    p = _participant()
    assert p.lag() is None
    p.begin(T1, 1, 40)
    p.accept([good(40)])
    assert p.lag() == 1  # fetched 41, table at 40, no high watermark yet
    p.highwater = 100
    assert p.lag() == 60
    p.drain(0.0)
    p.end()
    p.reported(p.build_status())
    p.acked(41)
    assert p.lag() == 59


def test_a_flush_is_due_at_buffer_bytes_of_values_before_flush_records_rows() -> None:
    """Large records: the byte bound decides, so a buffer stays bounded whatever the record
    size; tombstones and dead letters hold no row and count nothing."""
    p = TransactionParticipant(topic="orders", partition=3, decoder=RecordDecoder(SCHEMA, 1 << 20),
                               flush_records=1000, fail_on_error=False, buffer_bytes=200)
    p.begin(T1, 1, 0)
    p.accept([good(0), tombstone(1), bad(2)] + [good(n) for n in range(3, 6)])
    assert len(p.rows) == 4 and p.buffered_bytes == sum(len(good(n).value or b"") for n in (0, 3, 4, 5))
    assert p.buffered_bytes < 200 and not p.should_flush()
    p.accept([good(6), good(7)])
    assert p.buffered_bytes >= 200 and p.should_flush()
    taken = p.take_buffer()
    assert taken is not None and len(taken.rows) == 6
    assert p.buffered_bytes == 0 and not p.should_flush()
    p.accept([good(8)])
    p.begin(T2, 1, 9)  # a new instant starts from an empty buffer
    assert p.buffered_bytes == 0
