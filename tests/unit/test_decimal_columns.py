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

from hudi_sink.services.participant.avro_format import AvroValues
from hudi_sink.services.participant.decoded import Rejected, rows_to_arrow
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.shared.config.settings import TableConfig
from hudi_sink.shared.errors import SchemaError
from hudi_sink.shared.schema.registry import FileSchema
from hudi_sink.shared.schema.table_schema import parse_ddl

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
    values = AvroValues(FileSchema(str(avsc), 1))
    p = accept_values(RecordDecoder(TABLE, 1 << 20, value_parser=values.parse),
                [confluent_avro(1, writer, {"id": "a", "price": Decimal("-0.05")})])
    assert rows_to_arrow(p.rows, TABLE).to_pylist() == [{"id": "a", "price": Decimal("-0.05"), "big": None}]


WIDE = TableConfig(schema="id STRING, amount DECIMAL(38, 2), big DECIMAL(38, 0), n BIGINT, "
                          "rate DOUBLE, addr STRUCT<fee: DECIMAL(38, 2)>, parts ARRAY<DECIMAL(38, 2)>, "
                          "totals MAP<STRING, DECIMAL(38, 2)>",
                   record_key_field="id").table_schema()


def wide_row(text: bytes) -> dict[str, object]:
    """The one row of the raw JSON text ``text`` (numbers exactly as written) in WIDE."""
    p = accept_values(RecordDecoder(WIDE, 1 << 20), [text])
    assert p.dead_letters == [], p.dead_letters[0].message
    row: dict[str, object] = rows_to_arrow(p.rows, WIDE).to_pylist()[0]
    return row


def test_json_decimals_are_read_from_the_numbers_text_never_through_a_float() -> None:
    """orjson reads both as floats: 12345678901234568.00 and 123456789012345680000000000."""
    row = wide_row(b'{"id": "a", "amount": 12345678901234567.89, "big": 123456789012345678901234567}')
    assert row["amount"] == Decimal("12345678901234567.89")
    assert row["big"] == Decimal("123456789012345678901234567")
    assert wide_row(b'{"id": "b", "amount": -0.01, "big": -1e37}')["amount"] == Decimal("-0.01")
    assert wide_row(b'{"id": "c", "big": 1.2345678901234567890123456789E+28}')["big"] == Decimal(
        "12345678901234567890123456789")
    assert wide_row(b'{"id": "d", "amount": 99999999999999999999999999999999999.99}')["amount"] == (
        Decimal("99999999999999999999999999999999999.99"))  # the largest DECIMAL(38, 2)
    # The table's other numbers keep their types: a DOUBLE is still a float.
    row = wide_row(b'{"id": "e", "amount": 0.1, "rate": 0.1}')
    assert row["rate"] == 0.1 and type(row["rate"]) is float


def test_nested_json_decimals_are_exact() -> None:
    row = wide_row(b'{"id": "a", "addr": {"fee": 12345678901234567.89}, '
                   b'"parts": [0.01, null, 98765432109876543.21], "totals": {"x": -12345678901234567.89}}')
    assert row["addr"] == {"fee": Decimal("12345678901234567.89")}
    assert row["parts"] == [Decimal("0.01"), None, Decimal("98765432109876543.21")]
    assert row["totals"] == [("x", Decimal("-12345678901234567.89"))]


def test_decimals_out_of_range_are_bad_records_not_exceptions() -> None:
    """``1e78`` made ``quantize`` raise decimal.InvalidOperation out of ``decode``: the
    participant died on the record, on every pod the partition moved to."""
    d = RecordDecoder(WIDE, 1 << 24)
    cases = {
        b'{"id": "1", "amount": 1e78}': "does not fit DECIMAL(38, 2)",
        b'{"id": "1", "amount": "1e999999999999999999"}': "does not fit",
        b'{"id": "1", "amount": "1e9999999999999999999"}': "is not a number",  # past Decimal's exponents
        b'{"id": "1", "amount": 1e-9999999999999999999}': "more than 2 decimal place(s)",
        b'{"id": "1", "amount": 1000000000000000000000000000000000000}': "does not fit",
        b'{"id": "1", "amount": 0.001}': "more than 2 decimal place(s)",
        b'{"id": "1", "addr": {"fee": 1e78}}': "'addr.fee'",
        b'{"id": "1", "parts": [1e78]}': "'parts[]'",
        b'{"id": "1", "amount": "1_000"}': "is not a number",     # Decimal() alone takes these
        '{"id": "1", "amount": "١٢٣"}'.encode(): "is not a number",
        b'{"id": "1", "amount": "' + b"1" * 1_000_000 + b'"}': "(1000000 chars) does not fit",
    }
    for value, message in cases.items():
        result = d.decode(value)
        assert isinstance(result, Rejected) and result.error_class == "InvalidDecimal", (value[:60], result)
        assert message in result.message, result.message


def test_zero_with_any_exponent_fits() -> None:
    assert wide_row(b'{"id": "a", "amount": 0e999999, "big": -0.0e-5}')["amount"] == Decimal("0.00")
    assert wide_row(b'{"id": "a", "amount": -0.0e-9999999999999999999}')["amount"] == Decimal("0.00")
