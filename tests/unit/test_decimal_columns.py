"""DECIMAL(p, s) columns: parsed from the DDL, exact decoding from JSON numbers, numeric strings
and Avro ``decimal`` values (never rounded: too many places or digits is a bad record), Arrow
``decimal128(p, s)`` and Avro ``bytes/decimal`` in the commit schema."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import orjson
import pyarrow as pa
import pytest
from kafka_records import accept_values
from registry_app import confluent_avro

from services.participant.avro_format import AvroValues
from services.participant.decoded import rows_to_arrow
from services.participant.decoder import RecordDecoder
from shared.config import TableConfig
from shared.errors import SchemaError
from shared.schema import parse_ddl
from shared.schema_registry import FileSchema

TABLE = TableConfig(schema="id STRING, price DECIMAL(9, 2), big numeric(38)", record_key_field="id",
                    ).table_schema()



def test_schema_types() -> None:
    assert TABLE.data_arrow_schema.field("price").type == pa.decimal128(9, 2)
    assert TABLE.data_arrow_schema.field("big").type == pa.decimal128(38, 0)
    price = next(f for f in TABLE.avro_schema()["fields"] if f["name"] == "price")
    assert price["type"] == ["null", {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                      "scale": 2}]
    for bad in ("x DECIMAL(39, 1)", "x DECIMAL(5, 6)", "x DECIMAL(0)"):
        with pytest.raises(SchemaError):
            parse_ddl(bad)


def test_json_numbers_and_strings_exactly() -> None:
    p = accept_values(RecordDecoder(TABLE, 1 << 20), [orjson.dumps(v) for v in (
        {"id": "a", "price": 12.5, "big": str(10**37)},  # past 64 bits: as a string
        {"id": "b", "price": "1234567.89", "big": "-5"},
        {"id": "c", "price": 3},
        {"id": "d", "price": 1.234},          # three places for scale 2
        {"id": "e", "price": 12345678.9},     # eight integer digits for (9, 2)
        {"id": "f", "price": "abc"},
        {"id": "g", "price": True},
        {"id": "h", "big": "NaN"},
    )])
    rows = rows_to_arrow(p.rows, TABLE).to_pylist()
    assert [(r["id"], r["price"], r["big"]) for r in rows] == [
        ("a", Decimal("12.50"), Decimal(10**37)), ("b", Decimal("1234567.89"), Decimal(-5)),
        ("c", Decimal("3.00"), None)]
    assert [(d.offset, d.error_class) for d in p.dead_letters] == [
        (3, "InvalidDecimal"), (4, "InvalidDecimal"), (5, "InvalidDecimal"), (6, "TypeMismatch"),
        (7, "InvalidDecimal")]


def test_avro_decimal_logical_type(tmp_path: Path) -> None:
    writer = {"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "string"},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9,
                                   "scale": 2}}]}
    avsc = tmp_path / "r.avsc"
    avsc.write_text(json.dumps(writer))
    values = AvroValues(FileSchema(str(avsc)))
    p = accept_values(RecordDecoder(TABLE, 1 << 20, value_parser=values.parse),
                [confluent_avro(1, writer, {"id": "a", "price": Decimal("-0.05")})])
    assert rows_to_arrow(p.rows, TABLE).to_pylist() == [{"id": "a", "price": Decimal("-0.05"), "big": None}]
