"""The anchors' tables, read from their files: which commit made which bench record visible.

Each anchor writes its own table format, so each has a reader that lists, commit by commit,
the moment the commit became visible and the data files it added:

- Apache Iceberg (Hadoop catalog): a commit is the atomic creation of
  ``metadata/v<N>.metadata.json``; its mtime is the moment readers can see it. A version's new
  snapshots list their data files in Avro manifests (read with fastavro); an entry counts when
  its status is ADDED by that snapshot, so files carried over by a merged manifest do not.
- Apache Hudi (table version 6, as hudi-sink writes): ``.hoodie/<T>.commit``, its mtime, and
  the files of its ``partitionToWriteStats`` (:class:`.timeline.TimelineWatcher`).

:class:`Visibility` then reads the ``id`` column of every added file: a bench record's id is
``<run>-<n>`` (:class:`.data.RecordMaker`), so the first commit holding an id is when that
record became visible, whatever the format, with no trust in a connector's own bookkeeping.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

import fastavro
import orjson
import pyarrow.parquet as pq

from hudi_sink.cli.bench.timeline import TimelineWatcher

__all__ = ["TableCommit", "IcebergCommits", "HudiCommits", "Visibility"]

_VERSION_FILE = re.compile(r"^v(\d+)\.metadata\.json$")
_ADDED = 1
"""Iceberg manifest entry status: 0 EXISTING, 1 ADDED, 2 DELETED."""


@dataclass(frozen=True)
class TableCommit:
    at: float
    """When readers could first see it (the mtime of the file whose creation commits it)."""
    files: tuple[Path, ...]
    """The data files it added."""


def _local(uri: str) -> Path:
    """A ``file:`` URI (or a plain path) as a local path."""
    parsed = urlparse(uri)
    return Path(unquote(parsed.path)) if parsed.scheme in ("file", "") else Path(uri)


def _avro_records(path: Path) -> list[dict[str, object]]:
    with path.open("rb") as handle:
        return [record for record in fastavro.reader(handle) if isinstance(record, dict)]


class IcebergCommits:
    """New commits of an Iceberg table kept by a Hadoop catalog at ``table_dir``."""

    def __init__(self, table_dir: Path) -> None:
        self._metadata = table_dir / "metadata"
        self._version = 0
        self._snapshots: set[int] = set()
        self.total_records = 0
        """``total-records`` of the current snapshot (Iceberg's own count)."""

    def poll(self) -> list[TableCommit]:
        """Commits that appeared since the last call, oldest first. A version file that does
        not parse yet is left for the next call (the Hadoop catalog renames complete files
        into place, so that only happens for a file being replaced)."""
        versions = sorted((int(m.group(1)), path) for path in self._metadata.glob("v*.metadata.json")
                          if (m := _VERSION_FILE.match(path.name)))
        found: list[TableCommit] = []
        for number, path in versions:
            if number <= self._version:
                continue
            try:
                at = path.stat().st_mtime
                metadata = orjson.loads(path.read_bytes())
            except (OSError, orjson.JSONDecodeError):
                break
            self._version = number
            current = metadata.get("current-snapshot-id")
            for snapshot in metadata.get("snapshots") or []:
                snapshot_id = int(snapshot["snapshot-id"])
                if snapshot_id == current:
                    self.total_records = int(snapshot.get("summary", {}).get("total-records", 0))
                if snapshot_id in self._snapshots:
                    continue
                self._snapshots.add(snapshot_id)
                found.append(TableCommit(at, tuple(self._added_files(snapshot))))
        return found

    def _added_files(self, snapshot: dict[str, object]) -> Iterable[Path]:
        snapshot_id = int(str(snapshot["snapshot-id"]))
        for manifest in _avro_records(_local(str(snapshot["manifest-list"]))):
            if manifest.get("added_snapshot_id") != snapshot_id or manifest.get("content", 0) != 0:
                continue
            for entry in _avro_records(_local(str(manifest["manifest_path"]))):
                added_by = entry.get("snapshot_id")
                if entry.get("status") == _ADDED and added_by in (None, snapshot_id):
                    data_file = entry["data_file"]
                    assert isinstance(data_file, dict)
                    yield _local(str(data_file["file_path"]))


class HudiCommits:
    """New commits of a Hudi table (timeline layout of table version 6) at ``base_path``."""

    def __init__(self, base_path: Path, topic: str) -> None:
        self._base_path = base_path
        self._watcher = TimelineWatcher(base_path, [topic])
        self._seen: set[str] = set()

    def poll(self) -> list[TableCommit]:
        if (self._base_path / ".hoodie" / "timeline").is_dir():
            raise RuntimeError(f"{self._base_path} has the timeline layout of Hudi table version 8 "
                               "(.hoodie/timeline/); the bench reads version 6 tables")
        self._watcher.poll()
        found: list[TableCommit] = []
        for commit in self._watcher.commits:
            if commit.instant not in self._seen:
                self._seen.add(commit.instant)
                found.append(TableCommit(commit.mtime, tuple(self._base_path / f for f in commit.files)))
        return found


@dataclass
class Visibility:
    """When each bench record became visible: the backlog's (run ``backlog``, ``records`` of
    them) and any later run's (a steady load), from the ids in the files each commit added."""

    backlog: str
    records: int
    commits: list[float] = field(default_factory=list)
    """Every commit's time, in the order seen."""
    backlog_done_at: float | None = None
    """The commit that made the last backlog record visible."""
    commits_to_backlog: int = 0
    first_seen: dict[str, dict[int, float]] = field(default_factory=dict)
    """Per run id: record number → when it first became visible."""

    def add(self, commit: TableCommit) -> None:
        """Note one commit (commits in order): the ids of its files, first sightings only (a
        rewritten Hudi file group carries earlier records again)."""
        self.commits.append(commit.at)
        for path in commit.files:
            for record_id in pq.read_table(path, columns=["id"]).column("id").to_pylist():
                run, _, number = str(record_id).rpartition("-")
                if run and number.isdigit():
                    self.first_seen.setdefault(run, {}).setdefault(int(number), commit.at)
        if self.backlog_done_at is None and self.seen(self.backlog) >= self.records:
            self.backlog_done_at = commit.at
            self.commits_to_backlog = len(self.commits)

    def seen(self, run: str) -> int:
        return len(self.first_seen.get(run, {}))

    def latencies(self, run: str, timestamps: dict[int, list[float]], partitions: int) -> list[float]:
        """Seconds from each record's Kafka timestamp to the commit that made it visible, for
        a run whose record ``n`` is the ``n // partitions``-th of partition ``n % partitions``
        (``timestamps``: per partition, in offset order). Records not yet visible are left out."""
        seen = self.first_seen.get(run, {})
        latencies: list[float] = []
        for partition, stamps in timestamps.items():
            for index, stamp in enumerate(stamps):
                at = seen.get(index * partitions + partition)
                if at is not None:
                    latencies.append(at - stamp)
        return latencies
