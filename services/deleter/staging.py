"""The staging area of finished instants: what the sweep looks at, and when a directory goes.

Participants write into ``.hoodie/.temp/<T>/``; a commit moves the files it lists out of it,
and the coordinator sends deletion intents for what stays behind. Two things escape that:

- a file that lands *after* the intents were sent (the partitions' new owner still flushing
  into an instant that was just rolled back, or a participant whose status a partial commit
  did not wait for): nobody ever announces it;
- the directories themselves: the committer prunes a staging directory only when it is
  already empty, which it never is while the deleter still has to remove the files.

So the deleter sweeps (its scheduled work, ``schedule``): every staging directory whose
instant is *finished* — completed, or decided ABORT with its rollback done — is listed, each
file old enough goes through the normal decision rules (``decision.decide``: a file listed by
a completed commit is never deleted), and a tree left without files is removed. A pending or
inflight instant's staging is never touched, and neither is one the table does not know
(e.g. a rolled-back instant whose ABORT the sink log trimmed long ago: the reconcile, with its
age floor, takes care of those).

Why a finished instant's staging holds nothing live: a completed commit's listed files were
moved out of staging before its ``.commit`` was written (roll-forward does the same), and a
rolled-back instant can never complete (the sink log's decision is final). Both states are
terminal, so an answer from a snapshot loaded before the listing stays true.

The module's functions do blocking I/O; :class:`StagingSweeper` runs them in worker threads.
"""

from __future__ import annotations

import asyncio
import posixpath
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from hudi_sink.services.deleter.context import Counted, DeleterContext
from hudi_sink.services.deleter.table_state import TEMP_PREFIX, TableSnapshot, relative_path
from hudi_sink.shared.deletion.intent import DeletionReason, PendingDelete, intent_for_staged_file
from hudi_sink.shared.hudi.naming import is_instant_time
from hudi_sink.shared.storage.fs import FileInfo, FileSystem

__all__ = [
    "StagingSweeper",
    "SweepResult",
    "StagingTree",
    "finished_reason",
    "staging_dir_of",
    "finished_staging",
    "remove_if_empty",
]


@dataclass(frozen=True)
class StagingTree:
    """One finished instant's staging directory, as listed."""

    instant: str
    path: str
    reason: DeletionReason
    """UNCOMMITTED_FILE when the instant completed, ABORTED_INSTANT when it was rolled back:
    the reason the coordinator's own intents for these files would carry."""
    files: tuple[FileInfo, ...]


def finished_reason(snapshot: TableSnapshot, instant: str) -> DeletionReason | None:
    """Why files in ``instant``'s staging are dead, or None when they may not be (pending,
    inflight, a decided ABORT whose rollback has not finished, or unknown to the table)."""
    if instant in snapshot.completed:
        return DeletionReason.UNCOMMITTED_FILE
    if instant in snapshot.rolled_back and instant not in snapshot.pending:
        return DeletionReason.ABORTED_INSTANT
    return None


def staging_dir_of(table_path: str, path: str) -> tuple[str, str] | None:
    """``(instant, staging directory)`` of a path inside ``.hoodie/.temp/<T>/``, else None."""
    relative = relative_path(table_path, path)
    if relative is None or not relative.startswith(TEMP_PREFIX):
        return None
    instant = relative[len(TEMP_PREFIX):].split("/", 1)[0]
    if not is_instant_time(instant):
        return None
    return instant, posixpath.join(table_path.rstrip("/") or "/", TEMP_PREFIX, instant)


def _tree(fs: FileSystem, directory: FileInfo) -> tuple[list[FileInfo], float]:
    """Every file below ``directory`` and the newest mtime of any entry, directories included
    (``walk_files`` alone would miss a directory a flush has just created)."""
    files: list[FileInfo] = []
    newest = directory.mtime
    stack = [directory.path]
    while stack:
        for info in fs.list_dir(stack.pop()):
            newest = max(newest, info.mtime)
            if info.is_dir:
                stack.append(info.path)
            else:
                files.append(info)
    return files, newest


