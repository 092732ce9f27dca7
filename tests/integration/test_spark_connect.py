"""Flushes through Spark Connect: a participant process whose ``spark.master`` is
``sc://127.0.0.1:PORT`` writes through the Connect server that ships inside pyspark
(``sbin/start-connect-server.sh``), and the table reads back with hudi-rs. Upsert merges too:
the server reads the old slices, and the flush's rows and dropped keys from the Parquet files
the participant stages beside the job's output.

The participant runs in its own process (a process cannot hold a classic and a Connect
session at once); the server is a separate JVM started and stopped by the fixture.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pyspark
import pytest
from keyed_history import produce_committed_batches
from keyed_oracle import fold_topic, pipeline_commits
from pipeline import Pipeline
from upsert_reads import assert_snapshot_equals

from hudi_sink.cli.broker import EmbeddedBroker, free_port

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def connect_server(tmp_path: Path) -> Iterator[str]:
    spark_home = os.path.dirname(pyspark.__file__)
    port = free_port()
    env = {
        **os.environ,
        "SPARK_HOME": spark_home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_PID_DIR": str(tmp_path / "spark-pids"),
        "SPARK_LOG_DIR": str(tmp_path / "spark-logs"),
        "SPARK_IDENT_STRING": f"hudisinktest{port}",
    }
    start = [
        os.path.join(spark_home, "sbin", "start-connect-server.sh"),
        "--master", "local[1]", "--driver-memory", "1g",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS",
        "--conf", "spark.sql.session.timeZone=UTC",
        "--conf", "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs=false",
    ]
    subprocess.run(start, env=env, check=True, capture_output=True, timeout=120)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        else:
            logs = "\n".join(p.read_text() for p in (tmp_path / "spark-logs").glob("*"))
            raise AssertionError(f"Spark Connect server did not listen on {port}:\n{logs[-3000:]}")
        yield f"sc://127.0.0.1:{port}"
    finally:
        stop = os.path.join(spark_home, "sbin", "stop-connect-server.sh")
        subprocess.run([stop], env=env, capture_output=True, timeout=120)


def test_participant_flushes_through_spark_connect(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str, connect_server: str
) -> None:
    pipeline = Pipeline(
        tmp_path, unique_name, broker.bootstrap,
        overrides={"spark": {"master": connect_server, "conf": {}},
                   "transaction": {"interval_ms": 2000, "write_status_timeout_ms": 60000,
                                   "flush_records": 1000, "resend_interval_ms": 1000}},
    )
    try:
        pipeline.produce(4_000)
        pipeline.start_ready("coordinator", "participant")
        pipeline.wait_offsets(1_000, timeout_s=240)
        [table] = pipeline.read_agreed()  # the same rows with Hudi's Java reader
        assert table.num_rows == 4_000
        assert len(set(table.column("id").to_pylist())) == 4_000
        files = sorted(pipeline.partition_files())
        assert files and set(files) == pipeline.listed_files()
        schema = pq.read_schema(pipeline.base_path / files[0])
        assert schema.names[:5] == ["_hoodie_commit_time", "_hoodie_commit_seqno",
                                    "_hoodie_record_key", "_hoodie_partition_path",
                                    "_hoodie_file_name"]
        assert str(schema.field("ts").type) == "timestamp[us, tz=UTC]"
        assert "__hs_part" not in schema.names
    finally:
        pipeline.stop_all()


def test_upserts_merge_through_spark_connect(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str, connect_server: str
) -> None:
    """Keyed batches with tombstones, each in instants of its own, merged over Connect: the
    snapshot equals the fold of the topic, and later commits wrote slices over old ones."""
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, overrides={
        "spark": {"master": connect_server, "conf": {}},
        "table": {"write_mode": "upsert", "record_key_field": "id"},
        "transaction": {"interval_ms": 2000, "write_status_timeout_ms": 120000,
                        "resend_interval_ms": 1000},
    })
    pipeline.produce(0)
    try:
        pipeline.start_ready("coordinator", "participant")
        produce_committed_batches(pipeline, keys=150, records=1000, batches=2)
        expected = fold_topic(broker.bootstrap, pipeline.topic, pipeline.latest_offsets())
        assert_snapshot_equals(pipeline.read(), expected, commits=pipeline_commits(pipeline))
        over_old = sum(stat["prevCommit"] != "null"
                       for instant in pipeline.completed_commits()
                       for stats in orjson.loads((pipeline.timeline / f"{instant}.commit")
                                                 .read_bytes())["partitionToWriteStats"].values()
                       for stat in stats)
        assert over_old > 0
    finally:
        pipeline.stop_all()
