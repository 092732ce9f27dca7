"""Participant admin routes: what each assigned partition is doing."""

from __future__ import annotations

from typing import Protocol

from fastapi import APIRouter
from pydantic import BaseModel

__all__ = ["PartitionView", "PartitionSource", "build_router"]


class PartitionView(BaseModel):
    """One assigned partition as ``GET /partitions`` shows it."""

    topic: str
    partition: int
    state: str
    commit_time: str | None
    coordinator_epoch: int
    start_offset: int
    buffered_records: int
    staged_files: int
    records_written: int
    records_dlq: int
    last_written_offset: int | None
    committed_offset: int | None
    fetched_offset: int | None
    lag: int | None
    failed: str | None


class PartitionSource(Protocol):
    """What the routes need from the service (no import of the service module)."""

    def partition_views(self) -> list[PartitionView]: ...


def build_router(service: PartitionSource) -> APIRouter:
    router = APIRouter(tags=["participant"])

    @router.get("/partitions", response_model=list[PartitionView])
    async def partitions() -> list[PartitionView]:
        return service.partition_views()

    return router
