"""Strict record decoding: every rule, the never-raises guarantee, and round trips."""

from __future__ import annotations

import json
import math
import re
import struct
from datetime import UTC, date, datetime, timedelta, timezone

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hudi_sink.services.participant.decoded import ERROR_CLASSES, Rejected, Row, Skipped, rows_to_arrow
from hudi_sink.services.participant.decoder import RecordDecoder
from hudi_sink.shared.config.settings import TableConfig

ORDERS_DDL = "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE, qty BIGINT, ok BOOLEAN, payload STRING"
ORDERS = TableConfig(schema=ORDERS_DDL, record_key_field="id", partition_field="country").table_schema()
# A second schema for the kinds and NOT NULL columns the orders schema lacks.
OTHER = TableConfig(
        schema="k BIGINT NOT NULL, n INT, f FLOAT, d DATE, t TIMESTAMP NOT NULL, flag BOOLEAN",
        record_key_field="k",
        partition_field="d",
    ).table_schema()

MAX_BYTES = 1 << 20
decoder = RecordDecoder(ORDERS, MAX_BYTES)
other_decoder = RecordDecoder(OTHER, MAX_BYTES)


def enc(obj: object) -> bytes:
    return json.dumps(obj).encode()


def rejected(result: object, error_class: str) -> Rejected:
    assert isinstance(result, Rejected), result
    assert result.error_class == error_class, result
    assert result.error_class in ERROR_CLASSES
    return result


def row(result: object) -> Row:
    assert isinstance(result, Row), result
    return result


# --- outcomes of the whole value ----------------------------------------------------------


def test_typical_record_decodes_to_row() -> None:
    value = enc(
        {
            "id": "o-1",
            "ts": "2024-03-01T12:30:00.250Z",
            "country": "DE",
            "amount": 12.5,
            "qty": 3,
            "ok": True,
            "payload": "{}",
        }
    )
    result = row(decoder.decode(value))
    assert result.values == {
        "id": "o-1",
        "ts": datetime(2024, 3, 1, 12, 30, 0, 250000, tzinfo=UTC),
        "country": "DE",
        "amount": 12.5,
        "qty": 3,
        "ok": True,
        "payload": "{}",
    }
    assert set(result.values) == {c.name for c in ORDERS.columns}
    assert result.record_key == "o-1"
    assert result.partition_value == "DE"
    assert result.unknown_fields == 0


def test_tombstone_is_skipped() -> None:
    result = decoder.decode(None)
    assert isinstance(result, Skipped)
    assert result.reason == "tombstone"


def test_record_too_large() -> None:
    small = RecordDecoder(ORDERS, 20)
    exact = b'{"id":"abcdefghijk"}'
    assert len(exact) == 20
    row(small.decode(exact))
    result = rejected(small.decode(b'{"id":"abcdefghijkl"}'), "RecordTooLarge")
    assert "21 bytes" in result.message and "20" in result.message


def test_max_record_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError):
        RecordDecoder(ORDERS, 0)


@pytest.mark.parametrize(
    "value",
    [b"\xff", b'{"id":"\xc3"}', b'{"id":"a\xed\xa0\x80"}', b'{"id":"ok", "x": "\x80"}'],
)
def test_invalid_utf8(value: bytes) -> None:
    result = rejected(decoder.decode(value), "InvalidUtf8")
    assert "UTF-8" in result.message


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"   ",
        b"{",
        b'{"id":"a",}',
        b"{'id':'a'}",
        b"NaN",
        b'{"id":"a"} x',
        b'{"amount": 1e999}',
        b"\xef\xbb\xbf{}",
        b"[" * 2000,
    ],
)
def test_invalid_json(value: bytes) -> None:
    result = rejected(decoder.decode(value), "InvalidJson")
    assert "JSON" in result.message


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (b"[1, 2]", "array [1,2]"),
        (b'"id"', "string 'id'"),
        (b"3", "integer 3"),
        (b"null", "null"),
        (b"true", "boolean true"),
        (b"1.5", "number 1.5"),
    ],
)
def test_not_an_object(value: bytes, shown: str) -> None:
    result = rejected(decoder.decode(value), "NotAnObject")
    assert result.message == f"value must be a JSON object, got {shown}"


