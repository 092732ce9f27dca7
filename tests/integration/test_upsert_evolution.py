"""Schema evolution of an upsert table through the contract: the coordinator restarts with a
config whose schema adds ``coupon`` and widens ``qty INT → BIGINT``; later updates rewrite the
file groups written before the change. Keys updated after the change carry the new values;
keys left alone are carried over from the old slices (old Parquet types, no ``coupon``
column) with ``qty`` widened and ``coupon`` null; new keys land beside them. Apache Hudi's Java
reader and hudi-rs read the same rows."""

from __future__ import annotations

import signal
from pathlib import Path

import orjson
import pyarrow as pa
import pytest
from avro_topic import produce_by_partition
from pipeline import Pipeline

from hudi_sink.cli.broker import EmbeddedBroker

# ~50 s (two JVMs and Hudi's reader); the default suite is at its 10-minute budget and covers
# the parts: evolution of carried rows (test_evolving_ddl, test_spark_writer) and upserts
# (test_upsert_pipeline). scripts/long-tests.sh runs it.
pytestmark = [pytest.mark.timeout(600), pytest.mark.long]

DDL = "id STRING NOT NULL, country STRING, qty INT, amount DOUBLE"
EVOLVED = "id STRING NOT NULL, country STRING, qty BIGINT, amount DOUBLE, coupon STRING"
FIRST, UPDATED, NEW = 20, 10, 5


def _value(n: int, version: int) -> bytes:
    row = {"id": f"r{n}", "country": "de" if n % 2 else "fr", "qty": 10 * n + version,
           "amount": n + version / 10}
    if version:
        row["coupon"] = f"c{n}-{version}"
    return orjson.dumps(row)


def test_an_upsert_table_evolves_and_carried_rows_read_as_the_new_schema(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, partitions=1, overrides={
        "table": {"write_mode": "upsert", "record_key_field": "id", "schema": DDL},
        "transaction": {"interval_ms": 2000, "write_status_timeout_ms": 120000}})
    with pipeline:
        produce_by_partition(pipeline.bootstrap, pipeline.topic,
                             {0: [_value(n, 0) for n in range(FIRST)]}, True)
        coordinator, _participant = pipeline.start_ready("coordinator", "participant")
        pipeline.wait_offsets(FIRST, timeout_s=180)
        before = set(pipeline.completed_commits())

        pipeline.kill(coordinator, signal.SIGTERM)
        pipeline.wait_ready(pipeline.start("coordinator",
                                           env={"HUDI_SINK__TABLE__SCHEMA": EVOLVED}))
        later = [_value(n, 1) for n in range(UPDATED)] + [
            _value(n, 1) for n in range(FIRST, FIRST + NEW)]
        produce_by_partition(pipeline.bootstrap, pipeline.topic, {0: later}, False)
        pipeline.wait_offsets(FIRST + len(later), timeout_s=180)
        [table] = pipeline.read_agreed()

    assert table.schema.field("qty").type == pa.int64()
    rows = {r["id"]: r for r in table.select(["id", "country", "qty", "amount", "coupon"]).to_pylist()}
    assert len(rows) == table.num_rows == FIRST + NEW
    for n in range(FIRST + NEW):
        version = 1 if n < UPDATED or n >= FIRST else 0
        assert rows[f"r{n}"] == {"id": f"r{n}", "country": "de" if n % 2 else "fr",
                                 "qty": 10 * n + version, "amount": n + version / 10,
                                 "coupon": f"c{n}-{version}" if version else None}, n
    # The updates rewrote the groups written before the change (their rows carried over).
    over_old = [stat for instant in set(pipeline.completed_commits()) - before
                for stats in pipeline.commit_metadata(instant)["partitionToWriteStats"].values()
                for stat in stats if stat["prevCommit"] in before]
    assert over_old, "no file group written before the change was rewritten"
    changes = [pipeline.commit_metadata(i)["extraMetadata"].get("hudi.sink.schema.changes")
               for i in pipeline.completed_commits()]
    assert [c for c in changes if c] == ["widened qty INT -> BIGINT; added coupon STRING"], changes
