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

How the job is shaped, and why. Every planned file must come out of exactly one Spark task
(one file per ``__hs_part`` directory), so the planned files are dealt into a few buckets of
about equal rows (:func:`deal_buckets`), and each bucket is one task: its new rows and its old
slices, ``coalesce(1)``; the buckets' union runs them side by side on the driver's cores. A
bucket reads its old slices in **one** scan per file schema (schema evolution: slices written
before a change need their own casts), learns each row's slice from Spark's ``_metadata``
column, and leaves the dropped keys out with one anti-join on (slice, key). The first version
read every slice in a scan of its own and left keys out with a literal ``isin`` per slice: a
plan of a hundred branches that Spark analysed, optimised and compiled one by one, and one task
for the whole job. Measured on a full-table merge here (1M rows of 1 KB in 100 slices, 600 keys
replaced in each; 2 cores, warm JVM): 59-75 s before, 9-11 s after.
"""

from __future__ import annotations

import heapq
import posixpath
import re
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hudi_sink.services.participant.packing import Carry
from hudi_sink.shared.storage.fs import FileSystem

__all__ = ["frame_with_carried_rows", "deal_buckets", "write_empty_slices", "CarriedFile",
           "FILE_NAME_COLUMN", "StagedInputs"]

FILE_NAME_COLUMN = "_hoodie_file_name"
KEY_COLUMN = "_hoodie_record_key"
SOURCE_COLUMN = "__hs_source"
"""The old slice a carried row was read from (its file name), while the job is planned."""

ROWS_PER_TASK = 200_000
"""A job carrying fewer rows than this per bucket gets fewer buckets: every bucket costs its
own scan, drop table and broadcast (measured on 12 slices of 10,000 rows, warm JVM: 1 task
1.5 s and 2.0 CPU-s, 2 tasks 1.8 s and 2.4 CPU-s, 4 tasks 2.4-3.2 s and 3.4-5 CPU-s), and the
process's other Spark slot keeps the second core busy with another flush."""

CarriedFile = tuple[int, str, Carry]
"""(``__hs_part`` index, the new file's name, the slice it carries rows from)."""


class StagedInputs:
    """Arrow tables a job reads, written as Parquet files into one directory of the table's
    storage (beside the job's output, so a Spark Connect server reads them as it writes
    there).

    Why not ``createDataFrame``: classic PySpark turns an Arrow table into a local relation,
    every row an ``UnsafeRow`` held in the plan. Measured on a full-table merge (1M rows of
    1 KB, 64 slices, 166k new rows and as many dropped keys; 2 cores, warm JVM): the driver
    spent 2.5-3 s of each 7-8 s merge before any task ran, mostly in analyser rules walking
    the relation's rows (``QueryPlan.mapExpressions`` over its data), and the rows stay in
    the driver's heap until the job ends (780k of them, about 1 GB, in the upsert bench's
    keyed insert phase). A Parquet file is read by tasks, like the old slices beside it."""

    def __init__(self, fs: FileSystem, directory: str) -> None:
        self._fs = fs
        self.directory = directory

    def read(self, session: Any, table: pa.Table) -> Any:
        """``table`` written as a new Parquet file in the directory, as a DataFrame reading
        it. Written for one read: no dictionaries or statistics (nothing is looked up in it).
        Read with the proleptic calendar whatever the session's rebase setting: the file
        says no Spark version, so an operator's ``datetimeRebaseModeInRead=LEGACY`` would
        shift dates before 1582 and timestamps before 1900 (``EXCEPTION`` would fail every
        flush holding one); ``createDataFrame`` never rebased.

        Written without the table's schema metadata: Spark reads a file by the schema its
        ``org.apache.spark.sql.parquet.row.metadata`` entry gives, so rows taken from a
        Spark-written footer (whose entry lacks ``__hs_part``) would be read with a null file
        index, and a column that entry types otherwise would be misread."""
        sink = pa.BufferOutputStream()
        pq.write_table(table.replace_schema_metadata(None), sink, compression="lz4",
                       use_dictionary=False, write_statistics=False)
        path = posixpath.join(self.directory, f"{uuid.uuid4().hex}.parquet")
        self._fs.makedirs(self.directory)
        self._fs.write_atomic(path, sink.getvalue().to_pybytes())
        return session.read.option("datetimeRebaseMode", "CORRECTED").parquet(path)


def deal_buckets(weights: dict[int, int], buckets: int) -> list[list[int]]:
    """Planned file indices dealt into at most ``buckets`` non-empty lists of about equal
    total weight (rows): the heaviest file first, each to the lightest bucket so far. A file
    is never split: its rows must come out of one task."""
    heap = [(0, n) for n in range(max(1, min(buckets, len(weights))))]
    dealt: list[list[int]] = [[] for _ in heap]
    for index in sorted(weights, key=lambda i: (-weights[i], i)):
        load, n = heapq.heappop(heap)
        dealt[n].append(index)
        heapq.heappush(heap, (load + weights[index], n))
    return [sorted(bucket) for bucket in dealt if bucket]


