"""An upsert partition whose buffer fills before END ends its instant there: it merges at once
and reads ahead for the next instant, but its WRITE_STATUS waits for END (the coordinator asks
for statuses only then), and a START that replaces the instant first means it is never sent.
Insert mode is unchanged (a full buffer flushes and the partition keeps taking records).
Driven with the back-pressure tests' gated flusher and a reporter that records statuses."""

from __future__ import annotations

from aiokafka import TopicPartition as KafkaTopicPartition
from test_intake_backpressure import FLUSH_RECORDS, TOPIC, Rec, RecordingReporter, _intake, _settle

from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.intake import Intake
from hudi_sink.services.participant.keyed.changes import KeyedDecoder
from hudi_sink.services.participant.keyed.envelope import KeyedSpec
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.runtime.states import PartitionPhase

T1, T2 = "20250101000000001", "20250101000000002"
KTP = KafkaTopicPartition(TOPIC, 0)


def _keyed(state: TransactionParticipant) -> None:
    """Make the harness's partition an upsert one (key: ``id``)."""
    schema = TableConfig(schema="id STRING", record_key_field="id").table_schema()
    state.keyed = KeyedDecoder(KeyedSpec(key_fields=("id",)), partitioner="none",
                               precombine_field=None, partitions_of_topic=lambda: None)
    state.decoder = RecordDecoder(schema, 1 << 20, unwrap=state.keyed.unwrap)
    state.begin(T1, 1, 0)


def _filled() -> tuple[Intake, TransactionParticipant, RecordingReporter, object]:
    intake, _consumer, flusher, registry = _intake(1)
    reporter = RecordingReporter()
    intake._reporter = reporter  # type: ignore[assignment]
    state = registry.active[(TOPIC, 0)]
    _keyed(state)
    state.accept([Rec(o) for o in range(FLUSH_RECORDS)])
    assert state.should_flush()
    intake._buffer_full(state, KTP)
    return intake, state, reporter, flusher


async def test_a_full_upsert_buffer_merges_before_end_and_reports_at_end() -> None:
    intake, state, reporter, flusher = _filled()
    await _settle()
    assert flusher.started == [(0, 0)]  # type: ignore[attr-defined]  # the merge runs now
    assert state.phase is PartitionPhase.ENDING and not state.accepting
    assert state.ahead is not None and state.ahead.start == FLUSH_RECORDS  # reads ahead
    state.accept([Rec(o) for o in range(FLUSH_RECORDS, FLUSH_RECORDS + 3)])
    assert state.ahead.next_offset == FLUSH_RECORDS + 3 and len(state.ahead.changes) == 3
    assert state.next_offset == FLUSH_RECORDS  # the instant ends at its full buffer
    flusher.release(0, 0)  # type: ignore[attr-defined]
    await _settle()
    assert reporter.sent == []  # merged, but END has not asked yet
    intake.end_asked(state, T2)  # END of another instant opens nothing
    await _settle()
    assert reporter.sent == []
    intake.end_asked(state, T1)
    await _settle()
    assert reporter.sent == [(0, T1)]
    assert not intake._ended_early


async def test_end_during_the_early_merge_reports_when_it_is_done() -> None:
    intake, state, reporter, flusher = _filled()
    await _settle()
    intake.end_asked(state, T1)
    await _settle()
    assert reporter.sent == []  # the merge still runs
    flusher.release(0, 0)  # type: ignore[attr-defined]
    await _settle()
    assert reporter.sent == [(0, T1)]


async def test_a_start_replacing_the_instant_before_end_sends_nothing_of_it() -> None:
    """The coordinator gave the instant up (a new leader, say) and started another: the early
    merge's files are never listed, and no status of the old instant goes out."""
    intake, state, reporter, flusher = _filled()
    await _settle()
    flusher.release(0, 0)  # type: ignore[attr-defined]
    await _settle()
    state.begin(T2, 2, 0)
    intake.fetch_from_start(state)
    await _settle()
    assert reporter.sent == [] and not intake._ended_early
    assert state.phase is PartitionPhase.WRITING and state.instant == T2


async def test_an_abandoned_partition_sends_nothing_of_its_early_end() -> None:
    intake, state, reporter, flusher = _filled()
    flusher.release(0, 0)  # type: ignore[attr-defined]
    await _settle()
    state.abandoned = True
    intake.end_asked(state, T1)
    await _settle()
    assert reporter.sent == []
