"""The deleter's parts around the decision rules, without a broker: the routes through the
``DeletionControl`` protocol (a stand-in service, no import of the service module), the tally
that stats and metrics share, and the periodic routine the scheduled work runs on."""

from __future__ import annotations

import ast
import asyncio
import time
from pathlib import Path

import httpx
from eventually import eventually_async
from fastapi import FastAPI

from hudi_sink.services.deleter.context import Counted, Tally
from hudi_sink.services.deleter.errors import ServiceUnavailable
from hudi_sink.services.deleter.rest import build_router
from hudi_sink.services.deleter.settle import Effect
from hudi_sink.services.deleter.views import DeletionStats, DlqEntry, ReconcileResult, ReplayResult
from hudi_sink.shared.runtime.lifecycle import periodically
from hudi_sink.shared.runtime.metrics import Metrics

DELETER = Path(__file__).resolve().parents[2] / "services" / "deleter"


def _stats(**counts: int) -> DeletionStats:
    fields = {name: 0 for name in DeletionStats.model_fields} | {"scheduler": False}
    return DeletionStats(**(fields | counts))


class StandIn:
    """A deleter whose Kafka is down: stats answer, the commands raise ServiceUnavailable."""

    def __init__(self) -> None:
        self.dry_runs: list[bool] = []

    def stats(self) -> DeletionStats:
        return _stats(deleted=3)

    async def list_dlq(self, limit: int) -> list[DlqEntry]:
        raise ServiceUnavailable("cannot read t-deletion-dlq: broker down")

    async def replay_dlq(self) -> ReplayResult:
        raise ServiceUnavailable("the deleter is not running (no producer)")

    async def reconcile(self, *, dry_run: bool = True) -> ReconcileResult:
        self.dry_runs.append(dry_run)
        if not dry_run:
            raise ServiceUnavailable("the deleter is not running (no producer)")
        return ReconcileResult(dry_run=True, orphans=[], enqueued=0)


async def test_routes_answer_through_the_protocol_and_map_unavailable_to_503() -> None:
    service = StandIn()
    app = FastAPI()
    app.include_router(build_router(service))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://d") as http:
        assert (await http.get("/deletions/stats")).json()["deleted"] == 3
        listed = await http.get("/deletions/dlq")
        assert listed.status_code == 503 and "broker down" in listed.json()["detail"]
        assert (await http.post("/deletions/dlq/replay")).status_code == 503
        dry = await http.post("/deletions/reconcile")
        assert dry.status_code == 200 and dry.json() == {"dry_run": True, "orphans": [], "enqueued": 0}
        assert (await http.post("/deletions/reconcile?dry_run=false")).status_code == 503
    assert service.dry_runs == [True, False]


def test_no_deleter_module_but_the_service_imports_the_service() -> None:
    """The routes know the deleter only through ``DeletionControl``; no import cycle."""
    for path in DELETER.glob("*.py"):
        if path.name == "service.py":
            continue
        imported = {node.module for node in ast.walk(ast.parse(path.read_text()))
                    if isinstance(node, ast.ImportFrom)}
        assert "hudi_sink.services.deleter.service" not in imported, path.name


def test_the_tally_feeds_stats_and_the_deletion_metric() -> None:
    metrics = Metrics("deleter")
    tally = Tally(metrics)
    tally.add(Effect.DELETED)
    tally.add(Effect.DELETED)
    tally.add(Counted.ORPHAN_FOUND, 5)
    assert (tally[Effect.DELETED], tally[Counted.ORPHAN_FOUND], tally[Effect.DLQ]) == (2, 5, 0)
    text = metrics.render().decode()
    assert 'hudi_sink_deletions_total{outcome="deleted"} 2.0' in text
    assert 'hudi_sink_deletions_total{outcome="orphan_found"} 5.0' in text
    assert 'outcome="dlq"' not in text, "nothing counted, nothing exported"


async def test_periodically_waits_what_the_step_asks_and_stops_at_once() -> None:
    stop = asyncio.Event()
    runs: list[float] = []

    async def step() -> float:
        runs.append(time.monotonic())
        if len(runs) == 3:
            stop.set()
        return 0.05

    await asyncio.wait_for(periodically(stop, step), 5)
    assert len(runs) == 3, "no run after the stop"
    assert runs[1] - runs[0] >= 0.04 and runs[2] - runs[1] >= 0.04, "the step's wait is honoured"

    async def slow() -> float:
        runs.append(time.monotonic())
        return 60.0

    runs.clear()
    stop = asyncio.Event()
    routine = asyncio.create_task(periodically(stop, slow))
    await eventually_async(lambda: runs, 5, "the first run, then the 60 s wait")
    stop.set()
    await asyncio.wait_for(routine, 1)  # a stop ends the 60 s wait at once
    assert len(runs) == 1
