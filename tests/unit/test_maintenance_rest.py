"""``GET /maintenance`` and ``POST /maintenance/clustering`` against a stand-in service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from hudi_sink.services.coordinator.rest import build_maintenance_router
from hudi_sink.services.coordinator.service import CoordinatorService
from hudi_sink.shared.config.settings import config_from_mapping


class FakeService:
    def __init__(self, leader: bool, clustering: bool = True) -> None:
        self.is_leader = leader
        self.clustering = clustering
        self.requested = 0

    def leader_info(self) -> dict[str, Any]:
        return {"admin_url": "http://leader:8080"}

    def maintenance_view(self) -> dict[str, Any]:
        return {"role": "leader" if self.is_leader else "standby", "small_files": 3, "last": {}}

    def clustering_refused(self) -> str | None:
        return None if self.clustering else "set maintenance.clustering.enabled: true"

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


def test_a_forced_run_is_refused_while_clustering_is_off_naming_the_key() -> None:
    service = FakeService(leader=True, clustering=False)
    response = _client(service).post("/maintenance/clustering")
    assert response.status_code == 409
    assert "maintenance.clustering.enabled" in response.json()["detail"]
    assert service.requested == 0


def test_the_coordinator_refuses_clustering_unless_it_is_enabled(tmp_path: Path) -> None:
    def service(**clustering: bool) -> CoordinatorService:
        return CoordinatorService(config_from_mapping({
            "name": "t", "kafka": {"topics": ["d"]},
            "table": {"base_path": str(tmp_path / "table"), "schema": "id STRING"},
            "maintenance": {"clustering": clustering}}))

    refused = service().clustering_refused()  # the default: off
    assert refused is not None and "maintenance.clustering.enabled: true" in refused
    assert service(enabled=True).clustering_refused() is None


def test_upsert_mode_refuses_clustering_naming_the_write_mode(tmp_path: Path) -> None:
    """In upsert mode clustering can never be on (``config check`` refuses it), so the 409
    names ``table.write_mode`` instead of asking for a key that would be refused."""

    class Leading(CoordinatorService):
        is_leader = True  # type: ignore[assignment]  # leads without Kafka: only the route runs

    service = Leading(config_from_mapping({
        "name": "t", "kafka": {"topics": ["d"]},
        "table": {"base_path": str(tmp_path / "table"), "schema": "id STRING",
                  "write_mode": "upsert", "record_key_field": "id"}}, environ={}))
    refused = service.clustering_refused()
    assert refused is not None and "table.write_mode: upsert" in refused
    assert "maintenance.clustering.enabled" not in refused
    app = FastAPI()
    app.include_router(build_maintenance_router(service))
    response = TestClient(app).post("/maintenance/clustering")
    assert response.status_code == 409 and response.json()["detail"] == refused
