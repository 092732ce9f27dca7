"""The sink log's records and what they fold into — pure data, no I/O.

``LogEntry`` is one numbered decision file (EPOCH, COMMIT, ABORT); ``SinkLogState`` is what
a reader folds the entries into (latest epoch, decided instants); ``Checkpoint`` stands in
for the entries a trim removed; ``plan_trim`` says where a trim may put the floor without
dropping anything a roll-forward or the deleter still needs. The file layout and the
exclusive-create fence are ``shared.hudi.sink_log``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import orjson

from hudi_sink.shared.hudi.naming import instant_key

__all__ = [
    "Checkpoint",
    "DecisionRecord",
    "EntryKind",
    "LogEntry",
    "SinkLogState",
    "TrimPlan",
    "plan_trim",
    "commit_finished",
    "KEEP_ABORTS",
    "KEEP_ENTRIES",
    "TRIM_ABOVE",
    "MAX_REASON_CHARS",
]

log = logging.getLogger("hudi_sink.sink_log")

KEEP_ENTRIES = 40
"""Entries a trim leaves in the log: slack for readers that lag a little (they fold them
instead of reloading the checkpoint) and recent history for operators."""
TRIM_ABOVE = 60
"""Trim once the log holds more entries than this (so it holds 40–60 in steady state)."""
KEEP_ABORTS = 100
"""ABORT decisions below the floor remembered in a checkpoint (besides those of instants still
pending): deletion intents naming an aborted instant are decided within minutes, so the
newest hundred aborts cover them many times over, at a few kilobytes."""
MAX_REASON_CHARS = 500
"""An ABORT reason is kept in memory and in checkpoints up to this length (the entry keeps
the whole text)."""

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
    action: str = "commit"
    """COMMIT: the Hudi action it completes — ``commit`` (ingestion), ``replacecommit``
    (clustering) or ``clean`` (a sink-recorded clean, see ``shared.hudi.replace``)."""

    def to_bytes(self) -> bytes:
        return orjson.dumps(
            {
                "action": self.action,
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
            action=str(raw.get("action") or "commit"),
        )

    def summary(self) -> LogEntry:
        """The entry without metadata and moves: what folding needs, at a fraction of the size."""
        return replace(self, metadata=None, moves=[])

    def same_decision(self, other: LogEntry) -> bool:
        """Whether ``other`` decides exactly what this entry decides: same kind, epoch,
        instant and leader, and for a COMMIT the same action, metadata and moves. Number and
        time are not compared (a retried append carries new ones), nor an ABORT's reason (it
        only explains; rolling back twice is rolling back once)."""
        if (self.kind, self.epoch, self.instant, self.leader) != (
                other.kind, other.epoch, other.instant, other.leader):
            return False
        return self.kind is not EntryKind.COMMIT or self._content() == other._content()

    def _content(self) -> bytes:
        """A COMMIT's decided content as canonical JSON (what was read back compares equal
        to what was written, tuples and lists alike)."""
        return orjson.dumps([self.action, self.metadata, [list(m) for m in self.moves]],
                            option=orjson.OPT_SORT_KEYS)


@dataclass(frozen=True)
class DecisionRecord:
    """What the folded state remembers of one COMMIT or ABORT entry (the metadata and moves
    stay on disk: :meth:`SinkLog.read_entry` loads them for a roll-forward)."""

    seq: int
    kind: EntryKind
    epoch: int
    instant: str
    reason: str = ""

    @classmethod
    def of(cls, entry: LogEntry) -> DecisionRecord:
        assert entry.instant is not None
        return cls(entry.seq, entry.kind, entry.epoch, entry.instant,
                   entry.reason[:MAX_REASON_CHARS])

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind.value, "epoch": self.epoch,
                "instant": self.instant, "reason": self.reason}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> DecisionRecord:
        return cls(int(raw["seq"]), EntryKind(raw["kind"]), int(raw["epoch"]),
                   str(raw["instant"]), str(raw.get("reason", "")))


@dataclass(frozen=True)
class Checkpoint:
    """The folded state of every entry up to ``last_seq``; entries below ``floor`` may be gone.

    ``decisions`` holds every decision of an entry at or above ``floor`` and the ones below
    it that are still needed (see :func:`plan_trim`)."""

    floor: int
    last_seq: int
    epoch: int
    leader: dict[str, Any]
    decisions: dict[str, DecisionRecord]
    created_at: str = ""

    def to_bytes(self) -> bytes:
        return orjson.dumps({
            "version": 1,
            "floor": self.floor,
            "last_seq": self.last_seq,
            "epoch": self.epoch,
            "leader": self.leader,
            "decisions": [d.to_json() for d in sorted(self.decisions.values(), key=lambda d: d.seq)],
            "created_at": self.created_at,
        })

    @classmethod
    def from_bytes(cls, data: bytes) -> Checkpoint:
        raw = orjson.loads(data)
        decisions = [DecisionRecord.from_json(d) for d in raw["decisions"]]
        checkpoint = cls(
            floor=int(raw["floor"]),
            last_seq=int(raw["last_seq"]),
            epoch=int(raw["epoch"]),
            leader=dict(raw.get("leader") or {}),
            decisions={d.instant: d for d in decisions},
            created_at=str(raw.get("created_at", "")),
        )
        if not 1 <= checkpoint.floor <= checkpoint.last_seq + 1:
            raise ValueError(f"floor {checkpoint.floor} outside 1..{checkpoint.last_seq + 1}")
        return checkpoint


@dataclass
class SinkLogState:
    """What the log says, folded: the latest epoch and each remembered instant's decision."""

    last_seq: int = 0
    epoch: int = 0
    leader: dict[str, Any] = field(default_factory=dict)
    decisions: dict[str, DecisionRecord] = field(default_factory=dict)
    floor: int = 0
    """Floor of the checkpoint this state is aligned with (0: none seen). Decisions below it
    that the checkpoint did not keep are forgotten, as a fresh reader would."""

    def apply(self, entry: LogEntry) -> None:
        """Fold the next entry (callers fold in sequence; see :meth:`SinkLog.read_state`)."""
        self.last_seq = max(self.last_seq, entry.seq)
        if entry.kind is EntryKind.EPOCH:
            if entry.epoch >= self.epoch:
                self.epoch = entry.epoch
                self.leader = entry.leader
            return
        if entry.instant is None or entry.instant in self.decisions:
            # The first decision for an instant is the decision; later ones cannot exist
            # from a correct leader and are ignored if a bug ever wrote one.
            return
        if entry.epoch < self.epoch:
            # A correct appender of epoch E never wins a number after an EPOCH entry of a
            # newer epoch (its own next number is below that entry's), so this is no decision.
            log.warning("sink log entry %d: %s of %s by epoch %d after epoch %d ignored",
                        entry.seq, entry.kind.value, entry.instant, entry.epoch, self.epoch)
            return
        self.decisions[entry.instant] = DecisionRecord.of(entry)

    def restore(self, checkpoint: Checkpoint) -> None:
        """Replace everything with a checkpoint (this state lagged behind a trim)."""
        self.decisions = dict(checkpoint.decisions)
        self.epoch, self.leader = checkpoint.epoch, dict(checkpoint.leader)
        self.last_seq, self.floor = checkpoint.last_seq, checkpoint.floor

    def align(self, checkpoint: Checkpoint) -> None:
        """Forget what a checkpoint this state is already past forgot (bounded memory)."""
        self.decisions = {
            instant: record for instant, record in self.decisions.items()
            if record.seq >= checkpoint.floor or instant in checkpoint.decisions
        }
        self.floor = checkpoint.floor

    def rolled_back(self, instant: str) -> bool:
        entry = self.decisions.get(instant)
        return entry is not None and entry.kind is EntryKind.ABORT

    def committed(self, instant: str) -> bool:
        entry = self.decisions.get(instant)
        return entry is not None and entry.kind is EntryKind.COMMIT


