"""The bench's load generator (librdkafka) on a real broker: every record acknowledged with
its own timestamp, keyed records where Kafka's default partitioner puts them (upsert mode's
precondition), and a broker that never answers is an error, not a short measurement."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

from aiokafka import AIOKafkaConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from hudi_sink.cli.bench.paced import TICK_S, send_paced
from hudi_sink.services.participant.keyed.partitioners import MURMUR2, expected_partition

PARTITIONS = 8


async def _read(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    records: list[Any] = []
    try:
        deadline = time.monotonic() + 60
        while len(records) < count and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=1000)).values():
                records.extend(batch)
    finally:
        await consumer.stop()
    return records


def test_keyed_records_land_in_their_murmur2_partitions_each_with_its_send_time(
        broker: Any, unique_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(unique_name, PARTITIONS, 1)])[unique_name].result(30)
    keys = [f"key-{n % 97}".encode() for n in range(600)]
    started = time.time()
    delivered = send_paced(broker.bootstrap, unique_name, 400, 1.5,
                           lambda n: (keys[n], b"value-%d" % n, None), "test-load")
    ended = time.time()

    sent = len(delivered.records)  # 400/s for 1.5 s, less the burst owed when time ran out
    assert 400 * 1.5 - 2 * 400 * TICK_S <= sent <= 600
    assert 1.4 <= delivered.seconds < 10
    read = asyncio.run(_read(broker.bootstrap, unique_name, sent))
    assert len(read) == sent
    for record in read:
        assert record.partition == expected_partition(MURMUR2, record.key, PARTITIONS)
        assert started * 1000 - 1 <= record.timestamp <= ended * 1000 + 1
    assert len({r.partition for r in read}) > 1
    acknowledged = {(p, o): stamp for p, o, stamp in delivered.records}
    assert acknowledged == {(r.partition, r.offset): r.timestamp / 1000 for r in read}


def test_a_partition_given_is_kept(broker: Any, unique_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(unique_name, PARTITIONS, 1)])[unique_name].result(30)
    delivered = send_paced(broker.bootstrap, unique_name, 200, 1.0,
                           lambda n: (None, b"v", n % 3), "test-load")
    assert sorted({p for p, _, _ in delivered.records}) == [0, 1, 2]


def test_records_nobody_acknowledges_are_an_error() -> None:
    with socket.socket() as listener:  # a port that accepts nothing: no broker there
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
    try:
        send_paced(f"127.0.0.1:{port}", "nowhere", 50, 0.2, lambda n: (None, b"v", None),
                   "test-load", flush_timeout_s=2)
    except RuntimeError as exc:
        assert "not delivered" in str(exc) and "nowhere" in str(exc)
    else:
        raise AssertionError("an unacknowledged load must not pass as sent")
