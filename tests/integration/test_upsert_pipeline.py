"""Upsert mode through the contract: ``produce --key-space --delete-ratio`` (keyed records and
tombstones, Kafka's default partitioner) into a table with ``table.write_mode: upsert``; the
snapshot read by hudi-rs (and Apache Hudi's reader) equals the fold of the topic up to the
commit's offsets, and each row's ``_hoodie_commit_seqno`` names its winning offset."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaConsumer
from eventually import eventually
from keyed_oracle import fold_topic, pipeline_commits
from pipeline import HUDI_SINK, Pipeline
from upsert_oracle import murmur2_partition
from upsert_reads import assert_snapshot_equals

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(900)

RECORDS = 6_000
BATCHES = 3
KEYS = 300


def test_upsert_snapshot_equals_the_fold_of_the_topic(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "table": {"write_mode": "upsert", "record_key_field": "id"},
        "transaction": {"interval_ms": 2000, "write_status_timeout_ms": 120000,
                        "resend_interval_ms": 1000},
    })
    pipeline.produce(0)
    try:
        pipeline.start_ready("coordinator", "participant")
        for batch in range(1, BATCHES + 1):  # each batch lands in instants of its own
            result = subprocess.run(
                [HUDI_SINK, "produce", "--config", str(pipeline.config_path), "--records",
                 str(RECORDS // BATCHES), "--partitions", str(pipeline.partitions),
                 "--key-space", str(KEYS), "--delete-ratio", "0.1"],
                capture_output=True, text=True, timeout=300, env={**os.environ, **pipeline.env})
            assert result.returncode == 0, result.stdout + result.stderr
            want = batch * RECORDS // BATCHES
            eventually(lambda want=want: sum(pipeline.latest_offsets().values()) == want, 300,
                       f"offsets covering {want} records", every_s=1)
        expected = fold_topic(broker.bootstrap, pipeline.topic, pipeline.latest_offsets())
        table = pipeline.read()
        # One row per live key, every value and each seqno the winning offset's.
        assert_snapshot_equals(table, expected, commits=pipeline_commits(pipeline))
        [agreed] = pipeline.read_agreed()  # Apache Hudi's reader sees the same rows
        assert agreed.num_rows == len(expected)
        assert 0 < len(expected) < KEYS
        updates = deletes = over_old = 0
        for instant in pipeline.completed_commits():
            metadata = orjson.loads((pipeline.timeline / f"{instant}.commit").read_bytes())
            assert metadata["operationType"] == "UPSERT"
            for stats in metadata["partitionToWriteStats"].values():
                for stat in stats:
                    updates += stat["numUpdateWrites"]
                    deletes += stat["numDeletes"]
                    over_old += stat["prevCommit"] != "null"
        assert updates > 0 and deletes > 0 and over_old > 0, (updates, deletes, over_old)
    finally:
        pipeline.stop_all()


async def _send(bootstrap: str, topic: str, records: list[tuple[str, dict[str, object] | None]],
                partition: int | None = None) -> None:
    """Keyed records (value None: a tombstone), Kafka's default partitioner unless
    ``partition`` forces one."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(topic, None if value is None else orjson.dumps(value),
                                         key=key.encode(), partition=partition)
    finally:
        await producer.stop()


async def _dead_letters(bootstrap: str, topic: str) -> list[bytes]:
    """The error class header of every record in the DLQ topic."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    try:
        found: list[bytes] = []
        idle = 0
        while idle < 3:
            batch = await consumer.getmany(timeout_ms=700)
            got = [dict(r.headers).get("hudi.sink.error.class", b"") for rs in batch.values()
                   for r in rs]
            found += got
            idle = 0 if got else idle + 1
        return found
    finally:
        await consumer.stop()


def _row(key: str, ts_ms: int, amount: float) -> dict[str, object]:
    return {"id": key, "ts": ts_ms, "country": "us", "amount": amount, "payload": "p"}


def test_precombine_keeps_the_newer_stored_version_and_counts_the_older_one(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    """A version ordered below the stored one changes nothing (counted as superseded); a
    tombstone always applies; a tiny buffer (flush_records 10) pauses intake until END
    instead of flushing, and nothing is lost."""
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "table": {"write_mode": "upsert", "record_key_field": "id", "precombine_field": "ts"},
        "transaction": {"interval_ms": 1500, "write_status_timeout_ms": 120000,
                        "resend_interval_ms": 1000, "flush_records": 10},
    })
    pipeline.produce(0)
    keys = [f"k{i}" for i in range(60)]
    base = 1_700_000_000_000
    try:
        pipeline.start_ready("coordinator", "participant")
        first = [(k, _row(k, base + 1000, 1.0)) for k in keys]
        asyncio.run(_send(broker.bootstrap, pipeline.topic, first))
        eventually(lambda: sum(pipeline.latest_offsets().values()) == len(first), 240,
                   "the first versions committed", every_s=1)
        second = ([(k, _row(k, base, 2.0)) for k in keys[:20]]           # older: superseded
                  + [(k, _row(k, base + 1000, 3.0)) for k in keys[20:40]]  # a tie: applies
                  + [(k, None) for k in keys[40:50]])                      # tombstones
        asyncio.run(_send(broker.bootstrap, pipeline.topic, second))
        # A record whose key belongs to another partition is a bad record, never a write.
        owner = murmur2_partition(b"k0", pipeline.partitions)
        asyncio.run(_send(broker.bootstrap, pipeline.topic, [("k0", _row("k0", base + 9000, 9.0))],
                          partition=(owner + 1) % pipeline.partitions))
        total = len(first) + len(second) + 1
        eventually(lambda: sum(pipeline.latest_offsets().values()) == total, 240,
                   "the second versions committed", every_s=1)
        table = pipeline.read()
        amounts = dict(zip(table.column("id").to_pylist(), table.column("amount").to_pylist(),
                           strict=True))
        assert set(amounts) == set(keys[:40] + keys[50:])
        assert all(amounts[k] == 1.0 for k in keys[:20] + keys[50:])
        assert all(amounts[k] == 3.0 for k in keys[20:40])
        superseded = deleted = dead = 0
        for instant in pipeline.completed_commits():
            extra = orjson.loads((pipeline.timeline / f"{instant}.commit").read_bytes())["extraMetadata"]
            superseded += int(extra.get("hudi.sink.records.superseded", 0))
            deleted += int(extra.get("hudi.sink.records.deleted", 0))
            dead += int(extra["hudi.sink.records.dlq"])
        assert superseded == 20 and deleted == 10 and dead == 1, (superseded, deleted, dead)
        dlq = asyncio.run(_dead_letters(broker.bootstrap, f"{unique_name}-dlq"))
        assert dlq == [b"KeyPartitionMismatch"], dlq
    finally:
        pipeline.stop_all()
