"""``table.kafka_metadata`` (seed ``connect.meta.data``): every row carries its record's Kafka
topic, partition, offset, timestamp and key; a value cannot forge them."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
from kafka_records import Rec

from hudi_sink.services.participant.decoded import rows_to_arrow
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.config.settings import TableConfig

SCHEMA = TableConfig(schema="id STRING, amount DOUBLE", record_key_field="id",
                     kafka_metadata=True).table_schema()




def test_rows_carry_their_kafka_coordinates() -> None:
    p = TransactionParticipant(topic="orders", partition=2, decoder=RecordDecoder(SCHEMA, 1 << 20),
                               flush_records=100, fail_on_error=False)
    p.begin("20250101000000001", 1, 10)
    p.accept([
        Rec(10, orjson.dumps({"id": "a", "amount": 1.5}), b"key-a", 1_700_000_000_123),
        # A value holding a metadata column's name cannot forge it (nor be refused for it).
        Rec(11, orjson.dumps({"id": "b", "amount": 2.0, "_kafka_offset": "forged"}), None, -1),
        Rec(12, orjson.dumps({"id": "c"}), b"\xff\xfe", None),
    ])
    assert p.counters.records_dlq == 0
    table = rows_to_arrow(p.rows, SCHEMA).to_pylist()
    assert [(r["id"], r["_kafka_topic"], r["_kafka_partition"], r["_kafka_offset"]) for r in table] == [
        ("a", "orders", 2, 10), ("b", "orders", 2, 11), ("c", "orders", 2, 12)]
    assert table[0]["_kafka_timestamp"] == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert [r["_kafka_timestamp"] for r in table[1:]] == [None, None]
    assert [r["_kafka_key"] for r in table] == ["key-a", None, "\ufffd\ufffd"]
    assert p.counters.unknown_fields == 1  # the forged field is an unknown field, dropped
