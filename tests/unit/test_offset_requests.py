"""POST /offsets on the leader, without Kafka: the change is carried out at an instant boundary
as a fenced commit of its own, the next START carries the new offsets, a crash after the
decision is rolled forward once, a fenced leader changes nothing, and a request never
outlives its leadership."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from test_committer_fencing import Env
from test_maintenance import env as env  # the fixture

from hudi_sink.services.coordinator.committer import RecoveryReport, TableCommitter
from hudi_sink.services.coordinator.history import view_of_commit
from hudi_sink.services.coordinator.transaction import DriverContext, TransactionDriver
from hudi_sink.shared.config.settings import load_config
from hudi_sink.shared.errors import FencedError, HudiSinkError
from hudi_sink.shared.hudi.offset_change import REASON_KEY, REQUEST_KEY, OffsetChange
from hudi_sink.shared.hudi.offsets import offsets_from_metadata, offsets_metadata
from hudi_sink.shared.hudi.sink_log import SinkLog
from hudi_sink.shared.hudi.sink_log_state import EntryKind
from hudi_sink.shared.hudi.write_stats import build_commit_metadata
from hudi_sink.shared.kafka.protocol import StartCommit
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.runtime.states import CoordinatorPhase
from hudi_sink.shared.schema.evolution import DDL_KEY

COMMITTED = {("orders", 0): 100, ("orders", 1): 50}


def _driver(env: Env, sent: list[tuple[Any, str]], name: str = "a") -> TransactionDriver:
    committer = env.committer(name)

    async def send(payload: Any, instant: str, _epoch: int) -> None:
        sent.append((payload, instant))

    async def expected() -> frozenset[tuple[str, int]]:
        return frozenset(COMMITTED)

    context = DriverContext(config=load_config(None, environ={}), schema=env.schema,
                            table=env.table(), committer=committer, metrics=Metrics("unit"),
                            channel_send=send, expected_partitions=expected)
    driver = TransactionDriver(context)
    driver.begin_recovery()
    driver.take_over(committer.epoch, RecoveryReport(), dict(COMMITTED), None)
    return driver


def _change(offset: int = 101, request_id: str = "r1") -> OffsetChange:
    return OffsetChange({("orders", 0): offset}, "skip the poison record", "rest", request_id)


def _latest_offsets(env: Env) -> dict[tuple[str, int], int]:
    metadata = env.table().latest_commit_metadata()
    return {} if metadata is None else offsets_from_metadata(metadata["extraMetadata"], ["orders"])


def test_the_change_is_a_fenced_commit_at_the_boundary_and_the_next_start_carries_it(env: Env) -> None:
    sent: list[tuple[Any, str]] = []
    driver = _driver(env, sent)
    driver.offsets.submit(_change())
    asyncio.run(driver.step())  # IDLE: the boundary, the change first, no instant started
    [instant] = env.table().completed_commits()
    assert not sent and driver.phase.state is CoordinatorPhase.IDLE
    assert _latest_offsets(env) == {("orders", 0): 101, ("orders", 1): 50}
    metadata = env.table().read_commit_metadata(instant)
    extra = metadata["extraMetadata"]
    assert extra[REASON_KEY] == "skip the poison record" and extra[REQUEST_KEY] == "r1"
    view = view_of_commit(instant, metadata, ["orders"])  # GET /transactions' audit entry
    assert view.reason == "offsets set (rest): skip the poison record" and view.files == 0
    decision = SinkLog(env.table().fs, str(env.base)).read_state().decisions[instant]
    assert decision.kind is EntryKind.COMMIT and decision.epoch == driver._committer.epoch
    assert driver.offsets.pending is None and driver.offsets.last is not None
    assert driver.offsets.last["state"] == "applied" and driver.offsets.last["commit_time"] == instant

    asyncio.run(driver.step())  # the next instant starts from the new offsets
    [(start, started)] = sent
    assert isinstance(start, StartCommit) and started > instant
    assert {(o.topic, o.partition): o.offset for o in start.offsets} == {
        ("orders", 0): 101, ("orders", 1): 50}


def test_a_second_request_waits_for_the_first(env: Env) -> None:
    driver = _driver(env, [])
    driver.offsets.submit(_change())
    with pytest.raises(HudiSinkError, match="still pending"):
        driver.offsets.submit(_change(5, "r2"))


def test_a_change_asked_for_during_an_instant_waits_for_its_end(env: Env) -> None:
    sent: list[tuple[Any, str]] = []
    driver = _driver(env, sent)
    asyncio.run(driver.step())  # an instant opens
    assert driver.phase.state is CoordinatorPhase.STARTED
    driver.offsets.submit(_change())
    asyncio.run(driver.step())  # still open: nothing is committed under it
    assert env.table().completed_commits() == []
    assert driver.offsets.pending is not None


def test_a_fenced_leader_changes_nothing(env: Env) -> None:
    driver = _driver(env, [])
    env.committer("b")  # a newer leader claims an epoch
    driver.offsets.submit(_change())
    with pytest.raises(FencedError):
        asyncio.run(driver.step())
    assert env.table().completed_commits() == []
    driver.stand_by("fenced")  # what the leadership loop does next
    assert driver.offsets.pending is None
    assert driver.offsets.last is not None and driver.offsets.last["state"] == "dropped"
    report = env.committer("c").recover()  # the next leader rolls the pending instant back
    assert len(report.rolled_back) == 1 and env.table().completed_commits() == []


def test_a_crash_after_the_decision_applies_the_change_exactly_once(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    driver = _driver(env, [])
    committer: TableCommitter = driver._committer

    def crash(*_args: object) -> None:
        raise OSError("process died after the COMMIT entry")

    monkeypatch.setattr(committer._table, "complete_instant", crash)
    driver.offsets.submit(_change())
    with pytest.raises(OSError):
        asyncio.run(driver.step())
    assert env.table().completed_commits() == []  # decided, not yet visible
    driver.stand_by("error")  # the request ends with the leadership: never applied again
    assert driver.offsets.pending is None

    report = env.committer("b").recover()
    [instant] = env.table().completed_commits()
    assert report.rolled_forward == [instant]
    assert _latest_offsets(env) == {("orders", 0): 101, ("orders", 1): 50}
    assert env.committer("c").recover().rolled_forward == []  # once
    assert env.table().completed_commits() == [instant]


def test_the_change_keeps_the_tables_evolved_schema(env: Env) -> None:
    """The latest commit is what a leader adopts the table's schema from (schema evolution):
    an offset change must not make it fall back to the config's."""
    evolved = "id STRING, ts TIMESTAMP, country STRING, amount DOUBLE, payload STRING, coupon STRING"
    table = env.table()
    table.start_instant("20240101000000000")
    table.complete_instant("20240101000000000", build_commit_metadata([], {
        "schema": "{}", **offsets_metadata(COMMITTED, ["orders"]), DDL_KEY: evolved}))
    driver = _driver(env, [])
    driver.offsets.submit(_change())
    asyncio.run(driver.step())
    extra = table.latest_commit_metadata()["extraMetadata"]  # type: ignore[index]
    assert extra[REASON_KEY] == "skip the poison record" and extra[DDL_KEY] == evolved
    driver.schemas.adopt(extra)
    assert driver.schemas.ddl == evolved
