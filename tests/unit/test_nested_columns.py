"""STRUCT, ARRAY and MAP columns: parsed from the DDL (nested freely), Arrow and Avro types in the
commit schema, decoded strictly from JSON and from Avro (nested logical types included), the
first bad nested value rejecting the record with its path."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import fastavro
import orjson
import pyarrow as pa
import pytest
from kafka_records import accept_values
from registry_app import confluent_avro

from hudi_sink.services.participant.avro_format import AvroValues
from hudi_sink.services.participant.decoded import rows_to_arrow
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.errors import SchemaError
from hudi_sink.shared.schema.registry import FileSchema
from hudi_sink.shared.schema.table_schema import parse_ddl

TABLE = TableConfig(schema="id STRING NOT NULL, tags ARRAY<STRING>, attrs MAP<STRING, BIGINT>, "
                           "addr STRUCT<city: STRING, zip INT, seen TIMESTAMP, "
                           "geo STRUCT<lat: DOUBLE, lon: DOUBLE>>, "
                           "lines ARRAY<STRUCT<sku: STRING, price: DECIMAL(9, 2)>>",
                    record_key_field="id").table_schema()



def test_schema_types() -> None:
    arrow = TABLE.data_arrow_schema
    assert arrow.field("tags").type == pa.list_(pa.string())
    assert arrow.field("attrs").type == pa.map_(pa.string(), pa.int64())
    assert arrow.field("addr").type.field("geo").type == pa.struct([("lat", pa.float64()),
                                                                  ("lon", pa.float64())])
    assert arrow.field("lines").type.value_type.field("price").type == pa.decimal128(9, 2)
    fastavro.parse_schema(TABLE.avro_schema())  # a valid Avro schema, nested records named uniquely
    assert [c.name for c in parse_ddl("a MAP<STRING, ARRAY<INT>> NOT NULL, b INT")] == ["a", "b"]
    for bad in ("a MAP<INT, STRING>", "a ARRAY<NOPE>", "a STRUCT<1x: INT>"):
        with pytest.raises(SchemaError):
            parse_ddl(bad)
    with pytest.raises(SchemaError, match="nested"):
        TableConfig(schema="id STRING, tags ARRAY<STRING>", record_key_field="id",
                    partition_field="tags").table_schema()


def test_json_values() -> None:
    good = {"id": "a", "tags": ["x", None], "attrs": {"n": 1},
            "addr": {"city": "Köln", "zip": 50667, "seen": "2024-05-01T12:00:00Z",
                     "geo": {"lat": 50.9, "lon": 6.9}, "extra": 1},
            "lines": [{"sku": "s1", "price": "9.99"}, {"sku": "s2"}]}
    p = accept_values(RecordDecoder(TABLE, 1 << 20), [orjson.dumps(v) for v in (
        good,
        {"id": "b"},
        {"id": "c", "tags": "x"},
        {"id": "d", "addr": {"zip": "50667"}},
        {"id": "e", "lines": [{"sku": "s", "price": "1.234"}]},
        {"id": "f", "attrs": {"n": 1.5}},
    )])
    rows = rows_to_arrow(p.rows, TABLE).to_pylist()
    assert rows[0]["tags"] == ["x", None]
    assert rows[0]["attrs"] == [("n", 1)]
    assert rows[0]["addr"] == {"city": "Köln", "zip": 50667,
                               "seen": datetime(2024, 5, 1, 12, tzinfo=UTC),
                               "geo": {"lat": 50.9, "lon": 6.9}}
    assert rows[0]["lines"] == [{"sku": "s1", "price": Decimal("9.99")}, {"sku": "s2", "price": None}]
    assert rows[1] == {"id": "b", "tags": None, "attrs": None, "addr": None, "lines": None}
    letters = {d.offset: (d.error_class, d.message) for d in p.dead_letters}
    assert letters[2][0] == "TypeMismatch" and "'tags'" in letters[2][1]
    assert letters[3][0] == "TypeMismatch" and "'addr.zip'" in letters[3][1]
    assert letters[4][0] == "InvalidDecimal" and "'lines[].price'" in letters[4][1]
    assert letters[5][0] == "TypeMismatch" and "'attrs{}'" in letters[5][1]


def test_avro_values_with_nested_logical_types(tmp_path: Path) -> None:
    writer = {"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "string"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "addr", "type": ["null", {"type": "record", "name": "Addr", "fields": [
            {"name": "city", "type": "string"},
            {"name": "seen", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "when", "type": {"type": "int", "logicalType": "date"}}]}]},
        {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
            {"name": "sku", "type": "string"},
            {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                       "scale": 2}}]}}},
    ]}
    avsc = tmp_path / "order.avsc"
    avsc.write_text(json.dumps(writer))
    datum = {"id": "a", "tags": ["t"], "attrs": {"k": 2**40},
             "addr": {"city": "Bonn", "seen": datetime(2024, 5, 1, 8, 30, tzinfo=UTC),
                      "when": date(2024, 5, 1)},
             "lines": [{"sku": "s", "price": Decimal("-1.50")}]}
    p = accept_values(RecordDecoder(TABLE, 1 << 20, value_parser=AvroValues(FileSchema(str(avsc), 1)).parse),
                [confluent_avro(1, writer, datum)])
    assert p.dead_letters == []
    row = rows_to_arrow(p.rows, TABLE).to_pylist()[0]
    assert row["addr"] == {"city": "Bonn", "zip": None, "seen": datetime(2024, 5, 1, 8, 30, tzinfo=UTC),
                           "geo": None}
    assert row["attrs"] == [("k", 2**40)] and row["tags"] == ["t"]
    assert row["lines"] == [{"sku": "s", "price": Decimal("-1.50")}]
