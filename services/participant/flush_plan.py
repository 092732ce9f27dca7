"""Turn a buffer of decoded rows into the Arrow table and file plan of one flush.

Pure (no I/O): the file names, meta columns and ``__hs_part`` index are decided here, so the
Spark writer only has to write and rename. Two steps: :func:`prepare_flush` builds the Arrow
columns once per buffer (the costly part), :func:`name_flush` names fresh files for every
attempt.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from hudi_sink.services.participant.decoded import Row, rows_to_arrow
from hudi_sink.services.participant.packing import Carry
from hudi_sink.services.participant.spark_writer import PART_COLUMN, PlannedFile
from hudi_sink.shared.hudi.naming import base_file_name, new_file_id, partition_path, write_token
from hudi_sink.shared.schema.table_schema import TableSchema

__all__ = ["FlushInput", "PartitionPaths", "PreparedFlush", "prepare_flush", "name_flush",
           "plan_flush"]


@dataclass(frozen=True)
class FlushInput:
    """Everything that names the files of one flush."""

    topic: str
    partition: int
    source_index: int
    """Stable number of the (topic, partition) used in ``_hoodie_commit_seqno``."""
    instant: str
    flush_no: int
    writer_nonce: int
    staging_dir: str
    """Absolute ``<base>/.hoodie/.temp/<T>``."""
    hive_style: bool


_META_BEFORE_FILE_NAME = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                          "_hoodie_partition_path")
"""Hudi's meta columns up to ``_hoodie_file_name``, the one a retry renames."""


