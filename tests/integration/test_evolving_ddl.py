"""Schema evolution of a Connect-JSON sink through the contract, one participant for the whole
run while the coordinator restarts with edited configs (the coordinator decides the table's
schema and tells every participant in START):

- ``table.schema_source: ddl``: a field the table does not have (``coupon``) is ignored, and
  listed in the participant's ``/partitions`` and logged once;
- the config gains ``coupon STRING``: the table evolves at the next instant, later records
  keep their coupon (acceptance 5);
- the config changes ``amount DOUBLE → STRING``: the coordinator exits 2 naming ``amount``
  (acceptance 5);
- ``table.schema_source: registry``: a Connect envelope whose struct gains a field makes the
  nested column appear, earlier rows null there (acceptance 4), the new rows packed into the
  file group written before (its rows carried over with the new field null); Hudi's Java reader
  and hudi-rs read the same rows.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import orjson
import pytest
from avro_topic import produce_by_partition
from eventually import eventually
from pipeline import HTTP, Pipeline, Service

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(600)

BATCH = 20
DDL = "id STRING NOT NULL, country STRING, amount DOUBLE, addr STRUCT<city: STRING>"
WITH_COUPON = f"{DDL}, coupon STRING"


def _envelope(n: int, zip_code: bool) -> bytes:
    addr = [{"field": "city", "type": "string", "optional": True}]
    payload: dict[str, Any] = {"id": f"r{n}", "country": "de", "amount": n / 2, "coupon": f"c{n}",
                               "addr": {"city": f"city{n}"}}
    if zip_code:
        addr.append({"field": "zip", "type": "int32", "optional": True})
        payload["addr"]["zip"] = 10000 + n
    schema = {"type": "struct", "name": "Order", "fields": [
        {"field": "id", "type": "string", "optional": False},
        {"field": "country", "type": "string", "optional": True},
        {"field": "amount", "type": "double", "optional": True},
        {"field": "coupon", "type": "string", "optional": True},
        {"field": "addr", "type": "struct", "optional": True, "fields": addr}]}
    return orjson.dumps({"schema": schema, "payload": payload})


def _coordinator(pipeline: Pipeline, old: Service | None, env: dict[str, str]) -> Service:
    if old is not None:
        pipeline.kill(old, signal.SIGTERM)
    service = pipeline.start("coordinator", env=env)
    pipeline.wait_ready(service)
    return service


def test_a_ddl_table_evolves_by_config_and_a_connect_table_by_its_envelopes(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, partitions=1, overrides={
        "kafka": {"value_format": "connect_json"}, "table": {"schema": DDL}})
    with pipeline:
        produce_by_partition(pipeline.bootstrap, pipeline.topic,
                             {0: [_envelope(n, False) for n in range(BATCH)]}, True)
        coordinator, participant = pipeline.start_ready("coordinator", "participant")
        pipeline.wait_offsets(BATCH, timeout_s=180)
        [partition] = HTTP.get(f"{participant.url}/partitions", timeout=10).json()
        assert partition["unknown_fields"] == ["coupon"]

        coordinator = _coordinator(pipeline, coordinator, {"HUDI_SINK__TABLE__SCHEMA": WITH_COUPON})
        produce_by_partition(pipeline.bootstrap, pipeline.topic,
                             {0: [_envelope(n, False) for n in range(BATCH, 2 * BATCH)]}, False)
        pipeline.wait_offsets(2 * BATCH, timeout_s=120)

        pipeline.kill(coordinator, signal.SIGTERM)
        refused = pipeline.start("coordinator", env={
            "HUDI_SINK__TABLE__SCHEMA": WITH_COUPON.replace("amount DOUBLE", "amount STRING")})
        eventually(lambda: not refused.alive(), 120, "the coordinator refusing amount STRING")
        assert refused.process.returncode == 2, refused.log_tail()
        assert "table.schema: column 'amount' cannot change from DOUBLE" in refused.log_tail()
        pipeline.services.remove(refused)  # its exit is the expected one

        _coordinator(pipeline, None, {"HUDI_SINK__TABLE__SCHEMA": WITH_COUPON,
                                      "HUDI_SINK__TABLE__SCHEMA_SOURCE": "registry"})
        produce_by_partition(pipeline.bootstrap, pipeline.topic,
                             {0: [_envelope(n, True) for n in range(2 * BATCH, 3 * BATCH)]}, False)
        pipeline.wait_offsets(3 * BATCH, timeout_s=120)
        [table] = pipeline.read_agreed()
    logged = participant.log_path.read_text()
    # New rows were packed into the small file group written before the struct gained a field
    # (its old rows carried with addr.zip null), not written apart after a failed attempt.
    assert "instead of packing" not in logged
    unknown = [line for line in logged.splitlines() if "the table does not have" in line]
    assert len(unknown) == 1 and unknown[0].endswith(": coupon"), unknown  # once per writer schema

    rows = {r["id"]: r for r in table.select(["id", "amount", "coupon", "addr"]).to_pylist()}
    assert len(rows) == table.num_rows == 3 * BATCH
    for n in range(3 * BATCH):
        assert rows[f"r{n}"] == {"id": f"r{n}", "amount": n / 2,
                                 "coupon": f"c{n}" if n >= BATCH else None,  # ignored at first
                                 "addr": {"city": f"city{n}", "zip": 10000 + n if n >= 2 * BATCH else None}}
    changes = [pipeline.commit_metadata(i)["extraMetadata"].get("hudi.sink.schema.changes")
               for i in pipeline.completed_commits()]
    assert [c for c in changes if c] == ["added coupon STRING", "added addr.zip INT"]
