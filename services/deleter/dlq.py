"""The deletion DLQ seen from REST: list it, replay it (two-phase deletion's retry path).

Intents land in ``<name>-deletion-dlq`` after ``max_redeliveries`` (or undecodable). Listing
reads the whole topic with a short-lived consumer outside the group (at most
``DLQ_READ_MAX_RECORDS`` records and ``DLQ_READ_LIMIT_S``). That read is single-flight: a
``GET /deletions/dlq`` arriving while one runs waits for it and shares its result, so twenty
concurrent requests (a dashboard refreshing, a script in a loop, anyone while no token is
set) cost one consumer and one read, not twenty; each answer then holds at most its
``limit`` entries. Replaying sends every
intent not replayed before back to the deletion topic (attempt 0, due now), where it is
decided again from the table, so a replay can never delete a live file. How far replay got is
kept in the table (``.hoodie/.sink/deleter/dlq-replayed.json``), so two calls never replay the
same record twice.
"""

from __future__ import annotations

import asyncio
import logging
import posixpath

import orjson
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord, TopicPartition

from hudi_sink.services.deleter.context import Counted, DeleterContext
from hudi_sink.services.deleter.errors import ServiceUnavailable
from hudi_sink.services.deleter.views import DLQ_LIST_DEFAULT, DLQ_LIST_MAX, DlqEntry, ReplayResult
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.deletion.intent import DeletionDecodeError, IntentHeaders, PendingDelete
from hudi_sink.shared.deletion.sender import IntentSender
from hudi_sink.shared.errors import HudiSinkError
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.kafka.clients import KafkaClientFactory

__all__ = ["DeletionDlq"]

log = logging.getLogger("hudi_sink.deleter.dlq")

DLQ_IDLE_MS = 1000
"""A DLQ read stops at the first fetch that stays empty this long (end offsets are not
trusted: tansu reports them wrong for multi-record batches)."""
DLQ_READ_LIMIT_S = 30.0
DLQ_READ_MAX_RECORDS = DLQ_LIST_MAX
_KAFKA_ERRORS = (KafkaError, OSError, TimeoutError)