def frame_with_carried_rows(session: Any, table: pa.Table, carried: list[CarriedFile],
                            part_column: str, *, new_rows: dict[int, int], buckets: int,
                            schema_of: Callable[[str], pa.Schema], inputs: StagedInputs) -> Any:
    """A DataFrame of ``table`` (may be empty) plus every carried slice's remaining rows,
    each planned file's rows in one partition (see the module doc). ``new_rows``: the rows
    ``table`` holds per ``part_column`` index; ``schema_of`` reads an old slice's file schema
    (its footer); ``inputs`` writes the flush's rows and dropped keys where Spark reads them
    (the caller deletes them once the job has run)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    types = {f.name: f.dataType for f in from_arrow_schema(table.schema,
                                                           prefer_timestamp_ntz=False).fields}
    live = [c for c in carried if c[2].rows > 0]  # an empty slice is written apart
    weights = dict(new_rows)
    for index, _, carry in live:
        weights[index] = weights.get(index, 0) + carry.rows
    by_index = {c[0]: c for c in live}
    buckets = min(buckets, -(-sum(weights.values()) // ROWS_PER_TASK))
    frames = []
    for bucket in deal_buckets(weights, buckets):
        parts: list[Any] = []
        mine = [i for i in bucket if new_rows.get(i)]
        if mine:
            rows = table.filter(pc.is_in(table.column(part_column), pa.array(mine, pa.int32())))
            # As the flush's Spark types: a Parquet file cannot say every one of them (a
            # column is read as nullable, for one).
            parts.append(_projected(inputs.read(session, rows), table.column_names, types, {}))
        old = [by_index[i] for i in bucket if i in by_index]
        for scan in _scans(old, schema_of):
            parts.append(_carried_scan(session, scan, table.column_names, types, part_column,
                                       inputs))
        frame = parts[0]
        for other in parts[1:]:
            frame = frame.unionByName(other)
        frames.append(frame.coalesce(1))
    if not frames:  # nothing carried and no new rows (the writer returns before this)
        return session.createDataFrame(table).coalesce(1)
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.union(other)
    return frame


def _scans(carried: list[CarriedFile], schema_of: Callable[[str], pa.Schema]
           ) -> Iterable[list[CarriedFile]]:
    """Slices read together: one file schema, distinct file names (a row's slice is known by
    its file name alone)."""
    groups: list[tuple[pa.Schema, list[CarriedFile]]] = []
    for item in carried:
        schema = schema_of(item[2].source_path).remove_metadata()
        name = posixpath.basename(item[2].source_path)
        for known, members in groups:
            if known.equals(schema) and all(posixpath.basename(m[2].source_path) != name
                                            for m in members):
                members.append(item)
                break
        else:
            groups.append((schema, [item]))
    return [members for _, members in groups]


def _carried_scan(session: Any, scan: list[CarriedFile], columns: list[str],
                  types: dict[str, Any], part_column: str, inputs: StagedInputs) -> Any:
    """One scan of slices of one schema: their rows less the dropped keys, conformed to the
    flush's columns, each naming its new file and ``__hs_part``.

    Built in few py4j calls: classic PySpark makes a socket round trip of every DataFrame
    call, and each must take the GIL back on its way (up to Python's 5 ms switch interval
    while another thread decodes or plans). So the projection is SQL text given in one
    ``selectExpr``: a column the slice already holds as the flush types it is taken as is (a
    cast to its own type changes nothing), the slice lookups are one SQL map each (Columns for
    a name SQL would have to escape), and only a column whose type changed is cast (a nested
    type that gained fields is rebuilt by :func:`_conformed`, as Columns). Before, every column
    was cast and every map entry was a literal, each a Column of its own (each ``functions``
    call is several round trips): 771 calls to build a 9-slice job of a 10-column table, 164
    now. Measured with one CPU-bound Python thread beside it: 4.9-5.4 s to build before,
    2.4-3.0 s now (0.23-0.25 s alone, either way). On the upsert bench the p99 stayed within
    its run-to-run spread (35-44 s over three runs, against 33-35 s without this)."""
    from pyspark.sql import functions as func

    read = session.read.parquet(*[carry.source_path for _, _, carry in scan])
    source = read.metadataColumn("_metadata").getField("file_name")
    old = read.select("*", source.alias(SOURCE_COLUMN))
    dropped = [(posixpath.basename(carry.source_path), key)
               for _, _, carry in scan for key in carry.drop_keys]
    if dropped:
        names, keys = zip(*dropped, strict=True)
        drop = inputs.read(session, pa.table({SOURCE_COLUMN: pa.array(names, pa.string()),
                                              KEY_COLUMN: pa.array(keys, pa.string())}))
        old = old.join(func.broadcast(drop), on=[SOURCE_COLUMN, KEY_COLUMN], how="left_anti")
    by_name = {posixpath.basename(carry.source_path): (index, file_name)
               for index, file_name, carry in scan}
    lookups = {name: _slice_lookup({source: entry[0 if name == part_column else 1]
                                    for source, entry in by_name.items()}, name, types.get(name))
               for name in (FILE_NAME_COLUMN, part_column)}
    return _projected(old, columns, types, lookups)


def _slice_lookup(mapping: dict[str, str | int], name: str, kind: Any) -> Any:
    """The value of ``name`` for a carried row, looked up by the row's old slice: SQL text,
    or a Column for names SQL text would have to escape."""
    from pyspark.sql import functions as func

    lookup = _by_source(mapping)
    if lookup is None:
        value = func.create_map(*[func.lit(v) for pair in mapping.items()
                                  for v in pair])[func.col(SOURCE_COLUMN)]
        return (value.cast(kind) if kind is not None else value).alias(name)
    typed = f"CAST({lookup} AS {_sql_type(kind)})" if kind is not None else lookup
    return f"{typed} AS {_quoted(name)}"


def _projected(frame: Any, columns: list[str], types: dict[str, Any],
               lookups: dict[str, Any]) -> Any:
    """``frame`` as the flush's ``columns`` of their Spark ``types``: a column in ``lookups``
    as given there; one ``frame`` lacks (added to the table since) as null; one of another
    type cast; the rest taken as they are. SQL text in one ``selectExpr`` where it can say
    it (see :func:`_carried_scan`)."""
    from pyspark.sql import functions as func
    from pyspark.sql import types as spark

    present = {f.name: f.dataType for f in frame.schema.fields}
    selected: list[Any] = []  # SQL text, or a Column where SQL cannot say it
    for name in columns:
        kind = types.get(name)
        nested = isinstance(kind, (spark.StructType, spark.ArrayType, spark.MapType))
        if name in lookups:
            selected.append(lookups[name])
        elif name not in present:  # a column added since the slice was written: null
            if kind is None:
                selected.append(f"NULL AS {_quoted(name)}")
            elif nested:  # a struct's field names need not be SQL identifiers
                selected.append(func.lit(None).cast(kind).alias(name))
            else:
                selected.append(f"CAST(NULL AS {_sql_type(kind)}) AS {_quoted(name)}")
        elif kind is None or present[name] == kind:
            selected.append(_quoted(name))
        elif not nested:
            selected.append(f"CAST({_quoted(name)} AS {_sql_type(kind)}) AS {_quoted(name)}")
        else:
            selected.append(_conformed(func.col(_quoted(name)), present[name], kind).alias(name))
    if all(isinstance(item, str) for item in selected):
        return frame.selectExpr(*selected)
    return frame.select(*[func.expr(item) if isinstance(item, str) else item for item in selected])


def _quoted(name: str) -> str:
    """A column name in Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