@pytest.mark.parametrize(
    ("obj", "state"),
    [({"amount": 1.0}, "missing"), ({"id": None}, "null"), ({"id": ""}, "an empty string")],
)
def test_missing_record_key(obj: dict[str, object], state: str) -> None:
    result = rejected(decoder.decode(enc(obj)), "MissingRecordKey")
    assert result.message == f"record key field 'id' is {state}"


def test_missing_record_key_wins_over_other_errors() -> None:
    rejected(decoder.decode(enc({"amount": "abc"})), "MissingRecordKey")
    rejected(other_decoder.decode(enc({"t": 5})), "MissingRecordKey")  # k is also NOT NULL


def test_record_key_must_have_its_declared_type() -> None:
    result = rejected(decoder.decode(enc({"id": 7})), "TypeMismatch")
    assert result.message == "field 'id': expected STRING, got integer 7"
    rejected(other_decoder.decode(enc({"k": "7", "t": 0})), "TypeMismatch")


def test_record_key_is_str_of_converted_value() -> None:
    result = row(other_decoder.decode(enc({"k": 42, "t": 0})))
    assert result.record_key == "42"
    assert result.values["k"] == 42


@pytest.mark.parametrize(("obj", "state"), [({"k": 1}, "missing"), ({"k": 1, "t": None}, "null")])
def test_missing_required_field(obj: dict[str, object], state: str) -> None:
    result = rejected(other_decoder.decode(enc(obj)), "MissingRequiredField")
    assert result.message == f"field 't' is NOT NULL but is {state}"


def test_missing_and_null_nullable_fields_are_none() -> None:
    result = row(decoder.decode(enc({"id": "a", "amount": None})))
    assert result.values == {
        "id": "a",
        "ts": None,
        "country": None,
        "amount": None,
        "qty": None,
        "ok": None,
        "payload": None,
    }
    assert result.partition_value is None
    assert result.unknown_fields == 0


def test_unknown_fields_are_ignored_and_counted() -> None:
    result = row(decoder.decode(enc({"id": "a", "x": 1, "y": None, "Amount": 2, "qty": None})))
    assert "x" not in result.values and "Amount" not in result.values
    assert result.values["amount"] is None  # field names are case-sensitive
    assert result.unknown_fields == 3


def test_unpartitioned_schema_has_no_partition_value() -> None:
    schema = TableConfig(schema="id STRING, c STRING").table_schema()
    result = row(RecordDecoder(schema, 100).decode(b'{"id":"a","c":"x"}'))
    assert result.partition_value is None


# --- column kinds ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("amount", "abc", "field 'amount': expected DOUBLE, got string 'abc'"),
        ("amount", True, "field 'amount': expected DOUBLE, got boolean true"),
        ("amount", [1.5], "field 'amount': expected DOUBLE, got array [1.5]"),
        ("payload", {"a": 1}, "field 'payload': expected STRING, got object {\"a\":1}"),
        ("payload", 12, "field 'payload': expected STRING, got integer 12"),
        ("payload", False, "field 'payload': expected STRING, got boolean false"),
        ("country", 1.5, "field 'country': expected STRING, got number 1.5"),
        ("ok", "true", "field 'ok': expected BOOLEAN, got string 'true'"),
        ("ok", 1, "field 'ok': expected BOOLEAN, got integer 1"),
        ("qty", 3.0, "field 'qty': expected BIGINT (64-bit integer), got number 3.0"),
        ("qty", "3", "field 'qty': expected BIGINT (64-bit integer), got string '3'"),
        ("qty", True, "field 'qty': expected BIGINT (64-bit integer), got boolean true"),
        (
            "qty",
            2**63,
            "field 'qty': expected BIGINT (64-bit integer), got integer 9223372036854775808 (out of range)",
        ),
        (
            "ts",
            1.5,
            "field 'ts': expected TIMESTAMP (ISO-8601 string or epoch milliseconds), got number 1.5",
        ),
        (
            "ts",
            True,
            "field 'ts': expected TIMESTAMP (ISO-8601 string or epoch milliseconds), got boolean true",
        ),
    ],
)
def test_type_mismatch_messages(field: str, value: object, message: str) -> None:
    result = rejected(decoder.decode(enc({"id": "a", field: value})), "TypeMismatch")
    assert result.message == message


