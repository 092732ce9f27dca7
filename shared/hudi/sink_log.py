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

5. An entry of epoch ``E`` at the number an appender of ``E`` tries is that appender's own.
   Epoch ``E`` is claimed by exactly one EPOCH entry: a claimer folds the log gap-free and
   takes ``E = folded epoch + 1`` at the next number, so a second claimer of ``E`` either
   loses that number or folds the first claim and takes ``E + 1``. Only the claimer's
   committer appends under ``E``, one append at a time, each at the number after its last
   recorded one; a taken number holding an ``E`` entry is therefore an append of its own
   whose create landed although the call raised (:meth:`SinkLog.won_by`). The committer
   adopts it (folds it, moves past it) instead of calling itself fenced; if it decides the
   same as the append being made, that append is done. Another epoch's entry is never
   adopted.

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
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from hudi_sink.shared.errors import FencedError, TableFormatError
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.sink_log_state import (
    Checkpoint,
    DecisionRecord,
    EntryKind,
    LogEntry,
    SinkLogState,
    TrimPlan,
)
from hudi_sink.shared.storage.fs import FileSystem

__all__ = ["SinkLog", "decided_as"]
# The records and their fold live in shared.hudi.sink_log_state; they are re-exported here so
# callers that hold a SinkLog import one module.

log = logging.getLogger("hudi_sink.sink_log")

SINK_DIR = layout.SINK_DIR
LOG_DIR = layout.SINK_LOG_DIR
CHECKPOINT_DIR = layout.SINK_CHECKPOINT_DIR

_MAX_READ_ROUNDS = 20
_T = TypeVar("_T")


def _seq_of(name: str) -> int | None:
    stem = name.removesuffix(".json")
    return int(stem) if name.endswith(".json") and stem.isdigit() else None


def decided_as(wanted: LogEntry, ours: LogEntry) -> bool:
    """Whether our own earlier entry ``ours`` already decides ``wanted``. TableFormatError
    when it decides the same instant otherwise: that decision stands (a later leader rolls
    it forward or back as written), so the new one must not be carried out."""
    if ours.instant != wanted.instant or ours.kind is EntryKind.EPOCH:
        return False
    if ours.same_decision(wanted):
        return True
    raise TableFormatError(
        f"{wanted.instant}: this epoch already decided {ours.kind.value} ({ours.action}) in "
        f"sink log entry {ours.seq}; a different {wanted.kind.value} ({wanted.action}) cannot "
        "be decided too")


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

    def won_by(self, seq: int, epoch: int) -> LogEntry | None:
        """The entry at ``seq`` when it is a won entry of ``epoch``, made durable again; None
        when the number holds another epoch's entry, is gone, or is a stray below the floor.

        For an appender whose number is taken: an entry of its own epoch there is its own
        append that landed although the call raised (a lost response, a failed floor read
        or directory sync after the create; module docstring, point 5). The floor is read
        after the entry, as ``try_append`` does (point 3). The sync repeats the one the create
        may have failed at (no-ops on object stores, where a completed PUT is durable)."""
        entry = self._read(seq)
        if entry is None or entry.epoch != epoch or seq < self.floor():
            return None
        self._fs.fsync_file(self._path(seq))
        self._fs.fsync_dir(self._dir)
        return entry

    def append_own(self, entry: LogEntry, earlier: DecisionRecord | None = None
                   ) -> tuple[LogEntry, bool]:
        """Append ``entry`` as the leader of its epoch: at its number, or past entries of that
        epoch found there (its own appends that landed although the call raised; point 5).

        Returns the entry holding the decision and whether an earlier entry of the epoch was
        found (the caller's fold must read the log again). That entry is ``entry``
        (renumbered), or an earlier one deciding the same — then nothing new is written:
        at a number tried now, or ``earlier``, the instant's folded decision when the
        caller holds one. FencedError when a number holds another epoch's entry or was
        trimmed; TableFormatError (``decided_as``) when our own entry decided the instant
        otherwise.
        """
        if earlier is not None and earlier.epoch == entry.epoch:
            found = (self.read_entry(earlier.seq) if earlier.kind is entry.kind is EntryKind.COMMIT
                     else LogEntry(earlier.seq, earlier.kind, earlier.epoch, earlier.instant))
            if decided_as(entry, found):
                return found, True
        adopted = False
        while not self.try_append(entry):
            ours = self.won_by(entry.seq, entry.epoch)
            if ours is None:
                raise FencedError(
                    f"sink log seq {entry.seq} already taken: a newer coordinator epoch than "
                    f"{entry.epoch} owns the table")
            log.warning("sink log entry %d (%s %s) is ours although its append failed: adopted",
                        ours.seq, ours.kind.value, ours.instant)
            adopted = True
            if decided_as(entry, ours):
                return ours, True
            entry = replace(entry, seq=ours.seq + 1)
        return entry, adopted

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
