"""The participant's protocol handling driven over the in-memory control bus: START seeks,
END drains and reports, ACK commits group offsets, stale epochs are dropped, lost messages
are answered (announcements, status re-sends). A fake consumer and flusher stand in for
Kafka and Spark, so each case takes milliseconds; the subprocess tests prove the rest."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from aiokafka import TopicPartition as KafkaTopicPartition
from eventually import eventually_async
from manual_clock import ManualClock
from memory_channel import MemoryChannel, MemoryControlBus

from hudi_sink.services.participant.assignment import PartitionRegistry
from hudi_sink.services.participant.control import ControlHandler
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.dlq_sender import DeadLetterSender
from hudi_sink.services.participant.flusher import FlushResult
from hudi_sink.services.participant.intake import Intake
from hudi_sink.services.participant.reports import Reporter
from hudi_sink.services.participant.runtime import BackgroundTasks, ParticipantClients, Runtime
from hudi_sink.services.participant.transaction import PendingBuffer, TransactionParticipant
from hudi_sink.shared.config.settings import TableConfig, TransactionConfig
from hudi_sink.shared.kafka.protocol import (
    AckCommit,
    EndCommit,
    Envelope,
    MessageType,
    ParticipantReady,
    PartitionOffset,
    Role,
    Sender,
    StagedFile,
    StartCommit,
    TopicPartition,
    WriteStatus,
)
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.runtime.states import PartitionPhase

TOPIC = "d"
KTP = KafkaTopicPartition(TOPIC, 0)
SCHEMA = TableConfig(schema="id STRING", record_key_field="id").table_schema()
T1, T2 = "20250101000000001", "20250101000000002"


@dataclass(frozen=True)
class Rec:
    offset: int
    value: bytes | None
    key: bytes | None = None
    timestamp: int = 0


class FakeConsumer:
    """What the participant calls on its consumer, recorded; the test hands it records with
    :meth:`deliver`."""

    def __init__(self) -> None:
        self.assigned = {KTP}
        self.paused: set[KafkaTopicPartition] = set()
        self.seeks: list[tuple[KafkaTopicPartition, int]] = []
        self.committed: dict[KafkaTopicPartition, int] = {}
        self.batches: list[dict[KafkaTopicPartition, list[Rec]]] = []
        self._delivered = asyncio.Event()

    def assignment(self) -> set[KafkaTopicPartition]:
        return set(self.assigned)

    def pause(self, *tps: KafkaTopicPartition) -> None:
        self.paused.update(tps)

    def resume(self, *tps: KafkaTopicPartition) -> None:
        self.paused.difference_update(tps)

    def seek(self, tp: KafkaTopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))

    def highwater(self, tp: KafkaTopicPartition) -> int:
        return 100

    def deliver(self, batch: dict[KafkaTopicPartition, list[Rec]]) -> None:
        """Records the next ``getmany`` returns (at once, if one is waiting)."""
        self.batches.append(batch)
        self._delivered.set()

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[Any, list[Rec]]:
        """Like a fetch: what was delivered, or ``{}`` after ``timeout_ms`` without any."""
        if not (self.batches and KTP not in self.paused):
            self._delivered.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_ms / 1000):
                    await self._delivered.wait()
        if self.batches and KTP not in self.paused:
            return self.batches.pop(0)
        return {}

    async def commit(self, offsets: dict[KafkaTopicPartition, Any]) -> None:
        self.committed.update({tp: meta.offset for tp, meta in offsets.items()})


class FakeFlusher:
    """Writes nothing; stages one file per buffer."""

    async def flush(self, state: TransactionParticipant, buffer: PendingBuffer) -> FlushResult:
        name = f"f{buffer.flush_no}_0-0-0_{buffer.instant}.parquet"
        return FlushResult([StagedFile(staged_path=f".hoodie/.temp/{buffer.instant}/{name}",
                                       final_path=name, file_id=f"f{buffer.flush_no}",
                                       partition_path="", num_records=len(buffer.rows),
                                       size_bytes=1)])


@dataclass
class Harness:
    coordinator: MemoryChannel
    consumer: FakeConsumer
    registry: PartitionRegistry
    reporter: Reporter
    clock: ManualClock
    """Follows real time (drains need it to pass); the test skips intervals forward."""
    seen: list[Envelope]

    @property
    def state(self) -> TransactionParticipant:
        return self.registry.active[(TOPIC, 0)]

    async def send(self, payload: Any, instant: str | None = T1, epoch: int = 1) -> None:
        await self.coordinator.send(payload, commit_time=instant, epoch=epoch)

    async def expect(self, kind: MessageType, where: Callable[[Envelope], bool] = lambda _: True,
                     timeout_s: float = 5) -> Envelope:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while asyncio.get_running_loop().time() < deadline:
            for envelope in await self.coordinator.receive(timeout_ms=50):
                self.seen.append(envelope)
                if envelope.sender.role is Role.PARTICIPANT and envelope.type is kind \
                        and where(envelope):
                    return envelope
        raise AssertionError(f"no {kind} within {timeout_s} s; saw {[e.type for e in self.seen]}")

    async def quiet(self, kind: MessageType, seconds: float = 0.3) -> None:
        """Assert that no ``kind`` arrives for ``seconds``."""
        with pytest.raises(AssertionError):
            await self.expect(kind, timeout_s=seconds)

    async def phase(self, phase: PartitionPhase) -> None:
        await eventually_async(lambda: self.state.phase is phase, 5, f"{phase} (now {self.state})")


def good(offset: int) -> Rec:
    return Rec(offset, orjson.dumps({"id": f"id-{offset}"}))


@pytest.fixture
async def participant() -> AsyncIterator[Harness]:
    bus = MemoryControlBus("t")
    coordinator = bus.endpoint(Sender(role=Role.COORDINATOR, id="c"))
    channel = bus.endpoint(Sender(role=Role.PARTICIPANT, id="p"))
    consumer = FakeConsumer()
    clock = ManualClock.following_real_time()

    def new_state(topic: str, partition: int) -> TransactionParticipant:
        return TransactionParticipant(topic=topic, partition=partition,
                                      decoder=RecordDecoder(SCHEMA, 1 << 20), flush_records=1000,
                                      fail_on_error=False, clock=clock)

    registry = PartitionRegistry(new_state)
    clients = ParticipantClients(producer=None, channel=channel,  # type: ignore[arg-type]
                                 consumer=consumer,  # type: ignore[arg-type]
                                 dlq=DeadLetterSender(None, "t-dlq"))  # type: ignore[arg-type]
    tasks = BackgroundTasks("participant")
    runtime = Runtime(clients=clients, registry=registry, metrics=Metrics("participant"),
                      tasks=tasks, clock=clock)
    reporter = Reporter(runtime, TransactionConfig(interval_ms=1000, resend_interval_ms=1000))
    intake = Intake(runtime, FakeFlusher(), reporter)  # type: ignore[arg-type]
    control = ControlHandler(runtime, intake, reporter)
    routines = [asyncio.create_task(intake.run()), asyncio.create_task(control.run())]
    registry.assigned([KTP])
    harness = Harness(coordinator, consumer, registry, reporter, clock, [])
    try:
        ready = await harness.expect(MessageType.PARTICIPANT_READY)
        assert isinstance(ready.payload, ParticipantReady)
        assert ready.payload.partitions == [TopicPartition(topic=TOPIC, partition=0)]
        yield harness
    finally:
        for task in routines:
            task.cancel()
        tasks.cancel_all()
        # Cancel until done: under Python 3.11 ``asyncio.wait_for`` (used by the memory bus)
        # swallows a cancellation that arrives as the awaited condition comes true.
        pending = set(routines)
        while pending:
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.5)

def start(offset: int, targets: list[TopicPartition] | None = None) -> StartCommit:
    return StartCommit(offsets=[PartitionOffset(topic=TOPIC, partition=0, offset=offset)],
                       targets=targets)


async def test_start_end_ack_round(participant: Harness) -> None:
    p = participant
    await p.send(start(5))
    await p.phase(PartitionPhase.WRITING)
    assert p.consumer.seeks == [(KTP, 5)] and KTP not in p.consumer.paused
    p.consumer.deliver({KTP: [good(5), good(6), good(8)]})
    await eventually_async(lambda: p.state.next_offset == 9, 5, "offsets 5, 6 and 8 taken")
    await p.send(EndCommit())
    status = await p.expect(MessageType.WRITE_STATUS)
    assert status.commit_time == T1 and status.coordinator_epoch == 1
    assert isinstance(status.payload, WriteStatus)
    assert (status.payload.start_offset, status.payload.next_offset) == (5, 9)
    assert [f.num_records for f in status.payload.files] == [3]
    # Reading ahead from the instant's end while the report ran (and after it).
    assert p.state.phase is PartitionPhase.REPORTED and KTP not in p.consumer.paused
    assert p.consumer.seeks == [(KTP, 5), (KTP, 9)]
    p.consumer.deliver({KTP: [good(9), good(10)]})
    await p.send(AckCommit(offsets=[PartitionOffset(topic=TOPIC, partition=0, offset=9)]))
    await p.phase(PartitionPhase.WAITING)
    await eventually_async(lambda: p.consumer.committed == {KTP: 9}, 5, "the group offset 9 committed")
    assert p.state.committed_offset == 9
    await eventually_async(lambda: p.state.ahead is not None and p.state.ahead.next_offset == 11,
                           5, "offsets 9 and 10 read ahead")
    assert p.state.offsets == []  # no instant holds them yet
    await p.send(start(9), instant=T2)
    await p.phase(PartitionPhase.WRITING)
    assert p.state.offsets == [9, 10] and p.state.next_offset == 11
    assert p.consumer.seeks[-1] == (KTP, 11)  # fetching on past what was adopted


async def test_empty_partition_reports_at_once(participant: Harness) -> None:
    p = participant
    await p.send(start(7))
    await p.phase(PartitionPhase.WRITING)
    await p.send(EndCommit())
    status = await p.expect(MessageType.WRITE_STATUS)
    assert isinstance(status.payload, WriteStatus)
    assert (status.payload.start_offset, status.payload.next_offset) == (7, 7)
    assert status.payload.files == []


async def test_stale_epoch_and_repeated_start_are_ignored(participant: Harness) -> None:
    p = participant
    await p.send(start(5), epoch=2)
    await p.phase(PartitionPhase.WRITING)
    await p.send(start(0), instant=T2, epoch=1)  # an older leader
    await p.send(start(9))  # epoch 1 again: still older than 2
    await p.send(start(5), epoch=2)  # the same START once more
    await p.send(EndCommit(), epoch=2)  # handled after them, in order: its status shows they were
    status = await p.expect(MessageType.WRITE_STATUS)
    assert isinstance(status.payload, WriteStatus) and status.payload.start_offset == 5
    assert (status.commit_time, status.coordinator_epoch) == (T1, 2)
    assert (p.state.instant, p.state.epoch, p.state.start_offset) == (T1, 2, 5)
    assert p.consumer.seeks == [(KTP, 5), (KTP, 5)]  # START, then reading ahead from the end


async def test_new_leader_epoch_is_told_who_owns_what(participant: Harness) -> None:
    p = participant
    await p.send(start(5))
    await p.phase(PartitionPhase.WRITING)
    await p.expect(MessageType.PARTICIPANT_READY)  # to the leader of epoch 1
    await p.send(start(5), instant=T2, epoch=2)
    ready = await p.expect(MessageType.PARTICIPANT_READY)
    assert isinstance(ready.payload, ParticipantReady)
    assert ready.payload.partitions == [TopicPartition(topic=TOPIC, partition=0)]
    assert p.reporter.epochs.announced == 2 and p.state.instant == T2


async def test_end_of_an_instant_never_started_announces(participant: Harness) -> None:
    p = participant
    await p.send(EndCommit())  # its START was lost
    await p.expect(MessageType.PARTICIPANT_READY)
    assert p.state.phase is PartitionPhase.WAITING


async def test_repeated_end_resends_the_status(participant: Harness) -> None:
    p = participant
    await p.send(start(3))
    await p.phase(PartitionPhase.WRITING)
    await p.send(EndCommit())
    first = await p.expect(MessageType.WRITE_STATUS)
    await p.send(EndCommit())  # the coordinator did not get it
    again = await p.expect(MessageType.WRITE_STATUS)
    assert again.payload == first.payload and again.commit_time == first.commit_time


async def test_end_addressed_to_other_partitions_is_ignored(participant: Harness) -> None:
    p = participant
    await p.send(start(3))
    await p.phase(PartitionPhase.WRITING)
    await p.send(EndCommit(targets=[TopicPartition(topic=TOPIC, partition=1)]))
    await p.quiet(MessageType.WRITE_STATUS)
    assert p.state.phase is PartitionPhase.WRITING


async def test_heal_reannounces_silent_partitions_and_resends_statuses(
    participant: Harness,
) -> None:
    p = participant
    await p.reporter.heal(p.clock(), 1.0)  # WAITING, but spoken to just now
    await p.quiet(MessageType.PARTICIPANT_READY, 0.1)
    p.clock.advance(1.5)
    await p.reporter.heal(p.clock(), 1.0)  # WAITING and silent for longer than 1 s
    await p.expect(MessageType.PARTICIPANT_READY)

    await p.send(start(0))
    await p.phase(PartitionPhase.WRITING)
    await p.send(EndCommit())
    status = await p.expect(MessageType.WRITE_STATUS)
    await p.reporter.heal(p.clock(), 1.0)  # just reported: nothing to re-send yet
    await p.quiet(MessageType.WRITE_STATUS, 0.1)
    p.clock.advance(1.5)  # no ACK for longer than an interval: the status was lost
    await p.reporter.heal(p.clock(), 1.0)
    again = await p.expect(MessageType.WRITE_STATUS)
    assert again.payload == status.payload
