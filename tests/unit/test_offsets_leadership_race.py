"""Review finding: a POST /offsets whose Kafka await spans a loss of leadership must be
refused (409), and a change pending when a new leadership begins is never applied by it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_committer_fencing import Env
from test_maintenance import env as env  # the fixture
from test_offset_requests import _change, _driver, _latest_offsets

from hudi_sink.services.coordinator.committer import RecoveryReport
from hudi_sink.services.coordinator.service import CoordinatorService
from hudi_sink.shared.config.settings import config_from_mapping
from hudi_sink.shared.errors import HudiSinkError
from hudi_sink.shared.runtime.states import CoordinatorPhase

LATER = {("orders", 0): 5000, ("orders", 1): 4000}
"""What another leader committed meanwhile."""


def test_a_request_landing_after_stand_by_is_refused(env: Env, tmp_path: Path) -> None:
    sent: list[tuple[Any, str]] = []
    driver = _driver(env, sent)
    service = CoordinatorService(config_from_mapping({
        "name": "t", "kafka": {"topics": ["orders"]},
        "table": {"base_path": str(tmp_path / "x"), "schema": "id STRING"},
        "admin": {"token": "t" * 20}}, environ={}))

    class Parts:  # what request_offsets touches
        pass

    class Admin:
        async def partition_counts(self, topics: list[str]) -> dict[str, int]:
            driver.stand_by("lost group leadership")  # Kafka was slow; we stepped down
            return {"orders": 2}

    class Clients:
        admin = Admin()

    parts = Parts()
    parts.driver = driver  # type: ignore[attr-defined]
    service._parts = parts  # type: ignore[assignment]
    service._running = Clients()  # type: ignore[assignment]
    assert service.is_leader
    with pytest.raises(HudiSinkError, match="stopped leading"):  # 409 at REST
        asyncio.run(service.request_offsets({"orders:0": 101}, "skip poison"))
    assert driver.phase.state is CoordinatorPhase.STANDBY and driver.offsets.pending is None


def test_a_change_pending_when_a_new_leadership_begins_is_dropped(env: Env) -> None:
    sent: list[tuple[Any, str]] = []
    driver = _driver(env, sent)
    driver.stand_by("lost group leadership")
    driver.offsets.submit(_change())  # as a request racing the stand_by used to
    driver.begin_recovery()  # hours later we lead again
    driver.take_over(driver._committer.epoch, RecoveryReport(), dict(LATER), None)
    asyncio.run(driver.step())
    assert driver.offsets.pending is None and driver.offsets.last is not None
    assert driver.offsets.last["state"] == "dropped"
    assert _latest_offsets(env) == {}  # no commit rewound anything


def test_a_change_of_another_epoch_is_dropped_not_applied(env: Env) -> None:
    sent: list[tuple[Any, str]] = []
    driver = _driver(env, sent)
    driver.offsets.submit(_change())
    driver.offsets._epoch = driver._committer.epoch - 1  # as if accepted by a past leadership
    asyncio.run(driver.step())
    assert driver.offsets.last is not None and driver.offsets.last["state"] == "dropped"
    assert _latest_offsets(env) == {}  # nothing committed by the change
