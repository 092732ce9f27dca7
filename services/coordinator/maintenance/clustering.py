"""Clustering: rewrite small base files of a partition into few large ones (a replacecommit).

Done with pyarrow in the coordinator (no SparkSession there): each group's files are read
through the table's ``FileSystem`` and written, in order, as one new base file (new file id,
the clustering instant ``C`` in its name) into ``.hoodie/.temp/<C>/`` — invisible to
readers. Memory stays within ``budget_bytes`` of Arrow data whatever the group's size: the
files are read in batches sized by the decoded bytes of their rows (ranged reads on an object
store), written out a row group at a time into a local scratch file (:mod:`.scratch`), which
is then uploaded (streamed) to its staged path.
Meta columns are preserved (``_hoodie_commit_time`` and ``_hoodie_commit_seqno`` keep
the instant that wrote each row, as Hudi's clustering does) except ``_hoodie_file_name``, which
names the new file. The decision goes through the sink log like a commit
(``TableCommitter.decide``): a crash before it rolls back (ABORT, staging to deletion), after it
rolls forward (``forward``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.maintenance.plan import BaseFile
from hudi_sink.services.coordinator.maintenance.scratch import remove_abandoned, scratch_dir
from hudi_sink.shared.errors import TableFormatError
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.naming import base_file_name, new_file_id
from hudi_sink.shared.hudi.replace import ReplaceTimeline, replace_metadata
from hudi_sink.shared.hudi.sink_log_state import LogEntry
from hudi_sink.shared.hudi.write_stats import WriteStat
from hudi_sink.shared.storage.fs import FileSystem

__all__ = ["Clusterer", "rewrite_group"]

log = logging.getLogger("hudi_sink.maintenance")

FILE_NAME_COLUMN = "_hoodie_file_name"
CLUSTER_TASK_ID = "0-0-0"  # Hudi's <task>-<stage>-<attempt>; one writer per file
BUDGET_BYTES = 64 * 1024 * 1024
"""Arrow data one rewrite holds at most: batches of a quarter of it are read, and written
out as a row group once half of it is pending."""
_READ_BUFFER = 1024 * 1024
PROBE_ROWS = 1024
"""Rows read first from a file, to measure what a row takes once decoded."""


def rewrite_group(timeline: ReplaceTimeline, instant: str, files: list[BaseFile],
                  codec: str, *, budget_bytes: int = BUDGET_BYTES) -> tuple[WriteStat, str]:
    """Write one new base file holding every row of ``files``, in order; returns its stat
    and its staged path (relative to the base path)."""
    table = timeline.table
    partition = files[0].partition
    file_id = new_file_id()
    name = base_file_name(file_id, CLUSTER_TASK_ID, instant)
    final = f"{partition}/{name}" if partition else name
    staged = f"{layout.staging_dir(instant)}/{final}"
    sources = [f"{table.base_path}/{f.path}" for f in files]
    remove_abandoned()  # a killed pass's scratch file would stay on the disk for good
    with scratch_dir() as scratch:
        local = os.path.join(scratch, name)
        rows = _merge(table.fs, sources, name, local, codec, budget_bytes)
        size = os.path.getsize(local)
        table.fs.makedirs(f"{table.base_path}/{layout.staging_dir(instant)}/{partition}".rstrip("/"))
        table.fs.write_file(f"{table.base_path}/{staged}", local)
    stat = WriteStat(file_id=file_id, path=final, partition_path=partition, num_writes=rows,
                     num_inserts=rows, file_size_bytes=size, total_write_bytes=size)
    return stat, staged


def _merge(fs: FileSystem, sources: list[str], name: str, local: str, codec: str,
           budget_bytes: int) -> int:
    """Every row of ``sources`` into the Parquet file ``local`` (``_hoodie_file_name`` set
    to ``name``), batch by batch; returns the row count. Columns are unified as
    ``concat_tables(promote_options="default")`` would: a column missing from a file is
    null there, a null-typed one takes the other files' type."""
    schemas = []
    for source in sources:
        with fs.open_read(source) as handle:
            schemas.append(pq.ParquetFile(handle).schema_arrow)
    schema = pa.unify_schemas(schemas, promote_options="default")
    if schema.get_field_index(FILE_NAME_COLUMN) < 0:
        raise TableFormatError(f"{sources[0]} has no {FILE_NAME_COLUMN} column")
    pending: list[pa.Table] = []
    pending_bytes = rows = 0
    # Decimals as FIXED_LEN_BYTE_ARRAY whatever their precision, as the participant's Spark
    # writes them: Apache Hudi's Avro Parquet reader fails on INT32/INT64 decimals.
    with pq.ParquetWriter(local, schema, compression=None if codec == "none" else codec,
                          coerce_timestamps="us", allow_truncated_timestamps=False,
                          store_decimal_as_integer=False) as writer:
        for source in sources:
            with fs.open_read(source) as handle:
                parquet = pq.ParquetFile(handle, buffer_size=_READ_BUFFER)
                for table in _batches(parquet, lambda b: _aligned(b, schema, name), budget_bytes // 4):
                    pending.append(table)
                    pending_bytes += table.nbytes
                    rows += table.num_rows
                    if pending_bytes >= budget_bytes // 2:
                        writer.write_table(pa.concat_tables(pending))
                        pending, pending_bytes = [], 0
        if pending or rows == 0:
            writer.write_table(pa.concat_tables(pending) if pending else schema.empty_table())
    return rows


def _batches(parquet: pq.ParquetFile, align: Callable[[pa.RecordBatch], pa.Table],
             target_bytes: int) -> Iterator[pa.Table]:
    """Every row of ``parquet``, aligned, in batches of about ``target_bytes`` of Arrow data.

    Sized by what rows measure once decoded, never by the file's metadata: its sizes are of
    the encoded data, and a low-cardinality column stored as a dictionary (a few bytes a row
    on disk) decodes to each row's whole value — hundreds of times more. The first
    :data:`PROBE_ROWS` rows measure a row; each batch refines the measure (the widest row
    size seen), and when it says the batch size is off by more than half, the row group is
    read again at the new size from where it was (the rows before are skipped, re-decoded a
    small batch at a time)."""
    row_bytes = 0.0
    for group in range(parquet.metadata.num_row_groups):
        done = 0
        size = _rows_for(row_bytes, target_bytes)
        while done < parquet.metadata.row_group(group).num_rows:
            skip = done
            for batch in parquet.iter_batches(batch_size=size, row_groups=[group], use_threads=False):
                if skip >= batch.num_rows:
                    skip -= batch.num_rows
                    continue
                table = align(batch.slice(skip) if skip else batch)
                skip = 0
                done += table.num_rows
                row_bytes = max(row_bytes, table.nbytes / max(1, table.num_rows))
                yield table
                wanted = _rows_for(row_bytes, target_bytes)
                if wanted < size // 2 or wanted > size * 2:
                    size = wanted
                    break  # read on at the new size
            else:
                break


def _rows_for(row_bytes: float, target_bytes: int) -> int:
    """Rows in a batch of ``target_bytes`` (:data:`PROBE_ROWS` until a row was measured)."""
    return PROBE_ROWS if row_bytes == 0 else max(1, int(target_bytes // row_bytes))


def _aligned(batch: pa.RecordBatch, schema: pa.Schema, name: str) -> pa.Table:
    """``batch`` in the unified ``schema``, its ``_hoodie_file_name`` naming the new file."""
    count = batch.num_rows
    columns = []
    for field in schema:
        if field.name == FILE_NAME_COLUMN:
            columns.append(pa.array([name] * count, field.type))
        elif (index := batch.schema.get_field_index(field.name)) < 0:
            columns.append(pa.nulls(count, field.type))
        else:
            column = batch.column(index)
            columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)


class Clusterer:
    """Runs one clustering instant end to end (blocking: call from a worker thread)."""

    def __init__(self, committer: TableCommitter, timeline: ReplaceTimeline, codec: str) -> None:
        self._committer = committer
        self._timeline = timeline
        self._codec = codec
        self.before_decision: Callable[[str], None] | None = None
        """Blocks until the instant may be decided (the routine: no older ingestion in flight)."""
        committer.forward_actions[layout.REPLACE_ACTION] = self.forward

    def run(self, instant: str, groups: list[list[BaseFile]], schema: str,
            epoch: int | None = None) -> dict[str, Any]:
        """Start ``instant``, rewrite ``groups``, decide and complete the replacecommit.
        Returns its metadata. Any failure before the decision rolls the instant back. The
        decision is refused (FencedError) if ``epoch`` (default: the committer's now) ended."""
        epoch = self._committer.epoch if epoch is None else epoch
        self._timeline.start(instant)
        try:
            stats: list[WriteStat] = []
            moves: list[tuple[str, str]] = []
            replaced: dict[str, list[str]] = {}
            for files in groups:
                stat, staged = rewrite_group(self._timeline, instant, files, self._codec)
                stats.append(stat)
                moves.append((staged, stat.path))
                replaced.setdefault(files[0].partition, []).extend(f.file_id for f in files)
            metadata = replace_metadata(stats, replaced, {"schema": schema})
            if self.before_decision is not None:
                self.before_decision(instant)
        except BaseException:
            self.roll_back(instant, "clustering failed before its decision")
            raise
        self._committer.decide(instant, layout.REPLACE_ACTION, metadata, moves,
                               lambda: self._timeline.complete(instant, metadata), epoch=epoch)
        log.info("clustering %s: %d file(s) → %d", instant,
                 sum(len(g) for g in groups), len(stats))
        return metadata

    def roll_back(self, instant: str, reason: str) -> None:
        self._committer.abort(instant, reason, rollback=self._timeline.rollback)

    def forward(self, entry: LogEntry) -> None:
        """Roll a decided replacecommit forward (recovery by a later leader). A no-op once it
        is completed or archived — or no longer inflight at all: a decided instant is never
        rolled back, so it completed and was archived since (its files are placed)."""
        assert entry.instant is not None and entry.metadata is not None
        if (self._timeline.path_exists_completed(entry.instant)
                or self._timeline.is_archived(entry.instant)
                or not self._timeline.is_inflight(entry.instant)):
            return
        self._committer.place_decided(entry.instant, entry.metadata, entry.moves)
        self._timeline.complete(entry.instant, entry.metadata)

    def recover(self) -> list[str]:
        """Finish every pending replacecommit: roll a decided one forward (a pass that failed
        after its decision), roll back one never decided (an interrupted pass, or a fenced
        zombie's). Runs before each pass, when no clustering of this leader is in flight."""
        rolled_back = []
        for instant in self._timeline.pending():
            if not self._committer.roll_forward(instant):
                self.roll_back(instant, "clustering interrupted (no decision)")
                rolled_back.append(instant)
        return rolled_back
