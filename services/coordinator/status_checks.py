"""The coordinator's checks of the participants' statuses before the fenced commit.

Two checks, both blocking (a worker thread runs them): every staged file is there with the
size its status reported (``TableCommitter.verify_staged``), and every new file slice is
written over its group's latest completed slice.

A participant writes a new slice of one of its small file groups with the old slice's rows
carried over (``services.participant.packing``); it chose that slice from its own view of
the table, which may be stale (a commit it had not seen, a zombie writer, a partition that
moved). Committing a slice written over anything but the group's latest completed slice would
make the rows committed since vanish from every later snapshot, so each status's files are
checked against the table as it is now (``shared.hudi.slices.slice_problems``). A status that
fails is dropped like a status whose staged files are missing: its partition is carried and
redoes the instant from its committed offset, and its files stay unlisted.
"""

from __future__ import annotations

from collections.abc import Mapping

from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.shared.hudi.slices import GroupKey, NewSlice, SliceCache, slice_problems, source_index
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.kafka.partition_key import PartitionKey
from hudi_sink.shared.kafka.protocol import WriteStatus
from hudi_sink.shared.runtime.metrics import Metrics

__all__ = ["StatusChecks"]

_UNKNOWN_OWNER = -1


class StatusChecks:
    """Blocking (reads the timeline and the staged files): call from a worker thread."""

    def __init__(self, committer: TableCommitter, table: HudiTable, metrics: Metrics) -> None:
        self._committer = committer
        self._slices = SliceCache(table)
        self._metrics = metrics

    def problems(self, statuses: Mapping[PartitionKey, WriteStatus],
                 topics: list[str]) -> dict[PartitionKey, str]:
        """Per status that must not be committed, why."""
        problems: dict[PartitionKey, str] = {}
        for key, status in statuses.items():
            moves = [(f.staged_path, f.final_path) for f in status.files]
            sizes = {f.staged_path: f.size_bytes for f in status.files}
            problem = self._committer.verify_staged(moves, sizes)
            if problem is not None:
                problems[key] = problem
        usable = {k: s for k, s in statuses.items() if k not in problems}
        conflicts = self._slice_problems(usable, topics)
        if conflicts:
            self._metrics.upsert_conflicts(len(conflicts))
        return {**problems, **conflicts}

    def _slice_problems(self, statuses: Mapping[PartitionKey, WriteStatus],
                        topics: list[str]) -> dict[PartitionKey, str]:
        """Per status that must not be committed, why (the others' groups do not collide)."""
        if not any(f.prev_commit is not None for s in statuses.values() for f in s.files):
            latest = {}  # nothing written over an old slice: new groups cannot collide
        else:
            try:
                latest = self._slices.latest()
            except Exception as exc:  # noqa: BLE001 - unreadable now: such slices wait
                reason = f"new slices not checkable now (table view unreadable: {exc})"
                return {key: reason for key, status in statuses.items()
                        if any(f.prev_commit is not None for f in status.files)}
        taken: set[GroupKey] = set()
        found: dict[PartitionKey, str] = {}
        for key, status in statuses.items():
            topic, partition = key
            owner = source_index(topics, topic, partition) if topic in topics else _UNKNOWN_OWNER
            files = [NewSlice(f.partition_path, f.file_id, f.prev_commit) for f in status.files]
            problem = slice_problems(files, owner, latest, taken)
            if problem is None:
                taken.update((f.partition_path, f.file_id) for f in files)
            else:
                found[key] = problem
        return found