def test_type_mismatch_truncates_long_values() -> None:
    result = rejected(decoder.decode(enc({"id": "a", "qty": "9" * 5000})), "TypeMismatch")
    assert len(result.message) < 200
    assert "(5000 chars)" in result.message
    nested = {"id": "a", "payload": {"k": ["x" * 100] * 100}}
    result = rejected(decoder.decode(enc(nested)), "TypeMismatch")
    assert len(result.message) < 200
    assert "chars)" in result.message


def test_type_mismatch_with_deeply_nested_value_does_not_raise() -> None:
    # orjson parses deeper than it can serialize; the message must still be built.
    value = b'{"id":"a","payload":' + b"[" * 600 + b"]" * 600 + b"}"
    result = rejected(decoder.decode(value), "TypeMismatch")
    assert "expected STRING, got array" in result.message


def test_strings() -> None:
    result = row(decoder.decode(enc({"id": "é✓ 𝄞", "payload": ""})))
    assert result.values["id"] == "é✓ 𝄞"
    assert result.values["payload"] == ""
    assert result.record_key == "é✓ 𝄞"


@pytest.mark.parametrize("number", [0, -0, 1, -7, 2**53, 2**63 - 1, 1.5, -0.0, 1e308, 5e-324])
def test_double_takes_any_json_number(number: float) -> None:
    result = row(decoder.decode(enc({"id": "a", "amount": number})))
    assert type(result.values["amount"]) is float
    assert result.values["amount"] == float(number)


@pytest.mark.parametrize("number", [0, -(2**63), 2**63 - 1, -1])
def test_bigint_accepts_int64_range(number: int) -> None:
    assert row(decoder.decode(enc({"id": "a", "qty": number}))).values["qty"] == number


@pytest.mark.parametrize("number", [-(2**63) - 1, 2**63, 2**64 - 1, 2**64, 10**30])
def test_bigint_rejects_outside_int64(number: int) -> None:
    result = rejected(decoder.decode(enc({"id": "a", "qty": number})), "TypeMismatch")
    assert "BIGINT" in result.message


@pytest.mark.parametrize("table", [ORDERS_DDL, ORDERS_DDL + ", price DECIMAL(38, 2)"])
def test_bigint_beyond_64_bits_is_rejected_quoting_the_integer_sent(table: str) -> None:
    """orjson reads a 25-digit integer as a float: never stored wrapped or rounded, and the
    dead letter's message names the integer that was sent, not 1.2345678901234568e+24."""
    d = RecordDecoder(TableConfig(schema=table, record_key_field="id").table_schema(), MAX_BYTES)
    for value in (b'{"id": "a", "qty": 1234567890123456789012345}',
                  b'{"id": "a", "qty": 1234567890123456789012345, "price": 1.5}'):
        result = rejected(d.decode(value), "TypeMismatch")
        assert result.message == ("field 'qty': expected BIGINT (64-bit integer), got integer "
                                  "1234567890123456789012345 (out of range)")


@pytest.mark.parametrize("number", [0, -(2**31), 2**31 - 1])
def test_int_accepts_int32_range(number: int) -> None:
    assert row(other_decoder.decode(enc({"k": 1, "t": 0, "n": number}))).values["n"] == number


