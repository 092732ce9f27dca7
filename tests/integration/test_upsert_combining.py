"""Upsert mode's file groups through the contract: a keyed backlog in large flushes writes
groups of its own (nothing carried); the merge that then rewrites them combines each Kafka
partition's small groups of a table partition into one slice and empties the others in the
same commit; new keys later use an emptied group again. At every step hudi-rs and Apache
Hudi's reader agree with the fold of the topic."""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from pathlib import Path

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from eventually import eventually
from keyed_oracle import fold_topic, pipeline_commits
from pipeline import Pipeline
from upsert_reads import assert_snapshot_equals

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(900)

def _payload(n: int) -> str:
    """~200 characters Parquet cannot squeeze much (so a group's file is about as large as
    its rows' Arrow bytes): makes ~50 rows of a Kafka partition a large flush against
    256 KiB / 32."""
    return "".join(hashlib.sha256(f"{n}:{i}".encode()).hexdigest() for i in range(3))


async def _send(bootstrap: str, topic: str, records: list[tuple[str, dict[str, object] | None]]
                ) -> None:
    """Keyed records (value None: a tombstone), Kafka's default partitioner, sent in batches
    at once (so they mostly land in one instant)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
    await producer.start()
    try:
        sent = [await producer.send(topic, None if value is None else orjson.dumps(value),
                                    key=key.encode()) for key, value in records]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


def _row(n: int, amount: float) -> dict[str, object]:
    return {"id": f"k{n}", "ts": 1_700_000_000_000 + n, "country": ("us", "de")[n % 2],
            "amount": amount, "payload": _payload(n)}


def _stats(pipeline: Pipeline, instants: list[str]) -> list[dict[str, object]]:
    return [stat for instant in instants
            for stats in pipeline.commit_metadata(instant)["partitionToWriteStats"].values()
            for stat in stats]


def _latest(pipeline: Pipeline) -> dict[tuple[str, str], dict[str, object]]:
    """(partition path, fileId) → the write stat of its latest slice."""
    latest: dict[tuple[str, str], dict[str, object]] = {}
    for stat in _stats(pipeline, pipeline.completed_commits()):
        latest[(str(stat["partitionPath"]), str(stat["fileId"]))] = stat
    return latest


def _owner(stat: dict[str, object]) -> str:
    """The writer's source index: the write token's first field (``<fileId>_<token>_<T>``)."""
    return str(stat["path"]).rsplit("/", 1)[-1].split("_")[1].split("-")[0]


def test_a_merge_combines_a_backlogs_groups_and_new_keys_reuse_the_emptied_ones(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "table": {"write_mode": "upsert", "record_key_field": "id",
                  "small_file_bytes": 256 << 10},
        "transaction": {"interval_ms": 1500, "write_status_timeout_ms": 120000,
                        "resend_interval_ms": 1000},
    })
    pipeline.produce(0)
    sent = 0

    def send_committed(records: list[tuple[str, dict[str, object] | None]]) -> list[str]:
        """Send, wait until a commit covers them, and return the commits that did."""
        nonlocal sent
        before = set(pipeline.completed_commits())
        asyncio.run(_send(broker.bootstrap, pipeline.topic, records))
        sent += len(records)
        eventually(lambda: sum(pipeline.latest_offsets().values()) == sent, 240,
                   f"offsets covering {sent} records", every_s=0.5)
        return [c for c in pipeline.completed_commits() if c not in before]

    def assert_readers_agree_with_the_fold() -> None:
        expected = fold_topic(broker.bootstrap, pipeline.topic, pipeline.latest_offsets())
        assert_snapshot_equals(pipeline.read(), expected, commits=pipeline_commits(pipeline))
        [agreed] = pipeline.read_agreed()
        assert agreed.num_rows == len(expected)

    try:
        pipeline.start_ready("coordinator", "participant")
        # A backlog in two batches of new keys, each its own commits: large flushes, each
        # writing groups of its own (nothing carried).
        send_committed([(f"k{n}", _row(n, 1.0)) for n in range(800)])
        send_committed([(f"k{n}", _row(n, 1.0)) for n in range(800, 1000)])
        groups = Counter((_owner(s), p) for (p, _), s in _latest(pipeline).items())
        assert max(groups.values()) >= 2, groups
        assert_readers_agree_with_the_fold()

        # Every key updated, some deleted: each (Kafka partition, table partition) ends with
        # one slice holding rows, the others emptied in the same commits.
        changes: list[tuple[str, dict[str, object] | None]] = [
            (f"k{n}", None if n % 10 == 0 else _row(n, 2.0)) for n in range(1000)]
        updated = send_committed(changes)
        written = _stats(pipeline, updated)
        emptied = {s["fileId"] for s in written if s["numWrites"] == 0}
        assert emptied and all(s["prevCommit"] != "null" for s in written)
        with_rows = Counter((_owner(s), p) for (p, _), s in _latest(pipeline).items()
                            if int(str(s["numWrites"])) > 0)
        assert set(with_rows.values()) == {1}, with_rows
        assert sum(int(str(s["numUpdateWrites"])) for s in written) == 900
        assert sum(int(str(s["numDeletes"])) for s in written) == 100
        assert_readers_agree_with_the_fold()

        # New keys in a large flush go into an emptied group (the smallest) before a new one.
        refilled = send_committed([(f"k{n}", _row(n, 3.0)) for n in range(1000, 1400)])
        reused = {s["fileId"] for s in _stats(pipeline, refilled)} & emptied
        assert reused, "no emptied group was used again"
        assert_readers_agree_with_the_fold()
    finally:
        pipeline.stop_all()
