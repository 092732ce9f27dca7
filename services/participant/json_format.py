"""The record format: a Kafka record value's bytes → one JSON object, or why not.

Why a module of its own: this is the only part of decoding that knows the wire format. The
schema side (:mod:`.coercion`) works on JSON-typed values and the façade
(:class:`.decoder.RecordDecoder`) on the parsed object, so another format only has to
deliver the same dict of JSON-typed values (or a :class:`Rejected`).

Two readings of the same bytes:

- fast (``parse_object``, ``parse_connect_envelope``): one ``orjson.loads``. orjson reads
  every number with a fraction or an exponent, and every integer beyond 64 bits, as a
  float: ``12345678901234567.89`` becomes ``12345678901234568.0``. Fine for DOUBLE columns,
  wrong for DECIMAL ones;
- exact (``parse_object_exact``, ``parse_connect_envelope_exact``): the same document
  (orjson must accept it first, so both readings refuse the same bytes: bad UTF-8, lone
  surrogates, ``NaN``, numbers beyond a double) read again by the standard library with
  numbers as :class:`JsonNumber` (a Decimal of the number's text) and integers as ints of
  any size. Decoding a 7-column record costs 8.7 instead of 4.2 µs of CPU that way, so the
  decoder only asks for it when a float is bound for a DECIMAL column, or to word a rejection.

Telling bad UTF-8 from bad JSON only runs on the error path, so a valid record is parsed once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import InvalidOperation
from typing import Any

import orjson

from hudi_sink.services.participant.coercion import describe
from hudi_sink.services.participant.connect_logical import ConnectSchemaTooDeep, payload_plan
from hudi_sink.services.participant.decoded import (
    INVALID_JSON,
    INVALID_UTF8,
    NOT_AN_ENVELOPE,
    NOT_AN_OBJECT,
    Deferred,
    JsonNumber,
    Rejected,
)

__all__ = ["parse_object", "parse_object_exact", "parse_connect_envelope",
           "parse_connect_envelope_exact", "EnvelopeCheck"]

EnvelopeCheck = Callable[[Any], "Rejected | Deferred | None"]
"""An envelope's ``schema`` → why its payload is not decoded now (``.writer_schemas``)."""


def parse_object(value: bytes) -> dict[str, Any] | Rejected:
    """The JSON object ``value`` holds; a :class:`Rejected` for anything else (never raises)."""
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        return _undecodable(value, exc)
    if type(obj) is not dict:
        return Rejected(NOT_AN_OBJECT, f"value must be a JSON object, got {describe(obj)}")
    return obj


def _exact_number(text: str) -> JsonNumber:
    """A number with a fraction or an exponent, exactly.

    Decimal refuses exponents beyond ±10**18. orjson (which read the value first) lets only
    tiny ones through, such as ``1e-9999999999999999999``: it stays zero if its digits are,
    else the tiniest Decimal of its sign — too many places for any DECIMAL column, the same
    0.0 as orjson's for a DOUBLE one."""
    try:
        return JsonNumber(text)
    except InvalidOperation:
        digits = text.lower().partition("e")[0]
        sign = "-" if digits.startswith("-") else ""
        return JsonNumber(sign + ("1E-999999999999999999" if digits.strip("-0.") else "0"))


def parse_object_exact(value: bytes) -> dict[str, Any] | Rejected:
    """``parse_object`` with every number as its text says (:class:`JsonNumber`, or an int of
    any size) instead of a float; never raises."""
    checked = parse_object(value)  # the same bytes are refused, with the same messages
    if type(checked) is not dict:
        return checked
    try:
        obj: dict[str, Any] = json.loads(bytes(value).decode("utf-8"), parse_float=_exact_number)
    except RecursionError:  # orjson nests deeper than the standard library's reader
        return Rejected(INVALID_JSON, "value is nested too deeply to read its numbers exactly")
    except ValueError as exc:  # not expected after orjson accepted the value; still no raise
        return Rejected(INVALID_JSON, f"value is not valid JSON: {exc}")
    return obj


def parse_connect_envelope(value: bytes, check: EnvelopeCheck | None = None
                           ) -> dict[str, Any] | Rejected | Deferred | None:
    """Kafka Connect's ``JsonConverter`` with ``schemas.enable=true``: ``{"schema": …,
    "payload": {…}}``. The payload is the record, decoded against ``table.schema`` like a plain
    JSON object; ``None`` for a null payload (a tombstone). Connect's logical types arrive as
    the decoder takes them (``Timestamp`` as epoch milliseconds) except ``Date`` (days since
    the epoch) and ``Decimal`` (base64 bytes, or a number with ``decimal.format=NUMERIC``),
    which the envelope's schema names at any depth (struct fields, array items, map values)
    and which are turned into an ISO date and a decimal (:mod:`.connect_logical`). ``check``
    judges the envelope's schema first (schema evolution: :mod:`.writer_schemas`)."""
    return _payload(parse_object(value), check)


def parse_connect_envelope_exact(value: bytes, check: EnvelopeCheck | None = None
                                 ) -> dict[str, Any] | Rejected | Deferred | None:
    """``parse_connect_envelope`` with the payload's numbers read exactly."""
    return _payload(parse_object_exact(value), check)


def _payload(obj: dict[str, Any] | Rejected,
             check: EnvelopeCheck | None) -> dict[str, Any] | Rejected | Deferred | None:
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
    if check is not None and (verdict := check(obj["schema"])) is not None:
        return verdict
    try:
        plan: Callable[[Any], Any] | None = payload_plan(obj["schema"])
    except ConnectSchemaTooDeep as exc:
        return Rejected(NOT_AN_ENVELOPE, str(exc))
    if plan is not None:
        plan(payload)  # converts the logical values in place
    return payload


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