@pytest.mark.parametrize("number", [-(2**31) - 1, 2**31, 2**40])
def test_int_rejects_outside_int32(number: int) -> None:
    result = rejected(other_decoder.decode(enc({"k": 1, "t": 0, "n": number})), "TypeMismatch")
    assert result.message == (
        f"field 'n': expected INT (32-bit integer), got integer {number} (out of range)"
    )


@pytest.mark.parametrize("value", [3.0, 1e3, True, "1"])
def test_int_rejects_non_integers(value: object) -> None:
    rejected(other_decoder.decode(enc({"k": 1, "t": 0, "n": value})), "TypeMismatch")


@pytest.mark.parametrize("number", [0, 1, -2.5, 3.4e38, -3.4e38, 1e-50, 2**40])
def test_float_takes_numbers_in_float32_range(number: float) -> None:
    result = row(other_decoder.decode(enc({"k": 1, "t": 0, "f": number})))
    assert result.values["f"] == float(number)


@pytest.mark.parametrize("number", [3.5e38, -1e39, 1e300])
def test_float_rejects_numbers_that_would_become_infinite(number: float) -> None:
    result = rejected(other_decoder.decode(enc({"k": 1, "t": 0, "f": number})), "TypeMismatch")
    assert "out of 32-bit float range" in result.message


@pytest.mark.parametrize("value", [True, "1.5", [1]])
def test_float_rejects_non_numbers(value: object) -> None:
    rejected(other_decoder.decode(enc({"k": 1, "t": 0, "f": value})), "TypeMismatch")


def test_booleans() -> None:
    assert row(decoder.decode(enc({"id": "a", "ok": False}))).values["ok"] is False
    assert row(decoder.decode(enc({"id": "a", "ok": True}))).values["ok"] is True


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-03-01T12:30:00Z", datetime(2024, 3, 1, 12, 30, tzinfo=UTC)),
        ("2024-03-01T12:30:00z", datetime(2024, 3, 1, 12, 30, tzinfo=UTC)),
        ("2024-03-01t12:30:00", datetime(2024, 3, 1, 12, 30, tzinfo=UTC)),
        ("2024-03-01T12:30:00", datetime(2024, 3, 1, 12, 30, tzinfo=UTC)),  # naive = UTC
        ("2024-03-01 12:30:00", datetime(2024, 3, 1, 12, 30, tzinfo=UTC)),
        ("2024-03-01T12:30", datetime(2024, 3, 1, 12, 30, tzinfo=UTC)),
        ("2024-03-01", datetime(2024, 3, 1, tzinfo=UTC)),
        ("2024-03-01T12:30:00+02:00", datetime(2024, 3, 1, 10, 30, tzinfo=UTC)),
        ("2024-03-01T12:30:00-0130", datetime(2024, 3, 1, 14, 0, tzinfo=UTC)),
        ("2024-03-01T12:30:00+05", datetime(2024, 3, 1, 7, 30, tzinfo=UTC)),
        ("2024-03-01T00:30:00+01:00", datetime(2024, 2, 29, 23, 30, tzinfo=UTC)),
        ("2024-03-01T12:30:00.5Z", datetime(2024, 3, 1, 12, 30, 0, 500000, tzinfo=UTC)),
        ("2024-03-01T12:30:00.123456Z", datetime(2024, 3, 1, 12, 30, 0, 123456, tzinfo=UTC)),
        # Beyond microseconds: truncated (the column is microsecond precision).
        ("2024-03-01T12:30:00.123456789Z", datetime(2024, 3, 1, 12, 30, 0, 123456, tzinfo=UTC)),
        ("0001-01-01T00:00:00Z", datetime(1, 1, 1, tzinfo=UTC)),
        ("9999-12-31T23:59:59.999999Z", datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    ],
)
def test_timestamp_iso_strings(text: str, expected: datetime) -> None:
    value = row(decoder.decode(enc({"id": "a", "ts": text}))).values["ts"]
    assert isinstance(value, datetime)
    assert value == expected
    assert value.tzinfo is UTC
    assert value.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    ("millis", "expected"),
    [
        (0, datetime(1970, 1, 1, tzinfo=UTC)),
        (1_709_296_200_123, datetime(2024, 3, 1, 12, 30, 0, 123000, tzinfo=UTC)),
        (-1, datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)),
    ],
)
def test_timestamp_epoch_millis(millis: int, expected: datetime) -> None:
    value = row(decoder.decode(enc({"id": "a", "ts": millis}))).values["ts"]
    assert value == expected
    assert value.tzinfo is UTC  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yesterday",
        "2024-13-01T00:00:00Z",
        "2024-02-30",
        "2024-03-01T25:00:00",
        "2024-03-01T24:00:00",
        "2024-03-01T12:61",
        "0000-01-01",
        "2024-3-1",
        "20240301T123000",
        "2024-W09-5",
        "2024-03-01x12:30:00",
        "2024-03-01T12:30:00,5",
        "2024-03-01T12:30:00.Z",
        "2024-03-01T12",
        "2024-03-01Z",
        "2024-03-01T12:30:00+2",
        " 2024-03-01",
        "2024-03-01\n",
        "٢٠٢٤-03-01",
        "2024-03-01T12:30:00.1234567890Z",
        "2024-03-01T12:30:00 UTC",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:00:00-05:00",
    ],
)
def test_invalid_timestamp_strings(text: str) -> None:
    result = rejected(decoder.decode(enc({"id": "a", "ts": text})), "InvalidTimestamp")
    assert result.message.startswith("field 'ts': invalid TIMESTAMP string ")
    assert "ISO-8601" in result.message


