"""A composite record key end to end (``table.record_key_field: id, country``): records through
Kafka, the coordinator and a participant (real Spark) land with Hudi's complex-key form in
``_hoodie_record_key`` (``id:a,country:us``; ``__null__``, ``__empty__``), read back alike by
hudi-rs and Apache Hudi's Java reader; a record whose key fields are all null or empty is a
dead letter; ``hoodie.properties`` and the table's creation record name both fields."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from pipeline import Pipeline
from test_bad_records import _produce

from hudi_sink.cli.broker import EmbeddedBroker
from hudi_sink.shared.hudi import layout

pytestmark = [pytest.mark.long, pytest.mark.timeout(600)]  # long suite: scripts/long-tests.sh

RECORDS = [  # (id, country) -> the key Hudi's ComplexKeyGenerator writes
    (("a", "us"), "id:a,country:us"),
    (("b", None), "id:b,country:__null__"),
    (("", "de"), "id:__empty__,country:de"),
    (("c:1,d", "fr"), "id:c:1,d,country:fr"),  # not escaped, as Hudi does not
]


def test_a_composite_key_is_written_in_hudis_complex_key_form(
        broker: EmbeddedBroker, tmp_path: Path, unique_name: str) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, partitions=1,
                        overrides={"table": {"record_key_field": "id, country"}})
    pipeline.produce(20)  # synthetic records (and the topic): id and country hold one text
    values: list[bytes | None] = [
        orjson.dumps({"id": key[0], "ts": 1700000000000, "country": key[1], "amount": 1.0})
        for key, _ in RECORDS]
    values.append(orjson.dumps({"id": None, "country": "", "amount": 2.0}))  # no key at all
    asyncio.run(_produce(broker.bootstrap, pipeline.topic, values, 1))
    with pipeline:
        pipeline.start_ready("coordinator", "participant")
        pipeline.wait_offsets(20 + len(values), timeout_s=240)
        [table] = pipeline.read_agreed()
    rows = table.to_pylist()
    assert len(rows) == 20 + len(RECORDS)
    keys = {row["_hoodie_record_key"] for row in rows}
    assert {expected for _, expected in RECORDS} <= keys
    for row in rows:
        if row["amount"] != 1.0:  # synthetic
            assert row["_hoodie_record_key"] == f"id:{row['id']},country:{row['country']}"
    dead = sum(int(pipeline.commit_metadata(i)["extraMetadata"].get("hudi.sink.records.dlq", 0))
               for i in pipeline.completed_commits())
    assert dead == 1
    props = (pipeline.base_path / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.table.recordkey.fields=id,country" in props
    assert "hoodie.table.keygenerator.class=org.apache.hudi.keygen.ComplexKeyGenerator" in props
    record = orjson.loads((pipeline.base_path / layout.SINK_TABLE_FILE).read_bytes())
    assert record["write_mode"] == "insert" and record["record_key_fields"] == ["id", "country"]
