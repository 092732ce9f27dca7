"""``GET /maintenance`` and ``POST /maintenance/clustering`` against a stand-in service."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from hudi_sink.services.coordinator.rest import build_maintenance_router


class FakeService:
    def __init__(self, leader: bool) -> None:
        self.is_leader = leader
        self.requested = 0

    def leader_info(self) -> dict[str, Any]:
        return {"admin_url": "http://leader:8080"}

    def maintenance_view(self) -> dict[str, Any]:
        return {"role": "leader" if self.is_leader else "standby", "small_files": 3, "last": {}}

    def request_clustering(self) -> None:
        self.requested += 1


def _client(service: FakeService) -> TestClient:
    app = FastAPI()
    app.include_router(build_maintenance_router(service))
    return TestClient(app)


def test_view_and_forced_run_on_the_leader() -> None:
    service = FakeService(leader=True)
    client = _client(service)
    assert client.get("/maintenance").json()["small_files"] == 3
    response = client.post("/maintenance/clustering")
    assert response.status_code == 202 and service.requested == 1


def test_standby_refuses_a_forced_run_naming_the_leader() -> None:
    service = FakeService(leader=False)
    response = _client(service).post("/maintenance/clustering")
    assert response.status_code == 409 and "http://leader:8080" in response.json()["detail"]
    assert service.requested == 0
