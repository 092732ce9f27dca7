"""Turn the write statuses of one instant into its Hudi commit — a pure function.

Kept apart from the service so the aggregation rules (what a partial commit carries, which
staged files move where, which counters land in ``extraMetadata``) are testable without a
broker, a table or an event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hudi_sink.services.coordinator.commit_state import CommitState
from hudi_sink.shared.hudi.offsets import offsets_metadata
from hudi_sink.shared.hudi.write_stats import WriteStat, build_commit_metadata
from hudi_sink.shared.kafka.partition_key import PartitionKey, keys_text

__all__ = ["PlannedCommit", "plan_commit", "CARRIED_KEY"]

CARRIED_KEY = "hudi.sink.carried.partitions"
"""extraMetadata: partitions whose offsets a partial commit carried forward (``topic:p``)."""


@dataclass(frozen=True)
class PlannedCommit:
    metadata: dict[str, Any]
    moves: list[tuple[str, str]]
    """(staged path, final path), relative to the base path."""
    sizes: dict[str, int]
    """Staged path → size its status reported (checked before deciding)."""
    offsets: dict[PartitionKey, int]
    """Every offset the commit stores: answered partitions advance, the rest carry."""
    records: int
    dlq: int
    carried: list[PartitionKey]

    def is_empty(self, previous: Mapping[PartitionKey, int]) -> bool:
        """Whether nothing arrived: no file and no offset moved since ``previous`` (a record
        that went to the DLQ or a skipped tombstone moves its offset, so it is committed)."""
        return not self.moves and all(previous.get(key, 0) == offset
                                      for key, offset in self.offsets.items())


def plan_commit(
    state: CommitState,
    *,
    schema: Mapping[str, str],
    sink_name: str,
    topics: list[str],
    unconfigured_offsets: Mapping[PartitionKey, int],
    operation: str = "INSERT",
) -> PlannedCommit:
    """The commit of ``state``: files and counters of every accepted status.

    ``schema`` is the table schema's entries of ``extraMetadata`` (``schema``, the Avro
    schema, at least). ``unconfigured_offsets`` are offsets of topics no longer configured (from the previous
    commit): they are stored again unchanged, so removing a topic and adding it back later
    resumes where it stopped instead of re-ingesting it from offset 0."""
    stats: list[WriteStat] = []
    moves: list[tuple[str, str]] = []
    sizes: dict[str, int] = {}
    records = dlq = skipped = unknown = deleted = superseded = 0
    failed: list[str] = []
    for status in state.statuses.values():
        records += status.records_written
        dlq += status.records_dlq
        skipped += status.records_skipped
        deleted += status.records_deleted
        superseded += status.records_superseded + status.records_delete_noop
        unknown += status.unknown_fields
        if status.failed:
            failed.append(status.failed)
        for f in status.files:
            stats.append(WriteStat(
                file_id=f.file_id, path=f.final_path, partition_path=f.partition_path,
                num_writes=f.num_records,
                num_inserts=f.new_records - f.num_updates,
                num_update_writes=f.num_updates, num_deletes=f.num_deletes,
                file_size_bytes=f.size_bytes, total_write_bytes=f.size_bytes,
                prev_commit=f.prev_commit,
            ))
            moves.append((f.staged_path, f.final_path))
            sizes[f.staged_path] = f.size_bytes
    offsets = {**unconfigured_offsets, **state.next_offsets()}
    carried = state.carried()
    extra = {
        **schema,
        **offsets_metadata(offsets, topics),
        "hudi.sink.name": sink_name,
        "hudi.sink.coordinator.epoch": str(state.epoch),
        "hudi.sink.records.written": str(records),
        "hudi.sink.records.dlq": str(dlq),
        "hudi.sink.records.skipped": str(skipped),
        **({"hudi.sink.records.deleted": str(deleted),
            "hudi.sink.records.superseded": str(superseded)} if operation == "UPSERT" else {}),
        "hudi.sink.unknown.fields": str(unknown),
    }
    if failed:
        extra["hudi.sink.failed.partitions"] = "; ".join(failed)
    if carried:
        extra[CARRIED_KEY] = keys_text(carried)
    return PlannedCommit(metadata=build_commit_metadata(stats, extra, operation), moves=moves, sizes=sizes,
                         offsets=offsets, records=records, dlq=dlq, carried=carried)
