"""Strict decoding of one Kafka record value against the table schema.

Every record value ends in exactly one of three outcomes, and ``decode`` never raises:

- :class:`Row`: the record fits the schema; ``values`` holds one converted Python value per
  column (``None`` for absent nullable fields), ready for :func:`rows_to_arrow`.
- :class:`Skipped`: a tombstone (``value is None``); there is nothing to write.
- :class:`Rejected`: the record does not fit; ``error_class`` is a short stable name (metric
  label, DLQ header) and ``message`` tells a human operator which field is wrong and why.

Why strict: a lenient decoder (coercing ``"3"`` to 3, ``3.7`` to 3, ``true`` to ``"true"``)
silently writes values nobody sent, and the error surfaces months later in a query. Rejecting
at the edge puts the bad record, untouched, in the dead-letter topic with a reason.

Why never raise: the participant decides what a rejection means (``errors.tolerance``: DLQ or
fail). An exception escaping from decoding would instead crash the consumer loop on a poison
record and replay it forever. The guarantee is tested with arbitrary bytes (hypothesis).

Performance: the happy path is one ``orjson.loads`` plus, per column, a dict lookup and an
exact ``type(...) is`` check; the converters that need more work (integer ranges, timestamps)
are closures built once per schema in ``__init__``; the parsed dict is reused as
``Row.values``. No exception is raised or caught for a valid record. There is no batch API:
a loop over ``decode`` was measured to be just as fast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from operator import itemgetter
from typing import Any

import orjson
import pyarrow as pa

from shared.errors import InvalidPartitionValue
from shared.hudi.naming import MAX_DIR_NAME_BYTES, partition_path
from shared.schema import ColumnKind, TableSchema

__all__ = [
    "Decoded",
    "Row",
    "Skipped",
    "Rejected",
    "RecordDecoder",
    "rows_to_arrow",
    "ERROR_CLASSES",
    "RECORD_TOO_LARGE",
    "INVALID_UTF8",
    "INVALID_JSON",
    "NOT_AN_OBJECT",
    "MISSING_RECORD_KEY",
    "MISSING_REQUIRED_FIELD",
    "TYPE_MISMATCH",
    "INVALID_TIMESTAMP",
    "INVALID_DATE",
    "PARTITION_VALUE_TOO_LONG",
]

# Error classes: stable names, used as DLQ header values and metric labels.
RECORD_TOO_LARGE = "RecordTooLarge"
INVALID_UTF8 = "InvalidUtf8"
INVALID_JSON = "InvalidJson"
NOT_AN_OBJECT = "NotAnObject"
MISSING_RECORD_KEY = "MissingRecordKey"
MISSING_REQUIRED_FIELD = "MissingRequiredField"
TYPE_MISMATCH = "TypeMismatch"
INVALID_TIMESTAMP = "InvalidTimestamp"
INVALID_DATE = "InvalidDate"
PARTITION_VALUE_TOO_LONG = "PartitionValueTooLong"


#: Every ``Rejected.error_class`` the decoder can produce (e.g. to pre-register metrics).
ERROR_CLASSES = frozenset(
    {
        RECORD_TOO_LARGE,
        INVALID_UTF8,
        INVALID_JSON,
        NOT_AN_OBJECT,
        MISSING_RECORD_KEY,
        MISSING_REQUIRED_FIELD,
        TYPE_MISMATCH,
        INVALID_TIMESTAMP,
        INVALID_DATE,
        PARTITION_VALUE_TOO_LONG,
    }
)


@dataclass(slots=True)
class Row:
    """A record that fits the schema.

    Not frozen on purpose: a frozen dataclass ``__init__`` costs about three times as much
    (it goes through ``object.__setattr__`` per field), which is measurable at hundreds of
    thousands of records per second; ``values`` is a mutable dict anyway. Treat it as
    read-only.
    """

    values: dict[str, object]
    """Exactly one entry per schema column (converted value or ``None``); the key order
    is not significant (it follows the JSON object, not the schema)."""
    record_key: str
    """``str()`` of the converted record key value (never empty)."""
    partition_value: object
    """Converted value of the partition field; ``None`` if unpartitioned or null."""
    unknown_fields: int = 0
    """Fields of the JSON object that are not columns; ignored, counted for metrics."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """A record with nothing to write (a tombstone: the value is ``None``)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Rejected:
    """A record that does not fit the schema; goes to the DLQ or fails the sink."""

    error_class: str
    message: str


Decoded = Row | Skipped | Rejected

