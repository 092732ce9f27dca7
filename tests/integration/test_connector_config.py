"""Issue 26's first acceptance line: the configuration Hudi's Kafka Connect connector ships
(``hudi-kafka-connect/demo/config-sink.json`` in Apache Hudi, Apache License 2.0, kept byte
for byte in ``tests/fixtures/hudi-connect-config-sink.json``) runs hudi-sink — through the
contract only (the ``hudi-sink`` CLI, the broker, a schema registry over HTTP, the table read
with hudi-rs and Hudi's Java reader).

- As it is, the file is refused for ``hoodie.table.type=MERGE_ON_READ`` alone, with the reason.
- With what the issue lets a test set (broker address, base path, registry URL and
  ``hoodie.table.type=COPY_ON_WRITE``), ``config check`` lists every key with its fate, and a
  sink run from it lands the demo's records — JSON strings (``StringConverter``) decoded against
  the registry subject's latest schema — exactly once, partitioned by ``date``, keyed by
  ``volume``. What only makes the run fast (commit interval, Spark master, admin port) comes from
  the environment, as a deployment would set it; the file's own keys stay as they are.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaProducer
from debezium_source import create_topic
from pipeline import HUDI_SINK, Pipeline
from registry_app import LocalRegistry

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.shared.config.java_properties import parse_properties

pytestmark = pytest.mark.timeout(600)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "hudi-connect-config-sink.json"
TOPIC = "hudi-test-topic"  # the demo's topic, table name and registry subject
RECORDS = 2_000
PARTITIONS = 4

STOCK_TICKS: dict[str, Any] = {  # the demo's schema (docker/demo/config/schema.avsc)
    "type": "record", "name": "stock_ticks", "fields": [
        {"name": name, "type": kind} for name, kind in (
            ("volume", "long"), ("ts", "string"), ("symbol", "string"), ("year", "int"),
            ("month", "string"), ("high", "double"), ("low", "double"), ("key", "string"),
            ("date", "string"), ("close", "double"), ("open", "double"), ("day", "string"))]}


def _tick(volume: int) -> dict[str, Any]:
    """A record shaped as the demo's generator sends it: a stock tick whose ``volume`` is the
    unique record key and whose ``date`` is one of five Hudi partitions (setupKafka.sh)."""
    symbol = ("MSFT", "AAPL", "GOOG", "NFLX", "TSLA")[volume % 5]
    return {"volume": volume, "symbol": symbol, "ts": f"2018-08-31 09:{volume % 60:02d}:00",
            "month": "08", "high": 111.74 + volume, "low": 111.55, "key": f"{symbol}_2018-08-31 09",
            "year": 2018, "date": f"partition_{volume % 5}", "close": 111.72, "open": 111.5 + volume,
            "day": "31"}


async def _produce(bootstrap: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        sent = [await producer.send(TOPIC, value=value, partition=i % PARTITIONS)
                for i, value in enumerate(values)]
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


def _config_check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HUDI_SINK, "config", "check", "--config", str(path)],
                          capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items()
                               if not k.startswith("HUDI_SINK__")})


def test_hudi_connectors_demo_config_runs_an_exactly_once_table(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    # As shipped: refused for MERGE_ON_READ only, the reason and the way out in one line.
    refused = _config_check(FIXTURE)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "hudi-sink: configuration error: hoodie.table.type: MERGE_ON_READ tables are not "
        "written yet: hudi-sink writes COPY_ON_WRITE tables (Parquet base files, no log files "
        "to compact). Set hoodie.table.type=COPY_ON_WRITE to write the same rows as a "
        "COPY_ON_WRITE table"], refused.stderr

    shipped = json.loads(FIXTURE.read_text(encoding="utf-8"))
    pipeline = Pipeline(tmp_path, "hudi-test-topic", broker.bootstrap, partitions=PARTITIONS)
    pipeline.topic = TOPIC
    with LocalRegistry({7: STOCK_TICKS}, subjects={TOPIC: 7}) as registry:
        config = dict(shipped["config"])
        config["bootstrap.servers"] = broker.bootstrap
        config["hoodie.base.path"] = f"file://{pipeline.base_path}"
        config["hoodie.deltastreamer.schemaprovider.registry.url"] = (
            f"{registry.url}/subjects/{TOPIC}/versions/latest")
        config["hoodie.table.type"] = "COPY_ON_WRITE"
        assert set(config) == set(shipped["config"])  # nothing added, nothing left out
        pipeline.config_path = tmp_path / "config-sink.json"
        pipeline.config_path.write_text(json.dumps({"name": shipped["name"], "config": config}))

        # config check: valid, and every key of the file in the table with its fate.
        checked = _config_check(pipeline.config_path)
        assert checked.returncode == 0, checked.stderr
        fates = dict(re.findall(r"^#   (\S+) +(mapped|honoured|ignored) ", checked.stdout, re.M))
        assert set(fates) == {"name", *config}, checked.stdout
        assert fates["hoodie.table.type"] == fates["hoodie.schemaprovider.class"] == "honoured"
        assert fates["hoodie.metadata.enable"] == fates["tasks.max"] == "ignored"
        assert fates["hoodie.keep.max.commits"] == fates["hoodie.base.path"] == "mapped"
        assert "hudi-sink writes no metadata table" in checked.stdout
        assert "max_instants: 10  # file (hoodie.keep.max.commits)" in checked.stdout
        assert "commits_retained: 6  # file (hoodie.cleaner.commits.retained)" in checked.stdout
        # StringConverter decides the format; Connect ignores schemas.enable beside it.
        assert 'value_format: "json"  # file (value.converter)' in checked.stdout
        assert fates["value.converter.schemas.enable"] == "ignored"

        create_topic(broker.bootstrap, TOPIC, PARTITIONS)
        sent = [_tick(volume) for volume in range(RECORDS)]
        asyncio.run(_produce(broker.bootstrap, [orjson.dumps(tick) for tick in sent]))
        pipeline.env = {  # what makes a test fast, as a deployment's environment would set it
            "HUDI_SINK__TRANSACTION__INTERVAL_MS": "3000",
            "HUDI_SINK__TRANSACTION__RESEND_INTERVAL_MS": "1000",
            "HUDI_SINK__KAFKA__SESSION_TIMEOUT_MS": "6000",
            "HUDI_SINK__KAFKA__STARTUP_TIMEOUT_S": "30",
            "HUDI_SINK__ADMIN__HOST": "127.0.0.1",
            "HUDI_SINK__ADMIN__ALLOW_UNAUTHENTICATED": "true",
            "HUDI_SINK__SPARK__MASTER": "local[1]",
            "HUDI_SINK__SPARK__CONF": '{"spark.driver.memory": "1g"}',
        }
        try:
            pipeline.start_ready("coordinator", "participant")
            pipeline.wait_offsets(RECORDS // PARTITIONS, timeout_s=240)
            [table] = pipeline.read_agreed()
        finally:
            pipeline.stop_all()
    for service in pipeline.services:
        assert service.process.returncode in (0, -signal.SIGTERM), service.log_tail()

    # Exactly once, every column as sent (decoded against the registry's schema).
    rows = sorted(table.select([f["name"] for f in STOCK_TICKS["fields"]]).to_pylist(),
                  key=lambda row: row["volume"])
    assert rows == sent
    assert pipeline.committed_records() == RECORDS
    assert not pipeline.unlisted_completed_files()
    assert {path.split("/")[0] for path in pipeline.partition_files()} == {
        f"partition_{i}" for i in range(5)}
    props = parse_properties((pipeline.timeline / "hoodie.properties").read_text("latin-1"))
    assert props["hoodie.table.name"] == TOPIC
    assert props["hoodie.table.type"] == "COPY_ON_WRITE"
    assert props["hoodie.table.recordkey.fields"] == "volume"
    assert props["hoodie.table.partition.fields"] == "date"
    assert any(request.endswith(f"/subjects/{TOPIC}/versions/latest")
               for request in registry.requests)
