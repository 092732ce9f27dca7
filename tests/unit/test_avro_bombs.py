"""Avro values that claim more than their bytes: refused cheaply, never decoded.

A writer schema whose array items can take zero bytes lets 12 bytes decode to 10 million
items; a recursive one lets 100 kB nest deep enough to crash fastavro's compiled reader; a
``decimal`` of many bytes takes quadratic time and was rounded to the writer's precision.
Each ends as one bad record (``InvalidAvro``) within milliseconds and without allocating
what it claims; legitimate schemas still decode. A fuzz test feeds arbitrary bodies to
arbitrary small writer schemas: the parser never raises and always returns quickly."""

from __future__ import annotations

import struct
import time
import tracemalloc
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kafka_records import accept_values
from registry_app import confluent_avro

from hudi_sink.services.participant.avro_format import AvroValues
from hudi_sink.services.participant.avro_limits import MAX_DEPTH
from hudi_sink.services.participant.decoded import Rejected
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.shared.config.settings import TableConfig

TABLE = TableConfig(schema="id STRING NOT NULL, price DECIMAL(9, 2)", record_key_field="id").table_schema()


class Schemas:
    """Writer schemas by id, as a registry would serve them."""

    def __init__(self, schemas: dict[int, Any]) -> None:
        self.schemas = schemas

    def get(self, schema_id: int) -> dict[str, Any]:
        return self.schemas[schema_id]  # type: ignore[no-any-return]


def _varint(n: int) -> bytes:
    """Avro's zig-zag varint of ``n``."""
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes([*out, n])


def _record(*fields: tuple[str, Any], name: str = "R") -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}


def _framed(schema_id: int, body: bytes) -> bytes:
    return struct.pack(">bI", 0, schema_id) + body


def _parse_measured(values: AvroValues, value: bytes) -> tuple[object, float, int]:
    """The outcome, the CPU seconds it took and the peak bytes it allocated.

    CPU time of this thread, not wall time: a bomb is unbounded work, and this thread's CPU
    clock counts only that work, whereas a wall clock also counts the other test workers and
    CI jobs sharing the machine's two cores (a 0.5 s wall bound once failed at 0.51 s).
    """
    tracemalloc.start()
    started = time.thread_time()
    try:
        outcome = values.parse(value)
        return outcome, time.thread_time() - started, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


ZERO_BYTE_ITEMS = {
    "null": "null",
    "empty record": _record(name="Empty"),
    "record of nulls": _record(("a", "null"), ("b", _record(name="Inner")), name="Nulls"),
    "fixed of size 0": {"type": "fixed", "name": "Nothing", "size": 0},
}


@pytest.mark.parametrize("items", ZERO_BYTE_ITEMS.values(), ids=list(ZERO_BYTE_ITEMS))
def test_an_array_of_zero_byte_items_is_refused_without_decoding(items: Any) -> None:
    bomb_schema = _record(("id", "string"), ("junk", ["null", {"type": "array", "items": items}]))
    good_schema = _record(("id", "string"))
    values = AvroValues(Schemas({7: bomb_schema, 8: good_schema}))
    bomb = _framed(7, _varint(1) + b"x" + _varint(1) + _varint(10_000_000) + _varint(0))
    assert len(bomb) < 16
    outcome, seconds, peak = _parse_measured(values, bomb)
    assert isinstance(outcome, Rejected) and outcome.error_class == "InvalidAvro"
    assert "schema id 7" in outcome.message and "junk" in outcome.message
    assert seconds < 0.1 and peak < 1 << 20  # the old code: >0.5 s and a 10-million-item list
    p = accept_values(RecordDecoder(TABLE, 1 << 20, value_parser=values.parse),
                      [bomb, confluent_avro(8, good_schema, {"id": "ok"})])
    assert [d.error_class for d in p.dead_letters] == ["InvalidAvro"]
    assert [row.values["id"] for row in p.rows] == ["ok"] and p.next_offset == 2


def test_arrays_of_real_items_and_maps_still_decode_and_lying_counts_fail_fast() -> None:
    schema = _record(("id", "string"), ("n", {"type": "array", "items": "int"}),
                     ("m", {"type": "map", "values": "null"}), ("e", _record(name="E")))
    values = AvroValues(Schemas({1: schema}))
    assert values.parse(confluent_avro(1, schema, {"id": "a", "n": [1, 2], "m": {"k": None}, "e": {}})) \
        == {"id": "a", "n": [1, 2], "m": {"k": None}, "e": {}}
    for lie in (_varint(1) + b"a" + _varint(2**60) + b"\x02",  # 2^60 ints in one byte
                _varint(1) + b"a" + _varint(0) + _varint(2**60) + b"\x00"):  # 2^60 null entries
        outcome, seconds, peak = _parse_measured(values, _framed(1, lie))
        assert isinstance(outcome, Rejected) and "EOFError" in outcome.message
        assert seconds < 0.1 and peak < 1 << 20


