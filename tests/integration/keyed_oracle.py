"""The upsert oracle on a real topic: read a topic's records from the beginning up to a commit's
``kafka.commit.offsets`` (or the topic's end) and fold them (``tests/upsert_oracle.py``) into
the table the sink must have written. Independent of the code under test: it reads with its
own consumer (no group, read_committed as the sink) and folds with the oracle's rules.

Typical use in an upsert acceptance test::

    records = read_topic(broker.bootstrap, pipeline.topic, pipeline.latest_offsets())
    expected = fold(records, Spec(precombine="ts"), upto=pipeline.latest_offsets())
    commits = pipeline_commits(pipeline)
    assert_snapshot_equals(pipeline.read(), expected.winners, commits=commits)

Read once up to the latest commit, then fold the same records ``upto`` each earlier commit's
offsets for its ``as_of`` read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition
from pipeline import Pipeline
from upsert_oracle import Record, Spec, Winner, fold
from upsert_reads import Commits

__all__ = ["read_topic", "end_offsets", "fold_topic", "pipeline_commits"]


def read_topic(bootstrap: str, topic: str, upto: Mapping[int, int],
               timeout_s: float = 120) -> list[Record]:
    """Every record of ``topic`` at offsets below ``upto[partition]`` (the next offset to read,
    as commits store it), oldest first per partition; partitions ``upto`` does not name are
    not read. AssertionError naming the partition when the broker does not hand out that many
    within ``timeout_s`` (offsets past the topic's end, a deleted topic)."""
    return asyncio.run(_read(bootstrap, topic, {p: o for p, o in upto.items() if o > 0}, timeout_s))


async def _read(bootstrap: str, topic: str, upto: dict[int, int], timeout_s: float) -> list[Record]:
    if not upto:
        return []
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                isolation_level="read_committed", auto_offset_reset="earliest")
    await consumer.start()
    records: list[Record] = []
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(upto)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        deadline = time.monotonic() + timeout_s
        waiting = set(partitions)
        while waiting:
            if time.monotonic() > deadline:
                where = {tp.partition: await consumer.position(tp) for tp in waiting}
                raise AssertionError(f"{topic}: read up to {dict(sorted(upto.items()))} "
                                     f"timed out at positions {where}")
            batches = await consumer.getmany(*waiting, timeout_ms=500)
            for tp, batch in batches.items():
                records += [Record(r.partition, r.offset, r.key, r.value)
                            for r in batch if r.offset < upto[tp.partition]]
            for tp in list(waiting):
                if await consumer.position(tp) >= upto[tp.partition]:
                    waiting.discard(tp)
                    consumer.pause(tp)
    finally:
        await consumer.stop()
    return records


def end_offsets(bootstrap: str, topic: str, timeout_s: float = 60) -> dict[int, int]:
    """The topic's end offset per partition (what ``read_topic`` takes to read it all): the
    last stable offset the first fetch response of each partition reports. Not the consumer's
    ``end_offsets`` (ListOffsets), which the embedded broker answers wrong after a
    multi-record batch (1 for a batch of 100)."""
    async def ends() -> dict[int, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                    isolation_level="read_committed")
        await consumer.start()
        try:
            await consumer.topics()  # fetches the cluster's metadata
            found = consumer.partitions_for_topic(topic)
            if not found:
                raise AssertionError(f"topic {topic} has no partitions (does it exist?)")
            partitions = [TopicPartition(topic, p) for p in sorted(found)]
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            deadline = time.monotonic() + timeout_s
            while any(consumer.last_stable_offset(tp) is None for tp in partitions):
                if time.monotonic() > deadline:
                    raise AssertionError(f"{topic}: no fetch response within {timeout_s} s")
                await consumer.getmany(timeout_ms=200)
            return {tp.partition: consumer.last_stable_offset(tp) for tp in partitions}
        finally:
            await consumer.stop()

    return asyncio.run(ends())


def fold_topic(bootstrap: str, topic: str, upto: Mapping[int, int], key_field: str = "id",
               precombine: str | None = None, spec: Spec | None = None) -> dict[str, Winner]:
    """The table ``topic`` amounts to up to ``upto``: record key → winning version. ``spec``
    (the sink's reading of keys, envelopes and deletes) overrides ``key_field`` (several
    fields comma-separated) and ``precombine``. For what became of the other records (ignored,
    deleted, rejected) fold ``read_topic``'s records with ``upsert_oracle.fold``."""
    if spec is None:
        spec = Spec(key_fields=tuple(f.strip() for f in key_field.split(",")), precombine=precombine)
    return fold(read_topic(bootstrap, topic, upto), spec, upto).winners


def pipeline_commits(pipeline: Pipeline) -> Commits:
    """(instant, offsets) of every completed commit on the active timeline, oldest first: what
    ``expected_seqno``/``assert_snapshot_equals(commits=...)`` need (it must begin with the
    table's first commit: before archival removes old ones)."""
    return [(instant, pipeline.offsets_of(instant)) for instant in pipeline.completed_commits()]
