"""Coordinator admin routes: inspect and force transactions.

History comes from this process, the table's commits and the sink log's abort decisions
(``history.TransactionHistory``), so a freshly elected leader or a standby answers with the
same committed history; it is read in a worker thread, never on the event loop. The view
models are in :mod:`.views`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from aiokafka.errors import KafkaError
from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from hudi_sink.services.coordinator.views import (
    CurrentTransaction,
    OffsetsAccepted,
    OffsetsRequest,
    OffsetsView,
    TransactionView,
)
from hudi_sink.shared.errors import ConfigError, HudiSinkError

__all__ = [
    "ActionResponse", "TransactionControl", "build_router", "MaintenanceControl",
    "build_maintenance_router", "OffsetControl", "build_offsets_router",
]


class ActionResponse(BaseModel):
    accepted: bool
    commit_time: str | None
    detail: str


class TransactionControl(Protocol):
    """What the routes need from the coordinator (queries and commands, no internals)."""

    @property
    def is_leader(self) -> bool: ...

    def leader_info(self) -> dict[str, Any]: ...

    def current_transaction(self) -> CurrentTransaction: ...

    def inflight_view(self) -> TransactionView | None: ...

    def transaction_views(self, limit: int) -> list[TransactionView]:
        """Blocking (table reads): the routes call it in a worker thread."""
        ...

    def request_commit(self) -> str | None: ...

    def request_abort(self) -> str | None: ...

    def schema_view(self) -> dict[str, Any]:
        """Blocking (table reads): the routes call it in a worker thread."""
        ...


def _not_leader(leader: dict[str, Any]) -> JSONResponse:
    """A standby's 409, naming the leader (its admin URL when it has one)."""
    name = leader.get("admin_url") or leader.get("host") or "unknown"
    return JSONResponse(
        {"detail": f"this coordinator is a standby; the leader is {name}", "leader": leader},
        status_code=409,
    )


def build_router(service: TransactionControl) -> APIRouter:
    router = APIRouter(tags=["coordinator"])

    @router.get("/transactions/current", response_model=CurrentTransaction)
    async def current() -> CurrentTransaction:
        return service.current_transaction()

    @router.get("/transactions", response_model=list[TransactionView])
    async def transactions(limit: int = Query(20, ge=1, le=1000)) -> list[TransactionView]:
        inflight = service.inflight_view()
        views = await asyncio.to_thread(service.transaction_views, limit)
        if inflight is not None:
            views = [v for v in views if v.commit_time != inflight.commit_time] + [inflight]
        return sorted(views, key=lambda v: v.commit_time, reverse=True)[:limit]

    @router.get("/schema")
    async def schema() -> dict[str, Any]:
        """The table's current schema (the latest commit's: DDL and Avro), where it comes
        from (``table.schema_source``) and changes the next commit makes."""
        return await asyncio.to_thread(service.schema_view)

    def on_leader(command: Callable[[], str | None], answer: Callable[[str | None], Any]) -> Any:
        """Run a transaction command on the leader; a standby answers 409 naming the leader."""
        if not service.is_leader:
            return _not_leader(service.leader_info())
        return answer(command())

    @router.post("/transactions/commit", response_model=ActionResponse, status_code=202,
                 responses={409: {"description": "standby: names the leader"}})
    async def commit_now() -> Any:
        return on_leader(service.request_commit, _commit_answer)

    @router.post("/transactions/abort", response_model=ActionResponse, status_code=202,
                 responses={409: {"description": "standby (names the leader), or no open transaction"}})
    async def abort_now() -> Any:
        return on_leader(service.request_abort, _abort_answer)

    return router


def _commit_answer(instant: str | None) -> ActionResponse:
    detail = ("the current transaction ends now" if instant is not None
              else "no transaction is open; the one starting next ends at once")
    return ActionResponse(accepted=True, commit_time=instant, detail=detail)


def _abort_answer(instant: str | None) -> ActionResponse | JSONResponse:
    if instant is None:
        return JSONResponse({"detail": "no transaction is open (nothing to abort); retry "
                             "once GET /transactions/current shows one"}, status_code=409)
    return ActionResponse(accepted=True, commit_time=instant,
                          detail=f"transaction {instant} is rolled back")


class MaintenanceControl(Protocol):
    """What ``/maintenance`` needs: the table services' state and a way to run them now."""

    @property
    def is_leader(self) -> bool: ...

    def leader_info(self) -> dict[str, Any]: ...

    def maintenance_view(self) -> dict[str, Any]: ...

    def clustering_refused(self) -> str | None:
        """Why clustering cannot run on this sink (naming the key), or None."""
        ...

    def request_clustering(self) -> None: ...


def build_maintenance_router(service: MaintenanceControl) -> APIRouter:
    router = APIRouter(tags=["maintenance"])

    @router.get("/maintenance")
    async def maintenance() -> dict[str, Any]:
        """Files per partition, small files, active instants, the last clustering, clean and
        archival (instant, duration) and the last error of this leader's routine."""
        return service.maintenance_view()

    @router.post("/maintenance/clustering", response_model=ActionResponse, status_code=202,
                 responses={409: {"description": "standby (names the leader), or clustering "
                                                 "cannot run (names the key)"}})
    async def cluster_now() -> Any:
        if not service.is_leader:
            return _not_leader(service.leader_info())
        if (refused := service.clustering_refused()) is not None:
            return JSONResponse({"detail": refused}, status_code=409)
        service.request_clustering()
        return ActionResponse(accepted=True, commit_time=None,
                              detail="a maintenance pass (clustering, clean, archival) starts now")

    return router


class OffsetControl(Protocol):
    """What ``/offsets`` needs: the committed offsets and a way to set some."""

    @property
    def is_leader(self) -> bool: ...

    def leader_info(self) -> dict[str, Any]: ...

    def offsets_view(self) -> OffsetsView:
        """Blocking (a table read): the route calls it in a worker thread."""
        ...

    def offsets_refused(self) -> str | None:
        """Why setting offsets is refused to every caller (no admin.token), or None."""
        ...

    async def request_offsets(self, raw: dict[str, Any], reason: str) -> OffsetsAccepted: ...


def build_offsets_router(service: OffsetControl) -> APIRouter:
    router = APIRouter(tags=["offsets"])

    @router.get("/offsets", response_model=OffsetsView)
    async def offsets() -> OffsetsView:
        """Committed offsets per partition (the latest commit's ``kafka.commit.offsets``)."""
        return await asyncio.to_thread(service.offsets_view)

    @router.post("/offsets", response_model=OffsetsAccepted, status_code=202,
                 responses={409: {"description": "standby (names the leader), or a change is "
                                                 "still pending"},
                            422: {"description": "a bad entry or reason (named)"},
                            503: {"description": "Kafka did not answer (nothing changed)"}})
    async def set_offsets(body: OffsetsRequest) -> Any:
        """Set chosen partitions' offsets at the next instant boundary, as a fenced commit
        that records the reason (README: "Skipping a poison record")."""
        if (refused := service.offsets_refused()) is not None:
            return JSONResponse({"detail": refused}, status_code=403)
        if not service.is_leader:
            return _not_leader(service.leader_info())
        try:
            return await service.request_offsets(body.offsets, body.reason)
        except ConfigError as exc:
            return JSONResponse({"detail": str(exc), "key": exc.key}, status_code=422)
        except HudiSinkError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=409)
        except KafkaError as exc:  # the partition counts could not be read: nothing queued
            return JSONResponse({"detail": f"Kafka did not answer ({exc!r}); nothing was "
                                           "changed, retry"}, status_code=503)

    return router