@pytest.mark.parametrize("millis", [2**62, -(2**62), 253_402_300_800_000, -62_135_596_800_001])
def test_epoch_millis_outside_datetime_range(millis: int) -> None:
    result = rejected(decoder.decode(enc({"id": "a", "ts": millis})), "InvalidTimestamp")
    assert "outside years 1..9999" in result.message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-02-29", date(2024, 2, 29)),
        ("0001-01-01", date(1, 1, 1)),
        ("9999-12-31", date(9999, 12, 31)),
    ],
)
def test_date_strings(text: str, expected: date) -> None:
    result = row(other_decoder.decode(enc({"k": 1, "t": 0, "d": text})))
    assert result.values["d"] == expected
    assert type(result.values["d"]) is date
    assert result.partition_value == expected


@pytest.mark.parametrize(
    "text",
    [
        "2023-02-29",
        "2024-13-01",
        "20240301",
        "2024-W09-5",
        "2024-03-01T00:00:00",
        "2024-3-1",
        "0000-01-01",
        "",
    ],
)
def test_invalid_date_strings(text: str) -> None:
    result = rejected(other_decoder.decode(enc({"k": 1, "t": 0, "d": text})), "InvalidDate")
    assert result.message.startswith("field 'd': invalid DATE string ")


@pytest.mark.parametrize("value", [19000, True, 1.5, {"y": 2024}])
def test_date_requires_a_string(value: object) -> None:
    result = rejected(other_decoder.decode(enc({"k": 1, "t": 0, "d": value})), "TypeMismatch")
    assert "expected DATE" in result.message


def test_first_bad_field_in_schema_order_is_reported() -> None:
    result = rejected(decoder.decode(enc({"id": "a", "qty": "x", "amount": "y"})), "TypeMismatch")
    assert result.message.startswith("field 'amount'")


# The accepted timestamp grammar, written as a regex: the decoder uses a faster hand-written
# check, and these properties pin both to the same language.
TIMESTAMP_GRAMMAR = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    r"(?:[Tt ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?"
    r"(?:[Zz]|[+-][0-9]{2}(?::?[0-9]{2})?)?)?"
)
DATE_GRAMMAR = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
NEAR_MISS_CHARS = "0123456789-:.TtZz+ ,W\u0662x"


