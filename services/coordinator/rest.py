"""Coordinator admin routes: inspect and force transactions.

History comes from this process, the table's commits and the sink log's abort decisions
(``history.TransactionHistory``), so a freshly elected leader or a standby answers with the
same committed history; it is read in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel

if TYPE_CHECKING:
    from services.coordinator.service import CoordinatorService

__all__ = ["TransactionView", "CurrentTransaction", "ActionResponse", "build_router"]


class TransactionView(BaseModel):
    commit_time: str
    state: Literal["committed", "aborted", "inflight"]
    epoch: int | None = None
    records: int | None = None
    files: int | None = None
    bytes: int | None = None
    offsets: dict[str, int] = {}
    duration_s: float | None = None
    reason: str | None = None
    carried: list[str] | None = None
    """Partitions (``topic:p``) whose offsets a partial commit carried forward."""


class CurrentTransaction(BaseModel):
    role: Literal["leader", "standby"]
    phase: str
    commit_time: str | None
    epoch: int
    partitions_expected: int
    partitions_answered: list[str]
    partitions_pending: list[str]
    age_s: float | None
    leader: dict[str, Any]


class ActionResponse(BaseModel):
    accepted: bool
    commit_time: str | None
    detail: str


def build_router(service: CoordinatorService) -> APIRouter:
    router = APIRouter(tags=["coordinator"])

    def not_leader() -> JSONResponse:
        leader = service.leader_info()
        name = leader.get("admin_url") or leader.get("host") or "unknown"
        return JSONResponse(
            {"detail": f"this coordinator is a standby; the leader is {name}", "leader": leader},
            status_code=409,
        )

    @router.get("/transactions/current", response_model=CurrentTransaction)
    async def current() -> CurrentTransaction:
        state = service.current
        answered = sorted(f"{t}:{p}" for t, p in state.statuses) if state else []
        return CurrentTransaction(
            role="leader" if service.is_leader else "standby",
            phase=service.phase.state.value,
            commit_time=state.instant if state else None,
            epoch=service.committer.epoch if service.is_leader else service.committer.state.epoch,
            partitions_expected=len(state.expected) if state else 0,
            partitions_answered=answered,
            partitions_pending=[f"{t}:{p}" for t, p in state.pending()] if state else [],
            age_s=round(time.monotonic() - state.started_at, 3) if state else None,
            leader=service.leader_info(),
        )

    @router.get("/transactions", response_model=list[TransactionView])
    async def transactions(limit: int = Query(20, ge=1, le=1000)) -> list[TransactionView]:
        views = await asyncio.to_thread(service.transaction_views, limit)
        state = service.current
        if state is not None:
            views = [v for v in views if v.commit_time != state.instant]
            views.insert(0, TransactionView(
                commit_time=state.instant, state="inflight", epoch=state.epoch,
                offsets={f"{t}:{p}": o for (t, p), o in sorted(state.start_offsets.items())},
                duration_s=round(time.monotonic() - state.started_at, 3),
            ))
        return sorted(views, key=lambda v: v.commit_time, reverse=True)[:limit]

    @router.post("/transactions/commit", response_model=ActionResponse, status_code=202,
                 responses={409: {"description": "standby: names the leader"}})
    async def commit_now() -> Any:
        if not service.is_leader:
            return not_leader()
        instant = service.request_commit()
        detail = ("the current transaction ends now" if instant is not None
                  else "no transaction is open; the one starting next ends at once")
        return ActionResponse(accepted=True, commit_time=instant, detail=detail)

    @router.post("/transactions/abort", response_model=ActionResponse, status_code=202,
                 responses={409: {"description": "standby (names the leader), or no open transaction"}})
    async def abort_now() -> Any:
        if not service.is_leader:
            return not_leader()
        instant = service.request_abort()
        if instant is None:
            return JSONResponse({"detail": "no transaction is open (nothing to abort); retry "
                                 "once GET /transactions/current shows one"}, status_code=409)
        return ActionResponse(accepted=True, commit_time=instant,
                              detail=f"transaction {instant} is rolled back")

    return router
