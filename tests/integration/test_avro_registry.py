"""Avro values through the real broker: records framed in the Confluent wire format by an
independent encoder (fastavro + the documented framing, ``tests/registry_app.py``), writer
schemas served by a small local registry app (no registry ships in the reachable package
indexes). The registry is down when the sink starts: partitions pause and retry instead of
dead-lettering; once it answers, every record lands exactly once and reads back (hudi-rs)
equal to the input (timestamp-millis, an enum, a nullable double, a DECIMAL(9, 2) from Avro's
``decimal`` logical type, an array, a map and a nested record). Then a decoding bomb (15
bytes whose writer schema lets them claim 10 million ``null`` items) arrives: it ends as one
dead letter within a second, and its partition goes on."""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from avro_topic import produce_by_partition, read_topic
from eventually import eventually
from pipeline import Pipeline
from registry_app import LocalRegistry, confluent_avro

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(600)

PER_PARTITION = 150
WRITER: dict[str, Any] = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "country", "type": {"type": "enum", "name": "Country", "symbols": ["de", "fr"]}},
        {"name": "amount", "type": ["null", "double"], "default": None},
        {"name": "payload", "type": "string"},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                   "scale": 2}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "addr", "type": ["null", {"type": "record", "name": "Addr", "fields": [
            {"name": "city", "type": "string"}, {"name": "zip", "type": "int"}]}]},
        {"name": "channel", "type": "string", "default": "web"},  # not a column
    ],
}
START = datetime(2024, 5, 1, tzinfo=UTC)
BOMB_SCHEMA: dict[str, Any] = {"type": "record", "name": "Bomb", "fields": [
    {"name": "id", "type": "string"}, {"name": "junk", "type": {"type": "array", "items": "null"}}]}
BOMB = struct.pack(">bI", 0, 2) + b"\x02b" + b"\x80\xda\xc4\x09\x00"  # id "b", 10^7 nulls
TAIL = 20
"""Good records after the bomb, on each partition."""


def _record(partition: int, n: int) -> dict[str, Any]:
    return {"id": f"p{partition}-{n}", "ts": START + timedelta(milliseconds=n * 1001),
            "country": "de" if n % 2 else "fr", "amount": None if n % 5 == 0 else n / 4,
            "payload": f"x{n}", "price": Decimal(n * 7 - 300) / 100, "tags": [f"t{n % 3}"] * (n % 3),
            "attrs": {"n": n, "p": partition}, "addr": None if n % 4 == 0 else {"city": f"c{n}", "zip": n},
            "channel": "app"}


def _good(partition: int, numbers: range) -> list[bytes]:
    return [confluent_avro(1, WRITER, _record(partition, n)) for n in numbers]


def test_avro_round_trip_with_a_registry_outage_at_start(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    with LocalRegistry({1: WRITER, 2: BOMB_SCHEMA}) as registry:
        registry.down = True
        pipeline = Pipeline(tmp_path, unique_name, broker.bootstrap, partitions=2, overrides={
            "kafka": {"value_format": "avro"},
            "table": {"schema": "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE, "
                                "payload STRING, price DECIMAL(9, 2), tags ARRAY<STRING>, "
                                "attrs MAP<STRING, BIGINT>, addr STRUCT<city: STRING, zip: INT>"},
            "avro": {"registry_url": registry.url, "registry_timeout_s": 2},
            "service": {"retry_backoff_ms": 500},
        })
        try:
            produce_by_partition(pipeline.bootstrap, pipeline.topic,
                     {p: _good(p, range(PER_PARTITION)) for p in range(pipeline.partitions)}, True)
            _, participant = pipeline.start_ready("coordinator", "participant")
            eventually(lambda: "paused at offset 0" in participant.log_path.read_text(), 120,
                       "the participant pausing on the unreachable registry")
            outage_commits = pipeline.completed_commits()
            registry.down = False
            pipeline.wait_offsets(PER_PARTITION, timeout_s=180)
            # Caught up: the bomb then good records on partition 0, as many good ones on 1.
            more = range(PER_PARTITION, PER_PARTITION + TAIL)
            bomb_sent = produce_by_partition(pipeline.bootstrap, pipeline.topic, {
                0: [BOMB, *_good(0, more)], 1: _good(1, range(PER_PARTITION, PER_PARTITION + TAIL + 1))},
                False)[0]
            pipeline.wait_offsets(PER_PARTITION + TAIL + 1, timeout_s=120)
            table = pipeline.read()
            [letter] = read_topic(pipeline.bootstrap, f"{unique_name}-dlq")
        finally:
            pipeline.stop_all()
    headers = {k: v.decode() for k, v in letter.headers}
    assert (headers["hudi.sink.error.class"], headers["hudi.sink.source.partition"],
            headers["hudi.sink.source.offset"]) == ("InvalidAvro", "0", str(PER_PARTITION))
    assert "junk" in headers["hudi.sink.error.message"] and letter.value == BOMB
    assert letter.timestamp - bomb_sent < 1000, f"{letter.timestamp - bomb_sent} ms"  # old: a row
    # Nothing was dead-lettered or committed past the paused records during the outage.
    for instant in outage_commits:
        assert pipeline.offsets_of(instant) in ({}, {0: 0, 1: 0})
    dlq = sum(int(pipeline.commit_metadata(i)["extraMetadata"].get("hudi.sink.records.dlq", 0))
              for i in pipeline.completed_commits())
    assert dlq == 1  # the bomb
    columns = ["id", "ts", "country", "amount", "payload", "price", "tags", "attrs", "addr"]
    rows = {r["id"]: r for r in table.select(columns).to_pylist()}
    assert len(rows) == table.num_rows == (PER_PARTITION + TAIL) * pipeline.partitions + 1
    for partition in range(pipeline.partitions):
        for n in range(PER_PARTITION + TAIL + partition):
            sent = _record(partition, n)
            expected = {key: sent[key] for key in columns}
            expected["attrs"] = list(sent["attrs"].items())  # Arrow maps read as (key, value) lists
            assert rows[sent["id"]] == expected
