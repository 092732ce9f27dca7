"""What the table says about files: a per-table snapshot cache, plus the orphan scan.

The deleter answers "is this file dead?" from a :class:`TableSnapshot`: completed instants,
pending instants, rolled-back instants (ABORT decisions in the sink log) and every file the
completed commits list. Loading it means listing ``.hoodie`` and reading commit files, so it is
cached per table (PIP-186's ``ledgersCache``), with three guards that keep a cached answer
from ever being *less* safe than a fresh one:

- expiry: after ``deletion.cache_expiry_s`` the snapshot is rebuilt from scratch;
- staleness guard: an intent naming an instant newer than the snapshot's latest instant
  forces a refresh first (instant times only grow, so the snapshot cannot know it);
- the service re-checks any "not yet decidable" answer against a refreshed snapshot.

Why the cached "dead" answers stay true: completed and rolled-back are terminal states, and a
new commit only lists new files named with its own (newer) instant, so the set of listed
files only grows by names the staleness guard already catches. A CLEANED file's death rests
on facts that never turn false either: its group was replaced by a completed replacecommit,
or a completed commit lists a later slice of its group — completed is terminal, and a later
slice stays visible to readers even once its commit is archived (base files older than the
active timeline count as committed). The clean's earliest retained instant is fixed in its
record. A snapshot may *miss* such a fact (its commit was archived, or is newer than the
snapshot): the answer is then KEEP, the safe side, never DELETE.
"""

from __future__ import annotations

import asyncio
import posixpath
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.layout import PARTITION_METADATA_FILE, InstantState
from hudi_sink.shared.hudi.naming import instant_key, is_instant_time, parse_base_file_name
from hudi_sink.shared.hudi.replace import ReplaceTimeline, replaced_groups
from hudi_sink.shared.hudi.retention import outside_retention
from hudi_sink.shared.hudi.sink_log import SinkLog
from hudi_sink.shared.hudi.sink_log_state import EntryKind, SinkLogState, commit_finished
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.storage.fs import FileInfo, FileSystem

__all__ = [
    "TableSnapshot", "TableStateCache", "OrphanCandidate", "load_snapshot", "scan_orphans",
    "own_instant", "relative_path"
]

META_DIR = layout.METAFOLDER
TEMP_PREFIX = layout.TEMP_DIR + "/"
MIN_REFRESH_INTERVAL_S = 1.0
"""Forced refreshes (staleness guard, re-checks) of one table happen at most this often;
answers from a snapshot this fresh are as good as any, and a flood of forged intents naming
future instants must not turn into a flood of timeline listings."""



def normalize(path: str) -> str:
    """One spelling per path, so listed paths and intent paths compare equal (rule 7 of the
    deletion anchors: compare paths only after normalising them)."""
    return posixpath.normpath(path)


def relative_path(table_path: str, path: str) -> str | None:
    """``path`` relative to the table base, or None when it is not strictly inside it."""
    base = normalize(table_path)
    target = normalize(path)
    prefix = base.rstrip("/") + "/"
    if not target.startswith(prefix) or target == base:
        return None
    return target[len(prefix):]


def own_instant(relative: str) -> str | None:
    """The instant a file belongs to, read from its path, never from the intent.

    Staged files: ``.hoodie/.temp/<T>/...``; base files: ``<fileId>_<token>_<T>.parquet``.
    """
    if relative.startswith(TEMP_PREFIX):
        first = relative[len(TEMP_PREFIX):].split("/", 1)[0]
        return first if is_instant_time(first) else None
    parsed = parse_base_file_name(posixpath.basename(relative))
    return parsed.instant if parsed is not None else None


