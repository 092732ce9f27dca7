"""Every ``<T>.commit`` of a bench table, recorded the moment it appears.

Why not read the timeline at the end: archival (on by default) moves the oldest completed
instants out of ``.hoodie/`` once there are more than its limit, and an instant committed
every interval (empty ones included) reaches that limit within a long run. The archived copy
has a new mtime. So the bench watches the timeline while it runs and keeps each commit's
mtime, Kafka offsets and write-stat totals.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.offsets import offsets_from_metadata

__all__ = ["SeenCommit", "TimelineWatcher", "WriteTotals"]

POLL_S = 0.1


@dataclass(frozen=True)
class WriteTotals:
    """Sums over one commit's write stats: what upsert mode's write amplification is made of."""

    rows: int = 0
    """``numWrites``: every row in the files written (rows carried from old slices too)."""
    updates: int = 0
    """``numUpdateWrites``: rows that replaced a stored version of their key."""
    inserts: int = 0
    """``numInserts``: rows of keys new to the table (in insert mode every new row, rows carried
    into a new slice not counted)."""
    deletes: int = 0
    """``numDeletes``: stored rows left out of a new slice because their keys were deleted
    (a write amplification without a written row)."""
    bytes: int = 0
    """``fileSizeInBytes`` of every file written."""
    rewritten_bytes: int = 0
    """``fileSizeInBytes`` of the new slices written over an old one (``prevCommit`` set)."""

    @classmethod
    def of(cls, stats: list[dict[str, Any]]) -> WriteTotals:
        """Sums of the stats' JSON as written: leniently, since the bench also watches tables
        other writers made (Hudi's Kafka Connect sink), whose stats may leave fields out."""
        def total(name: str, rewritten: bool = False) -> int:
            return sum(int(s.get(name) or 0) for s in stats
                       if not rewritten or s.get("prevCommit") not in (None, "null"))

        return cls(rows=total("numWrites"), updates=total("numUpdateWrites"),
                   inserts=total("numInserts"), deletes=total("numDeletes"),
                   bytes=total("fileSizeInBytes"),
                   rewritten_bytes=total("fileSizeInBytes", rewritten=True))


@dataclass(frozen=True)
class SeenCommit:
    instant: str
    mtime: float
    offsets: dict[str, dict[int, int]]
    """Per topic, per partition: the next offset to consume (``kafka.commit.offsets``)."""
    files: tuple[str, ...] = ()
    """The base files the commit wrote, relative to the base path (``partitionToWriteStats``)."""
    writes: WriteTotals = WriteTotals()


class TimelineWatcher:
    def __init__(self, base_path: Path, topics: list[str]) -> None:
        self._timeline = base_path / layout.METAFOLDER
        self._topics = topics
        self._seen: dict[str, SeenCommit] = {}

    async def run(self) -> None:
        while True:
            await asyncio.to_thread(self.poll)
            await asyncio.sleep(POLL_S)

    def poll(self) -> None:
        for path in self._timeline.glob(layout.timeline_file("*", layout.COMMIT_SUFFIX)):
            instant = path.name.removesuffix(f".{layout.COMMIT_SUFFIX}")
            if instant in self._seen:
                continue
            # gone (archived) or not readable yet: the next poll decides
            with contextlib.suppress(OSError, orjson.JSONDecodeError):
                mtime = path.stat().st_mtime
                metadata = orjson.loads(path.read_bytes())
                extra = metadata.get("extraMetadata") or {}
                offsets: dict[str, dict[int, int]] = {topic: {} for topic in self._topics}
                for (topic, partition), offset in offsets_from_metadata(extra, self._topics).items():
                    offsets[topic][partition] = offset
                stats = [stat for stats in (metadata.get("partitionToWriteStats") or {}).values()
                         for stat in stats]
                files = tuple(stat["path"] for stat in stats if stat.get("path"))
                self._seen[instant] = SeenCommit(instant, mtime, offsets, files,
                                                 WriteTotals.of(stats))

    @property
    def commits(self) -> list[SeenCommit]:
        """Every commit seen, in instant order (17-digit instants sort as strings)."""
        return [self._seen[instant] for instant in sorted(self._seen)]

    def get(self, instant: str) -> SeenCommit | None:
        return self._seen.get(instant)

    def covering(self, topic: str, end_offsets: dict[int, int]) -> SeenCommit | None:
        """The first commit whose offsets reach ``end_offsets`` in every partition of ``topic``."""
        for commit in self.commits:
            offsets = commit.offsets.get(topic, {})
            if all(offsets.get(p, 0) >= end for p, end in end_offsets.items()):
                return commit
        return None

    def advancing(self, topic: str) -> set[str]:
        """Instants whose commit moved ``topic``'s offsets past every earlier commit's: the
        ones that made records visible (an empty instant's commit moves nothing)."""
        moved: set[str] = set()
        best: dict[int, int] = {}
        for commit in self.commits:
            offsets = commit.offsets.get(topic, {})
            if any(offset > best.get(p, 0) for p, offset in offsets.items()):
                moved.add(commit.instant)
            for p, offset in offsets.items():
                best[p] = max(best.get(p, 0), offset)
        return moved
