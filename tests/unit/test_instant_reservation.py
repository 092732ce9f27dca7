"""Review finding 5: ingestion and maintenance reserve instant times through one function
before their first await, so they never pick the same time; a maintenance decision for an
instant that already has one is refused."""

from __future__ import annotations

import asyncio
import threading

import pytest
from eventually import eventually_async
from test_committer_fencing import Env
from test_maintenance import T, _commit_small_files
from test_maintenance import env as env  # the fixture

from hudi_sink.services.coordinator.committer import RecoveryReport
from hudi_sink.services.coordinator.instants import open_ingestion_below, reserve_instant
from hudi_sink.services.coordinator.transaction import DriverContext, TransactionDriver
from hudi_sink.shared.config.settings import load_config
from hudi_sink.shared.errors import TableFormatError
from hudi_sink.shared.runtime.metrics import Metrics


def _driver(env: Env) -> TransactionDriver:
    committer = env.committer("a")

    async def send(*_args: object, **_kwargs: object) -> None:
        return None

    async def expected() -> list[object]:
        return []

    context = DriverContext(config=load_config(None, environ={}), schema=env.schema,
                            table=env.table(), committer=committer, metrics=Metrics("unit"),
                            channel_send=send, expected_partitions=expected)  # type: ignore[arg-type]
    driver = TransactionDriver(context)
    driver.begin_recovery()
    driver.take_over(committer.epoch, RecoveryReport(), {}, None)
    return driver


def test_ingestion_reserves_its_instant_before_awaiting(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    driver = _driver(env)
    committer = driver._committer
    release = threading.Event()
    real = committer.abort_foreign

    def slow_abort_foreign(current: str | None) -> list[str]:
        release.wait(10)
        return real(current)

    monkeypatch.setattr(committer, "abort_foreign", slow_abort_foreign)

    async def scenario() -> tuple[str, str]:
        task = asyncio.create_task(driver._start_transaction())
        # ingestion picked T and now awaits the table
        await eventually_async(lambda: driver.starting is not None, 10, "ingestion to reserve T")
        ingestion = driver.starting
        maintenance = reserve_instant(driver)  # what the maintenance routine does meanwhile
        assert open_ingestion_below(driver, maintenance) == ingestion
        release.set()
        await task
        return ingestion, maintenance

    ingestion, maintenance = asyncio.run(scenario())
    assert ingestion < maintenance
    assert driver.current is not None and driver.current.instant == ingestion
    assert driver.starting is None and driver.latest_instant == maintenance
    assert open_ingestion_below(driver, maintenance) == ingestion
    assert open_ingestion_below(driver, ingestion) is None


def test_a_second_decision_for_an_instant_is_refused(env: Env) -> None:
    committer = env.committer("a")
    _commit_small_files(env, committer, T[:1])
    with pytest.raises(TableFormatError):
        committer.decide(T[0], "clean", {"partitionToWriteStats": {}}, [], lambda: None)
    committer.decide(T[1], "clean", {"partitionToWriteStats": {}}, [], lambda: None)
    with pytest.raises(TableFormatError):
        committer.decide(T[1], "archive", {"partitionToWriteStats": {}}, [], lambda: None)


def test_a_new_leadership_forgets_a_reservation_left_by_a_failed_start(env: Env) -> None:
    driver = _driver(env)
    driver.starting = reserve_instant(driver)  # a start that failed before the instant opened
    driver.stand_by("lost the lease")
    driver.begin_recovery()
    driver.take_over(driver._committer.epoch, RecoveryReport(), {}, driver.latest_instant)
    assert driver.starting is None
    assert open_ingestion_below(driver, reserve_instant(driver)) is None
