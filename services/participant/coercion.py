"""Coercion of one parsed JSON value to its column's type, strictly, with a message that
says what was wrong.

Why strict: a lenient decoder (coercing ``"3"`` to 3, ``3.7`` to 3, ``true`` to ``"true"``)
silently writes values nobody sent, and the error surfaces months later in a query.

This is the part of decoding that depends on the table schema and on nothing else: one
converter per column kind, built once per column (:func:`column_plan`) as a closure, so the
per-record work is a call and an exact ``type(...) is`` check. The record format (today
JSON, :mod:`.json_format`) only has to deliver JSON-typed values; :class:`.decoder.RecordDecoder`
runs the plan over every column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from decimal import Context, Decimal, InvalidOperation
from math import isinf
from typing import Any

import orjson

from hudi_sink.services.participant.decoded import (
    INVALID_DATE,
    INVALID_DECIMAL,
    INVALID_TIMESTAMP,
    TYPE_MISMATCH,
    JsonNumber,
    Rejected,
    Unreadable,
)
from hudi_sink.shared.schema.table_schema import Column, ColumnKind

__all__ = ["Converter", "column_plan", "column_converter", "describe"]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# Largest finite float32. Larger finite doubles would silently become inf in a float32
# Arrow column, so they are rejected instead.
_FLOAT32_MAX = 3.4028234663852886e38

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Epoch milliseconds below this convert exactly through a float division (the rounding error
# stays under half a microsecond up to 2**33 seconds, year 2242); larger ones use exact
# integer timedelta arithmetic, which is about twice as slow.
_FAST_MILLIS_LIMIT = 2**33 * 1000


def _timestamp_layout_ok(text: str) -> bool:
    """Whether ``text`` has the layout of the accepted timestamp grammar.

    The grammar (ISO-8601 extended format, RFC 3339 style)::

        YYYY-MM-DD [ (T|t|space) HH:MM [ :SS [ .fraction(1-9 digits) ] ] [ Z|z|+HH|+HH:MM|+HHMM ] ]

    (``-`` offsets like ``+``). ``datetime.fromisoformat`` alone is far more lenient (any
    separator character, week dates ``2024-W01-1``, basic format ``20240101T1200``, comma
    fractions, hour-only times), so this runs first. It pins every separator and checks
    the digits of the variable tail; the digits of the fixed prefix are checked by
    ``fromisoformat`` itself, which only accepts ASCII digits there. Hand-written (string
    methods, no per-character Python loop) instead of a regex because it is several times
    faster; the test suite holds the equivalent regex and checks that both accept the same
    strings.
    """
    size = len(text)
    if size == 10:
        return text[4] == "-" and text[7] == "-"
    if size < 16 or text[4] != "-" or text[7] != "-" or text[10] not in "Tt " or text[13] != ":":
        return False
    # The zone is recognised from the end: in a valid time part (from index 16 on) only
    # digits, ":" and "." occur, so a sign there can only start the zone.
    end, zone_digits = size, ""
    if text[-1] in "Zz":
        end = size - 1
    elif size >= 22 and text[-6] in "+-" and text[-3] == ":":
        end, zone_digits = size - 6, text[-5:-3] + text[-2:]
    elif size >= 21 and text[-5] in "+-":
        end, zone_digits = size - 5, text[-4:]
    elif size >= 19 and text[-3] in "+-":
        end, zone_digits = size - 3, text[-2:]
    if zone_digits and not (zone_digits.isdigit() and zone_digits.isascii()):
        return False
    seconds = text[16:end]  # "", ":SS" or ":SS.fraction"
    if not seconds:
        return True
    length = len(seconds)
    if seconds[0] != ":" or length == 4 or length > 13 or (length > 3 and seconds[3] != "."):
        return False
    digits = seconds[1:3] + seconds[4:]
    return len(digits) >= 2 and digits.isdigit() and digits.isascii()


def _date_layout_ok(text: str) -> bool:
    """``YYYY-MM-DD`` layout; ``date.fromisoformat`` then checks the digits and ranges."""
    return len(text) == 10 and text[4] == "-" and text[7] == "-"


_TIMESTAMP_HINT = (
    "expected ISO-8601 like '2024-01-31T12:00:00Z' or '2024-01-31T12:00:00.123+02:00' "
    "(naive means UTC), or integer epoch milliseconds"
)

_CLIP = 60  # characters of an offending value shown in a message
_as_json = lambda v: orjson.Fragment(str(v)) if isinstance(v, Decimal) else str(v)  # noqa: E731


def _clip(text: str) -> str:
    """Shorten ``text`` for a message, saying how long it really was."""
    if len(text) <= _CLIP:
        return text
    return f"{text[:_CLIP]}... ({len(text)} chars)"


def describe(value: object) -> str:
    """Render a JSON value as ``<json type> <short rendering>`` for an error message."""
    if value is None:
        return "null"
    if value is True:
        return "boolean true"
    if value is False:
        return "boolean false"
    kind = type(value)
    if kind is str:
        text: str = value  # type: ignore[assignment]
        if len(text) <= _CLIP:
            return f"string {text!r}"
        return f"string {text[:_CLIP]!r}... ({len(text)} chars)"
    if kind is int:
        return f"integer {_clip(str(value))}"
    if kind is float:
        return f"number {value!r}"
    if kind is JsonNumber or kind is Decimal:
        return f"number {_clip(str(value))}"
    if kind is Unreadable:
        return value.reason  # type: ignore[attr-defined]
    label = "object" if kind is dict else "array" if kind is list else kind.__name__
    try:
        rendered = orjson.dumps(value, default=_as_json).decode()  # exact numbers as numbers
    except orjson.JSONEncodeError:  # nested deeper than orjson.dumps allows
        size = len(value) if isinstance(value, dict | list) else 0
        return f"{label} of {size} entries"
    return f"{label} {_clip(rendered)}"


Converter = Callable[[Any], Any]
"""Converts a non-null JSON value; returns the column value or a :class:`Rejected`."""


def _mismatch(name: str, expected: str, value: object, note: str = "") -> Rejected:
    suffix = f" ({note})" if note else ""
    return Rejected(TYPE_MISMATCH, f"field {name!r}: expected {expected}, got {describe(value)}{suffix}")


def _exact_converter(name: str, label: str, accepted: type) -> Converter:
    # For kinds whose JSON type is the column type (STRING, BOOLEAN): the plan takes such a
    # value as-is, so this is only reached for a value of another type.
    def convert(value: Any) -> Any:
        if type(value) is accepted:
            return value
        return _mismatch(name, label, value)

    return convert


def _integer_converter(name: str, label: str, low: int, high: int) -> Converter:
    # ``type(v) is int`` excludes bool (a subclass of int) and numbers such as 3.0: a
    # producer bug otherwise hidden. orjson makes integers beyond 64 bits floats (rejected; the
    # decoder then reads the value again exactly, so the message quotes the integer sent).
    def convert(value: Any) -> Any:
        if type(value) is int:
            if low <= value <= high:
                return value
            return _mismatch(name, label, value, "out of range")
        return _mismatch(name, label, value)

    return convert


def _double_converter(name: str) -> Converter:
    # Only reached for non-floats (floats take the fast path). Ints and exact JSON numbers are
    # JSON text orjson read as a finite double, so float() is finite (the check is a guard).
    def convert(value: Any) -> Any:
        kind = type(value)
        if kind is float:
            return value
        if kind is int or kind is JsonNumber:
            number = float(value)
            return number if not isinf(number) else _mismatch(name, "DOUBLE", value, "out of range")
        return _mismatch(name, "DOUBLE", value)

    return convert


def _float_converter(name: str) -> Converter:
    def convert(value: Any) -> Any:
        kind = type(value)
        if kind is float or kind is int or kind is JsonNumber:
            number = float(value)
            if -_FLOAT32_MAX <= number <= _FLOAT32_MAX:
                return number
            return _mismatch(name, "FLOAT", value, "out of 32-bit float range")
        return _mismatch(name, "FLOAT", value)

    return convert


def _timestamp_converter(name: str) -> Converter:
    layout_ok = _timestamp_layout_ok
    parse = datetime.fromisoformat
    from_seconds = datetime.fromtimestamp
    fast_limit = _FAST_MILLIS_LIMIT

    def invalid(value: object) -> Rejected:
        return Rejected(
            INVALID_TIMESTAMP,
            f"field {name!r}: invalid TIMESTAMP {describe(value)}; {_TIMESTAMP_HINT}",
        )

    def convert(value: Any) -> Any:
        kind = type(value)
        if kind is str:
            if not layout_ok(value):
                return invalid(value)
            try:
                # fromisoformat takes "Z" but not "z".
                parsed = parse(value if value[-1] != "z" else value[:-1] + "Z")
                if parsed.tzinfo is None:
                    return parsed.replace(tzinfo=UTC)
                return parsed.astimezone(UTC)
            except (ValueError, OverflowError):  # bad month/day/hour; offset past year 9999
                return invalid(value)
        if kind is int:
            if 0 <= value < fast_limit:
                return from_seconds(value / 1000, UTC)
            try:
                return _EPOCH + timedelta(milliseconds=value)
            except OverflowError:  # outside years 1..9999
                return Rejected(
                    INVALID_TIMESTAMP,
                    f"field {name!r}: epoch milliseconds {value} are outside years 1..9999",
                )
        return _mismatch(name, "TIMESTAMP (ISO-8601 string or epoch milliseconds)", value)

    return convert


def _date_converter(name: str) -> Converter:
    layout_ok = _date_layout_ok
    parse = date.fromisoformat

    def invalid(value: object) -> Rejected:
        return Rejected(
            INVALID_DATE, f"field {name!r}: invalid DATE {describe(value)}; expected 'YYYY-MM-DD'"
        )

    def convert(value: Any) -> Any:
        if type(value) is not str:
            return _mismatch(name, "DATE (string 'YYYY-MM-DD')", value)
        if not layout_ok(value):
            return invalid(value)
        try:
            return parse(value)
        except ValueError:  # month 13, February 30, year 0
            return invalid(value)

    return convert


_WIDE = Context(prec=80)


def _decimal_converter(name: str, precision: int, scale: int) -> Converter:
    """DECIMAL(p, s): a JSON number (read exactly: :class:`JsonNumber` or int), a numeric
    string (ASCII: ``Decimal()`` alone takes ``1_000`` and Arabic-Indic digits) or an Avro
    ``decimal``, exact: more than ``s`` places or ``p - s`` integer digits is refused, never
    rounded. The magnitude (``adjusted()``, constant time) is checked before ``quantize``, so
    its context never holds more than p + 1 digits: ``1e78`` "does not fit", never a
    ``decimal.InvalidOperation`` escaping the decoder."""
    label = f"DECIMAL({precision}, {scale})"
    quantum = Decimal(1).scaleb(-scale)
    integer_digits = precision - scale

    def invalid(value: Any, why: str) -> Rejected:
        return Rejected(INVALID_DECIMAL, f"field {name!r}: {describe(value)} {why}")

    def convert(value: Any) -> Any:
        kind = type(value)
        if kind is JsonNumber or kind is Decimal:
            number = value
        elif kind is int:
            number = Decimal(value)
        elif kind is float:  # an Avro double; JSON numbers arrive as JsonNumber or int
            number = Decimal(repr(value))  # the shortest text that reads back as this float
        elif kind is str:
            text = value.strip()
            try:  # not a number, or an exponent past 10**18: InvalidOperation
                number = Decimal(text if text.isascii() and "_" not in text else "-")
            except InvalidOperation:
                return invalid(value, "is not a number")
        elif kind is Unreadable:
            return Rejected(INVALID_DECIMAL, f"field {name!r}: {value.reason}")
        else:
            return _mismatch(name, f"{label} (number or numeric string)", value)
        if not number.is_finite():
            return invalid(value, "is not finite")
        if number and number.adjusted() >= integer_digits:
            return invalid(value, f"does not fit {label}")
        exact = number.quantize(quantum, context=_WIDE)
        if exact != number:
            return invalid(value, f"has more than {scale} decimal place(s) ({label})")
        return exact

    return convert


def column_plan(name: str, kind: ColumnKind, precision: int = 10,
                scale: int = 0) -> tuple[type | None, Converter]:
    """(type taken as-is without conversion or None, converter for everything else)."""
    if kind is ColumnKind.DECIMAL:
        return None, _decimal_converter(name, precision, scale)
    if kind is ColumnKind.STRING:
        return str, _exact_converter(name, "STRING", str)
    if kind is ColumnKind.BOOLEAN:
        return bool, _exact_converter(name, "BOOLEAN", bool)
    if kind is ColumnKind.DOUBLE:
        return float, _double_converter(name)
    if kind is ColumnKind.FLOAT:
        return None, _float_converter(name)
    if kind is ColumnKind.INT:
        return None, _integer_converter(name, "INT (32-bit integer)", _INT32_MIN, _INT32_MAX)
    if kind is ColumnKind.BIGINT:
        return None, _integer_converter(name, "BIGINT (64-bit integer)", _INT64_MIN, _INT64_MAX)
    if kind is ColumnKind.TIMESTAMP:
        return None, _timestamp_converter(name)
    if kind is ColumnKind.DATE:
        return None, _date_converter(name)
    raise ValueError(f"column {name!r}: no decoder for kind {kind!r}")  # new ColumnKind


def column_converter(column: Column) -> tuple[type | None, Converter]:
    """``column_plan`` for any column, nested ones too: ARRAY (a JSON array / Avro array),
    MAP (an object with string keys / Avro map) and STRUCT (an object / Avro record: its fields
    by name, a missing one null, unknown ones ignored) convert their contents recursively; the
    first bad value inside rejects the record, naming its path (``addr.zip``)."""
    kind, name = column.kind, column.name
    if kind is ColumnKind.ARRAY:
        item = _child(replace(column.children[0], name=f"{name}[]"))

        def convert_array(value: Any) -> Any:
            if type(value) is not list:
                return _mismatch(name, "ARRAY (a JSON array)", value)
            out = []
            for converted in map(item, value):
                if type(converted) is Rejected:
                    return converted  # no work (nor a message) for the items after it
                out.append(converted)
            return out

        return None, convert_array
    if kind is ColumnKind.MAP:
        entry = _child(replace(column.children[0], name=f"{name}{{}}"))

        def convert_map(value: Any) -> Any:
            if type(value) is not dict:
                return _mismatch(name, "MAP (a JSON object)", value)
            out = {}
            for key, v in value.items():
                if type(converted := entry(v)) is Rejected:
                    return converted
                out[key] = converted
            return out

        return None, convert_map
    if kind is ColumnKind.STRUCT:
        fields = [(c.name, _child(replace(c, name=f"{name}.{c.name}"))) for c in column.children]

        def convert_struct(value: Any) -> Any:
            if type(value) is not dict:
                return _mismatch(name, "STRUCT (a JSON object)", value)
            out = {field: conv(value.get(field)) for field, conv in fields}
            bad = next((v for v in out.values() if type(v) is Rejected), None)
            return bad if bad is not None else out

        return None, convert_struct
    return column_plan(name, kind, column.precision, column.scale)


def _child(column: Column) -> Converter:
    """A nested value's converter: null passes (nested values are nullable)."""
    fast, convert = column_converter(column)

    def one(value: Any) -> Any:
        if value is None or type(value) is fast:
            return value
        return convert(value)

    return one
