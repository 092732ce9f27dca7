"""A Kafka Connect JSON envelope's schema as columns: what schema evolution compares with the
table when the table follows its producers (``table.schema_source: registry``) and values are
``connect_json``.

Connect's types map onto the column types as its ``JsonConverter`` writes them: ``int8`` to
``int32`` are INT (``Date`` is DATE), ``int64`` is BIGINT (``Timestamp`` is TIMESTAMP),
``float32``/``float64`` FLOAT/DOUBLE, ``boolean``, ``string``, ``Decimal`` is DECIMAL (its
``connect.decimal.precision`` parameter, else 38, and its ``scale``), ``array``, ``map`` with
string keys, ``struct``. ``optional`` makes a top-level column nullable. A field of another
type (plain ``bytes``, a map with other keys) maps onto no column and is left to the table's
rules for unknown fields.
"""

from __future__ import annotations

from typing import Any

from hudi_sink.shared.errors import HudiSinkError
from hudi_sink.shared.schema.table_schema import Column, parse_ddl

__all__ = ["connect_columns"]

_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_DATE = "org.apache.kafka.connect.data.Date"
_TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
_SCALAR = {"int8": "INT", "int16": "INT", "int32": "INT", "int64": "BIGINT", "float": "FLOAT",
           "float32": "FLOAT", "double": "DOUBLE", "float64": "DOUBLE", "boolean": "BOOLEAN",
           "string": "STRING"}
_MAX_DEPTH = 64


def _type(schema: Any, depth: int = 0) -> str:
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        raise ValueError("not a Connect schema")
    name, kind = schema.get("name"), schema.get("type")
    if name == _DECIMAL:
        params = schema.get("parameters") or {}
        precision = int(params.get("connect.decimal.precision", 38))
        return f"DECIMAL({precision}, {int(params.get('scale', 0))})"
    if name == _DATE:
        return "DATE"
    if name == _TIMESTAMP:
        return "TIMESTAMP"
    if kind in _SCALAR:
        return _SCALAR[kind]
    if kind == "array":
        return f"ARRAY<{_type(schema.get('items'), depth + 1)}>"
    if kind == "map":
        if _type(schema.get("keys"), depth + 1) != "STRING":
            raise ValueError("map keys are not strings")
        return f"MAP<STRING, {_type(schema.get('values'), depth + 1)}>"
    if kind == "struct":
        return "STRUCT<" + ", ".join(f"{f['field']}: {_type(f, depth + 1)}"
                                     for f in schema.get("fields") or ()) + ">"
    raise ValueError(f"Connect type {kind!r} has no column type")


def connect_columns(schema: Any) -> tuple[list[Column], list[str]]:
    """The struct ``schema``'s fields as columns, and the names of those no column can hold."""
    columns: list[Column] = []
    unmapped: list[str] = []
    fields = schema.get("fields") if isinstance(schema, dict) else None
    for field in fields if isinstance(fields, list) else ():
        try:
            required = "" if field.get("optional") else " NOT NULL"
            columns.extend(parse_ddl(f"{field['field']} {_type(field)}{required}"))
        except (ValueError, KeyError, TypeError, AttributeError, HudiSinkError):
            unmapped.append(str(field.get("field")) if isinstance(field, dict) else "?")
    return columns, unmapped