@dataclass(frozen=True)
class TrimPlan:
    floor: int
    decisions: dict[str, DecisionRecord]


def _commit_finished(instant: str, completed: Collection[str], pending: Collection[str],
                     latest_completed: str | None) -> bool:
    """A decided COMMIT whose entry no roll-forward can need any more: its instant completed,
    or it is older than the latest completed instant and not pending (archived: a decided
    instant is never rolled back, so "not pending" means it completed)."""
    if instant in completed:
        return True
    return (latest_completed is not None and instant not in pending
            and instant_key(instant) < instant_key(latest_completed))


commit_finished = _commit_finished


def plan_trim(
    state: SinkLogState,
    *,
    completed: Collection[str],
    pending: Collection[str],
    keep_entries: int = KEEP_ENTRIES,
    keep_aborts: int = KEEP_ABORTS,
    done: Collection[str] = (),
) -> TrimPlan | None:
    """Where a trim of a log folded into ``state`` may put the floor, and what it must keep.

    ``completed``/``pending`` are the timeline's instants, read *after* ``state`` was
    folded. The floor stays at or below the newest ``keep_entries`` entries and every COMMIT
    entry whose instant is not finished. Kept decisions: all at or above the floor, ABORTs of
    instants still pending (their roll-back may not be done), and the newest ``keep_aborts``
    other ABORTs. None when the floor would not rise. ``done``: decided maintenance actions
    (clean, archive: never on the timeline) whose effect is done — finished too, so they do
    not pin the floor in a quiet period when no newer instant completes.
    """
    floor = state.last_seq - keep_entries + 1
    latest = max(completed, key=instant_key, default=None)
    for record in state.decisions.values():
        if record.kind is EntryKind.COMMIT and record.instant not in done and not _commit_finished(
                record.instant, completed, pending, latest):
            floor = min(floor, record.seq)
    if floor <= max(state.floor, 1):
        return None
    kept = {i: r for i, r in state.decisions.items() if r.seq >= floor}
    aborts = sorted((r for r in state.decisions.values()
                     if r.kind is EntryKind.ABORT and r.seq < floor), key=lambda r: r.seq)
    for record in aborts[len(aborts) - keep_aborts:] if keep_aborts > 0 else ():
        kept[record.instant] = record
    for record in aborts:
        if record.instant in pending:
            kept[record.instant] = record
    return TrimPlan(floor=floor, decisions=kept)
