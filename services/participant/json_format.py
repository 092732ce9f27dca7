"""The record format: a Kafka record value's bytes → one JSON object, or why not.

Why a module of its own: this is the only part of decoding that knows the wire format. The
schema side (:mod:`.coercion`) works on JSON-typed values and the façade
(:class:`.decoder.RecordDecoder`) on the parsed object, so another format only has to
deliver the same dict of JSON-typed values (or a :class:`Rejected`).

The happy path is one ``orjson.loads``; telling bad UTF-8 from bad JSON only runs on the
error path, so a valid record is parsed once.
"""

from __future__ import annotations

import base64
import binascii
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import orjson

from services.participant.coercion import describe
from services.participant.decoded import INVALID_JSON, INVALID_UTF8, NOT_AN_ENVELOPE, NOT_AN_OBJECT, Rejected

__all__ = ["parse_object", "parse_connect_envelope"]

_CONNECT_DATE = "org.apache.kafka.connect.data.Date"
_CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_EPOCH_DAY = date(1970, 1, 1)


def parse_object(value: bytes) -> dict[str, Any] | Rejected:
    """The JSON object ``value`` holds; a :class:`Rejected` for anything else (never raises)."""
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        return _undecodable(value, exc)
    if type(obj) is not dict:
        return Rejected(NOT_AN_OBJECT, f"value must be a JSON object, got {describe(obj)}")
    return obj


def parse_connect_envelope(value: bytes) -> dict[str, Any] | Rejected | None:
    """Kafka Connect's ``JsonConverter`` with ``schemas.enable=true``: ``{"schema": …,
    "payload": {…}}``. The payload is the record, decoded against ``table.schema`` like a plain
    JSON object; ``None`` for a null payload (a tombstone). Connect's logical types arrive as
    the decoder takes them (``Timestamp`` as epoch milliseconds) except ``Date`` (days since
    the epoch) and ``Decimal`` (base64 bytes), which the envelope's schema names and which are
    turned into an ISO date and a decimal here."""
    obj = parse_object(value)
    if type(obj) is not dict:
        return obj
    if "payload" not in obj or "schema" not in obj:
        return Rejected(NOT_AN_ENVELOPE, 'value must be a Kafka Connect JSON envelope {"schema": '
                        '…, "payload": …} (kafka.value_format: connect_json), got the keys '
                        f"{sorted(obj)[:5]}")
    payload = obj["payload"]
    if payload is None:
        return None
    if type(payload) is not dict:
        return Rejected(NOT_AN_OBJECT, f"payload must be a JSON object, got {describe(payload)}")
    schema = obj["schema"]
    fields = schema.get("fields") if type(schema) is dict else None
    if type(fields) is list:
        for field in fields:
            if type(field) is not dict or type(field.get("field")) is not str:
                continue
            name, logical = field["field"], field.get("name")
            raw = payload.get(name)
            if logical == _CONNECT_DATE and type(raw) is int and -719162 <= raw <= 2932896:
                payload[name] = (_EPOCH_DAY + timedelta(days=raw)).isoformat()  # years 1..9999
            elif logical == _CONNECT_DECIMAL and type(raw) is str:
                payload[name] = _connect_decimal(raw, field.get("parameters"))
    return payload


def _connect_decimal(text: str, parameters: Any) -> Any:
    """Connect's ``Decimal``: base64 of the unscaled value (big-endian two's complement), the
    scale in the schema's parameters. Text that is not that stays text (the column decides)."""
    try:
        scale = int(parameters["scale"])
        unscaled = int.from_bytes(base64.b64decode(text, validate=True), "big", signed=True)
    except (KeyError, TypeError, ValueError, binascii.Error):
        return text
    return Decimal(unscaled).scaleb(-scale)


def _undecodable(value: bytes, exc: orjson.JSONDecodeError) -> Rejected:
    """Tell bad UTF-8 from bad JSON."""
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