def _sql_type(kind: Any) -> str:
    """A plain Spark type in SQL whatever the session's parser settings: ``timestamp`` alone
    means ``spark.sql.timestampType``, which an operator's spark.conf may set to NTZ."""
    from pyspark.sql import types as spark

    return "timestamp_ltz" if isinstance(kind, spark.TimestampType) else str(kind.simpleString())


_PLAIN_NAME = re.compile(r"[A-Za-z0-9._-]+")
"""File names given to SQL as literals: the sink's own names, which need no escaping (how a
backslash in a literal reads depends on ``spark.sql.parser.escapedStringLiterals``)."""


def _by_source(values: dict[str, str | int]) -> str | None:
    """SQL for the value a row's old slice (its file name in ``SOURCE_COLUMN``) maps to; None
    when a name is not plain (:data:`_PLAIN_NAME`)."""
    texts = [name for pair in values.items() for name in pair if isinstance(name, str)]
    if not all(_PLAIN_NAME.fullmatch(text) for text in texts):
        return None
    pairs = ", ".join(f"{_literal(source)}, {_literal(value)}" for source, value in values.items())
    return f"map({pairs})[{_quoted(SOURCE_COLUMN)}]"


def _literal(value: str | int) -> str:
    """A plain name (:data:`_PLAIN_NAME`) or an integer in Spark SQL."""
    return str(value) if isinstance(value, int) else f"'{value}'"


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


EMPTY_SLICE_THREADS = 8


def write_empty_slices(fs: FileSystem, paths: list[str], schema: pa.Schema,
                       part_column: str) -> int:
    """Base files with no rows at ``paths`` (every row of the group deleted); returns the size
    of each (they are the same bytes). Written side by side: each is a durable write (two
    fsyncs, about 4 ms here; a PUT on an object store), and a flush deleting many groups
    whole would otherwise write them one after the other."""
    fields = [f for f in schema if f.name != part_column]
    sink = pa.BufferOutputStream()
    pq.write_table(pa.schema(fields).empty_table(), sink)
    data = sink.getvalue().to_pybytes()

    def write(path: str) -> None:
        fs.makedirs(posixpath.dirname(path))
        fs.write_atomic(path, data)

    if paths:
        with ThreadPoolExecutor(min(EMPTY_SLICE_THREADS, len(paths))) as pool:
            list(pool.map(write, paths))  # list(): a failed write raises here
    return len(data)
