"""Debezium change streams into an upsert table, through the contract: a source table with a
composite key (``region, order_no``) sends inserts, snapshot reads, updates, deletes and the
tombstones after them, key changes included, with Debezium's JSON converter (with schemas) and
its Avro converter (Avro keys and values through a schema registry); the snapshot read back
(hudi-rs, and Apache Hudi's reader) equals the source table's final state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from debezium_changes import (
    AVRO,
    JSON_WITH_SCHEMAS,
    change_stream,
    registry_contents,
    sink_overrides,
)
from debezium_source import produce_stream
from eventually import eventually
from keyed_oracle import end_offsets
from pipeline import Pipeline
from registry_app import LocalRegistry
from upsert_reads import assert_snapshot_equals

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(900)

PARTITIONS = 3


@pytest.mark.parametrize("flavour", [JSON_WITH_SCHEMAS, AVRO], ids=["json_schemas", "avro"])
def test_a_debezium_stream_lands_as_the_source_tables_final_state(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str, flavour: Any
) -> None:
    stream = change_stream(500, seed=7, snapshot_rows=30)
    topic = f"{unique_name}-data"
    schemas, subjects = registry_contents(topic)
    with LocalRegistry(schemas, subjects=subjects) as registry:
        overrides = sink_overrides(flavour, registry.url if flavour.value == "avro" else None)
        overrides["transaction"] = {"interval_ms": 2000, "write_status_timeout_ms": 120000,
                                    "resend_interval_ms": 1000}
        if flavour.key == "avro":
            overrides["upsert"] = {"kafka_key_format": "avro"}
        pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, partitions=PARTITIONS,
                            overrides=overrides)
        sent = produce_stream(broker.bootstrap, topic, stream, flavour, partitions=PARTITIONS)
        assert sent == len(stream.events)
        ends = end_offsets(broker.bootstrap, topic)
        try:
            pipeline.start_ready("coordinator", "participant")
            eventually(lambda: pipeline.latest_offsets() == ends, 300,
                       f"offsets {ends} committed", every_s=1)
            expected = stream.expected()
            assert_snapshot_equals(pipeline.read(), expected)
            [agreed] = pipeline.read_agreed()
            assert agreed.num_rows == len(expected)
            dead = sum(int(orjson.loads((pipeline.timeline / f"{c}.commit").read_bytes())
                           ["extraMetadata"]["hudi.sink.records.dlq"])
                       for c in pipeline.completed_commits())
            assert dead == 0, f"{dead} records dead-lettered"
        finally:
            pipeline.stop_all()
