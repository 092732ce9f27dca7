"""Table-service instants: replacecommit (clustering), the sink's clean records, archival.

**Replacecommit** (docs/design.md §3.8, fact 12; Hudi 0.14 table version 6, JSON timeline):
``<T>.replacecommit.requested`` (empty: v6 allows it, Java then treats the instant as a plain
replace; the clustering plan itself is Avro ``HoodieRequestedReplaceMetadata``, which this
writer does not produce — the plan lives in the sink log entry instead),
``<T>.replacecommit.inflight`` (commit metadata JSON) and ``<T>.replacecommit`` (commit
metadata plus ``partitionToReplaceFileIds``, ``operationType`` ``CLUSTER`` as Java's Jackson
writes it). Readers drop the replaced file groups for snapshot reads at or after ``T``; time
travel before ``T`` still sees them (verified with hudi-rs 0.5.0: ``test_hudi_rs_replacecommit``).

**Clean**: Hudi v6 writes ``<T>.clean*`` as Avro (``HoodieCleanerPlan``/``HoodieCleanMetadata``).
No Avro library ships with the sink, and no reader needs clean instants (docs/design.md §3.8,
fact 13), so a clean is recorded as ``.hoodie/.sink/clean/<T>.json`` (created exclusively)
instead of a timeline file Hudi might misread: its earliest retained instant, the replaced
groups and superseded slices it hands to deletion, and their files. The record with the
greatest earliest retained instant is the table's retained history (:func:`retention_floor`):
time travel before it may miss deleted slices.

**Archival**: Hudi v6 archives into ``.hoodie/archived/`` as Avro log blocks of
``HoodieArchivedMetaEntry``; this writer does not produce them. It moves the timeline files of
archived instants unchanged to ``.hoodie/.sink/archived/``. Readers (hudi-rs and Java alike)
count a base file whose instant is older than the active timeline as committed, so the
snapshot stays right provided (see ``services.coordinator.maintenance.archival``) no pending
instant is archived past, and no replacecommit is archived while a file it replaced exists.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

import orjson

from hudi_sink.shared.errors import TableFormatError
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.layout import Instant, InstantState
from hudi_sink.shared.hudi.naming import ensure_inside, instant_key, is_instant_time
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import WriteStat, build_commit_metadata, check_stat, stats_of

__all__ = [
    "CLUSTER_OPERATION",
    "CleanRecord",
    "replace_metadata",
    "replaced_groups",
    "retention_floor",
    "ReplaceTimeline",
]

CLUSTER_OPERATION = "CLUSTER"

_SUFFIX = {
    InstantState.REQUESTED: layout.REPLACE_REQUESTED_SUFFIX,
    InstantState.INFLIGHT: layout.REPLACE_INFLIGHT_SUFFIX,
    InstantState.COMPLETED: layout.REPLACE_SUFFIX,
}
_COMMIT_SUFFIX = {
    InstantState.REQUESTED: layout.COMMIT_REQUESTED_SUFFIX,
    InstantState.INFLIGHT: layout.INFLIGHT_SUFFIX,
    InstantState.COMPLETED: layout.COMMIT_SUFFIX,
}


def replace_metadata(stats: list[WriteStat], replaced: dict[str, list[str]],
                     extra_metadata: dict[str, str]) -> dict[str, Any]:
    """HoodieReplaceCommitMetadata JSON: the new files and the file groups they replace."""
    metadata = build_commit_metadata(stats, extra_metadata, CLUSTER_OPERATION)
    metadata["partitionToReplaceFileIds"] = {p: sorted(ids) for p, ids in sorted(replaced.items())}
    return metadata


def replaced_groups(metadata: dict[str, Any]) -> set[tuple[str, str]]:
    """(partition, fileId) of every file group a replacecommit's metadata replaces."""
    raw = metadata.get("partitionToReplaceFileIds") or {}
    if not isinstance(raw, dict):
        raise TableFormatError("partitionToReplaceFileIds must be an object")
    return {(str(p), str(f)) for p, ids in raw.items() for f in ids or ()}


@dataclass(frozen=True)
class CleanRecord:
    """What a sink clean decided: the replaced file groups and the superseded slices (and
    their files) it removes, under earliest retained instant ``earliest_retained``."""

    instant: str
    earliest_retained: str
    groups: list[tuple[str, str, str]]
    """(partition, fileId, replacing instant)."""
    files: list[str]
    """Relative paths of the files it hands to deletion."""
    slices: list[tuple[str, str]] = field(default_factory=list)
    """(relative path, instant of the later slice before ``earliest_retained`` that supersedes
    it) of each superseded slice among ``files`` (for people: the deleter re-checks on the
    table)."""

    def to_json(self) -> dict[str, Any]:
        return {"instant": self.instant, "earliestCommitToRetain": self.earliest_retained,
                "groups": [list(g) for g in self.groups], "files": self.files,
                "supersededSlices": [list(s) for s in self.slices]}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> CleanRecord:
        return cls(str(raw["instant"]), str(raw["earliestCommitToRetain"]),
                   [(str(a), str(b), str(c)) for a, b, c in raw.get("groups") or []],
                   [str(f) for f in raw.get("files") or []],
                   [(str(a), str(b)) for a, b in raw.get("supersededSlices") or []])