_TOMBSTONE = Skipped("tombstone")

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


def _clip(text: str) -> str:
    """Shorten ``text`` for a message, saying how long it really was."""
    if len(text) <= _CLIP:
        return text
    return f"{text[:_CLIP]}... ({len(text)} chars)"


def _describe(value: object) -> str:
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
    label = "object" if kind is dict else "array" if kind is list else kind.__name__
    try:
        rendered = orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # nested deeper than orjson.dumps allows
        size = len(value) if isinstance(value, dict | list) else 0
        return f"{label} of {size} entries"
    return f"{label} {_clip(rendered)}"


_Converter = Callable[[Any], Any]
"""Converts a non-null JSON value; returns the column value or a :class:`Rejected`."""


def _mismatch(name: str, expected: str, value: object, note: str = "") -> Rejected:
    suffix = f" ({note})" if note else ""
    return Rejected(TYPE_MISMATCH, f"field {name!r}: expected {expected}, got {_describe(value)}{suffix}")


def _string_converter(name: str) -> _Converter:
    # Only reached when the value is not a str (the fast path takes str directly).
    def convert(value: Any) -> Any:
        if type(value) is str:
            return value
        return _mismatch(name, "STRING", value)

    return convert


def _boolean_converter(name: str) -> _Converter:
    def convert(value: Any) -> Any:
        if type(value) is bool:
            return value
        return _mismatch(name, "BOOLEAN", value)

    return convert


def _integer_converter(name: str, label: str, low: int, high: int) -> _Converter:
    # ``type(v) is int`` excludes bool (a subclass of int) and floats such as 3.0: a
    # float in an integer column usually means a producer bug that would otherwise be
    # hidden. orjson turns integers beyond 64 bits into floats, so those fail here too.
    def convert(value: Any) -> Any:
        if type(value) is int:
            if low <= value <= high:
                return value
            return _mismatch(name, label, value, "out of range")
        return _mismatch(name, label, value)

    return convert


def _double_converter(name: str) -> _Converter:
    # Only reached for non-floats (floats take the fast path). orjson ints fit in 64 bits,
    # so float() cannot overflow.
    def convert(value: Any) -> Any:
        kind = type(value)
        if kind is float:
            return value
        if kind is int:
            return float(value)
        return _mismatch(name, "DOUBLE", value)

    return convert


def _float_converter(name: str) -> _Converter:
    def convert(value: Any) -> Any:
        kind = type(value)
        if kind is float or kind is int:
            number = float(value)
            if -_FLOAT32_MAX <= number <= _FLOAT32_MAX:
                return number
            return _mismatch(name, "FLOAT", value, "out of 32-bit float range")
        return _mismatch(name, "FLOAT", value)

    return convert