@dataclass(frozen=True)
class TableSnapshot:
    """The table's state at ``loaded_at`` (monotonic seconds), as far as deletion cares."""

    table_path: str
    completed: frozenset[str]
    pending: frozenset[str]
    """Started, not completed: timeline instants without ``.commit`` plus instants the sink
    log decided COMMIT that are not completed yet (a new leader will roll them forward)."""
    rolled_back: frozenset[str]
    """Instants the sink log decided ABORT: they can never complete."""
    listed_files: frozenset[str]
    """Normalised absolute paths of every file a completed commit lists."""
    latest_instant: str | None
    loaded_at: float
    replaced: Mapping[tuple[str, str], str] = field(default_factory=lambda: MappingProxyType({}))
    """(partition, fileId) → the completed replacecommit that replaced the file group."""
    cleans: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Recorded cleans (``.hoodie/.sink/clean``): clean instant → its earliest retained instant."""
    decided: frozenset[str] = frozenset()
    """Instants the sink log decided COMMIT (a clean among them may not be recorded yet)."""
    timeline_start: str | None = None
    """Earliest completed instant of the active timeline: base files of older instants were
    committed and archived (readers count them as committed, so they are live)."""

    def is_listed(self, path: str) -> bool:
        """Live: listed by a completed instant, or a base file archived as committed."""
        if normalize(path) in self.listed_files:
            return True
        relative = relative_path(self.table_path, path)
        return relative is not None and self._archived_committed(relative)

    def _archived_committed(self, relative: str) -> bool:
        if self.timeline_start is None or relative.split("/", 1)[0] == META_DIR:
            return False
        parsed = parse_base_file_name(posixpath.basename(relative))
        return (parsed is not None and parsed.instant not in self.pending
                and instant_key(parsed.instant) < instant_key(self.timeline_start))

    @cached_property
    def slices(self) -> Mapping[tuple[str, str], frozenset[str]]:
        """(partition, fileId) → instants of its slices that completed commits list."""
        out: dict[tuple[str, str], set[str]] = {}
        for path in self.listed_files:
            relative = relative_path(self.table_path, path)
            parsed = parse_base_file_name(posixpath.basename(path))
            if relative is not None and parsed is not None:
                out.setdefault((posixpath.dirname(relative), parsed.file_id), set()).add(
                    parsed.instant)
        return MappingProxyType({group: frozenset(times) for group, times in out.items()})

    def cleaned_by(self, path: str, clean: str) -> bool:
        """Whether recorded clean ``clean`` may remove the file, so that no retained instant
        (snapshot or time travel at or after the clean's earliest retained instant E) reads
        it: its file group was replaced by a completed replacecommit at or before E, or a
        completed commit lists a later slice of its group that is still before E (Hudi's
        KEEP_LATEST_COMMITS, ``shared.hudi.retention``: every slice at or after E and the
        group's latest slice before E stay; the latest slice of a group never goes)."""
        retained_from = self.cleans.get(clean)
        relative = relative_path(self.table_path, path)
        if retained_from is None or relative is None:
            return False
        parsed = parse_base_file_name(posixpath.basename(relative))
        if parsed is None:
            return False
        group = (posixpath.dirname(relative), parsed.file_id)
        by = self.replaced.get(group)
        if by is not None and instant_key(by) <= instant_key(retained_from):
            return True
        return outside_retention(parsed.instant, self.slices.get(group, ()), retained_from)

    def knows(self, instant: str) -> bool:
        """Whether ``instant`` is not newer than anything this snapshot has seen."""
        return self.latest_instant is not None and instant_key(instant) <= instant_key(
            self.latest_instant
        )

    def references(self, relative: str) -> bool:
        """Whether a live or possibly-live instant needs the file (orphan-scan subtraction):
        listed by a completed commit, or written for an instant that is still pending."""
        if self.is_listed(posixpath.join(self.table_path, relative)):
            return True
        instant = own_instant(relative)
        return instant is not None and instant in self.pending


@dataclass
class _Memo:
    """What one table's loader keeps between refreshes (only the loader thread touches it)."""

    log_state: SinkLogState = field(default_factory=SinkLogState)
    files_by_commit: dict[str, frozenset[str]] = field(default_factory=dict)
    replaced_by_commit: dict[str, frozenset[tuple[str, str]]] = field(default_factory=dict)


def _listed_files(table: HudiTable, instant: str, memo: _Memo) -> frozenset[str]:
    """Files a completed commit or replacecommit lists (and, for a replacecommit, the file
    groups it replaced, into ``memo``)."""
    metadata = table.read_commit_metadata(instant)
    memo.replaced_by_commit[instant] = frozenset(replaced_groups(metadata))
    paths: set[str] = set()
    for stats in (metadata.get("partitionToWriteStats") or {}).values():
        for stat in stats or ():
            path = stat.get("path") if isinstance(stat, dict) else None
            if isinstance(path, str) and path:
                paths.add(normalize(posixpath.join(table.base_path, path)))
    return frozenset(paths)


def load_snapshot(
    fs: FileSystem, table_path: str, memo: _Memo | None = None, *, now: float | None = None
) -> TableSnapshot:
    """Read the timeline and the sink log (blocking: run it in a worker thread).

    With a memo, only new sink log entries and newly completed commits are read: completed
    commit files never change, so their file lists are reused.
    """
    memo = memo if memo is not None else _Memo()
    table = HudiTable(fs, table_path)
    instants = table.list_instants()
    completed = {i.time for i in instants if i.state is InstantState.COMPLETED}
    timeline_pending = {i.time for i in instants} - completed
    log_state = SinkLog(fs, table.base_path).read_state(memo.log_state)
    memo.log_state = log_state
    rolled_back = {t for t, e in log_state.decisions.items() if e.kind is EntryKind.ABORT}
    decided_commit = {t for t, e in log_state.decisions.items() if e.kind is EntryKind.COMMIT}
    for instant in sorted(completed - memo.files_by_commit.keys()):
        memo.files_by_commit[instant] = _listed_files(table, instant, memo)
    for instant in list(memo.files_by_commit.keys() - completed):
        del memo.files_by_commit[instant]  # a restore or archival removed it: forget its files
        memo.replaced_by_commit.pop(instant, None)
    replaced = {group: instant for instant in sorted(memo.replaced_by_commit, key=instant_key)
                for group in memo.replaced_by_commit[instant]}
    cleans = {r.instant: r.earliest_retained for r in ReplaceTimeline(table).cleans()}
    listed = frozenset().union(*memo.files_by_commit.values()) if memo.files_by_commit else frozenset()
    # A decided COMMIT off the timeline that is older than the latest completed instant and
    # not pending was archived (or is a maintenance decision, never on the timeline): finished.
    latest_completed = max(completed, key=instant_key, default=None)
    every = completed | timeline_pending | log_state.decisions.keys()
    latest = max(every, key=instant_key, default=None)
    return TableSnapshot(
        table_path=table.base_path,
        completed=frozenset(completed | cleans.keys()),
        pending=frozenset(timeline_pending | {
            d for d in decided_commit - completed - cleans.keys()
            if not commit_finished(d, completed, timeline_pending, latest_completed)}),
        rolled_back=frozenset(rolled_back),
        listed_files=listed,
        latest_instant=latest,
        loaded_at=time.monotonic() if now is None else now,
        replaced=MappingProxyType(replaced),
        cleans=MappingProxyType(cleans),
        decided=frozenset(decided_commit),
        timeline_start=min(completed, key=instant_key, default=None),
    )


@dataclass
class _Entry:
    snapshot: TableSnapshot | None = None
    memo: _Memo = field(default_factory=_Memo)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    forced_at: float = float("-inf")


class TableStateCache:
    """Snapshots per table path, refreshed on expiry, on demand and by the staleness guard."""

    def __init__(
        self,
        fs: FileSystem,
        expiry_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        min_refresh_interval_s: float = MIN_REFRESH_INTERVAL_S,
    ) -> None:
        self._fs = fs
        self._expiry_s = expiry_s
        self._clock = clock
        self._min_refresh_s = min_refresh_interval_s
        self._tables: dict[str, _Entry] = {}
        self.loads = 0
        """Snapshots loaded so far (observability and tests)."""

    def _entry(self, table_path: str) -> _Entry:
        key = normalize(table_path)
        entry = self._tables.get(key)
        if entry is None:
            entry = self._tables[key] = _Entry()
        return entry

    async def get(self, table_path: str, instants: Sequence[str] = ()) -> TableSnapshot:
        """A snapshot fresh enough for an intent naming ``instants``.

        Reloads when there is none, when it expired (then from scratch, so nothing cached
        outlives the expiry), or when one of ``instants`` is newer than its latest instant.
        """
        entry = self._entry(table_path)
        async with entry.lock:
            now = self._clock()
            snap = entry.snapshot
            if snap is None or now - snap.loaded_at >= self._expiry_s:
                entry.memo = _Memo()
                return await self._load(entry, table_path)
            if any(not snap.knows(i) for i in instants) and now - entry.forced_at >= self._min_refresh_s:
                entry.forced_at = now
                return await self._load(entry, table_path)
            return snap

    async def refresh(self, table_path: str, *, max_age_s: float | None = None) -> TableSnapshot:
        """A snapshot at most ``max_age_s`` old (default ``min_refresh_interval_s``, enough to
        re-check a "not yet" answer; the orphan scan asks for 0)."""
        limit = self._min_refresh_s if max_age_s is None else max_age_s
        entry = self._entry(table_path)
        async with entry.lock:
            now = self._clock()
            snap = entry.snapshot
            if snap is not None and now - snap.loaded_at < limit:
                return snap
            entry.forced_at = now
            return await self._load(entry, table_path)

    async def _load(self, entry: _Entry, table_path: str) -> TableSnapshot:
        now = self._clock()
        snap = await asyncio.to_thread(load_snapshot, self._fs, table_path, entry.memo, now=now)
        entry.snapshot = snap
        self.loads += 1
        return snap


@dataclass(frozen=True)
class OrphanCandidate:
    """A file the reconcile scan found: on storage, referenced by no instant, old enough."""

    path: str
    size: int
    mtime: float
    age_s: float


def _scanned_files(fs: FileSystem, table_path: str) -> Iterator[tuple[str, FileInfo]]:
    """(relative path, info) of every file the scan considers: partition directories (all
    of the table but ``.hoodie``) and staging under ``.hoodie/.temp``."""
    base = table_path.rstrip("/") or "/"
    for info in fs.walk_files(base):
        relative = relative_path(base, info.path)
        if relative is None:
            continue
        if relative.split("/", 1)[0] == META_DIR and not relative.startswith(TEMP_PREFIX):
            continue
        if info.name == PARTITION_METADATA_FILE:
            continue  # Hudi's partition marker: no commit lists it, every reader needs it
        yield relative, info


def scan_orphans(
    fs: FileSystem, snapshot: TableSnapshot, *, now: float, min_age_s: float,
    first_seen: dict[str, float] | None = None,
) -> list[OrphanCandidate]:
    """Storage minus everything referenced, older than ``min_age_s`` (blocking I/O).

    ``snapshot`` must be loaded *before* the listing starts: a file referenced by an instant
    that completes during the scan was written for an instant the snapshot holds as pending,
    and a file of an instant started after the snapshot names an instant the snapshot does
    not know, so it is skipped even when the age floor is 0.

    A file whose mtime is its write's *start* (S3 stamps a multipart upload with the time it
    began: a slow upload looks old the moment it lands) is as old as the later of its mtime
    and the pass that first listed it. ``first_seen`` (path → time) carries those sightings
    from pass to pass; it is updated in place and keeps the paths of this pass only. Without
    it, every such file is first seen now.
    """
    previous = dict(first_seen or {})
    if first_seen is not None:
        first_seen.clear()
    found: list[OrphanCandidate] = []
    for relative, info in _scanned_files(fs, snapshot.table_path):
        if snapshot.references(relative):
            continue
        owner = own_instant(relative)
        if owner is not None and not snapshot.knows(owner):
            continue
        age = now - info.mtime
        if info.mtime_is_write_start:
            seen = previous.get(info.path, now)
            if first_seen is not None:
                first_seen[info.path] = seen
            age = min(age, now - seen)
        if age < min_age_s:
            continue
        found.append(OrphanCandidate(path=info.path, size=info.size, mtime=info.mtime, age_s=age))
    return found
