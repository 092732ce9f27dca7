"""Turn a buffer of decoded rows into the Arrow table and file plan of one flush.

Pure (no I/O): the file names, meta columns and ``__hs_part`` index are decided here, so the
Spark writer only has to write and rename.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

import pyarrow as pa

from services.participant.decoded import Row, rows_to_arrow
from shared.hudi.naming import base_file_name, new_file_id, partition_path, write_token
from shared.schema import TableSchema
from shared.spark_writer import PART_COLUMN, PlannedFile

__all__ = ["FlushInput", "plan_flush"]


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


def plan_flush(
    rows: list[Row],
    offsets: list[int],
    schema: TableSchema,
    spec: FlushInput,
) -> tuple[pa.Table, list[PlannedFile]]:
    """Arrow table (meta columns, data columns, ``__hs_part``) and one PlannedFile per
    table partition present in ``rows``."""
    token = write_token(spec.partition, spec.flush_no, spec.writer_nonce)
    planned: dict[str, PlannedFile] = {}
    part_index: list[int] = []
    file_names: list[str] = []
    part_paths: list[str] = []
    for row in rows:
        path = partition_path(row.partition_value, schema.partition_field, spec.hive_style)
        plan = planned.get(path)
        if plan is None:
            fid = new_file_id()  # fresh on every plan: staged names never repeat
            name = base_file_name(fid, token, spec.instant)
            plan = PlannedFile(
                index=len(planned),
                file_id=fid,
                partition_path=path,
                file_name=name,
                staged_path=posixpath.join(spec.staging_dir, path, name) if path
                else posixpath.join(spec.staging_dir, name),
            )
            planned[path] = plan
        part_index.append(plan.index)
        file_names.append(plan.file_name)
        part_paths.append(path)
    data = rows_to_arrow(rows, schema)
    count = len(rows)
    meta = {
        "_hoodie_commit_time": pa.array([spec.instant] * count, pa.string()),
        "_hoodie_commit_seqno": pa.array(
            [f"{spec.instant}_{spec.source_index}_{offset}" for offset in offsets], pa.string()
        ),
        "_hoodie_record_key": pa.array([row.record_key for row in rows], pa.string()),
        "_hoodie_partition_path": pa.array(part_paths, pa.string()),
        "_hoodie_file_name": pa.array(file_names, pa.string()),
    }
    columns = list(meta.values()) + list(data.columns) + [pa.array(part_index, pa.int32())]
    names = list(meta) + data.column_names + [PART_COLUMN]
    return pa.Table.from_arrays(columns, names=names), list(planned.values())
