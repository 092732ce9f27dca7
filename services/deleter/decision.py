"""Phase 2's one question, as a pure function: may this file be deleted now? (docs/design.md §4.3)

``decide`` takes an intent, a snapshot of the table and what storage says about the file, and
returns an explicit :class:`Outcome`. No I/O and no clock here, so every rule is a row in a
unit test. The rules, in the order they are applied:

1. Only files of this table, and never its metadata: an intent for another table, a path
   outside the base path, anything in ``.hoodie/`` other than staging (``.hoodie/.temp``), or a
   partition marker is KEEP.
2. A file listed by ANY completed commit or replacecommit, or a base file older than the
   active timeline (archived as committed), is never deleted (KEEP), whatever the intent
   says: a forged or stale intent changes nothing. The one exception is checked here, on the
   table, not taken from the intent: a CLEANED intent whose clean is recorded (with its
   earliest retained instant E) and whose file is superseded outside that retention — its
   file group was replaced by a completed replacecommit at or before E, or a completed commit
   lists a later slice of the group (same partition, same file id) that is still before E.
   So the latest slice of a group, every slice at or after E and the group's latest slice
   before E are kept (KEEP_LATEST_COMMITS, ``shared.hudi.retention``). A CLEANED intent whose
   clean K has no record yet waits (RETRY_LATER) while K is decided, pending or unknown, and
   is dropped (KEEP) once K was rolled back or is over without a record.
3. A missing file is success (ALREADY_GONE): deletion is idempotent.
4. A file written for an instant that is still pending (and not decided ABORT) is in use:
   RETRY_LATER (ORPHAN: KEEP, the next scan looks again). The instant is read from the path,
   not from the intent.
5. By reason, on the killing instant K:
   - UNCOMMITTED_FILE / ABORTED_INSTANT: K rolled back or completed (without listing the
     file, rule 2) → DELETE; K pending or unknown → RETRY_LATER.
   - REPLACED / CLEANED: K completed → DELETE; K rolled back → KEEP (the file lives on);
     K pending or unknown → RETRY_LATER.
   - ORPHAN: DELETE when older than ``orphan_min_age_s`` and no instant references it,
     else KEEP. (Where the mtime is a write's start, an S3 multipart upload's, the scan that
     sent the intent also saw the file that long before: ``table_state.scan_orphans``.)

Answers that rest on an instant being pending or unknown carry ``recheck``: the service
decides them again on a refreshed snapshot before acting, so a cache never delays a
decidable intent by a whole retry round.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from hudi_sink.services.deleter.table_state import (
    META_DIR,
    TEMP_PREFIX,
    TableSnapshot,
    normalize,
    own_instant,
    relative_path,
)
from hudi_sink.shared.deletion.intent import DeletionReason, PendingDelete
from hudi_sink.shared.hudi.layout import PARTITION_METADATA_FILE
from hudi_sink.shared.hudi.naming import instant_key
from hudi_sink.shared.storage.fs import FileInfo

__all__ = ["Outcome", "Decision", "decide"]


class Outcome(StrEnum):
    """What the deleter does with one intent."""

    DELETE = "DELETE"
    """The file is dead: delete it, then acknowledge the intent."""
    KEEP = "KEEP"
    """The file stays: drop (acknowledge) the intent without touching storage."""
    RETRY_LATER = "RETRY_LATER"
    """Not decidable yet (the killing instant is pending): re-enqueue to the retry topic."""
    ALREADY_GONE = "ALREADY_GONE"
    """Nothing to delete: success, acknowledge."""


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    rule: str
    """Which rule decided, in words (logs, DLQ headers, REST)."""
    recheck: bool = False
    """The answer depends on an instant being pending or unknown to the snapshot."""


_COMMIT_KILLED = (DeletionReason.UNCOMMITTED_FILE, DeletionReason.ABORTED_INSTANT)
_REPLACE_KILLED = (DeletionReason.REPLACED, DeletionReason.CLEANED)


def _protected(relative: str) -> bool:
    if relative.split("/", 1)[0] == META_DIR and not relative.startswith(TEMP_PREFIX):
        return True
    return relative.rsplit("/", 1)[-1] == PARTITION_METADATA_FILE


def decide(
    intent: PendingDelete,
    snapshot: TableSnapshot,
    file: FileInfo | None,
    *,
    now: float,
    orphan_min_age_s: float,
) -> Decision:
    """Apply the rules above; ``file`` is storage's view of ``intent.file_path`` (None: missing)."""
    # 1. this table's data and staging only
    if normalize(intent.table_path) != normalize(snapshot.table_path):
        return Decision(Outcome.KEEP, f"intent is for another table ({intent.table_path})")
    relative = relative_path(snapshot.table_path, intent.file_path)
    if relative is None:
        return Decision(Outcome.KEEP, "path is outside the table's base path")
    if _protected(relative):
        return Decision(Outcome.KEEP, "path is table metadata, never deleted by intent")
    # 2. never a live file (a replaced group or a superseded slice a recorded clean's
    # retention lets go is no longer live)
    clean = intent.killing_instant if intent.reason is DeletionReason.CLEANED else None
    cleaned = clean is not None and snapshot.cleaned_by(intent.file_path, clean)
    if snapshot.is_listed(intent.file_path) and not cleaned:
        if clean is not None and clean not in snapshot.cleans and file is not None:
            return _unrecorded_clean(clean, snapshot)
        if clean is not None and clean in snapshot.cleans:
            return Decision(Outcome.KEEP, f"listed by a completed commit and retained by clean "
                            f"{clean}: not replaced, and no later slice of its group listed "
                            f"before {snapshot.cleans[clean]}")
        return Decision(Outcome.KEEP, "listed by a completed commit")
    # 3. idempotent
    if file is None:
        return Decision(Outcome.ALREADY_GONE, "file is already gone")
    if file.is_dir:
        return Decision(Outcome.KEEP, "path is a directory")
    # 4. files of pending instants are in use
    owner = own_instant(relative)
    if owner is not None and owner in snapshot.pending and owner not in snapshot.rolled_back:
        if intent.reason is DeletionReason.ORPHAN:
            return Decision(Outcome.KEEP, f"written for pending instant {owner}", recheck=True)
        return Decision(Outcome.RETRY_LATER, f"written for pending instant {owner}", recheck=True)
    # 5. by reason
    if intent.reason is DeletionReason.ORPHAN:
        return _orphan(owner, snapshot, file, now, orphan_min_age_s)
    killing = intent.killing_instant
    assert killing is not None  # PendingDelete validates this for every non-ORPHAN reason
    if intent.reason in _COMMIT_KILLED:
        if killing in snapshot.rolled_back:
            return Decision(Outcome.DELETE, f"instant {killing} was rolled back")
        if killing in snapshot.completed:
            return Decision(Outcome.DELETE, f"instant {killing} completed without listing the file")
        if _finished_and_forgotten(killing, snapshot):
            return Decision(Outcome.DELETE, f"instant {killing} is over: older than the latest "
                            "completed commit, neither pending nor completed (rolled back)")
    elif intent.reason in _REPLACE_KILLED:
        if intent.reason is DeletionReason.CLEANED and killing in snapshot.cleans and not cleaned:
            return Decision(Outcome.KEEP, f"clean {killing} may not remove this file: its file "
                            "group is not replaced, nor the slice superseded, before the "
                            "clean's earliest retained instant")
        if killing in snapshot.rolled_back:
            return Decision(Outcome.KEEP, f"{intent.reason.value.lower()} instant {killing} was rolled back")
        if killing in snapshot.completed:
            return Decision(Outcome.DELETE, f"{intent.reason.value.lower()} instant {killing} completed")
    if killing in snapshot.pending:
        return Decision(Outcome.RETRY_LATER, f"instant {killing} is still pending", recheck=True)
    return Decision(Outcome.RETRY_LATER, f"instant {killing} is unknown to the table", recheck=True)


