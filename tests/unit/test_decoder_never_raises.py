"""``RecordDecoder.decode`` never raises and never stalls: one record must not stop a partition.

An exception escaping ``decode`` ended the participant (exit 1) before the offset was
committed, so every process the partition moved to died on the same record and
``errors.tolerance: dlq`` never saw it. Here: the last-resort guard (any exception → a
``DecodeError`` dead letter, logged), the inputs that used to raise or take seconds, and
hypothesis fuzzing of the JSON and Connect-JSON decoders over tables with DECIMAL, nested and
BIGINT columns, including exact values (every DECIMAL read back equals the text that was sent).
"""

from __future__ import annotations

import base64
import json
import logging
import time
from decimal import Context, Decimal, InvalidOperation, Overflow
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hudi_sink.services.participant.decoded import ERROR_CLASSES, Rejected, Row, Skipped, rows_to_arrow
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.shared.config.settings import TableConfig

TABLE = TableConfig(
    schema="id STRING, amount DECIMAL(38, 2), big DECIMAL(38, 0), n BIGINT, d DATE, rate DOUBLE, "
           "addr STRUCT<fee: DECIMAL(9, 2), n: BIGINT>, parts ARRAY<DECIMAL(9, 2)>, "
           "totals MAP<STRING, DECIMAL(9, 2)>",
    record_key_field="id").table_schema()
COLUMNS = [c.name for c in TABLE.columns]
PLAIN = RecordDecoder(TABLE, 1 << 24)
CONNECT = RecordDecoder(TABLE, 1 << 24, connect_envelope=True)
TIME_BOUND_S = 2.0  # CPU seconds per record of up to a few MB (the old code: 7.8 s for 300 KB)


def assert_decodes(decoder: RecordDecoder, value: bytes | None) -> Row | Rejected | Skipped:
    """One outcome, quickly, never the last-resort DecodeError (a cause not handled)."""
    started = time.process_time()  # CPU time: other processes on the machine do not count
    result = decoder.decode(value)
    assert time.process_time() - started < TIME_BOUND_S
    assert isinstance(result, Row | Rejected | Skipped), result
    if isinstance(result, Rejected):
        assert result.error_class in ERROR_CLASSES
        assert result.error_class != "DecodeError", result.message
    if isinstance(result, Row):
        rows_to_arrow([result], decoder.schema)  # whatever decodes must also convert
    return result


# --- the last resort ------------------------------------------------------------------------

