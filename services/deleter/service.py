"""The deleter service: phase 2 of two-phase deletion (DESIGN §4).

One consumer group (``<name>-deleter``) over ``<name>-deletion`` and ``<name>-deletion-retry``.
``_consume_routine`` is the whole service as a short script, one batch per pass:
  resume partitions that became due → fetch → per partition, in offset order:
  not due yet → seek back and pause the partition until due (never sleep on a batch) |
  due → decide from the table's state (``decision.decide``) → delete / keep / re-enqueue →
  commit ``offset + 1`` of what is settled.
An offset is committed only after its effect is durable: the delete returned, or the
re-enqueue to the retry topic or the DLQ was acked. A crash in between redelivers the intent,
which is harmless because deleting is idempotent and the decision is re-taken.

Waiting uses one fixed delay per topic (``send_delay_s`` on the deletion topic,
``reconsume_later_s`` on the retry topic), so the first record that is not due in a partition
is also the earliest: pausing there blocks nothing that could run sooner.

A delete that leaves a finished instant's staging directory without files removes the
directory too. Beside the loop, the member holding partition 0 of the deletion topic runs the
scheduled work (``schedule``): the staging sweep (``staging``) and the orphan scan
(``reconcile``). The DLQ's list and replay live in ``dlq``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError
from aiokafka.structs import ConsumerRecord, TopicPartition
from fastapi import FastAPI

from services.deleter.decision import Decision, Outcome, decide
from services.deleter.dlq import DeletionDlq
from services.deleter.reconcile import Reconciler
from services.deleter.rest import (
    DeletionStats,
    DlqEntry,
    ReconcileResult,
    ReplayResult,
    ServiceUnavailable,
    build_router,
)
from services.deleter.schedule import Schedule, ScheduledWork
from services.deleter.staging import (
    StagingSweeper,
    SweepResult,
    finished_reason,
    remove_if_empty,
    staging_dir_of,
)
from services.deleter.table_state import TableSnapshot, TableStateCache, own_instant, relative_path
from shared.admin import create_admin_app
from shared.config import SinkConfig
from shared.deletion import DeletionDecodeError, IntentHeaders, IntentSender, PendingDelete
from shared.errors import HudiSinkError
from shared.fs import FileInfo, FileSystem, filesystem_for
from shared.kafka import consumer_options, ensure_sink_topics, producer_options, wait_for_kafka
from shared.lifecycle import unless_stopped
from shared.metrics import Metrics

__all__ = ["DeleterService", "DeleterPhase", "Effect"]

log = logging.getLogger("hudi_sink.deleter")


POLL_MS = 500
"""Longest fetch wait: bounds how late a paused partition is resumed and a stop is seen."""
MAX_BATCH = 200
BLOCKED_BACKOFF_S = 1.0
"""Pause before retrying a record whose re-enqueue could not be sent (Kafka trouble)."""
DRAIN_TIMEOUT_S = 10.0
_RUNTIME_ERRORS = (HudiSinkError, OSError, ValueError, TimeoutError)
"""What one attempt may fail with (storage, table metadata); anything else is a bug."""
_SEND_ERRORS = (KafkaError, OSError, TimeoutError)


class DeleterPhase(Enum):
    CREATED = "created"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


class Effect(StrEnum):
    """What handling one intent did (each is a metrics outcome too)."""

    DELETED = "deleted"
    MISSING_ALREADY = "missing_already"
    KEPT_IN_USE = "kept_in_use"
    RETRIED = "retried"
    DLQ = "dlq"


class _Step(Enum):
    """How the partition loop continues after one record."""

    SETTLED = "settled"
    """Effect durable: the offset may be committed."""
    NOT_DUE = "not_due"
    """Before its time: seek back, pause until due."""
    BLOCKED = "blocked"
    """Could not make the effect durable (re-enqueue failed): seek back, back off."""


@dataclass
class _Counters:
    deleted: int = 0
    kept_in_use: int = 0
    retried: int = 0
    dlq: int = 0
    missing_already: int = 0
    failed: int = 0
    undecodable: int = 0
    swept: int = 0
    staging_dirs_removed: int = 0


class _RebalanceSignal(ConsumerRebalanceListener):
    """Keeps the pause bookkeeping in step with the group's assignment."""

    def __init__(self, service: DeleterService) -> None:
        self._service = service

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self._service._forget(list(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._service._joined = True
        log.info("deleter assigned %s", sorted(f"{tp.topic}-{tp.partition}" for tp in assigned))


class DeleterService:
    """Consumes deletion intents and deletes files the table's state says are dead.

    ``fs``, ``clock`` and ``schedule`` are seams for tests (a failing storage, a controlled
    clock, scheduled work kept out of a test about intents); by default storage comes from
    ``table.base_path``, time is the wall clock (intents carry epoch seconds written by other
    processes) and the schedule derives from ``deletion`` (``Schedule.from_config``).
    """

    name = "deleter"

    def __init__(
        self,
        config: SinkConfig,
        *,
        fs: FileSystem | None = None,
        clock: Callable[[], float] = time.time,
        schedule: Schedule | None = None,
    ) -> None:
        self.config = config
        self.metrics = Metrics(self.name)
        self._fs = fs if fs is not None else filesystem_for(config.table.base_path)
        self._clock = clock
        self._table_path = config.table.base_path.rstrip("/") or "/"
        self._cache = TableStateCache(self._fs, config.deletion.cache_expiry_s)
        self._delays = {
            config.deletion_topic: config.deletion.send_delay_s,
            config.deletion_retry_topic: config.deletion.reconsume_later_s,
        }
        self.phase = DeleterPhase.CREATED
        self.counters = _Counters()
        self._stop = asyncio.Event()
        self._not_ready: list[str] = ["starting"]
        self._joined = False
        self._paused: dict[TopicPartition, float] = {}
        """Paused partition → epoch second it is due."""
        self._held: dict[TopicPartition, int] = {}
        """Paused partition → records that were fetched and handed back (pending stat)."""
        self._consumer: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._sender: IntentSender | None = None
        self._dlq = DeletionDlq(config, self._fs, self._table_path, clock=clock, metrics=self.metrics)
        self._reconciler = Reconciler(config.deletion, self._fs, self._table_path, self._cache,
                                      clock=clock, metrics=self.metrics)
        schedule = schedule if schedule is not None else Schedule.from_config(config.deletion)
        self._sweeper = StagingSweeper(self._fs, self._table_path, self._cache, self._sweep_one,
                                       min_age_s=schedule.sweep_min_age_s, clock=clock)
        self.scheduled = ScheduledWork(
            schedule, fs=self._fs, table_path=self._table_path, is_scheduler=self._is_scheduler,
            sweep=self._sweep, reconcile=self._scheduled_reconcile, clock=clock,
            metrics=self.metrics,
        )

    # --- lifecycle ------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Ask the service to stop; idempotent and safe before ``run``."""
        self._stop.set()

    def readiness(self) -> list[str]:
        if self._not_ready:
            return list(self._not_ready)
        if not self._joined:
            return [f"not yet joined consumer group {self.config.deleter_group}"]
        return []

    def admin_app(self) -> FastAPI:
        return create_admin_app(
            self.name,
            readiness=self.readiness,
            metrics=self.metrics,
            token=self.config.admin.token,
            routers=[build_router(self)],
        )

    async def run(self) -> None:
        """Return when fully stopped (after ``shutdown``); raise on a fatal error."""
        if self.phase is not DeleterPhase.CREATED:
            raise RuntimeError("DeleterService.run may be called only once")
        self.phase = DeleterPhase.STARTING
        try:
            if await unless_stopped(self._stop, self._start()):
                await self._serve()
        finally:
            self.phase = DeleterPhase.STOPPING
            await self._close()
            self.phase = DeleterPhase.STOPPED
            self._not_ready = ["stopped"]

    async def _start(self) -> None:
        cfg = self.config
        await wait_for_kafka(cfg.kafka, on_attempt=self._set_not_ready)
        self._not_ready = ["creating topics"]
        await ensure_sink_topics(cfg)
        self._producer = AIOKafkaProducer(**producer_options(cfg.kafka, "hudi-sink-deleter"))
        await self._producer.start()
        self._sender = IntentSender(self._producer, cfg.deletion_topic, metrics=self.metrics)
        self._consumer = AIOKafkaConsumer(**consumer_options(cfg.kafka, cfg.deleter_group))
        await self._consumer.start()
        self._consumer.subscribe(
            topics=[cfg.deletion_topic, cfg.deletion_retry_topic], listener=_RebalanceSignal(self)
        )
        self._not_ready = []
        self.phase = DeleterPhase.RUNNING
        log.info("deleter started on %s and %s (group %s)", cfg.deletion_topic,
                 cfg.deletion_retry_topic, cfg.deleter_group)

    async def _serve(self) -> None:
        routines = [
            asyncio.create_task(self._consume_routine(), name="deleter-consume"),
            asyncio.create_task(self.scheduled.run(self._stop), name="deleter-scheduled"),
        ]
        stop = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait([*routines, stop], return_when=asyncio.FIRST_COMPLETED)
            for routine in routines:
                if routine.done() and not self._stop.is_set():
                    routine.result()  # a crashed routine is a fatal error: re-raise it
                    raise RuntimeError(f"{routine.get_name()} ended while the deleter runs")
            log.info("deleter stopping: stop intake, finish the batch and pass in hand")
            done, pending = await asyncio.wait(routines, timeout=DRAIN_TIMEOUT_S)
            if pending:
                log.warning("deleter stopping: work not finished in %g s, cancelling", DRAIN_TIMEOUT_S)
            for routine in done:
                routine.result()
        finally:
            stop.cancel()
            for routine in routines:
                routine.cancel()
            await asyncio.gather(*routines, return_exceptions=True)

    def _set_not_ready(self, reason: str) -> None:
        self._not_ready = [reason]

    async def _close(self) -> None:
        """Leave the group (uncommitted intents go to another member), then the producer."""
        if self._consumer is not None:
            log.info("deleter stopping: leaving group %s", self.config.deleter_group)
            with contextlib.suppress(Exception):
                await self._consumer.stop()
        if self._producer is not None:
            with contextlib.suppress(Exception):
                await self._producer.stop()
        self._sender = None
        log.info("deleter stopped")

    # --- the loop -------------------------------------------------------------------------
    async def _consume_routine(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        while not self._stop.is_set():
            self._resume_due()
            batch = await consumer.getmany(timeout_ms=self._poll_timeout_ms(), max_records=MAX_BATCH)
            if not batch:
                continue
            results = await asyncio.gather(
                *(self._handle_partition(tp, records) for tp, records in batch.items())
            )
            offsets = {tp: offset for tp, offset in results if offset is not None}
            if offsets:
                await self._commit(offsets)

    def _poll_timeout_ms(self) -> int:
        if not self._paused:
            return POLL_MS
        until_due = min(self._paused.values()) - self._clock()
        return max(10, min(POLL_MS, int(until_due * 1000) + 1))

    def _resume_due(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        now = self._clock()
        due = [tp for tp, at in self._paused.items() if at <= now]
        for tp in due:
            del self._paused[tp]
            self._held.pop(tp, None)
        assigned = consumer.assignment()
        ready = [tp for tp in due if tp in assigned]
        if ready:
            consumer.resume(*ready)

    def _forget(self, revoked: list[TopicPartition]) -> None:
        """Revoked partitions lose their pause (they restart from the committed offset)."""
        for tp in revoked:
            self._paused.pop(tp, None)
            self._held.pop(tp, None)

    def _hold(self, tp: TopicPartition, offset: int, due: float, held: int) -> None:
        """Hand the rest of a fetched batch back: seek to ``offset`` and pause until ``due``.

        The partition is paused rather than slept on, so the other partitions keep flowing
        and the consumer keeps heartbeating.
        """
        consumer = self._consumer
        assert consumer is not None
        if tp not in consumer.assignment():
            return  # revoked meanwhile; the new owner starts from the committed offset
        consumer.seek(tp, offset)
        consumer.pause(tp)
        self._paused[tp] = due
        self._held[tp] = held

    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        consumer = self._consumer
        assert consumer is not None
        assigned = consumer.assignment()
        mine = {tp: offset for tp, offset in offsets.items() if tp in assigned}
        if not mine:
            return
        try:
            await consumer.commit(mine)
        except (CommitFailedError, IllegalStateError, KafkaError) as exc:
            # A rebalance took the partitions: the new owner redelivers, and handling an
            # intent twice is harmless (idempotent delete, decision re-taken).
            log.warning("offset commit failed (%s); intents will be redelivered", exc)

    async def _handle_partition(
        self, tp: TopicPartition, records: list[ConsumerRecord]
    ) -> tuple[TopicPartition, int | None]:
        """Settle records in offset order; return the offset to commit (last settled + 1)."""
        delay = self._delays.get(tp.topic, 0.0)
        next_offset: int | None = None
        settled = 0
        for index, record in enumerate(records):
            if self._stop.is_set():
                break
            step, due = await self._handle_record(record, delay)
            if step is not _Step.SETTLED:
                self._hold(tp, record.offset, due, len(records) - index)
                break
            next_offset = record.offset + 1
            settled += 1
        if settled:
            source = "deletion" if tp.topic == self.config.deletion_topic else "retry"
            self.metrics.deletion_intents_settled(source, settled)
        return tp, next_offset

    def _due(self, record: ConsumerRecord, intent: PendingDelete, delay: float) -> float:
        """When the record may be handled: its not-before, capped by the topic's fixed delay
        after the record's timestamp, so a wrong or forged not-before cannot stall a
        partition for longer than that delay."""
        if record.timestamp is None or record.timestamp <= 0:
            return intent.not_before
        return min(intent.not_before, record.timestamp / 1000 + delay)

    async def _handle_record(self, record: ConsumerRecord, delay: float) -> tuple[_Step, float]:
        try:
            intent = PendingDelete.decode(record.value)
        except DeletionDecodeError as exc:
            return await self._dead_letter_undecodable(record, exc), self._clock() + BLOCKED_BACKOFF_S
        due = self._due(record, intent, delay)
        if due > self._clock():
            return _Step.NOT_DUE, due
        try:
            effect, rule = await self._settle(intent)
        except _RUNTIME_ERRORS as exc:
            self.counters.failed += 1
            self.metrics.deletion("failed")
            log.warning("deleting %s failed (attempt %d): %s: %s", intent.file_path,
                        intent.attempt, type(exc).__name__, exc)
            error_class, message = type(exc).__name__, str(exc) or type(exc).__name__
        else:
            if effect is not None:
                self._count(effect)
                log.info("%s %s (%s)", effect.value, intent.file_path, rule)
                await self._prune_staging(intent.file_path, effect)
                return _Step.SETTLED, 0.0
            error_class, message = "NotYetDecidable", rule
        try:
            await self._requeue(record, intent, error_class, message)
        except _SEND_ERRORS as exc:
            log.error("cannot re-enqueue intent for %s: %s; retrying in %g s", intent.file_path,
                      exc, BLOCKED_BACKOFF_S)
            return _Step.BLOCKED, self._clock() + BLOCKED_BACKOFF_S
        return _Step.SETTLED, 0.0

    def _count(self, effect: Effect) -> None:
        setattr(self.counters, effect.value, getattr(self.counters, effect.value) + 1)
        self.metrics.deletion(effect.value)

    async def _settle(self, intent: PendingDelete) -> tuple[Effect | None, str]:
        """Decide (re-deciding "not yet" answers on a fresh snapshot) and act on it.

        Returns the effect and the deciding rule; effect None means "not yet decidable".
        """
        snapshot = await self._cache.get(self._table_path, self._named_instants(intent))
        inside = relative_path(self._table_path, intent.file_path) is not None
        info = await asyncio.to_thread(self._fs.file_info, intent.file_path) if inside else None
        decision = self._decide(intent, snapshot, info)
        if decision.recheck:
            snapshot = await self._cache.refresh(self._table_path)
            decision = self._decide(intent, snapshot, info)
        match decision.outcome:
            case Outcome.DELETE:
                if await asyncio.to_thread(self._fs.delete, intent.file_path):
                    return Effect.DELETED, decision.rule
                return Effect.MISSING_ALREADY, "gone before the delete"
            case Outcome.ALREADY_GONE:
                return Effect.MISSING_ALREADY, decision.rule
            case Outcome.KEEP:
                return Effect.KEPT_IN_USE, decision.rule
            case Outcome.RETRY_LATER:
                return None, decision.rule

    async def _prune_staging(self, path: str, effect: Effect) -> None:
        """After ``path`` went away: remove its staging directory when that now holds no file
        and its instant is finished. Best effort — a failure leaves it to the sweep."""
        if effect not in (Effect.DELETED, Effect.MISSING_ALREADY):
            return
        located = staging_dir_of(self._table_path, path)
        if located is None:
            return
        instant, directory = located
        try:
            snapshot = await self._cache.get(self._table_path, [instant])
            if finished_reason(snapshot, instant) is None:
                return
            if await asyncio.to_thread(remove_if_empty, self._fs, directory):
                self.counters.staging_dirs_removed += 1
                self.metrics.deletion("staging_dir_removed")
                log.info("removed the empty staging directory of finished instant %s", instant)
        except _RUNTIME_ERRORS as exc:
            log.warning("could not remove staging directory %s: %s: %s", directory,
                        type(exc).__name__, exc)

    async def _sweep_one(self, intent: PendingDelete) -> bool:
        """The sweep's step for one file: the same decision and delete as an intent from the
        topic, without the topic (a failure is retried by the next pass). True when gone.
        Counted apart from intents (``swept``), so the intent counters stay about intents."""
        try:
            effect, rule = await self._settle(intent)
        except _RUNTIME_ERRORS as exc:
            self.metrics.deletion("sweep_failed")
            log.warning("sweep: deleting %s failed: %s: %s", intent.file_path, type(exc).__name__, exc)
            return False
        if effect is Effect.DELETED:
            self.counters.swept += 1
            self.metrics.deletion("swept")
            log.info("sweep: deleted %s (%s)", intent.file_path, rule)
        elif effect is not Effect.MISSING_ALREADY:
            log.info("sweep: kept %s (%s)", intent.file_path, rule)
            return False
        await self._prune_staging(intent.file_path, effect)
        return True

    async def _sweep(self) -> SweepResult:
        result = await self._sweeper.sweep()
        if result.dirs_removed:
            self.counters.staging_dirs_removed += result.dirs_removed
            self.metrics.deletion("staging_dir_removed", result.dirs_removed)
        return result

    def _is_scheduler(self) -> bool:
        """Whether this member does the scheduled work: it holds deletion partition 0."""
        consumer = self._consumer
        if consumer is None or self.phase is not DeleterPhase.RUNNING:
            return False
        return TopicPartition(self.config.deletion_topic, 0) in consumer.assignment()

    async def _scheduled_reconcile(self) -> ReconcileResult:
        return await self.reconcile(dry_run=False)

    def _decide(
        self, intent: PendingDelete, snapshot: TableSnapshot, info: FileInfo | None
    ) -> Decision:
        return decide(intent, snapshot, info, now=self._clock(),
                      orphan_min_age_s=self.config.deletion.orphan_min_age_s)

    def _named_instants(self, intent: PendingDelete) -> list[str]:
        """Instants for the staleness guard: the intent's, plus the one its path names."""
        instants = intent.instants()
        relative = relative_path(self._table_path, intent.file_path)
        owner = own_instant(relative) if relative is not None else None
        if owner is not None:
            instants.append(owner)
        return instants

    async def _requeue(
        self, record: ConsumerRecord, intent: PendingDelete, error_class: str, message: str
    ) -> None:
        """Retry topic with attempt+1, or the DLQ once past ``max_redeliveries``; acked."""
        assert self._sender is not None
        cfg = self.config
        now = self._clock()
        incoming = IntentHeaders.from_kafka(record.headers)
        first_seen = incoming.source_topic is not None
        attempt = intent.attempt + 1
        update: dict[str, Any] = {
            "attempt": attempt,
            "first_failure_at": intent.first_failure_at if intent.first_failure_at is not None else now,
        }
        headers = IntentHeaders(
            source_topic=incoming.source_topic if first_seen else record.topic,
            source_partition=incoming.source_partition if first_seen else record.partition,
            source_offset=incoming.source_offset if first_seen else record.offset,
            error_class=error_class,
            error_message=message,
            attempt=attempt,
            replayed_from=incoming.replayed_from,
        )
        if attempt > cfg.deletion.max_redeliveries:
            reason = (f"gave up after {attempt} attempts (max_redeliveries "
                      f"{cfg.deletion.max_redeliveries}): {error_class}: {message}")
            headers = dataclasses.replace(headers, dlq_reason=reason)
            await self._sender.send(cfg.deletion_dlq_topic, intent.model_copy(update=update), headers)
            self._count(Effect.DLQ)
            log.error("dead-lettered intent for %s: %s", intent.file_path, reason)
            return
        update["not_before"] = now + cfg.deletion.reconsume_later_s
        await self._sender.send(cfg.deletion_retry_topic, intent.model_copy(update=update), headers)
        self._count(Effect.RETRIED)
        log.info("retry %d/%d for %s: %s", attempt, cfg.deletion.max_redeliveries,
                 intent.file_path, message)

    async def _dead_letter_undecodable(self, record: ConsumerRecord, exc: Exception) -> _Step:
        """A record that is not an intent cannot be decided, ever: straight to the DLQ,
        bytes unchanged, so nothing is dropped silently."""
        assert self._producer is not None
        headers = IntentHeaders(
            source_topic=record.topic, source_partition=record.partition,
            source_offset=record.offset, error_class=type(exc).__name__, error_message=str(exc),
            dlq_reason="undecodable deletion intent",
        )
        try:
            await self._producer.send_and_wait(
                self.config.deletion_dlq_topic, record.value, key=record.key,
                headers=headers.to_kafka(),
            )
        except _SEND_ERRORS as send_error:
            log.error("cannot dead-letter an undecodable record: %s", send_error)
            return _Step.BLOCKED
        self.counters.undecodable += 1
        self.metrics.deletion("undecodable")
        log.error("undecodable record %s-%d@%d sent to the DLQ: %s", record.topic,
                  record.partition, record.offset, exc)
        return _Step.SETTLED

    # --- REST -----------------------------------------------------------------------------
    def stats(self) -> DeletionStats:
        c = self.counters
        return DeletionStats(
            pending=sum(self._held.values()), deleted=c.deleted, kept_in_use=c.kept_in_use,
            retried=c.retried, dlq=c.dlq, reconcile_orphans=self._reconciler.orphans_found,
            missing_already=c.missing_already, failed=c.failed, replayed=self._dlq.replayed,
            undecodable=c.undecodable, swept=c.swept, staging_dirs_removed=c.staging_dirs_removed,
            scheduler=self.scheduled.active, sweeps=self.scheduled.sweeps,
            reconciles=self.scheduled.reconciles,
        )

    async def list_dlq(self) -> list[DlqEntry]:
        return await self._dlq.entries()

    async def replay_dlq(self) -> ReplayResult:
        if self._sender is None:
            raise ServiceUnavailable("the deleter is not running (no producer)")
        return await self._dlq.replay(self._sender)

    async def reconcile(self, *, dry_run: bool = True) -> ReconcileResult:
        return await self._reconciler.reconcile(self._sender, dry_run=dry_run)
