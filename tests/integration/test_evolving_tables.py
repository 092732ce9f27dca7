"""Schema evolution through the contract: a registry-sourced table (``table.schema_source:
registry``) follows its producers' Avro writer schemas, served by a Confluent-compatible
registry over HTTP (``tests/registry_app.py``), in one sink run:

- 5,000 records of v1 (the table is created from the subject's latest version, v1); then
  5,000 more with v1 and v2 interleaved on both partitions — two producers rolling out v2,
  which adds ``coupon: ["null", "string"]`` and widens ``qty`` int → long. hudi-rs and Hudi's
  Java reader read the same 10,000 rows: v1 rows have ``coupon`` null, v2 rows their value,
  ``qty`` is bigint throughout, every value exact. The commit that evolved the table carries
  the new Avro schema in ``extraMetadata.schema``; time travel to the first commit (Hudi's
  reader) shows the v1 columns. ``GET /schema`` shows the evolved schema and its source,
  ``hudi_sink_schema_changes_total`` counts both changes, ``hudi-sink table history`` lists
  them at their instant.
- v3 changes ``country`` string → int: its records are dead letters of class
  ``SchemaIncompatible`` naming the field and both types; the rows already written are
  untouched and the records after them land.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from avro_topic import produce_by_partition, read_topic
from evolving_orders import HALF, V1, V2, V3, encoded, registry_sink, value
from hudi_java import ReadRequest, assert_same_rows, read_tables, rust_read
from pipeline import HTTP, HUDI_SINK, metric_total
from registry_app import LocalRegistry, confluent_avro

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(600)

BAD = 7
"""v3 records on partition 0, followed by more v2 ones."""


def test_a_registry_sourced_table_follows_its_producers(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    with LocalRegistry({1: V1, 2: V2, 3: V3}) as registry:
        pipeline = registry_sink(tmp_path, unique_name, broker.bootstrap, registry)
        try:
            coordinator, _ = pipeline.start_ready("coordinator", "participant")
            pipeline.wait_offsets(HALF, timeout_s=180)
            first = pipeline.completed_commits()[0]
            registry.subjects[f"{pipeline.topic}-value"] = 2  # v2 registered, producers roll out
            produce_by_partition(pipeline.bootstrap, pipeline.topic,
                                 {p: encoded(p, range(HALF, 2 * HALF)) for p in (0, 1)}, False)
            pipeline.wait_offsets(2 * HALF, timeout_s=180)
            evolved = pipeline.read()
            tail = [confluent_avro(3, V3, {"id": f"bad-{n}", "qty": n, "country": n})
                    for n in range(BAD)]
            produce_by_partition(pipeline.bootstrap, pipeline.topic,
                                 {0: [*tail, *encoded(0, range(2 * HALF, 2 * HALF + 2))],
                                  1: encoded(1, range(2 * HALF, 2 * HALF + 2 + BAD))}, False)
            pipeline.wait_offsets(2 * HALF + 2 + BAD, timeout_s=120)
            schema = HTTP.get(f"{coordinator.url}/schema", timeout=10).json()
            changes = metric_total(coordinator, "hudi_sink_schema_changes_total")
            letters = read_topic(pipeline.bootstrap, f"{unique_name}-dlq")
            snapshot, as_of_first = read_tables([ReadRequest(pipeline.table_uri),
                                                 ReadRequest(pipeline.table_uri, first)])
        finally:
            pipeline.stop_all()
    final = rust_read(pipeline.table_uri, snapshot.query_instant)
    assert_same_rows(snapshot, final, "Hudi's reader and hudi-rs, after the evolution")

    # Acceptance 1 and 3: every value exact, v1 rows null in the new column, qty bigint.
    assert evolved.num_rows == 4 * HALF and str(evolved.schema.field("qty").type) == "int64"
    rows = {r["id"]: r for r in final.select(["id", "qty", "country", "amount", "coupon"]).to_pylist()}
    assert len(rows) == final.num_rows == 4 * HALF + 4 + BAD
    for partition in (0, 1):
        for n in range(2 * HALF + 2 + (BAD if partition else 0)):
            _, _, sent = value(partition, n)
            assert rows[sent["id"]] == {"coupon": None, **sent}, sent["id"]
    # The evolved commit says so; the first one keeps v1's schema (time travel shows it).
    commits = pipeline.completed_commits()
    schemas = [json.loads(pipeline.commit_metadata(i)["extraMetadata"]["schema"]) for i in commits]
    assert [f["name"] for f in schemas[0]["fields"]] == ["id", "qty", "country", "amount"]
    assert [f["name"] for f in schemas[-1]["fields"]] == ["id", "qty", "country", "amount", "coupon"]
    assert as_of_first.columns[5:] == ["id", "qty", "country", "amount"]
    assert len(as_of_first.rows) == pipeline.offsets_of(first)[0] + pipeline.offsets_of(first)[1]
    changed = [i for i in commits
               if "hudi.sink.schema.changes" in pipeline.commit_metadata(i)["extraMetadata"]]
    assert len(changed) == 1 and changed[0] > first
    assert schema["source"] == "registry" and schema["ddl"] == (
        "id STRING NOT NULL, qty BIGINT NOT NULL, country STRING NOT NULL, amount DOUBLE, coupon STRING")
    assert "coupon" in {f["name"] for f in schema["avro"]["fields"]}
    assert changes == 2
    history = json.loads(subprocess.run(
        [HUDI_SINK, "table", "history", "--path", pipeline.table_uri, "--json", "--limit", "1000"],
        check=True, capture_output=True, text=True).stdout)
    assert [(h["commit_time"], h["schema_changes"]) for h in history if "schema_changes" in h] == [
        (changed[0], ["widened qty INT -> BIGINT", "added coupon STRING"])]

    # Acceptance 2: v3's records are dead letters naming the field and both types.
    assert len(letters) == BAD
    for letter in letters:
        headers = {k: v.decode() for k, v in letter.headers}
        assert headers["hudi.sink.error.class"] == "SchemaIncompatible"
        message = headers["hudi.sink.error.message"]
        assert "'country'" in message and "INT" in message and "STRING" in message, message
