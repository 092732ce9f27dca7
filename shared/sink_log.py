"""The sink's decision log under ``.hoodie/.sink/log/``: epochs and commit/abort decisions.

Why a log: checking "am I still the leader?" and then renaming a commit file races with a
new leader. Here every decision is one entry ``<seq>.json`` created *exclusively*
(``FileSystem.create_exclusive``: ``os.link`` locally, ``If-None-Match: *`` on object
stores). A new leader appends an EPOCH entry at the next free sequence number; a zombie
leader that then tries to append its COMMIT at that same number fails and learns it is
fenced. Whoever wins a sequence number wins the decision; nothing is checked-then-acted.

A COMMIT entry holds the complete Hudi commit metadata and the staged → final moves, so any
later leader can roll a half-finished commit forward. An ABORT entry names the rolled-back
instant, which is how the deleter tells "rolled back" from "still inflight".

Limits: local files need a filesystem where ``link(2)`` is atomic (every POSIX local fs; not
some network filesystems). Object stores need conditional PUT (S3, GCS, ABFS all have it).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from shared.errors import FencedError, TableFormatError
from shared.fs import FileSystem

__all__ = ["EntryKind", "LogEntry", "SinkLog", "SinkLogState"]

SINK_DIR = ".hoodie/.sink"
LOG_DIR = f"{SINK_DIR}/log"


class EntryKind(StrEnum):
    EPOCH = "epoch"
    COMMIT = "commit"
    ABORT = "abort"


@dataclass(frozen=True)
class LogEntry:
    seq: int
    kind: EntryKind
    epoch: int
    instant: str | None = None
    leader: dict[str, Any] = field(default_factory=dict)
    """EPOCH: who leads (member id, host, admin url)."""
    metadata: dict[str, Any] | None = None
    """COMMIT: the full Hudi commit metadata to write as ``<T>.commit``."""
    moves: list[tuple[str, str]] = field(default_factory=list)
    """COMMIT: (staged path, final path), relative to the base path."""
    reason: str = ""
    created_at: str = ""

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {
                "seq": self.seq,
                "kind": self.kind.value,
                "epoch": self.epoch,
                "instant": self.instant,
                "leader": self.leader,
                "metadata": self.metadata,
                "moves": [list(m) for m in self.moves],
                "reason": self.reason,
                "created_at": self.created_at,
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> LogEntry:
        raw = orjson.loads(data)
        return cls(
            seq=int(raw["seq"]),
            kind=EntryKind(raw["kind"]),
            epoch=int(raw["epoch"]),
            instant=raw.get("instant"),
            leader=raw.get("leader") or {},
            metadata=raw.get("metadata"),
            moves=[(str(a), str(b)) for a, b in raw.get("moves") or []],
            reason=raw.get("reason", ""),
            created_at=raw.get("created_at", ""),
        )


@dataclass
class SinkLogState:
    """What the log says, folded: the latest epoch and each instant's decision."""

    last_seq: int = 0
    epoch: int = 0
    leader: dict[str, Any] = field(default_factory=dict)
    decisions: dict[str, LogEntry] = field(default_factory=dict)

    def apply(self, entry: LogEntry) -> None:
        self.last_seq = max(self.last_seq, entry.seq)
        if entry.kind is EntryKind.EPOCH:
            if entry.epoch >= self.epoch:
                self.epoch = entry.epoch
                self.leader = entry.leader
        elif entry.instant is not None and entry.instant not in self.decisions:
            # The first decision for an instant is the decision; later ones cannot exist
            # from a correct leader and are ignored if a bug ever wrote one.
            self.decisions[entry.instant] = entry

    def rolled_back(self, instant: str) -> bool:
        entry = self.decisions.get(instant)
        return entry is not None and entry.kind is EntryKind.ABORT

    def committed(self, instant: str) -> bool:
        entry = self.decisions.get(instant)
        return entry is not None and entry.kind is EntryKind.COMMIT


class SinkLog:
    """Append-only, exclusively-created entries; one writer wins each sequence number."""

    def __init__(self, fs: FileSystem, base_path: str) -> None:
        self._fs = fs
        self._dir = posixpath.join(base_path, LOG_DIR)

    def _path(self, seq: int) -> str:
        return posixpath.join(self._dir, f"{seq:012d}.json")

    def read_state(self, since: SinkLogState | None = None) -> SinkLogState:
        """Fold every entry (or only those after ``since.last_seq``) into a state."""
        state = since if since is not None else SinkLogState()
        seqs = []
        for info in self._fs.list_dir(self._dir):
            stem = info.name.removesuffix(".json")
            if info.name.endswith(".json") and stem.isdigit():
                seqs.append(int(stem))
        for seq in sorted(seqs):
            if seq <= state.last_seq:
                continue
            try:
                entry = LogEntry.from_bytes(self._fs.read_bytes(self._path(seq)))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise TableFormatError(f"sink log entry {self._path(seq)} is corrupt: {exc}") from exc
            state.apply(entry)
        return state

    def try_append(self, entry: LogEntry) -> bool:
        """Create entry ``entry.seq`` exclusively; False if that number is already taken."""
        return self._fs.create_exclusive(self._path(entry.seq), entry.to_bytes())

    def append_or_fence(self, entry: LogEntry) -> None:
        """Append as the current leader; a taken number means a newer leader exists."""
        if not self.try_append(entry):
            raise FencedError(
                f"sink log seq {entry.seq} already taken: a newer coordinator epoch than "
                f"{entry.epoch} owns the table"
            )
