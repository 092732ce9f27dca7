"""Cleaning: files no retained instant can read go to the two-phase deleter.

Retention is Hudi's KEEP_LATEST_COMMITS over the active timeline's completed instants
(``maintenance.cleaner.commits_retained``), with E the earliest retained instant:
- a file group replaced at or before E is invisible to every retained snapshot and time
  travel: all its files go;
- of a file group's slices (``shared.hudi.retention``), every slice at or after E and the
  latest slice before E stay (they serve reads at E and after); an older slice goes once a
  later completed slice of its group lies before E. The latest slice of a group never goes.
Order (PIP-186):
1. one CLEANED intent per file, sent and acknowledged (``StagedFileDisposal.before_decision``;
   not acked → nothing changes, tried again next round);
2. the clean decided through the sink log (the fence) and recorded as
   ``.hoodie/.sink/clean/<K>.json`` (Hudi's ``.clean`` is Avro; see ``shared.hudi.replace``);
3. the deleter deletes after its delay, re-checking against the table that the file's group is
   replaced by a completed replacecommit at or before the clean's earliest retained instant,
   or that a completed commit lists a later slice of its group before that instant.
The coordinator itself never deletes a file. The newest recorded clean (greatest E) is kept
even once its files are gone: it is the table's retained history, which ``table read --as-of``
checks (``shared.hudi.time_travel``).
"""

from __future__ import annotations

import logging

from hudi_sink.services.coordinator.committer import TableCommitter
from hudi_sink.services.coordinator.maintenance.decided import LoggedAction
from hudi_sink.services.coordinator.maintenance.plan import cleanable, earliest_retained
from hudi_sink.services.coordinator.maintenance.view import TableView
from hudi_sink.shared.deletion.intent import DeletionReason
from hudi_sink.shared.hudi.replace import CleanRecord, ReplaceTimeline, retention_floor
from hudi_sink.shared.hudi.sink_log_state import LogEntry

__all__ = ["CLEAN_ACTION", "Cleaner"]

log = logging.getLogger("hudi_sink.maintenance")

CLEAN_ACTION = "clean"


class Cleaner(LoggedAction):
    """Plans and runs cleans; its decision's detail is the ``CleanRecord``'s JSON."""

    action = CLEAN_ACTION

    def __init__(self, committer: TableCommitter, timeline: ReplaceTimeline,
                 commits_retained: int) -> None:
        super().__init__(committer, timeline)
        self._retained = commits_retained

    def plan(self, view: TableView, instant: str) -> CleanRecord | None:
        """The next clean: files of cleanable groups and cleanable slices no recorded clean
        covers yet (those are with the deleter already). Recorded cleans whose files are all
        gone are dropped, except the one holding the retained history."""
        on_disk = {f.path for f in (*view.replaced_files, *view.superseded)}
        records = self._timeline.cleans()
        floor = retention_floor(records)
        covered: set[str] = set()
        for record in records:
            if record is not floor and on_disk.isdisjoint(record.files):
                self._timeline.remove_clean(record.instant)
            else:
                covered.update(record.files)
        retained_from = earliest_retained(view.completed, self._retained)
        if retained_from is None:
            return None
        groups = cleanable(view.replaced_by, retained_from)
        replaced = [f for f in view.replaced_files
                    if (f.partition, f.file_id) in groups and f.path not in covered]
        slices = [(f, later) for f, later in view.cleanable_slices(retained_from)
                  if (f.partition, f.file_id) not in groups and f.path not in covered]
        if not replaced and not slices:
            return None
        used = sorted({(f.partition, f.file_id) for f in replaced})
        return CleanRecord(instant, retained_from,
                           [(p, fid, view.replaced_by[(p, fid)]) for p, fid in used],
                           sorted(f.path for f in [*replaced, *(f for f, _ in slices)]),
                           [(f.path, later) for f, later in slices])

    def run(self, record: CleanRecord, epoch: int | None = None) -> None:
        """Intents acked, then the decision (refused once ``epoch`` ended), then the record
        (blocking: worker thread)."""
        epoch = self._committer.epoch if epoch is None else epoch
        base = self._timeline.table.base_path
        paths = [f"{base}/{relative}" for relative in record.files]
        disposal = self._committer.disposal
        disposal.before_decision(record.instant, paths, DeletionReason.CLEANED.value)
        self._decide(record.instant, record.to_json(),
                     lambda: self._timeline.write_clean(record), epoch)
        disposal.after_decision(record.instant, paths)
        log.info("clean %s: %d file(s) of %d replaced group(s) and %d superseded slice(s) "
                 "handed to deletion (earliest retained %s)", record.instant, len(record.files),
                 len(record.groups), len(record.slices), record.earliest_retained)

    def forward(self, entry: LogEntry) -> None:
        """Record a decided clean, unless it is recorded already (not replayed when done)."""
        record = CleanRecord.from_json(self._detail(entry))
        if not self._timeline.fs.exists(self._timeline.clean_path(record.instant)):
            self._timeline.write_clean(record)

    def done(self, entry: LogEntry) -> bool:
        """The decided clean is recorded, or every file it names is gone."""
        record = CleanRecord.from_json(self._detail(entry))
        fs, base = self._timeline.fs, self._timeline.table.base_path
        return fs.exists(self._timeline.clean_path(record.instant)) or not any(
            fs.exists(f"{base}/{relative}") for relative in record.files)