def test_a_recursive_schema_is_refused_not_a_crash() -> None:
    node = _record(("id", "string"), ("next", ["null", "Node"]), name="Node")
    values = AvroValues(Schemas({3: node}))
    deep = _framed(3, (_varint(0) + _varint(1)) * 100_000 + _varint(0) + _varint(0))
    outcome = values.parse(deep)  # the old code: a segmentation fault of the whole process
    assert isinstance(outcome, Rejected) and "contains itself" in outcome.message


def test_schemas_nested_deeper_than_the_limit_are_refused() -> None:
    def nested(levels: int) -> dict[str, Any]:
        inner: Any = "int"
        for _ in range(levels):
            inner = {"type": "array", "items": inner}
        return _record(("id", "string"), ("deep", inner))

    shallow, deep = nested(MAX_DEPTH - 2), nested(MAX_DEPTH + 1)
    values = AvroValues(Schemas({1: shallow, 2: deep}))
    assert isinstance(values.parse(confluent_avro(1, shallow, {"id": "a", "deep": []})), dict)
    outcome = values.parse(confluent_avro(2, deep, {"id": "a", "deep": []}))
    assert isinstance(outcome, Rejected) and f"deeper than {MAX_DEPTH}" in outcome.message


def test_decimals_are_bounded_and_never_rounded() -> None:
    decimal = {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}
    schema = _record(("id", "string"), ("price", decimal))
    values = AvroValues(Schemas({1: schema}))
    assert values.parse(confluent_avro(1, schema, {"id": "a", "price": Decimal("-12.34")})) \
        == {"id": "a", "price": Decimal("-12.34")}
    too_many_digits = (123456).to_bytes(3, "big", signed=True)  # 1234.56: six digits, precision 4
    outcome = values.parse(_framed(1, _varint(1) + b"a" + _varint(3) + too_many_digits))
    assert isinstance(outcome, Rejected) and "precision 4" in outcome.message  # old: 1235, rounded
    huge = b"\x7f" * 200_000
    outcome, seconds, _ = _parse_measured(values, _framed(1, _varint(1) + b"a" + _varint(len(huge)) + huge))
    assert isinstance(outcome, Rejected) and "200000 bytes" in outcome.message
    assert seconds < 0.1  # the old code: seconds of quadratic conversion (a minute at 1 MB)


# --- fuzz: arbitrary small writer schemas, arbitrary bodies --------------------------------

_PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string",
               {"type": "long", "logicalType": "timestamp-millis"}, {"type": "int", "logicalType": "date"},
               {"type": "string", "logicalType": "uuid"},
               {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}]


@st.composite
def _writer_schema(draw: st.DrawFn) -> dict[str, Any]:
    counter = iter(range(1000))

    def kind(depth: int, enclosing: str) -> Any:
        choice = draw(st.integers(0, 8 if depth < 3 else 0))
        if choice == 0:
            return draw(st.sampled_from(_PRIMITIVES))
        if choice == 1:
            return {"type": "enum", "name": f"E{next(counter)}",
                    "symbols": [f"s{i}" for i in range(draw(st.integers(1, 3)))]}
        if choice == 2:
            return {"type": "fixed", "name": f"F{next(counter)}", "size": draw(st.integers(0, 3))}
        if choice == 3:
            return {"type": "array", "items": kind(depth + 1, enclosing)}
        if choice == 4:
            return {"type": "map", "values": kind(depth + 1, enclosing)}
        if choice == 5:
            return ["null", draw(st.sampled_from(["int", "string", enclosing]))]  # may recurse
        return record(depth + 1)

    def record(depth: int) -> dict[str, Any]:
        name = f"R{next(counter)}"
        fields = [{"name": f"f{i}", "type": kind(depth, name)} for i in range(draw(st.integers(0, 3)))]
        return {"type": "record", "name": name, "fields": fields}

    return record(0)


_CHUNKS = st.one_of(st.binary(min_size=1, max_size=4),
                    st.sampled_from([0, 1, 2, -1, 2**20, 3 * 10**7, -3 * 10**7]).map(_varint))
"""Pieces of a body: arbitrary bytes, or varints (block counts, lengths, union branches)
of the sizes that matter, which arbitrary bytes alone rarely spell."""


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(schema=_record(("a", {"type": "array", "items": "null"})), body=_varint(3 * 10**7) + b"\0")
@given(schema=_writer_schema(), body=st.lists(_CHUNKS, max_size=12).map(b"".join))
def test_fuzz_the_parser_never_raises_and_returns_quickly(schema: dict[str, Any], body: bytes) -> None:
    values = AvroValues(Schemas({1: schema}))
    started = time.thread_time()  # CPU of this thread: see _parse_measured
    outcome = values.parse(_framed(1, body))
    assert time.thread_time() - started < 0.5
    assert isinstance(outcome, dict | Rejected)
