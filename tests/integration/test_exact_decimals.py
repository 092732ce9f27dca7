"""Decimals land exactly, and no record stops a partition (through the contract: CLI, config,
topics, the table read back with hudi-rs, the ``<name>-dlq`` topic).

Two sinks run side by side on one broker: a JSON topic with a ``DECIMAL(38, 2)`` column and a
Connect-JSON topic with decimals at the top level and inside a struct, an array and a map
(base64, and ``decimal.format=NUMERIC`` numbers). Each topic holds exact values, values that
do not fit, the poison records that used to end the participant (``1e78``; a Connect Decimal
with ``"scale": "-1000000"``; a 300 KB Connect Decimal, 7.8 s of work on the event loop) and,
after them, good records. Every value in the table equals the text that was sent, each bad
record is one dead letter with its error class, sent within seconds of the record (the old
participant exited on the first poison, and every restart died on it again), and the later
records are committed by the same participant process.
"""

from __future__ import annotations

import asyncio
import base64
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from eventually import eventually
from pipeline import Pipeline, Service

from hudi_sink.cli.broker import EmbeddedBroker

pytestmark = pytest.mark.timeout(600)

DECIMAL = "org.apache.kafka.connect.data.Decimal"
DEAD_LETTER_DELAY_MS = 3000
"""Source record → its dead letter (fetch, decode, send). The old code needed 7.8 s of
decoding alone for the 300 KB decimal, and died on the other two."""


def connect_decimal(unscaled: int) -> str:
    """Connect's Decimal: base64 of the unscaled value's minimal two's complement."""
    return base64.b64encode(unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)).decode()


def decimal_field(field: str | None, scale: str = "2") -> dict[str, Any]:
    schema = {"type": "bytes", "optional": True, "name": DECIMAL, "version": 1,
              "parameters": {"scale": scale}}
    return {**schema, "field": field} if field else schema


CONNECT_SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"type": "string", "optional": False, "field": "id"},
    decimal_field("price"),
    {"type": "struct", "optional": True, "field": "addr", "fields": [decimal_field("fee")]},
    {"type": "array", "optional": True, "field": "parts", "items": decimal_field(None)},
    {"type": "map", "optional": True, "field": "totals", "keys": {"type": "string"},
     "values": decimal_field(None)},
]}


def envelope(payload: str, schema: dict[str, Any] = CONNECT_SCHEMA) -> bytes:
    """An envelope around the payload's JSON text (numbers exactly as written)."""
    return b'{"schema": ' + orjson.dumps(schema) + b', "payload": ' + payload.encode() + b"}"


JSON_VALUES: list[tuple[bytes, str | None]] = [  # (value, error class of its dead letter)
    (b'{"id": "a", "amount": 12345678901234567.89}', None),
    (b'{"id": "b", "amount": -0.01}', None),
    (b'{"id": "c", "amount": 99999999999999999999999999999999999.99}', None),
    (b'{"id": "d", "amount": 123456789012345678901234567}', None),
    (b'{"id": "p1", "amount": 1e78}', "InvalidDecimal"),        # raised decimal.InvalidOperation
    (b'{"id": "p2", "amount": 0.001}', "InvalidDecimal"),
    (b'{"id": "p3", "amount": 1, "n": 1234567890123456789012345}', "TypeMismatch"),
    (b'{"id": "e", "amount": 1.5, "n": 9223372036854775807}', None),
]
JSON_EXPECTED = {"a": Decimal("12345678901234567.89"), "b": Decimal("-0.01"),
                 "c": Decimal("99999999999999999999999999999999999.99"),
                 "d": Decimal("123456789012345678901234567.00"), "e": Decimal("1.50")}

HUGE = base64.b64encode(b"\x7f" * 225_000).decode()  # a 300,000-character Connect Decimal
CONNECT_VALUES: list[tuple[bytes, str | None]] = [
    (envelope(f'{{"id": "a", "price": "{connect_decimal(10**37 + 1)}", "addr": {{"fee": "1234"}}, '
              f'"parts": ["{connect_decimal(1)}", null, "{connect_decimal(-99_999_999)}"], '
              f'"totals": {{"x": "{connect_decimal(123456)}"}}}}'), None),
    (envelope('{"id": "b", "price": 12345678901234567.89, "parts": [-0.01], "addr": {"fee": 0.5}}'), None),
    (envelope('{"id": "p1", "price": "AQ=="}', {"type": "struct", "fields": [  # raised decimal.Overflow
        {"type": "string", "field": "id"}, decimal_field("price", "-1000000")]}), "InvalidDecimal"),
    (envelope(f'{{"id": "p2", "price": "{HUGE}"}}'), "InvalidDecimal"),
    (envelope('{"id": "p3", "price": 1e78}'), "InvalidDecimal"),
    (envelope('{"id": "p4", "parts": ["12.5"]}'), "InvalidDecimal"),  # not base64: never decimal text
    (envelope(f'{{"id": "c", "totals": {{"y": "{connect_decimal(-1)}"}}}}'), None),
]
CONNECT_EXPECTED: dict[str, dict[str, Any]] = {
    "a": {"price": Decimal("100000000000000000000000000000000000.01"), "addr": {"fee": Decimal("-26588.24")},
          "parts": [Decimal("0.01"), None, Decimal("-999999.99")], "totals": [("x", Decimal("1234.56"))]},
    "b": {"price": Decimal("12345678901234567.89"), "addr": {"fee": Decimal("0.50")},
          "parts": [Decimal("-0.01")], "totals": None},
    "c": {"price": None, "addr": None, "parts": None, "totals": [("y", Decimal("-0.01"))]},
}


