"""Deleter admin routes: stats, the deletion DLQ (list and replay) and the orphan scan.

The views are what the routes answer; the routes reach the service only through
:class:`DeletionControl` (no import of the service module). Bearer auth is added by the
service shell's admin app around this router.
"""

from __future__ import annotations

from typing import Any, Protocol

from fastapi import APIRouter, HTTPException, Query
from pydantic import BaseModel

from services.deleter.errors import ServiceUnavailable

__all__ = ["DeletionStats", "DlqEntry", "ReplayResult", "OrphanView", "ReconcileResult",
           "DeletionControl", "build_router"]


class DeletionStats(BaseModel):
    """Counters since this deleter process started (each pod counts its own work)."""

    pending: int
    """Intents fetched and held back until their not-before time (a lower bound of the
    backlog: the broker's end offsets are not trusted, see reference/tansu-broker.md)."""
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


_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"description": "Kafka is not reachable, or the deleter's clients are not running"}
}


class DeletionControl(Protocol):
    """What the routes need from the deleter (queries and commands, no internals).

    The commands raise :class:`ServiceUnavailable` when Kafka or the service's clients are
    not there (503)."""

    def stats(self) -> DeletionStats: ...

    async def list_dlq(self) -> list[DlqEntry]: ...

    async def replay_dlq(self) -> ReplayResult: ...

    async def reconcile(self, *, dry_run: bool = True) -> ReconcileResult: ...


def build_router(service: DeletionControl) -> APIRouter:
    router = APIRouter(tags=["deleter"])

    @router.get("/deletions/stats", response_model=DeletionStats)
    async def stats() -> DeletionStats:
        return service.stats()

    @router.get("/deletions/dlq", response_model=list[DlqEntry], responses=_UNAVAILABLE)
    async def dlq() -> list[DlqEntry]:
        try:
            return await service.list_dlq()
        except ServiceUnavailable as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from None

    @router.post("/deletions/dlq/replay", response_model=ReplayResult, responses=_UNAVAILABLE)
    async def replay() -> ReplayResult:
        try:
            return await service.replay_dlq()
        except ServiceUnavailable as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from None

    @router.post("/deletions/reconcile", response_model=ReconcileResult, responses=_UNAVAILABLE)
    async def reconcile(dry_run: bool = Query(True)) -> ReconcileResult:
        try:
            return await service.reconcile(dry_run=dry_run)
        except ServiceUnavailable as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from None

    return router
