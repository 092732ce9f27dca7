"""The coordinator's phase carries the open transaction, and its timers read an injected clock.

``PhaseMachine``: an open phase (STARTED, ENDED, COMMITTING, ABORTING) always holds its
``CommitState``, a closed one never does, transitions follow the table. The driver: with a
clock of the test's own, an instant ends exactly when ``transaction.interval_ms`` has passed
on that clock and a write-status timeout fires exactly at its deadline — no sleeps. Real
table on local disk; the control topic is a list of what was sent."""

from __future__ import annotations

import asyncio

import pytest
from test_committer_fencing import Env
from test_maintenance import env as env  # the fixture

from hudi_sink.services.coordinator.commit_state import CommitState
from hudi_sink.services.coordinator.committer import RecoveryReport
from hudi_sink.services.coordinator.phase import Closed, Open, PhaseMachine
from hudi_sink.services.coordinator.transaction import DriverContext, Outgoing, TransactionDriver
from hudi_sink.shared.config.settings import load_config
from hudi_sink.shared.errors import IllegalTransition
from hudi_sink.shared.kafka.partition_key import PartitionKey
from hudi_sink.shared.kafka.protocol import (
    Envelope,
    MessageType,
    ParticipantReady,
    Role,
    Sender,
    TopicPartition,
)
from hudi_sink.shared.runtime.metrics import Metrics
from hudi_sink.shared.runtime.states import CoordinatorPhase

C = CoordinatorPhase
T = "20250101000000001"


def _txn(instant: str = T) -> CommitState:
    return CommitState(instant=instant, epoch=1, expected=frozenset(), start_offsets={},
                       started_at=0.0)


def _idle() -> PhaseMachine:
    phase = PhaseMachine()
    phase.close(C.RECOVERING, "elected")
    phase.close(C.IDLE, "epoch 1")
    return phase


def test_open_phases_carry_their_transaction_and_closed_ones_drop_it() -> None:
    phase = _idle()
    assert phase.now == Closed(C.IDLE) and phase.txn is None
    txn = _txn()
    phase.open(txn)
    assert phase.now == Open(C.STARTED, txn)
    assert phase.advance(C.ENDED) is txn and phase.advance(C.COMMITTING) is txn
    assert phase.now == Open(C.COMMITTING, txn) and phase.txn is txn
    phase.close(C.IDLE, f"committed {T}")
    assert phase.now == Closed(C.IDLE) and phase.txn is None


def test_a_transaction_cannot_be_advanced_when_none_is_open_nor_left_in_a_closed_phase() -> None:
    phase = _idle()
    with pytest.raises(IllegalTransition, match="no open transaction"):
        phase.advance(C.ABORTING)
    phase.open(_txn())
    with pytest.raises(IllegalTransition):  # IDLE holds no transaction: close, not advance
        phase.advance(C.IDLE)
    with pytest.raises(IllegalTransition):  # STARTED → COMMITTING skips END: not in the table
        phase.advance(C.COMMITTING)
    with pytest.raises(IllegalTransition):
        phase.close(C.ENDED, "an open phase needs its transaction")
    assert phase.now.name is C.STARTED and phase.txn is not None
    with pytest.raises(IllegalTransition):
        Open(C.IDLE, _txn())
    with pytest.raises(IllegalTransition):
        Closed(C.STARTED)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _driver(env: Env, clock: Clock, sent: list[tuple[MessageType, str]]) -> TransactionDriver:
    committer = env.committer("a")

    async def send(payload: Outgoing, instant: str, _epoch: int) -> None:
        sent.append((payload.type, instant))

    async def expected() -> frozenset[PartitionKey]:
        return frozenset({("d", 0)})

    config = load_config(None, environ={}, overrides={
        "kafka": {"topics": ["d"]},
        "transaction": {"interval_ms": 10_000, "write_status_timeout_ms": 30_000,
                        "resend_interval_ms": 5_000}})
    driver = TransactionDriver(DriverContext(
        config=config, schema=env.schema, table=env.table(), committer=committer,
        metrics=Metrics("unit"), channel_send=send, expected_partitions=expected, clock=clock))
    driver.begin_recovery()
    driver.take_over(committer.epoch, RecoveryReport(), {}, None)
    return driver


def test_the_driver_times_its_transactions_on_the_injected_clock(env: Env) -> None:
    clock, sent = Clock(), []
    driver = _driver(env, clock, sent)

    async def scenario() -> str:
        await driver.step()  # IDLE → STARTED at 1000
        state = driver.current
        assert state is not None and state.started_at == 1000.0
        member = Sender(role=Role.PARTICIPANT, id="m1")
        ready = ParticipantReady(partitions=[TopicPartition(topic="d", partition=0)])
        envelope = Envelope.wrap(ready, sink="t", sender=member, commit_time=None, epoch=0)
        replies = driver.receive(envelope)  # it joins the open instant: START, for that instant
        assert [(p.type, i) for p, i in replies] == [(MessageType.START_COMMIT, state.instant)]
        clock.now = 1009.999
        await driver.step()
        assert driver.phase.state is C.STARTED, "the interval has not passed on the clock"
        clock.now = 1010.0
        await driver.step()
        assert driver.phase.state is C.ENDED and state.ended_at == 1010.0
        clock.now = 1039.999
        await driver.step()  # END re-sent (5 s since the last)
        assert driver.phase.state is C.ENDED, "the write-status deadline has not passed"
        clock.now = 1040.0  # deadline: nobody answered, m1 last heard of 40 s ago: abort
        await driver.step()
        assert driver.phase.state is C.IDLE and driver.current is None
        view = driver.history.get(state.instant)
        assert view is not None and view.state == "aborted" and view.duration_s == 40.0
        return state.instant

    instant = asyncio.run(scenario())
    assert [kind for kind, _ in sent] == [MessageType.START_COMMIT, MessageType.END_COMMIT,
                                          MessageType.END_COMMIT]
    assert {for_instant for _, for_instant in sent} == {instant}
