"""Back-pressure in the participant's intake: a full buffer that may not flush yet pauses its
partition, so memory stays bounded by about two ``flush_records`` per partition (its buffer
and its flush) whatever the backlog; when a flush finishes, a held partition flushes and
resumes. Driven with a flusher that blocks until the test lets it finish."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiokafka import TopicPartition as KafkaTopicPartition
from test_participant_control import FakeConsumer

from hudi_sink.services.participant.assignment import PartitionRegistry
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.dlq_sender import DeadLetterSender
from hudi_sink.services.participant.flusher import FlushResult
from hudi_sink.services.participant.intake import Intake
from hudi_sink.services.participant.runtime import BackgroundTasks, ParticipantClients, Runtime
from hudi_sink.services.participant.transaction import PendingBuffer, TransactionParticipant
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.runtime.metrics import Metrics

TOPIC = "bp"
SCHEMA = TableConfig(schema="id STRING", record_key_field="id").table_schema()
FLUSH_RECORDS = 10


class Rec:
    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.value = orjson.dumps({"id": f"id-{offset}"})
        self.key = None
        self.timestamp = 0


class PausingConsumer(FakeConsumer):
    def __init__(self, partitions: list[KafkaTopicPartition]) -> None:
        super().__init__()
        self.assigned = set(partitions)


class GatedFlusher:
    """Each flush waits until the test releases it."""

    def __init__(self) -> None:
        self.started: list[tuple[int, int]] = []
        self.gates: dict[tuple[int, int], asyncio.Event] = {}

    async def flush(self, state: TransactionParticipant, buffer: PendingBuffer) -> FlushResult:
        key = (state.partition, buffer.flush_no)
        self.started.append(key)
        gate = self.gates.setdefault(key, asyncio.Event())
        await gate.wait()
        return FlushResult([])

    def release(self, partition: int, flush_no: int) -> None:
        self.gates.setdefault((partition, flush_no), asyncio.Event()).set()


def _intake(partitions: int) -> tuple[Intake, PausingConsumer, GatedFlusher, PartitionRegistry]:
    ktps = [KafkaTopicPartition(TOPIC, p) for p in range(partitions)]
    consumer = PausingConsumer(ktps)

    def new_state(topic: str, partition: int) -> TransactionParticipant:
        return TransactionParticipant(topic=topic, partition=partition,
                                      decoder=RecordDecoder(SCHEMA, 1 << 20),
                                      flush_records=FLUSH_RECORDS, fail_on_error=False)

    registry = PartitionRegistry(new_state)
    registry.assigned(ktps)
    registry.apply()
    for state in registry.active.values():
        state.begin("20250101000000001", 1, 0)
    clients = ParticipantClients(producer=None, channel=None,  # type: ignore[arg-type]
                                 consumer=consumer,  # type: ignore[arg-type]
                                 dlq=DeadLetterSender(None, "bp-dlq"))  # type: ignore[arg-type]
    runtime = Runtime(clients=clients, registry=registry, metrics=Metrics("participant"),
                      tasks=BackgroundTasks("participant"), clock=lambda: 0.0)
    flusher = GatedFlusher()
    intake = Intake(runtime, flusher, None)  # type: ignore[arg-type]
    return intake, consumer, flusher, registry


def _fill(intake: Intake, state: TransactionParticipant) -> None:
    """Accept one buffer's worth of records, as the data routine does after a fetch."""
    first = state.next_offset
    state.accept([Rec(o) for o in range(first, first + FLUSH_RECORDS)])
    assert state.should_flush()
    intake._flush_or_hold(state, KafkaTopicPartition(state.topic, state.partition))


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_full_buffer_waits_for_a_slot_and_pauses_its_partition() -> None:
    intake, consumer, flusher, registry = _intake(2)
    p0, p1 = registry.active[(TOPIC, 0)], registry.active[(TOPIC, 1)]
    _fill(intake, p0)
    _fill(intake, p1)  # the first flush of a partition always starts
    await _settle()
    assert sorted(flusher.started) == [(0, 0), (1, 0)] and not consumer.paused
    _fill(intake, p0)  # both Spark slots are busy: hold the buffer, pause the partition
    await _settle()
    assert sorted(flusher.started) == [(0, 0), (1, 0)]
    assert consumer.paused == {KafkaTopicPartition(TOPIC, 0)}
    assert len(p0.rows) == FLUSH_RECORDS

    flusher.release(1, 0)  # another partition's flush ends: the held buffer goes
    await _settle()
    assert (0, 1) in flusher.started and not p0.rows
    assert consumer.paused == {KafkaTopicPartition(TOPIC, 0)}  # two flushes of its own
    flusher.release(0, 0)
    await _settle()
    assert not consumer.paused
    flusher.release(0, 1)
    await _settle()
    assert not p0.flushes and not p1.flushes


