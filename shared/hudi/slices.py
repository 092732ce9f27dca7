"""File slices: the latest committed base file of each file group, and who owns a group.

Copy-on-Write keeps a file group's history as slices: base files with the same fileId and
rising instants. Readers take, per (partition path, fileId), the greatest completed slice at
or before the instant they read. The sink writes a new slice of a group when a partition's
small group takes the next flush's rows (write-time file sizing), carrying the old slice's
rows over unchanged.

**Ownership.** A group belongs to the Kafka partition (more exactly its *source index*, the
number ``_hoodie_commit_seqno`` uses) that created it; the write token of every slice starts
with that number (``<source>-<flush>-<nonce>``). Only the owner writes new slices of its
groups, so two writers never race for one group; the coordinator still checks every new slice
against the table before it commits (:func:`slice_problems`), which is what makes a stale or
foreign slice harmless: it is never listed.

**Which slices count.** Every completed instant's: the active timeline's and the archived
ones' (``.hoodie/.sink/archived/``, where archival moves timeline files unchanged). Archival
does not wait for a group's next slice, so a group whose latest slice's commit was archived is
still live: in upsert mode its keys must be found (or an update would insert a second row of
the key, a delete would miss). An archived instant never changes, so it is read once per
process. Replaced groups (a completed replacecommit) are gone for good.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.layout import Instant, InstantState
from hudi_sink.shared.hudi.naming import ensure_inside, instant_key, parse_base_file_name
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import stats_of

__all__ = ["Slice", "GroupKey", "SliceCache", "latest_slices", "owner_of", "slice_problems",
           "source_index", "NewSlice", "may_take_slices"]

GroupKey = tuple[str, str]
"""(partition path, fileId)."""

_TOPIC_STRIDE = 100000


def source_index(topics: list[str], topic: str, partition: int) -> int:
    """The number of a (topic, partition): ``topics.index(topic) * 100000 + partition``.

    It names a record's source in ``_hoodie_commit_seqno`` and a group's owner in the write
    token. For the first topic it is the Kafka partition itself."""
    return topics.index(topic) * _TOPIC_STRIDE + partition


def owner_of(write_token: str) -> int | None:
    """The source index a write token names (its first number), or None for a token the
    sink did not write (Java writers, clustering)."""
    head = write_token.split("-", 1)[0]
    return int(head) if head.isdigit() else None


@dataclass(frozen=True)
class Slice:
    """The latest completed slice of one file group."""

    partition_path: str
    file_id: str
    instant: str
    path: str
    """Relative to the table's base path."""
    size_bytes: int
    num_rows: int
    owner: int | None
    """Source index of the writer (:func:`owner_of`), None when not the sink's."""


def latest_slices(completed: Iterable[tuple[Instant, Mapping[str, Any]]]) -> dict[GroupKey, Slice]:
    """Latest slice per group from the completed instants' metadata (commits and
    replacecommits, any order); groups a replacecommit replaced are left out.

    Pure: the metadata is what ``<T>.commit``/``<T>.replacecommit`` hold."""
    ordered = sorted(completed, key=lambda item: instant_key(item[0].time))
    latest: dict[GroupKey, Slice] = {}
    replaced: set[GroupKey] = set()
    for instant, metadata in ordered:
        for stat in stats_of(dict(metadata)):
            name = stat.path.rsplit("/", 1)[-1]
            parsed = parse_base_file_name(name)
            if parsed is None:
                continue
            latest[(stat.partition_path, stat.file_id)] = Slice(
                partition_path=stat.partition_path, file_id=stat.file_id, instant=instant.time,
                path=stat.path, size_bytes=stat.file_size_bytes, num_rows=stat.num_writes,
                owner=owner_of(parsed.write_token))
        if instant.action == layout.REPLACE_ACTION:
            for partition, file_ids in (metadata.get("partitionToReplaceFileIds") or {}).items():
                replaced.update((partition, file_id) for file_id in file_ids)
    return {key: value for key, value in latest.items() if key not in replaced}


