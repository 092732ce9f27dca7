"""The sink on a replicated Kafka cluster: three KRaft nodes (each a broker and a controller
voter), ``default.replication.factor=3``, ``min.insync.replicas=2``.

The sink's own topics take the cluster's replication factor unless ``kafka.replication_factor``
says otherwise. A broker SIGKILLed mid-stream (the leader of the control topic, so the protocol
itself has to fail over) costs no record and duplicates none: the records come from an
idempotent producer (no duplicates in Kafka either), bad ones among them all reach the DLQ.
Long suite: three JVMs and a pipeline take a few minutes.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource, ResourceType
from eventually import eventually
from kafka_cluster import KafkaCluster
from pipeline import Pipeline
from test_bad_records import _read_all

from hudi_sink.shared.config.settings import KafkaConfig, SinkConfig
from hudi_sink.shared.errors import ConfigError
from hudi_sink.shared.kafka.connection import TopicAdmin
from hudi_sink.shared.kafka.sink_topics import ensure_sink_topics

pytestmark = [pytest.mark.long, pytest.mark.kafka, pytest.mark.timeout(900)]

RECORDS = 12_000
BAD_EVERY = 300
"""Every 300th record is not JSON (40 of them): the DLQ's share of the stream."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    replicated = KafkaCluster(tmp_path_factory.mktemp("kafka3"), nodes=3, heap_mb=256).start()
    try:
        yield replicated
    finally:
        replicated.stop()


def _replicas(bootstrap: str, topics: list[str]) -> dict[str, set[int]]:
    """Replica counts of each topic's partitions, from the brokers' metadata (once every topic
    is in it: the broker asked may learn of a topic created a moment ago a little later)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def complete() -> ClusterMetadata | None:
        metadata = admin.list_topics(timeout=10)
        return metadata if all(metadata.topics.get(t) and metadata.topics[t].partitions
                               for t in topics) else None

    metadata: ClusterMetadata = eventually(complete, 30, f"{topics} in the metadata")
    return {t: {len(p.replicas) for p in metadata.topics[t].partitions.values()} for t in topics}


def _min_insync(bootstrap: str, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(30)
    return str(configs["min.insync.replicas"].value)


def test_an_explicit_replication_factor_wins_over_the_cluster_default(
    cluster: KafkaCluster, unique_name: str
) -> None:
    async def create(factor: int | None, topic: str) -> None:
        kafka = KafkaConfig(bootstrap_servers=cluster.bootstrap, replication_factor=factor)
        async with TopicAdmin(kafka) as admin:
            assert await admin.ensure_topic(topic, 2) == 2

    asyncio.run(create(2, f"{unique_name}-two"))
    asyncio.run(create(None, f"{unique_name}-default"))
    assert _replicas(cluster.bootstrap, [f"{unique_name}-two", f"{unique_name}-default"]) == {
        f"{unique_name}-two": {2}, f"{unique_name}-default": {3}}


def test_topics_with_fewer_replicas_than_min_insync_are_refused_at_start(
    cluster: KafkaCluster, unique_name: str
) -> None:
    """One replica under min.insync.replicas=2: no acks=all write could ever succeed, so the
    start refuses each such topic, naming it and kafka.replication_factor."""
    config = SinkConfig(name=unique_name, kafka=KafkaConfig(
        bootstrap_servers=cluster.bootstrap, topics=[f"{unique_name}-data"], replication_factor=1))
    with pytest.raises(ConfigError) as caught:
        asyncio.run(ensure_sink_topics(config))
    assert caught.value.key == "kafka.replication_factor"
    assert len(caught.value.problems) == 5
    for suffix in ("control", "dlq", "deletion", "deletion-retry", "deletion-dlq"):
        assert f"'{unique_name}-{suffix}' has 1 replica(s) but min.insync.replicas=2" in str(
            caught.value)


class _Stream(threading.Thread):
    """An idempotent producer writing ``RECORDS`` records at ``rate``/s, round-robin over
    ``partitions``; every ``BAD_EVERY``-th is not JSON. ``ids`` are the good records' ids."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: float) -> None:
        super().__init__(daemon=True)
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                  "linger.ms": 5})
        self.ids: list[str] = []
        self.bad = 0
        self.errors: list[str] = []

    def _delivered(self, error: object, _message: object) -> None:
        if error is not None:
            self.errors.append(str(error))

    def run(self) -> None:
        started = time.monotonic()
        for n in range(RECORDS):
            if n % BAD_EVERY == BAD_EVERY - 1:
                value, self.bad = b"{not json", self.bad + 1
            else:
                self.ids.append(f"s-{n}")
                value = orjson.dumps({"id": f"s-{n}", "ts": 1_700_000_000_000 + n,
                                      "country": "us", "amount": float(n), "payload": "p"})
            self.producer.produce(self.topic, value, partition=n % self.partitions,
                                  on_delivery=self._delivered)
            self.producer.poll(0)
            ahead = (n + 1) / self.rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)  # the stream's pace, not a wait for anything to happen
        if self.producer.flush(120) != 0:
            self.errors.append("records left unsent")


def test_a_broker_sigkilled_mid_stream_loses_and_duplicates_nothing(
    cluster: KafkaCluster, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, cluster.bootstrap, overrides={
        "transaction": {"interval_ms": 3000, "write_status_timeout_ms": 60000,
                        "flush_records": 1000, "resend_interval_ms": 1000}})
    pipeline.produce(0)  # the data topic, created by the sink's own code
    stream = _Stream(cluster.bootstrap, pipeline.topic, pipeline.partitions, rate=300)
    killed = 0
    try:
        pipeline.start_ready("coordinator", "participant", "participant")
        sink_topics = [pipeline.topic] + [f"{unique_name}-{suffix}" for suffix in
                                          ("control", "dlq", "deletion", "deletion-retry",
                                           "deletion-dlq")]
        assert _replicas(cluster.bootstrap, sink_topics) == {t: {3} for t in sink_topics}
        assert _min_insync(cluster.bootstrap, f"{unique_name}-control") == "2"

        stream.start()
        eventually(lambda: sum(pipeline.latest_offsets().values()) >= 1_000, 180,
                   "1,000 records committed before the kill")
        metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10)
        victim = metadata.topics[f"{unique_name}-control"].partitions[0].leader
        assert stream.is_alive(), "the stream ended before the kill: nothing was mid-stream"
        cluster.kill(victim, signal.SIGKILL)
        killed = victim

        stream.join(timeout=300)
        assert not stream.is_alive() and not stream.errors, stream.errors[:5]
        per_partition = RECORDS // pipeline.partitions
        pipeline.wait_offsets(per_partition, timeout_s=300)
        ids = Counter(pipeline.read().column("id").to_pylist())
        assert sorted(ids) == sorted(stream.ids), "missing or unexpected ids"
        duplicates = [i for i, n in ids.items() if n != 1]
        assert not duplicates, f"{len(duplicates)} ids more than once: {duplicates[:5]}"
        assert not pipeline.unlisted_completed_files()

        dead = asyncio.run(_read_all(cluster.bootstrap, f"{unique_name}-dlq", pipeline.partitions))
        sources = Counter((dict(r.headers)["hudi.sink.source.partition"],  # type: ignore[attr-defined]
                           dict(r.headers)["hudi.sink.source.offset"]) for r in dead)  # type: ignore[attr-defined]
        # At least once (duplicates are allowed when a partition moves): every bad record.
        assert len(sources) == stream.bad == RECORDS // BAD_EVERY
    finally:
        pipeline.stop_all()
        if killed:
            cluster.restart(killed)  # the module's other tests get three brokers again