async def test_a_lone_partition_uses_both_slots_then_pauses() -> None:
    intake, consumer, flusher, registry = _intake(1)
    p0 = registry.active[(TOPIC, 0)]
    _fill(intake, p0)
    _fill(intake, p0)
    await _settle()
    assert flusher.started == [(0, 0), (0, 1)]
    assert consumer.paused == {KafkaTopicPartition(TOPIC, 0)}  # two flushes in flight
    flusher.release(0, 0)
    await _settle()
    assert not consumer.paused
    flusher.release(0, 1)
    await _settle()


def test_memory_bound_holds_over_a_long_backlog() -> None:
    """Whatever arrives, a partition never holds more than its buffer and two flushes."""

    async def scenario() -> None:
        intake, consumer, flusher, registry = _intake(4)
        states = list(registry.active.values())
        for _round in range(20):
            for state in states:
                ktp = KafkaTopicPartition(state.topic, state.partition)
                if ktp not in consumer.paused:
                    _fill(intake, state)
            await _settle()
            held = sum(len(s.rows) for s in states) + FLUSH_RECORDS * sum(len(s.flushes) for s in states)
            assert held <= 2 * FLUSH_RECORDS * len(states)
            started: Any = list(flusher.started)
            for key in started[:1]:  # Spark finishes one flush per round
                flusher.release(*key)
            flusher.started = started[1:]
            await _settle()

    asyncio.run(scenario())


class RecordingReporter:
    def __init__(self) -> None:
        self.sent: list[tuple[int, str]] = []

    async def send_status(self, state: TransactionParticipant, instant: str) -> None:
        self.sent.append((state.partition, instant))


async def test_a_draining_partition_that_fills_its_buffer_reports_at_once() -> None:
    """END with a backlog: the partition stops at its first full buffer (paused, flushed,
    reported) instead of taking records for the whole drain and flushing all of them."""
    intake, consumer, flusher, registry = _intake(1)
    reporter = RecordingReporter()
    intake._reporter = reporter  # type: ignore[assignment]
    p0 = registry.active[(TOPIC, 0)]
    p0.drain(0.0)
    p0.accept([Rec(o) for o in range(FLUSH_RECORDS)])
    intake._buffer_full(p0, KafkaTopicPartition(TOPIC, 0))
    await _settle()
    assert flusher.started == [(0, 0)] and not p0.rows and not p0.accepting
    p0.accept([Rec(o) for o in range(FLUSH_RECORDS, 2 * FLUSH_RECORDS)])  # fetched later
    assert not p0.rows and p0.next_offset == FLUSH_RECORDS  # left for the next instant
    assert p0.ahead is not None and p0.ahead.start == FLUSH_RECORDS  # which may adopt them
    assert reporter.sent == []  # the status waits for the flush
    flusher.release(0, 0)
    await _settle()
    assert reporter.sent == [(0, "20250101000000001")]


async def test_a_writing_partition_that_fills_its_buffer_flushes_and_keeps_going() -> None:
    intake, consumer, flusher, registry = _intake(1)
    p0 = registry.active[(TOPIC, 0)]
    p0.accept([Rec(o) for o in range(FLUSH_RECORDS)])
    intake._buffer_full(p0, KafkaTopicPartition(TOPIC, 0))
    await _settle()
    assert flusher.started == [(0, 0)] and p0.accepting and not consumer.paused
    flusher.release(0, 0)
    await _settle()