def retention_floor(records: list[CleanRecord]) -> CleanRecord | None:
    """The recorded clean with the greatest earliest retained instant (the newest on a tie):
    every read at or after its instant finds all its files, an older one may not (a file
    of a replaced group or a superseded slice older than it may be deleted). None: nothing
    was ever cleaned (as far as the records tell), so every instant is readable."""
    return max(records, key=lambda r: (instant_key(r.earliest_retained), instant_key(r.instant)),
               default=None)


class ReplaceTimeline:
    """Replacecommit, clean-record and archival operations on one table (via its FileSystem)."""

    def __init__(self, table: HudiTable) -> None:
        self.table = table
        self.fs = table.fs

    def path(self, instant: str, state: InstantState) -> str:
        if not is_instant_time(instant):
            raise TableFormatError(f"not an instant time: {instant!r}")
        return f"{self.table.meta_path}/{instant}.{_SUFFIX[state]}"

    # --- replacecommit ----------------------------------------------------------------------
    def start(self, instant: str) -> None:
        """``<T>.replacecommit.requested`` then ``.inflight``, and the staging directory."""
        latest = self.table.latest_instant_time()
        if latest is not None and instant < latest and not self.fs.exists(
                self.path(instant, InstantState.REQUESTED)):
            raise TableFormatError(f"replace instant {instant} is older than {latest}")
        self.fs.write_atomic(self.path(instant, InstantState.REQUESTED), b"")
        inflight = {"partitionToWriteStats": {}, "compacted": False, "extraMetadata": {},
                    "operationType": CLUSTER_OPERATION}
        self.fs.write_atomic(self.path(instant, InstantState.INFLIGHT), orjson.dumps(inflight))
        self.fs.makedirs(self.table.staging_dir(instant))

    def complete(self, instant: str, metadata: dict[str, Any]) -> None:
        """Create ``<T>.replacecommit`` exclusively after checking what it lists is in place."""
        done = self.path(instant, InstantState.COMPLETED)
        if self.fs.exists(done):
            raise TableFormatError(f"replace instant {instant} is already completed")
        if not self.fs.exists(self.path(instant, InstantState.INFLIGHT)):
            raise TableFormatError(f"replace instant {instant} is not inflight")
        for stat in stats_of(metadata):
            if check_stat(stat) != instant:
                raise TableFormatError(f"{stat.path} does not belong to instant {instant}")
            if not self.fs.exists(ensure_inside(self.table.base_path, stat.path)):
                raise TableFormatError(f"{stat.path} is listed in the replacecommit but not in place")
        if not self.fs.create_exclusive(done, orjson.dumps(metadata)):
            raise TableFormatError(f"replace instant {instant} was completed concurrently")

    def rollback(self, instant: str) -> None:
        """Remove a pending replacecommit's inflight and requested files (staging goes to
        the deletion service)."""
        if self.fs.exists(self.path(instant, InstantState.COMPLETED)):
            raise TableFormatError(f"replace instant {instant} is completed")
        self.fs.delete(self.path(instant, InstantState.INFLIGHT))
        self.fs.delete(self.path(instant, InstantState.REQUESTED))

    def path_exists_completed(self, instant: str) -> bool:
        return self.fs.exists(self.path(instant, InstantState.COMPLETED))

    def is_archived(self, instant: str, action: str = layout.REPLACE_ACTION) -> bool:
        """``<T>.<action>`` was moved to ``.hoodie/.sink/archived/`` (its effect is done)."""
        suffix = (_SUFFIX if action == layout.REPLACE_ACTION else _COMMIT_SUFFIX)[InstantState.COMPLETED]
        archive_dir = ensure_inside(self.table.base_path, layout.SINK_ARCHIVE_DIR)
        return self.fs.exists(posixpath.join(archive_dir, f"{instant}.{suffix}"))

    def is_inflight(self, instant: str) -> bool:
        return self.fs.exists(self.path(instant, InstantState.INFLIGHT))

    def pending(self) -> list[str]:
        instants = [i for i in self.table.list_instants() if i.action == layout.REPLACE_ACTION]
        done = {i.time for i in instants if i.state is InstantState.COMPLETED}
        return sorted({i.time for i in instants} - done)

    def read(self, instant: Instant) -> dict[str, Any]:
        """The completed metadata of a commit or replacecommit instant."""
        if instant.action == layout.COMMIT_ACTION:
            return self.table.read_commit_metadata(instant.time)
        try:
            data = orjson.loads(self.fs.read_bytes(self.path(instant.time, InstantState.COMPLETED)))
        except (FileNotFoundError, orjson.JSONDecodeError) as exc:
            raise TableFormatError(f"replacecommit {instant.time} unreadable: {exc}") from None
        if not isinstance(data, dict):
            raise TableFormatError(f"replacecommit {instant.time} is not a JSON object")
        return data

    def completed(self) -> list[Instant]:
        """Completed commit and replacecommit instants of the active timeline, oldest first."""
        return [i for i in self.table.list_instants() if i.state is InstantState.COMPLETED]

    def replaced_by(self) -> dict[tuple[str, str], str]:
        """(partition, fileId) → the completed replacecommit that replaced it."""
        out: dict[tuple[str, str], str] = {}
        for instant in self.completed():
            if instant.action == layout.REPLACE_ACTION:
                for group in replaced_groups(self.read(instant)):
                    out.setdefault(group, instant.time)
        return out

    # --- clean records ----------------------------------------------------------------------
    def clean_path(self, instant: str) -> str:
        if not is_instant_time(instant):
            raise TableFormatError(f"not an instant time: {instant!r}")
        return ensure_inside(self.table.base_path, layout.clean_record(instant))

    def write_clean(self, record: CleanRecord) -> None:
        """Record a clean (idempotent: an existing record of the same instant stands)."""
        self.fs.create_exclusive(self.clean_path(record.instant), orjson.dumps(record.to_json()))

    def cleans(self) -> list[CleanRecord]:
        directory = ensure_inside(self.table.base_path, layout.SINK_CLEAN_DIR)
        records = []
        for info in self.fs.list_dir(directory):
            if info.name.endswith(".json") and not info.is_dir:
                try:
                    records.append(CleanRecord.from_json(orjson.loads(self.fs.read_bytes(info.path))))
                except FileNotFoundError:
                    continue
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    raise TableFormatError(f"clean record {info.path} is corrupt: {exc}") from None
        return sorted(records, key=lambda r: r.instant)

    def remove_clean(self, instant: str) -> None:
        self.fs.delete(self.clean_path(instant))

    # --- archival ---------------------------------------------------------------------------
    def archived(self) -> list[Instant]:
        """Completed commit and replacecommit instants moved to ``.hoodie/.sink/archived/``,
        oldest first (one listing; an instant half-way through :meth:`archive` is on both)."""
        archive_dir = ensure_inside(self.table.base_path, layout.SINK_ARCHIVE_DIR)
        found = [instant for info in self.fs.list_dir(archive_dir)
                 if not info.is_dir and (instant := layout.parse_timeline_file(info.name))
                 is not None and instant.state is InstantState.COMPLETED]
        return sorted(found, key=lambda i: instant_key(i.time))

    def read_archived(self, instant: Instant) -> dict[str, Any]:
        """The metadata of an archived completed instant (its file is kept unchanged)."""
        suffix = (_SUFFIX if instant.action == layout.REPLACE_ACTION else _COMMIT_SUFFIX)[
            InstantState.COMPLETED]
        path = ensure_inside(self.table.base_path,
                             f"{layout.SINK_ARCHIVE_DIR}/{instant.time}.{suffix}")
        try:
            data = orjson.loads(self.fs.read_bytes(path))
        except (FileNotFoundError, orjson.JSONDecodeError) as exc:
            raise TableFormatError(f"archived {instant.action} {instant.time} unreadable: "
                                   f"{exc}") from None
        if not isinstance(data, dict):
            raise TableFormatError(f"archived {instant.action} {instant.time} is not a JSON object")
        return data

    def archive(self, instant: Instant) -> None:
        """Move a completed instant's timeline files to ``.hoodie/.sink/archived/``: copies
        first, then the requested and inflight files, the completed file last (a crash leaves
        the instant completed on the active timeline, and archiving again finishes it)."""
        suffixes = _SUFFIX if instant.action == layout.REPLACE_ACTION else _COMMIT_SUFFIX
        archive_dir = ensure_inside(self.table.base_path, layout.SINK_ARCHIVE_DIR)
        states = (InstantState.REQUESTED, InstantState.INFLIGHT, InstantState.COMPLETED)
        for state in states:
            source = f"{self.table.meta_path}/{instant.time}.{suffixes[state]}"
            try:
                data = self.fs.read_bytes(source)
            except FileNotFoundError:
                continue
            self.fs.write_atomic(posixpath.join(archive_dir, posixpath.basename(source)), data)
        for state in states:
            self.fs.delete(f"{self.table.meta_path}/{instant.time}.{suffixes[state]}")
