"""``kafka.value_format: connect_json`` (seed ``value.converter.schemas.enable=true``): values
written by Kafka Connect's ``JsonConverter`` with schemas — ``{"schema": …, "payload": …}`` —
decode to the same rows as the plain JSON payload; Connect's ``Timestamp`` (epoch millis) and
``Date`` (days since the epoch) logical types land as TIMESTAMP and DATE, ``Decimal`` (base64
of the unscaled bytes, scale in the parameters) as DECIMAL.

The envelopes are built here by ``connect_json``, following the converter's documented layout
(a ``struct`` schema with one entry per field: ``type``, ``optional``, ``field``, and ``name`` /
``version`` for logical types), independent of the decoder under test."""

from __future__ import annotations

import base64
import time
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import orjson
import pytest
from kafka_records import Rec

from hudi_sink.services.participant.decoded import Rejected, Row, Skipped, rows_to_arrow
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.services.participant.transaction import TransactionParticipant
from hudi_sink.shared.config.settings import TableConfig

SCHEMA = TableConfig(schema="id STRING NOT NULL, amount DOUBLE, ts TIMESTAMP, day DATE, n BIGINT, "
                            "price DECIMAL(9, 2)",
                     record_key_field="id").table_schema()

CONNECT_SCHEMA = {
    "type": "struct", "optional": False, "name": "orders.Value",
    "fields": [
        {"type": "string", "optional": False, "field": "id"},
        {"type": "double", "optional": True, "field": "amount"},
        {"type": "int64", "optional": True, "field": "ts",
         "name": "org.apache.kafka.connect.data.Timestamp", "version": 1},
        {"type": "int32", "optional": True, "field": "day",
         "name": "org.apache.kafka.connect.data.Date", "version": 1},
        {"type": "int64", "optional": True, "field": "n"},
        {"type": "bytes", "optional": True, "field": "price",
         "name": "org.apache.kafka.connect.data.Decimal", "version": 1, "parameters": {"scale": "2"}},
    ],
}


def connect_decimal(unscaled: int) -> str:
    """Connect's Decimal in JSON: base64 of ``BigInteger.toByteArray()`` of the unscaled value
    (minimal big-endian two's complement)."""
    return base64.b64encode(unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)).decode()


def connect_json(payload: dict[str, Any] | None) -> bytes:
    return orjson.dumps({"schema": CONNECT_SCHEMA, "payload": payload})




def test_envelopes_decode_to_the_payload_rows() -> None:
    p = TransactionParticipant(topic="t", partition=0, flush_records=100, fail_on_error=False,
                               decoder=RecordDecoder(SCHEMA, 1 << 20, connect_envelope=True))
    p.begin("20250101000000001", 1, 0)
    p.accept([
        Rec(0, connect_json({"id": "a", "amount": 9.5, "ts": 1_700_000_000_123, "day": 19_675,
                             "n": 2**40, "price": connect_decimal(123456)})),
        Rec(1, connect_json({"id": "b", "amount": None, "ts": None, "day": None, "n": None,
                             "price": connect_decimal(-5)})),
        Rec(2, connect_json(None)),                        # null payload: a tombstone
        Rec(3, orjson.dumps({"id": "c", "amount": 1.0})),  # plain JSON where envelopes are due
        Rec(4, orjson.dumps({"schema": CONNECT_SCHEMA, "payload": [1, 2]})),
        Rec(5, connect_json({"amount": 1.0})),             # the record key is missing
    ])
    rows = rows_to_arrow(p.rows, SCHEMA).to_pylist()
    assert rows == [
        {"id": "a", "amount": 9.5, "ts": datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC),
         "day": date(2023, 11, 14), "n": 2**40, "price": Decimal("1234.56")},
        {"id": "b", "amount": None, "ts": None, "day": None, "n": None, "price": Decimal("-0.05")},
    ]
    assert p.counters.records_skipped == 1
    assert [(d.offset, d.error_class) for d in p.dead_letters] == [
        (3, "NotAConnectEnvelope"), (4, "NotAnObject"), (5, "MissingRecordKey")]
    assert p.next_offset == 6