def reference_timestamp(text: str) -> datetime | None:
    """What the grammar plus ``fromisoformat`` say ``text`` means (None: invalid)."""
    if TIMESTAMP_GRAMMAR.fullmatch(text) is None:
        return None
    try:
        parsed = datetime.fromisoformat(text[:-1] + "Z" if text.endswith("z") else text)
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


@st.composite
def near_misses(draw: st.DrawFn, grammar: re.Pattern[str]) -> str:
    """A string of the grammar with a few characters replaced, inserted or deleted."""
    text = draw(st.from_regex(grammar, fullmatch=True))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        char = draw(st.sampled_from(NEAR_MISS_CHARS))
        edit = draw(st.sampled_from(["replace", "insert", "delete"]))
        if edit == "insert":
            text = text[:at] + char + text[at:]
        elif edit == "replace":
            text = text[:at] + char + text[at + 1 :]
        else:
            text = text[:at] + text[at + 1 :]
    return text


@settings(max_examples=3000, deadline=None)
@given(
    st.one_of(
        st.from_regex(TIMESTAMP_GRAMMAR, fullmatch=True),
        near_misses(TIMESTAMP_GRAMMAR),
        st.text(alphabet=NEAR_MISS_CHARS, max_size=32),
    )
)
def test_timestamp_strings_follow_the_grammar(text: str) -> None:
    result = decoder.decode(enc({"id": "a", "ts": text}))
    expected = reference_timestamp(text)
    if expected is None:
        rejected(result, "InvalidTimestamp")
    else:
        assert row(result).values["ts"] == expected


@settings(max_examples=1000, deadline=None)
@given(st.one_of(near_misses(DATE_GRAMMAR), st.text(alphabet=NEAR_MISS_CHARS, max_size=12)))
def test_date_strings_follow_the_grammar(text: str) -> None:
    result = other_decoder.decode(enc({"k": 1, "t": 0, "d": text}))
    try:
        expected = date.fromisoformat(text) if DATE_GRAMMAR.fullmatch(text) else None
    except ValueError:
        expected = None
    if expected is None:
        rejected(result, "InvalidDate")
    else:
        assert row(result).values["d"] == expected


@settings(max_examples=500, deadline=None)
@given(st.integers(min_value=-62_135_596_800_000, max_value=253_402_300_799_999))
def test_epoch_millis_are_exact(millis: int) -> None:
    value = row(decoder.decode(enc({"id": "a", "ts": millis}))).values["ts"]
    assert value == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=millis)


# --- rows_to_arrow --------------------------------------------------------------------------


def test_rows_to_arrow_builds_data_columns() -> None:
    values = [
        enc({"id": "a", "ts": 0, "country": "DE", "amount": 1, "qty": 2, "ok": True, "payload": "p"}),
        enc({"id": "b", "extra": 1}),
    ]
    rows = [row(decoder.decode(v)) for v in values]
    table = rows_to_arrow(rows, ORDERS)
    assert table.schema == ORDERS.data_arrow_schema
    assert table.num_rows == 2
    assert table.to_pylist() == [r.values for r in rows]
    assert table.column("ts").type == pa.timestamp("us", tz="UTC")


def test_rows_to_arrow_other_kinds() -> None:
    rows = [
        row(
            other_decoder.decode(
                enc(
                    {
                        "k": 1,
                        "t": "2024-01-01T00:00:00+01:00",
                        "n": 5,
                        "f": 1.5,
                        "d": "2024-01-02",
                        "flag": False,
                    }
                )
            )
        ),
        row(other_decoder.decode(enc({"k": 2, "t": 0}))),
    ]
    table = rows_to_arrow(rows, OTHER)
    assert table.schema == OTHER.data_arrow_schema
    assert table.to_pylist() == [r.values for r in rows]


def test_rows_to_arrow_empty_and_single_column() -> None:
    assert rows_to_arrow([], ORDERS).schema == ORDERS.data_arrow_schema
    assert rows_to_arrow([], ORDERS).num_rows == 0
    single = TableConfig(schema="id STRING").table_schema()
    rows = [row(RecordDecoder(single, 100).decode(enc({"id": k}))) for k in "xyz"]
    assert rows_to_arrow(rows, single).column("id").to_pylist() == ["x", "y", "z"]