def _timestamp_converter(name: str) -> _Converter:
    layout_ok = _timestamp_layout_ok
    parse = datetime.fromisoformat
    from_seconds = datetime.fromtimestamp
    fast_limit = _FAST_MILLIS_LIMIT

    def invalid(value: object) -> Rejected:
        return Rejected(
            INVALID_TIMESTAMP,
            f"field {name!r}: invalid TIMESTAMP {_describe(value)}; {_TIMESTAMP_HINT}",
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


def _date_converter(name: str) -> _Converter:
    layout_ok = _date_layout_ok
    parse = date.fromisoformat

    def invalid(value: object) -> Rejected:
        return Rejected(
            INVALID_DATE, f"field {name!r}: invalid DATE {_describe(value)}; expected 'YYYY-MM-DD'"
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


def _plan_column(name: str, kind: ColumnKind) -> tuple[type | None, _Converter]:
    """(type taken as-is without conversion or None, converter for everything else)."""
    if kind is ColumnKind.STRING:
        return str, _string_converter(name)
    if kind is ColumnKind.BOOLEAN:
        return bool, _boolean_converter(name)
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


class RecordDecoder:
    """Decodes record values for one table schema; build once, reuse for every record."""

    __slots__ = ("_schema", "_max_record_bytes", "_plan", "_names", "_key", "_partition", "_hive_style",
                 "_ncols")

    def __init__(self, schema: TableSchema, max_record_bytes: int,
                 *, hive_style: bool = False) -> None:
        if max_record_bytes < 1:
            raise ValueError("max_record_bytes must be at least 1")
        self._schema = schema
        self._max_record_bytes = max_record_bytes
        self._plan = tuple(
            (column.name, *_plan_column(column.name, column.kind), column.nullable)
            for column in schema.columns
        )
        self._names = tuple(column.name for column in schema.columns)
        self._key = schema.record_key_field
        self._partition = schema.partition_field
        self._hive_style = hive_style
        self._ncols = len(schema.columns)

    @property
    def schema(self) -> TableSchema:
        return self._schema

    def _partition_too_long(self, value: str) -> Rejected | None:
        """A partition value whose directory name no filesystem can hold is a bad record
        (dead-lettered here), not a flush that would fail forever."""
        assert self._partition is not None
        if len(value) * 4 + len(self._partition) + 1 <= MAX_DIR_NAME_BYTES:
            return None  # fast path: no character encodes to more than 4 bytes
        try:
            partition_path(value, self._partition, self._hive_style)
        except InvalidPartitionValue as exc:
            return Rejected(PARTITION_VALUE_TOO_LONG, str(exc))
        return None

    def decode(self, value: bytes | None) -> Decoded:
        """Decode one record value; never raises (see module docstring)."""
        if value is None:
            return _TOMBSTONE
        if len(value) > self._max_record_bytes:
            return Rejected(
                RECORD_TOO_LARGE,
                f"value is {len(value)} bytes, over errors.max_record_bytes ({self._max_record_bytes})",
            )
        try:
            obj = orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            return _undecodable(value, exc)
        if type(obj) is not dict:
            return Rejected(NOT_AN_OBJECT, f"value must be a JSON object, got {_describe(obj)}")

        get = obj.get
        key_name = self._key
        raw_key = get(key_name)
        if raw_key is None or raw_key == "":
            return _missing_key(key_name, obj)

        # The parsed dict becomes ``Row.values`` in place: converted values overwrite the
        # JSON ones, absent columns are added as None. Building a fresh dict per record was
        # measurably slower (an allocation and an insert per column).
        for name, fast_type, convert, nullable in self._plan:
            field = get(name)
            if field is None:
                if not nullable:
                    return _missing_required(name, obj)
                obj[name] = None
            elif type(field) is not fast_type:
                converted = convert(field)
                if type(converted) is Rejected:
                    return converted
                obj[name] = converted

        unknown = len(obj) - self._ncols  # every column is a key of obj now
        if unknown:
            obj = {name: obj[name] for name in self._names}
        partition = self._partition
        if partition is not None and type(obj[partition]) is str:
            too_long = self._partition_too_long(obj[partition])
            if too_long is not None:
                return too_long
        return Row(
            obj,
            str(obj[key_name]),
            None if partition is None else obj[partition],
            unknown,
        )


def _undecodable(value: bytes, exc: orjson.JSONDecodeError) -> Rejected:
    """Tell bad UTF-8 from bad JSON; only runs on the error path so the happy path parses once."""
    try:
        bytes(value).decode("utf-8")
    except UnicodeDecodeError as utf8_error:
        return Rejected(
            INVALID_UTF8,
            f"value is not valid UTF-8: {utf8_error.reason} at byte {utf8_error.start}",
        )
    if not value:
        return Rejected(INVALID_JSON, "value is empty, expected a JSON object")
    return Rejected(INVALID_JSON, f"value is not valid JSON: {exc}")


def _missing_key(name: str, obj: dict[str, Any]) -> Rejected:
    if name not in obj:
        state = "missing"
    elif obj[name] is None:
        state = "null"
    else:
        state = "an empty string"  # Hudi refuses empty record keys
    return Rejected(MISSING_RECORD_KEY, f"record key field {name!r} is {state}")


def _missing_required(name: str, obj: dict[str, Any]) -> Rejected:
    state = "null" if name in obj else "missing"
    return Rejected(MISSING_REQUIRED_FIELD, f"field {name!r} is NOT NULL but is {state}")


def rows_to_arrow(rows: list[Row], schema: TableSchema) -> pa.Table:
    """Build the data columns (``schema.data_arrow_schema``) of ``rows``, column-wise.

    One Python list per column, then one typed ``pa.array`` conversion per column: about
    twice as fast as ``Table.from_pylist`` and four times as fast as transposing with
    ``zip(*rows)``, measured on 200k rows. The values were checked by the decoder, so the
    conversion cannot fail on them.
    """
    arrow_schema = schema.data_arrow_schema
    if not rows:
        return arrow_schema.empty_table()
    records = [row.values for row in rows]
    arrays = [pa.array(list(map(itemgetter(field.name), records)), type=field.type) for field in arrow_schema]
    return pa.Table.from_arrays(arrays, schema=arrow_schema)
