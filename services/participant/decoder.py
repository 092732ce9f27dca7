"""Strict decoding of one Kafka record value against the table schema: the façade.

Every record value ends in exactly one of three outcomes (:mod:`.decoded`), and ``decode``
never raises:

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
record and replay it forever, on every process the partition moves to. The known causes are
handled where they arise (bounded digits and scales, depth limits); as a last resort any
other exception becomes a :class:`Rejected` of class ``DecodeError`` with the exception's
type and message, and is logged as the bug it is. The guarantee is tested with arbitrary
bytes, JSON and Connect envelopes (hypothesis).

Exact numbers: the fast parse (orjson) reads numbers with a fraction or exponent as floats.
When a DECIMAL column (at any depth) receives such a float, the value is read again exactly
(:func:`.json_format.parse_object_exact`), so a decimal is never rounded; a table without
DECIMAL columns keeps the single orjson parse. A rejected value is read again exactly too, so
its message quotes the numbers as they were sent (a 25-digit integer in a BIGINT column is
"out of range", not a rounded float) and its outcome is the same whichever reading ran first.

Where the parts are: the wire format (bytes → JSON object) in :mod:`.json_format`, the
coercion of each value to its column's type in :mod:`.coercion`, the outcomes in
:mod:`.decoded`. This module holds what ties them to one table: the size limit, the record
key, NOT NULL columns, unknown fields and the partition value's length.

Performance: the happy path is one ``orjson.loads`` (two readings when a float is bound for a
DECIMAL column, see above) plus, per column, a dict lookup and an exact ``type(...) is``
check; the converters that need more work (integer ranges, timestamps) are closures built
once per schema in ``__init__``; the parsed dict is reused as ``Row.values``. No exception
is raised or caught for a valid record. There is no batch API: a loop over ``decode`` was
measured to be just as fast.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from hudi_sink.services.participant.coercion import column_converter
from hudi_sink.services.participant.decoded import (
    DECODE_ERROR,
    MISSING_RECORD_KEY,
    MISSING_REQUIRED_FIELD,
    PARTITION_VALUE_TOO_LONG,
    RECORD_TOO_LARGE,
    Decoded,
    Deferred,
    Rejected,
    Row,
    Skipped,
)
from hudi_sink.services.participant.json_format import (
    EnvelopeCheck,
    parse_connect_envelope,
    parse_connect_envelope_exact,
    parse_object,
    parse_object_exact,
)
from hudi_sink.services.participant.keyed.envelope import KeyDelete
from hudi_sink.shared.errors import InvalidPartitionValue
from hudi_sink.shared.hudi.naming import MAX_DIR_NAME_BYTES, partition_path
from hudi_sink.shared.hudi.record_key import key_text, record_key_string
from hudi_sink.shared.schema.table_schema import Column, ColumnKind, TableSchema

__all__ = ["RecordDecoder", "ValueParser"]

ValueParser = Callable[[bytes], "dict[str, Any] | Rejected | Deferred | None"]
Unwrap = Callable[[dict[str, Any]], "dict[str, Any] | KeyDelete | Rejected"]
"""The wire format: a value's bytes → its dict of values, why not, or None (a tombstone)."""

_TOMBSTONE = Skipped("tombstone")

log = logging.getLogger("hudi_sink.participant")
_MAX_MESSAGE = 300  # characters of an exception's message kept in a DecodeError
_MAX_UNKNOWN_NAMES = 50