@pytest.mark.parametrize("error", [
    InvalidOperation([InvalidOperation]), Overflow("exponent"), ValueError("bad"), TypeError("odd"),
    RecursionError("maximum recursion depth exceeded"), MemoryError(), KeyError("k"),
    UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
])
def test_any_exception_while_decoding_becomes_a_decode_error(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever a format or converter raises, ``decode`` answers with a dead letter naming the
    exception, and logs it (the traceback once per exception type)."""
    def parser(value: bytes) -> dict[str, Any]:
        raise error

    decoder = RecordDecoder(TABLE, 1 << 20, value_parser=parser)
    with caplog.at_level(logging.WARNING, logger="hudi_sink.participant"):
        first, second = decoder.decode(b"x"), decoder.decode(b"y")
    for result in (first, second):
        assert isinstance(result, Rejected) and result.error_class == "DecodeError"
        assert result.message.startswith(f"the decoder failed on this value: {type(error).__name__}:")
        assert str(error) in result.message
    assert "DecodeError" in ERROR_CLASSES
    records = [r for r in caplog.records if "decoder failed" in r.getMessage()]
    assert [r.levelname for r in records] == ["ERROR", "WARNING"]
    assert records[0].exc_info is not None and records[1].exc_info is None


def test_a_huge_exception_message_is_clipped() -> None:
    def parser(value: bytes) -> dict[str, Any]:
        raise ValueError("x" * 100_000)

    result = RecordDecoder(TABLE, 1 << 20, value_parser=parser).decode(b"x")
    assert isinstance(result, Rejected) and len(result.message) < 500
    assert "(100000 chars)" in result.message


# --- inputs that raised or stalled ----------------------------------------------------------

def test_deep_nesting_read_exactly_is_a_bad_record_not_a_recursion_error() -> None:
    """A float in a DECIMAL column makes the value be read again by the standard library,
    which nests less deeply than orjson (1,024 levels)."""
    deep = b"[" * 1000 + b"]" * 1000
    for value in (b'{"id": "a", "amount": 1.5, "x": ' + deep + b"}",
                  b'{"id": "a", "addr": {"fee": 1.5}, "parts": [' + deep + b"]}",
                  b'{"id": "a", "n": 1e30, "x": ' + deep + b"}"):
        result = assert_decodes(PLAIN, value)
        assert isinstance(result, Rejected | Row)
    envelope = (b'{"schema": {"type": "struct", "fields": []}, "payload": {"id": "a", "amount": 0.5, '
                b'"x": ' + deep + b"}}")
    assert_decodes(CONNECT, envelope)


def test_huge_numbers_are_bounded() -> None:
    digits = b"7" * 5_000_000
    for value in (b'{"id": "a", "amount": 0.' + digits + b"}",  # orjson reads a float, then exactly
                  b'{"id": "a", "amount": "' + digits + b'"}',
                  b'{"id": "a", "n": ' + digits[:300] + b"}"):
        result = assert_decodes(PLAIN, value)
        assert isinstance(result, Rejected) and result.error_class in ("InvalidDecimal", "TypeMismatch")
    result = assert_decodes(PLAIN, b'{"id": "a", "rate": 1.' + digits + b', "amount": 1.5}')
    assert isinstance(result, Row) and result.values["rate"] == 1.7777777777777777


# --- fuzzing --------------------------------------------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

number_texts = st.one_of(
    st.from_regex(r"-?(0|[1-9][0-9]{0,45})(\.[0-9]{1,45})?([eE][+-]?[0-9]{1,22})?", fullmatch=True),
    st.sampled_from(["1e78", "12345678901234567.89", "123456789012345678901234567", "-0.01",
                     "1e-9999999999999999999", "18446744073709551616", "0e999999", "1e308"]),
)
base64_texts = st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode())
scalar_texts = st.one_of(
    st.sampled_from(["null", "true", "false"]), number_texts,
    st.one_of(st.text(max_size=20), base64_texts, number_texts).map(json.dumps),
)


def json_text(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    keys = st.sampled_from(COLUMNS + ["fee", "n", "x"]) | st.text(max_size=3)
    return st.one_of(
        st.lists(inner, max_size=4).map(lambda items: "[" + ",".join(items) + "]"),
        st.dictionaries(keys, inner, max_size=5).map(
            lambda d: "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in d.items()) + "}"),
    )


value_texts = st.recursive(scalar_texts, json_text, max_leaves=15)
records = st.dictionaries(st.sampled_from(COLUMNS) | st.text(max_size=3), value_texts, max_size=9).map(
    lambda d: "{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in d.items()) + "}")


@FUZZ
@given(st.one_of(st.none(), st.binary(max_size=300)))
def test_arbitrary_bytes(value: bytes | None) -> None:
    assert_decodes(PLAIN, value)
    assert_decodes(CONNECT, value)


@FUZZ
@given(st.one_of(records, value_texts))
def test_arbitrary_json_text(text: str) -> None:
    assert_decodes(PLAIN, text.encode())
    assert_decodes(CONNECT, b'{"schema": {"type": "struct", "fields": []}, "payload": ' + text.encode()
                   + b"}")


scales: st.SearchStrategy[object] = st.one_of(
    st.integers(-3, 40).map(str), st.sampled_from(["-1000000", "1000000", "9" * 400, "x", 2, 1.5, None]))


@st.composite
def connect_field(draw: st.DrawFn, depth: int = 0) -> tuple[dict[str, Any], str]:
    """A Connect schema (a decimal, a date, a primitive or a container of them) and the JSON
    text of a payload value for it (mostly matching, sometimes not)."""
    kinds = ["decimal", "date", "int64"] + (["struct", "array", "map"] if depth < 3 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "decimal":
        schema = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
                  "parameters": {"scale": draw(scales)}}
        text = draw(st.one_of(base64_texts.map(json.dumps), scalar_texts,
                              st.just(json.dumps("A" * 300_000))))
    elif kind == "date":
        schema = {"type": "int32", "name": "org.apache.kafka.connect.data.Date"}
        text = draw(st.one_of(st.integers(-10**13, 10**13).map(str), scalar_texts))
    elif kind == "int64":
        schema, text = {"type": "int64"}, draw(scalar_texts)
    elif kind == "struct":
        fields = draw(st.lists(st.tuples(st.sampled_from(["fee", "n", "x"]), connect_field(depth + 1)),
                               max_size=3))
        schema = {"type": "struct", "fields": [{**s, "field": name} for name, (s, _) in fields]}
        text = "{" + ",".join(f"{json.dumps(name)}:{t}" for name, (_, t) in fields) + "}"
    else:
        inner, items = draw(connect_field(depth + 1)), draw(st.integers(0, 3))
        if kind == "array":
            schema, text = {"type": "array", "items": inner[0]}, "[" + ",".join([inner[1]] * items) + "]"
        else:
            schema = {"type": "map", "keys": {"type": "string"}, "values": inner[0]}
            text = "{" + ",".join(f'"k{i}":{inner[1]}' for i in range(items)) + "}"
    return schema, text


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(COLUMNS[1:] + ["other"]), connect_field()), max_size=5))
def test_arbitrary_connect_envelopes(fields: list[tuple[str, tuple[dict[str, Any], str]]]) -> None:
    schema = {"type": "struct", "fields": [{"type": "string", "field": "id"}] + [
        {**s, "field": name} for name, (s, _) in fields]}
    payload = '{"id": "a"' + "".join(f",{json.dumps(name)}:{t}" for name, (_, t) in fields) + "}"
    assert_decodes(CONNECT, b'{"schema": ' + orjson.dumps(schema) + b', "payload": ' + payload.encode()
                   + b"}")


# --- exact values ---------------------------------------------------------------------------

def render(number: Decimal, style: str) -> str:
    """A JSON number of exactly ``number``'s value, written as producers write them."""
    if style == "plain":
        return f"{number:f}"
    if style == "padded":
        return f"{number:.6f}"  # trailing zeros: still two places of value
    return f"{number:E}"  # scientific notation, e.g. 1.2345E+16


@FUZZ
@given(st.decimals(min_value=Decimal("-99999999999999999999999999999999999.99"),
                   max_value=Decimal("99999999999999999999999999999999999.99"), places=2),
       st.sampled_from(["plain", "padded", "scientific"]))
def test_every_decimal_equals_the_text_sent(number: Decimal, style: str) -> None:
    text = render(number, style)
    unscaled = int(number.scaleb(2, context=Context(prec=80)))  # the default 28 digits would round
    connect = base64.b64encode(unscaled.to_bytes(unscaled.bit_length() // 8 + 1, "big", signed=True)).decode()
    schema = {"type": "struct", "fields": [
        {"type": "string", "field": "id"},
        {"type": "struct", "field": "addr", "fields": []},
        {"type": "bytes", "field": "amount", "name": "org.apache.kafka.connect.data.Decimal",
         "parameters": {"scale": "2"}}]}
    for decoder, value in (
        (PLAIN, f'{{"id": "a", "amount": {text}}}'.encode()),
        (PLAIN, f'{{"id": "a", "amount": "{text}"}}'.encode()),
        (CONNECT, orjson.dumps({"schema": schema, "payload": {"id": "a", "amount": connect}})),
        (CONNECT, f'{{"schema": {json.dumps(schema)}, "payload": {{"id": "a", "amount": {text}}}}}'.encode()),
    ):
        result = assert_decodes(decoder, value)
        assert isinstance(result, Row), (value[:200], result)
        assert rows_to_arrow([result], TABLE).column("amount")[0].as_py() == number


@FUZZ
@given(st.floats(allow_nan=False, allow_infinity=False).map(repr) | number_texts)
def test_doubles_are_the_same_whichever_reading_ran(text: str) -> None:
    """A DOUBLE is read by orjson, or exactly and then converted, when a DECIMAL column made
    the value be read again: both give the same float (or both refuse it)."""
    fast = PLAIN.decode(f'{{"id": "a", "rate": {text}}}'.encode())
    exact = PLAIN.decode(f'{{"id": "a", "rate": {text}, "amount": 0.5}}'.encode())
    if isinstance(fast, Row):
        assert isinstance(exact, Row) and exact.values["rate"] == fast.values["rate"]
        assert type(exact.values["rate"]) is float
    else:
        assert isinstance(exact, Rejected)