@dataclass(frozen=True)
class PreparedFlush:
    """A flush's rows in Arrow, everything but the file names: built once per buffer (the
    expensive part), so the Python rows can be dropped before the flush waits for a Spark
    slot, and a retry only names new files (:func:`name_flush`)."""

    columns: pa.Table
    """Meta columns except ``_hoodie_file_name``, then the data columns."""
    part_index: pa.Array
    """int32 per row: index into ``paths`` (becomes ``__hs_part``)."""
    paths: list[str]
    """Table partition paths in order of first appearance."""

    @property
    def num_rows(self) -> int:
        return int(self.columns.num_rows)

    def bytes_per_path(self) -> list[int]:
        """Arrow bytes of each table partition's rows (the flush's bytes shared by rows)."""
        counts = [0] * len(self.paths)
        for item in pc.value_counts(self.part_index):
            counts[int(item["values"].as_py())] = int(item["counts"].as_py())
        total = max(self.num_rows, 1)
        return [self.columns.nbytes * count // total for count in counts]


def prepare_flush(rows: list[Row], offsets: list[int], schema: TableSchema,
                  spec: FlushInput) -> PreparedFlush:
    """The Arrow form of ``rows`` (see :class:`PreparedFlush`).

    Per-row Python work is what a flush's thread takes from the event loop (the GIL), so
    string keys and partition values are handled in Arrow: a string column holds exactly the
    values the decoder kept (a one-field string key's ``Row.record_key`` is it,
    ``Row.partition_value`` it itself). Other key types and composite keys go through the
    rows, whose keys the decoder spelt as Hudi does (``shared.hudi.record_key``)."""
    data = rows_to_arrow(rows, schema)
    part_index, part_paths, paths = _partition_paths(rows, data, schema, spec.hive_style)
    count = len(rows)
    key_fields = schema.record_key_fields  # several: Hudi's a:1,b:2, built by the decoder
    key_column = data.column(key_fields[0])
    record_keys = (key_column if len(key_fields) == 1 and pa.types.is_string(key_column.type)
                   else pa.array([row.record_key for row in rows], pa.string()))
    seqno = pc.binary_join_element_wise(f"{spec.instant}_{spec.source_index}_",
                                        pa.array(offsets, pa.int64()).cast(pa.string()), "")
    meta = {  # in the order of _META_BEFORE_FILE_NAME
        "_hoodie_commit_time": pa.array([spec.instant] * count, pa.string()),
        "_hoodie_commit_seqno": seqno,
        "_hoodie_record_key": record_keys,
        "_hoodie_partition_path": part_paths,
    }
    columns = pa.Table.from_arrays(list(meta.values()) + list(data.columns),
                                   names=list(meta) + data.column_names)
    return PreparedFlush(columns, part_index, paths)


class PartitionPaths:
    """The partition paths of values of the table's partition field (``naming.partition_path``),
    each value encoded once: a table has few. Remembered by type and spelling, not by
    equality: equal values may spell differently (0.0 and -0.0, decimals of two scales) and
    so name different partitions. A value that cannot be a path raises every time."""

    def __init__(self, field: str | None, hive_style: bool) -> None:
        self._field = field
        self._hive_style = hive_style
        self._paths: dict[object, str] = {}

    def of(self, value: object) -> str:
        spelt = value if type(value) is str else (type(value), repr(value))
        path = self._paths.get(spelt)
        if path is None:
            path = self._paths[spelt] = partition_path(value, self._field, self._hive_style)
        return path


def _partition_paths(rows: list[Row], data: pa.Table, schema: TableSchema,
                     hive_style: bool) -> tuple[pa.Array, pa.Array, list[str]]:
    """Per row: the index of its partition path, and the path; the distinct paths in order
    of first appearance. Each distinct value is encoded once (a table has few)."""
    field = schema.partition_field
    if field is not None and pa.types.is_string(data.schema.field(field).type):
        encoded = pc.dictionary_encode(data.column(field).combine_chunks(), null_encoding="encode")
        values = encoded.dictionary.to_pylist()  # distinct values in order of first appearance
        paths = [partition_path(value, field, hive_style) for value in values]
        unique_paths = list(dict.fromkeys(paths))  # two values may share a path
        index_of_path = {path: i for i, path in enumerate(unique_paths)}
        remap = pa.array([index_of_path[path] for path in paths], pa.int32())
        part_index = remap.take(encoded.indices)
        return part_index, pa.array(unique_paths, pa.string()).take(part_index), unique_paths
    index_of: dict[str, int] = {}
    path_of = PartitionPaths(field, hive_style)
    indices: list[int] = []
    row_paths: list[str] = []
    for row in rows:
        path = path_of.of(row.partition_value)
        index = index_of.get(path)
        if index is None:
            index = index_of[path] = len(index_of)
        indices.append(index)
        row_paths.append(path)
    return pa.array(indices, pa.int32()), pa.array(row_paths, pa.string()), list(index_of)


def name_flush(prepared: PreparedFlush, spec: FlushInput,
               carries: Mapping[int, Carry] | None = None) -> tuple[pa.Table, list[PlannedFile]]:
    """Fresh names for ``prepared`` (on every attempt: staged names never repeat): the
    table Spark writes (meta columns, data columns, ``__hs_part``) and its file plan. A
    table partition in ``carries`` (by index into ``prepared.paths``) becomes a new slice of
    that group (its fileId, the old slice's rows carried); the others new file groups. The
    write token starts with the source index: it names the group's owner."""
    token = write_token(spec.source_index, spec.flush_no, spec.writer_nonce)
    carries = carries or {}
    planned: list[PlannedFile] = []
    for index, path in enumerate(prepared.paths):
        carry = carries.get(index)
        fid = new_file_id() if carry is None else carry.file_id
        name = base_file_name(fid, token, spec.instant)
        planned.append(PlannedFile(
            index=index,
            file_id=fid,
            partition_path=path,
            file_name=name,
            staged_path=posixpath.join(spec.staging_dir, path, name) if path
            else posixpath.join(spec.staging_dir, name),
            carry=carry,
        ))
    names = pa.array([p.file_name for p in planned], pa.string()).take(prepared.part_index)
    table = prepared.columns.add_column(len(_META_BEFORE_FILE_NAME), "_hoodie_file_name", names)
    table = table.append_column(PART_COLUMN, prepared.part_index)
    return table, planned


def plan_flush(
    rows: list[Row],
    offsets: list[int],
    schema: TableSchema,
    spec: FlushInput,
) -> tuple[pa.Table, list[PlannedFile]]:
    """Arrow table (meta columns, data columns, ``__hs_part``) and one PlannedFile per
    table partition present in ``rows``: :func:`prepare_flush` then :func:`name_flush`."""
    return name_flush(prepare_flush(rows, offsets, schema, spec), spec)