class RecordDecoder:
    """Decodes record values for one table schema; build once, reuse for every record."""

    __slots__ = ("_schema", "_max_record_bytes", "_plan", "_names", "_key", "_keys", "_partition",
                 "_hive_style", "_ncols", "_parse", "_parse_exact", "_decimals", "_failures_logged",
                 "_unwrap", "unknown_names", "_unknown_log")

    def __init__(self, schema: TableSchema, max_record_bytes: int,
                 *, hive_style: bool = False, connect_envelope: bool = False,
                 value_parser: ValueParser | None = None, unwrap: Unwrap | None = None,
                 envelope_check: EnvelopeCheck | None = None,
                 unknown_log: Callable[[list[str]], None] | None = None) -> None:
        if max_record_bytes < 1:
            raise ValueError("max_record_bytes must be at least 1")
        self._schema = schema
        self._max_record_bytes = max_record_bytes
        self._plan = tuple(
            (column.name, *column_converter(column), column.nullable)
            for column in schema.value_columns  # Kafka metadata columns are filled later
        )
        self._names = tuple(column.name for column in schema.value_columns)
        self._keys = schema.record_key_fields
        # One field: checked before conversion, its text taken after (the fast path). Several
        # (a composite key, Hudi's a:1,b:2): built from the converted values.
        self._key = self._keys[0] if len(self._keys) == 1 else None
        self._partition = schema.partition_field
        self._hive_style = hive_style
        self._ncols = len(schema.value_columns)
        self._parse: ValueParser = value_parser or (
            functools.partial(parse_connect_envelope, check=envelope_check) if connect_envelope
            else parse_object)
        # The exact reading of the same format; None for another format (Avro is exact).
        self._parse_exact: ValueParser | None = None if value_parser is not None else (
            functools.partial(parse_connect_envelope_exact, check=envelope_check)
            if connect_envelope else parse_object_exact)
        # Columns a float must not reach: (name, True when the DECIMAL is nested inside).
        self._decimals = tuple((c.name, c.kind is not ColumnKind.DECIMAL)
                               for c in schema.value_columns if _holds_decimal(c))
        self._failures_logged: set[type] = set()
        self.unknown_names: set[str] = set()
        """Fields of decoded values that are not columns (at most ``_MAX_UNKNOWN_NAMES``),
        ignored and counted; shown on the participant's ``/partitions``."""
        self._unknown_log = unknown_log
        """Told each new unknown field name (plain JSON: no writer schema to log them by)."""
        self._unwrap = unwrap
        """Upsert mode: the parsed value → the row to decode, or what it means instead (a key
        delete, a rejection); ``services.participant.keyed.changes``."""

    @property
    def schema(self) -> TableSchema:
        return self._schema

    def _note_unknown(self, obj: dict[str, Any]) -> None:
        new = sorted(set(obj).difference(self._names, self.unknown_names))
        if new:
            self.unknown_names.update(new[:_MAX_UNKNOWN_NAMES - len(self.unknown_names)])
            if self._unknown_log is not None:
                self._unknown_log(new)

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

    def decode(self, value: bytes | None) -> Decoded | KeyDelete:
        """Decode one record value; never raises (see module docstring)."""
        try:
            return self._decode(value)
        except Exception as exc:  # noqa: BLE001 - the last resort: a poison record must not kill us
            return self._failed(exc)

    def _failed(self, exc: Exception) -> Rejected:
        """The decoder failed on a value: dead-letter it (or stop, under errors.tolerance:
        fail), logged with its traceback once per exception type, in one line after that."""
        kind = type(exc).__name__
        try:
            text = str(exc)
        except Exception:  # noqa: BLE001 - even a broken __str__ must not escape
            text = "(no message)"
        if len(text) > _MAX_MESSAGE:
            text = f"{text[:_MAX_MESSAGE]}... ({len(text)} chars)"
        if type(exc) in self._failures_logged:
            log.warning("decoder failed on a record value (%s: %s); rejected as %s",
                        kind, text, DECODE_ERROR)
        else:
            self._failures_logged.add(type(exc))
            log.error("decoder failed on a record value (%s: %s); rejected as %s. A bug of "
                      "the sink: please report it", kind, text, DECODE_ERROR, exc_info=exc)
        return Rejected(DECODE_ERROR, f"the decoder failed on this value: {kind}: {text}")

    def _decode(self, value: bytes | None) -> Decoded | KeyDelete:
        if value is None:
            return _TOMBSTONE
        if len(value) > self._max_record_bytes:
            return Rejected(
                RECORD_TOO_LARGE,
                f"value is {len(value)} bytes, over errors.max_record_bytes ({self._max_record_bytes})",
            )
        obj: dict[str, Any] | Rejected | Deferred | KeyDelete | None = self._parse(value)
        if obj is None:  # a Connect envelope with a null payload
            return _TOMBSTONE
        if not isinstance(obj, dict):  # Rejected, or Deferred (a registry out of reach)
            return obj
        unwrap = self._unwrap
        if unwrap is not None:
            obj = unwrap(obj)
            if not isinstance(obj, dict):
                return obj
        exact = self._parse_exact
        if exact is not None and self._decimals and self._float_in_decimals(obj):
            obj, exact = exact(value), None
            if not isinstance(obj, dict):  # too deep for the exact reader (orjson took it)
                return _TOMBSTONE if obj is None else obj
            if unwrap is not None and not isinstance(obj := unwrap(obj), dict):
                return obj
        result = self._row(obj)
        if exact is not None and type(result) is Rejected:
            # Word the rejection with the numbers as sent (orjson made them floats).
            again: dict[str, Any] | Rejected | Deferred | KeyDelete | None = exact(value)
            if isinstance(again, dict) and (unwrap is None or isinstance(again := unwrap(again), dict)):
                return self._row(again)
        return result

    def _float_in_decimals(self, obj: dict[str, Any]) -> bool:
        """Whether orjson read a number a DECIMAL column would take as a float."""
        for name, nested in self._decimals:
            field = obj.get(name)
            if type(field) is float or (nested and _holds_float(field)):
                return True
        return False

    def record_key_of(self, values: Mapping[str, Any]) -> str | Rejected:
        """The record key a delete names, spelt exactly as a row's (``_row``): the key
        fields' values converted by their columns first (a TIMESTAMP key sent as text, a
        DECIMAL sent as an integer), so a delete finds the stored row. A value sent as text
        for a non-text column (a string message key) is also tried as JSON (``"42"`` → 42)."""
        converted: dict[str, Any] = {}
        for name, fast_type, convert, _nullable in self._plan:
            if name not in self._keys:
                continue
            value = values.get(name)
            if value is not None and type(value) is not fast_type:
                result = convert(value)
                if type(result) is Rejected and type(value) is str:
                    try:
                        result = convert(orjson.loads(value))
                    except (orjson.JSONDecodeError, TypeError):
                        pass
                if type(result) is Rejected:
                    return result
                value = result
            converted[name] = value
        if self._key is not None:
            key = converted.get(self._key)
            if key is None or key == "":
                return _missing_key(self._key, dict(values))
            return key if type(key) is str else str(key_text(key))
        composite = record_key_string(converted, self._keys)
        return composite if composite is not None else _missing_composite_key(self._keys,
                                                                              dict(values))

    def _row(self, obj: dict[str, Any]) -> Row | Rejected:
        """The parsed object against the schema: the row, or the first reason it is not one."""
        get = obj.get
        key_name = self._key
        if key_name is not None:
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
            if len(self.unknown_names) < _MAX_UNKNOWN_NAMES:
                self._note_unknown(obj)
            obj = {name: obj[name] for name in self._names}
        partition = self._partition
        if partition is not None and type(obj[partition]) is str:
            too_long = self._partition_too_long(obj[partition])
            if too_long is not None:
                return too_long
        if key_name is not None:
            key = obj[key_name]
            record_key = key if type(key) is str else str(key_text(key))
        else:
            composite = record_key_string(obj, self._keys)
            if composite is None:
                return _missing_composite_key(self._keys, obj)
            record_key = composite
        return Row(
            obj,
            record_key,
            None if partition is None else obj[partition],
            unknown,
        )


