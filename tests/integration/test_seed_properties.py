"""Issue 13's acceptance: a sink run from the Hudi Kafka Connect sink's own ``.properties`` keys
(RFC-32 "Configurations") plus environment overrides lands an exactly-once table — through the
contract only (the ``hudi-sink`` CLI, the broker, the table read with hudi-rs).

One pipeline proves several keys at once: path, table, database, partition field, topics,
bootstrap servers, interval, write-status timeout, flush size, control topic name,
``parquet.codec=zstd`` (every base file's column chunks are ZSTD), ``hoodie.allow.empty.commit=true``
(commits go on while nothing arrives), ``connect.meta.data=true`` (each row's Kafka coordinates)
and ``tasks.max=4`` (ignored, with its reason logged);
name, record key, schema and Spark master come from the environment.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from eventually import eventually
from pipeline import Pipeline

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.shared.config.java_properties import parse_properties

pytestmark = pytest.mark.timeout(600)

RECORDS = 4_000


def _properties(pipeline: Pipeline, control_topic: str) -> str:
    return f"""\
# hudi-sink run from a Hudi Kafka Connect sink's configuration (RFC-32 key names)
connector.class=org.apache.hudi.connect.HudiSinkConnector
tasks.max=4
target.base.path={pipeline.base_path}
target.table.name={pipeline.name}_tbl
target.database.name=sales
partition.field.name=country
kafka.topic.names={pipeline.topic}
kafka.bootstrap.servers={pipeline.bootstrap}
transaction.interval.ms=3000
coordinator.writestatus.timeout=60
flush.size=700
control.topic.name={control_topic}
parquet.codec=zstd
hoodie.allow.empty.commit=true
connect.meta.data=true
# What the seed has no name for, as hudi-sink's own dotted keys
kafka.session_timeout_ms=6000
kafka.startup_timeout_s=30
transaction.resend_interval_ms=1000
admin.host=127.0.0.1
admin.allow_unauthenticated=true
spark.conf={{"spark.driver.memory": "1g"}}
"""


def _topics(bootstrap: str) -> set[str]:
    async def listing() -> set[str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            return set(await admin.list_topics())
        finally:
            await admin.close()

    return asyncio.run(listing())


def test_seed_properties_file_with_env_overrides_lands_an_exactly_once_zstd_table(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    control_topic = f"{unique_name}-hudi-control"
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap)
    try:
        path = pipeline.use_properties(_properties(pipeline, control_topic), env={
            "HUDI_SINK__NAME": unique_name,
            "HUDI_SINK__TABLE__RECORD_KEY_FIELD": "id",
            "HUDI_SINK__TABLE__SCHEMA":
                "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE, payload STRING",
            "HUDI_SINK__SPARK__MASTER": "local[1]",
        })
        assert parse_properties(path.read_text())["tasks.max"] == "4"
        pipeline.produce(RECORDS)
        coordinator, participant = pipeline.start_ready("coordinator", "participant")
        pipeline.wait_offsets(RECORDS // pipeline.partitions, timeout_s=240)

        # Exactly once, read with hudi-rs (and the same rows with Hudi's Java reader).
        [table] = pipeline.read_agreed()
        ids = table.column("id").to_pylist()
        assert len(ids) == RECORDS and len(set(ids)) == RECORDS
        assert pipeline.committed_records() == RECORDS
        assert not pipeline.unlisted_completed_files()

        # connect.meta.data=true: each row names its record; together they are every offset once.
        rows = table.select(["_kafka_topic", "_kafka_partition", "_kafka_offset",
                             "_kafka_timestamp", "_kafka_key"]).to_pylist()
        assert {r["_kafka_topic"] for r in rows} == {pipeline.topic}
        per_partition = RECORDS // pipeline.partitions
        assert sorted((r["_kafka_partition"], r["_kafka_offset"]) for r in rows) == [
            (p, o) for p in range(pipeline.partitions) for o in range(per_partition)]
        assert all(r["_kafka_timestamp"] is not None for r in rows)
        assert {r["_kafka_key"] for r in rows} == {None}  # hudi-sink produce sends no keys

        # parquet.codec=zstd: every column chunk of every base file.
        files = sorted(pipeline.partition_files())
        assert files and files == sorted(pipeline.listed_files())
        for relative in files:
            meta = pq.ParquetFile(pipeline.base_path / relative).metadata
            assert {meta.row_group(g).column(c).compression for g in range(meta.num_row_groups)
                    for c in range(meta.num_columns)} == {"ZSTD"}, relative
        # flush.size=700 with 1,000 records per partition: at least two files per partition.
        assert len(files) >= 2 * pipeline.partitions

        # Table, database and partition field from the seed keys.
        props = parse_properties((pipeline.timeline / "hoodie.properties").read_text("latin-1"))
        assert props["hoodie.table.name"] == f"{unique_name}_tbl"
        assert props["hoodie.database.name"] == "sales"
        assert props["hoodie.table.partition.fields"] == "country"
        assert props["hoodie.table.recordkey.fields"] == "id"  # from the environment

        # control.topic.name: the protocol ran on the named topic, the default was never made.
        topics = _topics(pipeline.bootstrap)
        assert control_topic in topics and f"{unique_name}-control" not in topics

        # hoodie.allow.empty.commit=true: nothing more arrives, commits go on (empty ones).
        before = len(pipeline.completed_commits())
        eventually(lambda: len(pipeline.completed_commits()) >= before + 2, 60, "two empty commits")
        assert pipeline.committed_records() == RECORDS

        # tasks.max is accepted with its reason; the services said so at start.
        for service in (coordinator, participant):
            assert "tasks.max is ignored: parallelism is the number of participant processes" \
                in service.log_path.read_text()
    finally:
        pipeline.stop_all()
    for service in pipeline.services:
        assert service.process.returncode in (0, -signal.SIGTERM), service.log_tail()
