"""Phase 1 of two-phase deletion (docs/design.md §4.2): how PendingDelete intents are sent.

Whoever is about to make a metadata change that drops files (the coordinator committing or
aborting an instant, later a cleaner or clusterer) first sends one :class:`PendingDelete` per
file to ``<name>-deletion`` and waits for the broker's ack. Only then does it change the
metadata; if the send fails, the change is not made. The deleter (phase 2) decides from the
table's state whether the file is really dead, so an intent is a request, never an order: a
forged, stale or duplicated intent cannot delete a live file.

The record key is the file path, so every intent for one file lands in one partition and
stays in order there.

Senders count what the broker acked (``hudi_sink_deletion_intents_sent_total``) and remember
the offset of their last acked intent per deletion partition; :class:`DeletionBacklog` compares
that with the deleter group's committed offsets, so a deleter that is missing or stuck shows
up on the sender's side as a growing ``hudi_sink_deletion_backlog_intents``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Callable, Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError
from aiokafka.structs import RecordMetadata, TopicPartition

from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.deletion.intent import (
    DeletionIntentError,
    DeletionReason,
    IntentHeaders,
    PendingDelete,
    intent_for_staged_file,
)
from hudi_sink.shared.errors import HudiSinkBug
from hudi_sink.shared.kafka.connection import consumer_options
from hudi_sink.shared.kafka.sink_topics import not_enough_replicas_hint
from hudi_sink.shared.runtime.metrics import Metrics

__all__ = ["IntentSender", "KafkaDisposal", "DeletionBacklog"]

DEFAULT_SEND_TIMEOUT_S = 60.0
"""How long ``KafkaDisposal.before_decision`` waits for acks before refusing the change."""
BACKLOG_PROBE_INTERVAL_S = 15.0
"""How often :class:`DeletionBacklog` reads the deleter group's committed offsets."""

log = logging.getLogger("hudi_sink.deletion")


def _explain(error: KafkaError, topic: str) -> None:
    """Log why a send failed when the broker said NOT_ENOUGH_REPLICAS (callers retry)."""
    hint = not_enough_replicas_hint(error, topic)
    if hint is not None:
        log.error("%s", hint)


class IntentSender:
    """Sends intents through an (already started) producer and waits for the broker's acks.

    The producer is shared with its owner (the coordinator's control producer, the deleter's
    retry producer): the intents need acks=all, which ``shared.kafka.connection.producer_options``
    already sets for every producer of the sink. With ``metrics``, every intent acked on
    the deletion topic is counted.
    """

    def __init__(self, producer: AIOKafkaProducer, topic: str, *, metrics: Metrics | None = None) -> None:
        self._producer = producer
        self.topic = topic
        self._metrics = metrics
        self.acked_next: dict[int, int] = {}
        """Deletion-topic partition → offset after the last intent acked through this sender
        (read by :class:`DeletionBacklog`; only the event loop thread writes it)."""

    def _acked(self, acks: Sequence[RecordMetadata]) -> None:
        for ack in acks:
            if ack.offset >= 0:
                self.acked_next[ack.partition] = max(self.acked_next.get(ack.partition, 0), ack.offset + 1)
        if self._metrics is not None and acks:
            self._metrics.deletion_intents_sent(len(acks))

    async def send_intents(self, intents: Sequence[PendingDelete]) -> None:
        """Send every intent to the deletion topic; return only when all are acked.

        All sends are queued first and awaited together, so a batch costs one round trip
        rather than one per file. Any failure raises (KafkaError): the caller must then not
        make its metadata change.
        """
        if not intents:
            return
        try:
            pending = [
                await self._producer.send(self.topic, intent.encode(), key=intent.key())
                for intent in intents
            ]
            self._acked(await asyncio.gather(*pending))
        except KafkaError as exc:
            _explain(exc, self.topic)
            raise

    async def send(
        self, topic: str, intent: PendingDelete, headers: IntentHeaders | None = None
    ) -> RecordMetadata:
        """Send one intent to ``topic`` (retry, DLQ, or deletion on replay) and await its ack."""
        try:
            ack = await self._producer.send_and_wait(
                topic,
                intent.encode(),
                key=intent.key(),
                headers=(headers or IntentHeaders()).to_kafka(),
            )
        except KafkaError as exc:
            _explain(exc, topic)
            raise
        if topic == self.topic:
            self._acked([ack])
        return ack


