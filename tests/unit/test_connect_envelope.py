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
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import orjson
from kafka_records import Rec

from services.participant.decoded import Rejected, Skipped, rows_to_arrow
from services.participant.decoder import RecordDecoder
from services.participant.transaction import TransactionParticipant
from shared.config import TableConfig

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
    assert p.counters.skipped == 1
    assert [(d.offset, d.error_class) for d in p.dead_letters] == [
        (3, "NotAConnectEnvelope"), (4, "NotAnObject"), (5, "MissingRecordKey")]
    assert p.next_offset == 6


def test_plain_decoder_takes_the_envelope_as_an_object_with_unknown_fields() -> None:
    """Without connect_json, an envelope is just an object lacking the record key."""
    decoded = RecordDecoder(SCHEMA, 1 << 20).decode(connect_json({"id": "a"}))
    assert isinstance(decoded, Rejected) and decoded.error_class == "MissingRecordKey"
    assert isinstance(RecordDecoder(SCHEMA, 1 << 20, connect_envelope=True).decode(None), Skipped)
