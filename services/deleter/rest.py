"""Deleter admin routes: stats, the deletion DLQ (list and replay) and the orphan scan.

The routes answer with the models of :mod:`.views` and reach the service only through
:class:`DeletionControl` (no import of the service module). Bearer auth is added by the
service shell's admin app around this router.
"""

from __future__ import annotations

from typing import Any, Protocol

from fastapi import APIRouter, HTTPException, Query

from hudi_sink.services.deleter.errors import ServiceUnavailable
from hudi_sink.services.deleter.views import (
    DLQ_LIST_DEFAULT,
    DLQ_LIST_MAX,
    DeletionStats,
    DlqEntry,
    ReconcileResult,
    ReplayResult,
)

__all__ = ["DeletionControl", "build_router"]


_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"description": "Kafka is not reachable, or the deleter's clients are not running"}
}


class DeletionControl(Protocol):
    """What the routes need from the deleter (queries and commands, no internals).

    The commands raise :class:`ServiceUnavailable` when Kafka or the service's clients are
    not there (503)."""

    def stats(self) -> DeletionStats: ...

    async def list_dlq(self, limit: int) -> list[DlqEntry]: ...

    async def replay_dlq(self) -> ReplayResult: ...

    async def reconcile(self, *, dry_run: bool = True) -> ReconcileResult: ...


def build_router(service: DeletionControl) -> APIRouter:
    router = APIRouter(tags=["deleter"])

    @router.get("/deletions/stats", response_model=DeletionStats)
    async def stats() -> DeletionStats:
        return service.stats()

    @router.get("/deletions/dlq", response_model=list[DlqEntry], responses=_UNAVAILABLE)
    async def dlq(limit: int = Query(DLQ_LIST_DEFAULT, ge=1, le=DLQ_LIST_MAX)) -> list[DlqEntry]:
        """The first ``limit`` entries; concurrent requests share one read of the topic."""
        try:
            return await service.list_dlq(limit)
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
