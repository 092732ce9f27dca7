"""Records in, staged files out: the participant's data routine and its flushes, up to the
moment a partition's instant is ready to report.

One loop (:meth:`Intake.run`): apply a pending rebalance → fetch → hand records to their
partition's :class:`TransactionParticipant` → register its dead letters → start the flushes
that are due → report the partitions END has drained. Flushes run as background tasks (at
most ``MAX_CONCURRENT_FLUSHES`` per partition; intake of a partition pauses while it has
that many), and a report first pauses its partition and flushes what is left, so the report
tasks live here too; sending the status is the reporter's (:mod:`.reports`).

Every state change is a synchronous block between awaits, so the control handling (which
runs on the same event loop) never sees a partition half-way through one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka import TopicPartition as KafkaTopicPartition

from hudi_sink.services.participant.assignment import PartitionRegistry
from hudi_sink.services.participant.flusher import MAX_CONCURRENT_FLUSHES, Flusher
from hudi_sink.services.participant.reports import Reporter
from hudi_sink.services.participant.runtime import Runtime
from hudi_sink.services.participant.transaction import PendingBuffer, TransactionParticipant
from hudi_sink.shared.kafka.partition_key import PartitionKey
from hudi_sink.shared.kafka.protocol import TopicPartition
from hudi_sink.shared.runtime.logs import log_context
from hudi_sink.shared.runtime.states import PartitionPhase

__all__ = ["Intake", "RebalanceSignal", "SchemaFetches"]

log = logging.getLogger("hudi_sink.participant")


class RebalanceSignal(ConsumerRebalanceListener):
    """Records what the group did; the data routine acts on it at the top of its loop.
    Newly assigned partitions stay paused until their START (or their kept state) says
    where to read from."""

    def __init__(self, registry: PartitionRegistry, consumer: AIOKafkaConsumer) -> None:
        self._registry = registry
        self._consumer = consumer

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self._registry.revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        assigned = list(assigned)
        if assigned:
            self._consumer.pause(*assigned)
        self._registry.assigned(assigned)


class SchemaFetches(Protocol):
    """Writer-schema fetches running off the loop (``BackgroundSchemas``)."""

    @property
    def settled(self) -> int:
        """Fetches ended so far: a change may let a deferred partition decode."""

    @property
    def fetching(self) -> int:
        """Fetches running now."""


class Intake:
    def __init__(self, runtime: Runtime, flusher: Flusher, reporter: Reporter,
                 *, defer_s: float = 2.0, fetches: SchemaFetches | None = None) -> None:
        self._rt = runtime
        self._consumer = runtime.clients.consumer
        self._flusher = flusher
        self._reporter = reporter
        self._reports: dict[PartitionKey, asyncio.Task[Any]] = {}
        """The running END report of each partition (at most one)."""
        self._defer_s = defer_s
        self._fetches = fetches
        self._deferred: dict[PartitionKey, tuple[KafkaTopicPartition, float, int]] = {}
        """Partitions paused before a record that cannot be decoded now: when to retry, and
        ``fetches.settled`` then (a fetch settling since retries at once)."""

    # --- the data routine ------------------------------------------------------------------
    async def run(self) -> None:
        consumer, registry, metrics = self._consumer, self._rt.registry, self._rt.metrics
        dlq = self._rt.clients.dlq
        while True:
            if registry.has_pending:
                self._apply_assignment()
            if self._deferred:
                self._retry_deferred()
            batches = await consumer.getmany(timeout_ms=100, max_records=20000)
            fetched = {(ktp.topic, ktp.partition) for ktp in batches}
            for ktp, records in batches.items():
                state = registry.active.get((ktp.topic, ktp.partition))
                if state is None:
                    continue
                metrics.records_consumed(ktp.topic, len(records))
                state.accept(records)
                if state.ahead_blocked or not (state.accepting or state.reading_ahead):
                    consumer.pause(ktp)  # nothing takes its records until START
                if state.deferred is not None:
                    self._defer(ktp, state)
                state.highwater = consumer.highwater(ktp)
                letters = state.take_dead_letters()
                if letters:  # registered now, before any await: a report cannot miss them
                    sent = dlq.enqueue(state.key, letters)
                    metrics.records_dead_lettered(state.topic, sent)
                if state.phase is PartitionPhase.FAILED and state.gave_up is None:
                    consumer.pause(ktp)
                    metrics.partition_failed(ktp.topic, ktp.partition, True)
                    log.error("partition failed (errors.tolerance=fail): %s", state.failure,
                              extra={"topic": state.topic, "partition": state.partition})
                    if state.drain_started is not None:  # END already asked: report now
                        self.begin_report(state)
                if state.should_flush():
                    self._buffer_full(state, ktp)
                lag = state.lag()
                if lag is not None:
                    metrics.partition_lag(ktp.topic, ktp.partition, lag)
            now = self._rt.clock()
            for state in list(registry.active.values()):
                if state.is_drained(now, state.key in fetched):
                    self.begin_report(state)
            # Back-pressure only here, after every fetched record was taken in: an await
            # inside the loop would let a START move a partition back while records fetched
            # before it were still to be accepted into the new instant.
            await dlq.wait_for_space()

    def _apply_assignment(self) -> None:
        applied = self._rt.registry.apply()
        if applied is None:
            return
        for ktp, state in applied.owned:
            if state.phase is PartitionPhase.WRITING:
                self._consumer.seek(ktp, state.next_offset)
                self._consumer.resume(ktp)
        for state in applied.abandoned:
            self._rt.metrics.partition_failed(state.topic, state.partition, False)
            log.info("partition %s-%d moved away (instant %s abandoned here)", state.topic,
                     state.partition, state.instant)
        fresh = [TopicPartition(topic=k.topic, partition=k.partition) for k, _ in applied.owned]
        log.info("assigned %s", sorted(f"{t.topic}-{t.partition}" for t in fresh))
        if fresh:
            self._reporter.announce_soon(fresh)

    def _defer(self, ktp: KafkaTopicPartition, state: TransactionParticipant) -> None:
        """A record cannot be decoded now (its writer schema is being fetched, the registry
        is out of reach, or the table must evolve for it first): read it again from there after
        ``defer_s``, or as soon as a schema fetch settles, instead of dead-lettering good data.
        Until then the partition is paused; an END meanwhile reports the offsets before it."""
        fetches = self._fetches
        expected = (fetches is not None and fetches.fetching) or state.proposed_schema is not None
        log.log(logging.INFO if expected else logging.WARNING,  # a fetch, or schema evolution
                "%s-%d paused at offset %d for at most %.1f s: %s", state.topic,
                state.partition, state.next_offset, self._defer_s, state.deferred)
        state.deferred = None
        self._consumer.seek(ktp, state.next_offset)
        self._consumer.pause(ktp)
        self._deferred[state.key] = (ktp, self._rt.clock() + self._defer_s,
                                     fetches.settled if fetches is not None else 0)

    def _retry_deferred(self) -> None:
        now = self._rt.clock()
        settled = self._fetches.settled if self._fetches is not None else 0
        for key, (ktp, at, seen) in list(self._deferred.items()):
            if now < at and settled == seen:
                continue
            del self._deferred[key]
            state = self._rt.registry.active.get(key)
            if (state is not None and state.accepting and len(state.flushes) < MAX_CONCURRENT_FLUSHES
                    and ktp in self._consumer.assignment()):
                self._consumer.resume(ktp)

    def fetch_from_start(self, state: TransactionParticipant) -> None:
        """START began the partition's instant: fetch on past what it adopted from read-ahead
        (none: its START offset). A buffer adopted full flushes (insert mode) or waits for
        END paused (upsert mode), as a buffer filled by a fetch would."""
        ktp = KafkaTopicPartition(state.topic, state.partition)
        if ktp not in self._consumer.assignment():
            return
        self._consumer.seek(ktp, state.next_offset)
        self._consumer.resume(ktp)
        if state.should_flush():
            self._flush_or_hold(state, ktp)

    def _read_ahead(self, state: TransactionParticipant) -> None:
        """The instant's records are all taken: fetch on from its end while the report runs
        (``services.participant.read_ahead``). The seek drops whatever was fetched past the
        end before the pause, so the held records follow the instant's without a gap."""
        fetch_from = state.start_ahead()
        ktp = KafkaTopicPartition(state.topic, state.partition)
        if fetch_from is None or ktp not in self._consumer.assignment():
            return
        self._consumer.seek(ktp, fetch_from)
        if not state.ahead_blocked:
            self._consumer.resume(ktp)

    def pause(self, state: TransactionParticipant) -> None:
        ktp = KafkaTopicPartition(state.topic, state.partition)
        if ktp in self._consumer.assignment():
            self._consumer.pause(ktp)

    # --- flushes ---------------------------------------------------------------------------
    def _start_flush(self, state: TransactionParticipant,
                     final: bool = False) -> asyncio.Task[Any] | None:
        buffer = state.take_buffer(final)
        if buffer is None:
            return None
        task = self._rt.tasks.spawn(self._flush(state, buffer),
                                    f"flush-{state.topic}-{state.partition}")
        state.flushes.add(task)
        task.add_done_callback(lambda t: self._flush_done(state, t))
        return task

    def _may_flush(self, state: TransactionParticipant) -> bool:
        """A partition's first flush may always start; a second one only while a Spark slot
        is free (a single busy partition still uses both slots)."""
        if not state.flushes:
            return True
        if len(state.flushes) >= MAX_CONCURRENT_FLUSHES:
            return False
        return sum(len(s.flushes) for s in self._rt.registry.active.values()) < MAX_CONCURRENT_FLUSHES

    def _buffer_full(self, state: TransactionParticipant, ktp: KafkaTopicPartition) -> None:
        """A draining partition whose buffer fills has enough for this instant: it reports
        now instead of draining on (a backlog would otherwise keep it taking records for
        DRAIN_MAX_S and then flushing all of them, which is what END waits for). What it has
        not fetched yet goes to the next instant."""
        if state.phase is PartitionPhase.DRAINING:
            self.begin_report(state)
        else:
            self._flush_or_hold(state, ktp)

    def _flush_or_hold(self, state: TransactionParticipant, ktp: KafkaTopicPartition) -> None:
        """Back-pressure: a full buffer that may not flush yet pauses its partition until a
        flush finishes (``_flush_done``), so a process holds at most about two
        ``flush_records`` per partition (its buffer and its flush), whatever the backlog."""
        if self._may_flush(state):
            self._start_flush(state)
        if state.should_flush() or len(state.flushes) >= MAX_CONCURRENT_FLUSHES:
            self._consumer.pause(ktp)

    def _flush_done(self, state: TransactionParticipant, task: asyncio.Task[Any]) -> None:
        state.flushes.discard(task)
        if not task.cancelled():  # cancelled: the service is stopping
            for waiting in list(self._rt.registry.active.values()):
                if waiting is not state and waiting.should_flush() and self._may_flush(waiting):
                    self._start_flush(waiting)  # held by back-pressure: its turn now
                    self._resume_if_free(waiting)
            if state.should_flush() and self._may_flush(state):
                self._start_flush(state)
        if (
            state.phase is PartitionPhase.FAILED
            and state.gave_up is not None
            and state.drain_started is not None
            and not self.reporting(state)
        ):
            self.begin_report(state)  # END already asked and is waiting on us
        self._resume_if_free(state)

    def _resume_if_free(self, state: TransactionParticipant) -> None:
        if (
            state.accepting
            and len(state.flushes) < MAX_CONCURRENT_FLUSHES
            and not state.should_flush()  # a full buffer waits for its flush
            and self._rt.registry.active.get(state.key) is state
            and state.key not in self._deferred  # waits for its retry time
        ):
            with contextlib.suppress(Exception):
                self._consumer.resume(KafkaTopicPartition(state.topic, state.partition))

    async def _flush(self, state: TransactionParticipant, buffer: PendingBuffer) -> None:
        """Write one buffer (``Flusher``) and record the outcome on the partition. A flush
        that failed for good makes the partition give the instant up: reporting its offsets
        anyway would commit offsets no file holds; the next instant re-reads the records.
        Its log lines (and its worker threads') name the partition and instant in JSON."""
        with log_context(topic=state.topic, partition=state.partition, instant=buffer.instant):
            await self._flush_in_context(state, buffer)

    async def _flush_in_context(self, state: TransactionParticipant, buffer: PendingBuffer) -> None:
        result = await self._flusher.flush(state, buffer)
        if result.failure is not None:
            log.error("%s; the partition reports nothing of this instant and writes it again "
                      "in the next one", result.failure)
            if state.give_up(buffer.instant, result.failure):
                self.pause(state)
            return
        if result.files is None:
            # Refused: the rows were not written. If this state still holds the instant (it
            # was abandoned to another member), it must not report their offsets either.
            state.give_up(buffer.instant, "partition moved to another member before a flush")
            return
        if state.add_staged(buffer.instant, result.files, result.outcomes):
            self._rt.metrics.records_written(state.topic,
                                             sum(f.new_records for f in result.files))
        else:
            log.info("%s-%d: flush for %s finished after the partition left that instant; "
                     "its files stay unlisted (deleted by the deleter's staging sweep)",
                     state.topic, state.partition, buffer.instant)

    # --- reports ---------------------------------------------------------------------------
    def reporting(self, state: TransactionParticipant) -> bool:
        """Whether a report of this partition is running."""
        task = self._reports.get(state.key)
        return task is not None and not task.done()

    def begin_report(self, state: TransactionParticipant) -> None:
        """The partition is drained (or failed): end its instant and report it."""
        assert state.instant is not None
        state.end()
        self.report(state, state.instant)

    def report(self, state: TransactionParticipant, instant: str) -> None:
        """Start the report of ``instant`` (again, when an earlier one failed)."""
        self._reports[state.key] = self._rt.tasks.spawn(
            self._report(state, instant), f"end-{state.topic}-{state.partition}"
        )

    async def _report(self, state: TransactionParticipant, instant: str) -> None:
        """END_COMMIT: pause, flush the rest, then let the reporter wait for the dead
        letters' acks and send WRITE_STATUS."""
        if state.abandoned:
            return  # the partition moved away: its new owner reports it
        self.pause(state)
        self._start_flush(state, final=True)
        self._read_ahead(state)
        if state.flushes:
            await asyncio.gather(*list(state.flushes), return_exceptions=True)
        with log_context(topic=state.topic, partition=state.partition, instant=instant):
            await self._reporter.send_status(state, instant)