def test_plain_decoder_takes_the_envelope_as_an_object_with_unknown_fields() -> None:
    """Without connect_json, an envelope is just an object lacking the record key."""
    decoded = RecordDecoder(SCHEMA, 1 << 20).decode(connect_json({"id": "a"}))
    assert isinstance(decoded, Rejected) and decoded.error_class == "MissingRecordKey"
    assert isinstance(RecordDecoder(SCHEMA, 1 << 20, connect_envelope=True).decode(None), Skipped)


NESTED = TableConfig(schema="id STRING NOT NULL, price DECIMAL(38, 2), "
                            "addr STRUCT<fee: DECIMAL(9, 2), since: DATE>, parts ARRAY<DECIMAL(9, 2)>, "
                            "totals MAP<STRING, DECIMAL(9, 2)>",
                     record_key_field="id").table_schema()


def decimal_schema(scale: object, field: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "bytes", "optional": True, "version": 1,
                              "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": scale}}
    return {**schema, "field": field} if field else schema


NESTED_SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"type": "string", "optional": False, "field": "id"},
    decimal_schema("2", "price"),
    {"type": "struct", "optional": True, "field": "addr", "fields": [
        decimal_schema("2", "fee"),
        {"type": "int32", "optional": True, "field": "since",
         "name": "org.apache.kafka.connect.data.Date", "version": 1}]},
    {"type": "array", "optional": True, "field": "parts", "items": decimal_schema("2")},
    {"type": "map", "optional": True, "field": "totals", "keys": {"type": "string"},
     "values": decimal_schema("2")},
]}


def nested_envelope(payload: dict[str, Any], schema: dict[str, Any] = NESTED_SCHEMA) -> bytes:
    return orjson.dumps({"schema": schema, "payload": payload})


def decode_nested(value: bytes) -> Any:
    return RecordDecoder(NESTED, 1 << 24, connect_envelope=True).decode(value)


def test_connect_decimals_inside_struct_array_and_map_are_exact() -> None:
    """Before, only top-level fields were converted: a nested Connect Decimal reached the
    column as its base64 text, and base64 that happens to be digits ("1234", which is
    -26588.24 at scale 2) was stored as the number 1234.00."""
    assert base64.b64decode("1234") == (-2658824).to_bytes(3, "big", signed=True)
    decoded = decode_nested(nested_envelope({
        "id": "a", "price": connect_decimal(10**37 + 1),  # 38 digits: more than Python's default 28
        "addr": {"fee": "1234", "since": 19_675},
        "parts": [connect_decimal(1), None, connect_decimal(-99_999_999)],
        "totals": {"x": connect_decimal(123456), "y": "1234"}}))
    assert isinstance(decoded, Row), decoded
    row = rows_to_arrow([decoded], NESTED).to_pylist()[0]
    assert row == {"id": "a", "price": Decimal("100000000000000000000000000000000000.01"),
                   "addr": {"fee": Decimal("-26588.24"), "since": date(2023, 11, 14)},
                   "parts": [Decimal("0.01"), None, Decimal("-999999.99")],
                   "totals": [("x", Decimal("1234.56")), ("y", Decimal("-26588.24"))]}


def test_connect_numeric_decimals_are_exact() -> None:
    """``decimal.format=NUMERIC``: the decimal is a JSON number in the payload."""
    value = (b'{"schema": ' + orjson.dumps(NESTED_SCHEMA) + b', "payload": {"id": "a", '
             b'"price": 12345678901234567.89, "parts": [-0.01], "addr": {"fee": 1234567.89}}}')
    decoded = decode_nested(value)
    assert isinstance(decoded, Row), decoded
    assert decoded.values["price"] == Decimal("12345678901234567.89")
    assert decoded.values["parts"] == [Decimal("-0.01")]
    assert decoded.values["addr"] == {"fee": Decimal("1234567.89"), "since": None}


