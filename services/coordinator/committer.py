"""Everything the coordinator does to the table, fenced through the sink log. Synchronous on
purpose (plain file I/O): the service calls these in worker threads.

Order of a commit (the fence first):
1. every listed staged file exists with the size its status reported;
2. every listed staged file made durable (fsynced, then each directory once): Spark never
   syncs, and after a power loss a decided commit must find whole files to roll forward;
3. COMMIT entry appended to the sink log at our next number — the point of no return and the
   fence: it fails if a newer epoch took that number (our own epoch's entry there is adopted);
4. listed files moved from staging into their partitions, durably, before the commit file;
5. ``<T>.commit`` created (exclusively, durably) — readers see the instant from here on;
6. unlisted staged files of T discarded (never visible: they are in ``.hoodie/.temp``);
7. the sink log trimmed when it grew past ``trim_above`` entries (``shared.hudi.sink_log``).
A crash between 3 and 5 is rolled forward by the next leader from the log entry.
"""

from __future__ import annotations

import logging
import posixpath
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hudi_sink.services.coordinator.disposal import StagedFileDisposal
from hudi_sink.shared.errors import FencedError, HudiSinkError, TableFormatError
from hudi_sink.shared.hudi import layout, sink_log_state
from hudi_sink.shared.hudi.layout import InstantState
from hudi_sink.shared.hudi.naming import instant_key
from hudi_sink.shared.hudi.sink_log import SinkLog
from hudi_sink.shared.hudi.sink_log_state import (
    DecisionRecord,
    EntryKind,
    LogEntry,
    SinkLogState,
    commit_finished,
)
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.hudi.write_stats import WriteStat
from hudi_sink.shared.storage.fs import FileSystem

__all__ = ["TableCommitter", "RecoveryReport"]

log = logging.getLogger("hudi_sink.committer")


@dataclass
class RecoveryReport:
    rolled_forward: list[str] = field(default_factory=list)
    rolled_back: list[str] = field(default_factory=list)


def _now() -> str:
    return datetime.now(UTC).isoformat()