def finished_staging(fs: FileSystem, snapshot: TableSnapshot) -> list[StagingTree]:
    """The staging directories of finished instants, oldest instant first.

    ``snapshot`` may be older than the listing: finished is a terminal state, so a directory
    it calls finished stays finished, and a newer instant is simply skipped until next time.
    """
    temp = posixpath.join(snapshot.table_path.rstrip("/") or "/", TEMP_PREFIX)
    found: list[StagingTree] = []
    for entry in fs.list_dir(temp.rstrip("/")):
        if not entry.is_dir or not is_instant_time(entry.name):
            continue
        reason = finished_reason(snapshot, entry.name)
        if reason is None:
            continue
        files, _ = _tree(fs, entry)
        found.append(StagingTree(entry.name, entry.path, reason, tuple(files)))
    return found


def remove_if_empty(fs: FileSystem, directory: str, *, quiet_before: float | None = None) -> bool:
    """Remove ``directory``'s tree when it holds no file (and, with ``quiet_before``, nothing
    in it changed since then); True when removed.

    The caller has established that the directory belongs to a finished instant, so a file
    that a racing flush drops in between the check and the removal is dead as well; the
    ``quiet_before`` guard only keeps the sweep from pulling a directory out from under a
    flush that has just created it (which would fail that flush for nothing).
    """
    info = fs.file_info(directory)
    if info is None or not info.is_dir:
        return False
    files, newest = _tree(fs, info)
    if files or (quiet_before is not None and newest > quiet_before):
        return False
    fs.delete_tree(directory)
    return True


@dataclass
class SweepResult:
    """What one sweep pass found and did."""

    instants: list[str] = field(default_factory=list)
    """Finished instants with a staging directory, as listed."""
    settled: int = 0
    """Files deleted (or found gone) through the decision rules."""
    kept: int = 0
    """Files the rules kept or could not decide, or whose delete failed (next pass retries)."""
    young: int = 0
    """Files written or first seen less than the minimum age ago, left to a later pass."""
    dirs_removed: int = 0


class StagingSweeper:
    """One pass over the staging of finished instants (see the module docstring).

    ``settle`` applies the normal decision rules to one intent and returns whether the file
    is gone afterwards (it removes the emptied directory itself, like any other delete).

    ``min_age_s`` counts twice. A file (or directory) must have been left alone that long, so
    a flush racing a rollback is seen whole by a later pass. And the sweep must have seen the
    file in a finished instant's staging that long before, as if it had sent an intent for it
    then: the intents the coordinator sent when the instant finished are due ``send_delay_s``
    after that, so they are handled first and the sweep only picks up what nobody announced
    (the first pass after a pod takes the role acts on nothing). Sightings are kept for the
    files currently listed only, so memory stays bounded by the staging area.
    """

    def __init__(
        self,
        context: DeleterContext,
        settle: Callable[[PendingDelete], Awaitable[bool]],
        *,
        min_age_s: float,
    ) -> None:
        self._context = context
        self._settle = settle
        self._min_age_s = min_age_s
        self._first_seen: dict[str, float] = {}
        """Path → when a pass first saw it in a finished instant's staging."""

    async def sweep(self) -> SweepResult:
        ctx = self._context
        result = SweepResult()
        snapshot = await ctx.cache.refresh(ctx.table_path)
        trees = await asyncio.to_thread(finished_staging, ctx.fs, snapshot)
        now = ctx.clock()
        cutoff = now - self._min_age_s
        seen, self._first_seen = self._first_seen, {}
        for tree in trees:
            result.instants.append(tree.instant)
            for info in tree.files:
                first_seen = self._first_seen[info.path] = seen.get(info.path, now)
                if info.mtime > cutoff or first_seen > cutoff:
                    result.young += 1
                    continue
                intent = intent_for_staged_file(
                    ctx.table_path, info.path, tree.instant, tree.reason, not_before=now
                )
                if await self._settle(intent):
                    result.settled += 1
                else:
                    result.kept += 1
            # Quiet as of now, after this pass's own deletions in the tree: judged with the
            # pass's start, a tree emptied by those deletions was never quiet enough, so it
            # went one pass later, or in this one only when the filesystem's coarse
            # timestamps happened to round them back before the start (a flaky test).
            quiet_before = ctx.clock() - self._min_age_s
            if await asyncio.to_thread(remove_if_empty, ctx.fs, tree.path,
                                       quiet_before=quiet_before):
                result.dirs_removed += 1
                ctx.tally.add(Counted.STAGING_DIR_REMOVED)
        return result
