"""What the deleter's admin routes answer: its counters, the deletion DLQ, replays and the
orphan scan.

The domain parts (``dlq``, ``reconcile``) build these and the routes (``rest``) return them;
domain modules never import ``rest``.
"""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["DeletionStats", "DlqEntry", "ReplayResult", "OrphanView", "ReconcileResult",
           "DLQ_LIST_DEFAULT", "DLQ_LIST_MAX"]

DLQ_LIST_DEFAULT = 1000
"""Entries ``GET /deletions/dlq`` returns unless it asks for ``limit``."""
DLQ_LIST_MAX = 100_000
"""The most one read of the deletion DLQ holds, and so the largest ``limit``."""


class DeletionStats(BaseModel):
    """Counters since this deleter process started (each pod counts its own work)."""

    pending: int
    """Intents fetched and held back until their not-before time (a lower bound of the
    backlog: the broker's end offsets are not trusted)."""
    deleted: int
    kept_in_use: int
    """Intents dropped because the file must stay (listed, rolled-back replace, foreign)."""
    retried: int
    """Re-enqueues to the retry topic (not yet decidable, or the delete failed)."""
    dlq: int
    reconcile_orphans: int
    """Orphans reported by reconcile scans (dry runs and scheduled scans included)."""
    missing_already: int
    """Intents whose file was already gone (duplicates, redeliveries): success."""
    failed: int
    """Attempts that raised (storage or metadata errors); each is retried or dead-lettered."""
    replayed: int
    undecodable: int
    swept: int
    """Files of finished instants' staging removed by the scheduled sweep (nobody had
    announced them, e.g. a flush that landed after the rollback's intents were sent)."""
    staging_dirs_removed: int
    """Staging directories of finished instants removed once they held no file."""
    scheduler: bool
    """Whether this pod runs the scheduled sweep and reconcile (it holds deletion
    partition 0)."""
    sweeps: int
    reconciles: int
    """Scheduled passes this pod completed (a failed pass is logged and counted in
    ``hudi_sink_deletion_scheduled_runs_total{result="failed"}``)."""


class DlqEntry(BaseModel):
    """One message of the deletion DLQ."""

    partition: int
    offset: int
    file_path: str | None
    table_path: str | None
    reason: str | None
    killing_instant: str | None
    attempts: int | None
    last_error: str | None
    error_class: str | None
    dlq_reason: str | None
    first_failure_at: float | None
    replayed: bool
    source: str | None
    """Where the intent was first consumed: ``topic:partition:offset``."""


class ReplayResult(BaseModel):
    replayed: int
    already_replayed: int
    undecodable: int


class OrphanView(BaseModel):
    path: str
    size: int
    age_s: float


class ReconcileResult(BaseModel):
    dry_run: bool
    orphans: list[OrphanView]
    enqueued: int
