"""``hudi-sink produce``: synthetic JSON records built from ``table.schema``.

Ids are ``<run id>-<n>``, unique across runs. Records go round-robin to explicit partitions,
so N records over P partitions give each partition N/P (what the acceptance checks count).

Keyed (``--key-space K``, the workload of upsert mode): each record's key is an integer drawn
from ``[0, K)``, written in the record key field(s) and sent as the Kafka message key (its
decimal text, UTF-8) with no explicit partition, so aiokafka's default partitioner places it
(murmur2, as Kafka's Java client: one key, one partition). ``--delete-ratio R`` makes each
record a tombstone (null value) of a drawn key with probability R. A key's partition value
(``COUNTRIES[key % 8]``) never changes, because a key that moved between table partitions
would be two rows.
"""

from __future__ import annotations

import asyncio
import logging
import random
import string
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer

from hudi_sink.shared.config.settings import SinkConfig
from hudi_sink.shared.kafka.connection import TopicAdmin, producer_options, wait_for_kafka
from hudi_sink.shared.schema.table_schema import ColumnKind, TableSchema

__all__ = ["run_produce", "synthetic_record", "keyed_message", "produce_records", "KeySpace"]

log = logging.getLogger("hudi_sink.produce")

COUNTRIES = ["us", "de", "fr", "jp", "br", "in", "gb", "ca"]
DEFAULT_PARTITIONS = 4


@dataclass(frozen=True, slots=True)
class KeySpace:
    """Keyed production: keys drawn from ``[0, size)``; a fraction ``delete_ratio`` of the
    records are tombstones."""

    size: int
    delete_ratio: float = 0.0


def synthetic_record(schema: TableSchema, run_id: str, n: int, rng: random.Random,
                     key: int | None = None) -> dict[str, Any]:
    """Record ``n`` of a run; with ``key`` (keyed production) the record key field(s) hold
    that key and the partition field the key's own value."""
    record: dict[str, Any] = {}
    key_fields = set(schema.record_key_fields)
    for column in schema.value_columns:
        if column.name in key_fields:
            ident: int | str = n if key is None else key
            if column.kind is ColumnKind.STRING:
                ident = f"{run_id}-{n}" if key is None else str(key)
            record[column.name] = ident
        elif column.name == schema.partition_field:
            record[column.name] = COUNTRIES[(n if key is None else key) % len(COUNTRIES)]
        elif column.kind is ColumnKind.STRING:
            record[column.name] = "".join(rng.choices(string.ascii_letters, k=32))
        elif column.kind in (ColumnKind.INT, ColumnKind.BIGINT):
            record[column.name] = rng.randint(0, 1_000_000)
        elif column.kind in (ColumnKind.DOUBLE, ColumnKind.FLOAT):
            record[column.name] = round(rng.uniform(0, 1000), 2)
        elif column.kind is ColumnKind.BOOLEAN:
            record[column.name] = bool(n % 2)
        elif column.kind is ColumnKind.TIMESTAMP:
            record[column.name] = datetime.now(UTC).isoformat()
        elif column.kind is ColumnKind.DATE:
            record[column.name] = datetime.now(UTC).date().isoformat()
    return record


def keyed_message(schema: TableSchema, run_id: str, n: int, rng: random.Random,
                  keys: KeySpace) -> tuple[bytes, bytes | None]:
    """Record ``n`` of a keyed run: (message key, value or ``None`` for a tombstone)."""
    key = rng.randrange(keys.size)
    if keys.delete_ratio and rng.random() < keys.delete_ratio:
        return str(key).encode(), None
    return str(key).encode(), orjson.dumps(synthetic_record(schema, run_id, n, rng, key))


async def produce_records(config: SinkConfig, records: int, partitions: int | None = None,
                          rate: float | None = None, progress: Any = None,
                          keys: KeySpace | None = None) -> int:
    """Produce to the first configured topic; returns the number of records acked. Without
    ``keys``, round-robin over explicit partitions; with it, keyed (module docstring)."""
    topic = config.kafka.topics[0]
    schema = config.table.table_schema()
    async with TopicAdmin(config.kafka) as admin:
        count = await admin.ensure_topic(topic, partitions or DEFAULT_PARTITIONS,
                                         config_key="kafka.topics")
    if partitions is not None and count != partitions:
        log.warning("topic %s already has %d partitions (asked for %d)", topic, count, partitions)
    run_id = uuid.uuid4().hex[:12]
    rng = random.Random(run_id)
    producer = AIOKafkaProducer(**producer_options(config.kafka, "hudi-sink-produce"))
    await producer.start()
    sent = 0
    started = time.monotonic()
    try:
        pending = []
        for n in range(records):
            if keys is None:
                value = orjson.dumps(synthetic_record(schema, run_id, n, rng))
                pending.append(await producer.send(topic, value=value, key=None,
                                                   partition=n % count))
            else:
                key, keyed_value = keyed_message(schema, run_id, n, rng, keys)
                pending.append(await producer.send(topic, value=keyed_value, key=key))
            if len(pending) >= 2000:
                await asyncio.gather(*pending)
                sent += len(pending)
                pending = []
                if progress is not None:
                    progress(sent)
            if rate:
                ahead = (n + 1) / rate - (time.monotonic() - started)
                if ahead > 0:
                    await asyncio.sleep(ahead)
        await asyncio.gather(*pending)
        sent += len(pending)
    finally:
        await producer.stop()
    return sent


async def run_produce(
    config: SinkConfig, records: int, partitions: int | None, rate: float | None,
    keys: KeySpace | None = None,
) -> int:
    if records < 0:
        log.error("--records must be >= 0")
        return 2
    await wait_for_kafka(config.kafka)
    started = time.monotonic()
    sent = await produce_records(config, records, partitions, rate, keys=keys)
    elapsed = time.monotonic() - started
    log.info("produced %d records to %s in %.1f s (%.0f/s)", sent, config.kafka.topics[0],
             elapsed, sent / elapsed if elapsed else 0)
    return 0
