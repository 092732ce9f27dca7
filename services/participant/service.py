"""The participant service: one consumer group over the data topics, one
TransactionParticipant per assigned partition, flushes through the process's SparkSession.

Main loop (``_data_routine``): handle a pending rebalance → fetch → hand records to their
partition → start flushes that are due. Control messages are handled by
``_control_routine`` and lost messages healed by ``_heal_routine``; all three run on one
event loop, and every state change is a synchronous block, so they never interleave inside
one. Spark and file I/O run in worker threads (at most two flushes at a time).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import posixpath
import secrets
import socket
import time
import uuid
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener
from aiokafka import TopicPartition as KafkaTopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata
from fastapi import APIRouter

from services.participant.assignment import PartitionRegistry
from services.participant.decoder import RecordDecoder
from services.participant.dlq_sender import DeadLetterSender, DeadLetterSendError
from services.participant.flusher import MAX_CONCURRENT_FLUSHES, Flusher
from services.participant.rest import PartitionView, build_router
from services.participant.transaction import PendingBuffer, TransactionParticipant
from shared.channel import ControlEndpoint
from shared.clients import KafkaClientFactory
from shared.config import SinkConfig
from shared.faults import Faults
from shared.fs import filesystem_for
from shared.hudi import layout
from shared.hudi.table import HudiTable
from shared.lifecycle import ServiceShell, kafka_prelude
from shared.protocol import (
    AckCommit,
    EndCommit,
    Envelope,
    ParticipantReady,
    Role,
    Sender,
    StartCommit,
    TopicPartition,
)
from shared.schema import TableSchema
from shared.spark_writer import SparkWriter
from shared.states import PartitionPhase

__all__ = ["ParticipantService", "ParticipantClients"]

log = logging.getLogger("hudi_sink.participant")



class _RebalanceSignal(ConsumerRebalanceListener):
    """Records what the group did; the data routine acts on it at the top of its loop."""

    def __init__(self, service: ParticipantService) -> None:
        self._service = service

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self._service._registry.revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._service._assigned(list(assigned))


@dataclass(frozen=True)
class ParticipantClients:
    """What start-up opens; the routines take it as an argument."""

    producer: AIOKafkaProducer
    channel: ControlEndpoint
    consumer: AIOKafkaConsumer
    dlq: DeadLetterSender


class ParticipantService(ServiceShell[ParticipantClients]):
    name = "participant"

    def __init__(self, config: SinkConfig, *, faults: Faults | None = None,
                 clients: KafkaClientFactory | None = None) -> None:
        super().__init__(config)
        self._faults = faults if faults is not None else Faults()
        self._factory = clients if clients is not None else KafkaClientFactory(config)
        self.schema = TableSchema.from_config(config.table)
        self.sender = Sender(role=Role.PARTICIPANT, id=uuid.uuid4().hex, host=socket.gethostname())
        self._fs = filesystem_for(config.table.base_path)
        self._table = HudiTable(self._fs, config.table.base_path)
        self._writer = SparkWriter(config.spark, self._fs)
        self._flusher = Flusher(config, self.schema, self._table, self._writer, self.metrics,
                                self._faults, writer_nonce=secrets.randbelow(2**31))
        self._registry = PartitionRegistry(self._new_partition)
        self._max_epoch = 0
        self._announced_epoch = 0
        """Newest coordinator epoch this process announced its partitions to."""
        self._running: ParticipantClients | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reports: dict[tuple[str, int], asyncio.Task[Any]] = {}
        """The running END report of each partition (at most one)."""

    @property
    def clients(self) -> ParticipantClients:
        if self._running is None:
            raise RuntimeError("participant clients used before start-up finished")
        return self._running

    # --- lifecycle ----------------------------------------------------------------------
    def running_readiness(self) -> list[str]:
        if not self._registry.joined:
            return [f"not yet joined consumer group {self.config.participants_group}"]
        if not self._writer.warmed:
            return ["SparkSession not warmed yet"]
        return []

    def routers(self) -> list[APIRouter]:
        return [build_router(self)]

    def routines(self, running: ParticipantClients) -> dict[str, Coroutine[Any, Any, Any]]:
        log.info("participant %s started (topics %s)", self.sender.id, self.config.kafka.topics)
        return {
            "participant-data": self._data_routine(running.consumer),
            "participant-control": self._control_routine(running.channel),
            "participant-heal": self._heal_routine(),
            "participant-dead-letters": running.dlq.run(),
        }

    async def start(self) -> ParticipantClients:
        cfg = self.config
        await kafka_prelude(cfg, self.set_not_ready, data_topics=True)
        await asyncio.to_thread(self._table.initialize, cfg.table, self.schema)
        self.set_not_ready("starting SparkSession")
        warm_dir = posixpath.join(cfg.table.base_path, layout.SINK_DIR, f"warmup-{self.sender.id}")
        await asyncio.to_thread(self._writer.start, warm_dir)
        await asyncio.to_thread(self._fs.delete_tree, warm_dir)
        producer = await self._factory.producer("hudi-sink-participant")
        channel = await self._factory.channel(self.sender, producer, self._faults)
        consumer = await self._factory.consumer(cfg.participants_group, self.sender.id)
        self._running = ParticipantClients(
            producer=producer, channel=channel, consumer=consumer,
            dlq=DeadLetterSender(producer, cfg.dlq_topic),
        )
        consumer.subscribe(topics=list(cfg.kafka.topics), listener=_RebalanceSignal(self))
        # Buffered rows live until a flush: the default GC thresholds make the collector
        # rescan them constantly (a quarter of decode time, measured in bench/).
        gc.freeze()
        gc.set_threshold(100_000, 20, 100)
        return self._running

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=f"participant-{name}")
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        """Background tasks are observed: an exception is logged, never lost silently."""
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task %s failed: %r", task.get_name(), task.exception(),
                      exc_info=task.exception())

    async def close(self, running: ParticipantClients | None) -> None:
        """Intake has stopped: let reports in progress finish briefly, leave the group,
        stop Spark."""
        ending = [t for t in list(self._tasks) if t.get_name().startswith("participant-end")]
        if ending:
            log.info("participant stopping: waiting for %d report(s)", len(ending))
            await asyncio.wait(ending, timeout=10)
        for task in list(self._tasks):
            task.cancel()
        if running is not None:
            log.info("participant stopping: leaving group")
            await self._factory.close(running.consumer, running.channel, running.producer)
        log.info("participant stopping: SparkSession")
        await asyncio.to_thread(self._writer.stop)

    # --- rebalance ------------------------------------------------------------------------
    def _assigned(self, assigned: list[KafkaTopicPartition]) -> None:
        if self._running is not None and assigned:
            self._running.consumer.pause(*assigned)
        self._registry.assigned(assigned)

    def _apply_assignment(self) -> None:
        applied = self._registry.apply()
        if applied is None:
            return
        consumer = self.clients.consumer
        for ktp, state in applied.owned:
            if state.phase is PartitionPhase.WRITING:
                consumer.seek(ktp, state.next_offset)
                consumer.resume(ktp)
        for state in applied.abandoned:
            self.metrics.partition_failed(state.topic, state.partition, False)
            log.info("partition %s-%d moved away (instant %s abandoned here)", state.topic,
                     state.partition, state.instant)
        fresh = [TopicPartition(topic=k.topic, partition=k.partition) for k, _ in applied.owned]
        log.info("assigned %s", sorted(f"{t.topic}-{t.partition}" for t in fresh))
        if fresh:
            self._spawn(self._announce(fresh), "announce")

    def _new_partition(self, topic: str, partition: int) -> TransactionParticipant:
        return TransactionParticipant(
            topic=topic,
            partition=partition,
            decoder=RecordDecoder(self.schema, self.config.errors.max_record_bytes,
                                  hive_style=self.config.table.hive_style_partitioning),
            flush_records=self.config.transaction.flush_records,
            fail_on_error=self.config.errors.tolerance == "fail",
        )

    async def _announce(self, partitions: list[TopicPartition]) -> None:
        self._announced_epoch = max(self._announced_epoch, self._max_epoch)
        await self.clients.channel.send(ParticipantReady(partitions=partitions), commit_time=None, epoch=0)
        now = time.monotonic()
        for tp in partitions:
            state = self._registry.active.get(tp.key())
            if state is not None:
                state.last_signal_at = now

    # --- data ---------------------------------------------------------------------------
    async def _data_routine(self, consumer: AIOKafkaConsumer) -> None:
        while True:
            if self._registry.has_pending:
                self._apply_assignment()
            batches = await consumer.getmany(timeout_ms=100, max_records=20000)
            fetched = {(ktp.topic, ktp.partition) for ktp in batches}
            for ktp, records in batches.items():
                state = self._registry.active.get((ktp.topic, ktp.partition))
                if state is None:
                    continue
                self.metrics.records_consumed(ktp.topic, len(records))
                state.accept(records)
                state.highwater = consumer.highwater(ktp)
                letters = state.take_dead_letters()
                if letters:  # registered now, before any await: a report cannot miss them
                    sent = self.clients.dlq.enqueue(state.key, letters)
                    self.metrics.records_dead_lettered(state.topic, sent)
                if state.phase is PartitionPhase.FAILED and state.gave_up is None:
                    consumer.pause(ktp)
                    self.metrics.partition_failed(ktp.topic, ktp.partition, True)
                    log.error("partition failed (errors.tolerance=fail): %s", state.failure)
                    if state.drain_started is not None:  # END already asked: report now
                        self._begin_report(state)
                if state.should_flush():
                    self._start_flush(state)
                    if len(state.flushes) >= MAX_CONCURRENT_FLUSHES:
                        consumer.pause(ktp)  # back-pressure until a flush finishes
                lag = state.lag()
                if lag is not None:
                    self.metrics.partition_lag(ktp.topic, ktp.partition, lag)
            now = time.monotonic()
            for state in list(self._registry.active.values()):
                if state.is_drained(now, state.key in fetched):
                    self._begin_report(state)
            # Back-pressure only here, after every fetched record was taken in: an await
            # inside the loop would let a START move a partition back while records fetched
            # before it were still to be accepted into the new instant.
            await self.clients.dlq.wait_for_space()

    def _start_flush(self, state: TransactionParticipant) -> asyncio.Task[Any] | None:
        buffer = state.take_buffer()
        if buffer is None:
            return None
        task = self._spawn(self._flush(state, buffer), f"flush-{state.topic}-{state.partition}")
        state.flushes.add(task)
        task.add_done_callback(lambda t: self._flush_done(state, t))
        return task

    def _flush_done(self, state: TransactionParticipant, task: asyncio.Task[Any]) -> None:
        state.flushes.discard(task)
        if (
            state.phase is PartitionPhase.FAILED
            and state.gave_up is not None
            and state.drain_started is not None
            and not self._reporting(state)
        ):
            self._begin_report(state)  # END already asked and is waiting on us
        if (
            self._running is not None
            and state.accepting
            and len(state.flushes) < MAX_CONCURRENT_FLUSHES
            and self._registry.active.get(state.key) is state
        ):
            with contextlib.suppress(Exception):
                self._running.consumer.resume(KafkaTopicPartition(state.topic, state.partition))

    async def _flush(self, state: TransactionParticipant, buffer: PendingBuffer) -> None:
        """Write one buffer (``Flusher``) and record the outcome on the partition. A flush
        that failed for good makes the partition give the instant up: reporting its offsets
        anyway would commit offsets no file holds; the next instant re-reads the records."""
        result = await self._flusher.flush(state, buffer)
        if result.failure is not None:
            log.error("%s; the partition reports nothing of this instant and writes it again "
                      "in the next one", result.failure)
            if state.give_up(buffer.instant, result.failure):
                self._pause(state)
            return
        if result.files is None:
            # Refused: the rows were not written. If this state still holds the instant (it
            # was abandoned to another member), it must not report their offsets either.
            state.give_up(buffer.instant, "partition moved to another member before a flush")
            return
        if state.add_staged(buffer.instant, result.files):
            self.metrics.records_written(state.topic, sum(f.num_records for f in result.files))
        else:
            log.info("%s-%d: flush for %s finished after the partition left that instant; "
                     "its files stay unlisted (deleted by the deleter's staging sweep)",
                     state.topic, state.partition, buffer.instant)

    def _pause(self, state: TransactionParticipant) -> None:
        if self._running is None:
            return
        ktp = KafkaTopicPartition(state.topic, state.partition)
        if ktp in self._running.consumer.assignment():
            self._running.consumer.pause(ktp)

    # --- control ------------------------------------------------------------------------
    async def _control_routine(self, channel: ControlEndpoint) -> None:
        while True:
            for envelope in await channel.receive(timeout_ms=200):
                self._on_control(envelope)

    def _on_control(self, envelope: Envelope) -> None:
        if envelope.sender.role is not Role.COORDINATOR:
            return
        if envelope.coordinator_epoch < self._max_epoch:
            log.debug("dropped %s of stale epoch %d", envelope.type, envelope.coordinator_epoch)
            return
        self._max_epoch = envelope.coordinator_epoch
        payload = envelope.payload
        if envelope.commit_time is None:
            return
        if isinstance(payload, StartCommit):
            self._on_start(envelope.commit_time, envelope.coordinator_epoch, payload)
        elif isinstance(payload, EndCommit):
            self._on_end(envelope.commit_time, envelope.coordinator_epoch, payload)
        elif isinstance(payload, AckCommit):
            self._on_ack(envelope.commit_time, payload)

    def _targets(self, targets: list[TopicPartition] | None) -> Iterable[TransactionParticipant]:
        if targets is None:
            return list(self._registry.active.values())
        return [self._registry.active[t.key()] for t in targets if t.key() in self._registry.active]

    def _on_start(self, instant: str, epoch: int, start: StartCommit) -> None:
        consumer = self.clients.consumer
        if epoch > self._announced_epoch and self._registry.active:
            # A new leader forgot who owns what: tell it (it waits for an owner before
            # ending an instant, so an unannounced writer would never be asked to report).
            self._announced_epoch = epoch
            self._spawn(self._announce([TopicPartition(topic=t, partition=p)
                                        for t, p in sorted(self._registry.active)]), "announce")
        offsets = {(o.topic, o.partition): o.offset for o in start.offsets}
        for state in self._targets(start.targets):
            if not state.should_begin(instant, epoch):
                state.last_signal_at = time.monotonic()
                continue
            offset = offsets.get(state.key, 0)
            state.begin(instant, epoch, offset)
            self.clients.dlq.begin_instant(state.key, offset)
            self.metrics.partition_failed(state.topic, state.partition, False)
            ktp = KafkaTopicPartition(state.topic, state.partition)
            if ktp in consumer.assignment():
                consumer.seek(ktp, offset)
                consumer.resume(ktp)

    def _on_end(self, instant: str, epoch: int, end: EndCommit) -> None:
        unknown: list[TopicPartition] = []
        for state in self._targets(end.targets):
            if (epoch, instant) > (state.epoch, state.instant or ""):
                # END of an instant we never started: its START was lost. Announce, and the
                # coordinator answers with START (and END) for this partition.
                unknown.append(TopicPartition(topic=state.topic, partition=state.partition))
                continue
            if state.instant != instant or state.epoch != epoch:
                continue
            if state.phase is PartitionPhase.WRITING:
                state.drain(time.monotonic())  # the data routine reports once drained
            elif state.phase is PartitionPhase.FAILED:
                self._begin_report(state)
            elif state.phase is PartitionPhase.ENDING and not self._reporting(state):
                self._spawn_report(state, instant)  # the earlier report failed: try again
            elif state.phase is PartitionPhase.REPORTED and state.last_status is not None:
                # The coordinator re-sent END: our status was lost (or refused because an
                # announcement of ours was lost). Statuses are idempotent.
                self._spawn(self._resend_status(state), "resend")
        if unknown:
            self._spawn(self._announce(unknown), "announce")

    def _reporting(self, state: TransactionParticipant) -> bool:
        task = self._reports.get(state.key)
        return task is not None and not task.done()

    def _begin_report(self, state: TransactionParticipant) -> None:
        assert state.instant is not None
        state.end()
        self._spawn_report(state, state.instant)

    def _spawn_report(self, state: TransactionParticipant, instant: str) -> None:
        self._reports[state.key] = self._spawn(
            self._report(state, instant), f"end-{state.topic}-{state.partition}"
        )

    async def _report(self, state: TransactionParticipant, instant: str) -> None:
        """END_COMMIT: pause, flush the rest, wait for the dead letters' acks, then send
        WRITE_STATUS. A failure before the status is sent leaves the partition in ENDING;
        the coordinator's END re-send starts the report again."""
        if state.abandoned:
            return  # the partition moved away: its new owner reports it
        self._pause(state)
        self._start_flush(state)
        if state.flushes:
            await asyncio.gather(*list(state.flushes), return_exceptions=True)
        if state.instant != instant or state.phase is not PartitionPhase.ENDING:
            return  # a newer START replaced this instant while we flushed
        if state.gave_up is None:
            try:
                await self.clients.dlq.wait_acked(state.key)
            except DeadLetterSendError as exc:
                # A committed offset must never hide a lost dead letter: carry this instant.
                state.give_up(instant, str(exc))
        if state.counters.skipped:
            self.metrics.records_skipped(state.topic, state.counters.skipped)
        if state.instant != instant or state.phase is not PartitionPhase.ENDING:
            return
        status = state.build_status()
        await self.clients.channel.send(status, commit_time=instant, epoch=state.epoch)
        if state.instant == instant and state.phase is PartitionPhase.ENDING:
            state.reported(status)

    async def _resend_status(self, state: TransactionParticipant) -> None:
        """Send the status again; at most once per resend interval announce the partition
        first, so a coordinator that lost our announcement (and refuses our status as not
        the owner's) learns who owns it."""
        # Captured before any await: a START or ACK handled meanwhile changes the state.
        status, instant, epoch = state.last_status, state.instant, state.epoch
        if status is None or instant is None:
            return
        now = time.monotonic()
        if now - state.last_announced_at > self.config.transaction.resend_interval_ms / 1000:
            state.last_announced_at = now
            await self._announce([TopicPartition(topic=state.topic, partition=state.partition)])
        await self.clients.channel.send(status, commit_time=instant, epoch=epoch)
        state.last_signal_at = time.monotonic()

    def _on_ack(self, instant: str, ack: AckCommit) -> None:
        consumer = self.clients.consumer
        offsets = {(o.topic, o.partition): o.offset for o in ack.offsets}
        to_commit: dict[KafkaTopicPartition, OffsetAndMetadata] = {}
        for state in self._registry.active.values():
            if state.instant != instant or state.phase is not PartitionPhase.REPORTED:
                continue
            offset = offsets.get(state.key, state.next_offset)
            state.acked(offset)
            ktp = KafkaTopicPartition(state.topic, state.partition)
            if ktp in consumer.assignment():
                to_commit[ktp] = OffsetAndMetadata(offset, "")
        if to_commit:
            self._spawn(self._commit_group_offsets(to_commit), "commit")

    async def _commit_group_offsets(
        self, offsets: dict[KafkaTopicPartition, OffsetAndMetadata]
    ) -> None:
        """Consumer-group offsets follow Hudi commits, so lag tools see the truth. They are
        never read back for correctness (the table's offsets are)."""
        try:
            await self.clients.consumer.commit(offsets)
        except Exception as exc:  # noqa: BLE001 - informational only; a rebalance may race
            log.debug("group offset commit skipped: %s", exc)

    # --- healing lost messages ------------------------------------------------------------
    async def _heal_routine(self) -> None:
        interval = self.config.transaction.resend_interval_ms / 1000
        while True:
            await asyncio.sleep(interval / 2)
            try:
                await self._heal(time.monotonic(), interval)
            except KafkaError as exc:  # a lost re-send is healed by the next pass
                log.warning("re-announce / status re-send failed, retrying: %r", exc)

    async def _heal(self, now: float, interval: float) -> None:
        # WAITING: no START yet. WRITING for longer than an interval without END: the END
        # (or our announcement to a new leader) was lost. DRAINING / ENDING: END arrived and
        # the report is being prepared (a slow flush): tell the coordinator we are alive, so
        # it waits instead of rolling back an instant nobody answered yet.
        writing_silence = self.config.transaction.interval_ms / 1000 + interval
        working = (PartitionPhase.DRAINING, PartitionPhase.ENDING)
        idle = [
            TopicPartition(topic=s.topic, partition=s.partition)
            for s in self._registry.active.values()
            if (s.phase in (PartitionPhase.WAITING, *working) and now - s.last_signal_at > interval)
            or (s.phase is PartitionPhase.WRITING and now - s.last_signal_at > writing_silence)
        ]
        if idle:
            await self._announce(idle)
        for state in list(self._registry.active.values()):
            if state.phase is PartitionPhase.REPORTED and now - state.last_signal_at > interval:
                await self._resend_status(state)
            lag = state.lag()
            if lag is not None:  # paused partitions are not fetched: keep the gauge fresh
                self.metrics.partition_lag(state.topic, state.partition, lag)

    # --- queries (REST) ----------------------------------------------------------------
    def partition_views(self) -> list[PartitionView]:
        return [
            PartitionView(
                topic=state.topic,
                partition=state.partition,
                state=state.phase.value,
                commit_time=state.instant,
                coordinator_epoch=state.epoch,
                start_offset=state.start_offset,
                buffered_records=len(state.rows),
                staged_files=len(state.staged),
                records_written=state.counters.written,
                records_dlq=state.counters.dlq,
                last_written_offset=state.next_offset - 1 if state.instant else None,
                committed_offset=state.committed_offset,
                fetched_offset=state.fetched_offset,
                lag=state.lag(),
                failed=state.failure,
            )
            for state in sorted(self._registry.active.values(), key=lambda s: s.key)
        ]
