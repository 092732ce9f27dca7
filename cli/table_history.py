"""The table's history as ``hudi-sink table show|history`` list it: every instant, by kind.

Hudi's own CLI (``commits show``) lists every action on the timeline, not only ingestion; an
operator looking for why files changed or the timeline shrank must see clustering, cleaning
and archival beside the ingestion commits. Each row has a ``kind``:

- ``commit`` — ingestion: ``committed``, ``inflight`` (started, not completed), ``rolled_back``
  (an ABORT in the sink log), or ``archived`` (its timeline file moved by archival);
- ``replacecommit`` — clustering: ``committed``, ``inflight`` or ``archived``; ``detail`` says
  how many file groups it replaced;
- ``clean`` — a recorded clean (``.hoodie/.sink/clean/``): the files it handed to deletion and
  its earliest retained instant;
- ``archive`` — an archival run, while the sink log still holds its decision (the log is
  trimmed to its last few dozen entries): how many instants it archived, up to which.

Rows are found from listings (active timeline, archive, clean records, the sink log); only the
``limit`` newest are then read in full, so a long-lived table costs a few listings plus
``limit`` small reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from hudi_sink.shared.errors import TableFormatError
from hudi_sink.shared.hudi import layout
from hudi_sink.shared.hudi.layout import Instant, InstantState
from hudi_sink.shared.hudi.naming import instant_key
from hudi_sink.shared.hudi.offset_change import describe_change
from hudi_sink.shared.hudi.offsets import KAFKA_COMMIT_OFFSETS_KEY
from hudi_sink.shared.hudi.replace import ReplaceTimeline, replaced_groups
from hudi_sink.shared.hudi.sink_log import SinkLog
from hudi_sink.shared.hudi.sink_log_state import EntryKind
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.schema.evolution import CHANGES_KEY

__all__ = ["history_rows", "commit_row", "INGESTION", "CLUSTERING", "CLEAN", "ARCHIVE"]

INGESTION, CLUSTERING, CLEAN, ARCHIVE = "commit", layout.REPLACE_ACTION, "clean", "archive"
_ARCHIVE_ACTION = "archive"
"""The sink log COMMIT entry's action of an archival run (the coordinator's ``Archiver``)."""


@dataclass(frozen=True)
class _Found:
    time: str
    kind: str
    state: str
    fill: Callable[[], dict[str, Any]]
    """The row's remaining fields (reads a file, or nothing): called for shown rows only."""


def commit_row(metadata: dict[str, Any]) -> dict[str, Any]:
    """A commit's or replacecommit's numbers from its metadata (and, for an operator's offset
    change, what it changed and why: ``offsets_set``, ``set_by``, ``reason``)."""
    stats = [s for group in metadata.get("partitionToWriteStats", {}).values() for s in group]
    extra = metadata.get("extraMetadata", {})
    return {
        "records": sum(int(s.get(k) or 0) for s in stats
                       for k in ("numInserts", "numUpdateWrites", "numDeletes")),
        "rows_written": sum(int(s.get("numWrites") or 0) for s in stats),
        "files": len(stats),
        "bytes": sum(int(s.get("fileSizeInBytes", 0)) for s in stats),
        "offsets": extra.get(KAFKA_COMMIT_OFFSETS_KEY, ""),
        "dlq": int(extra.get("hudi.sink.records.dlq", 0) or 0),
        # Schema evolution: the columns this commit added or widened (none: no key).
        **({"schema_changes": changes.split("; ")} if (changes := extra.get(CHANGES_KEY)) else {}),
        **({"offsets_set": change["changes"], "set_by": change["set_by"],
            "reason": change["reason"]} if (change := describe_change(extra)) else {}),
    }


def _instant_row(read: Callable[[], dict[str, Any]], kind: str) -> Callable[[], dict[str, Any]]:
    def fill() -> dict[str, Any]:
        metadata = read()
        row = commit_row(metadata)
        if kind == CLUSTERING:
            groups = len(replaced_groups(metadata))
            row["detail"] = f"clustered {groups} file group(s) into {row['files']} file(s)"
        return row

    return fill


def _known(row: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """A row's fields that the listing already gave (nothing to read)."""
    return lambda: row


def _timeline(table: HudiTable, timeline: ReplaceTimeline) -> list[_Found]:
    found: list[_Found] = []
    instants = table.list_instants()
    completed = {(i.time, i.action) for i in instants if i.state is InstantState.COMPLETED}
    for time, action in sorted({(i.time, i.action) for i in instants}):
        kind = INGESTION if action == layout.COMMIT_ACTION else CLUSTERING
        if (time, action) in completed:
            instant = Instant(time, action, InstantState.COMPLETED)
            found.append(_Found(time, kind, "committed",
                                _instant_row(partial(timeline.read, instant), kind)))
        else:
            found.append(_Found(time, kind, "inflight", _known({})))
    for instant in timeline.archived():
        if (instant.time, instant.action) in completed:
            continue  # half-way through archiving: still on the active timeline
        kind = INGESTION if instant.action == layout.COMMIT_ACTION else CLUSTERING
        found.append(_Found(instant.time, kind, "archived",
                            _instant_row(partial(timeline.read_archived, instant), kind)))
    return found


def _cleans(timeline: ReplaceTimeline) -> list[_Found]:
    return [_Found(r.instant, CLEAN, "completed", _known({
        "files": len(r.files),
        "detail": f"{len(r.files)} file(s) to deletion ({len(r.groups)} replaced group(s), "
                  f"{len(r.slices)} superseded slice(s)); retains instants from "
                  f"{r.earliest_retained}"})) for r in timeline.cleans()]


def _sink_log(table: HudiTable, known: set[str]) -> list[_Found]:
    """Rolled-back instants, and archival runs (their entries say what they archived)."""
    log = SinkLog(table.fs, table.base_path)
    found: list[_Found] = []
    for instant, decision in log.read_state().decisions.items():
        if instant in known:
            continue
        if decision.kind is EntryKind.ABORT:
            found.append(_Found(instant, INGESTION, "rolled_back",
                                _known({"reason": decision.reason})))
            continue
        try:
            entry = log.read_entry(decision.seq)
        except TableFormatError:
            continue  # trimmed meanwhile: nothing left to show
        if entry.action != _ARCHIVE_ACTION or entry.metadata is None:
            continue
        archived = [str(t) for t, _action in entry.metadata.get(_ARCHIVE_ACTION) or []]
        last = max(archived, key=instant_key, default="-")
        found.append(_Found(instant, ARCHIVE, "completed", _known({
            "detail": f"archived {len(archived)} instant(s) up to {last}"})))
    return found


def history_rows(table: HudiTable, limit: int | None = None) -> list[dict[str, Any]]:
    """The ``limit`` newest rows (all without it), newest first (see the module docstring)."""
    timeline = ReplaceTimeline(table)
    found = _timeline(table, timeline) + _cleans(timeline)
    found += _sink_log(table, {f.time for f in found})
    found.sort(key=lambda f: (instant_key(f.time), f.kind), reverse=True)
    shown = found if limit is None else found[:limit]
    return [{"commit_time": f.time, "kind": f.kind, "state": f.state, **f.fill()} for f in shown]