class DeletionDlq:
    """List and replay ``<name>-deletion-dlq``."""

    def __init__(self, config: SinkConfig, context: DeleterContext, clients: KafkaClientFactory) -> None:
        self._config = config
        self._context = context
        self._clients = clients
        self._state_path = posixpath.join(context.table_path, layout.DELETER_REPLAY_FILE)
        self._lock = asyncio.Lock()
        self._scan: asyncio.Task[list[ConsumerRecord]] | None = None

    async def read(self) -> list[ConsumerRecord]:
        """Every DLQ record (ServiceUnavailable when Kafka cannot be reached)."""
        try:
            records = await self._read_records()
        except _KAFKA_ERRORS as exc:
            raise ServiceUnavailable(f"cannot read {self._config.deletion_dlq_topic}: {exc}") from exc
        self._context.metrics.deletion_dlq_scanned()
        return records

    async def shared_read(self) -> list[ConsumerRecord]:
        """:meth:`read`, joined when one is already running (single flight). The read is
        shielded: a caller that goes away (a closed connection) does not cancel it for the
        others; it ends within its own bounds."""
        scan = self._scan
        if scan is None or scan.done():
            scan = self._scan = asyncio.create_task(self.read(), name="deleter-dlq-scan")
            scan.add_done_callback(_retrieved)
        return await asyncio.shield(scan)

    async def _read_records(self) -> list[ConsumerRecord]:
        """Every DLQ record, with a short-lived unmanaged consumer from the beginning."""
        topic = self._config.deletion_dlq_topic
        admin = await self._clients.admin("hudi-sink-deleter-dlq")
        try:
            partitions = (await admin.partition_counts([topic])).get(topic, 0)
        finally:
            await self._clients.close(admin)
        if partitions == 0:
            return []
        consumer = await self._clients.consumer(None, "hudi-sink-deleter-dlq")
        records: list[ConsumerRecord] = []
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DLQ_READ_LIMIT_S
            while loop.time() < deadline and len(records) < DLQ_READ_MAX_RECORDS:
                batch = await consumer.getmany(timeout_ms=DLQ_IDLE_MS)
                if not batch:
                    break
                for part in batch.values():
                    records.extend(part)
        finally:
            await consumer.stop()
        records.sort(key=lambda r: (r.partition, r.offset))
        return records

    def _load_replayed(self) -> dict[int, int]:
        """DLQ partition → first offset not yet replayed (blocking: worker thread)."""
        try:
            raw = orjson.loads(self._context.fs.read_bytes(self._state_path))
        except FileNotFoundError:
            return {}
        except orjson.JSONDecodeError as exc:
            raise HudiSinkError(f"{self._state_path} is corrupt: {exc}") from None
        if raw.get("topic") != self._config.deletion_dlq_topic:
            return {}  # written for another sink name's DLQ
        return {int(p): int(o) for p, o in (raw.get("next_offsets") or {}).items()}

    def _save_replayed(self, next_offsets: dict[int, int]) -> None:
        data = {"topic": self._config.deletion_dlq_topic,
                "next_offsets": {str(p): o for p, o in sorted(next_offsets.items())}}
        self._context.fs.write_atomic(self._state_path, orjson.dumps(data))

    async def entries(self, limit: int = DLQ_LIST_DEFAULT) -> list[DlqEntry]:
        """The first ``limit`` DLQ entries (by partition, offset), from a shared read."""
        records = (await self.shared_read())[:limit]
        replayed = await asyncio.to_thread(self._load_replayed)
        return [_entry(record, replayed) for record in records]

    async def replay(self, sender: IntentSender) -> ReplayResult:
        """Send every DLQ intent not replayed before back to the deletion topic (attempt 0,
        due now). Replay is safe: each replayed intent is decided again from the table.
        Progress is saved even when a send fails midway, so nothing is replayed twice by a
        later call (except the failed one, which was not acked)."""
        async with self._lock:
            records = await self.read()
            done = await asyncio.to_thread(self._load_replayed)
            progress = dict(done)
            replayed = already = undecodable = 0
            try:
                for record in records:
                    if record.offset < done.get(record.partition, 0):
                        already += 1
                        continue
                    try:
                        intent = PendingDelete.decode(record.value)
                    except DeletionDecodeError:
                        undecodable += 1
                    else:
                        await sender.send(self._config.deletion_topic, *self._replay_of(record, intent))
                        replayed += 1
                        self._context.tally.add(Counted.REPLAYED)
                    progress[record.partition] = record.offset + 1
            except _KAFKA_ERRORS as exc:
                raise ServiceUnavailable(f"replay stopped after {replayed} intent(s): {exc}") from exc
            finally:
                if progress != done:
                    await asyncio.to_thread(self._save_replayed, progress)
            log.info("replayed %d DLQ intent(s) (%d replayed before, %d undecodable)",
                     replayed, already, undecodable)
            return ReplayResult(replayed=replayed, already_replayed=already, undecodable=undecodable)

    def _replay_of(
        self, record: ConsumerRecord, intent: PendingDelete
    ) -> tuple[PendingDelete, IntentHeaders]:
        """The replayed intent (attempt 0, due now) and its headers (provenance kept)."""
        incoming = IntentHeaders.from_kafka(record.headers)
        headers = IntentHeaders(
            source_topic=incoming.source_topic,
            source_partition=incoming.source_partition,
            source_offset=incoming.source_offset,
            replayed_from=f"{record.topic}:{record.partition}:{record.offset}",
        )
        return intent.model_copy(update={"attempt": 0, "not_before": self._context.clock()}), headers


def _retrieved(scan: asyncio.Task[list[ConsumerRecord]]) -> None:
    """Mark a shared read's failure as seen: its callers may all have gone away."""
    if not scan.cancelled():
        scan.exception()


def _entry(record: ConsumerRecord, replayed: dict[int, int]) -> DlqEntry:
    headers = IntentHeaders.from_kafka(record.headers)
    try:
        intent: PendingDelete | None = PendingDelete.decode(record.value)
    except DeletionDecodeError:
        intent = None
    source = (f"{headers.source_topic}:{headers.source_partition}:{headers.source_offset}"
              if headers.source_topic else None)
    return DlqEntry(
        partition=record.partition,
        offset=record.offset,
        file_path=intent.file_path if intent else None,
        table_path=intent.table_path if intent else None,
        reason=intent.reason.value if intent else None,
        killing_instant=intent.killing_instant if intent else None,
        attempts=intent.attempt if intent else headers.attempt,
        last_error=headers.error_message,
        error_class=headers.error_class,
        dlq_reason=headers.dlq_reason,
        first_failure_at=intent.first_failure_at if intent else None,
        replayed=record.offset < replayed.get(record.partition, 0),
        source=source,
    )
