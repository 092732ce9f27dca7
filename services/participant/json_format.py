"""The record format: a Kafka record value's bytes → one JSON object, or why not.

Why a module of its own: this is the only part of decoding that knows the wire format. The
schema side (:mod:`.coercion`) works on JSON-typed values and the façade
(:class:`.decoder.RecordDecoder`) on the parsed object, so another format only has to
deliver the same dict of JSON-typed values (or a :class:`Rejected`).

The happy path is one ``orjson.loads``; telling bad UTF-8 from bad JSON only runs on the
error path, so a valid record is parsed once.
"""

from __future__ import annotations

from typing import Any

import orjson

from services.participant.coercion import describe
from services.participant.decoded import INVALID_JSON, INVALID_UTF8, NOT_AN_OBJECT, Rejected

__all__ = ["parse_object"]


def parse_object(value: bytes) -> dict[str, Any] | Rejected:
    """The JSON object ``value`` holds; a :class:`Rejected` for anything else (never raises)."""
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        return _undecodable(value, exc)
    if type(obj) is not dict:
        return Rejected(NOT_AN_OBJECT, f"value must be a JSON object, got {describe(obj)}")
    return obj


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
