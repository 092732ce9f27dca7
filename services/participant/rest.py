"""Participant admin routes: what each assigned partition is doing.

The router only; the view models are in :mod:`.views`, and the service supplies its
partitions' views through :class:`PartitionSource` (this module imports neither the service
nor the domain).
"""

from __future__ import annotations

from typing import Protocol

from fastapi import APIRouter

from hudi_sink.services.participant.views import PartitionView

__all__ = ["PartitionSource", "build_router"]


class PartitionSource(Protocol):
    """What the routes need from the service (no import of the service module)."""

    def partition_views(self) -> list[PartitionView]: ...


def build_router(service: PartitionSource) -> APIRouter:
    router = APIRouter(tags=["participant"])

    @router.get("/partitions", response_model=list[PartitionView])
    async def partitions() -> list[PartitionView]:
        return service.partition_views()

    return router
