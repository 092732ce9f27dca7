"""The deleter service in-process against the session broker and a real table on disk.

Each test runs a ``DeleterService`` (send delay 1 s, reconsume-later 1 s, 2 redeliveries),
builds table state with ``HudiTable`` and the sink log, sends intents the way the coordinator
does, and checks storage, ``/deletions/*`` and the group's committed offsets.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from services.deleter.service import DeleterService
from shared.broker import EmbeddedBroker
from shared.config import SinkConfig
from shared.deletion import DeletionReason, IntentSender, KafkaDisposal, PendingDelete
from shared.fs import LocalFileSystem
from shared.hudi.naming import base_file_name
from shared.hudi.table import HudiTable, WriteStat, build_commit_metadata
from shared.kafka import TopicAdmin, consumer_options, producer_options
from shared.schema import TableSchema
from shared.sink_log import EntryKind, LogEntry, SinkLog

pytestmark = pytest.mark.timeout(120)

DDL = "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE"
T1, T2, T3 = "20250101000000001", "20250101000000002", "20250101000000003"
HOUR = 3600.0


def sink_config(broker: EmbeddedBroker, name: str, base: Path) -> SinkConfig:
    return SinkConfig.model_validate({
        "name": name,
        "kafka": {"bootstrap_servers": broker.bootstrap, "topics": [f"{name}-data"],
                  "session_timeout_ms": 3000, "startup_timeout_s": 20},
        "table": {"base_path": str(base), "name": "orders", "partition_field": "country",
                  "schema": DDL},
        "deletion": {"partitions": 2, "send_delay_s": 1, "reconsume_later_s": 1,
                     "max_redeliveries": 2, "orphan_min_age_s": 60},
        "admin": {"host": "127.0.0.1", "port": 0},
    })


class Table:
    """A table on disk plus the sink-log moves the coordinator would make."""

    def __init__(self, config: SinkConfig) -> None:
        self.fs = LocalFileSystem()
        self.base = config.table.base_path
        self.hudi = HudiTable(self.fs, self.base)
        self.schema = TableSchema.from_config(config.table)
        self.hudi.initialize(config.table, self.schema)
        self.log = SinkLog(self.fs, self.base)

    @staticmethod
    def write(path: str, age_s: float = 0) -> str:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pq.write_table(pa.table({"id": ["a", "b"]}), path)
        if age_s:
            then = time.time() - age_s
            os.utime(path, (then, then))
        return path

    def staged(self, instant: str, fid: str = "aaaa-1") -> str:
        name = base_file_name(fid, "0-0-1", instant)
        return self.write(self.hudi.staging_path(instant, "de", name))

    def commit(self, instant: str, fid: str = "cccc-1", age_s: float = 0) -> str:
        """Complete ``instant`` listing one base file; returns its absolute path."""
        self.hudi.start_instant(instant)
        relative = f"de/{base_file_name(fid, '0-0-1', instant)}"
        path = self.write(f"{self.base}/{relative}", age_s)
        size = os.path.getsize(path)
        stat = WriteStat(file_id=fid, path=relative, partition_path="de", num_writes=2,
                         num_inserts=2, file_size_bytes=size, total_write_bytes=size)
        metadata = build_commit_metadata([stat], {"schema": self.schema.avro_schema_json()})
        self.hudi.complete_instant(instant, metadata)
        return path

    def abort(self, instant: str) -> None:
        """Decide ABORT in the sink log, then roll back (staged files left to the deleter)."""
        seq = self.log.read_state().last_seq + 1
        assert self.log.try_append(LogEntry(seq=seq, kind=EntryKind.ABORT, epoch=1, instant=instant))
        self.hudi.rollback_instant(instant, delete_staging=False)


class FlakyFileSystem(LocalFileSystem):
    """Storage whose deletes fail while ``broken`` (a bucket policy denying DeleteObject)."""

    broken = False

    def delete(self, path: str) -> bool:
        if self.broken:
            raise PermissionError(f"delete denied: {path}")
        return super().delete(path)


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.05)


class Harness:
    def __init__(self, config: SinkConfig, service: DeleterService, producer: AIOKafkaProducer,
                 http: httpx.AsyncClient) -> None:
        self.config = config
        self.service = service
        self.http = http
        self.sender = IntentSender(producer, config.deletion_topic)
        self.base = config.table.base_path

    def intent(self, path: str, reason: DeletionReason, killing: str | None, **extra: Any) -> PendingDelete:
        return PendingDelete(table_path=extra.pop("table_path", self.base), file_path=path,
                             reason=reason, killing_instant=killing,
                             not_before=time.time() + self.config.deletion.send_delay_s, **extra)

    async def stats(self) -> dict[str, int]:
        response = await self.http.get("/deletions/stats")
        assert response.status_code == 200
        return response.json()

    async def wait_stat(self, key: str, value: int, timeout_s: float = 15) -> dict[str, int]:
        async def reached() -> bool:
            return (await self.stats())[key] >= value

        await eventually(reached, timeout_s, f"stats[{key}] >= {value}")
        return await self.stats()

    async def committed(self, topic: str) -> int:
        """Sum of the deleter group's committed offsets on ``topic`` (= records settled)."""
        kafka = self.config.kafka
        async with TopicAdmin(kafka) as admin:
            partitions = (await admin.partition_counts([topic]))[topic]
        consumer = AIOKafkaConsumer(**consumer_options(kafka, self.config.deleter_group))
        await consumer.start()
        try:
            offsets = [await consumer.committed(TopicPartition(topic, p)) for p in range(partitions)]
        finally:
            await consumer.stop()
        return sum(o or 0 for o in offsets)

    async def wait_committed(self, topic: str, count: int, timeout_s: float = 10) -> None:
        async def reached() -> bool:
            return await self.committed(topic) == count

        await eventually(reached, timeout_s, f"{count} committed offsets on {topic}")