@pytest.mark.parametrize(("price", "message"), [
    ("12.5", "'12.5' is not base64"),           # never read as the decimal text it looks like
    ("", "is empty"),
    (connect_decimal(10**38), "more than 38 digits"),
    ("A" * 25, "25 base64 characters"),
])
def test_a_connect_decimal_that_is_not_one_is_a_bad_record(price: str, message: str) -> None:
    decoded = decode_nested(nested_envelope({"id": "a", "price": price}))
    assert isinstance(decoded, Rejected) and decoded.error_class == "InvalidDecimal", decoded
    assert message in decoded.message and "'price'" in decoded.message


@pytest.mark.parametrize("scale", ["-1000000", "1000000", 39, "2.5", None, True, "9" * 5000])
def test_absurd_connect_scales_reject_the_column_and_are_ignored_elsewhere(scale: object) -> None:
    """A 152-byte envelope with ``"scale": "-1000000"`` raised decimal.Overflow out of decode
    (the participant exited and every pod the partition moved to died on it again)."""
    poison = nested_envelope({"id": "a", "price": "AQ=="}, {"type": "struct", "fields": [
        {"type": "string", "field": "id"}, decimal_schema(scale, "price")]})
    decoded = decode_nested(poison)
    assert isinstance(decoded, Rejected) and decoded.error_class == "InvalidDecimal", decoded
    # The same field where the table has no such column: ignored like any unknown field.
    elsewhere = nested_envelope({"id": "a", "other": "AQ=="}, {"type": "struct", "fields": [
        {"type": "string", "field": "id"}, decimal_schema(scale, "other")]})
    assert isinstance(decode_nested(elsewhere), Row)


def test_a_300_kb_connect_decimal_is_rejected_at_once() -> None:
    """Converting it took 7.8 s of the event loop (quadratic int → Decimal)."""
    huge = base64.b64encode(b"\x7f" * 225_000).decode()  # 300,000 characters
    values = [nested_envelope({"id": "a", "price": huge}),
              nested_envelope({"id": "a", "parts": [huge] * 3, "totals": {"k": huge}})]
    started = time.thread_time()  # CPU of this thread: other workers sharing the cores do not count
    for value in values:
        decoded = decode_nested(value)
        assert isinstance(decoded, Rejected) and decoded.error_class == "InvalidDecimal", decoded
        assert "300000 base64 characters" in decoded.message
    assert time.thread_time() - started < 0.5


def test_connect_dates_at_any_depth_and_out_of_range() -> None:
    decoded = decode_nested(nested_envelope({"id": "a", "addr": {"since": 0}}))
    assert isinstance(decoded, Row) and decoded.values["addr"] == {"fee": None, "since": date(1970, 1, 1)}
    decoded = decode_nested(nested_envelope({"id": "a", "addr": {"since": 10**12}}))
    assert isinstance(decoded, Rejected) and "outside years 1..9999" in decoded.message


def test_a_schema_nested_too_deeply_is_a_bad_record() -> None:
    schema: dict[str, Any] = decimal_schema("2")
    payload: Any = "AQ=="
    for _ in range(70):
        schema, payload = {"type": "array", "items": schema}, [payload]
    value = nested_envelope({"id": "a", "deep": payload}, {"type": "struct", "fields": [
        {"type": "string", "field": "id"}, {**schema, "field": "deep"}]})
    decoded = decode_nested(value)
    assert isinstance(decoded, Rejected) and decoded.error_class == "NotAConnectEnvelope"
    assert "deeper than 64 levels" in decoded.message


def test_one_struct_plan_costs_no_more_than_its_value() -> None:
    """A thousand fields of one name under an array of many items must not make a record
    cost fields × items steps."""
    item_schema = {"type": "struct", "fields": [decimal_schema("2", f"f{i}") for i in range(2000)]}
    schema = {"type": "struct", "fields": [{"type": "string", "field": "id"},
                                           {"type": "array", "field": "parts", "items": item_schema}]}
    value = nested_envelope({"id": "a", "parts": [{}] * 200_000}, schema)
    started = time.thread_time()
    decoded = decode_nested(value)
    assert isinstance(decoded, Rejected) and "'parts[]'" in decoded.message  # {} is no decimal
    assert time.thread_time() - started < 2
