"""Avro record values in the Confluent wire format → the decoder's dict of values.

The framing (documented by Confluent): byte 0 is the magic byte ``0``, bytes 1–4 the writer
schema's id (big-endian), the rest the Avro binary encoding of one datum. The body is read with
fastavro and the writer schema; the values are then resolved against the table schema by field
name by the same strict decoding as JSON (a missing nullable field is null, an unknown field is
ignored and counted, ``int`` is taken for BIGINT/DOUBLE, ``float`` for DOUBLE). Logical types
arrive as the decoder takes them: ``timestamp-millis``/``-micros`` and ``date`` as ISO text,
``uuid`` as its text, an ``enum`` symbol as a string.

Outcomes: the dict; a ``Rejected`` (not the framing, an unknown schema id, a writer schema
refused by :mod:`.avro_limits` because a few bytes could decode to an unbounded amount, a body
that does not decode); or ``Deferred`` when the writer schema cannot be had now (the registry
is out of reach, or its lookup failed in any other way than "no such id") — nothing is wrong
with the record, so its partition waits and tries again rather than dead-letter good data.
"""

from __future__ import annotations

import io
import struct
import uuid
from datetime import date, datetime
from typing import Any

from fastavro import parse_schema, schemaless_reader

from hudi_sink.services.participant.avro_limits import unsafe_schema
from hudi_sink.services.participant.decoded import INVALID_AVRO, UNKNOWN_SCHEMA_ID, Deferred, Rejected
from hudi_sink.shared.schema.registry import RegistryUnavailable, UnknownSchemaId, WriterSchemas

__all__ = ["AvroValues", "MAGIC"]

MAGIC = 0
_HEADER = struct.Struct(">bI")


class AvroValues:
    """Parses framed Avro values with writer schemas from ``schemas``; each id's schema is
    parsed and checked (:func:`~services.participant.avro_limits.unsafe_schema`) once, and an
    id whose schema is unusable is remembered as such (an id never changes meaning)."""

    def __init__(self, schemas: WriterSchemas) -> None:
        self._schemas = schemas
        self._parsed: dict[int, Any] = {}

    def _writer(self, schema_id: int) -> Any:
        """The parsed writer schema, or the ``Rejected`` every value of this id gets."""
        parsed = self._parsed.get(schema_id)
        if parsed is not None:
            return parsed
        schema = self._schemas.get(schema_id)  # UnknownSchemaId, RegistryUnavailable: not cached
        try:
            parsed = parse_schema(schema)
        except Exception as exc:  # noqa: BLE001 - a schema fastavro refuses is the record's problem
            parsed = Rejected(UNKNOWN_SCHEMA_ID, f"schema id {schema_id} is not a usable Avro "
                              f"schema: {type(exc).__name__}: {exc}")
        else:
            refused = unsafe_schema(parsed)
            if refused is not None:
                parsed = Rejected(INVALID_AVRO, f"writer schema id {schema_id} is refused: {refused}")
        self._parsed[schema_id] = parsed
        return parsed

    def writer_of(self, value: bytes) -> tuple[int, dict[str, Any]]:
        """The schema id and writer schema of a value ``parse`` decoded (so it is cached)."""
        _, schema_id = _HEADER.unpack_from(value)
        schema = self._schemas.cached(schema_id)
        assert schema is not None, "writer_of before parse"
        return schema_id, schema

    def parse(self, value: bytes) -> dict[str, Any] | Rejected | Deferred:
        if len(value) < _HEADER.size or value[0] != MAGIC:
            return Rejected(INVALID_AVRO, "value is not in the Confluent Avro wire format "
                            "(magic byte 0, 4-byte schema id, Avro body)")
        _, schema_id = _HEADER.unpack_from(value)
        try:
            writer = self._writer(schema_id)
        except UnknownSchemaId as exc:
            return Rejected(UNKNOWN_SCHEMA_ID, str(exc))
        except Exception as exc:  # noqa: BLE001 - see below
            # Only the registry's answer "no such id" condemns the record. Whatever else the
            # lookup raised (RegistryUnavailable, or a failure its client did not foresee)
            # says nothing about it: dead-lettering would lose good data and move the
            # committed offset past it, so the partition waits and asks again.
            return Deferred(str(exc) if isinstance(exc, RegistryUnavailable)
                            else f"schema id {schema_id}: lookup failed: {type(exc).__name__}: {exc}")
        if type(writer) is Rejected:
            return writer
        body = io.BytesIO(value)
        body.seek(_HEADER.size)
        try:
            datum = schemaless_reader(body, writer, None)
        except Exception as exc:  # noqa: BLE001 - truncated or corrupt bodies raise many types
            return Rejected(INVALID_AVRO, f"Avro body does not decode with schema id {schema_id}: "
                            f"{type(exc).__name__}: {exc}")
        if type(datum) is not dict:
            return Rejected(INVALID_AVRO, f"schema id {schema_id} is not a record schema")
        if body.tell() != len(value):
            return Rejected(INVALID_AVRO, f"{len(value) - body.tell()} bytes left after the Avro body")
        for name, field in datum.items():
            kind = type(field)
            if kind in _TEXTUAL or kind is list or kind is dict:
                datum[name] = _plain(field)  # depth bounded by the schema (avro_limits.MAX_DEPTH)
        return datum


_TEXTUAL = (datetime, date, uuid.UUID)


def _plain(value: Any) -> Any:
    """Logical-type values as the decoder takes them (timestamps and dates as ISO text, a uuid
    as its text), inside arrays, maps and nested records too."""
    kind = type(value)
    if kind is datetime or kind is date:
        return value.isoformat()
    if kind is uuid.UUID:
        return str(value)
    if kind is list:
        return [_plain(v) for v in value]
    if kind is dict:
        return {k: _plain(v) for k, v in value.items()}
    return value
