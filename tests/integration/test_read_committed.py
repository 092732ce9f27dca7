"""An upstream Kafka transaction's records reach the table only once it commits (through the
contract: the CLI, the config, a transactional producer nobody here wrote, the table read with
hudi-rs).

A transactional producer (librdkafka, through confluent-kafka) writes 500 records into
partition 0 and keeps its transaction open for 20 s. Meanwhile plain records keep arriving in
both partitions. While it is open, instants keep ending: partition 1's records become
visible, but nothing of the open transaction does, nor partition 0's records behind it (the
broker stops read_committed fetches at the last stable offset). After the commit every record is
in the table exactly once.

The development broker does not filter *aborted* transactions for read_committed consumers
(it never reports them in fetch responses); that half is tested against aiokafka's own
fetch-response reader in ``tests/unit/test_aborted_transactions_filtered.py`` and end to end on Apache Kafka
(``kafka_broker``): a transaction of 500 records aborted in the middle of a stream that an
idempotent producer keeps writing never reaches the table, and the rest lands exactly once.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from eventually import eventually
from kafka_cluster import KafkaCluster
from pipeline import Pipeline

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(420)

OPEN_FOR_S = 20.0
"""How long the upstream transaction stays open."""


def _value(record_id: str, i: int) -> bytes:
    return orjson.dumps({"id": record_id, "ts": 1_700_000_000_000 + i, "country": "us",
                         "amount": float(i), "payload": "p"})


def _send(producer: Producer, topic: str, partition: int, prefix: str, count: int) -> list[str]:
    ids = [f"{prefix}-{i}" for i in range(count)]
    for i, record_id in enumerate(ids):
        producer.produce(topic, _value(record_id, i), partition=partition)
    assert producer.flush(30) == 0, "records left unsent"
    return ids


def _ids(pipeline: Pipeline) -> Counter[str]:
    return Counter(pipeline.read().column("id").to_pylist())


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def test_open_transaction_is_withheld_then_committed_exactly_once(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, partitions=2)
    _create_topic(broker.bootstrap, pipeline.topic, 2)
    plain = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": False,
                      "acks": "all"})
    upstream = Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": f"{unique_name}-upstream",
                         "transaction.timeout.ms": 120_000})
    with pipeline:
        expected = _send(plain, pipeline.topic, 0, "before-0", 50)
        expected += _send(plain, pipeline.topic, 1, "before-1", 50)
        coordinator, _participant = pipeline.start_ready("coordinator", "participant")

        upstream.init_transactions(30)
        upstream.begin_transaction()
        opened_at = time.monotonic()
        in_transaction = _send(upstream, pipeline.topic, 0, "txn", 500)
        behind = _send(plain, pipeline.topic, 0, "behind", 20)  # after the open transaction
        during = _send(plain, pipeline.topic, 1, "during", 100)

        # While it is open, instants keep ending (committed, or withdrawn once nothing moves);
        # none shows the transaction or what lies behind it in its partition, and the other
        # partition is not held back.
        checked = 0
        while time.monotonic() - opened_at < OPEN_FOR_S:
            pipeline.wait_transactions(coordinator, 1, timeout_s=60)
            ids = _ids(pipeline)
            leaked = [i for i in in_transaction + behind if i in ids]
            assert not leaked, f"{len(leaked)} records of the open transaction are in the table"
            checked += 1
        assert checked >= 3, f"only {checked} transactions while the transaction was open"
        assert pipeline.latest_offsets()[1] == 150, pipeline.latest_offsets()
        assert all(i in _ids(pipeline) for i in during)

        upstream.commit_transaction(30)
        expected += in_transaction + behind + during
        # Partition 0: 50 + 500 + 20 records, then the commit marker at 570, which the
        # committed offset need not pass (it is never a record).
        eventually(lambda: pipeline.latest_offsets().get(0, 0) >= 570, 120,
                   "the transaction's records committed")
        ids = _ids(pipeline)
        assert sorted(ids) == sorted(expected), "missing or unexpected ids"
        duplicates = [i for i, n in ids.items() if n != 1]
        assert not duplicates, f"{len(duplicates)} ids more than once: {duplicates[:5]}"


@pytest.mark.kafka
def test_aborted_transaction_mid_stream_never_reaches_the_table(
    kafka_broker: KafkaCluster, tmp_path: Path, unique_name: str
) -> None:
    """500 records of an aborted transaction, interleaved with a stream the sink is reading
    (from an idempotent producer), and a committed transaction of the same producer after it:
    none of the 500 is in the table, everything else is, once."""
    bootstrap = kafka_broker.bootstrap
    pipeline = Pipeline(tmp_path, unique_name, bootstrap, partitions=2)
    _create_topic(bootstrap, pipeline.topic, 2)
    stream = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    upstream = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{unique_name}-up"})
    with pipeline:
        expected = _send(stream, pipeline.topic, 0, "before-0", 1_000)
        expected += _send(stream, pipeline.topic, 1, "before-1", 1_000)
        pipeline.start_ready("coordinator", "participant")
        eventually(lambda: sum(pipeline.latest_offsets().values()) > 0, 120,
                   "the sink committing the stream's first records")

        upstream.init_transactions(30)
        upstream.begin_transaction()
        aborted = _send(upstream, pipeline.topic, 0, "aborted-0", 250)
        expected += _send(stream, pipeline.topic, 0, "during-0", 200)  # behind it, same partition
        aborted += _send(upstream, pipeline.topic, 1, "aborted-1", 250)
        expected += _send(stream, pipeline.topic, 1, "during-1", 200)
        upstream.abort_transaction(30)
        upstream.begin_transaction()
        expected += _send(upstream, pipeline.topic, 0, "committed-0", 100)
        expected += _send(upstream, pipeline.topic, 1, "committed-1", 100)
        upstream.commit_transaction(30)
        expected += _send(stream, pipeline.topic, 0, "after-0", 300)
        expected += _send(stream, pipeline.topic, 1, "after-1", 300)

        # The "after" records lie behind the aborted ones in both partitions: once they are
        # all in the table, the sink has read past every aborted record.
        eventually(lambda: sum(_ids(pipeline).values()) >= len(expected), 240,
                   f"{len(expected)} rows in the table", every_s=1)
        ids = _ids(pipeline)
        leaked = [i for i in aborted if i in ids]
        assert len(aborted) == 500
        assert not leaked, f"{len(leaked)} records of the aborted transaction are in the table"
        assert sorted(ids) == sorted(expected), "missing or unexpected ids"
        duplicates = [i for i, n in ids.items() if n != 1]
        assert not duplicates, f"{len(duplicates)} ids more than once: {duplicates[:5]}"
