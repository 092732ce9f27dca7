"""What the deleter tests share: a real table on disk, an in-process ``DeleterService`` on the
session broker, intents sent the way the coordinator sends them, and readers of the group's
committed offsets and ``/deletions/stats``.

Defaults: send delay 1 s, reconsume-later 1 s, 2 redeliveries, orphan age floor 60 s, and no
scheduled work (sweep, reconcile) unless a test asks for it, so tests about intents count
only what intents did.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from eventually import eventually_async

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.services.deleter.schedule import Schedule
from hudi_sink.services.deleter.service import DeleterService
from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.deletion.intent import DeletionReason, PendingDelete
from hudi_sink.shared.deletion.sender import IntentSender
from hudi_sink.shared.hudi.naming import base_file_name
from hudi_sink.shared.hudi.sink_log import SinkLog
from hudi_sink.shared.hudi.sink_log_state import EntryKind, LogEntry
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import WriteStat, build_commit_metadata
from hudi_sink.shared.kafka.connection import TopicAdmin, consumer_options, producer_options
from hudi_sink.shared.storage.fs import LocalFileSystem

DDL = "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE"
T1, T2, T3, T4 = (f"2025010100000000{i}" for i in (1, 2, 3, 4))
HOUR = 3600.0
ADMIN_TOKEN = "deleter-harness-token"
"""The harness talks to the deleter as a deployment does: with a bearer token (without one the
admin app refuses POST /deletions/... by default)."""
NO_SCHEDULED_WORK = Schedule(sweep_interval_s=1.0, sweep_min_age_s=1.0, reconcile_interval_s=0.0,
                             sweep=False)


def sink_config(broker: EmbeddedBroker, name: str, base: Path, **deletion: Any) -> SinkConfig:
    return SinkConfig.model_validate({
        "name": name,
        "kafka": {"bootstrap_servers": broker.bootstrap, "topics": [f"{name}-data"],
                  "session_timeout_ms": 3000, "startup_timeout_s": 20},
        "table": {"base_path": str(base), "name": "orders", "partition_field": "country",
                  "schema": DDL},
        "deletion": {"partitions": 2, "send_delay_s": 1, "reconsume_later_s": 1,
                     "max_redeliveries": 2, "orphan_min_age_s": 60, "reconcile_interval_s": 0,
                     **deletion},
        "admin": {"host": "127.0.0.1", "port": 0, "token": ADMIN_TOKEN},
    })


class Table:
    """A table on disk plus the sink-log moves the coordinator would make."""

    def __init__(self, config: SinkConfig) -> None:
        self.fs = LocalFileSystem()
        self.base = config.table.base_path
        self.hudi = HudiTable(self.fs, self.base)
        self.schema = config.table.table_schema()
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

    def staged(self, instant: str, fid: str = "aaaa-1", age_s: float = 0) -> str:
        name = base_file_name(fid, "0-0-1", instant)
        return self.write(self.hudi.staging_path(instant, "de", name), age_s)

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


class RecordingFileSystem(LocalFileSystem):
    """Real storage that remembers when each delete happened (wall clock), so a test can
    prove a file was not deleted before it was allowed to be."""

    def __init__(self) -> None:
        self.deleted_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def delete(self, path: str) -> bool:
        at = time.time()
        removed = super().delete(path)
        if removed:
            with self._lock:
                self.deleted_at[path] = at
        return removed


async def committed_offsets(config: SinkConfig, topic: str) -> list[int]:
    """The deleter group's committed offset per partition of ``topic`` (0 when none)."""
    kafka = config.kafka
    async with TopicAdmin(kafka) as admin:
        partitions = (await admin.partition_counts([topic]))[topic]
    consumer = AIOKafkaConsumer(**consumer_options(kafka, config.deleter_group))
    await consumer.start()
    try:
        offsets = [await consumer.committed(TopicPartition(topic, p)) for p in range(partitions)]
    finally:
        await consumer.stop()
    return [o or 0 for o in offsets]


class Harness:
    def __init__(self, config: SinkConfig, service: DeleterService, producer: AIOKafkaProducer,
                 http: httpx.AsyncClient) -> None:
        self.config = config
        self.service = service
        self.http = http
        self.sender = IntentSender(producer, config.deletion_topic)
        self.base = config.table.base_path

    def intent(self, path: str, reason: DeletionReason, killing: str | None, **extra: Any) -> PendingDelete:
        due = extra.pop("not_before", time.time() + self.config.deletion.send_delay_s)
        return PendingDelete(table_path=extra.pop("table_path", self.base), file_path=path,
                             reason=reason, killing_instant=killing, not_before=due, **extra)

    async def stats(self) -> dict[str, Any]:
        response = await self.http.get("/deletions/stats")
        assert response.status_code == 200
        return response.json()

    async def wait_stat(self, key: str, value: int, timeout_s: float = 15) -> dict[str, Any]:
        async def reached() -> bool:
            return (await self.stats())[key] >= value

        await eventually_async(reached, timeout_s, f"stats[{key}] >= {value}")
        return await self.stats()

    async def committed(self, topic: str) -> int:
        """Sum of the deleter group's committed offsets on ``topic`` (= records settled)."""
        return sum(await committed_offsets(self.config, topic))

    async def wait_committed(self, topic: str, count: int, timeout_s: float = 10) -> None:
        async def reached() -> bool:
            return await self.committed(topic) == count

        await eventually_async(reached, timeout_s, f"{count} committed offsets on {topic}")


@asynccontextmanager
async def deleter(broker: EmbeddedBroker, name: str, base: Path, fs: LocalFileSystem | None = None,
                  *, schedule: Schedule | None = NO_SCHEDULED_WORK, config: SinkConfig | None = None,
                  ) -> AsyncIterator[tuple[Harness, Table]]:
    """A running deleter and its table. ``schedule=None`` derives the scheduled work from the
    config, as production does."""
    config = config if config is not None else sink_config(broker, name, base)
    table = Table(config)
    service = DeleterService(config, fs=fs, schedule=schedule)
    task = asyncio.create_task(service.run())
    producer = AIOKafkaProducer(**producer_options(config.kafka, "test-intents"))
    await producer.start()
    transport = httpx.ASGITransport(app=service.admin_app())
    try:
        headers = {"Authorization": f"Bearer {config.admin.token}"} if config.admin.token else {}
        # 127.0.0.1: admin.host is loopback, and such a port answers only loopback names.
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1",
                                     headers=headers) as http:
            async def ready() -> bool:
                if task.done():
                    task.result()
                return (await http.get("/ready")).status_code == 200

            await eventually_async(ready, 30, "the deleter to join its group")
            yield Harness(config, service, producer, http), table
    finally:
        await producer.stop()
        service.shutdown()
        await asyncio.wait_for(task, 20)