class DeletionBacklog:
    """Phase 1's view of phase 2: how many deletion-topic records, up to the last intent this
    process got acked, the deleter group has not settled (committed) yet.

    Per partition: ``acked_next - committed`` (never negative; no commit yet counts from 0,
    which is right — nothing before our intent was settled either). It reads committed
    offsets, not ``end_offsets``, which tansu reports wrong for multi-record batches. With
    deleters running, the backlog drops to 0 within about ``send_delay_s``; with none, it
    grows with every commit or abort that sends intents. Only offsets this process saw acked
    count, so after a restart it starts from what it sends next.

    ``run`` probes every ``interval_s`` until its stop event is set; the consumer it uses has
    the deleter group's id but never subscribes, so it never joins the group.
    """

    def __init__(self, config: SinkConfig, sender: IntentSender, metrics: Metrics, *,
                 interval_s: float = BACKLOG_PROBE_INTERVAL_S) -> None:
        self._config = config
        self._sender = sender
        self._metrics = metrics
        self._interval_s = interval_s
        self._consumer: AIOKafkaConsumer | None = None

    async def probe(self) -> int:
        """One reading; also sets ``hudi_sink_deletion_backlog_intents``. Raises KafkaError."""
        acked = dict(self._sender.acked_next)
        backlog = 0
        if acked:
            consumer = await self._started()
            for partition, next_offset in sorted(acked.items()):
                committed = await consumer.committed(TopicPartition(self._sender.topic, partition))
                backlog += max(0, next_offset - (committed or 0))
        self._metrics.deletion_backlog(backlog)
        return backlog

    async def _started(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            cfg = self._config
            consumer = AIOKafkaConsumer(
                **consumer_options(cfg.kafka, cfg.deleter_group, "hudi-sink-deletion-backlog")
            )
            await consumer.start()
            self._consumer = consumer
        return self._consumer

    async def run(self, stop: asyncio.Event) -> None:
        """Probe until ``stop`` is set; Kafka trouble is logged and the next probe retries."""
        try:
            while not stop.is_set():
                try:
                    await self.probe()
                except (KafkaError, OSError, TimeoutError) as exc:
                    log.warning("deletion backlog probe failed: %s: %s", type(exc).__name__, exc)
                    await self.close()  # a fresh consumer next time
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._interval_s)
        finally:
            await self.close()

    async def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with contextlib.suppress(Exception):
                await consumer.stop()


class KafkaDisposal:
    """The coordinator's ``StagedFileDisposal`` once a producer exists (phase 1 of §4).

    The committer runs in a worker thread (``asyncio.to_thread``) while the producer belongs
    to the service's event loop, so the sends are submitted to that loop and this thread
    blocks until they are acked. Blocking here is the point: ``before_decision`` must not
    return before the intents are durable, and raising stops the metadata change.
    ``after_decision`` does nothing: the deleter service deletes, after checking the table.
    """

    def __init__(
        self,
        sender: IntentSender,
        loop: asyncio.AbstractEventLoop,
        config: SinkConfig,
        *,
        timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._sender = sender
        self._loop = loop
        self._table_path = config.table.base_path
        self._send_delay_s = config.deletion.send_delay_s
        self._timeout_s = timeout_s
        self._clock = clock

    def before_decision(self, instant: str, paths: list[str], reason: str) -> None:
        """Send one intent per path and wait for every ack; raise DeletionIntentError if not."""
        if not paths:
            return
        kind = DeletionReason(reason)
        not_before = self._clock() + self._send_delay_s
        intents = [
            intent_for_staged_file(self._table_path, path, instant, kind, not_before)
            for path in paths
        ]
        if _running_loop() is self._loop:
            # Waiting here would block the very loop that has to do the sending.
            raise HudiSinkBug("KafkaDisposal.before_decision must run in a worker thread")
        future = asyncio.run_coroutine_threadsafe(self._sender.send_intents(intents), self._loop)
        try:
            future.result(self._timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise DeletionIntentError(
                f"{instant}: deletion intents for {len(intents)} file(s) not acked within "
                f"{self._timeout_s:g} s; metadata left unchanged"
            ) from None
        except (KafkaError, OSError, RuntimeError, concurrent.futures.CancelledError) as exc:
            raise DeletionIntentError(
                f"{instant}: deletion intents for {len(intents)} file(s) failed: "
                f"{type(exc).__name__}: {exc}; metadata left unchanged"
            ) from exc

    def after_decision(self, instant: str, paths: list[str]) -> None:
        return None


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
