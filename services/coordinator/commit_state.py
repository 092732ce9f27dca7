"""Bookkeeping of the one open transaction — no I/O, a clock passed in.

Completeness is a *set* of partitions that answered, never a count: a duplicate status, a
status of a stale owner or of an instant we are not running cannot make an instant look
complete (Hudi's count-based check could).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, StrEnum

from hudi_sink.shared.kafka.partition_key import PartitionKey
from hudi_sink.shared.kafka.protocol import WriteStatus

__all__ = ["CommitState", "StatusOutcome", "AbortReason"]


class AbortReason(StrEnum):
    """Why an instant was rolled back (a metric label and the ``reason`` of
    ``GET /transactions``); the value is what operators read."""

    WRITE_STATUS_TIMEOUT = "write status timeout"
    FORCED = "forced through REST"
    SHUTDOWN = "coordinator shut down"
    TAKEOVER = "rolled back on takeover"
    STAGED_FILES_UNUSABLE = "staged files unusable"
    NOTHING_MOVED = "no offset moved"
    """Nothing to commit, but not withdrawn quietly (``services.coordinator.idle``)."""


class StatusOutcome(Enum):
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"  # this partition already answered for this instant
    NOT_EXPECTED = "not_expected"  # not a partition of this transaction
    NOT_OWNER = "not_owner"  # another member announced the partition after the sender
    BAD_START = "bad_start"  # did not start from the offset we sent: a stale START


@dataclass
class CommitState:
    instant: str
    epoch: int
    expected: frozenset[PartitionKey]
    start_offsets: dict[PartitionKey, int]
    started_at: float
    ended_at: float | None = None
    end_sent_at: float | None = None
    statuses: dict[PartitionKey, WriteStatus] = field(default_factory=dict)
    owners: dict[PartitionKey, str] = field(default_factory=dict)
    """Latest member that announced each partition (PARTICIPANT_READY)."""
    heard_at: float | None = None
    """When a participant last announced a partition of this instant (alive, working)."""
    window_from: float | None = None
    """When the stream's share of this instant began, if not at its START: in upsert mode the
    previous instant's END under this leadership, unless that instant was rolled back (its
    partitions seek back and read again, with no read-ahead to hand over). See
    :meth:`is_interval_reached`."""

    # --- predicates ---------------------------------------------------------------------
    def is_interval_reached(self, now: float, interval_s: float) -> bool:
        """Whether END is due: ``interval_s`` after ``window_from`` (else after START), and
        never before START.

        Why upsert mode counts from the previous END: an upsert partition writes nothing
        before END (each instant writes one slice per group), so while a commit's merges
        outlast the interval, the records arriving meanwhile have waited an interval or more
        when the next instant starts, and waiting another one only delays them. Measured on
        ``hudi-sink bench --mode upsert`` (merges of 10-19 s, a 2 s interval): an update
        arriving just after an END waited for that merge, a whole interval, then its own
        merge. Insert mode counts from START: its partitions flush full buffers as new
        groups while an instant is open, so that time is work, and every instant ends with a
        barrier (each partition's last flush, the commit); counted from the previous END,
        its keyed backlog ran in 6 instants instead of 4 and 24,839-28,151 records/s instead
        of 31,052 (same bench, same day)."""
        if self.ended_at is not None:
            return False
        window_from = self.started_at if self.window_from is None else self.window_from
        return now - window_from >= interval_s

    def is_timed_out(self, now: float, timeout_s: float) -> bool:
        return self.ended_at is not None and now - self.ended_at >= timeout_s

    def is_complete(self) -> bool:
        return self.expected <= self.statuses.keys()

    def should_resend_end(self, now: float, resend_s: float) -> bool:
        return (
            self.end_sent_at is not None
            and not self.is_complete()
            and now - self.end_sent_at >= resend_s
        )

    def pending(self) -> list[PartitionKey]:
        return sorted(self.expected - self.statuses.keys())

    def has_known_owner(self) -> bool:
        """Whether any participant announced a partition of this instant (or answered).

        While none has, nobody can answer an END: ending would only run into the timeout
        (a cold start where Spark warms for seconds), so the instant stays open instead."""
        return bool(self.owners) or bool(self.statuses)

    def carried(self) -> list[PartitionKey]:
        """Partitions whose offsets this instant does not advance because they did not
        answer, or answered that they gave the instant up (a flush failed for good)."""
        failed = {key for key, status in self.statuses.items()
                  if status.failed and status.next_offset == status.start_offset}
        return sorted((self.expected - self.statuses.keys()) | failed)

    # --- events -------------------------------------------------------------------------
    def announce(self, key: PartitionKey, member: str, now: float | None = None) -> None:
        self.owners[key] = member
        if now is not None and key in self.expected:
            self.heard_at = now

    def heard_recently(self, now: float, within_s: float) -> bool:
        """Whether a participant of this instant announced itself within ``within_s``:
        it is alive and still preparing its report (e.g. a slow first flush)."""
        return self.heard_at is not None and now - self.heard_at <= within_s

    def record_status(self, status: WriteStatus, member: str) -> StatusOutcome:
        key = status.key()
        if key not in self.expected:
            return StatusOutcome.NOT_EXPECTED
        if key in self.statuses:
            return StatusOutcome.DUPLICATE
        owner = self.owners.get(key)
        if owner is not None and owner != member:
            return StatusOutcome.NOT_OWNER
        if status.start_offset != self.start_offsets.get(key, 0) or status.next_offset < status.start_offset:
            return StatusOutcome.BAD_START
        self.statuses[key] = status
        return StatusOutcome.ACCEPTED

    def drop_status(self, key: PartitionKey) -> None:
        """Forget an accepted status whose files turned out unusable (missing or of the
        wrong size): the partition is then carried like one that never answered."""
        self.statuses.pop(key, None)

    def mark_ended(self, now: float) -> None:
        self.ended_at = now
        self.end_sent_at = now

    def next_offsets(self) -> dict[PartitionKey, int]:
        """Offsets after this instant: answered partitions advance, others keep theirs."""
        offsets = dict(self.start_offsets)
        for key, status in self.statuses.items():
            offsets[key] = status.next_offset
        return offsets
