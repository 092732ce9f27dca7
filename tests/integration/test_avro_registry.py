"""Avro values through the real broker: records framed in the Confluent wire format by an
independent encoder (fastavro + the documented framing, ``tests/registry_app.py``), writer
schemas served by a small local registry app (no registry ships in the reachable package
indexes). The registry is down when the sink starts: partitions pause and retry instead of
dead-lettering; once it answers, every record lands exactly once and reads back (hudi-rs)
equal to the input (timestamp-millis, an enum, a nullable double, a DECIMAL(9, 2) from Avro's
``decimal`` logical type, an array, a map and a nested record)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from pipeline import Pipeline, wait_until
from registry_app import LocalRegistry, confluent_avro

from shared.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(600)

PER_PARTITION = 150
WRITER: dict[str, Any] = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "country", "type": {"type": "enum", "name": "Country", "symbols": ["de", "fr"]}},
        {"name": "amount", "type": ["null", "double"], "default": None},
        {"name": "payload", "type": "string"},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                   "scale": 2}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "addr", "type": ["null", {"type": "record", "name": "Addr", "fields": [
            {"name": "city", "type": "string"}, {"name": "zip", "type": "int"}]}]},
        {"name": "channel", "type": "string", "default": "web"},  # not a column
    ],
}
START = datetime(2024, 5, 1, tzinfo=UTC)


def _record(partition: int, n: int) -> dict[str, Any]:
    return {"id": f"p{partition}-{n}", "ts": START + timedelta(milliseconds=n * 1001),
            "country": "de" if n % 2 else "fr", "amount": None if n % 5 == 0 else n / 4,
            "payload": f"x{n}", "price": Decimal(n * 7 - 300) / 100, "tags": [f"t{n % 3}"] * (n % 3),
            "attrs": {"n": n, "p": partition}, "addr": None if n % 4 == 0 else {"city": f"c{n}", "zip": n},
            "channel": "app"}


def _produce(bootstrap: str, topic: str, partitions: int) -> None:
    async def send() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, partitions, 1)])
        finally:
            await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            for partition in range(partitions):
                for n in range(PER_PARTITION):
                    await producer.send(topic, confluent_avro(1, WRITER, _record(partition, n)),
                                        key=f"k{n}".encode(), partition=partition)
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(send())


def test_avro_round_trip_with_a_registry_outage_at_start(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    with LocalRegistry({1: WRITER}) as registry:
        registry.down = True
        pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, partitions=2, overrides={
            "kafka": {"value_format": "avro"},
            "table": {"schema": "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE, "
                                "payload STRING, price DECIMAL(9, 2), tags ARRAY<STRING>, "
                                "attrs MAP<STRING, BIGINT>, addr STRUCT<city: STRING, zip: INT>"},
            "avro": {"registry_url": registry.url, "registry_timeout_s": 2},
            "service": {"retry_backoff_ms": 500},
        })
        try:
            _produce(pipeline.bootstrap, pipeline.topic, pipeline.partitions)
            _, participant = pipeline.start_ready("coordinator", "participant")
            wait_until(lambda: "paused at offset 0" in participant.log_path.read_text(), 120,
                       "the participant pausing on the unreachable registry")
            outage_commits = pipeline.completed_commits()
            registry.down = False
            pipeline.wait_offsets(PER_PARTITION, timeout_s=180)
            table = pipeline.read()
        finally:
            pipeline.stop_all()
    # Nothing was dead-lettered or committed past the paused records during the outage.
    for instant in outage_commits:
        assert pipeline.offsets_of(instant) in ({}, {0: 0, 1: 0})
    dlq = sum(int(pipeline.commit_metadata(i)["extraMetadata"].get("hudi.sink.records.dlq", 0))
              for i in pipeline.completed_commits())
    assert dlq == 0
    columns = ["id", "ts", "country", "amount", "payload", "price", "tags", "attrs", "addr"]
    rows = {r["id"]: r for r in table.select(columns).to_pylist()}
    assert len(rows) == table.num_rows == PER_PARTITION * pipeline.partitions
    for partition in range(pipeline.partitions):
        for n in range(PER_PARTITION):
            sent = _record(partition, n)
            expected = {key: sent[key] for key in columns}
            expected["attrs"] = list(sent["attrs"].items())  # Arrow maps read as (key, value) lists
            assert rows[sent["id"]] == expected