def _holds_decimal(column: Column) -> bool:
    return column.kind is ColumnKind.DECIMAL or any(_holds_decimal(c) for c in column.children)


def _holds_float(value: Any) -> bool:
    """Whether a nested value holds a float at any depth (iterative: orjson nests 1,024 deep,
    deeper than Python's recursion limit)."""
    if type(value) is not dict and type(value) is not list:
        return False
    pending = [value]
    while pending:
        node = pending.pop()
        for item in node.values() if type(node) is dict else node:
            kind = type(item)
            if kind is float:
                return True
            if kind is dict or kind is list:
                pending.append(item)
    return False


def _missing_key(name: str, obj: dict[str, Any]) -> Rejected:
    if name not in obj:
        state = "missing"
    elif obj[name] is None:
        state = "null"
    else:
        state = "an empty string"  # Hudi refuses empty record keys
    return Rejected(MISSING_RECORD_KEY, f"record key field {name!r} is {state}")


def _missing_composite_key(names: tuple[str, ...], obj: dict[str, Any]) -> Rejected:
    states = ", ".join(f"{name} is {'null' if obj.get(name) is None else 'empty'}"
                       for name in names)
    return Rejected(MISSING_RECORD_KEY, f"record key fields {', '.join(map(repr, names))} are "
                    f"all null or empty ({states}): a composite key needs one value")


def _missing_required(name: str, obj: dict[str, Any]) -> Rejected:
    state = "null" if name in obj else "missing"
    return Rejected(MISSING_REQUIRED_FIELD, f"field {name!r} is NOT NULL but is {state}")
