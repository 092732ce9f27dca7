"""``GET /offsets`` and ``POST /offsets``: the answers of the routes (stand-in service), and the
real coordinator's rule that setting offsets needs admin.token even where the other POSTs are
open (``admin.allow_unauthenticated``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiokafka.errors import KafkaConnectionError
from fastapi import FastAPI
from fastapi.testclient import TestClient

from hudi_sink.services.coordinator.rest import build_offsets_router
from hudi_sink.services.coordinator.service import CoordinatorService
from hudi_sink.services.coordinator.views import OffsetsAccepted, OffsetsView
from hudi_sink.shared.config.settings import config_from_mapping
from hudi_sink.shared.errors import ConfigError, HudiSinkError
from hudi_sink.shared.runtime.admin import create_admin_app
from hudi_sink.shared.runtime.metrics import Metrics

BODY = {"offsets": {"orders:0": 101}, "reason": "poison record"}


class FakeService:
    def __init__(self, leader: bool = True, error: Exception | None = None) -> None:
        self.is_leader = leader
        self.error = error
        self.asked: list[tuple[dict[str, Any], str]] = []

    def leader_info(self) -> dict[str, Any]:
        return {"admin_url": "http://leader:8080"}

    def offsets_view(self) -> OffsetsView:
        return OffsetsView(commit_time="20250101000000001", offsets={"orders:0": 100})

    def offsets_refused(self) -> str | None:
        return None

    async def request_offsets(self, raw: dict[str, Any], reason: str) -> OffsetsAccepted:
        if self.error is not None:
            raise self.error
        self.asked.append((raw, reason))
        return OffsetsAccepted(accepted=True, request_id="r1", offsets={"orders:0": 101}, detail="")


def _client(service: FakeService) -> TestClient:
    app = FastAPI()
    app.include_router(build_offsets_router(service))
    return TestClient(app)


def test_the_leader_takes_a_change_and_any_coordinator_shows_the_offsets() -> None:
    service = FakeService()
    client = _client(service)
    assert client.get("/offsets").json()["offsets"] == {"orders:0": 100}
    response = client.post("/offsets", json=BODY)
    assert response.status_code == 202 and response.json()["request_id"] == "r1"
    assert service.asked == [({"orders:0": 101}, "poison record")]


def test_refusals_name_what_is_wrong() -> None:
    standby = _client(FakeService(leader=False)).post("/offsets", json=BODY)
    assert standby.status_code == 409 and "http://leader:8080" in standby.json()["detail"]
    bad = _client(FakeService(error=ConfigError("no such partition", "offsets.orders:9")))
    answer = bad.post("/offsets", json=BODY)
    assert answer.status_code == 422 and answer.json()["key"] == "offsets.orders:9"
    pending = _client(FakeService(error=HudiSinkError("offset change r0 is still pending")))
    assert pending.post("/offsets", json=BODY).status_code == 409
    assert _client(FakeService()).post("/offsets", json={"reason": "x"}).status_code == 422
    kafka_down = _client(FakeService(error=KafkaConnectionError()))
    assert kafka_down.post("/offsets", json=BODY).status_code == 503


def test_setting_offsets_needs_a_token_even_where_other_posts_are_open(tmp_path: Path) -> None:
    service = CoordinatorService(config_from_mapping({
        "name": "t", "kafka": {"topics": ["orders"]},
        "table": {"base_path": str(tmp_path / "table"), "schema": "id STRING"},
        "admin": {"allow_unauthenticated": True}}, environ={}))
    app = create_admin_app("coordinator", readiness=lambda: [], metrics=Metrics("unit"),
                           token=None, routers=service.routers(), allow_unauthenticated=True)
    client = TestClient(app)
    refused = client.post("/offsets", json=BODY)
    assert refused.status_code == 403 and "admin.token" in refused.json()["detail"]
    assert client.post("/transactions/commit").status_code == 409  # open, but a standby
    shown = client.get("/offsets").json()  # a standby reads the table: no commit yet
    assert shown == {"commit_time": None, "offsets": {}, "last_request": None}
