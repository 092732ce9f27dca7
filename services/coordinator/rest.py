"""Coordinator admin routes: inspect and force transactions.

History comes from the sink log (every commit and abort decision, whoever took it), so a
freshly elected leader or a standby answers with the same history.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from shared.hudi.naming import parse_instant_time
from shared.hudi.offsets import KAFKA_COMMIT_OFFSETS_KEY, parse_offsets
from shared.sink_log import EntryKind, LogEntry

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


def _duration(entry: LogEntry) -> float | None:
    if not entry.instant or not entry.created_at:
        return None
    try:
        started = parse_instant_time(entry.instant)
        return round((datetime.fromisoformat(entry.created_at) - started).total_seconds(), 3)
    except ValueError:
        return None


def view_of_entry(entry: LogEntry, topics: list[str]) -> TransactionView:
    assert entry.instant is not None
    if entry.kind is EntryKind.ABORT:
        return TransactionView(commit_time=entry.instant, state="aborted", epoch=entry.epoch,
                               reason=entry.reason, duration_s=_duration(entry))
    metadata = entry.metadata or {}
    stats = [s for group in metadata.get("partitionToWriteStats", {}).values() for s in group]
    extra = metadata.get("extraMetadata", {})
    offsets = parse_offsets(extra.get(KAFKA_COMMIT_OFFSETS_KEY, ""), topics)
    return TransactionView(
        commit_time=entry.instant,
        state="committed",
        epoch=entry.epoch,
        records=sum(int(s.get("numWrites", 0)) for s in stats),
        files=len(stats),
        bytes=sum(int(s.get("fileSizeInBytes", 0)) for s in stats),
        offsets={f"{t}:{p}": o for (t, p), o in sorted(offsets.items())},
        duration_s=_duration(entry),
    )


def build_router(service: CoordinatorService) -> APIRouter:
    router = APIRouter(tags=["coordinator"])
    topics = list(service.config.kafka.topics)

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
        views: dict[str, TransactionView] = {
            instant: view_of_entry(entry, topics)
            for instant, entry in service.committer.state.decisions.items()
        }
        for instant, view in service.history.items():
            if instant not in views or view.duration_s is not None:
                merged = views.get(instant)
                views[instant] = view if merged is None else merged.model_copy(
                    update={"duration_s": view.duration_s or merged.duration_s})
        state = service.current
        if state is not None:
            views[state.instant] = TransactionView(
                commit_time=state.instant, state="inflight", epoch=state.epoch,
                offsets={f"{t}:{p}": o for (t, p), o in sorted(state.start_offsets.items())},
                duration_s=round(time.monotonic() - state.started_at, 3),
            )
        return [views[k] for k in sorted(views, reverse=True)[:limit]]

    @router.post("/transactions/commit", response_model=ActionResponse, status_code=202,
                 responses={409: {"description": "standby: names the leader"}})
    async def commit_now() -> Any:
        if not service.is_leader:
            return not_leader()
        service.request_commit()
        state = service.current
        return ActionResponse(accepted=True, commit_time=state.instant if state else None,
                              detail="the current transaction ends now")

    @router.post("/transactions/abort", response_model=ActionResponse, status_code=202,
                 responses={409: {"description": "standby: names the leader"}})
    async def abort_now() -> Any:
        if not service.is_leader:
            return not_leader()
        service.request_abort()
        state = service.current
        return ActionResponse(accepted=True, commit_time=state.instant if state else None,
                              detail="the current transaction is rolled back")

    return router
