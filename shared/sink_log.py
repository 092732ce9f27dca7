"""The sink's decision log under ``.hoodie/.sink/``: epochs and commit/abort decisions.

Why a log: checking "am I still the leader?" and then renaming a commit file races with a
new leader. Here every decision is one entry ``log/<seq>.json`` created *exclusively*
(``FileSystem.create_exclusive``: ``os.link`` locally, ``If-None-Match: *`` on object
stores). A new leader appends an EPOCH entry at the next free sequence number; a zombie
leader that then tries to append its COMMIT at that same number fails and learns it is
fenced. Whoever wins a sequence number wins the decision; nothing is checked-then-acted.

A COMMIT entry holds the complete Hudi commit metadata and the staged → final moves, so any
later leader can roll a half-finished commit forward (:meth:`SinkLog.read_entry`). An ABORT
entry names the rolled-back instant, which is how the deleter tells "rolled back" from
"still inflight". In memory (:class:`SinkLogState`) only small :class:`DecisionRecord` s are
kept — kind, epoch, seq, instant, reason — never the metadata.

Reading is gap-safe: entries are folded strictly in sequence from ``last_seq + 1`` by reading
``<seq>.json`` directly, and folding stops at the first missing number, so an entry that
appears late is never skipped. A refresh costs one read per new entry, one failed read and
one listing of the checkpoint directory (which holds one or two files).

Trimming (bounded log, bounded memory)
--------------------------------------
A trimmer writes a checkpoint ``checkpoint/<floor>.json`` — created exclusively, holding the
folded state (epoch, leader, ``last_seq``, the decisions still needed) — and only then
deletes the entries below ``floor``. The floor in force is the highest checkpoint present;
floors never go down (each is its own exclusively created file, and a checkpoint is only
deleted below two higher ones that exist). :func:`plan_trim` never puts the floor above a
COMMIT entry whose instant is not finished on the timeline (a roll-forward reads it), and
keeps in the checkpoint every ABORT of an instant still pending plus the newest
``KEEP_ABORTS`` others (the deleter recognises rolled-back instants by them).

Why the fence holds with trimming. Claim: once a sequence number ``s`` has been won, no
other appender's :meth:`SinkLog.try_append` for ``s`` returns True.

1. While entry ``s`` exists, nobody else can create it (exclusive create).
2. Entry ``s`` is deleted only after a checkpoint with ``floor > s`` was durably created
   (``create_exclusive`` fsyncs content and directory before returning, and trimming deletes
   nothing before that), and from then on the floor in force stays ``> s``. Reading the
   floor lists the checkpoint directory; a listing may miss files created or deleted while
   it runs, so a trim deletes only checkpoints below the newest two: a listing then misses
   every checkpoint above ``s`` only if it spans two whole trims (each at least
   ``TRIM_ABOVE - KEEP_ENTRIES`` appends apart), which a listing of three files does not.
3. ``try_append`` reads the floor *after* its exclusive create succeeded. If ``s`` had been
   won and deleted before, the create came after the deletion, which came after the
   checkpoint: the floor it reads is ``> s``, so it reports the number as taken (and removes
   its stray file). If the floor it reads is ``<= s``, then by 2 ``s`` was never deleted, so
   by 1 nobody held it before: it is the first and only winner.
4. Readers never fold a stray file: after reading new entries they read the floor; when it
   is above the first number they read, that whole round is discarded and the state is
   restarted from the checkpoint. A stray is created after a deletion that followed its
   checkpoint, and the reader's floor read follows its read of the stray, so it sees that
   checkpoint. Entries at or above the floor are never strays (by 3).

So a zombie whose next number was trimmed is fenced exactly like one whose number is taken.
A fenced appender acts on nothing: the committer raises ``FencedError`` before any file move
or deletion. A crash mid-trim leaves entries below the floor; readers never start there and
the next trim deletes them.

Limits: local files need a filesystem where ``link(2)`` is atomic (every POSIX local fs; not
some network filesystems). Object stores need conditional PUT (S3, GCS, ABFS all have it) and
read-after-write consistent listings of the checkpoint prefix (all three today).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, TypeVar

import orjson

from shared.errors import FencedError, TableFormatError
from shared.fs import FileSystem
from shared.hudi import layout
from shared.hudi.naming import instant_key

__all__ = [
    "Checkpoint",
    "DecisionRecord",
    "EntryKind",
    "LogEntry",
    "SinkLog",
    "SinkLogState",
    "TrimPlan",
    "plan_trim",
    "KEEP_ABORTS",
    "KEEP_ENTRIES",
    "TRIM_ABOVE",
]

log = logging.getLogger("hudi_sink.sink_log")

SINK_DIR = layout.SINK_DIR
LOG_DIR = layout.SINK_LOG_DIR
CHECKPOINT_DIR = layout.SINK_CHECKPOINT_DIR

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
_MAX_READ_ROUNDS = 20
_T = TypeVar("_T")


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

    def summary(self) -> LogEntry:
        """The entry without metadata and moves: what folding needs, at a fraction of the size."""
        return replace(self, metadata=None, moves=[])


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


def plan_trim(
    state: SinkLogState,
    *,
    completed: Collection[str],
    pending: Collection[str],
    keep_entries: int = KEEP_ENTRIES,
    keep_aborts: int = KEEP_ABORTS,
) -> TrimPlan | None:
    """Where a trim of a log folded into ``state`` may put the floor, and what it must keep.

    ``completed``/``pending`` are the timeline's instants, read *after* ``state`` was
    folded. The floor stays at or below the newest ``keep_entries`` entries and every COMMIT
    entry whose instant is not finished. Kept decisions: all at or above the floor, ABORTs of
    instants still pending (their roll-back may not be done), and the newest ``keep_aborts``
    other ABORTs. None when the floor would not rise.
    """
    floor = state.last_seq - keep_entries + 1
    latest = max(completed, key=instant_key, default=None)
    for record in state.decisions.values():
        if record.kind is EntryKind.COMMIT and not _commit_finished(
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


def _seq_of(name: str) -> int | None:
    stem = name.removesuffix(".json")
    return int(stem) if name.endswith(".json") and stem.isdigit() else None


class SinkLog:
    """Exclusively created, gap-free numbered entries plus checkpoints; one writer wins each
    sequence number, also after the entries below a checkpoint were trimmed."""

    def __init__(self, fs: FileSystem, base_path: str) -> None:
        self._fs = fs
        self._dir = posixpath.join(base_path, LOG_DIR)
        self._checkpoint_dir = posixpath.join(base_path, CHECKPOINT_DIR)

    def _path(self, seq: int) -> str:
        return posixpath.join(self._dir, f"{seq:012d}.json")

    def _checkpoint_path(self, floor: int) -> str:
        return posixpath.join(self._checkpoint_dir, f"{floor:012d}.json")

    # --- reading --------------------------------------------------------------------------
    def _load(self, path: str, parse: Callable[[bytes], _T]) -> _T | None:
        """A parsed log or checkpoint file; None when missing; TableFormatError when corrupt."""
        try:
            data = self._fs.read_bytes(path)
        except FileNotFoundError:
            return None
        try:
            return parse(data)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise TableFormatError(f"sink log file {path} is corrupt: {exc!r}") from exc

    def _read(self, seq: int) -> LogEntry | None:
        entry = self._load(self._path(seq), LogEntry.from_bytes)
        if entry is not None and entry.seq != seq:
            raise TableFormatError(f"sink log file {self._path(seq)} holds entry {entry.seq}")
        return entry

    def read_entry(self, seq: int) -> LogEntry:
        """One whole entry (a COMMIT's metadata and moves, for a roll-forward)."""
        entry = self._read(seq)
        if entry is None:
            raise TableFormatError(f"sink log entry {self._path(seq)} is missing")
        return entry

    def _entry_seqs(self) -> list[int]:
        return sorted(s for info in self._fs.list_dir(self._dir)
                      if (s := _seq_of(info.name)) is not None)

    def _checkpoint_floors(self) -> list[int]:
        return sorted(f for info in self._fs.list_dir(self._checkpoint_dir)
                      if (f := _seq_of(info.name)) is not None)

    def floor(self) -> int:
        """The floor in force: entries below it may be gone (0 when never trimmed)."""
        floors = self._checkpoint_floors()
        return floors[-1] if floors else 0

    def _checkpoint(self, floor: int) -> Checkpoint | None:
        """The checkpoint at ``floor``; None when a newer trim removed it meanwhile."""
        checkpoint = self._load(self._checkpoint_path(floor), Checkpoint.from_bytes)
        if checkpoint is not None and checkpoint.floor != floor:
            raise TableFormatError(
                f"sink log checkpoint {self._checkpoint_path(floor)} has floor {checkpoint.floor}")
        return checkpoint

    def read_state(self, since: SinkLogState | None = None) -> SinkLogState:
        """Fold the entries after ``since.last_seq`` (all, without ``since``) into a state.

        ``since`` is updated in place and returned. Folding stops at the first missing
        number. A state that lags behind a trim restarts from the checkpoint; one that is
        past a new checkpoint forgets what the checkpoint forgot.
        """
        state = since if since is not None else SinkLogState()
        for _ in range(_MAX_READ_ROUNDS):
            start = state.last_seq + 1
            batch: list[LogEntry] = []
            while (entry := self._read(start + len(batch))) is not None:
                batch.append(entry.summary())
            floor = self.floor()  # after the entries: see point 4 of the module docstring
            if floor > start:
                checkpoint = self._checkpoint(floor)
                if checkpoint is not None:
                    state.restore(checkpoint)
                continue  # discard the round: it may have read a fenced appender's stray
            for entry in batch:
                state.apply(entry)
            if floor > state.floor:
                checkpoint = self._checkpoint(floor)
                if checkpoint is None:
                    continue
                state.align(checkpoint)
            if state.last_seq == 0 and floor == 0:
                seqs = self._entry_seqs()
                if seqs and seqs[0] == 1:
                    continue  # entry 1 appeared meanwhile
                if seqs:
                    raise TableFormatError(
                        f"sink log {self._dir} starts at entry {seqs[0]} and has no checkpoint: "
                        "entries were removed by hand; restore them or the checkpoint directory"
                    )
            return state
        raise TableFormatError(f"sink log {self._dir} was trimmed under every read; try again")

    # --- appending ------------------------------------------------------------------------
    def try_append(self, entry: LogEntry) -> bool:
        """Create entry ``entry.seq`` exclusively; False if that number is (or was) taken."""
        path = self._path(entry.seq)
        if not self._fs.create_exclusive(path, entry.to_bytes()):
            return False
        if entry.seq < self.floor():
            # The number was won long ago and trimmed (module docstring, point 3): this file
            # is a stray no reader folds; remove it so it does not linger until the next trim.
            self._fs.delete(path)
            return False
        return True

    def append_or_fence(self, entry: LogEntry) -> None:
        """Append as the current leader; a taken number means a newer leader exists."""
        if not self.try_append(entry):
            raise FencedError(
                f"sink log seq {entry.seq} already taken: a newer coordinator epoch than "
                f"{entry.epoch} owns the table"
            )

    # --- trimming -------------------------------------------------------------------------
    def trim(self, state: SinkLogState, plan: TrimPlan, created_at: str = "") -> int:
        """Checkpoint ``state`` at ``plan.floor``, then delete entries and checkpoints below the
        floor in force; returns that floor. Refresh ``state`` afterwards to drop what the
        checkpoint forgot. ``state`` must be folded gap-free up to at least ``plan.floor - 1``.
        """
        if not 1 <= plan.floor <= state.last_seq + 1:
            raise ValueError(f"trim floor {plan.floor} outside 1..{state.last_seq + 1}")
        if plan.floor > self.floor():
            checkpoint = Checkpoint(plan.floor, state.last_seq, state.epoch, dict(state.leader),
                                    dict(plan.decisions), created_at)
            # False: another trimmer checkpointed the same floor first; its record stands.
            self._fs.create_exclusive(self._checkpoint_path(plan.floor), checkpoint.to_bytes())
        return self.remove_below_floor()

    def remove_below_floor(self) -> int:
        """Delete the entries below the floor in force and all but the newest two checkpoints
        (finishes a trim that failed or crashed after its checkpoint); returns the floor."""
        floor = self.floor()  # after the caller's checkpoint is durable: never below its floor
        for seq in self._entry_seqs():
            if seq >= floor:
                break
            self._fs.delete(self._path(seq))
        for old in self._checkpoint_floors()[:-2]:
            # The newest two stay: a listing returns every file present throughout it, so
            # a floor read finds a checkpoint at least as high as any that existed when it
            # began unless it spans two whole trims (module docstring, point 2).
            self._fs.delete(self._checkpoint_path(old))
        log.info("sink log trimmed below entry %d", floor)
        return floor
