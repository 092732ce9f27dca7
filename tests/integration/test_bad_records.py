"""Bad input never loses data (through the contract: CLI, config, topics, table on disk).

5,000 good records, 300 bad ones of six kinds and 40 valid records whose partition value is
``../../etc``: the table holds exactly the 5,040 valid rows, every file stays inside the
base path, and the dead-letter topic holds exactly the 300 bad records with explanatory headers.
The sink is configured with Kafka Connect's error keys (``errors.tolerance: all``, a topic
named by ``errors.deadletterqueue.topic.name``, Connect's context headers on): each letter
carries Connect's ``__connect.errors.*`` headers beside ours, and ``<name>-dlq`` is never made.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as KafkaTopicPartition
from eventually import eventually
from pipeline import Pipeline, files_below

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.shared.config.settings import KafkaConfig
from hudi_sink.shared.kafka.connection import TopicAdmin

pytestmark = pytest.mark.timeout(600)

BAD_KINDS: dict[str, bytes | None] = {
    "InvalidJson": b"{not json",
    "TypeMismatch": orjson.dumps({"id": "x", "amount": "lots", "country": "us"}),
    "NotAnObject": orjson.dumps([1, 2, 3]),
    "InvalidUtf8": b'{"id": "\xff\xfe"}',
    "MissingRecordKey": orjson.dumps({"amount": 1.5, "country": "us"}),
    "NullKey": orjson.dumps({"id": None, "amount": 1.5, "country": "us"}),
}


async def _produce(bootstrap: str, topic: str, values: list[bytes | None], partitions: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        futures = [await producer.send(topic, value=v, partition=i % partitions)
                   for i, v in enumerate(values)]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def _read_all(bootstrap: str, topic: str, partitions: int) -> list[object]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [KafkaTopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        records: list[object] = []
        idle = 0
        while idle < 3:
            batch = await consumer.getmany(timeout_ms=1000)
            got = [r for rs in batch.values() for r in rs]
            records.extend(got)
            idle = 0 if got else idle + 1
        return records
    finally:
        await consumer.stop()


def test_bad_records_go_to_the_dlq_and_hostile_partitions_stay_inside(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    dlq = f"{unique_name}-connect-dlq"
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "errors": {"tolerance": "all", "deadletterqueue": {
            "topic": {"name": dlq}, "context": {"headers": {"enable": True}}}}})
    pipeline.produce(5_000)
    hostile = [
        orjson.dumps({"id": f"hostile-{i}", "ts": 1700000000000 + i, "country": "../../etc",
                      "amount": float(i), "payload": "p"})
        for i in range(40)
    ]
    bad = [value for value in BAD_KINDS.values() for _ in range(50)]
    asyncio.run(_produce(broker.bootstrap, pipeline.topic, bad + hostile, pipeline.partitions))
    total = 5_000 + len(bad) + len(hostile)
    try:
        pipeline.start_ready("coordinator", "participant")
        eventually(lambda: sum(pipeline.latest_offsets().values()) == total, 240,
                   f"offsets covering all {total} records", every_s=1)

        [table] = pipeline.read_agreed()  # hostile partition values read alike by Hudi's reader
        ids = table.column("id").to_pylist()
        assert len(ids) == 5_040
        assert len(set(ids)) == 5_040
        hostile_rows = [c for c in table.column("country").to_pylist() if c == "../../etc"]
        assert len(hostile_rows) == 40

        base = os.path.realpath(pipeline.base_path)
        for path in files_below(tmp_path, ".parquet"):
            assert os.path.realpath(path).startswith(base + os.sep), f"{path} escaped the table"
        top_dirs = {p.name for p in pipeline.base_path.iterdir() if p.is_dir()}
        assert not any(name in ("..", ".") or (name.startswith(".") and name != ".hoodie")
                       for name in top_dirs)
        assert not (tmp_path / "warehouse" / "etc").exists()

        dead = asyncio.run(_read_all(broker.bootstrap, dlq, pipeline.partitions))
        assert len(dead) == 300
        classes: Counter[str] = Counter()
        coordinates = set()
        for record in dead:
            headers = {k: v.decode() for k, v in record.headers}  # type: ignore[attr-defined]
            assert headers["hudi.sink.source.topic"] == pipeline.topic
            assert headers["hudi.sink.error.message"]
            _assert_connect_headers(headers, unique_name)
            coordinates.add((headers["hudi.sink.source.partition"], headers["hudi.sink.source.offset"]))
            classes[headers["hudi.sink.error.class"]] += 1
            assert record.value in BAD_KINDS.values()  # type: ignore[attr-defined]
        assert len(coordinates) == 300
        assert classes["InvalidJson"] == 50
        assert classes["NotAnObject"] == 50
        assert classes["TypeMismatch"] == 50
        assert classes["MissingRecordKey"] == 100  # missing and null key
        assert sum(classes.values()) == 300
        commits = [pipeline.commit_metadata(i) for i in pipeline.completed_commits()]
        assert sum(int(c["extraMetadata"].get("hudi.sink.records.dlq", 0)) for c in commits) == 300
        assert not asyncio.run(_topics_named(broker.bootstrap, [f"{unique_name}-dlq"]))
    finally:
        pipeline.stop_all()


def _assert_connect_headers(headers: dict[str, str], connector: str) -> None:
    """Kafka Connect's DeadLetterQueueReporter context headers, agreeing with ours."""
    assert headers["__connect.errors.topic"] == headers["hudi.sink.source.topic"]
    assert headers["__connect.errors.partition"] == headers["hudi.sink.source.partition"]
    assert headers["__connect.errors.offset"] == headers["hudi.sink.source.offset"]
    assert headers["__connect.errors.connector.name"] == connector
    assert headers["__connect.errors.task.id"]
    assert headers["__connect.errors.stage"] == "VALUE_CONVERTER"
    assert headers["__connect.errors.class.name"]
    assert headers["__connect.errors.exception.class.name"] == headers["hudi.sink.error.class"]
    assert headers["__connect.errors.exception.message"] == headers["hudi.sink.error.message"]
    assert headers["__connect.errors.exception.stacktrace"].startswith(
        headers["hudi.sink.error.class"])


async def _topics_named(bootstrap: str, topics: list[str]) -> dict[str, int]:
    async with TopicAdmin(KafkaConfig(bootstrap_servers=bootstrap)) as admin:
        return await admin.partition_counts(topics)
