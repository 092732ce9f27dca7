"""Schema evolution: which writer schemas a table may follow, and the table schema that results.

The table follows its producers (``table.schema_source: registry``, or a changed
``table.schema``) only by changes no reader can misread, applied at an instant boundary:

- a field the table does not have becomes a new nullable column (top level and inside a
  STRUCT, at any depth);
- ``INT → BIGINT``, ``FLOAT → DOUBLE``, a DECIMAL's precision widened at the same scale;
- a required (NOT NULL) column becoming optional;
- a field the writer no longer has keeps its column (its rows get nulls) — unless the column
  is NOT NULL: such records could not be written (a rename reads as drop + add).

Everything else (``STRING → INT``, a narrowing, another scale) is refused with
:class:`IncompatibleChange`, which names the field and both types. Files written before a
change lack the new column and hold the narrower type; Hudi's readers and hudi-rs read nulls
and widen there, so existing files are never rewritten.

A narrower writer type than the column (``INT`` values into a BIGINT column, ``FLOAT`` or
``INT`` into DOUBLE, a smaller DECIMAL precision at the same scale) fits as it is: nothing
changes. Pure functions: the coordinator merges, participants classify, both by these rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from hudi_sink.shared.errors import HudiSinkError
from hudi_sink.shared.schema.table_schema import Column, ColumnKind

__all__ = ["Evolution", "IncompatibleChange", "evolve", "column_type_ddl", "columns_ddl",
           "DDL_KEY", "CHANGES_KEY", "ALLOWED"]

ALLOWED = ("new nullable fields, INT -> BIGINT, FLOAT -> DOUBLE, a wider DECIMAL precision at the "
           "same scale, required -> optional")
"""The allowed changes, as error messages name them."""

DDL_KEY = "hudi.sink.schema.ddl"
"""A commit's ``extraMetadata``: the table schema's value columns in ``table.schema`` syntax
(beside ``schema``, the Avro form Hudi's readers take; this one keeps NOT NULL)."""
CHANGES_KEY = "hudi.sink.schema.changes"
"""A commit's ``extraMetadata``: the schema changes it made (``; ``-separated), if any."""

_WIDENED = {(ColumnKind.INT, ColumnKind.BIGINT), (ColumnKind.FLOAT, ColumnKind.DOUBLE)}
"""(table kind, writer kind) pairs the column widens to the writer's kind."""
_FITS = {(ColumnKind.BIGINT, ColumnKind.INT), (ColumnKind.DOUBLE, ColumnKind.FLOAT),
         (ColumnKind.DOUBLE, ColumnKind.INT)}
"""(table kind, writer kind) pairs whose values the column already takes (no change)."""


class IncompatibleChange(HudiSinkError):
    """A writer schema changes a column in a way the table cannot follow."""

    def __init__(self, field: str, table_type: str, writer_type: str) -> None:
        self.field, self.table_type, self.writer_type = field, table_type, writer_type
        super().__init__(f"field {field!r} is {writer_type} in the writer schema but "
                         f"{table_type} in the table: not an allowed change ({ALLOWED})")


@dataclass(frozen=True)
class Evolution:
    """The table's value columns after following a writer schema, and what changed."""

    columns: tuple[Column, ...]
    changes: tuple[str, ...]
    """One line per change, e.g. ``added coupon STRING``, ``widened qty INT -> BIGINT``."""


def column_type_ddl(column: Column) -> str:
    """The DDL of a column's type (``table.schema`` syntax, without NOT NULL)."""
    kind = column.kind
    if kind is ColumnKind.DECIMAL:
        return f"DECIMAL({column.precision}, {column.scale})"
    if kind is ColumnKind.ARRAY:
        return f"ARRAY<{column_type_ddl(column.children[0])}>"
    if kind is ColumnKind.MAP:
        return f"MAP<STRING, {column_type_ddl(column.children[0])}>"
    if kind is ColumnKind.STRUCT:
        return "STRUCT<" + ", ".join(f"{c.name}: {column_type_ddl(c)}" for c in column.children) + ">"
    return kind.value


def columns_ddl(columns: Iterable[Column]) -> str:
    """``table.schema`` text of top-level columns: parsing it gives the same columns back."""
    return ", ".join(f"{c.name} {column_type_ddl(c)}{'' if c.nullable else ' NOT NULL'}"
                     for c in columns)


def evolve(table: Sequence[Column], writer: Sequence[Column]) -> Evolution:
    """The table's columns following ``writer``'s; raises :class:`IncompatibleChange`.

    Column order is kept, new columns come last in the writer's order."""
    changes: list[str] = []
    by_name = {c.name: c for c in writer}
    merged = []
    for column in table:
        theirs = by_name.get(column.name)
        if theirs is None:
            if not column.nullable:
                raise IncompatibleChange(column.name, f"{column_type_ddl(column)} NOT NULL",
                                         "missing")
            merged.append(column)
        else:
            merged.append(_merge(column.name, column, theirs, changes))
    known = {c.name for c in table}
    for column in writer:
        if column.name not in known:
            merged.append(_added(column.name, column, changes))
    return Evolution(tuple(merged), tuple(changes))


def _added(path: str, column: Column, changes: list[str]) -> Column:
    changes.append(f"added {path} {column_type_ddl(column)}")
    return replace(column, nullable=True)


def _merge(path: str, ours: Column, theirs: Column, changes: list[str]) -> Column:
    result = _merge_type(path, ours, theirs, changes)
    if not ours.nullable and theirs.nullable:
        changes.append(f"made {path} optional")
        result = replace(result, nullable=True)
    return result


def _merge_type(path: str, ours: Column, theirs: Column, changes: list[str]) -> Column:
    pair = (ours.kind, theirs.kind)
    if pair in _FITS:
        return ours
    if pair in _WIDENED:
        changes.append(f"widened {path} {ours.kind.value} -> {theirs.kind.value}")
        return replace(ours, kind=theirs.kind)
    if ours.kind is not theirs.kind:
        raise IncompatibleChange(path, column_type_ddl(ours), column_type_ddl(theirs))
    if ours.kind is ColumnKind.DECIMAL:
        if ours.scale != theirs.scale:
            raise IncompatibleChange(path, column_type_ddl(ours), column_type_ddl(theirs))
        if theirs.precision > ours.precision:
            changes.append(f"widened {path} {column_type_ddl(ours)} -> {column_type_ddl(theirs)}")
            return replace(ours, precision=theirs.precision)
        return ours
    if ours.kind in (ColumnKind.ARRAY, ColumnKind.MAP):
        inner = "[]" if ours.kind is ColumnKind.ARRAY else "{}"
        child = _merge(f"{path}{inner}", ours.children[0], theirs.children[0], changes)
        return replace(ours, children=(child,))
    if ours.kind is ColumnKind.STRUCT:
        mine = {c.name for c in ours.children}
        by_name = {c.name: c for c in theirs.children}
        children = [_merge(f"{path}.{c.name}", c, by_name[c.name], changes) if c.name in by_name
                    else c for c in ours.children]
        children += [_added(f"{path}.{c.name}", c, changes) for c in theirs.children
                     if c.name not in mine]
        return replace(ours, children=tuple(children))
    return ours
