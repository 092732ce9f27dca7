"""``table.schema`` (Spark DDL) parsed once into the three shapes the sink needs.

- Arrow schema of the data columns (what participants build and Spark writes),
- Avro schema JSON (what Hudi's ``extraMetadata.schema`` and ``hoodie.table.create.schema`` hold),
- per-column kinds for strict JSON decoding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson
import pyarrow as pa

from hudi_sink.shared.errors import SchemaError
from hudi_sink.shared.hudi.record_key import split_key_fields

__all__ = ["ColumnKind", "Column", "TableSchema", "META_COLUMNS", "KAFKA_METADATA", "KAFKA_TOPIC",
           "KAFKA_PARTITION", "KAFKA_OFFSET", "KAFKA_TIMESTAMP", "KAFKA_KEY", "parse_ddl"]


class ColumnKind(StrEnum):
    """The column types the sink accepts in ``table.schema``."""

    STRING = "STRING"
    INT = "INT"
    BIGINT = "BIGINT"
    DOUBLE = "DOUBLE"
    FLOAT = "FLOAT"
    BOOLEAN = "BOOLEAN"
    TIMESTAMP = "TIMESTAMP"
    DATE = "DATE"
    DECIMAL = "DECIMAL"
    ARRAY = "ARRAY"
    MAP = "MAP"
    STRUCT = "STRUCT"


_ALIASES = {
    "STRING": ColumnKind.STRING,
    "VARCHAR": ColumnKind.STRING,
    "INT": ColumnKind.INT,
    "INTEGER": ColumnKind.INT,
    "BIGINT": ColumnKind.BIGINT,
    "LONG": ColumnKind.BIGINT,
    "DOUBLE": ColumnKind.DOUBLE,
    "FLOAT": ColumnKind.FLOAT,
    "REAL": ColumnKind.FLOAT,
    "BOOLEAN": ColumnKind.BOOLEAN,
    "BOOL": ColumnKind.BOOLEAN,
    "TIMESTAMP": ColumnKind.TIMESTAMP,
    "DATE": ColumnKind.DATE,
    "DECIMAL": ColumnKind.DECIMAL,
    "NUMERIC": ColumnKind.DECIMAL,
}

_DECIMAL = re.compile(r"(DECIMAL|NUMERIC)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)", re.IGNORECASE)
"""``DECIMAL(p, s)`` (or ``DECIMAL(p)``: scale 0; bare ``DECIMAL``: Spark's (10, 0))."""

_ARROW = {
    ColumnKind.STRING: pa.string(),
    ColumnKind.INT: pa.int32(),
    ColumnKind.BIGINT: pa.int64(),
    ColumnKind.DOUBLE: pa.float64(),
    ColumnKind.FLOAT: pa.float32(),
    ColumnKind.BOOLEAN: pa.bool_(),
    ColumnKind.TIMESTAMP: pa.timestamp("us", tz="UTC"),
    ColumnKind.DATE: pa.date32(),
}

_AVRO: dict[ColumnKind, Any] = {
    ColumnKind.STRING: "string",
    ColumnKind.INT: "int",
    ColumnKind.BIGINT: "long",
    ColumnKind.DOUBLE: "double",
    ColumnKind.FLOAT: "float",
    ColumnKind.BOOLEAN: "boolean",
    ColumnKind.TIMESTAMP: {"type": "long", "logicalType": "timestamp-micros"},
    ColumnKind.DATE: {"type": "int", "logicalType": "date"},
}

#: Hudi's meta columns, in file order, all strings.
META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED_PREFIX = "__hs_"
"""Column names the participant's Spark jobs use while writing (``__hs_part``, ...)."""

KAFKA_TOPIC, KAFKA_PARTITION, KAFKA_OFFSET, KAFKA_TIMESTAMP, KAFKA_KEY = (
    "_kafka_topic", "_kafka_partition", "_kafka_offset", "_kafka_timestamp", "_kafka_key")


@dataclass(frozen=True)
class Column:
    """One data column: its name, kind and whether null is allowed."""

    name: str
    kind: ColumnKind
    nullable: bool = True
    precision: int = 10
    """DECIMAL only: total digits (1..38)."""
    scale: int = 0
    """DECIMAL only: digits after the point (0..precision)."""
    children: tuple[Column, ...] = ()
    """ARRAY: (element,); MAP: (value,) — keys are strings; STRUCT: its fields."""

    @property
    def arrow_type(self) -> pa.DataType:
        kind = self.kind
        if kind is ColumnKind.DECIMAL:
            return pa.decimal128(self.precision, self.scale)
        if kind is ColumnKind.ARRAY:
            return pa.list_(self.children[0].arrow_type)
        if kind is ColumnKind.MAP:
            return pa.map_(pa.string(), self.children[0].arrow_type)
        if kind is ColumnKind.STRUCT:
            return pa.struct([pa.field(c.name, c.arrow_type) for c in self.children])
        return _ARROW[kind]

    def avro_type(self, path: str) -> Any:
        """The Avro type (nested values nullable); ``path`` names nested records uniquely."""
        kind = self.kind
        if kind is ColumnKind.DECIMAL:
            return {"type": "bytes", "logicalType": "decimal", "precision": self.precision,
                    "scale": self.scale}
        if kind is ColumnKind.ARRAY:
            return {"type": "array", "items": ["null", self.children[0].avro_type(f"{path}_element")]}
        if kind is ColumnKind.MAP:
            return {"type": "map", "values": ["null", self.children[0].avro_type(f"{path}_value")]}
        if kind is ColumnKind.STRUCT:
            return {"type": "record", "name": re.sub(r"[^A-Za-z0-9_]", "_", path), "fields": [
                {"name": c.name, "type": ["null", c.avro_type(f"{path}_{c.name}")], "default": None}
                for c in self.children]}
        return _AVRO[kind]


KAFKA_METADATA = (
    Column(KAFKA_TOPIC, ColumnKind.STRING), Column(KAFKA_PARTITION, ColumnKind.INT),
    Column(KAFKA_OFFSET, ColumnKind.BIGINT), Column(KAFKA_TIMESTAMP, ColumnKind.TIMESTAMP),
    Column(KAFKA_KEY, ColumnKind.STRING),
)
"""The columns ``table.kafka_metadata`` (seed ``connect.meta.data``) appends: where each record
came from (topic, partition, offset, the record's timestamp, its key as UTF-8 text with
undecodable bytes replaced; null timestamp or key when the record has none)."""


def _split_top(text: str) -> list[str]:
    """Split at commas outside ``<…>`` and ``(…)``."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in text:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _parse_type(name: str, text: str, nullable: bool = True) -> Column:
    """One type: a scalar, ``DECIMAL(p, s)``, ``ARRAY<t>``, ``MAP<STRING, t>`` or
    ``STRUCT<field: t, …>`` (nested fields are nullable)."""
    text = text.strip()
    upper = text.upper()
    nested = re.match(r"^(ARRAY|MAP|STRUCT)\s*<(.*)>$", text, re.IGNORECASE | re.DOTALL)
    if nested:
        kind, inner = ColumnKind(nested[1].upper()), nested[2]
        if kind is ColumnKind.ARRAY:
            return Column(name, kind, nullable, children=(_parse_type("element", inner),))
        if kind is ColumnKind.MAP:
            parts = _split_top(inner)
            if len(parts) != 2 or parts[0].strip().upper() not in ("STRING", "VARCHAR"):
                raise SchemaError(f"column {name!r}: MAP needs STRING keys: MAP<STRING, type>",
                                  "table.schema")
            return Column(name, kind, nullable, children=(_parse_type("value", parts[1]),))
        fields = []
        for part in _split_top(inner):
            field_name, _, field_type = part.strip().replace(":", " ", 1).partition(" ")
            if not _NAME.match(field_name.strip("`")):
                raise SchemaError(f"column {name!r}: invalid struct field {part.strip()!r}",
                                  "table.schema")
            fields.append(_parse_type(field_name.strip("`"), field_type))
        return Column(name, kind, nullable, children=tuple(fields))
    decimal = _DECIMAL.fullmatch(text)
    if decimal:
        precision, scale = int(decimal[2]), int(decimal[3] or 0)
        if not (1 <= precision <= 38 and 0 <= scale <= precision):
            raise SchemaError(f"column {name!r}: DECIMAL({precision}, {scale}) needs "
                              "1 <= precision <= 38 and 0 <= scale <= precision", "table.schema")
        return Column(name, ColumnKind.DECIMAL, nullable, precision, scale)
    scalar = _ALIASES.get(upper)
    if scalar is None:
        raise SchemaError(f"column {name!r}: unsupported type {text!r} (supported: "
                          f"{', '.join(sorted(_ALIASES))}, DECIMAL(p, s), ARRAY<t>, "
                          "MAP<STRING, t>, STRUCT<f: t, …>)", "table.schema")
    return Column(name, scalar, nullable)


def parse_ddl(ddl: str) -> list[Column]:
    """Parse ``"id STRING, ts TIMESTAMP NOT NULL, ..."``; raise SchemaError naming the part."""
    columns: list[Column] = []
    for raw in _split_top(ddl):
        part = raw.strip()
        if not part:
            raise SchemaError("empty column definition", "table.schema")
        name, _, type_text = part.partition(" ")
        name = name.strip("`")
        if not type_text.strip():
            raise SchemaError(f"column {part!r} needs a name and a type", "table.schema")
        if not _NAME.match(name) or name.startswith("_hoodie"):
            raise SchemaError(f"invalid column name {name!r}", "table.schema")
        if name.startswith(RESERVED_PREFIX):
            raise SchemaError(f"column name {name!r}: names starting with {RESERVED_PREFIX!r} "
                              "are the sink's own (its Spark jobs use such columns)",
                              "table.schema")
        required = re.search(r"\s+NOT\s+NULL\s*$", type_text, re.IGNORECASE)
        if required:
            type_text = type_text[:required.start()]
        columns.append(_parse_type(name, type_text, nullable=required is None))
    names = [c.name for c in columns]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SchemaError(f"duplicate column(s) {duplicates}", "table.schema")
    return columns


@dataclass(frozen=True)
class TableSchema:
    """The table's columns plus the key fields, validated against each other."""

    columns: tuple[Column, ...]
    record_key_field: str
    """The record key field, or several joined by ``,`` (``a,b``: a composite key), as
    ``hoodie.table.recordkey.fields`` holds them; each one in ``record_key_fields``."""
    partition_field: str | None
    table_name: str
    kafka_metadata: bool = False
    """Whether the last five columns are the record's Kafka coordinates (``KAFKA_METADATA``),
    filled by the participant, not decoded from the value."""

    @classmethod
    def parse(
        cls,
        ddl: str,
        *,
        table_name: str,
        record_key_field: str,
        partition_field: str | None = None,
        precombine_field: str | None = None,
        kafka_metadata: bool = False,
    ) -> TableSchema:
        """Parse ``ddl`` and check that the key fields are columns of it. Plain arguments,
        so the schema knows nothing of the config (``TableConfig.table_schema`` calls this);
        errors name the ``table.*`` key at fault. ``record_key_field`` may list several
        fields (``a,b``), each checked."""
        try:
            key_fields = split_key_fields(record_key_field)
        except ValueError as exc:
            raise SchemaError(str(exc), "table.record_key_field") from None
        columns = tuple(parse_ddl(ddl))
        names = {c.name for c in columns}
        if kafka_metadata:
            taken = sorted(names & {c.name for c in KAFKA_METADATA})
            if taken:
                raise SchemaError(f"column(s) {taken} are the Kafka metadata columns of "
                                  "table.kafka_metadata: rename them", "table.schema")
            columns += KAFKA_METADATA
        for key, field in (*(("table.record_key_field", name) for name in key_fields),
                           ("table.partition_field", partition_field),
                           ("table.precombine_field", precombine_field)):
            if field is not None and field not in names:
                label = key.removeprefix("table.").removesuffix("_field").replace("_", " ")
                raise SchemaError(f"{label} field {field!r} is not a column of table.schema", key)
            nested = (ColumnKind.ARRAY, ColumnKind.MAP, ColumnKind.STRUCT)
            if field is not None and next(c for c in columns if c.name == field).kind in nested:
                raise SchemaError(f"{field!r} is nested (ARRAY, MAP, STRUCT): it cannot be a key "
                                  "field", key)
        return cls(columns, ",".join(key_fields), partition_field, table_name, kafka_metadata)

    @property
    def record_key_fields(self) -> tuple[str, ...]:
        """The record key's fields, in key order (one for a simple key)."""
        return tuple(self.record_key_field.split(","))

    @property
    def value_columns(self) -> tuple[Column, ...]:
        """The columns a record's value holds: all but the Kafka metadata columns."""
        return self.columns[:-len(KAFKA_METADATA)] if self.kafka_metadata else self.columns

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)

    @property
    def data_arrow_schema(self) -> pa.Schema:
        """Arrow schema of the data columns (no meta columns)."""
        return pa.schema([pa.field(c.name, c.arrow_type, nullable=True) for c in self.columns])

    @property
    def file_arrow_schema(self) -> pa.Schema:
        """Arrow schema of a base file: the five meta columns, then the data columns."""
        meta = [pa.field(name, pa.string(), nullable=True) for name in META_COLUMNS]
        return pa.schema(meta + list(self.data_arrow_schema))

    @property
    def avro_record_name(self) -> str:
        safe = re.sub(r"[^A-Za-z0-9_]", "_", self.table_name)
        return f"{safe}_record"

    def avro_schema(self) -> dict[str, Any]:
        """Avro writer schema without meta columns, nullable unions (Hudi's convention)."""
        fields = [
            {"name": c.name, "type": ["null", c.avro_type(f"{self.avro_record_name}_{c.name}")],
             "default": None}
            for c in self.columns
        ]
        return {
            "type": "record",
            "name": self.avro_record_name,
            "namespace": f"hoodie.{re.sub(r'[^A-Za-z0-9_]', '_', self.table_name)}",
            "fields": fields,
        }

    def avro_schema_json(self) -> str:
        return orjson.dumps(self.avro_schema()).decode()
