"""Keyed records on a real broker: ``hudi-sink produce --key-space`` lands every key in the
partition Kafka's default partitioner (murmur2) says, with tombstones at the asked ratio; and
the sink's recomputation of librdkafka's partitioners agrees with a real librdkafka producer
(``consistent_random`` = crc32, ``murmur2_random`` = murmur2) on where each key went."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiokafka import AIOKafkaConsumer
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from hudi_sink.services.participant.keyed.partitioners import CRC32, MURMUR2, expected_partition

HUDI_SINK = str(Path(sys.executable).with_name("hudi-sink"))


async def _read(bootstrap: str, topic: str, count: int, timeout_s: float = 120) -> list[Any]:
    """Every record of ``topic`` once ``count`` have arrived (the consumer returns as soon as
    records come; up to ``timeout_s`` in all)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    records: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(records) < count and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=1000)).values():
                records += batch
    finally:
        await consumer.stop()
    assert len(records) == count, f"read {len(records)} of {count} records of {topic}"
    return records


def _config(tmp_path: Path, name: str, bootstrap: str) -> Path:
    path = tmp_path / "sink.yaml"
    path.write_text(yaml.safe_dump({
        "name": name,
        "kafka": {"bootstrap_servers": bootstrap, "topics": [f"{name}-data"],
                  "startup_timeout_s": 30},
        "table": {"base_path": str(tmp_path / "table"), "name": name, "record_key_field": "id",
                  "partition_field": "country",
                  "schema": "id STRING, country STRING, amount DOUBLE, payload STRING"},
    }))
    return path


def test_produce_key_space_lands_keys_where_murmur2_says(
        broker: Any, tmp_path: Path, unique_name: str) -> None:
    records, key_space, ratio, partitions = 6000, 400, 0.2, 5
    config = _config(tmp_path, unique_name, broker.bootstrap)
    result = subprocess.run(
        [HUDI_SINK, "produce", "--config", str(config), "--records", str(records),
         "--partitions", str(partitions), "--key-space", str(key_space),
         "--delete-ratio", str(ratio)],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr

    read = asyncio.run(_read(broker.bootstrap, f"{unique_name}-data", records))
    tombstones = 0
    keys = set()
    for record in read:
        assert record.key is not None
        key = int(record.key.decode())
        assert 0 <= key < key_space and record.key == str(key).encode()
        assert record.partition == expected_partition(MURMUR2, record.key, partitions), key
        keys.add(key)
        if record.value is None:
            tombstones += 1
        else:
            assert orjson.loads(record.value)["id"] == str(key)
    # Binomial(6000, 0.2): the tombstone count is within 5 standard deviations (sd = 31) of
    # 1200 but for a chance below 1e-6.
    sd = math.sqrt(records * ratio * (1 - ratio))
    assert abs(tombstones - records * ratio) <= 5 * sd, tombstones
    assert len(keys) == key_space  # 6000 draws from 400 keys miss one with chance ~ 1e-4
    assert len({r.partition for r in read}) == partitions


def test_librdkafka_partitioners_agree_with_the_recomputation(
        broker: Any, unique_name: str) -> None:
    partitions, keys = 7, [str(n).encode() for n in range(300)] + [b"order-\xc3\xa9", b"\x00\xff"]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = {CRC32: f"{unique_name}-crc32", MURMUR2: f"{unique_name}-murmur2"}
    for future in admin.create_topics(
            [NewTopic(topic, partitions, 1) for topic in topics.values()]).values():
        future.result(30)
    for kind, librdkafka_name in ((CRC32, "consistent_random"), (MURMUR2, "murmur2_random")):
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False,
                             "acks": "all", "partitioner": librdkafka_name})
        for key in keys:
            producer.produce(topics[kind], key=key, value=b"v")
        assert producer.flush(60) == 0
        read = asyncio.run(_read(broker.bootstrap, topics[kind], len(keys)))
        placed = {record.key: record.partition for record in read}
        assert placed == {key: expected_partition(kind, key, partitions) for key in keys}, kind
        assert len(set(placed.values())) > 1  # the keys really spread