async def _create(bootstrap: str, *topics: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1) for topic in topics])
    finally:
        await admin.close()


async def _send(bootstrap: str, topic: str, values: list[bytes]) -> list[int]:
    """Send ``values`` to partition 0 of ``topic`` in order; their timestamps."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        futures = [await producer.send(topic, value, partition=0) for value in values]
        return [(await future).timestamp for future in futures]
    finally:
        await producer.stop()


async def _read(bootstrap: str, topic: str, count: int) -> list[Any]:
    """The first ``count`` records of ``topic`` (no group: it joins nothing)."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    try:
        found: list[Any] = []
        async with asyncio.timeout(60):
            while len(found) < count:
                batches = await consumer.getmany(timeout_ms=1000)
                found.extend(record for batch in batches.values() for record in batch)
        return found
    finally:
        await consumer.stop()


def _check_sink(sink: Pipeline, participant: Service, values: list[tuple[bytes, str | None]],
                sent_at: list[int], agreed: bool) -> dict[str, dict[str, Any]]:
    """The sink committed every record with its one participant process, dead-lettered the
    bad ones promptly with their error classes; the rows by id. ``agreed``: Hudi's own Java
    reader reads the same rows (not for a table with small decimals inside an ARRAY, which
    stay INT32/INT64 and Hudi refuses: docs/hudi-java-reader.md)."""
    sink.wait_offsets(len(values), timeout_s=180)
    assert participant.alive(), participant.log_tail()
    assert [s.role for s in sink.services].count("participant") == 1
    bad = {offset: error for offset, (_, error) in enumerate(values) if error is not None}
    letters = asyncio.run(_read(sink.bootstrap, f"{sink.name}-dlq", len(bad)))
    seen = {}
    for letter in letters:
        headers = {key: value.decode() for key, value in letter.headers}
        offset = int(headers["hudi.sink.source.offset"])
        seen[offset] = headers["hudi.sink.error.class"]
        assert letter.value == values[offset][0]  # untouched
        assert letter.timestamp - sent_at[offset] < DEAD_LETTER_DELAY_MS, (offset, headers)
    assert seen == bad
    assert len(letters) == len(bad)
    rows = (sink.read_agreed()[0] if agreed else sink.read()).to_pylist()
    return {row["id"]: row for row in rows}


def test_decimals_exact_and_poison_records_dead_lettered(
    broker: EmbeddedBroker, tmp_path: Path, unique_name: str
) -> None:
    table = {"partition_field": None}
    json_sink = Pipeline(tmp_path, f"{unique_name}j", broker.bootstrap, partitions=1, overrides={
        "table": {**table, "schema": "id STRING, amount DECIMAL(38, 2), n BIGINT"}})
    connect_sink = Pipeline(tmp_path, f"{unique_name}c", broker.bootstrap, partitions=1, overrides={
        "kafka": {"value_format": "connect_json"},
        "table": {**table, "schema": "id STRING, price DECIMAL(38, 2), addr STRUCT<fee: DECIMAL(9, 2)>, "
                                    "parts ARRAY<DECIMAL(9, 2)>, totals MAP<STRING, DECIMAL(9, 2)>"}})
    sinks = (json_sink, connect_sink)
    asyncio.run(_create(broker.bootstrap, json_sink.topic, connect_sink.topic))
    try:
        services = [sink.start(role) for sink in sinks for role in ("coordinator", "participant")]
        for sink, service in zip((json_sink, json_sink, connect_sink, connect_sink), services, strict=True):
            sink.wait_ready(service, timeout_s=240)
        for sink, coordinator in ((json_sink, services[0]), (connect_sink, services[2])):
            # A first transaction ended (an idle one is withdrawn, not committed): the
            # participant consumes the (empty) partition before the records are sent.
            eventually(lambda c=coordinator: Pipeline.ended_transactions(c) >= 1, 120,
                       f"a first transaction of {sink.name}")
        json_sent = asyncio.run(_send(broker.bootstrap, json_sink.topic, [v for v, _ in JSON_VALUES]))
        connect_sent = asyncio.run(_send(broker.bootstrap, connect_sink.topic,
                                         [v for v, _ in CONNECT_VALUES]))

        rows = _check_sink(json_sink, services[1], JSON_VALUES, json_sent, agreed=True)
        assert {key: row["amount"] for key, row in rows.items()} == JSON_EXPECTED
        assert rows["e"]["n"] == 2**63 - 1

        rows = _check_sink(connect_sink, services[3], CONNECT_VALUES, connect_sent, agreed=False)
        assert set(rows) == set(CONNECT_EXPECTED)
        for key, expected in CONNECT_EXPECTED.items():
            assert {column: rows[key][column] for column in expected} == expected, key
    finally:
        for sink in sinks:
            sink.stop_all()
