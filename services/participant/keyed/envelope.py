"""What one Kafka record means for its key in upsert mode: write this row, or delete this key.

Why a module of its own: a record's meaning depends on three things the value decoder does not
know — the change envelope (``kafka.envelope``), tombstones (a null value: the key is in the
Kafka message key, ``upsert.kafka_key_format``) and soft deletes (``upsert.delete_field`` /
``upsert.delete_marker``) — while the decoder's job stays turning one row dict into a table row.
This module works on a value the format reader already parsed (JSON; Connect JSON, whose
payload :func:`~..json_format.parse_connect_envelope` unwrapped, so a Debezium envelope sent
with schemas arrives here as the envelope itself; Avro decoded to a dict) and says:

- :class:`RowChange`: a whole row to decode like any record; ``delete`` marks a soft delete
  (the row's delete field equals the marker), which carries its own partition value and
  ordering value, so it needs no look-up across table partitions and loses to a newer stored
  version like any update (Hudi's ``DefaultHoodieRecordPayload`` compares such deletes);
- :class:`KeyDelete`: a delete known by its key only (a tombstone; a Debezium ``op: d``). It
  has no ordering value, so it always applies (Hudi applies an empty payload unconditionally);
  with a Debezium delete that is right anyway, the source's order being the partition's;
- :class:`Rejected`: what to dead-letter, naming the problem.

Debezium (``{before, after, op, source, ts_ms}``): ``c``, ``r`` (snapshot read) and ``u``
write ``after``; ``d`` deletes the key read from ``before``, or from the message key when
``before`` is null or lacks it (a Postgres table without REPLICA IDENTITY FULL sends only the
key columns, or nothing); the tombstone Debezium sends after a delete is then a delete of an
absent key, which the fold and the decision treat as a no-op. ``t`` (truncate) names no key and
is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from hudi_sink.services.participant.decoded import (
    INVALID_JSON,
    INVALID_UTF8,
    MISSING_RECORD_KEY,
    NOT_AN_ENVELOPE,
    NOT_AN_OBJECT,
    Rejected,
)
from hudi_sink.shared.hudi.record_key import key_text, record_key_string

__all__ = ["KeyedSpec", "RowChange", "KeyDelete", "read_change", "message_key_delete",
           "TOMBSTONE", "DEBEZIUM_DELETE", "ENVELOPES", "KEY_FORMATS"]

#: ``kafka.envelope`` values.
ENVELOPES: Final = ("none", "debezium")
#: ``upsert.kafka_key_format`` values.
KEY_FORMATS: Final = ("string", "json")
#: :attr:`KeyDelete.source` values.
TOMBSTONE: Final = "tombstone"
DEBEZIUM_DELETE: Final = "debezium"

_UPSERT_OPS: Final = frozenset({"c", "r", "u"})


@dataclass(frozen=True, slots=True)
class KeyedSpec:
    """The settings that decide a record's meaning (from ``table.record_key_field``,
    ``kafka.envelope`` and ``upsert.*``)."""

    key_fields: tuple[str, ...]
    envelope: str = "none"
    kafka_key_format: str = "string"
    delete_field: str | None = None
    delete_marker: str = "true"

    def __post_init__(self) -> None:
        if not self.key_fields:
            raise ValueError("upsert mode needs at least one record key field")
        if self.envelope not in ENVELOPES:
            raise ValueError(f"unknown envelope {self.envelope!r}; expected one of {ENVELOPES}")
        if self.kafka_key_format not in KEY_FORMATS:
            raise ValueError(f"unknown kafka_key_format {self.kafka_key_format!r}; "
                             f"expected one of {KEY_FORMATS}")


@dataclass(frozen=True, slots=True)
class RowChange:
    """A whole row: decode it like any record, then upsert it (or, with ``delete``, remove its
    key, carrying the row's partition and ordering values)."""

    row: dict[str, Any]
    delete: bool = False


@dataclass(frozen=True, slots=True)
class KeyDelete:
    """A delete known by its key only; it carries no ordering value, so it always applies."""

    record_key: str
    """Hudi's key text (``shared.hudi.record_key.record_key_string``) of the values as
    sent."""
    values: Mapping[str, Any] | None
    """Where the key was read: Debezium's ``before`` (whole, or only its key columns), the
    JSON message key; ``None`` for a string message key. A caller may take the partition value
    from it when the field is there."""
    source: str
    """:data:`TOMBSTONE` or :data:`DEBEZIUM_DELETE`."""


def read_change(value: dict[str, Any] | None, message_key: bytes | None,
                spec: KeyedSpec) -> RowChange | KeyDelete | Rejected:
    """The meaning of one record: its parsed ``value`` (``None`` for a tombstone, including a
    Connect envelope with a null payload) and its Kafka ``message_key``."""
    if value is None:
        return message_key_delete(message_key, spec, TOMBSTONE, "a tombstone (null value)")
    if spec.envelope == "debezium":
        return _debezium(value, message_key, spec)
    return RowChange(value, _soft_deleted(value, spec))


def _soft_deleted(row: Mapping[str, Any], spec: KeyedSpec) -> bool:
    """Whether the row's delete field's text equals the marker (Hudi compares
    ``toString()``, so a boolean ``true`` matches the marker ``"true"``)."""
    if spec.delete_field is None:
        return False
    return key_text(row.get(spec.delete_field)) == spec.delete_marker


def _debezium(value: dict[str, Any], message_key: bytes | None,
              spec: KeyedSpec) -> RowChange | KeyDelete | Rejected:
    if "op" not in value:
        if "payload" in value and "schema" in value:
            return Rejected(NOT_AN_ENVELOPE, "kafka.envelope: debezium: the value is a Kafka Connect "
                            'JSON envelope {"schema", "payload"}; set kafka.value_format: '
                            "connect_json to read Debezium's JSON with schemas")
        return Rejected(NOT_AN_ENVELOPE, "kafka.envelope: debezium: the value has no 'op', so it is "
                        "not a Debezium change event {before, after, op, source, ts_ms}; its keys: "
                        f"{sorted(value)[:8]}")
    op = value["op"]
    if op in _UPSERT_OPS:
        after = value.get("after")
        if type(after) is not dict:
            return Rejected(NOT_AN_ENVELOPE, f"Debezium op {op!r} needs an 'after' row, got "
                            f"{_kind(after)}")
        return RowChange(after, _soft_deleted(after, spec))
    if op == "d":
        before = value.get("before")
        if before is not None and type(before) is not dict:
            return Rejected(NOT_AN_ENVELOPE, f"Debezium op 'd' needs a 'before' row or null, got "
                            f"{_kind(before)}")
        if before is not None:
            key = record_key_string(before, spec.key_fields)
            if key is not None:
                return KeyDelete(key, before, DEBEZIUM_DELETE)
        return message_key_delete(message_key, spec, DEBEZIUM_DELETE,
                                  "a Debezium delete whose 'before' holds no record key")
    if op == "t":
        return Rejected(NOT_AN_ENVELOPE, "Debezium op 't' (a truncate) names no key, so it cannot be "
                        "applied by key; the table keeps its rows")
    return Rejected(NOT_AN_ENVELOPE, f"Debezium op {op!r} is not one of c, r, u, d")


def message_key_delete(message_key: bytes | None, spec: KeyedSpec, source: str,
                       what: str) -> KeyDelete | Rejected:
    """A delete keyed by the Kafka message key, read as ``upsert.kafka_key_format`` says;
    ``what`` names the record in a rejection."""
    fields = spec.key_fields
    if message_key is None:
        return Rejected(MISSING_RECORD_KEY, f"{what} has no Kafka message key, so there is no key "
                        "to delete")
    try:
        text = bytes(message_key).decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejected(INVALID_UTF8, f"{what}: the message key is not valid UTF-8: {exc.reason} "
                        f"at byte {exc.start}")
    if spec.kafka_key_format == "string":
        return _string_key(text, spec, source, what)
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return Rejected(INVALID_JSON, f"{what}: the message key is not valid JSON "
                        f"(upsert.kafka_key_format: json): {exc}")
    if type(parsed) is dict and "schema" in parsed and "payload" in parsed:
        parsed = parsed["payload"]  # a Connect JSON key with schemas (Debezium's)
    if type(parsed) is not dict:
        if len(fields) == 1 and type(parsed) in (str, int, bool):
            parsed = {fields[0]: parsed}
        else:
            return Rejected(NOT_AN_OBJECT, f"{what}: the JSON message key must be an object with "
                            f"the record key fields {list(fields)}, got {_kind(parsed)}")
    key = record_key_string(parsed, fields)
    if key is None:
        return Rejected(MISSING_RECORD_KEY, f"{what}: the JSON message key holds no value for the "
                        f"record key fields {list(fields)} (its keys: {sorted(parsed)[:8]})")
    return KeyDelete(key, parsed, source)


def _string_key(text: str, spec: KeyedSpec, source: str, what: str) -> KeyDelete | Rejected:
    """``upsert.kafka_key_format: string``: the key's text is the record key; with several key
    fields it must already be Hudi's complex form ``a:…,b:…``."""
    fields = spec.key_fields
    if not text:
        return Rejected(MISSING_RECORD_KEY, f"{what} has an empty Kafka message key")
    if len(fields) == 1:
        return KeyDelete(text, {fields[0]: text}, source)
    if _complex_form(fields).fullmatch(text) is None:
        return Rejected(MISSING_RECORD_KEY, f"{what}: the string message key {text[:80]!r} is not "
                        f"the complex key form {','.join(f + ':…' for f in fields)} that the record "
                        f"key fields {list(fields)} need (or use upsert.kafka_key_format: json)")
    return KeyDelete(text, None, source)


_FORMS: dict[tuple[str, ...], re.Pattern[str]] = {}


def _complex_form(fields: tuple[str, ...]) -> re.Pattern[str]:
    form = _FORMS.get(fields)
    if form is None:
        form = _FORMS[fields] = re.compile(",".join(re.escape(f) + ":.+" for f in fields), re.DOTALL)
    return form


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number")