def _unrecorded_clean(clean: str, snapshot: TableSnapshot) -> Decision:
    """A CLEANED intent whose clean has no record (yet): wait while it may still be recorded
    (decided, pending or unknown: the coordinator may have crashed between its decision and
    the record, and a new leader rolls it forward); drop it once it never will be."""
    if clean in snapshot.rolled_back:
        return Decision(Outcome.KEEP, f"clean {clean} was rolled back")
    if clean in snapshot.completed:
        return Decision(Outcome.KEEP, f"{clean} is a completed instant, not a recorded clean")
    if clean in snapshot.decided or clean in snapshot.pending:
        return Decision(Outcome.RETRY_LATER, f"clean {clean} is decided, not recorded yet",
                        recheck=True)
    if _finished_and_forgotten(clean, snapshot):
        return Decision(Outcome.KEEP, f"clean {clean} is over and never recorded")
    return Decision(Outcome.RETRY_LATER, f"clean {clean} is not recorded yet", recheck=True)


def _finished_and_forgotten(instant: str, snapshot: TableSnapshot) -> bool:
    """An instant older than the latest completed commit that is neither pending nor
    completed was rolled back, even when the trimmed sink log no longer names it: instant
    times only grow, so it can never become pending or completed again."""
    if instant in snapshot.pending or instant in snapshot.completed or not snapshot.completed:
        return False
    latest = max(snapshot.completed, key=instant_key)
    return instant_key(instant) < instant_key(latest)


def _orphan(
    owner: str | None, snapshot: TableSnapshot, file: FileInfo, now: float, min_age_s: float
) -> Decision:
    if owner is not None and not snapshot.knows(owner):
        # Newer than anything on the timeline: an instant being started right now.
        return Decision(Outcome.KEEP, f"written for instant {owner}, newer than the timeline", recheck=True)
    age = now - file.mtime
    if age < min_age_s:
        return Decision(Outcome.KEEP, f"younger than the orphan age floor ({age:.0f} s < {min_age_s:g} s)")
    return Decision(Outcome.DELETE, "orphan: referenced by no instant and old enough")
