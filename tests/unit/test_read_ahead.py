"""Read-ahead: records decoded while an instant's report runs are the next instant's first,
only when it starts exactly where they start and with the same decoder; otherwise they are
dropped and nothing of them is counted. It stops before anything an instant must handle."""

from __future__ import annotations

from test_transaction_participant import SCHEMA, T1, T2, _participant, _staged, bad, good, tombstone

from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.runtime.states import PartitionPhase


def _reported(p: TransactionParticipant, start: int, end: int) -> None:
    """Instant T1 from ``start``: records to ``end`` (excluded), drained, its buffer taken,
    read-ahead started."""
    p.begin(T1, 1, start)
    p.accept([good(o) for o in range(start, end)])
    p.drain(0.0)
    p.end()
    assert p.take_buffer(final=True) is not None
    p.add_staged(T1, [_staged(T1, end - start)])
    assert p.start_ahead() == end


def test_the_next_instant_adopts_what_was_read_ahead_from_its_start() -> None:
    p = _participant()
    _reported(p, 10, 13)
    p.accept([good(11), good(12), good(13), tombstone(14), good(15)])  # 11, 12: before it
    status = p.build_status()  # the reported instant is untouched
    assert (status.start_offset, status.next_offset, status.records_written) == (10, 13, 3)
    assert status.records_skipped == 0
    p.reported(status)
    p.accept([good(16)])
    p.acked(13)
    p.accept([good(17)])
    assert p.phase is PartitionPhase.WAITING and p.rows == []
    p.begin(T2, 1, 13)
    assert p.offsets == [13, 15, 16, 17]
    assert [row.values["amount"] for row in p.rows] == [13.0, 15.0, 16.0, 17.0]
    assert p.next_offset == 18 and p.start_offset == 13
    assert p.counters.records_skipped == 1
    p.accept([good(17), good(18)])  # a fetch still in flight: 17 is not taken twice
    assert p.offsets == [13, 15, 16, 17, 18]
    p.drain(0.0)
    p.end()
    status = p.build_status()
    assert (status.start_offset, status.next_offset, status.records_skipped) == (13, 19, 1)


def test_a_start_elsewhere_drops_what_was_read_ahead() -> None:
    p = _participant()
    _reported(p, 10, 13)
    p.accept([good(13), good(14)])
    p.begin(T2, 2, 10)  # the instant was not committed: a new leader starts at its start
    assert (p.rows, p.offsets, p.next_offset) == ([], [], 10)
    assert p.counters.records_skipped == 0
    assert p.ahead is None


def test_a_new_schema_drops_what_the_old_decoder_read() -> None:
    made: list[RecordDecoder] = []

    def decoder_for(schema: str | None, follow: bool | None) -> RecordDecoder:
        made.append(RecordDecoder(SCHEMA, 1 << 20))
        return made[-1]

    p = _participant()
    p.decoder_for = decoder_for
    _reported(p, 0, 2)
    p.accept([good(2), good(3)])
    p.begin(T2, 1, 2, "id STRING, country STRING, amount DOUBLE, note STRING", None)
    assert made and p.decoder is made[-1]
    assert (p.offsets, p.next_offset) == ([], 2)


def test_read_ahead_stops_before_a_bad_record_which_the_instant_then_dead_letters() -> None:
    p = _participant()
    _reported(p, 0, 1)
    p.accept([good(1), bad(2), good(3)])
    assert p.ahead_blocked
    assert p.dead_letters == []  # not sent for an instant nobody started
    p.begin(T2, 1, 1)
    assert (p.offsets, p.next_offset) == ([1], 2)
    p.accept([bad(2), good(3)])  # fetched again from next_offset
    assert p.offsets == [1, 3]
    assert p.counters.records_dlq == 1 and len(p.take_dead_letters()) == 1


def test_a_failing_partition_reads_nothing_ahead_and_stops_there() -> None:
    p = _participant(fail_on_error=True)
    _reported(p, 0, 1)
    p.accept([bad(1), good(2)])
    assert p.phase is PartitionPhase.ENDING and p.ahead_blocked
    p.begin(T2, 1, 1)
    assert p.next_offset == 1
    p.accept([bad(1)])
    assert p.phase is PartitionPhase.FAILED


def test_read_ahead_holds_at_most_a_buffer() -> None:
    p = _participant(flush_records=3)
    _reported(p, 0, 1)
    p.accept([good(o) for o in range(1, 10)])
    assert p.ahead_blocked
    p.begin(T2, 1, 1)
    assert p.offsets == [1, 2, 3] and p.next_offset == 4
    assert not p.ahead_blocked


def test_no_read_ahead_after_giving_up_or_failing() -> None:
    p = _participant()
    p.begin(T1, 1, 0)
    p.accept([good(0)])
    p.drain(0.0)
    p.end()
    assert p.give_up(T1, "flush failed for good")
    assert p.start_ahead() is None
    p = _participant()
    _reported(p, 0, 2)
    assert p.give_up(T1, "flush failed for good")  # while the report ran
    assert p.ahead is None
    p.accept([good(2)])
    p.begin(T2, 1, 0)
    assert (p.offsets, p.next_offset) == ([], 0)


def test_a_draining_partition_is_drained_once_fetched_up_to_the_high_watermark_of_end() -> None:
    """Records keep coming (every fetch round brings some): the drain ends when the fetches
    reach the high watermark END found, not after DRAIN_MAX_S; later records are read ahead."""
    p = _participant()
    p.begin(T1, 1, 0)
    p.accept([good(0), good(1)])
    p.highwater = 4
    p.drain(0.0)
    p.accept([good(2)])
    assert not p.is_drained(0.1, fetched_now=True)
    p.accept([good(3), good(4)])
    assert not p.is_drained(0.01, fetched_now=True)  # not before DRAIN_MIN_S
    assert p.is_drained(0.1, fetched_now=True)