@asynccontextmanager
async def deleter(broker: EmbeddedBroker, name: str, base: Path,
                  fs: LocalFileSystem | None = None) -> AsyncIterator[tuple[Harness, Table]]:
    config = sink_config(broker, name, base)
    table = Table(config)
    service = DeleterService(config, fs=fs)
    task = asyncio.create_task(service.run())
    producer = AIOKafkaProducer(**producer_options(config.kafka, "test-intents"))
    await producer.start()
    transport = httpx.ASGITransport(app=service.admin_app())
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://deleter") as http:
            async def ready() -> bool:
                if task.done():
                    task.result()
                return (await http.get("/ready")).status_code == 200

            await eventually(ready, 30, "the deleter to join its group")
            yield Harness(config, service, producer, http), table
    finally:
        await producer.stop()
        service.shutdown()
        await asyncio.wait_for(task, 20)


async def test_inflight_file_waits_until_its_instant_is_rolled_back(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    async with deleter(broker, unique_name, tmp_path / "t") as (h, table):
        table.hudi.start_instant(T1)
        staged = table.staged(T1)
        # Phase 1 exactly as the coordinator does it: from a worker thread, acked on return.
        disposal = KafkaDisposal(h.sender, asyncio.get_running_loop(), h.config)
        await asyncio.to_thread(disposal.before_decision, T1, [staged], "ABORTED_INSTANT")

        await h.wait_stat("retried", 1)
        assert os.path.exists(staged), "a file of an inflight instant was deleted"
        table.abort(T1)
        stats = await h.wait_stat("deleted", 1)
        assert not os.path.exists(staged)
        assert stats["dlq"] == 0 and stats["kept_in_use"] == 0
        await h.wait_committed(h.config.deletion_topic, 1)


async def test_duplicate_intents_delete_once_and_both_are_acked(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    async with deleter(broker, unique_name, tmp_path / "t") as (h, table):
        table.hudi.start_instant(T1)
        staged = table.staged(T1)
        table.abort(T1)
        item = h.intent(staged, DeletionReason.ABORTED_INSTANT, T1)
        await h.sender.send_intents([item, item])

        stats = await h.wait_stat("missing_already", 1)
        assert stats["deleted"] == 1 and stats["retried"] == 0
        assert not os.path.exists(staged)
        await h.wait_committed(h.config.deletion_topic, 2)


async def test_redelivery_after_the_file_is_gone_is_success(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    async with deleter(broker, unique_name, tmp_path / "t") as (h, table):
        table.commit(T1)
        table.hudi.start_instant(T2)
        staged = table.staged(T2)
        table.abort(T2)
        item = h.intent(staged, DeletionReason.ABORTED_INSTANT, T2)
        await h.sender.send_intents([item])
        await h.wait_stat("deleted", 1)
        await h.sender.send_intents([item])  # what a crash before the offset commit replays
        stats = await h.wait_stat("missing_already", 1)
        assert stats["deleted"] == 1 and stats["retried"] == 0 and stats["dlq"] == 0
        await h.wait_committed(h.config.deletion_topic, 2)


async def test_forged_intents_never_delete_a_live_file(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    async with deleter(broker, unique_name, tmp_path / "t") as (h, table):
        live = table.commit(T1, age_s=2 * HOUR)
        table.hudi.start_instant(T2)
        table.abort(T2)
        outside = Table.write(str(tmp_path / "elsewhere" / "precious.parquet"), age_s=2 * HOUR)
        properties = table.hudi.properties_path
        reasons = DeletionReason
        forged = [
            h.intent(live, reasons.UNCOMMITTED_FILE, T1),
            h.intent(live, reasons.ABORTED_INSTANT, T2),  # a rolled-back killing instant
            h.intent(live, reasons.REPLACED, T1),
            h.intent(live, reasons.ORPHAN, None, check_in_use=False),
            h.intent(properties, reasons.ORPHAN, None),
            h.intent(outside, reasons.ORPHAN, None, table_path=str(tmp_path / "elsewhere")),
        ]
        await h.sender.send_intents(forged)

        stats = await h.wait_stat("kept_in_use", len(forged))
        assert stats["deleted"] == 0 and stats["retried"] == 0
        assert os.path.exists(live) and os.path.exists(properties) and os.path.exists(outside)
        await h.wait_committed(h.config.deletion_topic, len(forged))


async def test_failing_storage_retries_then_dead_letters_then_replays(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    storage = FlakyFileSystem()
    storage.broken = True
    async with deleter(broker, unique_name, tmp_path / "t", fs=storage) as (h, table):
        table.hudi.start_instant(T1)
        staged = table.staged(T1)
        table.abort(T1)
        await h.sender.send_intents([h.intent(staged, DeletionReason.ABORTED_INSTANT, T1)])

        stats = await h.wait_stat("dlq", 1)
        assert stats["retried"] == 2 and stats["failed"] == 3 and stats["deleted"] == 0
        assert os.path.exists(staged)
        await h.wait_committed(h.config.deletion_retry_topic, 2)
        await h.wait_committed(h.config.deletion_topic, 1)

        listing = (await h.http.get("/deletions/dlq")).json()
        assert len(listing) == 1
        entry = listing[0]
        assert entry["file_path"] == staged and entry["reason"] == "ABORTED_INSTANT"
        assert entry["attempts"] == 3 and entry["error_class"] == "PermissionError"
        assert "delete denied" in entry["last_error"] and "max_redeliveries" in entry["dlq_reason"]
        assert entry["replayed"] is False and entry["source"].startswith(h.config.deletion_topic)

        storage.broken = False
        replay = (await h.http.post("/deletions/dlq/replay")).json()
        assert replay == {"replayed": 1, "already_replayed": 0, "undecodable": 0}
        await h.wait_stat("deleted", 1)
        assert not os.path.exists(staged)

        again = (await h.http.post("/deletions/dlq/replay")).json()
        assert again == {"replayed": 0, "already_replayed": 1, "undecodable": 0}
        assert (await h.http.get("/deletions/dlq")).json()[0]["replayed"] is True
        assert (await h.stats())["deleted"] == 1


async def test_reconcile_reports_then_deletes_only_old_orphans(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    async with deleter(broker, unique_name, tmp_path / "t") as (h, table):
        referenced = table.commit(T1, age_s=2 * HOUR)
        table.hudi.start_instant(T2)
        table.abort(T2)
        orphan = Table.write(f"{h.base}/de/{base_file_name('dddd-1', '0-0-1', T2)}", 2 * HOUR)
        young = Table.write(f"{h.base}/de/{base_file_name('eeee-1', '0-0-1', T2)}")
        table.hudi.start_instant(T3)
        pending = table.staged(T3)
        os.utime(pending, (time.time() - 2 * HOUR,) * 2)

        dry = await h.http.post("/deletions/reconcile")
        assert dry.status_code == 200
        body = dry.json()
        assert body["dry_run"] is True and body["enqueued"] == 0
        assert [o["path"] for o in body["orphans"]] == [orphan]
        assert os.path.exists(orphan)

        real = (await h.http.post("/deletions/reconcile", params={"dry_run": "false"})).json()
        assert [o["path"] for o in real["orphans"]] == [orphan] and real["enqueued"] == 1
        stats = await h.wait_stat("deleted", 1)
        assert not os.path.exists(orphan)
        assert all(os.path.exists(p) for p in (referenced, young, pending))
        assert stats["reconcile_orphans"] == 2
        after = (await h.http.post("/deletions/reconcile")).json()
        assert after["orphans"] == []
