"""Secure-by-default admin surface: without ``admin.token`` no request that changes the sink is
accepted (403 naming ``admin.token`` and ``admin.allow_unauthenticated``) unless the config
allows it; with a token every service route needs it. Exercised on the real routers of all
three services, in process (no broker: a refused request never reaches the service)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any
from unittest import mock

import httpx
import pytest
from fastapi import APIRouter
from fastapi.routing import APIRoute

from hudi_sink.services.coordinator.rest import build_router as coordinator_router
from hudi_sink.services.coordinator.views import CurrentTransaction, TransactionView
from hudi_sink.services.deleter.rest import build_router as deleter_router
from hudi_sink.services.participant.rest import build_router as participant_router
from hudi_sink.services.participant.views import PartitionView
from hudi_sink.shared.config.settings import config_from_mapping
from hudi_sink.shared.runtime.admin import READ_ONLY_METHODS, create_admin_app
from hudi_sink.shared.runtime.metrics import Metrics

TOKEN = "unit-s3cret"
PROBES = ("/health", "/ready", "/metrics")


class StandbyCoordinator:
    """Enough of the coordinator for its routes: a standby, so a POST that gets through the
    auth check answers 409 naming the leader (proof the handler ran) without side effects;
    ``leader=True``: POSTs run the command (202) and are recorded in ``commands``."""

    def __init__(self, leader: bool = False) -> None:
        self.is_leader = leader
        self.commands: list[str] = []

    def leader_info(self) -> dict[str, Any]:
        return {"admin_url": "http://leader:8080"}

    def current_transaction(self) -> CurrentTransaction:
        return CurrentTransaction(role="standby", phase="standby", commit_time=None, epoch=1,
                                  partitions_expected=0,
                                  partitions_answered=[], partitions_pending=[], age_s=None,
                                  leader=self.leader_info())

    def inflight_view(self) -> TransactionView | None:
        return None

    def transaction_views(self, limit: int) -> list[TransactionView]:
        return []

    def request_commit(self) -> str | None:
        self.commands.append("commit")
        return None

    def request_abort(self) -> str | None:
        self.commands.append("abort")
        return None


class NoPartitions:
    def partition_views(self) -> list[PartitionView]:
        return []


def _routers(deleter: Any = None) -> list[APIRouter]:
    return [coordinator_router(StandbyCoordinator()), participant_router(NoPartitions()),
            deleter_router(deleter if deleter is not None else mock.Mock())]


class Client:
    """A synchronous face over the ASGI app (the calls are short; no server, no threads)."""

    def __init__(self, token: str | None, allow_unauthenticated: bool,
                 routers: list[APIRouter] | None) -> None:
        self.app = create_admin_app("unit", readiness=list, metrics=Metrics("unit"), token=token,
                                    routers=routers if routers is not None else _routers(),
                                    allow_unauthenticated=allow_unauthenticated)

    def request(self, method: str, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
        async def call() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://admin") as http:
                return await http.request(method, path, headers=headers)

        return asyncio.run(call())

    def get(self, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
        return self.request("GET", path, headers)

    def post(self, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
        return self.request("POST", path, headers)


def _client(token: str | None, allow_unauthenticated: bool = False,
            routers: list[APIRouter] | None = None) -> Client:
    return Client(token, allow_unauthenticated, routers)


def _mutating_routes() -> Iterator[tuple[str, str]]:
    """Every (method, path) of the three services that is not read-only: a route added later
    is covered without touching this test."""
    for router in _routers():
        for route in router.routes:
            assert isinstance(route, APIRoute)
            for method in sorted(route.methods - READ_ONLY_METHODS):
                yield method, route.path


MUTATING = sorted(set(_mutating_routes()))


def test_the_services_have_the_mutating_routes_the_readme_lists() -> None:
    assert MUTATING == [("POST", "/deletions/dlq/replay"), ("POST", "/deletions/reconcile"),
                        ("POST", "/transactions/abort"), ("POST", "/transactions/commit")]


@pytest.mark.parametrize(("method", "path"), MUTATING)
def test_no_token_refuses_every_mutation_naming_the_keys(method: str, path: str) -> None:
    deleter = mock.Mock()
    client = _client(None, routers=_routers(deleter))
    response = client.request(method, path)
    assert response.status_code == 403
    detail = response.json()["detail"]
    assert "admin.token" in detail and "admin.allow_unauthenticated" in detail
    assert deleter.mock_calls == []  # refused before the handler ran


def test_no_token_refuses_with_any_authorization_header_too() -> None:
    """Without a configured token there is nothing to match: a guessed header changes nothing."""
    client = _client(None)
    for header in ("Bearer anything", "Bearer ", "Basic dXNlcjpwYXNz"):
        response = client.post("/transactions/abort", headers={"Authorization": header})
        assert response.status_code == 403


def test_no_token_keeps_reads_and_probes_open() -> None:
    client = _client(None)
    assert client.get("/partitions").json() == []
    assert client.get("/transactions").json() == []
    assert client.get("/transactions/current").status_code == 200
    for probe in PROBES:
        assert client.get(probe).status_code == 200


def test_allow_unauthenticated_lets_mutations_through() -> None:
    coordinator = StandbyCoordinator()
    client = _client(None, allow_unauthenticated=True, routers=[coordinator_router(coordinator)])
    response = client.post("/transactions/commit")
    assert response.status_code == 409  # the handler ran: a standby names its leader
    assert "leader" in response.json()["detail"]


def test_token_is_required_for_every_route_and_accepted() -> None:
    client = _client(TOKEN)
    for method, path in [*MUTATING, ("GET", "/transactions"), ("GET", "/partitions")]:
        assert client.request(method, path).status_code == 401
        wrong = client.request(method, path, headers={"Authorization": "Bearer wrong"})
        assert wrong.status_code == 403
    good = {"Authorization": f"Bearer {TOKEN}"}
    assert client.post("/transactions/abort", headers=good).status_code == 409  # handler ran
    assert client.get("/partitions", headers=good).json() == []
    for probe in PROBES:
        assert client.get(probe).status_code == 200


def test_a_token_wins_over_allow_unauthenticated() -> None:
    client = _client(TOKEN, allow_unauthenticated=True)
    assert client.post("/transactions/commit").status_code == 401
    assert client.post("/transactions/commit",
                       headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 409


def test_config_defaults_are_secure_and_an_empty_token_is_refused() -> None:
    config = config_from_mapping({}, environ={})
    assert config.admin.token is None and config.admin.allow_unauthenticated is False
    allowed = config_from_mapping({"admin": {"allow_unauthenticated": True}}, environ={})
    assert allowed.admin.allow_unauthenticated is True
    from hudi_sink.shared.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        config_from_mapping({}, environ={"HUDI_SINK__ADMIN__TOKEN": ""})
    assert info.value.key == "admin.token"


def test_dev_allows_unauthenticated_unless_its_config_says_otherwise() -> None:
    from hudi_sink.cli.dev import DEFAULT_DEV_CONFIG, dev_admin

    built_in = config_from_mapping({**DEFAULT_DEV_CONFIG,
                                    "admin": dev_admin(DEFAULT_DEV_CONFIG["admin"])}, environ={})
    assert built_in.admin.allow_unauthenticated is True and built_in.admin.host == "127.0.0.1"
    assert dev_admin(None) == {"host": "127.0.0.1", "allow_unauthenticated": True}
    assert dev_admin({"allow_unauthenticated": False})["allow_unauthenticated"] is False
    assert dev_admin({"token": TOKEN}) == {"host": "127.0.0.1", "allow_unauthenticated": True,
                                           "token": TOKEN}
    assert dev_admin({"host": "0.0.0.0"})["host"] == "0.0.0.0"  # a config that names one