class SliceCache:
    """The table's latest slices, re-read cheaply: a completed instant's metadata never
    changes, so each is parsed once (blocking I/O: call from a worker thread)."""

    def __init__(self, table: HudiTable) -> None:
        self._table = table
        self._metadata: dict[Instant, Mapping[str, Any]] = {}
        self._active_seen: set[Instant] | None = None
        self._lock = threading.Lock()

    def latest(self) -> dict[GroupKey, Slice]:
        with self._lock:  # flushes of several partitions read it from their own threads
            return self._latest_locked()

    def _latest_locked(self) -> dict[GroupKey, Slice]:
        active = [i for i in self._table.list_instants() if i.state is InstantState.COMPLETED]
        archive = ensure_inside(self._table.base_path, layout.SINK_ARCHIVE_DIR)
        if set(active) != self._active_seen:
            # The active timeline changed: an instant may have been completed and archived
            # since the last look (never seen active), or archived before this process
            # started. An instant read while active keeps its metadata here.
            for info in self._table.fs.list_dir(archive):
                instant = layout.parse_timeline_file(info.name)
                if (instant is None or info.is_dir or instant.state is not InstantState.COMPLETED
                        or instant in self._metadata):
                    continue
                try:
                    self._metadata[instant] = orjson.loads(self._table.fs.read_bytes(info.path))
                except FileNotFoundError:
                    continue
            self._active_seen = set(active)
        for instant in active:
            if instant not in self._metadata:
                self._metadata[instant] = self._table.read_commit_metadata(instant.time)
        return latest_slices(self._metadata.items())


def may_take_slices(path: str, size_bytes: int, small_file_bytes: int) -> bool:
    """Whether the group whose latest slice is ``path`` may still take a new slice from its
    owner (a sink-written group below ``table.small_file_bytes``). Clustering must leave such
    a group alone: a replacecommit deciding after the owner's new slice was checked would
    hide that slice's rows. Sizes only grow, so a group that may not take slices never will."""
    parsed = parse_base_file_name(path.rsplit("/", 1)[-1])
    return (small_file_bytes > 0 and size_bytes < small_file_bytes and parsed is not None
            and owner_of(parsed.write_token) is not None)


@dataclass(frozen=True)
class NewSlice:
    """A staged base file as the coordinator checks it."""

    partition_path: str
    file_id: str
    prev_commit: str | None
    """The slice it was written over, None for a new group."""


def slice_problems(files: list[NewSlice], owner: int, latest: Mapping[GroupKey, Slice],
                   taken: set[GroupKey]) -> str | None:
    """Why one participant's staged files must not be committed, or None.

    A new group must be new; a new slice of a group must be written over the group's latest
    completed slice (else rows committed since would vanish from the snapshot) by the group's
    owner; and no group takes two slices in one instant (readers refuse duplicate slices).
    ``taken`` holds the groups already accepted for this instant; the caller adds these files'
    groups when the answer is None."""
    seen: set[GroupKey] = set()
    for new in files:
        key = (new.partition_path, new.file_id)
        if key in taken or key in seen:
            return f"file group {new.file_id} in {new.partition_path!r} written twice in one instant"
        seen.add(key)
        current = latest.get(key)
        if new.prev_commit is None:
            if current is not None:
                return f"new file group {new.file_id} already exists (slice {current.instant})"
            continue
        if current is None:
            return (f"slice of {new.file_id} written over {new.prev_commit}, but the group has "
                    "no slice on the active timeline (replaced, archived or never committed)")
        if current.instant != new.prev_commit:
            return (f"slice of {new.file_id} written over {new.prev_commit}, but its latest "
                    f"slice is {current.instant} (a stale view: the partition redoes it)")
        if current.owner != owner:
            return f"file group {new.file_id} belongs to source {current.owner}, not {owner}"
    return None
