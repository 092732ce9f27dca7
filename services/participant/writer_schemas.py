"""Each record's writer schema against the instant's table schema: fits, evolves, or refused.

A value format that carries its schema (Avro's writer schema by id, a Connect envelope's
``schema``) is checked once per distinct schema per instant schema, before its values are
resolved by field name:

- the table follows its producers (``table.schema_source: registry``): a writer schema the
  table already holds decodes as usual; one that needs an allowed change
  (:mod:`shared.schema.evolution`) is :class:`Deferred` with the evolved table schema — its
  partition stops before the record and reports that schema, the coordinator evolves the
  table in this instant's commit, and the next instant (whose START carries the new schema)
  writes the record. So every flush of an instant writes with one schema, and the schema
  is decided in the commit itself. A refused change is a bad record, ``SchemaIncompatible``,
  naming the field and both types;
- the table's schema is a fixed DDL: fields the table does not have are ignored and counted
  as always; an Avro writer schema's are logged once per schema id (process-wide). Connect
  envelopes are not checked then (their schema would be serialised per record for nothing):
  like plain JSON, the decoder logs each new unknown field name (once per process) and keeps
  the names for the participant's ``/partitions``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable
from typing import Any

import orjson

from hudi_sink.services.participant.avro_format import AvroValues
from hudi_sink.services.participant.connect_schema import connect_columns
from hudi_sink.services.participant.decoded import SCHEMA_INCOMPATIBLE, Deferred, Rejected
from hudi_sink.services.participant.json_format import EnvelopeCheck
from hudi_sink.shared.errors import SchemaError
from hudi_sink.shared.schema.avro_ddl import avro_columns
from hudi_sink.shared.schema.evolution import IncompatibleChange, columns_ddl, evolve
from hudi_sink.shared.schema.table_schema import Column, TableSchema

__all__ = ["SchemaCheck", "UnknownFieldLog", "Verdict", "avro_parser", "envelope_check"]

log = logging.getLogger("hudi_sink.participant")

Verdict = Rejected | Deferred | None
"""None: the values decode against the table schema as they are."""


class UnknownFieldLog:
    """Process-wide: which writer schemas' unknown fields were logged already."""

    def __init__(self) -> None:
        self._logged: set[Hashable] = set()

    def note(self, source: str, key: Hashable, names: list[str]) -> None:
        """Log ``names``, fields of ``source`` (``writer schema id 7``, ``JSON values``), once
        per ``key``."""
        if key not in self._logged:
            self._logged.add(key)
            log.warning("%s: field(s) the table does not have, ignored (the table's schema is "
                        "table.schema; table.schema_source: registry makes them columns): %s",
                        source, ", ".join(names))


class SchemaCheck:
    """Verdicts for one table schema (one instant's), cached per writer schema."""

    def __init__(self, table: TableSchema, *, follow: bool, unknown_log: UnknownFieldLog) -> None:
        self._table = table
        self._columns = {c.name for c in table.value_columns}
        self._follow = follow
        self._log = unknown_log
        self._verdicts: dict[Hashable, Verdict] = {}

    def verdict(self, label: str, key: Hashable,
                columns: Callable[[], tuple[list[Column], list[str]]]) -> Verdict:
        """The verdict on writer schema ``key`` (named ``label`` in messages); ``columns``
        maps it to columns and unmappable field names, on the first sight only."""
        try:
            return self._verdicts[key]
        except KeyError:
            pass
        mapped, unmapped = columns()
        verdict = self._judge(label, key, mapped, unmapped)
        self._verdicts[key] = verdict
        return verdict

    def _judge(self, label: str, key: Hashable, mapped: list[Column], unmapped: list[str]) -> Verdict:
        unknown = [c.name for c in mapped if c.name not in self._columns]
        unknown += [name for name in unmapped if name not in self._columns]
        if not self._follow:
            if unknown:
                self._log.note(f"writer schema {label}", key, unknown)
            return None
        clash = [name for name in unmapped if name in self._columns]
        if clash:
            column = self._table.column(clash[0])
            return Rejected(SCHEMA_INCOMPATIBLE, f"writer schema {label}: field {clash[0]!r} has "
                            f"a type no column can hold, but it is the column {clash[0]} "
                            f"{column.kind.value} in the table")
        try:
            evolution = evolve(self._table.value_columns, mapped)
        except IncompatibleChange as exc:
            return Rejected(SCHEMA_INCOMPATIBLE, f"writer schema {label}: {exc}")
        if not evolution.changes:
            return None
        table = self._table
        try:  # the evolved columns must still hold the keys (and not take a reserved name)
            TableSchema.parse(columns_ddl(evolution.columns), table_name=table.table_name,
                              record_key_field=table.record_key_field,
                              partition_field=table.partition_field,
                              kafka_metadata=table.kafka_metadata)
        except SchemaError as exc:
            return Rejected(SCHEMA_INCOMPATIBLE, f"writer schema {label}: the evolved table "
                            f"schema would not be valid: {exc}")
        log.info("writer schema %s needs the table to evolve (%s): its records wait for the "
                 "next instant", label, "; ".join(evolution.changes))
        return Deferred(f"writer schema {label} evolves the table ({'; '.join(evolution.changes)}):"
                        " its records are written from the next instant",
                        schema=columns_ddl(evolution.columns))


def avro_parser(avro: AvroValues, check: SchemaCheck) -> Callable[[bytes], Any]:
    """``avro.parse`` with the writer schema of each value checked first (see module doc)."""

    def parse(value: bytes) -> Any:
        parsed = avro.parse(value)
        if type(parsed) is not dict:
            return parsed
        schema_id, schema = avro.writer_of(value)
        verdict = check.verdict(f"id {schema_id}", schema_id, lambda: avro_columns(schema))
        return parsed if verdict is None else verdict

    return parse


def envelope_check(check: SchemaCheck) -> EnvelopeCheck:
    """The check of a Connect envelope's schema (cached by its canonical JSON)."""

    def verdict(schema: Any) -> Verdict:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        return check.verdict("of the Connect envelope", key, lambda: connect_columns(schema))

    return verdict