# --- properties -----------------------------------------------------------------------------


def assert_one_outcome(result: object) -> None:
    assert isinstance(result, Row | Skipped | Rejected)
    assert sum(isinstance(result, kind) for kind in (Row, Skipped, Rejected)) == 1
    if isinstance(result, Rejected):
        assert result.error_class in ERROR_CLASSES
        assert result.message
    if isinstance(result, Row):
        assert result.record_key
        assert result.unknown_fields >= 0


PROPERTY_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(st.one_of(st.none(), st.binary(max_size=256)))
def test_arbitrary_bytes_never_raise(value: bytes | None) -> None:
    assert_one_outcome(decoder.decode(value))
    assert_one_outcome(other_decoder.decode(value))


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # unbounded: beyond 64 bits too
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)),
    max_leaves=12,
)
field_names = st.sampled_from([c.name for c in ORDERS.columns] + [c.name for c in OTHER.columns] + ["extra"])
# Field values that look almost right, to reach deep into the converters.
tricky_values = st.one_of(
    json_values,
    st.from_regex(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?"
        r"(Z|[+-][0-9]{2}(:?[0-9]{2})?)?)?",
        fullmatch=True,
    ),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.sampled_from([2**31, 2**31 - 1, 2**63, 2**63 - 1, -(2**63) - 1, 3.5e38, 1e308, ""]),
)
record_like = st.dictionaries(field_names | st.text(max_size=3), tricky_values, max_size=8)


@PROPERTY_SETTINGS
@given(st.one_of(json_values, record_like))
def test_arbitrary_json_never_raises(obj: object) -> None:
    value = json.dumps(obj).encode()  # stdlib: writes integers of any size
    for d in (decoder, other_decoder):
        result = d.decode(value)
        assert_one_outcome(result)
        if isinstance(result, Row):
            rows_to_arrow([result], d.schema)  # whatever decodes must also convert


@PROPERTY_SETTINGS
@given(record_like, st.binary(min_size=1, max_size=4))
def test_corrupted_json_never_raises(obj: dict[str, object], junk: bytes) -> None:
    value = json.dumps(obj).encode()
    middle = len(value) // 2
    assert_one_outcome(decoder.decode(value[:middle] + junk + value[middle:]))


# Valid records: each generated as (JSON object to send, values the Row must hold).
offsets = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
instants = st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31))


@st.composite
def timestamps(draw: st.DrawFn) -> tuple[object, datetime]:
    """A TIMESTAMP field as sent (ISO string or epoch millis) and its expected value."""
    moment = draw(instants)
    style = draw(st.sampled_from(["naive", "offset", "zulu", "millis"]))
    if style == "naive":
        return moment.isoformat(), moment.replace(tzinfo=UTC)
    if style == "offset":
        aware = moment.replace(tzinfo=draw(offsets))
        return aware.isoformat(), aware.astimezone(UTC)
    if style == "zulu":
        return moment.isoformat() + "Z", moment.replace(tzinfo=UTC)
    millis = draw(st.integers(min_value=-62_135_596_800_000, max_value=253_402_300_799_999))
    return millis, datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=millis)


def optional(
    draw: st.DrawFn,
    sent: dict[str, object],
    expected: dict[str, object],
    name: str,
    pair: tuple[object, object],
) -> None:
    """Send the field, send it as null, or leave it out (the last two decode to None)."""
    how = draw(st.sampled_from(["value", "value", "null", "absent"]))
    if how == "value":
        sent[name], expected[name] = pair
    else:
        if how == "null":
            sent[name] = None
        expected[name] = None


ORDERS_NAMES = frozenset(c.name for c in ORDERS.columns)


def same(value: object) -> tuple[object, object]:
    return value, value


