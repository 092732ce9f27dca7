"""Clustering: rewrite small base files of a partition into few large ones (a replacecommit).

Done with pyarrow in the coordinator (no SparkSession there): each group's files are read
through the table's ``FileSystem``, concatenated and written as one new base file (new file
id, the clustering instant ``C`` in its name) into ``.hoodie/.temp/<C>/`` — invisible to
readers. Meta columns are preserved (``_hoodie_commit_time`` and ``_hoodie_commit_seqno`` keep
the instant that wrote each row, as Hudi's clustering does) except ``_hoodie_file_name``, which
names the new file. The decision goes through the sink log like a commit
(``TableCommitter.decide``): a crash before it rolls back (ABORT, staging to deletion), after it
rolls forward (``forward``).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from services.coordinator.committer import TableCommitter
from services.coordinator.maintenance.plan import BaseFile
from shared.errors import TableFormatError
from shared.hudi import layout
from shared.hudi.naming import base_file_name, new_file_id
from shared.hudi.replace import ReplaceTimeline, replace_metadata
from shared.hudi.write_stats import WriteStat
from shared.sink_log import LogEntry

__all__ = ["Clusterer", "rewrite_group"]

log = logging.getLogger("hudi_sink.maintenance")

FILE_NAME_COLUMN = "_hoodie_file_name"
CLUSTER_TASK_ID = "0-0-0"  # Hudi's <task>-<stage>-<attempt>; one writer per file


def rewrite_group(timeline: ReplaceTimeline, instant: str, files: list[BaseFile],
                  codec: str) -> tuple[WriteStat, str]:
    """Write one new base file holding every row of ``files``; returns its stat and its
    staged path (relative to the base path)."""
    table = timeline.table
    partition = files[0].partition
    tables = [pq.read_table(pa.BufferReader(table.fs.read_bytes(f"{table.base_path}/{f.path}")))
              for f in files]
    merged = pa.concat_tables(tables, promote_options="default")
    file_id = new_file_id()
    name = base_file_name(file_id, CLUSTER_TASK_ID, instant)
    index = merged.schema.get_field_index(FILE_NAME_COLUMN)
    if index < 0:
        raise TableFormatError(f"{files[0].path} has no {FILE_NAME_COLUMN} column")
    merged = merged.set_column(index, merged.schema.field(index),
                               pa.array([name] * merged.num_rows, pa.string()))
    buffer = io.BytesIO()
    pq.write_table(merged, buffer, compression=None if codec == "none" else codec,
                   coerce_timestamps="us", allow_truncated_timestamps=False)
    data = buffer.getvalue()
    final = f"{partition}/{name}" if partition else name
    staged = f"{layout.staging_dir(instant)}/{final}"
    table.fs.makedirs(f"{table.base_path}/{layout.staging_dir(instant)}/{partition}".rstrip("/"))
    table.fs.write_atomic(f"{table.base_path}/{staged}", data)
    stat = WriteStat(file_id=file_id, path=final, partition_path=partition,
                     num_writes=merged.num_rows, num_inserts=merged.num_rows,
                     file_size_bytes=len(data), total_write_bytes=len(data))
    return stat, staged


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
