"""Transaction history for ``GET /transactions``: bounded, and built off the event loop.

Sources, newest knowledge first:
1. what this process saw as leader (exact durations, abort reasons, carried partitions);
2. the table's completed commits (any leader's, read from ``<T>.commit`` metadata);
3. ABORT decisions still in the sink log (older ones are trimmed with the log).
Only the ``limit`` newest commits are read from the table, so a request costs one timeline
listing plus at most ``limit`` small reads — in a worker thread, never on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hudi_sink.services.coordinator.commit_metadata import CARRIED_KEY
from hudi_sink.services.coordinator.commit_state import CommitState
from hudi_sink.services.coordinator.views import TransactionView
from hudi_sink.shared.errors import TableFormatError
from hudi_sink.shared.hudi.offset_change import describe_change
from hudi_sink.shared.hudi.offsets import offsets_from_metadata
from hudi_sink.shared.hudi.table import HudiTable
from hudi_sink.shared.kafka.partition_key import PartitionKey, key_text, offsets_by_text

__all__ = ["TransactionHistory", "view_of_commit", "transaction_view", "inflight_view"]

KEEP = 1000


def view_of_commit(instant: str, metadata: Mapping[str, Any], topics: list[str]) -> TransactionView:
    """A committed transaction as its commit file describes it."""
    stats = [s for group in (metadata.get("partitionToWriteStats") or {}).values() for s in group]
    extra = metadata.get("extraMetadata") or {}
    try:
        offsets = offsets_from_metadata(extra, topics)
    except TableFormatError:
        offsets = {}
    epoch = extra.get("hudi.sink.coordinator.epoch")
    carried = extra.get(CARRIED_KEY)
    change = describe_change(extra)  # an operator's offset change: its reason is the audit
    return TransactionView(
        commit_time=instant,
        state="committed",
        epoch=int(epoch) if isinstance(epoch, str) and epoch.isdigit() else None,
        records=sum(int(s.get("numWrites", 0)) for s in stats),
        files=len(stats),
        bytes=sum(int(s.get("fileSizeInBytes", 0)) for s in stats),
        offsets=offsets_by_text(offsets),
        carried=carried.split(",") if carried else None,
        reason=f"offsets set ({change['set_by']}): {change['reason']}" if change else None,
    )


def transaction_view(state: CommitState, status: str, *, records: int | None = None,
                     files: int | None = None, bytes_: int | None = None,
                     duration: float | None = None, reason: str | None = None,
                     carried: list[PartitionKey] | None = None) -> TransactionView:
    """What this leader knows of a transaction it ran: a committed one shows the offsets it
    moved to, any other the offsets it started from."""
    offsets = state.next_offsets() if status == "committed" else state.start_offsets
    return TransactionView(
        commit_time=state.instant,
        state=status,
        epoch=state.epoch,
        records=records,
        files=files,
        bytes=bytes_,
        offsets=offsets_by_text(offsets),
        duration_s=round(duration, 3) if duration is not None else None,
        reason=reason,
        carried=[key_text(key) for key in carried] if carried else None,
    )


def inflight_view(state: CommitState, now: float) -> TransactionView:
    """The open transaction, ``now`` on the monotonic clock it was started with."""
    return TransactionView(
        commit_time=state.instant, state="inflight", epoch=state.epoch,
        offsets=offsets_by_text(state.start_offsets),
        duration_s=round(now - state.started_at, 3),
    )


class TransactionHistory:
    """The views this process recorded (at most ``keep``), merged with the table on read."""

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._views: dict[str, TransactionView] = {}

    def record(self, view: TransactionView) -> None:
        self._views[view.commit_time] = view
        if len(self._views) > self._keep:
            for instant in sorted(self._views)[: len(self._views) - self._keep]:
                del self._views[instant]

    def record_if_absent(self, view: TransactionView) -> None:
        if view.commit_time not in self._views:
            self.record(view)

    def __len__(self) -> int:
        return len(self._views)

    def get(self, instant: str) -> TransactionView | None:
        return self._views.get(instant)

    def newest(
        self,
        limit: int,
        *,
        table: HudiTable,
        aborted: Mapping[str, str],
        topics: list[str],
    ) -> list[TransactionView]:
        """The ``limit`` newest transactions, newest first. Blocking (table reads): call it
        in a worker thread. ``aborted`` maps instant → reason from the sink log."""
        views = dict(self._views)  # a snapshot: the event loop may record meanwhile
        for instant, reason in aborted.items():
            views.setdefault(instant, TransactionView(commit_time=instant, state="aborted",
                                                      reason=reason))
        for instant in table.completed_commits()[-limit:]:
            known = views.get(instant)
            if known is not None and known.state == "committed":
                continue
            try:
                views[instant] = view_of_commit(instant, table.read_commit_metadata(instant), topics)
            except TableFormatError:
                continue  # archived or removed meanwhile
        return [views[k] for k in sorted(views, reverse=True)[:limit]]