@st.composite
def orders_records(draw: st.DrawFn) -> tuple[dict[str, object], dict[str, object], int]:
    key = draw(st.text(min_size=1))
    sent: dict[str, object] = {"id": key}
    expected: dict[str, object] = {"id": key}
    optional(draw, sent, expected, "ts", draw(timestamps()))
    optional(draw, sent, expected, "country", same(draw(st.text(max_size=8))))
    number = draw(
        st.one_of(
            st.floats(allow_nan=False, allow_infinity=False),
            st.integers(min_value=-(2**63), max_value=2**63 - 1),
        )
    )
    optional(draw, sent, expected, "amount", (number, float(number)))
    optional(draw, sent, expected, "qty", same(draw(st.integers(-(2**63), 2**63 - 1))))
    optional(draw, sent, expected, "ok", same(draw(st.booleans())))
    optional(draw, sent, expected, "payload", same(draw(st.text())))
    unknown_names = st.text(min_size=1).filter(lambda n: n not in ORDERS_NAMES)
    extras = draw(st.dictionaries(unknown_names, json_scalars, max_size=3))
    sent.update(extras)
    return sent, expected, len(extras)


@PROPERTY_SETTINGS
@given(orders_records())
def test_valid_records_round_trip(record: tuple[dict[str, object], dict[str, object], int]) -> None:
    sent, expected, extras = record
    result = row(decoder.decode(json.dumps(sent).encode()))
    full = {c.name: expected.get(c.name) for c in ORDERS.columns}
    assert result.values == full
    assert result.record_key == sent["id"]
    assert result.partition_value == full["country"]
    assert result.unknown_fields == extras
    for value in result.values.values():
        if isinstance(value, datetime):
            assert value.tzinfo is UTC
    assert rows_to_arrow([result], ORDERS).to_pylist() == [full]


def as_float32(number: float) -> float:
    return struct.unpack("f", struct.pack("f", number))[0]


@PROPERTY_SETTINGS
@given(
    st.integers(-(2**63), 2**63 - 1),
    timestamps(),
    st.none() | st.integers(-(2**31), 2**31 - 1),
    st.none() | st.floats(width=32, allow_nan=False, allow_infinity=False),
    st.none() | st.dates(),
    st.none() | st.booleans(),
)
def test_valid_records_round_trip_other_kinds(
    k: int,
    t: tuple[object, datetime],
    n: int | None,
    f: float | None,
    d: date | None,
    flag: bool | None,
) -> None:
    sent = {
        "k": k,
        "t": t[0],
        "n": n,
        "f": f,
        "d": None if d is None else d.isoformat(),
        "flag": flag,
    }
    result = row(other_decoder.decode(orjson.dumps(sent)))
    expected = {"k": k, "t": t[1], "n": n, "f": f, "d": d, "flag": flag}
    assert result.values == expected
    assert result.record_key == str(k)
    assert result.partition_value == d
    converted = rows_to_arrow([result], OTHER).to_pylist()[0]
    assert converted["f"] == (None if f is None else as_float32(f))
    assert not (isinstance(converted["f"], float) and math.isinf(converted["f"]))
    assert {**converted, "f": f} == expected


def test_partition_value_too_long_for_a_directory_is_a_bad_record() -> None:
    from hudi_sink.services.participant.decoded import PARTITION_VALUE_TOO_LONG
    from hudi_sink.shared.config.settings import TableConfig

    schema = TableConfig(schema="id STRING, country STRING", record_key_field="id",
                         partition_field="country").table_schema()
    decoder = RecordDecoder(schema, 1 << 20)
    ok = decoder.decode(orjson.dumps({"id": "a", "country": "ü" * 60}))
    assert not isinstance(ok, Rejected)
    rejected = decoder.decode(orjson.dumps({"id": "a", "country": "/" * 100}))  # "%2F" each
    assert isinstance(rejected, Rejected)
    assert rejected.error_class == PARTITION_VALUE_TOO_LONG
    assert "'country'" in rejected.message
