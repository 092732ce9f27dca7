"""The intent loop: phase 2 of two-phase deletion (docs/design.md §4.4), one batch per pass.

One consumer group (``<name>-deleter``) over ``<name>-deletion`` and ``<name>-deletion-retry``:
  resume partitions that became due → fetch → per partition, in offset order:
  not due yet → seek back and pause the partition until due (never sleep on a batch) |
  due → decide from the table's state and act (``settle.Settler``) → delete / keep /
  re-enqueue to the retry topic or the DLQ → commit ``offset + 1`` of what is settled.
An offset is committed only after its effect is durable: the delete returned, or the
re-enqueue to the retry topic or the DLQ was acked. A crash in between redelivers the intent,
which is harmless because deleting is idempotent and the decision is re-taken.

Waiting uses one fixed delay per topic (``send_delay_s`` on the deletion topic,
``reconsume_later_s`` on the retry topic), so the first record that is not due in a partition
is also the earliest: pausing there blocks nothing that could run sooner.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from enum import Enum
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError
from aiokafka.structs import ConsumerRecord, TopicPartition

from hudi_sink.services.deleter.context import Counted, DeleterClients
from hudi_sink.services.deleter.settle import Effect, Settler
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.deletion.intent import DeletionDecodeError, IntentHeaders, PendingDelete

__all__ = ["IntentLoop"]

log = logging.getLogger("hudi_sink.deleter")

POLL_MS = 500
"""Longest fetch wait: bounds how late a paused partition is resumed and a stop is seen."""
MAX_BATCH = 200
BLOCKED_BACKOFF_S = 1.0
"""Pause before retrying a record whose re-enqueue could not be sent (Kafka trouble)."""
_SEND_ERRORS = (KafkaError, OSError, TimeoutError)


class _Step(Enum):
    """How the partition loop continues after one record."""

    SETTLED = "settled"
    """Effect durable: the offset may be committed."""
    NOT_DUE = "not_due"
    """Before its time: seek back, pause until due."""
    BLOCKED = "blocked"
    """Could not make the effect durable (re-enqueue failed): seek back, back off."""


class _RebalanceSignal(ConsumerRebalanceListener):
    """Keeps the pause bookkeeping in step with the group's assignment."""

    def __init__(self, loop: IntentLoop) -> None:
        self._loop = loop

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self._loop.forget(list(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self._loop.joined = True
        log.info("deleter assigned %s", sorted(f"{tp.topic}-{tp.partition}" for tp in assigned))


class IntentLoop:
    """Consumes deletion intents until ``stop`` is set (see the module docstring)."""

    def __init__(self, config: SinkConfig, settler: Settler, stop: asyncio.Event) -> None:
        self.config = config
        self._settler = settler
        self._context = settler.context
        self._clock = settler.context.clock
        self._stop = stop
        self._delays = {
            config.deletion_topic: config.deletion.send_delay_s,
            config.deletion_retry_topic: config.deletion.reconsume_later_s,
        }
        self.joined = False
        """Whether the group has assigned this member partitions once (readiness)."""
        self._paused: dict[TopicPartition, float] = {}
        """Paused partition → epoch second it is due."""
        self._held: dict[TopicPartition, int] = {}
        """Paused partition → records that were fetched and handed back (pending stat)."""

    @property
    def pending(self) -> int:
        """Intents fetched and held back until their not-before time."""
        return sum(self._held.values())

    def subscribe(self, consumer: AIOKafkaConsumer) -> None:
        cfg = self.config
        consumer.subscribe(topics=[cfg.deletion_topic, cfg.deletion_retry_topic],
                           listener=_RebalanceSignal(self))

    def forget(self, revoked: list[TopicPartition]) -> None:
        """Revoked partitions lose their pause (they restart from the committed offset)."""
        for tp in revoked:
            self._paused.pop(tp, None)
            self._held.pop(tp, None)

    async def run(self, clients: DeleterClients) -> None:
        consumer = clients.consumer
        while not self._stop.is_set():
            self._resume_due(consumer)
            batch = await consumer.getmany(timeout_ms=self._poll_timeout_ms(), max_records=MAX_BATCH)
            if not batch:
                continue
            results = await asyncio.gather(
                *(self._handle_partition(clients, tp, records) for tp, records in batch.items())
            )
            offsets = {tp: offset for tp, offset in results if offset is not None}
            if offsets:
                await self._commit(consumer, offsets)

    def _poll_timeout_ms(self) -> int:
        if not self._paused:
            return POLL_MS
        until_due = min(self._paused.values()) - self._clock()
        return max(10, min(POLL_MS, int(until_due * 1000) + 1))

    def _resume_due(self, consumer: AIOKafkaConsumer) -> None:
        now = self._clock()
        due = [tp for tp, at in self._paused.items() if at <= now]
        for tp in due:
            del self._paused[tp]
            self._held.pop(tp, None)
        assigned = consumer.assignment()
        ready = [tp for tp in due if tp in assigned]
        if ready:
            consumer.resume(*ready)

    def _hold(self, consumer: AIOKafkaConsumer, tp: TopicPartition, offset: int, due: float,
              held: int) -> None:
        """Hand the rest of a fetched batch back: seek to ``offset`` and pause until ``due``.

        The partition is paused rather than slept on, so the other partitions keep flowing
        and the consumer keeps heartbeating.
        """
        if tp not in consumer.assignment():
            return  # revoked meanwhile; the new owner starts from the committed offset
        consumer.seek(tp, offset)
        consumer.pause(tp)
        self._paused[tp] = due
        self._held[tp] = held

    async def _commit(self, consumer: AIOKafkaConsumer, offsets: dict[TopicPartition, int]) -> None:
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
        self, clients: DeleterClients, tp: TopicPartition, records: list[ConsumerRecord]
    ) -> tuple[TopicPartition, int | None]:
        """Settle records in offset order; return the offset to commit (last settled + 1)."""
        delay = self._delays.get(tp.topic, 0.0)
        next_offset: int | None = None
        settled = 0
        for index, record in enumerate(records):
            if self._stop.is_set():
                break
            step, due = await self._handle_record(clients, record, delay)
            if step is not _Step.SETTLED:
                self._hold(clients.consumer, tp, record.offset, due, len(records) - index)
                break
            next_offset = record.offset + 1
            settled += 1
        if settled:
            source = "deletion" if tp.topic == self.config.deletion_topic else "retry"
            self._context.metrics.deletion_intents_settled(source, settled)
        return tp, next_offset

    def _due(self, record: ConsumerRecord, intent: PendingDelete, delay: float) -> float:
        """When the record may be handled: its not-before, capped by the topic's fixed delay
        after the record's timestamp, so a wrong or forged not-before cannot stall a
        partition for longer than that delay."""
        if record.timestamp is None or record.timestamp <= 0:
            return intent.not_before
        return min(intent.not_before, record.timestamp / 1000 + delay)

    async def _handle_record(
        self, clients: DeleterClients, record: ConsumerRecord, delay: float
    ) -> tuple[_Step, float]:
        try:
            intent = PendingDelete.decode(record.value)
        except DeletionDecodeError as exc:
            step = await self._dead_letter_undecodable(clients, record, exc)
            return step, self._clock() + BLOCKED_BACKOFF_S
        due = self._due(record, intent, delay)
        if due > self._clock():
            return _Step.NOT_DUE, due
        verdict = await self._settler.settle(intent)
        if verdict.error is not None:
            self._context.tally.add(Counted.FAILED)
            log.warning("deleting %s failed (attempt %d): %s", intent.file_path, intent.attempt,
                        verdict.rule)
            error = verdict.error
            error_class, message = type(error).__name__, str(error) or type(error).__name__
        elif verdict.effect is not None:
            self._context.tally.add(verdict.effect)
            log.info("%s %s (%s)", verdict.effect.value, intent.file_path, verdict.rule)
            await self._settler.prune_staging(intent.file_path, verdict.effect)
            return _Step.SETTLED, 0.0
        else:
            error_class, message = "NotYetDecidable", verdict.rule
        try:
            await self._requeue(clients, record, intent, error_class, message)
        except _SEND_ERRORS as exc:
            log.error("cannot re-enqueue intent for %s: %s; retrying in %g s", intent.file_path,
                      exc, BLOCKED_BACKOFF_S)
            return _Step.BLOCKED, self._clock() + BLOCKED_BACKOFF_S
        return _Step.SETTLED, 0.0

    async def _requeue(
        self, clients: DeleterClients, record: ConsumerRecord, intent: PendingDelete,
        error_class: str, message: str,
    ) -> None:
        """Retry topic with attempt+1, or the DLQ once past ``max_redeliveries``; acked."""
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
            await clients.sender.send(cfg.deletion_dlq_topic, intent.model_copy(update=update), headers)
            self._context.tally.add(Effect.DLQ)
            log.error("dead-lettered intent for %s: %s", intent.file_path, reason)
            return
        update["not_before"] = now + cfg.deletion.reconsume_later_s
        await clients.sender.send(cfg.deletion_retry_topic, intent.model_copy(update=update), headers)
        self._context.tally.add(Effect.RETRIED)
        log.info("retry %d/%d for %s: %s", attempt, cfg.deletion.max_redeliveries,
                 intent.file_path, message)

    async def _dead_letter_undecodable(
        self, clients: DeleterClients, record: ConsumerRecord, exc: Exception
    ) -> _Step:
        """A record that is not an intent cannot be decided, ever: straight to the DLQ,
        bytes unchanged, so nothing is dropped silently."""
        headers = IntentHeaders(
            source_topic=record.topic, source_partition=record.partition,
            source_offset=record.offset, error_class=type(exc).__name__, error_message=str(exc),
            dlq_reason="undecodable deletion intent",
        )
        try:
            await clients.producer.send_and_wait(
                self.config.deletion_dlq_topic, record.value, key=record.key,
                headers=headers.to_kafka(),
            )
        except _SEND_ERRORS as send_error:
            log.error("cannot dead-letter an undecodable record: %s", send_error)
            return _Step.BLOCKED
        self._context.tally.add(Counted.UNDECODABLE)
        log.error("undecodable record %s-%d@%d sent to the DLQ: %s", record.topic,
                  record.partition, record.offset, exc)
        return _Step.SETTLED