class TableCommitter:
    def __init__(
        self,
        fs: FileSystem,
        table: HudiTable,
        disposal: StagedFileDisposal,
        *,
        keep_entries: int = sink_log_state.KEEP_ENTRIES,
        trim_above: int = sink_log_state.TRIM_ABOVE,
    ) -> None:
        if not 1 <= keep_entries <= trim_above:
            raise ValueError(f"need 1 <= keep_entries ({keep_entries}) <= trim_above ({trim_above})")
        self._fs = fs
        self._table = table
        self._log = SinkLog(fs, table.base_path)
        self._disposal = disposal
        self.epoch = 0
        self._seq = 0
        self.state = SinkLogState()
        self._keep_entries = keep_entries
        self._trim_above = trim_above
        self._trim_unfinished = False
        self._lock = threading.RLock()
        """Serialises appends, folds and trims: ingestion and maintenance decide from two
        worker threads, and each append takes the next number after the other's."""
        self.forward_actions: dict[str, Callable[[LogEntry], None]] = {}
        """Roll-forward of decided non-``commit`` actions (maintenance registers them)."""
        self.done_checks: dict[str, Callable[[LogEntry], bool]] = {}  # effect done: trim it

    @property
    def disposal(self) -> StagedFileDisposal:
        """Where staged files no commit lists go; fixed when the committer is built."""
        return self._disposal

    # --- epochs ---------------------------------------------------------------------------
    def claim_epoch(self, leader: dict[str, Any]) -> int:
        """Append an EPOCH entry at the next free number; from then on any older leader's
        append fails. Retries when another appender won the number."""
        with self._lock:
            return self._claim_epoch_locked(leader)

    def _claim_epoch_locked(self, leader: dict[str, Any]) -> int:
        for _ in range(100):
            self.state = self._log.read_state(self.state)
            entry = LogEntry(seq=self.state.last_seq + 1, kind=EntryKind.EPOCH,
                             epoch=self.state.epoch + 1, leader=leader, created_at=_now())
            if self._log.try_append(entry):
                self.state.apply(entry)
                self.epoch, self._seq = entry.epoch, entry.seq
                log.info("claimed epoch %d (sink log seq %d)", self.epoch, self._seq)
                return self.epoch
        raise FencedError("could not claim an epoch: the sink log keeps moving")

    def refresh(self) -> SinkLogState:
        with self._lock:
            self.state = self._log.read_state(self.state)
            return self.state

    def _append(self, kind: EntryKind, instant: str, **fields: Any) -> None:
        with self._lock:
            self._append_locked(kind, instant, **fields)

    def _append_locked(self, kind: EntryKind, instant: str, **fields: Any) -> None:
        """Decide at our next number; an entry of our own epoch found there is adopted
        (``SinkLog.append_own``): only another epoch's entry fences us."""
        entry = LogEntry(
            seq=self._seq + 1, kind=kind, epoch=self.epoch, instant=instant,
            created_at=_now(), **fields,
        )
        try:
            placed, adopted = self._log.append_own(entry, self.state.decisions.get(instant))
        except FencedError:
            self.refresh()
            raise
        if adopted:
            self.refresh()  # folds what was passed (before _seq moves: a failed fold redoes it)
        else:
            self.state.apply(placed)
        self._seq = max(self._seq, placed.seq)  # an earlier decision may lie below it

    # --- recovery -------------------------------------------------------------------------
    def recover(self) -> RecoveryReport:
        """Finish what earlier leaders left: roll decided commits forward, roll every other
        pending instant back (deciding ABORT first, through the log)."""
        with self._lock:
            return self._recover_locked()

    def _recover_locked(self) -> RecoveryReport:
        report = RecoveryReport()
        state = self.refresh()
        instants = self._table.list_instants()
        completed = {i.time for i in instants if i.state is InstantState.COMPLETED}
        pending = {i.time for i in instants} - completed
        latest = max(completed, default=None)
        for instant, record in sorted(state.decisions.items()):
            if record.kind is not EntryKind.COMMIT or instant in completed:
                continue
            # An older commit off the timeline was archived; decisions of other actions
            # (clean, archive) are never on the timeline: rolling them forward is idempotent.
            if (not commit_finished(instant, completed, pending, latest)
                    or self._log.read_entry(record.seq).action != layout.COMMIT_ACTION):
                self._roll_forward(record)
                report.rolled_forward.append(instant)
        for instant in self._table.pending_instants():
            if self.state.committed(instant):
                continue
            self.abort(instant, "recovered by a new coordinator epoch")
            report.rolled_back.append(instant)
        self._clean_staging(exclude=set())
        return report

    def roll_forward(self, instant: str) -> bool:
        """Finish ``instant`` if the log decided COMMIT for it (False: it did not)."""
        record = self.refresh().decisions.get(instant)
        if record is None or record.kind is not EntryKind.COMMIT:
            return False
        self._roll_forward(record)
        return True

    def _roll_forward(self, record: DecisionRecord) -> None:
        entry = self._log.read_entry(record.seq)  # kept: the trim never passes an unfinished COMMIT
        if entry.instant != record.instant or entry.metadata is None:
            raise TableFormatError(
                f"sink log entry {record.seq} is not the COMMIT of {record.instant}")
        if entry.action != layout.COMMIT_ACTION:
            forward = self.forward_actions.get(entry.action)
            if forward is None:
                raise TableFormatError(f"no roll-forward for a decided {entry.action} {entry.instant}")
            forward(entry)
            return
        log.warning("rolling commit %s forward (decided by epoch %d)", entry.instant, entry.epoch)
        self._place(entry.instant, entry.metadata, entry.moves)
        # Placed files may come from an older writer that never synced them: sync each.
        self._make_durable(files=[final for _staged, final in entry.moves],
                           dirs=[p for move in entry.moves for p in move])
        if not self._fs.exists(self._table.commit_path(entry.instant)):
            self._table.complete_instant(entry.instant, entry.metadata)

    def _clean_staging(self, exclude: set[str]) -> None:
        """Staging dirs of instants that are finished (completed or rolled back)."""
        temp = posixpath.join(self._table.base_path, layout.TEMP_DIR)
        instants = self._table.list_instants()
        completed = {i.time for i in instants if i.state is InstantState.COMPLETED}
        pending = {i.time for i in instants} - completed
        for info in self._fs.list_dir(temp):
            if info.is_dir and info.name.isdigit() and info.name not in pending | exclude:
                files = [f.path for f in self._fs.walk_files(info.path)]
                if files:
                    # The timeline, not the log, says "completed": the log may have trimmed
                    # the COMMIT decision of an instant completed long ago.
                    reason = "UNCOMMITTED_FILE" if info.name in completed else "ABORTED_INSTANT"
                    self.disposal.before_decision(info.name, files, reason)
                    self.disposal.after_decision(info.name, files)
                self._prune_empty(info.path)

    def _prune_empty(self, directory: str) -> None:
        """Remove a staging directory once no file is left in it."""
        if not any(True for _ in self._fs.walk_files(directory)):
            self._fs.delete_tree(directory)

    # --- transactions -----------------------------------------------------------------------
    def start(self, instant: str) -> None:
        self._table.start_instant(instant)

    def abort_foreign(self, current: str | None) -> list[str]:
        """Roll back pending instants that are not ours (a fenced zombie may create some)."""
        aborted = []
        for instant in self._table.pending_instants():
            if instant != current and not self.state.committed(instant):
                self.abort(instant, "pending instant of another coordinator")
                aborted.append(instant)
        return aborted

    def verify_staged(self, moves: list[tuple[str, str]], sizes: dict[str, int]) -> str | None:
        """Reason why the listed staged files are not all present, or None."""
        for staged, _final in moves:
            info = self._fs.file_info(posixpath.join(self._table.base_path, staged))
            if info is None:
                return f"staged file {staged} is missing"
            if info.size != sizes[staged]:
                return f"staged file {staged} has {info.size} bytes, status says {sizes[staged]}"
        return None

    def commit(self, instant: str, metadata: dict[str, Any], moves: list[tuple[str, str]]) -> None:
        if self.state.rolled_back(instant):
            raise TableFormatError(f"{instant} was decided ABORT; it cannot be committed")
        unlisted = self._unlisted(instant, {staged for staged, _ in moves})
        staged = [staged for staged, _final in moves]
        try:
            self._make_durable(files=staged, dirs=staged)
        except FileNotFoundError as exc:
            # A newer leader may have rolled the instant back (and handed its files to
            # deletion): report that as fencing, which is what it is, not as a storage error.
            self.refresh()
            if self.state.epoch != self.epoch:
                raise FencedError(f"epoch {self.state.epoch} owns the table; epoch {self.epoch} "
                                  f"cannot commit {instant}") from exc
            raise TableFormatError(
                f"{instant}: staged file {exc.filename} vanished before the commit decision") from exc
        self.disposal.before_decision(instant, unlisted, "UNCOMMITTED_FILE")
        self._append(EntryKind.COMMIT, instant, metadata=metadata, moves=moves)
        self._place(instant, metadata, moves)
        self._make_durable(files=[], dirs=[p for move in moves for p in move])
        self._table.complete_instant(instant, metadata)
        self.disposal.after_decision(instant, unlisted)
        self._prune_empty(self._table.staging_dir(instant))
        self._maybe_trim()

    def _place(self, instant: str, metadata: dict[str, Any], moves: list[tuple[str, str]]) -> None:
        stats = {
            stat["path"]: WriteStat.from_json(stat)
            for stats in metadata["partitionToWriteStats"].values()
            for stat in stats
        }
        for staged, final in moves:
            if final not in stats:
                raise TableFormatError(f"{instant}: move target {final} has no write stat")
            self._table.place_file(posixpath.join(self._table.base_path, staged), stats[final])

    def _make_durable(self, *, files: list[str], dirs: list[str]) -> None:
        """One ``fsync_file`` per file, then one ``fsync_dir`` per distinct directory holding
        one of ``dirs`` (paths relative to the base path), up to the base path itself — a
        partition or staging directory may be new, and its own entry must survive too."""
        base = self._table.base_path
        for relative in files:
            self._fs.fsync_file(posixpath.join(base, relative))
        directories: set[str] = set()
        for relative in dirs:
            directory = posixpath.dirname(relative)
            while directory and directory not in directories:
                directories.add(directory)
                directory = posixpath.dirname(directory)
        for directory in sorted(directories, key=lambda d: (-d.count("/"), d)):  # deepest first
            self._fs.fsync_dir(posixpath.join(base, directory))
        if dirs:
            self._fs.fsync_dir(base)

    def _unlisted(self, instant: str, listed: set[str]) -> list[str]:
        base = self._table.base_path
        return [
            info.path for info in self._fs.walk_files(self._table.staging_dir(instant))
            if posixpath.relpath(info.path, base) not in listed
        ]

    def decide(self, instant: str, action: str, metadata: dict[str, Any],
               moves: list[tuple[str, str]], complete: Callable[[], None],
               *, epoch: int | None = None) -> None:
        """A maintenance decision (``replacecommit``, ``clean``, archival): staged files made
        durable, COMMIT entry (with ``action``) appended — the fence —, files placed,
        ``complete`` run (writes the completed instant), staging pruned, log trimmed. A
        crash after the append is rolled forward through ``forward_actions[action]``.
        ``epoch``: the one the pass started under; FencedError when this committer claimed
        another since, or the instant was rolled back (a newer leader's recovery)."""
        staged = [s for s, _final in moves]
        self._make_durable(files=staged, dirs=staged)
        with self._lock:
            state = self.refresh()
            if epoch is not None and epoch != self.epoch:
                raise FencedError(f"{action} {instant} began under epoch {epoch}, now {self.epoch}")
            if state.rolled_back(instant):
                raise FencedError(f"{action} {instant} was decided ABORT (rolled back by a leader)")
            record = state.decisions.get(instant)
            if record is not None and record.epoch != self.epoch:
                raise TableFormatError(f"{action} {instant}: the instant was decided already")
            # Decided by us already: the same decision (a retry) is done, another is refused.
            self._append_locked(EntryKind.COMMIT, instant, metadata=metadata, moves=moves,
                                action=action)
        self.place_decided(instant, metadata, moves)
        complete()
        if moves:
            self._prune_empty(self._table.staging_dir(instant))
        self._maybe_trim()

    def place_decided(self, instant: str, metadata: dict[str, Any],
                      moves: list[tuple[str, str]]) -> None:
        """Place a decided instant's staged files, durably (idempotent: roll-forward too)."""
        if moves:
            self._place(instant, metadata, moves)
            self._make_durable(files=[final for _s, final in moves],
                               dirs=[p for move in moves for p in move])

    def abort(self, instant: str, reason: str,
              rollback: Callable[[str], None] | None = None) -> None:
        """Decide ABORT (fenced), hand the instant's staged files to deletion, roll back
        (``rollback`` for another action than ``commit``)."""
        if self.state.committed(instant):
            raise TableFormatError(f"{instant} was decided COMMIT; it can only roll forward")
        staged = self._unlisted(instant, set())
        self.disposal.before_decision(instant, staged, "ABORTED_INSTANT")
        if not self.state.rolled_back(instant):
            self._append(EntryKind.ABORT, instant, reason=reason)
        self.disposal.after_decision(instant, staged)
        self._prune_empty(self._table.staging_dir(instant))
        if rollback is not None:
            rollback(instant)
        else:
            self._table.rollback_instant(instant, delete_staging=False)
        log.warning("rolled back %s: %s", instant, reason)
        self._maybe_trim()

    # --- the log's size -------------------------------------------------------------------
    def _maybe_trim(self) -> None:
        """Trim the sink log below a checkpoint once it holds more than ``trim_above``
        entries. Runs after a decision of ours was carried out, so the log is folded up to
        it. A failure is logged, never raised: the decision it follows is already durable,
        and the next commit tries again."""
        with self._lock:
            self._trim_locked()

    def _trim_locked(self) -> None:
        if (not self._trim_unfinished
                and self.state.last_seq - max(self.state.floor, 1) + 1 <= self._trim_above):
            return
        try:
            state = self.refresh()
            instants = self._table.list_instants()  # read after the fold (plan_trim's contract)
            completed = {i.time for i in instants if i.state is InstantState.COMPLETED}
            pending = {i.time for i in instants} - completed
            plan = sink_log_state.plan_trim(state, completed=completed, pending=pending,
                                            keep_entries=self._keep_entries,
                                            done=self._done_actions(state, completed, pending))
            self._trim_unfinished = True
            if plan is not None:
                self._log.trim(state, plan, created_at=_now())
            else:  # pinned by a commit that is not finished (a roll-forward frees it), or
                self._log.remove_below_floor()  # finishing a trim that failed mid-way
            self._trim_unfinished = False
            self.refresh()  # forget what the checkpoint forgot
        except (HudiSinkError, OSError) as exc:
            log.warning("sink log trim failed (retried after the next decision): %s", exc)

    def _done_actions(self, state: SinkLogState, completed: set[str], pending: set[str]) -> set[str]:
        """Unfinished-looking COMMIT decisions of maintenance actions whose effect is done."""
        latest = max(completed, key=instant_key, default=None)
        done = set()
        for instant, record in state.decisions.items():
            if record.kind is EntryKind.COMMIT and not commit_finished(instant, completed, pending, latest):
                entry = self._log.read_entry(record.seq)
                check = self.done_checks.get(entry.action)
                if check is not None and check(entry):
                    done.add(instant)
        return done
