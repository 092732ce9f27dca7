"""The bench's input: ~1 KB JSON records of the demo schema, produced before any timing.

Records follow the demo schema (``hudi-sink dev``'s), with ``payload`` sized so the whole
JSON value is about ``record_bytes``. Payloads are slices of one random text at varying
offsets: realistic for compression (no two neighbouring values alike) and cheap to make.

Keyed (``--mode upsert``): the record id is also the Kafka message key and no partition is
given, so aiokafka's default partitioner (murmur2, as Kafka's Java client) puts every
version of a key in one partition — the precondition of upsert mode. A later version of
record ``n`` keeps its id and country and carries a later ``ts`` (the precombine field).
"""

from __future__ import annotations

import asyncio
import random
import string
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiokafka import AIOKafkaProducer

from hudi_sink.shared.config.settings import KafkaConfig
from hudi_sink.shared.kafka.connection import TopicAdmin, producer_options

__all__ = ["BENCH_SCHEMA", "PARTITIONS", "Produced", "RecordMaker", "produce", "sink_config"]

BENCH_SCHEMA = "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE, payload STRING"
PARTITIONS = 4
COUNTRIES = ("us", "de", "fr", "jp", "br", "in", "gb", "ca")
VERSION_BASE_MS = 365 * 24 * 3600 * 1000
"""An update's ``ts`` is at least this far past the first version's: later than every first
version of a run (record ``n``'s is ``n`` ms past the base), so an update always wins."""


class RecordMaker:
    """Builds record ``n`` of a run: unique id, ISO timestamp, country, amount, payload."""

    def __init__(self, record_bytes: int, seed: str | None = None) -> None:
        self.run_id = seed or uuid.uuid4().hex[:12]
        rng = random.Random(self.run_id)
        self._text = "".join(rng.choices(string.ascii_letters + string.digits + " ", k=1 << 16))
        self._rng = rng
        self._base = datetime(2026, 1, 1, tzinfo=UTC)
        overhead = len(self._encode(0, ""))
        self._payload_len = max(1, record_bytes - overhead)

    def _encode(self, n: int, payload: str, version: int = 0) -> bytes:
        offset_ms = n if version == 0 else VERSION_BASE_MS + version
        ts = (self._base + timedelta(milliseconds=offset_ms)).isoformat(timespec="milliseconds")
        return orjson.dumps({
            "id": self.record_id(n),
            "ts": ts.replace("+00:00", "Z"),
            "country": COUNTRIES[n % len(COUNTRIES)],
            "amount": round(self._rng.uniform(0, 1000), 2),
            "payload": payload,
        })

    def record_id(self, n: int) -> str:
        return f"{self.run_id}-{n:010d}"

    def key(self, n: int) -> bytes:
        """Record ``n``'s Kafka message key: its id (keyed production)."""
        return self.record_id(n).encode()

    def value(self, n: int, version: int = 0) -> bytes:
        """Record ``n``; ``version`` > 0 makes a later version of it (same id and country,
        new amount and payload, ``ts`` ordered by ``version``)."""
        start = self._rng.randrange(0, len(self._text) - self._payload_len)
        return self._encode(n, self._text[start:start + self._payload_len], version)


@dataclass(frozen=True)
class Produced:
    records: int
    bytes: int
    end_offsets: dict[int, int]
    """Next offset of each partition after the run (what the last commit must hold)."""
    seconds: float
    seed: str = ""
    """The :class:`RecordMaker` seed: the same seed makes the same records again (ids
    ``<seed>-<n>``), so other sinks can be given exactly what this one got."""


async def produce(bootstrap: str, topic: str, records: int, record_bytes: int,
                  seed: str | None = None, *, partitions: int = PARTITIONS,
                  keyed: bool = False) -> Produced:
    """Create ``topic`` with ``partitions`` partitions and fill it, round-robin (``keyed``:
    by the default partitioner on each record's id); with the ``seed`` of an earlier run,
    byte for byte the same records as that run."""
    kafka = KafkaConfig(bootstrap_servers=bootstrap, topics=[topic])
    async with TopicAdmin(kafka) as admin:
        await admin.ensure_topic(topic, partitions, config_key="bench topic")
    maker = RecordMaker(record_bytes, seed)
    options = producer_options(kafka, "hudi-sink-bench")
    options.update(linger_ms=20, max_batch_size=1024 * 1024)
    producer = AIOKafkaProducer(**options)
    await producer.start()
    end: dict[int, int] = {}
    size = 0
    started = time.monotonic()
    try:
        pending: list[Any] = []
        for n in range(records):
            value = maker.value(n)
            size += len(value)
            if keyed:
                pending.append(await producer.send(topic, value=value, key=maker.key(n)))
            else:
                pending.append(await producer.send(topic, value=value, partition=n % partitions))
            if len(pending) >= 5000:
                await _settle(pending, end)
                pending = []
        await _settle(pending, end)
    finally:
        await producer.stop()
    return Produced(records, size, end, time.monotonic() - started, maker.run_id)


async def _settle(pending: list[Any], end: dict[int, int]) -> None:
    for meta in await asyncio.gather(*pending):
        end[meta.partition] = max(end.get(meta.partition, 0), meta.offset + 1)


def sink_config(path: Path, *, name: str, bootstrap: str, topics: list[str], base_path: Path,
                interval_ms: int, flush_records: int | None,
                spark_conf: dict[str, str], write_mode: str = "insert",
                small_file_bytes: int | None = None) -> Path:
    """Write the YAML the sink's processes run with: defaults except what a bench needs
    (its own topic and table, the interval, the write mode, an admin port per process on the
    command line). Upsert mode keeps the ``upsert`` section's defaults: string keys, murmur2."""
    transaction: dict[str, Any] = {"interval_ms": interval_ms, "write_status_timeout_ms": 300000}
    if flush_records is not None:
        transaction["flush_records"] = flush_records
    table: dict[str, Any] = {"base_path": str(base_path), "name": name, "write_mode": write_mode,
                             "record_key_field": "id", "partition_field": "country",
                             "precombine_field": "ts", "schema": BENCH_SCHEMA}
    if small_file_bytes is not None:
        table["small_file_bytes"] = small_file_bytes
    path.write_text(yaml.safe_dump({
        "name": name,
        "kafka": {"bootstrap_servers": bootstrap, "topics": topics, "session_timeout_ms": 10000},
        "table": table,
        "transaction": transaction,
        "admin": {"host": "127.0.0.1", "port": 0, "allow_unauthenticated": True},
        "deletion": {"send_delay_s": 1, "reconsume_later_s": 1},
        "spark": {"master": "local[2]", "conf": spark_conf},
    }))
    return path
