"""The table schema from an Avro schema instead of a DDL string (seed ``schemaprovider.class``).

``table.schema`` may name its source instead of listing columns:

- ``avsc:/path/to/order.avsc`` — an Avro schema file (Hudi's ``FilebasedSchemaProvider``);
- ``registry:<url>`` — a schema registry's ``GET`` answering ``{"schema": "…"}``, typically
  ``http://registry:8081/subjects/orders-value/versions/latest`` (Hudi's
  ``SchemaRegistryProvider``), with ``avro.registry_*`` credentials and CA bundle.

It is read once, when the config is loaded, and turned into the equivalent DDL: a record's
fields become columns (``["null", t]`` nullable, anything else ``NOT NULL``); ``int``/``long``/
``float``/``double``/``boolean``/``string`` map to INT/BIGINT/FLOAT/DOUBLE/BOOLEAN/STRING,
``timestamp-millis``/``-micros`` to TIMESTAMP, ``date`` to DATE, ``decimal`` to DECIMAL(p, s),
``uuid`` and enums to STRING, arrays, maps and records to ARRAY, MAP<STRING, …>, STRUCT.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any, Protocol

from hudi_sink.shared.config.sections import AvroConfig
from hudi_sink.shared.errors import ConfigError, HudiSinkError
from hudi_sink.shared.schema.registry import fetch_json
from hudi_sink.shared.schema.table_schema import Column, parse_ddl

__all__ = ["avro_to_ddl", "avro_columns", "resolve_schema_source", "resolve_table_schema",
           "subject_ddl", "SOURCES"]

SOURCES = ("avsc:", "registry:")

_PRIMITIVE = {"int": "INT", "long": "BIGINT", "float": "FLOAT", "double": "DOUBLE",
              "boolean": "BOOLEAN", "string": "STRING"}
_LOGICAL = {"timestamp-millis": "TIMESTAMP", "timestamp-micros": "TIMESTAMP", "date": "DATE",
            "uuid": "STRING"}


def _type(avro: Any) -> tuple[str, bool]:
    """(DDL type, nullable) of one Avro type."""
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1:
            raise ValueError(f"union {avro} (only [\"null\", type] unions map onto a column)")
        return _type(branches[0])[0], "null" in avro
    if isinstance(avro, str):
        if avro not in _PRIMITIVE:
            raise ValueError(f"Avro type {avro!r} has no column type")
        return _PRIMITIVE[avro], False
    logical = avro.get("logicalType")
    if logical == "decimal":
        return f"DECIMAL({avro['precision']}, {avro.get('scale', 0)})", False
    if logical in _LOGICAL:
        return _LOGICAL[logical], False
    kind = avro.get("type")
    if kind == "enum":
        return "STRING", False
    if kind == "array":
        return f"ARRAY<{_type(avro['items'])[0]}>", False
    if kind == "map":
        return f"MAP<STRING, {_type(avro['values'])[0]}>", False
    if kind == "record":
        return "STRUCT<" + ", ".join(f"{f['name']}: {_type(f['type'])[0]}"
                                     for f in avro["fields"]) + ">", False
    return _type(kind)


def avro_to_ddl(schema: dict[str, Any]) -> str:
    """The DDL of an Avro record schema's fields."""
    if schema.get("type") != "record":
        raise ValueError("the Avro schema is not a record")
    columns = []
    for field in schema["fields"]:
        ddl, nullable = _type(field["type"])
        columns.append(f"{field['name']} {ddl}{'' if nullable else ' NOT NULL'}")
    return ", ".join(columns)


def avro_columns(schema: dict[str, Any]) -> tuple[list[Column], list[str]]:
    """A writer schema's fields as columns, and the names of the fields no column can hold
    (a ``bytes`` field, a union of several types, a name no column may have): what schema
    evolution compares with the table (``shared.schema.evolution``)."""
    columns: list[Column] = []
    unmapped: list[str] = []
    for field in schema.get("fields") or ():
        try:
            ddl, nullable = _type(field["type"])
            columns.extend(parse_ddl(f"{field['name']} {ddl}{'' if nullable else ' NOT NULL'}"))
        except (ValueError, KeyError, TypeError, HudiSinkError):
            unmapped.append(str(field.get("name")) if isinstance(field, dict) else "?")
    return columns, unmapped


def resolve_schema_source(schema: str, avro: AvroConfig, base_dir: Path) -> str:
    """``schema`` itself when it is DDL, else the DDL of the Avro schema it names."""
    try:
        if schema.startswith("avsc:"):
            path = Path(schema.removeprefix("avsc:"))
            return avro_to_ddl(json.loads((base_dir / path).read_text(encoding="utf-8")))
        if schema.startswith("registry:"):
            answer = fetch_json(schema.removeprefix("registry:"), avro)
            return avro_to_ddl(json.loads(answer["schema"]))
    except (OSError, ValueError, KeyError, TypeError, HudiSinkError) as exc:
        raise ConfigError(f"cannot read the table's Avro schema from {schema!r}: {exc}",
                          "table.schema") from None
    return schema


def subject_ddl(avro: AvroConfig, subject: str) -> str:
    """The DDL of the latest version of ``subject`` (``table.schema_source: registry``):
    ``GET {avro.registry_url}/subjects/{subject}/versions/latest``."""
    if avro.registry_url is None:
        raise ConfigError("table.schema_source: registry needs avro.registry_url", "avro.registry_url")
    url = f"{avro.registry_url.rstrip('/')}/subjects/{urllib.parse.quote(subject, safe='')}/versions/latest"
    try:
        return avro_to_ddl(json.loads(fetch_json(url, avro)["schema"]))
    except (ValueError, KeyError, TypeError, HudiSinkError) as exc:
        raise ConfigError(f"cannot read the table's schema from subject {subject!r} ({url}): "
                          f"{exc}", "table.schema_source") from None


class _Table(Protocol):
    @property
    def schema_ddl(self) -> str: ...
    @property
    def schema_source(self) -> str: ...


class _Kafka(Protocol):
    @property
    def value_format(self) -> str: ...
    @property
    def envelope(self) -> str: ...
    @property
    def topics(self) -> list[str]: ...


def resolve_table_schema(table: _Table, kafka: _Kafka, avro: AvroConfig, base_dir: Path) -> str:
    """The DDL of the table schema the config describes, read once at load: ``table.schema``
    itself, the Avro schema it names (``avsc:``, ``registry:``), or with
    ``table.schema_source: registry`` and Avro values the latest version of the value subject
    (``avro.subject``, default ``<first topic>-value``). ``registry`` with values that carry
    no row writer schema to follow (plain JSON, a change-event envelope) is a ConfigError."""
    if table.schema_source == "registry" and (kafka.value_format == "json" or kafka.envelope != "none"):
        raise ConfigError("registry: the table follows the writer schemas of Avro or Connect-JSON "
                          "values (kafka.value_format avro or connect_json, kafka.envelope none); "
                          "plain JSON and change-event envelopes keep table.schema (ddl)",
                          "table.schema_source")
    if table.schema_source == "registry" and kafka.value_format == "avro":
        return subject_ddl(avro, avro.subject or f"{kafka.topics[0]}-value")
    return resolve_schema_source(table.schema_ddl, avro, base_dir)
