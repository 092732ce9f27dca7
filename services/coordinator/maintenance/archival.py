"""Timeline archival: keep the active timeline bounded (archive to ``min_instants`` once it
holds ``max_instants`` completed instants).

Archived instants' timeline files move to ``.hoodie/.sink/archived/`` (Hudi's Avro
``.hoodie/archived/`` format is not written; see ``shared.hudi.replace``). Readers count base
files older than the active timeline as committed, so archival stops before any pending
instant, the earliest retained instant, and any replacecommit whose replaced files still exist
(probe: archiving it would show those files again). Fenced through the sink log: the archived
list is decided in a COMMIT entry (action ``archive``) and rolled forward after a crash
(archiving an instant again is a no-op).
"""

from __future__ import annotations

import logging

from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.maintenance.decided import LoggedAction
from hudi_sink.services.coordinator.maintenance.plan import archivable, earliest_retained
from hudi_sink.services.coordinator.maintenance.view import TableView
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.layout import Instant, InstantState
from hudi_sink.shared.hudi.naming import instant_key
from hudi_sink.shared.hudi.replace import ReplaceTimeline
from hudi_sink.shared.hudi.sink_log_state import LogEntry

__all__ = ["ARCHIVE_ACTION", "Archiver"]

log = logging.getLogger("hudi_sink.maintenance")

ARCHIVE_ACTION = "archive"


class Archiver(LoggedAction):
    """Plans and runs archival; its decision's detail is the archived ``[time, action]`` list."""

    action = ARCHIVE_ACTION

    def __init__(self, committer: TableCommitter, timeline: ReplaceTimeline, *,
                 max_instants: int, min_instants: int, commits_retained: int | None) -> None:
        super().__init__(committer, timeline)
        self._max = max_instants
        self._min = min_instants
        self._retained = commits_retained

    def plan(self, view: TableView) -> list[Instant]:
        retained_from = (earliest_retained(view.completed, self._retained)
                         if self._retained is not None else None)
        on_disk = {(f.partition, f.file_id) for f in view.replaced_files}
        pinned = {by for group, by in view.replaced_by.items() if group in on_disk}
        pinned |= {later for _f, later in view.cleanable_slices(retained_from)}
        times = archivable(view.completed, view.pending, max_instants=self._max,
                           min_instants=self._min, retained_from=retained_from,
                           pinned=pinned)
        actions = {i.time: i.action for i in self._timeline.completed()}
        # Never the newest completed commit: its offsets are where ingestion resumes
        # (HudiTable.latest_commit_metadata reads the active timeline).
        newest = max((t for t, a in actions.items() if a == layout.COMMIT_ACTION),
                     key=instant_key, default=None)
        return [Instant(t, actions.get(t, layout.COMMIT_ACTION), InstantState.COMPLETED)
                for t in times if newest is None or instant_key(t) < instant_key(newest)]

    def run(self, instant: str, targets: list[Instant], epoch: int | None = None) -> None:
        """Decide (refused once ``epoch`` ended) and archive ``targets``."""
        if not targets:
            return
        self._decide(instant, [[i.time, i.action] for i in targets],
                     lambda: self._archive(targets), epoch)
        log.info("archived %d instant(s) up to %s", len(targets), targets[-1].time)

    def _archive(self, targets: list[Instant]) -> None:
        for target in targets:  # oldest first: the active timeline stays a suffix
            self._timeline.archive(target)

    def forward(self, entry: LogEntry) -> None:
        self._archive([Instant(t, a, InstantState.COMPLETED) for t, a in self._detail(entry)])

    def done(self, entry: LogEntry) -> bool:
        """Every instant the decision archives is off the active timeline."""
        active = {i.time for i in self._timeline.table.list_instants()}
        return active.isdisjoint(t for t, _action in self._detail(entry))
