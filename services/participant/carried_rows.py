"""The rows a new file slice carries over from the slice it is written over, in Spark.

A new slice (write-time file sizing, or an upsert merge) holds its group's old rows, less the
keys the merge updates or deletes, plus the flush's rows. The old rows are read by Spark from
the old file and never pass through Python: meta columns kept (``_hoodie_commit_time`` and
``_hoodie_commit_seqno`` of the commit that wrote them), ``_hoodie_file_name`` naming the new
file, each column cast to the flush's type so Arrow's and Parquet's readings of one table
schema union exactly (a column or struct field the table gained since the old slice was
written, by schema evolution, is null in its rows; a widened one is cast). A slice whose every
row is gone is an empty base file (readers then read no row of the group; hudi-rs and Hudi's
Java reader both do).
"""

from __future__ import annotations

import posixpath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hudi_sink.services.participant.packing import Carry
from hudi_sink.shared.storage.fs import FileSystem

__all__ = ["with_carried_rows", "write_empty_slice", "CarriedFile", "FILE_NAME_COLUMN"]

FILE_NAME_COLUMN = "_hoodie_file_name"
KEY_COLUMN = "_hoodie_record_key"
ISIN_MAX_KEYS = 2000
"""Up to this many keys to leave out are a literal ``isin`` filter; more are an anti-join
with a broadcast table of the keys (a long literal list makes a slow plan)."""

CarriedFile = tuple[int, str, Carry]
"""(``__hs_part`` index, the new file's name, the slice it carries rows from)."""


def with_carried_rows(session: Any, table: pa.Table, carried: list[CarriedFile],
                      part_column: str) -> Any:
    """A DataFrame of ``table`` (may be empty) plus every carried slice's remaining rows."""
    base = session.createDataFrame(table) if table.num_rows else None
    types = {f.name: f.dataType for f in base.schema.fields} if base is not None else {}
    frames = [] if base is None else [base]
    from pyspark.sql import functions as func

    for index, file_name, carry in carried:
        if carry.rows == 0:
            continue  # nothing left of it (an empty slice is written apart)
        old = _without_keys(session, session.read.parquet(carry.source_path), carry.drop_keys)
        present = {f.name: f.dataType for f in old.schema.fields}
        columns = []
        for name in table.column_names:
            kind = types.get(name)
            if name == FILE_NAME_COLUMN:
                value = func.lit(file_name)
            elif name == part_column:
                value = func.lit(index).cast("int")
            elif name not in present:  # a column added since the slice was written: null
                value = func.lit(None)
            elif kind is not None:
                columns.append(_conformed(func.col(f"`{name}`"), present[name], kind).alias(name))
                continue
            else:
                value = func.col(f"`{name}`")
            columns.append((value.cast(kind) if kind is not None else value).alias(name))
        frames.append(old.select(*columns))
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    return frame


def _conformed(value: Any, source: Any, target: Any) -> Any:
    """``value`` (of Spark type ``source``) as ``target``: a plain cast, except that a struct
    gaining fields (schema evolution) is rebuilt with nulls in them, at any depth (Spark does
    not cast between structs of different field counts); a null struct stays null."""
    from pyspark.sql import functions as func
    from pyspark.sql import types as spark

    if isinstance(target, spark.StructType) and isinstance(source, spark.StructType):
        theirs = {f.name: f.dataType for f in source.fields}
        fields = [(_conformed(value.getField(f.name), theirs[f.name], f.dataType)
                   if f.name in theirs else func.lit(None).cast(f.dataType)).alias(f.name)
                  for f in target.fields]
        return func.when(value.isNull(), func.lit(None).cast(target)).otherwise(func.struct(*fields))
    if isinstance(target, spark.ArrayType) and isinstance(source, spark.ArrayType):
        return func.transform(value, lambda item: _conformed(item, source.elementType,
                                                             target.elementType))
    if isinstance(target, spark.MapType) and isinstance(source, spark.MapType):
        return func.transform_values(value, lambda _key, item: _conformed(
            item, source.valueType, target.valueType))
    return value.cast(target)


def _without_keys(session: Any, frame: Any, keys: frozenset[str]) -> Any:
    if not keys:
        return frame
    from pyspark.sql import functions as func

    if len(keys) <= ISIN_MAX_KEYS:
        return frame.filter(~func.col(KEY_COLUMN).isin(sorted(keys)))
    dropped = session.createDataFrame([(key,) for key in sorted(keys)], f"{KEY_COLUMN} string")
    return frame.join(func.broadcast(dropped), on=KEY_COLUMN, how="left_anti")


def write_empty_slice(fs: FileSystem, path: str, schema: pa.Schema, part_column: str) -> int:
    """A base file with no rows (every row of the group deleted); returns its size."""
    fields = [f for f in schema if f.name != part_column]
    sink = pa.BufferOutputStream()
    pq.write_table(pa.schema(fields).empty_table(), sink)
    data = sink.getvalue().to_pybytes()
    fs.makedirs(posixpath.dirname(path))
    fs.write_atomic(path, data)
    return len(data)
